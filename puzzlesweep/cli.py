"""The command line (typer): exit 0 ok, 2 bad input (nothing written), 1 failure.

    puzzlesweep solve FAMILY key=value ... [--solver S] [--time-limit S] [--json]
        [--count] [--picture FILE.png|FILE.svg]
    puzzlesweep run SPEC.toml [--catalog DIR] [--address tcp://HOST:PORT] [--workers N]
                    [--memory-limit SIZE] [--retries N] [--dashboard-address HOST:PORT]
    puzzlesweep prove FAMILY key=value ... --split TEXT [--solver S] [--width N] [--time-limit S]
                    [--wall S] [--probe S] [--no-cutoff] [--catalog DIR] [--address A]
                    [--workers N] [--check]
    puzzlesweep catalog query "SQL over results" [--catalog DIR] [--format table|csv|json]
    puzzlesweep catalog summary [--catalog DIR] [--sweep NAME]
    puzzlesweep catalog check [--catalog DIR]
    puzzlesweep catalog compact [--catalog DIR] [--family F] [--min-files N] [--grace S]
    puzzlesweep catalog verify [--catalog DIR]

Parameter values on the command line are integers (`k=5`), words (`piece=knight`) or
comma-separated integer lists (`dims=6,7,6`, `counts=14,13`).
"""

import csv
import json
import os
import re
import sys
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
catalog_app = typer.Typer(no_args_is_help=True, help="Query the Parquet result catalog.")
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
) -> None:
    """Solve one instance, verify its solution and print it (and draw it)."""
    from puzzlesweep import puzzles
    from puzzlesweep.core import Instance, make_params
    from puzzlesweep.solve import check_count, check_solver, solve_instance
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
    except (BadInput, ValueError) as exc:
        raise fail(f"{family}: {exc}") from None
    row = solve_instance(instance, chosen, limits, count)
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
    else:
        shown = " ".join(f"{k}={_text(v)}" for k, v in row["params"].items())
        out.print(f"{family} {shown}", highlight=False)
        out.print(
            f"status {row['status']}  objective {_text(row['objective'])}  "
            f"bound {_text(row['bound'])}  verified {_text(row['verified'])}  "
            f"{row['solve_seconds']:.2f} s  {row['nodes']} nodes  solver {row['solver']}",
            highlight=False,
        )
        if count:
            out.print(
                f"optimal solutions {_text(row['solutions'])}  "
                f"inequivalent {_text(row['inequivalent'])}",
                highlight=False,
            )
        if row["error"]:
            out.print(f"error: {row['error']}", highlight=False)
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

    def done_key(r: dict) -> tuple:  # rows from before params_key: instance_key is it
        return (r.get("params_key") or r["instance_key"], *(r[k] for k in DONE[1:]))

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
def run_errors():
    """Inside `run` and `prove`: BadInput becomes one line and exit 2, a temporary
    Prefect API that did not start one line and exit 1 (no traceback for either)."""
    from puzzlesweep.flows.api import APIError

    try:
        yield
    except BadInput as exc:
        raise fail(str(exc)) from None
    except APIError as exc:
        raise fail(str(exc), 1) from None


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
) -> None:
    """Run a sweep on Dask under Prefect and print its results from the catalog.

    Prints the Dask dashboard's address and, when PREFECT_API_URL names a Prefect
    server, the flow run's URL, on stderr as soon as they are known."""
    from puzzlesweep.flows.spec import load

    catalog_path = catalog or store.default_catalog()
    try:
        plan = load(spec)  # validate everything before any work starts
        memory = parse_memory(memory_limit)
        if memory is not None and memory < 256 * 2**20:
            raise BadInput(f"--memory-limit {memory_limit} is below the minimum of 256 MiB")
    except BadInput as exc:
        raise fail(str(exc)) from None
    try:
        store.locate(catalog_path)  # a URL pyarrow cannot open, or a file, fails here
    except BadInput as exc:
        raise fail(str(exc)) from None
    from puzzlesweep.flows.api import TemporaryAPI

    # the temporary Prefect API (about 8 s) starts first, while Prefect is imported here
    api = None if os.environ.get("PREFECT_API_URL") else TemporaryAPI()
    with api or nullcontext(), run_errors():
        from puzzlesweep.flows.sweep import check_address, run_sweep

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
            )
    err.print(
        f"run {report['run_id']}: solved {report['solved']} in {report['batches']} batches "
        f"({report['retried']} retried), skipped {report['skipped']} already in the catalog, "
        f"{report['seconds']:.1f} s",
        highlight=False,
    )
    if store.files(catalog_path):
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
        store.locate(catalog_path)
    except ValidationError as exc:
        raise fail(f"{family}: {validation_message(exc)}") from None
    except (BadInput, ValueError) as exc:
        raise fail(f"{family}: {exc}") from None
    from puzzlesweep.flows.prove import run_prove
    from puzzlesweep.flows.sweep import check_address

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


@catalog_app.command("query")
def catalog_query(
    sql: Annotated[str, typer.Argument(help="SQL over the view `results`")],
    catalog: CatalogOption = None,
    fmt: Annotated[str, typer.Option("--format", help="table | csv | json")] = "table",
) -> None:
    """Run SQL over the catalog's `results` view (DuckDB)."""

    if fmt not in ("table", "csv", "json"):
        raise fail(f"--format must be table, csv or json, not {fmt!r}")
    try:
        columns, rows = store.query(catalog or store.default_catalog(), sql)
    except BadInput as exc:
        raise fail(str(exc)) from None
    if fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    elif fmt == "json":
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        print(json.dumps(records, default=str))
    else:
        table = Table(*columns)
        for row in rows:
            table.add_row(*map(_text, row))
        out.print(table)


