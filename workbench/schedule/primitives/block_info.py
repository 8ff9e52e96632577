"""Small block primitives: ``get_output_blocks`` and ``reorder_block_iter_var``.

``get_output_blocks`` lists the blocks of a scope that write a buffer their own scope
does not allocate (a function parameter or an outer buffer): the blocks whose results
leave the scope. ``reorder_block_iter_var`` permutes a block's iter vars (with their
bindings), which changes nothing the block computes.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, PrimFunc
from ...ir.analysis import iter_blocks
from ..errors import ScheduleError
from ._common import find_block_path, replace_path, scope_of


class InvalidReorderIndexError(ScheduleError, ValueError):
    """``reorder_block_iter_var``'s order is not a permutation of the block's iter vars."""


def output_blocks(func: PrimFunc, scope: str) -> list[str]:
    """Names of the blocks inside block ``scope`` (nested ones included, in program
    order) that write a buffer not allocated by the block that is their scope.

    >>> import workbench as wb
    >>> output_blocks(wb.workloads.mm_relu(8, 8, 8), "root")
    ['C']
    """
    path = find_block_path(func, "get_output_blocks", scope)
    found = []
    for b in iter_blocks(path[-1].body):
        inner = find_block_path(func, "get_output_blocks", b.name)
        allocated = set(scope_of(inner).alloc_buffers)
        if any(w.buffer not in allocated for w in b.writes or ()):
            found.append(b.name)
    return found


def reorder_block_iter_var(func: PrimFunc, block: str, new_order: list[int]) -> PrimFunc:
    """Permute the iter vars of ``block`` (and their bindings): iter var ``k`` of the
    result is iter var ``new_order[k]`` of the original.

    >>> import workbench as wb
    >>> func = reorder_block_iter_var(wb.workloads.matmul(8, 8, 8), "C", [2, 0, 1])
    >>> from workbench.ir.analysis import find_block
    >>> [iv.var.name for iv in find_block(func, "C").iter_vars]
    ['vk', 'vi', 'vj']
    """
    path = find_block_path(func, "reorder_block_iter_var", block)
    node: Block = path[-1]  # type: ignore[assignment]
    n = len(node.iter_vars)
    order = list(new_order) if isinstance(new_order, (list, tuple)) else None
    if (
        order is None
        or len(order) != n
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in order)
        or sorted(order) != list(range(n))
    ):
        raise InvalidReorderIndexError(
            "reorder_block_iter_var",
            f'new_order {new_order!r} is not a permutation of [0, ..., {n - 1}] (the iter '
            f'vars of block "{block}")' if n else
            f'new_order {new_order!r} is not a permutation of the iter vars of block '
            f'"{block}" (it has none)',
            func,
            blocks=[block],
        )
    new = replace(
        node,
        iter_vars=tuple(node.iter_vars[i] for i in order),
        iter_values=tuple(node.iter_values[i] for i in order),
    )
    return replace_path(func, path, new)
