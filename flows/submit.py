"""The one submit loop of sweeps and proofs, and how a run is asked to stop.

`submit_all` keeps a bounded number of Prefect task futures in flight, hands each result
(or failure) to the caller as it ends, and listens for a stop request (`request_stop`,
from a signal handler or the run's watch) between results, so a run stops within about
`POLL` seconds whatever its tasks are doing. The hooks let the command line learn when
a flow starts and when a stopped run has written its row.
"""

import queue
import threading
from collections.abc import Callable
from typing import Any

from puzzlesweep.flows.faults import RunStopped

#: Called with (state, message) once a run that was interrupted (`interrupted`, None)
#: or lost its Prefect API or Dask scheduler (`failed`, the one line to show) has written
#: its row: the command line exits there rather than wait for a teardown that would
#: talk to what is gone.
after_stop: list[Callable[[str, str | None], None]] = []
#: Called (no arguments) in the flow's thread as it starts: the command line puts its
#: SIGTERM handler back over Prefect's (which Prefect installs for runner-driven
#: cancellation, and which would log a crash and leave the run's row `failed`).
on_flow_start: list[Callable[[], None]] = []


# A flow calls the hooks through these module functions, which pickle by reference:
# the flow's own code is shipped with every task, and the hooks (closures over the
# command line's console) cannot be pickled.
def flow_started() -> None:
    for hook in list(on_flow_start):
        hook()


def stopped(state: str, message: str | None = None) -> None:
    for hook in list(after_stop):
        hook(state, message)


# (the flow reaches these through module functions only: see `flow_started`)
_stop = threading.Event()
_in_loop = [0]  # sweep flows of this process inside their submit loop


def _looping(step: int) -> None:
    """A flow enters (+1, clearing an old stop request) or leaves (-1) its loop."""
    if step > 0 and not _in_loop[0]:
        _stop.clear()
        _stop_reason.clear()
    _in_loop[0] += step


_stop_reason: list[str] = []


def request_stop(reason: str | None = None) -> bool:
    """Ask the sweep flows running in this process to stop: within about `POLL`
    seconds each stops submitting and raises, KeyboardInterrupt (its row says
    `interrupted`) or, with a `reason`, RunStopped(reason) (`failed`). Safe in a signal
    handler. Returns whether a flow was in its submit loop to hear it (if not, the
    caller interrupts in its own way)."""
    if reason:
        _stop_reason.append(reason)
    _stop.set()
    return _in_loop[0] > 0


POLL = 0.25  # seconds between looks at a stop request while batches run


def _next_done(finished: queue.Queue):
    """The next future to finish; raises KeyboardInterrupt once a stop is requested."""
    while True:
        if _stop.is_set():
            if _stop_reason:
                raise RunStopped(_stop_reason[0])
            raise KeyboardInterrupt
        try:
            return finished.get(timeout=POLL)
        except queue.Empty:
            continue


def _cancel(running: dict) -> None:
    """Cancel the submitted batches of `running` (futures): those not started never
    start; a running one ends with its worker (the cluster closes after the flow)."""
    for future in running:
        wrapped = getattr(future, "wrapped_future", None)
        try:
            (wrapped or future).cancel()
        except Exception:  # noqa: BLE001 (already done, or its scheduler is gone)
            pass


def submit_all(
    submit_next: Callable[[], tuple[Any, Any] | None],
    width: int,
    on_result: Callable[[Any, Any], None],
    on_failure: Callable[[Any, Exception], bool],
) -> None:
    """Run tasks until `submit_next` has no more and none is in flight.

    `submit_next()` submits one task and returns (its key, its Prefect future), or None
    when there is nothing to submit now; it is called while fewer than `width` futures
    are in flight. Each future that ends calls `on_result(key, result)`, or
    `on_failure(key, exception)` when it failed every attempt; a True from `on_failure`
    stops the loop and cancels the futures in flight. Raises KeyboardInterrupt or
    RunStopped as `request_stop` says (nothing more is submitted)."""
    finished: queue.Queue = queue.Queue()  # futures, as their tasks end
    running: dict = {}  # future -> key
    _looping(1)
    try:
        while True:
            while len(running) < width and (item := submit_next()) is not None:
                key, future = item
                running[future] = key
                future.add_done_callback(finished.put)
            if not running:
                return
            future = _next_done(finished)
            key = running.pop(future)
            try:
                result = future.result()
            except Exception as exc:  # a task that failed every attempt
                if on_failure(key, exc):
                    _cancel(running)
                    return
                continue
            on_result(key, result)
    finally:
        _looping(-1)
