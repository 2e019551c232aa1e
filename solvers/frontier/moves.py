"""The `min_moves` question: fewest moves from a start to a goal, by a breadth-first
search by moves from both ends that meets in the middle, pruned by Merson regions
(`problem.prune_table`: corners, edge pairs and stars, an admissible and consistent
bound on the moves still needed, or made so far on the backward side) and, forward, by
the token classes (`kernels.classes_bound`: the fewest moves of a relaxed game in which
a token keeps its class and jumps only the cells its class may jump; strong in the last
layers of a target, where it prunes nearly every position of the forward search when
the backward side is never grown, as on T_9).

Each target is first given to the beams of `beam.beams`: a beam that finds a solution
of the target answers it (every smaller target failed), one that never cut a move's
children proves the target fails; otherwise the search below decides it.

Forward from the starts by moves; backward from the goals by *reverse moves* (rules
undone in a row by one token), so that a position at backward distance d reaches a goal
in d moves. Each step expands the side whose next layer costs less (measured on a
sample), keeps the children new to that side and looks them up in every layer of the
other side. Radii a and b without a common position prove that no solution has a + b
moves or fewer; the first common position found gives a solution of exactly the bound.
A depth-first dive first gives an incumbent (what a time limit reports). The backward
side starts only from the goals in a start's position class (the others never meet
it). Before the last layers of a target are built, a part of the layer before is
searched down to the end chunk by chunk (`_ahead`), holding no layer: where solutions
are many, one is met there without the largest layers ever being built.
"""

import logging
import time
from dataclasses import replace

import numpy as np

from .. import Limits, SolverResult
from .beam import beams
from .depth_first import DIVE_MEMORY, solvable
from .kernels import board_keys, difference, distinct, member, union
from .layers import CHUNK, Budget, Stop, fill, meet, sample_cost, walk
from .problem import (
    LayeredProblem,
    bound_of,
    key_tables,
    move_tables,
    prune_table,
    reachable_goals,
)

#: The part of the last kept layer of a target whose grandchildren are looked up at
#: once (`_ahead`) before the next layer is built: a solution is usually met there; a
#: target without one loses this share of a layer's work.
AHEAD_SHARE = 0.05
#: The most layers `_ahead` looks down at once (on AHEAD_SHARE of the layer, divided by
#: the branching factor for each level past two, so each try costs about as much).
AHEAD_DEPTH = 3
#: Positions expanded to estimate the cost of expanding a layer.
SAMPLE = 512
#: `min_moves` first dives depth-first for an incumbent with this share of the time
#: (and `depth_first.DIVE_MEMORY` bytes for its dead table).
DIVE_SHARE = 0.1

log = logging.getLogger("puzzlesweep.solvers.frontier")


