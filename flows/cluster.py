"""Dask's one home in the package: every import of dask, distributed and prefect_dask.

`started_cluster` yields a sweep's cluster with its `DaskPool` (each batch one plain
future named after it, `domination-batch-0003-<token>`) and `events` hears its workers;
`dask_cluster` connects to a scheduler or starts a `LocalCluster`; `dask_runner` is the
Prefect task runner of `prove`; `probe_scheduler` and `connect` check an address;
`PuzzleWorker` (owner of a worker's solver processes), `worker_identity`, `report_to`
and `warm_worker` run on the workers. No puzzle logic here.
"""

import asyncio
import logging
import os
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import dask
from distributed import Client, LocalCluster, fire_and_forget, get_worker
from distributed.comm import connect as open_comm
from distributed.comm.core import CommClosedError
from distributed.diagnostics.plugin import WorkerPlugin

from puzzlesweep.core import BadInput
from puzzlesweep.flows.api import configured_api
from puzzlesweep.flows.probes import answers, check_address, tcp_connect
from puzzlesweep.isolate import Children

__all__ = ["configured_api"]  # re-exported: the runs ask this module for their API


def worker_identity() -> tuple[str, int | None]:
    """(this worker's name, `dask worker --name` or its address; its memory limit per
    thread in bytes or None); (the host name, None) outside Dask."""
    try:
        worker = get_worker()
    except ValueError:  # not on a Dask worker
        return os.uname().nodename, None
    limit = worker.memory_manager.memory_limit
    name = worker.name if isinstance(worker.name, str) and worker.name else worker.address
    return name, (int(limit / max(1, worker.state.nthreads)) if limit else None)


REPORT_SECONDS = 1.0  # between a batch's progress events (not one message per instance)


def report_to(topic: str | None, number: int) -> Callable[[int], None] | None:
    """On a Dask worker, with a `topic`: report the batch's start now, as the event
    ("start", number, worker) under `topic` (a batch started twice lost its first worker:
    a retry), and return a function that reports `n` more finished instances as ("done",
    number, n), at most one event per `REPORT_SECONDS`; None elsewhere."""
    if topic is None:
        return None
    try:
        worker = get_worker()
    except ValueError:  # not on a Dask worker
        return None
    worker.log_event(topic, ["start", number, worker_identity()[0]])
    waiting = [0, 0.0]  # instances not reported yet, when the last event went

    def report(n: int) -> None:
        waiting[0] += n
        now = time.monotonic()
        if now - waiting[1] >= REPORT_SECONDS:
            worker.log_event(topic, ["done", number, waiting[0]])
            waiting[:] = [0, now]

    return report


class DaskPool:
    """Batches as plain Dask futures on `client`, each named after its batch and unique
    per attempt (Dask keeps a finished key's result), never cached."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def submit(self, key: str, fn: Callable, *args):
        """`fn(*args)` on a worker, as a future named `key`-<token>."""
        return self.client.submit(fn, *args, key=f"{key}-{uuid.uuid4().hex[:8]}", pure=False)


@contextmanager
def started_cluster(
    settings, width: int, work: str = "batches"
) -> Iterator[tuple[str, str | None, int, "DaskPool"]]:
    """The cluster of `settings` (a `RunSettings`): the scheduler at its `address`, or a
    LocalCluster of `width` workers started here, readied for their `work`
    (`settings.Work`); yields (scheduler address, dashboard URL or None, workers now,
    its `DaskPool`), closes what it started. Raises BadInput for a scheduler that does
    not answer."""
    tasks = work == "parts"
    cluster = dask_cluster(
        settings.address, width, settings.dashboard_address, settings.connect_timeout, tasks
    )
    with cluster as (scheduler, dashboard, found):
        # not `with Client`: its context is this thread's; an EarlyStart closes in another
        client = Client(scheduler, set_as_default=False)
        try:
            workers = client.scheduler_info(n_workers=-1).get("workers", {})
            if work != "layers":  # a search's layers start no solver process
                memory = settings.memory_limit
                warm = [
                    client.submit(warm_worker, memory, workers=[w], pure=False) for w in workers
                ]
                fire_and_forget(warm)
            yield scheduler, dashboard, found, DaskPool(client)
        finally:
            client.close()


@contextmanager
def events(pool, topic: str, handler: Callable[[str, int, Any], None]) -> Iterator[None]:
    """While the block runs, each event the workers log under `topic` (`report_to`) goes
    to `handler(kind, number, value)` in the client's thread; nothing without Dask."""
    client = getattr(pool, "client", None)
    if client is not None:
        client.subscribe_topic(topic, lambda event: handler(*event[1]))
    try:
        yield
    finally:
        if client is not None:
            with suppress(Exception):  # a lost scheduler has nothing more to say
                client.unsubscribe_topic(topic)


