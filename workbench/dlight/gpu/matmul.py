"""The GPU rule for matrix multiplications (TVM's ``dlight.gpu.Matmul``, its default
CUDA strategy for non-tensor-core types such as float32).

What it matches: a function whose blocks are all spatial or spatial+reduction, with
exactly one reduction block, and that block a *matmul-like* einsum
``C[S, I, J] += A[S, I, K] * B[S, J, K]``: two reads and one write, each indexed by
plain iter vars, where every non-unit iter var is

* ``S`` (batch): spatial, indexes A, B and C;
* ``I`` (rows): spatial, indexes A and C;
* ``J`` (columns): spatial, indexes B and C;
* ``K`` (reduction): indexes A and B but not C;

and there is at least one I, one J and one K. Several iter vars of one kind are
fused (batch dims, a conv's ``(n, y, x)``); unit ones are dropped. So a matmul with
``B`` transposed, a batched matmul and a conv (on its padded input) all qualify; a
matrix-vector product (no ``J``, or an ``I`` of extent 1 as in a batch-1 linear
layer) does not: the GEMV rules handle those.

How it schedules (the numbers are the CUDA configuration):

1. Normal form: ``reindex`` A, B and C through copies laid out by the block's iter
   vars, ``transform_layout`` them to ``[S, I, K]``, ``[S, J, K]``, ``[S, I, J]`` and
   ``transform_block_layout`` the block to ``[S, I, J, K]`` loops.
2. ``pad_einsum`` rounds I up to 32, J to 64 and K to 16 (a symbolic ``n`` becomes
   ``(n + 31) // 32 * 32``), so any size fits the tiles.
3. Tiles: one thread block computes a 32 x 64 tile of C with 8 x 16 threads, each
   thread a 4 x 4 micro tile (the inner J loop vectorized by 2) held in registers
   (``cache_write`` to ``local``, written back by each thread). Batch and J tiles go
   to ``blockIdx.y``, I tiles to ``blockIdx.x``; ``vthread`` loops of extent 1 mark
   where virtual threads would go. ``threadIdx.x`` carries the
   ``pragma_auto_unroll_max_step = 256`` annotation.
4. K runs in steps of 16: at each step the 128 threads of the block copy the
   32 x 16 tile of A and the 64 x 16 tile of B into shared memory (cooperative
   fetch, 2-wide vector loads, rows padded by ``storage_align`` against bank
   conflicts), then every thread accumulates its micro tile from shared memory.
5. The reindex and padding copies are inlined into the shared-memory loads and the
   write-back; element-wise epilogues (bias add, ReLU) are inlined into the
   write-back too, which gets a predicate where the tile overhangs C.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import Block, IntImm, PrimExpr, Var
from ...ir.expr import const
from ...ir.functor import expr_vars
from ...ir.index_map import IndexMap
from ...schedule import BlockRV, Schedule, ScheduleError
from ..analysis import get_root_block
from ..base import Declined, GPUScheduleRule

__all__ = ["Matmul", "MatmulConfig", "matmul_index_maps"]


@dataclass(frozen=True)
class MatmulConfig:
    """The tile shape (TVM's ``Matmul.Config``; the defaults are its CUDA values).

    A thread block covers ``vthread_x * block_size_x * micro_size_x`` rows (I) and
    ``vthread_y * block_size_y * micro_size_y`` columns (J) of C, in K steps of
    ``micro_size_k``, with ``block_size_x * block_size_y`` threads.
    """

    block_size_x: int = 8
    block_size_y: int = 16
    vthread_x: int = 1
    vthread_y: int = 1
    micro_size_x: int = 4
    micro_size_y: int = 4
    micro_size_k: int = 16
    vector_size: int = 2
    unroll: int = 256
    storage_align: bool = True


# ---------------------------------------------------------------- matching

_KIND_ORDER = {"A": "SIK", "B": "SJK", "C": "SIJ", "block": "SIJK"}


def _extent_is_one(e) -> bool:
    return (isinstance(e, int) and e == 1) or (isinstance(e, IntImm) and e.value == 1)


def _region_vars(block: Block, which: str, region) -> set[Var]:
    used: set[Var] = set()
    for mn, ext in region.region:
        if not _extent_is_one(ext):
            raise Declined(f'block "{block.name}" {which} {region.buffer.name} in slices, '
                           "not one element per iteration, so it is not a matmul-like einsum")
        used |= expr_vars(mn)
    return used


def _iter_kinds(block: Block) -> dict[Var, str]:
    """Classify each iter var of ``block`` as S/I/J/K/T (T: extent 1), or explain with
    :class:`Declined` why the block is not ``C[S,I,J] += A[S,I,K] * B[S,J,K]``."""
    name = block.name
    if len(block.reads) != 2 or len(block.writes) != 1:
        raise Declined(f'reduction block "{name}" reads {len(block.reads)} buffer(s) and '
                       f"writes {len(block.writes)}; a matmul reads two (A, B) and writes one")
    a_vars = _region_vars(block, "reads", block.reads[0])
    b_vars = _region_vars(block, "reads", block.reads[1])
    c_vars = _region_vars(block, "writes", block.writes[0])
    kinds: dict[Var, str] = {}
    for iv in block.iter_vars:
        v = iv.var
        if _extent_is_one(iv.extent):
            kinds[v] = "T"
        elif iv.kind == "S":
            if v in a_vars and v in b_vars and v in c_vars:
                kinds[v] = "S"
            elif v in a_vars and v in c_vars:
                kinds[v] = "I"
            elif v in b_vars and v in c_vars:
                kinds[v] = "J"
            else:
                raise Declined(f'spatial iter var {v.name} of block "{name}" does not index '
                               "the output together with an input, so the block is not "
                               "matmul-like")
        elif iv.kind == "R":
            if v in a_vars and v in b_vars and v not in c_vars:
                kinds[v] = "K"
            else:
                raise Declined(f'reduction iter var {v.name} of block "{name}" does not '
                               "index both inputs, so the block is not matmul-like")
        else:
            raise Declined(f'iter var {v.name} of block "{name}" is neither spatial nor '
                           "a reduction")
    present = set(kinds.values())
    missing = [k for k in "IJK" if k not in present]
    if missing:
        has_unit = any(kinds[iv.var] == "T" for iv in block.iter_vars)
        if "K" in missing:
            reason = (f'block "{name}" has no reduction axis read by both inputs: it is not '
                      "a matrix product")
        elif missing == ["I", "J"]:
            reason = (f'block "{name}" has neither rows nor columns: a dot product, not a '
                      "matrix-matrix product")
        else:
            side = "row" if missing == ["I"] else "column"
            size = (f"no {side} axis" if not has_unit else
                    "only one row (batch 1)" if side == "row" else "only one column")
            reason = (f'block "{name}" has {size}: a matrix-vector product, not '
                      "matrix-matrix; GEMV, LowBatchGEMV or Reduction take it")
        raise Declined(reason)
    return kinds


def _fusion_map(block: Block, vars_in_order: list[Var], kinds: dict[Var, str], order: str,
                extents: dict[Var, PrimExpr | int]) -> IndexMap:
    """The map from ``vars_in_order`` (one index each) to one index per kind in
    ``order``: iter vars of the same kind fused row-major, unit ones dropped, a
    missing kind 0."""
    inputs = [Var(f"i{n}", _dtype(extents[v])) for n, v in enumerate(vars_in_order)]
    fused: dict[str, PrimExpr] = {}
    for v, x in zip(vars_in_order, inputs, strict=True):
        kind = kinds[v]
        if kind == "T":
            continue
        fused[kind] = fused[kind] * extents[v] + x if kind in fused else x
    dtype = inputs[0].dtype if inputs else "int32"
    finals = [fused.get(k, const(0, dtype)) for k in order]
    if all(isinstance(extents[v], (int, IntImm)) for v in vars_in_order):
        return IndexMap(inputs, finals)
    # A symbolic extent (a batch ``n``): the map is one to one by construction (row-major
    # fusion), but the workbench cannot invert it over a symbolic shape (TVM's
    # arithmetic analyzer can), so the inverse comes with it: each fused iter var is
    # recovered by dividing by the extents after it and taking the remainder.
    outs = [Var(f"o{n}", dtype) for n in range(len(order))]
    back: list[PrimExpr] = []
    for n, v in enumerate(vars_in_order):
        kind = kinds[v]
        if kind == "T":
            back.append(const(0, inputs[n].dtype))
            continue
        e: PrimExpr = outs[order.index(kind)]
        later = [extents[u] for u in vars_in_order[n + 1:] if kinds[u] == kind]
        for ext in later:
            e = e // ext
        if any(kinds[u] == kind for u in vars_in_order[:n]):
            e = e % extents[v]
        back.append(e)
    return IndexMap(inputs, finals, IndexMap(outs, back))


def _dtype(e) -> str:
    return getattr(e, "dtype", "int32") if not isinstance(e, int) else "int32"


def matmul_index_maps(block: Block) -> tuple[IndexMap, IndexMap, IndexMap, IndexMap]:
    """The four maps that bring a matmul-like block to normal form (TVM's
    ``get_index_map``): for the block's iter vars to ``[S, I, J, K]``, and for the
    (reindexed) A, B and C to ``[S, I, K]``, ``[S, J, K]`` and ``[S, I, J]``. Raises
    :class:`Declined` when the block is not matmul-like.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.batch_matmul(2, 8, 8, 8))
    >>> block_map, a_map, b_map, c_map = matmul_index_maps(sch.get(sch.get_block("C")))
    >>> block_map
    IndexMap(lambda i0, i1, i2, i3: (i0, i1, i2, i3))
    """
    kinds = _iter_kinds(block)
    extents = {iv.var: iv.extent for iv in block.iter_vars}
    ivars = [iv.var for iv in block.iter_vars]

    def used(region) -> list[Var]:
        vs: set[Var] = set()
        for mn, _ in region.region:
            vs |= expr_vars(mn)
        return [v for v in ivars if v in vs]

    return (
        _fusion_map(block, ivars, kinds, _KIND_ORDER["block"], extents),
        _fusion_map(block, used(block.reads[0]), kinds, _KIND_ORDER["A"], extents),
        _fusion_map(block, used(block.reads[1]), kinds, _KIND_ORDER["B"], extents),
        _fusion_map(block, used(block.writes[0]), kinds, _KIND_ORDER["C"], extents),
    )


def _check_normal_form(sch: Schedule, blocks: list[BlockRV]) -> None:
    for rv in blocks:
        block: Block = sch.get(rv)
        loops = [sch.get(lp) for lp in sch.get_loops(rv)]
        if len(loops) != len(block.iter_values) or any(
            value is not lp.loop_var or lp.min != 0
            for lp, value in zip(loops, block.iter_values, strict=False)
        ):
            raise Declined(f'not in normal form: the loops around block "{block.name}" do '
                           "not bind its iter vars one to one (the function is already "
                           "scheduled or was written with fused/split loops)")


def _reduction_block(sch: Schedule) -> BlockRV:
    """The one reduction block among the root's children, all others spatial."""
    blocks = sch.get_child_blocks(get_root_block(sch))
    if not blocks:
        raise Declined("the function has no blocks")
    _check_normal_form(sch, blocks)
    reductions = []
    for rv in blocks:
        block: Block = sch.get(rv)
        kinds = {iv.kind for iv in block.iter_vars}
        if kinds == {"S", "R"}:
            reductions.append(block.name)
        elif kinds != {"S"}:
            raise Declined(f'block "{block.name}" is neither spatial nor a spatial+reduction '
                           f"block (iter kinds {''.join(iv.kind for iv in block.iter_vars)})")
    if not reductions:
        raise Declined("no reduction block: every block is element-wise (a copy, a "
                       "transpose, ...): nothing to multiply")
    if len(reductions) > 1:
        raise Declined(f"{len(reductions)} reduction blocks ({', '.join(reductions)}); "
                       "Matmul takes functions with exactly one")
    return sch.get_block(reductions[0])


