"""A live, read-only web page over a catalog: runs, failures and results at a glance.

`make_server(catalog, host, port)` answers two routes and nothing else: `/` (the page
`dashboard.html`, its script and style inline, nothing fetched from the internet) and `/api/state`
(JSON). The browser sends no path, file name or SQL that reaches the machine: every query
is a fixed string of this module, and any other route is a 404. The page polls
`/api/state` every few seconds, so it follows a sweep while it writes.

`state(catalog)` is the JSON the page draws, usable without a server:
- `runs`: one entry per run, from the catalog's `runs` table (listed from the moment a
  run starts): sweep, state (`running`, `finished`, `failed`, `interrupted`, or `lost`
  when its heartbeat stopped), instances done (a count of its rows), the instances it
  set out to solve, counts by status, first start and last finish (UTC ISO), rate
  (instances per minute) and estimated seconds left while it runs;
- `failures`: the 50 latest results with status `error` or a failed verification;
- `families`: per family, the latest result of each instance (view `latest`, symmetric
  copies left out, at most 500), with `size`
  (the first integer parameter, or the product of the first list parameter), the
  parameters as text, objective, bound, gap, status and seconds;
- `times`: per family, a histogram of solve seconds over half-decades (log10 buckets);
- `open`: instances stopped by a limit, with incumbent, bound and gap.
"""

import json
import math
import os
import threading
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from puzzlesweep import catalog as store
from puzzlesweep import puzzles

