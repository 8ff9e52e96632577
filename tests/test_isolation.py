"""Measuring in a worker process: crashes and hangs come back as failed results, the
worker restarts, and this process lives on; parallel builds; wb.measure(isolated=True)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.c import as_ir_module
from workbench.runtime import isolation, worker
from workbench.runtime.compiler import CompileError, compile_shared, load_library
from workbench.runtime.cpu import Kernel
from workbench.runtime.isolation import (
    KernelSignature,
    MeasureError,
    RunResult,
    Worker,
    build_many,
    default_worker,
    kernel_signature,
)
from workbench.runtime.reference import random_args

HEADER = "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
SEGFAULT = HEADER + textwrap.dedent("""\
    int32_t wb_segfault(float* A, float* B) {
      fprintf(stderr, "wb_segfault: about to dereference NULL\\n");
      volatile float* p = (volatile float*)0;
      B[0] = *p + A[0];
      return 0;
    }
""")
ABORT = HEADER + "int32_t wb_abort(float* A, float* B) { abort(); return 0; }\n"
HANG = HEADER + textwrap.dedent("""\
    int32_t wb_hang(float* A, float* B) {
      volatile int forever = 1;
      #pragma omp parallel
      while (forever) { B[0] += A[0]; }
      return 0;
    }
""")
NO_MEMORY = HEADER + "int32_t wb_no_memory(float* A, float* B) { return 1; }\n"
CHATTY = HEADER + textwrap.dedent("""\
    int32_t wb_chatty(float* A, float* B) {
      printf("{\\"status\\": \\"ok\\"}\\n");
      fflush(stdout);
      B[0] = A[0];
      return 0;
    }
