"""The run's summary at the terminal: every instance one per row for a small sweep,
one row per family, solver, status and origin for a large one."""

from rich.console import Console

from puzzlesweep import catalog
from puzzlesweep import sweep as run_sweep
from puzzlesweep.cli.display import LISTED, summary_table
from puzzlesweep.flows.spec import load

LINES = """
name = "lines"
[[study]]
family = "no_k_in_row"
[study.grid]
dims = "3..33"
k = [2, 3]
"""


def test_a_large_sweep_is_summed_up_one_row_per_group(prefect_api, tmp_path):
    spec = tmp_path / "lines.toml"
    spec.write_text(LINES)
    results = tmp_path / "results"
    report = run_sweep(str(spec), str(results), backend="threads", workers=2)
    assert report["solved"] == 62 > LISTED
    # A line of n stones keeps no k in a row once floor(n / k) are removed (every k-th;
    # fewer leave a window of k untouched): the 1-D case of docs/families.md's no_k_in_row.
    _, rows = catalog.query(results, "SELECT dims, k, objective, solver, status FROM results")
    assert {(d[0], k, o) for d, k, o, *_ in rows} == {
        (n, k, n // k) for n in range(3, 34) for k in (2, 3)
    }
    [(solver, status)] = {(solver, status) for *_, solver, status in rows}

    console = Console(record=True, width=200)
    console.print(summary_table(str(results), load(str(spec)), report["run_id"]))
    text = console.export_text()
    assert "sweep lines: 62 instances (62 solved now)" in " ".join(text.split())
    assert "one row per group; `puzzlesweep catalog query` lists each instance" in text
    [row] = [line for line in text.splitlines() if "no_k_in_row" in line]
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    assert cells[:6] == ["no_k_in_row", solver, status, "solved", "62", "1..16"]
