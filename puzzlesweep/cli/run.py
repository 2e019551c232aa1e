"""`puzzlesweep run` (a sweep on Dask under Prefect)."""

from contextlib import nullcontext
from typing import Annotated

import typer

from puzzlesweep import catalog
from puzzlesweep.cli.common import (
    CORES,
    DASHBOARD_DEFAULT,
    AddressOption,
    CatalogOption,
    DashboardOption,
    WorkersOption,
    app,
    catalog_errors,
    check_catalog_directory,
    check_dashboard_address,
    check_workers,
    err,
    fail,
    out,
    parse_memory,
    print_rows,
    run_errors,
)
from puzzlesweep.cli.display import progress_display, summary_table
from puzzlesweep.cli.stopping import interruptible

BatchSizeOption = Annotated[
    int | None, typer.Option(min=1, help="Instances per task [default: auto]")
]
ForceOption = Annotated[bool, typer.Option(help="Re-solve instances the catalog already holds")]
MemoryOption = Annotated[
    str | None,
    typer.Option(
        help="Memory per instance, e.g. 2GiB [default: the Dask worker's limit per thread]"
    ),
]
RetriesOption = Annotated[
    int, typer.Option(min=0, help="Extra attempts of a batch after a transient failure")
]
#: The longest wait for a scheduler that `--connect-timeout` takes: an hour (a larger
#: one, or `inf`, would mean waiting for ever on an address that never answers).
MAX_CONNECT_SECONDS = 3600.0
ConnectTimeoutOption = Annotated[
    float,
    typer.Option(
        min=0.1, max=MAX_CONNECT_SECONDS, help="Seconds to wait for the --address scheduler"
    ),
]
AllowConcurrentOption = Annotated[
    bool, typer.Option(help="Run even while another run of this sweep writes to the catalog")
]
MaxInstancesOption = Annotated[
    int | None,
    typer.Option(
        min=1, help="Refuse a spec of more instances [default: its max_instances, or 20000]"
    ),
]
BackendOption = Annotated[
    str,
    typer.Option(
        help="dask: a LocalCluster of --workers processes, or --address; threads: "
        "threads of this process (notebooks, quick runs)"
    ),
]
DryRunOption = Annotated[
    bool,
    typer.Option(
        help="Only show what the spec expands to, what the catalog holds, what would "
        "be solved and an estimate of the time; solve and write nothing"
    ),
]


@app.command()
def run(
    spec: Annotated[str, typer.Argument(help="Sweep spec (TOML)")],
    location: CatalogOption = None,
    address: AddressOption = None,
    workers: WorkersOption = None,
    batch_size: BatchSizeOption = None,
    force: ForceOption = False,
    memory_limit: MemoryOption = None,
    retries: RetriesOption = 2,
    dashboard_address: DashboardOption = None,
    connect_timeout: ConnectTimeoutOption = 10.0,
    allow_concurrent: AllowConcurrentOption = False,
    max_instances: MaxInstancesOption = None,
    backend: BackendOption = "dask",
    dry_run: DryRunOption = False,
) -> None:
    """Run a sweep on Dask under Prefect and print its results from the catalog.

    Prints the Dask dashboard's address and, when PREFECT_API_URL names a Prefect
    server, the flow run's URL, on stderr as soon as they are known. Refuses (exit 2)
    while another run of the same sweep is alive in the catalog."""
    catalog_path = location or catalog.default_catalog()
    if dry_run:
        return _dry_run(spec, catalog_path, force, max_instances, workers or CORES)
    with catalog_errors():  # everything is validated before any work starts
        from puzzlesweep.flows.settings import RunSettings
        from puzzlesweep.flows.spec import load

        check_workers(workers)
        if backend == "dask" and not address:  # a local cluster's
            dashboard_address = dashboard_address or DASHBOARD_DEFAULT
        settings = RunSettings.of(
            flags=True, catalog=catalog_path, backend=backend, address=address,
            workers=workers, batch_size=batch_size, force=force,
            memory_limit=parse_memory(memory_limit), retries=retries,
            dashboard_address=dashboard_address, connect_timeout=connect_timeout,
            allow_concurrent=allow_concurrent, max_instances=max_instances,
        )  # fmt: skip
        if dashboard_address:
            check_dashboard_address(dashboard_address, bind=not address)
        check_catalog_directory(catalog_path)  # a file, another directory, not writable
        plan = load(spec, max_instances)
        if address:  # a bounded probe: a port that never answers must not hold the run
            from puzzlesweep.flows.cluster import probe_scheduler

            probe_scheduler(address, connect_timeout)
        from puzzlesweep.flows.api import check_configured

        check_configured()  # a PREFECT_API_URL that does not serve
    report = _run_sweep(spec, settings, plan)
    _print_run(catalog_path, plan, report)


