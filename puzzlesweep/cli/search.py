"""`puzzlesweep search` (the fewest moves of peg solitaire by a layered search sharded
over a Dask cluster, every finished layer kept on disk so that the same command
resumes)."""

import time
from typing import Annotated

import typer
from pydantic import ValidationError

from puzzlesweep import catalog
from puzzlesweep.cli.common import (
    DASHBOARD_DEFAULT,
    AddressOption,
    CatalogOption,
    DashboardOption,
    WorkersOption,
    app,
    catalog_errors,
    cell_text,
    check_catalog_directory,
    check_dashboard_address,
    check_workers,
    err,
    fail,
    out,
    parse_assignments,
    parse_memory,
    run_errors,
)
from puzzlesweep.cli.stopping import stopped_by_signals
from puzzlesweep.core import BadInput, validation_message

FolderOption = Annotated[
    str,
    typer.Option(help="The search's directory: every finished layer, and what a re-run resumes"),
]
ShardsOption = Annotated[
    int, typer.Option(min=1, max=4096, help="Parts of every layer (fixed for a folder)")
]
PartMemoryOption = Annotated[
    str | None,
    typer.Option("--memory-limit", help="Memory one part may hold, e.g. 5GiB [default: 4GiB]"),
]
WallOption = Annotated[
    float | None,
    typer.Option(min=1.0, help="Seconds for the whole search (no layer starts after)"),
]


@app.command()
def search(
    family: Annotated[str, typer.Argument(help="peg_solitaire")],
    params: Annotated[
        list[str] | None, typer.Argument(help="side=9 start=all|HOLE [finish=any|start|HOLE]")
    ] = None,
    folder: FolderOption = ...,
    shards: ShardsOption = 2,
    wall: WallOption = None,
    memory_limit: PartMemoryOption = None,
    location: CatalogOption = None,
    address: AddressOption = None,
    workers: WorkersOption = None,
    dashboard_address: DashboardOption = None,
) -> None:
    """Fewest moves by a layered search whose layers are sharded over Dask workers.

    `--wall` stops it wherever it is (within about a second of the limit, counted
    from the command's start), keeping the bound proven and the best solution found.

    `start=all` asks for the fewest over every start (OEIS A127500), printed
    only; a start hole asks for one instance, whose row is also written to the
    catalog. Either way the run has its row in the catalog's `runs`, as a
    sweep's. A re-run with the same --folder resumes from its last layer."""
    from puzzlesweep import puzzles
    from puzzlesweep.flows.settings import RunSettings

    started = time.time()  # --wall counts from here
    catalog_path = location or catalog.default_catalog()
    try:
        settings = RunSettings.of(
            flags=True, catalog=catalog_path, address=address, workers=workers,
            dashboard_address=dashboard_address or DASHBOARD_DEFAULT,
        )  # fmt: skip
        check_workers(workers)
        check_dashboard_address(settings.dashboard_address, bind=not address)
        run, verify, p = _search_run(family, params, folder, shards, parse_memory(memory_limit))
        check_catalog_directory(catalog_path)  # its run's row, and an instance's answer
    except ValidationError as exc:
        raise fail(f"{family}: {validation_message(exc, puzzles.get(family).Params)}") from None
    except (BadInput, ValueError) as exc:
        raise fail(f"{family}: {exc}") from None
    from puzzlesweep.flows.api import check_configured

    with catalog_errors():
        check_configured()  # a PREFECT_API_URL that does not serve, before any cluster
    report = _run_search(run, verify, settings, puzzles.get(family), p, wall, started)
    what = "every start" if p is None else f"start {p.start}"
    found = "best found" if report["status"] == "time_limit" else "fewest moves"
    out.print(
        f"{family} {' '.join(params or [])} ({what}): status {report['status']}  "
        f"{found} {cell_text(report['objective'])}  bound {cell_text(report['bound'])}  "
        f"{report['layers']} layers made now  {report['seconds']:.1f} s",
        highlight=False,
    )
    if p is not None:
        new = report["row"]
        err.print(f"its row is {'now' if new else 'already'} in {catalog_path}", highlight=False)


def _search_run(family: str, params, folder: str, shards: int, memory: int | None):
    """(the `ShardedRun`, its `verify(path)`, the instance's Params or None for every
    start). Raises BadInput for a family without a sharded search, ValueError or
    ValidationError for bad params or a folder that cannot hold this search."""
    from puzzlesweep import puzzles
    from puzzlesweep.solvers.frontier import MEMORY
    from puzzlesweep.solvers.frontier.run_folder import check_folder
    from puzzlesweep.solvers.frontier.sharded import ShardedRun

    module = puzzles.get(family)
    if not hasattr(module, "min_moves_search"):
        raise BadInput(f"family {family} has no sharded search (peg_solitaire has one)")
    problem, verify, p = module.min_moves_search(parse_assignments(params or []))
    run = ShardedRun(problem, folder, shards, memory or MEMORY)
    check_folder(run, write=False)  # run_search writes it, once an --address answers
    return run, verify, p


def _run_search(run, verify, settings, family, p, wall: float | None, started: float) -> dict:
    """`flows.shard.run_search` with `settings` (a `RunSettings`), its cluster's links
    and every layer on stderr (`family`: the module; `p`: its Params or None; `wall`
    counts from `started`, a `time.time()`); a Ctrl-C or SIGTERM exits 130 or 143 with
    one line (the finished layers are kept)."""
    from puzzlesweep.flows.cluster import probe_scheduler, quiet_dask
    from puzzlesweep.flows.shard import run_search

    quiet_dask()
    announce = lambda line: err.print(line, highlight=False, soft_wrap=True)  # noqa: E731
    stopping = stopped_by_signals(f"the search stopped; its layers are in {run.folder}")
    with run_errors(), stopping as take_sigterm:
        if settings.address:  # before run_search writes the folder's run.json
            probe_scheduler(settings.address)
        return run_search(
            run, verify, settings, family, p, wall, announce, take_sigterm, begun_at=started
        )
