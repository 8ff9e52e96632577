"""Schedule rules for the CPU: MetaSchedule's building blocks, with our primitives.

A rule is a function ``rule(sch, block, **options) -> bool`` that schedules one block
of ``sch`` (a :class:`~workbench.Schedule`) with ordinary primitives and sampling
instructions. It returns True if it did something, and False, changing nothing, if
the block is not one it applies to. Everything a rule does lands in the trace, so a
schedule built by rules prints, replays and mutates like a hand-written one.

* :func:`auto_inline` -- inline an element-wise stage into its consumers
  (``compute_inline``) or fold it into its producer (``reverse_compute_inline``).
* :func:`multi_level_tiling` -- tile a reduction block into the levels of a structure
  such as ``"SSRSRS"`` with sampled tile sizes (drawn towards a register tile that fits
  the vector registers and accumulates over the whole reduction), accumulate each
  output tile in a ``local`` cache (``cache_write`` + ``reverse_compute_at``), fold an
  element-wise epilogue into the write-back, move the init out of the reduction loops
  and, optionally, pack the vector-loaded input into a compact panel (``cache_read``).
* :func:`parallel_vectorize_unroll` -- for every loop nest of the root block: fuse
  the outer data-parallel loops into one parallel loop, vectorize each block's
  innermost contiguous loop, and give the nest a sampled unroll budget
  (``pragma_auto_unroll_max_step``, which the C code generator honours).
* :func:`random_compute_location` -- move a producer stage under a sampled loop of
  its consumers (``sample_compute_location`` + ``compute_at``).

Replayable by design: a trace replays the same primitive calls whatever its
decisions say, so a decision may only change *values*: tile sizes (split factors
are the sampled ``ExprRV`` handles), compute locations (``compute_at`` follows the
sampled loop handle) and the unroll budget (an annotation whose value is the sampled
handle). Choices of *structure* -- which loops are fused into the parallel loop,
which loops are vectorized, whether an input is packed -- are made by the rule from
the loop nest it sees and are then fixed in the trace, like one of MetaSchedule's
design-space sketches: a trace whose tile sizes are mutated keeps its parent's
structure (a fresh sample with those tiles may fuse or vectorize differently), and
never fails to replay because of it, since fusing, vectorizing, ``cache_read`` and
``reverse_compute_at`` do not depend on extents. A mutated compute location can make a
later step illegal; the replay then raises ``TraceError`` naming that step.
(MetaSchedule instead annotates the root block with sampled values and lets a
postprocessor re-derive the structure after each replay; that needs the tuner to
strip and re-run postprocessing from every trace, which this design avoids.)

>>> import workbench as wb
>>> from workbench.search import rules
>>> sch = wb.Schedule(wb.workloads.matmul(64, 64, 64), seed=0)
>>> rules.multi_level_tiling(sch, sch.get_block("C"))
True
>>> [b.name for b in wb.ir.analysis.iter_blocks(sch.func.body)][1:]
['C_init', 'C_update', 'C_local']
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Sequence

import numpy as np

from ..codegen.cstyle import AUTO_UNROLL_KEY  # the C backend's unroll hint
from ..ir import Block, For, PrimFunc, SeqStmt, Var
from ..ir.analysis import block_path, iter_blocks
from ..ir.expr import BufferLoad, Call, Select
from ..ir.functor import expr_vars, iter_exprs, iter_stmts, uses_var
from ..ir.stmt import BufferStore
from ..schedule import BlockRV, LoopRV, Schedule, ScheduleError
from ..schedule.primitives.sampling import draw_perfect_tile, perfect_tilings

__all__ = [
    "AUTO_UNROLL_KEY",
    "TILING_KEY",
    "auto_inline",
    "check_tile_bias",
    "compute_location_candidate",
    "default_cores",
    "draw_tilings",
    "inline_candidate",
    "multi_level_tiling",
    "needs_multi_level_tiling",
    "parallel_vectorize_unroll",
    "random_compute_location",
    "vector_friendly_tilings",
    "vector_operands",
]

TILING_KEY = "meta_schedule.tiling_structure"
"""Block annotation set by :func:`multi_level_tiling` (a block is tiled only once)."""


# ---------------------------------------------------------------------------
# small IR helpers


def _is_data_parallel(loop: For) -> bool:
    """No block under ``loop`` binds a reduction iter var to an expression of it."""
    for s in iter_stmts(loop.body, enter_blocks=False):
        if isinstance(s, Block):
            for iv, value in zip(s.iter_vars, s.iter_values, strict=True):
                if iv.kind == "R" and uses_var(value, loop.loop_var):
                    return False
    return True


def _tiled(block: Block) -> bool:
    return any(k == TILING_KEY for k, _ in block.annotations)


def _readers(func: PrimFunc, block: Block) -> list[Block]:
    """Other blocks of ``func`` that read a buffer ``block`` writes."""
    written = {w.buffer for w in block.writes or ()}
    return [
        b
        for b in iter_blocks(func.body)
        if b is not block and b is not func.body and any(r.buffer in written for r in b.reads or ())
    ]


def _schedule_rng(sch: Schedule) -> random.Random:
    """The schedule's random generator (``Schedule(func, seed=...)``): rules that draw a
    decision themselves use it, so one seed still gives one schedule. (``Schedule`` has
    no public accessor for it yet; this is the one place that reaches in.)"""
    return sch._rng


# ---------------------------------------------------------------------------
# auto inline


def inline_candidate(
    block: Block,
    disallow_if_then_else: bool = True,
    disallow_ops: Sequence[str] = ("exp",),
    func: PrimFunc | None = None,
) -> bool:
    """Is ``block`` a stage :func:`auto_inline` tries: one store, no reduction, no
    ``Select`` (with ``disallow_if_then_else``) and no call in ``disallow_ops``? With
    ``func``, also: it writes an intermediate buffer, or has a single producer to be
    folded into.

    >>> import workbench as wb
    >>> func = wb.workloads.conv2d_nchw(1, 4, 6, 6, 4, 3)
    >>> [inline_candidate(b) for b in wb.ir.analysis.iter_blocks(func.body)][1:]
    [False, False]
    """
    if block.init is not None or block.is_reduction or not isinstance(block.body, BufferStore):
        return False
    value = block.body.value
    if disallow_if_then_else and any(isinstance(x, Select) for x in iter_exprs(value)):
        return False
    if any(isinstance(x, Call) and x.op in disallow_ops for x in iter_exprs(value)):
        return False
    return func is None or _may_inline(func, block)


def _may_inline(func: PrimFunc, block: Block) -> bool:
    """Cheap necessary condition for ``compute_inline`` (writes an intermediate buffer)
    or ``reverse_compute_inline`` (exactly one producer, itself a single store)."""
    if not isinstance(block.body, BufferStore):
        return False
    if block.body.buffer not in func.params:
        return True
    read = {r.buffer for r in block.reads or ()}
    producers = [
        b for b in iter_blocks(func.body)
        if b is not block and any(w.buffer in read for w in b.writes or ())
    ]
    return len(producers) == 1 and producers[0].init is None and (
        isinstance(producers[0].body, BufferStore)
    )


def auto_inline(
    sch: Schedule,
    block: BlockRV,
    *,
    into_consumer: bool = True,
    into_producer: bool = True,
    disallow_if_then_else: bool = True,
    disallow_ops: Sequence[str] = ("exp",),
) -> bool:
    """Inline element-wise stage ``block`` away, if that is legal and cheap.

    First ``compute_inline`` (the stage's expression is substituted into every
    consumer), else ``reverse_compute_inline`` (the stage is folded into the store of
    its only producer). Only stages with a single store and no reduction are tried;
    like MetaSchedule's CPU defaults, a stage whose expression has a ``Select``
    (padding) or a call in ``disallow_ops`` is kept, since inlining it would recompute
    it in an inner loop. A refusal by the primitive is not an error: the stage stays.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.linear_bias_relu(1, 16, 16))
    >>> [auto_inline(sch, sch.get_block(n)) for n in ("matmul", "bias_add", "relu")]
    [False, True, False]
    >>> [b.name for b in wb.ir.analysis.iter_blocks(sch.func.body)][1:]
    ['matmul', 'relu']
    """
    blk: Block = sch.get(block)  # type: ignore[assignment]
    if not inline_candidate(blk, disallow_if_then_else, disallow_ops, sch.func):
        return False
    attempts = [sch.compute_inline] if into_consumer else []
    attempts += [sch.reverse_compute_inline] if into_producer else []
    for attempt in attempts:
        try:
            attempt(block)
        except ScheduleError:
            continue
        return True
    return False


# ---------------------------------------------------------------------------
# multi-level tiling


def needs_multi_level_tiling(func: PrimFunc, block: Block, loops: Sequence[For]) -> bool:
    """MetaSchedule's test plus what our tiling needs: ``block`` is a reduction with one
    store, not tiled yet, bound trivially (each iter var is one of ``loops``, the loops
    above it, in order, each the only statement of its parent, serial and unannotated)
    and it reads some buffer other than its output without using some spatial iter var
    (so tiling brings reuse: ``A[i, k]`` in a matmul does not depend on ``j``).

    >>> import workbench as wb
    >>> from workbench.ir.analysis import block_path, loops_above
    >>> def needs(func, name):
    ...     path = block_path(func, name)
    ...     return needs_multi_level_tiling(func, path[-1], loops_above(path))
    >>> needs(wb.workloads.matmul(8, 8, 8), "C"), needs(wb.workloads.softmax(8, 8), "max")
    (True, False)
    """
    if _tiled(block) or block.init is None or not block.is_reduction:
        return False
    if not isinstance(block.body, BufferStore) or len(loops) != len(block.iter_vars) or not loops:
        return False
    if any(lp.kind != "serial" or lp.annotations for lp in loops):
        return False
    if any(value is not lp.loop_var for value, lp in zip(block.iter_values, loops, strict=True)):
        return False
    if any(outer.body is not inner for outer, inner in zip(loops, [*loops[1:], block])):
        return False
    spatial = {iv.var for iv in block.iter_vars if iv.kind == "S" and iv.extent > 1}
    out = block.body.buffer
    for load in iter_exprs(block.body.value):
        if isinstance(load, BufferLoad) and load.buffer is not out:
            used: set[Var] = set()
            for index in load.indices:
                used |= expr_vars(index)
            if spatial - used:
                return True
    return False


def check_structure(structure: str, write_level: int | None = None) -> None:
    """Refuse (ValueError) a tiling structure that is not a string of ``S`` and ``R``
    with an ``S``, or a ``write_level`` that is not a level above the first ``R``."""
    if not isinstance(structure, str) or not structure or set(structure) - {"S", "R"} or (
        "S" not in structure
    ):
        raise ValueError(
            f"multi_level_tiling: structure must be a string of S and R with at least one "
            f"S, like 'SSRSRS'; got {structure!r}"
        )
    if write_level is not None:
        first_r = structure.find("R")
        limit = first_r if first_r >= 0 else len(structure)
        if isinstance(write_level, bool) or not isinstance(write_level, int) or not (
            1 <= write_level <= limit
        ):
            raise ValueError(
                f"multi_level_tiling: write_level={write_level!r} must be an integer from 1 "
                f"to {limit} (the output tile is written back above the first reduction "
                f"level of {structure!r})"
            )


def check_tile_bias(
    accumulators: tuple[int, int] | None,
    panel: tuple[int, int] | None,
    whole_reduction: float,
    registers: int | None = None,
) -> None:
    """Refuse (ValueError) tile-draw options of :func:`multi_level_tiling` that make no
    sense: ``accumulators`` not ``(low, high)`` with ``1 <= low <= high``, ``panel``
    not two positive integers, ``whole_reduction`` not a probability, ``registers``
    not None or an integer of at least 3 (an accumulator, a loaded vector, a broadcast).

    >>> check_tile_bias((4, 24), (1 << 20, 32), 0.75)
    >>> check_tile_bias((8, 4), None, 0.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: multi_level_tiling: accumulators must be (low, high) ... got (8, 4)
    """

    def ints(x: object) -> bool:
        return isinstance(x, tuple) and len(x) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in x
        )

    if accumulators is not None and not (
        ints(accumulators) and 1 <= accumulators[0] <= accumulators[1]
    ):
        raise ValueError(
            "multi_level_tiling: accumulators must be (low, high) with 1 <= low <= high, "
            f"got {accumulators!r}"
        )
    if panel is not None and not (ints(panel) and min(panel) >= 1):
        raise ValueError(
            f"multi_level_tiling: panel must be (max_bytes, min_reuse), two positive "
            f"integers, got {panel!r}"
        )
    if registers is not None and (
        isinstance(registers, bool) or not isinstance(registers, int) or registers < 3
    ):
        raise ValueError(
            f"multi_level_tiling: registers must be None or an integer >= 3, got {registers!r}"
        )
    if isinstance(whole_reduction, bool) or not isinstance(whole_reduction, (int, float)) or not (
        0.0 <= whole_reduction <= 1.0
    ):
        raise ValueError(
            f"multi_level_tiling: whole_reduction must be a probability in [0, 1], "
            f"got {whole_reduction!r}"
        )


def vector_friendly_tilings(
    extent: int, n: int, max_innermost_factor: int, vector_width: int
) -> list[list[int]]:
    """The ``n``-factor perfect tilings of ``extent`` whose innermost tile is a multiple
    of ``vector_width`` (empty if there are none), for drawing the tiles of a
    vectorized axis.

    >>> vector_friendly_tilings(64, 2, 64, 16)
    [[1, 64], [2, 32], [4, 16]]
    """
    return [
        t for t in perfect_tilings(extent, n, max_innermost_factor) if t[-1] % vector_width == 0
    ]


def draw_tilings(
    rng: random.Random,
    extents: Sequence[int],
    n: int,
    max_innermost_factor: int,
    *,
    contiguous: int | None = None,
    vector_width: int = 1,
    unit_levels: Sequence[int] = (),
    miss: Callable[[list[list[int]]], float] | None = None,
    max_draws: int = 64,
) -> list[list[int]]:
    """Draw an ``n``-factor perfect tiling for each loop of ``extents`` together,
    rejecting draws that do not fit.

    Loop ``contiguous`` (an index into ``extents``: the loop that will be vectorized)
    is drawn among its :func:`vector_friendly_tilings` when ``vector_width > 1`` and it
    has any, every other loop uniformly (:func:`draw_perfect_tile`). The levels in
    ``unit_levels`` get a tile of 1. ``miss(tilings)`` scores a draw: 1 if it fits,
    more the further it is off; draws are repeated up to ``max_draws`` times until one
    fits, else the one that missed least is kept. So the result is uniform over the
    tilings that fit whenever some are found, and always a valid tiling.

    >>> import random
    >>> def small_inner(t):  # innermost tiles multiply to at most 8
    ...     return max(t[0][-1] * t[1][-1] / 8, 1.0)
    >>> tiles = draw_tilings(random.Random(0), [64, 64], 3, 64, miss=small_inner)
    >>> tiles[0][-1] * tiles[1][-1] <= 8, [t[0] * t[1] * t[2] for t in tiles]
    (True, [64, 64])
    """
    units = sorted(set(unit_levels))
    free = n - len(units)

    def draw() -> list[list[int]]:
        out = []
        for index, extent in enumerate(extents):
            friendly = (
                vector_friendly_tilings(extent, free, max_innermost_factor, vector_width)
                if index == contiguous and vector_width > 1 else []
            )
            if friendly:
                tiling = list(friendly[rng.randrange(len(friendly))])
            else:
                tiling = draw_perfect_tile(rng, extent, free, max_innermost_factor)
            for level in units:
                tiling.insert(level, 1)
            out.append(tiling)
        return out

    best = draw()
    if miss is None:
        return best
    best_miss = miss(best)
    for _ in range(max_draws - 1):
        if best_miss <= 1.0:
            break
        tilings = draw()
        score = miss(tilings)
        if score < best_miss:
            best, best_miss = tilings, score
    return best


def _outside(value: float, lo: float, hi: float) -> float:
    """1 inside ``[lo, hi]``, else the factor by which ``value`` is off."""
    return max(lo / value, value / hi, 1.0)


def vector_operands(block: Block) -> list[int]:
    """Read-buffer indices (into ``block.reads``) of the inputs loaded as vectors: their
    last index is the iter var the output is contiguous in, and some spatial iter var
    does not index them (they are reused). ``B`` in ``C[i, j] += A[i, k] * B[k, j]``.

    >>> import workbench as wb
    >>> from workbench.ir.analysis import find_block
    >>> vector_operands(find_block(wb.workloads.matmul(8, 8, 8), "C"))
    [1]
    """
    axis = _contiguous_axis(block)
    if axis is None or not isinstance(block.body, BufferStore):
        return []
    spatial = {iv.var for iv in block.iter_vars if iv.kind == "S" and iv.extent > 1}
    out = block.body.buffer
    found = []
    for index, region in enumerate(block.reads or ()):
        if region.buffer is out:
            continue
        loads = [
            x for x in iter_exprs(block.body.value)
            if isinstance(x, BufferLoad) and x.buffer is region.buffer
        ]
        if not loads or not loads[0].indices:
            continue
        used: set[Var] = set()
        for i in loads[0].indices:
            used |= expr_vars(i)
        if axis in expr_vars(loads[0].indices[-1]) and spatial - used:
            found.append(index)
    return found


def _contiguous_axis(block: Block) -> Var | None:
    """The iter var indexing the last dimension of ``block``'s store, if it is one."""
    store = block.body
    if isinstance(store, BufferStore) and store.indices:
        last = store.indices[-1]
        if isinstance(last, Var) and any(iv.var is last for iv in block.iter_vars):
            return last
    return None


def multi_level_tiling(
    sch: Schedule,
    block: BlockRV,
    structure: str = "SSRSRS",
    max_innermost_factor: int = 64,
    cache_write: str | None = "local",
    vector_width: int = 16,
    write_level: int = 2,
    decompose: bool = True,
    cache_read: str | None = None,
    read_level: int = 1,
    accumulators: tuple[int, int] | None = (4, 24),
    panel: tuple[int, int] | None = (1 << 20, 32),
    whole_reduction: float = 0.75,
    registers: int | None = None,
    tile_unroll: int | None = 0,
) -> bool:
    """Tile reduction ``block`` into the levels of ``structure``, MetaSchedule style.

    Each spatial loop is split by ``sample_perfect_tile`` into as many tiles as
    ``structure`` has ``S``, each reduction loop into as many as it has ``R`` (the
    innermost tile at most ``max_innermost_factor``), and the tiles are reordered level
    by level: for a matmul ``"SSRSRS"`` gives ``i0 j0 | i1 j1 | k0 | i2 j2 | k1 | i3 j3``.

    With ``cache_write`` (a storage scope) the block accumulates into a cache of that
    scope, and the block copying it back is placed by ``reverse_compute_at`` under the
    last loop of level ``write_level`` (``j1`` above, so the cache holds one
    ``i2*i3 x j2*j3`` output tile); an element-wise epilogue (ReLU, bias add) is folded
    into that copy by ``reverse_compute_inline``. ``decompose`` moves the init out of
    the reduction loops (``decompose_reduction`` at the outermost reduction tile), so
    the tile is zeroed once instead of testing ``k == 0`` in the innermost loop: on
    matmul 128^3 here, 111 GFLOPS against 77 with the test.

    With ``cache_read`` (a storage scope, e.g. ``"global"``; MetaSchedule's
    ``reuse_read``) each input loaded as vectors (:func:`vector_operands`: ``B`` of a
    matmul) is copied, by ``cache_read`` + ``compute_at`` under the last loop of level
    ``read_level``, into a compact panel (``K x j-tile``) that the inner loops then read
    with a short row stride. That removes the page-sized strides of a large ``B`` (at
    1024^3 here: 27 -> 74 GFLOPS on one core); for small matrices it only costs. The
    copy's loops get an unroll budget of 0 (``pragma_auto_unroll_max_step``), so a
    budget sampled later for the whole nest does not unroll them: unrolling a copy
    gains nothing, and a 512-step copy with a vector loop inside takes the C compiler
    20 s instead of 0.3 s.

    ``tile_unroll`` (default 0; None: no annotation) is the unroll budget
    (``pragma_auto_unroll_max_step``) put on the register tile's outermost loop and on
    the write-back's, overriding the budget sampled later for the whole nest: with 0
    the C compiler unrolls them itself and keeps the accumulators in registers. gcc 12
    does not when the tile rows or the write-back are unrolled by ``#pragma GCC
    unroll``: it then loads and stores every accumulator at each step of the reduction
    (matmul 512^3 with an 8x8 register tile, one core of an AVX2 machine: 28 GFLOPS
    with any budget above 0 against 71 with none; with this, 70-74 for every budget).
    The accumulators only stay in registers when the register tile's output tile is
    the whole ``local`` cache (tiles of 1 between the reduction levels, see
    ``whole_reduction``): a tile at a variable offset in a larger cache is updated in
    memory (24-28 against 70 GFLOPS there).

    With ``vector_width > 1`` the spatial tilings are drawn together
    (:func:`draw_tilings`), the axis the output is contiguous in (vectorized later)
    among its tilings whose innermost tile is a multiple of ``vector_width``
    (:func:`vector_friendly_tilings`), and a draw is rejected unless

    * the register tile -- the innermost spatial tiles, the outputs that each step of
      the innermost reduction loop updates -- needs ``accumulators = (low, high)``
      vector registers (None: any);
    * with ``registers`` (the vector register file, e.g. 16 on AVX2, 32 on AVX-512),
      the register tile fits it: its accumulators, one loaded vector per vector of
      the contiguous axis and one broadcast (``rows * cols + cols + 1`` registers for
      ``rows x cols`` vectors; 6x2 and 4x2 fit 16, 8x2 does not) and has at least as
      many rows as column vectors (None: any). The rows reuse each vector of the
      streamed operand (``B`` of a matmul, read from L2 once per row of tiles), the
      columns each broadcast element of the other (read from L1): so a tall tile needs
      less L2 bandwidth per FMA. On one core of an AVX2 machine, matmul 512^3 with
      whole-K register tiles: 8x1 vectors 71 GFLOPS, 4x2 61, 2x4 28 (gcc also spills
      that one); numpy 94;
    * with ``cache_read``, each packed panel holds at most ``panel[0]`` bytes (so it
      stays in L2) and serves at least ``panel[1]`` iterations of the loops that do
      not index it (so its copy is paid for) (None: any);

    and with probability ``whole_reduction`` the spatial levels between the reduction
    levels (``i2 j2`` above) are drawn as 1, so that the register tile accumulates over
    the whole reduction before it moves on. If no draw fits, the closest is kept. On
    matmul 1024^3 here this lifts the median random sample from ~55 to ~165 GFLOPS
    (the best schedules, ~300, have a 4x64 or 8x32 register tile over all of K and a
    64-column packed panel). With ``vector_width=1`` every tiling is drawn uniformly.
    The draws are recorded as the instructions' decisions, and a mutated decision may
    be any valid tiling.

    Returns False, changing nothing, for a block this does not apply to (see
    :func:`needs_multi_level_tiling`); marks a tiled block with
    ``meta_schedule.tiling_structure``.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(128, 128, 128), seed=1)
    >>> block = sch.get_block("C")
    >>> multi_level_tiling(sch, block)
    True
    >>> [sch.get(lp).loop_var.name for lp in sch.get_loops(block)]
    ['i_0', 'j_0', 'i_1', 'j_1', 'k_0', 'i_2', 'j_2', 'k_1', 'i_3', 'j_3']
    """
    check_structure(structure, write_level if cache_write else None)
    if cache_read:
        check_structure(structure, read_level)
    check_tile_bias(accumulators, panel, whole_reduction, registers)
    blk: Block = sch.get(block)  # type: ignore[assignment]
    loop_rvs = sch.get_loops(block)
    loops: list[For] = [sch.get(lp) for lp in loop_rvs]  # type: ignore[misc]
    if not needs_multi_level_tiling(sch.func, blk, loops):
        return False
    sch.annotate(block, TILING_KEY, structure)
    counts = {"S": structure.count("S"), "R": structure.count("R")}
    kinds = [iv.kind for iv in blk.iter_vars]
    decisions: dict[Var, list[int]] = {}
    if vector_width > 1 and counts["S"] > 1:
        rng = _schedule_rng(sch)
        middle = _middle_levels(structure)
        decisions = _draw_spatial(
            rng, blk, loops, structure, max_innermost_factor, vector_width, accumulators,
            read_level if cache_read else None, panel,
            middle if middle and rng.random() < whole_reduction else [], registers,
        )
    tiles: list[list[LoopRV]] = []
    for iv, rv in zip(blk.iter_vars, loop_rvs, strict=True):
        n = counts[iv.kind]
        if n <= 1:  # one level: the loop stays whole ("SS": reductions go innermost)
            tiles.append([rv])
            continue
        decision = decisions.get(iv.var)
        factors = sch.sample_perfect_tile(rv, n, max_innermost_factor, decision=decision)
        tiles.append(sch.split(rv, factors))
    order: list[LoopRV] = []
    level_ends: list[LoopRV] = []
    used = {"S": 0, "R": 0}
    for letter in structure:
        order.extend(t[used[letter]] for t, k in zip(tiles, kinds, strict=True) if k == letter)
        used[letter] += 1
        level_ends.append(order[-1] if order else loop_rvs[0])
    if counts["R"] == 0:
        order.extend(t[0] for t, k in zip(tiles, kinds, strict=True) if k == "R")
    sch.reorder(*order)
    if cache_write:
        copy = sch.cache_write(block, 0, cache_write)
        _fold_epilogue(sch, copy)
        sch.reverse_compute_at(copy, level_ends[write_level - 1])
        if tile_unroll is not None:  # the write-back too (see the docstring)
            back = sch.get_loops(copy)[order.index(level_ends[write_level - 1]) + 1:]
            if back:
                sch.annotate(back[0], AUTO_UNROLL_KEY, tile_unroll)
    if cache_read:
        for index in vector_operands(blk):  # by name: the block's reads change above
            packed = sch.cache_read(block, blk.reads[index].buffer.name, cache_read)
            sch.compute_at(packed, level_ends[read_level - 1])
            copy_loops = sch.get_loops(packed)[order.index(level_ends[read_level - 1]) + 1:]
            if copy_loops:  # never unroll the copy (see the docstring)
                sch.annotate(copy_loops[0], AUTO_UNROLL_KEY, 0)
    if tile_unroll is not None and structure.endswith("S") and counts["S"] > 1:
        tile = next(t[-1] for t, k in zip(tiles, kinds, strict=True) if k == "S")
        sch.annotate(tile, AUTO_UNROLL_KEY, tile_unroll)  # see the docstring
    if decompose:  # the outermost reduction loop: the first R level's first tile
        sch.decompose_reduction(block, next(t[0] for t, k in zip(tiles, kinds) if k == "R"))
    return True


def _draw_spatial(
    rng: random.Random,
    block: Block,
    loops: Sequence[For],
    structure: str,
    max_innermost_factor: int,
    vector_width: int,
    accumulators: tuple[int, int] | None,
    read_level: int | None,
    panel: tuple[int, int] | None,
    unit_levels: Sequence[int],
    registers: int | None = None,
) -> dict[Var, list[int]]:
    """The spatial tilings of :func:`multi_level_tiling`, drawn together
    (:func:`draw_tilings`) so that the register tile needs ``accumulators`` vectors
    and, with packing at ``read_level``, each packed panel fits ``panel``."""
    spatial = [(iv.var, lp.extent) for iv, lp in zip(block.iter_vars, loops) if iv.kind == "S"]
    contiguous = _contiguous_axis(block)
    vec = next((i for i, (v, _) in enumerate(spatial) if v is contiguous), None)
    n = structure.count("S")
    # S levels (indices among the S levels) below the packing point
    s_positions = [p for p, c in enumerate(structure) if c == "S"]
    below = [lvl for lvl, p in enumerate(s_positions) if read_level is not None and p >= read_level]
    packed: list[tuple[set[Var], int, int]] = []  # (vars indexing it, elements from R, bytes)
    if read_level is not None and panel is not None:
        reduce_extent = {iv.var: lp.extent for iv, lp in zip(block.iter_vars, loops)
                         if iv.kind == "R"}
        for index in vector_operands(block):
            region = block.reads[index]  # type: ignore[index]
            used: set[Var] = set()
            for load in iter_exprs(block.body.value):  # type: ignore[union-attr]
                if isinstance(load, BufferLoad) and load.buffer is region.buffer:
                    for i in load.indices:
                        used |= expr_vars(i)
            r_elems = 1
            for v in used & set(reduce_extent):
                r_elems *= reduce_extent[v]
            packed.append((used, r_elems, np.dtype(region.buffer.dtype).itemsize))

    def miss(tilings: list[list[int]]) -> float:
        score = 1.0
        if accumulators is not None:
            count = 1.0
            for i, tiling in enumerate(tilings):
                count *= tiling[-1] / vector_width if i == vec else tiling[-1]
            score *= _outside(count, *accumulators)
        if registers is not None and vec is not None:
            cols = tilings[vec][-1] / vector_width
            rows = math.prod(t[-1] for i, t in enumerate(tilings) if i != vec)
            score *= max((rows * cols + cols + 1) / registers, 1.0) ** 4  # spills cost most
            score *= max(cols / rows, 1.0)  # each loaded vector serves >= cols rows
        for used, r_elems, itemsize in packed:
            size, reuse = r_elems * itemsize, 1
            for (var, _), tiling in zip(spatial, tilings):
                inner = math.prod(tiling[lvl] for lvl in below)
                if var in used:
                    size *= inner
                else:
                    reuse *= inner
            score *= max(size / panel[0], 1.0) * max(panel[1] / reuse, 1.0)  # type: ignore[index]
        return score

    drawn = draw_tilings(
        rng, [e for _, e in spatial], n, max_innermost_factor, contiguous=vec,
        vector_width=vector_width, unit_levels=unit_levels, miss=miss, max_draws=DRAWS,
    )
    return {var: t for (var, _), t in zip(spatial, drawn, strict=True)}


#: Draws :func:`multi_level_tiling` makes before it keeps the closest miss: large
#: extents have many tilings and few fit every bias (256 draws cost about 5 ms).
DRAWS = 256


def _middle_levels(structure: str) -> list[int]:
    """Spatial levels of ``structure`` (counted among the S levels) that sit below its
    first reduction level, except the innermost: ``[2]`` for ``"SSRSRS"``. Tiles of 1
    there make the register tile (the innermost level) accumulate over every
    reduction level without being written back in between."""
    first_r = structure.find("R")
    if first_r < 0:
        return []
    levels = [i for i, c in enumerate(structure) if c == "S"]
    return [n for n, pos in enumerate(levels[:-1]) if pos > first_r]


def _fold_epilogue(sch: Schedule, copy: BlockRV) -> None:
    """Fold element-wise consumers of the cache's copy-back block into it, one at a
    time (``Y -> relu`` becomes the single store ``C = max(Y_local, 0)``)."""
    while True:
        readers = _readers(sch.func, sch.get(copy))  # type: ignore[arg-type]
        if len(readers) != 1 or not inline_candidate(readers[0], False, ()):
            return
        try:
            sch.reverse_compute_inline(sch.get_block(readers[0].name))
        except ScheduleError:
            return


# ---------------------------------------------------------------------------
# parallel / vectorize / unroll


def default_cores() -> int:
    """CPU cores this process may run on (``os.sched_getaffinity`` where available).

    >>> default_cores() >= 1
    True
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _parallel_chain(nest: For, max_extent: int, cores: int, vector_extent: int) -> list[For]:
    """Outer loops of ``nest`` to fuse into one parallel loop: directly nested, serial,
    unannotated and data-parallel, taken while their product stays within
    ``max_extent`` (or is still below ``cores``), stopping at a loop that will be
    vectorized."""
    chain: list[For] = []
    product = 1
    loop = nest
    while isinstance(loop, For):
        if loop.kind != "serial" or loop.annotations or not _is_data_parallel(loop):
            break
        if _vectorizable(loop, vector_extent):  # keep a block's vector loop for SIMD
            break
        if product * loop.extent > max_extent and product >= cores:
            break
        chain.append(loop)
        product *= loop.extent
        loop = loop.body  # type: ignore[assignment]
    return chain


def _vectorizable(loop: For, max_extent: int) -> bool:
    """``loop`` directly holds a block, is serial, data-parallel, of extent 2 to
    ``max_extent``, and walks only the last dimension of the block's store."""
    block = loop.body
    if not isinstance(block, Block) or not isinstance(block.body, BufferStore):
        return False
    if loop.kind != "serial" or not 1 < loop.extent <= max_extent or not block.body.indices:
        return False
    if not _is_data_parallel(loop):
        return False
    binding = dict(zip((iv.var for iv in block.iter_vars), block.iter_values, strict=True))

    def walks(index) -> bool:
        return any(uses_var(binding.get(v, v), loop.loop_var) for v in expr_vars(index))

    *outer, last = block.body.indices
    return walks(last) and not any(walks(i) for i in outer)


def parallel_vectorize_unroll(
    sch: Schedule,
    block: BlockRV,
    max_jobs_per_core: int = 16,
    max_vector_extent: int = 64,
    unroll_max_steps: Sequence[int] = (0, 16, 64, 256),
    num_cores: int | None = None,
) -> bool:
    """Parallelize, vectorize and unroll every loop nest directly under ``block``
    (normally the root block), as MetaSchedule's ``ParallelizeVectorizeUnroll`` rule
    and its postprocessor do together:

    * parallel: the outer data-parallel loops of each nest are fused into one
      ``parallel`` loop of at most ``num_cores * max_jobs_per_core`` iterations (more
      only if a single loop already exceeds it);
    * vectorize: each block's innermost loop, if it is data-parallel, 2 to
      ``max_vector_extent`` long and walks the last dimension of the block's store;
    * unroll: one budget is sampled from ``unroll_max_steps`` (``sample_categorical``)
      and put on each nest's outer loop as ``pragma_auto_unroll_max_step``: the C
      backend unrolls the serial loops inside whose whole body runs at most that many
      steps. The annotation's value is the sampled handle, so changing the decision
      changes the budget on replay. The largest default budget is 256 where
      MetaSchedule has 512: with gcc, 512-step unrolls of a tiled matmul (a whole
      reduction, or many copies of a vector loop) take up to 25 s each to compile;
      with 256 the 32 samples of the default space at 512^3 compile in 6 s instead of
      39 s, and the search finds schedules as fast (128^3 and 512^3, 64 trials).

    ``num_cores`` defaults to :func:`default_cores`. Returns False if ``block`` holds no
    loop nest.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.elementwise_chain(64, 8), seed=0)
    >>> parallel_vectorize_unroll(sch, sch.get_block("root"), num_cores=2)
    True
    >>> print(sch.trace.lines()[-1])  # doctest: +ELLIPSIS
    sch.annotate(block_or_loop=l..., ann_key="pragma_auto_unroll_max_step", ann_val=v...)
    """
    root: Block = sch.get(block)  # type: ignore[assignment]
    body = root.body.stmts if isinstance(root.body, SeqStmt) else (root.body,)
    nests = [s for s in body if isinstance(s, For)]
    if not nests:
        return False
    cores = num_cores if num_cores is not None else default_cores()
    max_parallel = max(cores * max_jobs_per_core, 1)
    plans = []  # per nest: (first block, loops to fuse, {block: loop to vectorize})
    for nest in nests:
        chain = _parallel_chain(nest, max_parallel, cores, max_vector_extent)
        vectorize = {
            s.body.name: s.loop_var  # type: ignore[union-attr]
            for s in iter_stmts(nest, enter_blocks=False)
            if isinstance(s, For) and s not in chain and _vectorizable(s, max_vector_extent)
        }
        first = next(iter_blocks(nest)).name
        plans.append((first, [lp.loop_var for lp in chain], vectorize))
    unroll = None
    if unroll_max_steps:
        steps = list(unroll_max_steps)
        unroll = sch.sample_categorical(steps, [1.0] * len(steps))
    for first, chain_vars, vectorize in plans:
        handles = _loop_handles(sch, [first, *vectorize])
        for name, var in vectorize.items():
            sch.vectorize(handles[name][var])
        first_loops = handles[first]
        loops = [first_loops[v] for v in chain_vars] or [next(iter(first_loops.values()))]
        outer = sch.fuse(*loops) if len(loops) > 1 else loops[0]
        if chain_vars:
            sch.parallel(outer)
        if unroll is not None:
            sch.annotate(outer, AUTO_UNROLL_KEY, unroll)
    return True


def _loop_handles(sch: Schedule, block_names: list[str]) -> dict[str, dict[Var, LoopRV]]:
    """Handles to the loops above each block, by loop variable (outermost first); one
    ``get_block`` + ``get_loops`` per block."""
    out: dict[str, dict[Var, LoopRV]] = {}
    for name in dict.fromkeys(block_names):
        loops = sch.get_loops(sch.get_block(name))
        out[name] = {sch.get(lp).loop_var: lp for lp in loops}  # type: ignore[union-attr]
    return out


# ---------------------------------------------------------------------------
# compute location


def compute_location_candidate(func: PrimFunc, block_name: str) -> bool:
    """Does :func:`random_compute_location` apply to block ``block_name`` of ``func``?
    It must sit under a loop nest of its own directly in the root block, not be tiled
    by :func:`multi_level_tiling`, and have a reader.

    >>> import workbench as wb
    >>> func = wb.workloads.softmax(8, 8)
    >>> [compute_location_candidate(func, n) for n in ("max", "exp", "sum", "norm")]
    [True, True, True, False]
    """
    path = [s for s in block_path(func, block_name) or () if not isinstance(s, SeqStmt)]
    if len(path) < 3 or not isinstance(path[1], For):
        return False  # not under a loop directly in the root block
    if any(isinstance(s, Block) for s in path[1:-1]):
        return False  # nested in another block
    if sum(1 for _ in iter_blocks(path[1])) != 1:
        return False  # shares its loop nest with other blocks
    block: Block = path[-1]  # type: ignore[assignment]
    return not _tiled(block) and bool(_readers(func, block))


def random_compute_location(sch: Schedule, block: BlockRV) -> bool:
    """Compute producer ``block`` at a sampled loop of its consumers (MetaSchedule's
    ``RandomComputeLocation``): ``sample_compute_location`` chooses among the legal
    loops, "stay at the root" and "inline", and ``compute_at`` follows the handle.
    Returns False, changing nothing, unless :func:`compute_location_candidate`.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.softmax(8, 8), seed=0)
    >>> random_compute_location(sch, sch.get_block("exp"))
    True
    >>> print(sch.trace.lines()[-1])
    sch.compute_at(block=b0, loop=l1, preserve_unit_loops=True, index=-1)
    """
    if not compute_location_candidate(sch.func, sch.get(block).name):  # type: ignore[union-attr]
        return False
    loc = sch.sample_compute_location(block)
    sch.compute_at(block, loc, preserve_unit_loops=True)
    return True
