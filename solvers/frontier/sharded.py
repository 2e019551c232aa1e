"""The `min_moves` search of `moves` with every layer sharded by a hash of the key and
kept on disk, so that its parts run as separate tasks on separate workers and a killed
search resumes from its last finished layer.

The search is that of `moves.min_moves` (targets L = the roots' Merson-region bound,
L + 1, ...; per target first the beams of `beam.beams` in one part, `beam.beam_part`:
a solution they find is the answer, a complete beam fails the target; then a
breadth-first search by moves from both ends, pruned by the regions against L; radii
a + b = L without a common position prove "no solution of L moves"; the first common
position is a solution of exactly L), with no incumbent dive.
The side to grow is the one whose next layer costs less on a sample; a side where one
position's children alone overflow the sample's buffer (the goals of T_9: a lone token
walking back over a nearly empty board) is never grown, so the search goes on forward
only, pruned by the regions against L, and a target fails when the forward radius
reaches it. A key belongs to shard `owner(key)` (a multiplicative hash, D. E. Knuth, TAOCP vol. 3,
6.4) on both sides, so a child is looked up in the other side only in its own shard.

One layer is made in two rounds of parts: `expand_part(i)` expands shard i of the last
layer and writes each chunk's children, split by owner, as buckets `in/i-j-c.npy` (the
spill: an expansion holds one chunk); then `merge_part(j)` reads the buckets sent to j,
keeps the keys new to its side (shard j of the earlier layers), writes the layer's shard
`sj.npy` and looks its keys up in shard j of every layer of the other side. `record`
then writes the layer's manifest `t{L}/{side}{d}.json`; `plan` reads the manifests
alone, so a layer without one is redone from its start. Layout under the run's folder:
`run.json` (the problem's fingerprint and shard count: a resume must match it), and per
target L `t{L}/beam.json` (what its beams found), `t{L}/f{d}/` and `t{L}/b{d}/`
(forward, backward layer d), `t{L}.json` once L
failed.
"""

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .beam import recorded
from .kernels import board_keys, difference, distinct, expand, member
from .layers import CHUNK, sample_cost, walk
from .problem import (
    MEMORY,
    LayeredProblem,
    bound_of,
    goals_in_class,
    key_tables,
    move_tables,
    prune_table,
    reachable_goals,
)
from .run_folder import check_folder, save, write_json

#: Positions sampled to estimate the cost of expanding a layer (see `moves._Side.cost`).
SAMPLE = 512
#: Positions expanded between two looks at the clock (`expand_part`, `merge_part`).
BOARDS = 1 << 12
_HASH = np.uint64(0x9E3779B97F4A7C15)


def owner(keys: np.ndarray, shards: int) -> np.ndarray:
    """The shard (int64 array, shape of `keys`) of each uint64 key: the top 32 bits of
    key * 2^64 / phi, modulo `shards` (spreads the sorted keys of a layer evenly)."""
    with np.errstate(over="ignore"):
        return ((keys * _HASH) >> np.uint64(32)).astype(np.int64) % shards


@dataclass(frozen=True)
class ShardedRun:
    """A sharded `min_moves` search: `problem` (a LayeredProblem, question min_moves;
    kept with only the goals in a start's position class, `goals_in_class`, and
    infeasible at once when there is none),
    `folder` (the run's directory, created if missing), `shards` (>= 1; fixed for the
    life of the folder) and `memory` (bytes one part may hold: checked before it loads
    its arrays; a resumed run may raise it), `beam` (each target's beams first, in one
    part; False: the layers alone). Raises ValueError for another question or
    shards < 1."""

    problem: LayeredProblem
    folder: str
    shards: int = 2
    memory: int = MEMORY
    beam: bool = True

    def __post_init__(self) -> None:
        if self.problem.question != "min_moves":
            raise ValueError(f"a sharded search answers min_moves, not {self.problem.question}")
        if self.shards < 1:
            raise ValueError(f"shards must be at least 1, not {self.shards}")
        # only the goals a start can reach (frozen: set once, here)
        object.__setattr__(self, "problem", reachable_goals(self.problem))

    def layer(self, target: int, side: str, d: int) -> Path:
        """The directory of layer d of `side` ('f' or 'b') for `target`."""
        return Path(self.folder) / f"t{target}" / f"{side}{d}"


@dataclass(frozen=True)
class Step:
    """What the search does next: run the beams of `target` (kind 'beam', `beam_part`),
    expand layer `d` of `side` for `target` (kind 'expand'), or it is over: kind 'met'
    (a common `key` at forward distance `a`, backward `b`, a + b = target), 'found' (a
    beam's solution of `target` moves, in `t{target}/beam.json`) or 'infeasible' (no
    goal is reachable)."""

    kind: str
    target: int
    side: str = ""
    d: int = 0
    key: int = 0
    a: int = 0
    b: int = 0

    @property
    def going(self) -> bool:
        """Whether there is work left ('beam' or 'expand'), not an end."""
        return self.kind in ("beam", "expand")


