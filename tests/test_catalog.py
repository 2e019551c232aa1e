"""The catalog without Prefect: typed columns, atomic files, the Python API, `file://`
URLs, compaction's commit protocol, and `catalog check` naming broken files."""

import fcntl
import json
import threading
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from puzzlesweep import catalog, puzzles
from puzzlesweep.cli import app
from puzzlesweep.core import Instance, make_params
from puzzlesweep.solve import solve_instance
from puzzlesweep.solvers import Limits


def cli(*args: str) -> SimpleNamespace:
    """`puzzlesweep ARGS...` in this process (the subprocess start-up of conftest.cli
    costs seconds; the real-subprocess runs are in test_resume.py)."""
    result = CliRunner().invoke(app, list(args))
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


# (family, params) solved in well under a second each.
SMALL = [
    ("domination", {"rows": 3, "cols": 3}),
    ("domination", {"rows": 4, "cols": 4}),
    ("domination", {"rows": 5, "cols": 5}),
    ("no_k_in_row", {"dims": [6, 7], "k": 4}),
    ("no_k_in_row", {"dims": [4, 4, 4], "k": 4}),
    ("peg_solitaire", {"side": 4, "start": 2, "objective": "min_moves"}),
]


def _row(family: str, raw: dict, run_id: str) -> dict:
    module = puzzles.get(family)
    row = solve_instance(
        Instance(family, make_params(module.Params, raw)), module.SOLVERS[0], Limits(20)
    )
    row.update(run_id=run_id, sweep="t", puzzlesweep_version="0", schema_version=1)
    return row


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [_row(family, raw, "r1") for family, raw in SMALL]


def _fill(root: Path, rows: list[dict]) -> None:
    """One file per row: the many small files a sweep leaves."""
    for number, row in enumerate(rows):
        module = puzzles.get(row["family"])
        catalog.write_batch(
            root, row["family"], module.Params, [row], catalog.batch_name("r1", number)
        )


def _everything(root) -> pa.Table:
    return catalog.to_arrow(root, "SELECT * EXCLUDE (family), family FROM results ORDER BY ALL")


def test_rows_are_typed_partitioned_and_written_whole(tmp_path, rows):
    _fill(tmp_path, rows)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "family=domination",
        "family=no_k_in_row",
        "family=peg_solitaire",
    ]
    assert not list(tmp_path.rglob("*.tmp"))
    # The family lives in the directory only (a Hive key inside a file is overridden).
    one = pq.read_schema(next((tmp_path / "family=no_k_in_row").iterdir()))
    assert "family" not in one.names and one.field("dims").type == pa.list_(pa.int64())
    _, types = catalog.query(
        tmp_path,
        "SELECT typeof(dims), typeof(rows), typeof(piece), typeof(start), typeof(finished_at),"
        " typeof(schema_version) FROM results WHERE family = 'no_k_in_row' LIMIT 1",
    )
    assert types == [
        ("BIGINT[]", "BIGINT", "VARCHAR", "BIGINT", "TIMESTAMP WITH TIME ZONE", "INTEGER")
    ]
    _, found = catalog.query(
        tmp_path,
        "SELECT dims, k, objective FROM results WHERE family = 'no_k_in_row' ORDER BY k, dims",
    )
    assert found == [([4, 4, 4], 4, found[0][2]), ([6, 7], 4, 11.0)]
    # A batch is replaced whole under its own name: a retry adds no rows.
    module = puzzles.get("domination")
    catalog.write_batch(
        tmp_path, "domination", module.Params, [rows[0]], catalog.batch_name("r1", 0)
    )
    assert catalog.query(tmp_path, "SELECT count(*) FROM results")[1] == [(6,)]


