"""A sweep on a real Dask cluster: a `dask scheduler` and two `dask worker` processes on
127.0.0.1, one of them SIGKILLed in the middle of the sweep. The catalog, read with
DuckDB, must hold every instance exactly once."""

import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from puzzlesweep import catalog
from puzzlesweep import sweep as run_sweep
from puzzlesweep.core import BadInput
from puzzlesweep.flows.cluster import check_address

from .conftest import CLI, ROOT, cli, slow_boxes
from .servers import Processes, free_port, start_scheduler, wait_for

# T_5 from every hole, fewest moves: 15 instances of about a second each, in batches of
# 2, so a worker is nearly always in the middle of one; 12 small domination boards.
SPEC = """
name = "cluster"
[[study]]
family = "peg_solitaire"
time_limit = 60
[study.grid]
side = 5
start = "all"
question = "min_moves"

[[study]]
family = "domination"
time_limit = 60
[study.grid]
piece = ["knight", "king"]
rows = "1..6"
cols = "=rows"
"""


@pytest.fixture
def cluster(tmp_path):
    """A scheduler and two single-threaded workers without nannies (a SIGKILLed worker
    stays dead), started in a directory outside the repository: the workers import only
    the installed package. Yields (address, dashboard URL, Processes)."""
    port, dashboard = free_port(), free_port()
    address = f"tcp://127.0.0.1:{port}"
    work = tmp_path / "cluster"
    work.mkdir()
    processes = Processes(work)
    try:
        start_scheduler(processes, port, work, dashboard)
        for name in ("w1", "w2"):
            processes.start(
                name,
                "dask",
                "worker",
                address,
                "--name",
                name,
                "--host",
                "127.0.0.1",
                "--nthreads",
                "1",
                "--no-nanny",
                "--no-dashboard",
                "--memory-limit",
                "2GiB",
                "--local-directory",
                str(work),
                cwd=work,
            )
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=90)
            workers = {info["name"]: a for a, info in client.scheduler_info()["workers"].items()}
        yield address, f"http://127.0.0.1:{dashboard}/status", processes, workers
    finally:
        processes.stop()