RUNS = """
SELECT runs.run_id, runs.sweep, runs.state, runs.planned - runs.skipped AS total,
       count(results.run_id) AS done, runs.started_at AS first_start,
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
LATEST = """
SELECT * FROM latest WHERE family = ? AND NOT coalesce(equivalent, false) LIMIT 500
"""  # the catalog's one definition of the latest row; symmetric copies left out
TIMES = """
SELECT family, floor(log10(greatest(solve_seconds, 1e-4)) * 2) / 2 AS bucket, count(*)
FROM results GROUP BY ALL ORDER BY family, bucket
"""
FAMILIES = "SELECT DISTINCT family FROM results ORDER BY family"


def _iso(value: Any) -> str | None:
    return value.astimezone(UTC).isoformat(timespec="seconds") if value else None


def _number(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _size(params: dict, fields: list[str]) -> float | None:
    """The first integer parameter, or the product of the first list parameter."""
    for name in fields:
        value = params.get(name)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            return math.prod(value)
    return None


def _text(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def state(catalog: str | Path) -> dict[str, Any]:
    """The dashboard's JSON (see the module docstring). A missing catalog, or one whose
    results table does not exist yet, gives empty lists, not an error, so the page can
    wait for the first run. Raises CatalogDamaged naming a data file that cannot be
    read."""
    now = datetime.now(UTC)
    result: dict[str, Any] = {
        "catalog": str(catalog),
        "generated_at": now.isoformat(timespec="seconds"),
        "links": _links(),
        "runs": [],
        "failures": [],
        "families": [],
        "times": {},
        "open": [],
    }
    if not store.exists(catalog):
        return result
    with store.snapshot(catalog) as shot:
        if shot.results is not None:
            _fill_state(result, shot.connection, now)
    return result


def _fill_state(result: dict[str, Any], connection, now: datetime) -> None:
    """Fill `result`'s lists from the views of one snapshot's DuckDB `connection`."""
    by_status: dict[str, dict[str, int]] = {}
    for run_id, status, count in connection.execute(RUN_STATUS).fetchall():
        by_status.setdefault(run_id, {})[status] = count
    for run_id, sweep, run_state, total, done, first, last in connection.execute(RUNS).fetchall():
        seconds = max(((last or now) - first).total_seconds(), 1e-3)
        rate = done / seconds * 60
        running = run_state == "running"
        result["runs"].append(
            {
                "run_id": run_id,
                "sweep": sweep,
                "state": run_state,
                "done": done,
                "total": total,
                "counts": by_status.get(run_id, {}),
                "first_start": _iso(first),
                "last_finish": _iso(last),
                "rate_per_minute": round(rate, 2),
                "seconds_left": (
                    round((total - done) / rate * 60) if total and running and rate else None
                ),
                "running": running,
            }
        )
    for run_id, family, key, status, error, finished_at in connection.execute(FAILURES).fetchall():
        result["failures"].append(
            {
                "run_id": run_id,
                "family": family,
                "instance_key": key,
                "status": status,
                "error": error,
                "finished_at": _iso(finished_at),
            }
        )
    families = [f for (f,) in connection.execute(FAMILIES).fetchall() if f in puzzles.FAMILIES]
    for family in families:
        fields = list(puzzles.get(family).Params.model_fields)
        cursor = connection.execute(LATEST, [family])
        columns = [d[0] for d in cursor.description]
        rows = []
        for values in cursor.fetchall():
            row = dict(zip(columns, values, strict=True))
            params = {name: row.get(name) for name in fields}
            entry = {
                "size": _size(params, fields),
                "params": " ".join(f"{k}={_text(v)}" for k, v in params.items()),
                "status": row["status"],
                "objective": _number(row["objective"]),
                "bound": _number(row["bound"]),
                "gap": _number(row["gap"]),
                "seconds": round(row["solve_seconds"] or 0.0, 3),
            }
            rows.append(entry)
            if row["status"] in ("time_limit", "node_limit"):
                result["open"].append({"family": family, **entry})
        rows.sort(key=lambda r: (r["size"] is None, r["size"] or 0, r["params"]))
        result["families"].append({"family": family, "rows": rows})
    for family, bucket, count in connection.execute(TIMES).fetchall():
        result["times"].setdefault(family, []).append([bucket, count])


def _links() -> dict[str, str | None]:
    """The Prefect UI when a Prefect server is configured, and the Dask dashboard when
    `$PUZZLESWEEP_DASK_DASHBOARD` names one."""
    api = os.environ.get("PREFECT_API_URL", "")
    prefect_ui = os.environ.get("PREFECT_UI_URL") or (api.removesuffix("/api") if api else None)
    return {"prefect": prefect_ui, "dask": os.environ.get("PUZZLESWEEP_DASK_DASHBOARD")}


class _Handler(BaseHTTPRequestHandler):
    """Serves `/` and `/api/state` for one catalog; everything else is 404."""

    catalog = "results"
    refresh_seconds = 3.0

    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        if self.path == "/":
            page = PAGE.replace("__REFRESH_MS__", str(int(self.refresh_seconds * 1000)))
            self._send(HTTPStatus.OK, "text/html; charset=utf-8", page.encode())
        elif self.path == "/api/state":
            try:
                body = json.dumps(state(self.catalog), default=str).encode()
            except Exception as exc:  # a broken file must not take the page down
                body = json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode()
            self._send(HTTPStatus.OK, "application/json", body)
        else:
            self._send(HTTPStatus.NOT_FOUND, "text/plain; charset=utf-8", b"not found\n")

    def do_POST(self) -> None:  # noqa: N802
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", b"read-only\n")

    do_PUT = do_DELETE = do_PATCH = do_POST

    def _send(self, status: HTTPStatus, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", "default-src 'self' 'unsafe-inline'")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: no access log on stderr."""


def make_server(
    catalog: str | Path, host: str = "127.0.0.1", port: int = 8050, refresh_seconds: float = 3.0
) -> ThreadingHTTPServer:
    """A ready server (not yet serving) for `catalog` on host:port (port 0 picks a free
    one; read it back from `server.server_address`). Raises OSError if the port is taken."""
    handler = type(
        "Handler", (_Handler,), {"catalog": str(catalog), "refresh_seconds": refresh_seconds}
    )
    return ThreadingHTTPServer((host, port), handler)


def serve_in_thread(catalog: str | Path, host: str = "127.0.0.1", port: int = 0):
    """Start a server on a daemon thread; returns (server, "http://host:port")."""
    server = make_server(catalog, host, port, refresh_seconds=1.0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bound_host, bound_port = server.server_address[:2]
    return server, f"http://{bound_host}:{bound_port}"


PAGE = (resources.files("puzzlesweep") / "dashboard.html").read_text()
