"""The Prefect side of deploy/, run for real: a `prefect server` started with compose's own
command and a scheduled deployment run by a process worker (the SLURM batch script runs
on a real one-node SLURM in test_slurm.py)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from puzzlesweep import catalog

from .conftest import CLI, slow_boxes
from .servers import BIN, Processes, free_port, wait_for
from .test_deploy import POOL, QUIET, ROOT, compose, substituted

SPEC = """
name = "deployed"
[[study]]
family = "domination"
time_limit = 30
[study.grid]
piece = "knight"
rows = "3..6"
cols = "=rows"
"""
KNIGHTS = [(3, 4.0), (4, 4.0), (5, 5.0), (6, 8.0)]  # OEIS A006075 (docs/families.md)


def prefect(*args: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the `prefect` CLI from the repository root; fails the test on exit != 0."""
    done = subprocess.run(
        [str(BIN / "prefect"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    """compose.yaml's `prefect server start` command on a free port of 127.0.0.1 with
    its own PREFECT_HOME (SQLite where compose has PostgreSQL), healthy by compose's own
    health check; yields (the environment for clients and workers, Processes)."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    env = {
        **os.environ,
        **QUIET,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PREFECT_HOME": str(home / "prefect-home"),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
    }
    server = compose()["services"]["prefect-server"]
    command = substituted(server["command"], {"0.0.0.0": "127.0.0.1", "4200": str(port)})
    assert command[:3] == ["prefect", "server", "start"]
    processes = Processes(home)
    try:
        server_env = {k: v for k, v in env.items() if k != "PREFECT_API_URL"}
        processes.start("server", *command, env=server_env)
        kind, *check = server["healthcheck"]["test"]
        assert kind == "CMD" and check[:2] == ["python", "-c"]
        probe = [sys.executable, "-c", check[2].replace("localhost:4200", f"127.0.0.1:{port}")]

        def healthy() -> bool:
            return subprocess.run(probe, capture_output=True).returncode == 0

        wait_for(f"prefect server on port {port}\n{processes.log('server')}", healthy, 120)
        yield env, processes
    finally:
        processes.stop()  # the worker (started last) before the server


def test_scheduled_deployment_runs_on_a_process_worker(prefect_server, tmp_path):
    env, processes = prefect_server
    spec = tmp_path / "deployed.toml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    services = compose()["services"]

    # compose.yaml's one-shot deployer: the work pool and every deployment.
    deployer = services["deployer"]["command"]
    assert deployer[:2] == ["sh", "-c"]
    assert "--prefect-file deploy/prefect.yaml" in deployer[2] and f"create {POOL}" in deployer[2]
    done = subprocess.run(deployer, capture_output=True, text=True, cwd=ROOT, env=env, timeout=180)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    done = prefect(
        "deployment",
        "inspect",
        "sweep/seeds-nightly",
        "--output",
        "json",
        env=env,
    )
    deployment = json.loads(done.stdout)
    assert [s["schedule"]["cron"] for s in deployment["schedules"]] == ["0 2 * * *"]
    assert deployment["entrypoint"] == "puzzlesweep.flows.sweep:sweep"

    done = prefect(
        "deployment",
        "run",
        "sweep/seeds-nightly",
        "--param",
        f"spec={spec}",
        "--param",
        f"catalog={results}",
        env=env,
    )
    flow_run = re.search(r"UUID:\s*([0-9a-f-]{36})", done.stdout)
    assert flow_run, done.stdout
    # compose.yaml's Prefect worker (the Kubernetes example runs the same command).
    command = services["prefect-worker"]["command"]
    assert command[:5] == ["prefect", "worker", "start", "--pool", POOL]
    processes.start(
        "worker",
        *command,
        env={**env, "PUZZLESWEEP_HOME": str(ROOT), "PREFECT_WORKER_QUERY_SECONDS": "2"},
        cwd=tmp_path,
    )

    def state() -> str:
        url = f"{env['PREFECT_API_URL']}/flow_runs/{flow_run[1]}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.load(answer)["state_type"]

    final = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
    wait_for(f"the flow run to finish\n{processes.log('worker')}", lambda: state() in final, 240)
    assert state() == "COMPLETED", processes.log("worker")
    processes.stop("worker")
    # One flow run, named after the sweep and tagged with it, on its deployment: the
    # sweep is no subflow of a wrapper.
    api = env["PREFECT_API_URL"]
    with urllib.request.urlopen(f"{api}/flow_runs/{flow_run[1]}", timeout=10) as answer:
        run = json.load(answer)
    assert run["name"].startswith("deployed ") and run["deployment_id"], run
    assert {"sweep:deployed", "family:domination"} <= set(run["tags"]), run["tags"]
    request = urllib.request.Request(
        f"{api}/flow_runs/filter",
        data=json.dumps({"flow_runs": {"parent_task_run_id": {"is_null_": False}}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert json.load(answer) == []  # no subflow
    request = urllib.request.Request(
        f"{api}/task_runs/filter",
        data=json.dumps({"flow_runs": {"id": {"any_": [flow_run[1]]}}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert json.load(answer) == []  # the batches are Dask futures, not task runs

    _, rows = catalog.query(
        results,
        "SELECT sweep, rows, objective, status, verified FROM results ORDER BY rows",
    )
    assert rows == [("deployed", r, value, "optimal", True) for r, value in KNIGHTS]


def api_post(env: dict, path: str, body: dict) -> list:
    """POST `body` (JSON) to the server's `path`; returns the decoded answer."""
    request = urllib.request.Request(
        f"{env['PREFECT_API_URL']}/{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)


def sweep_flow_runs(env: dict, name: str) -> list[dict]:
    """The flow runs tagged `sweep:NAME` on the server."""
    return api_post(env, "flow_runs/filter", {"flow_runs": {"tags": {"all_": [f"sweep:{name}"]}}})


ERRORING = """
name = "erroring"
[[study]]
family = "domination"
[study.grid]
piece = "knight"
rows = 4
cols = 4
[[study]]
family = "no_k_in_row"
time_limit = 60
[study.grid]
dims = [[40, 40, 40]]   # about a million windows: far beyond 320 MiB
k = 5
"""


def test_a_sweep_with_an_error_row_is_failed_with_its_error_line(prefect_server, tmp_path):
    env, _ = prefect_server
    spec, results = tmp_path / "erroring.toml", tmp_path / "results"
    spec.write_text(ERRORING)
    done = subprocess.run(
        [*CLI, "run", str(spec), "--catalog", str(results), "--workers", "1"]
        + ["--memory-limit", "320MiB", "--dashboard-address", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**env, "PREFECT_LOGGING_LEVEL": "INFO"},  # the CLI's default
        timeout=600,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (run,) = sweep_flow_runs(env, "erroring")
    assert run["state_type"] == "FAILED", run["state"]
    assert "1 instance ended in error" in run["state"]["message"], run["state"]
    logs = api_post(env, "logs/filter", {"logs": {"flow_run_id": {"any_": [run["id"]]}}})
    errors = [log["message"] for log in logs if log["level"] >= 40]
    assert any(
        m.startswith("no_k_in_row[dims=40,40,40 k=5]: error") and "memory limit" in m
        for m in errors
    ), errors
    # Each batch is one INFO line naming its family; no task runs.
    infos = [log["message"] for log in logs if log["level"] == 20]
    assert any(m.startswith("batch ") and "(domination, 1 instance" in m for m in infos), infos
    assert api_post(env, "task_runs/filter", {"flow_runs": {"id": {"any_": [run["id"]]}}}) == []


def _run_until_a_row(env: dict, tmp_path: Path, name: str) -> tuple[list, subprocess.Popen]:
    """Start `puzzlesweep run` of eight slow boxes (sweep `name`) in a session of its own,
    its output in tmp_path/run.log, and return (its command, its process) once a first
    row is in the catalog tmp_path/results (the process group is killed if none comes)."""
    spec, results = tmp_path / f"{name}.toml", tmp_path / "results"
    spec.write_text(slow_boxes(name, time_limit=3))
    args = [*CLI, "run", str(spec), "--catalog", str(results), "--workers", "2"]
    args += ["--batch-size", "1", "--dashboard-address", "127.0.0.1:0"]
    log = tmp_path / "run.log"
    with open(log, "w") as sink:
        process = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_for(
            f"a first row\n{log.read_text()}",
            lambda: (
                catalog.files(results)
                and catalog.query(results, "SELECT count(*) FROM results")[1][0][0] > 0
            ),
            300,
        )
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    return args, process


def test_ctrl_c_leaves_the_flow_run_cancelled_not_running(prefect_server, tmp_path):
    env, _ = prefect_server
    results, log = tmp_path / "results", tmp_path / "run.log"
    _, process = _run_until_a_row(env, tmp_path, "interrupted")
    try:
        process.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        assert process.wait(60) == 130, log.read_text()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    final = ("CANCELLED", "CRASHED")
    (run,) = sweep_flow_runs(env, "interrupted")
    # Within the 10 s of the signal (checked once the process is gone).
    while run["state_type"] not in final and time.monotonic() - signalled < 10:
        time.sleep(0.5)
        (run,) = sweep_flow_runs(env, "interrupted")
    assert run["state_type"] in final and run["end_time"], run
    assert api_post(env, "task_runs/filter", {"flow_runs": {"id": {"any_": [run["id"]]}}}) == []
    _, [(state,)] = catalog.query(results, "SELECT state FROM runs")
    assert state == "interrupted"


@pytest.mark.slow  # about 90 s: a run killed, then a whole run
def test_a_killed_run_is_crashed_in_prefect_by_the_next_run(prefect_server, tmp_path):
    # SIGKILL leaves nothing to end the flow run, which Prefect showed Running for good:
    # the next run of the sweep finds the run lost, sets its flow run Crashed, and
    # writes its row with the counts of the rows it committed.
    env, results = prefect_server[0], tmp_path / "results"
    args, process = _run_until_a_row(env, tmp_path, "killed")
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    killed, finished = sorted(sweep_flow_runs(env, "killed"), key=lambda r: r["start_time"])
    assert (killed["state_type"], finished["state_type"]) == ("CRASHED", "COMPLETED"), killed
    _, rows = catalog.query(
        results,
        "SELECT state, solved, (SELECT count(*) FROM results r WHERE r.run_id = runs.run_id) "
        "FROM runs ORDER BY started_at",
    )
    (lost, solved, written), (state, *_) = rows
    assert (lost, state) == ("lost", "finished") and solved == written >= 1, rows
