"""A split taken from SCIP's own search tree: the open nodes of a short solve.

`ramp_up(model, nodes)` solves a `MipModel` with SCIP for at most `nodes` branch-and-bound
nodes and reads the nodes still open when it stops (leaves, children and siblings); the
paths of branchings from the root to those nodes become the tree text of
`solvers.lookahead` (`tree:` and its preorder: a column for an inner node, its x = 0
side first, `.` for a leaf). This is the racing ramp-up of ParaSCIP and UG (Shinano,
Achterberg, Berthold, Heinz and Koch, "ParaSCIP: a parallel extension of SCIP",
Competence in High Performance Computing 2010, Springer 2012): a short sequential
solve whose open nodes, each with the fixings of its path, are handed to the workers.

Inner node = a branching of the ramp-up (on one 0/1 column); a side of a branching that
leads to no open node is a *closed* leaf: the ramp-up pruned everything below it (by
bound or infeasibility), so its part is cheap to solve again under the same cutoff.
Every leaf becomes a part (`lookahead.tree_split`), open or closed, so the certificate
needs nothing from the ramp-up: the leaves of any binary tree of 0/1 fixings partition
{0,1}^n, whatever SCIP did. A wrong guess costs time, never correctness.

The ramp-up runs one thread, with the model's start as an incumbent, with presolve
restarts off (`presolving/maxrestarts` 0: a restart would discard the tree) and SCIP's
symmetry handling off (`misc/usesymmetry` 0: a node pruned by symmetry holds solutions
only up to symmetry, so its leaf would be a part as hard as a full one; a node pruned by
bound or infeasibility is cheap again; to keep symmetry breaking in the ramp-up and
every part alike, it goes into the model as rows, `solvers.symmetry`). Branchings are
mapped from SCIP's transformed variables back to the model's columns
(`getTransformedVar`); a branching on a column that is not 0/1, or on a variable
presolve created, raises ValueError.

Nothing here knows a puzzle family, Dask or Prefect.
"""

import re
import time
from dataclasses import dataclass

from . import Limits
from . import scip as scip_engine
from .mip import MipModel, finite

#: SCIP's bound types in `Node.getParentBranchings` (SCIP_BOUNDTYPE): 0 lower, 1 upper.
LOWER, UPPER = 0, 1
#: Seconds the ramp-up may take at most (it stops at its node limit long before, on the
#: instances here; at this limit it hands on the nodes open then).
SECONDS = 600.0


@dataclass
class RampUp:
    """What a ramp-up found: `tree` (the tree text), `status` (SCIP's, e.g. nodelimit or
    optimal), `objective` and `solution` (its incumbent: value and n column values, or
    None), `bound` (its dual bound or None), `nodes` (processed), `open` (open nodes read),
    `closed` (closed leaves of the tree), `seconds` (wall clock)."""

    tree: str
    status: str
    objective: float | None
    solution: list[float] | None
    bound: float | None
    nodes: int
    open: int
    closed: int
    seconds: float


def _columns(m, xs: list) -> dict[int, int]:
    """SCIP's index of each column's transformed variable → the column."""
    return {m.getTransformedVar(x).getIndex(): j for j, x in enumerate(xs)}


def _path(node, columns: dict[int, int], model: MipModel) -> tuple[tuple[int, float], ...]:
    """The (column, 0/1 value) branchings from the root down to `node`, root first.
    Raises ValueError for a branching that does not fix a 0/1 column of `model`."""
    found = []
    while node is not None and node.getParent() is not None:
        branchings = node.getParentBranchings()
        if branchings is None:
            raise ValueError(f"SCIP node {node.getNumber()} was not made by a variable branching")
        steps = []
        for var, bound, kind in zip(*branchings, strict=True):
            col = columns.get(var.getIndex())
            if col is None:
                raise ValueError(f"SCIP branched on {var.name}, which is no column of the model")
            binary = model.integral[col] and model.lower[col] >= 0 and model.upper[col] <= 1
            value = {(LOWER, 1.0): 1.0, (UPPER, 0.0): 0.0}.get((kind, bound))
            if not binary or value is None:
                side = ">=" if kind == LOWER else "<="
                raise ValueError(
                    f"SCIP branched on column {col} ({side} {bound:g}): not a 0/1 fixing"
                )
            steps.append((col, value))
        found[:0] = steps
        node = node.getParent()
    return tuple(found)


