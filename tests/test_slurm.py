"""deploy/slurm on a real one-node SLURM (Debian's slurmctld, slurmd and munge on
127.0.0.1, `servers.Slurm`, which starts, runs a job, stops and starts again writing
nothing outside its own folder): `sbatch deploy/slurm/sweep.sbatch SPEC CATALOG` as a
user runs it, its driver job submitting two worker jobs through dask-jobqueue; a worker
job cancelled mid-run loses nothing, a cancelled driver ends its run `interrupted` and
takes its worker jobs with it. The fast test checks the scripts' syntax and options."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from puzzlesweep import catalog

from .conftest import ROOT, each_once_at_its_limit, slow_boxes
from .servers import Slurm, wait_for

SCRIPT = ROOT / "deploy" / "slurm" / "sweep.sbatch"
DRIVER = ROOT / "deploy" / "slurm" / "sweep_on_slurm.py"


def test_the_scripts_parse_and_name_their_options():
    assert SCRIPT.read_text().startswith("#!/bin/bash")
    assert subprocess.run(["bash", "-n", SCRIPT]).returncode == 0
    # The driver's help works without dask-jobqueue (imported after parsing).
    done = subprocess.run([sys.executable, DRIVER, "--help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for option in ("--jobs", "--partition", "--account", "--memory", "--walltime", "--interface"):
        assert option in done.stdout


#: A run that counts the SIGTERMs it gets and stops 2 s after the first, as
#: `puzzlesweep run` stops (a second would make it exit at once).
STOPPING_RUN = """
import signal, sys, time
seen = []
signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(time.monotonic()))
print("ready", flush=True)
while not seen or time.monotonic() - seen[0] < 2:
    time.sleep(0.05)
