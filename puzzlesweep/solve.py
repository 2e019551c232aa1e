"""Solve one instance end to end: build, solve, decode, verify. Knows no orchestration.

`solve_instance(instance, solver, limits)` is what the CLI's `solve` and each batch's
child process call. `solve_classes` is the one grouping of equivalent instances: a batch
(or `solve_instances`, in one process) solves one `canonical_instance` per class and
makes every member's row with `carry_over`. `verified_fields` is the one path from a
decoded answer to a verified row's fields, used here, by proofs and by re-checks of
stored rows. Nothing here raises for a failing model, solver or verifier: the failure
becomes a result with status `error` and its message, so a batch always reports every
instance.
"""

import math
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from puzzlesweep import puzzles
from puzzlesweep.core import BadInput, InvalidSolution, make_params, whole
from puzzlesweep.puzzles import Instance
from puzzlesweep.solvers import Limits, SolverResult, engines


def check_solver(family: str, solver: str | None) -> str:
    """The solver to use for `family` (its default when None: `auto` for the MIP
    families); raises BadInput when the family does not support it (`puzzles.solvers`)."""
    supported = puzzles.solvers(puzzles.get(family))
    if solver is None:
        return supported[0]
    if solver not in supported:
        if solver in engines.refused():
            engines.get(solver)  # raises why the installed engine cannot run
        raise BadInput(f"family {family} supports solver {', '.join(supported)}, not {solver!r}")
    return solver


def _left(limits: Limits, started: float) -> Limits | None:
    """`limits` with the time that is left since `started` (perf_counter), or None when
    none is: an instance's time limit counts from the start of building its model."""
    left = limits.time_limit - (time.perf_counter() - started)
    return replace(limits, time_limit=left) if left > 0 else None


def _out_of_time(started: float) -> SolverResult:
    seconds = time.perf_counter() - started
    message = f"the time limit ran out while the model was built ({seconds:.1f} s)"
    return SolverResult("time_limit", seconds=seconds, message=message)


def resolve_solver(instance: Instance, solver: str) -> str:
    """The engine that runs `instance` under `solver`: for `auto`, the family's measured
    choice for the canonical params (`auto_solver`, an engine that takes a MIP: see
    benchmarks/README.md); any other solver is itself."""
    if solver != puzzles.AUTO:
        return solver
    family = puzzles.get(instance.family)
    return engines.get(family.auto_solver(family.canonical(instance.params)), "optimum").name


def _run_solver(instance: Instance, solver: str, limits: Limits) -> tuple[SolverResult, Any]:
    """(the engine's result, the decoded solution of the canonical form, or None).

    The engine (`solvers.engines`) always sees `canonical(params)`, so equivalent
    instances are one model: the family's MIP (`model`, `from_mip`) or search problem
    (`search`, optional `from_search`). Its time limit is what is left of
    `limits.time_limit` once the model is built."""
    started = time.perf_counter()
    family = puzzles.get(instance.family)
    params = family.canonical(instance.params)
    engine = engines.get(solver)
    problem = family.model(params) if engine.takes == "mip" else family.search(params)
    if (left := _left(limits, started)) is None:
        return _out_of_time(started), None
    result = engine.load().solve(problem, left)
    if result.solution is None:
        return result, None
    if engine.takes == "mip":
        return result, family.from_mip(params, result.solution)
    from_search = getattr(family, "from_search", lambda p, raw: tuple(raw))
    return result, from_search(params, result.solution)


