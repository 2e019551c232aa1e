"""Triangular peg solitaire: jump pegs until one is left, perhaps at a given hole.

Source: seed `003_f55d0c0b3991d583.txt` (T_5, 15 holes, 36 jump rules, backtracking with
pruning of dead positions and their symmetric images; 13 jumps to one peg); fewest moves
over all one-vacancy starts and finishes, OEIS A127500: T_4 → 5, T_5 → 9, T_6 → 9,
T_7 → 12, T_8 → 13 (G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008)
08.4.8, arXiv math/0703865).

Vocabulary:
- hole: numbered 1..T(n), T(n) = n(n+1)/2, row by row from the apex (the seed's layout:
  1 / 2 3 / 4 5 6 / ...); inside the code a hole is its 0-based index and sits at
  (row, col) with 0 <= col <= row < n.
- board: a bitmask, bit i set when hole i holds a peg.
- jump: (from, over, to) along one of the three lattice directions; the peg on `from`
  leaps over the peg on `over` into the empty `to`, and `over` is removed.
- move: one or more consecutive jumps by the same peg.
- symmetry: the 6 maps of the triangle (rotations and reflections), acting on holes.
- solution: the jumps in order; encoded in the catalog as comma-separated `from-to`
  hole numbers, 1-based ("4-1,6-4,..."). For `reachable`, a `Reachable`: the number of
  distinct positions after 0, 1, 2, ... jumps and, for every hole where a single last
  peg can stand (under the finish rule), one jump sequence that ends there as a witness;
  encoded as `L=1,2,8,...|1=4-1,6-4,...|7=...` (layer counts, then `hole=jumps`, holes
  1-based). `verify` replays every witness; the layer counts are re-checked only for
  consistency (first layer 1, last layer = finishing holes when the finish is `any`),
  since recounting them is the enumeration itself.

Questions (`question`, given as `objective` on the command line and in specs, since the
catalog's `objective` column holds the answer), all answered by the compiled bitboard
engine `solvers/frontier.py` (numba) on the problem `problem(...)` builds: the holes,
the jump rules (in the order below), the symmetries that keep the start and the finish,
the start boards and the one-peg goal boards.
- `min_moves` (objective = moves): a breadth-first search by moves from both ends that
  meets in the middle; forward from the start by moves (a peg's chain of jumps, stopped
  anywhere), backward from the finishing one-peg positions by reverse moves (a peg
  undoing jumps in a row); every layer is a sorted uint64 array of keys, the least image
  of a board under the symmetries. No "last peg moved" is kept: going on with the same
  peg is itself one longer move. Layers on both sides without a common position prove
  that no solution has a + b moves (the bound); the first common position is a solution
  with exactly the bound. A depth-first dive first gives an incumbent (what a time limit
  reports) and proves most impossible instances at once.
- `solve` (objective = pegs left, 1): G. I. Bell's position classes (the GF(2)
  invariants of the jump rules: 4 independent parities on the triangle) rule out a
  finish in another class of the start; then a depth-first search in the jump order
  below, with a table of positions (and all their images) proven dead.
- `reachable` (objective = finishing holes): every exact position after 0, 1, ... jumps
  (no symmetry), and a witness per finishing hole found backwards through the layers.

Boards are uint64 bitboards, so side <= MAX_SIDE (T_10: 55 holes).

Symmetry: `canonical(p)` maps the start hole (and a finish hole) to the least image
under the 6 symmetries; a finish hole equal to the start becomes `start`.
Second method: `exhaustive(p)`, a layered enumeration of exact positions in plain
Python dicts (no symmetry, no pruning, no numpy, one jump at a time with the last peg
in the state) that answers all three questions; for small boards (side <= 6).

Measured (this 2-core machine, shared; `benchmarks/peg_bench.py`, README.md "Peg
solitaire sizes"): fewest moves over all starts (OEIS A127500) T_4..T_6 = 5, 9, 9 in
well under a second together; T_7 = 12 in 7-9 s and 0.3 GB; T_8 = 13 found and
proven in 446 s and 2.5 GB (benchmarks/README.md); `solve` from every start class of
T_8, finish anywhere or on the start hole, in 0.1 s in all.

Roads not taken: a MIP over time-indexed jumps as the second method (the enumeration is
simpler and also answers `reachable`); the Python uniform-cost search over (board, last
peg) of before issue 6 (437 s for T_6's five start classes) and its Python depth-first
search for sides 9-12 (deleted in issue 13: the compiled engine covers them up to
T_10); the layered numpy programme over (board, last peg) by single jumps of issue 6
(T_7 in 164 s and 1.3 GB, T_8 out of 6 GiB after 77 M states: every intermediate
position of every move is a state, where layers by whole moves hold far fewer);
meeting in the middle through the complement board (the reverse game is the game on the
complement for single jumps, but it breaks a move into jumps by different pegs);
pagoda functions as cuts (the Merson regions sufficed for T_8; the next step for T_9);
counting positions up to symmetry in `reachable` (exact positions are what a player
counts).
"""

