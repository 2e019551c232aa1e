"""The split chosen by the solver: a tree of 0/1 fixings grown by LP lookahead, whose
leaves partition the space, proves a 2-D board's exact optimum with real HiGHS and
re-checks as a certificate."""

import json

import pytest

from puzzlesweep import certificate, puzzles
from puzzlesweep.core import BadInput
from puzzlesweep.proof import Proof, best_row, build, combined_row, solve_one
from puzzlesweep.solvers import Limits, lookahead
from puzzlesweep.solvers import split as splitting

NOK = puzzles.get("no_k_in_row")


def test_a_lookahead_tree_proves_seven_by_seven_no_three_in_a_row():
    # OEIS A181018: 26 stones kept on 7×7 with no three in a row, so 49 − 26 = 23 removed
    model = NOK.model(NOK.Params(dims=[7, 7], k=3))
    text = lookahead.resolve(model, "lookahead:6")
    assert text == lookahead.resolve(model, "lookahead:6")  # deterministic: a stable key
    split, _ = lookahead.tree_split(text, model.num_cols)
    assert len(split.parts) == 6 and splitting.covers(split) is None
    for part in split.parts:  # every leaf fixes a path, no two leaves alike
        assert 1 <= len(part.fixings) and len({c for c, _ in part.fixings}) == len(part.fixings)
    assert "no part covers" in splitting.covers(
        splitting.Split((), split.parts[1:], len(split.parts) - 1)
    )
    proof = Proof("no_k_in_row", {"dims": [7, 7], "k": 3}, text, 1, Limits(30))
    rows = solve_parts(proof, split)
    combined = combined_row(proof, dict(enumerate(rows)), None, "t")
    assert (combined["status"], combined["objective"], combined["bound"]) == ("optimal", 23, 23)
    # the certificate of a tree split re-derives its parts from the tree text alone
    document = _document(proof, rows, combined)
    assert certificate.check(document) == []
    document["parts"][2]["fixings"] = []
    assert certificate.check(document)[0].startswith("part 2: ")


def solve_parts(proof: Proof, split) -> list[dict]:
    """The row of every part of `split`, in this process, each with the best incumbent
    of the parts before it − 1 as its cutoff, as the prove flow gives them."""
    rows: list[dict] = []
    for part in split.parts:
        best = best_row(rows)
        cutoff = None if best is None else best["objective"] - 1
        rows.append(solve_one(proof, part.index, cutoff, proof.limits, "t"))
    return rows


def _document(proof: Proof, rows: list[dict], combined: dict) -> dict:
    """The certificate document of an attempt solved in this process (no catalog)."""
    _, _, split, _ = build(proof)
    parts = []
    for part, row in zip(split.parts, rows, strict=True):
        handle = json.loads(row["subproblem"])
        parts.append(
            {
                **{k: row[k] for k in ("status", "objective", "bound")},
                "index": part.index,
                "label": part.label,
                "counts": [],
                "fixings": [[c, int(v)] for c, v in part.fixings],  # as export writes
                "cutoff": handle["cutoff"],
                "lower": handle["lower"],
            }
        )
    return {
        "format": certificate.FORMAT,
        "family": proof.family,
        "params": proof.params,
        "split": proof.split,
        "width": proof.width,
        "solver": proof.solver,
        "key": proof.key,
        "claim": {k: combined[k] for k in ("status", "objective", "bound", "solution")},
        "probe": None,
        "cited": json.loads(combined["certificate"])["cited"],
        "parts": parts,
    }


def test_tree_texts_are_checked():
    for text, message in [
        ("tree:3,.", "ends inside"),
        ("tree:3,.,.,.", "tokens after"),
        ("tree:3,3,.,.,.", "not a free column"),
        ("tree:99,.,.", "not a free column"),
        ("tree:x", "not a free column"),
    ]:
        with pytest.raises(ValueError, match=message):
            lookahead.parse_tree(text, 36)
        with pytest.raises(BadInput, match=message):
            build(Proof("no_k_in_row", {"dims": [6, 6], "k": 3}, text, 1, Limits(1)))
    for number in ("0", "\u0663", "+3", " 3", "4097"):  # ٣ is a digit to str.isdigit
        with pytest.raises(ValueError, match="needs N in 1..4096"):
            lookahead.resolve(NOK.model(NOK.Params(dims=[6, 6], k=3)), f"lookahead:{number}")
    # 6×7, k = 5 and 6×6, k = 3 (with its sub-board cuts): the root LP bound already
    # exceeds the start's cutoff (8.4 > 7, 16 > 15), so the tree is one leaf
    assert lookahead.resolve(NOK.model(NOK.Params(dims=[6, 6], k=3)), "lookahead:8") == "tree:."
    model = NOK.model(NOK.Params(dims=[6, 7], k=5))
    assert lookahead.resolve(model, "lookahead:8") == "tree:."
    # a tree split works for a family without split_model (knights domination)
    proof = Proof(
        "domination", {"piece": "knight", "rows": 4, "cols": 4}, "tree:5,.,.", 1, Limits(9)
    )
    assert [p.label for p in build(proof)[2].parts] == ["x5=0", "x5=1"]
