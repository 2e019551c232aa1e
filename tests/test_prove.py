"""Split proofs: parts that cover the space, bounds that combine into the known
optimum, on a real LocalCluster with real HiGHS and a real catalog; a resumed run
solves only missing parts; the certificate re-check catches tampering."""

import json
import math
import os
import re
import signal
import threading
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from deltalake import DeltaTable

from puzzlesweep import catalog, certificate, puzzles
from puzzlesweep.core import BadInput
from puzzlesweep.flows.cluster import dask_cluster
from puzzlesweep.flows.prove import run_prove, solve_part
from puzzlesweep.flows.settings import RunSettings
from puzzlesweep.isolate import Children
from puzzlesweep.proof import Proof, build, solve_one, stored
from puzzlesweep.recheck import recheck
from puzzlesweep.solvers import Limits, highs
from puzzlesweep.solvers import split as splitting

from .conftest import cli

NOK = puzzles.get("no_k_in_row")

# (dims, k, split, width, optimum): seed values and OEIS A181018 (k = 3, n×n).
KNOWN = [
    ([6, 7], 5, "0:0,5", 3, 8),
    ([4, 4], 3, "0:0,3", 2, 7),
    ([5, 5], 3, "1:0,4", 2, 9),
    ([13, 17], 5, "0:6", 3, 44),
]
SLOW = [([6, 6], 3, "0:0,5", 2, 16), ([8, 8], 3, "0:0,7", 2, 28), ([5, 5, 5], 5, "0:0,4", 3, 28)]


def split_solve(dims, k, text, width, cutoff=None, incumbent=None, solver="highs"):
    """Solve every part in this process; returns (combined, number of parts)."""
    proof = Proof("no_k_in_row", {"dims": dims, "k": k}, text, width, Limits(60), solver=solver)
    _, _, split, _ = build(proof)
    rows = [solve_one(proof, part.index, cutoff, proof.limits, "t") for part in split.parts]
    assert all(r["verified"] is not False for r in rows)
    lowers = [float(json.loads(r["subproblem"])["lower"]) for r in rows]
    objectives = [r["objective"] for r in rows if r["verified"]]
    return splitting.combine(lowers, objectives, incumbent), len(split.parts)


@pytest.mark.parametrize(
    ("dims", "k", "text", "width", "optimum"),
    [*KNOWN, *[pytest.param(*case, marks=pytest.mark.slow) for case in SLOW]],
)
def test_split_proves_the_known_optimum(dims, k, text, width, optimum):
    direct = highs.solve(NOK.model(NOK.Params(dims=dims, k=k)), Limits(60))
    assert direct.status == "optimal" and direct.objective == pytest.approx(optimum)
    combined, _ = split_solve(dims, k, text, width)
    assert combined.proven and combined.objective == optimum and combined.bound == optimum
    # With the optimum as incumbent, cutoff optimum - 1: every part is infeasible, and
    # the parts prove nothing better exists.
    combined, _ = split_solve(dims, k, text, width, cutoff=optimum - 1, incumbent=optimum)
    assert combined.proven and combined.bound >= optimum and combined.objective == optimum


def test_split_proves_with_scip_parts():
    # Seed 001: 6×7, k = 5 → 8, and A181018: 4×4, k = 3 keeps 9, removes 7.
    for dims, k, text, width, optimum in KNOWN[:2]:
        combined, parts = split_solve(dims, k, text, width, solver="scip")
        assert combined.proven and (combined.objective, combined.bound) == (optimum, optimum)
    proof = Proof("no_k_in_row", {"dims": [6, 7], "k": 5}, "0:0,5", 3, Limits(60), solver="scip")
    row = solve_one(proof, 0, None, proof.limits, "t")
    assert (row["solver"], row["solver_version"][:3]) == ("scip-split-part", "6.3")
    with pytest.raises(BadInput, match="unknown engine 'x'"):
        build(Proof("no_k_in_row", {"dims": [6, 7], "k": 5}, "0:0", 1, Limits(1), solver="x"))


