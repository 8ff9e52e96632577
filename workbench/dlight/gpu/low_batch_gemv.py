"""Products of a small, symbolic batch of vectors with a matrix (TVM's
``dlight.gpu.LowBatchGEMV``): ``Y[b, s] = sum_r X[b, r] * W[r, s]`` where ``b`` is a
symbolic size (a decoding batch, a short sequence) and every other extent is static.

The batch is padded up to a multiple of a *bucket* (4 by default) with ``pad_einsum``:
``X`` is copied into ``X_pad`` (zero rows past ``n``), the product runs on whole buckets,
and the copy back to ``Y`` only keeps the first ``n`` rows. Each bucket of rows is one
``blockIdx.y``, so a block computes ``bucket`` outputs per matrix element it reads: the
matrix, which dominates the traffic, is read once per bucket instead of once per row.

Outer reduction (``W[r, s]``, as ``x @ W`` in the demo MLP): ``threadIdx.x`` runs 32
output columns (coalesced reads of ``W``'s rows), ``threadIdx.y`` 4 slices of the
reduction; two ``rfactor`` stages keep partial sums in registers, the last one sums the
4 slices across threads; the epilogue (bias, ReLU) and the copy back run in the same
kernel, on threadIdx.y 0 (every row of threads holds the sum; TVM lets all of them store
it, a benign race that the emulator's checker refuses).

Inner reduction (``W[s, r]``, an ``NT_matmul``): ``threadIdx.x`` runs up to 64 lanes of the
reduction, ``threadIdx.y`` groups of 2 output columns; each lane keeps
``bucket x 2 x VEC_C`` partial sums, the lanes are summed across threads, lane 0 stores.
The vector has a symbolic batch, so it is read from global memory (as in TVM, which
stages it in shared memory only when its size is known).

Where the extents do not divide TVM's thread counts this rule uses fewer threads instead
of TVM's predicates (rfactor here refuses a predicated reduction loop).

>>> import workbench as wb
>>> f = wb.workloads.demo_mlp("n")["fused_matmul1_add1"]
>>> sch = LowBatchGEMV().apply(f, wb.Target("cuda"), False)
>>> [sch.get(lp).thread_tag for lp in sch.get_loops("matmul_rf_update")][:4]
['blockIdx.y', 'blockIdx.x', 'threadIdx.x', 'threadIdx.y']
"""

from __future__ import annotations

from ...ir import Block, IntImm, Var
from ...schedule import BlockRV, Schedule
from ..analysis import (
    BlockInfo,
    collect_block_iter_vars_used_in_access_region,
    get_extent,
    max_threads_per_block,
    normalize_or_decline,
    normalize_prim_func,
    try_inline_contiguous_spatial,
)
from ..base import Declined, GPUScheduleRule
from .gemv import dominant_read, gemv_shape_problem, max_factor, vector_buffers

__all__ = ["LowBatchGEMV"]


def _point_accesses(block: Block) -> bool:
    """Every access is one element at plain iter vars or constants (what pad_einsum
    needs)."""
    for region in (*block.reads, *block.writes):
        for mn, ext in region.region:
            if not (isinstance(ext, IntImm) and ext.value == 1 or ext == 1):
                return False
            if not isinstance(mn, (Var, IntImm, int)):
                return False
    return True


def _low_batch_problem(sch: Schedule, info: BlockInfo) -> tuple[str | None, list]:
    problem = gemv_shape_problem(sch, info)
    if problem is not None:
        return problem, []
    block: Block = sch.get(info.block_rv)
    if not _point_accesses(block):
        return (f'block "{block.name}" accesses a buffer at an expression, not at plain iter '
                "vars (pad_einsum cannot pad it)"), []
    static = {iv.var for iv in block.iter_vars if isinstance(iv.extent, (int, IntImm))}
    dynamic = [iv for iv in block.iter_vars if iv.var not in static]
    if len(dynamic) != 1:
        if not dynamic:
            return (f'block "{block.name}" has no symbolic batch (every size is a fixed '
                    "number); LowBatchGEMV is for a batch n known only at run time"), []
        return (f'block "{block.name}" has {len(dynamic)} symbolic axes; LowBatchGEMV needs '
                "exactly one, the batch"), []
    if dynamic[0].kind != "S":
        return f'block "{block.name}": the symbolic axis is a reduction axis, not a batch', []
    vectors = vector_buffers(block, static)
    if not 0 < len(vectors) < len(block.reads):
        return (f'block "{block.name}": no operand is a (batched) vector: every input uses '
                "all the static axes"), []
    return None, vectors


