"""Minimum hitting sets: the problem that `domination` and `no_k_in_row` both are.

A family describes an instance as a `HittingSet`: a universe of elements 0..size-1
(squares, cells), the sets every solution must hit (closed neighbourhoods, windows),
optionally the pairs of elements that may not both be chosen (independent domination),
and the words its error messages use. Everything that follows from that description is
written here once:

- `model`: the set-cover MIP x[e] = 1 if e is chosen; Σ_{e∈S} x[e] >= 1 for every set S;
  x[e] + x[f] <= 1 for every conflicting pair; minimise Σ x (Karp, "Reducibility among
  combinatorial problems", 1972: hitting set and set cover are one problem up to
  transposing the incidence matrix); family rows (cuts, symmetry rows) appended in the
  family's order, and an optional verified start;
- `Hits`, `greedy`, `improve`: the greedy start (choose the element in most sets not yet
  hit, lowest index on ties: Johnson, "Approximation algorithms for combinatorial
  problems", 1974, a ln(n)-approximation), the pruning of elements whose sets are all hit
  twice, and a seeded local search of drop-two-and-repair moves;
- `exhaustive`, `exhaustive_count`, `orbits`: the second method, iterative deepening over
  the budget that branches on the elements of the first set not yet hit (a set must be
  hit by one of them, so the branching is complete), and the enumeration of every
  optimum exactly once (the i-th element of the set is chosen with the earlier ones
  forbidden), counted up to a symmetry group by least images;
- `verify`, `encode`, `decode`, `from_mip`: the verifier and the catalog codec (sorted
  element indices, comma-separated: "3,10,17").

Shapes: `sets` is a tuple of tuples of element indices (any lengths, members distinct),
`conflicts` None or one frozenset per element; the numpy tables (`table`, `through`) are
built once per `HittingSet` and read-only.

Roads not taken: a bitset exhaustive search (faster, but the frozenset version is short,
obviously right, and fast enough for the small instances it checks); dancing links for
the enumeration (the set-by-set branching already generates each solution once);
deriving symmetry-breaking rows from the permutations (the families' half-count rows
need the geometry of the box, `puzzles._box`).
"""

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from puzzlesweep.core import InvalidSolution
from puzzlesweep.solvers.mip import MipModel

Chosen = tuple[int, ...]  # sorted indices of the chosen elements
Row = tuple[list[int], list[float], float, float]  # cols, coefs, lower, upper


@dataclass(frozen=True, eq=False)
class HittingSet:
    """A hitting-set instance: choose elements of 0..size-1 so that every set of `sets`
    holds a chosen one (and, with `conflicts`, no element together with one of
    conflicts[e]). `elements` names the elements in the "must be distinct indices"
    message; `unhit` is the message for a set left unhit, formatted with `index` (the
    set's position) and `members` (its tuple); `conflict` for a conflict, formatted with
    `element`. Compared and hashed by identity (families cache one per instance)."""

    size: int
    sets: tuple[tuple[int, ...], ...]
    elements: str = "elements"
    unhit: str = "set {index} {members} is not hit"
    conflict: str = "element {element} conflicts with another chosen element"
    conflicts: tuple[frozenset[int], ...] | None = None

    @cached_property
    def table(self) -> np.ndarray:
        """The sets as a read-only int64 array (sets × longest set), padded with `size`
        (an element that is never chosen)."""
        width = max(map(len, self.sets), default=0)
        table = np.full((len(self.sets), width), self.size, dtype=np.int64)
        for i, members in enumerate(self.sets):
            table[i, : len(members)] = members
        table.setflags(write=False)
        return table

    @cached_property
    def through(self) -> tuple[np.ndarray, ...]:
        """For each element, the indices of the sets (rows of `table`) that hold it, as
        read-only int64 arrays."""
        owners = np.repeat(np.arange(len(self.table)), self.table.shape[1])
        order = np.argsort(self.table.ravel(), kind="stable")
        bounds = np.searchsorted(self.table.ravel()[order], np.arange(self.size + 1))
        found = tuple(owners[order[a:b]] for a, b in itertools.pairwise(bounds))
        for array in found:
            array.setflags(write=False)
        return found


def at_least(cols: list[int], least: float) -> Row:
    """The row Σ x over `cols` >= least (a cut: `least` is a proven lower limit)."""
    return list(cols), [1.0] * len(cols), least, math.inf


def balance(more: list[int], fewer: list[int]) -> Row:
    """The row Σ x over `more` >= Σ x over `fewer` (a symmetry-breaking row)."""
    return more + fewer, [1.0] * len(more) + [-1.0] * len(fewer), 0.0, math.inf


