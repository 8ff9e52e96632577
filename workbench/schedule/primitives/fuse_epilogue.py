"""Fusing an elementwise epilogue into the reduction it follows: fuse_reduction_epilogue.

``fuse_reduction_epilogue(reduction, epilogue)`` takes a reduction block writing an
intermediate ``temp`` and an epilogue block ``D[...] = f(temp[...], ...)`` reading it,
and makes the reduction write ``D`` directly, as TVM 0.27 does:

* the init becomes ``f`` with ``temp`` replaced by 0, simplified (``0 + C[vi, vj]`` is
  the bias ``C[vi, vj]``, ``max(0 + C, 0)`` is ``max(C, 0)``);
* each update ``temp = temp + x`` becomes ``f`` with ``temp`` replaced by ``D + x``,
  where an addition whose one side holds the reduction result and whose other side is
  not the reduction buffer drops that other side (the bias is already in the init);
* the epilogue block goes; ``temp`` stays allocated (TVM keeps it).

Before::

    for i, j, k in T.grid(16, 16, 16):
        with T.block("multiply"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                temp[vi, vj] = 0
            temp[vi, vj] = temp[vi, vj] + A[vi, vk] * B[vj, vk]
    for i, j in T.grid(16, 16):
        with T.block("add"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = temp[vi, vj] + C[vi, vj]

after ``fuse_reduction_epilogue("multiply", "add")``::

    for i, j, k in T.grid(16, 16, 16):
        with T.block("multiply"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                D[vi, vj] = C[vi, vj]
            D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vj, vk]

What this computes, as in TVM: a bias epilogue (``temp + C``) gives exactly the
unfused result. A clip or ReLU around it (``max(temp + C, 0)``, ``min(max(temp, lo),
hi)``) is applied at the init and after *every* update: the result is the
per-iteration clipped reduction, not the clip of the finished sum (TVM's tests compare
it with such a per-iteration reference); such a fusion warns with
:class:`NonLinearEpilogueWarning`, so the change of results never goes unnoticed.

Refused where TVM is not: another block that still reads ``temp`` (TVM fuses anyway and
leaves that block reading a buffer nothing writes any more).

Refused: an epilogue scope that is not a stage pipeline, a reduction block that writes
more than one buffer or is not a reduction block, an epilogue that is not a complete
block, a reduction that writes an output buffer of its scope, and an epilogue body that
is not one store reading the reduction result exactly once, unscaled (no ``*`` or ``/``
over it), without a predicate (TVM's body analysis). Beyond TVM, an epilogue that reads
the result at other indices than it writes, or whose spatial iter vars do not match the
reduction's, is refused (TVM would fuse it into wrong code).
"""

from __future__ import annotations

import warnings

from ...ir import (
    Add,
    Block,
    BufferLoad,
    BufferStore,
    Div,
    Max,
    Min,
    Mul,
    PrimExpr,
    PrimFunc,
    Var,
)
from ...ir.analysis import expr_key
from ...ir.expr import const
from ...ir.functor import Mutator, iter_exprs, substitute
from ...ir.simplify import simplify
from ..errors import ScheduleError
from ._common import (
    consumers_of,
    find_block_path,
    remove_stmt,
    replace_path,
    scope_blocks,
    scope_of,
)
from ._pipeline import stage_pipeline_problem
from .compute_at import NotCompleteBlockError
from .compute_inline import OutputBlockError
from .reduction import NotStagePipelineError, check_reduction_block


class ReductionNotSingleWriteError(ScheduleError):
    """``fuse_reduction_epilogue``: the reduction block writes more than one buffer."""


class EpilogueBodyError(ScheduleError):
    """``fuse_reduction_epilogue``: the epilogue is not one store that reads the
    reduction result exactly once, unscaled and without a predicate."""


class EpilogueMismatchError(ScheduleError):
    """``fuse_reduction_epilogue``: the epilogue's spatial iter vars or the indices at
    which it reads the result and writes its output do not line up with the reduction's
    (TVM would fuse it into wrong code)."""


class TempStillReadError(ScheduleError):
    """``fuse_reduction_epilogue``: a block other than the epilogue reads the
    reduction's result; after fusion nothing would write it."""


class NonLinearEpilogueWarning(UserWarning):
    """``fuse_reduction_epilogue`` fused a clip or ReLU epilogue: it is now applied
    after every update of the reduction, not once to the finished result (TVM's
    semantics), so results can differ from the unfused function."""


