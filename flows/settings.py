"""A run's settings, from the command line (or `puzzlesweep.sweep()`, or a deployment's
parameters) to the cluster: `RunSettings`, validated once at the edge and passed down as
one typed object, and the threads pool that is the Dask-free way to run batches.

Dask-free: the command line validates its options here before anything imports Dask;
`RunSettings.start` asks `flows.cluster`, Dask's one home, for a cluster. No puzzle logic.
"""

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from puzzlesweep.core import BadInput
from puzzlesweep.flows.probes import check_address
from puzzlesweep.isolate import MIN_MEMORY, Children

#: Workers of a cluster started here, unless told: one per core this process may use.
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
RETRIES = 2  # extra attempts of a batch after a transient failure

#: What a run's workers do: a sweep's batches, `prove`'s parts (Prefect task runs) or a
#: `search`'s layers (no solver process).
Work = Literal["batches", "parts", "layers"]


class RunSettings(BaseModel):
    """How one sweep runs; every field is a parameter of the `sweep` flow (described
    there) and an option of `puzzlesweep run` (spelt `--dashboard-address` for
    `dashboard_address`).

    Raises BadInput (from `of`) naming the first bad field, or both fields of a
    conflicting pair: `address` with `workers`, `address` or `dashboard_address` with the
    threads backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalog: str = "results"
    backend: Literal["dask", "threads"] = "dask"
    address: str | None = None
    workers: int | None = Field(None, ge=1)
    dashboard_address: str | None = None
    connect_timeout: float = Field(10.0, gt=0, allow_inf_nan=False)
    batch_size: int | None = Field(None, ge=1)
    force: bool = False
    memory_limit: int | None = Field(None, ge=MIN_MEMORY)
    retries: int = Field(RETRIES, ge=0)
    max_instances: int | None = Field(None, ge=1)
    allow_concurrent: bool = False

    @model_validator(mode="after")
    def _one_way(self) -> "RunSettings":
        if self.address and self.workers is not None:
            _conflict(
                "address",
                "workers",
                "workers sizes a cluster started here, and address uses a cluster already started",
            )
        if self.dashboard_address and self.backend == "threads":
            _conflict(
                "dashboard_address",
                "backend threads",
                "the threads backend runs no Dask scheduler, so there is no dashboard",
            )
        if self.address and self.backend == "threads":
            _conflict(
                "address",
                "backend threads",
                "the threads backend runs in this process; address needs backend dask",
            )
        if self.address:
            check_address(self.address)
        return self

    @classmethod
    def of(cls, flags: bool = False, **settings: Any) -> "RunSettings":
        """Validated settings; raises BadInput with the first problem in one line, the
        fields named as command-line options (`--dashboard-address`) when `flags`."""
        try:
            return cls(**settings)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            message = first["msg"].removeprefix("Value error, ")
            if flags:
                message = message.replace("{", "{--")
            message = message.replace("{", "").replace("}", "")
            if flags:
                message = message.replace("_", "-")
            name = f"--{where.replace('_', '-')}" if flags else where
            raise BadInput(f"{name} {message}" if where else message) from None

    @property
    def size(self) -> int:
        """Workers (or threads) of a cluster started here: `workers`, else one per core."""
        return self.workers or CORES

    @contextmanager
    def start(self, instances: int | None = None, work: Work = "batches") -> Iterator["Started"]:
        """Start (and on exit close) the run's workers: a LocalCluster of `size`
        workers (at most `instances`: a sweep of one instance starts one), the scheduler
        at `address`, or `size` threads of this process, readied for their `work`: a
        sweep's batches and `prove`'s parts get a solver process started at once, parts
        (Prefect task runs) import Prefect first. Raises BadInput for a scheduler that
        does not answer."""
        width = max(1, min(self.size, instances or self.size))
        if self.backend == "threads":
            with Children() as children, ThreadPool(width) as pool:
                yield Started(None, None, width, pool, children)
            return
        from puzzlesweep.flows.cluster import started_cluster

        with started_cluster(self, width, work) as (scheduler, dashboard, workers, pool):
            yield Started(scheduler, dashboard, workers, pool, None)

    @contextmanager
    def start_with_api(
        self, instances: int | None, say: Callable[[str], None], work: Work = "batches"
    ) -> Iterator["Started"]:
        """`start(instances, work)` beside the run's Prefect API (the configured one or a
        temporary one, `api.prefect_api`), the cluster starting in a thread while the API
        does (`EarlyStart`), as a sweep starts them; `say(line)` is told the workers
        (`announce`). How `prove` and `search` start; raises what both raise."""
        from puzzlesweep.flows.api import prefect_api

        local = self.backend == "dask" and not self.address
        early = EarlyStart(self, instances or self.size, work) if local else None
        try:
            with prefect_api():
                with early.started() if early else self.start(instances, work) as started:
                    announce(started, self, say)
                    yield started
        finally:
            if early is not None:
                early.close()


def _conflict(first: str, second: str, reason: str) -> None:
    """Raise the ValueError of two fields that do not go together (`RunSettings.of`
    spells `{name}` as an option or a parameter)."""
    raise ValueError(f"{{{first}}} and {{{second}}} do not go together: {reason}")


class EarlyStart:
    """`settings.start(instances)` begun now in a thread, so that a cluster started here
    comes up while the Prefect API starts and the flow claims its run. `started()` waits
    for it and yields the `Started` (raising what the start raised); `close()` closes it
    (also when the flow never took it). Made in the main thread: the workers' fork server
    is started here, deaf to Ctrl-C (`cluster.ready_forkserver`)."""

    def __init__(self, settings: RunSettings, instances: int, work: Work = "batches") -> None:
        from puzzlesweep.flows.cluster import ready_forkserver

        ready_forkserver()
        self._starting = settings.start(instances, work)
        self._started: Started | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._start, name="cluster-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        try:
            self._started = self._starting.__enter__()
        except BaseException as exc:  # noqa: BLE001 (raised again in the flow's thread)
            self._error = exc

    @contextmanager
    def started(self) -> Iterator["Started"]:
        """The started cluster, closed on exit."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        try:
            yield self._started
        finally:
            self.close()

    def close(self) -> None:
        """Close the cluster once it has started (a no-op the second time)."""
        self._thread.join()
        if self._started is not None and not self._closed:
            self._closed = True
            self._starting.__exit__(None, None, None)


