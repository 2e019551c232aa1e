"""Generic search engines under the same limits and result fields as the MIP solver.

A `SearchProblem` is a root state, a function giving each state's children as
(move, child, cost) triples, a goal test and a key function. The key maps a state to
its canonical form (for example the least of its images under a board's symmetries), so a
position proven dead, or already reached more cheaply, is pruned together with all its
symmetric images, as in the seed `003_f55d0c0b3991d583.txt`.

Three engines, chosen by `SearchProblem.layers` and `SearchProblem.minimise`:
- depth-first backtracking (`minimise=False`): the first goal found; a goal answers a
  yes/no question, so the result is `optimal` with objective `goal_objective`, or
  `infeasible` after the whole space is refuted.
- uniform-cost search (`minimise=True`, Dijkstra over non-negative move costs): the
  cheapest path to any goal, `optimal` once it is popped; the cost of the last popped
  state is a valid dual bound when a limit stops the search first. Before it, a
  depth-first dive with `DIVE_SHARE` of the time and node limits looks for any goal path: its cost
  is the incumbent that a time or node limit reports with the bound (as HiGHS does), and
  uniform-cost search stops as soon as its bound reaches the incumbent; a dive that
  searches the whole space without a goal proves the instance infeasible.
- breadth-first enumeration (`layers=True`): every state reachable from the root, layer by
  layer (layer j = reached by exactly j moves; the state graph must be layered, as when
  every move removes a peg), counting distinct keys per layer and collecting every goal
  with one path to it. The result is `optimal` (the enumeration is complete) with
  objective = the number of distinct goals and solution = {"layers": [count per depth],
  "goals": [(goal state, moves), ...]}.
"""

import heapq
import itertools
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from . import Limits, SolverResult, relative_gap

VERSION = "puzzlesweep-backtrack-2"
#: Share of the time limit that a minimisation spends diving for a first incumbent.
DIVE_SHARE = 0.1

State = Hashable
Move = Any


@dataclass(frozen=True)
class SearchProblem:
    """A search the engines can run without knowing what the states mean.

    root: the start state. children(state): iterable of (move, child_state, cost) with
    cost >= 0 (a count). is_goal(state): bool. key(state): a hashable canonical form;
    states with the same key must have the same future (same goal reachability, same
    cheapest remaining cost). minimise: False for the first goal, True for the cheapest.
    goal_objective: the objective reported for a goal found when minimise is False.
    """

    root: State
    children: Callable[[State], Iterable[tuple[Move, State, float]]]
    is_goal: Callable[[State], bool]
    key: Callable[[State], Hashable] = lambda state: state
    minimise: bool = False
    goal_objective: float = 0.0
    layers: bool = False


class _LimitReached(Exception):
    def __init__(self, status: str):
        self.status = status


class _Budget:
    """Counts expanded nodes and checks the clock every 16 of them (a node of a large
    board can cost a millisecond: its children and their symmetric keys)."""

    def __init__(self, limits: Limits, share: float = 1.0):
        self.nodes = 0
        self.node_limit = limits.node_limit
        if self.node_limit is not None and share < 1:
            self.node_limit = max(1, int(share * self.node_limit))
        self.deadline = time.perf_counter() + share * limits.time_limit

    def tick(self) -> None:
        self.nodes += 1
        if self.node_limit is not None and self.nodes > self.node_limit:
            raise _LimitReached("node_limit")
        if self.nodes % 16 == 0 and time.perf_counter() > self.deadline:
            raise _LimitReached("time_limit")


def _depth_first(problem: SearchProblem, budget: _Budget) -> list[tuple[Move, float]] | None:
    """The (move, cost) steps of the first goal path found, or None when none exists."""
    dead: set[Hashable] = set()
    path: list[tuple[Move, float]] = []
    stack = [iter(((None, problem.root, 0),))]
    while stack:
        step = next(stack[-1], None)
        if step is None:  # every child of this state failed: it is dead
            stack.pop()
            if path:
                path.pop()
            continue
        move, state, cost = step
        key = problem.key(state)
        if key in dead:
            continue
        budget.tick()
        if move is not None:
            path.append((move, cost))
        if problem.is_goal(state):
            return path
        dead.add(key)  # marked on entry: a state is never re-entered on one path
        stack.append(iter(problem.children(state)))
    return None