# ---------------------------------------------------------------- scheduling


def _inline_producers(sch: Schedule, block: BlockRV) -> None:
    """Inline every producer (transitively) of ``block`` that can be, repeatedly."""
    while True:
        done = 0
        for producer in _transitive(sch, block, sch.get_producers):
            try:
                sch.compute_inline(producer)
            except ScheduleError:
                continue
            done += 1
        if not done:
            return


def _inline_consumers(sch: Schedule, block: BlockRV) -> None:
    """Inline the consumers (transitively) of ``block``: forward where possible, else
    into their producer (``reverse_compute_inline``), repeatedly."""
    while True:
        done = 0
        consumers = _transitive(sch, block, sch.get_consumers)
        for primitive in (sch.compute_inline, sch.reverse_compute_inline):
            for consumer in consumers:
                try:
                    primitive(consumer)
                except ScheduleError:
                    continue
                done += 1
        if not done:
            return


def _transitive(sch: Schedule, block: BlockRV, step) -> list[BlockRV]:
    out: list[BlockRV] = []
    for nxt in step(block):
        out.append(nxt)
        out.extend(_transitive(sch, nxt, step))
    return out


def _inline_consumer_chain(sch: Schedule, write_back: BlockRV) -> None:
    """Fold everything after the write-back into it; a consumer that also needs
    another producer gets that producer inlined into it first (TVM's
    ``auto_inline_consumer_chain``)."""
    _inline_consumers(sch, write_back)
    left = sch.get_consumers(write_back)
    if left:
        mine = sch.get(write_back)
        for consumer in left:
            for producer in sch.get_producers(consumer):
                if sch.get(producer) is not mine:
                    _inline_producers(sch, producer)
                    sch.compute_inline(producer)
        _inline_consumers(sch, write_back)
    left = sch.get_consumers(write_back)
    if left:
        names = ", ".join(sch.get(b).name for b in left)
        raise Declined(f"the epilogue block(s) {names} could not be inlined into the "
                       f'write-back of "{sch.get(write_back).name}" (not element-wise)')


