"""Arithmetic simplification.

Two layers:

* constructors (``add``, ``mul``, ``floordiv`` ...) that fold constants and keep
  integer index expressions in a canonical affine form, so ``j_0 * 4 + j_1``
  never prints as ``j_0 * 4 * 1 + j_1 + 0``;
* :func:`simplify`, which rebuilds an expression bottom-up with the variables'
  ranges known and applies range-aware rules (``x // 8 == 0`` when ``0 <= x < 8``,
  comparisons that are always true vanish).

Invariant: every rule is exact for integer arithmetic with floor semantics.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping

from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LIKELY,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    BufferField,
    BufferLoad,
    Call,
    CallExtern,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IfThenElseExpr,
    IntImm,
    Let,
    Max,
    Min,
    Mul,
    Not,
    OpaqueCall,
    Or,
    PrimExpr,
    Select,
    StringImm,
    Sub,
    Var,
    const,
    is_float,
)

Bounds = Mapping[Var, tuple[int, int]]  # inclusive [lo, hi]


def _is_const(e: PrimExpr) -> bool:
    return isinstance(e, (IntImm, FloatImm))


def _cval(e: PrimExpr):
    return e.value  # type: ignore[attr-defined]


def _is_int(e: PrimExpr) -> bool:
    return not is_float(e.dtype) and e.dtype != "bool"


def struct_key(e: PrimExpr) -> tuple:
    """A hashable key equal for structurally equal expressions (vars by identity)."""
    if isinstance(e, Var):
        return ("V", id(e))
    if isinstance(e, (IntImm, FloatImm)):
        return ("C", e.value, e.dtype)
    if isinstance(e, BinaryOp):
        return (type(e).__name__, struct_key(e.a), struct_key(e.b))
    if isinstance(e, BufferLoad):
        return ("L", id(e.buffer), tuple(struct_key(i) for i in e.indices))
    if isinstance(e, Call):
        return ("F", e.op, tuple(struct_key(a) for a in e.args))
    if isinstance(e, Cast):
        return ("T", e.dtype, struct_key(e.value))
    if isinstance(e, Select):
        return ("S", struct_key(e.condition), struct_key(e.true_value), struct_key(e.false_value))
    if isinstance(e, Not):
        return ("N", struct_key(e.a))
    if isinstance(e, IfThenElseExpr):
        return (
            "I",
            struct_key(e.condition),
            struct_key(e.true_value),
            struct_key(e.false_value),
        )
    if isinstance(e, Let):
        return ("Let", id(e.var), struct_key(e.value), struct_key(e.body))
    if isinstance(e, CallExtern):
        return ("X", e.dtype, e.name, e.pure, tuple(struct_key(a) for a in e.args))
    if isinstance(e, StringImm):
        return ("Str", e.value)
    if isinstance(e, OpaqueCall):
        return ("O", e.op, e.dtype, tuple(struct_key(a) for a in e.args))
    if isinstance(e, BufferField):
        return ("BF", id(e.buffer), e.field)
    raise TypeError(f"not an expression: {e!r}")


# ---------------------------------------------------------------------------
# affine forms: ([(term, coeff), ...], constant)


def _linear(e: PrimExpr) -> tuple[list[tuple[PrimExpr, int]], int]:
    if isinstance(e, IntImm):
        return [], e.value
    if isinstance(e, Add):
        ta, ca = _linear(e.a)
        tb, cb = _linear(e.b)
        return _merge(ta, tb), ca + cb
    if isinstance(e, Sub):
        ta, ca = _linear(e.a)
        tb, cb = _linear(e.b)
        return _merge(ta, [(t, -c) for t, c in tb]), ca - cb
    if isinstance(e, Mul):
        if isinstance(e.b, IntImm):
            t, c = _linear(e.a)
            return [(x, k * e.b.value) for x, k in t], c * e.b.value
        if isinstance(e.a, IntImm):
            t, c = _linear(e.b)
            return [(x, k * e.a.value) for x, k in t], c * e.a.value
    return [(e, 1)], 0


def _merge(ta, tb):
    out: list[tuple[PrimExpr, int]] = []
    index: dict[tuple, int] = {}
    for t, c in list(ta) + list(tb):
        k = struct_key(t)
        if k in index:
            i = index[k]
            out[i] = (out[i][0], out[i][1] + c)
        else:
            index[k] = len(out)
            out.append((t, c))
    return [(t, c) for t, c in out if c != 0]


def _build(terms, cst: int, dtype: str) -> PrimExpr:
    result: PrimExpr | None = None
    for t, c in terms:
        mag = abs(c)
        piece = t if mag == 1 else Mul(t, IntImm(mag, dtype))
        if result is None:
            if c < 0 < cst:  # ``9 - i`` rather than ``0 - i + 9``
                result, cst = Sub(IntImm(cst, dtype), piece), 0
            else:
                result = piece if c > 0 else Sub(IntImm(0, dtype), piece)
        else:
            result = Add(result, piece) if c > 0 else Sub(result, piece)
    if result is None:
        return IntImm(cst, dtype)
    if cst > 0:
        result = Add(result, IntImm(cst, dtype))
    elif cst < 0:
        result = Sub(result, IntImm(-cst, dtype))
    return result


def _fold_divmod(terms, cst: int):
    """Fold ``y // c * (k*c) + (y % c) * k`` into ``y * k`` (true for every integer
    ``y`` and ``c > 0``), repeatedly, so re-fused indices such as
    ``v // 14 * 14 + v % 14`` come back to ``v``."""
    while True:
        for i, (t, k) in enumerate(terms):
            if not (isinstance(t, FloorDiv) and isinstance(t.b, IntImm) and t.b.value > 0
                    and k % t.b.value == 0):
                continue
            want = struct_key(floormod(t.a, t.b))
            j = next((j for j, (u, kk) in enumerate(terms)
                      if j != i and kk == k // t.b.value and struct_key(u) == want), None)
            if j is None:
                continue
            inner, c = _linear(t.a)
            rest = [x for n, x in enumerate(terms) if n not in (i, j)]
            terms = _merge(rest, [(x, kk * (k // t.b.value)) for x, kk in inner])
            cst += c * (k // t.b.value)
            break
        else:
            return terms, cst


def _canon(e: PrimExpr) -> PrimExpr:
    terms, cst = _linear(e)
    if any(isinstance(t, FloorDiv) for t, _ in terms):
        terms, cst = _fold_divmod(terms, cst)
    return _build(terms, cst, e.dtype)


# ---------------------------------------------------------------------------
# constructors


def add(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if _is_const(a) and _is_const(b):
        return const(_cval(a) + _cval(b), a.dtype)
    if _is_int(a) and _is_int(b):
        return _canon(Add(a, b))
    if _is_const(b) and _cval(b) == 0:
        return a
    if _is_const(a) and _cval(a) == 0:
        return b
    return Add(a, b)


def sub(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if _is_const(a) and _is_const(b):
        return const(_cval(a) - _cval(b), a.dtype)
    if _is_int(a) and _is_int(b):
        return _canon(Sub(a, b))
    if _is_const(b) and _cval(b) == 0:
        return a
    return Sub(a, b)


def mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if _is_const(a) and _is_const(b):
        return const(_cval(a) * _cval(b), a.dtype)
    if _is_int(a) and _is_int(b):
        if isinstance(a, IntImm) or isinstance(b, IntImm):
            return _canon(Mul(a, b) if isinstance(b, IntImm) else Mul(b, a))
        return Mul(a, b)
    if _is_const(b) and _cval(b) == 1:
        return a
    if _is_const(a) and _cval(a) == 1:
        return b
    return Mul(a, b)


def floordiv(a: PrimExpr, b: PrimExpr, bounds: Bounds | None = None) -> PrimExpr:
    if isinstance(a, IntImm) and isinstance(b, IntImm) and b.value != 0:
        return IntImm(a.value // b.value, a.dtype)
    if isinstance(b, IntImm) and b.value > 0:
        c = b.value
        if c == 1:
            return a
        if isinstance(a, FloorDiv) and isinstance(a.b, IntImm) and a.b.value > 0:
            return floordiv(a.a, IntImm(a.b.value * c, a.dtype), bounds)
        terms, cst = _linear(a)
        g = math.gcd(c, *(k for _, k in terms)) if terms else 1
        if g > 1:  # (g*X + g*q + s) // (g*c') == (X + q) // c'  for 0 <= s < g
            scaled = _build([(t, k // g) for t, k in terms], cst // g, a.dtype)
            return floordiv(scaled, IntImm(c // g, b.dtype), bounds)
        if terms and bounds is not None:  # k*x = c*(k//c)*x + (k%c)*x: exact when the
            rem = _build([(t, k % c) for t, k in terms], cst % c, a.dtype)  # rest fits
            lo, hi = _range(rem, bounds)  # in one period
            if lo is not None and hi is not None and lo // c == hi // c:
                quot = [(t, k // c) for t, k in terms if k // c != 0]
                return _build(quot, cst // c + lo // c, a.dtype)
        keep = [(t, k // c) for t, k in terms if k % c == 0]
        rest = [(t, k) for t, k in terms if k % c != 0]
        q, r = divmod(cst, c)
        quotient = _build(keep, q, a.dtype)
        if not rest and r == 0:
            return quotient
        remainder = _build(rest, r, a.dtype)
        lo, hi = _range(remainder, bounds)
        if lo is not None and hi is not None and lo // c == hi // c:
            return _canon(Add(quotient, IntImm(lo // c, a.dtype)))
        if not keep and q == 0:
            return FloorDiv(remainder, b)
        return _canon(Add(quotient, FloorDiv(remainder, b)))
    return FloorDiv(a, b)


def floormod(a: PrimExpr, b: PrimExpr, bounds: Bounds | None = None) -> PrimExpr:
    if isinstance(a, IntImm) and isinstance(b, IntImm) and b.value != 0:
        return IntImm(a.value % b.value, a.dtype)
    if isinstance(b, IntImm) and b.value > 0:
        c = b.value
        if c == 1:
            return IntImm(0, a.dtype)
        if isinstance(a, FloorMod) and isinstance(a.b, IntImm) and a.b.value % c == 0:
            return floormod(a.a, b, bounds)
        terms, cst = _linear(a)
        rest = [(t, k) for t, k in terms if k % c != 0]
        remainder = _build(rest, cst % c, a.dtype)
        if not rest:
            return remainder
        lo, hi = _range(remainder, bounds)
        if lo is not None and hi is not None and lo // c == hi // c:
            return _canon(Sub(remainder, IntImm((lo // c) * c, a.dtype)))
        g = math.gcd(c, *(k for _, k in rest))
        if g > 1:  # (g*X + g*q + s) % (g*c') == g * ((X + q) % c') + s  for 0 <= s < g
            r = cst % c
            inner = _build([(t, k // g) for t, k in rest], r // g, a.dtype)
            return _canon(Add(Mul(floormod(inner, IntImm(c // g, b.dtype), bounds),
                                  IntImm(g, a.dtype)), IntImm(r % g, a.dtype)))
        return FloorMod(remainder, b)
    return FloorMod(a, b)


def min_(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if _is_const(a) and _is_const(b):
        return const(min(_cval(a), _cval(b)), a.dtype)
    return Min(a, b)


def max_(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if _is_const(a) and _is_const(b):
        return const(max(_cval(a), _cval(b)), a.dtype)
    return Max(a, b)


def and_(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if isinstance(a, IntImm):
        return b if a.value else a
    if isinstance(b, IntImm):
        return a if b.value else b
    return And(a, b)


_CMP = {
    LT: lambda x, y: x < y,
    LE: lambda x, y: x <= y,
    GT: lambda x, y: x > y,
    GE: lambda x, y: x >= y,
    EQ: lambda x, y: x == y,
    NE: lambda x, y: x != y,
}


def _compare(cls, a: PrimExpr, b: PrimExpr, bounds: Bounds | None) -> PrimExpr:
    if _is_const(a) and _is_const(b):
        return const(bool(_CMP[cls](_cval(a), _cval(b))))
    if _is_int(a) and _is_int(b) and bounds is not None:
        lo, hi = _sym_range(sub(a, b), bounds)
        if lo is not None and hi is not None:
            if all(_CMP[cls](v, 0) for v in {lo, hi}) and (cls is not NE or not lo <= 0 <= hi):
                if cls is EQ and lo != hi:
                    return cls(a, b)
                return const(True)
            if cls in (LT, LE) and not _CMP[cls](lo, 0):
                return const(False)
            if cls in (GT, GE) and not _CMP[cls](hi, 0):
                return const(False)
        elif cls in (LT, LE) and hi is not None and _CMP[cls](hi, 0):
            return const(True)  # one side known (symbolic bounds): i - n <= -1 < 0
        elif cls in (GT, GE) and lo is not None and _CMP[cls](lo, 0):
            return const(True)
    return cls(a, b)


# ---------------------------------------------------------------------------
# ranges


def _opt(a: int | None, b: int | None, op) -> int | None:
    return None if a is None or b is None else op(a, b)


def _range(e: PrimExpr, bounds: Bounds | None) -> tuple[int | None, int | None]:
    """Inclusive integer range of ``e`` given variable bounds (None = unknown)."""
    if isinstance(e, IntImm):
        return e.value, e.value
    if isinstance(e, Var):
        if bounds is not None and e in bounds:
            lo, hi = bounds[e]
            # a symbolic bound (``n - 1`` of a loop over ``n``) is unknown here
            return (lo if isinstance(lo, int) else None, hi if isinstance(hi, int) else None)
        return None, None
    if isinstance(e, (Add, Sub)):
        # each side separately: a loop over a symbolic extent has only a lower bound
        alo, ahi = _range(e.a, bounds)
        blo, bhi = _range(e.b, bounds)
        if isinstance(e, Add):
            return _opt(alo, blo, operator.add), _opt(ahi, bhi, operator.add)
        return _opt(alo, bhi, operator.sub), _opt(ahi, blo, operator.sub)
    if isinstance(e, Mul):
        alo, ahi = _range(e.a, bounds)
        blo, bhi = _range(e.b, bounds)
        if None in (alo, ahi, blo, bhi):
            if alo is not None and blo is not None and alo >= 0 and blo >= 0:
                return alo * blo, _opt(ahi, bhi, operator.mul)
            return None, None
        prods = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return min(prods), max(prods)
    if isinstance(e, FloorDiv) and isinstance(e.b, IntImm) and e.b.value > 0:
        lo, hi = _range(e.a, bounds)
        c = e.b.value
        return (None if lo is None else lo // c), (None if hi is None else hi // c)
    if isinstance(e, FloorMod) and isinstance(e.b, IntImm) and e.b.value > 0:
        lo, hi = _range(e.a, bounds)
        if lo is not None and hi is not None and lo // e.b.value == hi // e.b.value:
            return lo % e.b.value, hi % e.b.value
        return 0, e.b.value - 1
    if isinstance(e, (Min, Max)):
        alo, ahi = _range(e.a, bounds)
        blo, bhi = _range(e.b, bounds)
        if None in (alo, ahi, blo, bhi):
            return None, None
        f = min if isinstance(e, Min) else max
        return f(alo, blo), f(ahi, bhi)
    return None, None


def int_range(e: PrimExpr, bounds: Bounds | None = None) -> tuple[int | None, int | None]:
    """Public wrapper of the inclusive range analysis (symbolic bounds included: with
    ``i`` in ``[0, n - 1]``, ``n - 1 - i`` is at least 0)."""
    return _sym_range(e, bounds)


def _sym_range(e: PrimExpr, bounds: Bounds | None) -> tuple[int | None, int | None]:
    """:func:`_range`, then, for a side still unknown, each variable whose bound is an
    expression (a loop over a symbolic extent) replaced by the end of its range that
    minimizes (or maximizes) ``e``; sound for ``e`` affine in those variables."""
    lo, hi = _range(e, bounds)
    if (lo is not None and hi is not None) or not bounds or not _is_int(e):
        return lo, hi
    sym = {v: b for v, b in bounds.items() if not all(isinstance(x, int) for x in b)}
    if not sym:
        return lo, hi
    terms, cst = _linear(e)
    if any(not isinstance(t, Var) and any(x in sym for x in _vars_of(t)) for t, _ in terms):
        return lo, hi
    for want_lo in (True, False):
        if (lo if want_lo else hi) is not None:
            continue
        acc: PrimExpr = IntImm(cst, e.dtype)
        for t, c in terms:
            if isinstance(t, Var) and t in sym:
                t = sym[t][0] if (c > 0) == want_lo else sym[t][1]
                if t is None:
                    break
                t = t if isinstance(t, PrimExpr) else IntImm(t, e.dtype)
            acc = add(acc, mul(t, IntImm(c, e.dtype)))
        else:
            got = _range(acc, bounds)
            lo, hi = (got[0], hi) if want_lo else (lo, got[1])
    return lo, hi


def simplify(e: PrimExpr, bounds: Bounds | None = None) -> PrimExpr:
    """Rebuild ``e`` bottom-up through the simplifying constructors.

    ``bounds`` maps variables to inclusive ``(lo, hi)`` ranges, e.g. loop variables
    to ``(0, extent - 1)``.

    >>> import workbench as wb
    >>> i = wb.Var("i")
    >>> wb.ir.simplify((i * 4 + 3) // 4, {i: (0, 31)})
    i
    """
    if isinstance(e, (Var, IntImm, FloatImm)):
        return e
    if isinstance(e, BinaryOp):
        a = simplify(e.a, bounds)
        b = simplify(e.b, bounds)
        if isinstance(e, Add):
            return add(a, b)
        if isinstance(e, Sub):
            return sub(a, b)
        if isinstance(e, Mul):
            return mul(a, b)
        if isinstance(e, FloorDiv):
            return floordiv(a, b, bounds)
        if isinstance(e, FloorMod):
            return floormod(a, b, bounds)
        if isinstance(e, Min):
            return min_(a, b)
        if isinstance(e, Max):
            return max_(a, b)
        if isinstance(e, And):
            return and_(a, b)
        if type(e) in _CMP:
            return _compare(type(e), a, b, bounds)
        if isinstance(e, Or):
            if isinstance(a, IntImm):
                return a if a.value else b
            if isinstance(b, IntImm):
                return b if b.value else a
        if isinstance(e, Div) and _is_const(a) and _is_const(b) and _cval(b) != 0:
            if is_float(a.dtype):
                return const(_cval(a) / _cval(b), a.dtype)
            return const(int(_cval(a) / _cval(b)), a.dtype)
        if a is e.a and b is e.b:
            return e
        return type(e)(a, b)
    if isinstance(e, Not):
        a = simplify(e.a, bounds)
        if isinstance(a, IntImm):
            return const(not a.value)
        return e if a is e.a else Not(a)
    if isinstance(e, (Select, IfThenElseExpr)):
        c = simplify(e.condition, bounds)
        t = simplify(e.true_value, bounds)
        f = simplify(e.false_value, bounds)
        if isinstance(c, IntImm):
            return t if c.value else f
        if c is e.condition and t is e.true_value and f is e.false_value:
            return e
        return type(e)(c, t, f)
    if isinstance(e, Cast):
        v = simplify(e.value, bounds)
        if _is_const(v):
            val = _cval(v)
            return const(float(val) if is_float(e.dtype) else math.trunc(val), e.dtype)
        return e if v is e.value else Cast(e.dtype, v)
    if isinstance(e, Call):
        args = tuple(simplify(x, bounds) for x in e.args)
        if e.op == LIKELY and _is_const(args[0]):  # T.likely(True) is True (as TVM)
            return args[0]
        if all(x is y for x, y in zip(args, e.args, strict=True)):
            return e
        return Call(e.op, args, e.dtype)
    if isinstance(e, BufferLoad):
        idx = tuple(simplify(x, bounds) for x in e.indices)
        if all(x is y for x, y in zip(idx, e.indices, strict=True)):
            return e
        return BufferLoad(e.buffer, idx)
    if isinstance(e, Let):
        v = simplify(e.value, bounds)
        body = simplify(e.body, bounds)
        return e if v is e.value and body is e.body else Let(e.var, v, body)
    if isinstance(e, CallExtern):
        args = tuple(simplify(x, bounds) for x in e.args)
        if all(x is y for x, y in zip(args, e.args, strict=True)):
            return e
        return CallExtern(e.dtype, e.name, args, e.pure)
    return e


# ---------------------------------------------------------------------------
# symbolic bounds (shape variables such as ``n``)


def symbolic_max(e: PrimExpr, extents: Mapping[Var, PrimExpr | int]) -> PrimExpr | None:
    """The largest value of ``e`` as each variable of ``extents`` runs over
    ``[0, extent)``, when ``e`` is affine with non-negative coefficients in them (so the
    maximum is at every variable's end); None otherwise. Extents may be symbolic.

    >>> i0, n = Var("i_0"), Var("n")
    >>> symbolic_max(i0 * 8 + 7, {i0: (n + 7) // 8})
    (n + 7) // 8 * 8 - 1
    """
    terms, cst = _linear(e)
    out: PrimExpr = IntImm(cst, e.dtype)
    for t, c in terms:
        used = [x for x in _vars_of(t) if x in extents]
        if not used:
            out = add(out, mul(t, IntImm(c, e.dtype)))
            continue
        if not isinstance(t, Var) or c < 0:
            return None
        ext = extents[t]
        last = IntImm(ext - 1, e.dtype) if isinstance(ext, int) else sub(ext, IntImm(1, e.dtype))
        out = add(out, mul(last, IntImm(c, e.dtype)))
    return out


def prove_nonneg(e: PrimExpr, bounds: Bounds | None = None) -> bool:
    """Can ``e >= 0`` be shown, with shape variables' lower bounds in ``bounds`` and
    ``c * (x // c) >= x - (c - 1)`` for each floor division term (so
    ``(n + 7) // 8 * 8 - n >= 0``)?

    >>> n = Var("n")
    >>> prove_nonneg((n + 7) // 8 * 8 - n, {n: (1, None)})
    True
    >>> prove_nonneg(n - 2, {n: (1, None)})
    False
    """
    if not _is_int(e):
        return False
    terms, cst = _linear(simplify(e, bounds))
    low: list[tuple[PrimExpr, int]] = []
    for t, k in terms:
        if isinstance(t, FloorDiv) and isinstance(t.b, IntImm) and t.b.value > 0 and k > 0:
            c = t.b.value
            if k % c == 0:  # k * (x // c) >= (k / c) * (x - c + 1)
                sub_terms, sub_cst = _linear(t.a)
                low.extend((x, y * (k // c)) for x, y in sub_terms)
                cst += (k // c) * (sub_cst - c + 1)
                continue
        low.append((t, k))
    lo, _ = _range(_build(_merge(low, []), cst, e.dtype), bounds)
    return lo is not None and lo >= 0


def _vars_of(e: PrimExpr) -> list[Var]:
    from .functor import iter_exprs

    return [x for x in iter_exprs(e) if isinstance(x, Var)]
