"""The sweep flow: spec → jobs → skip finished → batches → one Prefect task per batch.

Batches are cut as the run goes (`batches.Planner`): their sizes follow the measured
seconds per instance, so that neither the per-task overhead nor the last batches
dominate, and two per worker are submitted at a time.

Prefect orchestrates at batch granularity (state, retries, logs); Dask does the fan-out
through `prefect_dask.DaskTaskRunner`, on an embedded `LocalCluster` or on an existing
scheduler (`address`). Each batch task solves its instances, verifies them and appends
its rows to the catalog's `results` table as one Delta commit before it returns: a
result that was reported is never lost, and a re-run solves only what the catalog does
not hold yet. The run's row in `runs` carries a heartbeat while the flow lives.

Faults: every instance is solved in a child process of its worker under hard time and
memory limits (`isolate`), so a solver that overruns, runs out of memory or crashes
becomes a row with its status and message. A batch's commit carries its run and index
as a Delta application transaction, so an attempt that Dask repeats after losing a
worker, or that Prefect retries after a transient failure (`retries`), writes nothing
twice: every instance is in the catalog once. A batch that fails all its attempts is
counted in the report and the others go on.

This module holds no puzzle logic: it only groups, submits and counts.
"""

import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import TerminationSignal
from prefect.states import Cancelled, Failed

from puzzlesweep import __version__, catalog, puzzles
from puzzlesweep.core import BadInput
from puzzlesweep.flows import run_record
from puzzlesweep.flows.batches import Batch, Planner
from puzzlesweep.flows.cluster import (
    Cluster,
    Watch,
    configured_api,
    connect,
    prefect_api,
    quiet_closed_heartbeats,
    report_to,
    warn_remote_without_api,
    worker_events,
    worker_identity,
)
from puzzlesweep.flows.control import Control
from puzzlesweep.flows.faults import (
    CatalogUnwritable,
    RunStopped,
    first_line,
    permanent,
    retry_transient,
)
from puzzlesweep.flows.progress import Progress
from puzzlesweep.flows.run_record import SpecSource
from puzzlesweep.flows.submit import submit_all
from puzzlesweep.solve import empty_row, solve_classes

RETRIES = 2  # extra attempts of a batch after a transient failure (Prefect task retries)


def _report(app_id: str, rows: list[dict], attempt: int, seconds: float) -> dict:
    return {
        "commit": app_id,
        "counts": dict(Counter(row["status"] for row in rows)),
        "instances": len(rows),
        "verified": sum(bool(row["verified"]) for row in rows),
        "attempt": attempt,
        "seconds": seconds,
    }


@task(
    name="solve-batch",
    cache_policy=NO_CACHE,
    retries=RETRIES,
    retry_delay_seconds=2,
    retry_condition_fn=retry_transient,
)
def solve_batch(
    batch: Batch, catalog_path: str, memory_limit: int | None = None, topic: str | None = None
) -> dict:
    """Solve, verify and commit one batch; returns {"commit" (its application
    transaction id, RUN-NUMBER), "counts" (status → count), "instances", "verified",
    "attempt" (1 for the first run of this task, 2 for its first retry...), "seconds"
    (wall time of this attempt)}.

    Each instance runs in this thread's child process (`isolate.Child`) under its time
    and node limits and `memory_limit` bytes (default: the Dask worker's memory limit per
    thread; None: no limit). A batch already committed (an earlier attempt wrote it, but
    its report was lost with its worker) is read back, not solved again. Raises OSError
    when the catalog cannot be written transiently (Prefect retries the task),
    CatalogUnwritable when no retry can help (`faults.permanent`: not retried), and
    isolate.Interrupted when a solver was stopped from outside (its rows are not
    written: an interrupted instance is not done). With `topic`, each finished class of
    equivalent instances is reported as a Dask event (batch number, instances) under
    that topic, which the run's progress display follows."""
    from prefect.runtime import task_run

    started = time.perf_counter()
    attempt = task_run.get_run_count() or 1
    if attempt > 1:
        get_run_logger().warning("batch %d: attempt %d", batch.number, attempt)
    family = puzzles.get(batch.family)
    app_id = f"{batch.run_id}-{batch.number:05d}"
    if catalog.committed(catalog_path, app_id):
        _, rows = catalog.query(
            catalog_path,
            "SELECT status, verified FROM results WHERE run_id = ? AND family = ? "
            "AND params_key IN (SELECT unnest(?))",
            [batch.run_id, batch.family, [i.params_key for i in batch.instances()]],
        )
        rows = [{"status": status, "verified": verified} for status, verified in rows]
    else:
        rows = _solve_rows(batch, memory_limit, topic)
        try:
            catalog.write_batch(catalog_path, family.Params, rows, app_id)
        except Exception as exc:
            if permanent(exc):
                raise CatalogUnwritable(
                    f"catalog {catalog_path} cannot be written: {first_line(exc)}"
                ) from None
            raise
        _tell(batch, rows)
    report = _report(app_id, rows, attempt, time.perf_counter() - started)
    _publish(batch, rows, report)
    return report


