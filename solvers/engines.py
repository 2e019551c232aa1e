"""The one table of engines: each engine's name, the module that runs it, and what it can
do. `auto`, the CLI's choices, `puzzlesweep families`, a family's check, the solve path,
proofs and the contract suite all read it; no other place spells an engine's name.

An engine is a module with `NAME`, `VERSION` (the catalog's `solver_version`) and the
members its capabilities need:

    optimum   solve(model: MipModel, limits) -> SolverResult: a family's MIP, solved and
              its optimum proven (status optimal), or stopped at a limit with the
              incumbent and a dual bound no higher than the optimum
    count     count(model, objective, symmetries, limits) -> a count of the optimal
              solutions and of those distinct up to `symmetries` (`scip.count`)
    split     solve(model, limits) on the parts of a split proof (the MIP with fixings
              and a cutoff row): a part's status and dual bound become lines of a
              certificate (`solvers.split.part_lower`)
    search    solve(problem, limits) -> SolverResult: a family's layered search problem
              (`frontier.LayeredProblem`), the moves of an optimum as its solution

The built-in engines are below; another project adds one through the entry point group
`puzzlesweep.engines` (name = module; the module says `CAPABILITIES`), as families are
added (docs/development.md, "Adding an engine"). A built-in name always means the
built-in engine: an entry point of that name is not read.
"""

import importlib
import importlib.metadata
from dataclasses import dataclass
from types import ModuleType

from puzzlesweep.core import BadInput

#: What an engine can do -> the module members it needs (see the module docstring).
CAPABILITIES = {
    "optimum": ("solve",),
    "count": ("count",),
    "split": ("solve",),
    "search": ("solve",),
}
#: The entry point group of the engines other projects install.
ENTRY_POINTS = "puzzlesweep.engines"


@dataclass(frozen=True)
class Engine:
    """One row of the table: `name` (the catalog's `solver`), the dotted `module` that
    runs it (imported on first use: SCIP loads only where it runs) and its
    `capabilities` (keys of `CAPABILITIES`)."""

    name: str
    module: str
    capabilities: frozenset[str]

    @property
    def takes(self) -> str:
        """What it solves of a family: "search" (`family.search(params)`) for a search
        engine, else "mip" (`family.model(params)`); the family capability it needs."""
        return "search" if "search" in self.capabilities else "mip"

    def load(self) -> ModuleType:
        """The engine's module (raises BadInput when it cannot be imported)."""
        try:
            return importlib.import_module(self.module)
        except Exception as exc:
            where = f"engine {self.name!r}: {self.module}"
            raise BadInput(f"{where} cannot be imported: {exc}") from None


BUILTIN = {
    "highs": Engine("highs", "puzzlesweep.solvers.highs", frozenset({"optimum", "split"})),
    "scip": Engine("scip", "puzzlesweep.solvers.scip", frozenset({"optimum", "count", "split"})),
    "frontier": Engine("frontier", "puzzlesweep.solvers.frontier", frozenset({"search"})),
}


def table() -> dict[str, Engine]:
    """Every engine that can run, by name: the built-in ones, then the installed ones
    sorted by name. An installed engine that cannot run (`refused`) is left out: it
    must not stop the others; asking for it by name (`get`) says why."""
    installed = _installed().items()
    return {**BUILTIN, **{name: e for name, e in installed if isinstance(e, Engine)}}


def refused() -> dict[str, str]:
    """The installed engines that cannot run, by name: why (one line each), e.g. "engine
    'half' (module half_engine) lacks count"."""
    return {name: str(e) for name, e in _installed().items() if isinstance(e, BadInput)}


def get(name: str, capability: str | None = None) -> Engine:
    """The engine called `name`, which must have `capability` when given. Raises
    BadInput naming the engines there are (or those with the capability), or what an
    installed engine of that name lacks."""
    engine = BUILTIN.get(name) or _LOADED.get(name) or _installed().get(name)
    if isinstance(engine, BadInput):
        raise BadInput(str(engine))
    if engine is None:
        raise BadInput(f"unknown engine {name!r}; engines: {', '.join(table())}")
    if capability is not None and capability not in engine.capabilities:
        able = ", ".join(with_capability(capability))
        raise BadInput(f"engine {name!r} cannot {capability}; engines that can: {able}")
    return engine


def module(name: str, capability: str) -> ModuleType:
    """The loaded module of engine `name`, which must have `capability` (see `get`)."""
    return get(name, capability).load()


def with_capability(capability: str) -> tuple[str, ...]:
    """The names of the engines that have `capability`, in the table's order."""
    return tuple(name for name, engine in table().items() if capability in engine.capabilities)


def _installed() -> dict[str, "Engine | BadInput"]:
    """Each installed engine by name, sorted: its row, or the BadInput that refuses it;
    each module is loaded and checked once per process (`_check`)."""
    points = importlib.metadata.entry_points(group=ENTRY_POINTS)
    chosen = {p.name: p for p in points if p.name not in BUILTIN}
    for name, point in chosen.items():
        if name not in _LOADED:
            try:
                _LOADED[name] = _check(point)
            except BadInput as exc:
                _LOADED[name] = exc
    return {name: _LOADED[name] for name in sorted(chosen)}


def _check(point: importlib.metadata.EntryPoint) -> Engine:
    """The engine an installed entry point names, its module checked: `NAME` equal to
    the entry point's name, `VERSION`, known `CAPABILITIES` and the members they need.
    Raises BadInput naming what is wrong."""
    where = f"engine {point.name!r} (module {point.value})"
    loaded = Engine(point.name, point.value, frozenset()).load()
    said = getattr(loaded, "CAPABILITIES", ())
    capabilities = frozenset(said) if isinstance(said, set | frozenset | tuple | list) else None
    unknown = sorted(capabilities - CAPABILITIES.keys()) if capabilities else None
    if not capabilities or unknown:
        what = f"unknown capability {', '.join(unknown)}" if unknown else f"CAPABILITIES {said!r}"
        raise BadInput(f"{where} has {what}; CAPABILITIES is a set of {', '.join(CAPABILITIES)}")
    needed = {"NAME", "VERSION"} | {m for c in capabilities for m in CAPABILITIES[c]}
    if missing := sorted(m for m in needed if not hasattr(loaded, m)):
        raise BadInput(f"{where} lacks {', '.join(missing)}")
    if loaded.NAME != point.name:
        raise BadInput(f"{where} says NAME = {loaded.NAME!r}; it must be {point.name!r}")
    return Engine(point.name, point.value, capabilities)


#: The installed engines this process has loaded and checked, or the BadInput that
#: refused each (as `sys.modules` keeps modules): a worker asks for its engine once per
#: instance.
_LOADED: dict[str, "Engine | BadInput"] = {}
