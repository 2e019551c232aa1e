"""A generic sparse-MIP adapter over SCIP (pyscipopt), and exact counting of optima.

`solve(model, limits)` takes the same `MipModel` as `highs.solve` and returns the same
`SolverResult` fields and statuses: SCIP runs sequentially (its branch and bound has one
thread; `lp/threads` is set from the limits, 1 by default), on the wall clock, with its
output off, the relative and absolute gap limits at 0, under the time limit and the
optional node limit, and deaf to Ctrl-C (`misc/catchctrlc` off: a signal sent to a run's
process group does not cut a solve short; SCIP's `userinterrupt` would be an `error`,
never a limit that did not hold), and with the GIL released (`optimizeNogil`: a Dask
worker solving in a thread keeps its event loop, and so its heartbeats, going). A
`model.start` is checked against the model and handed to SCIP as a starting incumbent
(`extra["start_used"]` says whether SCIP accepted it). The objective and the dual bound
are reported by the rule HiGHS's are (`mip.reported_values`: rounded with an integral
objective).

`count(model, optimum, symmetries, limits)` counts the optimal solutions exactly with
SCIP's own counting (the `countsols` constraint handler, after `setParamsCountsols`:
no dual reductions, no symmetry handling, so no solution is cut off; and no probing in
presolve, which counted one solution twice on bishops 4×4) on the model with
the row costs·x <= optimum, and the solutions distinct up to a group of column
permutations by Burnside's lemma (the orbit-counting lemma: the number of orbits of a
finite group G acting on a set X is (1/|G|) Σ_{g∈G} |X^g|): for each g the solutions
fixed by g are counted with the rows x_j = x_{g(j)} added. Continuous columns are left
out of the count (SCIP counts the assignments of the integer columns; a family's
continuous columns must be determined by its integer ones at every optimum).

Nothing here knows a puzzle family, Dask or Prefect.

Roads not taken: collecting the counted solutions (`constraints/countsols/collect`) and
canonicalising each under the group (pyscipopt does not return the collected
solutions; Burnside needs only counts); enumerating optima by re-solving with a no-good
row per solution found (one full solve per solution: 16 solves for knights 10×10's 16).
"""

import math
import time
from dataclasses import dataclass
from importlib.metadata import version

import pyscipopt

from . import Limits, SolverResult, relative_gap
from .mip import MipModel, finite, reported_values, settled

NAME = "scip"
VERSION = f"{version('pyscipopt')}/SCIP {pyscipopt.Model().version()}"

_STATUS = {
    "optimal": "optimal",
    "infeasible": "infeasible",
    "timelimit": "time_limit",
    "nodelimit": "node_limit",
    "totalnodelimit": "node_limit",
    "stallnodelimit": "node_limit",
}  # anything else, "userinterrupt" included, is an error: never a limit that did not hold


def build_model(model: MipModel, limits: Limits) -> tuple[pyscipopt.Model, list]:
    """A SCIP model of `model` with the limits and the options of the module docstring,
    and its variables (one per column). Raises ValueError for an option SCIP refuses or
    one naming a limit (limits/time, limits/nodes, lp/threads). Pending rows are settled
    first by HiGHS (`highs.optimum`: small MIPs, where it is quickest)."""
    if model.pending:
        from .highs import optimum

        model = settled(model, optimum)
    m = pyscipopt.Model()
    m.hideOutput()
    m.setParam("timing/clocktype", 2)  # wall clock
    # A Ctrl-C meant for the run (sent to its process group) must not cut a solve short:
    # the run decides what its interruption means.
    m.setParam("misc/catchctrlc", False)
    m.setParam("limits/time", float(limits.time_limit))
    m.setParam("limits/gap", 0.0)
    m.setParam("limits/absgap", 0.0)
    m.setParam("lp/threads", int(limits.threads))
    if limits.node_limit is not None:
        m.setParam("limits/nodes", int(limits.node_limit))
    for name, value in model.scip_options.items():
        if name in ("limits/time", "limits/nodes", "lp/threads"):
            raise ValueError(f"SCIP option {name} comes from the limits")
        try:
            m.setParam(name, value)
        except (KeyError, LookupError, TypeError, ValueError) as exc:
            raise ValueError(f"SCIP option {name}={value!r} refused: {exc}") from None
    xs = []
    for j in range(model.num_cols):
        lo, hi = model.lower[j], model.upper[j]
        binary = model.integral[j] and lo >= 0 and hi <= 1
        kind = "B" if binary else ("I" if model.integral[j] else "C")
        xs.append(
            m.addVar(
                name=f"x{j}",
                vtype=kind,
                lb=None if lo == -math.inf else lo,
                ub=None if hi == math.inf else hi,
                obj=float(model.costs[j]),
            )
        )
    if model.offset:
        m.addObjoffset(float(model.offset))
    for i in range(model.num_rows):
        a, b = model.row_start[i], model.row_start[i + 1]
        expr = pyscipopt.quicksum(
            v * xs[c] for c, v in zip(model.col_index[a:b], model.values[a:b], strict=True)
        )
        _add_row(m, expr, model.row_lower[i], model.row_upper[i], f"r{i}")
    return m, xs


def _add_row(m: pyscipopt.Model, expr, lo: float, hi: float, name: str) -> None:
    """Add lo <= expr <= hi (either side may be infinite)."""
    if hi < math.inf:
        cons = m.addCons(expr <= hi, name=name)
        if lo > -math.inf:
            m.chgLhs(cons, lo)
    elif lo > -math.inf:
        m.addCons(expr >= lo, name=name)


