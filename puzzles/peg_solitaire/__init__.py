"""Triangular peg solitaire: jump pegs until one is left, perhaps at a given hole.

Sources: the puzzle's seed document (T_5: 15 holes, 36 jump rules, backtracking with
pruning of dead positions and their symmetric images; 13 jumps to one peg); fewest moves
over all one-vacancy starts and finishes, OEIS A127500: T_4 → 5, T_5 → 9, T_6 → 9,
T_7 → 12, T_8 → 13 (G. I. Bell, "Solving Triangular Peg Solitaire", JIS 11 (2008)
08.4.8, arXiv math/0703865).

The family is a package of four modules: `board` (the vocabulary and the rule tables:
holes, jumps, symmetries, start boards, moves from jumps), this module (the family's
rules: parameters, symmetry, the second method, the verifier, the codec), `engine` (the
problem handed to the compiled solver `frontier`, and its answer read back) and `draw`
(text and figures). The rules never import the drawings or the engine's internals; the
package gives the family protocol's names in one place.

Vocabulary (see `board`): holes numbered 1..T(n), T(n) = n(n+1)/2, row by row from the
apex (the seed's layout: 1 / 2 3 / 4 5 6 / ...), 0-based inside the code; a board is a
bitmask of pegs; a jump (from, over, to); a move, one or more consecutive jumps by the
same peg; the 6 symmetries of the triangle.

Solution: the jumps in order; encoded in the catalog as comma-separated `from-to` hole
numbers, 1-based ("4-1,6-4,..."). For `reachable`, a `Reachable`: the number of distinct
positions after 0, 1, 2, ... jumps and, for every hole where a single last peg can stand
(under the finish rule), one jump sequence that ends there as a witness; encoded as
`L=1,2,8,...|1=4-1,6-4,...|7=...` (layer counts, then `hole=jumps`, holes 1-based).
`verify` replays every witness; the layer counts are re-checked only for consistency
(first layer 1, last layer = finishing holes when the finish is `any`), since
recounting them is the enumeration itself.

Questions (the parameter and the catalog column `question`; the catalog's `objective`
column holds the answer), all answered by the compiled bitboard engine
`solvers/frontier/` (numba) on the problem `engine.problem(...)` builds:
- `min_moves` (objective = moves): a breadth-first search by moves from both ends that
  meets in the middle; forward from the start by moves (a peg's chain of jumps, stopped
  anywhere), backward from the finishing one-peg positions by reverse moves (a peg
  undoing jumps in a row); every layer is a sorted uint64 array of keys, the least image
  of a board under the symmetries. Layers on both sides without a common position prove
  that no solution has a + b moves (the bound); the first common position is a solution
  with exactly the bound. Each target L keeps a position only while its moves made plus
  a lower bound on the moves still needed stay within L: the Merson regions (corners,
  edge pairs, and the 7-hole stars of the interior by their fewest hitting cells), each
  full one needing a move that starts in it. A depth-first dive first gives an
  incumbent (what a time limit reports) and proves most impossible instances at once.
- `solve` (objective = pegs left, 1): G. I. Bell's position classes (the GF(2)
  invariants of the jump rules: 4 independent parities on the triangle) rule out a
  finish in another class of the start; then a depth-first search in the jump order of
  `engine.ordered_jumps`, with a table of positions (and all their images) proven dead.
- `reachable` (objective = finishing holes): every exact position after 0, 1, ... jumps
  (no symmetry), and a witness per finishing hole found backwards through the layers.

Boards are uint64 bitboards, so side <= MAX_SIDE (T_10: 55 holes).

Symmetry: `canonical(p)` maps the start hole (and a finish hole) to the least image
under the 6 symmetries; a finish hole equal to the start becomes `start`.
Second method: `exhaustive(p)`, a layered enumeration of exact positions in plain
Python dicts (no symmetry, no pruning, no numpy, one jump at a time with the last peg
in the state) that answers all three questions; for small boards (side <= 6).

The engine reproduces the fewest moves over all starts (OEIS A127500) for T_4..T_8:
5, 9, 9, 12, 13. Its times and memory on each board are measured by
`benchmarks/peg_bench.py` (benchmarks/README.md, "Peg solitaire sizes").

Roads not taken: a MIP over time-indexed jumps as the second method (the enumeration is
simpler and also answers `reachable`); a Python uniform-cost search over (board, last
peg) and a Python depth-first search for sides 9-12 (both far slower than the compiled
engine); a layered numpy programme over (board, last peg) by single jumps (every
intermediate position of every move is a state, where layers by whole moves hold far
fewer: it ran out of memory on T_8; figures in benchmarks/README.md, peg_bench.py);
meeting in the middle through the complement board (the reverse game is the game on the
complement for single jumps, but it breaks a move into jumps by different pegs); pagoda
functions as cuts (no sampled middle-game board of T_8 had one; the stars, regions of
the interior, raised the bound instead: T_10's start bound 16-17 against 13-14); counting
positions up to symmetry in `reachable` (exact positions are what a player counts); one
module for rules, engine and drawings (they change for different reasons: a new
question, a faster engine, a clearer figure).
"""

