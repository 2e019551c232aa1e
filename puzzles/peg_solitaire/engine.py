"""Peg solitaire described to the compiled bitboard engine (`solvers.frontier`), and
the engine's answers turned back into the family's solutions.

The engine knows no board: it gets the holes, the jump rules in the order its
depth-first search tries them (`ordered_jumps`), the symmetries that keep the starts and
the finish, the start boards and the one-peg goal boards (`problem`).
"""

from collections.abc import Callable
from functools import lru_cache, partial
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


def verify_any_start(side: int, solution: tuple[Jump, ...]) -> int:
    """The family's `verify` of a `min_moves` solution of T_side from the hole its first
    jump lands in, the last peg anywhere (the all-starts question of OEIS A127500, which
    `problem` poses with every hole a start); returns the moves. Raises InvalidSolution
    as `verify` (an empty solution: too many pegs are left)."""
    from . import Params, verify

    start = solution[0][2] + 1 if solution else 1
    return verify(Params(side=side, start=start, question="min_moves"), tuple(solution))


def min_moves_search(values: dict) -> tuple[LayeredProblem, Callable[[list], int], "Params | None"]:
    """The fewest-moves question that a search sharded over a cluster answers
    (`flows.shard`), from command-line params: `side` and `start` (a hole, or `all`: every
    one-vacancy start at once, the last peg anywhere: OEIS A127500, G. I. Bell, "Solving
    Triangular Peg Solitaire", JIS 11 (2008) 08.4.8), optional `finish` and `question`
    (only `min_moves`). Returns (the engine's problem, `verify(path)` → the moves of the
    engine's path of rules, replayed by the family's `verify`, the instance's Params or
    None for every start). Raises ValueError (pydantic's ValidationError for a bad value)
    naming the parameter."""
    from . import Params, verify

    if values.get("question", "min_moves") != "min_moves":
        raise ValueError(f"question: a sharded search answers min_moves, not {values['question']}")
    if str(values.get("start")) != "all":
        p = Params.model_validate({**values, "question": "min_moves"})
        return search(p), lambda path: verify(p, from_search(p, tuple(path))), p
    if extra := sorted(set(values) - {"side", "start", "question"}):
        raise ValueError(f"start=all asks for every start with the last peg anywhere: "
                         f"drop {', '.join(extra)}")  # fmt: skip
    side = Params.model_validate({"side": values.get("side"), "start": 1}).side
    starts = list(range(holes(side)))
    return problem(side, starts, None, "min_moves"), partial(verify_any_start, side), None
