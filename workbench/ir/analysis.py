"""Analyses over the IR: access regions, buffer collection, lookups, equality."""

from __future__ import annotations

from collections.abc import Iterator

from .buffer import Buffer, BufferRegion
from .expr import BufferField, BufferLoad, IntImm, OpaqueCall, PrimExpr, Var, const, extent_expr
from .functor import iter_exprs, iter_stmts
from .simplify import _build, _linear, int_range, simplify, struct_key
from .stmt import (
    Block,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IRModule,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)

# ---------------------------------------------------------------------------
# access regions


def _accesses(block: Block):
    """(buffer, indices, is_write, inner_loop_bounds) for every access in the block
    (not descending into nested blocks, whose own regions are used instead)."""
    out = []
    lets: dict[Var, PrimExpr] = {}  # let-bound variables, substituted into indices

    def loads(e: PrimExpr, bounds) -> None:
        nodes = list(iter_exprs(e))
        for x, where in _loads_under(e, bounds, lets, nodes):
            idx = _unlet(x.indices, lets)
            out.append((x.buffer, idx, False, where, None))
        if not any(type(x) in _OPAQUE_NODES for x in nodes):
            return
        for buf, is_write in _opaque_accesses(e):
            zeros = tuple(IntImm(0, buf.index_dtype) for _ in buf.shape)
            exts = tuple(extent_expr(d, buf.index_dtype) for d in buf.shape)
            out.append((buf, zeros, is_write, {}, exts))

    def walk(s: Stmt, bounds: dict[Var, tuple[int, int]]) -> None:
        if isinstance(s, For):
            inner = dict(bounds)
            # a symbolic extent gives a symbolic upper bound (``n - 1``)
            ext, lo = s.extent, s.min
            inner[s.loop_var] = (lo, lo + ext - 1 if isinstance(ext, int)
                                 else simplify(ext + (lo - 1)))
            walk(s.body, inner)
        elif isinstance(s, LetStmt):
            loads(s.value, bounds)
            lets[s.var] = _unlet((s.value,), lets)[0]
            walk(s.body, bounds)
        elif isinstance(s, Evaluate):
            loads(s.value, bounds)
        elif isinstance(s, SeqStmt):
            for x in s.stmts:
                walk(x, bounds)
        elif isinstance(s, Block):
            # a nested block: its regions are in its own vars; substitute bindings
            from .functor import substitute

            mapping = {iv.var: v for iv, v in zip(s.iter_vars, s.iter_values, strict=True)}
            for is_write, regions in ((False, s.reads), (True, s.writes)):
                for r in regions or ():
                    mins = tuple(substitute(m, mapping) for m, _ in r.region)
                    exts = tuple(e for _, e in r.region)
                    out.append((r.buffer, mins, is_write, bounds, exts))
        elif isinstance(s, BufferStore):
            loads(s.value, bounds)
            for i in s.indices:
                loads(i, bounds)
            out.append((s.buffer, _unlet(s.indices, lets), True, bounds, None))
        else:
            from .stmt import IfThenElse

            if isinstance(s, IfThenElse):
                # inside a branch, the inner loops range only where its condition holds
                loads(s.condition, bounds)
                cond = _unlet((s.condition,), lets)[0]
                then_bounds = _narrowed(bounds, cond)
                if then_bounds is not None:
                    walk(s.then_case, then_bounds)
                if s.else_case is not None:
                    from .intset import negate

                    else_bounds = _narrowed(bounds, negate(cond))
                    if else_bounds is not None:
                        walk(s.else_case, else_bounds)

    if block.init is not None:
        walk(block.init, {})
    walk(block.body, {})
    if block.match_buffers:
        # an access through a matched view is an access of its whole source region
        views = {m.buffer: m for m in block.match_buffers}
        mapped = []
        for buf, indices, is_write, bounds, exts in out:
            m = views.get(buf)
            if m is None:
                mapped.append((buf, indices, is_write, bounds, exts))
                continue
            src = m.source
            mins = tuple(mn for mn, _ in src.region)
            mapped.append((src.buffer, mins, is_write, {}, tuple(e for _, e in src.region)))
        out = mapped
    return out


_OPAQUE_NODES = frozenset((BufferField, OpaqueCall))


