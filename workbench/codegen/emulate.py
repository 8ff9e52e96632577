"""The GPU emulator: a planned GPU function as an ordinary CPU function with the same
meaning (the CUDA-on-CPU technique of MCUDA, CuPBoP and POCL's work-group loops).

:func:`emulate_device_function` turns a :class:`~workbench.codegen.gpu_plan.DeviceFunction`
into a :class:`~workbench.ir.stmt.PrimFunc` that the C backend builds:

* the root block allocates the function's global intermediates, then each kernel runs in
  launch order;
* a kernel is one ``parallel`` loop over its thread blocks (the linearised grid); the
  ``blockIdx`` variables are computed from the block number, and the kernel's ``shared``
  buffers are allocated once per thread block;
* inside a thread block, the loops bound to ``threadIdx`` are removed (each reads the
  thread index of its axis) and the per-thread program is cut at every barrier: each
  maximal barrier-free region runs inside its own thread loops ``for tz, ty, tx`` (so
  every thread finishes the region before any thread starts the next one, which is what
  ``__syncthreads()`` guarantees). What contains a barrier must be uniform across the
  threads of a block (loops, ``if`` conditions and block predicates that do not depend on
  the thread index); a barrier under thread-dependent control flow is refused with
  :class:`DivergentBarrierError`;
* a ``local`` (per-thread) buffer used in a single region outside every loop that holds
  a barrier is allocated inside that region's thread loops; one that lives across
  regions is replicated: a buffer with a leading dimension of threads per block, indexed
  by the linear thread id;
* ``vthread`` loops run as serial loops.

With ``instrument="races"`` or ``"profile"`` the function also calls the instrumentation
runtime (:mod:`workbench.codegen.gpu_instrument`) before every access of a ``shared`` or
``global`` buffer, and at kernel, thread-block and barrier boundaries; the thread blocks
then run one after another. The tables that explain the ids it passes are attached to the
function (:func:`instrument_tables`).

>>> import workbench as wb
>>> from workbench.codegen.gpu_plan import DeviceFunction, GpuKernel, LaunchConfig
>>> A = wb.placeholder((64,), "float32", name="A")
>>> B = wb.compute((64,), lambda i: A[i] * 2.0, name="B")
>>> sch = wb.Schedule(wb.create_prim_func([A, B], name="double"))
>>> i0, i1 = sch.split(sch.get_loops("B")[0], [None, 32])
>>> sch.bind(i0, "blockIdx.x"); sch.bind(i1, "threadIdx.x")
>>> func = wb.lower(sch.mod)["double"]
>>> kernel = GpuKernel("double_kernel", "double", func.body.body, func.params, (), (), (),
...                    LaunchConfig((2, 1, 1), (32, 1, 1)))
>>> emulated = emulate_device_function(DeviceFunction("double", func, (), (kernel,)))
>>> print(emulated.script().split("# with T.block(\\"root\\"):")[1].strip().splitlines()[0])
for blk in T.parallel(2):
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from ..ir.buffer import Buffer, BufferRegion, MatchBufferRegion
from ..ir.expr import (
    BufferField,
    BufferLoad,
    CallExtern,
    Cast,
    IfThenElseExpr,
    IntImm,
    Let,
    Not,
    PrimExpr,
    Select,
    Var,
    logical_and,
)
from ..ir.functor import (
    Mutator,
    expr_children,
    iter_exprs,
    iter_stmts,
    stmt_exprs,
    substitute,
)
from ..ir.printer import expr_to_str
from ..ir.simplify import simplify
from ..ir.stmt import (
    Block,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterVar,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)
from .cstyle import CodegenError, buffer_strides
from .gpu import GpuError
from .gpu_instrument import BufferInfo, InstrumentTables, KernelInfo, StmtInfo, TableBuilder
from .gpu_plan import BLOCK_TAGS, THREAD_TAGS_GPU, DeviceFunction, GpuKernel, is_barrier

__all__ = [
    "DivergentBarrierError",
    "INSTRUMENT_ATTR",
    "INSTRUMENT_MODES",
    "THREAD_LOOP_KEY",
    "emulate_device_function",
    "instrument_tables",
    "thread_regions",
]

INSTRUMENT_MODES = ("races", "profile")
#: The function attribute holding the instrumentation tables (see
#: :func:`instrument_tables`).
INSTRUMENT_ATTR = "wb_gpu_instrument"
#: Annotation of the loops that run a block's threads (value: the thread axis).
THREAD_LOOP_KEY = "emulated_thread"

SPACE_GLOBAL, SPACE_SHARED = 0, 1
_SHARED_SCOPES = ("shared", "shared.dyn")


class DivergentBarrierError(GpuError):
    """A barrier (``__syncthreads()``) under control flow that depends on the thread
    index: some threads of a block would reach it and others not."""


# -- tables ------------------------------------------------------------------------------


def _tables_attr(t: InstrumentTables) -> tuple:
    """The tables as a function attribute value (nested tuples of str, int and None)."""
    return (
        ("kernels", tuple((k.name, k.shared_bytes, k.local_words) for k in t.kernels)),
        ("buffers", tuple((b.name, tuple(b.shape), b.strides, b.scope, b.dtype)
                          for b in t.buffers)),
        ("stmts", tuple((x.text, x.block) for x in t.stmts)),
    )


def instrument_tables(func: PrimFunc) -> InstrumentTables | None:
    """What the ids an instrumented emulation passes to the runtime name (kernels,
    buffers, statements), read from its attribute :data:`INSTRUMENT_ATTR`; None for a
    plain emulation.

    >>> instrument_tables(PrimFunc("f", (), Block("root", (), (), Evaluate()))) is None
    True
    """
    value = dict(func.attrs).get(INSTRUMENT_ATTR)
    if value is None:
        return None
    d = dict(value)
    return InstrumentTables(
        tuple(KernelInfo(*k) for k in d["kernels"]),
        tuple(BufferInfo(n, tuple(sh), None if st is None else tuple(st), sc, dt)
              for n, sh, st, sc, dt in d["buffers"]),
        tuple(StmtInfo(text, block) for text, block in d["stmts"]),
    )


# -- small helpers -----------------------------------------------------------------------


def _seq(stmts: list[Stmt]) -> Stmt:
    flat: list[Stmt] = []
    for s in stmts:
        flat.extend(s.stmts if isinstance(s, SeqStmt) else (s,))
    if not flat:
        return Evaluate()
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


def _flatten(s: Stmt) -> list[Stmt]:
    if isinstance(s, SeqStmt):
        return [x for c in s.stmts for x in _flatten(c)]
    return [s]


def _has_barrier(s: Stmt) -> bool:
    return any(is_barrier(x) for x in iter_stmts(s))


def _call(name: str, *args: PrimExpr) -> Stmt:
    return Evaluate(CallExtern("int32", name, tuple(args)))


def _i32(x: int | PrimExpr) -> PrimExpr:
    if isinstance(x, int):
        return IntImm(x, "int32")
    return x if x.dtype == "int32" else Cast("int32", x)


def _i64(x: int | PrimExpr) -> PrimExpr:
    if isinstance(x, int):
        return IntImm(x, "int64")
    return x if x.dtype == "int64" else Cast("int64", x)


def _per_thread(buf: Buffer) -> bool:
    """Buffers every thread has its own copy of (``local``, fragments, ...)."""
    return buf.scope not in _SHARED_SCOPES and buf.scope != "global"


def _const_true(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and bool(e.value)


# -- instrumentation ---------------------------------------------------------------------


class _Instrumenter(Mutator):
    """Inserts ``wb_gpu_access`` calls before each statement accessing a shared or
    global buffer (loads of its expressions first, then the store). Runs on the
    kernel's original IR, so the statement texts are the user's."""

    def __init__(self, tables: TableBuilder, kernel: GpuKernel, tid: PrimExpr,
                 params: set[Buffer]):
        self.t = tables
        self.params = params
        self.kernel = kernel
        self.tid = tid
        self.blocks = [kernel.name]
        self.views: dict[Buffer, MatchBufferRegion] = {}
        for s in iter_stmts(kernel.body):
            if isinstance(s, Block):
                for m in s.match_buffers:
                    self.views[m.buffer] = m

    def _resolve(self, buf: Buffer, idx: tuple[PrimExpr, ...]) -> tuple[Buffer, tuple]:
        while buf in self.views:
            m = self.views[buf]
            buf, idx = m.source.buffer, m.source_indices(idx)
        return buf, idx

    def _access(self, buf: Buffer, idx, is_write: bool, sid: int) -> Stmt | None:
        buf, idx = self._resolve(buf, tuple(idx))
        if _per_thread(buf):
            return None
        strides, _ = buffer_strides(buf, use_align=buf not in self.params)
        flat: PrimExpr = IntImm(0, "int64")
        for i, st in zip(idx, strides, strict=True):
            flat = flat + _i64(i) * _i64(st)
        flat = simplify(flat)
        bid = self.t.buffer(buf)
        size = np.dtype(buf.dtype).itemsize
        addr = simplify(flat * IntImm(size, "int64"))
        space = SPACE_SHARED if buf.scope in _SHARED_SCOPES else SPACE_GLOBAL
        return _call("wb_gpu_access", _i32(bid), _i32(space), _i32(int(is_write)), flat,
                     addr, _i32(size), self.tid, _i32(sid))

    def _stmt_id(self, s: Stmt) -> int:
        text = s.script().strip().splitlines()[0].rstrip(":")
        return self.t.stmt(text, self.blocks[-1])

    def _load_calls(self, exprs: Iterable[PrimExpr], sid: int) -> list[Stmt]:
        out: list[Stmt] = []
        for e in exprs:
            for load, guard in _guarded_loads(e):
                call = self._access(load.buffer, load.indices, False, sid)
                if call is not None:
                    out.append(call if guard is None else IfThenElse(guard, call))
        return out

    def _instrumented(self, s: Stmt) -> bool:
        for e in stmt_exprs(s):
            for x in iter_exprs(e):
                if isinstance(x, BufferLoad) and not _per_thread(self._resolve(
                        x.buffer, x.indices)[0]):
                    return True
        return isinstance(s, BufferStore) and not _per_thread(
            self._resolve(s.buffer, s.indices)[0])

    def visit_stmt(self, s: Stmt) -> Stmt:
        if is_barrier(s):
            return s
        if isinstance(s, BufferStore):
            if not self._instrumented(s):
                return s
            sid = self._stmt_id(s)
            calls = self._load_calls([s.value, *s.indices], sid)
            store = self._access(s.buffer, s.indices, True, sid)
            return _seq(calls + ([store] if store is not None else []) + [s])
        calls: list[Stmt] = []
        if not isinstance(s, (SeqStmt, Block)) and self._instrumented(s):
            calls = self._load_calls(list(stmt_exprs(s)), self._stmt_id(s))
        elif isinstance(s, Block) and self._instrumented(s):
            calls = self._load_calls([*s.iter_values, s.predicate], self._stmt_id(s))
        if isinstance(s, Block):
            self.blocks.append(s.name)
            new = super().visit_stmt(s)
            self.blocks.pop()
        else:
            new = super().visit_stmt(s)
        return _seq(calls + [new]) if calls else new


def _guarded_loads(e: PrimExpr) -> list[tuple[BufferLoad, PrimExpr | None]]:
    """Loads of ``e`` with the condition under which each is evaluated (None: always):
    the branches of ``T.if_then_else`` and ``Select`` (printed as C's ``?:``, which
    evaluates one side). Let-bound variables are replaced by their values."""
    out: list[tuple[BufferLoad, PrimExpr | None]] = []

    def both(a: PrimExpr | None, b: PrimExpr) -> PrimExpr:
        return b if a is None else logical_and(a, b)

    def walk(x: PrimExpr, guard: PrimExpr | None, lets: dict) -> None:
        if isinstance(x, (IfThenElseExpr, Select)):
            walk(x.condition, guard, lets)
            cond = substitute(x.condition, lets)
            walk(x.true_value, both(guard, cond), lets)
            walk(x.false_value, both(guard, Not(cond)), lets)
            return
        if isinstance(x, Let):
            walk(x.value, guard, lets)
            walk(x.body, guard, {**lets, x.var: substitute(x.value, lets)})
            return
        for c in expr_children(x):
            walk(c, guard, lets)
        if isinstance(x, BufferLoad):
            out.append((substitute(x, lets) if lets else x, guard))

    walk(e, None, {})
    return out


# -- the kernel transformation -----------------------------------------------------------


class _StripBound(Mutator):
    """Loops bound to ``threadIdx``/``blockIdx`` become their bodies (guarded when
    narrower than the launch); vthread loops become serial loops. Records the
    substitution of the removed loop variables."""

    def __init__(self, kernel: GpuKernel, axes: dict[str, PrimExpr],
                 extents: dict[str, int | PrimExpr]):
        self.kernel = kernel
        self.axes = axes
        self.extents = extents
        self.mapping: dict[Var, PrimExpr] = {}

    def visit_stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, For) and s.kind == "thread_binding":
            body = self.visit_stmt(s.body)
            tag = s.thread_tag or ""
            if tag.startswith("vthread"):
                return For(s.loop_var, s.extent, "serial", body, None, s.annotations, s.min)
            if tag not in self.axes:
                raise CodegenError(f"kernel `{self.kernel.name}`: loop `{s.loop_var.name}` is "
                                   f"bound to the unknown thread axis {tag!r}")
            if s.min:
                raise CodegenError(f"kernel `{self.kernel.name}`: loop `{s.loop_var.name}` "
                                   f"bound to {tag} starts at {s.min}")
            value = self.axes[tag]
            self.mapping[s.loop_var] = value
            launch = self.extents[tag]
            if isinstance(s.extent, int) and isinstance(launch, int) and s.extent > launch:
                raise CodegenError(
                    f"kernel `{self.kernel.name}`: loop `{s.loop_var.name}` bound to {tag} "
                    f"has extent {s.extent}, more than the launch's {launch}")
            same = isinstance(launch, int) and s.extent == launch or (
                not isinstance(launch, int)
                and isinstance(d := simplify(launch - s.extent), IntImm) and d.value == 0)
            return body if same else IfThenElse(value < s.extent, body)
        return super().visit_stmt(s)


class _Hoist(Mutator):
    """Takes the allocations the emulator places itself out of the kernel's blocks:
    shared (and global) buffers, and per-thread buffers of blocks holding a barrier."""

    def __init__(self):
        self.block_level: list[Buffer] = []
        self.thread_level: list[Buffer] = []

    def visit_block(self, b: Block) -> Block:
        new = super().visit_block(b)
        if not new.alloc_buffers:
            return new
        barrier = _has_barrier(new)
        keep = []
        for buf in new.alloc_buffers:
            if not _per_thread(buf):
                self.block_level.append(buf)
            elif barrier:
                self.thread_level.append(buf)
            else:
                keep.append(buf)
        if len(keep) == len(new.alloc_buffers):
            return new
        return replace(new, alloc_buffers=tuple(keep))


@dataclass
class _Region:
    body: Stmt
    in_loop: bool  # inside a loop that holds a barrier (runs more than once per block)


_REGION_MARK = "__wb_emulator_region"


class _Splitter:
    """Cuts a thread block's program (thread loops removed) at its barriers."""

    def __init__(self, kernel: GpuKernel, thread_vars: dict[str, Var],
                 barrier_stmts: list[Stmt]):
        self.kernel = kernel
        self.thread_vars = set(thread_vars.values())
        self.display = {v: Var(tag) for tag, v in thread_vars.items()}
        self.barrier_stmts = barrier_stmts
        self.regions: list[_Region] = []

    def dependent(self, e: PrimExpr) -> bool:
        """Whether ``e`` may differ between the threads of a block."""
        for x in iter_exprs(e):
            if isinstance(x, Var) and x in self.thread_vars:
                return True
            if isinstance(x, (BufferLoad, BufferField)) and _per_thread(x.buffer):
                return True
        return False

    def diverge(self, where: str, e: PrimExpr) -> DivergentBarrierError:
        text = expr_to_str(substitute(e, self.display))
        return DivergentBarrierError(
            f"kernel `{self.kernel.name}`: barrier inside {where.replace('{}', text, 1)}: "
            "threads would diverge at __syncthreads()")

    def region(self, s: Stmt, in_loop: bool) -> Stmt:
        self.regions.append(_Region(s, in_loop))
        return _call(_REGION_MARK, IntImm(len(self.regions) - 1))

    def split(self, s: Stmt, in_loop: bool) -> list[Stmt]:
        if is_barrier(s):
            return list(self.barrier_stmts)
        if not _has_barrier(s):
            return [self.region(s, in_loop)]
        if isinstance(s, SeqStmt):
            out: list[Stmt] = []
            pending: list[Stmt] = []
            for c in _flatten(s):
                if _has_barrier(c):
                    if pending:
                        out.append(self.region(_seq(pending), in_loop))
                        pending = []
                    out.extend(self.split(c, in_loop))
                else:
                    pending.append(c)
            if pending:
                out.append(self.region(_seq(pending), in_loop))
            return out
        if isinstance(s, For):
            if isinstance(s.extent, PrimExpr) and self.dependent(s.extent):
                raise self.diverge(f"loop `{s.loop_var.name}` whose extent `{{}}` depends on "
                                   "the thread index", s.extent)
            body = _seq(self.split(s.body, True))
            return [For(s.loop_var, s.extent, "serial", body, None, (), s.min)]
        if isinstance(s, IfThenElse):
            if self.dependent(s.condition):
                raise self.diverge("`if ({})`", s.condition)
            then = _seq(self.split(s.then_case, in_loop))
            other = None if s.else_case is None else _seq(self.split(s.else_case, in_loop))
            return [IfThenElse(s.condition, then, other)]
        if isinstance(s, LetStmt):
            if not self.dependent(s.value):
                return [LetStmt(s.var, s.value, _seq(self.split(s.body, in_loop)))]
            if any(isinstance(x, BufferLoad) for x in iter_exprs(s.value)):
                raise CodegenError(
                    f"kernel `{self.kernel.name}`: the thread-dependent value of "
                    f"`{s.var.name}` loads memory and its scope holds a barrier; the "
                    "emulator cannot split it")
            return self.split(substitute(s.body, {s.var: s.value}), in_loop)
        if isinstance(s, Block):
            return self.split(self.lower_block(s), in_loop)
        raise CodegenError(f"kernel `{self.kernel.name}`: a barrier inside "
                           f"{type(s).__name__} cannot be emulated")

    def lower_block(self, b: Block) -> Stmt:
        """A block holding a barrier as plain statements (its iter vars replaced by
        their bindings, its init guarded, its predicate an ``if``)."""
        if b.match_buffers:
            raise CodegenError(f"kernel `{self.kernel.name}`: block `{b.name}` holds a "
                               "barrier and match_buffer views; the emulator cannot split it")
        mapping = {iv.var: v for iv, v in zip(b.iter_vars, b.iter_values, strict=True)}
        parts: list[Stmt] = []
        if b.init is not None:
            conds = [mapping[iv.var].equal(0) for iv in b.iter_vars if iv.kind == "R"]
            cond = None
            for c in conds:
                cond = c if cond is None else logical_and(cond, c)
            init = substitute(b.init, mapping)
            if cond is not None:
                cond = simplify(cond)
            parts.append(init if cond is None or _const_true(cond) else IfThenElse(cond, init))
        parts.append(substitute(b.body, mapping))
        body = _seq(parts)
        pred = simplify(substitute(b.predicate, mapping))
        if _const_true(pred):
            return body
        if self.dependent(pred):
            raise self.diverge(f"block `{b.name}` whose predicate `{{}}` depends on the "
                               "thread index", pred)
        return IfThenElse(pred, body)


