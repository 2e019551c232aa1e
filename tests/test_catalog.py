"""The catalog without Prefect: two real Delta tables on disk, idempotent batch commits,
outside readers (deltalake, polars, pandas, DuckDB) with no project code, compaction,
time travel, damaged files, run heartbeats, and migration of the old layout."""

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from typer.testing import CliRunner

from puzzlesweep import catalog, puzzles, reverify
from puzzlesweep.catalog import write
from puzzlesweep.cli import app
from puzzlesweep.core import make_params
from puzzlesweep.puzzles import Instance
from puzzlesweep.solve import solve_instance
from puzzlesweep.solvers import Limits

from .conftest import CLI, knights


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
    ("peg_solitaire", {"side": 4, "start": 2, "question": "min_moves"}),
]
FAMILIES = sorted({family for family, _ in SMALL})


def _row(family: str, raw: dict, run_id: str) -> dict:
    module = puzzles.get(family)
    row = solve_instance(
        Instance(family, make_params(module.Params, raw)), module.SOLVERS[0], Limits(20)
    )
    row.update(run_id=run_id, sweep="t", puzzlesweep_version="0", schema_version=3)
    return row


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [_row(family, raw, "r1") for family, raw in SMALL]


def _write(root, row: dict, app_id: str | None) -> bool:
    return catalog.write_batch(root, puzzles.get(row["family"]).Params, [row], app_id)


def test_a_group_commit_holds_batches_of_several_families_each_once(tmp_path, rows):
    # The run's one writer: three batches of three families in one Delta commit that
    # carries each batch's application transaction; the same group again adds nothing.
    batches = [
        catalog.BatchRows(
            f"g-{n:05d}", puzzles.get(family).Params, [r for r in rows if r["family"] == family]
        )
        for n, family in enumerate(FAMILIES)
    ]
    catalog.prepare(tmp_path, [b.params_model for b in batches])
    before = len(catalog.history(tmp_path))
    assert catalog.write_batches(tmp_path, batches) == ["g-00000", "g-00001", "g-00002"]
    assert len(catalog.history(tmp_path)) == before + 1  # one commit for the three
    assert catalog.write_batches(tmp_path, batches) == []  # each already committed
    assert catalog.write_batches(tmp_path, batches[:1] + [batches[1]._replace(app_id="g-9")]) == [
        "g-9"
    ]
    _, found = catalog.query(tmp_path, "SELECT family, count(*) FROM results GROUP BY 1 ORDER BY 1")
    assert found == [("domination", 3), ("no_k_in_row", 4), ("peg_solitaire", 1)]


def _fill(root: Path, rows: list[dict]) -> None:
    """One commit per row: the many small files a sweep leaves."""
    for number, row in enumerate(rows):
        assert _write(root, row, f"r1-{number:05d}")


def _everything(root) -> pa.Table:
    return catalog.to_arrow(root, "SELECT * FROM results ORDER BY params_key")


def test_rows_are_typed_partitioned_and_committed_once(tmp_path, rows):
    _fill(tmp_path, rows)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [
        "_delta_log",
        *(f"family={f}" for f in FAMILIES),
    ]
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
    # A batch retried with its application transaction id writes nothing twice ...
    assert _write(tmp_path, rows[0], "r1-00000") is False
    assert catalog.committed(tmp_path, "r1-00000") and not catalog.committed(tmp_path, "r9")
    # ... and so does an attempt racing it from an older snapshot: delta-rs refuses the
    # second commit of one app id, and the writer then sees it committed.
    stale = DeltaTable(str(tmp_path / "results"))
    assert _write(tmp_path, rows[1], "r2-00000") is True
    store = catalog.locate(tmp_path)
    table = pa.Table.from_pylist(
        write._flat([rows[1]]), schema=catalog.schema(puzzles.get("domination").Params)
    )
    from deltalake import CommitProperties, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError

    with pytest.raises(CommitFailedError):
        write_deltalake(
            stale,
            table,
            mode="append",
            schema_mode="merge",
            commit_properties=CommitProperties(app_transactions=[Transaction("r2-00000", 1)]),
        )
    assert catalog.store.append(store, "results", table, ["r2-00000"]) is False
    assert catalog.query(tmp_path, "SELECT count(*) FROM results")[1] == [(7,)]


