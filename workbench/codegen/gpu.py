"""Plan a lowered module for a GPU: kernels, launch sizes, legality, barriers.

:func:`plan_device_module` turns every function of a lowered GPU schedule into a
:class:`~workbench.codegen.gpu_plan.DeviceFunction`:

* **Kernels.** Each statement of the root block is one kernel; its outermost loop must
  be bound to a thread axis (a GPU runs nothing outside a kernel). Loops bound to
  ``blockIdx`` must enclose every other loop of the kernel and agree on their extents;
  loops bound to one ``threadIdx`` axis launch the largest extent among them, and a
  narrower one is widened and guarded (``if (threadIdx.x < 16)``). A loop bound to an
  axis that an enclosing loop is already bound to (a cooperative fetch) reads the same
  thread index.
* **Memory.** Buffers in ``shared`` memory (one per thread block) and ``local`` memory
  (one per thread) are hoisted from wherever compaction put them to the kernel that uses
  them; a ``global`` intermediate is allocated by the host and passed to the kernels
  that use it.
* **Legality**, checked before any code is printed, with the kernel and loop named:
  threads per block and static shared memory within the target's limits, every root
  statement bound, ``blockIdx`` loops outermost and consistent, shared/local buffers used
  by one kernel only.
* **Barriers** (TVM's thread-sync planning for ``shared`` memory): a ``__syncthreads()``
  goes before a statement that reads a shared buffer some thread wrote since the last
  barrier, or writes one some thread read since then; in a loop the body is planned
  twice so that a hazard carried to the next iteration (the next tile's fetch
  overwriting what this iteration still reads) gets its barrier too. A barrier is
  placed as high as possible (before a whole loop nest rather than inside it) and never
  under control flow that depends on the thread index.

>>> import workbench as wb
>>> from workbench.gpu_examples import gpu_matmul_schedule
>>> plan = plan_device_module(wb.lower(gpu_matmul_schedule(128).mod))
>>> k = plan.kernels[0]
>>> k.name, k.launch.grid, k.launch.block, k.shared_bytes
('matmul_kernel', (2, 2, 1), (16, 16, 1), 10496)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ..ir.buffer import Buffer
from ..ir.expr import LT, BufferLoad, IntImm, PrimExpr, Var
from ..ir.functor import Mutator, iter_exprs, iter_stmts, stmt_exprs
from ..ir.stmt import (
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
from .cstyle import CodegenError
from .gpu_plan import (
    BLOCK_TAGS,
    THREAD_TAGS_GPU,
    DeviceFunction,
    DeviceModule,
    GpuKernel,
    LaunchConfig,
    barrier,
    is_barrier,
)

__all__ = [
    "BlockBindingError",
    "GpuError",
    "SharedMemoryLimitError",
    "SharedOutsideKernelError",
    "ThreadsPerBlockError",
    "UnboundLoopError",
    "insert_barriers",
    "lower_for_gpu",
    "plan_device_module",
]

SHARED_SCOPES = ("shared", "shared.dyn")
_KERNEL_SCOPES = SHARED_SCOPES + ("local", "warp", "local.fragment")


class GpuError(CodegenError):
    """A GPU schedule that cannot become a valid kernel (the message names the kernel
    and the loop or buffer)."""


class UnboundLoopError(GpuError):
    """A root statement whose outermost loop is not bound to a thread axis: on a GPU it
    would run on every thread over global data."""


class BlockBindingError(GpuError):
    """Loops bound to ``blockIdx`` that are not outermost, or that disagree on an
    axis's extent."""


class ThreadsPerBlockError(GpuError):
    """More threads per block than the target allows."""


class SharedMemoryLimitError(GpuError):
    """More static shared memory per block than the target allows."""


class SharedOutsideKernelError(GpuError):
    """A shared/local buffer used by two kernels, or a global buffer allocated inside a
    kernel."""


def _target(target):
    from ..target import Target

    tgt = Target.from_any(target if target is not None else "cuda")
    if tgt.kind != "cuda":
        raise ValueError(f"planning kernels needs a GPU target, got {tgt}")
    return tgt


# -- kernels ---------------------------------------------------------------------------
def _root_stmts(func: PrimFunc) -> list[Stmt]:
    body = func.body.body
    return list(body.stmts) if isinstance(body, SeqStmt) else [body]


