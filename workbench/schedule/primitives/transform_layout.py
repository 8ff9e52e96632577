"""Buffer layout transformation: ``transform_layout``.

``transform_layout(block, buffer, index_map)`` gives a buffer (allocated by a block, or
a function parameter) the layout of an :class:`~workbench.ir.IndexMap`: its shape
becomes ``index_map.map_shape(shape)`` and every access ``B[i, j]`` in the function
becomes ``B[index_map(i, j)]``. Before::

    B = T.alloc_buffer((128, 128))
    ...
            B[vi, vj] = A[vi, vj] * T.float32(2)
    ...
            C[vi, vj] = B[vi, vj] + T.float32(1)

after ``transform_layout("B", ("write", 0), lambda i, j: (i // 16, j // 16, i % 16,
j % 16))``::

    B = T.alloc_buffer((8, 8, 16, 16))
    ...
            B[vi // 16, vj // 16, vi % 16, vj % 16] = A[vi, vj] * T.float32(2)
    ...
            C[vi, vj] = B[vi // 16, vj // 16, vi % 16, vj % 16] + T.float32(1)

**Padding.** A map that is not onto its new shape (``lambda i: (i // 4, i % 4)`` on 14
elements: 16 slots) leaves padding, refused unless a ``pad_value`` says what the padding
holds (or ``assume_injective_transform`` skips the check, as in TVM). Then, as TVM does
(first that applies):

1. the buffer is never written in its scope (an input): an assumption block
   ``buffer_<B>_assumptions`` states that the padding holds ``pad_value``
   (``T.assume``: a hint for analyses, no code; the caller must fill it);
2. a write runs over the whole buffer in row-major order (loops ``i`` over each
   dimension, nothing else stored there): its loops are rewritten to run over the new
   shape and the store writes ``T.if_then_else(<padding>, pad_value, value)``;
3. otherwise a block ``buffer_<B>_padding`` after the last write fills the padding.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...ir import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    IndexMap,
    IterVar,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from ...ir.analysis import _relax
from ...ir.expr import (
    EQ,
    GE,
    LT,
    IfThenElseExpr,
    IntImm,
    Not,
    OpaqueCall,
    Or,
    PrimExpr,
    const,
)
from ...ir.functor import EXPLICIT_REGION_KEYS, Mutator, iter_exprs, iter_stmts, substitute
from ...ir.index_map import IndexMapError
from ...ir.simplify import simplify
from ..errors import InvalidScheduleArgumentError, ScheduleError
from ._common import find_block_path, fresh_name, is_root
from .cache import BufferIndexOutOfRangeError, BufferNotAccessedError

P = "transform_layout"


class BufferIsSubregionError(ScheduleError):
    """The buffer is a ``T.match_buffer`` view inside a block; only a function parameter
    or a buffer a block allocates can change its layout."""


class IndexMapArityError(ScheduleError, ValueError):
    """The index map takes a different number of indices than the buffer has
    dimensions (or the block has iter vars)."""


class IndexMapNotAffineError(ScheduleError):
    """The index map cannot be inverted (or its new shape bounded) over the buffer:
    it is not an affine map of the indices the analysis understands."""


class TransformationPaddingIndexMapError(ScheduleError, ValueError):
    """``pad_value`` as a map gives more (or fewer) than one value."""


class TransformationPaddingTypeError(ScheduleError, TypeError):
    """``pad_value`` is not of the buffer's dtype."""


class TransformationPaddingExpressionError(ScheduleError, ValueError):
    """``pad_value`` reads a buffer other than the one transformed."""


class TransformationIntroducesPaddingError(ScheduleError):
    """The map leaves padding and no ``pad_value`` says what it holds."""


# ---------------------------------------------------------------------------
# arguments


