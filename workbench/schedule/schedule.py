"""The Schedule: a thin recorder over pure primitives.

Each method resolves handles to IR nodes, calls a pure primitive, records an
instruction in the trace and swaps in the new IR. A primitive that refuses raises
:class:`ScheduleError` before anything is swapped or recorded, so the schedule is
exactly as it was.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import Any

from ..ir import Block, For, IRModule, PrimFunc, Var
from ..ir.analysis import as_module, block_path, find_block, iter_blocks, loop_path
from . import primitives as P
from ._block_args import accepts_block_names
from .errors import (
    BlockNotFoundError,
    FunctionNotFoundError,
    InvalidScheduleArgumentError,
    RemovedHandleError,
    ScheduleError,
)
from .primitives import compute_at as CA
from .primitives import compute_inline as CI
from .primitives._common import (
    child_block_names,
    consumers_of,
    find_block_path,
    find_loop_path,
    producers_of,
    scope_blocks,
    scope_of,
)
from .primitives.sampling import COMPUTE_INLINE, COMPUTE_ROOT, location_mark
from .schedule_block_info import BlockInfoMethods
from .schedule_layout import LayoutMethods
from .schedule_padding import PaddingMethods
from .schedule_partition import PartitionMethods
from .schedule_reindex import ReindexMethods
from .schedule_sampling import SamplingMethods
from .schedule_tensorize import TensorizeMethods
from .trace import KINDS, RV, BlockRV, ExprRV, Instruction, LoopRV, Trace


class Schedule(
    BlockInfoMethods,
    SamplingMethods,
    LayoutMethods,
    ReindexMethods,
    PaddingMethods,
    PartitionMethods,
    TensorizeMethods,
):
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
        if len(self._mod) == 0:
            raise FunctionNotFoundError(
                "Schedule", "the module has no functions: there is nothing to schedule"
            )
        self._original = self._mod
        self._func_name: str | None = self._mod.names[0] if len(self._mod) == 1 else None
        self._rvs: dict[RV, Any] = {}
        self._removed: set[int] = set()  # uids of handles remove_rv dropped
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

    @property
    def original(self) -> IRModule:
        """The module this schedule started from (what :attr:`trace` replays on)."""
        return self._original

    def save(
        self,
        path: str | os.PathLike,
        *,
        target: str | None = None,
        measurement: Any = None,
        note: str | None = None,
        syntax: str = "tirx",
    ):
        """Save a self-contained schedule file: the unscheduled module as TVMScript, the
        trace as TVM's JSON, and metadata (workbench version, ``target``, an optional
        ``measurement`` and ``note``). ``wb.load_schedule(path)`` opens it again; TVM
        parses its module text and replays its trace. Returns the path written.

        >>> import tempfile, os, workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(32, 32, 32))
        >>> _ = sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 8])
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = sch.save(os.path.join(d, "matmul.json"))
        ...     print(wb.load_schedule(p).trace.script() == sch.trace.script())
        True
        """
        from .file import save_schedule

        return save_schedule(self, path, target=target, measurement=measurement, note=note,
                             syntax=syntax)

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
        other._original = self._original
        other._func_name = self._func_name
        other._rvs = dict(self._rvs)
        other._removed = set(self._removed)
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
        self._removed = other._removed
        self._trace = other._trace
        self._rng = other._rng

    def show(self, syntax: str = "classic") -> None:
        self._mod.show(syntax=syntax)

    def _repr_html_(self) -> str:
        """The IR, with the trace folded below it (a plain ``sch`` in a notebook cell)."""
        import html

        from ..ir.highlight import highlight_html

        n = len(self._trace)
        names = ", ".join(self._mod.names)
        head = (
            '<div style="padding:2px 0;font-family:var(--jp-ui-font-family,sans-serif)">'
            f"Schedule of <b>{html.escape(names)}</b> &middot; {n} instruction"
            f"{'s' if n != 1 else ''}</div>"
        )
        body = highlight_html(self._mod.script())
        trace = ""
        if n:
            trace = ("<details><summary>trace (<code>apply_trace</code>)</summary>"
                     f"{highlight_html(self._trace.script())}</details>")
        return f'<div class="wb-schedule">{head}{body}{trace}</div>'

    def __repr__(self) -> str:
        return f"Schedule({self._mod.names}, {len(self._trace)} instructions)"

    # -------------------------------------------------------------- handles
    def _current(self, primitive: str) -> str:
        if self._func_name is None:
            raise FunctionNotFoundError(
                primitive,
                f"the schedule does not know which function to be working on: the module has "
                f"several functions {self._mod.names}; pass func_name= or call work_on() first",
            )
        return self._func_name

    def _resolve(self, primitive: str, rv: Any, expect: type) -> Any:
        if isinstance(rv, bool) or not isinstance(rv, expect):
            what = {LoopRV: "a loop", BlockRV: "a block", ExprRV: "an expression"}[expect]
            raise InvalidScheduleArgumentError(
                primitive, f"expected {what} handle, got {rv!r}", self._func_or_none()
            )
        if rv not in self._rvs:
            if rv.uid in self._removed:
                raise RemovedHandleError(
                    primitive, f"{rv!r} was dropped by remove_rv", self._func_or_none())
            raise InvalidScheduleArgumentError(
                primitive,
                f"{rv!r} does not belong to this schedule: it comes from another schedule "
                "(a handle is valid only in the schedule that made it and its copies)",
                self._func_or_none(),
            )
        return self._rvs[rv]

    def _loop_in(self, primitive: str, loop: LoopRV, func_name: str, block: str) -> Var:
        """The loop var of ``loop``, which must be in the function ``func_name`` of
        ``block`` (a sampled location mark is in every function)."""
        loop_func, var = self._loop(primitive, loop)
        if loop_func != func_name and location_mark(var) is None:
            raise InvalidScheduleArgumentError(
                primitive,
                f'loop "{var.name}" belongs to function {loop_func!r}, but block "{block}" '
                f"is in function {func_name!r}: a block can only move under a loop of its "
                "own function",
                self._mod[func_name],
                blocks=[block],
            )
        return var

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
            if location_mark(var) is not None:
                return var  # a sampled root/inline location, not a loop
            return find_loop_path(self._mod[func_name], "get", var)[-1]  # type: ignore[return-value]
        func_name, name = self._block("get", rv)
        return find_block_path(self._mod[func_name], "get", name)[-1]  # type: ignore[return-value]

    def existing_handle(self, target: Var | str, func_name: str | None = None) -> RV | None:
        """A handle this schedule already made to the loop with loop variable ``target``
        (a ``Var``) or to the block named ``target`` that still exists, else None.

        Tools that drive a schedule step by step (the widgets) reuse handles this way
        instead of recording a new ``get_block``/``get_loops`` before every primitive.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
        >>> i, j, k = sch.get_loops(sch.get_block("C"))
        >>> sch.existing_handle(sch.get(j).loop_var) is j, sch.existing_handle("C") is not None
        (True, True)
        """
        func_name = func_name or self._current("existing_handle")
        func = self._mod[func_name]
        cls = BlockRV if isinstance(target, str) else LoopRV
        for rv, value in reversed(self._rvs.items()):
            if not isinstance(rv, cls) or value[0] != func_name:
                continue
            if cls is BlockRV and value[1] == target:
                return rv if block_path(func, target) is not None else None
            if cls is LoopRV and value[1] is target:
                return rv if loop_path(func, target) is not None else None
        return None

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
        if block_path(func, name) is None:  # blocks inside a T.init() are not schedulable
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

    @accepts_block_names("block")
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

    @accepts_block_names("block_or_loop")
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

    @accepts_block_names("block")
    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks in the same scope that write a buffer ``block`` reads."""
        func_name, me, siblings = self._siblings("get_producers", block)
        rvs = [self._new(BlockRV, (func_name, b.name)) for b in producers_of(me, siblings)]
        self._commit("GetProducers", {"block": block}, rvs)
        return rvs

    @accepts_block_names("block")
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

    def merge(self, *loops: LoopRV) -> LoopRV:
        """Merge sibling loops (same depth below their common ancestor, same extents
        level by level) into one loop nest running their bodies one after the other;
        returns the merged loop (named after the first, with ``_m``).

        >>> import workbench as wb
        >>> from workbench.testing import chain_func
        >>> sch = wb.Schedule(chain_func(8))
        >>> _, jb = sch.get_loops(sch.get_block("B"))
        >>> _, jc = sch.get_loops(sch.get_block("C"))
        >>> m = sch.merge(jb, jc)
        >>> [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block("C"))]
        ['i_m', 'j_m']
        """
        from .primitives import merge as M

        resolved = [self._loop("merge", lp) for lp in loops]
        func_name = self._same_func("merge", resolved)
        func, var = M.merge(self._mod[func_name], [v for _, v in resolved])
        rv = self._new(LoopRV, (func_name, var))
        self._commit("Merge", {"loops": list(loops)}, [rv], func)
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
    @accepts_block_names("block_or_loop")
    def annotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val: Any) -> None:
        """Attach ``ann_key = ann_val`` (a number, string, bool, list of those, or a dict
        of strings to those or lists of those) to a loop or block.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
        >>> sch.annotate("C", "meta", {"key": 3, "arr": [0, 0]})
        >>> 'T.block_attr({"meta": {"arr": [0, 0], "key": 3}})' in sch.func.script()
        True
        """
        func_name, target = self._loop_or_block("annotate", block_or_loop)
        value = self._int("annotate", ann_val)
        func = P.annotate(self._mod[func_name], target, ann_key, value)
        if isinstance(ann_val, dict):  # record a copy, keys sorted as TVM prints them
            ann_val = dict(sorted(ann_val.items()))
        self._commit(
            "Annotate",
            {"block_or_loop": block_or_loop, "ann_key": ann_key, "ann_val": ann_val},
            (),
            func,
        )

    @accepts_block_names("block_or_loop")
    def unannotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:
        """Remove annotation ``ann_key`` from a loop or block."""
        func_name, target = self._loop_or_block("unannotate", block_or_loop)
        func = P.unannotate(self._mod[func_name], target, ann_key)
        self._commit("Unannotate", {"block_or_loop": block_or_loop, "ann_key": ann_key}, (), func)

    # ------------------------------------------------------ compute location
    # compute_at, reverse_compute_at, compute_inline, reverse_compute_inline
    @accepts_block_names("block")
    def compute_at(
        self,
        block: BlockRV,
        loop: LoopRV,
        preserve_unit_loops: bool = False,
        index: int = -1,
    ) -> None:
        """Move producer ``block`` under ``loop`` (a loop of its consumers), computing
        at each iteration exactly the region they read there.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.elementwise_chain(64, 8))
        >>> n, c = sch.get_loops(sch.get_block("batch_norm"))
        >>> sch.compute_at(sch.get_block("relu"), n)
        >>> [lp.loop_var.name for lp in map(sch.get, sch.get_loops(sch.get_block("relu")))]
        ['n', 'ax0']
        """
        func_name, name = self._block("compute_at", block)
        var = self._loop_in("compute_at", loop, func_name, name)
        mark = location_mark(var)
        if mark is COMPUTE_ROOT:  # a sampled "stay at the root": nothing moves
            func = self._mod[func_name]
        elif mark is COMPUTE_INLINE:  # a sampled "inline"
            func = CI.compute_inline(self._mod[func_name], name)
        else:
            func = CA.compute_at(
                self._mod[func_name], name, var, bool(preserve_unit_loops), index
            )
        self._commit(
            "ComputeAt",
            {"block": block, "loop": loop, "preserve_unit_loops": bool(preserve_unit_loops),
             "index": index},
            (), func,
        )

    @accepts_block_names("block")
    def reverse_compute_at(
        self,
        block: BlockRV,
        loop: LoopRV,
        preserve_unit_loops: bool = False,
        index: int = -1,
    ) -> None:
        """Move consumer ``block`` under ``loop`` (a loop of its producers), covering
        at each iteration exactly the region they produce there."""
        func_name, name = self._block("reverse_compute_at", block)
        var = self._loop_in("reverse_compute_at", loop, func_name, name)
        func = CA.reverse_compute_at(
            self._mod[func_name], name, var, bool(preserve_unit_loops), index
        )
        self._commit(
            "ReverseComputeAt",
            {"block": block, "loop": loop, "preserve_unit_loops": bool(preserve_unit_loops),
             "index": index},
            (), func,
        )

    @accepts_block_names("block")
    def compute_inline(self, block: BlockRV) -> None:
        """Inline producer ``block`` into its consumers; its buffer disappears."""
        func_name, name = self._block("compute_inline", block)
        func = CI.compute_inline(self._mod[func_name], name)
        self._commit("ComputeInline", {"block": block}, (), func)

    @accepts_block_names("block")
    def reverse_compute_inline(self, block: BlockRV) -> None:
        """Fold consumer ``block`` into its only producer's store."""
        func_name, name = self._block("reverse_compute_inline", block)
        func = CI.reverse_compute_inline(self._mod[func_name], name)
        self._commit("ReverseComputeInline", {"block": block}, (), func)


    # ------------------------------------------------------ caching and storage
    # cache_read, cache_write, set_scope, storage_align
    def _cache_consumers(
        self, primitive: str, func_name: str, consumer_blocks: Sequence[BlockRV | str] | None
    ) -> tuple[list[BlockRV], list[str]]:
        """Handles and names of ``consumer_blocks``; a block name is turned into a
        handle with ``get_block`` (recorded in the trace, as TVM does)."""
        if consumer_blocks is None:
            return [], []
        if isinstance(consumer_blocks, (str, BlockRV)) or not isinstance(
            consumer_blocks, (list, tuple)
        ):
            raise InvalidScheduleArgumentError(
                primitive,
                f"consumer_blocks must be a list of blocks, got {consumer_blocks!r}",
                self._mod[func_name],
            )
        func = self._mod[func_name]
        for b in consumer_blocks:
            if isinstance(b, str) and find_block(func, b) is None:
                raise BlockNotFoundError(
                    primitive, f'no block named "{b}" in function "{func_name}"', func
                )
        rvs = [self.get_block(b, func_name) if isinstance(b, str) else b for b in consumer_blocks]
        names = []
        for rv in rvs:
            fname, name = self._block(primitive, rv)
            if fname != func_name:
                raise InvalidScheduleArgumentError(
                    primitive,
                    f'consumer block "{name}" is in function "{fname}", not "{func_name}"',
                    func,
                )
            names.append(name)
        return rvs, names

    def _cache(
        self,
        primitive: str,
        block: BlockRV,
        buffer_index: int | str,
        storage_scope: str,
        consumer_blocks: Sequence[BlockRV | str] | None,
    ) -> BlockRV:
        from .primitives import cache as C

        func_name, name = self._block(primitive, block)
        kind = "read" if primitive == "cache_read" else "write"
        saved = (self._trace, dict(self._rvs))
        try:
            rvs, names = self._cache_consumers(primitive, func_name, consumer_blocks)
            func = self._mod[func_name]
            index = C.resolve_buffer_index(func, primitive, name, buffer_index, kind)
            run = C.cache_read if kind == "read" else C.cache_write
            func, new_name = run(func, name, index, storage_scope, names or None)
        except ScheduleError:
            self._trace, self._rvs = saved  # undo get_block of consumer names
            raise
        rv = self._new(BlockRV, (func_name, new_name))
        args = {
            "block": block,
            f"{kind}_buffer_index": index,
            "storage_scope": storage_scope,
            "consumer_blocks": rvs,
        }
        self._commit("CacheRead" if kind == "read" else "CacheWrite", args, [rv], func)
        return rv

    @accepts_block_names("block")
    def cache_read(
        self,
        block: BlockRV,
        read_buffer_index: int | str,
        storage_scope: str,
        consumer_blocks: Sequence[BlockRV | str] | None = None,
    ) -> BlockRV:
        """Copy a buffer ``block`` reads into a new buffer of ``storage_scope``
        (``"shared"``, ``"local"``...) with a new block; returns that block.

        The buffer is ``block``'s ``read_buffer_index``-th read (or its name). The new
        buffer and block are named ``<buffer>_<scope>``; the copy goes right before the
        first consumer (first in the scope for a function input); every block of the
        scope that reads the buffer (or only ``consumer_blocks``) reads the copy.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(64, 64, 64))
        >>> a_shared = sch.cache_read(sch.get_block("C"), 0, "shared")
        >>> sch.get(a_shared).name, [r.buffer.name for r in sch.get(sch.get_block("C")).reads]
        ('A_shared', ['A_shared', 'B'])
        """
        return self._cache("cache_read", block, read_buffer_index, storage_scope, consumer_blocks)

    @accepts_block_names("block")
    def cache_write(
        self,
        block: BlockRV,
        write_buffer_index: int | str,
        storage_scope: str,
        consumer_blocks: Sequence[BlockRV | str] | None = None,
    ) -> BlockRV:
        """Make ``block`` write into a new buffer of ``storage_scope`` and copy it back
        with a new block right after; returns that block (``C_local`` for ``C``).

        Consumers keep reading the original buffer, except ``consumer_blocks``, which
        read the cache directly.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(64, 64, 64))
        >>> c_local = sch.cache_write(sch.get_block("C"), 0, "local")
        >>> [w.buffer.name for w in sch.get(sch.get_block("C")).writes], sch.get(c_local).name
        (['C_local'], 'C_local')
        """
        return self._cache(
            "cache_write", block, write_buffer_index, storage_scope, consumer_blocks
        )

    @accepts_block_names("block")
    def set_scope(self, block: BlockRV, buffer_index: int | str, storage_scope: str) -> None:
        """Move the ``buffer_index``-th buffer ``block`` writes (an allocated buffer, not
        a parameter) to ``storage_scope``; it is renamed ``<name>_<scope>``."""
        from .primitives import cache as C

        func_name, name = self._block("set_scope", block)
        func = self._mod[func_name]
        index = C.resolve_buffer_index(
            func, "set_scope", name, buffer_index, "write", "buffer_index"
        )
        func = C.set_scope(func, name, index, storage_scope)
        args = {"block": block, "buffer_index": index, "storage_scope": storage_scope}
        self._commit("SetScope", args, (), func)

    @accepts_block_names("block")
    def storage_align(
        self, block: BlockRV, buffer_index: int | str, axis: int, factor: int, offset: int
    ) -> None:
        """Pad the ``buffer_index``-th buffer ``block`` writes so that the stride of
        dimension ``axis`` is ``k * factor + offset`` (avoids shared-memory bank
        conflicts); recorded as the block annotation ``buffer_dim_align``."""
        from .primitives import cache as C
        from .primitives import layout as L

        func_name, name = self._block("storage_align", block)
        func = self._mod[func_name]
        index = C.resolve_buffer_index(
            func, "storage_align", name, buffer_index, "write", "buffer_index"
        )
        func = L.storage_align(func, name, index, axis, factor, offset)
        args = {
            "block": block,
            "buffer_index": index,
            "axis": axis,
            "factor": factor,
            "offset": offset,
        }
        self._commit("StorageAlign", args, (), func)

    # ------------------------------------------------------ reductions and blocks
    # decompose_reduction, rfactor, blockize, add_unit_loop
    @accepts_block_names("block")
    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Move reduction ``block``'s init into a new block ``<name>_init`` placed right
        before ``loop``; ``block`` becomes ``<name>_update`` (its handle follows it).
        Returns the init block. ``loop`` must be above the block and above every loop
        its reduce iter vars use.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.mm_relu(128, 128, 128))
        >>> blk = sch.get_block("Y")
        >>> i, j, k = sch.get_loops(blk)
        >>> j0, j1 = sch.split(j, factors=[None, 4])
        >>> sch.reorder(j0, k, j1)
        >>> init = sch.decompose_reduction(blk, k)
        >>> sch.get(init).name, sch.get(blk).name
        ('Y_init', 'Y_update')
        >>> [sch.get(lp).loop_var.name for lp in sch.get_loops(init)]
        ['i', 'j_0', 'j_1_init']
        """
        from .primitives import reduction as R

        func_name, name = self._block("decompose_reduction", block)
        loop_func, var = self._loop("decompose_reduction", loop)
        if loop_func != func_name:
            raise InvalidScheduleArgumentError(
                "decompose_reduction",
                f'block "{name}" and loop "{var.name}" are in different functions',
                self._mod[func_name],
            )
        func, init_name, update_name = R.decompose_reduction(self._mod[func_name], name, var)
        rv = self._new(BlockRV, (func_name, init_name))
        self._commit("DecomposeReduction", {"block": block, "loop": loop}, [rv], func)
        for other, value in list(self._rvs.items()):
            if isinstance(other, BlockRV) and value == (func_name, name):
                self._rvs[other] = (func_name, update_name)
        return rv

    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factorize the reduction under ``loop``: a new block ``<name>_rf`` computes
        partial results into ``<buffer>_rf`` (one more dimension, of ``loop``'s extent,
        at ``factor_axis``); the original block sums them. Returns the rfactor block.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
        >>> blk = sch.get_block("C")
        >>> i, j, k = sch.get_loops(blk)
        >>> k0, k1 = sch.split(k, factors=[None, 4])
        >>> rf = sch.rfactor(k1, factor_axis=0)
        >>> sch.get(rf).name, [b.name for b in sch.func.body.alloc_buffers]
        ('C_rf', ['C_rf'])
        """
        from .primitives import reduction as R

        func_name, var = self._loop("rfactor", loop)
        if isinstance(factor_axis, bool) or not isinstance(factor_axis, int):
            raise InvalidScheduleArgumentError(
                "rfactor",
                f'factor_axis for loop "{var.name}" must be an integer, got {factor_axis!r}',
                self._mod[func_name],
                loops=[var],
            )
        func, rf_name = R.rfactor(self._mod[func_name], var, factor_axis)
        rv = self._new(BlockRV, (func_name, rf_name))
        self._commit("RFactor", {"loop": loop, "factor_axis": factor_axis}, [rv], func)
        return rv

    def blockize(
        self, target: LoopRV | Sequence[BlockRV], preserve_unit_iters: bool = True
    ) -> BlockRV:
        """Wrap the loop nest under ``target`` (one block inside) into a new block
        ``<name>_o`` whose iter vars range over the loops above ``target``. Returns it.

        ``target`` may also be a list of sibling blocks (as in TVM): their loop nests
        below the blocks' lowest common ancestor go into one new block
        ``outer_<b1>_<b2>_...``.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
        >>> i, j, k = sch.get_loops(sch.get_block("C"))
        >>> i0, i1 = sch.split(i, factors=[None, 4])
        >>> outer = sch.blockize(i1)
        >>> sch.get(outer).name, [iv.var.name for iv in sch.get(outer).iter_vars]
        ('C_o', ['vi_o', 'vj_o', 'vk_o'])
        """
        from .primitives import blockize as BZ

        if isinstance(target, (list, tuple)):
            resolved = [self._block("blockize", b) for b in target]
            if not resolved:
                raise InvalidScheduleArgumentError("blockize", "needs a loop or a list of blocks")
            func_name = self._same_func("blockize", resolved)
            func, name = BZ.blockize_blocks(
                self._mod[func_name], [n for _, n in resolved], bool(preserve_unit_iters)
            )
            target = list(target)
        else:
            func_name, var = self._loop("blockize", target)
            func, name = BZ.blockize(self._mod[func_name], var, bool(preserve_unit_iters))
        rv = self._new(BlockRV, (func_name, name))
        self._commit(
            "Blockize",
            {"target": target, "preserve_unit_iters": bool(preserve_unit_iters)},
            [rv],
            func,
        )
        return rv

    @accepts_block_names("block_or_loop")
    def add_unit_loop(self, block_or_loop: BlockRV | LoopRV) -> LoopRV:
        """Add ``for u in range(1)`` right above a block or loop; returns the new loop.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
        >>> u = sch.add_unit_loop(sch.get_block("C"))
        >>> [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block("C"))]
        ['i', 'j', 'k', 'u']
        """
        from .primitives import blockize as BZ

        func_name, target = self._loop_or_block("add_unit_loop", block_or_loop)
        func, var = BZ.add_unit_loop(self._mod[func_name], target)
        rv = self._new(LoopRV, (func_name, var))
        self._commit("AddUnitLoop", {"block_or_loop": block_or_loop}, [rv], func)
        return rv

    # ------------------------------------------------------ thread binding and sampling
    # bind, sample_perfect_tile, sample_categorical, sample_compute_location
    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Bind ``loop`` to a GPU thread axis: ``blockIdx``, ``threadIdx`` or ``vthread``
        with ``.x``, ``.y`` or ``.z``. As in TVM, the loop must be data-parallel, or a
        reduction loop bound to ``threadIdx`` (a cross-thread reduction); a loop already
        bound, parallel, vectorized or unrolled is re-bound.

        The C target runs thread-bound loops as ordinary serial loops, so a GPU
        schedule can be checked numerically on a CPU (``wb.verify``).

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(128, 128, 128))
        >>> i, j, k = sch.get_loops(sch.get_block("C"))
        >>> i0, i1 = sch.split(i, factors=[None, 32])
        >>> sch.bind(i0, "blockIdx.x")
        >>> sch.bind(i1, "threadIdx.x")
        >>> print(sch.trace.lines()[-1])
        sch.bind(loop=l5, thread_axis="threadIdx.x")
        >>> "for i_0 in T.thread_binding(4, thread=\\"blockIdx.x\\"):" in sch.mod.script()
        True
        """
        from .primitives.for_kind import bind

        func_name, var = self._loop("bind", loop)
        func = bind(self._mod[func_name], var, thread_axis)
        self._commit("Bind", {"loop": loop, "thread_axis": thread_axis}, (), func)


# A symbolic extent meeting code that needs a number raises SymbolicExtentError (a
# ScheduleError) with the schedule unchanged; see workbench/schedule/symbolic.py.
from .symbolic import guard_symbolic  # noqa: E402

guard_symbolic(Schedule)
