"""Domination: the fewest chess pieces that occupy or attack every square of a board.

Source: seed `004_7d7580379b2fab1e.txt` (8×8 knights → 12, a set-cover MIP); knights on
n×n boards, OEIS A006075: n = 1..10 → 1, 4, 4, 4, 5, 8, 10, 12, 14, 16.

Vocabulary (squares row-major, 0-based, square = row * cols + col):
- piece: knight, king, queen, rook or bishop; it attacks along its moves on the empty
  board (sliding pieces are not blocked: the convention of the literature).
- variant: `dominating` (every square occupied or attacked), `total` (every square,
  occupied or not, attacked by another piece), `independent` (dominating, and no piece
  attacks another).
- solution: the sorted squares holding a piece; encoded in the catalog as
  comma-separated integers ("9,14,21").

MIP: x[s] = 1 if a piece stands on s; for every square t, Σ_{s covers t} x[s] >= 1 where
s covers t if s attacks t, or s = t except in the total variant; independent adds
x[s] + x[t] <= 1 for every attacking pair.

Symmetry: every piece's graph is symmetric under transposing the board, so
`canonical(p)` puts the shorter side first (8×5 and 5×8 are one instance).
Second method: `exhaustive(p)`, iterative deepening over the number of pieces that
branches on the squares covering the first square left uncovered (skipping squares
attacked by a placed piece in the independent variant); for boards of at most 36 squares.

Measured (issue 6, benchmarks/README.md): HiGHS with one thread proves knights n×n for
n = 1..16 (A006075) in 494 s in all, 16×16 (40) in 281 s; its own symmetry detection
(2 generators of the square's 8 symmetries) is on by default; nothing tried did better.
Issue 12: SCIP proves 14..17 in 0.29-0.50 of HiGHS's time (17×17: 407 s, 15,244 nodes),
so `auto_solver` picks it for knights from 14×14; `symmetries(p)` and
`exhaustive_count(p)` serve the counts of optima (OEIS A006076).

Roads not taken: symmetry-breaking rows (`symmetry_rows`: half-counts under the
reflections, the diagonal under the transpose; measured no faster than HiGHS's own
detection on knights 12..14, kept behind `model(p, symmetry=True)`); starting from
`greedy_start` by default (16 knights on 8×8, 48 on 16×16; it cut 12×12 from 123 nodes
to 9 but left 13 and 14 unchanged, and the proven optimum as a start cut 14×14 from
5,577 nodes to 468 but made 13×13 need 253 instead of 5: too erratic to choose on);
local cover cuts Σ_{s covers some t∈R} x_s >= γ(R) for 3×3 blocks, corner blocks and
edge strips R by default (the LP bound stayed 21.42 on 12×12 and 28.92 on 14×14; in
issue 12 the corner and border cuts of `region_cuts` cut 14×14's nodes to 3,440 from
5,577 with HiGHS and to 248 from 841 with SCIP, kept behind `model(p, regions=True)`
until more sizes are measured: benchmarks/README.md); the piece's graph with blocking
(sliding pieces stopped by other pieces), which the literature does not use.
"""

import math
from functools import lru_cache
from typing import Literal

from pydantic import field_validator

from puzzlesweep.core import InvalidSolution
from puzzlesweep.core import Params as _Params
from puzzlesweep.solvers.highs import MipModel

NAME = "domination"
SOLVERS = ("auto", "highs", "scip")
#: The dashboard's axes: the size parameter on x (a list counts its product) and the
#: parameters whose values make one series each.
AXES = ("rows", ("piece", "variant"))

Solution = tuple[int, ...]  # sorted occupied squares

LEAPS = {
    "knight": [(1, 2), (2, 1), (-1, 2), (-2, 1), (1, -2), (2, -1), (-1, -2), (-2, -1)],
    "king": [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc],
}
RAYS = {
    "rook": [(0, 1), (1, 0), (0, -1), (-1, 0)],
    "bishop": [(1, 1), (1, -1), (-1, 1), (-1, -1)],
}
RAYS["queen"] = RAYS["rook"] + RAYS["bishop"]
SYMBOLS = {"knight": "N", "king": "K", "queen": "Q", "rook": "R", "bishop": "B"}


class Params(_Params):
    """piece: knight | king | queen | rook | bishop; rows, cols: board size (1..64);
    variant: dominating | total | independent."""

    piece: Literal["knight", "king", "queen", "rook", "bishop"] = "knight"
    rows: int
    cols: int
    variant: Literal["dominating", "total", "independent"] = "dominating"

    @field_validator("rows", "cols")
    @classmethod
    def _size(cls, size: int) -> int:
        if not 1 <= size <= 64:
            raise ValueError("board sides must lie in 1..64")
        return size


