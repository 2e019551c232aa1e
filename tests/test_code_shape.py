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


#: pyproject.toml's package-dir: the directory of each part of the `puzzlesweep` package.
PACKAGE_DIRS = {
    "puzzlesweep": "puzzlesweep",
    "puzzles": "puzzlesweep.puzzles",
    "solvers": "puzzlesweep.solvers",
    "catalog": "puzzlesweep.catalog",
    "flows": "puzzlesweep.flows",
}


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for directory, package in PACKAGE_DIRS.items():
        for path in (ROOT / directory).rglob("*.py"):
            parts = [package, *path.relative_to(ROOT / directory).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of `tree` outside `if TYPE_CHECKING:` blocks (an annotation is not an
    import at run time), imports inside functions included."""
    skipped = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for statement in node.body
        for child in ast.walk(statement)
    }
    return [node for node in ast.walk(tree) if id(node) not in skipped]


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the package that module `name` (at `path`) imports, at any depth:
    `from a import b` names module a.b when there is one, else a."""

    def known(dotted: str) -> str:
        while dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted

    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {known(a.name) for a in node.names if a.name.startswith("puzzlesweep")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".")[: None if path.name == "__init__.py" else -1]
                base = ".".join(package[: len(package) - node.level + 1] + [base] * bool(base))
            if base.startswith("puzzlesweep"):
                found |= {
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else known(base)
                    for a in node.names
                }
    return found - {name}


def _import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def test_the_catalog_imports_nothing_above_core():
    # the catalog is a leaf: it stores and reads rows and knows no family, engine or flow
    graph = _import_graph()
    catalog = {name for name in graph if name.startswith("puzzlesweep.catalog")}
    assert len(catalog) > 8  # its modules were found
    above = ("puzzlesweep.solve", "puzzlesweep.puzzles", "puzzlesweep.solvers", "puzzlesweep.flows")
    wrong = sorted(
        f"{name} imports {other}"
        for name in catalog
        for other in graph[name]
        if other.startswith(above) or other == "puzzlesweep"
    )
    assert wrong == []


def test_no_import_cycle_in_the_package():
    graph = _import_graph()
    assert "puzzlesweep.flows.sweep" in graph["puzzlesweep"]  # the package's facade was read
    cycles = []
    for start in sorted(graph):  # a cycle is a path from a module back to itself
        seen, frontier = set(), [(start, (start,))]
        while frontier:
            name, path = frontier.pop()
            for other in sorted(graph[name]):
                if other == start:
                    cycles.append(" -> ".join((*path, start)))
                elif other not in seen:
                    seen.add(other)
                    frontier.append((other, (*path, other)))
    assert cycles == []


def test_families_build_models_and_run_no_engine():
    # a family states its model with solvers.mip's types (and frontier's problem); the
    # engines that solve it (and prove its pending rows) are never imported by it
    graph = _import_graph()
    families = {name for name in graph if name.startswith("puzzlesweep.puzzles")}
    assert "puzzlesweep.puzzles.domination" in families
    engines = (
        "puzzlesweep.solvers.highs",
        "puzzlesweep.solvers.scip",
        "puzzlesweep.solvers.lookahead",
    )
    wrong = sorted(f"{n} imports {o}" for n in families for o in graph[n] if o in engines)
    assert wrong == []
