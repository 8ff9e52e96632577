"""Estimated GPU latency from the emulator's profile: for tuning without a GPU.

``wb.tune(func, target="cuda", estimate="emulator")`` cannot time anything, so it ranks
candidates by an *estimate*: each candidate is run once in the GPU emulator with memory
instrumentation (:meth:`~workbench.runtime.gpu.EmulatedKernel.profile`: global-memory
sectors, shared-memory wavefronts with bank conflicts, launch sizes, occupancy), and
:func:`estimate_latency` turns that profile into seconds with a roofline-style model
built from the target's figures (:attr:`workbench.Target.figures`: SM count, FP32
peak, DRAM bandwidth, clock). Everything that shows such a number labels it an estimate.

The model, per kernel (the kernels of a function add up):

* ``blocks`` thread blocks of ``threads`` threads; the occupancy calculator gives
  ``blocks_per_sm``. Busy SMs: ``min(SMs, blocks)``; resident warps per busy SM:
  ``min(blocks_per_sm, ceil(blocks / SMs)) * warps_per_block``;
* latency hiding ``h = min(1, resident warps / 16)`` (four warps per scheduler, four
  schedulers per SM); parallel fraction ``p = busy SMs / SMs * h``; lane efficiency
  ``threads / (warps_per_block * 32)`` (a partial warp wastes lanes);
* compute: ``flops / (peak_fp32 * p * lane efficiency)``;
* global memory: ``sectors * 32 B / (DRAM bandwidth * p)``: every sector the warps
  request is charged at DRAM bandwidth (no cache model: an upper bound for kernels that
  re-read data, which is what tiling removes);
* shared memory: ``wavefronts / (busy SMs * clock * h)`` (one wavefront per SM per clock;
  a bank conflict is an extra wavefront);
* the kernel takes the largest of the three plus ``launch_overhead`` (2 us).

It ranks schedules by what the emulator can see (coalescing, bank conflicts, reuse
through shared memory, parallelism, occupancy); it knows nothing of instruction
latencies, caches, register spills or the compiler, so it is no substitute for a
measurement.

>>> import workbench as wb
>>> from workbench import dlight as dl
>>> func = wb.workloads.matmul(64, 64, 64)
>>> naive = dl.gpu.Fallback().apply(func, wb.Target("cuda"), False)
>>> est = estimate_schedule(naive, "cuda -arch=sm_80")
>>> est.seconds > 0, est.kernels[0].bound in ("compute", "global memory", "shared memory")
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import IRModule, PrimFunc
from ..ir.stmt import Block
from ..runtime.flops import flop_count
from ..target import Target

__all__ = [
    "ESTIMATE_LABEL",
    "HIDING_WARPS",
    "LAUNCH_OVERHEAD",
    "Estimate",
    "KernelEstimate",
    "estimate_latency",
    "estimate_schedule",
]

#: How estimated latencies are labelled wherever they show.
ESTIMATE_LABEL = "estimated latency (emulator profile, not measured)"
#: Resident warps per SM needed to hide latency fully (4 per scheduler x 4 schedulers).
HIDING_WARPS = 16
#: Seconds added per kernel launch.
LAUNCH_OVERHEAD = 2e-6
SECTOR_BYTES = 32


@dataclass(frozen=True)
class KernelEstimate:
    """One kernel's estimate: the three times of the model (seconds), the one that
    bounds it (``bound``), and the figures they came from."""

    name: str
    seconds: float
    compute: float
    global_memory: float
    shared_memory: float
    flops: int
    global_bytes: int
    shared_wavefronts: int
    parallel_fraction: float

    @property
    def bound(self) -> str:
        times = {"compute": self.compute, "global memory": self.global_memory,
                 "shared memory": self.shared_memory}
        return max(times, key=times.get)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Estimate:
    """A function's estimated latency (``seconds``) on ``target``, per kernel."""

    seconds: float
    kernels: tuple[KernelEstimate, ...]
    target: str

    def __repr__(self) -> str:
        parts = ", ".join(f"{k.name}: {k.seconds * 1e6:.2f} us ({k.bound} bound)"
                          for k in self.kernels)
        return (f"Estimate({self.seconds * 1e6:.2f} us on {self.target}, {ESTIMATE_LABEL}; "
                f"{parts})")


