"""``tvm.ir``: modules and structural equality."""

from __future__ import annotations

from typing import Any

from workbench.ir import IRModule as _WbModule

from ._adapt import make_module, module_getattr, renamed, resolve
from ._compare import assert_equal


class IRModule:
    """``tvm.IRModule({"main": f})`` makes a workbench IRModule."""

    def __new__(cls, functions: dict | None = None, *args: Any, **kwargs: Any) -> _WbModule:
        return make_module(dict(functions or {}))

    @staticmethod
    def from_expr(func: Any) -> _WbModule:
        func = resolve(func)
        return _WbModule.from_funcs(renamed(func, "main"))


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    assert_equal(lhs, rhs)


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    from ._compare import equal

    return equal(lhs, rhs)


__getattr__ = module_getattr(__name__)
