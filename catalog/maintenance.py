"""Keeping a catalog healthy: check, repair and history (`compaction.compact` merges
and vacuums, `legacy.migrate` copies the old layout).

- `check` reads every data file of `results` and `runs` whole and names each one that
  is missing or cannot be read, and any result stored twice by one run.
- `repair` takes damaged files out of `results` with one Delta commit (the files move to
  `CATALOG/damaged/`), and names the instances whose rows were lost, from the commit
  info that every batch commit carries (`store.KEYS`); a re-run of the sweep then solves
  exactly those again, since nothing else is missing.
"""

import json
import posixpath
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from puzzlesweep.catalog.files import damaged_files, lost_log_files, orphaned_files
from puzzlesweep.catalog.read import dataset, query
from puzzlesweep.catalog.runs import lease
from puzzlesweep.catalog.store import (
    KEYS,
    RESULTS,
    RUNS,
    Location,
    commits,
    damaged_commits,
    exists,
    filesystem,
    locate,
    move,
    open_table,
)
from puzzlesweep.core import DONE_KEY, BadInput

if TYPE_CHECKING:
    from puzzlesweep.catalog.rebuild import Rebuilt

DAMAGED = "damaged"  # CATALOG/damaged/VERSION/PATH: files taken out by `repair`


@dataclass(frozen=True)
class Problem:
    """One finding of `check`: `path` (a data file relative to the catalog root, or an
    instance key), `kind` (missing, unreadable, duplicate) and a message."""

    path: str
    kind: str
    message: str


def _commit_message(path: str, number: int) -> str:
    if number == 0:
        return "not a readable Delta commit (truncated or garbled); no version from it on loads"
    return "comes after a damaged commit, so it cannot be loaded either"


def check(catalog) -> list[Problem]:
    """Read every data file of the catalog whole and return the problems: data files
    of `results` without its transaction log (`lost_log_files`), damaged commit files
    of either table's log (then nothing else is looked at), missing or
    unreadable files, then (only when every file reads) a (run, instance, solver,
    limits) stored more than once. Empty: healthy. Raises BadInput for a missing
    catalog."""
    location = locate(catalog)
    if lost_log := lost_log_files(location):
        why = "no transaction log refers to it (results/_delta_log is lost)"
        return [Problem(path, "orphaned", why) for path in lost_log]
    if not exists(location):
        raise BadInput(f"catalog {location.uri} does not exist")
    problems = [
        Problem(path, "damaged commit", _commit_message(path, number))
        for name in (RESULTS, RUNS)
        for number, path in enumerate(damaged_commits(location, name))
    ]
    if problems:
        return problems  # no version from a damaged commit on can be loaded
    for name in (RESULTS, RUNS):
        for path, why in damaged_files(location, open_table(location, name), whole=True):
            kind = "missing" if why == "missing" else "unreadable"
            problems.append(Problem(path, kind, why))
    if not problems and open_table(location, RESULTS) is not None:
        _, rows = query(
            location,
            f"SELECT {RESULT_KEY}, count(*) FROM results "
            "GROUP BY ALL HAVING count(*) > 1 ORDER BY ALL",
        )
        for run_id, key, solver, limit, nodes, count in rows:
            message = f"{count} results in run {run_id} ({solver}, {limit} s, {nodes} nodes)"
            problems.append(Problem(key, "duplicate", message))
    return problems


def lost_keys(location: Location, paths: list[str]) -> list[str] | None:
    """The params keys of the rows in the data files `paths` (relative to the table
    root): from the commit that added each file (`store.KEYS`), following a compaction
    back to the files it merged. None when the log no longer tells."""
    added, keys_of = {}, {}
    for version, actions in sorted(commits(location, RESULTS).items()):
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        removed = [unquote(a["remove"]["path"]) for a in actions if "remove" in a]
        for action in actions:
            if "add" in action:
                added[unquote(action["add"]["path"])] = (info, removed)
        keys_of[version] = info
    found: set[str] = set()

    def collect(path: str) -> bool:
        if path not in added:
            return False
        info, removed = added[path]
        if KEYS in info:
            found.update(json.loads(info[KEYS]) or [])
            return True
        # a compaction: its output holds the inputs of the same partition (directory)
        inputs = [p for p in removed if posixpath.dirname(p) == posixpath.dirname(path)]
        return bool(inputs) and all(collect(p) for p in inputs)

    return sorted(found) if all(collect(p) for p in paths) else None


def repair(catalog) -> dict:
    """Under the maintenance lease (`runs.lease`): take every missing or unreadable data
    file out of `results` in one Delta commit (unreadable files move to
    `CATALOG/damaged/VERSION/`), then remove the rows stored more than once by one run
    (a past double compaction). Damaged commit files are set aside first, with the data
    files only they held (`CATALOG/damaged/log-TIME/`), and a lost log is rebuilt
    (`rebuild.rebuild`). Returns {"removed": [paths], "lost": [params keys] or None
    when they cannot be named, "duplicates": rows removed, "rebuilt": a
    `rebuild.Rebuilt` or None, "version": the table version after the repair, or None
    when nothing was wrong}. Raises BadInput for a missing catalog or while another
    maintenance command holds the lease."""
    location = locate(catalog)
    aside, folder = _set_aside_commits(location)
    rebuilt = _rebuild(location)
    if open_table(location, RESULTS) is None:
        raise BadInput(f"catalog {location.uri} has no results table")
    with lease(location, "repair"):
        report = _remove_damaged(location)
        report["rebuilt"] = rebuilt
        if aside:
            report["commits"] = aside
            orphans = orphaned_files(location)
            report["lost"] = sorted(set(report["lost"] or []) | set(_orphaned_keys(location)))
            move(location, orphans, folder)  # a later rebuild must not take them in
            report["version"] = open_table(location, RESULTS).version()
        if rebuilt is not None and rebuilt.unreadable:
            report["lost"] = None  # the keys of an unreadable file went with the log
        report["duplicates"] = _remove_duplicates(location)
        if report["duplicates"] or rebuilt:
            report["version"] = open_table(location, RESULTS).version()
    return report


