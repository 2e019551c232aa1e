"""The puzzle families, one module each, all with the same shape.

Every family module defines, in this order:
- NAME, SOLVERS (the solvers it supports, default first) and its vocabulary;
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
- optionally `details(params, solution)`: extra fields for the CLI's `--json`.

Modules here that are not families: `hitting_set` (the minimum hitting-set core that
`domination` and `no_k_in_row` describe themselves to: MIP, greedy start, exhaustive
search and count, verifier, codec), `_box` (row-major box geometry and symmetries) and
`_draw` (matplotlib plumbing).
"""

import importlib
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType

from puzzlesweep.core import BadInput, Params, instance_key

FAMILIES = ("monochromatic_lines", "no_k_in_row", "domination", "peg_solitaire")


def get(name: str) -> ModuleType:
    """The family module called `name`; raises BadInput listing the known families."""
    if name not in FAMILIES:
        raise BadInput(f"unknown family {name!r}; known families: {', '.join(FAMILIES)}")
    return importlib.import_module(f"puzzlesweep.puzzles.{name}")


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
    """Family `name` as people choose its instances: {"family", "solvers" (default
    first), "parameters": [{"name", "type" (its values as text: int, list[int], or the
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
    return {"family": name, "solvers": list(module.SOLVERS), "parameters": parameters}
