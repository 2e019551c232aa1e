"""The catalog: two Delta Lake tables, `results` and `runs`, read with DuckDB.

Every reader and writer of results goes through this package. A catalog is a directory
or an object-store URL (`store.py`); `CATALOG/results` is a plain Delta table that tools
knowing nothing of puzzlesweep read (deltalake, polars `read_delta`, pandas, Spark,
DuckDB over `DeltaTable.to_pyarrow_dataset()`).

Reading takes one snapshot (`Snapshot`): both tables at fixed versions, optionally as
they were at an earlier version or time, and a DuckDB connection with three views:

    results   every row
    latest    the latest row of every (params_key, solver, time_limit, node_limit): a
              final status before `error`, then the newest `finished_at` (`LATEST`)
    runs      one row per run; a `running` run whose heartbeat stopped reads `lost`

    from puzzlesweep import catalog
    catalog.query("results", "SELECT family, count(*) FROM latest GROUP BY ALL")
    catalog.to_arrow("results", "SELECT * FROM results WHERE status = 'optimal'")
    catalog.to_pandas("results", "SELECT * FROM runs")
    catalog.snapshot("results", as_of=3).query("SELECT count(*) FROM results")
"""

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pyarrow as pa

from puzzlesweep.catalog.schema import (
    COMMON_COLUMNS,
    COMMON_NAMES,
    RUN_SCHEMA,
    RUN_STATES,
    SCHEMA_VERSION,
    STATUSES,
    schema,
)
from puzzlesweep.catalog.store import (
    KEYS,
    RESULTS,
    RUNS,
    CatalogDamaged,
    Location,
    append,
    is_table,
    locate,
    open_table,
)
from puzzlesweep.core import BadInput

CatalogLike = str | Path | Location

#: Seconds without a heartbeat after which a `running` run reads `lost` (a run writes
#: one every `runs.HEARTBEAT_SECONDS`).
LOST_AFTER_SECONDS = 90

LATEST = """
SELECT * FROM results
QUALIFY row_number() OVER (
    PARTITION BY params_key, solver, time_limit, node_limit
    ORDER BY status = 'error', finished_at DESC) = 1
"""
RUNS_VIEW = f"""
SELECT * REPLACE (
    CASE WHEN state = 'running'
          AND heartbeat_at < now() - INTERVAL {LOST_AFTER_SECONDS} SECOND
         THEN 'lost' ELSE state END AS state)
FROM runs_table
"""


def default_catalog() -> str:
    """`$PUZZLESWEEP_CATALOG`, else `./results`."""
    return os.environ.get("PUZZLESWEEP_CATALOG", "results")


def resolve(catalog: CatalogLike) -> str:
    """The catalog as a string any process can use: an absolute path for a local
    directory (Dask workers may run in another working directory), else the URL.
    Raises BadInput as `locate` does."""
    return locate(catalog).uri


def exists(catalog: CatalogLike) -> bool:
    """Does `catalog` hold a results or runs table?"""
    location = locate(catalog)
    return is_table(location, RESULTS) or is_table(location, RUNS)


def check_writable(catalog: CatalogLike) -> Location:
    """The Location of `catalog` if a sweep may write there: a catalog, an empty or
    missing directory, or an object-store URL. Raises BadInput (naming what it found)
    for a directory that holds something else, such as a catalog of the old layout."""
    location = locate(catalog)
    if not location.local or exists(location) or not os.path.isdir(location.uri):
        return location
    entries = sorted(os.listdir(location.uri))
    if not entries:
        return location
    if any(e.startswith("family=") or e == "_runs" for e in entries):
        raise BadInput(
            f"catalog {location.uri} has the old layout (family=*/ Parquet files); "
            f"migrate it first: puzzlesweep catalog migrate {location.uri} NEW_DIR"
        )
    shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
    raise BadInput(f"catalog {location.uri} is a directory of other files ({shown})")


def _flat(rows: list[dict]) -> list[dict]:
    """Rows with their `params` dict spread into columns."""
    return [{**{k: v for k, v in r.items() if k != "params"}, **r.get("params", {})} for r in rows]


