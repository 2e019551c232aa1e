"""Real `puzzlesweep run` subprocesses against one catalog: killed with SIGKILL midway
and run again, a second run of the same sweep refused while the first lives, and two
runs of different sweeps at once. Checked with DuckDB queries of the catalog.

The subprocesses use the session's Prefect test API (PREFECT_API_URL) rather than each
starting a temporary one, and solve on threads (`--backend threads`): what is tested is
the catalog and the run's lifecycle, not Dask (a killed Dask worker: test_cluster.py).
"""

import os
import signal
import subprocess
import time
from pathlib import Path

from puzzlesweep import catalog, puzzles

from .conftest import CLI, PEGS_T4, ROOT, each_once_at_its_limit, knights, slow_boxes

SLOW = slow_boxes("slow", time_limit=2)
KNIGHTS = knights("knights", "1..6")
MIXED = knights("mixed", "5..8") + PEGS_T4
THREADS = ("--backend", "threads", "--workers", "2")  # two batches at a time, no Dask


def _start(spec: Path, results: Path, env: dict, log: Path, *extra: str) -> subprocess.Popen:
    """`puzzlesweep run` in its own session (so its Dask workers can be killed too)."""
    args = [*CLI, "run", str(spec), "--catalog", str(results), *extra]
    with open(log, "w") as sink:
        return subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )


