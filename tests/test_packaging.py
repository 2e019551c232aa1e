"""The package declares what it imports."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

from tests.conftest import ROOT

PACKAGES = ["puzzlesweep", "puzzles", "solvers", "catalog", "flows"]


def _imported_top_modules() -> set[str]:
    """The top-level modules imported anywhere in the package's code (absolute imports)."""
    found = set()
    for folder in PACKAGES:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_package_is_declared():
    # typer, rich, psutil, pydantic and uvicorn arrived only through Prefect; a package
    # the code imports must be a dependency of its own (pandas: the `pandas` extra).
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_name(r) for r in project["dependencies"]}
    declared |= {_name(r) for r in project["optional-dependencies"]["pandas"]}
    owners = packages_distributions()
    third_party = _imported_top_modules() - set(sys.stdlib_module_names) - {"puzzlesweep"}
    missing = {
        module: owners.get(module)
        for module in third_party
        if not {_name(d) for d in owners.get(module, [module])} & declared
    }
    assert missing == {}
    for name in ("typer", "rich", "psutil", "pydantic", "uvicorn"):
        assert name in declared
