"""Compiled search over bitboards with jump rules: fewest moves, solvability, layers.

The states are sets of occupied cells of a board of at most 64 cells, held as uint64
bitboards; a *rule* (a, b, c) may fire when cells a and b are occupied and c is empty,
and then flips all three (a token on a jumps over b into c and b is removed: peg
solitaire on any board, but the engine knows no board). A *move* is one or more rules
fired in a row where each starts on the cell the one before landed on (one token moving
on). Symmetry: a group of cell permutations under which the rules are invariant; a
state is stored as its *key*, the least of its images (byte lookup tables, built once).
The inner loops are compiled with numba (`cache=True`: the first run on a machine
compiles for about half a minute and writes the cache; later runs load it).

Three questions, `LayeredProblem.question`:
- `min_moves`: the fewest moves from a start to a goal, by a breadth-first search by
  moves from both ends, meeting in the middle. Forward from the starts by moves; backward
  from the goals by *reverse moves* (rules undone in a row by one token: c, full, jumps
  back over the empty b into the empty a, and may go on from a), so that a position at
  backward distance d reaches a goal in d moves. Each step expands the side with the
  smaller last layer by one move, keeps the children that are new to that side (sorted
  uint64 arrays, one per distance: the visited set, no hash table) and looks them up in
  every layer of the other side. If forward radius a and backward radius b have no
  position in common, no solution has a + b moves or fewer (cut any solution after
  min(a, m) moves), so the bound is a + b + 1; the first common position found while
  expanding gives a solution of exactly the bound, which is therefore optimal. That
  last expansion stops at the first hit and is never stored. A position needs no "last
  token moved" in its state: going on with the same token is itself one longer move,
  which the move generator also produces.
- `solve`: is a goal reachable at all (by any number of moves)? First the position
  classes: the GF(2) invariants of the rules (weights w over cells with
  w(a) + w(b) + w(c) = 0 mod 2 for every rule; every rule leaves their parity sums
  unchanged; G. I. Bell's position classes, "Solving Triangular Peg Solitaire", JIS 11
  (2008) 08.4.8, are these for the triangle), computed by elimination, rule out the
  goals in another class at once. Then a depth-first search by single rules in the
  given rule order, with a table of keys of positions proven dead (open addressing,
  sized from the memory limit; when full it stops growing and the search stays exact),
  resumable in slices so the time and node limits hold.
- `reachable`: every exact position after 0, 1, 2, ... rules from the starts (no
  symmetry, so the counts are of real positions), as sorted arrays, and for every goal
  reached one path to it, found backwards through the layers.

Limits: time and node limits are checked between slices of work (a slice is at most
`CHUNK` states or `SLICE` search nodes); `memory` (bytes, per problem) bounds the states
kept (layers, buffers, the dead table): a search that would exceed it stops with status
`error` and the message "memory limit", reporting the bound proven so far.

Result: status optimal | infeasible | time_limit | node_limit | error; objective = the
fewest moves (`min_moves`), 1 (`solve`, the pegs left) or the number of goals reached
(`reachable`); bound = the proven lower bound; nodes = states expanded; solution = the
rules of the path as (a, b, c) triples, or {"layers": counts, "goals": [(goal, path)]};
extra = {"forward": layer sizes, "backward": layer sizes} or {"states": ...}.

Roads not taken: a hash set per layer (sorted arrays are half the memory and give the
set difference and the look-ups by merging or binary search); a dynamic programme over
(board, last token) by single rules, the engine of before issue 13 (every intermediate
position of every move is stored: T_8 over all starts ran out of 6 GiB after 77 million
states, where the move layers here hold a few million); meeting in the middle through
the complement of a position (the reverse game is the game on the complement board for
single jumps, but it turns a move into jumps by different tokens, so move counts are
not preserved); pagoda functions as cuts (not needed for the sizes measured so far).
"""

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from numba import njit

from . import Limits, SolverResult, relative_gap

VERSION = "puzzlesweep-frontier-2"
#: Child keys produced between two looks at the clock (and the size of that buffer).
CHUNK = 1 << 21
#: The part of the last kept layer of a target whose grandchildren are looked up at
#: once (`_ahead`) before the next layer is built: a solution is usually met there; a
#: target without one loses this share of a layer's work.
AHEAD_SHARE = 0.05
#: Positions expanded to estimate the cost of expanding a layer.
SAMPLE = 512
#: Depth-first search nodes between two looks at the clock.
SLICE = 1 << 19
#: Bytes a search may keep by default (layers, buffers, the dead table).
MEMORY = 4 << 30
#: `min_moves` first dives depth-first for an incumbent with this share of the time
#: and this many bytes for its dead table.
DIVE_SHARE = 0.1
DIVE_MEMORY = 64 << 20

log = logging.getLogger(__name__)

_ONE = np.uint64(1)
_NO_PRUNE = np.zeros(3, np.uint64)
_BYTE = np.uint64(255)
_EIGHT = np.uint64(8)


