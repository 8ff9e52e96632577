"""reindex, reindex_cache_read and reindex_cache_write.

Per case: the function body after the primitive equals the IR written out below
(checked against TVM 0.27's result for the same schedule), the trace replays (JSON and
Python text) to the same IR, and the scheduled function computes what the unscheduled
one does. Then one ``test_<prim>_fail_<reason>`` per refusal, and TVM replaying our
JSON trace to the same IR where apache-tvm is installed.
"""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.schedule.errors import InvalidScheduleArgumentError, TraceError
from workbench.schedule.primitives.cache import (
    BufferIndexOutOfRangeError,
    BufferNotAccessedError,
    InPlaceUpdateError,
    InvalidStorageScopeError,
    NotSingleWriteBlockError,
)
from workbench.schedule.primitives.reduction import NotStagePipelineError
from workbench.schedule.primitives.reindex import (
    AmbiguousBufferNameError,
    BufferAccessNotFoundError,
    BufferReadAndWrittenError,
    NonUniqueBufferAccessError,
    NotLeafBlockError,
    NotLoopChainError,
    OpaqueBufferAccessError,
)
from workbench.schedule.primitives.reindex_cache import (
    NotSinglePointAccessError,
    ReindexCacheMismatchError,
)
from workbench.testing import assert_schedule_error, assert_verifies, roundtrip_trace

TRANSPOSE = '''
@T.prim_func
def transpose(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi] * T.float32(2)
'''

ROWSUM = '''
@T.prim_func
def rowsum(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 4):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk] * T.float32(2)
'''

CHAIN = '''
@T.prim_func
def chain(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,))
    for i in range(4):
        for j in range(4):
            with T.block("B"):
                vi = T.axis.spatial(16, i * 4 + j)
                B[vi] = A[vi] + T.float32(1)
        for j in range(4):
            with T.block("C"):
                vi = T.axis.spatial(16, i * 4 + j)
                C[vi] = B[vi] * T.float32(3)
'''


CONV = '''
@T.prim_func
def conv(I: T.Buffer((1, 6, 6, 2), "float32"), W: T.Buffer((3, 3, 2, 4), "float32"),
         O: T.Buffer((1, 4, 4, 4), "float32")):
    for n, h, w, co, rh, rw, rc in T.grid(1, 4, 4, 4, 3, 3, 2):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vrc = T.axis.remap("SSSSRRR", [n, h, w, co, rh, rw, rc])
            with T.init():
                O[vn, vh, vw, vco] = T.float32(0)
            O[vn, vh, vw, vco] = O[vn, vh, vw, vco] + I[vn, vh + vrh, vw + vrw, vrc] * W[
                vrh, vrw, vrc, vco]
'''


def _func(text: str) -> wb.PrimFunc:
    return wb.from_script(text)


# --------------------------------------------------------------------------- cases

