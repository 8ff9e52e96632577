"""x86 tensor intrinsics (workbench.tensor_intrin.cpu): the C micro-kernels checked
against numpy on the CPU flags this machine has (the others skip, naming the missing
flag), their TVMScript description/implementation pairs, and a whole matmul tiled,
tensorized, built and compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.runtime.compiler import compile_shared
from workbench.tensor_intrin import cpu

FMA = [n for n, k in cpu.MICRO_KERNELS.items() if k.kind == "fma"]
DOT = ["x86_dot_u8s8s32_16x4_vnni", "x86_dot_u8s8s32_16x4_avx2"]


def needs(name: str):
    """Skip unless this machine has every CPU flag kernel ``name`` requires."""
    missing = cpu.MICRO_KERNELS[name].missing()
    return pytest.mark.skipif(bool(missing), reason=f"{name} needs the CPU flag(s) "
                              f"{', '.join(missing)}, which this machine lacks")


def runnable(names):
    return [pytest.param(n, marks=needs(n)) for n in names]


# -- the C sources -----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(cpu.MICRO_KERNELS))
def test_source_compiles_on_any_x86(name):
    # target attributes let every kernel compile, whatever this machine's flags
    assert compile_shared(cpu.standalone_source(cpu.MICRO_KERNELS[name])).exists()


def test_fma_kernels_keep_accumulators_in_registers():
    k = cpu.MICRO_KERNELS["x86_fma_f32_8x32_avx512"]
    assert k.source.count("_mm512_fmadd_ps") == 16 and "__m512 c7_1" in k.source
    assert 'target("avx512f")' in k.source and k.requires == ("avx512f",)
    k = cpu.MICRO_KERNELS["x86_fma_f32_6x16_avx2"]
    assert k.source.count("_mm256_fmadd_ps") == 12 and 'target("avx2,fma")' in k.source
    assert "_mm512_dpbusd_epi32" in cpu.MICRO_KERNELS["dot_16x4_vnni"].source


def test_fma_intrin_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match="multiple of 8"):
        cpu.fma_intrin(4, 12, 64, "avx2")
    with pytest.raises(ValueError, match="needs 19 vector registers; avx2 has 16"):
        cpu.fma_intrin(8, 16, 64, "avx2")
    with pytest.raises(ValueError, match="unknown ISA"):
        cpu.fma_intrin(4, 16, 64, "neon")


def test_best_intrin_follows_the_flags():
    assert cpu.best_fma_intrin(frozenset({"avx2", "fma", "avx512f"})) == \
        "x86_fma_f32_8x32_avx512"
    assert cpu.best_fma_intrin(frozenset({"avx2", "fma"})) == "x86_fma_f32_6x16_avx2"
    # the most accumulators whose tile divides the output
    assert cpu.best_fma_intrin(frozenset({"avx2", "fma"}), m=64, n=64) == \
        "x86_fma_f32_4x16_avx2"
    assert cpu.best_fma_intrin(frozenset({"avx2", "fma", "avx512f"}), m=90, n=64) == \
        "x86_fma_f32_6x32_avx512"
    assert cpu.best_fma_intrin(frozenset({"avx2", "fma"}), m=5) is None
    assert cpu.best_fma_intrin(frozenset({"avx2"})) is None  # AVX2 without FMA
    assert cpu.best_dot_intrin(frozenset({"avx2", "avx512f", "avx512_vnni"})) == \
        "x86_dot_u8s8s32_16x4_vnni"
    assert cpu.best_dot_intrin(frozenset({"sse4_2"})) is None
    here = cpu.best_fma_intrin()
    if here is not None:
        assert cpu.MICRO_KERNELS[here].supported()


def test_run_refuses_missing_flags_and_bad_arrays():
    k = cpu.MICRO_KERNELS["x86_fma_f32_4x16_avx2"]
    c, a, b = np.zeros((4, 16), "float32"), np.zeros((4, 64), "float32"), \
        np.zeros((64, 16), "float32")
    if k.supported():
        with pytest.raises(ValueError, match="takes a of shape"):
            cpu.run_micro_kernel(k, c, a[:, :32], b)
        with pytest.raises(ValueError, match="contiguous rows"):
            cpu.run_micro_kernel(k, c, np.zeros((4, 128), "float32")[:, ::2], b)
    absent = next((n for n in cpu.MICRO_KERNELS if cpu.MICRO_KERNELS[n].missing()), None)
    if absent is not None:  # never run an instruction the CPU lacks
        kernel = cpu.MICRO_KERNELS[absent]
        with pytest.raises(RuntimeError, match=kernel.missing()[0]):
            cpu.run_micro_kernel(kernel, c, a, b)


# -- numerics against numpy --------------------------------------------------------------


def _fma_ref(c, a, b):
    return (c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("name", runnable(FMA))
def test_fma_kernel_matches_numpy_on_strided_tiles(name):
    rows, cols, depth = cpu.MICRO_KERNELS[name].tile
    rng = np.random.default_rng(1)
    big_a = rng.standard_normal((rows + 2, depth + 7)).astype("float32")
    big_b = rng.standard_normal((depth + 1, cols + 9)).astype("float32")
    big_c = rng.standard_normal((rows + 3, cols + 5)).astype("float32")
    a, b = big_a[1:rows + 1, 3:depth + 3], big_b[1:, 5:cols + 5]
    c = big_c[2:rows + 2, 1:cols + 1]
    before = big_c.copy()
    want = _fma_ref(c, a, b)
    cpu.run_micro_kernel(name, c, a, b)
    scale = np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(before[2:rows + 2, 1:cols + 1])
    assert np.all(np.abs(c - want) <= 1e-5 * scale + 1e-6)
    outside = np.ones(big_c.shape, bool)
    outside[2:rows + 2, 1:cols + 1] = False
    assert np.array_equal(big_c[outside], before[outside])  # nothing else written


@pytest.mark.parametrize("name", runnable(FMA))
def test_fma_kernel_edge_values(name):
    rows, cols, depth = cpu.MICRO_KERNELS[name].tile
    a = np.zeros((rows, depth), "float32")
    b = np.zeros((depth, cols), "float32")
    c = np.zeros((rows, cols), "float32")
    a[0, 0], b[0, :] = np.inf, 1.0  # row 0: +inf everywhere
    a[1, :] = 0.0
    b[1, 0] = np.inf  # column 0: 0 * inf = nan in every row whose A[., 1] is 0
    a[2, 5], b[5, 3] = np.float32(3e38), np.float32(10.0)  # overflow to inf
    c[3, :] = -0.0  # -0.0 + 0 * x stays 0 (sign as IEEE sums give it)
    if rows > 4:
        a[4, 7], b[7, :] = np.float32(1e-38), np.float32(1e-3)  # subnormal products
    with np.errstate(invalid="ignore", over="ignore"):
        want = (c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64))
        want = want.astype("float32")
    cpu.run_micro_kernel(name, c, a, b)
    assert np.array_equal(np.isnan(c), np.isnan(want))
    assert np.isposinf(c[0, 1:]).all() and np.isnan(c[:, 0]).all()
    assert np.isposinf(c[2, 3])
    assert np.allclose(np.nan_to_num(c), np.nan_to_num(want), rtol=1e-6, atol=1e-44)


def _dot_ref(c, a, b):
    return (c.astype(np.int64) + b.astype(np.int64) @ a.astype(np.int64))


@pytest.mark.parametrize("name", runnable(DOT))
def test_dot_kernel_matches_numpy(name):
    rng = np.random.default_rng(2)
    for _ in range(20):
        a = rng.integers(0, 256, 4).astype("uint8")
        b = rng.integers(-128, 128, (16, 4)).astype("int8")
        c = rng.integers(-(2 ** 20), 2 ** 20, 16).astype("int32")
        want = _dot_ref(c, a, b)
        cpu.run_micro_kernel(name, c, a, b)
        assert np.array_equal(c, want)


@pytest.mark.parametrize("name", runnable(DOT))
def test_dot_kernel_edge_values(name):
    a = np.full(4, 255, "uint8")
    b = np.array([[127] * 4, [-128] * 4, [127, -128, 127, -128], [0] * 4] * 4, "int8")
    c = np.zeros(16, "int32")
    cpu.run_micro_kernel(name, c, a, b)
    # 255 * 127 * 2 = 64770 overflows an int16 pair sum: exact here (no saturation)
    assert c[:4].tolist() == [129540, -130560, -510, 0]
    c = np.full(16, np.iinfo(np.int32).max, "int32")
    cpu.run_micro_kernel(name, c, a, b)  # int32 wraps around, as the description's sum
    want = (np.int64(np.iinfo(np.int32).max) + b.astype(np.int64) @ a.astype(np.int64))
    assert np.array_equal(c, ((want + 2 ** 31) % 2 ** 32 - 2 ** 31).astype("int32"))


# -- TVMScript pairs ---------------------------------------------------------------------


def test_desc_and_impl_read_as_tvmscript():
    k = cpu.MICRO_KERNELS["x86_fma_f32_4x16_avx2"]
    desc, impl = wb.from_script(k.desc_text), wb.from_script(k.impl_text)
    assert [p.shape for p in desc.params] == [(4, 64), (64, 16), (4, 16)]
    assert [p.shape for p in impl.params] == [(4, 64), (64, 16), (4, 16)]
    assert k.c_name in impl.script() and "lda" in impl.script()
    d = cpu.MICRO_KERNELS["dot_16x4_vnni"]
    assert [p.dtype for p in wb.from_script(d.desc_text).params] == ["uint8", "int8", "int32"]


def test_desc_computes_the_tile_product():
    # the description, run by the reference evaluator, is C += A @ B
    k = cpu.MICRO_KERNELS["x86_fma_f32_6x16_avx2"]
    from workbench.runtime.reference import evaluate

    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 64)).astype("float32")
    b = rng.standard_normal((64, 16)).astype("float32")
    c = rng.standard_normal((6, 16)).astype("float32")
    want = _fma_ref(c, a, b)
    evaluate(wb.from_script(k.desc_text), a, b, c)
    assert np.allclose(c, want, rtol=1e-5, atol=1e-5)


MATMUL_TVM = """
@T.prim_func(s_tir=True)
def mm(A: T.Buffer((32, 128), "float32"), B: T.Buffer((128, 32), "float32"),
       C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 128):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


