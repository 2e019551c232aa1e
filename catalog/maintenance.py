"""Keeping a catalog healthy: `check` reads every file, `compact` merges small files.

Compaction follows the commit protocol of `store.py`: write the merged file (hidden
until committed), check its row count, then write one commit record that adds it and
removes its inputs, atomically. Readers see either the inputs or the merged file, never
both and never neither; inputs are deleted only once their commit is older than the
grace period, so a reader's older snapshot stays readable meanwhile.
"""

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from puzzlesweep.catalog.schema import MANIFEST_SCHEMA, SCHEMA_VERSION, file_schema
from puzzlesweep.catalog.store import (
    COMMITS,
    Location,
    locate,
    snapshot,
    write_json,
    write_table,
)
from puzzlesweep.core import BadInput


@dataclass(frozen=True)
class Problem:
    """One finding of `check`: the file (path relative to the catalog root), what kind
    of problem (unreadable, schema, stray, duplicate, leftover), a message, and whether
    it makes the catalog unhealthy (`fatal`; leftovers of killed writers are not)."""

    path: str
    kind: str
    message: str
    fatal: bool = True


#: Columns added after schema version 1 files were written (symmetry, issue 3; split
#: proofs, issue 6, schema version 2; counts of optima, issue 12, version 3): a file
#: without them is still whole; its instance_key is then the hash of its own params.
OPTIONAL_COLUMNS = (
    "params_key",
    "equivalent",
    "subproblem",
    "certificate",
    "solutions",
    "inequivalent",
)


def _expected(family: str) -> pa.Schema | None:
    """The file schema of `family`, or None for a family this version does not know."""
    from puzzlesweep import puzzles

    if family not in puzzles.FAMILIES:
        return None
    return file_schema(puzzles.get(family).Params)


def _schema_difference(actual: pa.Schema, expected: pa.Schema) -> str:
    """'' when `actual` has exactly the expected columns and types (a `family` string
    column is tolerated: older writers kept it in the file), else what differs."""
    have = {f.name: f.type for f in actual if not (f.name == "family" and f.type == pa.string())}
    want = {f.name: f.type for f in expected}
    for name in OPTIONAL_COLUMNS:  # files written before these columns existed
        if name not in have:
            want.pop(name, None)
    clauses = []
    if missing := sorted(set(want) - set(have)):
        clauses.append(f"missing columns {', '.join(missing)}")
    if extra := sorted(set(have) - set(want)):
        clauses.append(f"unexpected columns {', '.join(extra)}")
    for name in sorted(set(want) & set(have)):
        if have[name] != want[name]:
            clauses.append(f"column {name} is {have[name]}, expected {want[name]}")
    return "; ".join(clauses)


def _check_result_file(location: Location, path: str) -> Problem | None:
    """Read one result file whole and compare it with its family's schema."""
    relative = location.relative(path)
    try:
        table = pq.read_table(path, filesystem=location.fs)
    except (OSError, pa.ArrowException) as exc:
        return Problem(relative, "unreadable", f"cannot be read: {exc}")
    family = relative.split("/")[0].removeprefix("family=")
    expected = _expected(family)
    if expected is None:
        return Problem(relative, "schema", f"unknown family {family!r}")
    if difference := _schema_difference(table.schema, expected):
        return Problem(relative, "schema", difference)
    versions = set(table.column("schema_version").unique().to_pylist())
    if not versions <= set(range(1, SCHEMA_VERSION + 1)):  # older files stay readable
        return Problem(
            relative, "schema", f"schema_version {sorted(versions)}, expected 1..{SCHEMA_VERSION}"
        )
    return None


def _check_run_file(location: Location, path: str) -> Problem | None:
    relative = location.relative(path)
    try:
        table = pq.read_table(path, filesystem=location.fs)
    except (OSError, pa.ArrowException) as exc:
        return Problem(relative, "unreadable", f"cannot be read: {exc}")
    if difference := _schema_difference(table.schema, MANIFEST_SCHEMA):
        return Problem(relative, "schema", difference)
    return None


def check(catalog) -> list[Problem]:
    """Read every file of `catalog` (visible, hidden-by-commit, pending and manifests)
    whole and return the problems found, fatal ones first: unreadable files, schema
    mismatches (columns, types, schema_version, unknown family), stray files, the same
    (run, instance, solver, limits) twice among visible results, and (not fatal)
    temporary files left by killed writers. Raises BadInput for a missing catalog."""
    from puzzlesweep import catalog as api

    location = locate(catalog)
    shot = snapshot(location)
    if not location.fs.get_file_info(location.root).type.name == "Directory":
        raise BadInput(f"catalog {location.uri} does not exist")
    problems = []
    for path in [*shot.files, *shot.removed, *shot.pending]:
        if found := _check_result_file(location, path):
            problems.append(found)
    for path in shot.runs:
        if found := _check_run_file(location, path):
            problems.append(found)
    for path in shot.strays:
        problems.append(Problem(location.relative(path), "stray", "not a catalog file"))
    if shot.files and not problems:
        columns, _ = api.query(location, "SELECT * FROM results LIMIT 0")
        own = api._own_key([(name,) for name in columns])  # equivalents share instance_key
        _, rows = api.query(
            location,
            f"SELECT run_id, {own}, solver, time_limit, node_limit, count(*) "
            "FROM results GROUP BY ALL HAVING count(*) > 1 ORDER BY ALL",
        )
        for run_id, key, solver, limit, nodes, count in rows:
            message = f"{count} results in run {run_id} ({solver}, {limit} s, {nodes} nodes)"
            problems.append(Problem(key, "duplicate", message))
    for path in shot.temporary:
        problems.append(Problem(location.relative(path), "leftover", "temporary file", fatal=False))
    return sorted(problems, key=lambda p: (not p.fatal, p.kind, p.path))


