"""tensorize and tile_with_tensor_intrin, and the tensor intrinsic registry.

Two small intrinsics of our own: ``test_tz_dot4`` (a float32 dot product of 4, ``C +=
A[0:4] . B[0:4, 0]`` with ``B`` a column, its row stride passed to the C function) and
``test_tz_mm4x4`` (a 4x4x4 matmul update, ``C[4, 4] += A[4, 4] B[4, 4]``, the three row
strides passed). For each: the IR after (written out), the kernel built and compared
with numpy, the trace round trip, one test per kind of mismatch (the message checked,
the schedule unchanged), and TVM 0.27 replaying our JSON trace where apache-tvm is
installed (TVM gets the same description and implementation text).
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.schedule.primitives.blockize import NotSingleBlockError
from workbench.schedule.primitives.tensorize import (
    TensorizeMismatchError,
    UnknownTensorIntrinError,
    ViewOffsetError,
)
from workbench.tensor_intrin import TensorIntrinError, TensorIntrinNotFoundError
from workbench.testing import assert_schedule_error, ir_identical, roundtrip_trace

# --------------------------------------------------------------------------- intrinsics
# (TVMScript both readers take: the workbench's and TVM's)

DOT4_DESC = '''
@T.prim_func(s_tir=True)
def dot4_desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4,), offset_factor=1)
    B = T.match_buffer(b, (4, 1), offset_factor=1)
    C = T.match_buffer(c, (), offset_factor=1)
    with T.sblock("root"):
        T.reads(C[()], A[0:4], B[0:4, 0:1])
        T.writes(C[()])
        for k in range(4):
            with T.sblock("update"):
                vk = T.axis.remap("R", [k])
                C[()] = C[()] + A[vk] * B[vk, 0]
'''

DOT4_IMPL = '''
@T.prim_func(s_tir=True)
def dot4_impl(a: T.handle, b: T.handle, c: T.handle):
    sb = T.int32()
    A = T.match_buffer(a, (4,), offset_factor=1)
    B = T.match_buffer(b, (4, 1), offset_factor=1, strides=[sb, 1])
    C = T.match_buffer(c, (), offset_factor=1)
    with T.sblock("root"):
        T.reads(C[()], A[0:4], B[0:4, 0:1])
        T.writes(C[()])
        T.evaluate(T.call_extern("void", "wb_test_dot4", C.access_ptr("rw"),
                                 A.access_ptr("r"), B.access_ptr("r"), sb))
'''

DOT4_C = """
static inline void wb_test_dot4(float* c, const float* a, const float* b, int32_t sb) {
  float s = 0.0f;
  for (int k = 0; k < 4; ++k) s += a[k] * b[k * sb];
  *c += s;
}"""

MM4_DESC = '''
@T.prim_func(s_tir=True)
def mm4_desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4, 4), offset_factor=1)
    B = T.match_buffer(b, (4, 4), offset_factor=1)
    C = T.match_buffer(c, (4, 4), offset_factor=1)
    with T.sblock("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        for i, j, k in T.grid(4, 4, 4):
            with T.sblock("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

MM4_IMPL = '''
@T.prim_func(s_tir=True)
def mm4_impl(a: T.handle, b: T.handle, c: T.handle):
    lda = T.int32()
    ldb = T.int32()
    ldc = T.int32()
    A = T.match_buffer(a, (4, 4), offset_factor=1, strides=[lda, 1])
    B = T.match_buffer(b, (4, 4), offset_factor=1, strides=[ldb, 1])
    C = T.match_buffer(c, (4, 4), offset_factor=1, strides=[ldc, 1])
    with T.sblock("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        T.evaluate(T.call_extern("void", "wb_test_mm4x4", C.access_ptr("rw"),
                                 A.access_ptr("r"), B.access_ptr("r"), lda, ldb, ldc))
'''

MM4_C = """
static inline void wb_test_mm4x4(float* c, const float* a, const float* b,
                                 int32_t lda, int32_t ldb, int32_t ldc) {
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      float s = c[i * ldc + j];
      for (int k = 0; k < 4; ++k) s += a[i * lda + k] * b[k * ldb + j];
      c[i * ldc + j] = s;
    }
}"""

INTRINSICS = {
    "test_tz_dot4": (DOT4_DESC, DOT4_IMPL),
    "test_tz_mm4x4": (MM4_DESC, MM4_IMPL),
}


@pytest.fixture(autouse=True)
def _registered():
    wb.codegen.register_c_function("wb_test_dot4", DOT4_C, override=True)
    wb.codegen.register_c_function("wb_test_mm4x4", MM4_C, override=True)
    for name, (desc, impl) in INTRINSICS.items():
        wb.TensorIntrin.register(name, desc, impl, override=True)


def _rand(*shape, dtype="float32"):
    return np.random.default_rng(7).random(shape).astype(dtype)


def _check_matmul_numerics(sch, m, n, k):
    a, b = _rand(m, k), _rand(k, n)
    c = np.full((m, n), 5.0, "float32")  # the init must overwrite it
    wb.build(sch.mod)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


# --------------------------------------------------------------------------- registry


def test_registry_get_names_and_missing():
    intrin = wb.TensorIntrin.get("test_tz_dot4")
    assert (intrin.name, [p.name for p in intrin.desc.params]) == ("test_tz_dot4",
                                                                   ["A", "B", "C"])
    assert isinstance(intrin.impl, wb.PrimFunc)
    assert {"test_tz_dot4", "test_tz_mm4x4"} <= set(wb.TensorIntrin.names())
    assert wb.TensorIntrin.get("test_tz_nope", allow_missing=True) is None
    with pytest.raises(KeyError, match="no tensor intrinsic named 'test_tz_nope'.*test_tz_dot4"):
        wb.TensorIntrin.get("test_tz_nope")
    with pytest.raises(ValueError):  # TVM raises a ValueError
        wb.TensorIntrin.get("test_tz_nope")
    assert issubclass(TensorIntrinNotFoundError, KeyError)


def test_registry_accepts_prim_funcs_and_refuses_a_different_second_registration():
    desc, impl = wb.from_script(DOT4_DESC), wb.from_script(DOT4_IMPL)
    wb.TensorIntrin.register("test_tz_dot4", desc, impl)  # the same functions: fine
    with pytest.raises(TensorIntrinError, match="already registered with a different"):
        wb.TensorIntrin.register("test_tz_dot4", MM4_DESC, MM4_IMPL)
    assert wb.TensorIntrin.get("test_tz_dot4").desc.name == "dot4_desc"
    wb.TensorIntrin.register("test_tz_other", MM4_DESC, MM4_IMPL, override=True)
    assert wb.TensorIntrin.get("test_tz_other").desc.name == "mm4_desc"


@pytest.mark.parametrize("desc,impl,words", [
    (DOT4_DESC, MM4_IMPL, "parameter 0 is A of shape (4,) in the description but A of "
                          "shape (4, 4)"),
    (DOT4_DESC, DOT4_IMPL.replace("(a, (4,), offset_factor=1)",
                                  '(a, (4,), "float16", offset_factor=1)'),
     "parameter 0 is A of dtype float32 in the description but A of dtype float16"),
    (DOT4_DESC, '''
@T.prim_func(s_tir=True)
def two_params(a: T.handle, b: T.handle):
    A = T.match_buffer(a, (4,), offset_factor=1)
    B = T.match_buffer(b, (4, 1), offset_factor=1)
    with T.sblock("root"):
        T.evaluate(T.call_extern("void", "f", A.access_ptr("rw"), B.access_ptr("r")))
''', "the description has 3 buffer parameters but the implementation has 2"),
    (DOT4_DESC.replace("with T.sblock(\"update\"):", "with T.sblock(\"update\"):\n"
                       "                with T.sblock(\"inner\"):\n                    "
                       "T.evaluate(0)"),
     DOT4_IMPL, "exactly one block under its loops"),
    (DOT4_DESC, DOT4_IMPL.replace('A.access_ptr("r"), ', "").replace(
        "T.reads(C[()], A[0:4], B[0:4, 0:1])", "T.reads(C[()], B[0:4, 0:1])"),
     "does not access its parameter A"),
])
def test_registry_refuses_functions_that_do_not_fit(desc, impl, words):
    with pytest.raises(TensorIntrinError) as e:
        wb.TensorIntrin.register("test_tz_bad", desc, impl)
    assert words in str(e.value)
    assert "test_tz_bad" not in wb.TensorIntrin.names()


# --------------------------------------------------------------------------- tensorize

DOT4_AFTER = '''
@T.prim_func
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    for i_init, j_init in T.grid(16, 16):
        with T.block("C_init"):
            vi, vj = T.axis.remap("SS", [i_init, j_init])
            C[vi, vj] = T.float32(0)
    for i, j, k_0 in T.grid(16, 16, 4):
        with T.block("C_update_o"):
            vi_o, vj_o, vk_o = T.axis.remap("SSR", [i, j, k_0])
            T.reads(C[vi_o, vj_o], A[vi_o, vk_o * 4:vk_o * 4 + 4], B[vk_o * 4:vk_o * 4 + 4, vj_o])
            T.writes(C[vi_o, vj_o])
            sb = T.int32()
            A_1 = T.match_buffer(A[vi_o, vk_o * 4:vk_o * 4 + 4], (4,), offset_factor=1)
            B_1 = T.match_buffer(B[vk_o * 4:vk_o * 4 + 4, vj_o], (4, 1), strides=(sb, 1),
                                 offset_factor=1)
            C_1 = T.match_buffer(C[vi_o, vj_o], (), offset_factor=1)
            T.call_extern("void", "wb_test_dot4",
                T.tvm_access_ptr(T.type_annotation("float32"), C_1.data, C_1.elem_offset,
                                 T.int64(1), 3),
                T.tvm_access_ptr(T.type_annotation("float32"), A_1.data, A_1.elem_offset, 4, 1),
                T.tvm_access_ptr(T.type_annotation("float32"), B_1.data, B_1.elem_offset,
                                 sb * 4, 1),
                sb)
'''


def _dot4_schedule(n: int = 16) -> tuple[wb.Schedule, wb.LoopRV]:
    sch = wb.Schedule(wb.workloads.matmul(n, n, n))
    sch.decompose_reduction("C", sch.get_loops("C")[0])
    _, _, k = sch.get_loops("C_update")
    _, k1 = sch.split(k, factors=[None, 4])
    return sch, k1


def test_tensorize_loop_dot4_ir_numerics_and_trace():
    sch, k1 = _dot4_schedule()
    sch.tensorize(k1, "test_tz_dot4")
    assert ir_identical(wb.from_script(DOT4_AFTER), sch.mod["matmul"]) is None
    assert 'sch.tensorize(block_or_loop=l11, tensor_intrin="test_tz_dot4", ' \
           "preserve_unit_iters=True)" in sch.trace.script()
    assert sch.trace.as_json_obj()[0][-1] == ["Tensorize", ["l11"], ["test_tz_dot4", 1], []]
    _check_matmul_numerics(sch, 16, 16, 16)
    roundtrip_trace(sch, wb.workloads.matmul(16, 16, 16))


def test_tensorize_a_block():
    sch, k1 = _dot4_schedule()
    outer = sch.blockize(k1)
    sch.tensorize(outer, "test_tz_dot4")
    assert ir_identical(wb.from_script(DOT4_AFTER), sch.mod["matmul"]) is None
    _check_matmul_numerics(sch, 16, 16, 16)
    roundtrip_trace(sch, wb.workloads.matmul(16, 16, 16))


TWO_UPDATES = '''
@T.prim_func
def two(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
        C: T.Buffer((8, 8), "float32"), D: T.Buffer((8, 8), "float32")):
    for i, j, k in T.grid(8, 8, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j, k in T.grid(8, 8, 8):
        with T.block("D"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            D[vi, vj] = D[vi, vj] + B[vi, vk] * A[vk, vj]
'''


def test_tensorize_twice_gives_each_block_its_own_views():
    func = wb.from_script(TWO_UPDATES)
    sch = wb.Schedule(func)
    for name in ("C", "D"):
        _, k1 = sch.split(sch.get_loops(name)[2], factors=[None, 4])
        sch.tensorize(k1, "test_tz_dot4")
    text = sch.mod.script()
    assert text.count("sb = T.int32()") == 2
    assert "A_1 = T.match_buffer(A[vi_o, vk_o * 4:vk_o * 4 + 4]" in text
    assert "A_2 = T.match_buffer(B[vi_o, vk_o * 4:vk_o * 4 + 4]" in text
    assert "B_2 = T.match_buffer(A[vk_o * 4:vk_o * 4 + 4, vj_o], (4, 1)" in text
    assert ir_identical(wb.from_script(text), sch.mod) is None
    a, b = _rand(8, 8), _rand(8, 8)
    c, d = np.ones((8, 8), "float32"), np.ones((8, 8), "float32")
    wb.build(sch.mod)(a, b, c, d)
    np.testing.assert_allclose(c, 1 + a @ b, rtol=1e-5)
    np.testing.assert_allclose(d, 1 + b @ a, rtol=1e-5)
    roundtrip_trace(sch, func)


MM4_TILED = '''
@T.prim_func
def matmul(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
           C: T.Buffer((8, 8), "float32")):
    for i_init, j_init in T.grid(8, 8):
        with T.block("C_init"):
            vi, vj = T.axis.remap("SS", [i_init, j_init])
            C[vi, vj] = T.float32(0)
    for i_0, j_0, k_0, i_1, j_1, k_1 in T.grid(2, 2, 2, 4, 4, 4):
        with T.block("C_update"):
            vi = T.axis.spatial(8, i_0 * 4 + i_1)
            vj = T.axis.spatial(8, j_0 * 4 + j_1)
            vk = T.axis.reduce(8, k_0 * 4 + k_1)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def test_tile_with_tensor_intrin_then_tensorize_mm4x4():
    func = wb.workloads.matmul(8, 8, 8)
    sch = wb.Schedule(func)
    sch.decompose_reduction("C", sch.get_loops("C")[0])
    loop = sch.tile_with_tensor_intrin("C_update", "test_tz_mm4x4")
    assert ir_identical(wb.from_script(MM4_TILED), sch.mod["matmul"]) is None
    assert sch.get(loop).loop_var.name == "i_1"
    kinds = [inst.kind for inst in sch.trace.insts]
    # as TVM makes it: the loops, a split per mapped loop, the loops again, the reorder
    assert kinds[-6:] == ["GetLoops", "Split", "Split", "Split", "GetLoops", "Reorder"]
    sch.tensorize(loop, "test_tz_mm4x4")
    src = wb.build(sch.mod).source
    assert "const int32_t lda = 8;" in src and "wb_test_mm4x4(" in src
    _check_matmul_numerics(sch, 8, 8, 8)
    roundtrip_trace(sch, func)


def test_tile_with_tensor_intrin_reorders_spatial_loops_inward():
    # k outermost: the tile's inner loops go innermost, in the description's order
    func = wb.from_script('''
@T.prim_func
def matmul(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
           C: T.Buffer((8, 8), "float32")):
    for k, i, j in T.grid(8, 8, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
''')
    sch = wb.Schedule(func)
    loop = sch.tile_with_tensor_intrin("C", "test_tz_mm4x4")
    names = [sch.get(lp).loop_var.name for lp in sch.get_loops("C")]
    assert names == ["k_0", "i_0", "j_0", "i_1", "j_1", "k_1"]
    assert sch.get(loop).loop_var.name == "i_1"
    sch.tensorize(loop, "test_tz_mm4x4")
    a, b = _rand(8, 8), _rand(8, 8)
    c = np.zeros((8, 8), "float32")
    wb.build(sch.mod)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_tile_with_tensor_intrin_gives_none_when_extents_do_not_divide():
    sch = wb.Schedule(wb.workloads.matmul(10, 10, 10))
    sch.decompose_reduction("C", sch.get_loops("C")[0])
    before, n = sch.mod.script(), len(sch.trace.insts)
    assert sch.tile_with_tensor_intrin("C_update", "test_tz_mm4x4") is None
    assert sch.mod.script() == before
    assert [i.kind for i in sch.trace.insts[n:]] == ["GetBlock"]  # the name lookup only


def test_tile_with_tensor_intrin_pads_when_allowed():
    func = wb.workloads.matmul(10, 10, 10)
    sch = wb.Schedule(func)
    loop = sch.tile_with_tensor_intrin("C", "test_tz_mm4x4", allow_padding=True)
    assert [sch.get(lp).extent for lp in sch.get_loops("C")] == [3, 3, 3, 4, 4, 4]
    assert {b.name for b in sch.get(sch.get_block("root")).alloc_buffers} == {
        "A_pad", "B_pad", "C_pad"}
    assert sch.get(loop).loop_var.name == "i_1"
    sch.decompose_reduction("C", sch.get_loops("C")[2])
    sch.tensorize(sch.get_loops("C_update")[3], "test_tz_mm4x4")
    a, b = _rand(10, 10), _rand(10, 10)
    c = np.zeros((10, 10), "float32")
    wb.build(sch.mod)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    roundtrip_trace(sch, func)


def test_tile_with_tensor_intrin_unknown_name():
    sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
    assert_schedule_error(sch, lambda: sch.tile_with_tensor_intrin("C", "test_tz_nope"),
                          UnknownTensorIntrinError)


# --------------------------------------------------------------------------- refusals


def _mismatch(sch, target, intrin, part, *words):
    e = assert_schedule_error(sch, lambda: sch.tensorize(target, intrin), TensorizeMismatchError)
    assert e.part == part
    for w in words:
        assert w in str(e), str(e)
    return e


def test_tensorize_fail_loop_structure():
    sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
    sch.decompose_reduction("C", sch.get_loops("C")[0])
    _, j, k = sch.get_loops("C_update")
    _mismatch(sch, j, "test_tz_mm4x4", "structure",
              'tensorize: block "C_update_o" does not match "test_tz_mm4x4": it has 2 loops '
              "(8, 8) around its block but the intrinsic has 3 (4, 4, 4)")


def test_tensorize_fail_loop_extent():
    sch, _ = _dot4_schedule()
    _, _, k0, k1 = sch.get_loops("C_update")
    sch.fuse(k0, k1)  # one loop of 16
    (_, _, k) = sch.get_loops("C_update")
    _mismatch(sch, k, "test_tz_dot4", "structure",
              "loop k_0_k_1_fused has extent 16 but the intrinsic's loop k has 4")


def test_tensorize_fail_iteration_kind():
    sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    sch.decompose_reduction("C", sch.get_loops("C")[0])
    _, j, _ = sch.get_loops("C_update")
    sch.reorder(sch.get_loops("C_update")[2], j)
    _, _, j = sch.get_loops("C_update")
    _, j1 = sch.split(j, factors=[None, 4])
    _mismatch(sch, j1, "test_tz_dot4", "iteration",
              "iterates S but the intrinsic's iterates R")


def test_tensorize_fail_init():
    sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))  # the init is not decomposed
    _, _, k = sch.get_loops("C")
    _, k1 = sch.split(k, factors=[None, 4])
    _mismatch(sch, k1, "test_tz_dot4", "init",
              'block "C_o" does not match "test_tz_dot4": the init stores 0.0f but the '
              "intrinsic stores nothing")


def _custom_matmul(value: str, b_shape="(8, 8)", dtype="float32") -> wb.PrimFunc:
    return wb.from_script(f'''
@T.prim_func
def mm(A: T.Buffer((8, 8), "{dtype}"), B: T.Buffer({b_shape}, "{dtype}"),
       C: T.Buffer((8, 8), "{dtype}")):
    for i, j, k in T.grid(8, 8, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = {value}
''')


def _tiled(func) -> tuple[wb.Schedule, wb.LoopRV]:
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops("C")
    i0, i1 = sch.split(i, factors=[None, 4])
    j0, j1 = sch.split(j, factors=[None, 4])
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    return sch, i1


def test_tensorize_fail_computation_operator():
    sch, i1 = _tiled(_custom_matmul("C[vi, vj] - A[vi, vk] * B[vk, vj]"))
    _mismatch(sch, i1, "test_tz_mm4x4", "computation",
              "it computes C[vi, vj] - A[vi, vk] * B[vk, vj] where the intrinsic computes "
              "C[vi, vj] + A[vi, vk] * B[vk, vj]")


def test_tensorize_fail_computation_access():
    sch, i1 = _tiled(_custom_matmul("C[vi, vj] + A[vi, vk] * B[vj, vk]"))
    _mismatch(sch, i1, "test_tz_mm4x4", "computation",
              "it reads B[vj, vk] but the intrinsic reads B[vk, vj]")


def test_tensorize_fail_computation_dtype():
    sch, i1 = _tiled(_custom_matmul("C[vi, vj] + A[vi, vk] * B[vk, vj]", dtype="float64"))
    _mismatch(sch, i1, "test_tz_mm4x4", "computation",
              "it writes C (float64, global) where the intrinsic writes C (float32, global)")


def test_tensorize_fail_regions():
    # A is read on its diagonal: each access matches the description's A[vk] in its last
    # dimension, but the block reads a 4x4 square of A where the intrinsic reads 4 values
    func = wb.from_script('''
@T.prim_func
def diag(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 8), "float32"),
         C: T.Buffer((8,), "float32")):
    for j, k in T.grid(8, 16):
        with T.block("C"):
            vj, vk = T.axis.remap("SR", [j, k])
            C[vj] = C[vj] + A[vk, vk] * B[vk, vj]
''')
    sch = wb.Schedule(func)
    _, k1 = sch.split(sch.get_loops("C")[1], factors=[None, 4])
    _mismatch(sch, k1, "test_tz_dot4", "regions",
              "it reads A[vk_o * 4:vk_o * 4 + 4, vk_o * 4:vk_o * 4 + 4] but the intrinsic "
              "reads A[0:4]")


def test_tensorize_fail_implementation_ignores_the_tile_offset():
    # T.Buffer parameters (no offset_factor): access_ptr does not add the offset, so the
    # C function would get the array's first element instead of the tile's
    impl = DOT4_IMPL.replace("A = T.match_buffer(a, (4,), offset_factor=1)",
                             "A = T.match_buffer(a, (4,))")
    wb.TensorIntrin.register("test_tz_dot4_at_zero", DOT4_DESC, impl, override=True)
    sch, k1 = _dot4_schedule()
    e = assert_schedule_error(sch, lambda: sch.tensorize(k1, "test_tz_dot4_at_zero"),
                              ViewOffsetError, "C_update_o")
    assert "hands A.data to its code without A.elem_offset" in str(e)
    assert "offset_factor=1" in str(e)


def test_tensorize_fail_unknown_intrinsic():
    sch, k1 = _dot4_schedule()
    e = assert_schedule_error(sch, lambda: sch.tensorize(k1, "test_tz_nope"),
                              UnknownTensorIntrinError)
    assert "test_tz_dot4" in str(e)  # the registered ones are listed


def test_tensorize_fail_loop_with_two_blocks():
    sch = wb.Schedule(wb.workloads.mm_relu(8, 8, 8))
    sch.compute_at(sch.get_block("Y"), sch.get_loops("C")[1])
    i, _ = sch.get_loops("C")
    e = assert_schedule_error(sch, lambda: sch.tensorize(i, "test_tz_dot4"),
                              NotSingleBlockError)
    assert str(e).startswith("tensorize: ")


# --------------------------------------------------------------------------- TVM


def _tvm_register(tvm, name: str) -> None:
    desc, impl = INTRINSICS[name]
    tvm.s_tir.TensorIntrin.register(name, tvm.script.from_source(desc),
                                    tvm.script.from_source(impl), override=True)


@pytest.mark.tvm
def test_tvm_replays_a_tensorize_trace():
    """TVM 0.27 replays our tirx JSON trace (the same intrinsic registered on its side);
    its result, read back by the workbench, is our IR."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    _tvm_register(tvm, "test_tz_dot4")
    func = wb.workloads.matmul(16, 16, 16)
    ours, k1 = _dot4_schedule()
    ours.tensorize(k1, "test_tz_dot4")
    theirs = tvm.s_tir.Schedule(
        tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx")))
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(ours.trace.as_json_obj(syntax="tirx"),
                                                    theirs)
    back = wb.from_script(theirs.mod.script())
    assert ir_identical(back, ours.mod) is None


@pytest.mark.tvm
def test_tvm_tile_with_tensor_intrin_agrees():
    """TVM's tile_with_tensor_intrin then tensorize gives our IR, and TVM replays our
    trace (split, reorder, tensorize) to it too."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    _tvm_register(tvm, "test_tz_mm4x4")
    func = wb.workloads.matmul(8, 8, 8)
    ours = wb.Schedule(func)
    ours.decompose_reduction("C", ours.get_loops("C")[0])
    ours.tensorize(ours.tile_with_tensor_intrin("C_update", "test_tz_mm4x4"), "test_tz_mm4x4")
    text = wb.IRModule.from_funcs(func).script(syntax="tirx")
    theirs = tvm.s_tir.Schedule(tvm.script.from_source(text))
    theirs.work_on("matmul")
    block = theirs.get_sblock("C")
    theirs.decompose_reduction(block, theirs.get_loops(block)[0])
    update = theirs.get_sblock("C_update")
    from tvm.s_tir.schedule.transform import tile_with_tensor_intrin

    loop = tile_with_tensor_intrin(theirs, update, "test_tz_mm4x4")
    theirs.tensorize(loop, "test_tz_mm4x4")
    assert ir_identical(wb.from_script(theirs.mod.script()), ours.mod) is None
    replay = tvm.s_tir.Schedule(tvm.script.from_source(text))
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(ours.trace.as_json_obj(syntax="tirx"),
                                                    replay)
    assert ir_identical(wb.from_script(replay.mod.script()), ours.mod) is None


@pytest.mark.tvm
def test_tvm_tile_with_tensor_intrin_padding_agrees():
    """With padding, TVM's tile_with_tensor_intrin gives our IR."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    from tvm.s_tir.schedule.transform import tile_with_tensor_intrin

    _tvm_register(tvm, "test_tz_mm4x4")
    func = wb.workloads.matmul(10, 10, 10)
    ours = wb.Schedule(func)
    ours.tile_with_tensor_intrin("C", "test_tz_mm4x4", allow_padding=True)
    theirs = tvm.s_tir.Schedule(
        tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx")))
    theirs.work_on("matmul")
    tile_with_tensor_intrin(theirs, theirs.get_sblock("C"), "test_tz_mm4x4", True)
    assert ir_identical(wb.from_script(theirs.mod.script()), ours.mod) is None
