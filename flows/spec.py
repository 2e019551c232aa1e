"""The sweep spec: a TOML file naming families and parameter grids (docs/operations.md).

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

Size is checked before anything is expanded: each range's ends must be valid values of
the family (`rows = "1..100000000"` names the first invalid end at once), and the
instances a spec stands for are counted without materialising them (ranges by their
length, family words such as `counts = "all"` by the family's `expand_count` when it has
one) and refused above a limit: `max_instances` in the spec, or `--max-instances` on the
command line, default `MAX_INSTANCES`, and never above `MAX_PLANNED`. The file itself is
read only up to `MAX_SPEC_BYTES`.
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
from puzzlesweep.core import BadInput, DoneKey, done_key, make_params, validation_message
from puzzlesweep.puzzles import Instance
from puzzlesweep.solve import check_count, check_solver, resolve_solver
from puzzlesweep.solvers import Limits

RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")
#: Instances a spec may stand for unless it (or the command line) allows more.
MAX_INSTANCES = 20_000
#: Instances one run (or dry run) may plan whatever is allowed: every job is made and
#: held in memory before any work (about 1.3 KB each: benchmarks/README.md).
MAX_PLANNED = 1_000_000
#: Bytes a spec file may hold (a spec is a few lines; /dev/zero is not one).
MAX_SPEC_BYTES = 2**20


class Study(BaseModel):
    """One family, one solver, one set of limits, one grid. Values are taken as typed
    (strict: `count = "yes"` is not a boolean, `node_limit = true` not an integer; an
    integer is still a valid float)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    family: str
    solver: str | None = None
    time_limit: float = Field(60.0, gt=0, allow_inf_nan=False)
    node_limit: int | None = Field(None, ge=1)
    count: bool = False
    grid: dict[str, Any]


