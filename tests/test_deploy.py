"""deploy/: every file is run as far as this machine allows. The Prefect deployments
load their flow and validate their parameters, and their pull step runs; the files the
Dockerfile copies build the package's wheel and its checks run; the Dask scheduler and
worker commands of compose.yaml and the Kubernetes example start on 127.0.0.1 and
connect; the SLURM batch script runs its sweep with a stand-in for dask-jobqueue (not
installed here) that starts a local cluster instead of SLURM jobs; and compose's own
Prefect server, deployer and worker commands run a scheduled deployment for real, its
rows found in the catalog. What needs Docker, SLURM or Kubernetes themselves (images,
volumes, claims, replicas) is checked as the configuration it is."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest
import yaml

from puzzlesweep import catalog

from .servers import BIN, Processes, free_port, wait_for

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
POOL = "puzzlesweep"
QUIET = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}


def load_yaml(path: Path) -> list:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def prefect_yaml() -> dict:
    return load_yaml(DEPLOY / "prefect.yaml")[0]


def compose() -> dict:
    (document,) = load_yaml(DEPLOY / "compose.yaml")
    return document


def substituted(command: list[str], changes: dict[str, str]) -> list[str]:
    """`command` with each word `old` of `changes` replaced by its new value (the
    addresses and ports a container uses, made ones of this test on 127.0.0.1); fails
    when a word is missing, so a changed file is noticed rather than run unchanged."""
    for old in changes:
        assert old in command, f"{old!r} not in {command}"
    return [changes.get(word, word) for word in command]


def test_every_file_is_documented_and_every_yaml_file_parses():
    text = (DEPLOY / "README.md").read_text()
    for path in DEPLOY.rglob("*"):
        if path.is_file() and path.name != "README.md":
            assert path.relative_to(DEPLOY).as_posix() in text, path
    found = sorted(DEPLOY.rglob("*.y*ml"))
    assert {p.relative_to(DEPLOY).as_posix() for p in found} >= {
        "prefect.yaml",
        "compose.yaml",
        "k8s/dask-cluster.yaml",
        "k8s/prefect-worker.yaml",
        "k8s/catalog-pvc.yaml",
    }
    for path in found:
        assert load_yaml(path), f"{path} is empty"


def test_prefect_yaml_deployments_load_their_flow_and_run_their_pull_step(tmp_path, monkeypatch):
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.flows import Flow, load_flow_from_entrypoint
    from prefect.utilities.importtools import import_object
    from prefect.utilities.templating import apply_values

    from puzzlesweep.flows import spec

    config = prefect_yaml()
    # The pull step: its function imported by its dotted name and called with its
    # arguments, the environment template filled in as a worker fills it.
    (pull,) = config["pull"]
    ((step, arguments),) = pull.items()
    assert step == "prefect.deployments.steps.set_working_directory"
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PUZZLESWEEP_HOME", str(tmp_path))
    import_object(step)(**apply_values(arguments, os.environ))
    assert Path.cwd() == tmp_path
    monkeypatch.chdir(ROOT)

    assert {d["name"] for d in config["deployments"]} == {"seeds-nightly", "seeds-on-cluster"}
    for deployment in config["deployments"]:
        flow = load_flow_from_entrypoint(deployment["entrypoint"], use_placeholder_flow=False)
        assert isinstance(flow, Flow) and flow.name == "scheduled-sweep"
        # The flow's own validation: unknown or mistyped parameters raise here.
        accepted = set(flow.parameters.properties)
        assert set(deployment["parameters"]) <= accepted, deployment["name"]
        validated = flow.validate_parameters(deployment["parameters"])
        assert {"spec_path", "catalog_path", "address"} <= set(validated)
        # The spec it names loads as a sweep (relative to the checkout, $PUZZLESWEEP_HOME).
        sweep = spec.load(ROOT / validated["spec_path"])
        assert sweep.name
        assert deployment["work_pool"]["name"] == POOL
        (schedule,) = deployment["schedules"]
        CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])  # validates it


def copy_as_dockerfile(dockerfile: Path, into: Path) -> Path:
    """The WORKDIR of `dockerfile` rebuilt under `into` from its COPY lines (sources
    relative to the repository root, the build context); returns that directory."""
    workdir = into
    for line in dockerfile.read_text().splitlines():
        if line.startswith("WORKDIR "):
            workdir = into / line.split()[1].lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
        if line.startswith("COPY "):
            *sources, target = shlex.split(line)[1:]
            for source in sources:
                origin = ROOT / source
                assert origin.exists(), f"COPY {source}: not in the repository"
                where = workdir / target
                if target.endswith("/") or len(sources) > 1:
                    where = where / origin.name
                if origin.is_dir():
                    shutil.copytree(origin, where, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    where.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(origin, where)
    return workdir


def test_the_files_the_dockerfile_copies_build_the_whole_package(tmp_path):
    dockerfile = DEPLOY / "Dockerfile"
    text = dockerfile.read_text()
    app = copy_as_dockerfile(dockerfile, tmp_path / "image")
    assert re.search(r"^RUN pip install \./", text, re.M)
    # `pip install ./` in the image, without the dependencies (this venv has them).
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", tmp_path, "./"],
        capture_output=True,
        text=True,
        cwd=app,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("puzzlesweep-*.whl")
    built = set(zipfile.ZipFile(wheel).namelist())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for package, folder in project["tool"]["setuptools"]["package-dir"].items():
        for module in (ROOT / folder).glob("*.py"):
            assert f"{package.replace('.', '/')}/{module.name}" in built, (package, module)
    # The image's own check after the install, and its default command.
    (check,) = re.findall(r'python -c "([^"]+)"', text)
    assert "import puzzlesweep.flows.sweep" in check
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (command,) = re.findall(r"^CMD (.+)$", text, re.M)
    program, *arguments = json.loads(command)
    done = subprocess.run([str(BIN / program), *arguments], capture_output=True, text=True)
    assert done.returncode == 0 and "Usage" in done.stdout, done.stderr
    assert "PUZZLESWEEP_HOME=/app" in text and app.name == "app"  # prefect.yaml's pull step


def dask_client_sees(address: str, processes: Processes, timeout: float = 60) -> dict:
    """The scheduler's view of its one worker at `address`, once it has one."""
    from distributed import Client

    with Client(address, timeout=timeout) as client:
        wait_for(
            f"a worker at {address}\n{processes.log('scheduler')}\n{processes.log('worker')}",
            lambda: len(client.scheduler_info()["workers"]) == 1,
            timeout,
        )
        (worker,) = client.scheduler_info()["workers"].values()
        return worker