@dataclass(frozen=True)
class LayeredProblem:
    """A search over bitboards the engine runs without knowing the board.

    size: cells (<= 64). rules: int array (R, 3) of cells (a, b, c); a fires when a and b
    are occupied and c is empty, in this order in the depth-first search. group: int
    array (G, size), cell permutations that map rules to rules (identity first); for
    `min_moves` and `solve` they must map the set of starts and the set of goals each to
    itself. starts, goals: tuples of bitboards (Python ints). question: see the module
    docstring. memory: bytes the search may keep.
    """

    size: int
    rules: np.ndarray
    group: np.ndarray
    starts: tuple[int, ...]
    goals: tuple[int, ...]
    question: Literal["solve", "min_moves", "reachable"] = "min_moves"
    memory: int = MEMORY
    tables: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.size <= 64:
            raise ValueError(f"a board of {self.size} cells does not fit 64 bits")
        if self.question not in ("solve", "min_moves", "reachable"):
            raise ValueError(f"unknown question {self.question!r}")
        if not self.starts or not self.goals:
            raise ValueError("a search needs at least one start and one goal")


class _Stop(Exception):
    """A limit was reached: status, and the message for `error`."""

    def __init__(self, status: str, message: str | None = None):
        self.status, self.message = status, message


# --- rule and key tables ----------------------------------------------------------------
def key_maps(group: np.ndarray, size: int) -> np.ndarray:
    """maps[g, k, byte]: the image under permutation g of the cells of the k-th byte of
    a bitboard (uint64, shape (G, ceil(size / 8), 256))."""
    chunks = (size + 7) // 8
    maps = np.zeros((len(group), chunks, 256), np.uint64)
    for g, perm in enumerate(group):
        for k in range(chunks):
            for byte in range(256):
                image = 0
                for bit in range(8):
                    if byte >> bit & 1 and 8 * k + bit < size:
                        image |= 1 << int(perm[8 * k + bit])
                maps[g, k, byte] = image
    return maps


def _generator(problem: LayeredProblem, reverse: bool) -> tuple[np.ndarray, ...]:
    """(ptr, order, fot, cond, nxt): the rules grouped by the cell the moving token
    stands on (CSR: order[ptr[x]:ptr[x + 1]] are the rules from x), their three bits,
    the bits that must be occupied among them, and the cell the token lands on. Forward
    the token stands on a and lands on c; `reverse` undoes a rule: it stands on c, needs
    a and b empty, and lands on a."""
    name = "reverse" if reverse else "forward"
    if name not in problem.tables:
        rules = np.asarray(problem.rules, np.int64)
        a, b, c = rules[:, 0], rules[:, 1], rules[:, 2]
        one = np.uint64(1)
        bits = [one << x.astype(np.uint64) for x in (a, b, c)]
        fot = bits[0] | bits[1] | bits[2]
        stand, land = (c, a) if reverse else (a, c)
        cond = bits[2] if reverse else bits[0] | bits[1]
        order = np.argsort(stand, kind="stable").astype(np.int64)
        ptr = np.searchsorted(stand[order], np.arange(problem.size + 1)).astype(np.int64)
        problem.tables[name] = (ptr, order, fot, cond, land.astype(np.int64))
    return problem.tables[name]


def _maps(problem: LayeredProblem, symmetric: bool = True) -> np.ndarray:
    name = "maps" if symmetric else "identity"
    if name not in problem.tables:
        group = problem.group if symmetric else problem.group[:1]
        problem.tables[name] = key_maps(np.asarray(group), problem.size)
    return problem.tables[name]


def key_of(board: int, maps: np.ndarray) -> int:
    """The key of one board (the least image under the group), in Python."""
    best = None
    for g in range(maps.shape[0]):
        image = 0
        for k in range(maps.shape[1]):
            image |= int(maps[g, k, board >> (8 * k) & 255])
        best = image if best is None else min(best, image)
    return best


# --- compiled kernels --------------------------------------------------------------------
@njit(cache=True)
def _key(board, maps):
    best = ~np.uint64(0)
    for g in range(maps.shape[0]):
        image = np.uint64(0)
        rest = board
        for k in range(maps.shape[1]):
            image |= maps[g, k, rest & _BYTE]
            rest >>= _EIGHT
        if image < best:
            best = image
    return best


@njit(cache=True)
def _keys(boards, maps):
    out = np.empty(boards.shape[0], np.uint64)
    for i in range(boards.shape[0]):
        out[i] = _key(boards[i], maps)
    return out


@njit(cache=True)
def _regions_bound(board, singles, pairs, full, less):
    """The moves still needed by the Merson regions: with `full`, the regions (disjoint,
    chosen greedily) that are full on `board`, each needing a move that starts in it;
    otherwise the regions that are not full, each of which a move starting in it has
    changed since a start where it was full; minus `less` (the regions that may stay
    as they are: a goal's token on a corner, a start's empty cell), at least 0."""
    count = 0
    rest = board & singles if full else ~board & singles
    while rest:
        rest &= rest - _ONE
        count += 1
    used = np.uint64(0)
    for k in range(pairs.shape[0]):
        pair = pairs[k]
        if used & pair:
            continue
        if (board & pair == pair) == full:
            count += 1
            used |= pair
    return max(count - less, 0)


