"""Blocks and unit loops: blockize and add_unit_loop.

``blockize(i_1)`` wraps the loop nest under ``i_1`` (holding exactly one block) in a new
outer block ``<block>_o``. Every iter var ``v`` of the block is divided between the
loops above ``i_1`` (the outer block's iter var ``v_o``) and the loops from ``i_1`` down
(the inner block's iter var ``v_i``); the inner block's body uses ``v_o * e + v_i``.
The outer block's reads and writes are the inner ones relaxed over the inner loops.
Before, with ``i`` and ``j`` of ``B = A * 2`` split by 16::

    for i_0, j_0, i_1, j_1 in T.grid(8, 8, 16, 16):
        with T.block("B"):
            vi = T.axis.spatial(128, i_0 * 16 + i_1)
            vj = T.axis.spatial(128, j_0 * 16 + j_1)
            B[vi, vj] = A[vi, vj] * T.float32(2)

after ``blockize(i_1)`` (as TVM prints it)::

    for i_0, j_0 in T.grid(8, 8):
        with T.block("B_o"):
            vi_o, vj_o = T.axis.remap("SS", [i_0, j_0])
            T.reads(A[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
            T.writes(B[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
            for i_1, j_1 in T.grid(16, 16):
                with T.block("B"):
                    vi_i, vj_i = T.axis.remap("SS", [i_1, j_1])
                    B[vi_o * 16 + vi_i, vj_o * 16 + vj_i] = A[...] * T.float32(2)

A reduction block's ``init`` moves to the outer block, as a block ``<block>_init`` under
copies of the inner loops it needs.

``blockize_blocks([b_1, b_2, ...])`` (``sch.blockize`` of a list of blocks) wraps the
consecutive loop nests holding sibling blocks, from right below the blocks' lowest
common ancestor, into one block ``outer_<b_1>_<b_2>_..._``; the outer iter vars are
those of the first block, over the loops above that ancestor.

``add_unit_loop(block_or_loop)`` puts ``for u in range(1)`` right above a block or loop.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import (
    And,
    Block,
    For,
    IntImm,
    IterVar,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    const,
)
from ...ir.analysis import iter_blocks, loops_above
from ...ir.functor import expr_vars, substitute, uses_var
from ...ir.simplify import _build, _linear, simplify
from ..errors import InvalidScheduleArgumentError, ScheduleError
from ._common import (
    check_starts_at_zero,
    child_block_names,
    find_block_path,
    find_loop_path,
    fresh_name,
    is_root,
    replace_path,
    used_names,
)

# ---------------------------------------------------------------------------
# errors


class NotSingleBlockError(ScheduleError):
    """The loop must have exactly one block under it, in a perfect loop nest for
    blockize (rfactor, blockize)."""


class SubspaceNotDivisibleError(ScheduleError):
    """``blockize``: a binding or the predicate of the block cannot be split into a part
    over the loops above the target loop and a part over the loops from it down."""


class RootBlockError(ScheduleError):
    """``add_unit_loop``: the root block cannot get a loop above it."""


# ---------------------------------------------------------------------------
# blockize


def _divide(
    value: PrimExpr, extent: int, inner: dict[Var, int]
) -> tuple[PrimExpr, int, PrimExpr, int] | None:
    """Write ``value`` as ``outer * e + inner_part`` with ``outer`` over loops not in
    ``inner`` and ``inner_part`` in ``[0, e)`` over loops in ``inner`` (var -> extent).

    Returns ``(outer_binding, outer_extent, inner_binding, e)`` or None.
    """
    vars_ = expr_vars(value)
    zero = const(0, value.dtype)  # an int64 binding keeps int64 parts
    if not vars_ & inner.keys():
        return value, extent, zero, 1
    if vars_ <= inner.keys():
        return zero, 1, value, extent
    terms, cst = _linear(value)
    if any(not isinstance(t, Var) or c <= 0 for t, c in terms):
        return None
    in_terms = sorted(((t, c) for t, c in terms if t in inner and inner[t] > 1), key=lambda x: x[1])
    out_terms = [(t, c) for t, c in terms if t not in inner]
    stride = 1
    for t, c in in_terms:
        if c != stride:
            return None
        stride *= inner[t]
    if any(c % stride for _, c in out_terms) or cst % stride or extent % stride:
        return None
    outer = _build([(t, c // stride) for t, c in out_terms], cst // stride, value.dtype)
    return outer, extent // stride, _build(in_terms, 0, value.dtype), stride


def _split_predicate(pred: PrimExpr, inner: set[Var]) -> tuple[list, list, PrimExpr | None]:
    """(outer conjuncts, inner conjuncts, first conjunct mixing both or None)."""
    outer_parts, inner_parts = [], []
    stack = [pred]
    while stack:
        c = stack.pop()
        if isinstance(c, IntImm) and c.value:
            continue
        if isinstance(c, And):
            stack.extend((c.b, c.a))
            continue
        used = expr_vars(c)
        if not used & inner:
            outer_parts.append(c)
        elif used <= inner:
            inner_parts.append(c)
        else:
            return outer_parts, inner_parts, c
    return outer_parts, inner_parts, None


def conjuncts(pred: PrimExpr) -> list[PrimExpr]:
    """The conjuncts of ``pred`` (none for ``True``)."""
    if isinstance(pred, IntImm) and pred.value:
        return []
    if isinstance(pred, And):
        return conjuncts(pred.a) + conjuncts(pred.b)
    return [pred]


def and_all(parts: list[PrimExpr]) -> PrimExpr:
    """``parts[0] and parts[1] and ...`` (``True`` for none)."""
    out: PrimExpr = const(True)
    for p in parts:
        out = p if isinstance(out, IntImm) else And(out, p)
    return out


def block_names_in(func: PrimFunc) -> set[str]:
    """Names of every block of ``func`` (block names live apart from loop names)."""
    return {b.name for b in iter_blocks(func.body)}


def single_block_under(
    primitive: str, func: PrimFunc, loop_var: Var
) -> tuple[list[Stmt], list[Stmt]]:
    """(path to the loop, path to the only block under it) or NotSingleBlockError."""
    lpath = find_loop_path(func, primitive, loop_var)
    kids = child_block_names(lpath[-1])
    if len(kids) != 1:
        what = "no block" if not kids else f"{len(kids)} blocks ({', '.join(sorted(kids))})"
        raise NotSingleBlockError(
            primitive,
            f'loop "{loop_var.name}" has {what} under it; {primitive} needs exactly one',
            func,
            loops=[loop_var],
        )
    return lpath, find_block_path(func, primitive, next(iter(kids)))


def _inner_iter(iv: IterVar, o_var: Var, o_ext, i_val: PrimExpr, i_ext, preserve_unit_iters: bool,
                inner_ivs: list, inner_vals: list) -> PrimExpr:
    """What ``iv`` becomes inside a blockized block whose outer iter var is ``o_var``:
    a new inner iter var ``<name>_i`` (appended, with its binding ``i_val``) unless the
    inner extent is 1, where it is the outer var (or 0 for a unit outer extent when unit
    iters are not preserved)."""
    if i_ext == 1:
        unit = o_ext == 1 and not preserve_unit_iters
        return const(0, iv.var.dtype) if unit else o_var
    i_var = Var(f"{iv.var.name}_i", iv.var.dtype)
    inner_ivs.append(IterVar(i_var, i_ext, iv.kind))
    inner_vals.append(i_val)
    return i_var if o_ext == 1 else o_var * i_ext + i_var


def blockize(
    func: PrimFunc, loop_var: Var, preserve_unit_iters: bool = True
) -> tuple[PrimFunc, str]:
    """Wrap the loop nest under ``loop_var`` into a new block; returns
    ``(new_func, outer_block_name)``.

    The loops from ``loop_var`` down to the block must form a perfect nest around
    exactly one block, and every binding must divide into an outer part (loops above
    ``loop_var``) times the inner extent plus an inner part (the inner loops, as a
    mixed-radix sum) -- bindings over one side only always divide. With
    ``preserve_unit_iters=False`` loops of extent 1 count as 0 in the bindings.
    """
    p = "blockize"
    lpath, bpath = single_block_under(p, func, loop_var)
    loop: For = lpath[-1]  # type: ignore[assignment]
    name = bpath[-1].name  # type: ignore[attr-defined]
    block: Block = bpath[-1]  # type: ignore[assignment]
    start = next(i for i, s in enumerate(bpath) if s is loop)
    nest = bpath[start:-1]
    check_starts_at_zero(func, p, nest)
    for outer, inner in zip(nest, bpath[start + 1 :], strict=True):
        if not isinstance(outer, For) or outer.body is not inner:
            raise NotSingleBlockError(
                p,
                f'the statements under loop "{loop_var.name}" are not a perfect loop nest '
                f'around block "{name}"',
                func,
                loops=[loop_var],
                blocks=[name],
            )
    inner_loops: list[For] = nest  # type: ignore[assignment]
    inner_ext = {lp.loop_var: lp.extent for lp in inner_loops}
    values = list(block.iter_values)
    if not preserve_unit_iters:
        units = {lp.loop_var: const(lp.min, lp.loop_var.dtype)  # (may not start at 0)
                 for lp in loops_above(bpath) if lp.extent == 1}
        values = [simplify(substitute(v, units)) for v in values]

    def not_divisible(what: str) -> SubspaceNotDivisibleError:
        return SubspaceNotDivisibleError(
            p,
            f'{what} of block "{name}" cannot be divided between the loops above '
            f'loop "{loop_var.name}" and the loops from it down',
            func,
            loops=[loop_var],
            blocks=[name],
        )

    outer_ivs, outer_vals, inner_ivs, inner_vals = [], [], [], []
    subst: dict[Var, PrimExpr] = {}
    for iv, value in zip(block.iter_vars, values, strict=True):
        parts = _divide(value, iv.extent, inner_ext)
        if parts is None:
            raise not_divisible(f"the binding {iv.var.name} = {value}")
        o_val, o_ext, i_val, i_ext = parts
        o_var = Var(f"{iv.var.name}_o", iv.var.dtype)
        outer_ivs.append(IterVar(o_var, o_ext, iv.kind))
        outer_vals.append(o_val)
        subst[iv.var] = _inner_iter(iv, o_var, o_ext, i_val, i_ext, preserve_unit_iters,
                                    inner_ivs, inner_vals)
    outer_pred, inner_pred, mixed = _split_predicate(block.predicate, set(inner_ext))
    if mixed is not None:
        raise not_divisible(f"the predicate {mixed}")
    body = substitute(block.body, subst)
    init = substitute(block.init, subst) if block.init is not None else None
    inner_block = replace(
        block,
        iter_vars=tuple(inner_ivs),
        iter_values=tuple(inner_vals),
        body=body,
        init=None,
        predicate=and_all(inner_pred),
        reads=None,
        writes=None,
    )
    taken = block_names_in(func)
    inner_nest: Stmt = inner_block
    for lp in reversed(inner_loops):
        inner_nest = lp.with_body(inner_nest)
    outer_init = None
    if init is not None:
        outer_init = _outer_init(init, inner_block, inner_loops, fresh_name(f"{name}_init", taken))
    outer = Block(
        fresh_name(f"{name}_o", taken),
        tuple(outer_ivs),
        tuple(outer_vals),
        inner_nest,
        outer_init,
        and_all(outer_pred),
    )
    return replace_path(func, lpath, outer), outer.name


def _outer_init(init: Stmt, inner: Block, loops: list[For], name: str) -> Stmt:
    """The init of the outer block: a block ``name`` doing ``init`` under copies of the
    inner loops its spatial iter vars and the predicate need (TVM's GenerateOuterInit,
    which forgets the predicate's loops)."""
    ivs, vals, sub = [], [], {}
    for iv, value in zip(inner.iter_vars, inner.iter_values, strict=True):
        if iv.kind == "S" and _stmt_uses(init, iv.var):
            new = Var(f"{iv.var.name}_init", iv.var.dtype)
            sub[iv.var] = new
            ivs.append(IterVar(new, iv.extent, "S"))
            vals.append(value)
    loop_sub: dict[Var, PrimExpr] = {}
    # loops its bindings use, and those of the predicate (which would be undefined)
    exprs = [*vals, inner.predicate]
    used = [lp for lp in loops if any(uses_var(v, lp.loop_var) for v in exprs)]
    for lp in used:
        loop_sub[lp.loop_var] = Var(lp.loop_var.name, lp.loop_var.dtype)
    stmt: Stmt = Block(
        name,
        tuple(ivs),
        tuple(substitute(v, loop_sub) for v in vals),
        substitute(init, sub),
        None,
        substitute(inner.predicate, loop_sub),
    )
    for lp in reversed(used):
        stmt = For(loop_sub[lp.loop_var], lp.extent, lp.kind, stmt, lp.thread_tag, lp.annotations,
                   lp.min)
    return stmt


def _stmt_uses(stmt: Stmt, var: Var) -> bool:
    from ...ir.functor import iter_stmts, stmt_exprs

    return any(uses_var(e, var) for s in iter_stmts(stmt) for e in stmt_exprs(s))


# ---------------------------------------------------------------------------
# blockize of several blocks


class BlocksInDifferentScopesError(ScheduleError):
    """``blockize`` of blocks: a block lies inside another block below the blocks'
    lowest common ancestor (or is one of the other target blocks)."""


class BlocksNotConsecutiveError(ScheduleError):
    """``blockize`` of blocks: the statements holding the blocks are not next to each
    other under the blocks' lowest common ancestor."""


class BlocksOutOfOrderError(ScheduleError):
    """``blockize`` of blocks: the blocks are not given in program order. The outer
    block runs the nests in the order given (as TVM builds it), so another order would
    move a consumer before its producer; the workbench refuses it."""


class OuterBindingMismatchError(ScheduleError):
    """``blockize`` of blocks: the blocks' bindings (or predicates) over the loops
    above their common ancestor differ, so they cannot share the outer block's iter
    vars."""


class OuterReductionError(ScheduleError):
    """``blockize`` of blocks: a reduction block (one with an init) would get a
    reduction iter var in the outer block, which TVM does not support for several
    blocks."""


def blockize_blocks(
    func: PrimFunc, names: list[str], preserve_unit_iters: bool = True
) -> tuple[PrimFunc, str]:
    """Wrap sibling blocks into one new block ``outer_<b1>_<b2>_...`` right below
    their lowest common ancestor; returns ``(new_func, outer_block_name)``.

    Each block must be the only block of a perfect loop nest hanging from that
    ancestor, the nests must be consecutive statements there, and the blocks'
    bindings over the loops above the ancestor must agree iter var by iter var (they
    become the outer block's iter vars, ``<first block's iter var>_o``). The blocks must
    be given in program order (the nests go into the outer block in the order given).

    >>> import workbench as wb
    >>> from workbench.testing import shared_outer_loop_func
    >>> g, name = blockize_blocks(shared_outer_loop_func(8), ["B", "C"])
    >>> name
    'outer_B_C_'
    """
    from .merge import _lca_depth

    p = "blockize"
    if len(names) < 2 or len(set(names)) != len(names):
        raise InvalidScheduleArgumentError(
            p,
            f"needs at least two different blocks, got {list(names)}; blockize a single "
            "block through the loop above it",
            func,
            blocks=list(names),
        )
    paths = [find_block_path(func, p, n) for n in names]
    lca = _lca_depth(paths)
    for n, path in zip(names, paths, strict=True):
        inside = [s for s in path[lca:-1] if isinstance(s, Block)]
        if len(path) == lca + 1 or inside:
            outer_name = inside[0].name if inside else n
            raise BlocksInDifferentScopesError(
                p,
                f'block "{n}" is not in the block scope of the other blocks (block '
                f'"{outer_name}" lies between them)' if inside else
                f'block "{n}" encloses another of the blocks',
                func,
                blocks=[n] + ([outer_name] if inside else []),
            )
    container = paths[0][lca]
    assert isinstance(container, SeqStmt)  # the branches differ right below it
    index = {id(s): k for k, s in enumerate(container.stmts)}
    positions = sorted(index[id(path[lca + 1])] for path in paths)
    if positions != list(range(positions[0], positions[0] + len(positions))):
        raise BlocksNotConsecutiveError(
            p,
            f"blocks {', '.join(repr(n) for n in names)} are not in consecutive statements "
            "under their common ancestor",
            func,
            blocks=list(names),
        )
    outer_ivs: list[IterVar] = []
    outer_vals: list[PrimExpr] = []
    outer_pred_text: str | None = None
    outer_pred: list[PrimExpr] = []
    nests: list[Stmt] = []
    for n, path in zip(names, paths, strict=True):
        block: Block = path[-1]  # type: ignore[assignment]
        loops: list[For] = []
        for outer, inner in zip(path[lca + 1 : -1], path[lca + 2 :], strict=True):
            if not isinstance(outer, For) or outer.body is not inner:
                raise NotSingleBlockError(
                    p,
                    f'block "{n}" is not the only block of a perfect loop nest under the '
                    "blocks' common ancestor",
                    func,
                    blocks=[n],
                )
            loops.append(outer)
        inner_ext = {lp.loop_var: lp.extent for lp in loops}
        values = list(block.iter_values)
        if not preserve_unit_iters:
            units = {lp.loop_var: const(lp.min, lp.loop_var.dtype)  # (may not start at 0)
                     for lp in loops_above(path) if lp.extent == 1}
            values = [simplify(substitute(v, units)) for v in values]
        first = n == names[0]

        def mismatch(what: str, block_name: str = n) -> OuterBindingMismatchError:
            return OuterBindingMismatchError(
                p,
                f'{what} of block "{block_name}" over the loops above the common ancestor '
                f'differ from those of block "{names[0]}"',
                func,
                blocks=[block_name, names[0]],
            )

        if not first and len(block.iter_vars) != len(outer_ivs):
            raise mismatch("the iter vars")
        inner_ivs, inner_vals = [], []
        subst: dict[Var, PrimExpr] = {}
        for k, (iv, value) in enumerate(zip(block.iter_vars, values, strict=True)):
            parts = _divide(value, iv.extent, inner_ext)
            if parts is None:
                raise SubspaceNotDivisibleError(
                    p,
                    f'the binding {iv.var.name} = {value} of block "{n}" cannot be divided '
                    "between the loops above the blocks' common ancestor and those below it",
                    func,
                    blocks=[n],
                )
            o_val, o_ext, i_val, i_ext = parts
            if first:
                o_var = Var(f"{iv.var.name}_o", iv.var.dtype)
                outer_ivs.append(IterVar(o_var, o_ext, iv.kind))
                outer_vals.append(o_val)
            elif outer_ivs[k].extent != o_ext or str(outer_vals[k]) != str(o_val):
                raise mismatch(f"the binding {iv.var.name} = {value}")
            o_var = outer_ivs[k].var
            subst[iv.var] = _inner_iter(iv, o_var, o_ext, i_val, i_ext, preserve_unit_iters,
                                        inner_ivs, inner_vals)
        if block.init is not None and any(iv.kind == "R" for iv in outer_ivs):
            raise OuterReductionError(
                p,
                f'block "{n}" is a reduction and would get a reduction iter var in the outer '
                "block; blockize of several blocks takes no reduction over the outer loops",
                func,
                blocks=[n],
            )
        o_pred, i_pred, mixed = _split_predicate(block.predicate, set(inner_ext))
        if mixed is not None:
            raise SubspaceNotDivisibleError(
                p,
                f'the predicate {mixed} of block "{n}" cannot be divided between the loops '
                "above the blocks' common ancestor and those below it",
                func,
                blocks=[n],
            )
        text = str(and_all(o_pred))
        if outer_pred_text is not None and text != outer_pred_text:
            raise mismatch("the predicate")
        outer_pred_text, outer_pred = text, o_pred
        loop_sub = {v: ivr.var for v, ivr in zip(outer_vals, outer_ivs, strict=True)
                    if isinstance(v, Var)}
        stmt: Stmt = replace(
            block,
            iter_vars=tuple(inner_ivs),
            iter_values=tuple(inner_vals),
            body=substitute(block.body, subst),
            init=substitute(block.init, subst) if block.init is not None else None,
            predicate=and_all(i_pred),
            reads=None,
            writes=None,
        )
        for lp in reversed(loops):
            ext = lp.extent if isinstance(lp.extent, int) else substitute(lp.extent, loop_sub)
            stmt = replace(lp, extent=ext, body=stmt)
        nests.append(stmt)
    given = [index[id(path[lca + 1])] for path in paths]
    if given != positions:
        in_order = [n for _, n in sorted(zip(given, names, strict=True))]
        raise BlocksOutOfOrderError(
            p,
            f"blocks {', '.join(repr(n) for n in names)} are not given in program order "
            f"({', '.join(repr(n) for n in in_order)}); the outer block runs their nests in "
            "the order given, which would change what they compute",
            func,
            blocks=list(names),
        )
    name = fresh_name("outer_" + "".join(f"{n}_" for n in names), block_names_in(func))
    outer_block = Block(
        name, tuple(outer_ivs), tuple(outer_vals), SeqStmt(tuple(nests)), None,
        and_all(outer_pred),
    )
    stmts = list(container.stmts)
    stmts[positions[0] : positions[-1] + 1] = [outer_block]
    new = stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))
    return replace_path(func, paths[0][: lca + 1], new), name


# ---------------------------------------------------------------------------
# add_unit_loop


def add_unit_loop(func: PrimFunc, target: Var | str) -> tuple[PrimFunc, Var]:
    """Put a loop ``for u in range(1)`` right above loop ``target`` (a loop var) or
    block ``target`` (a block name); returns ``(new_func, u)``. The block's bindings
    do not change (the unit loop is not used)."""
    p = "add_unit_loop"
    if isinstance(target, Var):
        path = find_loop_path(func, p, target)
    else:
        path = find_block_path(func, p, target)
        if is_root(path[-1]) and len(path) == 1:  # type: ignore[arg-type]
            raise RootBlockError(
                p, f'cannot add a loop above the root block "{target}"', func, blocks=[target]
            )
    u = Var(fresh_name("u", used_names(func)))
    return replace_path(func, path, For(u, 1, "serial", path[-1])), u


__all__ = [
    "BlocksInDifferentScopesError",
    "BlocksNotConsecutiveError",
    "BlocksOutOfOrderError",
    "NotSingleBlockError",
    "OuterBindingMismatchError",
    "OuterReductionError",
    "RootBlockError",
    "SubspaceNotDivisibleError",
    "add_unit_loop",
    "blockize",
    "blockize_blocks",
]
