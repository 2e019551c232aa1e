"""SCIP as a second MIP engine, `auto`, and exact counts of optimal solutions."""

import json
import math
import time

import pytest

from puzzlesweep import puzzles
from puzzlesweep.core import make_params
from puzzlesweep.flows.spec import parse
from puzzlesweep.puzzles import Instance
from puzzlesweep.solve import resolve_solver, solve_instance
from puzzlesweep.solvers import Limits, scip
from tests.conftest import cli, limit_held
from tests.test_solvers import knapsack


def test_scip_proves_a_small_optimum():
    result = scip.solve(knapsack(), Limits(10))
    # Chvátal's constraints over binaries: -9 at a = b = 1, c = 0 (tests/test_solvers.py)
    assert (result.status, result.objective, result.bound, result.gap) == ("optimal", -9, -9, 0)
    assert [round(v) for v in result.solution] == [1, 1, 0]
    assert result.solver == "scip" and "SCIP 10" in result.solver_version


# SCIP's infeasible report is checked beside HiGHS's in test_solvers.py.


def test_scip_time_limit_keeps_a_started_incumbent_and_an_integral_bound():
    from puzzlesweep.puzzles import no_k_in_row

    p = no_k_in_row.Params(dims=[6, 7, 6], k=5)
    model = no_k_in_row.model(p)  # the periodic start: 68 removals (module docstring)
    result = scip.solve(model, Limits(time_limit=3))
    assert result.status == "time_limit" and result.extra == {"start_used": True}
    # Seed 001: 64 found without proof; 63 is feasible (tests/test_families.py); the
    # LP bound is 50.4 (x = 0.2 everywhere) and the sub-box cuts give at least 54.
    assert 63 <= result.objective <= 68 and 54 <= result.bound <= 63
    assert result.bound == math.ceil(result.bound) and result.objective.is_integer()
    assert limit_held(result.seconds, 3)


def test_scip_node_limit_and_refused_options():
    from puzzlesweep.puzzles import domination

    model = domination.model(domination.Params(rows=14, cols=14))
    result = scip.solve(model, Limits(60, node_limit=1))
    assert result.status == "node_limit" and result.nodes == 1
    # 28.92 is the LP bound of knights 14×14 (benchmarks/README.md): its ceiling or more
    assert 29 <= result.bound <= 32 <= result.objective
    model.scip_options["no/such/parameter"] = 1
    refused = scip.solve(model, Limits(10))
    assert refused.status == "error" and "no/such/parameter" in refused.message


def test_a_refused_start_is_reported_unused():
    m = knapsack()
    m.start = [1.0, 1.0, 1.0]  # breaks 3a + 4b + 2c <= 8
    result = scip.solve(m, Limits(10))
    assert result.extra == {"start_used": False} and result.objective == -9
    m.start = [1.0]  # the wrong length: refused, not raised
    assert scip.solve(m, Limits(10)).extra == {"start_used": False}


def knights(n: int) -> Instance:
    return Instance(
        "domination", make_params(puzzles.get("domination").Params, {"rows": n, "cols": n})
    )


def test_count_reproduces_a006076():
    # OEIS A006076, the minimum knight covers of the n×n board distinct up to its 8
    # symmetries, n = 1..10 (https://oeis.org/A006076); the minima are A006075.
    a006076 = [1, 1, 2, 3, 8, 23, 3, 1, 1, 2]
    a006075 = [1, 4, 4, 4, 5, 8, 10, 12, 14, 16]
    rows = [solve_instance(knights(n), "auto", Limits(60), count=True) for n in range(1, 11)]
    assert [row["objective"] for row in rows] == a006075
    assert [row["inequivalent"] for row in rows] == a006076
    # all optimal covers (not up to symmetry), counted by SCIP; n <= 6 are checked by
    # the second method below
    assert [row["solutions"] for row in rows] == [1, 1, 8, 9, 47, 127, 10, 2, 2, 4]


