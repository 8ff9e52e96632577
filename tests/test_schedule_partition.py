"""loop_partition, and loops that do not start at 0 (``For.min``).

The IR after each schedule is written out below (checked against TVM 0.27's output for
the same schedule, which the ``tvm``-marked tests replay); the trace replays to the
same IR; the partitioned function computes what the original does. Then one
``test_loop_partition_fail_<reason>`` per refusal, and the primitives that need a loop
starting at 0 refusing the partitioned loops.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.ir import For
from workbench.schedule import BoundLoopError, InvalidFactorsError, LoopNotStartWithZeroError
from workbench.schedule.primitives.loops import AnnotatedLoopError
from workbench.schedule.primitives.partition import (
    FactorsCoverLoopError,
    MultipleInferredFactorsError,
    NoBlockToPartitionError,
    NonPositiveFactorError,
    PartitionSymbolicLoopError,
)
from workbench.script import ParseError
from workbench.testing import (
    assert_schedule_error,
    assert_verifies,
    ir_identical,
    roundtrip_trace,
)

ELEMENTWISE = """
@T.prim_func
def ew(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
"""

# loop_partition(i, [None, 4]) then, in the second piece, loop_partition(j, [2, 3])
PARTITIONED = """
@T.prim_func
def ew(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    with T.block("B_i_common"):
        with T.block("B_i0_partition"):
            for i0, j in T.grid(12, 8):
                with T.block("B_i0"):
                    vi, vj = T.axis.remap("SS", [i0, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.block("B_i1_partition"):
            for i1 in range(12, 16):
                with T.block("B_i1_j_common"):
                    with T.block("B_i1_j0_partition"):
                        for j0 in range(2):
                            with T.block("B_i1_j0"):
                                vi, vj = T.axis.remap("SS", [i1, j0])
                                B[vi, vj] = A[vi, vj] * T.float32(2)
                    with T.block("B_i1_j1_partition"):
                        for j1 in range(2, 5):
                            with T.block("B_i1_j1"):
                                vi, vj = T.axis.remap("SS", [i1, j1])
                                B[vi, vj] = A[vi, vj] * T.float32(2)
                    with T.block("B_i1_j2_partition"):
                        for j2 in range(5, 8):
                            with T.block("B_i1_j2"):
                                vi, vj = T.axis.remap("SS", [i1, j2])
                                B[vi, vj] = A[vi, vj] * T.float32(2)
"""


def _ew():
    return wb.from_script(ELEMENTWISE)


def _partition(sch):
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.loop_partition(i, factors=[None, 4])
    _, j = sch.get_loops(sch.get_block("B_i1"))
    return sch.loop_partition(j, factors=[2, 3])


def test_loop_partition_before_after():
    sch = wb.Schedule(_ew())
    pieces = _partition(sch)
    assert ir_identical(sch.mod["ew"], wb.from_script(PARTITIONED)) is None
    assert [(sch.get(p).min, sch.get(p).extent) for p in pieces] == [(0, 2), (2, 3), (5, 3)]
    # the iterator bound to a piece over [12, 16) spans [0, 16): iter vars start at 0
    block = sch.get(sch.get_block("B_i1_j1"))
    assert [iv.extent for iv in block.iter_vars] == [16, 5]


def test_loop_partition_trace_and_numerics():
    func = _ew()
    sch = wb.Schedule(func)
    _partition(sch)
    assert "sch.loop_partition(loop=l1, factors=[None, 4], preserve_unit_iters=True)" in str(
        sch.trace)
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


def test_loop_partition_of_reduction_computes_the_same():
    func = wb.workloads.matmul(16, 12, 8)
    sch = wb.Schedule(func)
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.loop_partition(k, [3, 2])  # three pieces: [0, 3), [3, 5), [5, 8)
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_loop_partition_pieces_take_later_primitives():
    """The pieces are ordinary loops for primitives that allow a start other than 0:
    reorder (an affine binding over [min, min + extent)), parallel, and a second
    partition of a loop inside a piece."""
    func = _ew()
    sch = wb.Schedule(func)
    _, i1 = sch.loop_partition(sch.get_loops(sch.get_block("B"))[0], [None, 4])
    i, j = sch.get_loops(sch.get_block("B_i1"))
    sch.reorder(j, i)
    sch.parallel(j)
    assert [sch.get(x).loop_var.name for x in sch.get_loops(sch.get_block("B_i1"))] == \
        ["j", "i1"]
    assert_verifies(sch, func)


def test_loop_partition_opaque_block_names_every_copy():
    """Nested blocks are copied into each piece and all get the piece's suffix."""
    func = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("outer"):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] + T.float32(1)
""")
    sch = wb.Schedule(func)
    sch.loop_partition(sch.get_loops(sch.get_block("outer"))[0], [5])
    names = [b.name for b in wb.ir.analysis.iter_blocks(sch.mod["f"].body)]
    assert names == ["root", "outer_i_common", "outer_i0_partition", "outer_i0", "B_i0",
                     "outer_i1_partition", "outer_i1", "B_i1"]
    assert_verifies(sch, func)


# --------------------------------------------------------------------------- refusals


def test_loop_partition_fail_symbolic_extent():
    func = wb.from_script("""
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,))
    B = T.match_buffer(b, (n,))
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi]
""")
    sch = wb.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.loop_partition(i, [4, None]),
                          PartitionSymbolicLoopError, "i")


@pytest.mark.parametrize("factors, cls", [
    ([None, None], MultipleInferredFactorsError),
    ([0, None], NonPositiveFactorError),
    ([-2, 3], NonPositiveFactorError),
    ([12, 4], FactorsCoverLoopError),
    ([None, 16], FactorsCoverLoopError),
    ([2.5, None], InvalidFactorsError),
])
def test_loop_partition_fail_factors(factors, cls):
    sch = wb.Schedule(_ew())
    i, _ = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.loop_partition(i, factors), cls, "i")


def test_loop_partition_fail_annotated_loop():
    sch = wb.Schedule(_ew())
    _, j = sch.get_loops(sch.get_block("B"))
    sch.annotate(j, "note", 1)
    assert_schedule_error(sch, lambda: sch.loop_partition(j, [None, 2]), AnnotatedLoopError,
                          "j")


def test_loop_partition_fail_thread_bound_loop():
    sch = wb.Schedule(_ew())
    _, j = sch.get_loops(sch.get_block("B"))
    sch.bind(j, "threadIdx.x")
    assert_schedule_error(sch, lambda: sch.loop_partition(j, [None, 2]), BoundLoopError, "j")


def test_loop_partition_fail_loop_not_starting_at_zero():
    """TVM would count the factors from 0 and build empty loops; refused here."""
    sch = wb.Schedule(_ew())
    _, i1 = sch.loop_partition(sch.get_loops(sch.get_block("B"))[0], [None, 4])
    assert_schedule_error(sch, lambda: sch.loop_partition(i1, [2]), LoopNotStartWithZeroError,
                          "i1")


def test_loop_partition_fail_no_single_block_nest():
    func = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi]
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            A[vi] = B[vi]
""")
    sch = wb.Schedule(func)
    i = sch.get_loops(sch.get_block("B"))[0]
    assert_schedule_error(sch, lambda: sch.loop_partition(i, [4]), NoBlockToPartitionError, "i")


