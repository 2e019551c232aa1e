"""No k in a row: remove the fewest stones from a full box so no k remain in a line.

Sources: the five-in-a-row removal problem (k = 5: 6×7 → 8, 13×17 → 44; 6×7×6 with 524
windows is open: its best removal, 63, is kept in tests/test_families.py, the dual
bounds reached are in benchmarks/README.md); for k = 3 on n×n boards, OEIS A181018
gives the most stones kept.

Vocabulary (cells row-major, 0-based):
- box: dimensions (d_1, ..., d_D); every cell starts with a stone.
- direction: a non-zero vector in {-1, 0, 1}^D, one of each ± pair: (3^D - 1) / 2 of them
  (4 in 2-D, 13 in 3-D), i.e. axes, plane diagonals and space diagonals.
- window: k consecutive cells along one direction; the removed stones must hit every
  window (a minimum hitting set, `puzzles.hitting_set`, whose sets are the windows).
- solution: the sorted row-major indices of the removed stones; encoded in the catalog
  as comma-separated integers ("3,10,17").

MIP: x[cell] = 1 if removed; Σ_{cell∈w} x >= 1 for every window w; minimise Σ x.
Sub-box cuts: for every strict sub-box B whose optimum h(B) is proven (`SUBBOX_OPTIMA`,
a staircase of proofs: `_no_k_optima`), Σ_{cell∈B} x >= h(B), valid since B's windows
are windows of the box. The LP alone is weak (x = 1/k everywhere gives cells/k: 50.4 on
6×7×6, 57 with the k = 5 boxes, 10×10 with k = 3: 33.3, optimum 48). A certificate
lists the values its model trusts (`cited`, each with its source) and rebuilds the
model from them alone (`model_citing`).
Start: `model` hands HiGHS the best periodic removal pattern (`start_solution`: remove
the cells with a·x ≡ c mod k, repaired greedily where a window is missed, pruned, and
checked by `verify`): optimal at once on 2-D boards with k = 5 (6×7 → 8, 13×17 → 44),
68 on 6×7×6, where `start_solution(p, SEARCH_MOVES)` (a seeded local search of a few
seconds) reaches 64 deterministically.

Symmetry: permuting the axes, or dropping a side of 1 (no window of k >= 2 runs along
it), keeps the windows: `canonical(p)` sorts the sides >= 2 (6×7 = 7×6, 1×7 = 7).
Second method: `exhaustive(p)`, iterative deepening over removal budgets that branches on
the cells of the first window left whole; for boxes of at most 24 cells.

Roads not taken: symmetry-breaking rows by default (`symmetry_rows`, behind
`model(p, symmetry=True)`: on 6×7×6 they leave the bound where HiGHS's own symmetry
detection does, and cost nodes); the local-search start by default (seconds on every 3-D
model for no better bound); clique or lifted cuts on overlapping windows; 2-D sub-box
cuts for k = 5 (cells/k already lies within one of the optimum); the 2-D optima on the
diagonal planes of a 3-D box (a plane spanned by an axis and a plane diagonal across it
holds a 2-D board's windows): with the slabs they leave the root LP of 6×7×6 at 50.4.
"""

import itertools
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
from pydantic import Field, field_validator

from puzzlesweep.citation import Cited, Published
from puzzlesweep.core import Params as _Params
from puzzlesweep.puzzles import _box
from puzzlesweep.puzzles import _no_k_optima as _optima
from puzzlesweep.puzzles import hitting_set as hs
from puzzlesweep.solvers.mip import MipModel

NAME = "no_k_in_row"
SOLVERS = ("auto", "highs", "scip")
#: The dashboard's axes: the size parameter on x (a list counts its product) and the
#: parameters whose values make one series each.
AXES = ("dims", ("k",))

Window = tuple[int, ...]  # k row-major cell indices along one direction
Solution = tuple[int, ...]  # sorted indices of removed stones
Cuts = bool | Mapping[tuple[int, tuple[int, ...]], int]  # True: SUBBOX_OPTIMA


