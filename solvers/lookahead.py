"""A split chosen by the solver: a tree of 0/1 fixings grown by LP lookahead.

`lookahead(model, leaves, cutoff)` grows a binary tree over the 0/1 columns of a
`MipModel` the way strong branching picks a branching variable (Achterberg, Koch and
Martin, "Branching rules revisited", Operations Research Letters 33 (2005)): at the
open leaf of least LP bound (best first), for the most fractional columns of its LP
solution, the LP is solved again with the column fixed at 0 and at 1; the column whose
two gains in the dual bound have the largest product is branched on, and its two
children become leaves. A leaf whose LP bound exceeds `cutoff` (incumbent − 1 for an
integral objective) is closed: its part is infeasible under the cutoff at the root, and
costs almost nothing to solve. It stops at `leaves` leaves or when every leaf is closed
or integral. One HiGHS LP is re-solved from its last basis throughout (dual simplex,
one thread); every fixing is a bound change, so the tree costs a few hundred LPs.

The tree is plain text, `tree:` followed by its preorder: a column index for an inner
node (its x = 0 subtree, then its x = 1 subtree) and `.` for a leaf, comma-separated:
`tree:17,.,24,.,.` branches on column 17, its x = 1 side on column 24, three leaves.
`tree_split(text, n)` turns it into a `split.Split` whose parts (one per leaf, in
preorder) fix the columns on the leaf's path; the leaves of any such tree partition
{0,1}^n, so the parts cover every solution with no claim about the model, and a
certificate re-derives the parts from the text alone (`split.fixings_cover` checks the
partition independently of the tree).

Nothing here knows a puzzle family, Dask or Prefect.
"""

import heapq
import math
import re

import highspy
import numpy as np

from . import highs
from .mip import MipModel, has_integral_objective
from .split import Split, Subproblem

#: Columns tried per expansion (the most fractional ones); fewer cost less and choose
#: from less.
CANDIDATES = 24
EPS = 1e-6

Tree = tuple | None  # (column, x=0 subtree, x=1 subtree), or None for a leaf


def _bound(h: highspy.Highs, model: MipModel, fixings: dict[int, float]) -> tuple[float, list]:
    """(LP bound, LP solution) with `fixings` (column → 0/1) applied, then undone;
    (+inf, []) when that LP is infeasible."""
    for col, value in fixings.items():
        h.changeColBounds(col, value, value)
    h.run()
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        found = (h.getInfo().objective_function_value, list(h.getSolution().col_value))
    else:
        found = (math.inf, [])
    for col in fixings:
        h.changeColBounds(col, model.lower[col], model.upper[col])
    return found


def _closed(bound: float, cutoff: float | None) -> bool:
    """Is a leaf of LP bound `bound` closed under `cutoff` (no better solution in it)?"""
    return bound == math.inf or (cutoff is not None and math.ceil(bound - EPS) > cutoff)


def _branch(h, model: MipModel, fixings: dict, x: list, candidates: int):
    """(column, bound at x=0, bound at x=1) of the best product score among the most
    fractional free 0/1 columns of the LP solution `x`, or None when none is fractional."""
    free = [
        j
        for j, v in enumerate(x)
        if j not in fixings and model.integral[j] and EPS < v < 1 - EPS and model.upper[j] <= 1
    ]
    if not free:
        return None
    free.sort(key=lambda j: (abs(x[j] - 0.5), j))
    base = _bound(h, model, fixings)[0]
    best = None
    for j in free[:candidates]:
        down = _bound(h, model, {**fixings, j: 0.0})[0]
        up = _bound(h, model, {**fixings, j: 1.0})[0]
        score = max(down - base, EPS) * max(up - base, EPS)
        if best is None or score > best[0] + EPS:
            best = (score, j, down, up)
    return best[1:]


