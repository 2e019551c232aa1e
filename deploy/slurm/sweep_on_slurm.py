"""Run a puzzlesweep sweep on a SLURM cluster: dask-jobqueue submits Dask workers as
SLURM jobs, and the sweep's tasks go to them through the usual `--address` path.

    pip install -e . dask-jobqueue        # on a shared file system every node sees
    python deploy/slurm/sweep_on_slurm.py sweeps/seeds.toml --catalog /shared/results \
        --jobs 8 --partition short --memory 4GiB --walltime 02:00:00

Run it on a login node, or inside `sbatch deploy/slurm/sweep.sbatch` (one small job that
holds the scheduler and submits the workers). Each worker job runs one single-threaded
`dask worker` with its memory limit; the catalog must be on a file system all nodes
share. Workers import the installed package: nothing is shipped at run time.
"""

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, start the SLURM-backed cluster, run the sweep; returns the
    exit code (0 ok, 1 when instances ended in error or batches failed)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="sweep spec (TOML)")
    parser.add_argument("--catalog", default="results", help="catalog directory (shared)")
    parser.add_argument("--jobs", type=int, default=4, help="SLURM jobs, one worker each")
    parser.add_argument("--partition", default=None, help="SLURM partition (queue)")
    parser.add_argument("--account", default=None, help="SLURM account")
    parser.add_argument("--memory", default="4GiB", help="memory per worker job")
    parser.add_argument("--walltime", default="02:00:00", help="SLURM time limit per job")
    args = parser.parse_args(argv)

    from dask_jobqueue import SLURMCluster

    from puzzlesweep.flows.control import Control
    from puzzlesweep.flows.settings import RunSettings
    from puzzlesweep.flows.sweep import run_sweep

    cluster = SLURMCluster(
        queue=args.partition,
        account=args.account,
        cores=1,  # one solver thread per instance: the cluster supplies the parallelism
        processes=1,
        memory=args.memory,
        walltime=args.walltime,
        python=sys.executable,  # the same environment, with puzzlesweep installed
        job_name="puzzlesweep",
        worker_extra_args=["--nthreads", "1"],
        log_directory="slurm-logs",
    )
    try:
        cluster.scale(jobs=args.jobs)
        print(f"dask-jobqueue: {cluster.scheduler_address}, dashboard {cluster.dashboard_link}")
        print(cluster.job_script())
        settings = RunSettings.of(catalog=args.catalog, address=cluster.scheduler_address)
        report = run_sweep(args.spec, settings, control=Control(announce=print))
    finally:
        cluster.close()
    print(
        f"run {report['run_id']}: solved {report['solved']}, skipped {report['skipped']}, "
        f"{report['counts']}, {report['retried']} batches retried, {len(report['failed'])} failed"
    )
    return 1 if report["failed"] or report["counts"].get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
