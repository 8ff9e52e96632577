"""The CPU rule for matrix-vector products (TVM's ``dlight.cpu.GEMV``): one reduction
block ``y[s] += A[.., ..] * x[r]`` where one input (the vector) misses a spatial axis,
plus at most one elementwise epilogue (bias, activation) after it.

The output rows run in parallel (OpenMP) and the inner work is vectorized, in one of two
ways chosen by the matrix's layout:

* **inner reduction** (``A[s, r]``: the reduction walks the matrix's contiguous axis):
  a horizontal reduction: the reduction loop is split into vectors, ``rfactor`` gives
  each lane its own partial sum (``y_rf[s, lane]``), the lane loop is vectorized, and the
  lanes are summed at the end of each row;
* **outer reduction** (``A[r, s]``, as ``x @ W`` with ``W`` stored ``[in, out]``): the
  columns are split into tiles of a few vectors; each parallel task owns one tile and, for
  every ``r``, adds ``x[r] * A[r, tile]`` to it, one vector per step.
"""

from __future__ import annotations

from ...ir import Add, Block, BufferLoad, BufferStore, Var
from ...ir.functor import expr_vars
from ...schedule import BlockRV, LoopRV, Schedule
from ..analysis import (
    BlockInfo,
    collect_block_iter_vars_used_in_access_region,
    get_extent,
    normalize_or_decline,
    try_inline_contiguous_spatial,
)
from ..base import Declined
from . import _common as C


def _reduction_value(block: Block):
    """``Y`` when the block's body is ``X[i] = X[i] + Y``, else None."""
    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, Add):
        return None
    lhs = store.value.a
    if not (isinstance(lhs, BufferLoad) and lhs.buffer is store.buffer
            and len(lhs.indices) == len(store.indices)
            and all(a is b for a, b in zip(lhs.indices, store.indices, strict=True))):
        return None
    return store.value.b


def gemv_vectors(sch: Schedule, info: BlockInfo) -> list[str]:
    """The names of the "vector" inputs of a GEMV block: those that miss some (but not
    all) of its iter vars. Raises :class:`Declined` saying why ``info`` is no GEMV."""
    block: Block = sch.get(info.block_rv)
    name = block.name
    if info.is_injective():
        raise Declined(f'block "{name}" is elementwise (no reduction axis)')
    if not info.is_reduction():
        raise Declined(f'block "{name}" is not a reduction (no init, or a reduction axis '
                       "indexes its output)")
    if len(block.writes) != 1 or len(block.reads) < 2:
        raise Declined(f'block "{name}" does not read two inputs into one output')
    if _reduction_value(block) is None:
        raise Declined(f'block "{name}" is not a sum (its body is not `y = y + ...`)')
    if not collect_block_iter_vars_used_in_access_region(block, block.writes[0].region):
        raise Declined(f'block "{name}" writes a single element (a full reduction, no rows)')
    n = len(block.iter_vars)
    used = [len(collect_block_iter_vars_used_in_access_region(block, r.region))
            for r in block.reads]
    vectors = [r.buffer.name for r, u in zip(block.reads, used, strict=True) if 0 < u < n]
    if not vectors:
        raise Declined(f'block "{name}": every input uses all {n} iter vars, so none is a '
                       "vector (not a matrix-vector product)")
    if len(vectors) == len(block.reads):
        raise Declined(f'block "{name}": every input ({", ".join(vectors)}) misses an iter '
                       "var: a matrix-matrix product (or a transpose), not a matrix-vector one")
    return vectors


