"""The behaviour every registered family keeps, checked on a few small instances each.

Every test here is parametrised over `puzzles.FAMILIES`, so a new family gets the whole
contract for free once it has a row in `CASES` (a built-in family declares none of this:
the table below picks its instances) or, for a family installed through the entry point
group `puzzlesweep.families`, a `CONTRACT` dict of the same fields in its module. Run it
on one family with `python -m pytest tests/test_contract.py -k NAME` (docs/development.md).
Only the public family protocol is used (see puzzles/__init__.py): canonical form and
`from_canonical`, the codec, `exhaustive` against the main solver (through
`puzzlesweep.solve`), `verify`, `render`, `picture`, and `instance_key`.

The family module is reached through `puzzles.get(name)` (the `family` fixture), the
same lookup `puzzlesweep.solve` and `Instance.key` use, so a copy of a family installed
there is checked by the whole suite, the solve path included.
"""

import json
import math
from dataclasses import dataclass
from functools import cache

import pytest

from puzzlesweep import puzzles
from puzzlesweep.core import InvalidSolution, instance_key, make_params
from puzzlesweep.puzzles import Instance
from puzzlesweep.solve import solve_instance
from puzzlesweep.solvers import Limits, engines
from puzzlesweep.solvers.mip import MipModel


@dataclass(frozen=True)
class Case:
    """What the contract checks one family on.

    known: (params, objective) of small instances that `exhaustive` can still do, the
        objective taken from a source (None: no solution); one of them may be
        infeasible, the others need a solution for the codec and `verify`;
    equivalent: pairs of params that are images of each other under a symmetry of the
        puzzle, the second not canonical (so `from_canonical` has work to do);
    pinned: (params, its instance_key as computed once and written down);
    broken: a solution of the first known instance made to break the rules."""

    known: tuple[tuple[dict, float | None], ...]
    equivalent: tuple[tuple[dict, dict], ...]
    pinned: tuple[dict, str]
    broken: object  # callable: solution -> a solution `verify` must refuse


CASES = {
    "monochromatic_lines": Case(
        known=(
            # docs/families.md: 3^2 with counts (5, 4) -> 0 (tic-tac-toe can be drawn).
            ({"n": 3, "d": 2, "counts": [5, 4]}, 0),
            # docs/families.md's line definition: every pair of cells of the 2x2 square is a
            # line (rows, columns, diagonals), so each colour's two balls make one.
            ({"n": 2, "d": 2, "counts": [2, 2]}, 2),
        ),
        # Renaming the colours: (4, 5) is (5, 4) with colours 0 and 1 swapped.
        equivalent=(({"n": 3, "d": 2, "counts": [5, 4]}, {"n": 3, "d": 2, "counts": [4, 5]}),),
        # The seed instance 3^3, (14, 13), asked with its colours swapped.
        pinned=({"n": 3, "d": 3, "counts": [13, 14]}, "0deb2a9332a20118"),
        # One ball of colour 0 repainted 1: the counts no longer match.
        broken=lambda s: (1 - s[0], *s[1:]),
    ),
    "no_k_in_row": Case(
        known=(
            # OEIS A181018 (k = 3, n x n): keep 6 of 9 and 9 of 16 -> remove 3 and 7
            # (docs/families.md).
            ({"dims": [3, 3], "k": 3}, 3),
            ({"dims": [4, 4], "k": 3}, 7),
        ),
        # The transposed box.
        equivalent=(({"dims": [3, 4], "k": 3}, {"dims": [4, 3], "k": 3}),),
        # The seed's 6x7 board, k = 5, asked as 7x6.
        pinned=({"dims": [7, 6], "k": 5}, "2ad9f358d273550d"),
        # An optimal removal less one stone: it is minimal, so some window is left full.
        broken=lambda s: s[1:],
    ),
    "domination": Case(
        known=(
            # OEIS A006075 (knights, n x n): n = 3 -> 4, n = 4 -> 4 (docs/families.md).
            ({"rows": 3, "cols": 3}, 4),
            ({"rows": 4, "cols": 4}, 4),
        ),
        # The transposed board.
        equivalent=(({"rows": 3, "cols": 4}, {"rows": 4, "cols": 3}),),
        # Knights on 8x5, asked with more rows than columns (its canonical form is 5x8).
        pinned=({"rows": 8, "cols": 5, "piece": "knight"}, "bd9bb7e8050e1ab9"),
        # A minimum cover less one knight: it is minimal, so some square is uncovered.
        broken=lambda s: s[1:],
    ),
    "peg_solitaire": Case(
        known=(
            # OEIS A127500: T_4 -> 5 fewest moves over all one-vacancy starts (G. I.
            # Bell, JIS 11 (2008), 08.4.8); start hole 2 is one that attains it.
            ({"side": 4, "start": 2, "question": "min_moves"}, 5),
            # No solution from a corner start (both methods find none: the test checks
            # that they agree).
            ({"side": 4, "start": 1, "question": "min_moves"}, None),
        ),
        # Hole 9 is hole 2's image under a rotation of the triangle (docs/families.md numbering).
        equivalent=(
            (
                {"side": 4, "start": 2, "question": "min_moves"},
                {"side": 4, "start": 9, "question": "min_moves"},
            ),
        ),
        # The seed's 15-hole board T_5, started at hole 11 (the corner image of hole 1).
        pinned=({"side": 5, "start": 11}, "8065aa810e78f6df"),
        # The jumps without the last one: two pegs are left.
        broken=lambda s: s[:-1],
    ),
}

