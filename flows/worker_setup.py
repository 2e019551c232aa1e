"""The Dask worker plugin that readies every worker of a run's cluster as it joins,
sweep or proof alike (`flows.cluster.dask_cluster` registers it): it keeps a closed
scheduler's heartbeat traceback off the run's terminal and imports Prefect once,
before any task arrives. Holds no puzzle logic."""

from distributed.diagnostics.plugin import WorkerPlugin

from puzzlesweep.flows.cluster import quiet_closed_heartbeats


class QuietWorker(WorkerPlugin):
    """On each worker (also one that joins later): `quiet_closed_heartbeats`, then
    `import prefect.task_engine` in the worker's event loop before tasks run. Two
    threads of a worker that imported Prefect at once (the event loop unpickling a task
    that names `prefect.client.schemas.objects` while a task's thread ran `import
    prefect`) deadlocked on Python's module locks, and Prefect printed "Failed to
    initialize plugins: deadlock detected by _ModuleLock(...)" once per worker. Never
    fails: the worker works without either."""

    name = "puzzlesweep-quiet-worker"
    idempotent = True

    def setup(self, worker) -> None:
        """Install the filter and import Prefect's task engine (about 2 s, once)."""
        quiet_closed_heartbeats()
        try:
            import prefect.task_engine  # noqa: F401
        except Exception:  # noqa: BLE001 (a task imports it again and says why)
            pass
