"""The sweep flow: spec → jobs → skip finished → batches → one Prefect task per batch.

Batches are cut as the run goes (`batches.Planner`): their sizes follow the measured
seconds per instance, so that neither the per-task overhead nor the last batches
dominate, and two per worker are submitted at a time.

Prefect orchestrates at batch granularity (state, retries, logs); Dask does the fan-out
through `prefect_dask.DaskTaskRunner`, on an embedded `LocalCluster` or on an existing
scheduler (`address`). Each batch task solves its instances, verifies them and writes
its rows as one Parquet file, atomically, before it returns: a result that was reported
is never lost, and a re-run solves only what the catalog does not hold yet.

Faults: every instance is solved in a child process of its worker under hard time and
memory limits (`isolate`), so a solver that overruns, runs out of memory or crashes
becomes a row with its status and message. A batch's file is named by its run and
index, so an attempt that Dask repeats after losing a worker, or that Prefect retries
after a transient failure (`retries`), writes the same file again instead of a second
copy: every instance is in the catalog once. A batch that fails all its attempts is
counted in the report and the others go on.

This module holds no puzzle logic: it only groups, submits and counts.
"""

import os
import queue
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from uuid import uuid4

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from puzzlesweep import __version__, catalog, puzzles
from puzzlesweep.core import BadInput
from puzzlesweep.flows.api import TemporaryAPI
from puzzlesweep.flows.batches import Batch, Planner
from puzzlesweep.flows.progress import Progress
from puzzlesweep.flows.spec import load
from puzzlesweep.solve import canonical_instance, carry_over, empty_row

RETRIES = 2  # extra attempts of a batch after a transient failure (Prefect task retries)
ADDRESS = re.compile(r"^(tcp|tls)://[^\s:/]+:\d{1,5}$")


def _worker() -> tuple[str, int | None]:
    """(this worker's name, its memory limit per thread in bytes or None): the Dask
    worker's address and `memory_limit / nthreads`, or the host name outside Dask."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return os.uname().nodename, None
    limit = worker.memory_manager.memory_limit
    return worker.address, (int(limit / max(1, worker.state.nthreads)) if limit else None)


def _report(name: str, rows: list[dict], attempt: int, seconds: float) -> dict:
    return {
        "file": name,
        "counts": dict(Counter(row["status"] for row in rows)),
        "instances": len(rows),
        "verified": sum(bool(row["verified"]) for row in rows),
        "attempt": attempt,
        "seconds": seconds,
    }


@task(name="solve-batch", cache_policy=NO_CACHE, retries=RETRIES, retry_delay_seconds=2)
def solve_batch(batch: Batch, catalog_path: str, memory_limit: int | None = None) -> dict:
    """Solve, verify and write one batch; returns {"file", "counts" (status → count),
    "instances", "verified", "attempt" (1 for the first run of this task, 2 for its
    first retry...), "seconds" (wall time of this attempt)}.

    Each instance runs in this thread's child process (`isolate.Child`) under its time
    and node limits and `memory_limit` bytes (default: the Dask worker's memory limit per
    thread; None: no limit). A batch whose file is already in the catalog (an earlier
    attempt wrote it, but its report was lost with its worker) is read back, not solved
    again. Raises OSError when the catalog cannot be written (Prefect retries the task)."""
    from prefect.runtime import task_run

    started = time.perf_counter()
    attempt = task_run.get_run_count() or 1
    if attempt > 1:
        get_run_logger().warning("batch %d: attempt %d", batch.number, attempt)
    family = puzzles.get(batch.family)
    name = catalog.batch_name(batch.run_id, batch.number)
    if (rows := catalog.read_batch(catalog_path, batch.family, name)) is None:
        rows = _solve_rows(batch, family, memory_limit)
        catalog.write_batch(catalog_path, batch.family, family.Params, rows, name)
    return _report(name, rows, attempt, time.perf_counter() - started)


def _solve_rows(batch: Batch, family, memory_limit: int | None) -> list[dict]:
    """The catalog rows of every instance of `batch`, each solved and verified in this
    thread's child process."""
    from puzzlesweep.core import Instance, make_params
    from puzzlesweep.flows.isolate import child_for_thread

    worker, worker_memory = _worker()
    child = child_for_thread(memory_limit or worker_memory)
    classes: dict[str, list] = {}  # equivalent instances (same instance_key) together
    for raw in batch.params:
        instance = Instance(batch.family, make_params(family.Params, raw))
        classes.setdefault(instance.key, []).append(instance)
    rows = []
    for members in classes.values():
        # one solve per class, of its canonical form; every member's row carries it over
        canonical = canonical_instance(members[0])
        request = {
            "family": batch.family,
            "params": canonical.params.model_dump(),
            "solver": batch.solver,
            "time_limit": batch.limits.time_limit,
            "node_limit": batch.limits.node_limit,
            "count": batch.count,
        }
        solved = empty_row(canonical, batch.solver, batch.limits)
        solved.update(child.solve(request))
        solved.pop("_lost_child", None)
        rows.extend(carry_over(solved, m, i > 0) for i, m in enumerate(members))
    for row in rows:
        row.update(
            run_id=batch.run_id,
            sweep=batch.sweep,
            worker=worker,
            puzzlesweep_version=__version__,
            schema_version=catalog.SCHEMA_VERSION,
        )
    return rows