QUICK = Limits(60)


@pytest.fixture(params=puzzles.FAMILIES)
def family(request):
    """The family module under test, looked up as the solve path looks it up."""
    module = puzzles.get(request.param)
    case_of(module)
    return module


def case_of(family) -> Case:
    """The family's row of `CASES`, else the `CONTRACT` its module declares."""
    if family.NAME in CASES:
        return CASES[family.NAME]
    if not hasattr(family, "CONTRACT"):
        pytest.fail(f"family {family.NAME} has no row in CASES and no CONTRACT: add one")
    return Case(**family.CONTRACT)


def params(family, raw: dict):
    return make_params(family.Params, raw)


@cache
def _solved(name: str, frozen: str) -> dict:
    family = puzzles.get(name)
    instance = Instance(name, params(family, json.loads(frozen)))
    return solve_instance(instance, family.SOLVERS[0], QUICK)


def solved(family, raw: dict) -> dict:
    """The row of `raw` solved by the family's main solver (once per test session)."""
    return _solved(family.NAME, json.dumps(raw, sort_keys=True))


def feasible(family) -> list[tuple[dict, float]]:
    return [(raw, value) for raw, value in case_of(family).known if value is not None]


def test_a_family_names_itself_and_writes_down_its_roads_not_taken(family):
    assert family.NAME in puzzles.FAMILIES
    assert puzzles.check(family, family.NAME) == puzzles.capabilities(family)
    assert puzzles.get(family.NAME) is family
    assert family.SOLVERS, "a family supports at least one solver"
    assert family.__doc__ and "Roads not taken" in family.__doc__
    described = puzzles.describe(family.NAME)
    assert described["solvers"] == list(family.SOLVERS)
    assert [p["name"] for p in described["parameters"]] == list(family.Params.model_fields)


def test_the_canonical_form_is_idempotent_and_equivalent_instances_share_the_key(family):
    case = case_of(family)
    everything = [raw for raw, _ in case.known] + [case.pinned[0]]
    everything += [raw for pair in case.equivalent for raw in pair]
    for raw in everything:
        p = params(family, raw)
        once = family.canonical(p)
        assert family.canonical(once) == once, raw
        assert Instance(family.NAME, once).key == Instance(family.NAME, p).key, raw
        assert Instance(family.NAME, p).key == instance_key(family.NAME, once), raw
    for first, second in case.equivalent:
        a, b = params(family, first), params(family, second)
        assert a != b
        assert family.canonical(a) == family.canonical(b), (first, second)
        assert Instance(family.NAME, a).key == Instance(family.NAME, b).key, (first, second)
        assert Instance(family.NAME, a).params_key != Instance(family.NAME, b).params_key


