"""Inlining: compute_inline and reverse_compute_inline.

``compute_inline(B)`` removes producer ``B`` and substitutes its expression into
every read of its buffer; ``reverse_compute_inline(C)`` removes consumer ``C`` and
folds its computation into the store of its only producer.

Before and after ``compute_inline(B)`` with ``B = A * 2`` and ``C = B + 1``::

    with T.block("B"):                      with T.block("C"):
        B[vi, vj] = A[vi, vj] * 2               C[vi, vj] = A[vi, vj] * 2 + 1
    with T.block("C"):
        C[vi, vj] = B[vi, vj] + 1

The rules are TVM's:

* compute_inline: the producer's store indices are its iter vars, or any map of them
  that visits each element once (``B[vj, vi]``, ``B[vi // 16, vi % 16]``); its predicate
  does not matter (the values are a function of the indices).
* reverse_compute_inline: the consumer reads the producer's buffer at one affine map of
  its iter vars (``B[(vi * 32 + vj) // 128, (vi * 32 + vj) % 128]``) and has no predicate;
  the map is inverted onto the producer's store indices. Where the producer computes more
  than the consumer's domain (a padded or split loop), the producer gets the predicate
  that keeps it inside the consumer's domain, ``T.where(i < 127)``, so it never writes
  past the consumer's output. A producer that covers less than the consumer's domain is
  refused. A producer with an init (a complete block: only spatial iter vars) takes the
  consumer into both its init and its update when the consumer copies the value
  unchanged (a transpose, a reshape), as TVM does. Deliberate divergence: TVM folds any
  consumer that way, so ``C = B + 1`` would add 1 to the init and again to the update;
  we refuse a consumer that computes on the value there.

The inlined buffer's allocation disappears with its block.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import (
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    IfThenElse,
    IntImm,
    PrimExpr,
    PrimFunc,
    Var,
)
from ...ir.expr import GE, LT, And, FloorDiv, const, extent_expr, is_static
from ...ir.functor import Mutator, iter_exprs, substitute
from ...ir.intset import EMPTY, eval_interval, prove_le
from ...ir.iter_map import detect_iter_map, inverse_iter_map
from ...ir.simplify import and_, simplify, struct_key
from ..errors import ScheduleError
from ._common import (
    consumers_of,
    find_block_path,
    producers_of,
    remove_alloc,
    remove_stmt,
    replace_path,
    scope_blocks,
    scope_of,
)


class NotInlinableError(ScheduleError):
    """The block's shape does not allow inlining (reduction, several stores...)."""


class OutputBlockError(ScheduleError):
    """The block writes a function parameter, so it cannot disappear."""


class NonInjectiveIndexError(ScheduleError):
    """The block's indices are not a one-to-one map of its iter vars, so they cannot be
    inverted."""


class ProducerNotCoveringError(ScheduleError):
    """reverse_compute_inline: the producer computes only part of the consumer's domain,
    so folding the consumer into it would leave outputs uncomputed."""


class OpaqueAccessError(ScheduleError):
    """The buffer to inline is accessed opaquely (``B.data``, ``T.tvm_access_ptr``), an
    access the primitive cannot rewrite (TVM's OpaqueAccessError)."""


class BufferMatchedError(ScheduleError):
    """The buffer to inline is matched (``T.match_buffer``) by a block, an access the
    primitive cannot rewrite."""


def _single_store(primitive: str, func: PrimFunc, block: Block) -> BufferStore:
    if block.init is not None or block.is_reduction:
        raise NotInlinableError(
            primitive,
            f'block "{block.name}" is a reduction block; only complete blocks can be inlined',
            func,
            blocks=[block.name],
        )
    if not isinstance(block.body, BufferStore):
        raise NotInlinableError(
            primitive,
            f'block "{block.name}" has a body other than a single store',
            func,
            blocks=[block.name],
        )
    return block.body


