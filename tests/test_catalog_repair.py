"""`catalog repair` of a lost transaction log: what a rebuild takes in and what it sets
aside (real Delta tables on disk; the damage is done to the files, as a disk fault or
another tool would)."""

import shutil
from datetime import UTC, datetime

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from puzzlesweep import catalog

from .test_catalog import SMALL, _fill, _row, _write, cli


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [_row(family, raw, "r1") for family, raw in SMALL]


def _run(root, run_id: str, force: bool) -> None:
    """The `runs` row of a finished run (a re-run reads `force` from it)."""
    now = datetime.now(UTC)
    catalog.write_run(
        root,
        {"run_id": run_id, "sweep": "t", "state": "finished", "started_at": now, "force": force},
    )


def _counts(root) -> tuple[int, int]:
    frame = pl.read_delta(str(root / "results"))
    return frame.height, frame["params_key"].n_unique()


def test_a_rebuild_after_a_set_aside_commit_and_a_re_run_holds_each_instance_once(tmp_path, rows):
    # the tester's sequence: a damaged commit set aside, a re-run, a lost log, a repair
    _run(tmp_path, "r1", force=False)
    _fill(tmp_path, rows)  # versions 0..5; the last commit holds rows[-1]
    commit = tmp_path / "results" / "_delta_log" / f"{5:020d}.json"
    commit.write_bytes(commit.read_bytes()[:150])
    assert catalog.repair(tmp_path)["lost"] == [rows[-1]["params_key"]]
    # the data file of the set-aside commit went aside with it
    assert catalog.check(tmp_path) == []
    assert len(list((tmp_path / "damaged").glob("log-*/results/family=*/*.parquet"))) == 1
    _run(tmp_path, "r2", force=False)
    again = {**rows[-1], "run_id": "r2", "finished_at": datetime.now(UTC)}
    assert _write(tmp_path, again, "r2-00000")
    shutil.rmtree(tmp_path / "results" / "_delta_log")
    done = cli("catalog", "repair", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "rebuilt from 6 data files whose log was lost: 6 rows kept" in done.stdout
    assert _counts(tmp_path) == (len(rows), len(rows))
    assert catalog.check(tmp_path) == []


def test_a_rebuild_checks_files_no_log_committed_row_by_row(tmp_path, rows):
    # a commit that never happened (its file written, the log lost before it) whose
    # instance a later run solved again: the older row is a copy; a forced run's row
    # is history and stays
    _fill(tmp_path, rows)
    table = catalog.open_table(catalog.locate(tmp_path), "results")
    orphan = tmp_path / "results" / "family=domination" / "part-orphan.parquet"
    first = sorted(table.file_uris())[0].removeprefix("file://")
    shutil.copy(first, orphan)  # the same rows again, as run r0, earlier
    copied = pq.read_table(orphan)
    early = pa.array(
        [datetime(2026, 1, 1, tzinfo=UTC)] * copied.num_rows, copied["finished_at"].type
    )
    copied = copied.set_column(copied.column_names.index("run_id"), "run_id",
                               pa.array(["r0"] * copied.num_rows))  # fmt: skip
    pq.write_table(
        copied.set_column(copied.column_names.index("finished_at"), "finished_at", early), orphan
    )
    _run(tmp_path, "r1", force=False)
    _run(tmp_path, "r3", force=True)
    assert _write(tmp_path, {**rows[0], "run_id": "r3", "finished_at": datetime.now(UTC)}, "r3-0")
    shutil.rmtree(tmp_path / "results" / "_delta_log")
    report = catalog.repair(tmp_path)
    assert report["rebuilt"].dropped == 1  # r0's copy of an instance r1 solved again
    height, instances = _counts(tmp_path)
    assert (height, instances) == (len(rows) + 1, len(rows))  # r1's and forced r3's rows
    _, runs = catalog.query(tmp_path, "SELECT DISTINCT run_id FROM results ORDER BY 1")
    assert runs == [("r1",), ("r3",)]


def test_a_lost_log_with_a_truncated_file_and_stray_parquet_files_is_rebuilt(tmp_path, rows):
    _fill(tmp_path, rows)
    results = tmp_path / "results"
    files = sorted(results.glob("family=*/*.parquet"))
    truncated = files[0]
    truncated.write_bytes(truncated.read_bytes()[:100])
    (results / "junk.parquet").write_bytes(b"PAR1 not parquet at all")
    stray = results / "family=domination" / "data_0.parquet"
    pq.write_table(pa.table({"x": [1, 2], "y": ["a", "b"]}), stray)  # another tool's COPY
    typed = results / "family=domination" / "typed.parquet"  # the columns, other types
    other = pq.read_table(files[1])
    at = other.column_names.index("time_limit")
    pq.write_table(other.set_column(at, "time_limit", other["time_limit"].cast(pa.string())), typed)
    shutil.rmtree(results / "_delta_log")
    done = cli("catalog", "repair", "--catalog", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "typed.parquet: is not a file of results rows (column time_limit is no double)" in (
        done.stdout
    )
    shown = (truncated, results / "junk.parquet", stray, typed)
    relative = [str(p.relative_to(tmp_path)) for p in shown]
    for path in relative:
        assert f"set aside {path}: " in done.stdout, done.stdout
    assert "the instances lost cannot be named" in done.stdout
    assert _counts(tmp_path) == (len(rows) - 1, len(rows) - 1)
    assert catalog.check(tmp_path) == []
    kept = sorted(
        p.relative_to(tmp_path / "damaged") for p in (tmp_path / "damaged").rglob("*.parquet")
    )
    assert {str(p.relative_to(p.parts[0])) for p in kept} >= set(relative)