def _run_sweep(spec: str, settings, plan) -> dict:
    """Run the sweep flow with `settings` (a `RunSettings`; `plan`: the spec as read
    here), a progress display and Ctrl-C handling, and return its report
    (`flows.sweep.run_sweep`). Without a configured Prefect API, a temporary one is
    started first, while Prefect and the flow are imported."""
    from puzzlesweep.flows.api import TemporaryAPI, configured_api
    from puzzlesweep.flows.control import Control

    api = None if configured_api() else TemporaryAPI()
    control = Control(announce=lambda line: err.print(line, highlight=False, soft_wrap=True))
    with interruptible(control), api or nullcontext(), run_errors():
        from puzzlesweep.flows.cluster import quiet_dask
        from puzzlesweep.flows.sweep import run_sweep

        quiet_dask()
        with progress_display(control):
            return run_sweep(spec, settings, api=api, control=control, plan=plan)


def _print_run(catalog_path: str, plan, report: dict) -> None:
    """Print the run's one-line summary and its results table; exit 1 when batches
    failed every attempt or instances ended in error."""
    err.print(
        f"run {report['run_id']}: solved {report['solved']} in {report['batches']} "
        f"{'batch' if report['batches'] == 1 else 'batches'} "
        f"({report['retried']} retried), skipped {report['skipped']} already in the catalog, "
        f"{report['seconds']:.1f} s",
        highlight=False,
    )
    with catalog_errors():
        if catalog.files(catalog_path):
            out.print(summary_table(catalog_path, plan, report["run_id"]))
    if report["failed"]:
        for line in report["failed"]:
            err.print(line, highlight=False, markup=False, soft_wrap=True)
        raise fail(f"{len(report['failed'])} batches failed every attempt; run again to resume", 1)
    failed = report["counts"].get("error", 0)
    if failed:
        raise fail(f"{failed} instances ended in error; see the catalog's error column", 1)


def _dry_run(
    spec: str, catalog_path: str, force: bool, max_instances: int | None, workers: int
) -> None:
    """Print `run_record.preview` of the spec: nothing is solved or written."""
    from puzzlesweep.flows.run_record import preview

    with catalog_errors():
        catalog.check_writable(catalog_path)  # a lost log is not an empty catalog
        report = preview(spec, catalog_path, force, max_instances, workers)
    columns = ["study", "family", "solver", "time_limit", "instances", "classes"]
    columns += ["in_catalog", "to_solve", "classes_to_solve", "seconds"]
    rows = [tuple(study[c] for c in columns) for study in report["studies"]]
    print_rows(f"sweep {report['sweep']}: dry run, nothing solved or written", columns, rows)
    unknown, studies = report["unknown"], len(report["studies"])
    if unknown == studies:
        guess = "no estimate of the time: the catalog holds no past solve times for these studies"
    else:
        guess = f"about {report['seconds']:.0f} s of solving on {workers} workers"
        if unknown:
            guess += f", plus {unknown} studies without past solve times in the catalog"
    out.print(guess, highlight=False)
