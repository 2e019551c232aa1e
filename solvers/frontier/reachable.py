"""The `reachable` question: every exact position after 0, 1, 2, ... rules from the
starts (no symmetry, so the counts are of real positions), as sorted arrays, and for
every goal reached one path to it, found backwards through the layers.
"""

import numpy as np

from .. import SolverResult
from .kernels import NO_PRUNE, distinct
from .layers import CHUNK, Budget, fill, lookup, walk
from .problem import LayeredProblem, key_tables, move_tables


def reachable(problem: LayeredProblem, budget: Budget, result: SolverResult) -> None:
    """Fill `result` with the answer to `reachable`: solution {"layers": distinct
    positions after 0, 1, ... rules, "goals": [(goal, its path of rules)] for every
    goal reached, by goal}; objective the number of goals reached. Raises Stop at a
    limit."""
    forward = move_tables(problem, False)
    maps = key_tables(problem, symmetric=False)
    levels = [distinct(np.array(problem.starts, np.uint64))]
    buffer = np.empty(CHUNK, np.uint64)
    result.extra["states"] = [len(levels[0])]
    while True:
        frontier, parts, at = levels[-1], [], 0
        while at < len(frontier):
            budget.check(sum(x.nbytes for x in levels + parts) * 2 + buffer.nbytes)
            buffer, written, at = fill(
                budget, frontier, at, buffer, forward, maps, NO_PRUNE, 0, chain=False
            )
            parts.append(distinct(buffer[:written]))
        layer = distinct(np.concatenate(parts)) if parts else np.empty(0, np.uint64)
        if not len(layer):
            break
        levels.append(layer)
        result.extra["states"].append(len(layer))
    reverse = move_tables(problem, True)
    goals = []
    for goal in sorted(problem.goals):
        d = lookup(levels, goal)
        if d is not None:
            path = walk(goal, d, levels, reverse, maps, True)
            goals.append((goal, problem.triples(path)))
    result.solution = {"layers": [len(x) for x in levels], "goals": goals}
    result.status, result.objective = "optimal", float(len(goals))
    result.bound = result.objective
