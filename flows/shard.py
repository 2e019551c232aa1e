"""The sharded search flow: one `min_moves` search whose layers are sharded over the
Dask workers, one Prefect task per target, every finished layer recorded on disk.

The search itself (what a layer is, who owns a key, what to expand next, the walk back
to a solution) is `solvers.frontier.sharded`; this module only runs its parts and
records what they return. Each target L ("is there a solution of L moves?") is a
Prefect task `attempt`; each of its layers is two rounds of Dask futures, one per shard
(`cluster.on_every_part`): expand shard i (its children sent by owner as buckets on
disk), then merge shard j of the new layer (duplicates removed where the keys land,
looked up in the other side); then the layer's manifest is written (`sharded.record`).
A Prefect task per shard and round would cost far more than the futures' work (see
benchmarks/README.md, "Figures behind choices in the code"), so Prefect sees targets
and Dask sees shards. A killed flow loses at most the layer in flight: the next run reads the
manifests (`sharded.plan`) and goes on from the last finished layer. The answer is
replayed by the caller's `verify` before it is returned.
"""

import resource
import time
from collections.abc import Callable

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from puzzlesweep.flows.cluster import connect, on_every_part, worker_identity
from puzzlesweep.solvers.frontier import sharded
from puzzlesweep.solvers.frontier.sharded import ShardedRun, Step


def _worker() -> dict:
    """This worker's name and its peak resident memory so far (bytes, ru_maxrss)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"worker": worker_identity()[0], "rss": rss}


def _expand(run: ShardedRun, step: Step, i: int) -> dict:
    """`sharded.expand_part` of shard i, on a worker."""
    made = sharded.expand_part(run, step.target, step.side, step.d, i)
    return {"made": made, **_worker()}


def _merge(run: ShardedRun, step: Step, j: int, other: int) -> dict:
    """`sharded.merge_part` of shard j of the layer after `step`'s, on a worker."""
    merged = sharded.merge_part(run, step.target, step.side, step.d + 1, j, other)
    return {**merged, **_worker()}


def _layer(client, run: ShardedRun, step: Step, peaks: dict) -> dict:
    """One layer: every shard expanded, then every shard merged; returns its manifest
    and raises the first error of a part."""
    shards = range(run.shards)
    rows = on_every_part(client, _expand, [(run, step, i) for i in shards])
    other = len(sharded.manifests(run, step.target, "b" if step.side == "f" else "f"))
    merged = on_every_part(client, _merge, [(run, step, j, other) for j in shards])
    for row in rows + merged:
        peaks[row["worker"]] = max(peaks.get(row["worker"], 0), row["rss"])
    return {**sharded.record(run, step, merged), "made": sum(row["made"] for row in rows)}


@task(name="attempt", cache_policy=NO_CACHE)
def attempt(run: ShardedRun, client, step: Step, peaks: dict, on_layer) -> dict:
    """Expand layers, their parts on the Dask `client`'s workers, while the search stays
    at `step.target`; returns {"step": the next step (another target's or the end),
    "layers": layers made}."""
    made, target = 0, step.target
    while step.kind == "expand" and step.target == target:
        manifest = _layer(client, run, step, peaks)
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
) -> dict:
    """Run (or resume) the sharded search `run` with its parts on the Dask scheduler at
    `scheduler`; `verify(path)` replays a solution's rules and returns its moves
    (raising on an invalid one); `on_layer(step, manifest)` is called after each
    recorded layer. Returns {"status": optimal | infeasible, "objective", "solution"
    (the rules), "layers": layers made by this run, "peak_rss": {worker: bytes},
    "seconds"}. Raises RuntimeError when the replayed moves differ from the search."""
    started, made, peaks = time.perf_counter(), 0, {}
    step = sharded.plan(run)
    with connect(scheduler) as client:  # one client: opening one took about 0.3 s
        while step.kind == "expand":
            name = f"target-{step.target}"
            done = attempt.with_options(task_run_name=name)(run, client, step, peaks, on_layer)
            step, made = done["step"], made + done["layers"]
    report = {"layers": made, "peak_rss": peaks, "seconds": time.perf_counter() - started}
    if step.kind == "infeasible":
        return {**report, "status": "infeasible", "objective": None, "solution": None}
    path = sharded.path_of(run, step)
    if (moves := verify(path)) != step.target:
        raise RuntimeError(f"the replayed path has {moves} moves, the search {step.target}")
    return {**report, "status": "optimal", "objective": moves, "solution": path}
