"""Cross-thread reduction lowering: a reduction over loops bound to ``threadIdx`` becomes
an all-reduce through shared memory (TVM's ``LowerCrossThreadReduction`` followed by the
shared-memory form of its ``LowerThreadAllreduce``).

On a GPU every loop bound to ``threadIdx.x/y/z`` is one thread, so a reduction block whose
reduce iter var is bound (through its binding) to such loops has many threads updating
one output element. :func:`lower_cross_thread_reduction` rewrites each such block ``B``
writing ``X[idx]``:

1. **In-thread reduction.** Each thread combines its own part into a per-thread buffer
   ``in_thread_X`` (scope ``local``, one element), starting from the reducer's identity:
   block ``B_in_thread_init``, then the reduce loops *not* bound to threads with block
   ``B_in_thread`` (``B``'s iter vars, bindings and predicate; a thread whose predicate is
   false contributes the identity).
2. **Tree reduction.** Every thread stores its partial value to ``red_buf_X[g..., tid]``
   (scope ``shared``; ``tid`` is the flat index of the reducing threads, the loops of the
   binding outermost-slowest; ``g...`` are the other ``threadIdx`` loops around ``B``, so
   each group of threads reduces on its own row), then, with a barrier after each step,
   for ``s`` halving from the largest power of two below the thread count ``n``:
   ``if tid < s: red_buf[tid] = combine(red_buf[tid], red_buf[tid + s])`` (the first step
   is ``if tid < n - s``, which covers a thread count that is not a power of two).
3. **Write-back.** Block ``B_write_back`` (``B``'s spatial iter vars) stores
   ``red_buf_X[g..., 0]`` to ``X[idx]``, on the thread whose reducing indices are all 0
   (every thread when ``X`` is ``local``: each holds its own copy), keeping the clauses of
   ``B``'s predicate that do not involve the reduction loops. A block with an ``init``
   that is not the reducer's identity stores ``combine(init, result)``; a block without an
   ``init`` (``decompose_reduction``'s update block; TVM leaves such a block alone and its
   threads race) stores ``combine(X[idx], result)``.

All of this sits inside the thread-bound reduction loops, moved (in their order) outside
the loops not bound to threads; the two buffers are allocated by the block enclosing
those loops. The pass runs before or after buffer compaction (:func:`workbench.lower`):
allocation blocks between the reduction loops and ``B`` stay where they are. Barriers
are ``T.tvm_storage_sync("shared")`` statements (:func:`workbench.codegen.gpu_plan.barrier`),
never under a condition that depends on the thread index.

Recognised reducers, as TVM's registry for one buffer: ``+`` (identity 0), ``*`` (1),
``max`` (the dtype's lowest value), ``min`` (its highest): the update is
``X[idx] = X[idx] op rhs`` (either operand order) with ``rhs`` not reading ``X``.

Refused with :class:`CrossThreadReductionError` (the message names the block), following
TVM's conditions: the reduction loops are not the innermost statements around the block
(only sequences may sit between them), the block is not the last one under its outermost
reduction loop, a reduction loop also feeds a spatial iter var, a reduction loop is bound
to something other than ``threadIdx``, an update that is not one of the reducers above
(two-buffer reductions such as argmax included), thread loops with symbolic extents or
two loops on the same thread axis, and a kernel that binds a ``threadIdx`` axis that no
loop around the block is bound to (every thread along it would run the reduction on the
same shared buffer).

Before and after, a row sum ``B[i] = sum(A[i, k])`` with ``k = k_0 * 32 + k_1`` and
``k_1`` bound to ``threadIdx.x``::

    for i in T.thread_binding(8, thread="blockIdx.x"):
        for k_0 in range(4):
            for k_1 in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("B"): ...  # init B[vi] = 0; B[vi] = B[vi] + A[vi, vk]

    for i in T.thread_binding(8, thread="blockIdx.x"):
        for k_1 in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B_in_thread_init"): in_thread_B[0] = T.float32(0)
            for k_0 in range(4):
                with T.block("B_in_thread"): ...  # in_thread_B[0] = in_thread_B[0] + A[vi, vk]
            red_buf_B[k_1] = in_thread_B[0]
            T.tvm_storage_sync("shared")
            if k_1 < 16:
                red_buf_B[k_1] = red_buf_B[k_1] + red_buf_B[k_1 + 16]
            T.tvm_storage_sync("shared")
            ...  # strides 8, 4, 2, 1
            with T.block("B_write_back"):
                vi = T.axis.spatial(8, i)
                T.where(k_1 == 0)
                B[vi] = red_buf_B[0]
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..buffer import Buffer
from ..expr import (
    EQ,
    LT,
    Add,
    And,
    BufferLoad,
    FloatImm,
    IntImm,
    Max,
    Mul,
    PrimExpr,
    Var,
    dtype_limit,
    is_float,
)
from ..functor import expr_vars, iter_exprs, iter_stmts, substitute
from ..reduce import is_identity, split_update, unlet_update
from ..simplify import struct_key
from ..stmt import (
    Block,
    BufferStore,
    For,
    IfThenElse,
    IterVar,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    barrier,
)

__all__ = ["CrossThreadReductionError", "lower_cross_thread_reduction"]

_THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


class CrossThreadReductionError(ValueError):
    """A reduction over loops bound to ``threadIdx`` that cannot be lowered to an
    all-reduce (the message names the block and the reason)."""


def _is_thread(loop: For) -> bool:
    return loop.kind == "thread_binding" and loop.thread_tag in _THREAD_AXES


# ---------------------------------------------------------------------------
# finding the reductions


def _blocks_with_paths(s: Stmt, path: list[Stmt]):
    """Every block under ``s`` (inits skipped) with the statements from the root to it."""
    path = path + [s]
    if isinstance(s, Block):
        yield s, path
        yield from _blocks_with_paths(s.body, path)
    elif isinstance(s, (For, LetStmt)):
        yield from _blocks_with_paths(s.body, path)
    elif isinstance(s, SeqStmt):
        for x in s.stmts:
            yield from _blocks_with_paths(x, path)
    elif isinstance(s, IfThenElse):
        yield from _blocks_with_paths(s.then_case, path)
        if s.else_case is not None:
            yield from _blocks_with_paths(s.else_case, path)


def _reduce_and_spatial_vars(block: Block) -> tuple[set[Var], set[Var]]:
    reduce_vars: set[Var] = set()
    spatial_vars: set[Var] = set()
    for iv, value in zip(block.iter_vars, block.iter_values, strict=True):
        (reduce_vars if iv.kind == "R" else spatial_vars).update(expr_vars(value))
    return reduce_vars, spatial_vars


def _reduction_loops(block: Block, path: list[Stmt]) -> list[For]:
    """The loops around ``block`` that its reduce iter vars' bindings use, outermost
    first (TVM's "reduction-related loops")."""
    reduce_vars, _ = _reduce_and_spatial_vars(block)
    return [s for s in path[:-1] if isinstance(s, For) and s.loop_var in reduce_vars]


def _is_cross_thread(block: Block, path: list[Stmt]) -> bool:
    return any(_is_thread(lp) for lp in _reduction_loops(block, path))


# ---------------------------------------------------------------------------
# the plan of one reduction (checks first, no IR built)


@dataclass(frozen=True)
class _Plan:
    block: Block
    loops: list[For]  # reduction loops, outermost first
    threads: list[For]  # those bound to threadIdx, outermost first
    groups: list[For]  # the other threadIdx loops around the block, outermost first
    store: BufferStore  # the update X[idx] = op(X[idx], rhs)
    op: type
    rhs: PrimExpr
    init_value: PrimExpr | None  # None: no init (combine with X's value)


def _refuse(block: Block, why: str) -> CrossThreadReductionError:
    return CrossThreadReductionError(
        f'cross-thread reduction of block "{block.name}": {why}'
    )


def _identity(op: type, dtype: str) -> PrimExpr:
    if op is Add or op is Mul:
        value = 0 if op is Add else 1
        return FloatImm(float(value), dtype) if is_float(dtype) else IntImm(value, dtype)
    return dtype_limit(dtype, "min" if op is Max else "max")


def _match_update(block: Block) -> tuple[BufferStore, type, PrimExpr]:
    body = unlet_update(block.body)  # v = value; X[idx] = v
    if not isinstance(body, BufferStore):
        raise _refuse(block, "its body is not a single store `X[idx] = X[idx] op value` "
                             "(two-buffer reductions such as argmax are not lowered)")
    split = split_update(body)
    if isinstance(split, str):
        value, name = body.value, body.buffer.name
        raise _refuse(block, {
            "op": f"the update {value} is not a sum, product, min or max",
            "operand": f"the update {value} does not combine {name}[...] with a value by a "
                       "sum, product, min or max",
            "rereads": f"the combined value reads {name} again",
        }[split])
    return body, split[0], split[1]


def _init_value(block: Block, store: BufferStore) -> PrimExpr | None:
    if block.init is None:
        return None
    init = block.init
    if not (isinstance(init, BufferStore) and init.buffer is store.buffer
            and [struct_key(i) for i in init.indices] == [struct_key(i) for i in store.indices]):
        raise _refuse(block, "its init is not one store to the element the update writes")
    if any(isinstance(x, BufferLoad) and x.buffer is store.buffer
           for x in iter_exprs(init.value)):
        raise _refuse(block, f"its init reads {store.buffer.name}")
    return init.value


def _transparent(s: Stmt) -> bool:
    """An allocation block (``<buffer>_alloc``, as compaction makes them): no iter vars,
    no init, no predicate; it only scopes buffers."""
    return (isinstance(s, Block) and not s.iter_vars and s.init is None
            and not s.match_buffers and isinstance(s.predicate, IntImm)
            and bool(s.predicate.value))


def _check_innermost(block: Block, path: list[Stmt], loops: list[For]) -> None:
    """TVM's condition: the reduction loops are the statements right above the block
    (only sequences between them; allocation blocks too, which TVM never sees because it
    lowers before compacting buffers), and the block is the last block under the
    outermost one."""
    seen = 0
    for s in reversed(path[:-1]):
        if seen == len(loops):
            break
        if isinstance(s, SeqStmt) or _transparent(s):
            continue
        if not (isinstance(s, For) and any(s is lp for lp in loops)):
            what = f'loop "{s.loop_var.name}"' if isinstance(s, For) else type(s).__name__
            raise _refuse(
                block, f"the reduction loops ({', '.join(lp.loop_var.name for lp in loops)}) "
                       f"must be the innermost statements around it, but {what} is between "
                       "them and the block")
        seen += 1
    after = False
    for s in iter_stmts(loops[0]):
        if s is block:
            after = True
        elif after and isinstance(s, Block) and not _inside(block, s):
            raise _refuse(block, f'block "{s.name}" follows it under the reduction loop '
                                 f'"{loops[0].loop_var.name}"; it must be the last block there')


def _inside(outer: Block, inner: Block) -> bool:
    return any(x is inner for x in iter_stmts(outer.body))


def _kernel_threads(path: list[Stmt]) -> dict[str, For]:
    """For each threadIdx axis bound with more than one thread in the root statement
    (the kernel) holding the last node of ``path``, one loop bound to it."""
    root_stmt = next((s for s in path[1:] if not isinstance(s, SeqStmt)), None)
    out: dict[str, For] = {}
    for s in iter_stmts(root_stmt) if root_stmt is not None else ():
        if isinstance(s, For) and _is_thread(s) and s.extent != 1:
            out.setdefault(s.thread_tag, s)
    return out


def _plan(block: Block, path: list[Stmt]) -> _Plan:
    loops = _reduction_loops(block, path)
    _, spatial_vars = _reduce_and_spatial_vars(block)
    for lp in loops:
        if lp.loop_var in spatial_vars:
            raise _refuse(block, f'loop "{lp.loop_var.name}" feeds both a spatial and a reduce '
                                 "iter var")
        if lp.kind == "thread_binding" and not _is_thread(lp):
            raise _refuse(block, f'the reduction loop "{lp.loop_var.name}" is bound to '
                                 f"{lp.thread_tag}; only threadIdx.x/y/z can reduce")
    if any(isinstance(s, Block) for s in iter_stmts(block.body)):
        raise _refuse(block, "it holds other blocks")
    _check_innermost(block, path, loops)
    threads = [lp for lp in loops if _is_thread(lp)]
    groups = [s for s in path[:-1] if isinstance(s, For) and _is_thread(s)
              and not any(s is t for t in threads)]
    tags = [lp.thread_tag for lp in groups + threads]
    for lp in groups + threads:
        if not isinstance(lp.extent, int):
            raise _refuse(block, f'loop "{lp.loop_var.name}" bound to {lp.thread_tag} has the '
                                 f"symbolic extent {lp.extent}; a thread count must be constant")
        if lp.min != 0:
            raise _refuse(block, f'loop "{lp.loop_var.name}" bound to {lp.thread_tag} does not '
                                 "start at 0")
        if tags.count(lp.thread_tag) > 1:
            raise _refuse(block, f"two loops around it are bound to {lp.thread_tag}")
    dtypes = {lp.loop_var.dtype for lp in groups + threads}
    if len(dtypes) > 1:
        raise _refuse(block, "its thread loops have different index types")
    for tag, lp in _kernel_threads(path).items():
        if tag not in tags:
            raise _refuse(block, f'its kernel binds loop "{lp.loop_var.name}" to {tag} but no '
                                 "loop around the block is bound to it: every thread along "
                                 "that axis would run the reduction on the same shared buffer")
    store, op, rhs = _match_update(block)
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "R"}
    if any(expr_vars(i) & reduce_vars for i in store.indices):
        raise _refuse(block, f"a reduce iter var indexes {store.buffer.name}")
    return _Plan(block, loops, threads, groups, store, op, rhs,
                 _init_value(block, store))


