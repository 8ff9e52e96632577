"""Compute location, inlining, caching and region inference behave as TVM's do.

Each test is one class of disagreement found on TVM's own schedule tests
(``test_tir_schedule_compute_at.py``, ``test_tir_schedule_compute_inline.py``,
``test_tir_schedule_cache_read_write.py``), rebuilt here with our own functions: the
loop extents after ``compute_at``, the predicates after inlining, the refusals, and
the buffer shapes after lowering (TVM's ``CompactBufferAllocation``) are TVM's, and
every accepted schedule computes what the unscheduled function computes (built and
run by the C backend). ``tests/test_tvm_differential.py`` replays some of these in
TVM itself where it is installed.
"""

from __future__ import annotations

import workbench as wb
from workbench.ir import (
    Block,
    Buffer,
    BufferStore,
    For,
    IterVar,
    PrimFunc,
    SeqStmt,
    Var,
    const,
    if_then_else,
    iter_blocks,
    iter_stmts,
)
from workbench.schedule.primitives.cache import InPlaceUpdateError
from workbench.schedule.primitives.compute_at import (
    ProducersOutsideLoopError,
    RegionNotInvertibleError,
)
from workbench.schedule.primitives.compute_inline import (
    NotInlinableError,
    ProducerNotCoveringError,
)
from workbench.testing import (
    assert_accesses_ok,
    assert_schedule_error,
    assert_verifies,
    gpu_tiled_matmul,
    roundtrip_trace,
)

# --------------------------------------------------------------------------- builders


def stage(name, out, out_idx, value, grid, iters, predicate=None):
    """A loop nest ``grid`` ([(loop, extent)]) around block ``name`` whose iter vars
    ``iters`` ([(name, extent, binding(loops))]) compute ``out[out_idx(v)] = value(v)``
    (``v``: iter var name -> Var)."""
    loops = {n: Var(n) for n, _ in grid}
    ivs = {n: Var(n) for n, _, _ in iters}
    pred = predicate(loops) if predicate else const(True)
    block = Block(
        name,
        tuple(IterVar(ivs[n], e) for n, e, _ in iters),
        tuple(b(loops) for _, _, b in iters),
        BufferStore(out, value(ivs), tuple(out_idx(ivs))),
        predicate=pred,
    )
    s = block
    for n, e in reversed(grid):
        s = For(loops[n], e, "serial", s)
    return s


def _loop(name: str):
    return lambda loops: loops[name]


def remap(*names_extents):
    """Iter vars ``v<loop>`` bound to the loops of the same extents, in order."""
    return [(f"v{n}", e, _loop(n)) for n, e in names_extents]


def function(name, params, allocs, stmts) -> PrimFunc:
    body = stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))
    return PrimFunc(name, tuple(params), Block("root", (), (), body, alloc_buffers=tuple(allocs)))


def lowered_shapes(sch: wb.Schedule) -> dict[str, tuple[int, ...]]:
    """Allocated (non-parameter) buffers after lowering, by name."""
    out = {}
    for name in sch.mod.names:
        func = wb.lower(sch.mod)[name]
        for s in iter_stmts(func.body):
            if isinstance(s, Block):
                for b in s.alloc_buffers:
                    out[b.name] = b.shape
    return out


def loop_extents(sch: wb.Schedule, block: str) -> list[int]:
    return [sch.get(lp).extent for lp in sch.get_loops(sch.get_block(block))]


def block_of(sch: wb.Schedule, name: str) -> Block:
    return sch.get(sch.get_block(name))


def check(sch: wb.Schedule, func: PrimFunc) -> None:
    """The schedule computes what ``func`` computes, touches memory in bounds, and its
    trace replays."""
    assert_accesses_ok(sch)
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


# ============================================================================ bugs
# reverse_compute_inline of a producer that computes more than the consumer's domain:
# TVM gives the producer the predicate that keeps the consumer's store in bounds.


