"""Certificates of split proofs as self-contained JSON files, re-checked without a catalog.

A split proof (`puzzlesweep.proof`) leaves its evidence in the catalog: one row per part
and a combined row. `export` gathers that evidence into one JSON document that anyone
can audit with this module alone (`check`), and `write` / `load` keep it in a file
(`puzzlesweep prove ... --certificate FILE`; the files under `certificates/` are such
documents). The document (format `FORMAT`):

    format, puzzlesweep_version, written_at
    family, params, split, width, solver, key     the attempt (`proof.Proof`)
    description, parts_total_before_symmetry, symmetries
    claim     {status, objective, bound, solution}: the combined result; solution is
              the family's encoding of the best solution found
    probe     {status, objective, bound} of the direct solve, or null
    parts     one per part of the split: {index, label, counts, fixings, status,
              objective, bound, cutoff, lower, solver_version, seconds, nodes}

What `check` re-derives from the document alone: the split, from (family, params, split,
width) by the family's own `split_model`, must list exactly the parts of the document
(labels, counts, fixings) and cover every case up to its symmetries
(`solvers.split.covers`); each part's lower limit must follow from its status, dual
bound and cutoff (`solvers.split.part_lower`); the claimed bound must be no more than
the least lower limit (raised to the probe's bound), and an `optimal` claim needs that
bound to reach its objective and its bound to equal it, an `infeasible` claim needs
every part infeasible without a cutoff, and nothing proven may exceed the objective of
the claimed solution; the solution must verify with the claimed objective by the
family's verifier (independent of the MIP). `load` first checks every field's type
(statuses from `solvers.STATUSES`, JSON numbers that are finite and at most 1e15). With
`resolve_seconds`, each part that claims a lower limit is solved again under its cutoff,
and a re-solve that finishes below the claimed limit is a problem.

Taken on trust without `resolve_seconds`: the engine's statuses and dual bounds of the
parts; always: the probe's dual bound (used only where the parts alone fall short),
and that the family's symmetries preserve its feasible set (tests/test_prove.py checks
it for no_k_in_row; a `tree:` split uses no symmetry; a `lex:` one re-derives its
leader rows from the params and checks that each symmetry maps the model onto itself,
`solvers.symmetry.preserves`).
"""

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from puzzlesweep import __version__, puzzles
from puzzlesweep.core import BadInput
from puzzlesweep.proof import Proof, build, json_number, number, stored
from puzzlesweep.solve import mip_engine, verified_fields
from puzzlesweep.solvers import STATUSES, Limits
from puzzlesweep.solvers import split as splitting

FORMAT = "puzzlesweep-certificate/1"

#: A number of a certificate: a JSON number (not a string, not a boolean), finite and of a
#: size an objective or bound can have; "inf" / "-inf" where a limit may be infinite.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-1e15, le=1e15)]
Limit = Number | Literal["inf", "-inf"]
Status = Literal[STATUSES]


class _Entry(BaseModel):
    """The fields of a certificate that `check` reads (others are kept, not read)."""

    model_config = ConfigDict(extra="allow")


class _Claim(_Entry):
    status: Status
    objective: Number | None
    bound: Number | None
    solution: StrictStr | None


class _Probe(_Entry):
    status: Status | None = None
    objective: Number | None = None
    bound: Number | None = None


class _Part(_Entry):
    index: StrictInt
    label: StrictStr
    counts: list[list[StrictInt]]
    fixings: list[list[StrictInt]]
    status: Status | None
    bound: Number | None
    cutoff: Number | None
    lower: Limit


class _Document(_Entry):
    format: Literal[FORMAT]
    family: StrictStr
    params: dict
    split: StrictStr
    width: StrictInt
    solver: StrictStr
    key: StrictStr
    claim: _Claim
    probe: _Probe | None = None
    parts: list[_Part]


def _rounded(seconds: float | None) -> float | None:
    """Seconds to the millisecond (a certificate's times are for reading, not checking)."""
    return None if seconds is None else round(seconds, 3)


