"""Reduction primitives: decompose_reduction and rfactor.

For every case the IR after the primitive equals a reviewed golden file
(``tests/golden/reduction_<case>.txt``), the trace replays (JSON and Python text) to
the same IR, and the scheduled function computes what the unscheduled one does. Then
one ``test_<prim>_fail_<reason>`` per refusal. The expected structure follows TVM's
``test_tir_schedule_reduction.py`` / ``test_tir_schedule_rfactor.py`` (block names
``Y_init``/``Y_update``, ``C_rf``, buffer ``C_rf``, iter vars ``vk_0``, loops
``j_1_init``). Regenerate the goldens with
``python tests/test_schedule_reduction.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

import workbench as wb
from workbench.ir import Block, Buffer, BufferStore, For, IterVar, PrimFunc, SeqStmt, Var, const
from workbench.schedule import StaleHandleError
from workbench.schedule.primitives.reduction import (
    BlockNotFirstError,
    FactorAxisOutOfRangeError,
    LoopHeightError,
    LoopMixesIterKindsError,
    LoopNotAncestorError,
    NotReductionBlockError,
    NotSingleBlockError,
    ReductionPredicateError,
    RFactorLoopNotReductionError,
    RFactorLoopNotSerialError,
    UnboundLoopUnderReductionError,
    UnrecognizedReducerError,
)
from workbench.testing import (
    access_problems,
    assert_schedule_error,
    assert_verifies,
    check_golden,
    matmul_func,
    mm_relu_func,
    roundtrip_trace,
    shared_outer_loop_func,
    write_golden,
)

# --------------------------------------------------------------------------- workloads


def square_sum_func() -> PrimFunc:
    """TVM's ``square_sum``: ``C[b] = sum_{i, j} A[b, i, j]^2`` (block ``C``)."""
    A = wb.placeholder((4, 16, 16), "float32", name="A")
    i = wb.reduce_axis(16, name="i")
    j = wb.reduce_axis(16, name="j")
    C = wb.compute((4,), lambda b: wb.sum(A[b, i, j] * A[b, i, j], axis=[i, j]), name="C")
    return wb.create_prim_func([A, C], name="square_sum")


def rowsum_ir(
    init: float = 0.0,
    update: Callable | None = None,
    out: Callable | None = None,
    extra: tuple[str, int] | None = None,
    binding: Callable | None = None,
) -> PrimFunc:
    """``B[i] = sum_k A[i, k]`` (16 x 16) built from IR nodes, with knobs to break it:
    another ``init`` value, another ``update(B_load, A_load)``, other output indices
    ``out(vi, vk)``, an extra loop ``(name, extent)`` feeding no iter var (innermost)
    and another binding ``binding(k)`` of ``vk``."""
    A, B = Buffer("A", (16, 16)), Buffer("B", (16,))
    i, k, vi, vk = Var("i"), Var("k"), Var("vi"), Var("vk")
    idx = out(vi, vk) if out else (vi,)
    upd = update or (lambda b, a: b + a)
    block = Block(
        "B",
        (IterVar(vi, 16, "S"), IterVar(vk, 16, "R")),
        (i, binding(k) if binding else k),
        BufferStore(B, upd(B[idx], A[vi, vk]), idx),
        BufferStore(B, const(init, "float32"), idx),
    )
    body = block
    if extra is not None:
        body = For(Var(extra[0]), extra[1], "serial", body)
    nest = For(i, 16, "serial", For(k, 16, "serial", body))
    return PrimFunc("rowsum", (A, B), Block("root", (), (), nest))


def producer_first_func() -> PrimFunc:
    """Under loop ``i``: block ``P`` (``P[i, k] = A[i, k] * 2``) then the reduction ``R``
    (``R[i] = sum_k P[i, k]``): ``R`` is not the first block under ``i``."""
    A, P, R = Buffer("A", (8, 8)), Buffer("P", (8, 8)), Buffer("R", (8,))
    i, k, kk = Var("i"), Var("k"), Var("kk")
    pi, pk, vi, vk = Var("vi"), Var("vk"), Var("vi"), Var("vk")
    prod = Block(
        "P", (IterVar(pi, 8), IterVar(pk, 8)), (i, k), BufferStore(P, A[pi, pk] * 2.0, (pi, pk))
    )
    red = Block(
        "R",
        (IterVar(vi, 8), IterVar(vk, 8, "R")),
        (i, kk),
        BufferStore(R, R[vi] + P[vi, vk], (vi,)),
        BufferStore(R, const(0.0), (vi,)),
    )
    nest = For(i, 8, "serial", SeqStmt((For(k, 8, "serial", prod), For(kk, 8, "serial", red))))
    root = Block("root", (), (), nest, alloc_buffers=(P,))
    return PrimFunc("producer_first", (A, R), root)