def normalize_buffer(
    func: PrimFunc, primitive: str, block_name: str, buffer: Any, required: str | None = None
) -> tuple[str, int, Buffer]:
    """``(kind, index, buffer)`` for TVM's forms of a buffer argument: ``("read", i)``
    / ``("write", i)``, an index (with ``required`` the kind), a buffer name (unique
    among the block's reads and writes) or the :class:`Buffer` itself.

    >>> import workbench as wb
    >>> f = wb.workloads.matmul(8, 8, 8)
    >>> kind, index, buf = normalize_buffer(f, "transform_layout", "C", "C")
    >>> kind, index, buf.name
    ('write', 0, 'C')
    """
    block: Block = find_block_path(func, primitive, block_name)[-1]  # type: ignore[assignment]
    accesses = [("read", i, r.buffer) for i, r in enumerate(block.reads or ())]
    accesses += [("write", i, w.buffer) for i, w in enumerate(block.writes or ())]
    if isinstance(buffer, int) and not isinstance(buffer, bool):
        if required is None:
            raise InvalidScheduleArgumentError(
                primitive,
                f'buffer index {buffer} for block "{block_name}" is ambiguous: give '
                f'("read", {buffer}) or ("write", {buffer}), or the buffer\'s name',
                func, blocks=[block_name])
        buffer = (required, buffer)
    if isinstance(buffer, str):
        found = {}
        for kind, i, b in accesses:
            if b.name == buffer:
                found[b] = (kind, i)  # the last access wins, as in TVM
        if not found:
            listing = ", ".join(sorted({b.name for _, _, b in accesses})) or "none"
            raise BufferNotAccessedError(
                primitive, f'block "{block_name}" accesses no buffer named "{buffer}" '
                f"(it accesses {listing})", func, blocks=[block_name])
        if len(found) > 1:
            raise InvalidScheduleArgumentError(
                primitive, f'block "{block_name}" accesses several buffers named "{buffer}"',
                func, blocks=[block_name])
        (buf, (kind, i)), = found.items()
        return _check_required(func, primitive, block_name, kind, i, buf, required)
    if isinstance(buffer, Buffer):
        for kind, i, b in accesses:
            if b is buffer:
                return _check_required(func, primitive, block_name, kind, i, b, required)
        raise BufferNotAccessedError(
            primitive, f'block "{block_name}" does not access buffer "{buffer.name}"', func,
            blocks=[block_name])
    if isinstance(buffer, (tuple, list)) and len(buffer) == 2:
        kind, i = buffer
        if kind not in ("read", "write"):
            raise InvalidScheduleArgumentError(
                primitive, f'buffer kind must be "read" or "write", got {kind!r} (block '
                f'"{block_name}")', func, blocks=[block_name])
        if isinstance(i, bool) or not isinstance(i, int):
            raise InvalidScheduleArgumentError(
                primitive, f'buffer index must be an int, got {i!r} (block "{block_name}")',
                func, blocks=[block_name])
        regions = block.reads if kind == "read" else block.writes
        if not 0 <= i < len(regions or ()):
            raise BufferIndexOutOfRangeError(
                primitive, f'{kind} buffer index {i} is out of range: block "{block_name}" '
                f"has {len(regions or ())} {kind} buffer(s)", func, blocks=[block_name])
        buf = regions[i].buffer  # type: ignore[index]
        return _check_required(func, primitive, block_name, kind, i, buf, required)
    raise InvalidScheduleArgumentError(
        primitive, f'a buffer is ("read"|"write", index), a name or a Buffer, got {buffer!r} '
        f'(block "{block_name}")', func, blocks=[block_name])


def _check_required(func, primitive, block_name, kind, i, buf, required):
    if required is not None and kind != required:
        raise InvalidScheduleArgumentError(
            primitive, f'buffer "{buf.name}" is a {kind} buffer of block "{block_name}", '
            f"expected a {required} buffer", func, blocks=[block_name])
    return kind, i, buf


# ---------------------------------------------------------------------------
# the primitive


