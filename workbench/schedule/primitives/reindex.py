"""``reindex``: copy a buffer through a new one laid out by the block's iter vars.

The block's accesses of the buffer (all at one index, e.g. ``A[vj, vi]``) become
accesses of a new buffer ``<name>_reindex`` indexed by the block's iter vars that
index uses, in the block's order (``A_reindex[vi, vj]``); a copy block over those iter
vars goes right before the block's loop nest (for a read) or right after it (for a
write). A later ``transform_layout`` of the new buffer or ``transform_block_layout`` of
the copy then changes the layout without touching the computation.

``reindex(block "B", ("read", 0))`` on ``B[vi, vj] = A[vj, vi] * 2``::

                                            A_reindex = T.alloc_buffer((128, 128))
                                            for ax0, ax1 in T.grid(128, 128):
                                                with T.block("A_reindex_reindex"):
                                                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                                                    A_reindex[v0, v1] = A[v1, v0]
    for i, j in T.grid(128, 128):           for i, j in T.grid(128, 128):
        with T.block("B"):                      with T.block("B"):
            vi, vj = T.axis.remap(...)              vi, vj = T.axis.remap(...)
            B[vi, vj] = A[vj, vi] * 2.0             B[vi, vj] = A_reindex[vi, vj] * 2.0

Names follow TVM: the buffer is ``<buffer>_reindex``; the copy block is named after the
buffer it writes plus ``_reindex`` (so ``A_reindex_reindex`` for a read, ``C_reindex``
for a write). An iter var the index does not use gets no dimension and no loop; the copy
block's iter vars are all spatial.

Invariants (TVM's checks): the block is a leaf; every access of the buffer in its body
uses the same indices, none opaque (``A.data``); its scope is a stage pipeline; the
loops between the scope and the block form a chain (each the only statement of the one
above), so the copy has a place next to the nest. Beyond TVM's: a read of a buffer the
block also writes (``C = C + A * B`` after ``decompose_reduction``) is refused
(:class:`BufferReadAndWrittenError`): TVM moves the store to the new buffer too and never
copies it back, so the result is lost. An index using a variable other than the block's
iter vars (a loop inside the block's body, as in ``read_at``'s copy blocks) is refused
(:class:`IndexNotByIterVarsError`): the copy outside the block would use that variable
out of its scope (TVM makes that IR, and its build fails).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...ir import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IterVar,
    Let,
    LetStmt,
    MatchBufferRegion,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from ...ir.analysis import iter_blocks
from ...ir.expr import BufferField, const
from ...ir.functor import (
    Mutator,
    iter_exprs,
    iter_stmts,
    loads_under_condition,
    stmt_exprs,
    substitute,
)
from ...ir.simplify import simplify, struct_key
from ..errors import InvalidScheduleArgumentError, ScheduleError
from ._common import (
    check_starts_at_zero,
    find_block_path,
    fresh_name,
    is_root,
    position_in_scope,
    replace_path,
    scope_of,
)
from ._pipeline import check_stage_pipeline
from .cache import (
    BufferNotAccessedError,
    InPlaceUpdateError,
    _fresh_buffer_name,
    _insert,
    resolve_buffer_index,
)

__all__ = [
    "AmbiguousBufferNameError",
    "BufferSharedInNestError",
    "BufferAccessNotFoundError",
    "BufferReadAndWrittenError",
    "ConditionalReadError",
    "IndexNotByIterVarsError",
    "NonUniqueBufferAccessError",
    "NotLeafBlockError",
    "NotLoopChainError",
    "OpaqueBufferAccessError",
    "buffer_arg",
    "check_unconditional_read",
    "reindex",
]

# --------------------------------------------------------------------------- errors


class BufferSharedInNestError(ScheduleError):
    """Another block in the block's loop nest writes the buffer (or, reindexing a
    write, reads it): the copy placed next to the nest would miss it."""


class BufferReadAndWrittenError(ScheduleError):
    """Reindexing a read of a buffer the block also writes (``C = C + A * B`` after
    ``decompose_reduction``): the store would move to the new buffer too, and the copy
    made before the nest never goes back. (TVM makes that IR and loses the result.)"""


class IndexNotByIterVarsError(ScheduleError):
    """The block accesses the buffer at an index using a variable that is not one of its
    iter vars (a loop or let inside its body, ``relu[v0 + ax0, ax1]`` in ``read_at``'s
    copy): the new buffer and the copy outside the block cannot be indexed by it."""


class ConditionalReadError(ScheduleError):
    """The block reads the buffer only where a condition holds (``T.if_then_else``, an
    ``if``): a copy made over the whole iteration would read out of bounds there."""


def check_unconditional_read(func: PrimFunc, prim: str, block: Block, buf: Buffer) -> None:
    """Refuse copying ``buf`` for ``block`` when the block reads it under a condition."""
    if loads_under_condition(block.body, buf):
        raise ConditionalReadError(
            prim,
            f'block "{block.name}" reads {buf.name} only where a condition holds; a copy '
            "over its whole iteration would read out of bounds where it does not (use "
            "cache_read, whose copy covers only the buffer)",
            func,
            blocks=[block.name],
        )


class NotLeafBlockError(ScheduleError):
    """The block holds other blocks: only a leaf block's accesses can be reindexed."""


