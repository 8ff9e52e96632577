"""Decomposing a padding block: decompose_padding (and can_decompose_padding).

A block that fills a padded buffer computes ``A[...] = T.if_then_else(pred, B[...], c)``
with ``c`` a constant: every point is written, the in-bound ones from ``B``.
``decompose_padding(block, loop)`` splits it in two, as TVM does:

* a new block ``<name>_pad_const`` that writes ``c`` everywhere, in a copy of the loops
  from ``loop`` down (serial loops, same extents), placed right before ``loop``;
* the original block, which now writes only the in-bound region: its iter vars range
  over that region (shifted to start at 0), loops bound straight to one of them shrink
  to the region's extent, and what is left of ``pred`` becomes its ``T.where``. It no
  longer reads anything out of bounds.

Before::

    for i in range(140):
        with T.block("block"):
            vi = T.axis.spatial(140, i)
            y[vi] = T.if_then_else(6 <= vi and vi < 134, x[vi - 6], 0)

after ``decompose_padding(block, i)``::

    for i in range(140):
        with T.block("block_pad_const"):
            vi = T.axis.spatial(140, i)
            y[vi] = 0
    for i in range(128):
        with T.block("block"):
            vi = T.axis.spatial(128, i)
            y[vi + 6] = x[vi]

The in-bound region is found per iter var from its binding (a sum of loop variables,
the smallest coefficient 1, with no gaps) and the conjuncts of ``pred`` and the block's
predicate that bound that same sum (``3 <= i * 75 + j``, ``i * 75 + j < 228``). As in
TVM, the block must be complete (spatial iter vars, the only writer of its buffer),
and its in-bound predicate must not be trivially true.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, BufferStore, For, PrimFunc, SeqStmt, Stmt, Var
from ...ir.expr import (
    GE,
    GT,
    LE,
    LT,
    And,
    CallExtern,
    FloatImm,
    IfThenElseExpr,
    IntImm,
    OpaqueCall,
    PrimExpr,
    const,
    unwrap_likely,
)
from ...ir.functor import iter_exprs, substitute
from ...ir.simplify import _build, _linear, simplify
from ..errors import NotSingleChildError, ScheduleError
from ._common import (
    check_starts_at_zero,
    fresh_name,
    replace_child,
    replace_path,
    scope_blocks,
    scope_of,
    used_names,
)
from .compute_at import NotCompleteBlockError
from .reduction import _block_and_loops


class PaddingPatternMatchError(ScheduleError):
    """``decompose_padding``: the block is not ``A[...] = T.if_then_else(pred, value,
    constant)``, or its in-bound region cannot be read off its bindings and ``pred``."""


# ---------------------------------------------------------------------------
# predicates: conjuncts in TVM's normal form


def _conjuncts(e: PrimExpr) -> list[PrimExpr]:
    e = unwrap_likely(e)
    if isinstance(e, And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _normal(c: PrimExpr) -> PrimExpr:
    """``a >= b`` as ``b <= a``, ``a > b`` as ``b < a``; constants moved to the side that
    is a constant (``i + 6 < 134`` is ``i < 128``), as TVM's simplifier writes them."""
    if isinstance(c, GE):
        c = LE(c.b, c.a)
    elif isinstance(c, GT):
        c = LT(c.b, c.a)
    if isinstance(c, (LT, LE)) and c.a.dtype not in ("bool",) and not c.a.dtype.startswith(
        "float"
    ):
        ta, ca = _linear(c.a)
        tb, cb = _linear(c.b)
        if not tb and ta and ca:  # x + c1 < c2
            return type(c)(_build(ta, 0, c.a.dtype), IntImm(cb - ca, c.b.dtype))
        if not ta and tb and cb:  # c1 <= x + c2
            return type(c)(IntImm(ca - cb, c.a.dtype), _build(tb, 0, c.b.dtype))
    return c


