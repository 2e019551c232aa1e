"""Monochromatic lines: balls of c colours in the cube [n]^d, fewest one-colour lines.

Sources: H. P. Williams (1974), "three-dimensional noughts and crosses" (the 0-1 model:
27 cell variables and 49 line indicators for 3^3; 14 and 13 balls leave at best 4
monochromatic lines), and the puzzle's own seed document, which states that instance.

Vocabulary (cells row-major, 0-based):
- cell: a point of [n]^d, e.g. (0, 2, 1); its index is row-major, 0..n^d-1.
- line: the n cells {p + t·v}, each coordinate constant, rising 0..n-1 or falling n-1..0,
  not all constant; there are ((n+2)^d - n^d) / 2 of them (8 for 3^2, 49 for 3^3).
- solution: the colour (0..c-1) of every cell, a tuple of n^d ints.
  Encoded in the catalog as one digit per cell ("0110..."); with more than 10 colours,
  comma-separated.

MIP: x[i,j] = 1 if cell i has colour j; Σ_j x[i,j] = 1; Σ_i x[i,j] = counts[j];
y[l,j] >= Σ_{i∈l} x[i,j] - (n-1), y in [0, 1] continuous (integral at every optimum);
minimise Σ y.

Symmetry: permuting the colours permutes the counts, so `canonical(p)` lists the counts
in decreasing order ((13, 14) and (14, 13) are one instance); the cube's own symmetries
(2^d · d! of them) leave the parameters unchanged. Sweeps: `counts = "all"` (with `c`,
default 2) gives every split of n^d into c positive parts, each once up to the order of
the colours; `counts = "balanced"` the near-equal split.
Second method: `exhaustive(p)`, a depth-first branch and bound over the cells in
row-major order that counts a line when its last cell is coloured; for n^d <= 16.

Roads not taken: one binary per cell for c = 2 (smaller, but a second model to keep
right); symmetry-breaking rows of our own in the MIP (HiGHS's own detection, on by
default, proved the seed in 2.4 s against 3.5 s without it: benchmarks/README.md); zero
counts in `counts = "all"` (a colour that is never used is the same instance with one
colour fewer).
"""

import math
from functools import lru_cache

from pydantic import Field, field_validator, model_validator

from puzzlesweep.core import InvalidSolution
from puzzlesweep.core import Params as _Params
from puzzlesweep.puzzles import _box
from puzzlesweep.puzzles._partitions import count_splits, splits
from puzzlesweep.solvers.mip import MipModel

NAME = "monochromatic_lines"
SOLVERS = ("auto", "highs", "scip")
#: The dashboard's axes: the size parameter on x (a list counts its product) and the
#: parameters whose values make one series each.
AXES = ("n", ("d",))

Line = tuple[int, ...]  # cell indices, in order along the line
Solution = tuple[int, ...]  # the colour of every cell, row-major


class Params(_Params):
    """n: side (>= 2: on a side of 1 every coordinate is constant, so no cell set is a
    line); d: dimensions (1..6), n^d at most 1,000,000 cells; counts: balls of each
    colour (one or more colours, each >= 0, summing to n^d). With one colour every line
    is monochromatic: the answer is the number of lines, ((n+2)^d - n^d)/2."""

    n: int = Field(description="the cube's side, >= 2")
    d: int = Field(description="dimensions, 1..6")
    counts: list[int] = Field(
        description="balls of each colour, one or more colours, each >= 0, summing to n^d"
    )

    @field_validator("n")
    @classmethod
    def _n(cls, n: int) -> int:
        if n < 2:
            raise ValueError("side n must be at least 2")
        return n

    @field_validator("d")
    @classmethod
    def _d(cls, d: int) -> int:
        if not 1 <= d <= 6:
            raise ValueError("dimension d must be between 1 and 6")
        return d

    @field_validator("counts", mode="before")
    @classmethod
    def _one_colour(cls, counts: object) -> object:
        """`counts=27` on the command line is the one colour [27]."""
        return [counts] if isinstance(counts, int) and not isinstance(counts, bool) else counts

    @field_validator("counts")
    @classmethod
    def _counts(cls, counts: list[int]) -> list[int]:
        if not counts or min(counts) < 0:
            raise ValueError("counts needs one or more colours, each count >= 0")
        return counts

    @model_validator(mode="after")
    def _sum(self) -> "Params":
        if self.n**self.d > 1_000_000:  # as no_k_in_row's boxes: refused before any work
            raise ValueError(f"n^d = {self.n**self.d:,} cells: more than 1,000,000")
        if sum(self.counts) != self.n**self.d:
            raise ValueError(
                f"counts must sum to n^d = {self.n**self.d}, "
                f"got {'+'.join(map(str, self.counts))} = {sum(self.counts)}"
            )
        return self