def _is_true(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and bool(e.value)


def _allocated(func: PrimFunc, buffer: Buffer) -> bool:
    return buffer not in func.params


def _check_not_matched(primitive: str, func: PrimFunc, scope: Block, buf: Buffer, name: str):
    from ...ir.analysis import iter_blocks
    from ...ir.expr import BufferField
    from ...ir.functor import iter_stmts, stmt_exprs

    for b in iter_blocks(scope):  # TVM's OpaqueAccessError: B.data, T.tvm_access_ptr(B.data)
        own = [s for s in iter_stmts(b.body, enter_blocks=False)] + (
            list(iter_stmts(b.init, enter_blocks=False)) if b.init is not None else []
        )
        for s in own:
            if any(isinstance(x, BufferField) and x.buffer is buf
                   for e in stmt_exprs(s) for x in iter_exprs(e)):
                raise OpaqueAccessError(
                    primitive,
                    f'buffer "{buf.name}" of block "{name}" is accessed opaquely by block '
                    f'"{b.name}" (through {buf.name}.data); that access cannot be rewritten',
                    func,
                    blocks=[name, b.name],
                )
    for b in iter_blocks(scope):
        for m in getattr(b, "match_buffers", ()) or ():
            if m.source.buffer is buf:
                raise BufferMatchedError(
                    primitive,
                    f'buffer "{buf.name}" of block "{name}" is matched by block "{b.name}" '
                    "(T.match_buffer); its accesses there cannot be rewritten",
                    func,
                    blocks=[name, b.name],
                )


class _ReplaceLoads(Mutator):
    """Replace every load of ``buffer`` by ``make(indices)``."""

    def __init__(self, buffer: Buffer, make):
        self.buffer = buffer
        self.make = make

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, BufferLoad) and e.buffer is self.buffer:
            return self.make(tuple(self.visit_expr(i) for i in e.indices))
        return super().visit_expr(e)


def _iter_extents(block: Block) -> dict[Var, int]:
    return {iv.var: iv.extent for iv in block.iter_vars}


def _store_inverse(primitive: str, func: PrimFunc, block: Block, store: BufferStore):
    """(placeholders, value): the producer's value as a function of its store indices.

    The fast path is TVM's: indices that are the iter vars in order (or 0 for a unit iter
    var). Otherwise the indices must be a bijective affine map of the iter vars, which is
    inverted onto placeholder variables, one per index."""
    ivs = block.iter_vars
    indices = list(store.indices)
    # a unit dimension of the buffer written at 0 (a reindex copy's leading 0) needs no
    # iter var: it gets a placeholder of its own, which the value does not use
    unit = [n for n, (idx, dim) in enumerate(zip(indices, store.buffer.shape, strict=False))
            if is_static(dim) and dim == 1 and isinstance(idx, IntImm) and not idx.value]
    spare = {n: Var(f"ph_{n}", indices[n].dtype) for n in unit} \
        if len(indices) - len(unit) == len(ivs) < len(indices) else {}
    kept = [i for n, i in enumerate(indices) if n not in spare]
    if len(ivs) == len(kept) and all(
        idx is iv.var or (iv.extent == 1 and isinstance(idx, IntImm) and idx.value == 0)
        for idx, iv in zip(kept, ivs, strict=True)
    ):
        it = iter(ivs)
        holders = [spare[n] if n in spare else next(it).var for n in range(len(indices))]
        zeros = {iv.var: const(0, iv.var.dtype) for iv, i in zip(ivs, kept)
                 if i is not iv.var}
        return holders, substitute(store.value, zeros)
    m = detect_iter_map(store.indices, _iter_extents(block), bijective=True)
    holders = [Var(f"ph_{k}", i.dtype) for k, i in enumerate(store.indices)]
    inverse = inverse_iter_map(m, holders) if m is not None else None
    if inverse is None:
        shown = ", ".join(str(i) for i in store.indices)
        raise NonInjectiveIndexError(
            primitive,
            f'block "{block.name}" writes "{store.buffer.name}" at [{shown}]; inlining needs '
            "the indices to visit each element once (a one-to-one map of its iter vars)",
            func,
            blocks=[block.name],
        )
    for iv in ivs:
        if iv.extent == 1:
            inverse.setdefault(iv.var, const(0, iv.var.dtype))
    return holders, substitute(store.value, inverse)


