"""Where a sweep's batches run, as settings: `Cluster`, the one validated choice between
a Dask cluster and Prefect's threads that the command line, the flow, the deployments
and deploy/slurm share, and the warning about remote workers without a Prefect API.

Dask-free: the command line validates its options here before anything imports Dask;
`Cluster.start` asks `flows.cluster`, Dask's one home, for a cluster. No puzzle logic.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from puzzlesweep.core import BadInput
from puzzlesweep.flows.isolate import Children
from puzzlesweep.flows.probes import check_address


def warn_remote_without_api(
    scheduler: str, address: str | None, configured: bool, say: Callable[[str], None]
) -> None:
    """Say when workers on other hosts could not reach the temporary Prefect API."""
    host = scheduler.split("://", 1)[-1].rsplit(":", 1)[0]
    if address and not configured and host not in ("127.0.0.1", "localhost", "[::1]"):
        say(
            "warning: PREFECT_API_URL is not set, and the temporary Prefect API listens "
            "on 127.0.0.1 only: workers on other hosts cannot report their tasks. "
            "Point PREFECT_API_URL at a Prefect server they reach (deploy/README.md)."
        )


class Cluster(BaseModel):
    """Where a sweep's batches run, validated once for the command line, the flow, the
    deployments and deploy/slurm: `backend` "dask" (a `LocalCluster` of `workers`
    single-threaded processes, or the scheduler at `address`) or "threads" (Prefect's
    thread pool of `workers` threads in this process: notebooks and fast tests);
    `dashboard_address` (HOST:PORT of a LocalCluster's dashboard, None: none);
    `connect_timeout` (seconds to wait for the scheduler at `address`).

    Raises BadInput (from `of`) naming both options when they conflict: `address`
    with `workers`, `address` or `dashboard_address` with the threads backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["dask", "threads"] = "dask"
    address: str | None = None
    workers: int | None = Field(default=None, ge=1)
    dashboard_address: str | None = None
    connect_timeout: float = Field(default=10.0, gt=0)

    @model_validator(mode="after")
    def _one_way(self) -> "Cluster":
        if self.address and self.workers is not None:
            raise ValueError(
                "--address and --workers do not go together: --workers sizes a local "
                "cluster, and --address uses a cluster already started"
            )
        if self.dashboard_address and self.backend == "threads":
            raise ValueError(
                "--dashboard-address and --backend threads do not go together: the "
                "threads backend runs no Dask scheduler, so there is no dashboard"
            )
        if self.address and self.backend == "threads":
            raise ValueError(
                "--address and --backend threads do not go together: the threads "
                "backend runs in this process; --address needs --backend dask"
            )
        if self.address:
            check_address(self.address)
        return self

    @classmethod
    def of(cls, **settings: Any) -> "Cluster":
        """A validated Cluster; raises BadInput with the first problem in one line."""
        try:
            return cls(**settings)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            message = first["msg"].removeprefix("Value error, ")
            raise BadInput(f"--{where.replace('_', '-')} {message}" if where else message) from None

    @property
    def size(self) -> int:
        """Workers (or threads) of a cluster started here: `workers`, else 2."""
        return self.workers or 2

    @contextmanager
    def start(self) -> Iterator[tuple[str | None, str | None, int, Any, Children | None]]:
        """Start (and on exit close) the cluster and its Prefect task runner; yields
        (scheduler address or None, dashboard URL or None, workers, the started task
        runner, the solver children to pass to each batch task). The threads backend's
        children are this run's, stopped on exit; a Dask cluster's are its workers' own
        (`cluster.PuzzleWorker`), so None. Raises BadInput for a scheduler that does
        not answer."""
        if self.backend == "threads":
            from prefect.task_runners import ThreadPoolTaskRunner

            with Children() as children, ThreadPoolTaskRunner(max_workers=self.size) as runner:
                yield None, None, self.size, runner, children
            return
        from puzzlesweep.flows.cluster import dask_cluster, dask_runner

        cluster = dask_cluster(
            self.address, self.size, self.dashboard_address, self.connect_timeout
        )
        with cluster as (scheduler, dashboard, found):
            with dask_runner(scheduler) as runner:
                yield scheduler, dashboard, found, runner, None