@dataclass(frozen=True)
class SolveRequest:
    """One instance to solve in a solver process (`isolate.Child.solve`): the
    `instance`, the engine or search `solver` (a name of `families`' solvers), its
    `limits`, and whether to `count` solutions. `wire()` is its JSON form across the
    process boundary and `of_wire` its inverse (raises ValidationError for bad params,
    KeyError for an unknown family); `solve()` its row (`solve_instance`); `failed` its
    row when the solver process failed (`isolate.Request`)."""

    instance: Instance
    solver: str
    limits: Limits
    count: bool = False

    def wire(self) -> dict[str, Any]:
        """{"family", "params", "solver", "time_limit" (s), "node_limit", "count"}."""
        return {
            "family": self.instance.family,
            "params": self.instance.params.model_dump(),
            "solver": self.solver,
            "time_limit": self.limits.time_limit,
            "node_limit": self.limits.node_limit,
            "count": self.count,
        }

    @classmethod
    def of_wire(cls, data: dict[str, Any]) -> "SolveRequest":
        """The request whose `wire()` is `data`."""
        params = make_params(puzzles.get(data["family"]).Params, data["params"])
        limits = Limits(data["time_limit"], data["node_limit"])
        return cls(Instance(data["family"], params), data["solver"], limits, data["count"])

    def solve(self) -> dict[str, Any]:
        """Its row, solved and verified here (`solve_instance`)."""
        return solve_instance(self.instance, self.solver, self.limits, self.count)

    def failed(self, failure: dict[str, Any]) -> dict[str, Any]:
        """Its row when the solve failed: `empty_row` with `failure`'s status, error
        and times."""
        return {**empty_row(self.instance, self.solver, self.limits), **failure}


def empty_row(instance: Instance, solver: str, limits: Limits) -> dict[str, Any]:
    """Every field of an instance's row before its solver answers: status `error`, no
    numbers, no solution, this host as worker, started now (UTC)."""
    return {
        "family": instance.family,
        "instance_key": instance.key,
        "params_key": instance.params_key,
        "equivalent": False,
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
        "solutions": None,
        "inequivalent": None,
        "worker": socket.gethostname(),
        "started_at": datetime.now(UTC),
        "finished_at": None,
        "time_limit": float(limits.time_limit),
        "node_limit": limits.node_limit,
        "params": instance.params.model_dump(),
    }


def result_fields(result: SolverResult) -> dict[str, Any]:
    """The fields of a row that a solver's result gives: status, solver_version,
    objective and bound (an integral value as an int, `core.whole`), gap, solve_seconds,
    nodes and error (its message)."""
    return {
        "status": result.status,
        "solver_version": result.solver_version,
        "objective": whole(result.objective),
        "bound": whole(result.bound),
        "gap": result.gap,
        "solve_seconds": result.seconds,
        "nodes": result.nodes,
        "error": result.message,
    }


def verified_fields(family, params, solution: Any, claimed: float | None) -> dict[str, Any]:
    """The one check of an answer: `solution` (decoded, for `params`) encoded, and
    verified by the family's verifier against the `claimed` objective. Returns
    {"solution": text, "verified": bool, "error": None or why} plus, when it holds,
    "objective": the verifier's recomputed value (so a row's objective is never the
    solver's float alone). Never raises for a solution that breaks the rules."""
    fields: dict[str, Any] = {"solution": family.encode(solution)}
    try:
        value = family.verify(params, solution)
    except InvalidSolution as exc:
        return {**fields, "verified": False, "error": f"verifier: {exc}"}
    if claimed is None or not math.isclose(value, claimed, abs_tol=1e-6):
        return {**fields, "verified": False, "error": f"verifier recomputed {value}, not {claimed}"}
    return {**fields, "verified": True, "error": None, "objective": whole(float(value))}


def _fill(row: dict[str, Any], instance: Instance, result: SolverResult, decoded: Any) -> None:
    """Copy the solver's fields into `row`, carry the canonical solution back to the
    instance, and check it against the instance's own params (`verified_fields`)."""
    row.update(result_fields(result))
    if decoded is not None:
        family = puzzles.get(instance.family)
        decoded = family.from_canonical(instance.params, decoded)
        checked = verified_fields(family, instance.params, decoded, result.objective)
        if checked["error"] is None:
            checked["error"] = result.message
        row.update(checked)


