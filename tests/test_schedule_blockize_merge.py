"""merge and blockize of several blocks.

For every case the function body after the primitives equals the IR written out below
(reviewed against TVM's output for the same schedule), the trace replays (JSON and
Python text) to the same IR, and the scheduled function computes what the unscheduled
one does. Then one ``test_<prim>_fail_<reason>`` per refusal, and a replay in TVM where
apache-tvm is installed. The expected structure follows TVM's ``merge`` docstring
(loops ``<name>_m``, the bodies one after the other) and ``blockize`` of a list of
blocks (outer block ``outer_B_C_``, iter vars of the first block with ``_o``).
"""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.schedule import DuplicateLoopError, StaleHandleError
from workbench.schedule.errors import (
    InvalidScheduleArgumentError,
    NotSingleChildError,
)
from workbench.schedule.primitives.blockize import (
    BlocksInDifferentScopesError,
    BlocksNotConsecutiveError,
    NotSingleBlockError,
    OuterBindingMismatchError,
    OuterReductionError,
)
from workbench.schedule.primitives.loops import AnnotatedLoopError
from workbench.schedule.primitives.merge import (
    LoopsInDifferentScopesError,
    MergeDepthMismatchError,
    MergeExtentMismatchError,
    NestedLoopsError,
)
from workbench.testing import (
    assert_schedule_error,
    assert_verifies,
    chain_func,
    mm_relu_func,
    roundtrip_trace,
    shared_outer_loop_func,
)

# --------------------------------------------------------------------------- cases


def merge_inner(sch):
    """TVM's merge docstring: the j loops of two 2-d nests (so i merges too)."""
    _, jb = sch.get_loops(sch.get_block("B"))
    _, jc = sch.get_loops(sch.get_block("C"))
    sch.merge(jb, jc)


def merge_outer(sch):
    """Only the outer loops: each j loop stays, under the merged i_m."""
    ib, _ = sch.get_loops(sch.get_block("B"))
    ic, _ = sch.get_loops(sch.get_block("C"))
    sch.merge(ib, ic)


def merge_under_loop(sch):
    """Sibling loops under a shared loop: only they merge."""
    _, j = sch.get_loops(sch.get_block("B"))
    _, jj = sch.get_loops(sch.get_block("C"))
    sch.merge(j, jj)


def blockize_blocks(sch):
    """Two sibling nests under loop i become one block outer_B_C_."""
    sch.blockize([sch.get_block("B"), sch.get_block("C")])


def blockize_blocks_tiled(sch):
    """Split inner loops stay inside; unit iters dropped."""
    _, j = sch.get_loops(sch.get_block("B"))
    _, jj = sch.get_loops(sch.get_block("C"))
    sch.split(j, [None, 4])
    sch.split(jj, [None, 4])
    sch.blockize([sch.get_block("B"), sch.get_block("C")], preserve_unit_iters=False)


def merge_then_blockize(sch):
    """Blocks straight under the merged loop: the inner blocks get no iter vars."""
    merge_inner(sch)
    sch.blockize([sch.get_block("B"), sch.get_block("C")])


CASES = {
    "merge_inner": (lambda: chain_func(8), merge_inner),
    "merge_outer": (lambda: chain_func(8), merge_outer),
    "merge_under_loop": (lambda: shared_outer_loop_func(8), merge_under_loop),
    "blockize_blocks": (lambda: shared_outer_loop_func(8), blockize_blocks),
    "blockize_blocks_tiled": (lambda: shared_outer_loop_func(8), blockize_blocks_tiled),
    "merge_then_blockize": (lambda: chain_func(8), merge_then_blockize),
}

