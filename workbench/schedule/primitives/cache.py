"""Caching and memory scopes: ``cache_read``, ``cache_write``, ``set_scope``.

A cache stage is a new block that copies a buffer into a buffer of another memory
scope (``cache_read``) or back out of one (``cache_write``); the blocks that used the
buffer then use the cache instead. The cache buffer is allocated in the scope block
(the root block, usually). As in TVM, a copy that sits directly in the scope block's
body caches exactly the region it copies: at the root that is the whole buffer, inside
a block scope (after ``blockize``) the tile the scope uses, e.g. a ``(16, 64)``
``A_local`` with every access shifted by the tile's start. A copy that sits inside a
loop keeps the full shape; shrinking it to the region used under its compute location
is the lowering's job, after ``compute_at`` has moved the copy under the loops that use
it.

``cache_read(block "Y", 0, "shared")`` on ``mm_relu`` (``A`` is a parameter, so the
copy goes first in the scope)::

    Y = T.alloc_buffer((128, 128))             Y = T.alloc_buffer((128, 128))
                                               A_shared = T.alloc_buffer((128, 128), scope="shared")
                                               for ax0, ax1 in T.grid(128, 128):
                                                   with T.block("A_shared"):
                                                       v0, v1 = T.axis.remap("SS", [ax0, ax1])
                                                       T.reads(A[v0, v1])
                                                       T.writes(A_shared[v0, v1])
                                                       A_shared[v0, v1] = A[v0, v1]
    for i, j, k in T.grid(128, 128, 128):      for i, j, k in T.grid(128, 128, 128):
        with T.block("Y"):                         with T.block("Y"):
            ...                                        ...
            T.reads(A[vi, vk], B[vk, vj])              T.reads(A_shared[vi, vk], B[vk, vj])
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] ...      Y[vi, vj] = Y[vi, vj] + A_shared[vi, vk] ...

``cache_write(block "Y", 0, "local")``: ``Y`` now computes into ``Y_local`` and a new
block ``Y_local``, right after it, copies ``Y_local`` back into ``Y``; the consumer
``C`` still reads ``Y``.

Invariants: the cached buffer has a single writer in the scope (TVM's
``NotSingleWriteBlock``); the copy is inserted after that writer and before the first
block that reads the copy, at the innermost statement sequence holding both (TVM's
``CacheLocDetector``); it copies the region the writer produces relaxed over the loops
below that point (and, as TVM's RelaxBufferRegion, under the writer's predicate), so a
copy placed inside a loop copies one tile per iteration. ``cache_write`` of a block
that updates the buffer in place is accepted when the block writes it first (a nested
init block, as in a hand-written tile block); where the value it starts from comes from
outside the block the cache would start uninitialised, and it is refused
(:class:`InPlaceUpdateError`; TVM accepts it and computes garbage).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ...ir import (
    SCOPES,
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    IfThenElse,
    IntImm,
    IterVar,
    MatchBufferRegion,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from ...ir.analysis import block_names, child_blocks, collect_buffers, iter_blocks
from ...ir.expr import Or, const, extent_expr
from ...ir.functor import Mutator, substitute
from ...ir.intset import EMPTY, eval_interval, interval_union, narrow
from ...ir.simplify import simplify
from ..errors import InvalidScheduleArgumentError, ScheduleError
from ._common import (
    child_block_names,
    find_block_path,
    fresh_name,
    in_bounds_guard,
    is_root,
    loop_bounds,
    replace_child,
    replace_path,
    scope_blocks,
    scope_of,
)

# --------------------------------------------------------------------------- errors


class BufferIndexOutOfRangeError(ScheduleError, IndexError):
    """A read/write buffer index outside the block's ``T.reads`` / ``T.writes``."""


class BufferNotAccessedError(ScheduleError, ValueError):
    """A buffer named by the caller that the block does not read (or write)."""


class InvalidStorageScopeError(ScheduleError, ValueError):
    """A storage scope that is not one of ``workbench.ir.SCOPES``."""


class NotSingleWriteBlockError(ScheduleError):
    """The buffer to cache is written by more than one block in the scope."""


class NotConsumerBlockError(ScheduleError, ValueError):
    """A block in ``consumer_blocks`` that does not read the cached buffer in the scope."""


class ConsumerBeforeProducerError(ScheduleError):
    """A block that reads the cached buffer runs before the block that writes it, so no
    position after the producer and before the consumers exists for the copy."""


