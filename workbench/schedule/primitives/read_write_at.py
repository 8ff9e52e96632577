"""``read_at`` / ``write_at``: copy the part of a buffer a loop uses, at that loop.

``read_at(loop, block, i, scope)`` takes the ``i``-th buffer ``block`` reads and, inside
``loop``, copies what the blocks under the loop read of it (relaxed over one iteration
of ``loop``) into a buffer of ``scope`` right before the first statement of the loop's
body that reads it; from there on the loop's body reads the copy. ``write_at`` is the
mirror image: what the blocks under the loop write goes to the copy, stored back right
after the last statement that writes it. The copy is one block (annotated
``auto_copy``) whose iter vars are the outer loops the region depends on, with plain
loops over the region inside it.

``read_at(k0, block "C", 1, "shared")`` on a GPU matmul (each ``k0`` step reads a 64 x 8
tile of ``A`` per thread block)::

    for k0 in range(256):                  for k0 in range(256):
                                               with T.block("A_shared"):
                                                   v0 = T.axis.spatial(32, by)
                                                   v1 = T.axis.spatial(256, k0)
                                                   T.block_attr({"auto_copy": True})
                                                   for ax0, ax1 in T.grid(64, 8):
                                                       A_shared[v0 * 64 + ax0, v1 * 8 + ax1] = (
                                                           A[v0 * 64 + ax0, v1 * 8 + ax1])
        for k1 in T.unroll(8):                 for k1 in T.unroll(8):
            ... A[vi, vk] ...                      ... A_shared[vi, vk] ...

The region is relaxed over the loops between ``loop`` and each block and, for a
``shared`` (``warp``...) copy, over the thread loops whose threads share it (TVM's
``LoopDomainOfSRefTreePath`` with the storage scope). The new buffer is
``<buffer>_<scope>``, full size, allocated in the loop's scope block.

Invariants (TVM's checks): the loop's scope is a stage pipeline; some block under the
loop reads (``write_at``: writes) the buffer; for ``read_at`` nothing under the loop
writes it from the first reading statement on, for ``write_at`` nothing reads it after
the last writing statement.
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
    IfThenElse,
    IterVar,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from ...ir.buffer import shares_storage
from ...ir.expr import IntImm, const, extent_expr
from ...ir.functor import iter_exprs, substitute
from ...ir.intset import EMPTY, eval_interval, interval_union
from ...ir.simplify import simplify
from ..errors import ScheduleError
from ._common import (
    find_block_path,
    find_loop_path,
    fresh_name,
    in_bounds_guard,
    is_root,
    replace_path,
)
from ._pipeline import check_stage_pipeline
from .cache import BufferSwap, _fresh_buffer_name, check_scope, resolve_buffer_index
from .reindex import _taken_blocks, check_unconditional_read

__all__ = [
    "BufferNotAccessedUnderLoopError",
    "ReadAfterLastWriteError",
    "ReadBeforeWriteError",
    "WriteAfterFirstReadError",
    "read_at",
    "write_at",
]


class BufferNotAccessedUnderLoopError(ScheduleError):
    """No block under the loop reads (``read_at``) or writes (``write_at``) the buffer."""


class WriteAfterFirstReadError(ScheduleError):
    """``read_at``: the buffer is written under the loop at or after the first statement
    that reads it, so a copy taken before that statement would be stale."""


class ReadAfterLastWriteError(ScheduleError):
    """``write_at``: the buffer is read under the loop after the last statement that
    writes it, so that read would miss the values stored back only after it."""


class ReadBeforeWriteError(ScheduleError):
    """``write_at``: a block under the loop reads the buffer before (or while) it is
    written there, e.g. an accumulation ``C = C + ...`` whose initial value is stored
    outside the loop. The copy starts empty, so that read would see uninitialised memory
    (TVM makes that program; we refuse it)."""


def _dom(loops) -> dict[Var, tuple[PrimExpr, PrimExpr]]:
    return {
        lp.loop_var: (const(lp.min, lp.loop_var.dtype),
                      simplify(extent_expr(lp.extent, lp.loop_var.dtype) + (lp.min - 1)))
        for lp in loops
    }


def _blocks_under(stmt: Stmt, path: list[Stmt]):
    """(block, loops between ``stmt`` and it) for each outermost block under ``stmt``."""
    if isinstance(stmt, Block):
        yield stmt, path
    elif isinstance(stmt, For):
        yield from _blocks_under(stmt.body, path + [stmt])
    elif isinstance(stmt, SeqStmt):
        for s in stmt.stmts:
            yield from _blocks_under(s, path)
    else:
        for child in ("then_case", "else_case", "body"):
            sub = getattr(stmt, child, None)
            if isinstance(sub, Stmt):
                yield from _blocks_under(sub, path)


class _Swap(BufferSwap):
    """BufferSwap that keeps the blocks' stated regions (the buffer renamed in them)."""

    def visit_block(self, b: Block) -> Block:
        new = super().visit_block(b)
        if new is b:
            return b
        return replace(
            new,
            reads=tuple(BufferRegion(self.visit_buffer(r.buffer), r.region) for r in b.reads),
            writes=tuple(BufferRegion(self.visit_buffer(r.buffer), r.region) for r in b.writes),
        )


