"""The one-node SLURM of the tests (Debian's slurmctld, slurmd and munge on 127.0.0.1,
`servers.Slurm`): it starts, runs a job, stops, and starts again on the same machine,
writing nothing outside its own folder."""

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from .servers import Slurm

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