def test_symmetry_keeps_one_part_per_orbit_and_coverage_is_checked():
    p = NOK.Params(dims=[6, 7, 6], k=5)
    assert len(NOK.box_symmetries((6, 7, 6))) == 16
    split, _ = NOK.split_model(p, "1:0,6", 4)
    # buckets [0,5], 6, 7, 8, 9, [10,36] per layer; layers 0 and 6 swap by reflection
    assert split.total == 36 and len(split.parts) == 21 and len(split.permutations) == 2
    assert splitting.covers(split) is None
    dropped = replace(split, parts=split.parts[:-1])
    assert "in no part" in splitting.covers(dropped)
    # the middle layer is fixed by every symmetry: nothing to drop
    middle, _ = NOK.split_model(p, "1:3", 4)
    assert len(middle.parts) == middle.total == 6
    # every symmetry maps the windows onto the windows
    windows = set(map(frozenset, NOK.windows((6, 7, 6), 5)))
    for image in NOK.box_symmetries((6, 7, 6)):
        assert {frozenset(image[c] for c in w) for w in windows} == windows


def test_part_lower_limits():
    assert splitting.part_lower("infeasible", None, None, True) == math.inf
    assert splitting.part_lower("infeasible", None, 63.0, True) == 64
    assert splitting.part_lower("time_limit", 55.2, 63.0, True) == 56
    assert splitting.part_lower("time_limit", 70.0, 63.0, True) == 64
    assert splitting.part_lower("time_limit", None, 63.0, True) == -math.inf
    assert splitting.part_lower("error", 60.0, None, True) == -math.inf
    assert splitting.combine([8, math.inf, -math.inf], [9.0]).proven is False
    assert splitting.combine([9, math.inf], [9.0]).proven is True


def test_prove_on_a_local_cluster_resumes_and_rechecks(prefect_api, tmp_path):
    results = tmp_path / "results"
    # no cutoff in the first run: every part is solved to its own optimum
    # buckets [0,0], 1, [2,7] for the outer rows 0 and 5; 9 vectors, 6 up to reflection
    proof = Proof("no_k_in_row", {"dims": [6, 7], "k": 5}, "0:0,5", 1, Limits(30), cutoff=False)
    with dask_cluster(None, 2, "127.0.0.1:0") as (address, _, _):
        settings = RunSettings(catalog=str(results), address=address)
        report = run_prove(proof, settings, probe_seconds=5)
        assert (report["status"], report["objective"], report["bound"]) == ("optimal", 8.0, 8.0)
        assert report["parts"] == 6 and report["solved"] == 6 and report["missing"] == 0
        assert recheck(str(results), proof) == []
        document = certificate.export(str(results), proof)  # the file's form, no catalog
        assert certificate.check(document) == [] and document["claim"]["objective"] == 8
        _, rows = catalog.query(
            results,
            "SELECT solver, count(*), count(subproblem), count(certificate) FROM results "
            "GROUP BY 1 ORDER BY 1",
        )
        parts = ("highs-split-part", 6, 6, 0)  # Proof's solver is highs unless told
        assert rows == [("highs", 1, 0, 0), ("highs-split", 1, 0, 1), parts]

        # A killed run lost three parts: the re-run (with the cutoff) solves those only.
        table = DeltaTable(str(results / "results"))
        lost = ", ".join(f"'{proof.key}.{i}'" for i in (0, 4, 5))  # part 3 holds the optimum
        assert table.delete(f"params_key IN ({lost})")["num_deleted_rows"] == 3
        again = run_prove(replace(proof, cutoff=True), settings)
    assert (again["stored"], again["solved"], again["status"]) == (3, 3, "optimal")
    assert recheck(str(results), proof) == []
    _, rows = catalog.query(
        results, "SELECT count(*) FROM results WHERE subproblem LIKE '%\"cutoff\":7.0%'"
    )
    assert rows == [(3,)]

    # The parts prove the optimum without the probe's bound.
    table.update_incremental()
    table.delete(f"sweep = 'prove-{proof.key}' AND solver = 'highs'")
    assert recheck(str(results), proof) == []
    # Tampering: the newest row of a part (or of the combined row) is the one that counts.
    parts, _, combined = stored(str(results), proof)
    cert = json.loads(combined["certificate"])
    (weakest,) = [p for p in cert["parts"] if p["status"] == "optimal" and p["lower"] == 8]
    part = parts[weakest["index"]]
    handle = json.loads(part["subproblem"])

    def tamper(row: dict, **changes) -> None:
        newer = {**row, **changes, "finished_at": datetime.now(UTC), "run_id": "tamper"}
        newer["params"] = {name: newer.pop(name) for name in NOK.Params.model_fields}
        assert catalog.write_batch(results, NOK.Params, [newer])

    # a lower limit that does not follow from the part's own status and bound
    tamper(part, subproblem=json.dumps({**handle, "lower": 99}))
    assert any("follows from its status and bound" in p for p in recheck(str(results), proof))
    # a weaker part than the optimal claim needs
    tamper(part, status="time_limit", bound=7.0, subproblem=json.dumps({**handle, "lower": 7}))
    assert any("the parts prove only 7" in p for p in recheck(str(results), proof))
    # a consistent lie (optimal 9 instead of 8, in the part and in the certificate):
    # only solving the part again catches it
    tamper(part, status="optimal", bound=9.0, subproblem=json.dumps({**handle, "lower": 9}))
    cert["parts"][weakest["index"]]["lower"] = 9
    tamper(combined, certificate=json.dumps(cert))
    # the part's own stored solution (8, verified) refutes it at once
    assert recheck(str(results), proof) == [
        f"part {weakest['index']} ({weakest['label']}): its own stored solution has "
        "objective 8, below the claimed lower limit 9: the part's claim is false"
    ]
    lie = {"status": "optimal", "bound": 9.0, "subproblem": json.dumps({**handle, "lower": 9})}
    tamper(part, **lie, objective=None, solution=None, verified=None)
    assert recheck(str(results), proof) == []
    [problem] = recheck(str(results), proof, resolve_seconds=30)
    # the model's start (8) when it lies in the part, else HiGHS's solution (8, optimal)
    assert re.fullmatch(
        rf"part {weakest['index']} \({weakest['label']}\): (the model's start|a solution "
        r"found by highs) has objective 8, below the claimed lower limit 9: the part's "
        r"claim is false",
        problem,
    ), problem