def count_optima(
    instance: Instance, result: SolverResult, limits: Limits, engine: str
) -> dict[str, Any]:
    """The fields `solutions` and `inequivalent` of a proven optimum `result` of
    `instance`: how many optimal solutions its canonical form has, and how many up to
    the board's symmetries (`family.symmetries`), counted exactly on the family's model
    by `engine` when it counts, else by the first engine of the table that does (SCIP:
    `solvers.scip.count`, Burnside's lemma), under its own `limits.time_limit` seconds.
    Equivalent instances have the same numbers (a symmetry of the parameters is a
    bijection of their solutions). When the count fails (it ran out of time, or the
    engine or Burnside's lemma failed) both are None and `error` is "count: <reason>":
    the optimum itself stands. {} for a result that is not optimal. Never raises."""
    if result.status != "optimal" or result.objective is None:
        return {}
    family = puzzles.get(instance.family)
    params = family.canonical(instance.params)
    try:
        if "count" not in engines.get(engine).capabilities:
            engine = engines.with_capability("count")[0]  # read the table only then
        counter = engines.module(engine, "count")
        model, symmetries = family.model(params), family.symmetries(params)
        found = counter.count(model, result.objective, symmetries, limits)
    except ValueError as exc:  # Burnside's sum is not divisible by the group order
        return _no_count(str(exc))
    except Exception as exc:  # a crashed count must not lose the optimum either
        return _no_count(f"{type(exc).__name__}: {exc}")
    if not found.complete:
        return _no_count(f"stopped at the time limit after {found.seconds:.1f} s")
    return {"solutions": found.solutions, "inequivalent": found.inequivalent}


def _no_count(reason: str) -> dict[str, Any]:
    """The count fields of a count that failed for `reason`."""
    return {"solutions": None, "inequivalent": None, "error": f"count: {reason}"}


def check_count(family: str, solver: str) -> None:
    """Raises BadInput unless `family` can count its optima (`symmetries`, a MIP) and
    `solver` is auto or an engine that solves its MIP (the count itself runs on the
    first engine of the table that counts: `solvers.engines`)."""
    module = puzzles.get(family)
    mip = solver == puzzles.AUTO or engines.get(solver).takes == "mip"
    if not hasattr(module, "symmetries") or not mip:
        raise BadInput(
            f"counting optima is for the MIP families (domination, no_k_in_row, "
            f"monochromatic_lines) with auto or a MIP engine, not {family} with {solver}"
        )


def solve_instances(
    instances: list[Instance], solver: str, limits: Limits, count: bool = False
) -> list[dict[str, Any]]:
    """One result row per instance, in order (the fields of `solve_instance`), each
    class of equivalent instances solved once in this process (`solve_classes`).
    Solver `auto` is resolved per class (`resolve_solver`) and the row names the
    engine. With `count`, a proven optimum also gets `solutions` and `inequivalent`
    (`count_optima`; their seconds are not in `solve_seconds`). Never raises for a
    failing model, solver or verifier, except MemoryError (out of memory, nothing here
    can make a row: the solver process does, `isolate.serve`)."""
    return solve_classes(instances, lambda canonical: _solve(canonical, solver, limits, count))


