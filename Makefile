# Schedule Workbench — developer entry points.
#   make lab    set up .venv and open the lessons in JupyterLab
#   make test   set up .venv (and the browser test's and the JupyterLab extension's node
#               packages, when node/npm are available) and run lint + jest + unit tests
#               + notebooks
#   make labextension   rebuild the prebuilt JupyterLab extension when its sources changed

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXT    := extensions
LABEXT := workbench/labextension
NODE   := $(shell command -v node 2>/dev/null)

LAB_ARGS  ?= $(if $(filter 0,$(shell id -u)),--allow-root)
TEST_ENV  := MPLBACKEND=Agg
NBVAL_ARGS := --nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg
# pytest-xdist workers: two fit the 2-core CI runners. --dist loadfile keeps each test file
# in one worker (a module's fixtures, such as the browser test's JupyterLab, start once) and
# each lesson in one worker (nbval runs a notebook's cells in one kernel, in order).
PYTEST_JOBS ?= 2
XDIST := -n $(PYTEST_JOBS) --dist loadfile

.PHONY: venv labextension jest browser-deps lab test lint bench tvm-check tvm-parity clean distclean

venv: labextension

# The install copies the prebuilt JupyterLab extension (workbench/labextension, committed)
# into .venv/share/jupyter/labextensions, so a new build (a new build.json) reinstalls.
$(STAMP): pyproject.toml $(LABEXT)/build.json
	@test -n "$(PYTHON)" || { echo "python3.11 (or python3) not found on PATH" >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e '.[lab,test]'
	touch $@

# The JupyterLab extension (extensions/, TypeScript) is built into workbench/labextension and
# committed, so installing needs no node. build.py rebuilds it only when node is present
# and the sources' hash differs from the one the committed build records (it says loudly
# when the sources changed but node is missing); a rebuild then reinstalls into .venv.
labextension: $(STAMP)
	$(BIN)/python $(EXT)/build.py build --jlpm $(BIN)/jlpm
	@$(MAKE) --no-print-directory $(STAMP)

# The extension's jest tests (extensions/src/__tests__) run in `make test` when node is
# present; `jlpm install` runs only when node_modules is missing or the lockfile changed.
jest: venv
ifneq ($(NODE),)
	$(MAKE) --no-print-directory $(EXT)/node_modules/.yarn-state.yml
	cd $(EXT) && ../$(BIN)/jlpm test
else
	@echo "!!!!!!!! SKIPPED: the JupyterLab extension's jest tests (node is not installed) !!!!!!!!"
endif

$(EXT)/node_modules/.yarn-state.yml: $(EXT)/package.json $(EXT)/yarn.lock
	cd $(EXT) && ../$(BIN)/jlpm install --immutable
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

# JupyterLab's "Get notified about official Jupyter news?" toast (and its update check) off
# for this lab: jupyter/overrides.json goes into the settings folder of the lab .venv runs.
lab: venv
	settings="$$($(BIN)/python -c 'from jupyterlab.commands import get_app_dir; print(get_app_dir())')/settings" \
	  && mkdir -p "$$settings" && cp jupyter/overrides.json "$$settings/overrides.json"
	$(BIN)/jupyter lab notebooks/ $(LAB_ARGS)

# Each step must pass; pytest's exit code 5 (nothing collected) fails the target too.
# The notebook run is outside testpaths, so tests/conftest.py is loaded explicitly as a plugin.
test: venv browser-deps jest
	$(BIN)/ruff check .
	$(TEST_ENV) $(BIN)/python -m pytest -q $(XDIST) tests --doctest-modules workbench
	$(TEST_ENV) $(BIN)/python -m pytest -q $(XDIST) -p tests.conftest $(NBVAL_ARGS) notebooks/

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
	rm -rf $(EXT)/lib $(EXT)/tsconfig.tsbuildinfo $(EXT)/coverage
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(BROWSER)/node_modules $(EXT)/node_modules $(EXT)/.yarn
