"""The sweep flow: spec → jobs → skip finished → batches on Dask → one writer → catalog.

The sweep is one Prefect flow run (deployments, schedules, states, logs, artifacts);
its batches travel over Dask as plain futures (`flight`), never as Prefect task runs,
and the run's one writer commits their rows in groups. Measured on 16 cores: a Prefect
task per batch with a log line per instance cost 5× a bare process pool at 4 workers and
17× at 16, while plain Dask over the same batches ran within 1.1-1.2× of it
(benchmarks/README.md, "scale").

`run_sweep` (the command line, `puzzlesweep.sweep()`) reads the spec and starts the
cluster in a thread (`settings.EarlyStart`) while the temporary Prefect API starts, then
runs the flow, which claims the run's row, takes the started cluster (or starts one:
a deployment) and ends the flow run's state truthfully. A caller steers the run through
its `Control`, handed to the flow by context (`control.CALLER`), never as a parameter.

Faults: every instance is solved in a child process of its worker under hard time and
memory limits (`isolate`); a batch whose worker is lost is run again by Dask, and one
that failed with an error a retry may cure is submitted again (`retries`); rows are
committed once, each batch's with its app id. This module holds no puzzle logic.
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
from puzzlesweep.flows.cluster import (
    configured_api,
    connect,
    enclosing_scheduler,
    prefect_api,
    quiet_dask,
)
from puzzlesweep.flows.control import CALLER, Caller, Control
from puzzlesweep.flows.faults import RunStopped
from puzzlesweep.flows.flight import solve_batches
from puzzlesweep.flows.progress import instances_word
from puzzlesweep.flows.run_record import SpecSource
from puzzlesweep.flows.settings import RETRIES, EarlyStart, RunSettings, warn_remote_without_api

__all__ = ["RETRIES", "run_sweep", "sweep"]


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
) -> dict:
    """Run a sweep into a catalog; returns its report ("run_id", "counts", "solved"...).
    Ends `Completed` when every instance has a row and none is in `error`; `Failed` for
    `error` rows, failed batches, bad input or a lost API, scheduler or catalog (what
    was written is kept); `Cancelled` at Ctrl-C or SIGTERM (the row says `interrupted`).

    Args:
        spec: The sweep spec: a path, a URL, inline TOML text, or the TOML document as a dict.
        catalog: The catalog's directory or object-store URL.
        address: An existing Dask scheduler, tcp://HOST:PORT (none: a cluster started here).
        workers: Workers of a cluster started here (none: one per core; not with address).
        batch_size: Instances per batch (none: sized as the run goes).
        force: Solve again the instances the catalog already holds.
        memory_limit: Bytes per instance (none: the Dask worker's memory per thread).
        retries: Extra attempts of a batch after a failure a retry may cure.
        max_instances: Refuse a spec of more instances (none: the spec's own cap).
        allow_concurrent: Run even while another run of this sweep writes to the catalog.
        dashboard_address: HOST:PORT of a started cluster's Dask dashboard (none: none).
        connect_timeout: Seconds to wait for the scheduler at address.
        backend: dask (a cluster), or threads (threads of the flow's own process).
    """
    caller = CALLER.get() or Caller(Control())
    control = caller.control
    quiet_dask()  # a deployment's worker prints the run's lines, not Dask's INFO lines
    control.on_flow_start()
    control.cancel_flow_run = functools.partial(_cancel_in_prefect, _flow_run_id())
    try:  # a stop at any moment after the claim ends the row it wrote
        settings = RunSettings.of(
            catalog=catalog, address=address, workers=workers, batch_size=batch_size,
            force=force, memory_limit=memory_limit, retries=retries,
            max_instances=max_instances, allow_concurrent=allow_concurrent,
            dashboard_address=dashboard_address, connect_timeout=connect_timeout,
            backend=backend,
        )  # fmt: skip
        if settings.address:  # refused here, before the run's row is written
            connect(settings.address, settings.connect_timeout).close()
        run = run_record.start(spec, settings, control)
        _name_flow_run(run, control)
        _crash_lost_flow_runs(run)
        report = _solve_run(run, control, settings, caller.early)
    except BaseException as exc:
        return _ended_by(exc, control)
    return _outcome(run, report, control)


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
        with suppress(Exception):  # the catalog that stopped the run may refuse this too
            run_record.settle(run.catalog_path, run.run_id)
        control.error = RunStopped(
            f"run {run.run_id} stopped at the first batch that cannot succeed: "
            f"{report['stopped']}; the instances written before are kept"
        )
        return Failed(message=str(control.error))
    report["flow_run_id"] = str(_flow_run_id())
    report["query"] = f"SELECT * FROM results WHERE run_id = '{run.run_id}'"
    control.report = report
    errors = report["counts"].get("error", 0)
    if report["failed"] or errors:
        parts = [f"{len(report['failed'])} batches failed every attempt"] * bool(report["failed"])
        parts += [f"{errors} {instances_word(errors)} ended in error"] * bool(errors)
        return Failed(message=f"run {report['run_id']}: {'; '.join(parts)}")
    return report


def _interrupted(run, control: Control) -> None:
    """At a stop request, before anything is torn down: the run's row says `interrupted`,
    then this flow run is `Cancelled` in Prefect (the row first: an API that is gone
    could hold the call until the caller's exit), then the caller hears of it
    (`control.on_stopped`)."""
    if run.ended is None:
        run.end("interrupted")
        control.cancel_flow_run()
    control.on_stopped("interrupted", None)


def _flow_run_id() -> Any:
    """The id of the flow run this code runs in (None outside one)."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    return context.flow_run.id if context and context.flow_run else None


def _cancel_in_prefect(flow_run_id) -> None:
    """Set flow run `flow_run_id` to Cancelled. Safe from any thread; never raises (an
    API that is gone has nothing to show)."""
    from prefect.client.orchestration import get_client

    if flow_run_id is None:
        return
    message = "interrupted (Ctrl-C or SIGTERM); what was written is kept"
    with suppress(Exception), get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run_id, Cancelled(message=message), force=True)


def _crash_lost_flow_runs(run, most: int = 20) -> None:
    """Set to Crashed, on a configured Prefect server, the flow runs of the last `most`
    runs of this sweep that the catalog finds `lost` (killed without ending their flow
    run, which Prefect would show Running for good). Never raises."""
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    from puzzlesweep import catalog

    if not configured_api():
        return  # a temporary API ended with the run that started it
    with suppress(Exception), get_client(sync_client=True) as client:
        _, rows = catalog.query(
            run.catalog_path,
            "SELECT run_id, flow_run_url FROM runs WHERE sweep = ? AND state = 'lost' "
            "AND flow_run_url IS NOT NULL ORDER BY started_at DESC LIMIT ?",
            [run.plan.name, most],
        )
        for run_id, url in rows:
            flow_run_id = url.rstrip("/").rsplit("/", 1)[-1]
            state = client.read_flow_run(flow_run_id).state
            if state is not None and not state.is_final():
                message = f"run {run_id} was found lost: its process ended without a word"
                client.set_flow_run_state(flow_run_id, Crashed(message=message), force=True)


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


def _solve_run(run, control: Control, settings: RunSettings, early) -> dict:
    """Take the started cluster (`early`) or start one (none when nothing is to solve),
    then solve the run's jobs."""
    if not settings.address and not run.todo:
        control.announce("nothing to solve: every instance has its result in the catalog")
        report = solve_batches(run, control, None, settings)
        return {**report, **run.links(), "scheduler": None}
    cluster = early.started() if early is not None else settings.start(len(run.todo))
    with cluster as started:
        run.manifest["dask_dashboard_url"] = started.dashboard
        if started.dashboard:
            run.write()  # the link is on the dashboard now, not at the next heartbeat
        if started.scheduler:
            link = started.dashboard or "(none)"
            control.announce(
                f"Dask scheduler {started.scheduler}, {started.workers} workers, dashboard {link}"
            )
            configured = configured_api() is not None
            warn_remote_without_api(
                started.scheduler, settings.address, configured, control.announce
            )
        else:
            n = started.workers
            control.announce(f"{n} {'thread' if n == 1 else 'threads'} in this process")
        try:
            report = solve_batches(run, control, started, settings)
        except (KeyboardInterrupt, TerminationSignal):
            _interrupted(run, control)  # before the cluster's teardown
            raise
    return {**report, **run.links(), "scheduler": started.scheduler}


def run_sweep(
    spec: SpecSource,
    settings: RunSettings | None = None,
    api=None,
    control: Control | None = None,
    keep_api: bool = False,
    plan=None,
) -> dict:
    """Run the `sweep` flow in this process with `settings` and return its report.
    The spec is read first (BadInput before anything starts; `plan`: its `spec.Sweep`
    when the caller read it already); a cluster started here starts in a thread while
    the Prefect API does. Inside a user's flow whose task runner is Dask's, the sweep is
    its subflow and runs on that flow's cluster. Without a configured Prefect API
    (`PREFECT_API_URL`), a temporary one (`api`, when the caller started it early, else
    a new one) serves the run and stops after it unless `keep_api`. `control`: the
    caller's stop requests, progress listeners and announce channel. Raises as `sweep`
    does; KeyboardInterrupt when the run was interrupted. A run that ends Failed
    (instances in error, batches failed) returns its report."""
    settings = settings or RunSettings()
    control = control or Control()
    if isinstance(spec, str) and "\n" not in spec and "://" not in spec:
        spec = str(Path(spec).resolve())  # the flow run's parameter names the file read
    plan = plan or run_record.read_spec(spec, settings.max_instances)
    if settings.backend == "dask" and not settings.address and settings.workers is None:
        if scheduler := enclosing_scheduler():
            settings = settings.model_copy(update={"address": scheduler})
    local = settings.backend == "dask" and not settings.address
    early = EarlyStart(settings, len(plan.jobs)) if local else None
    token = CALLER.set(Caller(control, early))
    try:
        with prefect_api(api, keep=keep_api):
            state = sweep(spec, **settings.model_dump(), return_state=True)
    finally:
        CALLER.reset(token)
        if early is not None:
            early.close()
    if state.is_cancelled():
        raise KeyboardInterrupt
    if control.error is not None:
        raise control.error
    if state.is_failed() and control.report is not None:
        return control.report
    return state.result()
