"""Reading a catalog of the old layout and migrating it (`migrate`, for `catalog migrate`).

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

from puzzlesweep.catalog.store import locate
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
    """The run manifest rows under `root/_runs`, as dicts."""
    rows = []
    for path in sorted((Path(root) / "_runs").glob("run-*.parquet")):
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def migrate(source, target) -> dict:
    """Copy the catalog of the old layout at `source` (a local directory) into a new
    catalog at `target` (which must not hold anything yet): every visible result row,
    re-verified from its solution (`verified` and `error` say what the check found now),
    and every run manifest. One commit per old file, with application transactions, so
    an interrupted migration run again copies only what is missing. Returns {"rows",
    "files", "runs", "failed" (rows whose re-check failed)}. Raises BadInput for a
    source of another layout or a target that already holds something."""
    from puzzlesweep import puzzles
    from puzzlesweep.catalog import check_writable, prepare, write_batch, write_run
    from puzzlesweep.solve import recheck

    old = locate(source)
    if not old.local:
        raise BadInput(f"migrate reads a local directory, not {old.uri}")
    new = check_writable(target)  # a catalog already (an interrupted migration) is fine
    files = visible_files(old.uri)
    report = {"rows": 0, "files": len(files), "runs": 0, "failed": 0}
    families = sorted({family for family, _ in files})
    unknown = [f for f in families if f not in puzzles.FAMILIES]
    if unknown:
        raise BadInput(f"{old.uri}: unknown families {', '.join(unknown)}")
    prepare(new, [puzzles.get(f).Params for f in families])
    for family, path in files:
        model = puzzles.get(family).Params
        rows = pq.read_table(path).to_pylist()
        for row in rows:
            row["family"] = family
            row.setdefault("params_key", None)
            row["params_key"] = row["params_key"] or row["instance_key"]
            row["equivalent"] = bool(row.get("equivalent"))
            if row.get("solution") is not None:
                why = recheck(family, row)
                row["verified"] = why is None
                row["error"] = row.get("error") if why is None else f"migration re-check: {why}"
                report["failed"] += why is not None
            row["params"] = {name: row.pop(name, None) for name in model.model_fields}
        write_batch(new, model, rows, app_id=f"migrate-{posixpath.basename(path)}")
        report["rows"] += len(rows)
    for run in manifests(old.uri):
        run["heartbeat_at"] = run.get("finished_at") or run.get("started_at")
        write_run(new, run)
        report["runs"] += 1
    return report