def _number(value: Any) -> str:
    """A number as people read it: integers without '.0', lists comma-joined, None as
    '-'."""
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(map(_number, value))
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    return str(value)


def instance_words(family: str, row: dict) -> str:
    """An instance named by its parameters, e.g. `domination[piece=knight rows=8 cols=8]`
    (`row`: a result row, its parameters in columns or under "params")."""
    values = {**row, **(row.get("params") or {})}  # a solved row holds them in `params`
    fields = puzzles.get(family).Params.model_fields
    return f"{family}[{' '.join(f'{k}={_number(values.get(k))}' for k in fields)}]"


def _logger():
    """The task run's logger, or this module's outside a run (a task's body called
    directly)."""
    import logging

    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def _tell(batch: Batch, rows: list[dict]) -> None:
    """Log one line per instance of `batch` on its task run: parameters in words,
    status, objective, bound, gap and seconds. INFO; WARNING for a stop at a time or
    node limit; ERROR with the message for an error."""
    import logging

    logger = _logger()
    for row in rows:
        status = row["status"]
        line = (
            f"{instance_words(batch.family, row)}: {status}, objective "
            f"{_number(row.get('objective'))}, bound {_number(row.get('bound'))}, gap "
            f"{_number(row.get('gap'))}, {row.get('solve_seconds') or 0:.2f} s"
        )
        if status == "error":
            logger.error("%s: %s", line, row.get("error"))
        else:
            level = logging.WARNING if status in ("time_limit", "node_limit") else logging.INFO
            logger.log(level, "%s", line)


def _publish(batch: Batch, rows: list[dict], report: dict) -> None:
    """Show what the batch did in Prefect's UI: a table artifact of its instances (or
    of its counts, when they were read back), its commit and seconds in the description."""
    from prefect.artifacts import create_table_artifact
    from prefect.context import TaskRunContext

    if TaskRunContext.get() is None:  # the task's body called directly: no task run
        return
    if rows and "family" in rows[0]:
        table = [
            {
                "instance": instance_words(batch.family, row),
                "status": row["status"],
                "objective": _number(row.get("objective")),
                "bound": _number(row.get("bound")),
                "gap": _number(row.get("gap")),
                "seconds": round(row.get("solve_seconds") or 0.0, 2),
            }
            for row in rows
        ]
    else:
        table = [{"status": k, "instances": n} for k, n in sorted(report["counts"].items())]
    n = report["instances"]
    create_table_artifact(
        table=table,
        description=f"batch {batch.number} ({batch.family}): {n} "
        f"{'instance' if n == 1 else 'instances'} committed as {report['commit']}, "
        f"attempt {report['attempt']}, {report['seconds']:.1f} s",
    )


def _solve_rows(batch: Batch, memory_limit: int | None, topic: str | None) -> list[dict]:
    """The catalog rows of every instance of `batch`, each solved and verified in this
    thread's child process."""
    from puzzlesweep.flows.isolate import child_for_thread
    from puzzlesweep.puzzles import Instance

    worker, worker_memory = worker_identity()
    quiet_closed_heartbeats()  # also on a worker that joined after the warm-up
    child = child_for_thread(memory_limit or worker_memory)

    def solve_canonical(canonical: Instance) -> dict:
        request = {
            "family": batch.family,
            "params": canonical.params.model_dump(),
            "solver": batch.solver,
            "time_limit": batch.limits.time_limit,
            "node_limit": batch.limits.node_limit,
            "count": batch.count,
        }
        return {**empty_row(canonical, batch.solver, batch.limits), **child.solve(request)}

    rows = solve_classes(batch.instances(), solve_canonical, report_to(topic, batch.number))
    for row in rows:
        row.update(
            run_id=batch.run_id,
            sweep=batch.sweep,
            worker=worker,
            puzzlesweep_version=__version__,
            schema_version=catalog.SCHEMA_VERSION,
        )
    return rows


