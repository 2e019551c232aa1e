"""Compacting a catalog: Delta's optimize (small files merged into large ones, one
commit per table) then vacuum (files that no version younger than the retention needs
are deleted). A reader sees one version or the next, never both sets of files, so no
row is ever counted twice. Apart from `maintenance` (check, repair), which it shares
the damaged-file test and the lease with.
"""

from puzzlesweep.catalog.files import damaged_files
from puzzlesweep.catalog.runs import lease
from puzzlesweep.catalog.store import (
    RESULTS,
    RUNS,
    CatalogDamaged,
    Location,
    exists,
    locate,
    open_table,
)
from puzzlesweep.core import BadInput

#: `runs` keeps the files of its versions of the last hour even with `--retain-hours 0`:
#: a reader or a maintenance lease that loaded it a moment ago still reads them.
RUNS_RETAIN_HOURS = 1
COMPACT_ATTEMPTS = 10  # optimizes of one table refused by a concurrent row replacement


def compact(catalog, retain_hours: int = 168) -> dict:
    """Optimize both tables (merge small files into large ones, one commit each), then
    vacuum: delete files that no version of the last `retain_hours` hours needs (0
    frees the disk at once, but a reader that still holds an older version then fails;
    `runs` keeps at least `RUNS_RETAIN_HOURS`).
    Returns {"results": {"files_removed", "files_added", "deleted", "version"}, "runs":
    ..., "deleted": N in all}. The command holds the maintenance lease (`runs.lease`),
    whose row the `runs` table keeps. Raises BadInput for a missing catalog or while
    another maintenance command holds the lease, CatalogDamaged for a data file that
    cannot be read (nothing is changed then)."""
    location = locate(catalog)
    if not exists(location):
        raise BadInput(f"catalog {location.uri} does not exist")
    report: dict = {"deleted": 0}
    with lease(location, "compact"):
        for name in (RESULTS, RUNS):
            if open_table(location, name) is not None:
                report[name] = _compact(location, name, retain_hours, report)
    return report


def _compact(location: Location, name: str, retain_hours: int, report: dict) -> dict:
    """Optimize then vacuum table `name` (see `compact`); counts deleted files in
    `report["deleted"]`, returns {"files_removed", "files_added", "deleted", "version"}. A run's
    heartbeat replacing its row while `runs` is optimized makes delta-rs refuse the
    optimize (it read the replaced file): it is tried again on the new version, up to
    `COMPACT_ATTEMPTS` times in all, then deltalake's CommitFailedError is raised."""
    from deltalake.exceptions import CommitFailedError

    for attempt in range(COMPACT_ATTEMPTS):
        table = open_table(location, name)
        if damaged := damaged_files(location, table):
            raise CatalogDamaged(
                f"catalog {location.uri}: data file {damaged[0][0]} cannot be read; "
                "run `puzzlesweep catalog repair` before compacting"
            )
        try:
            metrics = table.optimize.compact()
            break
        except CommitFailedError:
            if attempt == COMPACT_ATTEMPTS - 1:
                raise
    if name == RUNS:  # tiny, and read whole by every reader and lease: never pulled away
        retain_hours = max(retain_hours, RUNS_RETAIN_HOURS)
    deleted = table.vacuum(
        retention_hours=retain_hours, dry_run=False, enforce_retention_duration=False
    )
    report["deleted"] += len(deleted)
    return {
        "files_removed": metrics["numFilesRemoved"],
        "files_added": metrics["numFilesAdded"],
        "deleted": len(deleted),
        "version": table.version(),
    }