""")


def c_signature(source: str, symbol: str) -> KernelSignature:
    """A hand-written two-parameter C function, compiled but never loaded here."""
    so = compile_shared(source)
    return KernelSignature(str(so), symbol, (((4,), "float32"), ((4,), "float32")), symbol, 8)


def c_kernel(source: str, symbol: str) -> Kernel:
    """A Kernel whose function `add_one(A, B)` is replaced by hand-written C."""
    A = wb.placeholder((4,), "float32", name="A")
    B = wb.compute((4,), lambda i: A[i] + 1.0, name="B")
    mod = as_ir_module(wb.create_prim_func([A, B], name="add_one"))
    return Kernel(mod, source, load_library(compile_shared(source)), {"add_one": symbol})


@pytest.fixture(scope="module")
def matmul_kernel() -> Kernel:
    return wb.build(wb.workloads.matmul(64, 64, 64))


@pytest.fixture(scope="module")
def shared_worker():
    with Worker() as w:
        yield w


def quick(w: Worker, kernel, **kwargs) -> RunResult:
    kwargs = {"repeat": 2, "min_repeat_ms": 1, **kwargs}
    return w.measure_kernel(kernel, **kwargs)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ok_result(shared_worker, matmul_kernel) -> None:
    result = quick(shared_worker, matmul_kernel, repeat=3)
    assert result.ok and result.status == "ok" and result.error == ""
    m = result.measurement
    assert m.repeat == 3 and len(m.samples) == 3 and m.number >= 1
    assert m.flops == matmul_kernel.flops == 2 * 64**3
    assert all(s > 0 for s in m.samples)


@pytest.mark.parametrize(
    ("source", "symbol", "signal_name"),
    [(SEGFAULT, "wb_segfault", "SIGSEGV"), (ABORT, "wb_abort", "SIGABRT")],
)
def test_crash_is_a_failed_result_and_worker_restarts(
    shared_worker, matmul_kernel, source, symbol, signal_name
) -> None:
    before_pid, before_starts = shared_worker.pid, shared_worker.starts
    result = quick(shared_worker, c_signature(source, symbol))
    assert result.status == "crash" and not result.ok and result.measurement is None
    assert f"worker died with signal {signal_name}" in result.error
    assert f"`{symbol}`" in result.error
    assert not pid_alive(before_pid)
    assert shared_worker.starts == before_starts + 1 and shared_worker.pid != before_pid
    # the same Worker measures the next kernel
    assert quick(shared_worker, matmul_kernel).ok


def test_crash_reports_the_kernels_stderr(shared_worker) -> None:
    result = quick(shared_worker, c_signature(SEGFAULT, "wb_segfault"))
    assert "about to dereference NULL" in result.error


def test_hang_times_out_and_worker_restarts(shared_worker, matmul_kernel) -> None:
    before_pid = shared_worker.pid
    start = time.monotonic()
    result = quick(shared_worker, c_signature(HANG, "wb_hang"), timeout=1.0)
    elapsed = time.monotonic() - start
    assert result.status == "timeout" and result.measurement is None
    assert "`wb_hang`" in result.error and "within 1 s" in result.error
    assert 1.0 <= elapsed < 8.0
    assert not pid_alive(before_pid)  # the process and its spinning OpenMP threads are gone
    assert quick(shared_worker, matmul_kernel).ok


def test_allocation_failure_is_a_run_error(shared_worker) -> None:
    pid = shared_worker.pid
    result = quick(shared_worker, c_signature(NO_MEMORY, "wb_no_memory"))
    assert result.status == "run_error"
    assert "returned status 1" in result.error and "allocate" in result.error
    assert shared_worker.pid == pid  # no restart needed


def test_kernel_printing_to_stdout_does_not_confuse_the_protocol(shared_worker) -> None:
    result = quick(shared_worker, c_signature(CHATTY, "wb_chatty"), repeat=3)
    assert result.ok and result.measurement.repeat == 3


def test_missing_library_is_a_run_error(shared_worker, tmp_path) -> None:
    sig = KernelSignature(str(tmp_path / "nothing.so"), "f", (((4,), "float32"),), "f", None)
    result = quick(shared_worker, sig)
    assert result.status == "run_error" and "cannot load `f`" in result.error


def test_worker_stays_alive_between_measurements(shared_worker, matmul_kernel) -> None:
    pid = shared_worker.pid
    start = time.monotonic()
    for _ in range(5):
        assert quick(shared_worker, matmul_kernel, repeat=1, min_repeat_ms=0).ok
    assert shared_worker.pid == pid
    assert time.monotonic() - start < 5.0  # no Python start-up per measurement


def test_isolated_close_to_in_process(shared_worker) -> None:
    func = wb.workloads.matmul(128, 128, 128)
    kernel = wb.build(func)
    args = random_args(func)
    isolated = shared_worker.measure_kernel(kernel, repeat=5, min_repeat_ms=50).measurement
    local = wb.measure(kernel, *args, repeat=5, min_repeat_ms=50)
    assert 1 / 3 < isolated.median / local.median < 3


def test_flush_cache_reaches_the_worker(matmul_kernel) -> None:
    with Worker() as w:
        result = quick(w, matmul_kernel, repeat=3, flush_cache=True)
    assert result.ok
    assert result.measurement.number == 1 and result.measurement.repeat == 3


def test_interrupt_while_waiting_restarts_the_worker(monkeypatch, matmul_kernel) -> None:
    with Worker() as w:
        assert quick(w, matmul_kernel).ok
        pid = w.pid

        def interrupted(self, deadline):
            raise KeyboardInterrupt

        with monkeypatch.context() as m:
            m.setattr(isolation._Process, "receive", interrupted)
            with pytest.raises(KeyboardInterrupt):
                quick(w, matmul_kernel)
        assert not pid_alive(pid) and w.pid != pid
        assert quick(w, matmul_kernel).ok


def test_closed_worker_refuses(matmul_kernel) -> None:
    w = Worker()
    pid = w.pid
    w.close()
    w.close()  # idempotent
    assert w.pid is None and not pid_alive(pid)
    with pytest.raises(RuntimeError, match="closed"):
        quick(w, matmul_kernel)


def test_worker_exits_when_its_parent_dies(tmp_path) -> None:
    script = textwrap.dedent("""\
        import os, sys
        from workbench.runtime.isolation import Worker
        w = Worker()
        w._ready()
        print(w.pid, flush=True)
        os._exit(0)   # no close(), no atexit
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    child = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 10
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(child)


