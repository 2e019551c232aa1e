"""Domination: the fewest chess pieces that occupy or attack every square of a board.

Sources: knights on n×n boards, OEIS A006075 (n = 1..10 → 1, 4, 4, 4, 5, 8, 10, 12, 14,
16; 8×8 → 12 is the classical set-cover example) and the number of minimum covers up to
the board's symmetries, OEIS A006076; E. J. Cockayne, "Chessboard domination problems",
Discrete Mathematics 86 (1990), for the variants.

Vocabulary (squares row-major, 0-based, square = row * cols + col):
- piece: knight, king, queen, rook or bishop; it attacks along its moves on the empty
  board (sliding pieces are not blocked: the convention of the literature).
- variant: `dominating` (every square occupied or attacked), `total` (every square,
  occupied or not, attacked by another piece), `independent` (dominating, and no piece
  attacks another).
- solution: the sorted squares holding a piece; encoded in the catalog as
  comma-separated integers ("9,14,21").

A minimum hitting set (`puzzles.hitting_set`): the universe is the squares, and the set
of square t is its closed neighbourhood, the squares whose piece covers t (attacks it, or
stands on it except in the total variant); independent adds the conflicts "attacks".
MIP: x[s] = 1 if a piece stands on s; Σ_{s covers t} x[s] >= 1 for every square t;
independent adds x[s] + x[t] <= 1 for every attacking pair. Region cuts (`region_cuts`):
Σ x over the squares covering a corner block or border strip R >= γ(R), the fewest
pieces that cover R, the optimum of a small MIP that the engine proves before it solves
(`solvers.mip.PendingRow`): valid because every solution covers R.

Symmetry: every piece's graph is symmetric under transposing the board, so
`canonical(p)` puts the shorter side first (8×5 and 5×8 are one instance); the board's
4 or 8 symmetries (`symmetries`) serve the counts of optima (A006076).
Second method: `exhaustive(p)`, iterative deepening over the number of pieces that
branches on the squares covering the first square left uncovered (skipping squares
attacked by a placed piece in the independent variant); for boards of at most 36 squares.

Engines and cuts were chosen by measurement (benchmarks/README.md, "Two engines: HiGHS
and SCIP" and "Stronger knights models"): SCIP proves the larger knights boards in a
fraction of HiGHS's time, hence `auto_solver`; the region cuts cut the nodes of 14×14
by about a third with HiGHS and by more with SCIP, hence on by default from
REGION_MIN_SQUARES.

Roads not taken: symmetry-breaking rows (`symmetry_rows`: half-counts under the
reflections, the diagonal under the transpose; measured no faster than HiGHS's own
detection on knights 12..14, kept behind `model(p, symmetry=True)`); starting from
`greedy_start` by default (16 knights on 8×8, 48 on 16×16; it cut 12×12 from 123 nodes
to 9 but left 13 and 14 unchanged, and the proven optimum as a start cut 14×14 from
5,577 nodes to 468 but made 13×13 need 253 instead of 5: too erratic to choose on);
local cover cuts Σ_{s covers some t∈R} x_s >= γ(R) for 3×3 blocks, corner blocks and
edge strips R on every board (the LP bound stayed 21.42 on 12×12 and 28.92 on 14×14;
only the corner and border cuts of `region_cuts` are kept, on by default only where
they were measured to help, `model(p, regions=True)` elsewhere); the piece's graph with
blocking (sliding pieces stopped by other pieces), which the literature does not use.
"""

from functools import lru_cache
from types import MappingProxyType
from typing import Literal

from pydantic import Field, field_validator

from puzzlesweep.core import Params as _Params
from puzzlesweep.puzzles import _box
from puzzlesweep.puzzles import hitting_set as hs
from puzzlesweep.puzzles.hitting_set import orbits  # noqa: F401  (part of the module's API)
from puzzlesweep.solvers.mip import MipModel, PendingRow

NAME = "domination"
SOLVERS = ("auto", "highs", "scip")
#: The dashboard's axes: the size parameter on x (a list counts its product) and the
#: parameters whose values make one series each.
AXES = ("rows", ("piece", "variant"))

Solution = tuple[int, ...]  # sorted occupied squares

