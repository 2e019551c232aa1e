"""Benchmark: the run's own stop machinery against what Prefect and Dask do alone, side by
side, in one run. Not part of the test suite; it prints figures, it asserts nothing.

    .venv/bin/python benchmarks/stop_bench.py                 # both parts, 4 runs each
    .venv/bin/python benchmarks/stop_bench.py --part freeze --runs 6
    .venv/bin/python benchmarks/stop_bench.py --part watch --runs 1 --patience 240

Part `freeze` (`puzzlesweep.cli.stopping._freeze_local_workers`): `puzzlesweep run` of
24 small domination boards in batches of one on a LocalCluster of 2 workers, SIGINT to
its process group 0 to 1.5 s after its first commit, with the local workers frozen
(SIGSTOP, as shipped) and without (`_freeze_local_workers` replaced by a no-op: what
is left is the workers' own exit when their nanny's process ends; the workers never
commit, the run's one writer does). Per run: exit
code, seconds from the signal to the exit, lines on stderr, a traceback, and the rows
the run committed after its `runs` row was written (its rows in `results`, counted 5 s
after the exit, minus the row's `solved`).

Part `watch` (`puzzlesweep.flows.probes.Watch`): `puzzlesweep run` of eight boxes that
each stop at their 3 s limit, in batches of one, and mid-run (after its first commit)
either its temporary Prefect API process is SIGKILLed (`api`) or the `dask scheduler`
of `--address` is (`scheduler`, a scheduler and one worker started here). With the
watch (as shipped), without it (`flows.flight.Watch` replaced by a no-op), and without
it but with Prefect's client retries off (`PREFECT_CLIENT_MAX_RETRIES=0`, for the API)
or Dask's connect timeout at 4 s (`DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=4s`, for
the scheduler). Per run: exit code, seconds from the kill to the exit (a run still
going after `--patience` seconds is killed and shown as `>N`), lines on stderr, and
whether one of them is a traceback.

The variants run the real CLI (`python -c` that patches the one function, then calls
`puzzlesweep.cli.main`); the shipped code is not changed.
"""

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

SMALL_BOARDS = """
name = "small"
[[study]]
family = "domination"
time_limit = 10
[study.grid]
rows = [3, 4, 5, 6]
cols = [3, 4, 5, 6, 7, 8]
"""
SLOW_BOXES = """
name = "slow"
[[study]]
family = "no_k_in_row"
time_limit = 3
[study.grid]
dims = [[6, 7, 6], [6, 7, 7], [6, 8, 6], [7, 7, 7], [6, 8, 7], [7, 8, 7], [6, 9, 6], [8, 8, 6]]
k = 5
"""
MAIN = "from puzzlesweep.cli import main; main()"
NO_FREEZE = "import puzzlesweep.cli.stopping as s; s._freeze_local_workers = lambda: []; "
NO_WATCH = (
    "import contextlib, puzzlesweep.flows.flight as f; "
    "f.Watch = lambda *a, **k: contextlib.nullcontext(); "
)


def command(patch: str, *args: str) -> list[str]:
    """`puzzlesweep ARGS` in a fresh interpreter, after `patch` (Python source)."""
    return [sys.executable, "-c", patch + MAIN, *args]


def start(argv: list[str], env: dict, work: Path, name: str) -> subprocess.Popen:
    """`argv` in its own session, stdout and stderr in WORK/NAME.out and .err."""
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=open(work / f"{name}.out", "w"),  # noqa: SIM115 (closed at exit)
        stderr=open(work / f"{name}.err", "w"),  # noqa: SIM115
        start_new_session=True,
    )


def rows(results: Path) -> int:
    from puzzlesweep import catalog

    try:
        return catalog.query(results, "SELECT count(*) FROM results")[1][0][0]
    except Exception:  # noqa: BLE001 (no table yet)
        return 0


def wait_rows(results: Path, process: subprocess.Popen, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while rows(results) == 0:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"no first commit (exit {process.poll()})")
        time.sleep(0.1)


def ended(process: subprocess.Popen, since: float, patience: float) -> tuple[str, str, bool]:
    """(exit code, seconds since `since`, whether a process of its session was still
    alive 5 s after it ended) once `process` ends; killed with its session after
    `patience` seconds (then the seconds read `>N`)."""
    try:
        code = process.wait(timeout=max(0.0, since + patience - time.monotonic()))
        seconds = f"{time.monotonic() - since:.1f}"
    except subprocess.TimeoutExpired:
        code, seconds = None, f">{patience:g}"
    time.sleep(5)  # a worker still alive would commit, or print, by now
    try:
        os.killpg(process.pid, 0)
        left = True
        os.killpg(process.pid, signal.SIGKILL)  # what it left behind (its session)
    except ProcessLookupError:
        left = False
    if code is None:
        process.wait()
    return str(code), seconds, left


def stderr_of(work: Path, name: str, mark: str) -> tuple[int, int, bool]:
    """(lines on stderr, those after the first line that contains `mark`, whether one
    of them says Traceback)."""
    lines = [line for line in (work / f"{name}.err").read_text().splitlines() if line.strip()]
    at = next((i for i, line in enumerate(lines) if mark in line), len(lines) - 1)
    return len(lines), len(lines) - at - 1, any("Traceback" in line for line in lines)


