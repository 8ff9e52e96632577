"""The machine's float32 peak, so every measured GFLOPS can be shown as a fraction of it.

`peak_gflops()` estimates it from the CPU description (cores x clock x vector lanes x 2
flops per FMA x FMA units); `peak_gflops(measured=True)` runs a small FMA
microbenchmark on all the cores this process may use.

Example:
    >>> spec = cpu_spec()
    >>> spec.lanes in (4, 8, 16) and spec.cores >= 1
    True
    >>> peak_gflops() > 0
    True
"""

from __future__ import annotations

import ctypes
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuCaches", "CpuSpec", "VectorIsa", "cpu_caches", "cpu_model", "cpu_spec",
           "peak_gflops", "vector_isa"]

_CPU_DIR = Path("/sys/devices/system/cpu")
_CPUINFO = Path("/proc/cpuinfo")
_MHZ_RE = re.compile(r"^cpu MHz\s*:\s*([0-9.]+)", re.MULTILINE)
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMG]?)i?B?\s*$", re.IGNORECASE)  # "32K", "1024K"
_SIZE_SHIFT = {"": 0, "K": 10, "M": 20, "G": 30}
_FLAGS_RE = re.compile(r"^(?:flags|Features)\s*:\s*(.*)$", re.MULTILINE)

#: Independent FMA chains per thread: enough to hide a 4-cycle latency on 2 FMA units,
#: few enough to stay in registers with 16 vector registers (AVX2).
_ACCUMULATORS = 12
_TARGET_SECONDS = 0.1
_RUNS = 5
_BENCH_FLAGS = (
    "-O3",
    "-march=native",
    "-fopenmp",
    "-shared",
    "-fPIC",
    "-std=gnu11",
    "-ffp-contract=fast",  # a * b + c must become one FMA instruction
)
_BENCH_SOURCE = f"""\
// Schedule Workbench: float32 FMA peak microbenchmark
#include <stdint.h>
#include <omp.h>

#if defined(__AVX512F__)
#define WB_LANES 16
#elif defined(__AVX__)
#define WB_LANES 8
#else
#define WB_LANES 4
#endif
#define WB_ACC {_ACCUMULATORS}

typedef float wb_vec __attribute__((vector_size(WB_LANES * sizeof(float))));

int32_t wb_peak_lanes(void) {{ return WB_LANES; }}
int32_t wb_peak_accumulators(void) {{ return WB_ACC; }}

/* Every thread runs `iters` rounds of WB_ACC independent vector FMAs; the sum of the
   results goes to *sink so nothing is optimised away. Returns the number of threads. */
int32_t wb_peak_fma(int64_t iters, float* sink) {{
  int32_t threads = 0;
  #pragma omp parallel
  {{
    wb_vec acc[WB_ACC];
    wb_vec mul, add;
    for (int l = 0; l < WB_LANES; ++l) {{
      mul[l] = 0.999999f;
      add[l] = 1e-6f;
    }}
    for (int a = 0; a < WB_ACC; ++a)
      for (int l = 0; l < WB_LANES; ++l) acc[a][l] = 0.001f * (float)(a * WB_LANES + l);
    for (int64_t it = 0; it < iters; ++it) {{
      #pragma GCC unroll 16
      for (int a = 0; a < WB_ACC; ++a) acc[a] = acc[a] * mul + add;
    }}
    float total = 0.0f;
    for (int a = 0; a < WB_ACC; ++a)
      for (int l = 0; l < WB_LANES; ++l) total += acc[a][l];
    #pragma omp atomic
    sink[0] += total;
    #pragma omp atomic
    threads += 1;
  }}
  return threads;
}}
"""


@dataclass(frozen=True)
class CpuSpec:
    """What the peak estimate is made of.

    ``cores``: physical cores this process may run on; ``ghz``: maximum clock (None when
    unknown); ``lanes``: float32 lanes per vector instruction (16 with AVX-512, 8 with
    AVX/AVX2, 4 otherwise); ``fma_units``: vector FMA instructions issued per cycle.

    Example:
        >>> CpuSpec(cores=2, ghz=2.6, lanes=16, fma_units=2, isa="avx512f").gflops
        332.8
    """

    cores: int
    ghz: float | None
    lanes: int
    fma_units: int
    isa: str

    @property
    def gflops(self) -> float | None:
        """cores x GHz x lanes x 2 (an FMA is two flops) x FMA units; None without clock."""
        if self.ghz is None:
            return None
        return round(self.cores * self.ghz * self.lanes * 2 * self.fma_units, 3)


