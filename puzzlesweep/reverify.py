"""Stored results checked again by their families' verifiers, from the catalog alone.

One loop (`failures`) serves the three commands that trust no stored `verified` flag:
`catalog verify` (every stored solution), `catalog repair` (after a lost log was rebuilt
from data files that nothing vouches for) and `catalog migrate` (each row copied from
the old layout). A row is checked by `check_row`: its params rebuilt from its parameter
columns, its `solution` text decoded, the family's verifier run and its objective
compared with the stored one. The catalog knows no family; this module is where the
two meet.
"""

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow.parquet as pq

from puzzlesweep import catalog, puzzles
from puzzlesweep.catalog import legacy
from puzzlesweep.core import BadInput
from puzzlesweep.solve import verified_fields

Row = dict[str, Any]


def check_row(row: Row) -> str | None:
    """Re-verify one stored result `row` (its catalog columns: `family`, the family's
    parameter columns, `solution`, `objective`). Returns None when it holds, else why it
    fails (a bad parameter, an undecodable text, a broken rule, or a different
    objective). Raises KeyError for a family that is not installed."""
    family = puzzles.get(row["family"])
    raw = {name: row.get(name) for name in family.Params.model_fields}
    try:
        params = family.Params.model_validate(raw)
    except ValueError as exc:
        return f"parameters do not validate: {exc}"
    try:
        solution = family.decode(row["solution"])
    except (ValueError, IndexError) as exc:
        return f"solution text does not decode: {exc}"
    return verified_fields(family, params, solution, row.get("objective"))["error"]


def failures(rows: Iterable[Row]) -> Iterator[tuple[Row, str | None]]:
    """(row, why it fails or None) for each of `rows` that holds a solution, in order:
    the one re-verification loop."""
    for row in rows:
        if row.get("solution") is not None:
            yield row, check_row(row)


def stored_rows(shot: "catalog.Snapshot") -> Iterator[Row]:
    """Every row of `shot`'s results that holds a solution, family by family (the
    families installed here), as a dict of its columns."""
    for family in puzzles.FAMILIES:
        columns, rows = shot.query(
            "SELECT * FROM results WHERE family = ? AND solution IS NOT NULL", [family]
        )
        yield from (dict(zip(columns, values, strict=True)) for values in rows)


def verify(location: "catalog.CatalogLike") -> tuple[int, list[tuple[Row, str]]]:
    """(solutions re-checked, [(row, why)] of those that fail) over the latest snapshot
    of the catalog at `location`. Raises BadInput as `catalog.snapshot` does."""
    checked, failed = 0, []
    with catalog.snapshot(location) as shot:
        for row, why in failures(stored_rows(shot)):
            checked += 1
            if why is not None:
                failed.append((row, why))
    return checked, failed


def repair(location: "catalog.CatalogLike") -> dict:
    """`catalog.repair`, then, when it rebuilt a lost log, the re-check of every stored
    solution: its report with "failed": [(params_key, why)] added (empty when no log was
    rebuilt). Raises as `catalog.repair` does."""
    report = catalog.repair(location)
    report["failed"] = []
    if report["rebuilt"] is not None:
        _, failed = verify(location)
        report["failed"] = [(row["params_key"], why) for row, why in failed]
    return report


def migrate(source: str, target: str) -> dict:
    """Copy the catalog of the old layout at `source` (a local directory,
    `catalog.legacy`) into a new catalog at `target` (empty, missing, or an interrupted
    migration's): every visible result row, re-verified (`verified` and `error` say what
    the check found now), and every run manifest. One commit per old file, with an
    application transaction, so a migration run again copies only what is missing.
    Returns {"rows", "files", "runs", "failed" (rows whose re-check failed)}. Raises
    BadInput for a source of another layout or of unknown families, or a target that
    holds something else."""
    old = catalog.locate(source)
    if not old.local:
        raise BadInput(f"migrate reads a local directory, not {old.uri}")
    new = catalog.check_writable(target)
    files = legacy.visible_files(old.uri)
    families = sorted({family for family, _ in files})
    if unknown := [f for f in families if not puzzles.known(f)]:
        raise BadInput(f"{old.uri}: unknown families {', '.join(unknown)}")
    catalog.prepare(new, [puzzles.get(f).Params for f in families])
    report = {"rows": 0, "files": len(files), "runs": 0, "failed": 0}
    for family, path in files:
        model = puzzles.get(family).Params
        rows = [legacy.new_row(family, row) for row in pq.read_table(path).to_pylist()]
        for row, why in failures(rows):
            row["verified"] = why is None
            row["error"] = row.get("error") if why is None else f"migration re-check: {why}"
            report["failed"] += why is not None
        for row in rows:
            row["params"] = {name: row.pop(name, None) for name in model.model_fields}
        catalog.write_batch(new, model, rows, app_id=legacy.app_id(path))
        report["rows"] += len(rows)
    for run in legacy.manifests(old.uri):
        catalog.write_run(new, run)
        report["runs"] += 1
    return report