def start_scheduler(processes: Processes, command: list[str], changes: dict) -> tuple[str, int]:
    """Start a `dask scheduler` command with `changes`; returns (its address, dashboard port)."""
    assert command[:2] == ["dask", "scheduler"], command
    port, dashboard = free_port(), free_port()
    changes = {k: v.format(port=port, dashboard=dashboard) for k, v in changes.items()}
    processes.start("scheduler", *substituted(command, changes))
    return f"tcp://127.0.0.1:{port}", dashboard


def test_compose_dask_scheduler_and_worker_start_and_connect(tmp_path):
    services = compose()["services"]
    processes = Processes(tmp_path)
    try:
        address, _ = start_scheduler(
            processes,
            services["dask-scheduler"]["command"],
            {"0.0.0.0": "127.0.0.1", "8786": "{port}", ":8787": "127.0.0.1:{dashboard}"},
        )
        command = services["dask-worker"]["command"]
        assert command[:2] == ["dask", "worker"], command
        here = substituted(command, {"tcp://dask-scheduler:8786": address})
        here += ["--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"]
        processes.start("worker", *here, env=QUIET)
        worker = dask_client_sees(address, processes)
        assert worker["nthreads"] == 1 and worker["memory_limit"] == 2 * 1024**3
    finally:
        processes.stop()
    # What only Docker runs: two workers, one shared catalog volume, every service but
    # PostgreSQL from the image of deploy/Dockerfile, and the cluster address of
    # prefect.yaml's `seeds-on-cluster` is the scheduler service's port.
    assert services["dask-worker"]["deploy"]["replicas"] >= 2
    for name in ("prefect-worker", "dask-worker"):
        assert "catalog:/catalog" in services[name]["volumes"], name
    assert "catalog" in compose()["volumes"]
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["prefect-server"]["environment"][
        "PREFECT_API_DATABASE_CONNECTION_URL"
    ].startswith("postgresql+asyncpg://")
    assert services["prefect-worker"]["environment"]["PUZZLESWEEP_HOME"] == "/app"
    for name, service in services.items():
        if name != "postgres":
            assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    cluster = next(d for d in prefect_yaml()["deployments"] if d["name"] == "seeds-on-cluster")
    assert cluster["parameters"]["address"] == "tcp://dask-scheduler:8786"