def tree_text(paths: list[tuple[tuple[int, float], ...]]) -> tuple[str, int]:
    """(the tree text whose leaves are the given paths of (column, value) fixings, the
    number of closed leaves). At each inner node the column is the first one the first
    path still fixes; a path that does not fix it goes to both sides, and a side that no
    path reaches is a closed leaf. Paths of one branch-and-bound tree give exactly its
    subtree above the open nodes. An empty list gives one closed leaf."""
    tokens: list[str] = []
    closed = 0

    def build(group: list[dict]) -> None:
        nonlocal closed
        if not group:
            tokens.append(".")
            closed += 1
            return
        if any(not path for path in group):
            tokens.append(".")
            return
        col = next(iter(group[0]))
        tokens.append(str(col))
        for value in (0.0, 1.0):
            side = [p for p in group if p.get(col, value) == value]
            build([{c: v for c, v in p.items() if c != col} for p in side])

    build([dict(path) for path in paths])
    return "tree:" + ",".join(tokens), closed


def ramp_up(model: MipModel, nodes: int, seconds: float = SECONDS) -> RampUp:
    """The ramp-up of the module docstring: SCIP on `model` for at most `nodes` nodes and
    `seconds` of wall clock, and the tree of its open nodes (one leaf when it solved the
    model outright). Raises ValueError for nodes < 1 or a branching that is not a 0/1
    fixing of a column."""
    if nodes < 1:
        raise ValueError(f"a ramp-up needs at least 1 node, got {nodes}")
    started = time.perf_counter()
    m, xs = scip_engine.build_model(model, Limits(seconds, nodes))
    m.setParam("presolving/maxrestarts", 0)
    m.setParam("misc/usesymmetry", 0)
    scip_engine.add_start(m, xs, model)
    m.optimizeNogil()
    status = m.getStatus()
    paths: list = []
    if status in ("nodelimit", "totalnodelimit", "timelimit"):
        columns = _columns(m, xs)
        leaves, children, siblings = m.getOpenNodes()
        paths = [_path(node, columns, model) for node in [*leaves, *children, *siblings]]
    tree, closed = tree_text(paths) if paths else ("tree:.", 0)
    objective = solution = None
    if m.getNSols() > 0 and status != "infeasible":
        best = m.getBestSol()
        objective = finite(m.getSolObjVal(best))
        solution = [m.getSolVal(best, x) for x in xs]
    bound = finite(m.getDualbound())
    processed = int(m.getNNodes())
    return RampUp(
        tree, status, objective, solution, bound, processed, len(paths), closed,
        time.perf_counter() - started,
    )  # fmt: skip


def resolve(model: MipModel, text: str) -> str:
    """A split text with `nodes:N` replaced by the tree of a ramp-up of N nodes on
    `model`; any other text is returned as it is. Raises ValueError for N outside
    1..100000 (ASCII digits only) and as `ramp_up` does."""
    if not text.startswith("nodes:"):
        return text
    number = text[len("nodes:") :]
    if not re.fullmatch(r"[0-9]{1,6}", number) or not 1 <= int(number) <= 100_000:
        raise ValueError(f"--split nodes:N needs N in 1..100000 nodes, got {number!r}")
    return ramp_up(model, int(number)).tree


def cutoff(found: RampUp) -> float | None:
    """The ramp-up's incumbent − 1 (the parts' cutoff for an integral objective), or None
    without an incumbent."""
    return None if found.objective is None else round(found.objective) - 1.0