def test_a_solution_of_the_canonical_form_maps_back_and_verifies(family):
    for _, second in case_of(family).equivalent:
        p = params(family, second)
        canonical = family.canonical(p)
        assert canonical != p, f"{second} should not be canonical already"
        row = solved(family, canonical.model_dump(mode="json"))
        assert (row["status"], row["verified"]) == ("optimal", True), row
        back = family.from_canonical(p, family.decode(row["solution"]))
        assert family.verify(p, back) == row["objective"], second
        # ...and the solve path does the same for the instance asked as it is.
        own = solved(family, second)
        assert (own["status"], own["verified"], own["objective"]) == (
            "optimal",
            True,
            row["objective"],
        )
        assert family.verify(p, family.decode(own["solution"])) == row["objective"]


def test_the_codec_round_trips_a_solution(family):
    for raw, value in feasible(family):
        p = params(family, raw)
        text = solved(family, raw)["solution"]
        assert isinstance(text, str) and text
        assert family.encode(family.decode(text)) == text, raw
        assert family.verify(p, family.decode(text)) == value, raw
        _, theirs = family.exhaustive(p)  # a second solution, from the other method
        again = family.decode(family.encode(theirs))
        assert family.verify(p, again) == value, raw
        assert family.encode(again) == family.encode(theirs), raw


def test_exhaustive_agrees_with_the_main_solver_and_the_sources(family):
    for raw, known in case_of(family).known:
        p = params(family, raw)
        value, solution = family.exhaustive(p)
        row = solved(family, raw)
        if known is None:
            assert (value, solution) == (None, None), raw
            assert row["status"] == "infeasible", (raw, row)
            continue
        assert value == known, raw
        assert family.verify(p, solution) == known, raw
        assert (row["status"], row["objective"], row["verified"]) == ("optimal", known, True), row


def test_verify_refuses_a_broken_solution(family):
    case = case_of(family)
    raw, value = feasible(family)[0]
    p = params(family, raw)
    solution = family.decode(solved(family, raw)["solution"])
    assert family.verify(p, solution) == value
    with pytest.raises(InvalidSolution):
        family.verify(p, case.broken(solution))


def test_render_gives_text_and_picture_a_figure(family):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    for raw, _ in feasible(family):
        p = params(family, raw)
        solution = family.decode(solved(family, raw)["solution"])
        text = family.render(p, solution)
        assert isinstance(text, str) and text.strip(), raw
        figure = family.picture(p, solution)
        assert isinstance(figure, Figure), raw
        try:
            assert figure.axes, raw
        finally:
            plt.close(figure)


def test_the_instance_key_is_the_one_written_down(family):
    # Computed once and written here: the key is the SHA-256 of the canonical params'
    # JSON, so it must not change with the machine, the Python version or a refactoring.
    raw, key = case_of(family).pinned
    assert Instance(family.NAME, params(family, raw)).key == key


# --- the engines ----------------------------------------------------------------------
# Every test below is parametrised over the table of engines (`solvers.engines`: the
# built-in ones and those installed through the entry point group `puzzlesweep.engines`),
# so an engine added by docs/development.md's steps is checked with
# `python -m pytest tests/test_contract.py -k NAME`.


@pytest.fixture(params=[*engines.table(), *engines.refused()])
def engine(request) -> engines.Engine:
    """The engine under test, looked up as the solve path looks it up; an installed
    engine that cannot run fails every test with why (`engines.refused`)."""
    if request.param in engines.refused():
        pytest.fail(engines.refused()[request.param])
    return engines.get(request.param)


#: The engines that take a family's MIP, and those with each optional capability: the
#: tests of a capability run on exactly these.
MIP_ENGINES = [name for name, e in engines.table().items() if e.takes == "mip"]


