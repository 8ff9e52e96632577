"""Expression nodes of the IR.

Every node is a frozen dataclass compared by identity (``eq=False``): two ``Var``
objects named ``i`` are different variables. Structural comparison lives in
:func:`workbench.ir.analysis.structural_equal`.

Python operators on expressions build simplified nodes (``x * 1 + 0`` is ``x``),
so frontends and primitives can write index arithmetic naturally.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .buffer import Buffer

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOAT_DTYPES = ("float16", "float32", "float64")
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES + ("bool",)


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


class SymbolicValueError(TypeError):
    """An IR expression was used where Python needs a plain value (``if``, ``int()``,
    ``range()``): typically a symbolic extent ``n`` reaching code written for static
    shapes. The Schedule turns it into a ``ScheduleError`` naming the primitive."""


class PrimExpr:
    """Base class of scalar expressions; carries a ``dtype``."""

    dtype: str

    def astype(self, dtype: str) -> PrimExpr:
        """This value converted to ``dtype`` (TVM's ``PrimExpr.astype``; no-op when it
        already has it).

        >>> import workbench as wb
        >>> wb.Var("x", "int8").astype("int32")
        T.Cast("int32", x)
        """
        return cast(self, dtype)

    # arithmetic -------------------------------------------------------------
    def __add__(self, other: ExprLike) -> PrimExpr:
        from .simplify import add

        return add(self, const_like(other, self))

    def __radd__(self, other: ExprLike) -> PrimExpr:
        from .simplify import add

        return add(const_like(other, self), self)

    def __sub__(self, other: ExprLike) -> PrimExpr:
        from .simplify import sub

        return sub(self, const_like(other, self))

    def __rsub__(self, other: ExprLike) -> PrimExpr:
        from .simplify import sub

        return sub(const_like(other, self), self)

    def __mul__(self, other: ExprLike) -> PrimExpr:
        from .simplify import mul

        return mul(self, const_like(other, self))

    def __rmul__(self, other: ExprLike) -> PrimExpr:
        from .simplify import mul

        return mul(const_like(other, self), self)

    def __truediv__(self, other: ExprLike) -> PrimExpr:
        return Div(self, const_like(other, self))

    def __rtruediv__(self, other: ExprLike) -> PrimExpr:
        return Div(const_like(other, self), self)

    def __floordiv__(self, other: ExprLike) -> PrimExpr:
        from .simplify import floordiv

        return floordiv(self, const_like(other, self))

    def __mod__(self, other: ExprLike) -> PrimExpr:
        from .simplify import floormod

        return floormod(self, const_like(other, self))

    def __rfloordiv__(self, other: ExprLike) -> PrimExpr:
        from .simplify import floordiv

        return floordiv(const_like(other, self), self)

    def __rmod__(self, other: ExprLike) -> PrimExpr:
        from .simplify import floormod

        return floormod(const_like(other, self), self)

    def __neg__(self) -> PrimExpr:
        from .simplify import sub

        return sub(const(0, self.dtype), self)

    # comparisons (== and != keep identity semantics; use .equal()/.not_equal())
    def __lt__(self, other: ExprLike) -> PrimExpr:
        return LT(self, const_like(other, self))

    def __le__(self, other: ExprLike) -> PrimExpr:
        return LE(self, const_like(other, self))

    def __gt__(self, other: ExprLike) -> PrimExpr:
        return GT(self, const_like(other, self))

    def __ge__(self, other: ExprLike) -> PrimExpr:
        return GE(self, const_like(other, self))

    def equal(self, other: ExprLike) -> PrimExpr:
        return EQ(self, const_like(other, self))

    def not_equal(self, other: ExprLike) -> PrimExpr:
        return NE(self, const_like(other, self))

    def __bool__(self) -> bool:
        raise SymbolicValueError(
            "an IR expression has no truth value; use wb.select(cond, a, b) or "
            "compare with .equal() instead of Python's if/and/or"
        )

    def _no_number(self, *_args):
        raise SymbolicValueError(
            f"the IR expression {self!r} is not a Python number (a symbolic value?)"
        )

    __int__ = __index__ = __float__ = _no_number

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        from .printer import expr_to_str

        return expr_to_str(self)

    def script(self) -> str:
        from .printer import expr_to_str

        return expr_to_str(self)


ExprLike = PrimExpr | int | float | bool


@dataclass(frozen=True, eq=False, repr=False)
class Var(PrimExpr):
    """A scalar variable: a loop variable or a block iteration variable."""

    name: str
    dtype: str = "int32"


@dataclass(frozen=True, eq=False, repr=False)
class IntImm(PrimExpr):
    value: int
    dtype: str = "int32"


@dataclass(frozen=True, eq=False, repr=False)
class FloatImm(PrimExpr):
    value: float
    dtype: str = "float32"


@dataclass(frozen=True, eq=False, repr=False)
class BinaryOp(PrimExpr):
    a: PrimExpr
    b: PrimExpr
    dtype: str = field(default="", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self._result_dtype())

    def _result_dtype(self) -> str:
        return self.a.dtype


class Add(BinaryOp):
    pass


class Sub(BinaryOp):
    pass


class Mul(BinaryOp):
    pass


class Div(BinaryOp):
    """True division (``/``); on integers it truncates as C does."""


class FloorDiv(BinaryOp):
    pass


class FloorMod(BinaryOp):
    pass


class Min(BinaryOp):
    pass


class Max(BinaryOp):
    pass


class CmpOp(BinaryOp):
    def _result_dtype(self) -> str:
        return "bool"


class EQ(CmpOp):
    pass


class NE(CmpOp):
    pass


class LT(CmpOp):
    pass


class LE(CmpOp):
    pass


class GT(CmpOp):
    pass


class GE(CmpOp):
    pass


class And(CmpOp):
    pass


class Or(CmpOp):
    pass


@dataclass(frozen=True, eq=False, repr=False)
class Not(PrimExpr):
    a: PrimExpr
    dtype: str = "bool"


@dataclass(frozen=True, eq=False, repr=False)
class Select(PrimExpr):
    """``cond ? true_value : false_value`` (both sides are evaluated)."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str = field(default="", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.true_value.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr


