"""The command line (typer): exit 0 ok, 2 bad input (nothing written), 1 failure.

    puzzlesweep solve FAMILY key=value ... [--solver S] [--time-limit S] [--json]
        [--count] [--picture FILE.png|FILE.svg]
    puzzlesweep families [--json]
    puzzlesweep engines [--json]
    puzzlesweep run SPEC.toml [--catalog DIR] [--address tcp://HOST:PORT] [--workers N]
                    [--memory-limit SIZE] [--retries N] [--dashboard-address HOST:PORT]
    puzzlesweep prove FAMILY key=value ... --split TEXT [--solver S] [--width N] [--time-limit S]
                    [--wall S] [--probe S] [--no-cutoff] [--catalog DIR] [--address A]
                    [--workers N] [--memory-limit SIZE] [--certificate FILE]
    puzzlesweep prove FAMILY key=value ... --check [--certificate FILE] [--resolve]
    puzzlesweep search peg_solitaire side=N start=all|HOLE --folder DIR [--shards N]
                    [--wall S] [--memory-limit SIZE] [--catalog DIR] [--address A] [--workers N]
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
from puzzlesweep.cli import prove  # noqa: F401
from puzzlesweep.cli import search  # noqa: F401
from puzzlesweep.cli import catalog  # noqa: F401

# isort: on
from puzzlesweep import set_quiet_defaults
from puzzlesweep.cli.common import PIPED_WIDTH, app, err
from puzzlesweep.core import BadInput


def main() -> None:
    """Entry point of the `puzzlesweep` script."""
    set_quiet_defaults()
    # delta-rs appends a Rust backtrace to its errors when these ask for one; users get
    # one line (set before any Delta error is made, the first read of them is cached)
    os.environ.update(RUST_BACKTRACE="0", RUST_LIB_BACKTRACE="0")
    if not sys.stdout.isatty():  # typer's --help at 80 columns cut option names short
        os.environ.setdefault("TERMINAL_WIDTH", str(PIPED_WIDTH))
    try:
        app()
    except BadInput as exc:
        err.print(f"error: {exc}", highlight=False, markup=False)
        sys.exit(2)
    except KeyboardInterrupt:  # before a command's own handler was in place
        err.print("error: Ctrl-C: stopped before any work started", highlight=False)
        sys.exit(130)


if __name__ == "__main__":
    main()
