"""The Schedule's block-information primitives of :mod:`.primitives.block_info`
(``get_output_blocks``, ``reorder_block_iter_var``): a mixin of
:class:`~workbench.schedule.schedule.Schedule`; they record their instructions like the
others."""

from __future__ import annotations

from typing import Any

from ._block_args import accepts_block_names
from .primitives import block_info as BI
from .trace import BlockRV

__all__ = ["BlockInfoMethods"]


class BlockInfoMethods:
    """Block-information primitives; mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any


    @accepts_block_names("scope_block")
    def get_output_blocks(self, scope_block: BlockRV) -> list[BlockRV]:
        """Handles to the blocks inside ``scope_block`` that write a buffer their scope does
        not allocate (their results leave the scope), in program order.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.mm_relu(8, 8, 8))
        >>> [sch.get(b).name for b in sch.get_output_blocks("root")]
        ['C']
        """
        func_name, name = self._block("get_output_blocks", scope_block)
        names = BI.output_blocks(self._mod[func_name], name)
        rvs = [self._new(BlockRV, (func_name, n)) for n in names]
        self._commit("GetOutputBlocks", {"block": scope_block}, rvs)
        return rvs


    @accepts_block_names("block")
    def reorder_block_iter_var(self, block: BlockRV, new_order: list[int]) -> None:
        """Reorder the iter vars of ``block``: the ``k``-th becomes the ``new_order[k]``-th
        of before (bindings move with them; the computation is unchanged).

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
        >>> sch.reorder_block_iter_var("C", [2, 0, 1])
        >>> [iv.var.name for iv in sch.get(sch.get_block("C")).iter_vars]
        ['vk', 'vi', 'vj']
        """
        func_name, name = self._block("reorder_block_iter_var", block)
        func = BI.reorder_block_iter_var(self._mod[func_name], name, new_order)
        self._commit("ReorderBlockIterVar", {"block": block, "new_order": list(new_order)},
                     (), func)