@pytest.mark.tvm
def test_tvm_tensorizes_a_matmul_with_our_intrinsic():
    tvm = pytest.importorskip("tvm")
    from tvm.s_tir import Schedule, TensorIntrin

    k = cpu.MICRO_KERNELS["x86_fma_f32_4x16_avx2"]
    strip = lambda t: t.split("\n", 3)[3]  # noqa: E731  TVM's parser wants no import line
    TensorIntrin.register("wb_test_" + k.name, tvm.script.from_source(strip(k.desc_text)),
                          tvm.script.from_source(strip(k.impl_text)), override=True)
    sch = Schedule(tvm.script.from_source(MATMUL_TVM))
    block = sch.get_sblock("C")
    i, j, kk = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(kk, [None, 64])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.decompose_reduction(block, k0)
    sch.tensorize(i1, "wb_test_" + k.name)
    assert k.c_name in sch.mod.script()


# -- tensorize, built end to end ---------------------------------------------------------

has_tensorize = pytest.mark.skipif(not hasattr(wb.Schedule, "tensorize"),
                                   reason="Schedule.tensorize is not available")
BEST_FMA = cpu.best_fma_intrin(m=64, n=64)
BEST_DOT = cpu.best_dot_intrin()
needs_fma = pytest.mark.skipif(BEST_FMA is None, reason="this machine has neither "
                               "avx2+fma nor avx512f (no FMA intrinsic runs)")
