"""The cupy runtime (workbench.runtime.cuda).

Here, without a GPU: the errors without cupy or without a device, argument checks done
before any device call, launch arguments of a symbolic grid, launch plans as JSON for the
isolated worker, and the host-side plumbing (copies, intermediates, launch order, the
CUDA-event timer hook) driven through a stand-in ``cupy`` module whose kernels are Python
functions. On a machine with cupy and a GPU, the ``gpu`` tests run the real kernels.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import types

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.gpu_plan import DeviceFunction, DeviceModule, GpuKernel, LaunchConfig
from workbench.ir.expr import Var
from workbench.runtime import cuda as rt
from workbench.runtime.compiler import CompileError
from workbench.runtime.cpu import KernelArgumentError
from workbench.runtime.isolation import Worker, kernel_signature
from workbench.target import GpuUnavailableError, Target
from workbench.testing import requires_gpu

# -- hand-built device modules --------------------------------------------------------

ADD_ONE_SRC = """\
extern "C" __global__ void __launch_bounds__(128) add_one_kernel(
    const float* __restrict__ A, float* __restrict__ B, int n) {
  int i = blockIdx.x * 128 + threadIdx.x;
  if (i < n) {
    B[i] = A[i] + 1.0f;
  }
}
"""

CHAIN_SRC = """\
extern "C" __global__ void chain_kernel(const float* __restrict__ A, float* __restrict__ T) {
  int i = blockIdx.x * 32 + threadIdx.x;
  T[i] = A[i] * 2.0f;
}
extern "C" __global__ void chain_kernel_1(const float* __restrict__ T, float* __restrict__ B) {
  int i = blockIdx.x * 32 + threadIdx.x;
  B[i] = T[i] + 1.0f;
}
"""


def add_one_module() -> DeviceModule:
    """``B = A + 1`` over a symbolic ``n``: one kernel, grid ``ceil(n / 128)``."""
    n = Var("n")
    A = wb.placeholder((n,), "float32", name="A")
    B = wb.compute((n,), lambda i: A[i] + 1.0, name="B")
    func = wb.create_prim_func([A, B], name="add_one")
    a, b = func.params
    kernel = GpuKernel(
        name="add_one_kernel", func_name="add_one", body=func.body, params=(a, b),
        shape_vars=(n,), shared=(), local=(),
        launch=LaunchConfig(((n + 127) // 128, 1, 1), (128, 1, 1)),
    )
    return DeviceModule((DeviceFunction("add_one", func, (), (kernel,)),))


def chain_module(size: int = 64) -> DeviceModule:
    """``T = A * 2`` then ``B = T + 1``: two kernels passing the intermediate ``T``."""
    A = wb.placeholder((size,), "float32", name="A")
    T = wb.compute((size,), lambda i: A[i] * 2.0, name="T")
    B = wb.compute((size,), lambda i: T[i] + 1.0, name="B")
    func = wb.create_prim_func([A, B], name="chain")
    a, b = func.params
    (t,) = func.body.alloc_buffers
    launch = LaunchConfig((size // 32, 1, 1), (32, 1, 1))
    k0 = GpuKernel("chain_kernel", "chain", func.body, (a, t), (), (), (), launch)
    k1 = GpuKernel("chain_kernel_1", "chain", func.body, (t, b), (), (), (), launch)
    return DeviceModule((DeviceFunction("chain", func, (t,), (k0, k1)),))


def add_one_kernel() -> rt.CudaKernel:
    return rt.CudaKernel(ADD_ONE_SRC, add_one_module(), "cuda -arch=sm_90")


# -- a stand-in cupy: device arrays are host arrays, kernels are Python functions --------


class FakeDeviceArray:
    """Has the CUDA Array Interface, as cupy arrays do."""

    def __init__(self, host: np.ndarray, readonly: bool = False) -> None:
        self.host = host
        self.readonly = readonly

    shape = property(lambda self: self.host.shape)
    dtype = property(lambda self: self.host.dtype)

    @property
    def __cuda_array_interface__(self) -> dict:
        strides = None if self.host.flags.c_contiguous else self.host.strides
        return {"shape": self.host.shape, "typestr": self.host.dtype.str, "version": 3,
                "data": (self.host.ctypes.data, self.readonly), "strides": strides}

    def get(self, out: np.ndarray) -> np.ndarray:
        np.copyto(out, self.host)
        return out


def _threads(grid, block):
    return grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2]


def _add_one_impl(grid, block, args):
    a, b, n = args
    covered = min(int(n), _threads(grid, block))  # only the launched threads write
    b.host[:covered] = a.host[:covered] + 1


def _chain0_impl(grid, block, args):
    a, t = args
    t.host[:] = a.host * 2


def _chain1_impl(grid, block, args):
    t, b = args
    b.host[:] = t.host + 1


class FakeCupy(types.ModuleType):
    IMPLS = {"add_one_kernel": _add_one_impl, "chain_kernel": _chain0_impl,
             "chain_kernel_1": _chain1_impl}

    def __init__(self, devices: int = 1) -> None:
        super().__init__("cupy")
        self.launches: list = []
        self.modules: list = []
        self.copies = 0
        self.events = 0
        fake = self

        class Event:
            def record(self):
                fake.events += 1
                self.t = time.perf_counter()

            def synchronize(self):
                pass

        class RawModule:
            def __init__(self, code, options=(), name_expressions=None):
                self.code, self.options = code, options
                fake.modules.append(self)

            def get_function(self, name):
                impl = fake.IMPLS[name]

                def launch(grid, block, args):
                    fake.launches.append((name, grid, block, args))
                    impl(grid, block, args)

                return launch

        self.RawModule = RawModule
        self.cuda = types.SimpleNamespace(
            runtime=types.SimpleNamespace(getDeviceCount=lambda: devices),
            Event=Event,
            get_elapsed_time=lambda s, e: (e.t - s.t) * 1e3,
            Device=lambda: types.SimpleNamespace(synchronize=lambda: None,
                                                 compute_capability="90"),
        )

    def asarray(self, x):
        if isinstance(x, FakeDeviceArray):
            return x
        self.copies += 1
        return FakeDeviceArray(np.array(x, copy=True))

    def empty(self, shape, dtype):
        return FakeDeviceArray(np.full(shape, np.nan, dtype=dtype))


@pytest.fixture
def fake_cupy(monkeypatch) -> FakeCupy:
    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    return cp


@pytest.fixture
def no_cupy(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError


# -- without cupy / without a device ---------------------------------------------------------


def test_module_imports_without_cupy():
    code = ("import sys; sys.modules['cupy'] = None; import workbench.runtime.cuda; "
            "import workbench.target; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_call_without_cupy_says_how_to_install(no_cupy):
    kernel = add_one_kernel()
    a, b = np.ones(10, "float32"), np.zeros(10, "float32")
    hint = r'the cuda runtime needs cupy: pip install "schedule-workbench\[gpu\]"'
    with pytest.raises(GpuUnavailableError, match=hint):
        kernel(a, b)
    with pytest.raises(GpuUnavailableError, match="needs cupy"):
        kernel.prepare(a, b)
    with pytest.raises(GpuUnavailableError, match="needs cupy"):
        rt.time_with_events(lambda: None, 1)
    assert not b.any()


def test_call_without_a_device(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", FakeCupy(devices=0))
    with pytest.raises(GpuUnavailableError, match="cupy sees no CUDA device"):
        add_one_kernel()(np.ones(4, "float32"), np.zeros(4, "float32"))


def test_source_and_plan_without_a_gpu(no_cupy):
    kernel = add_one_kernel()
    assert kernel.source == ADD_ONE_SRC
    assert kernel.target == Target("cuda", arch="sm_90")
    assert kernel.device_module.kernels[0].name == "add_one_kernel"
    assert kernel.function_names == ["add_one"] and kernel.flops is None
    assert repr(kernel).startswith("CudaKernel(target='cuda -arch=sm_90', functions=['add_one']")
    assert isinstance(kernel, wb.Kernel)


# -- argument checks come before any device call -----------------------------------------


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda: (np.ones(8, "float32"),), "takes 2 arrays \\(A, B\\), got 1"),
        (lambda: ([1.0] * 8, np.zeros(8, "float32")),
         "parameter 'A'\\) must be a numpy.ndarray or a cupy array, got list"),
        (lambda: (np.ones(8, "float32"), np.zeros(9, "float32")),
         "parameter 'B'\\) must have shape \\(n,\\) = \\(8,\\) \\(with n = 8\\), got \\(9,\\)"),
        (lambda: (np.ones(8, "float64"), np.zeros(8, "float32")),
         "parameter 'A'\\) must have dtype float32, got float64"),
        (lambda: (np.ones(16, "float32")[::2], np.zeros(8, "float32")),
         "parameter 'A'\\) must be C-contiguous"),
        (lambda: (np.ones(8, "float32"), np.broadcast_to(np.zeros(1, "float32"), (8,))),
         "parameter 'B'\\) must be C-contiguous|is written by the kernel but the array is"),
    ],
)
def test_bad_numpy_arguments_refused_before_the_gpu(no_cupy, make_args, message):
    # without cupy, reaching the GPU would raise GpuUnavailableError instead
    with pytest.raises(KernelArgumentError, match=message):
        add_one_kernel()(*make_args())


def test_read_only_and_overlapping_outputs_refused(no_cupy):
    kernel = add_one_kernel()
    b = np.zeros(8, "float32")
    b.flags.writeable = False
    with pytest.raises(KernelArgumentError, match="'B'\\) is written by the kernel but the"):
        kernel(np.ones(8, "float32"), b)
    buf = np.zeros(16, "float32")
    with pytest.raises(KernelArgumentError, match="overlaps argument 0"):
        kernel(buf[:8], buf[4:12])


def test_bad_device_arguments_refused_before_the_gpu(no_cupy):
    kernel = add_one_kernel()
    dev = FakeDeviceArray(np.zeros(32, "float32"))
    with pytest.raises(KernelArgumentError, match="'A'\\) must be C-contiguous"):
        kernel(FakeDeviceArray(np.zeros(32, "float32")[::2]), FakeDeviceArray(np.zeros(16,
                                                                                   "float32")))
    with pytest.raises(KernelArgumentError, match="overlaps argument 0"):
        kernel(FakeDeviceArray(dev.host[:16]), FakeDeviceArray(dev.host[8:24]))
    with pytest.raises(KernelArgumentError, match="'B'\\) is written by the kernel but"):
        kernel(FakeDeviceArray(np.zeros(4, "float32")),
               FakeDeviceArray(np.zeros(4, "float32"), readonly=True))
    with pytest.raises(KernelArgumentError, match="must have dtype float32, got int32"):
        kernel(FakeDeviceArray(np.zeros(4, "int32")), FakeDeviceArray(np.zeros(4, "float32")))
    # a numpy input and a device output in different memories never "overlap"
    with pytest.raises(GpuUnavailableError):
        kernel(np.zeros(4, "float32"), FakeDeviceArray(np.zeros(4, "float32")))


# -- launch arguments ---------------------------------------------------------------------


def test_symbolic_grid_evaluated_from_the_arrays(no_cupy):
    func = add_one_kernel()["add_one"]
    for n, blocks in ((1000, 8), (1024, 8), (1025, 9), (1, 1)):
        plan = func.launch_plan(np.zeros(n, "float32"), np.zeros(n, "float32"))
        (launch,) = plan.launches
        assert launch.grid == (blocks, 1, 1) and launch.block == (128, 1, 1)
        assert launch.args == (("param", 0), ("param", 1))
        assert launch.scalars == ((n, "int32"),)
        assert plan.params == (((n,), "float32"), ((n,), "float32"))


def test_evaluate_launch():
    n, m = Var("n"), Var("m")
    grid = ((n + 31) // 32, m, 1)
    assert rt.evaluate_launch(LaunchConfig(grid, (32, 4, 1)), {n: 100, m: 3}) \
        == ((4, 3, 1), (32, 4, 1))
    with pytest.raises(ValueError, match="k: grid size m does not reduce to a number"):
        rt.evaluate_launch(LaunchConfig(grid, (32, 1, 1)), {n: 100}, kernel="k")
    with pytest.raises(ValueError, match="gridDim.y = 70000; CUDA allows 1 to 65535"):
        rt.evaluate_launch(LaunchConfig((1, 70000, 1), (32, 1, 1)))


def test_kernel_taking_an_unknown_buffer_is_refused():
    dm = chain_module()
    (f,) = dm.functions
    broken = DeviceFunction(f.name, f.func, (), f.kernels)  # T no longer an intermediate
    with pytest.raises(ValueError, match="takes buffers \\['T'\\] that are neither"):
        rt.CudaKernel(CHAIN_SRC, DeviceModule((broken,)))


def test_non_cuda_target_refused():
    with pytest.raises(ValueError, match="needs a cuda target"):
        rt.CudaKernel(ADD_ONE_SRC, add_one_module(), "c")


# -- host-side plumbing through the stand-in cupy ------------------------------------------


def test_numpy_arrays_copied_in_and_results_copied_back(fake_cupy):
    kernel = add_one_kernel()
    a = np.arange(1000, dtype="float32")
    b = np.zeros(1000, "float32")
    kernel(a, b)
    np.testing.assert_array_equal(b, a + 1)  # every element: the grid covers n
    (name, grid, block, args) = fake_cupy.launches[0]
    assert (name, grid, block) == ("add_one_kernel", (8, 1, 1), (128, 1, 1))
    assert isinstance(args[2], np.int32) and int(args[2]) == 1000
    assert fake_cupy.copies == 2
    (module,) = fake_cupy.modules
    assert module.code == ADD_ONE_SRC and module.options == ("-std=c++17",)
    kernel(a, b)
    assert len(fake_cupy.modules) == 1  # compiled once


def test_device_arrays_used_in_place(fake_cupy):
    kernel = add_one_kernel()
    a = FakeDeviceArray(np.arange(300, dtype="float32"))
    b = FakeDeviceArray(np.zeros(300, "float32"))
    kernel(a, b)
    np.testing.assert_array_equal(b.host, np.arange(300, dtype="float32") + 1)
    assert fake_cupy.copies == 0
    assert fake_cupy.launches[0][3][0] is a and fake_cupy.launches[0][1] == (3, 1, 1)


def test_intermediates_allocated_and_kernels_launched_in_order(fake_cupy):
    kernel = rt.CudaKernel(CHAIN_SRC, chain_module(64))
    a = np.arange(64, dtype="float32")
    b = np.zeros(64, "float32")
    kernel(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)
    (n0, g0, _, args0), (n1, g1, _, args1) = fake_cupy.launches
    assert (n0, n1) == ("chain_kernel", "chain_kernel_1")
    assert g0 == g1 == (2, 1, 1)
    t = args0[1]
    assert args1[0] is t and t.shape == (64,) and t.dtype == np.float32
    assert kernel.flops == 128


def test_measure_times_with_cuda_events(fake_cupy):
    kernel = add_one_kernel()
    a, b = np.ones(256, "float32"), np.zeros(256, "float32")
    m = wb.measure(kernel, a, b, number=4, repeat=3, min_repeat_ms=0)
    assert (m.number, m.repeat, len(m.samples)) == (4, 3, 3)
    assert fake_cupy.events == 2 * 3  # a start and an end event per sample
    assert m.flops == 256  # counted for these shapes
    np.testing.assert_array_equal(b, 2.0)
    run = kernel.prepare(a, b)
    assert run.event_timer is rt.time_with_events and run() == 0
    with pytest.raises(ValueError, match="flush_cache=True evicts the CPU caches"):
        wb.measure(kernel, a, b, flush_cache=True)


def test_nvrtc_error_becomes_cuda_compile_error(fake_cupy):
    class CompileException(Exception):
        pass

    def broken(self, name):
        raise CompileException("/tmp/x/kern.cu(3): error: expected a \";\"")

    fake_cupy.RawModule.get_function = broken
    with pytest.raises(CompileError) as info:
        add_one_kernel()(np.ones(4, "float32"), np.zeros(4, "float32"))
    assert type(info.value).__name__ == "CudaCompileError"
    assert info.value.lines == (3,) and "int i = blockIdx.x * 128" in str(info.value)


# -- the isolated worker ------------------------------------------------------------------


def test_launch_plan_is_json_for_the_worker(no_cupy):
    kernel = rt.CudaKernel(CHAIN_SRC, chain_module(64))
    sig = kernel_signature(kernel)
    assert sig.so_path == f"cuda:{kernel.source_hash}" and sig.flops == 128
    text = json.dumps(sig.cuda)
    plan = rt.LaunchPlan.from_json(json.loads(text))
    assert plan == kernel["chain"].launch_plan()
    assert plan.intermediates == (((64,), "float32"),)
    assert [L.args for L in plan.launches] == [(("param", 0), ("intermediate", 0)),
                                               (("intermediate", 0), ("param", 1))]


def test_symbolic_kernel_refused_for_isolation(no_cupy):
    with pytest.raises(ValueError, match="symbolic shapes \\['n'\\]"):
        kernel_signature(add_one_kernel())


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("source"), "'source'"),
        (lambda d: d["launches"][0].update(args=[["param", 5]]), "bad argument"),
        (lambda d: d["launches"][0].update(grid=[1, 1]), "3 entries"),
        (lambda d: d["params"][0].__setitem__(0, ["8"]), "expected integers"),
    ],
)
def test_malformed_plans_refused(no_cupy, mutate, message):
    data = rt.CudaKernel(CHAIN_SRC, chain_module(64))["chain"].launch_plan().to_json()
    mutate(data)
    with pytest.raises(ValueError, match=message):
        rt.LaunchPlan.from_json(data)


def test_worker_reports_a_missing_gpu():
    kernel = rt.CudaKernel(CHAIN_SRC, chain_module(64))
    with Worker() as worker:
        result = worker.measure_kernel(kernel, repeat=1, min_repeat_ms=0, timeout=60)
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert result.status == "run_error"
        assert 'needs cupy: pip install "schedule-workbench[gpu]"' in result.error
    else:  # cupy here: a GPU measures, a machine without one says so
        assert result.status == "ok" or "no CUDA device" in result.error


def test_worker_refuses_a_malformed_cuda_request():
    from workbench.runtime.worker import handle

    reply = handle({"cuda": {"source": 1}, "repeat": 1, "number": None, "min_repeat_ms": 0,
                    "warmup": 1, "flush_cache": False, "seed": 0})
    assert reply["status"] == "run_error" and "malformed CUDA launch plan" in reply["error"]


# -- with the planner and printer of the GPU path ------------------------------------------


def test_planned_matmul_kernel_plan(no_cupy):
    from workbench.codegen.cuda import generate_cuda
    from workbench.codegen.gpu import plan_device_module
    from workbench.gpu_examples import gpu_matmul_schedule

    mod = gpu_matmul_schedule(128, tile=32, per_thread=2, k_tile=8).mod
    dm = plan_device_module(wb.lower(mod), "cuda")
    kernel = rt.CudaKernel(generate_cuda(dm), dm, "cuda", mod=mod)
    (launch,) = kernel["matmul"].launch_plan().launches
    assert launch.kernel == dm.kernels[0].name
    assert launch.grid == (4, 4, 1) and launch.block == (16, 16, 1)
    assert kernel.flops == 2 * 128**3
    assert f"void {launch.kernel}(" in kernel.source or f" {launch.kernel}(" in kernel.source


# -- on a real GPU --------------------------------------------------------------------------


@requires_gpu
def test_gpu_add_one_numpy_and_cupy():
    import cupy as cp

    kernel = add_one_kernel()
    a = np.random.default_rng(0).standard_normal(1000).astype("float32")
    b = np.zeros(1000, "float32")
    kernel(a, b)
    np.testing.assert_allclose(b, a + 1)
    a_dev, b_dev = cp.asarray(a), cp.zeros(1000, "float32")
    kernel(a_dev, b_dev)
    np.testing.assert_allclose(b_dev.get(), a + 1)


@requires_gpu
def test_gpu_chain_with_intermediate_and_measure():
    kernel = rt.CudaKernel(CHAIN_SRC, chain_module(1024))
    a = np.arange(1024, dtype="float32")
    b = np.zeros(1024, "float32")
    kernel(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)
    m = wb.measure(kernel, a, b, repeat=3, min_repeat_ms=1)
    assert m.repeat == 3 and 0 < m.median < 0.1


@requires_gpu
def test_gpu_isolated_measurement():
    kernel = rt.CudaKernel(CHAIN_SRC, chain_module(1024))
    m = wb.measure(kernel, repeat=2, min_repeat_ms=1, isolated=True, timeout=120)
    assert m.repeat == 2 and m.flops == 2048


@requires_gpu
def test_gpu_current_device_and_planned_matmul():
    from workbench.codegen.cuda import generate_cuda
    from workbench.codegen.gpu import plan_device_module
    from workbench.gpu_examples import gpu_matmul_schedule

    target = Target.current_device()
    mod = gpu_matmul_schedule(128, tile=32, per_thread=2, k_tile=8).mod
    dm = plan_device_module(wb.lower(mod), target)
    kernel = rt.CudaKernel(generate_cuda(dm), dm, target, mod=mod)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 128)).astype("float32")
    b = rng.standard_normal((128, 128)).astype("float32")
    c = np.zeros((128, 128), "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
