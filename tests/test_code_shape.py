"""The package stays a house a newcomer can walk: every function fits on a screen and
every module is read in one sitting. ruff has no rule for a function's length (its
C901 and PLR0915 count branches and statements, not lines), so this counts lines."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = {".venv", "tests", "benchmarks", "build", "puzzlesweep.egg-info"}
MAX_FUNCTION_LINES = 60  # a screen: the team's rule (docs/development.md), issue 21 item 6
MAX_MODULE_LINES = 400


def _sources() -> list[Path]:
    """The package's Python files (the directories that pyproject.toml maps into
    `puzzlesweep`, deploy/ and docs/ included), without tests and benchmarks."""
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if not SKIPPED & set(path.relative_to(ROOT).parts)
        and not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
    )


def test_no_function_over_60_lines_and_no_module_over_400():
    sources = _sources()
    assert len(sources) > 50  # the package was found, not an empty directory
    too_long = []
    for path in sources:
        text = path.read_text()
        name = path.relative_to(ROOT)
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
            too_long.append(f"module {name}: {lines} lines")
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert too_long == []


DASK = {"dask", "distributed", "prefect_dask"}
DASK_HOME = Path("flows/cluster.py")  # issue 21 item 4: Dask is imported in one module


def _dask_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of each import of dask, distributed or prefect_dask (or a module
    of theirs) in `tree`, at any depth: an import inside a function counts too."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0] in DASK]
    return found


def test_dask_is_imported_in_one_module():
    sources = _sources()
    assert ROOT / DASK_HOME in sources
    elsewhere = []
    for path in sources:
        name = path.relative_to(ROOT)
        imports = _dask_imports(ast.parse(path.read_text(), filename=str(path)))
        if name == DASK_HOME:
            # the home imports all three: the check would see one if it were elsewhere
            assert {module.split(".")[0] for _, module in imports} == DASK
        else:
            elsewhere += [f"{name}:{line} imports {module}" for line, module in imports]
    assert elsewhere == []
