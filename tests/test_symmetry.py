"""Canonical forms: equivalent instances share instance_key, and a solution of the
canonical form carried back to an equivalent instance passes that instance's verifier."""

from hypothesis import given, settings
from hypothesis import strategies as st

from puzzlesweep import puzzles
from puzzlesweep.core import make_params
from puzzlesweep.puzzles import (
    Instance,
    domination,
    monochromatic_lines,
    no_k_in_row,
    peg_solitaire,
)
from puzzlesweep.solve import solve_instance
from puzzlesweep.solvers import Limits

FAST = settings(max_examples=15, deadline=None)


def instance(family: str, **raw) -> Instance:
    return Instance(family, make_params(puzzles.get(family).Params, raw))


def test_equivalent_instances_share_the_key():
    # The seed's own observation (003): one-hole starts of T_5 fall into classes of holes
    # that map onto each other by the triangle's rotations and reflections.
    keys = {s: instance("peg_solitaire", side=5, start=s).key for s in range(1, 16)}
    classes = {}
    for s, key in keys.items():
        classes.setdefault(key, []).append(s)
    assert sorted(classes.values()) == [[1, 11, 15], [2, 3, 7, 10, 12, 14], [4, 6, 13], [5, 8, 9]]
    # A finish hole equal to the start is the finish rule `start`.
    assert instance("peg_solitaire", side=5, start=4, finish=4).key == (
        instance("peg_solitaire", side=5, start=13, finish="start").key
    )
    assert instance("peg_solitaire", side=5, start=4, finish=1).key != (
        instance("peg_solitaire", side=5, start=4, finish=15).key
    )
    assert instance("domination", rows=5, cols=8).key == instance("domination", rows=8, cols=5).key
    assert instance("domination", rows=5, cols=8).key != instance("domination", rows=5, cols=9).key
    boxes = [[6, 7], [7, 6], [1, 7, 6], [6, 1, 7]]
    assert len({instance("no_k_in_row", dims=d, k=5).key for d in boxes}) == 1
    assert instance("no_k_in_row", dims=[7], k=5).key == (
        instance("no_k_in_row", dims=[1, 7], k=5).key
    )
    assert instance("monochromatic_lines", n=3, d=3, counts=[13, 14]).key == (
        instance("monochromatic_lines", n=3, d=3, counts=[14, 13]).key
    )
    # params_key tells them apart.
    a, b = instance("domination", rows=5, cols=8), instance("domination", rows=8, cols=5)
    assert a.params_key != b.params_key and a.key == a.params_key


def test_a_mirrored_instance_is_solved_and_verified_on_its_own_params():
    # Seed 001: 6x7 -> 8 removals; asked as 7x6 the removed cells are 7x6 indices.
    row = solve_instance(instance("no_k_in_row", dims=[7, 6], k=5), "highs", Limits(30))
    assert (row["status"], row["objective"], row["verified"]) == ("optimal", 8, True)
    # Seed 003 (variant b): from hole 15 the last peg can finish on hole 15, as from 1.
    row = solve_instance(
        instance("peg_solitaire", side=5, start=15, finish="start"), "frontier", Limits(30)
    )
    assert (row["status"], row["verified"]) == ("optimal", True)
    assert peg_solitaire.decode(row["solution"])[-1][2] == 14  # lands on hole 15


def symmetric_pairs():
    """(family, raw params, raw params of an equivalent instance)."""
    peg = st.integers(4, 5).flatmap(
        lambda side: st.tuples(
            st.just(side),
            st.integers(1, peg_solitaire.holes(side)),
            st.sampled_from(peg_solitaire.symmetries(side)),
            st.sampled_from(["any", "start"]),
        )
    )
    return st.one_of(
        st.tuples(st.integers(1, 5), st.integers(1, 5), st.sampled_from(sorted(domination.LEAPS)))
        .filter(lambda t: t[0] * t[1] > 1)
        .map(
            lambda t: (
                "domination",
                {"rows": t[0], "cols": t[1], "piece": t[2]},
                {"rows": t[1], "cols": t[0], "piece": t[2]},
            )
        ),
        st.permutations([1, 3, 4]).map(
            lambda dims: ("no_k_in_row", {"dims": [3, 4], "k": 3}, {"dims": dims, "k": 3})
        ),
        st.integers(1, 8).map(
            lambda a: (
                "monochromatic_lines",
                {"n": 3, "d": 2, "counts": [a, 9 - a]},
                {"n": 3, "d": 2, "counts": [9 - a, a]},
            )
        ),
        peg.map(
            lambda t: (
                "peg_solitaire",
                {"side": t[0], "start": t[1], "finish": t[3]},
                {"side": t[0], "start": t[2][t[1] - 1] + 1, "finish": t[3]},
            )
        ),
    )


@FAST
@given(symmetric_pairs())
def test_symmetric_instances_get_the_same_answer(case):
    family, raw, mirror = case
    module = puzzles.get(family)
    first, second = instance(family, **raw), instance(family, **mirror)
    assert first.key == second.key
    rows = [solve_instance(i, module.SOLVERS[0], Limits(30)) for i in (first, second)]
    assert rows[0]["status"] == rows[1]["status"]
    assert rows[0]["objective"] == rows[1]["objective"]
    for inst, row in zip((first, second), rows, strict=True):
        if row["solution"] is not None:
            solution = module.decode(row["solution"])
            assert row["verified"] is True
            assert module.verify(inst.params, solution) == row["objective"]


def test_from_canonical_maps_cells_by_coordinates():
    # 2x3 board as 3x2: square (r, c) = r*3 + c of the canonical 2x3 is (c, r) of 3x2.
    p = make_params(domination.Params, {"rows": 3, "cols": 2})
    assert domination.from_canonical(p, (1, 5)) == (2, 5)
    # a 1x4 line of no_k_in_row is the 4-box: cell i stays cell i
    p = make_params(no_k_in_row.Params, {"dims": [1, 4], "k": 3})
    assert no_k_in_row.from_canonical(p, (2,)) == (2,)
    p = make_params(no_k_in_row.Params, {"dims": [4, 1], "k": 3})
    assert no_k_in_row.from_canonical(p, (2,)) == (2,)
    p = make_params(monochromatic_lines.Params, {"n": 3, "d": 2, "counts": [4, 5]})
    assert monochromatic_lines.canonical(p).counts == [5, 4]
    assert monochromatic_lines.from_canonical(p, (0, 1, 0)) == (1, 0, 1)
