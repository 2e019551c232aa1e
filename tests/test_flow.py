"""A small sweep through the real Prefect flow, checked by DuckDB queries of the catalog
it wrote: in this process on threads (`--backend threads`: the same flow and batch task,
without starting Dask), through the CLI, and the same sweep on threads, on a Dask
LocalCluster and on `dask scheduler`/`dask worker` processes, row for row."""

import json
import urllib.request
from pathlib import Path

import pytest

from puzzlesweep import catalog
from puzzlesweep import sweep as run_sweep

from .conftest import CLI, PEGS_T4, ROOT, cli, knights
from .servers import Processes, descendants, free_port, start_scheduler, subreaper

SMALL = knights("small", "1..6", piece=True) + PEGS_T4


@pytest.fixture
def spec(tmp_path) -> Path:
    path = tmp_path / "small.toml"
    path.write_text(SMALL)
    return path


def test_sweep_writes_a_queryable_catalog(prefect_api, spec, tmp_path):
    results = tmp_path / "results"
    report = run_sweep(str(spec), str(results), backend="threads", workers=2, batch_size=4)
    assert (report["planned"], report["solved"], report["skipped"]) == (16, 16, 0)
    # 6 boards in batches of 4 -> 2; T_4's 10 starts are 3 classes of equivalent starts
    # (6 edge holes; 3 corners; the centre), never split: corners and centre in one
    # batch of 4, the edge holes in one of 6.
    assert report["batches"] == 2 + 2

    # The flow's Prefect artifacts: progress at 100 %, and the summary table by status.
    from prefect.artifacts import Artifact

    progress = Artifact.get("small-progress")
    assert (progress.type, float(progress.data)) == ("progress", 100.0)
    summary = Artifact.get("small-summary")
    assert summary.type == "table" and '"status": "all", "instances": 16' in summary.data

    # OEIS A006075, knights n = 1..6: 1, 4, 4, 4, 5, 8.
    _, rows = catalog.query(
        results, "SELECT rows, objective FROM results WHERE family = 'domination' ORDER BY rows"
    )
    assert rows == [(1, 1.0), (2, 4.0), (3, 4.0), (4, 4.0), (5, 5.0), (6, 8.0)]
    # OEIS A127500: T_4 -> 5 fewest moves; holes 1, 5, 7, 10 cannot reach one peg.
    _, rows = catalog.query(
        results,
        "SELECT min(objective), count(*) FILTER (status = 'infeasible'), "
        "count(*) FILTER (verified), count(DISTINCT worker) > 0 "
        "FROM results WHERE family = 'peg_solitaire'",
    )
    assert rows == [(5.0, 4, 6, True)]
    _, rows = catalog.query(
        results, "SELECT count(*), count(DISTINCT run_id), min(schema_version) FROM results"
    )
    assert rows == [(16, 1, catalog.SCHEMA_VERSION)]
    # The run's one writer commits the batches in groups, after the commit that made
    # the table: every batch's app id once, at most one commit per batch, each family's
    # rows in its own partition.
    assert all(catalog.committed(results, f"{report['run_id']}-{n:05d}") for n in range(4))
    commits = catalog.history(results)[:-1]
    assert sum(c["rows"] for c in commits) == 16 and 1 <= len(commits) <= 4
    files = catalog.files(results)
    assert all(Path(f).parent.name.startswith("family=") for f in files)

    # A re-run finds everything in the catalog and solves nothing, without a cluster.
    again = run_sweep(str(spec), str(results), workers=1)
    assert (again["solved"], again["skipped"], again["batches"]) == (0, 16, 0)
    assert again["scheduler"] is None and len(catalog.files(results)) == len(files)


