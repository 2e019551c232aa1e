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

import csv
import json
import logging
import os
import re
import signal
import sys
import threading
from contextlib import contextmanager, nullcontext
from datetime import datetime
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from puzzlesweep import catalog as store
from puzzlesweep.core import BadInput, validation_message

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
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

CatalogOption = Annotated[
    str | None,
    typer.Option(
        "--catalog",
        help="Catalog directory or URL [default: $PUZZLESWEEP_CATALOG or ./results]",
    ),
]
#: The Dask options shared by `run` and `prove`; a local cluster has a worker per core.
CORES = os.cpu_count() or 2
AddressOption = Annotated[
    str | None, typer.Option(help="An existing Dask scheduler, tcp://HOST:PORT")
]
WorkersOption = Annotated[
    int, typer.Option(min=1, help="Local Dask worker processes (without --address)")
]
DashboardOption = Annotated[
    str, typer.Option(help="Local cluster's Dask dashboard, HOST:PORT (0: any free port)")
]
INTEGER = re.compile(r"^-?\d+$")
#: `solve`'s default memory limit for its solver process (T_8 fewest moves, the largest
#: search measured, peaked at 1.7 GB; `--memory-limit` raises it).
SOLVE_MEMORY = "4GiB"
#: Seconds past `solve`'s time limit before its solver process is killed (verifying and
#: decoding come after the solver's own clock).
SOLVE_GRACE = 10.0
DONE = ("params_key", "solver", "time_limit", "node_limit")  # the columns of Job.done_key


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print `error: message` on stderr; the caller raises the returned Exit(code)."""
    err.print(f"[red]error:[/red] {message}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code)


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


@app.command()
def solve(
    family: Annotated[
        str, typer.Argument(help="monochromatic_lines | no_k_in_row | domination | peg_solitaire")
    ],
    params: Annotated[list[str] | None, typer.Argument(help="key=value parameters")] = None,
    solver: Annotated[
        str | None,
        typer.Option(help="auto | highs | scip | backtrack [default: the family's, auto for MIPs]"),
    ] = None,
    time_limit: Annotated[float, typer.Option(help="Seconds for this instance")] = 60.0,
    node_limit: Annotated[int | None, typer.Option(help="Nodes for this instance")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    count: Annotated[
        bool,
        typer.Option(
            help="Also count the optimal solutions, and those distinct up to the board's "
            "symmetries (SCIP; another --time-limit for the count)"
        ),
    ] = False,
    picture: Annotated[
        str | None, typer.Option(help="Draw the solution into FILE.png or FILE.svg")
    ] = None,
    memory_limit: Annotated[
        str, typer.Option(help="Memory for the solver process, e.g. 2GiB ('none': no limit)")
    ] = SOLVE_MEMORY,
) -> None:
    """Solve one instance, verify its solution and print it (and draw it).

    The instance is solved in a child process, as a sweep's instances are
    (`flows.isolate.Child`): under `--memory-limit`, and killed when it runs
    `SOLVE_GRACE` seconds past `--time-limit`, which counts from the start of building
    the model. A limit that cuts it is shown as the status and a one-line reason."""
    from puzzlesweep import puzzles
    from puzzlesweep.core import Instance, make_params
    from puzzlesweep.flows.isolate import MIN_MEMORY, Child, Interrupted
    from puzzlesweep.solve import check_count, check_solver
    from puzzlesweep.solvers import Limits

    try:
        module = puzzles.get(family)
        instance = Instance(family, make_params(module.Params, parse_assignments(params or [])))
        chosen = check_solver(family, solver)
        if count:
            check_count(family, chosen)
        limits = Limits(time_limit, node_limit)
        if picture is not None and not picture.lower().endswith((".png", ".svg")):
            raise BadInput(f"--picture: {picture!r} must end in .png or .svg")
        if picture is not None and not os.path.isdir(os.path.dirname(picture) or "."):
            raise BadInput(f"--picture: the folder of {picture!r} does not exist")
        memory = parse_memory(memory_limit)
        if memory is not None and memory < MIN_MEMORY:
            raise BadInput(f"--memory-limit {memory_limit} is below the minimum of 256 MiB")
    except (BadInput, ValueError) as exc:
        raise fail(f"{family}: {exc}") from None
    child = Child(memory, grace=SOLVE_GRACE)
    request = {
        "family": family,
        "params": instance.params.model_dump(),
        "solver": chosen,
        "time_limit": limits.time_limit,
        "node_limit": limits.node_limit,
        "count": count,
    }
    try:
        row = {"params": request["params"], "nodes": None, **child.solve(request)}
    except (KeyboardInterrupt, Interrupted):
        raise fail("interrupted: nothing solved", 130) from None
    finally:
        child.close()
    if picture is not None:
        _draw(module, instance.params, row["solution"], picture)
    if as_json:
        keys = ["family", "params", "instance_key", "solver", "status", "objective", "bound"]
        keys += ["verified", "solve_seconds", "solution"]
        keys += ["solutions", "inequivalent"] if count else []
        shown = {k: row[k] for k in keys}
        if row["solution"] is not None and hasattr(module, "details"):
            shown.update(module.details(instance.params, module.decode(row["solution"])))
        print(json.dumps(shown))
        if row["error"]:  # the object's keys are fixed (DESIGN.md): the reason goes aside
            why = "error" if row["status"] == "error" else "stopped"
            err.print(f"{why}: {row['error']}", highlight=False, markup=False)
    else:
        shown = " ".join(f"{k}={_text(v)}" for k, v in row["params"].items())
        out.print(f"{family} {shown}", highlight=False)
        out.print(
            f"status {row['status']}  objective {_text(row['objective'])}  "
            f"bound {_text(row['bound'])}  verified {_text(row['verified'])}  "
            f"{row['solve_seconds']:.2f} s  {_text(row['nodes'])} nodes  solver {row['solver']}",
            highlight=False,
        )
        if count:
            out.print(
                f"optimal solutions {_text(row['solutions'])}  "
                f"inequivalent {_text(row['inequivalent'])}",
                highlight=False,
            )
        if row["error"]:
            why = "error" if row["status"] == "error" else "stopped"
            out.print(f"{why}: {row['error']}", highlight=False, markup=False)
        if row["solution"] is not None:
            out.print(
                module.render(instance.params, module.decode(row["solution"])), highlight=False
            )
    if row["status"] == "error" or row["verified"] is False:
        raise typer.Exit(1)


def _draw(module, params, solution: str | None, path: str) -> None:
    """Draw the decoded solution with the family's `picture` into `path` (PNG or SVG)."""
    if solution is None:
        err.print(f"no solution to draw; {path} not written", highlight=False)
        return
    figure = module.picture(params, module.decode(solution))
    figure.savefig(path, dpi=80)
    err.print(f"picture written to {path}", highlight=False)


