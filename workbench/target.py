"""Compilation targets: ``wb.Target("c")`` and ``wb.Target("cuda", arch="sm_90")``.

A CUDA target carries the limits of its GPU architecture, which the GPU planner checks a
schedule against (threads per block, static shared memory per block) and which
:meth:`Target.occupancy` uses to compute how many thread blocks fit on one streaming
multiprocessor (SM), the way NVIDIA's CUDA Occupancy Calculator does.

>>> t = Target("cuda", arch="sm_90")
>>> t
Target(cuda -arch=sm_90)
>>> t.max_threads_per_block, t.max_shared_memory_per_sm // 1024
(1024, 228)
>>> Target.from_any({"kind": "cuda", "arch": "sm_80"}).max_threads_per_sm
2048

The per-architecture figures are those of the "Technical Specifications per Compute
Capability" table of the CUDA C++ Programming Guide and of NVIDIA's Volta, Turing,
Ampere and Hopper tuning guides:

========  ==============  =============  ====================  ========================
arch      threads per SM  blocks per SM  shared memory per SM  shared memory alloc unit
========  ==============  =============  ====================  ========================
sm_70     2048            32             96 KiB                256 B
sm_75     1024            16             64 KiB                256 B
sm_80     2048            32             164 KiB               128 B
sm_86     1536            16             100 KiB               128 B
sm_89     1536            24             100 KiB               128 B
sm_90     2048            32             228 KiB               128 B
========  ==============  =============  ====================  ========================

On every one of them: 1024 threads per block, warps of 32 threads, 65536 32-bit
registers per SM and at most 65536 per block, at most 255 registers per thread,
registers allocated per warp in units of 256, warps allocated (for registers) in groups
of 4, 48 KiB of statically declared shared memory per block (more only as opt-in dynamic
shared memory), 32 shared-memory banks of 4 bytes. From compute capability 8.0 on, the
CUDA runtime reserves 1 KiB of shared memory per thread block for system use, so the
opt-in maximum per block is the SM's capacity less 1 KiB (163 KiB on sm_80, 99 KiB on
sm_86/sm_89, 227 KiB on sm_90).
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "CUDA_ARCHS",
    "GPU_EXTRA_HINT",
    "TARGET_KINDS",
    "GpuFigures",
    "GpuUnavailableError",
    "Occupancy",
    "Target",
    "import_cupy",
]

#: What to install for the GPU runtime.
GPU_EXTRA_HINT = 'pip install "schedule-workbench[gpu]"'

TARGET_KINDS = ("c", "cuda")

KIB = 1024


@dataclass(frozen=True)
class _ArchLimits:
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_shared_memory_per_sm: int  # bytes
    shared_memory_alloc_unit: int  # bytes
    shared_memory_reserved_per_block: int  # bytes the CUDA runtime keeps per block


_ARCHS: dict[str, _ArchLimits] = {
    "sm_70": _ArchLimits(2048, 32, 96 * KIB, 256, 0),
    "sm_75": _ArchLimits(1024, 16, 64 * KIB, 256, 0),
    "sm_80": _ArchLimits(2048, 32, 164 * KIB, 128, KIB),
    "sm_86": _ArchLimits(1536, 16, 100 * KIB, 128, KIB),
    "sm_89": _ArchLimits(1536, 24, 100 * KIB, 128, KIB),
    "sm_90": _ArchLimits(2048, 32, 228 * KIB, 128, KIB),
}

#: The CUDA architectures a target may name.
CUDA_ARCHS = tuple(_ARCHS)


@dataclass(frozen=True)
class GpuFigures:
    """Throughput figures of one GPU part, for estimates (not for legality checks):
    ``part`` names the GPU the figures are from, ``sm_count`` its streaming
    multiprocessors, ``peak_fp32_flops`` its FP32 peak (FLOP/s, boost clock, FMA counted
    as 2), ``dram_bandwidth`` bytes/s, ``clock_hz`` the boost clock. Shared memory moves
    one 128-byte wavefront (32 banks x 4 bytes) per SM per clock on every one of them.

    >>> Target("cuda", arch="sm_80").figures.part
    'A100 SXM4'
    """

    part: str
    sm_count: int
    peak_fp32_flops: float
    dram_bandwidth: float
    clock_hz: float

    @property
    def shared_bandwidth_per_sm(self) -> float:
        """Shared-memory bytes per second one SM moves without bank conflicts."""
        return _SHARED_BANKS * _BANK_BYTES * self.clock_hz


# One common part per architecture. Sources: NVIDIA's data sheets / whitepapers of each
# part (Tesla V100 SXM2, Tesla T4, A100 SXM4 40GB, A10, L4, H100 SXM5), boost clocks and
# FP32 peaks as printed there; shared memory: 32 banks of 4 bytes per clock (CUDA C++
# Programming Guide, "Shared Memory" of each compute capability).
_FIGURES: dict[str, GpuFigures] = {
    "sm_70": GpuFigures("Tesla V100 SXM2", 80, 15.7e12, 900e9, 1530e6),
    "sm_75": GpuFigures("Tesla T4", 40, 8.1e12, 320e9, 1590e6),
    "sm_80": GpuFigures("A100 SXM4", 108, 19.5e12, 1555e9, 1410e6),
    "sm_86": GpuFigures("A10", 72, 31.2e12, 600e9, 1695e6),
    "sm_89": GpuFigures("L4", 58, 30.3e12, 300e9, 2040e6),
    "sm_90": GpuFigures("H100 SXM5", 132, 66.9e12, 3350e9, 1980e6),
}
DEFAULT_CUDA_ARCH = "sm_80"

# the same on every supported architecture
_WARP_SIZE = 32
_MAX_THREADS_PER_BLOCK = 1024
_STATIC_SHARED_PER_BLOCK = 48 * KIB
_REGISTERS_PER_SM = 65536
_REGISTERS_PER_BLOCK = 65536
_MAX_REGISTERS_PER_THREAD = 255
_REGISTER_ALLOC_UNIT = 256  # registers, per warp
_WARP_ALLOC_GRANULARITY = 4  # warps, for register allocation
_SHARED_BANKS = 32
_BANK_BYTES = 4

# TVM target-dict keys that describe things this library does not model
_IGNORED_TVM_KEYS = ("host", "keys", "tag", "libs", "model")
_CURRENT: contextvars.ContextVar[tuple] = contextvars.ContextVar("workbench_target", default=())


class GpuUnavailableError(RuntimeError):
    """Running on a GPU needs cupy and a CUDA device, and one of them is missing."""


def import_cupy(what: str = "the cuda runtime"):
    """Import and return ``cupy``, or raise :class:`GpuUnavailableError` saying how to
    install it.

    >>> try:
    ...     cp = import_cupy()
    ... except GpuUnavailableError as err:
    ...     "schedule-workbench[gpu]" in str(err)
    ... else:
    ...     True
    True
    """
    try:
        import cupy
    except ImportError as err:
        raise GpuUnavailableError(
            f"{what} needs cupy: {GPU_EXTRA_HINT} (cupy could not be imported: {err})"
        ) from None
    return cupy


def _device_count(cupy, what: str) -> int:
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception as err:  # cupy's CUDARuntimeError: no driver, no device
        raise GpuUnavailableError(
            f"{what}: cupy sees no CUDA device ({type(err).__name__}: {err}); a GPU and its "
            "driver are needed to run CUDA kernels (the emulator runs them on the CPU: "
            "wb.build(..., target='cuda', emulate=True))"
        ) from None


def require_device(what: str = "the cuda runtime"):
    """``cupy``, once it is known to see at least one CUDA device; raises
    :class:`GpuUnavailableError` otherwise."""
    cupy = import_cupy(what)
    if _device_count(cupy, what) < 1:
        raise GpuUnavailableError(f"{what}: cupy sees no CUDA device (device count 0)")
    return cupy


@dataclass(frozen=True)
class Occupancy:
    """How many thread blocks of one kernel fit on one SM at a time, and why not more.

    ``limiter`` is the first binding limit in the order ``"threads"``, ``"shared
    memory"``, ``"registers"``, ``"blocks"``; ``limiters`` lists every limit that gives
    the same smallest count. ``blocks_by`` maps each limit to the blocks it allows.
    """

    threads_per_block: int
    shared_bytes_per_block: int  # as allocated: rounded up, reserved bytes included
    registers_per_thread: int
    blocks_per_sm: int
    warps_per_block: int
    active_warps: int
    max_warps: int
    limiter: str
    limiters: tuple[str, ...]
    blocks_by: Mapping[str, int] = field(compare=False)

    @property
    def occupancy(self) -> float:
        """Active warps / the SM's maximum resident warps (0..1)."""
        return self.active_warps / self.max_warps

    @property
    def active_threads(self) -> int:
        return self.blocks_per_sm * self.threads_per_block

    def __str__(self) -> str:
        return (
            f"{self.blocks_per_sm} blocks/SM, {self.active_warps}/{self.max_warps} warps "
            f"({self.occupancy:.0%} occupancy), limited by {self.limiter}"
        )


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _parse_target_string(text: str) -> tuple[str, str | None]:
    """``"cuda"``, ``"cuda -arch=sm_90"``, ``"c"`` -> (kind, arch)."""
    parts = text.split()
    if not parts:
        raise ValueError("Target: empty target string")
    kind, arch = parts[0], None
    for opt in parts[1:]:
        m = re.fullmatch(r"-arch=(\S+)", opt)
        if m is None:
            raise ValueError(
                f"Target: cannot read option {opt!r} of {text!r}; the only option is "
                "-arch=<sm_XY>"
            )
        arch = m.group(1)
    return kind, arch


