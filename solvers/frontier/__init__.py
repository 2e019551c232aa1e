"""Compiled search over bitboards with jump rules: fewest moves, solvability, layers.

The states are sets of occupied cells of a board of at most 64 cells, held as uint64
bitboards; a *rule* (a, b, c) may fire when cells a and b are occupied and c is empty,
and then flips all three (a token on a jumps over b into c and b is removed: peg
solitaire on any board, but the engine knows no board). A *move* is one or more rules
fired in a row where each starts on the cell the one before landed on (one token moving
on). Symmetry: a group of cell permutations under which the rules are invariant; a
state is stored as its *key*, the least of its images (byte lookup tables, built once).
The inner loops are compiled with numba (`cache=True`: the first run on a machine
compiles for about half a minute and writes the cache; later runs load it).

Modules: `problem` (the problem and the tables derived from it once), `kernels` (the
compiled loops), `layers` (the budget, expanding, looking up and walking back through
layers), and one per question: `moves` (min_moves; with `beam`, the heuristic that
meets the solutions of a target), `depth_first` (solve), `reachable`; `sharded` and
`run_folder`: min_moves with its layers sharded on disk, for a cluster. The engine
reports itself as solver `frontier`.

Three questions, `LayeredProblem.question`:
- `min_moves`: the fewest moves from a start to a goal, target by target: first beams
  (`beam`: the best few positions by the bound kept per move; a beam finds a solution of
  the target, or, when it never had to cut, proves there is none), then a breadth-first
  search by moves from both ends, meeting in the middle. Forward from the starts by
  moves; backward from the goals by *reverse moves* (rules undone in a row by one token:
  c, full, jumps back over the empty b into the empty a, and may go on from a), so that
  a position at backward distance d reaches a goal in d moves. Each step expands the
  side with the smaller last layer by one move, keeps the children that are new to that
  side (sorted uint64 arrays, one per distance: the visited set, no hash table) and
  looks them up in every layer of the other side. If forward radius a and backward
  radius b have no position in common, no solution has a + b moves or fewer (cut any
  solution after min(a, m) moves), so the bound is a + b + 1; the first common position
  found while expanding gives a solution of exactly the bound, which is therefore
  optimal. That last expansion stops at the first hit and is never stored. A position
  needs no "last token moved" in its state: going on with the same token is itself one
  longer move, which the move generator also produces.
- `solve`: is a goal reachable at all (by any number of moves)? First the position
  classes: the GF(2) invariants of the rules (weights w over cells with
  w(a) + w(b) + w(c) = 0 mod 2 for every rule; every rule leaves their parity sums
  unchanged; G. I. Bell's position classes, "Solving Triangular Peg Solitaire", JIS 11
  (2008) 08.4.8, are these for the triangle), computed by elimination, rule out the
  goals in another class at once. Then a depth-first search by single rules in the
  given rule order, with a table of keys of positions proven dead (open addressing,
  sized from the memory limit; when full it stops growing and the search stays exact),
  resumable in slices so the time and node limits hold.
- `reachable`: every exact position after 0, 1, 2, ... rules from the starts (no
  symmetry, so the counts are of real positions), as sorted arrays, and for every goal
  reached one path to it, found backwards through the layers.

Limits: time and node limits are checked between slices of work (a slice is at most
`CHUNK` states or `SLICE` search nodes); `memory` (bytes, per problem) bounds the states
kept (layers, buffers, the dead table): a search that would exceed it stops with status
`error` and the message "memory limit", reporting the bound proven so far.

Result: status optimal | infeasible | time_limit | node_limit | error; objective = the
fewest moves (`min_moves`), 1 (`solve`, the pegs left) or the number of goals reached
(`reachable`); bound = the proven lower bound; nodes = states expanded; solution = the
rules of the path as (a, b, c) triples, or {"layers": counts, "goals": [(goal, path)]};
extra = {"forward": layer sizes, "backward": layer sizes, "attempts": {target:
{"beam": positions the beams kept, "forward", "backward": layer sizes, "made": children
made, "kept": children the bound kept, "seconds"}}} or {"states": ...}.

Roads not taken: a depth-first search by moves bounded by the target (IDA*, a table of
keys with the moves left each was searched with, kept across targets): T_9's target 15
failed after 137 M positions in 826 s, as the layers' 970 s, and T_8 over all starts
took 39.7 s against the layers' 29.4 s (it meets a solution only where its order
happens to lead); a hash set per layer (sorted arrays are half the memory and give the
set difference and the look-ups by merging or binary search); a dynamic programme over
(board, last token) by single rules (every intermediate position of every move is
stored, many times the states of the move layers here: it ran out of memory on T_8 over
all starts; benchmarks/README.md, peg_bench.py); meeting in the middle through
the complement of a position (the reverse game is the game on the complement board for
single jumps, but it turns a move into jumps by different tokens, so move counts are
not preserved); pagoda functions as cuts (weights p >= 0 with p(a) + p(b) >= p(c) on
every rule: a board whose weight is below every goal's cannot reach one; J. D.
Beasley, "The Ins and Outs of Peg Solitaire", 1985; on 300 boards sampled from forward
layer 10 of T_8 from hole 5, a linear programme per board found no such weights for
any: the boards of the middle game still hold too many tokens).
"""

