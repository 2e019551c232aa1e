"""Solve one instance end to end: build, solve, decode, verify. Knows no orchestration.

`solve_instance(instance, solver, limits)` is what the CLI's `solve` and every batch task
call. It never raises for a failing model, solver or verifier: the failure becomes a
result with status `error` and its message, so a batch always reports every instance.
"""

import math
import socket
import time
import traceback
from datetime import UTC, datetime
from typing import Any

from puzzlesweep import puzzles
from puzzlesweep.core import BadInput, Instance, InvalidSolution
from puzzlesweep.solvers import Limits, SolverResult

SOLVERS = ("highs", "backtrack")


def check_solver(family: str, solver: str | None) -> str:
    """The solver to use for `family` (its default when None); raises BadInput when the
    family does not support it."""
    supported = puzzles.get(family).SOLVERS
    if solver is None:
        return supported[0]
    if solver not in supported:
        raise BadInput(f"family {family} supports solver {', '.join(supported)}, not {solver!r}")
    return solver


def _run_solver(instance: Instance, solver: str, limits: Limits) -> tuple[SolverResult, Any]:
    """(the solver's result, the decoded family solution or None)."""
    family = puzzles.get(instance.family)
    if solver == "highs":
        from puzzlesweep.solvers import highs

        result = highs.solve(family.model(instance.params), limits)
        decoded = None
        if result.solution is not None:
            decoded = family.from_mip(instance.params, result.solution)
    else:
        from puzzlesweep.solvers import backtrack

        result = backtrack.solve(family.search(instance.params), limits)
        decoded = tuple(result.solution) if result.solution is not None else None
    return result, decoded


def solve_instance(instance: Instance, solver: str, limits: Limits) -> dict[str, Any]:
    """Solve and verify one instance; returns the result fields of one catalog row.

    Keys: family, instance_key, solver, solver_version, status, objective, bound, gap,
    solve_seconds, nodes, solution (the family's compact text), verified (bool, or None
    when there is no solution to check), error, worker, started_at, finished_at (UTC),
    time_limit (seconds), node_limit, params (dict). A verified objective is the
    verifier's recomputed value; a solution the verifier rejects is kept, with
    verified False and the verifier's message in `error`.
    """
    family = puzzles.get(instance.family)
    started_at = datetime.now(UTC)
    t0 = time.perf_counter()
    row: dict[str, Any] = {
        "family": instance.family,
        "instance_key": instance.key,
        "solver": solver,
        "solver_version": "",
        "status": "error",
        "objective": None,
        "bound": None,
        "gap": None,
        "solve_seconds": None,
        "nodes": None,
        "solution": None,
        "verified": None,
        "error": None,
        "worker": socket.gethostname(),
        "started_at": started_at,
        "finished_at": None,
        "time_limit": float(limits.time_limit),
        "node_limit": limits.node_limit,
        "params": instance.params.model_dump(),
    }
    try:
        result, decoded = _run_solver(instance, solver, limits)
        row.update(
            status=result.status,
            solver_version=result.solver_version,
            objective=result.objective,
            bound=result.bound,
            gap=result.gap,
            solve_seconds=result.seconds,
            nodes=result.nodes,
            error=result.message,
        )
        if decoded is not None:
            row["solution"] = family.encode(decoded)
            try:
                value = family.verify(instance.params, decoded)
            except InvalidSolution as exc:
                row.update(verified=False, error=f"verifier: {exc}")
            else:
                matches = result.objective is not None and math.isclose(
                    value, result.objective, abs_tol=1e-6
                )
                row["verified"] = matches
                if matches:
                    row["objective"] = float(value)
                else:
                    row["error"] = f"verifier recomputed {value}, solver said {result.objective}"
    except Exception as exc:  # one crashing instance must not lose the batch
        last = traceback.extract_tb(exc.__traceback__)[-1]
        row.update(status="error", error=f"{type(exc).__name__}: {exc} ({last.name}:{last.lineno})")
    if row["solve_seconds"] is None:
        row["solve_seconds"] = time.perf_counter() - t0
    row["finished_at"] = datetime.now(UTC)
    return row