def test_timeout_must_be_positive(shared_worker, matmul_kernel) -> None:
    with pytest.raises(ValueError, match="timeout"):
        quick(shared_worker, matmul_kernel, timeout=0)


def test_default_worker_is_shared() -> None:
    assert default_worker() is default_worker()


def test_run_result_validation() -> None:
    m = wb.Measurement(samples=(0.1,), number=1, repeat=1)
    assert RunResult("ok", m).ok
    with pytest.raises(ValueError, match="status"):
        RunResult("exploded", None)
    with pytest.raises(ValueError, match="carry a Measurement"):
        RunResult("ok", None)
    with pytest.raises(ValueError, match="measurement=None"):
        RunResult("crash", m, "boom")
    err = MeasureError(RunResult("timeout", None, "too slow"))
    assert err.result.status == "timeout" and "timeout" in str(err) and "too slow" in str(err)


def test_kernel_signature(matmul_kernel) -> None:
    sig = kernel_signature(matmul_kernel)
    assert sig.symbol == "matmul" and sig.name == "matmul"
    assert os.path.exists(sig.so_path) and sig.so_path.endswith(".so")
    assert sig.params == (((64, 64), "float32"),) * 3
    assert sig.flops == matmul_kernel.flops
    assert kernel_signature(sig) is sig
    with pytest.raises(TypeError, match="wb.build"):
        kernel_signature(lambda: None)  # type: ignore[arg-type]


# --- wb.measure(..., isolated=True) -------------------------------------------------


def test_wb_measure_isolated(matmul_kernel) -> None:
    m = wb.measure(matmul_kernel, repeat=3, min_repeat_ms=1, isolated=True)
    assert isinstance(m, wb.Measurement) and m.repeat == 3 and m.flops == 2 * 64**3
    args = [np.zeros((64, 64), "float32") for _ in range(3)]
    m = wb.measure(matmul_kernel, *args, repeat=2, min_repeat_ms=1, isolated=True, flops=7)
    assert m.flops == 7


def test_wb_measure_isolated_checks_args(matmul_kernel) -> None:
    bad = [np.zeros((64, 64), "float32"), np.zeros((64, 64), "float64")]
    with pytest.raises(wb.KernelArgumentError, match="takes 3 arrays"):
        wb.measure(matmul_kernel, *bad, isolated=True)
    bad.append(np.zeros((64, 64), "float32"))
    with pytest.raises(wb.KernelArgumentError, match="argument 1 must be a float32"):
        wb.measure(matmul_kernel, *bad, isolated=True)


def test_wb_measure_isolated_raises_measure_error_on_crash() -> None:
    kernel = c_kernel(SEGFAULT, "wb_segfault")
    with pytest.raises(wb.MeasureError) as info:
        wb.measure(kernel, repeat=2, min_repeat_ms=1, isolated=True)
    assert info.value.result.status == "crash"
    assert "SIGSEGV" in str(info.value)
    # the shared worker came back
    good = wb.build(wb.workloads.matmul(16, 16, 16))
    assert wb.measure(good, repeat=1, min_repeat_ms=0, isolated=True).repeat == 1


def test_wb_measure_isolated_timeout() -> None:
    kernel = c_kernel(HANG, "wb_hang")
    with pytest.raises(wb.MeasureError, match="timeout") as info:
        wb.measure(kernel, repeat=1, isolated=True, timeout=0.5)
    assert info.value.result.status == "timeout"


def test_wb_measure_isolated_refuses_plain_functions() -> None:
    with pytest.raises(TypeError, match="Kernel from wb.build"):
        wb.measure(lambda: None, isolated=True)


# --- build_many --------------------------------------------------------------------


def _schedules(n: int = 64) -> list[wb.Schedule]:
    func = wb.workloads.matmul(n, n, n)
    out = []
    for factor in (4, 8, 16):
        sch = wb.Schedule(func)
        i, j, k = sch.get_loops(sch.get_block("C"))
        j0, j1 = sch.split(j, factors=[None, factor])
        sch.reorder(i, j0, k, j1)
        out.append(sch)
    return out


