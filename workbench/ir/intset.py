"""Integer interval analysis: the range an index expression takes as some variables run
over their ranges, the others staying symbolic (TVM's ``arith::EvalSet`` on interval
sets).

An interval is a pair ``(lo, hi)`` of expressions, both inclusive; the relaxed
variables map to such pairs (a loop ``i`` of extent 8 to ``(0, 7)``) and every other
variable stays symbolic, so the interval of ``i_0 * 16 + i_1`` with only ``i_1`` relaxed
over ``[0, 15]`` is ``(i_0 * 16, i_0 * 16 + 15)``.

Rules (each exact or an over-approximation, never smaller than the true range):

* sums, differences and products by constants combine endpoint-wise;
* ``x // c`` and ``x % c`` by a positive constant: ``(lo // c, hi // c)``; ``x % c`` is
  ``(lo % c, hi % c)`` where the whole interval lies in one period, else ``(0, c - 1)``;
* ``min``/``max`` endpoint-wise; ``Select``: the union of both sides (both are
  evaluated); ``if_then_else``: the union of both sides, each evaluated with the relaxed
  variables narrowed by its condition (``16 <= i`` on a relaxed ``i`` in ``[0, 23]``
  leaves ``[16, 23]``), TVM's ``ConditionalBoundsContext``;
* a side whose condition can never hold contributes nothing (:data:`EMPTY`);
* anything else that involves a relaxed variable (a load, a product of two variables)
  has no interval: ``None``.

Endpoints are simplified with the known integer ranges of the symbolic variables
(``bounds``), so ``(i_0 * 8 + 7) // 16`` with nothing relaxed stays ``i_0 // 2``.

>>> import workbench as wb
>>> i0, i1 = wb.Var("i0"), wb.Var("i1")
>>> eval_interval((i0 * 8 + i1) // 16, {i1: (wb.const(0), wb.const(7))})
(i0 // 2, i0 // 2)
"""

from __future__ import annotations

from collections.abc import Mapping

from . import expr as E
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    PrimExpr,
    Select,
    Sub,
    Var,
    const,
)
from .functor import iter_exprs
from .simplify import Bounds, _linear, floordiv, floormod, int_range, simplify

__all__ = [
    "EMPTY",
    "LAZY_CONDITIONAL",
    "Interval",
    "eval_interval",
    "interval_union",
    "narrow",
    "prove_le",
    "smax",
    "smin",
]

Interval = tuple[PrimExpr, PrimExpr]


class _Empty:
    """The empty set: an access under a condition that never holds."""

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY = _Empty()

_IfThenElseExpr = getattr(E, "IfThenElseExpr", None)
#: expressions that evaluate only the side their condition picks (``T.if_then_else``);
#: ``Select`` evaluates both sides, so both count everywhere (as in TVM)
LAZY_CONDITIONAL = (_IfThenElseExpr,) if _IfThenElseExpr is not None else ()


# ---------------------------------------------------------------------------
# symbolic comparisons


def prove_le(a: PrimExpr, b: PrimExpr, bounds: Bounds | None = None) -> bool:
    """Can ``a <= b`` be proven from the variables' ``bounds``?"""
    d = simplify(b - a, bounds)
    if isinstance(d, IntImm):
        return d.value >= 0
    lo, _ = int_range(d, bounds)
    if lo is not None and lo >= 0:
        return True
    relaxed = _relax_rounding(d)
    if relaxed is None:
        return False
    relaxed = simplify(relaxed, bounds)
    if isinstance(relaxed, IntImm):
        return relaxed.value >= 0
    lo, _ = int_range(relaxed, bounds)
    return lo is not None and lo >= 0


