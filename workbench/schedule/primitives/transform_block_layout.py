"""Block iteration-space transformation: ``transform_block_layout``.

``transform_block_layout(block, index_map)`` re-indexes a block's iteration space with
a bijective affine :class:`~workbench.ir.IndexMap`: the block gets one iter var ``v<k>``
per result of the map (extent from ``map_shape``), its body reads the old iter vars
through the inverse map, and new loops ``ax<k>`` replace the loops above it. Before::

    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)

after ``transform_block_layout("B", lambda i, j: (i * 16 + j,))``::

    for ax0 in range(256):
        with T.block("B"):
            v0 = T.axis.spatial(256, ax0)
            B[v0 // 16, v0 % 16] = A[v0 // 16, v0 % 16] * T.float32(2)

As in TVM: the loops above the block (up to its scope) must run only this block
(one child block) and bind its iter vars one-to-one in order (a *trivial binding*);
the map must take one index per iter var and be bijective and affine over the
iteration space; each new iter var mixes only spatial or only reduction iter vars.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, For, IndexMap, IterVar, PrimFunc, Stmt, Var
from ...ir.expr import IntImm, PrimExpr
from ...ir.functor import iter_exprs, iter_stmts, substitute
from ...ir.index_map import IndexMapError
from ...ir.simplify import simplify
from ..errors import NotSingleChildError, ScheduleError
from ._common import find_block_path, replace_path
from .transform_layout import IndexMapArityError

P = "transform_block_layout"


class NotTrivialBindingError(ScheduleError):
    """The block's iter vars are not bound one-to-one, in order, to the loops above it."""


class NotBijectiveAffineIndexMapError(ScheduleError):
    """The index map is not a bijective affine map of the block's iteration space."""


class OpaqueNewIterTypeError(ScheduleError):
    """A result of the index map mixes spatial and reduction iter vars (or uses none
    with an extent above one), so the new iter var has no kind."""


class BlockPredicateError(ScheduleError):
    """The block has a predicate (``T.where``) on the loops that would be replaced."""


