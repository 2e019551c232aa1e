"""Integral objectives and bounds are integers in rows, in the catalog (schema version 5)
and in `--json`; a catalog of the older double columns still reads and grows."""

import json

import polars as pl
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from puzzlesweep import catalog, puzzles
from puzzlesweep.core import make_params
from puzzlesweep.puzzles import Instance
from puzzlesweep.solve import solve_instance
from puzzlesweep.solvers import Limits
from tests.conftest import cli

DOMINATION = puzzles.get("domination")


def knights(n: int, run_id: str) -> dict:
    """The row of knights n×n, solved; A006075: 4 knights for 4×4, 5 for 5×5."""
    params = make_params(DOMINATION.Params, {"rows": n, "cols": n})
    row = solve_instance(Instance("domination", params), "highs", Limits(30))
    row.update(run_id=run_id, sweep="t", puzzlesweep_version="0")
    return row


def test_rows_and_a_new_catalog_hold_integers(tmp_path):
    row = knights(4, "r1")
    assert (row["objective"], row["bound"]) == (4, 4)
    assert type(row["objective"]) is int and type(row["bound"]) is int
    catalog.write_batch(tmp_path, DOMINATION.Params, [{**row, "schema_version": 5}], "r1-0")
    _, values = catalog.query(
        tmp_path, "SELECT objective, bound, typeof(objective), typeof(bound) FROM results"
    )
    assert values == [(4, 4, "BIGINT", "BIGINT")]
    assert catalog.SCHEMA_VERSION == 5


def test_a_table_of_the_old_double_schema_still_reads_and_new_rows_append(tmp_path):
    # A catalog written before version 5: objective and bound as doubles.
    old_row = {**knights(4, "old"), "schema_version": 4}
    old_schema = catalog.schema(DOMINATION.Params)
    for column in ("objective", "bound"):
        index = old_schema.get_field_index(column)
        old_schema = old_schema.set(index, pa.field(column, pa.float64()))
    flat = {k: v for k, v in old_row.items() if k != "params"} | old_row["params"]
    flat.update(objective=4.0, bound=4.0)
    table = pa.Table.from_pylist([flat], schema=old_schema)
    write_deltalake(str(tmp_path / "results"), table, partition_by=["family"])
    assert catalog.query(tmp_path, "SELECT objective, typeof(objective) FROM results")[1] == [
        (4.0, "DOUBLE")
    ]
    new_row = {**knights(5, "new"), "schema_version": 5}
    assert catalog.write_batch(tmp_path, DOMINATION.Params, [new_row], "new-0")
    _, values = catalog.query(
        tmp_path, "SELECT run_id, objective, bound FROM results ORDER BY objective"
    )
    assert values == [("old", 4.0, 4.0), ("new", 5.0, 5.0)]
    assert catalog.finished(tmp_path) == {
        (old_row["params_key"], "highs", 30.0, None),
        (new_row["params_key"], "highs", 30.0, None),
    }
    # an outside reader sees one table with both rows
    outside = pl.read_delta(str(tmp_path / "results")).sort("objective")
    assert outside["objective"].to_list() == [4.0, 5.0]


def test_a_fractional_objective_is_refused_not_truncated(tmp_path):
    row = {**knights(4, "r1"), "objective": 4.5}
    with pytest.raises(ValueError, match="objective 4.5 is not a whole number"):
        catalog.write_batch(tmp_path, DOMINATION.Params, [row], "r1-0")
    assert not (tmp_path / "results").exists()


def test_json_prints_an_integral_objective_as_an_integer():
    # 4 knights dominate 4×4 (OEIS A006075(4) = 4)
    done = cli("solve", "domination", "rows=4", "cols=4", "--json")
    assert done.returncode == 0
    assert '"objective": 4,' in done.stdout and '"bound": 4,' in done.stdout
    shown = json.loads(done.stdout)
    assert type(shown["objective"]) is int and type(shown["bound"]) is int
