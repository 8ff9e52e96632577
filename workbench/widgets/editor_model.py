"""The state behind :class:`~workbench.widgets.ScheduleEditor`, in plain Python.

An :class:`EditorModel` holds the history of schedules (one immutable snapshot per
applied step), the position in it (undo/redo), the selected block or loop, the last
error and the measurements taken. Every action is a schedule primitive applied to a
copy of the current schedule: a refused one (:class:`~workbench.ScheduleError`)
leaves the history untouched and only sets :attr:`EditorModel.error`.

Loops are named as the IR prints them (``"j"``, ``"j_0"``). Names can repeat across
blocks (``mm_relu`` has an ``i`` and a ``j`` above ``Y`` and above ``C``): a name is
looked up above the block given as ``under=``, else above the selected block, else
anywhere when it is unique.

>>> import workbench as wb
>>> model = EditorModel(wb.workloads.mm_relu(64, 64, 64))
>>> model.apply("split", loop="j", factors=[None, 4])
True
>>> model.apply("reorder", loops=["j_0", "k", "j_1"])
True
>>> model.apply("vectorize", loop="k")      # k is a reduction loop: refused
False
>>> model.error.split(":")[0]
'vectorize'
>>> for line in model.trace.lines():
...     print(line[:60])
b0 = sch.get_block(name="Y", func_name="mm_relu")
l1, l2, l3 = sch.get_loops(block=b0)
l4, l5 = sch.split(loop=l2, factors=[None, 4], preserve_unit
sch.reorder(l4, l3, l5)
>>> model.undo()
True
>>> [item.name for item in model.tree() if item.kind == "loop"][:4]
['i', 'j_0', 'j_1', 'k']
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ir import Block, For, IfThenElse, IRModule, PrimFunc, SeqStmt, Var
from ..ir.analysis import (
    block_path,
    find_block,
    infer_regions,
    loop_path,
    loops_above,
    structural_equal,
)
from ..schedule import Schedule, ScheduleError, ScheduleFile, Trace, TraceError
from ..schedule.primitives.sampling import divisors as all_divisors
from ..schedule.trace import BlockRV, LoopRV
from .editor_actions import EXTRA_ACTIONS, ActionSpec

__all__ = [
    "ACTIONS",
    "BLOCK_ACTIONS",
    "LOOP_ACTIONS",
    "EditorError",
    "EditorModel",
    "MeasureRecord",
    "NoChange",
    "TreeItem",
]

LOOP_ACTIONS = ("split", "fuse", "reorder", "parallel", "vectorize", "unroll", "bind",
                "rfactor")
BLOCK_ACTIONS = ("compute_at", "reverse_compute_at", "compute_inline",
                 "reverse_compute_inline", "cache_read", "cache_write",
                 "decompose_reduction")
ACTIONS = LOOP_ACTIONS + BLOCK_ACTIONS
THREAD_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z", "vthread.x")
SCOPES = ("global", "shared", "local")
INDENT = "\u00a0\u00a0"  # non-breaking: <select> options keep it


def _open_schedule_file(path: str | os.PathLike) -> ScheduleFile:
    from ..schedule.file import read_schedule_file

    return read_schedule_file(path)


class EditorError(ValueError):
    """An editor action named something that does not exist (a loop, block or buffer),
    or gave an argument the primitive cannot take. Like a ``ScheduleError`` it only
    sets :attr:`EditorModel.error`; the schedule is unchanged."""


class NoChange(EditorError):
    """An action ran but left the IR exactly as it was; it is not recorded."""


@dataclass(frozen=True, eq=False)
class TreeItem:
    """One row of the loop tree: a block or a loop, at ``depth`` (0 = top level).

    For a loop, ``var`` is its loop variable (its identity: names may repeat),
    ``extent`` and ``loop_kind`` (``serial``, ``parallel``, ``vectorized``,
    ``unrolled``, ``thread_binding`` with ``thread``); ``block`` is the first block
    below it. For a block, ``block`` is its own name and ``iter_kinds`` the kinds of its
    iter vars (``"SSR"``: spatial, spatial, reduction; ``O`` opaque).
    """

    kind: str
    name: str
    depth: int
    block: str
    var: Var | None = None
    extent: int | None = None
    loop_kind: str | None = None
    thread: str | None = None
    iter_kinds: str | None = None

    @property
    def label(self) -> str:
        """The line shown in the tree: ``for j in range(128)``, ``block Y``..."""
        pad = INDENT * self.depth
        if self.kind == "block":
            return f"{pad}block {self.name}"
        text = f"{pad}for {self.name} in range({self.extent})"
        if self.loop_kind == "thread_binding":
            return f"{text}  [{self.thread}]"
        if self.loop_kind and self.loop_kind != "serial":
            return f"{text}  [{self.loop_kind}]"
        return text

    def same(self, other: TreeItem | None) -> bool:
        """Whether ``other`` is the same block (by name) or loop (by variable)."""
        if other is None or other.kind != self.kind:
            return False
        return self.var is other.var if self.kind == "loop" else self.name == other.name


@dataclass(frozen=True)
class MeasureRecord:
    """One press of Measure: the history ``step`` measured and what came out.

    ``status`` is ``"ok"``, ``"build_error"`` or the isolated runner's failure
    (``"crash"``, ``"timeout"``, ``"run_error"``); times are seconds. ``cv``,
    ``foreign_load`` and ``noisy`` are the measurement's noise (see
    ``wb.Measurement``), ``threads`` the thread count it ran with.

    >>> MeasureRecord(1, "split", "ok", 2e-3, cv=0.3, noisy=True).summary()
    'step 1 (split): 2.0000 ms — NOISY (cv=0.30)'
    """

    step: int
    description: str
    status: str
    median: float | None = None
    gflops: float | None = None
    fraction_of_peak: float | None = None
    error: str = ""
    cv: float | None = None
    foreign_load: float | None = None
    noisy: bool = False
    threads: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.median is not None

    def summary(self) -> str:
        if not self.ok:
            return f"step {self.step} ({self.description}): {self.status}: {self.error}"
        text = f"step {self.step} ({self.description}): {self.median * 1e3:.4f} ms"
        if self.gflops is not None:
            text += f", {self.gflops:.2f} GFLOPS"
        if self.fraction_of_peak is not None:
            text += f" ({100 * self.fraction_of_peak:.1f}% of peak)"
        if self.noisy:
            from ..runtime.noise import describe_noise

            text += f" — NOISY ({describe_noise(self)})"
        return text


@dataclass(frozen=True)
class _Step:
    schedule: Schedule
    description: str


def _replay_steps(sch: Schedule, trace: Trace) -> list[_Step]:
    """Replay ``trace`` on a copy of ``sch``: one step (a snapshot and the instruction as
    printed) per instruction that changes the schedule; lookups and sampling go with
    the next such instruction, trailing ones with the last. All or nothing: a failing
    instruction raises :class:`TraceError` naming it."""
    from ..schedule.file import LOOKUP_KINDS

    work = sch.copy()
    first = len(work.trace)
    steps: list[_Step] = []
    pending = False  # lookups/sampling replayed since the last snapshot
    changing: list[int] = []
    for index in trace.replay_iter(work):
        inst = trace.insts[index]
        if inst.kind in LOOKUP_KINDS or inst.spec.sampling:
            pending = True
            continue
        steps.append(_Step(work.copy(), ""))
        changing.append(index)
        pending = False
    if pending and steps:  # trailing lookups belong to the last step
        steps[-1] = _Step(work.copy(), "")
    elif pending:  # nothing but lookups: one step
        steps.append(_Step(work.copy(), ""))
        changing.append(len(trace) - 1)
    lines = work.trace.lines()
    return [_Step(s.schedule, lines[first + i]) for s, i in zip(steps, changing, strict=True)]


def _walk(stmt: Any, depth: int, out: list[TreeItem]) -> None:
    if isinstance(stmt, For):
        below = _first_block(stmt.body)
        out.append(TreeItem("loop", stmt.loop_var.name, depth, below, stmt.loop_var,
                            stmt.extent, stmt.kind, stmt.thread_tag))
        _walk(stmt.body, depth + 1, out)
    elif isinstance(stmt, Block):
        out.append(TreeItem("block", stmt.name, depth, stmt.name,
                            iter_kinds="".join(iv.kind for iv in stmt.iter_vars)))
        _walk(stmt.body, depth + 1, out)
    elif isinstance(stmt, SeqStmt):
        for s in stmt.stmts:
            _walk(s, depth, out)
    elif isinstance(stmt, IfThenElse):
        _walk(stmt.then_case, depth, out)
        if stmt.else_case is not None:
            _walk(stmt.else_case, depth, out)


def _first_block(stmt: Any) -> str:
    if isinstance(stmt, Block):
        return stmt.name
    if isinstance(stmt, For):
        return _first_block(stmt.body)
    if isinstance(stmt, SeqStmt):
        for s in stmt.stmts:
            name = _first_block(s)
            if name:
                return name
    if isinstance(stmt, IfThenElse):
        return _first_block(stmt.then_case)
    return ""


def _notice_html(message: str) -> str:
    """A neutral (not red) banner: something to know, nothing went wrong."""
    import html

    return ('<div class="wb-notice" style="padding:4px 6px;margin-bottom:2px;'
            "border-left:4px solid var(--jp-info-color1,#0288d1);"
            "background:var(--jp-info-color3,rgba(2,136,209,0.10));"
            "color:var(--jp-content-font-color1,inherit);"
            f'font-family:var(--jp-code-font-family,monospace)">{html.escape(message)}</div>')


def tree_of(func: PrimFunc) -> list[TreeItem]:
    """The blocks and loops of ``func`` in program order (the root block left out)."""
    out: list[TreeItem] = []
    _walk(func.body.body, 0, out)
    return out


def parse_factors(text: str) -> list[int | None]:
    """``"None, 4"`` or ``"[None, 8, 4]"`` -> ``[None, 4]``... (literals only, never run).

    >>> parse_factors("None, 4"), parse_factors("[2, None, 8]")
    ([None, 4], [2, None, 8])
    """
    try:
        value = ast.literal_eval(text.strip() if text.strip().startswith("[") else f"[{text}]")
    except (ValueError, SyntaxError) as e:
        raise EditorError(f"split: cannot read factors {text!r}: write e.g. None, 4") from e
    if not isinstance(value, list) or not all(
        v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in value
    ):
        raise EditorError(f"split: factors must be integers or None, got {text!r}")
    return value


def divisors(n: int) -> list[int]:
    """Divisors of ``n`` other than 1 and ``n``, ascending (the useful split factors).

    >>> divisors(12)
    [2, 3, 4, 6]
    """
    return [d for d in all_divisors(n) if 1 < d < n]


class EditorModel:
    """Undoable schedule editing by name; see the module docstring.

    ``func`` is a PrimFunc, an IRModule with one function, or a Schedule (its state
    and trace become the starting point, which Reset returns to). ``timeout`` bounds
    each measurement (seconds, in a worker process: a finite number > 0); ``threads``
    is the thread count the kernel is measured with (None: ``wb.get_num_threads()``).
    """

    def __init__(self, func: PrimFunc | IRModule | Schedule | str | os.PathLike, *,
                 timeout: float = 10.0, threads: int | None = None):
        from ..runtime.isolation import _check_timeout
        from ..runtime.threads import _check as check_threads

        timeout = _check_timeout(timeout, "ScheduleEditor")
        threads = check_threads(threads)
        opened = None
        if isinstance(func, str) and "\n" in func.strip():  # pasted TVMScript
            from ..script import from_script

            func = from_script(func)
        if isinstance(func, (str, os.PathLike, ScheduleFile)):
            opened = func if isinstance(func, ScheduleFile) else _open_schedule_file(func)
            func = opened.original()
        if isinstance(func, Schedule):
            start = func.copy()
        elif isinstance(func, (PrimFunc, IRModule)):
            start = Schedule(func)
        else:
            raise TypeError(
                f"ScheduleEditor needs a PrimFunc, IRModule or Schedule, got {type(func).__name__}"
            )
        start.func  # noqa: B018 - refuses a module with several functions, with its message
        self.timeout = timeout
        self.threads = threads
        self._history: list[_Step] = [_Step(start, "start")]
        self._pos = 0
        self.error = ""
        self.error_html = ""
        self.measurements: list[MeasureRecord] = []
        self._listeners: list[Callable[[str], None]] = []
        blocks = [t for t in self.tree() if t.kind == "block"]
        self._selected: TreeItem | None = blocks[0] if blocks else None
        if opened is not None and len(opened.trace) and not self.load_trace(opened):
            raise EditorError(f"cannot open {opened.path or 'the schedule file'}: {self.error}")

    # ---------------------------------------------------------------- state
    @property
    def schedule(self) -> Schedule:
        """A copy of the current schedule (changing it does not change the editor)."""
        return self._current.copy()

    @property
    def _current(self) -> Schedule:
        return self._history[self._pos].schedule

    @property
    def func(self) -> PrimFunc:
        """The current function."""
        return self._current.func

    @property
    def original(self) -> PrimFunc:
        """The function the editor started from."""
        return self._history[0].schedule.func

    @property
    def trace(self) -> Trace:
        """The trace of the current schedule."""
        return self._current.trace

    @property
    def step(self) -> int:
        """How many steps are applied (0 = the start)."""
        return self._pos

    @property
    def steps(self) -> list[str]:
        """Descriptions of the applied steps, oldest first (redo-able ones left out)."""
        return [s.description for s in self._history[1:self._pos + 1]]

    @property
    def can_undo(self) -> bool:
        return self._pos > 0

    @property
    def can_redo(self) -> bool:
        return self._pos < len(self._history) - 1

    def previous_func(self) -> PrimFunc | None:
        """The function before the last applied step (None at the start)."""
        return self._history[self._pos - 1].schedule.func if self._pos else None

    def on_change(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` after every change; reasons: ``apply``, ``undo``,
        ``redo``, ``reset``, ``load``, ``select``, ``error``, ``measure``."""
        self._listeners.append(callback)

    def _notify(self, reason: str) -> None:
        for callback in list(self._listeners):
            callback(reason)

    # ----------------------------------------------------------------- tree
    def tree(self) -> list[TreeItem]:
        """Blocks and loops of the current function, in program order."""
        return tree_of(self.func)

    @property
    def selected(self) -> TreeItem | None:
        """The selected block or loop (it follows the IR: after a split, the outer loop)."""
        return self._selected

    def select(self, item: TreeItem | str | None = None, *, block: str | None = None,
               loop: str | None = None, under: str | None = None) -> TreeItem:
        """Select a tree item, a block by name or a loop by name (``under`` a block).

        >>> import workbench as wb
        >>> m = EditorModel(wb.workloads.mm_relu(8, 8, 8))
        >>> m.select(loop="j", under="C").label
        '\\xa0\\xa0for j in range(8)'
        """
        if isinstance(item, TreeItem):
            found = next((t for t in self.tree() if t.same(item)), None)
            if found is None:
                raise EditorError(f"select: {item.kind} {item.name} is not in the current IR")
        elif item is not None or block is not None:
            found = self._find_block("select", block if block is not None else item)
        elif loop is not None:
            found = self._find_loop("select", loop, under)
        else:
            raise TypeError("select() needs an item, block= or loop=")
        self._selected = found
        self._notify("select")
        return found

    def _find_block(self, primitive: str, name: Any) -> TreeItem:
        blocks = [t for t in self.tree() if t.kind == "block"]
        for t in blocks:
            if t.name == name:
                return t
        names = ", ".join(t.name for t in blocks)
        raise EditorError(f'{primitive}: no block named "{name}" (blocks: {names})')

    def _find_loop(self, primitive: str, name: Any, under: str | None = None) -> TreeItem:
        if isinstance(name, TreeItem) and name.kind == "loop":
            name = name.var
        loops = [t for t in self.tree() if t.kind == "loop"]
        if isinstance(name, Var):
            for t in loops:
                if t.var is name:
                    return t
            raise EditorError(f'{primitive}: loop "{name.name}" is not in the current IR')
        matches = [t for t in loops if t.name == name]
        if not matches:
            raise EditorError(
                f'{primitive}: no loop named "{name}" (loops: '
                f'{", ".join(dict.fromkeys(t.name for t in loops))})'
            )
        hint = under if under is not None else (
            self._selected.block if self._selected is not None else None
        )
        if len(matches) > 1 and hint is not None:
            above = self._loops_above(hint)
            chosen = [t for t in matches if any(t.var is v for v in above)]
            if len(chosen) == 1:
                return chosen[0]
            if under is not None:
                raise EditorError(f'{primitive}: no loop named "{name}" above block "{under}"')
        if len(matches) > 1:
            blocks = ", ".join(t.block for t in matches)
            raise EditorError(
                f'{primitive}: loop name "{name}" is ambiguous (above blocks {blocks}); '
                f"pass under=<block name>"
            )
        return matches[0]

    def _loops_above(self, block: str) -> list[Var]:
        """Loop variables enclosing ``block`` in its scope, outermost first (what
        ``get_loops`` returns)."""
        path = block_path(self.func, block)
        return [f.loop_var for f in loops_above(path)] if path is not None else []

    # ------------------------------------------------------ argument choices
    def actions_for(self, item: TreeItem | None = None) -> tuple[str, ...]:
        """The actions that take the selected kind of item (loop or block)."""
        item = item or self._selected
        if item is None:
            return ()
        base = LOOP_ACTIONS if item.kind == "loop" else BLOCK_ACTIONS
        extra = tuple(name for name, spec in EXTRA_ACTIONS.items()
                      if item.kind in spec.targets and spec.available(self, item))
        return base + extra

    def loop_chain(self, loop: TreeItem | None = None) -> list[TreeItem]:
        """The loop and the loops nested straight below it, each the only statement in
        the body of the one above (what one reorder can rearrange): the chain ends above
        a block or above a body holding several statements."""
        loop = loop or self._selected
        if loop is None or loop.kind != "loop":
            return []
        items = {id(t.var): t for t in self.tree() if t.kind == "loop"}
        node = self._for_node(loop.var)
        chain = [items[id(node.loop_var)]]
        while isinstance(node.body, For):
            node = node.body
            chain.append(items[id(node.loop_var)])
        return chain

    def drop_order(self, source: TreeItem, target: TreeItem) -> list[TreeItem]:
        """The loops to ``reorder`` when loop ``source`` is dragged onto loop ``target``
        in the tree: ``source`` takes ``target``'s place, the loops in between shift.
        Raises :class:`EditorError` unless both are loops of one chain (one above the
        other, each loop in between the only child of its parent).

        >>> import workbench as wb
        >>> m = EditorModel(wb.workloads.mm_relu(8, 8, 8))
        >>> i, j, k = [t for t in m.tree() if t.kind == "loop"][:3]
        >>> [t.name for t in m.drop_order(k, i)]
        ['k', 'i', 'j']
        """
        from .looptree import drop_order

        tree = self.tree()
        rows = [next((n for n, t in enumerate(tree) if t.same(x)), -1) for x in (source, target)]
        order = drop_order(tree, rows[0], rows[1]) if -1 not in rows else None
        if order is None:
            raise EditorError(
                f"reorder: cannot drop {source.kind} {source.name} on {target.kind} "
                f"{target.name}: only loops nested in one chain (each the only child of "
                "the one above) can be reordered")
        return [tree[n] for n in order]

    def drop(self, source: TreeItem, target: TreeItem) -> bool:
        """Drop loop ``source`` on loop ``target`` (see :meth:`drop_order`): one reorder
        step; False (with :attr:`error`) when the drop or the reorder is refused, or when
        it would change nothing."""
        try:
            loops = self.drop_order(source, target)
        except EditorError as e:
            self._fail(e)
            return False
        return self.apply("reorder", loops=[t.var for t in loops])

    def fuse_options(self, loop: TreeItem | None = None) -> list[list[str]]:
        """Runs of perfectly nested loops starting at ``loop`` (each the only statement
        in its parent), as name lists: what fuse accepts."""
        loop = loop or self._selected
        if loop is None or loop.kind != "loop":
            return []
        node = self._for_node(loop.var)
        names = [node.loop_var.name]
        options = []
        while isinstance(node.body, For):
            node = node.body
            names.append(node.loop_var.name)
            options.append(list(names))
        return options

    def _for_node(self, var: Var) -> For:
        path = loop_path(self.func, var)
        if path is None:
            raise EditorError(f'loop "{var.name}" is not in the current IR')
        return path[-1]  # type: ignore[return-value]

    def buffers(self, block: TreeItem | str | None = None, which: str = "read") -> list[str]:
        """Names of the buffers ``block`` reads (``which="read"``) or writes, in the order
        cache_read / cache_write index them."""
        name = block.name if isinstance(block, TreeItem) else block
        if name is None:
            if self._selected is None or self._selected.kind != "block":
                return []
            name = self._selected.name
        node = find_block(self.func, name)
        if node is None:
            raise EditorError(f'{which} buffers: no block named "{name}"')
        reads, writes = infer_regions(node)
        return [r.buffer.name for r in (reads if which == "read" else writes)]

    def compute_targets(self, action: str, block: TreeItem | str | None = None) -> list[TreeItem]:
        """Loops where ``compute_at``/``reverse_compute_at`` of ``block`` is legal now,
        found by trying each on a copy (refused ones are left out)."""
        if action not in ("compute_at", "reverse_compute_at"):
            raise ValueError(f"compute_targets: not a compute-location action: {action!r}")
        name = block.name if isinstance(block, TreeItem) else block
        if name is None:
            if self._selected is None or self._selected.kind != "block":
                return []
            name = self._selected.name
        legal = []
        for item in self.tree():
            if item.kind != "loop":
                continue
            sch = self._current.copy()
            try:
                getattr(sch, action)(self._block_rv(sch, name), self._loop_rv(sch, item))
            except ScheduleError:
                continue
            legal.append(item)
        return legal

    # --------------------------------------------------------------- actions
    def _block_rv(self, sch: Schedule, name: str) -> BlockRV:
        rv = sch.existing_handle(name)
        return rv if rv is not None else sch.get_block(name)  # type: ignore[return-value]

    def _loop_rv(self, sch: Schedule, item: TreeItem) -> LoopRV:
        rv = sch.existing_handle(item.var)  # type: ignore[arg-type]
        if rv is not None:
            return rv  # type: ignore[return-value]
        for lrv in sch.get_loops(self._block_rv(sch, item.block)):
            if sch.get(lrv).loop_var is item.var:  # type: ignore[union-attr]
                return lrv
        raise EditorError(f'loop "{item.name}" is not above block "{item.block}"')

    def apply(self, action: str, **params: Any) -> bool:
        """Apply one primitive to the current schedule; True when it was applied.

        Parameters by action (loops and blocks by name; ``under=`` picks among loops of
        the same name):
        ``split(loop, factors)``, ``fuse(loops)``, ``reorder(loops)``,
        ``parallel / vectorize / unroll(loop)``, ``bind(loop, thread_axis)``,
        ``rfactor(loop, factor_axis=0)``,
        ``compute_at / reverse_compute_at(block, loop, preserve_unit_loops=False)``,
        ``compute_inline / reverse_compute_inline(block)``,
        ``cache_read / cache_write(block, buffer, scope)`` (buffer: name or index),
        ``decompose_reduction(block, loop)``; and the actions of
        :data:`~workbench.widgets.editor_actions.EXTRA_ACTIONS` with their params
        (``transform_layout(block, buffer=("write", 0), index_map="lambda i, j: ...",
        pad_value=None)``, ``pad_einsum(block, padding="32, 32, 32")``,
        ``loop_partition(loop, factors="16, None")``, ``tensorize(loop or block,
        intrin)``...).
        A refused action sets :attr:`error` (and :attr:`error_html`, the message with
        the IR marked) and changes nothing; an unknown action or a missing parameter
        raises ``TypeError``/``ValueError`` (a programming mistake, not a schedule one).
        An action that leaves the IR as it was (a reorder into the same order) is not
        recorded: it returns False and :attr:`error` says ``"no change: ..."``.
        """
        if action not in ACTIONS and action not in EXTRA_ACTIONS:
            known = ", ".join(ACTIONS + tuple(EXTRA_ACTIONS))
            raise ValueError(f"unknown action {action!r}; actions: {known}")
        sch = self._current.copy()
        try:
            description, select = self._run(action, sch, dict(params))
        except (ScheduleError, EditorError) as e:
            self._fail(e)
            return False
        if self._unchanged(sch):
            self._fail(NoChange(f"no change: {action} left the IR as it was"))
            return False
        self._push(sch, description, select)
        self._notify("apply")
        return True

    def _run_extra(self, spec: ActionSpec, sch: Schedule, p: dict, loop: Callable,
                   block: Callable) -> tuple[str, Any]:
        if "loop" in spec.targets and ("loop" in p or "block" not in spec.targets):
            item = loop()
        else:
            item = block()
        values: dict[str, Any] = {}
        for param in spec.params:
            if param.name in p:
                values[param.name] = p.pop(param.name)
            elif param.optional or param.default is not None:
                values[param.name] = param.default
            else:
                raise TypeError(f"{spec.name} needs {param.name}=")
        return spec.run(self, sch, item, values)

    def _push(self, sch: Schedule, description: str, select: TreeItem | Var | str | None) -> None:
        del self._history[self._pos + 1:]
        self._history.append(_Step(sch, description))
        self._pos += 1
        self.error = self.error_html = ""
        self._reselect(select)

    def _unchanged(self, sch: Schedule) -> bool:
        """Whether ``sch`` holds the same IR as the current step (nothing to record)."""
        before = self._current.mod
        return sch.mod is before or structural_equal(sch.mod, before)

    def refuse(self, message: str) -> None:
        """Show a refusal that no primitive raised (a loop dropped where it cannot go):
        sets :attr:`error`, changes nothing."""
        self._fail(EditorError(message))

    def _fail(self, e: Exception) -> None:
        self.error = str(e)
        if isinstance(e, ScheduleError):
            self.error_html = e.html()
        elif isinstance(e, NoChange):
            self.error_html = _notice_html(str(e))
        else:
            from ..ir.highlight import error_banner

            self.error_html = error_banner(str(e))
        self._notify("error")

    def _reselect(self, prefer: TreeItem | Var | str | None = None) -> None:
        tree = self.tree()
        if isinstance(prefer, Var):
            hit = next((t for t in tree if t.var is prefer), None)
        elif isinstance(prefer, str):
            hit = next((t for t in tree if t.kind == "block" and t.name == prefer), None)
        else:
            hit = None
        if hit is None and self._selected is not None:
            hit = next((t for t in tree if t.same(self._selected)), None)
        if hit is None:
            hit = next((t for t in tree if t.kind == "block"), None)
        self._selected = hit

    def _arg(self, action: str, params: dict, name: str, default: Any = ...) -> Any:
        if name in params:
            return params.pop(name)
        if default is ...:
            raise TypeError(f"{action} needs {name}=")
        return default

    def _run(self, action: str, sch: Schedule, p: dict) -> tuple[str, Any]:
        under = p.pop("under", None)

        def loop(key: str = "loop") -> TreeItem:
            return self._find_loop(action, self._arg(action, p, key), under)

        def block(key: str = "block") -> TreeItem:
            return self._find_block(action, self._arg(action, p, key))

        result: tuple[str, Any]
        if action in EXTRA_ACTIONS:
            result = self._run_extra(EXTRA_ACTIONS[action], sch, p, loop, block)
        elif action == "split":
            lp = loop()
            factors = self._arg(action, p, "factors")
            if isinstance(factors, str):
                factors = parse_factors(factors)
            outs = sch.split(self._loop_rv(sch, lp), factors=list(factors))
            result = (f"split {lp.name} by {list(factors)}", sch.get(outs[0]).loop_var)
        elif action in ("fuse", "reorder"):
            names = self._arg(action, p, "loops")
            if isinstance(names, str):
                names = [n.strip() for n in names.split(",") if n.strip()]
            items = [self._find_loop(action, n, under) for n in names]
            rvs = [self._loop_rv(sch, t) for t in items]
            listed = ", ".join(t.name for t in items)
            if action == "fuse":
                fused = sch.fuse(*rvs)
                result = (f"fuse {listed}", sch.get(fused).loop_var)
            else:
                sch.reorder(*rvs)
                result = (f"reorder {listed}", None)
        elif action in ("parallel", "vectorize", "unroll"):
            lp = loop()
            getattr(sch, action)(self._loop_rv(sch, lp))
            result = (f"{action} {lp.name}", None)
        elif action == "bind":
            lp = loop()
            axis = self._arg(action, p, "thread_axis")
            sch.bind(self._loop_rv(sch, lp), axis)
            result = (f"bind {lp.name} to {axis}", None)
        elif action == "rfactor":
            lp = loop()
            axis = self._arg(action, p, "factor_axis", 0)
            rf = sch.rfactor(self._loop_rv(sch, lp), int(axis))
            result = (f"rfactor {lp.name}", sch.get(rf).name)
        elif action in ("compute_at", "reverse_compute_at"):
            blk = block()
            lp = loop()
            keep = bool(self._arg(action, p, "preserve_unit_loops", False))
            index = int(self._arg(action, p, "index", -1))
            getattr(sch, action)(self._block_rv(sch, blk.name), self._loop_rv(sch, lp),
                                 preserve_unit_loops=keep, index=index)
            result = (f"{action} {blk.name} at {lp.name}", blk.name)
        elif action in ("compute_inline", "reverse_compute_inline"):
            blk = block()
            getattr(sch, action)(self._block_rv(sch, blk.name))
            result = (f"{action} {blk.name}", None)
        elif action in ("cache_read", "cache_write"):
            blk = block()
            buffer = self._arg(action, p, "buffer")
            scope = self._arg(action, p, "scope", "local" if action == "cache_write" else "shared")
            new = getattr(sch, action)(self._block_rv(sch, blk.name), buffer, scope)
            result = (f"{action} {blk.name} {buffer} in {scope}", sch.get(new).name)
        else:  # decompose_reduction
            blk = block()
            lp = loop()
            sch.decompose_reduction(self._block_rv(sch, blk.name), self._loop_rv(sch, lp))
            result = (f"decompose_reduction {blk.name} at {lp.name}", None)
        if p:
            raise TypeError(f"{action} got unexpected arguments: {', '.join(sorted(p))}")
        return result

    def undo(self) -> bool:
        """Go back one step (False at the start)."""
        if not self.can_undo:
            return False
        self._pos -= 1
        self.error = self.error_html = ""
        self._reselect()
        self._notify("undo")
        return True

    def redo(self) -> bool:
        """Re-apply the step undone last (False when there is none)."""
        if not self.can_redo:
            return False
        self._pos += 1
        self.error = self.error_html = ""
        self._reselect()
        self._notify("redo")
        return True

    def reset(self) -> None:
        """Back to the start (undoable: the history is kept for redo)."""
        self._pos = 0
        self.error = self.error_html = ""
        self._reselect()
        self._notify("reset")

    # ---------------------------------------------------------------- traces
    def save_trace(self, path: str | Path) -> Path:
        """Write the current trace as JSON (``Trace.load`` / Load trace read it back)."""
        path = Path(path)
        self.trace.save(path)
        return path

    def save_schedule(self, path: str | Path, note: str | None = None) -> Path:
        """Write the current schedule as a self-contained schedule file (the starting
        function, the trace, the last measurement): ``wb.load_schedule`` or
        ``ScheduleEditor(path)`` open it again."""
        return self.schedule_file(note=note).write(Path(path))

    def schedule_file(self, note: str | None = None) -> ScheduleFile:
        """The current schedule as a :class:`~workbench.ScheduleFile` (not written):
        the starting function, the trace, each step's IR, the last measurement."""
        from ..ir import structural_hash
        from ..schedule.file import make_schedule_file

        sch = self._current
        measured = self.measurements[-1] if self.measurements else None
        measurement = None
        if measured is not None and getattr(measured, "ok", False):
            measurement = {"median": measured.median}
        return make_schedule_file(sch.original, sch.trace, func_name=sch._func_name,
                                  target="c", result_hash=structural_hash(sch.mod),
                                  measurement=measurement, note=note)

    def load_trace(self, source: Trace | ScheduleFile | str | Path, *,
                   name: str | None = None) -> bool:
        """Replay a trace on the starting function, one undoable step per instruction
        that changes the schedule (lookups such as ``get_block`` and sampling
        instructions go with the next step that uses them; each step is described by
        its instruction), so Undo walks back through the loaded trace.

        ``source`` is a Trace, a file (a schedule file, trace JSON or ``def apply_trace``
        text) or such text itself. With ``name`` (an uploaded file's name) ``source`` is
        that file's text and is never taken as a file name. Never executed: traces are
        parsed as data. A schedule file must be for this editor's starting function. A
        trace that does not replay sets :attr:`error` and changes nothing; an empty
        trace changes nothing either. Returns whether it loaded.

        >>> import workbench as wb
        >>> model = EditorModel(wb.workloads.matmul(16, 16, 16))
        >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
        >>> j0, j1 = sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 4])
        >>> sch.reorder(j0, j1)
        >>> model.load_trace(sch.trace.as_json())
        True
        >>> [s.split(" = ")[-1][:22] for s in model.steps]
        ['sch.split(loop=l2, fac', 'sch.reorder(l4, l5)']
        """
        from ..schedule.file import ScheduleFileError, read_trace_source, read_trace_text

        try:
            try:
                if name is not None:
                    if not isinstance(source, (str, bytes)):
                        raise TypeError(f"the text of {name}, got {type(source).__name__}")
                    trace, schedule_file = read_trace_text(source, where=name)
                else:
                    trace, schedule_file = read_trace_source(source)
            except (FileNotFoundError, ScheduleFileError, TypeError) as e:
                raise EditorError(f"load trace: {e}") from None
            start = self._history[0].schedule
            if schedule_file is not None:
                theirs = schedule_file.original()
                if not structural_equal(theirs, start.original):
                    raise EditorError(
                        f"load trace: the schedule file is for {theirs.names}, which differs "
                        f"from this editor's starting function {start.original.names}; "
                        "open it in its own editor: ScheduleEditor(path)")
            sch = Schedule(start.original)
            if start._func_name is not None and len(sch.mod) > 1:
                sch.work_on(start._func_name)
            base = start.trace
            if len(base):
                base.apply_to_schedule(sch)
            steps = _replay_steps(sch, trace)
        except (ScheduleError, TraceError, EditorError) as e:
            self._fail(e)
            return False
        if not steps:
            return True
        del self._history[self._pos + 1:]
        self._history.extend(steps)
        self._pos = len(self._history) - 1
        self.error = self.error_html = ""
        self._reselect(None)
        self._notify("load")
        return True

    # -------------------------------------------------------------- measure
    def measure(self, repeat: int = 5, min_repeat_ms: float = 50) -> MeasureRecord:
        """Build the current schedule and time it in a worker process (a crash or a
        hang comes back as a failed record, never takes the kernel down)."""
        from ..runtime.cpu import build
        from ..runtime.isolation import MeasureError, measure_isolated
        from ..runtime.peak import peak_gflops

        description = self._history[self._pos].description
        try:
            kernel = build(self._current.mod)
        except Exception as e:  # noqa: BLE001 - a compiler error is a result to show
            record = MeasureRecord(self._pos, description, "build_error", error=str(e)[:500])
        else:
            try:
                m = measure_isolated(kernel, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                     timeout=self.timeout, threads=self.threads)
            except MeasureError as e:
                record = MeasureRecord(self._pos, description, e.result.status,
                                       error=e.result.error[:500])
            else:
                gflops = m.gflops
                peak = peak_gflops()
                record = MeasureRecord(self._pos, description, "ok", m.median, gflops,
                                       gflops / peak if gflops and peak else None,
                                       cv=m.cv, foreign_load=m.foreign_load, noisy=m.noisy,
                                       threads=m.threads)
        self.measurements.append(record)
        self._notify("measure")
        return record
