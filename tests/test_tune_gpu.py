"""The GPU search space and ``wb.tune(..., target="cuda")``.

Without a GPU: the space's samples plan for the GPU (and a few run race-free in the
emulator, and compile with nvcc), traces replay and mutate, tuning refuses to measure
and says how to get on, and ``estimate="emulator"`` tunes on the emulator's profile with
every number labelled as an estimate. The GPU measuring path runs through a stand-in
``cupy`` (kernels as numpy functions) and the isolated worker; on a machine with a GPU
the ``gpu`` test tunes for real.
"""

from __future__ import annotations

import json
import random
import sys
import time
import types
from types import SimpleNamespace as NS

import numpy as np
import pytest

import workbench as wb
from workbench import dlight as dl
from workbench.codegen.gpu import GpuError, lower_for_gpu
from workbench.runtime.cuda import CudaKernel
from workbench.runtime.isolation import RunResult
from workbench.schedule import Trace
from workbench.search.evolutionary import CandidateFactory
from workbench.search.gpu_estimate import (
    ESTIMATE_LABEL,
    LAUNCH_OVERHEAD,
    estimate_latency,
    estimate_schedule,
)
from workbench.search.gpu_space import default_gpu_space, needs_cross_thread_reduction
from workbench.search.mutators import mutate
from workbench.target import GpuUnavailableError
from workbench.testing import check_nvcc, requires_gpu

W = wb.workloads


def _workloads() -> dict:
    out = {
        "matmul128": W.matmul(128, 128, 128),
        "matmul100x70x50": W.matmul(100, 70, 50),
        "batch_matmul": W.batch_matmul(2, 32, 32, 32),
        "softmax": W.softmax(16, 64),
        "layer_norm": W.layer_norm(4, 64),
        "transpose": W.transpose(64, 48),
    }
    b1 = W.demo_mlp(1)
    for name in b1.names:
        out[f"mlp1_{name}"] = b1[name]
    bn = W.demo_mlp("n")
    for name in bn.names:
        if bn[name].shape_vars:  # tuned at a given shape
            out[f"mlpn4_{name}"] = bn[name].specialize({"n": 4})
    return out


WORKLOADS = _workloads()


def _sample(func, seed: int, target="cuda") -> wb.Schedule:
    sch = wb.Schedule(func, seed=seed)
    default_gpu_space(func, target)(sch)
    return sch


# -- the space -----------------------------------------------------------------------------


def _plan_samples(n: int) -> None:
    for name, func in WORKLOADS.items():
        for seed in range(n):
            sch = _sample(func, seed)
            try:
                lower_for_gpu(sch, "cuda")
            except GpuError as err:  # pragma: no cover - the failure message
                pytest.fail(f"{name}, seed {seed}: {err}")


def test_20_samples_plan_for_the_gpu():
    _plan_samples(20)


def _verify_samples(n: int) -> None:
    for name, func in WORKLOADS.items():
        for seed in range(n):
            sch = _sample(func, 1000 + seed)
            res = wb.verify(sch.mod, func, target="cuda", emulate=True, check_races=True)
            assert res, f"{name}, seed {1000 + seed}: {res}"


def test_two_samples_per_workload_match_in_the_emulator():
    _verify_samples(2)


def test_matmul_sample_structure():
    sch = _sample(WORKLOADS["matmul128"], 3, "cuda -arch=sm_90")
    names = {b.name for b in wb.ir.analysis.iter_blocks(sch.func.body)}
    assert {"A_shared", "B_shared", "C_local", "C_init", "C_update"} <= names
    tags = [sch.get(lp).thread_tag for lp in sch.get_loops(sch.get_block("C_update"))]
    assert tags[:3] == ["blockIdx.x", "vthread.x", "threadIdx.x"]
    fetch = [sch.get(lp) for lp in sch.get_loops(sch.get_block("A_shared"))]
    assert [lp.thread_tag for lp in fetch].count("threadIdx.x") == 2  # cooperative fetch
    assert fetch[-1].kind == "vectorized"
    (kernel,) = lower_for_gpu(sch, "cuda -arch=sm_90")[1].kernels
    assert kernel.launch.threads_per_block <= 1024 and kernel.shared_bytes <= 48 * 1024
    kinds = [inst.kind for inst in sch.trace.insts]
    assert kinds.count("SamplePerfectTile") == 3 and "SampleCategorical" in kinds
    unroll = [i for i in sch.trace.insts if i.kind == "Annotate"
              and i.arg("ann_key") == "pragma_auto_unroll_max_step"]
    assert unroll, "each kernel gets a sampled unroll budget"