@flow(name="sweep", validate_parameters=False)
def sweep(
    spec: SpecSource,
    catalog: str = "results",
    address: str | None = None,
    workers: int | None = None,
    batch_size: int | None = None,
    force: bool = False,
    memory_limit: int | None = None,
    retries: int = RETRIES,
    max_instances: int | None = None,
    allow_concurrent: bool = False,
    dashboard_address: str | None = None,
    connect_timeout: float = 10.0,
    backend: str = "dask",
    control: Control | None = None,
) -> dict:
    """Run the sweep `spec` (a path, a URL, inline TOML text, or the TOML document as a
    dict) into the catalog at `catalog`: plan it, claim and record its run in `runs`,
    solve its instances on Dask (the scheduler at `address`, or a `LocalCluster` of
    `workers` (default 2) single-threaded processes started and closed here, its
    dashboard on `dashboard_address` or none; `backend` "threads": threads of this
    process, see `cluster.Cluster`), and return the report {"run_id", "sweep", "planned",
    "skipped", "solved", "counts", "batches", "retried", "failed", "stopped",
    "seconds", "flow_run_url", "flow_run_id", "dashboard", "catalog", "scheduler"}.

    This is the flow that `puzzlesweep run`, `puzzlesweep.sweep()` and the deployments
    of deploy/prefect.yaml run: one flow run, renamed after the sweep and tagged
    `sweep:NAME` and `family:NAME` once the spec is read. `memory_limit` (bytes per
    instance), `retries` (per batch), `batch_size` (None: sized as the run goes),
    `force` (solve again what the catalog holds), `max_instances`, `allow_concurrent`
    as in `puzzlesweep run`. `control`: the caller's `Control` (stop requests, progress
    listeners, announce channel); None for a deployment.

    Ends `Completed` when every instance has a row and none is in `error`; `Failed`
    when instances ended in `error` or batches failed every attempt (the report is in
    `control.report`); `Cancelled` on a stop request (Ctrl-C, SIGTERM: the run's row
    says `interrupted`). `Failed` too, with its one line as the state's message and
    the exception in `control.error` (no traceback on the terminal): BadInput for a
    bad spec or address, or another live run of the sweep; RunStopped when the
    Prefect API, the Dask scheduler or the catalog was lost (what was written is kept,
    a re-run solves what is missing)."""
    control = control or Control()
    control.on_flow_start()
    cluster = Cluster.of(
        backend=backend,
        address=address,
        workers=workers,
        dashboard_address=dashboard_address,
        connect_timeout=connect_timeout,
    )
    if address:  # a silent scheduler is bad input: refused before the run's row is written
        connect(address, connect_timeout).close()
    try:  # a stop at any moment after the claim ends the row it wrote
        run = run_record.start(
            spec, catalog, force, max_instances, allow_concurrent, batch_size, control
        )
        _name_flow_run(run, control)
        report = _solve_run(run, control, cluster, batch_size, memory_limit, retries)
    except (KeyboardInterrupt, TerminationSignal):
        if control.record is not None:
            _interrupted(control.record, control)
        return Cancelled(message="the run was interrupted; what was written is kept")
    except (BadInput, RunStopped) as exc:  # one line, in Prefect and for the caller
        if control.record is not None:
            control.record.end("failed")
        control.error = exc
        return Failed(message=str(exc))
    except BaseException:
        if control.record is not None:
            control.record.end("failed")
        raise
    if report["stopped"]:
        _settle(run)
        control.error = RunStopped(
            f"run {run.run_id} stopped at the first batch that cannot succeed: "
            f"{report['stopped']}; the instances written before are kept"
        )
        return Failed(message=str(control.error))
    from prefect.context import FlowRunContext

    report["flow_run_id"] = str(FlowRunContext.get().flow_run.id)
    control.report = report
    return _final_state(report)


def _interrupted(run, control: Control) -> None:
    """At a stop request, before anything is torn down: the run's row says
    `interrupted`, and this flow run and its unfinished task runs are `Cancelled` in
    Prefect at once (the caller may exit before the teardown ends); then the caller
    hears of it (`control.on_stopped`)."""
    if run.ended is None:
        run.end("interrupted")
        try:
            _cancel_in_prefect()
        except Exception:  # noqa: BLE001 (an API that is gone has nothing to show)
            pass
    control.on_stopped("interrupted", None)


