"""The batches of one sweep run in flight: cut, submitted as Dask futures, committed in groups.

`solve_batches` cuts the run's jobs into batches as it goes (`batches.Planner`: sizes
follow the measured seconds per instance), keeps two per worker submitted to the run's
pool (`submit.submit_all`: plain Dask futures, or threads), and hands the rows each
returns to the run's one writer (`GroupWriter`), which commits them to the catalog at a
bounded rate: one commit at most every `GROUP_SECONDS`, sooner when `GROUP_ROWS` rows
wait, carrying the application transaction of every batch in it. Workers never touch the
Delta log, so N workers never contend on it, and the commit rate never bounds the
throughput. Prefect hears a constant few things per batch (one log line per batch and
one per instance that ended in `error` or at a limit, a progress artifact every few
seconds), never one call per instance. A `Watch` ends the run when the Prefect API or
the Dask scheduler stops answering. No puzzle logic here.

Exactly once: a batch's rows are committed once, by this process, with its app id; a
batch whose worker was lost is run again by Dask (counted as retried: its start is
reported twice) and its rows arrive once; a run killed before a commit loses only rows
it never reported (its progress and its counts are committed rows), which a re-run
solves.
"""

import logging
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from prefect import get_run_logger

from puzzlesweep import catalog, puzzles
from puzzlesweep.flows.batch_task import BatchResult, solve_batch
from puzzlesweep.flows.batches import Batch, Planner
from puzzlesweep.flows.cluster import events
from puzzlesweep.flows.control import Control
from puzzlesweep.flows.faults import CatalogUnwritable, disk_full, first_line, permanent
from puzzlesweep.flows.probes import Watch
from puzzlesweep.flows.progress import Progress, instance_words, instances_word, number_text
from puzzlesweep.flows.settings import RunSettings, Started
from puzzlesweep.flows.submit import submit_all

#: The writer commits at most once per this many seconds... (a commit costs ~50-200 ms
#: of this process, and the Delta log grows by one entry per commit)
GROUP_SECONDS = 1.0
#: ... or sooner once this many rows wait (bounds the memory they hold).
GROUP_ROWS = 5000
#: Commits that may fail in a row for reasons a retry may cure, before the run stops.
COMMIT_ATTEMPTS = 10


def solve_batches(run, control: Control, started: Started | None, settings: RunSettings) -> dict:
    """Solve the jobs of `run` in batches on `started`'s pool (None when nothing is to
    solve), while a `Watch` probes the Prefect API and the Dask scheduler: one that
    stops answering for `LOST_SECONDS` ends the run (state `failed`; the report's
    "stopped" names it). Returns the report without "scheduler". The counts by status
    are the rows this run committed. A batch or a commit that fails with an error no
    retry can fix (`faults.permanent`) stops the run without waiting for the others.
    Raises KeyboardInterrupt on a stop request, after the rows received are committed."""
    began = time.perf_counter()
    logger = get_run_logger()
    workers = started.workers if started else 1
    planner = Planner(run.todo, run.run_id, run.plan.name, workers, settings.batch_size)
    skipped = len(run.plan.jobs) - len(run.todo)
    logger.info(
        "run %s of sweep %s: %d instances planned, %d already in the catalog, %d to solve",
        *(run.run_id, run.plan.name, len(run.plan.jobs), skipped, len(run.todo)),
    )
    progress = Progress(run.run_id, run.plan.name, len(run.todo), control, planner.seconds_left)
    flight = _Flight(run, control, started, planner, progress, settings, logger)
    scheduler = started.scheduler if started else None
    pool = started.pool if started else None
    with Watch(scheduler, flight.lost), events(pool, run.topic, flight.on_event):
        try:
            submit_all(
                flight.submit_next,
                2 * workers,
                flight.on_result,
                flight.on_failure,
                control,
                tick=flight.tick,
            )
        finally:
            flight.flush()
    return flight.finish(began)


