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
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, Buffer, For, IntImm, PrimExpr, PrimFunc, SeqStmt, Stmt, Var
from ...ir.analysis import _relax
from ...ir.buffer import shares_storage
from ...ir.expr import GE, LT, const
from ...ir.functor import expr_vars, iter_stmts, substitute
from ...ir.simplify import and_, int_range, simplify, sub
from ..errors import ScheduleError
from ._common import (
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

# ---------------------------------------------------------------------------
# errors


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


class DependencyOrderError(ScheduleError):
    """Moving the block would put it before a producer or after a consumer."""


class NotCompleteBlockError(ScheduleError):
    """The block is not a complete (or, where allowed, reduction) block."""


class RegionNotInvertibleError(ScheduleError):
    """The accessed region cannot be mapped back onto the block's iter vars."""


class InvalidIndexError(ScheduleError, ValueError):
    """``index`` is not a legal insertion position under the loop."""


# ---------------------------------------------------------------------------
# region analysis


def _relaxed_region(
    regions, bindings: dict[Var, PrimExpr], inner: dict[Var, tuple[int, int]], buffer: Buffer
):
    """Union box of ``regions`` (in a block's iter vars) once its bindings are
    substituted and the loops in ``inner`` are relaxed over their ranges.
    Returns [(min, extent)] per dimension; a dimension that cannot be boxed spans
    the whole buffer."""
    boxes = []
    for r in regions:
        box = []
        for mn, ext in r.region:
            rel = _relax(simplify(substitute(mn, bindings)), inner, ext)
            box.append(rel)
        boxes.append(box)
    dims = []
    for d in range(buffer.ndim):
        pieces = [b[d] for b in boxes]
        if any(p is None for p in pieces):
            dims.append((const(0), None))  # not a box: the caller decides
            continue
        base, ext = pieces[0]
        lo, hi = 0, ext
        ok = True
        for mn, e in pieces[1:]:
            diff = simplify(sub(mn, base))
            if not isinstance(diff, IntImm):
                ok = False
                break
            lo, hi = min(lo, diff.value), max(hi, diff.value + e)
        dims.append((simplify(base + lo), hi - lo) if ok else (const(0), None))
    return dims


def _inner_loops(path: list[Stmt], loop: For) -> dict[Var, tuple[int, int]]:
    """Loops strictly below ``loop`` on ``path`` (up to the block at its end)."""
    out: dict[Var, tuple[int, int]] = {}
    below = False
    for s in path[:-1]:
        if s is loop:
            below = True
        elif below and isinstance(s, For):
            out[s.loop_var] = (0, s.extent - 1)
    return out


def _bindings(block: Block) -> dict[Var, PrimExpr]:
    return {iv.var: v for iv, v in zip(block.iter_vars, block.iter_values, strict=True)}


def _under(path: list[Stmt], loop: For) -> bool:
    return any(s is loop for s in path)


# ---------------------------------------------------------------------------
# shared machinery


def _prepare(primitive: str, func: PrimFunc, block_name: str, loop_var: Var):
    bpath = find_block_path(func, primitive, block_name)
    lpath = find_loop_path(func, primitive, loop_var)
    block: Block = bpath[-1]  # type: ignore[assignment]
    loop: For = lpath[-1]  # type: ignore[assignment]
    where = {"loops": [loop_var], "blocks": [block_name]}
    if _under(bpath, loop):
        raise LoopAboveBlockError(
            primitive,
            f'block "{block_name}" is already under loop "{loop_var.name}"; choose a loop '
            "outside the block's own loop nest",
            func,
            **where,
        )
    scope = scope_of(bpath)
    if scope_of(lpath + [block]) is not scope:
        raise NotInSameScopeError(
            primitive,
            f'block "{block_name}" and loop "{loop_var.name}" are in different block scopes',
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
    var_ranges: dict[Var, tuple[PrimExpr, int]],
    loop: For,
    preserve_unit_loops: bool,
    where: dict,
) -> Stmt:
    """The block under new loops covering ``var_ranges`` (iter var -> (min, extent)),
    with a predicate where the box could leave an iter var's domain."""
    taken = names_in_scope(func, find_loop_path(func, primitive, loop.loop_var), block)
    bounds = loop_bounds(func)
    loops: list[tuple[Var, int]] = []
    values: list[PrimExpr] = []
    guards: list[PrimExpr] = []
    for iv in block.iter_vars:
        mn, ext = var_ranges.get(iv.var, (const(0), iv.extent))
        if ext == 1 and not preserve_unit_loops:
            value = mn
        else:
            ax = Var(fresh_name(f"ax{len(loops)}", taken))
            loops.append((ax, ext))
            bounds[ax] = (0, ext - 1)
            value = simplify(mn + ax, bounds)
        lo, hi = int_range(value, bounds)
        if lo is None or lo < 0:
            guards.append(GE(value, const(0)))
        if hi is None or hi > iv.extent - 1:
            guards.append(LT(value, const(iv.extent)))
        values.append(value)
    predicate = _carried_predicate(block, values)
    for g in guards:
        predicate = and_(predicate, g)
    new_block = replace(block, iter_values=tuple(values), predicate=predicate)
    stmt: Stmt = new_block
    for ax, ext in reversed(loops):
        stmt = For(ax, ext, "serial", stmt)
    return stmt


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
                f'block "{block_name}" is not the only writer of its output: block '
                f'"{other.name}" writes it too',
                func,
                **where,
            )
    consumers = consumers_of(block, siblings)
    inside = [c for c in consumers if _under(paths[c.name], loop)]
    if not inside:
        raise NotProducerUnderLoopError(
            p,
            f'block "{block_name}" is not a producer of any block under loop "{loop_var.name}"',
            func,
            **where,
        )
    outside = [c.name for c in consumers if c not in inside]
    if outside:
        names = ", ".join(f'"{n}"' for n in outside)
        raise ConsumersOutsideLoopError(
            p,
            f'block "{block_name}" also feeds {names} outside loop "{loop_var.name}", which '
            "would read partial results",
            func,
            loops=[loop_var],
            blocks=[block_name, *outside],
        )
    for prod in producers_of(block, siblings):
        if _under(paths[prod.name], loop):
            raise DependencyOrderError(
                p,
                f'block "{block_name}" reads from block "{prod.name}", which is under loop '
                f'"{loop_var.name}"',
                func,
                loops=[loop_var],
                blocks=[block_name, prod.name],
            )
    var_ranges = _map_to_iters(
        p, func, block, _needed(block, inside, paths, loop), writes=True, where=where
    )
    nest = _cover(p, func, block, var_ranges, loop, preserve_unit_loops, where)
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
    """Move consumer ``block_name`` under loop ``loop_var`` of its producers."""
    p = "reverse_compute_at"
    bpath, block, loop, siblings, paths, where = _prepare(p, func, block_name, loop_var)
    _check_index(p, func, index, where)
    if block.init is not None or block.is_reduction:
        raise NotCompleteBlockError(
            p,
            f'block "{block_name}" is a reduction block; only complete blocks can be moved '
            f'under a loop of their producers (loop "{loop_var.name}")',
            func,
            **where,
        )
    producers = producers_of(block, siblings)
    inside = [b for b in producers if _under(paths[b.name], loop)]
    if not inside:
        raise NotConsumerUnderLoopError(
            p,
            f'block "{block_name}" is not a consumer of any block under loop "{loop_var.name}"',
            func,
            **where,
        )
    order = [b.name for b in siblings]
    loop_blocks = [b.name for b in siblings if _under(paths[b.name], loop)]
    first_in_loop = min(order.index(n) for n in loop_blocks)
    for prod in producers:
        if prod not in inside and order.index(prod.name) > first_in_loop:
            raise DependencyOrderError(
                p,
                f'block "{block_name}" reads from block "{prod.name}", which runs after loop '
                f'"{loop_var.name}"',
                func,
                loops=[loop_var],
                blocks=[block_name, prod.name],
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
    var_ranges = _map_to_iters(
        p, func, block, _produced(block, inside, paths, loop), writes=False, where=where
    )
    _check_covers_domain(p, func, block, var_ranges, where)
    nest = _cover(p, func, block, var_ranges, loop, preserve_unit_loops, where)
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
                out[s.loop_var] = (0, s.extent - 1)
        if s is loop:
            break
    return out


def _touched(own, others: list[Block], their, paths, loop: For) -> dict[Buffer, list]:
    """Per buffer in ``own`` (the moved block's writes, or reads): the union box of what
    ``others`` under ``loop`` access of it through ``their`` (their reads, or writes),
    with the loops below ``loop`` (and threads sharing the buffer) relaxed."""
    out: dict[Buffer, list] = {}
    for mine in own or ():
        buf = mine.buffer
        regions = []
        for other in others:
            inner = _inner_loops(paths[other.name], loop)
            inner.update(_shared_across_threads(paths[other.name], loop, buf))
            accesses = [a for a in their(other) or () if a.buffer is buf]
            if accesses:
                regions.append(_relaxed_region(accesses, _bindings(other), inner, buf))
        if regions:
            out[buf] = _union(regions)
    return out


def _needed(block: Block, consumers: list[Block], paths, loop: For) -> dict[Buffer, list]:
    """Per buffer the block writes: the region its consumers under ``loop`` read."""
    return _touched(block.writes, consumers, lambda b: b.reads, paths, loop)


def _produced(block: Block, producers: list[Block], paths, loop: For) -> dict[Buffer, list]:
    """Per buffer the block reads: the region its producers under ``loop`` write."""
    return _touched(block.reads, producers, lambda b: b.writes, paths, loop)


def _union(boxes: list[list]) -> list:
    """Per dimension, the union of the boxes; extent None where it is not a box."""
    dims = []
    for d in range(len(boxes[0])):
        base, ext = boxes[0][d]
        lo, hi = 0, ext
        for box in boxes[1:]:
            mn, e = box[d]
            diff = simplify(sub(mn, base))
            if hi is None or e is None or not isinstance(diff, IntImm):
                hi = None
                break
            lo, hi = min(lo, diff.value), max(hi, diff.value + e)
        dims.append((simplify(base + lo), None if hi is None else hi - lo))
    return dims


def _map_to_iters(
    primitive: str,
    func: PrimFunc,
    block: Block,
    regions: dict[Buffer, list],
    writes: bool,
    where: dict,
) -> dict[Var, tuple[PrimExpr, int]]:
    """Turn buffer boxes into iter-var ranges through the block's own access indices.

    compute_at (``writes``): an iter var that cannot be pinned keeps its whole domain,
    which is still correct (recomputation). reverse_compute_at: the consumer may only
    read what was produced, so every constraint must map exactly."""
    ranges: dict[Var, tuple[PrimExpr, int]] = {}
    iter_vars = {iv.var: iv for iv in block.iter_vars}
    accesses = block.writes if writes else block.reads
    for acc in accesses or ():
        box = regions.get(acc.buffer)
        if box is None:
            continue
        for d, ((idx, idx_ext), (mn, ext)) in enumerate(zip(acc.region, box, strict=True)):
            if ext is None and not writes:
                raise RegionNotInvertibleError(
                    primitive,
                    f'what the producers write of "{acc.buffer.name}" under loop '
                    f'"{where["loops"][0].name}" is not a rectangular tile (dimension {d}), so '
                    f'block "{block.name}" cannot be placed there exactly',
                    func,
                    **where,
                )
            if ext is None or not (isinstance(idx_ext, IntImm) and idx_ext.value == 1):
                if writes:
                    continue
                raise _not_invertible(primitive, func, block, acc.buffer, d, where)
            var, offset = _var_plus_const(idx, iter_vars)
            if var is None:
                if writes:
                    continue
                raise _not_invertible(primitive, func, block, acc.buffer, d, where)
            start = simplify(mn - offset)
            if var in ranges:
                old_start, old_ext = ranges[var]
                if not (isinstance(simplify(sub(old_start, start)), IntImm) and old_ext == ext):
                    raise _not_invertible(primitive, func, block, acc.buffer, d, where)
                continue
            ranges[var] = (start, ext)
    return ranges


def _var_plus_const(idx: PrimExpr, iter_vars) -> tuple[Var | None, int]:
    from ...ir.simplify import _linear

    terms, cst = _linear(idx)
    if len(terms) == 1 and terms[0][1] == 1 and terms[0][0] in iter_vars:
        return terms[0][0], cst  # type: ignore[return-value]
    return None, 0


def _not_invertible(primitive, func, block, buffer, dim, where) -> RegionNotInvertibleError:
    return RegionNotInvertibleError(
        primitive,
        f'block "{block.name}" indexes dimension {dim} of "{buffer.name}" with an expression '
        "that is not one iter var plus a constant, so the region cannot be mapped onto its "
        f'iter vars under loop "{where["loops"][0].name}"',
        func,
        **where,
    )


class DomainNotCoveredError(ScheduleError):
    """Over all iterations of the loop, the moved block would not cover its whole domain
    (e.g. a padding stage whose border does not depend on the producer)."""


def _check_covers_domain(primitive, func, block: Block, var_ranges, where) -> None:
    """reverse_compute_at: the union over the loops of the ranges must be the domain."""
    bounds = loop_bounds(func)
    for iv in block.iter_vars:
        if iv.var not in var_ranges:
            continue
        start, ext = var_ranges[iv.var]
        lo, hi = int_range(start, bounds)
        if lo is None or hi is None or lo > 0 or hi + ext < iv.extent:
            raise DomainNotCoveredError(
                primitive,
                f'under loop "{where["loops"][0].name}", block "{block.name}" would only run '
                f'for part of "{iv.var.name}" in [0, {iv.extent}) (the part its producers '
                "write there); the rest of its output would never be computed",
                func,
                **where,
            )
