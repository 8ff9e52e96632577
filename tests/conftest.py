"""Shared pytest configuration for the unit tests and the notebook (nbval) run.

The notebook run (``pytest --nbval-lax notebooks/``) lies outside ``testpaths``, so the
Makefile loads this module explicitly with ``-p tests.conftest``.
"""

from __future__ import annotations

import os
import shutil

import pytest

# TVMScript texts used as test data (read by tests/test_script_seeds.py, never imported;
# `--doctest-modules` would otherwise import them as modules).
collect_ignore_glob = ["script_seeds/*"]

# Headless plotting everywhere, including the notebook kernels started by nbval
# (they inherit this environment).
os.environ.setdefault("MPLBACKEND", "Agg")

try:
    import matplotlib
except ImportError:  # pragma: no cover - matplotlib is a runtime dependency
    pass
else:
    matplotlib.use("Agg")


def pytest_collectstart(collector):
    """Do not compare stderr output in notebooks (warnings, progress bars)."""
    skip_compare = getattr(collector, "skip_compare", None)
    if skip_compare is not None and "stderr" not in skip_compare:
        collector.skip_compare = (*skip_compare, "stderr")


_tvm_available: bool | None = None


def _have_tvm() -> bool:
    global _tvm_available
    if _tvm_available is None:
        try:
            import tvm  # noqa: F401
        except Exception:
            _tvm_available = False
        else:
            _tvm_available = True
    return _tvm_available


def pytest_collection_modifyitems(config, items):
    skip_tvm = pytest.mark.skip(reason="apache-tvm is not installed")
    skip_nvcc = pytest.mark.skip(reason="nvcc is not on PATH")
    for item in items:
        if item.get_closest_marker("tvm") is not None and not _have_tvm():
            item.add_marker(skip_tvm)
        if item.get_closest_marker("nvcc") is not None and shutil.which("nvcc") is None:
            item.add_marker(skip_nvcc)


# Hypothesis: a fresh random seed on every run, shown in the report header and under
# every failed property test; ``pytest --hypothesis-seed=N`` runs seed N's examples again.
_hypothesis_seed: int | None = None
_SEED_KEY = "workbench_hypothesis_seed"
_is_hypothesis_test = None  # imported once here: some tests patch builtins.__import__


def pytest_configure(config):
    global _hypothesis_seed, _is_hypothesis_test
    try:
        from hypothesis import core, is_hypothesis_test
    except ImportError:  # pragma: no cover - hypothesis is a test dependency
        return
    _is_hypothesis_test = is_hypothesis_test
    given = config.getoption("hypothesis_seed", default=None)
    workerinput = getattr(config, "workerinput", None)  # a pytest-xdist worker
    if given is None and workerinput is not None and _SEED_KEY in workerinput:
        _hypothesis_seed = workerinput[_SEED_KEY]  # the controller's seed, for every worker
        core.global_force_seed = _hypothesis_seed
    elif given is None:
        import random

        _hypothesis_seed = random.SystemRandom().randrange(2**32)
        core.global_force_seed = _hypothesis_seed
    else:  # hypothesis's own plugin applies it
        _hypothesis_seed = given


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist: every worker draws the controller's hypothesis seed, so the seed
    printed in the header and summary is the one the examples came from."""
    if _hypothesis_seed is not None:
        node.workerinput[_SEED_KEY] = _hypothesis_seed


def pytest_report_header(config):
    if _hypothesis_seed is not None:
        return (f"hypothesis seed: {_hypothesis_seed} (run these examples again with "
                f"--hypothesis-seed={_hypothesis_seed})")
    return None


_hypothesis_tests_ran = False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or _hypothesis_seed is None:
        return
    if not _is_hypothesis_test(getattr(item, "obj", None)):
        return
    # read by pytest_runtest_logreport, here or (under pytest-xdist) in the controller
    report.user_properties.append(("hypothesis_test", True))
    if report.failed:
        report.sections.append((
            "hypothesis seed",
            f"this run's seed was {_hypothesis_seed}: pytest "
            f"--hypothesis-seed={_hypothesis_seed} '{item.nodeid}' runs it again",
        ))


def pytest_runtest_logreport(report):
    global _hypothesis_tests_ran
    if ("hypothesis_test", True) in getattr(report, "user_properties", ()):
        _hypothesis_tests_ran = True


#: The test file whose skip must never go unnoticed (it needs Chromium, node and npm).
BROWSER_TEST_FILE = "test_browser.py"


def browser_skip_reasons(reports) -> list[str]:
    """The reasons of the skipped reports (tests or whole-module collection) that belong
    to the real-browser test file, without repeats, in order."""
    reasons: list[str] = []
    for report in reports:
        path = str(getattr(report, "nodeid", "")).split("::")[0]
        if not path.endswith(BROWSER_TEST_FILE):
            continue
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            reason = str(longrepr[2])
        else:
            reason = str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        if reason not in reasons:
            reasons.append(reason)
    return reasons


def pytest_terminal_summary(terminalreporter):
    """The seed at the end of the output too (``-q`` hides the header), and a loud line
    when the real-browser test was skipped (so a missing Chromium cannot go unnoticed)."""
    if _hypothesis_tests_ran:
        terminalreporter.write_line(
            f"hypothesis seed: {_hypothesis_seed} (--hypothesis-seed={_hypothesis_seed} "
            "runs the same examples)")
    for reason in browser_skip_reasons(terminalreporter.stats.get("skipped", [])):
        terminalreporter.write_sep(
            "!", f"REAL-BROWSER TEST SKIPPED: {reason}", red=True, bold=True)
