"""Benchmark: does a sweep get faster with every worker? (issue 36)

    .venv/bin/python benchmarks/scale_bench.py                      # every workload, 2,4,8,16
    .venv/bin/python benchmarks/scale_bench.py --workloads sleep --workers 16 \\
        --instances 4000 --sleep-ms 20
    .venv/bin/python benchmarks/scale_bench.py --workloads tiny,medium --workers 2 --json
    .venv/bin/python benchmarks/scale_bench.py --huge --huge-limit 900

Workloads (each a sweep spec this script writes, and the same instances enumerated here
through the families' public protocol, `puzzles.get(...).expand` and `make_params`):

- `sleep`: `--instances N` instances of the synthetic family `sleep`
  (benchmarks/sleep_family/, registered through the entry point group
  `puzzlesweep.families`), each sleeping `--sleep-ms M` while its model is built, then a
  trivial one-variable MIP. Its solving costs no CPU, so 16 workers on 2 cores measure
  fan-out. The family is installed by this script with `pip install --target` into its
  scratch folder, which goes on PYTHONPATH for every process it starts (never into
  .venv: an installed family is checked by the whole contract suite and listed by
  `puzzlesweep families`, which `make test` expects to hold the built-in ones).
- `tiny`: benchmarks/overhead_bench.py's sweep, 2,035 distinct canonical instances of
  milliseconds to a second each (`no_k_in_row` lines and k = 5 boards, `domination` of
  kings, bishops and knights), time limit 10 s.
- `medium`: `domination`, 5 pieces × 3 variants, rows and cols 4..9: 540 instances, 315
  classes (a transposed board is one class; the sweep solves one per class), 60 s limit.

For each workload and each of `--workers`, side by side in one run, in this order:

1. `puzzlesweep run SPEC --workers N` (the CLI, a new process as a user starts it, no
   Prefect API configured, so it starts its temporary one) into a fresh catalog, stopped
   with a Ctrl-C after `--limit` seconds when one is given; a run the CLI refuses (exit
   2) is reported in one line and the cell ends there, a run that fails or is stopped
   is reported with how far it got;
2. the baseline: a bare `multiprocessing.Pool(workers)` (fork) calling
   `puzzlesweep.solve.solve_instance` once per class (build, solve, verify), timed from
   the pool's creation to its last result; for `sleep`, the ideal time instead,
   instances × ms / workers (and the CPU of one solve call in this process, for scale);
3. plain Dask: a `LocalCluster` of N one-thread worker processes, warmed (each imports
   the solve path), then `client.map` of one call per batch over the same classes cut
   into as many batches as the run made (the `runs` view's `batches`), each call
   solving its batch in the worker process; timed from the map to the last result
   (`plain_dask_s`, None past `--limit`; `plain_dask_wall_s` adds the cluster's start
   and close).

Definitions (as benchmarks/overhead_bench.py has them): **steady state** is the run's
manifest's `started_at` to its `finished_at` (the `runs` view: planning, every batch,
every commit); **start-up** is the process's launch to `started_at` (imports, the
temporary Prefect API, the cluster); **wall** is the whole process, launch to exit, and
shut-down what is left. All are read through the catalog query (`catalog.query`) and
the process's own clock; nothing of `flows/` is used, so the script measures any
version of the run behind the same CLI.

CPU: the run's process tree is sampled every `--interval` seconds with psutil (each
process's own user + system seconds, its latest sample kept after it exits), and each
process is counted as one kind: `run` (the CLI's process), `api` (the temporary Prefect
API), `workers` (Dask worker processes: the fork server's children), `solvers` (anything
a worker starts: the solver child processes), `other` (the fork server, the resource
tracker). `unattributed` is the whole tree's CPU as the kernel reports it when the run
is reaped (`os.wait4`: the run and every descendant it and they waited for) less the
samples: what processes spent between their last sample and their exit.
`orchestration_cpu_ms_per_instance` is the whole tree's CPU less the solving, per
instance, where the solving is the CPU the pool's calls spent on the same classes
(`time.process_time` around each `solve_instance`; zero for `sleep`): everything the
sweep spends that a bare pool does not. `run_rss_mib` is the run process's peak
resident memory (`VmHWM`). `rows` is the distinct instances (`params_key`) in the
catalog afterwards; the script checks them against the enumeration, and that every
instance both sides prove optimal has the same objective.

`--huge`: the sleep workload at 100,000 instances of 1 ms on 8 workers
(`--max-instances 100000`), the run alone, bounded by `--huge-limit` seconds (then a
Ctrl-C, then SIGKILL): planned, solved and committed figures from the `runs` view, rows
and duplicates in the catalog, the run's peak RSS, and a count query's time in a fresh
process (`catalog.query(path, "SELECT count(*) FROM results")`, the query alone).

The machine's load average is printed beside every figure. Not part of the test suite;
figures measured here are in benchmarks/README.md ("scale_bench.py").
"""

