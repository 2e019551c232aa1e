"""`puzzlesweep prove` (one hard instance split into parts, its certificate written and
re-checked, from the catalog or from a certificate file alone)."""

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
    cell_text,
    check_catalog_directory,
    check_dashboard_address,
    check_workers,
    err,
    fail,
    out,
    parse_assignments,
    parse_memory,
    refuse_together,
    run_errors,
)
from puzzlesweep.cli.stopping import stopped_by_signals
from puzzlesweep.core import BadInput, validation_message

SplitOption = Annotated[
    str,
    typer.Option(
        help="The family's split, e.g. 1:0,6 (layers 0 and 6 across axis 1); lookahead:N, a "
        "tree of 0/1 fixings with N leaves chosen by LP lookahead; nodes:N, the open nodes "
        "of an N-node SCIP solve; or such a tree:... text; lex: before a tree split adds "
        "lexicographic-leader rows for the family's symmetries to the model"
    ),
]
WidthOption = Annotated[
    int | None, typer.Option(help="Exact counts per group before the tail [default: 4]")
]
CheckOption = Annotated[
    bool, typer.Option(help="Only re-check the certificate (stored, or --certificate's)")
]
CertificateOption = Annotated[
    str | None,
    typer.Option(
        help="A certificate file (JSON): written after a proving run, read by --check "
        "(which then needs no catalog, takes --split and --width from the file, and checks "
        "the certificates it cites, found in its folder)"
    ),
]
PartMemoryOption = Annotated[
    str | None,
    typer.Option(
        "--memory-limit",
        help="Memory per part's solver process, e.g. 2GiB [default: the Dask worker's "
        "limit per thread]",
    ),
]
ResolveOption = Annotated[
    bool, typer.Option(help="With --check: also re-solve each part for --time-limit s")
]


@app.command()
def prove(
    family: Annotated[str, typer.Argument(help="A family with a split, e.g. no_k_in_row")],
    params: Annotated[list[str] | None, typer.Argument(help="key=value parameters")] = None,
    split: SplitOption = "",
    width: WidthOption = None,
    solver: Annotated[
        str, typer.Option(help="auto or an engine that splits (highs | scip), for every part")
    ] = "auto",
    time_limit: Annotated[float, typer.Option(help="Seconds per part")] = 60.0,
    wall: Annotated[
        float | None, typer.Option(help="Seconds for the whole run (no part starts after)")
    ] = None,
    probe: Annotated[
        float, typer.Option(help="Seconds of a direct solve first, for an incumbent")
    ] = 0.0,
    cutoff: Annotated[bool, typer.Option(help="Parts look only below the incumbent")] = True,
    location: CatalogOption = None,
    address: AddressOption = None,
    workers: WorkersOption = None,
    check: CheckOption = False,
    certificate: CertificateOption = None,
    resolve: ResolveOption = False,
    dashboard_address: DashboardOption = None,
    memory_limit: PartMemoryOption = None,
) -> None:
    """Prove one instance's optimum by splitting its MIP into parts solved on Dask.

    Every finished part is written to the catalog at once, so a re-run of the same
    split solves only the missing parts; the combined row holds the certificate."""
    from puzzlesweep import puzzles

    catalog_path = location or catalog.default_catalog()
    resolve_seconds = time_limit if resolve else None
    try:
        running = {"--wall": wall, "--probe": probe or None, "--memory-limit": memory_limit}
        _refuse_prove_conflicts(address, workers, check, running, resolve, solver)
        if check and certificate:
            _print_file_check(family, params, split, width, solver, resolve_seconds, certificate)
            return
        if certificate and not check:
            _check_certificate_target(certificate)
        proof = _proof(family, params, split, width, solver, time_limit, cutoff)
        settings = _run_settings(
            proof, wall, probe, catalog=catalog_path, address=address, workers=workers,
            dashboard_address=dashboard_address, memory_limit=parse_memory(memory_limit),
        )  # fmt: skip
    except ValidationError as exc:
        raise fail(f"{family}: {validation_message(exc, puzzles.get(family).Params)}") from None
    except (BadInput, ValueError) as exc:
        raise fail(f"{family}: {exc}") from None
    if check:
        _print_recheck(catalog_path, proof, resolve_seconds)
        return
    report = _run_prove(proof, settings, probe, wall)
    _print_report(f"{family} {' '.join(params or [])} split {proof.split}", proof, report)
    if certificate:
        _write_certificate(catalog_path, proof, certificate)
    if report["errors"]:  # their rows prove nothing; the catalog says why
        raise fail(f"{report['errors']} parts ended in error: see their rows' error column", 1)


