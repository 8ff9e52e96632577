"""Giving a block's access region explicitly: annotate_buffer_access.

The region a block reads or writes is normally derived from its body. Where that is
too coarse (an index computed through ``T.floor`` or a cast reads as the whole buffer),
``annotate_buffer_access(block, buffer_index, buf_type, gen_new_ranges)`` replaces the
``buffer_index``-th read (``buf_type="read"``) or write region by ranges computed from
the block's iter vars, ``gen_new_ranges(vi, vj, ...)`` giving one ``(begin, end)`` pair
(or a single index ``e``, meaning ``(e, e + 1)``) per buffer dimension. As in TVM, the
ranges are recorded as an index map ``lambda vi, vj: (b0, e0, b1, e1, ...)`` and the
block is annotated ``{"explicit_read_region": [index]}`` (``explicit_write_region`` for
writes), which keeps the region when the block is rewritten later. Before::

    with T.block("B"):
        vi, vj = T.axis.remap("SS", [i, j])
        T.reads(A[vi, vj])
        B[vi, vj] = A[vi, vj] * T.float32(2)

after ``annotate_buffer_access(B, 0, "read", lambda vi, vj: ((vi - 1, vi + 1),
(vj - 1, vj + 1)))``::

    with T.block("B"):
        vi, vj = T.axis.remap("SS", [i, j])
        T.reads(A[vi - 1:vi + 1, vj - 1:vj + 1])
        T.block_attr({"explicit_read_region": [0]})
        B[vi, vj] = A[vi, vj] * T.float32(2)

Nothing checks that the region covers what the body accesses (as in TVM): a region too
small misleads the primitives that rely on it (``compute_at`` computes what it lists).
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, BufferRegion, PrimFunc
from ...ir.index_map import IndexMap, IndexMapError
from ...ir.simplify import simplify
from ..errors import ScheduleError
from ._common import find_block_path, replace_path
from .cache import resolve_buffer_index

#: TVM's BufferIndexType codes, as the instruction stores them.
BUFFER_INDEX_TYPES = {"read": 0, "write": 1}


class InvalidRegionMapError(ScheduleError, ValueError):
    """``annotate_buffer_access``: the ranges do not fit the block's iter vars or the
    buffer's dimensions."""


def annotate_buffer_access(
    func: PrimFunc, block_name: str, buffer_index: int, buffer_index_type: int,
    index_map: IndexMap,
) -> PrimFunc:
    """Replace region ``buffer_index`` of ``block_name``'s reads (``buffer_index_type``
    0) or writes (1) by the ranges ``index_map`` computes from the block's iter vars
    (final indices ``begin0, end0, begin1, end1, ...``), and mark it explicit.

    >>> import workbench as wb
    >>> from workbench.testing import chain_func
    >>> f = chain_func(8)
    >>> m = wb.IndexMap.parse("lambda vi, vj: (vi, vi + 2, vj, vj + 1)")
    >>> g = annotate_buffer_access(f, "B", 0, 1, m)
    >>> from workbench.ir.analysis import find_block
    >>> find_block(g, "B").writes[0].region
    ((vi, 2), (vj, 1))
    """
    p = "annotate_buffer_access"
    path = find_block_path(func, p, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    kind = "write" if buffer_index_type == 1 else "read"
    index = resolve_buffer_index(func, p, block_name, buffer_index, kind, "buffer_index")
    regions = list((block.writes if kind == "write" else block.reads) or ())
    buf = regions[index].buffer
    ivs = [iv.var for iv in block.iter_vars]
    if not isinstance(index_map, IndexMap) or index_map.ndim != len(ivs):
        got = index_map.ndim if isinstance(index_map, IndexMap) else index_map
        raise InvalidRegionMapError(
            p, f'the ranges for block "{block_name}" must be a function of its {len(ivs)} '
            f"iter vars, got {got!r}", func, blocks=[block_name])
    if len(index_map.final_indices) != 2 * buf.ndim:
        raise InvalidRegionMapError(
            p, f'buffer "{buf.name}" of block "{block_name}" has {buf.ndim} dimension(s) but '
            f"{len(index_map.final_indices) // 2} range(s) were given" if
            len(index_map.final_indices) % 2 == 0 else
            f'the ranges for block "{block_name}" must be (begin, end) pairs',
            func, blocks=[block_name])
    try:
        ends = index_map.with_index_dtype(ivs[0].dtype if ivs else "int32").map_indices(ivs)
    except IndexMapError as e:
        raise InvalidRegionMapError(p, f'block "{block_name}": {e}', func,
                                    blocks=[block_name]) from None
    bounds = tuple((ends[k], simplify(ends[k + 1] - ends[k])) for k in range(0, len(ends), 2))
    regions[index] = BufferRegion(buf, bounds)
    key = f"explicit_{kind}_region"
    ann = dict(block.annotations)
    marked = tuple(ann.get(key, ()))
    ann[key] = marked if index in marked else marked + (index,)
    field = "writes" if kind == "write" else "reads"
    new = replace(block, annotations=tuple(ann.items()), **{field: tuple(regions)})
    return replace_path(func, path, new)


__all__ = ["BUFFER_INDEX_TYPES", "InvalidRegionMapError", "annotate_buffer_access"]
