"""Benchmark: a catalog of 1,000,000 result rows, and the queries people run on it.

    .venv/bin/python benchmarks/catalog_bench.py                  # 1,000,000 rows, 1,000 files
    .venv/bin/python benchmarks/catalog_bench.py --rows 200000 --files 400 --keep /tmp/cat

Builds a synthetic catalog through the real writer (`store.write_table`: one Parquet file
per batch, temporary name, rename), with the four families' typed parameter columns
and realistic mixes of statuses and solve times; then times, as the median of
`--repeat` runs each:

- opening: a snapshot (commit records + listing) and the DuckDB view;
- optimum by size: the best optimal objective of knight domination by board size;
- counts by status: per family and status;
- slowest instances: the 20 longest solves;
- resume lookup: `catalog.finished`, what every `puzzlesweep run` does before it plans;
- counts by run: the first table of `catalog summary`;

on the catalog as written (many small files) and after `catalog compact`, each with
DuckDB's Parquet reader (local disks) and the pyarrow-dataset scan (object stores),
side by side. Every configuration must give the same answers; the script checks it.
Not part of the test suite.

Measured 2026-11-29 on the 2-core development machine while two other test suites ran
(load average about 6, so read the figures as orders of magnitude): writing 1,000,000
rows in 1,000 files took 13.3 s (55 MiB), `catalog check` 10.0 s, `catalog compact`
22.4 s (1,000 files to 4). Median of 5, milliseconds:

                            1000 files, duckdb  1000 files, arrow  4 files, duckdb  4 files, arrow
  open (snapshot + view)                 608.2             499.7           238.2           79.2
  optimum by size                        926.3             699.6           201.3          431.4
  counts by status                      1164.6             516.2           211.2          645.1
  slowest instances                     1499.1             713.5           442.3          985.0
  counts by run                         1022.5             589.8           424.5          803.3
  resume: 1,000-instance plan           1294.4                 -           637.6              -
  resume: whole catalog                 4952.8                 -          4437.1              -

DuckDB's reader pays per file (`union_by_name` reads every file's schema), so many
small files cost it most; compacted, it is the fastest. Resume looks up only the
planned instances; fetching every finished key into Python costs seconds at this size.
"""

import argparse
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from puzzlesweep import catalog, puzzles
from puzzlesweep.catalog.store import locate, write_table

SHARES = {"domination": 0.4, "no_k_in_row": 0.3, "peg_solitaire": 0.2, "monochromatic_lines": 0.1}
STATUSES = ["optimal", "feasible", "infeasible", "time_limit", "node_limit", "error"]
WEIGHTS = [0.70, 0.05, 0.08, 0.14, 0.01, 0.02]
RUNS = 40

QUERIES = {
    "optimum by size": (
        "SELECT rows, cols, min(objective) AS best, count(*) AS results FROM results "
        "WHERE family = 'domination' AND piece = 'knight' AND variant = 'dominating' "
        "AND status = 'optimal' GROUP BY ALL ORDER BY ALL"
    ),
    "counts by status": (
        "SELECT family, status, count(*) AS results FROM results GROUP BY ALL ORDER BY ALL"
    ),
    "slowest instances": (
        "SELECT family, instance_key, solver, solve_seconds FROM results "
        "ORDER BY solve_seconds DESC, instance_key LIMIT 20"
    ),
    "counts by run": (
        "SELECT run_id, family, count(*) AS results, count(*) FILTER (verified) AS verified, "
        "round(sum(solve_seconds), 3) AS seconds FROM results GROUP BY ALL ORDER BY ALL"
    ),
}