def _fold(e: PrimExpr, bounds: dict) -> PrimExpr:
    """``e`` simplified with ``bounds``; variables of a one-point range (a loop of
    extent 1) become that point, as TVM's analyzer folds them."""
    units = {v: IntImm(lo, v.dtype) for v, (lo, hi) in bounds.items() if lo == hi}
    return simplify(substitute(e, units) if units else e, bounds)


def _simplify_pred(conjuncts: list[PrimExpr], bounds: dict) -> PrimExpr:
    """The conjunction, each part simplified with ``bounds`` (true parts dropped), left
    to right."""
    out: PrimExpr = const(True)
    for c in conjuncts:
        s = _normal(_fold(_normal(c), bounds))
        if isinstance(s, IntImm) and s.value:
            continue
        out = s if isinstance(out, IntImm) and out.value else And(out, s)
    return out


# ---------------------------------------------------------------------------
# analysis


def _linear_key(e: PrimExpr, loop_vars: set[Var]):
    """``(coefficients by loop var, constant)`` of an affine sum of loop variables,
    or None."""
    terms, cst = _linear(e)
    coefs: dict[Var, int] = {}
    for t, c in terms:
        if not (isinstance(t, Var) and t in loop_vars):
            return None
        coefs[t] = coefs.get(t, 0) + c
    return coefs, cst


def _in_bound_region(
    fail, values: tuple[PrimExpr, ...], extents: dict[Var, int], conjuncts: list[PrimExpr]
) -> list[tuple[int, int]]:
    """(min, extent) of each binding over the points where every conjunct holds."""
    loop_vars = set(extents)
    keys = []
    for v in values:
        key = _linear_key(simplify(v), loop_vars)
        if key is None:
            raise fail(f"the binding {v} is not a sum of loop variables")
        keys.append(key)
    used: dict[Var, int] = {}
    for k, (coefs, _) in enumerate(keys):
        for var in coefs:
            if var in used:
                raise fail("block iters are not independent wrt the padding condition "
                           f'(loop "{var.name}" drives two of them)')
            used[var] = k
    lo: list[int] = []
    hi: list[int] = []  # exclusive
    for coefs, cst in keys:
        if any(c <= 0 for c in coefs.values()):
            raise fail("strided iteration is not supported (a negative coefficient)")
        span = 0
        for var, c in sorted(coefs.items(), key=lambda kv: kv[1]):
            if c > span + 1:
                raise fail("strided iteration is not supported (the binding has gaps)")
            span += c * (extents[var] - 1)
        lo.append(cst)
        hi.append(cst + span + 1)
    for c in conjuncts:
        c = _normal(c)
        if not isinstance(c, (LT, LE)):
            raise fail(f"cannot read a bound off the condition {c}")
        side, bound, upper = None, None, None
        ka, kb = _linear_key(c.a, loop_vars), _linear_key(c.b, loop_vars)
        if ka is not None and ka[0] and kb is not None and not kb[0]:
            side, bound, upper = ka, kb[1] - ka[1], True  # sum < bound
        elif kb is not None and kb[0] and ka is not None and not ka[0]:
            side, bound, upper = kb, ka[1] - kb[1], False  # bound <= sum
        if side is None:
            raise fail(f"cannot read a bound off the condition {c}")
        for k, (coefs, cst) in enumerate(keys):
            if coefs == side[0]:
                b = bound + cst
                if upper:
                    hi[k] = min(hi[k], b + (1 if isinstance(c, LE) else 0))
                else:
                    lo[k] = max(lo[k], b + (1 if isinstance(c, LT) else 0))
                break
        else:
            raise fail(f"block iters are not independent wrt the padding condition {c}")
    region = []
    for k in range(len(keys)):
        if hi[k] <= lo[k]:
            raise fail(f"the in-bound region of iter var {k} is empty")
        region.append((lo[k], hi[k] - lo[k]))
    return region