def test_a_part_runs_in_its_own_solver_process_and_a_killed_one_proves_nothing(tmp_path):
    # Parts are isolated as sweep instances are (puzzlesweep/isolate.py): part 9 of the seed's
    # 6×7×6 box (faces 7, 7; open for minutes) has its solver process SIGKILLed (as the
    # kernel's OOM killer would) and becomes an error row that proves nothing; the next
    # part runs in a new process and proves its lower limit (a face of at most 6 stones
    # removed cannot be: part 0 is infeasible).
    proof = Proof("no_k_in_row", {"dims": [6, 7, 6], "k": 5}, "1:0,6", 3, Limits(60))
    path = str(tmp_path / "cat")
    with Children() as children:
        children.warm(1 << 30)  # started and ready before the part is sent
        victim = children.pids()[0]
        threading.Timer(2.0, os.kill, (victim, signal.SIGKILL)).start()
        row = solve_part.fn(proof, 9, 63.0, proof.limits, "t", path, 1 << 30, children)
        assert (row["status"], row["bound"], row["solution"]) == ("error", None, None)
        assert re.fullmatch(
            r"the solver process was killed by SIGKILL \(peak memory \d+ MiB\)", row["error"]
        )
        handle = json.loads(row["subproblem"])
        assert (handle["lower"], handle["cutoff"], handle["parts"]) == ("-inf", 63.0, 15)
        row = solve_part.fn(proof, 0, 63.0, proof.limits, "t", path, 1 << 30, children)
        assert row["status"] == "infeasible" and children.pids() != [victim]
    parts, probe, combined = stored(path, proof)
    assert sorted(parts) == [0, 9] and probe is None and combined is None
    assert parts[9]["status"] == "error" and parts[9]["params_key"] == f"{proof.key}.9"
    assert json.loads(parts[0]["subproblem"])["lower"] == 64  # infeasible under cutoff 63


