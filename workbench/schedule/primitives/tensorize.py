"""Tensorization: tensorize and the loop mapping of tile_with_tensor_intrin.

``tensorize(loop_or_block, intrin)`` replaces a block's computation by a tensor
intrinsic's implementation (:class:`workbench.TensorIntrin`). Given a loop, the subtree
under it is blockized first (``<block>_o``). The block must then match the intrinsic's
description structurally:

* the loops under the block and the one block under them: as many loops, with the same
  extents and kinds; the inner block's iter vars with the same kinds and extents, bound
  to the loops as the description binds them;
* the init (none, unless the description has the same one) and the computation: the
  same expression tree up to renaming of variables and buffers, with the same dtypes;
  every access, taken relative to the block's region of that buffer, indexes it as the
  description does (``A[vi_o * 16 + vi_i, vk_o * 16 + vk_i]`` matches ``A[vi, vk]``);
* the block's read and write regions: the same buffers, with the description's extents
  (leading dimensions of extent 1 where the buffer has more dimensions).

A mismatch raises :class:`TensorizeMismatchError`, saying which part did not match. On
a match the block keeps its iter vars and regions, and its body becomes the
implementation's, whose buffers are bound to the block's regions by ``T.match_buffer``
(as TVM does). Before, with ``k`` of a matmul split by 4 (the init decomposed)::

    for i, j, k_0, k_1 in T.grid(16, 16, 4, 4):
        with T.block("C_update"):
            vi, vj = T.axis.remap("SS", [i, j])
            vk = T.axis.reduce(16, k_0 * 4 + k_1)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]

after ``tensorize(k_1, "dot4")``::

    for i, j, k_0 in T.grid(16, 16, 4):
        with T.block("C_update_o"):
            vi_o, vj_o, vk_o = T.axis.remap("SSR", [i, j, k_0])
            T.reads(C[vi_o, vj_o], A[vi_o, vk_o * 4:vk_o * 4 + 4], B[vj_o, vk_o * 4:vk_o * 4 + 4])
            T.writes(C[vi_o, vj_o])
            A_1 = T.match_buffer(A[vi_o, vk_o * 4:vk_o * 4 + 4], (4,), offset_factor=1)
            B_1 = T.match_buffer(B[vj_o, vk_o * 4:vk_o * 4 + 4], (4,), offset_factor=1)
            C_1 = T.match_buffer(C[vi_o, vj_o], (), offset_factor=1)
            T.call_extern("void", "dot4", C_1.data, C_1.elem_offset, A_1.data, ...)

:func:`tensorize_loop_mapping` finds, for ``tile_with_tensor_intrin``, the loops of a
block that correspond to the description's loops (TVM's ``GetTensorizeLoopMapping``).
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, Buffer, For, PrimFunc, SeqStmt, Stmt, Var
from ...ir.analysis import iter_blocks
from ...ir.buffer import BufferRegion, MatchBufferRegion
from ...ir.expr import (
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
)
from ...ir.functor import Mutator, expr_vars, iter_exprs, iter_stmts, stmt_exprs, substitute
from ...ir.printer import expr_to_str, region_to_str
from ...ir.simplify import simplify
from ...ir.stmt import BufferStore, Evaluate, IfThenElse, IterVar, LetStmt
from ...tensor_intrin import TensorIntrin, desc_parts, impl_regions
from ..errors import ScheduleError
from ._common import find_block_path, fresh_name, replace_path

__all__ = [
    "TensorizeMismatchError",
    "UnknownTensorIntrinError",
    "ViewOffsetError",
    "tensorize",
    "tensorize_loop_mapping",
]


# ---------------------------------------------------------------------------
# errors


class TensorizeMismatchError(ScheduleError):
    """``tensorize``: the block does not match the tensor intrinsic's description.
    ``part`` says what did not: ``"structure"`` (loops and inner block), ``"iteration"``
    (iter var kinds, extents, bindings), ``"init"``, ``"computation"`` or
    ``"regions"``."""

    def __init__(self, part: str, *args, **kwargs):
        self.part = part
        super().__init__(*args, **kwargs)


class ViewOffsetError(ScheduleError):
    """``tensorize``: the implementation hands a buffer's ``.data`` (its array's start)
    to its code without the buffer's ``.elem_offset``, so it assumes the buffer starts
    at its array's first element, but the block binds it to a region that does not
    (declare the buffer with ``offset_factor=1``, so ``access_ptr`` adds the offset)."""


class UnknownTensorIntrinError(ScheduleError):
    """``tensorize`` / ``tile_with_tensor_intrin``: no tensor intrinsic of that name is
    registered."""


def lookup_intrin(primitive: str, name: str, func: PrimFunc | None = None) -> TensorIntrin:
    """The registered intrinsic ``name`` (a TensorIntrin passes through), or
    :class:`UnknownTensorIntrinError` listing the registered ones."""
    if isinstance(name, TensorIntrin):
        return name
    intrin = TensorIntrin.get(name, allow_missing=True)
    if intrin is None:  # a K-blocked CPU micro-kernel is made on first use
        from ...tensor_intrin.cpu import fma_intrin_named

        if fma_intrin_named(name) is not None:
            intrin = TensorIntrin.get(name, allow_missing=True)
    if intrin is None:
        known = TensorIntrin.names()
        raise UnknownTensorIntrinError(
            primitive,
            f"no tensor intrinsic named {name!r} is registered (registered: "
            f"{', '.join(known) if known else 'none'}); register it with "
            "wb.TensorIntrin.register(name, desc, impl)",
            func,
        )
    return intrin


# ---------------------------------------------------------------------------
# matching


class _Mismatch(Exception):
    def __init__(self, part: str, message: str):
        self.part = part
        self.message = message


def _literal(e: PrimExpr) -> str:
    if isinstance(e, FloatImm):
        text = repr(float(e.value))
        return text + "f" if e.dtype == "float32" else text
    if isinstance(e, IntImm) and e.dtype != "bool":
        return str(e.value)
    return expr_to_str(e)


def _first_store(s: Stmt) -> BufferStore | None:
    return next((x for x in iter_stmts(s) if isinstance(x, BufferStore)), None)


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _same_value(a, b) -> bool:
    """Two extents / expressions are equal (ints, or expressions whose difference
    simplifies to 0)."""
    a, b = (x.value if isinstance(x, IntImm) else x for x in (a, b))
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    a, b = (IntImm(x) if isinstance(x, int) else x for x in (a, b))
    if a.dtype != b.dtype:
        b = _Retype({}, a.dtype).visit_expr(b)
    return _is_zero(simplify(a - b))


class _Retype(Mutator):
    """Rename variables (``mapping``) and give integer constants the index dtype
    ``dtype`` (a description written in int32 against an int64 workload)."""

    def __init__(self, mapping: dict, dtype: str):
        self.mapping = mapping
        self.dtype = dtype

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, Var):
            return self.mapping.get(e, e)
        if isinstance(e, IntImm) and e.dtype in ("int32", "int64") and e.dtype != self.dtype:
            return IntImm(e.value, self.dtype)
        return super().visit_expr(e)


class _Matcher:
    """Compares the workload block ``w`` (its loops and inner block) with the
    description; raises :class:`_Mismatch`. ``w2d``/``d2w`` map variables, ``buf``
    maps workload buffers to description buffers, ``base`` is the origin of each
    workload buffer's tile (what its indices are taken relative to)."""

    def __init__(self, w: Block, desc: PrimFunc):
        self.w = w
        self.desc = desc
        self.w2d: dict[Var, Var] = {}
        self.d2w: dict[Var, Var] = {}
        self.buf: dict[Buffer, Buffer] = {}
        self.rbuf: dict[Buffer, Buffer] = {}
        self.base: dict[Buffer, tuple[PrimExpr, ...]] = {}
        # ranges of the workload's iter vars and loop variables: an index such as
        # ``(vj_o * 16 + vj) % 16`` (a packed layout) is ``vj`` when ``vj`` < 16
        self.bounds: dict[Var, tuple[int, int]] = {}

    # -- structure and iteration --------------------------------------------------------
    def run(self) -> None:
        parts = desc_parts(self.desc)
        assert parts is not None  # checked at registration
        d_loops, d_block = parts
        w_loops: list[For] = []
        s: Stmt = self.w.body
        while isinstance(s, For):
            w_loops.append(s)
            s = s.body
        if not isinstance(s, Block) or any(b is not s for b in iter_blocks(s)):
            raise _Mismatch("structure", "its body is not a loop nest around one block, as the "
                                         "intrinsic's description is")
        w_block = s
        for iv in (*self.w.iter_vars, *w_block.iter_vars):
            if isinstance(iv.extent, int) and iv.extent > 0:
                self.bounds[iv.var] = (0, iv.extent - 1)
        for lp in w_loops:
            if isinstance(lp.extent, int) and isinstance(lp.min, int) and lp.extent > 0:
                self.bounds[lp.loop_var] = (lp.min, lp.min + lp.extent - 1)
        ext = lambda loops: ", ".join(str(lp.extent) for lp in loops)  # noqa: E731
        if len(w_loops) != len(d_loops):
            raise _Mismatch(
                "structure",
                f"it has {len(w_loops)} loop{'s' if len(w_loops) != 1 else ''} "
                f"({ext(w_loops)}) around its block but the intrinsic has {len(d_loops)} "
                f"({ext(d_loops)})")
        for wl, dl in zip(w_loops, d_loops, strict=True):
            if not _same_value(wl.extent, dl.extent) or wl.min != dl.min:
                raise _Mismatch("structure", f"loop {wl.loop_var.name} has extent {wl.extent} but "
                                             f"the intrinsic's loop {dl.loop_var.name} has "
                                             f"{dl.extent}")
            if (wl.kind, wl.thread_tag) != (dl.kind, dl.thread_tag):
                raise _Mismatch("structure", f"loop {wl.loop_var.name} is "
                                             f"{wl.thread_tag or wl.kind} but the intrinsic's "
                                             f"loop {dl.loop_var.name} is "
                                             f"{dl.thread_tag or dl.kind}")
            self._bind(wl.loop_var, dl.loop_var)
        self._iteration(w_block, d_block)
        self._init(w_block, d_block)
        self.stmt(w_block.body, d_block.body)
        self._regions()

    def _bind(self, wv: Var, dv: Var) -> None:
        self.w2d[wv] = dv
        self.d2w[dv] = wv

    def _iteration(self, wb: Block, db: Block) -> None:
        wk = "".join(iv.kind for iv in wb.iter_vars)
        dk = "".join(iv.kind for iv in db.iter_vars)
        if wk != dk:
            raise _Mismatch("iteration", f"its block {wb.name!r} iterates {wk or 'nothing'} "
                                         f"but the intrinsic's iterates {dk or 'nothing'} "
                                         "(S spatial, R reduction)")
        for wiv, div in zip(wb.iter_vars, db.iter_vars, strict=True):
            if not _same_value(wiv.extent, div.extent):
                raise _Mismatch("iteration", f"iter var {wiv.var.name} has extent {wiv.extent} "
                                             f"but the intrinsic's {div.var.name} has "
                                             f"{div.extent}")
            self._bind(wiv.var, div.var)
        for wiv, wv, div, dv in zip(wb.iter_vars, wb.iter_values, db.iter_vars, db.iter_values,
                                    strict=True):
            if not self._same_index(wv, dv):
                raise _Mismatch("iteration", f"iter var {wiv.var.name} is bound to "
                                             f"{self._rename(wv)} but the intrinsic's "
                                             f"{div.var.name} to {expr_to_str(dv)}")
        if not self._same_index(wb.predicate, db.predicate):
            raise _Mismatch("iteration", f"its block's predicate {self._rename(wb.predicate)} "
                                         f"is not the intrinsic's {expr_to_str(db.predicate)}")

    def _init(self, wb: Block, db: Block) -> None:
        root = self.desc.body
        for w_init, d_init in ((self.w.init, root.init), (wb.init, db.init)):
            if w_init is None and d_init is None:
                continue
            if d_init is None:
                store = _first_store(w_init)
                what = f"stores {_literal(store.value)}" if store is not None else "runs"
                raise _Mismatch("init", f"the init {what} but the intrinsic stores nothing")
            if w_init is None:
                store = _first_store(d_init)
                what = f"stores {_literal(store.value)}" if store is not None else "runs"
                raise _Mismatch("init", f"the intrinsic's init {what} but the block has no init")
            self.stmt(w_init, d_init)

    # -- expressions ------------------------------------------------------------------
    def _rename(self, e: PrimExpr) -> str:
        return expr_to_str(simplify(substitute(e, self.w2d)))

    def _show(self, e: PrimExpr) -> str:
        """``e`` as the description would write it: accesses relative to the block's
        tiles, variables renamed."""
        m = self

        class Show(Mutator):
            def visit_expr(self, x: PrimExpr) -> PrimExpr:
                if isinstance(x, BufferLoad):
                    base = m.base.get(x.buffer)
                    if base is None:
                        r = m._w_region(x.buffer, "reads")
                        base = tuple(mn for mn, _ in r.region) if r is not None else None
                    if base is not None:
                        idx = tuple(simplify(substitute(simplify(i - b), m.w2d))
                                    for i, b in zip(x.indices, base, strict=True))
                        return BufferLoad(x.buffer, idx)
                if isinstance(x, Var):
                    return m.w2d.get(x, x)
                return super().visit_expr(x)

        return expr_to_str(Show().visit_expr(e))

    def _same_index(self, w: PrimExpr, d: PrimExpr) -> bool:
        """``w`` (workload variables) equals ``d`` (description variables)."""
        if w.dtype == "bool" or d.dtype == "bool":
            w, d = simplify(w), simplify(d)
            if isinstance(w, IntImm) and isinstance(d, IntImm):
                return bool(w.value) == bool(d.value)
            return expr_to_str(substitute(w, self.w2d)) == expr_to_str(d)
        d = _Retype(self.d2w, w.dtype).visit_expr(d)
        return _is_zero(simplify(simplify(w, self.bounds) - d, self.bounds))

    def stmt(self, w: Stmt, d: Stmt) -> None:
        if type(w) is not type(d):
            raise _Mismatch("computation", "its computation has a different statement "
                                           f"structure than the intrinsic's ({type(w).__name__} "
                                           f"where the intrinsic has {type(d).__name__})")
        if isinstance(w, SeqStmt):
            if len(w.stmts) != len(d.stmts):  # type: ignore[attr-defined]
                raise _Mismatch("computation", f"it runs {len(w.stmts)} statements but the "
                                               f"intrinsic {len(d.stmts)}")  # type: ignore
            for a, b in zip(w.stmts, d.stmts, strict=True):  # type: ignore[attr-defined]
                self.stmt(a, b)
        elif isinstance(w, BufferStore):
            self.access(w, d, "writes")  # type: ignore[arg-type]
            self.expr(w.value, d.value, w)  # type: ignore[attr-defined]
        elif isinstance(w, Block):
            # a block in an init (blockize's <block>_init): compare its iteration and body
            db: Block = d  # type: ignore[assignment]
            if len(w.iter_vars) != len(db.iter_vars):
                raise _Mismatch("init", f"block {w.name!r} has {len(w.iter_vars)} iter vars but "
                                        f"the intrinsic's {db.name!r} {len(db.iter_vars)}")
            for a, b in zip(w.iter_vars, db.iter_vars, strict=True):
                self._bind(a.var, b.var)
            for a, b in zip(w.iter_values, db.iter_values, strict=True):
                if not self._same_index(a, b):
                    raise _Mismatch("init", f"block {w.name!r} binds {self._rename(a)} where the "
                                            f"intrinsic binds {expr_to_str(b)}")
            self.stmt(w.body, db.body)
        elif isinstance(w, For):
            if not _same_value(w.extent, d.extent):  # type: ignore[attr-defined]
                raise _Mismatch("computation", f"loop {w.loop_var.name} has extent {w.extent} "
                                               "but the intrinsic's has "
                                               f"{d.extent}")  # type: ignore[attr-defined]
            self._bind(w.loop_var, d.loop_var)  # type: ignore[attr-defined]
            self.stmt(w.body, d.body)  # type: ignore[attr-defined]
        elif isinstance(w, Evaluate):
            self.expr(w.value, d.value, None)  # type: ignore[attr-defined]
        elif isinstance(w, IfThenElse):
            self.expr(w.condition, d.condition, None)  # type: ignore[attr-defined]
            self.stmt(w.then_case, d.then_case)  # type: ignore[attr-defined]
            if (w.else_case is None) != (d.else_case is None):  # type: ignore[attr-defined]
                raise _Mismatch("computation", "an if has an else branch on one side only")
            if w.else_case is not None:
                self.stmt(w.else_case, d.else_case)  # type: ignore[attr-defined]
        elif isinstance(w, LetStmt):
            self.expr(w.value, d.value, None)  # type: ignore[attr-defined]
            self._bind(w.var, d.var)  # type: ignore[attr-defined]
            self.stmt(w.body, d.body)  # type: ignore[attr-defined]
        else:
            raise _Mismatch("computation", f"cannot compare {type(w).__name__} statements")

    def _differ(self, w: PrimExpr, d: PrimExpr, store: BufferStore | None) -> _Mismatch:
        where = ""
        if store is not None:
            where = f" (in the value stored to {store.buffer.name})"
        return _Mismatch("computation", f"it computes {self._show(w)} where the intrinsic "
                                        f"computes {expr_to_str(d)}{where}")

    def expr(self, w: PrimExpr, d: PrimExpr, store: BufferStore | None) -> None:
        if type(w) is not type(d):
            raise self._differ(w, d, store)
        if w.dtype != d.dtype and not isinstance(w, Var):
            raise _Mismatch("computation", f"it computes {self._show(w)} in {w.dtype} where "
                                           f"the intrinsic computes {expr_to_str(d)} in "
                                           f"{d.dtype}")
        if isinstance(w, Var):
            if self.w2d.get(w) is not d:
                raise self._differ(w, d, store)
        elif isinstance(w, (IntImm, FloatImm, StringImm)):
            if w.value != d.value:  # type: ignore[attr-defined]
                raise self._differ(w, d, store)
        elif isinstance(w, BufferLoad):
            self.access(w, d, "reads")  # type: ignore[arg-type]
        elif isinstance(w, BinaryOp):
            self.expr(w.a, d.a, store)  # type: ignore[attr-defined]
            self.expr(w.b, d.b, store)  # type: ignore[attr-defined]
        elif isinstance(w, Not):
            self.expr(w.a, d.a, store)  # type: ignore[attr-defined]
        elif isinstance(w, Cast):
            self.expr(w.value, d.value, store)  # type: ignore[attr-defined]
        elif isinstance(w, (Select, IfThenElseExpr)):
            for f in ("condition", "true_value", "false_value"):
                self.expr(getattr(w, f), getattr(d, f), store)
        elif isinstance(w, (Call, CallExtern, OpaqueCall)):
            if getattr(w, "op", getattr(w, "name", None)) != \
                    getattr(d, "op", getattr(d, "name", None)) or len(w.args) != len(d.args):
                raise self._differ(w, d, store)
            for a, b in zip(w.args, d.args, strict=True):
                self.expr(a, b, store)
        elif isinstance(w, Let):
            self.expr(w.value, d.value, store)  # type: ignore[attr-defined]
            self._bind(w.var, d.var)  # type: ignore[attr-defined]
            self.expr(w.body, d.body, store)  # type: ignore[attr-defined]
        elif isinstance(w, BufferField):
            self._map_buffer(w.buffer, d.buffer, "reads")  # type: ignore[attr-defined]
            if w.field != d.field:  # type: ignore[attr-defined]
                raise self._differ(w, d, store)
        else:
            raise self._differ(w, d, store)

    # -- buffers ---------------------------------------------------------------------
    def _w_region(self, buf: Buffer, role: str) -> BufferRegion | None:
        first, second = (self.w.writes, self.w.reads) if role == "writes" else \
            (self.w.reads, self.w.writes)
        for regions in (first, second):
            for r in regions or ():
                if r.buffer is buf:
                    return r
        return None

    def _d_region(self, buf: Buffer, role: str) -> BufferRegion | None:
        root = self.desc.body
        first, second = (root.writes, root.reads) if role == "writes" else \
            (root.reads, root.writes)
        for regions in (first, second):
            for r in regions or ():
                if r.buffer is buf:
                    return r
        return None

    def _map_buffer(self, wb: Buffer, db: Buffer, role: str) -> None:
        known = self.buf.get(wb)
        if known is db:
            return
        verb = "writes" if role == "writes" else "reads"
        if known is not None or db in self.rbuf:
            other = self.rbuf.get(db)
            raise _Mismatch("computation", f"it {verb} {wb.name} where the intrinsic {verb} "
                                           f"{db.name}, which matches "
                                           f"{other.name if other is not None else 'another'} "
                                           "buffer elsewhere")
        if wb.dtype != db.dtype or wb.scope != db.scope:
            raise _Mismatch("computation", f"it {verb} {wb.name} ({wb.dtype}, {wb.scope}) where "
                                           f"the intrinsic {verb} {db.name} ({db.dtype}, "
                                           f"{db.scope})")
        if wb.ndim < db.ndim:
            raise _Mismatch("computation", f"it {verb} {wb.name} ({wb.ndim} dimensions) where "
                                           f"the intrinsic {verb} {db.name} ({db.ndim})")
        wr = self._w_region(wb, role)
        if wr is None:
            raise _Mismatch("regions", f"its regions do not cover {wb.name}")
        dr = self._d_region(db, role)
        lead = wb.ndim - db.ndim
        base = []
        for k, (mn, _) in enumerate(wr.region):
            if k >= lead and dr is not None:
                d_min = dr.region[k - lead][0]
                mn = simplify(mn - _Retype(self.d2w, mn.dtype).visit_expr(d_min))
            base.append(mn)
        self.buf[wb] = db
        self.rbuf[db] = wb
        self.base[wb] = tuple(base)

    def _relative(self, buf: Buffer, indices) -> list[PrimExpr]:
        base = self.base[buf]
        return [simplify(simplify(i, self.bounds) - b, self.bounds)
                for i, b in zip(indices, base, strict=True)]

    def access(self, w: BufferLoad | BufferStore, d: BufferLoad | BufferStore, role: str) -> None:
        self._map_buffer(w.buffer, d.buffer, role)
        lead = w.buffer.ndim - d.buffer.ndim
        rel = self._relative(w.buffer, w.indices)
        same = all(self._same_index(a, b) for a, b in zip(rel[lead:], d.indices, strict=True))
        if not same:
            verb = "writes" if role == "writes" else "reads"
            mine = ", ".join(self._rename(x) for x in rel[lead:])
            theirs = ", ".join(expr_to_str(x) for x in d.indices)
            raise _Mismatch("computation", f"it {verb} {w.buffer.name}[{mine}] but the "
                                           f"intrinsic {verb} {d.buffer.name}[{theirs}]")

    # -- regions ---------------------------------------------------------------------
    def _regions(self) -> None:
        root = self.desc.body
        for role, w_regions, d_regions in (("writes", self.w.writes, root.writes),
                                           ("reads", self.w.reads, root.reads)):
            seen: set[Buffer] = set()
            for dr in d_regions or ():
                wb = self.rbuf.get(dr.buffer)
                if wb is None:
                    raise _Mismatch("regions", f"the intrinsic {role} {dr.buffer.name}, which "
                                               "its computation does not access")
                wr = next((r for r in w_regions or () if r.buffer is wb), None)
                if wr is None:
                    raise _Mismatch("regions", f"it does not {role[:-1]} {wb.name} but the "
                                               f"intrinsic {role} {dr.buffer.name}")
                seen.add(wb)
                lead = wb.ndim - dr.buffer.ndim
                ok = all(_same_value(e, 1) for _, e in wr.region[:lead]) and all(
                    _same_value(we, de) for (_, we), (_, de) in zip(wr.region[lead:], dr.region,
                                                                   strict=True))
                rel = self._relative(wb, [mn for mn, _ in wr.region])
                ok = ok and all(self._same_index(a, mn) for a, (mn, _) in
                                zip(rel[lead:], dr.region, strict=True))
                if not ok:
                    raise _Mismatch("regions", f"it {role} {region_to_str(wr)} but the "
                                               f"intrinsic {role} {region_to_str(dr)}")
            for wr in w_regions or ():
                if wr.buffer not in seen:
                    raise _Mismatch("regions", f"it also {role} {region_to_str(wr)}, which the "
                                               "intrinsic does not")


