"""transform_layout and transform_block_layout.

Each case: the IR after the primitive equals the TVMScript written below (reviewed
against TVM 0.27's output for the same schedule: TVM names the new loops ``axis0`` /
``ax0`` and the new iter vars ``v_axis0`` / ``v0``), the trace replays (JSON and Python
text) to the same IR, and the scheduled function computes what the unscheduled one
does (for a parameter whose layout changed, the numpy input is relaid out by hand).
Then one ``test_<prim>_fail_<reason>`` per refusal, and replays in TVM where apache-tvm
is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.schedule.errors import InvalidScheduleArgumentError, NotSingleChildError
from workbench.schedule.primitives.cache import BufferIndexOutOfRangeError, BufferNotAccessedError
from workbench.schedule.primitives.transform_block_layout import (
    NotBijectiveAffineIndexMapError,
    NotTrivialBindingError,
    OpaqueNewIterTypeError,
)
from workbench.schedule.primitives.transform_layout import (
    BufferIsSubregionError,
    IndexMapArityError,
    IndexMapNotAffineError,
    TransformationIntroducesPaddingError,
    TransformationPaddingExpressionError,
    TransformationPaddingIndexMapError,
    TransformationPaddingTypeError,
)
from workbench.testing import assert_schedule_error, assert_verifies, ir_identical, roundtrip_trace

TWO = """
@T.prim_func
def two(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    B = T.alloc_buffer((32, 32))
    for i, j in T.grid(32, 32):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""

PACK = "lambda i, j: (i // 16, j // 16, i % 16, j % 16)"


def two():
    return wb.from_script(TWO)


def pad14():
    return wb.from_script("""
@T.prim_func
def pad14(A: T.Buffer((14,), "float32"), C: T.Buffer((14,), "float32")):
    B = T.alloc_buffer((14,))
    for i in range(14):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)
    for i in range(14):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi] + T.float32(1)
""")


def same(func, text):
    expected = wb.from_script(text)
    problem = ir_identical(func, expected)
    assert problem is None, f"{problem}\n--- got ---\n{func.script()}"


def run(func, *arrays):
    kernel = wb.build(func)
    kernel(*arrays)
    return arrays


# --------------------------------------------------------------------------- transform_layout


def test_transform_layout_intermediate_buffer():
    f = two()
    sch = wb.Schedule(f)
    sch.transform_layout(sch.get_block("B"), ("write", 0), PACK)
    same(sch.func, """
@T.prim_func
def two(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    B = T.alloc_buffer((2, 2, 16, 16))
    for i, j in T.grid(32, 32):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi // 16, vj // 16, vi % 16, vj % 16] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi // 16, vj // 16, vi % 16, vj % 16] + T.float32(1)
""")
    roundtrip_trace(sch, f)
    assert_verifies(sch, f)


@pytest.mark.parametrize("how", ["name", "tuple", "callable", "indexmap"])
def test_transform_layout_argument_forms(how):
    f = two()
    sch = wb.Schedule(f)
    buffer = "A" if how == "name" else ("read", 0)
    index_map = {"callable": lambda i, j: (j, i), "indexmap": wb.IndexMap.parse(
        "lambda i, j: (j, i)")}.get(how, "lambda i, j: (j, i)")
    sch.transform_layout("B", buffer, index_map)
    assert "A[vj, vi]" in sch.func.script()
    assert sch.trace.lines()[-1] == (
        'sch.transform_layout(block=b0, buffer=("read", 0), index_map=lambda i, j: (j, i,), '
        "pad_value=None, assume_injective_transform=False)")


def test_transform_layout_parameter_numerics():
    """A parameter gets the new shape; the kernel reads the relaid-out numpy array."""
    f = two()
    sch = wb.Schedule(f)
    sch.transform_layout("B", ("read", 0), PACK)
    assert sch.func.params[0].shape == (2, 2, 16, 16)
    roundtrip_trace(sch, f)
    a = np.random.rand(32, 32).astype("float32")
    packed = a.reshape(2, 16, 2, 16).transpose(0, 2, 1, 3).copy()
    c = np.zeros((32, 32), "float32")
    run(sch.mod, packed, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_transform_layout_output_parameter_numerics():
    f = two()
    sch = wb.Schedule(f)
    sch.transform_layout("C", "C", "lambda i, j: (j // 8, i, j % 8)")
    a = np.random.rand(32, 32).astype("float32")
    c = np.zeros((4, 32, 8), "float32")
    run(sch.mod, a, c)
    np.testing.assert_allclose(c, (a * 2 + 1).reshape(32, 4, 8).transpose(1, 0, 2), rtol=1e-6)


def test_transform_layout_simplifies_with_bounds():
    """Indices simplify with the iter vars' ranges (TVM's ``test_simplify``)."""
    f = two()
    sch = wb.Schedule(f)
    i, j = sch.get_loops("C")
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, i1, j1)
    outer = sch.blockize(i1)
    cache = sch.cache_read(outer, 0, "global")
    sch.transform_layout(cache, ("write", 0), PACK)
    assert "B_global[vi_o, vj_o, vi_i, vj_i] + T.float32(1)" in sch.func.script()
    roundtrip_trace(sch, f)
    assert_verifies(sch, f)


def test_transform_layout_padding_if_then_else():
    """A row-major write of the whole buffer runs over the padded shape and writes
    the pad value into the padding (plan 2)."""
    f = pad14()
    sch = wb.Schedule(f)
    sch.transform_layout("B", "B", "lambda i: (i // 4, i % 4)", pad_value=0.0)
    same(sch.func, """
@T.prim_func
def pad14(A: T.Buffer((14,), "float32"), C: T.Buffer((14,), "float32")):
    B = T.alloc_buffer((4, 4))
    for axis0, axis1 in T.grid(4, 4):
        with T.block("B"):
            v_axis0, v_axis1 = T.axis.remap("SS", [axis0, axis1])
            B[v_axis0, v_axis1] = T.if_then_else(v_axis0 == 3 and 2 <= v_axis1, T.float32(0), A[v_axis0 * 4 + v_axis1] * T.float32(2))
    for i in range(14):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi // 4, vi % 4] + T.float32(1)
""")  # noqa: E501
    roundtrip_trace(sch, f)
    assert_verifies(sch, f)


def test_transform_layout_padding_reduction():
    f = wb.from_script("""
@T.prim_func
def rowsum(A: T.Buffer((14, 8), "float32"), C: T.Buffer((14,), "float32")):
    B = T.alloc_buffer((14,))
    for i, k in T.grid(14, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
    for i in range(14):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi]
""")
    sch = wb.Schedule(f)
    sch.transform_layout("B", "B", lambda i: (i // 4, i % 4), pad_value=0.0)
    same(sch.func, """
@T.prim_func
def rowsum(A: T.Buffer((14, 8), "float32"), C: T.Buffer((14,), "float32")):
    B = T.alloc_buffer((4, 4))
    for axis0, axis1, k in T.grid(4, 4, 8):
        with T.block("B"):
            v_axis0, v_axis1, vk = T.axis.remap("SSR", [axis0, axis1, k])
            with T.init():
                B[v_axis0, v_axis1] = T.if_then_else(v_axis0 == 3 and 2 <= v_axis1, T.float32(0), T.float32(0))
            B[v_axis0, v_axis1] = T.if_then_else(v_axis0 == 3 and 2 <= v_axis1, T.float32(0), B[v_axis0, v_axis1] + A[v_axis0 * 4 + v_axis1, vk])
    for i in range(14):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi // 4, vi % 4]
""")  # noqa: E501
    roundtrip_trace(sch, f)
    assert_verifies(sch, f)


def test_transform_layout_padding_epilogue_block():
    """A write that cannot take the padding (the block stores another buffer too):
    a block after it fills the padding (plan 3)."""
    f = wb.from_script("""
@T.prim_func
def side(A: T.Buffer((14,), "float32"), B: T.Buffer((14,), "float32"), C: T.Buffer((14,), "float32")):
    for i in range(14):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
            C[vi] = A[vi] + T.float32(1)
""")  # noqa: E501
    sch = wb.Schedule(f)
    sch.transform_layout("B", "B", "lambda i: (i // 4, i % 4)", pad_value=-1.0)
    same(sch.func, """
@T.prim_func
def side(A: T.Buffer((14,), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((14,), "float32")):
    for i in range(14):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi // 4, vi % 4] = A[vi]
            C[vi] = A[vi] + T.float32(1)
    for axis0, axis1 in T.grid(4, 4):
        with T.block("buffer_B_padding"):
            v_axis0, v_axis1 = T.axis.remap("SS", [axis0, axis1])
            T.where(axis0 == 3 and 2 <= axis1)
            B[v_axis0, v_axis1] = T.float32(-1)
""")  # noqa: E501
    roundtrip_trace(sch, f)
    a = np.random.rand(14).astype("float32")
    b = np.full((4, 4), 7, "float32")
    c = np.zeros(14, "float32")
    run(sch.mod, a, b, c)
    want = np.full(16, -1, "float32")
    want[:14] = a
    np.testing.assert_array_equal(b.reshape(-1), want)
    np.testing.assert_allclose(c, a + 1)


def test_transform_layout_padding_input_assumption():
    """An input buffer (never written): an assumption block states the padding's value
    (plan 1); it builds to no code, and the kernel reads the padded input."""
    f = pad14()
    sch = wb.Schedule(f)
    sch.transform_layout("B", ("read", 0), "lambda i: (i // 4, i % 4)", pad_value=0.0)
    text = sch.func.script()
    assert 'with T.block("buffer_A_assumptions"):' in text
    assert "T.assume(not (v_axis0 == 3 and 2 <= v_axis1) or A[v_axis0, v_axis1] == " \
        "T.float32(0))" in text
    roundtrip_trace(sch, f)
    a = np.random.rand(16).astype("float32")
    a[14:] = 0
    c = np.zeros(14, "float32")
    kernel = wb.build(sch.mod)
    assert "assume" not in kernel.source
    kernel(a.reshape(4, 4), c)
    np.testing.assert_allclose(c, a[:14] * 2 + 1, rtol=1e-6)


def test_transform_layout_pad_value_depends_on_index():
    f = pad14()
    sch = wb.Schedule(f)
    sch.transform_layout("B", "B", "lambda i: (i // 4, i % 4)",
                         pad_value=lambda i, j: wb.cast(i + j, "float32"))
    assert 'T.Cast("float32", v_axis0 + v_axis1)' in sch.func.script()
    roundtrip_trace(sch, f)
    assert_verifies(sch, f)


def test_transform_layout_no_padding_ignores_pad_value():
    f = two()
    sch = wb.Schedule(f)
    sch.transform_layout("B", "B", PACK, pad_value=42.0)
    plain = wb.Schedule(f)
    plain.transform_layout("B", "B", PACK)
    assert sch.func.script() == plain.func.script()


def test_transform_layout_assume_injective_skips_padding_check():
    f = pad14()
    sch = wb.Schedule(f)
    sch.transform_layout("B", "B", "lambda i: (i // 4, i % 4)", assume_injective_transform=True)
    assert "B = T.alloc_buffer((4, 4))" in sch.func.script()
    assert "B[vi // 4, vi % 4] = A[vi]" in sch.func.script()
    roundtrip_trace(sch, f)
    assert_verifies(sch, f)


def test_transform_layout_int64_buffer():
    f = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((T.int64(58),), "int32")):
    for i in range(T.int64(58)):
        with T.block("block"):
            vi = T.axis.remap("S", [i])
            A[vi] = 0
""")
    sch = wb.Schedule(f)
    sch.transform_layout("block", "A", lambda h: [h // 8, h % 8], pad_value=0)
    assert sch.func.params[0].shape == (8, 8)
    assert sch.func.params[0].index_dtype == "int64"
    roundtrip_trace(sch, f)


# --------------------------------------------------------------------------- refusals


def test_transform_layout_fail_padding_without_pad_value():
    sch = wb.Schedule(pad14())
    e = assert_schedule_error(sch, lambda: sch.transform_layout("B", "B", "lambda i: (i // 4, "
                              "i % 4)"), TransformationIntroducesPaddingError, "B")
    assert "axis0 == 3 and 2 <= axis1" in str(e)


def test_transform_layout_fail_pad_value_type():
    sch = wb.Schedule(pad14())
    assert_schedule_error(sch, lambda: sch.transform_layout(
        "B", "B", "lambda i: (i // 4, i % 4)", pad_value=0), TransformationPaddingTypeError, "B")


def test_transform_layout_fail_pad_value_two_values():
    sch = wb.Schedule(pad14())
    assert_schedule_error(sch, lambda: sch.transform_layout(
        "B", "B", "lambda i: (i // 4, i % 4)", pad_value=lambda i, j: (i, j)),
        TransformationPaddingIndexMapError, "B")


def test_transform_layout_fail_pad_value_reads_other_buffer():
    f = pad14()
    sch = wb.Schedule(f)
    other = f.params[1]
    assert_schedule_error(sch, lambda: sch.transform_layout(
        "B", "B", "lambda i: (i // 4, i % 4)", pad_value=lambda i, j: other[0]),
        TransformationPaddingExpressionError, "B", "C")


def test_transform_layout_fail_arity():
    sch = wb.Schedule(two())
    assert_schedule_error(sch, lambda: sch.transform_layout("B", "B", "lambda i: (i,)"),
                          IndexMapArityError, "B")


def test_transform_layout_fail_not_affine():
    sch = wb.Schedule(two())
    assert_schedule_error(sch, lambda: sch.transform_layout("B", "B", "lambda i, j: (i * j,)"),
                          IndexMapNotAffineError, "B")


def test_transform_layout_fail_bad_index_map_text():
    sch = wb.Schedule(two())
    e = assert_schedule_error(sch, lambda: sch.transform_layout(
        "B", "B", "lambda i, j: (i.real, j)"), InvalidScheduleArgumentError, "B")
    assert "attribute access" in str(e)


def test_transform_layout_fail_buffer_arguments():
    sch = wb.Schedule(two())
    assert_schedule_error(sch, lambda: sch.transform_layout("B", "X", PACK),
                          BufferNotAccessedError, "B")
    assert_schedule_error(sch, lambda: sch.transform_layout("B", ("read", 3), PACK),
                          BufferIndexOutOfRangeError, "B")
    assert_schedule_error(sch, lambda: sch.transform_layout("B", 0, PACK),
                          InvalidScheduleArgumentError, "B")
    assert_schedule_error(sch, lambda: sch.transform_layout("B", ("load", 0), PACK),
                          InvalidScheduleArgumentError, "B")


def test_transform_layout_fail_match_buffer_view():
    f = wb.from_script("""
@T.prim_func
def view(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i in range(16):
        with T.block("row"):
            vi = T.axis.spatial(16, i)
            Av = T.match_buffer(A[vi, 0:16], (16,))
            for j in range(16):
                with T.block("B"):
                    vj = T.axis.spatial(16, j)
                    B[vi, vj] = Av[vj]
""")
    sch = wb.Schedule(f)
    assert_schedule_error(sch, lambda: sch.transform_layout("B", ("read", 0), "lambda j: (j,)"),
                          BufferIsSubregionError, "B", "Av")


# --------------------------------------------------------------------------- transform_block_layout


def test_transform_block_layout_fuse():
    f = two()
    sch = wb.Schedule(f)
    sch.transform_block_layout("B", lambda i, j: (i * 32 + j,))
    same(sch.func, """
@T.prim_func
def two(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    B = T.alloc_buffer((32, 32))
    for ax0 in range(1024):
        with T.block("B"):
            v0 = T.axis.spatial(1024, ax0)
            B[v0 // 32, v0 % 32] = A[v0 // 32, v0 % 32] * T.float32(2)
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
""")
    roundtrip_trace(sch, f)
    assert_verifies(sch, f)


def test_transform_block_layout_conv_like():
    """Spatial and reduction iter vars fused separately (TVM's conv2d case)."""
    f = wb.from_script("""
@T.prim_func
def conv(X: T.Buffer((1, 10, 10, 3), "float32"), W: T.Buffer((3, 3, 3, 4), "float32"), Y: T.Buffer((1, 8, 8, 4), "float32")):
    for n, h, w, co, rh, rw, rc in T.grid(1, 8, 8, 4, 3, 3, 3):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vrc = T.axis.remap("SSSSRRR", [n, h, w, co, rh, rw, rc])
            with T.init():
                Y[vn, vh, vw, vco] = T.float32(0)
            Y[vn, vh, vw, vco] = Y[vn, vh, vw, vco] + X[vn, vh + vrh, vw + vrw, vrc] * W[vrh, vrw, vrc, vco]
""")  # noqa: E501
    sch = wb.Schedule(f)
    sch.transform_block_layout(
        "conv", lambda n, h, w, co, rh, rw, rc: (n * 64 + h * 8 + w, co, rh * 9 + rw * 3 + rc))
    text = sch.func.script()
    assert "for ax0, ax1, ax2 in T.grid(64, 4, 27):" in text
    assert 'v0, v1, v2 = T.axis.remap("SSR", [ax0, ax1, ax2])' in text
    assert "X[0, v0 // 8 + v2 // 9, v0 % 8 + v2 % 9 // 3, v2 % 3]" in text
    roundtrip_trace(sch, f)
    assert_verifies(sch, f)


def test_transform_block_layout_unit_dim_keeps_index():
    f = wb.from_script("""
@T.prim_func
def unit(A: T.Buffer((1, 8), "float32"), B: T.Buffer((1, 8), "float32")):
    for i, j in T.grid(1, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
""")
    sch = wb.Schedule(f)
    sch.transform_block_layout("B", "lambda i, j: (j, i)")
    assert "B[v1, v0] = A[v1, v0] * T.float32(2)" in sch.func.script()
    roundtrip_trace(sch, f)
    assert_verifies(sch, f)


def test_transform_block_layout_fail_not_bijective():
    sch = wb.Schedule(two())
    assert_schedule_error(sch, lambda: sch.transform_block_layout("B", lambda i, j: (i + j,)),
                          NotBijectiveAffineIndexMapError, "B")


def test_transform_block_layout_fail_mixed_iter_types():
    sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
    assert_schedule_error(sch, lambda: sch.transform_block_layout(
        "C", lambda i, j, k: (i, j * 8 + k)), OpaqueNewIterTypeError, "C")


def test_transform_block_layout_fail_arity():
    sch = wb.Schedule(two())
    assert_schedule_error(sch, lambda: sch.transform_block_layout("B", lambda i: (i,)),
                          IndexMapArityError, "B")


def test_transform_block_layout_fail_not_trivial_binding():
    sch = wb.Schedule(two())
    i, j = sch.get_loops("B")
    sch.split(j, [None, 4])
    assert_schedule_error(sch, lambda: sch.transform_block_layout("B", "lambda i, j: (j, i)"),
                          NotTrivialBindingError, "B")


def test_transform_block_layout_fail_loop_shared_by_blocks():
    sch = wb.Schedule(two())
    sch.compute_at(sch.get_block("B"), sch.get_loops("C")[0])
    assert_schedule_error(sch, lambda: sch.transform_block_layout("C", "lambda i, j: (j, i)"),
                          NotSingleChildError, "C")


# --------------------------------------------------------------------------- TVM


def _tvm_replay(func, sch):
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    theirs = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(sch.trace.as_json_obj(syntax="tirx"), theirs)
    return tvm, theirs


@pytest.mark.tvm
@pytest.mark.parametrize("case", ["pack_write", "pack_read", "pad", "pad_epilogue",
                                  "block_layout"])
def test_tvm_replays_the_trace_to_the_same_ir(case):
    """TVM 0.27 replays our JSON trace (index maps as TVM's JSON) to the same IR."""
    func = pad14() if case.startswith("pad") else two()
    sch = wb.Schedule(func)
    if case == "pack_write":
        sch.transform_layout("B", ("write", 0), PACK)
    elif case == "pack_read":
        sch.transform_layout("B", ("read", 0), PACK)
    elif case == "pad":
        sch.transform_layout("B", "B", "lambda i: (i // 4, i % 4)", pad_value=0.0)
    elif case == "pad_epilogue":
        sch.transform_layout("C", "C", "lambda i: (i // 4, i % 4)", pad_value=1.0)
        sch.transform_layout("B", "B", "lambda i: (i // 4, i % 4)",
                             assume_injective_transform=True)
    else:
        sch.transform_block_layout("B", "lambda i, j: (i * 32 + j,)")
    tvm, theirs = _tvm_replay(func, sch)
    tvm.ir.assert_structural_equal(
        tvm.script.from_source(sch.mod.script(syntax="tirx")), theirs.mod)


@pytest.mark.tvm
def test_tvm_trace_loads_here():
    """TVM's own JSON trace of transform_layout with a pad value loads and replays."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    func = pad14()
    theirs = tvm.s_tir.Schedule(tvm.script.from_source(
        wb.IRModule.from_funcs(func).script(syntax="tirx")))
    theirs.transform_layout(theirs.get_sblock("B", "pad14"), ("write", 0),
                            lambda i: (i // 4, i % 4), pad_value=0.0)
    theirs.transform_block_layout(theirs.get_sblock("C", "pad14"), lambda i: (i,))

    def plain(x):
        if isinstance(x, (list, tuple)) or type(x).__name__ == "Array":
            return [plain(y) for y in x]
        if hasattr(x, "value") and not isinstance(x, str):
            return x.value
        return x

    trace = wb.Trace.from_json(plain(theirs.trace.as_json()))
    ours = wb.Schedule(func)
    trace.apply_to_schedule(ours)
    tvm.ir.assert_structural_equal(
        tvm.script.from_source(ours.mod.script(syntax="tirx")), theirs.mod)
