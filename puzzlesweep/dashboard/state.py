"""What the dashboard draws: one JSON document computed from one snapshot of a catalog.

`state(catalog)` (usable without a server) holds:
- `runs`: one entry per run, from the catalog's `runs` table, listed from the moment a
  run starts (its row is written before any cluster starts): sweep, state (`running`,
  `finished`, `failed`, `interrupted`, or `lost` when its heartbeat stopped), instances
  done (its rows, `copies` of them carried over by symmetry), the instances it set out
  to solve (`total`) and those it found in the catalog already (`skipped`), counts by
  status, first start and last finish (UTC ISO), rate (instances per minute), estimated
  seconds left while it runs, and `links`: its Prefect flow run's page (recorded when a
  Prefect server was configured) and its Dask dashboard while it runs, each None when
  there is none, so the page never shows a dead link;
- `failures`: the 50 latest results with status `error` or a failed verification;
- `families`: per family, the latest result of each instance (view `latest`): how many
  `instances`, `classes` (distinct instance keys) and `copies` (rows carried over by
  symmetry), and the canonical rows (at most 500) as plot `series`, one per value of the
  family's series parameters (`AXES` of the family module), each point at x = the
  family's size parameter (`x`, named in `x_label`);
- `times`: per family, a histogram of solve seconds over half-decades (log10 buckets);
- `open`: instances stopped by a limit, with incumbent, bound and gap.
"""

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from puzzlesweep import catalog, puzzles

RUNS = """
SELECT runs.run_id, runs.sweep, runs.state, runs.planned - runs.skipped AS total,
       runs.skipped, runs.flow_run_url, runs.dask_dashboard_url,
       count(results.run_id) AS done, count_if(coalesce(results.equivalent, false)) AS copies,
       runs.started_at AS first_start,
       coalesce(max(results.finished_at), any_value(runs.heartbeat_at)) AS last_finish
FROM runs LEFT JOIN results USING (run_id)
GROUP BY ALL ORDER BY first_start DESC LIMIT 50
"""
RUN_STATUS = "SELECT run_id, status, count(*) FROM results GROUP BY ALL"
FAILURES = """
SELECT run_id, family, instance_key, status, coalesce(error, 'verification failed'),
       finished_at
FROM results WHERE status = 'error' OR verified = false
ORDER BY finished_at DESC LIMIT 50
"""
COUNTS = """
SELECT family, count(DISTINCT params_key), count(DISTINCT instance_key),
       count(DISTINCT params_key) FILTER (WHERE coalesce(equivalent, false))
FROM latest GROUP BY family ORDER BY family
"""
LATEST = """
SELECT * FROM latest WHERE family = ? AND NOT coalesce(equivalent, false) LIMIT 500
"""  # the catalog's one definition of the latest row; symmetric copies left out
TIMES = """
SELECT family, floor(log10(greatest(solve_seconds, 1e-4)) * 2) / 2 AS bucket, count(*)
FROM results GROUP BY ALL ORDER BY family, bucket
"""


def _iso(value: Any) -> str | None:
    return value.astimezone(UTC).isoformat(timespec="seconds") if value else None