# ---------------------------------------------------------------------------
# the implementation, bound to the block's regions


class _Offset(Exception):
    def __init__(self, param: str, buffer: str):
        self.param = param
        self.buffer = buffer


class _Rebind(Mutator):
    """The implementation's body with its buffers and variables renamed."""

    def __init__(self, buffers: dict[Buffer, Buffer], variables: dict[Var, PrimExpr]):
        self.buffers = buffers
        self.variables = variables

    def visit_buffer(self, b: Buffer) -> Buffer:
        return self.buffers.get(b, b)

    def rebuild_binary(self, e: BinaryOp, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        # an int64 workload's views index in int64: constants follow (TVM normalizes
        # the implementation's index dtype to the block's)
        if a.dtype != b.dtype and a.dtype in ("int32", "int64") and b.dtype in ("int32",
                                                                                 "int64"):
            if isinstance(b, IntImm):
                b = IntImm(b.value, a.dtype)
            elif isinstance(a, IntImm):
                a = IntImm(a.value, b.dtype)
        return super().rebuild_binary(e, a, b)

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, Var):
            return self.variables.get(e, e)
        return super().visit_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, For) and s.loop_var in self.variables:
            new = super().visit_stmt(s)
            return replace(new, loop_var=self.variables[s.loop_var])
        if isinstance(s, LetStmt) and s.var in self.variables:
            new = super().visit_stmt(s)
            return replace(new, var=self.variables[s.var])
        if isinstance(s, Block) and any(iv.var in self.variables for iv in s.iter_vars):
            new = super().visit_stmt(s)
            ivs = tuple(IterVar(self.variables.get(iv.var, iv.var), iv.extent, iv.kind)
                        for iv in s.iter_vars)
            return replace(new, iter_vars=ivs, reads=None, writes=None)
        return super().visit_stmt(s)