MATH_FUNCS = (
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "abs",
    "erf",
    "sin",
    "cos",
    "floor",
    "ceil",
    "pow",
)


@dataclass(frozen=True, eq=False, repr=False)
class Call(PrimExpr):
    """A math intrinsic such as ``exp`` or ``sqrt`` (``op`` is in MATH_FUNCS), or
    ``T.likely(cond)`` (``op`` is :data:`LIKELY`): a branch hint that means ``cond``
    (analyses and the backends read through it; see :func:`likely`)."""

    op: str
    args: tuple[PrimExpr, ...]
    dtype: str


@dataclass(frozen=True, eq=False, repr=False)
class BufferLoad(PrimExpr):
    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    dtype: str = field(default="", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.buffer.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class StringImm(PrimExpr):
    """A string literal; only meaningful as an argument of :class:`CallExtern`
    (``T.call_extern("int32", "printf", "%d", x)``)."""

    value: str
    dtype: str = field(default="handle", init=False)


@dataclass(frozen=True, eq=False, repr=False)
class Let(PrimExpr):
    """``body`` with ``var`` bound to ``value`` (TVM's ``T.Let(body, where={var: value})``).

    ``value`` is evaluated once; ``var`` is visible only inside ``body``.
    """

    var: Var
    value: PrimExpr
    body: PrimExpr
    dtype: str = field(default="", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.body.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElseExpr(PrimExpr):
    """``T.if_then_else(cond, a, b)``: like :class:`Select`, but only the chosen side
    is evaluated, so a side may read out of bounds where it is not chosen (padding,
    concatenation)."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str = field(default="", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.true_value.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class CallExtern(PrimExpr):
    """A call of an external C function by name: ``T.call_extern(dtype, name, *args)``
    (``pure=True``: ``T.call_pure_extern``, no side effects). Usually the value of an
    :class:`~workbench.ir.stmt.Evaluate` statement."""

    dtype: str
    name: str
    args: tuple[PrimExpr, ...]
    pure: bool = False


@dataclass(frozen=True, eq=False, repr=False)
class BufferField(PrimExpr):
    """``A.data`` (the buffer's data pointer, dtype ``handle``) or ``A.elem_offset``
    (its first element's offset, an index), as arguments of an :class:`OpaqueCall`
    or :class:`CallExtern`. A block that uses ``A.data`` accesses all of ``A`` in a way
    the workbench cannot see (TVM's *opaque* access): it counts as reading and
    writing the whole buffer, except through ``T.tvm_access_ptr``, whose mask says
    which. The C backend refuses both fields."""

    buffer: Buffer
    field: str  # "data" | "elem_offset"
    dtype: str = field(default="", init=False)

    def __post_init__(self) -> None:
        if self.field not in ("data", "elem_offset"):
            raise ValueError(f"buffer field must be 'data' or 'elem_offset', got {self.field!r}")
        dtype = "handle" if self.field == "data" else self.buffer.index_dtype
        object.__setattr__(self, "dtype", dtype)


@dataclass(frozen=True, eq=False, repr=False)
class OpaqueCall(PrimExpr):
    """A TVM intrinsic the workbench carries without modelling it: the tensor-core
    calls (``T.tvm_fill_fragment``, ``T.tvm_load_matrix_sync``, ...),
    ``T.tvm_access_ptr`` and ``T.type_annotation(dtype)`` (``op`` without ``T.``;
    a type annotation has no args and the annotated ``dtype``). Printed back as
    written; the C backend refuses to build it.

    ``T.tvm_access_ptr(T.type_annotation(dt), A.data, offset, extent, mask)`` is an
    access of the whole of ``A``: read when ``mask & 1``, written when ``mask & 2``
    (as TVM's region analysis counts it)."""

    op: str
    args: tuple[PrimExpr, ...]
    dtype: str = "handle"


def dtype_limit(dtype: str, which: str) -> PrimExpr:
    """``T.min_value(dtype)`` (``which="min"``) / ``T.max_value(dtype)`` (``"max"``):
    the lowest / highest value of ``dtype`` as a constant (floats: the largest finite
    value, negated for the minimum).

    >>> dtype_limit("int8", "min"), dtype_limit("float16", "max")
    (T.int8(-128), T.float16(65504))
    """
    if is_float(dtype):
        top = {"float16": 65504.0, "float32": 3.4028234663852886e38,
               "float64": 1.7976931348623157e308}[dtype]
        return FloatImm(-top if which == "min" else top, dtype)
    if dtype == "bool":
        return IntImm(int(which == "max"), "bool")
    bits = int(dtype[4:] if dtype.startswith("uint") else dtype[3:])
    if dtype.startswith("u"):
        lo, hi = 0, 2**bits - 1
    else:
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return IntImm(lo if which == "min" else hi, dtype)


# constructors ---------------------------------------------------------------


def const(value: int | float | bool, dtype: str | None = None) -> PrimExpr:
    """Make a constant; ``dtype`` defaults to int32 for ints and float32 for floats."""
    if isinstance(value, bool):
        return IntImm(int(value), dtype or "bool")
    if dtype is None:
        dtype = "int32" if isinstance(value, int) else "float32"
    if is_float(dtype):
        return FloatImm(float(value), dtype)
    if dtype != "bool" and not float(value).is_integer():
        raise TypeError(f"constant {value!r} is not an integer but dtype is {dtype}")
    return IntImm(int(value), dtype)


def const_like(value: ExprLike, like: PrimExpr) -> PrimExpr:
    """Convert a Python number to a constant of ``like``'s dtype family."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, bool):
        return const(value)
    if isinstance(value, float) or is_float(like.dtype):
        return const(value, like.dtype if is_float(like.dtype) else "float32")
    return const(value, like.dtype if like.dtype != "bool" else "int32")


def as_expr(value: ExprLike, dtype: str | None = None) -> PrimExpr:
    if isinstance(value, PrimExpr):
        return value
    return const(value, dtype)


def select(condition: ExprLike, true_value: ExprLike, false_value: ExprLike) -> PrimExpr:
    """``condition ? true_value : false_value``.

    >>> import workbench as wb
    >>> x = wb.Var("x", "float32")
    >>> wb.select(x > 0.0, x, 0.0)
    T.Select(x > T.float32(0), x, T.float32(0))
    """
    t = as_expr(true_value)
    f = as_expr(false_value)
    if not isinstance(true_value, PrimExpr) and isinstance(false_value, PrimExpr):
        t = const_like(true_value, f)
    if not isinstance(false_value, PrimExpr):
        f = const_like(false_value, t)
    return Select(as_expr(condition), t, f)


def cast(value: ExprLike, dtype: str) -> PrimExpr:
    v = as_expr(value)
    if v.dtype == dtype:
        return v
    if isinstance(v, (IntImm, FloatImm)):
        return const(v.value if is_float(dtype) else int(v.value), dtype)
    return Cast(dtype, v)


def _binary_builtin(name: str, cls: type[BinaryOp]):
    def fn(a: ExprLike, b: ExprLike) -> PrimExpr:
        from .simplify import max_, min_

        if not isinstance(a, PrimExpr) and isinstance(b, PrimExpr):
            a = const_like(a, b)
        a = as_expr(a)
        b = const_like(b, a)
        return {"min_": min_, "max_": max_}[name](a, b)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` of two expressions (constants fold)."
    return fn


minimum = _binary_builtin("min_", Min)
maximum = _binary_builtin("max_", Max)


def logical_and(a: ExprLike, b: ExprLike) -> PrimExpr:
    from .simplify import and_

    return and_(as_expr(a), as_expr(b))


def logical_or(a: ExprLike, b: ExprLike) -> PrimExpr:
    return Or(as_expr(a), as_expr(b))


def logical_not(a: ExprLike) -> PrimExpr:
    return Not(as_expr(a))


def _math(op: str):
    def fn(*args: ExprLike) -> PrimExpr:
        exprs = tuple(as_expr(a) for a in args)
        if not exprs:
            raise TypeError(f"{op} needs an argument")
        dtype = exprs[0].dtype
        if not is_float(dtype):
            if op == "abs":
                return Call(op, exprs, dtype)
            raise TypeError(f"{op} needs a float argument, got {dtype}")
        return Call(op, exprs, dtype)

    fn.__name__ = op
    fn.__doc__ = f"The math function ``{op}`` (computed in the argument's float type)."
    return fn


exp = _math("exp")
log = _math("log")
sqrt = _math("sqrt")
rsqrt = _math("rsqrt")
tanh = _math("tanh")
sigmoid = _math("sigmoid")
fabs = _math("abs")
erf = _math("erf")
sin = _math("sin")
cos = _math("cos")
floor = _math("floor")
ceil = _math("ceil")
power = _math("pow")


def let(var: Var, value: ExprLike, body: ExprLike) -> PrimExpr:
    """``body`` with ``var`` bound to ``value``.

    >>> import workbench as wb
    >>> x = wb.Var("x", "float32")
    >>> wb.ir.expr.let(x, 2.0, x * x)
    T.Let(x * x, where={x: T.float32(2)})
    """
    return Let(var, as_expr(value, var.dtype), as_expr(body))


def if_then_else(condition: ExprLike, true_value: ExprLike, false_value: ExprLike) -> PrimExpr:
    """``T.if_then_else``: only the chosen side is evaluated.

    >>> import workbench as wb
    >>> i = wb.Var("i")
    >>> A = wb.Buffer("A", (8,))
    >>> wb.ir.expr.if_then_else(i >= 1, A[i - 1], 0.0)
    T.if_then_else(i >= 1, A[i - 1], T.float32(0))
    """
    t = as_expr(true_value)
    f = as_expr(false_value)
    if not isinstance(true_value, PrimExpr) and isinstance(false_value, PrimExpr):
        t = const_like(true_value, f)
    if not isinstance(false_value, PrimExpr):
        f = const_like(false_value, t)
    return IfThenElseExpr(as_expr(condition), t, f)


#: ``Call.op`` of TVM's branch hint ``T.likely(cond)``.
LIKELY = "likely"


def likely(cond: ExprLike) -> PrimExpr:
    """``T.likely(cond)``: ``cond``, marked as usually true (TVM's branch hint).

    Kept in the IR so that it prints back; everything else reads it as ``cond``.
    A constant condition is returned as it is (as TVM does).

    >>> import workbench as wb
    >>> i = wb.Var("i")
    >>> wb.ir.expr.likely(i < 15)
    T.likely(i < 15)
    """
    c = as_expr(cond)
    if isinstance(c, (IntImm, FloatImm)):
        return c
    return Call(LIKELY, (c,), c.dtype)


def unwrap_likely(e: PrimExpr) -> PrimExpr:
    """``cond`` for ``T.likely(cond)`` (nested hints too), else ``e`` itself."""
    while isinstance(e, Call) and e.op == LIKELY:
        e = e.args[0]
    return e


def call_extern(dtype: str, name: str, *args: ExprLike | str, pure: bool = False) -> PrimExpr:
    """A call of the external C function ``name`` returning ``dtype``.

    >>> import workbench as wb
    >>> wb.ir.expr.call_extern("int32", "abs", wb.Var("x"))
    T.call_extern("int32", "abs", x)
    """
    conv = tuple(StringImm(a) if isinstance(a, str) else as_expr(a) for a in args)
    return CallExtern(dtype, name, conv, pure)


def is_index_dtype(dtype: str) -> bool:
    """int32 / int64 (and the other integer types) can index a buffer."""
    return dtype in INT_DTYPES


Extent = int | PrimExpr
"""A loop/iter-var extent or a buffer dimension: an ``int`` when static, else an
integer expression of shape variables (``n``, ``n * 4``)."""


def normalize_extent(value, what: str = "extent") -> Extent:
    """Static extents become plain ``int`` (an ``IntImm`` is unwrapped), so code that
    only handles static shapes keeps seeing ints; symbolic ones stay expressions.

    >>> normalize_extent(IntImm(8, "int64")), normalize_extent(Var("n")).name
    (8, 'n')
    """
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, got {value!r}")
    if isinstance(value, IntImm):
        return int(value.value)
    if isinstance(value, PrimExpr):
        if value.dtype not in INT_DTYPES:
            raise TypeError(f"{what} must be an integer expression, got dtype {value.dtype}")
        return value
    if isinstance(value, numbers.Integral):  # int, numpy integers
        return int(value)
    if isinstance(value, numbers.Real):  # float, numpy floats: only integral values
        if not float(value).is_integer():
            raise TypeError(f"{what} must be an integer, got {value!r}")
        return int(value)
    if isinstance(value, str):
        return int(value)
    raise TypeError(f"{what} must be an integer, got {value!r}")


def is_static(value) -> bool:
    """Is this extent/shape entry a known integer?"""
    return isinstance(value, int)


def extent_expr(value: Extent, dtype: str = "int32") -> PrimExpr:
    """An extent as an expression (ints become constants of ``dtype``)."""
    return value if isinstance(value, PrimExpr) else IntImm(int(value), dtype)
