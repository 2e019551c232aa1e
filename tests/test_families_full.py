"""Every family in full, against published values, through `puzzlesweep solve` as a user
types it: peg solitaire's new `reachable` question, the variants of domination, colour
splits and four dimensions, bad parameters, pictures, and the catalog re-check."""

import json

import pytest

from puzzlesweep import catalog, puzzles
from puzzlesweep.core import BadInput, make_params
from puzzlesweep.flows.spec import expand_grid
from puzzlesweep.puzzles import Instance, peg_solitaire
from puzzlesweep.solve import solve_instance, solve_instances
from puzzlesweep.solvers import Limits, frontier

from .conftest import cli, solve_json


def solve(family: str, **raw) -> dict:
    module = puzzles.get(family)
    return solve_instance(
        Instance(family, make_params(module.Params, raw)), module.SOLVERS[0], Limits(60)
    )


# --- peg solitaire -------------------------------------------------------------------
def test_reachable_reports_positions_per_jump_and_finishing_holes():
    # Jaap Scherphuis, "Triangular Peg Solitaire" (jaapsch.net/puzzles/trisolit.htm), the
    # table of reachable positions from a1 (our hole 1): 1, 2, 8, 35, ..., 18, 4 after
    # 0..13 jumps, 3016 in all; the last peg at a1, a4, d4, c5 = holes 1, 7, 10, 13.
    result = solve_json("peg_solitaire", "side=5", "start=1", "question=reachable")
    assert result["layers"] == [1, 2, 8, 35, 122, 293, 530, 679, 623, 414, 212, 75, 18, 4]
    assert sum(result["layers"]) == 3016
    assert result["finishing_holes"] == [1, 7, 10, 13]
    assert (result["status"], result["objective"], result["verified"]) == ("optimal", 4, True)


@pytest.mark.parametrize(
    "start, layers, finishes",
    [
        # The same table: from c5 (hole 13) 4237 positions, finishing a1 a4 b3 c5 d4;
        # from b3 (hole 5) 1651 positions and only c5 (hole 13).
        (13, [1, 4, 16, 59, 186, 446, 760, 931, 840, 583, 285, 98, 23, 5], [1, 5, 7, 10, 13]),
        (5, [1, 2, 6, 21, 58, 139, 260, 350, 351, 261, 142, 49, 10, 1], [13]),
    ],
)
def test_reachable_matches_the_published_table(start, layers, finishes):
    row = solve("peg_solitaire", side=5, start=start, question="reachable")
    answer = puzzles.get("peg_solitaire").decode(row["solution"])
    assert list(answer.layers) == layers
    assert [h + 1 for h, _ in answer.finishes] == finishes
    assert row["verified"] is True


def test_min_moves_reports_the_move_list():
    # OEIS A127500: T_5 needs 9 moves (from hole 4, or its images 6 and 13).
    result = solve_json("peg_solitaire", "side=5", "start=13", "question=min_moves")
    assert result["objective"] == 9 and len(result["moves"]) == 9
    assert result["jumps"] == 13 and result["verified"] is True
    assert all(len(move.split("-")) >= 2 for move in result["moves"])


def test_larger_triangles_solve():
    # T_6 and T_8 from their corner; every solution leaves one peg (T(n) - 2 jumps).
    for side in (6, 8):
        row = solve("peg_solitaire", side=side, start=1)
        assert (row["status"], row["verified"]) == ("optimal", True)
        jumps = puzzles.get("peg_solitaire").decode(row["solution"])
        assert len(jumps) == side * (side + 1) // 2 - 2


def test_finish_on_a_given_hole():
    # Jaap's table: from hole 1 (a1) the last peg can stand on hole 7 (a4) but not on
    # hole 4 (a3), which is not among a1, a4, c5, d4.
    assert solve("peg_solitaire", side=5, start=1, finish=7)["status"] == "optimal"
    assert solve("peg_solitaire", side=5, start=1, finish=4)["status"] == "infeasible"


# --- domination ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "piece, variant, values",
    [
        # OEIS A342576 (independent knights, n x n), n = 1..8.
        ("knight", "independent", [1, 4, 4, 4, 5, 8, 13, 14]),
        # OEIS A261752 (total knights, n x n), n = 4..8 (n < 4 has an unattacked square).
        ("knight", "total", [None, None, None, 6, 7, 8, 10, 14]),
        # Kings: ceil(n/3)^2 (Watkins, Across the Board, 2004), n = 1..8.
        ("king", "dominating", [1, 1, 1, 4, 4, 4, 9, 9]),
        # OEIS A075458 (queens, n x n), n = 1..7 (8 -> 5 is in test_families).
        ("queen", "dominating", [1, 1, 1, 2, 3, 3, 4]),
    ],
)
def test_domination_variants_match_published_sequences(piece, variant, values):
    found = [
        solve("domination", piece=piece, rows=n, cols=n, variant=variant)["objective"]
        for n in range(1, len(values) + 1)
    ]
    assert found == values


