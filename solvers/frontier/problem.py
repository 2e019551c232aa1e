"""The problem the frontier engine solves, and the tables derived from it once.

A `LayeredProblem` is a board of at most 64 cells, jump rules (a, b, c), a group of
cell permutations, start and goal bitboards and a question. From it come, once per
problem and read-only: the rules grouped by the cell the moving token stands on
(`move_tables`), the byte tables that map a board to its key (`key_tables`), the Merson
regions and the token classes that bound the moves still needed (`prune_table`), and the
GF(2) invariants of the rules (`invariants`, G. I. Bell's position classes).
"""

from dataclasses import dataclass, field, replace
from functools import reduce
from operator import or_
from typing import Literal

import numpy as np

from .kernels import regions_bound

#: Bytes a search may keep by default (layers, buffers, the dead table).
MEMORY = 4 << 30


def _frozen(array: np.ndarray) -> np.ndarray:
    """`array`, made read-only (a cached table is shared by every search of a problem)."""
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class LayeredProblem:
    """A search over bitboards the engine runs without knowing the board.

    size: cells (<= 64). rules: int array (R, 3) of cells (a, b, c); a fires when a and b
    are occupied and c is empty, in this order in the depth-first search. group: int
    array (G, size), cell permutations that map rules to rules (identity first); for
    `min_moves` and `solve` they must map the set of starts and the set of goals each to
    itself. starts, goals: tuples of bitboards (Python ints). question: see the module
    docstring. memory: bytes the search may keep. stars: whether the Merson bound counts
    the stars (`merson_regions`; False: the corners and edge pairs alone, the bound of
    the engine before, kept for benchmarks/peg_bench.py). classes: whether the forward
    bound also counts the moves of the token classes (`token_classes`; False: the
    regions alone, kept for benchmarks/peg_bench.py).
    """

    size: int
    rules: np.ndarray
    group: np.ndarray
    starts: tuple[int, ...]
    goals: tuple[int, ...]
    question: Literal["solve", "min_moves", "reachable"] = "min_moves"
    memory: int = MEMORY
    stars: bool = True
    classes: bool = True
    tables: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.size <= 64:
            raise ValueError(f"a board of {self.size} cells does not fit 64 bits")
        if self.question not in ("solve", "min_moves", "reachable"):
            raise ValueError(f"unknown question {self.question!r}")
        if not self.starts or not self.goals:
            raise ValueError("a search needs at least one start and one goal")
        object.__setattr__(self, "rules", _frozen(np.array(self.rules, np.int64).reshape(-1, 3)))
        object.__setattr__(self, "group", _frozen(np.array(self.group, np.int64)))

    def triples(self, indices: list[int]) -> list[tuple[int, int, int]]:
        """The rules at `indices` as (a, b, c) triples of Python ints: a path's answer."""
        return [tuple(int(x) for x in self.rules[r]) for r in indices]


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


def move_tables(problem: LayeredProblem, reverse: bool) -> tuple[np.ndarray, ...]:
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
        tables = (ptr, order, fot, cond, land.astype(np.int64))
        problem.tables[name] = tuple(_frozen(t) for t in tables)
    return problem.tables[name]


def key_tables(problem: LayeredProblem, symmetric: bool = True) -> np.ndarray:
    """The `key_maps` of the problem's group (`symmetric`) or of the identity alone
    (keys are then the boards themselves), built once per problem, read-only."""
    name = "maps" if symmetric else "identity"
    if name not in problem.tables:
        group = problem.group if symmetric else problem.group[:1]
        problem.tables[name] = _frozen(key_maps(np.asarray(group), problem.size))
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


def merson_regions(rules: np.ndarray, size: int) -> tuple[int, list[int], list[int]]:
    """(singles, pairs, stars): the Merson regions of the rules as bitboards. A region
    is a set of cells that no rule jumps over from outside it into outside it (no
    (a, b, c) with b inside, a and c outside); when a region is full at a move boundary,
    the first change to it is the first jump of a move that starts in it (a token cannot
    have landed in the full region). singles: the cells never jumped over (the corners
    of a triangle); pairs: two cells forming a region (adjacent holes along an edge), in
    order, for a greedy packing; stars: a cell with every cell next to it on its lines,
    kept when it is a region holding no pair (the 7-hole hexagons of the triangle's
    interior, from T_7 on: 1 on T_7, 3 on T_8, 6 on T_9, 10 on T_10; they overlap).
    Source: the Merson regions of J. D. Beasley, "The Ins and Outs of Peg Solitaire"
    (1985), used for move counts by G. I. Bell, "Solving Triangular Peg Solitaire", JIS
    11 (2008) 08.4.8, and as the A* heuristic of G. I. Bell, "Diagonal Peg Solitaire",
    INTEGERS 7 (2007) G01."""
    cells = {int(x) for rule in rules for x in rule}
    over: dict[int, list[tuple[int, int]]] = {}
    for a, b, c in rules:
        over.setdefault(int(b), []).append((int(a), int(c)))

    def closed(region: int) -> bool:
        inside = [x for x in range(size) if region >> x & 1]
        return all(region >> a & 1 or region >> c & 1 for x in inside for a, c in over.get(x, ()))

    singles = [x for x in sorted(cells) if x not in over]
    pairs = []
    for x in sorted(over):
        for y in sorted(over):
            if y > x and closed((1 << x) | (1 << y)):
                pairs.append((1 << x) | (1 << y))
    stars: list[int] = []
    for b in sorted(over):
        star = reduce(or_, (1 << a | 1 << c for a, c in over[b]), 1 << b)
        if star not in stars and closed(star) and not any(star & p == p for p in pairs):
            stars.append(star)
    return sum(1 << x for x in singles), pairs, stars[:MAX_STARS]