def prepare(catalog: CatalogLike, params_models: Iterable[type]) -> Location:
    """Make sure the results table exists and has the columns of every family whose
    parameter model is in `params_models` (one schema-merge commit when one is missing),
    so that the batches of a run never change the schema while they commit side by
    side. Returns the Location. Raises BadInput as `check_writable` does."""
    location = check_writable(catalog)
    wanted = [schema(model) for model in params_models]
    table = open_table(location, RESULTS)
    have = set(table.schema().to_arrow().names) if table is not None else set()
    missing = [s for s in wanted if not set(s.names) <= have]
    if table is None or missing:
        merged = pa.unify_schemas(missing or [pa.schema(COMMON_COLUMNS)])
        append(location, RESULTS, merged.empty_table(), partition_by=["family"])
    return location


def write_batch(
    catalog: CatalogLike, params_model: type, rows: list[dict], app_id: str | None = None
) -> bool:
    """Append `rows` (dicts with the common columns and a `params` dict, all of one
    family whose parameter model is `params_model`) to `results` as one commit. With
    `app_id` (a run and batch, e.g. "RUN-00012"), the commit carries it as a Delta
    application transaction and is skipped when one already does: a retried or
    re-executed batch is stored once. Returns True when written, False when `app_id`
    was already committed.

    Raises ValueError for an empty batch or rows of several families, pyarrow's errors
    for values that do not fit the schema, OSError from the storage."""
    if not rows:
        raise ValueError("a batch needs at least one row")
    if len({row["family"] for row in rows}) != 1:
        raise ValueError("every row of a batch must be of one family")
    table = pa.Table.from_pylist(_flat(rows), schema=schema(params_model))
    keys = [row["params_key"] for row in rows]
    return append(locate(catalog), RESULTS, table, app_id, keys, partition_by=["family"])


def committed(catalog: CatalogLike, app_id: str) -> bool:
    """Has a commit of `results` carried application transaction `app_id`?"""
    table = open_table(locate(catalog), RESULTS)
    return table is not None and table.transaction_version(app_id) is not None


class Snapshot:
    """Both tables of a catalog at fixed versions (`results_version`, `runs_version`:
    ints, or None for a missing table) and a DuckDB connection over them with the views
    `results`, `latest` and `runs` (see the module docstring).

    `query(sql, parameters)` returns (columns, rows); `relation(sql, parameters)` a
    DuckDB relation (`.to_arrow_table()`, `.df()`). Both raise BadInput for SQL errors
    and CatalogDamaged, naming the file, when a data file cannot be read."""

    def __init__(self, location: Location, as_of: int | str | None = None):
        import duckdb

        self.location = location
        self.results = open_table(location, RESULTS, as_of)
        runs = open_table(location, RUNS)  # runs as they are now, also with `as_of`
        self.results_version = self.results.version() if self.results is not None else None
        self.runs_version = runs.version() if runs is not None else None
        self.connection = duckdb.connect()
        if self.results is not None:
            self.connection.register("results", self.results.to_pyarrow_dataset())
            self.connection.execute(f"CREATE VIEW latest AS {LATEST}")
        self.connection.register(
            "runs_table", runs.to_pyarrow_table() if runs is not None else RUN_SCHEMA.empty_table()
        )
        self.connection.execute(f"CREATE VIEW runs AS {RUNS_VIEW}")

    def close(self) -> None:
        """Close the DuckDB connection (a connection left open at interpreter exit, with
        an Arrow dataset registered, can abort the process)."""
        self.connection.close()

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def files(self) -> list[str]:
        """The data files of `results` in this snapshot (URIs)."""
        return self.results.file_uris() if self.results is not None else []

    def relation(self, sql: str, parameters: list | None = None):
        """The DuckDB relation of `sql` (with `?` bound to `parameters`)."""
        if self.results is None:
            raise BadInput(f"catalog {self.location.uri} holds no results yet")
        with self._errors():
            relation = self.connection.sql(sql, params=parameters or None)
        if relation is None:
            raise BadInput("query failed: the statement returns no rows (use SELECT)")
        return relation

    def query(self, sql: str, parameters: list | None = None) -> tuple[list[str], list[tuple]]:
        """(column names, rows as tuples) of `sql` over the views."""
        relation = self.relation(sql, parameters)
        with self._errors():
            return list(relation.columns), relation.fetchall()

    def arrow(self, sql: str, parameters: list | None = None) -> pa.Table:
        """The result of `sql` as a pyarrow Table."""
        relation = self.relation(sql, parameters)
        with self._errors():
            return relation.to_arrow_table()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """A failed read of a data file becomes CatalogDamaged naming the file, any other
        DuckDB error BadInput with DuckDB's message."""
        import duckdb

        try:
            yield
        except (OSError, pa.ArrowException, duckdb.Error) as exc:
            from puzzlesweep.catalog.maintenance import damaged_files

            if not damaged_files(self.location, self.results):
                if isinstance(exc, duckdb.Error):
                    raise BadInput(f"query failed: {exc}") from None
                raise
            # files of this snapshot are unreadable: damaged now, or vacuumed since
            damaged = [
                path for path, _ in damaged_files(self.location, open_table(self.location, RESULTS))
            ]
            if not damaged:
                raise StaleSnapshot(
                    f"catalog {self.location.uri}: version "
                    f"{self.results_version} was vacuumed while read"
                ) from None
            more = f" and {len(damaged) - 1} more" if len(damaged) > 1 else ""
            raise CatalogDamaged(
                f"catalog {self.location.uri}: data file {damaged[0]}{more} cannot be read "
                f"({str(exc).splitlines()[0][:120]}); run `puzzlesweep catalog check`, then "
                "`puzzlesweep catalog repair` and re-run the sweep to solve its rows again"
            ) from None