def transform_layout(
    func: PrimFunc,
    block_name: str,
    buffer_index_type: str,
    buffer_index: int,
    index_map: IndexMap,
    pad_value: IndexMap | None = None,
    assume_injective_transform: bool = False,
) -> PrimFunc:
    """Relayout the ``buffer_index``-th ``buffer_index_type`` ("read"/"write") buffer of
    ``block_name`` with ``index_map`` (see the module docstring); ``pad_value`` is
    ``None`` or a map from the new indices to one value.

    >>> import workbench as wb
    >>> f = wb.workloads.matmul(16, 16, 16)
    >>> g = transform_layout(f, "C", "read", 0, wb.IndexMap.parse("lambda i, j: (j, i)"))
    >>> g.params[0].shape, "A[vk, vi]" in g.script()
    ((16, 16), True)
    """
    kind, index, old = normalize_buffer(func, P, block_name, (buffer_index_type, buffer_index))
    if index_map.ndim != old.ndim:
        raise IndexMapArityError(
            P, f"the index map {index_map} takes {index_map.ndim} indices but buffer "
            f'"{old.name}" (the {kind} buffer {index} of block "{block_name}") has '
            f"{old.ndim} dimensions", func, blocks=[block_name])
    index_map = index_map.with_index_dtype(old.index_dtype)
    site = _defining_site(func, old)
    if site == "match_buffer":
        raise BufferIsSubregionError(
            P, f'buffer "{old.name}" of block "{block_name}" is a T.match_buffer view; only a '
            "function parameter or an allocated buffer can change its layout", func,
            blocks=[block_name])
    if pad_value is not None:
        _check_pad_value(func, block_name, old, pad_value)
    inverse, predicate = None, const(False)
    if not assume_injective_transform:
        try:
            inverse, predicate = index_map.non_surjective_inverse(old.shape)
        except IndexMapError as e:
            raise IndexMapNotAffineError(
                P, f'cannot invert {index_map} over buffer "{old.name}" of shape '
                f"{list(old.shape)} ({e})", func, blocks=[block_name]) from None
    try:
        new_shape = index_map.map_shape(old.shape)
    except IndexMapError as e:
        raise IndexMapNotAffineError(P, str(e), func, blocks=[block_name]) from None
    if inverse is not None and isinstance(predicate, IntImm) and not predicate.value:
        predicate = _outside(inverse, old.shape, new_shape)
    has_padding = not (isinstance(predicate, IntImm) and not predicate.value)
    if has_padding and pad_value is None:
        raise TransformationIntroducesPaddingError(
            P, f'the map {index_map} takes buffer "{old.name}" of shape {list(old.shape)} to '
            f"shape {new_shape}, which leaves padding wherever {predicate}; give a pad_value "
            "(or assume_injective_transform=True)", func, blocks=[block_name])
    new = old.with_(shape=tuple(new_shape))
    scope = func.body if site == "param" else _allocating_block(func, old)
    plan = None
    if has_padding and pad_value is not None:
        assert inverse is not None
        plan = _Planner(old, new, inverse, predicate, pad_value).plan(func, scope)
    rewriter = _Rewriter(old, new, index_map, plan, _bounds(func), func)
    body = rewriter.visit_block(func.body)
    if isinstance(plan, _Prologue):
        body = _prepend(body, scope, plan.stmt)
    params = tuple(new if p is old else p for p in func.params)
    return replace(func, params=params, body=body)


def _outside(inverse: IndexMap, shape, new_shape) -> PrimExpr:
    """Where an index of ``new_shape`` maps back (by ``inverse``) outside ``shape``: the
    padding an offset leaves (``lambda i: (i + 1,)`` never fills row 0), which the
    inverse's own predicate does not state. ``False`` where that is provably nowhere
    (or a shape is not constant)."""
    if not all(isinstance(d, int) for d in (*shape, *new_shape)):
        return const(False)
    bounds = {v: (0, d - 1) for v, d in zip(inverse.initial_indices, new_shape, strict=True)}
    out: PrimExpr = const(False)
    for e, d in zip(inverse.final_indices, shape, strict=True):
        for cond in (LT(e, const(0, e.dtype)), GE(e, const(d, e.dtype))):
            c = simplify(cond, bounds)
            if not (isinstance(c, IntImm) and not c.value):
                out = c if isinstance(out, IntImm) else Or(out, c)
    return out


def _defining_site(func: PrimFunc, buf: Buffer) -> str:
    if any(p is buf for p in func.params):
        return "param"
    for s in iter_stmts(func.body):
        if isinstance(s, Block):
            if buf in s.alloc_buffers:
                return "alloc"
            if any(m.buffer is buf for m in s.match_buffers):
                return "match_buffer"
    return "alloc"


def _allocating_block(func: PrimFunc, buf: Buffer) -> Block:
    for s in iter_stmts(func.body):
        if isinstance(s, Block) and buf in s.alloc_buffers:
            return s
    return func.body


