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

This module holds no puzzle logic: it claims the run, starts the cluster and ends the
flow run's state. The batch task is `batch_task.solve_batch` (what runs on the
workers); the batches in flight are `flight.solve_batches`.
"""

import functools
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.exceptions import TerminationSignal
from prefect.states import Cancelled, Failed

from puzzlesweep.core import BadInput
from puzzlesweep.flows import run_record
from puzzlesweep.flows.backend import Cluster, warn_remote_without_api
from puzzlesweep.flows.batch_task import RETRIES, instances_word, solve_batch
from puzzlesweep.flows.batches import Batch
from puzzlesweep.flows.cluster import configured_api, connect, prefect_api, worker_events
from puzzlesweep.flows.control import Control
from puzzlesweep.flows.faults import RunStopped
from puzzlesweep.flows.flight import solve_batches
from puzzlesweep.flows.run_record import SpecSource

__all__ = ["Batch", "RETRIES", "run_sweep", "solve_batch", "sweep"]


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
    control.cancel_flow_run = functools.partial(_cancel_in_prefect, _flow_run_id())
    cluster = _checked_cluster(backend, address, workers, dashboard_address, connect_timeout)
    try:  # a stop at any moment after the claim ends the row it wrote
        run = run_record.start(
            spec, catalog, force, max_instances, allow_concurrent, batch_size, control
        )
        _name_flow_run(run, control)
        report = _solve_run(run, control, cluster, batch_size, memory_limit, retries)
    except BaseException as exc:
        return _ended_by(exc, control)
    return _outcome(run, report, control)


def _checked_cluster(backend, address, workers, dashboard_address, connect_timeout) -> Cluster:
    """The run's validated cluster settings (`Cluster.of`); a scheduler at `address`
    that does not answer within `connect_timeout` seconds is refused here, as bad input,
    before the run's row is written. Raises BadInput."""
    cluster = Cluster.of(
        backend=backend,
        address=address,
        workers=workers,
        dashboard_address=dashboard_address,
        connect_timeout=connect_timeout,
    )
    if address:
        connect(address, connect_timeout).close()
    return cluster


def _ended_by(exc: BaseException, control: Control) -> Any:
    """The flow's final state when the run was ended by `exc`, after the run's row (if
    it was claimed) is ended: `Cancelled` for a stop request (row `interrupted`),
    `Failed` with the one line of a BadInput or RunStopped (kept in `control.error`, so
    the caller prints it without a traceback). Any other exception ends the row
    `failed` and is raised again."""
    record = control.record
    if isinstance(exc, KeyboardInterrupt | TerminationSignal):
        if record is not None:
            _interrupted(record, control)
        return Cancelled(message="the run was interrupted; what was written is kept")
    if record is not None:
        record.end("failed")
    if not isinstance(exc, BadInput | RunStopped):
        raise exc
    control.error = exc
    return Failed(message=str(exc))


def _outcome(run, report: dict, control: Control) -> Any:
    """The flow's final state for a run that went to its end: `Failed` with a
    RunStopped in `control.error` when a batch stopped it, else the report (kept in
    `control.report`, with this flow run's id) or a Failed state naming what failed."""
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


def _interrupted(run, control: Control, stop=None) -> None:
    """At a stop request, before anything is torn down: this flow run and its
    unfinished task runs are `Cancelled` in Prefect at once (the caller may exit before
    the teardown ends), the batches still running are told to commit nothing (`stop`),
    and the run's row says `interrupted`; then the caller hears of it
    (`control.on_stopped`)."""
    if run.ended is None:
        control.cancel_flow_run()  # first: the caller may exit before the teardown ends
        if stop is not None:
            stop()
        run.end("interrupted")
    control.on_stopped("interrupted", None)


def _flow_run_id() -> Any:
    """The id of the flow run this code runs in (None outside one)."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    return context.flow_run.id if context and context.flow_run else None


def _cancel_in_prefect(flow_run_id) -> None:
    """Set flow run `flow_run_id`, then its task runs not in a final state, to Cancelled
    (the flow run first: the process may exit before the last call returns). Safe from
    any thread; never raises (an API that is gone has nothing to show)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    if flow_run_id is None:
        return
    message = "interrupted (Ctrl-C or SIGTERM); what was written is kept"
    with suppress(Exception), get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run_id, Cancelled(message=message), force=True)
        task_runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
        for task_run in task_runs:
            if task_run.state is None or not task_run.state.is_final():
                client.set_task_run_state(task_run.id, Cancelled(message=message), force=True)


def _final_state(report: dict) -> Any:
    """The flow's report, or a Failed state naming what failed (the report stays in the
    caller's Control)."""
    errors = report["counts"].get("error", 0)
    if report["failed"] or errors:
        parts = [f"{len(report['failed'])} batches failed every attempt"] * bool(report["failed"])
        parts += [f"{errors} {instances_word(errors)} ended in error"] * bool(errors)
        return Failed(message=f"run {report['run_id']}: {'; '.join(parts)}")
    return report


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
    control.announce(
        f"sweep {run.plan.name}: {jobs} {instances_word(jobs)} into {run.catalog_path}"
    )


def _solve_run(
    run, control: Control, cluster: "Cluster", batch_size, memory_limit, retries
) -> dict:
    """Start the cluster (none when nothing is to solve), then solve the run's jobs."""
    if not cluster.address and not run.todo:
        control.announce("nothing to solve: every instance has its result in the catalog")
        report = solve_batches(run, control, None, 1, batch_size, memory_limit, retries)
        return {**report, **run.links(), "scheduler": None}
    with cluster.start() as (scheduler, dashboard, found, runner, children):
        run.manifest["dask_dashboard_url"] = dashboard
        if dashboard:
            run.write()  # the link is on the dashboard now, not at the next heartbeat
        if scheduler:
            link = dashboard or "(none)"
            control.announce(f"Dask scheduler {scheduler}, {found} workers, dashboard {link}")
            configured = configured_api() is not None
            warn_remote_without_api(scheduler, cluster.address, configured, control.announce)
        else:
            control.announce(f"{found} {'thread' if found == 1 else 'threads'} in this process")
        with worker_events(scheduler, run.topic, run.instances_done, memory_limit) as stop:
            try:
                report = solve_batches(
                    run,
                    control,
                    runner,
                    max(1, found),
                    batch_size,
                    memory_limit,
                    retries,
                    scheduler,
                    children,
                )
            except (KeyboardInterrupt, TerminationSignal):
                _interrupted(run, control, stop)  # before the cluster's teardown
                raise
    return {**report, **run.links(), "scheduler": scheduler}


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
