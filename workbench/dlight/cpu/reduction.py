"""The CPU rule for row reductions (TVM's ``dlight.cpu.Reduction``): a row sum or max,
softmax (max, exp, sum, normalize), layer norm (sum, mean, variance, normalize), RMS
norm: reduction blocks that reduce each row along its contiguous axis, and elementwise
blocks, all over the same rows.

Schedule:

1. every reduction becomes a SIMD horizontal reduction: its innermost (contiguous) axis
   is split into vectors and ``rfactor`` keeps one partial result per lane
   (``max_rf[i, lane]``), the lane loop vectorized; the lanes are combined at the end of
   the row;
2. the last block's row loops are fused into one ``parallel`` loop and every other block
   is computed inside it (``compute_at``), so a row's statistics are computed right
   before the row is normalized, by the thread that normalizes it;
3. the elementwise blocks' innermost loop is vectorized.

A function of a single row (layer norm at batch 1) has nothing to run in parallel: each
block is vectorized where it stands.
"""

from __future__ import annotations

import re

from ...ir import Block, IntImm
from ...ir.analysis import structural_equal
from ...schedule import BlockRV, LoopRV, Schedule
from ..analysis import (
    BlockInfo,
    get_extent,
    get_root_block,
    normalize_or_decline,
)
from ..base import Declined
from . import _common as C


def _rows(index_list) -> list:
    """Indices without the constant zeros (unit dimensions)."""
    return [i for i in index_list if not (isinstance(i, IntImm) and i.value == 0)]


def _same_extent(a, b) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a is b or structural_equal(a, b)