# ---------------------------------------------------------------------------
# building the lowered statement


def _fresh_name(name: str, taken: set[str]) -> str:
    out, k = name, 1
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    taken.add(out)
    return out


def _strip(s: Stmt, plan: _Plan, new_block: Block) -> Stmt:
    """The in-thread nest: the reduction loops' subtree without the thread-bound loops,
    the block replaced by ``new_block``."""
    if s is plan.block:
        return new_block
    if isinstance(s, For) and any(s is t for t in plan.threads):
        return _strip(s.body, plan, new_block)
    if isinstance(s, For):
        return s.with_body(_strip(s.body, plan, new_block))
    if isinstance(s, SeqStmt):
        return SeqStmt(tuple(_strip(x, plan, new_block) for x in s.stmts))
    if isinstance(s, Block) and any(x is plan.block for x in iter_stmts(s.body)):
        return s.with_body(_strip(s.body, plan, new_block))  # an allocation block
    return s


def _flat_thread_index(threads: list[For]) -> PrimExpr:
    index: PrimExpr | None = None
    for lp in threads:
        index = lp.loop_var if index is None else index * lp.extent + lp.loop_var
    assert index is not None
    return index


def _conjuncts(e: PrimExpr) -> list[PrimExpr]:
    if isinstance(e, And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _all_of(clauses: list[PrimExpr]) -> PrimExpr:
    out: PrimExpr = IntImm(1, "bool")
    for c in clauses:
        out = c if isinstance(out, IntImm) else And(out, c)
    return out


def _lower_one(plan: _Plan, taken: set[str]) -> tuple[Stmt, tuple[Buffer, Buffer]]:
    block, store, op = plan.block, plan.store, plan.op
    X = store.buffer
    dtype = X.dtype
    n = 1
    for t in plan.threads:
        n *= t.extent
    idx_dtype = plan.threads[0].loop_var.dtype
    in_thread = Buffer(_fresh_name(f"in_thread_{X.name}", taken), (1,), dtype, "local")
    red = Buffer(_fresh_name(f"red_buf_{X.name}", taken),
                 tuple(g.extent for g in plan.groups) + (n,), dtype, "shared")
    zero = IntImm(0, "int32")
    group = tuple(g.loop_var for g in plan.groups)
    tid = _flat_thread_index(plan.threads)

    def combine(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        return op(a, b)

    def red_at(i: PrimExpr) -> BufferLoad:
        return BufferLoad(red, group + (i,))

    init = plan.init_value
    keep = init is not None and init.dtype != "bool" and is_identity(op, init)
    identity = init if keep else _identity(op, dtype)
    acc = BufferLoad(in_thread, (zero,))
    stmts: list[Stmt] = [
        Block(f"{block.name}_in_thread_init", (), (),
              BufferStore(in_thread, identity, (zero,))),
        _strip(plan.loops[0], plan, replace(
            block, name=f"{block.name}_in_thread", init=None,
            body=BufferStore(in_thread, combine(acc, plan.rhs), (zero,)),
            reads=None, writes=None)),
        BufferStore(red, acc, group + (tid,)),
        barrier(),
    ]
    stride = 1
    while stride * 2 < n:
        stride *= 2
    first = True
    while n > 1 and stride >= 1:
        active = n - stride if first else stride
        step = BufferStore(red, combine(red_at(tid), red_at(tid + stride)), group + (tid,))
        stmts += [IfThenElse(LT(tid, IntImm(active, idx_dtype)), step), barrier()]
        first = False
        stride //= 2
    # write-back: B's spatial iter vars (fresh), on the first thread of the group
    fresh = {iv.var: Var(iv.var.name, iv.var.dtype) for iv in block.iter_vars
             if iv.kind != "R"}
    spatial = [(IterVar(fresh[iv.var], iv.extent, iv.kind), v)
               for iv, v in zip(block.iter_vars, block.iter_values, strict=True)
               if iv.kind != "R"]
    indices = tuple(substitute(i, fresh) for i in store.indices)
    result: PrimExpr = red_at(zero)
    if init is None:
        result = combine(BufferLoad(X, indices), result)
    elif init is not identity:
        result = combine(substitute(init, fresh), result)
    loop_vars = {lp.loop_var for lp in plan.loops}
    clauses = [c for c in _conjuncts(block.predicate)
               if not isinstance(c, IntImm) and not (expr_vars(c) & loop_vars)]
    if X.scope != "local":
        clauses += [EQ(t.loop_var, IntImm(0, t.loop_var.dtype)) for t in plan.threads]
    stmts.append(Block(
        f"{block.name}_write_back", tuple(iv for iv, _ in spatial), tuple(v for _, v in spatial),
        BufferStore(X, result, indices), predicate=_all_of(clauses)))
    lowered: Stmt = SeqStmt(tuple(stmts))
    for t in reversed(plan.threads):
        lowered = t.with_body(lowered)
    return lowered, (in_thread, red)


def _replace_on_path(path: list[Stmt], old: Stmt, new: Stmt, parent: Block,
                     allocs: tuple[Buffer, ...]) -> Stmt:
    """Rebuild ``path`` (root first) with ``old`` replaced by ``new``; ``parent`` (a block
    on the path) also allocates ``allocs``."""
    at = next(k for k, s in enumerate(path) if s is old)
    node = new
    for s in reversed(path[:at]):
        child = path[path.index(s) + 1]
        if isinstance(s, SeqStmt):
            node = SeqStmt(tuple(node if x is child else x for x in s.stmts))
        elif isinstance(s, Block):
            extra = {"alloc_buffers": s.alloc_buffers + allocs} if s is parent else {}
            node = s.with_body(node, **extra)
        elif isinstance(s, IfThenElse):
            node = (IfThenElse(s.condition, node, s.else_case) if s.then_case is child
                    else IfThenElse(s.condition, s.then_case, node))
        elif isinstance(s, (For, LetStmt)):
            node = s.with_body(node) if isinstance(s, For) else replace(s, body=node)
        else:  # pragma: no cover - paths only hold the statements above
            raise AssertionError(type(s).__name__)
    return node


def lower_cross_thread_reduction(func: PrimFunc) -> PrimFunc:
    """``func`` with every cross-thread reduction lowered to an all-reduce through shared
    memory (see the module docstring); ``func`` itself when it has none. Run once, on IR
    for a GPU target (the barriers it adds are for a GPU; the C target refuses them).

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.gemv(8, 64))
    >>> i, k = sch.get_loops("y")
    >>> sch.bind(i, "blockIdx.x"); sch.bind(k, "threadIdx.x")
    >>> lowered = lower_cross_thread_reduction(sch.func)
    >>> [ln.strip() for ln in lowered.script().splitlines() if "red_buf_y[k]" in ln][:2]
    ['red_buf_y[k] = in_thread_y[0]', 'red_buf_y[k] = red_buf_y[k] + red_buf_y[k + 32]']
    >>> unbound = wb.workloads.gemv(8, 64)
    >>> lower_cross_thread_reduction(unbound) is unbound  # no reduction over threads
    True
    """
    found = [(b, p) for b, p in _blocks_with_paths(func.body, [])
             if p[:-1] and _is_cross_thread(b, p)]
    if not found:
        return func
    for b, p in found:  # every check before any rewrite
        _plan(b, p)
    taken = {b.name for b in _all_buffers(func)}
    body: Block = func.body
    for block, _ in found:
        # planned again on the current body: earlier rewrites rebuilt its ancestors
        path = next(p for b, p in _blocks_with_paths(body, []) if b is block)
        plan = _plan(block, path)
        lowered, allocs = _lower_one(plan, taken)
        above = path[:next(k for k, s in enumerate(path) if s is plan.loops[0])]
        parent = next(s for s in reversed(above) if isinstance(s, Block))
        body = _replace_on_path(path, plan.loops[0], lowered, parent, allocs)  # type: ignore[assignment]
    return replace(func, body=body)


def _all_buffers(func: PrimFunc) -> list[Buffer]:
    out = list(func.params)
    for s in iter_stmts(func.body):
        if isinstance(s, Block):
            out += list(s.alloc_buffers)
    return out
