"""The sharded search flow: one `min_moves` search whose layers are sharded over the Dask
workers, one Prefect task per target, every finished layer recorded on disk.

The search itself (what a layer is, who owns a key, what to expand next, the walk back
to a solution) is `solvers.frontier.sharded`; this module only runs its parts and
records what they return. Each target L ("is there a solution of L moves?") is a Prefect
task `attempt`; its beams run first as one Dask future (`beam.beam_part`: a solution of
L, or L failed, or neither); each of its layers is two rounds of Dask futures, one per
shard (`cluster.on_every_part`): expand shard i (its children sent by owner as buckets
on disk), then merge shard j of the new layer (duplicates removed where the keys land,
looked up in the other side); then the layer's manifest is written (`sharded.record`). A
Prefect task per shard and round would cost far more than the futures' work (see
benchmarks/README.md, "Figures behind choices in the code"), so Prefect sees targets and
Dask sees shards. A killed flow loses at most the layer in flight: the next run reads
the manifests (`sharded.plan`) and goes on from the last finished layer. The answer is
replayed by the caller's `verify` before it is returned. `run_search` runs the flow on a
cluster as `puzzlesweep search` does, the run recorded in the catalog's `runs` as a
sweep's, and `write_row` records an instance's answer in `results`.
"""

import hashlib
import json
import math
import os
import resource
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from puzzlesweep import catalog
from puzzlesweep.core import VERSION, BadInput
from puzzlesweep.flows.cluster import connect, on_every_part, worker_identity
from puzzlesweep.flows.run_record import RunRecord, manifest, recorded
from puzzlesweep.flows.settings import RunSettings
from puzzlesweep.solvers import Limits, frontier
from puzzlesweep.solvers.frontier import beam, run_folder, sharded
from puzzlesweep.solvers.frontier.depth_first import incumbent
from puzzlesweep.solvers.frontier.sharded import ShardedRun, Step

#: The `solver` column of a sharded search's row.
SOLVER = "frontier-sharded"
#: The depth-first dive for an incumbent takes at most this many seconds, and this
#: share of the wall time.
INCUMBENT_SECONDS = 10.0
INCUMBENT_SHARE = 0.05
#: The search stops this share of the wall (at most these seconds) before it, to close
#: its cluster and write its rows within the wall.
WALL_MARGIN_SHARE = 0.05
WALL_MARGIN_SECONDS = 10.0
#: A part still running this many seconds past its stop time is left behind (one
#: position's moves can take minutes: the parts look at the clock between positions).
PART_GRACE = 2.0


