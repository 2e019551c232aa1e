"""The puzzle families, one module each, all with the same shape.

Every family module defines, in this order:
- NAME, SOLVERS (its solvers, default first: `auto` or engine names of
  `solvers.engines`; every other engine that fits is offered too, `solvers`) and its
  vocabulary;
- `Params`, the validated parameter model (its fields are the catalog's parameter columns);
- `expand(point)`: one grid point of a sweep to a list of raw parameter dicts, resolving
  the word "all" where the family knows the set;
- `canonical(params)` → the least equivalent params under the puzzle's symmetries (their
  hash is the `instance_key`), and `from_canonical(params, solution)` carrying a solution
  of the canonical form back to `params` (the solver always sees the canonical form);
- the rule tables, computed once per parameters and cached (cells, lines, windows,
  attacks, jumps);
- `model(params)` → `MipModel` and `from_mip(params, x)` → solution, and/or
  `search(params)` → `frontier.LayeredProblem` (a state graph over bitboards with jump
  rules, layered like peg solitaire's) whose goal path is the solution, with
  `from_search(params, raw)` turning the engine's answer into the family's solution;
- `exhaustive(params)` → (objective or None, solution or None): the answer by a second,
  independent method for small instances (raises ValueError beyond them), to check the
  first against;
- `verify(params, solution)` → objective, recomputed from the solution alone (raises
  `InvalidSolution`);
- `encode(solution)` / `decode(text)`: the compact text stored in the catalog's
  `solution` column;
- `render(params, solution)`: a text picture, and `picture(params, solution)`: a
  matplotlib Figure drawn as a person would draw it (`solve --picture FILE`);
- optionally `details(params, solution)`: extra fields for the CLI's `--json`;
- optionally `cited(params)`, `model_citing(params, values)` and `published(params)`:
  the values its model trusts (optima of other instances, with their sources), for
  certificates (`puzzlesweep.citation`).

Modules here that are not families: `hitting_set` (the minimum hitting-set core that
`domination` and `no_k_in_row` describe themselves to: MIP, greedy start, exhaustive
search and count, verifier, codec), `_box` (row-major box geometry and symmetries),
`_no_k_optima` (the proven optima behind no_k_in_row's cuts, with their sources) and
`_draw` (matplotlib plumbing).

A family may also live outside this package: an entry point in the group
`puzzlesweep.families` (`NAME = "module"` in its project's `pyproject.toml`) names its
module, which `get` loads and checks against `Family` and `CAPABILITIES` (one line
naming what is missing). `FAMILIES` is read afresh on each access: the built-in families,
then those of the installed entry points; nothing is registered at run time. A
built-in name always means the built-in family. docs/development.md shows the steps.
"""

import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType
from typing import Any, Protocol

from puzzlesweep.core import BadInput, Params, instance_key
from puzzlesweep.solvers import engines

#: The families of this package, in the order they are listed.
BUILTIN = ("monochromatic_lines", "no_k_in_row", "domination", "peg_solitaire")
#: The entry point group through which an installed project adds a family.
ENTRY_POINTS = "puzzlesweep.families"


class Family(Protocol):
    """What every family module has (the members a solve, a sweep, the catalog and the
    dashboard use); `CAPABILITIES` lists the members each solver and option needs."""

    NAME: str
    SOLVERS: tuple[str, ...]
    AXES: tuple[str, tuple[str, ...]]
    Params: type[Params]
    expand: Callable[[dict], list[dict]]
    canonical: Callable[[Any], Any]
    from_canonical: Callable[[Any, Any], Any]
    exhaustive: Callable[[Any], tuple[Any, Any]]
    verify: Callable[[Any, Any], int]
    encode: Callable[[Any], str]
    decode: Callable[[str], Any]
    render: Callable[[Any, Any], str]
    picture: Callable[[Any, Any], Any]


#: Capability -> the members it needs. `mip` is needed by the MIP engines (highs, scip:
#: `solvers.engines`), `auto` by the solver auto (which also needs `mip`), `search` by
#: a search engine (frontier); `count` (`solve --count`) and `split` (`puzzlesweep
#: prove`) are optional.
CAPABILITIES = {
    "mip": ("model", "from_mip"),
    "auto": ("auto_solver",),
    "search": ("search",),
    "count": ("symmetries", "exhaustive_count"),
    "split": ("split_model",),
}
#: The solver that is not an engine: the family's measured choice of a MIP engine.
AUTO = "auto"


def needs(solver: str) -> tuple[str, ...]:
    """The capabilities a family that lists `solver` must have: ("mip", "auto") for
    auto, else what the engine takes (`engines.Engine.takes`). Raises BadInput for a
    name that is neither."""
    return ("mip", "auto") if solver == AUTO else (engines.get(solver).takes,)


def capabilities(module: ModuleType) -> frozenset[str]:
    """The capabilities `module` has: those of `CAPABILITIES` whose members it defines."""
    return frozenset(c for c, members in CAPABILITIES.items() if _defines(module, members))


def _defines(module: ModuleType, members) -> bool:
    return all(hasattr(module, member) for member in members)


