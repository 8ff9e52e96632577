"""Tensor-expression frontend: describe *what* to compute, get a PrimFunc.

>>> import workbench as wb
>>> A = wb.placeholder((128, 128), "float32", name="A")
>>> B = wb.placeholder((128, 128), "float32", name="B")
>>> k = wb.reduce_axis(128, name="k")
>>> Y = wb.compute((128, 128), lambda i, j: wb.sum(A[i, k] * B[k, j], axis=k), name="Y")
>>> C = wb.compute((128, 128), lambda i, j: wb.max(Y[i, j], 0.0), name="C")
>>> func = wb.create_prim_func([A, B, C], name="mm_relu")
>>> [b.name for b in wb.ir.iter_blocks(func.body)][1:]
['Y', 'C']
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .ir.buffer import Buffer
from .ir.expr import (
    Add,
    BufferLoad,
    ExprLike,
    FloatImm,
    IntImm,
    Max,
    Min,
    PrimExpr,
    Var,
    as_expr,
    const_like,
    is_float,
    maximum,
    minimum,
)
from .ir.functor import iter_exprs, substitute
from .ir.stmt import Block, BufferStore, For, IterVar, PrimFunc, SeqStmt, Stmt

__all__ = [
    "Tensor",
    "placeholder",
    "compute",
    "reduce_axis",
    "sum",
    "max",
    "min",
    "create_prim_func",
]

_TENSOR_OF: weakref.WeakKeyDictionary[Buffer, Tensor] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False, repr=False)
class ReduceAxis(Var):
    """A reduction axis made by :func:`reduce_axis`; usable as an index."""

    extent: int = 0


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(PrimExpr):
    """``combiner`` over ``axes`` of ``source`` (only as the top of a compute body)."""

    combiner: str  # "sum" | "max" | "min"
    source: PrimExpr
    axes: tuple[ReduceAxis, ...]
    dtype: str = field(default="", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", self.source.dtype)


@dataclass(eq=False)
class Tensor:
    """A placeholder or the result of :func:`compute`; index it to read an element."""

    buffer: Buffer
    axes: tuple[Var, ...] = ()
    body: PrimExpr | None = None

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.buffer.shape

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def is_placeholder(self) -> bool:
        return self.body is None

    def __getitem__(self, indices) -> BufferLoad:
        return self.buffer[indices]

    def __repr__(self) -> str:
        kind = "placeholder" if self.is_placeholder else "compute"
        return f"Tensor({self.name!r}, {self.shape}, {self.dtype!r}, {kind})"


def placeholder(shape: Sequence[int], dtype: str = "float32", name: str = "A") -> Tensor:
    """An input tensor.

    >>> import workbench as wb
    >>> wb.placeholder((4, 8), "float32", name="A")
    Tensor('A', (4, 8), 'float32', placeholder)
    """
    t = Tensor(Buffer(name, tuple(shape), dtype))
    _TENSOR_OF[t.buffer] = t
    return t


def reduce_axis(extent: int, name: str = "k") -> ReduceAxis:
    """A reduction axis over ``[0, extent)``.

    >>> import workbench as wb
    >>> k = wb.reduce_axis(64, name="k")
    >>> k.extent
    64
    """
    if isinstance(extent, tuple):
        lo, hi = extent
        if lo != 0:
            raise ValueError("reduce_axis: only ranges starting at 0 are supported")
        extent = hi
    from .ir.expr import normalize_extent

    extent = normalize_extent(extent, f"reduce_axis {name!r} extent")  # int or a shape expr
    if isinstance(extent, int) and extent <= 0:
        raise ValueError(f"reduce_axis {name!r}: extent must be positive, got {extent}")
    dtype = extent.dtype if isinstance(extent, PrimExpr) else _index_dtype((extent,))
    return ReduceAxis(name, dtype, extent)


def _index_dtype(shape: Sequence[int | PrimExpr]) -> str:
    """int64 when a dimension is an int64 expression or a static extent beyond int32
    (its loop counter would overflow), else int32."""
    return "int64" if any(
        (isinstance(s, PrimExpr) and s.dtype == "int64") or (isinstance(s, int) and s > 2**31 - 1)
        for s in shape
    ) else "int32"


def _axes(axis) -> tuple[ReduceAxis, ...]:
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not isinstance(a, ReduceAxis):
            raise TypeError(f"axis must come from wb.reduce_axis, got {a!r}")
    return axes


def sum(expr: ExprLike, axis) -> Reduce:  # noqa: A001 - mirrors te.sum
    """Sum ``expr`` over the reduction axis (or axes) ``axis``."""
    return Reduce("sum", as_expr(expr), _axes(axis))


def max(a: ExprLike, b: ExprLike | None = None, axis=None) -> PrimExpr:  # noqa: A001
    """``max(a, b)`` elementwise, or a max-reduction of ``a`` over ``axis``."""
    if axis is not None:
        return Reduce("max", as_expr(a), _axes(axis))
    if b is None:
        raise TypeError("wb.max needs two values or axis=")
    return maximum(a, b)


def min(a: ExprLike, b: ExprLike | None = None, axis=None) -> PrimExpr:  # noqa: A001
    """``min(a, b)`` elementwise, or a min-reduction of ``a`` over ``axis``."""
    if axis is not None:
        return Reduce("min", as_expr(a), _axes(axis))
    if b is None:
        raise TypeError("wb.min needs two values or axis=")
    return minimum(a, b)


def compute(
    shape: Sequence[int],
    fcompute: Callable[..., ExprLike],
    name: str = "T",
    dtype: str | None = None,
) -> Tensor:
    """A tensor whose element at ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    The lambda's parameter names become the loop names (``lambda i, j:`` gives loops
    ``i`` and ``j``); reduction axes used inside follow them.
    """
    from .ir.expr import normalize_extent

    shape = tuple(normalize_extent(s, f"compute {name!r} shape") for s in shape)
    # index type: int64 when a dimension is a symbolic int64 ``n`` or exceeds int32
    index_dtype = _index_dtype(shape)
    try:
        params = [
            p.name
            for p in inspect.signature(fcompute).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    if len(params) != len(shape):
        params = [f"i{d}" for d in range(len(shape))]
    axes = tuple(Var(n, index_dtype) for n in params)
    body = as_expr(fcompute(*axes))
    if dtype is not None and body.dtype != dtype:
        from .ir.expr import cast

        body = cast(body, dtype)
    for x in iter_exprs(body.source if isinstance(body, Reduce) else body):
        if isinstance(x, Reduce):
            raise ValueError(f"compute {name!r}: a reduction must be the whole body")
    t = Tensor(Buffer(name, shape, body.dtype), axes, body)
    _TENSOR_OF[t.buffer] = t
    return t


def _inputs(t: Tensor) -> list[Tensor]:
    out: list[Tensor] = []
    src = t.body.source if isinstance(t.body, Reduce) else t.body
    for x in iter_exprs(src):
        if isinstance(x, BufferLoad):
            inp = _TENSOR_OF.get(x.buffer)
            if inp is None:
                raise ValueError(f"compute {t.name!r} reads {x.buffer.name!r}, not a tensor")
            if inp not in out:
                out.append(inp)
    return out


_IDENTITY = {"sum": 0, "max": "-inf", "min": "inf"}


def _identity(combiner: str, dtype: str) -> PrimExpr:
    if combiner == "sum":
        return const_like(0, _like(dtype))
    if is_float(dtype):
        return FloatImm(float(_IDENTITY[combiner]), dtype)
    bits = int("".join(c for c in dtype if c.isdigit()))
    if dtype.startswith("uint"):
        return IntImm(0 if combiner == "max" else 2**bits - 1, dtype)
    return IntImm(-(2 ** (bits - 1)) if combiner == "max" else 2 ** (bits - 1) - 1, dtype)


def _like(dtype: str) -> PrimExpr:
    return FloatImm(0.0, dtype) if is_float(dtype) else IntImm(0, dtype)


def _stage(t: Tensor) -> Stmt:
    body = t.body
    reduce = body if isinstance(body, Reduce) else None
    raxes = reduce.axes if reduce is not None else ()
    loop_vars = [Var(a.name, a.dtype) for a in t.axes] + [Var(a.name, a.dtype) for a in raxes]
    block_vars = [Var("v" + a.name, a.dtype) for a in (*t.axes, *raxes)]
    iter_vars = tuple(
        [IterVar(v, e, "S") for v, e in zip(block_vars[: len(t.axes)], t.shape, strict=True)]
        + [IterVar(v, a.extent, "R") for v, a in zip(block_vars[len(t.axes) :], raxes, strict=True)]
    )
    mapping = dict(zip(list(t.axes) + list(raxes), block_vars, strict=True))
    out_idx = tuple(block_vars[: len(t.axes)])
    init = None
    if reduce is not None:
        src = substitute(reduce.source, mapping)
        cur = BufferLoad(t.buffer, out_idx)
        combined = {"sum": Add, "max": Max, "min": Min}[reduce.combiner](cur, src)
        stmt: Stmt = BufferStore(t.buffer, combined, out_idx)
        init = BufferStore(t.buffer, _identity(reduce.combiner, t.dtype), out_idx)
    else:
        stmt = BufferStore(t.buffer, substitute(body, mapping), out_idx)
    block: Stmt = Block(t.name, iter_vars, tuple(loop_vars), stmt, init=init)
    extents = list(t.shape) + [a.extent for a in raxes]
    for v, e in reversed(list(zip(loop_vars, extents, strict=True))):
        block = For(v, e, "serial", block)
    return block


def create_prim_func(args: Sequence[Tensor], name: str = "main") -> PrimFunc:
    """Lower tensors to a PrimFunc: one block per compute stage, in dependency order.

    ``args`` are the function's parameters (inputs and outputs); every other
    compute stage becomes an intermediate buffer allocated in the function.
    """
    args = list(args)
    for a in args:
        if not isinstance(a, Tensor):
            raise TypeError(f"create_prim_func: expected tensors, got {a!r}")
    order: list[Tensor] = []
    seen: set[int] = set()

    def visit(t: Tensor, stack: tuple[int, ...]) -> None:
        if id(t) in seen or t.is_placeholder:
            return
        for inp in _inputs(t):
            visit(inp, stack + (id(t),))
        seen.add(id(t))
        order.append(t)

    for a in args:
        visit(a, ())
    arg_ids = {id(a) for a in args}
    for t in order:
        for inp in _inputs(t):
            if inp.is_placeholder and id(inp) not in arg_ids:
                raise ValueError(
                    f"create_prim_func: placeholder {inp.name!r} (read by {t.name!r}) "
                    "must be one of the arguments"
                )
    if not order:
        raise ValueError("create_prim_func: no compute stage among the arguments' producers")
    names = [t.name for t in order]
    if len(set(names)) != len(names):
        raise ValueError(f"create_prim_func: stage names must be unique, got {names}")
    stages = [_stage(t) for t in order]
    allocs = tuple(t.buffer for t in order if id(t) not in arg_ids)
    body = stages[0] if len(stages) == 1 else SeqStmt(tuple(stages))
    root = Block("root", (), (), body, alloc_buffers=allocs)
    return PrimFunc(name, tuple(a.buffer for a in args), root)