from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from puzzlesweep.core import InvalidSolution
from puzzlesweep.core import Params as _Params
from puzzlesweep.solvers.frontier import LayeredProblem

from .board import (
    DIRECTIONS,
    MAX_SIDE,
    Jump,
    Reachable,
    Solution,
    geometry,
    holes,
    move_path,
    moves_of,
    play,
    start_board,
    symmetries,
)
from .draw import picture, render
from .engine import from_search, ordered_jumps, problem, search
from .enumeration import exhaustive

__all__ = [
    "NAME",
    "SOLVERS",
    "QUESTIONS",
    "Params",
    "expand",
    "canonical",
    "from_canonical",
    "search",
    "from_search",
    "exhaustive",
    "verify",
    "verify_any_start",
    "min_moves_search",
    "encode",
    "decode",
    "render",
    "picture",
    "details",
    "moves",
    "problem",
    "ordered_jumps",
    "holes",
    "geometry",
    "symmetries",
    "start_board",
    "moves_of",
    "Jump",
    "Reachable",
    "Solution",
    "DIRECTIONS",
    "MAX_SIDE",
]

NAME = "peg_solitaire"
SOLVERS = ("frontier",)
#: The dashboard's axes: the size parameter on x (a list counts its product) and the
#: parameters whose values make one series each.
AXES = ("side", ("question", "finish"))
#: The questions an instance may ask (the parameter and the catalog column `question`).
QUESTIONS = ("solve", "min_moves", "reachable")
#: The smallest board: T_1 holds no peg once its start hole is empty.
MIN_SIDE = 2