class _Replicate(Mutator):
    """Accesses of per-thread buffers replicated per thread: ``L[i]`` -> ``L'[tid, i]``."""

    def __init__(self, new: dict[Buffer, Buffer], tid: PrimExpr):
        self.new = new
        self.tid = tid

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, BufferLoad) and e.buffer in self.new:
            idx = tuple(self.visit_expr(i) for i in e.indices)
            return BufferLoad(self.new[e.buffer], (self.tid, *idx))
        if isinstance(e, BufferField) and e.buffer in self.new:
            raise CodegenError(f"the emulator cannot replicate buffer `{e.buffer.name}` "
                               f"per thread: its {e.field} is used")
        return super().visit_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, BufferStore) and s.buffer in self.new:
            idx = tuple(self.visit_expr(i) for i in s.indices)
            return BufferStore(self.new[s.buffer], self.visit_expr(s.value), (self.tid, *idx))
        return super().visit_stmt(s)

    def visit_match_buffer(self, m: MatchBufferRegion) -> MatchBufferRegion:
        m = super().visit_match_buffer(m)
        src = m.source
        if src.buffer not in self.new:
            return m
        region = ((self.tid, IntImm(1)), *src.region)
        return MatchBufferRegion(m.buffer, BufferRegion(self.new[src.buffer], region),
                                 m.offset_factor)


