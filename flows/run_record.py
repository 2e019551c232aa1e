"""A run's record: its plan, its row in the catalog's `runs` table, and its counts.

`start` plans a run (the spec's jobs, those the catalog already holds), makes sure the
catalog can take its rows (`catalog.prepare`) and writes the run's row (state
`running`, `catalog.claim`) before any cluster starts, so the run is listed in `runs`
and on the dashboard from its first seconds. The `RunRecord` it returns is the one
owner of that row: its heartbeat, its links, and its end, written once whoever ends
the run.
"""

import contextlib
import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from puzzlesweep import catalog, puzzles
from puzzlesweep.catalog.runs import HEARTBEAT_SECONDS
from puzzlesweep.core import FINAL, BadInput
from puzzlesweep.flows.control import Control
from puzzlesweep.flows.faults import disk_full, first_line
from puzzlesweep.flows.spec import Sweep, load, parse

#: Bytes a run keeps free on a local catalog's disk (a file it holds, `_reserve`) for
#: writing its last row when its batches fill the disk (that row takes ~16 KB).
RESERVE_BYTES = 128 * 1024

#: Bytes read at most from a spec at a URL (a spec is a few kilobytes).
SPEC_BYTES = 1 << 20

#: A spec as a path, a URL, inline TOML text, or the TOML document as a dict.
SpecSource = str | dict


@dataclass
class RunRecord:
    """One run of a sweep: its `plan`, the jobs `todo` (those without a final result in
    the catalog), its `manifest` (the columns of its `runs` row that do not change as it
    goes, plus the links to its Prefect flow run and Dask dashboard once known), the
    committed `counts` by status, the batches handed out, and the Dask event `topic`
    its workers report finished instances under.

    The record is the one writer of the run's `runs` row: `claim` (state `running`),
    the heartbeat it runs every `HEARTBEAT_SECONDS` until the end, `write` (a
    link became known) and `end` (the last row, once). Every write holds the record's
    lock and none follows the end, so a heartbeat cannot put `running` back over
    `interrupted`, whichever thread ends the run (its flow, its watch, or a caller's
    exit timer)."""

    run_id: str
    catalog_path: str
    plan: Sweep
    todo: list
    manifest: dict[str, Any]
    counts: Counter = field(default_factory=Counter)
    batches: int = 0
    topic: str | None = None
    ended: str | None = None
    control: Control | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _beating: threading.Event = field(default_factory=threading.Event, repr=False)
    _claimed: bool = False
    _reserve: str | None = None

    def row(self) -> dict[str, Any]:
        """The run's `runs` row as it stands (state `running`), with the estimate of the
        seconds left that its terminal shows (the `Standing` of its `control`)."""
        standing = self.control.standing() if self.control is not None else None
        mine = standing is not None and standing.run_id == self.run_id
        return {
            **self.manifest,
            **catalog.status_counts(self.counts),
            "solved": sum(self.counts.values()),
            "batches": self.batches,
            "seconds_left": standing.seconds_left if mine else None,
        }

    def links(self) -> dict[str, str | None]:
        """Where to watch the run: "flow_run_url" (its Prefect flow run's page),
        "dashboard" (the Dask dashboard), "catalog" (the catalog's location); None for
        what it has not."""
        return {
            "flow_run_url": self.manifest.get("flow_run_url"),
            "dashboard": self.manifest.get("dask_dashboard_url"),
            "catalog": self.catalog_path,
        }

    def claim(self, allow_concurrent: bool = False) -> None:
        """Write the run's first row (`catalog.claim`, state `running`) and start its
        heartbeat (a daemon thread). Raises BadInput when another run of the sweep is
        alive, unless `allow_concurrent`."""
        with self._lock:
            self._claimed = True  # an interrupt inside the claim still ends the row
            try:
                catalog.claim(self.catalog_path, self.manifest, allow_concurrent)
            except BadInput:  # another run holds the sweep: this one has no row to end
                self._claimed = False
                raise
            self._reserve = _reserve(self.catalog_path, self.run_id)
        threading.Thread(target=self._beat, name="run-heartbeat", daemon=True).start()

    def _beat(self) -> None:
        while not self._beating.wait(HEARTBEAT_SECONDS):
            try:
                self.write()
            except Exception:  # noqa: BLE001 (the next beat tries again)
                pass

    def write(self) -> None:
        """Write the run's row now (state `running`), unless it has ended or its local
        disk is (nearly) full (`faults.disk_full`): the end writes it, in the space the
        run keeps (`_reserve`)."""
        with self._lock:
            if self.ended is None and self._claimed and not disk_full(None, self.catalog_path):
                catalog.write_run(self.catalog_path, {**self.row(), "state": "running"})

    def end(self, state: str) -> str | None:
        """Write the run's last row once (`finished`, `failed` or `interrupted`), with
        the counts of the rows this run has in the catalog (when it can be read) over
        the counts received; the heartbeat stops. Later calls do nothing. Returns None,
        or one line saying why the row could not be written (e.g. "No space left on
        device"): a run is never turned into a traceback by its own bookkeeping."""
        with self._lock:
            if self.ended is not None or not self._claimed:
                self.ended = self.ended or state
                return None
            self.ended = state
            self._beating.set()
            ended = {"state": state, "finished_at": datetime.now(UTC), "seconds_left": None}
            _release(self._reserve)  # the space kept for this very write
            try:
                counts = catalog.written(self.catalog_path, self.run_id)
                catalog.write_run(self.catalog_path, {**self.row(), **counts, **ended})
            except Exception as exc:  # noqa: BLE001 (said in one line)
                why = disk_full(exc, self.catalog_path) or first_line(exc)
                return (
                    f"the row of run {self.run_id} in {self.catalog_path} could not be "
                    f"written as {state}: {why}"
                )
            return None


