"""Sampling: sample_perfect_tile, sample_categorical, sample_compute_location.

A sampling primitive does not change the IR. It draws a *decision* from the
schedule's random generator (``Schedule(func, seed=...)``), or takes the one it is
given, validates it, and returns the sampled value. The schedule records the
decision in the trace, so replaying the trace reproduces the same schedule, and
:meth:`Trace.with_decision` gives the trace for another choice::

    v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16, decision=[8, 16])
    l6, l7 = sch.split(loop=l2, factors=[v4, v5], preserve_unit_iters=True, ...)

Decisions are TVM's: the list of tile sizes for ``sample_perfect_tile``, the
index into ``candidates`` for ``sample_categorical``, and for
``sample_compute_location`` the position of the chosen loop among the loops above
the block's first consumer, ``-1`` for "leave it at the root" and ``-2`` for
"inline it".

Unlike TVM, which silently repairs a replayed decision that no longer fits (a tile
that stopped dividing, a compute location that is gone), a decision that does not
fit is refused with :class:`InvalidDecisionError` naming the loop or block.

These functions are pure apart from drawing from the ``random.Random`` they are
given; a refusal happens before anything is drawn.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...ir import Block, For, PrimFunc, Var
from ...ir.functor import iter_stmts, uses_var
from ..errors import ScheduleError
from ._common import (
    check_starts_at_zero,
    consumers_of,
    find_block_path,
    find_loop_path,
    scope_blocks,
    scope_of,
)


class InvalidDecisionError(ScheduleError, ValueError):
    """A given decision does not fit the sampling instruction (wrong length, tiles
    that do not multiply to the extent, an index out of range, an illegal location)."""


class InvalidSamplingArgumentError(ScheduleError, ValueError):
    """Bad arguments to a sampling primitive (``n < 1``, negative probabilities...)."""


MAX_TILES = 16  # deeper tilings than this are never useful and would only cost memory


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


# ---------------------------------------------------------------------------
# perfect tiles


def prime_factors(n: int) -> dict[int, int]:
    """``{prime: exponent}`` of ``n >= 1``.

    >>> prime_factors(360)
    {2: 3, 3: 2, 5: 1}
    """
    out: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
        p += 1
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def count_tilings(m: int, k: int) -> int:
    """How many ordered ``k``-tuples of positive integers multiply to ``m``.

    Each prime's exponent is spread over the ``k`` slots independently (stars and
    bars), so the count is a product of binomials.

    >>> count_tilings(128, 2), count_tilings(64, 3), count_tilings(1, 0)
    (8, 28, 1)
    """
    if k == 0:
        return int(m == 1)
    return math.prod(math.comb(e + k - 1, k - 1) for e in prime_factors(m).values())


def divisors(n: int) -> list[int]:
    """All divisors of ``n``, ascending.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    """
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def _limit(extent: int, max_innermost_factor: int) -> int:
    return extent if max_innermost_factor == -1 else max_innermost_factor


def iter_perfect_tilings(extent: int, n: int, max_innermost_factor: int = 16
                         ) -> Iterator[list[int]]:
    """:func:`perfect_tilings` one at a time (there can be very many)."""
    limit = _limit(extent, max_innermost_factor)

    def rec(m: int, k: int) -> Iterator[list[int]]:
        if k == 1:
            if m <= limit:
                yield [m]
            return
        for d in divisors(m):
            for rest in rec(m // d, k - 1):
                yield [d, *rest]

    return rec(extent, n)


def count_perfect_tilings(extent: int, n: int, max_innermost_factor: int = 16) -> int:
    """How many :func:`perfect_tilings` there are, without listing them.

    >>> count_perfect_tilings(4096, 5), count_perfect_tilings(8, 2)
    (1490, 4)
    """
    limit = _limit(extent, max_innermost_factor)
    return sum(count_tilings(extent // d, n - 1) for d in divisors(extent) if d <= limit)


def perfect_tilings(extent: int, n: int, max_innermost_factor: int = 16) -> list[list[int]]:
    """Every ``n``-factor perfect tiling of ``extent`` whose innermost factor is at most
    ``max_innermost_factor`` (``-1``: no limit), in lexicographic order. These are the
    values :func:`draw_perfect_tile` draws from, each with the same probability.

    >>> perfect_tilings(8, 2)
    [[1, 8], [2, 4], [4, 2], [8, 1]]
    >>> perfect_tilings(32, 2, max_innermost_factor=4)
    [[8, 4], [16, 2], [32, 1]]
    """
    return list(iter_perfect_tilings(extent, n, max_innermost_factor))


def draw_perfect_tile(
    rng: random.Random, extent: int, n: int, max_innermost_factor: int = 16
) -> list[int]:
    """Draw one of :func:`perfect_tilings` uniformly at random.

    TVM samples each prime's exponents uniformly and rejects draws whose innermost
    factor is too large; that is uniform over the allowed tilings, and so is this,
    without rejection: the innermost factor ``d`` is drawn with weight
    ``count_tilings(extent // d, n - 1)`` (the number of allowed tilings ending in
    ``d``), then the outer factors uniformly by stars and bars per prime.

    >>> import random
    >>> tile = draw_perfect_tile(random.Random(0), 128, 3)
    >>> math.prod(tile) == 128 and tile[-1] <= 16
    True
    """
    limit = _limit(extent, max_innermost_factor)
    weights = [(d, count_tilings(extent // d, n - 1)) for d in divisors(extent) if d <= limit]
    total = sum(w for _, w in weights)
    if total == 0:
        raise ValueError(f"no {n}-factor tiling of {extent} has innermost <= {limit}")
    r = rng.randrange(total)
    innermost = weights[-1][0]
    for d, w in weights:
        if r < w:
            innermost = d
            break
        r -= w
    outer = [1] * (n - 1)
    for p, e in sorted(prime_factors(extent // innermost).items()):
        # spread e copies of p over the n - 1 outer slots: choose n - 2 bar positions
        # among e + n - 2; the gaps between bars are the exponents
        slots = e + n - 2
        bars = sorted(rng.sample(range(slots), n - 2)) + [slots]
        last = -1
        for i, b in enumerate(bars):
            outer[i] *= p ** (b - last - 1)
            last = b
    return outer + [innermost]


def _check_tile_args(func: PrimFunc, loop: For, n: Any, max_innermost_factor: Any) -> None:
    name = loop.loop_var.name
    if not _is_int(n) or not 1 <= n <= MAX_TILES:
        raise InvalidSamplingArgumentError(
            "sample_perfect_tile",
            f'n must be an integer from 1 to {MAX_TILES} (the number of tiles of loop '
            f'"{name}"), got {n!r}',
            func,
            loops=[loop.loop_var],
        )
    if not _is_int(max_innermost_factor) or not (
        max_innermost_factor == -1 or max_innermost_factor >= 1
    ):
        raise InvalidSamplingArgumentError(
            "sample_perfect_tile",
            f'max_innermost_factor for loop "{name}" must be a positive integer or -1 '
            f"(no limit), got {max_innermost_factor!r}",
            func,
            loops=[loop.loop_var],
        )
    if (n == 1 and max_innermost_factor != -1 and isinstance(loop.extent, int)
            and loop.extent > max_innermost_factor):
        raise InvalidSamplingArgumentError(
            "sample_perfect_tile",
            f'loop "{name}" (extent {loop.extent}) cannot be tiled into 1 tile of at most '
            f"max_innermost_factor={max_innermost_factor}",
            func,
            loops=[loop.loop_var],
        )


def _check_tile_decision(
    func: PrimFunc, loop: For, n: int, max_innermost_factor: int, decision: Any
) -> list[int]:
    name, extent = loop.loop_var.name, loop.extent

    def refuse(why: str) -> InvalidDecisionError:
        return InvalidDecisionError(
            "sample_perfect_tile",
            f'decision {decision!r} for loop "{name}" (extent {extent}, n={n}): {why}',
            func,
            loops=[loop.loop_var],
        )

    if not isinstance(decision, (list, tuple)):
        raise refuse("expected a list of tile sizes")
    tiles = list(decision)
    if len(tiles) != n:
        raise refuse(f"expected {n} tile sizes, got {len(tiles)}")
    if not all(_is_int(t) and t >= 1 for t in tiles):
        raise refuse("tile sizes must be positive integers")
    if math.prod(tiles) != extent:
        raise refuse(f"the tiles multiply to {math.prod(tiles)}, not to the extent {extent}")
    if max_innermost_factor != -1 and tiles[-1] > max_innermost_factor:
        raise refuse(
            f"the innermost tile {tiles[-1]} exceeds max_innermost_factor={max_innermost_factor}"
        )
    return tiles


def sample_perfect_tile(
    func: PrimFunc,
    loop_var: Var,
    n: int,
    max_innermost_factor: int,
    rng: random.Random,
    decision: Sequence[int] | None = None,
) -> list[int]:
    """Tile sizes for loop ``loop_var``: ``n`` positive integers whose product is the
    loop's extent and whose last is at most ``max_innermost_factor`` (``-1``: no
    limit). With ``decision`` given it is validated and returned; otherwise one of
    :func:`perfect_tilings` is drawn uniformly from ``rng``.

    A loop of symbolic extent (``n``) is tiled trivially, as TVM does: ``[-1, 1, ...,
    1]``, where ``-1`` stands for the unknown outer tile (``Schedule.sample_perfect_tile``
    returns ``None`` there, which ``split`` infers); a decision is then ignored.

    >>> import random, workbench as wb
    >>> func = wb.workloads.matmul(128, 128, 128)
    >>> j = func.body.body.body.loop_var
    >>> sample_perfect_tile(func, j, 2, 16, random.Random(0), decision=[8, 16])
    [8, 16]
    """
    loop: For = find_loop_path(func, "sample_perfect_tile", loop_var)[-1]  # type: ignore[assignment]
    check_starts_at_zero(func, "sample_perfect_tile", [loop])
    _check_tile_args(func, loop, n, max_innermost_factor)
    if not isinstance(loop.extent, int):  # TVM's case 1: a loop of non-constant extent
        return [-1] + [1] * (n - 1)
    if decision is not None:
        return _check_tile_decision(func, loop, n, max_innermost_factor, decision)
    return draw_perfect_tile(rng, loop.extent, n, max_innermost_factor)


# ---------------------------------------------------------------------------
# categorical


def sample_categorical(
    candidates: Sequence[int],
    probs: Sequence[float],
    rng: random.Random,
    decision: int | None = None,
) -> tuple[int, tuple[int, ...], tuple[float, ...]]:
    """Draw an index into ``candidates`` with probabilities proportional to ``probs``.

    Returns ``(index, candidates, probs)`` with ``probs`` as floats. ``probs`` need
    not sum to 1, but must be non-negative with a positive sum. With ``decision``
    (an index, as in TVM) given, it is validated and used.

    >>> import random
    >>> sample_categorical([0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25], random.Random(0), 2)
    (2, (0, 16, 64, 512), (0.25, 0.25, 0.25, 0.25))
    """

    def refuse(why: str) -> InvalidSamplingArgumentError:
        return InvalidSamplingArgumentError(
            "sample_categorical", f"candidates {candidates!r} with probs {probs!r}: {why}"
        )

    if not isinstance(candidates, (list, tuple)) or not isinstance(probs, (list, tuple)):
        raise refuse("candidates and probs must be lists")
    if not candidates:
        raise refuse("there must be at least one candidate")
    if not all(_is_int(c) for c in candidates):
        raise refuse("candidates must be integers")
    if len(probs) != len(candidates):
        raise refuse(f"{len(candidates)} candidates but {len(probs)} probabilities")
    if not all(
        isinstance(p, (int, float)) and not isinstance(p, bool) and math.isfinite(p) and p >= 0
        for p in probs
    ):
        raise refuse("probabilities must be finite non-negative numbers")
    weights = tuple(float(p) for p in probs)
    total = sum(weights)
    if total <= 0:
        raise refuse("the probabilities sum to 0")
    if decision is not None:
        if not _is_int(decision) or not 0 <= decision < len(candidates):
            raise InvalidDecisionError(
                "sample_categorical",
                f"decision {decision!r} is not an index into candidates {list(candidates)} "
                f"(0 to {len(candidates) - 1})",
            )
        return decision, tuple(candidates), weights
    r = rng.random() * total
    index = max(i for i, w in enumerate(weights) if w > 0)  # fallback for rounding at the top
    for i, w in enumerate(weights):
        if w > 0 and r < w:
            index = i
            break
        r -= w
    return index, tuple(candidates), weights


# ---------------------------------------------------------------------------
# compute location


@dataclass(frozen=True)
class LocationMark:
    """The two compute locations that are not loops. A :class:`LoopRV` returned by
    ``sample_compute_location`` refers to one of these when the decision is ``-1``
    (:data:`COMPUTE_ROOT`: leave the block where it is) or ``-2``
    (:data:`COMPUTE_INLINE`: inline it). TVM returns its special root/inline loop
    handles there; ``compute_at`` given such a handle does nothing (root) or inlines
    the block (inline), as TVM's does."""

    name: str
    decision: int

    def __repr__(self) -> str:
        return f"<compute {self.name}>"


