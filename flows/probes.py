"""Is it there? The check of a Dask scheduler address's form and the probes of the
services a run depends on, without importing Dask.

`check_address` refuses a malformed `--address` before any work starts (the identity
request to the scheduler itself is `cluster.probe_scheduler`, in Dask's one home);
`Watch` probes the Prefect API (HTTP) and the scheduler (a TCP connection) while
batches run and ends the run when one is lost. `answers` is the one HTTP probe they
share. Apart from `cluster`, which starts what these probe.
"""

import re
import threading
import time
from collections.abc import Callable

from puzzlesweep.core import BadInput
from puzzlesweep.flows.api import configured_api

ADDRESS = re.compile(r"^(tcp|tls)://[^\s:/]+:\d{1,5}$")


def reply(url: str, timeout: float = 2.0) -> bool | None:
    """How `url` answers a GET within `timeout` seconds: True (200), False (a refused
    connection: nothing listens), None (anything else: another status, a bad URL, no
    answer in time on a loaded machine)."""
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except (OSError, ValueError) as exc:
        return False if _refused(exc) else None


def answers(url: str, timeout: float = 2.0) -> bool:
    """Does `url` answer a GET with 200 within `timeout` seconds? (A scheduler started
    with `--no-dashboard` still names a dashboard link, which answers 404.)"""
    return reply(url, timeout) is True


def check_address(address: str) -> str:
    """`address` if it is a Dask scheduler address `tcp://HOST:PORT` (or `tls://`);
    raises BadInput naming it otherwise."""
    if not ADDRESS.match(address) or not 0 < int(address.rsplit(":", 1)[1]) < 65536:
        raise BadInput(f"--address {address!r} is not a Dask scheduler address tcp://HOST:PORT")
    return address


def tcp_connect(address: str, timeout: float = 2.0) -> None:
    """Open and close a TCP connection to the HOST:PORT of `address` (a scheduler
    address that `check_address` accepts), within `timeout` seconds. Raises
    ConnectionRefusedError where nothing listens, another OSError (a timeout, no route)
    where the host does not answer."""
    import socket

    host, port = address.split("://", 1)[-1].rsplit(":", 1)
    socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()


#: Seconds a Prefect API or Dask scheduler may refuse its probes before the run stops...
LOST_SECONDS = 4.0
#: ... or leave them unanswered: a loaded machine (load 26 on 2 cores) answered /health
#: in more than 2 s for 4 s in a row, and a run that was going well was stopped.
SLOW_SECONDS = 60.0


def _refused(exc: BaseException) -> bool:
    """Was `exc` (or the reason an URLError wraps) a refused or reset connection: nothing
    listens there any more?"""
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, ConnectionRefusedError | ConnectionResetError)


class Watch:
    """While its `with` block runs, a daemon thread probes the Prefect API this process
    uses (GET /health) and the Dask scheduler at `scheduler` (a TCP connection) every
    second; when one has refused every probe for `LOST_SECONDS` (or left them
    unanswered for `SLOW_SECONDS`: a loaded machine), it calls `on_lost(reason)` once
    (in its thread) and stops. A probe costs a millisecond or
    two; nothing is probed that is not configured.

    Kept over Prefect's and Dask's clients alone, which without it retry a lost API for
    minutes and a lost scheduler for half a minute, with tracebacks
    (`benchmarks/stop_bench.py --part watch`; figures in benchmarks/README.md)."""

    def __init__(self, scheduler: str | None, on_lost: Callable[[str], None]):
        self.api = configured_api()
        self.scheduler = scheduler
        self.on_lost = on_lost
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="run-watch", daemon=True)

    def _api_answers(self) -> bool | None:
        """True: /health answers; False: refused (gone); None: too slow to say."""
        return reply(f"{self.api}/health")

    def _scheduler_answers(self) -> bool | None:
        """True: it accepts a connection; False: refused (gone); None: no answer yet."""
        try:
            tcp_connect(self.scheduler)
            return True
        except OSError as exc:
            return False if _refused(exc) else None

    def _run(self) -> None:
        probes = []
        if self.api:
            probes.append((f"the Prefect API at {self.api} stopped answering", self._api_answers))
        if self.scheduler:
            probes.append(
                (
                    f"the Dask scheduler at {self.scheduler} stopped answering",
                    self._scheduler_answers,
                )
            )
        failing: dict[str, float] = {}
        while probes and not self._done.wait(1.0):
            for reason, probe in probes:
                answer = probe()
                if answer:
                    failing.pop(reason, None)
                    continue
                since = failing.setdefault(reason, time.monotonic())
                patience = LOST_SECONDS if answer is False else SLOW_SECONDS
                if time.monotonic() - since >= patience and not self._done.is_set():
                    self._done.set()
                    self.on_lost(f"{reason} (for {patience:g} s)")
                    return

    def stop(self) -> None:
        """Stop probing (the thread ends within a second)."""
        self._done.set()

    def __enter__(self) -> "Watch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
