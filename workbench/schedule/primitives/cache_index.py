"""``cache_index``: precompute the pure subexpressions of a block into buffers.

The stores of a block often recompute the same arithmetic of its iter vars (an index
``vi // 4 + vj // 4``, a bilinear weight ``(f32(vj) + 0.5) * 0.5 - 0.5 - ...``). For each
such subexpression a new block ``index_<k>`` (inserted before the block's loop nest)
computes it once per value of the iter vars it uses into a buffer ``index_var_<k>`` of
the given scope, and the block loads it from there instead.

``cache_index(block "A", "global")`` on ``B[n, c, vi, vj] = A[n, c, vi // 4 + vj // 4,
vj // 2]``::

                                    index_var_0 = T.alloc_buffer((80, 80), "int32")
                                    index_var_1 = T.alloc_buffer((80,), "int32")
                                    for ax0, ax1 in T.grid(80, 80):
                                        with T.block("index_0"):
                                            v0, v1 = T.axis.remap("SS", [ax0, ax1])
                                            index_var_0[v0, v1] = v0 // 4 + v1 // 4
                                    for ax0 in range(80):
                                        with T.block("index_1"):
                                            v0 = T.axis.spatial(80, ax0)
                                            index_var_1[v0] = v0 // 2
    for i0, i1, i2, i3 in T.grid(...):  for i0, i1, i2, i3 in T.grid(...):
        with T.block("A"):                  with T.block("A"):
            B[n, c, vi, vj] = A[...]            B[n, c, vi, vj] = A[n, c, index_var_0[vi, vj],
                                                                    index_var_1[vj]]

Which subexpressions (TVM's rule, a common-subexpression count): in each store of the
block, the largest pure subexpressions (no buffer load or opaque call; more than one
node) are counted, equivalent ones (equal once simplified) together. With
``cse_thresh = 0`` every one of them is cached. Otherwise one seen fewer than
``cse_thresh`` times is not, and its own largest pure subexpressions inherit its count
(so a subexpression shared by several is cached once it is seen often enough). Those
cached are the ones the store's value contains, largest first (then in the order they
occur). TVM works through the candidates in the order of its hash table; this takes
them largest first, which is the order that rule is written for.

Invariants: ``cse_thresh >= 0``; there is something to cache (TVM stops with an
internal error on an empty result; here it is refused); each cached expression uses
only the block's iter vars.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IterVar,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from ...ir.expr import (
    BinaryOp,
    BufferField,
    Call,
    CallExtern,
    Cast,
    FloatImm,
    IfThenElseExpr,
    IntImm,
    Let,
    Not,
    OpaqueCall,
    Select,
    StringImm,
    const,
    extent_expr,
)
from ...ir.functor import Mutator, iter_exprs, iter_stmts, substitute
from ...ir.intset import eval_interval
from ...ir.simplify import simplify, struct_key
from ..errors import InvalidScheduleArgumentError, ScheduleError
from ._common import find_block_path, fresh_name, is_root, position_in_scope, replace_path
from .cache import _insert, check_scope
from .reindex import _taken_blocks

__all__ = ["NothingToCacheError", "cache_index"]


class NothingToCacheError(ScheduleError):
    """The block's stores hold no pure subexpression worth caching (with the threshold
    given)."""


# --------------------------------------------------------------------------- analysis


def _children(e: PrimExpr) -> tuple[PrimExpr, ...]:
    """Operands left to right (the order TVM's visitors take)."""
    if isinstance(e, BinaryOp):
        return (e.a, e.b)
    if isinstance(e, BufferLoad):
        return e.indices
    if isinstance(e, (Select, IfThenElseExpr)):
        return (e.condition, e.true_value, e.false_value)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, (Call, CallExtern, OpaqueCall)):
        return e.args
    if isinstance(e, Not):
        return (e.a,)
    if isinstance(e, Let):
        return (e.value, e.body)
    return ()


def _post_order(e: PrimExpr):
    for c in _children(e):
        yield from _post_order(c)
    yield e


def _pure(e: PrimExpr) -> bool:
    """No buffer load, opaque call, impure extern call or let (TVM's SideEffect <= kPure)."""
    for x in iter_exprs(e):
        if isinstance(x, (BufferLoad, OpaqueCall, BufferField, Let)):
            return False
        if isinstance(x, CallExtern) and not x.pure:
            return False
    return True


def _size(e: PrimExpr) -> int:
    return sum(1 for _ in iter_exprs(e))


