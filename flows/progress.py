"""Progress of a running sweep, for people: instances committed, with an estimate of the time left.

`Progress` is what a sweep calls as its work moves: `submitted` when a batch goes out,
`instance_done` when a worker reports finished instances (Dask events, at most one a
second per batch), `returned` when a batch's rows reach the run's writer, `batch_done`
when they are committed and `batch_failed` when the batch failed every attempt. It keeps
a Prefect progress artifact up to date (percent of instances committed, at most every
`ARTIFACT_SECONDS`), publishes a table artifact with the run's counts by status and where
to look at them when the run ends, and hands its standing to the listeners of the run's
`Control` (`Control.listen`), which is how `puzzlesweep run` draws its progress bar.
Artifact keys allow only lowercase letters, digits and dashes (docs/architecture.md), so
they are derived from the sweep name that way.

Done means committed, here as on the dashboard and in the run's row in `runs`: the
terminal, the artifact and the dashboard count the same rows. Instances that workers
reported but that are not committed yet only shorten the estimate of the time left.
"""

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from prefect.artifacts import (
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from puzzlesweep import puzzles
from puzzlesweep.flows.control import Control

#: Seconds between updates of the progress artifact: each is a call to the Prefect API.
ARTIFACT_SECONDS = 3.0


@dataclass
class Standing:
    """Where a run stands: instances done and planned (counts), counts by status of the
    committed rows, seconds since the run's first batch was submitted, and the
    estimated seconds left (None before any estimate)."""

    run_id: str
    done: int
    total: int
    counts: dict[str, int]
    seconds: float
    seconds_left: float | None = None

    @property
    def rate(self) -> float:
        """Instances per second so far (0 before the first instance ends)."""
        return self.done / self.seconds if self.seconds > 0 else 0.0


def artifact_key(text: str) -> str:
    """`text` as a Prefect artifact key: lowercase letters, digits and dashes."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-") or "sweep"


@dataclass
class Progress:
    """The progress of one run of `total` instances of sweep `sweep`.

    estimate(in_flight): seconds left, given {batch number: (instances of it not
    reported yet, seconds since its last report or since it went out)} for the batches
    out (the planner's `seconds_left`); None while there is no estimate. Thread-safe:
    workers' reports arrive in the Dask client's thread. `control`: the run's Control,
    whose listeners hear every move and whose `standing()` reads this Progress."""

    run_id: str
    sweep: str
    total: int
    control: Control = field(default_factory=Control)
    estimate: Callable[[dict[int, tuple[int, float]]], float | None] = lambda in_flight: None
    counts: Counter = field(default_factory=Counter)
    committed: int = 0
    started: float = field(default_factory=time.perf_counter)
    artifact: object = None
    # batch number -> [size, reported, when it went out or last reported an instance]
    _out: dict[int, list] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _shown: float = 0.0  # when the progress artifact was last updated (perf_counter)

    def __post_init__(self) -> None:
        self.control.progress = self
        self.artifact = create_progress_artifact(
            progress=0.0 if self.total else 100.0,
            key=artifact_key(f"{self.sweep}-progress"),
            description=f"run {self.run_id}: instances solved, percent of {self.total}",
        )
        self._notify()

    @property
    def percent(self) -> float:
        """Percent of the run's instances committed (100 for a run with nothing to do)."""
        return 100.0 * self.committed / self.total if self.total else 100.0

    @property
    def done(self) -> int:
        """Instances committed (what the dashboard and the run's row count too)."""
        return self.committed

    def submitted(self, number: int, instances: int) -> None:
        """Batch `number` of `instances` went out."""
        with self._lock:
            self._out[number] = [instances, 0, time.perf_counter()]

    def instance_done(self, number: int, instances: int) -> None:
        """A worker finished `instances` more of batch `number` (ignored once the batch
        is committed or failed: a late or repeated event)."""
        with self._lock:
            if number not in self._out:
                return
            self._out[number][1] += instances
            self._out[number][2] = time.perf_counter()  # the batch's next job starts now
        self._notify()

    def returned(self, number: int) -> None:
        """Batch `number`'s rows reached the writer: none of its work is left to run."""
        with self._lock:
            if number in self._out:
                self._out[number][1] = self._out[number][0]

    def batch_done(self, number: int, instances: int, counts: dict[str, int]) -> Standing:
        """Batch `number` committed `instances` rows with `counts` by status."""
        with self._lock:
            self._out.pop(number, None)
            self.committed += instances
            self.counts.update(counts)
        now = time.perf_counter()
        if now - self._shown >= ARTIFACT_SECONDS or self.committed >= self.total:
            self._shown = now
            update_progress_artifact(self.artifact, self.percent)
        return self._notify()

    def batch_failed(self, number: int) -> None:
        """Batch `number` failed every attempt: its instances are not done."""
        with self._lock:
            self._out.pop(number, None)
        self._notify()

    def finish(self, links: dict[str, str | None]) -> None:
        """Bring the progress artifact up to date and publish the run's table artifact:
        one row per status with its count, and in its description each of `links` (name
        → URL or command) that is not None."""
        update_progress_artifact(self.artifact, self.percent)
        rows = [{"status": s, "instances": n} for s, n in sorted(self.counts.items())]
        rows.append({"status": "all", "instances": self.committed})
        where = "".join(f"\n- {name}: {url}" for name, url in links.items() if url)
        create_table_artifact(
            table=rows,
            key=artifact_key(f"{self.sweep}-summary"),
            description=f"run {self.run_id} of sweep {self.sweep}: {self.committed} of "
            f"{self.total} instances solved{where}",
        )

    def standing(self) -> Standing:
        """Where the run stands now."""
        with self._lock:
            now = time.perf_counter()
            left = {number: (max(0, n - r), now - t) for number, (n, r, t) in self._out.items()}
            counts = dict(self.counts)
        return Standing(
            self.run_id,
            self.done,
            self.total,
            counts,
            time.perf_counter() - self.started,
            self.estimate(left) if self.done < self.total else 0.0,
        )

    def _notify(self) -> Standing:
        standing = self.standing()
        self.control.notify(standing)
        return standing


def instances_word(n: int) -> str:
    """'instance' or 'instances', as `n` asks: log lines say "1 instance"."""
    return "instance" if n == 1 else "instances"


def number_text(value) -> str:
    """A number as people read it: integers without '.0', lists comma-joined, None as
    '-'."""
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(map(number_text, value))
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    return str(value)


def instance_words(family: str, row: dict) -> str:
    """An instance named by its parameters, e.g. `domination[piece=knight rows=8 cols=8]`
    (`row`: a result row, its parameters in columns or under "params")."""
    values = {**row, **(row.get("params") or {})}  # a solved row holds them in `params`
    fields = puzzles.get(family).Params.model_fields
    return f"{family}[{' '.join(f'{k}={number_text(values.get(k))}' for k in fields)}]"
