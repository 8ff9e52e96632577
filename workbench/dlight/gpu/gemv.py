"""Matrix-vector products on the GPU (TVM's ``dlight.gpu.GEMV``).

A GEMV block reduces ``y[s] += M[s, r] * v[r]``: one operand (the *vector*, possibly
with a batch dimension) is indexed by only some of the block's iter vars, the other
(the *matrix*) by all of them. Each output element needs a whole row of the matrix but
does very little arithmetic per byte, so the schedule is about reading the matrix once,
fast: many threads share one row's reduction.

When the reduction axis is the innermost axis of the matrix (``M[s, r]``: "inner
reduction"), the rule

1. splits the reduction into ``threadIdx.x`` lanes x a per-thread tile ending in a short
   vectorized run, and makes two ``rfactor`` stages: each thread keeps ``TR * VEC_C``
   partial sums in registers (``local``), then ``TR`` of them, then the last stage sums
   the ``TR`` lanes across threads (a cross-thread all-reduce);
2. gives ``threadIdx.y`` to ``TS`` output rows per block and ``blockIdx.x`` to the rest;
3. stages the vector in shared memory once per block (a cooperative, vectorized load by
   all threads), reads the matrix through registers;
4. puts a following elementwise epilogue (bias, activation, cast) into the same kernel.

A symbolic number of rows (``y[i] = A[i, :] @ x`` for ``i < n``, decode attention over a
symbolic sequence length) gets TVM's 1 x 64 threads (fewer lanes where 64 does not
divide the reduction). TVM fuses a batch axis (attention heads) with the symbolic rows;
here the batch keeps its own loop on ``blockIdx.y``: the fused loop's ``fused // n``
bindings are beyond the region analysis of rfactor's stage-pipeline check.

The "outer reduction" case (the matrix is ``M[r, s]``, e.g. ``x @ W`` with ``W[k, n]``)
is declined, as TVM's GEMV does on CUDA (it schedules that case only for Metal and
Adreno); LowBatchGEMV, Reduction or Matmul take those functions.
"""

from __future__ import annotations

from ...ir import Block, IntImm, PrimExpr, Var
from ...schedule import BlockRV, LoopRV, Schedule
from ..analysis import (
    BlockInfo,
    collect_block_iter_vars_used_in_access_region,
    get_extent,
    is_broadcast_epilogue,
    max_shared_memory_per_block,
    max_threads_per_block,
    normalize_or_decline,
    try_inline_contiguous_spatial,
)
from ..base import Declined, GPUScheduleRule

__all__ = ["GEMV"]


# ---------------------------------------------------------------- analysis


def reduction_rhs(block: Block) -> PrimExpr | None:
    """``Y`` when the block's body is ``X[idx] = X[idx] + Y``, else None."""
    from ...ir.expr import Add, BufferLoad
    from ...ir.stmt import BufferStore

    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, Add):
        return None
    lhs = store.value.a
    if not (isinstance(lhs, BufferLoad) and lhs.buffer is store.buffer
            and len(lhs.indices) == len(store.indices)
            and all(a is b or (isinstance(a, IntImm) and isinstance(b, IntImm)
                               and a.value == b.value)
                    for a, b in zip(lhs.indices, store.indices, strict=True))):
        return None
    return store.value.b


def gemv_shape_problem(sch: Schedule, info: BlockInfo) -> str | None:
    """Why ``info``'s block is not a sum of products over a matrix and a vector (None
    when it is): TVM's ``is_gemv`` conditions, in words."""
    block: Block = sch.get(info.block_rv)
    name = block.name
    if not info.is_reduction():
        return f'block "{name}" is not a reduction block'
    if len(block.reads) < 2 or len(block.writes) != 1:
        return (f'block "{name}" reads {len(block.reads)} buffer(s) and writes '
                f'{len(block.writes)}: a GEMV reads a matrix and a vector and writes one output')
    if reduction_rhs(block) is None:
        return f'block "{name}" is not a sum (X[...] = X[...] + ...)'
    if not collect_block_iter_vars_used_in_access_region(block, block.writes[0].region):
        return f'block "{name}" writes a scalar'
    return None


