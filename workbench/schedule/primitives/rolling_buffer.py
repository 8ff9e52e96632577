"""Rolling buffers: rolling_buffer.

A producer computed under a tiled consumer (``compute_at`` into the tile loop) whose
tiles overlap computes each overlapping row again in every tile, and keeps the whole
intermediate buffer although one tile's window is all that is live.
``rolling_buffer(block, write_buffer_index)`` takes the buffer the block writes and
picks the *rolling axis*: the dimension, among those whose window (the region one
iteration of the loop nest above the producer and its consumers uses) starts at
``var * stride`` (or ``var``, or ``(var * stride) // d``) for a loop ``var`` and is wider
than the stride, whose ``var`` is the outermost loop. Then

* the buffer shrinks to the window along the rolling axis, and every access to it
  takes that index modulo the window;
* the producer gets the predicate ``var < 1 or overlap <= inner`` per overlapping
  dimension (``inner`` its binding with ``var`` at 0), so rows already computed by the
  previous tile are not computed again;
* the iter var at the rolling axis of every block in the scope becomes opaque
  (``T.axis.opaque``): values now live from one iteration of the tile loop to the
  next, so the buffer must not be compacted into that loop.

Before (the 1-D case of TVM's tests, ``B`` computed at the tile loop ``i_0``)::

    B = T.alloc_buffer((4, 10), "int32")
    for c, i_0 in T.grid(4, 2):
        for ax0, ax1 in T.grid(6, 3):
            with T.block("B"):
                cc = T.axis.spatial(4, c)
                vi = T.axis.spatial(10, i_0 * 4 + ax0)
                vk = T.axis.reduce(3, ax1)
                ...   B[cc, vi] = B[cc, vi] + A[cc, vi + vk]
        for i_1, k in T.grid(4, 3):
            with T.block("C"): ...   C[cc, vi] = C[cc, vi] + B[cc, vi + vk]

after ``rolling_buffer(B_block, 0)``: ``B`` is ``(4, 6)``, accessed as ``B[cc, vi % 6]``,
block ``B`` has ``T.where(i_0 < 1 or 2 <= ax0)``, and ``vi`` is opaque in both blocks.

Refused, as in TVM: a block that writes a buffer its scope does not allocate (an output
block), a block with other than read-after-write dependences in its scope (another
writer of its buffers, or a later writer of what it reads), a block whose consumers do
not share a loop with it (their lowest common ancestor is not a loop), and a buffer
with no dimension of that rolling form. The workbench also refuses a buffer that is
already a rolling buffer (TVM 0.27 rolls a second axis, and its result is wrong: the
first guard skips rows kept from the previous tile, which the second axis's modulo has
overwritten by then), and a block that writes more than one element along the rolling
axis per instance (a copy block with loops inside): the guard skips whole instances.
"""

from __future__ import annotations

import math

