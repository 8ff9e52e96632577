"""``reindex_cache_read`` / ``reindex_cache_write``: a cache laid out by an index map of
the block's iter vars.

Like ``cache_read`` / ``cache_write`` for one block, except that the cache is indexed
by ``index_map`` applied to the block's iter vars (not by the buffer's own indices),
and the copy block repeats the block's own iteration (its iter vars that the access
uses, and the loops they are bound to below the copy's position).

``reindex_cache_read(block "C", 0, "shared", lambda i, j: (j, i // 2, i % 2))`` on
``C[vi, vj] = B[vi, vj] + 1``::

                                         B_shared = T.alloc_buffer((128, 64, 2), scope="shared")
    for i, j in T.grid(128, 128):        for i, j in T.grid(128, 128):
        ...B[vi, vj] = A[vi, vj] * 2         ...B[vi, vj] = A[vi, vj] * 2
                                         for i, j in T.grid(128, 128):
                                             with T.block("B_shared"):
                                                 vi, vj = T.axis.remap("SS", [i, j])
                                                 B_shared[vj, vi // 2, vi % 2] = B[vi, vj]
    for i, j in T.grid(128, 128):        for i, j in T.grid(128, 128):
        with T.block("C"):                   with T.block("C"):
            C[vi, vj] = B[vi, vj] + 1            C[vi, vj] = B_shared[vj, vi // 2, vi % 2] + 1

Placement follows ``cache_read`` (after the buffer's producer, right before the block;
first in the scope for an input) and ``cache_write`` (right after the block, before the
first later reader; last in the scope when there is none). Only ``block`` is rewritten:
other readers keep the original buffer. The cache is ``<buffer>_<scope>`` of shape
``index_map.map_shape(iter var extents)``.

Invariants (TVM's checks): the storage scope is known; the scope is a stage pipeline
with at most one writer of the buffer; the block accesses one point of the buffer; the
iter vars the access uses are exactly those the index map's results use.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IntImm,
    IterVar,
    MatchBufferRegion,
    PrimExpr,
    PrimFunc,
    Stmt,
    Var,
)
from ...ir.expr import const
from ...ir.functor import Mutator, iter_exprs, substitute
from ...ir.index_map import IndexMap, IndexMapError
from ...ir.simplify import simplify
from ..errors import InvalidScheduleArgumentError, ScheduleError
from ._common import find_block_path, fresh_name, is_root, replace_path, scope_blocks
from ._pipeline import check_stage_pipeline
from .cache import (
    InPlaceUpdateError,
    _fresh_buffer_name,
    _initialised_inside,
    _insert,
    _path_below,
    _place,
    _single_writer,
    check_scope,
    resolve_buffer_index,
)
from .reindex import _taken_blocks, check_unconditional_read

__all__ = [
    "NotSinglePointAccessError",
    "ReindexCacheMismatchError",
    "ReindexCachePredicateError",
    "reindex_cache_read",
    "reindex_cache_write",
]


class NotSinglePointAccessError(ScheduleError):
    """The block accesses more than one element of the buffer (a region), so there is
    no single cache index per iteration."""


class ReindexCachePredicateError(ScheduleError):
    """The block's predicate mixes the loops the copy repeats with others, so the copy
    cannot visit exactly the points the block accesses."""


class ReindexCacheMismatchError(ScheduleError, ValueError):
    """An iter var appears in the block's access of the buffer but not in the index
    map's results, or the other way round."""


def _vars(exprs) -> set[Var]:
    return {x for e in exprs for x in iter_exprs(e) if isinstance(x, Var)}


class _Rewrite(Mutator):
    """In one block, loads (and for a write, stores) of ``old`` go to ``new[indices]``."""

    def __init__(self, old: Buffer, new: Buffer, indices: tuple[PrimExpr, ...], stores: bool):
        self.old, self.new, self.indices, self.stores = old, new, indices, stores

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, BufferLoad) and e.buffer is self.old:
            return BufferLoad(self.new, self.indices)
        return super().visit_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        if self.stores and isinstance(s, BufferStore) and s.buffer is self.old:
            return BufferStore(self.new, self.visit_expr(s.value), self.indices)
        return super().visit_stmt(s)