def test_cli_run_prints_the_summary_from_the_catalog(spec, tmp_path, prefect_api):
    # The user's path: `puzzlesweep run` starts its own Prefect API (the batches run on
    # threads: that the same sweep runs on Dask is test_the_same_sweep_on_threads_...).
    results = tmp_path / "cli-results"
    with subreaper():  # whatever the run leaves behind becomes ours to see
        args = ("--catalog", str(results), "--backend", "threads", "--workers", "2")
        done = cli("run", str(spec), *args, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        # 9 canonical classes solved, 7 rows carried over to their equivalent instances
        assert "sweep small: 16 instances (9 solved now, 7 symmetric copies)" in done.stdout
        assert done.stdout.count("symmetric copy") == 7
        _, rows = catalog.query(results, "SELECT count(*), count(*) FILTER (verified) FROM results")
        assert rows == [(16, 12)]
        # nothing links into its temporary Prefect API, which is gone once the run ends
        assert "Prefect flow run:" not in done.stderr and "127.0.0.1" not in done.stdout
        _, rows = catalog.query(results, "SELECT flow_run_url FROM runs")
        assert rows == [(None,)]
        # its temporary Prefect API ended with it (only what this test started is looked
        # at: the session's API is not the run's)
        left = descendants("puzzlesweep.flows.api", exclude=prefect_api.process.pid)
        assert left == []
    done = cli(
        "catalog",
        "query",
        "SELECT rows, objective FROM results WHERE family = 'domination' ORDER BY rows",
        "--catalog",
        str(results),
        "--format",
        "csv",
    )
    assert done.stdout.splitlines() == [
        "rows,objective",
        "1,1",
        "2,4",
        "3,4",
        "4,4",
        "5,5",
        "6,8",
    ]


# Known optima (docs/families.md): OEIS A006075, knights n×n for n = 1..6 -> 1, 4, 4, 4, 5, 8;
# OEIS A181018, no 3 in a row on n×n for n = 3..5 keeps 6, 9, 16 -> removes 3, 7, 9;
# OEIS A127500, T_4 -> 5 fewest moves, and holes 1, 5, 7, 10 cannot reach one peg.
THREE_WAYS = (
    knights("three-ways", "1..6")
    + PEGS_T4
    + """
[[study]]
family = "no_k_in_row"
time_limit = 30
[study.grid]
dims = [[3, 3], [4, 4], [5, 5]]
k = 3
"""
)


def rows_of(results: Path) -> list[tuple]:
    """(family, params_key, status, objective, verified) of every row, in key order."""
    return catalog.query(
        results,
        "SELECT family, params_key, status, objective, verified FROM results ORDER BY 2",
    )[1]


def workers_of(results: Path) -> set[str]:
    """The workers that solved the rows (symmetric copies are solved by none)."""
    return {
        w for (w,) in catalog.query(results, "SELECT worker FROM results WHERE NOT equivalent")[1]
    }


@pytest.mark.slow
def test_the_same_sweep_on_threads_a_local_cluster_and_dask_processes(prefect_api, tmp_path):
    import os

    from distributed import Client
    from prefect.settings import PREFECT_API_URL

    spec = tmp_path / "three-ways.toml"
    spec.write_text(THREE_WAYS)
    threads, local, remote = (tmp_path / name for name in ("threads", "local", "remote"))
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    work = tmp_path / "cluster"
    work.mkdir()
    processes = Processes(work)
    try:
        # `dask scheduler` and two `dask worker` processes on 127.0.0.1, started (and
        # stopped) here; they start while this process sweeps on threads
        start_scheduler(processes, port, work)
        for name in ("w1", "w2"):
            processes.start(
                name,
                *("dask", "worker", address, "--name", name, "--host", "127.0.0.1"),
                *("--nthreads", "1", "--no-dashboard", "--local-directory", str(work)),
                cwd=work,
            )
        run_sweep(str(spec), str(threads), backend="threads", workers=2)  # --backend threads
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=90)
        # `puzzlesweep run --address` sends its batches there, while this process runs
        # the sweep on a LocalCluster of its own (`--workers 2`)
        env = {"PREFECT_API_URL": PREFECT_API_URL.value()}
        args = ("run", str(spec), "--address", address, "--catalog", str(remote))
        run = processes.start("run", *CLI, *args, env=env, cwd=ROOT)
        # (a port of its own for the LocalCluster's HTTP server: without one, Dask takes
        # 8787, which another cluster on the machine may hold)
        run_sweep(str(spec), str(local), workers=2, dashboard_address="127.0.0.1:0")
        assert run.wait(timeout=300) == 0, processes.log("run")
        assert f"Dask scheduler {address}, 2 workers" in (work / "run.log").read_text()
    finally:
        processes.stop()

    # the same rows three times: the same statuses, objectives and verdicts
    expected = rows_of(threads)
    assert len(expected) == 6 + 10 + 3
    assert rows_of(local) == expected and rows_of(remote) == expected
    _, rows = catalog.query(
        threads,
        "SELECT family, rows, dims, objective FROM results "
        "WHERE family <> 'peg_solitaire' ORDER BY 1, 2, dims[1]",
    )
    assert rows == [
        *(("domination", n, None, float(o)) for n, o in enumerate([1, 4, 4, 4, 5, 8], 1)),
        *(("no_k_in_row", None, [n, n], float(o)) for n, o in [(3, 3), (4, 7), (5, 9)]),
    ]
    _, rows = catalog.query(
        threads,
        "SELECT min(objective), count(*) FILTER (status = 'infeasible'), "
        "count(*) FILTER (verified) FROM results WHERE family = 'peg_solitaire'",
    )
    assert rows == [(5.0, 4, 6)]
    # and each ran where it was sent: this host's threads, the LocalCluster's worker
    # processes (named by their addresses), the workers named w1 and w2
    assert workers_of(threads) == {os.uname().nodename}
    assert all(w.startswith("tcp://127.0.0.1:") for w in workers_of(local))
    assert workers_of(remote) <= {"w1", "w2"} and workers_of(remote)


