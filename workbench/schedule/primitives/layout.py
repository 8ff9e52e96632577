"""Buffer layout: ``storage_align``.

``storage_align(block, buffer_index, axis, factor, offset)`` pads the allocation of a
buffer the block writes so that the stride of dimension ``axis`` satisfies
``stride % factor == offset``. The usual use is a shared-memory tile: a row of 32
floats padded to 33 puts consecutive rows in different memory banks, so threads
reading a column do not conflict.

As in TVM the request is recorded on the block as the annotation
``buffer_dim_align``: a list of ``[buffer_index, axis, factor, offset]``, one per
(buffer, axis); a second request for the same buffer and axis replaces the first.
The buffer itself carries the hint too (``Buffer.align``), which code generators
honour when they lay the buffer out. After
``storage_align(block "A_shared", 0, axis=0, factor=32, offset=1)`` the copy block
reads::

    with T.block("A_shared"):
        v0, v1 = T.axis.remap("SS", [ax0, ax1])
        T.reads(A[v0, v1])
        T.writes(A_shared[v0, v1])
        T.block_attr({"buffer_dim_align": [[0, 0, 32, 1]]})
        A_shared[v0, v1] = A[v0, v1]

and ``A_shared`` (128 x 128 floats) is laid out with a row stride of 129.

The buffer must be allocated by a block: a function parameter's layout belongs to the
caller.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, PrimFunc
from ..errors import InvalidScheduleArgumentError, ScheduleError
from ._common import find_block_path, replace_path
from .cache import check_allocated, resolve_buffer_index, swap_buffer

ALIGN_KEY = "buffer_dim_align"


class StorageAlignInvalidFactorError(ScheduleError, ValueError):
    """``factor`` is not a positive integer."""


class StorageAlignAxisOutOfRangeError(ScheduleError, IndexError):
    """``axis`` is not in ``[-ndim, ndim)`` for the buffer."""


class StorageAlignInvalidAnnotationError(ScheduleError):
    """The block already has a ``buffer_dim_align`` annotation that is not a list of
    4-integer lists (set by hand with ``annotate``)."""


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _existing(func: PrimFunc, block: Block) -> list[tuple[int, int, int, int]]:
    value = dict(block.annotations).get(ALIGN_KEY)
    if value is None:
        return []
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(t, (list, tuple)) and len(t) == 4 and all(_is_int(x) for x in t) for t in value
    )
    if not ok:
        raise StorageAlignInvalidAnnotationError(
            "storage_align",
            f'block "{block.name}" has a "{ALIGN_KEY}" annotation {value!r} that is not a '
            "list of [buffer_index, axis, factor, offset]",
            func,
            blocks=[block.name],
        )
    return [tuple(t) for t in value]  # type: ignore[misc]


def storage_align(
    func: PrimFunc, block_name: str, buffer_index: int, axis: int, factor: int, offset: int
) -> PrimFunc:
    """Align dimension ``axis`` of the ``buffer_index``-th buffer ``block`` writes:
    its stride becomes ``k * factor + offset`` (the smallest such stride at least the
    unpadded one). ``axis`` may be negative (counted from the last dimension).

    >>> import workbench as wb
    >>> from workbench.schedule.primitives.layout import storage_align
    >>> func = storage_align(wb.workloads.mm_relu(64, 64, 64), "Y", 0, -2, 32, 1)
    >>> func.buffers["Y"].align
    ((0, 32, 1),)
    """
    prim = "storage_align"
    path = find_block_path(func, prim, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    index = resolve_buffer_index(func, prim, block_name, buffer_index, "write", "buffer_index")
    buf = block.writes[index].buffer  # type: ignore[index]
    if not _is_int(factor) or factor <= 0:
        raise StorageAlignInvalidFactorError(
            prim,
            f'factor must be a positive integer, got {factor!r} (buffer "{buf.name}" of '
            f'block "{block_name}")',
            func,
            blocks=[block_name],
        )
    ndim = buf.ndim
    if not _is_int(axis) or not -ndim <= axis < ndim:
        raise StorageAlignAxisOutOfRangeError(
            prim,
            f'axis {axis!r} is out of range for buffer "{buf.name}" of block "{block_name}", '
            f"which has {ndim} dimension(s): axis must be in [{-ndim}, {ndim})",
            func,
            blocks=[block_name],
        )
    if not _is_int(offset):
        raise InvalidScheduleArgumentError(
            prim,
            f'offset must be an integer, got {offset!r} (buffer "{buf.name}" of block '
            f'"{block_name}")',
            func,
            blocks=[block_name],
        )
    check_allocated(func, prim, buf, block_name)
    axis %= ndim
    entries = _existing(func, block)
    new_entry = (index, axis, factor, offset)
    if any(e[:2] == new_entry[:2] for e in entries):
        entries = [new_entry if e[:2] == new_entry[:2] else e for e in entries]
    else:
        entries.append(new_entry)
    value = tuple(entries)
    if any(k == ALIGN_KEY for k, _ in block.annotations):
        anns = tuple((k, value if k == ALIGN_KEY else v) for k, v in block.annotations)
    else:
        anns = block.annotations + ((ALIGN_KEY, value),)
    func = replace_path(func, path, replace(block, annotations=anns))
    align = tuple(a for a in buf.align if a[0] != axis) + ((axis, factor, offset),)
    return swap_buffer(func, buf, buf.with_(align=tuple(sorted(align))))


__all__ = [
    "ALIGN_KEY",
    "StorageAlignAxisOutOfRangeError",
    "StorageAlignInvalidAnnotationError",
    "StorageAlignInvalidFactorError",
    "storage_align",
]