@njit(cache=True)
def _expand(boards, at, ptr, order, fot, cond, nxt, maps, chain, out, prune, room):
    """Keys of the children of boards[at:] into `out` until it is full: every position
    one move away (`chain`: a token goes on while it can; else single rules). Returns
    (children written, the index of the first board not expanded); a board whose
    children do not all fit is left for the next call. prune = (kind, less, singles,
    pair, pair, ...) as uint64 (the cells of the Merson regions as bitboards): a child
    whose `_regions_bound` (kind 1: full regions, 2: regions not full) exceeds `room`
    is not written (kind 0: every child is; the chain goes on through it anyway)."""
    kind = prune[0]
    less = np.int64(prune[1])
    singles = prune[2]
    pairs = prune[3:]
    written = 0
    cap = out.shape[0]
    stack_b = np.empty(65, np.uint64)
    stack_p = np.empty(65, np.int64)
    stack_i = np.empty(65, np.int64)
    cells = ptr.shape[0] - 1
    i = at
    while i < boards.shape[0]:
        board = boards[i]
        mark = written
        full = False
        for cell in range(cells):
            if (board >> np.uint64(cell)) & _ONE == 0:
                continue
            depth = 0
            stack_b[0], stack_p[0], stack_i[0] = board, cell, ptr[cell]
            while depth >= 0:
                here = stack_p[depth]
                j = stack_i[depth]
                if j >= ptr[here + 1]:
                    depth -= 1
                    continue
                stack_i[depth] = j + 1
                r = order[j]
                now = stack_b[depth]
                if now & fot[r] != cond[r]:
                    continue
                child = now ^ fot[r]
                if written >= cap:
                    full = True
                    break
                if kind == 0 or _regions_bound(child, singles, pairs, kind == 1, less) <= room:
                    out[written] = _key(child, maps)
                    written += 1
                if chain:
                    depth += 1
                    stack_b[depth], stack_p[depth], stack_i[depth] = child, nxt[r], ptr[nxt[r]]
            if full:
                break
        if full:
            return mark, i
        i += 1
    return written, i


@njit(cache=True)
def _member(keys, table):
    """keys[i] in the sorted array `table`, for every i (binary search)."""
    found = np.zeros(keys.shape[0], np.bool_)
    n = table.shape[0]
    if n == 0:
        return found
    at = np.searchsorted(table, keys)
    for i in range(keys.shape[0]):
        found[i] = at[i] < n and table[at[i]] == keys[i]
    return found