def _text(value: Any) -> str:
    """A cell as people read it: integers without '.0', lists comma-joined, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ",".join(map(_text, value))
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return str(value)


def _summary_table(catalog_path: str, plan) -> Table:
    """The latest result of every instance of `plan`, read back from the catalog."""
    from puzzlesweep import puzzles

    wanted = {job.done_key: job for job in plan.jobs}

    def done_key(r: dict) -> tuple:
        return tuple(r[k] for k in DONE)

    rows = [r for r in store.latest(catalog_path, plan.name) if done_key(r) in wanted]
    order = {key: i for i, key in enumerate(wanted)}
    rows.sort(key=lambda r: order[done_key(r)])
    table = Table(
        title=f"sweep {plan.name}: {len(rows)} of {len(wanted)} instances in {catalog_path}"
    )
    for name in (
        "family",
        "parameters",
        "solver",
        "status",
        "objective",
        "bound",
        "gap",
        "verified",
        "seconds",
    ):
        table.add_column(
            name, justify="right" if name in ("objective", "bound", "gap", "seconds") else "left"
        )
    for r in rows:
        fields = puzzles.get(r["family"]).Params.model_fields
        shown = " ".join(f"{k}={_text(r[k])}" for k in fields)
        table.add_row(
            r["family"],
            shown,
            r["solver"],
            r["status"],
            _text(r["objective"]),
            _text(r["bound"]),
            _text(r["gap"]),
            _text(r["verified"]),
            f"{r['solve_seconds']:.2f}",
        )
    return table


@contextmanager
def catalog_errors():
    """BadInput becomes one line and exit 2; a damaged catalog file (CatalogDamaged,
    naming the file and what to do) one line and exit 1."""
    try:
        yield
    except BadInput as exc:
        raise fail(str(exc)) from None
    except store.CatalogDamaged as exc:
        raise fail(str(exc), 1) from None


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
#: is still closing (the issue's bound is 10 s).
STOP_SECONDS = 7.0


@contextmanager
def interruptible(stop_seconds: float = STOP_SECONDS):
    """While a run goes on in this process: the first SIGINT or SIGTERM prints one line,
    silences the logs of what is being torn down, freezes this process's local Dask
    worker processes (SIGSTOP: no batch commits after this, and no nanny restarts them)
    and asks the flow to stop (`submit.request_stop`; KeyboardInterrupt when no flow
    runs yet): the flow stops submitting and writes its row as `interrupted`, with the
    counts of the rows in the catalog, without an exception crossing Prefect. Then
    the frozen workers are killed (their solver children die with them) and the process
    exits with 128 + the signal (130 for Ctrl-C, 143 for SIGTERM), at the latest
    `stop_seconds` after the signal; a second signal exits at once."""
    from puzzlesweep.flows import submit

    caught: list[int] = []
    frozen: list = []

    def leave(code: int | None = None) -> None:
        for worker in frozen:
            try:
                worker.kill()
            except Exception:  # noqa: BLE001 (gone already)
                pass
        sys.stderr.flush()
        os._exit(code or 128 + caught[0])

    def handler(signum, frame) -> None:
        if caught:
            leave(128 + caught[0])
        caught.append(signum)
        logging.disable(logging.CRITICAL)  # no teardown tracebacks from Prefect or Dask
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        err.print(
            f"{name}: stopping the run; what is running is cancelled, what was written is "
            f"kept (exit within {stop_seconds:g} s; {name} again exits at once)",
            highlight=False,
            soft_wrap=True,
        )
        timer = threading.Timer(stop_seconds, leave)
        timer.daemon = True
        timer.start()
        frozen.extend(_freeze_local_workers())
        if not submit.request_stop():  # no flow loop to hear it: unwind from here
            raise KeyboardInterrupt

    def take_sigterm() -> None:  # over Prefect's bridge, in the flow's (main) thread
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, handler)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def stopped(state: str, message: str | None) -> None:  # once the run's row is written
        if message is None:
            leave()
        logging.disable(logging.CRITICAL)
        from rich.markup import escape

        err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
        for worker in _freeze_local_workers():
            worker.kill()
        leave(1)

    submit.after_stop.append(stopped)
    submit.on_flow_start.append(take_sigterm)
    try:
        yield
    except KeyboardInterrupt:
        raise typer.Exit(128 + (caught[0] if caught else signal.SIGINT)) from None
    finally:
        submit.after_stop.remove(stopped)
        submit.on_flow_start.remove(take_sigterm)
        for sig, old in previous.items():
            signal.signal(sig, old)
        if caught:
            leave()  # the workers' teardown is not waited for


def _freeze_local_workers() -> list:
    """SIGSTOP the Dask worker processes this process started (multiprocessing spawns
    of a LocalCluster) and return them (psutil.Process). Nothing else is touched: not
    the temporary Prefect API, not any process this one did not start."""
    import psutil

    workers = []
    for child in psutil.Process().children():
        try:
            if "multiprocessing.spawn" in " ".join(child.cmdline()):
                child.suspend()
                workers.append(child)
        except psutil.Error:
            continue
    return workers


DASHBOARD_ADDRESS = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):(\d{1,5})$")


def check_dashboard_address(text: str) -> str:
    """`text` if it is HOST:PORT (or :PORT) with a port of 0..65535; raises BadInput
    naming the option otherwise."""
    match = DASHBOARD_ADDRESS.match(text)
    if not match or int(match[2]) > 65535:
        raise BadInput(f"--dashboard-address {text!r} is not HOST:PORT (e.g. 127.0.0.1:8787)")
    return text


def check_catalog_directory(catalog_path: str) -> None:
    """For a local catalog: make sure a file can be created in its directory or, while
    it does not exist yet, in the nearest folder above it that does (the probe file is
    removed at once, nothing else is made), before any cluster starts. Raises BadInput
    as `catalog.check_writable` does, or naming the catalog and the operating system's
    reason."""
    import tempfile

    location = store.check_writable(catalog_path)
    if not location.local:
        return
    folder = os.path.abspath(location.uri)
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        if os.path.exists(folder):
            raise BadInput(f"catalog {catalog_path}: {folder} is not a directory")
        folder = os.path.dirname(folder)
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".puzzlesweep-probe-"):
            pass
    except OSError as exc:
        raise BadInput(
            f"catalog {catalog_path} cannot be written ({folder}: {exc.strerror or exc})"
        ) from None


@contextmanager
def progress_display(every_seconds: float = 10.0):
    """While a sweep runs in this process: a rich progress bar (done, total, rate, time
    left) on a terminal, else a plain line per `every_seconds` and one at the end."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    from puzzlesweep.flows.progress import listen

    if err.is_terminal:
        bar = Progress(
            TextColumn("solving"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            console=err,
        )
        task = bar.add_task("solving", total=None, rate="")

        def show(s) -> None:
            bar.update(task, completed=s.done, total=s.total, rate=f"{s.rate * 60:.1f}/min")

        with bar:
            stop = listen(show)
            try:
                yield
            finally:
                stop()
        return
    last = [0.0]

    def line(s) -> None:
        if s.done < s.total and s.seconds - last[0] < every_seconds:
            return
        last[0] = s.seconds
        left = f", about {s.seconds_left:.0f} s left" if s.seconds_left is not None else ""
        err.print(f"{s.done}/{s.total} instances, {s.rate * 60:.1f}/min{left}", highlight=False)

    stop = listen(line)
    try:
        yield
    finally:
        stop()


def parse_memory(text: str | None) -> int | None:
    """`--memory-limit` text ('2GiB', '512MB', '1e9') → bytes, or None for None/'none'.
    Raises BadInput naming the option."""
    if text is None or text.lower() == "none":
        return None
    from dask.utils import parse_bytes

    try:
        return int(parse_bytes(text))
    except (ValueError, TypeError):
        raise BadInput(f"--memory-limit {text!r} is not a size such as 2GiB or 512MB") from None


def quiet_dask() -> None:
    """Keep the in-process Dask scheduler's INFO lines and its 'port in use, hosting the
    dashboard elsewhere' warning off the terminal: `run` prints the address it got."""
    import logging
    import warnings

    import distributed  # noqa: F401  (its loggers exist, with their levels, from here on)

    level = os.environ.get("PUZZLESWEEP_DASK_LOG_LEVEL", "WARNING").upper()
    for name in list(logging.root.manager.loggerDict):
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(level)
    warnings.filterwarnings("ignore", message=r"(?s)Port \d+ is already in use")


@app.command()
def run(
    spec: Annotated[str, typer.Argument(help="Sweep spec (TOML)")],
    catalog: CatalogOption = None,
    address: AddressOption = None,
    workers: WorkersOption = CORES,
    batch_size: Annotated[
        int | None, typer.Option(min=1, help="Instances per task [default: auto]")
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Re-solve instances the catalog already holds")
    ] = False,
    memory_limit: Annotated[
        str | None,
        typer.Option(
            help="Memory per instance, e.g. 2GiB [default: the Dask worker's limit per thread]"
        ),
    ] = None,
    retries: Annotated[
        int, typer.Option(min=0, help="Extra attempts of a batch after a transient failure")
    ] = 2,
    dashboard_address: DashboardOption = "127.0.0.1:8787",
    connect_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds to wait for the --address scheduler")
    ] = 10.0,
    allow_concurrent: Annotated[
        bool,
        typer.Option(help="Run even while another run of this sweep writes to the catalog"),
    ] = False,
    max_instances: Annotated[
        int | None,
        typer.Option(
            min=1, help="Refuse a spec of more instances [default: its max_instances, or 20000]"
        ),
    ] = None,
) -> None:
    """Run a sweep on Dask under Prefect and print its results from the catalog.

    Prints the Dask dashboard's address and, when PREFECT_API_URL names a Prefect
    server, the flow run's URL, on stderr as soon as they are known. Refuses (exit 2)
    while another run of the same sweep is alive in the catalog."""
    from puzzlesweep.flows.spec import load

    catalog_path = catalog or store.default_catalog()
    try:
        memory = parse_memory(memory_limit)
        if memory is not None and memory < 256 * 2**20:
            raise BadInput(f"--memory-limit {memory_limit} is below the minimum of 256 MiB")
        check_dashboard_address(dashboard_address)
        check_catalog_directory(catalog_path)  # a file, another directory, not writable
        plan = load(spec, max_instances)  # validate everything before any work starts
    except BadInput as exc:
        raise fail(str(exc)) from None
    from puzzlesweep.flows.api import TemporaryAPI
    from puzzlesweep.flows.cluster import configured_api

    # the temporary Prefect API (about 8 s) starts first, while Prefect is imported here
    api = None if configured_api() else TemporaryAPI()
    with interruptible(), api or nullcontext(), run_errors():
        from puzzlesweep.flows.cluster import check_address
        from puzzlesweep.flows.sweep import run_sweep

        quiet_dask()
        if address:
            check_address(address)
        err.print(f"sweep {plan.name}: {len(plan.jobs)} instances from {spec} into {catalog_path}")
        with progress_display():
            report = run_sweep(
                spec,
                catalog_path,
                address,
                workers,
                batch_size,
                force,
                memory_limit=memory,
                retries=retries,
                dashboard_address=dashboard_address,
                announce=lambda line: err.print(line, highlight=False, soft_wrap=True),
                connect_timeout=connect_timeout,
                api=api,
                allow_concurrent=allow_concurrent,
                max_instances=max_instances,
            )
    err.print(
        f"run {report['run_id']}: solved {report['solved']} in {report['batches']} batches "
        f"({report['retried']} retried), skipped {report['skipped']} already in the catalog, "
        f"{report['seconds']:.1f} s",
        highlight=False,
    )
    if store.files(catalog_path):
        with catalog_errors():
            out.print(_summary_table(catalog_path, plan))
    if report["failed"]:
        for line in report["failed"]:
            err.print(line, highlight=False, markup=False, soft_wrap=True)
        raise fail(f"{len(report['failed'])} batches failed every attempt; run again to resume", 1)
    failed = report["counts"].get("error", 0)
    if failed:
        raise fail(f"{failed} instances ended in error; see the catalog's error column", 1)


