"""The split taken from SCIP's own search tree (`--split nodes:N`): the open nodes of a
short SCIP solve become a tree of 0/1 fixings whose leaves partition the space; its
parts prove a 2-D board's exact optimum with real SCIP and the certificate file passes
`prove --check`."""

import pytest

from puzzlesweep import certificate, puzzles
from puzzlesweep.proof import Proof, combined_row
from puzzlesweep.solvers import Limits, lookahead, ramp
from puzzlesweep.solvers import split as splitting
from puzzlesweep.solvers.mip import MipModel

from .conftest import cli
from .test_lookahead import _document, solve_parts

KNIGHTS = puzzles.get("domination")
NOK = puzzles.get("no_k_in_row")


def test_the_open_nodes_of_a_ramp_up_prove_knights_ten_by_ten(tmp_path):
    # OEIS A006075: 16 knights dominate the 10×10 board
    params = {"piece": "knight", "rows": 10, "cols": 10}
    model = KNIGHTS.model(KNIGHTS.Params(**params))
    found = ramp.ramp_up(model, 20)
    assert (found.status, found.nodes) == ("nodelimit", 20) and found.open >= 2
    assert ramp.resolve(model, "nodes:20") == found.tree  # deterministic: a stable key
    split, _ = lookahead.tree_split(found.tree, model.num_cols)
    assert len(split.parts) == found.open + found.closed
    assert splitting.fixings_cover(split.parts) is None
    proof = Proof("domination", params, found.tree, 0, Limits(30), solver="scip")
    rows = solve_parts(proof, split)  # each with the best cutoff so far, as the flow does
    combined = combined_row(proof, dict(enumerate(rows)), None, "t")
    assert (combined["status"], combined["objective"], combined["bound"]) == ("optimal", 16, 16)
    path = tmp_path / "knights.json"  # the certificate file re-checks from the tree alone
    certificate.write(path, _document(proof, rows, combined))
    args = ["prove", "domination", *(f"{k}={v}" for k, v in params.items()), "--check"]
    done = cli(*args, "--certificate", str(path), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "holds" in done.stdout


def test_tree_text_follows_the_paths_and_closes_the_sides_no_path_reaches():
    # x3=0 then x5=1 is open, x3=1 is open, x3=0 x5=0 was pruned: one closed leaf
    assert ramp.tree_text([((3, 0.0), (5, 1.0)), ((3, 1.0),)]) == ("tree:3,5,.,.,.", 1)
    # a path that does not fix the column goes to both sides (still a partition)
    text, closed = ramp.tree_text([((3, 0.0),), ((7, 1.0),)])
    assert (text, closed) == ("tree:3,.,7,.,.", 1)
    split, _ = lookahead.tree_split(text, 8)
    assert splitting.fixings_cover(split.parts) is None
    assert ramp.tree_text([]) == ("tree:.", 1)


def test_nodes_texts_are_checked_and_a_solved_instance_is_one_leaf():
    model = NOK.model(NOK.Params(dims=[6, 6], k=3))
    for number in ("0", "\u0663", "+3", " 3", "100001", ""):  # ٣ is a digit to str.isdigit
        with pytest.raises(ValueError, match="needs N in 1..100000"):
            ramp.resolve(model, f"nodes:{number}")
    assert ramp.resolve(model, "tree:.") == "tree:."
    # 8×8, k = 3 is proven at SCIP's root (28 removed, OEIS A181018): one leaf
    assert ramp.resolve(NOK.model(NOK.Params(dims=[8, 8], k=3)), "nodes:50") == "tree:."


def test_a_branching_that_is_no_zero_one_fixing_is_refused():
    # max x + 1.1 y with 2x + 2y <= 3 over integers 0..5: the root LP (y = 1.5) branches
    # on y <= 1 / y >= 2, which no 0/1 tree can hold
    model = MipModel([-1.0, -1.1], [0.0, 0.0], [5.0, 5.0], [True, True])
    model.add_row([0, 1], [2.0, 2.0], -float("inf"), 3.0)
    model.scip_options = {
        "presolving/maxrounds": 0,
        "separating/maxroundsroot": 0,
        "propagating/maxroundsroot": 0,
    }
    with pytest.raises(ValueError, match="not a 0/1 fixing"):
        ramp.ramp_up(model, 1)
    model.upper = [1.0, 1.0]  # as 0/1 columns it is solved at the root
    assert ramp.ramp_up(model, 1).tree == "tree:."
