"""`puzzlesweep catalog ...` (query and maintain the result catalog) and `puzzlesweep
dashboard` (a live page over it)."""

import csv
import json
import sys
from datetime import datetime
from typing import Annotated

import typer
from rich.table import Table

from puzzlesweep import catalog, reverify
from puzzlesweep.cli.common import (
    CELL_CHARS,
    INTEGER,
    QUERY_ROWS,
    CatalogOption,
    app,
    catalog_app,
    catalog_errors,
    err,
    fail,
    out,
    print_rows,
)
from puzzlesweep.core import BadInput

AsOfOption = Annotated[
    str | None,
    typer.Option(
        "--as-of", help="Read results as of a table version (an integer) or a time (ISO 8601)"
    ),
]


def _as_of(text: str | None) -> int | str | None:
    """`--as-of` text → a version (int) or an ISO 8601 time (str); raises BadInput."""
    if text is None or INTEGER.match(text):
        if text is not None and int(text) < 0:
            raise BadInput(f"--as-of {text}: a version is 0 or more")
        return None if text is None else int(text)
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(f"--as-of {text!r} is neither a version nor an ISO 8601 time") from None
    return text


@catalog_app.command("query")
def catalog_query(
    sql: Annotated[str, typer.Argument(help="SQL over the views results, latest and runs")],
    location: CatalogOption = None,
    fmt: Annotated[str, typer.Option("--format", help="table | csv | json")] = "table",
    as_of: AsOfOption = None,
) -> None:
    """Run SQL (DuckDB) over one snapshot of the catalog: `results` (every row),
    `latest` (the latest row of each instance, solver and limits) and `runs`. The table
    format shows the first 40 rows and cuts long values; csv and json print all."""
    if fmt not in ("table", "csv", "json"):
        raise fail(f"--format must be table, csv or json, not {fmt!r}")
    from puzzlesweep.catalog.preview import preview

    where = location or catalog.default_catalog()
    with catalog_errors():
        if fmt == "table":  # what a terminal can show, read in one bounded pass
            shown = preview(where, sql, QUERY_ROWS, CELL_CHARS, as_of=_as_of(as_of))
            return print_rows(None, shown.columns, shown.rows, total=shown.total)
        columns, rows = catalog.query(where, sql, as_of=_as_of(as_of))
    if fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    elif fmt == "json":
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        print(json.dumps(records, default=str))


@catalog_app.command("summary")
def catalog_summary(
    location: CatalogOption = None,
    sweep: Annotated[str | None, typer.Option(help="Only this sweep's results")] = None,
) -> None:
    """The runs (a run whose heartbeat stopped shows as lost), counts by status per run
    and family, then per family the best result of every instance by its parameters
    (optimal first, then the latest)."""
    from puzzlesweep import puzzles

    parameters = {f: list(puzzles.get(f).Params.model_fields) for f in puzzles.FAMILIES}
    with catalog_errors():
        tables = catalog.summary(location or catalog.default_catalog(), parameters, sweep)
    for title, columns, rows in tables:
        print_rows(title, columns, rows)


@catalog_app.command("check")
def catalog_check(location: CatalogOption = None) -> None:
    """Read every data file of the catalog whole; name each missing or unreadable file
    and any result a run stored twice. Exits 1 when any is found."""
    location = location or catalog.default_catalog()
    with catalog_errors():
        problems = catalog.check(location)
        count = 0 if problems else len(catalog.files(location))
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
def catalog_repair(location: CatalogOption = None) -> None:
    """Take every missing or unreadable data file out of `results` in one Delta commit
    (unreadable files move to CATALOG/damaged/), and list the instances whose rows were
    lost: a re-run of their sweep solves exactly those again. Then remove the rows a
    run stored twice (keeping one)."""
    location = location or catalog.default_catalog()
    with catalog_errors():
        report = reverify.repair(location)
    if report["version"] is None:
        out.print(
            f"nothing to repair: every data file of {location} reads, no result is stored twice",
            highlight=False,
        )
        return
    if rebuilt := report["rebuilt"]:
        _print_rebuilt(location, rebuilt, len(report["failed"]))
    for key, why in report["failed"]:
        out.print(f"re-check failed: {key}: {why}", highlight=False, markup=False)
    for path in report.get("commits", []):
        out.print(f"set aside {path} (in {location}/damaged/)", highlight=False, markup=False)
    for path in report["removed"]:
        out.print(f"removed {path}", highlight=False, markup=False)
    lost = report["lost"]
    if lost is None:
        out.print(
            "the instances lost cannot be named: the log no longer tells (`run --dry-run "
            "SPEC` shows what a re-run would solve)",
            highlight=False,
        )
    elif lost:
        out.print(f"{len(lost)} instances lost (params_key): {' '.join(lost)}", highlight=False)
    if report["duplicates"]:
        out.print(
            f"{report['duplicates']} duplicate rows removed (a result stored twice by one run)",
            highlight=False,
        )
    out.print(
        f"results is now at version {report['version']}; run the sweeps again to solve "
        "what is missing",
        highlight=False,
    )