import argparse
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil
import toml
from overhead_bench import TINY_BOARDS  # benchmarks/ is on sys.path: scripts run from it

HERE = Path(__file__).resolve().parent
FAMILY_PROJECT = HERE / "sleep_family"
ENV = {"DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
KINDS = ("run", "api", "workers", "solvers", "other")


@dataclass
class Study:
    """One `[[study]]`: a family, its limit, and a grid of explicit values per key."""

    family: str
    grid: dict[str, list]
    time_limit: float = 60

    def spec(self) -> dict:
        """The study as TOML data: one value as a scalar, a run of consecutive integers
        as the range "a..b", other values as a list."""
        grid = {}
        for key, values in self.grid.items():
            whole = all(type(v) is int for v in values)
            consecutive = (
                whole and len(values) > 2 and values == list(range(values[0], values[-1] + 1))
            )
            grid[key] = f"{values[0]}..{values[-1]}" if consecutive else values
            grid[key] = values[0] if len(values) == 1 else grid[key]
        return {"family": self.family, "time_limit": self.time_limit, "grid": grid}


@dataclass(frozen=True)
class Job:
    """One instance of a workload: its family, params, canonical params, keys (as
    `puzzlesweep.core.instance_key` makes them), solver and time limit."""

    family: str
    params: object
    canonical: object
    key: str
    params_key: str
    solver: str
    time_limit: float


@dataclass
class Workload:
    """A named sweep: its studies, and its sleep time when its baseline is the ideal."""

    name: str
    studies: list[Study]
    sleep_ms: int | None = None
    max_instances: int | None = None
    instances: list[Job] = field(default_factory=list)  # filled by `expand`

    def spec_text(self) -> str:
        return toml.dumps({"name": self.name, "study": [s.spec() for s in self.studies]})


def sleep_workload(instances: int, ms: int) -> Workload:
    """`instances` sleep instances of `ms` milliseconds each."""
    study = Study("sleep", {"item": list(range(instances)), "ms": [ms]})
    return Workload("sleep", [study], sleep_ms=ms, max_instances=max(instances, 20_000))


def tiny_workload() -> Workload:
    """benchmarks/overhead_bench.py's sweep: one study per (family, fixed parameters, first
    side), every instance its own canonical form (first side <= second side)."""
    studies = [
        Study("no_k_in_row", {"dims": [n], "k": list(range(2, n + 1))}, 10) for n in range(2, 51)
    ]
    for a in range(2, 26):
        dims = [[a, b] for b in range(max(a, 5), 26)]
        studies.append(Study("no_k_in_row", {"dims": dims, "k": [5]}, 10))
    for (piece, variant), (most_rows, most_cols) in TINY_BOARDS.items():
        for rows in range(1, most_rows + 1):
            grid = {"piece": [piece], "variant": [variant], "rows": [rows]}
            grid["cols"] = list(range(rows, most_cols + 1))
            studies.append(Study("domination", grid, 10))
    return Workload("tiny", studies)


def medium_workload() -> Workload:
    """domination, 5 pieces × 3 variants, rows and cols 4..9: 540 instances."""
    grid = {
        "piece": ["knight", "king", "queen", "rook", "bishop"],
        "variant": ["dominating", "total", "independent"],
        "rows": list(range(4, 10)),
        "cols": list(range(4, 10)),
    }
    return Workload("medium", [Study("domination", grid, 60)])


def expand(workload: Workload) -> None:
    """Fill `workload.instances`: every grid point through its family's `expand` and
    `Params`, as a sweep does (raises what `make_params` raises for a bad value). The
    family module is looked up once per study, not per instance."""
    from puzzlesweep import puzzles
    from puzzlesweep.core import instance_key, make_params

    for study in workload.studies:
        family = puzzles.get(study.family)
        keys = list(study.grid)
        for values in itertools.product(*study.grid.values()):
            for raw in family.expand(dict(zip(keys, values, strict=True))):
                params = make_params(family.Params, raw)
                canonical = family.canonical(params)
                job = Job(
                    study.family,
                    params,
                    canonical,
                    instance_key(study.family, canonical),
                    instance_key(study.family, params),
                    family.SOLVERS[0],
                    study.time_limit,
                )
                workload.instances.append(job)


def classes(workload: Workload) -> list[Job]:
    """One job per class (instance key), its canonical form, in order of first sight."""
    seen = {}
    for job in workload.instances:
        seen.setdefault(job.key, job)
    return list(seen.values())


def solve_one(job: Job) -> tuple[str, str, float | None, float]:
    """(instance key, status, objective, CPU seconds of the call) of one class, its
    canonical form solved and verified in this process."""
    from puzzlesweep.puzzles import Instance
    from puzzlesweep.solve import solve_instance
    from puzzlesweep.solvers import Limits

    cpu = time.process_time()
    row = solve_instance(Instance(job.family, job.canonical), job.solver, Limits(job.time_limit))
    return job.key, row["status"], row["objective"], time.process_time() - cpu


def solve_batch(jobs: list[Job]) -> list[tuple]:
    """`solve_one` of each job, in this (Dask worker) process."""
    return [solve_one(job) for job in jobs]


def pool_run(jobs: list[Job], workers: int) -> dict:
    """The bare pool: seconds from its creation to its last result, the answers by
    instance key, and the CPU seconds its calls spent solving."""
    import puzzlesweep.solve  # noqa: F401  (imported once, before the fork)

    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        results = pool.map(solve_one, jobs)
    seconds = time.perf_counter() - started
    answers = {key: (status, objective) for key, status, objective, _ in results}
    return {"seconds": seconds, "answers": answers, "cpu": sum(r[3] for r in results)}


def warm() -> None:
    """Import the solve path in a Dask worker (the run's workers warm up likewise)."""
    import puzzlesweep.solve  # noqa: F401
    import puzzlesweep.solvers.highs  # noqa: F401


def plain_dask(jobs: list[Job], workers: int, batches: int, limit: float) -> dict:
    """Plain Dask: a LocalCluster of `workers` one-thread processes, warmed, then one
    `client.map` call per batch (the jobs dealt round-robin into `batches`), waited for
    at most `limit` seconds (0: no limit). Returns the map's seconds to the last result
    (None past the limit), the whole seconds (cluster start to close), the answers and
    how many batches were done."""
    from distributed import Client, LocalCluster, wait

    began = time.perf_counter()
    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    with cluster, Client(cluster) as client:
        client.run(warm)
        cut = [jobs[n::batches] for n in range(batches) if jobs[n::batches]]
        started = time.perf_counter()
        futures = client.map(solve_batch, cut, pure=False)
        done, _ = wait(futures, timeout=limit or None, return_when="ALL_COMPLETED")
        seconds = time.perf_counter() - started if len(done) == len(futures) else None
        results = [r for future in done for r in future.result()]
        client.cancel(futures)
    answers = {key: (status, objective) for key, status, objective, _ in results}
    return {
        "seconds": seconds,
        "wall": time.perf_counter() - began,
        "answers": answers,
        "done": f"{len(done)} of {len(cut)} batches",
    }


def solve_call_cpu(jobs: list[Job], sample: int = 20) -> float:
    """CPU milliseconds of one `solve_one` call in this process, the mean over the first
    `sample` jobs after one to warm up: what the solve path costs by itself."""
    solve_one(jobs[0])
    started = time.process_time()
    for job in jobs[:sample]:
        solve_one(job)
    return 1000 * (time.process_time() - started) / len(jobs[:sample])


def kind_of(process: psutil.Process, root: int, kinds: dict) -> str:
    """The kind of a process of the run's tree (see the module's docstring), from its
    command line and its parent's kind."""
    try:
        line = " ".join(process.cmdline())
        parent = process.ppid()
    except psutil.Error:
        return "other"
    parent_kind, parent_line = kinds.get(parent, ("other", ""))
    if process.pid == root:
        return "run"
    if parent_kind in ("workers", "solvers"):
        return "solvers"
    if "flows.api" in line or "prefect" in line and "server" in line:
        return "api"
    if "forkserver" in parent_line or "spawn_main" in line:
        return "workers"
    return "other"


class Tree:
    """The CPU seconds of a process tree by kind, sampled; and its root's peak RSS."""

    def __init__(self, root: int):
        self.root = root
        self.kinds: dict[int, tuple[str, str]] = {}  # pid -> (kind, command line)
        self.cpu: dict[tuple[int, float], tuple[str, float]] = {}  # (pid, start) -> kind, s
        self.peak_rss = 0

    def sample(self) -> None:
        """Read every process of the tree once (those that exited keep their last)."""
        try:
            top = psutil.Process(self.root)
            processes = [top, *top.children(recursive=True)]
        except psutil.Error:
            return
        for process in processes:
            try:
                if process.pid not in self.kinds:
                    kind = kind_of(process, self.root, self.kinds)
                    self.kinds[process.pid] = (kind, " ".join(process.cmdline()))
                times = process.cpu_times()
                key = (process.pid, process.create_time())
                self.cpu[key] = (self.kinds[process.pid][0], times.user + times.system)
            except psutil.Error:
                continue
        self.peak_rss = max(self.peak_rss, _hwm(self.root))

    def by_kind(self) -> dict[str, float]:
        totals = dict.fromkeys(KINDS, 0.0)
        for kind, seconds in self.cpu.values():
            totals[kind] += seconds
        return totals


def _hwm(pid: int) -> int:
    """VmHWM (peak resident bytes) of `pid`, 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def sweep_run(workload: Workload, work: Path, workers: int, args) -> dict:
    """`puzzlesweep run` of the workload's spec into a fresh catalog, its tree sampled;
    stopped with a Ctrl-C after `args.limit` seconds (then SIGKILL after 60 s). Returns
    its wall seconds, exit code, CPU by kind, the whole tree's CPU and its peak RSS."""
    spec = work / f"{workload.name}.toml"
    spec.write_text(workload.spec_text())
    results = work / f"results-{workload.name}-{workers}"
    command = [sys.executable, "-m", "puzzlesweep.cli", "run", str(spec)]
    command += ["--catalog", str(results), "--workers", str(workers)]
    command += ["--dashboard-address", "127.0.0.1:0"]
    if workload.max_instances:
        command += ["--max-instances", str(workload.max_instances)]
    env = {**os.environ, **ENV}
    env.pop("PREFECT_API_URL", None)
    log = work / f"run-{workload.name}-{workers}.log"
    launched = datetime.now(UTC)
    started = time.perf_counter()
    with log.open("w") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    tree, usage, status, stopped = Tree(process.pid), None, None, None
    while usage is None:
        tree.sample()
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid == 0:
            usage = None
            elapsed = time.perf_counter() - started
            if args.limit and elapsed > args.limit and stopped is None:
                stopped = elapsed
                process.send_signal(signal.SIGINT)
            elif stopped is not None and elapsed > stopped + 60:
                process.kill()
            time.sleep(args.interval)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    return {
        "results": results,
        "launched": launched,
        "wall": wall,
        "code": process.returncode,
        "stopped": stopped,
        "log": log.read_text()[-3000:],
        "cpu": tree.by_kind(),
        "tree_cpu": usage.ru_utime + usage.ru_stime,
        "rss": tree.peak_rss,
    }


def read_run(run: dict) -> dict:
    """The run's manifest and rows, read back with the catalog query."""
    from puzzlesweep import catalog

    path = str(run["results"])
    try:
        columns, manifests = catalog.query(path, "SELECT * FROM runs")
    except Exception as exc:  # no catalog: the run never got as far as its manifest
        return {"manifest": None, "why": str(exc).splitlines()[0]}
    manifest = dict(zip(columns, manifests[0], strict=True)) if manifests else None
    _, rows = catalog.query(path, "SELECT params_key, instance_key, status, objective FROM results")
    return {"manifest": manifest, "rows": rows}


def check(workload: Workload, read: dict, answers: dict | None) -> dict:
    """Distinct instances in the catalog, duplicates, errors; raises SystemExit when the
    catalog's instances are not the enumeration's or an optimum differs from the pool's."""
    rows = read.get("rows") or []
    keys = {row[0] for row in rows}
    expected = {job.params_key for job in workload.instances}
    if keys - expected:
        raise SystemExit(f"{workload.name}: {len(keys - expected)} rows of unknown instances")
    differ = [
        key
        for _, key, status, objective in rows
        if answers
        and status == "optimal" == answers.get(key, ("",))[0]
        and objective != answers[key][1]
    ]
    if differ:
        raise SystemExit(f"{workload.name}: {len(differ)} optima differ from the pool's")
    statuses = {}
    for row in rows:
        statuses[row[2]] = statuses.get(row[2], 0) + 1
    return {"rows": len(keys), "duplicates": len(rows) - len(keys), "statuses": statuses}


def same(workload: Workload, plain: dict, pool: dict | None, partial: bool) -> None:
    """Plain Dask answered every class (unless `partial`), with the pool's optimum
    wherever both proved one; raises SystemExit otherwise."""
    if not partial and len(plain) != len(classes(workload)):
        raise SystemExit(f"{workload.name}: plain Dask answered {len(plain)} classes")
    both = [k for k, (status, _) in plain.items() if pool and status == "optimal" == pool[k][0]]
    if any(plain[k][1] != pool[k][1] for k in both):
        raise SystemExit(f"{workload.name}: plain Dask's optima differ from the pool's")


def figures(workload: Workload, workers: int, run: dict, read: dict, solving: float) -> dict:
    """The run's figures: times from the manifest, CPU per instance by kind (ms), per
    instance in the catalog when the run was stopped (its solving CPU scaled alike)."""
    n = len(workload.instances)
    if run["code"] != 0:  # stopped by the limit, or failed: per instance it committed
        done = read.get("done") or len({row[0] for row in read.get("rows") or []})
        solving, n = solving * done / n, done
    manifest = read["manifest"] or {}
    first, last = manifest.get("started_at"), manifest.get("finished_at")
    startup = (first - run["launched"]).total_seconds() if first else None
    steady = (last - first).total_seconds() if first and last else None
    cpu = dict(run["cpu"])
    sampled = sum(cpu.values())
    cpu["unattributed"] = max(0.0, run["tree_cpu"] - sampled)
    whole = max(run["tree_cpu"], sampled)

    def per(seconds: float) -> float | None:  # ms per instance; None when none was done
        return round(1000 * seconds / n, 3) if n else None

    return {
        "workload": workload.name,
        "workers": workers,
        "instances": len(workload.instances),
        "steady_s": steady,
        "wall_s": run["wall"],
        "startup_s": startup,
        "shutdown_s": run["wall"] - startup - steady if steady is not None else None,
        "batches": manifest.get("batches"),
        "exit_code": run["code"],
        "cpu_ms_per_instance": {k: per(v) for k, v in cpu.items()},
        "cpu_s_by_kind": {k: round(v, 2) for k, v in cpu.items()},
        "cpu_s": round(whole, 2),
        "solving_cpu_s": round(solving, 2),
        "orchestration_cpu_ms_per_instance": per(whole - solving),
        "run_rss_mib": round(run["rss"] / 2**20, 1),
    }


def cell(workload: Workload, workers: int, work: Path, args) -> dict:
    """One workload at one worker count: the run, the baseline, plain Dask. Returns its
    figures; a run stopped by `--limit`, or one that fails, is reported with how far it
    got (and its last line), one the CLI refuses (exit 2, bad input) with its one line
    and no baseline or plain Dask."""
    jobs = classes(workload)
    run = sweep_run(workload, work, workers, args)
    if run["code"] == 2:
        why = run["log"].strip().splitlines()[-1]
        return {"workload": workload.name, "workers": workers, "refused": why}
    if workload.sleep_ms is not None:
        pool = {"seconds": len(jobs) * workload.sleep_ms / 1000 / workers, "cpu": 0.0}
        pool.update(answers=None, call=solve_call_cpu(jobs))
    else:
        pool = pool_run(jobs, workers)
        pool["call"] = 1000 * pool["cpu"] / len(jobs)
    read = read_run(run)
    found = check(workload, read, pool["answers"])
    shown = figures(workload, workers, run, read, pool["cpu"])
    plain = plain_dask(jobs, workers, shown["batches"] or 4 * workers, args.limit)
    same(workload, plain["answers"], pool["answers"], plain["seconds"] is None)
    shutil.rmtree(run["results"], ignore_errors=True)
    progress = [line for line in run["log"].splitlines() if "instances" in line]
    return {
        **shown,
        "baseline": "ideal" if pool["answers"] is None else "pool",
        "baseline_s": round(pool["seconds"], 3),
        "solve_call_cpu_ms": round(pool["call"], 2),
        "plain_dask_s": plain["seconds"] and round(plain["seconds"], 3),
        "plain_dask_wall_s": round(plain["wall"], 3),
        "plain_dask_done": plain["done"],
        "stopped_after_s": run["stopped"],
        "last_progress": progress[-1].strip() if progress else None,
        "failed": run["log"].strip().splitlines()[-1]
        if run["code"] and not run["stopped"]
        else None,
        **found,
        "load": [round(x, 2) for x in os.getloadavg()],
    }


def install_family(work: Path) -> None:
    """Install benchmarks/sleep_family into `work/site` (pip, from its pyproject.toml) and
    put it on this process's path and on PYTHONPATH for the processes started later."""
    site = work / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    done = subprocess.run(
        [*command, "--target", str(site), str(FAMILY_PROJECT)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"pip could not install {FAMILY_PROJECT}:\n{done.stderr[-2000:]}")
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(site), os.environ.get("PYTHONPATH", "")])
    )