class Reduction(C.MachineRule):
    """Row reductions on the CPU (TVM's ``dlight.cpu.Reduction``): rows in parallel,
    every block of a row computed together, reductions and elementwise loops
    vectorized.

    Matches a function (in normal form) whose blocks are elementwise or *row
    reductions*: spatial axes first, then reduction axes, the last reduction axis
    being the contiguous (last) axis of every input it indexes, and whose blocks all
    run over the same leading rows, each reading and writing the intermediate results
    of its own row only. ``vector_bits`` / ``num_cores`` as in
    :class:`~workbench.dlight.cpu.GEMV`.

    Where it differs from TVM 0.27: TVM wants at least two blocks, the last one
    elementwise (a lone row sum is taken here too); TVM takes any reduction with
    leading spatial axes, matmuls included, while here a reduction along a
    non-contiguous axis (``x @ W`` with ``W[k, n]``) is declined for GEMV or
    Fallback, which vectorize it over the spatial axis. TVM does not vectorize the
    reductions (its ``rfactor`` cannot follow ``compute_at``; it asks LLVM to unroll
    instead): here the ``rfactor`` comes first, then the ``compute_at``. TVM also
    parallelizes a single-row layer norm over its columns and recomputes the
    statistics in every column (``relu_sum[0]`` written by all threads at once); here
    a single row is not parallelized.

    >>> import workbench as wb
    >>> func = wb.workloads.softmax(128, 256)
    >>> sch = Reduction(vector_bits=256, num_cores=2).apply(func, wb.Target("c"), False)
    >>> [sch.get(lp).kind for lp in sch.get_loops("max_rf_update")]
    ['parallel', 'serial', 'serial', 'vectorized']
    >>> wb.verify(sch, func).ok
    True
    """

    def apply(self, func, target, tunable) -> Schedule:
        bits, cores = self.machine()
        sch = Schedule(func)
        infos = normalize_or_decline(sch)
        reductions = [i for i in infos if not i.is_injective()]
        if not reductions:
            raise Declined("no reduction block: every block is elementwise")
        for info in reductions:
            self._check_row_reduction(sch, info)
        k = min(len(i.dom_kind()) - len(i.dom_kind().lstrip("S")) for i in reductions)
        rows = reductions[0].dom()[:k]
        single_row = C.static_product(rows) == 1
        if not single_row:
            self._check_rows(sch, infos, k, rows)
        lanes = C.vector_lanes(C.dtype_of(sch, infos[-1].block_rv), bits)
        work = C.total_work(infos)
        rf_blocks = []
        for info in reductions:
            block: Block = sch.get(info.block_rv)
            r_loops = [it.loop_rv for it in info.iters if it.kind == "R"]
            r = sch.fuse(*r_loops) if len(r_loops) > 1 else r_loops[0]
            ndim = len(block.writes[0].buffer.shape)
            rf = C.rfactor_lanes(sch, info.block_rv, r, lanes, ndim)
            if rf is not None:
                rf_blocks.append(rf)
        if single_row:
            self._schedule_single_row(sch, infos, rf_blocks, cores)
        else:
            self._schedule_rows(sch, infos, rf_blocks, k, work, cores)
        return sch

    # ------------------------------------------------------------------ checks

    @staticmethod
    def _check_row_reduction(sch: Schedule, info: BlockInfo) -> None:
        kinds = info.dom_kind()
        if not re.fullmatch("S+R+", kinds):
            raise Declined(f'block "{info.name}" has axes {kinds}; a row reduction has its '
                           "spatial axes first, then its reduction axes")
        if not info.is_reduction():
            raise Declined(f'block "{info.name}" is not a reduction block (no init, or a '
                           "reduction axis indexes its output)")
        block: Block = sch.get(info.block_rv)
        var = info.iters[-1].var
        bad = C.reads_contiguous_in(block, var)
        if bad:
            raise Declined(
                f'block "{info.name}" reduces along `{var.name}`, which is not the '
                f"contiguous (last) axis of {', '.join(bad)}: a matmul-like or column "
                "reduction, not a row one (GEMV or Fallback vectorize it over a spatial axis)"
            )

    @staticmethod
    def _check_rows(sch: Schedule, infos: list[BlockInfo], k: int, rows: list) -> None:
        """Every block runs over the same ``k`` leading rows, and writes and reads the
        intermediate buffers at its own row only (so that rows can run in parallel, each
        computing its own statistics)."""
        written = {w.buffer for info in infos for w in sch.get(info.block_rv).writes}
        for info in infos:
            dom, kinds = info.dom(), info.dom_kind()
            if len(dom) < k or kinds[:k] != "S" * k or not all(
                    _same_extent(a, b) for a, b in zip(dom[:k], rows, strict=False)):
                raise Declined(f'block "{info.name}" ({kinds} {dom}) does not run over the '
                               f"rows {rows} of the reductions")
            block: Block = sch.get(info.block_rv)
            mine = [iv.var for iv in block.iter_vars[:k]]
            regions = [("writes", w) for w in block.writes] + [
                ("reads", r) for r in block.reads if r.buffer in written]
            for what, region in regions:
                lead = _rows([mn for mn, _ in region.region])[:k]
                if len(lead) < k or not all(a is b for a, b in zip(lead, mine, strict=True)):
                    raise Declined(f'block "{info.name}" {what} {region.buffer.name} outside '
                                   "its own row; rows cannot be computed independently")

    # ------------------------------------------------------------------ schedules

    @staticmethod
    def _vectorize_inner(sch: Schedule, block: BlockRV, above: LoopRV | None) -> None:
        """Vectorize ``block``'s innermost loop if it lies below ``above``, walks the
        store's last axis and is long enough (4 or more, or symbolic). The whole loop
        gets ``omp simd``: the C compiler strip-mines it into vectors itself."""
        loops = sch.get_loops(block)
        if not loops:
            return
        inner = loops[-1]
        if above is not None and sch.get(inner) is sch.get(above):
            return
        extent = get_extent(sch, inner)
        if isinstance(extent, int) and extent < 4:
            return
        if C.walks_last_dim(sch, block, inner):
            sch.vectorize(inner)

    def _schedule_rows(self, sch: Schedule, infos: list[BlockInfo], rf_blocks: list[BlockRV],
                       k: int, work: int | None, cores: int) -> None:
        last = infos[-1].block_rv
        loops = sch.get_loops(last)
        spatial = sch.fuse(*loops[:k]) if k > 1 else loops[0]
        blocks = sch.get_child_blocks(get_root_block(sch))
        last_block = sch.get(last)
        producers = [b for b in blocks if sch.get(b) is not last_block]
        for block in reversed(producers):
            sch.compute_at(block, spatial, preserve_unit_loops=True)
        if C.worth_parallel(work, get_extent(sch, spatial), cores):
            sch.parallel(spatial)
        rf_names = {sch.get(b).name for b in rf_blocks}
        injective = {i.name for i in infos if i.is_injective()}
        for block in sch.get_child_blocks(spatial):
            name = sch.get(block).name
            if name in rf_names:
                C.vectorize_lanes(sch, block)
            elif name in injective:
                self._vectorize_inner(sch, block, spatial)

    def _schedule_single_row(self, sch: Schedule, infos: list[BlockInfo],
                             rf_blocks: list[BlockRV], cores: int) -> None:
        for rf in rf_blocks:
            C.vectorize_lanes(sch, rf)
        for info in infos:
            if not info.is_injective():
                continue
            loops = sch.get_loops(info.block_rv)
            self._vectorize_inner(sch, info.block_rv, None)
            work = C.static_product(get_extent(sch, lp) for lp in loops)
            if len(loops) > 1:
                outer = sch.fuse(*loops[:-1]) if len(loops) > 2 else loops[0]
                if C.worth_parallel(work, get_extent(sch, outer), cores):
                    sch.parallel(outer)