def warm_worker(memory_limit: int | None = None) -> str:
    """A plain Dask task that readies its worker for batches while the run starts:
    imports what a batch task runs (Prefect's task engine, the catalog, this module) and
    starts the thread's child solver process (`solve_batch`'s, with the same
    `memory_limit`), about 4 s per worker that the first batch would otherwise wait.
    Returns the worker's address."""
    import prefect.task_engine  # noqa: F401
    import prefect_dask  # noqa: F401

    from puzzlesweep.flows.isolate import child_for_thread

    worker, worker_memory = _worker()
    child_for_thread(memory_limit or worker_memory).start()
    return worker


def _warm_workers(scheduler: str, memory_limit: int | None) -> None:
    """Submit `warm_worker` once to each worker of `scheduler`, without waiting."""
    from distributed import Client, fire_and_forget

    with Client(scheduler) as client:
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        fire_and_forget(
            [client.submit(warm_worker, memory_limit, workers=[w], pure=False) for w in workers]
        )


@flow(name="sweep")
def sweep(
    spec_path: str,
    catalog_path: str = "results",
    batch_size: int | None = None,
    workers: int = 2,
    force: bool = False,
    memory_limit: int | None = None,
    retries: int = RETRIES,
) -> dict:
    """Run the sweep of `spec_path` into `catalog_path`; returns {"run_id", "sweep",
    "planned", "skipped", "solved", "counts", "batches", "retried" (batches that needed
    more than one attempt), "failed" (batches that failed every attempt), "seconds"}.
    Instances with a final result for the same solver and limits are skipped unless
    `force`. `memory_limit` (bytes per instance) and `retries` (per batch) as in
    `solve_batch`. The run's manifest row is written before the first batch (state
    `running`) and replaced at the end (`finished`, or `failed` when a batch failed every
    attempt), with its counts by status."""
    logger = get_run_logger()
    started = time.perf_counter()
    catalog_path = catalog.resolve(catalog_path)  # workers may run elsewhere
    plan, todo = _todo(spec_path, catalog_path, force)
    run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid4().hex[:6]}"
    planner = Planner(todo, run_id, plan.name, workers, batch_size)
    logger.info(
        "run %s: %d instances planned, %d already in the catalog, %d to solve",
        run_id,
        len(plan.jobs),
        len(plan.jobs) - len(todo),
        len(todo),
    )
    manifest = {
        "run_id": run_id,
        "sweep": plan.name,
        "spec_path": str(spec_path),
        "spec": plan.text,
        "started_at": datetime.now(UTC),
        "planned": len(plan.jobs),
        "skipped": len(plan.jobs) - len(todo),
        "batch_size": batch_size,  # None: sized as the run goes (flows/batches.py)
        "force": force,
    }
    catalog.write_run(catalog_path, {**manifest, "state": "running"})
    progress = Progress(run_id, plan.name, len(todo))
    retried = 0
    failed: list[str] = []
    task = solve_batch.with_options(retries=retries)
    finished: queue.Queue = queue.Queue()  # futures, as their tasks end
    running: dict = {}  # future -> its batch
    try:
        while True:
            # keep two batches per worker submitted: one running, one queued behind it
            while len(running) < 2 * workers and (batch := planner.next()) is not None:
                future = task.submit(batch, catalog_path, memory_limit)
                running[future] = batch
                future.add_done_callback(finished.put)
            if not running:
                break
            future = finished.get()
            batch = running.pop(future)
            try:
                report = future.result()
            except Exception as exc:  # a batch that failed every attempt: the others go on
                planner.record(batch, None)
                failed.append(f"batch {batch.number} ({batch.family}): {type(exc).__name__}: {exc}")
                logger.error("%s", failed[-1])
                continue
            planner.record(batch, report["seconds"])
            retried += report["attempt"] > 1
            snapshot = progress.advance(report["instances"], report["counts"])
            logger.info("%d/%d instances solved (%s)", snapshot.done, len(todo), snapshot.counts)
    finally:
        state = "finished" if progress.done == len(todo) else "failed"
        ended = {"state": state, "finished_at": datetime.now(UTC), "solved": progress.done}
        counts = _status_counts(progress.counts)
        catalog.write_run(catalog_path, {**manifest, **ended, **counts, "batches": planner.planned})
    progress.finish()
    return {
        "run_id": run_id,
        "sweep": plan.name,
        "planned": len(plan.jobs),
        "skipped": len(plan.jobs) - len(todo),
        "solved": progress.done,
        "counts": dict(progress.counts),
        "batches": planner.planned,
        "retried": retried,
        "failed": failed,
        "seconds": time.perf_counter() - started,
    }


