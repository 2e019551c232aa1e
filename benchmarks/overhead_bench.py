"""Benchmark: what Prefect + Dask + the catalog cost over a bare `multiprocessing.Pool`.

    .venv/bin/python benchmarks/overhead_bench.py                 # adaptive, 50, 10
    .venv/bin/python benchmarks/overhead_bench.py --sizes adaptive --workers 2

One sweep of small instances (2,035 distinct canonical instances: `no_k_in_row` on lines
of 2..50 cells with every k, and with k = 5 on 2-D boards up to 25×25; `domination` of
kings, bishops and knights on boards up to 12×22; a few milliseconds to about a
second each, 10 s at most) is solved

1. by a bare `multiprocessing.Pool(workers)` calling `solve_instance` (build, solve,
   verify: the same call a worker's child process makes) over every instance, timed
   from the pool's creation to the last result;
2. by `puzzlesweep run` (a new process, as a user starts it) into an empty catalog, once
   per batch-size setting: `adaptive` (the default, flows/batches.py) and fixed
   `--batch-size N`;

in `--repeat` interleaved rounds (this machine's speed drifts by 10-20% from one
minute to the next), and the medians are compared. Each round also times, as whole
processes, a one-instance sweep (`puzzlesweep run` into an empty catalog) beside the
plainest Prefect + prefect-dask flow (`PLAIN_FLOW`: one trivial task on a
`DaskTaskRunner`, with Prefect's own temporary API), the start-up a user waits for
either way.

Each round also runs the same jobs in the plainest Prefect + prefect-dask sweep
(`PLAIN_SWEEP`: as many tasks as the adaptive run had batches, each solving its jobs in
its Dask worker and logging one INFO line per instance; no child process, no catalog),
the row `plain`: what Prefect tasks on Dask cost by themselves. And it times alone, in
fresh processes, the pieces no one-instance sweep can do without (`FLOORS`: Prefect's
import, the temporary API's start, a LocalCluster's start and close).

For each run it prints the wall time, split by the run's manifest (`runs` view) into
start-up (process start to the flow's first step: imports, temporary Prefect API,
LocalCluster), steady state (manifest started_at to finished_at: planning, every
batch, every Parquet file) and shut-down (the summary table, the cluster and the API
stopping); and the ratio of the median steady state to the median pool time. Both must
give the same objective for every instance both prove optimal; the script checks it.

Targets: whole wall <= 1.3x the pool, steady state <= 1.1x, a one-instance sweep
<= 0.3x the plain flow. Figures measured on this machine are in benchmarks/README.md.
Not part of the test suite.
"""

import argparse
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from statistics import median

from puzzlesweep import catalog
from puzzlesweep.flows.spec import load

SPEC = """
name = "overhead"
{studies}
"""
STUDY = """
[[study]]
family = "{family}"
time_limit = 10
[study.grid]
{grid}
"""


ONE = """
name = "one"
[[study]]
family = "domination"
[study.grid]
piece = "knight"
rows = 4
cols = 4
"""
PLAIN_FLOW = """
from prefect import flow, task
from prefect_dask import DaskTaskRunner


@task
def trivial():
    return 1


@flow(task_runner=DaskTaskRunner(cluster_kwargs={"n_workers": 1, "dashboard_address": None}))
def plain():
    return trivial.submit().result()


if __name__ == "__main__":
    assert plain() == 1
"""


PLAIN_SWEEP = """
import functools, sys, time

from prefect import flow, get_run_logger, task
from prefect_dask import DaskTaskRunner

STARTED = time.perf_counter()


@functools.cache
def jobs(spec):
    from puzzlesweep.flows.spec import load

    return load(spec).jobs


@task
def solve(spec, number, batches):
    from puzzlesweep.solve import solve_instance

    logger = get_run_logger()
    for job in jobs(spec)[number::batches]:
        row = solve_instance(job.instance, job.solver, job.limits)
        logger.info("%s: %s, objective %s", row["params_key"], row["status"], row["objective"])
    return number


def main(spec, batches, workers):
    runner = DaskTaskRunner(
        cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "dashboard_address": None}
    )

    @flow(task_runner=runner)
    def plain_sweep():
        began = time.perf_counter()
        futures = [solve.submit(spec, n, batches) for n in range(batches)]
        assert sorted(f.result() for f in futures) == list(range(batches))
        print(began - STARTED, time.perf_counter() - STARTED)

    plain_sweep()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
"""


#: The tiny sweep's domination boards: (piece, variant) -> (most rows, most columns).
TINY_BOARDS = {
    ("king", "dominating"): (12, 22),
    ("king", "independent"): (12, 22),
    ("bishop", "dominating"): (8, 12),
    ("knight", "dominating"): (8, 10),
}