def test_rectangular_boards_are_one_instance_with_their_transpose():
    # OEIS A006075 gives 8 knights for 6x6; 4x7 and 7x4 answer alike (6 knights, computed
    # here by HiGHS and checked by the exhaustive search in test_second_method).
    wide, tall = solve("domination", rows=4, cols=7), solve("domination", rows=7, cols=4)
    assert wide["instance_key"] == tall["instance_key"]
    assert wide["objective"] == tall["objective"] and tall["verified"]


# --- monochromatic lines and no-k-in-a-row -----------------------------------------------
def test_every_split_of_the_counts():
    # counts = "all": every split of 3^2 = 9 balls into two colours, up to swapping them.
    points = expand_grid("monochromatic_lines", {"n": 3, "d": 2, "counts": "all"})
    assert [p["counts"] for p in points] == [[8, 1], [7, 2], [6, 3], [5, 4]]
    three = expand_grid("monochromatic_lines", {"n": 2, "d": 2, "counts": "all", "c": 3})
    assert [p["counts"] for p in three] == [[2, 1, 1]]
    # docs/families.md: 3^2 with (5, 4) has no monochromatic line (tic-tac-toe can be drawn).
    values = [solve("monochromatic_lines", **p)["objective"] for p in points]
    assert values[-1] == 0 and values == sorted(values, reverse=True)


def test_no_k_in_row_in_four_dimensions():
    # (3^D - 1)/2 = 40 directions in 4-D; a 2x2x2x2 box with k = 2 keeps no two stones
    # adjacent along any of them, so at most one stone per box survives: 15 removals.
    row = solve("no_k_in_row", dims=[2, 2, 2, 2], k=2)
    assert (row["status"], row["objective"], row["verified"]) == ("optimal", 15, True)


# --- bad parameters name the parameter, exit 2 -------------------------------------------
@pytest.mark.parametrize(
    "family, raw, word",
    [
        ("peg_solitaire", {"side": 5, "start": 1, "finish": "16"}, "finish"),
        ("peg_solitaire", {"side": 1, "start": 1}, "side must lie in 2..10"),
        ("peg_solitaire", {"side": 5, "start": 1, "question": "fastest"}, "question"),
        ("peg_solitaire", {"side": 5, "start": 1, "objective": "min_moves"}, "called question"),
        ("monochromatic_lines", {"n": 3, "d": 2, "counts": []}, "one or more colours"),
        ("no_k_in_row", {"dims": [2, 2], "k": 0}, "k must be at least 1"),
        ("no_k_in_row", {"dims": [2] * 11, "k": 2}, "dims"),
        ("domination", {"rows": 4, "cols": 4, "variant": "perfect"}, "variant"),
    ],
)
def test_bad_parameters_are_named(family, raw, word):
    with pytest.raises(BadInput, match=word):
        make_params(puzzles.get(family).Params, raw)


@pytest.mark.parametrize(
    "args, word",
    [
        (["peg_solitaire", "side=5", "start=0"], "start hole 0 is not on T_5"),
        (["monochromatic_lines", "n=3", "d=2", "counts=all"], "counts"),
        (["domination", "rows=4", "cols=4", "--picture", "board.gif"], "--picture"),
    ],
)
def test_bad_parameters_exit_2(args, word):
    done = cli("solve", *args)
    assert done.returncode == 2, done.stdout
    assert word in done.stderr and done.stdout == ""


def test_a_sweep_word_that_is_not_known_is_named():
    with pytest.raises(ValueError, match="counts"):
        expand_grid("monochromatic_lines", {"n": 3, "d": 2, "counts": "some"})
    with pytest.raises(ValueError, match="c: "):
        expand_grid("monochromatic_lines", {"n": 3, "d": 2, "counts": "all", "c": 1})


# --- pictures ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "family, params, suffix, magic",
    [
        ("domination", ["piece=queen", "rows=5", "cols=5"], ".svg", b"<?xml"),
        ("peg_solitaire", ["side=4", "start=2", "question=reachable"], ".png", b"\x89PNG"),
    ],
)
def test_picture_is_written(tmp_path, family, params, suffix, magic):
    path = tmp_path / f"picture{suffix}"
    done = cli("solve", family, *params, "--picture", str(path))
    assert done.returncode == 0, done.stderr
    assert path.read_bytes().startswith(magic) and path.stat().st_size > 1000


