"""The sweep spec: a TOML file naming families and parameter grids (DESIGN.md).

```toml
name = "knights-small"
[[study]]
family = "domination"
solver = "auto"           # optional: the family's default (auto: highs or scip by size)
time_limit = 60           # seconds per instance
node_limit = 100000       # optional
count = true              # optional: also count the optimal solutions (MIP families)
[study.grid]
piece = ["knight"]
rows = "1..12"            # inclusive integer range
cols = "=rows"            # tied to rows
```

A grid is the product of its values: a list gives several values, a scalar one, `"a..b"`
an inclusive range, `"=key"` ties a parameter to another. A list-valued parameter takes a
list of lists (`dims = [[6, 7], [13, 17]]`), or one flat list for a single value
(`counts = [14, 13]`). A family may accept a word where it knows the set (`start = "all"`
for peg solitaire, `counts = "all"` or `"balanced"` for monochromatic lines).

`load(path)` validates the whole spec and expands every instance before any work starts;
every error names the file, the study and the key.
"""

import itertools
import re
import tomllib
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from puzzlesweep import puzzles
from puzzlesweep.core import BadInput, Instance, make_params, validation_message
from puzzlesweep.solve import check_count, check_solver, resolve_solver
from puzzlesweep.solvers import Limits

RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")


class Study(BaseModel):
    """One family, one solver, one set of limits, one grid."""

    model_config = ConfigDict(extra="forbid")
    family: str
    solver: str | None = None
    time_limit: float = Field(60.0, gt=0)
    node_limit: int | None = Field(None, ge=1)
    count: bool = False
    grid: dict[str, Any]


class Spec(BaseModel):
    """A sweep: a name (letters, digits, `._-`) and one or more studies."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    study: list[Study] = Field(min_length=1)


@dataclass(frozen=True)
class Job:
    """One instance to solve with one solver (an engine: `auto` is resolved per
    instance) under limits; `study` is its 1-based index; `count`: also count the
    optimal solutions (not part of `done_key`: an instance solved before without
    counting is skipped unless the run is forced)."""

    instance: Instance
    solver: str
    limits: Limits
    study: int
    count: bool = False

    @property
    def done_key(self) -> tuple[str, str, float, int | None]:
        """What makes a catalog result final for this job (see `catalog.finished`)."""
        # the instance's own params_key: an equivalent instance is a row of its own
        return (
            self.instance.params_key,
            self.solver,
            self.limits.time_limit,
            self.limits.node_limit,
        )


@dataclass(frozen=True)
class Sweep:
    """A validated spec: its name, its source text and every job, in spec order."""

    name: str
    text: str
    jobs: list[Job]


def _values(key: str, value: Any, list_valued: bool) -> list[Any]:
    """The values one grid entry stands for."""
    if isinstance(value, list):
        if list_valued and value and not any(isinstance(v, list) for v in value):
            return [value]
        if not value:
            raise ValueError("an empty list gives no values")
        return value
    if isinstance(value, str) and (match := RANGE.match(value)):
        low, high = int(match[1]), int(match[2])
        if high < low:
            raise ValueError(f"range {value!r} is empty")
        return list(range(low, high + 1))
    return [value]


def expand_grid(family: str, grid: dict[str, Any]) -> list[dict[str, Any]]:
    """Every raw parameter dict of a grid (product, ranges, ties, family words).

    Raises ValueError (prefixed by the key) for an empty range or list or a tie to a
    missing key."""
    module = puzzles.get(family)
    fields = module.Params.model_fields
    list_valued = {
        name
        for name, info in fields.items()
        if typing.get_origin(info.annotation) is list
        or any(typing.get_origin(a) is list for a in typing.get_args(info.annotation))
    }
    ties = {k: v[1:] for k, v in grid.items() if isinstance(v, str) and v.startswith("=")}
    free = {}
    for key, value in grid.items():
        if key in ties:
            if ties[key] not in grid or ties[key] in ties:
                raise ValueError(f"{key}: tied to {ties[key]!r}, which is not a grid key")
            continue
        try:
            free[key] = _values(key, value, key in list_valued)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    points = []
    for combo in itertools.product(*free.values()):
        point = dict(zip(free, combo, strict=True))
        point.update({key: point[target] for key, target in ties.items()})
        points.extend(module.expand(point))
    return points


def parse(text: str, source: str = "<spec>") -> Sweep:
    """Validate spec `text` and expand every job; raises BadInput naming `source`, the
    study and the key. Jobs repeated within the spec are kept once."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{source}: invalid TOML: {exc}") from None
    try:
        spec = Spec.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(f"{source}: {validation_message(exc)}") from None
    jobs: dict[tuple, Job] = {}
    for number, study in enumerate(spec.study, 1):
        where = f"{source}: study {number} ({study.family})"
        try:
            module = puzzles.get(study.family)
            solver = check_solver(study.family, study.solver)
            if study.count:
                check_count(study.family, solver)
            points = expand_grid(study.family, study.grid)
        except (BadInput, ValueError) as exc:
            raise BadInput(f"{where}: {exc}") from None
        limits = Limits(study.time_limit, study.node_limit)
        for point in points:
            try:
                params = make_params(module.Params, point)
            except BadInput as exc:
                raise BadInput(f"{where}: {exc}") from None
            instance = Instance(study.family, params)
            engine = resolve_solver(instance, solver)
            job = Job(instance, engine, limits, number, study.count)
            jobs.setdefault(job.done_key, job)
    return Sweep(spec.name, text, list(jobs.values()))


def load(path: str | Path) -> Sweep:
    """`parse` the spec file at `path`; raises BadInput if it cannot be read."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the spec: {exc.strerror}") from None
    return parse(text, str(path))
