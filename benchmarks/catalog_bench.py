"""Benchmark: the Delta Lake catalog against the old layout, side by side, in one run.

    .venv/bin/python benchmarks/catalog_bench.py                    # 10^6 rows, 1,000 commits
    .venv/bin/python benchmarks/catalog_bench.py --rows 100000 --commits 100 --repeat 3

Writes: `--rows` synthetic result rows (the four families' typed parameter columns,
realistic mixes of statuses and solve times) in `--commits` batches of one family each,
with 1, 2 and 4 concurrent writer processes (`spawn`: deltalake is not fork-safe),

- Delta: through the real writer, `catalog.store.append` as `catalog.write_batch` calls
  it (one commit per batch with its application transaction `RUN-NNNNN` and the batch's
  params keys in the commit info), into a table `catalog.prepare` made;
- old layout: one Parquet file per batch, `family=X/part-RUN-NNNNN.parquet`, written
  as the old writer did (temporary name, fsync, rename; zstd);

and counts what arrived: rows, and for Delta every application transaction id (a
commit lost to a race would be missing). Generating the rows is not timed.

Reads, median of `--repeat`, each from scratch as `puzzlesweep catalog query` does
(snapshot, view, query): the three typical queries (optimum by size for knight
domination, counts by status per family, the 20 slowest instances) and the resume
lookup (`catalog.finished` for a 1,000-instance plan, half of it in the catalog), on
the catalog as written and after compaction (Delta: `catalog.compact`, optimize and
vacuum; old layout: one file per family, what the old `catalog compact` left). The old
layout is read as the old code read it: DuckDB `read_parquet([files],
hive_partitioning = true, union_by_name = true)`. Every configuration must give the
same answers; the script checks it. Not part of the test suite.

Measured 2026-12-01 on the 2-core development machine while three other engineers'
test suites ran on it (load average 8 to 12, so read the figures as orders of magnitude):
the full run took 628 s (19 s of it generating the batches). 1,000,000 rows in 1,000
batch commits:

    layout   writers  seconds  commits/s    rows/s  lost     size
    old            1     16.2       61.6    61,630     0   60 MiB
    old            2      9.0      111.3   111,293     0   60 MiB
    old            4      7.4      135.8   135,811     0   60 MiB
    delta          1    136.7        7.3     7,316     0  113 MiB
    delta          2    129.2        7.7     7,743     0  113 MiB
    delta          4    152.5        6.6     6,559     0  113 MiB
    compaction, old: 12.1 s (one file per family), 4 data files left
    compaction, delta: 7.0 s (catalog.compact (optimize + vacuum)), 4 data files left

    reads from scratch, median of 3, ms  old, 1000 files  delta, 1000 files  old, 4  delta, 4
    optimum by size (knights)                       1196               5103       55      355
    counts by status per family                     1433               4668       54      359
    slowest 20 instances                            1804               5019      251      500
    resume: 1,000-instance plan                     1860               6188      208     1329

No commit was lost (every application transaction id is in the log). A Delta commit
costs about 70 ms on a quieter machine, half of it `store.append` opening the table
afresh for every batch; more writers do not commit faster on 2 cores, they serialize on
the log and retry on conflict. A sweep commits once per batch of tens of seconds, so
this is far above its need. Before compaction Delta reads (a pyarrow dataset of 1,000
fragments scanned by DuckDB) are 3-4 times slower than the old DuckDB reader; after
`catalog compact` the three queries take 0.36-0.50 s, and the resume lookup 1.3 s here
at load 12 (0.82 s in an earlier run at load 8; target <= 1 s). The Delta files are
larger: snappy where the old writer used zstd, plus statistics and commit info in the
log.
"""

import argparse
import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import old_layout  # noqa: E402 (beside this script: the layout it is compared with)
import pyarrow as pa

FAMILIES = ["domination", "no_k_in_row", "peg_solitaire", "monochromatic_lines"]
SHARES = [0.4, 0.3, 0.2, 0.1]  # of the commits
STATUSES = ["optimal", "feasible", "infeasible", "time_limit", "node_limit", "error"]
WEIGHTS = [0.70, 0.05, 0.08, 0.14, 0.01, 0.02]
RUNS = 40
EPOCH = np.datetime64("2026-10-28T00:00:00", "us")
WRITERS = (1, 2, 4)

