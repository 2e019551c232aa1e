"""How `run`, `prove` and `search` stop on Ctrl-C or SIGTERM: one line, nothing false
written, a bounded exit."""

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import typer

from puzzlesweep.cli.common import err, fail

STOP_SECONDS = 7.0


@contextmanager
def interruptible(control, stop_seconds: float = STOP_SECONDS):
    """While a run goes on in this process: the first SIGINT or SIGTERM prints one line,
    silences the logs of what is being torn down, freezes this process's local Dask
    worker processes (SIGSTOP: no batch commits after this, and no nanny restarts them)
    and asks the run to stop (`control.request_stop`, a `flows.control.Control`;
    KeyboardInterrupt when no flow runs yet): the flow stops submitting and writes its
    row as `interrupted`, with the counts of the rows in the catalog. Then the frozen
    workers are killed (their solver children die with them) and the process exits
    with 128 + the signal (130 for Ctrl-C, 143 for SIGTERM), at the latest
    `stop_seconds` after the signal, the run's row ended (`interrupted`) first whoever
    else was about to; a second signal exits at once."""
    stopper = _Stopper(control, stop_seconds)
    previous = {sig: signal.signal(sig, stopper.handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    control.on_stopped = stopper.stopped
    control.on_flow_start = stopper.take_sigterm
    try:
        yield
    except KeyboardInterrupt:
        raise typer.Exit(128 + (stopper.caught[0] if stopper.caught else signal.SIGINT)) from None
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if stopper.caught:
            stopper.leave()  # the workers' teardown is not waited for


@dataclass
class _Stopper:
    """The signal handler of one `interruptible` run and the exits it leads to: the
    signals caught so far and the worker processes it froze are its fields, shared by
    the handler, the run's `on_stopped` hook and the timed exit."""

    control: Any  # flows.control.Control
    stop_seconds: float
    caught: list[int] = field(default_factory=list)  # signal numbers, first first
    frozen: list = field(default_factory=list)  # psutil.Process of the frozen workers

    def leave(self, code: int | None = None) -> None:
        """End the run's row `interrupted` and, when the flow has not ended it, cancel its
        flow run in Prefect (1.5 s at most for both; a no-op once the row has ended), kill
        the frozen workers and exit the process with `code` (default 128 + the first
        signal)."""
        record = self.control.record
        if record is not None and record.ended is None:
            endings = [
                threading.Thread(target=record.end, args=("interrupted",), daemon=True),
                threading.Thread(target=self.control.cancel_flow_run, daemon=True),
            ]
            for ending in endings:
                ending.start()
            deadline = time.monotonic() + 1.5
            for ending in endings:
                ending.join(max(0.0, deadline - time.monotonic()))
        _kill_and_exit(self.frozen, code or 128 + self.caught[0])

    def handler(self, signum, frame) -> None:
        """SIGINT or SIGTERM: the first prints one line, silences the logs, arms the
        timed exit, freezes the local workers and asks the run to stop; a second exits
        at once. Raises KeyboardInterrupt when no flow loop is there to hear the stop."""
        if self.caught:
            self.leave(128 + self.caught[0])
        self.caught.append(signum)
        _silence_logs()
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        err.print(
            f"{name}: stopping the run; what is running is cancelled, what was written is "
            f"kept (exit within {self.stop_seconds:g} s; {name} again exits at once)",
            highlight=False,
            soft_wrap=True,
        )
        timer = threading.Timer(self.stop_seconds - 2.0, self.leave)  # the row, then the exit
        timer.daemon = True
        timer.start()
        self.frozen.extend(_freeze_local_workers())
        if not self.control.request_stop():  # no flow loop to hear it: unwind from here
            raise KeyboardInterrupt

    def take_sigterm(self) -> None:
        """Take SIGTERM back from Prefect's bridge; called in the flow's (main) thread
        as the flow starts."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.handler)

    def stopped(self, state: str, message: str | None) -> None:
        """Once the run's row is written: exit 128 + the signal after an interruption
        (`message` None), else kill the local workers, print `message` and exit 1."""
        if message is None:
            self.leave()
        _silence_logs()  # also no "Error logging to API" from a lost API
        for worker in _freeze_local_workers():  # silent before the line is printed
            worker.kill()
        from rich.markup import escape

        err.print(
            f"[red]error:[/red] {escape(message)}", markup=True, highlight=False, soft_wrap=True
        )
        self.leave(1)


def _silence_logs() -> None:
    """No more log lines or logging errors from this process: the tracebacks of Prefect
    and Dask tearing a stopped run down."""
    logging.disable(logging.CRITICAL)
    logging.raiseExceptions = False


def _kill_and_exit(workers: list, code: int) -> None:
    """SIGKILL `workers` (psutil.Process; their solver processes die with them), flush
    stdout and stderr and exit with `code` at once, without the atexit hooks (Dask's
    would close a half-started or stopped cluster again)."""
    for worker in workers:
        with contextlib.suppress(Exception):  # gone already
            worker.kill()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _freeze_local_workers() -> list:
    """SIGSTOP the Dask worker processes this process started (the children of its
    multiprocessing fork server, see `flows.cluster`) and return them (psutil.Process).
    Nothing else is touched: not the temporary Prefect API, not any process this one
    did not start.

    Kept over the workers' own exit with their nanny's process: a worker never writes
    the catalog, but without the freeze it goes on solving, and may print into the
    terminal, after the Ctrl-C line (`benchmarks/stop_bench.py --part freeze`)."""
    import psutil

    workers = []
    for child in psutil.Process().children():
        try:
            if "multiprocessing.forkserver" not in " ".join(child.cmdline()):
                continue
            for worker in child.children():
                worker.suspend()
                workers.append(worker)
        except psutil.Error:
            continue
    return workers


@contextmanager
def stopped_by_signals(what: str, stop_seconds: float = 2 * STOP_SECONDS):
    """While a proof or a sharded search runs, SIGINT and SIGTERM raise
    KeyboardInterrupt in this (main) thread, so its row ends `interrupted` and its
    cluster closes; then one line, "Ctrl-C: `what`, run it again to go on" (or SIGTERM),
    and exit 128 + the signal, also for any error the interrupt caused on its way out.
    Logs are silenced and local Dask workers frozen at the signal (no teardown noise); a
    second signal, or `stop_seconds` after the first, exits at once. Exits kill the
    frozen workers (their solver processes die with them) and skip the atexit hooks
    (Dask's would close a half-started cluster again). Yields `take_sigterm()`, a Prefect
    `on_running` hook that takes SIGTERM back from Prefect's bridge, which would log the
    flow's crash before handing the signal on."""
    from prefect.exceptions import TerminationSignal

    caught: list[int] = []  # signal numbers, first first
    frozen: list = []  # psutil.Process of the frozen workers
    said: list[bool] = []  # the line is printed

    def say(number: int) -> typer.Exit:
        name = "SIGTERM" if number == signal.SIGTERM else "Ctrl-C"
        said.append(True)
        return fail(f"{name}: {what}, run it again to go on", 128 + number)

    def leave() -> None:
        if not said:
            say(caught[0])
        _kill_and_exit(frozen, 128 + caught[0])

    def handler(signum, frame) -> None:
        if caught:
            leave()
        caught.append(signum)
        _silence_logs()
        frozen.extend(_freeze_local_workers())  # silent now; the cluster's close kills them
        timer = threading.Timer(stop_seconds, leave)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    def take_sigterm(*_hook_arguments) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, handler)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield take_sigterm
    except BaseException as exc:
        if not caught and not isinstance(exc, KeyboardInterrupt | TerminationSignal):
            raise
        # Prefect's bridge may also end the flow with its TerminationSignal itself.
        caught += [exc.signal] if isinstance(exc, TerminationSignal) else [signal.SIGINT]
        leave()
    finally:
        for number, handling in previous.items():
            signal.signal(number, handling)
