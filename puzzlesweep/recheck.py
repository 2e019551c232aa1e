"""Re-checking a split proof's stored certificate from the catalog (`recheck`): the
split covers every case up to symmetry, each part's lower limit follows from its status,
the combined bound is what the parts give, the incumbent verifies, no part holds a
solution below its own lower limit; optionally each part is solved again
(`resolve_part`, which refutes a part by any solution it finds below the part's claimed
lower limit, whatever the engine's final status). `puzzlesweep.certificate` checks the
same claims from a JSON file.
"""

import json
import math

from puzzlesweep import citation, puzzles
from puzzlesweep.proof import Proof, build, json_number, number, stored
from puzzlesweep.solve import verified_fields
from puzzlesweep.solvers import Limits, engines
from puzzlesweep.solvers import split as splitting
from puzzlesweep.solvers.mip import has_integral_objective


def recheck(catalog_path: str, proof: Proof, resolve_seconds: float | None = None) -> list[str]:
    """Re-check the stored certificate of `proof` from the catalog; returns the problems
    found (empty: it holds). Checks: the combined row exists and its certificate lists
    exactly the parts the split gives today (same labels and counts); the split covers
    every bucket vector up to its symmetries (`split.covers`); every stored part's lower
    limit follows from its status, bound and cutoff; the combined bound is what they
    give (min over parts, at most the probe's bound raised) and an `optimal` claim has
    bound = objective; the solution verifies with the claimed objective. With
    `resolve_seconds`, each part that claims a lower limit is solved again (with
    its cutoff) and a re-solve that finishes must not contradict it.

    What it takes on trust: the engine's statuses and bounds of parts not re-solved, the
    probe's dual bound, the values the family's tables cite (each part's row must have
    been solved with today's, `citation.digest`; `certificate` checks their sources),
    and that the family's symmetries preserve the feasible set (for no_k_in_row a test
    checks that each maps the windows onto the windows). Raises BadInput as `build`
    does."""
    instance, model, split, _ = build(proof)
    parts, probe, combined = stored(catalog_path, proof)
    if combined is None:
        return [f"no combined row of attempt {proof.key} (sweep prove-{proof.key})"]
    cert = json.loads(combined["certificate"])
    problems = _split_problems(split, cert)
    integral = has_integral_objective(model)
    today = citation.digest(citation.of(proof.family, proof.instance.params))
    lowers = []
    for p, claimed in zip(split.parts, cert["parts"], strict=False):
        row = parts.get(p.index)
        if row is None:
            lowers.append(-math.inf)
            continue
        lower, found = _part_problems(p, claimed, row, integral)
        lowers.append(lower)
        problems += found + _cited_problem(p, row, today)
        problems += stored_refutation(proof, p, row, lower)
        if resolve_seconds and lower > -math.inf:
            cutoff = json.loads(row["subproblem"])["cutoff"]
            limits = Limits(resolve_seconds)
            problems += resolve_part(proof, model, split, p, cutoff, lower, limits)
    problems += _bound_problems(combined, probe, lowers)
    problems += solution_problems(proof.family, instance.params, combined)
    return problems


def _split_problems(split: splitting.Split, cert: dict) -> list[str]:
    """Whether the certificate lists the very parts the split gives today (labels and
    counts), and whether those parts cover every bucket vector up to the symmetries: a
    part missing from either would leave solutions unexplored."""
    problems = []
    listed = [(p["index"], p["label"], [list(c) for c in p["counts"]]) for p in cert["parts"]]
    expected = [(p.index, p.label, [list(c) for c in p.counts]) for p in split.parts]
    if listed != expected:
        problems.append("the certificate's parts differ from the split's parts")
    if (why := splitting.covers(split)) is not None:
        problems.append(f"the split does not cover the space: {why}")
    return problems


def _part_problems(part, claimed: dict, row: dict, integral: bool) -> tuple[float, list[str]]:
    """The lower limit that part `row`'s status, bound and cutoff prove, and a problem if
    the stored row or the certificate (`claimed`) states another one."""
    handle = json.loads(row["subproblem"])
    lower = splitting.part_lower(row["status"], row["bound"], handle["cutoff"], integral)
    if lower != number(handle["lower"]) or lower != number(claimed["lower"]):
        return lower, [
            f"part {part.index} ({part.label}): lower limit {claimed['lower']} claimed, "
            f"{json_number(lower)} follows from its status and bound"
        ]
    return lower, []


def _cited_problem(part, row: dict, today: str) -> list[str]:
    """A problem when part `row` was solved with other cited values than the family's
    tables give today (`today`: their digest; a row without one predates them)."""
    digest = json.loads(row["subproblem"]).get("cited")
    if digest == today or (digest is None and today == citation.digest([])):
        return []
    return [f"part {part.index} ({part.label}): solved with other cited values than today's"]