def model(problem: HittingSet, rows=(), start: Chosen | None = None) -> MipModel:
    """The MIP of the module docstring: column e is element e (binary, cost 1), one row
    per set in order, then one per conflicting pair e < f, then `rows` (`at_least`,
    `balance`) in the order given. `start`, if given, is checked by `verify` (raises
    InvalidSolution: a wrong start must never reach a solver) and handed over as a full
    0-1 incumbent."""
    m = MipModel([], [], [], [])
    m.add_columns(problem.size, 1.0, 0.0, 1.0, True)
    for members in problem.sets:
        m.add_row(list(members), [1.0] * len(members), 1.0, math.inf)
    for e, others in enumerate(problem.conflicts or ()):
        for f in sorted(others):
            if e < f:
                m.add_row([e, f], [1.0, 1.0], 0.0, 1.0)
    for cols, coefs, lo, hi in rows:
        m.add_row(cols, coefs, lo, hi)
    if start is not None:
        verify(problem, start)
        chosen = set(start)
        m.start = [1.0 if e in chosen else 0.0 for e in range(problem.size)]
    return m


def from_mip(x: list[float]) -> Chosen:
    """The chosen elements of a MIP solution: the columns at 1 (above 0.5)."""
    return tuple(e for e, value in enumerate(x) if value > 0.5)


class Hits:
    """A choice being repaired: `chosen` (bool per element, plus the never-chosen pad
    element `size`) and `hits` (chosen elements per set), kept consistent by `choose`
    and `drop`. Built from `start`, a bool array of `problem.size` entries."""

    def __init__(self, problem: HittingSet, start: np.ndarray):
        self.problem, self.table, self.through = problem, problem.table, problem.through
        self.chosen = np.zeros(problem.size + 1, dtype=bool)
        self.chosen[: problem.size] = start
        self.hits = self.chosen[self.table].sum(axis=1)

    def choose(self, e: int) -> None:
        """Choose element `e`."""
        self.chosen[e] = True
        self.hits[self.through[e]] += 1

    def drop(self, e: int) -> None:
        """Un-choose element `e`."""
        self.chosen[e] = False
        self.hits[self.through[e]] -= 1

    def elements(self) -> Chosen:
        """The chosen elements, sorted."""
        return tuple(int(e) for e in np.flatnonzero(self.chosen))

    def repair(self, unhit: np.ndarray, rng=None, avoid=()) -> list[int]:
        """Hit the sets `unhit` (indices) greedily: choose the element, among those of the
        sets still unhit, that lies in most of them (one of `avoid` only when a set has no
        other; ties broken by `rng`, else the lowest index); returns the elements chosen
        in order. Raises ValueError when a set has no element at all."""
        added = []
        while len(unhit := unhit[self.hits[unhit] == 0]):
            members = self.table[unhit].ravel()
            cells, counts = np.unique(members[members < self.problem.size], return_counts=True)
            if not len(cells):
                raise ValueError(f"set {int(unhit[0])} has no element that could hit it")
            score = counts.astype(float)
            score[np.isin(cells, avoid)] = 0.0
            if rng is not None:
                score += 0.5 * rng.random(len(score))
            added.append(int(cells[np.argmax(score)]))
            self.choose(added[-1])
        return added

    def prune(self, order) -> None:
        """Un-choose, in the order given, every chosen element whose sets are all hit at
        least twice (each stays hit)."""
        for e in order:
            if self.chosen[e] and (self.hits[self.through[e]] >= 2).all():
                self.drop(int(e))


def greedy(problem: HittingSet) -> Chosen:
    """A hitting set (conflicts ignored): `Hits.repair` from nothing, then `Hits.prune`
    from the last chosen back. Raises ValueError when a set is empty."""
    state = Hits(problem, np.zeros(problem.size, dtype=bool))
    added = state.repair(np.arange(len(problem.sets)))
    state.prune(reversed(added))
    return state.elements()