def spec_text() -> str:
    """The benchmark's sweep: one study per (family, fixed parameters, first side), so
    that every instance is its own canonical form (first side <= second side)."""
    studies = []
    for n in range(2, 51):  # 1-D lines: the smallest models there are
        studies.append(STUDY.format(family="no_k_in_row", grid=f'dims = {n}\nk = "2..{n}"'))
    for a in range(2, 26):
        grid = f"dims = [{', '.join(f'[{a}, {b}]' for b in range(max(a, 5), 26))}]\nk = 5"
        studies.append(STUDY.format(family="no_k_in_row", grid=grid))
    for (piece, variant), (most_rows, most_cols) in TINY_BOARDS.items():
        for rows in range(1, most_rows + 1):
            grid = f'piece = "{piece}"\nvariant = "{variant}"\nrows = {rows}\n'
            studies.append(
                STUDY.format(family="domination", grid=grid + f'cols = "{rows}..{most_cols}"')
            )
    return SPEC.format(studies="".join(studies))


def _solve(job) -> tuple[str, str, float | None]:
    """(params_key, status, objective) of one job, solved and verified in this process."""
    from puzzlesweep.solve import solve_instance

    row = solve_instance(job.instance, job.solver, job.limits)
    return row["params_key"], row["status"], row["objective"]


def pool_run(jobs: list, workers: int) -> tuple[float, dict]:
    """(seconds from the pool's creation to its last result, {params_key: (status,
    objective)})."""
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        results = pool.map(_solve, jobs)
    seconds = time.perf_counter() - started
    return seconds, {key: (status, objective) for key, status, objective in results}


def sweep_run(spec: Path, results: Path, workers: int, size: str) -> dict:
    """Run `puzzlesweep run` once into the empty catalog `results`; returns wall,
    startup, steady and shutdown seconds, the number of batches and the answers."""
    command = [sys.executable, "-m", "puzzlesweep.cli", "run", str(spec)]
    command += ["--catalog", str(results), "--workers", str(workers)]
    command += ["--dashboard-address", "127.0.0.1:0"]
    if size != "adaptive":
        command += ["--batch-size", size]
    env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    began = datetime.now(UTC)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"puzzlesweep run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    _, ((first, last, batches),) = catalog.query(
        results, "SELECT started_at, finished_at, batches FROM runs"
    )
    _, rows = catalog.query(results, "SELECT params_key, status, objective FROM results")
    return {
        "wall": wall,
        "startup": (first - began).total_seconds(),
        "steady": (last - first).total_seconds(),
        "shutdown": wall - (last - began).total_seconds(),
        "batches": batches,
        "answers": {key: (status, objective) for key, status, objective in rows},
    }