def _read_write_at(
    func: PrimFunc, prim: str, loop_var: Var, block_name: str, index: int, scope: str
) -> tuple[PrimFunc, str]:
    is_read = prim == "read_at"
    kind = "read" if is_read else "write"
    lpath = find_loop_path(func, prim, loop_var)
    loop: For = lpath[-1]  # type: ignore[assignment]
    block: Block = find_block_path(func, prim, block_name)[-1]  # type: ignore[assignment]
    index = resolve_buffer_index(func, prim, block_name, index, kind)
    check_scope(func, prim, scope, block_name)
    src = (block.reads if is_read else block.writes)[index].buffer  # type: ignore[index]
    scope_pos = max(i for i, s in enumerate(lpath) if isinstance(s, Block))
    scope_block: Block = lpath[scope_pos]  # type: ignore[assignment]
    where = f'loop "{loop_var.name}"'
    check_stage_pipeline(func, scope_block, prim, where, blocks=[scope_block.name],
                         loops=[loop_var])
    if is_read:
        check_unconditional_read(func, prim, block, src)
    dst = Buffer(_fresh_buffer_name(func, f"{src.name}_{scope}"), src.shape, src.dtype, scope,
                 index_dtype=src.index_dtype)
    # thread loops at or above the loop whose threads share the copy are relaxed too
    threads = [s for s in lpath if isinstance(s, For) and s.kind == "thread_binding"
               and scope != "global" and shares_storage(scope, s.thread_tag or "")]
    subtrees = list(loop.body.stmts) if isinstance(loop.body, SeqStmt) else [loop.body]
    r_pos, w_pos, boxes = [], [], []
    for i, sub in enumerate(subtrees):
        for blk, loops in _blocks_under(sub, []):
            has_r = any(r.buffer is src for r in blk.reads or ())
            has_w = any(w.buffer is src for w in blk.writes or ())
            if has_r and i not in r_pos:
                r_pos.append(i)
            if has_w and i not in w_pos:
                w_pos.append(i)
            if has_r if is_read else has_w:
                boxes.append(_relax(blk, src, is_read, _dom(loops + threads)))
            if not is_read and has_r and blk.init is None and (has_w or not w_pos):
                raise ReadBeforeWriteError(
                    prim,
                    f'block "{blk.name}" reads buffer "{src.name}" under loop '
                    f'"{loop_var.name}" before the values stored there are written '
                    f'(an update of a value stored outside the loop); "{src.name}_{scope}" '
                    "would start uninitialised. Use cache_write, which copies the update "
                    "back, or decompose_reduction under the loop first",
                    func,
                    loops=[loop_var],
                    blocks=[blk.name],
                )
    uses = r_pos if is_read else w_pos
    if not uses:
        raise BufferNotAccessedUnderLoopError(
            prim,
            f'no block under {where} {kind}s buffer "{src.name}" (the {kind} buffer {index} of '
            f'block "{block_name}")',
            func,
            loops=[loop_var],
            blocks=[block_name],
        )
    if is_read and w_pos and w_pos[-1] >= r_pos[0]:
        raise WriteAfterFirstReadError(
            prim,
            f'buffer "{src.name}" is written under {where} at or after the first statement '
            "that reads it; a copy made before that statement would miss the write",
            func,
            loops=[loop_var],
            blocks=[block_name],
        )
    if not is_read and r_pos and r_pos[-1] > w_pos[-1]:
        raise ReadAfterLastWriteError(
            prim,
            f'buffer "{src.name}" is read under {where} after the last statement that writes '
            "it; that read would miss the values stored back after it",
            func,
            loops=[loop_var],
            blocks=[block_name],
        )
    domain = _union(boxes, src)
    insert = r_pos[0] if is_read else w_pos[-1] + 1
    span = range(insert, len(subtrees)) if is_read else range(0, insert)
    stage_name = fresh_name(f"{src.name}_{scope}", set(_taken_blocks(func)))
    outer = [s for s in lpath if isinstance(s, For)][::-1]
    stage = _copy_block(stage_name, src, dst, is_read, domain, outer, lpath[scope_pos + 1:])
    swap = _Swap({src: dst})
    subtrees = [swap.visit_stmt(s) if i in span else s for i, s in enumerate(subtrees)]
    subtrees.insert(insert, stage)
    new_loop = loop.with_body(SeqStmt(tuple(subtrees)))
    func = replace_path(func, lpath, new_loop)
    spath = find_block_path(func, prim, scope_block.name)
    new_scope: Block = spath[-1]  # type: ignore[assignment]
    allocs = new_scope.alloc_buffers + (dst,)
    if is_root(new_scope):
        new_scope = replace(new_scope, alloc_buffers=allocs, reads=(), writes=())
    else:
        new_scope = replace(new_scope, alloc_buffers=allocs, reads=None, writes=None)
    return replace_path(func, spath, new_scope), stage_name