def _run_settings(proof, wall: float | None, probe: float, **options):
    """The run's `RunSettings` of `options` (the dashboard on `DASHBOARD_DEFAULT` unless
    told). Raises BadInput for a bad --wall, --probe, --workers or dashboard address, a
    bad split, or a catalog that cannot be written."""
    from puzzlesweep.flows.settings import RunSettings
    from puzzlesweep.proof import build

    options["dashboard_address"] = options["dashboard_address"] or DASHBOARD_DEFAULT
    settings = RunSettings.of(flags=True, **options)

    if wall is not None and wall <= 0:
        raise BadInput(f"--wall must be > 0 seconds, got {wall}")
    if probe < 0:
        raise BadInput(f"--probe must be >= 0 seconds, got {probe}")
    check_workers(settings.workers)
    check_dashboard_address(settings.dashboard_address, bind=not settings.address)
    build(proof)
    check_catalog_directory(settings.catalog)
    return settings


def _print_report(title: str, proof, report: dict) -> None:
    """One line for a finished `prove` run: the combined row's status and figures, and
    where its parts came from (the catalog, solved now, missing)."""
    out.print(
        f"{title} (key {proof.key}, {proof.solver}): "
        f"status {report['status']}  objective {cell_text(report['objective'])}  "
        f"bound {cell_text(report['bound'])}  parts {report['parts']} "
        f"({report['stored']} from the catalog, {report['solved']} solved now, "
        f"{report['missing']} missing; {report['closed']} closed, {report['at_limit']} "
        f"stopped at a limit, {report['errors']} in error)  "
        f"{report['seconds']:.1f} s",
        highlight=False,
    )


def _refuse_prove_conflicts(address, workers, check: bool, running: dict, resolve, solver) -> None:
    """Raise BadInput naming two `prove` options that do not go together: a cluster's
    address with a local cluster's size, `--check` (which solves nothing) with any
    option about solving (`running`: option → value, None when not given), `--resolve`
    without `--check`, or an engine for `--check` without `--resolve` (the engine only
    re-solves parts)."""
    refuse_together(
        {"--address": address, "--workers": workers},
        "--workers sizes a local cluster, and --address uses a cluster already started",
    )
    for option, value in {**running, "--address": address, "--workers": workers}.items():
        refuse_together(
            {"--check": check, option: value},
            "--check only re-reads the stored certificate, it solves nothing",
        )
    if resolve and not check:
        raise BadInput("--resolve re-solves the parts of a certificate: it needs --check")
    if check and not resolve and solver != "auto":
        raise BadInput(
            f"--solver {solver} would re-solve the parts: with --check it needs --resolve"
        )


def _proof(family, params, split, width, solver, time_limit, cutoff):
    """The `proof.Proof` of `prove`'s arguments, its engine resolved for the instance;
    `width` defaults to 4 for a family's split and is 0 for a tree split (no counts);
    `lookahead:N` and `nodes:N` are grown into their `tree:` text here (and printed),
    on the model with leader rows after `lex:` (`proof.model_of`).

    Raises BadInput for an unknown family, a missing `--split` or a bad solver, and
    pydantic's ValidationError for bad parameters."""
    from puzzlesweep import puzzles
    from puzzlesweep.proof import LEX, Proof, model_of
    from puzzlesweep.puzzles import Instance
    from puzzlesweep.solve import check_solver, resolve_solver
    from puzzlesweep.solvers import Limits, lookahead, ramp

    module = puzzles.get(family)
    values = parse_assignments(params or [])
    if not split:
        raise BadInput("--split is required (e.g. --split 1:0,6 for no_k_in_row)")
    validated = module.Params.model_validate(values)
    engine = resolve_solver(Instance(family, validated), check_solver(family, solver))
    prefix = LEX if split.startswith(LEX) else ""  # lex: adds leader rows to the model
    text = split[len(prefix) :]
    tree = text.startswith(("tree:", "lookahead:", "nodes:"))
    if tree and width is not None:
        raise BadInput("--width sets the exact counts of a family's split; a tree split has none")
    for kind, chooser in (("lookahead", lookahead), ("nodes", ramp)):
        if text.startswith(f"{kind}:"):  # the solver chooses: a tree of fixings
            split = prefix + chooser.resolve(model_of(family, validated, split)[0], text)
            err.print(f"the {kind} split is --split {split}", highlight=False, soft_wrap=True)
    width = 0 if tree else 4 if width is None else width
    return Proof(
        family,
        validated.model_dump(),
        split,
        width,
        Limits(time_limit),
        cutoff=cutoff,
        solver=engine,
    )


