"""The board of triangular peg solitaire and its rule tables, built once per side.

Vocabulary (holes 0-based here; people read them 1-based, row by row from the apex):
- hole: 0..T(n) - 1, T(n) = n(n+1)/2, at (row, col) with 0 <= col <= row < n.
- board: a bitmask, bit i set when hole i holds a peg; the start board is full but
  for the start hole (`start_board`).
- jump: (from, over, to) along one of the three lattice directions (`geometry`); T_5
  has 36.
- move: one or more consecutive jumps by the same peg (`moves_of`).
- symmetry: the 6 maps of the triangle, as hole permutations (`symmetries`).

Every table is a tuple, cached per side.
"""

from functools import lru_cache
from typing import NamedTuple

Jump = tuple[int, int, int]  # (from, over, to), 0-based hole indices

#: The six lattice directions (row step, column step) a jump may take.
DIRECTIONS = ((0, 1), (1, 0), (1, 1), (0, -1), (-1, 0), (-1, -1))
#: The largest side whose board fits the 64-bit bitboards of the engine (T_10: 55 holes).
MAX_SIDE = 10


class Reachable(NamedTuple):
    """The answer to `reachable`: layers[j] = distinct positions after j jumps;
    finishes = ((hole, witness jumps), ...) sorted by hole, holes 0-based."""

    layers: tuple[int, ...]
    finishes: tuple[tuple[int, tuple[Jump, ...]], ...]


Solution = tuple[Jump, ...] | Reachable


def holes(side: int) -> int:
    """T(side) = side(side+1)/2, the number of holes."""
    return side * (side + 1) // 2


def start_board(side: int, empty: int) -> int:
    """The start position of T_side: a peg in every hole but the 0-based hole `empty`."""
    return ((1 << holes(side)) - 1) ^ (1 << empty)


@lru_cache(maxsize=16)
def geometry(side: int) -> tuple[tuple[tuple[int, int], ...], tuple[Jump, ...]]:
    """(the (row, col) of every hole, every jump rule (from, over, to)); T_5 has 36 jumps."""
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


def moves_of(jumps: tuple[Jump, ...]) -> tuple[tuple[Jump, ...], ...]:
    """The jumps grouped into moves: maximal runs in which each jump starts on the hole
    the one before landed on."""
    grouped: list[list[Jump]] = []
    for i, jump in enumerate(jumps):
        if i == 0 or jumps[i - 1][2] != jump[0]:
            grouped.append([])
        grouped[-1].append(jump)
    return tuple(tuple(move) for move in grouped)


def move_path(move: tuple[Jump, ...]) -> str:
    """One move as the 1-based holes its peg visits, "7-2-9"."""
    return "-".join([str(move[0][0] + 1)] + [str(t + 1) for _, _, t in move])


def play(board: int, jump: Jump) -> int:
    """The board after `jump` (no legality check: see the family's `verify`)."""
    f, o, t = jump
    return board ^ (1 << f | 1 << o | 1 << t)