def _rebuild(location: Location) -> "Rebuilt | None":
    """Make `results` a Delta table again from `lost_log_files` (`rebuild.rebuild`);
    None when its log is not lost."""
    from puzzlesweep.catalog.rebuild import rebuild

    files = lost_log_files(location)
    return rebuild(location, files) if files else None


def _set_aside_commits(location: Location) -> tuple[list[str], str]:
    """Move the damaged commit files of both tables to `CATALOG/damaged/log-TIME/`
    (same relative paths); returns the files moved (relative to the catalog root) and
    that folder."""
    moved = [path for name in (RESULTS, RUNS) for path in damaged_commits(location, name)]
    folder = f"{DAMAGED}/log-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    move(location, moved, folder)
    return moved, folder


def _orphaned_keys(location: Location) -> list[str]:
    """The params keys of the rows in `orphaned_files` that the table does not hold
    (for the same solver and limits): what a re-run must solve again."""
    import duckdb

    fs = filesystem(location)
    columns = ["params_key", "solver", "time_limit", "node_limit"]
    orphans = [pq.read_table(p, filesystem=fs, columns=columns) for p in orphaned_files(location)]
    if not orphans:
        return []
    table = open_table(location, RESULTS)
    with duckdb.connect() as connection:
        connection.register("orphans", pa.concat_tables(orphans, promote_options="default"))
        held = "SELECT params_key, solver, time_limit, node_limit FROM held"
        if table is None:
            held = "SELECT * FROM orphans WHERE false"
        else:
            connection.register("held", dataset(location, table))
        rows = connection.sql(
            f"SELECT DISTINCT params_key FROM (SELECT * FROM orphans EXCEPT {held}) ORDER BY 1"
        ).fetchall()
    return [key for (key,) in rows]


def _remove_damaged(location: Location) -> dict:
    """The damaged-file part of `repair`: {"removed", "lost", "version"}."""
    from deltalake import CommitProperties

    table = open_table(location, RESULTS)
    damaged = damaged_files(location, table, whole=True)
    if not damaged:
        return {"removed": [], "lost": [], "version": None}
    paths = [path for path, _ in damaged]
    lost = lost_keys(location, [p.removeprefix(f"{RESULTS}/") for p in paths])
    fs = filesystem(location)
    for path, why in damaged:
        if why != "missing":
            target = f"{DAMAGED}/{table.version()}/{path}"
            fs.create_dir(posixpath.dirname(target), recursive=True)
            fs.move(path, target)
    metadata = {"puzzlesweep.lost": json.dumps(lost), "puzzlesweep.removed": json.dumps(paths)}
    table.repair(commit_properties=CommitProperties(custom_metadata=metadata))
    return {"removed": paths, "lost": lost, "version": table.version()}


#: A result is stored once per run: the key of `check`'s duplicates and of their removal.
RESULT_KEY = ", ".join(("run_id", *DONE_KEY))  # a row written twice by one run


def _remove_duplicates(location: Location) -> int:
    """Rewrite the families of `results` where a run stored a result more than once,
    keeping one row of each (a final status before `error`, then the newest), in one
    commit (a predicate overwrite of those partitions). Returns the rows removed."""
    import duckdb
    from deltalake import CommitProperties, write_deltalake

    table = open_table(location, RESULTS)
    with duckdb.connect() as connection:
        connection.register("results", dataset(location, table))
        families = [
            family
            for (family,) in connection.sql(
                f"SELECT DISTINCT family FROM results GROUP BY family, {RESULT_KEY} "
                "HAVING count(*) > 1 ORDER BY family"
            ).fetchall()
        ]
        if not families:
            return 0
        rows = table.to_pyarrow_table(filters=[("family", "in", families)])
        connection.register("rows", rows.append_column("row", pa.array(range(rows.num_rows))))
        keep = connection.sql(
            f"SELECT row FROM rows QUALIFY row_number() OVER (PARTITION BY {RESULT_KEY} "
            "ORDER BY status = 'error', finished_at DESC) = 1 ORDER BY row"
        ).fetchall()
    kept = rows.take([row for (row,) in keep])
    quoted = ", ".join("'" + f.replace("'", "''") + "'" for f in families)
    write_deltalake(
        table,
        kept,
        mode="overwrite",
        predicate=f"family IN ({quoted})",
        commit_properties=CommitProperties(custom_metadata={"puzzlesweep.deduplicated": "1"}),
    )
    return rows.num_rows - kept.num_rows


def history(catalog, limit: int | None = None) -> list[dict]:
    """The commits of `results`, newest first: {"version", "timestamp" (UTC datetime),
    "operation", "rows" (added), "files_added", "files_removed", "app_id"}. Raises
    BadInput for a catalog without results."""
    location = locate(catalog)
    table = open_table(location, RESULTS)
    if table is None:
        raise BadInput(f"catalog {location.uri} has no results table")
    entries = []
    for commit in table.history(limit):
        metrics = commit.get("operationMetrics", {})
        entries.append(
            {
                "version": commit.get("version"),
                "timestamp": datetime.fromtimestamp(commit["timestamp"] / 1000, UTC),
                "operation": commit.get("operation"),
                "rows": metrics.get("num_added_rows"),
                "files_added": metrics.get("num_added_files", metrics.get("numFilesAdded")),
                "files_removed": metrics.get("num_removed_files", metrics.get("numFilesRemoved")),
            }
        )
    return entries