@app.command()
def prove(
    family: Annotated[str, typer.Argument(help="A family with a split, e.g. no_k_in_row")],
    params: Annotated[list[str] | None, typer.Argument(help="key=value parameters")] = None,
    split: Annotated[
        str, typer.Option(help="The family's split, e.g. 1:0,6 (layers 0 and 6 across axis 1)")
    ] = "",
    width: Annotated[int, typer.Option(help="Exact counts per group before the tail")] = 4,
    solver: Annotated[
        str, typer.Option(help="auto | highs | scip: the engine of every part and the probe")
    ] = "auto",
    time_limit: Annotated[float, typer.Option(help="Seconds per part")] = 60.0,
    wall: Annotated[
        float | None, typer.Option(help="Seconds for the whole run (no part starts after)")
    ] = None,
    probe: Annotated[
        float, typer.Option(help="Seconds of a direct solve first, for an incumbent")
    ] = 0.0,
    cutoff: Annotated[bool, typer.Option(help="Parts look only below the incumbent")] = True,
    catalog: CatalogOption = None,
    address: AddressOption = None,
    workers: WorkersOption = CORES,
    check: Annotated[
        bool, typer.Option(help="Only re-check the stored certificate of this split")
    ] = False,
    dashboard_address: DashboardOption = "127.0.0.1:8787",
) -> None:
    """Prove one instance's optimum by splitting its MIP into parts solved on Dask.

    Every finished part is written to the catalog at once, so a re-run of the same
    split solves only the missing parts; the combined row holds the certificate."""
    from puzzlesweep import puzzles
    from puzzlesweep.core import Instance
    from puzzlesweep.proof import Proof, build, recheck
    from puzzlesweep.solve import check_solver, resolve_solver
    from puzzlesweep.solvers import Limits

    catalog_path = catalog or store.default_catalog()
    try:
        module = puzzles.get(family)
        values = parse_assignments(params or [])
        if not split:
            raise BadInput("--split is required (e.g. --split 1:0,6 for no_k_in_row)")
        validated = module.Params.model_validate(values)
        engine = resolve_solver(Instance(family, validated), check_solver(family, solver))
        proof = Proof(
            family, validated.model_dump(), split, width, Limits(time_limit), solver=engine
        )
        if wall is not None and wall <= 0:
            raise BadInput(f"--wall must be > 0 seconds, got {wall}")
        if probe < 0:
            raise BadInput(f"--probe must be >= 0 seconds, got {probe}")
        build(proof)
        store.check_writable(catalog_path)
    except ValidationError as exc:
        raise fail(f"{family}: {validation_message(exc)}") from None
    except (BadInput, ValueError) as exc:
        raise fail(f"{family}: {exc}") from None
    from puzzlesweep.flows.cluster import check_address
    from puzzlesweep.flows.prove import run_prove

    if check:
        problems = recheck(catalog_path, proof)
        for problem in problems:
            err.print(f"certificate: {problem}", highlight=False, markup=False)
        if problems:
            raise typer.Exit(1)
        out.print(f"certificate {proof.key} in {catalog_path} holds", highlight=False)
        return
    quiet_dask()
    with run_errors():
        if address:
            check_address(address)
        report = run_prove(
            proof,
            catalog_path,
            address,
            workers,
            probe,
            wall,
            dashboard_address,
            announce=lambda line: err.print(line, highlight=False, soft_wrap=True),
        )
    out.print(
        f"{family} {' '.join(params or [])} split {split} (key {proof.key}, {engine}): "
        f"status {report['status']}  objective {_text(report['objective'])}  "
        f"bound {_text(report['bound'])}  parts {report['parts']} "
        f"({report['stored']} from the catalog, {report['solved']} solved now, "
        f"{report['missing']} missing; {report['closed']} closed, {report['at_limit']} "
        "stopped at a limit)  "
        f"{report['seconds']:.1f} s",
        highlight=False,
    )


