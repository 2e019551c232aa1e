"""Split proofs of one instance, without orchestration: the attempt's handle (`Proof`),
solving one part, the combined row with its certificate, and its re-check.

`flows/prove.py` runs the parts as Prefect tasks on Dask; everything here also works
in one process (the tests use it so). The rows of attempt `key` in the catalog's
`results` all have sweep `prove-KEY`:

    one row per finished part   solver `ENGINE-split-part`, params_key `KEY.INDEX`,
                                column `subproblem`
    the optional direct solve   solver `ENGINE` (the probe)
    the combined row            solver `ENGINE-split`, column `certificate`

A part solved again (a re-run with a longer limit) adds a row; the newest row of each
part, of the probe and of the combined result is the one that counts (`stored`).

ENGINE is the attempt's engine (`Proof.solver`: one that can split, `solvers.engines`).
It is not part of the key, so a re-run with another engine resumes the same parts (a
part's lower limit is a proof whichever engine gave it).

The combined row: status `optimal` with objective = bound when the bound meets the
incumbent, else `time_limit` with the best objective and bound (the larger of the
parts' minimum and the probe's dual bound). Its `certificate` (JSON) lists every part
(index, label, counts, status, lower limit, cutoff), the split's text and description,
and the values the model cites (`citation`; each part's `subproblem` names them by
their digest); `recheck` re-checks it.
"""

import hashlib
import json
import math
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from puzzlesweep import catalog, citation, puzzles
from puzzlesweep.core import VERSION, BadInput, make_params
from puzzlesweep.puzzles import Instance
from puzzlesweep.solve import empty_row, result_fields, verified_fields
from puzzlesweep.solvers import Limits, engines, lookahead, relative_gap, symmetry
from puzzlesweep.solvers import split as splitting
from puzzlesweep.solvers.mip import MipModel, has_integral_objective

PART_SOLVER = "{}-split-part"  # formatted with the engine's name
PROVE_SOLVER = "{}-split"
PROBE_FIELDS = ("status", "objective", "bound")
#: The split prefix that adds lexicographic-leader rows to the model (`model_of`).
LEX = "lex:"


