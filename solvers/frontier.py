"""Layered frontier search: a dynamic programme over whole layers of integer states.

For state graphs that are layered (every move leads from layer j to layer j + 1, as when
every jump removes a peg) with every goal in one layer, `depth`. A state is a
non-negative integer key below 2**58 (the problem's own encoding, already reduced to a
canonical form under its symmetries); a layer is two numpy arrays, the sorted distinct
keys and the least cost (a small integer, < 64) of reaching each. The problem supplies
`expand`, the children of a whole layer at once; the engine deduplicates them with one
sort, keeping the least cost per key (the transposition table, one layer at a time).

Options (all per problem):
- `group_shift`, `group_slack`: states whose keys agree above bit `group_shift` form a
  group; a state whose cost is `group_slack` or more above its group's least cost is
  dropped (the problem promises such a state cannot lead to a cheaper goal).
- `lower_bound(keys)`: an admissible bound on the cost still to pay from each state;
  with an incumbent of cost c, states with cost + bound >= c are cut.
- `beam`: before the full search, a pass that keeps only the `beam` states of least
  cost + bound per layer; a goal it reaches is the incumbent (for a yes/no question,
  the answer).
- `all_goals`: report every goal state with one path to it, not only the cheapest.

Witnesses are not stored as parent pointers: every layer is kept, and the path to a goal
is found backwards by asking the problem for a state's parents (`parents`) and looking
each up in the layer before, with a binary search.

Result (`solve`): status optimal | infeasible | time_limit | node_limit | error; objective
= the least goal cost (`goal_objective` when `minimise` is False, the number of goals
for `all_goals`); bound = the least cost + bound over the layer a limit stopped in
(capped by the incumbent); nodes = states expanded; solution = the goal path's moves, or
{"layers": states per layer, "goals": [(goal state, moves), ...]} for `all_goals`;
extra = {"states": per-layer counts, "peak_states": the largest layer}.

Roads not taken: a hash table per layer (numpy has none; sorting is as fast here and
also groups); parent pointers per state (a second array as large as every layer, where
the backward search costs milliseconds).
"""

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import Limits, SolverResult, relative_gap

VERSION = "puzzlesweep-frontier-1"
#: Bits of a packed (key, cost) word that hold the cost: costs lie in 0..63.
COST_BITS = 6
#: States expanded at once: bounds the memory of one batch of children, and the time
#: between two looks at the clock (a batch of 2^16 T_8 states takes about 0.05 s).
CHUNK = 1 << 16

_SHIFT = np.uint64(COST_BITS)
_MASK = np.uint64((1 << COST_BITS) - 1)


@dataclass(frozen=True)
class LayeredProblem:
    """A layered search the engine runs without knowing what the states mean.

    roots: uint64 array of the layer-0 keys (cost 0). expand(keys, costs) -> (child keys,
    child costs): uint64 and uint8 arrays of equal length, children of every given state,
    in canonical form, in any order, repeats allowed. depth: the layer of the goals.
    is_goal(keys) -> bool array, applied to layer `depth`. parents(state) -> iterable of
    (move, parent state, parent key, step cost) for the backward search; state_of(key)
    is the state a goal key stands for. minimise: False when any goal answers (the cost
    is then ignored and `goal_objective` reported).
    """

    roots: np.ndarray
    expand: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
    depth: int
    is_goal: Callable[[np.ndarray], np.ndarray]
    parents: Callable[[Any], Iterable[tuple[Any, Any, int, int]]]
    state_of: Callable[[int], Any] = lambda key: key
    minimise: bool = True
    goal_objective: float = 0.0
    all_goals: bool = False
    group_shift: int = 0
    group_slack: int = 1
    lower_bound: Callable[[np.ndarray], np.ndarray] | None = None
    beam: int | None = None


class _LimitReached(Exception):
    def __init__(self, status: str, bound: float | None):
        self.status, self.bound = status, bound


