"""Compute location (compute_at, reverse_compute_at): for every case the IR after
the primitive equals a reviewed golden file, the trace replays (JSON and Python
text) to the same IR, and the scheduled function computes what the unscheduled
one does. Each refusal has its own ``test_<prim>_fail_<reason>``.

TVM's ``test_tir_schedule_compute_at.py`` is the reference for the expected loop
structures: new loops are ``ax0, ax1, ...``; with ``preserve_unit_loops=False`` a loop
of extent 1 is not created; a producer computed under a tiled loop covers exactly
what its consumers read there (a halo included); a predicate appears only where the
covered box can leave the block's domain.

The goldens live in ``tests/golden/compute_at_<case>.txt`` (and the unscheduled
functions in ``compute_at_input_<workload>.txt``). After a deliberate change of the
printer or a primitive, regenerate them with
``python tests/test_schedule_compute_at.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable

import pytest

import workbench as wb
from workbench.ir import For, iter_blocks
from workbench.schedule import ScheduleError
from workbench.schedule.primitives.compute_at import (
    ConsumersOutsideLoopError,
    InvalidIndexError,
    LoopAboveBlockError,
    NotConsumerUnderLoopError,
    NotInSameScopeError,
    NotProducerUnderLoopError,
    ProducersOutsideLoopError,
    RegionNotInvertibleError,
)
from workbench.schedule.primitives.compute_inline import OutputBlockError
from workbench.testing import (
    assert_ir_unchanged,
    assert_schedule_error,
    assert_verifies,
    chain_func,
    check_golden,
    conv2d_func,
    mm_relu_func,
    roundtrip_trace,
    write_golden,
)

# --------------------------------------------------------------------------- workloads
# Small dataflow shapes wb.workloads lacks, built with the TE frontend.


def two_stage(n: int = 16) -> wb.PrimFunc:
    """``B = A + 1; C = B * 2`` (blocks ``"B"``, ``"C"``; loops ``i, j``)."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] + 1.0, name="B")
    C = wb.compute((n, n), lambda i, j: B[i, j] * 2.0, name="C")
    return wb.create_prim_func([A, C], name="two_stage")


def fanout(n: int = 8) -> wb.PrimFunc:
    """``B = A * 2`` read by two outputs ``C = B + 1`` and ``D = B * 3``."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((n, n), lambda i, j: B[i, j] + 1.0, name="C")
    D = wb.compute((n, n), lambda i, j: B[i, j] * 3.0, name="D")
    return wb.create_prim_func([A, C, D], name="fanout")


def join(n: int = 8) -> wb.PrimFunc:
    """Two independent producers ``B = A * 2``, ``E = A + 1`` and ``F = B + E``."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    E = wb.compute((n, n), lambda i, j: A[i, j] + 1.0, name="E")
    F = wb.compute((n, n), lambda i, j: B[i, j] + E[i, j], name="F")
    return wb.create_prim_func([A, F], name="join")