# Every counted family on small boards: SCIP's count with Burnside's lemma against the
# family's own enumeration of optima and their least images (`exhaustive_count`).
SMALL = [
    ("domination", {"rows": 5, "cols": 5}),
    ("domination", {"rows": 6, "cols": 6}),
    ("domination", {"rows": 3, "cols": 5}),
    ("domination", {"piece": "king", "rows": 4, "cols": 5}),
    ("domination", {"piece": "queen", "rows": 5, "cols": 5}),
    ("domination", {"rows": 4, "cols": 4, "variant": "total"}),
    ("no_k_in_row", {"dims": [4, 4], "k": 3}),
    ("no_k_in_row", {"dims": [4, 5], "k": 3}),
    ("no_k_in_row", {"dims": [2, 3, 3], "k": 2}),
    ("monochromatic_lines", {"n": 3, "d": 2, "counts": [5, 4]}),
    ("monochromatic_lines", {"n": 3, "d": 2, "counts": [6, 3]}),
    ("monochromatic_lines", {"n": 2, "d": 3, "counts": [4, 4]}),
]


@pytest.mark.parametrize(("family", "raw"), SMALL)
def test_second_method_agrees_on_the_counts(family, raw):
    module = puzzles.get(family)
    params = make_params(module.Params, raw)
    row = solve_instance(Instance(family, params), "scip", Limits(60), count=True)
    assert row["status"] == "optimal" and row["verified"]
    assert (row["solutions"], row["inequivalent"]) == module.exhaustive_count(params)


def test_known_counts_by_hand():
    # Tic-tac-toe: 16 drawn full boards (5 X, 4 O, no line of one mark), 3 up to the
    # square's 8 symmetries (Wikipedia, "Tic-tac-toe", Combinatorics: 958 terminal
    # positions, 16 of them draws; 138 up to symmetry, 3 of them draws). 3×3 with k = 3:
    # removing either diagonal hits all 8 lines, and nothing smaller does: 2, one orbit.
    lines = puzzles.get("monochromatic_lines")
    p = lines.Params(n=3, d=2, counts=[5, 4])
    assert lines.exhaustive_count(p) == (16, 3)
    nok = puzzles.get("no_k_in_row")
    assert nok.exhaustive_count(nok.Params(dims=[3, 3], k=3)) == (2, 1)


def test_burnside_rejects_permutations_that_are_not_a_group():
    from puzzlesweep.puzzles import domination

    # 6×6: 127 optimal covers of 8 knights, 3 of them fixed by a quarter turn (measured:
    # {identity, quarter turn} gives (127 + 3) / 2 = 65). The identity and the quarter
    # turn twice are no group: Burnside's sum 133 is not divisible by 3.
    p = domination.Params(rows=6, cols=6)
    quarter = domination.symmetries(p)[5]
    with pytest.raises(ValueError, match="133 is not divisible by the group order 3"):
        scip.count(domination.model(p), 8, [list(range(36)), quarter, quarter], Limits(10))


def bishops(**raw) -> Instance:
    return Instance(
        "domination",
        make_params(puzzles.get("domination").Params, {"piece": "bishop", "rows": 4, **raw}),
    )


def test_bishop_counts_are_not_doubled_by_scip_probing():
    # Bishops on 4×4 (issue 25, an independent enumeration, and the family's own
    # `exhaustive_count`): 4 bishops dominate; 25 minimum dominating sets, 5 up to the
    # square's 8 symmetries, whose fixed sets are 25, 1, 5, 5, 1, 1, 1, 1 (sum 40 = 8·5).
    # Total domination of the same board: 1 set, 1 class. SCIP's probing in presolve
    # counted one symmetry's fixed set twice (sum 41, no orbit count at all).
    domination = puzzles.get("domination")
    for instance, counts in [
        (bishops(cols=4), (25, 5)),
        (bishops(cols=4, variant="total"), (1, 1)),
    ]:
        row = solve_instance(instance, "scip", Limits(60), count=True)
        assert (row["status"], row["objective"], row["error"]) == ("optimal", 4, None)
        assert (row["solutions"], row["inequivalent"]) == counts
        assert domination.exhaustive_count(instance.params) == counts
    params = bishops(cols=4).params
    model = domination.model(params)
    fixed = [scip._count_once(model, 4, g, 60) for g in domination.symmetries(params)]
    assert sorted(fixed) == sorted([25, 1, 5, 5, 1, 1, 1, 1])