def _opaque_accesses(e: PrimExpr) -> list[tuple[Buffer, bool]]:
    """(buffer, is_write) for each whole-buffer access hidden in ``e``: ``A.data``
    reads and writes all of ``A``; ``T.tvm_access_ptr(..., A.data, off, ext, mask)``
    reads it when ``mask & 1`` and writes it when ``mask & 2`` (TVM's rule)."""
    out: list[tuple[Buffer, bool]] = []
    seen: set[int] = set()
    for x in iter_exprs(e):
        if isinstance(x, OpaqueCall) and x.op == "tvm_access_ptr" and len(x.args) == 5:
            ptr, mask = x.args[1], x.args[4]
            if isinstance(ptr, BufferField) and isinstance(mask, IntImm):
                seen.add(id(ptr))
                if mask.value & 1:
                    out.append((ptr.buffer, False))
                if mask.value & 2:
                    out.append((ptr.buffer, True))
        elif isinstance(x, BufferField) and x.field == "data" and id(x) not in seen:
            out.extend(((x.buffer, False), (x.buffer, True)))
    return out


def _unlet(indices, lets: dict) -> tuple:
    if not lets:
        return tuple(indices)
    from .functor import substitute

    return tuple(substitute(i, lets) for i in indices)


def _narrowed(bounds: dict, cond: PrimExpr) -> dict | None:
    """``bounds`` (inner loops' ranges) where ``cond`` holds (TVM's conditional bounds;
    :func:`workbench.ir.intset.narrow`); None where it never holds."""
    if not bounds:
        return bounds
    from .expr import as_expr
    from .intset import EMPTY, narrow

    dom = {v: (as_expr(lo), as_expr(hi)) for v, (lo, hi) in bounds.items()}
    got = narrow(cond, dom)
    if got is EMPTY:
        return None
    if got is dom:
        return bounds
    return {
        v: tuple(x.value if isinstance(x, IntImm) else x for x in got[v]) for v in bounds
    }


def _loads_under(e: PrimExpr, bounds: dict, lets: dict, nodes: list | None = None):
    """(load, bounds) for each load in ``e``; the sides of a ``T.if_then_else`` see the
    loops narrowed by its condition (``Select`` evaluates both sides: no narrowing).
    ``nodes``: ``list(iter_exprs(e))`` when the caller has it."""
    from .intset import LAZY_CONDITIONAL, negate

    if nodes is None:
        nodes = list(iter_exprs(e))
    if not bounds or not any(
        LAZY_CONDITIONAL and isinstance(x, LAZY_CONDITIONAL) for x in nodes
    ):
        return [(x, bounds) for x in nodes if isinstance(x, BufferLoad)]
    out = []

    def visit(x: PrimExpr, where: dict) -> None:
        if isinstance(x, BufferLoad):
            out.append((x, where))
            for i in x.indices:
                visit(i, where)
        elif LAZY_CONDITIONAL and isinstance(x, LAZY_CONDITIONAL):
            visit(x.condition, where)
            cond = _unlet((x.condition,), lets)[0]
            for side, c in ((x.true_value, cond), (x.false_value, negate(cond))):
                narrowed = _narrowed(where, c)
                if narrowed is not None:
                    visit(side, narrowed)
        else:
            for child in vars(x).values():
                if isinstance(child, PrimExpr):
                    visit(child, where)
                elif isinstance(child, tuple):
                    for y in child:
                        if isinstance(y, PrimExpr):
                            visit(y, where)

    visit(e, bounds)
    return out


def _relax(index: PrimExpr, bounds: dict[Var, tuple[int, int]], ext: PrimExpr | None):
    """(min, extent) of ``index`` as the variables in ``bounds`` range over their
    bounds; other variables stay symbolic. Affine indices are boxed directly; others
    (``(i * 4 + j) // 4``, ``x % 8``, ``min``...) through interval analysis
    (:mod:`workbench.ir.intset`). Returns None where neither gives a constant width."""
    r = _relax_linear(index, bounds, ext)
    if r is not None or not bounds:
        return r
    return _relax_interval(index, bounds, ext)


def _relax_interval(index: PrimExpr, bounds, ext: PrimExpr | None):
    from .expr import as_expr
    from .intset import EMPTY, eval_interval

    base_ext = 1 if ext is None else (ext.value if isinstance(ext, IntImm) else None)
    if base_ext is None:
        return None
    dom = {v: (as_expr(lo), as_expr(hi)) for v, (lo, hi) in bounds.items()}
    iv = eval_interval(index, dom)
    if iv is None or iv is EMPTY:
        return None
    width = simplify(iv[1] - iv[0])
    if not isinstance(width, IntImm):
        return None
    return iv[0], width.value + base_ext


