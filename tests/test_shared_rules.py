"""Rules that exist once and serve every caller: the cube's lines and symmetries as the
box's, the reported objective and bound of both MIP engines, the memory floor, the done
key and the final status."""

import math
import re

import pytest

from puzzlesweep import catalog, isolate
from puzzlesweep.cli.common import parse_memory
from puzzlesweep.core import DONE_KEY, BadInput, done_key
from puzzlesweep.flows.spec import parse
from puzzlesweep.puzzles import _box, monochromatic_lines, no_k_in_row
from puzzlesweep.solve import solve_instance
from puzzlesweep.solvers import Limits, highs, scip
from puzzlesweep.solvers.mip import MipModel, reported_values
from tests.test_solvers import knapsack

CUBES = [(2, 1), (3, 2), (3, 3), (4, 3), (2, 4), (3, 4)]


@pytest.mark.parametrize(("n", "d"), CUBES)
def test_the_cubes_lines_and_symmetries_are_the_boxs_windows_and_symmetries(n, d):
    # A line of [n]^d is a window of n cells of the box (n,)*d, in the same order
    # along it; there are ((n+2)^d - n^d)/2 of them (Williams 1974: 8 for 3^2, 49 for
    # 3^3), and 2^d·d! symmetries, the identity first.
    cube = (n,) * d
    lines = monochromatic_lines.lines(n, d)
    assert lines == _box.windows(cube, n) == no_k_in_row.windows(cube, n)
    assert len(lines) == ((n + 2) ** d - n**d) // 2
    group = monochromatic_lines.cube_symmetries(n, d)
    assert group == _box.symmetries(cube)
    assert len(group) == 2**d * math.factorial(d) and group[0] == list(range(n**d))


def test_both_engines_report_objective_and_bound_by_one_rule():
    # HiGHS reported 3.9999999999998583 as the proven bound of a 4 (measured): the bound
    # of an integral objective rounds up, the objective to the integer it lies on, and a
    # rounded bound above the incumbent is the incumbent.
    integral = knapsack()
    assert reported_values(integral, "optimal", 4.000000000001, 3.9999999999998583) == (4, 4)
    assert reported_values(integral, "optimal", -9.0, None) == (-9, -9)
    assert reported_values(integral, "time_limit", 64.0, 54.2) == (64, 55)
    assert reported_values(integral, "time_limit", 4.0, 4.0000001) == (4, 4)
    assert reported_values(integral, "infeasible", 3.0, 2.0) == (None, None)
    fractional = MipModel([0.5], [0.0], [1.0], [False], integral_objective=False)
    assert reported_values(fractional, "time_limit", 4.5, 3.2) == (4.5, 3.2)
    # Both engines on the same model: Chvátal's knapsack, -9 (tests/test_solvers.py).
    answers = [engine.solve(knapsack(), Limits(10)) for engine in (highs, scip)]
    assert [(r.status, r.objective, r.bound) for r in answers] == [("optimal", -9, -9)] * 2


def test_the_memory_floor_is_the_solver_processs_everywhere(monkeypatch):
    # `solve` and `run` both take --memory-limit through parse_memory, which refuses a
    # size below the child's own floor, whatever that floor is.
    assert parse_memory("256MiB") == isolate.MIN_MEMORY == 256 * 2**20
    with pytest.raises(BadInput, match=r"--memory-limit 200MiB is below the minimum of 256 MiB"):
        parse_memory("200MiB")
    monkeypatch.setattr(isolate, "MIN_MEMORY", 512 * 2**20)
    with pytest.raises(BadInput, match="below the minimum of 512 MiB"):
        parse_memory("300MiB")
    with pytest.raises(ValueError, match="below the minimum of 512 MiB"):
        isolate.Child(300 * 2**20)


def test_a_memory_limit_is_a_whole_size_within_what_the_kernel_takes():
    # Dask's spellings are read as Dask reads them; what pydantic's ByteSize reads by
    # halves ('1e-3GB' as 1 EB) and what no RLIMIT_DATA can hold are refused.
    assert [parse_memory(t) for t in ("2GiB", "512MB", "1e9", "2 GiB", "2G")] == [
        2 * 2**30,
        512 * 10**6,
        10**9,
        2 * 2**30,
        2 * 10**9,
    ]
    for text in ("1e-3GB", "1e3MB", "MB", "-1GB", "2GB of it"):
        with pytest.raises(BadInput, match=f"--memory-limit '{re.escape(text)}' is not a size"):
            parse_memory(text)
    for text in ("1e30", "99999999TB"):
        with pytest.raises(BadInput, match=f"--memory-limit {text} is above the maximum"):
            parse_memory(text)


def test_a_jobs_done_key_is_its_rows_and_only_a_final_row_makes_it_done(tmp_path):
    # Knights 5×5: 5 knights (OEIS A006075(5)); one job without a node limit (the key
    # holds None), one with.
    sweep = parse(
        'name = "k"\n[[study]]\nfamily = "domination"\nsolver = "highs"\n'
        "[study.grid]\nrows = [5]\ncols = [5]\n"
        '[[study]]\nfamily = "domination"\nsolver = "highs"\nnode_limit = 1000\n'
        "[study.grid]\nrows = [5]\ncols = [5]\n"
    )
    free, capped = sweep.jobs
    rows = [solve_instance(job.instance, job.solver, job.limits) for job in sweep.jobs]
    assert [row["objective"] for row in rows] == [5, 5]
    assert [done_key(row) for row in rows] == [free.done_key, capped.done_key]
    assert free.done_key[3] is None and capped.done_key[3] == 1000
    assert DONE_KEY == ("params_key", "solver", "time_limit", "node_limit")
    family = free.instance.params.__class__
    failed = {**rows[1], "status": "error", "error": "a crash", "objective": None}
    catalog.write_batch(tmp_path, family, [failed], "run-1")
    keys = [free.done_key, capped.done_key]
    assert catalog.finished(tmp_path, keys) == set() == catalog.finished(tmp_path)
    catalog.write_batch(tmp_path, family, [rows[0]], "run-2")
    assert catalog.finished(tmp_path, keys) == {free.done_key} == catalog.finished(tmp_path)
    # a final row wins over a newer error row of the same key in the `latest` view
    catalog.write_batch(tmp_path, family, [rows[1]], "run-3")
    catalog.write_batch(tmp_path, family, [failed], "run-4")
    assert catalog.finished(tmp_path, keys) == set(keys)
    latest = catalog.latest(tmp_path, [free.instance.params_key])
    assert sorted((r["node_limit"] or 0, r["status"]) for r in latest) == [
        (0, "optimal"),
        (1000, "optimal"),
    ]
