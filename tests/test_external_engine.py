"""An engine that lives outside the package, written from docs/development.md's steps to
the letter: the page's `file=bnb-engine/...` blocks become a project in the test's own
folder, installed as pip would install it (`test_external_family.install`), put on
`sys.path` and `PYTHONPATH`; it then joins the table of engines, passes the contract
suite in a fresh process and solves through the CLI."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from puzzlesweep import puzzles
from puzzlesweep.core import BadInput
from puzzlesweep.solvers import engines

from .test_external_family import ROOT, install, write_project


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """The documented engine installed into `tmp_path/site`, seen by this process
    (`sys.path`) and by the processes it starts (`PYTHONPATH`)."""
    written = write_project(tmp_path / "bnb-engine", "bnb-engine")
    assert written == {"bnb_engine.py", "pyproject.toml"}
    install(tmp_path / "bnb-engine", tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    paths = [str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
    yield tmp_path / "site"
    engines._LOADED.clear()
    sys.modules.pop("bnb_engine", None)


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_the_documented_engine_joins_the_table_and_passes_the_contract_suite(site):
    assert list(engines.table()) == ["highs", "scip", "frontier", "bnb"]
    assert engines.get("bnb").capabilities == {"optimum"}
    assert engines.get("bnb").load().__file__ == str(site / "bnb_engine.py")
    # Every MIP family offers it, after its own solvers; the search family does not.
    assert puzzles.describe("domination")["solvers"] == ["auto", "highs", "scip", "bnb"]
    assert puzzles.describe("peg_solitaire")["solvers"] == ["frontier"]
    listed = run("-m", "puzzlesweep.cli", "engines", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {"engine": "bnb", "capabilities": ["optimum"], "module": "bnb_engine"} in json.loads(
        listed.stdout
    )
    # The documented call: the contract suite on this one engine, in a fresh process:
    # its members, the known values of the three MIP families (two each), an infeasible
    # MIP and a node limit.
    contract = run(
        "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_contract.py", "-k", "bnb"
    )
    assert contract.returncode == 0, contract.stdout[-3000:]
    assert re.search(r"\b4 passed\b", contract.stdout), contract.stdout[-3000:]


def test_the_documented_engine_solves_from_the_command_line(site):
    # OEIS A181018 (k = 3): 9 of the 16 points of the 4x4 grid are kept, 7 removed.
    done = run(
        "-m", "puzzlesweep.cli", "solve", "no_k_in_row", "dims=4,4", "k=3", "--solver", "bnb",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    assert (row["solver"], row["status"], row["objective"], row["verified"]) == (
        "bnb",
        "optimal",
        7,
        True,
    )
    refused = run(
        "-m", "puzzlesweep.cli", "solve", "peg_solitaire", "side=4", "start=2", "--solver", "bnb"
    )
    assert refused.returncode == 2
    assert "supports solver frontier, not 'bnb'" in refused.stderr


def test_a_broken_engine_is_refused_in_one_line_and_stops_nothing_else(site):
    (site / "half_engine.py").write_text(
        (site / "bnb_engine.py")
        .read_text()
        .replace('NAME = "bnb"', 'NAME = "half"')
        .replace('CAPABILITIES = frozenset({"optimum"})', 'CAPABILITIES = {"optimum", "count"}')
    )
    (site / "boom_engine.py").write_text('raise ImportError("no module named cplex")\n')
    points = next(site.glob("*.dist-info")) / "entry_points.txt"
    points.write_text(points.read_text() + "half = half_engine\nboom = boom_engine\n")
    try:
        assert list(engines.table()) == ["highs", "scip", "frontier", "bnb"]
        assert engines.refused() == {
            "boom": "engine 'boom': boom_engine cannot be imported: no module named cplex",
            "half": "engine 'half' (module half_engine) lacks count",
        }
        with pytest.raises(BadInput, match=r"^engine 'half' \(module half_engine\) lacks count$"):
            engines.get("half")
        listed = run("-m", "puzzlesweep.cli", "engines", "--json")
        assert listed.returncode == 2 and "lacks count" in listed.stderr, listed.stderr
        assert "cannot be imported" in listed.stderr
        assert [e["engine"] for e in json.loads(listed.stdout)][-1] == "bnb"
        # The other engines run as before; the broken one is refused by name.
        done = run("-m", "puzzlesweep.cli", "solve", "domination", "rows=3", "cols=3", "--json")
        assert done.returncode == 0 and json.loads(done.stdout)["objective"] == 4, done.stderr
        half = run(
            "-m", "puzzlesweep.cli", "solve", "domination", "rows=3", "cols=3", "--solver", "half"
        )
        assert half.returncode == 2 and "lacks count" in half.stderr, half.stderr
        # The contract suite fails it with why, rather than leaving it out.
        contract = run(
            "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_contract.py", "-k", "half"
        )  # fmt: skip
        assert contract.returncode == 1, contract.stdout[-3000:]
        assert re.search(r"\b2 errors\b", contract.stdout), contract.stdout[-3000:]
        assert "lacks count" in contract.stdout
    finally:
        sys.modules.pop("half_engine", None)