AsOfOption = Annotated[
    str | None,
    typer.Option(
        "--as-of", help="Read results as of a table version (an integer) or a time (ISO 8601)"
    ),
]


def _as_of(text: str | None) -> int | str | None:
    """`--as-of` text → a version (int) or an ISO 8601 time (str); raises BadInput."""
    if text is None or INTEGER.match(text):
        return None if text is None else int(text)
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(f"--as-of {text!r} is neither a version nor an ISO 8601 time") from None
    return text


@catalog_app.command("query")
def catalog_query(
    sql: Annotated[str, typer.Argument(help="SQL over the views results, latest and runs")],
    catalog: CatalogOption = None,
    fmt: Annotated[str, typer.Option("--format", help="table | csv | json")] = "table",
    as_of: AsOfOption = None,
) -> None:
    """Run SQL (DuckDB) over one snapshot of the catalog: `results` (every row),
    `latest` (the latest row of each instance, solver and limits) and `runs`."""
    if fmt not in ("table", "csv", "json"):
        raise fail(f"--format must be table, csv or json, not {fmt!r}")
    with catalog_errors():
        columns, rows = store.query(catalog or store.default_catalog(), sql, as_of=_as_of(as_of))
    if fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    elif fmt == "json":
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        print(json.dumps(records, default=str))
    else:
        _print_rows(None, columns, rows)


