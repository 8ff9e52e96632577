"""GPU planning (kernels, launch sizes, legality, barriers) and the CUDA printer.

Every generated kernel is compiled with ``nvcc -ptx`` for sm_80 and sm_90 (tests marked
``nvcc``: skipped with the reason where nvcc is missing).
"""

from __future__ import annotations

import re

import pytest

import workbench as wb
from workbench.codegen.cuda import generate_cuda
from workbench.codegen.gpu import (
    BlockBindingError,
    SharedMemoryLimitError,
    SharedOutsideKernelError,
    ThreadsPerBlockError,
    UnboundLoopError,
    plan_device_module,
)
from workbench.codegen.gpu_plan import is_barrier
from workbench.gpu_examples import gpu_matmul_schedule
from workbench.ir.stmt import For, SeqStmt

ARCHS = ("sm_80", "sm_90")


def _plan(mod, target="cuda"):
    return plan_device_module(wb.lower(mod), target)


def _nvcc_ok(src: str) -> None:
    from workbench.codegen.nvcc import compile_cuda

    for arch in ARCHS:
        ptx = compile_cuda(src, arch=arch)
        for name in re.findall(r'extern "C" __global__ void __launch_bounds__\(\d+\) (\w+)\(', src):
            assert f".entry {name}(" in ptx, (arch, name)