def _number(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def axis(module, params: dict) -> tuple[str, float | None, str]:
    """(x label, x value, series label) of one instance of family `module` on the plot:
    x is the size parameter of the family's `AXES` (a list parameter counts its
    product, labelled so), the series label its series parameters as `key=value`."""
    name, series = module.AXES
    value = params.get(name)
    label = name
    if isinstance(value, list):
        value, label = (math.prod(value) if value else None), f"cells (product of {name})"
    return label, value, " ".join(f"{k}={_text(params.get(k))}" for k in series)


def state(location: str | Path) -> dict[str, Any]:
    """The dashboard's JSON (see the module docstring). A missing catalog, or one whose
    results table does not exist yet, gives empty lists, not an error, so the page can
    wait for the first run. Raises CatalogDamaged naming a data file that cannot be
    read."""
    now = datetime.now(UTC)
    result: dict[str, Any] = {
        "catalog": str(location),
        "generated_at": now.isoformat(timespec="seconds"),
        "runs": [],
        "failures": [],
        "families": [],
        "times": {},
        "open": [],
    }
    if not catalog.exists(location):
        return result
    with catalog.snapshot(location) as shot:
        if shot.results is not None:
            result["runs"] = _runs(shot.connection, now)
            result["failures"] = _failures(shot.connection)
            result["families"] = _families(shot.connection, result["open"])
            for family, bucket, count in shot.connection.execute(TIMES).fetchall():
                result["times"].setdefault(family, []).append([bucket, count])
    return result


def _runs(connection, now: datetime) -> list[dict[str, Any]]:
    """The `runs` entries of the state, newest first."""
    by_status: dict[str, dict[str, int]] = {}
    for run_id, status, count in connection.execute(RUN_STATUS).fetchall():
        by_status.setdefault(run_id, {})[status] = count
    entries = []
    for row in connection.execute(RUNS).fetchall():
        run_id, sweep, run_state, total, skipped, flow_run, dask, done, copies, first, last = row
        seconds = max(((last or now) - first).total_seconds(), 1e-3)
        rate = done / seconds * 60
        running = run_state == "running"
        entries.append(
            {
                "run_id": run_id,
                "sweep": sweep,
                "state": run_state,
                "done": done,
                "copies": copies,
                "total": total,
                "skipped": skipped,
                "counts": by_status.get(run_id, {}),
                "first_start": _iso(first),
                "last_finish": _iso(last),
                "rate_per_minute": round(rate, 2),
                "seconds_left": (
                    round((total - done) / rate * 60) if total and running and rate else None
                ),
                "running": running,
                # a local cluster's dashboard ends with its run: no link once it ended
                "links": {"prefect": flow_run, "dask": dask if running else None},
            }
        )
    return entries


def _failures(connection) -> list[dict[str, Any]]:
    """The `failures` entries of the state, newest first."""
    columns = ("run_id", "family", "instance_key", "status", "error", "finished_at")
    return [
        {**dict(zip(columns, row, strict=True)), "finished_at": _iso(row[-1])}
        for row in connection.execute(FAILURES).fetchall()
    ]


def _families(connection, open_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `families` entries of the state; appends every row stopped by a limit to
    `open_rows`."""
    entries = []
    for family, instances, classes, copies in connection.execute(COUNTS).fetchall():
        if family not in puzzles.FAMILIES:
            continue
        module = puzzles.get(family)
        fields = list(module.Params.model_fields)
        cursor = connection.execute(LATEST, [family])
        columns = [d[0] for d in cursor.description]
        series: dict[str, list[dict[str, Any]]] = {}
        x_label = module.AXES[0]
        for values in cursor.fetchall():
            row = dict(zip(columns, values, strict=True))
            params = {name: row.get(name) for name in fields}
            x_label, x, label = axis(module, params)
            point = {
                "x": x,
                "params": " ".join(f"{k}={_text(v)}" for k, v in params.items()),
                "solver": row["solver"],
                "status": row["status"],
                "objective": _number(row["objective"]),
                "bound": _number(row["bound"]),
                "gap": _number(row["gap"]),
                "seconds": round(row["solve_seconds"] or 0.0, 3),
            }
            series.setdefault(label, []).append(point)
            if row["status"] in ("time_limit", "node_limit"):
                open_rows.append({"family": family, **point})
        for points in series.values():
            points.sort(key=lambda p: (p["x"] is None, p["x"] or 0, p["params"]))
        entries.append(
            {
                "family": family,
                "x_label": x_label,
                "series_by": list(module.AXES[1]),
                "instances": instances,
                "classes": classes,
                "copies": copies,
                "series": [{"label": k, "points": v} for k, v in sorted(series.items())],
            }
        )
    return entries
