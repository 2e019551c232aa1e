"""A generic sparse-MIP adapter over HiGHS (highspy).

A `MipModel` is plain arrays: minimise c·x + offset subject to row_lower <= A x <= row_upper
and lower <= x <= upper, with x integral where `integrality` says so; A is given row-wise
(CSR). `solve(model, limits)` returns a `SolverResult`. HiGHS runs with one thread and its
output switched off; a limit hit before the root node leaves objective, bound and gap
infinite in HiGHS, which are returned as None (docs/architecture.md). When the
model's optimum is an integer (`has_integral_objective`), the dual bound is rounded up
and the objective to the integer it lies on, so a proven 4 is never reported as
3.9999999999998583.
"""

import os
import sys
import time
from importlib.metadata import version

import highspy
import numpy as np

from . import Limits, SolverResult, relative_gap
from .mip import (
    MipModel,
    finite,
    has_integral_objective,
    integral_bounds,
    reported_values,
    settled,
)

__all__ = [
    "MipModel",
    "NAME",
    "VERSION",
    "has_integral_objective",
    "integral_bounds",
    "relaxation",
    "solve",
]

NAME = "highs"
VERSION = version("highspy")


def _construct_silently() -> None:
    """HiGHS prints its banner on stdout (file descriptor 1) when the first `Highs` of a
    process is built, before any option can switch output off; that would corrupt the
    CLI's `--json` output. Build that first instance with fd 1 pointed at /dev/null."""
    sys.stdout.flush()
    saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


_construct_silently()


_OK = highspy.HighsStatus.kOk
_STATUS = {
    highspy.HighsModelStatus.kOptimal: "optimal",
    highspy.HighsModelStatus.kInfeasible: "infeasible",
    highspy.HighsModelStatus.kTimeLimit: "time_limit",
    highspy.HighsModelStatus.kSolutionLimit: "node_limit",
    highspy.HighsModelStatus.kIterationLimit: "node_limit",
}  # anything else, kInterrupt included, is an error: never a limit that did not hold


def solve(model: MipModel, limits: Limits) -> SolverResult:
    """Solve `model` with HiGHS under `limits`; never raises for a solver failure.

    Returns status optimal | infeasible | time_limit | node_limit | error, the incumbent's
    objective and its column values (list of n floats), the dual bound, the gap, the
    branch-and-bound node count and the wall-clock seconds. With an integral objective
    (`has_integral_objective`) the bound and objective are rounded (`mip.reported_values`).
    A `model.options` entry HiGHS refuses, or one naming threads or time_limit, gives
    status error with a message naming it.
    """
    h = highspy.Highs()
    refused = _set_options(h, model, limits)
    if refused is not None:
        return SolverResult("error", message=refused, solver=NAME, solver_version=VERSION)
    started = time.perf_counter()
    h.passModel(_lp(model))
    if model.start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = list(map(float, model.start))
        h.setSolution(sol)
    h.run()
    return _result(h, model, time.perf_counter() - started)


def _set_options(h: highspy.Highs, model: MipModel, limits: Limits) -> str | None:
    """Set `limits` and `model.options` on `h`; silent, single-threaded as asked, and
    solved to a zero gap. Returns a message naming the first option HiGHS refuses (or
    one naming threads or time_limit, which only `limits` sets), else None."""
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", limits.threads)
    h.setOptionValue("time_limit", float(limits.time_limit))
    h.setOptionValue("mip_rel_gap", 0.0)
    if limits.node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(limits.node_limit))
    for name, value in model.options.items():
        if name in ("threads", "time_limit") or h.setOptionValue(name, value) != _OK:
            return f"HiGHS option {name}={value!r} refused"
    return None


#: Seconds HiGHS may spend proving the optimum of each pending row's small MIP.
PENDING_SECONDS = 30.0


def optimum(model: MipModel) -> float | None:
    """The proven optimum of the small MIP `model` (a pending row's, `mip.PendingRow`),
    rounded to an integer, within PENDING_SECONDS; None without a proof."""
    result = solve(model, Limits(PENDING_SECONDS))
    return float(round(result.objective)) if result.status == "optimal" else None


def _lp(model: MipModel) -> highspy.HighsLp:
    """`model` as a HiGHS LP with a row-wise matrix (the shape `MipModel` keeps) and
    the integrality of each column, its pending rows settled (`mip.settled`)."""
    model = settled(model, optimum)
    lp = highspy.HighsLp()
    lp.num_col_ = model.num_cols
    lp.num_row_ = model.num_rows
    lp.col_cost_ = np.asarray(model.costs, dtype=float)
    lp.col_lower_ = np.asarray(model.lower, dtype=float)
    lp.col_upper_ = np.asarray(model.upper, dtype=float)
    lp.row_lower_ = np.asarray(model.row_lower, dtype=float)
    lp.row_upper_ = np.asarray(model.row_upper, dtype=float)
    lp.offset_ = float(model.offset)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.asarray(model.row_start, dtype=np.int32)
    lp.a_matrix_.index_ = np.asarray(model.col_index, dtype=np.int32)
    lp.a_matrix_.value_ = np.asarray(model.values, dtype=float)
    lp.integrality_ = [
        highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
        for i in model.integral
    ]
    return lp


def relaxation(model: MipModel) -> highspy.Highs:
    """A silent one-thread HiGHS holding the LP relaxation of `model` (every column
    continuous, pending rows settled), for what bounds by LP (`lookahead`, an LP-based
    branch and bound): change column bounds, `run()`, read the objective (offset
    included) and the column values."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    lp = _lp(model)
    lp.integrality_ = [highspy.HighsVarType.kContinuous] * model.num_cols
    h.passModel(lp)
    return h


def _result(h: highspy.Highs, model: MipModel, seconds: float) -> SolverResult:
    """What the run of `h` found: status, incumbent (only if HiGHS calls it feasible),
    dual bound, gap and nodes, rounded as `mip.reported_values` does."""
    model_status = h.getModelStatus()
    info = h.getInfo()
    status = _STATUS.get(model_status, "error")
    has_incumbent = info.primal_solution_status == 2  # kSolutionStatusFeasible
    objective = finite(info.objective_function_value) if has_incumbent else None
    objective, bound = reported_values(model, status, objective, finite(info.mip_dual_bound))
    message = (
        None if status != "error" else f"HiGHS model status {h.modelStatusToString(model_status)}"
    )
    return SolverResult(
        status=status,
        objective=objective,
        bound=bound,
        gap=relative_gap(objective, bound),
        nodes=int(info.mip_node_count) if info.mip_node_count >= 0 else 0,
        seconds=seconds,
        solution=list(h.getSolution().col_value) if has_incumbent else None,
        message=message,
        solver=NAME,
        solver_version=VERSION,
    )