def _distinct(keys: np.ndarray) -> np.ndarray:
    """The sorted distinct keys (np.sort and one pass: np.unique of numpy 2.4 took 100
    times as long as np.sort on 2 million uint64 keys here)."""
    keys = np.sort(keys)
    if len(keys) < 2:
        return keys
    keep = np.empty(len(keys), bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


@njit(cache=True)
def _union(a, b):
    """The sorted distinct keys of two sorted arrays of distinct keys (one merge)."""
    out = np.empty(a.shape[0] + b.shape[0], np.uint64)
    i = j = n = 0
    while i < a.shape[0] and j < b.shape[0]:
        if a[i] < b[j]:
            out[n] = a[i]
            i += 1
        elif b[j] < a[i]:
            out[n] = b[j]
            j += 1
        else:
            out[n] = a[i]
            i += 1
            j += 1
        n += 1
    while i < a.shape[0]:
        out[n] = a[i]
        i += 1
        n += 1
    while j < b.shape[0]:
        out[n] = b[j]
        j += 1
        n += 1
    return out[:n].copy()


@njit(cache=True)
def _difference(a, b):
    """The keys of sorted `a` that are not in sorted `b` (one merge)."""
    keep = np.ones(a.shape[0], np.bool_)
    j = 0
    for i in range(a.shape[0]):
        while j < b.shape[0] and b[j] < a[i]:
            j += 1
        if j < b.shape[0] and b[j] == a[i]:
            keep[i] = False
    return a[keep]


@njit(cache=True)
def _slot(table, key):
    mask = np.uint64(table.shape[0] - 1)
    h = (key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)
    at = h & mask
    while table[at] != 0 and table[at] != key:
        at = (at + _ONE) & mask
    return at


@njit(cache=True)
def _rehash(old, new):
    """Every key of the table `old` into the empty table `new`."""
    for key in old:
        if key != 0:
            new[_slot(new, key)] = key


@njit(cache=True)
def _dfs(stack_b, stack_r, state, fot, cond, goals, last, maps, dead, budget):
    """Resumable depth-first search by single rules. state = [depth, dead entries,
    outcome, grow]; outcome 1 when the board on top of the stack is a goal (the rules
    taken are stack_r[:depth] - 1), -1 when the root is refuted, 0 when the budget ran
    out. A position with `last` tokens left that is no goal is dead; every refuted
    position's key goes into the table `dead`; when it is 3/4 full the search returns
    (with outcome 0) if state[3] asks for a larger table, and otherwise goes on without
    storing more. Returns nodes visited."""
    depth = state[0]
    filled = state[1]
    limit = dead.shape[0] * 3 // 4
    nodes = 0
    rules = fot.shape[0]
    while depth >= 0 and nodes < budget:
        board = stack_b[depth]
        r = stack_r[depth]
        if r < 0:  # first visit
            nodes += 1
            r = 0
            count = 0
            rest = board
            while rest:
                rest &= rest - _ONE
                count += 1
            if count == last:
                key = _key(board, maps)
                for g in range(goals.shape[0]):
                    if goals[g] == key:
                        state[0], state[1], state[2] = depth, filled, 1
                        return nodes
                depth -= 1
                continue
        while r < rules and board & fot[r] != cond[r]:
            r += 1
        if r == rules:  # refuted: remember it
            if filled >= limit and state[3]:
                break  # the caller doubles the table
            if filled < limit:
                key = _key(board, maps)
                at = _slot(dead, key)
                if dead[at] == 0:
                    dead[at] = key
                    filled += 1
            depth -= 1
            continue
        stack_r[depth] = r + 1
        child = board ^ fot[r]
        key = _key(child, maps)
        if dead[_slot(dead, key)] == key:
            continue
        depth += 1
        stack_b[depth] = child
        stack_r[depth] = -1
    state[0], state[1] = depth, filled
    state[2] = -1 if depth < 0 else 0
    return nodes


# --- shared helpers -------------------------------------------------------------------
class _Budget:
    """The clock, the node count and the bytes kept, against the limits."""

    def __init__(self, limits: Limits, memory: int):
        self.limits, self.memory = limits, memory
        self.started = time.perf_counter()
        self.deadline = self.started + limits.time_limit
        self.nodes = 0
        self.peak = 0

    def check(self, kept: int = 0) -> None:
        self.peak = max(self.peak, kept)
        if kept > self.memory:
            raise _Stop("error", f"memory limit {self.memory / 2**30:.1f} GiB reached")
        if self.limits.node_limit is not None and self.nodes >= self.limits.node_limit:
            raise _Stop("node_limit")
        if time.perf_counter() > self.deadline:
            raise _Stop("time_limit")


def _chains(board: int, tables: tuple[np.ndarray, ...]) -> Iterator[tuple[int, list[int]]]:
    """Every position one move from `board` with the rules of the move, in Python (for
    the few positions of a witness path)."""
    ptr, order, fot, cond, nxt = tables
    fot = [int(x) for x in fot]
    cond = [int(x) for x in cond]

    def walk(now: int, cell: int, path: list[int]):
        for j in range(int(ptr[cell]), int(ptr[cell + 1])):
            r = int(order[j])
            if now & fot[r] == cond[r]:
                child = now ^ fot[r]
                yield child, path + [r]
                yield from walk(child, int(nxt[r]), path + [r])

    for cell in range(len(ptr) - 1):
        if board >> cell & 1:
            yield from walk(board, cell, [])


def _lookup(levels: list[np.ndarray], key: int) -> int | None:
    """The first level holding `key`, or None."""
    probe = np.array([key], np.uint64)
    for d, level in enumerate(levels):
        if _member(probe, level)[0]:
            return d
    return None


# --- min_moves: both ends by moves ---------------------------------------------------------
def merson_regions(rules: np.ndarray, size: int) -> tuple[int, list[int]]:
    """(singles, pairs): the Merson regions of the rules as bitboards. A region is a set
    of cells that no rule jumps over from outside it into outside it (no (a, b, c) with
    b inside, a and c outside); when a region is full at a move boundary, the first
    change to it is the first jump of a move that starts in it (a token cannot have
    landed in the full region). singles: the cells never jumped over (the corners of a
    triangle); pairs: two cells forming a region (adjacent holes along an edge), in
    order, for a greedy packing. Source: the Merson regions of J. D. Beasley, "The Ins
    and Outs of Peg Solitaire" (1985), used for move counts by G. I. Bell, "Solving
    Triangular Peg Solitaire", JIS 11 (2008) 08.4.8."""
    cells = {int(x) for rule in rules for x in rule}
    over: dict[int, list[tuple[int, int]]] = {}
    for a, b, c in rules:
        over.setdefault(int(b), []).append((int(a), int(c)))
    singles = [x for x in sorted(cells) if x not in over]
    pairs = []
    for x in sorted(over):
        for y in sorted(over):
            if y > x and all(a in (x, y) or c in (x, y) for a, c in over[x] + over[y]):
                pairs.append((1 << x) | (1 << y))
    return sum(1 << x for x in singles), pairs


def _prune(problem: LayeredProblem, kind: int) -> np.ndarray:
    """The `prune` array of `_expand` for one side: kind 1 (forward: full regions need
    a move each, less those a goal may keep full), kind 2 (backward: regions not full
    were changed by a move each since the start, less those a start may not fill)."""
    name = f"prune{kind}"
    if name not in problem.tables:
        singles, pairs = merson_regions(problem.rules, problem.size)
        cells = singles | sum(pairs)
        paired = sum(pairs)
        if kind == 1:
            less = max(
                (g & singles).bit_count() + (g & paired).bit_count() // 2 for g in problem.goals
            )
        else:
            full = (1 << problem.size) - 1
            less = max((full & ~s & cells).bit_count() for s in problem.starts)
        problem.tables[name] = np.array([kind, less, singles, *pairs], np.uint64)
    return problem.tables[name]


def _bound_of(board: int, prune: np.ndarray) -> int:
    """`_regions_bound` of one board, in Python."""
    full = bool(prune[0] == 1)
    return int(_regions_bound(np.uint64(board), prune[2], prune[3:], full, int(prune[1])))


class _Side:
    """One end of the search: its layers (sorted keys by distance), its move generator
    and its pruning; roots whose bound exceeds `target` are left out."""

    def __init__(self, problem: LayeredProblem, reverse: bool, target: int):
        roots = problem.goals if reverse else problem.starts
        self.prune = _prune(problem, 2 if reverse else 1)
        self.target = target
        roots = [r for r in roots if _bound_of(r, self.prune) <= target]
        self.maps = _maps(problem)
        self.tables = _generator(problem, reverse)
        self.levels = [_distinct(_keys(np.array(roots, np.uint64), self.maps))]

    def cost(self) -> float:
        """The children the next expansion should make, measured on a sample of at most
        `SAMPLE` positions of the last layer: reverse moves from a sparse board branch
        a hundred times more than moves, and the pruning changes with the depth."""
        frontier = self.levels[-1]
        if len(frontier) <= SAMPLE:
            sample = frontier
        else:
            sample = frontier[:: len(frontier) // SAMPLE][:SAMPLE]
        ptr, order, fot, cond, nxt = self.tables
        buffer = np.empty(1 << 20, np.uint64)
        room = self.target - len(self.levels)
        # one call: a sample whose children overflow the buffer costs at least that much
        made, done = _expand(
            sample, 0, ptr, order, fot, cond, nxt, self.maps, True, buffer, self.prune, room
        )
        if done == 0:
            return float(len(buffer)) * len(frontier)
        return (made + done) * len(frontier) / done

    def kept(self) -> int:
        return sum(level.nbytes for level in self.levels)


def _grow(
    side: _Side, other: _Side, budget: _Budget, kept: int, final: bool = False
) -> tuple[np.ndarray, int | None]:
    """The next layer of `side` (children new to it), or, at the first child found in
    a layer of `other`, (that child's key as a one-element array, its distance there).
    `final`: the layer is only looked up, not kept (an empty array comes back)."""
    ptr, order, fot, cond, nxt = side.tables
    frontier = side.levels[-1]
    buffer = np.empty(CHUNK, np.uint64)
    runs: list[np.ndarray] = []  # sorted distinct children, sizes decreasing (merged
    made = 0  # like a binary counter: each key is merged about log2(chunks) times)
    at = 0
    clock = {"expand": 0.0, "unique": 0.0, "meet": 0.0}
    while at < len(frontier):
        budget.check(kept + buffer.nbytes + 2 * sum(x.nbytes for x in runs))
        tick = time.perf_counter()
        stop = len(frontier)
        if budget.limits.node_limit is not None:  # stop at the node limit exactly
            stop = min(stop, at + budget.limits.node_limit - budget.nodes)
        room = side.target - len(side.levels)  # the moves left after this one
        written, following = _expand(
            frontier[:stop],
            at,
            ptr,
            order,
            fot,
            cond,
            nxt,
            side.maps,
            True,
            buffer,
            side.prune,
            room,
        )
        if following == at and written == 0:  # one board's children overflow the buffer
            buffer = np.empty(2 * len(buffer), np.uint64)
            continue
        budget.nodes += following - at
        at = following
        made += written
        tock = time.perf_counter()
        part = _distinct(buffer[:written])
        tick, clock["expand"] = time.perf_counter(), clock["expand"] + tock - tick
        clock["unique"] += tick - tock
        for d, level in enumerate(other.levels):
            hit = np.flatnonzero(_member(part, level))
            if len(hit):
                return part[hit[:1]], d
        clock["meet"] += time.perf_counter() - tick
        if final:
            continue
        runs.append(part)
        while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]):
            budget.check(kept + buffer.nbytes + 2 * sum(x.nbytes for x in runs))
            last = runs.pop()
            runs[-1] = _union(runs[-1], last)
            del last
    budget.check(kept + 2 * sum(x.nbytes for x in runs))
    del buffer
    tick = time.perf_counter()
    layer = np.empty(0, np.uint64)
    while runs:
        layer = _union(layer, runs.pop())
    for level in side.levels:
        layer = _difference(layer, level)
    log.info(
        "  %d children of %d positions: expand %.1f s, sort %.1f s, meet %.1f s, last merge %.1f s",
        made,
        len(frontier),
        clock["expand"],
        clock["unique"],
        clock["meet"],
        time.perf_counter() - tick,
    )
    return layer, None


