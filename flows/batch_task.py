"""The batch task: solve, verify and commit one batch of a sweep, and tell Prefect what it did.

One Prefect task run per batch (`solve_batch`), run by a Dask worker or a thread of the
flow's process. Its instances are solved in the thread's child process under hard time
and memory limits (`isolate`); its rows are one Delta commit carrying the run and batch
number as an application transaction, so a repeated attempt writes nothing twice. Each
instance is one log line on the task run and one row of its table artifact, so the
Prefect UI shows what a batch did. Kept apart from `sweep`, which only plans, submits
and counts: this module is what runs on the workers.
"""

import time
from collections import Counter
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from puzzlesweep import __version__, catalog, puzzles
from puzzlesweep.flows.batches import Batch
from puzzlesweep.flows.cluster import batch_children, commits_stopped, report_to, worker_identity
from puzzlesweep.flows.faults import (
    CatalogUnwritable,
    disk_full,
    first_line,
    permanent,
    retry_transient,
)
from puzzlesweep.flows.isolate import Children, Interrupted
from puzzlesweep.solve import empty_row, solve_classes

RETRIES = 2  # extra attempts of a batch after a transient failure (Prefect task retries)


def _report(app_id: str, rows: list[dict], attempt: int, seconds: float) -> dict:
    return {
        "commit": app_id,
        "counts": dict(Counter(row["status"] for row in rows)),
        "instances": len(rows),
        "verified": sum(bool(row["verified"]) for row in rows),
        "attempt": attempt,
        "seconds": seconds,
    }


@task(
    name="solve-batch",
    cache_policy=NO_CACHE,
    retries=RETRIES,
    retry_delay_seconds=2,
    retry_condition_fn=retry_transient,
)
def solve_batch(
    batch: Batch,
    catalog_path: str,
    memory_limit: int | None = None,
    topic: str | None = None,
    children: Children | None = None,
) -> dict:
    """Solve, verify and commit one batch; returns {"commit" (its application
    transaction id, RUN-NUMBER), "counts" (status → count), "instances", "verified",
    "attempt" (1 for the first run of this task, 2 for its first retry...), "seconds"
    (wall time of this attempt)}.

    Each instance runs in this thread's child process (`isolate.Child`, leased from
    `children`: the threads backend's, or None for the Dask worker's) under its time
    and node limits and `memory_limit` bytes (default: the Dask worker's memory limit per
    thread; None: no limit). A batch already committed (an earlier attempt wrote it, but
    its report was lost with its worker) is read back, not solved again. Raises OSError
    when the catalog cannot be written transiently (Prefect retries the task),
    CatalogUnwritable when no retry can help (`faults.permanent`: not retried), and
    isolate.Interrupted when a solver was stopped from outside (its rows are not
    written: an interrupted instance is not done). With `topic`, each finished class of
    equivalent instances is reported as a Dask event (batch number, instances) under
    that topic, which the run's progress display follows."""
    from prefect.runtime import task_run

    started = time.perf_counter()
    attempt = task_run.get_run_count() or 1
    if attempt > 1:
        get_run_logger().warning("batch %d: attempt %d", batch.number, attempt)
    family = puzzles.get(batch.family)
    app_id = f"{batch.run_id}-{batch.number:05d}"
    if catalog.committed(catalog_path, app_id):
        _, rows = catalog.query(
            catalog_path,
            "SELECT status, verified FROM results WHERE run_id = ? AND family = ? "
            "AND params_key IN (SELECT unnest(?))",
            [batch.run_id, batch.family, [i.params_key for i in batch.instances()]],
        )
        rows = [{"status": status, "verified": verified} for status, verified in rows]
    else:
        rows = _solve_rows(batch, memory_limit, topic, children)
        if commits_stopped(topic):  # the run was interrupted while this batch ran
            raise Interrupted(f"batch {batch.number}: the run was interrupted; not written")
        full = disk_full(None, catalog_path)
        if full:  # a write that runs out of space midway makes deltalake panic
            raise CatalogUnwritable(f"catalog {catalog_path} cannot be written: {full}")
        try:
            catalog.write_batch(catalog_path, family.Params, rows, app_id)
        except Exception as exc:
            if permanent(exc):
                why = disk_full(exc, catalog_path) or first_line(exc)
                raise CatalogUnwritable(
                    f"catalog {catalog_path} cannot be written: {why}"
                ) from None
            raise
        _tell(batch, rows)
    report = _report(app_id, rows, attempt, time.perf_counter() - started)
    _publish(batch, rows, report)
    return report


