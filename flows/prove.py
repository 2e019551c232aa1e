"""The prove flow: one hard instance split into subproblems solved across the cluster.

The logic of an attempt (its handle `Proof`, one part's solve, the combined row and
its certificate, the re-check) is in `puzzlesweep.proof`; this module only submits and
collects, through the submit loop that sweeps use (`flows.submit`). Each part is a
Prefect task on Dask (a part runs for tens of seconds or more,
so a task's own cost is no concern); its row is written by the task itself before it
returns, so a killed run loses only the parts in flight, and a re-run solves only the
parts whose stored row is not final (`proof.is_done`). At most one part per worker is
in flight, so each new part gets the best incumbent known at its start as a cutoff
(from the first part on: the model's start, `proof.start_row`).

A prove run is recorded in the catalog's `runs` table as a sweep's run is (sweep
`prove-KEY`, a heartbeat while it runs, then `finished`, `failed` or `interrupted`), and
a second run of the same attempt at once is refused. An attempt whose every part is
final in the catalog, with its combined row written after them, is answered from the
catalog (`settled`): no cluster, no API, no row written.
"""

import json
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from puzzlesweep import catalog
from puzzlesweep.flows.cluster import batch_children, dask_runner, worker_identity
from puzzlesweep.flows.faults import retry_transient
from puzzlesweep.flows.run_record import RunRecord, manifest, new_run_id, recorded
from puzzlesweep.flows.settings import RunSettings
from puzzlesweep.flows.submit import submit_all
from puzzlesweep.isolate import Children
from puzzlesweep.proof import (
    PROBE_FIELDS,
    PartRequest,
    Proof,
    best_row,
    build,
    combined_row,
    cutoff_for,
    is_done,
    replace_limits,
    start_row,
    stored,
    write_row,
)
from puzzlesweep.solvers import Limits
from puzzlesweep.solvers import split as splitting
from puzzlesweep.solvers.mip import has_integral_objective


@task(
    name="solve-part",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=2,
    retry_condition_fn=retry_transient,
)
def solve_part(
    proof: Proof,
    index: int | None,
    cutoff: float | None,
    limits: Limits,
    run_id: str,
    path: str,
    memory_limit: int | None = None,
    children: Children | None = None,
) -> dict:
    """Solve part `index` (None: the whole instance, the probe) under `limits`
    (seconds), with objective <= `cutoff` when given, and write its row to the catalog
    at `path` (its own commit) before returning it.

    The part runs in this thread's solver child process (`isolate.Child`, leased from
    `children` or the Dask worker's) under `memory_limit` bytes (default: the worker's
    memory limit per thread), as a sweep's instances do: a part that crashes its
    process, runs out of memory or overruns its time limit by `isolate.GRACE` becomes
    an `error` or `time_limit` row that proves nothing. Raises OSError when the catalog
    cannot be written (Prefect retries twice) and isolate.Interrupted when the solver
    was stopped from outside (not retried, nothing written)."""
    worker, worker_memory = worker_identity()
    request = PartRequest(proof, index, cutoff, limits, run_id)
    with batch_children(children) as held, held.lease(memory_limit or worker_memory) as child:
        row = child.solve(request)
    row["worker"] = worker
    write_row(path, proof, row, "probe" if index is None else f"{index:05d}")
    return row


@flow(name="prove")
def prove(
    proof: Proof,
    catalog_path: str = "results",
    workers: int = 2,
    probe_seconds: float = 0.0,
    wall_seconds: float | None = None,
    run_id: str | None = None,
    memory_limit: int | None = None,
) -> dict:
    """Run the attempt `proof` into `catalog_path` with at most `workers` parts in
    flight, its rows under `run_id` (None: a new one), each part in a solver process
    under `memory_limit` bytes (`solve_part`); returns `_report`'s dict.

    `probe_seconds` > 0 first solves the whole instance that long (once per key: a
    stored probe is reused), for an incumbent and a dual bound. `wall_seconds` caps the
    whole run: no part starts after it, and each part's time limit is cut to what is
    left (such a part is not final for the requested limit, so a re-run solves it
    again)."""
    started = time.perf_counter()
    catalog_path = catalog.resolve(catalog_path)
    _, model, split, description = build(proof)
    parts, probe, _ = stored(catalog_path, proof)
    already = {i for i, row in parts.items() if is_done(row, proof.limits)}
    todo = [i for i in range(len(split.parts)) if i not in already]
    logger = get_run_logger()
    logger.info(
        "prove %s: %d parts (%d before symmetry), %d final in the catalog, %d to solve; %s",
        proof.key,
        len(split.parts),
        split.total,
        len(already),
        len(todo),
        description,
    )
    flight = _InFlight(
        proof,
        catalog_path,
        run_id or new_run_id(),
        split,
        has_integral_objective(model),
        parts,
        probe,
        start_row(proof, model),
        # the probe (None) runs beside the first part; parts started after it ends get
        # its incumbent as their cutoff
        ([None] if probe_seconds > 0 and probe is None else []) + todo,
        probe_seconds,
        math.inf if wall_seconds is None else started + wall_seconds,
        logger,
        memory_limit=memory_limit,
    )
    submit_all(flight.submit_next, max(1, workers), flight.on_result, flight.on_failure)
    row = combined_row(proof, parts, flight.probe, flight.run_id)
    write_row(catalog_path, proof, row, "combined")
    return _report(proof, len(split.parts), parts, len(already), flight.solved, row, started)