def export(catalog_path: str, proof: Proof) -> dict:
    """The certificate document of attempt `proof` from the catalog at `catalog_path`
    (its newest part rows, probe and combined row; module docstring). Raises BadInput
    when the catalog holds no combined row of the attempt."""
    _, _, split, description = build(proof)
    parts, probe, combined = stored(catalog_path, proof)
    if combined is None:
        raise BadInput(f"no combined row of attempt {proof.key} in {catalog_path}: prove it first")
    cert = json.loads(combined["certificate"])
    listed = []
    for p in split.parts:
        row = parts.get(p.index)
        handle = json.loads(row["subproblem"]) if row else {}
        listed.append(
            {
                "index": p.index,
                "label": p.label,
                "counts": [list(c) for c in p.counts],
                "fixings": [[c, int(v)] for c, v in p.fixings],  # the format's integers
                "status": row["status"] if row else None,
                "objective": row["objective"] if row else None,
                "bound": row["bound"] if row else None,
                "cutoff": handle.get("cutoff"),
                "lower": handle.get("lower", "-inf"),
                "solver_version": row["solver_version"] if row else None,
                "seconds": _rounded(row["solve_seconds"]) if row else None,
                "nodes": row["nodes"] if row else None,
            }
        )
    return {
        "format": FORMAT,
        "puzzlesweep_version": __version__,
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "family": proof.family,
        "params": proof.instance.params.model_dump(),
        "split": proof.split,
        "width": proof.width,
        "solver": proof.solver,
        "key": proof.key,
        "description": description,
        "parts_total_before_symmetry": cert["parts_total_before_symmetry"],
        "symmetries": cert["symmetries"],
        "claim": {k: combined[k] for k in ("status", "objective", "bound", "solution")},
        "probe": {k: probe[k] for k in ("status", "objective", "bound")} if probe else None,
        "parts": listed,
    }


def write(path: str | Path, document: dict) -> None:
    """Write `document` to `path` as indented JSON (one part per line, so a diff of two
    certificates reads part by part). Raises OSError when it cannot be written."""
    parts = ",\n".join("    " + json.dumps(p, separators=(",", ":")) for p in document["parts"])
    head = json.dumps({k: v for k, v in document.items() if k != "parts"}, indent=2)
    Path(path).write_text(f'{head[:-2]},\n  "parts": [\n{parts}\n  ]\n}}\n')


def _where(loc: tuple) -> str:
    """A pydantic error location as a field path: ("parts", 0, "bound") -> parts[0].bound
    (a union's branch names, such as "float", are left out)."""
    path = ""
    for step in loc:
        if isinstance(step, int):
            path += f"[{step}]"
        elif step in _Document.model_fields or any(
            step in m.model_fields for m in (_Claim, _Probe, _Part)
        ):
            path += f".{step}" if path else step
    return path