def _copy_predicate(func: PrimFunc, prim: str, block: Block, below: list[Stmt],
                    loop_map: dict[Var, Var]) -> PrimExpr:
    """The block's predicate (``T.where``, e.g. from a split that does not divide) over
    the copy's loops: the copy visits the points the block does. Conjuncts of loops the
    copy does not repeat are dropped (they do not decide which element is accessed); one
    mixing both kinds is refused."""
    from .blockize import and_all, conjuncts

    skipped = {s.loop_var for s in below if isinstance(s, For)} - set(loop_map)
    kept = []
    for c in conjuncts(block.predicate):
        used = _vars([c])
        if not used & skipped:
            kept.append(simplify(substitute(c, loop_map)))
        elif used & set(loop_map):
            raise ReindexCachePredicateError(
                prim,
                f'the predicate {c} of block "{block.name}" ties the loops of the copied '
                "iter vars to others; the copy cannot repeat it",
                func,
                blocks=[block.name],
            )
    return and_all(kept)


def _reindex_cache(
    func: PrimFunc, prim: str, block_name: str, index: int, storage_scope: str,
    index_map: IndexMap,
) -> tuple[PrimFunc, str]:
    is_read = prim == "reindex_cache_read"
    kind = "read" if is_read else "write"
    check_scope(func, prim, storage_scope, block_name)
    path = find_block_path(func, prim, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    index = resolve_buffer_index(func, prim, block_name, index, kind)
    region = (block.reads if is_read else block.writes)[index]  # type: ignore[index]
    buf = region.buffer
    scope_pos = max(i for i, s in enumerate(path[:-1]) if isinstance(s, Block))
    scope: Block = path[scope_pos]  # type: ignore[assignment]
    check_stage_pipeline(func, scope, prim, f'block "{block_name}"', blocks=[block_name])
    if is_read:
        check_unconditional_read(func, prim, block, buf)
    writer = _single_writer(func, prim, scope, buf, block_name)
    if not is_read and block.init is None and any(r.buffer is buf for r in block.reads or ()) \
            and not _initialised_inside(block, buf):
        raise InPlaceUpdateError(
            prim,
            f'block "{block_name}" updates "{buf.name}" in place and the value it starts from '
            "is written outside this block; a fresh cache would start uninitialised",
            func,
            blocks=[block_name],
        )
    if not all(isinstance(ext, IntImm) and ext.value == 1 for _, ext in region.region):
        shown = ", ".join(f"{mn}:{mn + ext}" for mn, ext in region.region)
        raise NotSinglePointAccessError(
            prim,
            f'block "{block_name}" {kind}s the region {buf.name}[{shown}], not a single point; '
            f"{prim} needs one element of the buffer per iteration",
            func,
            blocks=[block_name],
        )
    # the cache's indices and shape, from the block's iter vars
    ivs = block.iter_vars
    if index_map.ndim != len(ivs):
        raise InvalidScheduleArgumentError(
            prim,
            f'the index map {index_map} takes {index_map.ndim} indices but block "{block_name}" '
            f"has {len(ivs)} iter vars",
            func,
            blocks=[block_name],
        )
    try:
        new_indices = tuple(index_map.map_indices([iv.var for iv in ivs]))
        new_shape = index_map.map_shape([iv.extent for iv in ivs])
    except IndexMapError as e:
        raise InvalidScheduleArgumentError(
            prim, f'bad index map for block "{block_name}": {e}', func, blocks=[block_name]
        ) from None
    old_indices = tuple(mn for mn, _ in region.region)
    in_old, in_new = _vars(old_indices), _vars(new_indices)
    for iv in ivs:
        if (iv.var in in_old) != (iv.var in in_new):
            has, lacks = ((list(old_indices), list(new_indices)) if iv.var in in_old
                          else (list(new_indices), list(old_indices)))
            raise ReindexCacheMismatchError(
                prim,
                f'iter var {iv.var.name} of block "{block_name}" appears in '
                f"[{', '.join(map(str, has))}] but not in [{', '.join(map(str, lacks))}] "
                f"(the access of {buf.name} and the index map's results must use the same "
                "iter vars)",
                func,
                blocks=[block_name],
            )
    kept = [(iv, v) for iv, v in zip(ivs, block.iter_values, strict=True) if iv.var in in_old]
    # where the copy goes, and the loops between there and the block
    order = scope_blocks(scope)
    if is_read and (writer is None or order.index(block) < order.index(writer)):
        position = ([], 0)
    else:
        related = {block.name} if is_read else {
            b.name for b in order[order.index(block) + 1:] if any(
                r.buffer is buf for r in b.reads or ())}
        position, _ = _place(func, prim, scope, writer if is_read else block, related, buf)
    below = _path_below(scope, path)
    start = 0  # the copy goes in the scope's body, or in a statement list below it
    if position[0]:
        start = next(i + 1 for i, s in enumerate(below) if s is position[0][-1])
    used = _vars(v for _, v in kept)
    loops = [s for s in below[start:-1] if isinstance(s, For) and s.loop_var in used]
    # the copy block: the kept iter vars (all spatial), under copies of those loops
    loop_map = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    var_map = {iv.var: Var(iv.var.name, iv.var.dtype) for iv, _ in kept}
    ivars = tuple(IterVar(var_map[iv.var], iv.extent, "S") for iv, _ in kept)
    values = tuple(simplify(substitute(v, loop_map)) for _, v in kept)
    cache = Buffer(_fresh_buffer_name(func, f"{buf.name}_{storage_scope}"), tuple(new_shape),
                   buf.dtype, storage_scope, index_dtype=buf.index_dtype)
    stage_name = fresh_name(f"{buf.name}_{storage_scope}", set(_taken_blocks(func)))
    old_idx = tuple(substitute(i, var_map) for i in old_indices)
    new_idx = tuple(substitute(i, var_map) for i in new_indices)
    src, src_idx, dst, dst_idx = ((buf, old_idx, cache, new_idx) if is_read
                                  else (cache, new_idx, buf, old_idx))
    one = const(1)
    stage: Stmt = Block(
        stage_name, ivars, values, BufferStore(dst, BufferLoad(src, src_idx), dst_idx),
        predicate=_copy_predicate(func, prim, block, below[start:-1], loop_map),
        reads=(BufferRegion(src, tuple((i, one) for i in src_idx)),),
        writes=(BufferRegion(dst, tuple((i, one) for i in dst_idx)),),
    )
    for lp in reversed(loops):
        stage = For(loop_map[lp.loop_var], lp.extent, "serial", stage, min=lp.min)
    # the block: its accesses of the buffer go to the cache
    point = BufferRegion(cache, tuple((i, one) for i in new_indices))
    rw = _Rewrite(buf, cache, new_indices, stores=not is_read)
    swap = tuple(point if r.buffer is buf else r for r in (block.reads or ()))
    new_block = replace(
        block,
        body=rw.visit_stmt(block.body),
        init=rw.visit_stmt(block.init) if block.init is not None else None,
        reads=swap,
        writes=block.writes if is_read else tuple(
            point if w.buffer is buf else w for w in block.writes or ()),
        match_buffers=tuple(
            MatchBufferRegion(m.buffer, point, m.offset_factor) if m.source.buffer is buf else m
            for m in block.match_buffers),
    )
    # insert the copy and allocate the cache in the scope, then swap in the block
    body = _insert(scope.body, *position, stage)
    allocs = scope.alloc_buffers + (cache,)
    if is_root(scope):
        new_scope = replace(scope, body=body, alloc_buffers=allocs, reads=(), writes=())
    else:
        new_scope = replace(scope, body=body, alloc_buffers=allocs, reads=None, writes=None)
    func = replace_path(func, path[: scope_pos + 1], new_scope)
    return replace_path(func, find_block_path(func, prim, block_name), new_block), stage_name


def reindex_cache_read(
    func: PrimFunc, block_name: str, read_buffer_index: int, storage_scope: str,
    index_map: IndexMap,
) -> tuple[PrimFunc, str]:
    """Cache ``block``'s ``read_buffer_index``-th read buffer in ``storage_scope``, at the
    indices ``index_map`` gives for the block's iter vars (module docstring). Returns
    (new function, copy block name).

    >>> import workbench as wb
    >>> f = wb.workloads.matmul(8, 8, 8)
    >>> g, name = reindex_cache_read(f, "C", 0, "shared",
    ...                              wb.IndexMap.parse("lambda i, j, k: (k, i)"))
    >>> print(g.body.alloc_buffers[0], name)
    Buffer('A_shared', (8, 8), 'float32', scope='shared') A_shared
    """
    return _reindex_cache(func, "reindex_cache_read", block_name, read_buffer_index,
                          storage_scope, index_map)


def reindex_cache_write(
    func: PrimFunc, block_name: str, write_buffer_index: int, storage_scope: str,
    index_map: IndexMap,
) -> tuple[PrimFunc, str]:
    """Make ``block`` write its ``write_buffer_index``-th write buffer into a
    ``storage_scope`` cache at the indices ``index_map`` gives for its iter vars, copied
    back right after it (module docstring). Returns (new function, copy block name)."""
    return _reindex_cache(func, "reindex_cache_write", block_name, write_buffer_index,
                          storage_scope, index_map)