class Params(_Params):
    """dims: the box's side lengths (1 to 10 dimensions, each >= 1, at most 1,000,000
    cells); k: the forbidden run length (>= 1). A box where no k cells are in a line
    (k above every side) has no window: nothing needs removing, the answer is 0 (the
    first terms of OEIS A181019, such as 1×2 with k = 3); k = 1 removes every stone."""

    dims: list[int] = Field(
        description="the box's sides, 1 to 10 of them, each >= 1, at most 1,000,000 cells"
    )
    k: int = Field(description="the run length no stones may form, >= 1")

    @field_validator("dims", mode="before")
    @classmethod
    def _one_side(cls, dims: object) -> object:
        """`dims=6` on the command line is the 1-D box [6]."""
        return [dims] if isinstance(dims, int) and not isinstance(dims, bool) else dims

    @field_validator("dims")
    @classmethod
    def _dims(cls, dims: list[int]) -> list[int]:
        if not 1 <= len(dims) <= 10 or min(dims) < 1:
            raise ValueError("dims needs 1 to 10 side lengths, each at least 1")
        if math.prod(dims) > 1_000_000:
            raise ValueError("dims gives more than 1,000,000 cells")
        return dims

    @field_validator("k")
    @classmethod
    def _k(cls, k: int) -> int:
        if k < 1:
            raise ValueError("k must be at least 1")
        return k


#: The sub-box cuts' proven optima, and the entries proven by their own certificates.
THREE_IN_ROW, FIVE_IN_ROW = _optima.THREE_IN_ROW, _optima.FIVE_IN_ROW
SUBBOX_OPTIMA, CERTIFIED = _optima.SUBBOX_OPTIMA, _optima.CERTIFIED


def published(p: Params) -> Published | None:
    """The published term that gives p's optimum, or None (`_no_k_optima.published`)."""
    return _optima.published(p.k, tuple(canonical(p).dims))


def cited(p: Params) -> list[Cited]:
    """The values `model(p)` trusts, with their sources (`_no_k_optima.cited`)."""
    return _optima.cited(p.k, tuple(p.dims))


def model_citing(p: Params, values: Sequence[Cited]) -> MipModel:
    """`model(p)` with the sub-box cuts of `values` alone, never of SUBBOX_OPTIMA: a
    certificate's model. Raises ValueError naming a value whose instance is no strict
    sub-box of p with p's k, or a box cited twice."""
    cuts: dict[tuple[int, tuple[int, ...]], float] = {}
    for value in values:
        box = Params.model_validate(value.params)
        key = (box.k, tuple(sorted(box.dims)))
        if box.k != p.k or not _optima.fits(key[1], tuple(p.dims)):
            raise ValueError(f"{value.text()} is no strict sub-box of dims={p.dims} k={p.k}")
        if key in cuts:
            raise ValueError(f"{value.text()}: the box is cited twice")
        cuts[key] = value.value
    return model(p, cuts=cuts)


#: The box size from which `auto` picks SCIP.
AUTO_SCIP_CELLS = 36


def auto_solver(p: Params) -> str:
    """The engine `auto` runs (canonical p): SCIP from AUTO_SCIP_CELLS cells on, where it
    proved the k = 3 boards in a fraction of HiGHS's time and the 3-D boxes as fast or
    faster, HiGHS below, where both take hundredths of a second (benchmarks/README.md,
    "`auto`: the table behind each family's choice")."""
    return "scip" if math.prod(p.dims) >= AUTO_SCIP_CELLS else "highs"


def expand(point: dict) -> list[dict]:
    """Grid points need no family-specific expansion here."""
    return [point]


def _axes(dims: list[int]) -> list[int]:
    """Axis j of the canonical box is axis axes[j] of `dims` (sides >= 2, increasing)."""
    kept = sorted((side, axis) for axis, side in enumerate(dims) if side >= 2)
    return [axis for _, axis in kept] or [0]


def canonical(p: Params) -> Params:
    """p with the sides of length >= 2 sorted increasingly and sides of 1 dropped."""
    return p.model_copy(update={"dims": [p.dims[axis] for axis in _axes(p.dims)]})


