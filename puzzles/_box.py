"""Row-major boxes: the geometry that board and box families share (not a family).

A box has side lengths `dims` = (d_1, ..., d_D); its cells are numbered row-major,
0-based (the last coordinate varies fastest), so cell (x_1, ..., x_D) has index
Σ x_i · stride_i with stride_i = d_{i+1} · ... · d_D. A chessboard of `rows` × `cols`
squares is the box (rows, cols). Everything here is computed from `dims` alone and
returned as fresh lists or tuples: nothing is cached or shared between callers.

The symmetries of a box are the maps that permute axes of equal length and reflect any
axes (the hyperoctahedral group restricted to the box's shape: 2^D · D! on a cube, 4 on
a non-square board, 8 on a square one). They map every line (axis, plane diagonal, space
diagonal) onto a line, so they preserve windows, rook, bishop, queen, king and knight
moves alike.

Roads not taken: one symmetry-breaking row per pair of equal sides (with three equal
sides such rows can form a cycle that no image satisfies, so only the first pair gets
one); numpy for the permutation tables (they are built once per instance and are small).
"""

import itertools
import math

Dims = tuple[int, ...]  # (6, 7, 6): the side lengths, each >= 1


def strides(dims: Dims) -> tuple[int, ...]:
    """The row-major stride of each axis: stride_i = d_{i+1} · ... · d_D."""
    return tuple(math.prod(dims[i + 1 :]) for i in range(len(dims)))


def index(cell: tuple[int, ...], steps: tuple[int, ...]) -> int:
    """The row-major index of `cell` given the box's `strides`."""
    return sum(c * s for c, s in zip(cell, steps, strict=True))


def carry_back(dims: Dims, axes: list[int], cells) -> tuple[int, ...]:
    """Cells of the box whose axis j is axis axes[j] of `dims` (a canonical form that
    reorders or drops axes; dropped axes have side 1), as sorted row-major indices of the
    box `dims` itself. `cells`: row-major indices of the reordered box."""
    small = [dims[axis] for axis in axes]
    steps = strides(dims)
    found = []
    for cell in cells:
        original = 0
        for j in range(len(small) - 1, -1, -1):
            cell, coordinate = divmod(cell, small[j])
            original += coordinate * steps[axes[j]]
        found.append(original)
    return tuple(sorted(found))


def symmetries(dims: Dims) -> list[list[int]]:
    """Every symmetry of the box as a cell permutation (image[cell] = its image cell), the
    identity first: for each order of the axes that only swaps equal sides, the
    reflections with the first axis's flip varying fastest. On an r × c board: identity,
    the two mirrors, the half turn, and on a square board then the transpose, the quarter
    turns and the anti-transpose (index 5 is a quarter turn). 16 for 6×7×6."""
    steps, found = strides(dims), []
    for order in itertools.permutations(range(len(dims))):
        if any(dims[a] != dims[b] for a, b in enumerate(order)):
            continue
        for reversed_flips in itertools.product((False, True), repeat=len(dims)):
            flips = reversed_flips[::-1]
            image = []
            for cell in itertools.product(*map(range, dims)):
                moved = [cell[order[a]] for a in range(len(dims))]
                moved = [
                    dims[a] - 1 - c if f else c
                    for a, (c, f) in enumerate(zip(moved, flips, strict=True))
                ]
                image.append(index(tuple(moved), steps))
            found.append(image)
    return found


def directions(dimension: int) -> list[tuple[int, ...]]:
    """The (3^D - 1) / 2 directions of a D-dimensional box (axes, plane and space
    diagonals), each a vector in {-1, 0, 1}^D with its first non-zero coordinate +1."""
    return [
        v
        for v in itertools.product((-1, 0, 1), repeat=dimension)
        if any(v) and next(x for x in v if x) > 0
    ]


def windows(dims: Dims, k: int) -> tuple[tuple[int, ...], ...]:
    """Every run of k consecutive cells along a direction (`directions`) inside the box,
    as row-major index tuples in order along the direction (a falling coordinate runs
    side-1 down). With k = n on the cube (n,)*d these are its ((n+2)^d - n^d) / 2 lines."""
    steps = strides(dims)
    found = []
    for v in directions(len(dims)):
        step = index(v, steps)
        # a start cell is valid when the whole window stays inside the box
        ranges = [
            range(0, n - (k - 1)) if x > 0 else range(k - 1, n) if x < 0 else range(n)
            for x, n in zip(v, dims, strict=True)
        ]
        for start in itertools.product(*ranges):
            first = index(start, steps)
            found.append(tuple(first + t * step for t in range(k)))
    return tuple(found)


def _equal_pair(dims: Dims) -> tuple[int, int] | None:
    """The first pair of axes i < j with equal sides, or None."""
    pairs = itertools.combinations(range(len(dims)), 2)
    return next(((i, j) for i, j in pairs if dims[i] == dims[j]), None)


def symmetry_rows(dims: Dims) -> list[tuple[list[int], list[int]]]:
    """Symmetry-breaking rows as pairs (more, fewer): Σ x over `more` >= Σ x over `fewer`.

    For each axis, the first half of the box (coordinate < side // 2) holds at least as
    many chosen cells as the mirror half; for the first pair of equal sides i < j, the
    cells with x_i < x_j at least as many as those with x_i > x_j. Every cell set has an
    image under the box's symmetries satisfying them all (`symmetric_image`), so a
    minimum over sets closed under the symmetries is unchanged."""
    coords = list(itertools.product(*map(range, dims)))
    rows = []
    for axis, side in enumerate(dims):
        low = [i for i, x in enumerate(coords) if x[axis] < side // 2]
        high = [i for i, x in enumerate(coords) if x[axis] >= side - side // 2]
        rows.append((low, high))
    if (pair := _equal_pair(dims)) is not None:
        i, j = pair
        more = [c for c, x in enumerate(coords) if x[i] < x[j]]
        rows.append((more, [c for c, x in enumerate(coords) if x[i] > x[j]]))
    return rows


def symmetric_image(dims: Dims, cells) -> tuple[int, ...]:
    """The image of `cells` (row-major indices) that satisfies every row of
    `symmetry_rows(dims)`: each axis reflected when its high half holds more of them,
    then the first pair of equal sides swapped when more lie below that diagonal (the
    swap carries the halves of the two axes onto each other, so they stay satisfied).
    Returns sorted indices."""
    points = [list(coordinates(cell, dims)) for cell in cells]
    for axis, side in enumerate(dims):
        low = sum(x[axis] < side // 2 for x in points)
        if low < sum(x[axis] >= side - side // 2 for x in points):
            for x in points:
                x[axis] = side - 1 - x[axis]
    if (pair := _equal_pair(dims)) is not None:
        i, j = pair
        if sum(x[i] < x[j] for x in points) < sum(x[i] > x[j] for x in points):
            for x in points:
                x[i], x[j] = x[j], x[i]
    steps = strides(dims)
    return tuple(sorted(index(tuple(x), steps) for x in points))


def coordinates(cell: int, dims: Dims) -> tuple[int, ...]:
    """The coordinates of row-major `cell` in the box `dims`."""
    coords = []
    for side in reversed(dims):
        cell, x = divmod(cell, side)
        coords.append(x)
    return tuple(reversed(coords))


def layer(dims: Dims, axis: int, position: int) -> list[int]:
    """The row-major cells whose coordinate on `axis` is `position`."""
    ranges = [range(position, position + 1) if a == axis else range(n) for a, n in enumerate(dims)]
    steps = strides(dims)
    return [index(cell, steps) for cell in itertools.product(*ranges)]