print(f"SIGTERM seen {len(seen)} times", flush=True)
sys.exit(143)
"""


def driver_waiting(forward_seconds: float) -> subprocess.Popen:
    """sweep_on_slurm.run_until_done on STOPPING_RUN in a process group of its own,
    once the run is ready; the run's output on stdout."""
    code = (
        f"import sys; sys.path.insert(0, {str(DRIVER.parent)!r}); import sweep_on_slurm as d; "
        f"d.FORWARD_SECONDS = {forward_seconds}; "
        f"sys.exit(d.run_until_done([sys.executable, '-c', {STOPPING_RUN!r}]))"
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert "ready" in driver.stdout.readline()
    return driver


def test_the_driver_waits_for_the_run_to_stop_and_forwards_a_signal_only_it_got():
    # scancel: every process of the job gets SIGTERM; the run gets exactly one.
    driver = driver_waiting(forward_seconds=5)
    os.killpg(driver.pid, signal.SIGTERM)
    out, _ = driver.communicate(timeout=60)
    assert (driver.returncode, re.findall(r"seen (\d+) times", out)) == (143, ["1"]), out
    assert "the run ended, exit code 143" in out and "sent to it" not in out
    # `kill DRIVER` alone: the signal reaches the run FORWARD_SECONDS later.
    driver = driver_waiting(forward_seconds=0.5)
    driver.send_signal(signal.SIGTERM)
    out, _ = driver.communicate(timeout=60)
    assert (driver.returncode, re.findall(r"seen (\d+) times", out)) == (143, ["1"]), out
    assert "0.5 s after the signal: sent to it" in out


#: Where SLURM and munge keep their state, keys, sockets and logs by default: a test
#: cluster writes none of them.
DEFAULT_PLACES = [
    *("/etc/slurm", "/etc/munge", "/var/log/slurm", "/var/log/munge", "/var/lib/munge"),
    *("/var/spool/slurmd", "/var/spool/slurmctld", "/run/munge", "/run/slurm", "/run/slurmd"),
]


def default_places() -> dict[str, list[tuple[str, int]]]:
    """Each of DEFAULT_PLACES with what it holds (path, mtime in ns), or None."""
    found = {}
    for place in map(Path, DEFAULT_PLACES):
        if place.exists():
            found[str(place)] = sorted((str(p), p.stat().st_mtime_ns) for p in place.rglob("*"))
        else:
            found[str(place)] = None
    return found


@pytest.mark.slow
def test_a_one_node_slurm_starts_runs_a_job_and_starts_again(tmp_path):
    before = default_places()
    for attempt in (1, 2):  # the second on the same machine, as a second test run would
        root = Path(tempfile.mkdtemp(prefix="puzzlesweep-slurm-"))
        started = time.monotonic()
        cluster = Slurm(root).start()
        try:
            up = time.monotonic() - started
            out = tmp_path / f"job-{attempt}.out"
            done = cluster.command(
                *("sbatch", "--wait", f"--output={out}", "--wrap"),
                'echo "job $SLURM_JOB_ID of $SLURM_CLUSTER_NAME, conf $SLURM_CONF"',
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            job = done.stdout.split()[-1]  # "Submitted batch job N"
            assert out.read_text() == f"job {job} of puzzlesweep-test, conf {cluster.conf}\n"
            assert cluster.jobs() == []
        finally:
            cluster.stop()
        print(f"attempt {attempt}: node idle {up:.1f} s after the start, job {job} ran")
        assert not [name for name, process in cluster.processes.started if process.poll() is None]
        shutil.rmtree(root)
    assert default_places() == before


@pytest.fixture(scope="module")
def slurm():
    """A one-node SLURM for this module's tests, in a folder of its own."""
    root = Path(tempfile.mkdtemp(prefix="puzzlesweep-slurm-"))
    started = time.monotonic()
    cluster = Slurm(root).start()
    print(f"SLURM up (node idle) in {time.monotonic() - started:.1f} s")
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def submit(slurm: Slurm, folder: Path, spec: str) -> str:
    """`sbatch deploy/slurm/sweep.sbatch spec.toml results --jobs 2 ...` from `folder`
    (the user's working folder, holding slurm-logs/), the driver starting its own Prefect
    server; returns the driver's job id."""
    (folder / "slurm-logs").mkdir()
    (folder / "spec.toml").write_text(spec)
    env = {**os.environ, **slurm.env, "PUZZLESWEEP_HOME": str(ROOT)}
    env["PREFECT_HOME"] = str(folder / "prefect-home")
    env.pop("PREFECT_API_URL", None)
    options = ["--jobs", "2", "--memory", "1GiB", "--interface", "lo", "--batch-size", "1"]
    done = subprocess.run(
        ["sbatch", "--parsable", SCRIPT, "spec.toml", "results", *options],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def rows(results: Path) -> int:
    """Rows in the catalog's results (0 before the first commit)."""
    if not (results / "results" / "_delta_log").exists():
        return 0
    _, [(count,)] = catalog.query(results, "SELECT count(*) FROM results")
    return count


def workers(slurm: Slurm) -> list[str]:
    """The job ids of dask-jobqueue's worker jobs (named puzzlesweep) running now."""
    done = slurm.command("squeue", "--noheader", "--name=puzzlesweep", "--states=R", "-o", "%i")
    return done.stdout.split()


def driver_log(folder: Path, job: str) -> str:
    return (folder / "slurm-logs" / f"driver-{job}.out").read_text(errors="replace")


def run_states(results: Path) -> list[str]:
    _, found = catalog.query(results, "SELECT state FROM runs")
    return [state for (state,) in found]


@pytest.mark.slow
def test_a_sweep_submitted_with_sbatch_survives_a_cancelled_worker_job(slurm, tmp_path):
    started = time.monotonic()
    job = submit(slurm, tmp_path, slow_boxes("slurm-workers", time_limit=10))
    results = tmp_path / "results"
    # Mid-run: a batch committed, both worker jobs running, instances left to solve.
    wait_for("a first commit", lambda: rows(results) >= 1 and len(workers(slurm)) == 2, 600, 1)
    assert rows(results) < 8
    cancelled = workers(slurm)[0]
    assert slurm.command("scancel", cancelled).returncode == 0
    cancelled_at = time.monotonic()
    wait_for("the driver job to end", lambda: job not in slurm.jobs(), 900, 2)
    ended = time.monotonic()
    wait_for(f"squeue to be empty: {slurm.jobs()}", lambda: not slurm.jobs(), 60, 1)
    print(
        f"sweep submitted, worker {cancelled} cancelled at {cancelled_at - started:.0f} s, "
        f"driver ended at {ended - started:.0f} s, "
        f"squeue empty {time.monotonic() - ended:.0f} s later"
    )
    log = driver_log(tmp_path, job)
    assert re.search(r"Prefect flow run: http://\S+/runs/flow-run/[0-9a-f-]{36}", log), log
    assert re.search(r"Dask dashboard: http://127\.0\.0\.1:\d+/status", log), log
    assert "sweep_on_slurm: the run ended, exit code 0" in log, log[-3000:]
    each_once_at_its_limit(results, 8)  # no instance lost with the worker, none twice
    assert run_states(results) == ["finished"]


@pytest.mark.slow
def test_a_cancelled_driver_job_ends_its_run_interrupted_and_its_worker_jobs(slurm, tmp_path):
    job = submit(slurm, tmp_path, slow_boxes("slurm-driver", time_limit=20))
    results = tmp_path / "results"
    wait_for("a first commit", lambda: rows(results) >= 1 and len(workers(slurm)) == 2, 600, 1)
    assert slurm.command("scancel", job).returncode == 0
    cancelled = time.monotonic()
    gone = lambda: not slurm.command("squeue", "--noheader", "--name=puzzlesweep").stdout  # noqa: E731
    wait_for(f"the worker jobs to go: {slurm.jobs()}", gone, 60, 0.5)
    workers_gone = time.monotonic() - cancelled
    wait_for(f"the driver job to go: {slurm.jobs()}", lambda: not slurm.jobs(), 60, 0.5)
    print(
        f"driver cancelled; worker jobs gone {workers_gone:.1f} s later, "
        f"squeue empty {time.monotonic() - cancelled:.1f} s later"
    )
    # `interrupted`, not `lost` (a row left `running`, read `lost` 90 s later): the run
    # got one SIGTERM and its Prefect server outlived it.
    log = driver_log(tmp_path, job)
    assert run_states(results) == ["interrupted"], log[-3000:]
    assert "sweep_on_slurm: the run ended, exit code 143" in log, log[-3000:]
    _, twice = catalog.query(
        results, "SELECT params_key FROM results GROUP BY 1 HAVING count(*) > 1"
    )
    assert twice == []
    assert 1 <= rows(results) < 8