class InPlaceUpdateError(NotSingleWriteBlockError):
    """cache_write of a block that updates the buffer in place from a value written
    outside it: the cache would start uninitialised (TVM accepts it and computes garbage;
    this library refuses)."""


class NonAllocatedBufferError(ScheduleError):
    """The buffer is a function parameter, not allocated by a block, so its scope or
    layout belongs to the caller."""


# --------------------------------------------------------------------------- checks

_KIND_WORDS = {"read": ("reads", "read_buffer_index"), "write": ("writes", "write_buffer_index")}


def _regions(block: Block, kind: str):
    return block.reads if kind == "read" else block.writes


def _listing(block: Block, kind: str) -> str:
    names = [r.buffer.name for r in _regions(block, kind) or ()]
    if not names:
        return f"no buffers (T.{_KIND_WORDS[kind][0]}() is empty)"
    return ", ".join(f"[{i}] {n}" for i, n in enumerate(names))


def resolve_buffer_index(
    func: PrimFunc,
    primitive: str,
    block_name: str,
    index: int | str,
    kind: str,
    arg: str | None = None,
) -> int:
    """The position of a buffer among ``block``'s reads (``kind="read"``) or writes.

    ``index`` is that position already, or a buffer name (TVM also accepts names).
    Raises :class:`BufferIndexOutOfRangeError` (the message lists the block's buffers)
    or :class:`BufferNotAccessedError`.
    """
    block: Block = find_block_path(func, primitive, block_name)[-1]  # type: ignore[assignment]
    verb, default_arg = _KIND_WORDS[kind]
    arg = arg or default_arg
    regions = _regions(block, kind) or ()
    if isinstance(index, str):
        for i, r in enumerate(regions):
            if r.buffer.name == index:
                return i
        raise BufferNotAccessedError(
            primitive,
            f'block "{block_name}" does not {kind} a buffer named "{index}"; it {verb} '
            f"{_listing(block, kind)}",
            func,
            blocks=[block_name],
        )
    if isinstance(index, bool) or not isinstance(index, int):
        raise InvalidScheduleArgumentError(
            primitive,
            f'{arg} for block "{block_name}" must be an int or a buffer name, got {index!r}',
            func,
            blocks=[block_name],
        )
    if not 0 <= index < len(regions):
        raise BufferIndexOutOfRangeError(
            primitive,
            f'{arg} {index} is out of range for block "{block_name}", which {verb} '
            f"{_listing(block, kind)}",
            func,
            blocks=[block_name],
        )
    return index


def check_scope(func: PrimFunc, primitive: str, scope: str, block_name: str) -> None:
    if not isinstance(scope, str) or scope not in SCOPES:
        raise InvalidStorageScopeError(
            primitive,
            f'unknown storage scope {scope!r} for block "{block_name}" '
            f"(known scopes: {', '.join(SCOPES)})",
            func,
            blocks=[block_name],
        )


def check_allocated(func: PrimFunc, primitive: str, buf: Buffer, block_name: str) -> None:
    """Refuse a function parameter (the caller owns its memory and layout)."""
    if any(p is buf for p in func.params):
        raise NonAllocatedBufferError(
            primitive,
            f'buffer "{buf.name}" written by block "{block_name}" is a parameter of function '
            f'"{func.name}", not allocated by a block; {primitive} works on allocated buffers',
            func,
            blocks=[block_name],
        )


def _reads(block: Block, buf: Buffer) -> bool:
    return any(r.buffer is buf for r in block.reads or ())


def _writes(block: Block, buf: Buffer) -> bool:
    return any(w.buffer is buf for w in block.writes or ())


def _single_writer(
    func: PrimFunc, primitive: str, scope: Block, buf: Buffer, block_name: str
) -> Block | None:
    """The only block directly in ``scope`` that writes ``buf`` (None: an input of the
    scope). Blocks in the scope's ``init`` count as writers too: a second writer there
    (after ``blockize`` of a reduction) would not see the cache."""
    kids = child_block_names(scope)
    writers = [b for b in iter_blocks(scope) if b is not scope and b.name in kids]
    writers = [b for b in writers if _writes(b, buf)]
    if len(writers) > 1:
        names = ", ".join(f'"{b.name}"' for b in writers)
        raise NotSingleWriteBlockError(
            primitive,
            f'buffer "{buf.name}" (used by block "{block_name}") is written by '
            f"{len(writers)} blocks ({names}); {primitive} needs a single producer",
            func,
            blocks=[block_name, *(b.name for b in writers)],
        )
    if writers and any(b is writers[0] for b in scope_blocks(scope)):
        return writers[0]
    return None  # no writer, or only the scope's init writes it: it is ready first thing