def reduce(
    keys: np.ndarray,
    costs: np.ndarray,
    group_shift: int = 0,
    group_slack: int = 1,
    runs: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct keys, least cost of each) from uint64 keys < 2**58 and uint8
    costs < 64 of equal length; with `group_shift`, a state whose cost is `group_slack`
    or more above the least cost of its group (equal keys >> group_shift) is dropped.
    One sort of the packed words key << 6 | cost (a merge sort when `runs`: the input
    is a few sorted runs); O(n log n) time, about 3n words of memory."""
    if len(keys) == 0:
        return keys, costs
    packed = keys << _SHIFT
    packed |= costs
    packed.sort(kind="stable" if runs else None)
    first = np.empty(len(packed), bool)
    first[0] = True
    np.greater_equal(packed[1:] ^ packed[:-1], np.uint64(1 << COST_BITS), out=first[1:])
    packed = packed[first]
    keys, costs = packed >> _SHIFT, (packed & _MASK).astype(np.uint8)
    if group_shift:
        groups = keys >> np.uint64(group_shift)
        starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
        least = np.minimum.reduceat(costs, starts)
        sizes = np.diff(np.r_[starts, len(keys)])
        keep = costs < np.repeat(least, sizes) + group_slack
        keys, costs = keys[keep], costs[keep]
    return keys, costs


def _reduce(keys: np.ndarray, costs: np.ndarray, problem: LayeredProblem, runs: bool = False):
    """`reduce` with the problem's grouping (none when it does not minimise)."""
    shift = problem.group_shift if problem.minimise else 0
    return reduce(keys, costs, shift, problem.group_slack, runs)


class _Run:
    """One pass over the layers: the budget, the kept layers and the counts."""

    def __init__(self, problem: LayeredProblem, limits: Limits, started: float, nodes: int):
        self.problem, self.limits = problem, limits
        self.deadline = started + limits.time_limit
        self.nodes = nodes
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []
        self.proving = True  # False in the beam pass: its layers bound nothing

    def _bound(self, keys, costs) -> np.ndarray:
        extra = self.problem.lower_bound(keys) if self.problem.lower_bound else 0
        return costs.astype(np.int16) + extra

    def sweep(self, beam: int | None, cap: int | None) -> None:
        """Layers 0..depth (fewer when one empties); states with cost + bound >= cap are
        cut; with `beam`, only that many states of least cost + bound survive a layer."""
        keys = np.unique(np.asarray(self.problem.roots, dtype=np.uint64))
        costs = np.zeros(len(keys), np.uint8)
        self.proving = beam is None
        for level in range(self.problem.depth + 1):
            self._check(keys, costs)
            if cap is not None and len(keys):
                keep = self._bound(keys, costs) < cap
                keys, costs = keys[keep], costs[keep]
            if beam is not None and len(keys) > beam:
                best = np.argsort(self._bound(keys, costs), kind="stable")[:beam]
                best.sort()
                keys, costs = keys[best], costs[best]
            if len(keys) == 0:
                return
            self.layers.append((keys, costs))
            if level == self.problem.depth:
                return
            keys, costs = self._expand(keys, costs)

    def _expand(self, keys, costs):
        """The next layer: children of `CHUNK` states at a time, each batch reduced, then
        the sorted batches merged; the limits are checked before every batch."""
        parts = []
        at = 0
        while at < len(keys):
            self._check(keys, costs)
            size = CHUNK
            if self.limits.node_limit is not None:  # stop at the limit exactly
                size = min(size, self.limits.node_limit - self.nodes)
            chunk = slice(at, at + size)
            at += size
            self.nodes += len(keys[chunk])
            parts.append(_reduce(*self.problem.expand(keys[chunk], costs[chunk]), self.problem))
        children = _reduce(
            np.concatenate([k for k, _ in parts]),
            np.concatenate([c for _, c in parts]),
            self.problem,
            runs=len(parts) > 1,
        )
        self._check(keys, costs)  # merging a large layer's batches takes a while too
        return children

    def _check(self, keys, costs) -> None:
        limit = self.limits.node_limit
        status = None
        if limit is not None and self.nodes >= limit:
            status = "node_limit"
        elif time.perf_counter() > self.deadline:
            status = "time_limit"
        if status is not None:
            bound = None
            if self.proving and len(keys):
                bound = float(self._bound(keys, costs).min())
            raise _LimitReached(status, bound)

    def goals(self) -> tuple[np.ndarray, np.ndarray]:
        """(goal keys, their costs) in the last layer, if it is the goal layer."""
        if len(self.layers) <= self.problem.depth:
            return np.empty(0, np.uint64), np.empty(0, np.uint8)
        keys, costs = self.layers[self.problem.depth]
        found = self.problem.is_goal(keys) if len(keys) else np.zeros(0, bool)
        return keys[found], costs[found]

    def path(self, key: int, cost: int) -> list:
        """The moves from a root to the goal `key` of cost `cost`, found backwards."""
        state, moves = self.problem.state_of(key), []
        for level in range(self.problem.depth, 0, -1):
            keys, costs = self.layers[level - 1]
            for move, parent, parent_key, step in self.problem.parents(state):
                at = int(np.searchsorted(keys, np.uint64(parent_key)))
                if at < len(keys) and keys[at] == parent_key and costs[at] + step == cost:
                    state, cost = parent, cost - step
                    moves.append(move)
                    break
            else:  # the layers were built from these parents: this cannot happen
                raise RuntimeError(f"no parent of a state in layer {level}")
        return moves[::-1]