def _print_rows(title: str, columns: list[str], rows: list[tuple]) -> None:
    table = Table(*columns, title=title)
    for row in rows:
        table.add_row(*map(_text, row))
    out.print(table)


@catalog_app.command("summary")
def catalog_summary(
    catalog: CatalogOption = None,
    sweep: Annotated[str | None, typer.Option(help="Only this sweep's results")] = None,
) -> None:
    """The runs (from their manifests), counts by status per run and family, then per
    family the best result of every instance by its parameters (optimal first, then
    the latest)."""
    from puzzlesweep import puzzles

    where, args = ("WHERE sweep = ?", [sweep]) if sweep else ("", [])
    statuses = ", ".join(f"count(*) FILTER (status = '{s}') AS {s}" for s in store.STATUSES)
    try:
        location = catalog or store.default_catalog()
        if store.snapshot(store.locate(location)).runs:
            columns, rows = store.query(
                location,
                "SELECT run_id, sweep, state, host, started_at, finished_at, planned, skipped, "
                f"solved FROM runs {where} ORDER BY run_id",
                args,
            )
            _print_rows("runs", columns, rows)
        columns, rows = store.query(
            location,
            f"SELECT run_id, sweep, family, count(*) AS results, {statuses}, "
            "count(*) FILTER (verified) AS verified, round(sum(solve_seconds), 2) AS seconds "
            f"FROM results {where} GROUP BY ALL ORDER BY run_id, family",
            args,
        )
        _print_rows("counts by run and family", columns, rows)
        _, families = store.query(
            location, f"SELECT DISTINCT family FROM results {where} ORDER BY 1", args
        )
        names, _ = store.query(location, "SELECT * FROM results LIMIT 0")
        own = store._own_key([(name,) for name in names])  # equivalents share instance_key
        for (family,) in families:
            if family not in puzzles.FAMILIES:
                continue
            params = ", ".join(f'"{k}"' for k in puzzles.get(family).Params.model_fields)
            columns, rows = store.query(
                location,
                f"SELECT {params}, solver, time_limit, status, objective, bound, "
                f"count(*) OVER (PARTITION BY {own}) AS results FROM results "
                f"WHERE family = ? {where.replace('WHERE', 'AND')} "
                f"QUALIFY row_number() OVER (PARTITION BY {own}, solver ORDER BY "
                "status = 'optimal' DESC, status = 'error', finished_at DESC) = 1 "
                f"ORDER BY {params}, solver",
                [family, *args],
            )
            _print_rows(f"{family}: best result by parameters", columns, rows)
    except BadInput as exc:
        raise fail(str(exc)) from None


@catalog_app.command("check")
def catalog_check(catalog: CatalogOption = None) -> None:
    """Read every file of the catalog whole; name each unreadable or schema-mismatched
    file, stray file or duplicate result. Exits 1 when any is found."""
    location = catalog or store.default_catalog()
    try:
        problems = store.check(location)
        count = len(store.files(location))
    except BadInput as exc:
        raise fail(str(exc)) from None
    for problem in problems:
        level = "error" if problem.fatal else "note"
        line = f"{level}: {problem.path}: {problem.kind}: {problem.message}"
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    fatal = sum(p.fatal for p in problems)
    if fatal:
        raise fail(f"{fatal} problems in catalog {location}", 1)
    out.print(f"ok: {count} result files in {location} read without problems", highlight=False)


@catalog_app.command("compact")
def catalog_compact(
    catalog: CatalogOption = None,
    family: Annotated[str | None, typer.Option(help="Only this family's partition")] = None,
    min_files: Annotated[int, typer.Option(min=2, help="Merge partitions with this many")] = 2,
    grace: Annotated[
        float, typer.Option(min=0, help="Seconds before merged-away files are deleted")
    ] = 3600.0,
) -> None:
    """Merge the small files of each partition into one, atomically (readers see the
    old files or the new one, never both); delete files merged away over `grace` s ago."""
    location = catalog or store.default_catalog()
    try:
        done = store.compact(location, family, min_files, grace)
    except BadInput as exc:
        raise fail(str(exc)) from None
    for item in done[:-1]:
        out.print(
            f"family={item['family']}: {item['files']} files, {item['rows']} rows "
            f"-> {item['file']}",
            highlight=False,
        )
    out.print(f"{len(done) - 1} partitions compacted, {done[-1]['deleted']} old files deleted")


@catalog_app.command("verify")
def catalog_verify(catalog: CatalogOption = None) -> None:
    """Decode every stored solution and re-check it with its family's verifier, from the
    catalog alone; lists the rows that fail and exits 1 if any does."""
    from puzzlesweep import puzzles
    from puzzlesweep.solve import recheck

    path = catalog or store.default_catalog()
    checked, failures = 0, []
    try:
        for family in puzzles.FAMILIES:
            columns, rows = store.query(
                path,
                "SELECT * FROM results WHERE family = ? AND solution IS NOT NULL",
                [family],
            )
            for values in rows:
                row = dict(zip(columns, values, strict=True))
                checked += 1
                if (why := recheck(family, row)) is not None:
                    failures.append((row["run_id"], family, row["instance_key"], why))
    except BadInput as exc:
        raise fail(str(exc)) from None
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
