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

import os
import queue
import re
import threading
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
from puzzlesweep.flows.faults import (
    CatalogUnwritable,
    RunStopped,
    first_line,
    permanent,
    retry_transient,
)
from puzzlesweep.flows.progress import Progress
from puzzlesweep.flows.spec import load
from puzzlesweep.solve import empty_row, solve_classes

RETRIES = 2  # extra attempts of a batch after a transient failure (Prefect task retries)
#: Called with (state, message) once a run that was interrupted (`interrupted`, None)
#: or lost its Prefect API or Dask scheduler (`failed`, the one line to show) has written
#: its row: the command line exits there rather than wait for a teardown that would
#: talk to what is gone.
after_stop: list[Callable[[str, str | None], None]] = []
#: Called (no arguments) in the flow's thread as it starts: the command line puts its
#: SIGTERM handler back over Prefect's (which Prefect installs for runner-driven
#: cancellation, and which would log a crash and leave the run's row `failed`).
on_flow_start: list[Callable[[], None]] = []


# The flow calls the hooks through these module functions, which pickle by reference:
# the flow's own code is shipped with every task, and the hooks (closures over the
# command line's console) cannot be pickled.
def _flow_started() -> None:
    for hook in list(on_flow_start):
        hook()


def _stopped(state: str, message: str | None = None) -> None:
    for hook in list(after_stop):
        hook(state, message)


# (the flow reaches these through module functions only: see `_flow_started`)
_stop = threading.Event()
_in_loop = [0]  # sweep flows of this process inside their submit loop


def _looping(step: int) -> None:
    """A flow enters (+1, clearing an old stop request) or leaves (-1) its loop."""
    if step > 0 and not _in_loop[0]:
        _stop.clear()
        _stop_reason.clear()
    _in_loop[0] += step


_stop_reason: list[str] = []


def request_stop(reason: str | None = None) -> bool:
    """Ask the sweep flows running in this process to stop: within about `POLL`
    seconds each stops submitting and raises, KeyboardInterrupt (its row says
    `interrupted`) or, with a `reason`, RunStopped(reason) (`failed`). Safe in a signal
    handler. Returns whether a flow was in its submit loop to hear it (if not, the
    caller interrupts in its own way)."""
    if reason:
        _stop_reason.append(reason)
    _stop.set()
    return _in_loop[0] > 0


POLL = 0.25  # seconds between looks at a stop request while batches run


