"""What every command shares: the typer apps, the consoles, the shared options, and the
checks and messages of bad input (exit 2) and failures (exit 1)."""

import os
import re
import sys
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from puzzlesweep import catalog
from puzzlesweep.core import BadInput
from puzzlesweep.flows.settings import CORES

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    help="Batch experiments on combinatorial puzzles: solve, sweep, query.",
)
catalog_app = typer.Typer(
    no_args_is_help=True, help="Query and maintain the result catalog (Delta Lake tables)."
)
app.add_typer(catalog_app, name="catalog")
# Piped output gets wide lines rather than rich's default of 80 columns.
# Text is printed as given: names and values from specs, parameters and SQL results
# are no Rich markup (a "[/red]" raised MarkupError) nor emoji codes (":family:").
PIPED_WIDTH = 160  # columns of output that is not a terminal (rich's default is 80)
out = Console(width=None if sys.stdout.isatty() else PIPED_WIDTH, markup=False, emoji=False)
err = Console(
    stderr=True, width=None if sys.stderr.isatty() else PIPED_WIDTH, markup=False, emoji=False
)

CatalogOption = Annotated[
    str | None,
    typer.Option(
        "--catalog",
        help="Catalog directory or URL [default: $PUZZLESWEEP_CATALOG or ./results]",
    ),
]
#: The Dask options shared by `run` and `prove`; a local cluster has a worker per core
#: (`CORES`: the one default of `flows.settings`).

AddressOption = Annotated[
    str | None, typer.Option(help="An existing Dask scheduler, tcp://HOST:PORT")
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        min=1, help=f"Local Dask worker processes (not with --address) [default: {CORES}]"
    ),
]
#: Local workers per core a run may start: more than cores on purpose (workers wait on
#: solver children; 16 workers of sleeping instances on 2 cores measure fan-out), never
#: thousands.
WORKERS_PER_CORE = 8
#: Memory one local worker needs at least: its Dask worker process (about 100 MB with
#: its imports) and its solver child under the smallest memory limit (256 MiB).
WORKER_MEMORY = 512 * 2**20
#: Where a local cluster's Dask dashboard listens unless told (Dask's own default port).
DASHBOARD_DEFAULT = "127.0.0.1:8787"
DashboardOption = Annotated[
    str | None,
    typer.Option(
        help="Local cluster's Dask dashboard, HOST:PORT (HOST:0: any free port) "
        f"[default: {DASHBOARD_DEFAULT}]"
    ),
]
INTEGER = re.compile(r"^-?\d+$")


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print `error: message` on stderr; the caller raises the returned Exit(code)."""
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code)


def refuse_together(given: dict[str, object], reason: str) -> None:
    """Raise BadInput naming the options of `given` (option → value, None when not
    given) when more than one was given: they do not go together, because `reason`."""
    named = [option for option, value in given.items() if value not in (None, False)]
    if len(named) > 1:
        raise BadInput(f"{' and '.join(named)} do not go together: {reason}")


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """`key=value` words → dict; values are ints, comma-separated int lists, or words.
    Raises BadInput naming a malformed or repeated item."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise BadInput(f"parameter {item!r} is not of the form key=value")
        if key in params:
            raise BadInput(f"parameter {key!r} is given twice")
        if "," in value:
            parts = value.split(",")
            if not all(INTEGER.match(p.strip()) for p in parts):
                raise BadInput(f"parameter {key}: {value!r} is not a list of integers")
            params[key] = [int(p) for p in parts]
        else:
            params[key] = int(value) if INTEGER.match(value) else value
    return params


