"""One thread setting everywhere a kernel runs: the default, the environment variable,
wb.measure / the worker / wb.tune / the editor, our OpenMP kernels and NumPy's BLAS."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import workbench as wb
from workbench.codegen.c import as_ir_module
from workbench.runtime import threads
from workbench.runtime.compiler import compile_shared, load_library
from workbench.runtime.cpu import Kernel
from workbench.runtime.isolation import KernelSignature, Worker

# Returns 0 when OpenMP would run a parallel region with exactly `want` threads, else 7.
THREADS_ARE = textwrap.dedent("""\
    #include <omp.h>
    #include <stdint.h>
    int32_t wb_threads_are_{want}(float* A, float* B) {{
      int n = 0;
      #pragma omp parallel
      {{
        #pragma omp single
        n = omp_get_num_threads();
      }}
      B[0] = A[0];
      return n == {want} ? 0 : 7;
    }}
""")


def threads_kernel(want: int) -> Kernel:
    """A Kernel `copy(A, B)` whose C fails (status 7) unless it runs on `want` threads."""
    source = THREADS_ARE.format(want=want)
    A = wb.placeholder((4,), "float32", name="A")
    B = wb.compute((4,), lambda i: A[i], name="B")
    mod = as_ir_module(wb.create_prim_func([A, B], name="copy"))
    return Kernel(mod, source, load_library(compile_shared(source)),
                  {"copy": f"wb_threads_are_{want}"})


def threads_signature(want: int) -> KernelSignature:
    so = compile_shared(THREADS_ARE.format(want=want))
    symbol = f"wb_threads_are_{want}"
    return KernelSignature(str(so), symbol, (((4,), "float32"), ((4,), "float32")), symbol, 0)


def blas_threads() -> int:
    return next(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


@pytest.fixture(autouse=True)
def restore_setting():
    yield
    threads.set_num_threads(None)


def arrays():
    return np.ones(4, "float32"), np.zeros(4, "float32")


def test_default_is_every_usable_core_and_set_overrides_it(monkeypatch):
    monkeypatch.setattr(threads, "_env_default", None)  # as without WB/OMP_NUM_THREADS
    threads.set_num_threads(None)
    assert wb.get_num_threads() == len(os.sched_getaffinity(0))
    wb.set_num_threads(1)
    assert wb.get_num_threads() == 1
    with wb.thread_limit(3) as n:
        assert n == 3 and wb.get_num_threads() == 3
        with wb.thread_limit(None) as inner:  # None: the setting in effect
            assert inner == 3
    assert wb.get_num_threads() == 1


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        wb.set_num_threads(bad)
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        wb.measure(sorted, [1], repeat=1, min_repeat_ms=0, threads=bad)


@pytest.mark.parametrize(("env", "want"), [
    ({"WB_NUM_THREADS": "1", "OMP_NUM_THREADS": "3"}, "1"),
    ({"OMP_NUM_THREADS": "3,1"}, "3"),  # OpenMP's own setting keeps its meaning
    ({"OMP_NUM_THREADS": "lots"}, str(len(os.sched_getaffinity(0)))),
])
def test_environment_variables_set_the_default_at_import(env, want):
    code = "import workbench as wb; print(wb.get_num_threads())"
    base = {k: v for k, v in os.environ.items()
            if k not in ("WB_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == want


def test_openmp_spins_briefly_when_workbench_is_imported_first():
    code = "import os, workbench; print(os.environ.get('GOMP_SPINCOUNT'))"
    env = {k: v for k, v in os.environ.items()
           if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == threads.OMP_MEASURE_ENV["GOMP_SPINCOUNT"]
    # a setting of the user's wins, and so does an explicit wait policy
    assert threads.measurement_env({"GOMP_SPINCOUNT": "7"})["GOMP_SPINCOUNT"] == "7"
    assert "GOMP_SPINCOUNT" not in threads.measurement_env({"OMP_WAIT_POLICY": "active"})


def test_kernel_calls_follow_the_setting():
    one, two = threads_kernel(1), threads_kernel(2)
    wb.set_num_threads(1)
    one(*arrays())
    with pytest.raises((MemoryError, RuntimeError)):  # status 7: not 1 thread
        two(*arrays())
    wb.set_num_threads(2)
    two(*arrays())


def test_measure_runs_kernels_and_blas_with_the_same_threads():
    assert wb.measure(threads_kernel(1), *arrays(), repeat=2, min_repeat_ms=1,
                      threads=1).threads == 1
    assert wb.measure(threads_kernel(2), *arrays(), repeat=2, min_repeat_ms=1,
                      threads=2).threads == 2
    with pytest.raises((MemoryError, RuntimeError)):
        wb.measure(threads_kernel(2), *arrays(), repeat=2, min_repeat_ms=1, threads=1)
    seen = []
    before = blas_threads()
    wb.measure(lambda: seen.append(blas_threads()), repeat=1, number=1, min_repeat_ms=0,
               warmup=0, threads=1)
    assert seen == [1] and blas_threads() == before  # limited while timing only


def test_prepared_kernel_is_set_by_measure():
    kernel = threads_kernel(1)
    wb.set_num_threads(2)
    run = kernel.prepare(*arrays())
    assert run() == 7  # prepared with the setting in effect: 2 threads
    m = wb.runtime.timing.measure(run, repeat=1, number=1, min_repeat_ms=0, threads=1)
    assert m.threads == 1 and run() == 0


def test_isolated_worker_runs_the_kernel_with_the_requested_threads():
    with Worker() as worker:
        ok = worker.measure_kernel(threads_signature(1), repeat=1, min_repeat_ms=0, threads=1)
        assert ok.ok and ok.measurement.threads == 1
        bad = worker.measure_kernel(threads_signature(1), repeat=1, min_repeat_ms=0,
                                    threads=2)
        assert bad.status == "run_error" and "status 7" in bad.error
    m = wb.measure(wb.build(wb.workloads.matmul(16, 16, 16)), repeat=1, min_repeat_ms=0,
                   isolated=True, threads=1)
    assert m.threads == 1


def test_tune_and_editor_take_threads(monkeypatch):
    from workbench.testing import stochastic_schedule_mm
    from workbench.widgets.editor_model import EditorModel

    seen = []
    original = Worker.measure_kernel

    def recording(self, kernel, **kwargs):
        seen.append(kwargs.get("threads"))
        return original(self, kernel, **kwargs)

    with pytest.raises(ValueError, match="threads"):
        wb.tune(wb.workloads.matmul(16, 16, 16), trials=1, threads=0, progress=False)
    with pytest.raises(ValueError, match="threads"):
        EditorModel(wb.workloads.matmul(16, 16, 16), threads=-1)
    monkeypatch.setattr(Worker, "measure_kernel", recording)
    result = wb.tune(wb.testing.matmul_func(16, 16, 16), stochastic_schedule_mm, trials=2,
                     seed=0, progress=False, threads=1, remeasure=1)
    assert result.threads == 1 and seen == [1, 1, 1]  # 2 trials + 1 re-measured
    assert all(t.status == "ok" for t in result.trials)
    record = EditorModel(wb.workloads.matmul(16, 16, 16), threads=1).measure(
        repeat=1, min_repeat_ms=0)
    assert record.ok and record.threads == 1 and seen[-1] == 1