def add_start(m: pyscipopt.Model, xs: list, model: MipModel) -> dict:
    """Hand `model.start` to SCIP as an incumbent; {} without a start, else
    {"start_used": whether it had n values, was feasible and was stored}."""
    if model.start is None:
        return {}
    if len(model.start) != model.num_cols:
        return {"start_used": False}  # a start of the wrong length is no incumbent
    sol = m.createSol()
    for x, value in zip(xs, model.start, strict=True):
        m.setSolVal(sol, x, float(value))
    feasible = m.checkSol(sol)
    return {"start_used": bool(feasible and m.addSol(sol, free=True))}


def solve(model: MipModel, limits: Limits) -> SolverResult:
    """Solve `model` with SCIP under `limits`; never raises for a solver failure.

    Returns status optimal | infeasible | time_limit | node_limit | error, the incumbent's
    objective and its column values (list of n floats), the dual bound, the gap, the
    branch-and-bound node count (all runs, restarts included) and the wall-clock seconds
    (building the SCIP model included). `extra["start_used"]`: whether `model.start` had
    n values, was feasible and was stored as an incumbent (absent without a start). An
    option SCIP refuses gives status error with a message naming it.
    """
    started = time.perf_counter()
    try:
        m, xs = build_model(model, limits)
    except ValueError as exc:
        return SolverResult("error", message=str(exc), solver=NAME, solver_version=VERSION)
    extra = add_start(m, xs, model)
    m.optimizeNogil()
    seconds = time.perf_counter() - started
    raw = m.getStatus()
    status = _STATUS.get(raw, "error")
    objective = solution = None
    if m.getNSols() > 0 and status != "infeasible":
        best = m.getBestSol()
        objective = finite(m.getSolObjVal(best))
        solution = [m.getSolVal(best, x) for x in xs]
    objective, bound = reported_values(model, status, objective, finite(m.getDualbound()))
    return SolverResult(
        status=status,
        objective=objective,
        bound=bound,
        gap=relative_gap(objective, bound),
        nodes=int(m.getNTotalNodes()),
        seconds=seconds,
        solution=solution,
        message=None if status != "error" else f"SCIP status {raw}",
        solver=NAME,
        solver_version=VERSION,
        extra=extra,
    )


@dataclass
class Count:
    """The optima counted by `count`: `solutions` (optimal solutions, as assignments of
    the integer columns), `inequivalent` (their orbits under the group given, or None
    without one), `seconds` (wall clock, all counts), `complete` (False when a count
    stopped at the time limit: both numbers are then None)."""

    solutions: int | None
    inequivalent: int | None
    seconds: float
    complete: bool


def _count_once(
    model: MipModel, optimum: float, perm: list[int] | None, seconds: float
) -> int | None:
    """The number of integer assignments of `model` with costs·x <= optimum (and
    x_j = x_{perm[j]} for j < len(perm) when `perm` is given); None when the time ran
    out first."""
    m, xs = build_model(model, Limits(max(seconds, 0.01)))
    m.setParamsCountsols()
    # Probing in presolve miscounts (bishops 4×4: the solutions fixed by one symmetry
    # counted 2 where there is 1), so it is off for every count.
    m.setParam("propagating/probing/maxprerounds", 0)
    m.setParam("limits/time", float(max(seconds, 0.01)))
    cols = [j for j, c in enumerate(model.costs) if c != 0]
    expr = pyscipopt.quicksum(model.costs[j] * xs[j] for j in cols)
    m.addCons(expr <= optimum - model.offset + 1e-6, name="optimum")
    if perm is not None:  # every column equal to its image (all of each cycle equal)
        for j, image in enumerate(perm):
            if image != j:
                m.addCons(xs[j] - xs[image] == 0)
    m.count()
    if m.getStatus() not in ("infeasible", "optimal"):
        return None
    return int(m.getNCountedSols())


def count(
    model: MipModel,
    optimum: float,
    symmetries: list[list[int]] | None = None,
    limits: Limits | None = None,
) -> Count:
    """Count the solutions of `model` with objective <= `optimum` (all optimal when
    `optimum` is the proven optimum), and with `symmetries` the orbits under them.

    `symmetries`: the whole group (closed under composition, identity included), each
    element a permutation of the first len(g) columns (g[j] = the image of column j);
    the other columns are not permuted and must be determined by the permuted ones.
    `limits.time_limit` (seconds) bounds the total. Raises ValueError when Burnside's
    sum is not divisible by the group order (the permutations are not a group, or do not
    preserve the solutions)."""
    limits = limits or Limits(60.0)
    started = time.perf_counter()

    def left() -> float:
        return limits.time_limit - (time.perf_counter() - started)

    solutions = _count_once(model, optimum, None, left())
    if solutions is None:
        return Count(None, None, time.perf_counter() - started, False)
    if not symmetries:
        return Count(solutions, None, time.perf_counter() - started, True)
    identity = list(range(len(symmetries[0])))
    fixed = 0
    for g in symmetries:
        found = solutions if list(g) == identity else _count_once(model, optimum, g, left())
        if found is None:
            return Count(None, None, time.perf_counter() - started, False)
        fixed += found
    if fixed % len(symmetries):
        raise ValueError(
            f"Burnside's sum {fixed} is not divisible by the group order {len(symmetries)}"
        )
    return Count(solutions, fixed // len(symmetries), time.perf_counter() - started, True)