def _s(seconds: float | None, base: float | None = None) -> str:
    """Seconds as text, with their ratio to `base` when both are known."""
    if seconds is None:
        return "not reached"
    return f"{seconds:.1f} s" + (f" ({seconds / base:.2f}x)" if base else "")


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def show(shown: dict) -> str:
    """A cell's figures as three lines of text (one for a refused run)."""
    if "refused" in shown:
        return f"{shown['workload']}, {shown['workers']} workers: refused: {shown['refused']}"
    base, plain, steady = shown["baseline_s"], shown["plain_dask_s"], shown["steady_s"]
    against = f", {steady / plain:.2f}x plain Dask" if steady and plain else ""
    times = (
        f"  {shown['baseline']} {base:.1f} s | plain Dask {_s(plain, base)}"
        f" | steady {_s(steady, base)}{against} | start-up {_s(shown['startup_s'])}"
        f" | wall {_s(shown['wall_s'], base)} | plain Dask whole {_s(shown['plain_dask_wall_s'])}"
        f" | {shown['batches']} batches"
    )
    if shown["stopped_after_s"]:
        times += (
            f"\n  run stopped after {shown['stopped_after_s']:.0f} s at: {shown['last_progress']}"
        )
        times += f"; plain Dask {shown['plain_dask_done']}"
    cpu = ", ".join(f"{k} {_ms(v)}" for k, v in shown["cpu_ms_per_instance"].items())
    return (
        f"{shown['workload']}, {shown['workers']} workers, {shown['instances']} instances"
        f" (load {' '.join(map(str, shown['load']))})\n{times}\n"
        f"  CPU ms per instance: {cpu}; orchestration"
        f" {_ms(shown['orchestration_cpu_ms_per_instance'])} ms (whole tree {shown['cpu_s']} s,"
        f" solving {shown['solving_cpu_s']} s; one solve call in-process"
        f" {shown['solve_call_cpu_ms']} ms); run peak RSS {shown['run_rss_mib']} MiB;"
        f" rows {shown['rows']} ({shown['duplicates']} duplicates) {shown['statuses']}"
    )