import logging
import time

import numpy as np

from .. import Limits, SolverResult, relative_gap
from .depth_first import solvable
from .kernels import dfs, expand, rehash
from .layers import Budget, Stop
from .moves import count_moves, min_moves
from .problem import MEMORY, LayeredProblem, invariants, merson_regions, position_class
from .reachable import reachable

__all__ = [
    "MEMORY",
    "NAME",
    "VERSION",
    "LayeredProblem",
    "count_moves",
    "invariants",
    "merson_regions",
    "position_class",
    "solve",
    "warm",
]

#: The solver name the engine's results carry (the `solver` column).
NAME = "frontier"
VERSION = "puzzlesweep-frontier-2"

log = logging.getLogger(__name__)


#: Seconds each warm-up question may take: compiling on a cold cache takes about half a
#: minute, longer on a loaded machine; a warm-up stopped at this limit is no error.
WARM_SECONDS = 600.0


def warm() -> float:
    """Load (or, on a new machine, compile) the kernels once per process by asking every
    question on a line of five cells; returns the seconds it took, 0 when this process
    holds them already (numba's dispatchers know their compiled signatures: no state of
    ours). Its answers are not used: whether the min_moves dive finds its incumbent
    within its share of the time (not while a cold cache compiles) changes nothing."""
    if all(kernel.signatures for kernel in (expand, dfs, rehash)):
        return 0.0
    started = time.perf_counter()
    rules = np.array([(0, 1, 2), (1, 2, 3), (2, 3, 4), (2, 1, 0), (3, 2, 1), (4, 3, 2)])
    group = np.array([[0, 1, 2, 3, 4]])
    quiet, log.disabled = log.disabled, True
    try:
        for question in ("min_moves", "solve", "reachable"):
            tiny = LayeredProblem(5, rules, group, (0b01011,), (1 << 4,), question)
            try:
                budget = Budget(Limits(WARM_SECONDS), MEMORY)
                _QUESTIONS[question](tiny, budget, SolverResult(status="error"))
            except Stop:  # compiling outlasted the limit: what was compiled stays loaded
                pass
    finally:
        log.disabled = quiet
    rehash(np.zeros(4, np.uint64), np.zeros(8, np.uint64))
    return time.perf_counter() - started


_QUESTIONS = {"min_moves": min_moves, "solve": solvable, "reachable": reachable}


def solve(problem: LayeredProblem, limits: Limits) -> SolverResult:
    """Answer `problem.question` under `limits` and the problem's memory; never raises
    (a crash is an `error` result). See the module docstring for the fields. The first
    call in a process loads the compiled kernels first (`warm`), outside the limits and
    the reported seconds: the time it took is extra["warm_seconds"]."""
    warmed = warm()
    started = time.perf_counter()
    result = SolverResult(status="error", solver=NAME, solver_version=VERSION)
    budget = Budget(limits, problem.memory)
    try:
        _QUESTIONS[problem.question](problem, budget, result)
    except Stop as stop:
        result.status, result.message = stop.status, stop.message
        if problem.question != "min_moves":
            result.bound = None
    except MemoryError as exc:  # an allocation the system refused: a limit, like Stop
        result.status, result.message = "error", f"memory limit: {exc}"
        if problem.question != "min_moves":  # min_moves' bound is what failed targets proved
            result.bound = None
    except Exception as exc:  # a crashing search becomes an error row, not a lost batch
        result.status, result.message = "error", f"{type(exc).__name__}: {exc}"
        result.bound = None
    result.gap = relative_gap(result.objective, result.bound)
    if warmed:
        result.extra["warm_seconds"] = warmed
    result.nodes = budget.nodes
    result.seconds = time.perf_counter() - started
    return result