def test_without_vthread_and_cross_thread_rule():
    func = WORKLOADS["softmax"]
    assert needs_cross_thread_reduction(func, "max")
    sch = wb.Schedule(WORKLOADS["matmul128"], seed=0)
    default_gpu_space(WORKLOADS["matmul128"], vthread=False)(sch)
    tags = [sch.get(lp).thread_tag for lp in sch.get_loops(sch.get_block("C_update"))]
    assert tags[:2] == ["blockIdx.x", "threadIdx.x"] and "vthread.x" not in tags
    soft = _sample(func, 0)
    tags = [soft.get(lp).thread_tag for lp in soft.get_loops(soft.get_block("max"))]
    assert "threadIdx.x" in tags  # the reduction runs across the threads of a block


def test_symbolic_function_refused():
    func = W.demo_mlp("n")["fused_matmul_add_relu"]
    with pytest.raises(ValueError, match=r"symbolic shapes \(n\).*specialize"):
        default_gpu_space(func)
    with pytest.raises(ValueError, match="not a GPU target"):
        default_gpu_space(WORKLOADS["matmul128"], "c")


@pytest.mark.nvcc
def test_samples_compile_with_nvcc():
    for name in ("matmul100x70x50", "softmax", "mlp1_layer_norm"):
        ptx = check_nvcc(_sample(WORKLOADS[name], 7))
        assert set(ptx) == {"sm_80", "sm_90"}


def test_trace_round_trip_and_mutation():
    func = WORKLOADS["matmul128"]
    sch = _sample(func, 5)
    again = wb.Schedule(func)
    Trace.from_json(json.loads(json.dumps(sch.trace.as_json_obj()))).apply_to_schedule(again)
    assert wb.structural_equal(again.mod, sch.mod)
    rng = random.Random(0)
    kinds, planned = set(), 0
    for _ in range(12):
        new, change = mutate(sch.trace, func, rng)
        kinds.add(change.kind)
        child = wb.Schedule(func)
        new.apply_to_schedule(child)  # structure fixed by the space: always replays
        try:
            lower_for_gpu(child, "cuda")
            planned += 1
        except GpuError:  # a mutant over a limit: the factory rejects it
            pass
    assert "SamplePerfectTile" in kinds and planned >= 6


def test_factory_rejects_what_the_planner_refuses():
    func = WORKLOADS["transpose"]

    def space(sch):
        i, j = sch.get_loops(sch.get_block("B"))
        fused = sch.fuse(i, j)
        bx, tx = sch.split(fused, [None, 2048])  # over the 1024 threads of a block
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")

    factory = CandidateFactory(func, space, "cuda")
    assert factory.sample(0) is None and factory.rejected == 1
    ok = CandidateFactory(func, default_gpu_space(func), "cuda -arch=sm_90").sample(0)
    assert ok is not None and ok.device.kernels


# -- the estimate model -------------------------------------------------------------------


def _profile(target, blocks, threads, *, sectors=0, wavefronts=0, shared=0):
    def total(space, kind, what):
        if kind != "load" or what != "transactions":
            return 0
        return sectors if space == "global" else wavefronts

    kp = NS(name="k", grid=(blocks, 1, 1), threads_per_block=threads, shared_bytes=shared,
            occupancy=target.occupancy(threads, shared, 32), total=total)
    return NS(kernels=[kp], target=target)