def _number(value: Any) -> str:
    """A number as people read it: integers without '.0', lists comma-joined, None as
    '-'."""
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(map(_number, value))
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    return str(value)


def instance_words(family: str, row: dict) -> str:
    """An instance named by its parameters, e.g. `domination[piece=knight rows=8 cols=8]`
    (`row`: a result row, its parameters in columns or under "params")."""
    values = {**row, **(row.get("params") or {})}  # a solved row holds them in `params`
    fields = puzzles.get(family).Params.model_fields
    return f"{family}[{' '.join(f'{k}={_number(values.get(k))}' for k in fields)}]"


def _logger():
    """The task run's logger, or this module's outside a run (a task's body called
    directly)."""
    import logging

    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(__name__)


def _tell(batch: Batch, rows: list[dict]) -> None:
    """Log one line per instance of `batch` on its task run: parameters in words,
    status, objective, bound, gap and seconds. INFO; WARNING for a stop at a time or
    node limit; ERROR with the message for an error."""
    import logging

    logger = _logger()
    for row in rows:
        status = row["status"]
        line = (
            f"{instance_words(batch.family, row)}: {status}, objective "
            f"{_number(row.get('objective'))}, bound {_number(row.get('bound'))}, gap "
            f"{_number(row.get('gap'))}, {row.get('solve_seconds') or 0:.2f} s"
        )
        if status == "error":
            logger.error("%s: %s", line, row.get("error"))
        else:
            level = logging.WARNING if status in ("time_limit", "node_limit") else logging.INFO
            logger.log(level, "%s", line)


def _publish(batch: Batch, rows: list[dict], report: dict) -> None:
    """Show what the batch did in Prefect's UI: a table artifact of its instances (or
    of its counts, when they were read back), its commit and seconds in the description."""
    from prefect.artifacts import create_table_artifact
    from prefect.context import TaskRunContext

    if TaskRunContext.get() is None:  # the task's body called directly: no task run
        return
    if rows and "family" in rows[0]:
        table = [
            {
                "instance": instance_words(batch.family, row),
                "status": row["status"],
                "objective": _number(row.get("objective")),
                "bound": _number(row.get("bound")),
                "gap": _number(row.get("gap")),
                "seconds": round(row.get("solve_seconds") or 0.0, 2),
            }
            for row in rows
        ]
    else:
        table = [{"status": k, "instances": n} for k, n in sorted(report["counts"].items())]
    n = report["instances"]
    create_table_artifact(
        table=table,
        description=f"batch {batch.number} ({batch.family}): {n} "
        f"{instances_word(n)} committed as {report['commit']}, "
        f"attempt {report['attempt']}, {report['seconds']:.1f} s",
    )


def _solve_rows(
    batch: Batch, memory_limit: int | None, topic: str | None, children: Children | None
) -> list[dict]:
    """The catalog rows of every instance of `batch`, each solved and verified in this
    thread's child process (`cluster.batch_children`)."""
    from puzzlesweep.puzzles import Instance

    worker, worker_memory = worker_identity()

    def solve_canonical(canonical: Instance) -> dict:
        request = {
            "family": batch.family,
            "params": canonical.params.model_dump(),
            "solver": batch.solver,
            "time_limit": batch.limits.time_limit,
            "node_limit": batch.limits.node_limit,
            "count": batch.count,
        }
        return {**empty_row(canonical, batch.solver, batch.limits), **child.solve(request)}

    with batch_children(children) as held, held.lease(memory_limit or worker_memory) as child:
        rows = solve_classes(batch.instances(), solve_canonical, report_to(topic, batch.number))
    for row in rows:
        row.update(
            run_id=batch.run_id,
            sweep=batch.sweep,
            worker=worker,
            puzzlesweep_version=__version__,
            schema_version=catalog.SCHEMA_VERSION,
        )
    return rows


def instances_word(n: int) -> str:
    """'instance' or 'instances', as `n` asks: log lines say "1 instance"."""
    return "instance" if n == 1 else "instances"
