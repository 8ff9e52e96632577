"""``ScheduleEditor``: schedule a function from widgets, one undoable step at a time.

The state lives in :class:`~workbench.widgets.editor_model.EditorModel`; this module
only binds ipywidgets to it. Everything the buttons do is callable from Python
(``editor.apply(...)``, ``undo()``, ``redo()``, ``reset()``, ``measure()``), so lessons
and tests drive the same code paths as a mouse does. No callback raises into the
notebook: a refused primitive shows its error (with the IR marked) in the panel.
"""

from __future__ import annotations

import functools
import html
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ..ir.highlight import code_block, error_banner, highlight_lines
from ..schedule import Schedule
from .editor_actions import EXTRA_ACTIONS, ActionSpec, Param
from .editor_model import (
    SCOPES,
    THREAD_AXES,
    EditorError,
    EditorModel,
    MeasureRecord,
    TreeItem,
    divisors,
)
from .irview import IRDiff, IRView
from .looptree import LoopTree, ReorderList
from .trace_tab import TraceTab, tool_button
from .wording import count

__all__ = ["ScheduleEditor"]

ACTION_HELP = {
    "split": "split the loop into nested loops; the inner one gets the chosen factor",
    "fuse": "merge the loop with the loops right below it into one loop",
    "reorder": "move loops up (outward) or down (inward), then Apply; or drag a loop "
               "onto another loop of its chain in the tree",
    "parallel": "run the loop's iterations on all cores (OpenMP)",
    "vectorize": "run the loop's iterations as SIMD lanes",
    "unroll": "unroll the loop completely",
    "bind": "bind the loop to a GPU thread axis (the C target runs it serially)",
    "rfactor": "split a reduction into partial results along this loop",
    "compute_at": "compute this block under a loop of its consumer (only legal loops shown)",
    "reverse_compute_at": "compute this block under a loop of its producer "
                          "(only legal loops shown)",
    "compute_inline": "inline this block's expression into its consumers",
    "reverse_compute_inline": "fold this block into its producer",
    "cache_read": "read a buffer through a copy in another storage scope",
    "cache_write": "write the output through a copy in another storage scope",
    "decompose_reduction": "move the init of the reduction out, above the chosen loop",
}


