"""Where the catalog lives and which of its files are visible: one code path over
pyarrow filesystems (a local directory, a `file://` URL, or any URL pyarrow opens).

Layout under the root:

    family=NAME/part-RUN_ID-BATCH.parquet     one file per batch (a result file)
    family=NAME/compact-STAMP-ID.parquet      the output of `catalog compact`
    _commits/STAMP-ID.json                    one compaction commit record each
    _runs/run-RUN_ID.parquet                  one run manifest row each
    .../.NAME.tmp                             a file being written (never read)

Every file is written under a hidden temporary name in its final directory and moved
into place (an atomic rename locally; a single atomic PUT-by-copy on object stores), so
a reader never sees half a file.

Visibility (the commit protocol of compaction): a reader first reads the commit records,
then lists the files. A `part-*` file is visible unless a commit removed it; a
`compact-*` file is visible only once a commit added it. Commits apply in name order; a
commit that removes a file an earlier commit already removed lost a race and is ignored
(its output stays hidden). Because a compaction writes its output before its commit
record, and readers read records before listing, a reader never sees both a merged file
and its inputs, nor neither. Removed files are deleted only after a grace period, so
readers holding an older snapshot keep working (DESIGN.md: deleting files under readers
broke them).

Roads not taken:
- A table format with a transaction log every writer appends to (Delta Lake, Iceberg):
  each batch would need a conditional write or a lock shared by all writers and Dask
  workers; here batch writers never coordinate, only compaction commits.
- Deleting a compaction's inputs at once: concurrent readers failed (DESIGN.md).
- A `**` glob in the view: a stray file breaks it, and it cannot hide merged-away
  files; readers get an explicit list of the visible files instead.
- Keeping `family` inside the files: DuckDB silently takes the directory's value
  anyway, so a file that disagreed would be misread without a word.
"""

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from puzzlesweep.core import BadInput

COMMITS = "_commits"
RUNS = "_runs"


@dataclass(frozen=True)
class Location:
    """A catalog root: a pyarrow filesystem and the root path inside it."""

    fs: pafs.FileSystem
    root: str
    uri: str

    @property
    def local(self) -> bool:
        """Is this the local file system (where fsync and DuckDB's own reader apply)?"""
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        """The filesystem path of `parts` under the root."""
        return "/".join([self.root.rstrip("/"), *[p for p in parts if p]])

    def relative(self, path: str) -> str:
        """`path` relative to the root, with `/` separators."""
        return path[len(self.root.rstrip("/")) + 1 :]


def locate(catalog: "str | Path | Location") -> Location:
    """The Location of `catalog`: a directory path, a `file://` URL, a URL that
    pyarrow's `FileSystem.from_uri` opens (s3://, gs://, hdfs://), or else one that
    fsspec opens, wrapped as a pyarrow filesystem. Raises BadInput for a URL neither
    opens, or a path that exists and is not a directory."""
    if isinstance(catalog, Location):
        return catalog
    text = str(catalog)
    if "://" in text:
        try:
            fs, root = pafs.FileSystem.from_uri(text)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            fs, root = _fsspec(text, exc)
    else:
        fs, root = pafs.LocalFileSystem(), os.path.abspath(text)
    location = Location(fs, root.rstrip("/") or "/", text)
    if fs.get_file_info(location.root).type == pafs.FileType.File:
        raise BadInput(f"catalog {text} exists and is not a directory")
    return location


def _fsspec(url: str, arrow_error: Exception) -> tuple[pafs.FileSystem, str]:
    """A URL pyarrow has no native filesystem for, through fsspec wrapped as a pyarrow
    filesystem (memory://, abfs://, ... with their fsspec packages installed)."""
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError, OSError) as exc:
        raise BadInput(
            f"catalog {url}: cannot open this location: {arrow_error}; fsspec: {exc}"
        ) from None
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), root


def exists(location: Location) -> bool:
    """Does the catalog root exist?"""
    return location.fs.get_file_info(location.root).type == pafs.FileType.Directory