def _print_rows(title: str | None, columns: list[str], rows: list[tuple]) -> None:
    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*map(_text, row))
    out.print(table)


@catalog_app.command("summary")
def catalog_summary(
    catalog: CatalogOption = None,
    sweep: Annotated[str | None, typer.Option(help="Only this sweep's results")] = None,
) -> None:
    """The runs (a run whose heartbeat stopped shows as lost), counts by status per run
    and family, then per family the best result of every instance by its parameters
    (optimal first, then the latest)."""
    from puzzlesweep import puzzles

    where, args = ("WHERE sweep = ?", [sweep]) if sweep else ("", [])
    statuses = ", ".join(f"count(*) FILTER (status = '{s}') AS {s}" for s in store.STATUSES)
    with catalog_errors(), store.snapshot(catalog or store.default_catalog()) as shot:
        columns, rows = shot.query(
            "SELECT run_id, sweep, state, host, pid, started_at, heartbeat_at, finished_at, "
            f"planned, skipped, solved FROM runs {where} ORDER BY run_id",
            args,
        )
        _print_rows("runs", columns, rows)
        columns, rows = shot.query(
            f"SELECT run_id, sweep, family, count(*) AS results, {statuses}, "
            "count(*) FILTER (verified) AS verified, round(sum(solve_seconds), 2) AS seconds "
            f"FROM results {where} GROUP BY ALL ORDER BY run_id, family",
            args,
        )
        _print_rows("counts by run and family", columns, rows)
        _, families = shot.query(f"SELECT DISTINCT family FROM results {where} ORDER BY 1", args)
        for (family,) in families:
            if family not in puzzles.FAMILIES:
                continue
            params = ", ".join(f'"{k}"' for k in puzzles.get(family).Params.model_fields)
            columns, rows = shot.query(
                f"SELECT {params}, solver, time_limit, status, objective, bound, "
                "count(*) OVER (PARTITION BY params_key) AS results FROM results "
                f"WHERE family = ? {where.replace('WHERE', 'AND')} "
                "QUALIFY row_number() OVER (PARTITION BY params_key, solver ORDER BY "
                "status = 'optimal' DESC, status = 'error', finished_at DESC) = 1 "
                f"ORDER BY {params}, solver",
                [family, *args],
            )
            _print_rows(f"{family}: best result by parameters", columns, rows)


