"""The core types every layer shares: parameters, their stable keys, bad input.

An instance (`puzzles.Instance`, beside the registry of families whose canonical forms
it needs) is a family name plus validated parameters (a frozen pydantic model, one
class per family). Its `instance_key` is the first 16 hex digits of the SHA-256 of the
canonical JSON of {"family": name, "params": canonical params} with sorted keys, so it
is the same on every machine and Python version, and equivalent instances (a mirrored
start hole, an m×n board against n×m) share it: the canonical params are the family's
`canonical(params)`, its least image under the symmetries of the puzzle. `params_key`
is the same hash of the instance's own params, which tells equivalent instances apart.
"""

import hashlib
import json
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

#: The version of puzzlesweep that a run and a certificate record (`puzzlesweep.__version__`).
VERSION = "0.1.0"

#: The closed status vocabulary of every result (docs/catalog.md, columns; the catalog's
#: per-status counts). `feasible` (an incumbent without proof and without a limit) is
#: part of the vocabulary, though no solver here reports it: a limit is always the reason.
STATUSES = ("optimal", "feasible", "infeasible", "time_limit", "node_limit", "error")

#: The result columns that name one job's result: the instance's own params (an
#: equivalent instance is a row of its own), the engine and the limits. A job whose key
#: has a stored row of a final status (`FINAL`) is done; a re-run skips it.
DONE_KEY = ("params_key", "solver", "time_limit", "node_limit")
DoneKey = tuple[str, str, float, int | None]
#: SQL condition on a result row: its status is final, any status but `error` (a solve
#: that failed is tried again by the next run).
FINAL = "status <> 'error'"


def whole(value: Any) -> Any:
    """An integral float as an int (4.0 → 4: every family's objective is an integer, and
    rows and `--json` show it so); any other value as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def done_key(row: Mapping[str, Any]) -> DoneKey:
    """The `DONE_KEY` values of a result row (or of any mapping with those keys), in
    order: (params_key, solver, time_limit in seconds, node_limit or None)."""
    return tuple(row[column] for column in DONE_KEY)  # type: ignore[return-value]


class Params(BaseModel):
    """Base of every family's parameter model: frozen, unknown keys refused.

    Field names become catalog columns, so none may reuse a common result column's name
    (see `puzzlesweep.catalog.COMMON_COLUMNS`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class BadInput(ValueError):
    """Input that names what is wrong and where; the CLI exits 2 on it, writing nothing."""


class InvalidSolution(ValueError):
    """A solution that breaks the family's rules (raised by a family's `verify`)."""


def instance_key(family: str, params: Params) -> str:
    """The stable 16-hex-digit key of (family, params); see the module docstring."""
    canonical = json.dumps(
        {"family": family, "params": params.model_dump(mode="json")},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def validation_message(error: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One clause per pydantic error, each naming the parameter: `key: message (got X)`.
    Positions in lists count from 1 and are named by the list (`study 1.time_limt`);
    a key the model does not know is called unknown, and with the `model` that was
    validated, the keys it knows at that place are listed."""
    clauses = []
    for item in error.errors():
        parts: list[str] = []
        for part in item["loc"]:
            if isinstance(part, int) and parts:
                parts[-1] = f"{parts[-1]} {part + 1}"
            else:
                parts.append(str(part))
        where = ".".join(parts) or "parameters"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key"
        elif item["type"] == "missing":
            message = "required, but not given"
        clause = f"{where}: {message}"
        if item["type"] != "missing" and not isinstance(item.get("input"), dict):
            clause += f" (got {item.get('input')!r})"
        if item["type"] == "extra_forbidden" and (known := _keys_at(model, item["loc"][:-1])):
            clause += f"; the keys are {', '.join(known)}"
        clauses.append(clause)
    return "; ".join(clauses)


def _keys_at(model: type[BaseModel] | None, loc: tuple) -> list[str]:
    """The field names of the model found at `loc` inside `model` (through fields that
    hold a model or a list of models), or [] when there is none."""
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int):
            continue
        info = model.model_fields.get(part)
        model = (
            next(
                (
                    t
                    for t in (info.annotation, *typing.get_args(info.annotation))
                    if isinstance(t, type) and issubclass(t, BaseModel)
                ),
                None,
            )
            if info
            else None
        )
    return list(model.model_fields) if model is not None else []


def make_params(model: type[Params], raw: dict[str, Any], strict: bool = False) -> Params:
    """Validate `raw` into `model`; raises BadInput naming each wrong parameter. With
    `strict`, values are taken as typed (pydantic's strict mode: a boolean is not an
    integer, a string not a number), as a spec file's values are."""
    try:
        return model.model_validate(raw, strict=strict)
    except ValidationError as error:
        raise BadInput(validation_message(error, model)) from None