def test_an_engine_has_the_members_its_capabilities_need(engine):
    module = engine.load()
    assert module.NAME == engine.name
    assert isinstance(module.VERSION, str) and module.VERSION
    assert engine.capabilities and engine.capabilities <= engines.CAPABILITIES.keys()
    for capability in engine.capabilities:
        assert all(hasattr(module, m) for m in engines.CAPABILITIES[capability]), capability
    assert engine.name in engines.with_capability(sorted(engine.capabilities)[0])
    fits = [name for name in puzzles.FAMILIES if engine.takes in capabilities_of(name)]
    assert fits, f"engine {engine.name} takes {engine.takes}: no family gives it"
    for name in fits:  # every family it fits offers it (`puzzlesweep families`)
        assert engine.name in puzzles.describe(name)["solvers"]


def capabilities_of(name: str) -> frozenset[str]:
    """The capabilities of family `name`."""
    return puzzles.capabilities(puzzles.get(name))


def test_an_engine_finds_the_known_values_of_every_family_it_fits(engine):
    checked = 0
    for name in puzzles.FAMILIES:
        family = puzzles.get(name)
        if engine.takes not in puzzles.capabilities(family):
            continue
        for raw, known in case_of(family).known:
            row = solve_instance(Instance(name, params(family, raw)), engine.name, QUICK)
            assert row["solver"] == engine.name, row
            if known is None:
                assert (row["status"], row["objective"]) == ("infeasible", None), (raw, row)
            else:
                got = (row["status"], row["objective"], row["bound"], row["verified"])
                assert got == ("optimal", known, known, True), (name, raw, row)
            checked += 1
    assert checked >= 2


@pytest.mark.parametrize("name", MIP_ENGINES)
def test_a_mip_engine_reports_an_infeasible_model_without_numbers(name):
    model = MipModel([], [], [], [])
    model.add_columns(2, 1.0, 0.0, 1.0, True)
    model.add_row([0, 1], [1, 1], 3, math.inf)  # two binaries cannot sum to 3
    result = engines.module(name, "optimum").solve(model, Limits(10))
    got = (result.status, result.objective, result.bound, result.solution)
    assert got == ("infeasible", None, None, None)


@pytest.mark.parametrize("name", MIP_ENGINES)
def test_a_mip_engine_stopped_by_its_node_limit_keeps_a_sound_bound(name):
    # OEIS A006075: 8 knights dominate the 6x6 board.
    instance = Instance("domination", params(puzzles.get("domination"), {"rows": 6, "cols": 6}))
    row = solve_instance(instance, name, Limits(60, node_limit=1))
    assert row["status"] in ("optimal", "node_limit"), row
    assert row["bound"] is not None and row["bound"] <= 8, row
    if row["objective"] is not None:
        assert row["verified"] and row["objective"] >= 8, row


@pytest.mark.parametrize("name", engines.with_capability("count"))
def test_an_engine_that_counts_counts_known_optima(name):
    # Tic-tac-toe: 16 drawn full boards, 3 up to the square's 8 symmetries (Wikipedia,
    # "Tic-tac-toe", Combinatorics: 958 terminal positions, 16 of them draws).
    lines = puzzles.get("monochromatic_lines")
    instance = Instance(lines.NAME, params(lines, {"n": 3, "d": 2, "counts": [5, 4]}))
    row = solve_instance(instance, name, QUICK, count=True)
    assert (row["objective"], row["solutions"], row["inequivalent"]) == (0, 16, 3), row


@pytest.mark.parametrize("name", engines.with_capability("split"))
def test_an_engine_that_splits_proves_a_known_optimum_by_parts(name):
    from puzzlesweep.proof import Proof, build, solve_one
    from puzzlesweep.solvers import split as splitting

    # OEIS A181018 (k = 3): 4x4 keeps 9, so 7 stones are removed; the parts of the split
    # on row 0's stones 0 and 3, each solved by the engine, prove it.
    proof = Proof("no_k_in_row", {"dims": [4, 4], "k": 3}, "0:0,3", 2, QUICK, solver=name)
    parts = build(proof)[2].parts
    rows = [solve_one(proof, part.index, None, proof.limits, "contract") for part in parts]
    assert {row["solver"] for row in rows} == {f"{name}-split-part"}
    lowers = [float(json.loads(row["subproblem"])["lower"]) for row in rows]
    combined = splitting.combine(lowers, [r["objective"] for r in rows if r["verified"]], None)
    assert combined.proven and (combined.objective, combined.bound) == (7, 7)