def overcomputed() -> PrimFunc:
    """TVM's elementwise_overcomputed_producer: B (128, 128) read by C (127, 127)."""
    A = wb.placeholder((128, 128), name="A")
    B = wb.compute((128, 128), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((127, 127), lambda i, j: B[i, j] + 1.0, name="C")
    return wb.create_prim_func([A, C], name="overcomputed")


def test_rci_overcomputed_producer_gets_the_consumer_bounds_as_predicate():
    func = overcomputed()
    sch = wb.Schedule(func)
    sch.reverse_compute_inline(sch.get_block("C"))
    b = block_of(sch, "B")
    assert str(b.predicate) == "i < 127 and j < 127"
    check(sch, func)


def test_rci_overcomputed_fused_producer():
    """TVM's ..._simplify_predicate: one fused loop over 128 x 128 elements."""
    func = overcomputed()
    sch = wb.Schedule(func)
    sch.fuse(*sch.get_loops(sch.get_block("B")))
    sch.reverse_compute_inline(sch.get_block("C"))
    assert "i_j_fused" in str(block_of(sch, "B").predicate)
    check(sch, func)


def test_rci_overcomputed_producer_with_injective_load():
    """TVM's ..._injective_load: C reads a tiled B[i // 16, j // 16, i % 16, j % 16]."""
    A, C = Buffer("A", (128, 128)), Buffer("C", (127, 127))
    B = Buffer("B", (8, 8, 16, 16))
    grid = [("i0", 8), ("j0", 8), ("i1", 16), ("j1", 16)]
    produce = stage(
        "B", B, lambda v: (v["vi0"], v["vj0"], v["vi1"], v["vj1"]),
        lambda v: A[v["vi0"] * 16 + v["vi1"], v["vj0"] * 16 + v["vj1"]] * 2.0,
        grid, remap(*grid),
    )
    consume = stage(
        "C", C, lambda v: (v["vi"], v["vj"]),
        lambda v: B[v["vi"] // 16, v["vj"] // 16, v["vi"] % 16, v["vj"] % 16] + 1.0,
        [("i", 127), ("j", 127)], remap(("i", 127), ("j", 127)),
    )
    func = function("injective", [A, C], [B], [produce, consume])
    sch = wb.Schedule(func)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert str(block_of(sch, "B").predicate) == "i0 * 16 + i1 < 127 and j0 * 16 + j1 < 127"
    check(sch, func)


def test_rci_fail_producer_not_covering_consumer():
    """TVM's elementwise_producer_not_cover_consumer: C's rows 0..127 do not come from B."""
    A = wb.placeholder((128, 128), name="A")
    B = wb.compute((128, 128), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute(
        (256, 128), lambda i, j: if_then_else(i >= 128, B[i - 128, j], const(0.0)), name="C"
    )
    sch = wb.Schedule(wb.create_prim_func([A, C], name="not_cover"))
    c = sch.get_block("C")
    assert_schedule_error(
        sch, lambda: sch.reverse_compute_inline(c), ProducerNotCoveringError, "C", "B"
    )


# ============================================================================ missing check


def two_producers() -> PrimFunc:
    """TVM's fail_all_producers_under_loop: B and C from A, D = B + C."""
    A = wb.placeholder((32, 32), name="A")
    B = wb.compute((32, 32), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((32, 32), lambda i, j: A[i, j] + 1.0, name="C")
    D = wb.compute((32, 32), lambda i, j: B[i, j] + C[i, j], name="D")
    return wb.create_prim_func([A, D], name="two_producers")


def test_rca_fail_some_producer_outside_the_loop():
    """D reads B and C; only C runs under the loop: TVM requires all producers there."""
    sch = wb.Schedule(two_producers())
    i, _ = sch.get_loops(sch.get_block("C"))
    d = sch.get_block("D")
    assert_schedule_error(
        sch, lambda: sch.reverse_compute_at(d, i), ProducersOutsideLoopError, "D", "B", "i"
    )


# ============================================================================ too strict
# reverse_compute_at with indices that are not "iter var + constant"


def test_rca_floordiv_floormod_indices():
    """TVM's floordiv_and_floormod_indices: B reads temp[i // 16, i % 16]."""
    X = wb.placeholder((16, 16), name="X")
    temp = wb.compute((16, 16), lambda i, j: X[j, i] + 1.0, name="A")
    Y = wb.compute((256,), lambda i: temp[i // 16, i % 16], name="B")
    func = wb.create_prim_func([X, Y], name="fdm")
    sch = wb.Schedule(func)
    sch.reverse_compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("A"))[0])
    assert loop_extents(sch, "B") == [16, 16]
    assert str(block_of(sch, "B").iter_values[0]) == "i * 16 + ax0"
    assert lowered_shapes(sch)["A"] == (1, 16)
    check(sch, func)


def test_rca_layout_transform_indices():
    """TVM's test_reverse_compute_at_layout_trans."""
    A = wb.placeholder((1, 3, 5, 5, 16), name="A")
    B = wb.compute((1, 3, 5, 5, 16), lambda a, b, c, d, e: A[a, b, c, d, e] + 1.0,
                   name="compute")
    C = wb.compute(
        (1, 6, 5, 5, 8),
        lambda a, b, c, d, e: B[a, (b * 8 + e) // 16, c, d, (b * 8 + e) % 16],
        name="T_layout_trans",
    )
    func = wb.create_prim_func([A, C], name="layout_trans")
    sch = wb.Schedule(func)
    sch.reverse_compute_at(sch.get_block("T_layout_trans"),
                           sch.get_loops(sch.get_block("compute"))[1])
    assert loop_extents(sch, "T_layout_trans") == [1, 3, 2, 5, 5, 8]
    check(sch, func)


def test_rca_tiled_consumer_indices():
    """The consumer reads B[vi * 16 + vj, vk] (three iter vars, two buffer dims)."""
    A = wb.placeholder((128, 64), name="A")
    B = wb.compute((128, 64), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((8, 16, 64), lambda i, j, k: B[i * 16 + j, k] + 1.0, name="C")
    func = wb.create_prim_func([A, C], name="tiled_consumer")
    sch = wb.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 16])
    sch.reverse_compute_at(sch.get_block("C"), i0)
    assert loop_extents(sch, "C") == [8, 16, 64]
    assert [str(v) for v in block_of(sch, "C").iter_values] == ["i_0", "ax0", "ax1"]
    check(sch, func)


def test_rca_constant_index():
    """TVM's tiled_trivial_binding: B[0, vi, vj] has a constant first index."""
    A, C, B = Buffer("A", (1, 64, 64)), Buffer("C", (1, 64, 64)), Buffer("B", (1, 64, 64))
    produce = stage(
        "B", B, lambda v: (const(0), v["vi"], v["vj"]),
        lambda v: A[0, v["vi"], v["vj"]] * 2.0,
        [("i0", 4), ("j0", 4), ("i1", 16), ("j1", 16)],
        [("vi", 64, lambda L: L["i0"] * 16 + L["i1"]),
         ("vj", 64, lambda L: L["j0"] * 16 + L["j1"])],
    )
    consume = stage(
        "C", C, lambda v: (const(0), v["vi"], v["vj"]),
        lambda v: B[0, v["vi"], v["vj"]] + 1.0,
        [("i", 64), ("j", 64)], [("vi", 64, lambda L: L["i"]), ("vj", 64, lambda L: L["j"])],
    )
    func = function("trivial_binding", [A, C], [B], [produce, consume])
    sch = wb.Schedule(func)
    sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("B"))[2])
    assert loop_extents(sch, "C") == [4, 4, 16, 16]
    check(sch, func)


def test_rca_fail_window_read_stays_refused():
    """C reads B[i] and B[i + 1] (a window, not a point): TVM's pattern match fails, and
    so does ours."""
    A = wb.placeholder((16,), name="A")
    B = wb.compute((16,), lambda i: A[i] * 2.0, name="B")
    C = wb.compute((15,), lambda i: B[i] + B[i + 1], name="C")
    sch = wb.Schedule(wb.create_prim_func([A, C], name="window"))
    i0, _ = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 4])
    c = sch.get_block("C")
    assert_schedule_error(
        sch, lambda: sch.reverse_compute_at(c, i0), RegionNotInvertibleError, "C", "B", "i_0"
    )