@pytest.mark.slow
def test_sweep_survives_a_killed_worker(prefect_api, cluster, tmp_path):
    address, dashboard, processes, workers = cluster
    spec = tmp_path / "cluster.toml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    outcome: dict = {}

    def sweep() -> None:
        try:
            outcome["report"] = run_sweep(str(spec), str(results), address=address, batch_size=2)
        except BaseException as exc:  # noqa: BLE001 (reported by the main thread)
            outcome["error"] = exc

    from distributed import Client

    thread = threading.Thread(target=sweep)
    thread.start()
    try:
        with Client(address, timeout=60) as client:
            # Kill w1 once batches are in the catalog and w1 is in the middle of another.
            def w1_busy() -> bool:
                busy = client.processing(workers=[workers["w1"]]).get(workers["w1"])
                return len(catalog.files(results)) >= 2 and bool(busy)

            wait_for("w1 busy after two batches", w1_busy, 120, every=0.2)
        victim = processes.started[1][1]
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
    finally:
        thread.join(timeout=300)
    assert not thread.is_alive(), "the sweep did not finish after a worker was killed"
    assert "error" not in outcome, outcome.get("error")
    report = outcome["report"]
    assert report["failed"] == [] and report["planned"] == report["solved"] == 27
    assert report["retried"] >= 1  # the batch w1 was running, run again on w2
    assert report["scheduler"] == address and report["dashboard"] == dashboard

    # Every instance exactly once, and the survivor did the rest.
    _, rows = catalog.query(
        results,
        "SELECT count(*), count(DISTINCT params_key), count(DISTINCT run_id), "
        "count(*) FILTER (status = 'error') FROM results",
    )
    assert rows == [(27, 27, 1, 0)]
    _, rows = catalog.query(results, "SELECT DISTINCT worker FROM results ORDER BY 1")
    # the worker column holds the names the workers were given (`dask worker --name`)
    assert {w for (w,) in rows} <= set(workers)
    assert ("w2",) in rows
    # T_5: every start solvable, 9 moves at best (OEIS A127500).
    _, rows = catalog.query(
        results,
        "SELECT min(objective), count(*) FILTER (verified) FROM results "
        "WHERE family = 'peg_solitaire'",
    )
    assert rows == [(9.0, 15)]

    # The scheduler's dashboard answers (bokeh is installed).
    with urllib.request.urlopen(dashboard, timeout=30) as page:
        assert page.status == 200 and b"Dask" in page.read()

    # The user's path: `run --address` prints the dashboard and, with a Prefect server
    # configured, the flow run's URL; everything is in the catalog already.
    from prefect.settings import PREFECT_API_URL

    done = subprocess.run(
        [*CLI, "run", str(spec), "--address", address, "--catalog", str(results)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"Dask scheduler {address}, 1 workers, dashboard {dashboard}" in done.stderr
    assert re.search(r"Prefect flow run: http://\S+/runs/flow-run/[0-9a-f-]{36}", done.stderr)
    assert "solved 0 in 0 batches (0 retried), skipped 27" in done.stderr


@pytest.mark.slow  # about 60 s: two runs, each starting its own Prefect API
def test_a_rerun_on_workers_that_outlived_an_interrupted_run_finishes(cluster, tmp_path):
    # Prefect's services in a worker keep the API client of the run that started them
    # (the concurrency slots one per set of task tags): after a Ctrl-C'd run and its
    # temporary API were gone, every batch of the next run of the same sweep failed
    # ("Unable to acquire concurrency slots") and it solved nothing for minutes.
    address, results = cluster[0], tmp_path / "r"
    spec = tmp_path / "boxes.toml"
    spec.write_text(slow_boxes("boxes", time_limit=3))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # its own API
    args = [*CLI, "run", str(spec), "--address", address, "--catalog", str(results)]
    args += ["--batch-size", "1"]
    log = tmp_path / "first.log"
    with log.open("w") as sink:  # a file, not a pipe nobody reads while it runs
        first = subprocess.Popen(args, env=env, cwd=ROOT, stdout=sink, stderr=sink)
    wait_for("a first batch in the catalog", lambda: catalog.files(results), 180, every=0.2)
    first.send_signal(signal.SIGINT)
    assert first.wait(60) == 130, log.read_text()[-2000:]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    _, rows = catalog.query(results, "SELECT count(DISTINCT params_key), count(*) FROM results")
    assert rows == [(8, 8)]  # every box once: the re-run finished what was missing
    _, states = catalog.query(results, "SELECT state FROM runs ORDER BY started_at")
    assert states == [("interrupted",), ("finished",)]


def test_bad_or_closed_addresses_are_refused(tmp_path):
    for bad in ("10.0.0.5:8786", "tcp://host", "tcp://host:99999", "http://host:8786"):
        with pytest.raises(BadInput, match="not a Dask scheduler address"):
            check_address(bad)
    assert check_address("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    closed = f"tcp://127.0.0.1:{free_port()}"
    # A refused connection is sure at once: it said "no Dask scheduler answered within
    # 3 s (Timed out ...)" after the whole --connect-timeout. A port that accepts and
    # never answers: test_bad_input.py (slow).
    search = ["search", "peg_solitaire", "side=5", "start=all", "--folder", str(tmp_path / "f")]
    for args in (["run", str(spec), "--connect-timeout", "3"], search):
        done = cli(*args, "--address", closed, "--catalog", str(tmp_path / "r"))
        assert done.returncode == 2, done.stderr[-2000:]
        assert (
            done.stderr
            == f"error: --address {closed}: nothing listens there (connection refused)\n"
        )
    assert not Path(tmp_path / "r").exists()


@pytest.mark.slow  # about 50 s: `make test-slow`
def test_ctrl_c_with_address_leaves_no_batch_to_commit_after_the_row(
    prefect_api, cluster, tmp_path
):
    # The workers of --address are not the run's to freeze: a batch still running when
    # the run is interrupted finishes its solve on its worker but commits nothing, so the
    # run's row counts exactly its rows.
    from prefect.settings import PREFECT_API_URL

    address, _, processes, _ = cluster
    spec = tmp_path / "slow.toml"
    spec.write_text(slow_boxes("slow", 8))  # each box stops at its 8 s limit
    results = tmp_path / "results"
    env = {"PREFECT_API_URL": PREFECT_API_URL.value()}
    args = ("run", str(spec), "--address", address, "--catalog", str(results))
    run = processes.start("run", *CLI, *args, "--batch-size", "1", env=env, cwd=ROOT)
    wait_for("a first commit", lambda: len(catalog.files(results)) >= 1, timeout=240)
    run.send_signal(signal.SIGINT)
    assert run.wait(timeout=60) == 130, processes.log("run")
    time.sleep(8 + 10)  # the batches in flight reach their limit, and would commit
    _, rows = catalog.query(results, "SELECT count(*) FROM results")
    _, runs = catalog.query(results, "SELECT state, solved FROM runs")
    assert runs == [("interrupted", rows[0][0])] and 1 <= rows[0][0] < 8
