"""The solvers on plain models, with no family involved."""

import math

from puzzlesweep.solvers import Limits, backtrack, frontier, highs


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


def test_highs_reports_infeasible_without_numbers():
    m = highs.MipModel([], [], [], [])
    m.add_columns(2, 1.0, 0.0, 1.0, True)
    m.add_row([0, 1], [1, 1], 3, math.inf)  # two binaries cannot sum to 3
    result = highs.solve(m, Limits(10))
    assert (result.status, result.objective, result.bound, result.solution) == (
        "infeasible",
        None,
        None,
        None,
    )


def test_highs_time_limit_keeps_incumbent_and_bound():
    from puzzlesweep.puzzles import no_k_in_row

    model = no_k_in_row.model(no_k_in_row.Params(dims=[6, 7, 6], k=5))
    result = highs.solve(model, Limits(time_limit=3))
    assert result.status == "time_limit"
    # Seed 001: 64 removals found, LP bound 50.4 (every window sums to 1 at x = 0.2).
    assert result.objective is not None and 54 <= result.objective <= 70
    assert 50 <= result.bound <= result.objective
    assert result.seconds < 3 + 1.0
    # Unit costs on binaries: the bound is rounded up to an integer (51, not 50.4).
    assert result.bound == math.ceil(result.bound) and result.objective.is_integer()


def test_integral_objectives_round_their_bound_up():
    # HiGHS reported 3.9999999999998583 as the proven bound of a 4 (issue 6).
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


def diamond(minimise: bool) -> backtrack.SearchProblem:
    """a -> b (cost 1) -> d (cost 1); a -> c (cost 0) -> d (cost 5); a -> e (dead end)."""
    edges = {
        "a": [("ab", "b", 1), ("ac", "c", 0), ("ae", "e", 0)],
        "b": [("bd", "d", 1)],
        "c": [("cd", "d", 5)],
        "d": [],
        "e": [],
    }
    return backtrack.SearchProblem(
        root="a", children=lambda s: edges[s], is_goal=lambda s: s == "d", minimise=minimise
    )


def test_backtrack_depth_first_finds_a_path():
    result = backtrack.solve(diamond(False), Limits(10))
    assert result.status == "optimal" and result.solution == ["ab", "bd"]


def test_backtrack_uniform_cost_finds_the_cheapest_path():
    result = backtrack.solve(diamond(True), Limits(10))
    assert (result.status, result.objective, result.solution) == ("optimal", 2, ["ab", "bd"])


def test_backtrack_infeasible_and_node_limit():
    dead = backtrack.SearchProblem(
        root=0, children=lambda s: [(s + 1, s + 1, 1)] if s < 5 else [], is_goal=lambda s: False
    )
    assert backtrack.solve(dead, Limits(10)).status == "infeasible"
    assert backtrack.solve(dead, Limits(10)).nodes == 6
    endless = backtrack.SearchProblem(
        root=0, children=lambda s: [(1, s + 1, 1)], is_goal=lambda s: False, minimise=True
    )
    result = backtrack.solve(endless, Limits(10, node_limit=100))
    # The incumbent dive stops on its 11th node (a tenth of the limit); uniform-cost
    # search expands the other 90, costs 0..89.
    assert (result.status, result.nodes, result.bound) == ("node_limit", 101, 89)


def test_backtrack_time_limit_is_held():
    endless = backtrack.SearchProblem(
        root=0, children=lambda s: [(1, s + 1, 0)], is_goal=lambda s: False
    )
    result = backtrack.solve(endless, Limits(0.5))
    assert result.status == "time_limit" and 0.5 <= result.seconds < 1.5


def test_a_crashing_search_is_an_error_result():
    def broken(state):
        raise RuntimeError("boom")

    result = backtrack.solve(
        backtrack.SearchProblem(root=0, children=broken, is_goal=lambda s: False), Limits(10)
    )
    assert result.status == "error" and "boom" in result.message


# --- the layered frontier engine -----------------------------------------------------
def bit_strings(depth: int = 4, target: int = 0b10110, **options) -> frontier.LayeredProblem:
    """Layer j holds the bit strings of length j behind a leading 1 (the root, key 1);
    appending a bit costs 1 when it differs from the last bit. The goal 1|0110 costs 3
    (1→0, 0→1, 1→0), counted by hand; every string of length 4 is a goal for
    `all_goals`."""
    import numpy as np

    def expand(keys, costs):
        last = keys & np.uint64(1)
        zero, one = keys << np.uint64(1), keys << np.uint64(1) | np.uint64(1)
        return (
            np.concatenate([zero, one]),
            np.concatenate([costs + (last != 0), costs + (last != 1)]).astype(np.uint8),
        )

    return frontier.LayeredProblem(
        roots=np.array([1], np.uint64),
        expand=expand,
        depth=depth,
        is_goal=lambda keys: keys == target if target else np.ones(len(keys), bool),
        parents=lambda s: [(s & 1, s >> 1, s >> 1, int((s & 1) != (s >> 1 & 1)))],
        **options,
    )


def test_frontier_finds_the_cheapest_goal_and_its_path():
    result = frontier.solve(bit_strings(), Limits(10))
    assert (result.status, result.objective, result.bound) == ("optimal", 3.0, 3.0)
    assert result.solution == [0, 1, 1, 0]
    assert result.extra["states"] == [1, 2, 4, 8, 16] and result.nodes == 15


def test_frontier_beam_incumbent_then_proof():
    # A beam of one keeps the cheapest string, all ones, which reaches no goal but the
    # full pass does; with all goals wanted there is no beam pass.
    result = frontier.solve(bit_strings(beam=1), Limits(10))
    assert (result.status, result.objective, result.solution) == ("optimal", 3.0, [0, 1, 1, 0])
    every = frontier.solve(bit_strings(target=0, all_goals=True), Limits(10))
    assert every.objective == 16 and len(every.solution["goals"]) == 16
    assert every.solution["layers"] == [1, 2, 4, 8, 16]


def test_frontier_limits_report_a_bound():
    stopped = frontier.solve(bit_strings(), Limits(10, node_limit=5))
    assert (stopped.status, stopped.nodes) == ("node_limit", 5)
    assert stopped.bound is not None and stopped.bound <= 3
    endless = frontier.solve(bit_strings(depth=40, target=1 << 40), Limits(0.3))
    assert endless.status == "time_limit" and endless.bound == 0.0
    assert endless.seconds < 5.0