def from_canonical(p: Params, solution: Solution) -> Solution:
    """Removed cells of `canonical(p)` carried back to p's axes (row-major indices)."""
    return _box.carry_back(tuple(p.dims), _axes(p.dims), solution)


#: The directions of a box and its windows of k cells (`_box.directions`, `_box.windows`;
#: the windows of each box and k are built once per process).
directions = _box.directions
windows = lru_cache(maxsize=64)(_box.windows)


@lru_cache(maxsize=64)
def problem(dims: tuple[int, ...], k: int) -> hs.HittingSet:
    """The box as a `hitting_set.HittingSet`: its cells, and its windows as the sets."""
    return hs.HittingSet(
        math.prod(dims),
        windows(dims, k),
        elements="removed cells",
        unhit=f"{k} stones remain in a row at cells {{members}}",
    )


def model(
    p: Params, *, start: bool = True, moves: int = 0, symmetry: bool = False, cuts: Cuts = True
) -> MipModel:
    """The hitting-set MIP of the module docstring (`hitting_set.model`); column i is
    cell i. With `start`, the incumbent of `start_solution(p, moves)` (checked by
    `verify`) is handed to HiGHS (none beyond START_MAX_CELLS cells); with `symmetry`,
    the rows of `symmetry_rows` are added (off by default: measured, HiGHS's own
    symmetry handling serves as well; see benchmarks/README.md); `cuts=False` leaves out
    the sub-box cuts (the plain textbook model, for benchmarks), a mapping like
    `SUBBOX_OPTIMA` takes them from that table instead (a chain of proofs, box by box)."""
    dims = tuple(p.dims)
    rows = [hs.at_least(cells, h) for cells, h in subbox_cuts(dims, p.k, cuts)] if cuts else []
    rows += [hs.balance(*pair) for pair in symmetry_rows(dims)] if symmetry else []
    removed = None
    if start and math.prod(dims) <= START_MAX_CELLS:
        removed = start_solution(p, moves)
        if symmetry:  # HiGHS silently drops a start that breaks a row
            removed = symmetric_image(dims, removed)
    return hs.model(problem(dims, p.k), rows, removed)


def subbox_cuts(dims: tuple[int, ...], k: int, optima: Cuts = True) -> list[tuple[list[int], int]]:
    """(cells of a strict sub-box, its proven optimum) for every placement, in every axis
    order, of every box of `optima` ({(k, sorted sides): optimum}; True: `SUBBOX_OPTIMA`)
    with the same k and dimension that fits."""
    strides, cuts = _box.strides(dims), []
    for (kk, shape), h in (SUBBOX_OPTIMA if optima is True else optima).items():
        if kk != k or len(shape) != len(dims):
            continue
        for oriented in sorted(set(itertools.permutations(shape))):
            if oriented == dims or any(a > b for a, b in zip(oriented, dims, strict=True)):
                continue
            offsets = [range(d - a + 1) for a, d in zip(oriented, dims, strict=True)]
            for offset in itertools.product(*offsets):
                cells = [
                    sum((o + c) * s for o, c, s in zip(offset, cell, strides, strict=True))
                    for cell in itertools.product(*map(range, oriented))
                ]
                cuts.append((cells, h))
    return cuts


#: `start_solution` is skipped beyond this many cells (its greedy repair grows with the
#: box). SEARCH_MOVES: the local search that takes 6×7×6 from 68 to 64 removals within
#: its first 2,620 moves; 4,000 moves take seconds, too long for every model, so `model`
#: asks for none unless told.
#: START_FORMS: at most this many linear forms are tried (there are (k-1)^(D-1)).
START_MAX_CELLS, START_FORMS, SEARCH_MOVES = 5000, 64, 4000