needs_dot = pytest.mark.skipif(BEST_DOT is None, reason="this machine has no avx2")


def _tiled(func, name: str, k_block: int | None = None):
    rows, cols, depth = cpu.MICRO_KERNELS[name].tile
    sch = wb.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, factors=[None, rows])
    j0, j1 = sch.split(j, factors=[None, cols])
    k0, k1 = sch.split(k, factors=[None, k_block or depth])
    sch.reorder(j0, i0, k0, i1, j1, k1)
    sch.parallel(j0)
    sch.decompose_reduction(block, k0)
    return sch, i1


def test_register_all_registers_kernels_and_c_functions():
    from workbench.codegen.extern import c_function

    names = cpu.register_all()
    for name in names:
        k = cpu.MICRO_KERNELS[name]
        assert wb.TensorIntrin.get(name).impl is not None
        assert c_function(k.c_name).requires == k.requires


@has_tensorize
@needs_fma
def test_tensorized_matmul_matches_numpy():
    cpu.register_all()
    rows, cols, depth = cpu.MICRO_KERNELS[BEST_FMA].tile
    m, n, k = 4 * rows, 4 * cols, 3 * depth
    func = wb.workloads.matmul(m, n, k)
    sch, i1 = _tiled(func, BEST_FMA)
    sch.tensorize(i1, BEST_FMA)
    kernel = wb.build(sch.mod)
    assert cpu.MICRO_KERNELS[BEST_FMA].c_name in kernel.source
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    c = np.full((m, n), np.nan, "float32")
    kernel(a, b, c)
    assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@has_tensorize