def _check(func: PrimFunc, block_name: str, loop_var: Var):
    p = "decompose_padding"
    bpath, loops, idx = _block_and_loops(p, func, block_name, loop_var)
    block: Block = bpath[-1]  # type: ignore[assignment]

    def fail(why: str) -> PaddingPatternMatchError:
        return PaddingPatternMatchError(
            p, f'block "{block_name}" does not match the padding pattern: {why}', func,
            blocks=[block_name],
        )

    # a complete block: spatial iter vars, the only writer of what it writes, no overlap
    if any(iv.kind != "S" for iv in block.iter_vars):
        raise NotCompleteBlockError(
            p, f'block "{block_name}" is not a complete block (it has a reduce iter var)',
            func, blocks=[block_name])
    written = {w.buffer for w in block.writes or ()}
    for other in scope_blocks(scope_of(bpath)):
        if other is not block and any(w.buffer in written for w in other.writes or ()):
            raise NotCompleteBlockError(
                p, f'block "{block_name}" is not a complete block (block "{other.name}" '
                "also writes its output)", func, blocks=[block_name, other.name])
    if any(r.buffer in written for r in block.reads or ()):
        raise NotCompleteBlockError(
            p, f'block "{block_name}" is not a complete block (it reads what it writes)',
            func, blocks=[block_name])
    store = block.body
    if not isinstance(store, BufferStore) or block.init is not None:
        raise fail("its body is not a single store to the buffer it writes")
    ite = store.value
    if not isinstance(ite, IfThenElseExpr):
        raise fail("the stored value is not constrained by a padding predicate "
                   "(T.if_then_else)")
    if not isinstance(ite.false_value, (IntImm, FloatImm)):
        raise fail(f"the pad value {ite.false_value} is not a constant")
    if any(isinstance(x, (CallExtern, OpaqueCall)) and not getattr(x, "pure", False)
           for x in iter_exprs(ite.true_value)):
        raise fail("the in-bound value has side effects")
    extents = {lp.loop_var: lp.extent for lp in loops}
    if not all(isinstance(e, int) for e in extents.values()):
        raise fail("a loop above it has a symbolic extent")
    # the in-bound region is read off the loops as [0, extent): a loop_partition piece
    # (a loop not starting at 0) would be filled and copied over the wrong range
    check_starts_at_zero(func, p, loops)
    bounds = {v: (0, e - 1) for v, e in extents.items()}
    binding = {iv.var: v for iv, v in zip(block.iter_vars, block.iter_values, strict=True)}
    pad_pred = substitute(ite.condition, binding)
    conjuncts = _conjuncts(pad_pred) + _conjuncts(block.predicate)
    in_pred = _simplify_pred(conjuncts, bounds)
    if isinstance(in_pred, IntImm):
        raise fail("the in-bound predicate is trivial" if in_pred.value else
                   "the in-bound predicate never holds")
    region = _in_bound_region(fail, block.iter_values, extents, _conjuncts(in_pred))
    # where the in-bound nest starts: the highest loop from the block up to ``loop_var``
    # whose body is a single loop or the block
    inner = len(loops) - 1
    in_idx = None
    for k in range(inner, idx - 1, -1):
        if not isinstance(loops[k].body, (For, Block)):
            break
        in_idx = k
    if in_idx is None:
        raise NotSingleChildError(
            "decompose_padding",
            f'block "{block_name}" is not the only statement in loop '
            f'"{loops[inner].loop_var.name}"',
            func,
            loops=[loops[inner].loop_var],
            blocks=[block_name],
        )
    return bpath, loops, idx, in_idx, block, in_pred, region


def can_decompose_padding(func: PrimFunc, block_name: str, loop_var: Var) -> bool:
    """Whether :func:`decompose_padding` accepts the block at that loop.

    >>> import workbench as wb
    >>> from workbench.testing import padded_func
    >>> f = padded_func()
    >>> sch = wb.Schedule(f)
    >>> can_decompose_padding(f, "pad", sch.get(sch.get_loops("pad")[0]).loop_var)
    True
    """
    try:
        _check(func, block_name, loop_var)
    except ScheduleError:
        return False
    return True


