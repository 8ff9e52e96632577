"""Affine block bindings, decided as TVM's iter-map detection decides them.

A block's bindings are *affine* over some loops when, together with the block's
predicate, they can be written as independent pieces ("splits") of those loops:
``vi = i``, ``vj = j_0 * 4 + j_1``, ``vk = f // 16``, ``vl = f % 16`` with ``f`` a fused
loop, ``vi = i_0 * 10 + i_1`` under ``T.where(i_0 * 10 + i_1 < 128)``. Loops outside
the given ones act as constants (``vi = i + ax0`` is affine over ``ax0`` alone). TVM
checks this (``DetectIterMap`` at its *surjective* level, plus "the innermost piece has
scale 1") before ``reorder``, and for the reduction blocks under a loop to parallelize.

What is refused, as in TVM:

* products of loop variables (``i * j``, ``i * i``), anything but ``+ - *const``,
  ``// const`` and ``% const`` (``min``, a buffer load...);
* a scaled innermost piece (``vl = l * 16``, ``2 * i + 1``);
* gaps (``i * 8 + j`` with ``j`` of extent 4): overlaps are allowed (``i * 2 + j``);
* a loop variable (or the same piece of a fused one) used by two bindings
  (``vi = i, vj = i``), and ``i // 3`` together with ``i % 3`` when 3 does not divide
  the extent;
* a predicate on loops that the bindings do not use as a whole (``T.where(i * 4 + j <
  30)`` with ``vi = i, vj = j``; ``T.where(j < 3)`` with ``v = i * 4 + j``).

Loops of symbolic extent are not analysed: bindings over them count as affine.
(:mod:`workbench.ir.iter_map` is the bijective detection with its inverse, used where a
map must be inverted -- compute_at, compute_inline; this module is the surjective check
with predicates that reorder and the loop kinds ask for.)

>>> import workbench as wb
>>> i, j = wb.Var("i"), wb.Var("j")
>>> affine_problem([i * 4 + j], {i: 8, j: 4}) is None
True
>>> affine_problem([i, i], {i: 8})
'`i` is used by more than one binding'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ...ir import (
    GE,
    GT,
    LE,
    LT,
    And,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    PrimExpr,
    Var,
)
from ...ir.functor import iter_exprs
from ...ir.simplify import _linear, simplify


class _NotAffine(Exception):
    """Raised inside the analysis; ``affine_problem`` turns it into its reason."""


@dataclass(eq=False)
class _Mark:
    """An iterator over ``[0, extent)``: a loop variable, or a fusion of splits."""

    extent: int
    var: Var | None = None
    # fused marks: (split, place value) from the innermost piece outwards
    parts: tuple[tuple[_Split, int], ...] = ()
    padded_uses: int = 0


@dataclass(frozen=True, eq=False)
class _Split:
    """``(mark // lower) % extent * scale``."""

    mark: _Mark
    lower: int
    extent: int
    scale: int
    padded: bool = False

    def key(self) -> tuple:
        return (id(self.mark), self.lower, self.extent)


@dataclass
class _Constraint:
    """``sum of splits < bound`` from the predicate: the splits (innermost first) must
    appear together in a binding, as one iterator ``mark`` of ``bound`` values."""

    splits: list[_Split]
    mark: _Mark


@dataclass
class _State:
    domain: dict[Var, int]
    marks: dict[Var, _Mark] = field(default_factory=dict)
    constraints: list[_Constraint] = field(default_factory=list)
    fused: dict[tuple, _Mark] = field(default_factory=dict)
    used: list[_Split] = field(default_factory=list)

    def leaf(self, v: Var) -> _Mark:
        if v not in self.marks:
            self.marks[v] = _Mark(self.domain[v], var=v)
        return self.marks[v]


def affine_problem(
    values: list[PrimExpr] | tuple[PrimExpr, ...],
    domain: dict[Var, int | PrimExpr],
    predicate: PrimExpr | None = None,
) -> str | None:
    """Why ``values`` are not an affine map of the loops in ``domain`` (loop variable ->
    extent, or ``(min, extent)`` for a loop over ``[min, min + extent)``, see
    :func:`loop_domain`) under ``predicate``, or ``None`` when they are. Variables not in
    ``domain`` are constants.

    >>> import workbench as wb
    >>> i, j, n = wb.Var("i"), wb.Var("j"), wb.Var("n")
    >>> affine_problem([i * 10 + j], {i: 13, j: 10}, i * 10 + j < 128) is None
    True
    >>> affine_problem([i + n, j * 2], {i: 4, j: 4})
    '`j * 2` steps by 2, not by 1'
    """
    shift = {v: v + e[0] for v, e in domain.items() if isinstance(e, tuple) and e[0]}
    domain = {v: e[1] if isinstance(e, tuple) else e for v, e in domain.items()}
    if not domain or any(not isinstance(e, int) for e in domain.values()):
        return None
    # a unit loop is a constant (its only value), as in TVM's iter-map analysis: a
    # predicate ``x0 * 1024 + x1 < 512`` with ``x0`` of extent 1 bounds ``x1`` alone
    unit = {v: IntImm(0, v.dtype) for v, e in domain.items() if e == 1}
    shift.update(unit)
    domain = {v: e for v, e in domain.items() if v not in unit}
    if shift:  # a loop over [min, min + extent) is min plus an iterator from 0
        from ...ir.functor import substitute

        values = [simplify(substitute(v, shift)) for v in values]
        predicate = None if predicate is None else simplify(substitute(predicate, shift))
    used = set()
    for v in values:
        used |= {x for x in iter_exprs(v) if isinstance(x, Var) and x in domain}
    if predicate is not None:
        used |= {x for x in iter_exprs(predicate) if isinstance(x, Var) and x in domain}
    if not used:
        return None
    state = _State({v: e for v, e in domain.items() if isinstance(e, int)})
    try:
        if predicate is not None:
            for c in _conjuncts(predicate):
                _add_constraint(state, c)
        for v in values:
            splits, _ = _normalize(state, v)
            if splits:
                fused = _fuse(state, splits, top=True)
                if fused.scale != 1:
                    raise _NotAffine(f"`{v}` steps by {fused.scale}, not by 1")
        _check_independent(state)
    except _NotAffine as e:
        return str(e)
    return None


def loop_domain(loops) -> dict[Var, int | PrimExpr | tuple[int, int]]:
    """The domain :func:`affine_problem` takes for ``loops`` (``For`` nodes): loop
    variable -> extent, or ``(min, extent)`` where the loop does not start at 0."""
    return {lp.loop_var: (lp.min, lp.extent) if lp.min else lp.extent for lp in loops}


def _describe(s: _Split) -> str:
    if s.mark.var is not None and s.lower == 1 and s.extent == s.mark.extent:
        return f"`{s.mark.var.name}`"
    return "a fused loop" if s.mark.var is None else f"a piece of `{s.mark.var.name}`"


# ---------------------------------------------------------------------------
# predicate


def _conjuncts(e: PrimExpr) -> list[PrimExpr]:
    if isinstance(e, And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _has_domain_var(state: _State, e: PrimExpr) -> bool:
    return any(isinstance(x, Var) and x in state.domain for x in iter_exprs(e))


def _add_constraint(state: _State, c: PrimExpr) -> None:
    if isinstance(c, IntImm) or not _has_domain_var(state, c):
        return
    upper: int | None = None
    if isinstance(c, (LT, LE)):
        lhs, rhs, strict, is_upper = c.a, c.b, isinstance(c, LT), True
    elif isinstance(c, (GT, GE)):
        lhs, rhs, strict, is_upper = c.a, c.b, isinstance(c, GT), False
    else:
        raise _NotAffine(f"the predicate `{c}` is not a bound on the loops")
    if _has_domain_var(state, rhs):  # put the loops on the left
        lhs, rhs, is_upper = rhs, lhs, not is_upper
        if _has_domain_var(state, rhs):
            raise _NotAffine(f"the predicate `{c}` compares loops with loops")
    bound = simplify(rhs)
    if not isinstance(bound, IntImm):
        raise _NotAffine(f"the predicate `{c}` has a bound that is not a constant")
    splits, base = _normalize(state, lhs)
    if not isinstance(base, IntImm) or not splits:
        raise _NotAffine(f"the predicate `{c}` is not a bound on the loops")
    if is_upper:
        upper = bound.value - base.value + (0 if strict else 1)
    fused = _fuse(state, splits, top=False, constrained=False)
    if fused.scale != 1 or fused.lower != 1:
        raise _NotAffine(f"the predicate `{c}` is not a bound on the loops")
    extent = fused.mark.extent if upper is None else max(1, min(upper, fused.mark.extent))
    ordered = sorted(splits, key=lambda s: s.scale)
    mark = _Mark(extent, parts=tuple((s, s.scale) for s in ordered))
    state.constraints.append(_Constraint(ordered, mark))


# ---------------------------------------------------------------------------
# normal form: a sum of splits plus a base free of the loops


def _normalize(state: _State, e: PrimExpr) -> tuple[list[_Split], PrimExpr]:
    terms, cst = _linear(simplify(e))
    splits: list[_Split] = []
    base: PrimExpr = IntImm(cst, e.dtype)
    for atom, coeff in terms:
        if not _has_domain_var(state, atom):
            base = simplify(base + atom * coeff)
            continue
        for s in _atom(state, atom):
            splits.append(_Split(s.mark, s.lower, s.extent, s.scale * coeff, s.padded))
    return splits, base


def _atom(state: _State, atom: PrimExpr) -> list[_Split]:
    if isinstance(atom, Var):
        m = state.leaf(atom)
        return [_Split(m, 1, m.extent, 1)]
    if isinstance(atom, Cast) and not atom.dtype.startswith(("float", "bool")):
        splits, base = _normalize(state, atom.value)
        if not (isinstance(base, IntImm) and base.value == 0):
            raise _NotAffine(f"`{atom}` is not an affine expression of the loops")
        return splits
    if isinstance(atom, (FloorDiv, FloorMod)) and isinstance(atom.b, IntImm) and atom.b.value > 0:
        return _divmod(state, atom, atom.b.value)
    raise _NotAffine(f"`{atom}` is not an affine expression of the loops")


def _divmod(state: _State, atom: PrimExpr, c: int) -> list[_Split]:
    splits, base = _normalize(state, atom.a)  # type: ignore[attr-defined]
    is_div = isinstance(atom, FloorDiv)
    if not isinstance(base, IntImm) or base.value < 0:
        raise _NotAffine(f"`{atom}` is not an affine expression of the loops")
    offset = base.value % c  # (x + c * q) // c == x // c + q;  (x + c * q) % c == x % c
    if len(splits) == 1 and splits[0].scale > 1 and splits[0].scale % c == 0 and not offset:
        s = splits[0]  # (x * (c * k)) // c == x * k;  (x * (c * k)) % c == 0
        return [_Split(s.mark, s.lower, s.extent, s.scale // c, s.padded)] if is_div else []
    fused = _fuse(state, splits, top=False)
    if fused.scale != 1:
        raise _NotAffine(f"`{atom}` is not an affine expression of the loops")
    m, lo, ext = fused.mark, fused.lower, fused.extent
    if offset:  # x + offset as an iterator of its own over [0, extent + offset)
        m = _Mark(ext + offset, parts=((_Split(m, lo, ext, 1, fused.padded), 1),))
        lo, ext = 1, ext + offset
    if is_div:
        if ext % c == 0:
            return [_Split(m, lo * c, ext // c, 1)]
        if c >= ext:
            return []
        return [_Split(m, lo * c, -(-ext // c), 1, padded=True)]
    if ext % c == 0:
        return [_Split(m, lo, c, 1)]
    if c >= ext:
        return [fused]
    return [_Split(m, lo, c, 1, padded=True)]


# ---------------------------------------------------------------------------
# fusing a sum of splits into one split of a (possibly new) fused iterator


def _fuse(state: _State, splits: list[_Split], top: bool, constrained: bool = True) -> _Split:
    """One split equal to ``sum(splits)`` (its scale is the smallest scale), or
    _NotAffine. ``top``: the sum is a binding (its pieces are recorded as used)."""
    for s in splits:
        if s.scale <= 0:
            raise _NotAffine("a loop steps backwards in a binding")
    base_scale = min(s.scale for s in splits)
    todo = list(splits)
    ordered: list[tuple[_Split, int]] = []  # (split, place value relative to base_scale)
    expected = base_scale
    while todo:
        match = [s for s in todo if s.scale == expected]
        if not match and base_scale == 1:  # surjective: an overlapping piece
            smaller = [s for s in todo if s.scale < expected]
            if smaller:
                best = max(s.scale for s in smaller)
                match = [s for s in smaller if s.scale == best]
        if not match:
            raise _NotAffine("the bindings leave gaps between the pieces of their loops")
        s = match[0]
        cons = _constraint_starting_at(state, s, todo, base_scale) if constrained else None
        if cons is not None:
            c, members = cons
            for member in members:
                todo.remove(member)
            scale = s.scale
            ordered.append((_Split(c.mark, 1, c.mark.extent, scale), scale // base_scale))
            expected = c.mark.extent * scale
            continue
        todo.remove(s)
        if constrained:
            for c in state.constraints:
                if any(x.key() == s.key() for x in c.splits):
                    raise _NotAffine(
                        f"the predicate bounds {_describe(s)} together with other loops, "
                        "but a binding uses it alone"
                    )
        ordered.append((s, s.scale // base_scale))
        expected = s.extent * s.scale
    if len(ordered) == 1:
        piece, _ = ordered[0]
        result = _Split(piece.mark, piece.lower, piece.extent, base_scale, piece.padded)
    else:
        key = tuple((p.key(), w) for p, w in ordered)
        mark = state.fused.get(key)
        if mark is None:
            last, w = ordered[-1]
            mark = _Mark(last.extent * w, parts=tuple(
                (_Split(p.mark, p.lower, p.extent, 1, p.padded), w) for p, w in ordered))
            state.fused[key] = mark
        result = _Split(mark, 1, mark.extent, base_scale)
    if top:
        state.used.append(result)
    return result


def _constraint_starting_at(state: _State, s: _Split, todo: list[_Split], base_scale: int):
    best = None
    for c in state.constraints:
        inner = c.splits[0]
        if inner.key() != s.key() or s.scale % inner.scale:
            continue
        factor = s.scale // inner.scale
        members = []
        for cs in c.splits:
            hit = next((t for t in todo if t.key() == cs.key() and t.scale == cs.scale * factor
                        and t not in members), None)
            if hit is None:
                break
            members.append(hit)
        else:
            if best is None or len(members) > len(best[1]):
                best = (c, members)
    return best


# ---------------------------------------------------------------------------
# independence: no two bindings use the same digits of a loop


def _leaf_ranges(s: _Split, lo: Fraction, hi: Fraction, out: list) -> None:
    """Append (loop var, [a, b)) digit ranges (as multipliers) that ``s``'s digits
    ``[lo, hi)`` (relative to the split) cover."""
    a, b = lo * s.lower, hi * s.lower
    m = s.mark
    if m.var is not None:
        if s.padded:
            m.padded_uses += 1
        out.append((m.var, a, b))
        return
    if s.padded:
        m.padded_uses += 1
    for part, w in m.parts:
        pa, pb = Fraction(w), Fraction(w) * part.extent
        x, y = max(a, pa), min(b, pb)
        if x < y:
            _leaf_ranges(part, x / w, y / w, out)


def _check_independent(state: _State) -> None:
    ranges: list = []
    for s in state.used:
        _leaf_ranges(s, Fraction(1), Fraction(s.extent), ranges)
    by_var: dict[Var, list[tuple[Fraction, Fraction]]] = {}
    for v, a, b in ranges:
        for x, y in by_var.get(v, []):
            if max(a, x) < min(b, y):
                raise _NotAffine(f"`{v.name}` is used by more than one binding")
        by_var.setdefault(v, []).append((a, b))
    for m in list(state.marks.values()) + list(state.fused.values()):
        if m.padded_uses > 1:
            raise _NotAffine("two bindings split the same loop unevenly (// and % by a "
                             "factor that does not divide its extent)")
