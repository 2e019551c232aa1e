"""A run's record: its plan, its row in the catalog's `runs` table, and its counts.

`start` plans a run (the spec's jobs, those the catalog already holds), makes sure the
catalog can take its rows (`catalog.prepare`) and writes the run's row (state
`running`, `catalog.claim`) before any cluster or Prefect API starts, so the run is
listed in `runs` and on the dashboard from its first seconds. The flow that runs it, in
this process, finds the record by its run id (`get`) and fills in its progress; the
record's `row()` is what the heartbeat writes while the run lives, and `end(state)`
writes the last row once, whoever ends the run (its flow, its watch, or its caller when
the flow never started).
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from puzzlesweep import catalog, puzzles
from puzzlesweep.flows.spec import Sweep, load


@dataclass
class RunRecord:
    """One run of a sweep in this process: its `plan`, the jobs `todo` (those without a
    final result in the catalog), its `manifest` (the columns of its `runs` row that do
    not change as it goes, plus the links to its Prefect flow run and Dask dashboard once
    known), the committed `counts` by status, the batches handed out, the Dask event
    `topic` its workers report finished instances under, and `announce` (a line for
    the person who started it)."""

    run_id: str
    catalog_path: str
    plan: Sweep
    todo: list
    manifest: dict[str, Any]
    counts: Counter = field(default_factory=Counter)
    batches: int = 0
    topic: str | None = None
    announce: Callable[[str], None] = lambda line: None
    heartbeat: Any = None
    ended: str | None = None
    on_instances: Callable[[int, int], None] | None = None

    def instances_done(self, number: int, instances: int) -> None:
        """A worker reported `instances` more finished instances of batch `number`."""
        if self.on_instances is not None:
            self.on_instances(number, instances)

    def row(self) -> dict[str, Any]:
        """The run's `runs` row as it stands (state `running`)."""
        return {
            **self.manifest,
            **status_counts(self.counts),
            "solved": sum(self.counts.values()),
            "batches": self.batches,
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

    def write(self) -> None:
        """Write the run's row now (state `running`), e.g. when a link became known."""
        if self.ended is None:
            catalog.write_run(self.catalog_path, {**self.row(), "state": "running"})

    def end(self, state: str) -> None:
        """Write the run's last row once (`finished`, `failed` or `interrupted`): the
        heartbeat stops first, and the counts are those of the rows this run has in the
        catalog (when it can be read) over the counts received. Later calls do nothing."""
        if self.ended is not None:
            return
        self.ended = state
        if self.heartbeat is not None:
            self.heartbeat.__exit__(None, None, None)
        ended = {"state": state, "finished_at": datetime.now(UTC)}
        try:
            counted = written(self.catalog_path, self.run_id)
            catalog.write_run(self.catalog_path, {**self.row(), **counted, **ended})
        except catalog.CatalogUnreachable:
            pass  # the catalog is gone: its row stays `running`, read as `lost` later


_records: dict[str, RunRecord] = {}


def start(
    spec_path: str,
    catalog_path: str,
    force: bool = False,
    max_instances: int | None = None,
    allow_concurrent: bool = False,
    batch_size: int | None = None,
) -> RunRecord:
    """Plan the run of the spec at `spec_path` into `catalog_path` (resolved: workers may
    run elsewhere) and write its row (state `running`). Instances with a final result
    for the same solver and limits are skipped unless `force`. Raises BadInput for a bad
    or too large spec (`max_instances` as in `spec.parse`), and when another run of the
    same sweep is alive in the catalog, unless `allow_concurrent`. The row's heartbeat
    runs until `end`."""
    catalog_path = catalog.resolve(catalog_path)
    plan, todo = plan_run(spec_path, catalog_path, force, max_instances)
    if not allow_concurrent:
        catalog.refuse_if_busy(catalog_path, plan.name)
    catalog.prepare(catalog_path, {puzzles.get(job.instance.family).Params for job in plan.jobs})
    run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid4().hex[:6]}"
    manifest = {
        "run_id": run_id,
        "sweep": plan.name,
        "spec_path": str(spec_path),
        "spec": plan.text,
        "started_at": datetime.now(UTC),
        "planned": len(plan.jobs),
        "skipped": len(plan.jobs) - len(todo),
        "batch_size": batch_size,  # None: sized as the run goes (flows/batches.py)
        "force": force,
    }
    catalog.claim(catalog_path, manifest, allow_concurrent)
    record = RunRecord(run_id, catalog_path, plan, todo, manifest, topic=f"progress-{run_id}")
    record.heartbeat = catalog.Heartbeat(catalog_path, record.row).__enter__()
    _records[run_id] = record
    return record


def get(run_id: str) -> RunRecord:
    """The record of run `run_id` started in this process; raises KeyError otherwise."""
    return _records[run_id]


def forget(run_id: str) -> None:
    """Drop the record of a run that has ended."""
    _records.pop(run_id, None)


def plan_run(
    spec_path: str, catalog_path: str, force: bool, max_instances: int | None = None
) -> tuple[Sweep, list]:
    """(the spec's plan, its jobs without a final result in the catalog, all if `force`).
    Raises BadInput for a bad or too large spec."""
    plan = load(spec_path, max_instances)
    done = set() if force else catalog.finished(catalog_path, [j.done_key for j in plan.jobs])
    return plan, [job for job in plan.jobs if job.done_key not in done]


def written(catalog_path: str, run_id: str) -> dict:
    """The counts of run `run_id` as its rows in `results` tell them: `solved` (rows
    written) and one count per status; empty when the catalog cannot be read (the caller
    keeps the counts it has)."""
    try:
        _, rows = catalog.query(
            catalog_path,
            "SELECT status, count(*) FROM results WHERE run_id = ? GROUP BY 1",
            [run_id],
        )
    except Exception:  # noqa: BLE001 (an unreadable catalog: the reports' counts stand)
        return {}
    counts = Counter(dict(rows))
    return {**status_counts(counts), "solved": sum(counts.values())}


def settle(catalog_path: str, run_id: str) -> None:
    """Count run `run_id`'s rows again and rewrite its row in `runs` if a batch
    committed after the flow counted them."""
    row = catalog.read_run(catalog_path, run_id)
    counts = written(catalog_path, run_id)
    if row is not None and counts and counts["solved"] != row["solved"]:
        catalog.write_run(catalog_path, {**row, **counts})


def status_counts(counts: Counter) -> dict[str, int]:
    """One manifest column per status, zero when absent."""
    return {status: counts.get(status, 0) for status in catalog.STATUSES}


PAST_SECONDS = """
SELECT family, solver, time_limit, avg(solve_seconds), count(*) FROM results
WHERE NOT coalesce(equivalent, false) AND status <> 'error' GROUP BY ALL
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
    known = [e["seconds"] for e in studies.values() if e["seconds"] is not None]
    return {
        "sweep": plan.name,
        "studies": list(studies.values()),
        "seconds": sum(known) / max(1, workers),
        "unknown": sum(1 for e in studies.values() if e["seconds"] is None),
    }
