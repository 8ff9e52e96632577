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
