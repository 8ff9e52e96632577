"""rolling_buffer and fuse_reduction_epilogue.

Each schedule's IR is written out below (checked against TVM 0.27's output, which the
``tvm``-marked tests replay from our JSON trace); traces replay to the same IR; the C
build of the scheduled function computes what the original computes (for a clip/ReLU
epilogue: what TVM's fused form computes, the per-iteration clipped reduction). Then
one test per refusal.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.schedule.primitives.cache import BufferIndexOutOfRangeError
from workbench.schedule.primitives.compute_at import NotCompleteBlockError
from workbench.schedule.primitives.compute_inline import OutputBlockError
from workbench.schedule.primitives.fuse_epilogue import (
    EpilogueBodyError,
    EpilogueMismatchError,
    NonLinearEpilogueWarning,
    ReductionNotSingleWriteError,
    TempStillReadError,
)
from workbench.schedule.primitives.reduction import NotReductionBlockError
from workbench.schedule.primitives.rolling_buffer import (
    RollingBufferAlreadyRolledError,
    RollingBufferDependencyError,
    RollingBufferInsertionError,
    RollingBufferMatchError,
)
from workbench.testing import (
    assert_schedule_error,
    assert_verifies,
    ir_identical,
    matmul_bias_func,
    pool_chain_func,
    roundtrip_trace,
)

# --------------------------------------------------------------------------- rolling_buffer


def _tile_pool(sch):
    _, i, _ = sch.get_loops(sch.get_block("C"))
    io, _ = sch.split(i, [2, 4])
    sch.compute_at(sch.get_block("B"), io)


def _roll_pool(sch):
    _tile_pool(sch)
    sch.rolling_buffer(sch.get_block("B"), 0)


ROLLED_POOL = """
@T.prim_func
def pool(A: T.Buffer((4, 12), "int32"), C: T.Buffer((4, 8), "int32")):
    B = T.alloc_buffer((4, 6), "int32")
    for c, i_0 in T.grid(4, 2):
        for ax0, ax1 in T.grid(6, 3):
            with T.block("B"):
                vc = T.axis.spatial(4, c)
                vi = T.axis.opaque(10, i_0 * 4 + ax0)
                vk = T.axis.reduce(3, ax1)
                T.where(i_0 < 1 or 2 <= ax0)
                with T.init():
                    B[vc, vi % 6] = 0
                B[vc, vi % 6] = B[vc, vi % 6] + A[vc, vi + vk]
        for i_1, k in T.grid(4, 3):
            with T.block("C"):
                vc = T.axis.spatial(4, c)
                vi = T.axis.opaque(8, i_0 * 4 + i_1)
                vk = T.axis.reduce(3, k)
                with T.init():
                    C[vc, vi] = 0
                C[vc, vi] = C[vc, vi] + B[vc, (vi + vk) % 6]
"""

POOL2D = """
@T.prim_func
def pool2d(A: T.Buffer((10, 9), "float32"), C: T.Buffer((8, 7), "float32")):
    B = T.alloc_buffer((9, 8))
    for i, j, ri, rj in T.grid(9, 8, 2, 2):
        with T.block("B"):
            vi, vj, vri, vrj = T.axis.remap("SSRR", [i, j, ri, rj])
            with T.init():
                B[vi, vj] = T.float32(-1e30)
            B[vi, vj] = T.max(B[vi, vj], A[vi + vri, vj + vrj])
    for i, j, ri, rj in T.grid(8, 7, 2, 2):
        with T.block("C"):
            vi, vj, vri, vrj = T.axis.remap("SSRR", [i, j, ri, rj])
            with T.init():
                C[vi, vj] = T.float32(-1e30)
            C[vi, vj] = T.max(C[vi, vj], B[vi + vri, vj + vrj])
