"""The compiled peg solitaire engine against values recorded from an independent,
earlier layered numpy engine and against the literature; slow tests for T_7 and T_8
(`make test-slow`)."""

import pytest

from puzzlesweep.core import make_params
from puzzlesweep.puzzles import peg_solitaire as peg
from puzzlesweep.solvers import Limits, frontier


def run(side: int, start: int, finish: str, question: str, limit: float = 60):
    """(result, verifier's value or None) for one instance, as `puzzlesweep solve` runs it."""
    p = make_params(
        peg.Params, {"side": side, "start": start, "finish": finish, "question": question}
    )
    result = frontier.solve(peg.search(p), Limits(limit))
    checked = None
    if result.status == "optimal":
        checked = peg.verify(p, peg.from_search(p, result.solution))
    return result, checked


def test_t6_reachable_layers_match_the_engine_before():
    # Recorded from the earlier layered numpy engine (an independent implementation):
    # exact positions after 0..19 jumps from hole 1, 291,987 in all, and the seven holes
    # where the last peg can stand.
    result, finishes = run(6, 1, "any", "reachable")
    layers = [1, 2, 8, 43, 232, 1038, 3752, 10540, 23466, 41627, 57275, 59443, 46385]
    layers += [27956, 13288, 5032, 1514, 329, 49, 7]
    assert result.solution["layers"] == layers and sum(layers) == 291987
    assert finishes == 7
    assert [g.bit_length() for g, _ in result.solution["goals"]] == [1, 5, 7, 10, 13, 17, 20]


@pytest.mark.parametrize(
    "side, start, expected",
    [
        # Recorded from the earlier layered numpy engine, per start class: fewest moves
        # with the last peg anywhere, then on the start hole (None: impossible).
        (5, 1, (10, 10)),
        (5, 2, (10, 11)),
        (5, 4, (9, 9)),
        (5, 5, (11, None)),
        (6, 1, (10, 10)),
        (6, 2, (9, 9)),
        (6, 4, (9, 9)),
        (6, 5, (10, 11)),
        (6, 8, (9, 9)),
    ],
)
def test_fewest_moves_per_start_match_the_engine_before(side, start, expected):
    found = []
    for finish in ("any", "start"):
        result, moves = run(side, start, finish, "min_moves")
        assert moves == result.objective  # None == None when impossible
        found.append(moves)
        solved, _ = run(side, start, finish, "solve")
        assert solved.status == ("optimal" if moves else "infeasible")
    assert tuple(found) == expected


def test_position_classes_of_the_triangle():
    # Weights w with w(a) + w(b) + w(c) = 0 mod 2 on every jump line repeat (x, y, x + y)
    # along each line of all three directions, so the values on holes 1 and 2 fix the
    # rest: 2 independent parities, 4 position classes on every triangle (by hand). From
    # hole 1 of T_5 the class allows holes 1, 5, 7, 10, 13 (Jaap Scherphuis's table of
    # T_5 finishes, see test_families_full, has 1, 7, 10, 13), so hole 4 fails at once.
    for side in (5, 6, 7, 8):
        _, jumps = peg.geometry(side)
        assert len(frontier.invariants(jumps, peg.holes(side))) == 2
    result, _ = run(5, 1, "4", "solve")
    assert result.status == "infeasible" and result.extra["position_class"]
    result, _ = run(5, 5, "start", "solve")  # the same class: refuted by the search
    assert result.status == "infeasible" and "position_class" not in result.extra


def test_t8_first_moves_keep_an_incumbent_under_a_short_limit():
    # T_8 from the corner: the depth-first dive gives a solution at once; proving the
    # fewest moves needs far longer than 3 s, so the row has an incumbent and a bound.
    result, _ = run(8, 1, "any", "min_moves", limit=3)
    assert result.status == "time_limit"
    assert result.objective is not None and 1 <= result.bound <= result.objective


@pytest.mark.slow
def test_t8_fewest_moves_over_all_starts_is_13():
    # OEIS A127500, G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008)
    # 08.4.8: T_8 -> 13 moves over every one-vacancy start and one-peg finish.
    problem = peg.problem(8, list(range(36)), None, "min_moves", memory=11 << 30)
    result = frontier.solve(problem, Limits(1800))
    assert (result.status, result.objective, result.bound) == ("optimal", 13, 13), result
    path = tuple(result.solution)
    p = make_params(peg.Params, {"side": 8, "start": path[0][2] + 1, "question": "min_moves"})
    assert peg.verify(p, path) == 13


@pytest.mark.slow
def test_t8_every_start_solves_to_one_peg_anywhere_and_on_the_start_hole():
    # Every one of the 36 start holes of T_8, the last peg anywhere and on the start hole
    # (Bell's "complement problems"): found here, all 72 solvable, each solution
    # replayed by the verifier; none is ruled out by the position classes (G. I. Bell,
    # "Solving Triangular Peg Solitaire", JIS 11 (2008) 08.4.8), so none had to be
    # proven infeasible.
    for start in range(1, 37):
        for finish in ("any", "start"):
            result, pegs = run(8, start, finish, "solve", limit=600)
            assert (result.status, pegs) == ("optimal", 1), (start, finish, result)