QUERIES = {
    "optimum by size (knights)": (
        "SELECT rows, cols, min(objective) AS best, count(*) AS results FROM results "
        "WHERE family = 'domination' AND piece = 'knight' AND variant = 'dominating' "
        "AND status = 'optimal' GROUP BY ALL ORDER BY ALL"
    ),
    "counts by status per family": (
        "SELECT family, status, count(*) AS results FROM results GROUP BY ALL ORDER BY ALL"
    ),
    "slowest 20 instances": (
        "SELECT family, params_key, solver, solve_seconds FROM results "
        "ORDER BY solve_seconds DESC, params_key LIMIT 20"
    ),
}
RESUME = "resume: 1,000-instance plan"


def family_of(number: int, commits: int) -> str:
    """The family of batch `number`: the first 40 % of the commits are domination, the
    next 30 % no_k_in_row, and so on (`SHARES`)."""
    edges = np.cumsum(SHARES) * commits
    return FAMILIES[int(np.searchsorted(edges, number, side="right"))]


def app_id(number: int) -> str:
    """The application transaction of batch `number`, RUN-NNNNN as a sweep writes it."""
    return f"run-{number % RUNS:03d}-{number:05d}"


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
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        sides = pa.array(rng.integers(3, 21, int(offsets[-1])))
        return {
            "dims": pa.ListArray.from_arrays(pa.array(offsets), sides),
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


def batch(number: int, commits: int, rows: int, seed: int = 1) -> pa.Table:
    """Batch `number` of `commits` (`rows` rows in all), in its family's catalog schema
    (with `family`); the same table for the same arguments in any process."""
    from puzzlesweep import catalog, puzzles

    family = family_of(number, commits)
    n = rows // commits + (number < rows % commits)
    rng = np.random.default_rng([seed, number])
    status = rng.choice(STATUSES, n, p=WEIGHTS)
    objective = rng.integers(1, 200, n).astype(float)
    final = np.isin(status, ["optimal", "feasible", "time_limit", "node_limit"])
    bound = np.where(status == "optimal", objective, objective * rng.uniform(0.7, 1.0, n))
    seconds = np.minimum(rng.lognormal(0.0, 1.5, n), 60.0)
    started = EPOCH + rng.integers(0, 8 * 10**12, n).astype("timedelta64[us]")
    finished = started + (seconds * 1e6).astype("timedelta64[us]")
    keys = [f"{number:05d}{v:011x}" for v in rng.integers(0, 2**44, n)]
    stamp = pa.timestamp("us", tz="UTC")
    columns = {
        "run_id": pa.array([app_id(number).rsplit("-", 1)[0]] * n),
        "sweep": pa.array(["bench"] * n),
        "family": pa.array([family] * n),
        "instance_key": pa.array(keys),
        "params_key": pa.array(keys),
        "equivalent": pa.array(np.zeros(n, dtype=bool)),
        "solver": pa.array(["frontier" if family == "peg_solitaire" else "highs"] * n),
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
        "started_at": pa.array(started).cast(stamp),
        "finished_at": pa.array(finished).cast(stamp),
        "time_limit": pa.array(np.full(n, 60.0)),
        "node_limit": pa.nulls(n, pa.int64()),
        "puzzlesweep_version": pa.array(["0.1.0"] * n),
        "schema_version": pa.array(np.full(n, catalog.SCHEMA_VERSION, dtype=np.int32)),
        **_params(family, n, rng),
    }
    names = catalog.schema(puzzles.get(family).Params).names
    columns = {name: columns.get(name, pa.nulls(n)) for name in names}
    return pa.table(columns, schema=catalog.schema(puzzles.get(family).Params))


# --- writing ---------------------------------------------------------------------------


def write_old(root: str, table: pa.Table, number: int) -> None:
    """The old layout's writer (`old_layout.write`) under batch `number`'s name."""
    old_layout.write(root, table, app_id(number))


def write_delta(root: str, table: pa.Table, number: int) -> bool:
    """One batch through the real writer: `store.append` as `catalog.write_batch` calls
    it. Returns False when its application transaction was already committed."""
    from puzzlesweep.catalog.store import RESULTS, append, locate

    keys = table["params_key"].to_pylist()
    return append(locate(root), RESULTS, table, app_id(number), keys, partition_by=["family"])


def generate(directory: Path, commits: int, rows: int) -> float:
    """Write every batch as an Arrow IPC file `directory/NNNNN.arrow` (the writers of
    every configuration read the same batches); returns the seconds it took."""
    started = time.perf_counter()
    directory.mkdir(parents=True, exist_ok=True)
    for number in range(commits):
        table = batch(number, commits, rows)
        with pa.ipc.new_file(directory / f"{number:05d}.arrow", table.schema) as sink:
            sink.write_table(table)
    return time.perf_counter() - started


def _writer(layout, root, batches, numbers, ready, go, answers) -> None:
    """A writer process: read its batches, wait for the start, write them, and put
    (written, failed, first error) on `answers`."""
    tables = []
    for number in numbers:
        with pa.ipc.open_file(Path(batches) / f"{number:05d}.arrow") as source:
            tables.append((number, source.read_all()))
    write = write_delta if layout == "delta" else write_old
    ready.put(os.getpid())
    go.wait()
    written, failed, error = 0, 0, None
    for number, table in tables:
        try:
            written += write(root, table, number) is not False
        except Exception as exc:  # noqa: BLE001 (a lost commit is what we count)
            failed += 1
            error = error or f"{type(exc).__name__}: {exc}"
    answers.put((written, failed, error))


def write(layout: str, root: str, batches: Path, writers: int, commits: int) -> dict:
    """Write every batch of `batches` into `root` with `writers` processes (batch i goes
    to writer i mod writers); returns {"seconds" (from the start signal to the last
    writer's end), "written", "failed", "error"}."""
    context = multiprocessing.get_context("spawn")
    ready, answers, go = context.Queue(), context.Queue(), context.Event()
    processes = [
        context.Process(
            target=_writer,
            args=(layout, root, str(batches), range(w, commits, writers), ready, go, answers),
        )
        for w in range(writers)
    ]
    for process in processes:
        process.start()
    for _ in processes:
        ready.get(timeout=600)
    started = time.perf_counter()
    go.set()
    results = [answers.get(timeout=3600) for _ in processes]
    seconds = time.perf_counter() - started
    for process in processes:
        process.join()
    return {
        "seconds": seconds,
        "written": sum(r[0] for r in results),
        "failed": sum(r[1] for r in results),
        "error": next((r[2] for r in results if r[2]), None),
    }


def arrived(layout: str, root: str, commits: int) -> tuple[int, int]:
    """(rows in the table, batches whose commit is missing): for Delta, application
    transactions not in the table's log; for the old layout, files not on disk."""
    import duckdb

    if layout == "delta":
        from puzzlesweep.catalog.store import RESULTS, locate, open_table

        table = open_table(locate(root), RESULTS)
        missing = sum(table.transaction_version(app_id(i)) is None for i in range(commits))
        return table.to_pyarrow_dataset().count_rows(), missing
    names = {p.name for p in Path(root).glob("family=*/part-*.parquet")}
    missing = sum(f"part-{app_id(i)}.parquet" not in names for i in range(commits))
    files = old_layout.files(root)
    rows = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet({files!r})").fetchone()
    return rows[0], missing


# --- reading ---------------------------------------------------------------------------


def median_seconds(action, repeat: int) -> tuple[float, object]:
    """(median seconds of `repeat` calls of `action`, its last answer)."""
    times, answer = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        answer = action()
        times.append(time.perf_counter() - started)
    return statistics.median(times), answer


def measure(layout: str, root: str, plan: list[tuple], repeat: int) -> dict:
    """Median seconds and answer of each query and of the resume lookup, each from
    scratch (snapshot or listing, view, query)."""
    from puzzlesweep import catalog

    figures = {}
    for name, sql in QUERIES.items():
        if layout == "delta":
            figures[name] = median_seconds(lambda sql=sql: catalog.query(root, sql)[1], repeat)
        else:
            figures[name] = median_seconds(
                lambda sql=sql: old_layout.connection(root).execute(sql).fetchall(), repeat
            )
    if layout == "delta":
        figures[RESUME] = median_seconds(lambda: catalog.finished(root, plan), repeat)
    else:
        figures[RESUME] = median_seconds(lambda: old_layout.finished(root, plan), repeat)
    return figures


def _size(root: str) -> str:
    total = sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())
    return f"{total / 2**20:.0f} MiB"