def load(path: str | Path) -> dict:
    """The certificate document in the file `path`. Raises BadInput when the file is
    missing or unreadable, is not JSON, is not of format `FORMAT`, or a field is missing
    or of the wrong type (a status outside `STATUSES`, a number that is a string, not
    finite or beyond 1e15), naming the field."""
    try:
        document = json.loads(Path(path).read_text())
    except OSError as exc:
        raise BadInput(f"certificate {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BadInput(f"certificate {path} is not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BadInput(f"certificate {path} is not a {FORMAT} document")
    try:
        _Document.model_validate(document)
    except ValidationError as exc:
        errors = exc.errors()
        missing = [_where(e["loc"]) for e in errors if e["type"] == "missing"]
        if missing:
            raise BadInput(f"certificate {path} lacks {', '.join(missing)}") from None
        wrong = [f"{_where(e['loc'])}: {e['msg']}" for e in errors[:3]]
        raise BadInput(f"certificate {path}: {'; '.join(wrong)}") from None
    return document


def proof_of(document: dict, limits: Limits | None = None, solver: str | None = None) -> Proof:
    """The attempt a certificate document is about (`limits`: per part when re-solved;
    `solver`: the engine that re-solves, else the document's). Raises BadInput for an
    unknown family, bad parameters or a bad split."""
    try:
        proof = Proof(
            document["family"],
            dict(document["params"]),
            str(document["split"]),
            int(document["width"]),
            limits or Limits(60.0),
            solver=solver or str(document["solver"]),
        )
        proof.instance  # noqa: B018 (validates the parameters)
    except (KeyError, TypeError, ValueError) as exc:  # pydantic's errors are ValueErrors
        raise BadInput(
            f"the certificate's instance ({document['family']} and its params) or split is "
            f"not valid: {exc}"
        ) from None
    return proof


def check(
    document: dict, resolve_seconds: float | None = None, solver: str | None = None
) -> list[str]:
    """The problems of a certificate document (empty: it holds); see the module
    docstring for what is re-derived and what is trusted. With `resolve_seconds`, each
    part is re-solved by `solver` (default: the document's engine). Raises BadInput as
    `proof_of` does."""
    proof = proof_of(document, solver=solver)
    _, model, split, _ = build(proof)  # BadInput for a bad split or engine
    problems = []
    if document["key"] != proof.key:
        problems.append(f"key {document['key']} is not the key {proof.key} of this attempt")
    problems += _split_problems(split, document["parts"])
    integral = splitting.integral_objective(model)
    lowers = []
    for part, claimed in zip(split.parts, document["parts"], strict=False):
        try:
            lower = splitting.part_lower(
                claimed["status"] or "error", claimed["bound"], claimed["cutoff"], integral
            )
            stated = number(claimed["lower"])
        except (TypeError, ValueError) as exc:  # a number that is not one
            lowers.append(-math.inf)
            problems.append(f"part {part.index} ({part.label}): not a number: {exc}")
            continue
        lowers.append(lower)
        if lower != stated:
            problems.append(
                f"part {part.index} ({part.label}): lower limit {claimed['lower']} claimed, "
                f"{json_number(lower)} follows from its status {claimed['status']}, "
                f"bound {claimed['bound']} and cutoff {claimed['cutoff']}"
            )
        elif resolve_seconds and lower > -math.inf:
            problems += _resolve(proof, model, split, part, claimed, resolve_seconds, integral)
    problems += _claim_problems(document, lowers[: len(split.parts)])
    return problems + _solution_problems(proof, document["claim"])


def _split_problems(split: splitting.Split, listed: list[dict]) -> list[str]:
    """Whether the document lists the very parts the split gives (labels, counts and
    fixings, in order) and whether they cover every case up to the symmetries."""
    problems = []
    expected = [
        (p.label, [list(c) for c in p.counts], [list(f) for f in p.fixings]) for p in split.parts
    ]
    for i, part in enumerate(listed[: len(expected)]):
        got = (part["label"], part["counts"], [list(f) for f in part["fixings"]])
        if part["index"] != i or got != expected[i]:
            problems.append(f"part {i}: {part['label']!r} is not part {i} of the split")
    if len(listed) != len(expected):
        problems.append(f"{len(listed)} parts listed, the split has {len(expected)}")
    if (why := splitting.covers(split)) is not None:
        problems.append(f"the split does not cover the space: {why}")
    return problems


def _resolve(proof, model, split, part, claimed, seconds, integral) -> list[str]:
    """Solve `part` again for `seconds` under its cutoff: a finished re-solve below the
    claimed lower limit is a problem (the limit would not be true)."""
    again = mip_engine(proof.solver).solve(
        splitting.restrict(model, split, part, claimed["cutoff"]), Limits(seconds)
    )
    true_lower = splitting.part_lower(again.status, again.bound, claimed["cutoff"], integral)
    if again.status in ("optimal", "infeasible") and true_lower < number(claimed["lower"]) - 1e-6:
        return [
            f"part {part.index} ({part.label}): re-solved to {json_number(true_lower)}, "
            f"below the claimed lower limit {claimed['lower']}"
        ]
    return []


def _claim_problems(document: dict, lowers: list[float]) -> list[str]:
    """Whether the claim asks no more than the parts prove (the least lower limit, raised
    to the probe's bound) and says nothing the parts contradict: its bound is at most
    that (and equals its objective when `optimal`), `optimal` needs that bound to reach
    the objective, `infeasible` needs every part infeasible without a cutoff (a limit of
    +inf) and no objective, and no objective lies below what is proven."""
    claim, probe = document["claim"], document.get("probe")
    proven = min(lowers) if lowers else -math.inf
    if probe and probe.get("bound") is not None:
        proven = max(proven, math.ceil(probe["bound"] - 1e-6))
    status, objective, bound = claim["status"], claim["objective"], claim["bound"]
    problems = []
    if status == "infeasible" and (proven != math.inf or objective is not None):
        problems.append(f"infeasible claimed, but the parts prove only {json_number(proven)}")
    if status == "optimal" and (objective is None or proven < objective - 1e-6):
        problems.append(
            f"optimal claimed with objective {objective}, but the parts prove only "
            f"{json_number(proven)}"
        )
    if status == "optimal" and bound is not None and bound != objective:
        problems.append(f"optimal claimed with objective {objective} but bound {bound}")
    if status != "optimal" and bound is not None and bound > proven + 1e-6:
        problems.append(f"bound {bound} claimed, the parts prove {json_number(proven)}")
    if objective is not None and proven > objective + 1e-6:
        problems.append(
            f"the parts and the probe prove {json_number(proven)}, above the objective "
            f"{objective} of the claimed solution: a part's or the probe's limit is false"
        )
    return problems


def _solution_problems(proof: Proof, claim: dict) -> list[str]:
    """Whether the claimed solution decodes and verifies with the claimed objective
    (the family's own verifier); an objective without a solution is a problem."""
    if claim.get("solution") is None:
        return (
            [] if claim.get("objective") is None else ["an objective is claimed without a solution"]
        )
    family = puzzles.get(proof.family)
    try:
        solution = family.decode(claim["solution"])
    except ValueError as exc:
        return [f"the solution does not decode: {exc}"]
    checked = verified_fields(family, proof.instance.params, solution, claim["objective"])
    return [f"the solution does not verify: {checked['error']}"] if checked["error"] else []
