"""The sweep flow: spec → jobs → skip finished → batches → one Prefect task per batch.

Prefect orchestrates at batch granularity (state, retries, logs); Dask does the fan-out
through `prefect_dask.DaskTaskRunner`, on an embedded `LocalCluster` or on an existing
scheduler (`address`). Each batch task solves its instances, verifies them and writes
its rows as one Parquet file, atomically, before it returns: a result that was reported
is never lost, and a re-run solves only what the catalog does not hold yet.

This module holds no puzzle logic: it only groups, submits and counts.
"""

import math
import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from uuid import uuid4

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed

from puzzlesweep import __version__, catalog, puzzles
from puzzlesweep.flows.spec import Job, load
from puzzlesweep.solve import solve_instances
from puzzlesweep.solvers import Limits

MAX_BATCH = 50  # instances per batch, at most (a task costs ~0.2 s of Prefect overhead)


@dataclass(frozen=True)
class Batch:
    """A handle to the work of one task: which run and sweep, which family, solver and
    limits, and the parameters (dicts) of its instances. Workers rebuild the models."""

    run_id: str
    sweep: str
    family: str
    solver: str
    limits: Limits
    params: tuple[dict, ...]
    number: int = 0  # its place in the run: names its file, so a retry replaces it


def batches(jobs: list[Job], run_id: str, sweep: str, size: int) -> list[Batch]:
    """Group jobs by (family, solver, limits) and cut each group into batches of `size`;
    the batches with the longest time limits come first, so they do not straggle.
    A class of equivalent instances (same instance_key) stays in one batch (`_chunks`)."""
    groups: dict[tuple, list[Job]] = {}
    for job in jobs:
        groups.setdefault((job.instance.family, job.solver, job.limits), []).append(job)
    found = []
    for (family, solver, limits), group in groups.items():
        for chunk in _chunks(group, size):
            params = tuple(j.instance.params.model_dump() for j in chunk)
            found.append(Batch(run_id, sweep, family, solver, limits, params))
    found.sort(key=lambda b: -b.limits.time_limit)
    return [replace(batch, number=number) for number, batch in enumerate(found)]


def _chunks(group: list[Job], size: int) -> list[list[Job]]:
    """Cut `group` into chunks of about `size` jobs, never splitting a class of equivalent
    jobs (same instance_key): a chunk holding a class larger than `size` is that whole
    class, since its equivalent rows cost no solving. So every canonical instance is
    solved once per run, by the batch that also records its equivalents."""
    classes: dict[str, list[Job]] = {}
    for job in group:
        classes.setdefault(job.instance.key, []).append(job)
    chunks: list[list[Job]] = []
    for members in classes.values():
        if chunks and len(chunks[-1]) + len(members) <= size:
            chunks[-1].extend(members)
        else:
            chunks.append(list(members))
    return chunks


def auto_batch_size(count: int, workers: int) -> int:
    """About four batches per worker for load balance, at most MAX_BATCH instances each."""
    return max(1, min(MAX_BATCH, math.ceil(count / (4 * max(1, workers)))))


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return os.uname().nodename


@task(name="solve-batch", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=1)
def solve_batch(batch: Batch, catalog_path: str) -> dict:
    """Solve, verify and write one batch; returns {"file", "counts" (status → count),
    "instances", "verified"}. A batch whose file is already in the catalog (a retry, or
    Dask re-running a task whose worker died after writing) is not solved again."""
    family = puzzles.get(batch.family)
    name = catalog.batch_name(batch.run_id, batch.number)
    if (written := catalog.read_batch(catalog_path, batch.family, name)) is not None:
        rows = written
    else:
        rows = _solve_rows(batch, family)
        catalog.write_batch(catalog_path, batch.family, family.Params, rows, name)
    return {
        "file": name,
        "counts": dict(Counter(row["status"] for row in rows)),
        "instances": len(rows),
        "verified": sum(bool(row["verified"]) for row in rows),
    }


def _solve_rows(batch: Batch, family) -> list[dict]:
    """The catalog rows of every instance of `batch`, solved and verified here."""
    from puzzlesweep.core import Instance, make_params

    worker = _worker_name()
    instances = [Instance(batch.family, make_params(family.Params, raw)) for raw in batch.params]
    rows = solve_instances(instances, batch.solver, batch.limits)
    for row in rows:
        row.update(
            run_id=batch.run_id,
            sweep=batch.sweep,
            worker=worker,
            puzzlesweep_version=__version__,
            schema_version=catalog.SCHEMA_VERSION,
        )
    return rows