EXPECTED = {
    "merge_inner": """\
    B = T.alloc_buffer((8, 8))
    C = T.alloc_buffer((8, 8))
    for i_m, j_m in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i_m, j_m])
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i_m, j_m])
            T.reads(B[vi, vj])
            T.writes(C[vi, vj])
            C[vi, vj] = B[vi, vj] + T.float32(1)
    for i, j in T.grid(8, 8):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(C[vi, vj])
            T.writes(D[vi, vj])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))""",
    "merge_outer": """\
    B = T.alloc_buffer((8, 8))
    C = T.alloc_buffer((8, 8))
    for i_m in range(8):
        for j in range(8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i_m, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for j in range(8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i_m, j])
                T.reads(B[vi, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = B[vi, vj] + T.float32(1)
    for i, j in T.grid(8, 8):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(C[vi, vj])
            T.writes(D[vi, vj])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))""",
    "merge_under_loop": """\
    for i, j_m in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j_m])
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j_m])
            T.reads(B[vi, vj])
            T.writes(C[vi, vj])
            C[vi, vj] = B[vi, vj] * T.float32(2)""",
    "blockize_blocks": """\
    for i in range(8):
        with T.block("outer_B_C_"):
            vi_o = T.axis.spatial(8, i)
            vj_o = T.axis.spatial(1, 0)
            T.reads(A[vi_o, 0:8], B[vi_o, 0:8])
            T.writes(B[vi_o, 0:8], C[vi_o, 0:8])
            for j in range(8):
                with T.block("B"):
                    vj_i = T.axis.remap("S", [j])
                    T.reads(A[vi_o, vj_i])
                    T.writes(B[vi_o, vj_i])
                    B[vi_o, vj_i] = A[vi_o, vj_i] * T.float32(2)
            for jj in range(8):
                with T.block("C"):
                    vj_i = T.axis.remap("S", [jj])
                    T.reads(B[vi_o, vj_i])
                    T.writes(C[vi_o, vj_i])
                    C[vi_o, vj_i] = B[vi_o, vj_i] * T.float32(2)""",
    "blockize_blocks_tiled": """\
    for i in range(8):
        with T.block("outer_B_C_"):
            vi_o = T.axis.spatial(8, i)
            vj_o = T.axis.spatial(1, 0)
            T.reads(A[vi_o, 0:8], B[vi_o, 0:8])
            T.writes(B[vi_o, 0:8], C[vi_o, 0:8])
            for j_0, j_1 in T.grid(2, 4):
                with T.block("B"):
                    vj_i = T.axis.spatial(8, j_0 * 4 + j_1)
                    T.reads(A[vi_o, vj_i])
                    T.writes(B[vi_o, vj_i])
                    B[vi_o, vj_i] = A[vi_o, vj_i] * T.float32(2)
            for jj_0, jj_1 in T.grid(2, 4):
                with T.block("C"):
                    vj_i = T.axis.spatial(8, jj_0 * 4 + jj_1)
                    T.reads(B[vi_o, vj_i])
                    T.writes(C[vi_o, vj_i])
                    C[vi_o, vj_i] = B[vi_o, vj_i] * T.float32(2)""",
    "merge_then_blockize": """\
    B = T.alloc_buffer((8, 8))
    C = T.alloc_buffer((8, 8))
    for i_m, j_m in T.grid(8, 8):
        with T.block("outer_B_C_"):
            vi_o, vj_o = T.axis.remap("SS", [i_m, j_m])
            T.reads(A[vi_o, vj_o], B[vi_o, vj_o])
            T.writes(B[vi_o, vj_o], C[vi_o, vj_o])
            with T.block("B"):
                T.reads(A[vi_o, vj_o])
                T.writes(B[vi_o, vj_o])
                B[vi_o, vj_o] = A[vi_o, vj_o] * T.float32(2)
            with T.block("C"):
                T.reads(B[vi_o, vj_o])
                T.writes(C[vi_o, vj_o])
                C[vi_o, vj_o] = B[vi_o, vj_o] + T.float32(1)
    for i, j in T.grid(8, 8):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(C[vi, vj])
            T.writes(D[vi, vj])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))""",
}


def _body(sch: wb.Schedule) -> str:
    return sch.func.script().split('# with T.block("root"):\n', 1)[1]


@pytest.mark.parametrize("name", list(CASES))
def test_ir_after(name):
    make, schedule = CASES[name]
    sch = wb.Schedule(make())
    schedule(sch)
    assert _body(sch) == EXPECTED[name]


