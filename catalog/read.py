"""Reading the catalog: one snapshot of both tables, and DuckDB views over it.

A `Snapshot` holds `results` and `runs` at fixed versions (optionally as they were at an
earlier version or time) and a DuckDB connection with the views `results`, `latest` and
`runs` (see the package docstring). `query`, `to_arrow` and `to_pandas` take a snapshot
each and retry once when a compaction vacuumed the files it read; `finished` is the
resume lookup, `latest` the latest rows of given instances.
"""

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from puzzlesweep.catalog.files import damaged_files, lost_log_files, missing_files
from puzzlesweep.catalog.runs import LOST_AFTER_SECONDS, MAINTENANCE
from puzzlesweep.catalog.schema import COMMON_COLUMNS, RUN_SCHEMA
from puzzlesweep.catalog.store import (
    RESULTS,
    RUNS,
    CatalogDamaged,
    Location,
    exists,
    locate,
    open_table,
)
from puzzlesweep.catalog.versions import open_as_of, readable_versions
from puzzlesweep.core import DONE_KEY, FINAL, BadInput, DoneKey

CatalogLike = str | Path | Location

LATEST = f"""
SELECT * FROM results
QUALIFY row_number() OVER (
    PARTITION BY {", ".join(DONE_KEY)}
    ORDER BY NOT ({FINAL}), finished_at DESC) = 1
"""
RUNS_VIEW = f"""
SELECT * REPLACE (
    CASE WHEN state = 'running'
          AND heartbeat_at < now() - INTERVAL {LOST_AFTER_SECONDS} SECOND
         THEN 'lost' ELSE state END AS state)
FROM runs_table
WHERE sweep IS DISTINCT FROM '{MAINTENANCE}'
"""


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
        self.results = open_as_of(location, RESULTS, as_of)
        if self.results is None:
            refuse_lost_log(location)
        elif as_of is not None and missing_files(location, self.results):
            raise BadInput(vacuumed(location, self.results.version()))
        runs = open_table(location, RUNS)  # runs as they are now, also with `as_of`
        self.results_version = self.results.version() if self.results is not None else None
        self.runs_version = runs.version() if runs is not None else None
        self.connection = duckdb.connect()
        if self.results is not None:
            self.connection.register("results", dataset(location, self.results))
            self.connection.execute(f"CREATE VIEW latest AS {LATEST}")
        self.connection.register(
            "runs_table", runs.to_pyarrow_table() if runs is not None else RUN_SCHEMA.empty_table()
        )
        self.connection.execute(f"CREATE VIEW runs AS {RUNS_VIEW}")

    def close(self) -> None:
        """Close the DuckDB connection and let go of the tables (a connection left open
        at interpreter exit, with an Arrow dataset registered, can abort the process)."""
        self.connection.close()
        self.results = None

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
            if not damaged_files(self.location, self.results):
                if isinstance(exc, duckdb.Error):
                    raise BadInput(f"query failed: {exc}") from None
                raise
            # files of this snapshot are unreadable: damaged now, or vacuumed since
            damaged = [
                path for path, _ in damaged_files(self.location, open_table(self.location, RESULTS))
            ]
            if not damaged:
                message = vacuumed(self.location, self.results_version, "while read")
                raise StaleSnapshot(message) from None
            more = f" and {len(damaged) - 1} more" if len(damaged) > 1 else ""
            raise CatalogDamaged(
                f"catalog {self.location.uri}: data file {damaged[0]}{more} cannot be read "
                f"({str(exc).splitlines()[0][:120]}); run `puzzlesweep catalog check`, then "
                "`puzzlesweep catalog repair` and re-run the sweep to solve its rows again"
            ) from None


def vacuumed(location: Location, version: int, when: str = "") -> str:
    """The message for version `version` of results whose data files a vacuum deleted
    (`when`: e.g. "while read"), naming the versions that can still be read."""
    readable = readable_versions(location, RESULTS)
    still = (
        f"versions {readable[0]}..{readable[1]} can still be read"
        if readable
        else "no version can be read (run `puzzlesweep catalog check`)"
    )
    return (
        f"catalog {location.uri}: version {version} of results was vacuumed "
        f"{when + ' ' if when else ''}(its data files were deleted by `catalog compact`); "
        f"{still}"
    )


