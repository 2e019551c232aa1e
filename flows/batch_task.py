"""What runs on a worker: solve and verify one batch, and hand its rows back.

`solve_batch` is a plain function that the run submits as one Dask future per batch (or
to a thread of its own process): each instance is solved in the thread's child process
under hard time and memory limits (`isolate`) and verified by its family, and the rows
go back to the run's process, whose one writer commits them in groups
(`flight.GroupWriter`). A worker never touches the catalog nor the Prefect API, so N
workers never contend on the Delta log and never wait on the API. Kept apart from
`flight`, which cuts, submits and counts: this module is what runs on the workers.
"""

import time
from dataclasses import dataclass

from puzzlesweep import catalog
from puzzlesweep.core import VERSION
from puzzlesweep.flows.batches import Batch
from puzzlesweep.flows.cluster import batch_children, report_to, worker_identity
from puzzlesweep.isolate import Children
from puzzlesweep.solve import SolveRequest, solve_classes


@dataclass(frozen=True)
class BatchResult:
    """What one attempt of a batch gives back: its `rows` (the catalog rows of its
    instances, in order, each a dict with a `params` dict), the `worker` that solved it
    and the wall `seconds` it took there."""

    rows: list[dict]
    worker: str
    seconds: float


def solve_batch(
    batch: Batch,
    memory_limit: int | None = None,
    topic: str | None = None,
    children: Children | None = None,
) -> BatchResult:
    """Solve and verify every instance of `batch`, each in this thread's child process
    (`isolate.Child`, leased from `children`: the threads backend's, or None for the
    Dask worker's) under the batch's time and node limits and `memory_limit` bytes
    (default: the Dask worker's memory limit per thread; None: no limit). Nothing is
    written here. With `topic`, on a Dask worker, the batch's start and its finished
    classes of equivalent instances are reported as Dask events (`cluster.report_to`),
    which the run's progress display and its retry count follow. Raises
    isolate.Interrupted when a solver was stopped from outside (an interrupted instance
    is not done)."""
    from puzzlesweep.puzzles import Instance

    started = time.perf_counter()
    worker, worker_memory = worker_identity()
    report = report_to(topic, batch.number)

    def solve_canonical(canonical: Instance) -> dict:
        return child.solve(SolveRequest(canonical, batch.solver, batch.limits, batch.count))

    with batch_children(children) as held, held.lease(memory_limit or worker_memory) as child:
        rows = solve_classes(batch.instances(), solve_canonical, report)
    for row in rows:
        row.update(
            run_id=batch.run_id,
            sweep=batch.sweep,
            worker=worker,
            puzzlesweep_version=VERSION,
            schema_version=catalog.SCHEMA_VERSION,
        )
    return BatchResult(rows, worker, time.perf_counter() - started)
