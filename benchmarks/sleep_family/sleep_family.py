"""sleep: a synthetic family whose every instance sleeps `ms` milliseconds while its
model is built, then is one trivial MIP (choose at least one of one item).

It measures fan-out, not solving: an instance costs almost no CPU, so N workers on a
machine of fewer cores still finish N sleeps at once, and the ideal time of a sweep is
(instances × ms) / workers. benchmarks/scale_bench.py installs it (entry point group
`puzzlesweep.families`, docs/development.md) for its sleep workload.

Parameters: `item` (0..10,000,000), which tells instances apart, and `ms` (0..60,000).
Known value: the model's one row says x >= 1 for its one binary variable, so every
instance's optimum is 1, the solution (0,) (the item chosen), by construction.
Symmetry: none; every instance is its own canonical form.

Roads not taken: sleeping in `verify` or after the solve (then the solver's time would
not hold the sleep, and `solve_seconds` would not show it); a `frontier` search problem
(more code for the same nothing).
"""

import time

from pydantic import Field

from puzzlesweep.core import InvalidSolution
from puzzlesweep.core import Params as _Params
from puzzlesweep.solvers.mip import MipModel

NAME = "sleep"
SOLVERS = ("highs",)
AXES = ("item", ("ms",))
SOLUTION = (0,)  # the one item, chosen


class Params(_Params):
    """item: which instance (tells them apart); ms: milliseconds to sleep."""

    item: int = Field(ge=0, le=10_000_000, description="which instance, 0..10000000")
    ms: int = Field(ge=0, le=60_000, description="milliseconds to sleep, 0..60000")


def expand(point: dict) -> list[dict]:
    """One grid point is one instance."""
    return [point]


def canonical(p: Params) -> Params:
    """Every instance is its own canonical form."""
    return p


def from_canonical(p: Params, solution: tuple[int, ...]) -> tuple[int, ...]:
    """The solution unchanged (no symmetry)."""
    return solution


def model(p: Params) -> MipModel:
    """Sleeps `p.ms` milliseconds, then x[0] in {0, 1}, x[0] >= 1, minimise x[0]."""
    time.sleep(p.ms / 1000)
    mip = MipModel(costs=[1.0], lower=[0.0], upper=[1.0], integral=[True])
    mip.add_row([0], [1.0], 1.0, float("inf"))
    return mip


def from_mip(p: Params, x: list[float]) -> tuple[int, ...]:
    """The chosen items."""
    return tuple(i for i, value in enumerate(x) if value > 0.5)


def exhaustive(p: Params) -> tuple[int, tuple[int, ...]]:
    """The one solution, without sleeping: the least of {(), (0,)} that chooses one."""
    return 1, SOLUTION


def verify(p: Params, solution: tuple[int, ...]) -> int:
    """1 for the solution (0,); raises InvalidSolution for any other."""
    if tuple(solution) != SOLUTION:
        raise InvalidSolution(f"the one item must be chosen once, not {solution}")
    return 1


def encode(solution: tuple[int, ...]) -> str:
    """The chosen items, comma-separated."""
    return ",".join(map(str, solution))


def decode(text: str) -> tuple[int, ...]:
    """The inverse of `encode`."""
    return tuple(int(item) for item in text.split(",")) if text else ()


def render(p: Params, solution: tuple[int, ...]) -> str:
    """One line: the instance and what was chosen."""
    return f"item {p.item} slept {p.ms} ms; chosen: {encode(solution) or 'nothing'}"


def picture(p: Params, solution: tuple[int, ...]):
    """`render`'s line as a matplotlib Figure."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(4, 1))
    axes = figure.add_subplot()
    axes.text(0.5, 0.5, render(p, solution), ha="center", va="center")
    axes.axis("off")
    return figure


#: The contract suite's cases (tests/test_contract.py): the optimum 1 by construction
#: (the model's one row), no symmetry, a pinned instance key, a way to break a solution.
CONTRACT = {
    "known": (({"item": 0, "ms": 0}, 1), ({"item": 1, "ms": 5}, 1)),
    "equivalent": (),
    "pinned": ({"item": 7, "ms": 20}, "f78933f7c329f0bc"),
    "broken": lambda solution: (),  # nothing chosen
}
