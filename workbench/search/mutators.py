"""Mutators: change one sampled decision of a trace, as MetaSchedule's mutators do.

A trace's sampling instructions (``sample_perfect_tile``, ``sample_categorical``,
``sample_compute_location``) carry the decisions that make a schedule; everything else
in the trace is fixed by the design space. A mutator picks one of those instructions
and proposes another legal decision for it; :meth:`Trace.with_decision` makes the new
trace, which the search replays on a fresh schedule (a replay that fails is discarded).

* :func:`mutate_tile_size` moves a factor from one tile level to another (TVM's
  ``MutateTileSize``): the tiles still multiply to the loop's extent and the innermost
  stays within ``max_innermost_factor``.
* :func:`mutate_categorical` picks another candidate with a non-zero probability
  (``MutateUnroll`` / ``MutateParallel`` in TVM, for any categorical choice).
* :func:`mutate_compute_location` picks another legal compute location, found by
  replaying the trace up to that instruction (``MutateComputeLocation``).

>>> import random, workbench as wb
>>> sch = wb.Schedule(wb.workloads.matmul(64, 64, 64), seed=0)
>>> i, j, k = sch.get_loops(sch.get_block("C"))
>>> tiles = sch.sample_perfect_tile(j, n=2, decision=[8, 8])
>>> _ = sch.split(j, factors=tiles)
>>> new = mutate_tile_size(sch.trace, 2, random.Random(0))
>>> new != (8, 8) and new[0] * new[1] == 64
True
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..ir import IRModule, PrimFunc
from ..schedule import Schedule, ScheduleError, Trace
from ..schedule.primitives.sampling import (
    compute_location_candidates,
    divisors,
    perfect_tilings,
)

__all__ = [
    "DEFAULT_WEIGHTS",
    "Mutation",
    "mutate",
    "mutate_categorical",
    "mutate_compute_location",
    "mutate_tile_size",
    "sampling_steps",
]

#: How often each kind of decision is chosen for mutation (relative weights, among the
#: kinds the trace has). Tile sizes dominate, as in MetaSchedule's default mutators.
DEFAULT_WEIGHTS: dict[str, float] = {
    "SamplePerfectTile": 0.7,
    "SampleCategorical": 0.2,
    "SampleComputeLocation": 0.1,
}


@dataclass(frozen=True)
class Mutation:
    """One decision change: instruction ``index`` of kind ``kind`` went from ``old`` to
    ``new``."""

    index: int
    kind: str
    old: Any
    new: Any


def sampling_steps(trace: Trace) -> list[int]:
    """Indices of the instructions that carry a decision (the trace's genome).

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16), seed=0)
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> _ = sch.sample_perfect_tile(j, n=2)
    >>> sampling_steps(sch.trace)
    [2]
    """
    return [i for i, inst in enumerate(trace.insts) if inst.decision is not None]


def mutate_tile_size(trace: Trace, index: int, rng: random.Random) -> tuple[int, ...] | None:
    """A different tiling for the ``sample_perfect_tile`` at ``index``, or None when the
    loop has no other tiling.

    Like TVM's ``MutateTileSize``: pick a level whose tile is > 1, divide it by one of
    its divisors ``d > 1`` and multiply another level by ``d``; the product (the loop's
    extent) is unchanged and a move that would push the innermost tile over
    ``max_innermost_factor`` is not taken. If no such move exists after a few draws, a
    different tiling is drawn uniformly.

    >>> import random, workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16), seed=0)
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> _ = sch.sample_perfect_tile(k, n=2, max_innermost_factor=4, decision=[4, 4])
    >>> sorted({mutate_tile_size(sch.trace, 2, random.Random(s)) for s in range(20)})
    [(8, 2), (16, 1)]
    """
    inst = trace.insts[index]
    if inst.kind != "SamplePerfectTile":
        raise ValueError(f"instruction {index} is {inst.kind}, not SamplePerfectTile")
    tiles = list(inst.decision)
    n = len(tiles)
    limit = inst.arg("max_innermost_factor")
    limit = math.prod(tiles) if limit == -1 else limit
    if n < 2 or math.prod(tiles) < 2:  # as TVM: nothing to move (a symbolic loop: [-1, 1])
        return None
    for _ in range(8):
        src = rng.choice([i for i, t in enumerate(tiles) if t > 1] or [0])
        if tiles[src] == 1:
            break
        dst = rng.choice([i for i in range(n) if i != src])
        d = rng.choice(divisors(tiles[src])[1:])
        new = list(tiles)
        new[src] //= d
        new[dst] *= d
        if new[-1] <= limit:
            return tuple(new)
    others = [t for t in perfect_tilings(math.prod(tiles), n, limit) if t != tiles]
    return tuple(rng.choice(others)) if others else None


def mutate_categorical(trace: Trace, index: int, rng: random.Random) -> int | None:
    """Another index (with a non-zero probability) for the ``sample_categorical`` at
    ``index``, drawn uniformly; None when there is no other.

    >>> import random, workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16), seed=0)
    >>> _ = sch.sample_categorical([0, 16, 64], [1, 1, 0], decision=0)
    >>> mutate_categorical(sch.trace, 0, random.Random(0))
    1
    """
    inst = trace.insts[index]
    if inst.kind != "SampleCategorical":
        raise ValueError(f"instruction {index} is {inst.kind}, not SampleCategorical")
    probs = inst.arg("probs")
    others = [i for i, p in enumerate(probs) if p > 0 and i != inst.decision]
    return rng.choice(others) if others else None


def _replay_prefix(func: PrimFunc | IRModule, trace: Trace, index: int) -> Schedule:
    sch = Schedule(func)
    Trace(trace.insts[:index]).apply_to_schedule(sch)
    return sch


def mutate_compute_location(
    trace: Trace, index: int, rng: random.Random, func: PrimFunc | IRModule
) -> int | None:
    """Another legal decision for the ``sample_compute_location`` at ``index``: the
    trace is replayed up to that instruction on ``func`` and the block's candidate
    locations listed (``-2`` inline, ``-1`` root, ``i`` a loop); one other than the
    current is drawn uniformly. None when there is no other (or the prefix no longer
    replays).

    >>> import random, workbench as wb
    >>> func = wb.workloads.mm_relu(32, 32, 32)
    >>> sch = wb.Schedule(func, seed=0)
    >>> _ = sch.sample_compute_location(sch.get_block("Y"), decision=-1)
    >>> mutate_compute_location(sch.trace, 1, random.Random(0), func) in (-2, 0, 1)
    True
    """
    inst = trace.insts[index]
    if inst.kind != "SampleComputeLocation":
        raise ValueError(f"instruction {index} is {inst.kind}, not SampleComputeLocation")
    block_rv = inst.arg("block")
    try:
        sch = _replay_prefix(func, trace, index)
    except ScheduleError:
        return None
    # the replayed trace has the same instructions in the same order: find the
    # instruction that produced the block handle and take its counterpart
    new_rv = None
    for step, old in enumerate(trace.insts[:index]):
        if block_rv in old.outputs:
            new_rv = sch.trace.insts[step].outputs[old.outputs.index(block_rv)]
            break
    if new_rv is None:
        return None
    block = sch.get(new_rv)
    decisions = [d for d, _ in compute_location_candidates(sch.func, block.name)]
    others = [d for d in decisions if d != inst.decision]
    return rng.choice(others) if others else None


_MUTATORS: dict[str, Callable[..., Any]] = {
    "SamplePerfectTile": lambda trace, i, rng, func: mutate_tile_size(trace, i, rng),
    "SampleCategorical": lambda trace, i, rng, func: mutate_categorical(trace, i, rng),
    "SampleComputeLocation": mutate_compute_location,
}


def mutate(
    trace: Trace,
    func: PrimFunc | IRModule,
    rng: random.Random,
    weights: dict[str, float] | None = None,
    steps: Sequence[int] | None = None,
) -> tuple[Trace, Mutation] | None:
    """Change one decision of ``trace``: choose a kind of decision (by ``weights``,
    :data:`DEFAULT_WEIGHTS` by default, among the kinds present), one instruction of
    that kind, and a new decision for it. Returns the new trace and what changed, or
    None when no decision can change. The new trace is not replayed here: the caller
    replays it and discards it if a later step no longer fits.

    >>> import random, workbench as wb
    >>> func = wb.workloads.matmul(64, 64, 64)
    >>> sch = wb.Schedule(func, seed=1)
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> _ = sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
    >>> new, change = mutate(sch.trace, func, random.Random(0))
    >>> change.kind, change.old != change.new
    ('SamplePerfectTile', True)
    """
    weights = DEFAULT_WEIGHTS if weights is None else weights
    steps = sampling_steps(trace) if steps is None else list(steps)
    by_kind: dict[str, list[int]] = {}
    for i in steps:
        kind = trace.insts[i].kind
        if weights.get(kind, 0) > 0:
            by_kind.setdefault(kind, []).append(i)
    kinds = sorted(by_kind)  # sorted: the draw must not depend on dict order
    while kinds:
        kind = rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
        candidates = list(by_kind[kind])
        while candidates:
            i = candidates.pop(rng.randrange(len(candidates)))
            new = _MUTATORS[kind](trace, i, rng, func)
            if new is not None:
                old = trace.insts[i].decision
                return trace.with_decision(i, new), Mutation(i, kind, old, new)
        kinds.remove(kind)
    return None
