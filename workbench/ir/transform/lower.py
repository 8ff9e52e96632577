"""The lowering pipeline ``wb.build`` runs before code generation."""

from __future__ import annotations

from ..stmt import IRModule, PrimFunc
from .compact import compact_buffer_allocation

__all__ = ["lower"]


def _as_module(x: object) -> IRModule:
    if isinstance(x, IRModule):
        return x
    if isinstance(x, PrimFunc):
        return IRModule.from_funcs(x)
    mod = getattr(x, "mod", None)  # a Schedule
    if isinstance(mod, (IRModule, PrimFunc)):
        return _as_module(mod)
    raise TypeError(
        f"lower: expected a PrimFunc, an IRModule or a Schedule, got {type(x).__name__}"
    )


def lower(mod_or_func: IRModule | PrimFunc, *, gpu: bool = False) -> IRModule:
    """The module as the code generator sees it, after TVM-style lowering passes.

    Today one pass runs on every function:
    :func:`~workbench.ir.transform.compact_buffer_allocation`, which moves each
    intermediate/cache buffer to the innermost loop that holds all its accesses and
    shrinks it to the tile used there (TVM's CompactBufferAllocation). Parameters never
    change, so the lowered module takes the same arrays. Accepts a PrimFunc, an IRModule
    or a Schedule; the input is not modified (IR is immutable). ``gpu=True`` (what the
    GPU build uses) gives each thread its own tile of a ``local`` buffer; on the CPU,
    where thread-bound loops run one after the other, such buffers keep every thread's
    part.

    >>> import workbench as wb
    >>> func = wb.workloads.mm_relu(16, 16, 16)
    >>> lowered = wb.lower(func)
    >>> lowered.names
    ['mm_relu']
    >>> [x.strip() for x in lowered.script().splitlines() if "alloc_buffer" in x]  # 2 nests
    ['Y = T.alloc_buffer((16, 16))']
    """
    mod = _as_module(mod_or_func)
    items = []
    changed = False
    for name, func in mod.functions:
        new = compact_buffer_allocation(func, per_thread_local=gpu)
        changed = changed or new is not func
        items.append((name, new))
    return IRModule(tuple(items)) if changed else mod
