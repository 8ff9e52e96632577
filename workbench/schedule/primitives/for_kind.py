"""Loop kinds: parallel, vectorize, unroll, bind.

``parallel``, ``vectorize`` and ``bind`` follow TVM's two conditions:

1. *Compact data flow*: every block directly under the loop (not nested in another
   block) is a *complete* block (only spatial iter vars, reads no buffer it writes) or
   a *reduction* block (has an ``init``, affine bindings, its reduce iter vars do not
   index what it writes) -- so an opaque block that updates a buffer in place
   (``A[i + 1] = A[i + 1] + A[i]``) or a reduction with non-affine bindings cannot be
   parallelized or vectorized.
2. *Iter var kinds*: in every block under the loop (nested ones included, blocks in an
   ``init`` excepted), an iter var whose binding uses the loop variable is spatial; a
   reduce iter var may use it only for ``bind`` to ``threadIdx.x/y/z`` (a cross-thread
   reduction, which TVM lowers to an all-reduce).

Beyond TVM, condition 1 also accepts the *update block* that ``decompose_reduction``
leaves behind (no ``init``, affine bindings, reads what it writes only at the very
element it writes, which every spatial iter var indexes): TVM refuses ``parallel`` of
the spatial loops over it, although its iterations touch different elements, because
TVM's own flow decomposes reductions after parallelizing. ``unroll`` has no condition.

A loop of any kind can be re-kinded, as in TVM: ``parallel`` of a vectorized or
thread-bound loop makes it parallel (the binding goes), ``bind`` of a parallel or
already bound loop binds it to the new axis. As in TVM, a loop may be bound to an axis
that an enclosing or enclosed loop is bound to (a cooperative fetch: both loops read the
same thread index on a GPU).

Before and after ``parallel(i)``::

    for i, j in T.grid(128, 128):          for i in T.parallel(128):
                                               for j in range(128):

Before and after ``bind(i_0, "blockIdx.x")``::

    for i_0 in range(32):                  for i_0 in T.thread_binding(32, thread="blockIdx.x"):

The C target runs thread-bound loops as ordinary serial loops, so a GPU schedule
(cross-thread reductions included) can be checked numerically on a CPU;
:func:`cross_thread_reductions` lists the reductions a GPU target must lower to an
all-reduce.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import THREAD_TAGS, Block, For, IfThenElse, PrimFunc, SeqStmt, Stmt, Var
from ...ir.analysis import block_path, iter_blocks, loops_above
from ...ir.functor import expr_vars, uses_var
from ...ir.simplify import struct_key
from ..errors import NotDataParallelError, ScheduleError
from ._common import find_block_path, find_loop_path, replace_path
from .affine_binding import affine_problem, loop_domain
from .loops import blocks_under


class InvalidThreadAxisError(ScheduleError, ValueError):
    """``bind`` to a thread axis that is not one of ``THREAD_TAGS``."""


class NotCompactDataflowError(ScheduleError):
    """``parallel``/``vectorize``/``bind``: a block directly under the loop is neither a
    complete block nor a reduction block (it updates a buffer in place, or it is a
    reduction whose bindings are not affine or whose reduce iter var indexes its
    output), so the loop's iterations are not independent."""


_KIND_OF = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}
_VERB = {"parallel": "parallelized", "vectorize": "vectorized", "bind": "bound to a thread axis"}
_CROSS_THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


# ---------------------------------------------------------------------------
# condition 1: compact data flow


def _written_by_children(blocks: list[Block]) -> dict:
    """How many blocks write each buffer among the child blocks of ``blocks`` (TVM's
    local dominance looks one scope down)."""
    count: dict = {}
    for b in blocks:
        for child, _ in blocks_under(b.body):
            for w in child.writes or ():
                count[w.buffer] = count.get(w.buffer, 0) + 1
    return count


def _scope_domain(func: PrimFunc, block: Block) -> dict[Var, object]:
    path = find_block_path(func, "parallel", block.name)
    return loop_domain(loops_above(path))