from functools import lru_cache
from typing import Literal, NamedTuple

import numpy as np
from pydantic import AliasChoices, Field, field_validator, model_validator

from puzzlesweep.core import InvalidSolution
from puzzlesweep.core import Params as _Params
from puzzlesweep.solvers import frontier
from puzzlesweep.solvers.frontier import LayeredProblem

NAME = "peg_solitaire"
SOLVERS = ("frontier",)

Jump = tuple[int, int, int]  # (from, over, to), 0-based hole indices


class Reachable(NamedTuple):
    """The answer to `reachable`: layers[j] = distinct positions after j jumps;
    finishes = ((hole, witness jumps), ...) sorted by hole, holes 0-based."""

    layers: tuple[int, ...]
    finishes: tuple[tuple[int, tuple[Jump, ...]], ...]


Solution = tuple[Jump, ...] | Reachable

DIRECTIONS = [(0, 1), (1, 0), (1, 1), (0, -1), (-1, 0), (-1, -1)]
#: The largest side whose board fits the 64-bit bitboards of the engine (T_10: 55 holes).
MAX_SIDE = 10


def holes(side: int) -> int:
    """T(side) = side(side+1)/2, the number of holes."""
    return side * (side + 1) // 2


class Params(_Params):
    """side: holes on a side (4..10: boards of at most 64 holes); start: the empty hole
    (1..T(side)); finish: `any`, `start` or a hole number where the last peg must stand;
    question: `solve` or `min_moves` or `reachable` (accepted as `objective`)."""

    side: int
    start: int
    finish: str = "any"
    question: Literal["solve", "min_moves", "reachable"] = Field(
        "solve", validation_alias=AliasChoices("objective", "question")
    )

    @field_validator("side")
    @classmethod
    def _side(cls, side: int) -> int:
        if not 4 <= side <= MAX_SIDE:
            raise ValueError(f"side must lie in 4..{MAX_SIDE}")
        return side

    @field_validator("finish", mode="before")
    @classmethod
    def _finish(cls, finish: object) -> str:
        return str(finish)

    @model_validator(mode="after")
    def _holes(self) -> "Params":
        total = holes(self.side)
        if not 1 <= self.start <= total:
            raise ValueError(f"start hole {self.start} is not on T_{self.side} (1..{total})")
        if self.finish not in ("any", "start") and not (
            self.finish.isdigit() and 1 <= int(self.finish) <= total
        ):
            raise ValueError(f"finish must be any, start or a hole in 1..{total}")
        return self

    @property
    def finish_hole(self) -> int | None:
        """The 0-based hole where the last peg must stand, or None for any."""
        if self.finish == "any":
            return None
        return self.start - 1 if self.finish == "start" else int(self.finish) - 1


def expand(point: dict) -> list[dict]:
    """`start="all"` → every hole of the board, 1..T(side)."""
    if point.get("start") == "all":
        return [{**point, "start": h} for h in range(1, holes(point["side"]) + 1)]
    return [point]


@lru_cache(maxsize=16)
def geometry(side: int) -> tuple[tuple[tuple[int, int], ...], tuple[Jump, ...]]:
    """(the (row, col) of every hole, every jump rule); T_5 has 36 jumps."""
    places = tuple((r, c) for r in range(side) for c in range(r + 1))
    index = {rc: i for i, rc in enumerate(places)}
    jumps = tuple(
        (index[(r, c)], index[(r + dr, c + dc)], index[(r + 2 * dr, c + 2 * dc)])
        for r, c in places
        for dr, dc in DIRECTIONS
        if (r + 2 * dr, c + 2 * dc) in index
    )
    return places, jumps


