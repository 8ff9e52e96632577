"""A stand-in ``tvm`` package that runs TVM's schedule tests on the workbench.

Only the parity runner (``bench/tvm_parity/run.py``) puts this directory on
``sys.path``, inside the subprocess that runs the tests; it is never installed.
Every ``tvm.*`` module this package does not define is made up on import, and every
name it does not map is a :class:`~tvm._adapt.Missing` object: using one raises
``NotApplicable`` and the test is counted as not applicable.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

from ._adapt import install_error_log, install_node_aliases, module_getattr


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import any other ``tvm.*`` module (last on ``sys.meta_path``, so only modules
    no file provides) as a module of :class:`Missing` names."""

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith("tvm."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__getattr__ = module_getattr(spec.name)
        return module

    def exec_module(self, module):
        pass


if not any(isinstance(f, _StubFinder) for f in sys.meta_path):
    sys.meta_path.append(_StubFinder())

install_node_aliases()
install_error_log()

from . import ir, runtime, s_tir, script, te, testing, tirx  # noqa: E402
from ._schedule import ScheduleError  # noqa: E402
from .ir import IRModule  # noqa: E402
from .runtime import compile_func as compile  # noqa: E402

# Modules TVM has under two names
tir = tirx
for _alias, _module in {
    "tvm.tir": tirx,
    "tvm.script.tir": script.tir,
    "tvm.s_tir.schedule.schedule": s_tir.schedule,
    "tvm.tir.schedule": s_tir.schedule,
    "tvm.tir.schedule.testing": s_tir.schedule.testing,
}.items():
    sys.modules.setdefault(_alias, _module)
s_tir.schedule.schedule = s_tir.schedule

__getattr__ = module_getattr(__name__)