class _Side:
    """One end of the search: its layers (sorted keys by distance), its move generator
    and its pruning; roots whose bound exceeds `target` are left out."""

    def __init__(self, problem: LayeredProblem, reverse: bool, target: int):
        roots = problem.goals if reverse else problem.starts
        self.prune = prune_table(problem, 2 if reverse else 1)
        self.target = target
        roots = [r for r in roots if bound_of(r, self.prune) <= target]
        self.maps = key_tables(problem)
        self.tables = move_tables(problem, reverse)
        self.levels = [distinct(board_keys(np.array(roots, np.uint64), self.maps))]

    def cost(self) -> float:
        """The children the next expansion should make (`layers.sample_cost`), measured
        on a sample of at most `SAMPLE` positions of the last layer."""
        frontier = self.levels[-1]
        if len(frontier) <= SAMPLE:
            sample = frontier
        else:
            sample = frontier[:: len(frontier) // SAMPLE][:SAMPLE]
        return sample_cost(sample, len(frontier), self.tables, self.maps)

    def fill(self, budget: Budget, boards, at: int, buffer, room: int):
        """`layers.fill` with this side's moves, keys and pruning against `room`, never
        past the node limit (every caller expands through here: a layer, a look ahead)."""
        budget.check()  # a spent node limit stops here, before an empty slice
        if budget.limits.node_limit is not None:  # stop at the node limit exactly
            boards = boards[: at + budget.limits.node_limit - budget.nodes]
        return fill(budget, boards, at, buffer, self.tables, self.maps, self.prune, room)

    def kept(self) -> int:
        """Bytes held by this side's layers."""
        return sum(level.nbytes for level in self.levels)


def _grow(
    side: _Side, other: _Side, budget: Budget, kept: int, final: bool = False
) -> tuple[np.ndarray, int | None]:
    """The next layer of `side` (children new to it), or, at the first child found in
    a layer of `other`, (that child's key as a one-element array, its distance there).
    `final`: the layer is only looked up, not kept (an empty array comes back)."""
    frontier = side.levels[-1]
    buffer = np.empty(CHUNK, np.uint64)
    runs: list[np.ndarray] = []  # sorted distinct children, sizes decreasing (merged
    made = 0  # like a binary counter: each key is merged about log2(chunks) times)
    at = 0
    clock = {"expand": 0.0, "sort": 0.0, "meet": 0.0}
    while at < len(frontier):
        budget.check(kept + buffer.nbytes + 2 * sum(x.nbytes for x in runs))
        tick = time.perf_counter()
        room = side.target - len(side.levels)  # the moves left after this one
        buffer, written, at = side.fill(budget, frontier, at, buffer, room)
        made += written
        tock = time.perf_counter()
        part = distinct(buffer[:written])
        tick, clock["expand"] = time.perf_counter(), clock["expand"] + tock - tick
        clock["sort"] += tick - tock
        if (found := meet(part, other.levels)) is not None:
            return found
        clock["meet"] += time.perf_counter() - tick
        if final:
            continue
        runs.append(part)
        while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]):
            budget.check(kept + buffer.nbytes + 2 * sum(x.nbytes for x in runs))
            last = runs.pop()
            runs[-1] = union(runs[-1], last)
            del last
    budget.check(kept + 2 * sum(x.nbytes for x in runs))
    del buffer
    tick = time.perf_counter()
    layer = np.empty(0, np.uint64)
    while runs:
        layer = union(layer, runs.pop())
    for level in side.levels:
        layer = difference(layer, level)
    clock["last merge"] = time.perf_counter() - tick
    times = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in clock.items())
    log.info("  %d children of %d positions: %s", made, len(frontier), times)
    return layer, None


def _ahead(
    side: _Side, other: _Side, budget: Budget, share: float = 1.0, depth: int = 2
) -> tuple[np.ndarray, int, list[np.ndarray]] | None:
    """The last `depth` layers of a target at once, none kept: the children of each
    chunk of `side`'s last layer, depth first their children chunk by chunk, and the
    deepest looked up in `other` (memory: one buffer per level, not a layer). Returns
    (the common key, its distance in `other`, the chunks it came through from the
    layer's children on: the layers the walk back passes through), or None when no
    position is common. A chunk's children may repeat across chunks or lie in earlier
    layers: a superset, so nothing is missed. `share`: the part of the last layer to try
    (None then proves nothing unless it is 1); the first chunks usually meet when
    solutions are many."""
    frontier = side.levels[-1]
    frontier = frontier[: max(1, int(len(frontier) * share))]
    room = side.target - len(side.levels)
    return _dive(side, other, budget, frontier, depth, room, 0)


def _dive(side, other, budget: Budget, boards, depth: int, room: int, held: int):
    """`_ahead` below one chunk: the children of `boards` (pruned against `room` moves
    left), `depth` levels deep; `held`: bytes the levels above hold."""
    buffer = np.empty(CHUNK, np.uint64)
    at = 0
    while at < len(boards):
        budget.check(held + buffer.nbytes)
        buffer, written, at = side.fill(budget, boards, at, buffer, room)
        part = distinct(buffer[:written])
        if depth == 1:
            if (found := meet(part, other.levels)) is not None:
                return (*found, [])
            continue
        below = held + buffer.nbytes + part.nbytes
        found = _dive(side, other, budget, part, depth - 1, room - 1, below)
        if found is not None:
            key, d, chunks = found
            return key, d, [part, *chunks]
    return None


