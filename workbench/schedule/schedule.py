"""The Schedule: a thin recorder over pure primitives.

Each method resolves handles to IR nodes, calls a pure primitive, records an
instruction in the trace and swaps in the new IR. A primitive that refuses raises
:class:`ScheduleError` before anything is swapped or recorded, so the schedule is
exactly as it was.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from ..ir import Block, For, IRModule, PrimFunc, Var
from ..ir.analysis import as_module, find_block, iter_blocks
from . import primitives as P
from .errors import (
    BlockNotFoundError,
    FunctionNotFoundError,
    InvalidScheduleArgumentError,
)
from .primitives._common import (
    child_block_names,
    consumers_of,
    find_block_path,
    find_loop_path,
    producers_of,
    scope_blocks,
    scope_of,
)
from .trace import KINDS, RV, BlockRV, ExprRV, Instruction, LoopRV, Trace


class Schedule:
    """Schedule a PrimFunc or IRModule with TensorIR's primitives.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.mm_relu(128, 128, 128))
    >>> i, j, k = sch.get_loops(sch.get_block("Y"))
    >>> j0, j1 = sch.split(j, factors=[None, 4])
    >>> sch.reorder(j0, k, j1)
    >>> [lp.loop_var.name for lp in map(sch.get, sch.get_loops(sch.get_block("Y")))]
    ['i', 'j_0', 'k', 'j_1']
    """

    def __init__(self, mod: PrimFunc | IRModule, *, seed: int | None = None):
        self._mod = as_module(mod)
        self._func_name: str | None = self._mod.names[0] if len(self._mod) == 1 else None
        self._rvs: dict[RV, Any] = {}
        self._trace = Trace()
        self._seed = seed
        self._rng = random.Random(seed)

    # ------------------------------------------------------------------ state
    @property
    def mod(self) -> IRModule:
        """The current module (immutable; each primitive makes a new one)."""
        return self._mod

    @property
    def func(self) -> PrimFunc:
        """The function being scheduled (see :meth:`work_on`)."""
        return self._mod[self._current("func")]

    @property
    def trace(self) -> Trace:
        """Everything applied so far, printable as ``apply_trace`` and replayable."""
        return self._trace

    def work_on(self, func_name: str) -> None:
        """Choose which function later ``get_block`` calls without ``func_name`` use."""
        if func_name not in self._mod:
            raise FunctionNotFoundError(
                "work_on", f"module has no function {func_name!r}; it has {self._mod.names}"
            )
        self._func_name = func_name

    def copy(self) -> Schedule:
        """An independent schedule with the same IR, trace and valid handles."""
        other = Schedule.__new__(Schedule)
        other._mod = self._mod
        other._func_name = self._func_name
        other._rvs = dict(self._rvs)
        other._trace = self._trace
        other._seed = self._seed
        other._rng = random.Random()
        other._rng.setstate(self._rng.getstate())
        return other

    def _adopt(self, other: Schedule) -> None:
        """Take over ``other``'s state (used to make trace replay all-or-nothing)."""
        self._mod = other._mod
        self._func_name = other._func_name
        self._rvs = other._rvs
        self._trace = other._trace
        self._rng = other._rng

    def show(self, syntax: str = "classic") -> None:
        self._mod.show(syntax=syntax)

    def _repr_html_(self) -> str:
        return self._mod._repr_html_()

    def __repr__(self) -> str:
        return f"Schedule({self._mod.names}, {len(self._trace)} instructions)"

    # -------------------------------------------------------------- handles
    def _current(self, primitive: str) -> str:
        if self._func_name is None:
            raise FunctionNotFoundError(
                primitive,
                f"the module has several functions {self._mod.names}; pass func_name= "
                "or call work_on() first",
            )
        return self._func_name

    def _resolve(self, primitive: str, rv: Any, expect: type) -> Any:
        if isinstance(rv, bool) or not isinstance(rv, expect):
            what = {LoopRV: "a loop", BlockRV: "a block", ExprRV: "an expression"}[expect]
            raise InvalidScheduleArgumentError(
                primitive, f"expected {what} handle, got {rv!r}", self._func_or_none()
            )
        if rv not in self._rvs:
            raise InvalidScheduleArgumentError(
                primitive, f"{rv!r} does not belong to this schedule", self._func_or_none()
            )
        return self._rvs[rv]

    def _func_or_none(self) -> PrimFunc | None:
        return self._mod[self._func_name] if self._func_name else None

    def _loop(self, primitive: str, rv: LoopRV) -> tuple[str, Var]:
        """(function name, loop var); primitives report a loop that no longer exists."""
        return self._resolve(primitive, rv, LoopRV)

    def _block(self, primitive: str, rv: BlockRV) -> tuple[str, str]:
        """(function name, block name); primitives report a block that no longer exists."""
        return self._resolve(primitive, rv, BlockRV)

    def _loop_or_block(self, primitive: str, rv: Any) -> tuple[str, Var | str]:
        if isinstance(rv, LoopRV):
            return self._loop(primitive, rv)
        if isinstance(rv, BlockRV):
            return self._block(primitive, rv)
        raise InvalidScheduleArgumentError(
            primitive, f"expected a loop or block handle, got {rv!r}", self._func_or_none()
        )

    def _int(self, primitive: str, value: Any) -> Any:
        if isinstance(value, ExprRV):
            return self._resolve(primitive, value, ExprRV)
        return value

    def get(self, rv: RV) -> For | Block | int:
        """The IR node (or sampled integer) a handle refers to now."""
        if isinstance(rv, ExprRV):
            return self._resolve("get", rv, ExprRV)
        if isinstance(rv, LoopRV):
            func_name, var = self._loop("get", rv)
            return find_loop_path(self._mod[func_name], "get", var)[-1]  # type: ignore[return-value]
        func_name, name = self._block("get", rv)
        return find_block_path(self._mod[func_name], "get", name)[-1]  # type: ignore[return-value]

    def _new(self, cls: type, value: Any) -> RV:
        rv = cls()
        self._rvs[rv] = value
        return rv

    def _commit(
        self,
        kind: str,
        args: dict[str, Any],
        outputs: Sequence[RV] = (),
        func: PrimFunc | None = None,
        decision: Any = None,
    ) -> None:
        spec = KINDS[kind]
        order = tuple(n.lstrip("*") for n in spec.inputs) + spec.attrs
        items = tuple((n, tuple(args[n]) if isinstance(args[n], list) else args[n]) for n in order)
        self._trace = self._trace.append(Instruction(kind, items, tuple(outputs), decision))
        if func is not None:
            self._mod = self._mod.with_function(func)

    # ---------------------------------------------------------------- lookup
    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        """Handle to the block ``name``. ``func_name`` is optional when the module has
        one function (or after :meth:`work_on`)."""
        if func_name is None:
            func_name = self._current("get_block")
        elif func_name not in self._mod:
            raise FunctionNotFoundError(
                "get_block", f"module has no function {func_name!r}; it has {self._mod.names}"
            )
        func = self._mod[func_name]
        if find_block(func, name) is None:
            names = [b.name for b in iter_blocks(func.body) if b is not func.body]
            raise BlockNotFoundError(
                "get_block",
                f'no block named "{name}" in function "{func_name}" (blocks: {", ".join(names)})',
                func,
            )
        rv = self._new(BlockRV, (func_name, name))
        self._commit("GetBlock", {"name": name, "func_name": func_name}, [rv])
        return rv

    get_sblock = get_block

    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        """Handles to the loops above ``block``, outermost first (within its scope)."""
        func_name, name = self._block("get_loops", block)
        path = find_block_path(self._mod[func_name], "get_loops", name)
        loops = []
        for s in path[:-1]:
            if isinstance(s, Block):
                loops = []
            elif isinstance(s, For):
                loops.append(s.loop_var)
        rvs = [self._new(LoopRV, (func_name, v)) for v in loops]
        self._commit("GetLoops", {"block": block}, rvs)
        return rvs

    def get_child_blocks(self, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
        """Blocks directly inside a block or loop, in program order."""
        func_name, _ = self._loop_or_block("get_child_blocks", block_or_loop)
        node = self.get(block_or_loop)
        kids = child_block_names(node)
        names = [b.name for b in iter_blocks(node) if b.name in kids]
        rvs = [self._new(BlockRV, (func_name, n)) for n in names]
        self._commit("GetChildBlocks", {"block_or_loop": block_or_loop}, rvs)
        return rvs

    get_child_sblocks = get_child_blocks

    def _siblings(self, primitive: str, block: BlockRV) -> tuple[str, Block, list[Block]]:
        func_name, name = self._block(primitive, block)
        path = find_block_path(self._mod[func_name], primitive, name)
        return func_name, path[-1], scope_blocks(scope_of(path))  # type: ignore[return-value]

    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks in the same scope that write a buffer ``block`` reads."""
        func_name, me, siblings = self._siblings("get_producers", block)
        rvs = [self._new(BlockRV, (func_name, b.name)) for b in producers_of(me, siblings)]
        self._commit("GetProducers", {"block": block}, rvs)
        return rvs

    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks in the same scope that read a buffer ``block`` writes."""
        func_name, me, siblings = self._siblings("get_consumers", block)
        rvs = [self._new(BlockRV, (func_name, b.name)) for b in consumers_of(me, siblings)]
        self._commit("GetConsumers", {"block": block}, rvs)
        return rvs

    # ----------------------------------------------------------------- loops
    def split(
        self,
        loop: LoopRV,
        factors: Sequence[int | ExprRV | None],
        preserve_unit_iters: bool = True,
        disable_predication: bool = False,
    ) -> list[LoopRV]:
        """Split ``loop`` into nested loops with the given extents (one may be None).

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(128, 128, 128))
        >>> i, j, k = sch.get_loops(sch.get_block("C"))
        >>> j0, j1 = sch.split(j, factors=[None, 4])
        >>> sch.get(j0).extent, sch.get(j1).extent
        (32, 4)
        """
        func_name, var = self._loop("split", loop)
        if not isinstance(factors, (list, tuple)):
            raise InvalidScheduleArgumentError(
                "split",
                f'factors for loop "{var.name}" must be a list, got {factors!r}',
                self._mod[func_name],
                loops=[var],
            )
        values = [self._int("split", f) for f in factors]
        func, new_vars = P.split(
            self._mod[func_name], var, values, preserve_unit_iters, disable_predication
        )
        rvs = [self._new(LoopRV, (func_name, v)) for v in new_vars]
        self._commit(
            "Split",
            {
                "loop": loop,
                "factors": list(factors),
                "preserve_unit_iters": bool(preserve_unit_iters),
                "disable_predication": bool(disable_predication),
            },
            rvs,
            func,
        )
        return rvs

    def fuse(self, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
        """Fuse directly nested loops (outermost first) into one loop."""
        resolved = [self._loop("fuse", lp) for lp in loops]
        func_name = self._same_func("fuse", resolved)
        func, var = P.fuse(self._mod[func_name], [v for _, v in resolved], preserve_unit_iters)
        rv = self._new(LoopRV, (func_name, var))
        self._commit(
            "Fuse",
            {"loops": list(loops), "preserve_unit_iters": bool(preserve_unit_iters)},
            [rv],
            func,
        )
        return rv

    def reorder(self, *ordered_loops: LoopRV) -> None:
        """Put the given loops in this order; they need not be adjacent but must be
        in one chain of nested loops."""
        resolved = [self._loop("reorder", lp) for lp in ordered_loops]
        func_name = self._same_func("reorder", resolved)
        func = P.reorder(self._mod[func_name], [v for _, v in resolved])
        self._commit("Reorder", {"ordered_loops": list(ordered_loops)}, (), func)

    def _same_func(self, primitive: str, resolved: list[tuple[str, Var]]) -> str:
        if not resolved:
            raise InvalidScheduleArgumentError(primitive, "needs at least one loop")
        names = {f for f, _ in resolved}
        if len(names) > 1:
            raise InvalidScheduleArgumentError(
                primitive, f"loops come from different functions {sorted(names)}"
            )
        return resolved[0][0]

    def _loop_kind(self, primitive: str, kind: str, loop: LoopRV) -> None:
        func_name, var = self._loop(primitive, loop)
        func = P.set_loop_kind(self._mod[func_name], primitive, var)
        self._commit(kind, {"loop": loop}, (), func)

    def parallel(self, loop: LoopRV) -> None:
        """Run ``loop``'s iterations in parallel threads (OpenMP in the C target).
        The loop must be data-parallel."""
        self._loop_kind("parallel", "Parallel", loop)

    def vectorize(self, loop: LoopRV) -> None:
        """Vectorize ``loop`` (a SIMD pragma in the C target); must be data-parallel."""
        self._loop_kind("vectorize", "Vectorize", loop)

    def unroll(self, loop: LoopRV) -> None:
        """Unroll ``loop`` (an unroll pragma in the C target)."""
        self._loop_kind("unroll", "Unroll", loop)

    # ----------------------------------------------------------- annotations
    def annotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val: Any) -> None:
        """Attach ``ann_key = ann_val`` to a loop or block."""
        func_name, target = self._loop_or_block("annotate", block_or_loop)
        value = self._int("annotate", ann_val)
        func = P.annotate(self._mod[func_name], target, ann_key, value)
        self._commit(
            "Annotate",
            {"block_or_loop": block_or_loop, "ann_key": ann_key, "ann_val": ann_val},
            (),
            func,
        )

    def unannotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:
        """Remove annotation ``ann_key`` from a loop or block."""
        func_name, target = self._loop_or_block("unannotate", block_or_loop)
        func = P.unannotate(self._mod[func_name], target, ann_key)
        self._commit("Unannotate", {"block_or_loop": block_or_loop, "ann_key": ann_key}, (), func)

    # ------------------------------------------------------ compute location
    # compute_at, reverse_compute_at, compute_inline, reverse_compute_inline

    # ------------------------------------------------------ caching and storage
    # cache_read, cache_write, set_scope, storage_align

    # ------------------------------------------------------ reductions and blocks
    # decompose_reduction, rfactor, blockize, add_unit_loop

    # ------------------------------------------------------ thread binding and sampling
    # bind, sample_perfect_tile, sample_categorical, sample_compute_location
