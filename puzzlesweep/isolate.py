"""Hard per-instance limits: each instance is solved in a child process of the worker.

The solvers hold their own time and node limits (HiGHS to within ~0.4 s, the search
engines to within one clock check). What they cannot hold is a solver that never returns
to its clock (stuck in C code, or in a family's move generator), one that allocates more
memory than the worker has, or one that crashes its process (a segfault, an abort). On a
cluster any of those would take the Dask worker and its whole batch with it, so a batch
sends its instances, one at a time, to a long-lived child process (`python -m
puzzlesweep.isolate`) and the worker only waits:

- memory: the child runs under `RLIMIT_DATA` = `memory_limit` bytes (heap and private
  anonymous mappings, Linux >= 4.7); an allocation past it raises MemoryError inside the
  solver, recorded as status `error` with a message naming the limit. The child has one
  malloc arena (`MALLOC_ARENA_MAX=1`): with several threads (OpenBLAS's, Arrow's),
  glibc answered a failed allocation by making new arenas again and again, and a child
  at its limit then spun for minutes instead of raising (about 1 solve in 10 at the
  limit, three at a time on 2 cores; seen as a kill past the time limit).
- time: the worker kills the child when an instance runs `GRACE` seconds past its time
  limit and records status `time_limit` with a message saying it was killed (no
  incumbent survives). The clock starts when the instance is sent, after the child's
  start-up (it says `ready` once its imports are done).
- crash: a child that dies (any signal or exit) is recorded as status `error` with the
  signal's name, and with its memory limit only when its peak memory came near it (the
  kernel's rusage of the child); a fresh child solves the next instance.
- interrupt: the child runs in a process group of its own, so a Ctrl-C at the terminal
  (SIGINT to the foreground group) or a SIGTERM to the run's group does not reach it: the
  run decides what stops. A child that is stopped all the same by SIGINT, SIGTERM or
  SIGHUP raises `Interrupted` in the worker: its instance is not done, which is not an
  `error` row.

Protocol: one typed request crosses the process boundary and one row comes back. A
`Request` (an instance's `solve.SolveRequest`, or a split proof's `proof.PartRequest`)
goes as its `wire()` form, one JSON object per line; the child rebuilds it
(`of_wire`), solves it and replies with its whole row (datetimes as ISO text), or with
{"failure": {...}} when the solver ran out of memory; the row of a failure (that, a
crash, a kill past the time limit) is built once, by the request's `failed`, here.
The child dies with its parent (PR_SET_PDEATHSIG), so a SIGKILLed worker leaves nothing.

Roads not taken: a `multiprocessing` pool (Dask worker processes are daemonic and may not
have children); one process per instance (about a second of imports each).
"""

import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

