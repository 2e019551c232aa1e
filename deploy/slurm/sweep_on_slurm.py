"""Run a puzzlesweep sweep on a SLURM cluster: dask-jobqueue submits Dask workers as
SLURM jobs, and `puzzlesweep run SPEC --catalog CATALOG --address SCHEDULER` sends the
sweep's batches to them.

    pip install -e '.[slurm]'             # on a shared file system every node sees
    python deploy/slurm/sweep_on_slurm.py sweeps/seeds.toml --catalog /shared/results \
        --jobs 8 --partition short --memory 4GiB --walltime 02:00:00

Run it on a login node, or inside `sbatch deploy/slurm/sweep.sbatch` (one small job that
holds the scheduler and submits the workers). Each worker job runs one single-threaded
`dask worker` with its memory limit; the catalog must be on a file system all nodes
share. Workers import the installed package: nothing is shipped at run time. Options
this script does not know go to `puzzlesweep run` (e.g. `--batch-size 4`).

Ctrl-C or SIGTERM (`scancel` of the driver job signals every process of the job) stops
the run as `puzzlesweep run` stops (its row in the catalog's runs table `interrupted`);
this script waits for it, forwarding the signal after `FORWARD_SECONDS` if the run did
not get it, then cancels the worker jobs.
"""

import argparse
import signal
import subprocess
import sys
import time

#: Seconds between a stop signal and its forwarding to the run, which then stops at
#: once: the run's own first-signal stop takes at most 7 s (`puzzlesweep run`).
FORWARD_SECONDS = 10.0


def say(line: str) -> None:
    """Print `line` with the time (HH:MM:SS) to the driver's output."""
    print(f"{time.strftime('%H:%M:%S')} sweep_on_slurm: {line}", flush=True)


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """This script's options and the rest, for `puzzlesweep run`."""
    # No abbreviations: `--mem 2GiB` must not be taken for --memory, nor eat run's options.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("spec", help="sweep spec (TOML)")
    parser.add_argument("--catalog", default="results", help="catalog directory (shared)")
    parser.add_argument("--jobs", type=int, default=8, help="SLURM jobs, one worker each")
    parser.add_argument("--partition", default=None, help="SLURM partition (queue)")
    parser.add_argument("--account", default=None, help="SLURM account")
    parser.add_argument("--memory", default="4GiB", help="memory per worker job")
    parser.add_argument("--walltime", default="02:00:00", help="SLURM time limit per job")
    parser.add_argument(
        "--interface", default=None, help="network interface of scheduler and workers (ib0)"
    )
    parser.add_argument("--logs", default="slurm-logs", help="folder of the worker jobs' logs")
    return parser.parse_known_args(argv)


def run_until_done(command: list[str]) -> int:
    """Run `command` and return its exit code. A SIGINT or SIGTERM to this process is
    noted, not acted on: the run gets it too (the terminal's process group; every
    process of a SLURM job on scancel) and stops by itself; if it is still running
    `FORWARD_SECONDS` later, the signal is sent to it."""
    caught: list[tuple[int, float]] = []  # (signal, time.monotonic()) of each

    def note(signum, frame) -> None:
        say(f"{signal.Signals(signum).name}: waiting for the run to stop")
        caught.append((signum, time.monotonic()))

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        run = subprocess.Popen(command)
        while run.poll() is None:
            try:
                run.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                if caught and time.monotonic() - caught[0][1] >= FORWARD_SECONDS:
                    say(f"the run goes on {FORWARD_SECONDS:g} s after the signal: sent to it")
                    run.send_signal(caught[0][0])
                    run.wait()
        say(f"the run ended, exit code {run.returncode}")
        return run.returncode
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    """Start the SLURM-backed cluster, run the sweep on it, cancel the worker jobs;
    returns `puzzlesweep run`'s exit code (0 ok, 1 instances in error or batches
    failed, 2 bad input, 143 or 130 stopped by SIGTERM or Ctrl-C)."""
    args, rest = parse(argv)
    from dask_jobqueue import SLURMCluster

    cluster = SLURMCluster(
        queue=args.partition,
        account=args.account,
        cores=1,  # one solver thread per instance: the cluster supplies the parallelism
        processes=1,
        memory=args.memory,
        walltime=args.walltime,
        python=sys.executable,  # the same environment, with puzzlesweep installed
        job_name="puzzlesweep",
        interface=args.interface,
        log_directory=args.logs,
    )
    try:
        print(f"dask-jobqueue: scheduler {cluster.scheduler_address}", flush=True)
        print(f"Dask dashboard: {cluster.dashboard_link}", flush=True)
        print(cluster.job_script(), flush=True)
        cluster.scale(jobs=args.jobs)
        run = [sys.executable, "-m", "puzzlesweep.cli", "run", args.spec]
        run += ["--catalog", args.catalog, "--address", cluster.scheduler_address, *rest]
        return run_until_done(run)
    finally:
        cluster.close()  # scancel of the worker jobs still queued or running


if __name__ == "__main__":
    sys.exit(main())
