"""The shared-memory tiled GPU matmul (``workbench.gpu_examples.gpu_matmul_schedule``):
on a GPU against cuBLAS, and in the emulator on any machine.

With a GPU (cupy installed, ``pip install 'schedule-workbench[gpu]'``), for each size:
our CUDA kernel and ``cupy.matmul`` (cuBLAS), timed with CUDA events side by side in one
run, in GFLOPS, and their ratio.

Without one it says so and prints what the emulator gives instead:

* **emulation speed**: building and running the kernels on the CPU with the GPU's
  semantics (thread blocks in parallel, each block's threads split at every barrier),
  median of 3 runs, checked against numpy;
* **race-check overhead**: the same run with ``check_races=True`` (every shared and
  global access recorded between barriers) against the plain emulation;
* **memory profile** with and without ``storage_align`` on the ``A`` tile: global sectors
  per request (coalescing), shared-memory wavefronts and bank conflicts, occupancy.

Run it as::

    python bench/gpu_matmul.py                 # emulate 1024^3; races at 256, 512
    python bench/gpu_matmul.py --sizes 512 1024 2048   # sizes on a GPU
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workbench as wb  # noqa: E402
from workbench.gpu_examples import gpu_matmul_schedule  # noqa: E402
from workbench.runtime.peak import cpu_spec  # noqa: E402


def _inputs(n: int):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    return a, b, np.zeros((n, n), "float32")


def _median_time(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def on_gpu(sizes: list[int]) -> None:
    import cupy

    from workbench.runtime.cuda import time_with_events

    target = wb.Target.current_device()
    print(f"GPU: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()} ({target})")
    print(f"{'n':>6} {'ours GFLOPS':>12} {'cuBLAS GFLOPS':>14} {'ours/cuBLAS':>12}")
    for n in sizes:
        kernel = wb.build(gpu_matmul_schedule(n).mod, target=target)
        a, b, c = (cupy.asarray(x) for x in _inputs(n))
        kernel(a, b, c)
        err = float(cupy.abs(c - a @ b).max())
        ours = time_with_events(partial(kernel, a, b, c), 10) / 10
        cublas = time_with_events(partial(cupy.matmul, a, b, out=c), 10) / 10
        flops = 2 * n**3
        print(f"{n:>6} {flops / ours / 1e9:>12.1f} {flops / cublas / 1e9:>14.1f} "
              f"{cublas / ours:>11.2f}x   (max |error| {err:.1e})")


def emulated(n: int, race_sizes: list[int], profile_n: int) -> None:
    print(f"\n== emulating {n}^3 (gpu_matmul_schedule: 64x64 tiles, 256 threads, "
          "shared A/B tiles, local 4x4 accumulators)")
    t = time.perf_counter()
    kernel = wb.build(gpu_matmul_schedule(n).mod, target="cuda", emulate=True)
    build_s = time.perf_counter() - t
    a, b, c = _inputs(n)
    run_s = _median_time(partial(kernel, a, b, c))
    err = float(np.abs(c - a @ b).max())
    print(f"build (plan + CUDA + emulator C + compile): {build_s:.2f} s; "
          f"emulation: {run_s:.3f} s (median of 3), max |error| vs numpy {err:.1e}")

    print("\n== race-check overhead (check_races=True against the plain emulation)")
    print(f"{'n':>6} {'plain s':>9} {'race-checked s':>15} {'overhead':>9}")
    for m in race_sizes:
        plain = wb.build(gpu_matmul_schedule(m).mod, target="cuda", emulate=True)
        checked = wb.build(gpu_matmul_schedule(m).mod, target="cuda", emulate=True,
                           check_races=True)
        x, y, z = _inputs(m)
        tp = _median_time(partial(plain, x, y, z))
        tc = _median_time(partial(checked, x, y, z))
        print(f"{m:>6} {tp:>9.3f} {tc:>15.3f} {tc / tp:>8.1f}x")

    print(f"\n== memory profile at {profile_n}^3 (the emulator's counts, not a GPU's timing)")
    x, y, z = _inputs(profile_n)
    for align in (False, True):
        k = wb.build(gpu_matmul_schedule(profile_n, align=align).mod, target="cuda",
                     emulate=True)
        label = "with storage_align(A_shared, 0, 32, 1)" if align else "without storage_align"
        print(f"-- {label}")
        print(k.profile(x, y, z, target="cuda -arch=sm_80"))


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1024, 2048, 4096],
                        help="matmul sizes on a GPU")
    parser.add_argument("--emulate", type=int, default=1024, help="size to emulate")
    parser.add_argument("--races", type=int, nargs="*", default=[256, 512],
                        help="sizes for the race-check overhead")
    parser.add_argument("--profile", type=int, default=256, help="size to profile")
    args = parser.parse_args()
    spec = cpu_spec()
    model = next((line.split(":", 1)[1].strip() for line in _cpuinfo().splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown CPU")
    print(f"CPU: {model}, {os.cpu_count()} logical CPUs, {spec.cores} physical cores "
          f"usable, vector ISA {spec.isa}; emulator threads: "
          f"{os.environ.get('OMP_NUM_THREADS', 'all cores (OMP_NUM_THREADS unset)')}")
    try:
        wb.Target.current_device()
        has_gpu = True
    except Exception as err:  # no cupy, no driver or no device
        has_gpu = False
        print(f"No GPU here ({err}); emulator figures instead.")
    if has_gpu:
        on_gpu(args.sizes)
    emulated(args.emulate, args.races, args.profile)


if __name__ == "__main__":
    main()