def _check_pad_value(func: PrimFunc, block_name: str, buf: Buffer, pad: IndexMap) -> None:
    if len(pad.final_indices) != 1:
        raise TransformationPaddingIndexMapError(
            P, f"the pad value {pad} gives {len(pad.final_indices)} values; it must give one "
            f'(block "{block_name}")', func, blocks=[block_name])
    value = pad.final_indices[0]
    if value.dtype != buf.dtype:
        raise TransformationPaddingTypeError(
            P, f'buffer "{buf.name}" holds {buf.dtype} but the pad value {pad} is '
            f'{value.dtype} (block "{block_name}")', func, blocks=[block_name])
    for x in iter_exprs(value):
        if isinstance(x, BufferLoad) and x.buffer is not buf:
            raise TransformationPaddingExpressionError(
                P, f'the pad value may only read the transformed buffer "{buf.name}", but '
                f'it reads "{x.buffer.name}" (block "{block_name}")', func, blocks=[block_name])


def _bounds(func: PrimFunc) -> dict:
    out: dict = {}
    for s in iter_stmts(func.body):
        if isinstance(s, For):
            out[s.loop_var] = (s.min, s.min + s.extent - 1)
        elif isinstance(s, Block):
            for iv in s.iter_vars:
                out[iv.var] = (0, iv.extent - 1)
    return out


def _prepend(root: Block, scope: Block, stmt: Stmt) -> Block:
    """Put ``stmt`` first in the body of ``scope`` (found by name in ``root``)."""

    class _Pre(Mutator):
        def visit_block(self, b: Block) -> Block:
            if b.name == scope.name:
                body = SeqStmt((stmt, *(b.body.stmts if isinstance(b.body, SeqStmt)
                                       else (b.body,))))
                if is_root(b):
                    return replace(b, body=body)
                return b.with_body(body)
            return super().visit_block(b)

    return _Pre().visit_block(root)


# ---------------------------------------------------------------------------
# padding plans (TVM's TransformLayoutPlanner)


class _Prologue:
    def __init__(self, stmt: Stmt):
        self.stmt = stmt


class _Replacement:
    def __init__(self, loops: dict[int, Stmt]):
        self.loops = loops


class _Epilogue:
    def __init__(self, after: Stmt, stmt: Stmt):
        self.after = after
        self.stmt = stmt


class _Write:
    def __init__(self, store, block, loops, row_major):
        self.store: BufferStore = store
        self.block: Block | None = block
        self.loops: list[For] = loops
        self.row_major: bool = row_major


