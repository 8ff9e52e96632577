"""The glue between TVM's Python names and the workbench.

* :class:`NotApplicable`: raised when a test reaches something the workbench does not
  have (a primitive, a TVM-only facility). The parity runner counts such a test as
  "not applicable", not as a disagreement.
* :class:`Missing` / :func:`module_getattr`: every TVM name the shim does not map is a
  ``Missing`` object; using it (calling, iterating...) raises ``NotApplicable``.
* :class:`LazyFunc` / :class:`LazyModule`: what ``@T.prim_func`` / ``@I.ir_module``
  return. The source is parsed by the workbench (``workbench.script``) on first use,
  so a function the parser cannot read fails only the tests that use it.
* :func:`as_schedulable`: a PrimFunc becomes the module ``{"main": func}``, as
  ``tvm.s_tir.Schedule(func)`` makes it.
* :func:`install_error_log`: remembers the refusals made during a test.
* :func:`install_node_aliases`: TVM's names for a few node fields (``Block.name_hint``,
  ``x.same_as(y)``, ``PrimFunc.with_attr``) on the workbench's IR classes, and
  ``script()`` printing TVM >= 0.24's syntax by default, as TVM does.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

import workbench as wb
from workbench.ir import IRModule, PrimFunc
from workbench.script import ParseError


class NotApplicable(AttributeError):
    """The test uses a primitive or facility the workbench does not have."""


class ScriptNotRead(Exception):
    """A ``@T.prim_func`` / ``@I.ir_module`` the workbench's parser refused (or crashed
    on). The message names the definition and the construct; ``__cause__`` is the
    parser's exception."""


class Missing:
    """A TVM name with no workbench counterpart. Any use raises :class:`NotApplicable`;
    used as a bare decorator of a test function, it makes that test not applicable."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Missing:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self._name}.{attr}")

    def _fail(self, *_: Any, **__: Any) -> Any:
        raise NotApplicable(f"{self._name} has no workbench counterpart")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and inspect.isfunction(args[0]):
            func = args[0]

            @functools.wraps(func)
            def not_applicable(*a: Any, **k: Any) -> Any:
                raise NotApplicable(f"{self._name} has no workbench counterpart")

            return not_applicable
        return self._fail()

    __iter__ = __getitem__ = __bool__ = __int__ = __index__ = __len__ = _fail

    def __repr__(self) -> str:
        return f"<no workbench counterpart: {self._name}>"


def module_getattr(module_name: str):
    """A PEP 562 ``__getattr__`` for shim modules: unknown names are :class:`Missing`."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Missing(f"{module_name}.{name}")

    return __getattr__


# ---------------------------------------------------------------------------
# constants with a dtype (T.int64(3), tirx.IntImm("int64", 3), te.const(...))


class IntImm(int):
    """An int that remembers TVM's dtype; accepted wherever the workbench takes an int."""

    dtype: str

    def __new__(cls, dtype: str = "int32", value: int = 0):
        obj = super().__new__(cls, int(value))
        obj.dtype = dtype
        return obj

    @property
    def value(self) -> int:
        return int(self)


class FloatImm(float):
    """A float that remembers TVM's dtype."""

    dtype: str

    def __new__(cls, dtype: str = "float32", value: float = 0.0):
        obj = super().__new__(cls, float(value))
        obj.dtype = dtype
        return obj

    @property
    def value(self) -> float:
        return float(self)


def const(value: Any, dtype: str | None = None) -> Any:
    """``te.const`` / ``tirx.const``: a Python number carrying its dtype."""
    if isinstance(value, bool) or dtype == "bool":
        return bool(value)
    if isinstance(value, float) or (dtype or "").startswith(("float", "bfloat")):
        return FloatImm(dtype or "float32", value)
    return IntImm(dtype or "int32", value)


# ---------------------------------------------------------------------------
# lazy TVMScript definitions


class _Lazy:
    """Parse on first use; every later use sees the same result (or the same error)."""

    def __init__(self, obj: Any, parse: Any, what: str):
        self._obj = obj
        self._parse = parse
        self._what = what
        self._value: Any = None
        self._error: BaseException | None = None
        self._done = False

    def resolve(self) -> Any:
        if not self._done:
            self._done = True
            try:
                self._value = self._parse(self._obj)
            except ParseError as e:
                line = f" (line {e.lineno})" if e.lineno else ""
                self._error = ScriptNotRead(
                    f"parse error in {self._what} `{self._obj.__name__}`{line}: {e.msg}")
                self._error.__cause__ = e
            except RecursionError as e:
                self._error = ScriptNotRead(
                    f"parse error in {self._what} `{self._obj.__name__}`: nested too deeply")
                self._error.__cause__ = e
            except Exception as e:  # a crash of the parser is reported as one too
                self._error = ScriptNotRead(
                    f"parser crashed on {self._what} `{self._obj.__name__}`: "
                    f"{type(e).__name__}: {e}")
                self._error.__cause__ = e
        if self._error is not None:
            raise self._error
        return self._value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __getitem__(self, key: Any) -> Any:
        return self.resolve()[key]

    def __repr__(self) -> str:
        return f"<{self._what} {self._obj.__name__} (parsed on first use)>"