@flow(name="sweep")
def sweep(
    spec_path: str,
    catalog_path: str = "results",
    batch_size: int | None = None,
    workers: int = 2,
    force: bool = False,
) -> dict:
    """Run the sweep of `spec_path` into `catalog_path`; returns {"run_id", "sweep",
    "planned", "skipped", "solved", "counts", "batches", "seconds"}. Instances with a
    final result for the same solver and limits are skipped unless `force`. The run's
    manifest row is written before the first batch (state `running`) and replaced at
    the end (`finished`, or `failed` when a batch raised), with its counts by status."""
    logger = get_run_logger()
    started = time.perf_counter()
    plan = load(spec_path)
    catalog_path = catalog.resolve(catalog_path)  # workers may run elsewhere
    done = set() if force else catalog.finished(catalog_path, [j.done_key for j in plan.jobs])
    todo = [job for job in plan.jobs if job.done_key not in done]
    run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid4().hex[:6]}"
    size = batch_size or auto_batch_size(len(todo), workers)
    work = batches(todo, run_id, plan.name, size)
    logger.info(
        "run %s: %d instances planned, %d already in the catalog, %d to solve in %d batches",
        run_id,
        len(plan.jobs),
        len(plan.jobs) - len(todo),
        len(todo),
        len(work),
    )
    manifest = {
        "run_id": run_id,
        "sweep": plan.name,
        "spec_path": str(spec_path),
        "spec": plan.text,
        "started_at": datetime.now(UTC),
        "planned": len(plan.jobs),
        "skipped": len(plan.jobs) - len(todo),
        "batches": len(work),
        "batch_size": size,
        "force": force,
    }
    catalog.write_run(catalog_path, {**manifest, "state": "running"})
    counts: Counter = Counter()
    solved = 0
    try:
        futures = [solve_batch.submit(batch, catalog_path) for batch in work]
        for future in as_completed(futures):
            report = future.result()
            counts.update(report["counts"])
            solved += report["instances"]
            logger.info("%d/%d instances solved (%s)", solved, len(todo), dict(counts))
    finally:
        state = "finished" if solved == len(todo) else "failed"
        ended = {"state": state, "finished_at": datetime.now(UTC), "solved": solved}
        catalog.write_run(catalog_path, {**manifest, **ended, **_status_counts(counts)})
    return {
        "run_id": run_id,
        "sweep": plan.name,
        "planned": len(plan.jobs),
        "skipped": len(plan.jobs) - len(todo),
        "solved": solved,
        "counts": dict(counts),
        "batches": len(work),
        "seconds": time.perf_counter() - started,
    }


def _status_counts(counts: Counter) -> dict[str, int]:
    """One manifest column per status, zero when absent."""
    return {status: counts.get(status, 0) for status in catalog.STATUSES}


@contextmanager
def prefect_api() -> Iterator[str | None]:
    """Use the configured Prefect API, or start one temporary API server for the whole
    run (Prefect's ephemeral server) and point this process and, through the settings
    that the task runner ships with each task, every Dask worker at it; otherwise each
    worker process would start its own (DESIGN.md, measured facts). Yields the API URL."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        yield PREFECT_API_URL.value()
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    server.start()
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server.api_url
    finally:
        server.stop()


def run_sweep(
    spec_path: str,
    catalog_path: str,
    address: str | None = None,
    workers: int = 2,
    batch_size: int | None = None,
    force: bool = False,
) -> dict:
    """Run `sweep` on Dask: on the scheduler at `address`, or on a new `LocalCluster`
    of `workers` single-threaded worker processes. Returns the flow's report."""
    from prefect_dask import DaskTaskRunner

    if address:
        runner = DaskTaskRunner(address=address)
    else:
        runner = DaskTaskRunner(
            cluster_kwargs={
                "n_workers": workers,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
            }
        )
    with prefect_api():
        return sweep.with_options(task_runner=runner)(
            spec_path, catalog_path, batch_size=batch_size, workers=workers, force=force
        )
