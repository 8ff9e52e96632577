"""Padding an einsum's iteration space: pad_einsum.

An einsum-like block accesses every buffer at plain iter vars (or constants):
``C[i, j] = C[i, j] + A[i, k] * B[k, j]``. ``pad_einsum(block, padding)`` rounds each
iter var's extent up to a multiple of ``padding[k]`` (127 -> 128 for 32; a symbolic
``n`` -> ``(n + 31) // 32 * 32``), and the loops bound straight to those iter vars with
it. Each buffer the block accesses along a padded iter var gets a padded copy
``<name>_pad``, as in TVM:

* a read buffer is copied in by a new block ``<name>_pad`` placed before the block's
  loop nest, zero where the copy is larger than the original
  (``A_pad[v0, v1] = T.if_then_else(v1 < 127, A[v0, v1], T.float32(0))``);
* a written buffer is computed into its padded copy and copied back by a block
  ``<name>_pad`` after the nest (only the original extent).

So the padded block never reads or writes out of bounds. Another block in the same
loop nest that accesses a padded buffer is refused (TVM redirects it to the copy too,
which breaks a producer computed there). Padding a reduce iter var
adds terms computed from the zero padding; as that must not change the result, the
workbench (unlike TVM, which does not check) accepts it only for a sum whose added term
is zero when the loads along that iter var are zero (a product or sum of them).

Before (``A`` 128x127, ``B`` 127x127)::

    for i, j, k in T.grid(128, 127, 127):
        with T.block("C"):
            ...
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

after ``pad_einsum(C, [32, 32, 32])``: blocks ``A_pad`` and ``B_pad`` fill 128x128
copies, ``C`` runs over ``T.grid(128, 128, 128)`` into ``C_pad``, and block ``C_pad``
copies its 128x127 part back into ``C``.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, Buffer, BufferStore, For, IterVar, PrimFunc, SeqStmt, Stmt, Var
from ...ir.analysis import collect_buffers
from ...ir.expr import (
    Add,
    And,
    BufferLoad,
    IntImm,
    PrimExpr,
    const,
    extent_expr,
    if_then_else,
    is_float,
)
from ...ir.functor import Mutator, iter_exprs
from ...ir.simplify import simplify, struct_key
from ..errors import ScheduleError
from ._common import (
    check_starts_at_zero,
    find_block_path,
    fresh_name,
    is_root,
    replace_path,
    scope_of,
    used_names,
)


class InvalidPaddingError(ScheduleError, ValueError):
    """``pad_einsum``: the padding is not one positive integer per iter var."""


class NonEinsumError(ScheduleError):
    """``pad_einsum``: the block is not an einsum (an access not at plain iter vars, a
    buffer accessed twice, or read and written)."""


class PaddedBufferSharedError(ScheduleError):
    """``pad_einsum``: another block in the block's loop nest accesses a buffer the
    padding copies (TVM rewrites it too, which breaks a producer there)."""


class PaddedReductionError(ScheduleError):
    """``pad_einsum``: padding a reduce iter var would add non-zero terms to the
    reduction (it is not a sum of terms that vanish on the zero padding)."""


def _same(a, b) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return struct_key(simplify(extent_expr(a))) == struct_key(simplify(extent_expr(b)))


def _trivial(region) -> bool:
    """Every dimension is one point at a constant or a plain variable."""
    for mn, ext in region:
        if not (isinstance(ext, IntImm) and ext.value == 1) and ext != 1:
            return False
        if not isinstance(mn, (IntImm, Var)):
            return False
    return True


def _padded_extent(ext, pad: int):
    if isinstance(ext, int):
        return -(-ext // pad) * pad
    if pad == 1:
        return ext
    return simplify((ext + (pad - 1)) // pad) * pad


class _Replacer(Mutator):
    """Swap buffers for their padded copies; pad iter vars and the loops bound to them."""

    def __init__(self, buffers: dict, iter_ext: dict, loop_ext: dict):
        self.buffers, self.iter_ext, self.loop_ext = buffers, iter_ext, loop_ext

    def visit_buffer(self, b: Buffer) -> Buffer:
        return self.buffers.get(b, b)

    def visit_stmt(self, s: Stmt) -> Stmt:
        s = super().visit_stmt(s)
        if isinstance(s, For) and s.loop_var in self.loop_ext:
            return replace(s, extent=self.loop_ext[s.loop_var])
        return s

    def visit_block(self, b: Block) -> Block:
        new = super().visit_block(b)
        if any(iv.var in self.iter_ext for iv in b.iter_vars):
            ivs = tuple(replace(iv, extent=self.iter_ext.get(iv.var, iv.extent))
                        for iv in new.iter_vars)
            new = replace(new, iter_vars=ivs)
        return new


def _copy_block(name: str, src: Buffer, dst: Buffer, is_read: bool) -> Stmt:
    """Loops over the destination's shape (read: the padded copy's; write: the
    original's) copying ``src`` into ``dst``; a read copy is zero outside ``src``."""
    shape = dst.shape
    dtype = src.index_dtype if src.index_dtype == dst.index_dtype else "int64"
    loop_vars = [Var(f"i{d}", dtype) for d in range(len(shape))]
    ivs = [IterVar(Var(f"v{d}", dtype), ext) for d, ext in enumerate(shape)]
    idx = tuple(iv.var for iv in ivs)
    if is_read:
        pred: PrimExpr = const(True)
        for d, iv in enumerate(ivs):
            if not _same(src.shape[d], dst.shape[d]):
                c = iv.var < extent_expr(src.shape[d], dtype)
                pred = _and(pred, c)
        load: PrimExpr = BufferLoad(src, idx)
        zero = const(0, src.dtype) if not is_float(src.dtype) else const(0.0, src.dtype)
        value = load if isinstance(pred, IntImm) else if_then_else(pred, load, zero)
        body: Stmt = BufferStore(dst, value, idx)
    else:
        body = BufferStore(dst, BufferLoad(src, idx), idx)
    stmt: Stmt = Block(name, tuple(ivs), tuple(loop_vars), body)
    for v, ext in zip(reversed(loop_vars), reversed(shape), strict=True):
        stmt = For(v, ext, "serial", stmt)
    return stmt


