"""The catalog: two Delta Lake tables, `results` and `runs`, read with DuckDB.

Every reader and writer of results goes through this package. A catalog is a directory
or an object-store URL (`store.py`); `CATALOG/results` is a plain Delta table that tools
knowing nothing of puzzlesweep read (deltalake, polars `read_delta`, pandas, Spark,
DuckDB over `DeltaTable.to_pyarrow_dataset()`).

Reading (`read.py`) takes one snapshot (`Snapshot`): both tables at fixed versions, optionally as
they were at an earlier version or time, and a DuckDB connection with three views:

    results   every row
    latest    the latest row of every (params_key, solver, time_limit, node_limit): a
              final status before `error`, then the newest `finished_at` (`LATEST`)
    runs      one row per run; a `running` run whose heartbeat stopped reads `lost`
              (the rows of maintenance leases, `runs.lease`, are left out)

    from puzzlesweep import catalog
    catalog.query("results", "SELECT family, count(*) FROM latest GROUP BY ALL")
    catalog.to_arrow("results", "SELECT * FROM results WHERE status = 'optimal'")
    catalog.to_pandas("results", "SELECT * FROM runs")
    catalog.snapshot("results", as_of=3).query("SELECT count(*) FROM results")
"""

from puzzlesweep.catalog.compaction import compact
from puzzlesweep.catalog.maintenance import Problem, check, history, repair
from puzzlesweep.catalog.read import (
    LOST_AFTER_SECONDS,
    Snapshot,
    StaleSnapshot,
    connect,
    files,
    finished,
    latest,
    open,
    query,
    snapshot,
    summary,
    to_arrow,
    to_pandas,
)
from puzzlesweep.catalog.runs import (
    Heartbeat,
    claim,
    live_runs,
    read_run,
    refuse_if_busy,
    software_versions,
    status_counts,
    write_run,
    written,
)
from puzzlesweep.catalog.schema import (
    COMMON_COLUMNS,
    COMMON_NAMES,
    RUN_STATES,
    SCHEMA_VERSION,
    STATUSES,
    schema,
)
from puzzlesweep.catalog.store import (
    CatalogDamaged,
    CatalogUnreachable,
    Location,
    exists,
    locate,
    open_table,
)
from puzzlesweep.catalog.write import (
    BatchRows,
    check_readable,
    check_writable,
    committed,
    default_catalog,
    prepare,
    resolve,
    write_batch,
    write_batches,
)
from puzzlesweep.core import BadInput

__all__ = [
    "BadInput",
    "BatchRows",
    "COMMON_COLUMNS",
    "COMMON_NAMES",
    "CatalogDamaged",
    "CatalogUnreachable",
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
    "check_readable",
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
    "open",
    "open_table",
    "prepare",
    "query",
    "read_run",
    "refuse_if_busy",
    "repair",
    "resolve",
    "schema",
    "snapshot",
    "status_counts",
    "summary",
    "to_arrow",
    "to_pandas",
    "software_versions",
    "write_batch",
    "write_batches",
    "written",
    "write_run",
]