class _Planner:
    def __init__(self, old: Buffer, new: Buffer, inverse: IndexMap, pred: PrimExpr,
                 pad: IndexMap):
        self.old, self.new, self.inverse, self.pred, self.pad = old, new, inverse, pred, pad
        self.writes: list[_Write] = []
        self.active: list[For] = []
        self.depth: dict[Var, tuple[int, int]] = {}
        self.bind: dict[Var, PrimExpr] = {}
        self.block: Block | None = None

    # -- collect the stores of the buffer, with the loops their indices depend on
    def _range(self, e: PrimExpr) -> tuple[int, int] | None:
        out = None
        for x in iter_exprs(e):
            if isinstance(x, Var) and x in self.depth:
                a, b = self.depth[x]
                out = (a, b) if out is None else (min(out[0], a), max(out[1], b))
        return out

    def _visit(self, s: Stmt) -> None:
        if isinstance(s, For):
            d = len(self.active)
            self.depth[s.loop_var] = (d, d)
            self.active.append(s)
            self._visit(s.body)
            self.active.pop()
            del self.depth[s.loop_var]
        elif isinstance(s, Block):
            saved = self.block
            for iv, v in zip(s.iter_vars, s.iter_values, strict=True):
                r = self._range(v)
                if r is not None:
                    self.depth[iv.var] = r
                    self.bind[iv.var] = substitute(v, self.bind) if self.bind else v
            self.block = s
            if s.init is not None:
                self._visit(s.init)
            self._visit(s.body)
            self.block = saved
        elif isinstance(s, SeqStmt):
            for x in s.stmts:
                self._visit(x)
        elif isinstance(s, LetStmt):
            r = self._range(s.value)
            if r is not None:
                self.depth[s.var] = r
                self.bind[s.var] = substitute(s.value, self.bind)
            self._visit(s.body)
        elif hasattr(s, "then_case"):
            self._visit(s.then_case)  # type: ignore[attr-defined]
            if s.else_case is not None:  # type: ignore[attr-defined]
                self._visit(s.else_case)  # type: ignore[attr-defined]
        elif isinstance(s, BufferStore) and s.buffer is self.old:
            r = None
            for i in s.indices:
                ri = self._range(i)
                if ri is not None:
                    r = ri if r is None else (min(r[0], ri[0]), max(r[1], ri[1]))
            loops = self.active[r[0]: r[1] + 1] if r is not None else []
            self.writes.append(_Write(s, self.block, loops, self._row_major(s, loops)))

    def _row_major(self, s: BufferStore, loops: list[For]) -> bool:
        if not loops or len(loops) != self.old.ndim or len(s.indices) != len(loops):
            return False
        for lp, dim, idx in zip(loops, self.old.shape, s.indices, strict=True):
            value = substitute(idx, self.bind) if self.bind else idx
            if value is not lp.loop_var or lp.kind != "serial" or str(lp.extent) != str(dim):
                return False
        return True

    # -- choose the plan
    def plan(self, func: PrimFunc, scope: Block):
        self._visit(scope.body)
        if not self.writes:
            return _Prologue(self._nest("assumptions", assume=True, func=func))
        replacements: dict[int, Stmt] = {}
        for w in self.writes:
            if w.loops and w.row_major:
                stmt = self._replace(w)
                if stmt is not None:
                    replacements[id(w.loops[0])] = stmt
        if replacements:
            return _Replacement(replacements)
        last = self.writes[-1]
        after = last.loops[0] if last.loops else last.block
        if after is None:
            return None
        return _Epilogue(after, self._nest("padding", assume=False, func=func))

    def _fresh_inverse(self) -> tuple[list[Var], list[PrimExpr], PrimExpr]:
        new_vars = [Var(v.name, v.dtype) for v in self.inverse.initial_indices]
        m = dict(zip(self.inverse.initial_indices, new_vars, strict=True))
        finals = [substitute(e, m) for e in self.inverse.final_indices]
        return new_vars, finals, substitute(self.pred, m)

    def _pad_at(self, indices: list[PrimExpr]) -> PrimExpr:
        return self.pad.map_indices(indices)[0]

    def _nest(self, what: str, assume: bool, func: PrimFunc) -> Stmt:
        loop_vars, _, pred = self._fresh_inverse()
        block_vars = [Var(f"v_{v.name}", v.dtype) for v in loop_vars]
        to_block = dict(zip(loop_vars, block_vars, strict=True))
        taken = {b.name for b in iter_stmts(func.body) if isinstance(b, Block)}
        suffix = "assumptions" if assume else "padding"
        name = fresh_name(f"buffer_{self.new.name}_{suffix}", taken)
        if assume:
            value = self._pad_at(list(block_vars))
            ok = EQ(BufferLoad(self.new, tuple(block_vars)), value)
            cond = Or(Not(substitute(pred, to_block)), ok)
            body: Stmt = Evaluate(OpaqueCall("assume", (cond,), "bool"))
            predicate: PrimExpr = const(True)
        else:
            body = BufferStore(self.new, self._pad_at(list(block_vars)), tuple(block_vars))
            predicate = pred
        ivs = tuple(IterVar(bv, dim, "S") for bv, dim in zip(block_vars, self.new.shape,
                                                             strict=True))
        stmt: Stmt = Block(name, ivs, tuple(loop_vars), body, predicate=predicate)
        for lv, dim in zip(reversed(loop_vars), reversed(self.new.shape), strict=True):
            stmt = For(lv, dim, "serial", stmt)
        return stmt

    def _replace(self, w: _Write) -> Stmt | None:
        loop_vars, finals, pred = self._fresh_inverse()
        remap: dict[Var, PrimExpr] = {
            lp.loop_var: f for lp, f in zip(w.loops, finals, strict=True)}
        new_indices: list[PrimExpr] = list(loop_vars)
        target = w.block
        iter_update = None
        if target is not None and w.store.indices:
            ivs = target.iter_vars
            idx = w.store.indices
            n = len(idx)
            start = next((k for k in range(len(ivs) - n + 1) if idx[0] is ivs[k].var), None)
            if start is not None and all(
                idx[k] is ivs[start + k].var and ivs[start + k].kind == "S" for k in range(n)
            ):
                block_vars = [Var(f"v_{v.name}", v.dtype) for v in loop_vars]
                to_block = dict(zip(loop_vars, block_vars, strict=True))
                new_ivs = (ivs[:start] + tuple(IterVar(bv, dim, "S") for bv, dim in
                                               zip(block_vars, self.new.shape, strict=True))
                           + ivs[start + n:])
                vals = target.iter_values
                new_vals = vals[:start] + tuple(loop_vars) + vals[start + n:]
                for k in range(n):
                    remap[idx[k]] = substitute(finals[k], to_block)  # type: ignore[index]
                pred = substitute(pred, to_block)
                new_indices = list(block_vars)
                iter_update = (target, new_ivs, new_vals)
        pad_at = self._pad_at(new_indices)
        store_key = [str(i) for i in w.store.indices]
        old, new = self.old, self.new
        replaced_all = True

        class _Replace(Mutator):
            def visit_expr(self, e: PrimExpr) -> PrimExpr:
                if isinstance(e, Var) and e in remap:
                    return remap[e]
                return super().visit_expr(e)

            def visit_stmt(self, s: Stmt) -> Stmt:
                nonlocal replaced_all
                if isinstance(s, BufferStore):
                    if s.buffer is old and [str(i) for i in s.indices] == store_key:
                        value = IfThenElseExpr(pred, pad_at, self.visit_expr(s.value))
                        return BufferStore(new, value, tuple(new_indices))
                    replaced_all = False  # any other store keeps the loops (as TVM)
                return super().visit_stmt(s)

            def visit_block(self, b: Block) -> Block:
                out = super().visit_block(b)
                if iter_update is not None and b is iter_update[0]:
                    out = replace(out, iter_vars=iter_update[1], iter_values=iter_update[2],
                                  reads=None, writes=None)
                return out

        body = _Replace().visit_stmt(w.loops[-1].body)
        if not replaced_all:
            return None
        stmt: Stmt = body
        for lv, dim in zip(reversed(loop_vars), reversed(self.new.shape), strict=True):
            stmt = For(lv, dim, "serial", stmt)
        return stmt