@dataclass(frozen=True)
class VectorIsa:
    """The float32 vector unit a kernel is tiled for, as the CPU flags describe it.

    ``name``: ``"avx512f"``, ``"avx2"``, ``"avx"`` or ``"sse"``; ``lanes``: float32
    lanes of one vector register; ``registers``: architectural vector registers (what a
    register tile of accumulators, the loaded vectors and a broadcast must fit in);
    ``fma``: whether one instruction does a fused multiply-add.

    Example:
        >>> vector_isa({"avx2", "fma", "avx"})
        VectorIsa(name='avx2', lanes=8, registers=16, fma=True)
    """

    name: str
    lanes: int
    registers: int
    fma: bool


def vector_isa(flags: Iterable[str] | None = None) -> VectorIsa:
    """The vector ISA of a CPU with ``flags`` (``/proc/cpuinfo`` spelling; this
    machine's by default): AVX-512 (``avx512f``) has 16 float32 lanes and 32 vector
    registers, AVX2 and AVX 8 lanes and 16 registers, anything else is taken as SSE
    (4 lanes, 16 registers on x86-64).

    Example:
        >>> vector_isa({"avx512f", "avx2", "fma"}).registers, vector_isa(set()).lanes
        (32, 4)
    """
    if flags is None:
        match = _FLAGS_RE.search(_read(_CPUINFO) or "")
        flags = match.group(1).split() if match else ()
    have = set(flags)
    if "avx512f" in have:
        return VectorIsa("avx512f", 16, 32, True)
    if "avx2" in have:
        return VectorIsa("avx2", 8, 16, "fma" in have)
    if "avx" in have:
        return VectorIsa("avx", 8, 16, "fma" in have)
    return VectorIsa("sse", 4, 16, False)


@dataclass(frozen=True)
class CpuCaches:
    """Data cache sizes in bytes seen by one core (None where sysfs does not say):
    ``l1d`` and ``l2`` are per core on current x86 parts, ``l3`` is usually shared.

    Example:
        >>> CpuCaches(l1d=32 << 10, l2=1 << 20, l3=None).l2
        1048576
    """

    l1d: int | None
    l2: int | None
    l3: int | None