def _merge(location: Location, paths: list[str]) -> pa.Table:
    """The rows of `paths`, in file order, under one schema (raises BadInput naming a
    file that cannot be read or merged)."""
    tables = []
    for path in paths:
        try:
            table = pq.read_table(path, filesystem=location.fs)
        except (OSError, pa.ArrowException) as exc:
            raise BadInput(f"{location.relative(path)} cannot be read: {exc}") from None
        if "family" in table.schema.names:
            table = table.drop_columns(["family"])
        tables.append(table)
    try:
        return pa.concat_tables(tables, promote_options="default")
    except pa.ArrowInvalid as exc:
        raise BadInput(f"files of different schemas (run catalog check): {exc}") from None


def compact(
    catalog, family: str | None = None, min_files: int = 2, grace_seconds: float = 3600
) -> list[dict]:
    """Merge the visible files of each partition (or only `family`'s) that has at least
    `min_files` into one file, committed atomically; then delete files hidden by
    commits older than `grace_seconds`, compaction outputs never committed and
    temporary files older than it. Returns one dict per partition compacted:
    {"family", "files" (merged), "rows", "file" (the new path)}, and a last
    {"deleted": N}. Raises BadInput for a missing catalog or an unreadable input; the
    catalog is then unchanged (the merged file stays hidden and is deleted later).

    On a local disk a second compaction at the same time raises BadInput (a lock). On
    other filesystems run one at a time; should two overlap, the later commit is ignored
    by readers (no rows doubled) and its output deleted after the grace period."""
    location = locate(catalog)
    if not location.fs.get_file_info(location.root).type.name == "Directory":
        raise BadInput(f"catalog {location.uri} does not exist")
    with _exclusive(location):
        return _compact(location, family, min_files, grace_seconds)


@contextmanager
def _exclusive(location: Location) -> Iterator[None]:
    """Hold the catalog's compaction lock (an flock on `_commits/.lock`, released by
    the kernel if the process dies); a no-op off the local disk. Raises BadInput when
    another compaction holds it."""
    if not location.local:
        yield
        return
    import fcntl

    location.fs.create_dir(location.path(COMMITS), recursive=True)
    descriptor = os.open(location.path(COMMITS, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BadInput(f"catalog {location.uri}: another compaction is running") from None
        yield
    finally:
        os.close(descriptor)


def _compact(location: Location, family: str | None, min_files: int, grace_seconds: float):
    shot = snapshot(location)
    partitions: dict[str, list[str]] = {}
    for path in shot.files:
        partitions.setdefault(location.relative(path).split("/")[0], []).append(path)
    if family is not None and f"family={family}" not in partitions:
        raise BadInput(f"catalog {location.uri} has no partition family={family}")
    done: list[dict] = []
    for partition, paths in sorted(partitions.items()):
        if (family is not None and partition != f"family={family}") or len(paths) < min_files:
            continue
        table = _merge(location, paths)
        stamp = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        merged = write_table(location, table, partition, f"compact-{stamp}.parquet")
        written = pq.read_metadata(merged, filesystem=location.fs).num_rows
        if written != table.num_rows:
            raise RuntimeError(f"{merged}: wrote {written} rows of {table.num_rows}")
        record = {
            "add": [location.relative(merged)],
            "remove": [location.relative(p) for p in paths],
            "rows": table.num_rows,
            "committed_at": time.time(),
        }
        write_json(location, COMMITS, f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json", record)
        done.append(
            {"family": partition.removeprefix("family="), "files": len(paths), "rows": written}
            | {"file": location.relative(merged)}
        )
    done.append({"deleted": vacuum(location, grace_seconds)})
    return done


def vacuum(catalog, grace_seconds: float = 3600) -> int:
    """Delete files hidden by commits older than `grace_seconds`, and compaction outputs
    never committed and temporary files last modified before it; returns how many."""
    location = locate(catalog)
    shot = snapshot(location)
    now = time.time()
    old_commits = {
        path
        for _, record in shot.commits
        if now - record["committed_at"] >= grace_seconds
        for path in record["remove"]
    }
    doomed = [p for p in shot.removed if location.relative(p) in old_commits]
    doomed += [p for p in [*shot.pending, *shot.temporary] if now - shot.mtimes[p] >= grace_seconds]
    for path in doomed:
        location.fs.delete_file(path)
    return len(doomed)