def _bound_loops(s: Stmt) -> list[tuple[For, tuple[For, ...]]]:
    """Every thread-bound loop of ``s`` with the loops enclosing it (outermost first)."""
    out: list[tuple[For, tuple[For, ...]]] = []

    def walk(x: Stmt, outer: tuple[For, ...]) -> None:
        if isinstance(x, For):
            if x.kind == "thread_binding":
                out.append((x, outer))
            walk(x.body, outer + (x,))
        elif isinstance(x, SeqStmt):
            for c in x.stmts:
                walk(c, outer)
        elif isinstance(x, IfThenElse):
            walk(x.then_case, outer)
            if x.else_case is not None:
                walk(x.else_case, outer)
        elif isinstance(x, Block):
            if x.init is not None:
                walk(x.init, outer)
            walk(x.body, outer)
        elif isinstance(x, LetStmt):
            walk(x.body, outer)

    walk(s, ())
    return out


def _describe(s: Stmt) -> str:
    if isinstance(s, For):
        return f"loop {s.loop_var.name!r}"
    if isinstance(s, Block):
        return f"block {s.name!r}"
    return type(s).__name__


def _launch(func_name: str, kname: str, s: Stmt) -> tuple[LaunchConfig, dict[str, int]]:
    bound = _bound_loops(s)
    grid: dict[str, int | PrimExpr] = {}
    threads: dict[str, int] = {}
    for loop, outer in bound:
        tag = loop.thread_tag or ""
        if tag in BLOCK_TAGS:
            bad = [o for o in outer if not (o.thread_tag or "").startswith("blockIdx")]
            if bad:
                raise BlockBindingError(
                    f"{kname}: loop {loop.loop_var.name!r} is bound to {tag} inside loop "
                    f"{bad[0].loop_var.name!r} ({bad[0].thread_tag or bad[0].kind}); loops "
                    "bound to blockIdx must enclose every other loop of a kernel"
                )
            if tag in grid and not _same_extent(grid[tag], loop.extent):
                raise BlockBindingError(
                    f"{kname}: two loops bound to {tag} have extents {grid[tag]} and "
                    f"{loop.extent}; every loop bound to one blockIdx axis must have the "
                    "same extent"
                )
            grid[tag] = loop.extent
        elif tag in THREAD_TAGS_GPU:
            if not isinstance(loop.extent, int):
                raise ThreadsPerBlockError(
                    f"{kname}: loop {loop.loop_var.name!r} bound to {tag} has the symbolic "
                    f"extent {loop.extent}; threads per block must be a constant (split the "
                    "loop by a constant factor and bind the inner loop)"
                )
            threads[tag] = max(threads.get(tag, 0), loop.extent)
    cfg = LaunchConfig(
        tuple(grid.get(t, 1) for t in BLOCK_TAGS),  # type: ignore[arg-type]
        tuple(threads.get(t, 1) for t in THREAD_TAGS_GPU),  # type: ignore[arg-type]
    )
    return cfg, threads


def _same_extent(a: int | PrimExpr, b: int | PrimExpr) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    from ..ir.analysis import structural_equal

    return structural_equal(a, b)


def _guard(s: Stmt, cond: PrimExpr) -> Stmt:
    """``if (cond) s``, pushed below the barriers of ``s`` so that every thread still
    reaches them (only the barrier-free statements are guarded)."""
    if not any(is_barrier(x) for x in iter_stmts(s)):
        return IfThenElse(cond, s)
    if is_barrier(s):
        return s
    if isinstance(s, SeqStmt):
        return SeqStmt(tuple(_guard(c, cond) for c in s.stmts))
    if isinstance(s, (For, LetStmt)):
        return replace(s, body=_guard(s.body, cond))
    if isinstance(s, Block) and s.init is None:
        return replace(s, body=_guard(s.body, cond))
    if isinstance(s, IfThenElse):
        other = None if s.else_case is None else _guard(s.else_case, cond)
        return IfThenElse(s.condition, _guard(s.then_case, cond), other)
    return IfThenElse(cond, s)


class _Widen(Mutator):
    """Every loop bound to threadIdx gets its axis's launch extent; a narrower one
    guards its body with ``if (v < extent)`` (below any barrier it holds)."""

    def __init__(self, launch: dict[str, int]):
        self.launch = launch

    def visit_stmt(self, s: Stmt) -> Stmt:
        s = super().visit_stmt(s)
        if isinstance(s, For) and s.kind == "thread_binding":
            width = self.launch.get(s.thread_tag or "")
            if width is not None and s.extent < width:
                guard = _guard(s.body, LT(s.loop_var, IntImm(s.extent, s.loop_var.dtype)))
                return replace(s, extent=width, body=guard)
        return s