def test_outside_readers_see_one_table_with_every_familys_columns(tmp_path, rows):
    _fill(tmp_path, rows)
    assert cli("catalog", "compact", "--catalog", str(tmp_path)).returncode == 0
    path = str(tmp_path / "results")
    ours = catalog.to_arrow(tmp_path, "SELECT params_key, family, dims, piece, side FROM results")
    expected = sorted(ours.to_pylist(), key=lambda r: r["params_key"])
    assert len(expected) == 6 and {r["family"] for r in expected} == set(FAMILIES)
    columns = ["params_key", "family", "dims", "piece", "side"]
    # deltalake, pandas through deltalake, polars, DuckDB over the pyarrow dataset: no
    # project code, exactly one row per instance, every family's parameter columns.
    delta = DeltaTable(path).to_pyarrow_table().select(columns).to_pylist()
    frame = DeltaTable(path).to_pandas()
    lazy = pl.scan_delta(path).select(columns).collect().to_dicts()
    eager = pl.read_delta(path).select(columns).to_dicts()
    connection = duckdb.connect()
    connection.register("dataset", DeltaTable(path).to_pyarrow_dataset())
    duck = connection.sql("SELECT params_key, family, dims, piece, side FROM dataset")
    duck = duck.to_arrow_table()
    for read in (delta, lazy, eager, duck.to_pylist()):
        assert sorted(read, key=lambda r: r["params_key"]) == expected
    assert len(frame) == 6 and {"dims", "piece", "side", "question"} <= set(frame.columns)
    assert pl.read_delta(path).schema["finished_at"] == pl.Datetime("us", "UTC")


def test_python_api_and_file_url_give_the_same_rows(tmp_path, rows):
    _fill(tmp_path, rows)
    url = tmp_path.as_uri()
    assert url.startswith("file:///")
    relation = catalog.open(url)
    assert isinstance(relation, duckdb.DuckDBPyRelation)
    # OEIS A006075: knights dominate 3x3, 4x4, 5x5 with 4, 4, 5.
    domination = relation.filter("family = 'domination'").order("rows")
    assert domination.select("rows, objective").fetchall() == [(3, 4.0), (4, 4.0), (5, 5.0)]
    assert _everything(tmp_path).equals(_everything(url))
    frame = catalog.to_pandas(
        url, "SELECT family, count(*) AS n FROM results GROUP BY 1 ORDER BY 1"
    )
    assert frame.to_dict("list") == {"family": FAMILIES, "n": [3, 2, 1]}
    # `latest`: one row per instance, solver and limits; an error never hides a result.
    failed = dict(rows[0], status="error", finished_at=datetime.now(UTC), run_id="r2")
    _write(tmp_path, failed, "r2-00000")
    _, latest = catalog.query(
        tmp_path, "SELECT count(*), count(*) FILTER (status='error') FROM latest"
    )
    assert latest == [(6, 0)]


