"""Prefect's temporary API for one run, started as early and as cheaply as possible.

Without `PREFECT_API_URL`, a run needs Prefect's ephemeral API server (the FastAPI app
`prefect.server.api.server:create_app` under uvicorn, UI off, ephemeral settings): the
largest part of a run's start-up, its imports and database set-up in its own process.
Prefect's `SubprocessASGIServer` starts the same app, but first imports the whole server
package into the calling process (holding the GIL while the cluster starts) only to
spawn it, and it can only be called once Prefect's settings say no API is configured
(more imports). Figures: benchmarks/README.md, "Figures behind choices in the code".

`TemporaryAPI` instead starts `python -m puzzlesweep.flows.api` at once: that child
reads Prefect's settings itself (environment, profile, prefect.toml: the same sources as
the caller), exits saying `configured` when they name an API, and otherwise binds a free
port on 127.0.0.1, says `port N` and serves the app there until it is stopped or the
thread that started it ends (PR_SET_PDEATHSIG: a SIGKILLed run leaves no server). The
caller imports Prefect and starts its cluster meanwhile, and waits for the API's
`/health` only when the flow is about to start. `prefect_api` points this process at
the configured API or at one such temporary API for the whole run (`shared_api`: one
for every sweep of a process).

Its database is SQLite in memory (`MEMORY`, filled at start from a copy of the empty
database that the first start leaves in the user's cache, `_template()`, so that
Prefect's migrations find nothing to do), unless the environment's
`PREFECT_API_DATABASE_CONNECTION_URL` names one: the records of a temporary API are gone
with it anyway, and Prefect's default, the file `PREFECT_HOME/prefect.db` shared by every
run, grows with each run's logs and stalls the run. On a file, Prefect opens several
connections, and two write transactions that meet make SQLite answer "database is locked"
at once; the API turns that into a 503, which Prefect's client retries after 2 s while
the task that asked waits; in memory there is no such stall, and the copy spares the
migrations' start-up (figures: benchmarks/README.md, "Figures behind choices in the
code").

Only Prefect's public interface is used: the settings `PREFECT_API_URL` and
`PREFECT_UI_ENABLED`, and the app factory `create_app(ephemeral=True, final=True)` (what
`prefect server start` serves; `ephemeral`: no UI nor background services, `final`: no
work for later apps), served by uvicorn; the empty database is copied in a lifespan
wrapped around Prefect's (Starlette's public `router.lifespan_context`). The exact
Prefect version is pinned by `requirements.lock`: a release that changes even the public
surface arrives only with `make lock` and the test suite.
"""

import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import asynccontextmanager, closing, contextmanager, suppress
from pathlib import Path

#: Seconds to wait for the API when PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS
#: is not set (Prefect's own default is 20 s, too short for a loaded 2-core machine).
STARTUP = 120.0
#: The temporary API's database: SQLite in memory (one shared by the connections of the
#: child, which Prefect pools to one, as it does any URL naming ":memory:").
MEMORY = "sqlite+aiosqlite:///file::memory:?cache=shared&uri=true"
SHARED_MEMORY = "file::memory:?cache=shared"


class APIError(RuntimeError):
    """The temporary Prefect API did not start: it exited or did not answer in time."""