@pytest.mark.parametrize("primitive", ["split", "fuse", "sample_perfect_tile", "blockize",
                                       "rfactor"])
def test_loop_not_starting_at_zero_is_refused(primitive):
    """The primitives that rewrite a loop as 0 <= v < extent refuse a partition piece
    that does not start at 0, in one place (``check_starts_at_zero``), as TVM does."""
    func = wb.workloads.mm_relu(16, 16, 16)
    sch = wb.Schedule(func)
    _, i1 = sch.loop_partition(sch.get_loops(sch.get_block("Y"))[0], [None, 4])
    _, j, k = sch.get_loops(sch.get_block("Y_i1"))
    calls = {
        "split": lambda: sch.split(i1, [2, 2]),
        "fuse": lambda: sch.fuse(i1, j),
        "sample_perfect_tile": lambda: sch.sample_perfect_tile(i1, 2),
        "blockize": lambda: sch.blockize(i1),
        "rfactor": lambda: sch.rfactor(k, 0),  # copies every loop of the block, i1 too
    }
    err = assert_schedule_error(sch, calls[primitive], LoopNotStartWithZeroError, "i1")
    assert "range(12, 16)" in str(err)


def test_compute_at_refuses_a_target_not_starting_at_zero():
    func = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(4, 8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi] + T.float32(1)