def compute_inline(func: PrimFunc, block_name: str) -> PrimFunc:
    """Inline producer ``block_name`` into all of its consumers."""
    p = "compute_inline"
    path = find_block_path(func, p, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    store = _single_store(p, func, block)
    buf = store.buffer
    if not _allocated(func, buf):
        raise OutputBlockError(
            p,
            f'block "{block_name}" writes the function output "{buf.name}"; only blocks '
            "writing an intermediate buffer can be inlined",
            func,
            blocks=[block_name],
        )
    if any(isinstance(x, BufferLoad) and x.buffer is buf for x in iter_exprs(store.value)):
        raise NotInlinableError(
            p, f'block "{block_name}" reads the buffer it writes', func, blocks=[block_name]
        )
    scope = scope_of(path)
    siblings = scope_blocks(scope)
    for other in siblings:
        if other is not block and any(w.buffer is buf for w in other.writes or ()):
            raise NotInlinableError(
                p,
                f'buffer "{buf.name}" is also written by block "{other.name}"',
                func,
                blocks=[block_name, other.name],
            )
    _check_not_matched(p, func, scope, buf, block_name)
    holders, value = _store_inverse(p, func, block, store)

    def make(indices):
        return substitute(value, dict(zip(holders, indices, strict=True)))

    func = remove_stmt(func, path, p)
    new_root = _ReplaceLoads(buf, make).visit_stmt(func.body)
    func = func.with_body(new_root)  # type: ignore[arg-type]
    return remove_alloc(func, buf)


# ---------------------------------------------------------------------------
# reverse_compute_inline


def _producer_store(primitive, func, block: Block, producer: Block):
    """The producer's store, the condition of the ``if`` around it (TVM accepts a body
    ``if cond: B[...] = ...`` without else) and its init store (or None).

    A producer with an init is accepted when, as TVM requires, it is still a complete
    block (only spatial iter vars) and its init is one store of the same element; the
    consumer is then folded into both (see :func:`reverse_compute_inline`)."""
    body, cond = producer.body, None
    if isinstance(body, IfThenElse) and body.else_case is None:
        body, cond = body.then_case, body.condition

    def refuse(kind: str) -> NotInlinableError:
        return NotInlinableError(
            primitive,
            f'block "{block.name}" cannot be folded into its producer "{producer.name}", '
            f"which is {kind}",
            func,
            blocks=[block.name, producer.name],
        )

    if producer.is_reduction:
        raise refuse("a reduction (not a complete block: it has a reduce iter var)")
    if not isinstance(body, BufferStore):
        raise refuse("not a single store")
    init = producer.init
    if init is not None and not (
        cond is None
        and isinstance(init, BufferStore)
        and init.buffer is body.buffer
        and [struct_key(i) for i in init.indices] == [struct_key(i) for i in body.indices]
    ):
        raise refuse("a block whose init is not a single store of the element it updates")
    return body, cond, init


def reverse_compute_inline(func: PrimFunc, block_name: str) -> PrimFunc:
    """Fold consumer ``block_name`` into the store of its only producer."""
    p = "reverse_compute_inline"
    path = find_block_path(func, p, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    store = _single_store(p, func, block)
    if not _is_true(block.predicate):
        raise NotInlinableError(
            p,
            f'block "{block_name}" has a predicate (T.where); it cannot be folded into its '
            "producer",
            func,
            blocks=[block_name],
        )
    scope = scope_of(path)
    siblings = scope_blocks(scope)
    producers = producers_of(block, siblings)
    if len(producers) != 1:
        names = ", ".join(f'"{b.name}"' for b in producers) or "none"
        raise NotInlinableError(
            p,
            f'block "{block_name}" must have exactly one producer block, it has {names}',
            func,
            blocks=[block_name, *(b.name for b in producers)],
        )
    producer = producers[0]
    pstore, pcond, pinit = _producer_store(p, func, block, producer)
    buf = pstore.buffer
    if pinit is not None and not (
        isinstance(store.value, BufferLoad) and store.value.buffer is buf
    ):
        raise NotInlinableError(
            p,
            f'block "{block_name}" computes {store.value} from "{buf.name}"; it can be folded '
            f'into producer "{producer.name}", which has an init, only if it copies the value '
            "unchanged (a transpose or reshape): folded into both the init and the update, "
            "anything else would be applied twice",
            func,
            blocks=[block_name, producer.name],
        )
    if not _allocated(func, buf):
        raise OutputBlockError(
            p,
            f'block "{block_name}" cannot be folded into its producer "{producer.name}", '
            f'which writes the function output "{buf.name}"',
            func,
            blocks=[block_name, producer.name],
        )
    others = [c.name for c in consumers_of(producer, siblings) if c is not block]
    if others:
        quoted = ", ".join(f'"{o}"' for o in others)
        raise NotInlinableError(
            p,
            f'block "{block_name}" cannot be folded into "{producer.name}": buffer '
            f'"{buf.name}" is also read by {quoted}',
            func,
            blocks=[block_name, *others],
        )
    _check_not_matched(p, func, scope, buf, block_name)
    loads = [x for x in iter_exprs(store.value) if isinstance(x, BufferLoad) and x.buffer is buf]
    loads += [
        x
        for i in store.indices
        for x in iter_exprs(i)
        if isinstance(x, BufferLoad) and x.buffer is buf
    ]
    keys = {tuple(struct_key(i) for i in x.indices) for x in loads}
    if len(keys) != 1:
        raise NonInjectiveIndexError(
            p,
            f'block "{block_name}" reads "{buf.name}" at several different indices',
            func,
            blocks=[block_name, producer.name],
        )
    load_indices = loads[0].indices
    mapping = _direct_inverse(block, load_indices, pstore.indices, buf.shape)
    if mapping is None and all(is_static(iv.extent) for iv in block.iter_vars):
        m = detect_iter_map(load_indices, _iter_extents(block), bijective=False)
        mapping = inverse_iter_map(m, pstore.indices) if m is not None else None
    for iv in block.iter_vars:
        if is_static(iv.extent) and iv.extent == 1 and mapping is not None:
            mapping.setdefault(iv.var, const(0, iv.var.dtype))
    missing = [] if mapping is None else [iv for iv in block.iter_vars if iv.var not in mapping]
    if mapping is None or missing:
        shown = ", ".join(str(i) for i in load_indices)
        raise NonInjectiveIndexError(
            p,
            f'block "{block_name}" reads "{buf.name}" at [{shown}]; the producer\'s store cannot '
            "be mapped back onto every iter var of the block (the indices must be an affine "
            "map that uses them all)",
            func,
            blocks=[block_name, producer.name],
        )
    pbounds = {iv.var: (0, iv.extent - 1) for iv in producer.iter_vars}
    pdom = {v: (const(0, v.dtype), extent_expr(hi, v.dtype)) for v, (_, hi) in pbounds.items()}
    shape_bounds = {v: (1, None) for v in func.shape_vars}
    in_bounds: PrimExpr = const(True)
    for iv in block.iter_vars:
        e = simplify(mapping[iv.var], pbounds)
        r = eval_interval(e, pdom, pbounds)
        if r is None or r is EMPTY:
            continue
        last = extent_expr(iv.extent, e.dtype) - 1
        short = (
            r[1].value < iv.extent - 1
            if isinstance(r[1], IntImm) and is_static(iv.extent)
            else prove_le(r[1] + 1, last, {**pbounds, **shape_bounds})
        )
        if (isinstance(r[0], IntImm) and r[0].value > 0) or short:
            raise ProducerNotCoveringError(
                p,
                f'block "{producer.name}" computes only part of the domain of block '
                f'"{block_name}" ("{iv.var.name}" in [0, {iv.extent}) would come from '
                f"[{r[0]}, {r[1]}]); it cannot take over that block's work",
                func,
                blocks=[block_name, producer.name],
            )
        if not prove_le(const(0, e.dtype), e, pbounds):
            in_bounds = and_(in_bounds, GE(e, const(0, e.dtype)))
        if not prove_le(e, last, pbounds):
            in_bounds = and_(in_bounds, LT(e, extent_expr(iv.extent, e.dtype)))
    value = _ReplaceLoads(buf, lambda _idx: pstore.value).visit_expr(store.value)
    value = substitute(value, mapping)
    indices = tuple(simplify(substitute(i, mapping), pbounds) for i in store.indices)
    if pinit is None:
        new_store = BufferStore(store.buffer, value, indices)
    else:  # a copy folded into init and update: both now work on the consumer's buffer
        into = _ReplaceLoads(buf, lambda _idx: BufferLoad(store.buffer, indices))
        new_store = BufferStore(store.buffer, into.visit_expr(pstore.value), indices)
    new_producer = _with_predicate(producer, new_store, pcond, in_bounds)
    if pinit is not None:
        new_init = BufferStore(store.buffer, pinit.value, indices)
        new_producer = replace(new_producer, init=new_init, reads=None, writes=None)
    func = remove_stmt(func, path, p)
    ppath = find_block_path(func, p, producer.name)
    func = replace_path(func, ppath, new_producer)
    return remove_alloc(func, buf)


def _direct_inverse(block: Block, load_indices, store_indices, shape=None) -> dict | None:
    """TVM's trivial case, which needs no iter map (and so works for symbolic extents):
    the consumer reads the buffer at its iter vars in order (a unit iter var may be read
    at 0, and a unit dimension of the buffer is read at 0 by no iter var). Then each
    iter var is the producer's store index at its position."""
    ivs = block.iter_vars
    if shape is not None and len(load_indices) == len(shape) == len(store_indices):
        keep = [n for n, (idx, dim) in enumerate(zip(load_indices, shape, strict=True))
                if not (is_static(dim) and dim == 1 and isinstance(idx, IntImm)
                        and not idx.value)]
        if len(keep) == len(ivs) < len(load_indices):
            load_indices = [load_indices[n] for n in keep]
            store_indices = [store_indices[n] for n in keep]
    if len(load_indices) != len(ivs) or len(store_indices) != len(ivs):
        return None
    mapping: dict = {}
    for idx, iv, target in zip(load_indices, ivs, store_indices, strict=True):
        if idx is iv.var:
            mapping[iv.var] = target
        elif is_static(iv.extent) and iv.extent == 1 and isinstance(idx, IntImm) and not idx.value:
            mapping[iv.var] = const(0, iv.var.dtype)
        else:
            return None
    return mapping


def _with_predicate(producer: Block, store: BufferStore, pcond, in_bounds: PrimExpr) -> Block:
    """The producer storing ``store`` (under its ``if``, if it had one), its predicate
    narrowed by ``in_bounds`` (in its iter vars) written over its loops."""
    body = store if pcond is None else IfThenElse(pcond, store)
    if _is_true(in_bounds):
        return producer.with_body(body)
    if pcond is not None:  # TVM folds the if into the new predicate
        in_bounds, body = and_(in_bounds, pcond), store
    bindings = {iv.var: v for iv, v in zip(producer.iter_vars, producer.iter_values, strict=True)}
    cond = _undivide(simplify(substitute(in_bounds, bindings)))
    old = producer.predicate
    if _is_true(old) or struct_key(old) == struct_key(cond):
        predicate = cond
    else:
        predicate = and_(old, cond)
    return replace(producer.with_body(body), predicate=predicate)


def _undivide(cond: PrimExpr) -> PrimExpr:
    """``x // c < k`` as ``x < k * c`` (and ``>=`` alike) through a conjunction, as TVM's
    simplifier writes a fused loop's bound: ``i < 16255``, not ``i // 128 < 127``."""
    if isinstance(cond, And):
        return and_(_undivide(cond.a), _undivide(cond.b))
    if isinstance(cond, (LT, GE)) and isinstance(cond.a, FloorDiv):
        c, k = cond.a.b, cond.b
        if isinstance(c, IntImm) and c.value > 0 and isinstance(k, IntImm):
            return type(cond)(cond.a.a, const(k.value * c.value, k.dtype))
    return cond