# --------------------------------------------------------------------------- cases


def _y(sch: wb.Schedule):
    return sch.get_loops(sch.get_block("Y"))


def decompose_seed(sch):
    """The MLC chapter's steps (without reverse_compute_at): init under i, j_0."""
    blk = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.decompose_reduction(blk, k)


def decompose_outermost(sch):
    """TVM's matmul_decompose0: at the outermost loop the init gets its own nest."""
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    sch.decompose_reduction(blk, i)


def decompose_at_reduction_loop(sch):
    """TVM's matmul_decompose2: at k, the init sits under i, j with no loop."""
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    sch.decompose_reduction(blk, k)


def decompose_predicate_dropped(sch):
    """TVM's matmul_decompose4: the predicate on the k loops does not reach the init."""
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, factors=[16, 8])
    sch.split(k, factors=[19, 7])
    sch.decompose_reduction(blk, i1)


def decompose_keeps_loop_kind(sch):
    """TVM's colsum_decompose_with_vectorization: the init loop copy stays vectorized."""
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    sch.decompose_reduction(blk, k)


def decompose_keeps_annotations(sch):
    """TVM's matmul_decompose_with_annotation: both blocks keep the annotations."""
    blk = sch.get_block("Y")
    sch.annotate(blk, ann_key="test_annotation", ann_val=1)
    i, j, k = sch.get_loops(blk)
    sch.decompose_reduction(blk, j)


def rfactor_inner(sch):
    """TVM's matmul_rfactor: rfactor the inner part of k, the new axis first."""
    i, j, k = _y(sch)
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.rfactor(k1, 0)


def rfactor_outer_last_axis(sch):
    """rfactor the outer part of k with factor_axis=-1 (appended)."""
    i, j, k = _y(sch)
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.rfactor(k0, -1)


def rfactor_middle_axis(sch):
    i, j, k = _y(sch)
    k0, k1 = sch.split(k, factors=[8, None])
    sch.rfactor(k0, 1)


def rfactor_spatial_predicate(sch):
    """A predicate over spatial loops stays on both blocks."""
    i, j, k = _y(sch)
    sch.split(i, factors=[None, 5])
    k0, k1 = sch.split(k, factors=[None, 16])
    sch.rfactor(k1, 0)


def rfactor_reduction_predicate(sch):
    """TVM's rowsum_predicate (accepted by TVM 0.27): the predicate over k stays on the
    rfactor block only; every slot of Y_rf is initialized at k_0 = 0."""
    i, j, k = _y(sch)
    k0, k1 = sch.split(k, factors=[None, 5])
    sch.rfactor(k1, 0)


def rfactor_then_parallel(sch):
    """The classic use: parallelize the rfactor loop, then decompose the rf block."""
    i, j, k = _y(sch)
    k0, k1 = sch.split(k, factors=[4, None])
    rf = sch.rfactor(k0, 0)
    i_rf, j_rf, k0_rf, k1_rf = sch.get_loops(rf)
    sch.reorder(k0_rf, i_rf)
    sch.parallel(k0_rf)
    sch.decompose_reduction(rf, j_rf)


def rfactor_unit_loop(sch):
    """TVM's factor_one tests: a unit loop bound to nothing can be rfactored."""
    i, j, k = _y(sch)
    k0, k1 = sch.split(k, factors=[None, 1], preserve_unit_iters=False)
    sch.rfactor(k1, 0)


CASES: dict[str, Callable[[wb.Schedule], None]] = {
    f.__name__: f
    for f in (
        decompose_seed,
        decompose_outermost,
        decompose_at_reduction_loop,
        decompose_predicate_dropped,
        decompose_keeps_loop_kind,
        decompose_keeps_annotations,
        rfactor_inner,
        rfactor_outer_last_axis,
        rfactor_middle_axis,
        rfactor_spatial_predicate,
        rfactor_reduction_predicate,
        rfactor_then_parallel,
        rfactor_unit_loop,
    )
}


