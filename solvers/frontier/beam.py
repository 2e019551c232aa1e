"""A beam search by moves for a solution of a given number of moves: the heuristic that
meets the solutions the exhaustive search of `moves` would reach only after hours.

From the starts, one move at a time, every child whose moves made plus its forward
bound (`problem.prune_table`: Merson regions and token classes, admissible) stay within
the target is made, and only the `width` best are kept for the next move, ranked by
that bound and then by the fewest tokens (`kernels.ranks`): the positions nearest a
finish by the bound, and among those the ones whose moves removed the most. A goal among
the children is a solution of exactly that many moves (each parent found in the kept
level before, the moves replayed forward). A beam that never cut a move's children was
the exhaustive forward search and proves the target fails; one that cut and met no goal
proves nothing. With `moves.min_moves` proving every smaller target first, a solution
of the target is optimal. On T_9 over all starts the beam of 2^18 meets a 16-move
solution in 20 s where the exhaustive forward layers of target 16 grow past 552 M keys;
the beams of a target without a solution cost about a minute (T_9 target 15: 56 s;
benchmarks/README.md).
"""

import json
import logging
import math
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import Limits
from .kernels import NO_PRUNE, board_keys, distinct, expand, member, ranks
from .layers import CHUNK, Budget, Stop, chains, fill
from .problem import LayeredProblem, key_of, key_tables, move_tables, prune_table
from .run_folder import write_json

#: The widths tried in turn (positions kept per move, 8 bytes each): each costs about
#: four times the one before, so the narrow ones cost a third of the widest.
WIDTHS = (1 << 14, 1 << 16, 1 << 18, 1 << 20)

log = logging.getLogger("puzzlesweep.solvers.frontier")


class Beamed(NamedTuple):
    """What beams found: `path` (the rule indices of a solution, or None), `complete`
    (no move's children were cut to the width: None then proves that no solution has
    the target's moves or fewer, the bound being admissible), `width` (the last beam's)
    and `stored` (positions the beams kept, over every move)."""

    path: list[int] | None
    complete: bool
    width: int
    stored: int


def beams(problem: LayeredProblem, budget: Budget, target: int) -> Beamed:
    """`beam` at `target` with each of `WIDTHS` in turn, until one finds a solution or
    is complete; `stored` counts every beam's. Raises `layers.Stop` at a limit."""
    found, stored = Beamed(None, False, 0, 0), 0
    for width in WIDTHS:
        tick = time.perf_counter()
        found = beam(problem, budget, target, width)
        stored += found.stored
        outcome = ("none" if found.path is None else "a solution") + ", complete" * found.complete
        seconds = time.perf_counter() - tick
        log.info("target %d: beam of %d: %s in %.1f s", target, width, outcome, seconds)
        if found.path is not None or found.complete:
            break
    return found._replace(stored=stored)


def beam(problem: LayeredProblem, budget: Budget, target: int, width: int) -> Beamed:
    """The beam of `width` positions for a path of at most `target` moves from a start
    to a goal of `problem`. Counts positions expanded in `budget.nodes`; raises
    `layers.Stop` at a limit (checked between chunks of `layers.CHUNK` children; the
    bytes held count against the memory)."""
    maps = key_tables(problem)
    tables = move_tables(problem, False)
    prune = prune_table(problem, 1)
    goals = distinct(board_keys(np.array(problem.goals, np.uint64), maps))
    levels = [distinct(board_keys(np.array(problem.starts, np.uint64), maps))]
    buffer = np.empty(CHUNK, np.uint64)
    complete = True
    while len(levels) <= target and len(levels[-1]):
        held = buffer.nbytes + sum(level.nbytes for level in levels)
        room = target - len(levels)  # the moves left after this one
        kept, at = np.empty(0, np.uint64), 0
        while at < len(levels[-1]):
            budget.check(held + 3 * kept.nbytes)
            boards = levels[-1]
            if budget.limits.node_limit is not None:  # stop at the node limit exactly
                boards = boards[: at + budget.limits.node_limit - budget.nodes]
            buffer, written, at = fill(budget, boards, at, buffer, tables, maps, prune, room)
            part = distinct(buffer[:written])
            if len(hit := part[member(part, goals)]):
                path = _path([*levels, hit[:1]], tables, maps)
                return Beamed(path, complete, width, sum(map(len, levels)))
            kept = distinct(np.concatenate([kept, part]))
            complete &= len(kept) <= width
            kept = _best(kept, prune, width)
        levels.append(kept)
    return Beamed(None, complete, width, sum(map(len, levels)))