def _params(family: str, n: int, rng: np.random.Generator) -> dict[str, pa.Array]:
    """Typed parameter columns of `n` rows of `family`."""
    if family == "domination":
        return {
            "piece": pa.array(rng.choice(["knight", "king", "queen", "rook", "bishop"], n)),
            "rows": pa.array(rng.integers(1, 41, n)),
            "cols": pa.array(rng.integers(1, 41, n)),
            "variant": pa.array(rng.choice(["dominating", "total", "independent"], n)),
        }
    if family == "no_k_in_row":
        lengths = rng.integers(2, 4, n)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        sides = pa.array(rng.integers(3, 21, int(offsets[-1])))
        return {
            "dims": pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), sides),
            "k": pa.array(rng.integers(3, 7, n)),
        }
    if family == "peg_solitaire":
        return {
            "side": pa.array(rng.integers(4, 8, n)),
            "start": pa.array(rng.integers(1, 29, n)),
            "finish": pa.array(rng.choice(["any", "start"], n)),
            "question": pa.array(rng.choice(["solve", "min_moves"], n)),
        }
    first = rng.integers(1, 14, n)
    offsets = np.arange(0, 2 * n + 1, 2, dtype=np.int32)
    counts = np.column_stack([first, 27 - first]).ravel()
    return {
        "n": pa.array(rng.integers(2, 6, n)),
        "d": pa.array(rng.integers(2, 5, n)),
        "counts": pa.ListArray.from_arrays(pa.array(offsets), pa.array(counts)),
    }


def synthetic(family: str, n: int, rng: np.random.Generator) -> pa.Table:
    """`n` result rows of `family` in its catalog schema (with the `family` column)."""
    status = rng.choice(STATUSES, n, p=WEIGHTS)
    objective = rng.integers(1, 200, n).astype(float)
    final = np.isin(status, ["optimal", "feasible", "time_limit", "node_limit"])
    bound = np.where(status == "optimal", objective, objective * rng.uniform(0.7, 1.0, n))
    seconds = np.minimum(rng.lognormal(0.0, 1.5, n), 60.0)
    started = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=300)
    start_times = [started + timedelta(seconds=float(s)) for s in rng.uniform(0, 8e6, n)]
    columns = {
        "run_id": pa.array([f"run-{i:03d}" for i in rng.integers(0, RUNS, n)]),
        "sweep": pa.array(["bench"] * n),
        "family": pa.array([family] * n),
        "instance_key": pa.array([f"{v:016x}" for v in rng.integers(0, 2**63, n)]),
        "solver": pa.array(["backtrack" if family == "peg_solitaire" else "highs"] * n),
        "solver_version": pa.array(["1.16.0"] * n),
        "status": pa.array(status),
        "objective": pa.array(np.where(final, objective, np.nan), from_pandas=True),
        "bound": pa.array(np.where(final, bound, np.nan), from_pandas=True),
        "gap": pa.array(np.where(final, (objective - bound) / objective, np.nan), from_pandas=True),
        "solve_seconds": pa.array(seconds),
        "nodes": pa.array(rng.integers(0, 100_000, n)),
        "solution": pa.array([",".join(map(str, range(i % 7, i % 7 + 12))) for i in range(n)]),
        "verified": pa.array(final),
        "error": pa.array([None if s != "error" else "RuntimeError: x" for s in status]),
        "worker": pa.array([f"tcp://10.0.0.{i}:40000" for i in rng.integers(1, 9, n)]),
        "started_at": pa.array(start_times, pa.timestamp("us", tz="UTC")),
        "finished_at": pa.array(
            [t + timedelta(seconds=float(s)) for t, s in zip(start_times, seconds, strict=True)],
            pa.timestamp("us", tz="UTC"),
        ),
        "time_limit": pa.array([60.0] * n),
        "node_limit": pa.nulls(n, pa.int64()),
        "puzzlesweep_version": pa.array(["0.1.0"] * n),
        "schema_version": pa.array([1] * n, pa.int32()),
        **_params(family, n, rng),
    }
    return pa.table(columns, schema=catalog.schema(puzzles.get(family).Params))