def solvers(module: ModuleType) -> tuple[str, ...]:
    """The solvers family `module` supports: its own `SOLVERS` (default first), then
    every other engine of the table that takes what it gives (a MIP or a search), so an
    engine added to the table serves every family it fits."""
    gives = capabilities(module)
    more = [name for name, e in engines.table().items() if e.takes in gives]
    return tuple(dict.fromkeys([*module.SOLVERS, *more]))


def check(module: ModuleType, name: str) -> frozenset[str]:
    """Check that `module` is a family called `name` (`Family`'s members, `NAME`, and the
    capabilities its `SOLVERS` need); returns its capabilities. Raises BadInput with one
    line naming every member that is missing or wrong."""
    where = f"family {name!r} (module {module.__name__})"
    missing = [m for m in Family.__annotations__ if not hasattr(module, m)]
    if missing:
        raise BadInput(f"{where} lacks {', '.join(missing)}; docs/development.md lists them")
    if module.NAME != name:
        raise BadInput(f"{where} says NAME = {module.NAME!r}; it must be {name!r}")
    known = (AUTO, *engines.table())
    if not module.SOLVERS or any(s not in known for s in module.SOLVERS):
        raise BadInput(f"{where} has SOLVERS {module.SOLVERS!r}; each one of {', '.join(known)}")
    needed = {c for solver in module.SOLVERS for c in needs(solver)}
    lacking = [m for c in sorted(needed) for m in CAPABILITIES[c] if not hasattr(module, m)]
    if lacking:
        raise BadInput(f"{where} lacks {', '.join(lacking)}, needed by its SOLVERS")
    return capabilities(module)


def _installed() -> dict[str, importlib.metadata.EntryPoint]:
    """The entry points of `ENTRY_POINTS` by name, built-in names left out."""
    points = importlib.metadata.entry_points(group=ENTRY_POINTS)
    return {point.name: point for point in points if point.name not in BUILTIN}


def __getattr__(attribute: str):
    """`FAMILIES`: the built-in family names, then the installed ones, sorted."""
    if attribute == "FAMILIES":
        return BUILTIN + tuple(sorted(_installed()))
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


def known(name: str) -> bool:
    """Whether `name` is a family: built-in (without reading the entry points) or installed."""
    return name in BUILTIN or name in _installed()


def get(name: str) -> ModuleType:
    """The family module called `name`: a built-in one, or the module an installed entry
    point of `ENTRY_POINTS` names, checked by `check`. Raises BadInput listing the known
    families for an unknown name, or naming what an installed family lacks."""
    if name in BUILTIN:
        return importlib.import_module(f"puzzlesweep.puzzles.{name}")
    if name in _LOADED:  # reading the entry points takes ~7 ms: once per process
        return _LOADED[name]
    point = _installed().get(name)
    if point is None:
        known = BUILTIN + tuple(sorted(_installed()))
        raise BadInput(f"unknown family {name!r}; known families: {', '.join(known)}")
    try:
        module = point.load()
    except Exception as exc:  # an installed family that cannot be imported
        raise BadInput(f"family {name!r}: {point.value} cannot be imported: {exc}") from None
    check(module, name)
    _LOADED[name] = module
    return module


#: The installed families this process has loaded and checked (as `sys.modules` keeps
#: modules): a worker asks `get` several times per instance.
_LOADED: dict[str, ModuleType] = {}


@dataclass(frozen=True)
class Instance:
    """One puzzle instance: a family name and its validated parameters (a handle that
    workers rebuild models from; small enough to send anywhere). Its keys are
    `core.instance_key` hashes: `key` of the family's canonical form (equivalent
    instances share it), `params_key` of these very params; each is computed once per
    object (a batch asks for both several times per instance)."""

    family: str
    params: Params

    @cached_property
    def key(self) -> str:
        """The stable instance key of the canonical form (16 hex digits)."""
        return instance_key(self.family, get(self.family).canonical(self.params))

    @cached_property
    def params_key(self) -> str:
        """The stable key of these very params (equal to `key` for a canonical instance)."""
        return instance_key(self.family, self.params)


def describe(name: str) -> dict:
    """Family `name` as people choose its instances: {"family", "solvers" (`solvers`,
    default first), "parameters": [{"name", "type" (its values as text: int, list[int], or the
    words a Literal allows), "default" (None when required), "required",
    "description" (with its range)}]}, read from the `Params` model that validates
    them. Raises BadInput for an unknown family."""
    import typing

    from pydantic_core import PydanticUndefined

    module = get(name)
    parameters = []
    for field, info in module.Params.model_fields.items():
        annotation = info.annotation
        if typing.get_origin(annotation) is typing.Literal:
            kind = " | ".join(map(str, typing.get_args(annotation)))
        else:
            kind = getattr(annotation, "__name__", None) or str(annotation)
            kind = str(annotation) if "[" in str(annotation) else kind
        required = info.default is PydanticUndefined and info.default_factory is None
        parameters.append(
            {
                "name": field,
                "type": kind.replace("typing.", ""),
                "default": None if required else info.get_default(call_default_factory=True),
                "required": required,
                "description": info.description or "",
            }
        )
    return {"family": name, "solvers": list(solvers(module)), "parameters": parameters}