def test_a_failed_count_keeps_the_optimum_and_nulls_only_the_counts(monkeypatch):
    from puzzlesweep.puzzles import domination

    # Knights 6×6 with a "group" of the identity and the quarter turn twice (no group:
    # Burnside's sum 127 + 3 + 3 = 133 is not divisible by 3) makes the count fail; the
    # optimum, 8 knights (A006075(6)), its verified cover and bound stay in the row.
    group = domination.symmetries

    def not_a_group(params):
        quarter = group(params)[5]
        return [list(range(36)), quarter, quarter]

    monkeypatch.setattr(domination, "symmetries", not_a_group)
    row = solve_instance(knights(6), "highs", Limits(60), count=True)
    assert (row["status"], row["objective"], row["bound"], row["verified"]) == (
        "optimal",
        8,
        8,
        True,
    )
    assert row["solution"] and row["solutions"] is None and row["inequivalent"] is None
    assert row["error"] == "count: Burnside's sum 133 is not divisible by the group order 3"


def test_a_count_stopped_at_its_limit_keeps_the_optimum_and_its_own_seconds():
    # docs/families.md: 4^3 with (32, 32) -> 0 monochromatic lines. The optimum is
    # found in hundredths of a second; counting its optima takes more than 20 s here, so
    # a 5 s count stops at its limit. The count runs on its own clock after the solve:
    # solve_seconds is the solve's alone, well under the count's 5 s.
    lines = puzzles.get("monochromatic_lines")
    params = make_params(lines.Params, {"n": 4, "d": 3, "counts": [32, 32]})
    row = solve_instance(Instance(lines.NAME, params), "scip", Limits(5), count=True)
    assert (row["status"], row["objective"], row["verified"]) == ("optimal", 0, True)
    assert (row["solutions"], row["inequivalent"]) == (None, None)
    assert row["error"].startswith("count: stopped at the time limit after")
    assert row["solve_seconds"] < 5


def test_auto_picks_an_engine_per_size_and_the_row_names_it():
    assert resolve_solver(knights(6), "auto") == "highs"
    assert resolve_solver(knights(14), "auto") == "scip"
    assert resolve_solver(knights(14), "highs") == "highs"
    row = solve_instance(knights(8), "auto", Limits(30))
    assert (row["solver"], row["objective"]) == ("highs", 12)  # A006075(8) = 12


def test_cli_count_in_json_and_a_family_that_cannot_count():
    done = cli("solve", "domination", "rows=6", "cols=6", "--count", "--json")
    shown = json.loads(done.stdout)
    # A006075(6) = 8 knights, A006076(6) = 23 covers up to symmetry, 127 in all
    assert (shown["objective"], shown["solutions"], shown["inequivalent"]) == (8, 127, 23)
    assert shown["solver"] == "highs"  # auto on 36 squares
    done = cli("solve", "peg_solitaire", "side=4", "start=2", "--count")
    assert done.returncode == 2 and "counting optima is for the MIP families" in done.stderr
    done = cli("solve", "domination", "rows=5", "cols=5", "--solver", "scip", "--json")
    assert json.loads(done.stdout)["solver"] == "scip" and json.loads(done.stdout)["objective"] == 5


def test_a_spec_resolves_auto_per_instance_and_asks_for_counts():
    sweep = parse(
        'name = "k"\n[[study]]\nfamily = "domination"\ncount = true\n'
        '[study.grid]\nrows = [8, 14]\ncols = "=rows"\n'
    )
    assert [(job.solver, job.count) for job in sweep.jobs] == [("highs", True), ("scip", True)]


@pytest.mark.slow
def test_no_three_in_a_row_9x9_removes_39():
    # OEIS A181018(9) = 42 stones kept on 9×9 with no 3 in a row (https://oeis.org/A181018;
    # docs/families.md lists n = 1..9): 81 - 42 = 39 removed. Proven by SCIP in 10.1 s (auto
    # table, benchmarks/README.md), by HiGHS in 39.1 s.
    nok = puzzles.get("no_k_in_row")
    p = nok.Params(dims=[9, 9], k=3)
    assert nok.auto_solver(p) == "scip"
    result = scip.solve(nok.model(p), Limits(600))
    assert (result.status, result.objective, result.bound) == ("optimal", 39, 39)