def _safe(method: Callable) -> Callable:
    """Widget callbacks never raise into the notebook: show the error instead."""

    @functools.wraps(method)
    def wrapper(self: ScheduleEditor, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - shown in the panel, not raised
            self._show_error(f"{type(e).__name__}: {e}")
            return None

    return wrapper


class ScheduleEditor(widgets.VBox):
    """The workbench: a loop tree, an action panel, the IR, the diff of the last step,
    the trace, a picture of the loop nest and measurements, for one function.

    The loop tree (:class:`~workbench.widgets.looptree.LoopTree`, ``editor.tree``) shows
    the blocks and loops nested and collapsible, each with its extent and kind. Select a
    row with the mouse or the keyboard (Up/Down, Left/Right collapse and expand,
    Home/End), pick an action (its arguments adapt to the selection: divisors of the
    loop for split, only legal target loops for compute_at, highlighted in the tree
    too; for reorder a list of the chain's loops with up/down buttons), press Apply; or
    drag a loop onto another loop of its chain to reorder them. A step that would leave
    the IR as it was is not recorded ("no change: ..."). Undo / Redo / Reset walk the
    history; Measure builds
    and times the current schedule in a worker process, with ``threads`` threads (None:
    ``wb.get_num_threads()``) and at most ``timeout`` seconds (a finite number > 0); the
    Measure tab flags a noisy measurement. ``ScheduleEditor("file.json")``
    opens a schedule file (``sch.save``): its function, with its trace as undo steps
    (one per instruction that changes the schedule); the Trace tab downloads and uploads
    traces and schedule files and opens the trace in a stepper. Pasted TVMScript text
    (a ``@T.prim_func`` or an ``@I.ir_module`` with one function) opens too. The same from Python:

    >>> import workbench as wb
    >>> editor = ScheduleEditor(wb.workloads.mm_relu(64, 64, 64))
    >>> editor.apply("split", loop="j", factors=[None, 4])
    True
    >>> "j_1" in editor.ir_html and "sch.split" in editor.trace_text
    True
    >>> editor.apply("parallel", loop="k")     # a reduction loop: refused, nothing changes
    False
    >>> editor.error.startswith("parallel: ")
    True
    >>> editor.undo()
    True
    >>> "j_1" in editor.ir_html
    False
    >>> editor.apply("reorder", loops=["i", "j", "k"])   # the order it has: not recorded
    False
    >>> editor.error, editor.model.step
    ('no change: reorder left the IR as it was', 0)
    """

    def __init__(self, func: Any, *, timeout: float = 10.0, syntax: str = "classic",
                 threads: int | None = None):
        self.model = EditorModel(func, timeout=timeout, threads=threads)
        self._syncing = False
        self._iteration_view: Any = None
        self._iteration_dirty = True
        self.last_render_seconds = 0.0

        # --- header
        self.title = widgets.HTML()
        self.title.add_class("wb-title")
        self.undo_button = tool_button("Undo", "undo", "wb-undo", "Undo the last step")
        self.redo_button = tool_button("Redo", "repeat", "wb-redo", "Redo the undone step")
        self.reset_button = tool_button("Reset", "refresh", "wb-reset", "Back to the start")
        self.measure_button = tool_button("Measure", "tachometer", "wb-measure",
                                           "Build and time the current schedule")
        self.undo_button.on_click(lambda _b: self._ui(self.undo))
        self.redo_button.on_click(lambda _b: self._ui(self.redo))
        self.reset_button.on_click(lambda _b: self._ui(self.reset))
        self.measure_button.on_click(lambda _b: self._ui(self.measure))
        header = widgets.HBox(
            [self.title, self.undo_button, self.redo_button, self.reset_button,
             self.measure_button],
            layout=widgets.Layout(align_items="center", flex_flow="row wrap"),
        )

        # --- tree and action panel
        self.tree = LoopTree(layout=widgets.Layout(width="46%"))
        self.tree.add_class("wb-tree")
        self.tree.on_select(self._on_tree)
        self.tree.on_drop(self._on_drop)
        self.tree.on_error(lambda message: self._ui(self.model.refuse, message))
        self.action = widgets.Dropdown(description="action", layout=widgets.Layout(width="auto"))
        self.action.add_class("wb-action")
        self.action.observe(self._on_action, names="value")
        self.help = widgets.HTML()
        self.help.add_class("wb-help")
        self._make_argument_widgets()
        self.args_box = widgets.VBox()
        self.apply_button = widgets.Button(description="Apply", button_style="primary",
                                           icon="play", tooltip="Apply the action")
        self.apply_button.add_class("wb-apply")
        self.no_target_note = widgets.HTML()
        self.apply_button.on_click(lambda _b: self._ui(self._apply_from_widgets))
        self.error_html = widgets.HTML()
        self.error_html.add_class("wb-error")
        panel = widgets.VBox([self.action, self.help, self.args_box, self.apply_button],
                             layout=widgets.Layout(width="54%", padding="0 0 0 8px"))
        panel.add_class("wb-actions")
        body = widgets.HBox([self.tree, panel])

        # --- tabs: IR, diff, trace, loop nest, measurements
        self.ir_view = IRView(self.model.func, syntax=syntax)
        self.diff_view = IRDiff(self.model.func, self.model.func, syntax=syntax)
        self.trace_tab = TraceTab(self.model, syntax=syntax, on_error=self._show_error)
        trace_tab = self.trace_tab
        self.trace_html = trace_tab.listing
        self.trace_path = trace_tab.path
        self.trace_status = trace_tab.status
        self.save_button = trace_tab.save_button
        self.save_schedule_button = trace_tab.save_schedule_button
        self.load_button = trace_tab.load_button
        self.nest_box = widgets.VBox()
        self.measure_html = widgets.HTML()
        self.measure_html.add_class("wb-measure-result")
        self.history_plot = widgets.HTML()
        self.history_plot.add_class("wb-measure-plot")
        measure_tab = widgets.VBox([self.measure_html, self.history_plot])
        self.tabs = widgets.Tab(children=[self.ir_view, self.diff_view, trace_tab,
                                          self.nest_box, measure_tab])
        for n, name in enumerate(["IR", "Last step", "Trace", "Loop nest", "Measure"]):
            self.tabs.set_title(n, name)
        self.tabs.add_class("wb-tabs")
        self.tabs.observe(self._on_tab, names="selected_index")

        super().__init__([header, body, self.error_html, self.tabs])
        self.add_class("wb-editor")
        self.model.on_change(self._on_model)
        self._render_all()

    # ------------------------------------------------------------ widgets
    def __repr__(self) -> str:
        m = self.model
        last = m.steps[-1] if m.steps else "start"
        return f"ScheduleEditor({m.original.name}, step {m.step}: {last})"

    def _make_argument_widgets(self) -> None:
        self._extra_widgets: dict[tuple[str, str], widgets.Widget] = {}
        auto = widgets.Layout(width="auto")
        self.split_factor = widgets.Dropdown(description="inner factor", layout=auto)
        self.split_factor.add_class("wb-split-factor")
        self.split_factors = widgets.Text(description="or factors", placeholder="None, 8, 4",
                                          layout=widgets.Layout(width="260px"))
        self.split_factors.add_class("wb-split-factors")
        self.fuse_loops = widgets.Dropdown(description="loops", layout=auto)
        self.fuse_loops.add_class("wb-fuse-loops")
        self.reorder_loops = ReorderList()
        self.thread_axis = widgets.Dropdown(options=THREAD_AXES, description="thread",
                                            layout=auto)
        self.thread_axis.add_class("wb-thread")
        self.factor_axis = widgets.BoundedIntText(value=0, min=0, max=8,
                                                  description="factor axis",
                                                  layout=widgets.Layout(width="180px"))
        self.target = widgets.Dropdown(description="at loop", layout=auto)
        self.target.add_class("wb-target")
        self.preserve_unit_loops = widgets.Checkbox(value=False, indent=False,
                                                    description="preserve unit loops")
        self.buffer = widgets.Dropdown(description="buffer", layout=auto)
        self.buffer.add_class("wb-buffer")
        self.scope = widgets.Dropdown(options=SCOPES, value="shared", description="scope",
                                      layout=auto)
        self.scope.add_class("wb-scope")

    # ----------------------------------------------------------- Python API
    @property
    def schedule(self) -> Schedule:
        """A copy of the current schedule."""
        return self.model.schedule

    @property
    def trace(self):
        """The current trace (replayable on the function)."""
        return self.model.trace

    @property
    def error(self) -> str:
        """The last error message, "" when the last action succeeded."""
        return self.model.error

    @property
    def ir_html(self) -> str:
        """The rendered IR (what the IR tab shows)."""
        return self.ir_view.code.value

    @property
    def trace_text(self) -> str:
        """The trace as ``apply_trace`` text."""
        return self.model.trace.script()

    @property
    def measurements(self) -> list[MeasureRecord]:
        return self.model.measurements

    def apply(self, action: str, **params: Any) -> bool:
        """Apply a primitive by name; see :meth:`EditorModel.apply` for the parameters.

        ``editor.apply("split", loop="j", factors=[None, 4])``,
        ``editor.apply("reorder", loops=["j_0", "k", "j_1"])``,
        ``editor.apply("reverse_compute_at", block="C", loop="j_0")``...
        Returns False (and sets :attr:`error`) when the primitive refused.
        """
        return self.model.apply(action, **params)

    def select(self, item: TreeItem | str | None = None, **kw: Any) -> TreeItem:
        """Select a block (``select("Y")``) or a loop (``select(loop="j", under="Y")``)."""
        return self.model.select(item, **kw)

    def undo(self) -> bool:
        return self.model.undo()

    def redo(self) -> bool:
        return self.model.redo()

    def reset(self) -> None:
        self.model.reset()

    def measure(self) -> MeasureRecord:
        """Build and time the current schedule in a worker process; the result is
        shown and added to the latency history plot."""
        self.measure_html.value = "<i>building and measuring&hellip;</i>"
        self.measure_button.disabled = True
        try:
            return self.model.measure()
        finally:
            self.measure_button.disabled = False

    def save_trace(self, path: str) -> None:
        """Write the trace as JSON to ``path`` on the server (next to the notebook)."""
        self.model.save_trace(path)

    def save_schedule(self, path: str, note: str | None = None) -> None:
        """Write a self-contained schedule file (function, trace, last measurement) to
        ``path`` on the server."""
        self.model.save_schedule(path, note=note)

    def load_trace(self, source: Any) -> bool:
        """Replay a trace or schedule file (a path on the server, a Trace, or text), one
        undo step per instruction that changes the schedule."""
        return self.model.load_trace(source)

    def download_trace(self) -> str:
        """Save the trace on the user's computer (through the browser) as
        ``<function>.trace.json``; returns the file name."""
        return self.trace_tab.download_trace()["name"]

    def download_schedule(self) -> str:
        """Save a schedule file on the user's computer as ``<function>.schedule.json``;
        returns the file name."""
        return self.trace_tab.download_schedule()["name"]

    def open_in_stepper(self):
        """Show a ``TraceStepper`` of the current trace in the Trace tab; returns it."""
        stepper = self.trace_tab.open_in_stepper()
        self.tabs.selected_index = 2
        return stepper

    # --------------------------------------------------------- UI handlers
    def _ui(self, fn: Callable, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - never raise into the notebook
            self._show_error(f"{type(e).__name__}: {e}")
            return None

    def _show_error(self, text: str) -> None:
        self.error_html.value = error_banner(text)

    @_safe
    def _on_tree(self, index: int) -> None:
        self.model.select(self.tree.items[index])

    @_safe
    def _on_drop(self, source: int, target: int, _order: list[int]) -> None:
        items = self.tree.items
        self.model.drop(items[source], items[target])

    @_safe
    def _on_action(self, change: dict) -> None:
        if not self._syncing:
            self._render_arguments()

    @_safe
    def _on_tab(self, change: dict) -> None:
        if change["new"] == 3:
            self._render_nest()

    def _apply_from_widgets(self) -> None:
        item = self.model.selected
        action = self.action.value
        if item is None or action is None:
            self._show_error("select a block or a loop in the tree first")
            return
        params = self._params(action, item)
        if params is not None:
            self.model.apply(action, **params)

    def _params(self, action: str, item: TreeItem) -> dict | None:
        if action in EXTRA_ACTIONS:
            return self._extra_params(EXTRA_ACTIONS[action], item)
        if item.kind == "loop":
            loop = item.var
            if action == "split":
                typed = self.split_factors.value.strip()
                if typed:
                    return {"loop": loop, "factors": typed}
                if self.split_factor.value is None:
                    self._show_error(f"split: loop {item.name} (extent {item.extent}) has no "
                                     "divisor to split by; type factors, e.g. None, 4")
                    return None
                return {"loop": loop, "factors": [None, self.split_factor.value]}
            if action == "fuse":
                if not self.fuse_loops.value:
                    self._show_error(f"fuse: no loop is nested right below {item.name}")
                    return None
                return {"loops": self._chain_vars(item, len(self.fuse_loops.value))}
            if action == "reorder":
                return {"loops": self._reorder_vars(item)}
            if action == "bind":
                return {"loop": loop, "thread_axis": self.thread_axis.value}
            if action == "rfactor":
                return {"loop": loop, "factor_axis": self.factor_axis.value}
            return {"loop": loop}
        if action in ("compute_at", "reverse_compute_at", "decompose_reduction"):
            if self.target.value is None:
                self._show_error(f"{action}: no loop where block {item.name} can go")
                return None
            params = {"block": item.name, "loop": self.target.value}
            if action != "decompose_reduction":
                params["preserve_unit_loops"] = self.preserve_unit_loops.value
            return params
        if action in ("cache_read", "cache_write"):
            return {"block": item.name, "buffer": self.buffer.value, "scope": self.scope.value}
        return {"block": item.name}

    def _extra_widget(self, spec: ActionSpec, param: Param) -> widgets.Widget:
        """The (cached) widget for one param of an extra action."""
        key = (spec.name, param.name)
        w = self._extra_widgets.get(key)
        if w is None:
            if param.kind == "text":
                w = widgets.Text(description=param.label, placeholder=param.placeholder,
                                 layout=widgets.Layout(width="420px"))
            elif param.kind == "int":
                w = widgets.IntText(value=param.default or 0, description=param.label,
                                    layout=widgets.Layout(width="180px"))
            elif param.kind == "bool":
                w = widgets.Checkbox(value=bool(param.default), indent=False,
                                     description=param.label)
            else:
                w = widgets.Dropdown(description=param.label, layout=widgets.Layout(width="auto"))
            w.add_class(f"wb-arg-{param.name.replace('_', '-')}")
            self._extra_widgets[key] = w
        return w

    def _extra_arguments(self, spec: ActionSpec, item: TreeItem) -> list[widgets.Widget]:
        kids = []
        for param in spec.params:
            w = self._extra_widget(spec, param)
            if param.kind == "choice" and param.choices is not None:
                w.options = param.choices(self.model, item)
                _first(w)
            kids.append(w)
        return kids

    def _extra_params(self, spec: ActionSpec, item: TreeItem) -> dict | None:
        params: dict[str, Any] = {"loop" if item.kind == "loop" else "block":
                                  item.var if item.kind == "loop" else item.name}
        for param in spec.params:
            value = self._extra_widget(spec, param).value
            if param.kind == "choice" and value is None:
                self._show_error(f"{spec.name}: nothing to choose as {param.label} for "
                                 f"{item.kind} {item.name}")
                return None
            if param.kind == "text" and not str(value).strip():
                if not param.optional:
                    self._show_error(f"{spec.name}: type the {param.label} "
                                     f"(e.g. {param.placeholder})")
                    return None
                value = None
            params[param.name] = value
        return params

    def _chain_vars(self, item: TreeItem, count: int) -> list:
        chain = [item.var]
        node = self.model._for_node(item.var)
        while len(chain) < count:
            node = node.body
            chain.append(node.loop_var)
        return chain

    def _reorder_vars(self, item: TreeItem) -> list:
        chain = self.model.loop_chain(item)
        by_name: dict[str, list] = {}
        for t in chain:
            by_name.setdefault(t.name, []).append(t.var)
        out = []
        for name in self.reorder_loops.value:
            if not by_name.get(name):
                raise EditorError(f"reorder: {name} is not a loop of this chain")
            out.append(by_name[name].pop(0))
        return out

    # -------------------------------------------------------------- render
    def _on_model(self, reason: str) -> None:
        try:
            if reason == "select":
                self._render_tree()
                self._render_actions()
                self._iteration_dirty = True  # the picture follows the selected block
                if self.tabs.selected_index == 3:
                    self._render_nest()
            elif reason == "error":
                self.error_html.value = self.model.error_html
            elif reason == "measure":
                self._render_measurements()
            else:
                self._render_all()
        except Exception as e:  # noqa: BLE001 - never raise into the notebook
            self._show_error(f"{type(e).__name__}: {e}")

    def _render_all(self) -> None:
        start = time.perf_counter()
        m = self.model
        self._render_tree()
        self._render_actions()
        self.ir_view.update(m.func)
        before = m.previous_func()
        self.diff_view.update(before if before is not None else m.func, m.func)
        self.trace_html.value = code_block(highlight_lines(m.trace.script()))
        self.error_html.value = m.error_html
        self.undo_button.disabled = not m.can_undo
        self.redo_button.disabled = not m.can_redo
        self._render_title()
        self._iteration_dirty = True
        if self.tabs.selected_index == 3:
            self._render_nest()
        self.last_render_seconds = time.perf_counter() - start

    def _render_title(self) -> None:
        m = self.model
        last = m.steps[-1] if m.steps else "start"
        stats = ""
        if m.previous_func() is not None:  # the diff view shows this step already
            s = self.diff_view.stats
            stats = f" &middot; last step changed {count(s.added + s.removed + s.changed, 'line')}"
        self.title.value = (
            f'<b style="font-size:110%">{html.escape(m.func.name)}</b> &middot; step '
            f"{m.step} of {len(m._history) - 1} &middot; <i>{html.escape(last)}</i>{stats}"
        )

    def _render_tree(self) -> None:
        items = self.model.tree()
        selected = self.model.selected
        index = next((n for n, t in enumerate(items) if t.same(selected)), -1)
        self.tree.set_items(items, index)

    def _render_actions(self) -> None:
        actions = self.model.actions_for()
        self._syncing = True
        try:
            if tuple(self.action.options) != actions:
                keep = self.action.value
                self.action.options = actions
                self.action.value = keep if keep in actions else (actions[0] if actions else None)
        finally:
            self._syncing = False
        self._render_arguments()

    def _render_arguments(self) -> None:
        item = self.model.selected
        action = self.action.value
        self.help.value = (
            f'<span style="opacity:0.8">{html.escape(_help(action))}</span>'
            if action else "")
        self.apply_button.disabled = False
        if item is None or action is None:
            self.args_box.children = ()
            self.tree.set_targets([])
            return
        kids: list[widgets.Widget] = []
        targets: list[TreeItem] = []
        if action == "split":
            opts = divisors(item.extent or 1)
            self.split_factor.options = [(str(d), d) for d in opts]
            if opts:
                self.split_factor.value = 4 if 4 in opts else opts[len(opts) // 2]
            self.split_factors.value = ""
            kids = [self.split_factor, self.split_factors]
        elif action == "fuse":
            opts = self.model.fuse_options(item)
            self.fuse_loops.options = [(", ".join(o), tuple(o)) for o in opts]
            _first(self.fuse_loops)
            kids = [self.fuse_loops]
        elif action == "reorder":
            self.reorder_loops.set_items([t.name for t in self.model.loop_chain(item)])
            kids = [self.reorder_loops]
        elif action == "bind":
            kids = [self.thread_axis]
        elif action == "rfactor":
            kids = [self.factor_axis]
        elif action in ("compute_at", "reverse_compute_at"):
            targets = self.model.compute_targets(action, item)
            self.target.options = [(f"{t.name} (above {t.block})", t.var) for t in targets]
            _first(self.target)
            self.target.description = "at loop"
            kids = [self.target, self.preserve_unit_loops]
            if not targets:  # nothing to choose: say so rather than offer an empty list
                self.no_target_note.value = (
                    f'<span class="wb-no-target" style="opacity:0.8">{action} of block '
                    f"<b>{html.escape(item.name)}</b>: no loop where it is legal now "
                    f"(try {'reverse_compute_at' if action == 'compute_at' else 'compute_at'}"
                    " or another block)</span>")
                kids = [self.no_target_note]
                self.apply_button.disabled = True
        elif action == "decompose_reduction":
            loops = [t for t in self.model.tree() if t.kind == "loop"
                     and any(t.var is v for v in self.model._loops_above(item.name))]
            self.target.options = [(t.name, t.var) for t in loops]
            _first(self.target)
            self.target.description = "above loop"
            kids = [self.target]
        elif action in EXTRA_ACTIONS:
            kids = self._extra_arguments(EXTRA_ACTIONS[action], item)
        elif action in ("cache_read", "cache_write"):
            which = "read" if action == "cache_read" else "write"
            self.buffer.options = self.model.buffers(item, which)
            _first(self.buffer)
            self.scope.value = "shared" if action == "cache_read" else "local"
            kids = [self.buffer, self.scope]
        self.args_box.children = tuple(kids)
        rows = self.tree.items  # the legal compute_at targets, highlighted in the tree
        self.tree.set_targets([n for n, t in enumerate(rows) if any(t.same(x) for x in targets)])

    def _render_nest(self) -> None:
        if not self._iteration_dirty:
            return
        from .iteration_view import IterationView

        sch = self.model.schedule
        block = self.model.selected.block if self.model.selected else None
        view = self._iteration_view
        if view is None:
            view = self._iteration_view = IterationView(sch, block)
            self.nest_box.children = (view,)
        else:
            view.update(sch)
            if block in view.model.blocks and view.model.block != block:
                view.block_dropdown.value = block
        self._iteration_dirty = False

    def _render_measurements(self) -> None:
        records = self.model.measurements
        if not records:
            return
        last = records[-1]
        color = "inherit" if last.ok else "var(--jp-error-color1,#c62828)"
        threads = count(last.threads, "thread") if last.threads else ""
        note = ""
        if last.noisy:
            note = ('<div class="wb-noisy-warning" style="color:var(--jp-warn-color1,#e65100)">'
                    "Noisy: other processes used the CPU or the samples spread widely; "
                    "measure again before comparing.</div>")
        self.measure_html.value = (
            f'<div style="font-family:var(--jp-code-font-family,monospace);color:{color}">'
            f"{html.escape(last.summary())}"
            + (f' <span style="opacity:0.7">({threads})</span>' if threads else "")
            + f"</div>{note}"
        )
        self.history_plot.value = _history_svg(records)
        self.tabs.selected_index = 4


def _help(action: str) -> str:
    if action in EXTRA_ACTIONS:
        return EXTRA_ACTIONS[action].help
    return ACTION_HELP.get(action, "")


def _first(dropdown: widgets.Dropdown) -> None:
    """Select the first option (ipywidgets leaves the value unset after new options)."""
    if dropdown.options and dropdown.value is None:
        first = dropdown.options[0]
        dropdown.value = first[1] if isinstance(first, tuple) else first


def _history_svg(records: list[MeasureRecord]) -> str:
    """Horizontal bars: the latency of each measured schedule, newest at the bottom."""
    from ..search.result import figure_svg

    return figure_svg(_history_figure(records))


def _history_figure(records: list[MeasureRecord]) -> Any:
    """The figure of :func:`_history_svg`; every bar's label lies inside the axes, a
    noisy figure is marked ``*`` and the title says what the mark means."""
    from matplotlib.figure import Figure

    from .bars import NOISY_MARK, NOISY_NOTE, label_bars

    ok = [r for r in records if r.ok]
    height = 0.9 + 0.32 * max(1, len(records))
    fig = Figure(figsize=(7.0, height))
    ax = fig.subplots()
    labels = [f"#{n + 1} step {r.step}: {r.description}"[:48] for n, r in enumerate(records)]
    values = [r.median * 1e3 if r.ok else 0.0 for r in records]
    best = min((r.median for r in ok), default=None)
    colors = ["tab:green" if r.ok and r.median == best else
              ("tab:blue" if r.ok else "tab:red") for r in records]
    y = list(range(len(records)))
    ax.barh(y, values, color=colors)
    ax.set_yticks(y, labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("median latency (ms), lower is better")
    texts = [(f"{r.median * 1e3:.3g} ms" + (f", {r.gflops:.1f} GFLOPS" if r.gflops else "")
              + (NOISY_MARK if r.noisy else "") if r.ok else r.status) for r in records]
    title = "this session's measured schedules"
    if any(r.ok and r.noisy for r in records):
        title += f"   ({NOISY_NOTE})"
    ax.set_title(title, fontsize="medium")
    label_bars(fig, ax, values, texts)
    return fig
