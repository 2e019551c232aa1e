"""The sharded fewest-moves search of peg solitaire (flows.shard on
solvers.frontier.sharded) across two real Dask workers of a LocalCluster, against the
one-process search and the published values, and resumed after a real SIGKILL."""

import functools
import json
import math
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from puzzlesweep.catalog import query
from puzzlesweep.cli import app
from puzzlesweep.flows.cluster import dask_cluster
from puzzlesweep.flows.shard import sharded_search
from puzzlesweep.puzzles import peg_solitaire as peg
from puzzlesweep.solvers import Limits, frontier
from puzzlesweep.solvers.frontier.sharded import ShardedRun

from .conftest import CLI

# Fewest moves over every one-vacancy start and every one-peg finish of T_n: OEIS
# A127500 (docs/families.md), G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008)
# 08.4.8; T_5's shortest solutions there take 9 moves.
A127500 = {4: 5, 5: 9, 6: 9, 7: 12}


def _all_starts(side: int):
    return peg.problem(side, list(range(peg.holes(side))), None, "min_moves")


def _layers(folder: Path) -> dict[str, int]:
    """{"t9/f3": keys, ...}: the keys of every recorded layer under a run's folder."""
    found = {}
    for path in folder.glob("t*/[fb][0-9]*.json"):
        found[f"{path.parent.name}/{path.stem}"] = json.loads(path.read_text())["keys"]
    return found


@pytest.fixture(scope="module")
def scheduler():
    with dask_cluster(None, 2, None) as (address, _, workers):
        assert workers == 2
        yield address


def _sharded(side: int, folder: Path, scheduler: str, shards: int = 2, beam=False) -> dict:
    """The sharded search of T_side over all starts; `beam` False: the layers alone."""
    verify = functools.partial(peg.verify_any_start, side)
    run = ShardedRun(_all_starts(side), str(folder), shards, beam=beam)
    return sharded_search(run, scheduler, verify)


def _agrees(side: int, folder: Path, scheduler: str) -> dict:
    """The sharded search on 2 workers gives the one-process search's and A127500's
    fewest moves, with a solution the family's verifier replays, and both workers and
    both shards took part."""
    one = frontier.solve(_all_starts(side), Limits(120))
    two = _sharded(side, folder, scheduler)
    assert one.status == two["status"] == "optimal"
    assert one.objective == two["objective"] == A127500[side]
    assert peg.verify_any_start(side, tuple(two["solution"])) == A127500[side]
    assert len(two["peak_rss"]) == 2
    made = [json.loads(p.read_text())["shards"] for p in folder.glob("t*/*[1-9].json")]
    # each shard holds keys of some layer (T_4's layers of 1 to 4 keys lie in one each)
    assert all(len(s) == 2 for s in made) and all(any(s[j] for s in made) for j in (0, 1))
    return two


@pytest.fixture(scope="module")
def t5(prefect_api, scheduler, tmp_path_factory) -> tuple[Path, dict]:
    """T_5's sharded search on 2 workers, run once: (its folder, its result)."""
    folder = tmp_path_factory.mktemp("t5")
    return folder, _agrees(5, folder, scheduler)


def test_two_workers_agree_with_one_process_and_a127500_on_t5_t6(t5, scheduler, tmp_path):
    assert t5[1]["objective"] == 9  # Bell (2008): T_5's shortest solutions take 9 moves
    _agrees(6, tmp_path, scheduler)