@pytest.mark.parametrize("name", list(CASES))
def test_trace_roundtrip(name):
    make, schedule = CASES[name]
    func = make()
    sch = wb.Schedule(func)
    schedule(sch)
    roundtrip_trace(sch, func)


@pytest.mark.parametrize("name", list(CASES))
def test_builds_and_verifies(name):
    make, schedule = CASES[name]
    func = make()
    sch = wb.Schedule(func)
    schedule(sch)
    assert_verifies(sch, func)


def test_trace_text_and_json():
    sch = wb.Schedule(chain_func(8))
    merge_then_blockize(sch)
    lines = sch.trace.lines()
    assert lines[4] == "l6 = sch.merge(l2, l5)"
    assert lines[-1] == "b9 = sch.blockize(target=[b7, b8], preserve_unit_iters=True)"
    insts = sch.trace.as_json_obj()[0]
    assert insts[4] == ["Merge", ["l2", "l5"], [], ["l6"]]
    assert insts[-1] == ["Blockize", [["b7", "b8"]], [1], ["b9"]]


def test_merge_returns_the_merged_loop_and_blockize_the_outer_block():
    sch = wb.Schedule(chain_func(8))
    _, jb = sch.get_loops(sch.get_block("B"))
    _, jc = sch.get_loops(sch.get_block("C"))
    m = sch.merge(jb, jc)
    assert sch.get(m).loop_var.name == "j_m"
    assert [sch.get(lp) for lp in sch.get_loops(sch.get_block("C"))][-1] is sch.get(m)
    outer = sch.blockize([sch.get_block("B"), sch.get_block("C")])
    assert sch.get(outer).name == "outer_B_C_"
    assert sch.get_loops(sch.get_block("B")) == []  # B's scope is now outer_B_C_


# --------------------------------------------------------------------------- refusals


def test_merge_fail_one_loop():
    sch = wb.Schedule(chain_func(8))
    _, j = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.merge(j), InvalidScheduleArgumentError, "j")


def test_merge_fail_duplicate_loop():
    sch = wb.Schedule(chain_func(8))
    _, j = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.merge(j, j), DuplicateLoopError, "j")


def test_merge_fail_nested_loops():
    sch = wb.Schedule(chain_func(8))
    i, j = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.merge(i, j), NestedLoopsError, "i", "j")


def test_merge_fail_depth_mismatch():
    sch = wb.Schedule(chain_func(8))
    ib, _ = sch.get_loops(sch.get_block("B"))
    _, jc = sch.get_loops(sch.get_block("C"))
    assert_schedule_error(sch, lambda: sch.merge(ib, jc), MergeDepthMismatchError, "i", "j")


def test_merge_fail_extent_mismatch():
    sch = wb.Schedule(chain_func(8))
    _, jb = sch.get_loops(sch.get_block("B"))
    _, jc = sch.get_loops(sch.get_block("C"))
    jb0, _ = sch.split(jb, [None, 2])
    assert_schedule_error(sch, lambda: sch.merge(jb0, jc), MergeExtentMismatchError, "j_0", "j")


def test_merge_fail_different_scopes():
    sch = wb.Schedule(chain_func(8))
    _, jb = sch.get_loops(sch.get_block("B"))
    _, jb1 = sch.split(jb, [None, 4])
    sch.blockize(jb1)
    _, jc = sch.get_loops(sch.get_block("C"))
    e = assert_schedule_error(
        sch, lambda: sch.merge(jb1, jc), LoopsInDifferentScopesError, "j_1", "B_o"
    )
    assert e.blocks == ("B_o",)


def test_merge_fail_not_only_child():
    sch = wb.Schedule(chain_func(8))
    ib, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), ib)
    _, jb = sch.get_loops(sch.get_block("B"))
    _, jd = sch.get_loops(sch.get_block("D"))
    assert_schedule_error(sch, lambda: sch.merge(jb, jd), NotSingleChildError, "i", "j")


def test_merge_fail_annotated_loop():
    sch = wb.Schedule(chain_func(8))
    _, jb = sch.get_loops(sch.get_block("B"))
    _, jc = sch.get_loops(sch.get_block("C"))
    sch.annotate(jc, "pragma_unroll", 1)
    assert_schedule_error(sch, lambda: sch.merge(jb, jc), AnnotatedLoopError, "j")