def _relax_rounding(d: PrimExpr) -> PrimExpr | None:
    """A lower bound of ``d`` free of the rounding terms of a linear sum: ``x // c``
    with coefficient ``k`` (``x // c * c`` is within ``[x - c + 1, x]``) and ``x % c``
    (within ``[0, c - 1]``), so that ``(n + 3) // 4 * 4 - n >= 0`` is proven for any
    ``n``. None when ``d`` has no such term."""
    terms, cst = _linear(d)
    out: PrimExpr = IntImm(cst, d.dtype)
    changed = False
    for atom, k in terms:
        if isinstance(atom, E.FloorDiv) and isinstance(atom.b, IntImm) and atom.b.value > 0:
            c = atom.b.value
            # k * (x // c) >= k * (x - c + 1) / c when k > 0, >= k * x / c when k < 0
            if k % c == 0:
                q = k // c
                out = out + (atom.a - (c - 1)) * q if k > 0 else out + atom.a * q
                changed = True
                continue
        if isinstance(atom, E.FloorMod) and isinstance(atom.b, IntImm) and atom.b.value > 0:
            out = out + (IntImm(0, d.dtype) if k > 0 else IntImm((atom.b.value - 1) * k, d.dtype))
            changed = True
            continue
        out = out + atom * k
    return out if changed else None


def smin(a: PrimExpr, b: PrimExpr, bounds: Bounds | None = None) -> PrimExpr:
    """``min(a, b)``, resolved where one side is provably smaller (else a ``Min`` node)."""
    if prove_le(a, b, bounds):
        return a
    if prove_le(b, a, bounds):
        return b
    return simplify(Min(a, b), bounds)


def smax(a: PrimExpr, b: PrimExpr, bounds: Bounds | None = None) -> PrimExpr:
    """``max(a, b)``, resolved where one side is provably larger (else a ``Max`` node)."""
    if prove_le(a, b, bounds):
        return b
    if prove_le(b, a, bounds):
        return a
    return simplify(Max(a, b), bounds)


def interval_union(a, b, bounds: Bounds | None = None):
    """Smallest interval holding both (``EMPTY`` is neutral, ``None`` absorbs)."""
    if a is EMPTY:
        return b
    if b is EMPTY:
        return a
    if a is None or b is None:
        return None
    return smin(a[0], b[0], bounds), smax(a[1], b[1], bounds)


# ---------------------------------------------------------------------------
# evaluation


def _point(e: PrimExpr) -> Interval:
    return e, e


def _relaxed_in(e: PrimExpr, dom: Mapping) -> bool:
    return any(isinstance(x, Var) and x in dom for x in iter_exprs(e))


def eval_interval(
    e: PrimExpr, dom: Mapping[Var, Interval], bounds: Bounds | None = None
) -> Interval | _Empty | None:
    """The interval of integer expression ``e`` as the variables of ``dom`` range over
    their intervals (module docstring). ``None`` where no interval can be given,
    :data:`EMPTY` where ``e`` is only evaluated under a condition that never holds."""
    r = _eval(e, dom, bounds)
    if r is None or r is EMPTY:
        return r
    return simplify(r[0], bounds), simplify(r[1], bounds)


def _eval(e: PrimExpr, dom, bounds):
    if not _relaxed_in(e, dom):
        return _point(e)
    if isinstance(e, Var):
        return dom[e]
    if isinstance(e, (Add, Sub)):
        a, b = _eval(e.a, dom, bounds), _eval(e.b, dom, bounds)
        if a is None or b is None:
            return None
        if a is EMPTY or b is EMPTY:
            return EMPTY
        if isinstance(e, Add):
            return a[0] + b[0], a[1] + b[1]
        return a[0] - b[1], a[1] - b[0]
    if isinstance(e, Mul):
        for x, c in ((e.a, e.b), (e.b, e.a)):
            if isinstance(c, IntImm):
                r = _eval(x, dom, bounds)
                if r is None or r is EMPTY:
                    return r
                lo, hi = r[0] * c.value, r[1] * c.value
                return (lo, hi) if c.value >= 0 else (hi, lo)
        return None
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
        r = _eval(e.a, dom, bounds)
        if r is None or r is EMPTY:
            return r
        c = e.b
        lo, hi = simplify(r[0], bounds), simplify(r[1], bounds)
        qlo, qhi = floordiv(lo, c, bounds), floordiv(hi, c, bounds)
        if isinstance(e, FloorDiv):
            return qlo, qhi
        if isinstance(simplify(qhi - qlo, bounds), IntImm) and simplify(
            qhi - qlo, bounds
        ).value == 0:
            return floormod(lo, c, bounds), floormod(hi, c, bounds)
        return const(0, e.dtype), const(c.value - 1, e.dtype)
    if isinstance(e, (Min, Max)):
        a, b = _eval(e.a, dom, bounds), _eval(e.b, dom, bounds)
        if a is None or b is None:
            return None
        if a is EMPTY or b is EMPTY:
            return EMPTY
        f = smin if isinstance(e, Min) else smax
        return f(a[0], b[0], bounds), f(a[1], b[1], bounds)
    if isinstance(e, Select):
        return interval_union(
            _eval(e.true_value, dom, bounds), _eval(e.false_value, dom, bounds), bounds
        )
    if LAZY_CONDITIONAL and isinstance(e, LAZY_CONDITIONAL):
        t_dom = narrow(e.condition, dom, bounds)
        f_dom = narrow(negate(e.condition), dom, bounds)
        t = EMPTY if t_dom is EMPTY else _eval(e.true_value, t_dom, bounds)
        f = EMPTY if f_dom is EMPTY else _eval(e.false_value, f_dom, bounds)
        return interval_union(t, f, bounds)
    if isinstance(e, Cast) and not E.is_float(e.dtype):
        return _eval(e.value, dom, bounds)
    return None