def _reserve(catalog_path: str, run_id: str) -> str | None:
    """Hold `RESERVE_BYTES` of a local catalog's disk in a hidden file beside its tables
    (`.reserve-RUN_ID`), so that the run's last row can be written after its batches
    filled the disk; None for an object store or a disk without that much room."""
    location = catalog.locate(catalog_path)
    if not location.local:
        return None
    path = os.path.join(location.uri, f".reserve-{run_id}")
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    try:
        os.posix_fallocate(descriptor, 0, RESERVE_BYTES)
    except OSError:
        os.close(descriptor)
        _release(path)
        return None
    os.close(descriptor)
    return path


def _release(path: str | None) -> None:
    """Give back the space `_reserve` held (nothing for None or a file already gone)."""
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)


def record_link(catalog_path: str, manifest: dict, dashboard: str | None) -> None:
    """Put the Dask dashboard's URL (None: none) in a running run's `manifest` and its
    row now, so that the dashboard links to it from the start (a failed write leaves it
    to the next heartbeat)."""
    manifest["dask_dashboard_url"] = dashboard
    with contextlib.suppress(Exception):
        catalog.write_run(catalog_path, {**manifest, "state": "running"})


def new_run_id() -> str:
    """A run's id: its start in UTC to the second and six random hex digits."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid4().hex[:6]}"


def start(spec_path: SpecSource, settings, control: Control | None = None) -> RunRecord:
    """Plan the run of the spec at `spec_path` into `settings.catalog` (resolved:
    workers may run elsewhere; `settings`: the run's `RunSettings`) and write its row
    (state `running`). Instances with a final result for the same solver and limits are
    skipped unless `settings.force`. Raises BadInput for a bad or too large spec
    (`settings.max_instances` as in `spec.parse`), and when another run of the same
    sweep is alive in the catalog, unless `settings.allow_concurrent`. The row's
    heartbeat runs until `end`. With a `control`, the record is its `record` before its
    row is written, so that a stop at any moment ends the row it wrote."""
    catalog_path = catalog.resolve(settings.catalog)
    plan, todo = plan_run(spec_path, catalog_path, settings.force, settings.max_instances)
    if not settings.allow_concurrent:
        catalog.refuse_if_busy(catalog_path, plan.name)
    catalog.prepare(catalog_path, {puzzles.get(job.instance.family).Params for job in plan.jobs})
    run_id = new_run_id()
    manifest = {
        "run_id": run_id,
        "sweep": plan.name,
        "spec_path": spec_path if isinstance(spec_path, str) and "\n" not in spec_path else None,
        "spec": plan.text,
        "started_at": datetime.now(UTC),
        "planned": len(plan.jobs),
        "skipped": len(plan.jobs) - len(todo),
        "batch_size": settings.batch_size,  # None: sized as the run goes (flows/batches.py)
        "force": settings.force,
    }
    record = RunRecord(
        run_id, catalog_path, plan, todo, manifest, topic=f"progress-{run_id}", control=control
    )
    if control is not None:
        control.record = record
    record.claim(settings.allow_concurrent)
    return record


def read_spec(spec: SpecSource, max_instances: int | None = None) -> Sweep:
    """The plan of `spec`: a dict (the TOML document as data), inline TOML text (a
    string with a newline), a URL (`http(s)://`, `file://`; at most `SPEC_BYTES`
    read), or a path. Raises BadInput naming the source for a bad, unreadable or too
    large spec (`max_instances` as in `spec.parse`)."""
    if isinstance(spec, dict):
        import toml

        return parse(toml.dumps(spec), "<spec dict>", max_instances)
    if "\n" in spec:
        return parse(spec, "<inline spec>", max_instances)
    if "://" in spec:
        import urllib.request

        try:
            with urllib.request.urlopen(spec, timeout=30) as answer:
                data = answer.read(SPEC_BYTES + 1)
        except (OSError, ValueError) as exc:
            raise BadInput(f"{spec}: cannot read the spec: {exc}") from None
        if len(data) > SPEC_BYTES:
            raise BadInput(f"{spec}: the spec is larger than {SPEC_BYTES:,} bytes")
        try:
            return parse(data.decode("utf-8"), spec, max_instances)
        except UnicodeDecodeError:
            raise BadInput(f"{spec}: the spec is not UTF-8 text") from None
    return load(spec, max_instances)


def plan_run(
    spec_path: SpecSource, catalog_path: str, force: bool, max_instances: int | None = None
) -> tuple[Sweep, list]:
    """(the spec's plan, its jobs without a final result in the catalog, all if `force`).
    Raises BadInput for a bad or too large spec."""
    plan = read_spec(spec_path, max_instances)
    done = set() if force else catalog.finished(catalog_path, [j.done_key for j in plan.jobs])
    return plan, [job for job in plan.jobs if job.done_key not in done]


def settle(catalog_path: str, run_id: str) -> None:
    """Count run `run_id`'s rows again and rewrite its row in `runs` if a batch
    committed after the flow counted them."""
    row = catalog.read_run(catalog_path, run_id)
    counts = catalog.written(catalog_path, run_id)
    if row is not None and counts and counts["solved"] != row["solved"]:
        catalog.write_run(catalog_path, {**row, **counts})


PAST_SECONDS = f"""
SELECT family, solver, time_limit, avg(solve_seconds), count(*) FROM results
WHERE NOT coalesce(equivalent, false) AND {FINAL} GROUP BY ALL
"""


def preview(
    spec_path: str,
    catalog_path: str,
    force: bool = False,
    max_instances: int | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """What a run of the spec at `spec_path` would do, with nothing solved or written:
    {"sweep", "studies": one dict per study {"study" (1-based), "family", "solver",
    "time_limit", "instances", "classes" (canonical classes: one solve each),
    "in_catalog" (instances with a final result, skipped unless `force`), "to_solve",
    "classes_to_solve", "seconds" (the classes to solve, each at the mean solve time of
    the catalog's past results of the same family, solver and time limit; None when
    one has none)}, "seconds" (the known work shared by `workers`), "unknown" (studies
    without past times)}. Raises BadInput as `start` does for a bad spec."""
    location = catalog.resolve(catalog_path)
    plan, todo = plan_run(spec_path, location, force, max_instances)
    past: dict[tuple, float] = {}
    if catalog.files(location):
        _, rows = catalog.query(location, PAST_SECONDS)
        past = {(f, s, t): mean for f, s, t, mean, _ in rows}
    studies = _studies(plan, todo, past)
    known = [e["seconds"] for e in studies if e["seconds"] is not None]
    return {
        "sweep": plan.name,
        "studies": studies,
        "seconds": sum(known) / max(1, workers),
        "unknown": sum(1 for e in studies if e["seconds"] is None),
    }


def _studies(plan: Sweep, todo: list, past: dict[tuple, float]) -> list[dict[str, Any]]:
    """`preview`'s one dict per study of `plan`: its instances and canonical classes,
    those in the catalog (not in `todo`) and those to solve, and the seconds of the
    classes to solve at `past`'s mean seconds per (family, solver, time limit); None
    when a class to solve has no past time."""
    pending = {id(job) for job in todo}
    studies: dict[int, dict[str, Any]] = {}
    for job in plan.jobs:
        entry = studies.setdefault(
            job.study,
            {
                "study": job.study,
                "family": job.instance.family,
                "solver": set(),
                "time_limit": job.limits.time_limit,
                "instances": 0,
                "classes": set(),
                "in_catalog": 0,
                "to_solve": 0,
                "classes_to_solve": set(),
                "seconds": 0.0,
            },
        )
        entry["instances"] += 1
        entry["classes"].add(job.instance.key)
        entry["solver"].add(job.solver)
        if id(job) not in pending:
            entry["in_catalog"] += 1
            continue
        entry["to_solve"] += 1
        if job.instance.key not in entry["classes_to_solve"]:
            entry["classes_to_solve"].add(job.instance.key)
            mean = past.get((job.instance.family, job.solver, job.limits.time_limit))
            entry["seconds"] = (
                None if mean is None or entry["seconds"] is None else (entry["seconds"] + mean)
            )
    for entry in studies.values():
        entry["solver"] = ",".join(sorted(entry["solver"]))
        entry["classes"] = len(entry["classes"])
        entry["classes_to_solve"] = len(entry["classes_to_solve"])
        if not entry["classes_to_solve"]:
            entry["seconds"] = 0.0
    return list(studies.values())