def _loads_of(e: PrimExpr, buf) -> list[BufferLoad]:
    return [x for x in iter_exprs(e) if isinstance(x, BufferLoad) and x.buffer is buf]


def _scaled(e: PrimExpr, buf) -> bool:
    """Is the result multiplied or divided (TVM's ScalingDetector)?"""
    return any(isinstance(x, (Mul, Div)) and (_loads_of(x.a, buf) or _loads_of(x.b, buf))
               for x in iter_exprs(e))


class _Zero(Mutator):
    def __init__(self, buf, zero: PrimExpr):
        self.buf, self.zero = buf, zero

    def visit_expr(self, e):
        e = super().visit_expr(e)
        return self.zero if isinstance(e, BufferLoad) and e.buffer is self.buf else e


class _Apply(Mutator):
    """The epilogue with the result replaced by the reduction update; an addition
    holding the result drops its other side (the bias, already in the init). The
    bookkeeping follows TVM's: an addition reports having held the result to an
    enclosing one only when the result was on its right."""

    def __init__(self, buf, update: PrimExpr):
        self.buf, self.update, self.found = buf, update, False

    def visit_expr(self, e):
        if isinstance(e, BufferLoad):
            e = super().visit_expr(e)
            if e.buffer is self.buf:
                self.found = True
                return self.update
            return e
        if isinstance(e, Add):
            before, self.found = self.found, False
            a = self.visit_expr(e.a)
            in_a, self.found = self.found, False
            b = self.visit_expr(e.b)
            in_b = self.found
            if in_a or in_b:
                other = b if in_a else a
                if not (isinstance(other, BufferLoad) and other.buffer is self.buf):
                    return a if in_a else b
                return Add(a, b)
            self.found = before
            return e if a is e.a and b is e.b else Add(a, b)
        return super().visit_expr(e)


class _Update(Mutator):
    """The reduction body writing the epilogue's output instead of ``temp``."""

    def __init__(self, temp, out, epilogue: PrimExpr, var_map: dict):
        self.temp, self.out, self.epilogue, self.var_map = temp, out, epilogue, var_map

    def visit_expr(self, e):
        e = super().visit_expr(e)
        if isinstance(e, BufferLoad) and e.buffer is self.temp:
            return BufferLoad(self.out, e.indices)
        return e

    def visit_stmt(self, s):
        s = super().visit_stmt(s)
        if isinstance(s, BufferStore) and s.buffer is self.temp:
            value = _Apply(self.temp, s.value).visit_expr(self.epilogue)
            return BufferStore(self.out, substitute(value, self.var_map), s.indices)
        return s


