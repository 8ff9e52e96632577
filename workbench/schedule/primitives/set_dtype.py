"""Changing an intermediate buffer's element type: unsafe_set_dtype.

``unsafe_set_dtype(block, buffer_index, dtype)`` gives the ``buffer_index``-th buffer
``block`` writes the element type ``dtype``. As in TVM, every store into it casts the
stored value to ``dtype`` and every load from it casts back to the old type, so the
rest of the program still sees values of the type it expects; views of the buffer
(``T.match_buffer`` of a region of it) change with it. "Unsafe": values may lose
precision or range. Before::

    B[vi, vj] = A[vi, vj] * T.float32(2)
    ...
    C[vi, vj] = B[vi, vj] + T.float32(1)

after ``unsafe_set_dtype(B, 0, "float16")``::

    B[vi, vj] = T.Cast("float16", A[vi, vj] * T.float32(2))
    ...
    C[vi, vj] = T.Cast("float32", B[vi, vj]) + T.float32(1)

The buffer must be allocated by a block (a function parameter's type belongs to the
caller). Setting the type it already has changes nothing.
"""

from __future__ import annotations

from ...ir import Block, Buffer, BufferStore, PrimFunc, Stmt
from ...ir.analysis import iter_blocks
from ...ir.expr import ALL_DTYPES, BufferLoad, Cast, PrimExpr
from ..errors import ScheduleError
from ._common import find_block_path
from .cache import NonAllocatedBufferError, ViewSwap, resolve_buffer_index


class InvalidDTypeError(ScheduleError, ValueError):
    """``unsafe_set_dtype``: the dtype is not one the IR knows."""


class _DTypeSwap(ViewSwap):
    """Swap buffers (and views of them) for retyped copies, casting stores to the new type
    and loads back."""

    def __init__(self, mapping: dict[Buffer, Buffer], src: str, tgt: str):
        super().__init__(mapping)
        self.src, self.tgt = src, tgt

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, BufferLoad) and e.buffer in self.mapping:
            idx = tuple(self.visit_expr(i) for i in e.indices)
            return Cast(self.src, BufferLoad(self.mapping[e.buffer], idx))
        return super().visit_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, BufferStore) and s.buffer in self.mapping:
            idx = tuple(self.visit_expr(i) for i in s.indices)
            return BufferStore(self.mapping[s.buffer], Cast(self.tgt, self.visit_expr(s.value)),
                               idx)
        return super().visit_stmt(s)


def unsafe_set_dtype(func: PrimFunc, block_name: str, buffer_index: int, dtype: str) -> PrimFunc:
    """Give the ``buffer_index``-th buffer ``block_name`` writes the type ``dtype``
    (stores cast to it, loads cast back).

    >>> import workbench as wb
    >>> from workbench.testing import chain_func
    >>> f = unsafe_set_dtype(chain_func(8), "B", 0, "float16")
    >>> f.body.alloc_buffers[0].dtype
    'float16'
    """
    p = "unsafe_set_dtype"
    block: Block = find_block_path(func, p, block_name)[-1]  # type: ignore[assignment]
    index = resolve_buffer_index(func, p, block_name, buffer_index, "write", "buffer_index")
    buf = block.writes[index].buffer  # type: ignore[index]
    if not isinstance(dtype, str) or dtype not in ALL_DTYPES:
        raise InvalidDTypeError(
            p, f'unknown dtype {dtype!r} for buffer "{buf.name}" of block "{block_name}" '
            f"(known: {', '.join(ALL_DTYPES)})", func, blocks=[block_name])
    if dtype == buf.dtype:
        return func
    if not any(buf in b.alloc_buffers for b in iter_blocks(func.body)):
        raise NonAllocatedBufferError(
            p, f'buffer "{buf.name}" written by block "{block_name}" is not allocated by a '
            "block (a function parameter or a match_buffer view); its dtype belongs to the "
            "caller", func, blocks=[block_name])
    mapping = {buf: buf.with_(dtype=dtype)}
    for b in iter_blocks(func.body):
        for m in b.match_buffers:
            if m.source.buffer in mapping and m.buffer not in mapping:
                mapping[m.buffer] = m.buffer.with_(dtype=dtype)
    return func.with_body(_DTypeSwap(mapping, buf.dtype, dtype).visit_block(func.body))


__all__ = ["InvalidDTypeError", "unsafe_set_dtype"]
