"""Certificates of split proofs as self-contained JSON files, re-checked without a catalog.

A split proof (`puzzlesweep.proof`) leaves its evidence in the catalog: one row per part
and a combined row. `export` gathers that evidence into one JSON document that anyone
can audit with this module alone (`check`), and `write` / `load` keep it in a file
(`puzzlesweep prove ... --certificate FILE`; the files under `certificates/` are such
documents). The document (format `FORMAT`):

    format, puzzlesweep_version, written_at
    family, params, split, width, solver, key     the attempt (`proof.Proof`)
    description, parts_total_before_symmetry, symmetries
    cited     every value the model trusts, with its source (`citation.Cited`):
              {params, value, source}, source {oeis, index, term} (a published
              term), {certificate} (a file in the same folder) or null
    claim     {status, objective, bound, solution}: the combined result; solution is
              the family's encoding of the best solution found
    probe     {status, objective, bound} of the direct solve, or null
    parts     one per part of the split: {index, label, counts, fixings, status,
              objective, bound, cutoff, lower, solver_version, seconds, nodes}

What `check` re-derives from the document alone (docs/prove.md lists it, with what it
takes on trust): the model, from the params and the file's cited values
(`citation.model`, never the family's tables), each value by its source (a published
term against the family's transcription, a cited certificate in the same folder checked
in turn, each file once); the split and that the listed parts are exactly its parts and
cover every case up to its symmetries (`solvers.split.covers`); each part's lower limit
from its status, dual bound and cutoff (`solvers.split.part_lower`), none above the
part's own objective; that the claim asks no more than the parts (and the probe's
bound) prove; that the solution verifies with the claimed objective by the family's
verifier. `load` first checks every field's type (statuses from `core.STATUSES`,
JSON numbers that are finite and at most 1e15). With `resolve_seconds`, every part
that claims a lower limit is solved again (`recheck.resolve_part`): any solution found
inside it below the claim refutes it, whatever the engine's final status.
"""

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from puzzlesweep import citation, puzzles
from puzzlesweep.citation import UnusableCitation
from puzzlesweep.core import STATUSES, VERSION, BadInput
from puzzlesweep.proof import (
    Proof,
    build,
    json_number,
    number,
    stored,
)
from puzzlesweep.recheck import resolve_part, solution_problems
from puzzlesweep.solvers import Limits
from puzzlesweep.solvers import split as splitting
from puzzlesweep.solvers.mip import has_integral_objective

FORMAT = "puzzlesweep-certificate/2"
#: The format before the cited values were listed: refused, naming why.
OLD_FORMAT = "puzzlesweep-certificate/1"

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


class _Cited(_Entry):
    params: dict
    value: Number
    source: dict | None


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
    cited: list[_Cited]
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
    today = [c.to_json() for c in citation.of(proof.family, proof.instance.params)]
    cited = cert.get("cited", today)  # a combined row before cited values: today's
    digest = citation.digest([citation.from_json(c) for c in cited])
    listed = []
    for p in split.parts:
        row = parts.get(p.index)
        handle = json.loads(row["subproblem"]) if row else {}
        if row and handle.get("cited", citation.digest([])) != digest:
            raise BadInput(
                f"part {p.index} ({p.label}) of attempt {proof.key} was solved with other "
                "cited values than its combined row lists (or before they were recorded): "
                "solve it again"
            )
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
        "puzzlesweep_version": VERSION,
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
        "cited": cited,
        "parts": listed,
    }


def write(path: str | Path, document: dict) -> None:
    """Write `document` to `path` as indented JSON (one part per line, so a diff of two
    certificates reads part by part). Raises OSError when it cannot be written."""
    lists = {k: _lines(document[k]) for k in ("cited", "parts") if k in document}
    head = json.dumps({k: v for k, v in document.items() if k not in lists}, indent=2)
    tail = ",\n".join(
        f'  "{k}": [\n{text}\n  ]' if text else f'  "{k}": []' for k, text in lists.items()
    )
    Path(path).write_text(f"{head[:-2]},\n{tail}\n}}\n")


