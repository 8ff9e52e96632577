"""Analyses over the IR: access regions, buffer collection, lookups, equality."""

from __future__ import annotations

from collections.abc import Iterator

from .buffer import Buffer, BufferRegion
from .expr import BufferLoad, IntImm, PrimExpr, Var, const
from .functor import iter_exprs, iter_stmts
from .simplify import _build, _linear, int_range, simplify, struct_key
from .stmt import Block, BufferStore, For, IfThenElse, IRModule, PrimFunc, SeqStmt, Stmt

# ---------------------------------------------------------------------------
# access regions


def _accesses(block: Block):
    """(buffer, indices, is_write, inner_loop_bounds) for every access in the block
    (not descending into nested blocks, whose own regions are used instead)."""
    out = []

    def walk(s: Stmt, bounds: dict[Var, tuple[int, int]]) -> None:
        if isinstance(s, For):
            inner = dict(bounds)
            inner[s.loop_var] = (0, s.extent - 1)
            walk(s.body, inner)
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
            for x in _loads_in(s.value):
                out.append((x.buffer, x.indices, False, bounds, None))
            for i in s.indices:
                for x in _loads_in(i):
                    out.append((x.buffer, x.indices, False, bounds, None))
            out.append((s.buffer, s.indices, True, bounds, None))
        else:
            from .stmt import IfThenElse

            if isinstance(s, IfThenElse):
                for x in _loads_in(s.condition):
                    out.append((x.buffer, x.indices, False, bounds, None))
                walk(s.then_case, bounds)
                if s.else_case is not None:
                    walk(s.else_case, bounds)

    if block.init is not None:
        walk(block.init, {})
    walk(block.body, {})
    return out


def _loads_in(e: PrimExpr) -> list[BufferLoad]:
    return [x for x in iter_exprs(e) if isinstance(x, BufferLoad)]


def _relax(index: PrimExpr, bounds: dict[Var, tuple[int, int]], ext: PrimExpr | None):
    """(min, extent) of ``index`` as the variables in ``bounds`` range over their
    bounds; other variables stay symbolic. Returns None if not affine."""
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
            if tlo is None or any(isinstance(x, Var) and x not in bounds for x in iter_exprs(t)):
                return None
            a, b = tlo * c, thi * c
            lo += min(a, b)
            hi += max(a, b)
        else:
            sym.append((t, c))
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
            dims.append((const(0), const(buffer.shape[d])))
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
            dims.append((const(0), const(buffer.shape[d])))
            continue
        start = base if lo_off == 0 else simplify(base + lo_off)
        dims.append((start, _ONE if hi_off - lo_off == 1 else const(hi_off - lo_off)))
    return BufferRegion(buffer, tuple(dims))


def infer_regions(block: Block) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """Read and write regions of a block, in order of first access.

    As in TensorIR, a block with an ``init`` (a reduction) does not list the buffers
    it writes among its reads.
    """
    acc = _accesses(block)
    allocated = set(block.alloc_buffers)
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