def _todo(spec_path: str, catalog_path: str, force: bool) -> tuple:
    """(the spec's plan, its jobs without a final result in the catalog, all if `force`).
    Raises BadInput for a bad spec."""
    plan = load(spec_path)
    done = set() if force else catalog.finished(catalog_path, [j.done_key for j in plan.jobs])
    return plan, [job for job in plan.jobs if job.done_key not in done]


def _status_counts(counts: Counter) -> dict[str, int]:
    """One manifest column per status, zero when absent."""
    return {status: counts.get(status, 0) for status in catalog.STATUSES}


@contextmanager
def prefect_api(api: TemporaryAPI | None = None) -> Iterator[str]:
    """Use the configured Prefect API, or a temporary API server for the whole run
    (`api`, started earlier by the caller, or a new one), and point this process and,
    through the settings that the task runner ships with each task, every Dask worker at
    it; otherwise each worker process would start its own (DESIGN.md, measured facts).
    Stops the temporary server on exit (also `api` when an API is configured). Yields
    the API URL. Raises flows.api.APIError when the temporary API does not start."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        if api is not None:
            api.stop()
        yield PREFECT_API_URL.value()
        return
    with api or TemporaryAPI() as server:
        url = server.url()
        if url is None:  # its settings name an API that this process's settings do not
            raise RuntimeError("Prefect's settings differ between this process and its child")
        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield url


def check_address(address: str) -> str:
    """`address` if it is a Dask scheduler address `tcp://HOST:PORT` (or `tls://`);
    raises BadInput naming it otherwise."""
    if not ADDRESS.match(address) or not 0 < int(address.rsplit(":", 1)[1]) < 65536:
        raise BadInput(f"--address {address!r} is not a Dask scheduler address tcp://HOST:PORT")
    return address


@contextmanager
def dask_cluster(
    address: str | None = None,
    workers: int = 2,
    dashboard_address: str | None = "127.0.0.1:8787",
    timeout: float = 10.0,
) -> Iterator[tuple[str, str | None, int]]:
    """Connect to the scheduler at `address`, or start a `LocalCluster` of `workers`
    single-threaded worker processes (its dashboard on `dashboard_address`, or another
    free port if that one is taken; None: no dashboard) and close it afterwards.

    Yields (scheduler address, dashboard URL or None, workers connected now). Raises
    BadInput for a malformed address or a scheduler that does not answer in `timeout`
    seconds. Workers of an existing cluster need only the installed package: tasks
    carry handles (family, parameters, solver, limits), never code or models."""
    from distributed import Client, LocalCluster

    if address:
        check_address(address)
        try:
            client = Client(address, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            raise BadInput(
                f"--address {address}: no Dask scheduler answered within {timeout:g} s ({exc})"
            ) from None
        with client:
            found = len(client.scheduler_info(n_workers=-1).get("workers", {}))
            yield address, client.dashboard_link, found
        return
    with LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=dashboard_address,
    ) as cluster:
        link = cluster.dashboard_link if dashboard_address else None
        yield cluster.scheduler_address, link, workers


# Callbacks of this process that want the flow run's URL. The hook below is a module
# function, so it pickles by reference: a closure in `on_running` would be pickled with
# the flow's context into every task, and fail on whatever it holds (a console's lock).
_url_listeners: list[Callable[[str], None]] = []


def _announce_flow_run(flow, flow_run, state) -> None:
    """`on_running` hook: hand the flow run's UI URL to this process's listeners."""
    from prefect.utilities.urls import url_for

    url = url_for(flow_run)
    for listener in list(_url_listeners) if url else []:
        listener(url)


@contextmanager
def _listening(listener: Callable[[str], None] | None) -> Iterator[None]:
    if listener is not None:
        _url_listeners.append(listener)
    try:
        yield
    finally:
        if listener is not None:
            _url_listeners.remove(listener)


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
) -> dict:
    """Run `sweep` on Dask: on the scheduler at `address`, or on a new `LocalCluster`
    of `workers` single-threaded worker processes. Returns the flow's report plus
    "scheduler", "dashboard" (URL or None) and "flow_run_url" (None without a
    configured Prefect server).

    `announce(line)` is called with the Dask dashboard's address once the cluster is
    up and, when `PREFECT_API_URL` names a Prefect server, with the flow run's URL once
    the run starts. Raises BadInput for a bad `address` or one that does not answer
    within `connect_timeout` seconds. `api`: the temporary Prefect API, when the caller
    started it early (it is stopped at the end); started here when needed otherwise."""
    from prefect.settings import PREFECT_API_URL
    from prefect_dask import DaskTaskRunner

    say = announce or (lambda line: None)
    configured = bool(PREFECT_API_URL.value())
    urls: list[str] = []

    def on_flow_run_url(url: str) -> None:
        if not urls:
            urls.append(url)
            say(f"Prefect flow run: {url}")

    if not configured:
        api = api or TemporaryAPI()  # starts while the cluster does; prefect_api stops it
    with api or nullcontext():
        idle = not address and not _todo(spec_path, catalog.resolve(catalog_path), force)[1]
        if idle:  # every instance is in the catalog: the run only records that, no cluster
            cluster = nullcontext((None, None, 1))
        else:
            cluster = dask_cluster(address, workers, dashboard_address, connect_timeout)
        with cluster as (scheduler, dashboard, found):
            if scheduler:
                _warm_workers(scheduler, memory_limit)  # while the Prefect API starts
                link = dashboard or "(none)"
                say(f"Dask scheduler {scheduler}, {found} workers, dashboard {link}")
            else:
                say("nothing to solve: every instance has its result in the catalog")
            host = (scheduler or "127.0.0.1").split("://", 1)[-1].rsplit(":", 1)[0]
            if address and not configured and host not in ("127.0.0.1", "localhost", "[::1]"):
                say(
                    "warning: PREFECT_API_URL is not set, and the temporary Prefect API listens "
                    "on 127.0.0.1 only: workers on other hosts cannot report their tasks. "
                    "Point PREFECT_API_URL at a Prefect server they reach (deploy/README.md)."
                )
            with (
                prefect_api(api),
                _listening(on_flow_run_url if configured else None),
            ):
                flow = sweep.with_options(
                    task_runner=DaskTaskRunner(address=scheduler) if scheduler else None,
                    on_running=[_announce_flow_run] if configured else [],
                )
                report = flow(
                    spec_path,
                    catalog_path,
                    batch_size=batch_size,
                    workers=max(1, found),
                    force=force,
                    memory_limit=memory_limit,
                    retries=retries,
                )
    return {
        **report,
        "scheduler": scheduler,
        "dashboard": dashboard,
        "flow_run_url": urls[0] if urls else None,
    }


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