def _bound_impl(func: PrimFunc, w: Block, m: _Matcher, intrin: TensorIntrin) -> Block:
    """``w`` with the implementation in place of its body."""
    from ...ir.analysis import collect_buffers

    impl = intrin.impl
    taken = {b.name for b in collect_buffers(func)}
    taken |= {m.buffer.name for blk in iter_blocks(func.body) for m in blk.match_buffers}
    buffers: dict[Buffer, Buffer] = {}
    variables: dict[Var, PrimExpr] = {}
    # fresh copies of what the implementation defines, so that each tensorized block
    # has its own
    for s in iter_stmts(impl.body.body):
        if isinstance(s, For):
            variables[s.loop_var] = Var(s.loop_var.name, s.loop_var.dtype)
        elif isinstance(s, LetStmt):
            variables[s.var] = Var(s.var.name, s.var.dtype)
        elif isinstance(s, Block):
            for iv in s.iter_vars:
                variables[iv.var] = Var(iv.var.name, iv.var.dtype)
    regions = impl_regions(impl)
    fields = [x for st in iter_stmts(impl.body.body) for e in stmt_exprs(st)
              for x in iter_exprs(e) if isinstance(x, BufferField)]
    data_only = {f.buffer for f in fields if f.field == "data"} - \
        {f.buffer for f in fields if f.field == "elem_offset"}
    match_buffers = []
    for d_param, i_param in zip(intrin.desc.params, impl.params, strict=True):
        cur = m.rbuf[d_param]
        strides = []
        for x in i_param.strides:
            if isinstance(x, Var):
                variables[x] = Var(x.name, x.dtype)
                strides.append(variables[x])
            else:
                strides.append(x)
        name = fresh_name(i_param.name, taken)
        taken.add(name)
        view = i_param.with_(name=name, strides=tuple(strides), index_dtype=cur.index_dtype)
        buffers[i_param] = view
        base = m.base[cur]
        lead = cur.ndim - i_param.ndim
        if not all(_is_zero(simplify(b)) for b in base) and i_param in data_only:
            raise _Offset(i_param.name, cur.name)
        region = []
        for k, mn in enumerate(base):
            if k < lead:
                region.append((mn, IntImm(1, mn.dtype)))
                continue
            i_min, i_ext = regions[i_param].region[k - lead]
            start = simplify(mn + _Retype({}, mn.dtype).visit_expr(i_min))
            ext = _Retype({}, mn.dtype).visit_expr(i_ext)
            region.append((start, ext))
        match_buffers.append(MatchBufferRegion(view, BufferRegion(cur, tuple(region)), 1))
    body = _Rebind(buffers, variables).visit_stmt(impl.body.body)
    annotations = list(w.annotations)
    keys = {k for k, _ in annotations}
    annotations += [(k, v) for k, v in impl.body.annotations if k not in keys]
    return replace(w, body=body, match_buffers=tuple(match_buffers),
                   annotations=tuple(annotations), reads=None, writes=None)


