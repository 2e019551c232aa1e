"""Solvers that know no puzzle family.

`highs` and `scip` solve a plain sparse MIP (`MipModel`); `frontier` answers questions
about a layered search over bitboards with jump rules (`frontier.LayeredProblem`: peg
solitaire on any board). All take the same `Limits` and return the same
`SolverResult`, whose `status` is one word of the closed vocabulary `core.STATUSES`. Nothing
here imports a family, Prefect or Dask.
"""

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Limits:
    """What one instance may spend.

    time_limit: wall-clock seconds per instance (> 0).
    node_limit: branch-and-bound nodes (HiGHS, SCIP) or expanded search states (frontier);
        None for no limit.
    threads: solver threads per instance; 1 by default, since the cluster supplies the
        parallelism (and HiGHS must not change it in a thread that already ran it).
    """

    time_limit: float = 60.0
    node_limit: int | None = None
    threads: int = 1

    def __post_init__(self) -> None:
        if not 0 < self.time_limit < math.inf:
            raise ValueError(
                f"time_limit must be a finite number of seconds > 0, got {self.time_limit}"
            )
        if self.node_limit is not None and self.node_limit < 1:
            raise ValueError(f"node_limit must be >= 1, got {self.node_limit}")


@dataclass
class SolverResult:
    """What a solver reports, whatever it solved.

    status: one of `core.STATUSES`. objective: the incumbent's value, or None without one.
    bound: the proven dual bound (a lower bound, as every model here minimises), or None.
    gap: relative gap |objective - bound| / max(|objective|, 1e-9), or None.
    nodes: branch-and-bound nodes or expanded search states (a count).
    seconds: wall-clock solve time. solution: the raw incumbent (a list of column values
    for a MIP, the list of moves for a search), or None. message: why, for errors.
    """

    status: str
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    nodes: int = 0
    seconds: float = 0.0
    solution: Any = None
    message: str | None = None
    solver: str = ""
    solver_version: str = ""
    extra: dict = field(default_factory=dict)


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """The relative gap between an incumbent and a dual bound, HiGHS's definition."""
    if objective is None or bound is None:
        return None
    return abs(objective - bound) / max(abs(objective), 1e-9) if objective != bound else 0.0
