"""Search support shared by the questions: the budget of time, nodes and bytes, the
expansion of a layer into a buffer, the look-up of keys in layers, and the walk back
from a position through the layers to a root (the witness path).

A *layer* is a sorted uint64 array of distinct keys; `levels[d]` holds the keys at
distance d from the roots of one side of a search.
"""

import math
import time
from collections.abc import Iterator

import numpy as np

from .. import Limits
from .kernels import NO_PRUNE, expand, member
from .problem import key_of

#: Child keys produced between two looks at the clock (and the size of that buffer).
CHUNK = 1 << 21


class Stop(Exception):
    """A limit was reached: `status` (time_limit, node_limit or error) and the
    `message` for an error."""

    def __init__(self, status: str, message: str | None = None):
        self.status, self.message = status, message


class Budget:
    """The clock, the node count and the bytes kept, against `limits` and `memory`
    (bytes). `nodes` counts states expanded; `made` the children they made and `kept`
    those the pruning kept (`fill`); `peak` the most bytes reported kept."""

    def __init__(self, limits: Limits, memory: int):
        self.limits, self.memory = limits, memory
        self.started = time.perf_counter()
        self.deadline = self.started + limits.time_limit
        self.nodes = 0
        self.made = self.kept = 0
        self.peak = 0

    def check(self, kept: int = 0) -> None:
        """Raises Stop when `kept` bytes exceed the memory (status error), the node
        limit is spent or the time limit has passed."""
        self.peak = max(self.peak, kept)
        if kept > self.memory:
            raise Stop("error", f"memory limit {self.memory / 2**30:.1f} GiB reached")
        if self.limits.node_limit is not None and self.nodes >= self.limits.node_limit:
            raise Stop("node_limit")
        if time.perf_counter() > self.deadline:
            raise Stop("time_limit")


def fill(
    budget: Budget,
    boards: np.ndarray,
    at: int,
    buffer: np.ndarray,
    tables: tuple[np.ndarray, ...],
    maps: np.ndarray,
    prune: np.ndarray,
    room: int,
    chain: bool = True,
) -> tuple[np.ndarray, int, int]:
    """The keys of the children of boards[at:] (by moves when `chain`, else by single
    rules; `prune` and `room` as in `kernels.expand`) written into `buffer` until it is
    full, doubling the buffer when one board's children alone overflow it. Returns
    (the buffer, keys written, the index of the first board not expanded) and counts
    the boards expanded in `budget.nodes`, the children made in `budget.made` and those
    the pruning kept in `budget.kept`."""
    ptr, order, fot, cond, nxt = tables
    while True:
        written, following, seen = expand(
            boards, at, ptr, order, fot, cond, nxt, maps, chain, buffer, prune, room
        )
        if following > at or written:
            break
        buffer = np.empty(2 * len(buffer), np.uint64)
    budget.nodes += following - at
    budget.made += seen
    budget.kept += written
    return buffer, written, following


#: Children a cost sample may make before pruning (the size of its buffer), and the
#: most buffers it fills.
SAMPLE_CHILDREN = 1 << 20
SAMPLE_ROUNDS = 4


def sample_cost(sample: np.ndarray, size: int, tables, maps) -> float:
    """The children that expanding a layer of `size` positions makes (the work: the
    bound prunes a child only after it is made), measured on `sample`, some of its
    positions, unpruned, into a buffer of `SAMPLE_CHILDREN` refilled until the sample is
    done or `SAMPLE_ROUNDS` buffers are spent, which bounds the sample's own work. When
    one position's children alone overflow the buffer (a lone token walking back over a
    nearly empty board of 45 holes has millions of chains), the side is infinitely
    costly and the other side grows alone. Reverse moves from a sparse board branch a
    hundred times more than moves. Counting the children the bound kept chose, on T_9
    at target 12, a backward layer whose one goal made chains for 255 s and kept none;
    stopping at the first full buffer chose, at target 14, a backward layer of 10 goals
    of which one made 82,022 children and another overflowed: 90 s for one position."""
    ptr, order, fot, cond, nxt = tables
    buffer = np.empty(SAMPLE_CHILDREN, np.uint64)
    made, done = 0, 0
    for _ in range(SAMPLE_ROUNDS):
        written, following, _ = expand(
            sample, done, ptr, order, fot, cond, nxt, maps, True, buffer, NO_PRUNE, 0
        )
        if following == done:  # this position's children alone overflow the buffer
            return math.inf
        made, done = made + written, following
        if done == len(sample):
            break
    return (made + done) * size / done


def meet(keys: np.ndarray, levels: list[np.ndarray]) -> tuple[np.ndarray, int] | None:
    """(the first of `keys` found in a layer, as a one-element array; that layer's
    distance), looking in `levels` from distance 0 on; None when no key is in any."""
    for d, level in enumerate(levels):
        hit = np.flatnonzero(member(keys, level))
        if len(hit):
            return keys[hit[:1]], d
    return None


def lookup(levels: list[np.ndarray], key: int) -> int | None:
    """The distance of the first layer holding `key`, or None."""
    found = meet(np.array([key], np.uint64), levels)
    return None if found is None else found[1]


def chains(board: int, tables: tuple[np.ndarray, ...]) -> Iterator[tuple[int, list[int]]]:
    """Every position one move from `board` with the rule indices of the move, in
    Python (for the few positions of a witness path)."""
    ptr, order, fot, cond, nxt = tables
    fot = [int(x) for x in fot]
    cond = [int(x) for x in cond]

    def go_on(now: int, cell: int, path: list[int]):
        for j in range(int(ptr[cell]), int(ptr[cell + 1])):
            r = int(order[j])
            if now & fot[r] == cond[r]:
                child = now ^ fot[r]
                yield child, path + [r]
                yield from go_on(child, int(nxt[r]), path + [r])

    for cell in range(len(ptr) - 1):
        if board >> cell & 1:
            yield from go_on(board, cell, [])


def walk(board: int, d: int, levels, tables, maps, back: bool) -> list[int]:
    """The rule indices of a path between `board`, at distance d from the roots of
    `levels`, and a root, in playing order: each step takes one move (a chain from
    `tables`) to a position one level nearer the roots. `levels`: the layers (a list of
    sorted key arrays) or a function (distance, key) -> whether that layer holds the key
    (layers kept elsewhere, as the sharded search's on disk). `back`: the chains are reverse
    moves, the path runs from a root to `board`; otherwise it runs from `board` to a
    root. Raises RuntimeError when no step leads nearer (the layers are inconsistent)."""
    holds = levels if callable(levels) else lambda e, k: lookup(levels[e : e + 1], k) is not None
    moves: list[list[int]] = []
    while d > 0:
        for child, rules in chains(board, tables):
            if holds(d - 1, key_of(child, maps)):
                moves.append(rules[::-1] if back else rules)
                board, d = child, d - 1
                break
        else:
            raise RuntimeError(f"no way back from distance {d}")
    if back:
        moves.reverse()
    return [r for move in moves for r in move]