def _consumer_set(
    func: PrimFunc,
    primitive: str,
    scope: Block,
    buf: Buffer,
    names: Sequence[str],
    writer: Block | None,
    block_name: str,
) -> tuple[set[str], set[str]]:
    """(names of the consumers and every block nested in them, names of the scope's
    direct children that hold a consumer). Each consumer must read ``buf`` inside
    ``scope`` and not be (or sit in) its producer."""
    every: set[str] = set()
    tops: set[str] = set()
    for name in names:
        path = find_block_path(func, primitive, name)
        consumer: Block = path[-1]  # type: ignore[assignment]
        problem = None
        if not any(s is scope for s in path[:-1]):
            problem = f'is not inside the scope block "{scope.name}" of block "{block_name}"'
        elif not _reads(consumer, buf):
            problem = f'does not read buffer "{buf.name}"'
        else:
            top = path[path.index(scope) + 1 :]
            top_block = next(s for s in top if isinstance(s, Block))
            if writer is not None and top_block is writer:
                problem = f'is (or is inside) block "{writer.name}", which writes "{buf.name}"'
        if problem:
            raise NotConsumerBlockError(
                primitive,
                f'consumer block "{name}" {problem}; consumer_blocks must read the buffer '
                f'"{buf.name}" that {primitive} caches for block "{block_name}"',
                func,
                blocks=[name, block_name],
            )
        tops.add(top_block.name)
        every.update(b.name for b in iter_blocks(consumer))
    return every, tops


# --------------------------------------------------------------------------- location


def _find_position(body: Stmt, writer: str, related: set[str]) -> tuple[list[Stmt], int] | None:
    """Where a copy goes: after the block ``writer`` and before the first of the
    blocks ``related``, in the innermost ``SeqStmt`` holding both (TVM's
    CacheLocDetector). Returns (path from ``body`` to that SeqStmt, index), or None
    when a related block comes first."""
    state = {"writer": False, "related": False}
    found: list[tuple[list[Stmt], int]] = []

    def visit(node: Stmt, path: list[Stmt]) -> None:
        if isinstance(node, Block):
            if node.name == writer:
                state["writer"] = True
            elif node.name in related:
                state["related"] = True
        elif isinstance(node, For):
            visit(node.body, path + [node])
        elif isinstance(node, IfThenElse):
            visit(node.then_case, path + [node])
            if node.else_case is not None and not found:
                visit(node.else_case, path + [node])
        elif isinstance(node, SeqStmt):
            before = state["writer"]
            state["writer"] = False
            for i, child in enumerate(node.stmts):
                visit(child, path + [node])
                if found:
                    break
                if state["writer"] and state["related"]:
                    found.append((path + [node], i))
                    break
                if state["related"]:
                    break
            state["writer"] = state["writer"] or before

    visit(body, [])
    return found[0] if found else None


def _insert(body: Stmt, path: list[Stmt], pos: int, stage: Stmt) -> Stmt:
    """``body`` with ``stage`` inserted at ``pos`` of ``path[-1]`` (a SeqStmt, or
    ``body`` itself when it is a single statement: position 0 or 1)."""
    target = path[-1] if path else body
    if isinstance(target, SeqStmt):
        stmts = target.stmts
        new: Stmt = SeqStmt(stmts[:pos] + (stage,) + stmts[pos:])
    else:
        new = SeqStmt((stage, target) if pos == 0 else (target, stage))
    chain = path if path else [body]
    for parent, old in zip(reversed(chain[:-1]), reversed(chain[1:])):
        new = replace_child(parent, old, new)
    return new


def _path_below(scope: Block, path: list[Stmt]) -> list[Stmt]:
    """The part of a root-to-node ``path`` below ``scope`` (starting at its body)."""
    idx = next(i for i, s in enumerate(path) if s is scope)
    return path[idx + 1 :]


def _nested_predicate(block: Block, buf: Buffer, writes: bool) -> PrimExpr:
    """The predicate under which ``block`` really accesses ``buf`` when that happens in a
    nested block with a ``T.where`` (in ``block``'s iter vars; TVM's
    CollectNestedBlockPredicates). Several such blocks: their disjunction."""
    found: list[PrimExpr] = []

    def visit(b: Block, mapping: dict) -> None:
        for s in child_blocks(b):
            inner = dict(mapping)
            inner.update({iv.var: substitute(v, mapping)
                          for iv, v in zip(s.iter_vars, s.iter_values)})
            regions = s.writes if writes else s.reads
            if any(r.buffer is buf for r in regions or ()):
                found.append(substitute(s.predicate, mapping))
            visit(s, inner)

    visit(block, {})
    if not found:
        return const(True)
    out = found[0]
    for p in found[1:]:
        out = Or(out, p)
    return out