COMPUTE_ROOT = LocationMark("root", -1)
COMPUTE_INLINE = LocationMark("inline", -2)


def location_mark(target: Any) -> LocationMark | None:
    """The :class:`LocationMark` a sampled location handle resolves to, or None for a
    real loop variable (for ``compute_at`` to special-case root and inline)."""
    return target if isinstance(target, LocationMark) else None


def _scope_loops(func: PrimFunc, block_name: str) -> list[For]:
    """Loops above ``block_name`` inside its scope block, outermost first."""
    loops: list[For] = []
    for s in find_block_path(func, "sample_compute_location", block_name)[:-1]:
        if isinstance(s, Block):
            loops = []
        elif isinstance(s, For):
            loops.append(s)
    return loops


def _loop_iter_type(loop: For) -> str:
    """``"S"`` if the blocks under ``loop`` use its variable only in spatial bindings
    (or not at all), ``"R"`` if only in reduction bindings, ``"O"`` if in both."""
    kinds = set()
    for s in iter_stmts(loop.body, enter_blocks=False):
        if isinstance(s, Block):
            for iv, value in zip(s.iter_vars, s.iter_values, strict=True):
                if uses_var(value, loop.loop_var):
                    kinds.add(iv.kind)
    if "R" in kinds:
        return "O" if "S" in kinds else "R"
    return "S"


