"""Issue 6, MIP strength: starting incumbents, symmetry-breaking rows, HiGHS options and
the proven knights values, all through real HiGHS solves (nothing mocked)."""

import math

import pytest

from puzzlesweep.core import make_params
from puzzlesweep.puzzles import domination, no_k_in_row
from puzzlesweep.solvers import Limits, highs

#: OEIS A006075 (https://oeis.org/A006075), knights dominating n×n, n = 1..20.
A006075 = [1, 4, 4, 4, 5, 8, 10, 12, 14, 16, 21, 24, 28, 32, 36, 40, 46, 52, 57, 62]


def nok(dims: list[int], k: int) -> no_k_in_row.Params:
    return make_params(no_k_in_row.Params, {"dims": dims, "k": k})


def board(piece: str, rows: int, cols: int, variant: str = "dominating") -> domination.Params:
    raw = {"piece": piece, "rows": rows, "cols": cols, "variant": variant}
    return make_params(domination.Params, raw)


# --- starting incumbents ----------------------------------------------------------------
@pytest.mark.parametrize(
    "dims, k, size",
    [
        # Seed 001: 6x7 -> 8 and 13x17 -> 44 removals; the pattern x + 2y = c (mod 5)
        # hits every 2-D window, so the start is already optimal.
        ([6, 7], 5, 8),
        ([13, 17], 5, 44),
        # No linear form mod 5 hits every 3-D window: repaired patterns, measured sizes.
        ([6, 7, 6], 5, 68),
        ([5, 5, 5], 5, 29),
        ([8, 8], 3, 30),  # A181018: the optimum removes 28
        ([2, 2, 2, 2], 2, 15),
        ([7], 5, 1),
    ],
)
def test_periodic_start_is_valid(dims, k, size):
    p = nok(dims, k)
    start = no_k_in_row.start_solution(p)
    assert no_k_in_row.verify(p, start) == size


def test_highs_takes_the_start():
    # setSolution answers OK whatever it is given (docs/architecture.md), so check that it was used:
    # stopped before its root node, HiGHS reports the start's 68 removals on 6x7x6, and
    # nothing without a start.
    p = nok([6, 7, 6], 5)
    # (a limit of 1 microsecond: at 0.01 s HiGHS sometimes reached its root heuristics,
    # improving the start to 65 or finding 68 without one)
    started = highs.solve(no_k_in_row.model(p), Limits(1e-6))
    assert (started.status, started.objective) == ("time_limit", 68)
    assert no_k_in_row.verify(p, no_k_in_row.from_mip(p, started.solution)) == 68
    assert highs.solve(no_k_in_row.model(p, start=False), Limits(1e-6)).objective is None
    # With symmetry rows the start is first mapped into the region they keep; HiGHS
    # silently drops a start that breaks a row.
    both = highs.solve(no_k_in_row.model(p, symmetry=True), Limits(1e-6))
    assert both.objective == 68


def satisfies(rows: list[tuple[list[int], list[int]]], chosen: tuple[int, ...]) -> bool:
    return all(
        len(set(more) & set(chosen)) >= len(set(fewer) & set(chosen)) for more, fewer in rows
    )


def test_symmetric_images_satisfy_the_rows():
    for dims, k in [([6, 7, 6], 5), ([5, 5, 5], 5), ([8, 8], 3), ([4, 6], 3)]:
        p = nok(dims, k)
        image = no_k_in_row.symmetric_image(tuple(dims), no_k_in_row.start_solution(p))
        assert satisfies(no_k_in_row.symmetry_rows(tuple(dims)), image)
        assert no_k_in_row.verify(p, image) == len(image)
    for rows, cols in [(8, 8), (5, 9), (12, 12)]:
        p = board("knight", rows, cols)
        image = domination.symmetric_image(rows, cols, domination.greedy_start(p))
        assert satisfies(domination.symmetry_rows(rows, cols), image)
        assert domination.verify(p, image) == len(image)