def _cache_region(
    buf: Buffer,
    writer: Block,
    writer_path: list[Stmt],
    container: Stmt,
    writes: bool = True,
    extra: PrimExpr | None = None,
) -> list[tuple[PrimExpr, int]]:
    """(min, extent) per dimension of what ``writer`` produces of ``buf`` (or, with
    ``writes=False``, reads of it) as the loops between ``container`` and ``writer`` run,
    under the writer's predicate and ``extra`` (in the writer's iter vars), clipped to the
    buffer (TVM's RelaxBufferRegion); loops above ``container`` stay symbolic."""
    idx = next((i for i, s in enumerate(writer_path) if s is container), 0)
    dom = {  # a loop of symbolic extent n runs over [min, min + n - 1]
        s.loop_var: (const(s.min, s.loop_var.dtype),
                     simplify(extent_expr(s.extent, s.loop_var.dtype) + (s.min - 1)))
        for s in writer_path[idx:-1]
        if isinstance(s, For)
    }
    bindings = {iv.var: v for iv, v in zip(writer.iter_vars, writer.iter_values)}
    for cond in (writer.predicate, substitute(extra, bindings) if extra is not None else None):
        if cond is not None and not (isinstance(cond, IntImm) and cond.value):
            narrowed = narrow(cond, dom)
            dom = dom if narrowed is EMPTY else narrowed
    regions = [w.region for w in (writer.writes if writes else writer.reads) or ()
               if w.buffer is buf]
    out: list[tuple[PrimExpr, int]] = []
    dt = buf.index_dtype
    for d, dim in enumerate(buf.shape):
        box = EMPTY
        for region in regions:
            mn, ext = region[d]
            lo = eval_interval(simplify(substitute(mn, bindings)), dom)
            hi = eval_interval(simplify(substitute(mn + ext - 1, bindings)), dom)
            piece = None if lo in (None, EMPTY) or hi in (None, EMPTY) else (lo[0], hi[1])
            box = interval_union(box, piece)
        if box is None or box is EMPTY:
            out.append((const(0, dt), dim))
            continue
        lo_e, hi_e = box
        if isinstance(lo_e, IntImm) and isinstance(hi_e, IntImm) and isinstance(dim, int):
            start, stop = max(0, lo_e.value), min(dim, hi_e.value + 1)
            out.append((const(start, dt), max(stop - start, 1)))
            continue
        width = simplify(hi_e - lo_e + 1)
        # a symbolic dimension (n) keeps a tile of known width (``v * 32 + [0, 32)``)
        too_wide = isinstance(width, IntImm) and isinstance(dim, int) and width.value >= dim
        if not isinstance(width, IntImm) or too_wide:
            out.append((const(0, dt), dim))
        else:
            out.append((lo_e, width.value))
    return out


def _copy_stage(
    name: str,
    src: Buffer,
    dst: Buffer,
    region: list[tuple[PrimExpr, int]],
    bounds: dict | None = None,
    compact: Buffer | None = None,
) -> tuple[Stmt, Block]:
    """Loops ``ax0, ax1, ...`` over ``region`` around a block ``name`` doing
    ``dst[v] = src[v]``.

    Normally the block's spatial iter vars ``v0, v1, ...`` range over the full buffer and
    are bound to ``min + ax``. When ``compact`` (the cache buffer, which then has the
    region's shape) is given, they range over the region and index the cache directly
    while the cached buffer is read or written at ``min + v`` (TVM's compact cache stage).

    ``bounds`` are the enclosing loops' ranges: where the box could leave the buffer
    (a tile of a non-dividing split), the copy gets a ``T.where`` guard."""
    full = src if compact is dst else dst
    dt = full.index_dtype  # the new loops and iter vars index the cached buffer
    loop_vars = [Var(f"ax{d}", dt) for d in range(len(region))]
    shape = compact.shape if compact is not None else dst.shape
    ivars = tuple(IterVar(Var(f"v{d}", dt), extent, "S") for d, extent in enumerate(shape))
    known = dict(bounds or {})
    known.update({lv: (0, ext - 1) for lv, (_, ext) in zip(loop_vars, region)})
    if compact is None:
        values = tuple(simplify(mn + lv, known) for (mn, _), lv in zip(region, loop_vars))
        positions = values
    else:
        values = tuple(loop_vars)
        positions = tuple(simplify(mn + lv, known) for (mn, _), lv in zip(region, loop_vars))
    predicate = in_bounds_guard(positions, full.shape, known)
    idx = tuple(iv.var for iv in ivars)
    if compact is None:
        src_idx = dst_idx = idx
    else:
        shifted = tuple(simplify(mn + v) for (mn, _), v in zip(region, idx))
        src_idx, dst_idx = (idx, shifted) if compact is src else (shifted, idx)
    block = Block(name, ivars, values, BufferStore(dst, src[src_idx], dst_idx),
                  predicate=predicate)
    stmt: Stmt = block
    for lv, (_, extent) in reversed(list(zip(loop_vars, region))):
        stmt = For(lv, extent, "serial", stmt)
    return stmt, block