def fuse_reduction_epilogue(func: PrimFunc, reduction: str, epilogue: str) -> PrimFunc:
    """Fuse the epilogue block ``epilogue`` into the reduction block ``reduction`` (see
    the module docstring).

    >>> import workbench as wb
    >>> from workbench.testing import matmul_bias_func
    >>> g = fuse_reduction_epilogue(matmul_bias_func(), "C", "D")
    >>> from workbench.ir.analysis import find_block
    >>> print(find_block(g, "C").init)
    D[vi, vj] = Bias[vi, vj]
    """
    p = "fuse_reduction_epilogue"
    rpath = find_block_path(func, p, reduction)
    epath = find_block_path(func, p, epilogue)
    red: Block = rpath[-1]  # type: ignore[assignment]
    epi: Block = epath[-1]  # type: ignore[assignment]
    scope = scope_of(epath)
    problem = stage_pipeline_problem(func, scope, p)
    if problem:
        raise NotStagePipelineError(
            p, f'the scope of block "{epilogue}" is not a stage pipeline: {problem}', func,
            blocks=[epilogue])
    writes = red.writes or ()
    if len(writes) != 1:
        raise ReductionNotSingleWriteError(
            p, f'block "{reduction}" writes {len(writes)} buffers; it must write exactly one',
            func, blocks=[reduction])
    temp = writes[0].buffer
    check_reduction_block(p, func, rpath)
    _check_complete(func, epi, scope)
    if temp not in scope_of(rpath).alloc_buffers:
        raise OutputBlockError(
            p, f'block "{reduction}" writes {temp.name}, which its scope does not allocate '
            "(an output block)", func, blocks=[reduction])
    store = _epilogue_store(func, epi, red, temp)
    others = [b.name for b in consumers_of(red, scope_blocks(scope)) if b is not epi]
    if others:
        raise TempStillReadError(
            p, f'block(s) {", ".join(others)} also read {temp.name}, the result of block '
            f'"{reduction}"; after fusing into block "{epilogue}" nothing would write it',
            func, blocks=[reduction, *others])
    # the epilogue's spatial iter vars are the reduction's, in order
    rs = [iv.var for iv in red.iter_vars if iv.kind == "S"]
    es = [iv.var for iv in epi.iter_vars if iv.kind == "S"]
    if len(rs) != len(es):
        raise EpilogueMismatchError(
            p, f'block "{epilogue}" has {len(es)} spatial iter vars and block "{reduction}" '
            f"{len(rs)}; they must match one for one", func, blocks=[reduction, epilogue])
    var_map: dict[Var, PrimExpr] = dict(zip(es, rs, strict=True))
    red_stores = [s for s in _stores(red.body) if s.buffer is temp]
    load = _loads_of(store.value, temp)[0]
    keys = {tuple(expr_key(i) for i in s.indices) for s in red_stores}
    for what, idx in (("reads", load.indices), ("writes", store.indices)):
        key = tuple(expr_key(substitute(i, var_map)) for i in idx)
        if keys != {key}:
            raise EpilogueMismatchError(
                p, f'block "{epilogue}" {what} at other indices than block "{reduction}" '
                f"writes {temp.name} ({', '.join(map(str, idx))}); fusing would mix up "
                "elements", func, blocks=[reduction, epilogue])
    out = store.buffer
    init_value = simplify(substitute(
        _Zero(temp, const(0, out.dtype)).visit_expr(store.value), var_map))
    init = BufferStore(out, init_value, tuple(substitute(i, var_map) for i in store.indices))
    body = _Update(temp, out, store.value, var_map).visit_stmt(red.body)
    if any(isinstance(x, (Max, Min)) and _loads_of(x, temp) for x in iter_exprs(store.value)):
        warnings.warn(
            f'fuse_reduction_epilogue: block "{epilogue}" clips the result of block '
            f'"{reduction}" ({store.value}); fused, the clip is applied after every update '
            "of the reduction, not once to the finished sum, so results can differ from "
            "the unfused function", NonLinearEpilogueWarning, stacklevel=3)
    fused = red.with_body(body, init)
    func = replace_path(func, rpath, fused)
    return remove_stmt(func, find_block_path(func, p, epilogue), p)


def _stores(s) -> list[BufferStore]:
    from ...ir.functor import iter_stmts

    return [x for x in iter_stmts(s) if isinstance(x, BufferStore)]


def _check_complete(func: PrimFunc, epi: Block, scope: Block) -> None:
    """TVM's complete block: spatial iter vars only, the only writer of its outputs in
    the scope, not reading what it writes."""
    p = "fuse_reduction_epilogue"
    why = None
    outs = {w.buffer for w in epi.writes or ()}
    if any(iv.kind != "S" for iv in epi.iter_vars):
        why = "it has a non-spatial iter var"
    elif any(r.buffer in outs for r in epi.reads or ()):
        why = "it reads what it writes"
    else:
        other = next((b for b in scope_blocks(scope) if b is not epi
                      and any(w.buffer in outs for w in b.writes or ())), None)
        if other is not None:
            why = f'block "{other.name}" writes its output too'
    if why:
        raise NotCompleteBlockError(
            p, f'block "{epi.name}" is not a complete block: {why}', func, blocks=[epi.name])


def _epilogue_store(func: PrimFunc, epi: Block, red: Block, temp) -> BufferStore:
    """The epilogue's store, if TVM's body analysis accepts it."""
    p = "fuse_reduction_epilogue"

    def refuse(why: str) -> EpilogueBodyError:
        return EpilogueBodyError(
            p, f'block "{epi.name}" cannot be fused into block "{red.name}": {why}', func,
            blocks=[red.name, epi.name])

    if not (isinstance(epi.predicate, PrimExpr) and expr_key(epi.predicate) ==
            expr_key(const(True))):
        raise refuse("it has a predicate")
    if not isinstance(epi.body, BufferStore):
        raise refuse("its body is not a single store")
    store = epi.body
    n = sum(len(_loads_of(i, temp)) for i in store.indices) + len(_loads_of(store.value, temp))
    if n != 1:
        raise refuse(f"it reads {temp.name} {n} times, not exactly once")
    if _scaled(store.value, temp):
        raise refuse(f"it scales {temp.name} (multiplies or divides it)")
    if not red.is_reduction:
        raise refuse(f'block "{red.name}" has no reduce iter var')
    return store