@pytest.fixture(scope="module")
def func() -> PrimFunc:
    return mm_relu_func(128)


@pytest.fixture(scope="module")
def small() -> PrimFunc:
    return mm_relu_func(32)


def scheduled(func: PrimFunc, case: str) -> wb.Schedule:
    sch = wb.Schedule(func)
    CASES[case](sch)
    return sch


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_after(func, case):
    text = scheduled(func, case).mod.script()
    assert text != func.script()
    check_golden(f"reduction_{case}", text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_trace_roundtrip(func, case):
    roundtrip_trace(scheduled(func, case), func)


@pytest.mark.parametrize("case", sorted(CASES))
def test_numerics(small, case):
    assert_verifies(scheduled(small, case), small)


# --------------------------------------------------------------------------- decompose


def test_decompose_seed_matches_mlc(func):
    """The MLC chapter's schedule (with reverse_compute_at) prints what TVM prints."""
    sch = wb.Schedule(func)
    blk = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "mm_relu"), j0)
    init = sch.decompose_reduction(blk, k)
    lines = [ln.strip() for ln in sch.mod.script().splitlines()]
    start = lines.index("for i, j_0 in T.grid(128, 32):")
    assert lines[start : start + 8] == [
        "for i, j_0 in T.grid(128, 32):",
        "for j_1_init in range(4):",
        'with T.block("Y_init"):',
        "vi = T.axis.spatial(128, i)",
        "vj = T.axis.spatial(128, j_0 * 4 + j_1_init)",
        "T.reads()",
        "T.writes(Y[vi, vj])",
        "Y[vi, vj] = T.float32(0)",
    ]
    assert "for k, j_1 in T.grid(128, 4):" in lines
    assert 'with T.block("Y_update"):' in lines
    assert "T.reads(Y[vi, vj], A[vi, vk], B[vk, vj])" in lines
    assert sch.trace.lines()[-1] == "b7 = sch.decompose_reduction(block=b0, loop=l3)"
    assert sch.get(init).name == "Y_init"
    assert sch.get(blk).name == "Y_update"  # the handle follows the renamed block
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


def test_decompose_blockized_reduction():
    """TVM's test_reduction_decompose1: decompose an outer block from blockize."""
    func = matmul_func(32, 32, 32)
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, factors=[None, 8])
    k0, k1 = sch.split(k, factors=[None, 8])
    sch.reorder(i0, k0, i1, j, k1)
    outer = sch.blockize(i1)
    init = sch.decompose_reduction(outer, i0)
    assert sch.get(init).name == "C_o_init"
    assert sch.get(outer).name == "C_o_update"
    assert [b.name for b in wb.ir.analysis.iter_blocks(sch.get(init))] == ["C_o_init", "C_init"]
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


def test_decompose_returns_handle_to_init_loops(func):
    sch = scheduled(func, "decompose_seed")
    init = sch.get_block("Y_init")
    names = [sch.get(lp).loop_var.name for lp in sch.get_loops(init)]
    assert names == ["i", "j_0", "j_1_init"]


# --------------------------------------------------------------------------- rfactor


def test_rfactor_matches_tvm_square_sum():
    """TVM's square_sum_rfactor: rfactor(j, 1) on C[b] = sum A[b, i, j]^2."""
    func = square_sum_func()
    sch = wb.Schedule(func)
    blk = sch.get_block("C")
    b, i, j = sch.get_loops(blk)
    rf = sch.rfactor(j, 1)
    lines = [ln.strip() for ln in sch.mod.script().splitlines()]
    assert "C_rf = T.alloc_buffer((4, 16))" in lines
    assert lines.count("for b, i, j in T.grid(4, 16, 16):") == 1
    assert 'vj, vb, vi = T.axis.remap("SSR", [j, b, i])' in lines
    assert "C_rf[vb, vj] = C_rf[vb, vj] + A[vb, vi, vj] * A[vb, vi, vj]" in lines
    assert "for b, j in T.grid(4, 16):" in lines
    assert 'vj, vb = T.axis.remap("RS", [j, b])' in lines
    assert "C[vb] = C[vb] + C_rf[vb, vj]" in lines
    assert sch.get(rf).name == "C_rf" and sch.get(blk).name == "C"
    assert sch.trace.lines()[-1] == "b4 = sch.rfactor(loop=l3, factor_axis=1)"
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


