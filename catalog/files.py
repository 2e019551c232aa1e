"""A table's data files against its log and the storage: the files a loaded version
holds (`data_files`), those of them gone from the storage (`missing_files`: a vacuum,
or a loss) or unreadable (`damaged_files`), and the files under `results/` that no
commit names (`orphaned_files`; all of them when the log itself is lost,
`lost_log_files`). `maintenance` repairs what these find; readers refuse it.
"""

import os
import posixpath
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from puzzlesweep.catalog.store import RESULTS, Location, commits, filesystem, is_table, open_table


def data_files(table) -> list[str]:
    """The data files of `table`'s current version, relative to the table root."""
    actions = pa.table(table.get_add_actions(flatten=True))
    return sorted(unquote(path) for path in actions.column("path").to_pylist())


def missing_files(location: Location, table) -> list[str]:
    """The data files of `table`'s loaded version (relative to the catalog root) that
    are no longer in the storage (deleted by a vacuum, or lost)."""
    name = posixpath.basename(table.table_uri.rstrip("/"))
    actions = pa.table(table.get_add_actions(flatten=True))
    paths = [f"{name}/{unquote(p)}" for p in actions.column("path").to_pylist()]
    infos = filesystem(location).get_file_info(paths)
    return [info.path for info in infos if info.type == pafs.FileType.NotFound]


def damaged_files(location: Location, table, whole: bool = False) -> list[tuple[str, str]]:
    """(path relative to the catalog root, what is wrong) of every data file of `table`
    (a results or runs DeltaTable, or None) that is missing or cannot be read: its
    footer, or with `whole` every page."""
    if table is None:
        return []
    fs = filesystem(location)
    name = posixpath.basename(table.table_uri.rstrip("/"))
    found = []
    for relative in data_files(table):
        path = f"{name}/{relative}"
        try:
            if whole:
                pq.read_table(path, filesystem=fs)
            else:
                pq.read_metadata(path, filesystem=fs)
        except FileNotFoundError:
            found.append((path, "missing"))
        except (OSError, pa.ArrowException) as exc:
            found.append((path, str(exc).splitlines()[0][:200]))
    return found


def orphaned_files(location: Location) -> list[str]:
    """The data files under `results/` (paths relative to the catalog root) that no
    readable commit adds or removes and the table (if it loads) does not hold: rows
    whose commit was lost or set aside. Raises OSError from the storage."""
    fs = filesystem(location)
    selector = pafs.FileSelector(RESULTS, recursive=True, allow_not_found=True)
    on_disk = {
        info.path
        for info in fs.get_file_info(selector)
        if info.type == pafs.FileType.File
        and info.base_name.endswith(".parquet")
        and "_delta_log" not in info.path
    }
    known = {
        f"{RESULTS}/{unquote(action[kind]['path'])}"
        for actions in commits(location, RESULTS).values()
        for action in actions
        for kind in ("add", "remove")
        if kind in action
    }
    table = open_table(location, RESULTS)
    current = {f"{RESULTS}/{p}" for p in data_files(table)} if table is not None else set()
    return sorted(on_disk - known - current)


def lost_log_files(location: Location) -> list[str]:
    """The data files of `results` (relative to the catalog root) when its transaction
    log is lost (no `results/_delta_log`); empty otherwise."""
    if is_table(location, RESULTS):
        return []
    if location.local and not os.path.isdir(location.table(RESULTS)):
        return []  # (delta-rs's storage layer refuses a directory that does not exist)
    return orphaned_files(location)
