"""The built-in GPU search space: MetaSchedule's CUDA rules applied to every block.

:func:`default_gpu_space` is the GPU counterpart of
:func:`~workbench.search.space.default_space`: it turns a function into a stochastic
schedule function ``space(sch)``, so ``space(wb.Schedule(func, seed=s))`` gives one
sampled GPU schedule per seed and its trace records every decision for replay and
mutation. The rules run in this order (MetaSchedule's ``DefaultCUDA()``):

1. **auto-inline** every element-wise stage that can be inlined (no operator or
   ``Select`` is off limits on the GPU);
2. **multi-level tiling** ``"SSSRRSRS"`` of every reduction block with data reuse
   (matmul, batch matmul, conv): each spatial loop is split into 5 tiles and each
   reduction loop into 3 (``sample_perfect_tile``), the tiles are reordered level by
   level, and the first three spatial levels are fused and bound to ``blockIdx.x``,
   ``vthread.x`` and ``threadIdx.x``. Every input is staged in ``shared`` memory at the
   outermost reduction tile (``cache_read`` + ``compute_at``) and fetched
   cooperatively: the copy's loops are fused, split by the thread tiles (so the copy
   uses exactly the block's threads, whatever the decisions) and a sampled vector
   width, the thread part bound to ``threadIdx.x`` and the innermost part vectorized
   (what MetaSchedule's ``meta_schedule.cooperative_fetch`` annotation becomes after
   its postprocessor). The output accumulates in ``local`` memory (``cache_write``),
   written back under the thread loop (``reverse_compute_at``) with an element-wise
   epilogue folded in, and the init is moved out of the reduction loops;
3. **cross-thread reduction** of every other reduction block whose spatial extent is
   not larger than its reduction extent (softmax's max and sum, layer norm's
   statistics): the reduction loops are fused and split by a sampled thread count
   bound to ``threadIdx.x``, the spatial loops fused onto ``blockIdx.x`` (the planner
   lowers it to a shared-memory all-reduce);
4. **auto-bind** of every remaining loop nest: its spatial loops fused and split by a
   sampled thread count into ``blockIdx.x`` x ``threadIdx.x``;
5. **unroll**: one budget sampled from ``unroll_max_steps`` and put on each kernel's
   outer loop as ``pragma_auto_unroll_max_step``, which the CUDA printer turns into
   ``#pragma unroll`` on the serial loops that fit (MetaSchedule's
   ``pragma_unroll_explicit`` has no counterpart: the printer always leaves the
   unrolling to nvcc's pragma).

Tile sizes are drawn (and recorded as the decisions of ``sample_perfect_tile``) so
that the threads per block stay within the target's ``max_threads_per_block``, the
virtual threads within ``max_vthreads`` and the shared tiles within the target's static
shared memory; a tiling with at least a warp of threads is preferred. A mutated
decision may break those limits: the planner then refuses the candidate
(:class:`~workbench.codegen.gpu.GpuError`) and the search drops it, as MetaSchedule's
``VerifyGPUCode`` postprocessor does.

``vthread.x`` runs as a serial loop around the thread loop in the CUDA code (and the
emulator): each virtual thread re-fetches the shared tiles, so a vthread tile above 1
costs more memory traffic here than under TVM's virtual-thread injection. Pass
``vthread=False`` to leave that level out (structure ``"SSRRSRS"``-like binding).

Only static shapes are tuned: a function with symbolic shapes is refused (specialize it
first: ``func.specialize({"n": 32})``).

>>> import workbench as wb
>>> func = wb.workloads.matmul(64, 64, 64)
>>> space = default_gpu_space(func)
>>> sch = wb.Schedule(func, seed=0)
>>> space(sch)
>>> [sch.get(lp).thread_tag for lp in sch.get_loops(sch.get_block("C_update"))[:3]]
['blockIdx.x', 'vthread.x', 'threadIdx.x']
>>> _ = wb.verify(sch.mod, func, target="cuda", emulate=True, check_races=True)
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import numpy as np

from ..ir import Block, For, IRModule, PrimFunc, Var
from ..ir.analysis import block_path, iter_blocks, loops_above
from ..ir.expr import BufferLoad
from ..ir.functor import expr_vars, iter_exprs, uses_var
from ..ir.stmt import BufferStore, SeqStmt
from ..schedule import BlockRV, LoopRV, Schedule
from ..schedule.primitives.sampling import draw_perfect_tile
from ..target import Target
from . import rules
from .rules import AUTO_UNROLL_KEY, TILING_KEY

__all__ = [
    "GPU_UNROLL_MAX_STEPS",
    "auto_bind",
    "cross_thread_reduction",
    "default_gpu_space",
    "gpu_multi_level_tiling",
    "needs_cross_thread_reduction",
]

#: Unroll budgets sampled for each kernel (``pragma_auto_unroll_max_step``).
GPU_UNROLL_MAX_STEPS = (0, 16, 64, 512, 1024)
#: Thread counts sampled for a cross-thread reduction (MetaSchedule's defaults).
CROSS_THREAD_EXTENTS = (4, 8, 16, 32, 64, 128, 256, 512)
#: Thread counts sampled by auto-bind (MetaSchedule's defaults).
AUTO_BIND_EXTENTS = (32, 64, 128, 256, 512, 1024)
#: Vector widths sampled for a cooperative fetch. MetaSchedule samples 1, 2, 3, 4, 8, 16;
#: the CUDA printer emits at most a 16-byte vector (``float4``), so wider is a loop.
VECTOR_LOAD_LENS = (1, 2, 4)


def _target(target) -> Target:
    tgt = Target.from_any(target)
    if not tgt.is_gpu:
        raise ValueError(f"default_gpu_space: target {tgt} is not a GPU target; use "
                         "default_space for the CPU")
    return tgt


def _as_static_func(func: PrimFunc | IRModule) -> PrimFunc:
    if isinstance(func, IRModule):
        if len(func) != 1:
            raise ValueError(
                f"default_gpu_space: expected one function, the module has {func.names}"
            )
        func = func[func.names[0]]
    if not isinstance(func, PrimFunc):
        raise TypeError(f"default_gpu_space: expected a PrimFunc or an IRModule, got "
                        f"{type(func).__name__}")
    if func.shape_vars:
        names = ", ".join(v.name for v in func.shape_vars)
        raise ValueError(
            f"default_gpu_space: {func.name!r} has symbolic shapes ({names}); the GPU "
            "space tunes static shapes only: tune a specialized copy, e.g. "
            f"func.specialize({{{func.shape_vars[0].name!r}: 32}})"
        )
    return func


# ---------------------------------------------------------------------------
# loop nests


def _own_nest(func: PrimFunc, name: str) -> tuple[Block, list[For]] | None:
    """``(block, loops above it)`` when block ``name`` is alone in a loop nest directly
    under the root block and no loop above it is bound yet."""
    path = block_path(func, name)
    if path is None:
        return None
    block: Block = path[-1]  # type: ignore[assignment]
    loops: list[For] = loops_above(path)  # type: ignore[assignment]
    inner = [s for s in path[1:-1] if not isinstance(s, SeqStmt)]
    if not loops or any(isinstance(s, Block) for s in inner):
        return None
    if any(lp.kind != "serial" for lp in loops):
        return None
    if sum(1 for _ in iter_blocks(loops[0])) != 1:
        return None
    return block, loops


def _loop_kinds(block: Block, loops: Sequence[For]) -> list[str]:
    """``"R"`` for a loop some reduction iter var's binding uses, else ``"S"``."""
    kinds = []
    for lp in loops:
        reduce = any(
            iv.kind == "R" and uses_var(value, lp.loop_var)
            for iv, value in zip(block.iter_vars, block.iter_values, strict=True)
        )
        kinds.append("R" if reduce else "S")
    return kinds