_ROOK = ((0, 1), (1, 0), (0, -1), (-1, 0))
_BISHOP = ((1, 1), (1, -1), (-1, 1), (-1, -1))
#: Single steps (row, col) of the leaping pieces.
LEAPS = MappingProxyType(
    {
        "knight": ((1, 2), (2, 1), (-1, 2), (-2, 1), (1, -2), (2, -1), (-1, -2), (-2, -1)),
        "king": tuple((dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc),
    }
)
#: Ray directions (row, col) of the sliding pieces.
RAYS = MappingProxyType({"rook": _ROOK, "bishop": _BISHOP, "queen": _ROOK + _BISHOP})
SYMBOLS = MappingProxyType({"knight": "N", "king": "K", "queen": "Q", "rook": "R", "bishop": "B"})


class Params(_Params):
    """piece: knight | king | queen | rook | bishop; rows, cols: board size (1..64);
    variant: dominating | total | independent."""

    piece: Literal["knight", "king", "queen", "rook", "bishop"] = Field(
        "knight", description="the piece whose attacks cover the board"
    )
    rows: int = Field(description="board rows, 1..64")
    cols: int = Field(description="board columns, 1..64")
    variant: Literal["dominating", "total", "independent"] = Field(
        "dominating",
        description="dominating (occupied or attacked), total (attacked by another "
        "piece), independent (no piece attacks another)",
    )

    @field_validator("rows", "cols")
    @classmethod
    def _size(cls, size: int) -> int:
        if not 1 <= size <= 64:
            raise ValueError("board sides must lie in 1..64")
        return size


#: The board size from which `auto` picks SCIP for knights (14×14).
AUTO_SCIP_SQUARES = 196


def auto_solver(p: Params) -> str:
    """The engine `auto` runs (canonical p), from benchmarks/README.md (mip_bench.py
    --only auto, knights_bench.py): SCIP for knights dominating boards of at least
    AUTO_SCIP_SQUARES squares, where it proved 14×14..16×16 in 0.29-0.41 of HiGHS's
    time; HiGHS elsewhere (it was as fast or faster on knights 8..13, 8×13, queens 6..10,
    kings 12, the total variant; SCIP won 12×12 and the independent variant by less
    than a factor 2)."""
    big = p.rows * p.cols >= AUTO_SCIP_SQUARES
    return "scip" if big and p.piece == "knight" and p.variant == "dominating" else "highs"


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
    axes = [1, 0] if p.rows > p.cols else [0, 1]
    return _box.carry_back((p.rows, p.cols), axes, solution)


@lru_cache(maxsize=256)
def attacks(piece: str, rows: int, cols: int) -> tuple[frozenset[int], ...]:
    """For each square, the frozenset of squares a piece standing there attacks."""
    table = []
    for r in range(rows):
        for c in range(cols):
            hit = set()
            for dr, dc in LEAPS.get(piece, ()):
                if 0 <= r + dr < rows and 0 <= c + dc < cols:
                    hit.add((r + dr) * cols + c + dc)
            for dr, dc in RAYS.get(piece, ()):
                rr, cc = r + dr, c + dc
                while 0 <= rr < rows and 0 <= cc < cols:
                    hit.add(rr * cols + cc)
                    rr, cc = rr + dr, cc + dc
            table.append(frozenset(hit))
    return tuple(table)


def coverers(p: Params) -> tuple[tuple[int, ...], ...]:
    """For each square t, the sorted squares whose piece covers t under the variant (its
    closed neighbourhood; the open one in the total variant)."""
    return problem(p.piece, p.rows, p.cols, p.variant).sets


@lru_cache(maxsize=256)
def problem(piece: str, rows: int, cols: int, variant: str) -> hs.HittingSet:
    """The board as a `hitting_set.HittingSet`: squares, one set of coverers per square
    (attacks are symmetric for these pieces), attacks as conflicts when independent."""
    table = attacks(piece, rows, cols)
    own = variant != "total"
    sets = tuple(tuple(sorted(table[t] | ({t} if own else set()))) for t in range(len(table)))
    return hs.HittingSet(
        rows * cols,
        sets,
        elements="squares",
        unhit=f"square {{index}} is not covered ({variant})",
        conflict="the piece on square {element} attacks another piece",
        conflicts=table if variant == "independent" else None,
    )


def _problem(p: Params) -> hs.HittingSet:
    return problem(p.piece, p.rows, p.cols, p.variant)


def _small(p: Params) -> hs.HittingSet:
    """`problem` of p for the exhaustive methods; raises ValueError beyond 36 squares."""
    if p.rows * p.cols > 36:
        raise ValueError("exhaustive search is for boards of at most 36 squares")
    return _problem(p)


def model(
    p: Params, *, start: bool = False, symmetry: bool = False, regions: bool | None = None
) -> MipModel:
    """The set-cover MIP of the module docstring (`hitting_set.model`); column s is square
    s. `start` hands the engine the greedy cover of `greedy_start` (dominating variant
    only; checked by `verify`), `symmetry` adds the rows of `symmetry_rows`, `regions`
    the rows of `region_cuts`. Start and symmetry rows are off by default because
    neither made knights faster (benchmarks/README.md); region cuts (`regions=None`) are
    on for knights dominating boards of at least REGION_MIN_SQUARES squares, where they
    cut SCIP's nodes on 14×14 and 15×15 and HiGHS's on 14×14, off elsewhere."""
    if regions is None:
        big = p.rows * p.cols >= REGION_MIN_SQUARES
        regions = big and p.piece == "knight" and p.variant == "dominating"
    rows = [hs.balance(*pair) for pair in symmetry_rows(p.rows, p.cols)] if symmetry else []
    placed = None
    if start and p.variant == "dominating":
        placed = greedy_start(p)
        if symmetry:  # HiGHS silently drops a start that breaks a row
            placed = symmetric_image(p.rows, p.cols, placed)
    m = hs.model(_problem(p), rows, placed)
    m.pending = region_cuts(p) if regions else []
    return m


#: Region cuts: corner blocks a×a for a in REGION_CORNERS, and the border strips of
#: these depths along each side (full length).
REGION_CORNERS, REGION_DEPTHS = (3, 4, 5, 6), (1, 2, 3)
#: The board size from which `model` adds the region cuts by default (14×14).
REGION_MIN_SQUARES = 196


def regions(p: Params) -> list[list[int]]:
    """The corner blocks and border strips of the board (`REGION_CORNERS`,
    `REGION_DEPTHS`) that are strict sub-regions of it, as sorted lists of squares."""
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


def region_cuts(p: Params) -> list[PendingRow]:
    """For every region R of `regions`, the row Σ x over the squares that cover some
    square of R >= γ(R), where γ(R) is the optimum of the small covering MIP over those
    squares (the variant's covering rule, the independent variant treated as
    dominating, so γ(R) is a valid lower limit): the fewest pieces that cover R. Every
    solution covers R, so the row cuts off no solution. The engine proves γ(R) before it
    solves (`solvers.mip.settled`: HiGHS, 30 s a region, a row without a proof left
    out); no engine runs here."""
    cover = coverers(p)
    cuts = []
    for region in regions(p):
        near = sorted({s for t in region for s in cover[t]})
        index = {s: i for i, s in enumerate(near)}
        local = hs.HittingSet(len(near), tuple(tuple(index[s] for s in cover[t]) for t in region))
        cuts.append(PendingRow(tuple(near), hs.model(local)))
    return cuts


def greedy_start(p: Params) -> Solution:
    """A dominating set (any variant's covering rule; not checked for independence) by
    `hitting_set.greedy`: the square covering most uncovered squares (lowest index on
    ties) until all are covered, then every piece whose squares are all covered twice
    lifted, from the last placed. Knights: 16 on 8×8, 28 on 12×12, 48 on 16×16 (optima
    12, 24, 40). Raises ValueError when a square has nothing that covers it."""
    return hs.greedy(_problem(p))


def symmetry_rows(rows: int, cols: int) -> list[tuple[list[int], list[int]]]:
    """Symmetry-breaking rows as pairs (more, fewer), Σ x over `more` >= Σ x over
    `fewer` (`_box.symmetry_rows` of the board): the top half holds at least as many
    pieces as the bottom half, the left half as the right; on a square board also the
    squares above the diagonal as those below. The optimum is unchanged."""
    return _box.symmetry_rows((rows, cols))


def symmetric_image(rows: int, cols: int, placed: Solution) -> Solution:
    """The image of `placed` under the board symmetry that makes it satisfy every row of
    `symmetry_rows(rows, cols)` (`_box.symmetric_image`), sorted."""
    return _box.symmetric_image((rows, cols), placed)


def symmetries(p: Params) -> list[list[int]]:
    """The board's symmetries as square permutations (image[s] = the square s goes to):
    the identity, the two mirrors and the half turn (4), and on a square board also the
    transpose, the quarter turns and the anti-transpose (8; `_box.symmetries`). Every
    piece's attacks are preserved by them, so they map covers to covers of the same size
    (a group: what `solvers.scip.count` needs to count covers up to symmetry, A006076)."""
    return _box.symmetries((p.rows, p.cols))


def from_mip(p: Params, x: list[float]) -> Solution:
    """The occupied squares: columns at 1."""
    return hs.from_mip(x)


def exhaustive(p: Params) -> tuple[float | None, Solution | None]:
    """(fewest pieces, their squares) by a second, independent method
    (`hitting_set.exhaustive`): iterative deepening over the number of pieces: take the
    first uncovered square and try each square that covers it (in the independent
    variant, only squares no placed piece attacks); no MIP. (None, None) when no square
    set works (total variant with a square nobody attacks). Raises ValueError beyond 36
    squares."""
    return hs.exhaustive(_small(p))


def exhaustive_count(p: Params) -> tuple[int, int]:
    """(optimal solutions, inequivalent ones up to `symmetries`) by a second method,
    independent of SCIP and of Burnside's lemma (`hitting_set.exhaustive_count`). Raises
    ValueError beyond 36 squares or for the independent variant (not enumerated here)."""
    if p.variant == "independent":
        raise ValueError("exhaustive_count does not enumerate the independent variant")
    return hs.exhaustive_count(_small(p), symmetries(p))


def verify(p: Params, solution: Solution) -> int:
    """The number of pieces; raises InvalidSolution if a square is off the board or
    repeated, a square is left uncovered, or (independent) two pieces attack each other."""
    return hs.verify(_problem(p), solution)


encode, decode = hs.encode, hs.decode


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
                text, style = SYMBOLS[p.piece], {"color": "white", "fontsize": 12}
                style["fontweight"] = "bold"
            else:
                hits = sum(square in table[s] for s in placed)
                text, style = str(hits), {"fontsize": 8, "color": "black" if hits else "red"}
            ax.text(c + 0.5, r + 0.5, text, ha="center", va="center", **style)
    return figure
