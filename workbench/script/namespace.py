"""Inert ``T`` / ``I`` namespaces for TVMScript written as Python code.

Python evaluates a ``def``'s decorators, annotations and default values, and a
``class`` body, when it runs the definition. So that a function such as

.. code-block:: python

    from workbench.script import tir as T

    @wb.prim_func
    def scale(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
        ...

can be defined without TVM installed, ``T.Buffer``, ``T.int64`` and every other
attribute of these namespaces are harmless placeholders: calling, indexing or
reading an attribute of one gives another placeholder and does nothing else. The
function's *source text* is what the workbench parses (with :mod:`ast`, never run).

``T.prim_func`` and ``I.ir_module`` are the exceptions: they parse, like
``wb.prim_func`` / ``wb.ir_module``. ``T.prim_func`` on a method inside a class body
returns the function unchanged, so the enclosing ``@I.ir_module`` class can read
the whole class.
"""

from __future__ import annotations

from typing import Any


class Placeholder:
    """Stands for any TVMScript name (``T.Buffer``, ``T.int64(1)``, ``T.axis.remap``)
    in Python-evaluated positions. Does nothing; every operation gives a placeholder.
    """

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Placeholder:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Placeholder:
        return Placeholder(f"{self._name}(...)")

    def __getitem__(self, key: Any) -> Placeholder:
        return Placeholder(f"{self._name}[...]")

    def __repr__(self) -> str:
        return f"<TVMScript placeholder {self._name}>"


def _in_class_body(func: Any) -> bool:
    """Is ``func`` being defined directly in a class body (``Module.main``)?"""
    qualname = getattr(func, "__qualname__", "")
    parts = qualname.split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


class _Namespace:
    """``T`` (``tir`` / ``tirx``) or ``I`` (``ir``): placeholders, plus the parsing
    decorators."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Placeholder(f"{self._name}.{attr}")

    def __repr__(self) -> str:
        return f"<workbench TVMScript namespace {self._name}>"


class _TirNamespace(_Namespace):
    def prim_func(self, func: Any = None, /, **options: Any) -> Any:
        """Parse the decorated function's source into a PrimFunc (inside a class
        body: leave the function for the class decorator)."""
        from .decorators import prim_func

        def wrap(f: Any) -> Any:
            if _in_class_body(f):
                return f
            return prim_func(f, **options)

        return wrap if func is None else wrap(func)


class _IrNamespace(_Namespace):
    def ir_module(self, cls: Any = None, /) -> Any:
        """Parse the decorated class's source into an IRModule."""
        from .decorators import ir_module

        return ir_module if cls is None else ir_module(cls)


tir = _TirNamespace("T")
tirx = _TirNamespace("T")
ir = _IrNamespace("I")
