"""Affine iterator maps: recognise index expressions as splits and fusions of iteration
variables, check that they cover an iteration space one-to-one, and invert them
(TVM's ``arith::DetectIterMap`` and ``arith::InverseAffineIterMap``, for constant
extents and scales).

A map such as ``[(v1 * 8 + v4) // 16, (v1 * 8 + v4) % 16]`` over ``v1 in [0, 6)``,
``v4 in [0, 8)`` is read as one fused iterator ``f = v1 * 8 + v4`` (extent 48) split
into ``f // 16`` (extent 3) and ``f % 16`` (extent 16). The split pieces tile ``f``
exactly, and ``v1``, ``v4`` tile the fusion, so the map is *bijective*, and its inverse
sends a point ``(d0, d1)`` back to ``v1 = (d0 * 16 + d1) // 8 = d0 * 2 + d1 // 8``,
``v4 = (d0 * 16 + d1) % 8 = d1 % 8``.

Vocabulary (as in TVM):

* a :class:`Mark` is an iterator with an extent: an input variable, or a fused sum;
* a :class:`Split` is ``(mark // lower) % extent * scale``;
* an :class:`IterSum` is a sum of splits plus a base that uses no iterator.

Supported: sums, products by constants, ``//`` and ``%`` by positive constants whose
pieces divide evenly (no padding), negative scales on a lone iterator (``9 - v``).
Anything else makes :func:`detect_iter_map` return ``None``.

>>> import workbench as wb
>>> v1, v4, d0, d1 = (wb.Var(n) for n in ("v1", "v4", "d0", "d1"))
>>> m = detect_iter_map([(v1 * 8 + v4) // 16, (v1 * 8 + v4) % 16], {v1: 6, v4: 8})
>>> inv = inverse_iter_map(m, [d0, d1])
>>> inv[v1], inv[v4]
(d0 * 2 + d1 // 8, d1 % 8)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .expr import Add, Cast, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Sub, Var, const, is_float
from .functor import iter_exprs
from .simplify import Bounds, simplify

__all__ = ["IterMap", "IterSum", "Mark", "Split", "detect_iter_map", "inverse_iter_map"]


@dataclass(eq=False)
class Mark:
    """An iterator over ``[0, extent)``: an input variable or a fused :class:`IterSum`."""

    source: Var | IterSum
    extent: int


@dataclass(eq=False)
class Split:
    """``(mark // lower) % extent * scale``."""

    mark: Mark
    lower: int
    extent: int
    scale: int

    def with_scale(self, scale: int) -> Split:
        return Split(self.mark, self.lower, self.extent, scale)


@dataclass(eq=False)
class IterSum:
    """``sum(args) + base``; ``args`` go from the largest scale to the smallest."""

    args: tuple[Split, ...]
    base: PrimExpr


@dataclass
class IterMap:
    """The result of :func:`detect_iter_map`: one :class:`IterSum` per index."""

    indices: list[IterSum]
    inputs: dict[Var, Mark]


class _Fail(Exception):
    pass


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 0


class _Detector:
    def __init__(self, iters: Mapping[Var, int]):
        self.inputs = {v: Mark(v, int(ext)) for v, ext in iters.items() if int(ext) != 1}
        self.units = {v for v, ext in iters.items() if int(ext) == 1}
        self.fused: dict[tuple, Mark] = {}

    # expressions -> IterSum (or a plain expression without iterators) ---------------
    def rewrite(self, e: PrimExpr):
        if isinstance(e, Var):
            if e in self.inputs:
                m = self.inputs[e]
                return IterSum((Split(m, 1, m.extent, 1),), const(0, e.dtype))
            if e in self.units:
                return const(0, e.dtype)
            return e
        if not any(isinstance(x, Var) and (x in self.inputs or x in self.units)
                   for x in iter_exprs(e)):
            return e
        if isinstance(e, (Add, Sub)):
            a, b = self.rewrite(e.a), self.rewrite(e.b)
            if isinstance(e, Sub):
                b = self._scale(b, -1)
            return self._add(a, b)
        if isinstance(e, Mul):
            a, b = self.rewrite(e.a), self.rewrite(e.b)
            if isinstance(b, IntImm):
                return self._scale(a, b.value)
            if isinstance(a, IntImm):
                return self._scale(b, a.value)
            raise _Fail("product of two expressions")
        if isinstance(e, (FloorDiv, FloorMod)):
            a, b = self.rewrite(e.a), e.b
            if not isinstance(b, IntImm) or b.value <= 0 or not isinstance(a, IterSum):
                raise _Fail("division by a non-constant")
            a = self._preprocess(a)
            if a is None:
                return const(0, e.dtype)
            if isinstance(e, FloorDiv):
                return self._floordiv(a.args[0], a.base, b.value)
            return self._floormod(a.args[0], a.base, b.value)
        if isinstance(e, Cast) and not is_float(e.dtype):
            return self.rewrite(e.value)
        raise _Fail(f"unsupported expression {type(e).__name__}")

    @staticmethod
    def _as_sum(x) -> IterSum:
        return x if isinstance(x, IterSum) else IterSum((), x)

    def _add(self, a, b):
        if not isinstance(a, IterSum) and not isinstance(b, IterSum):
            return simplify(a + b)
        a, b = self._as_sum(a), self._as_sum(b)
        args = list(a.args)
        for s in b.args:
            for k, t in enumerate(args):
                if t.mark is s.mark and t.lower == s.lower and t.extent == s.extent:
                    args[k] = t.with_scale(t.scale + s.scale)
                    break
            else:
                args.append(s)
        args = [s for s in args if s.scale != 0]
        return IterSum(tuple(sorted(args, key=lambda s: -abs(s.scale))), simplify(a.base + b.base))

    def _scale(self, x, c: int):
        if not isinstance(x, IterSum):
            return simplify(x * c)
        if c == 0:
            return const(0, x.base.dtype)
        return IterSum(tuple(s.with_scale(s.scale * c) for s in x.args), simplify(x.base * c))

    def _preprocess(self, s: IterSum) -> IterSum | None:
        if not s.args:
            return None
        if len(s.args) == 1:
            return s
        fused = self.fuse(s)
        if fused is None:
            raise _Fail("dividend is not a single fused iterator")
        return fused

    # fusion ---------------------------------------------------------------------------
    @staticmethod
    def _combine(args: list[Split]) -> list[Split]:
        """Merge ``x // (l*e) * (s*e) + x // l % e * s`` pieces of one mark."""
        changed = True
        while changed:
            changed = False
            for i, a in enumerate(args):
                for j, b in enumerate(args):
                    if i != j and a.mark is b.mark and a.lower == b.lower * b.extent and (
                        a.scale == b.scale * b.extent
                    ):
                        merged = Split(a.mark, b.lower, a.extent * b.extent, b.scale)
                        args = [x for k, x in enumerate(args) if k not in (i, j)] + [merged]
                        changed = True
                        break
                if changed:
                    break
        return args

    def fuse(self, s: IterSum, early_skip: bool = True) -> IterSum | None:
        """``s`` as one split of a fused mark (mixed-radix pieces without gaps)."""
        args = self._combine(list(s.args))
        if len(args) <= 1 and early_skip:
            return IterSum(tuple(args), s.base)
        if not args or any(a.scale <= 0 for a in args):
            return None
        base_scale = min(a.scale for a in args)
        expected, order, left = base_scale, [], list(args)
        while left:
            k = next((k for k, a in enumerate(left) if a.scale == expected), None)
            if k is None:
                return None
            a = left.pop(k)
            order.append(a.with_scale(a.scale // base_scale))
            expected *= a.extent
        order.reverse()  # outermost first
        key = tuple((id(a.mark), a.lower, a.extent, a.scale) for a in order)
        mark = self.fused.get(key)
        if mark is None:
            mark = Mark(IterSum(tuple(order), const(0)), expected // base_scale)
            self.fused[key] = mark
        return IterSum((Split(mark, 1, mark.extent, base_scale),), s.base)

    # division ---------------------------------------------------------------------------
    def _floordiv(self, x: Split, base: PrimExpr, c: int):
        if c == 1:
            return IterSum((x,), base)
        if not isinstance(base, IntImm):
            raise _Fail("symbolic offset in a division")
        b = base.value
        if x.scale != 1:
            if x.scale % c == 0 and b % c == 0:
                return IterSum((x.with_scale(x.scale // c),), const(b // c, base.dtype))
            if c % x.scale == 0 and b % x.scale == 0:
                b, c, x = b // x.scale, c // x.scale, x.with_scale(1)
            else:
                raise _Fail("scale and divisor do not divide each other")
        if b % c:
            raise _Fail("offset would need padding")
        if x.extent % c == 0:
            new = Split(x.mark, x.lower * c, x.extent // c, 1)
        elif x.lower == 1 and x.extent == x.mark.extent:
            new = Split(x.mark, c, -(-x.extent // c), 1)
        else:
            raise _Fail("split does not divide")
        return IterSum((new,), const(b // c, base.dtype))

    def _floormod(self, x: Split, base: PrimExpr, c: int):
        if c == 1:
            return const(0, base.dtype)
        if not isinstance(base, IntImm):
            raise _Fail("symbolic offset in a modulo")
        b = base.value
        scale = x.scale
        if scale != 1:
            if scale % c == 0 and b % c == 0:
                return const(0, base.dtype)
            if c % scale == 0 and b % scale == 0:
                b, c = b // scale, c // scale
            else:
                raise _Fail("scale and divisor do not divide each other")
        if b % c:
            raise _Fail("offset would need padding")
        if x.extent <= c:
            return IterSum((x.with_scale(scale),), const(0, base.dtype))
        if x.extent % c == 0 or (x.lower == 1 and x.extent == x.mark.extent):
            # a non-dividing piece of a whole iterator is kept; a bijective check then
            # finds that the pieces do not tile it
            return IterSum((Split(x.mark, x.lower, c, scale),), const(0, base.dtype))
        raise _Fail("split does not divide")

    # checks -----------------------------------------------------------------------------
    def check_bijective(self, sums: list[IterSum]) -> bool:
        splits: dict[int, tuple[Mark, list[Split]]] = {}

        def collect(s: IterSum) -> None:
            for a in s.args:
                entry = splits.setdefault(id(a.mark), (a.mark, []))
                first = not entry[1]
                entry[1].append(a)
                if first and isinstance(a.mark.source, IterSum):
                    collect(a.mark.source)

        for s in sums:
            collect(s)
        for mark, pieces in splits.values():
            expected, used = 1, [False] * len(pieces)
            for _ in pieces:
                k = next((k for k, p in enumerate(pieces) if not used[k] and p.lower == expected),
                         None)
                if k is None:
                    return False
                used[k] = True
                expected = pieces[k].lower * pieces[k].extent
            if expected != mark.extent:
                return False
        seen = {id(m) for m, _ in splits.values()}
        return all(id(m) in seen for m in self.inputs.values())


def detect_iter_map(
    indices: Sequence[PrimExpr], iters: Mapping[Var, int], bijective: bool = True
) -> IterMap | None:
    """Read ``indices`` as an affine map of the iterators ``iters`` (variable -> extent,
    each from 0). With ``bijective`` the map must visit every point of the iteration space
    exactly once (every iterator used; pieces of each iterator tiling it); otherwise only
    the shape is checked. ``None`` if the indices are not such a map."""
    det = _Detector(iters)
    ranges = {v: (0, int(ext) - 1) for v, ext in iters.items()}
    sums = []
    try:
        for e in indices:
            r = det.rewrite(simplify(e, ranges))
            if isinstance(r, IterSum):
                fused = det.fuse(r, early_skip=True)
                if fused is None:
                    return None
                r = fused
            else:
                r = IterSum((), r)
            sums.append(r)
    except _Fail:
        return None
    if bijective and not det.check_bijective(sums):
        return None
    return IterMap(sums, det.inputs)


def inverse_iter_map(
    m: IterMap, outputs: Sequence[PrimExpr], bounds: Bounds | None = None
) -> dict[Var, PrimExpr] | None:
    """The input iterators as expressions of the index values ``outputs`` (one per index
    of the map), by propagating each value back through the splits and fusions. Only the
    iterators the map uses appear. ``None`` where the map is not invertible this way (a
    lone iterator scaled by something other than 1 or -1)."""
    # parents before children: reverse of a post-order walk
    order: list[object] = []
    seen: set[int] = set()

    def visit(node) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, IterSum):
            for a in node.args:
                visit(a)
        elif isinstance(node.mark.source, IterSum):
            visit(node.mark.source)
        order.append(node)

    for s in m.indices:
        visit(s)
    order.reverse()
    # contributions per node as (weight, expr), summed largest weight first so that
    # ``v = d0 * 16 + d1`` reads outer piece first, as TVM prints it
    acc: dict[int, list[tuple[int, PrimExpr]]] = {}
    for s, out in zip(m.indices, outputs, strict=True):
        acc[id(s)] = [(0, out)]
    result: dict[Var, list[tuple[int, PrimExpr]]] = {}
    for node in order:
        value = _total(acc.get(id(node)))
        if value is None:
            continue
        if isinstance(node, IterSum):
            if not node.args:
                continue
            rest = value - node.base
            if len(node.args) == 1:
                a = node.args[0]
                if abs(a.scale) != 1:
                    return None
                _accumulate(acc, a, 0, rest * a.scale)
                continue
            expected = node.args[-1].scale
            for a in reversed(node.args):
                if a.scale != expected:
                    return None
                expected *= a.extent
            for k in range(len(node.args) - 1, -1, -1):
                a = node.args[k]
                piece = rest // a.scale if a.scale != 1 else rest
                if k > 0:
                    piece = piece % a.extent
                _accumulate(acc, a, 0, piece)
        else:
            contribution = value * node.lower if node.lower != 1 else value
            source = node.mark.source
            if isinstance(source, IterSum):
                _accumulate(acc, source, node.lower, contribution)
            else:
                result.setdefault(source, []).append((node.lower, contribution))
    return {v: simplify(_total(parts), bounds) for v, parts in result.items()}


def _total(parts: list[tuple[int, PrimExpr]] | None) -> PrimExpr | None:
    if not parts:
        return None
    ordered = sorted(parts, key=lambda p: -p[0])
    out = ordered[0][1]
    for _, e in ordered[1:]:
        out = out + e
    return out


def _accumulate(acc: dict, node, weight: int, value: PrimExpr) -> None:
    acc.setdefault(id(node), []).append((weight, value))
