"""What the dashboard draws: one JSON document computed from one snapshot of a catalog.

`state(catalog)` (usable without a server) holds:
- `runs`: one entry per run, from the catalog's `runs` table, listed from the moment a
  run starts (its row is written before any cluster starts): sweep, state (`running`,
  `finished`, `failed`, `interrupted`, or `lost` when its heartbeat stopped), instances
  done (its rows, `copies` of them carried over by symmetry), the instances it set out
  to solve (`total`) and those it found in the catalog already (`skipped`), its
  per-instance `time_limits` (seconds, one per distinct value among its spec's studies:
  the `runs` table keeps no time limit of its own, but every row keeps the spec the run
  planned from; [] for a row whose spec cannot be read), counts by
  status, first start and last finish (UTC ISO), rate (instances per minute), the
  seconds left while it runs: the run's own estimate (the one its terminal shows, written
  into its `runs` row at each heartbeat) less the seconds since that heartbeat, and
  `links`: its Prefect flow run's page (recorded when a
  Prefect server was configured) and its Dask dashboard while it runs, each None when
  there is none, so the page never shows a dead link;
- `failures`: the 50 latest results with status `error` or a failed verification, each
  naming its instance by family and parameters (`params`, as `key=value` words);
- `families`: per family, the latest result of each instance (view `latest`): how many
  `instances`, `classes` (distinct instance keys) and `copies` (rows carried over by
  symmetry), and the canonical rows (at most 500) as plot `series`, one per value of the
  family's series parameters (`AXES` of the family module), each point at x = the
  family's size parameter (`x`, named in `x_label`), or, when every point has the same
  size, at x = the first other number parameter that varies (`x_axis`);
- `times`: per family, a histogram of solve seconds over half-decades (log10 buckets);
- `open`: instances stopped by a limit, with incumbent, bound and gap.
"""

import math
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from puzzlesweep import catalog, puzzles
from puzzlesweep.flows.spec import Spec

