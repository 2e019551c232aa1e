"""The beam of the fewest-moves search (`solvers.frontier.beam`): a complete beam proves
that no solution has the target's moves, one that cuts proves nothing, and a solution
it finds is replayed and has exactly the optimum's moves."""

import numpy as np
import pytest

from puzzlesweep.puzzles import peg_solitaire
from puzzlesweep.puzzles.peg_solitaire import engine
from puzzlesweep.solvers import Limits, frontier
from puzzlesweep.solvers.frontier.beam import WIDTHS, beam, beams
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


def test_a_beam_past_its_deadline_writes_nothing_and_one_with_time_records_its_answer(tmp_path):
    # The sharded search's beam part: with its wall-clock deadline passed it stops at
    # its first look at the clock, no beam.json (a re-run does it again); with time
    # left T_6's target 9 (A127500: 9 moves) is met and recorded, target 8 fails.
    from puzzlesweep.solvers.frontier.beam import beam_part, recorded
    from puzzlesweep.solvers.frontier.sharded import ShardedRun

    run = ShardedRun(_every_start(6), str(tmp_path))
    assert beam_part(run, 9, 0.0) is None and recorded(run, 9) is None
    assert not any(tmp_path.iterdir())
    assert beam_part(run, 8)["solution"] is None and (tmp_path / "t8.json").exists()
    met = beam_part(run, 9)
    assert recorded(run, 9) == met and not (tmp_path / "t9.json").exists()
    assert peg_solitaire.verify_any_start(6, tuple(map(tuple, met["solution"]))) == 9


@pytest.mark.slow
def test_t9_beams_meet_a_16_move_solution():
    # A127500: T_9 -> 16 (Bell 2008); no 15-move solution takes the layers 13 minutes
    # (benchmarks/README.md), the beams of target 16 meet one in about half a minute.
    problem = _every_start(9)
    found = beams(problem, Budget(Limits(1800), problem.memory), 16)
    assert found.path is not None and found.width <= WIDTHS[-1]
    assert peg_solitaire.verify_any_start(9, tuple(problem.triples(found.path))) == 16