def auto_solver(p: Params) -> str:
    """The engine `auto` runs (canonical p), from benchmarks/README.md (mip_bench.py
    --only auto, knights_bench.py): SCIP for knights dominating boards of at least
    AUTO_SCIP_SQUARES squares, where it proved 14×14..16×16 in 0.29-0.41 of HiGHS's
    time; HiGHS elsewhere (it was as fast or faster on knights 8..13, 8×13, queens 6..10,
    kings 12, the total variant; SCIP won 12×12 and the independent variant by less
    than a factor 2)."""
    big = p.rows * p.cols >= AUTO_SCIP_SQUARES
    return "scip" if big and p.piece == "knight" and p.variant == "dominating" else "highs"


#: The board size from which `auto` picks SCIP for knights (14×14).
AUTO_SCIP_SQUARES = 196


def expand(point: dict) -> list[dict]:
    """Grid points need no family-specific expansion here."""
    return [point]


def canonical(p: Params) -> Params:
    """p with rows <= cols (the transposed board when rows > cols)."""
    if p.rows <= p.cols:
        return p
    return p.model_copy(update={"rows": p.cols, "cols": p.rows})


def from_canonical(p: Params, solution: Solution) -> Solution:
    """Squares of `canonical(p)` carried back to p (transposed when p has rows > cols)."""
    if p.rows <= p.cols:
        return tuple(solution)
    width = p.rows  # the canonical board has p.cols rows of p.rows squares
    return tuple(sorted((s % width) * p.cols + s // width for s in solution))


@lru_cache(maxsize=256)
def attacks(piece: str, rows: int, cols: int) -> tuple[frozenset[int], ...]:
    """For each square, the set of squares a piece standing there attacks."""
    table = []
    for r in range(rows):
        for c in range(cols):
            hit = set()
            for dr, dc in LEAPS.get(piece, []):
                if 0 <= r + dr < rows and 0 <= c + dc < cols:
                    hit.add((r + dr) * cols + c + dc)
            for dr, dc in RAYS.get(piece, []):
                rr, cc = r + dr, c + dc
                while 0 <= rr < rows and 0 <= cc < cols:
                    hit.add(rr * cols + cc)
                    rr, cc = rr + dr, cc + dc
            table.append(frozenset(hit))
    return tuple(table)


def coverers(p: Params) -> list[list[int]]:
    """For each square t, the squares whose piece covers t under the variant."""
    table = attacks(p.piece, p.rows, p.cols)  # attacks are symmetric for these pieces
    own = p.variant != "total"
    return [sorted(table[t] | ({t} if own else set())) for t in range(p.rows * p.cols)]


def model(
    p: Params, *, start: bool = False, symmetry: bool = False, regions: bool | None = None
) -> MipModel:
    """The set-cover MIP of the module docstring; column s is square s. `start` hands
    the engine the greedy cover of `greedy_start` (checked by `verify`), `symmetry` adds
    the rows of `symmetry_rows`, `regions` the rows of `region_cuts`. Start and symmetry
    rows are off by default because neither made knights faster (benchmarks/README.md);
    region cuts (`regions=None`) are on for knights dominating boards of at least
    REGION_MIN_SQUARES squares, where they cut SCIP's nodes on 14×14 and 15×15 and
    HiGHS's on 14×14 (measured: benchmarks/README.md), off elsewhere."""
    if regions is None:
        big = p.rows * p.cols >= REGION_MIN_SQUARES
        regions = big and p.piece == "knight" and p.variant == "dominating"
    m = MipModel([], [], [], [])
    m.add_columns(p.rows * p.cols, 1.0, 0.0, 1.0, True)
    for cover in coverers(p):
        m.add_row(cover, [1.0] * len(cover), 1.0, float("inf"))
    if p.variant == "independent":
        for s, hit in enumerate(attacks(p.piece, p.rows, p.cols)):
            for t in sorted(hit):
                if s < t:
                    m.add_row([s, t], [1.0, 1.0], 0.0, 1.0)
    if symmetry:
        for more, fewer in symmetry_rows(p.rows, p.cols):
            m.add_row(more + fewer, [1.0] * len(more) + [-1.0] * len(fewer), 0.0, math.inf)
    if regions:
        for cols_, least in region_cuts(p):
            m.add_row(cols_, [1.0] * len(cols_), float(least), math.inf)
    if start and p.variant == "dominating":
        placed = greedy_start(p)
        if symmetry:  # HiGHS silently drops a start that breaks a row
            placed = symmetric_image(p.rows, p.cols, placed)
        verify(p, placed)  # a wrong start must never reach the solver
        placed = set(placed)
        m.start = [1.0 if s in placed else 0.0 for s in range(p.rows * p.cols)]
    return m


#: Region cuts: corner blocks a×a for a in REGION_CORNERS, and the border strips of
#: these depths along each side (full length).
REGION_CORNERS, REGION_DEPTHS = (3, 4, 5, 6), (1, 2, 3)
#: The board size from which `model` adds the region cuts by default (14×14).
REGION_MIN_SQUARES = 196


def regions(p: Params) -> list[list[int]]:
    """The corner blocks and border strips of the board (`REGION_CORNERS`,
    `REGION_DEPTHS`) that are strict sub-regions of it, as lists of squares."""
    r, c = p.rows, p.cols
    block = lambda r0, r1, c0, c1: [i * c + j for i in range(r0, r1) for j in range(c0, c1)]  # noqa: E731
    found = set()
    for a in REGION_CORNERS:
        if a < r and a < c:
            for r0, c0 in ((0, 0), (0, c - a), (r - a, 0), (r - a, c - a)):
                found.add(tuple(block(r0, r0 + a, c0, c0 + a)))
    for d in REGION_DEPTHS:
        if d < r:
            found.update({tuple(block(0, d, 0, c)), tuple(block(r - d, r, 0, c))})
        if d < c:
            found.update({tuple(block(0, r, 0, d)), tuple(block(0, r, c - d, c))})
    return [list(region) for region in sorted(found)]


def region_cuts(p: Params) -> list[tuple[list[int], int]]:
    """(squares that cover some square of R, γ(R)) for every region R of `regions`:
    γ(R) is the fewest pieces, anywhere on the board, that cover every square of R
    (proven by a small HiGHS MIP over those squares; the variant's covering rule, the
    independent variant treated as dominating, so γ(R) is a valid lower limit). Every
    solution covers R, so Σ x over those squares >= γ(R) cuts off no solution."""
    from puzzlesweep.solvers import Limits, highs

    cover = coverers(p)
    cuts = []
    for region in regions(p):
        near = sorted({s for t in region for s in cover[t]})
        index = {s: i for i, s in enumerate(near)}
        small = MipModel([], [], [], [])
        small.add_columns(len(near), 1.0, 0.0, 1.0, True)
        for t in region:
            small.add_row([index[s] for s in cover[t]], [1.0] * len(cover[t]), 1.0, math.inf)
        result = highs.solve(small, Limits(30.0))
        if result.status == "optimal":
            cuts.append((near, round(result.objective)))
    return cuts


def greedy_start(p: Params) -> Solution:
    """A dominating set (any variant's covering rule; not checked for independence): put
    a piece on the square that covers most uncovered squares (lowest index on ties) until
    all are covered, then lift, from the last placed, every piece whose squares are all
    covered twice. Knights: 16 on 8×8, 28 on 12×12, 48 on 16×16 (optima 12, 24, 40)."""
    cover = coverers(p)
    covers = [set() for _ in cover]  # covers[s]: the squares a piece on s covers
    for t, sources in enumerate(cover):
        for s in sources:
            covers[s].add(t)
    uncovered, placed = set(range(len(cover))), []
    while uncovered:
        s = max(range(len(covers)), key=lambda s: (len(covers[s] & uncovered), -s))
        if not covers[s] & uncovered:
            raise ValueError("some square has nothing that covers it")
        placed.append(s)
        uncovered -= covers[s]
    times = [0] * len(cover)
    for s in placed:
        for t in covers[s]:
            times[t] += 1
    for s in reversed(list(placed)):
        if all(times[t] >= 2 for t in covers[s]):
            placed.remove(s)
            for t in covers[s]:
                times[t] -= 1
    return tuple(sorted(placed))


def symmetry_rows(rows: int, cols: int) -> list[tuple[list[int], list[int]]]:
    """Symmetry-breaking rows as pairs (more, fewer): Σ x over `more` >= Σ x over `fewer`.
    The top half of the board holds at least as many pieces as the bottom half, the left
    half as the right; on a square board also the squares above the diagonal as those
    below. Every solution has an image satisfying them all (mirror left-right, then
    top-bottom if needed, then transpose if needed: the transpose carries the halves onto
    each other), so the optimum is unchanged."""
    squares = [(r, c) for r in range(rows) for c in range(cols)]
    pick = lambda keep: [r * cols + c for r, c in squares if keep(r, c)]  # noqa: E731
    found = [
        (pick(lambda r, c: r < rows // 2), pick(lambda r, c: r >= rows - rows // 2)),
        (pick(lambda r, c: c < cols // 2), pick(lambda r, c: c >= cols - cols // 2)),
    ]
    if rows == cols:
        found.append((pick(lambda r, c: r < c), pick(lambda r, c: r > c)))
    return found


def symmetric_image(rows: int, cols: int, placed: Solution) -> Solution:
    """The image of `placed` under the board symmetry that makes it satisfy every row of
    `symmetry_rows(rows, cols)`: mirrored left-right, then top-bottom, when the second
    half holds more pieces, then transposed (square boards) when more lie below the
    diagonal than above."""
    cells = [divmod(s, cols) for s in placed]
    if sum(c < cols // 2 for _, c in cells) < sum(c >= cols - cols // 2 for _, c in cells):
        cells = [(r, cols - 1 - c) for r, c in cells]
    if sum(r < rows // 2 for r, _ in cells) < sum(r >= rows - rows // 2 for r, _ in cells):
        cells = [(rows - 1 - r, c) for r, c in cells]
    if rows == cols and sum(r < c for r, c in cells) < sum(r > c for r, c in cells):
        cells = [(c, r) for r, c in cells]
    return tuple(sorted(r * cols + c for r, c in cells))


def symmetries(p: Params) -> list[list[int]]:
    """The board's symmetries as square permutations (image[s] = the square s goes to):
    the identity, the two mirrors and the half turn (4), and on a square board also the
    transpose, the anti-transpose and the quarter turns (8). Every piece's attacks are
    preserved by them, so they map covers to covers of the same size (a group: what
    `solvers.scip.count` needs to count covers up to symmetry, OEIS A006076)."""
    r, c = p.rows, p.cols
    maps = [
        lambda i, j: (i, j),
        lambda i, j: (r - 1 - i, j),
        lambda i, j: (i, c - 1 - j),
        lambda i, j: (r - 1 - i, c - 1 - j),
    ]
    if r == c:
        maps += [
            lambda i, j: (j, i),
            lambda i, j: (c - 1 - j, i),
            lambda i, j: (j, r - 1 - i),
            lambda i, j: (c - 1 - j, r - 1 - i),
        ]
    return [[a * c + b for a, b in (f(i, j) for i in range(r) for j in range(c))] for f in maps]


def from_mip(p: Params, x: list[float]) -> Solution:
    """The occupied squares: columns at 1."""
    return tuple(s for s, value in enumerate(x) if value > 0.5)


def exhaustive(p: Params) -> tuple[float | None, Solution | None]:
    """(fewest pieces, their squares) by a second, independent method: iterative
    deepening over the number of pieces b = 1, 2, ...: take the first uncovered square
    and try each square that covers it (in the independent variant, only squares no
    placed piece attacks); no MIP. (None, None) when no square set works (total
    variant with a square nobody attacks). Raises ValueError beyond 36 squares."""
    squares = p.rows * p.cols
    if squares > 36:
        raise ValueError("exhaustive search is for boards of at most 36 squares")
    cover = coverers(p)
    if any(not c for c in cover):
        return None, None
    table = attacks(p.piece, p.rows, p.cols)
    independent = p.variant == "independent"

    def place(placed: frozenset[int], budget: int) -> frozenset[int] | None:
        open_square = next((t for t in range(squares) if placed.isdisjoint(cover[t])), None)
        if open_square is None:
            return placed
        if budget == 0:
            return None
        for s in cover[open_square]:
            if independent and not placed.isdisjoint(table[s]):
                continue
            found = place(placed | {s}, budget - 1)
            if found is not None:
                return found
        return None

    for budget in range(1, squares + 1):
        found = place(frozenset(), budget)
        if found is not None:
            return float(budget), tuple(sorted(found))
    return None, None


def orbits(solutions: list[Solution], group: list[list[int]]) -> int:
    """How many of `solutions` (square sets) are distinct up to `group` (permutations):
    the number of distinct least images min_g sorted(g(S))."""
    return len({min(tuple(sorted(g[s] for s in sol)) for g in group) for sol in solutions})


def exhaustive_count(p: Params) -> tuple[int, int]:
    """(optimal solutions, inequivalent ones) by a second method, independent of SCIP
    and of Burnside's lemma: the optimum from `exhaustive`, then every piece set of that
    size that covers the board, each generated once (branch on the first uncovered
    square: its k-th coverer is placed with its earlier coverers forbidden), and its
    orbits under `symmetries` counted by least images. Raises ValueError beyond 36
    squares or for the independent variant (not enumerated here)."""
    if p.variant == "independent":
        raise ValueError("exhaustive_count does not enumerate the independent variant")
    best, _ = exhaustive(p)
    if best is None:
        return 0, 0
    cover = coverers(p)
    squares = p.rows * p.cols
    found: list[Solution] = []

    def place(placed: frozenset[int], banned: frozenset[int], budget: int) -> None:
        open_square = next((t for t in range(squares) if placed.isdisjoint(cover[t])), None)
        if open_square is None:
            found.append(tuple(sorted(placed)))
            return
        if budget == 0:
            return
        for s in cover[open_square]:
            if s not in banned:
                place(placed | {s}, banned, budget - 1)
            banned = banned | {s}

    place(frozenset(), frozenset(), int(best))
    found = [sol for sol in found if len(sol) == best]
    return len(found), orbits(found, symmetries(p))


def verify(p: Params, solution: Solution) -> int:
    """The number of pieces; raises InvalidSolution if a square is off the board or
    repeated, a square is left uncovered, or (independent) two pieces attack each other."""
    squares = p.rows * p.cols
    placed = set(solution)
    if len(placed) != len(solution) or any(not 0 <= s < squares for s in solution):
        raise InvalidSolution(f"squares must be distinct indices in 0..{squares - 1}")
    for t, cover in enumerate(coverers(p)):
        if placed.isdisjoint(cover):
            raise InvalidSolution(f"square {t} is not covered ({p.variant})")
    if p.variant == "independent":
        table = attacks(p.piece, p.rows, p.cols)
        for s in placed:
            if not placed.isdisjoint(table[s]):
                raise InvalidSolution(f"the piece on square {s} attacks another piece")
    return len(placed)


def encode(solution: Solution) -> str:
    """Comma-separated occupied squares, row-major, 0-based."""
    return ",".join(map(str, solution))


def decode(text: str) -> Solution:
    """The inverse of `encode`."""
    return tuple(int(t) for t in text.split(",")) if text else ()


def render(p: Params, solution: Solution) -> str:
    """The board: the piece's letter where one stands, elsewhere how many pieces attack
    the square (as the seed prints)."""
    placed = set(solution)
    table = attacks(p.piece, p.rows, p.cols)
    count = [sum(t in table[s] for s in placed) for t in range(p.rows * p.cols)]
    return "\n".join(
        " ".join(
            SYMBOLS[p.piece] if r * p.cols + c in placed else str(count[r * p.cols + c])
            for c in range(p.cols)
        )
        for r in range(p.rows)
    )


def picture(p: Params, solution: Solution):
    """A matplotlib Figure of the board: light and dark squares, the piece's letter on a
    disc where one stands, and on every other square the number of pieces attacking it
    (a red 0 would be an uncovered square)."""
    from matplotlib.patches import Circle, Rectangle

    from puzzlesweep.puzzles._draw import panels

    placed = set(solution)
    table = attacks(p.piece, p.rows, p.cols)
    size = max(2.5, min(8.0, 0.5 * max(p.rows, p.cols)))
    figure, (ax,) = panels(
        1, f"{len(placed)} {p.piece}s, {p.variant}, {p.rows}×{p.cols}", size=size
    )
    ax.set_xlim(0, p.cols)
    ax.set_ylim(p.rows, 0)
    for r in range(p.rows):
        for c in range(p.cols):
            square = r * p.cols + c
            shade = "#b58863" if (r + c) % 2 else "#f0d9b5"
            ax.add_patch(Rectangle((c, r), 1, 1, facecolor=shade))
            if square in placed:
                ax.add_patch(Circle((c + 0.5, r + 0.5), 0.36, facecolor="#222222"))
                ax.text(
                    c + 0.5,
                    r + 0.5,
                    SYMBOLS[p.piece],
                    color="white",
                    ha="center",
                    va="center",
                    fontsize=12,
                    fontweight="bold",
                )
            else:
                hits = sum(square in table[s] for s in placed)
                ax.text(
                    c + 0.5,
                    r + 0.5,
                    str(hits),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="red" if hits == 0 else "black",
                )
    return figure