@dataclass
class GroupWriter:
    """The run's one writer of `results`: `add` keeps a batch's rows, `due` says when a
    commit is due (`GROUP_SECONDS` after the oldest waiting batch, or `GROUP_ROWS`
    rows), `commit` writes every waiting batch as one Delta commit carrying their app
    ids (RUN-NUMBER) and returns them. Raises CatalogUnwritable when no retry can help;
    another error leaves the batches waiting for the next commit."""

    catalog_path: str
    waiting: list[tuple[Batch, BatchResult]] = field(default_factory=list)
    since: float | None = None  # when the oldest waiting batch came
    failures: int = 0  # commits failed in a row

    def add(self, batch: Batch, result: BatchResult) -> None:
        """Keep `result` (the rows of `batch`) for the next commit."""
        self.waiting.append((batch, result))
        self.since = self.since or time.monotonic()

    def due(self) -> bool:
        """Is a commit due now?"""
        rows = sum(len(result.rows) for _, result in self.waiting)
        return bool(self.waiting) and (
            rows >= GROUP_ROWS or time.monotonic() - self.since >= GROUP_SECONDS
        )

    def commit(self) -> list[tuple[Batch, BatchResult]]:
        """Commit every waiting batch (those already committed are left out of the
        commit and counted as committed) and return them."""
        full = disk_full(None, self.catalog_path)
        if full:  # a write that runs out of space midway makes deltalake panic
            raise CatalogUnwritable(f"catalog {self.catalog_path} cannot be written: {full}")
        groups = [
            catalog.BatchRows(app_id(batch), puzzles.get(batch.family).Params, result.rows)
            for batch, result in self.waiting
        ]
        try:
            catalog.write_batches(self.catalog_path, groups)
        except Exception as exc:
            self.failures += 1
            if permanent(exc) or self.failures >= COMMIT_ATTEMPTS:
                why = disk_full(exc, self.catalog_path) or first_line(exc)
                raise CatalogUnwritable(
                    f"catalog {self.catalog_path} cannot be written: {why}"
                ) from None
            return []
        written, self.waiting, self.since, self.failures = self.waiting, [], None, 0
        return written


def app_id(batch: Batch) -> str:
    """The Delta application transaction of `batch`'s commit: RUN-NUMBER."""
    return f"{batch.run_id}-{batch.number:05d}"


