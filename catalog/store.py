"""Where a catalog lives and how its two Delta tables are opened and written.

A catalog is a directory or an object-store URL holding two Delta Lake tables, written
and read through `deltalake` (delta-rs):

    CATALOG/results/    one row per solved instance, partitioned by `family`
    CATALOG/runs/       one row per run: state, counts, heartbeat

A commit of results carries the application transaction (`app_id`, version 1) of each
batch in it: a writer that finds one already committed writes nothing, and two commits
of the same `app_id` cannot both land (delta-rs rejects the second), so a batch is stored
once. Other conflicts retry (`COMMIT_RETRIES`; the default 15 lost 2 of 400 commits with
4 writers here). The commit info records the instance keys (`puzzlesweep.keys`), so a
data file lost to damage is traced to its instances (`maintenance.repair`).

Object stores take the standard `AWS_*` environment variables (`AWS_ENDPOINT_URL`,
`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`), which
delta-rs reads itself; on `s3://` concurrent writers coordinate by conditional puts
(`conditional_put=etag`, measured with SeaweedFS: 3 processes x 30 appends, 0 lost).

Roads not taken:
- The directory of Parquet files with a commit protocol of our own (before this module):
  outside tools misread it, and a compaction hid a rewritten file.
- A `batch` column for idempotence: the application transaction is Delta's own answer.
- Replacing a run's row with `merge`: a predicate overwrite (`run_id = ...`) is the same
  commit with less machinery.
"""

import json
import os
import random
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from puzzlesweep.core import BadInput

RESULTS = "results"
RUNS = "runs"
COMMIT_RETRIES = 1000  # per commit, against other writers' commits (docs/architecture.md)
KEYS = "puzzlesweep.keys"  # commit info entry: JSON list of the batch's params keys


class CatalogDamaged(Exception):
    """A data file of the catalog cannot be read (truncated, garbage, missing). The
    message names the file and what to do: `catalog check`, then `catalog repair`."""


class CatalogUnreachable(CatalogDamaged):
    """The object store of a catalog does not answer (connection refused or timed out
    after delta-rs's own retries, `OBJECT_STORE_OPTIONS`) or refuses it (no such
    bucket, wrong keys). One line naming the catalog; retrying a batch cannot help."""


#: What delta-rs's object-store errors say when the store is gone or refuses us.
UNREACHABLE = {
    "no such bucket": re.compile(r"NoSuchBucket"),
    "access denied (check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)": re.compile(
        r"SignatureDoesNotMatch|InvalidAccessKeyId|AccessDenied|403 Forbidden"
    ),
    "the server does not answer": re.compile(
        r"error sending request|tcp connect error|[Cc]onnection refused|dns error|timed out"
    ),
}
#: How to make a missing bucket, said with "no such bucket" (docs/catalog.md's recipe).
MAKE_BUCKET = (
    "make it with any S3 client (`aws s3 mb s3://{bucket}`; SeaweedFS: `echo "
    "'s3.bucket.create -name {bucket}' | weed shell`), see docs/catalog.md"
)
#: Object-store client options (delta-rs's storage options) that bound how long a
#: request to a store that stopped answering is retried: a catalog that is gone ends a
#: run in seconds rather than after delta-rs's default of 180 s per request.
OBJECT_STORE_OPTIONS = {"retry_timeout": "10s", "connect_timeout": "5s"}


@contextmanager
def reaching(location: "Location") -> Iterator[None]:
    """Inside: an object-store error saying the store is gone or refuses us becomes
    CatalogUnreachable naming the catalog; every other error passes unchanged."""
    try:
        yield
    except Exception as exc:
        if location.local:
            raise
        for reason, pattern in UNREACHABLE.items():
            if pattern.search(str(exc)):
                if reason == "no such bucket":
                    bucket = location.uri.split("://", 1)[1].split("/", 1)[0]
                    reason += f" {bucket}: {MAKE_BUCKET.format(bucket=bucket)}"
                raise CatalogUnreachable(
                    f"catalog {location.uri} is unreachable: {reason}"
                ) from None
        raise


@dataclass(frozen=True)
class Location:
    """A catalog root: `uri` (an absolute local path, or a URL such as s3://bucket/path)
    and the `storage_options` that delta-rs needs for it beyond the environment."""

    uri: str
    storage_options: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def local(self) -> bool:
        """Is this a directory on the local disk?"""
        return "://" not in self.uri

    def table(self, name: str) -> str:
        """The URI of table `name` (`results` or `runs`)."""
        return f"{self.uri.rstrip('/')}/{name}"