def vector_buffers(block: Block, iter_vars: set[Var] | None = None) -> list:
    """The buffers ``block`` reads with some but not all of ``iter_vars`` (default: all
    its iter vars): the vector operands of a GEMV."""
    ivars = iter_vars if iter_vars is not None else {iv.var for iv in block.iter_vars}
    out = []
    for read in block.reads:
        used = collect_block_iter_vars_used_in_access_region(block, read.region) & ivars
        if 0 < len(used) < len(ivars):
            out.append(read.buffer)
    return out


def dominant_read(block: Block, iter_vars: set[Var]):
    """The read region using the most of ``iter_vars`` (the first such one)."""
    best, count = None, -1
    for read in block.reads:
        n = len(collect_block_iter_vars_used_in_access_region(block, read.region) & iter_vars)
        if n > count:
            best, count = read, n
    return best


def matrix_axes(sch: Schedule, info: BlockInfo, iter_vars: set[Var]) -> list[Var]:
    """The iter vars in the order the dominant (matrix) read indexes them, outermost
    first; raises Declined when an index is not a plain iter var or a constant."""
    block: Block = sch.get(info.block_rv)
    read = dominant_read(block, iter_vars)
    order: list[Var] = []
    for mn, _ in read.region:
        if isinstance(mn, IntImm):
            continue
        if not isinstance(mn, Var) or mn not in {iv.var for iv in block.iter_vars}:
            raise Declined(f'block "{block.name}": the matrix {read.buffer.name} is indexed by '
                           f"`{mn}`, not by plain iter vars (quantized / packed layouts are "
                           "not supported)")
        order.append(mn)
    return order


def classify_loops(sch: Schedule, info: BlockInfo, order: list[Var]
                   ) -> tuple[list[LoopRV], list[LoopRV], list[LoopRV]]:
    """Batch (used by every buffer), spatial and reduction loops, in matrix order."""
    block: Block = sch.get(info.block_rv)
    uses = [collect_block_iter_vars_used_in_access_region(block, r.region)
            for r in (*block.writes, *block.reads)]
    by_var = {it.var: it for it in info.iters}
    batch, spatial, reduce_ = [], [], []
    for v in order:
        it = by_var[v]
        if it.kind == "R":
            reduce_.append(it.loop_rv)
        elif all(v in u for u in uses):
            batch.append(it.loop_rv)
        else:
            spatial.append(it.loop_rv)
    return batch, spatial, reduce_


def normalize_gemv(sch: Schedule, info: BlockInfo) -> bool:
    """Reorder and fuse the block's loops into ``[batch,] spatial, reduction, 1`` (TVM's
    GEMV ``normalize``, which adds a unit batch loop when there is none; fusing that with
    a symbolic spatial loop gives ``// n`` / ``% n`` bindings that rfactor's region
    analysis cannot bound here, so it is left out; the last unit loop stands for a
    packed reduction group) and say
    whether the reduction is inner (True) or outer (False)."""
    block: Block = sch.get(info.block_rv)
    ivars = {iv.var for iv in block.iter_vars}
    order = matrix_axes(sch, info, ivars)
    if set(order) != {it.var for it in info.iters}:
        raise Declined(f'block "{block.name}": the matrix read does not use every loop of '
                       "the block")
    inner = next(it for it in info.iters if it.var is order[-1]).kind == "R"
    batch, spatial, reduce_ = classify_loops(sch, info, order)
    if not spatial or not reduce_:
        raise Declined(f'block "{block.name}" has no spatial axis of its own (every output '
                       "index is a batch index)" if not spatial else
                       f'block "{block.name}" has no reduction axis')
    c = sch.add_unit_loop(info.block_rv)
    sch.reorder(*batch, *spatial, *reduce_, c)
    for group in (batch, spatial, reduce_):
        if len(group) > 1:
            sch.fuse(*group)
    return inner


def max_factor(n: int | PrimExpr, factors: list[int]) -> int:
    """The largest of ``factors`` dividing ``n`` (1 when none or ``n`` is symbolic)."""
    if not isinstance(n, int):
        return 1
    for f in sorted(factors, reverse=True):
        if n % f == 0:
            return f
    return 1