class Spec(BaseModel):
    """A sweep: a name (letters, digits, `._-`) and one or more studies (strict, as
    `Study`)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    max_instances: int | None = Field(None, ge=1)
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
    def done_key(self) -> DoneKey:
        """The `core.DONE_KEY` of this job's result row (see `catalog.finished`)."""
        return done_key(
            {
                "params_key": self.instance.params_key,
                "solver": self.solver,
                "time_limit": self.limits.time_limit,
                "node_limit": self.limits.node_limit,
            }
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


def _size(value: Any, list_valued: bool) -> int:
    """How many values one grid entry stands for, without making them."""
    if isinstance(value, list):
        if list_valued and value and not any(isinstance(v, list) for v in value):
            return 1
        return len(value)
    if isinstance(value, str) and (match := RANGE.match(value)):
        return max(0, int(match[2]) - int(match[1]) + 1)
    return 1


def _first(value: Any, list_valued: bool) -> Any:
    """The first value one grid entry stands for."""
    if isinstance(value, str) and (match := RANGE.match(value)):
        return int(match[1])
    try:
        return _values("", value, list_valued)[0]
    except ValueError:  # an empty list: counting reports it
        return value


def _list_valued(module) -> set[str]:
    """The parameters of a family whose values are lists (`dims`, `counts`)."""
    return {
        name
        for name, info in module.Params.model_fields.items()
        if typing.get_origin(info.annotation) is list
        or any(typing.get_origin(a) is list for a in typing.get_args(info.annotation))
    }


def split_ties(grid: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the grid's free entries, {tied key: the free key it takes its value from}).

    A tie `"=key"` may name another tied key; the chain is followed to a free key.
    Raises ValueError (one line, prefixed by the tied key) for a tie to a key the grid
    does not have, or a cycle of ties (`rows = "=cols"` with `cols = "=rows"`)."""
    named = {k: v[1:] for k, v in grid.items() if isinstance(v, str) and v.startswith("=")}
    ties = {}
    for key, target in named.items():
        chain = [key]
        while target in named and target not in chain:
            chain.append(target)
            target = named[target]
        if target in chain:
            cycle = " -> ".join([*chain, target])
            raise ValueError(f"{key}: the ties form a cycle ({cycle}), so no key has a value")
        if target not in grid:
            raise ValueError(f"{key}: tied to {target!r}, which is not a grid key")
        ties[key] = target
    return {k: v for k, v in grid.items() if k not in named}, ties


def check_ranges(family: str, grid: dict[str, Any]) -> None:
    """Raise ValueError (prefixed by the key) when an end of a range `"a..b"` is not a
    valid value of the family: each end is tried with the first value of every other
    key (ties follow), and only an error of that key (or of a key tied to it) counts."""
    module = puzzles.get(family)
    list_valued = _list_valued(module)
    free, ties = split_ties(grid)
    base = {k: _first(v, k in list_valued) for k, v in free.items()}
    for key, value in grid.items():
        match = RANGE.match(value) if isinstance(value, str) else None
        if key in ties or not match or key not in module.Params.model_fields:
            continue
        mine = {key} | {k for k, target in ties.items() if target == key}
        for end in (int(match[2]), int(match[1])):
            probe = {**base, key: end}
            probe.update({k: probe[t] for k, t in ties.items()})
            try:
                module.Params.model_validate(probe)
            except ValidationError as exc:
                for error in exc.errors():
                    if error["loc"] and error["loc"][0] in mine:
                        message = error["msg"].removeprefix("Value error, ")
                        raise ValueError(
                            f"{key}: range {value!r}: {end} is not a valid value ({message})"
                        ) from None


def count_grid(family: str, grid: dict[str, Any], cap: int) -> int:
    """How many raw parameter dicts `expand_grid` would make, counted without making
    them; counting stops past `cap` (the result is then `cap + 1`). Family words are
    counted by the family's `expand_count(point, cap)` when it has one, else by
    expanding the point. Raises ValueError as `expand_grid` does."""
    module = puzzles.get(family)
    list_valued = _list_valued(module)
    free, ties = split_ties(grid)
    product = 1
    for key, value in free.items():
        size = _size(value, key in list_valued)
        if size == 0:
            raise ValueError(f"{key}: range {value!r} is empty")
        product *= size
    if product > cap:
        return cap + 1
    words = [k for k, v in free.items() if isinstance(v, str) and not RANGE.match(v)]
    if not words:
        return product
    counter = getattr(module, "expand_count", None)
    total = 0
    for point in _points(free, ties, list_valued):
        total += counter(point, cap - total) if counter else len(module.expand(point))
        if total > cap:
            return cap + 1
    return total


def _points(free: dict, ties: dict, list_valued: set[str]):
    """The grid's points (product of the free keys, ties applied), one at a time."""
    values = {}
    for key, value in free.items():
        try:
            values[key] = _values(key, value, key in list_valued)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    for combo in itertools.product(*values.values()):
        point = dict(zip(values, combo, strict=True))
        point.update({key: point[target] for key, target in ties.items()})
        yield point


def expand_grid(family: str, grid: dict[str, Any]) -> list[dict[str, Any]]:
    """Every raw parameter dict of a grid (product, ranges, ties, family words).

    Raises ValueError (prefixed by the key) for an empty range or list, a tie to a
    missing key or a cycle of ties (`split_ties`)."""
    module = puzzles.get(family)
    free, ties = split_ties(grid)
    return [
        params
        for point in _points(free, ties, _list_valued(module))
        for params in module.expand(point)
    ]


def parse(text: str, source: str = "<spec>", max_instances: int | None = None) -> Sweep:
    """Validate spec `text` and expand every job; raises BadInput naming `source`, the
    study and the key. Jobs repeated within the spec are kept once.

    Before anything is expanded, the ends of every range are checked (`check_ranges`)
    and the instances of all studies counted (`count_grid`): more than `max_instances`
    (else the spec's `max_instances`, else `MAX_INSTANCES`) raises BadInput saying how
    to allow more, and more than `MAX_PLANNED` raises BadInput whatever is allowed."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{source}: invalid TOML: {exc}") from None
    try:
        spec = Spec.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(f"{source}: {validation_message(exc, Spec)}") from None
    allowed = max_instances or spec.max_instances or MAX_INSTANCES
    limit = min(allowed, MAX_PLANNED)
    planned = 0
    for number, study in enumerate(spec.study, 1):
        where = f"{source}: study {number} ({study.family})"
        try:
            check_ranges(study.family, study.grid)
            planned += count_grid(study.family, study.grid, limit - planned)
        except (BadInput, ValueError) as exc:
            raise BadInput(f"{where}: {exc}") from None
        if planned > limit:
            how = (
                "; narrow its grids, or allow more with max_instances = N in the spec or "
                "--max-instances N"
                if allowed <= MAX_PLANNED
                else ", the most one run can plan; split it into several sweeps"
            )
            raise BadInput(f"{where}: the spec stands for more than {limit:,} instances{how}")
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
                params = make_params(module.Params, point, strict=True)
            except BadInput as exc:
                raise BadInput(f"{where}: {exc}") from None
            instance = Instance(study.family, params)
            engine = resolve_solver(instance, solver)
            job = Job(instance, engine, limits, number, study.count)
            jobs.setdefault(job.done_key, job)
    return Sweep(spec.name, text, list(jobs.values()))


def load(path: str | Path, max_instances: int | None = None) -> Sweep:
    """`parse` the spec file at `path` (with `max_instances`); raises BadInput if it
    cannot be read, is not UTF-8 text, or holds more than `MAX_SPEC_BYTES` (only that
    much is read: `/dev/zero` is refused at once)."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the spec: {exc.strerror or exc}") from None
    if len(data) > MAX_SPEC_BYTES:
        raise BadInput(f"{path}: the spec is larger than {MAX_SPEC_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{path}: the spec is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
            f"offset {exc.start})"
        ) from None
    return parse(text, str(path), max_instances)
