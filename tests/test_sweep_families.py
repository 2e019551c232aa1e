"""Every family through a sweep: `counts = "all"`, `start = "all"`, mirrored boards and
boxes; each canonical instance is solved once, the rest are recorded as equivalent rows,
and `catalog verify` re-checks every stored solution from the catalog alone."""

from puzzlesweep import catalog
from puzzlesweep import sweep as run_sweep

from .conftest import cli

SPEC = """
name = "families"
[[study]]
family = "monochromatic_lines"
[study.grid]
n = 3
d = 2
counts = ["all", [4, 5]]

[[study]]
family = "no_k_in_row"
[study.grid]
dims = [[4, 4], [3, 4], [4, 3], [1, 4, 3]]
k = 3

[[study]]
family = "domination"
count = true
[study.grid]
piece = "knight"
rows = "2..3"
cols = "2..3"

[[study]]
family = "peg_solitaire"
[study.grid]
side = 5
start = "all"
question = "reachable"
"""


def sweep(tmp_path, text: str, workers: int) -> tuple[str, dict]:
    """(the catalog, the report) of a sweep of spec `text` run in this process, on
    threads (`--backend threads`): the flow is the same, without starting Dask."""
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    results = tmp_path / "results"
    return results, run_sweep(str(spec), str(results), backend="threads", workers=workers)


def test_a_sweep_solves_each_canonical_instance_once(prefect_api, tmp_path):
    results, report = sweep(tmp_path, SPEC, workers=2)
    # 4 splits + (4, 5); 4 boxes; 4 boards; 15 start holes.
    assert (report["planned"], report["solved"]) == (5 + 4 + 4 + 15, 28)

    _, rows = catalog.query(
        results,
        "SELECT family, count(*), count(DISTINCT instance_key), "
        "count(*) FILTER (equivalent), count(*) FILTER (verified) "
        "FROM results GROUP BY family ORDER BY family",
    )
    assert rows == [
        ("domination", 4, 3, 1, 4),  # 2x3 and 3x2 are one instance
        ("monochromatic_lines", 5, 4, 1, 5),  # (4, 5) is (5, 4)
        ("no_k_in_row", 4, 2, 2, 4),  # 3x4, 4x3 and 1x4x3 are one box
        ("peg_solitaire", 15, 4, 11, 15),  # T_5 has 4 classes of start holes
    ]
    # Published values: OEIS A006075 (knights 2x2 -> 4, 3x3 -> 4); A181018 (docs/families.md):
    # 4x4 keeps 9 of 16 stones with no 3 in a row, so 7 are removed; Jaap Scherphuis's
    # table (jaapsch.net/puzzles/trisolit.htm): from every corner, 4 finishing holes.
    _, rows = catalog.query(
        results,
        "SELECT rows, cols, objective FROM results WHERE family = 'domination' ORDER BY rows, cols",
    )
    assert rows == [(2, 2, 4.0), (2, 3, 4.0), (3, 2, 4.0), (3, 3, 4.0)]
    # The study asked for counts of the optima: OEIS A006076 gives 1 and 2
    # inequivalent minimum covers of 2×2 and 3×3; 2×3 (and 3×2, carried over) has 4
    # covers of 4 knights, 2 up to the rectangle's symmetries (domination.exhaustive_count).
    _, rows = catalog.query(
        results,
        "SELECT rows, cols, solutions, inequivalent FROM results "
        "WHERE family = 'domination' ORDER BY rows, cols",
    )
    assert rows == [(2, 2, 1, 1), (2, 3, 4, 2), (3, 2, 4, 2), (3, 3, 8, 2)]
    _, rows = catalog.query(
        results,
        "SELECT start, objective, solve_seconds = 0 FROM results "
        "WHERE family = 'peg_solitaire' AND start IN (1, 11, 15) ORDER BY start",
    )
    assert [r[:2] for r in rows] == [(1, 4.0), (11, 4.0), (15, 4.0)]
    assert sum(r[2] for r in rows) == 2  # one corner solved, two carried over
    _, rows = catalog.query(
        results,
        "SELECT counts, objective FROM results WHERE family = 'monochromatic_lines' "
        "ORDER BY counts",
    )
    assert rows[0] == ([4, 5], 0.0) and rows[-1] == ([8, 1], 4.0)
    _, rows = catalog.query(
        results, "SELECT objective FROM results WHERE family = 'no_k_in_row' AND dims = [4, 4]"
    )
    assert rows == [(7.0,)]

    # A later run with one more box equivalent to the solved ones: it is new (its own
    # params), so it gets its own row under the same instance_key; the rest are skipped.
    _, again = sweep(tmp_path, SPEC.replace("[1, 4, 3]]", "[1, 4, 3], [3, 1, 4]]"), workers=1)
    assert (again["solved"], again["skipped"]) == (1, 28)
    _, rows = catalog.query(
        results,
        "SELECT count(*), count(DISTINCT instance_key), count(DISTINCT params_key) "
        "FROM results WHERE family = 'no_k_in_row'",
    )
    assert rows == [(5, 2, 5)]

    done = cli("catalog", "verify", "--catalog", str(results))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "29 solutions re-checked, 0 failed" in done.stdout


# The first antidiagonals of OEIS A181019 (the most stones kept on an m×n board with no
# three in a row along rows, columns or diagonals): 1×1 → 1, 1×2 → 2, 2×2 → 4, 1×3 → 2,
# 2×3 → 4, 3×3 → 6, 3×4 → 7, 4×4 → 9, so the fewest removed are m·n minus those. On the
# first three boards no window of 3 fits at all: the answer is 0, not an error. Beside
# them the other families' smallest boards: one colour on 3×3 (every one of its 8 lines
# is monochromatic), T_2 and T_3 (no solution), total domination of 1×1 (no solution).
TRIVIAL = """
name = "trivial"
[[study]]
family = "no_k_in_row"
[study.grid]
dims = [[1, 1], [1, 2], [2, 2], [1, 3], [2, 3], [3, 3], [3, 4], [4, 4]]
k = 3

[[study]]
family = "monochromatic_lines"
[study.grid]
n = 3
d = 2
counts = [[9]]

[[study]]
family = "peg_solitaire"
[study.grid]
side = [2, 3]
start = 1

[[study]]
family = "domination"
[study.grid]
rows = 1
cols = 1
variant = "total"
"""


def test_a_table_sweep_takes_every_trivial_board(prefect_api, tmp_path):
    results, report = sweep(tmp_path, TRIVIAL, workers=1)
    assert (report["planned"], report["solved"], report["counts"].get("error", 0)) == (12, 12, 0)
    _, rows = catalog.query(
        results,
        "SELECT dims, objective, verified FROM results WHERE family = 'no_k_in_row' "
        "ORDER BY dims[1] * dims[2], dims[1]",
    )
    kept = {(1, 1): 1, (1, 2): 2, (2, 2): 4, (1, 3): 2, (2, 3): 4, (3, 3): 6, (3, 4): 7, (4, 4): 9}
    assert {tuple(d): (o, v) for d, o, v in rows} == {
        board: (float(board[0] * board[1] - n), True) for board, n in kept.items()
    }
    _, rows = catalog.query(
        results,
        "SELECT family, status, objective FROM results WHERE family <> 'no_k_in_row' "
        "ORDER BY family, side",
    )
    assert rows == [
        ("domination", "infeasible", None),
        ("monochromatic_lines", "optimal", 8.0),
        ("peg_solitaire", "infeasible", None),
        ("peg_solitaire", "infeasible", None),
    ]