class GEMV(C.MachineRule):
    """Matrix-vector products on the CPU (TVM's ``dlight.cpu.GEMV``): rows in parallel,
    the inner loop vectorized.

    ``vector_bits`` (default: this CPU's widest SIMD register, from its flags) sets the
    lanes; ``num_cores`` (default: the cores this process may use) only decides whether
    a parallel loop is worth it.

    Where it differs from TVM 0.27: TVM schedules only the inner-reduction layout
    (``A[s, r]``) and returns None on ``x @ W`` with ``W[r, s]`` (which then falls to its
    ``Reduction``); here that layout is vectorized over the output columns. TVM also
    "vectorizes" a 64-row tile around the whole reduction nest, which LLVM can widen; a
    C compiler cannot keep 64 independent dot products in registers, so the rows run in
    parallel and the reduction itself is vectorized through ``rfactor`` lanes instead.

    >>> import workbench as wb
    >>> func = wb.workloads.gemv(256, 256)
    >>> sch = GEMV(vector_bits=256, num_cores=2).apply(func, wb.Target("c"), False)
    >>> [sch.get(lp).kind for lp in sch.get_loops("y_rf_update")]
    ['parallel', 'serial', 'vectorized']
    >>> wb.verify(sch, func).ok
    True
    """

    def apply(self, func, target, tunable) -> Schedule:
        bits, cores = self.machine()
        sch = Schedule(func)
        infos = normalize_or_decline(sch)
        infos = try_inline_contiguous_spatial(sch, infos)
        if not infos or len(infos) > 2:
            names = ", ".join(f'"{i.name}"' for i in infos or [])
            raise Declined(f"{len(infos or [])} blocks remain after inlining ({names}); a "
                           "GEMV is one reduction block and at most one elementwise epilogue")
        main = infos[0]
        epilogue = infos[1] if len(infos) == 2 else None
        if epilogue is not None and not epilogue.is_injective():
            raise Declined(f'the block after "{main.name}", "{epilogue.name}", is not '
                           "elementwise")
        if len(main.iters) not in (2, 3):
            raise Declined(f'block "{main.name}" has {len(main.iters)} axes '
                           f"({main.dom_kind()}); a GEMV has [S, R] or [batch, S, R]")
        gemv_vectors(sch, main)
        block = main.block_rv
        inner_reduction, loops = self._normalize(sch, main)
        lanes = C.vector_lanes(C.dtype_of(sch, block), bits)
        if inner_reduction:
            self._inner_reduction(sch, block, loops, epilogue, lanes, cores)
        else:
            self._outer_reduction(sch, block, loops, epilogue, lanes, cores)
        return sch

    # ------------------------------------------------------------------ layout

    @staticmethod
    def _normalize(sch: Schedule, info: BlockInfo) -> tuple[bool, dict[str, LoopRV | None]]:
        """Reorder the block's loops into batch, spatial, reduction (each group fused,
        the matrix's contiguous axis innermost in its group) and tell whether the
        reduction walks the matrix's contiguous axis."""
        block: Block = sch.get(info.block_rv)
        n = len(block.iter_vars)
        matrix = max(block.reads, key=lambda r: len(
            collect_block_iter_vars_used_in_access_region(block, r.region)))
        if len(collect_block_iter_vars_used_in_access_region(block, matrix.region)) < n:
            raise Declined(f'block "{block.name}": no input uses every axis (no matrix)')
        order: list[Var] = []
        for mn, _ in matrix.region:
            vs = [v for v in (iv.var for iv in block.iter_vars) if v in expr_vars(mn)]
            if len(vs) != 1:
                raise Declined(f'block "{block.name}" indexes {matrix.buffer.name} with '
                               f"an expression of {len(vs)} axes; a GEMV indexes its matrix "
                               "by one axis per dimension")
            if vs[0] not in order:
                order.append(vs[0])
        by_var = {it.var: it for it in info.iters}
        regions = [*block.writes, *block.reads]
        batch, spatial, reduce = [], [], []
        for v in order:
            it = by_var[v]
            if it.kind == "R":
                reduce.append(it.loop_rv)
            elif all(v in collect_block_iter_vars_used_in_access_region(block, r.region)
                     for r in regions):
                batch.append(it.loop_rv)
            else:
                spatial.append(it.loop_rv)
        if not spatial or not reduce:
            missing = "spatial" if not spatial else "reduction"
            raise Declined(f'block "{block.name}" has no {missing} axis of its own besides '
                           "the batch ones")
        inner_reduction = by_var[order[-1]].kind == "R"
        sch.reorder(*batch, *spatial, *reduce)
        loops: dict[str, LoopRV | None] = {
            "batch": (sch.fuse(*batch) if len(batch) > 1 else batch[0]) if batch else None,
            "s": sch.fuse(*spatial) if len(spatial) > 1 else spatial[0],
            "r": sch.fuse(*reduce) if len(reduce) > 1 else reduce[0],
        }
        return inner_reduction, loops

    # ------------------------------------------------------------------ schedules

    @staticmethod
    def _outer_loop(sch: Schedule, batch: LoopRV | None, s: LoopRV) -> LoopRV:
        return sch.fuse(batch, s) if batch is not None else s

    def _inner_reduction(self, sch: Schedule, block: BlockRV, loops: dict, epilogue,
                         lanes: int, cores: int) -> None:
        """Rows in parallel; each row's dot product as ``lanes`` partial sums, one
        vector per step, summed at the end of the row."""
        work = C.static_product(get_extent(sch, lp) for lp in loops.values() if lp)
        outer = self._outer_loop(sch, loops["batch"], loops["s"])
        ndim = len(sch.get(block).writes[0].buffer.shape)
        rf = C.rfactor_lanes(sch, block, loops["r"], lanes, ndim)
        if rf is not None:
            outer = sch.get_loops(rf)[0]
            sch.reverse_compute_at(block, outer, preserve_unit_loops=True)
            C.vectorize_lanes(sch, rf)
        if C.worth_parallel(work, get_extent(sch, outer), cores):
            sch.parallel(outer)
        if epilogue is not None:
            sch.reverse_compute_at(epilogue.block_rv, outer, preserve_unit_loops=True)
            self._vectorize_epilogue(sch, epilogue.block_rv, outer)

    def _outer_reduction(self, sch: Schedule, block: BlockRV, loops: dict, epilogue,
                         lanes: int, cores: int) -> None:
        """Column tiles of a few vectors in parallel; for every ``r`` the tile gets
        ``x[r] * A[r, tile]`` (the tile's loop, innermost, vectorized)."""
        s, r = loops["s"], loops["r"]
        work = C.static_product(get_extent(sch, lp) for lp in loops.values() if lp)
        extent = get_extent(sch, s)
        tile = 4 * lanes
        if isinstance(extent, int):
            while tile > lanes and extent % tile:
                tile //= 2
            tile = min(tile, extent)
        so, si = sch.split(s, factors=[None, tile])
        sch.reorder(so, r, si)
        outer = self._outer_loop(sch, loops["batch"], so)
        sch.vectorize(si)
        sch.decompose_reduction(block, r)
        if C.worth_parallel(work, get_extent(sch, outer), cores):
            sch.parallel(outer)
        if epilogue is not None:
            sch.reverse_compute_at(epilogue.block_rv, outer, preserve_unit_loops=True)
            self._vectorize_epilogue(sch, epilogue.block_rv, outer)

    @staticmethod
    def _vectorize_epilogue(sch: Schedule, epilogue: BlockRV, outer: LoopRV) -> None:
        loops = sch.get_loops(epilogue)
        inner = loops[-1]
        if sch.get(inner) is not sch.get(outer):
            extent = get_extent(sch, inner)
            if (not isinstance(extent, int) or extent >= 4) and C.walks_last_dim(
                    sch, epilogue, inner):
                sch.vectorize(inner)