def _relax_linear(index: PrimExpr, bounds: dict[Var, tuple[int, int]], ext: PrimExpr | None):
    """The affine case of :func:`_relax` (None if ``index`` is not affine in ``bounds``)."""
    base_ext = 1 if ext is None else (ext.value if isinstance(ext, IntImm) else None)
    if base_ext is None:
        return None
    if not bounds:
        return index, base_ext
    terms, cst = _linear(index)
    sym, lo, hi = [], 0, 0
    for t, c in terms:
        if any(isinstance(x, Var) and x in bounds for x in iter_exprs(t)):
            tlo, thi = int_range(t, bounds)
            if tlo is None or thi is None:
                if isinstance(t, Var) and not isinstance(bounds[t][1], int):
                    # a loop over a symbolic extent: [lo, hi] with hi an expression
                    tlo, thi = bounds[t]
                    if c < 0:
                        return None
                    lo = lo + tlo * c
                    hi = hi + thi * c
                    continue
                return None
            if any(isinstance(x, Var) and x not in bounds for x in iter_exprs(t)):
                return None
            a, b = tlo * c, thi * c
            lo += min(a, b)
            hi += max(a, b)
        else:
            sym.append((t, c))
    if isinstance(lo, PrimExpr) or isinstance(hi, PrimExpr):
        mn = simplify(_build(sym, cst, index.dtype) + lo)
        return mn, simplify(hi - lo + base_ext)
    mn = _build(sym, cst + lo, index.dtype)
    return mn, hi - lo + base_ext


_ONE = IntImm(1)


def _region_for(buffer: Buffer, accesses) -> BufferRegion:
    """Union of the accesses' boxes, per dimension."""
    if len(accesses) == 1 and not accesses[0][1] and not accesses[0][2]:
        # the common case: one point access, no inner loops
        return BufferRegion(buffer, tuple((i, _ONE) for i in accesses[0][0]))
    dims = []
    for d in range(buffer.ndim):
        pieces = []
        for indices, bounds, exts in accesses:
            r = _relax(indices[d], bounds, exts[d] if exts else None)
            pieces.append(r)
        if any(p is None for p in pieces):
            dims.append(_whole_dim(buffer, d))
            continue
        if any(isinstance(e, PrimExpr) for _, e in pieces):
            # symbolic extents: one box, or the same box every time, else the whole dim
            keys = {(struct_key(m), struct_key(extent_expr(e))) for m, e in pieces}
            if len(keys) == 1:
                m, e = pieces[0]
                dims.append((m, _ONE if e == 1 else extent_expr(e)))
            else:
                dims.append(_whole_dim(buffer, d))
            continue
        base, ext = pieces[0]
        lo_off, hi_off = 0, ext
        ok = True
        for mn, e in pieces[1:]:
            diff = simplify(mn - base)
            if not isinstance(diff, IntImm):
                ok = False
                break
            lo_off = min(lo_off, diff.value)
            hi_off = max(hi_off, diff.value + e)
        if not ok:
            dims.append(_whole_dim(buffer, d))
            continue
        start = base if lo_off == 0 else simplify(base + lo_off)
        dims.append((start, _ONE if hi_off - lo_off == 1 else const(hi_off - lo_off)))
    return BufferRegion(buffer, tuple(dims))


def _whole_dim(buffer: Buffer, d: int) -> tuple[PrimExpr, PrimExpr]:
    if buffer.index_dtype == "int32":
        return const(0), extent_expr(buffer.shape[d])
    return IntImm(0, buffer.index_dtype), extent_expr(buffer.shape[d], buffer.index_dtype)


def infer_regions(block: Block) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """Read and write regions of a block, in order of first access.

    As in TensorIR, a block with an ``init`` (a reduction) does not list the buffers
    it writes among its reads.
    """
    acc = _accesses(block)
    allocated = set(block.alloc_buffers) | {m.buffer for m in block.match_buffers}
    reads: dict[Buffer, list] = {}
    writes: dict[Buffer, list] = {}
    for buf, indices, is_write, bounds, exts in acc:
        if buf in allocated:
            continue
        (writes if is_write else reads).setdefault(buf, []).append((indices, bounds, exts))
    if block.init is not None:
        reads = {b: v for b, v in reads.items() if b not in writes}
    r = tuple(_region_for(b, v) for b, v in reads.items())
    w = tuple(_region_for(b, v) for b, v in writes.items())
    return r, w


# ---------------------------------------------------------------------------
# lookups