""")
    sch = wb.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("C"))
    b = sch.get_block("B")
    assert_schedule_error(sch, lambda: sch.compute_at(b, i), LoopNotStartWithZeroError, "i")


# --------------------------------------------------------------------------- For.min


def test_loop_with_min_prints_reads_back_and_builds():
    text = """
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(3, 7):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1)
"""
    func = wb.from_script(text)
    loop = func.body.body
    assert isinstance(loop, For) and (loop.min, loop.extent, loop.end) == (3, 4, 7)
    assert "for i in range(3, 7):" in func.script()
    assert ir_identical(wb.from_script(func.script()), func) is None
    assert ir_identical(wb.from_script(func.script(syntax="tirx")), func) is None
    kernel = wb.build(func)
    assert "= 3; i < 7; ++i)" in kernel.source
    import numpy as np

    a = np.arange(8, dtype="float32")
    b = np.zeros(8, dtype="float32")
    kernel(a, b)
    assert b.tolist() == [0, 0, 0, 4, 5, 6, 7, 0]


def test_loop_with_min_keeps_it_through_rewrites():
    """Rebuilding a loop (with_body, the mutators, decompose_reduction's copies) keeps
    its start."""
    func = wb.workloads.matmul(8, 8, 8)
    sch = wb.Schedule(func)
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.loop_partition(i, [None, 2])
    i1, j, k = sch.get_loops(sch.get_block("C_i1"))
    sch.decompose_reduction(sch.get_block("C_i1"), k)
    assert "for i1 in range(6, 8):" in sch.mod.script()
    assert sch.get(i1).with_body(sch.get(j)).min == 6
    assert_verifies(sch, func)


def test_loop_start_must_be_a_constant_at_least_zero():
    with pytest.raises(ParseError, match="a loop starts at a constant integer >= 0"):
        wb.from_script("""
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    for i in range(-1, 7):
        with T.block("B"):
            vi = T.axis.spatial(8, i + 1)
            A[vi] = T.float32(0)
""")


def test_thread_bound_loop_with_min_runs_from_its_start():
    """A thread axis counts from 0; the bound loop variable is offset from it."""
    func = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    for i in T.thread_binding(2, 8, thread="threadIdx.x"):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            A[vi] = T.float32(1)
""")
    a = np.zeros(8, "float32")
    wb.build(func)(a)
    np.testing.assert_array_equal(a, [0, 0, 1, 1, 1, 1, 1, 1])


# --------------------------------------------------------------------------- TVM


@pytest.mark.tvm
@pytest.mark.parametrize("make, schedule", [
    (_ew, _partition),
    (lambda: wb.workloads.matmul(16, 12, 8),
     lambda sch: sch.loop_partition(sch.get_loops(sch.get_block("C"))[2], [3, 2])),
])
def test_tvm_replays_loop_partition(make, schedule):
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    func = make()
    ours = wb.Schedule(func)
    schedule(ours)
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    theirs = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(ours.trace.as_json_obj(syntax="tirx"),
                                                    theirs)
    assert ir_identical(wb.from_script(theirs.mod.script()), ours.mod) is None