def _print_recheck(catalog_path: str, proof, resolve_seconds: float | None) -> None:
    """`prove --check`: print each problem of the stored certificate (exit 1 if any),
    or one line saying it holds."""
    from puzzlesweep.recheck import recheck

    _print_problems(recheck(catalog_path, proof, resolve_seconds))
    out.print(f"certificate {proof.key} in {catalog_path} holds", highlight=False)


def _print_problems(problems: list[str]) -> None:
    """Print each problem of a certificate on stderr; exit 1 if there is any."""
    for problem in problems:
        err.print(f"certificate: {problem}", highlight=False, markup=False)
    if problems:
        raise typer.Exit(1)


def _print_file_check(family, params, split, width, solver, resolve_seconds, path: str) -> None:
    """`prove --check --certificate FILE`: re-check the certificate file alone (no
    catalog). FAMILY and PARAMS must name the file's instance, and --split / --width,
    when given, its split (else BadInput: exit 2); --solver other than auto re-solves
    the parts with that engine instead of the file's (an audit by a second engine).
    Problems exit 1."""
    from pathlib import Path

    from puzzlesweep import certificate, puzzles
    from puzzlesweep.solve import check_solver

    engine = None if solver == "auto" else check_solver(family, solver)

    document = certificate.load(path)
    proof = certificate.proof_of(document)
    given = puzzles.get(family).Params.model_validate(parse_assignments(params or []))
    if family != proof.family or given.model_dump() != proof.instance.params.model_dump():
        raise BadInput(
            f"{path} certifies {proof.family} {_params_text(proof.params)}, "
            f"not {family} {_params_text(given.model_dump())}"
        )
    for option, asked, held in (("--split", split, proof.split), ("--width", width, proof.width)):
        if asked not in ("", None) and asked != held:
            raise BadInput(f"{path} holds the split {option} {held}, not {asked}")
    seen: dict = {}
    _print_problems(certificate.check(document, resolve_seconds, engine, Path(path).parent, seen))
    claim = document["claim"]
    chain = ", ".join(sorted(p.name for p in seen)) or "none"
    out.print(
        f"certificate {path} holds: {proof.family} {_params_text(proof.params)} "
        f"{claim['status']} {cell_text(claim['objective'])} (bound {cell_text(claim['bound'])}); "
        f"{len(document['cited'])} cited values, cited certificates checked: {chain}",
        highlight=False,
    )


def _params_text(params: dict) -> str:
    """Parameters as the command line writes them: `dims=6,7 k=5`."""
    return " ".join(
        f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in params.items()
    )


def _check_certificate_target(path: str) -> None:
    """Raise BadInput, before any work, when the certificate cannot be written at `path`
    (a directory, or a folder that does not exist or cannot be written to)."""
    import os
    from pathlib import Path

    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise BadInput(f"--certificate {path}: is a directory, not a file")
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise BadInput(
            f"--certificate {path}: the folder {folder} does not exist or is not writable"
        )


def _write_certificate(catalog_path: str, proof, path: str) -> None:
    """Write the attempt's certificate document from the catalog to `path` (exit 1 if
    the file cannot be written)."""
    from puzzlesweep import certificate

    try:
        certificate.write(path, certificate.export(catalog_path, proof))
    except OSError as exc:
        raise fail(f"certificate {path}: {exc.strerror or exc}", code=1) from None
    out.print(f"certificate written to {path}", highlight=False)


def _run_prove(proof, settings, probe: float, wall: float | None) -> dict:
    """Run the attempt with `settings` (a `RunSettings`: on the cluster at its address,
    checked first: a port that accepts and never answers exits 2 in 10 s, or on a local
    one), announcing its links on stderr; returns `flows.prove.run_prove`'s report. A
    run's failures exit as `run_errors` says."""
    from puzzlesweep.flows.api import check_configured
    from puzzlesweep.flows.cluster import probe_scheduler, quiet_dask
    from puzzlesweep.flows.prove import run_prove

    quiet_dask()
    stopping = stopped_by_signals("the proof stopped; finished parts are kept")
    with run_errors(), stopping as take_sigterm:
        if settings.address:
            probe_scheduler(settings.address)
        check_configured()  # a PREFECT_API_URL that does not serve, before any cluster
        return run_prove(
            proof,
            settings,
            probe,
            wall,
            announce=lambda line: err.print(line, highlight=False, soft_wrap=True),
            on_running=take_sigterm,
        )
