"""The command line (typer): exit 0 ok, 2 bad input (nothing written), 1 failure.

    puzzlesweep solve FAMILY key=value ... [--solver S] [--time-limit S] [--json]
        [--count] [--picture FILE.png|FILE.svg]
    puzzlesweep run SPEC.toml [--catalog DIR] [--address tcp://HOST:PORT] [--workers N]
                    [--memory-limit SIZE] [--retries N] [--dashboard-address HOST:PORT]
    puzzlesweep prove FAMILY key=value ... --split TEXT [--solver S] [--width N] [--time-limit S]
                    [--wall S] [--probe S] [--no-cutoff] [--catalog DIR] [--address A]
                    [--workers N] [--check]
    puzzlesweep catalog query "SQL over results, latest, runs" [--catalog DIR]
                    [--format table|csv|json] [--as-of VERSION|TIME]
    puzzlesweep catalog summary [--catalog DIR] [--sweep NAME]
    puzzlesweep catalog check [--catalog DIR]
    puzzlesweep catalog repair [--catalog DIR]
    puzzlesweep catalog compact [--catalog DIR] [--retain-hours H]
    puzzlesweep catalog history [--catalog DIR] [--limit N]
    puzzlesweep catalog verify [--catalog DIR]
    puzzlesweep catalog migrate OLD_DIR NEW_CATALOG

Parameter values on the command line are integers (`k=5`), words (`piece=knight`) or
comma-separated integer lists (`dims=6,7,6`, `counts=14,13`).
"""

import os
import sys

# isort: off
# the commands register as their modules load, in this order in `--help`
from puzzlesweep.cli import solve  # noqa: F401
from puzzlesweep.cli import run  # noqa: F401
from puzzlesweep.cli import catalog  # noqa: F401

# isort: on
from puzzlesweep.cli.common import app, err
from puzzlesweep.core import BadInput

#: Offline, quiet defaults for Prefect and Dask, set before they are imported (any can be
#: overridden in the environment): no telemetry, a start-up timeout above the 23 s
#: measured for a cold temporary API; Prefect's run logs at INFO reach its API (the flow
#: run's page), while the terminal shows warnings only (and `run`'s progress display).
QUIET_DEFAULTS = {
    # the resource tracker of an interrupted run's cluster cleans up without a warning
    "PYTHONWARNINGS": "ignore::UserWarning:multiprocessing.resource_tracker",
    "DASK_LOGGING__DISTRIBUTED": "warning",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "INFO",
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING",
}


def main() -> None:
    """Entry point of the `puzzlesweep` script."""
    for name, value in QUIET_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        app()
    except BadInput as exc:
        err.print(f"error: {exc}", highlight=False, markup=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