def test_build_many_builds_schedules_in_order() -> None:
    schedules = _schedules()
    func = wb.workloads.matmul(64, 64, 64)
    kernels = build_many([*schedules, func, as_ir_module(func)], max_workers=2)
    assert all(isinstance(k, Kernel) for k in kernels)
    assert [k.mod for k in kernels[:3]] == [as_ir_module(s.mod) for s in schedules]
    sources = {k.source_hash for k in kernels[:3]}
    assert len(sources) == 3  # three different schedules, three different kernels
    for sch in schedules:
        wb.verify(sch.mod, func)
    a, b = (np.random.default_rng(0).standard_normal((64, 64)).astype("float32") for _ in "ab")
    for kernel in kernels:
        c = np.zeros((64, 64), "float32")
        kernel(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_build_many_turns_compile_errors_into_strings(monkeypatch) -> None:
    schedules = _schedules()
    real_build = isolation.build

    def flaky_build(mod, target="c"):
        if mod is schedules[1].mod:
            raise CompileError(("gcc",), "int f( {", "f.c:1:7: error: expected", 1)
        return real_build(mod, target=target)

    monkeypatch.setattr(isolation, "build", flaky_build)
    results = build_many(schedules, max_workers=2)
    assert isinstance(results[0], Kernel) and isinstance(results[2], Kernel)
    assert isinstance(results[1], str)
    assert results[1].startswith("CompileError: C compilation failed")


def test_build_many_other_errors_propagate() -> None:
    with pytest.raises(TypeError, match="build_many takes"):
        build_many([42])
    with pytest.raises(ValueError, match="max_workers"):
        build_many([], max_workers=0)


# --- the worker's own request handling -----------------------------------------------


def test_worker_handle_refuses_bad_requests() -> None:
    reply = worker.handle({"so_path": "x.so"})
    assert reply["status"] == "run_error" and "bad measurement request" in reply["error"]
    good = {
        "so_path": str(compile_shared(NO_MEMORY)),
        "symbol": "wb_no_memory",
        "params": [[[4], "float32"], [[4], "float32"]],
        "number": None, "repeat": 1, "min_repeat_ms": 0, "warmup": 1,
        "flush_cache": False, "seed": 0,
    }
    assert "status 1" in worker.handle(good)["error"]
    assert "repeat" in worker.handle({**good, "repeat": True})["error"]
    assert "dtype" in worker.handle({**good, "params": [[[4], "complex64"]]})["error"]


def test_worker_random_arrays() -> None:
    rng = np.random.default_rng(0)
    assert worker.random_array([3, 2], "float32", rng).shape == (3, 2)
    ints = worker.random_array([1000], "int8", rng)
    assert ints.dtype == np.int8 and ints.min() >= -8 and ints.max() < 8
    assert worker.random_array([1000], "uint16", rng).min() >= 0
    assert worker.random_array([5], "bool", rng).dtype == np.bool_


# -- the channel: request ids, descriptors kept away from the kernel ------------------
FORGE = HEADER + textwrap.dedent("""\
    #include <string.h>
    #include <unistd.h>
    /* Writes a reply-shaped line to every descriptor from 0 to {last}. */
    int32_t wb_forge(float* A, float* B) {{
      const char* line = "{{\\"phase\\": \\"running\\"}}\\n{{\\"status\\": \\"ok\\", "
                         "\\"samples\\": [1e-09], \\"number\\": 1, \\"repeat\\": 1}}\\n";
      for (int fd = 0; fd <= {last}; ++fd) {{
        if (write(fd, line, strlen(line)) < 0) {{ /* not open, or read-only */ }}
      }}
      B[0] = A[0];
      return 0;
    }}
""")


def test_reply_shaped_output_on_inherited_descriptors_changes_nothing(matmul_kernel):
    """A kernel writing fake replies to every low descriptor (where a child's inherited
    pipes live) neither produces a fake result nor shifts the next reply."""
    with Worker() as w:
        forged = quick(w, c_signature(FORGE.format(last=worker.CHANNEL_FD_MIN - 1),
                                      "wb_forge"), repeat=3)
        assert forged.ok and forged.measurement.samples != (1e-9,) * 3
        crash = quick(w, c_signature(SEGFAULT, "wb_segfault"))
        assert crash.status == "crash" and "SIGSEGV" in crash.error
        assert quick(w, matmul_kernel).ok


def test_a_forged_reply_on_the_channel_is_a_protocol_error(matmul_kernel):
    """Even a kernel that finds the channel's descriptor cannot answer for the worker:
    its line lacks the request's id, so the worker is restarted and the candidate fails."""
    with Worker() as w:
        starts = w.starts
        forged = quick(w, c_signature(FORGE.format(last=worker.CHANNEL_FD_MIN + 64),
                                      "wb_forge"))
        assert forged.status == "crash" and "protocol error" in forged.error
        assert w.starts == starts + 1
        assert quick(w, matmul_kernel).ok
        crash = quick(w, c_signature(SEGFAULT, "wb_segfault"))
        assert crash.status == "crash" and "SIGSEGV" in crash.error


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), 0, -1, "10"])
def test_timeouts_must_be_finite_positive_numbers(matmul_kernel, timeout):
    from workbench.widgets.editor import ScheduleEditor
    from workbench.widgets.editor_model import EditorModel

    with pytest.raises(ValueError, match="timeout must be a finite number"):
        isolation.measure_isolated(matmul_kernel, timeout=timeout)
    with pytest.raises(ValueError, match="timeout must be a finite number"):
        default_worker().measure_kernel(matmul_kernel, timeout=timeout)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        wb.tune(wb.workloads.matmul(16, 16, 16), trials=1, timeout=timeout, progress=False)
    with pytest.raises(ValueError, match="ScheduleEditor: timeout must be a finite"):
        EditorModel(wb.workloads.matmul(16, 16, 16), timeout=timeout)
    with pytest.raises(ValueError, match="ScheduleEditor: timeout must be a finite"):
        ScheduleEditor(wb.workloads.matmul(16, 16, 16), timeout=timeout)