@dataclass(frozen=True, repr=False)
class Target:
    """Where a module is built for: ``"c"`` (the CPU, through a C compiler) or
    ``"cuda"`` with a GPU architecture (``arch``, default ``"sm_80"``).

    A CUDA target's GPU limits are attributes (None on the C target):
    ``max_threads_per_block``, ``max_shared_memory_per_block`` (static shared memory a
    kernel may declare), ``max_shared_memory_per_block_optin`` (with dynamic shared
    memory), ``max_shared_memory_per_sm``, ``warp_size``, ``registers_per_sm``,
    ``registers_per_block``, ``max_registers_per_thread``, ``max_threads_per_sm``,
    ``max_warps_per_sm``, ``max_blocks_per_sm``, ``shared_memory_banks``,
    ``shared_memory_bank_bytes``.

    >>> Target("cuda", arch="sm_86").max_threads_per_sm
    1536
    >>> str(Target("cuda"))
    'cuda -arch=sm_80'
    >>> Target("c").max_threads_per_block is None
    True
    """

    kind: str
    arch: str | None = None
    max_threads_per_block: int | None = field(init=False, default=None)
    max_shared_memory_per_block: int | None = field(init=False, default=None)
    max_shared_memory_per_block_optin: int | None = field(init=False, default=None)
    max_shared_memory_per_sm: int | None = field(init=False, default=None)
    warp_size: int | None = field(init=False, default=None)
    registers_per_sm: int | None = field(init=False, default=None)
    registers_per_block: int | None = field(init=False, default=None)
    max_registers_per_thread: int | None = field(init=False, default=None)
    max_threads_per_sm: int | None = field(init=False, default=None)
    max_warps_per_sm: int | None = field(init=False, default=None)
    max_blocks_per_sm: int | None = field(init=False, default=None)
    shared_memory_banks: int | None = field(init=False, default=None)
    shared_memory_bank_bytes: int | None = field(init=False, default=None)
    shared_memory_alloc_unit: int | None = field(init=False, default=None)
    shared_memory_reserved_per_block: int | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.kind not in TARGET_KINDS:
            raise ValueError(
                f"Target: unknown kind {self.kind!r}; the kinds are "
                + ", ".join(repr(k) for k in TARGET_KINDS)
            )
        if self.kind == "c":
            if self.arch is not None:
                raise ValueError(f"Target: the C target takes no arch, got {self.arch!r}")
            return
        arch = DEFAULT_CUDA_ARCH if self.arch is None else self.arch
        if arch not in _ARCHS:
            raise ValueError(
                f"Target: unsupported CUDA arch {arch!r}; supported: " + ", ".join(CUDA_ARCHS)
            )
        lim = _ARCHS[arch]
        values = {
            "arch": arch,
            "max_threads_per_block": _MAX_THREADS_PER_BLOCK,
            "max_shared_memory_per_block": _STATIC_SHARED_PER_BLOCK,
            "max_shared_memory_per_block_optin": (
                lim.max_shared_memory_per_sm - lim.shared_memory_reserved_per_block
            ),
            "max_shared_memory_per_sm": lim.max_shared_memory_per_sm,
            "warp_size": _WARP_SIZE,
            "registers_per_sm": _REGISTERS_PER_SM,
            "registers_per_block": _REGISTERS_PER_BLOCK,
            "max_registers_per_thread": _MAX_REGISTERS_PER_THREAD,
            "max_threads_per_sm": lim.max_threads_per_sm,
            "max_warps_per_sm": lim.max_threads_per_sm // _WARP_SIZE,
            "max_blocks_per_sm": lim.max_blocks_per_sm,
            "shared_memory_banks": _SHARED_BANKS,
            "shared_memory_bank_bytes": _BANK_BYTES,
            "shared_memory_alloc_unit": lim.shared_memory_alloc_unit,
            "shared_memory_reserved_per_block": lim.shared_memory_reserved_per_block,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    # -- construction -------------------------------------------------------------

    @classmethod
    def from_any(cls, target: Target | str | Mapping) -> Target:
        """A Target from a Target, a string (``"c"``, ``"cuda"``, ``"cuda
        -arch=sm_90"``) or a TVM-style dict (``{"kind": "cuda", "arch": "sm_90"}``; the
        keys ``host``, ``keys``, ``tag``, ``libs`` and ``model`` are ignored).

        >>> Target.from_any("cuda -arch=sm_90").arch
        'sm_90'
        >>> Target.from_any({"kind": "cuda", "arch": "sm_75", "host": "llvm"}).max_blocks_per_sm
        16
        """
        if isinstance(target, Target):
            return target
        if isinstance(target, str):
            kind, arch = _parse_target_string(target)
            return cls(kind, arch=arch)
        if isinstance(target, Mapping):
            if "kind" not in target:
                raise ValueError(f"Target: a target dict needs a 'kind', got {dict(target)!r}")
            unknown = sorted(k for k in target if k not in ("kind", "arch", *_IGNORED_TVM_KEYS))
            if unknown:
                raise ValueError(
                    f"Target: unknown target dict keys {unknown}; known: 'kind', 'arch' "
                    f"(ignored: {', '.join(repr(k) for k in _IGNORED_TVM_KEYS)})"
                )
            return cls(str(target["kind"]), arch=target.get("arch"))
        raise TypeError(
            f"Target.from_any takes a Target, a string or a dict, got {type(target).__name__}"
        )

    @classmethod
    def current_device(cls) -> Target:
        """The CUDA target of the GPU cupy uses now (its compute capability picks the
        arch). Raises :class:`GpuUnavailableError` without cupy or a device, and
        ``ValueError`` for a GPU whose architecture is not one of ``CUDA_ARCHS``."""
        cupy = require_device("Target.current_device")
        cc = str(cupy.cuda.Device().compute_capability)  # e.g. "90"
        arch = f"sm_{cc}"
        if arch not in _ARCHS:
            raise ValueError(
                f"Target.current_device: the GPU has compute capability {cc[:-1]}.{cc[-1]} "
                f"({arch}), which has no limits table here; supported: "
                + ", ".join(CUDA_ARCHS)
                + ". Name the nearest one: wb.Target('cuda', arch=...)"
            )
        return cls("cuda", arch=arch)

    # -- scope ----------------------------------------------------------------------

    def __enter__(self) -> Target:
        """``with wb.Target("cuda"):`` makes this the target of what runs inside
        (:meth:`current`), as TVM's ``with target:`` does.

        >>> with Target("cuda", arch="sm_90"):
        ...     Target.current().arch
        'sm_90'
        >>> Target.current() is None
        True
        """
        _CURRENT.set((*_CURRENT.get(), self))
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.set(_CURRENT.get()[:-1])

    @staticmethod
    def current() -> Target | None:
        """The innermost target of a ``with target:`` block, or None."""
        stack = _CURRENT.get()
        return stack[-1] if stack else None

    # -- display --------------------------------------------------------------------

    def __str__(self) -> str:
        return self.kind if self.kind == "c" else f"{self.kind} -arch={self.arch}"

    def __repr__(self) -> str:
        return f"Target({self})"

    @property
    def is_gpu(self) -> bool:
        return self.kind == "cuda"

    @property
    def figures(self) -> GpuFigures | None:
        """Throughput figures of a common GPU of this architecture (for estimates: see
        :class:`GpuFigures`); None on the C target."""
        return _FIGURES.get(self.arch) if self.kind == "cuda" else None  # type: ignore

    # -- occupancy ------------------------------------------------------------------

    def occupancy(
        self,
        threads_per_block: int,
        shared_bytes_per_block: int = 0,
        registers_per_thread: int = 32,
    ) -> Occupancy:
        """Thread blocks per SM and occupancy of a kernel with these resources, as the
        CUDA Occupancy Calculator computes them:

        - warps per block: ``ceil(threads / 32)``;
        - threads: ``max_warps_per_sm // warps_per_block`` blocks;
        - registers: a warp takes ``registers_per_thread * 32`` registers rounded up to
          256; the SM holds ``65536 // that`` warps, rounded down to a multiple of 4;
          divided by the warps per block;
        - shared memory: a block takes its shared bytes plus the runtime's reserved
          bytes (1 KiB from sm_80 on), rounded up to the allocation unit (128 bytes
          from sm_80 on, 256 before); the SM's capacity divided by that;
        - blocks: ``max_blocks_per_sm``.

        >>> o = Target("cuda", arch="sm_80").occupancy(256, 0, 64)
        >>> o.blocks_per_sm, o.active_warps, o.occupancy, o.limiter
        (4, 32, 0.5, 'registers')
        """
        if self.kind != "cuda":
            raise ValueError(f"occupancy: target {self} is not a GPU target")
        for name, value in (
            ("threads_per_block", threads_per_block),
            ("shared_bytes_per_block", shared_bytes_per_block),
            ("registers_per_thread", registers_per_thread),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"occupancy: {name} must be an integer >= 0, got {value!r}")
        if not 1 <= threads_per_block <= self.max_threads_per_block:
            raise ValueError(
                f"occupancy: {threads_per_block} threads per block; {self} allows 1 to "
                f"{self.max_threads_per_block}"
            )
        if not 1 <= registers_per_thread <= self.max_registers_per_thread:
            raise ValueError(
                f"occupancy: {registers_per_thread} registers per thread; {self} allows 1 "
                f"to {self.max_registers_per_thread}"
            )
        if shared_bytes_per_block > self.max_shared_memory_per_block_optin:
            raise ValueError(
                f"occupancy: {shared_bytes_per_block} bytes of shared memory per block; "
                f"{self} allows at most {self.max_shared_memory_per_block_optin} "
                f"({self.max_shared_memory_per_block} declared statically)"
            )
        warps_per_block = -(-threads_per_block // self.warp_size)
        registers_per_warp = _round_up(registers_per_thread * self.warp_size,
                                       _REGISTER_ALLOC_UNIT)
        if registers_per_warp * warps_per_block > self.registers_per_block:
            raise ValueError(
                f"occupancy: {threads_per_block} threads x {registers_per_thread} registers "
                f"need {registers_per_warp * warps_per_block} registers per block; {self} "
                f"allows {self.registers_per_block}"
            )
        warps_by_registers = (self.registers_per_sm // registers_per_warp
                              // _WARP_ALLOC_GRANULARITY * _WARP_ALLOC_GRANULARITY)
        shared = _round_up(shared_bytes_per_block + self.shared_memory_reserved_per_block,
                           self.shared_memory_alloc_unit)
        blocks_by = {
            "threads": self.max_warps_per_sm // warps_per_block,
            "shared memory": (self.max_shared_memory_per_sm // shared if shared
                              else self.max_blocks_per_sm),
            "registers": warps_by_registers // warps_per_block,
            "blocks": self.max_blocks_per_sm,
        }
        blocks = min(blocks_by.values())
        limiters = tuple(k for k, v in blocks_by.items() if v == blocks)
        return Occupancy(
            threads_per_block=threads_per_block,
            shared_bytes_per_block=shared,
            registers_per_thread=registers_per_thread,
            blocks_per_sm=blocks,
            warps_per_block=warps_per_block,
            active_warps=blocks * warps_per_block,
            max_warps=self.max_warps_per_sm,
            limiter=limiters[0],
            limiters=limiters,
            blocks_by=blocks_by,
        )
