"""The built-in CPU search space: MetaSchedule's CPU rules applied to every block.

:func:`default_space` turns a function into a *space*: a stochastic schedule
function ``space(sch)`` like the one a user writes by hand (``sch.sample_perfect_tile``
and friends), so ``space(wb.Schedule(func, seed=s))`` gives one sampled schedule per
seed, and its trace records every decision for replay and mutation.

The rules run in this order (see :mod:`workbench.search.rules`):

1. :func:`~workbench.search.rules.auto_inline` on every element-wise stage;
2. :func:`~workbench.search.rules.multi_level_tiling` on every reduction block with
   data reuse (matmul, conv, batch matmul, gemv), its tile sizes drawn towards
   register tiles of 4 to 24 vectors and packed panels that fit L2, its epilogue
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

from collections.abc import Callable, Sequence

import numpy as np

from ..ir import Block, IRModule, PrimFunc
from ..ir.analysis import block_path, iter_blocks, loops_above
from ..schedule import Schedule
from . import rules

__all__ = ["default_space"]

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
    vector_width: int = 16,
    write_level: int = 2,
    cache_read: str | None = "auto",
    accumulators: tuple[int, int] | None = (4, 24),
    panel: tuple[int, int] | None = (1 << 20, 32),
    whole_reduction: float = 0.75,
    max_jobs_per_core: int = 16,
    max_vector_extent: int = 64,
    unroll_max_steps: Sequence[int] = (0, 16, 64, 256),
    num_cores: int | None = None,
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
    rules.check_structure(structure, write_level)
    rules.check_tile_bias(accumulators, panel, whole_reduction)
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
