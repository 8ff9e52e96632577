"""``from tvm.script import tirx as T``: TVMScript's ``T`` namespace.

Inside ``@T.prim_func`` bodies nothing here runs: the workbench parses the source.
What Python itself evaluates (decorators, annotations such as ``T.Buffer((8,),
"float32")``, and a few values in test code such as ``T.int32(4)``) is served here.
"""

from __future__ import annotations

from typing import Any

from workbench.script import tirx as _wb_tirx

from .._adapt import FloatImm, IntImm, LazyFunc, Missing

_INT = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_FLOAT = ("float16", "float32", "float64", "bfloat16")
_MISSING_AT_RUNTIME = ("vscale", "ceildiv")  # need TVM's expression objects in test code


def _in_class_body(func: Any) -> bool:
    parts = getattr(func, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def prim_func(func: Any = None, /, *, private: bool = False, **options: Any) -> Any:
    """``@T.prim_func``: parsed on first use (in a class body, left to
    ``@I.ir_module``)."""

    def wrap(f: Any) -> Any:
        return f if _in_class_body(f) else LazyFunc(f, private=private)

    return wrap if func is None else wrap(func)


def _dtype(name: str) -> Any:
    def make(value: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(value, bool) or name == "bool":
            return bool(value) if value is not None else getattr(_wb_tirx, name)
        if isinstance(value, (int, float)):
            return FloatImm(name, value) if name in _FLOAT else IntImm(name, value)
        return getattr(_wb_tirx, name)(value, *args, **kwargs)

    make.__name__ = name
    return make


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _INT or name in _FLOAT or name == "bool":
        return _dtype(name)
    if name in _MISSING_AT_RUNTIME:
        return Missing(f"T.{name}")
    return getattr(_wb_tirx, name)
