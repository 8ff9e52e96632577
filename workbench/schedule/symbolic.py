"""Symbolic extents reaching code written for static shapes become a ScheduleError.

A function with symbolic shapes (``A`` of shape ``(n, 128)``) has loops and iter vars
of extent ``n``. ``split``, ``fuse``, ``reorder``, loop kinds, ``bind``,
``decompose_reduction``, ``rfactor``, ``blockize`` and the annotations handle them;
where a primitive still needs a number (an IR expression used in ``if``, ``int()`` or
``range()`` raises :class:`~workbench.ir.expr.SymbolicValueError`), the Schedule
restores its state and raises :class:`SymbolicExtentError` naming the primitive and
the loops of symbolic extent involved, instead of crashing.

Every primitive handles symbolic extents today (``cache_read``/``cache_write`` copy
symbolic tiles, ``sample_perfect_tile`` tiles a symbolic loop trivially, as TVM does);
the guard is the safety net for code that would still need a number.

>>> import workbench as wb
>>> issubclass(SymbolicExtentError, wb.ScheduleError)
True
"""

from __future__ import annotations

import functools
from typing import Any

from ..ir import Block, For, PrimExpr
from ..ir.analysis import iter_blocks
from ..ir.expr import SymbolicValueError
from ..ir.functor import iter_stmts
from .errors import ScheduleError

__all__ = ["GUARDED", "SymbolicExtentError", "guard_symbolic"]


class SymbolicExtentError(ScheduleError):
    """A primitive met a loop or iter var of symbolic extent (``n``) where it can only
    work with a known number yet."""


#: The Schedule methods guarded (every primitive that transforms or samples).
GUARDED = (
    "split", "fuse", "reorder", "parallel", "vectorize", "unroll", "annotate",
    "unannotate", "compute_at", "reverse_compute_at", "compute_inline",
    "reverse_compute_inline", "cache_read", "cache_write", "set_scope", "storage_align",
    "decompose_reduction", "rfactor", "blockize", "add_unit_loop", "bind",
    "sample_perfect_tile", "sample_categorical", "sample_compute_location",
    "transform_layout", "transform_block_layout", "tile", "reindex", "pad_einsum",
)  # fmt: skip


def _symbolic_loops(sch: Any, args: tuple) -> tuple[list, list[str]]:
    """Loops of symbolic extent named by the arguments (the loops themselves, the loops
    around the blocks), else every one of the function."""
    from .trace import BlockRV, LoopRV

    func = sch.func if sch._func_name is not None else None
    loops, blocks = [], []
    for a in args:
        for rv in a if isinstance(a, (list, tuple)) else (a,):
            try:
                node = sch.get(rv) if isinstance(rv, (LoopRV, BlockRV)) else None
            except Exception:  # a stale handle: nothing to name
                node = None
            if isinstance(node, For) and isinstance(node.extent, PrimExpr):
                loops.append(node)
            elif isinstance(node, Block):
                blocks.append(node.name)
                for lrv in sch.get_loops(rv):
                    lp = sch.get(lrv)
                    if isinstance(lp.extent, PrimExpr):
                        loops.append(lp)
    if not loops and func is not None:
        loops = [s for s in iter_stmts(func.body) if isinstance(s, For)
                 and isinstance(s.extent, PrimExpr)]
    if not loops and not blocks and func is not None:
        blocks = [b.name for b in iter_blocks(func.body)
                  if any(isinstance(iv.extent, PrimExpr) for iv in b.iter_vars)]
    return loops, blocks


def _guard(name: str, method):
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        saved = (self._mod, self._trace, dict(self._rvs), self._func_name, self._rng.getstate())
        try:
            return method(self, *args, **kwargs)
        except SymbolicValueError as err:
            self._mod, self._trace, self._rvs, self._func_name = saved[:4]
            self._rng.setstate(saved[4])
            self._rvs = dict(saved[2])  # naming the loops below must not record anything
            loops, blocks = _symbolic_loops(self, args + tuple(kwargs.values()))
            self._trace, self._rvs = saved[1], saved[2]
            loops = list({id(lp): lp for lp in loops}.values())
            what = ", ".join(f'"{lp.loop_var.name}" (extent {lp.extent})' for lp in loops)
            where = f"loop{'s' if len(loops) > 1 else ''} {what}" if loops else "this"
            raise SymbolicExtentError(
                name,
                f"symbolic extents are not supported here yet: {where}; it needs known "
                "extents (specialize the function to a size first: func.specialize({...}))",
                self._mod[self._func_name] if self._func_name in self._mod else None,
                loops=[lp.loop_var for lp in loops],
                blocks=blocks,
            ) from err

    return run


def guard_symbolic(cls: type) -> type:
    """Wrap the primitives of the Schedule class ``cls`` (see the module docstring)."""
    for name in GUARDED:
        method = getattr(cls, name, None)  # defined on the class or one of its mixins
        if callable(method) and not getattr(method, "_symbolic_guard", False):
            wrapped = _guard(name, method)
            wrapped._symbolic_guard = True  # type: ignore[attr-defined]
            setattr(cls, name, wrapped)
    return cls
