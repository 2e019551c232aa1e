"""The columns of the catalog's two Delta tables, as Arrow schemas.

A `results` row is `COMMON_COLUMNS` (the result columns of docs/catalog.md plus the limits that
make a result final), then the family's parameters as typed columns under their own
names: integers as int64, words as strings, lists as Arrow lists. The table's schema is
the union of every family's columns (a family's rows hold nulls in the others'), evolved
by merge when a family first appears. `family` is the partition column.

A `runs` row is `RUN_COLUMNS`: one per run, replaced as the run goes (its state, counts
and heartbeat).
"""

import types
import typing
from typing import Any

import pyarrow as pa

from puzzlesweep.core import STATUSES, whole

#: Bump when a column changes meaning or type; readers see it in every row. 5: objective
#: and bound are int64 (a table made before keeps its double columns, and the integral
#: values of its new rows are stored there as doubles); 4: Delta Lake tables; 3: solution
#: counts; 2: subproblem, certificate.
SCHEMA_VERSION = 5
#: The columns of whole numbers: every family's objective, and so its dual bound, is an
#: integer (a count of pieces, removed stones, lines or moves).
INTEGRAL = ("objective", "bound")

COMMON_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("run_id", pa.string()),
    ("sweep", pa.string()),
    ("family", pa.string()),
    ("instance_key", pa.string()),  # hash of the canonical params: equivalents share it
    ("params_key", pa.string()),  # hash of the row's own params
    ("equivalent", pa.bool_()),  # carried over by symmetry from an instance solved alike
    ("solver", pa.string()),
    ("solver_version", pa.string()),
    ("status", pa.string()),
    ("objective", pa.int64()),
    ("bound", pa.int64()),
    ("gap", pa.float64()),
    ("solve_seconds", pa.float64()),
    ("nodes", pa.int64()),
    ("solution", pa.string()),
    ("verified", pa.bool_()),
    ("error", pa.string()),
    ("worker", pa.string()),
    ("started_at", pa.timestamp("us", tz="UTC")),
    ("finished_at", pa.timestamp("us", tz="UTC")),
    ("time_limit", pa.float64()),
    ("node_limit", pa.int64()),
    ("puzzlesweep_version", pa.string()),
    ("schema_version", pa.int32()),
    # A part of a split proof: JSON of its handle (index, label, counts, cutoff, lower
    # limit, key); null on every other row.
    ("subproblem", pa.string()),
    # The combined row of a split proof: JSON listing every part with its status and
    # lower limit (flows/prove.py); null on every other row.
    ("certificate", pa.string()),
    # `solve --count` or a study's `count = true`: how many optimal solutions
    # the instance has, and how many up to the board's symmetries; null when not counted.
    ("solutions", pa.int64()),
    ("inequivalent", pa.int64()),
]
COMMON_NAMES = {name for name, _ in COMMON_COLUMNS}

#: What a run's `state` can be. `lost` is never written by the run itself: readers show a
#: `running` row whose heartbeat stopped as lost (`catalog.runs`).
RUN_STATES = ("running", "finished", "failed", "interrupted", "lost")

#: One row per run (`CATALOG/runs`), written when the run starts (state `running`),
#: replaced with a fresh `heartbeat_at` while it lives and when it ends.
RUN_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("run_id", pa.string()),
    ("sweep", pa.string()),
    ("state", pa.string()),
    ("spec_path", pa.string()),
    ("spec", pa.string()),
    ("host", pa.string()),
    ("pid", pa.int64()),
    ("started_at", pa.timestamp("us", tz="UTC")),
    ("heartbeat_at", pa.timestamp("us", tz="UTC")),
    ("finished_at", pa.timestamp("us", tz="UTC")),
    ("planned", pa.int64()),
    ("skipped", pa.int64()),
    ("solved", pa.int64()),
    *[(status, pa.int64()) for status in STATUSES],
    ("batches", pa.int64()),
    ("batch_size", pa.int64()),
    ("force", pa.bool_()),
    ("flow_run_url", pa.string()),
    ("dask_dashboard_url", pa.string()),
    # the run's estimate of the seconds left at `heartbeat_at` (the one its terminal
    # shows, flows/progress.py), so the dashboard shows the same; null without one
    ("seconds_left", pa.float64()),
    ("puzzlesweep_version", pa.string()),
    ("highs_version", pa.string()),
    ("prefect_version", pa.string()),
    ("dask_version", pa.string()),
    ("distributed_version", pa.string()),
    ("python_version", pa.string()),
    ("schema_version", pa.int32()),
]
RUN_SCHEMA = pa.schema(RUN_COLUMNS)

#: The columns without which a table is not ours (a Delta table of the same name that
#: another tool wrote): every reader and writer relies on them. Columns added later
#: (counts, links) are left out, so that tables made before them still read.
REQUIRED = {
    "results": [name for name, _ in COMMON_COLUMNS if name not in ("solutions", "inequivalent")],
    "runs": [
        "run_id",
        "sweep",
        "state",
        "host",
        "pid",
        "started_at",
        "heartbeat_at",
        "finished_at",
        "planned",
        "skipped",
        "solved",
        "force",
    ],  # fmt: skip
}


def refuse_foreign(uri: str, name: str, columns: list[str]) -> None:
    """Raise BadInput naming table `name` of the catalog at `uri` and the `REQUIRED`
    columns missing from its `columns`: another tool's Delta table at that path."""
    from puzzlesweep.core import BadInput

    if missing := [column for column in REQUIRED[name] if column not in columns]:
        more = f" and {len(missing) - 6} more" if len(missing) > 6 else ""
        raise BadInput(
            f"catalog {uri}: table {name} is not a puzzlesweep {name} table (it has no "
            f"column {', '.join(missing[:6])}{more}); another tool wrote it: use another "
            "catalog"
        )


def integral_values(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with its `INTEGRAL` columns as ints (4.0 → 4). Raises ValueError naming the
    column when a value is not a whole number (Arrow would truncate 4.5 to 4)."""
    row = dict(row)
    for column in INTEGRAL:
        value = whole(row.get(column))
        if value is not None and not isinstance(value, int):
            raise ValueError(f"{column} {value!r} is not a whole number")
        row[column] = value
    return row


def arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type of a parameter annotation (int, float, bool, str, Literal of str,
    list[...], optional X). Raises TypeError for anything else."""
    origin = typing.get_origin(annotation)
    if annotation is int:
        return pa.int64()
    if annotation is float:
        return pa.float64()
    if annotation is bool:
        return pa.bool_()
    if annotation is str or origin is typing.Literal:
        return pa.string()
    if origin is list:
        return pa.list_(arrow_type(typing.get_args(annotation)[0]))
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return arrow_type(inner)
    raise TypeError(f"no Arrow type for parameter annotation {annotation!r}")


def schema(params_model: type) -> pa.Schema:
    """The Arrow schema of one family's rows: common columns, then its parameters.
    Raises ValueError when a parameter reuses a common column's name."""
    fields = [pa.field(name, kind) for name, kind in COMMON_COLUMNS]
    for name, info in params_model.model_fields.items():
        if name in COMMON_NAMES:
            raise ValueError(f"parameter {name!r} reuses a common column's name")
        fields.append(pa.field(name, arrow_type(info.annotation)))
    return pa.schema(fields)