# --------------------------------------------------------------------------- rewriting


class BufferSwap(Mutator):
    """Replace buffers by identity (``mapping``) in the blocks chosen.

    ``targets`` names the blocks whose accesses change (None: every block), inherited
    by blocks nested in them; blocks named in ``skip`` are left untouched, with
    everything inside them. The root block keeps empty regions, as elsewhere.
    """

    def __init__(
        self,
        mapping: dict[Buffer, Buffer],
        targets: set[str] | None = None,
        skip: set[str] = frozenset(),  # type: ignore[assignment]
        offsets: dict[Buffer, tuple[PrimExpr, ...]] | None = None,
    ):
        self.mapping = mapping
        self.targets = targets
        self.skip = skip
        self.active = targets is None
        self.offsets = offsets or {}

    def visit_buffer(self, b: Buffer) -> Buffer:
        return self.mapping.get(b, b) if self.active else b

    def _shifted(self, b: Buffer, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        off = self.offsets.get(b)
        if off is None or not self.active:
            return indices
        return tuple(simplify(i - o) for i, o in zip(indices, off, strict=True))

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, BufferLoad) and e.buffer in self.offsets and self.active:
            idx = tuple(self.visit_expr(i) for i in e.indices)
            return BufferLoad(self.visit_buffer(e.buffer), self._shifted(e.buffer, idx))
        return super().visit_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, BufferStore) and s.buffer in self.offsets and self.active:
            idx = tuple(self.visit_expr(i) for i in s.indices)
            return BufferStore(
                self.visit_buffer(s.buffer), self.visit_expr(s.value), self._shifted(s.buffer, idx)
            )
        return super().visit_stmt(s)

    def visit_block(self, b: Block) -> Block:
        if b.name in self.skip:
            return b
        outer = self.active
        self.active = outer or self.targets is None or b.name in self.targets
        try:
            new = super().visit_block(b)
        finally:
            self.active = outer
        if new is not b and is_root(b):
            return replace(new, reads=(), writes=())
        return new


def swap_buffer(func: PrimFunc, old: Buffer, new: Buffer) -> PrimFunc:
    """``func`` with ``old`` replaced by ``new`` everywhere (allocation included)."""
    return func.with_body(BufferSwap({old: new}).visit_block(func.body))


def _fresh_buffer_name(func: PrimFunc, base: str) -> str:
    return fresh_name(base, {b.name for b in collect_buffers(func)})


def _fresh_block_name(func: PrimFunc, base: str) -> str:
    return fresh_name(base, set(block_names(func)) | {"root"})


def _with_stage(
    func: PrimFunc,
    scope_path: list[Stmt],
    position: tuple[list[Stmt], int],
    stage: Stmt,
    alloc: Buffer,
    swap: BufferSwap,
) -> PrimFunc:
    """Insert ``stage``, rewrite the scope's body with ``swap`` and allocate ``alloc``
    in the scope block."""
    scope: Block = scope_path[-1]  # type: ignore[assignment]
    body = _insert(scope.body, *position, stage)
    body = swap.visit_stmt(body)
    allocs = scope.alloc_buffers + (alloc,)
    if is_root(scope):
        new_scope = replace(scope, body=body, alloc_buffers=allocs, reads=(), writes=())
    else:
        new_scope = replace(scope, body=body, alloc_buffers=allocs, reads=None, writes=None)
    return replace_path(func, scope_path, new_scope)


