"""How a caller steers a running sweep: one object, passed in, never a module-level registry.

A `Control` carries what the caller and the flow say to each other while a run goes on:

- the stop request (`request_stop`, safe in a signal handler or another thread), which
  the flow's submit loop hears within `flows.submit.POLL` seconds (`check`);
- the progress listeners (`listen`), which the flow's `Progress` calls as instances and
  batches end (the command line's progress bar is one), and the latest standing
  (`standing`);
- the announce channel (`announce`), one line for the person who started the run (the
  Dask dashboard's address, the flow run's URL);
- `on_flow_start`, called in the flow's thread as it starts, and `on_stopped(state,
  message)`, called once an interrupted run (`interrupted`, None) or a run that lost
  its Prefect API or Dask scheduler (`failed`, the line to show) has written its row;
- `record`, the run's `RunRecord` once it is claimed, so that whoever ends the run (the
  flow, its watch, or a caller's exit timer) ends the same row once; and
  `cancel_flow_run()`, set by the flow as it starts, which sets its Prefect flow run and
  unfinished task runs Cancelled from any thread (the exit timer calls it when the flow
  could not end the run itself in time).

The flows import nothing from the command line: the command line fills a Control's
callables and hands it to the flow by context (`CALLER`), never as a flow parameter: a
deployment's run form shows only what a person can set.
"""

import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from puzzlesweep.flows.faults import RunStopped


def _quiet(*_: object) -> None:
    """The default of every callable of a Control: do nothing."""


class Control:
    """The channel between a run and its caller (see the module's docstring).

    `announce(line)` (str → None), `on_flow_start()` and `on_stopped(state, message)`
    default to doing nothing. Thread-safe: listeners and stop requests may come from
    any thread."""

    def __init__(
        self,
        announce: Callable[[str], None] = _quiet,
        on_flow_start: Callable[[], None] = _quiet,
        on_stopped: Callable[[str, str | None], None] = _quiet,
    ) -> None:
        self.announce = announce
        self.on_flow_start = on_flow_start
        self.on_stopped = on_stopped
        self.record: Any = None  # the run's RunRecord, once claimed
        self.cancel_flow_run: Callable[[], None] = _quiet  # set by the flow as it starts
        self.progress: Any = None  # the run's flows.progress.Progress, once planned
        self.report: dict | None = None  # the run's report, once it ended
        self.error: BaseException | None = None  # why the run failed (one line), if so
        self._stop = threading.Event()
        self._reason: list[str] = []
        self._listeners: list[Callable[[Any], None]] = []
        self._loops = 0
        self._lock = threading.Lock()

    # -- stopping -------------------------------------------------------------------
    def request_stop(self, reason: str | None = None) -> bool:
        """Ask the run to stop: within about `submit.POLL` seconds its loop stops
        submitting and raises KeyboardInterrupt (its row says `interrupted`) or, with a
        `reason`, RunStopped(reason) (`failed`). Safe in a signal handler. Returns
        whether a submit loop was running to hear it (if not, the caller interrupts in
        its own way)."""
        if reason:
            self._reason.append(reason)
        self._stop.set()
        return self._loops > 0

    @property
    def stop_requested(self) -> bool:
        """Has a stop been requested?"""
        return self._stop.is_set()

    def check(self) -> None:
        """Raise RunStopped(reason) or KeyboardInterrupt once a stop was requested."""
        if self._stop.is_set():
            if self._reason:
                raise RunStopped(self._reason[0])
            raise KeyboardInterrupt

    def looping(self, step: int) -> None:
        """A submit loop enters (+1) or leaves (-1)."""
        with self._lock:
            self._loops += step

    # -- progress -------------------------------------------------------------------
    def listen(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Call `listener(standing)` (a `flows.progress.Standing`) whenever the run
        moves; returns a function that stops it."""
        with self._lock:
            self._listeners.append(listener)

        def stop() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return stop

    def notify(self, standing: Any) -> None:
        """Hand `standing` to every listener."""
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(standing)

    def standing(self) -> Any:
        """Where the run stands now (`flows.progress.Standing`), or None before its
        progress starts."""
        return self.progress.standing() if self.progress is not None else None


@dataclass
class Caller:
    """What the code that starts a flow in this process hands it: its `control`, and a
    cluster already starting (`settings.EarlyStart`) or None."""

    control: Control
    early: Any = None


#: The caller of the flow run started in this context (None: a deployment's run).
CALLER: ContextVar[Caller | None] = ContextVar("puzzlesweep_caller", default=None)
