"""How `run`, `prove` and `search` stop on Ctrl-C or SIGTERM: one line, nothing false
written, a bounded exit."""

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
        for worker in self.frozen:
            try:
                worker.kill()
            except Exception:  # noqa: BLE001 (gone already)
                pass
        sys.stderr.flush()
        os._exit(code or 128 + self.caught[0])

    def handler(self, signum, frame) -> None:
        """SIGINT or SIGTERM: the first prints one line, silences the logs, arms the
        timed exit, freezes the local workers and asks the run to stop; a second exits
        at once. Raises KeyboardInterrupt when no flow loop is there to hear the stop."""
        if self.caught:
            self.leave(128 + self.caught[0])
        self.caught.append(signum)
        logging.disable(logging.CRITICAL)  # no teardown tracebacks from Prefect or Dask
        logging.raiseExceptions = False
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
        logging.disable(logging.CRITICAL)
        logging.raiseExceptions = False  # no "Error logging to API" from a lost API
        for worker in _freeze_local_workers():  # silent before the line is printed
            worker.kill()
        from rich.markup import escape

        err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
        self.leave(1)


def _freeze_local_workers() -> list:
    """SIGSTOP the Dask worker processes this process started (the children of its
    multiprocessing fork server, see `flows.cluster`) and return them (psutil.Process).
    Nothing else is touched: not the temporary Prefect API, not any process this one
    did not start.

    Kept over Dask's own way (the `commits_stopped` Event, then the workers' exit with
    their nanny's process): both stop as promised, but without the freeze the workers
    may print Prefect's ERROR lines for interrupted task runs after the Ctrl-C line
    (`benchmarks/stop_bench.py --part freeze`; figures in benchmarks/README.md)."""
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
def stopped_by_signals(what: str):
    """While a proof or a sharded search runs, SIGINT and SIGTERM raise
    KeyboardInterrupt in this (main) thread, so its row ends `interrupted` and its
    cluster closes before the exit (Prefect's own SIGTERM bridge hands the signal back to
    this handler once it has marked the flow run crashed). Exits 128 + the signal with
    one line, "Ctrl-C: `what`, run it again to go on" (or SIGTERM): what it finished is
    kept and a re-run does the rest. The logs are silenced and the local Dask workers
    frozen at the signal, so that their teardown prints nothing after it.

    Yields `take_sigterm()`: called in the flow's (main) thread as the flow runs (a
    Prefect `on_running` hook), it takes SIGTERM back from Prefect's bridge, which would
    log the flow's crash before handing the signal on."""
    caught: list[int] = []

    def handler(signum, frame) -> None:
        caught.append(signum)
        logging.disable(logging.CRITICAL)  # no teardown tracebacks from Prefect or Dask
        logging.raiseExceptions = False
        _freeze_local_workers()  # silent now; the cluster's close kills them
        raise KeyboardInterrupt

    from prefect.exceptions import TerminationSignal

    def take_sigterm(*_hook_arguments) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, handler)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield take_sigterm
    except (KeyboardInterrupt, TerminationSignal) as exc:
        # Prefect's bridge may also end the flow with its TerminationSignal itself.
        caught += [exc.signal] if isinstance(exc, TerminationSignal) else []
        number = caught[0] if caught else signal.SIGINT
        name = "SIGTERM" if number == signal.SIGTERM else "Ctrl-C"
        raise fail(
            f"{name}: {what}, run it again to go on",
            128 + number,
        ) from None
    finally:
        for number, handling in previous.items():
            signal.signal(number, handling)