def stored_refutation(proof: Proof, part, row: dict, lower: float) -> list[str]:
    """A problem when part `row`'s own solution, verified by the family's verifier,
    has an objective below the part's lower limit `lower` (the row contradicts
    itself: its status or bound is false)."""
    if not row.get("solution") or row.get("objective") is None:
        return []
    family = puzzles.get(proof.family)
    try:
        solution = family.decode(row["solution"])
    except ValueError:
        return []
    checked = verified_fields(family, proof.instance.params, solution, row["objective"])
    if checked["verified"] and checked["objective"] < lower - 1e-6:
        return [_refuted(part, checked["objective"], lower, "its own stored solution")]
    return []


def resolve_part(proof: Proof, model, split, part, cutoff, lower: float, limits: Limits):
    """Solve `part` again within `limits` with `proof.solver` under its `cutoff`, from the
    model's start when that lies inside the part. Any solution, the start's or the one
    the engine returns whatever its final status (a time limit included), that lies
    inside the part (`split.outside`) and verifies by the family's verifier with an
    objective below the claimed lower limit `lower` refutes the part; so does a
    finished re-solve (optimal or infeasible) that proves less than `lower`. Returns the
    problems found (at most one), each one line naming the part."""
    integral = has_integral_objective(model)
    restricted = splitting.restrict(model, split, part, cutoff)
    start = _found_value(proof, restricted, model.start, None)
    if start is not None and start < lower - 1e-6:  # no engine needed
        return [_refuted(part, start, lower, "the model's start")]
    if start is not None:  # inside the part: the engine starts from it
        restricted.start = list(model.start)
    again = engines.module(proof.solver, "split").solve(restricted, limits)
    found = _found_value(proof, restricted, again.solution, again.objective)
    if found is not None and found < lower - 1e-6:
        return [_refuted(part, found, lower, f"a solution found by {proof.solver}")]
    true_lower = splitting.part_lower(again.status, again.bound, cutoff, integral)
    if again.status in ("optimal", "infeasible") and true_lower < lower - 1e-6:
        return [
            f"part {part.index} ({part.label}): re-solved to {json_number(true_lower)}, "
            f"below the claimed lower limit {json_number(lower)}"
        ]
    return []


def _found_value(proof: Proof, restricted, x: list[float] | None, claimed) -> float | None:
    """The verifier's objective of the column vector `x` when it lies inside the part
    (`restricted`, its model) and verifies (with objective `claimed`, when given); else
    None."""
    if x is None or splitting.outside(restricted, x) is not None:
        return None
    family, params = puzzles.get(proof.family), proof.instance.params
    decoded = family.from_mip(params, x)
    if claimed is None:
        claimed = sum(c * v for c, v in zip(restricted.costs, x, strict=True)) + restricted.offset
    checked = verified_fields(family, params, decoded, claimed)
    return checked["objective"] if checked["verified"] else None


def _refuted(part, objective: float, lower: float, what: str) -> str:
    """The one line that says a solution refutes a part's claimed lower limit."""
    return (
        f"part {part.index} ({part.label}): {what} has objective {json_number(objective)}, "
        f"below the claimed lower limit {json_number(lower)}: the part's claim is false"
    )


def _bound_problems(combined: dict, probe: dict | None, lowers: list[float]) -> list[str]:
    """Whether the combined row claims no more than its parts prove: the bound is the
    least part lower limit, at most the probe's bound raised, and an `optimal` claim
    needs that bound to reach its objective."""
    bound = min(lowers) if lowers else -math.inf
    if probe is not None and probe.get("bound") is not None:
        bound = max(bound, math.ceil(probe["bound"] - 1e-6))
    claimed_bound = combined["bound"]
    if combined["status"] == "optimal":
        if combined["objective"] is None or bound < combined["objective"] - 1e-6:
            return [
                f"optimal claimed with objective {combined['objective']}, "
                f"but the parts prove only {json_number(bound)}"
            ]
    elif claimed_bound is not None and claimed_bound > bound + 1e-6:
        return [f"bound {claimed_bound} claimed, the parts prove {json_number(bound)}"]
    return []


def solution_problems(family_name: str, params, claim: dict) -> list[str]:
    """Whether a claim's solution (a combined row's, a certificate's `claim`) decodes
    and verifies with its objective (the family's own verifier, independent of the
    model); an objective without a solution is a problem."""
    if claim["solution"] is None:
        return [] if claim["objective"] is None else ["an objective is claimed without a solution"]
    family = puzzles.get(family_name)
    try:
        solution = family.decode(claim["solution"])
    except ValueError as exc:
        return [f"the solution does not decode: {exc}"]
    checked = verified_fields(family, params, solution, claim["objective"])
    return [f"the solution does not verify: {checked['error']}"] if checked["error"] else []