# ---------------------------------------------------------------------------
# rewriting every access


class _Rewriter(Mutator):
    def __init__(self, old: Buffer, new: Buffer, index_map: IndexMap, plan, bounds: dict,
                 func: PrimFunc):
        self.old, self.new, self.index_map, self.plan = old, new, index_map, plan
        self.bounds = bounds
        self.func = func

    def _indices(self, indices) -> tuple[PrimExpr, ...]:
        mapped = self.index_map.map_indices(list(indices))
        # a variable of one value (a unit loop or iter var) is that value, as TVM's
        # analyzer knows it
        points = {v: IntImm(self.bounds[v][0], v.dtype) for x in mapped
                  for v in iter_exprs(x) if isinstance(v, Var) and v in self.bounds
                  and isinstance(self.bounds[v][0], int)
                  and self.bounds[v][0] == self.bounds[v][1]}
        if points:  # (a bare variable stays, as TVM leaves it)
            mapped = [x if isinstance(x, Var) else substitute(x, points) for x in mapped]
        return tuple(simplify(i, self.bounds) for i in mapped)

    def visit_buffer(self, b: Buffer) -> Buffer:
        return self.new if b is self.old else b

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, BufferLoad) and e.buffer is self.old:
            idx = tuple(self.visit_expr(i) for i in e.indices)
            return BufferLoad(self.new, self._indices(idx))
        return super().visit_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        if isinstance(self.plan, _Replacement) and isinstance(s, For) and (
            id(s) in self.plan.loops
        ):
            self._note_bounds(self.plan.loops[id(s)])
            return self.visit_stmt(self.plan.loops.pop(id(s)))
        if isinstance(s, BufferStore) and s.buffer is self.old:
            value = self.visit_expr(s.value)
            idx = tuple(self.visit_expr(i) for i in s.indices)
            out: Stmt = BufferStore(self.new, value, self._indices(idx))
        elif isinstance(s, SeqStmt):
            items: list[Stmt] = []
            for x in s.stmts:
                y = self.visit_stmt(x)
                items.extend(y.stmts if isinstance(y, SeqStmt) else (y,))
            out = s if all(a is b for a, b in zip(items, s.stmts, strict=False)) and (
                len(items) == len(s.stmts)) else SeqStmt(tuple(items))
        else:
            out = super().visit_stmt(s)
        if isinstance(self.plan, _Epilogue) and s is self.plan.after:
            self._note_bounds(self.plan.stmt)
            return SeqStmt((out, self.plan.stmt))
        return out

    def _note_bounds(self, stmt: Stmt) -> None:
        for x in iter_stmts(stmt):
            if isinstance(x, For):
                self.bounds[x.loop_var] = (x.min, x.min + x.extent - 1)
            elif isinstance(x, Block):
                for iv in x.iter_vars:
                    self.bounds[iv.var] = (0, iv.extent - 1)

    def visit_block(self, b: Block) -> Block:
        for m in b.match_buffers:
            if m.source.buffer is self.old:
                raise TransformLayoutMatchBufferError(
                    P, f'block "{b.name}" views buffer "{self.old.name}" with T.match_buffer; '
                    "transform_layout cannot relayout a buffer seen through a view",
                    self.func, blocks=[b.name])
        out = super().visit_block(b)
        if out is not b and is_root(b):
            return replace(out, reads=(), writes=())
        if out is not b:
            out = self._explicit_regions(b, out)
        return out

    def _explicit_regions(self, old_block: Block, out: Block) -> Block:
        """Regions of the buffer that ``old_block`` marks explicit
        (``annotate_buffer_access``) mapped into the new layout: each output index of the
        map boxed over the old region (the whole dimension where that is not a constant
        width), as TVM maps them (``IndexMap::MapRanges``)."""
        ann = dict(old_block.annotations)
        changes = {}
        for key, field in EXPLICIT_REGION_KEYS:
            marked = ann.get(key) or ()
            olds = getattr(old_block, field) or ()
            regions = list(getattr(out, field) or ())
            for i in marked if isinstance(marked, (tuple, list)) else ():
                if not (isinstance(i, int) and 0 <= i < len(olds)) or olds[i].buffer is not (
                    self.old
                ):
                    continue
                pos = next((k for k, r in enumerate(regions) if r.buffer is self.new), None)
                if pos is not None:
                    regions[pos] = BufferRegion(self.new, self._map_region(olds[i].region))
                    changes[field] = tuple(regions)
        return replace(out, **changes) if changes else out

    def _map_region(self, region) -> tuple:
        whole = tuple((IntImm(0, self.new.index_dtype), d if isinstance(d, PrimExpr) else
                       IntImm(d, self.new.index_dtype)) for d in self.new.shape)
        dims, box = [], {}
        for mn, ext in region:
            ext = ext.value if isinstance(ext, IntImm) else ext
            if not isinstance(ext, int):
                return whole
            mn = self.visit_expr(mn)
            if ext == 1:
                dims.append(mn)
                continue
            r = Var(f"r{len(box)}", mn.dtype)
            box[r] = (0, ext - 1)
            dims.append(mn + r)
        saved = self.bounds
        self.bounds = {**saved, **box}
        try:
            mapped = self._indices(dims)
        finally:
            self.bounds = saved
        out = []
        for d, e in enumerate(mapped):
            got = _relax(e, box, None) if box else (e, 1)
            if got is None or not isinstance(got[1], int):
                out.append(whole[d])
            else:
                out.append((got[0], IntImm(got[1], self.new.index_dtype)
                            if got[1] != 1 else IntImm(1)))
        return tuple(out)


class TransformLayoutMatchBufferError(ScheduleError):
    """A block views the buffer through ``T.match_buffer``; the view's region cannot be
    carried through the new layout."""


__all__ = [
    "BufferIsSubregionError",
    "IndexMapArityError",
    "IndexMapNotAffineError",
    "TransformLayoutMatchBufferError",
    "TransformationIntroducesPaddingError",
    "TransformationPaddingExpressionError",
    "TransformationPaddingIndexMapError",
    "TransformationPaddingTypeError",
    "normalize_buffer",
    "transform_layout",
]