def _relax(block: Block, buf: Buffer, reads: bool, dom) -> list:
    """Per dimension the interval ``block``'s region of ``buf`` covers as the loops of
    ``dom`` run (None: unknown)."""
    bindings = {iv.var: v for iv, v in zip(block.iter_vars, block.iter_values, strict=True)}
    box: list = [EMPTY] * buf.ndim
    for r in (block.reads if reads else block.writes) or ():
        if r.buffer is not buf:
            continue
        for d, (mn, ext) in enumerate(r.region):
            lo = eval_interval(simplify(substitute(mn, bindings)), dom)
            hi = eval_interval(simplify(substitute(mn + ext - 1, bindings)), dom)
            piece = None if lo in (None, EMPTY) or hi in (None, EMPTY) else (lo[0], hi[1])
            box[d] = interval_union(box[d], piece)
    return box


def _union(boxes: list, buf: Buffer) -> list[tuple[PrimExpr, PrimExpr]]:
    """(min, extent) per dimension of the union of ``boxes`` (the whole dimension where
    a box has no interval), a constant interval clipped to the buffer's shape."""
    out = []
    for d, dim in enumerate(buf.shape):
        iv = EMPTY
        for box in boxes:
            iv = interval_union(iv, box[d])
        if iv is None or iv is EMPTY:
            out.append((const(0, buf.index_dtype), extent_expr(dim, buf.index_dtype)))
            continue
        lo, hi = simplify(iv[0]), simplify(iv[1])
        if isinstance(lo, IntImm) and isinstance(hi, IntImm) and isinstance(dim, int):
            # a constant box is clipped to the buffer (a padded split covers more rows)
            start, stop = max(lo.value, 0), min(hi.value + 1, dim)
            if stop > start:
                out.append((const(start, lo.dtype), const(stop - start, lo.dtype)))
                continue
        out.append((lo, simplify(hi + 1 - lo)))
    return out


def _inclusive(lo: int, extent, dtype: str) -> tuple:
    """``[lo, lo + extent)`` as inclusive bounds (the upper an int where it is known)."""
    hi = simplify(extent_expr(extent, dtype) + (lo - 1))
    return lo, hi.value if isinstance(hi, IntImm) else hi


