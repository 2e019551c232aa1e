"""Writing results: where a sweep may write (`check_writable`), the columns its families
need made first (`prepare`), and batches of rows appended as one group commit that
carries each batch's application transaction id (`write_batches`), so that a retried
batch is stored once and one writer keeps up with many workers.
"""

import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import pyarrow as pa

from puzzlesweep.catalog.read import CatalogLike, refuse_lost_log
from puzzlesweep.catalog.schema import COMMON_COLUMNS, integral_values, schema
from puzzlesweep.catalog.store import (
    RESULTS,
    RUNS,
    CatalogUnreachable,
    Location,
    append,
    committed_of,
    exists,
    is_table,
    locate,
    open_table,
)
from puzzlesweep.core import BadInput


def default_catalog() -> str:
    """`$PUZZLESWEEP_CATALOG`, else `./results`."""
    return os.environ.get("PUZZLESWEEP_CATALOG", "results")


def resolve(catalog: CatalogLike) -> str:
    """The catalog as a string any process can use: an absolute path for a local
    directory (Dask workers may run in another working directory), else the URL.
    Raises BadInput as `locate` does."""
    return locate(catalog).uri


def check_writable(catalog: CatalogLike) -> Location:
    """The Location of `catalog` if a sweep may write there: a catalog (also one that
    another run is creating), an empty or missing directory, or an object-store URL.
    Raises BadInput (naming what it found) for a directory that holds something else,
    such as a catalog of the old layout, or an object store that refuses (no such
    bucket, wrong keys) or does not answer, CatalogDamaged for results that lost their
    transaction log (`refuse_lost_log`)."""
    location = locate(catalog)
    if not location.local:
        try:
            is_table(location, RESULTS)  # an object store that refuses or does not answer
        except CatalogUnreachable as exc:
            raise BadInput(str(exc)) from None
        return location
    refuse_lost_log(location)
    if exists(location) or not os.path.isdir(location.uri):
        return location
    entries = sorted(os.listdir(location.uri))
    if set(entries) <= {RESULTS, RUNS}:  # empty, or another run creating the catalog now
        return location
    if any(e.startswith("family=") or e == "_runs" for e in entries):
        raise BadInput(
            f"catalog {location.uri} has the old layout (family=*/ Parquet files); "
            f"migrate it first: puzzlesweep catalog migrate {location.uri} NEW_DIR"
        )
    shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
    raise BadInput(f"catalog {location.uri} is a directory of other files ({shown})")


def check_readable(catalog: CatalogLike) -> None:
    """Raise CatalogDamaged, naming the file, when the last commit of `results` or
    `runs` cannot be read (nothing for a table not made yet): a run checks this before
    it starts, rather than meeting it inside its flow."""
    location = locate(catalog)
    for name in (RESULTS, RUNS):
        open_table(location, name)


def _flat(rows: list[dict]) -> list[dict]:
    """Rows with their `params` dict spread into columns."""
    return [{**{k: v for k, v in r.items() if k != "params"}, **r.get("params", {})} for r in rows]


def prepare(catalog: CatalogLike, params_models: Iterable[type]) -> Location:
    """Make sure the results table exists and has the columns of every family whose
    parameter model is in `params_models` (one schema-merge commit when one is missing),
    so that the batches of a run never change the schema while they commit side by
    side. Returns the Location. Raises BadInput as `check_writable` does."""
    location = check_writable(catalog)
    wanted = [schema(model) for model in params_models]
    table = open_table(location, RESULTS)
    have = set(table.schema().to_arrow().names) if table is not None else set()
    missing = [s for s in wanted if not set(s.names) <= have]
    if table is None or missing:
        merged = pa.unify_schemas(missing or [pa.schema(COMMON_COLUMNS)])
        append(location, RESULTS, merged.empty_table(), partition_by=["family"])
    return location


class BatchRows(NamedTuple):
    """The rows of one batch, to be written once: `app_id` (its Delta application
    transaction, e.g. "RUN-00012"), `params_model` (its family's parameter model) and
    `rows` (dicts with the common columns and a `params` dict, all of that family)."""

    app_id: str | None
    params_model: type
    rows: list[dict]


def write_batches(catalog: CatalogLike, batches: Sequence[BatchRows]) -> list[str]:
    """Append the rows of `batches` (of any families) to `results` as one commit that
    carries every batch's `app_id` as a Delta application transaction: a group commit,
    so that one writer keeps up with many workers. A batch whose app id a commit
    already carries is left out (a retried or re-executed batch is stored once).
    Returns the app ids written.

    Raises ValueError for an empty batch, a batch of several families or an objective
    or bound that is not a whole number (`schema.integral_values`), pyarrow's errors for
    values that do not fit the schema, OSError from the storage. A table made before
    schema version 5 keeps its double objective and bound: the values are cast to it."""
    location = locate(catalog)
    for batch in batches:
        if not batch.rows:
            raise ValueError("a batch needs at least one row")
        if len({row["family"] for row in batch.rows}) != 1:
            raise ValueError("every row of a batch must be of one family")
    if not batches:
        return []
    tables = [
        pa.Table.from_pylist(
            _flat([integral_values(row) for row in b.rows]), schema=schema(b.params_model)
        )
        for b in batches
    ]
    table = pa.concat_tables(tables, promote_options="default")
    keys = [row["params_key"] for b in batches for row in b.rows]
    app_ids = [b.app_id for b in batches if b.app_id is not None]
    if append(location, RESULTS, table, app_ids, keys, partition_by=["family"]):
        return app_ids
    # a commit carries some of them already (an earlier attempt, or another writer)
    done = committed_of(location, RESULTS, app_ids)
    return write_batches(catalog, [b for b in batches if b.app_id not in done])


def write_batch(
    catalog: CatalogLike, params_model: type, rows: list[dict], app_id: str | None = None
) -> bool:
    """Append `rows` of one family (`params_model`: its parameter model) to `results`
    as one commit (`write_batches` of one batch). Returns True when written, False when
    `app_id` was already committed. Raises as `write_batches`."""
    return bool(write_batches(catalog, [BatchRows(app_id, params_model, rows)])) or (app_id is None)


def committed(catalog: CatalogLike, app_id: str) -> bool:
    """Has a commit of `results` carried application transaction `app_id`?"""
    return app_id in committed_of(locate(catalog), RESULTS, [app_id])