def test_rfactor_max_reduction():
    """A max reduction (softmax's row max) keeps its -inf identity in both blocks."""
    func = wb.workloads.get("softmax", M=16, N=32)
    sch = wb.Schedule(func)
    i, k = sch.get_loops(sch.get_block("max"))
    k0, k1 = sch.split(k, factors=[None, 8])
    sch.rfactor(k1, 1)
    text = sch.mod.script()
    assert text.count('T.float32("-inf")') == 2
    assert "max_rf[vi, vk_1] = T.max(max_rf[vi, vk_1], x[vi, vk_0 * 8 + vk_1])" in text
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


def test_rfactor_loop_handles(func):
    """Loops kept around the write-back block keep their handles; removed reduction loops
    become stale; the rfactor block gets copies of every loop."""
    sch = wb.Schedule(func)
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    k0, k1 = sch.split(k, factors=[None, 4])
    rf = sch.rfactor(k1, 0)
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(blk)] == ["i", "j", "k_1"]
    assert sch.get(k1) is sch.get(sch.get_loops(blk)[2])
    rf_loops = [sch.get(lp) for lp in sch.get_loops(rf)]
    assert [lp.loop_var.name for lp in rf_loops] == ["i", "j", "k_0", "k_1"]
    assert rf_loops[3].loop_var is not sch.get(k1).loop_var
    with pytest.raises(StaleHandleError):
        sch.get(k0)


# --------------------------------------------------------------------------- refusals


@pytest.fixture
def sch() -> wb.Schedule:
    return wb.Schedule(mm_relu_func(16))


def test_decompose_reduction_fail_not_reduction_block(sch):
    blk = sch.get_block("C")
    i, j = sch.get_loops(blk)
    e = assert_schedule_error(
        sch, lambda: sch.decompose_reduction(blk, i), NotReductionBlockError, "C"
    )
    assert "no init" in str(e)


def test_decompose_reduction_fail_already_decomposed(sch):
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    sch.decompose_reduction(blk, k)
    assert_schedule_error(
        sch, lambda: sch.decompose_reduction(blk, i), NotReductionBlockError, "Y_update"
    )


def test_decompose_reduction_fail_loop_not_ancestor(sch):
    ci, cj = sch.get_loops(sch.get_block("C"))
    blk = sch.get_block("Y")
    assert_schedule_error(
        sch,
        lambda: sch.decompose_reduction(blk, ci),
        LoopNotAncestorError,
        "i",
        "Y",
    )


def test_decompose_reduction_fail_loop_below_reduction_loop(sch):
    """TVM's matmul_decompose_fail3: with k above j, j is too low for the init."""
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    sch.reorder(k, j)
    assert_schedule_error(
        sch, lambda: sch.decompose_reduction(blk, j), LoopHeightError, "j", "k", "Y"
    )


def test_decompose_reduction_fail_stale_loop(sch):
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    sch.split(k, factors=[None, 4])
    assert_schedule_error(sch, lambda: sch.decompose_reduction(blk, k), StaleHandleError, "k")


def test_decompose_reduction_fail_other_writer():
    """A block is a reduction block only if it is the only writer of its output."""
    func = rowsum_ir()
    A, B = func.params
    vi, i = Var("vi"), Var("i2")
    store = BufferStore(B, A[vi, 0], (vi,))
    other = For(i, 16, "serial", Block("B2", (IterVar(vi, 16),), (i,), store))
    func = func.with_body(Block("root", (), (), SeqStmt((func.body.body, other))))
    sch = wb.Schedule(func)
    blk = sch.get_block("B")
    i, k = sch.get_loops(blk)
    e = assert_schedule_error(
        sch, lambda: sch.decompose_reduction(blk, k), NotReductionBlockError, "B"
    )
    assert '"B2"' in str(e)


