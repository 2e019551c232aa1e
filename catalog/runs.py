"""The `runs` table: one row per run, replaced as the run goes.

A run writes its row when it starts (state `running`), replaces it every
`HEARTBEAT_SECONDS` with a fresh `heartbeat_at` and its counts so far (`Heartbeat`), and
once more when it ends (`finished`, `failed` or `interrupted`). A run whose process or
machine is lost stops its heartbeat; readers then show it as `lost` after
`catalog.LOST_AFTER_SECONDS` (the `runs` view), never as running.

`live_runs` tells whether a sweep is running now, so that a second run of the same
sweep into the same catalog can refuse to start (two runs of one sweep at once would
solve and store every instance twice).
"""

import os
import random
import socket
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import pyarrow as pa

from puzzlesweep.catalog.schema import RUN_SCHEMA, SCHEMA_VERSION, STATUSES
from puzzlesweep.catalog.store import (
    RESULTS,
    RUNS,
    commits,
    locate,
    open_table,
    reaching,
    replace,
)

HEARTBEAT_SECONDS = 20.0
#: Seconds without a heartbeat after which a `running` run reads `lost` (the `runs`
#: view of `read`, and `live_runs`).
LOST_AFTER_SECONDS = 90
#: The `sweep` of the rows that maintenance commands (compact, repair) write in `runs`
#: while they hold the catalog's maintenance lease (`lease`).
MAINTENANCE = "catalog-maintenance"
LEASE = "puzzlesweep.lease"  # commit info entry of a claim (a run's, a lease's): its run_id


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return ""


def software_versions() -> dict[str, str]:
    """The versions a run records: puzzlesweep, HiGHS (highspy), Prefect, Dask,
    distributed and Python."""
    return {
        "puzzlesweep_version": _version("puzzlesweep"),
        "highs_version": _version("highspy"),
        "prefect_version": _version("prefect"),
        "dask_version": _version("dask"),
        "distributed_version": _version("distributed"),
        "python_version": sys.version.split()[0],
    }


