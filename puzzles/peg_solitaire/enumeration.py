"""Peg solitaire's second, independent method (`exhaustive`): a layered enumeration of
exact positions, sharing nothing with the compiled engine but the board's geometry, so
that the engine's answers on small boards are checked against it.
"""

from typing import TYPE_CHECKING

from .board import Jump, Reachable, Solution, geometry, holes, play, start_board

if TYPE_CHECKING:
    from . import Params


def exhaustive(p: "Params") -> tuple[float | None, Solution | None]:
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
    start = start_board(p.side, p.start - 1)
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
                    child = (play(board, (f, o, t)), t)
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
