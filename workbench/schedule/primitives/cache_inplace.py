"""``cache_inplace``: a cache for a block that updates a buffer in place.

The block (an in-place operation: it reads and writes the same buffer, e.g. an opaque
``T.call_extern`` on ``data_io.data``) works on a copy of the buffer in another memory
scope: one copy block right before it loads what it reads, one right after it stores
what it writes back. Both copies sit next to the block, inside its innermost loop.

``cache_inplace(block "ext_call", 0, "local")``::

                                              data_io_local = T.alloc_buffer((64,), "int32",
                                                                             scope="local")
    for i0 in range(1):                       for i0 in range(1):
                                                  for ax0 in range(64):
                                                      with T.block("data_io_local"):
                                                          data_io_local[v0] = data_io[v0]
        with T.block("ext_call"):                 with T.block("ext_call"):
            T.reads(data_io[0:64])                    T.reads(data_io_local[0:64])
            T.writes(data_io[0:64])                   T.writes(data_io_local[0:64])
            T.call_extern(..., data_io.data)          T.call_extern(..., data_io_local.data)
                                                  for ax0 in range(64):
                                                      with T.block("data_io_local_1"):
                                                          data_io[v0] = data_io_local[v0]

Names: the buffer is ``<buffer>_<scope>``; both copy blocks are named after it (TVM
gives both the same name; block names are unique here, so the second gets ``_1``).
The copies cover the block's read and write regions of the buffer (in the loop variables
around the block; TVM copies the regions as the block states them, which is only right
when they do not use its iter vars).

Invariants (TVM's checks): the storage scope is known; the block both reads and writes
the buffer; every block of the scope that reads the buffer has its reads covered by the
blocks producing them (region cover).
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, Buffer, IntImm, PrimFunc, SeqStmt, Stmt
from ...ir.expr import const
from ...ir.functor import substitute
from ...ir.simplify import simplify
from ..errors import ScheduleError
from ._common import find_block_path, fresh_name, is_root, loop_bounds, replace_child, replace_path
from ._pipeline import stage_pipeline_problem
from .cache import BufferSwap, _copy_stage, _fresh_buffer_name, check_scope, resolve_buffer_index
from .reindex import _taken_blocks

__all__ = ["NotReadWriteError", "NotRegionCoverError", "cache_inplace"]


class NotReadWriteError(ScheduleError):
    """``cache_inplace`` of a buffer the block does not both read and write."""


class NotRegionCoverError(ScheduleError):
    """A block of the scope reads a part of the buffer its producers do not write there
    (TVM's region cover property), so a copy of the buffer may miss values."""


def _region(block: Block, regions, buf: Buffer) -> list[tuple]:
    """The block's region of ``buf`` in the loop variables around it: (min, extent) per
    dimension, the whole dimension where the extent is not a constant."""
    bindings = {iv.var: v for iv, v in zip(block.iter_vars, block.iter_values, strict=True)}
    region = next(r.region for r in regions or () if r.buffer is buf)
    out = []
    for (mn, ext), dim in zip(region, buf.shape, strict=True):
        ext = simplify(substitute(ext, bindings))
        if isinstance(ext, IntImm):
            out.append((simplify(substitute(mn, bindings)), ext.value))
        else:
            out.append((const(0, buf.index_dtype), dim))
    return out


def _wrap(parent: Stmt, old: Block, new: Block, before: Stmt, after: Stmt) -> Stmt:
    """``parent`` with its child ``old`` replaced by ``before; new; after``."""
    if isinstance(parent, SeqStmt):
        stmts: list[Stmt] = []
        for s in parent.stmts:
            stmts.extend((before, new, after) if s is old else (s,))
        return SeqStmt(tuple(stmts))
    return replace_child(parent, old, SeqStmt((before, new, after)))


def cache_inplace(
    func: PrimFunc, block_name: str, read_buffer_index: int, storage_scope: str
) -> tuple[PrimFunc, list[str]]:
    """Make ``block`` work on a copy of its ``read_buffer_index``-th read buffer in
    ``storage_scope``, loaded right before it and stored back right after it (module
    docstring). Returns (new function, [read copy block, write copy block]).

    >>> import workbench as wb
    >>> f = wb.from_script('''
    ... @T.prim_func
    ... def inc(A: T.Buffer((8,), "float32")):
    ...     for i in range(8):
    ...         with T.block("inc"):
    ...             vi = T.axis.remap("S", [i])
    ...             A[vi] = A[vi] + T.float32(1)
    ... ''')
    >>> g, names = cache_inplace(f, "inc", 0, "local")
    >>> names
    ['A_local', 'A_local_1']
    """
    prim = "cache_inplace"
    check_scope(func, prim, storage_scope, block_name)
    path = find_block_path(func, prim, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    index = resolve_buffer_index(func, prim, block_name, read_buffer_index, "read")
    buf = block.reads[index].buffer  # type: ignore[index]
    scope_pos = max(i for i, s in enumerate(path[:-1]) if isinstance(s, Block))
    scope: Block = path[scope_pos]  # type: ignore[assignment]
    problem = stage_pipeline_problem(func, scope, prim, write_after_read=False, readers_of=buf)
    if problem is not None:
        raise NotRegionCoverError(
            prim,
            f'the scope "{scope.name}" of block "{block_name}" does not have the region cover '
            f"property: {problem}",
            func,
            blocks=[block_name],
        )
    if not any(w.buffer is buf for w in block.writes or ()):
        raise NotReadWriteError(
            prim,
            f'block "{block_name}" reads "{buf.name}" but does not write it; cache_inplace '
            "needs a block that both reads and writes the buffer",
            func,
            blocks=[block_name],
        )
    cache = Buffer(_fresh_buffer_name(func, f"{buf.name}_{storage_scope}"), buf.shape,
                   buf.dtype, storage_scope, index_dtype=buf.index_dtype)
    taken = set(_taken_blocks(func))
    names = [fresh_name(cache.name, taken), fresh_name(cache.name, taken)]
    bounds = loop_bounds(func)
    load, _ = _copy_stage(names[0], buf, cache, _region(block, block.reads, buf), bounds)
    store, _ = _copy_stage(names[1], cache, buf, _region(block, block.writes, buf), bounds)
    new_block = BufferSwap({buf: cache}).visit_block(block)
    # the copies go around the block in its parent; rebuild up to the scope
    node = _wrap(path[-2], block, new_block, load, store)
    for i in range(len(path) - 2, scope_pos, -1):
        node = replace_child(path[i - 1], path[i], node)
    new_scope: Block = node  # type: ignore[assignment]
    allocs = new_scope.alloc_buffers + (cache,)
    if is_root(scope):
        new_scope = replace(new_scope, alloc_buffers=allocs, reads=(), writes=())
    else:
        new_scope = replace(new_scope, alloc_buffers=allocs, reads=None, writes=None)
    return replace_path(func, path[: scope_pos + 1], new_scope), names
