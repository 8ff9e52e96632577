"""Compact buffer allocation: move each intermediate buffer to where it is used and shrink
it to the region used there.

This is TVM's ``PlanAndUpdateBufferAllocationLocation`` followed by
``CompactBufferAllocation``, the lowering step that turns the full-size intermediate
and cache buffers a schedule creates (allocated in the root block) into the small
tiles that a hand-written kernel would declare inside its loops.

For every buffer allocated by a block (the root block included; parameters are never
touched):

1. **Where.** The allocation point is the lowest common ancestor (LCA) of all the
   buffer's accesses, counting only loops and blocks as scopes (as TVM does). Two rules
   keep the point high enough to stay correct:

   * a block with reduce iter vars accumulates into what it writes across the
     iterations of the loops its reduce bindings use, so those buffers stay above the
     outermost such loop;
   * a buffer that GPU threads share stays above the thread loops that share it
     (``global``: every bound loop; ``shared``: ``threadIdx``/``vthread`` loops;
     ``warp``: ``threadIdx.x``; ``local``: none), TVM's ``CanRelaxStorageUnderThread``.

2. **How big.** Every access index is written in the loop variables (block iter vars
   replaced by their bindings); the loops below the allocation point are relaxed to
   their ranges, the loops above it stay symbolic (their ranges only simplify). A loop
   ranges only where the conditions around the access hold: the predicates of the
   blocks it is in, ``if`` branches and the sides of ``T.if_then_else`` (a ``Select``
   evaluates both sides, so both count), TVM's ``ConditionalBoundsContext``. Each index
   gets an interval (:mod:`workbench.ir.intset`: sums, ``//``, ``%``, ``min``/``max``);
   per dimension the union of the intervals, its start clipped at 0 and its extent at
   the dimension's size (TVM's ``collect_inbound``), gives the new shape, and every
   index ``x`` becomes ``x - start``. An extent that still depends on the outer loops
   is replaced by its largest value.

3. **Representation.** An allocation point that is a block gets the buffer in its
   ``alloc_buffers``. One that is a loop gets its body wrapped in a new block without
   iter vars (named ``<buffer>_alloc``) that allocates it, which is TVM's opaque
   allocation block (``with T.block(""):`` in TVM's lowered TIR). The C backend declares
   a block's buffers at the block's position, so a small tile becomes a stack array
   inside the loop.

A buffer with an access that has no interval (a data-dependent index), or whose region
is the whole buffer anyway, stays exactly as it was (full size, same place; TVM would
still move an unshrunk buffer to the LCA, which is the same memory). Storage-align hints
(``Buffer.align``) are kept on the compacted buffer and apply to its new shape. Blocks
whose bodies change have their ``reads``/``writes`` derived again.

Example (``Y`` is used only inside loop ``i``, one row at a time)::

    >>> import workbench as wb
    >>> from workbench.ir import Block, Buffer, BufferStore, For, IterVar, PrimFunc, SeqStmt, Var
    >>> A, C = Buffer("A", (8, 4)), Buffer("C", (8, 4))
    >>> Y = Buffer("Y", (8, 4))
    >>> i, j, jj, vi, vj, wi, wj = (Var(n) for n in ("i", "j", "jj", "vi", "vj", "wi", "wj"))
    >>> produce = For(j, 4, "serial", Block("Y", (IterVar(vi, 8), IterVar(vj, 4)), (i, j),
    ...     BufferStore(Y, A[vi, vj] * 2.0, (vi, vj))))
    >>> consume = For(jj, 4, "serial", Block("C", (IterVar(wi, 8), IterVar(wj, 4)), (i, jj),
    ...     BufferStore(C, Y[wi, wj] + 1.0, (wi, wj))))
    >>> func = PrimFunc("f", (A, C), Block("root", (), (), For(i, 8, "serial",
    ...     SeqStmt((produce, consume))), alloc_buffers=(Y,)))
    >>> lowered = compact_buffer_allocation(func)
    >>> print("\\n".join(lowered.script().splitlines()[6:11]))
        for i in range(8):
            with T.block("Y_alloc"):
                T.reads(A[i, 0:4])
                T.writes(C[i, 0:4])
                Y = T.alloc_buffer((1, 4))
    >>> [line.strip() for line in lowered.script().splitlines() if "Y[" in line][-1]
    'C[wi, wj] = Y[wi - i, wj] + T.float32(1)'
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..buffer import Buffer, shares_storage
from ..expr import BufferLoad, IntImm, PrimExpr, Var, const
from ..functor import Mutator, iter_exprs, iter_stmts, stmt_exprs, substitute
from ..intset import (
    EMPTY,
    LAZY_CONDITIONAL,
    eval_interval,
    interval_union,
    narrow,
    negate,
    smax,
)
from ..simplify import int_range, simplify
from ..stmt import Block, BufferStore, Evaluate, For, IfThenElse, PrimFunc, SeqStmt, Stmt

__all__ = ["compact_buffer_allocation"]

Pos = tuple[int, ...]  # child steps from the function's root block to a node



def _children(e: PrimExpr) -> list[PrimExpr]:
    """Direct sub-expressions of ``e`` (the first level of ``iter_exprs``)."""
    return [x for x in vars(e).values() if isinstance(x, PrimExpr)] + [
        y for x in vars(e).values() if isinstance(x, tuple) for y in x if isinstance(y, PrimExpr)
    ]


@dataclass(frozen=True)
class _Scope:
    """A loop or block on the path to an access, identified by its position."""

    pos: Pos
    node: For | Block


@dataclass
class _Access:
    indices: tuple[PrimExpr, ...] | None  # in loop variables only; None: LCA constraint only
    scopes: tuple[_Scope, ...]  # enclosing scopes, root block first
    conds: tuple[PrimExpr, ...] = ()  # conditions that hold where it happens (in loop vars)


@dataclass
class _Plan:
    """Where a buffer goes and how its indices shift."""

    old: Buffer
    new: Buffer
    site: _Scope
    mins: tuple[PrimExpr, ...]
    # per-thread buffers: thread tag -> the variable that stands for that thread index in
    # ``mins`` (each access substitutes the loop bound to the tag around it)
    canon: dict[str, Var] = field(default_factory=dict)


@dataclass
class _Collector:
    """One walk over a function: allocation sites and every access of every buffer."""

    sites: dict[Buffer, _Scope] = field(default_factory=dict)
    order: list[Buffer] = field(default_factory=list)
    accesses: dict[Buffer, list[_Access]] = field(default_factory=dict)

    def run(self, root: Block) -> None:
        self.block(root, (), (), {})

    # expressions are evaluated in the innermost enclosing scope, under the conditions
    # (block predicates, if-branches, if_then_else/Select sides) that hold there
    def loads(self, e: PrimExpr, scopes, env, conds: tuple = ()) -> None:
        if isinstance(e, BufferLoad):
            for i in e.indices:
                self.loads(i, scopes, env, conds)
            self.add(e.buffer, e.indices, scopes, env, conds)
        elif LAZY_CONDITIONAL and isinstance(e, LAZY_CONDITIONAL):
            c = substitute(e.condition, env)
            self.loads(e.condition, scopes, env, conds)
            self.loads(e.true_value, scopes, env, conds + (c,))
            self.loads(e.false_value, scopes, env, conds + (negate(c),))
        else:
            for x in _children(e):
                self.loads(x, scopes, env, conds)

    def add(self, buf: Buffer, indices, scopes, env, conds: tuple = ()) -> None:
        subst = tuple(substitute(i, env) for i in indices)
        self.accesses.setdefault(buf, []).append(_Access(subst, scopes, conds))

    def stmt(self, s: Stmt, pos: Pos, scopes: tuple[_Scope, ...], env, conds: tuple = ()) -> None:
        if isinstance(s, For):
            self.stmt(s.body, pos + (0,), scopes + (_Scope(pos, s),), env, conds)
        elif isinstance(s, SeqStmt):
            for k, x in enumerate(s.stmts):
                self.stmt(x, pos + (k,), scopes, env, conds)
        elif isinstance(s, Block):
            for v in s.iter_values:
                self.loads(v, scopes, env, conds)
            self.loads(s.predicate, scopes, env, conds)
            self.block(s, pos, scopes, env, conds)
        elif isinstance(s, BufferStore):
            self.loads(s.value, scopes, env, conds)
            for i in s.indices:
                self.loads(i, scopes, env, conds)
            self.add(s.buffer, s.indices, scopes, env, conds)
        elif isinstance(s, IfThenElse):
            self.loads(s.condition, scopes, env, conds)
            c = substitute(s.condition, env)
            self.stmt(s.then_case, pos + (0,), scopes, env, conds + (c,))
            if s.else_case is not None:
                self.stmt(s.else_case, pos + (1,), scopes, env, conds + (negate(c),))
        elif isinstance(s, Evaluate):
            self.loads(s.value, scopes, env, conds)
        else:  # statements this pass does not know: their buffers stay as they are
            for x in iter_stmts(s):
                for e in stmt_exprs(x):
                    for ld in iter_exprs(e):
                        if isinstance(ld, BufferLoad):
                            self.accesses.setdefault(ld.buffer, []).append(_Access(None, ()))

    def block(self, b: Block, pos: Pos, outer: tuple[_Scope, ...], env, conds=()) -> None:
        scope = _Scope(pos, b)
        scopes = outer + (scope,)
        inner = dict(env)
        for iv, v in zip(b.iter_vars, b.iter_values):
            inner[iv.var] = substitute(v, env)
        for buf in b.alloc_buffers:
            self.sites[buf] = scope
            self.order.append(buf)
        self._reduction_constraint(b, outer, inner)
        if not (isinstance(b.predicate, IntImm) and b.predicate.value):
            conds = conds + (substitute(b.predicate, env),)
        if b.init is not None:
            self.stmt(b.init, pos + (1,), scopes, inner, conds)
        self.stmt(b.body, pos + (0,), scopes, inner, conds)

    def _reduction_constraint(self, b: Block, outer: tuple[_Scope, ...], inner) -> None:
        """A reduction accumulates into what it writes across the iterations of the loops
        its reduce iter vars are bound to: keep those buffers above the outermost one.
        An opaque iter var (``rolling_buffer``'s rolling axis) carries values from one
        iteration of its loops to the next: keep everything the block reads and writes
        above the outermost of those loops (TVM's LCA detector does the same)."""
        self._keep_above(b, outer, inner, "R", {r.buffer for r in b.writes or ()} | {
            s.buffer for s in iter_stmts(b) if isinstance(s, BufferStore)})
        self._keep_above(b, outer, inner, "O", {r.buffer for r in (*(b.reads or ()),
                                                                   *(b.writes or ()))})

    def _keep_above(self, b: Block, outer: tuple[_Scope, ...], inner, kind: str,
                    buffers: set[Buffer]) -> None:
        loop_vars: set[Var] = set()
        for iv in b.iter_vars:
            if iv.kind == kind:
                loop_vars |= {x for x in iter_exprs(inner[iv.var]) if isinstance(x, Var)}
        depth = next(
            (
                k
                for k, sc in enumerate(outer)
                if isinstance(sc.node, For) and sc.node.loop_var in loop_vars
            ),
            None,
        )
        if depth is None:
            return
        for buf in buffers:
            self.accesses.setdefault(buf, []).append(_Access(None, outer[:depth]))


# ---------------------------------------------------------------------------
# planning


def _lca(chains: list[tuple[_Scope, ...]]) -> tuple[_Scope, ...]:
    common = chains[0]
    for c in chains[1:]:
        n = 0
        while n < len(common) and n < len(c) and common[n].pos == c[n].pos:
            n += 1
        common = common[:n]
    return common


def _has_load(e: PrimExpr) -> bool:
    return any(isinstance(x, BufferLoad) for x in iter_exprs(e))


def _plan(buf: Buffer, site: _Scope, accesses: list[_Access], per_thread_local: bool = False
          ) -> _Plan | None:
    chain = _lca([a.scopes for a in accesses])
    depth = next((k for k, sc in enumerate(chain) if sc.pos == site.pos), None)
    if depth is None:  # a reduction needs the buffer above its block: leave it there
        return None
    # threads that share this memory: allocate above their loops. The region is still the
    # one used inside the LCA, those thread loops relaxed (TVM allocates at the LCA and
    # relaxes them, NeedRelaxThread), the other loops down to the LCA fixed: no value
    # lives from one of their iterations to the next.
    shared = [
        sc for sc in chain[depth + 1:]
        if isinstance(sc.node, For) and sc.node.kind == "thread_binding"
        and shares_storage(buf.scope, sc.node.thread_tag or "")
    ]
    where = chain[chain.index(shared[0]) - 1] if shared else chain[-1]
    n = len(chain)
    threads = {sc.node.loop_var: (const(sc.node.min), const(sc.node.end - 1)) for sc in shared}
    outer = {
        sc.node.loop_var: (sc.node.min, sc.node.end - 1)
        for sc in chain
        if isinstance(sc.node, For) and sc.node.loop_var not in threads
    }
    canon = _per_thread_indices(buf, accesses, n) if per_thread_local else {}
    for var, extent in canon.values():
        outer[var] = (0, extent - 1)
    box: list = [EMPTY for _ in buf.shape]
    for a in accesses:
        if a.indices is None:
            continue
        if any(isinstance(sc.node, For) and not isinstance(sc.node.extent, int)
               for sc in a.scopes[n:]):
            return None  # relaxing a loop of symbolic extent: keep the buffer as it is
        inner = dict(threads)
        rename: dict[Var, PrimExpr] = {}
        for sc in a.scopes[n:]:
            if not isinstance(sc.node, For):
                continue
            if sc.node.kind == "thread_binding" and sc.node.thread_tag in canon:
                rename[sc.node.loop_var] = canon[sc.node.thread_tag][0]
            else:
                inner[sc.node.loop_var] = (const(sc.node.min), const(sc.node.end - 1))
        if rename:
            a = _Access(tuple(substitute(i, rename) for i in a.indices), a.scopes,
                        tuple(substitute(c, rename) for c in a.conds))
        bounds = dict(outer)
        bounds.update({v: (lo.value, hi.value) for v, (lo, hi) in inner.items()})
        dom = inner
        for c in a.conds:
            dom = narrow(c, dom, outer)
            if dom is EMPTY:
                break
        if dom is EMPTY:  # never happens
            continue
        for d, index in enumerate(a.indices):
            iv = eval_interval(index, dom, outer)
            if iv is None or any(_has_load(x) for x in iv):
                return None
            box[d] = interval_union(box[d], iv, outer)
    mins, shape = [], []
    for d, iv in enumerate(box):
        if iv is None:
            return None
        if iv is EMPTY:  # only accessed where it never happens: keep the dimension
            mins.append(const(0))
            shape.append(buf.shape[d])
            continue
        # TVM's collect_inbound: the start is clipped at 0, the extent at the dimension
        lo = smax(iv[0], const(0), outer)
        ext_e = simplify(iv[1] - iv[0] + 1, outer)
        ext = ext_e.value if isinstance(ext_e, IntImm) else int_range(ext_e, outer)[1]
        full = isinstance(buf.shape[d], int) and ext is not None and ext >= buf.shape[d]
        if ext is None or full or ext <= 0:
            mins.append(const(0))
            shape.append(buf.shape[d])
        else:
            mins.append(simplify(lo, outer))
            shape.append(ext)
    if tuple(shape) == buf.shape:  # nothing to shrink: the buffer stays where it is
        return None
    new = buf if tuple(shape) == buf.shape else buf.with_(shape=tuple(shape))
    return _Plan(buf, new, where, tuple(mins), {t: v for t, (v, _) in canon.items()})


def _per_thread_indices(buf: Buffer, accesses: list[_Access], n: int
                        ) -> dict[str, tuple[Var, int]]:
    """For a buffer each thread has its own copy of (``local``), the thread loops below
    the allocation point are not relaxed: every loop bound to one thread axis stands for
    the same thread index (TVM unifies them, UnifyThreadBinding, before compacting), so
    the copy only needs what one thread touches. Returns tag -> (a variable standing for
    that index, the largest extent), for the tags every access is under; empty where the
    buffer is shared or an access is outside such loops."""
    if shares_storage(buf.scope, "threadIdx.x"):
        return {}
    tags: dict[str, int] | None = None
    for a in accesses:
        if a.indices is None:
            continue
        mine: dict[str, int] = {}
        for sc in a.scopes[n:]:
            node = sc.node
            if isinstance(node, For) and node.kind == "thread_binding":
                if not isinstance(node.extent, int) or node.min:
                    return {}
                tag = node.thread_tag or ""
                mine[tag] = max(mine.get(tag, 0), node.extent)
        if tags is None:
            tags = mine
        else:
            tags = {t: max(e, mine[t]) for t, e in tags.items() if t in mine}
    if not tags:
        return {}
    return {t: (Var(t.replace(".", "_"), "int32"), e) for t, e in tags.items()}


# ---------------------------------------------------------------------------
# rewriting


class _Indices(Mutator):
    """Point loads/stores of planned buffers at the new buffers, shifted by the mins."""

    def __init__(self, plans: dict[Buffer, _Plan]):
        self.plans = plans
        self.threads: dict[str, Var] = {}  # thread tag -> the loop bound to it around here

    def _shift(self, buf: Buffer, indices: tuple[PrimExpr, ...]):
        plan = self.plans[buf]
        mins = plan.mins
        if plan.canon:
            here = {v: self.threads[t] for t, v in plan.canon.items() if t in self.threads}
            mins = tuple(substitute(m, here) for m in mins)
        out = tuple(
            i if isinstance(m, IntImm) and m.value == 0 else simplify(i - m)
            for i, m in zip(indices, mins)
        )
        return plan.new, out

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        e = super().visit_expr(e)
        if isinstance(e, BufferLoad) and e.buffer in self.plans:
            buf, idx = self._shift(e.buffer, e.indices)
            return BufferLoad(buf, idx)
        return e

    def visit_stmt(self, s: Stmt) -> Stmt:
        s = super().visit_stmt(s)
        if isinstance(s, BufferStore) and s.buffer in self.plans:
            buf, idx = self._shift(s.buffer, s.indices)
            return BufferStore(buf, s.value, idx)
        return s


class _Rewriter:
    """Rebuild the function along the original positions: move allocations, wrap loop
    bodies that receive buffers in allocation blocks, shift indices."""

    def __init__(self, plans: dict[Buffer, _Plan], order: list[Buffer], taken: set[str]):
        self.plans = plans
        self.exprs = _Indices(plans)
        self.incoming: dict[Pos, list[Buffer]] = {}
        for buf in order:
            if buf in plans:
                self.incoming.setdefault(plans[buf].site.pos, []).append(plans[buf].new)
        self.taken = taken

    def expr(self, e: PrimExpr) -> PrimExpr:
        return self.exprs.visit_expr(e)

    def stmt(self, s: Stmt, pos: Pos) -> Stmt:
        if isinstance(s, For):
            threads = self.exprs.threads
            if s.kind == "thread_binding":
                self.exprs.threads = {**threads, s.thread_tag or "": s.loop_var}
            try:
                body = self.stmt(s.body, pos + (0,))
            finally:
                self.exprs.threads = threads
            bufs = self.incoming.get(pos)
            if bufs:
                body = Block(self._name(bufs), (), (), body, alloc_buffers=tuple(bufs))
            return s if body is s.body else replace(s, body=body)
        if isinstance(s, SeqStmt):
            stmts = tuple(self.stmt(x, pos + (k,)) for k, x in enumerate(s.stmts))
            same = all(a is b for a, b in zip(stmts, s.stmts))
            return s if same else SeqStmt(stmts)
        if isinstance(s, Block):
            return self.block(s, pos)
        if isinstance(s, IfThenElse):
            c = self.expr(s.condition)
            t = self.stmt(s.then_case, pos + (0,))
            f = self.stmt(s.else_case, pos + (1,)) if s.else_case is not None else None
            if c is s.condition and t is s.then_case and f is s.else_case:
                return s
            return IfThenElse(c, t, f)
        return self.exprs.visit_stmt(s)

    def block(self, b: Block, pos: Pos) -> Block:
        values = tuple(self.expr(v) for v in b.iter_values)
        pred = self.expr(b.predicate)
        init = self.stmt(b.init, pos + (1,)) if b.init is not None else None
        body = self.stmt(b.body, pos + (0,))
        allocs = []
        for buf in b.alloc_buffers:
            plan = self.plans.get(buf)
            if plan is None:
                allocs.append(buf)
            elif plan.site.pos == pos:
                allocs.append(plan.new)
        staying = {id(x) for x in allocs}
        allocs += [x for x in self.incoming.get(pos, ()) if id(x) not in staying]
        unchanged = (
            all(a is v for a, v in zip(values, b.iter_values))
            and pred is b.predicate
            and init is b.init
            and body is b.body
            and len(allocs) == len(b.alloc_buffers)
            and all(a is x for a, x in zip(allocs, b.alloc_buffers))
        )
        if unchanged:
            return b
        return replace(
            b,
            iter_values=values,
            predicate=pred,
            init=init,
            body=body,
            alloc_buffers=tuple(allocs),
            reads=None,
            writes=None,
        )

    def _name(self, bufs: list[Buffer]) -> str:
        base = "_".join(b.name for b in bufs) + "_alloc"
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name


def compact_buffer_allocation(func: PrimFunc, *, per_thread_local: bool = False) -> PrimFunc:
    """``func`` with every allocated buffer moved to the innermost loop/block that holds
    all its accesses and shrunk to the region accessed there (module docstring).
    Parameters never change; a function with nothing to compact is returned as is.
    ``per_thread_local=True`` (for a GPU, where each thread has its own ``local``
    buffers) shrinks a ``local`` buffer to one thread's part even where thread loops
    below its allocation point index it (each loop bound to an axis standing for the
    same thread index); on the CPU those loops run in turn and share the buffer.

    >>> import workbench as wb
    >>> func = wb.workloads.mm_relu(16, 16, 16)   # Y is used by two separate loop nests
    >>> compact_buffer_allocation(func) is func
    True
    """
    collector = _Collector()
    collector.run(func.body)
    # a buffer viewed through a block's match_buffer keeps its place and shape
    viewed = {
        m.source.buffer
        for s in iter_stmts(func.body)
        if isinstance(s, Block)
        for m in s.match_buffers
    }
    plans: dict[Buffer, _Plan] = {}
    for buf in collector.order:
        accesses = collector.accesses.get(buf)
        if not accesses or buf in viewed:
            continue
        plan = _plan(buf, collector.sites[buf], accesses, per_thread_local)
        if plan is not None:
            plans[buf] = plan
    if not plans:
        return func
    taken = {s.name for s in iter_stmts(func.body) if isinstance(s, Block)}
    body = _Rewriter(plans, collector.order, taken).block(func.body, ())
    return func.with_body(body)