class ClosedHeartbeat(logging.Filter):
    """Drops a worker's "Failed to communicate with scheduler during heartbeat" record
    caused by a closed connection (a 30-line traceback as a run's scheduler closes); a
    scheduler really lost is named in one line by the run's `Watch`."""

    def filter(self, record: logging.LogRecord) -> bool:
        cause = record.exc_info[1] if record.exc_info else None
        heartbeat = record.getMessage().startswith("Failed to communicate with scheduler")
        return not (heartbeat and isinstance(cause, CommClosedError))


def quiet_closed_heartbeats() -> None:
    """On a worker: install `ClosedHeartbeat` on `distributed.worker`'s logger once, and
    let a log handler that fails stay silent (`logging.raiseExceptions`): Prefect's API
    log handler otherwise writes "--- Error logging to API ---" into the run's terminal
    when the API is lost, which the run's `Watch` already says in one line."""
    logging.raiseExceptions = False
    worker_logger = logging.getLogger("distributed.worker")
    if not any(isinstance(f, ClosedHeartbeat) for f in worker_logger.filters):
        worker_logger.addFilter(ClosedHeartbeat())


def warm_worker(memory_limit: int | None = None) -> str:
    """A plain Dask task that starts its worker's solver child (with `memory_limit`)
    while the run starts: 1-4 s the first batch would wait. Never fails."""
    worker, worker_memory = worker_identity()
    try:
        if (children := worker_children()) is not None:
            children.warm(memory_limit or worker_memory)
    except Exception:  # noqa: BLE001 (the first batch does it instead)
        pass
    return worker


@contextmanager
def dask_cluster(
    address: str | None = None,
    workers: int = 2,
    dashboard_address: str | None = "127.0.0.1:8787",
    timeout: float = 10.0,
    prefect_tasks: bool = False,
) -> Iterator[tuple[str, str | None, int]]:
    """Connect to the scheduler at `address`, or start a `LocalCluster` of `workers`
    single-threaded worker processes deaf to Ctrl-C (`ready_forkserver`; its dashboard
    on `dashboard_address`, or another free port if that one is taken; None: none, nor
    port 8787) and close it afterwards. Yields (scheduler address, dashboard URL or
    None, workers connected now); every worker, now and joining later, is readied by
    `_ready_workers` (with Prefect imported first when `prefect_tasks`: `prove`'s parts
    are task runs). Raises BadInput for a malformed address or a scheduler that does
    not answer in `timeout` seconds. Workers need only the installed package: tasks
    carry handles (family, parameters, solver, limits), never code or models."""
    if address:
        with connect(address, timeout) as client:
            _ready_workers(client, prefect_tasks)
            found = len(client.scheduler_info(n_workers=-1).get("workers", {}))
            link = client.dashboard_link
            yield address, link if link and answers(link, timeout=5.0) else None, found
        return
    with _start_deaf_to_ctrl_c(
        LocalCluster,
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=dashboard_address,
        scheduler_kwargs=None if dashboard_address else {"dashboard_address": "127.0.0.1:0"},
    ) as cluster:
        with Client(cluster) as client:
            _ready_workers(client, prefect_tasks)
        link = cluster.dashboard_link if dashboard_address else None
        yield cluster.scheduler_address, link, workers