@catalog_app.command("check")
def catalog_check(catalog: CatalogOption = None) -> None:
    """Read every data file of the catalog whole; name each missing or unreadable file
    and any result a run stored twice. Exits 1 when any is found."""
    location = catalog or store.default_catalog()
    with catalog_errors():
        problems = store.check(location)
        count = len(store.files(location))
    for problem in problems:
        line = f"error: {problem.path}: {problem.kind}: {problem.message}"
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    if problems:
        raise fail(
            f"{len(problems)} problems in catalog {location}; "
            "`puzzlesweep catalog repair` takes damaged files out",
            1,
        )
    out.print(f"ok: {count} result files in {location} read without problems", highlight=False)


@catalog_app.command("repair")
def catalog_repair(catalog: CatalogOption = None) -> None:
    """Take every missing or unreadable data file out of `results` in one Delta commit
    (unreadable files move to CATALOG/damaged/), and list the instances whose rows were
    lost: a re-run of their sweep solves exactly those again."""
    location = catalog or store.default_catalog()
    with catalog_errors():
        report = store.repair(location)
    if report["version"] is None:
        out.print(f"nothing to repair: every data file of {location} reads", highlight=False)
        return
    for path in report["removed"]:
        out.print(f"removed {path}", highlight=False, markup=False)
    lost = report["lost"]
    if lost is None:
        out.print("the rows lost cannot be named: the log no longer tells", highlight=False)
    else:
        out.print(f"{len(lost)} instances lost (params_key): {' '.join(lost)}", highlight=False)
    out.print(
        f"results is now at version {report['version']}; run the sweeps again to solve "
        "what is missing",
        highlight=False,
    )


