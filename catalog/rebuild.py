"""Rebuilding `results` from its data files when its transaction log is lost.

Without `results/_delta_log` nothing tells which Parquet files under `results/` made up
the table: besides the live files, the folder holds the files a compaction merged away
(kept until a vacuum), those of a commit that failed or that a repair set aside, and
whatever another tool wrote there. So a rebuild commits none of them as they are. It
reads every file whole, sets aside (to `CATALOG/damaged/rebuilt-TIME/`, the same
relative paths) each one that cannot be read or is not a file of results rows, checks
the rows of the others row by row, and writes the rows it keeps as a new table (one
commit per family, carrying the family's keys as a batch commit does, `store.KEYS`);
then the files it read move to `CATALOG/damaged/rebuilt-TIME/` as well, so that the
folder holds the table's files only.

The check, row by row (`KEEP`): of the rows of one (run, instance, solver, limits), one
is kept (a final status before `error`, then the newest): a merged-away file repeats
rows of the file it was merged into. Of the final rows of one (instance, solver,
limits) from different runs, an older one is dropped when a later run that did not
force (`runs.force`) solved the instance again: that run would have skipped it had the
older row been in the table, so the older row's commit was lost or set aside. A run not
found in `runs` counts as not forcing. Rows of one instance solved by two runs at the
same time keep only the newer one.

Roads not taken: delta-rs's `convert_to_deltalake` (before this module) commits every
Parquet file it finds as it is: it took in a set-aside commit's file (an instance with
two final rows) and stopped with a traceback at the first unreadable file.
"""

import posixpath
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from puzzlesweep.catalog.schema import COMMON_COLUMNS
from puzzlesweep.catalog.store import RESULTS, RUNS, Location, filesystem, move, open_table
from puzzlesweep.core import DONE_KEY, FINAL

#: The columns a file must hold to be taken for results rows: those of the check.
NEEDED = ("run_id", *DONE_KEY, "status", "finished_at", "instance_key")
#: The rows a rebuild keeps (DuckDB over the view `rows` and the table `forced`).
KEEP = f"""
WITH once AS (
    SELECT * FROM rows
    QUALIFY row_number() OVER (
        PARTITION BY run_id, {", ".join(DONE_KEY)}
        ORDER BY NOT ({FINAL}), finished_at DESC) = 1
), later AS (
    SELECT *, max(finished_at) FILTER (NOT coalesce(f.force, false)) OVER (
        PARTITION BY {", ".join(DONE_KEY)} ORDER BY finished_at
        ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS redone
    FROM once LEFT JOIN forced f USING (run_id)
    WHERE {FINAL}
)
SELECT * EXCLUDE (force, redone) FROM later WHERE redone IS NULL
UNION ALL BY NAME
SELECT * FROM once WHERE NOT ({FINAL})
"""


@dataclass
class Rebuilt:
    """What a rebuild did: `files` it read (paths relative to the catalog root), `aside`
    (path, why) for those it set aside unread, the `rows` it kept and those it
    `dropped` as copies, the `folder` (relative to the catalog root) that now holds the
    files, and `unreadable`: whether a set-aside file may have held results rows (its
    instances cannot be named then)."""

    files: list[str] = field(default_factory=list)
    aside: list[tuple[str, str]] = field(default_factory=list)
    rows: int = 0
    dropped: int = 0
    folder: str = ""
    unreadable: bool = False


def rebuild(location: Location, files: list[str]) -> Rebuilt:
    """Make `results` a Delta table again from `files` (its data files, relative to
    the catalog root, found without a log: `files.lost_log_files`), as the module
    docstring says. Raises OSError from the storage (a full disk, say): the files that
    were read stay where they are until the new table is committed."""
    done = Rebuilt(folder=f"damaged/rebuilt-{datetime.now(UTC):%Y%m%dT%H%M%S}")
    tables = []
    for path in files:
        table, why = _read(location, path)
        if table is None:
            done.aside.append((path, why))
            done.unreadable = done.unreadable or why.startswith("cannot be read")
        else:
            tables.append(table)
            done.files.append(path)
    kept = _keep(location, tables) if tables else None
    _write(location, kept)
    if kept is not None:
        done.rows = kept.num_rows
        done.dropped = sum(t.num_rows for t in tables) - kept.num_rows
    move(location, [path for path, _ in done.aside] + done.files, done.folder)
    return done


def _read(location: Location, path: str) -> "tuple[pa.Table | None, str]":
    """The rows of data file `path` with its `family` from its folder, or (None, why
    it is not taken)."""
    folder = posixpath.basename(posixpath.dirname(path))
    if not folder.startswith("family="):
        return None, "is not in a family=NAME folder of results"
    try:
        table = pq.read_table(path, filesystem=filesystem(location))
    except (OSError, pa.ArrowException) as exc:
        return None, f"cannot be read ({str(exc).splitlines()[0][:160]})"
    names = table.column_names
    if len(set(names)) != len(names):
        return None, "is not a file of results rows (a column name appears twice)"
    if missing := [name for name in NEEDED if name not in names]:
        return None, f"is not a file of results rows (no column {', '.join(missing)})"
    types = dict(COMMON_COLUMNS)
    if other := [n for n in NEEDED if not table.schema.field(n).type.equals(types[n])]:
        return None, f"is not a file of results rows (column {other[0]} is no {types[other[0]]})"
    family = unquote(folder.removeprefix("family="))
    if "family" in names:
        table = table.drop_columns(["family"])
    return table.append_column("family", pa.array([family] * table.num_rows, pa.string())), ""


def _keep(location: Location, tables: list[pa.Table]) -> pa.Table:
    """The rows of `tables` that the check keeps (`KEEP`), in one table."""
    import duckdb

    rows = pa.concat_tables(tables, promote_options="permissive")
    runs = open_table(location, RUNS)
    forced = (
        runs.to_pyarrow_table(columns=["run_id", "force"])
        if runs is not None
        else pa.table({"run_id": pa.array([], pa.string()), "force": pa.array([], pa.bool_())})
    )
    with duckdb.connect() as connection:
        connection.register("rows", rows)
        connection.register("forced", forced)
        kept = connection.sql(KEEP).to_arrow_table()
    common = [name for name, _ in COMMON_COLUMNS if name in rows.column_names]
    order = common + [name for name in rows.column_names if name not in common]
    return kept.select(order).cast(rows.select(order).schema)


def _write(location: Location, kept: "pa.Table | None") -> None:
    """Commit `kept` as the new results table, one commit per family carrying its
    params keys (`store.KEYS`); an empty table of the common columns when nothing is
    kept."""
    import pyarrow.compute as pc

    from puzzlesweep.catalog.store import append

    if kept is None or kept.num_rows == 0:
        empty = (kept.schema if kept is not None else pa.schema(COMMON_COLUMNS)).empty_table()
        append(location, RESULTS, empty, partition_by=["family"])
        return
    for family in sorted(set(kept.column("family").to_pylist())):
        part = kept.filter(pc.equal(kept.column("family"), family))
        keys = sorted(set(part.column("params_key").to_pylist()))
        append(location, RESULTS, part, keys=keys, partition_by=["family"])