def test_python_api_and_file_url_give_the_same_rows(tmp_path, rows):
    _fill(tmp_path, rows)
    url = tmp_path.as_uri()
    assert url.startswith("file:///")
    relation = catalog.open(url)
    assert isinstance(relation, duckdb.DuckDBPyRelation)
    # OEIS A006075: knights dominate 3x3, 4x4, 5x5 with 4, 4, 5.
    domination = relation.filter("family = 'domination'").order("rows")
    assert domination.select("rows, objective").fetchall() == [(3, 4.0), (4, 4.0), (5, 5.0)]
    local, remote = _everything(tmp_path), _everything(url)
    assert local.equals(remote) and local.num_rows == 6
    # The pyarrow-dataset scan (the object-store path) reads the same rows.
    arrow = catalog.connect(tmp_path, engine="arrow").sql(
        "SELECT * EXCLUDE (family), family FROM results ORDER BY ALL"
    )
    assert arrow.to_arrow_table().to_pylist() == local.to_pylist()
    frame = catalog.to_pandas(
        url, "SELECT family, count(*) AS n FROM results GROUP BY 1 ORDER BY 1"
    )
    assert frame.to_dict("list") == {
        "family": ["domination", "no_k_in_row", "peg_solitaire"],
        "n": [3, 2, 1],
    }