def _ready_workers(client, prefect_tasks: bool = False) -> None:
    """Register `PuzzleWorker` for every worker, now and joining later, and have the
    workers forget earlier runs' Prefect API clients (`prove`'s task runs)."""
    from puzzlesweep.flows.api import forget_old_api_clients

    client.register_plugin(PuzzleWorker())
    if prefect_tasks:
        client.register_plugin(PrefectWorker())
    client.run(forget_old_api_clients)


def ready_forkserver() -> None:
    """In the main thread (elsewhere: nothing), start the multiprocessing fork server
    with SIGINT ignored, so that the local workers forked from it (also those a nanny
    restarts) ignore it too: a Ctrl-C at the terminal reaches the whole process group,
    and this process alone decides what stops. SIGINT is ignored only while the fork
    server is spawned: a Ctrl-C during the cluster's start is not lost.

    The fork server imports `distributed` once, so each worker forked from it starts
    without importing it again: 16 local workers came up in 2.0 s instead of 5.3 s on
    2 cores. It runs with one OpenBLAS thread (unless OPENBLAS_NUM_THREADS is set), so
    that it holds no thread when it forks; its workers and their solver processes
    inherit that setting."""
    import multiprocessing.forkserver
    import signal

    if threading.current_thread() is threading.main_thread():
        multiprocessing.set_forkserver_preload(["__main__", "distributed"])
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        ours = "OPENBLAS_NUM_THREADS" not in os.environ
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the fork server's, not ours
        try:
            multiprocessing.forkserver.ensure_running()  # inherits the ignored SIGINT
        finally:
            signal.signal(signal.SIGINT, previous)
            if ours:
                os.environ.pop("OPENBLAS_NUM_THREADS", None)


def _start_deaf_to_ctrl_c(factory: Callable, **kwargs):
    """`factory(**kwargs)` with its worker processes forked from the fork server of
    `ready_forkserver`. Raises BadInput when the workers fail to start because the
    script that runs the sweep starts it again in each of them (no `__main__` guard)."""
    import sys

    ready_forkserver()
    dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})
    try:
        return factory(**kwargs)
    except RuntimeError as exc:
        script = getattr(sys.modules.get("__main__"), "__file__", None)
        if script is None or "failed to start" not in str(exc):
            raise
        raise BadInput(
            f"the local Dask workers failed to start ({exc}): each imports {script}, so "
            'a script that runs a sweep must call it under `if __name__ == "__main__":`'
        ) from None


def probe_scheduler(address: str, timeout: float = 10.0) -> str:
    """`address` once the Dask scheduler there has answered an identity request within
    `timeout` seconds (a port that accepts and never answers would hold a Client for
    ever). Raises BadInput naming the address: malformed, nothing listens (at once),
    no answer in time, or not a Dask scheduler. A `tls://` address is only checked for
    its form (the probe has no certificates)."""
    check_address(address)
    if address.startswith("tls://"):
        return address
    try:
        tcp_connect(address, min(timeout, 2.0))
    except ConnectionRefusedError:
        raise BadInput(f"--address {address}: nothing listens there (connection refused)") from None
    except OSError:
        pass  # no answer yet, which is no refusal: the identity request waits `timeout`
    try:
        reply = asyncio.run(asyncio.wait_for(_identity(address, timeout), timeout))
    except TimeoutError:
        reply = f"no Dask scheduler answered within {timeout:g} s"
    except Exception as exc:  # noqa: BLE001 (refused, reset, or not Dask's protocol)
        reply = f"no Dask scheduler answered within {timeout:g} s ({str(exc)[:200]})"
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        why = reply if isinstance(reply, str) else "what answered is not a Dask scheduler"
        raise BadInput(f"--address {address}: {why}")
    return address