def cell_text(value: Any) -> str:
    """A cell as people read it: integers without '.0', lists comma-joined, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ",".join(map(cell_text, value))
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return str(value)


#: The longest cell a table shows whole (longer ones are cut, with `CUT` at the end),
#: and the most rows of a query's table: a table shows what a terminal can, as DuckDB's
#: own CLI does (`--format csv` or `json` prints everything).
CELL_CHARS = 120
CUT = "…"
QUERY_ROWS = 40


def bounded(text: str) -> str:
    """`text`, cut to `CELL_CHARS` characters with `CUT` at the end when longer."""
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + CUT


def print_rows(
    title: str | None, columns: list[str], rows: list[tuple], total: int | None = None
) -> None:
    """Print `rows` as a table under `title`: a value too wide for its column is folded
    onto more lines, a value over `CELL_CHARS` characters is cut with `CUT` (a run id
    stays whole to be queried); with `total` (the rows of the whole answer, of which
    `rows` are the first), a line then says how many rows were left out. Each kind of
    cut is said once, under the table."""
    from rich.table import Column

    table = Table(*(Column(c, overflow="fold") for c in columns), title=title)
    cut = False
    for row in rows:
        cells = [cell_text(value) for value in row]
        cut = cut or any(len(cell) > CELL_CHARS for cell in cells)
        table.add_row(*map(bounded, cells))
    out.print(table)
    notes = []
    if total is not None and total > len(rows):
        notes.append(f"{total - len(rows):,} more rows left out ({total:,} in all)")
    if cut:
        notes.append(f"values over {CELL_CHARS} characters cut ({CUT})")
    if notes:
        out.print("; ".join(notes) + ": --format csv or json prints them whole", highlight=False)


@contextmanager
def catalog_errors():
    """BadInput becomes one line and exit 2; a damaged catalog file (CatalogDamaged,
    naming the file and what to do), or storage that fails under a read (OSError, e.g.
    an object store that stopped answering), one line and exit 1."""
    try:
        yield
    except BadInput as exc:
        raise fail(str(exc)) from None
    except catalog.CatalogDamaged as exc:
        raise fail(str(exc), 1) from None
    except OSError as exc:
        import errno

        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(exc):
            raise fail(f"the catalog could not be written: no space left ({reason})", 1) from None
        raise fail(f"the catalog could not be read or written: {reason}", 1) from None


@contextmanager
def run_errors():
    """Inside `run` and `prove`: as `catalog_errors`, and a temporary Prefect API that
    did not start, or a run stopped at a batch no retry could fix (RunStopped), one line
    and exit 1 (no traceback for any)."""
    from puzzlesweep.flows.api import APIError
    from puzzlesweep.flows.faults import RunStopped

    try:
        with catalog_errors():
            yield
    except (APIError, RunStopped) as exc:
        raise fail(str(exc), 1) from None


#: Seconds between the first Ctrl-C (or SIGTERM) and the exit that follows it whatever
#: is still closing (docs/operations.md promises an exit within 10 s).
DASHBOARD_ADDRESS = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):(\d{1,5})$")


def check_dashboard_address(text: str, bind: bool = True) -> str:
    """`text` if it is HOST:PORT (or :PORT) with a port of 0..65535 and, with `bind`,
    a socket can be bound there now (a port in use is fine: the dashboard then takes
    another); raises BadInput naming the option otherwise, e.g. for a host that is not
    this machine's (8.8.8.8:80), before anything starts."""
    import errno
    import socket

    match = DASHBOARD_ADDRESS.match(text)
    if not match or int(match[2]) > 65535:
        raise BadInput(f"--dashboard-address {text!r} is not HOST:PORT (e.g. 127.0.0.1:8787)")
    if not bind:
        return text
    host = match[1].strip("[]")
    try:
        found = socket.getaddrinfo(host or None, int(match[2]), type=socket.SOCK_STREAM)
        family, _, _, _, where = found[0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(where)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            why = exc.strerror or str(exc)
            raise BadInput(f"--dashboard-address {text}: cannot be bound here ({why})") from None
    return text


def check_workers(workers: int | None) -> None:
    """Raise BadInput naming the most local workers this machine can take when `workers`
    is more: `WORKERS_PER_CORE` per core, and no more than the available memory holds at
    `WORKER_MEMORY` each (a worker count it cannot hold sat for minutes and grew to
    gigabytes before it failed). None (one per core) always passes."""
    if workers is None:
        return
    import psutil

    available = psutil.virtual_memory().available
    most = max(1, min(WORKERS_PER_CORE * CORES, available // WORKER_MEMORY))
    if workers > most:
        raise BadInput(
            f"--workers {workers}: this machine can take at most {most} local workers "
            f"({WORKERS_PER_CORE} per core on {CORES} cores, {available / 2**30:.1f} GiB "
            f"available at {WORKER_MEMORY // 2**20} MiB each)"
        )


def check_catalog_directory(catalog_path: str) -> None:
    """For a local catalog: make sure a file can be created in its directory or, while
    it does not exist yet, in the nearest folder above it that does (the probe file is
    removed at once, nothing else is made), before any cluster starts. Raises BadInput
    as `catalog.check_writable` does, or naming the catalog and the operating system's
    reason or a disk with less than `flows.faults.MARGIN_BYTES` free, and
    CatalogDamaged for a table whose last commit cannot be read (the run's flow would
    meet it only once started)."""
    location = catalog.check_writable(catalog_path)
    if not location.local:
        return
    catalog.check_readable(location)
    folder = os.path.abspath(location.uri)
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        if os.path.exists(folder):
            raise BadInput(f"catalog {catalog_path}: {folder} is not a directory")
        folder = os.path.dirname(folder)
    if reason := refusal_to_create_in(folder):
        raise BadInput(
            f"catalog {catalog_path} cannot be written: no file can be created in {folder}"
            f" ({reason})"
        )
    from puzzlesweep.flows.faults import disk_full

    if full := disk_full(None, catalog_path):  # a table begun there would be left empty
        raise BadInput(f"{full}: free some space or use another catalog")


def refusal_to_create_in(folder: str) -> str | None:
    """The operating system's reason why no file can be created in the existing folder
    `folder` (a probe file, removed at once), or None when one can."""
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".puzzlesweep-probe-"):
            return None
    except OSError as exc:
        return str(exc.strerror or exc)


#: A size with its unit, as `parse_memory` takes it: '2GiB', '512 MB', '1.5gb', '2G'.
SIZE = re.compile(r"\s*\d+(\.\d+)?\s*([kmgtpe](i?b)?|b)\s*", re.IGNORECASE)
#: The largest memory limit a solver process can be given (RLIMIT_DATA is set as a
#: signed 64-bit number).
MAX_MEMORY = 2**63 - 1


def parse_memory(text: str | None) -> int | None:
    """`--memory-limit` text → bytes, or None for None/'none': a number of bytes ('1e9',
    '1000000000') or a size with its unit as Dask's `--memory-limit` reads it ('2GiB',
    '512MB', '1.5 GB': decimal kB/MB/GB, binary KiB/MiB/GiB; pydantic's ByteSize).
    Raises BadInput naming the option for a text that is no size, or a size below the
    solver process's floor (`puzzlesweep.isolate.MIN_MEMORY`) or above `MAX_MEMORY`."""
    if text is None or text.lower() == "none":
        return None
    from pydantic import ByteSize, TypeAdapter
    from pydantic import ValidationError as Invalid

    from puzzlesweep.isolate import MIN_MEMORY, mib

    not_a_size = BadInput(f"--memory-limit {text!r} is not a size such as 2GiB or 512MB")
    try:
        size = int(float(text))
    except (ValueError, OverflowError):
        if not SIZE.fullmatch(text):  # ByteSize alone reads '1e-3GB' as 1 EB
            raise not_a_size from None
        try:
            size = int(TypeAdapter(ByteSize).validate_python(text))
        except Invalid:
            raise not_a_size from None
    if size < MIN_MEMORY:
        raise BadInput(f"--memory-limit {text} is below the minimum of {mib(MIN_MEMORY)}")
    if size > MAX_MEMORY:  # the kernel's limits are signed 64-bit numbers here
        raise BadInput(f"--memory-limit {text} is above the maximum of {MAX_MEMORY} bytes")
    return size
