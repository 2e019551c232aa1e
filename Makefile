# One command sets up and runs the main job (make demo), one sets up and passes the tests
# (make test). Both create .venv on first use and reinstall when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

# Offline and quiet: no telemetry, no update checks, a generous ephemeral-API start-up
# (a cold start with migrations was measured at 23 s, above Prefect's default of 20 s).
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120
export PREFECT_LOGGING_LEVEL ?= WARNING

.PHONY: demo test test-slow browser format clean lock

# Installs are reproducible: every package at the exact version of requirements.lock
# (pip constraints), the project itself editable.
$(BIN)/.installed: pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev]'
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
	@command -v chromium >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

test: $(BIN)/.installed browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

test-slow: $(BIN)/.installed browser
	$(BIN)/python -m pytest -m slow

format: $(BIN)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) $(LOCK_VENV) results .pytest_cache