def _files(root: str) -> int:
    return sum(1 for p in Path(root).rglob("*.parquet") if "_delta_log" not in p.parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--writers", default=",".join(map(str, WRITERS)), help="comma-separated counts"
    )
    parser.add_argument("--dir", type=Path, help="work here (kept) instead of a temp dir")
    args = parser.parse_args()
    writers = [int(w) for w in args.writers.split(",")]
    base = args.dir or Path(tempfile.mkdtemp(prefix="puzzlesweep-catalog-bench-"))
    from puzzlesweep import catalog, puzzles

    started = time.perf_counter()
    print(f"{args.rows:,} rows in {args.commits:,} batch commits, in {base}", flush=True)
    roots: dict[str, str] = {}
    writes = []
    try:
        seconds = generate(base / "batches", args.commits, args.rows)
        print(f"  generated the batches in {seconds:.1f} s (not timed below)", flush=True)
        for layout in ("old", "delta"):
            for count in writers:
                root = str(base / f"{layout}-{count}")
                shutil.rmtree(root, ignore_errors=True)
                if layout == "delta":
                    catalog.prepare(root, [puzzles.get(f).Params for f in FAMILIES])
                report = write(layout, root, base / "batches", count, args.commits)
                rows, missing = arrived(layout, root, args.commits)
                writes.append((layout, count, report, rows, missing, _size(root)))
                print(
                    f"  {layout:5} {count} writers: {report['seconds']:6.1f} s, {rows:,} rows, "
                    f"{missing} commits missing, {report['failed']} failed "
                    f"{report['error'] or ''}",
                    flush=True,
                )
                if count == writers[0]:
                    roots[layout] = root
                else:
                    shutil.rmtree(root)
        plan = _plan(roots["delta"])
        columns = {}
        for layout in ("old", "delta"):
            files = _files(roots[layout])
            columns[f"{layout}, {files} files"] = measure(layout, roots[layout], plan, args.repeat)
        compacting = {}
        for layout in ("old", "delta"):
            moment = time.perf_counter()
            if layout == "delta":
                catalog.compact(roots[layout], retain_hours=0)
            else:
                old_layout.compact(roots[layout])
            compacting[layout] = (time.perf_counter() - moment, _files(roots[layout]))
        for layout in ("old", "delta"):
            files = _files(roots[layout])
            columns[f"{layout}, compacted ({files})"] = measure(
                layout, roots[layout], plan, args.repeat
            )
        _print(args, writes, compacting, columns)
        print(f"\nwhole benchmark: {time.perf_counter() - started:.0f} s")
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)


