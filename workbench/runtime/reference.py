"""A numpy reference evaluator for PrimFuncs, independent of any C backend.

:func:`evaluate` runs a function on numpy arrays and writes its outputs in place,
like a compiled kernel; :func:`random_args` makes arguments for it. They judge the
code generators: ``wb.verify`` runs the unscheduled function here and compares.

The evaluation is vectorized. Each block runs once per *chunk* of its loop nest:
the loop variables become broadcasting ``np.arange`` grids (``np.ix_`` style),
the iter-var bindings, the predicate and the body are evaluated over those grids
(loads are fancy indexing), and the result is stored with one fancy assignment.
Large nests are cut into chunks of at most :data:`CHUNK_ELEMENTS` points.

What it evaluates: *unscheduled* functions, i.e. at the root a sequence of
perfect loop nests (any loop kind), each holding one block whose body is a single
store (possibly under ``LetStmt`` bindings, which are substituted), whose bindings
are any expressions of its loops (``j_0 * 4 + j_1`` ...), with an optional
predicate. Accesses through a block's ``T.match_buffer`` views are rewritten to
their source buffers. A function with symbolic shapes is specialized to the
shapes of the arrays it gets (:func:`workbench.ir.transform.specialize`).
Anything else (a block nested in another block, a loop whose body holds several
statements, an ``if`` at the root) raises :class:`NotImplementedError`; callers
then fall back to the C backend. A block that reads the buffer it writes is
refused too, except as the reduction below.

How reductions accumulate. A block with reduce iter vars must have the body
``X[idx] = combine(X[idx], src)`` with ``combine`` one of ``+``, ``max``, ``min``
(``src`` does not read ``X``). Its ``init`` (if any) is stored first wherever all
reduce iter vars are 0 (and the predicate holds). Then ``src`` is reduced over
the loops that feed only the reduce iter vars (``np.add.reduce`` ...) and
combined into ``X`` with ``ufunc.at`` (so repeated indices are fine); when a loop
feeds both spatial and reduce iter vars, every point is combined with
``ufunc.at``. **Accumulation happens in float64** for float buffers (int64 for
integer buffers) and the result is cast to the buffer's dtype once at the end;
so a float32 sum is more accurate than the C kernel's sequential float32 sum,
and comparisons against the C backend need float32 tolerances (rtol ~1e-4).

Elementwise arithmetic keeps the IR dtype (float32 stays float32); index
arithmetic runs in int64. Loads are bounds-checked, except in the branches a
``Select``/``T.if_then_else``/``&&``/``||`` does not take, where indices are clipped
instead (so the classic padding ``select(in_bounds, data[h - 1], 0)`` works).
``T.call_extern`` is not evaluated (``NotImplementedError``: ``wb.verify`` then
builds the reference with C). Integer ``/``
truncates as in C; ``//`` and ``%`` are floor division and floor modulo.

Example:
    >>> import numpy as np
    >>> import workbench as wb
    >>> from workbench.runtime.reference import evaluate, random_args
    >>> A = wb.placeholder((4, 3), "float32", name="A")
    >>> B = wb.placeholder((3, 5), "float32", name="B")
    >>> k = wb.reduce_axis(3, name="k")
    >>> C = wb.compute((4, 5), lambda i, j: wb.sum(A[i, k] * B[k, j], axis=k), name="C")
    >>> func = wb.create_prim_func([A, B, C], name="matmul")
    >>> a, b, c = random_args(func, seed=0)
    >>> evaluate(func, a, b, c)
    >>> bool(np.allclose(c, a @ b, rtol=1e-5, atol=1e-6))
    True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..ir import expr as E
from ..ir.buffer import Buffer
from ..ir.expr import (
    LIKELY,
    MATH_FUNCS,
    And,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloatImm,
    IfThenElseExpr,
    IntImm,
    Let,
    Not,
    Or,
    PrimExpr,
    Select,
    Var,
    is_float,
)
from ..ir.functor import Mutator, expr_vars, iter_exprs, iter_stmts, substitute
from ..ir.simplify import struct_key
from ..ir.stmt import (
    Block,
    BufferStore,
    Evaluate,
    For,
    IRModule,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)

__all__ = ["CHUNK_ELEMENTS", "evaluate", "input_params", "output_params", "random_args"]

#: Largest number of loop-nest points evaluated at once (bounds temporary memory).
CHUNK_ELEMENTS = 1 << 22

_UNSUPPORTED = "reference evaluation supports unscheduled functions"

_BINARY = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Min: np.minimum,
    E.Max: np.maximum, E.FloorDiv: np.floor_divide, E.FloorMod: np.mod,
    E.EQ: np.equal, E.NE: np.not_equal, E.LT: np.less, E.LE: np.less_equal,
    E.GT: np.greater, E.GE: np.greater_equal,
}  # fmt: skip
_COMBINERS = {E.Add: np.add, E.Max: np.maximum, E.Min: np.minimum}

Mask = Any  # True, False, or a boolean array: where the evaluated expression is "taken"


# ---------------------------------------------------------------------------
# public API


def evaluate(func_or_mod: PrimFunc | IRModule, *arrays: np.ndarray, func_name: str | None = None
             ) -> None:
    """Run ``func_or_mod`` on numpy ``arrays`` (one per parameter), outputs in place.

    Accepts a PrimFunc, an IRModule (its only function, or ``func_name``) or any
    object with an IRModule ``.mod`` (a Schedule). Raises ``TypeError`` for a wrong
    argument count, a non-array or a wrong dtype, ``ValueError`` for a wrong shape
    or a read-only output, ``NotImplementedError`` for a scheduled function it
    cannot evaluate (nothing has been written then) and ``IndexError`` for an
    out-of-bounds access.

    Example:
        >>> import numpy as np
        >>> import workbench as wb
        >>> A = wb.placeholder((8,), "float32", name="A")
        >>> B = wb.compute((8,), lambda i: wb.max(A[i], 0.0), name="B")
        >>> func = wb.create_prim_func([A, B], name="relu")
        >>> a = np.linspace(-1, 1, 8, dtype="float32"); b = np.zeros(8, "float32")
        >>> evaluate(func, a, b)
        >>> bool((b == np.maximum(a, 0)).all())
        True
    """
    func = _resolve(func_or_mod, func_name)
    func = _specialize_to(func, arrays)
    _check_args(func, arrays)
    plans = _plan(func)  # refuses unsupported functions before anything is written
    store = _Arrays(func, arrays)
    with np.errstate(all="ignore"):
        for plan in plans:
            _run(plan, store)


def output_params(func_or_mod: PrimFunc | IRModule, func_name: str | None = None) -> list[int]:
    """Indices of the parameters the function writes.

    >>> from workbench import workloads
    >>> output_params(workloads.mm_relu(16, 16, 16))
    [2]
    """
    func = _resolve(func_or_mod, func_name)
    written = {s.buffer for s in iter_stmts(func.body) if isinstance(s, BufferStore)}
    names = {b.name for b in written}
    return [i for i, p in enumerate(func.params) if p in written or p.name in names]


def input_params(func_or_mod: PrimFunc | IRModule, func_name: str | None = None) -> list[int]:
    """Indices of the parameters the function does not write (its inputs).

    >>> from workbench import workloads
    >>> input_params(workloads.mm_relu(16, 16, 16))
    [0, 1]
    """
    func = _resolve(func_or_mod, func_name)
    outs = set(output_params(func))
    return [i for i in range(len(func.params)) if i not in outs]


def random_args(func_or_mod: PrimFunc | IRModule, seed: int = 0, func_name: str | None = None,
                shapes: dict[str, int] | None = None) -> list[np.ndarray]:
    """One array per parameter: random inputs, zero outputs (deterministic in ``seed``).

    A function with symbolic shapes needs ``shapes``, the value of each shape
    variable by name (``{"n": 37}``).

    Float inputs are standard normal (values O(1)); inputs read inside the
    argument of ``sqrt``, ``rsqrt`` or ``log`` (a variance, say) are drawn from
    [0.5, 1.5) instead, so the reference is not NaN. Signed integer inputs are
    uniform in [-8, 8), unsigned in [0, 8), bools are random; integer inputs read
    inside the divisor of an integer ``//``, ``%`` or ``/`` are drawn from [1, 8), so a
    kernel dividing by an input is checked on its quotients (a divisor that is still 0,
    such as ``D[i] - 1``, makes the built kernel raise ``ZeroDivisionError``).

    >>> from workbench import workloads
    >>> a, b, c = random_args(workloads.matmul(4, 4, 4), seed=1)
    >>> a.shape, a.dtype.name, float(abs(c).max())
    ((4, 4), 'float32', 0.0)
    """
    func = _resolve(func_or_mod, func_name)
    if func.shape_vars:
        missing = sorted(v.name for v in func.shape_vars if v.name not in (shapes or {}))
        if missing:
            raise ValueError(
                f"{func.name!r} has symbolic shapes: pass shapes= with a value for {missing}"
            )
        func = func.specialize({v.name: shapes[v.name] for v in func.shape_vars})
    rng = np.random.default_rng(seed)
    outs = set(output_params(func))
    positive = _positive_inputs(func)
    divisors = _divisor_inputs(func)
    args = []
    for i, p in enumerate(func.params):
        dtype = np.dtype(p.dtype)
        if i in outs:
            args.append(np.zeros(p.shape, dtype))
        elif is_float(p.dtype) and p in positive:
            args.append(rng.uniform(0.5, 1.5, p.shape).astype(dtype))
        elif is_float(p.dtype):
            args.append(rng.standard_normal(p.shape).astype(dtype))
        elif p.dtype == "bool":
            args.append(rng.integers(0, 2, p.shape).astype(bool))
        elif p in divisors:
            args.append(rng.integers(1, 8, p.shape).astype(dtype))
        else:
            low = 0 if p.dtype.startswith("uint") else -8
            args.append(rng.integers(low, 8, p.shape).astype(dtype))
    return args


def _positive_inputs(func: PrimFunc) -> set:
    """Buffers loaded inside the argument of a function defined for x > 0 only."""
    from ..ir.expr import BufferLoad, Call
    from ..ir.functor import iter_exprs, iter_stmts, stmt_exprs

    found = set()
    for s in iter_stmts(func.body):
        for e in stmt_exprs(s):
            for x in iter_exprs(e):
                if isinstance(x, Call) and x.op in ("sqrt", "rsqrt", "log"):
                    for arg in x.args:
                        found.update(y.buffer for y in iter_exprs(arg) if isinstance(y, BufferLoad))
    return found


def _divisor_inputs(func: PrimFunc) -> set:
    """Buffers loaded inside the divisor of an integer division or modulo."""
    from ..ir.expr import BufferLoad, Div, FloorDiv, FloorMod
    from ..ir.functor import iter_exprs, iter_stmts, stmt_exprs

    found = set()
    for s in iter_stmts(func.body):
        for e in stmt_exprs(s):
            for x in iter_exprs(e):
                if isinstance(x, (Div, FloorDiv, FloorMod)) and not is_float(x.dtype):
                    found.update(y.buffer for y in iter_exprs(x.b) if isinstance(y, BufferLoad))
    return found


# ---------------------------------------------------------------------------
# arguments


def _resolve(func_or_mod: Any, func_name: str | None) -> PrimFunc:
    mod = getattr(func_or_mod, "mod", None)
    if isinstance(mod, IRModule):  # a Schedule
        func_or_mod = mod
    if isinstance(func_or_mod, PrimFunc):
        if func_name is not None and func_name != func_or_mod.name:
            raise KeyError(f"function is named {func_or_mod.name!r}, not {func_name!r}")
        return func_or_mod
    if isinstance(func_or_mod, IRModule):
        if func_name is not None:
            return func_or_mod[func_name]
        if len(func_or_mod) != 1:
            raise ValueError(
                f"the module has {len(func_or_mod)} functions {func_or_mod.names}; "
                "pass func_name= to pick one"
            )
        return func_or_mod.functions[0][1]
    raise TypeError(f"expected a PrimFunc or IRModule, got {type(func_or_mod).__name__}")


def _specialize_to(func: PrimFunc, arrays: Sequence[Any]) -> PrimFunc:
    """A function with symbolic shapes, specialized to the shapes of ``arrays``."""
    if not func.shape_vars:
        return func
    from ..ir.transform.specialize import shape_values

    shapes = {
        p.name: a.shape
        for p, a in zip(func.params, arrays)
        if isinstance(a, np.ndarray) and a.ndim == p.ndim
    }
    return func.specialize(shape_values(func, shapes))


def _check_args(func: PrimFunc, arrays: Sequence[Any]) -> None:
    params = func.params
    if len(arrays) != len(params):
        names = ", ".join(p.name for p in params)
        raise TypeError(
            f"{func.name} takes {len(params)} arrays ({names}), got {len(arrays)}"
        )
    outs = set(output_params(func))
    for i, (p, a) in enumerate(zip(params, arrays)):
        where = f"{func.name}: argument {i} ({p.name})"
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{where} must be a numpy array, got {type(a).__name__}")
        if a.dtype != np.dtype(p.dtype):
            raise TypeError(f"{where} has dtype {a.dtype}, expected {p.dtype}")
        if a.shape != p.shape:
            raise ValueError(f"{where} has shape {a.shape}, expected {p.shape}")
        if i in outs and not a.flags.writeable:
            raise ValueError(f"{where} is written but the array is read-only")


class _Arrays:
    """The current array of every buffer: the arguments, plus zeroed intermediates."""

    def __init__(self, func: PrimFunc, arrays: Sequence[np.ndarray]):
        self.by_buffer: dict[Buffer, np.ndarray] = dict(zip(func.params, arrays))
        for s in iter_stmts(func.body):
            if isinstance(s, Block):
                for b in s.alloc_buffers:
                    self.by_buffer[b] = np.zeros(b.shape, np.dtype(b.dtype))
        self.by_name = {b.name: a for b, a in self.by_buffer.items()}

    def __getitem__(self, buffer: Buffer) -> np.ndarray:
        arr = self.by_buffer.get(buffer)
        arr = arr if arr is not None else self.by_name[buffer.name]
        return arr.reshape(1) if arr.ndim == 0 else arr  # a view: 0-d buffers index as [0]


# ---------------------------------------------------------------------------
# planning: check the function's shape, find the reductions


@dataclass(frozen=True)
class _Plan:
    """One leaf block under its loop nest, ready to run.

    ``combine``/``src`` are set for reductions; ``r_axes`` are the loop positions
    reduced before combining (``None``: combine every point with ``ufunc.at``).
    """

    block: Block
    loops: tuple[For, ...]
    store: BufferStore
    combine: np.ufunc | None = None
    src: PrimExpr | None = None
    r_axes: tuple[int, ...] | None = None


def _unsupported(what: str) -> NotImplementedError:
    return NotImplementedError(f"{_UNSUPPORTED}: {what}")


def _plan(func: PrimFunc) -> list[_Plan]:
    root = func.body
    if root.iter_vars or root.init is not None:
        raise _unsupported(f'root block "{root.name}" has iter vars or an init')
    known = {b.name for b in func.params}
    for s in iter_stmts(root):
        if isinstance(s, Block):
            known.update(b.name for b in s.alloc_buffers)
    plans: list[_Plan] = []

    def walk(s: Stmt, loops: tuple[For, ...]) -> None:
        if isinstance(s, SeqStmt) and len(s.stmts) == 1:
            walk(s.stmts[0], loops)
        elif isinstance(s, SeqStmt):
            if loops:
                raise _unsupported(
                    f"loop `{loops[-1].loop_var.name}` has a body of {len(s.stmts)} statements "
                    "(several blocks under one loop, e.g. after compute_at)"
                )
            for x in s.stmts:
                walk(x, loops)
        elif isinstance(s, For):
            if s.min:
                raise _unsupported(f"loop `{s.loop_var.name}` starts at {s.min}")
            walk(s.body, loops + (s,))
        elif isinstance(s, Block):
            plans.append(_plan_block(s, loops, known))
        elif isinstance(s, Evaluate) and not loops:
            pass  # a no-op
        else:
            place = f"under loop `{loops[-1].loop_var.name}`" if loops else "at the root"
            raise _unsupported(f"a statement of type {type(s).__name__} {place}")

    walk(root.body, ())
    return plans


class _Views(Mutator):
    """Accesses through ``T.match_buffer`` views, rewritten to their source buffers."""

    def __init__(self, views):
        self.views = {m.buffer: m for m in views}

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        e = super().visit_expr(e)
        m = self.views.get(e.buffer) if isinstance(e, BufferLoad) else None
        return e if m is None else BufferLoad(m.source.buffer, m.source_indices(e.indices))

    def visit_stmt(self, s: Stmt) -> Stmt:
        s = super().visit_stmt(s)
        m = self.views.get(s.buffer) if isinstance(s, BufferStore) else None
        if m is None:
            return s
        return BufferStore(m.source.buffer, s.value, m.source_indices(s.indices))


def _unlet(s: Stmt | None) -> Stmt | None:
    """A chain of ``LetStmt`` around a store, as the store with the values substituted."""
    lets: dict[Var, PrimExpr] = {}
    while isinstance(s, LetStmt):
        lets[s.var] = substitute(s.value, lets)
        s = s.body
    return substitute(s, lets) if lets and s is not None else s


def _plan_block(block: Block, loops: tuple[For, ...], known: set[str]) -> _Plan:
    name = f'block "{block.name}"'
    if block.match_buffers:
        views = _Views(block.match_buffers)
        body = views.visit_stmt(block.body)
        init = views.visit_stmt(block.init) if block.init is not None else None
        block = replace(block, body=body, init=init, match_buffers=())
    if isinstance(block.body, LetStmt) or isinstance(block.init, LetStmt):
        block = replace(block, body=_unlet(block.body), init=_unlet(block.init))
    for s in iter_stmts(block.body):
        if isinstance(s, Block) and s is not block.body:
            raise _unsupported(f'block "{s.name}" is nested inside {name}')
    if not isinstance(block.body, BufferStore):
        raise _unsupported(f"{name} has a body that is not a single store")
    if block.init is not None and not isinstance(block.init, BufferStore):
        raise _unsupported(f"{name} has an init that is not a single store")
    loop_vars = {f.loop_var for f in loops}
    iter_vars = {iv.var for iv in block.iter_vars}
    for v in block.iter_values:
        for x in expr_vars(v) - loop_vars:
            raise ValueError(f"{name}: binding uses `{x.name}`, which is no enclosing loop")
    exprs = [block.predicate, *_store_exprs(block.body)]
    if block.init is not None:
        exprs += _store_exprs(block.init)
    for e in exprs:
        _check_expr(e, name, loop_vars | iter_vars, known)

    store = block.body
    out_key = struct_key(BufferLoad(store.buffer, store.indices))
    reduce_vars = [iv for iv in block.iter_vars if iv.kind == "R"]
    if not reduce_vars:
        if block.init is not None:
            raise _unsupported(f"{name} has an init but no reduce iter var")
        if _reads(store.value, store.buffer) or any(_reads(i, store.buffer) for i in store.indices):
            raise _unsupported(f"{name} reads the buffer `{store.buffer.name}` it writes")
        return _Plan(block, loops, store)

    value = store.value
    combine = _COMBINERS.get(type(value))
    if store.buffer.dtype == "bool":
        raise _unsupported(f"{name} reduces into a bool buffer")
    if combine is None:
        raise _unsupported(f"{name}: a reduction must update with +, max or min")
    assert isinstance(value, BinaryOp)
    if isinstance(value.a, BufferLoad) and struct_key(value.a) == out_key:
        src = value.b
    elif isinstance(value.b, BufferLoad) and struct_key(value.b) == out_key:
        src = value.a
    else:
        raise _unsupported(f"{name}: a reduction must read back exactly the element it writes")
    if _reads(src, store.buffer) or any(_reads(i, store.buffer) for i in store.indices):
        raise _unsupported(f"{name}: the reduced value reads `{store.buffer.name}`")
    if block.init is not None and _reads(block.init.value, store.buffer):
        raise _unsupported(f"{name}: the init reads `{store.buffer.name}`")

    def axes_of(kind: str) -> set[int]:
        used: set[Var] = set()
        for iv, v in zip(block.iter_vars, block.iter_values):
            if iv.kind == kind:
                used |= expr_vars(v)
        return {p for p, f in enumerate(loops) if f.loop_var in used}

    s_axes, r_axes = axes_of("S"), axes_of("R")
    for p, f in enumerate(loops):
        if p not in s_axes | r_axes and f.extent > 1:
            raise _unsupported(f"{name}: loop `{f.loop_var.name}` feeds no binding")
    spatial = {iv.var for iv in block.iter_vars if iv.kind == "S"}
    separable = not (s_axes & r_axes) and all(expr_vars(i) <= spatial for i in store.indices)
    return _Plan(block, loops, store, combine, src, tuple(sorted(r_axes)) if separable else None)


def _store_exprs(s: BufferStore) -> list[PrimExpr]:
    return [s.value, *s.indices]


def _reads(e: PrimExpr, buffer: Buffer) -> bool:
    return any(
        isinstance(x, BufferLoad) and (x.buffer is buffer or x.buffer.name == buffer.name)
        for x in iter_exprs(e)
    )


def _check_expr(e: PrimExpr, where: str, bound: set[Var], known: set[str]) -> None:
    bound = bound | {x.var for x in iter_exprs(e) if isinstance(x, Let)}
    for x in iter_exprs(e):
        if isinstance(x, Var) and x not in bound:
            raise ValueError(f"{where}: variable `{x.name}` is not bound")
        if isinstance(x, BufferLoad) and x.buffer.name not in known:
            raise ValueError(f"{where}: buffer `{x.buffer.name}` is no parameter or allocation")
        if isinstance(x, Call) and x.op not in MATH_FUNCS and x.op != LIKELY:
            raise _unsupported(f"{where}: unknown intrinsic {x.op!r}")
        known_node = (
            Var, IntImm, FloatImm, BufferLoad, BinaryOp, Select, Cast, Call, Not,
            IfThenElseExpr, Let,
        )  # fmt: skip
        if not isinstance(x, known_node):
            raise _unsupported(f"{where}: expression node {type(x).__name__}")


# ---------------------------------------------------------------------------
# running


def _chunks(extents: Sequence[int], limit: int) -> Iterator[tuple[tuple[int, int], ...]]:
    """Cut the nest into boxes of at most ``limit`` points: the inner axes whole, one
    axis in steps, the outer axes one index at a time."""
    n = len(extents)
    suffix = [1] * (n + 1)
    for d in reversed(range(n)):
        suffix[d] = suffix[d + 1] * extents[d]
    d = next(d for d in range(n + 1) if suffix[d] <= limit)
    if d == 0:
        yield tuple((0, e) for e in extents)
        return
    a = d - 1
    step = max(1, limit // suffix[d])
    tail = tuple((0, e) for e in extents[d:])
    for head in itertools.product(*(range(e) for e in extents[:a])):
        for s in range(0, extents[a], step):
            box = tuple((h, h + 1) for h in head) + ((s, min(s + step, extents[a])),)
            yield box + tail


def _run(plan: _Plan, arrays: _Arrays) -> None:
    ev = _Evaluator(arrays, plan.block.name)
    boxes = list(_chunks([f.extent for f in plan.loops], CHUNK_ELEMENTS))
    if plan.combine is None:
        for box in boxes:
            env, shape, mask = _grid(plan, box, ev)
            if mask is not False:
                ev.store(plan.store, env, mask, shape, arrays[plan.store.buffer])
        return
    target = arrays[plan.store.buffer]
    acc = target.astype(np.float64 if target.dtype.kind == "f" else np.int64)
    if plan.block.init is not None:
        reduce_vars = [iv.var for iv in plan.block.iter_vars if iv.kind == "R"]
        for box in boxes:
            env, shape, mask = _grid(plan, box, ev)
            for v in reduce_vars:
                mask = _mask_and(mask, np.equal(env[v], 0))
            if mask is not False:
                init = plan.block.init
                value = ev.cast(ev.expr(init.value, env, mask), init.buffer.dtype)
                ev.store(init, env, mask, shape, acc, value)
    for box in boxes:
        env, shape, mask = _grid(plan, box, ev)
        if mask is not False:
            _reduce(plan, ev, env, shape, mask, acc)
    np.copyto(target, acc, casting="unsafe")


def _grid(plan: _Plan, box, ev: _Evaluator) -> tuple[dict[Var, Any], tuple[int, ...], Mask]:
    """Loop-variable grids over ``box``, iter-var values, and the predicate mask."""
    n = len(plan.loops)
    shape = tuple(hi - lo for lo, hi in box)
    env: dict[Var, Any] = {}
    for p, (f, (lo, hi)) in enumerate(zip(plan.loops, box)):
        env[f.loop_var] = np.arange(lo, hi, dtype=np.int64).reshape(
            [-1 if q == p else 1 for q in range(n)]
        )
    for iv, v in zip(plan.block.iter_vars, plan.block.iter_values):
        env[iv.var] = ev.expr(v, env, True)
    mask = _mask_and(True, ev.expr(plan.block.predicate, env, True))
    return env, shape, mask


def _reduce(plan: _Plan, ev: _Evaluator, env, shape, mask: Mask, acc: np.ndarray) -> None:
    store, combine = plan.store, plan.combine
    assert combine is not None and plan.src is not None
    src = np.broadcast_to(ev.expr(plan.src, env, mask), shape)
    idx = ev.indices(store, env, mask)
    if plan.r_axes is not None:  # reduce the reduction loops first, then combine
        if combine is np.add:
            ident: Any = 0
        elif acc.dtype.kind == "f":
            ident = -np.inf if combine is np.maximum else np.inf
        else:
            info = np.iinfo(acc.dtype)
            ident = info.min if combine is np.maximum else info.max
        where = True if mask is True else np.broadcast_to(mask, shape)
        part = combine.reduce(
            src, axis=plan.r_axes, dtype=acc.dtype, keepdims=True, initial=ident, where=where
        )
        idx = [np.broadcast_to(i, part.shape).ravel() for i in idx]
        combine.at(acc, tuple(idx), part.ravel())
        return
    sel = _select_points(mask, shape)
    idx = [np.broadcast_to(i, shape)[sel] for i in idx]
    combine.at(acc, tuple(idx), src[sel].astype(acc.dtype))


def _select_points(mask: Mask, shape: tuple[int, ...]) -> Any:
    return Ellipsis if mask is True else np.broadcast_to(mask, shape)


def _mask_and(mask: Mask, cond: Any) -> Mask:
    """``mask & cond`` keeping the scalar cases ``True``/``False`` cheap."""
    if np.ndim(cond) == 0:
        return mask if bool(cond) else False
    if mask is True:
        return np.asarray(cond, dtype=bool)
    if mask is False:
        return False
    return np.logical_and(mask, cond)


class _Evaluator:
    """Evaluates expressions over grids for one block (named in error messages)."""

    def __init__(self, arrays: _Arrays, block: str):
        self.arrays = arrays
        self.block = block

    def cast(self, x: Any, dtype: str) -> Any:
        want = np.dtype(dtype)
        if isinstance(x, np.ndarray) or isinstance(x, np.generic):
            return x if x.dtype == want else x.astype(want)
        return want.type(x)

    def expr(self, e: PrimExpr, env: dict[Var, Any], mask: Mask) -> Any:
        if isinstance(e, Var):
            return env[e]
        if isinstance(e, IntImm):
            return bool(e.value) if e.dtype == "bool" else int(e.value)
        if isinstance(e, FloatImm):
            return np.dtype(e.dtype).type(e.value)
        if isinstance(e, BufferLoad):
            idx = self.indices(e, env, mask)
            return self.arrays[e.buffer][tuple(idx)]
        if isinstance(e, (And, Or)):
            a = self.expr(e.a, env, mask)
            taken = a if isinstance(e, And) else np.logical_not(a)
            b = self.expr(e.b, env, _mask_and(mask, taken))  # C short-circuits
            return (np.logical_and if isinstance(e, And) else np.logical_or)(a, b)
        if isinstance(e, BinaryOp):
            a, b = self.expr(e.a, env, mask), self.expr(e.b, env, mask)
            if isinstance(e, Div):
                out = np.true_divide(a, b) if is_float(e.dtype) else _trunc_div(a, b)
            else:
                out = _BINARY[type(e)](a, b)
            return self.cast(out, e.dtype) if is_float(e.dtype) else out
        if isinstance(e, Let):
            inner = dict(env)
            inner[e.var] = self.expr(e.value, env, mask)
            return self.expr(e.body, inner, mask)
        if isinstance(e, (Select, IfThenElseExpr)):
            c = self.expr(e.condition, env, mask)
            t = self.expr(e.true_value, env, _mask_and(mask, c))
            f = self.expr(e.false_value, env, _mask_and(mask, np.logical_not(c)))
            return self.cast(np.where(c, t, f), e.dtype)
        if isinstance(e, Cast):
            return self.cast(self.expr(e.value, env, mask), e.dtype)
        if isinstance(e, Call):
            args = [self.expr(a, env, mask) for a in e.args]
            return self.cast(_call(e.op, args, e.dtype), e.dtype)
        if isinstance(e, Not):
            return np.logical_not(self.expr(e.a, env, mask))
        raise _unsupported(f"expression node {type(e).__name__}")  # pragma: no cover

    def indices(self, access: BufferLoad | BufferStore, env: dict[Var, Any], mask: Mask
                ) -> list[Any]:
        """Evaluated indices of a load or store, bounds-checked where ``mask`` holds
        and clipped elsewhere."""
        buf = access.buffer
        verb = "writes" if isinstance(access, BufferStore) else "reads"
        if not access.indices:
            return [0]  # a 0-d buffer, seen as one element (see _Arrays)
        out = []
        for d, i in enumerate(access.indices):
            ix = np.asarray(self.expr(i, env, mask))
            if ix.dtype.kind not in "iu":
                if ix.dtype.kind != "b":
                    raise TypeError(f'block "{self.block}": index of `{buf.name}` is {ix.dtype}')
                ix = ix.astype(np.int64)
            n = buf.shape[d]
            bad = (ix < 0) | (ix >= n)
            if bad.any():
                if mask is not False:
                    hit = bad if mask is True else np.logical_and(bad, mask)
                    if hit.any():
                        raise IndexError(
                            f'block "{self.block}" {verb} {buf.name} out of bounds: index '
                            f"{int(np.broadcast_to(ix, hit.shape)[hit].flat[0])} on dimension "
                            f"{d} (extent {n})"
                        )
                ix = np.clip(ix, 0, n - 1)
            out.append(ix)
        return out

    def store(self, st: BufferStore, env, mask: Mask, shape, target: np.ndarray,
              value: Any = None) -> None:
        """``target[indices] = value`` over the points of ``shape`` where ``mask`` holds."""
        if value is None:
            value = self.cast(self.expr(st.value, env, mask), st.buffer.dtype)
        idx = self.indices(st, env, mask)
        sel = _select_points(mask, shape)
        idx = [np.broadcast_to(i, shape)[sel] for i in idx]
        target[tuple(idx)] = np.broadcast_to(value, shape)[sel]


def _trunc_div(a: Any, b: Any) -> Any:
    """Integer division rounding toward zero, as in C."""
    q = np.floor_divide(a, b)
    r = np.subtract(a, np.multiply(q, b))
    fix = np.logical_and(r != 0, np.not_equal(np.less(a, 0), np.less(b, 0)))
    return q + fix


_ERF = np.frompyfunc(math.erf, 1, 1)


def _call(op: str, args: list[Any], dtype: str) -> Any:
    x = args[0]
    if op == LIKELY:  # a branch hint: the condition itself
        return x
    if op == "rsqrt":
        return np.dtype(dtype).type(1) / np.sqrt(x)
    if op == "sigmoid":
        one = np.dtype(dtype).type(1)
        return one / (one + np.exp(-x))
    if op == "erf":
        return np.asarray(_ERF(np.asarray(x, dtype=np.float64)), dtype=np.float64)
    if op == "pow":
        return np.power(x, args[1])
    fn = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
          "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil}.get(op)
    if fn is None:  # pragma: no cover - _check_expr refuses these first
        raise _unsupported(f"unknown intrinsic {op!r}")
    return fn(x)