@pytest.mark.parametrize("engine", ["scip", "highs"])
def test_a_solve_leaves_the_other_threads_running(engine):
    # A Dask worker solves a part in a thread beside its event loop; a solve holding the
    # GIL stops the worker's heartbeats, and the scheduler restarts a worker in the middle
    # of a long part. The main thread must keep running while the engine works: 1 beat
    # with SCIP's optimize() (the GIL held), hundreds with optimizeNogil().
    import threading

    from puzzlesweep.puzzles import domination
    from puzzlesweep.solvers import engines

    model = domination.model(domination.Params(rows=10, cols=10))
    results = []
    solver = threading.Thread(
        target=lambda: results.append(engines.module(engine, "optimum").solve(model, Limits(600)))
    )
    beats = 0
    solver.start()
    while solver.is_alive():
        time.sleep(0.001)
        beats += 1
    # OEIS A006075(10) = 16 knights dominate the 10×10 board
    assert (results[0].status, results[0].objective) == ("optimal", 16)
    assert beats >= 10


@pytest.mark.slow
@pytest.mark.parametrize("n", range(12, 18))
def test_scip_proves_knights_12_to_17(n):
    # OEIS A006075 (https://oeis.org/A006075): 24, 28, 32, 36, 40, 46 for n = 12..17;
    # SCIP proved 14, 15, 16 in 7.9, 16.7 and 91.6 s (knights_bench.py, benchmarks/README.md).
    a006075 = [24, 28, 32, 36, 40, 46]
    from puzzlesweep.puzzles import domination

    result = scip.solve(domination.model(domination.Params(rows=n, cols=n)), Limits(2400))
    assert (result.status, result.objective, result.bound) == ("optimal",) + (a006075[n - 12],) * 2


def test_region_cuts_keep_every_optimal_cover():
    from puzzlesweep.puzzles import domination
    from puzzlesweep.solvers import highs, mip

    # On by default from 14×14 for knights: 196 cover rows and 28 region rows, which the
    # family states with their small MIPs and the engine proves (no engine runs in it).
    model = domination.model(domination.Params(rows=14, cols=14))
    assert (model.num_rows, len(model.pending)) == (196, 28)
    settled = mip.settled(model, highs.optimum)
    assert (settled.num_rows, settled.pending) == (196 + 28, [])
    # the small MIPs' optima: a 3×3 corner needs 4 knights, a border strip 3 deep 10
    assert (min(settled.row_lower[196:]), max(settled.row_lower[196:])) == (4.0, 10.0)
    assert domination.model(domination.Params(rows=13, cols=13)).pending == []
    # Valid cuts remove no solution: with them, 6×6 still has A006076's 23 classes
    # of 127 optimal covers of 8 knights (OEIS A006075(6) = 8).
    p = domination.Params(rows=6, cols=6)
    found = scip.count(domination.model(p, regions=True), 8, domination.symmetries(p))
    assert (found.solutions, found.inequivalent) == (127, 23)


#: A child that ignores SIGINT (as a process started in the background does), solves the
#: open 6×7×6 box (k = 5) with SCIP for 4 s and prints its status and seconds.
DEAF_CHILD = """
import json, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
from puzzlesweep.puzzles import no_k_in_row
from puzzlesweep.solvers import Limits, scip
model = no_k_in_row.model(no_k_in_row.Params(dims=(6, 7, 6), k=5))
print("solving", flush=True)
result = scip.solve(model, Limits(4))
print(json.dumps([result.status, result.seconds]), flush=True)
"""


def test_a_ctrl_c_sent_to_the_run_does_not_cut_a_scip_solve_short():
    import signal
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", DEAF_CHILD], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "solving\n"
    for _ in range(3):  # SCIP's own handler (misc/catchctrlc) would stop at the first
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
    status, seconds = json.loads(child.stdout.readline())
    assert child.wait(60) == 0
    # The solve ran to its 4 s limit (a lower limit: no machine is faster than the clock).
    assert status == "time_limit" and seconds >= 3.9
