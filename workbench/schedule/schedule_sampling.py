"""The Schedule's sampling primitives (``sample_perfect_tile``, ``sample_categorical``,
``sample_compute_location``): a mixin of :class:`~workbench.schedule.schedule.Schedule`,
kept apart so that file stays readable. They draw from the schedule's random generator
(``Schedule(func, seed=...)``) unless given a ``decision``, and record it in the trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._block_args import accepts_block_names
from .trace import BlockRV, ExprRV, LoopRV, NoneRV

__all__ = ["SamplingMethods"]


class SamplingMethods:
    """Sampling primitives; mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any
    _rng: Any

    def sample_perfect_tile(
        self,
        loop: LoopRV,
        n: int,
        max_innermost_factor: int = 16,
        decision: Sequence[int] | None = None,
    ) -> list[ExprRV]:
        """Sample ``n`` tile sizes whose product is ``loop``'s extent, the innermost at
        most ``max_innermost_factor`` (``-1``: no limit); usable as split factors.

        Without ``decision`` the tiling is drawn uniformly among all such tilings from
        the schedule's random generator (``Schedule(func, seed=...)``); with it, the
        decision is validated and used. The trace records the decision.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(128, 128, 128), seed=0)
        >>> i, j, k = sch.get_loops(sch.get_block("C"))
        >>> v0, v1 = sch.sample_perfect_tile(j, n=2, decision=[8, 16])
        >>> j0, j1 = sch.split(j, factors=[v0, v1])
        >>> print(sch.trace.lines()[2])
        v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16, decision=[8, 16])
        >>> sch.get(v0), sch.get(j1).extent
        (8, 16)
        """
        from .primitives import sampling

        func_name, var = self._loop("sample_perfect_tile", loop)
        tiles = sampling.sample_perfect_tile(
            self._mod[func_name], var, n, max_innermost_factor, self._rng, decision
        )
        # -1: the unknown outer tile of a symbolic loop, returned as None (as TVM does)
        rvs = [self._new(NoneRV, None) if t == -1 else self._new(ExprRV, t) for t in tiles]
        self._commit(
            "SamplePerfectTile",
            {"loop": loop, "n": n, "max_innermost_factor": max_innermost_factor},
            rvs,
            decision=tuple(tiles),
        )
        return [None if isinstance(r, NoneRV) else r for r in rvs]  # type: ignore[misc]

    def sample_categorical(
        self,
        candidates: Sequence[int],
        probs: Sequence[float],
        decision: int | None = None,
    ) -> ExprRV:
        """Sample one of ``candidates`` with probabilities ``probs`` (non-negative,
        normalised by their sum). The decision, as in TVM, is the chosen index.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16), seed=0)
        >>> v = sch.sample_categorical([0, 16, 64, 512], [0.25] * 4, decision=2)
        >>> sch.get(v)
        64
        >>> print(sch.trace.lines()[0])
        v0 = sch.sample_categorical(candidates=[0, 16, 64, 512], probs=[0.25, 0.25, 0.25, 0.25], decision=2)
        """  # noqa: E501
        from .primitives import sampling

        index, cands, weights = sampling.sample_categorical(
            candidates, probs, self._rng, decision
        )
        rv = self._new(ExprRV, cands[index])
        self._commit(
            "SampleCategorical",
            {"candidates": list(cands), "probs": list(weights)},
            [rv],
            decision=index,
        )
        return rv  # type: ignore[return-value]

    @accepts_block_names("block")
    def sample_compute_location(self, block: BlockRV, decision: int | None = None) -> LoopRV:
        """Sample a loop where ``compute_at(block, loop)`` is legal, uniformly among
        TVM's candidates: ``-2`` inline (if ``compute_inline`` would accept it), ``-1``
        root (leave it where it is), or ``i``, the position of a loop among the loops
        above the block's first consumer. The decision is that number.

        For ``-1`` and ``-2`` the returned handle refers to no loop but to
        :data:`~workbench.schedule.primitives.sampling.COMPUTE_ROOT` /
        ``COMPUTE_INLINE`` (TVM returns its special root/inline loop handles there):
        ``compute_at`` with it leaves the block at the root or inlines it.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.mm_relu(32, 32, 32), seed=0)
        >>> loc = sch.sample_compute_location(sch.get_block("Y"), decision=0)
        >>> sch.get(loc).loop_var.name
        'i'
        >>> print(sch.trace.lines()[-1])
        l1 = sch.sample_compute_location(block=b0, decision=0)
        """
        from .primitives import sampling

        func_name, name = self._block("sample_compute_location", block)
        index, target = sampling.sample_compute_location(
            self._mod[func_name], name, self._rng, decision
        )
        rv = self._new(LoopRV, (func_name, target))
        self._commit("SampleComputeLocation", {"block": block}, [rv], decision=index)
        return rv  # type: ignore[return-value]