@lru_cache(maxsize=16)
def symmetries(side: int) -> tuple[tuple[int, ...], ...]:
    """The 6 symmetries of T_side as hole permutations (identity first). A hole (r, c)
    has barycentric coordinates (c, r - c, side - 1 - r); symmetries permute them."""
    places, _ = geometry(side)
    index = {rc: i for i, rc in enumerate(places)}
    perms = []
    for order in ((0, 1, 2), (1, 0, 2), (0, 2, 1), (2, 1, 0), (1, 2, 0), (2, 0, 1)):
        perm = []
        for r, c in places:
            bary = (c, r - c, side - 1 - r)
            x, _, z = (bary[i] for i in order)
            perm.append(index[(side - 1 - z, x)])
        perms.append(tuple(perm))
    return tuple(perms)


def _symmetry(p: Params) -> tuple[tuple[int, ...], Params]:
    """(the symmetry g taking p to its canonical form, that form)."""
    target = p.finish_hole
    finish = "start" if target == p.start - 1 else p.finish

    def image(g: tuple[int, ...]) -> tuple[int, int]:
        return g[p.start - 1], -1 if finish in ("any", "start") else g[target]

    g = min(symmetries(p.side), key=image)
    start, hole = image(g)
    finish = finish if hole < 0 else str(hole + 1)
    return g, p.model_copy(update={"start": start + 1, "finish": finish})


def canonical(p: Params) -> Params:
    """The least image of `p` under the 6 symmetries of the triangle: the start hole (then
    the finish hole) with the smallest number; a finish hole equal to the start becomes
    `start`. Equivalent instances have equal canonical forms (corners of T_5: 1, 11, 15
    all become start 1)."""
    return _symmetry(p)[1]


def from_canonical(p: Params, solution: Solution) -> Solution:
    """A solution of `canonical(p)` carried back to `p` by the inverse symmetry."""
    g, _ = _symmetry(p)
    back = {image: hole for hole, image in enumerate(g)}

    def jumps(path):
        return tuple((back[f], back[o], back[t]) for f, o, t in path)

    if isinstance(solution, Reachable):
        finishes = sorted((back[h], jumps(path)) for h, path in solution.finishes)
        return Reachable(solution.layers, tuple(finishes))
    return jumps(solution)


@lru_cache(maxsize=16)
def ordered_jumps(side: int) -> tuple[Jump, ...]:
    """The jump rules in the order the depth-first search tries them: first jumps that do
    not land in a corner, and among those jumps that start on the edge of the board
    (G. I. Bell's rule of thumb, "don't jump into a corner or out of the center",
    recmath.org/pegsolitaire). Measured: T_8 from holes 1, 2, 4, 5 all solved within 3 s
    (hole 4 hit a 20 s limit in row order)."""
    places, jumps = geometry(side)

    def edge(hole: int) -> bool:
        r, c = places[hole]
        return r == side - 1 or c in (0, r)

    corners = {0, holes(side) - side, holes(side) - 1}
    return tuple(sorted(jumps, key=lambda j: (j[2] in corners, not edge(j[0]))))


def problem(
    side: int,
    starts: list[int],
    finish: int | None,
    question: str,
    memory: int = frontier.MEMORY,
) -> LayeredProblem:
    """The engine's problem for T_side from the 0-based holes `starts` (one empty hole
    each; several for the all-starts question of A127500), the last peg on the 0-based
    hole `finish` or anywhere (None), `question` solve | min_moves | reachable, keeping
    at most `memory` bytes of states. The symmetries used are those of the triangle that
    map the set of starts to itself and fix the finish hole (none for `reachable`, which
    counts exact positions). Raises ValueError for side > MAX_SIDE."""
    if side > MAX_SIDE:
        raise ValueError(f"side {side} does not fit 64-bit boards (at most {MAX_SIDE})")
    size = holes(side)
    full = (1 << size) - 1
    group = [
        g
        for g in symmetries(side)
        if {g[s] for s in starts} == set(starts) and (finish is None or g[finish] == finish)
    ]
    if question == "reachable":
        group = group[:1]
    goals = range(size) if finish is None else [finish]
    return LayeredProblem(
        size=size,
        rules=np.array(ordered_jumps(side), np.int64),
        group=np.array(group, np.int64),
        starts=tuple(full ^ (1 << s) for s in starts),
        goals=tuple(1 << h for h in goals),
        question=question,
        memory=memory,
    )


def search(p: Params) -> LayeredProblem:
    """The engine's problem for `p` (see `problem`), from its one start hole."""
    return problem(p.side, [p.start - 1], p.finish_hole, p.question)