def _eligible(e: PrimExpr) -> bool:
    if isinstance(e, (Var, IntImm, FloatImm, StringImm)):
        return False
    return _size(e) > 1 and _pure(e)


def _largest_pure(e: PrimExpr, out: list[PrimExpr]) -> None:
    """Append the largest eligible subexpressions of ``e`` (``e`` itself if it is one)."""
    if _eligible(e):
        out.append(e)
        return
    for c in _children(e):
        _largest_pure(c, out)


def _direct_subexprs(e: PrimExpr) -> list[PrimExpr]:
    out: list[PrimExpr] = []
    for c in _children(e):
        _largest_pure(c, out)
    return out


class _Key:
    """Equivalence of terms: equal once simplified (TVM's EquivalentTerms)."""

    def __init__(self) -> None:
        self.memo: dict[int, tuple] = {}

    def __call__(self, e: PrimExpr) -> tuple:
        k = self.memo.get(id(e))
        if k is None:
            k = struct_key(simplify(e))
            self.memo[id(e)] = k
        return k


def _selected(store: BufferStore, thresh: int, key: _Key) -> list[PrimExpr]:
    """The subexpressions of one store to cache, in TVM's order (module docstring)."""
    found: list[PrimExpr] = []
    _largest_pure(store.value, found)
    for i in store.indices:
        _largest_pure(i, found)
    # semantic table: [expr, count] per equivalence class, largest first
    table: list[list] = []
    index: dict[tuple, list] = {}
    for e in found:
        k = key(e)
        if k in index:
            index[k][1] += 1
        else:
            index[k] = [e, 1]
            table.append(index[k])
    table.sort(key=lambda entry: -_size(entry[0]))
    i = 0
    while i < len(table):
        expr, count = table[i]
        if count < thresh:
            for sub in _direct_subexprs(expr):
                k = key(sub)
                if k in index:
                    index[k][1] += count
                else:
                    index[k] = [sub, count]
                    size = _size(sub)
                    pos = next((p for p, t in enumerate(table) if _size(t[0]) < size),
                               len(table))
                    table.insert(pos, index[k])
        i += 1
    keep = {key(t[0]): t[0] for t in table if t[1] >= thresh}
    out: list[PrimExpr] = []
    for node in _post_order(store.value):
        if not isinstance(node, (Var, IntImm, FloatImm, StringImm)):
            e = keep.get(key(node))
            if e is not None and not any(x is e for x in out):
                out.append(e)
    out.sort(key=lambda e: -_size(e))  # stable: ties stay in order of occurrence
    return out


class _Replace(Mutator):
    """In the stores only, each subexpression equivalent to a cached one becomes a load
    of its buffer (outermost first)."""

    def __init__(self, loads: dict[tuple, BufferLoad], key: _Key):
        self.loads, self.key = loads, key
        self.active = False

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if self.active and not isinstance(e, (Var, IntImm, FloatImm, StringImm)):
            load = self.loads.get(self.key(e))
            if load is not None:
                return load
        return super().visit_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, BufferStore):
            self.active = True
            try:
                return super().visit_stmt(s)
            finally:
                self.active = False
        return super().visit_stmt(s)


# --------------------------------------------------------------------------- primitive