def _uses(s: Stmt, bufs: set[Buffer]) -> set[Buffer]:
    found: set[Buffer] = set()
    for x in iter_stmts(s):
        if isinstance(x, BufferStore) and x.buffer in bufs:
            found.add(x.buffer)
        if isinstance(x, Block):
            found.update(m.source.buffer for m in x.match_buffers if m.source.buffer in bufs)
        for e in stmt_exprs(x):
            for y in iter_exprs(e):
                if isinstance(y, (BufferLoad, BufferField)) and y.buffer in bufs:
                    found.add(y.buffer)
    return found


def _replicated(buf: Buffer, threads: int) -> Buffer:
    align = tuple((axis + 1, factor, offset) for axis, factor, offset in buf.align)
    return buf.with_(shape=(threads, *buf.shape), align=align)


class _PlaceRegions(Mutator):
    def __init__(self, regions: list[Stmt]):
        self.regions = regions

    def visit_stmt(self, s: Stmt) -> Stmt:
        if (isinstance(s, Evaluate) and isinstance(s.value, CallExtern)
                and s.value.name == _REGION_MARK):
            return self.regions[s.value.args[0].value]  # type: ignore[attr-defined]
        return super().visit_stmt(s)


def _place_regions(kernel: GpuKernel, regions: list[_Region], per_thread: list[Buffer],
                   thread_vars: dict[str, Var], tid: PrimExpr,
                   ) -> tuple[list[Stmt], dict[Buffer, Buffer]]:
    """Each region inside its thread loops (``tz``, ``ty``, ``tx``; x innermost), and
    the per-thread buffers placed: one used in a single region that runs once per block
    is allocated inside that region; one used in several regions, or in a region of a
    loop holding a barrier (its value may carry to the next iteration), is replicated.
    Returns the placed regions and the replicas (original -> replicated buffer)."""
    block_dims = dict(zip(THREAD_TAGS_GPU, kernel.launch.block, strict=True))
    users: dict[Buffer, list[int]] = {b: [] for b in per_thread}
    for k, r in enumerate(regions):
        for buf in _uses(r.body, set(per_thread)):
            users[buf].append(k)
    inside: dict[int, list[Buffer]] = {}
    replicas: dict[Buffer, Buffer] = {}
    for buf in per_thread:
        where = users[buf]
        if len(where) == 1 and not regions[where[0]].in_loop:
            inside.setdefault(where[0], []).append(buf)
        elif where:
            replicas[buf] = _replicated(buf, kernel.launch.threads_per_block)
    replicate = _Replicate(replicas, tid)
    placed = []
    for k, r in enumerate(regions):
        s = replicate.visit_stmt(r.body) if replicas else r.body
        if k in inside:
            s = Block(f"{kernel.name}_thread", (), (), s, alloc_buffers=tuple(inside[k]))
        for tag in THREAD_TAGS_GPU:
            if tag in thread_vars:
                s = For(thread_vars[tag], block_dims[tag], "serial", s,
                        annotations=((THREAD_LOOP_KEY, tag),))
        placed.append(s)
    return placed, replicas


