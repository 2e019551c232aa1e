"""Peg solitaire described to the compiled bitboard engine (`solvers.frontier`), and
the engine's answers turned back into the family's solutions.

The engine knows no board: it gets the holes, the jump rules in the order its
depth-first search tries them (`ordered_jumps`), the symmetries that keep the starts and
the finish, the start boards and the one-peg goal boards (`problem`).
"""

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from puzzlesweep.solvers import frontier
from puzzlesweep.solvers.frontier import LayeredProblem

from .board import MAX_SIDE, Jump, Reachable, Solution, geometry, holes, start_board, symmetries

if TYPE_CHECKING:
    from . import Params


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
        starts=tuple(start_board(side, s) for s in starts),
        goals=tuple(1 << h for h in goals),
        question=question,
        memory=memory,
    )


def search(p: "Params") -> LayeredProblem:
    """The engine's problem for `p` (see `problem`), from its one start hole."""
    return problem(p.side, [p.start - 1], p.finish_hole, p.question)


def from_search(p: "Params", raw) -> Solution:
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
