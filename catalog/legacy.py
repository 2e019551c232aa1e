"""Reading a catalog of the old layout, for `catalog migrate` (`reverify.migrate`).

The old layout under the root:

    family=NAME/part-RUN_ID-BATCH.parquet     one file per batch
    family=NAME/compact-STAMP-ID.parquet      the output of a compaction
    _commits/STAMP-ID.json                    one compaction record: {"add", "remove"}
    _runs/run-RUN_ID.parquet                  one run manifest row each

A `part-*` file is visible unless a commit removed it; a `compact-*` file only once a
commit added it. Commits apply in name order, and one that removes a file an earlier
commit already removed lost a race and is ignored.
"""

import json
import os
import posixpath
from pathlib import Path

import pyarrow.parquet as pq

from puzzlesweep.core import BadInput


def visible_files(root: str) -> list[tuple[str, str]]:
    """(family, absolute path) of every visible result file under `root`, sorted.
    Raises BadInput when `root` holds no `family=*` directory."""
    base = Path(root)
    partitions = sorted(p for p in base.glob("family=*") if p.is_dir())
    if not partitions:
        raise BadInput(f"{root} is not a catalog of the old layout (no family=*/ directory)")
    removed: set[str] = set()
    added: set[str] = set()
    for record_path in sorted((base / "_commits").glob("*.json")):
        record = json.loads(record_path.read_text())
        if removed.intersection(record["remove"]):
            continue  # lost a race with an earlier commit: its output stays hidden
        removed.update(record["remove"])
        added.update(record["add"])
    found = []
    for partition in partitions:
        for path in sorted(partition.glob("*.parquet")):
            relative = f"{partition.name}/{path.name}"
            if relative in removed or (path.name.startswith("compact-") and relative not in added):
                continue
            found.append((partition.name.removeprefix("family="), os.fspath(path)))
    return found


def manifests(root: str) -> list[dict]:
    """The run manifest rows under `root/_runs`, as dicts of `runs` columns (its last
    heartbeat: when it finished, else when it started)."""
    rows = []
    for path in sorted((Path(root) / "_runs").glob("run-*.parquet")):
        rows.extend(pq.read_table(path).to_pylist())
    for run in rows:
        run["heartbeat_at"] = run.get("finished_at") or run.get("started_at")
    return rows


def new_row(family: str, row: dict) -> dict:
    """Old result `row` (a dict of one file's columns, parameters among them) of
    `family` with the columns the new layout adds: `family`, `params_key` (the
    `instance_key` where the old file had none), `equivalent` (false when absent)."""
    return {
        **row,
        "family": family,
        "params_key": row.get("params_key") or row["instance_key"],
        "equivalent": bool(row.get("equivalent")),
    }


def app_id(path: str) -> str:
    """The application transaction id of the commit that copies old file `path`: a
    migration run again skips the files it copied."""
    return f"migrate-{posixpath.basename(path)}"