def locate(catalog: "str | Path | Location") -> Location:
    """The Location of `catalog`: a directory path, a `file://` URL, or an object-store
    URL that delta-rs opens (s3://, gs://, az://, abfss://). Raises BadInput for a path
    that exists and is not a directory, a path through a symbolic link that leads
    nowhere (`broken_link`), or a URL scheme delta-rs does not know."""
    if isinstance(catalog, Location):
        return catalog
    text = str(catalog)
    if text.startswith("file://"):
        text = text.removeprefix("file://")
    if "://" not in text:
        path = os.path.abspath(text)
        if os.path.exists(path) and not os.path.isdir(path):
            raise BadInput(f"catalog {catalog} exists and is not a directory")
        if why := broken_link(path):
            raise BadInput(f"catalog {catalog}: {why}")
        return Location(path)
    scheme = text.split("://", 1)[0].lower()
    if scheme not in ("s3", "s3a", "gs", "az", "abfs", "abfss"):
        raise BadInput(f"catalog {catalog}: unknown scheme {scheme}:// (use a path or s3://)")
    options = {"conditional_put": "etag"} if scheme.startswith("s3") else {}
    options.update(OBJECT_STORE_OPTIONS)
    return Location(text.rstrip("/"), options)


def broken_link(path: str) -> str | None:
    """What is wrong when `path`, or the nearest of its folders that is not there, is a
    symbolic link that leads nowhere (a dangling link, a loop of links): nothing can be
    created through it. None otherwise."""
    import errno

    while not os.path.exists(path) and os.path.dirname(path) != path:
        if os.path.islink(path):
            try:
                os.stat(path)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    return f"{path} is a loop of symbolic links"
                return f"{path} is a symbolic link to {os.readlink(path)}, which does not exist"
        path = os.path.dirname(path)
    return None


def is_table(location: Location, name: str) -> bool:
    """Does table `name` exist (a Delta log) at `location`?"""
    from deltalake import DeltaTable

    if location.local:
        return os.path.isdir(os.path.join(location.table(name), "_delta_log"))
    with reaching(location):
        return DeltaTable.is_deltatable(location.table(name), location.storage_options)


def open_table(location: Location, name: str):
    """The DeltaTable `name` at its latest version (`versions.open_as_of` opens an
    earlier one), or None when the table does not exist. Raises BadInput for a table of
    another tool (`schema.refuse_foreign`), CatalogDamaged (naming the file) when the
    latest version cannot be loaded."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    if not is_table(location, name):
        return None
    try:
        with reaching(location):
            table = DeltaTable(location.table(name), storage_options=location.storage_options)
    except TableNotFoundError:
        return None
    except (DeltaError, ValueError) as exc:
        reason = first_line(exc)
        if damaged := damaged_commits(location, name):
            raise CatalogDamaged(
                f"catalog {location.uri}: commit file {damaged[0]} is damaged ({reason}); "
                "run `puzzlesweep catalog check`, then `puzzlesweep catalog repair` to set "
                "it aside"
            ) from None
        raise CatalogDamaged(f"catalog {location.uri}: {name} cannot be read: {reason}") from None
    from puzzlesweep.catalog.schema import refuse_foreign

    refuse_foreign(location.uri, name, table.schema().to_arrow().names)
    return table


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (delta-rs appends a multi-line backtrace
    when RUST_BACKTRACE is set), at most 200 characters."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def damaged_commits(location: Location, name: str) -> list[str]:
    """The commit files of table `name` (paths relative to the catalog root, oldest
    first) from the first one that is not JSON lines (truncated, garbled) to the newest:
    delta-rs cannot load any version from it on. Empty for a healthy log."""
    if location.local and not os.path.isdir(location.table(name)):
        return []
    fs = filesystem(location)
    selector = pafs.FileSelector(f"{name}/_delta_log", allow_not_found=True)
    paths = sorted(
        info.path
        for info in fs.get_file_info(selector)
        if info.base_name.endswith(".json") and info.base_name.removesuffix(".json").isdigit()
    )
    for number, path in enumerate(paths):
        try:
            with fs.open_input_stream(path) as source:
                lines = source.read().decode().splitlines()
            if not all(isinstance(json.loads(line), dict) for line in lines if line.strip()):
                raise ValueError("not an action")
        except (ValueError, UnicodeDecodeError):
            return paths[number:]
    return []


def filesystem(location: Location) -> "pafs.FileSystem":
    """A pyarrow filesystem rooted at the catalog (`results/family=x/...`), through
    delta-rs's storage layer: it reaches whatever the tables do."""
    from deltalake.fs import DeltaStorageHandler

    return pafs.PyFileSystem(DeltaStorageHandler(location.uri, location.storage_options))


def move(location: Location, paths: list[str], folder: str) -> None:
    """Move `paths` (relative to the catalog root) under `folder` (relative too), each
    keeping its relative path: how a repair sets files aside. Raises OSError."""
    fs = filesystem(location) if paths else None
    for path in paths:
        target = f"{folder}/{path}"
        fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        fs.move(path, target)