def start_solution(p: Params, moves: int = 0) -> Solution:
    """A good removal set to start HiGHS from; always valid (it hits every window).

    The periodic patterns: remove the cells x with a·x ≡ c (mod k), for every linear
    form a with a_1 = 1 and 1 <= a_i < k (the first START_FORMS in lexicographic order)
    and every residue c. Such a pattern hits the window through x along v exactly when
    a·v ≢ 0 (mod k) (k prime), which holds for every 2-D direction with k = 5 and
    a = (1, 2): cells/k removals, the optimum on 6×7 (8) and 13×17 (44). When some
    pattern hits every window, the smallest such (pruned) is returned. Otherwise (every
    3-D box with k = 5: a_1 ± a_3 or a_1 ± a_2 ± a_3 vanishes mod 5 for some direction;
    2-D with k = 3) each pattern is repaired greedily and pruned (`hitting_set.Hits`),
    and the smallest kept: 68 on 6×7×6, 29 on 5×5×5 (optimum 28). Then `moves` moves of
    a seeded, deterministic local search (`hitting_set.improve`); SEARCH_MOVES reach 64
    on 6×7×6."""
    dims, k = tuple(p.dims), p.k
    box = problem(dims, k)
    table = box.table
    coords = np.array(list(itertools.product(*map(range, dims))), dtype=np.int64)
    forms = itertools.islice(itertools.product(range(1, k), repeat=len(dims) - 1), START_FORMS)
    patterns = [(coords @ np.array((1, *form))) % k == c for form in forms for c in range(k)]
    patterns = patterns or [np.ones(len(coords), dtype=bool)]  # k = 1: every cell
    hitting = [x for x in patterns if x[table].any(axis=1).all()]
    best = None
    for pattern in hitting or patterns:
        state = hs.Hits(box, pattern)
        state.repair(np.arange(len(table)))
        state.prune(np.flatnonzero(state.chosen)[::-1])
        if best is None or state.chosen.sum() < best.chosen.sum():
            best = state
    if moves:
        hs.improve(best, moves)
    return best.elements()


#: Symmetry-breaking rows (more, fewer) of the box, Σ x over `more` >= Σ x over
#: `fewer`: half-counts under each reflection, the diagonal of the first pair of equal
#: sides (`_box.symmetry_rows`); and the image of a removal set that satisfies them all.
symmetry_rows, symmetric_image = _box.symmetry_rows, _box.symmetric_image


def from_mip(p: Params, x: list[float]) -> Solution:
    """The removed cells: columns at 1."""
    return hs.from_mip(x)


def _small(p: Params) -> hs.HittingSet:
    """`problem` of p for the exhaustive methods; raises ValueError beyond 24 cells
    (measured: 6×4 with k = 2, 18 removals, 2.6 s; 3×3×3 with k = 2 took 11 s)."""
    if math.prod(p.dims) > 24:
        raise ValueError("exhaustive search is for boxes of at most 24 cells")
    return problem(tuple(p.dims), p.k)


def exhaustive(p: Params) -> tuple[float | None, Solution | None]:
    """(fewest removals, removed cells) by a second, independent method
    (`hitting_set.exhaustive`): iterative deepening over the budget b = 0, 1, ...: pick
    the first window left whole and try removing each of its k cells; no MIP, no cuts.
    Raises ValueError beyond 24 cells."""
    return hs.exhaustive(_small(p))


def exhaustive_count(p: Params) -> tuple[int, int]:
    """(optimal removal sets, inequivalent ones up to `symmetries`) by a second method,
    independent of SCIP and of Burnside's lemma (`hitting_set.exhaustive_count`). Raises
    ValueError beyond 24 cells."""
    return hs.exhaustive_count(_small(p), symmetries(p))


def verify(p: Params, solution: Solution) -> int:
    """The number of removed stones; raises InvalidSolution if a cell is out of the box,
    repeated, or some window of k stones is left whole."""
    return hs.verify(problem(tuple(p.dims), p.k), solution)


encode, decode = hs.encode, hs.decode


def render(p: Params, solution: Solution) -> str:
    """The box as 2-D slices: 'o' a stone kept, '.' a stone removed."""
    removed = set(solution)
    *outer, rows, cols = [1] * (2 - len(p.dims)) + list(p.dims)
    blocks = []
    for s in range(math.prod(outer)):
        base = s * rows * cols
        grid = [
            " ".join("." if base + r * cols + c in removed else "o" for c in range(cols))
            for r in range(rows)
        ]
        blocks.append("\n".join(([f"slice {s}"] if outer else []) + grid))
    return "\n\n".join(blocks)


