"""A sweep composed with one's own Prefect and Dask set-up: inside a user's flow on
Dask, several sweeps from one process, deployments' parameters with a cluster."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from puzzlesweep.flows.settings import RunSettings

from .conftest import ROOT, knights


def test_a_sweep_inside_a_flow_on_dask_uses_that_cluster(prefect_api, tmp_path):
    # A user's @flow(task_runner=DaskTaskRunner(...)) calling puzzlesweep.sweep(): the
    # sweep runs as its subflow on the flow's own cluster, with no second scheduler.
    from prefect import flow
    from prefect_dask import DaskTaskRunner

    import puzzlesweep
    from puzzlesweep import catalog

    spec = tmp_path / "inside.toml"
    spec.write_text(knights("inside", "3..4"))
    runner = DaskTaskRunner(cluster_kwargs={"n_workers": 1, "threads_per_worker": 1})

    @flow(task_runner=runner)
    def mine() -> tuple[str, dict]:
        from prefect.context import FlowRunContext

        scheduler = FlowRunContext.get().task_runner.client.scheduler.address
        return scheduler, puzzlesweep.sweep(str(spec), str(tmp_path / "results"))

    scheduler, report = mine()
    assert report["scheduler"] == scheduler and report["solved"] == 2
    # OEIS A006075 (knights, n×n): n = 3, 4 → 4, 4; the report's query selects its rows.
    _, rows = catalog.query(
        tmp_path / "results", f"SELECT rows, objective FROM ({report['query']}) ORDER BY 1"
    )
    assert rows == [(3, 4.0), (4, 4.0)]


SCRIPT = """
import sys
import puzzlesweep
from puzzlesweep.flows import api

if __name__ == "__main__":
    spec, catalog = sys.argv[1], sys.argv[2]
    first = puzzlesweep.sweep(spec, catalog, backend="threads", workers=1)
    server = api._shared[0].process.pid
    second = puzzlesweep.sweep(spec, catalog, backend="threads", workers=1, force=True)
    print(server == api._shared[0].process.pid, first["solved"], second["solved"])
"""


def test_sweeps_of_one_process_share_one_temporary_api(tmp_path):
    # A notebook's calls of puzzlesweep.sweep() with no Prefect server configured: the
    # second uses the temporary API the first started (each would wait for its own).
    spec = tmp_path / "twice.toml"
    spec.write_text(knights("twice", "2..3"))
    script = tmp_path / "twice.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    done = subprocess.run(
        [sys.executable, str(script), str(spec), str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "2", "2"], done.stdout + done.stderr[-2000:]


def test_every_deployment_takes_an_address_as_a_parameter():
    # `prefect deployment run sweep/seeds-nightly --param address=tcp://...`: no
    # deployment sets `workers`, which does not go with an address.
    deployments = yaml.safe_load(Path(ROOT, "deploy/prefect.yaml").read_text())["deployments"]
    assert {d["name"] for d in deployments} >= {"seeds-nightly", "seeds-on-cluster"}
    for deployment in deployments:
        parameters = {k: v for k, v in deployment["parameters"].items() if k != "spec"}
        settings = RunSettings.of(**{**parameters, "address": "tcp://127.0.0.1:8786"})
        assert settings.address == "tcp://127.0.0.1:8786", deployment["name"]


def test_a_script_without_a_main_guard_is_told_why_its_workers_failed(tmp_path):
    # The local cluster's workers import the script that started them: without
    # `if __name__ == "__main__":` each starts the sweep again and Dask said only
    # "Nanny failed to start".
    spec = tmp_path / "s.toml"
    spec.write_text(knights("unguarded", "2..2"))
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(f"""
        import puzzlesweep
        puzzlesweep.sweep({str(spec)!r}, {str(tmp_path / "results")!r}, workers=1)
        """)
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert done.returncode != 0
    assert 'must call it under `if __name__ == "__main__":`' in done.stderr, done.stderr[-3000:]
