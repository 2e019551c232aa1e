"""The Parquet catalog: Hive-partitioned result files, run manifests, one view `results`.

A catalog is a directory, a `file://` URL, or any URL a pyarrow filesystem opens; every
file operation goes through that filesystem (`store.py`). Each batch of results is one
Parquet file, `family=NAME/part-RUN_ID-BATCH.parquet`, written with pyarrow datasets
under a hidden temporary name and moved into place, so a reader never sees half a file
(DESIGN.md, measured: 0 failed scans in 332). The batch's name is fixed by its run and
number, so a retried or re-executed batch replaces its own file instead of adding rows.

Reading takes a snapshot (commit records, then the listing; see `store.py`) and gives
DuckDB the explicit list of visible files, read with `union_by_name` (families have
different parameter columns) and Hive partitioning. Off the local disk the same files
are scanned through a pyarrow dataset on the same filesystem.

    from puzzlesweep import catalog
    rel = catalog.open("results")                       # DuckDB relation over `results`
    rel.filter("family = 'domination'").aggregate("max(objective)")
    catalog.to_arrow("results", "SELECT * FROM results WHERE status = 'optimal'")
    catalog.to_pandas("results", "SELECT family, count(*) n FROM results GROUP BY ALL")
"""

import os
import socket
import sys
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from puzzlesweep.catalog.schema import (
    COMMON_COLUMNS,
    COMMON_NAMES,
    MANIFEST_SCHEMA,
    SCHEMA_VERSION,
    STATUSES,
    file_schema,
    schema,
)
from puzzlesweep.catalog.store import RUNS, Location, exists, locate, snapshot, write_table
from puzzlesweep.core import BadInput

__all__ = [
    "BadInput",
    "COMMON_COLUMNS",
    "COMMON_NAMES",
    "SCHEMA_VERSION",
    "STATUSES",
    "Location",
    "batch_name",
    "connect",
    "default_catalog",
    "file_schema",
    "files",
    "finished",
    "latest",
    "locate",
    "open",
    "query",
    "read_batch",
    "read_run",
    "resolve",
    "schema",
    "to_arrow",
    "to_pandas",
    "versions",
    "write_batch",
    "write_run",
]

CatalogLike = str | Path | Location


def default_catalog() -> str:
    """`$PUZZLESWEEP_CATALOG`, else `./results`."""
    return os.environ.get("PUZZLESWEEP_CATALOG", "results")


def resolve(catalog: CatalogLike) -> str:
    """The catalog as a string any process can use: an absolute path for a local
    directory (Dask workers may run in another working directory), else the URL.
    Raises BadInput as `locate` does."""
    location = locate(catalog)
    return location.root if location.local and "://" not in location.uri else location.uri


def batch_name(run_id: str, number: int) -> str:
    """The file name of batch `number` (0-based) of run `run_id`."""
    return f"part-{run_id}-{number:05d}.parquet"


def write_batch(
    catalog: CatalogLike, family: str, params_model: type, rows: list[dict], name: str | None = None
) -> str:
    """Write `rows` (dicts with the common columns and a `params` dict, all of family
    `family`) as one Parquet file `family=FAMILY/NAME`, atomically; returns its path.

    `name` defaults to a fresh `part-RUN_ID-RANDOM.parquet`; a file of the same name is
    replaced whole. Raises ValueError for an empty batch or rows of another family, and
    pyarrow's errors for values that do not fit the schema."""
    import uuid

    if not rows:
        raise ValueError("a batch file needs at least one row")
    if any(row["family"] != family for row in rows):
        raise ValueError(f"every row of a {family} batch must be of family {family}")
    flat = [{**{k: v for k, v in row.items() if k != "params"}, **row["params"]} for row in rows]
    table = pa.Table.from_pylist(flat, schema=schema(params_model))
    name = name or f"part-{rows[0].get('run_id', 'run')}-{uuid.uuid4().hex[:12]}.parquet"
    return write_table(locate(catalog), table, "", name, partition="family")


def read_batch(catalog: CatalogLike, family: str, name: str) -> list[dict] | None:
    """The rows (dicts of column → value) of the result file `family=FAMILY/NAME`, or
    None when it does not exist."""
    location = locate(catalog)
    try:
        table = pq.read_table(location.path(f"family={family}", name), filesystem=location.fs)
    except FileNotFoundError:
        return None
    return table.to_pylist()


def files(catalog: CatalogLike) -> list[PurePosixPath]:
    """The visible result files of the catalog (empty when it does not exist)."""
    return [PurePosixPath(path) for path in snapshot(locate(catalog)).files]