def _next_done(finished: queue.Queue):
    """The next future to finish; raises KeyboardInterrupt once a stop is requested."""
    while True:
        if _stop.is_set():
            if _stop_reason:
                raise RunStopped(_stop_reason[0])
            raise KeyboardInterrupt
        try:
            return finished.get(timeout=POLL)
        except queue.Empty:
            continue


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
def solve_batch(batch: Batch, catalog_path: str, memory_limit: int | None = None) -> dict:
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
    written: an interrupted instance is not done)."""
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
            [batch.run_id, batch.family, _params_keys(batch, family)],
        )
        rows = [{"status": status, "verified": verified} for status, verified in rows]
    else:
        rows = _solve_rows(batch, family, memory_limit)
        try:
            catalog.write_batch(catalog_path, family.Params, rows, app_id)
        except Exception as exc:
            if permanent(exc):
                raise CatalogUnwritable(
                    f"catalog {catalog_path} cannot be written: {first_line(exc)}"
                ) from None
            raise
    return _report(app_id, rows, attempt, time.perf_counter() - started)


def _params_keys(batch: Batch, family) -> list[str]:
    """The params keys of the instances of `batch`."""
    from puzzlesweep.core import Instance, make_params

    return [
        Instance(batch.family, make_params(family.Params, raw)).params_key for raw in batch.params
    ]


def _solve_rows(batch: Batch, family, memory_limit: int | None) -> list[dict]:
    """The catalog rows of every instance of `batch`, each solved and verified in this
    thread's child process."""
    from puzzlesweep.core import Instance, make_params
    from puzzlesweep.flows.isolate import child_for_thread

    worker, worker_memory = _worker()
    child = child_for_thread(memory_limit or worker_memory)
    instances = [Instance(batch.family, make_params(family.Params, raw)) for raw in batch.params]

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

    rows = solve_classes(instances, solve_canonical)
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
    Returns the worker's address. Never fails: a warm-up that does not happen (seen: an
    import `_DeadlockError` when a batch imports the same modules at the same moment on
    a loaded machine, which Dask printed as a traceback) only costs the time it saves."""
    worker, worker_memory = _worker()
    try:
        import prefect.task_engine  # noqa: F401
        import prefect_dask  # noqa: F401

        from puzzlesweep.flows.isolate import child_for_thread

        child_for_thread(memory_limit or worker_memory).start()
    except Exception:  # noqa: BLE001 (the first batch does it instead)
        pass
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
    allow_concurrent: bool = False,
    max_instances: int | None = None,
    scheduler: str | None = None,
) -> dict:
    """Run the sweep of `spec_path` into `catalog_path`; returns {"run_id", "sweep",
    "planned", "skipped", "solved", "counts", "batches", "retried" (batches that needed
    more than one attempt), "failed" (batches that failed every attempt), "seconds"}.
    Instances with a final result for the same solver and limits are skipped unless
    `force`. `memory_limit` (bytes per instance) and `retries` (per batch) as in
    `solve_batch`; `max_instances` as in `spec.parse`. While batches run, a `Watch`
    probes the Prefect API and the Dask `scheduler` (its address, when given): one
    that stops answering for `LOST_SECONDS` ends the run (state `failed`; RunStopped
    naming it), what was written is kept.

    The run's row in `runs` is written before the first batch (state `running`), kept
    alive by a heartbeat, and replaced at the end (`finished`; `failed` when a batch
    failed every attempt; `interrupted` on KeyboardInterrupt or Prefect's
    TerminationSignal) with its counts by status,
    counted in the catalog (the rows this run wrote), not from the reports received.
    Raises BadInput when another run of the same sweep is alive in the catalog, unless
    `allow_concurrent`. Stops (state `failed`, the report's "stopped" says why) at the
    first batch that fails with an error no retry can fix (`faults.permanent`), without
    waiting for the others."""
    from prefect.exceptions import TerminationSignal

    _flow_started()
    logger = get_run_logger()
    started = time.perf_counter()
    catalog_path = catalog.resolve(catalog_path)  # workers may run elsewhere
    plan, todo = _todo(spec_path, catalog_path, force, max_instances)
    catalog.prepare(catalog_path, {puzzles.get(job.instance.family).Params for job in plan.jobs})
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
    catalog.claim(catalog_path, manifest, allow_concurrent)
    watch = Watch(scheduler, lambda reason: _lost(reason))

    def _lost(reason: str) -> None:  # in the watch's thread: the main one may be stuck
        line = f"run {run_id} stopped: {reason}; the instances written before are kept"
        row = {**so_far(), **written(catalog_path, run_id)}
        catalog.write_run(
            catalog_path, {**row, "state": "failed", "finished_at": datetime.now(UTC)}
        )
        _stopped("failed", line)
        request_stop(line)

    progress = Progress(run_id, plan.name, len(todo))
    retried = 0
    failed: list[str] = []
    task = solve_batch.with_options(retries=retries)
    finished: queue.Queue = queue.Queue()  # futures, as their tasks end
    running: dict = {}  # future -> its batch
    state = "failed"
    stopped: str | None = None

    def so_far() -> dict:
        counts = _status_counts(progress.counts)
        return {**manifest, **counts, "solved": progress.done, "batches": planner.planned}

    _looping(1)
    try:
        with catalog.Heartbeat(catalog_path, so_far), watch:
            while True:
                # keep two batches per worker submitted: one running, one queued behind it
                while len(running) < 2 * workers and (batch := planner.next()) is not None:
                    future = task.submit(batch, catalog_path, memory_limit)
                    running[future] = batch
                    future.add_done_callback(finished.put)
                if not running:
                    break
                future = _next_done(finished)
                batch = running.pop(future)
                try:
                    report = future.result()
                except Exception as exc:  # a batch that failed every attempt: the others go on
                    planner.record(batch, None)
                    failed.append(f"batch {batch.number} ({batch.family}): {first_line(exc)}")
                    if permanent(exc):  # every later batch would fail the same way
                        stopped = failed[-1]
                        _cancel(running)
                        break
                    logger.error("%s", failed[-1])
                    continue
                planner.record(batch, report["seconds"])
                retried += report["attempt"] > 1
                snapshot = progress.advance(report["instances"], report["counts"])
                logger.info(
                    "%d/%d instances solved (%s)", snapshot.done, len(todo), snapshot.counts
                )
        state = "finished" if progress.done == len(todo) and not stopped else "failed"
    except (KeyboardInterrupt, TerminationSignal):  # nothing more is sent
        state = "interrupted"
        raise
    finally:
        _looping(-1)
        ended = {"state": state, "finished_at": datetime.now(UTC)}
        catalog.write_run(catalog_path, {**so_far(), **written(catalog_path, run_id), **ended})
        watch.stop()
        if state == "interrupted":
            _stopped(state)
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
        "stopped": stopped,
        "seconds": time.perf_counter() - started,
    }


#: Seconds a Prefect API or Dask scheduler may fail its probes before the run stops.
LOST_SECONDS = 4.0


class Watch:
    """While its `with` block runs, a daemon thread probes the Prefect API this process
    uses (GET /health) and the Dask scheduler at `scheduler` (a TCP connection) every
    second; when one has failed every probe for `LOST_SECONDS`, it calls
    `on_lost(reason)` once (in its thread) and stops. A probe costs a millisecond or
    two; nothing is probed that is not configured."""

    def __init__(self, scheduler: str | None, on_lost: Callable[[str], None]):
        from prefect.settings import PREFECT_API_URL

        self.api = PREFECT_API_URL.value()
        self.scheduler = scheduler
        self.on_lost = on_lost
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="run-watch", daemon=True)

    def _api_answers(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"{self.api}/health", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def _scheduler_answers(self) -> bool:
        import socket

        host, port = self.scheduler.split("://", 1)[-1].rsplit(":", 1)
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=2).close()
            return True
        except OSError:
            return False

    def _run(self) -> None:
        probes = []
        if self.api:
            probes.append((f"the Prefect API at {self.api} stopped answering", self._api_answers))
        if self.scheduler:
            probes.append(
                (
                    f"the Dask scheduler at {self.scheduler} stopped answering",
                    self._scheduler_answers,
                )
            )
        failing: dict[str, float] = {}
        while probes and not self._done.wait(1.0):
            for reason, probe in probes:
                if probe():
                    failing.pop(reason, None)
                    continue
                since = failing.setdefault(reason, time.monotonic())
                if time.monotonic() - since >= LOST_SECONDS and not self._done.is_set():
                    self._done.set()
                    self.on_lost(f"{reason} (for {LOST_SECONDS:g} s)")
                    return

    def stop(self) -> None:
        """Stop probing (the thread ends within a second)."""
        self._done.set()

    def __enter__(self) -> "Watch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _cancel(running: dict) -> None:
    """Cancel the submitted batches of `running` (futures): those not started never
    start; a running one ends with its worker (the cluster closes after the flow)."""
    for future in running:
        wrapped = getattr(future, "wrapped_future", None)
        try:
            (wrapped or future).cancel()
        except Exception:  # noqa: BLE001 (already done, or its scheduler is gone)
            pass


def written(catalog_path: str, run_id: str) -> dict:
    """The counts of run `run_id` as its rows in `results` tell them: `solved` (rows
    written) and one count per status; empty when the catalog cannot be read (the caller
    keeps the counts it has)."""
    try:
        _, rows = catalog.query(
            catalog_path,
            "SELECT status, count(*) FROM results WHERE run_id = ? GROUP BY 1",
            [run_id],
        )
    except Exception:  # noqa: BLE001 (an unreadable catalog: the reports' counts stand)
        return {}
    counts = Counter(dict(rows))
    return {**_status_counts(counts), "solved": sum(counts.values())}


def _settle(catalog_path: str, run_id: str) -> None:
    """Count run `run_id`'s rows again and rewrite its row in `runs` if a batch
    committed after the flow counted them."""
    row = catalog.read_run(catalog_path, run_id)
    counts = written(catalog_path, run_id)
    if row is not None and counts and counts["solved"] != row["solved"]:
        catalog.write_run(catalog_path, {**row, **counts})


def _todo(
    spec_path: str, catalog_path: str, force: bool, max_instances: int | None = None
) -> tuple:
    """(the spec's plan, its jobs without a final result in the catalog, all if `force`).
    Raises BadInput for a bad or too large spec."""
    plan = load(spec_path, max_instances)
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
    carry handles (family, parameters, solver, limits), never code or models.

    The local workers are started with SIGINT ignored (they inherit it), so a Ctrl-C at
    the terminal, which reaches the whole process group, is handled by this process
    alone: it decides what stops, and the workers end with it. A Ctrl-C during the few
    seconds of the cluster's start is ignored too."""
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
    with _start_deaf_to_ctrl_c(
        LocalCluster,
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=dashboard_address,
    ) as cluster:
        link = cluster.dashboard_link if dashboard_address else None
        yield cluster.scheduler_address, link, workers


def _start_deaf_to_ctrl_c(factory: Callable, **kwargs):
    """`factory(**kwargs)` with SIGINT ignored in this process while it runs (in the
    main thread only): the worker processes it starts inherit the ignoring."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return factory(**kwargs)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return factory(**kwargs)
    finally:
        signal.signal(signal.SIGINT, previous)


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
    allow_concurrent: bool = False,
    max_instances: int | None = None,
) -> dict:
    """Run `sweep` on Dask: on the scheduler at `address`, or on a new `LocalCluster`
    of `workers` single-threaded worker processes. Returns the flow's report plus
    "scheduler", "dashboard" (URL or None) and "flow_run_url" (None without a
    configured Prefect server). Raises RunStopped (one line) when the run stopped at a
    batch that no retry could fix; the run's row then counts what it wrote, counted
    again once the cluster is gone (no batch can commit after that).

    `announce(line)` is called with the Dask dashboard's address once the cluster is
    up and, when `PREFECT_API_URL` names a Prefect server, with the flow run's URL once
    the run starts. Raises BadInput for a bad `address` or one that does not answer
    within `connect_timeout` seconds. `api`: the temporary Prefect API, when the caller
    started it early (it is stopped at the end); started here when needed otherwise.
    Raises BadInput when a run of the same sweep is alive in the catalog, unless
    `allow_concurrent`. `max_instances` as in `spec.parse`."""
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
        plan, todo = _todo(spec_path, catalog.resolve(catalog_path), force, max_instances)
        if not allow_concurrent:
            catalog.refuse_if_busy(catalog_path, plan.name)
        idle = not address and not todo
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
                    allow_concurrent=allow_concurrent,
                    max_instances=max_instances,
                    scheduler=scheduler,
                )
    if report.get("stopped"):
        _settle(catalog_path, report["run_id"])
        raise RunStopped(
            f"run {report['run_id']} stopped at the first batch that cannot succeed: "
            f"{report['stopped']}; the instances written before are kept"
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