def test_merge_fail_stale_loop():
    sch = wb.Schedule(chain_func(8))
    _, jb = sch.get_loops(sch.get_block("B"))
    _, jc = sch.get_loops(sch.get_block("C"))
    sch.split(jb, [None, 2])
    assert_schedule_error(sch, lambda: sch.merge(jb, jc), StaleHandleError, "j")


def test_blockize_blocks_fail_one_block():
    sch = wb.Schedule(chain_func(8))
    b = sch.get_block("B")
    assert_schedule_error(sch, lambda: sch.blockize([b]), InvalidScheduleArgumentError, "B")


def test_blockize_blocks_fail_not_consecutive():
    sch = wb.Schedule(chain_func(8))
    b, d = sch.get_block("B"), sch.get_block("D")
    assert_schedule_error(sch, lambda: sch.blockize([b, d]), BlocksNotConsecutiveError, "B", "D")


def test_blockize_blocks_fail_different_scopes():
    sch = wb.Schedule(chain_func(8))
    _, jb = sch.get_loops(sch.get_block("B"))
    _, jb1 = sch.split(jb, [None, 4])
    sch.blockize(jb1)
    b, c = sch.get_block("B"), sch.get_block("C")
    assert_schedule_error(
        sch, lambda: sch.blockize([b, c]), BlocksInDifferentScopesError, "B", "B_o"
    )


def test_blockize_blocks_fail_not_perfect_nest():
    sch = wb.Schedule(chain_func(8))
    ib, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), ib)
    b, d = sch.get_block("B"), sch.get_block("D")
    assert_schedule_error(sch, lambda: sch.blockize([b, d]), NotSingleBlockError, "B")


def _mm_relu_merged() -> wb.Schedule:
    sch = wb.Schedule(mm_relu_func(16))
    iy = sch.get_loops(sch.get_block("Y"))[0]
    ic = sch.get_loops(sch.get_block("C"))[0]
    sch.merge(iy, ic)
    return sch


def test_blockize_blocks_fail_outer_binding_mismatch():
    sch = _mm_relu_merged()
    c, y = sch.get_block("C"), sch.get_block("Y")
    assert_schedule_error(sch, lambda: sch.blockize([c, y]), OuterBindingMismatchError, "Y", "C")


def test_blockize_blocks_fail_outer_reduction():
    sch = _mm_relu_merged()
    c, y = sch.get_block("C"), sch.get_block("Y")
    assert_schedule_error(sch, lambda: sch.blockize([y, c]), OuterReductionError, "Y")


# --------------------------------------------------------------------------- TVM


def _strip_regions(text: str) -> str:
    """The text without T.reads/T.writes lines: TVM leaves the outer block's regions
    unsimplified (``vi_o:vi_o + (vi_o + 1 - vi_o)``) in its own order."""
    return "\n".join(
        ln for ln in text.splitlines() if not ln.strip().startswith(("T.reads(", "T.writes("))
    )


# TVM 0.27 stops with an internal error (no ScheduleError) on blockize of blocks that
# sit straight in their common ancestor loop's body: it takes that loop for one of the
# inner loops. The case runs here only.
TVM_CASES = [n for n in CASES if n != "merge_then_blockize"]


@pytest.mark.tvm
@pytest.mark.parametrize("name", TVM_CASES)
def test_tvm_replays_the_trace_to_the_same_ir(name):
    """TVM 0.27 replays our tirx JSON trace; its result, read back, is our IR (merge:
    TVM-structurally equal as is; blockize: up to the outer block's regions)."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    make, schedule = CASES[name]
    func = make()
    ours = wb.Schedule(func)
    schedule(ours)
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    theirs = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(
        ours.trace.as_json_obj(syntax="tirx"), theirs
    )
    back = wb.from_script(theirs.mod.script())
    assert _strip_regions(back.script()) == _strip_regions(ours.mod.script())
    if "blockize" not in name:
        tvm.ir.assert_structural_equal(
            tvm.script.from_source(ours.mod.script(syntax="tirx")), theirs.mod
        )
