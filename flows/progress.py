"""Progress of a running sweep, for people: Prefect artifacts and in-process listeners.

`Progress` is what the sweep flow calls as batches finish. It keeps a Prefect progress
artifact up to date (percent of instances done), publishes a table artifact with the
run's counts by status when the run ends, and calls every listener registered in this
process (`listen`), which is how `puzzlesweep run` draws its progress bar. Artifact keys
allow only lowercase letters, digits and dashes (DESIGN.md), so they are derived from the
sweep name that way.
"""

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from prefect.artifacts import (
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)


@dataclass
class Snapshot:
    """Where a run stands: instances done and planned (counts), counts by status, and
    seconds since the first batch was submitted."""

    run_id: str
    done: int
    total: int
    counts: dict[str, int]
    seconds: float

    @property
    def rate(self) -> float:
        """Instances per second so far (0 before the first batch ends)."""
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def seconds_left(self) -> float | None:
        """Estimated seconds to finish at the rate so far; None before any batch ends."""
        return (self.total - self.done) / self.rate if self.rate > 0 else None


Listener = Callable[[Snapshot], None]
_listeners: list[Listener] = []


def listen(listener: Listener) -> Callable[[], None]:
    """Call `listener(snapshot)` after every batch of every sweep run in this process;
    returns a function that stops it."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener)


def artifact_key(text: str) -> str:
    """`text` as a Prefect artifact key: lowercase letters, digits and dashes."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-") or "sweep"


@dataclass
class Progress:
    """The progress of one run of `total` instances of sweep `sweep`."""

    run_id: str
    sweep: str
    total: int
    counts: Counter = field(default_factory=Counter)
    done: int = 0
    started: float = field(default_factory=time.perf_counter)
    artifact: object = None

    def __post_init__(self) -> None:
        self.artifact = create_progress_artifact(
            progress=0.0 if self.total else 100.0,
            key=artifact_key(f"{self.sweep}-progress"),
            description=f"run {self.run_id}: instances solved, percent of {self.total}",
        )
        self._notify()

    def advance(self, instances: int, counts: dict[str, int]) -> Snapshot:
        """Record a finished batch of `instances` with `counts` by status."""
        self.done += instances
        self.counts.update(counts)
        update_progress_artifact(self.artifact, 100.0 * self.done / max(self.total, 1))
        return self._notify()

    def finish(self) -> None:
        """Publish the run's table artifact: one row per status with its count."""
        rows = [{"status": s, "instances": n} for s, n in sorted(self.counts.items())]
        rows.append({"status": "all", "instances": self.done})
        create_table_artifact(
            table=rows,
            key=artifact_key(f"{self.sweep}-summary"),
            description=f"run {self.run_id} of sweep {self.sweep}: {self.done} of "
            f"{self.total} instances solved",
        )

    def _notify(self) -> Snapshot:
        snapshot = Snapshot(
            self.run_id,
            self.done,
            self.total,
            dict(self.counts),
            time.perf_counter() - self.started,
        )
        for listener in list(_listeners):
            listener(snapshot)
        return snapshot