def build(root: Path, rows: int, files: int, seed: int = 1) -> float:
    """Write `rows` rows in `files` files under `root`; returns the seconds the writing
    took (generating the rows not counted)."""
    rng = np.random.default_rng(seed)
    location = locate(root)
    tables = {
        family: synthetic(family, round(rows * share), rng) for family, share in SHARES.items()
    }
    started = time.perf_counter()
    number = 0
    for family, share in SHARES.items():
        table, parts = tables[family], max(1, round(files * share))
        count = table.num_rows
        step = -(-count // parts)
        for offset in range(0, count, step):
            chunk = table.slice(offset, step)
            name = catalog.batch_name(chunk["run_id"][0].as_py(), number)
            write_table(location, chunk, "", name, partition="family")
            number += 1
    return time.perf_counter() - started


def median_seconds(action, repeat: int) -> tuple[float, object]:
    """(median seconds of `repeat` calls of `action`, its last answer)."""
    times, answer = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        answer = action()
        times.append(time.perf_counter() - started)
    return statistics.median(times), answer


def measure(root: Path, engine: str, repeat: int) -> dict[str, tuple[float, object]]:
    """Median seconds (and the answer) of opening and of each query, on one engine."""
    figures = {
        "open (snapshot + view)": median_seconds(lambda: catalog.connect(root, engine), repeat)
    }
    connection = catalog.connect(root, engine)
    for name, sql in QUERIES.items():
        figures[name] = median_seconds(lambda sql=sql: connection.sql(sql).fetchall(), repeat)
    if engine == "duckdb":  # what `run` calls; it always opens the catalog's default way
        keys = connection.sql(
            "SELECT instance_key, solver, time_limit, node_limit FROM results LIMIT 500"
        ).fetchall()
        plan = keys + [(f"{i:016x}", "highs", 60.0, None) for i in range(500)]
        figures["resume: 1,000-instance plan"] = median_seconds(
            lambda: catalog.finished(root, plan), repeat
        )
        figures["resume: whole catalog"] = median_seconds(lambda: catalog.finished(root), repeat)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="build here and keep it (else a temp dir)")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="puzzlesweep-bench-")) / "results"
    if root.exists():
        shutil.rmtree(root)
    try:
        seconds = build(root, args.rows, args.files)
        files = len(catalog.files(root))
        print(
            f"built {args.rows:,} rows in {files} files in {seconds:.1f} s "
            f"({args.rows / seconds:,.0f} rows/s), {_size(root)}"
        )
        columns = {}
        for engine in ("duckdb", "arrow"):
            columns[f"{files} files, {engine}"] = measure(root, engine, args.repeat)
        check_seconds, problems = median_seconds(lambda: catalog.check(root), 1)
        assert problems == [], problems
        compact_seconds, report = median_seconds(lambda: catalog.compact(root, grace_seconds=0), 1)
        merged = len(catalog.files(root))
        print(
            f"catalog check (reads every file): {check_seconds:.1f} s; catalog compact: "
            f"{compact_seconds:.1f} s, {files} files -> {merged}, {_size(root)}"
        )
        for engine in ("duckdb", "arrow"):
            columns[f"{merged} files, {engine}"] = measure(root, engine, args.repeat)
        _print(columns, args.repeat)
    finally:
        if not args.keep:
            shutil.rmtree(root.parent)


def _size(root: Path) -> str:
    total = sum(p.stat().st_size for p in root.rglob("*.parquet"))
    return f"{total / 2**20:.0f} MiB"


def _print(columns: dict[str, dict[str, tuple[float, object]]], repeat: int) -> None:
    """The figures side by side (median of `repeat` runs, milliseconds); checks that
    every configuration gave the same answers."""
    names = list(next(iter(columns.values())))
    first = next(iter(columns.values()))
    for figures in columns.values():
        for name, (_, answer) in figures.items():
            if name in QUERIES:
                assert sorted(answer) == sorted(first[name][1]), f"{name} differs"
    width = max(len(n) for n in names)
    print(f"\nmedian of {repeat} runs, milliseconds")
    print(" " * width + "".join(f"{title:>22}" for title in columns))
    for name in names:
        cells = [
            f"{figures[name][0] * 1000:22.1f}" if name in figures else f"{'-':>22}"
            for figures in columns.values()
        ]
        print(f"{name:<{width}}" + "".join(cells))


if __name__ == "__main__":
    main()