def _in_buffer(idx: tuple[PrimExpr, ...], buf: Buffer, bounds) -> PrimExpr:
    """The condition keeping ``buf[idx]`` inside ``buf`` for the loops of ``bounds``
    (a region relaxed over a padded split, ``ceil(n / f) * f`` iterations, reaches past
    the buffer's end)."""
    return in_bounds_guard(idx, buf.shape, bounds)


def _copy_block(name, src, dst, is_read, domain, outer: list[For], below_scope) -> Block:
    """The ``auto_copy`` block: iter vars for the loops (at or above the loop, inside the
    scope) its region depends on, plain loops over the region inside it; where the
    region may leave the buffer, the copy is guarded by an ``if`` (TVM copies the
    whole relaxed region and reads past the buffer there)."""
    in_scope = {id(s) for s in below_scope}
    loops = {lp.loop_var: lp for lp in outer if id(lp) in in_scope}
    mapping: dict[Var, Var] = {}
    ivars, values = [], []
    for mn, ext in domain:
        for e in (mn, ext):
            for x in iter_exprs(e):
                if isinstance(x, Var) and x in loops and x not in mapping:
                    lp = loops[x]
                    v = Var(f"v{len(ivars)}", x.dtype)
                    mapping[x] = v
                    # over [0, end): the loop may start past 0 (a loop_partition piece)
                    ivars.append(IterVar(v, lp.end, "S"))
                    values.append(x)
    region = tuple((simplify(substitute(mn, mapping)), simplify(substitute(ext, mapping)))
                   for mn, ext in domain)
    axes = [Var(f"ax{d}", src.index_dtype) for d in range(len(region))]
    idx = tuple(simplify(mn + ax) for (mn, _), ax in zip(region, axes))
    copy_from, copy_to = (src, dst) if is_read else (dst, src)
    body: Stmt = BufferStore(copy_to, BufferLoad(copy_from, idx), idx)
    bounds = {mapping[x]: _inclusive(lp.min, lp.extent, x.dtype)
              for x, lp in loops.items() if x in mapping}
    bounds.update({ax: _inclusive(0, ext, ax.dtype) for ax, (_, ext) in zip(axes, region)})
    guard = _in_buffer(idx, src, bounds)
    if not (isinstance(guard, IntImm) and guard.value):
        body = IfThenElse(guard, body)
    for ax, (_, ext) in reversed(list(zip(axes, region))):
        extent = ext.value if hasattr(ext, "value") else ext
        body = For(ax, extent, "serial", body)
    return Block(
        name, tuple(ivars), tuple(values), body,
        annotations=(("auto_copy", True),),
        reads=(BufferRegion(copy_from, region),),
        writes=(BufferRegion(copy_to, region),),
    )


def read_at(
    func: PrimFunc, loop_var: Var, block_name: str, read_buffer_index: int, storage_scope: str
) -> tuple[PrimFunc, str]:
    """Copy what the blocks under ``loop`` read of ``block``'s ``read_buffer_index``-th
    read buffer into a ``storage_scope`` buffer, inside the loop right before the first
    statement reading it (module docstring). Returns (new function, copy block name).

    >>> import workbench as wb
    >>> f = wb.workloads.matmul(16, 16, 16)
    >>> sch = wb.Schedule(f)
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> g, name = read_at(f, sch.get(i).loop_var, "C", 0, "local")
    >>> name, [b.name for b in wb.ir.iter_blocks(g.body)][1:]
    ('A_local', ['A_local', 'C'])
    """
    return _read_write_at(func, "read_at", loop_var, block_name, read_buffer_index,
                          storage_scope)


def write_at(
    func: PrimFunc, loop_var: Var, block_name: str, write_buffer_index: int, storage_scope: str
) -> tuple[PrimFunc, str]:
    """Make the blocks under ``loop`` write ``block``'s ``write_buffer_index``-th write
    buffer into a ``storage_scope`` buffer, stored back inside the loop right after the
    last statement writing it (module docstring). Returns (new function, copy block
    name)."""
    return _read_write_at(func, "write_at", loop_var, block_name, write_buffer_index,
                          storage_scope)
