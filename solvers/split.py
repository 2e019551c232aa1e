"""Split one MIP into subproblems that cover its feasible set, and combine their bounds.

Vocabulary:
- group: a list of column indices of a 0/1 model (a layer of cells, say); its *count*
  is the sum of those columns in a solution.
- bucket: an inclusive interval [lo, hi] of counts of one group. `count_split` cuts the
  counts 0..len(group) of each group into the buckets [0, low-1], low, low+1, ...,
  high-1, [high, len(group)] (single counts in the middle), so every 0/1 vector falls in
  exactly one bucket per group: the buckets partition {0,1}^n whatever `low` and `high`
  are, and no claim about the family is needed for coverage. A good `low` (a proven
  lower limit of the group's count) only makes the first bucket trivially infeasible.
- subproblem (`Subproblem`): one bucket per group, i.e. the rows lo <= Σ_group x <= hi,
  plus optional fixings x_j = v. It is a small handle: a worker rebuilds the model and
  calls `restrict`.
- symmetry: a permutation of the columns that maps feasible solutions to feasible
  solutions of the same objective (e.g. a reflection of a box). One that maps every
  group onto a group induces a permutation of the groups.

Why symmetry may drop subproblems (the argument): let P be the set of group
permutations induced by the given column symmetries, closed under composition (a group;
`closure`). A solution x with bucket vector v has images g(x), of the same objective,
whose bucket vectors are exactly the π·v, π in P ((π·v)_i = v_{π(i)}). `count_split`
keeps the vector v only if v is the lexicographic minimum of its orbit {π·v}; every
orbit has exactly one minimum, so for every feasible x some image g(x) lies in a kept
subproblem with the same objective. Hence min over kept subproblems of their optima =
the optimum of the whole model, and min of their dual bounds is a valid dual bound. Only
the optimum value is preserved, not every solution (that is all a proof needs).

Combining (`part_lower`, `combine`): a subproblem solved with a *cutoff* c (the extra
row objective <= c, added by `restrict`) that comes back infeasible proves that its own
optimum is > c, i.e. >= c + 1 for an integral objective (`mip.has_integral_objective`); one that
stops at a limit proves min(dual bound, c + 1). Without a cutoff an infeasible part
contributes +inf. The proven global bound is the minimum over parts of these lower
limits (−inf while a part is missing or failed), rounded up for an integral objective;
the incumbent is the best objective found (in a part or given); a proof is reached when
bound >= incumbent.

Roads not taken: HiGHS's `objective_bound` option as the cutoff. Its documented meaning
is "objective bound for termination of the MIP solver"; what status and dual bound come
back when nothing beats it is not documented, whereas an explicit row makes
"infeasible" mean exactly "no solution of objective <= c" (one dense row per part
costs little here). Branching on single binary columns (`variable_split`) is provided
but counts are the default: fixing a few of 252 cells moves the LP bound far less than
fixing how many of 36 cells are removed.

Nothing here knows a puzzle family, Dask or Prefect.
"""

import itertools
import json
import math
from dataclasses import dataclass, field

from .mip import MipModel

INF = math.inf


@dataclass(frozen=True)
class Subproblem:
    """One part of a split: `index` (0-based, its place in the split), `label` (human,
    e.g. "g0=7 g1=8..36"), `counts` (one (lo, hi) bucket per group, counts of columns),
    `fixings` ((column, value) pairs). The groups themselves live in the `Split`."""

    index: int
    label: str
    counts: tuple[tuple[int, int], ...] = ()
    fixings: tuple[tuple[int, float], ...] = ()

    def to_json(self) -> str:
        """A compact JSON text of this handle (stored in the catalog)."""
        return json.dumps(
            {
                "index": self.index,
                "label": self.label,
                "counts": [list(c) for c in self.counts],
                "fixings": [list(f) for f in self.fixings],
            },
            separators=(",", ":"),
        )


@dataclass(frozen=True)
class Split:
    """A split of a model: the groups (lists of column indices), the subproblems kept,
    the number of subproblems before symmetry reduction (`total`) and the group
    permutations used to drop the others (`permutations`, the whole closed group)."""

    groups: tuple[tuple[int, ...], ...]
    parts: tuple[Subproblem, ...]
    total: int
    permutations: tuple[tuple[int, ...], ...] = ()
    buckets: tuple[tuple[tuple[int, int], ...], ...] = field(default=())