class LazyFunc(_Lazy):
    """What ``@T.prim_func`` returns: a PrimFunc parsed on first use."""

    def __init__(self, func: Any, private: bool = False):
        from workbench.script import prim_func

        super().__init__(func, prim_func, "prim_func")
        self.private = private

    def with_attr(self, key: str, value: Any) -> PrimFunc:
        return _mark_expected(with_attr(self.resolve(), key, value))


class LazyModule(_Lazy):
    """What ``@I.ir_module`` returns: an IRModule parsed on first use."""

    def __init__(self, cls: Any):
        from workbench.script import ir_module

        super().__init__(cls, ir_module, "ir_module")


_EXPECTED: dict[int, Any] = {}


def _mark_expected(x: Any) -> Any:
    _EXPECTED[id(x)] = x
    return x


def is_expected(x: Any) -> bool:
    """Was ``x`` written in the test as TVMScript (TVM's expected IR)?"""
    return isinstance(x, _Lazy) or _EXPECTED.get(id(x)) is x


def resolve(x: Any) -> Any:
    """The workbench object behind a lazy definition (anything else unchanged)."""
    return x.resolve() if isinstance(x, _Lazy) else x


def with_attr(func: PrimFunc, key: str, value: Any) -> PrimFunc:
    """``PrimFunc.with_attr``: a copy with one function attribute set."""
    attrs = tuple((k, v) for k, v in func.attrs if k != key) + ((key, value),)
    return dataclasses.replace(func, attrs=attrs)


def global_symbol(func: PrimFunc) -> str:
    """The function's ``global_symbol`` (TVM gives every public function its name)."""
    return dict(func.attrs).get("global_symbol", func.name)


_RENAMED: dict[tuple[int, str], tuple[PrimFunc, PrimFunc]] = {}


def renamed(func: PrimFunc, name: str) -> PrimFunc:
    """``func`` stored under ``name`` in a module, keeping its global symbol (the
    same object each time, as TVM's module holds the same function)."""
    func = resolve(func)
    if func.name == name:
        return func
    key = (id(func), name)
    if key not in _RENAMED:
        attrs = dict(func.attrs)
        attrs.setdefault("global_symbol", func.name)
        _RENAMED[key] = (func, dataclasses.replace(func, name=name, attrs=tuple(attrs.items())))
    return _RENAMED[key][1]


def make_module(functions: dict[str, Any]) -> IRModule:
    """``tvm.IRModule({"main": f, ...})``."""
    return IRModule.from_funcs(*(renamed(f, n) for n, f in functions.items()))


def as_schedulable(mod: Any) -> IRModule:
    """What ``tvm.s_tir.Schedule(mod)`` schedules: a PrimFunc becomes ``{"main": f}``."""
    mod = resolve(mod)
    if isinstance(mod, PrimFunc):
        return make_module({"main": mod})
    if isinstance(mod, IRModule):
        return mod
    raise TypeError(f"Schedule expects a PrimFunc or IRModule, got {type(mod).__name__}")


# ---------------------------------------------------------------------------
# refusals seen during a test (the runner checks why an expected error came)

RAISED: list[str] = []


def install_error_log() -> None:
    """Record the message of every ``ScheduleError`` made (in the test subprocess
    only), so that a test passing ``pytest.raises`` for another reason than TVM's
    (a block given by name, which the workbench refuses) is not counted as agreeing."""
    base = wb.ScheduleError
    original = base.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        RAISED.append(str(self))

    base.__init__ = __init__


# ---------------------------------------------------------------------------
# TVM's names for node fields


def install_node_aliases() -> None:
    """Give the workbench's IR classes the few TVM names the tests use (in the test
    subprocess only)."""
    from workbench.ir import stmt

    def same_as(self: Any, other: Any) -> bool:
        return self is resolve(other)

    for cls in (stmt.Stmt, stmt.PrimFunc, stmt.IRModule, wb.ir.expr.PrimExpr, wb.Buffer):
        cls.same_as = same_as
    stmt.Block.name_hint = property(lambda self: self.name)
    # TVM >= 0.27 keeps a buffer's shape/dtype and a variable's dtype in ``.ty``
    wb.Buffer.ty = property(lambda self: self)
    wb.ir.expr.PrimExpr.ty = property(lambda self: self)
    stmt.PrimFunc.with_attr = with_attr

    # TVM >= 0.24 prints its own syntax (``T.sblock``) by default
    for cls in (stmt.PrimFunc, stmt.IRModule):
        original = cls.script

        def script(self: Any, syntax: str = "tirx", _original: Any = original, **kw: Any) -> str:
            return _original(self, syntax=syntax, **kw)

        cls.script = script
