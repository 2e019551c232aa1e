"""A table's versions, for reading the catalog as it was (`--as-of`): which version a
number or a time names (`version_at`, by the commit times of the Delta log), and which
versions can still be read (`readable_versions`: a vacuum deletes the data files of the
oldest ones). Apart from `store`, which opens and writes the tables.
"""

from datetime import UTC, datetime

from puzzlesweep.catalog.files import missing_files
from puzzlesweep.catalog.store import Location, commits, first_line, open_table
from puzzlesweep.core import BadInput


def open_as_of(location: Location, name: str, when: "int | str | datetime | None"):
    """The DeltaTable `name` as it was at `when` (`version_at`; None: its latest
    version), or None when the table does not exist. Raises BadInput as `version_at`
    does, or for a version delta-rs cannot load; CatalogDamaged as `store.open_table`."""
    from deltalake.exceptions import DeltaError

    table = open_table(location, name)
    if table is None or when is None:
        return table
    number = version_at(location, name, table.version(), when)
    try:
        table.load_as_version(number)
    except (DeltaError, ValueError) as exc:
        raise BadInput(
            f"catalog {location.uri}: {name} has no version {number}: {first_line(exc)}"
        ) from None
    return table


def version_at(location: Location, name: str, latest: int, when: "int | str | datetime") -> int:
    """The version of table `name` that `when` names: a version number, or a time (an
    ISO 8601 string or a datetime; naive means UTC) read as the last version committed
    at or before it, by the commit times of the Delta log. Raises BadInput for a version
    outside 0..`latest`, a time before the first commit, or a string that is neither."""
    if isinstance(when, int):
        if not 0 <= when <= latest:
            raise BadInput(
                f"catalog {location.uri}: {name} has no version {when}; "
                f"its versions are 0..{latest}"
            )
        return when
    if isinstance(when, str):
        try:
            when = datetime.fromisoformat(when)
        except ValueError:
            raise BadInput(f"{when!r} is neither a version nor an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    stamps = {
        number: datetime.fromtimestamp(info["timestamp"] / 1000, UTC)
        for number, actions in commits(location, name).items()
        for info in [next((a["commitInfo"] for a in actions if "commitInfo" in a), {})]
        if "timestamp" in info and number <= latest
    }
    before = [number for number, stamp in stamps.items() if stamp <= when]
    if not before:
        first = min(stamps, default=0)
        at = f" ({stamps[first]:%Y-%m-%d %H:%M:%S} UTC)" if first in stamps else ""
        raise BadInput(
            f"catalog {location.uri}: {name} did not exist yet at {when:%Y-%m-%d %H:%M:%S} "
            f"UTC; its first commit is version {first}{at}"
        )
    return max(before)


def readable_versions(location: Location, name: str) -> tuple[int, int] | None:
    """(oldest, latest): the versions of table `name` whose data files are all still
    there (a vacuum deletes the files of the oldest versions first, so they form one
    range), found by bisection; None when not even the latest is readable."""
    table = open_table(location, name)
    latest = table.version()
    if missing_files(location, table):
        return None
    low, high = 0, latest  # the answer lies in low..high; `high` is readable
    while low < high:
        middle = (low + high) // 2
        table.load_as_version(middle)
        if missing_files(location, table):
            low = middle + 1
        else:
            high = middle
    return low, latest