def test_prove_refuses_bad_input_and_writes_nothing(tmp_path):
    for params, text, width, message in [
        ({"dims": [6, 7], "k": 5}, "3:0", 3, "not an axis"),
        ({"dims": [6, 7], "k": 5}, "0:0,0", 3, "distinct"),
        ({"dims": [6, 7], "k": 5}, "0:x", 3, "must be integers"),
        ({"dims": [6, 7], "k": 5}, "0-1", 3, "must be AXIS:LAYER"),
        ({"dims": [6, 7], "k": 5}, "0:1", 0, "--width must be in 1..40"),
        ({"dims": [6, 7], "k": 0}, "0:0", 3, "k must be at least 1"),
    ]:
        with pytest.raises(BadInput, match=message):
            build(Proof("no_k_in_row", params, text, width, Limits(1)))
    with pytest.raises(BadInput, match="has no split"):
        build(Proof("domination", {"piece": "king", "rows": 3, "cols": 3}, "0:0", 1, Limits(1)))
    results = tmp_path / "r"
    for args, message in [
        (["dims=6,7", "k=5", "--split", "3:0"], "not an axis"),
        (["dims=6,7", "k=5"], "--split is required"),
        (["dims=6,7", "k=5", "--split", "tree:.", "--width", "3"], "a tree split has none"),
        (["dims=6,7", "k=5", "--split", "lookahead:\u0663"], "needs N in 1..4096"),
        (["dims=6,7", "k=5", "--split", "0:0", "--check", "--solver", "scip"], "needs --resolve"),
    ]:
        done = cli("prove", "no_k_in_row", *args, "--catalog", str(results), timeout=60)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
    assert not results.exists()
    (tmp_path / "file").write_text("")  # a catalog under a file is refused before any run
    args = ["no_k_in_row", "dims=6,7", "k=5", "--split", "1:0,6", "--catalog"]
    done = cli("prove", *args, str(tmp_path / "file" / "r"), timeout=60)
    assert done.returncode == 2 and "file is not a directory" in done.stderr, done.stderr


def test_variable_split_partitions_by_fixing_cells():
    model = NOK.model(NOK.Params(dims=[6, 7], k=5))
    split = splitting.variable_split([17, 24])  # two middle cells: 4 parts
    assert [p.label for p in split.parts] == [
        "x17=0 x24=0",
        "x17=0 x24=1",
        "x17=1 x24=0",
        "x17=1 x24=1",
    ]
    lowers, objectives = [], []
    for part in split.parts:
        result = highs.solve(splitting.restrict(model, split, part), Limits(30))
        lowers.append(splitting.part_lower(result.status, result.bound, None, True))
        objectives.append(result.objective)
    combined = splitting.combine(lowers, objectives)
    assert combined.proven and combined.objective == pytest.approx(8) and combined.bound == 8
    assert model.num_rows == NOK.model(NOK.Params(dims=[6, 7], k=5)).num_rows  # unchanged