# reverse_compute_at of a reduction consumer


def test_rca_reduction_consumer_row_sum():
    """S[i] = sum_k B[i, k] moves under B's row loop: one row reduced per iteration."""
    A = wb.placeholder((8, 8), name="A")
    B = wb.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    k = wb.reduce_axis(8, name="k")
    S = wb.compute((8,), lambda i: wb.sum(B[i, k], axis=k), name="S")
    func = wb.create_prim_func([A, S], name="row_sum")
    sch = wb.Schedule(func)
    sch.reverse_compute_at(sch.get_block("S"), sch.get_loops(sch.get_block("B"))[0])
    assert loop_extents(sch, "S") == [8, 8]
    assert lowered_shapes(sch)["B"] == (1, 8)
    check(sch, func)


def test_rca_reduction_consumer_after_rfactor():
    """TVM's test_reverse_compute_at_factorized: the final reduction over the rfactor
    buffer moves under the rfactor block's outer loop and reduces its 4 partial sums."""
    A = wb.placeholder((16, 16), name="A")
    k = wb.reduce_axis(16, name="k")
    B = wb.compute((16,), lambda i: wb.sum(A[i, k], axis=k), name="B")
    func = wb.create_prim_func([A, B], name="factorized")
    sch = wb.Schedule(func)
    i, kk = sch.get_loops(sch.get_block("B"))
    ko, ki = sch.split(kk, [4, 4])
    rf = sch.rfactor(ko, 0)
    sch.reverse_compute_at(sch.get_block("B"), sch.get_loops(rf)[0])
    assert loop_extents(sch, "B") == [16, 4]
    check(sch, func)