def _linear_grid(blk: Var, grid_dims: dict[str, int | PrimExpr], block_vars: dict[str, Var],
                 ) -> tuple[int | PrimExpr, list[IterVar], list[PrimExpr]]:
    """The number of thread blocks, and the blockIdx variables as iter vars bound to the
    linear block number ``blk`` (x fastest)."""
    iter_vars, values = [], []
    below: PrimExpr = blk
    n_blocks: int | PrimExpr = 1
    for tag in BLOCK_TAGS:
        if tag not in block_vars:
            continue
        g = grid_dims[tag]
        g_expr = _i32(g)
        n_blocks = n_blocks * g if isinstance(n_blocks, int) and isinstance(g, int) else (
            simplify(_i32(n_blocks) * g_expr))
        rest = [t for t in BLOCK_TAGS[BLOCK_TAGS.index(tag) + 1:] if t in block_vars]
        values.append(simplify(below % g_expr) if rest else below)
        below = simplify(below // g_expr)
        iter_vars.append(IterVar(block_vars[tag], g))
    return n_blocks, iter_vars, values


def _emulate_kernel(kernel: GpuKernel, params: set[Buffer],
                    tables: TableBuilder | None) -> Stmt:
    """One kernel launch: the loop over its thread blocks (instrumented: between the
    launch's begin and end calls)."""
    block_dims = dict(zip(THREAD_TAGS_GPU, kernel.launch.block, strict=True))
    grid_dims = dict(zip(BLOCK_TAGS, kernel.launch.grid, strict=True))
    thread_vars = {tag: Var("t" + tag[-1]) for tag in THREAD_TAGS_GPU if block_dims[tag] != 1}
    block_vars = {tag: Var("b" + tag[-1]) for tag in BLOCK_TAGS
                  if not (isinstance(grid_dims[tag], int) and grid_dims[tag] == 1)}
    # the linear thread id, x fastest (as CUDA numbers the threads of a warp)
    tid: PrimExpr = IntImm(0)
    stride = 1
    for tag in THREAD_TAGS_GPU:
        if tag in thread_vars:
            tid = tid + thread_vars[tag] * stride
        stride *= block_dims[tag]
    tid = simplify(tid)

    body = kernel.body
    if tables is not None:
        kernel_id = tables.kernel(kernel)
        body = _Instrumenter(tables, kernel, tid, params).visit_stmt(body)
    axes: dict[str, PrimExpr] = {tag: thread_vars.get(tag, IntImm(0)) for tag in THREAD_TAGS_GPU}
    axes.update({tag: block_vars.get(tag, IntImm(0)) for tag in BLOCK_TAGS})
    extents: dict[str, int | PrimExpr] = {**block_dims, **grid_dims}
    strip = _StripBound(kernel, axes, extents)
    body = substitute(strip.visit_stmt(body), strip.mapping)
    hoist = _Hoist()
    body = hoist.visit_stmt(body)
    shared = list(dict.fromkeys([*kernel.shared, *hoist.block_level]))
    per_thread = list(dict.fromkeys([*kernel.local, *hoist.thread_level]))

    barrier_stmts = [] if tables is None else [_call("wb_gpu_region_end"),
                                               _call("wb_gpu_region_begin")]
    splitter = _Splitter(kernel, thread_vars, barrier_stmts)
    program = _seq(splitter.split(body, False))

    placed, replicas = _place_regions(kernel, splitter.regions, per_thread, thread_vars, tid)
    program = _PlaceRegions(placed).visit_stmt(program)
    blk = Var("blk")
    n_blocks, iter_vars, values = _linear_grid(blk, grid_dims, block_vars)
    if tables is not None:
        program = _seq([_call("wb_gpu_block_begin", blk), _call("wb_gpu_region_begin"),
                        program, _call("wb_gpu_region_end")])
    allocs = tuple(shared) + tuple(replicas.values())
    per_block = Block(f"{kernel.name}_block", tuple(iter_vars), tuple(values), program,
                      alloc_buffers=allocs)
    kind = "serial" if tables is not None else "parallel"
    loop = For(blk, n_blocks, kind, per_block)
    if tables is None:
        return loop
    begin = _call("wb_gpu_kernel_begin", _i32(kernel_id),
                  *(_i32(g) for g in kernel.launch.grid), *(_i32(b) for b in kernel.launch.block))
    return _seq([begin, loop, _call("wb_gpu_kernel_end")])


def emulate_device_function(df: DeviceFunction, *, instrument: str | None = None,
                            tables: TableBuilder | None = None) -> PrimFunc:
    """A CPU function computing what the kernels of ``df`` compute on a GPU.

    The result takes the parameters of ``df.func``; the C backend builds it
    (``wb.build(emulated, target="c")``). Thread blocks run in parallel (OpenMP), each
    block's threads as loops split at every barrier (see the module docstring).

    ``instrument``: ``None`` (plain), ``"races"`` or ``"profile"`` (the same code: the
    runtime's mode, :func:`~workbench.codegen.gpu_instrument.set_mode`, picks what it
    records). The function then calls the runtime of
    :mod:`workbench.codegen.gpu_instrument` before each access of a shared or global
    buffer, ``wb_gpu_access(buffer_id, space, is_write, flat_index, byte_address,
    nbytes, thread_linear, stmt_id)`` (the loads of a statement first, then its store; a
    load in a branch of ``T.if_then_else`` or ``Select`` only where the branch is
    taken), at each launch (``wb_gpu_kernel_begin(kernel_id, grid xyz, block xyz)``,
    ``wb_gpu_kernel_end()``), at each thread block (``wb_gpu_block_begin(block_linear)``)
    and at the bounds of each barrier interval: ``wb_gpu_region_begin()`` when the block
    starts and after each barrier, ``wb_gpu_region_end()`` at each barrier and when the
    block ends. The thread blocks then run one after another. The ids are those of
    ``tables`` (a :class:`~workbench.codegen.gpu_instrument.TableBuilder`: pass one to
    share ids between the functions of a module; by default a new one), and the tables
    are attached to the result (:func:`instrument_tables`).

    Raises :class:`DivergentBarrierError` for a barrier under thread-dependent control
    flow, and :class:`~workbench.codegen.CodegenError` for IR it cannot emulate.

    >>> import workbench as wb
    >>> from workbench.codegen.gpu_plan import DeviceFunction, GpuKernel, LaunchConfig
    >>> A = wb.placeholder((64,), "float32", name="A")
    >>> B = wb.compute((64,), lambda i: A[i] + 1.0, name="B")
    >>> sch = wb.Schedule(wb.create_prim_func([A, B], name="inc"))
    >>> i0, i1 = sch.split(sch.get_loops("B")[0], [None, 16])
    >>> sch.bind(i0, "blockIdx.x"); sch.bind(i1, "threadIdx.x")
    >>> f = wb.lower(sch.mod)["inc"]
    >>> k = GpuKernel("inc_kernel", "inc", f.body.body, f.params, (), (), (),
    ...               LaunchConfig((4, 1, 1), (16, 1, 1)))
    >>> em = emulate_device_function(DeviceFunction("inc", f, (), (k,)), instrument="races")
    >>> [b.name for b in instrument_tables(em).buffers]
    ['A', 'B']
    """
    if instrument is not None and instrument not in INSTRUMENT_MODES:
        raise ValueError(f"emulate_device_function: instrument must be None or one of "
                         f"{list(INSTRUMENT_MODES)}, got {instrument!r}")
    func = df.func
    if instrument is None:
        tables = None
    elif tables is None:
        tables = TableBuilder()
    params = set(func.params)
    stmts = [_emulate_kernel(k, params, tables) for k in df.kernels]
    root = Block("root", (), (), _seq(stmts), alloc_buffers=tuple(df.intermediates))
    attrs = tuple((k, v) for k, v in func.attrs if k != INSTRUMENT_ATTR)
    if tables is not None:
        attrs += ((INSTRUMENT_ATTR, _tables_attr(tables.build())),)
    return PrimFunc(func.name, func.params, root, attrs)


def thread_regions(func: PrimFunc) -> list[For]:
    """The barrier-free regions of an emulated function: its outermost thread loops
    (loops annotated ``emulated_thread``), in program order.

    >>> thread_regions(PrimFunc("f", (), Block("root", (), (), Evaluate())))
    []
    """
    out: list[For] = []

    def walk(s: Stmt) -> None:
        if isinstance(s, For) and dict(s.annotations).get(THREAD_LOOP_KEY):
            out.append(s)
            return
        for c in _children(s):
            walk(c)

    walk(func.body)
    return out


def _children(s: Stmt) -> list[Stmt]:
    if isinstance(s, (For, LetStmt)):
        return [s.body]
    if isinstance(s, SeqStmt):
        return list(s.stmts)
    if isinstance(s, IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    if isinstance(s, Block):
        return ([s.init] if s.init is not None else []) + [s.body]
    return []

