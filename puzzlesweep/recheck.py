"""Re-checking a split proof's stored certificate from the catalog (`recheck`): the
split covers every case up to symmetry, each part's lower limit follows from its status,
the combined bound is what the parts give, the incumbent verifies; optionally each part
is solved again. `puzzlesweep.certificate` checks the same claims from a JSON file.
"""

import json
import math

from puzzlesweep import puzzles
from puzzlesweep.proof import Proof, build, json_number, number, stored
from puzzlesweep.solve import mip_engine, verified_fields
from puzzlesweep.solvers import Limits
from puzzlesweep.solvers import split as splitting


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
    probe's dual bound, and that the family's symmetries preserve the feasible set (for
    no_k_in_row a test checks that each maps the windows onto the windows). Raises
    BadInput as `build` does."""
    instance, model, split, _ = build(proof)
    parts, probe, combined = stored(catalog_path, proof)
    if combined is None:
        return [f"no combined row of attempt {proof.key} (sweep prove-{proof.key})"]
    cert = json.loads(combined["certificate"])
    problems = _split_problems(split, cert)
    integral = splitting.integral_objective(model)
    lowers = []
    for p, claimed in zip(split.parts, cert["parts"], strict=False):
        row = parts.get(p.index)
        if row is None:
            lowers.append(-math.inf)
            continue
        lower, found = _part_problems(p, claimed, row, integral)
        lowers.append(lower)
        problems += found
        if resolve_seconds and lower > -math.inf:
            cutoff = json.loads(row["subproblem"])["cutoff"]
            problems += _resolve_problems(proof, model, split, p, cutoff, lower, resolve_seconds)
    problems += _bound_problems(combined, probe, lowers)
    problems += _solution_problems(proof.family, instance.params, combined)
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


def _resolve_problems(proof: Proof, model, split, part, cutoff, lower: float, seconds: float):
    """Solve `part` again for `seconds` (with its cutoff): a re-solve that finishes
    (optimal or infeasible) below the stored lower limit `lower` is a problem, since
    that limit would not be true. Returns the problems found (at most one)."""
    again = mip_engine(proof.solver).solve(
        splitting.restrict(model, split, part, cutoff), Limits(seconds)
    )
    integral = splitting.integral_objective(model)
    true_lower = splitting.part_lower(again.status, again.bound, cutoff, integral)
    if again.status in ("optimal", "infeasible") and true_lower < lower - 1e-6:
        return [
            f"part {part.index} ({part.label}): re-solved to {json_number(true_lower)}, "
            f"below the stored lower limit {json_number(lower)}"
        ]
    return []


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


def _solution_problems(family_name: str, params, combined: dict) -> list[str]:
    """Whether the combined row's solution decodes and verifies with its objective (the
    family's own verifier, independent of the model)."""
    if combined["solution"] is None:
        return []
    family = puzzles.get(family_name)
    try:
        solution = family.decode(combined["solution"])
    except ValueError as exc:
        return [f"the solution does not decode: {exc}"]
    checked = verified_fields(family, params, solution, combined["objective"])
    if checked["error"]:
        return [f"the solution does not verify: {checked['error']}"]
    return []