def from_search(p: Params, raw) -> Solution:
    """The family solution from the engine's raw answer: the jump list, carried by the
    symmetry that takes its start to `p.start` (the search identifies symmetric states,
    so its path may start from an image); for `reachable`, the engine's
    {"layers", "goals"} as a `Reachable`."""
    if p.question == "reachable":
        finishes = sorted((board.bit_length() - 1, tuple(path)) for board, path in raw["goals"])
        return Reachable(tuple(raw["layers"]), tuple(finishes))
    path = tuple(raw)
    target = p.finish_hole
    for g in symmetries(p.side):
        if path and g[path[0][2]] == p.start - 1 and (target is None or g[target] == target):
            return tuple((g[f], g[o], g[t]) for f, o, t in path)
    return path


def exhaustive(p: Params) -> tuple[float | None, Solution | None]:
    """The answer to `p.question` by a second, independent method: a layered enumeration
    of exact positions (board, hole the last jump landed on), keeping for each the fewest
    moves and one parent; no symmetry, no pruning. Returns (objective, solution) as the
    search would, (None, None) when `solve` or `min_moves` has no solution.

    Raises ValueError for side > 6 (the enumeration is for small boards)."""
    if p.side > 6:
        raise ValueError("exhaustive enumeration is for side <= 6")
    size = holes(p.side)
    _, jumps = geometry(p.side)
    target = p.finish_hole
    start = ((1 << size) - 1) ^ (1 << (p.start - 1))
    layer: dict[tuple[int, int], tuple[int, tuple | None, Jump | None]] = {
        (start, -1): (0, None, None)
    }
    history = [layer]
    counts = [1]
    while True:
        following: dict = {}
        for state, (cost, _, _) in layer.items():
            board, last = state
            for f, o, t in jumps:
                if board >> f & 1 and board >> o & 1 and not board >> t & 1:
                    child = (board ^ (1 << f | 1 << o | 1 << t), t)
                    value = cost + (f != last)
                    if child not in following or value < following[child][0]:
                        following[child] = (value, state, (f, o, t))
        if not following:
            break
        history.append(following)
        counts.append(len({board for board, _ in following}))
        layer = following

    def path(depth: int, state) -> tuple[Jump, ...]:
        found = []
        while depth > 0:
            _, state, jump = history[depth][state]
            found.append(jump)
            depth -= 1
        return tuple(found[::-1])

    depth = size - 2  # one peg left after T - 2 jumps
    goals = {} if depth >= len(history) else history[depth]
    ends = {}  # hole -> (fewest moves, state)
    for state, (cost, _, _) in goals.items():
        hole = state[0].bit_length() - 1
        if (target is None or hole == target) and (hole not in ends or cost < ends[hole][0]):
            ends[hole] = (cost, state)
    if p.question == "reachable":
        finishes = tuple((h, path(depth, ends[h][1])) for h in sorted(ends))
        return float(len(ends)), Reachable(tuple(counts), finishes)
    if not ends:
        return None, None
    cost, state = min(ends.values())
    return (1.0 if p.question == "solve" else float(cost)), path(depth, state)


def details(p: Params, solution: Solution) -> dict:
    """Extra fields for the CLI's `--json`: for `reachable`, {"layers": positions after
    0, 1, ... jumps, "finishing_holes": 1-based holes}; otherwise {"moves": the move list,
    each move as its path of 1-based holes "7-2-9", "jumps": the number of jumps}."""
    if isinstance(solution, Reachable):
        return {
            "layers": list(solution.layers),
            "finishing_holes": [h + 1 for h, _ in solution.finishes],
        }
    paths: list[list[int]] = []
    for i, (f, _, t) in enumerate(solution):
        if i == 0 or solution[i - 1][2] != f:
            paths.append([f + 1])
        paths[-1].append(t + 1)
    return {"moves": ["-".join(map(str, path)) for path in paths], "jumps": len(solution)}


def moves(solution: Solution) -> int:
    """The number of moves: maximal runs of jumps in which each starts where the last
    landed."""
    return sum(i == 0 or j[0] != solution[i - 1][2] for i, j in enumerate(solution))