# ---------------------------------------------------------------------------
# tensorize


def tensorize(func: PrimFunc, target: Var | str, intrin: TensorIntrin,
              preserve_unit_iters: bool = True) -> tuple[PrimFunc, str]:
    """Tensorize the block ``target`` (a name) or the subtree under the loop ``target``
    (blockized first) with ``intrin``; returns ``(new_func, block_name)``.

    Raises :class:`TensorizeMismatchError` when the block does not match the
    description (the blockize step's errors when the loop cannot be blockized).
    """
    p = "tensorize"
    work = func
    if isinstance(target, Var):
        from .blockize import blockize

        try:
            work, name = blockize(func, target, preserve_unit_iters)
        except ScheduleError as e:
            raise type(e)(p, e.message, func, e.loops, e.blocks) from None
    else:
        name = target
    path = find_block_path(work, p, name)
    w: Block = path[-1]  # type: ignore[assignment]
    m = _Matcher(w, intrin.desc)
    try:
        m.run()
    except _Mismatch as e:
        loops = [target] if isinstance(target, Var) else []
        raise TensorizeMismatchError(
            e.part, p, f'block "{w.name}" does not match "{intrin.name}": {e.message}', func,
            loops=loops, blocks=[] if isinstance(target, Var) else [name],
        ) from None
    try:
        new = _bound_impl(work, w, m, intrin)
    except _Offset as e:
        raise ViewOffsetError(
            p, f'the implementation of "{intrin.name}" hands {e.param}.data to its code '
               f"without {e.param}.elem_offset, so it assumes {e.param} starts at its "
               f'array\'s first element, but block "{w.name}" binds it to a tile of '
               f"{e.buffer} that does not; declare {e.param} with offset_factor=1 (then "
               f"{e.param}.access_ptr adds the offset)", func,
            loops=[target] if isinstance(target, Var) else [],
            blocks=[] if isinstance(target, Var) else [name],
        ) from None
    return replace_path(work, path, new), new.name