def _plan(root: str) -> list[tuple]:
    """1,000 planned (params_key, solver, time limit, node limit): 500 in the catalog
    (any status), 500 not."""
    from puzzlesweep import catalog

    _, rows = catalog.query(
        root,
        "SELECT params_key, solver, time_limit, node_limit FROM results "
        "ORDER BY params_key LIMIT 500",
    )
    return rows + [(f"absent{i:010x}", "highs", 60.0, None) for i in range(500)]


def _print(args, writes, compacting, columns) -> None:
    """The figures as two tables; checks that every configuration gave the same
    answers."""
    first = next(iter(columns.values()))
    for title, figures in columns.items():
        for name, (_, answer) in figures.items():
            assert sorted(answer) == sorted(first[name][1]), f"{name} differs in {title}"
    print(f"\nwrites: {args.rows:,} rows in {args.commits:,} batch commits")
    print(
        f"{'layout':<8}{'writers':>8}{'seconds':>9}{'commits/s':>11}{'rows/s':>10}"
        f"{'lost':>6}{'size':>9}"
    )
    for layout, count, report, rows, missing, size in writes:
        lost = max(missing, round((args.rows - rows) * args.commits / args.rows))
        print(
            f"{layout:<8}{count:>8}{report['seconds']:>9.1f}"
            f"{args.commits / report['seconds']:>11.1f}{rows / report['seconds']:>10,.0f}"
            f"{lost:>6}{size:>9}"
        )
    for layout, (seconds, files) in compacting.items():
        how = "catalog.compact (optimize + vacuum)" if layout == "delta" else "one file per family"
        print(f"compaction, {layout}: {seconds:.1f} s ({how}), {files} data files left")
    names = list(first)
    width = max(len(name) for name in names)
    print(f"\nreads from scratch, median of {args.repeat}, milliseconds")
    print(" " * width + "".join(f"{title:>22}" for title in columns))
    for name in names:
        print(
            f"{name:<{width}}"
            + "".join(f"{figures[name][0] * 1000:22.0f}" for figures in columns.values())
        )


if __name__ == "__main__":
    main()
