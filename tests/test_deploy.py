"""deploy/: what cannot run here (no Docker engine, no SLURM, no Kubernetes) is parsed and
checked; the Prefect deployment runs for real: `prefect server start`, a process work
pool, `prefect deploy` from deploy/prefect.yaml, a triggered run picked up by `prefect
worker start`, its rows found in the catalog."""

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest
import yaml

from puzzlesweep import catalog

from .servers import BIN, Processes, free_port, wait_for

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
POOL = "puzzlesweep"


def load_yaml(path: Path) -> list:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def prefect_yaml() -> dict:
    return load_yaml(DEPLOY / "prefect.yaml")[0]


def test_every_yaml_file_in_deploy_parses():
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


def test_prefect_yaml_deployments_name_real_flows_parameters_and_schedules():
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.flows import Flow, load_flow_from_entrypoint

    config = prefect_yaml()
    (pull,) = config["pull"]
    assert "prefect.deployments.steps.set_working_directory" in pull
    assert {d["name"] for d in config["deployments"]} == {"seeds-nightly", "seeds-on-cluster"}
    for deployment in config["deployments"]:
        flow = load_flow_from_entrypoint(deployment["entrypoint"], use_placeholder_flow=False)
        assert isinstance(flow, Flow) and flow.name == "scheduled-sweep"
        accepted = set(flow.parameters.properties)
        assert set(deployment["parameters"]) <= accepted, deployment["name"]
        assert {"spec_path", "catalog_path", "address"} <= set(deployment["parameters"])
        assert (ROOT / deployment["parameters"]["spec_path"]).is_file()
        assert deployment["work_pool"]["name"] == POOL
        (schedule,) = deployment["schedules"]
        CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])


def test_dockerfile_installs_the_package_from_the_repository():
    text = (DEPLOY / "Dockerfile").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    copied = set()
    for line in text.splitlines():
        if line.startswith("COPY "):
            *sources, _ = shlex.split(line)[1:]
            copied.update(s.rstrip("/") for s in sources)
    # pyproject.toml and every source folder the package maps are in the image...
    folders = set(project["tool"]["setuptools"]["package-dir"].values())
    assert {"pyproject.toml", "README.md"} | folders <= copied, copied
    assert all((ROOT / source).exists() for source in copied)
    # ...and pip installs that directory (its pyproject), then imports the flow.
    assert re.search(r"^RUN pip install \./", text, re.M)
    assert "import puzzlesweep.flows.sweep" in text
    assert "PUZZLESWEEP_HOME=/app" in text  # where prefect.yaml's pull step goes


def test_compose_file_has_the_services_and_the_shared_catalog():
    (compose,) = load_yaml(DEPLOY / "compose.yaml")
    services = compose["services"]
    assert services["postgres"]["image"].startswith("postgres:")
    server = services["prefect-server"]
    assert server["command"][:3] == ["prefect", "server", "start"]
    assert server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"].startswith(
        "postgresql+asyncpg://"
    )
    worker = services["prefect-worker"]
    assert worker["command"][:5] == ["prefect", "worker", "start", "--pool", POOL]
    assert worker["environment"]["PUZZLESWEEP_HOME"] == "/app"
    deployer = " ".join(services["deployer"]["command"])
    assert "--prefect-file deploy/prefect.yaml" in deployer and f"create {POOL}" in deployer
    assert services["dask-scheduler"]["command"][:2] == ["dask", "scheduler"]
    dask_worker = services["dask-worker"]
    assert dask_worker["command"][:3] == ["dask", "worker", "tcp://dask-scheduler:8786"]
    assert dask_worker["deploy"]["replicas"] >= 2
    for name in ("prefect-worker", "dask-worker"):
        assert "catalog:/catalog" in services[name]["volumes"], name
    assert "catalog" in compose["volumes"]
    # Every service runs the image built from deploy/Dockerfile.
    for name, service in services.items():
        if name != "postgres":
            assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    cluster = next(d for d in prefect_yaml()["deployments"] if d["name"] == "seeds-on-cluster")
    assert cluster["parameters"]["address"] == "tcp://dask-scheduler:8786"


