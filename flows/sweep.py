"""The sweep flow: spec → jobs → skip finished → batches → one Prefect task per batch.

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

import math
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from uuid import uuid4

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed

from puzzlesweep import __version__, catalog, puzzles
from puzzlesweep.core import BadInput
from puzzlesweep.flows.progress import Progress
from puzzlesweep.flows.spec import Job, load
from puzzlesweep.solve import canonical_instance, carry_over, empty_row
from puzzlesweep.solvers import Limits

MAX_BATCH = 50  # instances per batch, at most (a task costs ~0.2 s of Prefect overhead)
RETRIES = 2  # extra attempts of a batch after a transient failure (Prefect task retries)
ADDRESS = re.compile(r"^(tcp|tls)://[^\s:/]+:\d{1,5}$")


@dataclass(frozen=True)
class Batch:
    """A handle to the work of one task: which run and sweep, which family, solver and
    limits, and the parameters (dicts) of its instances. Workers rebuild the models."""

    run_id: str
    sweep: str
    family: str
    solver: str
    limits: Limits
    params: tuple[dict, ...]
    number: int = 0  # its place in the run: names its file, so a retry replaces it


def batches(jobs: list[Job], run_id: str, sweep: str, size: int) -> list[Batch]:
    """Group jobs by (family, solver, limits) and cut each group into batches of `size`;
    the batches with the longest time limits come first, so they do not straggle.
    A class of equivalent instances (same instance_key) stays in one batch (`_chunks`)."""
    groups: dict[tuple, list[Job]] = {}
    for job in jobs:
        groups.setdefault((job.instance.family, job.solver, job.limits), []).append(job)
    found = []
    for (family, solver, limits), group in groups.items():
        for chunk in _chunks(group, size):
            params = tuple(j.instance.params.model_dump() for j in chunk)
            found.append(Batch(run_id, sweep, family, solver, limits, params))
    found.sort(key=lambda b: -b.limits.time_limit)
    return [replace(batch, number=number) for number, batch in enumerate(found)]


def _chunks(group: list[Job], size: int) -> list[list[Job]]:
    """Cut `group` into chunks of about `size` jobs, never splitting a class of equivalent
    jobs (same instance_key): a chunk holding a class larger than `size` is that whole
    class, since its equivalent rows cost no solving. So every canonical instance is
    solved once per run, by the batch that also records its equivalents."""
    classes: dict[str, list[Job]] = {}
    for job in group:
        classes.setdefault(job.instance.key, []).append(job)
    chunks: list[list[Job]] = []
    for members in classes.values():
        if chunks and len(chunks[-1]) + len(members) <= size:
            chunks[-1].extend(members)
        else:
            chunks.append(list(members))
    return chunks


def auto_batch_size(count: int, workers: int) -> int:
    """About four batches per worker for load balance, at most MAX_BATCH instances each."""
    return max(1, min(MAX_BATCH, math.ceil(count / (4 * max(1, workers)))))


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


def _report(name: str, statuses: list[str], verified: int, attempt: int) -> dict:
    return {
        "file": name,
        "counts": dict(Counter(statuses)),
        "instances": len(statuses),
        "verified": verified,
        "attempt": attempt,
    }


@task(name="solve-batch", cache_policy=NO_CACHE, retries=RETRIES, retry_delay_seconds=2)
def solve_batch(batch: Batch, catalog_path: str, memory_limit: int | None = None) -> dict:
    """Solve, verify and write one batch; returns {"file", "counts" (status → count),
    "instances", "verified", "attempt" (1 for the first run of this task, 2 for its
    first retry...)}.

    Each instance runs in this thread's child process (`isolate.Child`) under its time
    and node limits and `memory_limit` bytes (default: the Dask worker's memory limit per
    thread; None: no limit). A batch whose file is already in the catalog (an earlier
    attempt wrote it, but its report was lost with its worker) is read back, not solved
    again. Raises OSError when the catalog cannot be written (Prefect retries the task)."""
    from prefect.runtime import task_run

    attempt = task_run.get_run_count() or 1
    if attempt > 1:
        get_run_logger().warning("batch %d: attempt %d", batch.number, attempt)
    family = puzzles.get(batch.family)
    name = catalog.batch_name(batch.run_id, batch.number)
    if (rows := catalog.read_batch(catalog_path, batch.family, name)) is None:
        rows = _solve_rows(batch, family, memory_limit)
        catalog.write_batch(catalog_path, batch.family, family.Params, rows, name)
    statuses = [row["status"] for row in rows]
    return _report(name, statuses, sum(bool(row["verified"]) for row in rows), attempt)


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
    plan = load(spec_path)
    catalog_path = catalog.resolve(catalog_path)  # workers may run elsewhere
    done = set() if force else catalog.finished(catalog_path, [j.done_key for j in plan.jobs])
    todo = [job for job in plan.jobs if job.done_key not in done]
    run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid4().hex[:6]}"
    size = batch_size or auto_batch_size(len(todo), workers)
    work = batches(todo, run_id, plan.name, size)
    logger.info(
        "run %s: %d instances planned, %d already in the catalog, %d to solve in %d batches",
        run_id,
        len(plan.jobs),
        len(plan.jobs) - len(todo),
        len(todo),
        len(work),
    )
    manifest = {
        "run_id": run_id,
        "sweep": plan.name,
        "spec_path": str(spec_path),
        "spec": plan.text,
        "started_at": datetime.now(UTC),
        "planned": len(plan.jobs),
        "skipped": len(plan.jobs) - len(todo),
        "batches": len(work),
        "batch_size": size,
        "force": force,
    }
    catalog.write_run(catalog_path, {**manifest, "state": "running"})
    progress = Progress(run_id, plan.name, len(todo))
    retried = 0
    failed: list[str] = []
    task = solve_batch.with_options(retries=retries)
    try:
        futures = {task.submit(batch, catalog_path, memory_limit): batch for batch in work}
        for future in as_completed(list(futures)):
            batch = futures[future]
            try:
                report = future.result()
            except Exception as exc:  # a batch that failed every attempt: the others go on
                failed.append(f"batch {batch.number} ({batch.family}): {type(exc).__name__}: {exc}")
                logger.error("%s", failed[-1])
                continue
            retried += report["attempt"] > 1
            snapshot = progress.advance(report["instances"], report["counts"])
            logger.info("%d/%d instances solved (%s)", snapshot.done, len(todo), snapshot.counts)
    finally:
        state = "finished" if progress.done == len(todo) else "failed"
        ended = {"state": state, "finished_at": datetime.now(UTC), "solved": progress.done}
        catalog.write_run(catalog_path, {**manifest, **ended, **_status_counts(progress.counts)})
    progress.finish()
    return {
        "run_id": run_id,
        "sweep": plan.name,
        "planned": len(plan.jobs),
        "skipped": len(plan.jobs) - len(todo),
        "solved": progress.done,
        "counts": dict(progress.counts),
        "batches": len(work),
        "retried": retried,
        "failed": failed,
        "seconds": time.perf_counter() - started,
    }


def _status_counts(counts: Counter) -> dict[str, int]:
    """One manifest column per status, zero when absent."""
    return {status: counts.get(status, 0) for status in catalog.STATUSES}


@contextmanager
def prefect_api() -> Iterator[str | None]:
    """Use the configured Prefect API, or start one temporary API server for the whole
    run (Prefect's ephemeral server) and point this process and, through the settings
    that the task runner ships with each task, every Dask worker at it; otherwise each
    worker process would start its own (DESIGN.md, measured facts). Yields the API URL."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        yield PREFECT_API_URL.value()
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    server.start()
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server.api_url
    finally:
        server.stop()


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
) -> dict:
    """Run `sweep` on Dask: on the scheduler at `address`, or on a new `LocalCluster`
    of `workers` single-threaded worker processes. Returns the flow's report plus
    "scheduler", "dashboard" (URL or None) and "flow_run_url" (None without a
    configured Prefect server).

    `announce(line)` is called with the Dask dashboard's address once the cluster is
    up and, when `PREFECT_API_URL` names a Prefect server, with the flow run's URL once
    the run starts. Raises BadInput for a bad `address` or one that does not answer
    within `connect_timeout` seconds."""
    from prefect.settings import PREFECT_API_URL
    from prefect_dask import DaskTaskRunner

    say = announce or (lambda line: None)
    configured = bool(PREFECT_API_URL.value())
    urls: list[str] = []

    def on_flow_run_url(url: str) -> None:
        if not urls:
            urls.append(url)
            say(f"Prefect flow run: {url}")

    cluster = dask_cluster(address, workers, dashboard_address, connect_timeout)
    with cluster as (scheduler, dashboard, found):
        say(f"Dask scheduler {scheduler}, {found} workers, dashboard {dashboard or '(none)'}")
        host = scheduler.split("://", 1)[-1].rsplit(":", 1)[0]
        if address and not configured and host not in ("127.0.0.1", "localhost", "[::1]"):
            say(
                "warning: PREFECT_API_URL is not set, and the temporary Prefect API listens "
                "on 127.0.0.1 only: workers on other hosts cannot report their tasks. "
                "Point PREFECT_API_URL at a Prefect server they reach (deploy/README.md)."
            )
        with prefect_api(), _listening(on_flow_run_url if configured else None):
            flow = sweep.with_options(
                task_runner=DaskTaskRunner(address=scheduler),
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