def decompose_padding(func: PrimFunc, block_name: str, loop_var: Var) -> tuple[PrimFunc, str]:
    """Split padding block ``block_name`` into a constant fill placed before loop
    ``loop_var`` and an in-bound copy; returns ``(new_func, fill_block_name)``.

    >>> import workbench as wb
    >>> from workbench.testing import padded_func
    >>> f = padded_func()
    >>> sch = wb.Schedule(f)
    >>> g, name = decompose_padding(f, "pad", sch.get(sch.get_loops("pad")[0]).loop_var)
    >>> name
    'pad_pad_const'
    """
    bpath, loops, idx, in_idx, block, in_pred, region = _check(func, block_name, loop_var)
    store: BufferStore = block.body  # type: ignore[assignment]
    ite: IfThenElseExpr = store.value  # type: ignore[assignment]
    bounds_all = {lp.loop_var: (0, lp.extent - 1) for lp in loops}

    # -- the constant fill: copies of the loops idx..inner and of the iter vars
    copied = loops[idx:]
    outer_bounds = {lp.loop_var: (0, lp.extent - 1) for lp in loops[:idx]}
    new_loops = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in copied}
    new_ivs = {iv.var: Var(iv.var.name, iv.var.dtype) for iv in block.iter_vars}
    repl = {**new_loops, **new_ivs}

    def rw(e: PrimExpr, bounds) -> PrimExpr:
        return _fold(substitute(e, repl), bounds)

    taken = used_names(func)
    const_name = fresh_name(f"{block_name}_pad_const", taken)
    const_block = Block(
        const_name,
        tuple(replace(iv, var=new_ivs[iv.var]) for iv in block.iter_vars),
        tuple(rw(v, outer_bounds) for v in block.iter_values),
        BufferStore(store.buffer, ite.false_value,
                    tuple(rw(i, outer_bounds) for i in store.indices)),
        predicate=rw(block.predicate, outer_bounds),
    )
    const_nest: Stmt = const_block
    for lp in reversed(copied):
        const_nest = For(new_loops[lp.loop_var], lp.extent, "serial", const_nest)

    # -- the in-bound part: iter vars over the region, shifted to start at 0
    nest_vars = {lp.loop_var for lp in loops[in_idx:]}
    new_extents = {lp.loop_var: lp.extent for lp in loops}
    ivs, values, repl_in = [], [], {}
    loop_shift: dict[Var, PrimExpr] = {}
    for iv, value, (mn, ext) in zip(block.iter_vars, block.iter_values, region, strict=True):
        nv = Var(iv.var.name, iv.var.dtype)
        ivs.append(replace(iv, var=nv, extent=ext, kind="S"))
        repl_in[iv.var] = nv + IntImm(mn, nv.dtype) if mn else nv
        if isinstance(value, Var) and value in nest_vars:
            new_extents[value] = ext
            values.append(value)
            if mn:
                loop_shift[value] = value + IntImm(mn, value.dtype)
        else:
            values.append(_fold(value - IntImm(mn, value.dtype), bounds_all))
    bounds_in = {v: (0, e - 1) for v, e in new_extents.items()}
    pred = _simplify_pred(_conjuncts(substitute(in_pred, loop_shift)), bounds_in)
    in_block = Block(
        block.name,
        tuple(ivs),
        tuple(values),
        BufferStore(store.buffer, substitute(ite.true_value, repl_in),
                    tuple(substitute(i, repl_in) for i in store.indices)),
        predicate=pred,
    )
    in_nest: Stmt = in_block
    for lp in reversed(loops[in_idx:]):
        in_nest = replace(lp, extent=new_extents[lp.loop_var], body=in_nest)

    # -- splice: the fill goes right before loop ``idx``; the nest replaces ``in_idx``
    pos = {id(s): k for k, s in enumerate(bpath)}
    c_at, i_at = pos[id(loops[idx])], pos[id(loops[in_idx])]
    node: Stmt = in_nest
    for k in range(i_at - 1, c_at - 1, -1):
        node = replace_child(bpath[k], bpath[k + 1], node)
    return replace_path(func, bpath[: c_at + 1], SeqStmt((const_nest, node))), const_name


__all__ = [
    "PaddingPatternMatchError",
    "can_decompose_padding",
    "decompose_padding",
]