def write_run(catalog, run: dict[str, Any], metadata: dict[str, str] | None = None) -> None:
    """Write (or replace) the row of run `run["run_id"]` in `runs`, in one commit whose
    commit info carries `metadata`. Missing columns are filled in: versions, host, pid,
    schema_version, `heartbeat_at` (now), else null. Raises ValueError for a column
    `runs` does not have."""
    row = {
        **software_versions(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "schema_version": SCHEMA_VERSION,
        "heartbeat_at": datetime.now(UTC),
        **run,
    }
    unknown = set(row) - set(RUN_SCHEMA.names)
    if unknown:
        raise ValueError(f"unknown run columns: {', '.join(sorted(unknown))}")
    table = pa.Table.from_pylist([row], schema=RUN_SCHEMA)
    replace(locate(catalog), RUNS, table, f"run_id = {_quote(row['run_id'])}", metadata=metadata)


def _rows(catalog, where: Callable[[dict], bool]) -> list[dict]:
    table = open_table(locate(catalog), RUNS)
    if table is None:
        return []
    return [row for row in table.to_pyarrow_table().to_pylist() if where(row)]


def read_run(catalog, run_id: str) -> dict[str, Any] | None:
    """The row of run `run_id` as a dict (its state as written), or None."""
    rows = _rows(catalog, lambda row: row["run_id"] == run_id)
    return rows[0] if rows else None


def _dead_here(row: dict) -> bool:
    """Is `row` a run of this host whose process is gone?"""
    if row["host"] != socket.gethostname() or row["pid"] is None:
        return False
    try:
        os.kill(row["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def live_runs(catalog, sweep: str) -> list[dict]:
    """The runs of sweep `sweep` that are running now, oldest first: state `running`, a
    heartbeat younger than `catalog.LOST_AFTER_SECONDS`, and, on this host, a process
    that is still there. A run of this host whose process is gone is recorded as `lost`
    at once (its heartbeat would say so only later)."""
    cutoff = datetime.now(UTC) - timedelta(seconds=LOST_AFTER_SECONDS)
    rows = _rows(
        catalog,
        lambda row: (
            row["sweep"] == sweep
            and row["state"] == "running"
            and row["heartbeat_at"] is not None
            and row["heartbeat_at"] >= cutoff
        ),
    )
    for row in [row for row in rows if _dead_here(row)]:
        write_run(catalog, {**row, **written(catalog, row["run_id"]), "state": "lost"})
        rows.remove(row)
    return sorted(rows, key=lambda row: (row["started_at"], row["run_id"]))


def written(catalog, run_id: str) -> dict[str, int]:
    """The counts of run `run_id`'s rows in `results`: "solved" (its rows) and one per
    status; empty when the table cannot be read (the caller keeps the counts it has)."""
    import pyarrow.dataset as ds

    try:
        table = open_table(locate(catalog), RESULTS)
        if table is None:
            return {}
        found = table.to_pyarrow_dataset().to_table(
            columns=["status"], filter=ds.field("run_id") == run_id
        )
    except Exception:  # noqa: BLE001 (an unreadable catalog: the row's counts stand)
        return {}
    return {**status_counts(Counter(found["status"].to_pylist())), "solved": found.num_rows}


def status_counts(counts: Counter) -> dict[str, int]:
    """One `runs` column per status (`STATUSES`), zero when absent from `counts`."""
    return {status: counts.get(status, 0) for status in STATUSES}


class Heartbeat:
    """While the `with` block runs, a daemon thread replaces the run's row every
    `every` seconds with `row()` (the manifest and counts so far) and a fresh
    `heartbeat_at`. A heartbeat that fails to commit is skipped, the next one tries
    again: a run is never stopped by its own bookkeeping."""

    def __init__(self, catalog, row: Callable[[], dict], every: float = HEARTBEAT_SECONDS):
        self.catalog, self.row, self.every = catalog, row, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="run-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            try:
                write_run(self.catalog, {**self.row(), "state": "running"})
            except Exception:  # noqa: BLE001 (the next beat tries again)
                pass

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def refuse_if_busy(catalog, sweep: str) -> None:
    """Raise BadInput naming the run when a run of sweep `sweep` is alive in `catalog`
    (two runs of one sweep at once would solve and store every instance twice)."""
    if live := live_runs(catalog, sweep):
        raise _busy(live[0])


def _busy(run: dict) -> Exception:
    from puzzlesweep.core import BadInput

    return BadInput(
        f"sweep {run['sweep']} is being run into this catalog by run {run['run_id']} "
        f"(host {run['host']}, pid {run['pid']}, started {run['started_at']:%Y-%m-%d %H:%M:%S} "
        "UTC); wait for it to end (`run --allow-concurrent` runs a sweep beside it)"
    )


def claim(catalog, manifest: dict, allow_concurrent: bool = False) -> None:
    """Write the row of a starting run (`manifest` with state `running`). Unless
    `allow_concurrent`, first refuse when a run of the same sweep is alive, and after
    writing, when another claim of the sweep committed before this one won the race
    (`_first`: of runs started at the same instant, the first claim in the log keeps
    the sweep); the refused run's row is then taken out again, so that a refusal leaves
    nothing in `runs`. Raises BadInput naming the other run."""
    location = locate(catalog)
    if allow_concurrent:
        write_run(location, {**manifest, "state": "running"})
        return
    table = open_table(location, RUNS)
    before = table.version() if table is not None else -1
    refuse_if_busy(location, manifest["sweep"])
    if holder := _first(location, {**manifest, "state": "running"}, before):
        raise _busy(holder)


def _first(location, row: dict, before: int) -> dict | None:
    """Commit `row` (a run of sweep `row["sweep"]`) with its run id in the commit info
    (`LEASE`), then return the live run of the same sweep whose claim was committed
    after version `before` of `runs` and before this one, taking this row out again;
    None when there is none (this claim won). Delta's log orders commits: of two racing
    claims, the later one always sees the earlier one in the log after `before`, so
    at most one wins."""
    run_id, sweep = row["run_id"], row["sweep"]
    write_run(location, row, metadata={LEASE: run_id})
    claims = [
        info[LEASE]
        for _, actions in sorted(commits(location, RUNS, before).items())
        for info in [next((a["commitInfo"] for a in actions if "commitInfo" in a), {})]
        if LEASE in info
    ]
    earlier = claims[: claims.index(run_id)] if run_id in claims else []
    holders = [r for r in live_runs(location, sweep) if r["run_id"] in earlier]
    if not holders:
        return None
    _withdraw(location, run_id)
    return holders[0]


def _withdraw(location, run_id: str, attempts: int = 20) -> None:
    """Delete the row of run `run_id` from `runs` in one commit, retrying as
    `store.replace` does against concurrent commits."""
    from deltalake.exceptions import CommitFailedError

    for attempt in range(attempts):
        try:
            with reaching(location):
                open_table(location, RUNS).delete(f"run_id = {_quote(run_id)}")
            return
        except CommitFailedError:
            if attempt == attempts - 1:
                raise
            time.sleep(random.uniform(0.05, 0.3))


@contextmanager
def lease(catalog, operation: str) -> Iterator[str]:
    """Hold the catalog's maintenance lease while the `with` block runs (yields the
    lease's run id): one maintenance command at a time rewrites the files of a catalog
    (two OPTIMIZE commits of the same files would each add the merged rows, doubling
    them). The lease is a `runs` row of sweep `MAINTENANCE` (`spec` = `operation`),
    heartbeating like a run's and `finished` at the end, so a killed holder is `lost`
    after `catalog.LOST_AFTER_SECONDS`.

    Taking it: note the version v of `runs`, refuse if a live lease row exists, then
    commit this row with its run id in the commit info (`LEASE`). Delta's log orders
    commits; a claim committed after v and before this one whose holder is still live
    wins over this one. Of two racing claims, the later commit always sees the earlier
    one (in the table, or in the log after v), so at most one holds the lease.
    Raises BadInput naming the holder when another maintenance command holds it."""
    location = locate(catalog)
    table = open_table(location, RUNS)
    before = table.version() if table is not None else -1
    run_id = f"maintenance-{uuid.uuid4().hex[:12]}"
    row = {
        "run_id": run_id,
        "sweep": MAINTENANCE,
        "spec": operation,
        "started_at": datetime.now(UTC),
    }
    if live := live_runs(location, MAINTENANCE):
        raise _held(live[0])
    if holder := _first(location, {**row, "state": "running"}, before):
        raise _held(holder)
    state = "failed"
    try:
        with Heartbeat(location, lambda: row):
            yield run_id
        state = "finished"
    finally:
        write_run(location, {**row, "state": state, "finished_at": datetime.now(UTC)})


def _held(run: dict) -> Exception:
    from puzzlesweep.core import BadInput

    return BadInput(
        f"another maintenance command ({run['spec']}, run {run['run_id']}, host "
        f"{run['host']}, pid {run['pid']}) is rewriting this catalog; try again when it ends"
    )