def _kernel_estimate(kp: Any, flops: int, tgt: Target, launch_overhead: float
                     ) -> KernelEstimate:
    fig = tgt.figures
    if fig is None:  # pragma: no cover - every CUDA arch has figures
        raise ValueError(f"estimate: no throughput figures for {tgt}")
    blocks = int(np.prod(kp.grid))
    threads = kp.threads_per_block
    warp = tgt.warp_size or 32
    warps_per_block = -(-threads // warp)
    occ = kp.occupancy
    if occ is None or occ.blocks_per_sm < 1:
        raise ValueError(f"estimate: kernel {kp.name} does not fit on an SM of {tgt} "
                         f"({threads} threads, {kp.shared_bytes} B shared)")
    busy = min(fig.sm_count, blocks)
    resident = min(occ.blocks_per_sm, -(-blocks // fig.sm_count)) * warps_per_block
    hiding = min(1.0, resident / HIDING_WARPS)
    p = busy / fig.sm_count * hiding
    lanes = threads / (warps_per_block * warp)
    sectors = kp.total("global", "load", "transactions") + kp.total(
        "global", "store", "transactions")
    wavefronts = kp.total("shared", "load", "transactions") + kp.total(
        "shared", "store", "transactions")
    compute = flops / (fig.peak_fp32_flops * p * lanes)
    global_memory = sectors * SECTOR_BYTES / (fig.dram_bandwidth * p)
    shared_memory = wavefronts / (busy * fig.clock_hz * hiding)
    seconds = max(compute, global_memory, shared_memory) + launch_overhead
    return KernelEstimate(kp.name, seconds, compute, global_memory, shared_memory, flops,
                          sectors * SECTOR_BYTES, wavefronts, p)


def estimate_latency(profile: Any, flops: dict[str, int] | int, target: Any = None,
                     launch_overhead: float = LAUNCH_OVERHEAD) -> Estimate:
    """The model of the module docstring applied to a
    :class:`~workbench.codegen.gpu_instrument.GpuProfile` (or anything with its
    ``kernels`` of ``KernelProfile``); ``flops`` per kernel name (or one count for a
    single kernel); ``target`` defaults to the profile's.

    >>> from types import SimpleNamespace as NS
    >>> import workbench as wb
    >>> t = wb.Target("cuda", arch="sm_80")
    >>> kp = NS(name="k", grid=(1080, 1, 1), threads_per_block=256, shared_bytes=0,
    ...         occupancy=t.occupancy(256, 0, 32),
    ...         total=lambda space, kind, what: 0)
    >>> est = estimate_latency(NS(kernels=[kp]), 19_500_000_000, t, launch_overhead=0)
    >>> round(est.seconds * 1e3, 3), est.kernels[0].bound   # 19.5 GFLOP at 19.5 TFLOP/s
    (1.0, 'compute')
    """
    tgt = Target.from_any(target if target is not None else profile.target)
    kernels = list(profile.kernels)
    if isinstance(flops, int):
        if len(kernels) != 1:
            raise ValueError("estimate_latency: pass flops per kernel name for "
                             f"{len(kernels)} kernels")
        flops = {kernels[0].name: flops}
    out = tuple(_kernel_estimate(k, int(flops.get(k.name, 0)), tgt, launch_overhead)
                for k in kernels)
    return Estimate(sum(k.seconds for k in out), out, str(tgt))


def _kernel_flops(kernel: Any) -> int:
    """Flops one kernel executes (its loop nest counted as a function of its own)."""
    body = kernel.body
    wrapper = PrimFunc(kernel.name, tuple(kernel.params), Block("root", (), (), body))
    return int(flop_count(wrapper))


def estimate_schedule(
    mod: Any,
    target: Any = "cuda",
    *,
    device: Any = None,
    lowered: Any = None,
    seed: int = 0,
) -> Estimate:
    """Build ``mod`` (a Schedule, PrimFunc or IRModule of one static function) for the
    emulator with profiling, run it once on random inputs and return
    :func:`estimate_latency` of its profile. ``device``/``lowered``: the result of
    :func:`~workbench.codegen.gpu.lower_for_gpu` when already known (saves planning it
    again). Raises :class:`~workbench.codegen.gpu.GpuError` for a schedule the planner
    refuses, ValueError for a symbolic function."""
    from ..codegen.c import as_ir_module
    from ..codegen.emulate import emulate_device_function, instrument_tables
    from ..codegen.gpu import lower_for_gpu
    from ..codegen.gpu_instrument import read_profile, set_mode
    from ..runtime.gpu import _compile
    from ..runtime.worker import random_array

    tgt = Target.from_any(target)
    if device is None:
        lowered, device = lower_for_gpu(as_ir_module(mod), tgt)
    if len(device.functions) != 1:
        raise ValueError(f"estimate: expected one function, got {len(device.functions)}")
    (df,) = device.functions
    if df.func.shape_vars:
        raise ValueError(f"estimate: {df.name!r} has symbolic shapes; estimate a "
                         "specialized copy")
    emulated = emulate_device_function(df, instrument="profile")
    _, generated, lib = _compile([emulated])
    from ..runtime.cpu import Kernel

    kernel = Kernel(IRModule.from_funcs(emulated), generated.text, lib, generated.symbols)
    rng = np.random.default_rng(seed)
    arrays = [random_array(list(p.shape), p.dtype.name if hasattr(p.dtype, "name")
                           else str(p.dtype), rng) for p in df.func.params]
    fn = kernel[df.name]
    fn._before_call = lambda: set_mode(kernel._lib, "profile")
    fn(*arrays)
    profile = read_profile(kernel._lib, instrument_tables(emulated), tgt, df.kernels)
    flops = {k.name: _kernel_flops(k) for k in df.kernels}
    return estimate_latency(profile, flops, tgt)