def _worker() -> dict:
    """This worker's name and its peak resident memory so far (bytes, ru_maxrss)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"worker": worker_identity()[0], "rss": rss}


def _expand(run: ShardedRun, step: Step, i: int, stop_at: float) -> dict:
    """`sharded.expand_part` of shard i, on a worker, until the wall-clock `stop_at`;
    "made" is None when it stopped there."""
    made = sharded.expand_part(run, step.target, step.side, step.d, i, stop_at)
    return {"made": made, **_worker()}


def _merge(run: ShardedRun, step: Step, j: int, other: int, stop_at: float) -> dict:
    """`sharded.merge_part` of shard j of the layer after `step`'s, on a worker, until
    the wall-clock `stop_at`; "merged" is None when it stopped there."""
    merged = sharded.merge_part(run, step.target, step.side, step.d + 1, j, other, stop_at)
    return {"merged": merged, **_worker()}


def _peaks(peaks: dict, rows: list[dict]) -> None:
    """Raise each worker's peak RSS in `peaks` (bytes by worker) to its parts' `rows`."""
    for row in rows:
        peaks[row["worker"]] = max(peaks.get(row["worker"], 0), row["rss"])


def _beam(run: ShardedRun, target: int, stop_at: float) -> dict:
    """`beam.beam_part` of `target`, on a worker, until the wall-clock `stop_at`;
    "beam" is None when it stopped there."""
    return {"beam": beam.beam_part(run, target, stop_at), **_worker()}


def _layer(client, run: ShardedRun, step: Step, peaks: dict, stop_at: float) -> dict | None:
    """One layer: every shard expanded, then every shard merged; returns its manifest,
    or None when a part stopped at the wall-clock `stop_at` (nothing recorded: the
    next run redoes the layer); raises the first error of a part."""
    shards = range(run.shards)
    rows = _parts(client, _expand, [(run, step, i, stop_at) for i in shards], stop_at)
    merged = []
    if rows and all(row["made"] is not None for row in rows):
        other = len(sharded.manifests(run, step.target, "b" if step.side == "f" else "f"))
        calls = [(run, step, j, other, stop_at) for j in shards]
        merged = _parts(client, _merge, calls, stop_at)
    _peaks(peaks, rows + merged)
    if not merged or any(row["merged"] is None for row in merged):
        return None
    manifest = sharded.record(run, step, [row["merged"] for row in merged])
    return {**manifest, "made": sum(row["made"] for row in rows)}


def _parts(client, function, calls: list[tuple], stop_at: float) -> list:
    """`cluster.on_every_part`, given up (cancelled, [] returned) when the parts are not
    all done `PART_GRACE` seconds after the wall-clock `stop_at`."""
    if math.isinf(stop_at):
        return on_every_part(client, function, calls)
    futures = [client.submit(function, *args, pure=False) for args in calls]
    try:  # in order, an error re-raised here, as `on_every_part`
        return [f.result(timeout=max(0.0, stop_at + PART_GRACE - time.time())) for f in futures]
    except TimeoutError:
        client.cancel(futures)
        return []


@task(name="attempt", cache_policy=NO_CACHE)
def attempt(
    run: ShardedRun, client, step: Step, peaks: dict, on_layer, stop_at: float = math.inf
) -> dict:
    """Run the target's beams on one of the Dask `client`'s workers, then expand layers,
    their parts on every worker, while the search stays at `step.target` and the
    wall-clock time `stop_at` (`time.time()`) has not passed; a beam or a layer in
    flight at `stop_at` stops there, unrecorded. Returns {"step": the next step
    (another target's, the end, or this one's when the time ran out), "layers": layers
    made}."""
    made, target = 0, step.target
    while step.going and step.target == target and time.time() < stop_at:
        if step.kind == "beam":
            rows = _parts(client, _beam, [(run, target, stop_at)], stop_at)
            if not rows or rows[0]["beam"] is None:
                break
            _peaks(peaks, rows)
            step = sharded.plan(run)
            continue
        manifest = _layer(client, run, step, peaks, stop_at)
        if manifest is None:
            break
        made += 1
        if on_layer is not None:
            on_layer(step, manifest)
        step = sharded.plan(run)
    return {"step": step, "layers": made}


@flow(name="sharded-search", validate_parameters=False)
def sharded_search(
    run: ShardedRun,
    scheduler: str,
    verify: Callable[[list], int],
    on_layer: Callable[[Step, dict], None] | None = None,
    wall_seconds: float | None = None,
) -> dict:
    """Run (or resume) the sharded search `run` with its parts on the Dask scheduler at
    `scheduler`; `verify(path)` replays a solution's rules and returns its moves
    (raising on an invalid one); `on_layer(step, manifest)` is called after each
    recorded layer; `wall_seconds` after the start (None: no limit) every part stops
    within about a second and the layer in flight is dropped (a re-run redoes it); a
    depth-first dive first gives an incumbent (`depth_first.incumbent`), which a time
    limit reports with the bound the failed targets prove.
    Returns {"status": optimal | infeasible | time_limit, "objective" (at a time limit
    the incumbent's moves or None), "bound" (the fewest moves possible: every smaller
    target failed), "solution" (the rules, replayed by `verify`), "layers":
    layers made by this run, "peak_rss": {worker: bytes}, "seconds"}. Raises
    RuntimeError when the replayed moves differ from the search."""
    started, made, peaks = time.perf_counter(), 0, {}
    stop_at = math.inf if wall_seconds is None else time.time() + wall_seconds
    step = sharded.plan(run)
    best = None
    if step.going:  # an incumbent: what a time limit reports
        share = INCUMBENT_SHARE * (math.inf if wall_seconds is None else wall_seconds)
        best = incumbent(run.problem, min(INCUMBENT_SECONDS, share))
    with connect(scheduler) as client:  # one client: opening one took about 0.3 s
        while step.going and time.time() < stop_at:
            task = attempt.with_options(task_run_name=f"target-{step.target}")
            done = task(run, client, step, peaks, on_layer, stop_at)
            step, made = done["step"], made + done["layers"]
    report = {"layers": made, "peak_rss": peaks, "seconds": time.perf_counter() - started}
    if step.going:  # the wall ran out: the targets below this one failed
        objective = None if best is None else verify(best)
        return {**report, "status": "time_limit", "objective": objective, "bound": step.target,
                "solution": best}  # fmt: skip
    if step.kind == "infeasible":
        return {**report, "status": "infeasible", "objective": None, "bound": None,
                "solution": None}  # fmt: skip
    path = sharded.path_of(run, step)
    if (moves := verify(path)) != step.target:
        raise RuntimeError(f"the replayed path has {moves} moves, the search {step.target}")
    return {**report, "status": "optimal", "objective": moves, "bound": moves, "solution": path}


def run_search(
    run: ShardedRun,
    verify: Callable[[list], int],
    settings: RunSettings,
    family,
    p=None,
    wall_seconds: float | None = None,
    announce: Callable[[str], None] | None = None,
    on_running: Callable[..., None] | None = None,
    begun_at: float | None = None,
) -> dict:
    """`sharded_search` of `run` on the cluster of `settings` (a `RunSettings`: the
    scheduler at its address, or a new LocalCluster) under the configured or a temporary
    Prefect API, started as a sweep's are (`RunSettings.start_with_api`); `announce(line)`
    is told the cluster's address and every finished layer; `on_running` is the flow's
    Prefect `on_running` hook. The run has its row in the catalog's `runs` as a sweep's
    (`running` before any cluster starts, a heartbeat, then `finished`, `interrupted` or
    `failed`: `run_record.recorded`; the `family` module's results table is made if
    missing), and the answer of instance `p` (the family's Params; None for every start)
    is written to `results` under the run's id (`write_row`). `wall_seconds` count from
    `begun_at` (a `time.time()`, the command's start; None: now), so they include the
    API's and the cluster's start; the search stops `WALL_MARGIN_SHARE` of them (at most
    `WALL_MARGIN_SECONDS`) early, to close the cluster and write the rows. Returns the
    flow's report plus "scheduler", "dashboard" and "row" (a new results row was
    written). Raises BadInput for an address that does not answer, for a folder that
    cannot hold this search (`run_folder.check_folder`: another search, a file, no
    permission) or that
    another search holds (`run_folder.folder_lock`), before any cluster starts."""
    held = ExitStack()
    try:  # before any cluster starts
        run_folder.check_folder(run)
        held.enter_context(run_folder.folder_lock(run))
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    except OSError as exc:  # a read-only file system, seen only when writing
        raise BadInput(f"folder {run.folder}: {exc.strerror or exc}") from None
    catalog_path = catalog.resolve(settings.catalog)
    say = announce or (lambda line: None)
    with held:
        record = _record(run, catalog_path, wall_seconds, family, p)
        stop_at = _stop_at(wall_seconds, begun_at)
        with recorded(record), settings.start_with_api(None, say, "layers") as started:
            record.manifest["dask_dashboard_url"] = started.dashboard
            record.write()
            report = _search(run, verify, started, stop_at, say, on_running)
            row = p is not None and write_row(
                catalog_path, family, p, report, wall_seconds, record.manifest
            )
            # a finished search of instance p that wrote no row found its answer stored
            record.manifest["skipped"] = int(p is not None and not row)
    return {**report, "row": row}


def _stop_at(wall_seconds: float | None, begun_at: float | None) -> float | None:
    """The wall-clock time (`time.time()`) the search stops at: `wall_seconds` after
    `begun_at` (None: now), less the margin to close the cluster and write the rows;
    None without a wall."""
    if wall_seconds is None:
        return None
    margin = min(WALL_MARGIN_SECONDS, WALL_MARGIN_SHARE * wall_seconds)
    return (begun_at or time.time()) + wall_seconds - margin


def _search(run, verify, started, stop_at, say, on_running) -> dict:
    """`sharded_search` on the `started` cluster (`settings.Started`), its layers told
    to `say`, until the wall-clock `stop_at` (`time.time()`; None: no limit), which
    counts the Prefect API's and the cluster's start (the search gets what they
    leave)."""

    def on_layer(step: Step, manifest: dict) -> None:
        side = "forward" if step.side == "f" else "backward"
        say(f"target {step.target}: {side} layer {step.d + 1}, {manifest['keys']:,} keys "
            f"({time.perf_counter() - begun:.0f} s)")  # fmt: skip

    begun = time.perf_counter()
    flow_ = sharded_search.with_options(
        flow_run_name=f"search {run.folder}", on_running=[on_running] if on_running else None
    )
    left = None if stop_at is None else max(0.0, stop_at - time.time())
    report = flow_(run, started.scheduler, verify, on_layer, left)
    return {**report, "scheduler": started.scheduler, "dashboard": started.dashboard}


def _record(run: ShardedRun, catalog_path: str, wall: float | None, family, p) -> RunRecord:
    """The `RunRecord` of a new search run: sweep `search-` and 12 hex digits of the
    folder's absolute path (one sweep per folder in `runs`); `spec` holds the folder,
    its fingerprint and the limits as JSON; one instance planned, none for every start.
    Raises as `catalog.prepare` for a results table that cannot take the family's rows."""
    folder = os.path.abspath(run.folder)
    spec = {"folder": folder, **run_folder.fingerprint(run), "memory": run.memory, "wall": wall}
    sweep = f"search-{hashlib.sha256(folder.encode()).hexdigest()[:12]}"
    columns = manifest(sweep, json.dumps(spec), 0 if p is None else 1)
    catalog.prepare(catalog_path, {family.Params})
    return RunRecord(columns["run_id"], catalog_path, columns)


def catalog_row(family, p, report: dict, wall_seconds: float | None, started_at) -> dict:
    """The catalog row of instance `p` of `family` (its Params) from `sharded_search`'s
    `report`: solver `frontier-sharded`, the solution carried to `p`'s own start
    (`family.from_search`) and encoded, `verified` True (the flow replayed it), the
    wall limit as `time_limit` (None: none), `started_at` (UTC datetime) to now."""
    from puzzlesweep.puzzles import Instance
    from puzzlesweep.solve import empty_row

    row = empty_row(Instance(family.NAME, p), SOLVER, Limits(wall_seconds or 1.0))
    solution = report["solution"]
    row.update(
        solver_version=frontier.VERSION,
        status=report["status"],
        objective=report["objective"],
        bound=report["bound"],
        gap=0.0 if report["status"] == "optimal" else None,
        solve_seconds=report["seconds"],
        solution=None if solution is None else family.encode(family.from_search(p, solution)),
        verified=None if solution is None else True,
        started_at=started_at,
        finished_at=datetime.now(UTC),
        time_limit=wall_seconds,
    )
    return row


SAME_ANSWER = """
SELECT count(*) FROM results WHERE params_key = ? AND solver = ? AND status = ?
AND objective IS NOT DISTINCT FROM ? AND bound IS NOT DISTINCT FROM ?
AND time_limit IS NOT DISTINCT FROM ?"""


def write_row(catalog_path: str, family, p, report: dict, wall_seconds, manifest: dict) -> bool:
    """Append instance `p`'s `catalog_row` to the catalog at `catalog_path` as its own
    commit, under the run id and sweep of the run's `manifest`; False (nothing written)
    when a row of the same answer under the same limit is there already (a re-run of a
    finished search). Raises as `catalog.write_batch`."""

    row = catalog_row(family, p, report, wall_seconds, manifest["started_at"])
    if catalog.exists(catalog_path) and catalog.files(catalog_path):
        keys = ("params_key", "solver", "status", "objective", "bound", "time_limit")
        if catalog.query(catalog_path, SAME_ANSWER, [row[k] for k in keys])[1][0][0]:
            return False
    run_id = manifest["run_id"]
    row.update(run_id=run_id, sweep=manifest["sweep"], puzzlesweep_version=VERSION)
    row["schema_version"] = catalog.SCHEMA_VERSION
    return catalog.write_batch(catalog_path, family.Params, [row], f"{run_id}-search")