def cpu_caches(cache_dir: Path | None = None) -> CpuCaches:
    """The data (or unified) cache sizes of CPU 0, from sysfs
    (``/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}``).

    Example:
        >>> caches = cpu_caches()
        >>> caches.l1d is None or caches.l1d >= 4096
        True
    """
    folder = Path(cache_dir) if cache_dir is not None else _CPU_DIR / "cpu0" / "cache"
    sizes: dict[int, int] = {}
    for index in sorted(folder.glob("index*")):
        level, kind, size = (_read(index / f) for f in ("level", "type", "size"))
        if level is None or kind is None or size is None or kind.strip() == "Instruction":
            continue
        match = _SIZE_RE.match(size)
        parsed = int(match.group(1)) << _SIZE_SHIFT[match.group(2).upper()] if match else 0
        if level.strip().isdigit() and parsed:
            sizes[int(level)] = parsed
    return CpuCaches(l1d=sizes.get(1), l2=sizes.get(2), l3=sizes.get(3))


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` ("unknown CPU" where it has none).

    Example:
        >>> isinstance(cpu_model(), str)
        True
    """
    match = re.search(r"^model name\s*:\s*(.*)$", _read(_CPUINFO) or "", re.MULTILINE)
    return match.group(1).strip() if match else "unknown CPU"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _physical_cores(cpus: set[int]) -> int:
    """Distinct (package, core) pairs among ``cpus``; SMT siblings count once."""
    cores = set()
    for cpu in cpus:
        topo = _CPU_DIR / f"cpu{cpu}" / "topology"
        package, core = _read(topo / "physical_package_id"), _read(topo / "core_id")
        if package is None or core is None:
            cores.add(("cpu", cpu))
        else:
            cores.add((package.strip(), core.strip()))
    return max(len(cores), 1)


def _max_ghz(cpuinfo: str) -> float | None:
    khz = _read(_CPU_DIR / "cpu0" / "cpufreq" / "cpuinfo_max_freq")
    if khz and khz.strip().isdigit():
        return round(int(khz) / 1e6, 3)
    mhz = [float(m) for m in _MHZ_RE.findall(cpuinfo)]
    return round(max(mhz) / 1e3, 3) if mhz else None


def cpu_spec() -> CpuSpec:
    """Describe this CPU from ``os.sched_getaffinity``, sysfs and ``/proc/cpuinfo``.

    Assumption: a CPU with AVX-512 or AVX2 issues two vector FMAs per cycle (true of
    server parts — Xeon Skylake-SP and later, EPYC Zen 4 — but some client and low-end
    parts have one 512-bit unit); older CPUs one. The clock is the maximum frequency,
    else the "cpu MHz" the kernel reports (a VM often only gives the nominal one).

    Example:
        >>> cpu_spec().fma_units in (1, 2)
        True
    """
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    cores = _physical_cores(cpus) if cpus else (os.cpu_count() or 1)
    cpuinfo = _read(_CPUINFO) or ""
    match = _FLAGS_RE.search(cpuinfo)
    flags = set(match.group(1).split()) if match else set()
    if "avx512f" in flags:
        lanes, units, isa = 16, 2, "avx512f"
    elif "avx2" in flags:
        lanes, units, isa = 8, 2, "avx2"
    elif "avx" in flags:
        lanes, units, isa = 8, 1, "avx"
    else:
        lanes, units, isa = 4, 1, "128-bit"
    return CpuSpec(cores=cores, ghz=_max_ghz(cpuinfo), lanes=lanes, fma_units=units, isa=isa)


def _run_microbenchmark() -> float:
    from .compiler import compile_and_load  # compiles once per machine (on-disk cache)

    lib = compile_and_load(_BENCH_SOURCE, flags=_BENCH_FLAGS)
    lib.wb_peak_fma.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_float)]
    lib.wb_peak_fma.restype = ctypes.c_int32
    flops_per_iter = lib.wb_peak_lanes() * lib.wb_peak_accumulators() * 2
    sink = ctypes.c_float(0.0)

    def run(iters: int) -> tuple[float, int]:
        start = time.perf_counter()
        threads = lib.wb_peak_fma(iters, ctypes.byref(sink))
        return time.perf_counter() - start, threads

    iters = 1 << 16
    run(iters)  # start the OpenMP threads
    elapsed, _ = run(iters)
    while elapsed < _TARGET_SECONDS / 10:
        iters *= 4
        elapsed, _ = run(iters)
    iters = max(int(iters * _TARGET_SECONDS / elapsed), 1)
    best = 0.0
    for _ in range(_RUNS):
        elapsed, threads = run(iters)
        best = max(best, threads * iters * flops_per_iter / elapsed / 1e9)
    return best


_measured_peak: float | None = None


def peak_gflops(measured: bool = False) -> float:
    """Float32 peak GFLOPS of the cores this process may use.

    By default an estimate from `cpu_spec()` (cores x clock x lanes x 2 x FMA units; on
    a 2-core 2.6 GHz AVX-512 server that is 332.8). ``measured=True`` compiles and runs
    an FMA microbenchmark (independent accumulators, OpenMP over the cores,
    ``-O3 -march=native``) and returns the best of 5 runs of ~0.1 s; it is run once per
    process and then remembered. When the clock is unknown the estimate falls back to
    the measured figure.

    Example:
        >>> 0 < peak_gflops() < 1e6
        True
    """
    global _measured_peak
    if not measured:
        estimate = cpu_spec().gflops
        if estimate is not None:
            return estimate
    if _measured_peak is None:
        _measured_peak = _run_microbenchmark()
    return _measured_peak