def buckets(size: int, low: int, high: int) -> list[tuple[int, int]]:
    """The buckets of one group of `size` columns: [0, low-1] (if low > 0), each count
    low..high-1, then [high, size]; clipped to 0..size. Raises ValueError unless
    0 <= low <= high."""
    if not 0 <= low <= high:
        raise ValueError(f"count buckets need 0 <= low <= high, got low={low}, high={high}")
    found = [(0, low - 1)] if low > 0 else []
    found += [(c, c) for c in range(low, min(high, size + 1))]
    if high <= size:
        found.append((high, size))
    return [(lo, min(hi, size)) for lo, hi in found if lo <= min(hi, size)]


def closure(perms: list[tuple[int, ...]], size: int) -> list[tuple[int, ...]]:
    """The group generated by `perms` (permutations of range(size) as tuples),
    identity included, sorted."""
    identity = tuple(range(size))
    found = {identity}
    frontier = [identity]
    while frontier:
        nxt = []
        for p in frontier:
            for g in perms:
                q = tuple(p[g[i]] for i in range(size))
                if q not in found:
                    found.add(q)
                    nxt.append(q)
        frontier = nxt
    return sorted(found)


def group_permutations(
    groups: list[list[int]], symmetries: list[list[int]]
) -> list[tuple[int, ...]]:
    """For each column symmetry (symmetry[j] = the image of column j) that maps every
    group onto a group, the induced permutation π of the groups (π[i] = the group that
    group i is mapped onto); symmetries that do not permute the groups are left out
    (the group they generate with the others would not act on the buckets)."""
    index = {frozenset(g): i for i, g in enumerate(groups)}
    found = []
    for sym in symmetries:
        images = [index.get(frozenset(sym[c] for c in g)) for g in groups]
        if None not in images and len(set(images)) == len(groups):
            found.append(tuple(images))
    return found


def count_split(
    groups: list[list[int]],
    low: list[int],
    high: list[int],
    symmetries: list[list[int]] = (),
    fixings: tuple[tuple[int, float], ...] = (),
) -> Split:
    """Subproblems for every combination of one bucket per group (`buckets`), those not
    lexicographically least in their orbit under the symmetries dropped (module
    docstring). `low[i]`, `high[i]` per group. Raises ValueError when groups overlap or
    when a symmetry maps group i to group j with different buckets."""
    seen: set[int] = set()
    for g in groups:
        if seen.intersection(g):
            raise ValueError("count groups must not share columns")
        seen.update(g)
    per_group = [buckets(len(g), lo, hi) for g, lo, hi in zip(groups, low, high, strict=True)]
    perms = closure(group_permutations(groups, list(symmetries)), len(groups))
    for pi in perms:
        for i, j in enumerate(pi):
            if per_group[i] != per_group[j]:
                raise ValueError(f"a symmetry maps group {i} to group {j} with other buckets")
    parts, total = [], 0
    for vector in itertools.product(*per_group):
        total += 1
        if any(tuple(vector[p] for p in pi) < vector for pi in perms):
            continue
        label = " ".join(
            f"g{i}={lo}" if lo == hi else f"g{i}={lo}..{hi}" for i, (lo, hi) in enumerate(vector)
        )
        parts.append(Subproblem(len(parts), label, tuple(vector), tuple(fixings)))
    return Split(
        tuple(tuple(g) for g in groups), tuple(parts), total, tuple(perms), tuple(per_group)
    )


def covers(split: Split) -> str | None:
    """Re-check, from the split alone, that its parts cover every bucket vector up to
    its permutations: None when they do, else the first vector whose whole orbit is
    missing. Also checks that each group's buckets partition 0..len(group)."""
    for g, per in zip(split.groups, split.buckets, strict=True):
        expected = 0
        for lo, hi in per:
            if lo != expected or hi < lo:
                return f"buckets {per} do not partition 0..{len(g)}"
            expected = hi + 1
        if expected != len(g) + 1:
            return f"buckets {per} do not reach {len(g)}"
    if not split.groups:
        return fixings_cover(split.parts)
    kept = {p.counts for p in split.parts}
    perms = split.permutations or (tuple(range(len(split.groups))),)
    for vector in itertools.product(*split.buckets):
        if not any(tuple(vector[p] for p in pi) in kept for pi in perms):
            return f"bucket vector {vector} and its images are in no part"
    return None


def fixings_cover(parts) -> str | None:
    """None when every 0/1 vector agrees with the fixings of some part (the parts cover
    {0,1}^n), else a partial assignment that no part covers. Recursive: branch on a
    column fixed by the first part; linear in the parts for the leaves of a tree."""

    def gap(assignments: list[dict], fixed: dict) -> dict | None:
        if any(not a for a in assignments):
            return None
        if not assignments:
            return fixed
        col = next(iter(assignments[0]))
        for value in (0.0, 1.0):
            rest = [
                {c: v for c, v in a.items() if c != col}
                for a in assignments
                if a.get(col, value) == value
            ]
            if (found := gap(rest, {**fixed, col: value})) is not None:
                return found
        return None

    found = gap([dict(p.fixings) for p in parts], {})
    if found is None:
        return None
    return "no part covers " + (" ".join(f"x{c}={int(v)}" for c, v in found.items()) or "anything")