def _path(levels: list[np.ndarray], tables, maps: np.ndarray) -> list[int]:
    """The rule indices of a path through one key of each of `levels` (sorted keys, each
    level's children kept by the beam), ending at levels[-1][0]: parents found by
    expanding the level before (compiled), then the moves replayed forward from the
    root (`layers.chains`: a few dozen moves per position). Walking back by reverse
    moves instead enumerates a lone peg's reverse chains, millions on T_9."""
    keys = [int(levels[-1][0])]
    for level in reversed(levels[:-1]):
        keys.append(_parent(level, keys[-1], tables, maps))
    board, rules = keys.pop(), []
    for key in reversed(keys):
        board, move = next((c, r) for c, r in chains(board, tables) if key_of(c, maps) == key)
        rules += move
    return rules


def _parent(boards: np.ndarray, key: int, tables, maps: np.ndarray) -> int:
    """A board of `boards` with a child whose key is `key`. Raises RuntimeError when
    there is none (the levels are inconsistent)."""
    ptr, order, fot, cond, nxt = tables
    buffer, at, target = np.empty(CHUNK, np.uint64), 0, np.uint64(key)
    while at < len(boards):
        written, following, _ = expand(
            boards, at, ptr, order, fot, cond, nxt, maps, True, buffer, NO_PRUNE, 0
        )
        if following == at:  # one board's children overflow the buffer
            buffer = np.empty(2 * len(buffer), np.uint64)
            continue
        if (buffer[:written] == target).any():  # one of these: one at a time
            for i in range(at, following):
                one, _, _ = expand(
                    boards[i : i + 1], 0, ptr, order, fot, cond, nxt, maps, True, buffer,
                    NO_PRUNE, 0,
                )  # fmt: skip
                if (buffer[:one] == target).any():
                    return int(boards[i])
        at = following
    raise RuntimeError(f"no parent of key {key} in the level before")


def _best(keys: np.ndarray, prune: np.ndarray, width: int) -> np.ndarray:
    """The `width` least-ranked of sorted distinct `keys` (`kernels.ranks`), sorted."""
    if len(keys) <= width:
        return keys
    return np.sort(keys[np.argpartition(ranks(keys, prune), width)[:width]])


def beam_part(run, target: int, deadline: float = math.inf) -> dict | None:
    """The beams of `target` of the sharded search `run` (a `sharded.ShardedRun`) in one
    process, until the wall-clock `deadline` (`time.time()`; None comes back there,
    nothing written): writes `t{target}/beam.json` ({"solution": the rules or None,
    "complete", "width", "nodes"}) and, for a complete beam without a solution,
    `t{target}.json` (the target failed; `sharded.plan` goes on to the next). Returns
    what it wrote; raises MemoryError when the beam would hold more than `run.memory`."""
    seconds = min(max(1e-3, deadline - time.time()), 1e9)  # Limits wants a finite time
    budget = Budget(Limits(seconds), run.memory)
    try:
        found = beams(run.problem, budget, target)
    except Stop as stop:
        if stop.status == "time_limit":
            return None
        raise MemoryError(stop.message) from None
    rules = None if found.path is None else [list(t) for t in run.problem.triples(found.path)]
    written = {"solution": rules, "complete": found.complete, "width": found.width}
    written |= {"stored": found.stored, "nodes": budget.nodes}
    folder = Path(run.folder) / f"t{target}"
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "beam.json", written)
    if found.path is None and found.complete:
        write_json(Path(run.folder) / f"t{target}.json", {"solution": False, "beam": written})
    return written


def recorded(run, target: int) -> dict | None:
    """What `beam_part` wrote for `target` of `run` (`t{target}/beam.json`), or None."""
    path = Path(run.folder) / f"t{target}" / "beam.json"
    return json.loads(path.read_text()) if path.exists() else None