def _dataflow_problem(func: PrimFunc, block: Block, writers: dict) -> str | None:
    """Why ``block`` is neither complete nor a reduction block (None if it is one)."""
    written = {w.buffer for w in block.writes or ()}
    if any(writers.get(b, 1) != 1 for b in written):
        return "another block inside it writes the same buffer"
    overlap = [r for r in block.reads or () if r.buffer in written]
    spatial_only = all(iv.kind == "S" for iv in block.iter_vars)
    if spatial_only and not overlap:
        return None  # a complete block
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "R"}
    for w in block.writes or ():
        used = sorted(v.name for mn, _ in w.region for v in expr_vars(mn) & reduce_vars)
        if used:
            return f'its reduce iter var "{used[0]}" indexes the buffer it writes'
    if block.init is None:
        if not block.iter_vars:
            return "it reads the buffer it writes"
        if not _updates_own_element(block):
            return "it reads the buffer it writes at other elements (an in-place update)"
    problem = affine_problem(list(block.iter_values), _scope_domain(func, block),
                             block.predicate)
    if problem is not None:
        return f"its bindings are not affine ({problem})"
    return None


def _updates_own_element(block: Block) -> bool:
    """Reads of a written buffer are exactly the written element, which every spatial
    iter var indexes (a decomposed reduction's update block, an in-place update)."""
    spatial = {iv.var for iv in block.iter_vars if iv.kind == "S"}
    regions = {}
    for w in block.writes or ():
        key = tuple((struct_key(mn), struct_key(ext)) for mn, ext in w.region)
        if w.buffer in regions and regions[w.buffer] != key:
            return False
        regions[w.buffer] = key
        indexed = set()
        for mn, _ in w.region:
            indexed |= expr_vars(mn)
        if not spatial <= indexed:
            return False
    for r in block.reads or ():
        if r.buffer in regions:
            key = tuple((struct_key(mn), struct_key(ext)) for mn, ext in r.region)
            if key != regions[r.buffer]:
                return False
    return True


def _check_compact_dataflow(primitive: str, func: PrimFunc, loop: For) -> None:
    children = [b for b, _ in blocks_under(loop.body)]
    writers = _written_by_children(children)
    for block in children:
        problem = _dataflow_problem(func, block, writers)
        if problem is not None:
            raise NotCompactDataflowError(
                primitive,
                f'loop "{loop.loop_var.name}" cannot be {_VERB[primitive]}: block '
                f'"{block.name}" under it is neither a complete nor a reduction block '
                f"({problem})",
                func,
                loops=[loop.loop_var],
                blocks=[block.name],
            )


# ---------------------------------------------------------------------------
# condition 2: iter var kinds


def _blocks_not_in_init(s: Stmt):
    """Every block under ``s`` (nested ones too), skipping those inside an ``init``."""
    if isinstance(s, Block):
        yield s
        yield from _blocks_not_in_init(s.body)
    elif isinstance(s, For):
        yield from _blocks_not_in_init(s.body)
    elif isinstance(s, SeqStmt):
        for x in s.stmts:
            yield from _blocks_not_in_init(x)
    elif isinstance(s, IfThenElse):
        yield from _blocks_not_in_init(s.then_case)
        if s.else_case is not None:
            yield from _blocks_not_in_init(s.else_case)
    else:
        body = getattr(s, "body", None)  # LetStmt and other wrappers
        if isinstance(body, Stmt):
            yield from _blocks_not_in_init(body)


def _check_iter_kinds(
    primitive: str, func: PrimFunc, loop: For, thread_axis: str | None = None
) -> None:
    cross_thread = thread_axis in _CROSS_THREAD_AXES
    for block in _blocks_not_in_init(loop.body):
        for iv, value in zip(block.iter_vars, block.iter_values, strict=True):
            if iv.kind == "S" or not uses_var(value, loop.loop_var):
                continue
            if cross_thread:
                continue  # a cross-thread reduction (an all-reduce on a GPU)
            how = (
                f"a reduction loop can be bound to threadIdx.x/y/z only (a cross-thread "
                f"reduction), not to {thread_axis}"
                if primitive == "bind"
                else f"only data-parallel loops can be {_VERB[primitive]}"
            )
            raise NotDataParallelError(
                primitive,
                f'loop "{loop.loop_var.name}" is bound to the reduction iter var '
                f'"{iv.var.name}" of block "{block.name}"; {how}',
                func,
                loops=[loop.loop_var],
                blocks=[block.name],
            )


# ---------------------------------------------------------------------------
# the primitives


