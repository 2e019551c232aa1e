"""The Merson-region bounds that prune the fewest-moves search never exceed the moves
still needed, so the search's answer does not depend on whether its depth-first dive
found an incumbent first (under load, or while a cold numba cache compiles, it does
not); the forward bound is consistent (a move lowers it by one at most); and several
engines compiling one cold cache at once give the known answers."""

import json
import math
import os
import random
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from puzzlesweep.puzzles import peg_solitaire
from puzzlesweep.puzzles.peg_solitaire import engine
from puzzlesweep.solvers import Limits, SolverResult, frontier
from puzzlesweep.solvers.frontier import LayeredProblem, moves
from puzzlesweep.solvers.frontier.layers import Budget, chains
from puzzlesweep.solvers.frontier.problem import (
    MEMORY,
    bound_of,
    hitting_sets,
    merson_regions,
    move_tables,
    prune_table,
    reachable_goals,
    token_classes,
)
from tests.conftest import ROOT


def _moves_to_goal(problem: LayeredProblem) -> dict[int, int]:
    """The fewest moves from every board of `problem` to one of its goals (None-free:
    boards that reach no goal are left out), by a dynamic programme over the boards in
    order of token count (a move removes tokens), in plain Python: a second method."""
    tables = move_tables(problem, False)
    goals, found = set(problem.goals), {}
    for board in sorted(range(1 << problem.size), key=int.bit_count):
        if board in goals:
            found[board] = 0
            continue
        best = min((found[c] + 1 for c, _ in chains(board, tables) if c in found), default=None)
        if best is not None:
            found[board] = best
    return found


def _moves_from_start(problem: LayeredProblem, start: int) -> dict[int, int]:
    """The fewest moves from `start` to every board it reaches (breadth first)."""
    tables, found, layer = move_tables(problem, False), {start: 0}, [start]
    while layer:
        following = []
        for board in layer:
            for child, _ in chains(board, tables):
                if child not in found:
                    found[child] = found[board] + 1
                    following.append(child)
        layer = following
    return found


