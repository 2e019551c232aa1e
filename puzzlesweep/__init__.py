"""puzzlesweep: batch experiments on combinatorial puzzles."""

import os

from puzzlesweep.core import VERSION as __version__

__all__ = ["QUIET_DEFAULTS", "__version__", "set_quiet_defaults", "sweep"]

#: Offline, quiet defaults for Prefect and Dask, to be set before either is imported (any
#: can be overridden in the environment): no telemetry, a start-up timeout above the 23 s
#: measured for a cold temporary Prefect API (Prefect's default is 20 s); Prefect's run
#: logs at INFO reach its API (the flow run's page), while the terminal shows warnings
#: only (and `run`'s progress display); the resource tracker of an interrupted run's
#: cluster cleans up without a warning.
QUIET_DEFAULTS = {
    "PYTHONWARNINGS": "ignore::UserWarning:multiprocessing.resource_tracker",
    "DASK_LOGGING__DISTRIBUTED": "warning",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "INFO",
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING",
}


def set_quiet_defaults() -> None:
    """Set each of `QUIET_DEFAULTS` in `os.environ` that is not set already (the CLI and
    the test suite call it before Prefect or Dask is imported)."""
    for name, value in QUIET_DEFAULTS.items():
        os.environ.setdefault(name, value)


def sweep(spec, catalog: str = "results", **options):
    """Run a sweep in this process and return its report (a dict: "run_id", "sweep",
    "planned", "skipped", "solved", "counts" by status, "batches", "failed", ...), as
    `puzzlesweep run` does: `spec` is a path, a URL, inline TOML text or the TOML
    document as a dict; `catalog` the catalog's directory or URL; `options` the fields of
    `puzzlesweep.flows.settings.RunSettings`, which are the `sweep` flow's parameters
    (`backend="threads"` for a notebook, `workers`, `address`, `batch_size`,
    `memory_limit`, ...). The report's "query" selects the rows of this run:
    `puzzlesweep.catalog.query(catalog, report["query"])`, or `catalog.to_pandas`. Calls
    in one process share one temporary Prefect API (when none is configured); inside a
    flow whose task runner is Dask's, the sweep is its subflow on that cluster. A script
    that runs a sweep on a local cluster must call it under `if __name__ ==
    "__main__":` (the cluster's worker processes import the script). Raises
    puzzlesweep.core.BadInput for a bad spec or options, KeyboardInterrupt when the run
    was interrupted."""
    set_quiet_defaults()
    from puzzlesweep.flows.api import shared_api
    from puzzlesweep.flows.settings import RunSettings
    from puzzlesweep.flows.sweep import run_sweep

    settings = RunSettings.of(catalog=catalog, **options)
    return run_sweep(spec, settings, api=shared_api(), keep_api=True)
