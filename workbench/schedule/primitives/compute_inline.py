"""Inlining: compute_inline and reverse_compute_inline.

``compute_inline(B)`` removes producer ``B`` and substitutes its expression into
every read of its buffer; ``reverse_compute_inline(C)`` removes consumer ``C`` and
folds its computation into the store of its only producer.

Before and after ``compute_inline(B)`` with ``B = A * 2`` and ``C = B + 1``::

    with T.block("B"):                      with T.block("C"):
        B[vi, vj] = A[vi, vj] * 2               C[vi, vj] = A[vi, vj] * 2 + 1
    with T.block("C"):
        C[vi, vj] = B[vi, vj] + 1

The inlined buffer's allocation disappears with its block.
"""

from __future__ import annotations

from ...ir import Block, Buffer, BufferLoad, BufferStore, IntImm, PrimExpr, PrimFunc, Var
from ...ir.functor import Mutator, iter_exprs, substitute
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
    """The block's indices are not distinct iter vars, so they cannot be inverted."""


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
    if not (isinstance(block.predicate, IntImm) and block.predicate.value):
        raise NotInlinableError(
            primitive,
            f'block "{block.name}" has a predicate (T.where); it cannot be inlined',
            func,
            blocks=[block.name],
        )
    return block.body


def _pure_vars(primitive, func, block: Block, indices, what: str) -> list[Var]:
    own = {iv.var for iv in block.iter_vars}
    vars_ = [i for i in indices if isinstance(i, Var) and i in own]
    if len(vars_) != len(indices) or len(set(vars_)) != len(vars_) or set(vars_) != own:
        shown = ", ".join(str(i) for i in indices)
        raise NonInjectiveIndexError(
            primitive,
            f'block "{block.name}" {what} [{shown}]; inlining needs every index to be a '
            "distinct iter var of the block, covering all of them",
            func,
            blocks=[block.name],
        )
    return vars_


def _allocated(func: PrimFunc, buffer: Buffer) -> bool:
    return buffer not in func.params


class _ReplaceLoads(Mutator):
    """Replace every load of ``buffer`` by ``make(indices)``."""

    def __init__(self, buffer: Buffer, make):
        self.buffer = buffer
        self.make = make

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, BufferLoad) and e.buffer is self.buffer:
            return self.make(tuple(self.visit_expr(i) for i in e.indices))
        return super().visit_expr(e)


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
    siblings = scope_blocks(scope_of(path))
    for other in siblings:
        if other is not block and any(w.buffer is buf for w in other.writes or ()):
            raise NotInlinableError(
                p,
                f'buffer "{buf.name}" is also written by block "{other.name}"',
                func,
                blocks=[block_name, other.name],
            )
    order = _pure_vars(p, func, block, store.indices, f'writes "{buf.name}" at')

    def make(indices):
        return substitute(store.value, dict(zip(order, indices, strict=True)))

    func = remove_stmt(func, path, p)
    new_root = _ReplaceLoads(buf, make).visit_stmt(func.body)
    func = func.with_body(new_root)  # type: ignore[arg-type]
    return remove_alloc(func, buf)


def reverse_compute_inline(func: PrimFunc, block_name: str) -> PrimFunc:
    """Fold consumer ``block_name`` into the store of its only producer."""
    p = "reverse_compute_inline"
    path = find_block_path(func, p, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    store = _single_store(p, func, block)
    siblings = scope_blocks(scope_of(path))
    producers = producers_of(block, siblings)
    if len(producers) != 1:
        names = ", ".join(f'"{b.name}"' for b in producers) or "none"
        raise NotInlinableError(
            p,
            f'block "{block_name}" must have exactly one producer block, it has {names}',
            func,
            blocks=[block_name],
        )
    producer = producers[0]
    try:
        pstore = _single_store(p, func, producer)
    except NotInlinableError as e:
        raise NotInlinableError(
            p,
            f'block "{block_name}" cannot be folded into its producer: {e.message}',
            func,
            blocks=[block_name, producer.name],
        ) from None
    buf = pstore.buffer
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
    loads = [x for x in iter_exprs(store.value) if isinstance(x, BufferLoad) and x.buffer is buf]
    loads += [
        x
        for i in store.indices
        for x in iter_exprs(i)
        if isinstance(x, BufferLoad) and x.buffer is buf
    ]
    keys = {tuple(str(i) for i in x.indices) for x in loads}
    if len(keys) != 1:
        raise NonInjectiveIndexError(
            p,
            f'block "{block_name}" reads "{buf.name}" at several different indices',
            func,
            blocks=[block_name],
        )
    cvars = _pure_vars(p, func, block, loads[0].indices, f'reads "{buf.name}" at')
    mapping = dict(zip(cvars, pstore.indices, strict=True))
    value = _ReplaceLoads(buf, lambda _idx: pstore.value).visit_expr(store.value)
    value = substitute(value, mapping)
    indices = tuple(substitute(i, mapping) for i in store.indices)
    new_producer = producer.with_body(BufferStore(store.buffer, value, indices))
    func = remove_stmt(func, path, p)
    ppath = find_block_path(func, p, producer.name)
    func = replace_path(func, ppath, new_producer)
    return remove_alloc(func, buf)