def _cancel_in_prefect() -> None:
    """Set this flow run, and its task runs not in a final state, to Cancelled."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.context import FlowRunContext

    flow_run_id = FlowRunContext.get().flow_run.id
    message = "interrupted (Ctrl-C or SIGTERM); what was written is kept"
    with get_client(sync_client=True) as client:
        task_runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
        for task_run in task_runs:
            if task_run.state is None or not task_run.state.is_final():
                client.set_task_run_state(task_run.id, Cancelled(message=message), force=True)
        client.set_flow_run_state(flow_run_id, Cancelled(message=message), force=True)


def _final_state(report: dict) -> Any:
    """The flow's report, or a Failed state naming what failed (the report stays in the
    caller's Control)."""
    errors = report["counts"].get("error", 0)
    if report["failed"] or errors:
        parts = [f"{len(report['failed'])} batches failed every attempt"] * bool(report["failed"])
        parts += [f"{errors} {_instances(errors)} ended in error"] * bool(errors)
        return Failed(message=f"run {report['run_id']}: {'; '.join(parts)}")
    return report


def _instances(n: int) -> str:
    return "instance" if n == 1 else "instances"


def _settle(run) -> None:
    try:
        run_record.settle(run.catalog_path, run.run_id)
    except Exception:  # noqa: BLE001 (the catalog that stopped the run may refuse this too)
        pass


def _name_flow_run(run, control: Control) -> None:
    """Name this flow run after the sweep and its start, tag it `sweep:NAME` and one
    `family:NAME` per family, and record its page in the run's row when the API has a
    UI (a Prefect server)."""
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext
    from prefect.utilities.urls import url_for

    flow_run = FlowRunContext.get().flow_run
    families = sorted({job.instance.family for job in run.plan.jobs})
    tags = {*flow_run.tags, f"sweep:{run.plan.name}", *(f"family:{f}" for f in families)}
    name = f"{run.plan.name} {datetime.now():%Y-%m-%d %H:%M:%S}"
    with get_client(sync_client=True) as client:
        client.update_flow_run(flow_run.id, name=name, tags=sorted(tags))
    if configured_api() and (url := url_for(flow_run)):
        run.manifest["flow_run_url"] = url
        control.announce(f"Prefect flow run: {url}")
        run.write()
    jobs = len(run.plan.jobs)
    control.announce(f"sweep {run.plan.name}: {jobs} instances into {run.catalog_path}")


def _solve_run(
    run, control: Control, cluster: "Cluster", batch_size, memory_limit, retries
) -> dict:
    """Start the cluster (none when nothing is to solve), then solve the run's jobs."""
    if not cluster.address and not run.todo:
        control.announce("nothing to solve: every instance has its result in the catalog")
        report = _batches(run, control, None, 1, batch_size, memory_limit, retries)
        return {**report, **run.links(), "scheduler": None}
    with cluster.start() as (scheduler, dashboard, found, runner):
        run.manifest["dask_dashboard_url"] = dashboard
        if dashboard:
            run.write()  # the link is on the dashboard now, not at the next heartbeat
        if scheduler:
            link = dashboard or "(none)"
            control.announce(f"Dask scheduler {scheduler}, {found} workers, dashboard {link}")
            configured = configured_api() is not None
            warn_remote_without_api(scheduler, cluster.address, configured, control.announce)
        else:
            control.announce(f"{found} threads in this process")
        with worker_events(scheduler, run.topic, run.instances_done, memory_limit):
            try:
                report = _batches(
                    run,
                    control,
                    runner,
                    max(1, found),
                    batch_size,
                    memory_limit,
                    retries,
                    scheduler,
                )
            except (KeyboardInterrupt, TerminationSignal):
                _interrupted(run, control)  # before the cluster's teardown
                raise
    return {**report, **run.links(), "scheduler": scheduler}


