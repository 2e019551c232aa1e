"""Symmetry breaking as rows of the model: truncated lexicographic-leader rows.

A *symmetry* here is a permutation g of the n columns of a 0/1 `MipModel` (g[j] = the
image of column j) that maps the model onto itself: costs, bounds and the set of rows
(each row a set of (column, coefficient) pairs with its two sides) unchanged
(`preserves`, checked rather than assumed). Such a g maps feasible points to feasible
points of the same objective, and so does every element of the group G they generate.

Lexicographic leaders (Friedman, "Fundamental domains for integer programs with
symmetries", COCOA 2007; Margot, "Symmetry in integer linear programming", 50 Years of
Integer Programming, Springer 2010, section 4): with the columns in the order
0, 1, ..., n−1, the lexicographically greatest point of each orbit {x∘h : h in G}
((x∘h)_j = x_{h(j)}) satisfies x >=_lex x∘g for every g in G, and so for any subset of
G. For 0/1 vectors, a >=_lex b on a prefix of L positions is the one linear row
Σ_t 2^{L-1-t} (a_t − b_t) >= 0. `leader_rows` writes, for each given g, that row over
the first `length` positions of the order that g moves (a prefix of the order: the
positions g fixes add nothing): x >=_lex x∘g holds on every prefix when it holds on the
whole, so the rows cut off no orbit leader, and every orbit keeps a point of the same
objective. The optimum of the model with the rows equals the optimum without them, and
this holds in any restriction of {0,1}^n that is a union of parts covering it, since
the rows are part of the model every part restricts (Hojny and Pfetsch, "Polytopes
associated with symmetry handling", Mathematical Programming 175 (2019), call such
constraints symretopes; the row here is their exponential-coefficient inequality on a
prefix). Unlike a solver's own symmetry handling, nothing is pruned outside the model:
a node of any branch and bound on it is closed only by bound or infeasibility.

`length` trades strength for numerics: coefficients up to 2^(length−1) (LENGTH = 16:
up to 32,768, well inside a double's exact integers and the solvers' tolerances).

Nothing here knows a puzzle family, Dask or Prefect.
"""

from .mip import MipModel
from .split import closure

#: Positions per leader row (the coefficients run up to 2^(LENGTH−1)).
LENGTH = 16


def preserves(model: MipModel, perm: list[int]) -> bool:
    """Does `perm` (a permutation of all n columns) map `model` onto itself: the same
    costs, bounds and integrality on each column's image, and the same set of rows?"""
    n = model.num_cols
    if sorted(perm) != list(range(n)):
        return False
    for j in range(n):
        g = perm[j]
        same = (model.costs[g], model.lower[g], model.upper[g], model.integral[g])
        if same != (model.costs[j], model.lower[j], model.upper[j], model.integral[j]):
            return False
    rows, images = set(), set()
    for i in range(model.num_rows):
        a, b = model.row_start[i], model.row_start[i + 1]
        entries = list(zip(model.col_index[a:b], model.values[a:b], strict=True))
        sides = (model.row_lower[i], model.row_upper[i])
        rows.add((frozenset(entries), sides))
        images.add((frozenset((perm[c], v) for c, v in entries), sides))
    return rows == images


def leader_rows(perms: list[list[int]], length: int = LENGTH) -> list[tuple]:
    """One row (cols, coefs, 0, inf) per non-identity permutation of `perms` (each of
    all n columns): x >=_lex x∘g on the first `length` positions that g moves (module
    docstring). Raises ValueError for length < 1."""
    if length < 1:
        raise ValueError(f"a leader row needs at least 1 position, got {length}")
    rows = []
    for g in perms:
        moved = [j for j in range(len(g)) if g[j] != j][:length]
        if not moved:
            continue
        coefs: dict[int, float] = {}
        for t, j in enumerate(moved):
            weight = float(2 ** (len(moved) - 1 - t))
            coefs[j] = coefs.get(j, 0.0) + weight
            coefs[g[j]] = coefs.get(g[j], 0.0) - weight
        cols = sorted(c for c, v in coefs.items() if v != 0)
        rows.append((cols, [coefs[c] for c in cols], 0.0, float("inf")))
    return rows


def leader_image(x: list[float], perms: list[list[int]]) -> list[float]:
    """The lexicographically greatest point of x's orbit under the group `perms`
    generate (columns in order 0..n−1): it satisfies every row of `leader_rows`."""
    group = closure([tuple(g) for g in perms], len(x))
    return list(max(tuple(x[h[j]] for j in range(len(x))) for h in group))


def with_leader_rows(model: MipModel, perms: list[list[int]], length: int = LENGTH) -> MipModel:
    """`model` (changed in place and returned) with the `leader_rows` of `perms` added,
    its start replaced by the start's `leader_image`, and SCIP's own symmetry handling
    off (`misc/usesymmetry` 0: the rows already break the symmetry, and SCIP would
    otherwise prune nodes by symmetries of the restricted model). Raises ValueError when
    a permutation does not preserve the model (`preserves`): the rows would then cut off
    solutions that no image replaces."""
    for g in perms:
        if not preserves(model, list(g)):
            raise ValueError("a symmetry does not map the model onto itself")
    for cols, coefs, lo, hi in leader_rows([list(g) for g in perms], length):
        model.add_row(cols, coefs, lo, hi)
    if model.start is not None:
        model.start = leader_image(list(model.start), [list(g) for g in perms])
    model.scip_options = {**model.scip_options, "misc/usesymmetry": 0}
    return model