def _lines(entries: list) -> str:
    """One compact JSON line per entry, indented (the body of a list)."""
    return ",\n".join("    " + json.dumps(e, separators=(",", ":")) for e in entries)


def _where(loc: tuple) -> str:
    """A pydantic error location as a field path: ("parts", 0, "bound") -> parts[0].bound
    (a union's branch names, such as "float", are left out)."""
    path = ""
    for step in loc:
        if isinstance(step, int):
            path += f"[{step}]"
        elif step in _Document.model_fields or any(
            step in m.model_fields for m in (_Claim, _Probe, _Part, _Cited)
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
    if isinstance(document, dict) and document.get("format") == OLD_FORMAT:
        raise BadInput(
            f"certificate {path} is a {OLD_FORMAT} document, which does not list the values "
            f"it trusts: issue it again ({FORMAT})"
        )
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
    for i, entry in enumerate(document["cited"]):
        try:
            citation.from_json(entry)
        except ValueError as exc:
            raise BadInput(f"certificate {path}: cited[{i}]: {exc}") from None
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
    document: dict,
    resolve_seconds: float | None = None,
    solver: str | None = None,
    folder: str | Path | None = None,
    seen: dict[Path, dict] | None = None,
) -> list[str]:
    """The problems of a certificate document (empty: it holds); see the module
    docstring for what is re-derived and what is trusted. With `resolve_seconds`, each
    part is re-solved by `solver` (default: the document's engine), those of cited
    certificates too. `folder`: where cited certificate files lie (the document's own
    folder; None: a cited certificate is a problem); `seen`: the cited files already
    checked (path → document), filled in here, so each is checked once. Problems of a
    cited certificate are prefixed with its file name. Raises BadInput as `proof_of`
    does."""
    proof = proof_of(document, solver=solver)
    cited = [citation.from_json(entry) for entry in document["cited"]]
    seen = {} if seen is None else seen
    problems = []
    certificate_of = _cited_file(resolve_seconds, solver, folder, seen)
    for value in cited:
        problems += citation.problems(puzzles.get(proof.family), value, certificate_of)
    try:
        _, model, split, _ = build(proof, cited)  # BadInput for a bad split or engine
    except UnusableCitation as exc:
        return [*problems, str(exc)]
    if document["key"] != proof.key:
        problems.append(f"key {document['key']} is not the key {proof.key} of this attempt")
    problems += _split_problems(split, document["parts"])
    integral = has_integral_objective(model)
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
        elif claimed.get("objective") is not None and claimed["objective"] < lower - 1e-6:
            problems.append(
                f"part {part.index} ({part.label}): its own objective "
                f"{claimed['objective']} lies below its claimed lower limit {claimed['lower']}"
            )
        elif resolve_seconds and lower > -math.inf:
            cutoff = claimed["cutoff"]
            limits = Limits(resolve_seconds)
            problems += resolve_part(proof, model, split, part, cutoff, lower, limits)
    problems += _claim_problems(document, lowers[: len(split.parts)])
    return problems + solution_problems(proof.family, proof.instance.params, document["claim"])


def _cited_file(resolve_seconds, solver, folder, seen: dict[Path, dict]):
    """`citation.problems`'s `certificate_of` for `check`: a cited file in `folder`,
    loaded and checked once (`seen`), its problems prefixed with its name."""

    def certificate_of(file: str) -> tuple[dict | None, list[str]]:
        if folder is None:
            return None, [f"cites {file}, but no folder was given to find it in"]
        path = (Path(folder) / file).resolve()
        if path in seen:
            return seen[path], []
        try:
            seen[path] = load(path)
        except BadInput as exc:
            return None, [str(exc)]
        inner = check(seen[path], resolve_seconds, solver, path.parent, seen)
        return seen[path], [f"{file}: {problem}" for problem in inner]

    return certificate_of


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
