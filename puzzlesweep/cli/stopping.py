"""How `run` stops on Ctrl-C or SIGTERM: one line, nothing false written, a bounded exit."""

import logging
import os
import signal
import sys
import threading
from contextlib import contextmanager

import typer

from puzzlesweep.cli.common import err

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
    caught: list[int] = []
    frozen: list = []

    def leave(code: int | None = None) -> None:
        if control.record is not None:  # a no-op once the run's row has ended
            ending = threading.Thread(target=control.record.end, args=("interrupted",))
            ending.daemon = True
            ending.start()
            ending.join(1.5)
        for worker in frozen:
            try:
                worker.kill()
            except Exception:  # noqa: BLE001 (gone already)
                pass
        sys.stderr.flush()
        os._exit(code or 128 + caught[0])

    def handler(signum, frame) -> None:
        if caught:
            leave(128 + caught[0])
        caught.append(signum)
        logging.disable(logging.CRITICAL)  # no teardown tracebacks from Prefect or Dask
        logging.raiseExceptions = False
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        err.print(
            f"{name}: stopping the run; what is running is cancelled, what was written is "
            f"kept (exit within {stop_seconds:g} s; {name} again exits at once)",
            highlight=False,
            soft_wrap=True,
        )
        timer = threading.Timer(stop_seconds - 2.0, leave)  # the row, then the exit
        timer.daemon = True
        timer.start()
        frozen.extend(_freeze_local_workers())
        if not control.request_stop():  # no flow loop to hear it: unwind from here
            raise KeyboardInterrupt

    def take_sigterm() -> None:  # over Prefect's bridge, in the flow's (main) thread
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, handler)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def stopped(state: str, message: str | None) -> None:  # once the run's row is written
        if message is None:
            leave()
        logging.disable(logging.CRITICAL)
        logging.raiseExceptions = False  # no "Error logging to API" from a lost API
        for worker in _freeze_local_workers():  # silent before the line is printed
            worker.kill()
        from rich.markup import escape

        err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
        leave(1)

    control.on_stopped = stopped
    control.on_flow_start = take_sigterm
    try:
        yield
    except KeyboardInterrupt:
        raise typer.Exit(128 + (caught[0] if caught else signal.SIGINT)) from None
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if caught:
            leave()  # the workers' teardown is not waited for


def _freeze_local_workers() -> list:
    """SIGSTOP the Dask worker processes this process started (multiprocessing spawns
    of a LocalCluster) and return them (psutil.Process). Nothing else is touched: not
    the temporary Prefect API, not any process this one did not start."""
    import psutil

    workers = []
    for child in psutil.Process().children():
        try:
            if "multiprocessing.spawn" in " ".join(child.cmdline()):
                child.suspend()
                workers.append(child)
        except psutil.Error:
            continue
    return workers
