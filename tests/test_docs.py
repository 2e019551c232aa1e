"""The documents keep their word: every relative link of README.md and docs/*.md leads to
a file of the repository, and every command README.md marks runnable (a fenced block
with the info string `sh runnable`, docs/development.md) runs as written."""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A Markdown link or image, `[text](target)` or `![alt](target)`; the target ends at
#: the first space or closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
#: A fenced block: its info string and its text.
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def relative_links(path: Path) -> list[str]:
    """The targets of `path`'s links that are not URLs, without their #fragment."""
    targets = [target for target in LINK.findall(path.read_text())]
    return [
        target.split("#")[0]
        for target in targets
        if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


def runnable_blocks(text: str, language: str = "sh") -> list[str]:
    """The text of every fenced block whose info string is `LANGUAGE runnable`."""
    return [body for info, body in FENCE.findall(text) if info.split() == [language, "runnable"]]


def test_every_relative_link_leads_to_a_file():
    checked, broken = 0, []
    for document in DOCUMENTS:
        for target in relative_links(document):
            checked += 1
            if not (document.parent / target).exists():
                broken.append(f"{document.relative_to(ROOT)}: {target}")
    assert broken == []
    # README links every page of docs/ and benchmarks/README.md; the pages link each other.
    assert checked >= 30
    linked = {(ROOT / t).resolve() for t in relative_links(ROOT / "README.md")}
    assert {p.resolve() for p in DOCUMENTS[1:]} <= linked


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](missing.md#part) [web](https://delta.io) [in](#x)\n")
    assert relative_links(page) == ["page.md", "missing.md"]


def test_readme_runnable_commands_run(tmp_path):
    """Each `sh runnable` block of README.md runs as one bash script (`set -e`) in a
    scratch directory where `.venv` and `sweeps` link to the checkout's, so its
    catalog `./results` is a scratch catalog; the output shows what README promises."""
    blocks = runnable_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 3  # solve, a sweep, a query
    for name in (".venv", "sweeps"):
        (tmp_path / name).symlink_to(ROOT / name)
    env = {**os.environ, "PUZZLESWEEP_CATALOG": str(tmp_path / "results"), "COLUMNS": "200"}
    env.pop("PREFECT_API_URL", None)  # the run starts its own temporary API, as a reader's
    outputs = []
    for block in blocks:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", block],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    solve, sweep, query = outputs[:3]
    # OEIS A006075: 12 knights dominate 8×8; OEIS A127500 with T_5 from hole 4: 9 moves.
    assert "status optimal  objective 12  bound 12  verified True" in solve
    assert '"objective": 9' in solve
    # The sweep: knights n×n for n = 1..5 -> 1, 4, 4, 4, 5 (OEIS A006075).
    assert "5 instances" in sweep
    rows = re.findall(r"│\s*(\d+)\s*│\s*(\d+)\s*│\s*optimal", query)
    assert [(int(n), int(v)) for n, v in rows] == [(1, 1), (2, 4), (3, 4), (4, 4), (5, 5)]

    # The Python blocks marked runnable, in the same directory (so `results` is the
    # catalog the sweep above wrote): solving one instance, and reading the catalog.
    solving, reading = [
        subprocess.run(
            [str(ROOT / ".venv/bin/python"), "-c", block],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        for block in runnable_blocks((ROOT / "README.md").read_text(), "python")
    ]
    assert solving.returncode == 0 and reading.returncode == 0, solving.stderr + reading.stderr
    assert solving.stdout.splitlines()[-1] == "optimal 12 True"  # OEIS A006075: 8×8 -> 12
    assert re.search(r"│ domination\s*│\s*5 │", reading.stdout), reading.stdout  # 5 boards


#: The names of the design documents the project was started from, which live outside
#: the repository (written in pieces, so that this file does not name them itself).
OUTSIDE = re.compile(
    "|".join(
        [
            "DESIGN" + r"\.md",
            "PUZZLES" + r"\.md",
            "STYLE" + r"\.md",
            r"\.\./" + "shared",
            "shared/" + "seeds",
        ]
    )
)


def test_nothing_points_at_a_document_outside_the_repository():
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    texts = [p for p in tracked if p.endswith((".py", ".md", ".toml", ".txt", ".yaml", ".yml"))]
    found = [
        f"{path}:{number}"
        for path in texts
        for number, line in enumerate((ROOT / path).read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert len(texts) > 100
    assert found == []


def test_the_catalog_page_names_every_common_column():
    # docs/development.md, "Adding a catalog column": a column is named on the page.
    from puzzlesweep.catalog.schema import COMMON_COLUMNS

    page = (ROOT / "docs" / "catalog.md").read_text()
    unnamed = [name for name, _ in COMMON_COLUMNS if f"`{name}`" not in page]
    assert unnamed == []
