"""The GPU rule for one reduction block (plus an optional elementwise epilogue): a row
sum, a column sum, or a matrix-vector product with a batch of 1 (TVM's
``dlight.gpu.Reduction``).

The rule reads the block's *dominant read* (the input indexed by the most iter vars)
to decide which way the reduction runs in memory:

* **inner reduction** (the reduced axis is the contiguous one, ``B[i] = sum_k A[i, k]``):
  one thread block per output element; its threads split the reduction
  (``rfactor`` into per-thread partial sums held in registers), then combine the
  partials with a cross-thread reduction over ``threadIdx.x``;
* **inner spatial** (the output axis is the contiguous one, ``y[j] = sum_k x[k] W[k, j]``):
  16 x 16 threads per block, ``threadIdx.x`` over 16 neighbouring outputs (so loads
  coalesce) and ``threadIdx.y`` over 16 slices of the reduction, combined across
  ``threadIdx.y`` at the end.

The epilogue is computed in the same kernel from the reduced value (kept in
registers, or in shared memory when the epilogue broadcasts it over more elements).
"""

from __future__ import annotations

from ...ir import Block, PrimExpr, Var
from ...ir.analysis import structural_equal
from ...ir.expr import Add, BufferLoad, FloorDiv, IntImm, Max, Min, Mul
from ...ir.functor import iter_exprs
from ...ir.simplify import simplify
from ...ir.stmt import BufferStore
from ...schedule import BlockRV, LoopRV, Schedule
from ..analysis import (
    BlockInfo,
    detect_dominant_read,
    get_extent,
    is_broadcast_epilogue,
    normalize_or_decline,
    suggest_threads_per_block,
    try_inline_contiguous_spatial,
)
from ..base import Declined, GPUScheduleRule

__all__ = ["Reduction", "iter_sum_terms", "reduction_combiner"]


def reduction_combiner(block: Block) -> str | None:
    """``"+"``, ``"max"`` or ``"min"`` when ``block``'s body is ``X[idx] = X[idx] op Y``
    (``Y`` not reading ``X``), else None."""
    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, (Add, Max, Min)):
        return None
    lhs = store.value.a

    if not (isinstance(lhs, BufferLoad) and lhs.buffer is store.buffer
            and len(lhs.indices) == len(store.indices)
            and all(structural_equal(a, b)
                    for a, b in zip(lhs.indices, store.indices, strict=True))):
        return None
    for e in iter_exprs(store.value.b):
        if isinstance(e, BufferLoad) and e.buffer is store.buffer:
            return None
    return {Add: "+", Max: "max", Min: "min"}[type(store.value)]


def _summands(e: PrimExpr) -> list[PrimExpr]:
    if isinstance(e, Add):
        return _summands(e.a) + _summands(e.b)
    return [e]


def iter_sum_terms(index: PrimExpr, iters: dict[Var, object]
                   ) -> list[tuple[Var, int, PrimExpr | int]] | None:
    """Read a flattened index as ``sum(scale * (var // lower))`` over the block's iter
    vars, largest scale first (TVM's ``normalize_to_iter_sum`` for the shapes the rule
    needs): a list of ``(var, lower, scale)``, or None for anything else (a constant
    offset, a variable used twice, a non-affine term).

    >>> import workbench as wb
    >>> i, k = wb.Var("i"), wb.Var("k")
    >>> [(v.name, lo, s) for v, lo, s in iter_sum_terms(k + i * 768, {i: 4, k: 768})]
    [('i', 1, 768), ('k', 1, 1)]
    """
    terms: list[tuple[Var, int, PrimExpr | int]] = []
    for part in _summands(simplify(index)):
        scale: PrimExpr | int = 1
        if isinstance(part, Mul):
            if isinstance(part.b, IntImm):
                part, scale = part.a, part.b.value
            elif isinstance(part.a, IntImm):
                part, scale = part.b, part.a.value
            elif isinstance(part.a, (Var, FloorDiv)) and part.a in iters or (
                    isinstance(part.a, FloorDiv) and part.a.a in iters):
                part, scale = part.a, part.b
            else:
                part, scale = part.b, part.a
        lower = 1
        if isinstance(part, FloorDiv) and isinstance(part.b, IntImm) and part.b.value > 0:
            part, lower = part.a, part.b.value
        if not isinstance(part, Var) or part not in iters:
            return None
        if any(part is v for v, _, _ in terms):
            return None
        if isinstance(scale, int) and scale <= 0:
            return None
        terms.append((part, lower, scale))
    # symbolic scales (strides over a symbolic extent) count as the largest
    order = sorted(range(len(terms)),
                   key=lambda n: (isinstance(terms[n][2], int),
                                  -terms[n][2] if isinstance(terms[n][2], int) else n))
    return [terms[n] for n in order]