def test_estimate_model_bounds():
    a100 = wb.Target("cuda", arch="sm_80")
    fig = a100.figures
    assert (fig.sm_count, fig.peak_fp32_flops, fig.dram_bandwidth) == (108, 19.5e12, 1555e9)
    assert wb.Target("cuda", arch="sm_90").figures.sm_count == 132
    # compute-bound: many flops, little traffic, a full machine
    est = estimate_latency(_profile(a100, 1080, 256, sectors=1000), 10**10, a100, 0)
    assert est.kernels[0].bound == "compute"
    assert est.seconds == pytest.approx(10**10 / fig.peak_fp32_flops)
    # bandwidth-bound: 1 GB of sectors, few flops
    sectors = 10**9 // 32
    est = estimate_latency(_profile(a100, 1080, 256, sectors=sectors), 10**6, a100, 0)
    assert est.kernels[0].bound == "global memory"
    assert est.seconds == pytest.approx(1e9 / fig.dram_bandwidth)
    # shared-memory bound: one wavefront per SM per clock
    est = estimate_latency(_profile(a100, 108, 1024, wavefronts=108 * 10**6), 1, a100, 0)
    assert est.kernels[0].bound == "shared memory"
    assert est.seconds == pytest.approx(10**6 / fig.clock_hz)
    # a grid of 4 blocks uses 4 SMs of 108: 27x slower than the full machine
    small = estimate_latency(_profile(a100, 4, 1024), 10**9, a100, 0).seconds
    full = estimate_latency(_profile(a100, 1080, 1024), 10**9, a100, 0).seconds
    assert small == pytest.approx(full * 27)
    # a partial warp wastes lanes; each kernel pays the launch overhead
    half = estimate_latency(_profile(a100, 10800, 16), 10**9, a100, 0).seconds
    assert half > estimate_latency(_profile(a100, 10800, 32), 10**9, a100, 0).seconds
    assert estimate_latency(_profile(a100, 1080, 256), 0, a100).seconds == LAUNCH_OVERHEAD


def test_estimate_of_a_schedule_prefers_shared_tiles():
    func = W.matmul(64, 64, 64)
    naive = estimate_schedule(dl.gpu.Fallback().apply(func, wb.Target("cuda"), False), "cuda")
    assert naive.kernels[0].flops == 2 * 64**3
    assert ESTIMATE_LABEL in repr(naive)


# -- wb.tune ------------------------------------------------------------------------------


