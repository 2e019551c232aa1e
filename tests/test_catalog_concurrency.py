"""The catalog under concurrency: runs' heartbeats and refusals, writer processes that
race for commits, and readers during writes and compactions (real Delta tables, real
processes)."""

import multiprocessing
import subprocess
import threading
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from deltalake import DeltaTable

from puzzlesweep import catalog, puzzles
from puzzlesweep.dashboard import state as dashboard_state

from . import test_catalog
from .conftest import CLI
from .test_catalog import _fill, _write

rows = test_catalog.rows  # the same module-scoped fixture: rows of small solved instances


def test_runs_heartbeat_lost_and_a_second_run_of_a_sweep_refused(tmp_path):
    started = datetime.now(UTC) - timedelta(minutes=10)
    old = started - timedelta(minutes=5)
    catalog.write_run(
        tmp_path, {"run_id": "a", "sweep": "s", "state": "running", "started_at": started}
    )
    catalog.write_run(
        tmp_path,
        {
            "run_id": "dead",
            "sweep": "s",
            "state": "running",
            "started_at": old,
            "heartbeat_at": old,
        },
    )
    catalog.write_run(
        tmp_path, {"run_id": "b", "sweep": "other", "state": "finished", "started_at": started}
    )
    _, states = (
        catalog.query(tmp_path, "SELECT run_id, state FROM runs ORDER BY 1")
        if False
        else (
            None,
            catalog.snapshot(tmp_path)
            .connection.execute("SELECT run_id, state FROM runs ORDER BY 1")
            .fetchall(),
        )
    )
    assert states == [("a", "running"), ("b", "finished"), ("dead", "lost")]
    assert [r["run_id"] for r in catalog.live_runs(tmp_path, "s")] == ["a"]
    # the dashboard shows the same states, from the moment a run starts
    catalog.prepare(tmp_path, [puzzles.get("domination").Params])
    shown = {run["run_id"]: run["state"] for run in dashboard_state(tmp_path)["runs"]}
    assert shown == {"a": "running", "b": "finished", "dead": "lost"}
    manifest = {"run_id": "c", "sweep": "s", "started_at": datetime.now(UTC)}
    with pytest.raises(catalog.BadInput, match="sweep s is being run .* by run a"):
        catalog.claim(tmp_path, manifest)
    assert catalog.read_run(tmp_path, "c") is None  # refused before writing anything
    catalog.claim(tmp_path, manifest, allow_concurrent=True)
    assert catalog.read_run(tmp_path, "c")["state"] == "running"
    catalog.claim(tmp_path, {"run_id": "d", "sweep": "other", "started_at": started})
    # the heartbeat keeps a run alive, with its counts so far: three beats, however long
    # the machine takes for them
    beats, third = [], threading.Event()

    def beat() -> dict:
        beats.append(1)
        if len(beats) >= 3:
            third.set()
        return {"run_id": "d", "sweep": "other", "started_at": started, "solved": len(beats)}

    before = datetime.now(UTC)
    with catalog.Heartbeat(tmp_path, beat, 0.2):
        assert third.wait(300), f"{len(beats)} beats"
    row = catalog.read_run(tmp_path, "d")
    assert len(beats) >= 3 and row["solved"] >= 2 and row["state"] == "running"
    assert before <= row["heartbeat_at"] <= datetime.now(UTC)