def _ahead(
    side: _Side, other: _Side, budget: _Budget, share: float = 1.0
) -> tuple[np.ndarray, int, np.ndarray] | None:
    """The last two layers of a target at once, neither kept: the children of each
    chunk of `side`'s last layer, and at once their children, looked up in `other`.
    Returns (the common key, its distance in `other`, the chunk's children: the layer
    the walk back passes through), or None when no position is common. The chunk's
    children may repeat across chunks or lie in earlier layers: a superset, so nothing
    is missed, and the first chunks usually meet when solutions are many. `share`: the
    part of the last layer to try (None then proves nothing unless it is 1)."""
    ptr, order, fot, cond, nxt = side.tables
    frontier = side.levels[-1]
    buffer = np.empty(CHUNK, np.uint64)
    inner = np.empty(CHUNK, np.uint64)
    room = side.target - len(side.levels)
    frontier = frontier[: max(1, int(len(frontier) * share))]
    at = 0
    while at < len(frontier):
        budget.check(buffer.nbytes + inner.nbytes)
        written, following = _expand(
            frontier, at, ptr, order, fot, cond, nxt, side.maps, True, buffer, side.prune, room
        )
        if following == at and written == 0:
            buffer = np.empty(2 * len(buffer), np.uint64)
            continue
        budget.nodes += following - at
        at = following
        middle = _distinct(buffer[:written])
        inside = 0
        while inside < len(middle):
            budget.check(buffer.nbytes + inner.nbytes + middle.nbytes)
            made, after = _expand(
                middle,
                inside,
                ptr,
                order,
                fot,
                cond,
                nxt,
                side.maps,
                True,
                inner,
                side.prune,
                room - 1,
            )
            if after == inside and made == 0:
                inner = np.empty(2 * len(inner), np.uint64)
                continue
            budget.nodes += after - inside
            inside = after
            part = _distinct(inner[:made])
            for d, level in enumerate(other.levels):
                hit = np.flatnonzero(_member(part, level))
                if len(hit):
                    return part[hit[:1]], d, middle
    return None