def _print_rebuilt(location: str, rebuilt, failed: int) -> None:
    """The lines of `catalog repair` about a rebuild of a lost log (`rebuild.Rebuilt`)."""
    for path, why in rebuilt.aside:
        out.print(f"set aside {path}: {why}", highlight=False, markup=False)
    out.print(
        f"results rebuilt from {len(rebuilt.files)} data files whose log was lost: "
        f"{rebuilt.rows} rows kept, {rebuilt.dropped} copies left out; {failed} stored "
        f"solutions failed their re-check; the files read are in {location}/{rebuilt.folder}",
        highlight=False,
        markup=False,
    )


@catalog_app.command("compact")
def catalog_compact(
    location: CatalogOption = None,
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
    location = location or catalog.default_catalog()
    with catalog_errors():
        report = catalog.compact(location, retain_hours)
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
    location: CatalogOption = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the newest N commits")] = None,
) -> None:
    """The commits of `results`, newest first (read an older one with
    `catalog query --as-of VERSION`)."""
    with catalog_errors():
        entries = catalog.history(location or catalog.default_catalog(), limit)
    columns = ["version", "timestamp", "operation", "rows", "files_added", "files_removed"]
    print_rows(None, columns, [tuple(e[c] for c in columns) for e in entries])


@catalog_app.command("migrate")
def catalog_migrate(
    source: Annotated[str, typer.Argument(help="A catalog directory of the old layout")],
    target: Annotated[str, typer.Argument(help="The new catalog (empty or missing)")],
) -> None:
    """Copy a catalog of the old layout (family=*/ Parquet files, _commits/, _runs/) into
    a new catalog, re-verifying every row; the old directory is left as it was."""
    with catalog_errors():
        report = reverify.migrate(source, target)
    out.print(
        f"{report['rows']} rows from {report['files']} files and {report['runs']} runs "
        f"copied into {target}; {report['failed']} rows failed their re-check",
        highlight=False,
    )
    if report["failed"]:
        raise typer.Exit(1)


@catalog_app.command("verify")
def catalog_verify(location: CatalogOption = None) -> None:
    """Decode every stored solution and re-check it with its family's verifier, from the
    catalog alone; lists the rows that fail and exits 1 if any does."""
    with catalog_errors():
        checked, failures = reverify.verify(location or catalog.default_catalog())
    if failures:
        table = Table("run_id", "family", "instance_key", "why", title="failed re-checks")
        for row, why in failures:
            table.add_row(row["run_id"], row["family"], row["instance_key"], why)
        out.print(table)
    out.print(f"{checked} solutions re-checked, {len(failures)} failed", highlight=False)
    if failures:
        raise typer.Exit(1)


@app.command()
def dashboard(
    location: CatalogOption = None,
    host: Annotated[
        str, typer.Option(help="Interface to bind; 127.0.0.1 keeps it local")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0 picks a free one)")] = 8050,
    refresh: Annotated[float, typer.Option(min=0.5, help="Seconds between page updates")] = 3.0,
) -> None:
    """Serve a live, read-only web page over the catalog (runs, failures, results)."""
    from puzzlesweep.dashboard import make_server

    catalog_path = location or catalog.default_catalog()
    try:
        catalog.locate(catalog_path)  # a file, or a URL scheme delta-rs does not know
    except BadInput as exc:
        raise fail(str(exc)) from None
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
