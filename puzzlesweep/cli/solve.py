"""`puzzlesweep solve`: one instance, solved in a child process, verified, printed, drawn;
`puzzlesweep families`: every family's solvers and parameters; `puzzlesweep engines`:
the table of engines."""

import json
import os
from typing import Annotated

import typer

from puzzlesweep.cli.common import (
    app,
    cell_text,
    err,
    fail,
    out,
    parse_assignments,
    parse_memory,
    refusal_to_create_in,
)
from puzzlesweep.core import BadInput

#: `solve`'s default memory limit for its solver process (T_8 fewest moves, the largest
#: search measured, peaked at 1.7 GB; `--memory-limit` raises it).
SOLVE_MEMORY = "4GiB"
#: Seconds past `solve`'s time limit before its solver process is killed (verifying and
#: decoding come after the solver's own clock).
SOLVE_GRACE = 10.0


@app.command()
def solve(
    family: Annotated[
        str, typer.Argument(help="monochromatic_lines | no_k_in_row | domination | peg_solitaire")
    ],
    params: Annotated[list[str] | None, typer.Argument(help="key=value parameters")] = None,
    solver: Annotated[
        str | None,
        typer.Option(
            help="auto or an engine: highs | scip | frontier | an installed one "
            "(`puzzlesweep engines`) [default: the family's, auto for MIPs]"
        ),
    ] = None,
    time_limit: Annotated[float, typer.Option(help="Seconds for this instance")] = 60.0,
    node_limit: Annotated[int | None, typer.Option(help="Nodes for this instance")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    count: Annotated[
        bool,
        typer.Option(
            help="Also count the optimal solutions, and those distinct up to the board's "
            "symmetries (an engine that counts: SCIP; another --time-limit for the count)"
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
    (`puzzlesweep.isolate.Child`): under `--memory-limit`, and killed when it runs
    `SOLVE_GRACE` seconds past `--time-limit`, which counts from the start of
    building the model. A limit that cuts it is shown as the status and a
    one-line reason."""
    module, instance, chosen, limits, memory = _checked(
        family, params, solver, count, time_limit, node_limit, picture, memory_limit
    )
    row = _solve_in_child(instance, chosen, limits, count, memory)
    if picture is not None:
        _draw(module, instance.params, row["solution"], picture)
    if as_json:
        _print_json(module, instance, row, count)
    else:
        _print_text(module, instance, row, count)
    if row["status"] == "error" or row["verified"] is False:
        raise typer.Exit(1)


def _checked(family, params, solver, count, time_limit, node_limit, picture, memory_limit):
    """Validate `solve`'s arguments before any process starts.

    Returns `(module, instance, solver, limits, memory bytes)`; any bad value exits 2
    with one line naming the family and the option, so nothing is solved or drawn."""
    from puzzlesweep import puzzles
    from puzzlesweep.core import make_params
    from puzzlesweep.puzzles import Instance
    from puzzlesweep.solve import check_count, check_solver
    from puzzlesweep.solvers import Limits

    try:
        module = puzzles.get(family)
        instance = Instance(family, make_params(module.Params, parse_assignments(params or [])))
        chosen = check_solver(family, solver)
        if count:
            check_count(family, chosen)
        limits = Limits(time_limit, node_limit)
        if picture is not None:
            _check_picture(picture)
        memory = parse_memory(memory_limit)
    except (BadInput, ValueError) as exc:
        raise fail(f"{family}: {exc}") from None
    return module, instance, chosen, limits, memory


def _check_picture(picture: str) -> None:
    """Raise BadInput, before any solve, unless a picture can be written at `picture`:
    a name ending in .png or .svg, not a directory, in a folder that exists and takes a
    new file (a probe file, removed at once)."""
    if not picture.lower().endswith((".png", ".svg")):
        raise BadInput(f"--picture: {picture!r} must end in .png or .svg")
    folder = os.path.dirname(picture) or "."
    if not os.path.isdir(folder):
        raise BadInput(f"--picture: the folder of {picture!r} does not exist")
    if os.path.isdir(picture):
        raise BadInput(f"--picture: {picture!r} is a directory")
    if reason := refusal_to_create_in(folder):
        raise BadInput(f"--picture: no file can be created in {folder} ({reason})")


def _solve_in_child(instance, chosen: str, limits, count: bool, memory) -> dict:
    """Solve `instance` in a `puzzlesweep.isolate.Child` under `memory` and the limits.

    Returns the result row (a killed or crashed child's says why: `SolveRequest.failed`).
    Ctrl-C exits 130 with nothing solved."""
    from puzzlesweep.isolate import Child, Interrupted
    from puzzlesweep.solve import SolveRequest

    child = Child(memory, grace=SOLVE_GRACE)
    try:
        return child.solve(SolveRequest(instance, chosen, limits, count))
    except (KeyboardInterrupt, Interrupted):
        raise fail("interrupted: nothing solved", 130) from None
    finally:
        child.close()


def _print_json(module, instance, row: dict, count: bool) -> None:
    """Print `row` as the one JSON object of docs/families.md (plus the family's `details`).

    The object's keys are fixed, so a stop or error reason goes to stderr."""
    keys = ["family", "params", "instance_key", "solver", "status", "objective", "bound"]
    keys += ["verified", "solve_seconds", "solution"]
    keys += ["solutions", "inequivalent"] if count else []
    shown = {k: row[k] for k in keys}
    if row["solution"] is not None and hasattr(module, "details"):
        shown.update(module.details(instance.params, module.decode(row["solution"])))
    print(json.dumps(shown))
    if row["error"]:
        err.print(f"{_why(row)}: {row['error']}", highlight=False, markup=False)


def _print_text(module, instance, row: dict, count: bool) -> None:
    """Print `row` for a reader: parameters, figures, the reason of a stop and the board."""
    shown = " ".join(f"{k}={cell_text(v)}" for k, v in row["params"].items())
    out.print(f"{instance.family} {shown}", highlight=False)
    out.print(
        f"status {row['status']}  objective {cell_text(row['objective'])}  "
        f"bound {cell_text(row['bound'])}  verified {cell_text(row['verified'])}  "
        f"{row['solve_seconds']:.2f} s  {cell_text(row['nodes'])} nodes  "
        f"solver {row['solver']}",
        highlight=False,
    )
    if count:
        out.print(
            f"optimal solutions {cell_text(row['solutions'])}  "
            f"inequivalent {cell_text(row['inequivalent'])}",
            highlight=False,
        )
    if row["error"]:
        out.print(f"{_why(row)}: {row['error']}", highlight=False, markup=False)
    if row["solution"] is not None:
        out.print(module.render(instance.params, module.decode(row["solution"])), highlight=False)


def _why(row: dict) -> str:
    """'error' for a row in error, 'stopped' for one a limit cut: the word before its reason."""
    return "error" if row["status"] == "error" else "stopped"


def _draw(module, params, solution: str | None, path: str) -> None:
    """Draw the decoded solution with the family's `picture` into `path` (PNG or SVG)."""
    if solution is None:
        err.print(f"no solution to draw; {path} not written", highlight=False)
        return
    figure = module.picture(params, module.decode(solution))
    figure.savefig(path, dpi=80)
    err.print(f"picture written to {path}", highlight=False)


@app.command()
def families(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON list")] = False,
) -> None:
    """List every family with its solvers and parameters: type, default and range."""
    from rich.markup import escape
    from rich.table import Table

    from puzzlesweep import puzzles

    described = [puzzles.describe(name) for name in puzzles.FAMILIES]
    if as_json:
        print(json.dumps(described))
        return
    for family in described:
        table = Table(
            "parameter",
            "type",
            "default",
            "description",
            title=f"{family['family']} (solvers: {', '.join(family['solvers'])})",
        )
        for p in family["parameters"]:
            default = "(required)" if p["required"] else cell_text(p["default"])
            table.add_row(p["name"], escape(p["type"]), escape(default), escape(p["description"]))
        out.print(table)


@app.command()
def engines(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON list")] = False,
) -> None:
    """List every engine (built-in, then installed) with its capabilities and module;
    an installed engine that cannot run is named on stderr with why, and exits 2."""
    from rich.table import Table

    from puzzlesweep.solvers import engines as table

    listed = [
        {"engine": e.name, "capabilities": sorted(e.capabilities), "module": e.module}
        for e in table.table().values()
    ]
    if as_json:
        print(json.dumps(listed))
    else:
        shown = Table("engine", "capabilities", "module", title="engines (solvers.engines)")
        for e in listed:
            shown.add_row(e["engine"], ", ".join(e["capabilities"]), e["module"])
        out.print(shown)
    if refused := table.refused():
        raise fail("; ".join(refused.values()))
