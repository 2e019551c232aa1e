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
from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from puzzlesweep import __version__, catalog, puzzles
from puzzlesweep.flows import run_record
from puzzlesweep.flows.api import TemporaryAPI
from puzzlesweep.flows.batches import Batch, Planner
from puzzlesweep.flows.cluster import (
    Watch,
    configured_api,
    connect,
    dask_cluster,
    prefect_api,
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
    return _report(app_id, rows, attempt, time.perf_counter() - started)


def _solve_rows(batch: Batch, memory_limit: int | None, topic: str | None) -> list[dict]:
    """The catalog rows of every instance of `batch`, each solved and verified in this
    thread's child process."""
    from puzzlesweep.flows.isolate import child_for_thread
    from puzzlesweep.puzzles import Instance

    worker, worker_memory = worker_identity()
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


@flow(name="sweep")
def sweep(
    spec_path: str,
    catalog_path: str,
    run_id: str,
    batch_size: int | None = None,
    workers: int = 2,
    memory_limit: int | None = None,
    retries: int = RETRIES,
    scheduler: str | None = None,
    links: bool = False,
    control: Control | None = None,
) -> dict:
    """Solve the jobs of run `run_id` (`control.record`, started by `run_record.start`:
    its row in `runs` is written, its spec at `spec_path` planned) into `catalog_path`;
    returns {"run_id", "sweep", "planned", "skipped", "solved", "counts", "batches",
    "retried" (batches that needed more than one attempt), "failed" (batches that failed
    every attempt), "stopped", "seconds"}. `memory_limit` (bytes per instance) and
    `retries` (per batch) as in `solve_batch`; with `links`, the flow run's UI page is
    recorded in the run's row. While batches run, a `Watch` probes the Prefect API and
    the Dask `scheduler` (its address, when given): one that stops answering for
    `LOST_SECONDS` ends the run (state `failed`; RunStopped naming it), what was written
    is kept.

    The run's row is replaced at the end (`finished`; `failed` when a batch failed
    every attempt; `interrupted` on KeyboardInterrupt or Prefect's TerminationSignal)
    with its counts by status, counted in the catalog (the rows this run wrote), not
    from the reports received. Stops (state `failed`, the report's "stopped" says why)
    at the first batch that fails with an error no retry can fix (`faults.permanent`),
    without waiting for the others."""
    from prefect.context import FlowRunContext
    from prefect.exceptions import TerminationSignal
    from prefect.utilities.urls import url_for

    control = control or Control()
    control.on_flow_start()
    logger = get_run_logger()
    started = time.perf_counter()
    run = control.record
    plan, todo = run.plan, run.todo
    if links and (url := url_for(FlowRunContext.get().flow_run)):
        run.manifest["flow_run_url"] = url
        control.announce(f"Prefect flow run: {url}")
        run.write()
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
        future = task.with_options(task_run_name=name).submit(
            batch, run.catalog_path, memory_limit, run.topic
        )
        return batch, future

    def on_result(batch: Batch, report: dict) -> None:
        nonlocal retried
        planner.record(batch, report["seconds"])
        retried += report["attempt"] > 1
        run.counts.update(report["counts"])
        shot = progress.batch_done(batch.number, report["instances"], report["counts"])
        logger.info(
            "batch %d (%s, %d instances) committed as %s; %d/%d instances solved (%s)",
            batch.number,
            batch.family,
            report["instances"],
            report["commit"],
            shot.done,
            len(todo),
            dict(run.counts),
        )

    def on_failure(batch: Batch, exc: Exception) -> bool:
        planner.record(batch, None)
        progress.batch_failed(batch.number)
        failed.append(f"batch {batch.number} ({batch.family}): {first_line(exc)}")
        if permanent(exc):  # every later batch would fail the same way
            halted.append(failed[-1])
            return True
        logger.error("%s", failed[-1])
        return False

    state = "failed"
    try:
        with Watch(scheduler, lost):
            submit_all(submit_next, 2 * workers, on_result, on_failure, control)
        done = sum(run.counts.values())
        state = "finished" if done == len(todo) and not halted else "failed"
    except (KeyboardInterrupt, TerminationSignal):  # nothing more is sent
        state = "interrupted"
        raise
    finally:
        unwritten = run.end(state)
        if state == "interrupted":
            control.on_stopped(state, None)
    if unwritten and not halted:
        halted.append(unwritten)
    progress.finish(
        {
            "catalog": run.catalog_path,
            "results page": f"`puzzlesweep dashboard --catalog {run.catalog_path}`",
            "Dask dashboard": run.links()["dashboard"],
        }
    )
    solved = sum(run.counts.values())
    logger.info("run %s %s: %d solved, %s", run_id, state, solved, dict(run.counts))
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


def run_sweep(
    spec_path: str,
    catalog_path: str,
    address: str | None = None,
    workers: int = 2,
    batch_size: int | None = None,
    force: bool = False,
    memory_limit: int | None = None,
    retries: int = RETRIES,
    dashboard_address: str | None = "127.0.0.1:8787",
    announce: Callable[[str], None] | None = None,
    connect_timeout: float = 10.0,
    api: TemporaryAPI | None = None,
    allow_concurrent: bool = False,
    max_instances: int | None = None,
    control: Control | None = None,
) -> dict:
    """Run the sweep of the spec at `spec_path` into `catalog_path` on Dask (the
    scheduler at `address`, or a new `LocalCluster` of `workers` single-threaded worker
    processes) under Prefect. Returns the flow's report plus "scheduler", "dashboard"
    (URL or None) and "flow_run_url" (None without a configured Prefect server).

    The run's row is written first (`run_record.start`: listed from its first seconds),
    then the cluster and the Prefect API start (`cluster`), and the flow runs named
    after the sweep and its start time, tagged `sweep:NAME` and `family:NAME` for each
    family. `announce(line)` is called with the Dask dashboard's address once the
    cluster is up and the flow run's URL once it starts. `api`: the temporary Prefect
    API, when the caller started it early (it is stopped at the end). Raises BadInput for
    a bad spec, a bad `address` or one that does not answer within `connect_timeout`
    seconds, and when a run of the same sweep is alive in the catalog, unless
    `allow_concurrent` (`max_instances` as in `spec.parse`). Raises RunStopped (one
    line) when the run stopped at a batch that no retry could fix; the run's row then
    counts what it wrote, counted again once the cluster is gone."""
    from prefect import tags
    from prefect_dask import DaskTaskRunner

    control = control or Control()
    if announce is not None:
        control.announce = announce
    say = control.announce
    if address:  # a silent scheduler is bad input: refused before the run's row is written
        connect(address, connect_timeout).close()
    configured = configured_api() is not None
    if not configured:
        api = api or TemporaryAPI()  # starts while the cluster does; prefect_api stops it
    with api or nullcontext():
        try:
            run = run_record.start(
                spec_path, catalog_path, force, max_instances, allow_concurrent, batch_size, control
            )
            jobs = len(run.plan.jobs)
            say(f"sweep {run.plan.name}: {jobs} instances from {spec_path} into {catalog_path}")
            idle = not address and not run.todo
            if idle:  # every instance is in the catalog: the run only records that
                cluster = nullcontext((None, None, 1))
            else:
                cluster = dask_cluster(address, workers, dashboard_address, connect_timeout)
            with cluster as (scheduler, dashboard, found):
                run.manifest["dask_dashboard_url"] = dashboard
                if dashboard:
                    run.write()  # the link is on the dashboard now, not at the next heartbeat
                if scheduler:
                    link = dashboard or "(none)"
                    say(f"Dask scheduler {scheduler}, {found} workers, dashboard {link}")
                    warn_remote_without_api(scheduler, address, configured, say)
                else:
                    say("nothing to solve: every instance has its result in the catalog")
                families = sorted({job.instance.family for job in run.plan.jobs})
                with (  # the workers' events end, and their logs are sent, before the API
                    prefect_api(api),
                    worker_events(scheduler, run.topic, run.instances_done, memory_limit),
                    tags(f"sweep:{run.plan.name}", *(f"family:{f}" for f in families)),
                ):
                    flow = sweep.with_options(
                        task_runner=DaskTaskRunner(address=scheduler) if scheduler else None,
                        flow_run_name=f"{run.plan.name} {datetime.now():%Y-%m-%d %H:%M:%S}",
                    )
                    report = flow(
                        str(Path(spec_path).resolve()) if "://" not in spec_path else spec_path,
                        run.catalog_path,
                        run.run_id,
                        batch_size=batch_size,
                        workers=max(1, found),
                        memory_limit=memory_limit,
                        retries=retries,
                        scheduler=scheduler,
                        links=configured,
                        control=control,
                    )
        except KeyboardInterrupt:
            if control.record is not None:
                control.record.end("interrupted")
            raise
        except BaseException:
            if control.record is not None:
                control.record.end("failed")
            raise
    if report.get("stopped"):
        try:
            run_record.settle(run.catalog_path, report["run_id"])
        except Exception:  # noqa: BLE001 (the catalog that stopped the run may refuse this too)
            pass
        raise RunStopped(
            f"run {report['run_id']} stopped at the first batch that cannot succeed: "
            f"{report['stopped']}; the instances written before are kept"
        )
    return {**report, **run.links(), "scheduler": scheduler}


@flow(name="scheduled-sweep")
def scheduled_sweep(
    spec_path: str,
    catalog_path: str = "results",
    address: str | None = None,
    workers: int = 2,
    batch_size: int | None = None,
    memory_limit: int | None = None,
    retries: int = RETRIES,
) -> dict:
    """The flow that deployments run (deploy/prefect.yaml): the sweep of `spec_path`
    into `catalog_path` (paths relative to the deployment's working directory) on the
    Dask scheduler at `address`, or on a LocalCluster of `workers` processes when it is
    None. Runs `sweep` as a subflow; returns its report. Raises RuntimeError when a batch
    failed every attempt, so the run is marked Failed."""
    logger = get_run_logger()
    report = run_sweep(
        spec_path,
        catalog_path,
        address,
        workers,
        batch_size,
        memory_limit=memory_limit,
        retries=retries,
        dashboard_address=None if address else "127.0.0.1:0",
        announce=logger.info,
    )
    logger.info(
        "run %s: %d solved, %d skipped, %s",
        report["run_id"],
        report["solved"],
        report["skipped"],
        report["counts"],
    )
    if report["failed"]:
        raise RuntimeError(f"{len(report['failed'])} batches failed: {report['failed']}")
    return report