# inlining


def test_rci_affine_load():
    """TVM's elementwise_reverse_affine_load: C reads B at a fused-then-split index."""
    A = wb.placeholder((128, 128), name="A")
    B = wb.compute((128, 128), lambda i, j: A[i, j] * 2.0, name="B")

    def read(i, j, k, l):
        f = ((i * 32 + j) * 8 + k) * 8 + l
        return B[f // 128, f % 128]

    C = wb.compute((8, 32, 8, 8), read, name="C")
    func = wb.create_prim_func([A, C], name="affine_load")
    sch = wb.Schedule(func)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert [b.name for b in iter_blocks(sch.func.body)][1:] == ["B"]
    check(sch, func)


def split_chain(split_block: str):
    from workbench.testing import chain_func

    func = chain_func(16)
    sch = wb.Schedule(func)
    sch.split(sch.get_loops(sch.get_block(split_block))[1], factors=[None, 5])
    return func, sch


def test_compute_inline_producer_with_predicate():
    """C split by a non-dividing factor carries T.where; TVM inlines it anyway (its
    values are a function of the indices)."""
    func, sch = split_chain("C")
    sch.compute_inline(sch.get_block("C"))
    assert [b.name for b in iter_blocks(sch.func.body)][1:] == ["B", "D"]
    check(sch, func)


def test_reverse_compute_inline_into_producer_with_predicate():
    """D folds into the split producer C, which keeps its T.where."""
    func, sch = split_chain("C")
    sch.reverse_compute_inline(sch.get_block("D"))
    assert "j_0 * 5 + j_1 < 16" in str(block_of(sch, "C").predicate)
    check(sch, func)


def test_reverse_compute_inline_fail_consumer_predicate_stays_refused():
    func, sch = split_chain("D")
    d = sch.get_block("D")
    assert_schedule_error(sch, lambda: sch.reverse_compute_inline(d), NotInlinableError, "D")


def test_compute_inline_affine_store():
    """B[v // 16, v % 16] = A[v]: the store is a bijective map of v, inverted."""
    A, B, C = Buffer("A", (256,)), Buffer("B", (16, 16)), Buffer("C", (16, 16))
    produce = stage("B", B, lambda v: (v["vi"] // 16, v["vi"] % 16),
                    lambda v: A[v["vi"]] * 2.0, [("i", 256)], remap(("i", 256)))
    consume = stage("C", C, lambda v: (v["vi"], v["vj"]),
                    lambda v: B[v["vi"], v["vj"]] + 1.0,
                    [("i", 16), ("j", 16)], remap(("i", 16), ("j", 16)))
    func = function("affine_store", [A, C], [B], [produce, consume])
    sch = wb.Schedule(func)
    sch.compute_inline(sch.get_block("B"))
    assert "A[vi * 16 + vj]" in sch.mod.script()
    check(sch, func)


# cache_write of an in-place update under a scope


def scoped_matmul(n: int = 32, t: int = 16) -> PrimFunc:
    """C = A @ B where each t x t tile is one block "C_o" holding the tile's init block
    and update block (written by hand: an in-place update under a scope)."""
    A, B, C = Buffer("A", (n, n)), Buffer("B", (n, n)), Buffer("C", (n, n))
    i0, j0, i1, j1, k = (Var(x) for x in ("i_0", "j_0", "i_1", "j_1", "k"))
    vo, wo, vi, vj, wi, wj, wk = (Var(x) for x in ("vi_o", "vj_o", "vi", "vj", "wi", "wj", "wk"))
    ii, jj = vo * t + vi, wo * t + vj
    init = Block("C_init", (IterVar(vi, t), IterVar(vj, t)), (i1, j1),
                 BufferStore(C, const(0.0), (ii, jj)))
    ui, uj = vo * t + wi, wo * t + wj
    update = Block("C_update", (IterVar(wi, t), IterVar(wj, t), IterVar(wk, n, "R")),
                   (i1, j1, k), BufferStore(C, C[ui, uj] + A[ui, wk] * B[wk, uj], (ui, uj)))
    tile = For(i1, t, "serial", For(j1, t, "serial", SeqStmt((
        init, For(k, n, "serial", update)))))
    outer = Block("C_o", (IterVar(vo, n // t), IterVar(wo, n // t)), (i0, j0), tile)
    body = For(i0, n // t, "serial", For(j0, n // t, "serial", outer))
    return PrimFunc("scoped_matmul", (A, B, C), Block("root", (), (), body))


def test_cache_write_in_place_update_under_a_scope():
    """C_o reads C (its update does) but writes it first (its init does): TVM caches it,
    and so do we."""
    func = scoped_matmul()
    sch = wb.Schedule(func)
    sch.cache_write(sch.get_block("C_o"), 0, "local")
    assert [b.name for b in iter_blocks(sch.func.body)][1:] == [
        "C_o", "C_init", "C_update", "C_local"]
    check(sch, func)


def test_cache_write_fail_in_place_update_of_an_outside_value():
    """A leaf update C[i] += A[i] starts from C's value outside the block: a fresh cache
    would start uninitialised. TVM accepts it and computes garbage; we refuse."""
    A, C = Buffer("A", (8,)), Buffer("C", (8,))
    acc = stage("acc", C, lambda v: (v["vi"],), lambda v: C[v["vi"]] + A[v["vi"]],
                [("i", 8)], remap(("i", 8)))
    sch = wb.Schedule(function("accumulate", [A, C], [], [acc]))
    blk = sch.get_block("acc")
    assert_schedule_error(
        sch, lambda: sch.cache_write(blk, 0, "local"), InPlaceUpdateError, "acc"
    )


# ============================================================================ regions


def test_compute_at_floordiv_region_is_one_element():
    """TVM's tiled_repeat_op: T_repeat reads T_add[ax0 // 16]; under the outer loop of
    8, one element of T_add is needed (``i0_0 // 2``), not all 4."""
    x = wb.placeholder((4,), name="x")
    t_add = wb.compute((4,), lambda i: x[i] + 1.0, name="T_add")
    t_rep = wb.compute((64,), lambda i: t_add[i // 16], name="T_repeat")
    func = wb.create_prim_func([x, t_rep], name="repeat")
    sch = wb.Schedule(func)
    i0, _ = sch.split(sch.get_loops(sch.get_block("T_repeat"))[0], [8, 8])
    sch.compute_at(sch.get_block("T_add"), i0)
    assert loop_extents(sch, "T_add") == [8]
    assert str(block_of(sch, "T_add").iter_values[0]) == "i_0 // 2"
    assert lowered_shapes(sch)["T_add"] == (1,)
    check(sch, func)


def test_compute_at_reversed_indices():
    """TVM's test_compute_at_rev_iter: Y[9 - vi, 9 - vj] read transposed."""
    X, Z, Y = Buffer("X", (10, 10)), Buffer("Z", (10, 10)), Buffer("Y", (10, 10))
    b0 = stage("b0", Y, lambda v: (9 - v["vi"], 9 - v["vj"]), lambda v: X[v["vi"], v["vj"]] + 1.0,
               [("i", 10), ("j", 10)], remap(("i", 10), ("j", 10)))
    b1 = stage("b1", Z, lambda v: (v["vi"], v["vj"]), lambda v: Y[v["vj"], v["vi"]] + 2.0,
               [("i", 10), ("j", 10)], remap(("i", 10), ("j", 10)))
    func = function("rev_iter", [X, Z], [Y], [b0, b1])
    sch = wb.Schedule(func)
    sch.compute_at(sch.get_block("b0"), sch.get_loops(sch.get_block("b1"))[0])
    assert loop_extents(sch, "b0") == [10, 10]
    assert str(block_of(sch, "b0").iter_values[1]) == "9 - i"
    assert lowered_shapes(sch)["Y"] == (10, 1)
    check(sch, func)


def test_compute_at_blockized_producer():
    """TVM's blockized_2: the blockized producer B_o (16 x 16 tiles) under the consumer's
    32 x 32 tile loop covers 2 x 2 tiles."""
    A = wb.placeholder((128, 128), name="A")
    B = wb.compute((128, 128), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((128, 128), lambda i, j: B[i, j] + 1.0, name="C")
    func = wb.create_prim_func([A, C], name="blockized")
    sch = wb.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    io, ii = sch.split(i, [8, 16])
    jo, ji = sch.split(j, [8, 16])
    sch.reorder(io, jo, ii, ji)
    sch.blockize(ii)
    ci, cj = sch.get_loops(sch.get_block("C"))
    cio, cii = sch.split(ci, [4, 32])
    cjo, cji = sch.split(cj, [4, 32])
    sch.reorder(cio, cjo, cii, cji)
    sch.compute_at(sch.get_block("B_o"), cjo, preserve_unit_loops=True)
    assert loop_extents(sch, "B_o") == [4, 4, 2, 2]
    assert lowered_shapes(sch)["B"] == (32, 32)
    check(sch, func)


def test_compute_at_static_bound():
    """TVM's static_bound: C's iter var vj has extent 1 under a loop of 32 with T.where;
    the producer gets one element per row, not 32 guarded ones."""
    A, C, B = Buffer("A", (32, 1)), Buffer("C", (32, 1)), Buffer("B", (32, 1))
    produce = stage("B", B, lambda v: (v["vi"], v["vj"]), lambda v: A[v["vi"], v["vj"]] * 2.0,
                    [("i", 32), ("j", 1)], remap(("i", 32), ("j", 1)))
    consume = stage("C", C, lambda v: (v["vi"], v["vj"]), lambda v: B[v["vi"], v["vj"]] + 1.0,
                    [("i", 32), ("j", 32)], [("vi", 32, lambda L: L["i"]),
                                             ("vj", 1, lambda L: L["j"])],
                    predicate=lambda L: L["j"] < 1)
    func = function("static_bound", [A, C], [B], [produce, consume])
    sch = wb.Schedule(func)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0],
                   preserve_unit_loops=True)
    assert loop_extents(sch, "B") == [32, 1, 1]
    check(sch, func)


def test_compute_at_non_perfect_channel_group():
    """TVM's test_compute_at_non_perfect_channel_group: 360 channels per outer iteration
    read 23 of the 45 group biases (c // 16)."""
    X = wb.placeholder((720, 8, 8), name="X")
    bias = wb.compute((45,), lambda i: wb.cast(i, "float32"), name="init")
    Y = wb.compute((720, 8, 8), lambda c, h, w: X[c, h, w] + bias[c // 16], name="compute")
    func = wb.create_prim_func([X, Y], name="channel_group")
    sch = wb.Schedule(func)
    c, h, w = sch.get_loops(sch.get_block("compute"))
    co, ci = sch.split(c, [2, 360])
    sch.reorder(co, h, w, ci)
    sch.compute_at(sch.get_block("init"), co)
    assert loop_extents(sch, "init") == [2, 23]
    assert str(block_of(sch, "init").iter_values[0]) == "c_0 * 22 + ax0"
    check(sch, func)


def sliced_concat() -> PrimFunc:
    """TVM's test_compute_at_sliced_concatenate (smaller), with T.if_then_else."""
    X = wb.compute((1, 16, 4, 8), lambda a, b, c, d: const(1.0), name="compute")
    Y = wb.placeholder((1, 32, 4, 8), name="Y")
    Z = wb.placeholder((1, 53, 4, 8), name="Z")
    concat = wb.compute(
        (1, 101, 4, 8),
        lambda a, b, c, d: if_then_else(
            b >= 85, X[a, b - 85, c, d],
            if_then_else(b >= 53, Y[a, b - 53, c, d], Z[a, b, c, d])),
        name="T_concat",
    )
    S = wb.compute((1, 87, 4, 8), lambda a, b, c, d: concat[a, b, c, d], name="T_strided_slice")
    return wb.create_prim_func([Y, Z, S], name="sliced_concat")


def test_concatenation_regions_follow_if_then_else_conditions():
    """Only channels 0..86 of the concatenation are kept: they read X only at 85, 86,
    so compute_at makes 2 channels of X and lowering allocates 2, not 16."""
    func = sliced_concat()
    sch = wb.Schedule(func)
    loop = sch.get_loops(sch.get_block("T_strided_slice"))[0]
    sch.compute_at(sch.get_block("T_concat"), loop)
    sch.compute_at(sch.get_block("compute"), loop)
    assert loop_extents(sch, "compute") == [1, 2, 4, 8]
    assert lowered_shapes(sch)["compute"] == (1, 2, 4, 8)
    check(sch, func)


def concat_two() -> PrimFunc:
    """TVM's concat_two_elemwise with T.if_then_else."""
    x, y = wb.placeholder((16,), name="x"), wb.placeholder((8,), name="y")
    a1 = wb.compute((16,), lambda i: x[i] + 1.0, name="T_add_1")
    a2 = wb.compute((8,), lambda i: y[i] + 2.0, name="T_add_2")
    c = wb.compute((24,), lambda i: if_then_else(i >= 16, a2[i - 16], a1[i]), name="T_concat")
    return wb.create_prim_func([x, y, c], name="concat")


def test_concat_compute_at_predicates_and_one_element_buffers():
    func = concat_two()
    sch = wb.Schedule(func)
    ax = sch.get_loops(sch.get_block("T_concat"))[0]
    sch.compute_at(sch.get_block("T_add_1"), ax)
    sch.compute_at(sch.get_block("T_add_2"), ax)
    assert str(block_of(sch, "T_add_1").predicate) == "i < 16"
    assert str(block_of(sch, "T_add_2").predicate) == "16 <= i"
    assert lowered_shapes(sch) == {"T_add_1": (1,), "T_add_2": (1,)}
    check(sch, func)


def test_compaction_narrows_under_a_block_predicate():
    """P writes T[i] for i < 4 only (T.where); C reads T[0:4]: T needs 4 elements."""
    A, C, T = Buffer("A", (16,)), Buffer("C", (4,)), Buffer("T", (16,))
    produce = stage("P", T, lambda v: (v["vi"],), lambda v: A[v["vi"]] * 2.0,
                    [("i", 16)], remap(("i", 16)), predicate=lambda L: L["i"] < 4)
    consume = stage("C", C, lambda v: (v["vj"],), lambda v: T[v["vj"]] + 1.0,
                    [("j", 4)], remap(("j", 4)))
    func = function("predicated", [A, C], [T], [SeqStmt((produce, consume))])
    sch = wb.Schedule(func)
    assert lowered_shapes(sch)["T"] == (4,)
    assert_verifies(sch, func)


def test_cache_read_under_a_scope_caches_the_tile():
    """cache_read of A for the tile blocks inside the blockized C_o: TVM allocates the
    16 x 64 rows the tile reads, in the scope block, not a 64 x 64 copy."""
    func = wb.workloads.matmul(64, 64, 64)
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, i1, j1, k)
    sch.blockize(i1)
    sch.cache_read(sch.get_block("C"), 1, "local")
    scope = block_of(sch, "C_o")
    assert [(b.name, b.shape) for b in scope.alloc_buffers] == [("A_local", (16, 64))]
    assert "A_local[vi_i, vk_i]" in sch.mod.script()
    check(sch, func)


def test_block_regions_follow_conditions_inside_the_block():
    """A block whose own loop reads ``T.if_then_else(k >= 8, X[k - 8], A[k])``: TVM's
    T.reads are X[0:8] and A[0:8] (each side only where its condition holds); the same
    with an ``if`` statement."""
    from workbench.ir import IfThenElse

    A, X, B = Buffer("A", (16,)), Buffer("X", (8,)), Buffer("B", (16,))
    k = Var("k")
    lazy = For(k, 16, "serial", BufferStore(B, if_then_else(k >= 8, X[k - 8], A[k]), (k,)))
    branch = For(k, 16, "serial", IfThenElse(
        k < 8, BufferStore(B, A[k] * 2.0, (k,)), BufferStore(B, X[k - 8], (k,))))
    for body in (lazy, branch):
        block = Block("blk", (), (), body)
        reads = {r.buffer.name: [(str(m), str(e)) for m, e in r.region] for r in block.reads}
        assert reads == {"A": [("0", "8")], "X": [("0", "8")]}
        assert [(str(m), str(e)) for m, e in block.writes[0].region] == [("0", "16")]


def test_shared_cache_under_thread_loops_is_one_tile():
    """GPU-style matmul: A_shared is copied under k_0, inside the threadIdx loops. It is
    allocated above the thread loops (all threads share it) but holds one k_0 step, the
    16 x 16 tile, as TVM's CompactBufferAllocation makes it, not 16 x 64."""
    func = wb.workloads.matmul(64, 64, 64)
    sch = gpu_tiled_matmul(wb.Schedule(func))
    assert lowered_shapes(sch) == {"A_shared": (16, 16), "B_shared": (16, 16), "C_local": (1, 1)}
    check(sch, func)


def access_under_scope() -> PrimFunc:
    """TVM's access_under_scope: a block "scope" per 16 x 16 tile writes A (block "A")
    and reads it (block "B"); block "C" reads all of A afterwards."""
    A, B, C = Buffer("A", (128, 128)), Buffer("B", (128, 128)), Buffer("C", (128, 128))
    i0, j0, si, sj = Var("i0"), Var("j0"), Var("i"), Var("j")

    def tile(name, out, value):
        return stage(name, out, lambda v: (v["vi"], v["vj"]), value,
                     [("x", 16), ("y", 16)],
                     [("vi", 128, lambda L: si * 16 + L["x"]),
                      ("vj", 128, lambda L: sj * 16 + L["y"])])

    body = SeqStmt((tile("A", A, lambda v: const(1.0)),
                    tile("B", B, lambda v: A[v["vi"], v["vj"]] + 1.0)))
    scope = Block("scope", (IterVar(si, 8), IterVar(sj, 8)), (i0, j0), body)
    outer = For(i0, 8, "serial", For(j0, 8, "serial", scope))
    last = stage("C", C, lambda v: (v["vi"], v["vj"]), lambda v: A[v["vi"], v["vj"]] * 2.0,
                 [("i", 128), ("j", 128)], remap(("i", 128), ("j", 128)))
    return function("under_scope", [B, C], [A], [outer, last])


def test_cache_read_under_scope_is_the_tile():
    """TVM's test_cache_read_under_scope: A_local is (16, 16), its copy iterates over the
    tile and B reads ``A_local[vi - i * 16, vj - j * 16]``."""
    func = access_under_scope()
    sch = wb.Schedule(func)
    sch.cache_read(sch.get_block("B"), 0, "local")
    sch.cache_read(sch.get_block("C"), 0, "global")
    assert [(b.name, b.shape) for b in block_of(sch, "scope").alloc_buffers] == [
        ("A_local", (16, 16))]
    copy = block_of(sch, "A_local")
    assert [iv.extent for iv in copy.iter_vars] == [16, 16]
    assert str(copy.predicate) == "True"
    assert "A_local[vi - i * 16, vj - j * 16]" in sch.mod.script()
    check(sch, func)


def test_cache_write_under_scope_is_the_tile():
    """TVM's test_cache_write_under_scope (three cache_writes: inside the scope, of its
    second block, of the scope itself)."""
    func = access_under_scope()
    sch = wb.Schedule(func)
    sch.cache_write(sch.get_block("A"), 0, "local")
    sch.cache_write(sch.get_block("B"), 0, "global")
    sch.cache_write(sch.get_block("scope"), 0, "global")
    scope = block_of(sch, "scope")
    assert [(b.name, b.shape) for b in scope.alloc_buffers] == [
        ("A_local", (16, 16)), ("B_global", (16, 16))]
    check(sch, func)


def nested_predicate() -> PrimFunc:
    """TVM's nested block predicate case: block "compute" over 12 x 24 holds a block
    "inner" with ``T.where(vi < 10 and vj < 20)`` doing C[vi, vj] = A[vi, vj] * 2."""
    A, C = Buffer("A", (12, 24)), Buffer("C", (10, 20))
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    inner = Block("inner", (), (), BufferStore(C, A[vi, vj] * 2.0, (vi, vj)),
                  predicate=wb.ir.expr.logical_and(vi < 10, vj < 20))
    outer = Block("compute", (IterVar(vi, 12), IterVar(vj, 24)), (i, j), inner)
    return function("nested_predicate", [A, C], [],
                    [For(i, 12, "serial", For(j, 24, "serial", outer))])


def test_cache_read_under_a_nested_predicate_copies_what_is_read():
    """TVM's test_cache_read_with_nested_block_predicate: only A[0:10, 0:20] is read,
    so the cache is (10, 20), not (12, 24)."""
    func = nested_predicate()
    sch = wb.Schedule(func)
    sch.cache_read(sch.get_block("compute"), 0, "local")
    assert [(b.name, b.shape) for b in sch.func.body.alloc_buffers] == [("A_local", (10, 20))]
    assert loop_extents(sch, "A_local") == [10, 20]
    check(sch, func)