def _fsync(location: Location, path: str) -> None:
    """Flush a file (or directory entry) to disk; a no-op off the local file system."""
    if not location.local:
        return
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_table(
    location: Location, table: pa.Table, directory: str, name: str, partition: str | None = None
) -> str:
    """Write `table` as the one Parquet file `directory/name` (relative to the root),
    atomically, with pyarrow datasets; returns its path. With `partition` (a column of
    `table`), `directory` is the root and the file goes to `partition=VALUE/` (Hive);
    the table must then hold a single value of it, which is left out of the file.

    Written under a hidden temporary name in the final directory, fsynced (locally),
    then moved onto `name`: an existing file of that name is replaced whole."""
    written: list[str] = []
    partitioning = None
    base = location.path(directory)
    if partition is not None:
        values = table.column(partition).unique()
        if len(values) != 1:
            raise ValueError(f"a file holds one {partition}, not {values.to_pylist()}")
        partitioning = ds.partitioning(pa.schema([(partition, pa.string())]), flavor="hive")
        directory = f"{directory}/{partition}={values[0].as_py()}".lstrip("/")
    token = uuid.uuid4().hex[:12]
    ds.write_dataset(
        table,
        base,
        filesystem=location.fs,
        format="parquet",
        partitioning=partitioning,
        basename_template=f".{name}.{token}-{{i}}.tmp",
        existing_data_behavior="overwrite_or_ignore",
        file_options=ds.ParquetFileFormat().make_write_options(compression="zstd"),
        file_visitor=lambda written_file: written.append(written_file.path),
        max_rows_per_file=0,
        create_dir=True,
        preserve_order=True,  # rows in the order given: compaction keeps them as read
    )
    (temporary,) = written
    final = location.path(directory, name)
    _fsync(location, temporary)
    location.fs.move(temporary, final)
    _fsync(location, location.path(directory))
    return final


def write_json(location: Location, directory: str, name: str, payload: dict) -> str:
    """Write `payload` as JSON to `directory/name` atomically (temporary name, move)."""
    location.fs.create_dir(location.path(directory), recursive=True)
    temporary = location.path(directory, f".{name}.{uuid.uuid4().hex[:12]}.tmp")
    with location.fs.open_output_stream(temporary) as sink:
        sink.write(json.dumps(payload, sort_keys=True).encode())
    _fsync(location, temporary)
    final = location.path(directory, name)
    location.fs.move(temporary, final)
    _fsync(location, location.path(directory))
    return final


@dataclass
class Snapshot:
    """What a reader sees at one moment. Paths are filesystem paths.

    files: the visible result files; removed: files hidden by an applied commit (still
    on disk until the grace period ends); pending: compaction outputs without an
    applied commit (in progress, crashed, or lost a race); temporary: `.*.tmp` files;
    strays: anything else; runs: the manifest files; commits: (name, record) applied,
    in order; mtimes: path → modification time (seconds since the epoch)."""

    location: Location
    files: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    temporary: list[str] = field(default_factory=list)
    strays: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    commits: list[tuple[str, dict]] = field(default_factory=list)
    mtimes: dict[str, float] = field(default_factory=dict)


def _records(location: Location) -> list[tuple[str, dict]]:
    """Every commit record, in name order."""
    selector = pafs.FileSelector(location.path(COMMITS), allow_not_found=True)
    found = []
    for info in location.fs.get_file_info(selector):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".json"):
            continue
        with location.fs.open_input_stream(info.path) as source:
            found.append((info.base_name, json.loads(source.read())))
    return sorted(found, key=lambda item: item[0])


def snapshot(location: Location) -> Snapshot:
    """The visible state of the catalog: commit records first, then the listing (the
    order the commit protocol needs; see the module docstring). Empty when the root
    does not exist."""
    shot = Snapshot(location)
    if not exists(location):
        return shot
    removed: set[str] = set()
    added: set[str] = set()
    for name, record in _records(location):
        if removed.intersection(record["remove"]):
            continue  # lost a race with an earlier commit: its output stays hidden
        removed.update(record["remove"])
        added.update(record["add"])
        shot.commits.append((name, record))
    selector = pafs.FileSelector(location.root, recursive=True, allow_not_found=True)
    for info in location.fs.get_file_info(selector):
        if info.type != pafs.FileType.File:
            continue
        relative = location.relative(info.path)
        parts = relative.split("/")
        shot.mtimes[info.path] = info.mtime.timestamp() if info.mtime else time.time()
        if info.base_name.startswith(".") and info.base_name.endswith(".tmp"):
            shot.temporary.append(info.path)
        elif parts[0] == COMMITS and len(parts) == 2:
            continue
        elif parts[0] == RUNS and len(parts) == 2 and info.base_name.endswith(".parquet"):
            shot.runs.append(info.path)
        elif len(parts) != 2 or not parts[0].startswith("family=") or info.extension != "parquet":
            shot.strays.append(info.path)
        elif relative in removed:
            shot.removed.append(info.path)
        elif info.base_name.startswith("compact-") and relative not in added:
            shot.pending.append(info.path)
        else:
            shot.files.append(info.path)
    for listing in (shot.files, shot.removed, shot.pending, shot.temporary, shot.strays):
        listing.sort()
    shot.runs.sort()
    return shot