def test_query_errors_are_named(tmp_path):
    done = cli("catalog", "query", "SELECT 1 FROM results", "--catalog", str(tmp_path / "none"))
    assert done.returncode == 2 and "does not exist" in done.stderr
    (tmp_path / "empty").mkdir()
    done = cli("catalog", "query", "SELECT 1 FROM results", "--catalog", str(tmp_path / "empty"))
    assert done.returncode == 2  # it said "does not exist" of the folder that does
    assert "the folder holds no catalog yet (run a sweep into it first)" in done.stderr


def test_the_temporary_api_defers_to_a_configured_one(monkeypatch):
    # Prefect's settings name an API (here the environment; a profile works the same):
    # the child reads them, says so and exits without serving anything.
    from puzzlesweep.flows.api import TemporaryAPI

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    with TemporaryAPI() as api:
        assert api.url() is None
        assert api.process.wait(timeout=120) == 0


@pytest.mark.slow
def test_the_temporary_api_keeps_its_records_in_memory(tmp_path, monkeypatch):
    # Its records are gone with it: nothing is written under PREFECT_HOME, where
    # Prefect's default database file would grow with every run. The first start leaves
    # the migrated empty database in the user's cache; the next starts from a copy.
    from puzzlesweep.flows.api import TemporaryAPI, _template

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_API_DATABASE_CONNECTION_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PREFECT_PROFILES_PATH", str(tmp_path / "profiles.toml"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for _ in range(2):
        with TemporaryAPI() as api:
            url = api.url()
            assert _flows(url) == []  # a run's API holds only that run's records
            request = urllib.request.Request(
                f"{url}/flows/", data=b'{"name": "kept-in-memory"}', method="POST"
            )
            request.add_header("Content-Type", "application/json")
            with urllib.request.urlopen(request, timeout=30) as response:
                assert response.status in (200, 201)
            assert _flows(url) == ["kept-in-memory"]
            assert _template().exists()  # copied before the API answered its first request
    assert _template().parent == tmp_path / "cache" / "puzzlesweep"
    home = tmp_path / "home"  # no database, and no memo of Prefect's block registration
    assert not [path for path in home.rglob("*") if path.is_file()], sorted(home.rglob("*"))


def test_a_temporary_api_that_cannot_start_says_why_in_one_line(monkeypatch, capfd):
    # A database URL that is not one: the API's child exits, and its traceback's last
    # line is the error's message instead of a traceback on the terminal.
    from puzzlesweep.flows.api import APIError, TemporaryAPI

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "garbage")
    with TemporaryAPI() as api, pytest.raises(APIError) as raised:
        api.url()
    assert str(raised.value) == (
        "the temporary Prefect API stopped before it answered (exit code 1: "
        "sqlalchemy.exc.ArgumentError: Could not parse SQLAlchemy URL from given URL string)"
    )
    assert "Traceback" not in capfd.readouterr().err


def _flows(url: str) -> list[str]:
    """The names of the flows the Prefect API at `url` holds."""
    request = urllib.request.Request(f"{url}/flows/filter", data=b"{}", method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        return [flow["name"] for flow in json.loads(response.read())]


@pytest.mark.slow  # about 33 s, two starts that migrate: `make test-slow`
def test_a_bad_or_unwritable_copy_of_the_empty_database_costs_only_time(tmp_path, monkeypatch):
    # A copy that is garbage is not used and is replaced by a good one; a cache that
    # cannot be written (XDG_CACHE_HOME is a file) is skipped. The API serves either way.
    from puzzlesweep.flows.api import TemporaryAPI, _template

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_API_DATABASE_CONNECTION_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _template().parent.mkdir(parents=True)
    _template().write_bytes(b"not a database" * 1000)
    with TemporaryAPI() as api:
        assert _flows(api.url()) == []
    assert _template().read_bytes().startswith(b"SQLite format 3\0")
    (tmp_path / "not-a-dir").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-dir"))
    with TemporaryAPI() as api:
        assert _flows(api.url()) == []
