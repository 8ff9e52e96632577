"""``wb.build(..., target="cuda", emulate=True)`` end to end: GPU schedules run in the
emulator match numpy; ``wb.verify`` checks a GPU schedule against its reference there."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.gpu_examples import gpu_matmul_schedule
from workbench.runtime.gpu import EmulatedKernel


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


@pytest.mark.parametrize("n,tile,per_thread,k_tile,align", [
    (128, 64, 4, 8, True),
    (128, 64, 4, 8, False),
    (96, 32, 2, 16, True),
    (64, 16, 1, 4, True),
])
def test_emulated_matmul_matches_numpy(n, tile, per_thread, k_tile, align):
    sch = gpu_matmul_schedule(n, tile=tile, per_thread=per_thread, k_tile=k_tile, align=align)
    a, b = _rand(n, n, seed=1), _rand(n, n, seed=2)
    for check_races in (False, True):  # a correct schedule: the race check finds nothing
        kernel = wb.build(sch.mod, target="cuda", emulate=True, check_races=check_races)
        assert isinstance(kernel, EmulatedKernel)
        c = np.zeros((n, n), "float32")
        kernel(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_sources_and_repr():
    kernel = wb.build(gpu_matmul_schedule(128).mod, wb.Target("cuda", arch="sm_90"),
                      emulate=True)
    assert kernel.source.count("__syncthreads();") == 2
    assert "__launch_bounds__(256)" in kernel.source
    assert "#pragma omp parallel for" in kernel.emulator_source
    assert "__syncthreads" not in kernel.emulator_source
    assert repr(kernel) == "EmulatedKernel(target='cuda -arch=sm_90', kernels=[matmul_kernel])"
    assert kernel.flops == 2 * 128**3
    assert [k.name for k in kernel.device_module.kernels] == ["matmul_kernel"]


def test_two_kernels_and_an_intermediate():
    sch = wb.Schedule(wb.workloads.mm_relu(64, 64, 64))
    for name in ("Y", "C"):
        loops = sch.get_loops(name)
        bx, tx = sch.split(loops[0], [None, 16])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        sch.bind(loops[1], "threadIdx.y")
    kernel = wb.build(sch.mod, target="cuda", emulate=True, check_races=True)
    a, b = _rand(64, 64, seed=3), _rand(64, 64, seed=4)
    c = np.zeros((64, 64), "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_symbolic_grid():
    n = wb.Var("n")
    A = wb.placeholder((n,), "float32", name="A")
    B = wb.compute((n,), lambda i: A[i] * 3.0, name="B")
    sch = wb.Schedule(wb.create_prim_func([A, B], name="triple"))
    (i,) = sch.get_loops("B")
    bx, tx = sch.split(i, [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    kernel = wb.build(sch.mod, target="cuda", emulate=True, check_races=True)
    for size in (1, 63, 64, 1000):
        a = _rand(size, seed=size)
        b = np.zeros(size, "float32")
        kernel(a, b)
        np.testing.assert_allclose(b, a * 3.0, rtol=1e-6)


def test_verify_in_the_emulator():
    sch = gpu_matmul_schedule(64, tile=32, per_thread=2)
    result = wb.verify(sch.mod, wb.workloads.matmul(64, 64, 64), target="cuda", emulate=True)
    assert [b.name for b in result.buffers] == ["C"]
    assert result.max_abs_error < 1e-3


def test_measure_an_emulated_kernel():
    kernel = wb.build(gpu_matmul_schedule(64, tile=32, per_thread=2).mod, target="cuda",
                      emulate=True)
    a, b, c = _rand(64, 64), _rand(64, 64), np.zeros((64, 64), "float32")
    m = wb.measure(kernel, a, b, c, repeat=2, min_repeat_ms=1)
    assert m.flops == 2 * 64**3 and len(m.samples) == 2


def test_check_races_needs_the_emulator():
    with pytest.raises(ValueError, match="check_races=True needs emulate=True"):
        wb.build(gpu_matmul_schedule(64, tile=32).mod, target="cuda", check_races=True)


def test_gpu_bench_runs_without_a_gpu():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "bench" / "gpu_matmul.py"
    out = subprocess.run(
        [sys.executable, str(script), "--emulate", "128", "--races", "64", "--profile", "64"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout
    assert "emulating 128^3" in out and "max |error| vs numpy" in out
    assert "race-check overhead" in out
    assert out.count("GpuProfile on cuda -arch=sm_80") == 2
    assert "bank conflicts" in out


_EXTERN_SRC = """
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        with T.block("B"):
            v = T.axis.spatial(64, tx)
            B[v] = T.call_extern("float32", "expf", A[v])
"""


def test_call_extern_in_a_kernel():
    """``T.call_extern`` of a math function prints as a plain call and runs emulated."""
    func = wb.from_script(_EXTERN_SRC)
    source = wb.codegen.cuda.generate_cuda(func)
    assert "B[v] = expf(A[v]);" in source
    kernel = wb.build(func, target="cuda", emulate=True)
    a, b = _rand(64), np.zeros(64, "float32")
    kernel(a, b)
    np.testing.assert_allclose(b, np.exp(a), rtol=1e-5)


@pytest.mark.nvcc
def test_call_extern_compiles_with_nvcc():
    from workbench.codegen.nvcc import compile_cuda

    source = wb.codegen.cuda.generate_cuda(wb.from_script(_EXTERN_SRC))
    assert ".entry f_kernel(" in compile_cuda(source, arch="sm_90")