def test_compaction_keeps_rows_exactly_and_old_snapshots_readable(tmp_path, rows):
    _fill(tmp_path, rows)
    before = _everything(tmp_path)
    reader = catalog.connect(tmp_path)  # a reader holding the version before compaction
    assert len(catalog.files(tmp_path)) == 6
    done = cli("catalog", "compact", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    # domination's 3 files and no_k_in_row's 2 become one each; peg's one file stays
    assert "results: 5 files merged into 2" in done.stdout
    assert _everything(tmp_path).equals(before) and len(catalog.files(tmp_path)) == 3
    # The merged-away files stay for the retention period, so the old snapshot reads.
    assert reader.execute("SELECT count(*) FROM results").fetchall() == [(6,)]
    assert len(list((tmp_path / "results").glob("family=*/*.parquet"))) == 8
    # With no retention they go; the table still reads every row once.
    report = catalog.compact(tmp_path, retain_hours=0)
    assert report["results"]["deleted"] == 5 and report["results"]["files_removed"] == 0
    assert len(list((tmp_path / "results").glob("family=*/*.parquet"))) == 3
    assert _everything(tmp_path).equals(before)
    assert cli("catalog", "check", "--catalog", str(tmp_path)).returncode == 0


def test_history_and_time_travel(tmp_path, rows):
    _fill(tmp_path, rows)
    done = cli("catalog", "history", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    entries = catalog.history(tmp_path)
    assert [e["version"] for e in entries] == list(range(5, -1, -1))  # a commit per batch
    assert [e["operation"] for e in entries[:2]] == ["WRITE", "WRITE"] and entries[0]["rows"] == 1
    # version 2 held the first three rows
    done = cli(
        "catalog",
        "query",
        "SELECT count(*) AS n FROM results",
        "--catalog",
        str(tmp_path),
        "--as-of",
        "2",
        "--format",
        "json",
    )
    assert done.returncode == 0 and json.loads(done.stdout) == [{"n": 3}]
    moment = entries[2]["timestamp"] + timedelta(milliseconds=1)  # just after version 3
    _, counted = catalog.query(tmp_path, "SELECT count(*) FROM results", as_of=moment.isoformat())
    assert counted == [(4,)]
    for bad in ("99", "yesterday"):
        done = cli("catalog", "query", "SELECT 1", "--catalog", str(tmp_path), "--as-of", bad)
        assert done.returncode == 2 and "--as-of" in done.stderr or "version" in done.stderr


def test_a_damaged_file_is_named_then_repaired_and_its_instances_listed(tmp_path, rows):
    _fill(tmp_path, rows)
    catalog.compact(tmp_path, retain_hours=0)  # one file per family, lost keys via OPTIMIZE
    (victim,) = (tmp_path / "results" / "family=domination").glob("*.parquet")
    victim.write_bytes(victim.read_bytes()[:-100])  # truncated
    relative = f"results/family=domination/{victim.name}"
    for args in (["query", "SELECT count(*) FROM results"], ["summary"], ["verify"]):
        done = cli("catalog", *args, "--catalog", str(tmp_path))
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert relative in done.stderr and "catalog repair" in done.stderr
        assert "Traceback" not in done.stderr
    done = cli("catalog", "check", "--catalog", str(tmp_path))
    assert done.returncode == 1 and f"{relative}: unreadable" in done.stdout
    done = cli("catalog", "repair", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    lost = sorted(r["params_key"] for r in rows if r["family"] == "domination")
    assert f"3 instances lost (params_key): {' '.join(lost)}" in done.stdout
    assert (tmp_path / "damaged").is_dir() and not victim.exists()
    assert cli("catalog", "check", "--catalog", str(tmp_path)).returncode == 0
    # what a re-run would solve again: exactly the lost instances
    planned = [(r["params_key"], r["solver"], 20.0, None) for r in rows]
    missing = {key for key, *_ in planned} - {k for k, *_ in catalog.finished(tmp_path, planned)}
    assert sorted(missing) == lost
    # a garbage file written by a plain commit: its own commit names its instance
    _write(tmp_path, rows[0], "r3-00000")
    newest = max(
        (tmp_path / "results" / "family=domination").glob("*.parquet"), key=os.path.getmtime
    )
    newest.write_bytes(b"not parquet at all")
    assert catalog.repair(tmp_path)["lost"] == [rows[0]["params_key"]]


def _old_layout(root: Path, rows: list[dict]) -> None:
    """A catalog of the layout before Delta Lake: one Parquet file per batch under
    family=NAME/ (no family column in the file), a compaction commit record, a run
    manifest."""
    for number, row in enumerate(rows):
        model = puzzles.get(row["family"]).Params
        flat = {k: v for k, v in row.items() if k not in ("params", "family")}
        flat.update(row["params"], schema_version=2)
        if number == 0:
            flat.pop("params_key")  # schema version 1 rows had only instance_key
        schema = catalog.schema(model)
        schema = schema.remove(schema.get_field_index("family"))
        if number == 0:
            schema = schema.remove(schema.get_field_index("params_key"))
        folder = root / f"family={row['family']}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.Table.from_pylist([flat], schema=schema), folder / f"part-r1-{number:05d}.parquet"
        )
    # a compaction that merged files 1 and 2 (both domination) into one
    domination = root / "family=domination"
    merged = pa.concat_tables(
        [pq.read_table(domination / f"part-r1-{n:05d}.parquet") for n in (1, 2)]
    )
    pq.write_table(merged, domination / "compact-1-a.parquet")
    (root / "_commits").mkdir()
    record = {
        "add": ["family=domination/compact-1-a.parquet"],
        "remove": [f"family=domination/part-r1-{n:05d}.parquet" for n in (1, 2)],
        "rows": 2,
        "committed_at": 0,
    }
    (root / "_commits" / "1-a.json").write_text(json.dumps(record))
    (root / "_runs").mkdir()
    manifest = {
        "run_id": "r1",
        "sweep": "t",
        "state": "finished",
        "planned": 6,
        "started_at": datetime(2026, 11, 1, tzinfo=UTC),
    }
    pq.write_table(pa.Table.from_pylist([manifest]), root / "_runs" / "run-r1.parquet")


def test_migrate_copies_and_reverifies_every_row_of_the_old_layout(tmp_path, rows):
    old, new = tmp_path / "old", tmp_path / "new"
    tampered = [dict(r) for r in rows]
    tampered[3]["objective"] = 3.0  # no_k_in_row 6x7, k=4 removes 11, not 3
    _old_layout(old, tampered)
    # the old layout is refused where a sweep or a query would write or read it
    done = cli("catalog", "summary", "--catalog", str(old))
    assert done.returncode == 2 and "the folder holds no catalog yet" in done.stderr
    assert "catalog migrate" in str(
        pytest.raises(catalog.BadInput, catalog.check_writable, old).value
    )
    done = cli("catalog", "migrate", str(old), str(new))
    assert done.returncode == 1  # one row failed its re-check
    assert "6 rows from 5 files and 1 runs copied" in done.stdout and "1 rows failed" in done.stdout
    _, copied = catalog.query(new, "SELECT params_key, verified FROM results ORDER BY 1")
    assert sorted(copied) == sorted((r["params_key"], r is not rows[3]) for r in rows)
    _, [(error,)] = catalog.query(new, "SELECT error FROM results WHERE NOT verified")
    assert "migration re-check: verifier recomputed 11" in error
    assert catalog.read_run(new, "r1")["planned"] == 6
    # again: application transactions skip what is there
    assert reverify.migrate(old, new)["rows"] == 6
    assert catalog.query(new, "SELECT count(*) FROM results")[1] == [(6,)]
    # a target that is something else is refused with one line, nothing written
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    done = cli("catalog", "migrate", str(old), str(other))
    assert done.returncode == 2 and "is a directory of other files (notes.txt)" in done.stderr
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_summary_counts_by_run_and_family_and_the_optimum_table(tmp_path, rows):
    _fill(tmp_path, rows)
    catalog.write_run(
        tmp_path,
        {"run_id": "r1", "sweep": "t", "state": "finished", "started_at": datetime.now(UTC)},
    )
    done = cli("catalog", "summary", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "counts by run and family" in text and "domination: best result by parameters" in text
    lines = [line for line in text.splitlines() if "│" in line]
    counts = [line.split("│") for line in lines if " r1 " in line]
    assert [cell.strip() for cell in counts[0][1:4]] == ["r1", "t", "finished"]
    assert [cell.strip() for cell in counts[1][1:5]] == ["r1", "t", "domination", "3"]


def test_bad_catalog_input_is_named_and_exits_2(tmp_path, rows):
    missing = str(tmp_path / "none")
    for args in (["summary"], ["check"], ["compact"], ["history"], ["repair"]):
        done = cli("catalog", *args, "--catalog", missing)
        assert done.returncode == 2 and (
            "does not exist" in done.stderr or "no results table" in done.stderr
        ), args
    _fill(tmp_path, rows[:1])
    done = cli("catalog", "query", "SELECT nope FROM results", "--catalog", str(tmp_path))
    assert done.returncode == 2 and "nope" in done.stderr
    (tmp_path / "file").write_text("x")
    done = cli("catalog", "query", "SELECT 1", "--catalog", str(tmp_path / "file"))
    assert done.returncode == 2 and "is not a directory" in done.stderr
    done = cli("catalog", "query", "SELECT 1", "--catalog", "ftp://host/x")
    assert done.returncode == 2 and "unknown scheme ftp://" in done.stderr
    assert len(catalog.files(tmp_path)) == 1


def _cli_with_backtraces(*args: str) -> subprocess.CompletedProcess:
    """`puzzlesweep ARGS...` in a subprocess whose environment asks Rust for backtraces
    (as the testers' machine did)."""
    environment = {**os.environ, "RUST_BACKTRACE": "1", "RUST_LIB_BACKTRACE": "1"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=environment)


def _runs_refuse(catalog_path: Path, says: str) -> None:
    """`run` and `run --dry-run` into a damaged catalog: one line naming the damage and
    exit 1, before any work (a dry run that read it as empty would plan everything)."""
    spec = catalog_path.parent / f"{catalog_path.name}-spec.toml"
    spec.write_text(knights("k", "1..2"))
    for extra in ([], ["--dry-run"]):
        done = _cli_with_backtraces("run", str(spec), "--catalog", str(catalog_path), *extra)
        assert done.returncode == 1, (extra, done.stdout, done.stderr)
        assert done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
        assert says in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_damaged_last_commit_is_named_then_set_aside_and_its_instances_listed(tmp_path, rows):
    _fill(tmp_path, rows)  # versions 0..5, the last commit holds rows[-1]
    commit = tmp_path / "results" / "_delta_log" / f"{5:020d}.json"
    commit.write_bytes(commit.read_bytes()[:150])  # truncated
    relative = f"results/_delta_log/{commit.name}"
    for args in (["summary"], ["query", "SELECT count(*) FROM results"]):
        done = _cli_with_backtraces("catalog", *args, "--catalog", str(tmp_path))
        assert done.returncode == 1, (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and relative in done.stderr, done.stderr
    _runs_refuse(tmp_path, relative)
    done = _cli_with_backtraces("catalog", "check", "--catalog", str(tmp_path))
    assert done.returncode == 1 and f"{relative}: damaged commit" in done.stdout
    assert "<unknown>" not in done.stdout + done.stderr
    done = _cli_with_backtraces("catalog", "repair", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"set aside {relative}" in done.stdout
    assert f"1 instances lost (params_key): {rows[-1]['params_key']}" in done.stdout
    (kept,) = (tmp_path / "damaged").glob(f"log-*/{relative}")
    assert kept.read_bytes() and not commit.exists()
    assert DeltaTable(str(tmp_path / "results")).version() == 4
    assert pl.read_delta(str(tmp_path / "results")).height == len(rows) - 1
    assert catalog.check(tmp_path) == []
    # a garbled (not truncated) commit: its rows are named from their files, those the
    # table still holds are not lost
    _write(tmp_path, rows[0], "r4-00000")
    _write(tmp_path, rows[-1], "r4-00001")
    (tmp_path / "results" / "_delta_log" / f"{6:020d}.json").write_bytes(b"\x00garbage{")
    report = catalog.repair(tmp_path)
    assert report["commits"] == [f"results/_delta_log/{6:020d}.json"]
    assert report["lost"] == [rows[-1]["params_key"]]


def test_a_lost_transaction_log_is_named_then_rebuilt_from_its_data_files(tmp_path, rows):
    _fill(tmp_path, rows)
    before = _everything(tmp_path)
    catalog.compact(tmp_path, retain_hours=1)  # the merged-away files stay on disk
    on_disk = sorted(
        str(p.relative_to(tmp_path)) for p in (tmp_path / "results").glob("family=*/*.parquet")
    )
    assert len(on_disk) == 8
    shutil.rmtree(tmp_path / "results" / "_delta_log")
    done = cli("catalog", "check", "--catalog", str(tmp_path))
    assert done.returncode == 1
    assert [line.split(": ")[1] for line in done.stdout.splitlines()] == on_disk
    assert all(": orphaned: " in line for line in done.stdout.splitlines())
    done = cli("catalog", "summary", "--catalog", str(tmp_path))
    assert done.returncode == 1 and "holds no results" not in done.stderr
    assert "8 data files but no transaction log" in done.stderr
    with pytest.raises(catalog.CatalogDamaged):
        catalog.check_writable(tmp_path)  # a run would solve everything again beside them
    _runs_refuse(tmp_path, "8 data files but no transaction log")
    done = cli("catalog", "repair", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    # the merged-away files are still on disk: their rows are copies, left out
    assert "rebuilt from 8 data files whose log was lost: 6 rows kept, 5 copies" in done.stdout
    assert "0 stored solutions failed" in done.stdout
    frame = pl.read_delta(str(tmp_path / "results"))
    assert (frame.height, frame["params_key"].n_unique()) == (len(rows), len(rows))
    after = _everything(tmp_path)
    assert after.select(before.column_names).equals(before)
    assert catalog.check(tmp_path) == []


def test_as_of_outside_the_tables_history_is_one_line_and_exit_2(tmp_path, rows):
    _fill(tmp_path, rows)  # versions 0..5
    first = catalog.history(tmp_path)[-1]["timestamp"]
    for as_of, says in (
        ("-1", "a version is 0 or more"),
        ("99999999999999999999999", "its versions are 0..5"),
        ("1900-01-01", "did not exist yet at 1900-01-01 00:00:00 UTC"),
        (f"{first - timedelta(seconds=1):%Y-%m-%dT%H:%M:%S}+00:00", "first commit is version 0"),
    ):
        done = cli("catalog", "query", "SELECT 1", "--catalog", str(tmp_path), "--as-of", as_of)
        assert done.returncode == 2 and says in done.stderr, (as_of, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
    with pytest.raises(catalog.BadInput, match="did not exist yet"):
        catalog.query(tmp_path, "SELECT 1", as_of=datetime(1900, 1, 1, tzinfo=UTC).isoformat())
    # a date alone is ISO 8601 too: the whole day after the last commit reads everything
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert catalog.query(tmp_path, "SELECT count(*) FROM results", as_of=tomorrow)[1] == [(6,)]


def test_as_of_a_vacuumed_version_names_the_versions_still_readable(tmp_path, rows):
    _fill(tmp_path, rows)
    catalog.compact(tmp_path, retain_hours=0)  # version 6 merges; 0..5 lose their files
    latest = DeltaTable(str(tmp_path / "results")).version()
    done = cli("catalog", "query", "SELECT 1", "--catalog", str(tmp_path), "--as-of", "1")
    assert done.returncode == 2
    assert "version 1 of results was vacuumed (its data files were deleted" in done.stderr
    assert "while read" not in done.stderr
    assert f"versions 6..{latest} can still be read" in done.stderr
    counted = catalog.query(tmp_path, "SELECT count(*) FROM results", as_of=6)[1]
    assert counted == [(len(rows),)]


@pytest.mark.slow
def test_query_exits_cleanly_every_time(tmp_path, rows):
    # issue 26.10: 1 run in 30 aborted after a correct answer (exit 134, "terminate
    # called without an active exception"): I/O threads still busy at interpreter exit
    for number in range(60):  # many small files, as a sweep leaves them
        row = dict(rows[number % len(rows)], params_key=f"k{number:03d}")
        assert _write(tmp_path, row, f"many-{number:03d}")
    for query in ["SELECT * FROM results LIMIT 2", "SELECT * FROM latest"] * 15:
        done = subprocess.run(
            [*CLI, "catalog", "query", query, "--catalog", str(tmp_path), "--format", "csv"],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, (query, done.returncode, done.stderr)
        assert done.stderr == "" and len(done.stdout.splitlines()) in (3, 61)