def collect_buffers(func: PrimFunc) -> list[Buffer]:
    """Parameters first, then allocated buffers in program order."""
    out = list(func.params)
    for s in iter_stmts(func.body):
        if isinstance(s, Block):
            out.extend(s.alloc_buffers)
    return out


def iter_blocks(s: Stmt) -> Iterator[Block]:
    for x in iter_stmts(s):
        if isinstance(x, Block):
            yield x


def find_block(func: PrimFunc, name: str) -> Block | None:
    for b in iter_blocks(func.body):
        if b.name == name:
            return b
    return None


def block_names(func: PrimFunc) -> list[str]:
    return [b.name for b in iter_blocks(func.body) if b is not func.body]


def path_to(root: Stmt, pred) -> list[Stmt] | None:
    """Statements from ``root`` down to the first node satisfying ``pred`` (inclusive)."""
    stack: list[tuple[Stmt, int]] = [(root, 0)]
    path: list[Stmt] = []
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        if pred(node):
            return path
        children: list[Stmt] = []
        if isinstance(node, For):
            children = [node.body]
        elif isinstance(node, SeqStmt):
            children = list(node.stmts)
        elif isinstance(node, Block):
            children = [node.body]
        else:
            from .stmt import IfThenElse

            if isinstance(node, IfThenElse):
                children = [node.then_case] + (
                    [node.else_case] if node.else_case is not None else []
                )
        for c in reversed(children):
            stack.append((c, depth + 1))
    return None


def loop_paths(func: PrimFunc, loop_vars) -> dict[Var, list[Stmt]]:
    """Paths from the root to each loop of ``loop_vars`` found, in one traversal."""
    wanted = set(loop_vars)
    found: dict[Var, list[Stmt]] = {}
    path: list[Stmt] = []

    def walk(node: Stmt) -> None:
        path.append(node)
        if isinstance(node, For):
            if node.loop_var in wanted:
                found[node.loop_var] = list(path)
            walk(node.body)
        elif isinstance(node, SeqStmt):
            for c in node.stmts:
                walk(c)
                if len(found) == len(wanted):
                    break
        elif isinstance(node, Block):
            walk(node.body)
        elif isinstance(node, IfThenElse):
            walk(node.then_case)
            if node.else_case is not None:
                walk(node.else_case)
        path.pop()

    walk(func.body)
    return found


def block_path(func: PrimFunc, name: str) -> list[Stmt] | None:
    return path_to(func.body, lambda s: isinstance(s, Block) and s.name == name)


def loop_path(func: PrimFunc, var: Var) -> list[Stmt] | None:
    return loop_paths(func, (var,)).get(var)


def loops_above(path: list[Stmt]) -> list[For]:
    """The loops enclosing the last node of ``path`` within its nearest parent block."""
    loops: list[For] = []
    for s in path[:-1]:
        if isinstance(s, Block):
            loops = []
        elif isinstance(s, For):
            loops.append(s)
    return loops


def parent_block(path: list[Stmt]) -> Block:
    for s in reversed(path[:-1]):
        if isinstance(s, Block):
            return s
    raise ValueError("node has no parent block")


def child_blocks(s: Stmt) -> list[Block]:
    """Blocks directly below ``s`` (not nested inside another block)."""
    out = []
    for x in iter_stmts(s.body if isinstance(s, (Block, For)) else s, enter_blocks=False):
        if isinstance(x, Block):
            out.append(x)
    # iter_stmts(enter_blocks=False) still enters the very first node; filter nested
    result = []
    for b in out:
        if not any(b is not o and _contains(o, b) for o in out):
            result.append(b)
    return result


def _contains(outer: Block, inner: Block) -> bool:
    return any(x is inner for x in iter_stmts(outer.body))


# ---------------------------------------------------------------------------
# equality


def structural_equal(a, b) -> bool:
    """Same printed structure: two functions/modules/statements are equal when they
    print identically (variable names included). Deterministic and cheap enough
    for tests and deduplication."""
    from .printer import any_to_str

    return any_to_str(a) == any_to_str(b)


def structural_hash(a) -> str:
    import hashlib

    from .printer import any_to_str

    return hashlib.sha256(any_to_str(a).encode()).hexdigest()[:16]


def expr_key(e: PrimExpr) -> tuple:
    return struct_key(e)


def as_module(x) -> IRModule:
    if isinstance(x, IRModule):
        return x
    if isinstance(x, PrimFunc):
        return IRModule.from_funcs(x)
    raise TypeError(f"expected a PrimFunc or IRModule, got {type(x).__name__}")
