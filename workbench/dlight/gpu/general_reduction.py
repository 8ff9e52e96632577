"""The GPU rule for row-wise normalizations: softmax, layer norm, RMS norm (TVM's
``dlight.gpu.GeneralReduction``).

Such a function is a chain of blocks over the same rows: reductions over the
trailing axes (a row max, a row sum, a sum of squares), then one elementwise block
that writes the output from the row's statistics. The rule gives each row (the
leading spatial axes, fused) one thread block of 256 threads; every reduction is
computed cooperatively by the block's threads (a cross-thread reduction over
``threadIdx.x``) into shared memory, where the following blocks read it; the final
block's columns are strided over the same 256 threads. The serial loops left in each
thread carry TVM's unroll annotations.
"""

from __future__ import annotations

from ...ir import PrimExpr, Var
from ...ir.expr import const
from ...ir.functor import expr_vars
from ...ir.index_map import IndexMap
from ...ir.simplify import simplify
from ...schedule import Schedule, ScheduleError
from ..analysis import (
    get_block_info,
    normalize_or_decline,
    try_inline_contiguous_spatial,
)
from ..base import Declined, GPUScheduleRule

__all__ = ["GeneralReduction"]


def _equal(a: int | PrimExpr, b: int | PrimExpr) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int) or isinstance(b, int):
        return False
    diff = simplify(a - b)
    return getattr(diff, "value", None) == 0


class GeneralReduction(GPUScheduleRule):
    """Reductions over the trailing axes followed by an elementwise block (softmax,
    layer norm): one thread block per row, 256 threads sharing each reduction, the
    row statistics in shared memory (TVM's ``dlight.gpu.GeneralReduction``).

    >>> import workbench as wb
    >>> sch = GeneralReduction().apply(wb.workloads.softmax(4, 64), wb.Target("cuda"), False)
    >>> [sch.get(lp).thread_tag for lp in sch.get_loops("norm")]
    ['blockIdx.x', 'threadIdx.x', None]
    """

    len_tx = 256
    unroll_depth = 256

    def apply(self, func, target, tunable) -> Schedule:
        len_tx, unroll = self.len_tx, self.unroll_depth
        sch = Schedule(func)
        infos = normalize_or_decline(sch)
        infos = try_inline_contiguous_spatial(sch, infos)
        if not infos:
            raise Declined("no block to schedule")
        dom_kind = infos[0].dom_kind()
        num_leading_s = len(dom_kind) - len(dom_kind.lstrip("S"))
        num_trailing_r = len(dom_kind) - len(dom_kind.rstrip("R"))
        last = infos[-1]
        n_last = len(last.dom_kind())
        if n_last < len(dom_kind):
            if n_last == 0:  # a scalar result: one thread does everything
                for i, info in enumerate(infos):
                    loop = sch.add_unit_loop(info.block_rv)
                    sch.bind(loop, "blockIdx.x" if i == 0 else "threadIdx.x")
                return sch
            index_map = self._align_map(infos[0], last)
            try:
                sch.transform_block_layout(last.block_rv, index_map)
            except ScheduleError as e:
                raise Declined(f'cannot give the last block "{last.name}" the axes of the '
                               f'first block "{infos[0].name}" ({index_map.script()}): '
                               f"{type(e).__name__}") from e
            last = infos[-1] = get_block_info(sch, last.block_rv)
        if num_trailing_r == 0:
            raise Declined(f'block "{infos[0].name}" (axes "{dom_kind}") does not end with '
                           "reduction axes")
        for info in infos[1:-1]:
            if info.dom_kind() != dom_kind:
                raise Declined(f'block "{info.name}" (iter kinds "{info.dom_kind()}") does '
                               f'not iterate like the first block "{infos[0].name}" '
                               f'("{dom_kind}")')
        if not last.is_injective():
            raise Declined(f'the last block "{last.name}" (iter kinds "{last.dom_kind()}") '
                           "is not elementwise")
        if len(last.dom_kind()) > len(dom_kind):
            raise Declined(f'the last block "{last.name}" has more axes than the first '
                           f'block "{infos[0].name}"')
        if num_leading_s == 0:
            raise Declined(f'block "{infos[0].name}" has no leading spatial axis to give '
                           "thread blocks")
        self._order_last_block(sch, infos)
        loops = sch.get_loops(last.block_rv)
        bx = loops[0] if num_leading_s == 1 else sch.fuse(*loops[:num_leading_s])
        r_loop, tx = sch.split(loops[-1], factors=[None, len_tx])
        sch.reorder(tx, r_loop)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        sch.annotate(r_loop, "pragma_auto_unroll_max_step", unroll)
        sch.annotate(r_loop, "pragma_unroll_explicit", 1)
        for info in reversed(infos[:-1]):
            block = info.block_rv
            for i in range(len(sch.get(block).writes)):
                sch.set_scope(block, i, "shared")
            sch.compute_at(block, bx, preserve_unit_loops=True)
            r_loops = sch.get_loops(block)[-num_trailing_r:]
            r_loop = r_loops[0] if len(r_loops) == 1 else sch.fuse(*r_loops)
            r_loop, tx = sch.split(r_loop, factors=[None, len_tx])
            sch.reorder(tx, r_loop)
            sch.bind(tx, "threadIdx.x")
            sch.annotate(r_loop, "pragma_auto_unroll_max_step", unroll)
            sch.annotate(r_loop, "pragma_unroll_explicit", 1)
        return sch

    @staticmethod
    def _align_map(first, last) -> IndexMap:
        """Give the last block as many iter vars as the first: its iter vars go where
        the first block has an axis of the same extent (in order), unit axes fill the
        rest; if they do not all find a place, unit axes go in front."""
        inputs = [Var(it.var.name, it.var.dtype) for it in last.iters]
        dtype = inputs[0].dtype
        outputs: list[PrimExpr] = []
        matched = 0
        for it in first.iters:
            if matched < len(inputs) and _equal(it.dom, last.iters[matched].dom):
                outputs.append(inputs[matched])
                matched += 1
            else:
                outputs.append(const(0, dtype))
        if matched != len(inputs):
            outputs = [const(0, dtype)] * (len(first.iters) - len(inputs)) + list(inputs)
        return IndexMap(inputs, outputs)

    @staticmethod
    def _order_last_block(sch: Schedule, infos) -> None:
        """In the elementwise last block, put first the loops that index the reduced
        statistics (and unit loops), so that its loop nest lines up with the
        reductions' (spatial axes outside, the reduced axes inside)."""
        last = infos[-1]
        if "R" in last.dom_kind():
            return
        reduced = {w.buffer for info in infos[:-1] for w in sch.get(info.block_rv).writes}
        block = sch.get(last.block_rv)
        loops = sch.get_loops(last.block_rv)
        iter_to_loop = {iv.var: sch.get(lp).loop_var
                        for iv, lp in zip(block.iter_vars, loops, strict=False)}
        spatial = set()
        for region in block.reads:
            if region.buffer in reduced:
                for mn, ext in region.region:
                    for e in (mn, ext):
                        if isinstance(e, PrimExpr):
                            spatial |= {iter_to_loop[v] for v in expr_vars(e)
                                        if v in iter_to_loop}
        first, rest = [], []
        for lp in loops:
            loop = sch.get(lp)
            (first if loop.loop_var in spatial or loop.extent == 1 else rest).append(lp)
        if len(loops) > 1:
            sch.reorder(*first, *rest)