from ...ir import (
    LE,
    LT,
    And,
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    FloorDiv,
    FloorMod,
    For,
    IntImm,
    IterVar,
    Mul,
    Or,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from ...ir.functor import Mutator, post_order_visit, substitute
from ...ir.intset import eval_interval
from ...ir.simplify import simplify
from ..errors import ScheduleError
from ._common import find_block_path, replace_path, scope_blocks
from .cache import resolve_buffer_index
from .compute_inline import OutputBlockError


class RollingBufferDependencyError(ScheduleError):
    """``rolling_buffer``: the block has a write-after-write or write-after-read
    dependence with another block of its scope (only read-after-write is allowed)."""


class RollingBufferInsertionError(ScheduleError):
    """``rolling_buffer``: the lowest common ancestor of the block and its consumers is
    not a loop (the block is not computed inside the consumers' tile loop)."""


class RollingBufferAlreadyRolledError(ScheduleError):
    """``rolling_buffer``: the buffer is already a rolling buffer (the block stores to it
    modulo its extent along some axis). Its producer already skips the rows the previous
    tile computed; rolling a second axis would overwrite those rows before they are read
    again (TVM 0.27 applies it and miscomputes)."""


class RollingBufferMatchError(ScheduleError):
    """``rolling_buffer``: no dimension of the buffer's window has the rolling form
    ``loop * stride + ...`` with overlapping windows."""


def _scope_index(bpath: list[Stmt]) -> int:
    return max(k for k, s in enumerate(bpath[:-1]) if isinstance(s, Block))


def _check_dependencies(func: PrimFunc, block: Block, siblings: list[Block]) -> list[Block]:
    """TVM's dependence rule for the block among its scope's blocks (program order);
    returns its consumers (later blocks that read what it writes)."""
    mine_w = {r.buffer for r in block.writes or ()}
    mine_r = {r.buffer for r in block.reads or ()}
    pos = next(k for k, b in enumerate(siblings) if b is block)
    consumers = []
    for k, other in enumerate(siblings):
        if other is block:
            continue
        w = {r.buffer for r in other.writes or ()}
        r = {r.buffer for r in other.reads or ()}
        # an earlier block is the source of a dependence, a later one its destination
        bad = (w & mine_w) or (r & mine_w if k < pos else w & mine_r)
        if bad:
            kind = "write-after-write" if w & mine_w else "write-after-read"
            buf = next(iter(sorted(x.name for x in bad)))
            raise RollingBufferDependencyError(
                "rolling_buffer",
                f'block "{block.name}" has a {kind} dependence with block "{other.name}" '
                f"(buffer {buf}); rolling_buffer needs a block with read-after-write "
                "dependences only",
                func,
                blocks=[block.name, other.name],
            )
        if k > pos and r & mine_w:
            consumers.append(other)
    return consumers


def _rolled_axes(block: Block, buf: Buffer) -> list[int]:
    """The axes along which ``block`` stores to ``buf`` modulo the buffer's extent there
    (what a previous ``rolling_buffer`` left)."""
    axes: set[int] = set()

    def visit(node) -> None:
        if isinstance(node, BufferStore) and node.buffer is buf:
            for d, i in enumerate(node.indices):
                n = buf.shape[d]
                n = n.value if isinstance(n, IntImm) else n
                if isinstance(i, FloorMod) and isinstance(i.b, IntImm) and i.b.value == n:
                    axes.add(d)

    post_order_visit(block.body, visit)
    if block.init is not None:
        post_order_visit(block.init, visit)
    return sorted(axes)


def _lca_depth(paths: list[list[Stmt]]) -> int:
    depth = 0
    while all(len(p) > depth + 1 for p in paths) and all(
        p[depth + 1] is paths[0][depth + 1] for p in paths
    ):
        depth += 1
    return depth


def _match(lo: PrimExpr) -> tuple[Var, int] | None | bool:
    """``(var, stride)`` of a window start ``var * stride`` / ``var`` /
    ``(var * stride) // d`` (stride rounded up); ``None`` for a constant start; ``False``
    for anything else."""
    if isinstance(lo, IntImm):
        return None
    div = 1
    if isinstance(lo, FloorDiv) and isinstance(lo.b, IntImm):
        div, lo = lo.b.value, lo.a
        if not (isinstance(lo, Mul) and _var_times_const(lo)):
            return False
    if isinstance(lo, Var):
        return lo, 1
    if isinstance(lo, Mul) and _var_times_const(lo):
        v, c = _var_times_const(lo)  # type: ignore[misc]
        return v, math.ceil(c / div)
    return False


def _var_times_const(e: Mul):
    if isinstance(e.a, Var) and isinstance(e.b, IntImm):
        return e.a, e.b.value
    if isinstance(e.b, Var) and isinstance(e.a, IntImm):
        return e.b, e.a.value
    return None


class _Rewriter(Mutator):
    def __init__(self, scope: Block, old, new, axis: int, window: int, guards):
        self.scope, self.old, self.new = scope, old, new
        self.axis, self.window, self.guards = axis, window, guards
        self.stored = False

    def index(self, indices):
        out = list(indices)
        i = out[self.axis]
        out[self.axis] = FloorMod(i, IntImm(self.window, i.dtype))
        return tuple(out)

    def visit_expr(self, e):
        e = super().visit_expr(e)
        if isinstance(e, BufferLoad) and e.buffer is self.old:
            return BufferLoad(self.new, self.index(e.indices))
        return e

    def visit_stmt(self, s):
        s = super().visit_stmt(s)
        if isinstance(s, BufferStore) and s.buffer is self.old:
            self.stored = True
            return BufferStore(self.new, s.value, self.index(s.indices))
        return s

    def visit_block(self, b: Block) -> Block:
        if b is self.scope:
            return Block(
                b.name, b.iter_vars, b.iter_values, self.visit_stmt(b.body),
                self.visit_stmt(b.init) if b.init is not None else None, b.predicate,
                tuple(self.new if x is self.old else x for x in b.alloc_buffers),
                b.annotations, match_buffers=b.match_buffers,
            )
        saved, self.stored = self.stored, False
        body = self.visit_stmt(b.body)
        init = self.visit_stmt(b.init) if b.init is not None else None
        pred = b.predicate
        if self.stored:  # the overlap was computed by the previous tile
            for dim, (var, overlap) in self.guards.items():
                if dim >= len(b.iter_values):
                    continue
                inner = simplify(substitute(b.iter_values[dim], {var: IntImm(0, var.dtype)}))
                cond = Or(LT(var, IntImm(1, var.dtype)), LE(IntImm(overlap, inner.dtype), inner))
                pred = cond if isinstance(pred, IntImm) and pred.value else And(pred, cond)
        self.stored = saved
        ivs = tuple(IterVar(iv.var, iv.extent, "O") if k == self.axis else iv
                    for k, iv in enumerate(b.iter_vars))
        return Block(b.name, ivs, b.iter_values, body, init, pred, b.alloc_buffers,
                     b.annotations, match_buffers=b.match_buffers)


def rolling_buffer(func: PrimFunc, block_name: str, write_buffer_index: int) -> PrimFunc:
    """Make the ``write_buffer_index``-th buffer ``block_name`` writes a rolling buffer
    (see the module docstring).

    >>> import workbench as wb
    >>> from workbench.testing import pool_chain_func
    >>> sch = wb.Schedule(pool_chain_func())
    >>> _, i, _ = sch.get_loops(sch.get_block("C"))
    >>> io, _ = sch.split(i, [2, 4])
    >>> sch.compute_at(sch.get_block("B"), io)
    >>> g = rolling_buffer(sch.mod["pool"], "B", 0)
    >>> g.buffers["B"].shape
    (4, 6)
    """
    p = "rolling_buffer"
    bpath = find_block_path(func, p, block_name)
    block: Block = bpath[-1]  # type: ignore[assignment]
    index = resolve_buffer_index(func, p, block_name, write_buffer_index, "write",
                                 "write_buffer_index")
    region = block.writes[index]  # type: ignore[index]
    buf = region.buffer
    si = _scope_index(bpath)
    scope: Block = bpath[si]  # type: ignore[assignment]
    outside = [w.buffer.name for w in block.writes or () if w.buffer not in scope.alloc_buffers]
    if outside:
        raise OutputBlockError(
            p, f'block "{block_name}" writes {outside[0]}, which its scope does not allocate '
            "(an output block)", func, blocks=[block_name])
    consumers = _check_dependencies(func, block, scope_blocks(scope))
    paths = [bpath] + [find_block_path(func, p, c.name) for c in consumers]
    lca = _lca_depth(paths)
    while isinstance(bpath[lca], SeqStmt):  # TVM's lowest common ancestor is a loop/block
        lca -= 1
    if not consumers or not isinstance(bpath[lca], For):
        where = "it has no consumer" if not consumers else "their lowest common ancestor " \
            "is not a loop"
        raise RollingBufferInsertionError(
            p, f'block "{block_name}" is not computed inside a loop shared with its consumers '
            f"of {buf.name} ({where}); compute_at it into the consumers' tile loop first",
            func, blocks=[block_name])
    inner_loops = [s for s in bpath[lca + 1:-1] if isinstance(s, For)]
    dom = {lp.loop_var: (IntImm(lp.min, lp.loop_var.dtype),
                         IntImm(lp.end - 1, lp.loop_var.dtype)) for lp in inner_loops}
    bind = {iv.var: v for iv, v in zip(block.iter_vars, block.iter_values, strict=True)}
    windows = []
    for d, (mn, ext) in enumerate(region.region):
        lo = substitute(mn, bind)
        hi = substitute(mn + ext - 1, bind)
        a, b = eval_interval(lo, dom), eval_interval(hi, dom)
        if a is None or b is None or not isinstance(a, tuple) or not isinstance(b, tuple):
            windows.append((IntImm(0), buf.shape[d]))
            continue
        width = simplify(b[1] - a[0] + 1)
        windows.append((a[0], width.value if isinstance(width, IntImm) else None))
    guards: dict[int, tuple[Var, int]] = {}
    for d, (lo, width) in enumerate(windows):
        m = _match(lo)
        if m is False:
            raise RollingBufferMatchError(
                p, f"the window of buffer {buf.name} written by block \"{block_name}\" starts "
                f"at {lo} in dimension {d}, not at a loop times a stride", func,
                blocks=[block_name])
        if m is None or not isinstance(width, int):
            continue
        var, stride = m  # type: ignore[misc]
        if width - stride > 0:
            guards[d] = (var, width - stride)
    loops = [s for s in bpath[si + 1:-1] if isinstance(s, For)]
    axis = next((next(d for d, (v, _) in guards.items() if v is lp.loop_var)
                 for lp in loops if any(v is lp.loop_var for v, _ in guards.values())), None)
    if axis is None:
        raise RollingBufferMatchError(
            p, f'no dimension of buffer {buf.name} written by block "{block_name}" has '
            "overlapping windows over one of its loops (a rolling pattern such as "
            "`hh_outer * stride + hh_inner`)", func, blocks=[block_name])
    rolled = _rolled_axes(block, buf)
    if rolled:
        raise RollingBufferAlreadyRolledError(
            p, f"buffer {buf.name} written by block \"{block_name}\" is already a rolling "
            f"buffer along axis {rolled[0]} (stored modulo {buf.shape[rolled[0]]}); rolling "
            "it again would overwrite rows the block no longer recomputes", func,
            blocks=[block_name])
    own = region.region[axis][1]
    if not (isinstance(own, IntImm) and own.value == 1 or own == 1):
        # the guard skips whole instances of the block: one that writes several rows of
        # the rolling axis (a copy block with loops inside) would skip new rows too
        raise RollingBufferMatchError(
            p, f'block "{block_name}" writes {own} elements of buffer {buf.name} along its '
            f"rolling axis {axis} per instance; the overlap can be skipped only for one",
            func, blocks=[block_name])
    window = windows[axis][1]
    shape = list(buf.shape)
    shape[axis] = window
    new = buf.with_(shape=tuple(shape))
    new_scope = _Rewriter(scope, buf, new, axis, window, guards).visit_block(scope)
    return replace_path(func, bpath[: si + 1], new_scope)