class BufferAccessNotFoundError(ScheduleError):
    """The block lists the buffer in its reads/writes but never loads or stores it."""


class NonUniqueBufferAccessError(ScheduleError):
    """The block accesses the buffer at two different indices (``A[vi, vj] + A[vj, vi]``)."""


class OpaqueBufferAccessError(ScheduleError):
    """The block passes the buffer whole (``A.data``), so its accesses have no index."""


class NotLoopChainError(ScheduleError):
    """The loops between the scope and the block do not form a chain (one loop holds
    other statements besides the next loop), or there are none: no single place next
    to the block's loop nest exists for the copy."""


class AmbiguousBufferNameError(ScheduleError, ValueError):
    """Two different buffers of the block have the name asked for."""


# --------------------------------------------------------------------------- arguments


def buffer_arg(func: PrimFunc, primitive: str, block_name: str, buffer: Any) -> tuple[str, int]:
    """``(kind, index)`` of the buffer ``buffer`` names among ``block``'s accesses, as
    TVM's Python ``Schedule`` reads a ``buffer`` argument: ``("read", 0)`` /
    ``("write", 0)``, a buffer name or a :class:`~workbench.ir.Buffer` (a buffer both read
    and written counts as written, as in TVM).

    >>> import workbench as wb
    >>> f = wb.workloads.matmul(8, 8, 8)
    >>> buffer_arg(f, "reindex", "C", "B"), buffer_arg(f, "reindex", "C", ("write", 0))
    (('read', 1), ('write', 0))
    """
    block: Block = find_block_path(func, primitive, block_name)[-1]  # type: ignore[assignment]
    found: dict[Buffer, tuple[str, int]] = {}
    for kind, regions in (("read", block.reads), ("write", block.writes)):
        for i, r in enumerate(regions or ()):
            found[r.buffer] = (kind, i)
    if isinstance(buffer, str):
        hits = [(b, v) for b, v in found.items() if b.name == buffer]
        if len(hits) > 1:
            raise AmbiguousBufferNameError(
                primitive,
                f'block "{block_name}" accesses {len(hits)} different buffers named '
                f'"{buffer}"; pass ("read", i) or ("write", i) instead',
                func,
                blocks=[block_name],
            )
        if not hits:
            names = ", ".join(sorted({b.name for b in found})) or "no buffers"
            raise BufferNotAccessedError(
                primitive,
                f'block "{block_name}" accesses no buffer named "{buffer}" (it accesses '
                f"{names})",
                func,
                blocks=[block_name],
            )
        return hits[0][1]
    if isinstance(buffer, Buffer):
        if buffer not in found:
            raise BufferNotAccessedError(
                primitive,
                f'block "{block_name}" does not access buffer "{buffer.name}"',
                func,
                blocks=[block_name],
            )
        return found[buffer]
    if (
        isinstance(buffer, (tuple, list))
        and len(buffer) == 2
        and buffer[0] in ("read", "write")
    ):
        kind, index = buffer
        return kind, resolve_buffer_index(func, primitive, block_name, index, kind, "buffer")
    raise InvalidScheduleArgumentError(
        primitive,
        f'buffer for block "{block_name}" must be ("read", i), ("write", i), a buffer name '
        f"or a Buffer, got {buffer!r}",
        func,
        blocks=[block_name],
    )


