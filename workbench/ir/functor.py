"""Visitors and rewriters over the IR.

:class:`Mutator` rebuilds only what changed: when no child of a node changes,
the node itself is returned (``new is old``), so unchanged subtrees are shared
between the IR before and after a transformation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

from .buffer import Buffer, BufferRegion, MatchBufferRegion
from .expr import (
    BinaryOp,
    BufferField,
    BufferLoad,
    Call,
    CallExtern,
    Cast,
    FloatImm,
    IfThenElseExpr,
    IntImm,
    Let,
    Not,
    OpaqueCall,
    PrimExpr,
    Select,
    StringImm,
    Var,
)
from .stmt import Block, BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class Mutator:
    """Override ``visit_expr``/``visit_stmt`` cases; call ``super()`` to recurse."""

    # expressions -------------------------------------------------------------
    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, (Var, IntImm, FloatImm, StringImm)):
            return e
        if isinstance(e, BufferLoad):
            idx = tuple(self.visit_expr(i) for i in e.indices)
            buf = self.visit_buffer(e.buffer)
            if buf is e.buffer and _same(idx, e.indices):
                return e
            return BufferLoad(buf, idx)
        if isinstance(e, BinaryOp):
            a, b = self.visit_expr(e.a), self.visit_expr(e.b)
            if a is e.a and b is e.b:
                return e
            return self.rebuild_binary(e, a, b)
        if isinstance(e, Select):
            c = self.visit_expr(e.condition)
            t = self.visit_expr(e.true_value)
            f = self.visit_expr(e.false_value)
            if c is e.condition and t is e.true_value and f is e.false_value:
                return e
            return Select(c, t, f)
        if isinstance(e, Cast):
            v = self.visit_expr(e.value)
            return e if v is e.value else Cast(e.dtype, v)
        if isinstance(e, Call):
            args = tuple(self.visit_expr(a) for a in e.args)
            return e if _same(args, e.args) else Call(e.op, args, e.dtype)
        if isinstance(e, Not):
            a = self.visit_expr(e.a)
            return e if a is e.a else Not(a)
        if isinstance(e, IfThenElseExpr):
            c = self.visit_expr(e.condition)
            t = self.visit_expr(e.true_value)
            f = self.visit_expr(e.false_value)
            if c is e.condition and t is e.true_value and f is e.false_value:
                return e
            return IfThenElseExpr(c, t, f)
        if isinstance(e, Let):
            v = self.visit_expr(e.value)
            body = self.visit_expr(e.body)
            return e if v is e.value and body is e.body else Let(e.var, v, body)
        if isinstance(e, CallExtern):
            args = tuple(self.visit_expr(a) for a in e.args)
            return e if _same(args, e.args) else CallExtern(e.dtype, e.name, args, e.pure)
        if isinstance(e, OpaqueCall):
            args = tuple(self.visit_expr(a) for a in e.args)
            return e if _same(args, e.args) else OpaqueCall(e.op, args, e.dtype)
        if isinstance(e, BufferField):
            buf = self.visit_buffer(e.buffer)
            return e if buf is e.buffer else BufferField(buf, e.field)
        raise TypeError(f"unknown expression node {type(e).__name__}")

    def rebuild_binary(self, e: BinaryOp, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        return type(e)(a, b)

    def visit_buffer(self, b: Buffer) -> Buffer:
        return b

    # statements --------------------------------------------------------------
    def visit_stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, BufferStore):
            v = self.visit_expr(s.value)
            idx = tuple(self.visit_expr(i) for i in s.indices)
            buf = self.visit_buffer(s.buffer)
            if v is s.value and buf is s.buffer and _same(idx, s.indices):
                return s
            return BufferStore(buf, v, idx)
        if isinstance(s, For):
            body = self.visit_stmt(s.body)
            ext = self.visit_expr(s.extent) if isinstance(s.extent, PrimExpr) else s.extent
            if body is s.body and ext is s.extent:
                return s
            return replace(s, body=body, extent=ext)
        if isinstance(s, SeqStmt):
            stmts = tuple(self.visit_stmt(x) for x in s.stmts)
            return s if _same(stmts, s.stmts) else SeqStmt(stmts)
        if isinstance(s, IfThenElse):
            c = self.visit_expr(s.condition)
            t = self.visit_stmt(s.then_case)
            f = self.visit_stmt(s.else_case) if s.else_case is not None else None
            if c is s.condition and t is s.then_case and f is s.else_case:
                return s
            return IfThenElse(c, t, f)
        if isinstance(s, Block):
            return self.visit_block(s)
        if isinstance(s, Evaluate):
            v = self.visit_expr(s.value)
            return s if v is s.value else Evaluate(v)
        if isinstance(s, LetStmt):
            v = self.visit_expr(s.value)
            body = self.visit_stmt(s.body)
            return s if v is s.value and body is s.body else LetStmt(s.var, v, body)
        raise TypeError(f"unknown statement node {type(s).__name__}")

    def visit_match_buffer(self, m: MatchBufferRegion) -> MatchBufferRegion:
        """The source region's buffer and bounds (the view buffer itself is kept)."""
        src = m.source
        buf = self.visit_buffer(src.buffer)
        region = tuple((self.visit_expr(a), self.visit_expr(b)) for a, b in src.region)
        if buf is src.buffer and all(
            x is y for r0, r1 in zip(region, src.region, strict=True) for x, y in zip(r0, r1)
        ):
            return m
        return MatchBufferRegion(m.buffer, BufferRegion(buf, region), m.offset_factor)

    def visit_block(self, b: Block) -> Block:
        values = tuple(self.visit_expr(v) for v in b.iter_values)
        pred = self.visit_expr(b.predicate)
        body = self.visit_stmt(b.body)
        init = self.visit_stmt(b.init) if b.init is not None else None
        allocs = tuple(self.visit_buffer(x) for x in b.alloc_buffers)
        matches = tuple(self.visit_match_buffer(m) for m in b.match_buffers)
        if (
            _same(values, b.iter_values)
            and pred is b.predicate
            and body is b.body
            and init is b.init
            and _same(allocs, b.alloc_buffers)
            and _same(matches, b.match_buffers)
        ):
            return b
        regions_stale = (
            body is not b.body
            or init is not b.init
            or not _same(allocs, b.alloc_buffers)
            or not _same(matches, b.match_buffers)
        )
        if regions_stale:
            new = replace(
                b,
                iter_values=values,
                predicate=pred,
                body=body,
                init=init,
                alloc_buffers=allocs,
                match_buffers=matches,
                reads=None,
                writes=None,
            )
            return keep_explicit_regions(b, new, self.visit_buffer, self.visit_expr)
        return replace(b, iter_values=values, predicate=pred)