def buffer_bytes(buf) -> int | None:
    """The size of ``buf`` in bytes, None when its shape is symbolic."""
    total = 1
    for d in buf.shape:
        d = d.value if isinstance(d, IntImm) else d
        if not isinstance(d, int):
            return None
        total *= d
    bits = int("".join(ch for ch in buf.dtype if ch.isdigit()) or 32)
    return total * max(1, bits // 8)


def dtype_bytes(dtype: str) -> int:
    bits = int("".join(ch for ch in dtype if ch.isdigit()) or 32)
    return max(1, bits // 8)


def prepare(func, target, rule: str) -> tuple[Schedule, BlockInfo, BlockInfo | None]:
    """Normal form, inline spatial blocks, and find the GEMV block and its epilogue."""
    sch = Schedule(func)
    infos = normalize_or_decline(sch)
    infos = try_inline_contiguous_spatial(sch, infos)
    reductions = [i.name for i in infos if not i.is_injective()]
    if not reductions:
        raise Declined("no reduction block: nothing is summed (element-wise and transpose "
                       "functions belong to other rules)")
    if len(infos) > 2:
        raise Declined(f"{len(infos)} blocks left after inlining "
                       f"({', '.join(i.name for i in infos)}); a GEMV is one reduction, "
                       "optionally followed by one element-wise block")
    epilogue = infos[1] if len(infos) == 2 else None
    if epilogue is not None and not epilogue.is_injective():
        raise Declined(f'block "{epilogue.name}" after the reduction is not elementwise')
    return sch, infos[0], epilogue


# ---------------------------------------------------------------- the rule


class GEMV(GPUScheduleRule):
    """Schedules matrix-vector products with the reduction innermost in the matrix
    (TVM's ``dlight.gpu.GEMV`` on CUDA): two ``rfactor`` stages, the vector in shared
    memory, a cross-thread all-reduce over ``threadIdx.x``, the epilogue in the same
    kernel.

    >>> import workbench as wb
    >>> sch = GEMV().apply(wb.workloads.gemv(256, 256), wb.Target("cuda"), False)
    >>> [sch.get(lp).thread_tag for lp in sch.get_loops("y")]
    ['blockIdx.x', None, 'threadIdx.y', 'threadIdx.x']
    """

    def apply(self, func, target, tunable) -> Schedule:
        sch, info, epilogue = prepare(func, target, "GEMV")
        block = info.block_rv
        if len(info.iters) not in (2, 3):
            raise Declined(f'block "{info.name}" has {len(info.iters)} axes '
                           f'({info.dom_kind()}); a GEMV has 2 (SR) or 3 (batch, S, R)')
        problem = gemv_shape_problem(sch, info)
        if problem is not None:
            raise Declined(problem)
        stmt: Block = sch.get(block)
        vectors = vector_buffers(stmt)
        if not 0 < len(vectors) < len(stmt.reads):
            raise Declined(
                f'block "{info.name}": no operand is a vector (every input is indexed by all '
                "of the block's axes)" if not vectors else
                f'block "{info.name}" is a full matrix product: every input misses one of '
                "its axes, none is a matrix read along all of them (Matmul's case)")
        if not normalize_gemv(sch, info):
            raise Declined(
                f'block "{info.name}" sums down the matrix\'s columns (x @ W with W[k, n]: '
                "k is not W's contiguous axis); TVM's GEMV takes that layout only on "
                "Metal/Adreno")
        return schedule_inner(sch, target, block, vectors, epilogue)


def schedule_inner(sch: Schedule, target, gemv: BlockRV, vectors: list,
                   epilogue: BlockInfo | None) -> Schedule:
    """The inner-reduction schedule (TVM's CUDA configuration); ``gemv``'s loops are
    ``batch, s, r, c`` (see :func:`normalize_gemv`)."""
    loops = sch.get_loops(gemv)
    batch, (s, r, c) = (loops[0] if len(loops) == 4 else None), loops[-3:]
    len_b = get_extent(sch, batch) if batch is not None else 1
    len_s = len_b * get_extent(sch, s) \
        if isinstance(len_b, int) and isinstance(get_extent(sch, s), int) else None
    len_r, len_c = get_extent(sch, r), get_extent(sch, c)
    VEC_C, LOAD_V_VEC, UNROLL = 4, 8, 256  # noqa: N806 (TVM's names)
    TS, TR = (16, 32) if len_s is not None else (1, 64)  # noqa: N806
    while TS * TR > max_threads_per_block(target):
        if TS > 1:
            TS //= 2  # noqa: N806
        else:
            TR //= 2  # noqa: N806
    if isinstance(len_r, int) and isinstance(len_c, int):
        # fewer lanes than TVM when the reduction is not a multiple of TR: rfactor here
        # refuses the predicate TVM would put on the reduction loop
        while TR > 1 and (len_r * len_c) % TR:
            TR //= 2  # noqa: N806
    TILE_S = 1  # noqa: N806
    TILE_R = len_c if isinstance(len_c, int) and len_c > 1 else max(  # noqa: N806
        max_factor(len_r, [TR, TR * 2, TR * 4, TR * 8]) // TR, 1)
    VEC_C = min(max_factor(TILE_R, [1, 2, 4, 8]), VEC_C)  # noqa: N806

    # stage 1: each thread sums TILE_R // VEC_C * (r's outer part) products into
    # TR * VEC_C registers
    # a batch next to a symbolic spatial axis keeps its own loop (on blockIdx.y): TVM fuses
    # the two, whose ``fused // n`` binding the region analysis here cannot bound
    off = 1 if batch is not None and len_s is None else 0
    if batch is not None and not off:
        s = sch.fuse(batch, s)
    r = sch.fuse(r, c)
    bx, ts, tile_s = sch.split(s, factors=[None, TS, TILE_S])
    r, tr, tile_r_vec_n, vec_c = sch.split(r, factors=[None, TR, TILE_R // VEC_C, VEC_C])
    sch.reorder(r, tile_r_vec_n, tr, vec_c)
    rf = sch.rfactor(sch.fuse(tr, vec_c), 0)
    # stage 2: the VEC_C partial sums of a thread into one
    tr_vec_c = sch.get_loops(gemv)[-1]
    tr, _ = sch.split(tr_vec_c, factors=[TR, None])
    rf2 = sch.rfactor(tr, 0)

    bx, ts, tile_s, r, tile_r_vec_n, tr_vec_c = sch.get_loops(rf)[off:]
    tr, vec_c = sch.split(tr_vec_c, factors=[TR, None])
    sch.reorder(bx, ts, tr, r, tile_s, tile_r_vec_n, vec_c)
    if off:
        sch.bind(sch.get_loops(rf)[0], "blockIdx.y")
    sch.bind(bx, "blockIdx.x")
    sch.bind(ts, "threadIdx.y")
    sch.bind(tr, "threadIdx.x")
    sch.vectorize(vec_c)

    # the vector in shared memory (whole), when it fits; the matrix through registers
    smem = 0
    for buf in vectors:
        size = buffer_bytes(buf)
        smem = None if size is None or smem is None else smem + size
    load_v_shared = len(vectors) == 1 and smem is not None \
        and smem <= max_shared_memory_per_block(target)
    stmt: Block = sch.get(rf)
    matrix = next(rd.buffer for rd in stmt.reads
                  if rd.buffer not in vectors and rd.buffer is not stmt.writes[0].buffer)
    m_local = sch.cache_read(rf, matrix.name, "local")
    n_cache = len(sch.get_loops(m_local))
    sch.compute_at(m_local, r, preserve_unit_loops=True)
    cache_loops = sch.get_loops(m_local)[-n_cache:]
    load = cache_loops[0] if len(cache_loops) == 1 else sch.fuse(*cache_loops[-2:])
    vec_len = max(1, 4 // dtype_bytes(matrix.dtype))
    _, vec_load = sch.split(load, factors=[None, vec_len])
    sch.vectorize(vec_load)
    v_shared = None
    if load_v_shared:
        v_shared = sch.cache_read(rf, vectors[0].name, "shared")
        sch.compute_at(v_shared, tr, preserve_unit_loops=True)
        lp = sch.get_loops(v_shared)[-1]
        ext = get_extent(sch, lp)
        if isinstance(ext, int):
            f = max_factor(ext, [TS * TR, TS * TR * 2, TS * TR * 4, TS * TR * 8])
            vec_length = max(min(f // TS // TR, LOAD_V_VEC), 1)
        else:
            vec_length = LOAD_V_VEC
        _, ty, tx, vec = sch.split(lp, factors=[None, TS, TR, vec_length])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(vec)

    # stage 2 and the final cross-thread sum, under the same blockIdx.x
    sch.reverse_compute_at(rf2, bx, preserve_unit_loops=True)
    tr, vec_c, *ts_tile_s = sch.get_loops(rf2)[1 + off:]
    ts_o, ts_i, tile_s = sch.split(sch.fuse(*ts_tile_s) if len(ts_tile_s) > 1 else ts_tile_s[0],
                                   factors=[None, TS, TILE_S])
    tile_s, vec_s = sch.split(tile_s, factors=[None, max_factor(TILE_S, [1, 2, 4, 8])])
    ts = sch.fuse(ts_o, ts_i)
    sch.reorder(ts, tr, tile_s, vec_s, vec_c)
    sch.bind(ts, "threadIdx.y")
    sch.bind(tr, "threadIdx.x")
    sch.vectorize(vec_s)

    sch.reverse_compute_at(gemv, bx, preserve_unit_loops=True)
    tr, *ts_tile_s = sch.get_loops(gemv)[1 + off:]
    ts_o, ts_i, tile_s = sch.split(sch.fuse(*ts_tile_s) if len(ts_tile_s) > 1 else ts_tile_s[0],
                                   factors=[None, TS, TILE_S])
    ts = sch.fuse(ts_o, ts_i)
    sch.reorder(tile_s, ts, tr)
    sch.bind(ts, "threadIdx.y")
    sch.bind(tr, "threadIdx.x")

    sch.decompose_reduction(rf, sch.get_loops(rf)[3 + off])
    sch.decompose_reduction(rf2, sch.get_loops(rf2)[-1])
    sch.set_scope(rf, 0, "local")
    sch.set_scope(rf2, 0, "local")
    for blk in (rf, rf2):
        loop = sch.get_loops(blk)[3 + off]
        sch.annotate(loop, "pragma_auto_unroll_max_step", UNROLL)
        sch.annotate(loop, "pragma_unroll_explicit", 1)
    if v_shared is not None:
        loop = sch.get_loops(v_shared)[-4]
        sch.annotate(loop, "pragma_unroll_explicit", UNROLL)
        sch.annotate(loop, "pragma_vectorize", 1)

    if epilogue is not None:
        epi = epilogue.block_rv
        if is_broadcast_epilogue(sch, gemv, epi):
            sch.reverse_compute_at(epi, bx)
            sch.set_scope(gemv, 0, "shared")
            rest = sch.get_loops(epi)[2 + off:]
            _, tx, row0 = sch.split(sch.fuse(*rest) if len(rest) > 1 else rest[0],
                                    factors=[None, TR, 1])
            sch.bind(tx, "threadIdx.x")
            sch.bind(row0, "threadIdx.y")  # one row of threads writes (TVM: all TS rows)
        else:
            sch.reverse_compute_at(epi, bx, preserve_unit_loops=True)
            rest = sch.get_loops(epi)[1 + off:]
            fused = sch.fuse(*rest) if len(rest) > 1 else rest[0]
            ts_o, ts_i, tile_s = sch.split(fused, factors=[None, TS, TILE_S])
            sch.bind(sch.fuse(ts_o, ts_i), "threadIdx.y")
            # every lane holds the sum: lane 0 writes it (TVM lets all TR lanes store the
            # same value, a race the emulator's checker refuses)
            _, lane0 = sch.split(tile_s, factors=[None, 1])
            sch.bind(lane0, "threadIdx.x")
            sch.set_scope(gemv, 0, "local")
    return sch