class StaleSnapshot(BadInput):
    """The files of a snapshot were vacuumed (`catalog compact`) while it was read."""


def _fresh(catalog: CatalogLike, read, as_of: int | str | None = None):
    """`read(snapshot)` on a new snapshot, taken again (up to 3 times) when a compaction
    vacuumed the files of the one being read."""
    for attempt in range(3):
        try:
            with snapshot(catalog, as_of) as shot:
                return read(shot)
        except StaleSnapshot:
            if attempt == 2 or as_of is not None:
                raise


def snapshot(catalog: CatalogLike, as_of: int | str | None = None) -> Snapshot:
    """A Snapshot of `catalog`, now or `as_of` a version (int) or a time (ISO 8601
    string). Raises BadInput when the catalog does not exist or has no such version."""
    location = locate(catalog)
    if not exists(location):
        raise BadInput(f"catalog {location.uri} does not exist (run a sweep into it first)")
    return Snapshot(location, as_of)


def connect(catalog: CatalogLike, as_of: int | str | None = None):
    """A DuckDB connection with the views `results`, `latest` and `runs` over one
    snapshot (see `snapshot`). Raises BadInput as `snapshot` does."""
    shot = snapshot(catalog, as_of)
    if shot.results is None:
        raise BadInput(f"catalog {shot.location.uri} holds no results yet")
    return shot.connection


def open(catalog: CatalogLike):
    """The DuckDB relation `results` of the catalog: filter, aggregate,
    `.to_arrow_table()`, `.df()`. Raises BadInput as `connect` does."""
    return connect(catalog).view("results")


def query(
    catalog: CatalogLike, sql: str, parameters: list | None = None, as_of: int | str | None = None
) -> tuple[list[str], list[tuple]]:
    """Run `sql` (with `?` placeholders bound to `parameters`) over the views `results`,
    `latest` and `runs` of one snapshot; returns (column names, rows as tuples). Raises
    BadInput for a missing or empty catalog or an SQL error, CatalogDamaged for a data
    file that cannot be read."""
    return _fresh(catalog, lambda shot: shot.query(sql, parameters), as_of)


def to_arrow(
    catalog: CatalogLike, sql: str = "SELECT * FROM results", parameters: list | None = None
) -> pa.Table:
    """The result of `sql` as a pyarrow Table (typed columns: lists stay lists,
    timestamps UTC). Raises as `query` does."""
    return _fresh(catalog, lambda shot: shot.arrow(sql, parameters))