def test_kubernetes_example_uses_the_dask_operator_and_a_prefect_worker():
    (dask,) = load_yaml(DEPLOY / "k8s" / "dask-cluster.yaml")
    assert (dask["apiVersion"], dask["kind"]) == ("kubernetes.dask.org/v1", "DaskCluster")
    # Cluster `dask` → Service `dask-scheduler`, the address prefect.yaml names.
    assert dask["metadata"]["name"] == "dask"
    (worker,) = dask["spec"]["worker"]["spec"]["containers"]
    assert worker["args"][:2] == ["dask", "worker"] and worker["image"] == "puzzlesweep:latest"
    assert "--memory-limit" in worker["args"]
    (scheduler,) = dask["spec"]["scheduler"]["spec"]["containers"]
    assert scheduler["args"][:2] == ["dask", "scheduler"]
    (deployment,) = load_yaml(DEPLOY / "k8s" / "prefect-worker.yaml")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"][:5] == ["prefect", "worker", "start", "--pool", POOL]
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


def test_slurm_example_uses_dask_jobqueue_and_the_package():
    source = (DEPLOY / "slurm" / "sweep_on_slurm.py").read_text()
    tree = ast.parse(source)
    imported = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert ("dask_jobqueue", "SLURMCluster") in imported
    for module, name in imported:
        if module.startswith("puzzlesweep"):
            __import__(module)
            assert hasattr(sys.modules[module], name), f"{module}.{name}"
    script = (DEPLOY / "slurm" / "sweep.sbatch").read_text()
    assert script.startswith("#!/bin/bash") and "#SBATCH" in script
    assert "deploy/slurm/sweep_on_slurm.py" in script
    assert subprocess.run(["bash", "-n", DEPLOY / "slurm" / "sweep.sbatch"]).returncode == 0


def test_deploy_readme_documents_every_file():
    text = (DEPLOY / "README.md").read_text()
    for path in DEPLOY.rglob("*"):
        if path.is_file() and path.name != "README.md":
            assert path.relative_to(DEPLOY).as_posix() in text, path


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


@pytest.fixture
def prefect_server(tmp_path):
    """`prefect server start` on a free port of 127.0.0.1 with its own PREFECT_HOME;
    yields (the environment for clients and workers, Processes)."""
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
    processes = Processes(tmp_path)
    try:
        server_env = {k: v for k, v in env.items() if k != "PREFECT_API_URL"}
        processes.start(
            "server",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            env=server_env,
        )

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"{env['PREFECT_API_URL']}/health", timeout=5):
                    return True
            except OSError:
                return False

        wait_for(f"prefect server on port {port}\n{processes.log('server')}", healthy, 120)
        yield env, processes
    finally:
        processes.stop()  # the worker (started last) before the server


def test_scheduled_deployment_runs_on_a_process_worker(prefect_server, tmp_path):
    env, processes = prefect_server
    spec = tmp_path / "deployed.toml"
    spec.write_text(SPEC)
    results = tmp_path / "results"

    prefect("work-pool", "create", POOL, "--type", "process", env=env)
    prefect(
        "--no-prompt",
        "deploy",
        "--prefect-file",
        "deploy/prefect.yaml",
        "--name",
        "seeds-nightly",
        env=env,
    )
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
    processes.start(
        "worker",
        "prefect",
        "worker",
        "start",
        "--pool",
        POOL,
        "--type",
        "process",
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
    assert rows == [
        ("deployed", 3, 4.0, "optimal", True),
        ("deployed", 4, 4.0, "optimal", True),
        ("deployed", 5, 5.0, "optimal", True),
        ("deployed", 6, 8.0, "optimal", True),
    ]