def cache_index(
    func: PrimFunc, block_name: str, storage_scope: str, cse_thresh: int = 0
) -> tuple[PrimFunc, list[str]]:
    """Precompute the pure subexpressions of ``block``'s stores into ``storage_scope``
    buffers (module docstring). Returns (new function, names of the new blocks).

    >>> import workbench as wb
    >>> f = wb.from_script('''
    ... @T.prim_func
    ... def halve(A: T.Buffer((8,), "float32"), B: T.Buffer((16,), "float32")):
    ...     for i in range(16):
    ...         with T.block("B"):
    ...             vi = T.axis.remap("S", [i])
    ...             B[vi] = A[vi // 2]
    ... ''')
    >>> g, names = cache_index(f, "B", "global")
    >>> names, g.body.alloc_buffers
    (['index_0'], (Buffer('index_var_0', (16,), 'int32', scope='global'),))
    """
    prim = "cache_index"
    path = find_block_path(func, prim, block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    if isinstance(cse_thresh, bool) or not isinstance(cse_thresh, int) or cse_thresh < 0:
        raise InvalidScheduleArgumentError(
            prim,
            f'cse_thresh for block "{block_name}" must be a non-negative int, got '
            f"{cse_thresh!r}",
            func,
            blocks=[block_name],
        )
    check_scope(func, prim, storage_scope, block_name)
    key = _Key()
    exprs: list[PrimExpr] = []
    stores = [s for s in iter_stmts(block, enter_blocks=False) if isinstance(s, BufferStore)]
    own = {iv.var for iv in block.iter_vars}
    for store in stores:
        for e in _selected(store, cse_thresh, key):
            free = {x for x in iter_exprs(e) if isinstance(x, Var)}
            if free <= own and all(key(e) != key(x) for x in exprs):
                exprs.append(e)
    if not exprs:
        raise NothingToCacheError(
            prim,
            f'the stores of block "{block_name}" hold no pure subexpression of its iter vars '
            f"seen at least {cse_thresh} time(s); there is nothing to cache",
            func,
            blocks=[block_name],
        )
    scope_pos = max(i for i, s in enumerate(path[:-1]) if isinstance(s, Block))
    scope: Block = path[scope_pos]  # type: ignore[assignment]
    loops = {s.loop_var: s for s in path[scope_pos + 1 : -1] if isinstance(s, For)}
    dom = {v: (const(lp.min, v.dtype),
               simplify(extent_expr(lp.extent, v.dtype) + (lp.min - 1)))
           for v, lp in loops.items()}
    binding = {iv.var: v for iv, v in zip(block.iter_vars, block.iter_values, strict=True)}
    taken_buffers = {b.name for b in _all_buffers(func)}
    taken_blocks = set(_taken_blocks(func))
    stages: list[Stmt] = []
    allocs: list[Buffer] = []
    loads: dict[tuple, BufferLoad] = {}
    names: list[str] = []
    for k, e in enumerate(exprs):
        bvars = []
        for x in _post_order(e):
            if isinstance(x, Var) and x not in bvars:
                bvars.append(x)
        shape = []
        for v in bvars:
            hi = eval_interval(simplify(binding[v]), dom)
            top = hi[1] if isinstance(hi, tuple) else None
            shape.append(top.value + 1 if isinstance(top, IntImm)
                         else next(iv.extent for iv in block.iter_vars if iv.var is v))
        buf = Buffer(fresh_name(f"index_var_{k}", taken_buffers), tuple(shape), e.dtype,
                     storage_scope)
        lvars: list[Var] = []
        for v in bvars:
            for x in _post_order(binding[v]):
                if isinstance(x, Var) and x in loops and x not in lvars:
                    lvars.append(x)
        axes = {lv: Var(f"ax{n}", lv.dtype) for n, lv in enumerate(lvars)}
        ivars = tuple(IterVar(Var(f"v{n}", v.dtype), ext, "S")
                      for n, (v, ext) in enumerate(zip(bvars, shape, strict=True)))
        own_idx = tuple(iv.var for iv in ivars)
        name = fresh_name(f"index_{k}", taken_blocks)
        stage: Stmt = Block(
            name, ivars, tuple(simplify(substitute(binding[v], axes)) for v in bvars),
            BufferStore(buf, substitute(e, dict(zip(bvars, own_idx, strict=True))), own_idx),
            reads=(),
            writes=(BufferRegion(buf, tuple((x, const(1)) for x in own_idx)),),
        )
        for lv in reversed(lvars):
            stage = For(axes[lv], loops[lv].extent, "serial", stage)
        stages.append(stage)
        allocs.append(buf)
        loads[key(e)] = BufferLoad(buf, tuple(bvars))
        names.append(name)
    new_block = _Replace(loads, key).visit_block(block)
    func = replace_path(func, path, new_block)
    spath = find_block_path(func, prim, scope.name)
    new_scope: Block = spath[-1]  # type: ignore[assignment]
    body = new_scope.body
    pos = position_in_scope(body, block_name)
    for n, stage in enumerate(stages):
        body = _insert(body, [body] if isinstance(body, SeqStmt) else [], pos + n, stage)
    new_allocs = new_scope.alloc_buffers + tuple(allocs)
    if is_root(new_scope):
        new_scope = replace(new_scope, body=body, alloc_buffers=new_allocs, reads=(), writes=())
    else:
        new_scope = replace(new_scope, body=body, alloc_buffers=new_allocs, reads=None,
                            writes=None)
    return replace_path(func, spath, new_scope), names


def _all_buffers(func: PrimFunc):
    from ...ir.analysis import collect_buffers

    return collect_buffers(func)