def _committed(table, app_ids: Sequence[str]) -> set[str]:
    """Those of `app_ids` that a commit of `table` (brought up to date) carries."""
    table.update_incremental()
    return {app_id for app_id in app_ids if table.transaction_version(app_id) is not None}


def append(
    location: Location,
    name: str,
    rows: pa.Table,
    app_ids: Sequence[str] = (),
    keys: list[str] | None = None,
    partition_by: list[str] | None = None,
) -> bool:
    """Append `rows` to table `name` (created on first use) as one commit carrying each
    of `app_ids` as a Delta application transaction, unless a commit carries one of them
    already: then nothing is written and False returned (`committed_of` names them).
    `keys` go into the commit info (`KEYS`); new columns evolve the schema by merge.
    Raises deltalake's CommitFailedError after `COMMIT_RETRIES` lost races, and OSError
    (PermissionError, no space...) from the storage."""
    from deltalake import CommitProperties, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError

    table = open_table(location, name)
    if app_ids and table is not None and _committed(table, app_ids):
        return False
    properties = CommitProperties(
        custom_metadata={KEYS: json.dumps(keys)} if keys is not None else None,
        max_commit_retries=COMMIT_RETRIES,
        app_transactions=[Transaction(app_id, 1) for app_id in app_ids] or None,
    )
    try:
        with reaching(location):
            write_deltalake(
                table if table is not None else location.table(name),
                rows,
                partition_by=partition_by,
                mode="append",
                schema_mode="merge",
                storage_options=location.storage_options,
                commit_properties=properties,
            )
    except CommitFailedError:
        # a concurrent attempt of the same app ids won (the conflict checker refuses the
        # second), or the table was created by another writer in the meantime
        table = open_table(location, name)
        if app_ids and table is not None and _committed(table, app_ids):
            return False
        if table is None:
            raise
        return append(location, name, rows, app_ids, keys, partition_by)
    return True


def committed_of(location: Location, name: str, app_ids: Sequence[str]) -> set[str]:
    """Those of `app_ids` that a commit of table `name` carries (none: no table yet)."""
    table = open_table(location, name)
    return set() if table is None else _committed(table, app_ids)


def replace(
    location: Location,
    name: str,
    rows: pa.Table,
    predicate: str,
    attempts: int = 20,
    metadata: dict[str, str] | None = None,
):
    """Replace the rows of table `name` that match `predicate` (SQL, e.g. "run_id = 'X'")
    by `rows`, in one commit (a predicate overwrite) whose commit info carries
    `metadata`; creates the table on first use. Concurrent replacements of other rows
    may conflict: each attempt re-reads and retries, `attempts` in all, then raises
    deltalake's CommitFailedError."""
    from deltalake import CommitProperties
    from deltalake.exceptions import CommitFailedError

    properties = CommitProperties(custom_metadata=metadata, max_commit_retries=COMMIT_RETRIES)
    for attempt in range(attempts):
        table = open_table(location, name)
        try:
            with reaching(location):
                _replace_once(location, name, table, rows, predicate, properties)
            return
        except CommitFailedError:
            if attempt == attempts - 1:
                raise
            time.sleep(random.uniform(0.05, 0.3))


def _replace_once(location: Location, name: str, table, rows, predicate, properties) -> None:
    """One attempt of `replace`: create the table with `rows`, or overwrite `predicate`."""
    from deltalake import write_deltalake

    if table is None:
        write_deltalake(
            location.table(name),
            rows,
            mode="append",
            storage_options=location.storage_options,
            commit_properties=properties,
        )
    else:
        write_deltalake(
            table,
            rows,
            mode="overwrite",
            predicate=predicate,
            schema_mode="merge",
            commit_properties=properties,
        )


def commits(location: Location, name: str, after: int = -1) -> dict[int, list[dict]]:
    """Version → the actions of its commit, for the versions of table `name` above
    `after`, read from its `_delta_log/*.json` (the Delta protocol's commit files;
    versions whose file was cleaned up are absent). Raises OSError from the storage and
    ValueError for a commit file that is not JSON lines."""
    fs = filesystem(location)
    selector = pafs.FileSelector(f"{name}/_delta_log", allow_not_found=True)
    log = {}
    for info in fs.get_file_info(selector):
        stem = info.base_name.removesuffix(".json")
        if info.base_name.endswith(".json") and stem.isdigit() and int(stem) > after:
            with fs.open_input_stream(info.path) as source:
                text = source.read().decode()
            log[int(stem)] = [json.loads(line) for line in text.splitlines() if line.strip()]
    return log


def exists(catalog: "str | Path | Location") -> bool:
    """Does `catalog` hold a results or runs table?"""
    location = locate(catalog)
    return is_table(location, RESULTS) or is_table(location, RUNS)