def to_pandas(
    catalog: CatalogLike, sql: str = "SELECT * FROM results", parameters: list | None = None
):
    """The result of `sql` as a pandas DataFrame (needs pandas; raises ImportError
    naming it otherwise). Raises as `query` does."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise ImportError("to_pandas needs pandas: pip install pandas") from None
    return _fresh(catalog, lambda shot: shot.relation(sql, parameters).df())


def files(catalog: CatalogLike) -> list[str]:
    """The data files of `results` now (URIs); empty for a missing catalog."""
    table = open_table(locate(catalog), RESULTS)
    return table.file_uris() if table is not None else []


DoneKey = tuple[str, str, float, int | None]


def finished(catalog: CatalogLike, planned: Iterable[DoneKey] | None = None) -> set[DoneKey]:
    """The (params_key, solver, time_limit in seconds, node_limit) that already have a
    final result (any status but `error`); empty for a missing or empty catalog. Keyed by
    the row's own params_key, so an instance equivalent to one solved earlier still gets
    its own row. With `planned` (such tuples), only those are looked up: DuckDB joins
    them with the catalog, so the cost scales with the plan, not with the catalog."""
    location = locate(catalog)
    if open_table(location, RESULTS) is None:
        return set()
    with Snapshot(location) as shot:
        return _finished(shot, planned)


def _finished(shot: Snapshot, planned: Iterable[DoneKey] | None) -> set[DoneKey]:
    sql = (
        "SELECT DISTINCT params_key, solver, time_limit, node_limit FROM results "
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
        shot.connection.register("planned", keys)
        sql += (
            " AND (params_key, solver, time_limit, coalesce(node_limit, -1)) IN "
            "(SELECT (params_key, solver, time_limit, coalesce(node_limit, -1)) FROM planned)"
        )
    _, rows = shot.query(sql)
    return {(key, solver, limit, nodes) for key, solver, limit, nodes in rows}


def latest(catalog: CatalogLike, params_keys: list[str]) -> list[dict]:
    """The latest result (view `latest`) of each solver and limits of the instances
    `params_keys`, whichever run or sweep wrote it, as dicts of column → value."""
    columns, rows = query(
        catalog, "SELECT * FROM latest WHERE params_key IN (SELECT unnest(?))", [params_keys]
    )
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return ""


def versions() -> dict[str, str]:
    """The versions a run records: puzzlesweep, HiGHS (highspy), Prefect, Dask,
    distributed and Python."""
    import sys

    return {
        "puzzlesweep_version": _version("puzzlesweep"),
        "highs_version": _version("highspy"),
        "prefect_version": _version("prefect"),
        "dask_version": _version("dask"),
        "distributed_version": _version("distributed"),
        "python_version": sys.version.split()[0],
    }


def now() -> datetime:
    """The current time, UTC (the catalog's timestamps are UTC)."""
    return datetime.now(UTC)


from puzzlesweep.catalog.maintenance import (  # noqa: E402
    Problem,
    check,
    compact,
    history,
    migrate,
    repair,
)
from puzzlesweep.catalog.runs import (  # noqa: E402
    Heartbeat,
    claim,
    live_runs,
    read_run,
    refuse_if_busy,
    write_run,
)

__all__ = [
    "KEYS",
    "BadInput",
    "COMMON_COLUMNS",
    "COMMON_NAMES",
    "CatalogDamaged",
    "Heartbeat",
    "LOST_AFTER_SECONDS",
    "Location",
    "Problem",
    "RUN_STATES",
    "SCHEMA_VERSION",
    "STATUSES",
    "Snapshot",
    "StaleSnapshot",
    "check",
    "check_writable",
    "claim",
    "committed",
    "compact",
    "connect",
    "default_catalog",
    "exists",
    "files",
    "finished",
    "history",
    "latest",
    "live_runs",
    "locate",
    "migrate",
    "open",
    "prepare",
    "query",
    "read_run",
    "refuse_if_busy",
    "repair",
    "resolve",
    "schema",
    "snapshot",
    "to_arrow",
    "to_pandas",
    "versions",
    "write_batch",
    "write_run",
]
