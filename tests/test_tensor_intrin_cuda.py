"""CUDA tensor intrinsics (workbench.tensor_intrin.cuda): the wmma fragment operations and
mma.sync m16n8k16 as description/implementation pairs, their device functions compiled
by ``nvcc -ptx`` for sm_80 and sm_90 inside a test kernel, the fragment layout, and
tensorize matching a 16x16x16 float16 matmul block against them."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.runtime.reference import evaluate
from workbench.tensor_intrin import cuda

NAMES = list(cuda.CUDA_INTRINSICS)
needs_nvcc = pytest.mark.skipif(cuda.find_nvcc() is None, reason="nvcc is not on PATH")

#: the PTX instructions each intrinsic's device function must produce
EXPECTED_PTX = {
    "wmma_load_16x16x16_f16_a": "wmma.load.a.sync",
    "wmma_load_16x16x16_f16_b": "wmma.load.b.sync",
    "wmma_fill": "wmma.mma.sync",  # fill is plain moves: its kernel still multiplies
    "wmma_sync": "wmma.mma.sync",
    "wmma_store": "wmma.store.d.sync",
    "mma_m16n8k16": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
}


def _expected(name: str) -> str:
    return next(v for k, v in EXPECTED_PTX.items() if name.startswith(k))


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", NAMES)
def test_test_kernel_compiles_with_nvcc(name, arch):
    ptx = cuda.compile_ptx(cuda.render_test_source(name), arch)
    assert f".entry wb_test_{name}" in ptx
    assert _expected(name) in ptx
    assert f".target {arch}" in ptx


@needs_nvcc
def test_mma_issues_two_instructions_per_16x16x16():
    ptx = cuda.compile_ptx(cuda.render_test_source("mma_m16n8k16_f16f16f32"), "sm_80")
    assert ptx.count("mma.sync.aligned.m16n8k16") == 2


@needs_nvcc
def test_nvcc_failure_is_reported():
    bad = cuda.render_device_source("wmma_sync_16x16x16_f16f16f32") + "\n__global__ void k( {\n"
    with pytest.raises(cuda.NvccError, match="nvcc failed"):
        cuda.compile_ptx(bad, "sm_80")


def test_impls_call_registered_device_functions():
    import re

    for intrin in cuda.CUDA_INTRINSICS.values():
        called = re.findall(r'T\.call_extern\("void", "(\w+)"', intrin.impl_text)
        assert called and set(called) <= set(intrin.functions), intrin.name
        src = cuda.render_device_source(intrin.name)
        for fn in intrin.functions:
            assert fn in cuda.CUDA_FUNCTIONS and f"void {fn}(" in src
    with pytest.raises(KeyError, match="no CUDA intrinsic named"):
        cuda.render_device_source("wmma_nothing")


def test_register_cuda_function_refuses_a_silent_redefinition():
    cuda.register_cuda_function("wb_test_only_fn", "__device__ void wb_test_only_fn() {}",
                                override=True)
    with pytest.raises(ValueError, match="already registered"):
        cuda.register_cuda_function("wb_test_only_fn", "__device__ void wb_test_only_fn() {;}")


# -- description / implementation pairs --------------------------------------------------


def test_every_pair_registers():
    names = cuda.register_all()
    assert set(names) == set(NAMES)
    for name in names:
        intrin = wb.TensorIntrin.get(name)
        assert [p.scope for p in intrin.desc.params] == [p.scope for p in intrin.impl.params]
    sync = wb.TensorIntrin.get("wmma_sync_16x16x16_f16f16f32")
    assert [p.scope for p in sync.desc.params] == ["wmma.matrix_a", "wmma.matrix_b",
                                                   "wmma.accumulator"]
    assert "wb_wmma_mma_f16f16f32_16x16x16" in sync.impl.script()


def _pack(operand: str, m: np.ndarray) -> np.ndarray:
    w = np.zeros((32, 8), m.dtype)
    for r in range(16):
        for c in range(16):
            w[cuda.mma_layout(operand, r, c)] = m[r, c]
    return w


def test_mma_layout_is_ptx_fragment_layout():
    # PTX ISA, mma.m16n8k16 .f16: lane = 4 * groupID + threadID_in_group; A register i
    # holds row groupID + 8 * (i // 2 % 2), column 2 * tig + i % 2 + 8 * (i // 4); B
    # register i (of the 8-column half n // 8) holds k = 2 * tig + i % 2 + 8 * (i // 2 % 2)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(8):
            assert cuda.mma_layout("A", g + 8 * (i // 2 % 2), 2 * t + i % 2 + 8 * (i // 4)) \
                == (lane, i)
            assert cuda.mma_layout("C", g + 8 * (i // 2 % 2), 2 * t + i % 2 + 8 * (i // 4)) \
                == (lane, i)
            assert cuda.mma_layout("B", 2 * t + i % 2 + 8 * (i // 2 % 2), g + 8 * (i // 4)) \
                == (lane, i)
    for op in "ABC":  # each a bijection of the 16x16 tile onto 32 lanes x 8 registers
        assert len({cuda.mma_layout(op, r, c) for r in range(16) for c in range(16)}) == 256


def test_mma_description_is_a_matmul_on_fragments():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype("float16")
    b = rng.standard_normal((16, 16)).astype("float16")
    c0 = rng.standard_normal((16, 16)).astype("float32")
    cw = _pack("C", c0)
    evaluate(wb.from_script(cuda.CUDA_INTRINSICS["mma_m16n8k16_f16f16f32"].desc_text),
             _pack("A", a), _pack("B", b), cw)
    got = np.array([[cw[cuda.mma_layout("C", r, n)] for n in range(16)] for r in range(16)])
    assert np.allclose(got, c0 + a.astype("float32") @ b.astype("float32"), atol=1e-4)


def test_wmma_descriptions_compute_their_tiles():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 16)).astype("float16")
    b = rng.standard_normal((16, 16)).astype("float16")
    c = np.ones((16, 16), "float32")
    evaluate(wb.from_script(cuda.CUDA_INTRINSICS["wmma_sync_16x16x16_f16f16f32"].desc_text),
             a, b, c)
    assert np.allclose(c, 1 + a.astype("float32") @ b.astype("float32"), atol=1e-4)
    evaluate(wb.from_script(cuda.CUDA_INTRINSICS["wmma_fill_16x16x16_f32"].desc_text), c)
    assert not c.any()
    out = np.zeros((16, 16), "float16")
    evaluate(wb.from_script(cuda.CUDA_INTRINSICS["wmma_load_16x16x16_f16_b_shared"].desc_text),
             b, out)
    assert np.array_equal(out, b)


# -- tensorize ---------------------------------------------------------------------------

MATMUL_FRAGMENTS = """
@T.prim_func
def mm16(A: T.Buffer((16, 16), "float16"), B: T.Buffer((16, 16), "float16"),
         C: T.Buffer((16, 16), "float32")):
    A_frag = T.alloc_buffer((16, 16), "float16", scope="wmma.matrix_a")
    B_frag = T.alloc_buffer((16, 16), "float16", scope="wmma.matrix_b")
    C_frag = T.alloc_buffer((16, 16), "float32", scope="wmma.accumulator")
    for i, j in T.grid(16, 16):
        with T.block("A_load"):
            vi, vj = T.axis.remap("SS", [i, j])
            A_frag[vi, vj] = A[vi, vj]
    for i, j in T.grid(16, 16):
        with T.block("B_load"):
            vi, vj = T.axis.remap("SS", [i, j])
            B_frag[vi, vj] = B[vi, vj]
    for i, j in T.grid(16, 16):
        with T.block("C_init"):
            vi, vj = T.axis.remap("SS", [i, j])
            C_frag[vi, vj] = T.float32(0)
    for i, j, k in T.grid(16, 16, 16):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C_frag[vi, vj] = C_frag[vi, vj] + T.Cast("float32", A_frag[vi, vk]) * \\
                T.Cast("float32", B_frag[vk, vj])
    for i, j in T.grid(16, 16):
        with T.block("C_store"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = C_frag[vi, vj]
"""


def _has_tensorize() -> bool:
    return hasattr(wb.Schedule, "tensorize")


@pytest.mark.skipif(not _has_tensorize(), reason="Schedule.tensorize is not available")
def test_tensorize_a_16x16x16_f16_matmul_with_wmma():
    cuda.register_all()
    sch = wb.Schedule(wb.from_script(MATMUL_FRAGMENTS))
    steps = [("update", "wmma_sync_16x16x16_f16f16f32"),
             ("C_init", "wmma_fill_16x16x16_f32"),
             ("A_load", "wmma_load_16x16x16_f16_a_global"),
             ("B_load", "wmma_load_16x16x16_f16_b_global"),
             ("C_store", "wmma_store_16x16x16_f32_global")]
    for block, intrin in steps:
        sch.tensorize(sch.get_loops(sch.get_block(block))[0], intrin)
    text = sch.mod.script()
    for fn in ("wb_wmma_mma_f16f16f32_16x16x16", "wb_wmma_fill_f32_16x16x16",
               "wb_wmma_load_a_f16_16x16x16", "wb_wmma_load_b_f16_16x16x16",
               "wb_wmma_store_f32_16x16x16"):
        assert fn in text


@pytest.mark.skipif(not _has_tensorize(), reason="Schedule.tensorize is not available")
def test_tensorize_refuses_the_wrong_intrinsic():
    cuda.register_all()
    sch = wb.Schedule(wb.from_script(MATMUL_FRAGMENTS))
    before = sch.mod
    loop = sch.get_loops(sch.get_block("update"))[0]
    with pytest.raises(wb.ScheduleError, match="update"):
        sch.tensorize(loop, "wmma_store_16x16x16_f32_global")
    assert sch.mod is before


@pytest.mark.tvm
def test_tvm_tensorizes_the_fragment_matmul_with_our_intrinsics():
    tvm = pytest.importorskip("tvm")
    from tvm.s_tir import Schedule, TensorIntrin

    def strip(text: str) -> str:  # TVM's parser takes no import line
        return text.split("\n", 3)[3]

    for name, intrin in cuda.CUDA_INTRINSICS.items():
        TensorIntrin.register("wb_test_" + name, tvm.script.from_source(strip(intrin.desc_text)),
                              tvm.script.from_source(strip(intrin.impl_text)), override=True)
    text = MATMUL_FRAGMENTS.replace("@T.prim_func", "@T.prim_func(s_tir=True)")
    sch = Schedule(tvm.script.from_source(text.replace("T.block(", "T.sblock(")))
    for block, intrin in [("update", "wmma_sync_16x16x16_f16f16f32"),
                          ("C_init", "wmma_fill_16x16x16_f32"),
                          ("A_load", "wmma_load_16x16x16_f16_a_global"),
                          ("C_store", "wmma_store_16x16x16_f32_global")]:
        sch.tensorize(sch.get_loops(sch.get_sblock(block))[0], "wb_test_" + intrin)
    out = sch.mod.script()
    assert "wb_wmma_mma_f16f16f32_16x16x16" in out and "wb_wmma_store_f32_16x16x16" in out