@pytest.mark.slow
def test_searched_start_reaches_the_seed_incumbent():
    # Seed 001: the best known 6x7x6 removal set has 64 stones; the seeded local search
    # reaches it deterministically within SEARCH_MOVES moves (5-12 s measured).
    p = nok([6, 7, 6], 5)
    start = no_k_in_row.start_solution(p, no_k_in_row.SEARCH_MOVES)
    assert no_k_in_row.verify(p, start) == 64
    assert no_k_in_row.start_solution(p, no_k_in_row.SEARCH_MOVES) == start


@pytest.mark.parametrize("piece", ["knight", "king", "queen", "rook", "bishop"])
def test_greedy_start_dominates(piece):
    for rows, cols in [(1, 1), (3, 5), (8, 8), (12, 12)]:
        p = board(piece, rows, cols)
        assert domination.verify(p, domination.greedy_start(p)) >= 1


# --- symmetry rows keep every optimum -----------------------------------------------------
@pytest.mark.parametrize("dims, k", [([4, 4], 3), ([5, 4], 3), ([3, 3, 2], 2), ([4, 4], 4)])
def test_symmetry_rows_keep_the_no_k_optimum(dims, k):
    # Against the second, independent method (iterative deepening, no MIP).
    p = nok(dims, k)
    expected, _ = no_k_in_row.exhaustive(p)
    for model in (no_k_in_row.model(p, symmetry=True), no_k_in_row.model(p, moves=50)):
        result = highs.solve(model, Limits(30))
        assert (result.status, result.objective) == ("optimal", expected)


@pytest.mark.parametrize("piece", ["knight", "king", "queen", "rook", "bishop"])
def test_symmetry_rows_and_start_keep_the_domination_optimum(piece):
    for rows, cols in [(2, 2), (3, 3), (4, 4), (5, 5), (3, 5), (4, 6)]:
        for variant in ("dominating", "total", "independent"):
            p = board(piece, rows, cols, variant)
            expected, _ = domination.exhaustive(p)
            result = highs.solve(domination.model(p, symmetry=True, start=True), Limits(30))
            assert result.objective == expected, (piece, rows, cols, variant)


def test_symmetry_rows_are_mirror_images():
    # Each row compares a set of cells with its image under a symmetry of the box.
    for more, fewer in no_k_in_row.symmetry_rows((6, 7, 6)):
        assert len(more) == len(fewer) and not set(more) & set(fewer)
    assert len(no_k_in_row.symmetry_rows((6, 7, 6))) == 4  # 3 axes, one pair of equal sides
    assert len(domination.symmetry_rows(8, 8)) == 3 and len(domination.symmetry_rows(3, 5)) == 2


# --- HiGHS options --------------------------------------------------------------------------
def test_model_options_reach_highs():
    p = board("knight", 8, 8)
    model = domination.model(p)
    model.options = {"mip_detect_symmetry": False}
    result = highs.solve(model, Limits(30))
    assert (result.status, result.objective, result.bound) == ("optimal", 12, 12)
    model.options = {"mip_detect_symetry": False}  # misspelt: refused, not ignored
    refused = highs.solve(model, Limits(30))
    assert refused.status == "error" and "mip_detect_symetry" in refused.message


# --- knights, A006075 ------------------------------------------------------------------------
def test_knights_11_matches_a006075():
    # n = 1..10 are in test_families.py; 11 (21 knights) is proven in about 2 s.
    result = highs.solve(domination.model(board("knight", 11, 11)), Limits(60))
    assert (result.status, result.objective, result.bound) == ("optimal", 21, 21)


@pytest.mark.slow
@pytest.mark.parametrize("n", range(12, 18))
def test_knights_12_to_17_match_a006075(n):
    # OEIS A006075: 24, 28, 32, 36, 40, 46; proven here in 5, 3, 55, 147, 281 and 817 s
    # (78,927 nodes) with one thread on the 2-core machine (benchmarks/README.md,
    # knights_bench.py).
    result = highs.solve(domination.model(board("knight", n, n)), Limits(2400))
    assert (result.status, result.objective, result.bound) == ("optimal",) + (A006075[n - 1],) * 2
    assert math.isclose(result.gap, 0.0)
