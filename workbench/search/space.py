"""The built-in CPU search space: MetaSchedule's CPU rules applied to every block.

:func:`default_space` turns a function into a *space*: a stochastic schedule
function ``space(sch)`` like the one a user writes by hand (``sch.sample_perfect_tile``
and friends), so ``space(wb.Schedule(func, seed=s))`` gives one sampled schedule per
seed, and its trace records every decision for replay and mutation.

The rules run in this order (see :mod:`workbench.search.rules`):

1. :func:`~workbench.search.rules.auto_inline` on every element-wise stage;
2. :func:`~workbench.search.rules.multi_level_tiling` on every reduction block with
   data reuse (matmul, conv, batch matmul, gemv), its tile sizes drawn towards
   register tiles that fit the machine's vector registers and packed panels that fit
   its L2 (:func:`cpu_space_settings`: 8x1 or 4x2 vectors of 8 floats on AVX2,
   16x1, 8x2 or 4x4 vectors of 16 on AVX-512), the register tile and its write-back
   left to the C compiler to unroll, its epilogue
   folded into the write-back of the output tile, and (``cache_read="auto"``) its
   vector-loaded input packed into panels when that input's rows are half a page or
   more apart;
3. :func:`~workbench.search.rules.parallel_vectorize_unroll` on the root block;
4. :func:`~workbench.search.rules.random_compute_location` on the remaining producer
   stages, last stage first (after 3, so that moving a stage never invalidates the
   fusing that 3 recorded).

>>> import workbench as wb
>>> func = wb.workloads.mm_relu(64, 64, 64)
>>> space = default_space(func)
>>> sch = wb.Schedule(func, seed=3)
>>> space(sch)
>>> [b.name for b in wb.ir.analysis.iter_blocks(sch.func.body)][1:]
['Y_init', 'Y_update', 'Y_local']
>>> _ = wb.verify(sch.mod, func)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import Block, IRModule, PrimFunc
from ..ir.analysis import block_path, iter_blocks, loops_above
from ..runtime.peak import CpuCaches, VectorIsa, cpu_caches, vector_isa
from ..schedule import Schedule
from . import rules

__all__ = ["CpuSpaceSettings", "cpu_space_settings", "default_space"]

#: ``default_space`` options that default to the machine's :class:`CpuSpaceSettings`.
AUTO: Any = "auto"

#: Packed-panel budget when sysfs does not give the L2 size.
FALLBACK_L2_BYTES = 1 << 20
#: Each packed panel must serve at least this many iterations of the loops not indexing it.
PANEL_MIN_REUSE = 32


@dataclass(frozen=True)
class CpuSpaceSettings:
    """The machine-dependent choices of :func:`default_space`, derived from a CPU's
    vector ISA and caches by :func:`cpu_space_settings`.

    ``vector_width``: the float32 lanes of one vector (the contiguous axis's register
    tile is a multiple of it); ``registers``: the vector register file the register
    tile must fit (accumulators + loaded vectors + a broadcast); ``accumulators``:
    ``(low, high)`` accumulator vectors of a register tile; ``panel``: ``(max_bytes,
    min_reuse)`` of a packed panel (it stays in the core's L2).

    Example:
        >>> settings = cpu_space_settings(["avx2", "fma"], CpuCaches(32 << 10, 512 << 10, None))
        >>> settings.vector_width, settings.registers, settings.accumulators, settings.panel
        (8, 16, (8, 13), (524288, 32))
    """

    isa: VectorIsa
    caches: CpuCaches
    vector_width: int
    registers: int
    accumulators: tuple[int, int]
    panel: tuple[int, int]

    def options(self) -> dict[str, Any]:
        """The :func:`default_space` keyword arguments these settings stand for.

        >>> cpu_space_settings({"avx2"}, CpuCaches(None, 1 << 20, None)).options()["registers"]
        16
        """
        return {
            "vector_width": self.vector_width,
            "registers": self.registers,
            "accumulators": self.accumulators,
            "panel": self.panel,
        }


def cpu_space_settings(
    isa: VectorIsa | Iterable[str] | None = None, caches: CpuCaches | None = None
) -> CpuSpaceSettings:
    """Derive the register tile, vector width and panel size of the default space from
    a CPU description: ``isa`` (a :class:`~workbench.runtime.peak.VectorIsa` or the
    CPU flags, ``/proc/cpuinfo`` spelling) and ``caches``; each defaults to this
    machine's. So a test can ask what an AVX-512 machine would get on any machine.

    The rules (none is fitted to one CPU):

    * vector width = the ISA's float32 lanes (16 with AVX-512, 8 with AVX2, 4 SSE);
    * a register tile needs at least half the vector registers as accumulators (with
      two FMA units of latency 4, eight independent chains keep both busy) and fits
      the register file with one loaded vector per column vector and a broadcast
      (``rows * cols + cols + 1 <= registers``): 8x1 or 4x2 vectors on AVX2 (16
      registers), 16x1, 8x2 or 4x4 on AVX-512 (32);
    * a packed panel holds at most the core's L2 (1 MiB when unknown) and serves at
      least 32 iterations of the loops that do not index it.

    >>> avx512 = cpu_space_settings({"avx512f", "avx2", "fma"}, CpuCaches(48 << 10, 2 << 20, None))
    >>> avx512.vector_width, avx512.registers, avx512.accumulators, avx512.panel
    (16, 32, (16, 29), (2097152, 32))
    >>> cpu_space_settings(set(), CpuCaches(None, None, None)).panel
    (1048576, 32)
    """
    if not isinstance(isa, VectorIsa):
        isa = vector_isa(isa)
    if caches is None:
        caches = cpu_caches()
    registers = isa.registers
    return CpuSpaceSettings(
        isa=isa,
        caches=caches,
        vector_width=isa.lanes,
        registers=registers,
        accumulators=(registers // 2, registers - 3),
        panel=(caches.l2 or FALLBACK_L2_BYTES, PANEL_MIN_REUSE),
    )


@functools.cache
def _host_settings() -> CpuSpaceSettings:
    return cpu_space_settings()

SUPPORTED_TARGETS = ("c",)


def _block_names(func: PrimFunc) -> list[str]:
    return [b.name for b in iter_blocks(func.body) if b is not func.body]


def _node(func: PrimFunc, name: str) -> tuple[Block, list] | None:
    path = block_path(func, name)
    if path is None:
        return None
    return path[-1], loops_above(path)  # type: ignore[return-value]


PACK_ROW_BYTES = 2048


def _read_scope(cache_read: str | None, block: Block) -> str | None:
    """``cache_read="auto"``: pack (``"global"``) when a vector operand's rows are
    ``PACK_ROW_BYTES`` (half a page) or more apart. Each step of the reduction then
    lands in another page and, for power-of-two sizes, in a few L1 sets; the packed
    panel is also 64-byte aligned, which numpy's arrays usually are not. Measured
    here (best of 64 trials, two seeds): matmul 512^3 282-295 GFLOPS packed against
    212-270 unpacked; at 1024^3 packing is what takes the search past 250 GFLOPS;
    at 128^3 (512-byte rows) it does not pay."""
    if cache_read != "auto":
        return cache_read
    for index in rules.vector_operands(block):
        buf = block.reads[index].buffer  # type: ignore[index]
        if len(buf.shape) >= 2 and buf.shape[-1] * np.dtype(buf.dtype).itemsize >= PACK_ROW_BYTES:
            return "global"
    return None


def default_space(
    func: PrimFunc | IRModule,
    target: str = "c",
    *,
    structure: str = "SSRSRS",
    max_innermost_factor: int = 64,
    vector_width: int = AUTO,
    write_level: int = 2,
    cache_read: str | None = "auto",
    accumulators: tuple[int, int] | None = AUTO,
    panel: tuple[int, int] | None = AUTO,
    whole_reduction: float = 0.9,
    max_jobs_per_core: int = 16,
    max_vector_extent: int = 64,
    unroll_max_steps: Sequence[int] = (0, 16, 64, 256),
    num_cores: int | None = None,
    registers: int | None = AUTO,
    settings: CpuSpaceSettings | None = None,
    micro_kernel: bool = True,
) -> Callable[[Schedule], None]:
    """The default CPU space for ``func``: a function ``space(sch) -> None`` that
    schedules a fresh ``wb.Schedule(func, seed=...)`` with the CPU rules.

    Blocks a rule does not apply to are left alone, so every workload gets a valid
    (verifiable) schedule; the options are passed on to the rules. The space looks only
    at the schedule it is given, so it also serves functions shaped like ``func``.
    ``target`` must be ``"c"`` (the CPU backend). ``num_cores`` (default: the cores this
    process may use) bounds the parallel loops: at most ``num_cores * max_jobs_per_core``
    iterations. ``cache_read`` is a scope for packing the vector operands of tiled blocks
    (see :func:`~workbench.search.rules.multi_level_tiling`), None for never, or
    ``"auto"``: pack when that operand's rows are at least 2 KiB apart.
    ``accumulators``, ``panel`` and ``whole_reduction`` bias the tile sizes the tiling
    rule draws towards register tiles that fit the vector registers, packed panels
    that fit L2, and register tiles that accumulate over the whole reduction (see
    :func:`~workbench.search.rules.multi_level_tiling`).

    ``whole_reduction`` is 0.9 here (0.75 in the rule): a register tile that does not
    accumulate over the whole reduction is updated in memory by gcc, at about a third
    of the speed (see :func:`~workbench.search.rules.multi_level_tiling`); a tenth of
    the samples still explore such tiles.
    ``vector_width``, ``registers``, ``accumulators`` and ``panel`` default to the
    ``settings`` (a :class:`CpuSpaceSettings`; by default :func:`cpu_space_settings`
    of this machine: its vector ISA and caches); any of them given explicitly wins.

    A single float32 matmul (64 or more on each axis) on a CPU with an FMA micro-kernel
    for its vector ISA gets :func:`~workbench.search.micro_kernel_rule.micro_kernel_space`
    instead (``micro_kernel=False`` turns that off): packed panels of ``A`` and ``B``
    feeding the register-blocked kernel through ``tensorize``, the way BLAS libraries
    do; a C compiler alone cannot keep that many accumulators in registers.

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(128, 128, 128)
    >>> space = default_space(func)
    >>> a, b = wb.Schedule(func, seed=0), wb.Schedule(func, seed=1)
    >>> space(a); space(b)
    >>> a.mod.script() != b.mod.script()
    True
    """
    if target not in SUPPORTED_TARGETS:
        raise ValueError(
            f"default_space: no built-in space for target {target!r}; "
            f"supported: {', '.join(SUPPORTED_TARGETS)}"
        )
    if isinstance(func, IRModule):
        if len(func) != 1:
            raise ValueError(
                f"default_space: expected one function, the module has {func.names}"
            )
        func = func[func.names[0]]
    host = settings if settings is not None else _host_settings()
    if micro_kernel and target == "c":
        from .micro_kernel_rule import flags_of_isa, micro_kernel_space

        packed = micro_kernel_space(func, flags_of_isa(host.isa), num_cores=num_cores)
        if packed is not None:
            return packed
    machine = host.options()
    vector_width = machine["vector_width"] if vector_width is AUTO else vector_width
    registers = machine["registers"] if registers is AUTO else registers
    accumulators = machine["accumulators"] if accumulators is AUTO else accumulators
    panel = machine["panel"] if panel is AUTO else panel
    rules.check_structure(structure, write_level)
    rules.check_tile_bias(accumulators, panel, whole_reduction, registers)
    name = func.name

    def space(sch: Schedule) -> None:
        """Apply the CPU rules (auto-inline, multi-level tiling, parallel / vectorize /
        unroll, compute location) to ``sch``, sampling from its random generator."""
        for block_name in _block_names(sch.func):
            found = _node(sch.func, block_name)
            if found is not None and rules.inline_candidate(found[0], func=sch.func):
                rules.auto_inline(sch, sch.get_block(block_name))
        for block_name in _block_names(sch.func):
            found = _node(sch.func, block_name)
            if found is not None and rules.needs_multi_level_tiling(sch.func, *found):
                rules.multi_level_tiling(
                    sch,
                    sch.get_block(block_name),
                    structure=structure,
                    max_innermost_factor=max_innermost_factor,
                    vector_width=vector_width,
                    write_level=write_level,
                    cache_read=_read_scope(cache_read, found[0]),
                    accumulators=accumulators,
                    panel=panel,
                    whole_reduction=whole_reduction,
                    registers=registers,
                )
        rules.parallel_vectorize_unroll(
            sch,
            sch.get_block(sch.func.body.name),
            max_jobs_per_core=max_jobs_per_core,
            max_vector_extent=max_vector_extent,
            unroll_max_steps=unroll_max_steps,
            num_cores=num_cores,
        )
        for block_name in reversed(_block_names(sch.func)):
            if rules.compute_location_candidate(sch.func, block_name):
                rules.random_compute_location(sch, sch.get_block(block_name))

    space.__qualname__ = space.__name__ = f"default_space_{name}"
    return space
