"""The generic sparse MIP that every MIP engine takes (`highs`, `scip`), and the rounding
of integral objectives both apply. Plain data: no solver is imported here.

A `MipModel` is plain arrays: minimise c·x + offset subject to row_lower <= A x <=
row_upper and lower <= x <= upper, with x integral where `integral` says so; A is given
row-wise (CSR). A family may also state rows whose right-hand side is the optimum of a
smaller MIP (`PendingRow`): it builds that MIP, and the engine proves its optimum before
it solves (`settled`), so that no family ever runs an engine.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace


@dataclass
class MipModel:
    """A minimisation MIP in CSR form.

    Shapes: costs, lower, upper, integral have one entry per column (n); row_start has
    m + 1 entries, col_index and values one per non-zero; row_lower and row_upper one per
    row (m). Use math.inf for a missing bound. `offset` is added to the objective.
    `start` is an optional full incumbent (n values) handed to the engine as a starting incumbent.
    `integral_objective` says that the optimum value is an integer (True), that it may
    not be (False), or asks `solve` to detect it from the costs
    (None, the default: integral costs on integer columns, zero costs elsewhere and an
    integral offset); when it holds, the dual bound is rounded up and the objective to
    the nearest integer (`integral_bounds`). `options` are HiGHS options set after
    `solve`'s own (for benchmarks: {"mip_detect_symmetry": False}); `threads` and
    `time_limit` come from the limits and cannot be set here. `pending` rows are added
    by the engine once it has proven their right-hand sides (`settled`).
    """

    costs: list[float]
    lower: list[float]
    upper: list[float]
    integral: list[bool]
    row_start: list[int] = field(default_factory=lambda: [0])
    col_index: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    row_lower: list[float] = field(default_factory=list)
    row_upper: list[float] = field(default_factory=list)
    offset: float = 0.0
    start: list[float] | None = None
    integral_objective: bool | None = None
    options: dict[str, bool | int | float | str] = field(default_factory=dict)
    scip_options: dict[str, bool | int | float | str] = field(default_factory=dict)
    pending: list["PendingRow"] = field(default_factory=list)

    @property
    def num_cols(self) -> int:
        """Number of columns (variables)."""
        return len(self.costs)

    @property
    def num_rows(self) -> int:
        """Number of rows (constraints)."""
        return len(self.row_lower)

    def add_row(self, cols: list[int], coefs: list[float], lo: float, hi: float) -> None:
        """Append the row lo <= sum(coefs[i] * x[cols[i]]) <= hi."""
        self.col_index.extend(cols)
        self.values.extend(coefs)
        self.row_start.append(len(self.col_index))
        self.row_lower.append(lo)
        self.row_upper.append(hi)

    def add_columns(self, count: int, cost: float, lo: float, hi: float, integral: bool) -> int:
        """Append `count` identical columns; returns the index of the first."""
        first = len(self.costs)
        self.costs.extend([cost] * count)
        self.lower.extend([lo] * count)
        self.upper.extend([hi] * count)
        self.integral.extend([integral] * count)
        return first


@dataclass(frozen=True)
class PendingRow:
    """The row Σ x[cols] >= γ, where γ is the optimum of `model`, a smaller minimisation
    that no solution of the whole model beats on `cols` (for a covering: the fewest
    pieces, among those in `cols`, that cover a region of the board, which every cover
    must cover), so the row cuts off no solution. The family states it; an engine
    proves γ (`settled`)."""

    cols: tuple[int, ...]
    model: MipModel


def settled(model: MipModel, optimum: Callable[[MipModel], float | None]) -> MipModel:
    """`model` with each of its pending rows added as Σ x[cols] >= optimum(row.model),
    where `optimum` is an engine's proven optimum of a small MIP (None: not proven in
    time, and the row is left out, as a weaker model is still a correct one), and none
    pending. `model` itself when nothing is pending; the original is left unchanged."""
    if not model.pending:
        return model
    m = replace(model, row_start=list(model.row_start), col_index=list(model.col_index))
    m.values, m.row_lower, m.row_upper = list(m.values), list(m.row_lower), list(m.row_upper)
    m.pending = []
    for row in model.pending:
        if (least := optimum(row.model)) is not None:
            m.add_row(list(row.cols), [1.0] * len(row.cols), float(least), math.inf)
    return m


def finite(value: float) -> float | None:
    """`value` as a float, or None when it is infinite or beyond 1e19 in size (HiGHS's
    and SCIP's stand-ins for infinity are 1e30 and 1e20)."""
    return float(value) if math.isfinite(value) and abs(value) < 1e19 else None


def has_integral_objective(model: MipModel) -> bool:
    """Is every feasible objective value an integer? `model.integral_objective` when set,
    else detected: integral costs on integer columns, zero costs on continuous ones and an
    integral offset."""
    if model.integral_objective is not None:
        return model.integral_objective
    return float(model.offset).is_integer() and all(
        float(c).is_integer() if integral else c == 0
        for c, integral in zip(model.costs, model.integral, strict=True)
    )


def integral_bounds(
    objective: float | None, bound: float | None, tolerance: float = 1e-6
) -> tuple[float | None, float | None]:
    """(objective, bound) for a minimisation whose values are integers: the bound rounded
    up, ceil(bound - tolerance) (HiGHS reports 3.9999999999998583 for a proven 4), and the
    objective rounded to the nearest integer when it lies within `tolerance` of one
    (left as it is otherwise); a rounded bound above the incumbent (within tolerance of
    it) becomes the incumbent's value. None stays None."""
    if bound is not None:
        bound = float(math.ceil(bound - tolerance))
    if objective is not None and abs(objective - round(objective)) <= tolerance:
        objective = float(round(objective))
    if objective is not None and bound is not None and bound > objective:
        bound = objective
    return objective, bound


def reported_values(
    model: MipModel, status: str, objective: float | None, bound: float | None
) -> tuple[float | None, float | None]:
    """The (objective, dual bound) an engine reports for `model` from its raw finite
    values (`finite`) and its status: none for `infeasible`; an optimum without a
    bound of its own is its own bound; with an integral objective
    (`has_integral_objective`) both rounded by `integral_bounds`. The one rule of
    `highs.solve` and `scip.solve`."""
    if status == "infeasible":
        return None, None
    if status == "optimal" and bound is None:
        bound = objective
    if has_integral_objective(model):
        return integral_bounds(objective, bound)
    return objective, bound