class _Hoist(Mutator):
    """Removes shared/local allocations from the blocks of a kernel (collected in
    ``found``); a block left with nothing to do but wrap its body (compaction's
    ``*_alloc`` blocks) is replaced by its body."""

    def __init__(self, kname: str):
        self.kname = kname
        self.found: list[Buffer] = []

    def visit_stmt(self, s: Stmt) -> Stmt:
        if not isinstance(s, Block):
            return super().visit_stmt(s)
        for b in s.alloc_buffers:
            if b.scope not in _KERNEL_SCOPES:
                raise SharedOutsideKernelError(
                    f"{self.kname}: block {s.name!r} allocates {b.scope} buffer {b.name!r} "
                    "inside the kernel; a GPU kernel cannot allocate global memory (give it "
                    "scope 'shared' or 'local', or leave it to the host by computing it in "
                    "its own kernel)"
                )
            self.found.append(b)
        s = super().visit_stmt(replace(s, alloc_buffers=()))
        trivial = (
            not s.iter_vars and s.init is None and not s.annotations and not s.match_buffers
            and isinstance(s.predicate, IntImm) and s.predicate.value
        )
        return s.body if trivial else s


def _buffers_used(s: Stmt) -> list[Buffer]:
    seen: dict[int, Buffer] = {}
    for x in iter_stmts(s):
        if isinstance(x, BufferStore):
            seen.setdefault(id(x.buffer), x.buffer)
        if isinstance(x, Block):
            for m in x.match_buffers:
                seen.setdefault(id(m.source.buffer), m.source.buffer)
        for e in _held_exprs(x):
            for y in iter_exprs(e):
                if isinstance(y, BufferLoad):
                    seen.setdefault(id(y.buffer), y.buffer)
    return list(seen.values())


def plan_function(name: str, func: PrimFunc, target=None) -> DeviceFunction:
    """Plan one lowered function (see the module docstring)."""
    tgt = _target(target)
    stmts = [s for s in _root_stmts(func) if not _is_noop(s)]
    root_allocs = list(func.body.alloc_buffers)
    kernels: list[GpuKernel] = []
    users: dict[int, list[str]] = {}
    params = list(func.params)
    for index, s in enumerate(stmts):
        kname = f"{name}_kernel" if len(stmts) == 1 else f"{name}_kernel_{index}"
        if not (isinstance(s, For) and s.kind == "thread_binding"):
            inner = _bound_loops(s)
            what = _describe(s)
            if inner:
                raise UnboundLoopError(
                    f"{name}: {what} encloses loops bound to GPU threads "
                    f"({inner[0][0].loop_var.name!r} is bound to {inner[0][0].thread_tag}) but "
                    "is not bound itself; a kernel's outermost loops must be bound to blockIdx "
                    "or threadIdx (bind it, or move it inside the bound loops)"
                )
            raise UnboundLoopError(
                f"{name}: {what} is not bound to a thread; on a GPU it would run on every "
                "thread over global data (split it and bind the parts to blockIdx.x and "
                "threadIdx.x)"
            )
        launch, thread_ext = _launch(name, kname, s)
        if launch.threads_per_block > tgt.max_threads_per_block:
            raise ThreadsPerBlockError(
                f"{kname}: {launch.threads_per_block} threads per block "
                f"({' x '.join(str(b) for b in launch.block)}) exceeds the "
                f"{tgt.max_threads_per_block} that {tgt} allows"
            )
        hoist = _Hoist(kname)
        body = hoist.visit_stmt(s)
        found = hoist.found
        used = _buffers_used(body)
        used_ids = {id(b) for b in used}
        for b in root_allocs:
            if id(b) in used_ids:
                users.setdefault(id(b), []).append(kname)
        kernel_allocs = found + [
            b for b in root_allocs if id(b) in used_ids and b.scope in _KERNEL_SCOPES
        ]
        shared = tuple(b for b in kernel_allocs if b.scope in SHARED_SCOPES)
        local = tuple(b for b in kernel_allocs if b.scope not in SHARED_SCOPES)
        kparams = list(params)  # all of them: the shape variables come from their shapes
        kparams += [b for b in root_allocs if id(b) in used_ids and b.scope not in _KERNEL_SCOPES]
        thread_vars = {loop.loop_var for loop, _ in _bound_loops(body)
                       if (loop.thread_tag or "") in THREAD_TAGS_GPU}
        # barriers first, then narrower thread loops widened with guards placed below them
        body = _Widen(thread_ext).visit_stmt(insert_barriers(body, thread_vars))
        kernel = GpuKernel(kname, name, body, tuple(kparams), tuple(func.shape_vars), shared,
                           local, launch)
        if kernel.shared_bytes > tgt.max_shared_memory_per_block:
            raise SharedMemoryLimitError(
                f"{kname}: {kernel.shared_bytes} bytes of shared memory per block ("
                + ", ".join(f"{b.name}" for b in shared)
                + f") exceeds the {tgt.max_shared_memory_per_block} bytes that {tgt} allows"
            )
        kernels.append(kernel)
    for b in root_allocs:
        names = users.get(id(b), [])
        if b.scope in _KERNEL_SCOPES and len(names) > 1:
            raise SharedOutsideKernelError(
                f"{name}: {b.scope} buffer {b.name!r} is used by kernels {', '.join(names)}; "
                f"{b.scope} memory does not outlive a kernel (use a global buffer between "
                "kernels)"
            )
    intermediates = tuple(
        b for b in root_allocs if b.scope not in _KERNEL_SCOPES and users.get(id(b))
    )
    return DeviceFunction(name, func, intermediates, tuple(kernels))


