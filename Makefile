# One command sets up and runs the main job (make demo), one sets up and passes the tests
# (make test). Both create .venv on first use and reinstall when pyproject.toml changes.
PYTHON ?= python3
# A recipe's pipeline fails when any command in it fails (pip and apt are piped into grep).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
VENV := .venv
BIN := $(VENV)/bin

# Prefect's and Dask's offline, quiet settings are set by the CLI and the test suite
# themselves (puzzlesweep.QUIET_DEFAULTS), so they hold outside make too.

.PHONY: demo test test-slow browser slurm format clean lock

# Installs are reproducible: every package at the exact version of requirements.lock
# (pip constraints), the project itself editable.
# pip prints each package as it collects and installs it (a few minutes on a fresh machine).
$(BIN)/.installed: pyproject.toml requirements.lock
	@echo "== setting up $(VENV): Python packages pinned by requirements.lock (a few minutes the first time)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --progress-bar off -c requirements.lock -e '.[dev]' \
	  | { grep --line-buffered -E '^(Collecting|Installing|Successfully)' || true; }
	@echo "== $(VENV) is ready"
	touch $@

# Resolve pyproject.toml's ranges afresh in a throw-away venv and pin what they give.
LOCK_VENV := .lock-venv
lock:
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install --quiet '.[dev]'
	{ echo "# Exact versions that \`make\` installs (pip install -c requirements.lock -e '.[dev]')."; \
	  echo "# Refresh with \`make lock\` (a fresh venv resolves pyproject.toml's ranges), then \`make test\`."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable | grep -iv '^puzzlesweep'; } > requirements.lock
	rm -rf $(LOCK_VENV)

demo: $(BIN)/.installed
	$(BIN)/puzzlesweep run sweeps/seeds.toml --catalog results

# Debian's headless Chromium for the dashboard's browser test (installs as root via apt).
browser:
	@command -v chromium >/dev/null || { \
	  echo "== installing Debian's chromium for the dashboard's browser test (about a minute)"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver \
	    | { grep --line-buffered -E '^(Get|Setting up) ' || true; }; \
	  command -v chromium >/dev/null && echo "== chromium is installed"; }

# Debian's SLURM and munge for the one-node SLURM of the slow tests (tests/test_slurm.py);
# the tests start their own daemons with their own configuration, none of the packages'.
slurm:
	@command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
	  && command -v munged >/dev/null || { \
	  echo "== installing Debian's slurmctld, slurmd, slurm-client and munge for the SLURM tests (about a minute)"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurmctld slurmd slurm-client munge \
	    | { grep --line-buffered -E '^(Get|Setting up) ' || true; }; \
	  command -v slurmctld >/dev/null && echo "== SLURM is installed"; }

test: $(BIN)/.installed browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=25

test-slow: $(BIN)/.installed browser slurm
	$(BIN)/python -m pytest -m slow

format: $(BIN)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) $(LOCK_VENV) results .pytest_cache