@pytest.mark.parametrize("side", [4, 5])
def test_region_bounds_never_exceed_the_moves_still_needed(side):
    # Every board of T_4 and T_5 (one peg left anywhere): the forward bound is at most
    # its fewest moves to a goal; from starts 1, 2 and 4, the backward bound of every
    # board reached is at most its fewest moves from the start. The pairs of cells
    # along an edge overlap from T_5 on: their sum as integers (not their union) gave
    # T_5 from hole 2 a backward bound above the truth.
    everything = engine.problem(side, list(range(side * (side + 1) // 2)), None, "min_moves")
    forward = prune_table(everything, 1)
    to_goal = _moves_to_goal(everything)
    assert all(bound_of(board, forward) <= d for board, d in to_goal.items())
    # A127500 (G. I. Bell, JIS 11 (2008) 08.4.8): T_4 -> 5, T_5 -> 9 over all starts
    starts = [engine.start_board(side, hole) for hole in range(side * (side + 1) // 2)]
    assert min(to_goal[s] for s in starts if s in to_goal) == {4: 5, 5: 9}[side]
    for hole in (0, 1, 3):
        one = engine.problem(side, [hole], None, "min_moves")
        backward = prune_table(one, 2)
        reached = _moves_from_start(one, one.starts[0])
        assert all(bound_of(board, backward) <= d for board, d in reached.items()), hole


@pytest.mark.parametrize("side", [5, 6, 7, 8, 10])
def test_a_move_lowers_the_forward_region_bound_by_at_most_one(side):
    # The forward bound is consistent, h(child) >= h(parent) - 1: a region full at a
    # move boundary is first changed by a jump that starts in it (no jump from outside
    # over it lands outside; a full region has no empty cell to land on), and only the
    # first jump of a move can be that jump (a later one starts where the one before
    # landed: a cell empty before, so outside every region still full); a packing of
    # disjoint regions holds the move's first cell at most once. The packing of
    # `regions_bound` is greedy, a largest one on the triangle (each edge's pairs in
    # order along it). So a target's pruned search keeps exactly the positions of true
    # distance d and bound <= L - d. Checked on every move of 400 random boards, over
    # all starts and finishes and from one start (`less` differs between them).
    holes = side * (side + 1) // 2
    rng = random.Random(side)
    checked = drops = 0
    for starts in (list(range(holes)), [1]):
        problem = engine.problem(side, starts, None, "min_moves")
        prune, tables = prune_table(problem, 1), move_tables(problem, False)
        for _ in range(400):
            density = rng.uniform(0.3, 0.95)
            board = sum(1 << x for x in range(holes) if rng.random() < density)
            h = bound_of(board, prune)
            for child, _ in chains(board, tables):
                assert bound_of(child, prune) >= h - 1, (board, child)
                checked += 1
                drops += bound_of(child, prune) == h - 1
    assert checked > 1000 and drops > 100  # the bound does fall by one, never by two


def test_the_token_classes_bound_the_moves_left():
    # A jump moves a peg two holes along a line, so a peg keeps its class (row mod 2,
    # column mod 2) and jumps only pegs of the three other classes. The relaxed game on
    # the classes (`kernels.classes_bound`) stays admissible on every board of T_4 and
    # T_5 (exact fewest moves to one peg anywhere, by the dynamic programme above), is
    # above the regions' bound on 262 and 13,920 of them, and says 64 (no finish) only
    # on boards that have none: 12 and 69 of them.
    for side in range(4, 11):
        places, rules = peg_solitaire.geometry(side)
        parity = {}
        for hole, (row, col) in enumerate(places):
            parity[row % 2, col % 2] = parity.get((row % 2, col % 2), 0) | 1 << hole
        assert token_classes(np.array(rules), len(places)) == sorted(parity.values())
    for side, lifted, dead in ((4, 262, 12), (5, 13920, 69)):
        holes = side * (side + 1) // 2
        everything = engine.problem(side, list(range(holes)), None, "min_moves")
        regions = prune_table(replace(everything, classes=False, tables={}), 1)
        both = prune_table(everything, 1)
        to_goal = _moves_to_goal(everything)
        assert all(bound_of(board, both) <= d for board, d in to_goal.items())
        assert sum(bound_of(b, both) > bound_of(b, regions) for b in to_goal) == lifted
        assert sum(bound_of(b, both) == 64 for b in range(1 << holes)) == dead
    # the last peg on hole 0 (class (0, 0)): the last move is made by that class, which
    # lifts the bound over "anywhere" on 8 of the 42 boards of T_4 that finish there
    anywhere = prune_table(engine.problem(4, list(range(10)), None, "min_moves"), 1)
    one = engine.problem(4, list(range(10)), 0, "min_moves")
    to_zero, there = _moves_to_goal(one), prune_table(one, 1)
    assert all(bound_of(board, there) <= d for board, d in to_zero.items())
    assert sum(bound_of(b, there) > bound_of(b, anywhere) for b in to_zero) == 8
    # a rule that jumps a cell of the mover's own class leaves no classes to count
    assert token_classes(np.array([(0, 1, 2), (1, 0, 2)]), 3) == []


def test_stars_of_the_triangle_raise_the_bound_at_the_start():
    # The 7-hole hexagons whose centre lies two holes off every edge: 1 on T_7 (hole 19
    # its centre), 3 on T_8, 6 on T_9, 10 on T_10; the six of T_9 all meet two cells
    # (no cell lies in all six), so a full board needs two moves for them. Over all
    # starts the bound at the start never exceeds the fewest moves of A127500 (G. I.
    # Bell, JIS 11 (2008) 08.4.8: 12, 13, 16, 18 on T_7..T_10), and no one-peg board
    # has a bound above 0 (with consistency, below, the bound is admissible).
    for side, count, low, high in ((7, 1, 8, 9), (8, 3, 11, 12), (9, 6, 12, 13), (10, 10, 16, 17)):
        problem = engine.problem(side, list(range(side * (side + 1) // 2)), None, "min_moves")
        _, pairs, stars = merson_regions(problem.rules, problem.size)
        assert len(stars) == count and all(star.bit_count() == 7 for star in stars)
        assert len(pairs) == 3 * (side - 3)  # adjacent non-corner holes along each edge
        prune = prune_table(problem, 1)
        assert {bound_of(s, prune) for s in problem.starts} == {low, high}
        assert all(bound_of(g, prune) == 0 for g in problem.goals)
    assert hitting_sets(stars[:1], problem.size)[1] == 1
    nine = engine.problem(9, list(range(45)), None, "min_moves")
    stars = merson_regions(nine.rules, nine.size)[2]
    assert hitting_sets(stars, nine.size)[(1 << 6) - 1] == 2


def test_fewest_moves_without_an_incumbent_on_a_line_of_five():
    # The warm-up problem: a token on cell 0 jumps over 1 into 2 and on over 3 into 4,
    # one move. With no incumbent from the dive (its share of the time ran out while
    # the kernels compiled), the search itself must find it at target 1; the bound
    # from a sum of overlapping pairs made it miss it and then fail at target 2 with
    # "the path has 1 moves, the layers 0 + 1, target 2".
    rules = [(0, 1, 2), (1, 2, 3), (2, 3, 4), (2, 1, 0), (3, 2, 1), (4, 3, 2)]
    line = LayeredProblem(5, np.array(rules), np.array([[0, 1, 2, 3, 4]]), (0b01011,), (16,))
    result = SolverResult(status="error")
    budget = Budget(Limits(60), MEMORY)
    assert moves._attempt(line, budget, result, 1, {}) is True
    assert (result.status, result.objective, result.solution) == (
        "optimal",
        1,
        [(0, 1, 2), (2, 3, 4)],
    )


SOLVE_T5 = """
import json, sys
from puzzlesweep.puzzles import Instance, peg_solitaire
from puzzlesweep.core import make_params
from puzzlesweep.solve import solve_instance
from puzzlesweep.solvers import Limits
rows = []
for start in (1, 2, 4):
    p = make_params(peg_solitaire.Params, {"side": 5, "start": start, "question": "min_moves"})
    row = solve_instance(Instance("peg_solitaire", p), "frontier", Limits(600))
    rows.append([start, row["status"], row["objective"], row["verified"], row["error"]])
print(json.dumps(rows))
"""


@pytest.mark.slow
def test_engines_compiling_one_cold_cache_at_once_give_the_known_answers(tmp_path):
    # Three processes start at once on an empty numba cache (each compiles the kernels
    # and writes the same cache files), each solving T_5 from holes 1, 2 and 4: fewest
    # moves 10, 10 and 9 (the dynamic programme above; A127500's 9 for T_5 is hole 4's).
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", SOLVE_T5], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    answers = [json.loads(run.communicate(timeout=1800)[0]) for run in runs]
    expected = [[1, "optimal", 10, True, None], [2, "optimal", 10, True, None]]
    expected.append([4, "optimal", 9, True, None])
    assert answers == [expected] * 3
    assert any((tmp_path / "numba").rglob("*.nbi"))  # the cache was written


def test_the_backward_side_starts_from_the_goals_of_the_start_class():
    # G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008) 08.4.8: the jumps
    # keep the position class; on T_8 the one-peg boards of hole 5's class are the
    # holes 1, 5, 7, 10, ... (every third hole along each row, by hand as in
    # test_position_classes_of_the_triangle of test_peg_engine.py), 12 of 36.
    one = reachable_goals(engine.problem(8, [4], None, "min_moves"))
    holes = [g.bit_length() for g in one.goals]
    assert holes == [1, 5, 7, 10, 13, 17, 20, 22, 25, 28, 31, 34]
    everything = engine.problem(8, list(range(36)), None, "min_moves")
    assert reachable_goals(everything) is everything  # every class has a start


@pytest.mark.parametrize("depth", [2, 3])
def test_looking_several_layers_ahead_finds_a_solution_or_proves_there_is_none(depth):
    # T_6 from the corner: 10 moves, none of 9 (test_peg_engine.py's values recorded
    # from the earlier numpy engine). The last `depth` layers looked up at once from
    # the whole of the layer before: a common position at target 10, none at 9.
    problem = reachable_goals(engine.problem(6, [0], None, "min_moves"))
    for target, found in ((9, False), (10, True)):
        budget = Budget(Limits(60), MEMORY)
        forward = moves._Side(problem, False, target)
        backward = moves._Side(problem, True, target)
        while len(forward.levels) - 1 + len(backward.levels) - 1 < target - depth:
            forward.levels.append(moves._grow(forward, backward, budget, 0)[0])
        ahead = moves._ahead(forward, backward, budget, 1.0, depth)
        assert (ahead is not None) == found
        if found:
            key, d, chunks = ahead
            assert len(chunks) == depth - 1 and len(forward.levels) - 1 + depth + d == target


def test_the_goals_of_t9_are_never_expanded_backward():
    # T_9 over all starts: a lone peg walking back over an empty board of 45 holes has
    # more chains of reverse jumps than the cost sample's buffer holds (more than a
    # million), so the search grows the forward side alone, pruned by the regions.
    # Also at target 12, where the bound prunes nearly all of those chains after they are
    # made: the sample counts the children made, not those kept (counting the kept ones,
    # no buffer overflowed, and sampling the 45 goals took 31 s of CPU per look).
    problem = engine.problem(9, list(range(45)), None, "min_moves")
    for target in (12, 15):
        forward = moves._Side(problem, False, target)
        backward = moves._Side(problem, True, target)
        assert backward.cost() == math.inf and forward.cost() < math.inf


def _fewest_over_all_starts(side: int, stars: bool) -> tuple[str, float, dict]:
    problem = engine.problem(side, list(range(side * (side + 1) // 2)), None, "min_moves")
    result = frontier.solve(replace(problem, stars=stars, tables={}), Limits(600))
    assert peg_solitaire.verify_any_start(side, tuple(result.solution)) == result.objective
    return result.status, result.objective, result.extra["attempts"]


@pytest.mark.parametrize("side", [4, 5, 6])
def test_fewest_moves_over_all_starts_with_and_without_the_stars(side):
    # OEIS A127500 (G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008)
    # 08.4.8): T_4 -> 5, T_5 -> 9, T_6 -> 9 over every one-vacancy start and one-peg
    # finish; the same with the bound of the stars (none fits before T_7) and without,
    # every target's children counted (made >= kept) and every solution replayed.
    for stars in (True, False):
        status, objective, attempts = _fewest_over_all_starts(side, stars)
        assert (status, objective) == ("optimal", {4: 5, 5: 9, 6: 9}[side])
        assert all(row["made"] >= row["kept"] >= 0 for row in attempts.values())


@pytest.mark.slow
def test_t7_fewest_moves_over_all_starts_with_and_without_the_stars():
    # A127500: T_7 -> 12 (Bell 2008); the one star of T_7 prunes, the answer stays.
    with_stars, without = (_fewest_over_all_starts(7, stars) for stars in (True, False))
    assert with_stars[:2] == without[:2] == ("optimal", 12)
