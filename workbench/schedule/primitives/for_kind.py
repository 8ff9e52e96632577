"""Loop kinds: parallel, vectorize, unroll, bind.

``parallel``, ``vectorize`` and ``bind`` need a data-parallel loop: every block
under it may use the loop variable only in the bindings of spatial iter vars,
otherwise two iterations would update the same reduction element at once.
``unroll`` has no such condition.

Before and after ``parallel(i)``::

    for i, j in T.grid(128, 128):          for i in T.parallel(128):
                                               for j in range(128):

Before and after ``bind(i_0, "blockIdx.x")``::

    for i_0 in range(32):                  for i_0 in T.thread_binding(32, thread="blockIdx.x"):

The C target runs thread-bound loops as ordinary serial loops, so a GPU schedule
can be checked numerically on a CPU.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import THREAD_TAGS, Block, For, PrimFunc, Var
from ...ir.functor import iter_stmts, uses_var
from ..errors import BoundLoopError, NotDataParallelError, ScheduleError
from ._common import find_loop_path, replace_path


class InvalidThreadAxisError(ScheduleError, ValueError):
    """``bind`` to a thread axis that is not one of ``THREAD_TAGS``."""


class NotSerialLoopError(ScheduleError):
    """``bind`` of a loop that is already parallel, vectorized or unrolled."""


class DuplicateThreadBindingError(ScheduleError):
    """``bind`` to an axis that an enclosing or enclosed loop is already bound to."""


_KIND_OF = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}


def _check_data_parallel(primitive: str, func: PrimFunc, loop: For) -> None:
    for s in iter_stmts(loop.body, enter_blocks=False):
        if not isinstance(s, Block):
            continue
        for iv, value in zip(s.iter_vars, s.iter_values, strict=True):
            if iv.kind != "S" and uses_var(value, loop.loop_var):
                verb = {
                    "parallel": "parallelized",
                    "vectorize": "vectorized",
                    "bind": "bound to a thread axis (there is no cross-thread reduction)",
                }[primitive]
                raise NotDataParallelError(
                    primitive,
                    f'loop "{loop.loop_var.name}" is bound to the reduction iter var '
                    f'"{iv.var.name}" of block "{s.name}"; only data-parallel loops can be '
                    f"{verb}",
                    func,
                    loops=[loop.loop_var],
                    blocks=[s.name],
                )


def set_loop_kind(func: PrimFunc, primitive: str, loop_var: Var) -> PrimFunc:
    """Mark a loop parallel / vectorized / unrolled (``primitive`` names which)."""
    path = find_loop_path(func, primitive, loop_var)
    loop: For = path[-1]  # type: ignore[assignment]
    if loop.kind == "thread_binding":
        raise BoundLoopError(
            primitive,
            f'loop "{loop_var.name}" is bound to {loop.thread_tag}; it cannot also be '
            f"{_KIND_OF[primitive]}",
            func,
            loops=[loop_var],
        )
    if primitive in ("parallel", "vectorize"):
        _check_data_parallel(primitive, func, loop)
    kind = _KIND_OF[primitive]
    if loop.kind == kind:
        return func
    return replace_path(func, path, replace(loop, kind=kind))


def bind(func: PrimFunc, loop_var: Var, thread_axis: str) -> PrimFunc:
    """Bind a loop to a GPU thread axis (``blockIdx``/``threadIdx``/``vthread`` x/y/z).

    Conditions, as in TVM: the axis is one of ``THREAD_TAGS``; the loop is
    data-parallel (TVM also lets a reduction loop go to ``threadIdx`` as a
    cross-thread reduction; that needs an all-reduce lowering this library does not
    have, so it is refused here). Beyond TVM, which overwrites the loop kind: the loop
    must be serial (binding a loop already bound to the same axis changes nothing),
    and no loop enclosing it or enclosed by it may be bound to the same axis.

    The C target runs thread-bound loops as ordinary serial loops, so a bound
    schedule can be verified numerically on a CPU.

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
    if loop.kind == "thread_binding":
        if loop.thread_tag == thread_axis:
            return func
        raise BoundLoopError(
            "bind",
            f'loop "{name}" is already bound to {loop.thread_tag}; it cannot also be bound '
            f"to {thread_axis}",
            func,
            loops=[loop_var],
        )
    if loop.kind != "serial":
        raise NotSerialLoopError(
            "bind",
            f'loop "{name}" is {loop.kind}; only a serial loop can be bound to {thread_axis}',
            func,
            loops=[loop_var],
        )
    _check_data_parallel("bind", func, loop)
    nested = [s for s in path[:-1] if isinstance(s, For)]
    nested += [s for s in iter_stmts(loop.body) if isinstance(s, For)]
    for other in nested:
        if other.kind == "thread_binding" and other.thread_tag == thread_axis:
            where = "encloses" if other in path else "is inside"
            raise DuplicateThreadBindingError(
                "bind",
                f'cannot bind loop "{name}" to {thread_axis}: loop "{other.loop_var.name}", '
                f"which {where} it, is already bound to {thread_axis}",
                func,
                loops=[loop_var, other.loop_var],
            )
    return replace_path(func, path, replace(loop, kind="thread_binding", thread_tag=thread_axis))