#: Block annotations (``annotate_buffer_access``) listing the read / write regions that
#: were given explicitly, so are not derived from the body.
EXPLICIT_REGION_KEYS = (("explicit_read_region", "reads"), ("explicit_write_region", "writes"))


def keep_explicit_regions(
    old: Block,
    new: Block,
    visit_buffer: Callable[[Buffer], Buffer] | None = None,
    visit_expr: Callable[[PrimExpr], PrimExpr] | None = None,
) -> Block:
    """``new`` (a rewrite of ``old`` whose regions were derived again from its body) with
    the regions ``old`` marks explicit put back in place of the derived ones for the same
    buffers (their buffers and bounds passed through ``visit_buffer`` / ``visit_expr``).
    A buffer the new body no longer accesses loses its explicit region."""
    ann = dict(old.annotations)
    if not any(ann.get(k) for k, _ in EXPLICIT_REGION_KEYS):
        return new
    changes = {}
    for key, field in EXPLICIT_REGION_KEYS:
        indices = ann.get(key) or ()
        olds = getattr(old, field) or ()
        regions = list(getattr(new, field) or ())
        for i in indices if isinstance(indices, (tuple, list)) else ():
            if not (isinstance(i, int) and 0 <= i < len(olds)):
                continue
            r = olds[i]
            buf = visit_buffer(r.buffer) if visit_buffer else r.buffer
            pos = next((k for k, x in enumerate(regions) if x.buffer is buf), None)
            if pos is None:
                continue
            bounds = r.region if visit_expr is None else tuple(
                (visit_expr(mn), visit_expr(ext)) for mn, ext in r.region)
            regions[pos] = BufferRegion(buf, bounds)
        changes[field] = tuple(regions)
    return replace(new, **changes)


