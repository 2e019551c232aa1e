"""Symmetry breaking as rows of the model (`lex:`): lexicographic-leader rows keep one
image of every solution, a ramp-up split of the model with them proves a 2-D board's
exact optimum with real SCIP, and its certificate re-derives the rows and re-checks."""

import itertools

import pytest

from puzzlesweep import certificate, puzzles
from puzzlesweep.core import BadInput
from puzzlesweep.proof import Proof, build, combined_row, model_of
from puzzlesweep.solvers import Limits, lookahead, ramp, symmetry
from puzzlesweep.solvers import split as splitting

from .conftest import cli
from .test_lookahead import _document, solve_parts

NOK = puzzles.get("no_k_in_row")


def _holds(rows, x) -> bool:
    return all(
        sum(v * x[c] for c, v in zip(cols, coefs, strict=True)) >= lo for cols, coefs, lo, _ in rows
    )


def test_leader_rows_keep_exactly_the_orbit_leaders_of_a_three_by_three_board():
    # the 8 symmetries of the 3×3 board on all 2^9 cell sets: the rows over all 8
    # positions each g moves are exact lex-leader rows, so every orbit keeps exactly one
    # point, its greatest; truncated to 2 positions they keep it and maybe more
    perms = NOK.symmetries(NOK.Params(dims=[3, 3], k=3))
    exact, short = symmetry.leader_rows(perms, 9), symmetry.leader_rows(perms, 2)
    assert len(exact) == 7  # one per non-identity symmetry
    orbits: dict[tuple, list] = {}
    for x in itertools.product((0.0, 1.0), repeat=9):
        orbits.setdefault(tuple(symmetry.leader_image(list(x), perms)), []).append(x)
    for leader, members in orbits.items():
        assert leader in members and _holds(exact, leader) and _holds(short, leader)
        assert [m for m in members if _holds(exact, m)] == [leader]
    assert len(orbits) == 102  # the 3×3 0/1 matrices up to the 8 symmetries (Burnside)


def test_a_model_the_symmetry_does_not_preserve_is_refused():
    model = NOK.model(NOK.Params(dims=[4, 4], k=3))
    perms = NOK.symmetries(NOK.Params(dims=[4, 4], k=3))
    assert all(symmetry.preserves(model, g) for g in perms)
    model.add_row([0], [1.0], 1.0, float("inf"))  # one corner forced: no longer symmetric
    assert not symmetry.preserves(model, perms[1])
    with pytest.raises(ValueError, match="does not map the model onto itself"):
        symmetry.with_leader_rows(model, perms)
    with pytest.raises(BadInput, match="before a tree split"):  # a count split drops
        model_of("no_k_in_row", NOK.Params(dims=[6, 6], k=3), "lex:0:0,5")  # by symmetry


def test_a_ramp_up_of_the_model_with_leader_rows_proves_eight_by_eight(tmp_path):
    # OEIS A181018: 36 stones kept on 8×8 with no three in a row, so 64 − 36 = 28 removed
    params = {"dims": [8, 8], "k": 3}
    plain = NOK.model(NOK.Params(**params))
    model, text = model_of("no_k_in_row", NOK.Params(**params), "lex:nodes:20")
    assert text == "nodes:20" and model.num_rows == plain.num_rows + 7  # 7 leader rows
    assert model.scip_options["misc/usesymmetry"] == 0
    perms = NOK.symmetries(NOK.Params(**params))
    assert model.start == symmetry.leader_image(plain.start, perms)  # the start's leader
    found = ramp.ramp_up(model, 20)
    assert found.status == "nodelimit" and found.open >= 2
    proof = Proof("no_k_in_row", params, "lex:" + found.tree, 0, Limits(30), solver="scip")
    _, built, split, description = build(proof)
    assert built.num_rows == model.num_rows and "leader rows" in description
    assert splitting.fixings_cover(split.parts) is None
    assert lookahead.tree_split(found.tree, 64)[0].parts == split.parts
    rows = solve_parts(proof, split)
    combined = combined_row(proof, dict(enumerate(rows)), None, "t")
    assert (combined["status"], combined["objective"], combined["bound"]) == ("optimal", 28, 28)
    document = _document(proof, rows, combined)
    wrong = {**document, "split": found.tree}  # without lex: the key is another one
    assert any("is not the key" in p for p in certificate.check(wrong))
    path = tmp_path / "nok.json"  # re-derives the rows from the params and the prefix
    certificate.write(path, document)
    args = ["prove", "no_k_in_row", "dims=8,8", "k=3", "--check", "--certificate", str(path)]
    done = cli(*args, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "holds" in done.stdout