# --------------------------------------------------------------------------- checks


def _access_indices(func: PrimFunc, prim: str, block: Block, buf: Buffer) -> tuple:
    """The one index tuple every load/store of ``buf`` in ``block``'s body uses (TVM's
    ReIndexCollector; the init is not looked at)."""
    found: list[tuple] = []
    where = f'block "{block.name}"'

    def fail(cls: type[ScheduleError], why: str) -> ScheduleError:
        return cls(
            prim,
            f'buffer "{buf.name}" must be accessed in leaf {where} through loads and stores '
            f"at one index; {why}",
            func,
            blocks=[block.name],
        )

    for s in iter_stmts(block.body):
        if isinstance(s, Block):
            raise NotLeafBlockError(
                prim,
                f'{where} is not a leaf block: it holds block "{s.name}"',
                func,
                blocks=[block.name, s.name],
            )
        for e in stmt_exprs(s):
            for x in iter_exprs(e):
                if isinstance(x, BufferField) and x.buffer is buf:
                    raise fail(OpaqueBufferAccessError, f"it passes {buf.name}.{x.field}")
                if isinstance(x, BufferLoad) and x.buffer is buf:
                    found.append(x.indices)
    if not found:
        raise fail(BufferAccessNotFoundError, "it never loads or stores it")
    first = [struct_key(i) for i in found[0]]
    for other in found[1:]:
        if [struct_key(i) for i in other] != first:
            shown = ", ".join(map(str, found[0])), ", ".join(map(str, other))
            raise fail(
                NonUniqueBufferAccessError,
                f"it uses both [{shown[0]}] and [{shown[1]}]",
            )
    return found[0]


def _check_index_vars(func: PrimFunc, prim: str, block: Block, buf: Buffer,
                      indices: tuple) -> None:
    """Refuse an index that uses a variable other than the block's iter vars (or the
    function's shape vars, or a ``Let`` bound inside the index itself). (TVM does not
    check: its copy then uses the block's inner loop vars outside their loops.)"""
    allowed = {iv.var for iv in block.iter_vars} | set(func.shape_vars)
    allowed |= {x.var for i in indices for x in iter_exprs(i) if isinstance(x, Let)}
    stray: list[Var] = []
    for i in indices:
        for x in iter_exprs(i):
            if isinstance(x, Var) and x not in allowed and x not in stray:
                stray.append(x)
    if not stray:
        return
    inner: set[Var] = set()
    for s in iter_stmts(block.body):
        if isinstance(s, For):
            inner.add(s.loop_var)
        elif isinstance(s, LetStmt):
            inner.add(s.var)
    names = ", ".join(v.name for v in stray)
    where = ("bound inside the block" if all(v in inner for v in stray)
             else "not iter vars of the block")
    raise IndexNotByIterVarsError(
        prim,
        f'block "{block.name}" accesses buffer "{buf.name}" at '
        f'[{", ".join(map(str, indices))}], which uses {names} ({where}); the new buffer '
        "can be indexed only by the block's iter vars, and the copy outside the block "
        "cannot see those variables (cache_read / cache_write copy the buffer without "
        "them)",
        func,
        blocks=[block.name],
    )


def _check_nest_alone(func: PrimFunc, prim: str, path: list[Stmt], scope: Block,
                      buf: Buffer, kind: str) -> None:
    """Refuse when another block in the block's loop nest (beside it in the innermost
    loop, which may hold other statements) writes the buffer, or for a write reads it:
    the copy goes before or after the whole nest, so it would miss that block's stores
    or undo them. (TVM makes the same copy and does not check.)"""
    block: Block = path[-1]  # type: ignore[assignment]
    top = next((s for s in path[path.index(scope) + 1:] if isinstance(s, For)), None)
    if top is None:
        return
    for other in iter_blocks(top):
        if other is block:
            continue
        writes = any(w.buffer is buf for w in other.writes or ())
        reads = any(r.buffer is buf for r in other.reads or ())
        if writes or (kind == "write" and reads):
            raise BufferSharedInNestError(
                prim,
                f'block "{other.name}" in the loop nest of block "{block.name}" '
                f'{"writes" if writes else "reads"} buffer "{buf.name}"; the copy next to '
                "the nest would not see it",
                func,
                blocks=[block.name, other.name],
            )