def _within(run: ShardedRun, files: list[Path], extra: int, what: str) -> None:
    """Raises MemoryError, before the work, when a part that loads `files` and holds
    `extra` bytes besides would need more than `run.memory` (a sort doubles the arrays)."""
    need = 2 * sum(f.stat().st_size for f in files) + extra
    if need > run.memory:
        raise MemoryError(f"{what} needs {need / 2**30:.2f} GiB, over {run.memory / 2**30:.2f} GiB")


def _side_tables(run: ShardedRun, side: str):
    reverse = side == "b"
    return move_tables(run.problem, reverse), prune_table(run.problem, 2 if reverse else 1)


def seed(run: ShardedRun, target: int) -> None:
    """Layer 0 of both sides for `target`: the roots whose region bound is at most
    `target`, as keys, sharded, with their manifests."""
    maps = key_tables(run.problem)
    for side, roots in (("f", run.problem.starts), ("b", run.problem.goals)):
        _, prune = _side_tables(run, side)
        kept = [r for r in roots if bound_of(r, prune) <= target]
        keys = distinct(board_keys(np.array(kept, np.uint64), maps))
        where = owner(keys, run.shards)
        for j in range(run.shards):
            save(run.layer(target, side, 0) / f"s{j}.npy", keys[where == j])
        write_json(run.layer(target, side, 0).with_suffix(".json"), {"keys": len(keys)})


def expand_part(
    run: ShardedRun, target: int, side: str, d: int, i: int, deadline: float = math.inf
) -> int | None:
    """Expand shard i of layer d of `side` (pruned against `target`) and write its
    children by owner as buckets of layer d + 1, one file per chunk and owner. Returns
    the children written, or None when the wall-clock time `deadline` (`time.time()`)
    passed first (checked every `BOARDS` positions: within about a second; the buckets
    written so far are rewritten by the next run). Re-running it rewrites the same
    buckets."""
    tables, prune = _side_tables(run, side)
    maps = key_tables(run.problem)
    shard = run.layer(target, side, d) / f"s{i}.npy"
    _within(run, [shard], 2 * CHUNK * 8, f"expanding {shard}")
    frontier = np.load(shard)
    inbox = run.layer(target, side, d + 1) / "in"
    buffer = np.empty(CHUNK, np.uint64)
    ptr, order, fot, cond, nxt = tables
    room = target - (d + 1)
    at, made, chunk, written = 0, 0, 0, 0
    while at < len(frontier):
        if time.time() > deadline:
            return None
        more, following, _ = expand(
            frontier[: at + BOARDS], at, ptr, order, fot, cond, nxt, maps, True,
            buffer[written:], prune, room,
        )  # fmt: skip
        stuck = following == at and not more  # the next board's children do not fit
        at, written = following, written + more
        if stuck and not written:  # nor in an empty buffer
            buffer = np.empty(2 * len(buffer), np.uint64)
            continue
        if stuck or written >= len(buffer) // 2 or at == len(frontier):
            made += written
            part = distinct(buffer[:written])
            where = owner(part, run.shards)
            for j in range(run.shards):
                save(inbox / f"{i}-{j}-{chunk}.npy", part[where == j])
            chunk, written = chunk + 1, 0
    return made


def _levels(run: ShardedRun, target: int, side: str, j: int, upto: int):
    """Shard j of layers 0..upto - 1 of `side` (memory-mapped)."""
    for d in range(upto):
        yield d, np.load(run.layer(target, side, d) / f"s{j}.npy", mmap_mode="r")


def merge_part(
    run: ShardedRun, target: int, side: str, d: int, j: int, other: int,
    deadline: float = math.inf,
) -> dict | None:  # fmt: skip
    """Shard j of layer d of `side`: the keys sent to j, less those in shard j of the
    side's layers 0..d - 1, written as `sj.npy`; then looked up in shard j of layers
    0..other - 1 of the other side. Returns {"keys": n, "met": None or [key, distance in
    the other side]}, or None when the wall-clock time `deadline` (`time.time()`) passed
    between two of its steps (the layer's manifest is then never written: a re-run
    redoes the layer)."""
    folder = run.layer(target, side, d)
    files = sorted((folder / "in").glob(f"*-{j}-*.npy"))
    _within(run, files, 0, f"merging shard {j} of {folder}")
    parts = []
    for f in files:
        if time.time() > deadline:
            return None
        parts.append(np.load(f))
    layer = distinct(np.concatenate(parts)) if parts else np.empty(0, np.uint64)
    del parts
    for _, level in _levels(run, target, side, j, d):
        if time.time() > deadline:
            return None
        layer = difference(layer, np.asarray(level))
    save(folder / f"s{j}.npy", layer)
    met = None
    for e, level in _levels(run, target, "f" if side == "b" else "b", j, other):
        if time.time() > deadline:
            return None
        hit = np.flatnonzero(member(layer, np.asarray(level)))
        if len(hit):
            met = [int(layer[hit[0]]), e]
            break
    return {"keys": len(layer), "met": met}