def improve(state: Hits, moves: int, seed: int = 0) -> None:
    """Improve `state` in place by `moves` moves of: un-choose two chosen elements (picked
    by a generator seeded with `seed`), repair the sets they leave unhit without them,
    prune (in random order) the elements that share a set with the new ones; a move is
    kept when it chooses no more elements, undone otherwise. Ends on the best choice seen,
    so the result is deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    best, pad = state.chosen.copy(), state.problem.size
    for _ in range(moves):
        if state.chosen.sum() < 2:
            break
        before, hits, size = state.chosen.copy(), state.hits.copy(), state.chosen.sum()
        back = rng.choice(np.flatnonzero(state.chosen), size=2, replace=False)
        for e in back:
            state.drop(int(e))
        added = state.repair(np.concatenate([state.through[e] for e in back]), rng, back)
        near = {int(e) for a in added for e in state.table[state.through[a]].ravel()}
        candidates = np.unique([e for e in sorted(near - set(added) - {pad}) if state.chosen[e]])
        state.prune(rng.permutation(candidates))
        if state.chosen.sum() > size:
            state.chosen, state.hits = before, hits
        elif state.chosen.sum() < best.sum():
            best = state.chosen.copy()
    state.chosen = best
    state.hits = best[state.table].sum(axis=1)


def _first_unhit(problem: HittingSet, chosen: frozenset[int]) -> tuple[int, ...] | None:
    """The first set of `problem.sets` that `chosen` misses, or None."""
    return next((s for s in problem.sets if chosen.isdisjoint(s)), None)


def exhaustive(problem: HittingSet) -> tuple[float | None, Chosen | None]:
    """(fewest elements, a sorted choice of them) by iterative deepening over the budget
    b = 0, 1, ...: take the first set not yet hit and try each of its elements in order
    (skipping those that conflict with a chosen one). (None, None) when nothing works
    (an empty set, or conflicts that no choice escapes). Exponential: for small
    instances only (the caller limits their size)."""
    if any(not members for members in problem.sets):
        return None, None
    conflicts = problem.conflicts

    def hit(chosen: frozenset[int], budget: int) -> frozenset[int] | None:
        members = _first_unhit(problem, chosen)
        if members is None:
            return chosen
        if budget == 0:
            return None
        for e in members:
            if conflicts is not None and not chosen.isdisjoint(conflicts[e]):
                continue
            found = hit(chosen | {e}, budget - 1)
            if found is not None:
                return found
        return None

    for budget in range(problem.size + 1):
        found = hit(frozenset(), budget)
        if found is not None:
            return float(budget), tuple(sorted(found))
    return None, None


def orbits(solutions: list[Chosen], group: list[list[int]]) -> int:
    """How many of `solutions` (element sets) are distinct up to `group` (permutations,
    image[e] = the element e goes to): the number of distinct least images
    min_g sorted(g(S))."""
    return len({min(tuple(sorted(g[e] for e in sol)) for g in group) for sol in solutions})


def exhaustive_count(problem: HittingSet, group: list[list[int]]) -> tuple[int, int]:
    """(optimal hitting sets, inequivalent ones up to `group`), independent of SCIP and
    of Burnside's lemma: the optimum from `exhaustive`, then every hitting set of that
    size, each generated once (branch on the first unhit set: its i-th element is chosen
    with its earlier elements forbidden), and its orbits counted by `orbits`. Conflicts
    are not enumerated here: the caller refuses such problems. (0, 0) without a
    solution."""
    best, _ = exhaustive(problem)
    if best is None:
        return 0, 0
    found: list[Chosen] = []

    def hit(chosen: frozenset[int], banned: frozenset[int], budget: int) -> None:
        members = _first_unhit(problem, chosen)
        if members is None:
            found.append(tuple(sorted(chosen)))
            return
        if budget == 0:
            return
        for e in members:
            if e not in banned:
                hit(chosen | {e}, banned, budget - 1)
            banned = banned | {e}

    hit(frozenset(), frozenset(), int(best))
    return len(found), orbits(found, group)


def verify(problem: HittingSet, solution: Chosen) -> int:
    """The number of chosen elements; raises InvalidSolution if an element is out of
    0..size-1 or repeated, a set is left unhit (`problem.unhit`), or two chosen elements
    conflict (`problem.conflict`)."""
    chosen = set(solution)
    if len(chosen) != len(solution) or any(not 0 <= e < problem.size for e in solution):
        raise InvalidSolution(
            f"{problem.elements} must be distinct indices in 0..{problem.size - 1}"
        )
    for i, members in enumerate(problem.sets):
        if chosen.isdisjoint(members):
            raise InvalidSolution(problem.unhit.format(index=i, members=members))
    for e in chosen if problem.conflicts is not None else ():
        if not chosen.isdisjoint(problem.conflicts[e]):
            raise InvalidSolution(problem.conflict.format(element=e))
    return len(chosen)


def encode(solution: Chosen) -> str:
    """Comma-separated chosen element indices, 0-based ("3,10,17"; "" for none)."""
    return ",".join(map(str, solution))


def decode(text: str) -> Chosen:
    """The inverse of `encode`; raises ValueError on a part that is not an integer."""
    return tuple(int(t) for t in text.split(",")) if text else ()