@dataclass(frozen=True)
class Proof:
    """The handle of one attempt: `family`, `params` (a dict), `split` (the family's
    split text, e.g. "1:0,6"), `width` (exact counts per group), `limits` (per part;
    seconds), `cutoff` (use incumbent − 1 as each part's cutoff)."""

    family: str
    params: dict
    split: str
    width: int
    limits: Limits
    cutoff: bool = True
    solver: str = "highs"

    @property
    def instance(self) -> Instance:
        """The instance (validated; raises BadInput)."""
        family = puzzles.get(self.family)
        return Instance(self.family, make_params(family.Params, self.params))

    @property
    def key(self) -> str:
        """16 hex digits naming the instance's own params and the split (not the limits:
        a re-run with other limits resumes the same parts)."""
        text = json.dumps(
            [self.family, self.instance.params_key, self.split, self.width], sort_keys=True
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def build(proof: Proof, cited=None) -> tuple[Instance, MipModel, splitting.Split, str]:
    """(instance, its MIP on its own axes, the split, the split's description): a
    `tree:` text is a tree of 0/1 fixings (`solvers.lookahead`, any family), any other
    the family's `split_model`; the model is `model_of`'s, with `cited` (a list of
    `citation.Cited` or None). Raises BadInput
    for bad parameters, a family without `split_model`, a bad split, or a solver that
    is not an engine that splits (`solvers.engines`), and as `model_of` does."""
    engines.get(proof.solver, "split")
    instance, family = proof.instance, puzzles.get(proof.family)
    model, text = model_of(proof.family, instance.params, proof.split, cited)
    tree = text.startswith("tree:")  # any family: a tree of 0/1 fixings
    if not tree and not hasattr(family, "split_model"):
        raise BadInput(f"family {proof.family} has no split (split_model); try a tree:")
    try:
        if tree:
            split, description = lookahead.tree_split(text, model.num_cols)
        else:
            split, description = family.split_model(instance.params, text, proof.width)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if text != proof.split:
        description += "; the model with lexicographic-leader rows for its symmetries"
    return instance, model, split, description


def model_of(family_name: str, params, split: str, cited=None) -> tuple[MipModel, str]:
    """(the MIP an attempt solves, its split text without the `lex:` prefix). The
    family's `model(params)`, or with `cited` (a certificate's values) the model built
    from those alone (`citation.model`, raising UnusableCitation); after `lex:`, with the
    lexicographic-leader rows of the family's `symmetries(params)` and its start mapped
    to its leader (`solvers.symmetry.with_leader_rows`), so every part and a ramp-up
    keep one image of each solution with no solver symmetry handling. A `lex:` split
    must be a tree (`tree:`, or `nodes:` / `lookahead:` before they are grown): a
    family's count split drops parts by symmetry already, which the rows would make
    unsound. Raises BadInput for `lex:` before anything else, on a family without
    `symmetries`, or where a symmetry does not map the model onto itself."""
    family = puzzles.get(family_name)
    model = family.model(params) if cited is None else citation.model(family, params, cited)
    if not split.startswith(LEX):
        return model, split
    text = split[len(LEX) :]
    if not text.startswith(("tree:", "nodes:", "lookahead:")):
        raise BadInput(
            f"{LEX} goes before a tree split (tree:, nodes:N, lookahead:N), not {text!r}"
        )
    if not hasattr(family, "symmetries"):
        raise BadInput(f"family {family_name} has no symmetries for {LEX}")
    perms = family.symmetries(params)
    if any(len(g) != model.num_cols for g in perms):
        raise BadInput(f"{LEX} needs symmetries of all {model.num_cols} columns of the model")
    try:
        return symmetry.with_leader_rows(model, perms), text
    except ValueError as exc:
        raise BadInput(f"{LEX}: {exc}") from None


def _verified(family, params, result) -> dict:
    """The solution fields of a row from a solver result whose solution is a raw MIP
    column vector (`from_mip`, then the one check `solve.verified_fields`)."""
    if result.solution is None:
        return {"solution": None, "verified": None}
    decoded = family.from_mip(params, result.solution)
    checked = verified_fields(family, params, decoded, result.objective)
    return {**checked, "error": checked["error"] or result.message}


def solve_whole(proof: Proof, limits: Limits, run_id: str) -> dict:
    """The row of a direct solve of the whole instance (the probe: solver `proof.solver`)."""
    instance, model, _, _ = build(proof)
    result = engines.module(proof.solver, "split").solve(model, limits)
    return _whole_row(proof, instance, limits, run_id, _fields(proof, instance, result))


def solve_one(proof: Proof, index: int, cutoff: float | None, limits: Limits, run_id: str) -> dict:
    """Solve part `index` of `proof` (with objective <= `cutoff` when given) and return
    its catalog row: status, objective (verified against the whole instance: a part's
    solution is a solution of the instance), bound, and `subproblem`, the JSON of the
    part's handle with its cutoff, its lower limit (`split.part_lower`) and the key."""
    built = instance, model, split, _ = build(proof)
    restricted = splitting.restrict(model, split, split.parts[index], cutoff)
    result = engines.module(proof.solver, "split").solve(restricted, limits)
    fields = _fields(proof, instance, result)
    return _part_row(proof, built, index, cutoff, limits, run_id, fields)


def _fields(proof: Proof, instance: Instance, result) -> dict:
    """The row fields of a solver result: its figures, and its solution (a raw MIP
    column vector) decoded and verified against the whole instance."""
    family = puzzles.get(proof.family)
    fields = result_fields(result)
    return {**fields, **_verified(family, instance.params, result)}  # may replace error


def _whole_row(proof: Proof, instance: Instance, limits: Limits, run_id: str, fields) -> dict:
    """The probe's catalog row: `fields` over an empty row of the instance."""
    row = {**empty_row(instance, proof.solver, limits), "finished_at": datetime.now(UTC)}
    return {**row, **fields, "run_id": run_id, "sweep": f"prove-{proof.key}"}


def _part_row(proof: Proof, built, index, cutoff, limits: Limits, run_id: str, fields) -> dict:
    """Part `index`'s catalog row: `fields` (status, bound, ...) over an empty row, and
    its `subproblem` handle with the lower limit they prove; `built`: `build(proof)`."""
    instance, model, split, _ = built
    part = split.parts[index]
    row = {**empty_row(instance, PART_SOLVER.format(proof.solver), limits), **fields}
    integral = has_integral_objective(model)
    lower = splitting.part_lower(row["status"], row["bound"], cutoff, integral)
    handle = json.loads(part.to_json())
    handle.update(key=proof.key, cutoff=cutoff, lower=json_number(lower), parts=len(split.parts))
    handle["cited"] = citation.digest(citation.of(proof.family, instance.params))  # its model's
    row.update(
        params_key=f"{proof.key}.{index}",
        finished_at=fields.get("finished_at") or datetime.now(UTC),
        run_id=run_id,
        sweep=f"prove-{proof.key}",
        subproblem=json.dumps(handle, separators=(",", ":")),
    )
    return row


@dataclass(frozen=True)
class PartRequest:
    """Part `index` of `proof` (None: the probe) to solve in a solver process under
    `limits`, objective <= `cutoff` when given, its row under `run_id` (an
    `isolate.Request`). `failed(failure)`: its row when the solver process failed
    (status and times, no solution, no bound: the part's lower limit is −inf)."""

    proof: Proof
    index: int | None
    cutoff: float | None
    limits: Limits
    run_id: str

    def wire(self) -> dict[str, Any]:
        """{"proof", "index", "cutoff", "time_limit" (s), "run_id"}."""
        return {
            "proof": asdict(self.proof),
            "index": self.index,
            "cutoff": self.cutoff,
            "time_limit": self.limits.time_limit,
            "run_id": self.run_id,
        }

    @classmethod
    def of_wire(cls, data: dict[str, Any]) -> "PartRequest":
        """The request whose `wire()` is `data`."""
        fields = data["proof"]
        proof = Proof(**{**fields, "limits": Limits(**fields["limits"])})
        limits = replace(proof.limits, time_limit=data["time_limit"])
        return cls(proof, data["index"], data["cutoff"], limits, data["run_id"])

    def solve(self) -> dict:
        """Its row, solved here."""
        if self.index is None:
            return solve_whole(self.proof, self.limits, self.run_id)
        return solve_one(self.proof, self.index, self.cutoff, self.limits, self.run_id)

    def failed(self, failure: dict[str, Any]) -> dict:
        """Its row when the solve failed (see the class)."""
        keep = ("status", "error", "solve_seconds", "started_at", "finished_at")
        fields = {key: failure[key] for key in keep if key in failure}
        built, limits = build(self.proof), self.limits
        if self.index is None:
            return _whole_row(self.proof, built[0], limits, self.run_id, fields)
        return _part_row(self.proof, built, self.index, self.cutoff, limits, self.run_id, fields)


def json_number(value: float) -> float | str:
    """JSON has no infinities: ±inf as the strings "inf" / "-inf"."""
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def number(value: float | str | None) -> float:
    """The inverse of `json_number`; None (no part, nothing proven) is −inf."""
    return -math.inf if value is None else float(value)


def write_row(catalog_path: str, proof: Proof, row: dict, label: str) -> bool:
    """Append one row of attempt `proof` to the catalog as its own commit, once per run
    and `label` (a part's index, "probe" or "combined": a retried task writes nothing
    twice). Returns False when it was already written."""
    family = puzzles.get(proof.family)
    row = {**row, "puzzlesweep_version": VERSION, "schema_version": catalog.SCHEMA_VERSION}
    return catalog.write_batch(catalog_path, family.Params, [row], f"{row['run_id']}-{label}")


def is_done(row: dict, limits: Limits) -> bool:
    """Is a stored part final for these limits: optimal or infeasible, or stopped at a
    time limit at least as long as `limits.time_limit`?"""
    if row["status"] in ("optimal", "infeasible"):
        return True
    stored = row.get("time_limit") or 0.0
    return row["status"] in ("time_limit", "node_limit") and stored >= limits.time_limit - 1e-9


STORED = """
SELECT * FROM results WHERE sweep = ? AND family = ?
QUALIFY row_number() OVER (
    PARTITION BY params_key, solver LIKE '%-split', solver LIKE '%-split-part'
    ORDER BY finished_at DESC) = 1
"""  # the newest part, probe and combined row, whichever engine wrote it


def stored(catalog_path: str, proof: Proof) -> tuple[dict[int, dict], dict | None, dict | None]:
    """(part index → its newest row, the newest probe row or None, the newest combined
    row or None) of attempt `proof`, found by its key in the catalog (nothing for a
    missing catalog)."""
    _, _, split, _ = build(proof)
    if not catalog.exists(catalog_path) or not catalog.files(catalog_path):
        return {}, None, None
    columns, values = catalog.query(catalog_path, STORED, [f"prove-{proof.key}", proof.family])
    parts, probe, combined = {}, None, None
    for row in (dict(zip(columns, v, strict=True)) for v in values):
        if row["solver"].endswith("-split-part"):
            index = int(row["params_key"].rsplit(".", 1)[1])
            if index < len(split.parts):
                parts[index] = row
        elif row["solver"].endswith("-split"):
            combined = row
        else:
            probe = row
    return parts, probe, combined


def best_row(rows: list[dict | None]) -> dict | None:
    """The verified row with the smallest objective among `rows` (None entries are
    skipped), or None."""
    good = [r for r in rows if r and r.get("verified") and r.get("objective") is not None]
    return min(good, key=lambda r: r["objective"]) if good else None


def start_row(proof: Proof, model: MipModel | None = None) -> dict | None:
    """The model's start as an incumbent ({"objective", "solution", "verified",
    "error"}: `solve.verified_fields` of the start, the family's own check), or None
    without a start; `model`: `build(proof)`'s, when at hand. The parts look below it
    from the first one on, and a combined claim may rest on it (its solution is stored
    and verified like any part's)."""
    instance = proof.instance
    if model is None:
        _, model, _, _ = build(proof)
    if model.start is None:
        return None
    family = puzzles.get(proof.family)
    value = sum(c * x for c, x in zip(model.costs, model.start, strict=True)) + model.offset
    decoded = family.from_mip(instance.params, model.start)
    return {"objective": value, **verified_fields(family, instance.params, decoded, value)}


def combined_row(proof: Proof, parts: dict[int, dict], probe: dict | None, run_id: str) -> dict:
    """The combined row of the instance from the stored `parts` (index → row), the
    optional `probe` row and the model's start (`start_row`); see the module docstring.
    Parts not in `parts` count as unproven (−inf)."""
    instance, model, split, description = build(proof)
    lowers = [
        number(json.loads(parts[i]["subproblem"])["lower"]) if i in parts else -math.inf
        for i in range(len(split.parts))
    ]
    best = best_row([*parts.values(), probe, start_row(proof, model)])
    combined = splitting.combine(lowers, [best["objective"] if best else None])
    bound = combined.bound
    if probe is not None and probe.get("bound") is not None:
        bound = max(bound, math.ceil(probe["bound"] - 1e-6))
    objective = combined.objective
    proven = objective is not None and bound >= objective - 1e-6
    certificate = {
        "key": proof.key,
        "split": proof.split,
        "width": proof.width,
        "description": description,
        "parts_total_before_symmetry": split.total,
        "symmetries": len(split.permutations),
        "probe_bound": probe.get("bound") if probe else None,
        "cited": [c.to_json() for c in citation.of(proof.family, instance.params)],
        "parts": [
            {
                "index": p.index,
                "label": p.label,
                "counts": [list(c) for c in p.counts],
                "status": parts[p.index]["status"] if p.index in parts else None,
                "lower": json_number(lowers[p.index]),
                "cutoff": json.loads(parts[p.index]["subproblem"])["cutoff"]
                if p.index in parts
                else None,
            }
            for p in split.parts
        ],
    }
    row = empty_row(instance, PROVE_SOLVER.format(proof.solver), proof.limits)
    finite = bound if math.isfinite(bound) else None
    row.update(
        status="optimal" if proven else "time_limit",
        solver_version=engines.module(proof.solver, "split").VERSION,
        objective=objective,
        bound=objective if proven else finite,
        gap=relative_gap(objective, finite) if not proven else 0.0,
        solve_seconds=sum((r.get("solve_seconds") or 0.0) for r in [*parts.values(), probe] if r),
        nodes=sum((r.get("nodes") or 0) for r in [*parts.values(), probe] if r),
        solution=best["solution"] if best else None,
        verified=bool(best) if best else None,
        finished_at=datetime.now(UTC),
        run_id=run_id,
        sweep=f"prove-{proof.key}",
        certificate=json.dumps(certificate, separators=(",", ":")),
    )
    return row


def cutoff_for(proof: Proof, best: dict | None, integral: bool) -> float | None:
    """incumbent − 1 for an integral objective (the parts then only look for better
    solutions), None without an incumbent, without `proof.cutoff` or for a fractional
    objective (no safe strict cutoff)."""
    if not proof.cutoff or best is None or not integral:
        return None
    return float(best["objective"]) - 1.0


def replace_limits(limits: Limits, seconds: float) -> Limits:
    """`limits` with the time limit `seconds`."""
    return Limits(seconds, limits.node_limit, limits.threads)