RUNS = """
SELECT runs.run_id, runs.sweep, runs.state, runs.planned - runs.skipped AS total,
       runs.skipped, runs.flow_run_url, runs.dask_dashboard_url,
       count(results.run_id) AS done, count_if(coalesce(results.equivalent, false)) AS copies,
       runs.started_at AS first_start,
       coalesce(max(results.finished_at), any_value(runs.heartbeat_at)) AS last_finish,
       {estimate} AS estimate, runs.heartbeat_at, runs.spec
FROM runs LEFT JOIN results USING (run_id)
GROUP BY ALL ORDER BY first_start DESC LIMIT 50
"""
RUN_STATUS = "SELECT run_id, status, count(*) FROM results GROUP BY ALL"
FAILURES = """
SELECT * REPLACE (coalesce(error, 'verification failed') AS error)
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


def words(params: dict[str, Any]) -> str:
    """An instance's parameters as the dashboard names it: `key=value` words (a list
    value joined by commas), e.g. "piece=knight rows=8 cols=8 variant=dominating"."""
    return " ".join(f"{k}={_text(v)}" for k, v in params.items())


def _params(family: str, row: dict[str, Any]) -> dict[str, Any]:
    """The parameters of a results row of `family` ({} for a family this version does
    not know)."""
    if not puzzles.known(family):
        return {}
    return {name: row.get(name) for name in puzzles.get(family).Params.model_fields}


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
    columns = [d[0] for d in connection.execute("SELECT * FROM runs LIMIT 0").description]
    # a runs table written before runs carried their estimate has no such column
    sql = RUNS.format(estimate="runs.seconds_left" if "seconds_left" in columns else "NULL")
    for row in connection.execute(sql).fetchall():
        run_id, sweep, run_state, total, skipped, flow_run, dask, done, copies, *times = row
        first, last, estimate, beat, spec = times
        seconds = max(((last or now) - first).total_seconds(), 1e-3)
        rate = done / seconds * 60
        running = run_state == "running"
        if running and estimate is not None and beat is not None:
            left = round(max(0.0, estimate - (now - beat).total_seconds()))
        else:
            left = None
        entries.append(
            {
                "run_id": run_id,
                "sweep": sweep,
                "state": run_state,
                "done": done,
                "copies": copies,
                "total": total,
                "skipped": skipped,
                "time_limits": time_limits(spec),
                "counts": by_status.get(run_id, {}),
                "first_start": _iso(first),
                "last_finish": _iso(last),
                "rate_per_minute": round(rate, 2),
                "seconds_left": left,
                "estimated_at": _iso(beat) if left is not None else None,
                "running": running,
                # a local cluster's dashboard ends with its run: no link once it ended
                "links": {"prefect": flow_run, "dask": dask if running else None},
            }
        )
    return entries


def time_limits(spec: str | None) -> list[float]:
    """The distinct per-instance time limits (seconds, ascending) of the studies of
    `spec`, the TOML text a run planned from (its `runs` row's `spec`), with the spec's
    default where a study names none; [] when `spec` is not a sweep spec (None, or a
    maintenance row's operation). Reads the studies only: no grid is expanded."""
    if not spec:
        return []
    try:
        studies = Spec.model_validate(tomllib.loads(spec)).study
    except (tomllib.TOMLDecodeError, ValidationError):
        return []
    return sorted({study.time_limit for study in studies})


def _failures(connection) -> list[dict[str, Any]]:
    """The `failures` entries of the state, newest first."""
    cursor = connection.execute(FAILURES)
    columns = [d[0] for d in cursor.description]
    entries = []
    for values in cursor.fetchall():
        row = dict(zip(columns, values, strict=True))
        entries.append(
            {
                **{k: row[k] for k in ("run_id", "family", "instance_key", "status", "error")},
                "params": words(_params(row["family"], row)) or row["instance_key"],
                "finished_at": _iso(row["finished_at"]),
            }
        )
    return entries


def _families(connection, open_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `families` entries of the state; appends every row stopped by a limit to
    `open_rows`."""
    entries = []
    for family, instances, classes, copies in connection.execute(COUNTS).fetchall():
        if not puzzles.known(family):
            continue
        module = puzzles.get(family)
        cursor = connection.execute(LATEST, [family])
        columns = [d[0] for d in cursor.description]
        placed = []  # (params, series label, point)
        x_label = module.AXES[0]
        for values in cursor.fetchall():
            row = dict(zip(columns, values, strict=True))
            params = _params(family, row)
            x_label, x, label = axis(module, params)
            point = {
                "x": x,
                "params": words(params),
                "solver": row["solver"],
                "status": row["status"],
                "objective": _number(row["objective"]),
                "bound": _number(row["bound"]),
                "gap": _number(row["gap"]),
                "seconds": round(row["solve_seconds"] or 0.0, 3),
            }
            placed.append((params, label, point))
            if row["status"] in ("time_limit", "node_limit"):
                open_rows.append({"family": family, **point})
        x_label = _other_axis(module, placed) or x_label
        series: dict[str, list[dict[str, Any]]] = {}
        for _, label, point in placed:
            series.setdefault(label, []).append(point)
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


def _other_axis(module, placed: list[tuple[dict, str, dict]]) -> str | None:
    """When every point of `placed` ((params, series label, point) of one family) has
    the same size, a plot by size would stack them on one vertical line: move each
    point to x = the first number parameter (not a series one) whose values differ, and
    return its axis label, e.g. "start (side = 5)". None (nothing moved) otherwise."""
    sizes = {point["x"] for _, _, point in placed if point["x"] is not None}
    if len(sizes) != 1 or len(placed) < 2:
        return None
    size, series = module.AXES
    for name in module.Params.model_fields:
        values = [params.get(name) for params, _, _ in placed]
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        if name != size and name not in series and numbers and len(set(values)) > 1:
            for (_, _, point), value in zip(placed, values, strict=True):
                point["x"] = value
            return f"{name} ({size} = {_text(placed[0][0].get(size))})"
    return None