CASES = {
    # read of a transposed input: the copy reads A[v1, v0], the block A_reindex[vi, vj]
    "reindex_read": (TRANSPOSE, lambda s: s.reindex("B", ("read", 0))),
    # the output of a reduction: the reduce iter var vk gets no dimension and no loop
    "reindex_write_reduction": (ROWSUM, lambda s: s.reindex(s.get_block("C"), "C")),
    "reindex_read_reduction": (ROWSUM, lambda s: s.reindex("C", ("read", 0))),
    # a conv weight W[rh, rw, rc, co]: laid out by (co, rh, rw, rc), n/h/w dropped
    "reindex_conv_weight": (CONV, lambda s: s.reindex("conv", "W")),
    # B's producer sits in the same loop i: the copy goes between, over loop j only
    "reindex_cache_read_after_producer": (
        CHAIN, lambda s: s.reindex_cache_read("C", 0, "shared", lambda i: (i // 8, i % 8))),
    "reindex_cache_read": (
        TRANSPOSE,
        lambda s: s.reindex_cache_read("B", 0, "shared", lambda i, j: (j, i // 2, i % 2))),
    "reindex_cache_write": (
        ROWSUM, lambda s: s.reindex_cache_write("C", 0, "local", lambda i, k: (i // 4, i % 4))),
    # the cache's copy goes between the writer and its reader, inside loop i
    "reindex_cache_write_before_reader": (
        CHAIN, lambda s: s.reindex_cache_write("B", 0, "local", "lambda i: (i % 4, i // 4)")),
}

EXPECTED = {
    "reindex_read": """\
    A_reindex = T.alloc_buffer((8, 8))
    for ax0, ax1 in T.grid(8, 8):
        with T.block("A_reindex_reindex"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(A[v1, v0])
            T.writes(A_reindex[v0, v1])
            A_reindex[v0, v1] = A[v1, v0]
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A_reindex[vi, vj])
            T.writes(B[vi, vj])
            B[vi, vj] = A_reindex[vi, vj] * T.float32(2)""",
    "reindex_write_reduction": """\
    C_reindex = T.alloc_buffer((8,))
    for i, k in T.grid(8, 4):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(C_reindex[vi])
            with T.init():
                C_reindex[vi] = T.float32(0)
            C_reindex[vi] = C_reindex[vi] + A[vi, vk] * T.float32(2)
    for ax0 in range(8):
        with T.block("C_reindex"):
            v0 = T.axis.remap("S", [ax0])
            T.reads(C_reindex[v0])
            T.writes(C[v0])
            C[v0] = C_reindex[v0]""",
    "reindex_read_reduction": """\
    A_reindex = T.alloc_buffer((8, 4))
    for ax0, ax1 in T.grid(8, 4):
        with T.block("A_reindex_reindex"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(A[v0, v1])
            T.writes(A_reindex[v0, v1])
            A_reindex[v0, v1] = A[v0, v1]
    for i, k in T.grid(8, 4):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A_reindex[vi, vk])
            T.writes(C[vi])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A_reindex[vi, vk] * T.float32(2)""",
    "reindex_conv_weight": """\
    W_reindex = T.alloc_buffer((4, 3, 3, 2))
    for ax0, ax1, ax2, ax3 in T.grid(4, 3, 3, 2):
        with T.block("W_reindex_reindex"):
            v0, v1, v2, v3 = T.axis.remap("SSSS", [ax0, ax1, ax2, ax3])
            T.reads(W[v1, v2, v3, v0])
            T.writes(W_reindex[v0, v1, v2, v3])
            W_reindex[v0, v1, v2, v3] = W[v1, v2, v3, v0]
    for n, h, w, co, rh, rw, rc in T.grid(1, 4, 4, 4, 3, 3, 2):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vrc = T.axis.remap("SSSSRRR", [n, h, w, co, rh, rw, rc])
            T.reads(I[vn, vh + vrh, vw + vrw, vrc], W_reindex[vco, vrh, vrw, vrc])
            T.writes(O[vn, vh, vw, vco])
            with T.init():
                O[vn, vh, vw, vco] = T.float32(0)
            O[vn, vh, vw, vco] = O[vn, vh, vw, vco] + I[vn, vh + vrh, vw + vrw, vrc] * W_reindex[vco, vrh, vrw, vrc]""",  # noqa: E501
    "reindex_cache_read_after_producer": """\
    B = T.alloc_buffer((16,))
    B_shared = T.alloc_buffer((2, 8), scope="shared")
    for i in range(4):
        for j in range(4):
            with T.block("B"):
                vi = T.axis.spatial(16, i * 4 + j)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] + T.float32(1)
        for j in range(4):
            with T.block("B_shared"):
                vi = T.axis.spatial(16, i * 4 + j)
                T.reads(B[vi])
                T.writes(B_shared[vi // 8, vi % 8])
                B_shared[vi // 8, vi % 8] = B[vi]
        for j in range(4):
            with T.block("C"):
                vi = T.axis.spatial(16, i * 4 + j)
                T.reads(B_shared[vi // 8, vi % 8])
                T.writes(C[vi])
                C[vi] = B_shared[vi // 8, vi % 8] * T.float32(3)""",
    "reindex_cache_read": """\
    A_shared = T.alloc_buffer((8, 4, 2), scope="shared")
    for i, j in T.grid(8, 8):
        with T.block("A_shared"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vj, vi])
            T.writes(A_shared[vj, vi // 2, vi % 2])
            A_shared[vj, vi // 2, vi % 2] = A[vj, vi]
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A_shared[vj, vi // 2, vi % 2])
            T.writes(B[vi, vj])
            B[vi, vj] = A_shared[vj, vi // 2, vi % 2] * T.float32(2)""",
    "reindex_cache_write": """\
    C_local = T.alloc_buffer((2, 4), scope="local")
    for i, k in T.grid(8, 4):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(C_local[vi // 4, vi % 4])
            with T.init():
                C_local[vi // 4, vi % 4] = T.float32(0)
            C_local[vi // 4, vi % 4] = C_local[vi // 4, vi % 4] + A[vi, vk] * T.float32(2)
    for i in range(8):
        with T.block("C_local"):
            vi = T.axis.remap("S", [i])
            T.reads(C_local[vi // 4, vi % 4])
            T.writes(C[vi])
            C[vi] = C_local[vi // 4, vi % 4]""",
    "reindex_cache_write_before_reader": """\
    B = T.alloc_buffer((16,))
    B_local = T.alloc_buffer((4, 4), scope="local")
    for i in range(4):
        for j in range(4):
            with T.block("B"):
                vi = T.axis.spatial(16, i * 4 + j)
                T.reads(A[vi])
                T.writes(B_local[vi % 4, vi // 4])
                B_local[vi % 4, vi // 4] = A[vi] + T.float32(1)
        for j in range(4):
            with T.block("B_local"):
                vi = T.axis.spatial(16, i * 4 + j)
                T.reads(B_local[vi % 4, vi // 4])
                T.writes(B[vi])
                B[vi] = B_local[vi % 4, vi // 4]
        for j in range(4):
            with T.block("C"):
                vi = T.axis.spatial(16, i * 4 + j)
                T.reads(B[vi])
                T.writes(C[vi])
                C[vi] = B[vi] * T.float32(3)""",
}


def _body(sch: wb.Schedule) -> str:
    return sch.func.script().split('# with T.block("root"):\n', 1)[1]


@pytest.mark.parametrize("name", list(CASES))
def test_ir_after(name):
    text, schedule = CASES[name]
    sch = wb.Schedule(_func(text))
    schedule(sch)
    assert _body(sch) == EXPECTED[name]


@pytest.mark.parametrize("name", list(CASES))
def test_trace_roundtrip(name):
    text, schedule = CASES[name]
    func = _func(text)
    sch = wb.Schedule(func)
    schedule(sch)
    roundtrip_trace(sch, func)


@pytest.mark.parametrize("name", list(CASES))
def test_builds_and_verifies(name):
    text, schedule = CASES[name]
    func = _func(text)
    sch = wb.Schedule(func)
    schedule(sch)
    assert_verifies(sch, func)


def test_reindex_then_reorder_the_copy_builds():
    """The point of reindex: the copy's loops are scheduled apart from the block's."""
    func = wb.workloads.matmul(16, 16, 16)
    sch = wb.Schedule(func)
    a = sch.reindex("C", ("read", 0))
    c = sch.reindex("C", ("write", 0))
    i, k = sch.get_loops(a)
    sch.reorder(k, i)
    sch.parallel(sch.get_loops(c)[0])
    assert [lp.loop_var.name for lp in map(sch.get, sch.get_loops(a))] == ["ax1", "ax0"]
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_trace_text_and_json():
    sch = wb.Schedule(_func(TRANSPOSE))
    sch.reindex("B", "A")
    sch.reindex_cache_write("B", 0, "local", lambda i, j: (j, i))
    lines = sch.trace.lines()
    assert lines[1] == 'b1 = sch.reindex(block=b0, buffer=("read", 0))'
    assert lines[3] == ('b3 = sch.reindex_cache_write(block=b2, write_buffer_index=0, '
                        'storage_scope="local", index_map=lambda i, j: (j, i,))')
    insts = sch.trace.as_json_obj(syntax="tirx")[0]
    assert insts[1] == ["ReIndex", ["b0"], [0, 0], ["b1"]]
    kind, inputs, attrs, outs = insts[3]
    assert (kind, inputs[0], attrs, outs) == ("ReindexCacheWrite", "b2", [0, "local"], ["b3"])
    assert wb.IndexMap.from_json(inputs[1]).is_equivalent_to(
        wb.IndexMap.parse("lambda i, j: (j, i)"))


def test_reindex_buffer_forms_agree():
    """("read", i), the buffer's name and the Buffer itself name the same buffer; a
    buffer both read and written counts as written (as TVM's Python API has it)."""
    func = _func(TRANSPOSE)
    results = []
    for buffer in (("read", 0), "A", func.params[0]):
        sch = wb.Schedule(func)
        sch.reindex("B", buffer)
        results.append(sch.mod.script())
    assert results[0] == results[1] == results[2]
    from workbench.schedule.primitives.reindex import buffer_arg

    f = wb.from_script('''
@T.prim_func
def accumulate(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = C[vi] + A[vi]
''')
    block = f.body.body.body
    assert [r.buffer.name for r in block.reads] == ["C", "A"]
    assert buffer_arg(f, "reindex", "C", "C") == ("write", 0)


def test_reindex_cache_read_only_rewrites_the_block():
    """Other readers of the buffer keep reading it (TVM's single-consumer rule)."""
    sch = wb.Schedule(wb.workloads.mm_relu(8, 8, 8))
    sch.reindex_cache_read("C", 0, "local", lambda i, j: (j, i))
    reads = {b.name: [r.buffer.name for r in b.reads] for b in wb.ir.iter_blocks(sch.func.body)}
    assert reads["C"] == ["Y_local"] and reads["Y_local"] == ["Y"]


# --------------------------------------------------------------------------- refusals


def test_reindex_fail_two_indices():
    sch = wb.Schedule(_func(TRANSPOSE.replace("A[vj, vi] * T.float32(2)", "A[vj, vi] + A[vi, vj]")))
    assert_schedule_error(sch, lambda: sch.reindex("B", ("read", 0)),
                          NonUniqueBufferAccessError, "B")


def test_reindex_fail_not_leaf():
    sch = wb.Schedule(_func(TRANSPOSE))
    _, j = sch.get_loops(sch.get_block("B"))
    outer = sch.blockize(j)
    assert_schedule_error(sch, lambda: sch.reindex(outer, ("read", 0)), NotLeafBlockError, "B_o")


OPAQUE = '''
@T.prim_func
def opaque(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            T.reads(A[0:8])
            T.writes(B[vi])
            T.evaluate(T.call_extern("int32", "touch", A.data))
            B[vi] = T.float32(1)
'''

MATCHED = '''
@T.prim_func
def matched(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            row = T.match_buffer(A[vi, 0:8], (8,))
            for j in range(8):
                B[vi, j] = row[j]
'''


def test_reindex_fail_opaque_access():
    sch = wb.Schedule(_func(OPAQUE))
    assert_schedule_error(sch, lambda: sch.reindex("B", "A"), OpaqueBufferAccessError, "B")


def test_reindex_fail_no_load_or_store():
    sch = wb.Schedule(_func(MATCHED))
    assert_schedule_error(sch, lambda: sch.reindex("B", "A"), BufferAccessNotFoundError, "B")


def test_reindex_fail_loops_not_a_chain():
    sch = wb.Schedule(wb.workloads.mm_relu(8, 8, 8))
    i = sch.get_loops(sch.get_block("Y"))[0]
    sch.reverse_compute_at(sch.get_block("C"), i)
    e = assert_schedule_error(sch, lambda: sch.reindex("Y", ("read", 0)), NotLoopChainError,
                              "Y", "i")
    assert "holds other statements" in str(e)


def test_reindex_fail_no_loop():
    func = wb.from_script('''
@T.prim_func
def single(A: T.Buffer((1,), "float32"), B: T.Buffer((1,), "float32")):
    with T.block("B"):
        B[0] = A[0] + T.float32(1)
''')
    sch = wb.Schedule(func)
    assert_schedule_error(sch, lambda: sch.reindex("B", ("read", 0)), NotLoopChainError, "B")


WAR = '''
@T.prim_func
def war(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi]
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
'''


def test_reindex_fail_not_stage_pipeline():
    sch = wb.Schedule(_func(WAR))
    assert_schedule_error(sch, lambda: sch.reindex("B", ("read", 0)), NotStagePipelineError, "B")


def test_reindex_fail_buffer_index_out_of_range():
    sch = wb.Schedule(_func(TRANSPOSE))
    assert_schedule_error(sch, lambda: sch.reindex("B", ("read", 3)),
                          BufferIndexOutOfRangeError, "B")


def test_reindex_fail_unknown_buffer_name():
    sch = wb.Schedule(_func(TRANSPOSE))
    assert_schedule_error(sch, lambda: sch.reindex("B", "Q"), BufferNotAccessedError, "B")


def test_reindex_fail_bad_buffer_argument():
    sch = wb.Schedule(_func(TRANSPOSE))
    assert_schedule_error(sch, lambda: sch.reindex("B", ("both", 0)),
                          InvalidScheduleArgumentError, "B")


def test_reindex_fail_ambiguous_name():
    A1 = wb.Buffer("A", (8,))
    A2 = wb.Buffer("A", (8,))
    i = wb.Var("i")
    vi = wb.Var("vi")
    body = wb.ir.BufferStore(A2, A1[vi] + wb.ir.const(1.0), (vi,))
    block = wb.ir.Block("B", (wb.ir.IterVar(vi, 8),), (i,), body)
    root = wb.ir.Block("root", (), (), wb.ir.For(i, 8, "serial", block))
    sch = wb.Schedule(wb.PrimFunc("twins", (A1, A2), root))
    assert_schedule_error(sch, lambda: sch.reindex("B", "A"), AmbiguousBufferNameError, "B")


ACCUMULATE = '''
@T.prim_func
def accumulate(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = C[vi] + A[vi]
'''


def _decomposed_matmul() -> tuple[wb.PrimFunc, wb.Schedule]:
    func = wb.workloads.matmul(8, 8, 8)
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    sch.decompose_reduction(c, sch.get_loops(c)[0])
    return func, sch


@pytest.mark.parametrize("case", ["decomposed_matmul", "in_place_accumulate"])
def test_reindex_fail_read_of_a_buffer_the_block_writes(case):
    """Reindexing the read of C by ``C[i, j] = C[i, j] + A[i, k] * B[k, j]`` moves the
    store to C_reindex as well, and nothing copies C_reindex back into C (TVM 0.27 makes
    that IR and leaves C as C_init wrote it). cache_inplace copies back and works."""
    if case == "decomposed_matmul":
        func, sch = _decomposed_matmul()
        block = "C_update"
    else:
        func = _func(ACCUMULATE)
        sch = wb.Schedule(func)
        block = "C"
    assert [r.buffer.name for r in sch.get(sch.get_block(block)).reads][0] == "C"
    e = assert_schedule_error(sch, lambda: sch.reindex(block, ("read", 0)),
                              BufferReadAndWrittenError, block)
    assert str(e).startswith(f'reindex: block "{block}" reads and writes buffer "C"'), str(e)
    sch.cache_inplace(block, "C", "global")
    assert_verifies(sch, func)


def test_reindex_of_the_write_before_decompose_reduction_still_works():
    """What the refusal above suggests: reindex C's write while the block has its init."""
    func = wb.workloads.matmul(8, 8, 8)
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    sch.reindex(c, "C")
    sch.decompose_reduction(c, sch.get_loops(c)[0])
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


@pytest.mark.tvm
def test_tvm_reindex_of_a_read_the_block_writes_miscomputes():
    """Why we refuse: TVM 0.27 accepts the same reindex and its C is never written
    past C_init (all zeros), so the product is lost."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    import numpy as np

    func = wb.workloads.matmul(8, 8, 8)
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    sch = tvm.s_tir.Schedule(mod)
    sch.work_on(func.name)
    c = sch.get_sblock("C")
    sch.decompose_reduction(c, sch.get_loops(c)[0])
    sch.reindex(sch.get_sblock("C_update"), ("read", 0))
    lib = tvm.compile(sch.mod, target="llvm")
    rng = np.random.default_rng(0)
    a, b = (rng.random((8, 8), dtype="float32") + 0.5 for _ in range(2))
    out = tvm.runtime.tensor(np.full((8, 8), 7, "float32"))
    lib[func.name](tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
    assert not np.allclose(out.numpy(), a @ b)
    assert not out.numpy().any()


def test_reindex_cache_read_fail_not_single_point():
    sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
    _, j, _ = sch.get_loops(sch.get_block("C"))
    outer = sch.blockize(j)
    assert_schedule_error(
        sch, lambda: sch.reindex_cache_read(outer, 0, "shared", lambda i: (i,)),
        NotSinglePointAccessError, "C_o")


def test_reindex_cache_read_fail_iter_vars_do_not_match():
    sch = wb.Schedule(_func(TRANSPOSE))
    e = assert_schedule_error(
        sch, lambda: sch.reindex_cache_read("B", 0, "shared", lambda i, j: j * 2),
        ReindexCacheMismatchError, "B")
    assert "vi" in str(e)


def test_reindex_cache_write_fail_iter_vars_do_not_match():
    sch = wb.Schedule(_func(ROWSUM))
    assert_schedule_error(
        sch, lambda: sch.reindex_cache_write("C", 0, "shared", lambda i, k: (i, k)),
        ReindexCacheMismatchError, "C")


def test_reindex_cache_read_fail_map_arity():
    sch = wb.Schedule(_func(TRANSPOSE))
    assert_schedule_error(
        sch, lambda: sch.reindex_cache_read("B", 0, "shared", lambda i: (i,)),
        InvalidScheduleArgumentError, "B")


def test_reindex_cache_read_fail_unreadable_map_text():
    sch = wb.Schedule(_func(TRANSPOSE))
    assert_schedule_error(
        sch, lambda: sch.reindex_cache_read("B", 0, "shared", "lambda i, j: open(i)"),
        InvalidScheduleArgumentError, "B")


def test_reindex_cache_read_fail_storage_scope():
    sch = wb.Schedule(_func(TRANSPOSE))
    assert_schedule_error(
        sch, lambda: sch.reindex_cache_read("B", 0, "texture", lambda i, j: (j, i)),
        InvalidStorageScopeError, "B")


def test_reindex_cache_read_fail_two_writers():
    text = CHAIN.replace('''        for j in range(4):
            with T.block("C"):''', '''        for j in range(4):
            with T.block("B2"):
                vi = T.axis.spatial(16, i * 4 + j)
                B[vi] = B[vi] * T.float32(2)
        for j in range(4):
            with T.block("C"):''')
    sch = wb.Schedule(_func(text))
    assert_schedule_error(
        sch, lambda: sch.reindex_cache_read("C", 0, "shared", lambda i: (i,)),
        NotSingleWriteBlockError, "C")


def test_reindex_cache_write_fail_in_place_update():
    """The block adds to what the caller passed in C: a fresh cache would start from
    garbage (TVM accepts it; cache_write refuses it too)."""
    sch = wb.Schedule(wb.from_script('''
@T.prim_func
def accumulate(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = C[vi] + A[vi]
'''))
    assert_schedule_error(
        sch, lambda: sch.reindex_cache_write("C", 0, "local", lambda i: (i,)),
        InPlaceUpdateError, "C")


def test_reindex_cache_fail_not_stage_pipeline():
    sch = wb.Schedule(_func(WAR))
    assert_schedule_error(
        sch, lambda: sch.reindex_cache_read("C", 0, "shared", lambda i: (i,)),
        NotStagePipelineError, "C")


def test_reindex_trace_fail_bad_buffer_text():
    text = wb.Schedule(_func(TRANSPOSE))
    text.reindex("B", ("read", 0))
    bad = text.trace.script().replace('("read", 0)', '("sideways", 0)')
    with pytest.raises(TraceError, match="reindex"):
        wb.Trace.from_python(bad)


# --------------------------------------------------------------------------- TVM


def _tvm_same(ours: wb.Schedule, func: wb.PrimFunc) -> None:
    """TVM 0.27 replays our tirx JSON trace on the unscheduled function and gets an IR
    structurally equal to ours (block names aside, which TVM does not compare)."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    theirs = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(
        ours.trace.as_json_obj(syntax="tirx"), theirs)
    tvm.ir.assert_structural_equal(
        tvm.script.from_source(ours.mod.script(syntax="tirx")), theirs.mod)


@pytest.mark.tvm
@pytest.mark.parametrize("name", list(CASES))
def test_tvm_replays_the_trace_to_the_same_ir(name):
    text, schedule = CASES[name]
    func = _func(text)
    sch = wb.Schedule(func)
    schedule(sch)
    _tvm_same(sch, func)


@pytest.mark.parametrize("primitive", ["reindex", "reindex_cache_read", "read_at"])
def test_copy_of_a_conditional_read_is_refused(primitive):
    """``pad`` reads ``A[vi - 2]`` only where ``2 <= vi < 10``: an unconditional copy over
    its iteration would read ``A[-2]`` (TVM makes that copy). cache_read, whose copy covers
    only ``A``, still works."""
    from workbench.schedule.primitives.reindex import ConditionalReadError
    from workbench.testing import padded_func

    func = padded_func(8, 2)
    sch = wb.Schedule(func)
    pad = sch.get_block("pad")
    (i,) = sch.get_loops(pad)
    calls = {
        "reindex": lambda: sch.reindex(pad, ("read", 0)),
        "reindex_cache_read": lambda: sch.reindex_cache_read(pad, 0, "global", "lambda vi: (vi,)"),
        "read_at": lambda: sch.read_at(i, pad, 0, "global"),
    }
    err = assert_schedule_error(sch, calls[primitive], ConditionalReadError, "pad")
    assert "only where a condition holds" in str(err)
    sch.cache_read(pad, 0, "global")
    assert_verifies(sch, func)


# --------------------------------------------------------------------------- index by inner loops


def _read_at_copy_of_relu() -> tuple[wb.PrimFunc, wb.Schedule]:
    """elementwise_chain with ``read_at`` copying relu's rows for batch_norm: the copy
    block "relu_global" reads ``relu[v0 + ax0, ax1]`` through loops inside its body."""
    func = wb.workloads.elementwise_chain(8, 4)
    sch = wb.Schedule(func)
    relu = sch.get_block("relu")
    sch.fuse(*sch.get_loops(relu), preserve_unit_iters=False)
    bn = sch.get_block("batch_norm")
    sch.read_at(sch.get_loops(bn)[0], bn, 0, "global")
    return func, sch


def test_reindex_fail_index_uses_loops_inside_the_block():
    """The copy outside the block would use ax0/ax1 out of their loops (the C build
    failed with "variable 'ax0' is used outside the loop/block binding it")."""
    from workbench.schedule.primitives.reindex import IndexNotByIterVarsError

    func, sch = _read_at_copy_of_relu()
    copy = sch.get_block("relu_global")
    err = assert_schedule_error(
        sch, lambda: sch.reindex(copy, ("read", 0)), IndexNotByIterVarsError,
        "relu_global", "relu", "ax0", "ax1")
    assert "bound inside the block" in str(err)
    sch.cache_read(copy, 0, "global")  # what the message suggests still works
    assert_verifies(sch, func)


def test_reindex_of_a_block_with_a_loop_its_index_does_not_use_still_works():
    """A loop inside the block is fine when the buffer's index uses only iter vars."""
    func = _func('''
@T.prim_func
def spread(A: T.Buffer((8,), "float32"), B: T.Buffer((8, 4), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            for k in range(4):
                B[vi, k] = A[vi] * T.float32(2)
''')
    sch = wb.Schedule(func)
    sch.reindex("B", ("read", 0))
    assert [b.name for b in sch.mod[func.name].body.alloc_buffers] == ["A_reindex"]
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_reindex_fail_index_uses_a_loop_of_a_block_it_is_not_a_copy_of():
    from workbench.schedule.primitives.reindex import IndexNotByIterVarsError

    sch = wb.Schedule(_func('''
@T.prim_func
def spread(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            for k in range(4):
                B[vi, k] = A[vi, 3 - k] * T.float32(2)
'''))
    assert_schedule_error(sch, lambda: sch.reindex("B", ("read", 0)),
                          IndexNotByIterVarsError, "B", "A", "k")
    assert_schedule_error(sch, lambda: sch.reindex("B", ("write", 0)),
                          IndexNotByIterVarsError, "B", "k")


@pytest.mark.tvm
def test_tvm_reindex_of_a_read_at_copy_makes_ir_that_does_not_build():
    """Why we refuse: TVM 0.27 accepts the same reindex, and its copy block uses the
    copy's inner loop vars unbound, so TVM's own build rejects the module."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    func = wb.workloads.elementwise_chain(8, 4)
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    sch = tvm.s_tir.Schedule(mod)
    sch.work_on(func.name)
    relu = sch.get_sblock("relu")
    sch.fuse(*sch.get_loops(relu), preserve_unit_iters=False)
    bn = sch.get_sblock("batch_norm")
    copy = sch.read_at(sch.get_loops(bn)[0], bn, 0, "global")
    sch.reindex(copy, ("read", 0))
    with pytest.raises(Exception, match="used before definition"):
        tvm.compile(sch.mod, target="llvm")