def count_query(results: Path) -> dict:
    """A count query over the catalog in a fresh process: (rows, seconds of the query
    alone, seconds of the whole process)."""
    code = (
        "import sys, time\nfrom puzzlesweep import catalog\nt = time.perf_counter()\n"
        "_, rows = catalog.query(sys.argv[1], 'SELECT count(*) FROM results')\n"
        "print(rows[0][0], time.perf_counter() - t)"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, str(results)], capture_output=True, text=True, timeout=300
    )
    whole = time.perf_counter() - started
    if done.returncode != 0:
        return {"count": None, "query_s": None, "process_s": whole, "why": done.stderr[-500:]}
    count, seconds = done.stdout.split()
    return {"count": int(count), "query_s": float(seconds), "process_s": whole}


def huge(work: Path, args) -> dict:
    """100,000 sleep instances of 1 ms on 8 workers, the run alone, bounded by
    `args.huge_limit` seconds: its figures, how far it got, and a count query's time."""
    from puzzlesweep import catalog

    workload = sleep_workload(100_000, 1)
    expand(workload)
    args.limit = args.huge_limit
    run = sweep_run(workload, work, 8, args)
    read = {"manifest": None}
    try:
        columns, manifests = catalog.query(str(run["results"]), "SELECT * FROM runs")
        read["manifest"] = dict(zip(columns, manifests[0], strict=True)) if manifests else None
        sql = "SELECT count(*), count(DISTINCT params_key) FROM results"
        _, ((total, distinct),) = catalog.query(str(run["results"]), sql)
    except Exception as exc:  # no catalog, or no results table yet
        total = distinct = 0
        read["why"] = str(exc).splitlines()[0]
    read["done"] = distinct
    shown = figures(workload, 8, run, read, 0.0)
    manifest = read["manifest"] or {}
    progress = [line for line in run["log"].splitlines() if "instances" in line]
    shown.update(
        planned=manifest.get("planned"),
        solved=manifest.get("solved"),
        state=manifest.get("state"),
        rows=distinct,
        duplicates=total - distinct,
        stopped_after_s=run["stopped"],
        last_progress=progress[-1].strip() if progress else None,
        count=count_query(run["results"]) if total else None,
        why=read.get("why"),
        load=[round(x, 2) for x in os.getloadavg()],
    )
    return shown