class Params(_Params):
    """side: holes on a side (2..10: boards of at most 64 holes; T_2 and T_3 have no
    solution, and T_1 holds no peg once its start is empty); start: the empty hole
    (1..T(side)); finish: `any`, `start` or a hole number where the last peg must stand;
    question: `solve`, `min_moves` or `reachable`. The key `objective` is refused with a
    message naming `question` (the catalog's `objective` column holds the answer)."""

    side: int = Field(description=f"holes on a side, {MIN_SIDE}..{MAX_SIDE}")
    start: int = Field(description="the empty hole, 1..T(side), row by row from the apex")
    finish: str = Field("any", description="where the last peg stands: any, start or a hole")
    question: Literal["solve", "min_moves", "reachable"] = Field(
        "solve", description="solve (pegs left), min_moves (fewest moves) or reachable"
    )

    @model_validator(mode="before")
    @classmethod
    def _no_objective(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and "objective" in raw:
            raise ValueError(
                f"objective is not a parameter of peg_solitaire: the question asked is "
                f"called question (question={raw['objective']}); the column objective "
                f"holds the answer"
            )
        return raw

    @field_validator("side")
    @classmethod
    def _side(cls, side: int) -> int:
        if not MIN_SIDE <= side <= MAX_SIDE:
            raise ValueError(f"side must lie in {MIN_SIDE}..{MAX_SIDE}")
        return side

    @field_validator("finish", mode="before")
    @classmethod
    def _finish(cls, finish: object) -> str:
        return str(finish)

    @model_validator(mode="after")
    def _holes(self) -> "Params":
        total = holes(self.side)
        if not 1 <= self.start <= total:
            raise ValueError(f"start hole {self.start} is not on T_{self.side} (1..{total})")
        if self.finish not in ("any", "start") and not (
            self.finish.isdigit() and 1 <= int(self.finish) <= total
        ):
            raise ValueError(f"finish must be any, start or a hole in 1..{total}")
        return self

    @property
    def finish_hole(self) -> int | None:
        """The 0-based hole where the last peg must stand, or None for any."""
        if self.finish == "any":
            return None
        return self.start - 1 if self.finish == "start" else int(self.finish) - 1


def expand(point: dict) -> list[dict]:
    """`start="all"` → every hole of the board, 1..T(side)."""
    if point.get("start") == "all":
        return [{**point, "start": h} for h in range(1, holes(point["side"]) + 1)]
    return [point]


def _symmetry(p: Params) -> tuple[tuple[int, ...], Params]:
    """(the symmetry g taking p to its canonical form, that form)."""
    target = p.finish_hole
    finish = "start" if target == p.start - 1 else p.finish

    def image(g: tuple[int, ...]) -> tuple[int, int]:
        return g[p.start - 1], -1 if finish in ("any", "start") else g[target]

    g = min(symmetries(p.side), key=image)
    start, hole = image(g)
    finish = finish if hole < 0 else str(hole + 1)
    return g, p.model_copy(update={"start": start + 1, "finish": finish})


def canonical(p: Params) -> Params:
    """The least image of `p` under the 6 symmetries of the triangle: the start hole (then
    the finish hole) with the smallest number; a finish hole equal to the start becomes
    `start`. Equivalent instances have equal canonical forms (corners of T_5: 1, 11, 15
    all become start 1)."""
    return _symmetry(p)[1]


def from_canonical(p: Params, solution: Solution) -> Solution:
    """A solution of `canonical(p)` carried back to `p` by the inverse symmetry."""
    g, _ = _symmetry(p)
    back = {image: hole for hole, image in enumerate(g)}

    def jumps(path):
        return tuple((back[f], back[o], back[t]) for f, o, t in path)

    if isinstance(solution, Reachable):
        finishes = sorted((back[h], jumps(path)) for h, path in solution.finishes)
        return Reachable(solution.layers, tuple(finishes))
    return jumps(solution)


def details(p: Params, solution: Solution) -> dict:
    """Extra fields for the CLI's `--json`: for `reachable`, {"layers": positions after
    0, 1, ... jumps, "finishing_holes": 1-based holes}; otherwise {"moves": the move list,
    each move as its path of 1-based holes "7-2-9", "jumps": the number of jumps}."""
    if isinstance(solution, Reachable):
        return {
            "layers": list(solution.layers),
            "finishing_holes": [h + 1 for h, _ in solution.finishes],
        }
    return {"moves": [move_path(m) for m in moves_of(solution)], "jumps": len(solution)}


def moves(solution: tuple[Jump, ...]) -> int:
    """The number of moves: maximal runs of jumps in which each starts where the last
    landed."""
    return len(moves_of(solution))


def verify(p: Params, solution: Solution) -> int:
    """Replays the jumps from the start position; returns pegs left (question `solve`)
    or moves (`min_moves`). Raises InvalidSolution on an illegal jump, more than one peg
    left, or a last peg off the finish hole. For `reachable`, replays every witness,
    checks that it ends on its hole and that the layer counts are consistent, and
    returns the number of finishing holes."""
    if p.question == "reachable" or isinstance(solution, Reachable):
        return _verify_reachable(p, solution)
    return _replay(p, solution)


def _verify_reachable(p: Params, answer: Solution) -> int:
    if p.question != "reachable" or not isinstance(answer, Reachable):
        raise InvalidSolution("a reachable answer belongs to question reachable only")
    layers, size = answer.layers, holes(p.side)
    if not layers or layers[0] != 1 or len(layers) > size - 1 or min(layers) < 1:
        raise InvalidSolution(f"layer counts {list(layers)} are not from a start position")
    ends = [h for h, _ in answer.finishes]
    if len(set(ends)) != len(ends):
        raise InvalidSolution("a finishing hole is listed twice")
    if ends and len(layers) != size - 1:
        raise InvalidSolution("finishing holes need layers down to one peg")
    if p.finish == "any" and len(layers) == size - 1 and layers[-1] != len(ends):
        raise InvalidSolution(f"{layers[-1]} one-peg positions but {len(ends)} holes")
    for hole, path in answer.finishes:
        single = p.model_copy(update={"finish": str(hole + 1), "question": "solve"})
        if p.finish_hole not in (None, hole):
            raise InvalidSolution(f"hole {hole + 1} breaks the finish rule {p.finish}")
        _replay(single, path)
    return len(ends)


def _replay(p: Params, solution: tuple[Jump, ...]) -> int:
    _, jumps = geometry(p.side)
    rules = set(jumps)
    board = start_board(p.side, p.start - 1)
    for n, (f, o, t) in enumerate(solution, 1):
        if (f, o, t) not in rules or not (board >> f & 1 and board >> o & 1) or board >> t & 1:
            raise InvalidSolution(f"jump {n} ({f + 1}-{t + 1}) is not legal")
        board = play(board, (f, o, t))
    if board.bit_count() != 1:
        raise InvalidSolution(f"{board.bit_count()} pegs are left, not 1")
    if p.finish_hole is not None and board != 1 << p.finish_hole:
        raise InvalidSolution(f"the last peg is not on hole {p.finish_hole + 1}")
    return 1 if p.question == "solve" else moves(solution)


def encode(solution: Solution) -> str:
    """Comma-separated `from-to` hole numbers, 1-based ("4-1,6-4"); a `Reachable` as
    `L=` layer counts then `|hole=jumps` per finishing hole ("L=1,2|1=4-1,6-4")."""
    if isinstance(solution, Reachable):
        parts = ["L=" + ",".join(map(str, solution.layers))]
        parts += [f"{h + 1}={encode(path)}" for h, path in solution.finishes]
        return "|".join(parts)
    return ",".join(f"{f + 1}-{t + 1}" for f, _, t in solution)


def decode(text: str) -> Solution:
    """The inverse of `encode`: the jumped-over hole is the one between from and to.
    Raises ValueError on text that is not an encoding."""
    if text.startswith("L="):
        head, *rest = text.split("|")
        finishes = []
        for item in rest:
            hole, _, path = item.partition("=")
            finishes.append((int(hole) - 1, decode(path)))
        return Reachable(tuple(int(c) for c in head[2:].split(",")), tuple(finishes))
    jumps = []
    for item in filter(None, text.split(",")):
        f, t = (int(h) - 1 for h in item.split("-"))
        side = 1
        while holes(side) <= max(f, t):
            side += 1
        places, _ = geometry(max(side, 2))
        (fr, fc), (tr, tc) = places[f], places[t]
        jumps.append((f, places.index(((fr + tr) // 2, (fc + tc) // 2)), t))
    return tuple(jumps)


def verify_any_start(side: int, solution: tuple[Jump, ...]) -> int:
    """The family's `verify` of a `min_moves` solution of T_side from the hole its first
    jump lands in, the last peg anywhere (the all-starts question of OEIS A127500, which
    `problem` poses with every hole a start); returns the moves. Raises InvalidSolution
    as `verify` (an empty solution: too many pegs are left)."""
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