def _is_noop(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, IntImm)


def lower_for_gpu(mod, target=None) -> tuple[IRModule, DeviceModule]:
    """Lower a module (PrimFunc, IRModule or Schedule) for a GPU and plan its kernels:
    ``(lowered, device_module)``. Lowering is :func:`workbench.lower` (buffer
    compaction) followed by the cross-thread reduction lowering (a reduction over loops
    bound to threadIdx becomes a tree all-reduce through shared memory, TVM's
    LowerCrossThreadReduction).

    >>> import workbench as wb
    >>> from workbench.gpu_examples import gpu_matmul_schedule
    >>> lowered, device = lower_for_gpu(gpu_matmul_schedule(128))
    >>> [k.name for k in device.kernels]
    ['matmul_kernel']
    """
    from ..ir.transform import lower
    from ..ir.transform.cross_thread import lower_cross_thread_reduction
    from .c import as_ir_module

    tgt = _target(target)
    lowered = lower(as_ir_module(mod), gpu=True)
    items = [(name, lower_cross_thread_reduction(f)) for name, f in lowered.functions]
    if any(new is not old for (_, new), (_, old) in zip(items, lowered.functions)):
        lowered = IRModule(tuple(items))
    return lowered, plan_device_module(lowered, tgt)


def plan_device_module(mod: IRModule | PrimFunc, target=None) -> DeviceModule:
    """Plan every function of a *lowered* module (:func:`workbench.lower`) for a GPU
    target (``"cuda"``, a :class:`~workbench.Target` or its dict form).

    >>> import workbench as wb
    >>> from workbench.gpu_examples import gpu_matmul_schedule
    >>> plan = plan_device_module(wb.lower(gpu_matmul_schedule(128).mod))
    >>> [(b.name, b.shape) for b in plan.kernels[0].shared]
    [('A_shared', (64, 8)), ('B_shared', (8, 64))]
    """
    if isinstance(mod, PrimFunc):
        mod = IRModule.from_funcs(mod)
    return DeviceModule(tuple(plan_function(n, f, target) for n, f in mod.functions))


# -- barriers --------------------------------------------------------------------------
_Access = tuple[frozenset, frozenset]  # (shared buffers read, written)
_EMPTY: _Access = (frozenset(), frozenset())


def _held_exprs(s: Stmt) -> Iterable[PrimExpr]:
    """The expressions a statement evaluates (a store's indices and value, not its
    target)."""
    if isinstance(s, BufferStore):
        return (*s.indices, s.value)
    return stmt_exprs(s)


def _accesses(s: Stmt) -> _Access:
    reads: set[Buffer] = set()
    writes: set[Buffer] = set()
    for x in iter_stmts(s):
        if isinstance(x, BufferStore) and x.buffer.scope in SHARED_SCOPES:
            writes.add(x.buffer)
        for e in _held_exprs(x):
            for y in iter_exprs(e):
                if isinstance(y, BufferLoad) and y.buffer.scope in SHARED_SCOPES:
                    reads.add(y.buffer)
    return frozenset(reads), frozenset(writes)


def _conflict(state: _Access, acc: _Access) -> bool:
    """Read-after-write or write-after-read (TVM's planner does not order two writes)."""
    pending_reads, pending_writes = state
    reads, writes = acc
    return bool(reads & pending_writes) or bool(writes & pending_reads)


def _merge(a: _Access, b: _Access) -> _Access:
    return a[0] | b[0], a[1] | b[1]


