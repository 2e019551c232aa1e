"""The beam of the fewest-moves search (`solvers.frontier.beam`): a complete beam proves
that no solution has the target's moves, one that cuts proves nothing, and a solution
it finds is replayed and has exactly the optimum's moves."""

import numpy as np

from puzzlesweep.puzzles import peg_solitaire
from puzzlesweep.puzzles.peg_solitaire import engine
from puzzlesweep.solvers import Limits, frontier
from puzzlesweep.solvers.frontier.beam import WIDTHS, beam
from puzzlesweep.solvers.frontier.kernels import board_keys, distinct
from puzzlesweep.solvers.frontier.layers import Budget
from puzzlesweep.solvers.frontier.moves import count_moves
from puzzlesweep.solvers.frontier.problem import key_tables


def _every_start(side: int):
    return engine.problem(side, list(range(side * (side + 1) // 2)), None, "min_moves")


def test_a_complete_beam_proves_the_bound_and_a_beam_at_the_optimum_finds_it():
    # OEIS A127500 (G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008)
    # 08.4.8): T_5 -> 9 moves over every one-vacancy start and one-peg finish.
    problem = _every_start(5)
    budget = Budget(Limits(600), problem.memory)
    assert beam(problem, budget, 8, WIDTHS[-1])[:2] == (None, True)
    found = beam(problem, budget, 9, WIDTHS[-1])
    moves = problem.triples(found.path)
    assert count_moves(moves) == 9
    assert peg_solitaire.verify_any_start(5, tuple(moves)) == 9
    assert budget.nodes > 0 and budget.made >= budget.kept > 0


def test_a_beam_that_cuts_proves_nothing():
    # T_7 has 12-move solutions (A127500): a beam of one position a move cuts at once
    # and, whatever it finds, claims no proof.
    problem = _every_start(7)
    found = beam(problem, Budget(Limits(600), problem.memory), 12, 1)
    roots = len(distinct(board_keys(np.array(problem.starts, np.uint64), key_tables(problem))))
    assert roots == 7  # T_7's 28 holes under its 6 symmetries: 3 x 6 + 3 x 3 + the centre
    assert found.complete is False and found.width == 1 and found.stored <= roots + 12
    if found.path is not None:
        assert peg_solitaire.verify_any_start(7, tuple(problem.triples(found.path))) <= 12


def test_t8_fewest_moves_over_all_starts():
    # A127500: T_8 -> 13 (Bell 2008); targets 11 and 12 fail, a beam meets 13.
    problem = _every_start(8)
    result = frontier.solve(problem, Limits(600))
    assert (result.status, result.objective, result.bound) == ("optimal", 13, 13)
    assert peg_solitaire.verify_any_start(8, tuple(result.solution)) == 13
    assert sorted(result.extra["attempts"]) == [11, 12, 13]
    assert np.all([row["made"] >= row["kept"] for row in result.extra["attempts"].values()])