#: Seconds past an instance's time limit before its child is killed: model building
#: and verification are outside the solvers' clocks, and the machine may be loaded.
GRACE = 30.0
#: Seconds a new child may take to import the solvers and families.
STARTUP = 120.0
#: The smallest memory limit accepted (the child's imports alone take about 100 MiB).
MIN_MEMORY = 256 * 2**20
#: Signals by which someone stops a process (not a crash): its instance is not done.
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: A child that died as a failed allocation ends it (an exit code, SIGABRT, SIGSEGV,
#: SIGBUS) is said to have met its memory limit when its peak resident memory reached
#: this share of the limit (RLIMIT_DATA counts reserved memory, at least what is
#: resident). RLIMIT_DATA never sends SIGKILL: that is the kernel's OOM killer or a
#: person, so a SIGKILL never names the limit.
NEAR_LIMIT = 0.5
ALLOCATION_DEATHS = (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS)


class Request(Protocol):
    """What a child solves: `wire()`, its JSON form (with "time_limit" in seconds), and
    `failed(failure)`, its whole row when the solve failed ({"status", "error",
    "solve_seconds", "started_at", "finished_at"}: no solution, no numbers)."""

    def wire(self) -> dict[str, Any]: ...

    def failed(self, failure: dict[str, Any]) -> dict[str, Any]: ...


class Interrupted(RuntimeError):
    """The child solver was stopped from outside (SIGINT, SIGTERM, SIGHUP) while it
    solved: its instance is not done, and nothing may be recorded for it."""


def mib(size: int) -> str:
    """`size` bytes as text in MiB, e.g. '512 MiB'."""
    return f"{size / 2**20:.0f} MiB"


class Child:
    """One child solver process with an optional memory limit (bytes; None: no limit).

    `solve(request)` returns the reply row (dict); it does not raise for what happens in
    the child: a killed or crashed child becomes an `error` or `time_limit` row and the
    next call starts a new child. Only a child stopped from outside (SIGINT, SIGTERM,
    SIGHUP) raises `Interrupted`. Not thread-safe: use one per thread.
    """

    def __init__(self, memory_limit: int | None = None, grace: float = GRACE):
        if memory_limit is not None and memory_limit < MIN_MEMORY:
            raise ValueError(
                f"memory limit {mib(memory_limit)} is below the minimum of {mib(MIN_MEMORY)}"
            )
        self.memory_limit = memory_limit
        self.grace = grace
        self.process: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        """A new child, once it has imported the solvers and said `ready` (its start-up,
        a second or more on a loaded machine, is not charged to an instance)."""
        command = [sys.executable, "-P", "-m", "puzzlesweep.isolate"]  # -P: not the cwd
        if self.memory_limit is not None:
            command.append(str(self.memory_limit))
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            process_group=0,  # a terminal's Ctrl-C is for the run, not for its solvers
            env={**os.environ, "MALLOC_ARENA_MAX": "1"},  # fail at the limit, never spin
        )
        self._peak_kib = 0
        self._read_line(process, time.monotonic() + STARTUP)
        return process

    @staticmethod
    def _read_line(process: subprocess.Popen, deadline: float) -> tuple[str, bool]:
        """(the child's next line or "", whether its output ended) by `deadline`."""
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if selector.select(timeout=min(1.0, max(0.0, deadline - time.monotonic()))):
                    line = process.stdout.readline()
                    return line, not line
        return "", False

    def start(self) -> None:
        """Start the child now unless it runs: its imports (a second or more) then
        happen before the first instance arrives."""
        if self.process is None or self.process.poll() is not None:
            self.process = self._start()

    @property
    def pid(self) -> int | None:
        """The running child's process id, or None before the first instance."""
        return self.process.pid if self.process and self.process.poll() is None else None

    def solve(self, request: Request) -> dict[str, Any]:
        """Solve one `Request` in the child; returns its whole row. Raises nothing for
        failures inside the child (the request's `failed` row says what happened),
        except `Interrupted` when someone stopped the child (SIGINT, SIGTERM, SIGHUP)."""
        self.start()
        process = self.process
        wire = request.wire()
        started = time.time()
        deadline = time.monotonic() + float(wire["time_limit"]) + self.grace
        try:
            process.stdin.write(json.dumps(wire) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the child died already; the read below finds out how
        line, ended = self._read_line(process, deadline)
        if line:
            reply = json.loads(line)
            return (
                request.failed(_decode(reply["failure"])) if "failure" in reply else _decode(reply)
            )
        seconds = time.time() - started
        code = self._reap(process, 10.0 if ended else 0.0)
        if code is None:  # still running past its deadline: kill it
            process.kill()
            self._reap(process, None)
            message = (
                f"killed after {seconds:.1f} s: the solver did not stop at its time limit "
                f"of {wire['time_limit']} s"
            )
            return request.failed(_failure("time_limit", message, started, seconds))
        if code < 0 and -code in STOPPING:
            raise Interrupted(f"the solver process was stopped by {signal.Signals(-code).name}")
        return request.failed(_failure("error", self.death(code), started, seconds))

    def death(self, code: int) -> str:
        """Why the child ended with exit `code` (negative: the signal), as one line:
        the signal or the code and the child's peak memory; the memory limit only when it
        can have played a part: a death a failed allocation causes (`ALLOCATION_DEATHS`
        or an exit code) with a peak near the limit (`NEAR_LIMIT`)."""
        how = (
            f"was killed by {signal.Signals(-code).name}"
            if code < 0
            else f"exited with code {code}"
        )
        peak = self._peak_kib * 1024
        allocation = code > 0 or -code in ALLOCATION_DEATHS
        if self.memory_limit and allocation and peak >= NEAR_LIMIT * self.memory_limit:
            return (
                f"the solver process {how} after reaching {mib(peak)} of its memory "
                f"limit of {mib(self.memory_limit)}"
            )
        return f"the solver process {how} (peak memory {mib(peak)})"

    def _reap(self, process: subprocess.Popen, timeout: float | None) -> int | None:
        """Wait up to `timeout` seconds (None: for ever) for the child to end; returns its
        exit code (negative: the signal) or None while it runs. Reaps it with `wait4`,
        which also gives its peak resident memory (kept in `_peak_kib`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while process.returncode is None:
            try:
                pid, status, usage = os.wait4(
                    process.pid, os.WNOHANG if deadline is not None else 0
                )
            except ChildProcessError:  # reaped elsewhere
                return process.poll()
            if pid:
                self._peak_kib = usage.ru_maxrss
                process.returncode = os.waitstatus_to_exitcode(status)
                break
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.02)
        return process.returncode

    def close(self) -> None:
        """Stop the child (it also exits by itself when its input closes)."""
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def _failure(status: str, message: str, started: float, seconds: float) -> dict[str, Any]:
    """What a failed solve says (`Request.failed` makes the row): `status`, the error
    `message`, and its times (`started`: a `time.time()`; `seconds` it took)."""
    return {
        "status": status,
        "error": message,
        "solve_seconds": seconds,
        "started_at": datetime.fromtimestamp(started, UTC),
        "finished_at": datetime.now(UTC),
    }


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    """A reply row with its ISO timestamps turned back into datetimes."""
    for key in ("started_at", "finished_at"):
        if isinstance(row.get(key), str):
            row[key] = datetime.fromisoformat(row[key])
    return row


class Children:
    """The child solver processes of one worker: of a Dask worker (its plugin,
    `cluster.PuzzleWorker`, owns one) or of a run's threads (the threads backend makes
    one per run), passed to the batch task rather than kept in a module. Each thread
    that runs batches has its own child (`lease`), which it keeps across batches, so a
    batch does not wait a second for a new child's imports; one with another memory
    limit replaces it. A child is only ever used by the thread that started it: it dies
    with that thread (PR_SET_PDEATHSIG). `close` stops the children (a child in the
    middle of a batch when its batch ends, so no instance sees its solver vanish).
    Thread-safe; usable as a context manager that closes it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_thread: dict[int, Child] = {}
        self._busy: set[int] = set()
        self._closed = False

    @contextmanager
    def lease(self, memory_limit: int | None) -> Iterator[Child]:
        """The calling thread's child with `memory_limit` (bytes; None: no limit), for
        the block: kept for its next batch, or stopped after it once `close` was
        called. Raises ValueError for a limit below `MIN_MEMORY`."""
        ident = threading.get_ident()
        with self._lock:
            child = old = self._by_thread.get(ident)
            if child is None or child.memory_limit != memory_limit:
                child = self._by_thread[ident] = Child(memory_limit)
            self._busy.add(ident)
        if old is not None and old is not child:
            old.close()
        try:
            yield child
        finally:
            with self._lock:
                self._busy.discard(ident)
                stop = self._closed and self._by_thread.pop(ident, None) is child
            if stop:
                child.close()

    def warm(self, memory_limit: int | None) -> None:
        """Start the calling thread's child now, so its first batch finds it ready."""
        with self.lease(memory_limit) as child:
            child.start()

    def pids(self) -> list[int]:
        """The process ids of the children running now, sorted."""
        with self._lock:
            return sorted(c.pid for c in self._by_thread.values() if c.pid is not None)

    def close(self) -> None:
        """Stop every child not in the middle of a batch now, the others when their
        batch ends; a later `lease` gets a child stopped after its block."""
        with self._lock:
            self._closed = True
            idle = [c for i, c in self._by_thread.items() if i not in self._busy]
            self._by_thread = {i: c for i, c in self._by_thread.items() if i in self._busy}
        for child in idle:
            child.close()

    def __enter__(self) -> "Children":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no-op elsewhere)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def serve(memory_limit: int | None) -> None:
    """The child's loop: read requests on stdin, answer rows on stdout, until EOF."""
    _die_with_parent()
    if memory_limit is not None:
        import resource

        resource.setrlimit(resource.RLIMIT_DATA, (memory_limit, memory_limit))
    from puzzlesweep.proof import PartRequest
    from puzzlesweep.solve import SolveRequest

    out = sys.stdout
    sys.stdout = sys.stderr  # nothing a solver prints may corrupt the replies
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        data = json.loads(line)
        started, out_of_memory = time.time(), False
        try:
            request = (PartRequest if "proof" in data else SolveRequest).of_wire(data)
            reply = request.solve()
        except MemoryError:  # met again while the row was made, the model's frames alive
            out_of_memory = True
        if out_of_memory:  # those frames, and the memory they held, are gone by now
            failure = _failure("error", "MemoryError", started, time.time() - started)
            reply = {"failure": failure}
        row = reply.get("failure", reply)
        if memory_limit is not None and (row["error"] or "").startswith("MemoryError"):
            row["error"] = f"memory limit {mib(memory_limit)} exceeded: {row['error']}"
        out.write(json.dumps(reply, default=_iso) + "\n")
        out.flush()


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


if __name__ == "__main__":
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else None)
    os._exit(0)