def _try_ahead(side: _Side, other: _Side, budget: Budget, cost: float, left: int):
    """`_ahead` down the last `left` layers on `AHEAD_SHARE` of the last layer divided by
    the branching (`cost` per position) for each level past two, logged."""
    tick = time.perf_counter()
    branching = max(1.0, cost / max(1, len(side.levels[-1])))
    found = _ahead(side, other, budget, AHEAD_SHARE / branching ** (left - 2), left)
    outcome = "none met" if found is None else "met"
    log.info("  %d layers ahead: %s in %.1f s", left, outcome, time.perf_counter() - tick)
    return found


def _incumbent(problem: LayeredProblem, budget: Budget, result: SolverResult) -> bool:
    """A first solution from the depth-first search (`solvable`) from the first start,
    within `DIVE_SHARE` of the time left and `DIVE_MEMORY` bytes: its move count is the
    incumbent a limit reports. Returns False when the search proved that no goal is
    reachable (then the result is final)."""
    dive = SolverResult(status="error")
    nodes = budget.limits.node_limit
    share = Limits(
        max(1e-3, DIVE_SHARE * (budget.deadline - time.perf_counter())),
        None if nodes is None else max(1, nodes - budget.nodes),
    )
    one = replace(problem, starts=problem.starts[:1], question="solve", memory=DIVE_MEMORY)
    if len(problem.starts) > 1:  # the group may not fix the first start alone; so
        one = replace(one, group=problem.group[:1], tables={})  # its own key tables
    inner = Budget(share, DIVE_MEMORY)
    try:
        solvable(one, inner, dive)
    except Stop:
        pass
    budget.nodes += inner.nodes
    budget.check()  # the node limit may be spent
    if dive.status == "infeasible" and len(problem.starts) == 1:
        result.status, result.bound = "infeasible", None
        result.extra["proof"] = "depth-first"
        return False
    if dive.status == "optimal":
        result.solution = dive.solution
        result.objective = float(count_moves(dive.solution))
        log.info("incumbent: %d moves", result.objective)
    return True


def min_moves(problem: LayeredProblem, budget: Budget, result: SolverResult) -> None:
    """Targets L = the roots' region bound, L + 1, ...: is there a solution of L moves
    or fewer? Each attempt is a search from both ends in which a forward position at
    distance a is kept only if a plus its full regions is at most L, and a backward one
    at distance b only if b plus its regions that are not full is at most L (both
    bounds are admissible: every solution of L moves or fewer keeps all its positions
    at move boundaries); an attempt ends when a + b reaches L (no such solution: the
    bound becomes L + 1) or at the first common position (a solution of exactly L, as
    L - 1 failed). Before each attempt the beams (`_beam`) may settle the target alone.
    Positions are re-searched per target: the pruning is what pays."""
    result.bound = 0.0
    if not _incumbent(problem, budget, result):
        return
    problem = reachable_goals(problem)
    forward = prune_table(problem, 1)
    target = max(1, min(bound_of(s, forward) for s in problem.starts))
    if set(problem.starts) & set(problem.goals):
        target = 0
    result.bound = float(target)
    attempts = result.extra.setdefault("attempts", {})
    try:
        while True:
            if result.objective is not None and target >= result.objective:
                result.status, result.bound = "optimal", result.objective  # the incumbent
                return
            if target > problem.size:  # more moves than rules can fire: none at all
                result.status, result.bound = "infeasible", None
                result.solution = result.objective = None
                return
            made, kept, tick = budget.made, budget.kept, time.perf_counter()
            try:
                settled = _beam(problem, budget, result, target, attempts)  # None: not settled
                if settled is None:
                    settled = _attempt(problem, budget, result, target, attempts)
                if settled:
                    return
            finally:  # what this target cost, also when a limit stopped it
                attempts.setdefault(target, {}).update(
                    made=budget.made - made,
                    kept=budget.kept - kept,
                    seconds=time.perf_counter() - tick,
                )
            target += 1
            result.bound = float(target)
    finally:
        result.extra["peak_bytes"] = budget.peak


