"""The batches of one sweep run in flight: cut, submitted as task runs, counted.

`solve_batches` cuts the run's jobs into batches as it goes (`batches.Planner`: sizes
follow the measured seconds per instance), keeps two per worker submitted to the Prefect
task runner (`submit.submit_all`), counts what each committed, and ends the run's row in
`runs` when the last one is back. A `Watch` ends the run when the Prefect API or the
Dask scheduler stops answering. Apart from the `sweep` flow, which claims the run and
starts the cluster, so that each reads on one screen. No puzzle logic here.
"""

import time
from dataclasses import dataclass, field
from typing import Any

from prefect import get_run_logger

from puzzlesweep.flows.batch_task import instances_word, solve_batch
from puzzlesweep.flows.batches import Batch, Planner
from puzzlesweep.flows.control import Control
from puzzlesweep.flows.faults import CatalogUnwritable, first_line, permanent
from puzzlesweep.flows.probes import Watch
from puzzlesweep.flows.progress import Progress
from puzzlesweep.flows.submit import submit_all


def solve_batches(
    run,
    control: Control,
    runner,
    workers: int,
    batch_size: int | None,
    memory_limit: int | None,
    retries: int,
    scheduler: str | None = None,
    children=None,
) -> dict:
    """Solve the jobs of `run` in batches on `runner` (a started Prefect task runner;
    None when nothing is to solve), `workers` wide, while a `Watch` probes the Prefect
    API and the Dask `scheduler`: one that stops answering for `LOST_SECONDS` ends the
    run (state `failed`; the report's "stopped" names it); `children`: the solver
    processes each batch leases from (`isolate.Children`; None on Dask). Returns the
    report without "scheduler". The counts by status are the rows this run wrote in the
    catalog. A batch that fails with an error no retry can fix (`faults.permanent`)
    stops the run without waiting for the others. Raises KeyboardInterrupt on a stop
    request."""
    started = time.perf_counter()
    logger = get_run_logger()
    plan, todo = run.plan, run.todo
    planner = Planner(todo, run.run_id, plan.name, workers, batch_size)
    logger.info(
        "run %s of sweep %s: %d instances planned, %d already in the catalog, %d to solve",
        run.run_id,
        plan.name,
        len(plan.jobs),
        len(plan.jobs) - len(todo),
        len(todo),
    )
    progress = Progress(run.run_id, plan.name, len(todo), control, planner.seconds_left)
    run.on_instances = progress.instance_done
    task = solve_batch.with_options(retries=retries)
    flight = _Flight(
        run, control, runner, planner, progress, task, memory_limit, logger, children=children
    )
    with Watch(scheduler, flight.lost):  # a stop request raises: the flow ends the run
        submit_all(flight.submit_next, 2 * workers, flight.on_result, flight.on_failure, control)
    return flight.finish(started)


@dataclass
class _Flight:
    """The batches of one run in flight: `submit_all`'s callbacks cut and submit the
    next batch as its own task run, count what each returns, and keep the failures;
    `finish` ends the run's row and gives the report. One object, so that the counts
    the callbacks share are its fields rather than closures' `nonlocal` state."""

    run: Any  # run_record.Run
    control: Control
    runner: Any  # a started Prefect task runner; None when nothing is to solve
    planner: Planner
    progress: Progress
    task: Any  # solve_batch with the run's retries
    memory_limit: int | None
    logger: Any
    retried: int = 0  # batches that needed more than one attempt
    failed: list[str] = field(default_factory=list)  # one line per failed batch
    halted: list[str] = field(default_factory=list)  # why the run stopped early
    children: Any = None  # isolate.Children of the threads backend; None on Dask

    def lost(self, reason: str) -> None:
        """The Prefect API or the Dask scheduler stopped answering: end the run
        `failed` and ask the main thread to stop. Called in the watch's thread, since
        the main one may be stuck."""
        line = f"run {self.run.run_id} stopped: {reason}; the instances written before are kept"
        self.run.end("failed")
        self.control.on_stopped("failed", line)
        self.control.request_stop(line)

    def submit_next(self) -> tuple[Batch, Any] | None:
        """Cut the next batch and submit it as a task run named and tagged after its
        family and the sweep; None when every job has its batch."""
        batch = self.planner.next()
        if batch is None:
            return None
        self.run.batches = self.planner.planned
        self.progress.submitted(batch.number, len(batch.params))
        own = self.task.with_options(
            task_run_name=f"{batch.family}-batch-{batch.number:04d}",
            tags={f"family:{batch.family}", f"sweep:{self.run.plan.name}"},
        )
        parameters = {
            "batch": batch,
            "catalog_path": self.run.catalog_path,
            "memory_limit": self.memory_limit,
            "topic": self.run.topic,
            "children": self.children,
        }
        return batch, self.runner.submit(own, parameters)

    def on_result(self, batch: Batch, report: dict) -> None:
        """Count a committed batch (`solve_batch`'s report) and log it."""
        self.planner.record(batch, report["seconds"])
        self.retried += report["attempt"] > 1
        self.run.counts.update(report["counts"])
        shot = self.progress.batch_done(batch.number, report["instances"], report["counts"])
        n = report["instances"]
        self.logger.info(
            "batch %d (%s, %d %s) committed as %s; %d of %d instances done",
            batch.number,
            batch.family,
            n,
            instances_word(n),
            report["commit"],
            shot.done,
            len(self.run.todo),
        )

    def on_failure(self, batch: Batch, exc: Exception) -> bool:
        """Keep a batch that failed every attempt; True (stop the run) when no retry
        can fix its error (`faults.permanent`): every later batch would fail alike."""
        self.planner.record(batch, None)
        self.progress.batch_failed(batch.number)
        # a CatalogUnwritable is one line already: cut again, its reason would be lost
        why = str(exc) if isinstance(exc, CatalogUnwritable) else first_line(exc)
        self.failed.append(f"batch {batch.number} ({batch.family}): {why}")
        if permanent(exc):
            self.halted.append(self.failed[-1])
            return True
        self.logger.error("%s", self.failed[-1])
        return False

    def finish(self, started: float) -> dict:
        """End the run's row (`finished` when every job has its rows and nothing
        halted, else `failed`), close the progress display, log the counts, and return
        the report; `started`: the perf_counter at the start of the batches."""
        run, todo = self.run, self.run.todo
        state = (
            "finished" if sum(run.counts.values()) == len(todo) and not self.halted else "failed"
        )
        unwritten = run.end(state)
        if unwritten:  # said after the batch that stopped the run, if one did
            self.halted.insert(1, unwritten)
        self.progress.finish(  # only what outlives the run: no link to a closed LocalCluster
            {
                "catalog": run.catalog_path,
                "results page": f"`puzzlesweep dashboard --catalog {run.catalog_path}`",
            }
        )
        solved = sum(run.counts.values())
        self.logger.info(
            "run %s %s: %d %s solved", run.run_id, state, solved, instances_word(solved)
        )
        for status, n in sorted(run.counts.items()):
            self.logger.info("run %s: %d %s %s", run.run_id, n, instances_word(n), status)
        return {
            "run_id": run.run_id,
            "sweep": run.plan.name,
            "planned": len(run.plan.jobs),
            "skipped": len(run.plan.jobs) - len(todo),
            "solved": solved,
            "counts": dict(run.counts),
            "batches": self.planner.planned,
            "retried": self.retried,
            "failed": self.failed,
            "stopped": "; ".join(self.halted[:2]) if self.halted else None,
            "seconds": time.perf_counter() - started,
        }