# ---------------------------------------------------------------------------
# tile_with_tensor_intrin's loop mapping


def tensorize_loop_mapping(func: PrimFunc, block_name: str,
                           desc: PrimFunc) -> tuple[list[tuple[Var, int, int]], bool] | None:
    """For ``tile_with_tensor_intrin``: which loops of ``block_name`` the description's
    loops correspond to (TVM's ``GetTensorizeLoopMapping``), as ``[(block loop var,
    description loop extent, description loop index)]`` in the order found, and whether
    a loop's extent is not a multiple of the description's (padding needed). None when
    there is no mapping: the iter vars of matching kinds, taken from the innermost,
    must each be bound to a loop plus terms of no other loop, with constant extents.
    """
    path = find_block_path(func, "tile_with_tensor_intrin", block_name)
    block: Block = path[-1]  # type: ignore[assignment]
    loops: list[For] = []
    child: Stmt = block
    for s in reversed(path[:-1]):
        if not isinstance(s, For) or s.body is not child:
            break
        if s.min:
            return None
        loops.insert(0, s)
        child = s
    parts = desc_parts(desc)
    if parts is None:
        return None
    d_loops, d_block = parts
    d_vars = {lp.loop_var for lp in d_loops}
    b_vars = {lp.loop_var for lp in loops}
    n_desc = len(d_block.iter_values)
    if len(block.iter_values) < n_desc or len(d_loops) != n_desc:
        return None
    kinds_b = [iv.kind for iv in block.iter_vars]
    kinds_d = [iv.kind for iv in d_block.iter_vars]
    mapped: dict[Var, int] = {}
    out: list[tuple[Var, int, int]] = []
    pad = False
    nxt = len(block.iter_values) - 1
    for i_desc in range(n_desc - 1, -1, -1):
        bind = d_block.iter_values[i_desc]
        d_loop, d_index, kind = None, -1, kinds_d[i_desc]
        for i, lp in enumerate(d_loops):
            residual = simplify(bind - lp.loop_var)
            if not (expr_vars(residual) & d_vars):
                d_loop, d_index, kind = lp, i, kinds_d[i]
                break
        if d_loop is None or not isinstance(d_loop.extent, int):
            return None
        b_bind = None
        while nxt >= 0:
            cur = nxt
            nxt -= 1
            if kinds_b[cur] == kind:
                b_bind = block.iter_values[cur]
                break
        if b_bind is None:
            return None
        for lp in loops:
            if lp.loop_var in mapped:
                continue
            residual = simplify(b_bind - lp.loop_var)
            if expr_vars(residual) & b_vars:
                continue
            if not isinstance(lp.extent, int):
                return None
            if lp.extent % d_loop.extent:
                pad = True
            mapped[lp.loop_var] = d_index
            out.append((lp.loop_var, d_loop.extent, d_index))
            break
    return out, pad