def _check_loop_chain(func: PrimFunc, prim: str, path: list[Stmt], scope: Block) -> None:
    """Check the loops from ``scope`` down to the block form a chain (TVM's check before
    it places the copy next to the outermost one)."""
    below = path[path.index(scope) + 1 :]
    block: Block = path[-1]  # type: ignore[assignment]
    if isinstance(below[0], SeqStmt):
        below = below[1:]
    chain = below[:-1]
    if chain and isinstance(chain[-1], SeqStmt):
        chain = chain[:-1]  # the innermost loop may hold other statements (as in TVM)
    loops = [s for s in chain if isinstance(s, For)]
    problem = None
    if not chain:
        problem = f'block "{block.name}" has no loop of its own in its scope "{scope.name}"'
    for outer, inner in zip(chain, chain[1:]):
        if isinstance(outer, For) and isinstance(inner, SeqStmt):
            problem = (f'loop "{outer.loop_var.name}" above block "{block.name}" holds '
                       "other statements besides the loop nest of the block")
            break
        if not isinstance(inner, For) or not isinstance(outer, For):
            problem = f'the loops above block "{block.name}" are interrupted by a condition'
            break
    if problem is None and chain and not isinstance(chain[0], For):
        problem = f'the loops above block "{block.name}" are interrupted by a condition'
    if problem:
        raise NotLoopChainError(
            prim,
            f"{problem}; the copy needs a single loop nest to go next to",
            func,
            loops=[s.loop_var for s in loops],
            blocks=[block.name],
        )


# --------------------------------------------------------------------------- rewriting


class _Reindex(Mutator):
    """Accesses of ``old`` become accesses of ``new`` at ``indices`` (in one block)."""

    def __init__(self, old: Buffer, new: Buffer, indices: tuple[PrimExpr, ...]):
        self.old, self.new, self.indices = old, new, indices

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, BufferLoad) and e.buffer is self.old:
            return BufferLoad(self.new, self.indices)
        return super().visit_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, BufferStore) and s.buffer is self.old:
            return BufferStore(self.new, self.visit_expr(s.value), self.indices)
        return super().visit_stmt(s)


def _swap_regions(regions, old: Buffer, new: BufferRegion):
    return tuple(new if r.buffer is old else r for r in regions or ())


# --------------------------------------------------------------------------- primitive