class LowBatchGEMV(GPUScheduleRule):
    """Schedules ``Y[n, s] = X[n, r] @ W`` for a small symbolic batch ``n`` by padding
    ``n`` to a multiple of ``bucket`` and running a GEMV schedule per bucket
    (TVM's ``dlight.gpu.LowBatchGEMV``: its CUDA inner- and outer-reduction paths,
    without the dequantize stage of quantized weights).

    >>> import workbench as wb
    >>> f = wb.workloads.demo_mlp(1)["fused_matmul1_add1"]
    >>> try:
    ...     LowBatchGEMV().apply(f, wb.Target("cuda"), False)
    ... except Declined as d:
    ...     print(d.reason.split(" (")[0])
    block "matmul" has no symbolic batch
    """

    def __init__(self, bucket: int = 4):
        self.bucket = bucket

    def apply(self, func, target, tunable) -> Schedule:
        sch = Schedule(func)
        infos = normalize_or_decline(sch)
        reductions = [i for i in infos if i.is_reduction()]
        if len(reductions) != 1:
            raise Declined("no reduction block: nothing is summed" if not reductions else
                           f"{len(reductions)} reduction blocks; LowBatchGEMV takes exactly "
                           "one")
        problem, _ = _low_batch_problem(sch, reductions[0])
        if problem is not None:
            raise Declined(problem)
        info = reductions[0]
        sch.pad_einsum(info.block_rv, [d if isinstance(d, int) else self.bucket
                                       for d in info.dom()])
        infos = normalize_prim_func(sch)
        pad_input = None
        for i in infos:
            if "pad" in i.name and not sch.get_producers(i.block_rv):
                pad_input = i.block_rv
        infos = try_inline_contiguous_spatial(sch, [i for i in infos if "pad" not in i.name])
        if len(infos) > 2 or (len(infos) == 2 and not infos[1].is_injective()):
            raise Declined(f"{len(infos)} blocks left after inlining "
                           f"({', '.join(i.name for i in infos)}); a GEMV is one reduction, "
                           "optionally followed by one element-wise block")
        info = infos[0]
        if len(info.iters) not in (2, 3):
            raise Declined(f'block "{info.name}" has {len(info.iters)} axes; LowBatchGEMV '
                           "takes (batch, S, R)")
        problem, vectors = _low_batch_problem(sch, info)
        if problem is not None:
            raise Declined(problem)
        inner = self._normalize(sch, info)
        if inner:
            self._inner(sch, target, info.block_rv, pad_input)
            return sch
        if self.bucket > 4:
            raise Declined(f"bucket {self.bucket} > 4: TVM's outer-reduction path keeps at "
                           "most 4 rows per block")
        self._outer(sch, info.block_rv, pad_input)
        return sch

    @staticmethod
    def _normalize(sch: Schedule, info: BlockInfo) -> bool:
        """Loops to ``batch, s (fused), r (fused)``; True for an inner reduction."""
        block: Block = sch.get(info.block_rv)
        static = {iv.var for iv in block.iter_vars if isinstance(iv.extent, (int, IntImm))}
        read = dominant_read(block, static)
        order = []
        for mn, _ in read.region:
            if isinstance(mn, Var):
                order.append(mn)
        by_var = {it.var: it for it in info.iters}
        dyn = next(it for it in info.iters if it.var not in static)
        uses = [collect_block_iter_vars_used_in_access_region(block, r.region)
                for r in (*block.writes, *block.reads)]
        spatial, reduce_ = [], []
        for v in order:
            it = by_var[v]
            if it.kind == "R":
                reduce_.append(it.loop_rv)
            elif not all(v in u for u in uses):
                spatial.append(it.loop_rv)
        if not spatial or not reduce_ or len(spatial) + len(reduce_) + 1 != len(info.iters):
            raise Declined(f'block "{block.name}": the matrix read does not split its axes '
                           "into batch, spatial and reduction ones")
        inner = by_var[order[-1]].kind == "R"
        sch.reorder(dyn.loop_rv, *spatial, *reduce_)
        for group in (spatial, reduce_):
            if len(group) > 1:
                sch.fuse(*group)
        return inner

    def _outer(self, sch: Schedule, main: BlockRV, pad_input: BlockRV | None) -> None:
        """TVM's outer-reduction configuration for CUDA (its "fallback" one): 32 x 4
        threads, reduction split ``[None, TR, 4, 8]``. TVM 0.27 stops half-way through
        it when no dequantize block exists (it returns the schedule with only the first
        stage bound, which does not build); here the float32 matrix is read directly and
        the schedule is finished."""
        TS, TR, SCALE_PACK, DEC_PACK = 32, 4, 4, 8  # noqa: N806 (TVM's names)
        b, s, r = sch.get_loops(main)
        by, batch = sch.split(b, factors=[None, self.bucket])
        bx, ts = sch.split(s, factors=[None, TS])
        r, tr, scale_c, vec_c = sch.split(r, factors=[None, TR, SCALE_PACK, DEC_PACK])
        sch.reorder(by, bx, ts, r, batch, scale_c, tr, vec_c)
        rf = sch.rfactor(sch.fuse(tr, vec_c), 0)
        *_, tr_vec_c = sch.get_loops(main)
        tr, _ = sch.split(tr_vec_c, factors=[TR, DEC_PACK])
        rf2 = sch.rfactor(tr, 0)

        by, bx, ts, r, batch, scale_c, tr_vec_c = sch.get_loops(rf)
        tr, vec_c = sch.split(tr_vec_c, factors=[TR, DEC_PACK])
        sch.reorder(by, bx, ts, tr, r, scale_c, batch, vec_c)
        sch.bind(by, "blockIdx.y")
        sch.bind(bx, "blockIdx.x")
        sch.bind(ts, "threadIdx.x")
        sch.bind(tr, "threadIdx.y")
        if pad_input is not None:
            sch.compute_inline(pad_input)

        sch.reverse_compute_at(rf2, bx, preserve_unit_loops=True)
        tr, vec_c, batch, ts = sch.get_loops(rf2)[2:]
        sch.reorder(ts, tr, batch, vec_c)
        sch.bind(ts, "threadIdx.x")
        sch.bind(tr, "threadIdx.y")

        sch.reverse_compute_at(main, bx, preserve_unit_loops=True)
        tr, batch, ts = sch.get_loops(main)[2:]
        sch.reorder(batch, ts, tr)
        sch.bind(ts, "threadIdx.x")
        sch.bind(tr, "threadIdx.y")

        sch.decompose_reduction(rf, sch.get_loops(rf)[4])
        sch.decompose_reduction(rf2, sch.get_loops(rf2)[4])
        sch.set_scope(rf, 0, "local")
        sch.set_scope(rf2, 0, "local")

        consumers = sch.get_consumers(main)
        if consumers:
            epi = consumers[0]
            sch.reverse_compute_at(epi, bx, preserve_unit_loops=True)
            _, ts = sch.get_loops(epi)[2:]
            ts, row0 = sch.split(ts, factors=[None, 1])
            sch.bind(ts, "threadIdx.x")
            # every threadIdx.y holds the sum: row 0 stores it (TVM lets all TR rows store
            # the same value, a race the emulator's checker refuses)
            sch.bind(row0, "threadIdx.y")
            sch.set_scope(main, 0, "local")

    def _inner(self, sch: Schedule, target, main: BlockRV, pad_input: BlockRV | None) -> None:
        """TVM's inner-reduction configuration for CUDA: ``threadIdx.x`` runs ``TR`` lanes
        of the reduction, ``threadIdx.y`` ``TS`` groups of ``TILE_S`` output columns; a
        thread keeps ``bucket x TILE_S x VEC_C`` partial sums in registers. The vector
        has a symbolic batch, so it is not staged in shared memory (as in TVM)."""
        b, s, r = sch.get_loops(main)
        len_s, len_r = get_extent(sch, s), get_extent(sch, r)
        TS, TR = (4, 64) if len_s > len_r else (16, 32)  # noqa: N806 (TVM's names)
        while TS * TR > max_threads_per_block(target):
            if TS > 1:
                TS //= 2  # noqa: N806
            else:
                TR //= 2  # noqa: N806
        # fewer lanes / rows than TVM where they do not divide the extents: rfactor here
        # refuses the predicates TVM would put on the reduction loop
        while TR > 1 and len_r % TR:
            TR //= 2  # noqa: N806
        TILE_S = 2  # noqa: N806
        while TS > 1 and len_s % (TS * TILE_S):
            TS //= 2  # noqa: N806
        if len_s % (TS * TILE_S):
            TILE_S = 1  # noqa: N806
        TILE_R = max(max_factor(len_r, [TR, TR * 2, TR * 4, TR * 8]) // TR, 1)  # noqa: N806
        VEC_C = min(max_factor(TILE_R, [1, 2, 4, 8]), 4)  # noqa: N806
        UNROLL = 256  # noqa: N806

        # stage 1: per thread, bucket x TILE_S x VEC_C partial sums over r's outer part
        bx, ts, tile_s = sch.split(s, factors=[None, TS, TILE_S])
        r, tr, tile_r_vec_n, vec_c = sch.split(r, factors=[None, TR, TILE_R // VEC_C, VEC_C])
        sch.reorder(r, tile_r_vec_n, tr, vec_c)
        rf = sch.rfactor(sch.fuse(tr, vec_c), 0)
        # stage 2: the VEC_C sums of a lane into one
        tr_vec_c = sch.get_loops(main)[-1]
        tr, _ = sch.split(tr_vec_c, factors=[TR, None])
        rf2 = sch.rfactor(tr, 0)

        b, bx, ts, tile_s, r, tile_r_vec_n, tr_vec_c = sch.get_loops(rf)
        tr, vec_c = sch.split(tr_vec_c, factors=[TR, None])
        sch.reorder(bx, ts, tr, r, tile_s, tile_r_vec_n, vec_c)
        sch.bind(bx, "blockIdx.x")
        sch.bind(ts, "threadIdx.y")
        sch.bind(tr, "threadIdx.x")
        sch.vectorize(vec_c)
        by, batch = sch.split(b, factors=[None, self.bucket])
        sch.bind(by, "blockIdx.y")
        sch.reorder(bx, ts, tr, r, batch)
        if pad_input is not None:
            sch.compute_inline(pad_input)

        sch.reverse_compute_at(rf2, bx, preserve_unit_loops=True)
        tr, vec_c, batch, *ts_tile_s = sch.get_loops(rf2)[2:]
        fused = sch.fuse(*ts_tile_s) if len(ts_tile_s) > 1 else ts_tile_s[0]
        ts_o, ts_i, tile_s = sch.split(fused, factors=[None, TS, TILE_S])
        tile_s, vec_s = sch.split(tile_s, factors=[None, max_factor(TILE_S, [1, 2, 4, 8])])
        ts = sch.fuse(ts_o, ts_i)
        sch.reorder(ts, tr, tile_s, batch, vec_s, vec_c)
        sch.bind(ts, "threadIdx.y")
        sch.bind(tr, "threadIdx.x")
        sch.vectorize(vec_s)

        sch.reverse_compute_at(main, bx, preserve_unit_loops=True)
        tr, batch, *ts_tile_s = sch.get_loops(main)[2:]
        fused = sch.fuse(*ts_tile_s) if len(ts_tile_s) > 1 else ts_tile_s[0]
        ts_o, ts_i, tile_s = sch.split(fused, factors=[None, TS, TILE_S])
        ts = sch.fuse(ts_o, ts_i)
        sch.reorder(tile_s, batch, ts, tr)
        sch.bind(ts, "threadIdx.y")
        sch.bind(tr, "threadIdx.x")

        sch.decompose_reduction(rf, sch.get_loops(rf)[4])
        sch.decompose_reduction(rf2, sch.get_loops(rf2)[-1])
        sch.set_scope(rf, 0, "local")
        sch.set_scope(rf2, 0, "local")
        for blk in (rf, rf2):
            loop = sch.get_loops(blk)[4]
            sch.annotate(loop, "pragma_auto_unroll_max_step", UNROLL)
            sch.annotate(loop, "pragma_unroll_explicit", 1)

        consumers = sch.get_consumers(main)
        if consumers:
            epi = consumers[0]
            sch.reverse_compute_at(epi, bx, preserve_unit_loops=True)
            rest = sch.get_loops(epi)[3:]
            fused = sch.fuse(*rest) if len(rest) > 1 else rest[0]
            ts_o, ts_i, tile_s = sch.split(fused, factors=[None, TS, TILE_S])
            sch.bind(sch.fuse(ts_o, ts_i), "threadIdx.y")
            # every lane holds the sum: lane 0 stores it (TVM lets all TR lanes store the
            # same value, a race the emulator's checker refuses)
            _, lane0 = sch.split(tile_s, factors=[None, 1])
            sch.bind(lane0, "threadIdx.x")
            sch.set_scope(main, 0, "local")