def variable_split(columns: list[int]) -> Split:
    """The 2^d subproblems fixing each of the 0/1 `columns` to 0 or 1 (a partition)."""
    parts = []
    for values in itertools.product((0.0, 1.0), repeat=len(columns)):
        fix = tuple(zip(columns, values, strict=True))
        label = " ".join(f"x{c}={int(v)}" for c, v in fix)
        parts.append(Subproblem(len(parts), label, (), fix))
    return Split((), tuple(parts), len(parts))


def restrict(
    model: MipModel, split: Split, part: Subproblem, cutoff: float | None = None
) -> MipModel:
    """A copy of `model` restricted to `part`: its count rows, its fixings, and with a
    cutoff c the row costs·x <= c - offset; the engines' options are kept, the start is
    not (it may lie outside the part). The original is left unchanged."""
    m = MipModel(
        list(model.costs),
        list(model.lower),
        list(model.upper),
        list(model.integral),
        list(model.row_start),
        list(model.col_index),
        list(model.values),
        list(model.row_lower),
        list(model.row_upper),
        model.offset,
        None,
        model.integral_objective,
        dict(model.options),
        dict(model.scip_options),
        list(model.pending),
    )
    for col, value in part.fixings:
        m.lower[col] = m.upper[col] = value
    for group, (lo, hi) in zip(split.groups, part.counts, strict=True):
        m.add_row(list(group), [1.0] * len(group), float(lo), float(hi))
    if cutoff is not None:
        cols = [j for j, c in enumerate(model.costs) if c != 0]
        m.add_row(cols, [model.costs[j] for j in cols], -INF, cutoff - model.offset)
    return m


def outside(model: MipModel, x: list[float], tolerance: float = 1e-6) -> str | None:
    """Why the column vector `x` (n values) is no solution of `model` (a bound, an
    integrality or a row it breaks by more than `tolerance`, the first one named), or
    None when it is one. Used on a part's `restrict`ed model: a solution an engine
    returns for a part is checked to lie inside it before it refutes the part."""
    if len(x) != model.num_cols:
        return f"{len(x)} values for {model.num_cols} columns"
    for j, (v, lo, hi, whole) in enumerate(
        zip(x, model.lower, model.upper, model.integral, strict=True)
    ):
        if not lo - tolerance <= v <= hi + tolerance or (whole and abs(v - round(v)) > tolerance):
            return f"column {j} = {v} breaks its bounds [{lo}, {hi}] or integrality"
    for i in range(model.num_rows):
        span = range(model.row_start[i], model.row_start[i + 1])
        total = sum(model.values[e] * x[model.col_index[e]] for e in span)
        if not model.row_lower[i] - tolerance <= total <= model.row_upper[i] + tolerance:
            return f"row {i} = {total} breaks [{model.row_lower[i]}, {model.row_upper[i]}]"
    return None


def part_lower(status: str, bound: float | None, cutoff: float | None, integral: bool) -> float:
    """The proven lower limit of one part's optimum (module docstring): +inf for an
    infeasible part without cutoff, c + 1 (c with a fractional objective) for one
    infeasible under cutoff c, min(bound, c + 1) for one stopped at a limit; −inf when
    nothing is proven (error, no bound)."""
    above = INF if cutoff is None else (math.floor(cutoff) + 1 if integral else cutoff)
    if status == "infeasible":
        return above
    if status == "error" or bound is None:
        return -INF
    value = math.ceil(bound - 1e-6) if integral else bound
    return min(value, above)


@dataclass
class Combined:
    """The combination of parts: `bound` (proven global lower bound, −inf while any part
    is unproven, +inf when every part is infeasible), `objective` (best incumbent or
    None), `proven` (bound >= objective, or every part infeasible without cutoff: the
    model is infeasible)."""

    bound: float
    objective: float | None
    proven: bool


def combine(
    lowers: list[float], objectives: list[float | None], incumbent: float | None = None
) -> Combined:
    """Combine the parts' lower limits (`part_lower`, one per part of the split; a part
    not solved yet is −inf) and their objectives (None without a solution) with an
    optional outside `incumbent`. See `Combined`."""
    values = [v for v in [*objectives, incumbent] if v is not None]
    objective = min(values) if values else None
    bound = min(lowers) if lowers else -INF
    proven = (objective is not None and bound >= objective - 1e-6) or (
        objective is None and bound == INF
    )
    return Combined(bound, objective, proven)
