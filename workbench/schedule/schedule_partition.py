"""The Schedule's loop partition, rolling buffer and epilogue fusion primitives
(loop_partition, rolling_buffer, fuse_reduction_epilogue): a mixin of
:class:`~workbench.schedule.schedule.Schedule`; they record their instructions like the
others."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._block_args import accepts_block_names
from .errors import InvalidScheduleArgumentError
from .primitives import fuse_epilogue as FE
from .primitives import partition as PT
from .primitives import rolling_buffer as RB
from .trace import BlockRV, ExprRV, Kind, LoopRV, register_kind

__all__ = ["PartitionMethods"]

register_kind(
    Kind(
        "LoopPartition",
        "loop_partition",
        inputs=("loop", "*factors"),
        attrs=("preserve_unit_iters",),
        outputs="list",
        bool_attrs=("preserve_unit_iters",),
    )
)
register_kind(Kind("RollingBuffer", "rolling_buffer", inputs=("block",),
                   attrs=("write_buffer_index",)))
register_kind(Kind("FuseReductionEpilogue", "fuse_reduction_epilogue",
                   inputs=("reduction_block", "epilogue_block")))


class PartitionMethods:
    """Mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any

    def loop_partition(
        self,
        loop: LoopRV,
        factors: Sequence[int | ExprRV | None],
        preserve_unit_iters: bool = True,
    ) -> list[LoopRV]:
        """Partition ``loop`` into consecutive pieces of the sizes ``factors`` (one may
        be ``None``: the rest; without one, what the factors leave is a last piece), each
        a copy of the loop body under a loop over its own range, in its own block; see
        :mod:`~workbench.schedule.primitives.partition`. Returns the pieces' loops.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(128, 128, 128))
        >>> i, j, k = sch.get_loops(sch.get_block("C"))
        >>> pieces = sch.loop_partition(i, factors=[None, 16])
        >>> [(sch.get(p).min, sch.get(p).end) for p in pieces]
        [(0, 112), (112, 128)]
        >>> [sch.get(b).name for b in sch.get_child_blocks(sch.get_block("C_i_common"))]
        ['C_i0_partition', 'C_i1_partition']
        """
        func_name, var = self._loop("loop_partition", loop)  # type: ignore[attr-defined]
        if not isinstance(factors, (list, tuple)):
            raise InvalidScheduleArgumentError(
                "loop_partition",
                f'factors for loop "{var.name}" must be a list, got {factors!r}',
                self._mod[func_name],
                loops=[var],
            )
        values = [self._int("loop_partition", f) for f in factors]  # type: ignore[attr-defined]
        func, new_vars = PT.loop_partition(self._mod[func_name], var, values,
                                           preserve_unit_iters)
        rvs = [self._new(LoopRV, (func_name, v)) for v in new_vars]  # type: ignore[attr-defined]
        self._commit(  # type: ignore[attr-defined]
            "LoopPartition",
            {"loop": loop, "factors": list(factors),
             "preserve_unit_iters": bool(preserve_unit_iters)},
            rvs,
            func,
        )
        return rvs

    @accepts_block_names("block")
    def rolling_buffer(self, block: BlockRV, write_buffer_index: int) -> None:
        """Turn the buffer that ``block`` writes (its ``write_buffer_index``-th write)
        into a rolling buffer: shrunk to the window one iteration of the tiled loop
        uses along the outermost axis whose windows overlap, accessed modulo that
        window, with the overlap not computed again; see
        :mod:`~workbench.schedule.primitives.rolling_buffer`.

        >>> import workbench as wb
        >>> from workbench.testing import pool_chain_func
        >>> sch = wb.Schedule(pool_chain_func())
        >>> _, i, _ = sch.get_loops("C")
        >>> io, _ = sch.split(i, [2, 4])
        >>> sch.compute_at("B", io)
        >>> sch.rolling_buffer("B", 0)
        >>> sch.mod["pool"].buffers["B"].shape
        (4, 6)
        """
        func_name, name = self._block("rolling_buffer", block)  # type: ignore[attr-defined]
        func = RB.rolling_buffer(self._mod[func_name], name, write_buffer_index)
        self._commit(  # type: ignore[attr-defined]
            "RollingBuffer", {"block": block, "write_buffer_index": write_buffer_index},
            (), func)

    @accepts_block_names("reduction_block", "epilogue_block")
    def fuse_reduction_epilogue(self, reduction_block: BlockRV,
                                epilogue_block: BlockRV) -> None:
        """Fuse an elementwise epilogue (``D = C + bias``, with an optional clip or
        ReLU) into the reduction block that produces ``C``: the reduction then writes
        ``D``, starting from the bias instead of 0, and the epilogue block goes; see
        :mod:`~workbench.schedule.primitives.fuse_epilogue`.

        >>> import workbench as wb
        >>> from workbench.testing import matmul_bias_func
        >>> sch = wb.Schedule(matmul_bias_func())
        >>> sch.fuse_reduction_epilogue("C", "D")
        >>> [sch.get(b).name for b in sch.get_child_blocks("root")]
        ['C']
        """
        func_name, red = self._block("fuse_reduction_epilogue",  # type: ignore[attr-defined]
                                     reduction_block)
        f2, epi = self._block("fuse_reduction_epilogue",  # type: ignore[attr-defined]
                              epilogue_block)
        if f2 != func_name:
            raise InvalidScheduleArgumentError(
                "fuse_reduction_epilogue",
                f'blocks "{red}" and "{epi}" are in different functions',
                self._mod[func_name],
                blocks=[red, epi],
            )
        func = FE.fuse_reduction_epilogue(self._mod[func_name], red, epi)
        self._commit(  # type: ignore[attr-defined]
            "FuseReductionEpilogue",
            {"reduction_block": reduction_block, "epilogue_block": epilogue_block},
            (), func)