@dataclass
class _InFlight:
    """One prove run's parts while they are solved: the queue of what to submit (the
    probe as None, then the parts not final in the catalog), the wall-clock `deadline`
    (a `time.perf_counter` time; inf: none), and the rows that came back (`parts`,
    `probe`, `solved`). The submit loop (`flows.submit.submit_all`) calls its methods;
    each part submitted gets the best incumbent known so far as its cutoff."""

    proof: Proof
    catalog_path: str
    run_id: str
    split: splitting.Split
    integral: bool
    parts: dict[int, dict]
    probe: dict | None
    start: dict | None  # the model's start as an incumbent (`proof.start_row`)
    queue: list[int | None]
    probe_seconds: float
    deadline: float
    logger: Any
    solved: int = 0
    memory_limit: int | None = None

    def limits_now(self) -> Limits | None:
        """The attempt's limits cut to the wall time left; None under one second left."""
        seconds = min(self.proof.limits.time_limit, self.deadline - time.perf_counter())
        return replace_limits(self.proof.limits, seconds) if seconds >= 1.0 else None

    def submit_next(self):
        """Submit the next part (or the probe, for at most `probe_seconds`): returns
        (index, future), or None when the queue is empty or the wall time is out (the
        rest stays missing, for a re-run)."""
        if not self.queue or (limits := self.limits_now()) is None:
            return None
        index = self.queue.pop(0)
        if index is None:
            limits = replace_limits(limits, min(self.probe_seconds, limits.time_limit))
        known = [*self.parts.values(), self.probe, self.start]
        cutoff = cutoff_for(self.proof, best_row(known), self.integral)
        name = "probe" if index is None else f"part-{index:05d}"
        future = solve_part.with_options(task_run_name=name).submit(
            self.proof, index, cutoff, limits, self.run_id, self.catalog_path, self.memory_limit
        )
        return index, future

    def on_result(self, index: int | None, row: dict) -> None:
        """Keep the row of part `index` (None: the probe) and log it."""
        if index is None:
            self.probe = row
            self.logger.info("probe: %s, objective %s, bound %s", *map(row.get, PROBE_FIELDS))
            return
        self.parts[index] = row
        self.solved += 1
        self.logger.info(
            "part %d (%s): %s, objective %s, lower %s",
            index,
            self.split.parts[index].label,
            row["status"],
            row["objective"],
            json.loads(row["subproblem"])["lower"],
        )

    def on_failure(self, index: int | None, exc: Exception) -> bool:
        """Log a part that failed every attempt; it stays missing (False: do not stop)."""
        self.logger.error("part %s failed: %s: %s", index, type(exc).__name__, exc)
        return False


def _report(
    proof: Proof, total: int, parts: dict, already: int, solved: int, row: dict, started: float
) -> dict:
    """{"run_id" (the run that wrote the combined `row`), "key", "parts" (`total`),
    "stored" (final parts found in the catalog), "solved" (parts solved now), "missing"
    (parts without a row), "closed" (parts optimal or infeasible), "at_limit" (parts
    stopped by a limit), "errors" (parts whose solver failed: crashed, out of memory),
    "status", "objective", "bound", "seconds" (since `started`, perf_counter), "row"}."""
    return {
        "run_id": row["run_id"],
        "key": proof.key,
        "parts": total,
        "stored": already,
        "solved": solved,
        "missing": sum(1 for i in range(total) if i not in parts),
        "closed": sum(1 for r in parts.values() if r["status"] in ("optimal", "infeasible")),
        "at_limit": sum(1 for r in parts.values() if r["status"] in ("time_limit", "node_limit")),
        "errors": sum(1 for r in parts.values() if r["status"] == "error"),
        "status": row["status"],
        "objective": row["objective"],
        "bound": row["bound"],
        "seconds": time.perf_counter() - started,
        "row": row,
    }