class Matmul(GPUScheduleRule):
    """Tiled GEMM with shared-memory staging and register accumulators for any
    matmul-like function (TVM's ``dlight.gpu.Matmul``, float32 / CUDA strategy).

    ``config`` is a :class:`MatmulConfig` (default: TVM's CUDA tile, 32 x 64 per
    thread block, 128 threads). See the module docstring for what matches and how
    it is scheduled.

    >>> import workbench as wb
    >>> sch = Matmul().apply(wb.workloads.matmul(128, 128, 128), wb.Target("cuda"), False)
    >>> sorted({sch.get(l).thread_tag for l in sch.get_loops("C_update")} - {None})
    ['blockIdx.x', 'blockIdx.y', 'threadIdx.x', 'threadIdx.y', 'vthread.x', 'vthread.y']
    >>> bool(wb.verify(sch, wb.workloads.matmul(128, 128, 128), target="cuda", emulate=True))
    True
    """

    def __init__(self, config: MatmulConfig | None = None):
        self.config = config or MatmulConfig()

    def apply(self, func, target, tunable) -> Schedule:
        cfg = self.config
        sch = Schedule(func)
        main = _reduction_block(sch)
        block_map, a_map, b_map, c_map = matmul_index_maps(sch.get(main))

        # 1. normal form C[S, I, J] += A[S, I, K] * B[S, J, K]
        a_copy = sch.reindex(main, ("read", 0))
        b_copy = sch.reindex(main, ("read", 1))
        c_copy = sch.reindex(main, ("write", 0))
        sch.transform_layout(a_copy, ("write", 0), a_map)
        sch.transform_layout(b_copy, ("write", 0), b_map)
        sch.transform_layout(c_copy, ("read", 0), c_map)
        sch.transform_block_layout(main, block_map)

        # 2. pad every dimension to a whole number of tiles
        x_tile = cfg.vthread_x * cfg.block_size_x * cfg.micro_size_x
        y_tile = cfg.vthread_y * cfg.block_size_y * cfg.micro_size_y
        sch.pad_einsum(main, [1, x_tile, y_tile, cfg.micro_size_k])

        # 3. tiles: blocks / virtual threads / threads / per-thread micro tile
        batch, x, y, k = sch.get_loops(main)
        by, vy, ty, yi = sch.split(y, [None, cfg.vthread_y, cfg.block_size_y,
                                       cfg.micro_size_y])
        bx, vx, tx, xi = sch.split(x, [None, cfg.vthread_x, cfg.block_size_x,
                                       cfg.micro_size_x])
        ko, ki = sch.split(k, [None, cfg.micro_size_k])
        sch.reorder(by, bx, vy, vx, ty, tx, ko, ki, xi, yi)
        by = sch.fuse(batch, by)
        sch.bind(bx, "blockIdx.x")
        sch.bind(by, "blockIdx.y")
        sch.bind(vy, "vthread.y")
        sch.bind(vx, "vthread.x")
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        if cfg.micro_size_y % cfg.vector_size == 0:
            sch.vectorize(sch.split(yi, [None, cfg.vector_size])[1])
        if cfg.unroll > 0:
            sch.annotate(tx, "pragma_auto_unroll_max_step", cfg.unroll)
            sch.annotate(tx, "pragma_unroll_explicit", 1)

        # 4. accumulate in registers, each thread writes its micro tile back
        write_back = sch.cache_write(main, 0, "local")
        sch.reverse_compute_at(write_back, tx, preserve_unit_loops=True)
        if cfg.micro_size_x % cfg.vector_size == 0:
            inner = sch.get_loops(write_back)[-1]
            sch.vectorize(sch.split(inner, [None, cfg.vector_size])[1])

        # 5. stage the A and B tiles of each K step in shared memory
        fetches = []
        for index in (0, 1):
            fetch = sch.cache_read(main, index, "shared")
            n = len(sch.get_loops(fetch))
            sch.compute_at(fetch, ko, preserve_unit_loops=True)
            loops = sch.get_loops(fetch)[-n:]
            f_ty, f_tx, _, vec = sch.split(
                sch.fuse(*loops),
                [cfg.block_size_y, cfg.block_size_x, None, cfg.vector_size],
            )
            sch.vectorize(vec)
            sch.bind(f_ty, "threadIdx.y")
            sch.bind(f_tx, "threadIdx.x")
            if cfg.storage_align:
                sch.storage_align(fetch, 0, axis=1, factor=8, offset=cfg.vector_size)
            fetches.append(fetch)
        for fetch in fetches:
            _inline_producers(sch, fetch)

        # 6. fold the reindex/padding copies and the epilogue into the write-back
        _inline_consumer_chain(sch, write_back)
        sch.decompose_reduction(main, ko)
        return sch
