# Schedule Workbench — developer entry points.
#   make lab    set up .venv and open the lessons in JupyterLab
#   make test   set up .venv (and the browser test's node packages, when npm is
#               available) and run lint + unit tests + notebooks

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

LAB_ARGS  ?= $(if $(filter 0,$(shell id -u)),--allow-root)
TEST_ENV  := MPLBACKEND=Agg
NBVAL_ARGS := --nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg

.PHONY: venv browser-deps lab test lint bench tvm-check tvm-parity clean distclean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "python3.11 (or python3) not found on PATH" >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e '.[lab,test]'
	touch $@

# The real-browser test (tests/test_browser.py) drives JupyterLab with playwright-core.
# `npm ci` runs only when node_modules is missing or the lockfile changed, so an offline
# machine that has installed it once keeps working. Without npm the test skips itself.
BROWSER := tests/browser
NPM     := $(shell command -v npm 2>/dev/null)

browser-deps: $(if $(NPM),$(BROWSER)/node_modules/.package-lock.json)

$(BROWSER)/node_modules/.package-lock.json: $(BROWSER)/package.json $(BROWSER)/package-lock.json
	npm ci --prefix $(BROWSER) --no-audit --no-fund
	touch $@

lab: venv
	$(BIN)/jupyter lab notebooks/ $(LAB_ARGS)

# Each step must pass; pytest's exit code 5 (nothing collected) fails the target too.
# The notebook run is outside testpaths, so tests/conftest.py is loaded explicitly as a plugin.
test: venv browser-deps
	$(BIN)/ruff check .
	$(TEST_ENV) $(BIN)/python -m pytest -q tests --doctest-modules workbench
	$(TEST_ENV) $(BIN)/python -m pytest -q -p tests.conftest $(NBVAL_ARGS) notebooks/

lint: venv
	$(BIN)/ruff check .

# Optional: install apache-tvm into .venv and run every test marked `tvm`: our schedules,
# printed text, parsed text and schedule files compared with TVM's own.
tvm-check: venv
	$(BIN)/python -m pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1
	$(TEST_ENV) $(BIN)/python -m pytest -q -m tvm tests

# Run TVM's own schedule unit tests (a checkout's tests/python/s_tir/schedule) on the
# workbench and report agreement; needs no TVM install.
TVM_TESTS ?=
tvm-parity: venv
	@test -n "$(TVM_TESTS)" || { echo "usage: make tvm-parity TVM_TESTS=path/to/tvm/tests/python/s_tir/schedule" >&2; exit 2; }
	$(BIN)/python bench/tvm_parity/run.py --tvm-tests "$(TVM_TESTS)" --list

bench: venv
	$(BIN)/python bench/interactive.py

clean:
	rm -rf build/ *.egg-info .pytest_cache .ruff_cache .hypothesis $(BROWSER)/artifacts
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(BROWSER)/node_modules
