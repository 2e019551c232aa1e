"""Two independent methods agree: HiGHS against each MIP family's `exhaustive` search,
the peg search (depth-first, uniform-cost, breadth-first engine) against the layered
enumeration `peg_solitaire.exhaustive`, on many small random instances (hypothesis)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from puzzlesweep import puzzles
from puzzlesweep.core import make_params
from puzzlesweep.puzzles import Instance, monochromatic_lines, peg_solitaire
from puzzlesweep.solve import solve_instance
from puzzlesweep.solvers import Limits

SOME = settings(max_examples=25, deadline=None)


def agree(family: str, raw: dict) -> dict:
    """Solve with the family's main solver and with `exhaustive`; assert they agree and
    that both solutions pass the verifier; returns the main row."""
    module = puzzles.get(family)
    params = make_params(module.Params, raw)
    row = solve_instance(Instance(family, params), module.SOLVERS[0], Limits(60))
    value, solution = module.exhaustive(params)
    if value is None:
        assert row["status"] == "infeasible", (raw, row)
        return row
    assert (row["status"], row["objective"], row["verified"]) == ("optimal", value, True), raw
    assert module.verify(params, solution) == value
    return row


colourings = st.sampled_from([(2, 2), (2, 3), (3, 2), (4, 2)]).flatmap(
    lambda nd: st.integers(2, 3).flatmap(
        lambda c: st.sampled_from(monochromatic_lines.splits(nd[0] ** nd[1], c)).map(
            lambda counts: {"n": nd[0], "d": nd[1], "counts": list(counts)}
        )
    )
)


@SOME
@given(colourings)
def test_monochromatic_lines_highs_matches_branch_and_bound(raw):
    agree("monochromatic_lines", raw)


def test_monochromatic_lines_in_four_dimensions():
    # d = 4: the 2^4 cube has (4^4 - 2^4)/2 = 120 lines of two cells, 3^4 has 272
    # (docs/families.md formula); with 8 balls of each colour both methods find 56.
    assert [len(monochromatic_lines.lines(n, 4)) for n in (2, 3)] == [120, 272]
    assert agree("monochromatic_lines", {"n": 2, "d": 4, "counts": [8, 8]})["objective"] == 56


boxes = (
    st.one_of(
        st.lists(st.integers(1, 6), min_size=1, max_size=2),
        st.lists(st.integers(1, 3), min_size=3, max_size=3),
        st.lists(st.integers(1, 2), min_size=4, max_size=5),
    )
    .filter(lambda dims: max(dims) >= 2 and math.prod(dims) <= 20)
    .flatmap(lambda dims: st.tuples(st.just(dims), st.integers(2, max(dims))))
)


@SOME
@given(boxes)
def test_no_k_in_row_highs_matches_iterative_deepening(case):
    dims, k = case
    agree("no_k_in_row", {"dims": dims, "k": k})


@SOME
@given(
    st.integers(1, 5),
    st.integers(1, 6),
    st.sampled_from(["knight", "king", "queen", "rook", "bishop"]),
    st.sampled_from(["dominating", "total", "independent"]),
)
def test_domination_highs_matches_iterative_deepening(rows, cols, piece, variant):
    agree("domination", {"rows": rows, "cols": cols, "piece": piece, "variant": variant})


@SOME
@given(
    st.integers(4, 5).flatmap(
        lambda side: st.tuples(
            st.just(side),
            st.integers(1, peg_solitaire.holes(side)),
            st.sampled_from(["any", "start", "1", "4", "7"]),
            st.sampled_from(["solve", "min_moves", "reachable"]),
        )
    )
)
def test_peg_search_matches_the_layered_enumeration(case):
    side, start, finish, question = case
    raw = {"side": side, "start": start, "finish": finish, "question": question}
    row = agree("peg_solitaire", raw)
    if question == "reachable":
        params = make_params(peg_solitaire.Params, raw)
        mine = peg_solitaire.decode(row["solution"])
        _, theirs = peg_solitaire.exhaustive(params)
        assert mine.layers == theirs.layers
        assert [h for h, _ in mine.finishes] == [h for h, _ in theirs.finishes]


def test_the_exhaustive_methods_refuse_large_instances():
    for family, raw in [
        ("monochromatic_lines", {"n": 3, "d": 3, "counts": [14, 13]}),
        ("no_k_in_row", {"dims": [6, 7], "k": 5}),
        ("domination", {"rows": 8, "cols": 8}),
        ("peg_solitaire", {"side": 7, "start": 1}),
    ]:
        module = puzzles.get(family)
        with pytest.raises(ValueError, match="is for"):
            module.exhaustive(make_params(module.Params, raw))
