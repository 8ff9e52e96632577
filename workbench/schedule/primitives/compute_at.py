"""Compute location: compute_at and reverse_compute_at.

``compute_at(block, loop)`` moves a producer under a loop of its consumers and
regenerates its loops so that, at each iteration of ``loop``, it computes exactly
the region its consumers under that loop read (a halo included, e.g. a conv2d
padding stage). ``reverse_compute_at`` moves a consumer under a loop of its
producers, covering exactly what they produce there.

mm_relu after ``split(j, [None, 4]); reorder(j_0, k, j_1)`` and then
``reverse_compute_at(C, j_0)``::

    for i, j_0 in T.grid(128, 32):
        for k, j_1 in T.grid(128, 4):
            with T.block("Y"): ...
        for ax0 in range(4):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + ax0)

New loops are named ``ax0, ax1, ...``; with ``preserve_unit_loops=False`` a loop of
extent 1 is not created (its iter var is bound to the region's start). ``index``
is the position among the loop body's children: ``-1`` the last legal position,
``-2`` the first legal one, or an explicit index.

The ranges of the new loops follow TVM's CalculateBlockVarDomain. What the blocks on
the other side of the data flow access under the loop is relaxed over their inner
loops (:mod:`workbench.ir.intset`, so ``(i * 8 + j) // 16`` stays one element). That
region is then mapped back onto the moved block's iter vars through the block's own
access indices: where they are a one-to-one affine map of its iter vars
(``temp[v // 16, v % 16]``, a layout transform ``B[(v1 * 8 + v4) // 16, ...]``,
``Y[9 - vi, 9 - vj]``) the map is inverted at the region's corners
(:mod:`workbench.ir.iter_map`); otherwise each dimension is solved alone (``v``,
``v * c`` as a blockized block's ``B[vo * 16 : vo * 16 + 16]``, ``v // c``, ``v % c``).
A range that may leave the iter var's domain or the buffer gets a ``T.where`` guard,
unless it is a constant range, which is simply cut to the domain (a ``T.where(j < 1)``
consumer then needs one element, not 32).

The rules of what may move are TVM's: compute_at needs every consumer under the loop and
refuses an output block (one writing a buffer its scope block does not allocate, e.g. a
function parameter), reverse_compute_at needs every producer under the loop; it accepts
a reduction block, whose reduction then runs piece by piece across the loop's
iterations. Loops of extent 1 around the target loop count as 0 in the new bindings and
guards, and an iter var of extent 1 read as a whole index is mapped like any other (it
gets a guard where the loop moves past it), as TVM's analysis does. Deliberate divergences:
reverse_compute_at refuses where the moved block would not cover its whole domain over
all iterations (:class:`DomainNotCoveredError`; TVM leaves part of the output
uncomputed), and compute_at keeps a dimension no pattern solves at its full range where
TVM raises an internal error.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, Buffer, For, IntImm, PrimExpr, PrimFunc, SeqStmt, Stmt, Var
from ...ir.buffer import shares_storage
from ...ir.expr import LE, LT, FloorDiv, FloorMod, Mul, const
from ...ir.functor import expr_vars, iter_stmts, stmt_exprs, substitute
from ...ir.intset import EMPTY, eval_interval, interval_union, prove_le, smax, smin
from ...ir.iter_map import detect_iter_map, inverse_iter_map
from ...ir.simplify import and_, floordiv, int_range, simplify
from ..errors import ScheduleError
from ._common import (
    check_starts_at_zero,
    consumers_of,
    find_block_path,
    find_loop_path,
    fresh_name,
    loop_bounds,
    names_in_scope,
    producers_of,
    remove_stmt,
    replace_path,
    scope_blocks,
    scope_of,
)
from .compute_inline import OutputBlockError

# ---------------------------------------------------------------------------
# errors


class BlockUsesOuterLoopError(ScheduleError):
    """The block's body uses a loop above it directly, not through its iter vars
    (loop_partition's opaque blocks): it cannot move under other loops."""


class NotInSameScopeError(ScheduleError):
    """The block and the loop are in different block scopes."""


class LoopAboveBlockError(ScheduleError):
    """The block already sits under the target loop (or the loop is inside the block)."""


class NotProducerUnderLoopError(ScheduleError):
    """compute_at: none of the block's consumers is under the loop."""


class NotConsumerUnderLoopError(ScheduleError):
    """reverse_compute_at: none of the block's producers is under the loop."""


class ConsumersOutsideLoopError(ScheduleError):
    """compute_at: some consumers are outside the loop and would read partial data."""


class ProducersOutsideLoopError(ScheduleError):
    """reverse_compute_at: some producers of the block are not under the loop (TVM
    requires all of them there)."""


class DependencyOrderError(ScheduleError):
    """Moving the block would put it before a producer or after a consumer."""


class NotCompleteBlockError(ScheduleError):
    """The block is not a complete (or, where allowed, reduction) block."""


class RegionNotInvertibleError(ScheduleError):
    """The accessed region cannot be mapped back onto the block's iter vars."""


class InvalidIndexError(ScheduleError, ValueError):
    """``index`` is not a legal insertion position under the loop."""


# ---------------------------------------------------------------------------
# region analysis (TVM's RelaxBufferRegions and CalculateBlockVarDomain)

Box = list  # per dimension an interval (lo, hi) of expressions, both inclusive


def _inner_loops(path: list[Stmt], loop: For) -> dict[Var, tuple[int, int]]:
    """Loops strictly below ``loop`` on ``path`` (up to the block at its end)."""
    out: dict[Var, tuple[int, int]] = {}
    below = False
    for s in path[:-1]:
        if s is loop:
            below = True
        elif below and isinstance(s, For):
            out[s.loop_var] = (s.min, s.end - 1)
    return out


def _bindings(block: Block) -> dict[Var, PrimExpr]:
    return {iv.var: v for iv, v in zip(block.iter_vars, block.iter_values, strict=True)}


def _under(path: list[Stmt], loop: For) -> bool:
    return any(s is loop for s in path)


def _region_box(region, bindings, dom, bounds) -> Box:
    """The box a region (in a block's iter vars) covers once its bindings are substituted
    and the loops of ``dom`` range over their intervals; a dimension without an interval
    is None."""
    box: Box = []
    for mn, ext in region:
        lo = simplify(substitute(mn, bindings), bounds) if bindings else mn
        hi = simplify(substitute(mn + ext - 1, bindings), bounds) if bindings else mn + ext - 1
        a, b = eval_interval(lo, dom, bounds), eval_interval(hi, dom, bounds)
        box.append(None if a is None or b is None or a is EMPTY or b is EMPTY else (a[0], b[1]))
    return box


def _union_boxes(boxes: list[Box], bounds) -> Box:
    out = list(boxes[0])
    for box in boxes[1:]:
        out = [interval_union(a, b, bounds) for a, b in zip(out, box, strict=True)]
    return out


def _const_iv(lo: int | PrimExpr, hi: int | PrimExpr):
    # a symbolic extent gives a symbolic end (``n - 1``)
    return (lo if isinstance(lo, PrimExpr) else const(lo)), (
        hi if isinstance(hi, PrimExpr) else const(hi)
    )


def _required(own, others: list[Block], their, paths, loop: For, relax_threads: bool, bounds):
    """Per buffer of ``own`` (the moved block's writes, or reads): the union box of what
    ``others`` under ``loop`` access of it through ``their`` (their reads, or writes), the
    loops between each of them and ``loop`` relaxed (and, for compute_at, the thread loops
    whose threads share the buffer)."""
    out: dict[Buffer, Box] = {}
    for mine in own or ():
        buf = mine.buffer
        if buf in out:
            continue
        boxes = []
        for other in others:
            accesses = [a for a in their(other) or () if a.buffer is buf]
            if not accesses:
                continue
            inner = _inner_loops(paths[other.name], loop)
            if relax_threads:
                inner.update(_shared_across_threads(paths[other.name], loop, buf))
            dom = {v: _const_iv(*r) for v, r in inner.items()}
            for a in accesses:
                boxes.append(_region_box(a.region, _bindings(other), dom, bounds))
        if boxes:
            box = _union_boxes(boxes, bounds)
            out[buf] = [
                iv if iv is not None else _const_iv(0, dim - 1)
                for iv, dim in zip(box, buf.shape, strict=True)
            ]
    return out


class _VarDomain:
    """TVM's BlockVarDomainInfo: the range an iter var must cover (``dom``) and the range
    it may take without leaving a buffer or its own domain (``bound``)."""

    def __init__(self) -> None:
        self.dom = None
        self.bound = None

    def union(self, dom, bound, bounds) -> None:
        self.dom = dom if self.dom is None else interval_union(self.dom, dom, bounds)
        if bound is not None:
            self.bound = bound if self.bound is None else interval_union(self.bound, bound, bounds)


def _same(a: PrimExpr, b: PrimExpr, bounds) -> bool:
    """Provably equal (given the loop ranges in ``bounds``)."""
    return prove_le(a, b, bounds) and prove_le(b, a, bounds)


def _intersect(a, b, bounds):
    return smax(a[0], b[0], bounds), smin(a[1], b[1], bounds)


def _solve_point_or_scaled(p, r, dim_max: int, iter_vars, bounds):
    """TVM's SolveBlockVarDomain for one dimension: the provided interval ``p`` (in the
    block's iter vars) must cover the required interval ``r``. Returns (var, dom, bound),
    (var, None, None) for "no constraint", or None where no pattern matches."""
    pmin, pmax = p
    if isinstance(pmin, Mul):
        for x, c in ((pmin.a, pmin.b), (pmin.b, pmin.a)):
            if isinstance(x, Var) and x in iter_vars and isinstance(c, IntImm) and c.value > 0:
                e = c.value
                dom = (floordiv(r[0], const(e), bounds), floordiv(r[1], const(e), bounds))
                return x, dom, _const_iv(0, dim_max // e)
    if not _same(pmin, pmax, bounds):
        return None
    if pmin in iter_vars:
        return pmin, r, _const_iv(0, dim_max)
    if isinstance(pmin, FloorDiv) and isinstance(pmin.b, IntImm) and pmin.b.value >= 1:
        f = pmin.b.value
        req = (simplify(r[0] * f, bounds), simplify(r[1] * f + (f - 1), bounds))
        if pmin.a in iter_vars:
            return pmin.a, req, _const_iv(0, dim_max * f + f - 1)
        return _solve_point_or_scaled((pmin.a, pmin.a), req, dim_max * f + f - 1, iter_vars,
                                      bounds)
    if isinstance(pmin, FloorMod) and pmin.a in iter_vars:
        return pmin.a, None, None
    return None


def _var_domains(
    primitive: str,
    func: PrimFunc,
    block: Block,
    own,
    required: dict[Buffer, Box],
    exact: bool,
    bounds,
    where: dict,
) -> dict[Var, tuple[tuple[PrimExpr, PrimExpr], tuple[PrimExpr, PrimExpr] | None]]:
    """Per iter var of ``block``: (dom, bound), the interval its new loop must cover and,
    where that interval may leave it, the interval that keeps it inside its domain and the
    buffers (TVM's CalculateBlockVarDomain). ``own`` are the block's accesses that provide
    the ``required`` boxes: writes for compute_at, reads for reverse_compute_at.

    Per buffer, a map from iter vars to points that TVM's affine analysis inverts is
    inverted at the box's corners; otherwise each dimension is solved alone
    (``v``, ``v * c``, ``v // c`` and ``v % c`` patterns). With ``exact`` (reverse_compute_at)
    a dimension no pattern solves is refused; otherwise its iter var covers its domain."""
    iter_vars = {iv.var: iv for iv in block.iter_vars}
    doms: dict[Var, _VarDomain] = {v: _VarDomain() for v in iter_vars}
    provided: dict[Buffer, list[Box]] = {}
    for acc in own or ():
        if acc.buffer in required:
            provided.setdefault(acc.buffer, []).append(
                [(mn, simplify(mn + ext - 1)) for mn, ext in acc.region]
            )
    for buf, boxes in provided.items():
        p = _union_boxes(boxes, None)
        r = required[buf]
        if all(iv is not None and _same(iv[0], iv[1], None) for iv in p) and _update_affine(
            p, r, buf, iter_vars, doms, bounds
        ):
            continue
        for d, (pd, rd) in enumerate(zip(p, r, strict=True)):
            if pd is None:
                if exact:
                    raise _not_invertible(primitive, func, block, buf, d, where)
                continue
            if _same(pd[0], pd[1], None) and isinstance(simplify(pd[0]), IntImm):
                continue  # a constant index: nothing to solve
            solved = _solve_point_or_scaled(pd, rd, buf.shape[d] - 1, iter_vars, bounds)
            if solved is None:
                if exact:
                    raise _not_invertible(primitive, func, block, buf, d, where)
                continue
            var, dom, bound = solved
            if dom is not None:
                doms[var].union(dom, bound, bounds)
    out = {}
    for v, iv in iter_vars.items():
        info = doms[v]
        full = _const_iv(0, iv.extent - 1)
        bound = full if info.bound is None else _intersect(info.bound, full, bounds)
        if info.dom is None:
            out[v] = (bound, None)
            continue
        dom = (simplify(info.dom[0], bounds), simplify(info.dom[1], bounds))
        inter = _intersect(dom, bound, bounds)
        if _same(dom[0], inter[0], bounds) and _same(dom[1], inter[1], bounds):
            out[v] = (dom, None)
        elif _same(bound[0], inter[0], bounds) and _same(bound[1], inter[1], bounds):
            out[v] = (bound, None)
        elif isinstance(inter[0], IntImm) and isinstance(inter[1], IntImm):
            out[v] = (inter, None)
        else:
            out[v] = (dom, bound)
    return out


def _update_affine(p: Box, r: Box, buf: Buffer, iter_vars, doms, bounds) -> bool:
    """TVM's UpdateBlockVarDomainAffine: the provided point is a bijective affine map of
    the iter vars; invert it at the required box's corners (and at the buffer's)."""
    if not any(isinstance(iv.extent, PrimExpr) for iv in iter_vars.values()):
        return _update_affine_all(p, r, buf, iter_vars, doms, bounds)
    # symbolic extents: a dimension indexed by an iter var alone, used by no other
    # dimension, is its own identity piece of the map and is inverted directly, so its
    # extent may be symbolic (a padded batch ``(n + 3) // 4 * 4`` next to ``v0 * 8 + v1``);
    # the other dimensions must form a bijective map of iter vars with known extents
    lone = {}
    for d, (index, _) in enumerate(p):
        if isinstance(index, Var) and index in iter_vars and not any(
            index in expr_vars(other) for e, (other, _) in enumerate(p) if e != d
        ):
            lone[d] = index
    rest = [d for d in range(len(p)) if d not in lone]
    rest_vars = {v: iv.extent for v, iv in iter_vars.items() if v not in lone.values()}
    if not lone or not rest or any(isinstance(e, PrimExpr) for e in rest_vars.values()):
        return False  # the affine inversion needs known extents: solve per dimension
    m = detect_iter_map([p[d][0] for d in rest], rest_vars)
    if m is None:
        return False
    shape = [buf.shape[d] for d in rest]
    lo = inverse_iter_map(m, [r[d][0] for d in rest], bounds)
    hi = inverse_iter_map(m, [r[d][1] for d in rest], bounds)
    blo = inverse_iter_map(m, [const(0) for _ in shape])
    bhi = inverse_iter_map(m, [const(s - 1) for s in shape])
    if lo is None or hi is None or blo is None or bhi is None:
        return False
    for d, v in lone.items():
        doms[v].union(r[d], (const(0), simplify(buf.shape[d] - 1)), bounds)
    _union_inverse(p, r, buf, iter_vars, doms, bounds, lo, hi, blo, bhi)
    return True


def _update_affine_all(p: Box, r: Box, buf: Buffer, iter_vars, doms, bounds) -> bool:
    m = detect_iter_map([iv[0] for iv in p], {v: iv.extent for v, iv in iter_vars.items()})
    if m is None:
        return False
    lo = inverse_iter_map(m, [iv[0] for iv in r], bounds)
    hi = inverse_iter_map(m, [iv[1] for iv in r], bounds)
    blo = inverse_iter_map(m, [const(0) for _ in buf.shape])
    bhi = inverse_iter_map(m, [const(s - 1) for s in buf.shape])
    if lo is None or hi is None or blo is None or bhi is None:
        return False
    _union_inverse(p, r, buf, iter_vars, doms, bounds, lo, hi, blo, bhi)
    return True


def _union_inverse(p: Box, r: Box, buf: Buffer, iter_vars, doms, bounds, lo, hi, blo, bhi):
    for v in lo:
        dom = (smin(lo[v], hi[v], bounds), smax(lo[v], hi[v], bounds))
        bound = (smin(blo[v], bhi[v]), smax(blo[v], bhi[v]))
        doms[v].union(dom, bound, bounds)
    # a unit iter var that is a whole index stays an iterator in TVM's map (it does not
    # simplify trivial iterators away): it must cover the required range of that index
    for d, (index, _) in enumerate(p):
        iv = iter_vars.get(index) if isinstance(index, Var) else None
        if iv is not None and iv.extent == 1 and index not in lo:
            doms[index].union(r[d], _const_iv(0, buf.shape[d] - 1), bounds)


# ---------------------------------------------------------------------------
# shared machinery


def _check_no_outer_loop_use(primitive: str, func: PrimFunc, bpath: list[Stmt], scope: Block,
                             block: Block, where: dict) -> None:
    """Refuse a block whose body uses a loop above it other than through its bindings
    (the opaque ``<B>_<i>_common`` block loop_partition makes, whose inner blocks bind
    to the loops around it): moved under other loops, those uses would dangle."""
    above = {s.loop_var for s in bpath[bpath.index(scope) + 1:-1] if isinstance(s, For)}
    if not above:
        return
    for part in (block.body, block.init):
        for s in iter_stmts(part) if part is not None else ():
            for e in stmt_exprs(s):
                used = expr_vars(e) & above
                if used:
                    v = sorted(used, key=lambda x: x.name)[0]
                    raise BlockUsesOuterLoopError(
                        primitive,
                        f'block "{block.name}" uses loop "{v.name}" above it in its body, not '
                        "through its iter vars; moved elsewhere, that use would be left "
                        "without its loop",
                        func,
                        loops=[v],
                        blocks=[block.name],
                    )


def _prepare(primitive: str, func: PrimFunc, block_name: str, loop_var: Var):
    bpath = find_block_path(func, primitive, block_name)
    lpath = find_loop_path(func, primitive, loop_var)
    block: Block = bpath[-1]  # type: ignore[assignment]
    loop: For = lpath[-1]  # type: ignore[assignment]
    where = {"loops": [loop_var], "blocks": [block_name]}
    if _under(bpath, loop):
        raise LoopAboveBlockError(
            primitive,
            f'loop "{loop_var.name}" is an ancestor of block "{block_name}" (the block is '
            "already under it); choose a loop outside the block's own loop nest",
            func,
            **where,
        )
    check_starts_at_zero(func, primitive, lpath)  # the target and the loops around it
    scope = scope_of(bpath)
    _check_no_outer_loop_use(primitive, func, bpath, scope, block, where)
    if scope_of(lpath + [block]) is not scope:
        raise NotInSameScopeError(
            primitive,
            f'block "{block_name}" and loop "{loop_var.name}" are not in the same block scope',
            func,
            **where,
        )
    siblings = scope_blocks(scope)
    paths = {b.name: find_block_path(func, primitive, b.name) for b in siblings}
    return bpath, block, loop, siblings, paths, where


def _cover(
    primitive: str,
    func: PrimFunc,
    block: Block,
    doms: dict,
    loop: For,
    preserve_unit_loops: bool,
) -> Stmt:
    """The block under new loops ``ax0, ax1, ...`` covering each iter var's ``dom``, with
    a predicate where an iter var could leave its ``bound`` (TVM's MakeNewLoop)."""
    taken = names_in_scope(func, find_loop_path(func, primitive, loop.loop_var), block)
    bounds = loop_bounds(func)
    all_loops = {s.loop_var: s.extent for s in iter_stmts(func.body) if isinstance(s, For)}
    shape_vars = set(func.shape_vars)

    def sym_le(a: PrimExpr, b: PrimExpr, bound_value_above: bool) -> bool:
        """``a <= b`` shown through :func:`_sym_bound` of the side holding the value
        (symbolic loops: ``fused // n + ax1 < 32`` under ``fused`` in ``[0, 32 * n)``)."""
        if not shape_vars:
            return False
        if bound_value_above:
            top = _sym_bound(a, all_loops, shape_vars, upper=True)
            return top is not None and prove_le(top, b, bounds)
        low = _sym_bound(b, all_loops, shape_vars, upper=False)
        return low is not None and prove_le(a, low, bounds)

    loops: list[tuple[Var, int]] = []
    values: list[PrimExpr] = []
    guards: list[PrimExpr] = []
    # loops of extent 1 around the target loop are 0 (TVM's analyzer knows their range)
    lpath = find_loop_path(func, primitive, loop.loop_var)
    units = {s.loop_var: const(0, s.loop_var.dtype) for s in lpath
             if isinstance(s, For) and isinstance(s.extent, int) and s.extent == 1}
    for iv in block.iter_vars:
        (lo, hi), bound = doms[iv.var]
        if units:
            lo, hi = simplify(substitute(lo, units)), simplify(substitute(hi, units))
        upper = None
        ext_e = simplify(hi - lo + 1, bounds)
        if isinstance(ext_e, IntImm):
            ext = ext_e.value
        else:  # a symbolic extent: loop over its largest value, guard the rest
            _, ext = int_range(ext_e, bounds)
            upper = hi
        too_big = isinstance(iv.extent, int) and ext is not None and ext > iv.extent
        if ext is None or ext < 1 or too_big and upper is not None:
            lo, ext, bound, upper = const(0), iv.extent, None, None
        if ext == 1 and not preserve_unit_loops:
            value = simplify(lo, bounds)
        else:
            ax = Var(fresh_name(f"ax{len(loops)}", taken), iv.var.dtype)  # int64 stays
            loops.append((ax, ext))
            bounds[ax] = (0, ext - 1)
            all_loops[ax] = ext
            value = simplify(lo + ax, bounds)
        if bound is not None:
            if not prove_le(bound[0], value, bounds) and not sym_le(bound[0], value, False):
                guards.append(_guard(LE, bound[0], value))
            if not prove_le(value, bound[1], bounds) and not sym_le(value, bound[1], True):
                guards.append(_guard(LT, value, simplify(bound[1] + 1)))
        if upper is not None and not prove_le(value, upper, bounds):
            guards.append(LE(value, upper))
        values.append(value)
    predicate = _carried_predicate(block, values)
    # in the guards a new loop of extent 1 is 0 (TVM simplifies the predicate knowing it)
    unit_axes = {ax: const(0, ax.dtype) for ax, ext in loops if ext == 1}
    for g in guards:
        if unit_axes:
            g = type(g)(simplify(substitute(g.a, unit_axes)), simplify(substitute(g.b, unit_axes)))
        predicate = and_(predicate, g)
    new_block = replace(block, iter_values=tuple(values), predicate=simplify(predicate, bounds))
    stmt: Stmt = new_block
    for ax, ext in reversed(loops):
        stmt = For(ax, ext, "serial", stmt)
    return stmt


def _guard(cmp, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``a <cmp> b`` with the constant terms gathered on the constant side, as TVM's
    simplifier writes it: ``16 <= i`` rather than ``i - 16 >= 0``."""
    from ...ir.simplify import _build, _linear

    ta, ca = _linear(a)
    tb, cb = _linear(b)
    if not ta and tb:  # c <cmp> expr + d   ->   c - d <cmp> expr  (in expr's index type)
        return cmp(const(ca - cb, b.dtype), _build(tb, 0, b.dtype))
    if ta and not tb:  # expr + d <cmp> c   ->   expr <cmp> c - d
        return cmp(_build(ta, 0, a.dtype), const(cb - ca, a.dtype))
    return cmp(a, b)


def _carried_predicate(block: Block, values: list[PrimExpr]) -> PrimExpr:
    """The block's old predicate over its new loops. It names the old loops; where those
    were bound directly to iter vars (``vk_0 = k_0``), it is rewritten through the new
    bindings. Otherwise it is dropped: the new loops then cover only the iter-var domains
    (guards are added for that), which is what a split predicate protected."""
    if isinstance(block.predicate, IntImm) and block.predicate.value:
        return block.predicate
    mapping = {}
    for old, new in zip(block.iter_values, values, strict=True):
        if isinstance(old, Var):
            mapping[old] = new
    used = expr_vars(block.predicate)
    if used and used <= set(mapping):
        return simplify(substitute(block.predicate, mapping))
    return const(True)


def _insert(
    primitive: str,
    func: PrimFunc,
    loop_var: Var,
    stmt: Stmt,
    before: set[str],
    after: set[str],
    index: int,
    where: dict,
) -> PrimFunc:
    """Insert ``stmt`` among the children of loop ``loop_var``: after every child
    holding a block in ``after`` and before every child holding one in ``before``."""
    lpath = find_loop_path(func, primitive, loop_var)
    loop: For = lpath[-1]  # type: ignore[assignment]
    children = list(loop.body.stmts) if isinstance(loop.body, SeqStmt) else [loop.body]

    def holds(child: Stmt, names: set[str]) -> bool:
        return any(isinstance(s, Block) and s.name in names for s in iter_stmts(child))

    first = max((i + 1 for i, c in enumerate(children) if holds(c, after)), default=0)
    last = min((i for i, c in enumerate(children) if holds(c, before)), default=len(children))
    if first > last:
        raise DependencyOrderError(
            primitive,
            f'under loop "{loop_var.name}" a block that block "{where["blocks"][0]}" depends on '
            "comes after a block that depends on it; there is no legal position",
            func,
            **where,
        )
    if index == -1:
        pos = last
    elif index == -2:
        pos = first
    elif 0 <= index <= len(children) and first <= index <= last:
        pos = index
    else:
        raise InvalidIndexError(
            primitive,
            f'index {index} is not a legal position for block "{where["blocks"][0]}" under loop '
            f'"{loop_var.name}": use -1, -2 or a value from {first} to {last}',
            func,
            **where,
        )
    children.insert(pos, stmt)
    return replace_path(func, lpath, loop.with_body(SeqStmt(tuple(children))))


def _check_index(primitive: str, func: PrimFunc, index: int, where: dict) -> None:
    if isinstance(index, bool) or not isinstance(index, int) or index < -2:
        raise InvalidIndexError(
            primitive,
            f'index for block "{where["blocks"][0]}" under loop "{where["loops"][0].name}" must '
            f"be -1, -2 or a position >= 0, got {index!r}",
            func,
            **where,
        )


# ---------------------------------------------------------------------------
# the primitives


def compute_at(
    func: PrimFunc,
    block_name: str,
    loop_var: Var,
    preserve_unit_loops: bool = False,
    index: int = -1,
) -> PrimFunc:
    """Move producer ``block_name`` under loop ``loop_var`` of its consumers."""
    p = "compute_at"
    bpath, block, loop, siblings, paths, where = _prepare(p, func, block_name, loop_var)
    _check_index(p, func, index, where)
    writes = {w.buffer for w in block.writes or ()}
    for other in siblings:
        if other is not block and any(w.buffer in writes for w in other.writes or ()):
            raise NotCompleteBlockError(
                p,
                f'block "{block_name}" is not a complete block (block "{other.name}" also '
                "writes its output) nor a reduction block",
                func,
                **where,
            )
    scope = scope_of(bpath)
    outputs = [w.buffer.name for w in block.writes or () if w.buffer not in scope.alloc_buffers]
    if outputs:  # TVM's CheckNotOutputBlock
        raise OutputBlockError(
            p,
            f'block "{block_name}" is an output block: it writes "{outputs[0]}", which its scope '
            f'block "{scope.name}" does not allocate; it cannot move under loop "{loop_var.name}"',
            func,
            **where,
        )
    consumers = consumers_of(block, siblings)
    inside = [c for c in consumers if _under(paths[c.name], loop)]
    if not inside:
        raise NotProducerUnderLoopError(
            p,
            f'block "{block_name}" is not a producer of any block under loop "{loop_var.name}"; '
            "compute_at requires all the consumer(s) of the block to be under the loop",
            func,
            **where,
        )
    outside = [c.name for c in consumers if c not in inside]
    if outside:
        names = ", ".join(f'"{n}"' for n in outside)
        raise ConsumersOutsideLoopError(
            p,
            f'block "{block_name}" also feeds {names} outside loop "{loop_var.name}", which '
            "would read partial results; compute_at requires all the consumer(s) of the block "
            "to be under the loop",
            func,
            loops=[loop_var],
            blocks=[block_name, *outside],
        )
    for prod in producers_of(block, siblings):
        if _under(paths[prod.name], loop):  # (a valid program never has this)
            raise DependencyOrderError(
                p,
                f'block "{block_name}" reads from block "{prod.name}", which is under loop '
                f'"{loop_var.name}"',
                func,
                loops=[loop_var],
                blocks=[block_name, prod.name],
            )
    bounds = loop_bounds(func)
    required = _required(block.writes, inside, lambda b: b.reads, paths, loop, True, bounds)
    doms = _var_domains(p, func, block, block.writes, required, False, bounds, where)
    nest = _cover(p, func, block, doms, loop, preserve_unit_loops)
    func = remove_stmt(func, bpath, p)
    before = {c.name for c in inside}
    return _insert(p, func, loop_var, nest, before, set(), index, where)


def reverse_compute_at(
    func: PrimFunc,
    block_name: str,
    loop_var: Var,
    preserve_unit_loops: bool = False,
    index: int = -1,
) -> PrimFunc:
    """Move consumer ``block_name`` under loop ``loop_var`` of its producers.

    As in TVM, the block may be a reduction (its reduction then runs in pieces, one per
    iteration of the loop, in order), and every one of its producers must be under the
    loop."""
    p = "reverse_compute_at"
    bpath, block, loop, siblings, paths, where = _prepare(p, func, block_name, loop_var)
    _check_index(p, func, index, where)
    if block.init is not None and not block.is_reduction:
        raise NotCompleteBlockError(
            p,
            f'block "{block_name}" has an init statement but no reduction iter var: it is '
            "neither a complete block nor a reduction block, so it cannot be moved under loop "
            f'"{loop_var.name}"',
            func,
            **where,
        )
    producers = producers_of(block, siblings)
    inside = [b for b in producers if _under(paths[b.name], loop)]
    if not inside:
        raise NotConsumerUnderLoopError(
            p,
            f'block "{block_name}" is not a consumer of any block under loop "{loop_var.name}"; '
            "reverse_compute_at requires all the producer(s) of the block to be under the loop",
            func,
            **where,
        )
    outside = [b.name for b in producers if b not in inside]
    if outside:
        names = ", ".join(f'"{n}"' for n in outside)
        raise ProducersOutsideLoopError(
            p,
            f'block "{block_name}" also reads from {names} outside loop "{loop_var.name}"; '
            "reverse_compute_at requires all the producer(s) of the block to be under the loop",
            func,
            loops=[loop_var],
            blocks=[block_name, *outside],
        )
    for cons in consumers_of(block, siblings):
        if _under(paths[cons.name], loop):
            raise DependencyOrderError(
                p,
                f'block "{cons.name}" under loop "{loop_var.name}" reads what block '
                f'"{block_name}" writes',
                func,
                loops=[loop_var],
                blocks=[block_name, cons.name],
            )
    bounds = loop_bounds(func)
    required = _required(block.reads, inside, lambda b: b.writes, paths, loop, False, bounds)
    doms = _var_domains(p, func, block, block.reads, required, True, bounds, where)
    _check_covers_domain(p, func, block, doms, where)
    nest = _cover(p, func, block, doms, loop, preserve_unit_loops)
    func = remove_stmt(func, bpath, p)
    after = {b.name for b in inside}
    return _insert(p, func, loop_var, nest, set(), after, index, where)


def _shared_across_threads(path: list[Stmt], loop: For, buffer: Buffer) -> dict:
    """Thread-bound loops at or above ``loop`` whose threads share ``buffer`` (a
    ``shared`` buffer is one per GPU block): the region must cover all of them."""
    out: dict[Var, tuple[int, int]] = {}
    for s in path:
        if isinstance(s, For) and s.kind == "thread_binding":
            if shares_storage(buffer.scope, s.thread_tag or ""):
                out[s.loop_var] = (s.min, s.end - 1)
        if s is loop:
            break
    return out


def _not_invertible(primitive, func, block, buffer, dim, where) -> RegionNotInvertibleError:
    return RegionNotInvertibleError(
        primitive,
        f'block "{block.name}" indexes dimension {dim} of "{buffer.name}" with an expression '
        "that cannot be solved for its iter vars (not an affine map of them, nor v, v * c, "
        f'v // c or v % c), so the region cannot be mapped onto them under loop '
        f'"{where["loops"][0].name}"',
        func,
        **where,
    )


class DomainNotCoveredError(ScheduleError):
    """Over all iterations of the loop, the moved block would not cover its whole domain
    (e.g. a padding stage whose border does not depend on the producer)."""


def _reaches(func: PrimFunc, end: PrimExpr, extent) -> bool:
    """Does ``end`` reach ``extent - 1`` at the loops' last iteration (symbolic extents:
    ``i_0 * 8 + 7`` under ``i_0`` in ``[0, (n + 7) // 8)`` reaches ``n - 1``)?"""
    from ...ir.expr import extent_expr
    from ...ir.functor import iter_stmts
    from ...ir.simplify import prove_nonneg, symbolic_max

    loops = {s.loop_var: s.extent for s in iter_stmts(func.body) if isinstance(s, For)}
    top = symbolic_max(end, loops)
    if top is None:
        top = _sym_bound(end, loops, set(func.shape_vars), upper=True)
    if top is None:
        return False
    shape_bounds = {v: (1, None) for v in func.shape_vars}
    return prove_nonneg(simplify(top - (extent_expr(extent, end.dtype) - 1)), shape_bounds)


def _sym_bound(e: PrimExpr, loops: dict, shape_vars: set, upper: bool) -> PrimExpr | None:
    """A bound (upper or lower) of ``e`` as every loop of ``loops`` (var -> extent, maybe
    symbolic) runs over ``[0, extent)``, for sums, products by non-negative constants,
    and ``x // d`` / ``x % d`` of a non-negative ``x`` by a positive constant or shape
    variable ``d`` (shape variables are at least 1). ``(32 * n - 1) // n`` is ``31``:
    the ``fused // n`` of a loop fused over ``(32, n)`` reaches 31. None if unknown."""
    from ...ir.expr import Add, Sub
    from ...ir.simplify import _linear

    def go(x: PrimExpr, up: bool) -> PrimExpr | None:
        if isinstance(x, IntImm):
            return x
        if isinstance(x, Var):
            if x not in loops:
                return x
            if not up:
                return const(0, x.dtype)
            ext = loops[x]
            return const(ext - 1, x.dtype) if isinstance(ext, int) else simplify(ext - 1)
        if isinstance(x, Add):
            a, b = go(x.a, up), go(x.b, up)
            return None if a is None or b is None else simplify(a + b)
        if isinstance(x, Sub):
            a, b = go(x.a, up), go(x.b, not up)
            return None if a is None or b is None else simplify(a - b)
        if isinstance(x, Mul) and isinstance(x.b, IntImm) and x.b.value >= 0:
            a = go(x.a, up)
            return None if a is None else simplify(a * x.b.value)
        divisor = isinstance(x, (FloorDiv, FloorMod)) and (
            (isinstance(x.b, IntImm) and x.b.value > 0) or x.b in shape_vars
        )
        if not divisor or go(x.a, False) is None or not prove_le(const(0, x.dtype),
                                                                  go(x.a, False)):
            return None
        if isinstance(x, FloorMod):
            return simplify(x.b - 1) if up else const(0, x.dtype)
        a = go(x.a, up)
        if a is None:
            return None
        if isinstance(x.b, Var):  # (k * d + c) // d == k + c // d; c in [-1, 0] is exact
            terms, cst = _linear(a)
            if len(terms) == 1 and terms[0][0] is x.b and cst in (-1, 0):
                return const(terms[0][1] + cst, x.dtype)
            if not terms and cst == 0:
                return const(0, x.dtype)
        return simplify(floordiv(a, x.b))

    return go(e, upper)


def _check_covers_domain(primitive, func, block: Block, doms, where) -> None:
    """reverse_compute_at: over all iterations of the loops the new ranges must cover
    each iter var's domain (TVM does not check this; a block that covers less would leave
    part of its output uncomputed)."""
    bounds = loop_bounds(func)
    loops = {s.loop_var: s.extent for s in iter_stmts(func.body) if isinstance(s, For)}
    for iv in block.iter_vars:
        (start, end), _ = doms[iv.var]
        lo, _ = int_range(start, bounds)
        _, hi = int_range(end, bounds)
        if lo is None:  # a symbolic start: ``fused // n`` starts at 0
            low = _sym_bound(start, loops, set(func.shape_vars), upper=False)
            lo = low.value if isinstance(low, IntImm) else None
        if hi is None and isinstance(iv.extent, int):
            high = _sym_bound(end, loops, set(func.shape_vars), upper=True)
            hi = high.value if isinstance(high, IntImm) else None
        if isinstance(iv.extent, PrimExpr) or hi is None:  # symbolic: prove it
            covered = lo is not None and lo <= 0 and _reaches(func, end, iv.extent)
        else:
            covered = lo is not None and lo <= 0 and hi >= iv.extent - 1
        if not covered:
            raise DomainNotCoveredError(
                primitive,
                f'under loop "{where["loops"][0].name}", block "{block.name}" would only run '
                f'for part of "{iv.var.name}" in [0, {iv.extent}) (the part its producers '
                "write there); the rest of its output would never be computed",
                func,
                **where,
            )
