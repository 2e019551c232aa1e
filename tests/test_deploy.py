"""deploy/: every file is run as far as this machine allows. The Prefect deployments
load their flow and validate their parameters, and their pull step runs; the files the
Dockerfile copies build the package's wheel and its checks run; the Dask scheduler and
worker commands of compose.yaml and the Kubernetes example start on 127.0.0.1 and
connect (a scheduled deployment on a real Prefect server runs in test_deploy_prefect.py,
the SLURM scripts on a real one-node SLURM in test_slurm.py). What needs Docker or
Kubernetes themselves (images, volumes, claims, replicas) is checked as the
configuration it is."""

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

import yaml

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
        assert isinstance(flow, Flow) and flow.name == "sweep"
        # The flow's own validation: unknown or mistyped parameters raise here.
        accepted = set(flow.parameters.properties)
        assert set(deployment["parameters"]) <= accepted, deployment["name"]
        validated = flow.validate_parameters(deployment["parameters"])
        assert {"spec", "catalog"} <= set(validated)
        # The spec it names loads as a sweep (relative to the checkout, $PUZZLESWEEP_HOME).
        sweep = spec.load(ROOT / validated["spec"])
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