def solve_classes(
    instances: list[Instance],
    solve_canonical: Callable[[Instance], dict[str, Any]],
    done: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per instance, in order: the instances that share an `instance_key` are
    equivalent, so `solve_canonical` (in this process, or in a batch's child process)
    runs once per class, on its `canonical_instance`, and every member's row is made
    from that answer by `carry_over` (the first member's as solved, every later one an
    *equivalent row*: `equivalent` True, solve_seconds and nodes 0). `done(n)`, when
    given, is called after each class with its number of instances."""
    classes: dict[str, list[int]] = {}
    for index, instance in enumerate(instances):
        classes.setdefault(instance.key, []).append(index)
    rows: list[dict[str, Any]] = [{} for _ in instances]
    for members in classes.values():
        solved = solve_canonical(canonical_instance(instances[members[0]]))
        for n, index in enumerate(members):
            rows[index] = carry_over(solved, instances[index], n > 0)
        if done is not None:
            done(len(members))
    return rows


def _solve(instance: Instance, solver: str, limits: Limits, count: bool) -> dict[str, Any]:
    """The row of one instance solved as it is in this process (see `solve_instance`)."""
    row = empty_row(instance, solver, limits)
    t0 = time.perf_counter()
    try:
        engine = resolve_solver(instance, solver)
        row["solver"] = engine
        result, decoded = _run_solver(instance, engine, limits)
        _fill(row, instance, result, decoded)
        # the wall time from the start of building the model to the verified answer, less
        # the one-time load of a compiled engine in this process (outside the instance's
        # limits too); the count comes after, on its own clock
        wall = time.perf_counter() - t0 - (result.extra or {}).get("warm_seconds", 0.0)
        row["solve_seconds"] = max(row["solve_seconds"] or 0.0, wall)
        counted = count_optima(instance, result, limits, engine) if count else {}
        if counted.get("error") and row["error"] is None:
            row["error"] = counted["error"]
        row.update(solutions=counted.get("solutions"), inequivalent=counted.get("inequivalent"))
    except MemoryError:  # the model's frames hold the memory: the caller (the solver
        raise  # process, isolate.serve) makes the row once they are gone
    except Exception as exc:  # one crashing instance must not lose the batch
        last = traceback.extract_tb(exc.__traceback__)[-1]
        row.update(status="error", error=f"{type(exc).__name__}: {exc} ({last.name}:{last.lineno})")
    if row["solve_seconds"] is None:
        row["solve_seconds"] = time.perf_counter() - t0
    row["finished_at"] = datetime.now(UTC)
    return row


def solve_instance(
    instance: Instance, solver: str, limits: Limits, count: bool = False
) -> dict[str, Any]:
    """Solve and verify one instance; returns the result fields of one catalog row.

    Keys: family, instance_key (of the canonical form), params_key (of these params),
    equivalent (False here), solver, solver_version, status, objective, bound, gap,
    solve_seconds, nodes, solution (the family's compact text, for these params),
    verified (bool, or None when there is no solution to check), error, solutions and
    inequivalent (counts of the optima with `count`, else None), worker,
    started_at, finished_at (UTC), time_limit (seconds), node_limit, params (dict). A
    verified objective is the verifier's recomputed value; a solution the verifier
    rejects is kept, with verified False and the verifier's message in `error`.
    """
    return solve_instances([instance], solver, limits, count)[0]


def canonical_instance(instance: Instance) -> Instance:
    """The canonical form of `instance` (the family's `canonical(params)`): the one
    instance a batch solves for a whole class of equivalent instances."""
    family = puzzles.get(instance.family)
    return Instance(instance.family, family.canonical(instance.params))


def carry_over(row: dict[str, Any], instance: Instance, equivalent: bool) -> dict[str, Any]:
    """The row of `instance` made from `row`, the result of its canonical form: the same
    status, bound and limits, the solution carried to `instance`'s params by the symmetry
    (`from_canonical`), encoded and verified again against those params (unless they
    are the params `row` was solved for: then it is `row`, re-keyed). `equivalent`
    marks a row that was not solved itself (its solve_seconds and nodes become 0)."""
    family = puzzles.get(instance.family)
    new = {
        **row,
        "instance_key": instance.key,
        "params_key": instance.params_key,
        "equivalent": equivalent,
        "params": instance.params.model_dump(),
    }
    if equivalent:
        new.update(solve_seconds=0.0, nodes=0)
    if row.get("solution") is None or instance.params_key == row.get("params_key"):
        return new  # no solution, or the very instance `row` solved and verified
    try:
        decoded = family.from_canonical(instance.params, family.decode(row["solution"]))
    except ValueError as exc:
        return {**new, "verified": False, "error": f"verifier: {exc}"}
    checked = verified_fields(family, instance.params, decoded, row.get("objective"))
    checked["verified"] = checked["verified"] and row.get("verified") is not False
    checked["error"] = checked["error"] or row.get("error")
    return {**new, **checked}
