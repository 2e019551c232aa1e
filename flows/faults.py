"""Which failures of a batch are worth another attempt, and which stop the run.

A batch that fails on a flaky commit (two writers racing, a storage hiccup) is retried by
Prefect; one that fails because the catalog cannot be written at all (permission denied,
a read-only or full file system, a catalog that is not a catalog) fails the same way on
every attempt and on every later batch, so the run stops at the first batch that meets
it, with one line. A solver stopped from outside (`isolate.Interrupted`) is not retried
either: the run is being stopped.

`permanent(exc)` tells them apart; `retry_transient` is the `retry_condition_fn` of the
batch task. deltalake reports a file system error as a plain OSError whose message ends
in the operating system's `(os error N)`, without `errno` set, so both are looked at.

Roads not taken: retrying everything a fixed number of times (on an immutable catalog it
made 444 errors and 3,002 log lines in 4 minutes); checking the catalog's
writability before each batch (a race, and the cost of a write per batch).
"""

import errno
import re
import threading
from collections.abc import Callable

from puzzlesweep.core import BadInput

#: errno values that no retry can cure.
PERMANENT_ERRNOS = {
    errno.EPERM,
    errno.EACCES,
    errno.EROFS,
    errno.ENOSPC,
    errno.EDQUOT,
    errno.ENOTDIR,
    errno.EISDIR,
}
OS_ERROR = re.compile(r"\(os error (\d+)\)")


class RunStopped(RuntimeError):
    """The run stopped at a batch that met an error no retry can fix; the message is the
    one line to show (what happened, and that what was written is kept)."""


class CatalogUnwritable(RuntimeError):
    """A batch could not write the catalog, and retrying cannot help (its message names
    the cause). A plain exception, so that it crosses from a Dask worker intact."""


def _errno(exc: BaseException) -> int | None:
    """The operating system's error number of `exc`: its `errno`, else the last
    `(os error N)` of its message (deltalake's way)."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc.errno
    found = OS_ERROR.findall(str(exc))
    return int(found[-1]) if found else None


def permanent(exc: BaseException) -> bool:
    """Is `exc` (or any exception it was raised from) one that retrying cannot fix: a
    permission, read-only, no-space or quota error, a catalog that is not a catalog
    (BadInput, deltalake's TableNotFoundError or SchemaMismatchError), an object store
    that refuses or does not answer (CatalogUnreachable), or our own CatalogUnwritable,
    RunStopped or isolate.Interrupted?"""
    from puzzlesweep.isolate import Interrupted

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, CatalogUnwritable | RunStopped | Interrupted | BadInput):
            return True
        if type(exc).__name__ in (
            "TableNotFoundError",
            "SchemaMismatchError",
            "CatalogUnreachable",
        ):
            return True
        if _errno(exc) in PERMANENT_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


#: Bytes a local catalog's disk must have free before a batch or heartbeat writes: a
#: write that runs out of space midway makes deltalake's object store panic ("Already
#: shut down", printed by each worker), so a disk this close to full counts as full.
MARGIN_BYTES = 256 * 1024


def _free_kb(catalog_path: str) -> int | None:
    """KB free on the disk of a local catalog (its nearest existing directory), None for
    an object store or a disk that cannot be asked."""
    import os
    import shutil

    from puzzlesweep.catalog import locate

    location = locate(catalog_path)
    if not location.local:
        return None
    path = location.uri
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        return shutil.disk_usage(path).free // 1024
    except OSError:
        return None


def disk_full(exc: BaseException | None, catalog_path: str) -> str | None:
    """One line naming a local catalog's full disk, "the catalog's disk DIR is full (N KB
    free)", when `exc` (or an exception it was raised from) is a full disk or quota
    (ENOSPC, EDQUOT), or, with `exc` None, when the disk has less than `MARGIN_BYTES`
    free; else None (also for an object store)."""
    checked, seen, full = exc is None, set(), exc is None
    while exc is not None and id(exc) not in seen and not full:
        seen.add(id(exc))
        full = _errno(exc) in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(exc)
        exc = exc.__cause__ or exc.__context__
    free = _free_kb(catalog_path) if full else None
    if free is None or (checked and free * 1024 >= MARGIN_BYTES):
        return None
    return f"the catalog's disk {catalog_path} is full ({free:,} KB free)"


def first_line(exc: BaseException) -> str:
    """`exc` as one short line: its type and the first line of its message, without
    the colour codes deltalake puts in."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip(" ↳") for line in text.splitlines() if line.strip(" ↳")]
    return f"{type(exc).__name__}: {' / '.join(lines)[:300]}"


def retry_transient(task, task_run, state) -> bool:
    """The batch task's `retry_condition_fn`: retry (True) unless the failure in `state`
    is `permanent`."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            exc = state.result(raise_on_failure=False)
        except Exception as error:  # noqa: BLE001 (a result that cannot be read: retry)
            exc = error
    return not (isinstance(exc, BaseException) and permanent(exc))


def within(seconds: float, call: Callable[[], object]) -> None:
    """Run `call` for at most `seconds` (in a daemon thread), dropping what it raises: a
    scheduler that does not answer must not hold up a run's stop, and one that is gone
    runs no batch that could commit."""

    def quietly() -> None:
        try:
            call()
        except Exception:  # noqa: BLE001
            pass

    thread = threading.Thread(target=quietly, daemon=True)
    thread.start()
    thread.join(seconds)


def interrupted(exc: BaseException) -> bool:
    """Did `exc` come from an interrupt: a KeyboardInterrupt or Prefect's
    TerminationSignal, itself, as its cause or context, or named in the message of an
    error that wrapped it (pydantic-core turns an interrupt inside a serializer, such as
    prefect-dask's of a task's context, into a PydanticSerializationError naming it)?"""
    from prefect.exceptions import TerminationSignal

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt | TerminationSignal):
            return True
        if "KeyboardInterrupt" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
