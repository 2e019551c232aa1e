"""The values a model trusts: optima of other instances, each with where it comes from.

A family's model may hold cuts derived from the proven optima of smaller instances (the
sub-box cuts of `no_k_in_row`: Σ x over a sub-box >= its optimum). A proof on that
model is only as good as those values, so a certificate lists each one (`Cited`) with
its source: a published term (`Published`: an OEIS sequence, its index and its term as
printed there) or a certificate file of its own proof (`Certified`, a file name in the
citing certificate's folder, `certificates/`). A family that cites values provides:

    cited(params) -> list[Cited]        the values its own `model(params)` uses, with
                                        the sources its tables give them
    model_citing(params, values)        the model built from `values` alone (never
                                        from its tables); ValueError for a value it
                                        cannot use
    published(params) -> Published | None
                                        the published term that gives the optimum of
                                        `params`, from its transcription of the
                                        sequence (None: not published)

Here: `of` (a family's own values for an instance, from its tables), `model` (the model
of a certificate's values), `problems` (whether a value holds by its source; a cited
certificate is fetched and checked by the caller, `puzzlesweep.certificate`) and
`digest` (the values of a list, not their sources, named in a part's catalog row, so a
certificate is never exported with values other than those its parts were solved with).
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from puzzlesweep.core import BadInput


@dataclass(frozen=True)
class Published:
    """A published optimum: `sequence` (an OEIS A-number, e.g. "A181019"), `index` (the
    term's index as the sequence writes it: (n,) or (n, k) of a table), `term` (the
    term as printed there), `value` (the objective it gives the instance, e.g. cells −
    term for a sequence of stones kept; not written to a file, re-derived)."""

    sequence: str
    index: tuple[int, ...]
    term: int
    value: float

    def to_json(self) -> dict[str, Any]:
        """{"oeis": sequence, "index": [...], "term": term}."""
        return {"oeis": self.sequence, "index": list(self.index), "term": self.term}

    def text(self) -> str:
        """The term as a reader finds it: `OEIS A181019 T(3,4) = 7`."""
        return f"OEIS {self.sequence}({','.join(map(str, self.index))}) = {self.term}"


@dataclass(frozen=True)
class Certified:
    """A value proven by its own certificate: `file`, a file name in the folder of the
    certificate that cites it (e.g. "no_k_in_row-11x12-k3.json")."""

    file: str

    def to_json(self) -> dict[str, Any]:
        """{"certificate": file}."""
        return {"certificate": self.file}


@dataclass(frozen=True)
class Cited:
    """One trusted value: `params` (the instance whose optimum it is, as the family's
    JSON params, e.g. {"dims": [3, 4], "k": 3}), `value` (that optimum), `source`
    (`Published`, `Certified`, or None when the value has none: a check then fails)."""

    params: dict[str, Any]
    value: float
    source: Published | Certified | None

    def to_json(self) -> dict[str, Any]:
        """The certificate's form: {"params", "value", "source"} (source null if none)."""
        source = self.source.to_json() if self.source else None
        return {"params": self.params, "value": self.value, "source": source}

    def text(self) -> str:
        """`dims=3,4 k=3 = 5`: the instance and its value, for messages."""
        params = " ".join(
            f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in self.params.items()
        )
        return f"{params} = {_number(self.value)}"


def from_json(entry: dict[str, Any]) -> Cited:
    """The `Cited` of a certificate's entry (`Cited.to_json`'s form); a published
    source's `value` is left None (the family re-derives it). Raises ValueError naming
    what is missing or of the wrong type."""
    if not isinstance(entry, dict) or not isinstance(entry.get("params"), dict):
        raise ValueError("an entry needs params (an object)")
    value = entry.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("an entry needs a value (a number)")
    source = entry.get("source")
    if source is None:
        return Cited(entry["params"], value, None)
    if isinstance(source, dict) and isinstance(source.get("certificate"), str):
        return Cited(entry["params"], value, Certified(source["certificate"]))
    if isinstance(source, dict) and isinstance(source.get("oeis"), str):
        index, term = source.get("index"), source.get("term")
        if not isinstance(index, list) or not all(type(i) is int for i in index):
            raise ValueError("a published source needs an index (a list of integers)")
        if type(term) is not int:
            raise ValueError("a published source needs a term (an integer)")
        return Cited(entry["params"], value, Published(source["oeis"], tuple(index), term, None))
    raise ValueError('a source is {"oeis", "index", "term"}, {"certificate"} or null')