async def _identity(address: str, timeout: float) -> object:
    """The reply of the Dask server at `address` to an `identity` request."""
    comm = await open_comm(address, timeout=timeout)
    try:
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        comm.abort()


def connect(address: str, timeout: float = 10.0):
    """A `distributed.Client` of the scheduler at `address`. Raises BadInput for a bad
    address or one where no scheduler answers within `timeout` seconds."""
    check_address(address)
    try:
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError) as exc:
        raise BadInput(
            f"--address {address}: no Dask scheduler answered within {timeout:g} s ({exc})"
        ) from None


def on_every_part(client, function: Callable, calls: list[tuple]) -> list:
    """`function(*args)` for each of `calls` as Dask futures on `client` (not cached),
    gathered in order (an error re-raises here); `function` must be safe to run twice."""
    return client.gather([client.submit(function, *args, pure=False) for args in calls])


def enclosing_scheduler() -> str | None:
    """The scheduler of the Dask task runner of the flow run this code runs in (a user's
    `@flow(task_runner=DaskTaskRunner(...))`: a sweep inside uses it); None elsewhere."""
    from prefect.context import FlowRunContext
    from prefect_dask import DaskTaskRunner

    runner = getattr(FlowRunContext.get(), "task_runner", None)
    return runner.client.scheduler.address if isinstance(runner, DaskTaskRunner) else None


def dask_runner(scheduler: str):
    """Prefect's task runner on the Dask scheduler at `scheduler` (not started yet)."""
    from prefect_dask import DaskTaskRunner

    return DaskTaskRunner(address=scheduler)


def quiet_dask() -> None:
    """Keep Dask's INFO lines and 'port in use' warning off the terminal (level WARNING,
    or `PUZZLESWEEP_DASK_LOG_LEVEL`)."""
    level = os.environ.get("PUZZLESWEEP_DASK_LOG_LEVEL", "WARNING").upper()
    for name in list(logging.root.manager.loggerDict):
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(level)
    warnings.filterwarnings("ignore", message=r"(?s)Port \d+ is already in use")


class PuzzleWorker(WorkerPlugin):
    """On each worker (also one that joins later): `quiet_closed_heartbeats`, and the
    owner of the worker's solver processes (`children`, an `isolate.Children`), which
    its batches lease (`batch_children`) and which stop when the worker closes. A
    sweep's batches import no Prefect on the workers (only `prove`'s task runs do)."""

    name = "puzzlesweep-worker"
    idempotent = True  # a second run on the same cluster keeps the workers' children

    def setup(self, worker) -> None:
        """Hold the solver children and install the filter (once per worker)."""
        self.children = Children()
        quiet_closed_heartbeats()

    def teardown(self, worker) -> None:
        """Stop the solver children (one in the middle of a batch stops when it ends)."""
        self.children.close()


class PrefectWorker(WorkerPlugin):
    """On each worker of `prove` (its parts are Prefect task runs): import Prefect's task
    engine before any task, since two threads importing it at once deadlocked."""

    name = "puzzlesweep-prefect"
    idempotent = True

    def setup(self, worker) -> None:
        """Import it once (never fails: a task imports it again and says why)."""
        with suppress(Exception):
            import prefect.task_engine  # noqa: F401


def worker_children() -> Children | None:
    """The solver children of the Dask worker that runs this (its `PuzzleWorker`'s);
    None outside a Dask worker, or on one without the plugin."""
    try:
        plugin = get_worker().plugins.get(PuzzleWorker.name)
    except ValueError:  # not on a Dask worker
        return None
    return getattr(plugin, "children", None)


@contextmanager
def batch_children(children: Children | None) -> Iterator[Children]:
    """The solver children a batch leases its child from: `children` (the threads
    backend's, passed to the task), else the Dask worker's (`worker_children`), else
    new ones stopped after the block (a task's body called on its own)."""
    held = children if children is not None else worker_children()
    if held is not None:
        yield held
        return
    with Children() as own:
        yield own