def compute_location_candidates(
    func: PrimFunc, block_name: str
) -> list[tuple[int, Var | LocationMark]]:
    """The locations ``sample_compute_location`` chooses among, as
    ``(decision, loop variable or mark)`` pairs in decision order.

    As in TVM: ``-2`` (inline) when ``compute_inline`` would accept the block, ``-1``
    (root) always, then loop ``i`` (its position among the loops above the first
    consumer) for each loop shared by all consumers where ``compute_at`` would
    accept the block. Unit loops are skipped, and so are data-parallel loops below
    a reduction loop and reduction loops below the last data-parallel one (they
    cannot help performance). Legality is decided by running ``compute_at`` (and
    ``compute_inline``) on the function and catching :class:`ScheduleError`.
    """
    from .compute_at import compute_at  # the compute-location family
    from .compute_inline import compute_inline

    path = find_block_path(func, "sample_compute_location", block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    out: list[tuple[int, Var | LocationMark]] = []
    try:
        compute_inline(func, block_name)
        out.append((-2, COMPUTE_INLINE))
    except ScheduleError:
        pass
    out.append((-1, COMPUTE_ROOT))
    consumers = consumers_of(block, scope_blocks(scope_of(path)))
    if not consumers:
        return out
    chains = [_scope_loops(func, c.name) for c in consumers]
    common: list[For] = []
    for loops in zip(*chains, strict=False):
        if any(lp is not loops[0] for lp in loops):
            break
        common.append(loops[0])
    types = [_loop_iter_type(lp) for lp in common]
    last_spatial = max((i for i, t in enumerate(types) if t == "S"), default=-1)
    seen_reduce = False
    for i, loop in enumerate(common):
        if loop.extent == 1:
            continue
        if types[i] == "S":
            if seen_reduce:
                break
        else:
            seen_reduce = True
            if i > last_spatial:
                break
        try:
            compute_at(func, block_name, loop.loop_var, True, -1)
        except ScheduleError:
            continue
        out.append((i, loop.loop_var))
    return out


def _describe(decision: int, target: Var | LocationMark) -> str:
    if isinstance(target, LocationMark):
        return f"{decision} ({target.name})"
    return f'{decision} (loop "{target.name}")'


def sample_compute_location(
    func: PrimFunc,
    block_name: str,
    rng: random.Random,
    decision: int | None = None,
) -> tuple[int, Var | LocationMark]:
    """Choose where block ``block_name`` could be computed: ``(decision, target)``
    where ``target`` is a loop variable, :data:`COMPUTE_ROOT` or
    :data:`COMPUTE_INLINE`. Drawn uniformly among
    :func:`compute_location_candidates`; a given ``decision`` must be one of them.
    """
    candidates = compute_location_candidates(func, block_name)
    if decision is None:
        return candidates[rng.randrange(len(candidates))]
    for d, target in candidates:
        if _is_int(decision) and d == decision:
            return d, target
    legal = ", ".join(_describe(d, t) for d, t in candidates)
    raise InvalidDecisionError(
        "sample_compute_location",
        f'decision {decision!r} is not a compute location of block "{block_name}"; '
        f"the candidates are {legal}",
        func,
        blocks=[block_name],
    )