class TemporaryAPI:
    """The temporary Prefect API of one run, or nothing when an API is configured.

    `TemporaryAPI()` starts the child at once and returns; `url()` waits until the API
    answers and returns its URL (`http://127.0.0.1:PORT/api`), or None when
    Prefect's settings name an API already; `stop()` ends the server (SIGTERM, then
    SIGKILL after 5 s). Also a context manager: stops on exit. `url()` raises
    APIError when the server exits or does not answer within `timeout` seconds
    (default: PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, else 120).
    """

    def __init__(self, timeout: float | None = None):
        env_timeout = os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS")
        self.timeout = timeout or float(env_timeout or STARTUP)
        self.started = time.monotonic()
        self._url: str | None = None
        self._answer: str | None = None
        self._stderr = tempfile.TemporaryFile()  # its last line names why it failed
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "puzzlesweep.flows.api"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            process_group=0,  # a Ctrl-C at the terminal is for the run, which stops this
            env={**os.environ, "PREFECT_UI_ENABLED": "0", **_in_memory_database()},
        )

    def url(self) -> str | None:
        """The API's URL once `/health` answers 200, or None when one is configured."""
        if self._answer is None:
            self._answer = self.process.stdout.readline().strip()  # after Prefect's import
        if self._answer == "configured":
            return None
        if not self._answer.startswith("port "):
            raise APIError(f"the temporary Prefect API did not start ({self._failure()})")
        url = f"http://127.0.0.1:{self._answer.split()[1]}/api"
        while self._url is None:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                    if response.status == 200:
                        self._url = url
                        break
            except OSError:
                pass
            if self.process.poll() is not None:
                raise APIError(
                    f"the temporary Prefect API stopped before it answered ({self._failure()})"
                )
            if time.monotonic() - self.started > self.timeout:
                self.stop()
                raise APIError(
                    f"the temporary Prefect API did not answer within {self.timeout:g} s "
                    "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)"
                )
            time.sleep(0.1)
        return self._url

    def _failure(self) -> str:
        """'still running', or its exit code and the last line it wrote on stderr (a
        traceback's last line names the error, e.g. a database URL that is not one)."""
        code = self.process.poll()
        if code is None:
            return "still running"
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return f"exit code {code}" + (f": {lines[-1]}" if lines else "")

    def stop(self) -> None:
        """End the server and wait for it (at most 5 s before SIGKILL)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self._stderr.close()

    def __enter__(self) -> "TemporaryAPI":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _in_memory_database() -> dict[str, str]:
    """The environment that keeps the temporary API's records in memory, unless the
    environment's PREFECT_API_DATABASE_CONNECTION_URL names a database (a database named
    only in a Prefect profile is not used: the environment wins over profiles). Prefect's
    memo of its block registration then lives beside the copy it describes
    (`_memo_store()`), not in PREFECT_HOME, unless the environment names a path."""
    if os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL"):
        return {}
    memo = {"PREFECT_SERVER_MEMO_STORE_PATH": str(_memo_store())}
    if os.environ.get("PREFECT_SERVER_MEMO_STORE_PATH") or os.environ.get(
        "PREFECT_MEMO_STORE_PATH"
    ):
        memo = {}
    return {"PREFECT_API_DATABASE_CONNECTION_URL": MEMORY, **memo}


def configured_api() -> str | None:
    """The Prefect API URL this process's settings name (environment, profile or
    prefect.toml), or None when none is configured and a run needs a temporary one."""
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


#: Seconds a run waits for a configured API's `/health` before it refuses to start.
CHECK_SECONDS = 5.0


def check_configured(timeout: float = CHECK_SECONDS) -> str | None:
    """The configured Prefect API's URL (`configured_api`) once its `/health` answers
    200 within `timeout` seconds, or None when none is configured (a run then starts a
    temporary one). Called before any cluster starts: a URL that does not serve ended a
    run in a traceback after seconds, or hung it. Raises BadInput naming
    PREFECT_API_URL and what is wrong: not an http(s) URL, nothing listens there, no
    answer within `timeout`, an answer other than 200."""
    import urllib.error
    import urllib.parse

    from puzzlesweep.core import BadInput

    if (url := configured_api()) is None:
        return None
    named = f"PREFECT_API_URL {url}"
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port  # noqa: B018 (raises ValueError for a port that is no number)
    except ValueError:
        parts = parts._replace(netloc="")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(
            f"{named} is not an http:// or https:// URL such as http://127.0.0.1:4200/api"
        )
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout) as answer:
            status = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            raise BadInput(f"{named}: no answer within {timeout:g} s") from None
        if isinstance(reason, ConnectionRefusedError):
            raise BadInput(f"{named}: nothing listens there (connection refused)") from None
        raise BadInput(f"{named}: cannot be reached ({reason})") from None
    if status != 200:
        raise BadInput(f"{named}: its /health answered HTTP {status}, not a Prefect API's 200")
    return url


def serve() -> None:
    """The child: say `configured` and exit when Prefect's settings name an API, else
    serve the ephemeral API on a free port of 127.0.0.1 (said as `port N`)."""
    from puzzlesweep.isolate import _die_with_parent

    _die_with_parent()
    if configured_api():
        print("configured", flush=True)
        return
    import uvicorn

    keeper, filled = _memory_database()  # open while the server lives, and the database too
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    print(f"port {listener.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app(keeper, save=not filled), log_level="error", lifespan="on")
    uvicorn.Server(config).run(sockets=[listener])


def _template() -> Path:
    """The empty database of this Prefect version, as its migrations leave it (kept in
    the user's cache: XDG_CACHE_HOME, else ~/.cache)."""
    from importlib.metadata import version

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "puzzlesweep" / f"prefect-{version('prefect')}-empty.db"


def _memo_store() -> Path:
    """Prefect's memo that the block types are registered in `_template()` (its
    `memo_store.toml`), kept beside that copy and removed when the copy is rebuilt."""
    return _template().with_name(_template().name.replace("-empty.db", "-memo_store.toml"))


def _memory_database() -> "tuple[sqlite3.Connection | None, bool]":
    """When the API's database is `MEMORY`: (a connection that keeps it alive, whether
    it was filled from `_template()`), so that Prefect's migrations find nothing to do;
    else (None, False). A template that is not
    a whole SQLite database with Prefect's migration mark is not used (the migrations
    build the database, and the copy made afterwards replaces it)."""
    if os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL") != MEMORY:
        return None, False
    keeper = sqlite3.connect(SHARED_MEMORY, uri=True, check_same_thread=False)
    with suppress(OSError):  # where Prefect writes its memo (`_memo_store()`) on start
        _template().parent.mkdir(parents=True, exist_ok=True)
    try:
        with closing(sqlite3.connect(f"file:{_template()}?mode=ro", uri=True)) as template:
            template.backup(keeper)
        [(check,)] = keeper.execute("PRAGMA quick_check").fetchall()
        [(marks,)] = keeper.execute("SELECT count(*) FROM alembic_version").fetchall()
        if check == "ok" and marks == 1:
            return keeper, True
    except sqlite3.Error:  # none yet, or unreadable
        pass
    with closing(sqlite3.connect(":memory:")) as empty:
        empty.backup(keeper)  # whatever a bad copy left is gone
    with suppress(OSError):  # the new copy gets the block types registered again
        _memo_store().unlink(missing_ok=True)
    return keeper, False


def _save_template(keeper: "sqlite3.Connection") -> None:
    """Copy the database `keeper` holds, migrated and still empty, to `_template()`
    (written whole, then renamed). A cache that cannot be written is skipped: the next
    run migrates again; nothing about a cache may stop the API."""
    path = _template()
    partial = path.with_suffix(f".{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(partial)) as copy:
            keeper.backup(copy)
        os.replace(partial, path)
    except Exception:  # noqa: BLE001 (an OSError or sqlite3.Error of any kind)
        with suppress(OSError):
            partial.unlink(missing_ok=True)


def app(keeper: "sqlite3.Connection | None" = None, save: bool = False):
    """The ephemeral API's ASGI app: Prefect's public factory with the UI and background
    services off (`ephemeral`), the only app of its process (`final`). With `save`, the
    database that `keeper` holds (in memory) is copied to `_template()` once its
    start-up (the migrations) is done, before the first request."""
    from prefect.server.api.server import create_app

    api = create_app(ephemeral=True, final=True)
    if keeper is None or not save:
        return api
    started = api.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application):
        async with started(application) as state:
            _save_template(keeper)
            yield state

    api.router.lifespan_context = lifespan
    return api


if __name__ == "__main__":
    serve()


@contextmanager
def prefect_api(api: TemporaryAPI | None = None, keep: bool = False) -> Iterator[str]:
    """Point this process at the configured Prefect API, the API of the flow run this
    code runs in (a sweep inside a user's flow is its subflow), or a temporary API for
    the run (`api`, started earlier by the caller, or a new one; no UI URL: nothing links
    to it), stopped on exit unless `keep` (`shared_api`), once its queued log lines are
    sent. Yields the API URL. Raises APIError when the temporary API does not start."""
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL, temporary_settings

    temporary = not configured_api() and FlowRunContext.get() is None
    if api is not None and not temporary and not keep:
        api.stop()
    server = (api or TemporaryAPI()) if temporary else None
    try:
        url = server.url() if server else configured_api() or str(get_client().api_url)
        if url is None:  # its settings name an API that this process's settings do not
            raise RuntimeError("Prefect's settings differ between this process and its child")
        # a temporary API has no UI URL: a link into it is dead once the run ends
        updates = {PREFECT_API_URL: url, PREFECT_UI_URL: ""} if server else {}
        with temporary_settings(updates=updates):
            try:
                yield url
            finally:  # the run's last log lines are in the API when it stops or is read
                APILogWorker.drain_all(timeout=5)
    finally:
        if server is not None and not keep:
            server.stop()


_shared: list[TemporaryAPI] = []  # the one temporary API of `shared_api`, once started


def shared_api() -> TemporaryAPI | None:
    """One temporary Prefect API for every sweep of this process (a notebook's calls
    would each wait 5-20 s for their own), stopped at exit; None when an API is
    configured or a flow run is running here."""
    from prefect.context import FlowRunContext

    if configured_api() or FlowRunContext.get() is not None:
        return None
    if not _shared or _shared[0].process.poll() is not None:
        import atexit

        _shared[:] = [TemporaryAPI()]
        atexit.register(_shared[0].stop)
    return _shared[0]


def forget_old_api_clients(timeout: float = 5.0) -> int:
    """Stop this process's Prefect client services (logs, events, concurrency slots) and
    return how many there were: each keeps the API client of the run that started it,
    so on a Dask worker that outlived a run and its temporary API the next run's tasks
    asked the dead API for slots and failed. Pending items are sent first, for at most
    `timeout` seconds, in a thread of its own (this may run in the worker's loop)."""
    import sys
    import threading

    if "prefect._internal.concurrency.services" not in sys.modules:
        return 0  # Prefect never ran here: nothing to forget (and nothing to import)
    from prefect._internal.concurrency.services import QueueService

    with QueueService._instance_cache_lock:  # noqa: SLF001 (one table for every service)
        found = len(QueueService._instances)  # noqa: SLF001
    if found:
        stop = threading.Thread(target=QueueService.drain_all, args=(timeout,), daemon=True)
        stop.start()
        stop.join(timeout + 1)
    return found