def test_the_beams_settle_t6_on_a_worker_and_a_rerun_reads_them(scheduler, tmp_path):
    # A127500: T_6 -> 9. Target 7 (the starts' bound) and 8 fail by complete beams,
    # 9 is met by a beam: no layer is made; a re-run reads the answer from beam.json.
    first = _sharded(6, tmp_path, scheduler, beam=True)
    assert (first["status"], first["objective"], first["bound"]) == ("optimal", 9, 9)
    assert peg.verify_any_start(6, tuple(first["solution"])) == 9
    assert first["layers"] == 0 and _layers(tmp_path) == {}
    failed = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("t[78].json"))]
    assert [f["beam"]["complete"] for f in failed] == [True, True]
    found = json.loads((tmp_path / "t9" / "beam.json").read_text())
    assert found["width"] == 1 << 14 and len(found["solution"]) == 19  # 20 pegs to 1
    again = _sharded(6, tmp_path, scheduler, beam=True)
    assert again["solution"] == first["solution"] and again["layers"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("side", [4, 7])
def test_two_workers_agree_on_t4_t7(prefect_api, scheduler, tmp_path, side):
    _agrees(side, tmp_path, scheduler)


@pytest.mark.slow
def test_one_shard_makes_the_same_layers(prefect_api, scheduler, tmp_path):
    two = _sharded(6, tmp_path / "two", scheduler)
    one = _sharded(6, tmp_path / "one", scheduler, shards=1)
    assert two["objective"] == one["objective"] == A127500[6]
    assert _layers(tmp_path / "two") == _layers(tmp_path / "one")


KILLED = """
import functools, os, signal, sys
from puzzlesweep.flows.shard import sharded_search
from puzzlesweep.puzzles import peg_solitaire as peg
from puzzlesweep.solvers.frontier.sharded import ShardedRun

folder, scheduler, after = sys.argv[1], sys.argv[2], int(sys.argv[3])
problem = peg.problem(5, list(range(15)), None, "min_moves")
seen = []

def on_layer(step, manifest):
    seen.append(step)
    if len(seen) == after:  # between two layers: this one is recorded, the next not begun
        os.kill(os.getpid(), signal.SIGKILL)

verify = functools.partial(peg.verify_any_start, 5)
sharded_search(ShardedRun(problem, folder, 2, beam=False), scheduler, verify, on_layer)
"""


def test_a_killed_search_resumes_from_its_recorded_layers(api_env, scheduler, t5, tmp_path):
    folder, after = tmp_path / "run", 20
    args = [sys.executable, "-c", KILLED, str(folder), scheduler, str(after)]
    killed = subprocess.run(args, env=api_env, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    before = _layers(folder)
    recorded = {p: p.stat().st_mtime_ns for p in folder.glob("t*/*.json")}
    assert len(before) > after  # the layers 0 of each target seeded, and `after` made

    resumed = _sharded(5, folder, scheduler)
    whole_folder, whole = t5  # the same search, never killed
    assert resumed["objective"] == whole["objective"] == A127500[5]
    assert resumed["layers"] == whole["layers"] - after  # nothing recorded was made again
    assert {p: p.stat().st_mtime_ns for p in recorded} == recorded
    assert _layers(folder) == _layers(whole_folder)


def test_a_folder_of_another_search_is_refused(tmp_path):
    from puzzlesweep.solvers.frontier import run_folder, sharded

    sharded.plan(ShardedRun(_all_starts(4), str(tmp_path), 2))
    with pytest.raises(ValueError, match="holds a search of 2 shards, not 3"):
        sharded.plan(ShardedRun(_all_starts(4), str(tmp_path), 3))
    with pytest.raises(ValueError, match=r"holds another search \(of another board"):
        sharded.plan(ShardedRun(_all_starts(5), str(tmp_path), 2))
    (tmp_path / "file").write_text("")
    for bad in ("file", "file/below"):  # a file, and a folder under a file
        with pytest.raises(ValueError, match=r"cannot be made: .*file is not a directory"):
            run_folder.check_folder(ShardedRun(_all_starts(4), str(tmp_path / bad), 2))
    assert not (tmp_path / "file").read_text()
    with pytest.raises(ValueError, match="answers min_moves"):
        ShardedRun(peg.problem(4, [0], None, "solve"), str(tmp_path), 2)


def _hold_at_once(run: ShardedRun, count: int) -> list[str]:
    """`count` threads check and lock `run`'s folder behind a barrier, as `search` does
    before its cluster starts; the holder keeps the lock until every other has tried.
    Returns each one's outcome: "held", or the message it was refused with."""
    from puzzlesweep.solvers.frontier import run_folder

    start, tried, outcome = threading.Barrier(count), threading.Barrier(count), []

    def hold() -> None:
        start.wait()
        try:
            run_folder.check_folder(run)
            with run_folder.folder_lock(run):
                outcome.append("held")
                tried.wait()
                return
        except (ValueError, OSError) as exc:
            outcome.append(str(exc))
        tried.wait()

    threads = [threading.Thread(target=hold) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(outcome)


def test_searches_of_one_folder_started_together_refuse_all_but_one(tmp_path):
    # a tester started two searches of one folder at the same instant: the loser said
    # "No such file or directory" of the folder (both renamed one partial run.json; 3 of
    # 30 rounds of three here). 30 rounds: one holds it, the others are told who does.
    for round_ in range(30):
        run = ShardedRun(_all_starts(4), str(tmp_path / f"f{round_}"), 2)
        outcome = _hold_at_once(run, 3)
        refused = [said for said in outcome if said != "held"]
        assert len(refused) == 2, outcome
        # (the holder is named once it has written its pid into the lock file)
        assert all(f"folder {run.folder} is in use by another search (" in said
                   for said in refused), outcome  # fmt: skip


def test_a_part_over_its_memory_stops_before_it_loads(tmp_path):
    from puzzlesweep.solvers.frontier import sharded

    run = ShardedRun(_all_starts(5), str(tmp_path), 2, memory=1 << 20, beam=False)
    step = sharded.plan(run)
    with pytest.raises(MemoryError, match=r"expanding .*s0.npy needs 0.03 GiB, over 0.00 GiB"):
        sharded.expand_part(run, step.target, step.side, step.d, 0)
    assert not run.layer(step.target, step.side, step.d + 1).exists()


def test_a_part_past_its_wall_time_stops_and_its_layer_is_not_recorded(tmp_path):
    # --wall reaches the parts themselves: an expansion or a merge whose wall-clock
    # deadline has passed returns None at once, and no manifest of the layer exists, so
    # a re-run redoes it; with time left, the same parts make the layer (T_6 over all
    # starts: 9 moves, A127500).
    from puzzlesweep.solvers.frontier import sharded

    run = ShardedRun(_all_starts(6), str(tmp_path), 2, beam=False)
    step = sharded.plan(run)
    assert step.kind == "expand"
    for i in (0, 1):  # an empty shard has nothing to stop
        keys = len(np.load(run.layer(step.target, step.side, step.d) / f"s{i}.npy"))
        stopped = sharded.expand_part(run, step.target, step.side, step.d, i, 0.0)
        assert stopped == (None if keys else 0), (i, keys)
    made = [sharded.expand_part(run, step.target, step.side, step.d, i) for i in (0, 1)]
    assert all(isinstance(m, int) for m in made)
    assert sharded.merge_part(run, step.target, step.side, step.d + 1, 0, 1, 0.0) is None
    assert not run.layer(step.target, step.side, step.d + 1).with_suffix(".json").exists()
    assert sharded.plan(run) == step  # the same layer is next
    merged = [sharded.merge_part(run, step.target, step.side, step.d + 1, j, 1) for j in (0, 1)]
    manifest = sharded.record(run, step, merged)
    assert manifest["keys"] == sum(m["keys"] for m in merged)
    assert sharded.plan(run) != step  # with time left the layer is made and recorded


def test_the_incumbent_is_a_solution_the_verifier_replays(tmp_path):
    # The depth-first dive that a time limit reports: on T_8 over all starts, a
    # solution from the first start (hole 1), at least 13 moves (A127500, Bell 2008).
    from puzzlesweep.solvers.frontier.depth_first import incumbent

    path = incumbent(_all_starts(8), 60.0)
    assert path is not None and path[0][2] == 0  # the first jump lands in hole 1
    assert peg.verify_any_start(8, tuple(path)) >= 13


def _search(api_env, scheduler: str, folder: Path, catalog: Path, *args: str):
    """`puzzlesweep search peg_solitaire ARGS` on the test's cluster and Prefect API."""
    command = [*CLI, "search", "peg_solitaire", *args, "--folder", str(folder)]
    command += ["--address", scheduler, "--catalog", str(catalog)]
    return subprocess.run(command, capture_output=True, text=True, env=api_env, timeout=300)


def _rows(catalog: Path) -> list[tuple]:
    sql = "SELECT start, solver, status, objective, bound, time_limit, verified FROM results "
    return query(str(catalog), sql + "ORDER BY finished_at")[1]


def test_the_search_command_writes_the_row_and_a_rerun_resumes(prefect_api, scheduler, tmp_path):
    # One instance, T_5 from hole 4, sharded on the test's two workers (the command run
    # in this process): the fewest moves the one-process search finds (9: no start of
    # T_5 does better, A127500), its row in the catalog replayed; the same command again
    # says the same and writes no second row. A catalog that cannot be written is
    # refused first.
    one = frontier.solve(peg.search(peg.Params(side=5, start=4, question="min_moves")), Limits(60))
    assert (one.status, one.objective) == ("optimal", A127500[5])
    folder, catalog = tmp_path / "t5-4", tmp_path / "catalog"
    args = ["search", "peg_solitaire", "side=5", "start=4", "--folder", str(folder)]
    args += ["--address", scheduler, "--catalog"]
    refused = CliRunner().invoke(app, [*args, "/proc/x"])  # a read-only file system
    assert refused.exit_code == 2 and "catalog /proc/x cannot be written" in refused.stderr
    assert not folder.exists()  # refused before the search made anything
    args.append(str(catalog))
    for row in ("now", "already"):  # the beams settle every target: no layer is made
        done = CliRunner().invoke(app, args)
        assert done.exit_code == 0, done.stderr
        assert re.search(r"status optimal  fewest moves 9  bound 9  0 layers made now", done.stdout)
        assert f"its row is {row} in" in done.stderr
    assert len(json.loads((folder / "t9" / "beam.json").read_text())["solution"]) == 13
    assert _rows(catalog) == [(4, "frontier-sharded", "optimal", 9, 9, None, True)]
    # each run has its row in `runs`, the first one also the results row's run id
    sql = "SELECT r.state, r.planned, r.skipped, r.optimal, r.solved, count(s.run_id) FROM runs r "
    sql += "LEFT JOIN results s USING (run_id) GROUP BY ALL ORDER BY min(r.started_at)"
    runs = [("finished", 1, 0, 1, 1, 1), ("finished", 1, 1, 0, 0, 0)]  # the re-run skipped it
    assert query(str(catalog), sql)[1] == runs


@pytest.mark.slow
def test_the_search_command_stops_at_its_wall_time_and_knows_a_start_without_goal(
    api_env, scheduler, tmp_path
):
    # T_7 from hole 4 takes 12 moves (the one-process search; benchmarks/README.md);
    # under --wall 1 no layer starts after a second: a time_limit row with the bound the
    # failed targets prove; a re-run finishes it. From hole 1 no one-peg position lies in
    # the start's position class (Bell 2008): infeasible at once, no layer made.
    folder, catalog = tmp_path / "t7-4", tmp_path / "catalog"
    stopped = _search(api_env, scheduler, folder, catalog, "side=7", "start=4", "--wall", "1")
    assert stopped.returncode == 0 and "status time_limit" in stopped.stdout, stopped.stderr
    done = _search(api_env, scheduler, folder, catalog, "side=7", "start=4")
    assert "status optimal  fewest moves 12  bound 12" in done.stdout, done.stderr
    none = _search(api_env, scheduler, tmp_path / "t7-1", catalog, "side=7", "start=1")
    assert "status infeasible  fewest moves -  bound -  0 layers" in none.stdout, none.stderr
    rows = _rows(catalog)
    assert [r[2] for r in rows] == ["time_limit", "optimal", "infeasible"]
    # the incumbent, when the dive found one in its share of the second, is replayed
    assert rows[0][3] is None or (rows[0][3] >= 12 and rows[0][6] is True)
    assert 1 <= rows[0][4] <= 12 and rows[0][5] == 1.0
    assert rows[1][3:] == (12, 12, None, True)


def test_a_side_with_one_position_of_endless_reverse_chains_is_never_grown():
    # T_9's one-peg goals walked back by reverse moves (a lone peg over a nearly empty
    # board): some make 82,022 chains, others overflow the cost sample's buffer. A
    # sample that meets a finite one first must still cost the side infinitely: a
    # `--wall 120` run chose such a backward layer at target 14 and spent 90 s in one
    # part on one goal.
    from puzzlesweep.solvers.frontier.kernels import board_keys, distinct
    from puzzlesweep.solvers.frontier.layers import sample_cost
    from puzzlesweep.solvers.frontier.problem import key_tables, move_tables, reachable_goals

    problem = reachable_goals(_all_starts(9))
    maps, tables = key_tables(problem), move_tables(problem, True)
    goals = distinct(board_keys(np.array(problem.goals, np.uint64), maps))
    costs = [sample_cost(goals[i : i + 1], 1, tables, maps) for i in range(len(goals))]
    finite = [i for i, cost in enumerate(costs) if cost < math.inf]
    assert len(goals) == 10 and 0 < len(finite) < 10, costs
    assert sorted({int(costs[i]) - 1 for i in finite}) == [82022, 142546, 195342]
    endless = next(i for i, cost in enumerate(costs) if cost == math.inf)
    assert sample_cost(goals[[finite[0], endless]], 2, tables, maps) == math.inf