def _spatial_then_reduce(sch: Schedule, block: BlockRV) -> tuple[list[LoopRV], list[LoopRV]]:
    """The block's spatial and reduction loops, reordered spatial-first if needed."""
    loop_rvs = sch.get_loops(block)
    kinds = _loop_kinds(sch.get(block), [sch.get(lp) for lp in loop_rvs])  # type: ignore
    s_loops = [lp for lp, k in zip(loop_rvs, kinds, strict=True) if k == "S"]
    r_loops = [lp for lp, k in zip(loop_rvs, kinds, strict=True) if k == "R"]
    if kinds != sorted(kinds, key=lambda k: k == "R"):
        sch.reorder(*s_loops, *r_loops)
    return s_loops, r_loops


def _fused(sch: Schedule, block: BlockRV, loops: list[LoopRV]) -> LoopRV:
    if not loops:
        return sch.add_unit_loop(block)
    return sch.fuse(*loops) if len(loops) > 1 else loops[0]


def _next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


# ---------------------------------------------------------------------------
# multi-level tiling


def _thread_tile_draw(
    rng: random.Random,
    block: Block,
    loops: Sequence[For],
    n_s: int,
    n_r: int,
    levels: dict[str, int],
    tgt: Target,
    max_innermost_factor: int,
    max_vthreads: int,
    max_draws: int = 64,
) -> dict[Var, list[int]]:
    """Tilings of every loop of ``block`` (by iter var), drawn together so that the
    threads, virtual threads and shared tiles fit the target; a draw with at least a
    warp of threads is preferred (rejection sampling, uniform among those that fit)."""
    ivs = list(block.iter_vars)
    extents = [lp.extent for lp in loops]
    kinds = [iv.kind for iv in ivs]
    index_of = {iv.var: i for i, iv in enumerate(ivs)}
    out_buf = block.body.buffer  # type: ignore[union-attr]
    inputs: list[tuple[list[set[int]], int]] = []  # (iter vars per dimension, itemsize)
    seen = set()
    for load in iter_exprs(block.body.value):  # type: ignore[union-attr]
        if isinstance(load, BufferLoad) and load.buffer is not out_buf and (
            load.buffer not in seen
        ):
            seen.add(load.buffer)
            dims = [{index_of[v] for v in expr_vars(i) if v in index_of} for i in load.indices]
            inputs.append((dims, np.dtype(load.buffer.dtype).itemsize))
    spatial_total = math.prod(e for e, k in zip(extents, kinds) if k == "S")
    want_threads = min(tgt.warp_size, spatial_total)  # type: ignore[type-var]

    def draw() -> list[list[int]]:
        return [draw_perfect_tile(rng, e, n_s if k == "S" else n_r, max_innermost_factor)
                for e, k in zip(extents, kinds, strict=True)]

    def level_product(tiles: list[list[int]], level: int | None) -> int:
        if level is None:
            return 1
        return math.prod(t[level] for t, k in zip(tiles, kinds) if k == "S")

    def shared_bytes(tiles: list[list[int]]) -> int:
        total = 0
        for dims, itemsize in inputs:
            size = itemsize
            for used in dims:
                # the tile under one thread block / one outer reduction step
                size *= math.prod(extents[i] // tiles[i][0] for i in used) if used else 1
            total += size
        return total

    def miss(tiles: list[list[int]]) -> float:
        threads = level_product(tiles, levels.get("threadIdx.x"))
        vthreads = level_product(tiles, levels.get("vthread.x"))
        if threads > tgt.max_threads_per_block or vthreads > max_vthreads:  # type: ignore
            return math.inf
        if shared_bytes(tiles) > tgt.max_shared_memory_per_block:  # type: ignore
            return math.inf
        return 1.0 if threads >= want_threads else 2.0

    best, best_miss = draw(), math.inf
    best_miss = miss(best)
    for _ in range(max_draws - 1):
        if best_miss <= 1.0:
            break
        tiles = draw()
        score = miss(tiles)
        if score < best_miss:
            best, best_miss = tiles, score
    if not math.isfinite(best_miss):  # nothing fit: one thread, everything serial
        best = [[e] + [1] * (n_s - 1) if k == "S" else [e] + [1] * (n_r - 1)
                for e, k in zip(extents, kinds, strict=True)]
    return {iv.var: t for iv, t in zip(ivs, best, strict=True)}


def gpu_multi_level_tiling(
    sch: Schedule,
    block: BlockRV,
    target: Target | str = "cuda",
    *,
    structure: str = "SSSRRSRS",
    tile_binds: Sequence[str] = ("blockIdx.x", "vthread.x", "threadIdx.x"),
    max_innermost_factor: int = 64,
    max_vthreads: int = 8,
    vector_load_lens: Sequence[int] = VECTOR_LOAD_LENS,
    read_level: int = 4,
    write_level: int = 3,
) -> bool:
    """Tile reduction ``block`` for a GPU, MetaSchedule's CUDA ``MultiLevelTiling``
    (see the module docstring). Returns False, changing nothing, for a block it does
    not apply to (:func:`workbench.search.rules.needs_multi_level_tiling`).

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(64, 64, 64), seed=1)
    >>> gpu_multi_level_tiling(sch, sch.get_block("C"))
    True
    >>> sorted(b.name for b in wb.ir.analysis.iter_blocks(sch.func.body))
    ['A_shared', 'B_shared', 'C_init', 'C_local', 'C_update', 'root']
    """
    tgt = _target(target)
    rules.check_structure(structure, write_level)
    first_r = structure.find("R")
    if not 1 <= read_level <= len(structure) or structure[read_level - 1] != "R" or (
        structure[:read_level - 1].count("R") != 0
    ):
        raise ValueError(f"gpu_multi_level_tiling: read_level={read_level} must be the "
                         f"first reduction level of {structure!r} ({first_r + 1})")
    if len(tile_binds) > first_r or any(c != "S" for c in structure[:len(tile_binds)]):
        raise ValueError(f"gpu_multi_level_tiling: tile_binds {list(tile_binds)} must name "
                         f"the leading spatial levels of {structure!r}")
    if write_level < len(tile_binds):
        raise ValueError(f"gpu_multi_level_tiling: write_level={write_level} must be at or "
                         f"below the bound levels ({len(tile_binds)})")
    blk: Block = sch.get(block)  # type: ignore[assignment]
    loop_rvs = sch.get_loops(block)
    loops: list[For] = [sch.get(lp) for lp in loop_rvs]  # type: ignore[misc]
    if not rules.needs_multi_level_tiling(sch.func, blk, loops):
        return False
    sch.annotate(block, TILING_KEY, structure)
    n_s, n_r = structure.count("S"), structure.count("R")
    levels = {tag: i for i, tag in enumerate(tile_binds)}  # S level of each binding
    drawn = _thread_tile_draw(rules._schedule_rng(sch), blk, loops, n_s, n_r, levels, tgt,
                              max_innermost_factor, max_vthreads)
    kinds = [iv.kind for iv in blk.iter_vars]
    tiles: list[list[LoopRV]] = []
    factors: list[list] = []
    for iv, rv in zip(blk.iter_vars, loop_rvs, strict=True):
        n = n_s if iv.kind == "S" else n_r
        f = sch.sample_perfect_tile(rv, n, max_innermost_factor, decision=drawn[iv.var])
        factors.append(f)
        tiles.append(sch.split(rv, f))
    order: list[LoopRV] = []
    by_level: list[list[LoopRV]] = []
    used = {"S": 0, "R": 0}
    for letter in structure:
        level = [t[used[letter]] for t, k in zip(tiles, kinds, strict=True) if k == letter]
        used[letter] += 1
        by_level.append(level)
        order.extend(level)
    sch.reorder(*order)
    level_end: list[LoopRV] = [lv[-1] for lv in by_level]
    for i, tag in enumerate(tile_binds):
        fused = sch.fuse(*by_level[i]) if len(by_level[i]) > 1 else by_level[i][0]
        sch.bind(fused, tag)
        level_end[i] = fused
    copy = sch.cache_write(block, 0, "local")
    rules._fold_epilogue(sch, copy)
    sch.reverse_compute_at(copy, level_end[write_level - 1])
    # cooperative fetch of every input into shared memory at the outer reduction tile
    thread_level = levels.get("threadIdx.x")
    thread_tiles = ([f[thread_level] for f, k in zip(factors, kinds, strict=True) if k == "S"]
                    if thread_level is not None else [])
    r_outer = level_end[read_level - 1]
    outer_var = sch.get(r_outer).loop_var  # type: ignore[union-attr]
    names = []
    for region in blk.reads or ():
        if region.buffer is not blk.body.buffer and region.buffer.name not in names:  # type: ignore
            names.append(region.buffer.name)
    lens = [v for v in vector_load_lens if v >= 1] or [1]
    for name in names:
        shared = sch.cache_read(block, name, "shared")
        sch.compute_at(shared, r_outer)
        copy_loops = sch.get_loops(shared)
        depth = [sch.get(lp).loop_var for lp in copy_loops].index(outer_var) + 1  # type: ignore
        inner = copy_loops[depth:]
        if not inner:  # a one-element tile: a unit loop, so that one thread copies it
            inner = [sch.add_unit_loop(shared)]
        fused = sch.fuse(*inner) if len(inner) > 1 else inner[0]
        width = sch.sample_categorical(lens, [1.0] * len(lens))
        parts = sch.split(fused, [None, *thread_tiles, width])
        if thread_tiles:
            tx = sch.fuse(*parts[1:-1]) if len(parts) > 3 else parts[1]
            sch.bind(tx, "threadIdx.x")
        sch.vectorize(parts[-1])
    first_reduce = next(t[0] for t, k in zip(tiles, kinds, strict=True) if k == "R")
    sch.decompose_reduction(block, first_reduce)
    return True


# ---------------------------------------------------------------------------
# cross-thread reduction and auto-bind


def needs_cross_thread_reduction(func: PrimFunc, name: str) -> bool:
    """Is block ``name`` a reduction alone in its loop nest, not tiled, whose spatial
    extent is at most its reduction extent (too little spatial parallelism to give
    each output its own thread)?

    >>> import workbench as wb
    >>> func = wb.workloads.softmax(8, 64)
    >>> [needs_cross_thread_reduction(func, n) for n in ("max", "norm")]
    [True, False]
    """
    found = _own_nest(func, name)
    if found is None:
        return False
    block, loops = found
    if block.init is None or not block.is_reduction or not isinstance(block.body, BufferStore):
        return False
    if any(k == TILING_KEY for k, _ in block.annotations):
        return False
    if not all(isinstance(lp.extent, int) for lp in loops):
        return False
    kinds = _loop_kinds(block, loops)
    space = math.prod(lp.extent for lp, k in zip(loops, kinds) if k == "S")  # type: ignore
    reduce = math.prod(lp.extent for lp, k in zip(loops, kinds) if k == "R")  # type: ignore
    return reduce > 1 and space <= reduce


def cross_thread_reduction(
    sch: Schedule,
    block: BlockRV,
    target: Target | str = "cuda",
    thread_extents: Sequence[int] = CROSS_THREAD_EXTENTS,
) -> bool:
    """Reduce ``block`` across the threads of a thread block (MetaSchedule's
    ``CrossThreadReduction``): the reduction loops fused and split by a sampled thread
    count bound to ``threadIdx.x``, the spatial loops fused onto ``blockIdx.x``. Returns
    False unless :func:`needs_cross_thread_reduction`.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.softmax(4, 64), seed=0)
    >>> cross_thread_reduction(sch, sch.get_block("max"))
    True
    >>> [sch.get(lp).thread_tag for lp in sch.get_loops(sch.get_block("max"))]
    ['blockIdx.x', None, 'threadIdx.x']
    """
    tgt = _target(target)
    name = sch.get(block).name  # type: ignore[union-attr]
    if not needs_cross_thread_reduction(sch.func, name):
        return False
    s_loops, r_loops = _spatial_then_reduce(sch, block)
    reduce = math.prod(sch.get(lp).extent for lp in r_loops)  # type: ignore[union-attr]
    limit = min(tgt.max_threads_per_block, max(_next_pow2(reduce), min(thread_extents)))  # type: ignore
    cands = [t for t in thread_extents if t <= limit] or [min(thread_extents)]
    threads = sch.sample_categorical(cands, [1.0] * len(cands))
    r = sch.fuse(*r_loops) if len(r_loops) > 1 else r_loops[0]
    _, tx = sch.split(r, [None, threads])
    sch.bind(tx, "threadIdx.x")
    bx = _fused(sch, block, s_loops)
    sch.bind(bx, "blockIdx.x")
    return True


def auto_bind(
    sch: Schedule,
    block: BlockRV,
    target: Target | str = "cuda",
    thread_extents: Sequence[int] = AUTO_BIND_EXTENTS,
) -> bool:
    """Bind the loop nest of ``block`` (alone in its nest, unbound) to GPU threads
    (MetaSchedule's ``AutoBind``): its spatial loops fused and split by a sampled
    thread count into ``blockIdx.x`` x ``threadIdx.x``; reduction loops stay serial in
    each thread, their init moved out of them.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.transpose(64, 64), seed=0)
    >>> auto_bind(sch, sch.get_block("B"))
    True
    >>> [sch.get(lp).thread_tag for lp in sch.get_loops(sch.get_block("B"))]
    ['blockIdx.x', 'threadIdx.x']
    """
    tgt = _target(target)
    name = sch.get(block).name  # type: ignore[union-attr]
    if _own_nest(sch.func, name) is None:
        return False
    s_loops, r_loops = _spatial_then_reduce(sch, block)
    extents = [sch.get(lp).extent for lp in s_loops]  # type: ignore[union-attr]
    space = math.prod(extents) if all(isinstance(e, int) for e in extents) else None
    limit = tgt.max_threads_per_block
    if space is not None:
        limit = min(limit, max(_next_pow2(space), min(thread_extents)))  # type: ignore
    cands = [t for t in thread_extents if t <= limit] or [min(thread_extents)]
    threads = sch.sample_categorical(cands, [1.0] * len(cands))
    fused = _fused(sch, block, s_loops)
    bx, tx = sch.split(fused, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    if r_loops and sch.get(block).init is not None:  # type: ignore[union-attr]
        sch.decompose_reduction(block, r_loops[0])
    return True


def _annotate_unroll(sch: Schedule, steps: Sequence[int]) -> None:
    """One sampled unroll budget on the outer loop of every kernel."""
    if not steps:
        return
    outers: dict[Var, LoopRV] = {}
    for name in _block_names(sch.func):
        loops = sch.get_loops(sch.get_block(name))
        if loops:
            var = sch.get(loops[0]).loop_var  # type: ignore[union-attr]
            outers.setdefault(var, loops[0])
    if not outers:
        return
    budget = sch.sample_categorical(list(steps), [1.0] * len(steps))
    for loop in outers.values():
        sch.annotate(loop, AUTO_UNROLL_KEY, budget)


def _block_names(func: PrimFunc) -> list[str]:
    return [b.name for b in iter_blocks(func.body) if b is not func.body]


# ---------------------------------------------------------------------------
# the space


def default_gpu_space(
    func: PrimFunc | IRModule,
    target: Target | str = "cuda",
    *,
    structure: str = "SSSRRSRS",
    vthread: bool = True,
    max_innermost_factor: int = 64,
    max_vthreads: int = 8,
    vector_load_lens: Sequence[int] = VECTOR_LOAD_LENS,
    cross_thread_extents: Sequence[int] = CROSS_THREAD_EXTENTS,
    auto_bind_extents: Sequence[int] = AUTO_BIND_EXTENTS,
    unroll_max_steps: Sequence[int] = GPU_UNROLL_MAX_STEPS,
) -> Callable[[Schedule], None]:
    """The default GPU space for ``func`` on ``target`` (``"cuda"``, ``"cuda
    -arch=sm_90"``, a :class:`~workbench.Target` or its dict): a function
    ``space(sch) -> None`` applying the CUDA rules of the module docstring to a fresh
    ``wb.Schedule(func, seed=...)``. ``vthread=False`` leaves out the ``vthread.x``
    level. Refuses (ValueError) a function with symbolic shapes.

    >>> import workbench as wb
    >>> func = wb.workloads.softmax(8, 64)
    >>> space = default_gpu_space(func, "cuda -arch=sm_90")
    >>> sch = wb.Schedule(func, seed=2)
    >>> space(sch)
    >>> from workbench.codegen.gpu import lower_for_gpu
    >>> len(lower_for_gpu(sch, "cuda -arch=sm_90")[1].kernels)
    3
    """
    tgt = _target(target)
    func = _as_static_func(func)
    rules.check_structure(structure)
    binds = ("blockIdx.x", "vthread.x", "threadIdx.x") if vthread else (
        "blockIdx.x", "threadIdx.x")
    if structure.find("R") < len(binds):
        raise ValueError(f"default_gpu_space: structure {structure!r} needs "
                         f"{len(binds)} spatial levels before its first R")
    read_level = structure.find("R") + 1
    write_level = len(binds)

    def space(sch: Schedule) -> None:
        """Apply the GPU rules (auto-inline, multi-level tiling, cross-thread
        reduction, auto-bind, unroll) to ``sch``, sampling from its generator."""
        for name in _block_names(sch.func):
            block = next((b for b in iter_blocks(sch.func.body) if b.name == name), None)
            if block is not None and rules.inline_candidate(block, False, (), sch.func):
                rules.auto_inline(sch, sch.get_block(name), disallow_if_then_else=False,
                                  disallow_ops=())
        for name in _block_names(sch.func):
            path = block_path(sch.func, name)
            if path is not None and rules.needs_multi_level_tiling(
                sch.func, path[-1], loops_above(path)  # type: ignore[arg-type]
            ):
                gpu_multi_level_tiling(
                    sch, sch.get_block(name), tgt, structure=structure, tile_binds=binds,
                    max_innermost_factor=max_innermost_factor, max_vthreads=max_vthreads,
                    vector_load_lens=vector_load_lens, read_level=read_level,
                    write_level=write_level,
                )
        for name in _block_names(sch.func):
            if needs_cross_thread_reduction(sch.func, name):
                cross_thread_reduction(sch, sch.get_block(name), tgt, cross_thread_extents)
        for name in _block_names(sch.func):
            if _own_nest(sch.func, name) is not None:
                auto_bind(sch, sch.get_block(name), tgt, auto_bind_extents)
        _annotate_unroll(sch, unroll_max_steps)

    space.__qualname__ = space.__name__ = f"default_gpu_space_{func.name}"
    return space