def test_every_family_draws_its_seed_instance():
    # The pictures under docs/ come from the seed instances (docs/families.md); here every
    # picture() returns a figure with one panel per slice or per move.
    cases = [
        ("monochromatic_lines", {"n": 2, "d": 3, "counts": [4, 4]}, 2),  # 2 slices
        ("no_k_in_row", {"dims": [6, 7], "k": 5}, 1),
        ("domination", {"rows": 8, "cols": 8}, 1),
        ("peg_solitaire", {"side": 5, "start": 1}, None),  # the start, then every move
    ]
    for family, raw, panels in cases:
        module = puzzles.get(family)
        row = solve(family, **raw)
        solution = module.decode(row["solution"])
        figure = module.picture(make_params(module.Params, raw), solution)
        if panels is None:
            panels = 1 + peg_solitaire.moves(solution)
        assert len([ax for ax in figure.axes if ax.has_data() or ax.patches]) == panels


# --- the catalog re-checks itself ------------------------------------------------------
def test_catalog_verify_rechecks_every_solution(tmp_path):
    results = tmp_path / "results"
    batches = {
        "domination": [{"rows": 5, "cols": 3}, {"rows": 3, "cols": 5, "piece": "king"}],
        "peg_solitaire": [
            {"side": 4, "start": 2, "question": "reachable"},
            {"side": 5, "start": 4},
        ],
        "no_k_in_row": [{"dims": [4, 4], "k": 3}],
        "monochromatic_lines": [{"n": 3, "d": 2, "counts": [4, 5]}],
    }
    for family, raws in batches.items():
        module = puzzles.get(family)
        instances = [Instance(family, make_params(module.Params, raw)) for raw in raws]
        rows = solve_instances(instances, module.SOLVERS[0], Limits(30))
        catalog.write_batch(results, module.Params, rows)
    done = cli("catalog", "verify", "--catalog", str(results))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 solutions re-checked, 0 failed" in done.stdout

    # A tampered row: a knight taken off the 5x3 board leaves a square uncovered.
    module = puzzles.get("domination")
    row = solve("domination", rows=5, cols=3)
    row["solution"] = ",".join(row["solution"].split(",")[1:])
    row["run_id"] = "tampered"
    catalog.write_batch(results, module.Params, [row])
    done = cli("catalog", "verify", "--catalog", str(results))
    assert done.returncode == 1
    assert "7 solutions re-checked, 1 failed" in done.stdout
    assert "tampered" in done.stdout and "not covered" in done.stdout


def test_catalog_verify_on_a_missing_catalog_exits_2(tmp_path):
    done = cli("catalog", "verify", "--catalog", str(tmp_path / "none"))
    assert done.returncode == 2 and "does not exist" in done.stderr


def test_json_of_reachable_is_one_object():
    done = cli("solve", "peg_solitaire", "side=4", "start=2", "question=reachable", "--json")
    result = json.loads(done.stdout)
    # T_4 from hole 2: 8 jumps to one peg; the finishing hole is found by both methods.
    assert len(result["layers"]) == 9 and result["layers"][0] == 1
    assert result["finishing_holes"] == [3]


def fewest_over_all_starts(side: int, limit: float = 60) -> float:
    """A127500's question in one search (every start a root, every one-peg position a
    goal); the witness is replayed by the verifier from its own start hole."""
    starts = list(range(peg_solitaire.holes(side)))
    result = frontier.solve(peg_solitaire.problem(side, starts, None, "min_moves"), Limits(limit))
    assert result.status == "optimal", result
    path = tuple(result.solution)
    p = make_params(
        peg_solitaire.Params, {"side": side, "start": path[0][2] + 1, "question": "min_moves"}
    )
    assert peg_solitaire.verify(p, path) == result.objective
    return result.objective


def test_fewest_moves_over_all_starts_matches_a127500():
    # OEIS A127500 (G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008)
    # 08.4.8): T_4 -> 5, T_5 -> 9, T_6 -> 9 moves over all one-vacancy starts and all
    # finishes. About a second in all here (a plain depth-first search took 437 s on T_6).
    assert [fewest_over_all_starts(side) for side in (4, 5, 6)] == [5, 9, 9]


@pytest.mark.slow
def test_t7_fewest_moves_matches_a127500():
    # OEIS A127500, Bell (2008): T_7 -> 12 moves. About 15 s and 0.3 GB here (the numpy
    # layered engine took 164 s and 1.3 GB).
    assert fewest_over_all_starts(7, limit=1200) == 12


@pytest.mark.slow
def test_t7_corner_and_hole_5_have_no_solution():
    # G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008) 08.4.8: the four
    # position classes; from holes 1 and 5 of T_7 no one-peg position is in the start's
    # class, so `solve` is infeasible at once, and the exact enumeration without
    # symmetry (`reachable`) independently reaches no one-peg position. (Without the
    # classes, a plain depth-first search ran 600 s here without an answer.)
    module = puzzles.get("peg_solitaire")
    for start in (1, 5):
        for question, status in (("solve", "infeasible"), ("reachable", "optimal")):
            params = {"side": 7, "start": start, "question": question}
            row = solve_instance(
                Instance("peg_solitaire", make_params(module.Params, params)),
                "frontier",
                Limits(900),
            )
            assert row["status"] == status and not row["objective"], row