def verify(p: Params, solution: Solution) -> int:
    """Replays the jumps from the start position; returns pegs left (question `solve`)
    or moves (`min_moves`). Raises InvalidSolution on an illegal jump, more than one peg
    left, or a last peg off the finish hole. For `reachable`, replays every witness,
    checks that it ends on its hole and that the layer counts are consistent, and
    returns the number of finishing holes."""
    if p.question == "reachable" or isinstance(solution, Reachable):
        return _verify_reachable(p, solution)
    return _replay(p, solution)


def _verify_reachable(p: Params, answer: Solution) -> int:
    if p.question != "reachable" or not isinstance(answer, Reachable):
        raise InvalidSolution("a reachable answer belongs to question reachable only")
    layers, size = answer.layers, holes(p.side)
    if not layers or layers[0] != 1 or len(layers) > size - 1 or min(layers) < 1:
        raise InvalidSolution(f"layer counts {list(layers)} are not from a start position")
    ends = [h for h, _ in answer.finishes]
    if len(set(ends)) != len(ends):
        raise InvalidSolution("a finishing hole is listed twice")
    if ends and len(layers) != size - 1:
        raise InvalidSolution("finishing holes need layers down to one peg")
    if p.finish == "any" and len(layers) == size - 1 and layers[-1] != len(ends):
        raise InvalidSolution(f"{layers[-1]} one-peg positions but {len(ends)} holes")
    for hole, path in answer.finishes:
        single = p.model_copy(update={"finish": str(hole + 1), "question": "solve"})
        if p.finish_hole not in (None, hole):
            raise InvalidSolution(f"hole {hole + 1} breaks the finish rule {p.finish}")
        _replay(single, path)
    return len(ends)


def _replay(p: Params, solution: tuple[Jump, ...]) -> int:
    _, jumps = geometry(p.side)
    rules = set(jumps)
    board = ((1 << holes(p.side)) - 1) ^ (1 << (p.start - 1))
    for n, (f, o, t) in enumerate(solution, 1):
        if (f, o, t) not in rules or not (board >> f & 1 and board >> o & 1) or board >> t & 1:
            raise InvalidSolution(f"jump {n} ({f + 1}-{t + 1}) is not legal")
        board ^= 1 << f | 1 << o | 1 << t
    if board.bit_count() != 1:
        raise InvalidSolution(f"{board.bit_count()} pegs are left, not 1")
    if p.finish_hole is not None and board != 1 << p.finish_hole:
        raise InvalidSolution(f"the last peg is not on hole {p.finish_hole + 1}")
    return 1 if p.question == "solve" else moves(solution)


def encode(solution: Solution) -> str:
    """Comma-separated `from-to` hole numbers, 1-based ("4-1,6-4"); a `Reachable` as
    `L=` layer counts then `|hole=jumps` per finishing hole ("L=1,2|1=4-1,6-4")."""
    if isinstance(solution, Reachable):
        parts = ["L=" + ",".join(map(str, solution.layers))]
        parts += [f"{h + 1}={encode(path)}" for h, path in solution.finishes]
        return "|".join(parts)
    return ",".join(f"{f + 1}-{t + 1}" for f, _, t in solution)


