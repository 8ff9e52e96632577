"""Tests of the C code generator: golden snippets of the source and numerics against numpy
on hand-built scheduled IR (parallel/vectorized/unrolled loops, non-dividing splits, local
buffers in nested blocks, fused loops, thread bindings, storage_align)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import C_DIALECT, CodegenError, buffer_strides, generate_c
from workbench.codegen.dialect import Dialect
from workbench.ir import (
    Block,
    Buffer,
    BufferStore,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    IfThenElse,
    IntImm,
    IterVar,
    PrimFunc,
    SeqStmt,
    Var,
)
from workbench.runtime.cpu import build

# ---------------------------------------------------------------------------
# IR builders


def te_mm_relu(m: int = 128, n: int = 128, k: int = 128, dtype: str = "float32") -> PrimFunc:
    A = wb.placeholder((m, k), dtype, name="A")
    B = wb.placeholder((k, n), dtype, name="B")
    r = wb.reduce_axis(k, name="k")
    Y = wb.compute((m, n), lambda i, j: wb.sum(A[i, r] * B[r, j], axis=r), name="Y")
    C = wb.compute((m, n), lambda i, j: wb.max(Y[i, j], 0.0), name="C")
    return wb.create_prim_func([A, B, C], name="mm_relu")


def root(body, allocs=()) -> Block:
    return Block("root", (), (), body, alloc_buffers=tuple(allocs))


def scheduled_mm_relu(m: int = 128, n: int = 130, k: int = 128) -> PrimFunc:
    """mm_relu after: split j by [None, 4] (non-dividing for n=130: T.where), parallel i,
    cache_write Y into a 4-element local buffer allocated by a nested block, the k loop
    outside the vectorized j_1 loop, and C computed at j_0."""
    A, B, C = Buffer("A", (m, k)), Buffer("B", (k, n)), Buffer("C", (m, n))
    Yl = Buffer("Y_local", (4,), scope="local")
    n0 = (n + 3) // 4
    i, j0, j1, kk, j1c = Var("i"), Var("j_0"), Var("j_1"), Var("k"), Var("j_1")
    ti, tj = Var("vi_o"), Var("vj_o")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    update = Block(
        "Y",
        (IterVar(vi, m), IterVar(vj, n), IterVar(vk, k, "R")),
        (ti, j0 * 4 + j1, kk),
        BufferStore(Yl, Yl[vj - tj * 4] + A[vi, vk] * B[vk, vj], (vj - tj * 4,)),
        init=BufferStore(Yl, FloatImm(0.0), (vj - tj * 4,)),
        predicate=j0 * 4 + j1 < n,
    )
    ci, cj = Var("vi"), Var("vj")
    relu = Block(
        "C",
        (IterVar(ci, m), IterVar(cj, n)),
        (ti, j0 * 4 + j1c),
        BufferStore(C, wb.max(Yl[cj - tj * 4], 0.0), (ci, cj)),
        predicate=j0 * 4 + j1c < n,
    )
    tile = Block(
        "tile",
        (IterVar(ti, m), IterVar(tj, n0)),
        (i, j0),
        SeqStmt((For(kk, k, "serial", For(j1, 4, "vectorized", update)),
                 For(j1c, 4, "vectorized", relu))),
        alloc_buffers=(Yl,),
    )
    body = For(i, m, "parallel", For(j0, n0, "serial", tile))
    return PrimFunc("mm_relu", (A, B, C), root(body))


def elementwise(shape, dtype, fn, name="ew") -> PrimFunc:
    A = wb.placeholder(shape, dtype, name="A")
    B = wb.compute(shape, lambda *idx: fn(A[idx]), name="B")
    return wb.create_prim_func([A, B], name=name)


def run(func: PrimFunc, *arrays: np.ndarray) -> list[np.ndarray]:
    arrays = [np.ascontiguousarray(a) for a in arrays]
    build(func)(*arrays)
    return arrays


def rand(shape, dtype="float32", seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------------------
# golden source snippets


def test_simple_loop_nest_source():
    src = generate_c(te_mm_relu())
    assert "int32_t mm_relu(float* __restrict__ A, float* __restrict__ B, " \
           "float* __restrict__ C) {" in src
    assert "for (int32_t i = 0; i < 128; ++i) {" in src
    assert "{  // block Y" in src and "{  // block C" in src
    assert "const int32_t vk = k;" in src
    assert "if (vk == 0) {\n" in src
    assert "Y[vi * 128 + vj] = Y[vi * 128 + vj] + A[vi * 128 + vk] * B[vk * 128 + vj];" in src
    assert "C[vi * 128 + vj] = wb_max_float32(Y[vi * 128 + vj], 0.0f);" in src
    # the root intermediate lives on the heap, freed, with a failure path
    assert "float* __restrict__ Y = (float*)wb_alloc(65536);" in src
    assert "if (Y == NULL) {\n    return -1;\n  }" in src
    assert src.rstrip().endswith("free(Y);\n  return 0;\n}")
    assert "#pragma" not in src.split("mm_relu(")[1]


def test_source_is_deterministic():
    assert generate_c(te_mm_relu()) == generate_c(te_mm_relu())
    assert generate_c(scheduled_mm_relu()) == generate_c(scheduled_mm_relu())


def test_scheduled_source_has_pragmas_predicate_and_local_buffer():
    src = generate_c(scheduled_mm_relu())
    lines = [x.strip() for x in src.splitlines()]
    par = lines.index("#pragma omp parallel for")
    assert lines[par + 1] == "for (int32_t i = 0; i < 128; ++i) {"
    assert lines.count("#pragma omp simd") == 2
    assert "for (int32_t j_1 = 0; j_1 < 4; ++j_1) {" in lines
    assert "if (j_0 * 4 + j_1 < 130) {  // block Y" in lines
    assert "float Y_local[4] __attribute__((aligned(64)));  // local" in lines
    assert "const int32_t vj = j_0 * 4 + j_1;" in lines
    assert "Y_local[vj - vj_o * 4] = 0.0f;" in lines
    # the tile block opens a scope inside the parallel loop: a private Y_local per thread
    assert lines.index("{  // block tile") > par


def test_nested_parallel_and_reduction_loops_run_serially():
    A, B = Buffer("A", (8, 8)), Buffer("B", (8,))
    i, j = Var("i"), Var("j")
    vi, vj = Var("vi"), Var("vj")
    blk = Block("B", (IterVar(vi, 8), IterVar(vj, 8, "R")), (i, j),
                BufferStore(B, B[vi] + A[vi, vj], (vi,)),
                init=BufferStore(B, FloatImm(0.0), (vi,)))
    func = PrimFunc("rowsum", (A, B), root(For(i, 8, "parallel", For(j, 8, "parallel", blk))))
    src = generate_c(func)
    assert src.count("#pragma omp parallel for") == 1
    assert "// parallel loop runs serially: inside a parallel loop" in src
    vec = PrimFunc("rowsum", (A, B), root(For(i, 8, "serial", For(j, 8, "vectorized", blk))))
    src = generate_c(vec)
    assert "#pragma omp simd" not in src
    assert "vectorized loop runs serially: iterations store to the same elements of B" in src
    a = rand((8, 8))
    (_, b) = run(vec, a, np.zeros(8, "float32"))
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5, atol=1e-5)


def test_unrolled_loop_and_annotations():
    A, B = Buffer("A", (16,)), Buffer("B", (16,))
    i, vi = Var("i"), Var("vi")
    blk = Block("B", (IterVar(vi, 16),), (i,), BufferStore(B, A[vi] * 3.0, (vi,)),
                annotations=(("note", "hi"),))
    loop = For(i, 16, "unrolled", blk, annotations=(("pragma_auto_unroll_max_step", 16),))
    src = generate_c(PrimFunc("u", (A, B), root(loop)))
    assert "#pragma GCC unroll 16\n" in src
    assert "// annotation pragma_auto_unroll_max_step = 16" in src
    assert "// annotation note = 'hi'" in src
    a = rand(16)
    np.testing.assert_array_equal(run(PrimFunc("u", (A, B), root(loop)), a, a * 0)[1], a * 3)


def test_storage_align_pads_strides():
    assert buffer_strides(Buffer("S", (4, 30), align=((0, 32, 1),))) == ((33, 1), 132)
    assert buffer_strides(Buffer("S", (2, 3, 5), align=((1, 8, 0),))) == ((24, 8, 1), 48)
    assert buffer_strides(Buffer("S", (4, 30))) == ((30, 1), 120)
    # an intermediate with an aligned row stride: indices use it, results are unchanged
    A, C = Buffer("A", (16, 30)), Buffer("C", (16, 30))
    S = Buffer("S", (16, 30), scope="shared", align=((0, 32, 8),))
    i, j, i2, j2 = Var("i"), Var("j"), Var("i"), Var("j")
    vi, vj, wi, wj = Var("vi"), Var("vj"), Var("vi"), Var("vj")
    s = Block("S", (IterVar(vi, 16), IterVar(vj, 30)), (i, j),
              BufferStore(S, A[vi, vj] + 1.0, (vi, vj)))
    c = Block("C", (IterVar(wi, 16), IterVar(wj, 30)), (i2, j2),
              BufferStore(C, S[wi, wj] * 2.0, (wi, wj)))
    body = SeqStmt((For(i, 16, "serial", For(j, 30, "serial", s)),
                    For(i2, 16, "serial", For(j2, 30, "serial", c))))
    func = PrimFunc("aligned", (A, C), root(body, [S]))
    src = generate_c(func)
    assert "float S[640] __attribute__((aligned(64)));  // shared" in src
    assert "S[vi * 40 + vj] = A[vi * 30 + vj] + 1.0f;" in src
    a = rand((16, 30))
    np.testing.assert_allclose(run(func, a, a * 0)[1], (a + 1) * 2, rtol=1e-6)


def test_float_constants_are_exact_and_special_values():
    src = generate_c(elementwise((4,), "float32", lambda x: x * 0.1 + 1e20))
    assert "0.1f" in src and "1e+20f" in src
    src64 = generate_c(elementwise((4,), "float64", lambda x: x * 0.1))
    assert "B[vi0] = A[vi0] * 0.1;" in src64
    inf = generate_c(elementwise((4,), "float32", lambda x: wb.max(x, float("-inf"))))
    assert "-INFINITY" in inf


def test_int64_flat_indices_for_huge_buffers():
    A = Buffer("A", (65536, 65536), "float32")
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    blk = Block("A", (IterVar(vi, 65536), IterVar(vj, 65536)), (i, j),
                BufferStore(A, FloatImm(1.0), (vi, vj)))
    src = generate_c(PrimFunc("fill", (A,), root(For(i, 65536, "serial",
                                                     For(j, 65536, "serial", blk)))))
    assert "A[(int64_t)vi * INT64_C(65536) + (int64_t)vj] = 1.0f;" in src


def test_names_are_sanitized_and_deduplicated():
    A = Buffer("A", (4,))
    B = Buffer("B", (4,))
    i1, i2 = Var("i.outer"), Var("i.outer")
    v1, v2 = Var("exp"), Var("v")
    b1 = Block("B", (IterVar(v1, 4),), (i1,), BufferStore(B, wb.exp(A[v1]), (v1,)))
    b2 = Block("B2", (IterVar(v2, 4),), (i2 * 0 + i1,), BufferStore(B, B[v2] + 1.0, (v2,)))
    func = PrimFunc("main", (A, B), root(For(i1, 4, "serial", SeqStmt((
        b1, For(i2, 1, "serial", b2))))))
    src = generate_c(func)
    assert "int32_t main_kernel(" in src
    assert "for (int32_t i_outer = 0;" in src and "for (int32_t i_outer_1 = 0;" in src
    assert "const int32_t exp_1 = i_outer;" in src  # `exp` is a libm function
    a = rand(4)
    np.testing.assert_allclose(run(func, a, a * 0)[1], np.exp(a) + 1, rtol=1e-6)


def test_unbound_variable_and_unknown_buffer_are_refused():
    A, B, T = Buffer("A", (4,)), Buffer("B", (4,)), Buffer("T", (4,))
    i, vi, stray = Var("i"), Var("vi"), Var("stray")
    bad_var = Block("B", (IterVar(vi, 4),), (i,), BufferStore(B, A[stray], (vi,)))
    with pytest.raises(CodegenError, match="stray"):
        generate_c(PrimFunc("f", (A, B), root(For(i, 4, "serial", bad_var))))
    bad_buf = Block("B", (IterVar(vi, 4),), (i,), BufferStore(B, T[vi], (vi,)))
    with pytest.raises(CodegenError, match="'T'"):
        generate_c(PrimFunc("f", (A, B), root(For(i, 4, "serial", bad_buf))))


def test_dialect_is_data():
    assert isinstance(C_DIALECT, Dialect)
    assert C_DIALECT.math("sqrt", "float32", "x") == "sqrtf(x)"
    assert C_DIALECT.math("sqrt", "float64", "x") == "sqrt(x)"
    assert C_DIALECT.math("sigmoid", "float32", "x") == "(1.0f / (1.0f + expf(-(x))))"
    with pytest.raises(AttributeError):
        C_DIALECT.name = "cuda"  # type: ignore[misc]
    import inspect

    import workbench.codegen.cstyle as cstyle

    assert not re.search(r"\bcuda\b", inspect.getsource(cstyle).lower())


# ---------------------------------------------------------------------------
# numerics


def test_mm_relu_unscheduled_matches_numpy():
    a, b = rand((128, 128), seed=1), rand((128, 128), seed=2)
    c = run(te_mm_relu(), a, b, np.zeros((128, 128), "float32"))[2]
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_scheduled_mm_relu_matches_numpy():
    a, b = rand((128, 128), seed=3), rand((128, 130), seed=4)
    c = np.full((128, 130), np.nan, "float32")
    kernel = build(scheduled_mm_relu())
    kernel(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    # the predicate is honoured: 130 columns count, not 33 * 4
    assert kernel.flops == 2 * 128 * 130 * 128 + 128 * 130


def test_fused_loop_uses_plain_division_when_provably_nonnegative():
    A, B = Buffer("A", (16, 24)), Buffer("B", (16, 24))
    f, vi, vj = Var("i_j_fused"), Var("vi"), Var("vj")
    blk = Block("B", (IterVar(vi, 16), IterVar(vj, 24)), (f // 24, f % 24),
                BufferStore(B, A[vi, vj] - 2.0, (vi, vj)))
    func = PrimFunc("fused", (A, B), root(For(f, 384, "parallel", blk)))
    src = generate_c(func)
    assert "const int32_t vi = i_j_fused / 24;" in src
    assert "const int32_t vj = i_j_fused % 24;" in src
    assert "wb_floordiv" not in src
    a = rand((16, 24))
    np.testing.assert_array_equal(run(func, a, a * 0)[1], a - 2)


def test_floordiv_floormod_helpers_have_floor_semantics():
    A = Buffer("A", (48,), "int32")
    B, C = Buffer("B", (48,), "int32"), Buffer("C", (48,), "int32")
    i, vi = Var("i"), Var("vi")
    blk = Block("B", (IterVar(vi, 48),), (i,), SeqStmt((
        BufferStore(B, FloorDiv(vi - 20, IntImm(7)) + A[vi] // 3, (vi,)),
        BufferStore(C, FloorMod(vi - 20, IntImm(7)) + A[vi] % 3, (vi,)),
    )))
    func = PrimFunc("fdiv", (A, B, C), root(For(i, 48, "serial", blk)))
    src = generate_c(func)
    assert "wb_floordiv_int32(vi - 20, 7)" in src and "wb_floormod_int32(vi - 20, 7)" in src
    a = np.arange(-24, 24, dtype="int32")
    _, b, c = run(func, a, np.zeros(48, "int32"), np.zeros(48, "int32"))
    v = np.arange(48)
    np.testing.assert_array_equal(b, (v - 20) // 7 + a // 3)
    np.testing.assert_array_equal(c, (v - 20) % 7 + a % 3)


def test_thread_binding_runs_sequentially_with_shared_buffer():
    """A GPU-style matmul: blockIdx/threadIdx loops, a shared tile loaded by the threads."""
    n, t = 32, 8
    A, B, C = Buffer("A", (n, n)), Buffer("B", (n, n)), Buffer("C", (n, n))
    As = Buffer("A_shared", (t, n), scope="shared")
    bx, tx, k, ax, tx2 = Var("bx"), Var("tx"), Var("k"), Var("ax"), Var("tx")
    oi = Var("vbx")
    si, sk = Var("v0"), Var("v1")
    load = Block("A_shared", (IterVar(si, n), IterVar(sk, n)), (bx * t + tx2, ax),
                 BufferStore(As, A[si, sk], (si - oi * t, sk)))
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    j = Var("j")
    mm = Block("C", (IterVar(vi, n), IterVar(vj, n), IterVar(vk, n, "R")),
               (bx * t + tx, j, k),
               BufferStore(C, C[vi, vj] + As[vi - oi * t, vk] * B[vk, vj], (vi, vj)),
               init=BufferStore(C, FloatImm(0.0), (vi, vj)))
    outer = Block(
        "C_o", (IterVar(oi, n // t),), (bx,),
        SeqStmt((
            For(ax, n, "serial", For(tx2, t, "thread_binding", load, thread_tag="threadIdx.x")),
            For(tx, t, "thread_binding",
                For(j, n, "serial", For(k, n, "serial", mm)), thread_tag="threadIdx.x"),
        )),
        alloc_buffers=(As,),
    )
    func = PrimFunc("gpu_mm", (A, B, C),
                    root(For(bx, n // t, "thread_binding", outer, thread_tag="blockIdx.x")))
    src = generate_c(func)
    assert "// thread_binding blockIdx.x\n" in src
    assert src.count("// thread_binding threadIdx.x\n") == 2
    assert "float A_shared[256] __attribute__((aligned(64)));  // shared" in src
    assert "#pragma" not in src.split("gpu_mm(")[1]
    a, b = rand((n, n), seed=5), rand((n, n), seed=6)
    c = run(func, a, b, np.zeros((n, n), "float32"))[2]
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_int32_matmul_is_exact():
    A = wb.placeholder((16, 12), "int32", name="A")
    B = wb.placeholder((12, 8), "int32", name="B")
    r = wb.reduce_axis(12, name="k")
    C = wb.compute((16, 8), lambda i, j: wb.sum(A[i, r] * B[r, j], axis=r), name="C")
    func = wb.create_prim_func([A, B, C], name="imm")
    src = generate_c(func)
    assert "int32_t* __restrict__ A" in src and "C[vi * 8 + vj] = 0;" in src
    rng = np.random.default_rng(0)
    a = rng.integers(-50, 50, (16, 12)).astype("int32")
    b = rng.integers(-50, 50, (12, 8)).astype("int32")
    c = run(func, a, b, np.zeros((16, 8), "int32"))[2]
    np.testing.assert_array_equal(c, a @ b)


def test_float64_matmul():
    func = te_mm_relu(32, 24, 40, dtype="float64")
    assert "double* __restrict__ A" in generate_c(func)
    a, b = rand((32, 40), "float64", 7), rand((40, 24), "float64", 8)
    c = run(func, a, b, np.zeros((32, 24)))[2]
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_math_functions(dtype):
    def fn(x):
        return (wb.exp(x) + wb.sqrt(wb.fabs(x)) + wb.sigmoid(x) + wb.tanh(x)
                + wb.rsqrt(wb.fabs(x) + 1.0) + wb.log(wb.fabs(x) + 1.0))

    func = elementwise((64,), dtype, fn)
    src = generate_c(func)
    sfx = "f" if dtype == "float32" else ""
    for name in ("exp", "sqrt", "tanh", "log", "fabs"):
        assert f"{name}{sfx}(" in src
    a = rand(64, dtype, seed=9)
    b = run(func, a, np.zeros(64, dtype))[1]
    ax = np.abs(a)
    want = np.exp(a) + np.sqrt(ax) + 1 / (1 + np.exp(-a)) + np.tanh(a) + 1 / np.sqrt(ax + 1) \
        + np.log(ax + 1)
    tol = 1e-5 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(b, want, rtol=tol, atol=tol)


def test_select_cast_and_if_then_else():
    A, B = Buffer("A", (10,)), Buffer("B", (10,), "int32")
    i, vi = Var("i"), Var("vi")
    val = wb.cast(wb.select(A[vi] > 0.0, A[vi] * 10.0, -A[vi]), "int32")
    body = IfThenElse(vi.equal(3), BufferStore(B, IntImm(-7), (vi,)), BufferStore(B, val, (vi,)))
    func = PrimFunc("sel", (A, B), root(For(i, 10, "serial",
                                                Block("B", (IterVar(vi, 10),), (i,), body))))
    src = generate_c(func)
    assert "(int32_t)((A[vi] > 0.0f) ? A[vi] * 10.0f : 0.0f - A[vi])" in src
    assert "if (vi == 3) {" in src and "} else {" in src
    a = rand(10, seed=11)
    b = run(func, a, np.zeros(10, "int32"))[1]
    want = np.where(a > 0, a * 10, -a).astype("int32")
    want[3] = -7
    np.testing.assert_array_equal(b, want)


def test_large_block_allocation_goes_to_heap_per_thread():
    """A 128 KiB buffer allocated inside a parallel loop: heap, one per iteration."""
    A, C = Buffer("A", (4, 32768)), Buffer("C", (4, 32768))
    T = Buffer("T", (32768,), scope="global")
    i, j, j2 = Var("i"), Var("j"), Var("j")
    ti = Var("vi_o")
    vj, wj = Var("vj"), Var("vj")
    fill = Block("T", (IterVar(vj, 32768),), (j,), BufferStore(T, A[ti, vj] * 2.0, (vj,)))
    use = Block("C", (IterVar(wj, 32768),), (j2,), BufferStore(C, T[wj] + 1.0, (ti, wj)))
    tile = Block("row", (IterVar(ti, 4),), (i,),
                 SeqStmt((For(j, 32768, "serial", fill), For(j2, 32768, "serial", use))),
                 alloc_buffers=(T,))
    func = PrimFunc("rows", (A, C), root(For(i, 4, "parallel", tile)))
    src = generate_c(func)
    assert "int32_t wb_status = 0;" in src and "return wb_status;" in src
    assert "float* __restrict__ T = (float*)wb_alloc(131072);" in src
    a = rand((4, 32768))
    np.testing.assert_allclose(run(func, a, a * 0)[1], a * 2 + 1, rtol=1e-6)