def _batches(
    run,
    control: Control,
    runner,
    workers: int,
    batch_size: int | None,
    memory_limit: int | None,
    retries: int,
    scheduler: str | None = None,
) -> dict:
    """Solve the jobs of `run` in batches on `runner` (a started Prefect task runner;
    None when nothing is to solve), `workers` wide, while a `Watch` probes the Prefect
    API and the Dask `scheduler`: one that stops answering for `LOST_SECONDS` ends the
    run (state `failed`; the report's "stopped" names it). Returns the report without
    "scheduler". The counts by status are the rows this run wrote in the catalog. A
    batch that fails with an error no retry can fix (`faults.permanent`) stops the run
    without waiting for the others. Raises KeyboardInterrupt on a stop request."""
    logger = get_run_logger()
    started = time.perf_counter()
    run_id = run.run_id
    plan, todo = run.plan, run.todo
    planner = Planner(todo, run_id, plan.name, workers, batch_size)
    logger.info(
        "run %s of sweep %s: %d instances planned, %d already in the catalog, %d to solve",
        run_id,
        plan.name,
        len(plan.jobs),
        len(plan.jobs) - len(todo),
        len(todo),
    )
    progress = Progress(run_id, plan.name, len(todo), control, planner.seconds_left)
    run.on_instances = progress.instance_done

    def lost(reason: str) -> None:  # in the watch's thread: the main one may be stuck
        line = f"run {run_id} stopped: {reason}; the instances written before are kept"
        run.end("failed")
        control.on_stopped("failed", line)
        control.request_stop(line)

    retried = 0
    failed: list[str] = []
    halted: list[str] = []
    task = solve_batch.with_options(retries=retries)

    def submit_next():
        batch = planner.next()
        if batch is None:
            return None
        run.batches = planner.planned
        progress.submitted(batch.number, len(batch.params))
        name = f"{batch.family}-batch-{batch.number:04d}"
        own = task.with_options(
            task_run_name=name, tags={f"family:{batch.family}", f"sweep:{plan.name}"}
        )
        parameters = {
            "batch": batch,
            "catalog_path": run.catalog_path,
            "memory_limit": memory_limit,
            "topic": run.topic,
        }
        return batch, runner.submit(own, parameters)

    def on_result(batch: Batch, report: dict) -> None:
        nonlocal retried
        planner.record(batch, report["seconds"])
        retried += report["attempt"] > 1
        run.counts.update(report["counts"])
        shot = progress.batch_done(batch.number, report["instances"], report["counts"])
        n = report["instances"]
        logger.info(
            "batch %d (%s, %d %s) committed as %s; %d of %d instances done",
            batch.number,
            batch.family,
            n,
            _instances(n),
            report["commit"],
            shot.done,
            len(todo),
        )

    def on_failure(batch: Batch, exc: Exception) -> bool:
        planner.record(batch, None)
        progress.batch_failed(batch.number)
        # a CatalogUnwritable is one line already: cut again, its reason would be lost
        why = str(exc) if isinstance(exc, CatalogUnwritable) else first_line(exc)
        failed.append(f"batch {batch.number} ({batch.family}): {why}")
        if permanent(exc):  # every later batch would fail the same way
            halted.append(failed[-1])
            return True
        logger.error("%s", failed[-1])
        return False

    with Watch(scheduler, lost):  # a stop request raises: the flow ends the run
        submit_all(submit_next, 2 * workers, on_result, on_failure, control)
    done = sum(run.counts.values())
    state = "finished" if done == len(todo) and not halted else "failed"
    unwritten = run.end(state)
    if unwritten and not halted:
        halted.append(unwritten)
    progress.finish(  # only what outlives the run: no link to a closed LocalCluster
        {
            "catalog": run.catalog_path,
            "results page": f"`puzzlesweep dashboard --catalog {run.catalog_path}`",
        }
    )
    solved = sum(run.counts.values())
    logger.info("run %s %s: %d %s solved", run_id, state, solved, _instances(solved))
    for status, n in sorted(run.counts.items()):
        logger.info("run %s: %d %s %s", run_id, n, _instances(n), status)
    return {
        "run_id": run_id,
        "sweep": plan.name,
        "planned": len(plan.jobs),
        "skipped": len(plan.jobs) - len(todo),
        "solved": solved,
        "counts": dict(run.counts),
        "batches": planner.planned,
        "retried": retried,
        "failed": failed,
        "stopped": halted[0] if halted else None,
        "seconds": time.perf_counter() - started,
    }


def run_sweep(spec: SpecSource, catalog: str = "results", api=None, **options: Any) -> dict:
    """Run the `sweep` flow in this process and return its report (`sweep`'s keyword
    `options`). Without a configured Prefect API (`PREFECT_API_URL`), a temporary one
    (`api`, when the caller started it early, else a new one) serves the run and stops
    after it. Raises as `sweep` does; KeyboardInterrupt when the run was interrupted.
    A run that ends Failed (instances in error, batches failed) returns its report."""
    control = options.setdefault("control", Control())
    if isinstance(spec, str) and "\n" not in spec and "://" not in spec:
        spec = str(Path(spec).resolve())  # the flow run's parameter names the file read
    with prefect_api(api):
        state = sweep(spec, catalog, return_state=True, **options)
    if state.is_cancelled():
        raise KeyboardInterrupt
    if control.error is not None:
        raise control.error
    if state.is_failed() and control.report is not None:
        return control.report
    return state.result()