def decode(text: str) -> Solution:
    """The inverse of `encode`: the jumped-over hole is the one between from and to.
    Raises ValueError on text that is not an encoding."""
    if text.startswith("L="):
        head, *rest = text.split("|")
        finishes = []
        for item in rest:
            hole, _, path = item.partition("=")
            finishes.append((int(hole) - 1, decode(path)))
        return Reachable(tuple(int(c) for c in head[2:].split(",")), tuple(finishes))
    jumps = []
    for item in filter(None, text.split(",")):
        f, t = (int(h) - 1 for h in item.split("-"))
        side = 1
        while holes(side) <= max(f, t):
            side += 1
        places, _ = geometry(max(side, 2))
        (fr, fc), (tr, tc) = places[f], places[t]
        jumps.append((f, places.index(((fr + tr) // 2, (fc + tc) // 2)), t))
    return tuple(jumps)


def _picture(side: int, board: int) -> list[str]:
    places, _ = geometry(side)
    rows = [[] for _ in range(side)]
    for i, (r, _) in enumerate(places):
        rows[r].append("x" if board >> i & 1 else ".")
    return [" " * (side - 1 - r) + " ".join(row) for r, row in enumerate(rows)]


def render(p: Params, solution: Solution) -> str:
    """The board ('x' a peg, '.' a hole) at the start and after every move; for
    `reachable`, the layer counts and the finishing holes marked 'o'."""
    if isinstance(solution, Reachable):
        ends = {h for h, _ in solution.finishes}
        places, _ = geometry(p.side)
        rows = [[] for _ in range(p.side)]
        for i, (r, _) in enumerate(places):
            rows[r].append("o" if i in ends else ".")
        board = [" " * (p.side - 1 - r) + " ".join(row) for r, row in enumerate(rows)]
        head = [
            "positions after each jump: " + ", ".join(map(str, solution.layers)),
            "holes where the last peg can stand: "
            + (", ".join(str(h + 1) for h in sorted(ends)) or "none"),
        ]
        return "\n".join(head + board)
    board = ((1 << holes(p.side)) - 1) ^ (1 << (p.start - 1))
    blocks = [[f"start, hole {p.start} empty", *_picture(p.side, board)]]
    move: list[Jump] = []
    for i, (f, o, t) in enumerate(solution):
        board ^= 1 << f | 1 << o | 1 << t
        move.append((f, o, t))
        if i + 1 == len(solution) or solution[i + 1][0] != t:
            path = "-".join([str(move[0][0] + 1)] + [str(j[2] + 1) for j in move])
            blocks.append([f"move {len(blocks)}: {path}", *_picture(p.side, board)])
            move = []
    return "\n\n".join("\n".join(block) for block in blocks)


def _draw_board(ax, side: int, board: int, marked=(), path=()) -> None:
    """Holes as rings, pegs as discs, `marked` holes ringed green, `path` as arrows."""
    places, _ = geometry(side)
    xy = [(c - r / 2, -r * 0.866) for r, c in places]
    ax.set_xlim(-side / 2 - 0.2, side / 2 - 0.3)
    ax.set_ylim(-(side - 1) * 0.866 - 0.6, 0.6)
    for i, (x, y) in enumerate(xy):
        peg = board >> i & 1
        ax.scatter(
            [x],
            [y],
            s=160,
            facecolor="#8b4513" if peg else "white",
            edgecolor="green" if i in marked else "black",
            linewidth=3 if i in marked else 1,
            zorder=2,
        )
        ax.text(x, y - 0.36, str(i + 1), ha="center", va="center", fontsize=6, color="grey")
    for f, _, t in path:
        (x0, y0), (x1, y1) = xy[f], xy[t]
        ax.annotate(
            "",
            (x1, y1),
            (x0, y0),
            zorder=3,
            arrowprops={"arrowstyle": "->", "color": "blue", "lw": 1.5},
        )


def picture(p: Params, solution: Solution):
    """A matplotlib Figure: the board at the start and after every move (pegs brown,
    empty holes white, the move's jumps as blue arrows, holes numbered 1-based); for
    `reachable`, the board with every finishing hole ringed green and the number of
    positions after each jump as a bar chart."""
    from puzzlesweep.puzzles._draw import panels

    start = ((1 << holes(p.side)) - 1) ^ (1 << (p.start - 1))
    if isinstance(solution, Reachable):
        ends = [h for h, _ in solution.finishes]
        figure, (board_ax, bars) = panels(
            2,
            f"T_{p.side}, start {p.start}: last peg can stand on "
            f"{', '.join(str(h + 1) for h in ends) or 'no hole'}",
            size=3.2,
        )
        _draw_board(board_ax, p.side, start, marked=ends)
        bars.set_axis_on()
        bars.set_aspect("auto")
        bars.bar(range(len(solution.layers)), solution.layers, color="#8b4513")
        bars.set_xlabel("jumps")
        bars.set_ylabel("distinct positions")
        return figure
    moves_made: list[list[Jump]] = []
    for i, jump in enumerate(solution):
        if i == 0 or solution[i - 1][2] != jump[0]:
            moves_made.append([])
        moves_made[-1].append(jump)
    figure, axes = panels(
        len(moves_made) + 1,
        f"T_{p.side}, start {p.start}: {len(moves_made)} moves, {len(solution)} jumps",
        size=2.0,
    )
    board = start
    _draw_board(axes[0], p.side, board)
    axes[0].set_title("start", fontsize=9)
    for ax, move in zip(axes[1:], moves_made, strict=True):
        for f, o, t in move:
            board ^= 1 << f | 1 << o | 1 << t
        _draw_board(ax, p.side, board, path=move)
        ax.set_title("-".join([str(move[0][0] + 1)] + [str(t + 1) for _, _, t in move]), fontsize=9)
    return figure