def test_prove_runs_are_in_runs_and_a_settled_attempt_starts_nothing(api_env, tmp_path):
    # A second prove wrote a second combined row and started a cluster (16 s) though
    # every part was in the catalog; prove runs were missing from `runs`. A successful
    # prove ends without tracebacks: its shutdown printed Dask's "Failed to communicate
    # with scheduler during heartbeat" with CommClosedError tracebacks, and Prefect
    # "Failed to initialize plugins: deadlock detected by _ModuleLock(...)" per worker.
    import subprocess

    from .conftest import CLI, ROOT

    results = str(tmp_path / "results")
    args = [*CLI, "prove", "no_k_in_row", "dims=6,7", "k=5", "--split", "0:0,5", "--width", "1"]
    args += ["--solver", "highs", "--catalog", results, "--workers", "2"]
    args += ["--dashboard-address", "127.0.0.1:0"]
    first = subprocess.run(args, capture_output=True, text=True, env=api_env, cwd=ROOT)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "status optimal  objective 8" in first.stdout  # seed value: 6x7, k = 5
    assert "Dask scheduler" in first.stderr
    for noise in ("Traceback", "CommClosedError", "Failed to communicate", "Failed to initial"):
        assert noise not in first.stdout + first.stderr, first.stderr[-3000:]
    # the settled attempt is exported as a certificate file, re-checked from it alone
    path = str(tmp_path / "cert.json")
    again = subprocess.run(
        [*args, "--certificate", path], capture_output=True, text=True, env=api_env, cwd=ROOT
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Dask scheduler" not in again.stderr and "nothing to solve" in again.stderr
    assert f"certificate written to {path}" in again.stdout
    assert certificate.check(certificate.load(path)) == []
    assert "status optimal  objective 8" in again.stdout and "0 solved now" in again.stdout
    _, rows = catalog.query(results, "SELECT solver, count(*) FROM results GROUP BY 1 ORDER BY 1")
    assert rows == [("highs-split", 1), ("highs-split-part", 6)]  # 6 parts up to symmetry
    _, runs = catalog.query(
        results, "SELECT sweep, state, planned, skipped, solved, optimal + infeasible FROM runs"
    )
    [(sweep, state, planned, skipped, solved, closed)] = runs
    assert sweep.startswith("prove-") and state == "finished"
    assert (planned, skipped, solved, closed) == (6, 0, 6, 6)  # closed: optimal or cut off


def test_prove_cluster_workers_drop_closed_heartbeats_and_import_prefect_first():
    # prove started its cluster without the sweep's worker set-up, so a worker's
    # heartbeat to the closed scheduler printed a 30-line CommClosedError traceback
    # into a successful prove's terminal (issue 26, item 9). Its parts are Prefect task
    # runs, so its workers import Prefect first; a sweep's run no Prefect at all.
    from distributed import Client

    def readied() -> tuple[bool, bool]:
        import logging
        import sys

        from puzzlesweep.flows.cluster import ClosedHeartbeat

        filters = logging.getLogger("distributed.worker").filters
        quiet = any(isinstance(f, ClosedHeartbeat) for f in filters)
        return quiet, "prefect.client.schemas.objects" in sys.modules

    for tasks in (True, False):
        cluster = dask_cluster(workers=2, dashboard_address=None, prefect_tasks=tasks)
        with cluster as (scheduler, _, found), Client(scheduler) as client:
            answers = client.run(readied)
        assert found == 2 and list(answers.values()) == [(True, tasks), (True, tasks)]


@pytest.mark.slow
@pytest.mark.parametrize("signum", [2, 15])  # SIGINT, SIGTERM
def test_a_signalled_prove_ends_its_row_interrupted_and_a_rerun_goes_on(api_env, tmp_path, signum):
    # SIGTERM left the row `running` (Prefect's bridge re-sent it to a default handler).
    import os
    import subprocess
    import time

    from .conftest import CLI, ROOT

    results = str(tmp_path / "results")
    args = [*CLI, "prove", "no_k_in_row", "dims=6,7,6", "k=5", "--split", "1:0,6"]
    args += ["--width", "3", "--time-limit", "4", "--catalog", results, "--workers", "1"]
    args += ["--dashboard-address", "127.0.0.1:0"]
    process = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=api_env, cwd=ROOT)
    for _ in range(600):  # until the first part's row is in the catalog (at most 5 min)
        time.sleep(0.5)
        if (
            catalog.files(results)
            and catalog.query(results, "SELECT count(*) FROM results")[1][0][0]
        ):
            break
    os.kill(process.pid, signum)
    _, stderr = process.communicate(timeout=120)
    name = "SIGTERM" if signum == 15 else "Ctrl-C"
    assert process.returncode == 128 + signum, stderr[-2000:]
    assert stderr.strip().endswith(
        f"error: {name}: the proof stopped; finished parts are kept, run it again to go on"
    )
    assert "Crash detected" not in stderr and "Traceback" not in stderr  # one line, no noise
    _, [(state, solved)] = catalog.query(results, "SELECT state, solved FROM runs")
    _, [(kept,)] = catalog.query(results, "SELECT count(*) FROM results")
    assert state == "interrupted" and solved == kept >= 1