#: The most stars whose hitting sets are tabulated (2^MAX_STARS entries).
MAX_STARS = 12


def hitting_sets(stars: list[int], size: int) -> np.ndarray:
    """cover[mask]: the fewest cells that meet every star of `mask` (bit i: stars[i]),
    by a dynamic programme over the masks (uint64, shape (2^len(stars),)). Moves start
    on one cell each, so the full stars of a board need at least cover[full] moves."""
    holding = [sum(1 << i for i, star in enumerate(stars) if star >> x & 1) for x in range(size)]
    holding = [h for h in holding if h]
    cover = np.zeros(1 << len(stars), np.uint64)
    for mask in range(1, len(cover)):
        low = mask & -mask
        cover[mask] = 1 + min(int(cover[mask & ~h]) for h in holding if h & low)
    return cover


def prune_table(problem: LayeredProblem, kind: int) -> np.ndarray:
    """The `prune` array of `expand` for one side: kind 1 (forward: full regions need
    a move each, less those a goal may keep full), kind 2 (backward: regions not full
    were changed by a move each since the start, less those a start may not fill).
    Layout (uint64): kind, less, singles, the number of pairs, the pairs, the number of
    stars, the stars, their `hitting_sets`; then on kind 1, when every goal is one token
    and `problem.classes`, the `class_table` (see `kernels.classes_bound`). A goal's one
    token keeps at most one region full (a single; stars and pairs need more), and a
    start's one empty cell lies in regions that one extra move would all meet, so
    `less` is at most 1 on one-token goals and one-vacancy starts."""
    name = f"prune{kind}"
    if name not in problem.tables:
        singles, pairs, stars = merson_regions(problem.rules, problem.size)
        stars = stars if problem.stars else []
        paired = reduce(or_, pairs + stars, 0)  # the union: pairs share cells (T_5 on)
        cells = singles | paired
        if kind == 1:
            less = max(
                (g & singles).bit_count() + (g & paired).bit_count() // 2 for g in problem.goals
            )
        else:
            full = (1 << problem.size) - 1
            less = max((full & ~s & cells).bit_count() for s in problem.starts)
        cover = hitting_sets(stars, problem.size)
        table = [kind, less, singles, len(pairs), *pairs, len(stars), *stars, *cover]
        if kind == 1 and problem.classes and all(g.bit_count() == 1 for g in problem.goals):
            table += class_table(problem)
        problem.tables[name] = _frozen(np.array(table, np.uint64))
    return problem.tables[name]


def token_classes(rules: np.ndarray, size: int) -> list[int]:
    """The classes of cells a token keeps to, as bitboards: the cells joined by a
    rule's a and c (a token moves from a to c), when no rule jumps over a cell of the
    mover's own class (b's class differs from a's); [] when some rule does. On the
    triangle they are the four classes of (row mod 2, column mod 2), since a jump moves
    a peg two steps along a line."""
    parent = list(range(size))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, _, c in rules:
        parent[root(int(a))] = root(int(c))
    if any(root(int(a)) == root(int(b)) for a, b, _ in rules):
        return []
    masks: dict[int, int] = {}
    for x in range(size):
        masks[root(x)] = masks.get(root(x), 0) | 1 << x
    return sorted(masks.values())


def class_table(problem: LayeredProblem) -> list[int]:
    """The token classes' part of the forward `prune_table`: their number n, their cells
    (n bitboards, `token_classes`), for each of the 2^n sets of classes (a bitmask over
    the n classes) the cells its tokens may jump over (the b of every rule whose a lies
    in one of them), and the classes that hold a goal's token (a bitmask); [0] when the
    rules have no classes. `kernels.classes_bound` reads it."""
    classes = token_classes(problem.rules, problem.size)
    if not classes:
        return [0]
    jumps = [0] * len(classes)
    for a, b, _ in problem.rules:
        k = next(k for k, cells in enumerate(classes) if cells >> int(a) & 1)
        jumps[k] |= 1 << int(b)
    reach = [0] * (1 << len(classes))
    for moving in range(1, len(reach)):
        low = (moving & -moving).bit_length() - 1
        reach[moving] = reach[moving & (moving - 1)] | jumps[low]
    goals = reduce(or_, problem.goals, 0)
    finals = sum(1 << k for k, cells in enumerate(classes) if cells & goals)
    return [len(classes), *classes, *reach, finals]


def bound_of(board: int, prune: np.ndarray) -> int:
    """`regions_bound` of one board, in Python."""
    return int(regions_bound(np.uint64(board), prune))


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


def goals_in_class(problem: LayeredProblem) -> tuple[int, ...]:
    """The goals of `problem` in the position class of some start (`invariants`; G. I.
    Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008) 08.4.8): only those can be
    reached, so none left means no start reaches a goal."""
    basis = invariants(problem.rules, problem.size)
    classes = {position_class(s, basis) for s in problem.starts}
    return tuple(g for g in problem.goals if position_class(g, basis) in classes)


def reachable_goals(problem: LayeredProblem) -> LayeredProblem:
    """`problem` with only its `goals_in_class`: a backward search from another class's
    goal never meets a forward position, and on a one-vacancy triangle start two goals
    in three are such. Unchanged when every goal is kept, or none (no goal is reachable:
    the caller says so; a problem needs a goal)."""
    goals = goals_in_class(problem)
    if len(goals) == len(problem.goals) or not goals:
        return problem
    return replace(problem, goals=goals, tables={})
