"""Loop kinds: parallel, vectorize, unroll.

``parallel`` and ``vectorize`` need a data-parallel loop: every block under it may
use the loop variable only in the bindings of spatial iter vars, otherwise two
iterations would update the same reduction element at once. ``unroll`` has no
such condition.

Before and after ``parallel(i)``::

    for i, j in T.grid(128, 128):          for i in T.parallel(128):
                                               for j in range(128):
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, For, PrimFunc, Var
from ...ir.functor import iter_stmts, uses_var
from ..errors import BoundLoopError, NotDataParallelError
from ._common import find_loop_path, replace_path

_KIND_OF = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}


def _check_data_parallel(primitive: str, func: PrimFunc, loop: For) -> None:
    for s in iter_stmts(loop.body, enter_blocks=False):
        if not isinstance(s, Block):
            continue
        for iv, value in zip(s.iter_vars, s.iter_values, strict=True):
            if iv.kind != "S" and uses_var(value, loop.loop_var):
                verb = {"parallel": "parallelized", "vectorize": "vectorized"}[primitive]
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