def _end_of(body: Stmt) -> tuple[list[Stmt], int]:
    if isinstance(body, SeqStmt):
        return [body], len(body.stmts)
    return [], 1


def _prepare(
    func: PrimFunc, prim: str, block_name: str, index: int | str, kind: str, storage_scope: str
) -> tuple[list[Stmt], Buffer, list[Stmt], int]:
    """Checks shared by both primitives: (block path, buffer, scope path, index)."""
    path = find_block_path(func, prim, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    index = resolve_buffer_index(func, prim, block_name, index, kind)
    check_scope(func, prim, storage_scope, block_name)
    buf = _regions(block, kind)[index].buffer  # type: ignore[index]
    scope = scope_of(path)
    scope_path = path[: next(i for i, s in enumerate(path) if s is scope) + 1]
    return path, buf, scope_path, index


def _place(
    func: PrimFunc, prim: str, scope: Block, writer: Block, related: set[str], buf: Buffer
) -> tuple[tuple[list[Stmt], int], Stmt]:
    """(position of the copy, the statement it goes into) after ``writer``: before the
    first ``related`` block, or last in the scope when there is none."""
    if not related:
        position = _end_of(scope.body)
    else:
        found = _find_position(scope.body, writer.name, related)
        if found is None:
            raise ConsumerBeforeProducerError(
                prim,
                f'a block reading "{buf.name}" runs before its producer "{writer.name}" '
                f'writes it; there is no place for the copy of "{buf.name}"',
                func,
                blocks=[writer.name, *sorted(related)],
            )
        position = found
    return position, position[0][-1] if position[0] else scope.body


def _new_cache(func: PrimFunc, buf: Buffer, storage_scope: str) -> tuple[Buffer, str]:
    """A full-size buffer ``<name>_<scope>`` (no storage_align hints) and the name of
    its copy block."""
    base = f"{buf.name}_{storage_scope}"
    cache = Buffer(_fresh_buffer_name(func, base), buf.shape, buf.dtype, storage_scope,
                   index_dtype=buf.index_dtype)
    return cache, _fresh_block_name(func, base)


# --------------------------------------------------------------------------- primitives


def cache_read(
    func: PrimFunc,
    block_name: str,
    read_buffer_index: int,
    storage_scope: str,
    consumer_blocks: Sequence[str] | None = None,
) -> tuple[PrimFunc, str]:
    """Copy the ``read_buffer_index``-th buffer ``block`` reads into a new buffer of
    ``storage_scope``; its consumers read the copy. Returns (new function, name of the
    copy block).

    The new buffer and block are named ``<buffer>_<scope>`` (``A_shared``; caching a
    cache gives ``A_shared_local``); a name already taken gets ``_1``, ``_2``... The
    copy goes right before the first consumer after the buffer's producer, or first in
    the scope when the buffer is an input of the scope. The consumers are every block
    of the scope that reads the buffer (except its producer), or ``consumer_blocks``.

    >>> import workbench as wb
    >>> from workbench.schedule.primitives.cache import cache_read
    >>> func, name = cache_read(wb.workloads.mm_relu(64, 64, 64), "C", 0, "local")
    >>> name, [b.name for b in wb.ir.iter_blocks(func.body)][1:]
    ('Y_local', ['Y', 'Y_local', 'C'])
    """
    prim = "cache_read"
    _, buf, scope_path, _ = _prepare(
        func, prim, block_name, read_buffer_index, "read", storage_scope
    )
    scope: Block = scope_path[-1]  # type: ignore[assignment]
    writer = _single_writer(func, prim, scope, buf, block_name)
    if consumer_blocks:
        targets, related = _consumer_set(
            func, prim, scope, buf, consumer_blocks, writer, block_name
        )
    else:
        targets = None
        related = {b.name for b in scope_blocks(scope) if b is not writer and _reads(b, buf)}
    cache, stage_name = _new_cache(func, buf, storage_scope)
    if writer is None:  # an input of the scope: copy it first thing
        position: tuple[list[Stmt], int] = ([], 0)
        known = [r for r in scope.reads or () if r.buffer is buf] if not is_root(scope) else []
        region = [(const(0, buf.index_dtype), dim) for dim in buf.shape]
        block_path = find_block_path(func, prim, block_name)
        reader: Block = block_path[-1]  # type: ignore[assignment]
        nested = _nested_predicate(reader, buf, writes=False)
        if not (isinstance(nested, IntImm) and nested.value):
            # the read happens under a nested block's T.where: copy what it reads there
            region = _cache_region(buf, reader, _path_below(scope, block_path), scope.body,
                                   writes=False, extra=nested)
        elif known:
            region = [
                (mn, ext.value if isinstance(ext, IntImm) else dim)
                for (mn, ext), dim in zip(known[0].region, buf.shape)
            ]
    else:
        order = [b.name for b in scope_blocks(scope)]
        if related and all(order.index(r) < order.index(writer.name) for r in related):
            # every consumer runs before the buffer is (re)written, e.g. an in-place
            # parameter read then written back: copy it first thing, as TVM does
            position, container = ([], 0), scope.body
        else:
            position, container = _place(func, prim, scope, writer, related, buf)
        writer_path = _path_below(scope, find_block_path(func, prim, writer.name))
        region = _cache_region(buf, writer, writer_path, container)
    cache, offsets = _compact(cache, buf, region, position)
    stage, _ = _copy_stage(stage_name, buf, cache, region, _known(func, scope_path),
                           cache if offsets else None)
    skip = {stage_name}
    if targets is None:  # as TVM: blocks writing the buffer keep it
        skip |= {b.name for b in iter_blocks(scope.body) if _writes(b, buf)}
    swap = BufferSwap({buf: cache}, targets, skip, offsets)
    return _with_stage(func, scope_path, position, stage, cache, swap), stage_name


def cache_write(
    func: PrimFunc,
    block_name: str,
    write_buffer_index: int,
    storage_scope: str,
    consumer_blocks: Sequence[str] | None = None,
) -> tuple[PrimFunc, str]:
    """Make ``block`` compute its ``write_buffer_index``-th output into a new buffer of
    ``storage_scope`` and copy that back with a new block right after it. Returns
    (new function, name of the copy block).

    Names follow ``cache_read`` (``C_local`` for both the buffer and the copy block).
    Consumers keep reading the original buffer, except ``consumer_blocks``, which read
    the cache directly. The copy goes right before the first other consumer, or last
    in the scope when there is none.

    >>> import workbench as wb
    >>> from workbench.schedule.primitives.cache import cache_write
    >>> func, name = cache_write(wb.workloads.matmul(64, 64, 64), "C", 0, "local")
    >>> name, [b.name for b in wb.ir.iter_blocks(func.body)][1:]
    ('C_local', ['C', 'C_local'])
    """
    prim = "cache_write"
    path, buf, scope_path, _ = _prepare(
        func, prim, block_name, write_buffer_index, "write", storage_scope
    )
    block: Block = path[-1]  # type: ignore[assignment]
    scope: Block = scope_path[-1]  # type: ignore[assignment]
    _single_writer(func, prim, scope, buf, block_name)
    if (
        block.init is None
        and any(r.buffer is buf for r in block.reads or ())
        and not _initialised_inside(block, buf)
    ):
        raise InPlaceUpdateError(
            prim,
            f'block "{block_name}" updates "{buf.name}" in place (it reads what it writes) and '
            "the value it starts from is written outside this block (e.g. by the init block "
            "of decompose_reduction); a fresh cache would start uninitialised. Use "
            "cache_write before decompose_reduction.",
            func,
            blocks=[block_name],
        )
    targets = {b.name for b in iter_blocks(block)}
    direct: set[str] = set()
    if consumer_blocks:
        every, direct = _consumer_set(func, prim, scope, buf, consumer_blocks, block, block_name)
        targets |= every
    order = scope_blocks(scope)  # as TVM, only what depends on it: the later readers
    later = order[order.index(block) + 1 :]
    related = {b.name for b in later if _reads(b, buf) and b.name not in direct}
    cache, stage_name = _new_cache(func, buf, storage_scope)
    position, container = _place(func, prim, scope, block, related, buf)
    region = _cache_region(buf, block, _path_below(scope, path), container,
                           extra=_nested_predicate(block, buf, writes=True))
    cache, offsets = _compact(cache, buf, region, position)
    stage, _ = _copy_stage(stage_name, cache, buf, region, _known(func, scope_path),
                           cache if offsets else None)
    swap = BufferSwap({buf: cache}, targets, {stage_name}, offsets)
    return _with_stage(func, scope_path, position, stage, cache, swap), stage_name


def _known(func: PrimFunc, scope_path: list[Stmt]) -> dict:
    """Ranges of every loop, and of the iter vars of the blocks around the scope (a tile
    region ``i * 16 + ax0`` inside a block over ``i`` in [0, 8) stays in bounds)."""
    known = loop_bounds(func)
    for s in scope_path:
        if isinstance(s, Block):  # (a symbolic extent gives a symbolic end, n - 1)
            known.update({iv.var: (0, iv.extent - 1) for iv in s.iter_vars})
    return known


def _compact(cache: Buffer, buf: Buffer, region, position) -> tuple[Buffer, dict]:
    """TVM's compact cache: a copy placed directly in the scope block's body (not in a
    loop) caches just the region, in a buffer of the region's shape, and every access of
    the cache is shifted by the region's start. Returns the cache buffer and the index
    offsets (empty when the cache keeps the full shape)."""
    path, _ = position
    if any(isinstance(x, (For, IfThenElse)) for x in path):
        return cache, {}
    shape = tuple(ext for _, ext in region)
    mins = tuple(mn for mn, _ in region)
    if shape == tuple(buf.shape) and all(isinstance(m, IntImm) and m.value == 0 for m in mins):
        return cache, {}
    if not all(isinstance(e, int) for e in shape):
        return cache, {}
    return cache.with_(shape=shape), {buf: mins}


def _initialised_inside(block: Block, buf: Buffer) -> bool:
    """Does ``block`` write ``buf`` before reading it: is the first block inside it (in
    program order, innermost blocks only) that touches ``buf`` one that writes it without
    reading it (an init block, as after ``decompose_reduction`` then ``blockize``)? Then
    a cache that replaces ``buf`` inside ``block`` is written before it is read."""
    for b in iter_blocks(block.body):
        if b is block or any(x is not b for x in iter_blocks(b.body)):
            continue
        reads = any(r.buffer is buf for r in b.reads or ())
        writes = any(w.buffer is buf for w in b.writes or ())
        if reads or writes:
            return writes and not reads
    return False


def set_scope(func: PrimFunc, block_name: str, buffer_index: int, storage_scope: str) -> PrimFunc:
    """Move the ``buffer_index``-th buffer ``block`` writes to ``storage_scope``.

    The buffer must be allocated by a block (not a function parameter). It is renamed
    ``<name>_<scope>`` as TVM does (``B`` becomes ``B_shared``) and replaced wherever
    it is used. Setting the scope it already has changes nothing.

    >>> import workbench as wb
    >>> from workbench.schedule.primitives.cache import set_scope
    >>> func = set_scope(wb.workloads.mm_relu(64, 64, 64), "Y", 0, "shared")
    >>> func.body.alloc_buffers
    (Buffer('Y_shared', (64, 64), 'float32', scope='shared'),)
    """
    prim = "set_scope"
    path = find_block_path(func, prim, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    index = resolve_buffer_index(func, prim, block_name, buffer_index, "write", "buffer_index")
    buf = block.writes[index].buffer  # type: ignore[index]
    if storage_scope == buf.scope:
        return func
    check_scope(func, prim, storage_scope, block_name)
    check_allocated(func, prim, buf, block_name)
    taken = {b.name for b in collect_buffers(func)}
    mapping = {buf: buf.with_(scope=storage_scope,
                              name=fresh_name(f"{buf.name}_{storage_scope}", taken))}
    # views of the buffer (a block's T.match_buffer, or a view of a view) move with it
    for blk in iter_blocks(func.body):
        for m in blk.match_buffers:
            if m.source.buffer in mapping and m.buffer not in mapping:
                view = m.buffer
                mapping[view] = view.with_(
                    scope=storage_scope, name=fresh_name(f"{view.name}_{storage_scope}", taken)
                )
    return func.with_body(ViewSwap(mapping).visit_block(func.body))


class ViewSwap(BufferSwap):
    """BufferSwap that also replaces the view buffer of a ``T.match_buffer``."""

    def visit_match_buffer(self, m: MatchBufferRegion) -> MatchBufferRegion:
        new = super().visit_match_buffer(m)
        view = self.mapping.get(m.buffer)
        if view is None:
            return new
        return MatchBufferRegion(view, new.source, new.offset_factor)


__all__ = [
    "BufferIndexOutOfRangeError",
    "BufferNotAccessedError",
    "ConsumerBeforeProducerError",
    "InPlaceUpdateError",
    "InvalidStorageScopeError",
    "NonAllocatedBufferError",
    "NotConsumerBlockError",
    "NotSingleWriteBlockError",
    "resolve_buffer_index",
    "cache_read",
    "cache_write",
    "set_scope",
    "swap_buffer",
]