def test_decompose_reduction_fail_not_quasi_affine():
    """TVM's rowsum_not_quasi_affine: vk = k * k // 16 is not quasi-affine."""
    sch = wb.Schedule(rowsum_ir(binding=lambda k: (k * k) // 16))
    blk = sch.get_block("B")
    i, k = sch.get_loops(blk)
    e = assert_schedule_error(
        sch, lambda: sch.decompose_reduction(blk, i), NotReductionBlockError, "B"
    )
    assert "quasi-affine" in str(e)


def test_rfactor_fail_not_single_block():
    sch = wb.Schedule(shared_outer_loop_func(8))
    (i, _j) = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.rfactor(i, 0), NotSingleBlockError, "i")


def test_rfactor_fail_not_reduction_block(sch):
    i, j = sch.get_loops(sch.get_block("C"))
    assert_schedule_error(sch, lambda: sch.rfactor(j, 0), NotReductionBlockError, "C")


def test_rfactor_fail_output_indexed_by_reduce_var():
    """TVM's rowsum_not_dominant: B[vi, vk] is indexed by the reduce iter var."""
    A, B = Buffer("A", (16, 16)), Buffer("B", (16, 16))
    i, k, vi, vk = Var("i"), Var("k"), Var("vi"), Var("vk")
    block = Block(
        "B",
        (IterVar(vi, 16, "S"), IterVar(vk, 16, "R")),
        (i, k),
        BufferStore(B, B[vi, vk] + A[vi, vk], (vi, vk)),
        BufferStore(B, const(0.0), (vi, vk)),
    )
    nest = For(i, 16, "serial", For(k, 16, "serial", block))
    sch = wb.Schedule(PrimFunc("rowsum", (A, B), Block("root", (), (), nest)))
    i, k = sch.get_loops(sch.get_block("B"))
    e = assert_schedule_error(sch, lambda: sch.rfactor(k, 0), NotReductionBlockError, "B")
    assert "vk indexes the output" in str(e)


def test_rfactor_fail_not_serial(sch):
    i, j, k = _y(sch)
    sch.unroll(k)
    assert_schedule_error(sch, lambda: sch.rfactor(k, 0), RFactorLoopNotSerialError, "k")


def test_rfactor_fail_spatial_loop(sch):
    """TVM's test_reduction_rfactor_wrong_loops1: i feeds the spatial vi."""
    i, j, k = _y(sch)
    e = assert_schedule_error(sch, lambda: sch.rfactor(i, 0), RFactorLoopNotReductionError, "i")
    assert "spatial" in str(e)


def test_rfactor_fail_unbound_loop(sch):
    """A loop that feeds no iter var (extent > 1) is not a reduction loop."""
    sch = wb.Schedule(rowsum_ir(extra=("x", 2)))
    i, k, x = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.rfactor(x, 0), RFactorLoopNotReductionError, "x")


def test_rfactor_fail_unbound_loop_under_reduction():
    """A loop that feeds no iter var sits under the reduction loop k."""
    sch = wb.Schedule(rowsum_ir(extra=("x", 2)))
    i, k, x = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.rfactor(k, 0), UnboundLoopUnderReductionError, "x")


def test_rfactor_fail_loop_mixes_iter_kinds(sch):
    """A fused j * k loop feeds both vj (spatial) and vk (reduce)."""
    i, j, k = _y(sch)
    jk = sch.fuse(j, k)
    assert_schedule_error(sch, lambda: sch.rfactor(jk, 0), LoopMixesIterKindsError, "j_k_fused")


def test_rfactor_fail_block_not_first():
    """TVM's multiple_reduction_blocks: another block runs first under the outer loop."""
    sch = wb.Schedule(producer_first_func())
    i, kk = sch.get_loops(sch.get_block("R"))
    assert_schedule_error(sch, lambda: sch.rfactor(kk, 0), BlockNotFirstError, "R", "P", "i")


def test_rfactor_fail_reduction_predicate(sch):
    """split(k, [5, 4]) of 16: slot k_0 = 4 of the rfactor buffer would never be
    initialized (k_0 * 4 + k_1 < 16 fails for every k_1), yet the write-back block reads
    it. TVM 0.27 accepts this; we refuse. rfactor(k_1) is fine (k_1 < 16 at k_0 = 0)."""
    i, j, k = _y(sch)
    k0, k1 = sch.split(k, factors=[5, 4])
    assert_schedule_error(sch, lambda: sch.rfactor(k0, 0), ReductionPredicateError, "Y", "k_0")
    sch.rfactor(k1, 0)
    assert_verifies(sch, mm_relu_func(16))