class _Planner:
    def __init__(self, thread_vars: set[Var]):
        self.dep = set(thread_vars)  # variables whose value differs between threads
        # (id(stmt), incoming state) -> (stmt, planned stmt, outgoing state): a loop body is
        # planned twice (the second time for the next iteration), nested loops again
        # inside each; planning a planned statement again from the same state changes
        # nothing, so both the input and the output are remembered
        self.memo: dict[tuple[int, _Access], tuple[Stmt, Stmt, _Access]] = {}
        self.access_memo: dict[int, tuple[Stmt, _Access]] = {}

    def accesses(self, s: Stmt) -> _Access:
        hit = self.access_memo.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        acc = _accesses(s)
        self.access_memo[id(s)] = (s, acc)
        return acc

    def depends(self, e: PrimExpr) -> bool:
        return any(isinstance(x, Var) and x in self.dep for x in iter_exprs(e))

    def uniform_container(self, s: Stmt) -> bool:
        if isinstance(s, (For, SeqStmt, LetStmt)):
            return True
        if isinstance(s, IfThenElse):
            return not self.depends(s.condition)
        if isinstance(s, Block):
            return s.init is None and not self.depends(s.predicate)
        return False

    def seq(self, stmts: Iterable[Stmt], state: _Access) -> tuple[list[Stmt], _Access]:
        out: list[Stmt] = []
        for c in stmts:
            if is_barrier(c):
                out.append(c)
                state = _EMPTY
                continue
            acc = self.accesses(c)
            if not acc[0] and not acc[1]:
                out.append(c)
                continue
            if _conflict(state, acc):
                if not (out and is_barrier(out[-1])):
                    out.append(barrier())
                state = _EMPTY
            if self.uniform_container(c) and not isinstance(c, SeqStmt):
                c, state = self.visit(c, state)
                out.append(c)
            elif isinstance(c, SeqStmt):
                inner, state = self.seq(c.stmts, state)
                out.extend(inner)
            else:
                out.append(c)
                state = _merge(state, acc)
        return out, state

    def visit(self, s: Stmt, state: _Access) -> tuple[Stmt, _Access]:
        if not isinstance(s, For):
            return self._visit(s, state)
        hit = self.memo.get((id(s), state))
        if hit is not None and hit[0] is s:
            return hit[1], hit[2]
        out, after = self._visit(s, state)
        self.memo[(id(s), state)] = (s, out, after)
        self.memo[(id(out), state)] = (out, out, after)
        return out, after

    def _visit(self, s: Stmt, state: _Access) -> tuple[Stmt, _Access]:
        if isinstance(s, For):
            per_thread_loop = s.kind == "thread_binding" and (s.thread_tag or "") in (
                THREAD_TAGS_GPU + BLOCK_TAGS
            )
            body, out = self.body(s.body, state)
            if not per_thread_loop:  # a real loop: plan the next iteration too
                body, out = self.body(body, out)
            return s.with_body(body), out
        if isinstance(s, IfThenElse):
            then, s1 = self.body(s.then_case, state)
            if s.else_case is None:
                return IfThenElse(s.condition, then), _merge(s1, state)
            other, s2 = self.body(s.else_case, state)
            return IfThenElse(s.condition, then, other), _merge(s1, s2)
        if isinstance(s, Block):
            for iv, val in zip(s.iter_vars, s.iter_values):
                if self.depends(val):
                    self.dep.add(iv.var)
            body, out = self.body(s.body, state)
            return replace(s, body=body), out
        if isinstance(s, LetStmt):
            if self.depends(s.value):
                self.dep.add(s.var)
            body, out = self.body(s.body, state)
            return replace(s, body=body), out
        raise AssertionError(type(s).__name__)

    def body(self, s: Stmt, state: _Access) -> tuple[Stmt, _Access]:
        stmts, out = self.seq(s.stmts if isinstance(s, SeqStmt) else [s], state)
        return (stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))), out


def insert_barriers(body: Stmt, thread_vars: set[Var]) -> Stmt:
    """``body`` with ``__syncthreads()`` barriers where shared memory needs them (see the
    module docstring); ``thread_vars`` are the loop variables bound to threadIdx."""
    planner = _Planner(thread_vars)
    # block iter vars bound to thread-dependent values are thread-dependent too
    for x in iter_stmts(body):
        if isinstance(x, For) and x.kind == "thread_binding" and (
            x.thread_tag or ""
        ) in THREAD_TAGS_GPU:
            planner.dep.add(x.loop_var)
    out, _ = planner.body(body, _EMPTY)
    return out