@needs_fma
def test_tensorize_matches_a_tile_read_through_a_packed_layout():
    """B copied into ``cols``-wide panels: the tile reads ``B_global[(vj_o * cols + vj) //
    cols, vk, (vj_o * cols + vj) % cols]``, which is the description's ``B[vk, vj]`` once
    ``vj < cols`` is used; the packed kernel computes the matmul."""
    cpu.register_all()
    rows, cols, depth = cpu.MICRO_KERNELS[BEST_FMA].tile
    m, n, k = 2 * rows, 3 * cols, 2 * depth
    func = wb.workloads.matmul(m, n, k)
    sch = wb.Schedule(func)
    block = sch.get_block("C")
    sch.cache_read(block, 1, "global")
    sch.transform_layout(block, ("read", 1), lambda kk, jj: (jj // cols, kk, jj % cols))
    i, j, kk = sch.get_loops(block)
    i0, i1 = sch.split(i, factors=[None, rows])
    j0, j1 = sch.split(j, factors=[None, cols])
    k0, k1 = sch.split(kk, factors=[None, depth])
    sch.reorder(j0, i0, k0, i1, j1, k1)
    sch.decompose_reduction(block, k0)
    sch.tensorize(i1, BEST_FMA)
    assert f"B_global[vj_o, vk_o * {depth}:vk_o * {depth} + {depth}, 0:{cols}]" in \
        sch.mod.script()
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    c = np.full((m, n), np.nan, "float32")
    wb.build(sch.mod)(a, b, c)
    assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@has_tensorize
@needs_fma
def test_tensorize_refuses_a_tile_of_the_wrong_k_block():
    cpu.register_all()
    depth = cpu.MICRO_KERNELS[BEST_FMA].tile[2]
    sch, i1 = _tiled(wb.workloads.matmul(64, 64, 4 * depth), BEST_FMA, k_block=2 * depth)
    before = sch.mod
    with pytest.raises(wb.ScheduleError, match="C_update"):
        sch.tensorize(i1, BEST_FMA)
    assert sch.mod is before


INT8_MATMUL = """
@T.prim_func
def qmm(A: T.Buffer((8, 32), "uint8"), B: T.Buffer((2, 8, 16, 4), "int8"),
        C: T.Buffer((8, 32), "int32")):
    for i, jo, ko, ji, ki in T.grid(8, 2, 8, 16, 4):
        with T.block("C"):
            vi, vjo, vko, vji, vki = T.axis.remap("SSRSR", [i, jo, ko, ji, ki])
            with T.init():
                C[vi, vjo * 16 + vji] = 0
            C[vi, vjo * 16 + vji] = C[vi, vjo * 16 + vji] + \\
                T.Cast("int32", A[vi, vko * 4 + vki]) * T.Cast("int32", B[vjo, vko, vji, vki])
"""


@has_tensorize
@needs_dot
def test_tensorized_int8_matmul_matches_numpy():
    # B packed as TVM's dot_16x4 wants it: [N / 16, K / 4, 16, 4]
    cpu.register_all()
    sch = wb.Schedule(wb.from_script(INT8_MATMUL))
    block = sch.get_block("C")
    _, _, ko, ji, _ = sch.get_loops(block)
    sch.decompose_reduction(block, ko)
    sch.tensorize(ji, BEST_DOT)
    kernel = wb.build(sch.mod)
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (8, 32)).astype("uint8")
    a[0] = 255
    b = rng.integers(-128, 128, (2, 8, 16, 4)).astype("int8")
    b[0, :, 0] = 127
    c = np.zeros((8, 32), "int32")
    kernel(a, b, c)
    b_nk = b.transpose(0, 2, 1, 3).reshape(32, 32)
    assert np.array_equal(c, a.astype(np.int64) @ b_nk.T.astype(np.int64))