def lookahead(
    model: MipModel, leaves: int, cutoff: float | None = None, candidates: int = CANDIDATES
) -> str:
    """The tree text (module docstring) of at most `leaves` leaves grown by LP lookahead
    on `model`'s 0/1 columns; leaves of LP bound above `cutoff` are not expanded.
    Deterministic for a given model. Raises ValueError when leaves < 1."""
    if leaves < 1:
        raise ValueError(f"a lookahead split needs at least 1 leaf, got {leaves}")
    h = highs.relaxation(model)
    root_bound, x = _bound(h, model, {})
    children: dict[tuple, tuple] = {}  # path → (column, path of x=0 child, of x=1 child)
    heap = [(root_bound, (), x)]  # open leaves: (LP bound, path of (col, value), LP x)
    count = 1
    while heap and count < leaves:
        bound, path, x = heapq.heappop(heap)
        if _closed(bound, cutoff):
            continue
        chosen = _branch(h, model, dict(path), x, candidates)
        if chosen is None:
            continue
        col, down, up = chosen
        kids = (path + ((col, 0.0),), path + ((col, 1.0),))
        children[path] = (col, *kids)
        for kid, kid_bound in zip(kids, (down, up), strict=True):
            heapq.heappush(heap, (kid_bound, kid, _bound(h, model, dict(kid))[1]))
        count += 1
    return "tree:" + ",".join(_preorder(children, ()))


def _preorder(children: dict, path: tuple) -> list[str]:
    """The tokens of the subtree at `path`: its column and both subtrees, or `.`."""
    if path not in children:
        return ["."]
    col, down, up = children[path]
    return [str(col), *_preorder(children, down), *_preorder(children, up)]


def parse_tree(text: str, columns: int) -> Tree:
    """The tree of `text` (`tree:` and the preorder; module docstring). Raises
    ValueError for a malformed text, a column outside 0..columns-1, or a column fixed
    twice on one path."""
    if not text.startswith("tree:"):
        raise ValueError(f"a tree split starts with 'tree:', got {text[:20]!r}")
    tokens = text[len("tree:") :].split(",")

    def read(at: int, above: frozenset) -> tuple[Tree, int]:
        if at >= len(tokens):
            raise ValueError("the tree text ends inside the tree")
        token = tokens[at].strip()
        if token == ".":
            return None, at + 1
        if not token.isdigit() or not 0 <= int(token) < columns or int(token) in above:
            raise ValueError(f"tree node {token!r} is not a free column in 0..{columns - 1}")
        col = int(token)
        down, at = read(at + 1, above | {col})
        up, at = read(at, above | {col})
        return (col, down, up), at

    tree, end = read(0, frozenset())
    if end != len(tokens):
        raise ValueError(f"the tree text has {len(tokens) - end} tokens after the tree")
    return tree


def tree_split(text: str, columns: int) -> tuple[Split, str]:
    """(the `Split` of the tree `text` over `columns` 0/1 columns, its description):
    one part per leaf in preorder, fixing the columns on its path. Raises ValueError
    as `parse_tree` does."""
    tree = parse_tree(text, columns)
    leaves: list[tuple] = []

    def walk(node: Tree, path: tuple) -> None:
        if node is None:
            leaves.append(path)
            return
        col, down, up = node
        walk(down, path + ((col, 0.0),))
        walk(up, path + ((col, 1.0),))

    walk(tree, ())
    parts = tuple(
        Subproblem(i, " ".join(f"x{c}={int(v)}" for c, v in path) or "all", (), path)
        for i, path in enumerate(leaves)
    )
    depth = max((len(p) for p in leaves), default=0)
    described = f"a tree of 0/1 fixings: {len(parts)} leaves, depth up to {depth}"
    return Split((), parts, len(parts)), described


def lp_bounds(model: MipModel, split: Split) -> np.ndarray:
    """The LP bound of each part of `split` (+inf for an infeasible LP), in part order;
    for reading how a tree divides the work."""
    h = highs.relaxation(model)
    return np.array([_bound(h, model, dict(p.fixings))[0] for p in split.parts])


def resolve(model: MipModel, text: str) -> str:
    """A split text with `lookahead:N` replaced by the tree `lookahead` grows to N
    leaves (cutoff: the objective of `model.start` − 1 for an integral objective, none
    without a start); any other text is returned as it is. Raises ValueError for a bad N."""
    if not text.startswith("lookahead:"):
        return text
    number = text[len("lookahead:") :]
    if not re.fullmatch(r"[0-9]{1,4}", number) or not 1 <= int(number) <= 4096:
        raise ValueError(f"--split lookahead:N needs N in 1..4096 leaves, got {number!r}")
    cutoff = None
    if model.start is not None and has_integral_objective(model):
        cutoff = sum(c * x for c, x in zip(model.costs, model.start, strict=True))
        cutoff = round(cutoff + model.offset) - 1.0
    return lookahead(model, int(number), cutoff)
