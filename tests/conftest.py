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
    """A real Prefect API on a temporary database for the whole session (it starts in
    about 20 s here, so one serves every flow test)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def cli(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `puzzlesweep ARGS...` in a subprocess; returns the completed process."""
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, cwd=cwd or ROOT, timeout=timeout
    )


def solve_json(family: str, *params: str, time_limit: float = 60) -> dict:
    """`puzzlesweep solve FAMILY PARAMS... --json` parsed; fails the test on exit != 0."""
    done = cli("solve", family, *params, "--json", "--time-limit", str(time_limit))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
