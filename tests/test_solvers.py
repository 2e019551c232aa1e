"""The solvers on plain models, with no family involved."""

import math

from puzzlesweep.solvers import Limits, frontier, highs

from .conftest import limit_held


def knapsack() -> highs.MipModel:
    """min -(5a + 4b + 3c) s.t. 2a + 3b + c <= 5, 4a + b + 2c <= 11, 3a + 4b + 2c <= 8
    (the constraints of Chvátal's first LP example, Linear Programming, 1983) over binaries:
    all eight points checked by hand, the optimum is -9 at a = b = 1, c = 0."""
    m = highs.MipModel([], [], [], [])
    m.add_columns(3, 0.0, 0.0, 1.0, True)
    m.costs[:] = [-5.0, -4.0, -3.0]
    m.add_row([0, 1, 2], [2, 3, 1], -math.inf, 5)
    m.add_row([0, 1, 2], [4, 1, 2], -math.inf, 11)
    m.add_row([0, 1, 2], [3, 4, 2], -math.inf, 8)
    return m


def test_highs_proves_a_small_optimum():
    result = highs.solve(knapsack(), Limits(10))
    assert (result.status, result.objective, result.bound, result.gap) == ("optimal", -9, -9, 0)
    assert [round(v) for v in result.solution] == [1, 1, 0]
    assert result.solver == "highs" and result.solver_version.startswith("1.")


def test_highs_time_limit_keeps_incumbent_and_bound():
    from puzzlesweep.puzzles import no_k_in_row

    model = no_k_in_row.model(no_k_in_row.Params(dims=[6, 7, 6], k=5))
    result = highs.solve(model, Limits(time_limit=3))
    assert result.status == "time_limit"
    # Seed 001: 64 removals found, LP bound 50.4 (every window sums to 1 at x = 0.2).
    assert result.objective is not None and 54 <= result.objective <= 70
    assert 50 <= result.bound <= result.objective
    assert limit_held(result.seconds, 3)
    # Unit costs on binaries: the bound is rounded up to an integer (51, not 50.4).
    assert result.bound == math.ceil(result.bound) and result.objective.is_integer()


def test_integral_objectives_round_their_bound_up():
    # HiGHS reported 3.9999999999998583 as the proven bound of a 4 (a measured answer):
    # an integral objective's bound rounds up, within a tolerance.
    assert highs.integral_bounds(4.000000000001, 3.9999999999998583) == (4.0, 4.0)
    assert highs.integral_bounds(64.0, 54.2) == (64.0, 55.0)
    assert highs.integral_bounds(None, None) == (None, None)
    assert highs.integral_bounds(4.5, 3.2) == (4.5, 4.0)  # an objective off the integers stays
    m = knapsack()
    assert highs.has_integral_objective(m)
    m.costs[0] = -5.5
    assert not highs.has_integral_objective(m)
    m.integral_objective = True  # the model's own word wins over the detection
    assert highs.has_integral_objective(m)
    m = knapsack()
    m.add_columns(1, 1.0, 0.0, 1.0, False)  # a cost on a continuous column
    assert not highs.has_integral_objective(m)


# --- the bitboard frontier engine ----------------------------------------------------
def line(start: int, goals: tuple[int, ...], question: str, cells: int = 5):
    """Peg solitaire on a line of `cells` cells: a token jumps over a neighbour into the
    empty cell beyond, either way; no symmetry used. Counted by hand."""
    import numpy as np

    rules = [(i, i + 1, i + 2) for i in range(cells - 2)]
    rules += [(i + 2, i + 1, i) for i in range(cells - 2)]
    return frontier.LayeredProblem(
        size=cells,
        rules=np.array(rules),
        group=np.array([list(range(cells))]),
        starts=(start,),
        goals=goals,
        question=question,
    )


SINGLES = tuple(1 << c for c in range(5))


def test_frontier_fewest_moves_counts_a_double_jump_once():
    # Tokens on cells 0, 1, 3: 0 jumps to 2 and on to 4 (one move, one token left);
    # the other way, 3 jumping back to 1, takes a second move.
    result = frontier.solve(line(0b01011, SINGLES, "min_moves"), Limits(30))
    assert (result.status, result.objective, result.bound) == ("optimal", 1.0, 1.0)
    assert result.solution == [(0, 1, 2), (2, 3, 4)]
    ends_on_1 = frontier.solve(line(0b01011, (1 << 1,), "min_moves"), Limits(30))
    assert (ends_on_1.objective, ends_on_1.solution) == (2.0, [(0, 1, 2), (3, 2, 1)])


def test_frontier_solve_and_reachable():
    # From cells 0, 1, 3: after one jump 1 position, after two 2 (a token on 1 or on 4).
    every = frontier.solve(line(0b01011, SINGLES, "reachable"), Limits(30))
    assert (every.status, every.objective) == ("optimal", 2.0)
    assert every.solution["layers"] == [1, 1, 2]
    assert every.solution["goals"] == [
        (1 << 1, [(0, 1, 2), (3, 2, 1)]),
        (1 << 4, [(0, 1, 2), (2, 3, 4)]),
    ]
    found = frontier.solve(line(0b01011, (1 << 4,), "solve"), Limits(30))
    assert (found.status, found.objective, found.solution) == (
        "optimal",
        1.0,
        [(0, 1, 2), (2, 3, 4)],
    )


def test_frontier_proves_infeasible_by_class_and_by_search():
    # The invariant weights of a line are (a, b, a + b) repeated; cells 0, 1, 3 have
    # parities (0, 1) on the basis (1,0,1,1,0), (0,1,1,0,1) and cell 0 alone (1, 0).
    assert frontier.invariants(line(1, SINGLES, "solve").rules, 5).tolist() == [0b01101, 0b10110]
    by_class = frontier.solve(line(0b01011, (1 << 0,), "solve"), Limits(30))
    assert by_class.status == "infeasible" and by_class.extra["position_class"]
    # Tokens on 0 and 4 cannot move; cell 2 passes the class test, the search refutes it.
    stuck = frontier.solve(line(0b10001, (1 << 2,), "solve"), Limits(30))
    assert stuck.status == "infeasible" and "position_class" not in stuck.extra
    assert frontier.solve(line(0b10001, (1 << 2,), "min_moves"), Limits(30)).status == (
        "infeasible"
    )


def test_frontier_limits_report_a_bound():
    # A line of 40 cells, every other pair full: the search from both ends is long.
    start = sum(3 << c for c in range(0, 38, 3))
    stopped = frontier.solve(
        line(start, tuple(1 << c for c in range(40)), "min_moves", 40), Limits(10, node_limit=5)
    )
    assert (stopped.status, stopped.nodes, stopped.bound) == ("node_limit", 5, 0.0)