def transform_block_layout(func: PrimFunc, block_name: str, index_map: IndexMap) -> PrimFunc:
    """Remap the iteration space of ``block_name`` with ``index_map`` (see the module
    docstring).

    >>> import workbench as wb
    >>> f = wb.workloads.matmul(8, 8, 8)
    >>> g = transform_block_layout(f, "C", wb.IndexMap.parse("lambda i, j, k: (i * 8 + j, k)"))
    >>> "for ax0, ax1 in T.grid(64, 8):" in g.script()
    True
    """
    path = find_block_path(func, P, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    k = len(path) - 2
    loops: list[For] = []
    while k >= 0 and not isinstance(path[k], Block):
        if isinstance(path[k], For):
            loops.insert(0, path[k])  # type: ignore[arg-type]
        k -= 1
    if loops:
        top = loops[0]
        inner = [b for b in iter_stmts(top, enter_blocks=False) if isinstance(b, Block)]
        if len(inner) != 1:
            raise NotSingleChildError(
                P, f'loop "{top.loop_var.name}" above block "{block_name}" holds '
                f"{len(inner)} blocks; it must hold only this one", func,
                loops=[top.loop_var], blocks=[block_name])
    trivial = len(loops) == len(block.iter_values) and all(
        v is lp.loop_var for v, lp in zip(block.iter_values, loops, strict=False))
    if not trivial:
        raise NotTrivialBindingError(
            P, f'the iter vars of block "{block_name}" are not bound one-to-one to the loops '
            "above it, in order", func, blocks=[block_name])
    if not (isinstance(block.predicate, IntImm) and block.predicate.value):
        raise BlockPredicateError(
            P, f'block "{block_name}" has the predicate {block.predicate}', func,
            blocks=[block_name])
    if index_map.ndim != len(block.iter_vars):
        raise IndexMapArityError(
            P, f"the index map {index_map} takes {index_map.ndim} indices but block "
            f'"{block_name}" has {len(block.iter_vars)} iter vars', func, blocks=[block_name])
    dtypes = {iv.var.dtype for iv in block.iter_vars}
    if len(dtypes) == 1:
        index_map = index_map.with_index_dtype(dtypes.pop())
    old_vars = [iv.var for iv in block.iter_vars]
    extents = [iv.extent for iv in block.iter_vars]
    kinds = {iv.var: iv.kind for iv in block.iter_vars}
    try:
        mapped = index_map.map_indices(old_vars)
        new_extents = index_map.map_shape(extents)
        try:
            inverse = index_map.inverse(extents)
        except IndexMapError:
            inverse = _selection_inverse(mapped, old_vars, extents)
            if inverse is None:
                raise
    except IndexMapError as e:
        raise NotBijectiveAffineIndexMapError(
            P, f'the index map {index_map} is not a bijective affine map of the iteration '
            f'space of block "{block_name}" ({e})', func, blocks=[block_name]) from None
    new_ivs = []
    for n, (expr, ext) in enumerate(zip(mapped, new_extents, strict=True)):
        if isinstance(ext, IntImm):  # a constant extent of a map over a symbolic shape
            ext = ext.value
        used = {kinds[x] for x in iter_exprs(expr) if isinstance(x, Var) and x in kinds}
        if isinstance(ext, int) and ext == 1:
            kind = "S"
        elif len(used) == 1:
            kind = used.pop()
        else:
            raise OpaqueNewIterTypeError(
                P, f"the new iter var {expr} of block \"{block_name}\" mixes spatial and "
                "reduction iter vars" if used else
                f'the new iter var {expr} of block "{block_name}" uses no iter var',
                func, blocks=[block_name])
        new_ivs.append(IterVar(Var(f"v{n}", expr.dtype), ext, kind))
    new_vars: list[PrimExpr] = [iv.var for iv in new_ivs]
    bounds = {iv.var: (0, iv.extent - 1) for iv in new_ivs}
    back = inverse.map_indices(new_vars, bounds)
    mapping = dict(zip(old_vars, back, strict=True))
    body = _simplified(substitute(block.body, mapping), bounds)
    init = _simplified(substitute(block.init, mapping), bounds) if block.init is not None else None
    loop_vars = [Var(f"ax{n}", iv.var.dtype) for n, iv in enumerate(new_ivs)]
    new_block = replace(block, iter_vars=tuple(new_ivs), iter_values=tuple(loop_vars), body=body,
                        init=init, reads=None, writes=None)
    stmt: Stmt = new_block
    for lv, iv in zip(reversed(loop_vars), reversed(new_ivs), strict=True):
        stmt = For(lv, iv.extent, "serial", stmt)
    if not loops:
        return replace_path(func, path, stmt)
    top_at = path.index(loops[0])
    return replace_path(func, path[: top_at + 1], stmt)


def _selection_inverse(mapped: list[PrimExpr], old_vars: list[Var], extents) -> IndexMap | None:
    """The inverse of a map that keeps some iter vars as they are, in any order, and drops
    (or adds, as a constant 0) unit ones: what normalizing a block does. It holds for
    symbolic extents too, where the general inverse needs constant ones. None for any
    other map."""
    pos: dict[Var, int] = {}
    for k, e in enumerate(mapped):
        if isinstance(e, Var) and e in old_vars and e not in pos:
            pos[e] = k
        elif not (isinstance(e, IntImm) and e.value == 0):
            return None
    for v, ext in zip(old_vars, extents, strict=True):
        if v not in pos and not (ext == 1 or isinstance(ext, IntImm) and ext.value == 1):
            return None
    new = [Var(f"i{k}", e.dtype) for k, e in enumerate(mapped)]
    return IndexMap(new, [new[pos[v]] if v in pos else IntImm(0, v.dtype) for v in old_vars])


def _simplified(s: Stmt, bounds: dict) -> Stmt:
    from ...ir.functor import Mutator

    class _Simplify(Mutator):
        def visit_expr(self, e):
            from ...ir.expr import BufferLoad

            if isinstance(e, BufferLoad):
                idx = tuple(simplify(self.visit_expr(i), bounds) for i in e.indices)
                return BufferLoad(e.buffer, idx)
            return super().visit_expr(e)

        def visit_stmt(self, st):
            from ...ir import BufferStore

            if isinstance(st, BufferStore):
                return BufferStore(st.buffer, self.visit_expr(st.value),
                                   tuple(simplify(self.visit_expr(i), bounds)
                                         for i in st.indices))
            return super().visit_stmt(st)

    return _Simplify().visit_stmt(s)


__all__ = [
    "BlockPredicateError",
    "NotBijectiveAffineIndexMapError",
    "NotTrivialBindingError",
    "OpaqueNewIterTypeError",
    "transform_block_layout",
]