def test_compaction_preserves_rows_exactly_and_old_readers_keep_reading(tmp_path, rows):
    _fill(tmp_path, rows)
    before = _everything(tmp_path)
    reader = catalog.connect(tmp_path)  # a reader holding the old file list
    done = cli("catalog", "compact", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "2 partitions compacted, 0 old files deleted" in done.stdout  # peg has 1 file
    after = _everything(tmp_path)
    assert after.equals(before) and after.num_rows == 6
    names = sorted(p.name.split("-")[0] for p in catalog.files(tmp_path))
    assert names == ["compact", "compact", "part"]
    # The old files are still there, hidden by the commit, so the reader still works.
    assert reader.execute("SELECT count(*) FROM results").fetchall() == [(6,)]
    assert len(list(tmp_path.glob("family=*/part-*.parquet"))) == 6
    # A second compaction merges nothing; with no grace the hidden files go.
    report = catalog.compact(tmp_path, grace_seconds=0)
    assert report == [{"deleted": 5}]
    assert _everything(tmp_path).equals(before)
    assert len(list(tmp_path.glob("family=*/*.parquet"))) == 3
    assert cli("catalog", "check", "--catalog", str(tmp_path)).returncode == 0


def test_uncommitted_or_conflicting_compactions_stay_hidden(tmp_path, rows):
    _fill(tmp_path, rows[:3])  # three domination files
    before = _everything(tmp_path)
    catalog.compact(tmp_path)
    # A compaction that lost a race: its record removes files an earlier one removed.
    (commit,) = list((tmp_path / "_commits").glob("*.json"))
    record = json.loads(commit.read_text())
    loser = tmp_path / "family=domination" / "compact-99999999999999999999-loser.parquet"
    loser.write_bytes((tmp_path / record["add"][0]).read_bytes())
    late = dict(record, add=[str(loser.relative_to(tmp_path))])
    (tmp_path / "_commits" / "99999999999999999999-late.json").write_text(json.dumps(late))
    # A compaction output whose commit was never written (killed mid-way).
    orphan = tmp_path / "family=domination" / "compact-00000000000000000001-dead.parquet"
    orphan.write_bytes(loser.read_bytes())
    assert _everything(tmp_path).equals(before)
    assert catalog.query(tmp_path, "SELECT count(*) FROM results")[1] == [(3,)]


def test_check_names_truncated_and_mismatched_files(tmp_path, rows):
    _fill(tmp_path, rows)
    done = cli("catalog", "check", "--catalog", str(tmp_path))
    assert done.returncode == 0 and "ok: 6 result files" in done.stdout
    (victim,) = (tmp_path / "family=no_k_in_row").glob("part-r1-00003.parquet")
    victim.write_bytes(victim.read_bytes()[:-100])
    good = pq.read_table(tmp_path / "family=domination" / "part-r1-00000.parquet")
    index = good.schema.get_field_index("rows")
    wrong = good.set_column(index, "rows", good.column("rows").cast(pa.string()))
    pq.write_table(wrong, tmp_path / "family=domination" / "part-x-00000.parquet")
    (tmp_path / "notes.txt").write_text("stray")
    done = cli("catalog", "check", "--catalog", str(tmp_path))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert any("family=no_k_in_row/part-r1-00003.parquet: unreadable" in line for line in lines), (
        done.stdout
    )
    (schema_line,) = [line for line in lines if "part-x-00000.parquet" in line]
    assert "schema" in schema_line and "column rows is string, expected int64" in schema_line
    assert any("notes.txt: stray" in line for line in lines)
    assert "3 problems" in done.stderr


def test_summary_counts_by_run_and_family_and_the_optimum_table(tmp_path, rows):
    _fill(tmp_path, rows)
    done = cli("catalog", "summary", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "counts by run and family" in text and "domination: best result by parameters" in text
    lines = [line for line in text.splitlines() if "│" in line]
    counts = [line.split("│") for line in lines if " r1 " in line]
    assert [cell.strip() for cell in counts[0][1:5]] == ["r1", "t", "domination", "3"]
    assert any("no_k_in_row" in line for line in text.splitlines())


def test_bad_catalog_input_is_named_and_exits_2(tmp_path, rows):
    missing = str(tmp_path / "none")
    for args in (["summary"], ["check"], ["compact"]):
        done = cli("catalog", *args, "--catalog", missing)
        assert done.returncode == 2 and "does not exist" in done.stderr, args
    _fill(tmp_path, rows[:1])
    done = cli("catalog", "compact", "--catalog", str(tmp_path), "--family", "sudoku")
    assert done.returncode == 2 and "no partition family=sudoku" in done.stderr
    done = cli("catalog", "query", "SELECT nope FROM results", "--catalog", str(tmp_path))
    assert done.returncode == 2 and "nope" in done.stderr
    (tmp_path / "_commits").mkdir(exist_ok=True)
    with open(tmp_path / "_commits" / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a running compaction holds it
        done = cli("catalog", "compact", "--catalog", str(tmp_path))
    assert done.returncode == 2 and "another compaction is running" in done.stderr
    (tmp_path / "file").write_text("x")
    done = cli("catalog", "query", "SELECT 1", "--catalog", str(tmp_path / "file"))
    assert done.returncode == 2 and "is not a directory" in done.stderr
    assert len(catalog.files(tmp_path)) == 1


def test_a_non_local_filesystem_takes_the_same_code_path(rows):
    # fsspec's in-memory filesystem stands in for an object store: no fsync, moves by
    # copy, scans through a pyarrow dataset instead of DuckDB's own file reader.
    url = f"memory://catalog-{id(rows)}/results"
    for number, row in enumerate(rows):
        module = puzzles.get(row["family"])
        catalog.write_batch(
            url, row["family"], module.Params, [row], catalog.batch_name("m", number)
        )
    assert not catalog.locate(url).local and len(catalog.files(url)) == 6
    before = _everything(url)
    assert before.num_rows == 6 and before.column("family").to_pylist().count("domination") == 3
    report = catalog.compact(url)
    assert [item.get("files") for item in report] == [3, 2, None] and report[-1]["deleted"] == 0
    assert _everything(url).equals(before)
    assert catalog.compact(url, grace_seconds=0) == [{"deleted": 5}]
    assert _everything(url).equals(before) and catalog.check(url) == []
    with pytest.raises(catalog.BadInput, match="engine duckdb reads local catalogs only"):
        catalog.open(url, engine="duckdb")


def test_readers_during_writes_and_compactions_never_see_rows_twice_or_lose_them(tmp_path, rows):
    # Each read takes a fresh snapshot; a row count above what had been written when the
    # read ended means a merged file and its inputs were both read, below what had been
    # written when it began means rows went missing.
    _fill(tmp_path, rows)
    written = [len(rows)]
    seen: list[tuple[int, int, int]] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            before = written[0]
            count = catalog.query(tmp_path, "SELECT count(*) FROM results")[1][0][0]
            seen.append((before, count, written[0]))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        module = puzzles.get("domination")
        for round_ in range(6):
            for number in range(2):
                row = dict(rows[0], run_id=f"w{round_}")
                catalog.write_batch(
                    tmp_path,
                    "domination",
                    module.Params,
                    [row],
                    catalog.batch_name(f"w{round_}", number),
                )
                written[0] += 1
            catalog.compact(tmp_path)
    finally:
        stop.set()
        reader.join()
    assert len(seen) >= 6
    assert all(before <= count <= after for before, count, after in seen), seen
    assert catalog.query(tmp_path, "SELECT count(*) FROM results")[1] == [(len(rows) + 12,)]