def whole_process(command: list[str], env: dict) -> float:
    """Seconds from starting `command` to its exit (which must be 0)."""
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{command[:4]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def one_instance(work: Path, round_: int) -> tuple[float, float]:
    """(seconds of a one-instance `puzzlesweep run`, seconds of `PLAIN_FLOW`), each a
    whole process started as a user starts it, with no Prefect API configured."""
    env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    (work / "one.toml").write_text(ONE)
    (work / "plain.py").write_text(PLAIN_FLOW)
    results = work / f"one-{round_}"
    command = [sys.executable, "-m", "puzzlesweep.cli", "run", str(work / "one.toml")]
    command += ["--catalog", str(results), "--workers", "1"]
    ours = whole_process(command + ["--dashboard-address", "127.0.0.1:0"], env)
    shutil.rmtree(results)
    return ours, whole_process([sys.executable, str(work / "plain.py")], env)


def plain_sweep(spec: Path, work: Path, batches: int, workers: int) -> dict:
    """Run `PLAIN_SWEEP` once: the same jobs in `batches` tasks of the plainest Prefect +
    prefect-dask flow (a `DaskTaskRunner` on a LocalCluster of `workers` processes,
    Prefect's own temporary API), each task solving its jobs in its worker with
    `solve_instance` and logging one INFO line per instance: the floor that any sweep
    made of Prefect tasks on Dask with per-instance log lines stands on (no child
    process, no catalog, no progress). Returns wall, startup, steady, shutdown seconds."""
    env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    (work / "plain_sweep.py").write_text(PLAIN_SWEEP)
    command = [sys.executable, str(work / "plain_sweep.py"), str(spec), str(batches)]
    started = time.perf_counter()
    done = subprocess.run(command + [str(workers)], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the plain sweep failed ({done.returncode}):\n{done.stderr[-3000:]}")
    first, last = map(float, done.stdout.split()[-2:])
    return {
        "wall": wall,
        "startup": first,
        "steady": last - first,
        "shutdown": wall - last,
        "batches": batches,
    }


FLOORS = {
    "import Prefect's engine and prefect-dask": "import prefect.flow_engine, prefect_dask",
    "temporary Prefect API, launch to /health": (
        "from puzzlesweep.flows.api import TemporaryAPI\n"
        "api = TemporaryAPI()\napi.url()\napi.stop()"
    ),
    "LocalCluster of 1 worker process, start and close": (
        "from distributed import LocalCluster\n"
        "LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None).close()"
    ),
}


def floors() -> dict[str, float]:
    """Seconds of each piece a one-instance sweep cannot do without (`FLOORS`), each
    timed alone in a fresh process from before its first import to its end."""
    env = {**os.environ, "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    timed = "import time\nt = time.perf_counter()\n{}\nprint(time.perf_counter() - t)"
    seconds = {}
    for name, code in FLOORS.items():
        done = subprocess.run(
            [sys.executable, "-c", timed.format(code)], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-2000:]
        seconds[name] = float(done.stdout.split()[-1])
    return seconds


def sweep_round(spec: Path, work: Path, jobs: list, workers: int, sizes, round_: int):
    """One round: the pool, then one sweep per batch size (their answers checked
    against the pool's), then the one-instance pair. Returns (pool seconds, {size:
    run}, (ours, plain))."""
    seconds, answers = pool_run(jobs, workers)
    print(f"round {round_ + 1}: pool {seconds:.1f} s", end="", flush=True)
    runs = {}
    for size in sizes:
        results = work / f"results-{size}-{round_}"
        run = runs[size] = sweep_run(spec, results, workers, size)
        shutil.rmtree(results)
        print(f", {size} {run['steady']:.1f} s steady", end="", flush=True)
        differ = [
            key
            for key, (status, objective) in run["answers"].items()
            if status == "optimal" == answers[key][0] and objective != answers[key][1]
        ]
        assert len(run["answers"]) == len(jobs), "every instance once"
        assert not differ, f"{len(differ)} answers differ from the pool's"
    batches = runs[sizes[0]]["batches"]
    runs["plain"] = plain_sweep(spec, work, batches, workers)
    print(f", plain {runs['plain']['steady']:.1f} s steady", end="", flush=True)
    one = one_instance(work, round_)
    print(f", one instance {one[0]:.1f} s, plain flow {one[1]:.1f} s", flush=True)
    return seconds, runs, one


def main() -> None:
    """Parse the options, run `--repeat` interleaved rounds, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="processes on both sides")
    parser.add_argument(
        "--sizes", default="adaptive,50,10", help="batch sizes: adaptive and/or numbers"
    )
    parser.add_argument("--repeat", type=int, default=3, help="rounds of pool + every size")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="overhead-bench-"))
    try:
        spec = work / "overhead.toml"
        spec.write_text(spec_text())
        jobs = load(str(spec)).jobs
        assert len({job.instance.key for job in jobs}) == len(jobs), "instances must be distinct"
        print(f"{len(jobs)} distinct instances, {args.workers} processes", flush=True)
        sizes = args.sizes.split(",")
        rounds = [sweep_round(spec, work, jobs, args.workers, sizes, r) for r in range(args.repeat)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    pools = [pool for pool, _, _ in rounds]
    pool = median(pools)
    print(f"\npool: {', '.join(f'{p:.1f}' for p in pools)} s; median {pool:.1f} s")
    print(f"medians of {args.repeat} rounds:")
    header = f"{'batch size':>10} {'batches':>8} {'wall s':>8} {'start-up s':>11}"
    header += f" {'steady s':>9} {'shut-down s':>12} {'steady / pool':>14}"
    print(header + f" {'start-up / pool':>16} {'wall / pool':>12}")
    for size in [*sizes, "plain"]:
        done = [runs[size] for _, runs, _ in rounds]
        m = {key: median(run[key] for run in done) for key in done[0] if key != "answers"}
        print(
            f"{size:>10} {m['batches']:>8.0f} {m['wall']:>8.1f} {m['startup']:>11.1f}"
            f" {m['steady']:>9.1f} {m['shutdown']:>12.1f} {m['steady'] / pool:>14.2f}"
            f" {m['startup'] / pool:>16.2f} {m['wall'] / pool:>12.2f}"
        )
    ours, plain = (median(one[i] for _, _, one in rounds) for i in (0, 1))
    print(
        f"one instance: puzzlesweep run {ours:.1f} s, plain Prefect + prefect-dask flow "
        f"{plain:.1f} s, ratio {ours / plain:.2f} (target 0.3: {0.3 * plain:.1f} s)"
    )
    print("pieces a one-instance sweep cannot do without, each alone in a fresh process:")
    for name, seconds in floors().items():
        print(f"  {name}: {seconds:.1f} s")


if __name__ == "__main__":
    main()
