"""What people watching a sweep see: Prefect's flow run, task runs and logs on a real
`prefect server`, the run's links in the catalog, per-instance progress, `families` and
`run --dry-run`."""

import json
import re
import subprocess

from puzzlesweep import catalog, puzzles

from .conftest import CLI, cli
from .test_deploy_prefect import prefect_server  # noqa: F401 (a fixture: a real `prefect server`)

# Two families, so the flow run carries a tag for each. Values: A181018 (no_k_in_row 4×4,
# k = 3 keeps 9 and removes 7; 3×3 removes 3) and A006075 (knights on 4×4: 4).
SPEC = """
name = "watched"

[[study]]
family = "no_k_in_row"
solver = "highs"
time_limit = 30
grid = { dims = [[3, 3], [4, 4]], k = 3 }

[[study]]
family = "domination"
solver = "highs"
time_limit = 30
grid = { piece = "knight", rows = 4, cols = 4 }
"""


def test_prefect_shows_the_run_by_name_tags_and_a_line_per_batch(prefect_server, tmp_path):  # noqa: F811
    env, _ = prefect_server
    env = {k: v for k, v in env.items() if k != "PREFECT_LOGGING_LEVEL"}  # the CLI's own
    spec = tmp_path / "watched.toml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    done = subprocess.run(
        [*CLI, "run", str(spec), "--catalog", str(results), "--workers", "1"]
        + ["--batch-size", "1", "--dashboard-address", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The terminal shows the run's own lines, not Prefect's INFO log lines.
    assert "| INFO" not in done.stderr, done.stderr[-3000:]
    url = re.search(r"Prefect flow run: (http://\S+/runs/flow-run/([0-9a-f-]{36}))", done.stderr)
    assert url, done.stderr[-3000:]
    flow_run_id = url[2]

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with (
        temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}),
        get_client(sync_client=True) as client,
    ):
        flow_run = client.read_flow_run(flow_run_id)
        only = FlowRunFilter(id=FlowRunFilterId(any_=[flow_run.id]))
        task_runs = client.read_task_runs(flow_run_filter=only)  # none: batches are Dask's
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run.id])))
    assert re.fullmatch(r"watched \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", flow_run.name), flow_run.name
    assert set(flow_run.tags) == {"sweep:watched", "family:no_k_in_row", "family:domination"}
    assert flow_run.parameters["spec"] == str(spec)  # absolute, as the run read it
    # Three instances, one per batch: no task runs (the batches are plain Dask futures),
    # one line per batch naming its family and number, the run's first and last lines.
    assert task_runs == []
    messages = [log.message for log in logs]
    batches = [m for m in messages if re.match(r"batch \d+ \((no_k_in_row|domination), 1 ", m)]
    assert sorted(m.split()[1] for m in batches) == ["0", "1", "2"], messages
    assert all("committed as" in m for m in batches), batches
    start = [m for m in messages if re.match(r"run \S+ of sweep watched: 3 instances planned", m)]
    end = [m for m in messages if re.match(r"run \S+ finished: 3 instances solved", m)]
    assert start and end, messages

    # The run's row links its flow run and its (answering) Dask dashboard.
    _, rows = catalog.query(
        results, "SELECT state, solved, flow_run_url, dask_dashboard_url FROM runs"
    )
    ((state, solved, flow_run_url, dask_url),) = rows
    assert (state, solved, flow_run_url) == ("finished", 3, url[1])
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/status", dask_url), dask_url
    _, rows = catalog.query(results, "SELECT params_key, objective FROM results ORDER BY 2")
    assert [objective for _, objective in rows] == [3.0, 4.0, 7.0]


def test_families_lists_every_parameter_from_the_models():
    done = cli("families", "--json")
    assert done.returncode == 0, done.stderr
    described = {f["family"]: f for f in json.loads(done.stdout)}
    assert list(described) == list(puzzles.FAMILIES)
    for name, family in described.items():
        assert [p["name"] for p in family["parameters"]] == list(
            puzzles.get(name).Params.model_fields
        )
    peg = {p["name"]: p for p in described["peg_solitaire"]["parameters"]}
    assert peg["question"]["type"] == "solve | min_moves | reachable"
    assert (peg["question"]["default"], peg["side"]["required"]) == ("solve", True)
    piece = {p["name"]: p for p in described["domination"]["parameters"]}["piece"]
    assert piece["type"] == "knight | king | queen | rook | bishop"
    assert described["peg_solitaire"]["solvers"] == ["frontier"]
    # every parameter says its range, as the validators that check it hold it
    assert all(p["description"] for f in described.values() for p in f["parameters"])
    ranges = {
        (f, p["name"]): p["description"] for f, v in described.items() for p in v["parameters"]
    }
    assert "2..10" in ranges["peg_solitaire", "side"]
    assert "1..64" in ranges["domination", "rows"]
    assert "1..6" in ranges["monochromatic_lines", "d"]
    assert ">= 1" in ranges["no_k_in_row", "k"]
    assert cli("families").stdout.count("(solvers: ") == 4


def test_dry_run_solves_and_writes_nothing_and_counts_what_is_held(tmp_path):
    spec = tmp_path / "watched.toml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    done = cli("run", str(spec), "--catalog", str(results), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert not results.exists()  # nothing written, not even an empty catalog
    assert "no estimate of the time" in done.stdout

    # With one instance in the catalog: it counts as held, and its solve time makes an
    # estimate for its study.
    from puzzlesweep.core import make_params
    from puzzlesweep.puzzles import Instance
    from puzzlesweep.solve import solve_instance
    from puzzlesweep.solvers import Limits

    family = puzzles.get("no_k_in_row")
    instance = Instance("no_k_in_row", make_params(family.Params, {"dims": [4, 4], "k": 3}))
    row = solve_instance(instance, "highs", Limits(30))
    row.update(
        run_id="earlier",
        sweep="earlier",
        puzzlesweep_version="",
        schema_version=catalog.SCHEMA_VERSION,
    )
    catalog.prepare(str(results), {family.Params})
    catalog.write_batch(str(results), family.Params, [row], "earlier-00000")
    before = catalog.history(str(results))

    from puzzlesweep.flows.run_record import preview

    report = preview(str(spec), str(results), workers=1)
    study = {s["study"]: s for s in report["studies"]}
    assert (study[1]["instances"], study[1]["in_catalog"], study[1]["to_solve"]) == (2, 1, 1)
    assert study[1]["seconds"] is not None and study[1]["seconds"] >= 0
    assert (study[2]["in_catalog"], study[2]["seconds"], report["unknown"]) == (0, None, 1)
    done = cli("run", str(spec), "--catalog", str(results), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "plus 1 studies without past solve times" in done.stdout
    assert catalog.history(str(results)) == before  # the dry runs committed nothing


def test_options_that_do_not_go_together_are_refused(tmp_path):
    spec = tmp_path / "watched.toml"
    spec.write_text(SPEC)
    done = cli("run", str(spec), "--address", "tcp://127.0.0.1:1", "--workers", "2")
    assert done.returncode == 2
    assert "--address and --workers do not go together" in done.stderr
    done = cli("run", str(spec), "--backend", "threads", "--dashboard-address", "127.0.0.1:0")
    assert done.returncode == 2
    assert "--dashboard-address and --backend threads do not go together" in done.stderr
    done = cli(
        "prove", "no_k_in_row", "dims=6,7", "k=4", "--split", "1:0,6", "--check", "--wall", "5"
    )
    assert done.returncode == 2
    assert "--check and --wall do not go together" in done.stderr