def test_kubernetes_dask_scheduler_and_worker_start_and_connect(tmp_path):
    (dask,) = load_yaml(DEPLOY / "k8s" / "dask-cluster.yaml")
    assert (dask["apiVersion"], dask["kind"]) == ("kubernetes.dask.org/v1", "DaskCluster")
    # Cluster `dask` -> Service `dask-scheduler`, the address prefect.yaml names.
    assert dask["metadata"]["name"] == "dask"
    (scheduler,) = dask["spec"]["scheduler"]["spec"]["containers"]
    (worker,) = dask["spec"]["worker"]["spec"]["containers"]
    assert worker["image"] == scheduler["image"] == "puzzlesweep:latest"
    processes = Processes(tmp_path)
    try:
        address, dashboard = start_scheduler(
            processes,
            [*scheduler["args"], "--host", "0.0.0.0"],
            {"0.0.0.0": "127.0.0.1", "8786": "{port}", ":8787": "127.0.0.1:{dashboard}"},
        )
        # The operator gives each worker its name and the scheduler's address.
        here = substituted(
            worker["args"], {"$(DASK_WORKER_NAME)": "dask-default-0", "8788": "127.0.0.1:0"}
        )
        env = {**QUIET, "DASK_SCHEDULER_ADDRESS": address}
        processes.start("worker", *here, "--host", "127.0.0.1", env=env)
        seen = dask_client_sees(address, processes)
        assert seen["name"] == "dask-default-0"
        assert seen["nthreads"] == 1 and seen["memory_limit"] == 2 * 1024**3
        # The scheduler's readiness and liveness probes.
        for probe in ("readinessProbe", "livenessProbe"):
            path = scheduler[probe]["httpGet"]["path"]
            with urllib.request.urlopen(f"http://127.0.0.1:{dashboard}{path}", timeout=10) as r:
                assert r.status == 200, probe
    finally:
        processes.stop()
    # What only Kubernetes runs: the Prefect worker's pod and the shared claim.
    (deployment,) = load_yaml(DEPLOY / "k8s" / "prefect-worker.yaml")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == compose()["services"]["prefect-worker"]["command"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["PUZZLESWEEP_HOME"] == "/app" and env["PREFECT_API_URL"].endswith("/api")
    (claim,) = load_yaml(DEPLOY / "k8s" / "catalog-pvc.yaml")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for spec in (dask["spec"]["worker"]["spec"], deployment["spec"]["template"]["spec"])
        for v in spec["volumes"]
    }
    assert claims == {claim["metadata"]["name"]}


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
KNIGHTS = [(3, 4.0), (4, 4.0), (5, 5.0), (6, 8.0)]  # OEIS A006075 (PUZZLES.md)


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


STAND_IN = """
\"\"\"A stand-in for dask_jobqueue (not installed here): SLURMCluster records its
arguments and runs a LocalCluster on 127.0.0.1 whose workers are its "jobs".\"\"\"
import json
import os

from distributed import LocalCluster


class SLURMCluster:
    def __init__(self, **kwargs):
        with open(os.environ["SLURM_STAND_IN_RECORD"], "w") as record:
            json.dump(kwargs, record)
        self.cluster = LocalCluster(
            n_workers=0, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0"
        )
        self.scheduler_address = self.cluster.scheduler_address
        self.dashboard_link = self.cluster.dashboard_link

    def scale(self, jobs):
        self.cluster.scale(jobs)

    def job_script(self):
        return "#!/usr/bin/env bash (stand-in: no SLURM here)"

    def close(self):
        self.cluster.close()
"""


def test_slurm_batch_script_runs_its_sweep(prefect_server, tmp_path):
    env, _ = prefect_server
    script = DEPLOY / "slurm" / "sweep.sbatch"
    text = script.read_text()
    assert text.startswith("#!/bin/bash") and "#SBATCH" in text
    assert subprocess.run(["bash", "-n", script]).returncode == 0
    stand_in = tmp_path / "stand-in"
    stand_in.mkdir()
    (stand_in / "dask_jobqueue.py").write_text(STAND_IN)
    spec, results, record = tmp_path / "deployed.toml", tmp_path / "results", tmp_path / "kw.json"
    spec.write_text(SPEC)
    # As `sbatch` would run it on the first node: from the checkout, with a Prefect API
    # already set (so it starts no server of its own), one worker job.
    done = subprocess.run(
        ["bash", script, str(spec), str(results)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={
            **env,
            "PUZZLESWEEP_HOME": str(ROOT),
            "JOBS": "1",
            "PYTHONPATH": str(stand_in),
            "SLURM_STAND_IN_RECORD": str(record),
        },
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "solved 4" in done.stdout, done.stdout
    arguments = json.loads(record.read_text())
    # One single-threaded worker per job, run by this very environment's Python.
    assert (arguments["cores"], arguments["processes"]) == (1, 1)
    assert arguments["worker_extra_args"] == ["--nthreads", "1"]
    assert Path(arguments["python"]).parent == ROOT / ".venv" / "bin"
    _, rows = catalog.query(results, "SELECT rows, objective FROM results ORDER BY rows")
    assert rows == KNIGHTS
    # The script's own help works without dask-jobqueue (it is imported after parsing).
    done = subprocess.run(
        [sys.executable, DEPLOY / "slurm" / "sweep_on_slurm.py", "--help"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "--jobs" in done.stdout, done.stderr


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
        "scheduled-sweep/seeds-nightly",
        "--output",
        "json",
        env=env,
    )
    deployment = json.loads(done.stdout)
    assert [s["schedule"]["cron"] for s in deployment["schedules"]] == ["0 2 * * *"]
    assert deployment["entrypoint"] == "puzzlesweep.flows.sweep:scheduled_sweep"

    done = prefect(
        "deployment",
        "run",
        "scheduled-sweep/seeds-nightly",
        "--param",
        f"spec_path={spec}",
        "--param",
        f"catalog_path={results}",
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

    _, rows = catalog.query(
        results,
        "SELECT sweep, rows, objective, status, verified FROM results ORDER BY rows",
    )
    assert rows == [("deployed", r, value, "optimal", True) for r, value in KNIGHTS]