# ---------------------------------------------------------------------------
# conditions


_FLIP = {LT: GE, LE: GT, GT: LE, GE: LT, EQ: NE, NE: EQ}


def negate(cond: PrimExpr) -> PrimExpr:
    """``not cond``, pushed through comparisons (``not (a < b)`` is ``a >= b``)."""
    cond = E.unwrap_likely(cond)
    if type(cond) in _FLIP:
        return _FLIP[type(cond)](cond.a, cond.b)
    if isinstance(cond, Not):
        return cond.a
    if isinstance(cond, IntImm):
        return const(not cond.value)
    return Not(cond)


def narrow(cond: PrimExpr, dom: Mapping[Var, Interval], bounds: Bounds | None = None):
    """``dom`` with the relaxed variables narrowed to where ``cond`` can hold.

    Handles conjunctions of comparisons that are linear in exactly one relaxed variable
    (``16 <= i``, ``i * 8 + j_outer < 100``); other conditions leave ``dom`` as it is.
    Returns :data:`EMPTY` when ``cond`` provably never holds."""
    cond = E.unwrap_likely(cond)  # T.likely(c) means c
    if isinstance(cond, IntImm):
        return dom if cond.value else EMPTY
    if isinstance(cond, And):
        d = narrow(cond.a, dom, bounds)
        return d if d is EMPTY else narrow(cond.b, d, bounds)
    if type(cond) not in (LT, LE, GT, GE, EQ) or E.is_float(cond.a.dtype):
        return dom
    terms, cst = _linear(simplify(cond.a - cond.b, bounds))
    relaxed = [(t, c) for t, c in terms if _relaxed_in(t, dom)]
    if len(relaxed) != 1 or not isinstance(relaxed[0][0], Var):
        return dom
    x, a = relaxed[0]
    rest = simplify(sum((t * c for t, c in terms if t is not x), const(cst)), bounds)
    # a * x + rest  <op>  0
    ops = {LT: [("le", -1)], LE: [("le", 0)], GT: [("ge", 1)], GE: [("ge", 0)]}
    ops[EQ] = [("le", 0), ("ge", 0)]
    lo, hi = dom[x]
    for kind, off in ops[type(cond)]:
        # a * x + rest <= off  (kind "le") or >= off ("ge")
        rhs = simplify(const(off) - rest, bounds)
        upper = (kind == "le") == (a > 0)
        if upper:  # x <= floor(rhs / a)  (a > 0), or x <= floor(rhs / a) for ge, a < 0
            b = floordiv(rhs, const(a), bounds) if a > 0 else floordiv(-rhs, const(-a), bounds)
            if prove_le(b, hi, bounds):
                hi = b
        else:  # x >= ceil(rhs / a)
            num, den = (rhs, a) if a > 0 else (-rhs, -a)
            b = simplify(floordiv(num + (den - 1), const(den), bounds), bounds)
            if prove_le(lo, b, bounds):
                lo = b
    lo, hi = simplify(lo, bounds), simplify(hi, bounds)
    d = simplify(hi - lo, bounds)
    if isinstance(d, IntImm) and d.value < 0:
        return EMPTY
    out = dict(dom)
    out[x] = (lo, hi)
    return out