def settled(proof: Proof, catalog_path: str, probe_seconds: float = 0.0) -> dict | None:
    """The `_report` of attempt `proof` from the catalog alone (nothing solved, nothing
    written), or None when work is left: a part without a row final for `proof.limits`
    (`is_done`), a probe asked for (`probe_seconds` > 0) and not stored, or no combined
    row written after the newest part and probe."""
    started = time.perf_counter()
    _, _, split, _ = build(proof)
    parts, probe, combined = stored(catalog_path, proof)
    if len(parts) < len(split.parts) or not all(is_done(r, proof.limits) for r in parts.values()):
        return None
    if (probe_seconds > 0 and probe is None) or combined is None:
        return None
    if combined["finished_at"] < max(r["finished_at"] for r in [*parts.values(), probe] if r):
        return None
    return _report(proof, len(split.parts), parts, len(parts), 0, combined, started)


def _record(proof: Proof, catalog_path: str, probe_seconds: float, wall: float | None):
    """The `RunRecord` of a new prove run of `proof` (sweep `prove-KEY`): `spec` holds
    the attempt as JSON, `planned` counts its parts, `skipped` those final in the
    catalog, and its counts are those of its parts and probe (`_written`), not its
    combined row."""
    _, _, split, _ = build(proof)
    parts, _, _ = stored(catalog_path, proof)
    attempt = {
        "family": proof.family,
        "params": proof.params,
        "split": proof.split,
        "width": proof.width,
        "solver": proof.solver,
        "time_limit": proof.limits.time_limit,
        "cutoff": proof.cutoff,
        "probe_seconds": probe_seconds,
        "wall_seconds": wall,
    }
    skipped = sum(1 for row in parts.values() if is_done(row, proof.limits))
    columns = manifest(f"prove-{proof.key}", json.dumps(attempt), len(split.parts), skipped)
    return RunRecord(columns["run_id"], catalog_path, columns, written=_written)


COUNTS = "SELECT status, count(*) FROM results WHERE run_id = ? AND solver NOT LIKE '%-split' "
COUNTS += "GROUP BY 1"  # the parts and the probe a run solved (not its combined row)


def _written(catalog_path: str, run_id: str) -> dict[str, int]:
    """The counts of the parts and probe run `run_id` wrote: "solved" and one per status
    ({} when the results cannot be read)."""
    try:
        _, rows = catalog.query(catalog_path, COUNTS, [run_id])
    except Exception:  # noqa: BLE001 (no results table yet, or unreadable: no counts)
        return {}
    return {**catalog.status_counts(Counter(dict(rows))), "solved": sum(n for _, n in rows)}


def run_prove(
    proof: Proof,
    settings: RunSettings,
    probe_seconds: float = 0.0,
    wall_seconds: float | None = None,
    announce: Callable[[str], None] | None = None,
    on_running: Callable[..., None] | None = None,
) -> dict:
    """Run `prove` on the cluster of `settings` (a `RunSettings`: the scheduler at its
    address, or a new LocalCluster; each part in a solver process under its
    `memory_limit`, None: the worker's memory per thread) under the configured or a
    temporary Prefect API, started as a sweep's are (`RunSettings.start_with_api`) and
    recorded in `runs` (`run_record.recorded`); `on_running` is the flow's Prefect
    `on_running` hook. Returns the flow's report plus "scheduler" and "dashboard"; an
    attempt already `settled` in the catalog returns its stored report (both None) and
    starts nothing. Raises BadInput for a bad split or address, or while a run of the
    same attempt is alive."""
    from prefect import tags

    build(proof)  # bad input fails before any cluster starts
    say = announce or (lambda line: None)
    catalog_path = catalog.resolve(settings.catalog)
    if (report := settled(proof, catalog_path, probe_seconds)) is not None:
        say(f"prove {proof.key}: every part is final in the catalog, nothing to solve")
        return {**report, "scheduler": None, "dashboard": None}
    record = _record(proof, catalog_path, probe_seconds, wall_seconds)
    with recorded(record), settings.start_with_api(None, say, "parts") as started:
        record.manifest["dask_dashboard_url"] = started.dashboard
        record.write()
        with tags(f"sweep:prove-{proof.key}", f"family:{proof.family}"):
            flow_ = prove.with_options(
                task_runner=dask_runner(started.scheduler),
                flow_run_name=f"prove {proof.family} {proof.key} {datetime.now():%Y-%m-%d %H:%M}",
                on_running=[on_running] if on_running else None,
            )
            report = flow_(
                proof, catalog_path, max(1, started.workers), probe_seconds, wall_seconds,
                record.run_id, settings.memory_limit,
            )  # fmt: skip
    return {**report, "scheduler": started.scheduler, "dashboard": started.dashboard}