def set_loop_kind(func: PrimFunc, primitive: str, loop_var: Var) -> PrimFunc:
    """Mark a loop parallel / vectorized / unrolled (``primitive`` names which).

    Any loop kind may be changed, as in TVM (a thread-bound loop loses its binding).
    ``parallel`` and ``vectorize`` check the two conditions of the module docstring;
    ``unroll`` checks nothing.

    >>> import workbench as wb
    >>> from workbench.schedule.primitives.for_kind import set_loop_kind
    >>> func = wb.workloads.matmul(16, 16, 16)
    >>> i = func.body.body.loop_var
    >>> set_loop_kind(func, "parallel", i).body.body.kind
    'parallel'
    """
    path = find_loop_path(func, primitive, loop_var)
    loop: For = path[-1]  # type: ignore[assignment]
    if primitive in ("parallel", "vectorize"):
        _check_compact_dataflow(primitive, func, loop)
        _check_iter_kinds(primitive, func, loop)
    kind = _KIND_OF[primitive]
    if loop.kind == kind:
        return func
    return replace_path(func, path, replace(loop, kind=kind, thread_tag=None))


def bind(func: PrimFunc, loop_var: Var, thread_axis: str) -> PrimFunc:
    """Bind a loop to a GPU thread axis (``blockIdx``/``threadIdx``/``vthread`` x/y/z).

    Conditions, as in TVM: the axis is one of ``THREAD_TAGS``; every block under the
    loop is complete or a reduction block; the loop feeds only spatial iter vars, or
    also reduce iter vars when the axis is ``threadIdx.x/y/z`` (a cross-thread
    reduction: on a GPU the threads of the block combine their partial results, see
    :func:`cross_thread_reductions`). The loop may already be parallel, vectorized,
    unrolled or bound to another axis (it is re-bound, as in TVM).

    A loop may be bound to an axis that an enclosing loop is already bound to: that is
    the cooperative fetch every GPU schedule uses to load a shared tile with all the
    threads of a block (fuse the cache block's loops, split by the thread count, bind the
    inner loop to ``threadIdx.x`` again). As in TVM, the inner loop's variable is the
    same thread index as the outer one's; a GPU build loads the tile between two
    ``__syncthreads()``. The C target runs every thread-bound loop as an ordinary serial
    loop (a nested one in full, as if one thread did all of the fetch), so a bound
    schedule can be checked numerically on a CPU; ``wb.build(..., target="cuda",
    emulate=True)`` runs it with the GPU's semantics.

    >>> import workbench as wb
    >>> from workbench.schedule.primitives.for_kind import bind
    >>> func = wb.workloads.matmul(64, 64, 64)
    >>> i = func.body.body.loop_var
    >>> print(bind(func, i, "blockIdx.x").script().splitlines()[6].strip())
    for i in T.thread_binding(64, thread="blockIdx.x"):
    """
    path = find_loop_path(func, "bind", loop_var)
    loop: For = path[-1]  # type: ignore[assignment]
    name = loop_var.name
    if not isinstance(thread_axis, str) or thread_axis not in THREAD_TAGS:
        raise InvalidThreadAxisError(
            "bind",
            f'cannot bind loop "{name}" to {thread_axis!r}: the thread axis must be one of '
            f"{', '.join(THREAD_TAGS)}",
            func,
            loops=[loop_var],
        )
    if loop.kind == "thread_binding" and loop.thread_tag == thread_axis:
        return func
    _check_compact_dataflow("bind", func, loop)
    _check_iter_kinds("bind", func, loop, thread_axis)
    return replace_path(func, path, replace(loop, kind="thread_binding", thread_tag=thread_axis))


def cross_thread_reductions(func: PrimFunc) -> list[tuple[str, tuple[Var, ...]]]:
    """The cross-thread reductions of ``func``: ``(block name, loops)`` for each block
    with a reduce iter var bound (through its binding) to loops of its scope bound to
    ``threadIdx.x/y/z``. A GPU target lowers each to an all-reduce over those loops (as
    TVM's LowerCrossThreadReduction does); the C target just runs them serially.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> sch.bind(k, "threadIdx.x")
    >>> [(b, [v.name for v in loops]) for b, loops in cross_thread_reductions(sch.func)]
    [('C', ['k'])]
    """
    out = []
    for block in iter_blocks(func.body):
        reduce_values = [v for iv, v in zip(block.iter_vars, block.iter_values, strict=True)
                         if iv.kind == "R"]
        if not reduce_values:
            continue
        path = block_path(func, block.name)
        if path is None:  # a block inside another block's init
            continue
        loops = tuple(
            lp.loop_var
            for lp in loops_above(path)
            if lp.kind == "thread_binding"
            and lp.thread_tag in _CROSS_THREAD_AXES
            and any(uses_var(v, lp.loop_var) for v in reduce_values)
        )
        if loops:
            out.append((block.name, loops))
    return out