def diamond(n: int = 8) -> wb.PrimFunc:
    """``B (n+1, n)`` read by ``C = B[i, j] + 1`` and ``D = B[i + 1, j] * 3`` (a one-row
    halo), both read by ``E = C + D``."""
    A = wb.placeholder((n + 1, n), "float32", name="A")
    B = wb.compute((n + 1, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((n, n), lambda i, j: B[i, j] + 1.0, name="C")
    D = wb.compute((n, n), lambda i, j: B[i + 1, j] * 3.0, name="D")
    E = wb.compute((n, n), lambda i, j: C[i, j] + D[i, j], name="E")
    return wb.create_prim_func([A, E], name="diamond")


def stencil(n: int = 16) -> wb.PrimFunc:
    """``B = A * 2`` (``n``) and ``C[i] = B[i] + B[i + 1]`` (``n - 1``)."""
    A = wb.placeholder((n,), "float32", name="A")
    B = wb.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = wb.compute((n - 1,), lambda i: B[i] + B[i + 1], name="C")
    return wb.create_prim_func([A, C], name="stencil")


def row_sum(n: int = 8) -> wb.PrimFunc:
    """``B = A * 2`` then the reduction ``S[i] = sum_k B[i, k]`` (block ``"S"``)."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    k = wb.reduce_axis(n, name="k")
    S = wb.compute((n,), lambda i: wb.sum(B[i, k], axis=k), name="S")
    return wb.create_prim_func([A, S], name="row_sum")


WORKLOADS: dict[str, Callable[[], wb.PrimFunc]] = {
    "mm_relu_128": lambda: mm_relu_func(128),
    "mm_relu_16": lambda: mm_relu_func(16),
    "mm_relu_130": lambda: mm_relu_func(130, 130, 8),
    "two_stage": two_stage,
    "fanout": fanout,
    "join": join,
    "diamond": diamond,
    "stencil": stencil,
    "elementwise_chain": lambda: wb.workloads.elementwise_chain(64, 8),
    "conv2d": lambda: conv2d_func(1, 8, 14, 8, 3),
}


def loops(sch: wb.Schedule, block: str):
    return sch.get_loops(sch.get_block(block))


def names(sch: wb.Schedule, block: str) -> list[str]:
    return [sch.get(lp).loop_var.name for lp in loops(sch, block)]


def extents(sch: wb.Schedule, block: str) -> list[int]:
    return [sch.get(lp).extent for lp in loops(sch, block)]


def blocks_under(sch: wb.Schedule, loop) -> list[str]:
    """Names of the blocks under ``loop``, in program order."""
    return [b.name for b in iter_blocks(sch.get(loop))]


def lines(sch: wb.Schedule) -> list[str]:
    return [ln.strip() for ln in sch.mod.script().splitlines()]


# --------------------------------------------------------------------------- cases
# Each case schedules a fresh Schedule of WORKLOADS[workload]; its name is the golden's.


def _mlc_seed(sch):
    i, j, k = loops(sch, "Y")
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    return j0


def rca_seed(sch):
    """The MLC chapter: relu C under Y's j_0, covering the 4 columns Y produces there."""
    j0 = _mlc_seed(sch)
    sch.reverse_compute_at(sch.get_block("C"), j0)


def rca_seed_unit_loops(sch):
    """preserve_unit_loops=True keeps the unit loop for vi: T.grid(1, 4)."""
    j0 = _mlc_seed(sch)
    sch.reverse_compute_at(sch.get_block("C"), j0, preserve_unit_loops=True)


def rca_seed_inner(sch):
    """At Y's innermost spatial loop j_1 (above the reduction k): one element of C per
    iteration, no new loop."""
    i, j, k = loops(sch, "Y")
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reverse_compute_at(sch.get_block("C"), j1)


def rca_nondividing(sch):
    """130 = 33 * 4 - 2: C's covered box leaves the domain, so it gets a T.where."""
    j0 = _mlc_seed(sch)
    sch.reverse_compute_at(sch.get_block("C"), j0)


def ca_nondividing(sch):
    """The reduction Y under C's j_0 (130 by 4): Y is guarded the same way."""
    i, j = loops(sch, "C")
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.compute_at(sch.get_block("Y"), j0)


def rca_index_last(sch):
    """Two consumers under B's loop i: index=-1 puts D after C."""
    i, j = loops(sch, "B")
    sch.reverse_compute_at(sch.get_block("C"), i)
    sch.reverse_compute_at(sch.get_block("D"), i, index=-1)


def rca_index_first(sch):
    """index=-2: the first legal position, right after the producer B (before C)."""
    i, j = loops(sch, "B")
    sch.reverse_compute_at(sch.get_block("C"), i)
    sch.reverse_compute_at(sch.get_block("D"), i, index=-2)


def ca_outer(sch):
    """B under C's outer loop: one row of B per iteration."""
    i, j = loops(sch, "C")
    sch.compute_at(sch.get_block("B"), i)


def ca_outer_unit_loops(sch):
    i, j = loops(sch, "C")
    sch.compute_at(sch.get_block("B"), i, preserve_unit_loops=True)


def ca_inner(sch):
    """B under C's inner loop: one element, no new loops."""
    i, j = loops(sch, "C")
    sch.compute_at(sch.get_block("B"), j)


def ca_inner_unit_loops(sch):
    i, j = loops(sch, "C")
    sch.compute_at(sch.get_block("B"), j, preserve_unit_loops=True)


def ca_chain_fused(sch):
    """relu -> batch_norm -> scale in one pass over n."""
    n, c = loops(sch, "scale")
    sch.compute_at(sch.get_block("batch_norm"), n)
    sch.compute_at(sch.get_block("relu"), n)


def ca_index_last(sch):
    """Two producers of F under its loop i: index=-1 puts E right before F."""
    i, j = loops(sch, "F")
    sch.compute_at(sch.get_block("B"), i)
    sch.compute_at(sch.get_block("E"), i, index=-1)


def ca_index_first(sch):
    """index=-2: the first legal position, before B."""
    i, j = loops(sch, "F")
    sch.compute_at(sch.get_block("B"), i)
    sch.compute_at(sch.get_block("E"), i, index=-2)


def ca_two_consumers_halo(sch):
    """B under E's loop i once C and D are there: the union of C's row and D's next
    row, two rows of B, inserted before both."""
    i, j = loops(sch, "E")
    sch.compute_at(sch.get_block("C"), i)
    sch.compute_at(sch.get_block("D"), i)
    sch.compute_at(sch.get_block("B"), i)


def rca_halo_guards(sch):
    """B has 9 rows, C reads row i and D row i + 1. Under B's loop i, D computes row
    i - 1 (guarded 1 <= i) and C row i (guarded i < 8)."""
    i, j = loops(sch, "B")
    sch.reverse_compute_at(sch.get_block("D"), i)
    sch.reverse_compute_at(sch.get_block("C"), i)


def ca_blockized_consumer(sch):
    """TVM's blockized_1: B under the loop above the consumer's outer block C_o, which
    reads 4 rows of B per iteration."""
    i, j = loops(sch, "C")
    i0, i1 = sch.split(i, factors=[None, 4])
    sch.blockize(i1)
    sch.compute_at(sch.get_block("B"), i0)


def _tile_conv(sch):
    n, k, h, w, rc, ry, rx = loops(sch, "conv")
    h0, h1 = sch.split(h, factors=[None, 7])
    w0, w1 = sch.split(w, factors=[None, 7])
    sch.reorder(h0, w0, h1, w1)
    return h0, w0, h1, w1


def ca_conv_pad_tile(sch):
    """The padding stage under the 7x7 output tile: a 9x9 input tile (halo 2)."""
    h0, w0, h1, w1 = _tile_conv(sch)
    sch.compute_at(sch.get_block("pad"), w0)


def ca_conv_pad_row(sch):
    """Deeper, under h_1: 3 input rows of the 9 columns the tile row needs."""
    h0, w0, h1, w1 = _tile_conv(sch)
    sch.compute_at(sch.get_block("pad"), h1)


def ca_reduction_outer(sch):
    """The matmul Y under relu's i: a row of Y, reduced over all of k."""
    i, j = loops(sch, "C")
    sch.compute_at(sch.get_block("Y"), i)


def ca_reduction_inner(sch):
    """The matmul Y under relu's j: one element, the k loop covers the reduction."""
    i, j = loops(sch, "C")
    sch.compute_at(sch.get_block("Y"), j)


def ca_stencil_halo_nondividing(sch):
    """C (15) split by 4: each tile reads 5 elements of B, the last tile would read
    B[16], so B gets a T.where."""
    (i,) = loops(sch, "C")
    i0, i1 = sch.split(i, factors=[None, 4])
    sch.compute_at(sch.get_block("B"), i0)


CASES: dict[str, tuple[str, Callable[[wb.Schedule], None]]] = {
    f.__name__: (w, f)
    for w, f in (
        ("mm_relu_128", rca_seed),
        ("mm_relu_128", rca_seed_unit_loops),
        ("mm_relu_16", rca_seed_inner),
        ("mm_relu_130", rca_nondividing),
        ("mm_relu_130", ca_nondividing),
        ("fanout", rca_index_last),
        ("fanout", rca_index_first),
        ("two_stage", ca_outer),
        ("two_stage", ca_outer_unit_loops),
        ("two_stage", ca_inner),
        ("two_stage", ca_inner_unit_loops),
        ("elementwise_chain", ca_chain_fused),
        ("join", ca_index_last),
        ("join", ca_index_first),
        ("diamond", ca_two_consumers_halo),
        ("diamond", rca_halo_guards),
        ("two_stage", ca_blockized_consumer),
        ("conv2d", ca_conv_pad_tile),
        ("conv2d", ca_conv_pad_row),
        ("mm_relu_16", ca_reduction_outer),
        ("mm_relu_16", ca_reduction_inner),
        ("stencil", ca_stencil_halo_nondividing),
    )
}

_FUNCS: dict[str, wb.PrimFunc] = {}


def workload(name: str) -> wb.PrimFunc:
    if name not in _FUNCS:
        _FUNCS[name] = WORKLOADS[name]()
    return _FUNCS[name]


def scheduled(case: str) -> wb.Schedule:
    w, fn = CASES[case]
    sch = wb.Schedule(workload(w))
    fn(sch)
    return sch


# --------------------------------------------------------------------------- golden


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_before_golden(name):
    check_golden(f"compute_at_input_{name}", workload(name).script())


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_after(case):
    sch = scheduled(case)
    text = sch.mod.script()
    assert text != wb.Schedule(workload(CASES[case][0])).mod.script(), "nothing changed"
    check_golden(f"compute_at_{case}", text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_trace_roundtrip(case):
    roundtrip_trace(scheduled(case), workload(CASES[case][0]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_numerics(case):
    assert_verifies(scheduled(case), workload(CASES[case][0]))


# --------------------------------------------------------------------------- structure


def test_rca_seed_matches_tvm():
    """The MLC chapter's reverse_compute_at prints what TVM prints."""
    sch = scheduled("rca_seed")
    assert sch.trace.lines()[-1] == (
        "sch.reverse_compute_at(block=b6, loop=l4, preserve_unit_loops=False, index=-1)"
    )
    text = lines(sch)
    assert "for i, j_0 in T.grid(128, 32):" in text
    assert "for k, j_1 in T.grid(128, 4):" in text
    assert "for ax0 in range(4):" in text
    assert "vj = T.axis.spatial(128, j_0 * 4 + ax0)" in text
    assert "vi = T.axis.spatial(128, i)" in text
    assert "T.where" not in sch.mod.script()
    assert names(sch, "C") == ["i", "j_0", "ax0"]
    assert names(sch, "Y") == ["i", "j_0", "k", "j_1"]
    # C sits after Y's k nest, under j_0
    i, j0 = loops(sch, "C")[:2]
    assert blocks_under(sch, j0) == ["Y", "C"]


def test_rca_seed_unit_loops_matches_tvm():
    text = lines(scheduled("rca_seed_unit_loops"))
    assert "for ax0, ax1 in T.grid(1, 4):" in text
    assert "vi = T.axis.spatial(128, i + ax0)" in text
    assert "vj = T.axis.spatial(128, j_0 * 4 + ax1)" in text


def test_rca_inner_drops_all_loops():
    sch = scheduled("rca_seed_inner")
    assert names(sch, "C") == ["i", "j_0", "j_1"]
    assert lines(sch).count("vj = T.axis.spatial(16, j_0 * 4 + j_1)") == 2  # Y and C
    j1 = loops(sch, "C")[2]
    assert blocks_under(sch, j1) == ["Y", "C"]


def test_rca_nondividing_gets_predicate():
    """j_0 runs 33 times; at j_0 = 32 the 4 columns 128..131 leave 0..129."""
    sch = scheduled("rca_nondividing")
    text = lines(sch)
    assert extents(sch, "C") == [130, 33, 4]
    assert "vj = T.axis.spatial(130, j_0 * 4 + ax0)" in text
    assert "T.where(j_0 * 4 + ax0 < 130)" in text
    # vi is bound to i exactly: no guard on it
    assert text.count("T.where(j_0 * 4 + ax0 < 130)") == 1


def test_ca_nondividing_gets_predicate():
    sch = scheduled("ca_nondividing")
    assert extents(sch, "Y") == [130, 33, 4, 8]
    assert "T.where(j_0 * 4 + ax0 < 130)" in lines(sch)


def test_no_predicate_when_box_inside_domain():
    for case in (
        "rca_seed",
        "ca_outer",
        "ca_inner",
        "ca_conv_pad_tile",
        "ca_conv_pad_row",
        "ca_reduction_outer",
        "ca_two_consumers_halo",
        "ca_chain_fused",
    ):
        assert "T.where" not in scheduled(case).mod.script(), case


def test_ca_producer_shrinks_to_row_and_element():
    sch = scheduled("ca_outer")
    assert names(sch, "B") == ["i", "ax0"]
    assert extents(sch, "B") == [16, 16]
    assert 'vi, vj = T.axis.remap("SS", [i, ax0])' in lines(sch)
    sch = scheduled("ca_inner")
    assert names(sch, "B") == ["i", "j"]
    i, j = loops(sch, "C")
    assert blocks_under(sch, j) == ["B", "C"]
    sch = scheduled("ca_outer_unit_loops")
    assert extents(sch, "B") == [16, 1, 16]
    assert "vi = T.axis.spatial(16, i + ax0)" in lines(sch)
    sch = scheduled("ca_inner_unit_loops")
    assert extents(sch, "B") == [16, 16, 1, 1]
    assert "vj = T.axis.spatial(16, j + ax1)" in lines(sch)


def test_ca_chain_fused_into_one_pass():
    sch = scheduled("ca_chain_fused")
    n = loops(sch, "scale")[0]
    assert blocks_under(sch, n) == ["relu", "batch_norm", "scale"]
    assert extents(sch, "relu") == [64, 8]
    assert extents(sch, "batch_norm") == [64, 8]
    body = sch.get(n).body
    assert len(body.stmts) == 3
    # the whole function is now a single loop nest over n
    root = sch.func.body
    assert isinstance(root.body, For) and root.body.loop_var.name == "n"


def test_ca_conv_pad_halo():
    """A 7x7 output tile of a 3x3 conv reads a 9x9 input tile over all 8 channels."""
    sch = scheduled("ca_conv_pad_tile")
    text = lines(sch)
    assert "for ax0, ax1, ax2 in T.grid(8, 9, 9):" in text
    assert "vh = T.axis.spatial(16, h_0 * 7 + ax1)" in text
    assert "vw = T.axis.spatial(16, w_0 * 7 + ax2)" in text
    assert "vn = T.axis.spatial(1, n)" in text
    assert extents(sch, "pad") == [1, 8, 2, 2, 8, 9, 9]
    w0 = loops(sch, "conv")[3]
    assert blocks_under(sch, w0) == ["pad", "conv"]


def test_ca_conv_pad_row_halo():
    sch = scheduled("ca_conv_pad_row")
    text = lines(sch)
    assert "for ax0, ax1, ax2 in T.grid(8, 3, 9):" in text
    assert "vh = T.axis.spatial(16, h_0 * 7 + h_1 + ax1)" in text
    assert extents(sch, "pad") == [1, 8, 2, 2, 7, 8, 3, 9]


def test_ca_reduction_covers_full_reduction():
    sch = scheduled("ca_reduction_outer")
    assert extents(sch, "Y") == [16, 16, 16]
    assert 'vi, vj, vk = T.axis.remap("SSR", [i, ax0, ax1])' in lines(sch)
    sch = scheduled("ca_reduction_inner")
    assert extents(sch, "Y") == [16, 16, 16]
    assert 'vi, vj, vk = T.axis.remap("SSR", [i, j, ax0])' in lines(sch)
    assert "with T.init():" in sch.mod.script()


def test_ca_stencil_halo_predicate():
    sch = scheduled("ca_stencil_halo_nondividing")
    text = lines(sch)
    assert "for ax0 in range(5):" in text
    assert "vi = T.axis.spatial(16, i_0 * 4 + ax0)" in text
    assert "T.where(i_0 * 4 + ax0 < 16)" in text


def test_ca_two_consumers_union():
    sch = scheduled("ca_two_consumers_halo")
    i = loops(sch, "E")[0]
    assert blocks_under(sch, i) == ["B", "C", "D", "E"]
    assert extents(sch, "B")[1:] == [2, 8]
    assert "vi = T.axis.spatial(9, i + " in sch.mod.script()


def test_rca_halo_guards():
    sch = scheduled("rca_halo_guards")
    text = lines(sch)
    assert "vi = T.axis.spatial(8, i - 1)" in text
    assert "T.where(1 <= i)" in text
    assert "T.where(i < 8)" in text
    i = loops(sch, "B")[0]
    assert blocks_under(sch, i) == ["B", "D", "C"]


def test_ca_blockized_consumer_covers_tile():
    sch = scheduled("ca_blockized_consumer")
    text = lines(sch)
    assert "for ax0, ax1 in T.grid(4, 16):" in text
    assert "vi = T.axis.spatial(16, i_0 * 4 + ax0)" in text
    i0 = loops(sch, "B")[0]
    assert blocks_under(sch, i0) == ["B", "C_o", "C"]


def test_rca_index_positions():
    """-2 is the first legal position (after the producer), -1 the last; an explicit
    index in the legal range means the same positions."""
    func = workload("fanout")
    orders = {}
    for index in (-2, -1, 1, 2):
        sch = wb.Schedule(func)
        i, j = loops(sch, "B")
        sch.reverse_compute_at(sch.get_block("C"), i)
        sch.reverse_compute_at(sch.get_block("D"), i, index=index)
        orders[index] = blocks_under(sch, i)
        assert_verifies(sch, func)
        roundtrip_trace(sch, func)
    assert orders == {
        -2: ["B", "D", "C"],
        -1: ["B", "C", "D"],
        1: ["B", "D", "C"],
        2: ["B", "C", "D"],
    }


def test_ca_index_positions():
    func = workload("join")
    orders = {}
    for index in (-2, -1, 0, 1):
        sch = wb.Schedule(func)
        i, j = loops(sch, "F")
        sch.compute_at(sch.get_block("B"), i)
        sch.compute_at(sch.get_block("E"), i, index=index)
        orders[index] = blocks_under(sch, i)
        assert_verifies(sch, func)
    assert orders == {
        -2: ["E", "B", "F"],
        -1: ["B", "E", "F"],
        0: ["E", "B", "F"],
        1: ["B", "E", "F"],
    }


def test_handles_survive_compute_at():
    """The consumer's loop handles stay valid; the moved block's loops are new."""
    sch = wb.Schedule(workload("two_stage"))
    i, j = loops(sch, "C")
    b = sch.get_block("B")
    sch.compute_at(b, i)
    assert sch.get(i).loop_var.name == "i"
    assert sch.get(j).loop_var.name == "j"
    assert names(sch, "B") == ["i", "ax0"]
    assert sch.get(b).name == "B"


def test_new_loop_names_follow_tvm():
    """Each moved block gets loops of its own named ``ax0, ax1, ...`` as in TVM; sibling
    stages may reuse a name, but loops on one path never share one, and the handles
    stay distinct variables."""
    sch = scheduled("ca_chain_fused")
    loops_ = _iter_loops(sch)
    assert [lp.loop_var.name for lp in loops_].count("ax0") == 2
    assert len({id(lp.loop_var) for lp in loops_}) == len(loops_)
    for lp in loops_:
        inner = [x.loop_var.name for x in _iter_loops_under(lp)]
        assert lp.loop_var.name not in inner


def _iter_loops_under(loop):
    from workbench.ir import iter_stmts

    return [s for s in iter_stmts(loop.body) if isinstance(s, For)]


def _iter_loops(sch):
    from workbench.ir import iter_stmts

    return [s for s in iter_stmts(sch.func.body) if isinstance(s, For)]


def test_moved_block_drops_its_old_predicate_compute_at():
    """A producer split with a non-dividing factor has ``T.where(j_0 * 5 + j_1 < 16)``.
    Moved under the consumer, its old loops are gone, so the old predicate must go
    too (TVM rebuilds the predicate from the new loops only)."""
    func = chain_func(16)
    sch = wb.Schedule(func)
    i, j = loops(sch, "B")
    sch.split(j, factors=[None, 5])
    ci, cj = loops(sch, "C")
    sch.compute_at(sch.get_block("B"), ci)
    assert "j_0" not in sch.mod.script()
    assert_verifies(sch, func)


def test_moved_block_drops_its_old_predicate_reverse_compute_at():
    func = chain_func(16)
    sch = wb.Schedule(func)
    i, j = loops(sch, "C")
    sch.split(j, factors=[None, 5])
    bi, bj = loops(sch, "B")
    sch.reverse_compute_at(sch.get_block("C"), bi)
    assert "j_0" not in sch.mod.script()
    assert_verifies(sch, func)


def test_compute_at_then_more_scheduling():
    """compute_at composes with the loop primitives afterwards (the tile's loops are
    ordinary loops)."""
    func = workload("conv2d")
    sch = wb.Schedule(func)
    h0, w0, h1, w1 = _tile_conv(sch)
    sch.compute_at(sch.get_block("pad"), w0)
    c, ph, pw = loops(sch, "pad")[4:]
    sch.fuse(ph, pw)
    sch.parallel(loops(sch, "conv")[1])
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


# --------------------------------------------------------------------------- refusals


def test_compute_at_fail_block_under_loop():
    sch = wb.Schedule(workload("mm_relu_16"))
    i, j, k = loops(sch, "Y")
    blk = sch.get_block("Y")
    assert_schedule_error(sch, lambda: sch.compute_at(blk, i), LoopAboveBlockError, "Y", "i")


def test_reverse_compute_at_fail_block_under_loop():
    sch = wb.Schedule(workload("mm_relu_16"))
    i, j = loops(sch, "C")
    blk = sch.get_block("C")
    assert_schedule_error(
        sch, lambda: sch.reverse_compute_at(blk, j), LoopAboveBlockError, "C", "j"
    )


def test_compute_at_fail_not_in_same_scope():
    """After blockize, C's loops i_1, j are inside the block C_o: B (in the root scope)
    cannot move there."""
    sch = wb.Schedule(workload("two_stage"))
    i, j = loops(sch, "C")
    i0, i1 = sch.split(i, factors=[None, 4])
    sch.blockize(i1)
    inner_i, inner_j = loops(sch, "C")
    blk = sch.get_block("B")
    assert_schedule_error(sch, lambda: sch.compute_at(blk, inner_j), NotInSameScopeError, "B", "j")


def test_reverse_compute_at_fail_not_in_same_scope():
    sch = wb.Schedule(workload("two_stage"))
    i, j = loops(sch, "B")
    i0, i1 = sch.split(i, factors=[None, 4])
    sch.blockize(i1)
    inner_i, inner_j = loops(sch, "B")
    blk = sch.get_block("C")
    assert_schedule_error(
        sch, lambda: sch.reverse_compute_at(blk, inner_i), NotInSameScopeError, "C", "i_1"
    )


def test_compute_at_fail_output_block():
    """C writes the function's output: as in TVM, an output block cannot move."""
    sch = wb.Schedule(workload("mm_relu_128"))
    j0 = _mlc_seed(sch)
    c = sch.get_block("C")
    err = assert_schedule_error(sch, lambda: sch.compute_at(c, j0), OutputBlockError, "C", "j_0")
    assert str(err).startswith('compute_at: block "C" is an output block')


def test_compute_at_fail_not_producer_under_loop():
    """In A -> B -> C -> D, B feeds only C: nothing under D's loop reads it."""
    sch = wb.Schedule(chain_func(16))
    i, _ = sch.get_loops(sch.get_block("D"))
    b = sch.get_block("B")
    err = assert_schedule_error(
        sch, lambda: sch.compute_at(b, i), NotProducerUnderLoopError, "B", "i"
    )
    assert str(err).startswith('compute_at: block "B" is not a producer of any block under loop')


def test_compute_at_fail_consumers_outside_loop():
    """B feeds C and D; under C's loop only, D would read a partial B."""
    sch = wb.Schedule(workload("fanout"))
    i, j = loops(sch, "C")
    blk = sch.get_block("B")
    assert_schedule_error(
        sch,
        lambda: sch.compute_at(blk, i),
        ConsumersOutsideLoopError,
        "B",
        "D",
        "i",
    )


def test_reverse_compute_at_fail_not_consumer_under_loop():
    """D reads C, not B: nothing under B's loop produces what D reads."""
    sch = wb.Schedule(chain_func(8))
    i, j = loops(sch, "B")
    blk = sch.get_block("D")
    assert_schedule_error(
        sch,
        lambda: sch.reverse_compute_at(blk, i),
        NotConsumerUnderLoopError,
        "D",
        "i",
    )


def test_reverse_compute_at_fail_producer_after_loop():
    """F reads B and E; E runs after B's loop, so F cannot move under it (TVM: every
    producer must be under the loop)."""
    sch = wb.Schedule(workload("join"))
    i, j = loops(sch, "B")
    blk = sch.get_block("F")
    assert_schedule_error(
        sch,
        lambda: sch.reverse_compute_at(blk, i),
        ProducersOutsideLoopError,
        "F",
        "E",
        "i",
    )


def test_reverse_compute_at_reduction_block():
    """The row sum S is a reduction block; as in TVM it moves under B's row loop and
    reduces one row per iteration."""
    func = row_sum(8)
    sch = wb.Schedule(func)
    i, j = loops(sch, "B")
    sch.reverse_compute_at(sch.get_block("S"), i)
    assert extents(sch, "S") == [8, 8]
    assert_verifies(sch, func)


def test_reverse_compute_at_fail_region_not_invertible():
    """C reads B[i : i + 2]; that window cannot be mapped exactly onto what one
    iteration of B's loop produces (TVM's pattern match fails there too)."""
    sch = wb.Schedule(workload("stencil"))
    (i,) = loops(sch, "B")
    i0, i1 = sch.split(i, factors=[None, 4])
    blk = sch.get_block("C")
    assert_schedule_error(
        sch,
        lambda: sch.reverse_compute_at(blk, i0),
        RegionNotInvertibleError,
        "C",
        "B",
        "i_0",
    )


@pytest.mark.parametrize("index", [-3, 0, 5])
def test_reverse_compute_at_fail_invalid_index(index):
    """Under Y's j_0 the only legal position for C is 1 (after Y's k nest)."""
    sch = wb.Schedule(workload("mm_relu_16"))
    j0 = _mlc_seed(sch)
    c = sch.get_block("C")
    err = assert_schedule_error(
        sch,
        lambda: sch.reverse_compute_at(c, j0, index=index),
        InvalidIndexError,
        "C",
        "j_0",
    )
    assert str(index) in str(err)


@pytest.mark.parametrize("index", [-3, 1, 7])
def test_compute_at_fail_invalid_index(index):
    """Under C's loop i the only legal position for B is 0 (before C's j loop)."""
    sch = wb.Schedule(workload("two_stage"))
    i, j = loops(sch, "C")
    b = sch.get_block("B")
    assert_schedule_error(
        sch, lambda: sch.compute_at(b, i, index=index), InvalidIndexError, "B", "i"
    )


@pytest.mark.parametrize("index", [True, "1", 1.0, None])
def test_compute_at_fail_index_type(index):
    sch = wb.Schedule(workload("two_stage"))
    i, j = loops(sch, "C")
    b = sch.get_block("B")
    err = assert_schedule_error(sch, lambda: sch.compute_at(b, i, index=index), InvalidIndexError)
    assert isinstance(err, ValueError)


def test_refusal_keeps_earlier_work():
    """A refused compute_at after successful ones leaves IR and trace as they were."""
    sch = wb.Schedule(workload("elementwise_chain"))
    n, c = loops(sch, "scale")
    sch.compute_at(sch.get_block("batch_norm"), n)
    before = sch.mod.script()
    blk = sch.get_block("scale")
    assert_schedule_error(
        sch,
        lambda: sch.compute_at(blk, n),
        LoopAboveBlockError,
        "scale",
        "n",
    )
    assert_ir_unchanged(sch, before)
    sch.compute_at(sch.get_block("relu"), n)
    assert_verifies(sch, workload("elementwise_chain"))


# --------------------------------------------------------------------------- random


def _random_compute_location(func: wb.PrimFunc, rng: random.Random, steps: int) -> wb.Schedule:
    """Random compute_at / reverse_compute_at between random blocks and loops; each
    refusal must be a ScheduleError that leaves the schedule untouched."""
    sch = wb.Schedule(func)
    for _ in range(steps):
        blocks = [b.name for b in iter_blocks(sch.func.body) if b.name != "root"]
        pos = rng.randrange(len(blocks))
        block = blocks[pos]
        # mostly a later block's loop for compute_at, an earlier one's for the reverse
        reverse = rng.random() < 0.5
        others = blocks[:pos] if reverse else blocks[pos + 1 :]
        target = rng.choice(others if others and rng.random() < 0.8 else blocks)
        tloops = loops(sch, target)
        if not tloops:
            continue
        loop = rng.choice(tloops)
        prim = sch.reverse_compute_at if reverse else sch.compute_at
        unit = rng.random() < 0.3
        before, trace_len = sch.mod.script(), len(sch.trace)
        try:
            prim(sch.get_block(block), loop, preserve_unit_loops=unit)
        except ScheduleError:
            assert sch.mod.script() == before
            assert len(sch.trace) == trace_len + 1  # only the get_block
    return sch


@pytest.mark.parametrize("seed", range(6))
def test_random_compute_locations_preserve_semantics(seed):
    rng = random.Random(seed)
    for func in (chain_func(8), workload("diamond"), mm_relu_func(8)):
        sch = _random_compute_location(func, rng, steps=6)
        assert_verifies(sch, func)
        roundtrip_trace(sch, func)


if __name__ == "__main__":  # pragma: no cover - regenerating goldens by hand
    if "--update-golden" not in sys.argv:
        sys.exit("usage: python tests/test_schedule_compute_at.py --update-golden")
    for name in sorted(WORKLOADS):
        print(write_golden(f"compute_at_input_{name}", workload(name).script()))
    for name in sorted(CASES):
        print(write_golden(f"compute_at_{name}", scheduled(name).mod.script()))