def freeze_run(work: Path, env: dict, variant: str, index: int) -> list[str]:
    """One interrupted run of the small boards; the table row of its figures."""
    from puzzlesweep import catalog

    name = f"freeze-{variant}-{index}"
    spec, results = work / "small.toml", work / name
    spec.write_text(SMALL_BOARDS)
    args = ("run", str(spec), "--catalog", str(results), "--workers", "2", "--batch-size", "1")
    patch = NO_FREEZE if variant == "dask" else ""
    process = start(command(patch, *args, "--dashboard-address", "127.0.0.1:0"), env, work, name)
    wait_rows(results, process)
    time.sleep(random.uniform(0, 1.5))
    signalled = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)
    code, seconds, left = ended(process, signalled, 60)
    _, [(run_id, state, solved)] = catalog.query(results, "SELECT run_id, state, solved FROM runs")
    _, [(held,)] = catalog.query(results, "SELECT count(*) FROM results WHERE run_id = ?", [run_id])
    lines, after, traceback = stderr_of(work, name, "Ctrl-C: stopping")
    figures = [state, solved, held - solved, lines, after, traceback, left]
    return [variant, code, seconds, *map(str, figures)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cluster(work: Path, name: str) -> tuple[str, list[subprocess.Popen]]:
    """A `dask scheduler` and one single-threaded `dask worker` on 127.0.0.1."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    common = ["--no-dashboard", "--host", "127.0.0.1"]
    dask = str(BIN / "dask")
    scheduler = start(
        [dask, "scheduler", "--port", str(port), *common], os.environ, work, name + "-s"
    )
    worker = start(
        [dask, "worker", address, "--nthreads", "1", *common], os.environ, work, name + "-w"
    )
    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(1, timeout=90)
    return address, [worker, scheduler]


def watch_run(work: Path, env: dict, lost: str, variant: str, index: int, patience: float):
    """One run whose API or scheduler (`lost`) is killed after its first commit."""
    import psutil

    name = f"watch-{lost}-{variant}-{index}"
    spec, results = work / "slow.toml", work / name
    spec.write_text(SLOW_BOXES)
    args = ["run", str(spec), "--catalog", str(results), "--batch-size", "1"]
    env = dict(env)
    if variant == "settings" and lost == "api":
        env["PREFECT_CLIENT_MAX_RETRIES"] = "0"
    if variant == "settings" and lost == "scheduler":
        env["DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT"] = "4s"
    servers = []
    if lost == "api":
        env.pop("PREFECT_API_URL", None)  # the run's own temporary API
        args += ["--workers", "2", "--dashboard-address", "127.0.0.1:0"]
    else:
        address, servers = cluster(work, name)
        args += ["--address", address]
    process = start(command("" if variant == "watch" else NO_WATCH, *args), env, work, name)
    try:
        wait_rows(results, process)
        if lost == "api":
            (victim,) = [
                child
                for child in psutil.Process(process.pid).children()
                if "puzzlesweep.flows.api" in " ".join(child.cmdline())
            ]
            killed = time.monotonic()
            victim.kill()
        else:
            killed = time.monotonic()
            servers[-1].kill()
        code, seconds, left = ended(process, killed, patience)
    finally:
        for server in servers:
            server.kill()
            server.wait()
    lines, after, traceback = stderr_of(work, name, "error:")
    return [f"{lost}/{variant}", code, seconds, *map(str, (lines, after, traceback, left))]


def table(header: list[str], rows_: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows_]) for i in range(len(header))]
    for row in [header, *rows_]:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["freeze", "watch", "both"], default="both")
    parser.add_argument("--runs", type=int, default=4, help="runs of each variant")
    parser.add_argument("--patience", type=float, default=180, help="seconds before a kill")
    options = parser.parse_args()
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from puzzlesweep.flows.api import TemporaryAPI

    work = Path(tempfile.mkdtemp(prefix="stop-bench-"))
    print(f"logs in {work}")
    with TemporaryAPI() as api, temporary_settings(updates={PREFECT_API_URL: api.url()}):
        env = {**os.environ, "PREFECT_API_URL": api.url()}
        if options.part in ("freeze", "both"):
            found = [
                freeze_run(work, env, variant, i)
                for i in range(options.runs)
                for variant in ("sigstop", "dask")
            ]
            header = ["variant", "exit", "seconds", "state", "solved", "rows after"]
            header += ["stderr", "lines after", "traceback", "left"]
            table(header, found)
        if options.part in ("watch", "both"):
            found = [
                watch_run(work, env, lost, variant, i, options.patience)
                for lost in ("api", "scheduler")
                for i in range(options.runs)
                for variant in ("watch", "none", "settings")
            ]
            header = ["lost/variant", "exit", "seconds", "stderr", "lines after", "traceback"]
            table([*header, "left"], found)


if __name__ == "__main__":
    main()
