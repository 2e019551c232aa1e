"""The one submit loop of sweeps and proofs.

`submit_all` keeps a bounded number of futures in flight (Dask futures, thread futures
or Prefect task futures: anything with `add_done_callback`, `result` and `cancel`),
hands each result (or failure) to the caller as it ends, lets the caller act between
results (`tick`: the sweep's writer commits there), and listens for a stop request on the
run's `Control` (`Control.request_stop`, from a signal handler or the run's watch), so a
run stops within about `POLL` seconds whatever its tasks are doing.
"""

import queue
from collections.abc import Callable
from typing import Any

from puzzlesweep.flows.control import Control

POLL = 0.25  # seconds between looks at a stop request while batches run


def _next_done(finished: queue.Queue, control: Control, tick: Callable[[], bool]):
    """The next future to finish, or None when `tick` (called every `POLL` seconds while
    none does) asks to stop; raises as `Control.check` once a stop is requested."""
    while True:
        control.check()
        try:
            return finished.get(timeout=POLL)
        except queue.Empty:
            if tick():
                return None


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
    control: Control | None = None,
    tick: Callable[[], bool] = lambda: False,
) -> None:
    """Run tasks until `submit_next` has no more and none is in flight.

    `submit_next()` submits one task and returns (its key, its Prefect future), or None
    when there is nothing to submit now; it is called while fewer than `width` futures
    are in flight. Each future that ends calls `on_result(key, result)`, or
    `on_failure(key, exception)` when it failed every attempt; `tick()` is called after
    each and every `POLL` seconds. A True from `on_failure` or `tick` stops the loop and
    cancels the futures in flight. Raises KeyboardInterrupt or
    RunStopped as `control.request_stop` says (nothing more is submitted)."""
    finished: queue.Queue = queue.Queue()  # futures, as their tasks end
    running: dict = {}  # future -> key
    control = control or Control()
    control.looping(1)
    try:
        while True:
            while len(running) < width and (item := submit_next()) is not None:
                key, future = item
                running[future] = key
                future.add_done_callback(finished.put)
            if not running:
                return
            future = _next_done(finished, control, tick)
            if future is None:
                _cancel(running)
                return
            key = running.pop(future)
            try:
                result = future.result()
            except Exception as exc:  # a task that failed every attempt
                if on_failure(key, exc):
                    _cancel(running)
                    return
                continue
            on_result(key, result)
            if tick():
                _cancel(running)
                return
    finally:
        control.looping(-1)