def _arrow_dataset(location: Location, paths: list[str]):
    """A pyarrow dataset over `paths` with the union of their schemas and `family` from
    the Hive directories."""
    import pyarrow.dataset as ds

    schemas = [pq.read_schema(path, filesystem=location.fs) for path in paths]
    unified = pa.unify_schemas(
        [*schemas, pa.schema([("family", pa.string())])], promote_options="permissive"
    )
    return ds.dataset(
        paths,
        schema=unified,
        format="parquet",
        filesystem=location.fs,
        partitioning=ds.partitioning(pa.schema([("family", pa.string())]), flavor="hive"),
        partition_base_dir=location.root,
    )


def _sql_list(paths: list[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def connect(catalog: CatalogLike, engine: str = "auto"):
    """A DuckDB connection with the views `results` (every visible result) and `runs`
    (every run manifest row; absent when no run wrote one). The file list is fixed when
    the connection is made: connect again to see newer results.

    `engine`: `duckdb` reads the files with DuckDB's Parquet reader (local files only),
    `arrow` scans a pyarrow dataset on the catalog's filesystem, `auto` picks `duckdb`
    locally and `arrow` elsewhere. Raises BadInput when the catalog does not exist or
    holds no results, or for an unknown engine."""
    import duckdb

    if engine not in ("auto", "duckdb", "arrow"):
        raise BadInput(f"engine must be auto, duckdb or arrow, not {engine!r}")
    location = locate(catalog)
    if not exists(location):
        raise BadInput(f"catalog {location.uri} does not exist (run a sweep into it first)")
    shot = snapshot(location)
    if not shot.files:
        raise BadInput(f"catalog {location.uri} holds no results yet (no family=*/*.parquet)")
    if engine == "auto":
        engine = "duckdb" if location.local else "arrow"
    if engine == "duckdb" and not location.local:
        raise BadInput("engine duckdb reads local catalogs only; use engine arrow")
    connection = duckdb.connect()
    if engine == "duckdb":
        connection.execute(
            f"CREATE VIEW results AS SELECT * FROM read_parquet({_sql_list(shot.files)}, "
            "hive_partitioning = true, union_by_name = true)"
        )
        if shot.runs:
            connection.execute(
                f"CREATE VIEW runs AS SELECT * FROM read_parquet({_sql_list(shot.runs)}, "
                "union_by_name = true)"
            )
    else:
        connection.register("results", _arrow_dataset(location, shot.files))
        if shot.runs:
            tables = [pq.read_table(p, filesystem=location.fs) for p in shot.runs]
            connection.register("runs", pa.concat_tables(tables, promote_options="permissive"))
    return connection


def open(catalog: CatalogLike, engine: str = "auto"):
    """The DuckDB relation `results` over the whole catalog (see `connect`): filter,
    aggregate, `.to_arrow_table()`, `.df()`. Raises BadInput as `connect` does."""
    return connect(catalog, engine).view("results")


def _execute(catalog: CatalogLike, sql: str, parameters: list | None, engine: str = "auto"):
    import duckdb

    connection = connect(catalog, engine)
    try:
        relation = connection.sql(sql, params=parameters or None)
    except duckdb.Error as exc:
        raise BadInput(f"query failed: {exc}") from None
    if relation is None:
        raise BadInput("query failed: the statement returns no rows (use SELECT)")
    return relation


def query(
    catalog: CatalogLike, sql: str, parameters: list | None = None
) -> tuple[list[str], list[tuple]]:
    """Run `sql` (with `?` placeholders bound to `parameters`) over the views `results`
    and `runs`; returns (column names, rows as tuples).

    Raises BadInput for a missing or empty catalog or an SQL error (DuckDB's message)."""
    import duckdb

    relation = _execute(catalog, sql, parameters)
    try:
        return list(relation.columns), relation.fetchall()
    except duckdb.Error as exc:
        raise BadInput(f"query failed: {exc}") from None


def to_arrow(
    catalog: CatalogLike, sql: str = "SELECT * FROM results", parameters: list | None = None
) -> pa.Table:
    """The result of `sql` over the catalog as a pyarrow Table (typed columns: lists
    stay lists, timestamps UTC). Raises BadInput as `query` does."""
    return _execute(catalog, sql, parameters).to_arrow_table()


def to_pandas(
    catalog: CatalogLike, sql: str = "SELECT * FROM results", parameters: list | None = None
):
    """The result of `sql` over the catalog as a pandas DataFrame (needs pandas
    installed; raises ImportError naming it otherwise). Raises BadInput as `query`."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise ImportError("to_pandas needs pandas: pip install pandas") from None
    return _execute(catalog, sql, parameters).df()


def finished(
    catalog: CatalogLike, planned: Iterable[tuple[str, str, float, int | None]] | None = None
) -> set[tuple[str, str, float, int | None]]:
    """The (params_key, solver, time_limit in seconds, node_limit) that already have a
    final result (any status but `error`); empty for a missing or empty catalog. Keyed by
    the row's own params_key, not the shared instance_key, so an instance equivalent to
    one solved in an earlier run still gets its own row.

    With `planned` (such tuples), only those are looked up: DuckDB joins them with the
    catalog, so the answer, and its cost in Python, scale with the plan, not with the
    catalog."""
    location = locate(catalog)
    if not snapshot(location).files:
        return set()
    connection = connect(location)
    own = _own_key(connection.execute("SELECT * FROM results LIMIT 0").description)
    sql = (
        f"SELECT DISTINCT {own}, solver, time_limit, node_limit FROM results "
        "WHERE status <> 'error'"
    )
    if planned is not None:
        keys = pa.table(
            list(zip(*planned, strict=True)) or [[], [], [], []],
            schema=pa.schema(
                [
                    ("params_key", pa.string()),
                    ("solver", pa.string()),
                    ("time_limit", pa.float64()),
                    ("node_limit", pa.int64()),
                ]
            ),
        )
        connection.register("planned", keys)
        sql += (
            f" AND ({own}, solver, time_limit, coalesce(node_limit, -1)) IN "
            "(SELECT (params_key, solver, time_limit, coalesce(node_limit, -1)) FROM planned)"
        )
    rows = connection.execute(sql).fetchall()
    return {(key, solver, limit, nodes) for key, solver, limit, nodes in rows}


def _own_key(description) -> str:
    """The SQL expression of a row's own params key, given the `results` columns (a DuckDB
    cursor description). Rows written before `params_key` existed have instance_key = the
    hash of their own params, which is the same thing."""
    names = {column[0] for column in description or []}
    return "coalesce(params_key, instance_key)" if "params_key" in names else "instance_key"


LATEST = """
SELECT * FROM results WHERE sweep = ?
QUALIFY row_number() OVER (
    PARTITION BY {key}, solver, time_limit, node_limit
    ORDER BY status = 'error', finished_at DESC) = 1
"""


def latest(catalog: CatalogLike, sweep: str) -> list[dict]:
    """The latest result of every (instance, solver, limits) of sweep `sweep`, a final
    one before an error, as dicts of column → value (one per params_key: equivalent
    instances each keep their row)."""
    columns, _ = query(catalog, "SELECT * FROM results LIMIT 0")
    key = _own_key([(name,) for name in columns])
    columns, rows = query(catalog, LATEST.format(key=key), [sweep])
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return ""


def versions() -> dict[str, str]:
    """The versions a manifest records: puzzlesweep, HiGHS (highspy), Prefect, Dask,
    distributed and Python."""
    return {
        "puzzlesweep_version": _version("puzzlesweep"),
        "highs_version": _version("highspy"),
        "prefect_version": _version("prefect"),
        "dask_version": _version("dask"),
        "distributed_version": _version("distributed"),
        "python_version": sys.version.split()[0],
    }


def write_run(catalog: CatalogLike, run: dict[str, Any]) -> str:
    """Write (or replace) the manifest row of run `run["run_id"]` as
    `_runs/run-RUN_ID.parquet`, atomically; returns its path. Missing columns of
    `MANIFEST_SCHEMA` are filled in: versions, host, pid, schema_version, else null."""
    row = {
        **versions(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "schema_version": SCHEMA_VERSION,
        **run,
    }
    unknown = set(row) - set(MANIFEST_SCHEMA.names)
    if unknown:
        raise ValueError(f"unknown manifest columns: {', '.join(sorted(unknown))}")
    table = pa.Table.from_pylist([row], schema=MANIFEST_SCHEMA)
    return write_table(locate(catalog), table, RUNS, f"run-{row['run_id']}.parquet")


def read_run(catalog: CatalogLike, run_id: str) -> dict[str, Any] | None:
    """The manifest row of run `run_id` as a dict, or None when there is none."""
    location = locate(catalog)
    path = location.path(RUNS, f"run-{run_id}.parquet")
    try:
        rows = pq.read_table(path, filesystem=location.fs).to_pylist()
    except FileNotFoundError:
        return None
    return rows[0] if rows else None


from puzzlesweep.catalog.maintenance import Problem, check, compact  # noqa: E402

__all__ += ["Problem", "check", "compact"]