@catalog_app.command("compact")
def catalog_compact(
    catalog: CatalogOption = None,
    retain_hours: Annotated[
        int,
        typer.Option(
            min=0, help="Keep the files that versions of the last H hours need (time travel)"
        ),
    ] = 168,
) -> None:
    """Merge small files into large ones (Delta optimize, one commit per table), then
    delete files no version of the last `retain_hours` needs (Delta vacuum). Readers see
    the version before or after, never a row twice."""
    location = catalog or store.default_catalog()
    with catalog_errors():
        report = store.compact(location, retain_hours)
    for name in ("results", "runs"):
        if name in report:
            item = report[name]
            out.print(
                f"{name}: {item['files_removed']} files merged into {item['files_added']}, "
                f"now version {item['version']}",
                highlight=False,
            )
    out.print(f"{report['deleted']} files no longer needed deleted", highlight=False)


@catalog_app.command("history")
def catalog_history(
    catalog: CatalogOption = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the newest N commits")] = None,
) -> None:
    """The commits of `results`, newest first (read an older one with
    `catalog query --as-of VERSION`)."""
    with catalog_errors():
        entries = store.history(catalog or store.default_catalog(), limit)
    columns = ["version", "timestamp", "operation", "rows", "files_added", "files_removed"]
    _print_rows(None, columns, [tuple(e[c] for c in columns) for e in entries])