def announce(started: "Started", settings: RunSettings, say: Callable[[str], None]) -> None:
    """Tell `say` where the run's workers are: the scheduler, its workers and dashboard
    (or the threads), and a warning when workers on other hosts could not reach the
    temporary Prefect API."""
    if started.scheduler is None:
        n = started.workers
        say(f"{n} {'thread' if n == 1 else 'threads'} in this process")
        return
    link = started.dashboard or "(none)"
    say(f"Dask scheduler {started.scheduler}, {started.workers} workers, dashboard {link}")
    from puzzlesweep.flows.api import configured_api

    host = started.scheduler.split("://", 1)[-1].rsplit(":", 1)[0]
    remote = host not in ("127.0.0.1", "localhost", "[::1]")
    if settings.address and remote and configured_api() is None:
        say(
            "warning: PREFECT_API_URL is not set, and the temporary Prefect API listens "
            "on 127.0.0.1 only: workers on other hosts cannot report their tasks. "
            "Point PREFECT_API_URL at a Prefect server they reach (deploy/README.md)."
        )


@dataclass
class Started:
    """A run's started workers: the scheduler's address and dashboard URL (None for
    threads, or none), how many workers there are now, the `pool` batches are submitted
    to, and the solver children of the threads backend (None on Dask: each worker has
    its own, `cluster.PuzzleWorker`)."""

    scheduler: str | None
    dashboard: str | None
    workers: int
    pool: Any  # ThreadPool or cluster.DaskPool: submit(key, fn, *args) -> a future
    children: Children | None


class ThreadPool:
    """Batches on threads of this process: `submit(key, fn, *args)` returns a
    concurrent.futures Future (`key` names the batch for Dask only). A context manager:
    on exit it waits for the running calls and drops those not started."""

    def __init__(self, threads: int) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="batch")

    def submit(self, key: str, fn: Callable, *args: Any) -> Future:
        """Run `fn(*args)` on a thread of the pool."""
        return self._executor.submit(fn, *args)

    def __enter__(self) -> "ThreadPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