def _and(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return b if isinstance(a, IntImm) and a.value else And(a, b)


def _check_reduction(func: PrimFunc, block: Block, padded_reduce: list[Var],
                     pad_reads: set[Buffer]) -> None:
    """A padded reduce iter var must only add zeros: ``out = out + e`` with ``e`` zero
    once the padded loads along that var are zero."""
    p = "pad_einsum"
    names = ", ".join(f'"{v.name}"' for v in padded_reduce)

    def refuse(why: str) -> PaddedReductionError:
        return PaddedReductionError(
            p, f'padding reduce iter var {names} of block "{block.name}" would change its '
            f"result: {why}", func, blocks=[block.name])

    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, Add):
        raise refuse("its update is not a sum `out = out + term`")
    a, b = store.value.a, store.value.b

    def is_self(x: PrimExpr) -> bool:
        return (isinstance(x, BufferLoad) and x.buffer is store.buffer
                and all(struct_key(i) == struct_key(j)
                        for i, j in zip(x.indices, store.indices, strict=True)))

    term = b if is_self(a) else a if is_self(b) else None
    if term is None:
        raise refuse("its update is not a sum `out = out + term`")
    rvars = set(padded_reduce)

    class _Zero(Mutator):
        def visit_expr(self, e: PrimExpr) -> PrimExpr:
            if isinstance(e, BufferLoad) and e.buffer in pad_reads and any(
                isinstance(x, Var) and x in rvars for i in e.indices for x in iter_exprs(i)
            ):
                return const(0, e.dtype) if not is_float(e.dtype) else const(0.0, e.dtype)
            e = super().visit_expr(e)
            return simplify(e)

    zeroed = _Zero().visit_expr(term)
    if not (hasattr(zeroed, "value") and zeroed.value == 0):
        raise refuse(f"its term {term} is not zero where the padded inputs are zero")


def _check_shared_nest(func: PrimFunc, block: Block, top: Stmt,
                       mapping: dict[Buffer, Buffer]) -> None:
    """Refuse when another block in the statement that gets rewritten (the loop nest
    holding ``block``) accesses a buffer that gets a padded copy: its accesses would be
    redirected to the copy, which is filled before the nest (so a producer there would
    write the copy after it was taken) or stored back after it."""
    from ...ir.analysis import iter_blocks

    for other in iter_blocks(top):
        if other is block:
            continue
        for r in (*(other.reads or ()), *(other.writes or ())):
            if r.buffer in mapping:
                raise PaddedBufferSharedError(
                    "pad_einsum", f'block "{other.name}" shares the loop nest of block '
                    f'"{block.name}" and accesses buffer "{r.buffer.name}", which the '
                    f'padding replaces by "{mapping[r.buffer].name}" in that nest only',
                    func, blocks=[block.name, other.name])