def picture(p: Params, solution: Solution):
    """A matplotlib Figure of the box as 2-D slices (rows × columns, one panel per value
    of the outer coordinates): a black stone where one is kept, a red cross where one was
    removed; the title gives the count."""
    from puzzlesweep.puzzles._draw import slice_panels

    removed = set(solution)
    *outer, rows, cols = [1] * (2 - len(p.dims)) + list(p.dims)
    title = f"{len(removed)} stones removed from {'×'.join(map(str, p.dims))}, k = {p.k}"
    figure, axes = slice_panels(math.prod(outer), rows, cols, title)
    for s, ax in enumerate(axes):
        kept = [(c, r) for r in range(rows) for c in range(cols)]
        gone = [(c, r) for c, r in kept if s * rows * cols + r * cols + c in removed]
        kept = [xy for xy in kept if xy not in set(gone)]
        if kept:
            ax.scatter(*zip(*kept, strict=True), s=120, color="black")
        if gone:
            ax.scatter(*zip(*gone, strict=True), s=120, color="red", marker="x")
    return figure


#: Every symmetry of the box as a cell permutation, the identity first (16 for 6×7×6:
#: 2 axis orders × 2^3 reflections; `_box.symmetries`). Each maps windows to windows (a
#: direction vector to ± a direction vector), so it maps removal sets that hit every
#: window to such sets of the same size. `layer`: the cells of one layer across an axis.
box_symmetries, layer = _box.symmetries, _box.layer


def symmetries(p: Params) -> list[list[int]]:
    """`box_symmetries` of p's box: the group the counts of optima are taken up to."""
    return box_symmetries(tuple(p.dims))


def layer_low(dims: tuple[int, ...], axis: int, k: int) -> int:
    """A proven lower limit of the removals in one layer across `axis`: the layer's
    lines along any other axis b are disjoint, and each holds floor(d_b / k) disjoint
    windows, each needing a removal; the best such axis."""
    cells = math.prod(dims) // dims[axis]
    return max(
        [cells // dims[b] * (dims[b] // k) for b in range(len(dims)) if b != axis], default=0
    )


def split_model(p: Params, text: str, width: int):
    """The count split of `p`'s MIP (`solvers.split.count_split`) given as
    `AXIS:I,J,...`: one group per listed layer across AXIS (0-based, of p's own dims),
    with buckets [0, low-1], low, ..., low+width-1, [low+width, cells] where low is
    `layer_low`, reduced by the box symmetries that permute the listed layers. Returns
    (Split, description). Raises ValueError naming what is wrong in `text` or `width`."""
    from puzzlesweep.solvers.split import count_split

    axis_text, sep, layers_text = text.partition(":")
    if not sep or not axis_text.strip().isdigit():
        raise ValueError(f"--split {text!r} must be AXIS:LAYER[,LAYER...] such as 1:3 or 1:0,6")
    axis = int(axis_text)
    if not 0 <= axis < len(p.dims):
        raise ValueError(f"--split axis {axis} is not an axis of dims {p.dims} (0-based)")
    try:
        indices = [int(t) for t in layers_text.split(",")]
    except ValueError:
        raise ValueError(f"--split layers {layers_text!r} must be integers") from None
    if len(set(indices)) != len(indices) or not all(0 <= i < p.dims[axis] for i in indices):
        raise ValueError(f"--split layers must be distinct, in 0..{p.dims[axis] - 1}")
    if not 1 <= width <= 40:
        raise ValueError(f"--width must be in 1..40, got {width}")
    dims = tuple(p.dims)
    groups = [layer(dims, axis, i) for i in indices]
    low = layer_low(dims, axis, p.k)
    split = count_split(
        groups, [low] * len(groups), [low + width] * len(groups), box_symmetries(dims)
    )
    names = ", ".join(f"g{n} = layer {i}" for n, i in enumerate(indices))
    return split, f"removals per layer across axis {axis} ({names}); lower limit {low} each"