@pytest.mark.parametrize(
    "kwargs", [{"warmup": -1}, {"repeat": 0}, {"number": 0}, {"min_repeat_ms": -1},
               {"min_repeat_ms": float("inf")}, {"warmup": 1.5}])
def test_isolated_measure_refuses_bad_timer_arguments(matmul_kernel, kwargs):
    before = default_worker().starts
    with pytest.raises(ValueError):
        wb.measure(matmul_kernel, isolated=True, **kwargs)
    with pytest.raises(ValueError):
        default_worker().measure_kernel(matmul_kernel, **kwargs)
    assert default_worker().starts == before  # refused before anything was sent


# -- the worker's arrays start at a 64-byte boundary, as TVM allocates them -------------
MISALIGNED = HEADER + textwrap.dedent("""\
    /* Status 1 (nonzero) when an argument does not start at a 64-byte boundary. */
    int32_t wb_misaligned(float* A, float* B, int8_t* C) {
      if ((uintptr_t)A % 64 || (uintptr_t)B % 64 || (uintptr_t)C % 64) return 1;
      return 0;
    }
""")


def test_worker_measures_on_64_byte_aligned_arrays() -> None:
    """Where an array starts changes a vectorized kernel's time (a 32-byte vector that
    straddles two cache lines): the worker must not leave that to the allocator."""
    rng = np.random.default_rng(0)
    for shape, dtype in [([128, 128], "float32"), ([5, 7], "float64"), ([3], "int8"),
                         ([33], "bool"), ([1000], "uint16")]:
        for _ in range(3):
            arr = worker.random_array(shape, dtype, rng)
            assert arr.ctypes.data % 64 == 0, (shape, dtype, arr.ctypes.data % 64)
            assert arr.shape == tuple(shape) and arr.dtype == np.dtype(dtype)
    request = {
        "so_path": str(compile_shared(MISALIGNED)), "symbol": "wb_misaligned",
        "params": [[[128, 128], "float32"], [[5, 3], "float32"], [[7], "int8"]],
        "number": None, "repeat": 1, "min_repeat_ms": 0, "warmup": 1,
        "flush_cache": False, "seed": 0,
    }
    for seed in range(3):
        assert worker.handle({**request, "seed": seed})["status"] == "ok"