def manifests(run: ShardedRun, target: int, side: str) -> list[dict]:
    """The manifests of the finished layers 0, 1, ... of `side` for `target`."""
    found = []
    while (path := run.layer(target, side, len(found)).with_suffix(".json")).exists():
        found.append(json.loads(path.read_text()))
    return found


def _cost(run: ShardedRun, target: int, side: str, d: int, size: int) -> float:
    """The children expanding layer d of `side` should make, from a sample of at most
    `SAMPLE` of its keys over every shard (as `moves._Side.cost`)."""
    if size == 0:
        return 0.0
    per = max(1, SAMPLE // run.shards)
    sample = []
    for j in range(run.shards):
        shard = np.load(run.layer(target, side, d) / f"s{j}.npy", mmap_mode="r")
        sample.append(np.array(shard[:: max(1, len(shard) // per)][:per]))
    keys = np.concatenate(sample)
    tables, _ = _side_tables(run, side)
    return sample_cost(keys, size, tables, key_tables(run.problem))


def plan(run: ShardedRun) -> Step:
    """The next step of the search, from the manifests on disk alone (what a resumed
    search does first): the first target not failed, its roots seeded if need be, then
    the common position if a finished layer met the other side, the failure of the
    target if the radii reach it or a side ran empty, else the expansion of the side
    whose next layer costs less. Raises ValueError as `check_folder`."""
    check_folder(run)
    forward = prune_table(run.problem, 1)
    target = max(1, min(bound_of(s, forward) for s in run.problem.starts))
    reachable = goals_in_class(run.problem)
    while True:  # no goal in a start's class, or more moves than rules can fire: none
        if not reachable or target > run.problem.size:
            return Step("infeasible", target)
        failed = Path(run.folder) / f"t{target}.json"
        if failed.exists():
            target += 1
            continue
        beamed = recorded(run, target)
        if run.beam and beamed is None:
            return Step("beam", target)
        if beamed is not None and beamed["solution"] is not None:
            return Step("found", target)
        if not run.layer(target, "b", 0).with_suffix(".json").exists():
            seed(run, target)
        sides = {side: manifests(run, target, side) for side in "fb"}
        for side, found in sides.items():
            for d, manifest in enumerate(found):
                if manifest.get("met"):
                    key, e = manifest["met"]
                    a, b = (d, e) if side == "f" else (e, d)
                    return Step("met", target, key=key, a=a, b=b)
        f, b = sides["f"], sides["b"]
        if len(f) + len(b) - 2 >= target or not f[-1]["keys"] or not b[-1]["keys"]:
            write_json(failed, {"solution": False, "forward": f, "backward": b})
            target += 1
            continue
        costs = {s: _cost(run, target, s, len(m) - 1, m[-1]["keys"]) for s, m in sides.items()}
        side = "f" if costs["f"] <= costs["b"] else "b"
        return Step("expand", target, side, len(sides[side]) - 1)


def record(run: ShardedRun, step: Step, merged: list[dict]) -> dict:
    """Write the manifest of the layer `step` made (after every `merge_part` of it
    returned `merged`) and drop its buckets; returns the manifest: {"keys": total,
    "met": the first common [key, distance] or None, "shards": keys per shard}."""
    met = next((m["met"] for m in merged if m["met"]), None)
    manifest = {"keys": sum(m["keys"] for m in merged), "met": met}
    manifest["shards"] = [m["keys"] for m in merged]
    folder = run.layer(step.target, step.side, step.d + 1)
    write_json(folder.with_suffix(".json"), manifest)
    for bucket in (folder / "in").glob("*.npy"):
        bucket.unlink()
    return manifest


def _holds(run: ShardedRun, target: int, side: str):
    """(distance, key) -> whether that layer of `side` holds the key (one shard read)."""

    def holds(d: int, key: int) -> bool:
        where = int(owner(np.array([key], np.uint64), run.shards)[0])
        shard = np.load(run.layer(target, side, d) / f"s{where}.npy", mmap_mode="r")
        return bool(member(np.array([key], np.uint64), np.asarray(shard))[0])

    return holds


def path_of(run: ShardedRun, step: Step) -> list[tuple[int, int, int]]:
    """The rules (a, b, c) of a solution: a 'found' step's from its beam.json; a 'met'
    step's through the common position, walked back by reverse moves to a start through
    the forward layers, then on by moves to a goal through the backward layers
    (`layers.walk`). Raises RuntimeError when the layers are inconsistent."""
    if step.kind == "found":
        return [tuple(rule) for rule in recorded(run, step.target)["solution"]]
    problem, maps = run.problem, key_tables(run.problem)
    first = walk(
        step.key, step.a, _holds(run, step.target, "f"), move_tables(problem, True), maps, True
    )
    second = walk(
        step.key, step.b, _holds(run, step.target, "b"), move_tables(problem, False), maps, False
    )
    return problem.triples(first + second)