def _claim_at_once(root, sweep: str, count: int) -> dict[str, str]:
    """`count` threads claim a run of `sweep` behind a barrier: run id → won / refused."""
    barrier, outcome = threading.Barrier(count), {}

    def claim(run_id: str) -> None:
        manifest = {"run_id": run_id, "sweep": sweep, "started_at": datetime.now(UTC)}
        barrier.wait()
        try:
            catalog.claim(root, manifest)
            outcome[run_id] = "won"
        except catalog.BadInput as exc:
            assert f"sweep {sweep} is being run" in str(exc)
            outcome[run_id] = "refused"

    threads = [threading.Thread(target=claim, args=(f"{sweep}-{i}",)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


def test_runs_of_one_sweep_started_at_the_same_instant_leave_one_row(tmp_path):
    # a tester started one sweep twice at the same instant: the refused run exited 2 but
    # left a `failed` row (and two claims could both win). Three claimants behind a
    # barrier, three rounds: exactly one wins each, a refused one leaves no row.
    now = datetime.now(UTC)
    catalog.write_run(
        tmp_path, {"run_id": "0", "sweep": "x", "state": "finished", "started_at": now}
    )
    for sweep in ("s0", "s1", "s2"):
        outcome = _claim_at_once(tmp_path, sweep, 3)
        (winner,) = [run_id for run_id, said in outcome.items() if said == "won"]
        runs = pl.read_delta(str(tmp_path / "runs")).filter(pl.col("sweep") == sweep)
        stored = list(runs.select("run_id", "state").iter_rows())
        assert stored == [(winner, "running")], outcome


def _append_many(root: str, worker: int, count: int) -> None:
    from puzzlesweep import catalog, puzzles

    model = puzzles.get("domination").Params
    for i in range(count):
        row = {
            "run_id": f"w{worker}",
            "sweep": "c",
            "family": "domination",
            "instance_key": f"{worker}-{i}",
            "params_key": f"{worker}-{i}",
            "solver": "highs",
            "status": "optimal",
            "objective": 1.0,
            "time_limit": 1.0,
            "params": {"piece": "knight", "rows": 1, "cols": 1, "variant": "dominating"},
        }
        catalog.write_batch(root, model, [row], f"w{worker}-{i:05d}")


def test_concurrent_writer_processes_lose_no_commit(tmp_path):
    catalog.prepare(tmp_path, [puzzles.get("domination").Params])
    # deltalake is not fork-safe (docs/architecture.md).
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=_append_many, args=(str(tmp_path), w, 15)) for w in range(3)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    _, counted = catalog.query(tmp_path, "SELECT count(*), count(DISTINCT params_key) FROM results")
    assert counted == [(45, 45)]


def test_readers_during_writes_and_compactions_never_see_rows_twice_or_lose_them(tmp_path, rows):
    # Bounded by count, not time: 18 steps (6 rounds of 2 writes and a compaction), and
    # the writer starts a step only once the reader has read twice per step before it,
    # so reads overlap writes and compactions however slow the machine is.
    _fill(tmp_path, rows)
    steps, reads_per_step = 18, 2
    written = [len(rows)]
    seen: list[tuple[int, int, int]] = []
    progress, stop = threading.Condition(), threading.Event()
    failures: list[Exception] = []

    def read() -> None:
        while not stop.is_set():
            before = written[0]
            try:
                count = catalog.query(tmp_path, "SELECT count(*) FROM results")[1][0][0]
            except Exception as exc:  # noqa: BLE001 (reported by the test below)
                failures.append(exc)
                count = None
            with progress:
                if count is None:
                    stop.set()
                else:
                    seen.append((before, count, written[0]))
                progress.notify_all()

    def reads_reach(step: int) -> None:
        with progress:
            progress.wait_for(lambda: len(seen) >= reads_per_step * step or stop.is_set())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for round_ in range(6):
            for number in range(2):
                reads_reach(3 * round_ + number)
                _write(tmp_path, dict(rows[0], run_id=f"w{round_}"), f"w{round_}-{number}")
                written[0] += 1
            reads_reach(3 * round_ + 2)
            catalog.compact(tmp_path, retain_hours=0 if round_ == 5 else 1)
        reads_reach(steps)
    finally:
        stop.set()
        reader.join()
    assert failures == [] and len(seen) >= reads_per_step * steps
    assert all(before <= count <= after for before, count, after in seen), seen
    assert catalog.query(tmp_path, "SELECT count(*) FROM results")[1] == [(len(rows) + 12,)]


def _outside_count(root) -> tuple[int, int]:
    """(rows, distinct params keys) of `results` read by polars, no project code."""
    frame = pl.read_delta(str(root / "results"))
    return frame.height, frame["params_key"].n_unique()


def test_two_compact_commands_at_once_never_double_rows(tmp_path, rows):
    # issue 26.1: two OPTIMIZE commits of the same files each added the merged rows
    for attempt in range(3):
        root = tmp_path / f"c{attempt}"
        _fill(root, rows)
        command = [*CLI, "catalog", "compact", "--catalog", str(root), "--retain-hours"]
        hours = "0" if attempt == 2 else "1"
        both = [
            subprocess.Popen([*command, hours], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(2)
        ]
        done = [(p.wait(300), p.stdout.read().decode(), p.stderr.read().decode()) for p in both]
        for process in both:
            process.stdout.close()
            process.stderr.close()
        assert sorted(code for code, _, _ in done) in ([0, 0], [0, 2]), done
        for code, _, stderr in done:
            assert "Traceback" not in stderr
            if code == 2:
                assert "another maintenance command (compact" in stderr
        assert _outside_count(root) == (len(rows), len(rows))
        assert catalog.check(root) == []


def test_repair_removes_the_rows_a_double_compaction_left(tmp_path, rows):
    _fill(tmp_path, rows)
    first, second = (DeltaTable(str(tmp_path / "results")) for _ in range(2))
    first.optimize.compact()
    second.optimize.compact()  # what two unguarded compactions did
    doubled = _outside_count(tmp_path)
    assert doubled[0] > len(rows) and doubled[1] == len(rows)
    assert {p.kind for p in catalog.check(tmp_path)} == {"duplicate"}
    before = catalog.to_arrow(tmp_path, "SELECT DISTINCT * FROM results ORDER BY params_key")
    report = catalog.repair(tmp_path)
    assert report["duplicates"] == doubled[0] - len(rows) and report["removed"] == []
    assert _outside_count(tmp_path) == (len(rows), len(rows))
    assert catalog.check(tmp_path) == []
    after = catalog.to_arrow(tmp_path, "SELECT * FROM results ORDER BY params_key")
    assert after.equals(before)
    assert catalog.repair(tmp_path)["version"] is None  # nothing left to repair
    _, runs = catalog.query(tmp_path, "SELECT count(*) FROM runs")
    assert runs == [(0,)]  # the maintenance leases are not runs
