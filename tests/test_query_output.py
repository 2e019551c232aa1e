"""`catalog query`'s table format draws what a terminal can (the first rows, long values
cut with a mark, a line naming what was left out), as DuckDB's CLI does; csv and json
print every row whole."""

import csv
import io
import json
from datetime import UTC, datetime

from puzzlesweep import catalog
from puzzlesweep.cli.common import CELL_CHARS, CUT, QUERY_ROWS

from .test_catalog import _row, _write, cli

BIG = "SELECT repeat('x', 100000) AS big, range AS n FROM range(100)"  # 100 rows of 100 kB


def test_the_table_format_draws_the_first_rows_with_long_values_cut(tmp_path):
    assert _write(tmp_path, _row("domination", {"rows": 3, "cols": 3}, "r1"), "r1-0")
    done = cli("catalog", "query", BIG, "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert len(done.stdout) < 100_000, len(done.stdout)  # 10 MB answered
    cells = [line.split("│")[1:3] for line in done.stdout.splitlines() if "│" in line]
    assert [int(n) for _, n in cells] == list(range(QUERY_ROWS))
    assert all(big.strip() == "x" * (CELL_CHARS - 1) + CUT for big, _ in cells)
    assert done.stdout.splitlines()[-1] == (
        "60 more rows left out (100 in all); values over 120 characters cut (…): "
        "--format csv or json prints them whole"
    )
    # csv and json stay whole
    done = cli("catalog", "query", BIG, "--catalog", str(tmp_path), "--format", "csv")
    csv.field_size_limit(2**24)
    rows = list(csv.reader(io.StringIO(done.stdout)))
    assert len(rows) == 101 and all(len(big) == 100_000 for big, _ in rows[1:])
    done = cli("catalog", "query", BIG + " LIMIT 3", "--catalog", str(tmp_path), "--format", "json")
    assert [len(record["big"]) for record in json.loads(done.stdout)] == [100_000] * 3


def test_a_run_with_a_large_spec_lists_in_a_few_lines(tmp_path):
    # a spec of 0.9 MB with 45,000 lines stored in runs (the tester's case drew 450,062
    # lines); short values such as the run id stay whole
    spec = "\n".join(f"# line {i}: {'y' * 10}" for i in range(45_000))
    now = datetime.now(UTC)
    catalog.write_run(
        tmp_path,
        {"run_id": "run-20261204-0001", "sweep": "s", "state": "finished", "spec": spec}
        | {"started_at": now},
    )
    assert _write(tmp_path, _row("domination", {"rows": 3, "cols": 3}, "r1"), "r1-0")
    done = cli("catalog", "query", "SELECT run_id, spec FROM runs", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) < 20, done.stdout
    assert "run-20261204-0001" in done.stdout and CUT in done.stdout
    assert "more rows left out" not in done.stdout  # one row: none left out
