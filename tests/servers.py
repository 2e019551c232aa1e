"""Real servers for tests: free ports on 127.0.0.1, processes started in their own
process group and stopped (then killed) whatever happens."""

import ctypes
import os
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
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
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


def descendants(word: str, settle: float = 10.0) -> list[int]:
    """The process ids of this process's living descendants whose command line contains
    `word`, after waiting up to `settle` s for them to end (reaping those that did)."""
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
                if process.status() != psutil.STATUS_ZOMBIE and word in " ".join(process.cmdline()):
                    found.append(process.pid)
            except psutil.Error:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)