@pytest.mark.parametrize(
    "case, func",
    [
        ("init_not_identity", lambda: rowsum_ir(init=1.0)),  # TVM's wrong_reduce_pattern1
        ("subtraction", lambda: rowsum_ir(update=lambda b, a: b - a)),  # wrong_reduce_pattern2
        ("max_with_zero_init", lambda: rowsum_ir(update=wb.max)),
        ("reads_output_again", lambda: rowsum_ir(update=lambda b, a: b + a * b)),
    ],
)
def test_rfactor_fail_unrecognized_reducer(case, func):
    sch = wb.Schedule(func())
    i, k = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.rfactor(k, 0), UnrecognizedReducerError, "B")


@pytest.mark.parametrize("axis", [3, -4])
def test_rfactor_fail_factor_axis_out_of_range(sch, axis):
    """TVM's factor_axis_range_fail: Y has 2 dimensions, so [-3, 2] is allowed."""
    i, j, k = _y(sch)
    e = assert_schedule_error(
        sch, lambda: sch.rfactor(k, axis), FactorAxisOutOfRangeError, "Y", "k"
    )
    assert "[-3, 2]" in str(e)


def test_rfactor_fail_factor_axis_not_int(sch):
    i, j, k = _y(sch)
    assert_schedule_error(
        sch, lambda: sch.rfactor(k, "0"), wb.schedule.InvalidScheduleArgumentError, "k"
    )


# --------------------------------------------------------------- init predicate (padding)


@pytest.mark.parametrize(
    "split_loop, factors, at",
    [
        (0, [1, 2], 0),  # i (extent 1) -> i_0 (unit, dropped from vi), i_1; decompose at i_0
        (1, [1, 40], 0),  # j (extent 32) -> j_0 (unit, dropped from vj), j_1; decompose at i
        (1, [1, 40], 1),  # the same, decompose at the unit loop j_0 itself
    ],
)
def test_decompose_init_keeps_padding_guard_over_unit_loop(split_loop, factors, at):
    """A padding split with preserve_unit_iters=False leaves a unit loop that the
    binding no longer uses but the predicate (``i_0 * 2 + i_1 < 1``) still does. The
    init gets no copy of that loop; it must still guard its stores with the predicate,
    the unit loop fixed at its only value (TVM 0.27 drops the conjunct and writes out
    of bounds)."""
    func = wb.workloads.linear_bias_relu(M=1, N=32, K=16)
    sch = wb.Schedule(func)
    blk = sch.get_block("matmul")
    loop = sch.get_loops(blk)[split_loop]
    sch.split(loop, factors=factors, preserve_unit_iters=False)
    init = sch.decompose_reduction(blk, sch.get_loops(blk)[at])
    assert access_problems(sch) == []
    assert "T.where" in sch.mod.script().split('T.block("matmul_init")')[1].split("T.block")[0]
    assert sch.get(init).name == "matmul_init"
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


def test_decompose_init_guard_drops_conjunct_true_at_reduction_start():
    """A conjunct over reduction loops holds where the reduction starts (k_0 = k_1 = 0):
    it does not reach the init (TVM's matmul_decompose4)."""
    func = wb.workloads.linear_bias_relu(M=1, N=32, K=16)
    sch = wb.Schedule(func)
    blk = sch.get_block("matmul")
    i, j, k = sch.get_loops(blk)
    sch.split(k, factors=[3, 6])
    sch.decompose_reduction(blk, i)
    text = sch.mod.script()
    assert "T.where" not in text.split('T.block("matmul_init")')[1].split("T.block")[0]
    assert access_problems(sch) == []
    assert_verifies(sch, func)


if __name__ == "__main__":  # pragma: no cover - regenerating goldens by hand
    if "--update-golden" not in sys.argv:
        sys.exit("usage: python tests/test_schedule_reduction.py --update-golden")
    f = mm_relu_func(128)
    for name in sorted(CASES):
        print(write_golden(f"reduction_{name}", scheduled(f, name).mod.script()))
