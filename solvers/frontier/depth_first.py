"""The `solve` question: is a goal reachable at all, by any number of moves?

First the position classes: the GF(2) invariants of the rules rule out the goals in
another class of the start at once (G. I. Bell, "Solving Triangular Peg Solitaire",
JIS 11 (2008) 08.4.8). Then a depth-first search by single rules in the given rule
order, with a table of keys of positions proven dead (open addressing, doubled as it
fills up to half the memory limit; when full it stops growing and the search stays
exact), resumable in slices so the time and node limits hold.
"""

from dataclasses import replace

import numpy as np

from .. import Limits, SolverResult
from .kernels import board_keys, dfs, distinct, rehash
from .layers import Budget, Stop
from .problem import LayeredProblem, invariants, key_tables, move_tables, position_class

#: Depth-first search nodes between two looks at the clock.
SLICE = 1 << 19
#: Bytes of the dead table of a dive for an incumbent (`incumbent`, `moves.min_moves`).
DIVE_MEMORY = 64 << 20


def solvable(problem: LayeredProblem, budget: Budget, result: SolverResult) -> None:
    """Fill `result` with the answer to `solve`: infeasible (extra["position_class"])
    when no goal shares a start's position class; else a depth-first search in rule
    order with a dead table: optimal (objective 1, the rules of the path) or
    infeasible. Raises Stop at a limit, ValueError for several starts or goals with
    different token counts."""
    basis = invariants(problem.rules, problem.size)
    classes = {position_class(s, basis) for s in problem.starts}
    goals = [g for g in problem.goals if position_class(g, basis) in classes]
    if not goals:  # no goal is in a start's position class
        result.status = "infeasible"
        result.extra["position_class"] = True
        return
    if len(problem.starts) != 1 or len({g.bit_count() for g in goals}) != 1:
        raise ValueError("solve takes one start and goals with equal token counts")
    maps = key_tables(problem)
    _, _, fot, cond, _ = move_tables(problem, False)
    largest = 1 << max(16, int(problem.memory // 2 // 8).bit_length() - 1)
    dead = np.zeros(1 << 16, np.uint64)  # doubled as it fills: a large empty table is slow
    stack_b = np.zeros(problem.size + 1, np.uint64)
    stack_r = np.full(problem.size + 1, -1, np.int64)
    stack_b[0] = problem.starts[0]
    state = np.zeros(4, np.int64)
    key_goals = distinct(board_keys(np.array(goals, np.uint64), maps))
    last = goals[0].bit_count()
    while True:
        budget.check(dead.nbytes)
        state[3] = len(dead) < largest
        if state[3] and state[1] >= len(dead) * 3 // 4:
            dead, old = np.zeros(2 * len(dead), np.uint64), dead
            rehash(old, dead)
            del old
        step = SLICE
        if budget.limits.node_limit is not None:
            step = min(step, budget.limits.node_limit - budget.nodes)
        budget.nodes += dfs(stack_b, stack_r, state, fot, cond, key_goals, last, maps, dead, step)
        if state[2] != 0:
            break
    result.extra["dead"] = int(state[1])
    if state[2] < 0:
        result.status = "infeasible"
        return
    result.solution = problem.triples([int(stack_r[i]) - 1 for i in range(state[0])])
    result.status, result.objective, result.bound = "optimal", 1.0, 1.0


def incumbent(problem: LayeredProblem, seconds: float) -> list[tuple[int, int, int]] | None:
    """A first solution (the rules (a, b, c) in order) from the first start of
    `problem`, by the depth-first search of `solvable` within `seconds` and `DIVE_MEMORY`
    bytes, or None: the incumbent a time limit reports (T_8 over all starts: 27 moves
    at once, benchmarks/README.md)."""
    first = problem.starts[:1]  # the group need not fix it alone: no symmetry
    group = problem.group[:1]
    one = replace(
        problem, starts=first, question="solve", memory=DIVE_MEMORY, group=group, tables={}
    )
    result = SolverResult(status="error")
    try:
        solvable(one, Budget(Limits(max(seconds, 1e-3)), DIVE_MEMORY), result)
    except Stop:
        return None
    return result.solution if result.status == "optimal" else None