class Substituter(Mutator):
    """Replace variables by expressions, re-simplifying the touched arithmetic."""

    def __init__(self, mapping: Mapping[Var, PrimExpr]):
        self.mapping = mapping

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, Var):
            return self.mapping.get(e, e)
        return super().visit_expr(e)

    def rebuild_binary(self, e: BinaryOp, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        from .simplify import simplify

        return simplify(type(e)(a, b))


def substitute(node, mapping: Mapping[Var, PrimExpr]):
    """Substitute variables in an expression or statement."""
    if not mapping:
        return node
    sub = Substituter(mapping)
    if isinstance(node, PrimExpr):
        return sub.visit_expr(node)
    return sub.visit_stmt(node)


# ---------------------------------------------------------------------------
# read-only traversal


def expr_children(x: PrimExpr) -> tuple[PrimExpr, ...]:
    """The operands of one expression node, left to right."""
    if isinstance(x, BinaryOp):
        return (x.a, x.b)
    if isinstance(x, BufferLoad):
        return tuple(x.indices)
    if isinstance(x, (Select, IfThenElseExpr)):
        return (x.condition, x.true_value, x.false_value)
    if isinstance(x, Cast):
        return (x.value,)
    if isinstance(x, (Call, CallExtern, OpaqueCall)):
        return tuple(x.args)
    if isinstance(x, Not):
        return (x.a,)
    if isinstance(x, Let):
        return (x.value, x.body)
    return ()


def iter_exprs(e: PrimExpr) -> Iterator[PrimExpr]:
    """Pre-order over an expression tree."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(expr_children(x)))


def loads_under_condition(s: Stmt, buffer: Buffer) -> bool:
    """Does ``s`` load ``buffer`` only where a condition holds somewhere: in a branch of
    ``T.if_then_else`` or under an ``if`` statement? (Such a load may be out of bounds
    where the condition is false; a copy of it made unconditionally would read there.)

    >>> from workbench.testing import padded_func
    >>> from workbench.ir.analysis import find_block
    >>> f = padded_func(8, 2)
    >>> loads_under_condition(find_block(f, "pad").body, f.params[0])
    True
    """
    def in_expr(e: PrimExpr, guarded: bool) -> bool:
        if isinstance(e, BufferLoad) and e.buffer is buffer and guarded:
            return True
        kids = expr_children(e)
        if isinstance(e, IfThenElseExpr):
            return in_expr(e.condition, guarded) or any(in_expr(k, True) for k in kids[1:])
        return any(in_expr(k, guarded) for k in kids)

    def in_stmt(x: Stmt, guarded: bool) -> bool:
        if isinstance(x, IfThenElse):
            branches = [x.then_case] + ([x.else_case] if x.else_case is not None else [])
            return in_expr(x.condition, guarded) or any(in_stmt(b, True) for b in branches)
        if any(in_expr(e, guarded) for e in stmt_exprs(x)):
            return True
        if isinstance(x, For):
            return in_stmt(x.body, guarded)
        if isinstance(x, SeqStmt):
            return any(in_stmt(c, guarded) for c in x.stmts)
        if isinstance(x, Block):
            return in_stmt(x.body, guarded) or (x.init is not None and in_stmt(x.init, guarded))
        if isinstance(x, LetStmt):
            return in_stmt(x.body, guarded)
        return False

    return in_stmt(s, False)


def expr_vars(e: PrimExpr) -> set[Var]:
    return {x for x in iter_exprs(e) if isinstance(x, Var)}


def uses_var(e: PrimExpr, v: Var) -> bool:
    return any(x is v for x in iter_exprs(e))


def iter_stmts(s: Stmt, enter_blocks: bool = True) -> Iterator[Stmt]:
    """Pre-order over statements (``init`` included); optionally not into blocks."""
    stack = [s]
    first = True
    while stack:
        x = stack.pop()
        yield x
        if isinstance(x, For):
            stack.append(x.body)
        elif isinstance(x, SeqStmt):
            stack.extend(reversed(x.stmts))
        elif isinstance(x, IfThenElse):
            if x.else_case is not None:
                stack.append(x.else_case)
            stack.append(x.then_case)
        elif isinstance(x, Block) and (enter_blocks or first):
            stack.append(x.body)
            if x.init is not None:
                stack.append(x.init)
        elif isinstance(x, LetStmt):
            stack.append(x.body)
        first = False


def stmt_exprs(s: Stmt) -> Iterator[PrimExpr]:
    """The expressions held directly by one statement (not its children)."""
    if isinstance(s, BufferStore):
        yield BufferLoad(s.buffer, s.indices)
        yield s.value
    elif isinstance(s, IfThenElse):
        yield s.condition
    elif isinstance(s, Block):
        yield from s.iter_values
        yield s.predicate
        for m in s.match_buffers:
            for mn, ext in m.source.region:
                yield mn
                yield ext
    elif isinstance(s, (LetStmt, Evaluate)):
        yield s.value
    elif isinstance(s, For) and isinstance(s.extent, PrimExpr):
        yield s.extent


def region_of(load: BufferLoad | BufferStore) -> BufferRegion:
    from .expr import const

    return BufferRegion(load.buffer, tuple((i, const(1)) for i in load.indices))


def post_order_visit(node, fn: Callable[[object], None]) -> None:
    """Call ``fn`` on every statement and expression below ``node`` (children first)."""
    if isinstance(node, PrimExpr):
        for x in reversed(list(iter_exprs(node))):
            fn(x)
        return
    for s in reversed(list(iter_stmts(node))):
        for e in stmt_exprs(s):
            post_order_visit(e, fn)
        fn(s)
