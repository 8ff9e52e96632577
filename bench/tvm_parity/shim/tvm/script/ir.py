"""``from tvm.script import ir as I``."""

from __future__ import annotations

from typing import Any

from .._adapt import LazyModule, module_getattr


def ir_module(cls: Any = None, /, **options: Any) -> Any:
    """``@I.ir_module``: the class is parsed on first use."""
    return LazyModule(cls) if cls is not None else (lambda c: LazyModule(c))


__getattr__ = module_getattr(__name__)