@dataclass
class _Flight:
    """The batches of one run in flight: `submit_all`'s callbacks cut and submit the
    next batch (a failed one again first, while it has attempts left), hand what each
    returns to the writer and commit when due (`tick`); `finish` ends the run's row and
    gives the report. One object, so that the counts the callbacks share are its
    fields rather than closures' `nonlocal` state."""

    run: Any  # run_record.RunRecord
    control: Control
    started: Started | None
    planner: Planner
    progress: Progress
    settings: RunSettings
    logger: Any
    writer: GroupWriter = None  # type: ignore[assignment]
    again: deque = field(default_factory=deque)  # failed batches to submit again
    attempts: Counter = field(default_factory=Counter)  # batch number -> attempts
    starts: Counter = field(default_factory=Counter)  # batch number -> starts on workers
    retried: set = field(default_factory=set)  # numbers of batches run more than once
    failed: list[str] = field(default_factory=list)  # one line per failed batch
    halted: list[str] = field(default_factory=list)  # why the run stopped early

    def __post_init__(self) -> None:
        self.writer = GroupWriter(self.run.catalog_path)

    def lost(self, reason: str) -> None:
        """The Prefect API or the Dask scheduler stopped answering: end the run
        `failed` and ask the main thread to stop. Called in the watch's thread."""
        line = f"run {self.run.run_id} stopped: {reason}; the instances written before are kept"
        self.run.end("failed")
        self.control.on_stopped("failed", line)
        self.control.request_stop(line)

    def submit_next(self) -> tuple[Batch, Any] | None:
        """Submit the next batch (one to try again first) as a future named after it;
        None when every job has its batch."""
        batch = self.again.popleft() if self.again else self.planner.next()
        if batch is None:
            return None
        self.run.batches = self.planner.planned
        self.attempts[batch.number] += 1
        self.progress.submitted(batch.number, len(batch.params))
        key = f"{batch.family}-batch-{batch.number:04d}"
        memory = self.settings.memory_limit
        children = self.started.children
        future = self.started.pool.submit(key, solve_batch, batch, memory, self.run.topic, children)
        return batch, future

    def on_event(self, kind: str, number: int, value: Any) -> None:
        """A worker's event (`cluster.report_to`): a batch started (on worker `value`;
        a second start means its first worker was lost: a retry), or `value` more of
        its instances are done. In the Dask client's thread."""
        if kind == "done":
            self.progress.instance_done(number, value)
            return
        self.starts[number] += 1
        if self.starts[number] > 1 and number not in self.retried:
            self.retried.add(number)
            self.logger.warning(
                "batch %d: attempt %d on %s (its worker was lost)",
                number,
                self.starts[number],
                value,
            )

    def on_result(self, batch: Batch, result: BatchResult) -> None:
        """Keep a solved batch's rows for the writer; commit if one is due."""
        self.planner.record(batch, result.seconds)
        self.progress.returned(batch.number)
        self.writer.add(batch, result)

    def on_failure(self, batch: Batch, exc: BaseException) -> bool:
        """Submit a failed batch again while it has attempts left and its error is not
        `permanent`; else keep it as failed. True (stop the run) when no retry can fix
        its error: every later batch would fail alike."""
        self.planner.record(batch, None)
        why = str(exc) if isinstance(exc, CatalogUnwritable) else first_line(exc)
        line = f"batch {batch.number} ({batch.family}): {why}"
        if not permanent(exc) and self.attempts[batch.number] <= self.settings.retries:
            self.retried.add(batch.number)
            self.logger.warning("%s; attempt %d", line, self.attempts[batch.number] + 1)
            self.again.append(batch)
            return False
        self.progress.batch_failed(batch.number)
        self.failed.append(line)
        if permanent(exc):
            self.halted.append(line)
            return True
        self.logger.error("%s", line)
        return False

    def tick(self) -> bool:
        """Commit the waiting rows when a commit is due; True (stop the run) when the
        catalog cannot take them."""
        if not self.writer.due():
            return False
        return self._commit()

    def flush(self) -> None:
        """Commit what still waits (the run ends, or is being stopped), trying again
        after a failure a retry may cure (at most `COMMIT_ATTEMPTS` in a row): rows
        received are never dropped while the catalog takes them."""
        while self.writer.waiting and not self._commit():
            if self.writer.waiting:
                time.sleep(min(2.0, 0.1 * 2**self.writer.failures))

    def _commit(self) -> bool:
        try:
            written = self.writer.commit()
        except CatalogUnwritable as exc:
            self.failed.append(str(exc))
            self.halted.append(str(exc))
            for batch, _ in self.writer.waiting:
                self.progress.batch_failed(batch.number)
            self.writer.waiting = []
            return True
        for batch, result in written:
            self._committed(batch, result)
        return False

    def _committed(self, batch: Batch, result: BatchResult) -> None:
        """Count a committed batch, and tell Prefect: one line for the batch, and one for
        each instance that ended in `error` (ERROR) or at a limit (WARNING)."""
        counts = Counter(row["status"] for row in result.rows)
        self.run.counts.update(counts)
        shot = self.progress.batch_done(batch.number, len(result.rows), counts)
        n = len(result.rows)
        self.logger.info(
            "batch %d (%s, %d %s on %s, %.1f s) committed as %s; %d of %d instances done",
            *(batch.number, batch.family, n, instances_word(n), result.worker, result.seconds),
            *(app_id(batch), shot.done, len(self.run.todo)),
        )
        for row in result.rows:
            if row["status"] == "error":
                self.logger.error("%s: error: %s", instance_words(batch.family, row), row["error"])
            elif row["status"] in ("time_limit", "node_limit"):
                self.logger.log(
                    logging.WARNING,
                    "%s: %s, objective %s, bound %s",
                    *(instance_words(batch.family, row), row["status"]),
                    *(number_text(row.get("objective")), number_text(row.get("bound"))),
                )

    def finish(self, began: float) -> dict:
        """End the run's row (`finished` when every job has its rows and nothing
        halted, else `failed`), publish the summary, log the counts, and return the
        report; `began`: the perf_counter at the start of the batches."""
        run, todo = self.run, self.run.todo
        solved = sum(run.counts.values())
        state = "finished" if solved == len(todo) and not self.halted else "failed"
        unwritten = run.end(state)
        if unwritten:  # said after the batch that stopped the run, if one did
            self.halted.insert(1, unwritten)
        self.progress.finish(  # only what outlives the run: no link to a closed LocalCluster
            {
                "catalog": run.catalog_path,
                "results page": f"`puzzlesweep dashboard --catalog {run.catalog_path}`",
            }
        )
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
            "retried": len(self.retried),
            "failed": self.failed,
            "stopped": "; ".join(self.halted[:2]) if self.halted else None,
            "seconds": time.perf_counter() - began,
        }