"""


def _roll_pool2d(sch):
    """Tiles of 3 x 4 outputs that do not divide the output: rows roll (the outer
    tile loop), columns overlap too and are not recomputed either."""
    i, j, _, _ = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 3])
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(io, jo, ii, ji)
    sch.compute_at(sch.get_block("B"), jo)
    sch.rolling_buffer(sch.get_block("B"), 0)


def test_rolling_buffer_before_after():
    sch = wb.Schedule(pool_chain_func())
    _roll_pool(sch)
    assert ir_identical(sch.mod["pool"], wb.from_script(ROLLED_POOL)) is None


def test_rolling_buffer_trace_and_numerics():
    func = pool_chain_func()
    sch = wb.Schedule(func)
    _roll_pool(sch)
    assert "sch.rolling_buffer(block=b" in str(sch.trace)
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)
    # the buffer stays outside the tile loop when lowered: it carries rows across tiles
    lowered = wb.lower(sch.mod).script()
    assert 'B = T.alloc_buffer((1, 6), "int32")' in lowered
    assert lowered.index("alloc_buffer") < lowered.index("for i_0 in range(2)")


def test_rolling_buffer_2d_partial_tiles_numerics():
    func = wb.from_script(POOL2D)
    sch = wb.Schedule(func)
    _roll_pool2d(sch)
    assert sch.mod["pool2d"].buffers["B"].shape == (4, 8)
    block = sch.get(sch.get_block("B"))
    assert "(i_0 < 1 or 1 <= ax0) and (j_0 < 1 or 1 <= ax1)" in block.script()
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_rolling_buffer_fail_not_tiled_with_consumer():
    sch = wb.Schedule(pool_chain_func())
    b = sch.get_block("B")
    assert_schedule_error(sch, lambda: sch.rolling_buffer(b, 0), RollingBufferInsertionError,
                          "B")


def test_rolling_buffer_fail_tiles_do_not_overlap():
    """A consumer that reads each element once: the windows of consecutive tiles do not
    overlap, so nothing rolls."""
    func = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi] + T.float32(1)
""")
    sch = wb.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("C"))
    io, _ = sch.split(i, [2, 4])
    sch.compute_at(sch.get_block("B"), io)
    b = sch.get_block("B")
    assert_schedule_error(sch, lambda: sch.rolling_buffer(b, 0), RollingBufferMatchError, "B")


