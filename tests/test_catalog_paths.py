"""Catalogs that are not what they seem: Delta tables another tool wrote under the names
`results` and `runs`, a path through a symbolic link that leads nowhere, a disk that is
full before the catalog is made. Each is one line naming it, exit 2, before any work,
and nothing is written."""

import json
import os
import shutil
import subprocess

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from puzzlesweep.dashboard.server import StateCache

from .conftest import knights
from .test_catalog import _row, _write, cli


def _refused(args: list[str], says: str) -> None:
    done = cli(*args)
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, (args, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr


def _every_command(tmp_path, catalog_path, says: str) -> None:
    """`run` (both backends), `catalog query/check/summary/repair/history` refuse."""
    spec = tmp_path / "spec.toml"
    spec.write_text(knights("k", "1..2"))
    where = ["--catalog", str(catalog_path)]
    for backend in ("dask", "threads"):
        _refused(["run", str(spec), *where, "--backend", backend], says)
    for args in (["query", "SELECT 1"], ["check"], ["summary"], ["repair"], ["history"]):
        _refused(["catalog", *args, *where], says)


def test_tables_another_tool_wrote_are_named_with_their_missing_columns(tmp_path):
    other = tmp_path / "other"
    write_deltalake(str(other / "results"), pa.table({"a": [1, 2], "b": ["x", "y"]}))
    write_deltalake(str(other / "runs"), pa.table({"id": [1]}))
    says = "table results is not a puzzlesweep results table (it has no column run_id, sweep,"
    _every_command(tmp_path, other, says)
    cache = StateCache(str(other), interval=60)
    (message,) = json.loads(cache.get()).values()  # the dashboard's one line
    assert says in message and not message.startswith("BadInput"), message
    # ours, beside another tool's runs: runs is named
    mine = tmp_path / "mine"
    assert _write(mine, _row("domination", {"rows": 3, "cols": 3}, "r1"), "r1-0")
    write_deltalake(str(mine / "runs"), pa.table({"id": [1]}))
    _refused(["catalog", "summary", "--catalog", str(mine)], "table runs is not a puzzlesweep")
    assert DeltaTable(str(mine / "runs")).version() == 0  # nothing written


def test_a_symbolic_link_that_leads_nowhere_is_named(tmp_path):
    dangling, loop = tmp_path / "dangling", tmp_path / "loop"
    dangling.symlink_to(tmp_path / "gone" / "catalog")
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    _every_command(tmp_path, dangling, f"{dangling} is a symbolic link to {tmp_path}/gone/")
    _every_command(tmp_path, loop, f"{loop} is a loop of symbolic links")
    _refused(["catalog", "check", "--catalog", str(loop / "below")], "a loop of symbolic links")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "loop", "loop2", "spec.toml"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a 1 MB tmpfs needs root")
def test_a_catalog_on_a_full_disk_is_refused_before_anything_is_made(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], check=True)
    try:
        filler = disk / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1k"], capture_output=True)
        assert shutil.disk_usage(disk).free == 0
        spec = tmp_path / "spec.toml"
        spec.write_text(knights("k", "1..2"))
        for backend in ("dask", "threads"):
            args = ["run", str(spec), "--catalog", str(disk / "catalog"), "--backend", backend]
            _refused(args, f"the catalog's disk {disk / 'catalog'} is full (0 KB free)")
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]  # no empty _delta_log
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