def main() -> None:
    """Parse the options, run every cell (or `--huge`), print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="sleep,tiny,medium", help="comma-separated")
    parser.add_argument("--workers", default="2,4,8,16", help="comma-separated counts")
    parser.add_argument("--instances", type=int, default=4000, help="sleep instances")
    parser.add_argument("--sleep-ms", type=int, default=20, help="each sleep instance's ms")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--huge", action="store_true", help="100,000 sleeps of 1 ms, 8 workers")
    parser.add_argument("--huge-limit", type=float, default=900, help="seconds, then Ctrl-C")
    parser.add_argument(
        "--limit", type=float, default=0, help="seconds per run and per plain Dask (0: none)"
    )
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between samples")
    args = parser.parse_args()
    makers = {
        "sleep": lambda: sleep_workload(args.instances, args.sleep_ms),
        "tiny": tiny_workload,
        "medium": medium_workload,
    }
    names = args.workloads.split(",")
    if unknown := [n for n in names if n not in makers]:
        parser.error(f"--workloads: unknown {', '.join(unknown)}; known: {', '.join(makers)}")
    work = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    try:
        install_family(work)
        if args.huge:
            report(huge(work, args), args.json)
            return
        for name in names:
            workload = makers[name]()
            expand(workload)
            for workers in map(int, args.workers.split(",")):
                report(cell(workload, workers, work, args), args.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(shown: dict, as_json: bool) -> None:
    """Print one cell: a JSON line, or text."""
    if as_json:
        print(json.dumps(shown, default=str), flush=True)
    elif "count" in shown:
        print(json.dumps(shown, default=str, indent=1), flush=True)
    else:
        print(show(shown), flush=True)


if __name__ == "__main__":
    main()