def solve(problem: LayeredProblem, limits: Limits) -> SolverResult:
    """Run the beam pass (if any) and the full layered search under `limits`; never
    raises. See the module docstring for the fields of the result."""
    started = time.perf_counter()
    result = SolverResult(status="error", solver="backtrack", solver_version=VERSION)
    nodes, incumbent = 0, None
    run = None
    try:
        if problem.beam is not None and not problem.all_goals:
            run = _Run(problem, limits, started, 0)
            run.sweep(problem.beam, None)
            nodes = run.nodes
            keys, costs = run.goals()
            if len(keys):
                at = int(np.argmin(costs))
                incumbent = (run.path(int(keys[at]), int(costs[at])), int(costs[at]))
                result.solution = incumbent[0]
                result.objective = (
                    float(incumbent[1]) if problem.minimise else problem.goal_objective
                )
        if incumbent is not None and not problem.minimise:
            result.status, result.bound = "optimal", result.objective
        else:
            run = _Run(problem, limits, started, nodes)
            run.sweep(None, incumbent[1] if incumbent else None)
            _finish(problem, run, incumbent, result)
    except _LimitReached as stop:
        result.status = stop.status
        if problem.minimise:
            bounds = [b for b in (stop.bound, incumbent and incumbent[1]) if b is not None]
            result.bound = float(min(bounds)) if bounds else None
    except Exception as exc:  # a crashing search becomes an error row, not a lost batch
        result.status, result.message = "error", f"{type(exc).__name__}: {exc}"
    result.gap = relative_gap(result.objective, result.bound)
    if run is not None:
        counts = [len(k) for k, _ in run.layers]
        result.nodes = run.nodes
        result.extra = {"states": counts, "peak_states": max(counts, default=0)}
    result.seconds = time.perf_counter() - started
    return result


def _finish(problem: LayeredProblem, run: _Run, incumbent, result: SolverResult) -> None:
    """Fill `result` from a completed full pass."""
    keys, costs = run.goals()
    if problem.all_goals:
        goals = [
            (problem.state_of(int(k)), run.path(int(k), int(c)))
            for k, c in zip(keys, costs, strict=True)
        ]
        result.solution = {"layers": [len(k) for k, _ in run.layers], "goals": goals}
        result.status, result.objective = "optimal", float(len(goals))
    elif len(keys):
        at = int(np.argmin(costs))
        result.solution = run.path(int(keys[at]), int(costs[at]))
        result.status = "optimal"
        result.objective = float(costs[at]) if problem.minimise else problem.goal_objective
    elif incumbent is not None:  # nothing cheaper than the incumbent: it is optimal
        result.status = "optimal"
    else:
        result.status = "infeasible"
    if result.status == "optimal":
        result.bound = result.objective