def expand_count(point: dict, cap: int) -> int:
    """len(expand(point)), counted without expanding (up to `cap + 1`). Raises
    ValueError as `expand` does."""
    if point.get("counts") != "all":
        return len(expand(point))
    return count_splits(point["n"] ** point["d"], _colours(point), cap)


def auto_solver(p: Params) -> str:
    """The engine `auto` runs (canonical p): SCIP from AUTO_SCIP_CELLS cells on, where it
    proves the 3^3 cube several times faster, HiGHS below, where both take milliseconds
    (benchmarks/README.md, "`auto`: the table behind each family's choice")."""
    return "scip" if p.n**p.d >= AUTO_SCIP_CELLS else "highs"


#: The cube size from which `auto` picks SCIP.
AUTO_SCIP_CELLS = 27


def expand(point: dict) -> list[dict]:
    """`counts="balanced"` → the split of n^d into `c` near-equal parts; `counts="all"` →
    every split into c positive parts up to the order of colours (`splits`); `c`
    (default 2) is consumed. Raises ValueError for another word or a bad `c`."""
    counts = point.get("counts")
    if not isinstance(counts, str):
        return [point]
    c, total = _colours(point), point["n"] ** point["d"]
    point = {k: v for k, v in point.items() if k != "c"}
    if counts == "balanced":
        return [{**point, "counts": [total // c + (j < total % c) for j in range(c)]}]
    if counts == "all":
        return [{**point, "counts": split} for split in splits(total, c)]
    raise ValueError(f"counts: a list of integers, 'all' or 'balanced', not {counts!r}")


def _colours(point: dict) -> int:
    """The spec point's `c` (default 2); raises ValueError unless an integer >= 2."""
    c = point.get("c", 2)
    if not isinstance(c, int) or c < 2:
        raise ValueError(f"c: the number of colours must be an integer >= 2, got {c!r}")
    return c


def _order(p: Params) -> list[int]:
    """Colour j of the canonical form is colour order[j] of p (counts decreasing)."""
    return sorted(range(len(p.counts)), key=lambda j: (-p.counts[j], j))


def canonical(p: Params) -> Params:
    """p with its counts in decreasing order: renaming the colours changes nothing else."""
    return p.model_copy(update={"counts": sorted(p.counts, reverse=True)})


def from_canonical(p: Params, solution: Solution) -> Solution:
    """A colouring of `canonical(p)` with its colours renamed back to p's."""
    order = _order(p)
    return tuple(order[colour] for colour in solution)


@lru_cache(maxsize=64)
def lines(n: int, d: int) -> tuple[Line, ...]:
    """Every line of [n]^d as a tuple of row-major cell indices in order along it: the
    windows of n cells of the box (n,)*d (`_box.windows`), ((n+2)^d - n^d) / 2 of them."""
    return _box.windows((n,) * d, n)


def model(p: Params) -> MipModel:
    """The seed's 0-1 model (module docstring); columns x[i,j] = i*c + j, then y[l,j]."""
    cells, c, all_lines = p.n**p.d, len(p.counts), lines(p.n, p.d)
    m = MipModel([], [], [], [])  # y is continuous but integral at every optimum:
    m.integral_objective = True  # so the optimum is an integer and its bound rounds up
    m.add_columns(cells * c, 0.0, 0.0, 1.0, True)
    y0 = m.add_columns(len(all_lines) * c, 1.0, 0.0, 1.0, False)
    for i in range(cells):
        m.add_row([i * c + j for j in range(c)], [1.0] * c, 1.0, 1.0)
    for j, count in enumerate(p.counts):
        m.add_row([i * c + j for i in range(cells)], [1.0] * cells, count, count)
    for li, line in enumerate(all_lines):
        for j in range(c):
            cols = [i * c + j for i in line] + [y0 + li * c + j]
            m.add_row(cols, [1.0] * p.n + [-1.0], -math.inf, p.n - 1)
    return m


def cube_symmetries(n: int, d: int) -> list[list[int]]:
    """The 2^d · d! symmetries of the cube [n]^d (permute the coordinates, reflect any of
    them) as cell permutations, image[i] = the cell i goes to, the identity first: the
    box's (`_box.symmetries`); each maps lines to lines."""
    return _box.symmetries((n,) * d)


def symmetries(p: Params) -> list[list[int]]:
    """The cube's symmetries (`cube_symmetries`) as permutations of the model's x columns
    (x[i,j] → x[g(i),j]); the y columns are left out: at an optimum y marks exactly the
    monochromatic lines, so x determines them. Colours are not permuted: counts are
    taken up to the board's symmetries only."""
    c = len(p.counts)
    return [
        [g[i] * c + j for i in range(len(g)) for j in range(c)] for g in cube_symmetries(p.n, p.d)
    ]


def from_mip(p: Params, x: list[float]) -> Solution:
    """The colour of each cell from the x[i,j] columns."""
    c = len(p.counts)
    return tuple(max(range(c), key=lambda j: x[i * c + j]) for i in range(p.n**p.d))


def _colourings(p: Params, limit: list[float]):
    """Yield (cost, colouring) for every complete colouring of [n]^d with the right counts
    whose number of monochromatic lines is at most limit[0]: depth-first over the cells
    in row-major order, colours in increasing order, a line counted when its last cell
    gets its colour and a branch cut as soon as its count exceeds limit[0]. `limit` is a
    one-element list the consumer may lower between yields (branch and bound)."""
    cells = p.n**p.d
    closing: list[list[tuple[int, ...]]] = [[] for _ in range(cells)]
    for line in lines(p.n, p.d):
        closing[max(line)].append(line)
    left, colours = list(p.counts), [0] * cells

    def place(cell: int, cost: int):
        if cost > limit[0]:
            return
        if cell == cells:
            yield cost, tuple(colours)
            return
        for colour in range(len(left)):
            if left[colour]:
                left[colour] -= 1
                colours[cell] = colour
                extra = sum(all(colours[i] == colour for i in line) for line in closing[cell])
                yield from place(cell + 1, cost + extra)
                left[colour] += 1

    yield from place(0, 0)


def exhaustive(p: Params) -> tuple[float | None, Solution | None]:
    """(fewest monochromatic lines, a colouring) by a second, independent method:
    depth-first branch and bound over the cells in row-major order (`_colourings`, its
    limit lowered below each colouring found), where a line is counted when its last
    cell gets its colour; no MIP. Raises ValueError when n^d > 16 (the enumeration is
    for small cubes)."""
    if p.n**p.d > 16:
        raise ValueError("exhaustive enumeration is for n^d <= 16")
    limit, best = [math.inf], (math.inf, None)
    for cost, colours in _colourings(p, limit):
        best, limit[0] = (cost, colours), cost - 1
    return float(best[0]), best[1]


def exhaustive_count(p: Params) -> tuple[int, int]:
    """(optimal colourings, inequivalent ones up to the cube's symmetries) by a second
    method, independent of SCIP and of Burnside's lemma: the optimum from `exhaustive`,
    then every colouring with the right counts and that many monochromatic lines
    (`_colourings` with that limit), and its orbits under `cube_symmetries` counted by
    least images. Raises ValueError when n^d > 16."""
    best, _ = exhaustive(p)
    cells = p.n**p.d
    found = [colours for cost, colours in _colourings(p, [best]) if cost == best]
    group = cube_symmetries(p.n, p.d)
    least = {min(tuple(sol[g.index(i)] for i in range(cells)) for g in group) for sol in found}
    return len(found), len(least)


def verify(p: Params, solution: Solution) -> int:
    """The number of monochromatic lines, recomputed; raises InvalidSolution if the
    colouring has the wrong size, an unknown colour or the wrong count of a colour."""
    if len(solution) != p.n**p.d:
        raise InvalidSolution(f"expected {p.n**p.d} cells, got {len(solution)}")
    if any(not 0 <= col < len(p.counts) for col in solution):
        raise InvalidSolution(f"colours must lie in 0..{len(p.counts) - 1}")
    used = [solution.count(j) for j in range(len(p.counts))]
    if used != list(p.counts):
        raise InvalidSolution(f"colour counts {used} differ from {list(p.counts)}")
    return sum(len({solution[i] for i in line}) == 1 for line in lines(p.n, p.d))


def encode(solution: Solution) -> str:
    """One digit per cell, row-major ("0110..."); comma-separated beyond 10 colours."""
    if max(solution, default=0) < 10:
        return "".join(map(str, solution))
    return ",".join(map(str, solution))


def decode(text: str) -> Solution:
    """The inverse of `encode`."""
    return tuple(int(t) for t in (text.split(",") if "," in text else text))


def monochromatic(p: Params, solution: Solution) -> list[tuple[int, tuple[int, ...]]]:
    """The monochromatic lines of `solution`: (colour, its cells in line order, 0-based
    row-major indices), in the order of `lines(n, d)`."""
    return [
        (solution[line[0]], line)
        for line in lines(p.n, p.d)
        if len({solution[i] for i in line}) == 1
    ]


def _named(p: Params, line: tuple[int, ...]) -> str:
    """A line as people name it: its first and last cells as 0-based coordinates."""

    def point(i: int) -> str:
        digits = [(i // p.n**axis) % p.n for axis in reversed(range(p.d))]
        return "(" + ",".join(map(str, digits)) + ")"

    return f"{point(line[0])}-{point(line[-1])}"


def details(p: Params, solution: Solution) -> dict:
    """Extra `--json` fields: "monochromatic": [{"colour", "cells" (0-based row-major
    indices), "line" (its end cells as 0-based coordinates)}], one per monochromatic
    line."""
    return {
        "monochromatic": [
            {"colour": c, "cells": list(line), "line": _named(p, line)}
            for c, line in monochromatic(p, solution)
        ]
    }


def render(p: Params, solution: Solution) -> str:
    """The cube as its 2-D slices (rows × columns), colours as digits, then each
    monochromatic line by colour and by its end cells (0-based coordinates)."""
    n, d = p.n, p.d
    if d == 1:
        text = " ".join(map(str, solution))
    else:
        size = n * n
        slices = []
        for s in range(len(solution) // size):
            grid = solution[s * size : (s + 1) * size]
            rows = [" ".join(map(str, grid[r * n : (r + 1) * n])) for r in range(n)]
            title = f"slice {s}" if d > 2 else ""
            slices.append("\n".join(([title] if title else []) + rows))
        text = "\n\n".join(slices)
    found = monochromatic(p, solution)
    said = [f"monochromatic lines: {len(found)} (0-based coordinates)"]
    said += [f"  colour {c}: {_named(p, line)}" for c, line in found]
    return text + "\n\n" + "\n".join(said)


#: The monochromatic lines a picture names in its caption; the rest are counted.
CAPTION_LINES = 12


def picture(p: Params, solution: Solution):
    """A matplotlib Figure of the cube as its 2-D slices (rows × columns; for d = 4 one
    panel per value of the first two coordinates), a disc per ball in its colour, and a
    black ring on every cell of a monochromatic line; the title gives the count and a
    caption names the lines (the first CAPTION_LINES) by colour and end cells."""
    from puzzlesweep.puzzles._draw import colour, slice_panels

    n, d = p.n, p.d
    found = monochromatic(p, solution)
    mono = {i for _, line in found for i in line}
    width = n
    height = n if d >= 2 else 1
    count = max(1, len(solution) // (width * height))
    title = f"{len(found)} monochromatic lines in {n}^{d}, counts {p.counts}"
    label = (lambda s: f"slice {s}") if d == 3 else (lambda s: f"slice {divmod(s, n)}")
    figure, axes = slice_panels(count, height, width, title, label)
    for s, ax in enumerate(axes):
        for r in range(height):
            for c in range(width):
                i = s * width * height + r * width + c
                ax.add_patch(_disc(c, r, colour(solution[i]), i in mono))
    if found:
        named = [f"colour {c}: {_named(p, line)}" for c, line in found[:CAPTION_LINES]]
        if len(found) > CAPTION_LINES:
            named.append(f"and {len(found) - CAPTION_LINES} more")
        figure.text(0.5, 0.01, "; ".join(named), ha="center", va="bottom", fontsize=8, wrap=True)
    return figure


def _disc(x: float, y: float, fill: str, ring: bool):
    from matplotlib.patches import Circle

    return Circle((x, y), 0.38, facecolor=fill, edgecolor="black", linewidth=2.5 if ring else 0)