def test_rolling_buffer_fail_second_writer():
    func = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((10,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((10,))
    for i_0 in range(2):
        for ax0 in range(6):
            with T.block("B"):
                vi = T.axis.spatial(10, i_0 * 4 + ax0)
                B[vi] = A[vi]
        for ax0 in range(6):
            with T.block("B2"):
                vi = T.axis.spatial(10, i_0 * 4 + ax0)
                B[vi] = B[vi] + A[vi]
        for i_1, k in T.grid(4, 3):
            with T.block("C"):
                vi = T.axis.spatial(8, i_0 * 4 + i_1)
                vk = T.axis.reduce(3, k)
                with T.init():
                    C[vi] = T.float32(0)
                C[vi] = C[vi] + B[vi + vk]
""")
    sch = wb.Schedule(func)
    b = sch.get_block("B")
    assert_schedule_error(sch, lambda: sch.rolling_buffer(b, 0), RollingBufferDependencyError,
                          "B", "B2")


def test_rolling_buffer_fail_output_block():
    sch = wb.Schedule(pool_chain_func())
    _tile_pool(sch)
    c = sch.get_block("C")
    assert_schedule_error(sch, lambda: sch.rolling_buffer(c, 0), OutputBlockError, "C")


def test_rolling_buffer_fail_buffer_index():
    sch = wb.Schedule(pool_chain_func())
    _tile_pool(sch)
    b = sch.get_block("B")
    assert_schedule_error(sch, lambda: sch.rolling_buffer(b, 1), BufferIndexOutOfRangeError,
                          "B")


def _roll_conv(sch):
    """``pad`` computed per output pixel: its window overlaps along rows and columns;
    the rows (the outer loop ``h``) roll."""
    _, _, _, w, _, _, _ = sch.get_loops(sch.get_block("conv"))
    sch.compute_at(sch.get_block("pad"), w)
    sch.rolling_buffer(sch.get_block("pad"), 0)


def _conv_small():
    return wb.workloads.conv2d_nchw(1, 2, 8, 8, 2)


@pytest.mark.parametrize("make, prepare, block", [
    (_conv_small, _roll_conv, "pad"),
    (lambda: wb.from_script(POOL2D), _roll_pool2d, "B"),
])
def test_rolling_buffer_fail_already_rolled(make, prepare, block):
    """Once rolled along the rows, the buffer's producer skips the rows the previous
    tile computed: rolling the columns too would overwrite them first (TVM 0.27 accepts
    it and computes a wrong convolution, see the ``tvm`` test below)."""
    func = make()
    sch = wb.Schedule(func)
    prepare(sch)
    b = sch.get_block(block)
    err = assert_schedule_error(sch, lambda: sch.rolling_buffer(b, 0),
                                RollingBufferAlreadyRolledError, block)
    assert "already a rolling buffer along axis" in str(err)
    assert_verifies(sch, func)


def test_rolling_buffer_second_time_on_one_axis_matches_nothing():
    """The 1-D pool has only one overlapping axis: a second application finds none
    (TVM's refusal too)."""
    sch = wb.Schedule(pool_chain_func())
    _roll_pool(sch)
    b = sch.get_block("B")
    assert_schedule_error(sch, lambda: sch.rolling_buffer(b, 0), RollingBufferMatchError, "B")


# --------------------------------------------------------------------------- epilogue

FUSED_BIAS = """
@T.prim_func
def matmul_bias(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
                Bias: T.Buffer((16, 16), "float32"), D: T.Buffer((16, 16), "float32")):
    C = T.alloc_buffer((16, 16))
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                D[vi, vj] = Bias[vi, vj]
            D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vk, vj]
"""

FUSED_RELU_INIT = "D[vi, vj] = T.max(Bias[vi, vj], T.float32(0))"
FUSED_RELU_UPDATE = "D[vi, vj] = T.max(D[vi, vj] + A[vi, vk] * B[vk, vj], T.float32(0))"


def _fuse(sch):
    sch.fuse_reduction_epilogue(sch.get_block("C"), sch.get_block("D"))


def test_fuse_reduction_epilogue_bias_before_after():
    sch = wb.Schedule(matmul_bias_func())
    _fuse(sch)
    assert ir_identical(sch.mod["matmul_bias"], wb.from_script(FUSED_BIAS)) is None


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_fuse_reduction_epilogue_bias_computes_the_same(dtype):
    func = matmul_bias_func(dtype=dtype)
    sch = wb.Schedule(func)
    _fuse(sch)
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


def test_fuse_reduction_epilogue_relu_is_applied_at_every_step():
    """As in TVM: the ReLU wraps the init and every update."""
    func = matmul_bias_func(8, relu=True)
    sch = wb.Schedule(func)
    with pytest.warns(NonLinearEpilogueWarning, match='block "D" clips the result'):
        _fuse(sch)
    text = sch.get(sch.get_block("C")).script()
    assert FUSED_RELU_INIT in text and FUSED_RELU_UPDATE in text
    rng = np.random.default_rng(0)
    a, b, bias = (rng.standard_normal((8, 8)).astype("float32") for _ in range(3))
    d = np.zeros((8, 8), "float32")
    wb.build(sch.mod)(a, b, bias, d)
    want = np.maximum(bias, 0)
    for k in range(8):
        want = np.maximum(want + np.outer(a[:, k], b[k, :]), 0)
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5)
    with pytest.warns(NonLinearEpilogueWarning):  # the replay warns as the schedule did
        roundtrip_trace(sch, func)


CLIP = """
@T.prim_func
def clip(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
         D: T.Buffer((8, 8), "float32")):
    temp = T.alloc_buffer((8, 8))
    for i, j, k in T.grid(8, 8, 8):
        with T.block("mm"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                temp[vi, vj] = T.float32(0)
            temp[vi, vj] = temp[vi, vj] + A[vi, vk] * B[vj, vk]
    for i, j in T.grid(8, 8):
        with T.block("clip"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(T.float32(-1), T.min(temp[vi, vj], T.float32(2)))
"""


def test_fuse_reduction_epilogue_clip_with_constants_folds_the_init():
    sch = wb.Schedule(wb.from_script(CLIP))
    with pytest.warns(NonLinearEpilogueWarning, match="after every update"):
        sch.fuse_reduction_epilogue("mm", "clip")
    block = sch.get(sch.get_block("mm"))
    assert block.init.script().strip() == "D[vi, vj] = T.float32(0)"
    assert "D[vi, vj] = T.max(T.float32(-1), T.min(D[vi, vj] + A[vi, vk] * B[vj, vk], " \
        "T.float32(2)))" in block.script()


def _epilogue_case(epilogue: str, extra: str = ""):
    return wb.from_script(f"""
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32"),
      D: T.Buffer((8, 8), "float32")):
    temp = T.alloc_buffer((8, 8))
    for i, j, k in T.grid(8, 8, 8):
        with T.block("mm"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                temp[vi, vj] = T.float32(0)
            temp[vi, vj] = temp[vi, vj] + A[vi, vk] * A[vk, vj]
    for i, j in T.grid(8, 8):
        with T.block("epi"):
            vi, vj = T.axis.remap("SS", [i, j])
{extra}            {epilogue}
""")


@pytest.mark.parametrize("epilogue, extra, cls, why", [
    ("D[vi, vj] = (temp[vi, vj] + C[vi, vj]) * (temp[vi, vj] + C[vi, vj])", "",
     EpilogueBodyError, "2 times"),
    ("D[vi, vj] = temp[vi, vj] * T.float32(2) + C[vi, vj]", "", EpilogueBodyError, "scales"),
    ("D[vi, vj] = temp[vi, vj] + C[vi, vj]", "            T.where(vi < 4)\n",
     EpilogueBodyError, "predicate"),
    ("D[vi, vj] = C[vi, vj]", "", EpilogueBodyError, "0 times"),
    ("D[vi, vj] = temp[vj, vi] + C[vi, vj]", "", EpilogueMismatchError, "other indices"),
])
def test_fuse_reduction_epilogue_fail_body(epilogue, extra, cls, why):
    sch = wb.Schedule(_epilogue_case(epilogue, extra))
    mm, epi = sch.get_block("mm"), sch.get_block("epi")
    err = assert_schedule_error(sch, lambda: sch.fuse_reduction_epilogue(mm, epi), cls, "epi")
    assert why in str(err)


def test_fuse_reduction_epilogue_bias_does_not_warn():
    import warnings

    sch = wb.Schedule(matmul_bias_func())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fuse(sch)


def test_fuse_reduction_epilogue_fail_result_read_by_another_block():
    """TVM fuses and leaves the second reader reading a buffer nothing writes."""
    func = wb.from_script(CLIP.replace(
        "D: T.Buffer((8, 8), \"float32\")):",
        "D: T.Buffer((8, 8), \"float32\"), E: T.Buffer((8, 8), \"float32\")):",
    ) + """    for i, j in T.grid(8, 8):
        with T.block("copy"):
            vi, vj = T.axis.remap("SS", [i, j])
            E[vi, vj] = temp[vi, vj]
""")
    sch = wb.Schedule(func)
    mm, clip = sch.get_block("mm"), sch.get_block("clip")
    err = assert_schedule_error(sch, lambda: sch.fuse_reduction_epilogue(mm, clip),
                                TempStillReadError, "copy")
    assert "nothing would write it" in str(err)


def test_fuse_reduction_epilogue_fail_not_a_reduction():
    func = wb.workloads.mm_relu(8, 8, 8)
    sch = wb.Schedule(func)
    sch.decompose_reduction(sch.get_block("Y"), sch.get_loops(sch.get_block("Y"))[2])
    init, relu = sch.get_block("Y_init"), sch.get_block("C")
    assert_schedule_error(sch, lambda: sch.fuse_reduction_epilogue(init, relu),
                          NotReductionBlockError, "Y_init")


def test_fuse_reduction_epilogue_fail_epilogue_not_complete():
    """A reduction as the 'epilogue' is no complete block."""
    func = wb.from_script(CLIP.replace(
        'D[vi, vj] = T.max(T.float32(-1), T.min(temp[vi, vj], T.float32(2)))',
        'D[vi, vj] = D[vi, vj] + temp[vi, vj]'))
    sch = wb.Schedule(func)
    mm, epi = sch.get_block("mm"), sch.get_block("clip")
    assert_schedule_error(sch, lambda: sch.fuse_reduction_epilogue(mm, epi),
                          NotCompleteBlockError, "clip")


def test_fuse_reduction_epilogue_fail_reduction_writes_an_output():
    func = wb.workloads.matmul(8, 8, 8)
    sch = wb.Schedule(func)
    sch.cache_read(sch.get_block("C"), 0, "global")  # a second block to name
    c, other = sch.get_block("C"), sch.get_block("A_global")
    assert_schedule_error(sch, lambda: sch.fuse_reduction_epilogue(c, other),
                          OutputBlockError, "C")


def test_fuse_reduction_epilogue_fail_two_outputs():
    func = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), D: T.Buffer((8,), "float32")):
    t = T.alloc_buffer((8,))
    u = T.alloc_buffer((8,))
    for i, k in T.grid(8, 8):
        with T.block("mm"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                t[vi] = T.float32(0)
                u[vi] = T.float32(0)
            t[vi] = t[vi] + A[vi, vk]
            u[vi] = u[vi] + A[vk, vi]
    for i in range(8):
        with T.block("epi"):
            vi = T.axis.spatial(8, i)
            D[vi] = t[vi] + u[vi]
""")
    sch = wb.Schedule(func)
    mm, epi = sch.get_block("mm"), sch.get_block("epi")
    assert_schedule_error(sch, lambda: sch.fuse_reduction_epilogue(mm, epi),
                          ReductionNotSingleWriteError, "mm")


# --------------------------------------------------------------------------- TVM


def _replay_in_tvm(func, schedule):
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    ours = wb.Schedule(func)
    schedule(ours)
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    theirs = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(ours.trace.as_json_obj(syntax="tirx"),
                                                    theirs)
    assert ir_identical(wb.from_script(theirs.mod.script()), ours.mod) is None


@pytest.mark.tvm
@pytest.mark.parametrize("make, schedule", [
    (pool_chain_func, _roll_pool),
    (lambda: wb.from_script(POOL2D), _roll_pool2d),
])
def test_tvm_replays_rolling_buffer(make, schedule):
    _replay_in_tvm(make(), schedule)


@pytest.mark.tvm
@pytest.mark.parametrize("make", [
    matmul_bias_func,
    lambda: matmul_bias_func(8, relu=True),
    lambda: matmul_bias_func(8, dtype="int32"),
])
def test_tvm_replays_fuse_reduction_epilogue(make):
    _replay_in_tvm(make(), _fuse)


@pytest.mark.tvm
def test_tvm_rolls_twice_and_miscomputes():
    """Why the workbench refuses a second rolling_buffer on one buffer: TVM 0.27 rolls
    the columns too, and the convolution it then builds is wrong."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    func = _conv_small()
    ours = wb.Schedule(func)
    _roll_conv(ours)
    assert_verifies(ours, func)
    theirs = tvm.s_tir.Schedule(
        tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx")))
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(ours.trace.as_json_obj(syntax="tirx"),
                                                    theirs)
    assert ir_identical(wb.from_script(theirs.mod.script()), ours.mod) is None
    theirs.rolling_buffer(theirs.get_sblock("pad", func_name="conv2d_nchw"), 0)  # accepted
    assert "T.sblock_alloc_buffer((1, 2, 3, 3))" in theirs.mod.script()
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, 2, 8, 8)).astype("float32")
    weight = rng.standard_normal((2, 2, 3, 3)).astype("float32")
    out = tvm.runtime.tensor(np.zeros((1, 2, 8, 8), "float32"))
    tvm.compile(theirs.mod, target="llvm")(tvm.runtime.tensor(data),
                                           tvm.runtime.tensor(weight), out)
    expected = wb.workloads.conv2d_nchw_ref(data, weight)
    assert not np.allclose(out.numpy(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.tvm
def test_tvm_replays_clip_epilogue():
    _replay_in_tvm(wb.from_script(CLIP), lambda sch: sch.fuse_reduction_epilogue("mm", "clip"))