@pytest.fixture
def no_cupy(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError


def test_tune_refuses_without_a_gpu_before_any_work(no_cupy, tmp_path):
    calls = []

    def space(sch):
        calls.append("space")

    def builder(mods):
        calls.append("build")
        return []

    for target in ("cuda", "cuda -arch=sm_90", wb.Target("cuda"), {"kind": "cuda"}):
        with pytest.raises(GpuUnavailableError) as info:
            wb.tune(WORKLOADS["matmul128"], space, target=target, builder=builder,
                    database=tmp_path / "db", progress=False)
        text = str(info.value)
        assert "pip install .[gpu]" in text and "estimate='emulator'" in text
    assert calls == [] and not (tmp_path / "db").exists()
    with pytest.raises(ValueError, match="estimate must be None or one of"):
        wb.tune(WORKLOADS["matmul128"], target="cuda", estimate="guess")
    with pytest.raises(ValueError, match="the C target is measured"):
        wb.tune(WORKLOADS["matmul128"], target="c", estimate="emulator")


def test_tune_with_the_emulator_estimate(tmp_path):
    func = W.matmul(64, 64, 64)
    db_path = tmp_path / "db"
    result = wb.tune(func, target="cuda", estimate="emulator", trials=8, seed=0,
                     database=db_path, progress=False)
    assert len(result) == 8 and result.estimated
    naive = dl.gpu.Fallback().apply(func, wb.Target("cuda"), False)
    fallback = estimate_schedule(naive, "cuda").seconds
    assert result.best.latency < fallback
    assert result.best.estimated and "estimated" in repr(result.best)
    assert all(t.estimated for t in result.trials)
    assert "best estimated" in repr(result) and "not measured" in result.summary()
    assert "estimated_latency_ms" in result._repr_html_()
    ax = result.plot().axes[0]
    assert ax.get_ylabel().startswith(ESTIMATE_LABEL) and "estimated" in ax.get_title()
    assert result.to_dict()["estimated"] is True
    from workbench.widgets.dashboard_model import DashboardModel

    header = DashboardModel.from_result(result).summary()
    assert "estimated (emulator profile, not measured)" in header
    db = wb.Database(db_path)  # reopened: the flag loads back
    assert all(r.estimated and r.target == "cuda -arch=sm_80" for r in db.records(func))
    assert '"estimated": true' in (db_path / "records.jsonl").read_text()
    assert db.query_best(func) is None  # measured records only, and there are none
    best = db.query_best(func, estimated=True)
    assert best is not None and wb.structural_equal(best.mod, result.best.schedule.mod)
    assert db.table(func)["estimated"].all()
    again = wb.TuneResult.from_database(db, func, estimated=True)
    assert again.estimated and len(again) == 8
    assert len(wb.TuneResult.from_database(db, func)) == 0
    # a second run finds its candidates estimated already; a measured run would not
    rerun = wb.tune(func, target="cuda", estimate="emulator", trials=8, seed=0,
                    database=db_path, progress=False)
    assert all(t.cached for t in rerun.trials)


# -- measuring on a GPU through a stand-in cupy ---------------------------------------


class _DeviceArray:
    def __init__(self, host: np.ndarray) -> None:
        self.host = host

    shape = property(lambda self: self.host.shape)
    dtype = property(lambda self: self.host.dtype)

    def get(self, out: np.ndarray) -> np.ndarray:
        np.copyto(out, self.host)
        return out


class _FakeCupy(types.ModuleType):
    """Device arrays are host arrays; every kernel computes ``C = A @ B``."""

    def __init__(self) -> None:
        super().__init__("cupy")
        self.launches: list = []
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
                self.code = code

            def get_function(self, name):
                def launch(grid, block, args):
                    fake.launches.append((name, grid, block))
                    a, b, c = args[:3]
                    c.host[:] = a.host @ b.host

                return launch

        self.RawModule = RawModule
        self.cuda = types.SimpleNamespace(
            runtime=types.SimpleNamespace(getDeviceCount=lambda: 1),
            Event=Event,
            get_elapsed_time=lambda s, e: (e.t - s.t) * 1e3,
            Device=lambda: types.SimpleNamespace(synchronize=lambda: None,
                                                 compute_capability="80"),
        )

    def asarray(self, x):
        return x if isinstance(x, _DeviceArray) else _DeviceArray(np.array(x, copy=True))

    def empty(self, shape, dtype):
        return _DeviceArray(np.empty(shape, dtype))


def test_tune_measures_cuda_kernels_with_events(monkeypatch):
    cp = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    func = W.matmul(32, 32, 32)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 32, 32), dtype=np.float32)
    seen = []

    def measurer(kernel):
        assert isinstance(kernel, CudaKernel) and "__global__" in kernel.source
        seen.append(kernel)
        c = np.zeros((32, 32), "float32")
        m = wb.measure(kernel, a, b, c, number=1, repeat=2, min_repeat_ms=0)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4)
        return RunResult("ok", m)

    result = wb.tune(func, target="cuda", trials=3, seed=0, measurer=measurer, progress=False)
    assert len(seen) == 3 and result.best is not None and not result.estimated
    assert cp.events >= 3 * 2 * 2 and cp.launches
    assert "estimated" not in repr(result) and result.target == "cuda -arch=sm_80"
    assert result.peak == pytest.approx(19.5e3)  # the GPU's peak GFLOPS, not the CPU's


def test_tune_sends_cuda_launch_plans_to_the_isolated_worker(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _FakeCupy())  # this process "has a GPU"
    result = wb.tune(W.matmul(32, 32, 32), target="cuda", trials=2, seed=0, timeout=60,
                     progress=False)
    assert len(result) == 2
    try:
        import cupy  # noqa: F401  (the worker's own import, outside this monkeypatch)
    except ImportError:
        cupy_here = False
    else:  # pragma: no cover - machines with cupy
        cupy_here = True
    for trial in result.trials:
        if not cupy_here:
            assert trial.status == "run_error" and "needs cupy" in trial.error


@requires_gpu
def test_tune_on_a_real_gpu(tmp_path):
    func = W.matmul(128, 128, 128)
    result = wb.tune(func, target="cuda", trials=8, seed=0, database=tmp_path / "db",
                     progress=False)
    assert result.best is not None and not result.estimated
    assert wb.Database(tmp_path / "db").query_best(func) is not None