def _uniform_cost(
    problem: SearchProblem, budget: _Budget, incumbent: tuple[list[Move], float] | None = None
) -> tuple[list[Move] | None, float]:
    """(moves of a cheapest goal path or None, cost); the `incumbent` (moves, cost) is
    returned once the bound reaches its cost. Raises _LimitReached with the bound."""
    root_key = problem.key(problem.root)
    best = {root_key: 0.0}
    parent: dict[Hashable, tuple[Hashable, Move] | None] = {root_key: None}
    representative = {root_key: problem.root}
    tie = itertools.count()
    frontier = [(0.0, next(tie), root_key)]
    done: set[Hashable] = set()
    bound = 0.0
    while frontier:
        cost, _, key = heapq.heappop(frontier)
        if key in done:
            continue
        done.add(key)
        bound = cost
        if incumbent is not None and cost >= incumbent[1]:
            return incumbent
        state = representative[key]
        try:
            budget.tick()
        except _LimitReached as stop:
            stop.bound = bound
            raise
        if problem.is_goal(state):
            moves = []
            while parent[key] is not None:
                key, move = parent[key]
                moves.append(move)
            return moves[::-1], cost
        for move, child, step_cost in problem.children(state):
            child_key = problem.key(child)
            new_cost = cost + step_cost
            if child_key not in done and new_cost < best.get(child_key, float("inf")):
                best[child_key] = new_cost
                parent[child_key] = (key, move)
                representative[child_key] = child
                heapq.heappush(frontier, (new_cost, next(tie), child_key))
    return None, bound


def _layered(problem: SearchProblem, budget: _Budget) -> dict:
    """{"layers": distinct keys per depth, "goals": [(state, moves)]}, breadth-first.

    Keeps one parent per key of every layer (memory grows with the states reached)."""
    frontier = {problem.key(problem.root): problem.root}
    parents: list[dict[Hashable, tuple[Hashable, Move]]] = []
    counts: list[int] = []
    goals = []
    while frontier:
        counts.append(len(frontier))
        depth = len(counts) - 1
        following: dict[Hashable, State] = {}
        links: dict[Hashable, tuple[Hashable, Move]] = {}
        for key, state in frontier.items():
            budget.tick()
            if problem.is_goal(state):
                moves, walk = [], key
                for level in range(depth - 1, -1, -1):
                    walk, move = parents[level][walk]
                    moves.append(move)
                goals.append((state, moves[::-1]))
            for move, child, _ in problem.children(state):
                child_key = problem.key(child)
                if child_key not in following:
                    following[child_key] = child
                    links[child_key] = (key, move)
        parents.append(links)
        frontier = following
    return {"layers": counts, "goals": goals}


@dataclass
class _Dive:
    moves: list[Move] | None
    cost: float
    nodes: int
    exhausted: bool = False  # the whole space was searched: no goal is reachable


def _dive(problem: SearchProblem, limits: Limits) -> _Dive:
    """A first goal path by depth-first search within DIVE_SHARE of the time limit and of
    the node limit: the incumbent of a minimisation, or no moves when none was found."""
    budget = _Budget(limits, DIVE_SHARE)
    try:
        steps = _depth_first(problem, budget)
    except _LimitReached:
        return _Dive(None, 0.0, budget.nodes)
    if steps is None:
        return _Dive(None, 0.0, budget.nodes, exhausted=True)
    return _Dive([move for move, _ in steps], float(sum(c for _, c in steps)), budget.nodes)


def solve(problem: SearchProblem, limits: Limits) -> SolverResult:
    """Run the engine `problem.minimise` selects under `limits`; never raises.

    Returns status optimal | infeasible | time_limit | node_limit | error, the moves of the
    goal path as `solution` (the enumeration's dict for `layers`), the objective (path
    cost, `goal_objective`, or the number of goals for `layers`), the dual bound
    (equal to the objective when optimal), expanded nodes and wall-clock seconds. A
    minimisation stopped by a limit keeps the incumbent of its dive (solution and
    objective) with the bound of its uniform-cost search.
    """
    budget = _Budget(limits)
    started = time.perf_counter()
    result = SolverResult(status="error", solver="backtrack", solver_version=VERSION)
    seconds = None
    try:
        if problem.layers:
            enumerated = _layered(problem, budget)
            moves, cost = enumerated, len(enumerated["goals"])
        elif problem.minimise:
            incumbent = _dive(problem, limits)
            budget.nodes = incumbent.nodes
            if incumbent.moves is not None:
                result.solution, result.objective = incumbent.moves, incumbent.cost
            found = (incumbent.moves, incumbent.cost) if incumbent.moves is not None else None
            if incumbent.exhausted:  # the dive refuted every state: nothing to minimise
                moves, cost = None, 0.0
            else:
                moves, cost = _uniform_cost(problem, budget, found)
        else:
            steps = _depth_first(problem, budget)
            moves = None if steps is None else [move for move, _ in steps]
            cost = problem.goal_objective
        if moves is None:
            result.status = "infeasible"
        else:
            result.status, result.solution = "optimal", moves
            result.objective = result.bound = float(cost)
            result.gap = 0.0
    except _LimitReached as stop:
        seconds = time.perf_counter() - started  # before the search's tables are freed
        result.status = stop.status  # an incumbent from the dive stays in `result`
        result.bound = getattr(stop, "bound", None) if problem.minimise else None
    except Exception as exc:  # a crashing search becomes an error row, not a lost batch
        result.status, result.message = "error", f"{type(exc).__name__}: {exc}"
    result.gap = relative_gap(result.objective, result.bound)
    result.nodes = budget.nodes
    result.seconds = seconds if seconds is not None else time.perf_counter() - started
    return result
