"""Shared fixtures: offline Prefect settings, one Prefect test API for the session, the
CLI as a subprocess."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from puzzlesweep import set_quiet_defaults

# Offline and quiet, before Prefect is imported anywhere: the CLI's defaults, and the
# tests' own flows log warnings only.
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
set_quiet_defaults()

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "puzzlesweep.cli"]


@pytest.fixture(scope="session")
def prefect_api():
    """A real Prefect API for the whole session: the one a run starts when none is
    configured (`flows.api.TemporaryAPI`: Prefect's app, its database in memory), named
    by this process's settings. Prefect's `prefect_test_harness` keeps its database in a
    file, where concurrent writes stall tasks for 2 s (see `flows.api`)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from puzzlesweep.flows.api import TemporaryAPI

    with TemporaryAPI() as api, temporary_settings(updates={PREFECT_API_URL: api.url()}):
        yield api


def cli(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `puzzlesweep ARGS...` in a subprocess; returns the completed process."""
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, cwd=cwd or ROOT, timeout=timeout
    )


def limit_held(seconds: float, limit: float, reference: float = 0.0) -> bool:
    """Whether `seconds` of wall time show that a limit of `limit` seconds held on a
    machine shared with other work (CI runs beside other jobs on 2 cores): at most twice
    the limit, plus three times `reference` (the same work without the limit, measured
    in the same test: a CLI's or a child process's start-up), plus 2 s. A limit that
    does not hold runs on far longer; a tight bound would only measure the load."""
    return seconds <= 2 * limit + 3 * reference + 2


def solve_json(family: str, *params: str, time_limit: float = 60) -> dict:
    """`puzzlesweep solve FAMILY PARAMS... --json` parsed; fails the test on exit != 0."""
    done = cli("solve", family, *params, "--json", "--time-limit", str(time_limit))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def api_env(prefect_api) -> dict:
    """The environment of a CLI subprocess that uses the session's Prefect test API
    (rather than each starting a temporary one of its own)."""
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}


# --- sweep specs that several test files run --------------------------------------
def slow_boxes(name: str, time_limit: int) -> str:
    """Sweep `name`: eight open no-k-in-row boxes (k = 5), each stopped at its
    `time_limit` seconds (status time_limit, a final result): predictable durations, so a
    SIGKILL lands midway and batches of one take that long. The side multisets differ,
    so no two are symmetric."""
    return f"""
name = "{name}"
[[study]]
family = "no_k_in_row"
time_limit = {time_limit}
[study.grid]
dims = [[6, 7, 6], [6, 7, 7], [6, 8, 6], [7, 7, 7], [6, 8, 7], [7, 8, 7], [6, 9, 6], [8, 8, 6]]
k = 5
"""


def knights(name: str, rows: str, piece: bool = False) -> str:
    """Sweep `name`: knights domination on the square boards of `rows` ("a..b"), the
    piece named explicitly when `piece` (it is the default)."""
    named = 'piece = "knight"\n' if piece else ""
    return f"""
name = "{name}"
[[study]]
family = "domination"
time_limit = 30
[study.grid]
{named}rows = "{rows}"
cols = "=rows"
"""


# T_4, fewest moves from each of its 10 start holes: 5 at best (OEIS A127500); holes
# 1, 5, 7 and 10 cannot reach a single peg.
PEGS_T4 = """
[[study]]
family = "peg_solitaire"
time_limit = 30
[study.grid]
side = 4
start = "all"
question = "min_moves"
"""


def each_once_at_its_limit(location, count: int) -> None:
    """Assert that the catalog at `location` holds `count` instances, each exactly once
    (no params_key solved twice) and each stopped at its time limit (`slow_boxes`)."""
    from puzzlesweep import catalog

    _, twice = catalog.query(
        location, "SELECT params_key FROM results GROUP BY 1 HAVING count(*) > 1"
    )
    assert twice == []
    _, [(total, keys, limited)] = catalog.query(
        location,
        "SELECT count(*), count(DISTINCT params_key), count(*) FILTER (status = 'time_limit') "
        "FROM results",
    )
    assert (total, keys, limited) == (count, count, count)