def digest(values: list[Cited]) -> str:
    """16 hex digits naming the (params, value) pairs of `values` in order (not their
    sources: a source does not change the model)."""
    text = json.dumps([[c.params, float(c.value)] for c in values], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class UnusableCitation(BadInput):
    """A cited value a family's model cannot use (`model`): no strict sub-box of the
    instance, cited twice, or cited to a family that cites none."""


def of(family_name: str, params) -> list[Cited]:
    """The values the family's `model(params)` trusts as its tables give them, with their
    sources (none for a family without `cited`)."""
    from puzzlesweep import puzzles  # the registry imports the families, which import this

    family = puzzles.get(family_name)
    return family.cited(params) if hasattr(family, "cited") else []


def model(family: ModuleType, params, cited: list[Cited]):
    """`family`'s MipModel of `params` built from the values `cited` alone
    (`model_citing`; a family without it takes none). Raises UnusableCitation."""
    if not hasattr(family, "model_citing"):
        if cited:
            raise UnusableCitation(f"family {family.NAME} cites no values, {len(cited)} given")
        return family.model(params)
    try:
        return family.model_citing(params, cited)
    except ValueError as exc:
        raise UnusableCitation(f"cited value {exc}") from None


def problems(family: ModuleType, value: Cited, certificate_of: Callable) -> list[str]:
    """Whether the cited `value` (of an instance of `family`) holds by its source, one
    line naming the value per problem: no source; a published term that is not the one
    the family's transcription gives (`published_problems`); a cited certificate that
    does not certify that instance (up to the family's `canonical` form) optimal with
    that value. `certificate_of(file)` → (the cited certificate's document, or None when
    it cannot be had; the problems of finding or checking it)."""
    name = f"cited value {value.text()}"
    try:
        params = family.Params.model_validate(value.params)
    except ValueError as exc:  # pydantic's ValidationError
        return [f"{name}: its params are not valid: {exc.errors()[0]['msg']}"]
    if value.source is None:
        return [f"{name} has no source: neither a published term nor a certificate"]
    if isinstance(value.source, Published):
        return published_problems(family, params, value)
    file = value.source.file
    document, found = certificate_of(file)
    if document is None:
        return [f"{name}: {problem}" for problem in found]
    canonical = getattr(family, "canonical", lambda p: p)
    try:
        theirs = canonical(family.Params.model_validate(document["params"])).model_dump()
    except ValueError:
        theirs = None
    claim = document["claim"]
    if document["family"] != family.NAME or theirs != canonical(params).model_dump():
        return [*found, f"{name}: {file} certifies another instance"]
    if claim["status"] != "optimal" or claim["objective"] != value.value:
        return [*found, f"{name}: {file} certifies {claim['status']} {claim['objective']}"]
    return found


def published_problems(family: ModuleType, params, value: Cited) -> list[str]:
    """Whether `value`'s published source is the term the family's transcription gives
    the instance `params` (`family.published`) and gives that value: one line naming
    the value when not."""
    source, name = value.source, f"cited value {value.text()}"
    known = family.published(params) if hasattr(family, "published") else None
    if known is None:
        return [f"{name}: {source.text()} is no published term known for it"]
    if (source.sequence, source.index, source.term) != (known.sequence, known.index, known.term):
        return [f"{name}: the file cites {source.text()}, the published term is {known.text()}"]
    if known.value != value.value:
        return [f"{name}: {known.text()} gives {_number(known.value)}, not {_number(value.value)}"]
    return []


def _number(value: float) -> str:
    """An integral float without its `.0`."""
    return str(int(value)) if float(value).is_integer() else str(value)