def reindex(func: PrimFunc, block_name: str, buffer_index: int, kind: str) -> tuple[PrimFunc, str]:
    """Reindex the ``buffer_index``-th buffer ``block`` reads (``kind="read"``) or
    writes (``"write"``) by the block's iter vars (module docstring). Returns (new
    function, name of the copy block).

    >>> import workbench as wb
    >>> func, name = reindex(wb.workloads.matmul(8, 8, 8), "C", 0, "write")
    >>> name, [b.name for b in func.body.alloc_buffers]
    ('C_reindex', ['C_reindex'])
    """
    prim = "reindex"
    path = find_block_path(func, prim, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    index = resolve_buffer_index(func, prim, block_name, buffer_index, kind)
    regions = block.reads if kind == "read" else block.writes
    buf = regions[index].buffer  # type: ignore[index]
    scope = scope_of(path)
    check_stage_pipeline(func, scope, prim, f'block "{block_name}"', blocks=[block_name])
    indices = _access_indices(func, prim, block, buf)
    if kind == "read":
        check_unconditional_read(func, prim, block, buf)
    bounds = {iv.var: (0, iv.extent - 1) for iv in block.iter_vars if isinstance(iv.extent, int)}
    indices = tuple(simplify(i, bounds) for i in indices)
    used = {x for i in indices for x in iter_exprs(i) if isinstance(x, Var)}
    _check_index_vars(func, prim, block, buf, indices)
    kept = [iv for iv in block.iter_vars if iv.var in used]
    _check_loop_chain(func, prim, path, scope)
    if kind == "write":
        # the copy back runs over the iter vars' whole domains: a loop_partition piece
        # (a loop not starting at 0) writes only part of it
        check_starts_at_zero(func, prim, path[path.index(scope) + 1:])
    _check_nest_alone(func, prim, path, scope, buf, kind)
    if kind == "read" and any(w.buffer is buf for w in block.writes or ()):
        raise BufferReadAndWrittenError(
            prim,
            f'block "{block_name}" reads and writes buffer "{buf.name}"; its stores would '
            f'move to the new buffer too and never reach "{buf.name}" (reindex the write '
            "while the block has its init, or use cache_inplace, which copies back)",
            func,
            blocks=[block_name],
        )
    if kind == "write" and block.init is None and any(r.buffer is buf for r in block.reads or ()):
        raise InPlaceUpdateError(
            prim,
            f'block "{block_name}" updates "{buf.name}" in place from a value written outside '
            "it (it has no init); the new buffer would start uninitialised",
            func,
            blocks=[block_name],
        )

    new_buf = Buffer(_fresh_buffer_name(func, f"{buf.name}_reindex"),
                     tuple(iv.extent for iv in kept), buf.dtype, buf.scope,
                     index_dtype=buf.index_dtype)
    # the copy block: iter vars v0, v1... (all spatial) for the kept ones, loops ax0...
    new_vars = {iv.var: Var(f"v{n}", iv.var.dtype) for n, iv in enumerate(kept)}
    ivars = tuple(IterVar(new_vars[iv.var], iv.extent, "S") for iv in kept)
    loop_vars = [Var(f"ax{n}", iv.var.dtype) for n, iv in enumerate(kept)]
    target_idx = tuple(substitute(i, new_vars) for i in indices)
    own_idx = tuple(iv.var for iv in ivars)
    if kind == "read":
        src, src_idx, dst, dst_idx = buf, target_idx, new_buf, own_idx
    else:
        src, src_idx, dst, dst_idx = new_buf, own_idx, buf, target_idx
    stage_name = fresh_name(f"{dst.name}_reindex", set(_taken_blocks(func)))
    one = const(1)
    stage_block = Block(
        stage_name, ivars, tuple(loop_vars),
        BufferStore(dst, BufferLoad(src, src_idx), dst_idx),
        reads=(BufferRegion(src, tuple((i, one) for i in src_idx)),),
        writes=(BufferRegion(dst, tuple((i, one) for i in dst_idx)),),
    )
    stage: Stmt = stage_block
    for lv, iv in reversed(list(zip(loop_vars, kept))):
        stage = For(lv, iv.extent, "serial", stage)

    # the block itself: accesses and regions move to the new buffer
    covered = tuple(iv.var for iv in kept)
    point = BufferRegion(new_buf, tuple((v, one) for v in covered))
    swap = _Reindex(buf, new_buf, covered)
    body = swap.visit_stmt(block.body)
    init = swap.visit_stmt(block.init) if block.init is not None else None
    matches = tuple(
        MatchBufferRegion(m.buffer, point, m.offset_factor) if m.source.buffer is buf else m
        for m in block.match_buffers
    )
    new_block = replace(
        block, body=body, init=init, match_buffers=matches,
        reads=_swap_regions(block.reads, buf, point),
        writes=_swap_regions(block.writes, buf, point),
    )
    func = replace_path(func, path, new_block)
    # insert the copy next to the nest and allocate the buffer in the scope
    scope_path = find_block_path(func, prim, scope.name)
    new_scope: Block = scope_path[-1]  # type: ignore[assignment]
    body = new_scope.body
    pos = position_in_scope(body, block_name) + (1 if kind == "write" else 0)
    body = _insert(body, [body] if isinstance(body, SeqStmt) else [], pos, stage)
    allocs = new_scope.alloc_buffers + (new_buf,)
    if is_root(new_scope):
        new_scope = replace(new_scope, body=body, alloc_buffers=allocs, reads=(), writes=())
    else:
        new_scope = replace(new_scope, body=body, alloc_buffers=allocs, reads=None, writes=None)
    return replace_path(func, scope_path, new_scope), stage_name


def _taken_blocks(func: PrimFunc) -> list[str]:
    return [b.name for b in iter_blocks(func.body)] + ["root"]