def _run(spec: Path, results: Path, env: dict, *extra: str, timeout: float):
    """`puzzlesweep run SPEC --catalog RESULTS EXTRA...` to its end; returns it."""
    args = [*CLI, "run", str(spec), "--catalog", str(results), *extra]
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _spec(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_sigkill_midway_then_rerun_solves_only_what_is_missing(api_env, tmp_path):
    spec, results = _spec(tmp_path, "slow", SLOW), tmp_path / "results"
    first = _start(spec, results, api_env, tmp_path / "first.log", *THREADS, "--batch-size", "1")
    deadline = time.monotonic() + 240
    while len(catalog.files(results)) < 2 and first.poll() is None:
        assert time.monotonic() < deadline, (tmp_path / "first.log").read_text()[-2000:]
        time.sleep(0.2)
    # Frozen (its whole session) from here to its kill, so that however long the refused
    # run below takes on a loaded machine, the first run cannot finish its 8 instances.
    os.killpg(first.pid, signal.SIGSTOP)
    # The same sweep again while the first run lives: refused, naming it, nothing written.
    (alive,) = catalog.live_runs(results, "slow")
    refused = _run(spec, results, api_env, timeout=120)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert f"sweep slow is being run into this catalog by run {alive['run_id']}" in refused.stderr
    assert f"pid {first.pid}" in refused.stderr and "Traceback" not in refused.stderr
    assert catalog.query(results, "SELECT count(*) FROM runs")[1] == [(1,)]
    os.kill(first.pid, signal.SIGKILL)
    assert first.wait(30) == -signal.SIGKILL
    try:  # its orphaned solver processes, by the session it leads
        os.killpg(first.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

    _, [(kept, runs)] = catalog.query(
        results, "SELECT count(*), count(DISTINCT run_id) FROM results"
    )
    assert 2 <= kept < 8 and runs == 1
    _, [(killed_run, state)] = catalog.query(results, "SELECT run_id, state FROM runs")
    assert state == "running"  # it never got to write its end

    second = _run(spec, results, api_env, *THREADS, "--batch-size", "1", timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    assert f"skipped {kept} already in the catalog" in second.stderr

    # Every instance exactly once, none solved twice, each with its 2 s limit.
    each_once_at_its_limit(results, 8)
    _, manifest = catalog.query(
        results,
        "SELECT state, planned, skipped, solved, time_limit, spec FROM runs "
        "WHERE run_id <> ? ORDER BY started_at",
        [killed_run],
    )
    assert manifest == [("finished", 8, kept, 8 - kept, 8 - kept, SLOW)]
    # the killed run: found dead on this host by the re-run, never shown as running again
    _, [(state,)] = catalog.query(results, "SELECT state FROM runs WHERE run_id = ?", [killed_run])
    assert state == "lost"
    _, [(from_rerun,)] = catalog.query(
        results, "SELECT count(*) FROM results WHERE run_id <> ?", [killed_run]
    )
    assert from_rerun == 8 - kept
    check = subprocess.run(
        [*CLI, "catalog", "check", "--catalog", str(results)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout


def test_two_runs_into_one_catalog_at_once(api_env, tmp_path):
    results = tmp_path / "results"
    runs = [
        _start(
            _spec(tmp_path, name, text),
            results,
            api_env,
            tmp_path / f"{name}.log",
            "--backend",
            "threads",
            "--workers",
            "1",
        )
        for name, text in (("knights", KNIGHTS), ("mixed", MIXED))
    ]
    for name, run in zip(("knights", "mixed"), runs, strict=True):
        assert run.wait(300) == 0, (tmp_path / f"{name}.log").read_text()[-2000:]

    check = subprocess.run(
        [*CLI, "catalog", "check", "--catalog", str(results)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout
    # Both finished; every row is accounted for by its run's manifest; no run holds an
    # instance twice; together they cover all 6 + 2 + 10 distinct instances. (Boards 5
    # and 6 are in both sweeps: a run that started before the other wrote them solves
    # them too, as its own rows.)
    _, manifests = catalog.query(
        results,
        "SELECT sweep, state, planned, solved, optimal + infeasible FROM runs ORDER BY sweep",
    )
    assert [(m[0], m[1], m[2]) for m in manifests] == [
        ("knights", "finished", 6),
        ("mixed", "finished", 14),
    ]
    assert all(solved == finals for *_, solved, finals in manifests)
    # params_key: equivalent instances (peg start holes alike by symmetry) share
    # instance_key (one solve serves the class), but each keeps its own row.
    _, per_run = catalog.query(
        results,
        "SELECT sweep, count(*), count(DISTINCT params_key) FROM results GROUP BY 1 ORDER BY 1",
    )
    assert per_run == [(sweep, solved, solved) for sweep, _, _, solved, _ in manifests]
    _, [(keys,)] = catalog.query(results, "SELECT count(DISTINCT params_key) FROM results")
    assert keys == 18
    # OEIS A006075 from either run: knights on 5x5 and 6x6 -> 5 and 8.
    _, boards = catalog.query(
        results,
        "SELECT DISTINCT rows, objective FROM results WHERE family = 'domination' "
        "AND rows IN (5, 6) ORDER BY 1",
    )
    assert boards == [(5, 5.0), (6, 8.0)]


def test_a_batch_returned_twice_is_committed_once(tmp_path):
    # The run's one writer commits a batch with its app id (RUN-NUMBER); the same rows
    # handed to a writer again (a repeated attempt whose first result was committed)
    # make no second commit and no second row.
    from puzzlesweep.flows.batch_task import solve_batch
    from puzzlesweep.flows.batches import Batch
    from puzzlesweep.flows.flight import GroupWriter
    from puzzlesweep.solvers import Limits

    params = ({"piece": "knight", "rows": 4, "cols": 4, "variant": "dominating"},)
    batch = Batch.of("r1", "t", "domination", "highs", Limits(20), params, number=3)
    result = solve_batch(batch)  # what a worker runs: rows back, nothing written
    assert [row["status"] for row in result.rows] == ["optimal"] and not catalog.exists(tmp_path)
    catalog.prepare(tmp_path, [puzzles.get("domination").Params])
    first = GroupWriter(str(tmp_path))
    first.add(batch, result)
    assert [b.number for b, _ in first.commit()] == [3]
    assert catalog.committed(tmp_path, "r1-00003")
    versions = len(catalog.history(tmp_path))
    again = GroupWriter(str(tmp_path))
    again.add(batch, result)
    assert [b.number for b, _ in again.commit()] == [3]  # counted as committed ...
    assert len(catalog.history(tmp_path)) == versions  # ... with no new commit
    assert catalog.query(tmp_path, "SELECT count(*), min(objective) FROM results")[1] == [(1, 4.0)]
