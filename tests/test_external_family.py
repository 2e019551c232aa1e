"""A family that lives outside the package, written from docs/development.md's steps to
the letter: the page's `file=` blocks become a project in the test's own folder, which
is installed as pip would install it (the module beside a `*.dist-info` whose
`entry_points.txt` carries the project's `[project.entry-points]`), put on `sys.path` and
`PYTHONPATH`, and then registers, passes the contract suite and runs in a sweep."""

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from puzzlesweep import catalog, puzzles
from puzzlesweep.core import BadInput

ROOT = Path(__file__).resolve().parents[1]
#: A fenced block that is a file of the example project: ```LANGUAGE file=NAME
FILE_BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def write_project(folder: Path, project: str = ".") -> set[str]:
    """Write into `folder` the `file=` blocks of docs/development.md named `project/FILE`
    (the family's are named `FILE` alone); returns the names written."""
    blocks = FILE_BLOCK.findall((ROOT / "docs" / "development.md").read_text())
    chosen = {Path(name).name: text for name, text in blocks if str(Path(name).parent) == project}
    folder.mkdir()
    for name, text in chosen.items():
        (folder / name).write_text(text)
    return set(chosen)


def install(project: Path, site: Path) -> None:
    """What `pip install --target site project` leaves in `site` for a project of
    `py-modules`: the modules, and a dist-info with METADATA and entry_points.txt."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())
    name, version = meta["project"]["name"], meta["project"]["version"]
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    groups = meta["project"]["entry-points"]
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in points.items())
            for group, points in groups.items()
        )
    )
    for module in meta["tool"]["setuptools"]["py-modules"]:
        (site / f"{module}.py").write_text((project / f"{module}.py").read_text())


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """The documented project installed into `tmp_path/site`, seen by this process
    (`sys.path`) and by the processes it starts (`PYTHONPATH`)."""
    assert write_project(tmp_path / "grid-cover") == {"grid_cover.py", "pyproject.toml"}
    install(tmp_path / "grid-cover", tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    paths = [str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
    yield tmp_path / "site"
    sys.modules.pop("grid_cover", None)


def test_the_documented_family_registers_and_passes_the_contract_suite(site):
    assert "grid_cover" not in puzzles.BUILTIN
    assert puzzles.FAMILIES[-1] == "grid_cover"
    module = puzzles.get("grid_cover")
    assert module.__file__ == str(site / "grid_cover.py")
    assert puzzles.check(module, "grid_cover") == {"mip"}
    listed = subprocess.run(
        [sys.executable, "-m", "puzzlesweep.cli", "families", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert "grid_cover" in [family["family"] for family in json.loads(listed.stdout)]
    # The documented call: the contract suite on this one family, in a fresh process.
    contract = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        + ["tests/test_contract.py", "-k", "grid_cover"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert contract.returncode == 0, contract.stdout[-3000:]
    assert re.search(r"\b8 passed\b", contract.stdout), contract.stdout[-3000:]


def test_the_documented_family_runs_in_a_sweep(site, tmp_path):
    spec = tmp_path / "cover.toml"
    spec.write_text(
        'name = "covers"\n[[study]]\nfamily = "grid_cover"\ntime_limit = 20\n'
        "[study.grid]\nrows = [2, 3]\ncols = [3, 4]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "puzzlesweep.cli", "run", str(spec), "--backend", "threads"]
        + ["--catalog", str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    _, rows = catalog.query(
        tmp_path / "results",
        "SELECT rows, cols, status, objective, verified FROM results"
        " WHERE family = 'grid_cover' ORDER BY rows, cols",
    )
    # König's theorem: a grid graph's minimum vertex cover has floor(rows·cols / 2) cells.
    assert [tuple(row) for row in rows] == [
        (2, 3, "optimal", 3, True),
        (2, 4, "optimal", 4, True),
        (3, 3, "optimal", 4, True),
        (3, 4, "optimal", 6, True),
    ]


def test_a_family_that_lacks_members_is_refused_in_one_line(site):
    (site / "half_cover.py").write_text(
        (site / "grid_cover.py")
        .read_text()
        .replace('NAME = "grid_cover"', 'NAME = "half_cover"')
        .replace("def verify(", "def _verify(")
        .replace("def from_mip(", "def _from_mip(")
    )
    points = next(site.glob("*.dist-info")) / "entry_points.txt"
    points.write_text(points.read_text() + "half_cover = half_cover\n")
    try:
        with pytest.raises(BadInput) as refused:
            puzzles.get("half_cover")
        message = str(refused.value)
        assert "\n" not in message and "'half_cover'" in message and "verify" in message
        module = sys.modules["half_cover"]
        module.verify = module._verify  # with verify back, the MIP capability is missing
        with pytest.raises(BadInput, match=r"lacks from_mip, needed by its SOLVERS"):
            puzzles.check(module, "half_cover")
    finally:
        sys.modules.pop("half_cover", None)