@catalog_app.command("migrate")
def catalog_migrate(
    source: Annotated[str, typer.Argument(help="A catalog directory of the old layout")],
    target: Annotated[str, typer.Argument(help="The new catalog (empty or missing)")],
) -> None:
    """Copy a catalog of the old layout (family=*/ Parquet files, _commits/, _runs/) into
    a new catalog, re-verifying every row; the old directory is left as it was."""
    with catalog_errors():
        report = store.migrate(source, target)
    out.print(
        f"{report['rows']} rows from {report['files']} files and {report['runs']} runs "
        f"copied into {target}; {report['failed']} rows failed their re-check",
        highlight=False,
    )
    if report["failed"]:
        raise typer.Exit(1)


@catalog_app.command("verify")
def catalog_verify(catalog: CatalogOption = None) -> None:
    """Decode every stored solution and re-check it with its family's verifier, from the
    catalog alone; lists the rows that fail and exits 1 if any does."""
    from puzzlesweep import puzzles
    from puzzlesweep.solve import recheck

    checked, failures = 0, []
    with catalog_errors(), store.snapshot(catalog or store.default_catalog()) as shot:
        for family in puzzles.FAMILIES:
            columns, rows = shot.query(
                "SELECT * FROM results WHERE family = ? AND solution IS NOT NULL", [family]
            )
            for values in rows:
                row = dict(zip(columns, values, strict=True))
                checked += 1
                if (why := recheck(family, row)) is not None:
                    failures.append((row["run_id"], family, row["instance_key"], why))
    if failures:
        table = Table("run_id", "family", "instance_key", "why", title="failed re-checks")
        for failure in failures:
            table.add_row(*failure)
        out.print(table)
    out.print(f"{checked} solutions re-checked, {len(failures)} failed", highlight=False)
    if failures:
        raise typer.Exit(1)


@app.command()
def dashboard(
    catalog: CatalogOption = None,
    host: Annotated[
        str, typer.Option(help="Interface to bind; 127.0.0.1 keeps it local")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0 picks a free one)")] = 8050,
    refresh: Annotated[float, typer.Option(min=0.5, help="Seconds between page updates")] = 3.0,
) -> None:
    """Serve a live, read-only web page over the catalog (runs, failures, results)."""
    from puzzlesweep.dashboard import make_server

    catalog_path = catalog or store.default_catalog()
    try:
        server = make_server(catalog_path, host, port, refresh)
    except OSError as exc:
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    bound_host, bound_port = server.server_address[:2]
    err.print(f"dashboard of {catalog_path} on http://{bound_host}:{bound_port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


#: Offline, quiet defaults for Prefect and Dask, set before they are imported (any can be
#: overridden in the environment): no telemetry, a start-up timeout above the 23 s
#: measured for a cold temporary API, warnings only.
QUIET_DEFAULTS = {
    # the resource tracker of an interrupted run's cluster cleans up without a warning
    "PYTHONWARNINGS": "ignore::UserWarning:multiprocessing.resource_tracker",
    "DASK_LOGGING__DISTRIBUTED": "warning",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_LOGGING_LEVEL": "WARNING",
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
