"""The catalog's old layout, as the benchmark compares Delta Lake against it: one Parquet
file per batch under `family=X/`, read by listing the files and a DuckDB view over
them, compacted into one file per family. Only `catalog_bench.py` uses it."""

import os
from pathlib import Path

import pyarrow as pa


def write(root: str, table: pa.Table, name: str) -> None:
    """The old layout's writer, reduced to what a batch did: one Parquet file
    `family=X/part-NAME.parquet` without the partition column, written under a
    hidden temporary name in its directory, fsynced, renamed into place."""
    import pyarrow.parquet as pq

    family = table["family"][0].as_py()
    directory = os.path.join(root, f"family={family}")
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, f"part-{name}.parquet")
    temporary = os.path.join(directory, f".part-{name}.tmp")
    pq.write_table(table.drop_columns(["family"]), temporary, compression="zstd")
    descriptor = os.open(temporary, os.O_RDONLY)
    os.fsync(descriptor)
    os.close(descriptor)
    os.replace(temporary, final)


def files(root: str) -> list[str]:
    return sorted(str(p) for p in Path(root).glob("family=*/*.parquet"))


def connection(root: str):
    """The old reader: list the visible files, then a DuckDB view over them."""
    import duckdb

    view = duckdb.connect()
    paths = ", ".join(f"'{path}'" for path in files(root))
    view.execute(
        f"CREATE VIEW results AS SELECT * FROM read_parquet([{paths}], "
        "hive_partitioning = true, union_by_name = true)"
    )
    return view


def finished(root: str, plan: list[tuple]) -> set[tuple]:
    """The old `catalog.finished` with a plan: the planned keys joined in DuckDB."""
    view = connection(root)
    view.register("planned", _plan_table(plan))
    rows = view.execute(
        "SELECT DISTINCT params_key, solver, time_limit, node_limit FROM results "
        "WHERE status <> 'error' AND (params_key, solver, time_limit, coalesce(node_limit, -1)) "
        "IN (SELECT (params_key, solver, time_limit, coalesce(node_limit, -1)) FROM planned)"
    ).fetchall()
    return set(rows)


def _plan_table(plan: list[tuple]) -> pa.Table:
    return pa.table(
        list(zip(*plan, strict=True)),
        schema=pa.schema(
            [
                ("params_key", pa.string()),
                ("solver", pa.string()),
                ("time_limit", pa.float64()),
                ("node_limit", pa.int64()),
            ]
        ),
    )


def compact(root: str) -> None:
    """What the old `catalog compact` left: one Parquet file per family."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    for directory in sorted(Path(root).glob("family=*")):
        parts = sorted(directory.glob("part-*.parquet"))
        merged = ds.dataset([str(p) for p in parts], format="parquet").to_table()
        pq.write_table(merged, directory / "compact-0.parquet", compression="zstd")
        for part in parts:
            part.unlink()
