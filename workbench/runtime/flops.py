"""Floating-point operation counts of tensor programs (for GFLOPS figures).

Each store counts the floating-point arithmetic of its value (``+ - * /``, ``min``,
``max``, floor division/modulo and math calls count 1 each; index arithmetic,
comparisons, casts, constants and loads count 0) once per execution. A store executes
once per iteration of the loops around it, across block boundaries, restricted to the
iterations where the enclosing blocks' predicates (``T.where``) and ``if`` conditions hold
-- those are counted exactly over the loop variables they mention. Block ``init``
statements are not counted (they store a constant).

So the count is the same for a function and any schedule of it that does no redundant
work: mm_relu 128^3 has ``2 * 128^3 + 128^2`` flops whether ``j`` is split by 4, by a
non-dividing factor with a predicate, or blockized. Work a schedule repeats (overlapping
``compute_at`` regions) is counted as executed.

>>> import workbench as wb
>>> A = wb.placeholder((128, 128), "float32", name="A")
>>> B = wb.placeholder((128, 128), "float32", name="B")
>>> k = wb.reduce_axis(128, name="k")
>>> Y = wb.compute((128, 128), lambda i, j: wb.sum(A[i, k] * B[k, j], axis=k), name="Y")
>>> C = wb.compute((128, 128), lambda i, j: wb.max(Y[i, j], 0.0), name="C")
>>> flop_count(wb.create_prim_func([A, B, C], name="mm_relu")) == 2 * 128**3 + 128**2
True
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Call,
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Sub,
    Var,
    is_float,
)
from ..ir.functor import expr_vars, iter_exprs, substitute
from ..ir.stmt import (
    Block,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IRModule,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)

__all__ = ["flop_count", "expr_flops"]

_COUNTED = (Add, Sub, Mul, Div, Min, Max, FloorDiv, FloorMod, Call)
_NP_OPS = {
    Add: np.add,
    Sub: np.subtract,
    Mul: np.multiply,
    FloorDiv: np.floor_divide,
    FloorMod: np.mod,
    Min: np.minimum,
    Max: np.maximum,
    LT: np.less,
    LE: np.less_equal,
    GT: np.greater,
    GE: np.greater_equal,
    EQ: np.equal,
    NE: np.not_equal,
    And: np.logical_and,
    Or: np.logical_or,
}
#: Largest grid of loop points enumerated to count where a predicate holds.
MAX_ENUMERATED = 1 << 22


def expr_flops(e: PrimExpr) -> int:
    """Floating-point operations in one evaluation of ``e``.

    >>> import workbench as wb
    >>> x = wb.Var("x", "float32")
    >>> expr_flops(wb.exp(x * x + 1.0))
    3
    """
    return sum(1 for x in iter_exprs(e) if isinstance(x, _COUNTED) and is_float(x.dtype))


def _eval(e: PrimExpr, env: dict[Var, np.ndarray]):
    """Integer/boolean ``e`` over broadcasting grids; KeyError/TypeError if impossible."""
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Not):
        return np.logical_not(_eval(e.a, env))
    op = _NP_OPS.get(type(e))
    if op is None or is_float(e.dtype):
        raise TypeError(type(e).__name__)
    return op(_eval(e.a, env), _eval(e.b, env))  # type: ignore[attr-defined]


def _executions(loops: list[tuple[Var, int]], conds: list[PrimExpr]) -> int:
    """Iterations of ``loops`` where every condition holds (all of them if unknown)."""
    total = math.prod(ext for _, ext in loops)
    if not conds or total == 0:
        return total
    extent = dict(loops)
    used = sorted({v for c in conds for v in expr_vars(c)}, key=lambda v: v.name)
    if any(v not in extent for v in used):
        return total  # depends on something other than loop variables (a load ...)
    grid = math.prod(extent[v] for v in used)
    if grid > MAX_ENUMERATED:
        return total
    axes = np.meshgrid(*(np.arange(extent[v]) for v in used), indexing="ij", sparse=True)
    env = dict(zip(used, axes))
    try:
        ok = np.ones([extent[v] for v in used], dtype=bool)
        for c in conds:
            ok &= np.broadcast_to(np.asarray(_eval(c, env), dtype=bool), ok.shape)
    except (KeyError, TypeError):
        return total
    return int(ok.sum()) * (total // grid)


def _walk(s: Stmt, loops: list[tuple[Var, int]], conds: list[PrimExpr],
          mapping: dict[Var, PrimExpr]) -> int:
    if isinstance(s, BufferStore):
        n = expr_flops(s.value)
        return n * _executions(loops, conds) if n else 0
    if isinstance(s, For):
        if s.min:  # the grid runs over [0, extent): conditions see loop_var + min
            mapping = {**mapping, s.loop_var: s.loop_var + s.min}
        return _walk(s.body, loops + [(s.loop_var, s.extent)], conds, mapping)
    if isinstance(s, (LetStmt, Evaluate)):  # the value once per execution
        n = expr_flops(s.value)
        count = n * _executions(loops, conds) if n else 0
        if isinstance(s, Evaluate):
            return count
        inner = dict(mapping)
        inner[s.var] = substitute(s.value, mapping)
        return count + _walk(s.body, loops, conds, inner)
    if isinstance(s, SeqStmt):
        return sum(_walk(x, loops, conds, mapping) for x in s.stmts)
    if isinstance(s, IfThenElse):
        cond = substitute(s.condition, mapping)
        then = _walk(s.then_case, loops, conds + [cond], mapping)
        if s.else_case is None:
            return then
        return then + _walk(s.else_case, loops, conds + [Not(cond)], mapping)
    if isinstance(s, Block):
        inner = dict(mapping)
        for iv, value in zip(s.iter_vars, s.iter_values):
            inner[iv.var] = substitute(value, mapping)
        pred = substitute(s.predicate, inner)
        trivial = isinstance(pred, IntImm) and pred.value
        return _walk(s.body, loops, conds if trivial else conds + [pred], inner)
    return 0


def flop_count(func_or_mod: PrimFunc | IRModule, func_name: str | None = None,
               shapes: dict[str, int] | None = None) -> int:
    """Floating-point operations of one call of a function (or of a module's function:
    ``func_name``, else its only function, else ``"main"``).

    A function with symbolic shapes is counted at ``shapes`` (shape variable name ->
    value); without them it raises ``ValueError``.

    >>> import workbench as wb
    >>> A = wb.placeholder((10, 20), "float32", name="A")
    >>> B = wb.compute((10, 20), lambda i, j: wb.sqrt(A[i, j]) * 2.0, name="B")
    >>> flop_count(wb.create_prim_func([A, B]))
    400
    """
    if isinstance(func_or_mod, IRModule):
        if func_name is None:
            if len(func_or_mod) == 1:
                func_name = func_or_mod.names[0]
            elif "main" in func_or_mod:
                func_name = "main"
            else:
                raise ValueError(
                    f"module has several functions {func_or_mod.names}; pass func_name"
                )
        func_or_mod = func_or_mod[func_name]
    if not isinstance(func_or_mod, PrimFunc):
        raise TypeError(f"expected a PrimFunc or IRModule, got {type(func_or_mod).__name__}")
    func = func_or_mod
    if func.shape_vars:
        missing = sorted(v.name for v in func.shape_vars if v.name not in (shapes or {}))
        if missing:
            raise ValueError(
                f"flop_count: {func.name!r} has symbolic shapes; pass shapes= with {missing}"
            )
        func = func.specialize({v.name: shapes[v.name] for v in func.shape_vars})
    return _walk(func.body, [], [], {})