def _elementwise(n=1024, threads=128):
    A = wb.placeholder((n,), "float32", name="A")
    B = wb.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    sch = wb.Schedule(wb.create_prim_func([A, B], name="scale"))
    (i,) = sch.get_loops("B")
    bx, tx = sch.split(i, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def _mm_relu_two_kernels(n=64):
    sch = wb.Schedule(wb.workloads.mm_relu(n, n, n))
    for name in ("Y", "C"):
        loops = sch.get_loops(name)
        bx, tx = sch.split(loops[0], [None, 16])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        sch.bind(loops[1], "threadIdx.y")
    return sch


def _body_seq_of(loop_name: str, stmt):
    """The statements of the body of the first loop called ``loop_name``."""
    from workbench.ir.functor import iter_stmts

    for s in iter_stmts(stmt):
        if isinstance(s, For) and s.loop_var.name == loop_name:
            return list(s.body.stmts) if isinstance(s.body, SeqStmt) else [s.body]
    raise AssertionError(loop_name)


# -- planning ----------------------------------------------------------------------------
def test_matmul_plan_launch_and_memory():
    plan = _plan(gpu_matmul_schedule(128).mod)
    (k,) = plan.kernels
    assert (k.name, k.launch.grid, k.launch.block) == ("matmul_kernel", (2, 2, 1), (16, 16, 1))
    assert [(b.name, b.shape) for b in k.shared] == [("A_shared", (64, 8)), ("B_shared", (8, 64))]
    assert [(b.name, b.shape) for b in k.local] == [("C_local", (4, 4))]
    # storage_align pads A_shared's rows from 8 to 33 floats
    assert k.shared_bytes == (64 * 33 + 8 * 64) * 4
    unaligned = _plan(gpu_matmul_schedule(128, align=False).mod).kernels[0]
    assert unaligned.shared_bytes == (64 * 8 + 8 * 64) * 4
    assert [p.name for p in k.params] == ["A", "B", "C"]


def test_barriers_where_tvm_puts_them():
    """One barrier at the top of each k step (the last step's compute still reads the
    tiles) and one between the fetches and the compute; none between the two fetches."""
    (k,) = _plan(gpu_matmul_schedule(128).mod).kernels
    body = _body_seq_of("k_0", k.body)
    kinds = ["barrier" if is_barrier(s) else s.loop_var.name for s in body]
    assert kinds == ["barrier", "ax0_ax1_fused_0", "ax0_ax1_fused_0", "barrier", "k_1"]
    from workbench.ir.functor import iter_stmts

    assert sum(is_barrier(s) for s in iter_stmts(k.body)) == 2


def test_no_barrier_without_shared_memory():
    (k,) = _plan(_elementwise().mod).kernels
    from workbench.ir.functor import iter_stmts

    assert not any(is_barrier(s) for s in iter_stmts(k.body))
    assert (k.launch.grid, k.launch.block, k.shared, k.local) == ((8, 1, 1), (128, 1, 1), (), ())


def test_two_kernels_share_a_global_intermediate():
    plan = _plan(_mm_relu_two_kernels().mod)
    (f,) = plan.functions
    assert [k.name for k in f.kernels] == ["mm_relu_kernel_0", "mm_relu_kernel_1"]
    assert [b.name for b in f.intermediates] == ["Y"]
    assert [p.name for p in f.kernels[0].params] == ["A", "B", "C", "Y"]
    assert f.kernels[0].launch.block == (16, 64, 1)


def test_narrower_thread_loop_is_guarded():
    """Two loops on threadIdx.x with extents 64 and 32 in one kernel: the launch has 64
    threads and the 32-thread loop runs under ``if (threadIdx.x < 32)`` (TVM 0.27 instead
    launches the first loop's extent and leaves the other unguarded)."""
    src = """
@T.prim_func
def two(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4, 64), "float32"),
        C: T.Buffer((4, 32), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("B"):
                vb, vt = T.axis.remap("SS", [bx, tx])
                B[vb, vt] = A[vb, vt] * T.float32(2)
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("C"):
                vb, vt = T.axis.remap("SS", [bx, tx])
                C[vb, vt] = A[vb, vt] + T.float32(1)
"""
    (k,) = _plan(wb.from_script(src)).kernels
    assert k.launch.block == (64, 1, 1)
    cuda = generate_cuda(wb.from_script(src))
    assert "if (tx_1 < 32) {" in cuda or "if (tx < 32) {" in cuda


# -- legality ----------------------------------------------------------------------------
def test_unbound_root_loop_refused():
    func = wb.workloads.matmul(64, 64, 64)
    with pytest.raises(UnboundLoopError, match=r"loop 'i' is not bound to a thread"):
        _plan(func)


def test_serial_loop_around_bound_loops_refused():
    sch = wb.Schedule(wb.workloads.matmul(64, 64, 64))
    i, j, k = sch.get_loops("C")
    sch.bind(j, "blockIdx.x")
    with pytest.raises(UnboundLoopError, match=r"loop 'i' encloses loops bound to GPU threads"):
        _plan(sch.mod)


def test_too_many_threads_refused():
    sch = _elementwise(n=4096, threads=2048)
    with pytest.raises(ThreadsPerBlockError, match=r"scale_kernel: 2048 threads per block"):
        _plan(sch.mod)


def test_shared_memory_limit():
    sch = wb.Schedule(wb.workloads.matmul(256, 256, 256))
    i, j, k = sch.get_loops("C")
    bi, ti = sch.split(i, [None, 16])
    sch.reorder(bi, j, ti)
    sch.bind(bi, "blockIdx.x")
    sch.bind(ti, "threadIdx.x")
    a = sch.cache_read("C", 0, "shared")
    sch.compute_at(a, bi)  # a 16 x 256 tile: 16 KiB, fine
    assert _plan(sch.mod).kernels[0].shared_bytes == 16 * 256 * 4
    b = sch.cache_read("C", 1, "shared")
    sch.compute_at(b, bi)  # all of B: 256 KiB
    with pytest.raises(SharedMemoryLimitError, match=r"B_shared.*exceeds the 49152 bytes"):
        _plan(sch.mod)


def test_block_idx_inside_thread_loop_refused():
    sch = wb.Schedule(wb.workloads.matmul(64, 64, 64))
    i, j, k = sch.get_loops("C")
    sch.bind(i, "threadIdx.x")
    sch.bind(j, "blockIdx.x")
    with pytest.raises(BlockBindingError, match=r"'j' is bound to blockIdx.x inside loop 'i'"):
        _plan(sch.mod)


def test_block_idx_extents_must_agree():
    src = """
@T.prim_func
def f(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for by in T.thread_binding(4, thread="blockIdx.x"):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [bx, by])
                B[vi, vj] = A[vi, vj]
"""
    with pytest.raises(BlockBindingError, match="extents 8 and 4"):
        _plan(wb.from_script(src))


def test_shared_buffer_used_by_two_kernels_refused():
    src = """
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.alloc_buffer((64,), scope="shared")
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        with T.block("S"):
            v = T.axis.spatial(64, tx)
            S[v] = A[v]
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        with T.block("B"):
            v = T.axis.spatial(64, tx)
            B[v] = S[v]
"""
    match = "'S' is used by kernels f_kernel_0, f_kernel_1"
    with pytest.raises(SharedOutsideKernelError, match=match):
        _plan(wb.from_script(src))


def test_plan_needs_a_gpu_target():
    with pytest.raises(ValueError, match="needs a GPU target"):
        _plan(_elementwise().mod, target="c")


# -- CUDA text ---------------------------------------------------------------------------
def test_cuda_text_of_the_matmul():
    src = generate_cuda(gpu_matmul_schedule(128).mod)
    assert 'extern "C" __global__ void __launch_bounds__(256) matmul_kernel(' in src
    assert "__shared__ __align__(16) float A_shared[2112];" in src  # 64 rows of 33
    assert "__shared__ __align__(16) float B_shared[512];" in src
    assert "float C_local[16];  // local" in src
    assert "const int32_t j_1 = (int32_t)threadIdx.x;" in src
    assert "const int32_t i_0 = (int32_t)blockIdx.y;" in src
    assert src.count("__syncthreads();") == 2
    assert "#pragma omp" not in src


@pytest.mark.nvcc
@pytest.mark.parametrize("align", [True, False])
def test_nvcc_compiles_the_matmul(align):
    _nvcc_ok(generate_cuda(gpu_matmul_schedule(256, align=align).mod))


@pytest.mark.nvcc
def test_nvcc_compiles_several_kernels_and_symbolic_grids():
    _nvcc_ok(generate_cuda(_mm_relu_two_kernels().mod))
    n = wb.Var("n")
    A = wb.placeholder((n,), "float32", name="A")
    B = wb.compute((n,), lambda i: wb.exp(A[i]), name="B")
    sch = wb.Schedule(wb.create_prim_func([A, B], name="expo"))
    (i,) = sch.get_loops("B")
    bx, tx = sch.split(i, [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    (k,) = _plan(sch.mod).kernels
    assert str(k.launch.grid[0]) == "(n + 63) // 64"
    src = generate_cuda(sch.mod)
    sig = r"expo_kernel\(float\* __restrict__ A, float\* __restrict__ B, int\w* n\)"
    assert re.search(sig, src)
    _nvcc_ok(src)


def _vector_copy(shift: int):
    A = wb.placeholder((4100,), "float32", name="A")
    B = wb.compute((4096,), lambda i: A[i + shift], name="B")
    sch = wb.Schedule(wb.create_prim_func([A, B], name="copy"))
    (i,) = sch.get_loops("B")
    bx, tx, v = sch.split(i, [None, 128, 4])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(v)
    return sch


def test_vectorized_copy_is_one_float4():
    src = generate_cuda(_vector_copy(0).mod)
    assert "*(float4*)(B + i_0 * 512 + i_1 * 4) = *(const float4*)(A + i_0 * 512 + i_1 * 4);" in src
    # an offset that is not a multiple of 4 is not 16-byte aligned: scalar loads
    shifted = generate_cuda(_vector_copy(1).mod)
    assert "float4" not in shifted
    assert "for (int32_t i_2 = 0; i_2 < 4; ++i_2)" in shifted


@pytest.mark.nvcc
def test_float4_becomes_128_bit_loads():
    from workbench.codegen.nvcc import compile_cuda

    ptx = compile_cuda(generate_cuda(_vector_copy(0).mod), arch="sm_80")
    assert re.search(r"ld\.global(\.nc)?\.v4\.(f|u)32", ptx)
    assert re.search(r"st\.global\.v4\.(f|u)32", ptx)


def test_barrier_inside_a_narrower_thread_loop_stays_unguarded():
    """A 32-thread loop in a 64-thread kernel that needs a barrier between writing and
    reading a shared buffer: every thread reaches the barrier, only the first 32 do the
    work (a guard around the barrier would deadlock a GPU)."""
    src = """
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((32,), "float32")):
    S = T.alloc_buffer((32,), scope="shared")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("B"):
                v = T.axis.spatial(64, tx)
                B[v] = A[v]
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("S"):
                v = T.axis.spatial(32, tx)
                S[v] = A[v] * T.float32(2)
            with T.block("C"):
                v = T.axis.spatial(32, tx)
                C[v] = S[31 - v]
"""
    import numpy as np

    func = wb.from_script(src)
    cuda = generate_cuda(func)
    assert cuda.count("__syncthreads();") == 1
    lines = [x.strip() for x in cuda.splitlines()]
    sync = lines.index("__syncthreads();")
    assert lines[sync - 1] == "}" and lines[sync + 1].startswith("if (")  # guards around it
    kernel = wb.build(func, target="cuda", emulate=True, check_races=True)
    a = np.arange(64, dtype="float32")
    b, c = np.zeros(64, "float32"), np.zeros(32, "float32")
    kernel(a, b, c)
    np.testing.assert_array_equal(c, 2 * a[:32][::-1])
    np.testing.assert_array_equal(b, a)