def _walk(board: int, d: int, levels: list[np.ndarray], tables, maps, back: bool) -> list[int]:
    """The rules of a path between `board`, at distance d from the roots of `levels`,
    and a root, in playing order: each step takes one move (a chain from `tables`) to a
    position one level nearer the roots. `back`: the chains are reverse moves, the path
    runs from a root to `board`; otherwise it runs from `board` to a root."""
    moves: list[list[int]] = []
    while d > 0:
        for child, rules in _chains(board, tables):
            if _member(np.array([key_of(child, maps)], np.uint64), levels[d - 1])[0]:
                moves.append(rules[::-1] if back else rules)
                board, d = child, d - 1
                break
        else:
            raise RuntimeError(f"no way back from distance {d}")
    if back:
        moves.reverse()
    return [r for move in moves for r in move]


def _incumbent(problem: LayeredProblem, budget: _Budget, result: SolverResult) -> bool:
    """A first solution from the depth-first search (`_solve`) from the first start,
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
    if len(problem.starts) > 1:  # the group may not fix the first start alone
        one = replace(one, group=problem.group[:1])
    inner = _Budget(share, DIVE_MEMORY)
    try:
        _solve(one, inner, dive)
    except _Stop:
        pass
    budget.nodes += inner.nodes
    budget.check()  # the node limit may be spent
    if dive.status == "infeasible" and len(problem.starts) == 1:
        result.status, result.bound = "infeasible", None
        result.extra["proof"] = "depth-first"
        return False
    if dive.status == "optimal":
        result.solution = dive.solution
        result.objective = float(_count_moves(dive.solution))
        log.info("incumbent: %d moves", result.objective)
    return True


def _min_moves(problem: LayeredProblem, budget: _Budget, result: SolverResult) -> None:
    """Targets L = the roots' region bound, L + 1, ...: is there a solution of L moves
    or fewer? Each attempt is a search from both ends in which a forward position at
    distance a is kept only if a plus its full regions is at most L, and a backward one
    at distance b only if b plus its regions that are not full is at most L (both
    bounds are admissible: every solution of L moves or fewer keeps all its positions
    at move boundaries); an attempt ends when a + b reaches L (no such solution: the
    bound becomes L + 1) or at the first common position (a solution of exactly L, as
    L - 1 failed). Positions are re-searched per target: the pruning is what pays."""
    result.bound = 0.0
    if not _incumbent(problem, budget, result):
        return
    forward = _prune(problem, 1)
    target = max(1, min(_bound_of(s, forward) for s in problem.starts))
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
            if _attempt(problem, budget, result, target, attempts):
                return
            target += 1
            result.bound = float(target)
    finally:
        result.extra["peak_bytes"] = budget.peak


def _attempt(problem, budget: _Budget, result: SolverResult, target: int, attempts) -> bool:
    """One target of `_min_moves`; True (and the result filled) when a solution of
    `target` moves is found."""
    forward = _Side(problem, False, target)
    backward = _Side(problem, True, target)
    sizes = attempts[target] = {"forward": [len(forward.levels[0])], "backward": []}
    sizes["backward"].append(len(backward.levels[0]))
    common = forward.levels[0][_member(forward.levels[0], backward.levels[0])]
    meet, a, b = (common[:1], 0, 0) if len(common) else (None, 0, 0)
    while meet is None:
        reached = len(forward.levels) + len(backward.levels) - 2
        if reached >= target or not len(forward.levels[-1]) or not len(backward.levels[-1]):
            log.info(
                "no solution of %d moves (%.1f s)", target, time.perf_counter() - budget.started
            )
            return False
        grow_forward = forward.cost() <= backward.cost()
        side, other = (forward, backward) if grow_forward else (backward, forward)
        found = None
        if reached + 2 == target:  # try the last two layers at once on a part of it
            found = _ahead(side, other, budget, AHEAD_SHARE)
        if found is not None:
            meet, d, middle = found
            side.levels.append(middle)  # only for the walk back
            a, b = (len(side.levels), d) if grow_forward else (d, len(side.levels))
            break
        final = reached + 1 >= target  # the last layer of this target: only looked up
        layer, d = _grow(side, other, budget, forward.kept() + backward.kept(), final)
        if d is not None:
            meet = layer
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
    board = int(meet[0])
    maps = forward.maps
    first = _walk(board, a, forward.levels, _generator(problem, True), maps, True)
    second = _walk(board, b, backward.levels, _generator(problem, False), maps, False)
    rules = np.asarray(problem.rules)
    result.solution = [tuple(int(x) for x in rules[r]) for r in first + second]
    count = _count_moves(result.solution)
    if count != a + b or count != target:  # anything else is a bug
        raise RuntimeError(f"the path has {count} moves, the layers {a} + {b}, target {target}")
    result.status, result.objective = "optimal", float(count)
    result.bound = result.objective
    result.extra.update(sizes)
    return True


def _count_moves(path: list[tuple[int, int, int]]) -> int:
    return sum(i == 0 or path[i][0] != path[i - 1][2] for i in range(len(path)))


# --- solve: position classes, then depth-first with a dead table ---------------------------
def invariants(rules: np.ndarray, size: int) -> np.ndarray:
    """A basis of the weights w in GF(2)^size with w(a) + w(b) + w(c) = 0 for every
    rule, as bitboards (uint64): the parity of the tokens on each basis weight's cells is
    the same in every position reachable from one another (Bell's position classes)."""
    rows = sorted({(1 << int(a)) | (1 << int(b)) | (1 << int(c)) for a, b, c in rules})
    pivots: dict[int, int] = {}  # reduced row echelon form of the rule rows
    for row in rows:
        for bit, pivot in pivots.items():
            if row >> bit & 1:
                row ^= pivot
        if row:
            bit = row.bit_length() - 1
            for other in list(pivots):
                if pivots[other] >> bit & 1:
                    pivots[other] ^= row
            pivots[bit] = row
    free = [x for x in range(size) if x not in pivots]
    basis = []
    for f in free:  # the null space: w = e_f plus the pivots whose row contains f
        w = 1 << f
        for bit, row in pivots.items():
            if row >> f & 1:
                w |= 1 << bit
        basis.append(w)
    return np.array(basis, np.uint64)


def position_class(board: int, basis: np.ndarray) -> tuple[int, ...]:
    """The parities of the tokens on each invariant weight of `basis`."""
    return tuple((board & int(w)).bit_count() & 1 for w in basis)


def _solve(problem: LayeredProblem, budget: _Budget, result: SolverResult) -> None:
    basis = invariants(problem.rules, problem.size)
    classes = {position_class(s, basis) for s in problem.starts}
    goals = [g for g in problem.goals if position_class(g, basis) in classes]
    if not goals:  # no goal is in a start's position class
        result.status = "infeasible"
        result.extra["position_class"] = True
        return
    if len(problem.starts) != 1 or len({g.bit_count() for g in goals}) != 1:
        raise ValueError("solve takes one start and goals with equal token counts")
    maps = _maps(problem)
    _, _, fot, cond, _ = _generator(problem, False)
    largest = 1 << max(16, int(problem.memory // 2 // 8).bit_length() - 1)
    dead = np.zeros(1 << 16, np.uint64)  # doubled as it fills: a large empty table is slow
    stack_b = np.zeros(problem.size + 1, np.uint64)
    stack_r = np.full(problem.size + 1, -1, np.int64)
    stack_b[0] = problem.starts[0]
    state = np.zeros(4, np.int64)
    key_goals = _distinct(_keys(np.array(goals, np.uint64), maps))
    last = goals[0].bit_count()
    while True:
        budget.check(dead.nbytes)
        state[3] = len(dead) < largest
        if state[3] and state[1] >= len(dead) * 3 // 4:
            dead, old = np.zeros(2 * len(dead), np.uint64), dead
            _rehash(old, dead)
            del old
        step = SLICE
        if budget.limits.node_limit is not None:
            step = min(step, budget.limits.node_limit - budget.nodes)
        budget.nodes += _dfs(stack_b, stack_r, state, fot, cond, key_goals, last, maps, dead, step)
        if state[2] != 0:
            break
    result.extra["dead"] = int(state[1])
    if state[2] < 0:
        result.status = "infeasible"
        return
    rules = np.asarray(problem.rules)
    result.solution = [tuple(int(x) for x in rules[stack_r[i] - 1]) for i in range(state[0])]
    result.status, result.objective, result.bound = "optimal", 1.0, 1.0


# --- reachable: every exact position, layer by layer ------------------------------------------
def _reachable(problem: LayeredProblem, budget: _Budget, result: SolverResult) -> None:
    ptr, order, fot, cond, nxt = _generator(problem, False)
    maps = _maps(problem, symmetric=False)
    levels = [_distinct(np.array(problem.starts, np.uint64))]
    buffer = np.empty(CHUNK, np.uint64)
    result.extra["states"] = [len(levels[0])]
    while True:
        frontier, parts, at = levels[-1], [], 0
        while at < len(frontier):
            budget.check(sum(x.nbytes for x in levels + parts) * 2 + buffer.nbytes)
            written, following = _expand(
                frontier, at, ptr, order, fot, cond, nxt, maps, False, buffer, _NO_PRUNE, 0
            )
            budget.nodes += following - at
            at = following
            parts.append(_distinct(buffer[:written]))
        layer = _distinct(np.concatenate(parts)) if parts else np.empty(0, np.uint64)
        if not len(layer):
            break
        levels.append(layer)
        result.extra["states"].append(len(layer))
    reverse = _generator(problem, True)
    goals = []
    for goal in sorted(problem.goals):
        d = _lookup(levels, goal)
        if d is not None:
            path = _walk(goal, d, levels, reverse, maps, True)
            rules = np.asarray(problem.rules)
            goals.append((goal, [tuple(int(x) for x in rules[r]) for r in path]))
    result.solution = {"layers": [len(x) for x in levels], "goals": goals}
    result.status, result.objective = "optimal", float(len(goals))
    result.bound = result.objective


_WARM: list[float] = []


def warm() -> float:
    """Load (or, on a new machine, compile) every kernel once per process, on a line of
    five cells; returns the seconds it took (0 after the first call)."""
    if _WARM:
        return 0.0
    started = time.perf_counter()
    rules = np.array([(0, 1, 2), (1, 2, 3), (2, 3, 4), (2, 1, 0), (3, 2, 1), (4, 3, 2)])
    group = np.array([[0, 1, 2, 3, 4]])
    quiet, log.disabled = log.disabled, True
    for question in ("min_moves", "solve", "reachable"):
        tiny = LayeredProblem(5, rules, group, (0b01011,), (1 << 4,), question)
        _QUESTIONS[question](tiny, _Budget(Limits(60), MEMORY), SolverResult(status="error"))
    log.disabled = quiet
    _rehash(np.zeros(4, np.uint64), np.zeros(8, np.uint64))
    _WARM.append(time.perf_counter() - started)
    return _WARM[0]


_QUESTIONS = {"min_moves": _min_moves, "solve": _solve, "reachable": _reachable}


def solve(problem: LayeredProblem, limits: Limits) -> SolverResult:
    """Answer `problem.question` under `limits` and the problem's memory; never raises
    (a crash is an `error` result). See the module docstring for the fields. The first
    call in a process loads the compiled kernels first (`warm`), outside the limits and
    the reported seconds: the time it took is extra["warm_seconds"]."""
    warmed = warm()
    started = time.perf_counter()
    result = SolverResult(status="error", solver="backtrack", solver_version=VERSION)
    budget = _Budget(limits, problem.memory)
    try:
        _QUESTIONS[problem.question](problem, budget, result)
    except _Stop as stop:
        result.status, result.message = stop.status, stop.message
        if problem.question != "min_moves":
            result.bound = None
    except Exception as exc:  # a crashing search becomes an error row, not a lost batch
        result.status, result.message = "error", f"{type(exc).__name__}: {exc}"
        result.bound = None
    result.gap = relative_gap(result.objective, result.bound)
    if warmed:
        result.extra["warm_seconds"] = warmed
    result.nodes = budget.nodes
    result.seconds = time.perf_counter() - started
    return result