def pad_einsum(func: PrimFunc, block_name: str, padding) -> PrimFunc:
    """Pad the iteration space of einsum block ``block_name`` to multiples of
    ``padding`` (one positive integer per iter var), with padded copies of the buffers
    it accesses along padded iter vars (see the module docstring).

    >>> import workbench as wb
    >>> f = pad_einsum(wb.workloads.matmul(30, 30, 30), "C", [32, 32, 32])
    >>> [b.shape for b in f.body.alloc_buffers]
    [(32, 32), (32, 32), (32, 32)]
    """
    p = "pad_einsum"
    path = find_block_path(func, p, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    n = len(block.iter_vars)
    pads = list(padding) if isinstance(padding, (list, tuple)) else None
    if (pads is None or len(pads) != n
            or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in pads)):
        raise InvalidPaddingError(
            p, f'the padding {padding!r} for block "{block_name}" is invalid: it should be a '
            f"list of {n} positive integers (one per iter var)", func, blocks=[block_name])
    # the copies run over whole buffers and padded loops from 0: a loop_partition piece
    # (a loop not starting at 0) would be padded past its end and copied back entirely
    check_starts_at_zero(func, p, path)
    # the einsum pattern
    seen: set[Buffer] = set()
    for regions in (block.reads or (), block.writes or ()):
        for r in regions:
            if r.buffer in seen or not _trivial(r.region):
                why = (f"it accesses {r.buffer.name} twice" if r.buffer in seen else
                       f"its access to {r.buffer.name} is not at plain iter vars")
                raise NonEinsumError(
                    p, f'block "{block_name}" is not an einsum: {why}', func,
                    blocks=[block_name])
            seen.add(r.buffer)
    # the padded extents
    iter_ext: dict[Var, object] = {}
    loop_ext: dict[Var, object] = {}
    padded_reduce = []
    for iv, value, pad in zip(block.iter_vars, block.iter_values, pads, strict=True):
        new = _padded_extent(iv.extent, pad)
        if _same(new, iv.extent):
            continue
        iter_ext[iv.var] = new
        if iv.kind == "R":
            padded_reduce.append(iv.var)
        if isinstance(value, Var):
            iter_ext[value] = new
            loop_ext[value] = new
    if not iter_ext:
        return func
    orig_ext = {iv.var: iv.extent for iv in block.iter_vars}

    def needs(region) -> bool:
        return any(isinstance(mn, Var) and mn in iter_ext for mn, _ in region)

    taken_buffers = {b.name for b in collect_buffers(func)}
    taken_blocks = used_names(func)
    mapping: dict[Buffer, Buffer] = {}
    before: list[Stmt] = []
    after: list[Stmt] = []
    allocs: list[Buffer] = []
    for is_read, regions in ((True, block.reads or ()), (False, block.writes or ())):
        for r in regions:
            if not needs(r.region):
                continue
            buf = r.buffer
            shape = []
            for d, (mn, _) in enumerate(r.region):
                if isinstance(mn, IntImm):
                    shape.append(1)
                elif mn in iter_ext:
                    if not _same(orig_ext[mn], buf.shape[d]):
                        # the copies run over the whole buffer, the padded one over the
                        # iteration: they must agree (a loop_partition piece does not)
                        raise NonEinsumError(
                            p, f'block "{block_name}" iterates {mn.name} over '
                            f"{orig_ext[mn]} values but indexes the {buf.shape[d]} of "
                            f"{buf.name}'s dimension {d} with it; pad_einsum pads a block "
                            "that covers the buffers it pads", func, blocks=[block_name])
                    shape.append(iter_ext[mn])
                else:
                    shape.append(buf.shape[d])
            name = fresh_name(f"{buf.name}_pad", taken_buffers)
            padded = Buffer(name, tuple(shape), buf.dtype, buf.scope,
                            index_dtype=buf.index_dtype)
            mapping[buf] = padded
            allocs.append(padded)
            block_name_new = fresh_name(name, taken_blocks)
            if is_read:
                before.append(_copy_block(block_name_new, buf, padded, True))
            else:
                after.append(_copy_block(block_name_new, padded, buf, False))
    if padded_reduce:
        _check_reduction(func, block, padded_reduce,
                         {r.buffer for r in block.reads or () if needs(r.region)})
    # the statement of the scope that holds the block
    scope = scope_of(path)
    k = path.index(scope)
    top = path[k + 1]
    body = scope.body
    stmts = list(body.stmts) if isinstance(body, SeqStmt) else [body]
    if isinstance(body, SeqStmt):
        top = path[k + 2]
    pos = next(i for i, s in enumerate(stmts) if s is top)
    _check_shared_nest(func, block, stmts[pos], mapping)
    new_top = _Replacer(mapping, iter_ext, loop_ext).visit_stmt(stmts[pos])
    stmts[pos:pos + 1] = before + [new_top] + after
    new_body = SeqStmt(tuple(stmts))
    if is_root(scope):
        new_scope = Block(scope.name, (), (), new_body, None, scope.predicate,
                          scope.alloc_buffers + tuple(allocs), scope.annotations, (), ())
    else:
        new_scope = scope.with_body(new_body, alloc_buffers=scope.alloc_buffers + tuple(allocs))
    return replace_path(func, path[: k + 1], new_scope)


__all__ = ["InvalidPaddingError", "NonEinsumError", "PaddedBufferSharedError",
           "PaddedReductionError", "pad_einsum"]
