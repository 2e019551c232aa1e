"""The Parquet catalog: one directory of Hive-partitioned files, one view `results`.

Layout: `CATALOG/family=NAME/part-RUNID-BATCH.parquet`, one file per batch, each written
under a hidden temporary name in the same directory, fsynced and renamed into place, so
a reader never sees half a file (DESIGN.md, measured: 0 failed scans in 332). DuckDB
reads every file with `union_by_name` (families have different parameter columns) and
Hive partitioning.

Columns: `COMMON_COLUMNS` (the DESIGN.md result columns plus the limits that make a
result final, `params_key` (the hash of the row's own parameters, while `instance_key`
is the hash of their canonical form, shared by equivalent instances) and `equivalent`
(True for a row carried over by symmetry from an equivalent instance solved in the same
batch)), then the family's parameters as typed columns under their own names
(integers as int64, words as strings, lists as Arrow lists).
"""

import os
import types
import typing
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from puzzlesweep.core import BadInput

SCHEMA_VERSION = 1

COMMON_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("run_id", pa.string()),
    ("sweep", pa.string()),
    ("family", pa.string()),
    ("instance_key", pa.string()),
    ("params_key", pa.string()),
    ("equivalent", pa.bool_()),
    ("solver", pa.string()),
    ("solver_version", pa.string()),
    ("status", pa.string()),
    ("objective", pa.float64()),
    ("bound", pa.float64()),
    ("gap", pa.float64()),
    ("solve_seconds", pa.float64()),
    ("nodes", pa.int64()),
    ("solution", pa.string()),
    ("verified", pa.bool_()),
    ("error", pa.string()),
    ("worker", pa.string()),
    ("started_at", pa.timestamp("us", tz="UTC")),
    ("finished_at", pa.timestamp("us", tz="UTC")),
    ("time_limit", pa.float64()),
    ("node_limit", pa.int64()),
    ("puzzlesweep_version", pa.string()),
    ("schema_version", pa.int32()),
]
COMMON_NAMES = {name for name, _ in COMMON_COLUMNS}


def default_catalog() -> str:
    """`$PUZZLESWEEP_CATALOG`, else `./results`."""
    return os.environ.get("PUZZLESWEEP_CATALOG", "results")


def _arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type of a parameter annotation (int, str, Literal of str, list[int])."""
    origin = typing.get_origin(annotation)
    if annotation is int:
        return pa.int64()
    if annotation is float:
        return pa.float64()
    if annotation is bool:
        return pa.bool_()
    if annotation is str or origin is typing.Literal:
        return pa.string()
    if origin is list:
        return pa.list_(_arrow_type(typing.get_args(annotation)[0]))
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _arrow_type(inner)
    raise TypeError(f"no Arrow type for parameter annotation {annotation!r}")


def schema(params_model: type) -> pa.Schema:
    """The Arrow schema of one family's rows: common columns, then its parameters.
    Raises ValueError when a parameter reuses a common column's name."""
    fields = [pa.field(name, kind) for name, kind in COMMON_COLUMNS]
    for name, info in params_model.model_fields.items():
        if name in COMMON_NAMES:
            raise ValueError(f"parameter {name!r} reuses a common column's name")
        fields.append(pa.field(name, _arrow_type(info.annotation)))
    return pa.schema(fields)


def write_batch(catalog: str | Path, family: str, params_model: type, rows: list[dict]) -> Path:
    """Write `rows` (dicts with the common columns and a `params` dict) as one Parquet
    file under `catalog/family=FAMILY/`, atomically; returns the file's path.

    The file is written under a hidden `.part-*.tmp` name in the same directory,
    fsynced, renamed with os.replace, and the directory fsynced.
    """
    table_schema = schema(params_model)
    flat = [{**{k: v for k, v in row.items() if k != "params"}, **row["params"]} for row in rows]
    table = pa.Table.from_pylist(flat, schema=table_schema)
    directory = Path(catalog) / f"family={family}"
    directory.mkdir(parents=True, exist_ok=True)
    run_id = rows[0].get("run_id", "run") if rows else "run"
    name = f"part-{run_id}-{uuid.uuid4().hex[:12]}.parquet"
    temporary = directory / f".{name}.tmp"
    with open(temporary, "wb") as sink:
        pq.write_table(table, sink, compression="zstd")
        sink.flush()
        os.fsync(sink.fileno())
    final = directory / name
    os.replace(temporary, final)
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return final


def files(catalog: str | Path) -> list[Path]:
    """Every committed Parquet file of the catalog (temporary files excluded)."""
    return sorted(Path(catalog).glob("family=*/*.parquet"))


def connect(catalog: str | Path):
    """A DuckDB connection with the view `results` over the whole catalog.

    Raises BadInput when the directory does not exist or holds no results yet.
    """
    import duckdb

    root = Path(catalog)
    if not root.is_dir():
        raise BadInput(f"catalog {root} does not exist (run a sweep into it first)")
    if not files(root):
        raise BadInput(f"catalog {root} holds no results yet (no family=*/*.parquet files)")
    connection = duckdb.connect()
    pattern = str(root / "family=*" / "*.parquet").replace("'", "''")
    connection.execute(
        "CREATE VIEW results AS SELECT * FROM read_parquet("
        f"'{pattern}', hive_partitioning = true, union_by_name = true)"
    )
    return connection


def query(
    catalog: str | Path, sql: str, parameters: list | None = None
) -> tuple[list[str], list[tuple]]:
    """Run `sql` (with `?` placeholders bound to `parameters`) over the view `results`;
    returns (column names, rows).

    Raises BadInput for an empty catalog or an SQL error (with DuckDB's message).
    """
    import duckdb

    connection = connect(catalog)
    try:
        cursor = connection.execute(sql, parameters or [])
    except duckdb.Error as exc:
        raise BadInput(f"query failed: {exc}") from None
    columns = [d[0] for d in cursor.description or []]
    return columns, cursor.fetchall()


def _own_key(catalog: str | Path) -> str:
    """The SQL expression of a row's own params key. Rows written before `params_key`
    existed have instance_key = the hash of their own params, which is the same thing."""
    columns, _ = query(catalog, "SELECT * FROM results LIMIT 0")
    return "coalesce(params_key, instance_key)" if "params_key" in columns else "instance_key"


def finished(catalog: str | Path) -> set[tuple[str, str, float, int | None]]:
    """The (params_key, solver, time_limit, node_limit) that already have a final
    result (any status but `error`); empty for a missing or empty catalog. Keyed by
    params_key, not instance_key, so an instance equivalent to one solved in an earlier
    run still gets its own row."""
    if not Path(catalog).is_dir() or not files(catalog):
        return set()
    _, rows = query(
        catalog,
        f"SELECT DISTINCT {_own_key(catalog)}, solver, time_limit, node_limit FROM results "
        "WHERE status <> 'error'",
    )
    return {(key, solver, limit, nodes) for key, solver, limit, nodes in rows}


LATEST = """
SELECT * FROM results WHERE sweep = ?
QUALIFY row_number() OVER (
    PARTITION BY {key}, solver, time_limit, node_limit
    ORDER BY status = 'error', finished_at DESC) = 1
"""


def latest(catalog: str | Path, sweep: str) -> list[dict]:
    """The latest result of every (instance, solver, limits) of sweep `sweep`, a final
    one before an error, as dicts of column → value."""
    columns, rows = query(catalog, LATEST.format(key=_own_key(catalog)), [sweep])
    return [dict(zip(columns, row, strict=True)) for row in rows]
