"""What `run` shows while and after it works: the progress display and the summary table."""

import threading
from collections import Counter
from contextlib import contextmanager

from rich.table import Table

from puzzlesweep import catalog
from puzzlesweep.cli.common import cell_text, err
from puzzlesweep.core import done_key


def _left(seconds: float | None) -> str:
    """An estimate of seconds left as people read it ('about 2 min left'), or ''."""
    if seconds is None:
        return ""
    if seconds < 90:
        return f"about {seconds:.0f} s left"
    return f"about {seconds / 60:.0f} min left"


@contextmanager
def _every(seconds: float, draw):
    """Call `draw()` every `seconds` on a daemon thread while the block runs."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(seconds):
            draw()

    threading.Thread(target=loop, name="progress-display", daemon=True).start()
    try:
        yield
    finally:
        stop.set()


@contextmanager
def progress_display(control, every_seconds: float = 10.0):
    """While a sweep runs in this process: a rich progress bar (done, total, rate, the
    planner's estimate of the time left) on a terminal, redrawn as instances finish and
    every second, else a plain line every `every_seconds` (on a timer, whether or not
    anything finished, each computed at that moment) and one at the end. Instances count
    as they finish on the workers. `control`: the run's `flows.control.Control`, whose
    listeners hear the run move."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    current, listen = control.standing, control.listen

    if err.is_terminal:
        bar = Progress(
            TextColumn("solving"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}  {task.fields[left]}"),
            console=err,
        )
        task = bar.add_task("solving", total=None, rate="", left="")

        def show(s) -> None:
            rate = f"{s.rate * 60:.1f}/min"
            bar.update(task, completed=s.done, total=s.total, rate=rate, left=_left(s.seconds_left))

        def redraw() -> None:
            if (s := current()) is not None:
                show(s)

        stop = listen(show)
        try:
            with bar, _every(1.0, redraw):
                yield
        finally:
            stop()
        return

    def line() -> None:
        if (s := current()) is None or not s.total:  # nothing to solve: nothing to say
            return
        left = _left(s.seconds_left)
        err.print(
            f"{s.done}/{s.total} instances, {s.rate * 60:.1f}/min" + (f", {left}" if left else ""),
            highlight=False,
        )

    try:
        with _every(every_seconds, line):
            yield
    finally:
        line()


#: The most instances the run's summary lists one per row; more are grouped.
LISTED = 60


def summary_table(catalog_path: str, plan, run_id: str) -> Table:
    """The latest result of every instance of `plan`, read back from the catalog, with
    where each row comes from: solved by run `run_id`, a symmetric copy of an equivalent
    instance it solved, or already in the catalog from an earlier run. Up to `LISTED`
    instances one per row; more, one row per family, solver, status and origin (a table
    of thousands of rows helps no one at a terminal, and is slow to draw)."""
    from puzzlesweep import puzzles

    wanted = {job.done_key: job for job in plan.jobs}
    keys = sorted({key[0] for key in wanted})
    rows = [r for r in catalog.latest(catalog_path, keys) if done_key(r) in wanted]
    order = {key: i for i, key in enumerate(wanted)}
    rows.sort(key=lambda r: order[done_key(r)])

    def origin(r: dict) -> str:
        if r["run_id"] != run_id:
            return "earlier run"
        if r["status"] == "error":
            return "error"
        return "symmetric copy" if r["equivalent"] else "solved"

    origins = Counter(map(origin, rows))
    said = {
        "solved": "solved now",
        "symmetric copy": "symmetric copies",
        "earlier run": "from earlier runs",
        "error": "ended in error now",
    }
    parts = [f"{origins[name]} {said[name]}" for name in said if origins[name]]
    if missing := len(wanted) - len(rows):
        parts.append(f"{missing} without a result")
    title = f"sweep {plan.name}: {len(wanted)} instances ({', '.join(parts)}) in {catalog_path}"
    if len(rows) > LISTED:
        return _grouped_table(title, rows, origin)
    table = Table(title=title)
    columns = ("family", "parameters", "solver", "status", "objective", "bound", "gap")
    for name in (*columns, "verified", "seconds", "row"):
        table.add_column(
            name, justify="right" if name in ("objective", "bound", "gap", "seconds") else "left"
        )
    for r in rows:
        fields = puzzles.get(r["family"]).Params.model_fields
        shown = " ".join(f"{k}={cell_text(r[k])}" for k in fields)
        table.add_row(
            r["family"],
            shown,
            r["solver"],
            r["status"],
            cell_text(r["objective"]),
            cell_text(r["bound"]),
            cell_text(r["gap"]),
            cell_text(r["verified"]),
            f"{r['solve_seconds']:.2f}",
            origin(r),
        )
    return table


def _grouped_table(title: str, rows: list[dict], origin) -> Table:
    """More rows than a terminal shows: one row per family, solver, status and origin
    (`origin(row)`), with the count, the objectives' range and the solve seconds."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["family"], r["solver"], r["status"], origin(r)), []).append(r)
    table = Table(
        title=title, caption="one row per group; `puzzlesweep catalog query` lists each instance"
    )
    for name in ("family", "solver", "status", "row", "instances", "objective", "seconds"):
        table.add_column(name, justify="right" if name in ("instances", "seconds") else "left")
    for (family, solver, status, where), members in sorted(groups.items()):
        objectives = [r["objective"] for r in members if r["objective"] is not None]
        span = f"{cell_text(min(objectives))}..{cell_text(max(objectives))}" if objectives else "-"
        seconds = sum(r["solve_seconds"] or 0.0 for r in members)
        table.add_row(family, solver, status, where, str(len(members)), span, f"{seconds:.2f}")
    return table