class Reduction(GPUScheduleRule):
    """One reduction block (``+``, ``max`` or ``min``), possibly followed by one
    elementwise epilogue: the reduction is split across the threads of a block and
    combined with a cross-thread reduction (TVM's ``dlight.gpu.Reduction``).

    >>> import workbench as wb
    >>> mod = wb.workloads.demo_mlp(1)
    >>> sch = Reduction().apply(mod["fused_matmul_add_relu"], wb.Target("cuda"), False)
    >>> [sch.get(lp).thread_tag for lp in sch.get_loops("matmul_rf_update")][:3]
    ['blockIdx.x', 'threadIdx.x', 'threadIdx.y']
    """

    def apply(self, func, target, tunable) -> Schedule:
        sch = Schedule(func)
        infos = normalize_or_decline(sch)
        infos = try_inline_contiguous_spatial(sch, infos)
        if not infos:
            raise Declined("no block to schedule")
        epilogue: BlockInfo | None = None
        if len(infos) == 2:
            epilogue = infos[1]
            if not epilogue.is_injective():
                raise Declined(f'block "{epilogue.name}" after the reduction is not '
                               "elementwise (it has a reduction axis)")
        elif len(infos) > 2:
            names = ", ".join(f'"{b.name}"' for b in infos)
            raise Declined(f"{len(infos)} blocks left after inlining ({names}); the rule "
                           "takes one reduction, optionally followed by one element-wise "
                           "block")
        info = infos[0]
        block = sch.get(info.block_rv)
        if "R" not in info.dom_kind():
            raise Declined(f'block "{info.name}" has no reduction axis (only spatial axes, '
                           f'"{info.dom_kind()}"): nothing is summed')
        if not info.is_reduction():
            raise Declined(f'block "{info.name}" is not a reduction block (it needs an init '
                           "and reduction axes that do not index its output)")
        if len(block.writes) != 1:
            raise Declined(f'block "{info.name}" writes {len(block.writes)} buffers; the '
                           "rule handles one output")
        if reduction_combiner(block) is None:
            raise Declined(f'block "{info.name}" does not update its output as '
                           "X = X + Y, max(X, Y) or min(X, Y)")
        inner_reduction, c_factor, loop_order, split_index = self._normalize(sch, info)
        if inner_reduction:
            self._inner_reduction(sch, target, info.block_rv, c_factor, epilogue,
                                  loop_order, split_index)
        else:
            self._inner_spatial(sch, info, c_factor, epilogue, loop_order, split_index)
        return sch

    # ------------------------------------------------------------ normalization

    def _normalize(self, sch: Schedule, info: BlockInfo):
        """Reorder the block's loops as (spatial, reduction, contiguous part) and fuse
        each group; return (inner reduction?, spatial unroll factor, loop order, index
        of the split spatial loop)."""
        block = sch.get(info.block_rv)
        index = detect_dominant_read(block)
        by_var = {it.var: it for it in info.iters}
        terms = iter_sum_terms(index, by_var)
        if terms is None:
            raise Declined(f'block "{info.name}": the index of its main read '
                           f"({index.script()}) is not a sum of scaled iter vars")
        s_loops: list[LoopRV] = []
        r_loops: list[LoopRV] = []
        c_loops: list[LoopRV] = []
        c_factor = None
        split_loop, split_index = None, None
        inner_reduction = False
        for var, lower, _ in terms:
            it = by_var.pop(var)
            loop = it.loop_rv
            inner_reduction = it.kind == "R"
            if lower > 1:
                if c_loops:
                    raise Declined(f'block "{info.name}": its main read splits two iter vars')
                split_loop, split_index = loop, len(s_loops)
                loop, c_loop = sch.split(loop, factors=[None, lower])
                c_loops.append(c_loop)
                if not inner_reduction:
                    c_factor = lower
            (r_loops if inner_reduction else s_loops).append(loop)
        for it in by_var.values():
            if it.kind == "S" and it.dom == 1:
                s_loops.append(it.loop_rv)
            else:
                raise Declined(f'block "{info.name}": its main read does not use iter var '
                               f'"{it.var.name}" (extent {it.dom}), so the reduction is not '
                               "over one input row/column (a matmul with M > 1?)")
        n_spatial = sum(1 for it in info.iters if it.kind == "S")
        if not s_loops or not r_loops or len(s_loops) != n_spatial:
            raise Declined(f'block "{info.name}": its main read does not cover its spatial '
                           "and reduction axes")
        s_var_loops = [it.loop_rv for it in info.iters
                       if it.loop_rv in s_loops or it.loop_rv == split_loop]
        loop_order = {}
        for i, lp in enumerate(s_var_loops):
            for j, sl in enumerate(s_loops):
                if lp == sl:
                    loop_order[i] = j
                    break
                if lp == split_loop:
                    loop_order[i] = split_index
                    break
        if not c_loops:
            c_loops = [sch.add_unit_loop(info.block_rv)]
        sch.reorder(*s_loops, *r_loops, *c_loops)
        _fuse(sch, s_loops)
        _fuse(sch, r_loops)
        return inner_reduction, c_factor, loop_order, split_index

    # ------------------------------------------------------------ schedules

    def _spatial_writeback(self, sch, s, loop_order, split_index, c_factor):
        """Fuse the write-back block's spatial loops (splitting off the contiguous
        factor when there is one); return (fused loop, inner factor loop or None)."""
        if not c_factor:
            return _fuse(sch, s), None
        order = [s[loop_order[i]] for i in range(len(s))]
        sch.reorder(*order)
        order[split_index], c = sch.split(order[split_index], factors=[None, c_factor])
        sch.reorder(*order, c)
        return _fuse(sch, order), c

    def _inner_reduction(self, sch: Schedule, target, block: BlockRV, c_factor,
                         epilogue: BlockInfo | None, loop_order, split_index) -> None:
        _, r, _ = sch.get_loops(block)
        (len_tx,) = suggest_threads_per_block(target, [sch.get(r)])
        len_tx = _divisor_threads(get_extent(sch, r), len_tx)
        r, tx = sch.split(r, factors=[None, len_tx])
        # TVM reorders the rfactor block's loops; reordering before rfactor gives the
        # same loops
        sch.reorder(tx, r)
        rf = sch.rfactor(tx, 0)
        bx, tx, r, _ = sch.get_loops(rf)
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        sch.annotate(tx, "pragma_auto_unroll_max_step", 256)
        sch.annotate(tx, "pragma_unroll_explicit", 1)
        sch.set_scope(rf, 0, "local")
        sch.decompose_reduction(rf, r)
        sch.reverse_compute_at(block, bx, preserve_unit_loops=True)
        _, tx, *s = sch.get_loops(block)
        fused, c = self._spatial_writeback(sch, s, loop_order, split_index, c_factor)
        sch.reorder(fused, tx, *([c] if c is not None else []))
        sch.bind(tx, "threadIdx.x")
        if epilogue is not None:
            epi = epilogue.block_rv
            sch.reverse_compute_at(epi, bx, preserve_unit_loops=True)
            if is_broadcast_epilogue(sch, block, epi):
                sch.set_scope(block, 0, "shared")
                _, *s = sch.get_loops(epi)
                _, tx = sch.split(_fuse(sch, s), factors=[None, len_tx])
                sch.bind(tx, "threadIdx.x")
            else:
                sch.set_scope(block, 0, "local")
                # TVM leaves the epilogue unbound, so every thread stores the same value;
                # one thread (threadIdx.x == 0) storing it is the same and race free
                sch.bind(sch.add_unit_loop(epi), "threadIdx.x")

    def _inner_spatial(self, sch: Schedule, info: BlockInfo, c_factor,
                       epilogue: BlockInfo | None, loop_order, split_index) -> None:
        block = info.block_rv
        s, r, _ = sch.get_loops(block)
        len_tx, len_ty = 16, 16
        last = [it.dom for it in info.iters if it.kind == "S"][-1]
        if isinstance(last, int):
            while len_tx > 1 and last % len_tx:
                len_tx -= 1
        else:
            len_tx = 1  # a symbolic innermost extent: only 1 surely divides it
        sch.split(s, factors=[None, len_tx])
        _, ty = sch.split(r, factors=[None, len_ty])
        rf = sch.rfactor(ty, 0)
        bx, tx, r, ty, _ = sch.get_loops(rf)
        sch.reorder(bx, tx, ty, r)
        sch.bind(tx, "threadIdx.x")
        sch.bind(ty, "threadIdx.y")
        sch.bind(bx, "blockIdx.x")
        sch.set_scope(rf, 0, "local")
        sch.decompose_reduction(rf, r)
        sch.reverse_compute_at(block, bx, preserve_unit_loops=True)
        _, r, *s = sch.get_loops(block)
        fused, c = self._spatial_writeback(sch, s, loop_order, split_index, c_factor)
        sch.reorder(fused, *([c] if c is not None else []), r)
        sch.bind(fused, "threadIdx.x")
        sch.bind(r, "threadIdx.y")
        if epilogue is not None:
            epi = epilogue.block_rv
            sch.reverse_compute_at(epi, bx, preserve_unit_loops=True)
            _, *s = sch.get_loops(epi)
            if is_broadcast_epilogue(sch, block, epi):
                sch.set_scope(block, 0, "shared")
                _, tx, ty = sch.split(_fuse(sch, s), factors=[None, len_tx, len_ty])
                sch.bind(tx, "threadIdx.x")
                sch.bind(ty, "threadIdx.y")
            else:
                # elementwise: the thread that holds an output finishes it
                sch.set_scope(block, 0, "local")
                tx, inner = sch.split(_fuse(sch, s), factors=[len_tx, None])
                sch.bind(tx, "threadIdx.x")
                # TVM leaves threadIdx.y unbound here, so its 16 threads store the same
                # value; binding the unit inner loop keeps one (threadIdx.y == 0)
                if isinstance(get_extent(sch, inner), int) and get_extent(sch, inner) == 1:
                    sch.bind(inner, "threadIdx.y")


def _fuse(sch: Schedule, loops: list[LoopRV]) -> LoopRV:
    return loops[0] if len(loops) == 1 else sch.fuse(*loops)


def _divisor_threads(extent, len_tx: int) -> int:
    """The thread count for an inner reduction of ``extent``: ``len_tx`` (TVM's choice)
    when it divides the extent; otherwise the largest divisor of the extent below it,
    if that keeps at least a warp (TVM splits unevenly, which needs a predicate that
    bind/reorder's affine-binding check refuses on the rfactor block here)."""
    if not isinstance(extent, int) or extent % len_tx == 0:
        return len_tx
    best = max(d for d in range(1, len_tx + 1) if extent % d == 0)
    return best if best >= 32 else len_tx
