"""``tvm.script``: TVMScript read by the workbench's parser (``workbench.script``)."""

from __future__ import annotations

from typing import Any

import workbench as wb

from .._adapt import LazyModule, module_getattr
from . import ir, tir, tirx  # noqa: F401


def ir_module(cls: Any = None, /, **options: Any) -> Any:
    """``@tvm.script.ir_module``: the class is parsed on first use."""
    return LazyModule(cls) if cls is not None else (lambda c: LazyModule(c))


def from_source(text: str, *args: Any, **kwargs: Any) -> Any:
    return wb.from_script(text)


__getattr__ = module_getattr(__name__)