def _beam(problem: LayeredProblem, budget: Budget, result: SolverResult, target: int, attempts):
    """The beams of `beam.beams` at `target`: True (and the result filled) when one
    finds a solution of `target` moves (optimal: every smaller target failed before),
    False when one was complete and found none (no solution of `target` moves), None
    when none settled the target. attempts[target]["beam"]: the positions they kept."""
    found = beams(problem, budget, target)
    attempts.setdefault(target, {})["beam"] = found.stored
    if found.path is None:
        return False if found.complete else None
    result.solution = problem.triples(found.path)
    if (count := count_moves(result.solution)) != target:  # smaller ones failed: a bug
        raise RuntimeError(f"the beam's path has {count} moves, not {target}")
    result.status, result.objective = "optimal", float(target)
    result.bound = result.objective
    return True


def _attempt(problem, budget: Budget, result: SolverResult, target: int, attempts) -> bool:
    """One target of `min_moves`; True (and the result filled) when a solution of
    `target` moves is found."""
    forward = _Side(problem, False, target)
    backward = _Side(problem, True, target)
    sizes = attempts.setdefault(target, {})
    sizes.update(forward=[len(forward.levels[0])], backward=[len(backward.levels[0])])
    common = forward.levels[0][member(forward.levels[0], backward.levels[0])]
    met, a, b = (common[:1], 0, 0) if len(common) else (None, 0, 0)
    while met is None:
        reached = len(forward.levels) + len(backward.levels) - 2
        if reached >= target or not len(forward.levels[-1]) or not len(backward.levels[-1]):
            log.info(
                "no solution of %d moves (%.1f s)", target, time.perf_counter() - budget.started
            )
            return False
        costs = forward.cost(), backward.cost()
        grow_forward = costs[0] <= costs[1]
        side, other = (forward, backward) if grow_forward else (backward, forward)
        found, left = None, target - reached
        if 2 <= left <= AHEAD_DEPTH:  # the last layers at once, on a part of this one
            found = _try_ahead(side, other, budget, min(costs), left)
        if found is not None:
            met, d, middle = found
            side.levels.extend(middle)  # only for the walk back
            a, b = (len(side.levels), d) if grow_forward else (d, len(side.levels))
            break
        final = reached + 1 >= target  # the last layer of this target: only looked up
        layer, d = _grow(side, other, budget, forward.kept() + backward.kept(), final)
        if d is not None:
            met = layer
            a, b = (len(side.levels), d) if grow_forward else (d, len(side.levels))
            break
        side.levels.append(layer)
        sizes["forward" if grow_forward else "backward"].append(len(layer))
        log.info(
            "target %d: %s layer %d: %d keys; %.1f s",
            target,
            "forward" if grow_forward else "backward",
            len(side.levels) - 1,
            len(layer),
            time.perf_counter() - budget.started,
        )
    # the meeting position (a key is a real position): a moves from a start (walked
    # back by reverse moves), b moves on to a goal (walked by moves)
    board = int(met[0])
    maps = forward.maps
    first = walk(board, a, forward.levels, move_tables(problem, True), maps, True)
    second = walk(board, b, backward.levels, move_tables(problem, False), maps, False)
    result.solution = problem.triples(first + second)
    count = count_moves(result.solution)
    if count != a + b or count != target:  # anything else is a bug
        raise RuntimeError(f"the path has {count} moves, the layers {a} + {b}, target {target}")
    result.status, result.objective = "optimal", float(count)
    result.bound = result.objective
    result.extra.update(sizes)
    return True


def count_moves(path: list[tuple[int, int, int]]) -> int:
    """The moves of a path of rules (a, b, c): maximal runs in which each rule starts on
    the cell the one before landed on."""
    return sum(i == 0 or path[i][0] != path[i - 1][2] for i in range(len(path)))