def dataset(location: Location, table) -> "pa.dataset.Dataset":
    """The pyarrow dataset of `table` (a DeltaTable of the catalog at `location`). A
    local table is read through pyarrow's own file system: deltalake's default, a
    Python file system (`DeltaStorageHandler`) with pre-buffering, leaves pyarrow's I/O
    threads calling into Python after a query that stopped early (LIMIT), and one still
    doing so at interpreter exit aborts the process ("terminate called without an
    active exception", exit 134)."""
    import pyarrow.fs as pafs

    if not location.local:
        return table.to_pyarrow_dataset()
    root = table.table_uri.removeprefix("file://").rstrip("/")
    return table.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(root, pafs.LocalFileSystem()))


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
    string). Raises BadInput when the catalog does not exist or has no such version,
    CatalogDamaged when its results lost their transaction log (`refuse_lost_log`)."""
    location = locate(catalog)
    if not exists(location):
        refuse_lost_log(location)
        empty = location.local and os.path.isdir(location.uri)
        what = ": the folder holds no catalog yet" if empty else " does not exist"
        raise BadInput(f"catalog {location.uri}{what} (run a sweep into it first)")
    return Snapshot(location, as_of)


def refuse_lost_log(location: Location) -> None:
    """Raise CatalogDamaged when `results` has data files but no transaction log: the
    catalog is not empty, its rows are unreachable until `catalog repair` rebuilds it."""
    if files := lost_log_files(location):
        raise CatalogDamaged(
            f"catalog {location.uri}: results has {len(files)} data files but no "
            "transaction log (results/_delta_log is lost); run `puzzlesweep catalog check`, "
            "then `puzzlesweep catalog repair` to rebuild it from them"
        )


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


def finished(catalog: CatalogLike, planned: Iterable[DoneKey] | None = None) -> set[DoneKey]:
    """The `DONE_KEY`s (params_key, solver, time_limit in seconds, node_limit) that
    already have a final result (`FINAL`: any status but `error`); empty for a missing
    or empty catalog. Keyed by the row's own params_key, so an instance equivalent to one
    solved earlier still gets its own row. With `planned` (such tuples), only those are
    looked up: DuckDB joins them with the catalog, so the cost scales with the plan, not
    with the catalog."""
    location = locate(catalog)
    if open_table(location, RESULTS) is None:
        return set()
    with Snapshot(location) as shot:
        return _finished(shot, planned)


def _finished(shot: Snapshot, planned: Iterable[DoneKey] | None) -> set[DoneKey]:
    columns = ", ".join(DONE_KEY)
    sql = f"SELECT DISTINCT {columns} FROM results WHERE {FINAL}"
    if planned is not None:
        types = dict(COMMON_COLUMNS)
        keys = pa.table(
            list(zip(*planned, strict=True)) or [[] for _ in DONE_KEY],
            schema=pa.schema([(column, types[column]) for column in DONE_KEY]),
        )
        shot.connection.register("planned", keys)
        same = " AND ".join(f"r.{c} IS NOT DISTINCT FROM p.{c}" for c in DONE_KEY)
        sql = (
            f"SELECT DISTINCT {columns} FROM (SELECT {columns} FROM results WHERE {FINAL}) r "
            f"SEMI JOIN planned p ON {same}"
        )
    _, rows = shot.query(sql)
    return {tuple(row) for row in rows}


def latest(catalog: CatalogLike, params_keys: list[str]) -> list[dict]:
    """The latest result (view `latest`) of each solver and limits of the instances
    `params_keys`, whichever run or sweep wrote it, as dicts of column → value."""
    columns, rows = query(
        catalog, "SELECT * FROM latest WHERE params_key IN (SELECT unnest(?))", [params_keys]
    )
    return [dict(zip(columns, row, strict=True)) for row in rows]


def summary(
    catalog: CatalogLike, parameters: dict[str, list[str]], sweep: str | None = None
) -> list[tuple[str, list[str], list[tuple]]]:
    """What `puzzlesweep catalog summary` prints, from one snapshot, as (title, column
    names, rows) tables: the runs; counts by status per run and family (with verified
    rows and solve seconds); then, for each family of `parameters` (family → its
    parameter columns) that has rows, the best result of every instance by its
    parameters (optimal first, then the latest) and how many results it has. `sweep`
    keeps only that sweep's runs and rows. Raises BadInput for a `sweep` without a run in
    the catalog, CatalogDamaged naming a data file that cannot be read."""
    from puzzlesweep.catalog.schema import STATUSES

    only = "sweep = ?" if sweep else "true"
    args = [sweep] if sweep else []
    statuses = ", ".join(f"count(*) FILTER (status = '{s}') AS {s}" for s in STATUSES)
    tables = []
    with snapshot(catalog) as shot:
        if sweep and not shot.query("SELECT 1 FROM runs WHERE sweep = ? LIMIT 1", args)[1]:
            raise BadInput(f"no run of sweep {sweep!r} in catalog {locate(catalog).uri}")
        tables.append(
            (
                "runs",
                *shot.query(
                    "SELECT run_id, sweep, state, host, pid, started_at, heartbeat_at, "
                    f"finished_at, planned, skipped, solved FROM runs WHERE {only} "
                    "ORDER BY run_id",
                    args,
                ),
            )
        )
        tables.append(
            (
                "counts by run and family",
                *shot.query(
                    f"SELECT run_id, sweep, family, count(*) AS results, {statuses}, "
                    "count(*) FILTER (verified) AS verified, "
                    "round(sum(solve_seconds), 2) AS seconds "
                    f"FROM results WHERE {only} GROUP BY ALL ORDER BY run_id, family",
                    args,
                ),
            )
        )
        _, present = shot.query(f"SELECT DISTINCT family FROM results WHERE {only}", args)
        for family in sorted({f for (f,) in present} & set(parameters)):
            columns = ", ".join(f'"{name}"' for name in parameters[family])
            tables.append(
                (
                    f"{family}: best result by parameters",
                    *shot.query(
                        f"SELECT {columns}, solver, time_limit, status, objective, bound, "
                        "count(*) OVER (PARTITION BY params_key) AS results FROM results "
                        f"WHERE family = ? AND {only} "
                        "QUALIFY row_number() OVER (PARTITION BY params_key, solver ORDER "
                        f"BY status = 'optimal' DESC, NOT ({FINAL}), finished_at DESC) = 1 "
                        f"ORDER BY {columns}, solver",
                        [family, *args],
                    ),
                )
            )
    return tables
