"""``CompareView``: two or more schedules of one function side by side.

Each column shows a schedule's name, its loop tree (blocks and loops with extents and
kinds, read only), its IR (highlighted, or as a diff against the first column) and its
measured latency; "Measure all" builds and times every schedule in an isolated worker
process, as the editor's Measure does, and draws the latencies as bars, noisy figures
flagged.

The state and logic live in :class:`CompareModel` (plain Python, tested without a
browser); :class:`CompareView` binds ipywidgets to it.

>>> import workbench as wb
>>> func = wb.workloads.matmul(64, 64, 64)
>>> a, b = wb.Schedule(func), wb.Schedule(func)
>>> _ = b.split(b.get_loops(b.get_block("C"))[1], factors=[None, 8])
>>> model = CompareModel(a, b, names=["plain", "split j"])
>>> [c.name for c in model.columns], [len(c.tree) for c in model.columns]
(['plain', 'split j'], [4, 5])
>>> [(t.name, t.extent) for t in model.columns[1].tree if t.kind == "loop"]
[('i', 64), ('j_0', 8), ('j_1', 8), ('k', 64)]
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from ..ir import IRModule, PrimFunc, structural_equal
from ..ir.highlight import code_block, highlight_lines
from ..schedule import Schedule, Trace
from ..schedule.file import ScheduleFile, read_schedule_file
from .diff import as_ir_text, check_syntax, hanging_indent, render_diff
from .editor_model import MeasureRecord, TreeItem, tree_of
from .looptree import kind_text
from .wording import count

__all__ = ["CompareColumn", "CompareError", "CompareModel", "CompareView"]


class CompareError(ValueError):
    """The inputs of a comparison cannot be compared: fewer than two, an input of an
    unknown kind, names that do not match the inputs, or schedules of different
    functions."""


@dataclass
class CompareColumn:
    """One compared schedule: its ``name``, the ``schedule`` (a copy: changing it does
    not change the comparison), its loop ``tree`` and its ``measurements`` (newest last).
    ``source`` is what it was made from (kept for editors, which :meth:`CompareModel.refresh`
    reads again)."""

    name: str
    schedule: Schedule
    source: Any = None
    measurements: list[MeasureRecord] = field(default_factory=list)

    @property
    def tree(self) -> list[TreeItem]:
        return tree_of(self.schedule.func)

    @property
    def measurement(self) -> MeasureRecord | None:
        """The latest measurement, if any."""
        return self.measurements[-1] if self.measurements else None


def _editor_model(source: Any) -> Any:
    """The EditorModel of a ScheduleEditor or an EditorModel itself, else None."""
    from .editor_model import EditorModel

    if isinstance(source, EditorModel):
        return source
    model = getattr(source, "model", None)
    return model if isinstance(model, EditorModel) else None


def _as_schedule(source: Any, func: PrimFunc | IRModule | None, where: str) -> tuple[Schedule, str]:
    """A fresh Schedule for one input and a default name for it."""
    model = _editor_model(source)
    if model is not None:
        return model.schedule, ""
    if isinstance(source, Schedule):
        return source.copy(), ""
    if isinstance(source, (PrimFunc, IRModule)):
        return Schedule(source), ""
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[0], Trace):
        source, func = source
    if isinstance(source, Trace):
        if func is None:
            raise CompareError(f"CompareView: {where} is a trace without its function: pass "
                               "(trace, func) or CompareView(..., func=func)")
        sch = Schedule(func)
        source.apply_to_schedule(sch)
        return sch, ""
    if isinstance(source, ScheduleFile):
        return source.schedule(), ""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        return read_schedule_file(path).schedule(), path.name.split(".")[0]
    raise CompareError(
        f"CompareView: {where} is a {type(source).__name__}; expected a Schedule, a "
        "function, a (trace, func) pair, a schedule file's path or a ScheduleEditor")


def _func_of(mod: IRModule | PrimFunc) -> PrimFunc:
    if isinstance(mod, PrimFunc):
        return mod
    return mod.functions[0][1] if len(mod.functions) == 1 else mod


class CompareModel:
    """Two or more schedules of one function, for :class:`CompareView`.

    ``schedules`` are Schedules, unscheduled functions (PrimFunc or IRModule),
    ``(trace, func)`` pairs (or bare Traces with ``func=``), schedule-file paths,
    ``ScheduleFile`` objects, ScheduleEditors or EditorModels. ``names`` (one per
    schedule) label the columns; by default a file's name or ``schedule 1``,
    ``schedule 2``... Schedules of different functions (the unscheduled functions
    compared structurally) are refused with :class:`CompareError`.
    ``timeout`` and ``threads`` apply to :meth:`measure_all`, as in the editor.
    """

    def __init__(self, *schedules: Any, names: Sequence[str] | None = None,
                 func: PrimFunc | IRModule | None = None, syntax: str = "classic",
                 diff_against_first: bool = False, timeout: float = 10.0,
                 threads: int | None = None):
        from ..runtime.isolation import _check_timeout
        from ..runtime.threads import _check as check_threads

        if len(schedules) == 1 and isinstance(schedules[0], list):
            schedules = tuple(schedules[0])
        if len(schedules) < 2:
            raise CompareError(f"CompareView: needs two or more schedules, got {len(schedules)}")
        if names is not None:
            names = [str(n) for n in names]
            if len(names) != len(schedules):
                raise CompareError(f"CompareView: {count(len(names), 'name')} for "
                                   f"{count(len(schedules), 'schedule')}")
        self.syntax = check_syntax(syntax)
        self.diff_against_first = bool(diff_against_first)
        self.timeout = _check_timeout(timeout, "CompareView")
        self.threads = check_threads(threads)
        self.columns: list[CompareColumn] = []
        for n, source in enumerate(schedules):
            sch, default = _as_schedule(source, func, f"schedule {n + 1}")
            name = names[n] if names is not None else (default or f"schedule {n + 1}")
            keep = source if _editor_model(source) is not None else None
            self.columns.append(CompareColumn(name, sch, keep))
        self._check_same_function()

    # ------------------------------------------------------------------ checks
    def _check_same_function(self) -> None:
        first = self.columns[0]
        base = _func_of(first.schedule.original)
        for col in self.columns[1:]:
            other = _func_of(col.schedule.original)
            if not structural_equal(base, other):
                raise CompareError(
                    f"CompareView: '{col.name}' schedules function "
                    f"`{getattr(other, 'name', '?')}`, which is not the function "
                    f"`{getattr(base, 'name', '?')}` that '{first.name}' schedules (their "
                    "unscheduled functions differ); only schedules of one function compare")

    # ------------------------------------------------------------------ state
    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def refresh(self) -> None:
        """Read the current schedule of every column made from an editor again."""
        for col in self.columns:
            model = _editor_model(col.source)
            if model is not None:
                col.schedule = model.schedule
        self._check_same_function()

    def ir_text(self, index: int) -> str:
        """The printed IR of column ``index`` in the chosen syntax."""
        return as_ir_text(self.columns[index].schedule, self.syntax)

    # ------------------------------------------------------------------ render
    def tree_html(self, index: int) -> str:
        """The loop tree of column ``index``, read only: one row per block and loop,
        nested by indentation, loops with their extent and kind."""
        rows = []
        for item in self.columns[index].tree:
            if item.kind == "block":
                text = f'block <b>{html.escape(item.name)}</b>'
            else:
                text = f"for {html.escape(item.name)} in range({item.extent})"
                kind = kind_text(item)
                if kind != "serial":
                    text += f' <span class="wb-compare-kind" style="opacity:0.75">[{kind}]</span>'
            rows.append(f'<div class="wb-compare-tree-row" data-kind="{item.kind}" '
                        f'data-name="{html.escape(item.name)}" '
                        f'style="padding-left:{2 * item.depth}ch">{text}</div>')
        return ('<div class="wb-compare-tree" style="font-family:var(--jp-code-font-family,'
                'monospace);font-size:var(--jp-code-font-size,12px);white-space:pre;'
                'line-height:1.35;overflow-x:auto;contain:inline-size;margin-bottom:4px">'
                + "".join(rows) + "</div>")

    def ir_html(self, index: int) -> str:
        """Column ``index``'s IR highlighted, or (with ``diff_against_first``, for the
        columns after the first) its unified diff against the first column's IR, in a box
        of the column's width (a long line wraps inside it; the diff's table scrolls
        sideways) and at most ``IR_MAX_HEIGHT`` high, scrolling past that."""
        text = self.ir_text(index)
        if self.diff_against_first and index > 0:
            body = render_diff(self.ir_text(0), text, mode="unified")
        else:
            body = _wrapped_code(text)
        return f'<div class="wb-compare-ir" style="{IR_BOX}">{body}</div>'

    def latency_text(self, index: int) -> str:
        """The latest measurement of column ``index`` in a line, or a hint."""
        m = self.columns[index].measurement
        if m is None:
            return "not measured yet"
        if not m.ok:
            return f"{m.status}: {m.error}"
        text = f"{m.median * 1e3:.4f} ms"
        if m.gflops is not None:
            text += f", {m.gflops:.2f} GFLOPS"
        if m.noisy:
            from ..runtime.noise import describe_noise

            text += f" — NOISY ({describe_noise(m)})"
        return text

    def fastest(self) -> int | None:
        """The index of the column with the lowest measured latency (None if none)."""
        ok = [(c.measurement.median, n) for n, c in enumerate(self.columns)
              if c.measurement is not None and c.measurement.ok]
        return min(ok)[1] if ok else None

    # ------------------------------------------------------------------ measure
    def measure(self, index: int, repeat: int = 5, min_repeat_ms: float = 50) -> MeasureRecord:
        """Build column ``index``'s schedule and time it in a worker process (a crash
        or a hang comes back as a failed record, never takes the kernel down)."""
        from ..runtime.cpu import build
        from ..runtime.isolation import MeasureError, measure_isolated
        from ..runtime.peak import peak_gflops

        col = self.columns[index]
        step = len(col.schedule.trace)
        try:
            kernel = build(col.schedule.mod)
        except Exception as e:  # noqa: BLE001 - a compiler error is a result to show
            record = MeasureRecord(step, col.name, "build_error", error=str(e)[:500])
        else:
            try:
                m = measure_isolated(kernel, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                     timeout=self.timeout, threads=self.threads)
            except MeasureError as e:
                record = MeasureRecord(step, col.name, e.result.status,
                                       error=e.result.error[:500])
            else:
                peak = peak_gflops()
                record = MeasureRecord(step, col.name, "ok", m.median, m.gflops,
                                       m.gflops / peak if m.gflops and peak else None,
                                       cv=m.cv, foreign_load=m.foreign_load, noisy=m.noisy,
                                       threads=m.threads)
        col.measurements.append(record)
        return record

    def measure_all(self, repeat: int = 5, min_repeat_ms: float = 50) -> list[MeasureRecord]:
        """Measure every column, one after the other; returns the new records."""
        return [self.measure(n, repeat, min_repeat_ms) for n in range(len(self.columns))]

    def plot_svg(self) -> str:
        """Horizontal bars of the latest latencies (the fastest green, failures red,
        noisy figures hatched and marked ``*``), as inline SVG; "" before any measurement."""
        fig = self.plot_figure()
        if fig is None:
            return ""
        from ..search.result import figure_svg

        return figure_svg(fig)

    def plot_figure(self) -> Any:
        """The matplotlib figure of :meth:`plot_svg` (None before any measurement); every
        bar's label lies inside the axes."""
        records = [c.measurement for c in self.columns]
        if all(r is None for r in records):
            return None
        from matplotlib.figure import Figure

        from .bars import NOISY_MARK, NOISY_NOTE, label_bars

        fig = Figure(figsize=(7.0, 0.9 + 0.35 * len(records)))
        ax = fig.subplots()
        values = [r.median * 1e3 if r is not None and r.ok else 0.0 for r in records]
        best = self.fastest()
        y = list(range(len(records)))
        bars = ax.barh(y, values, color=[
            "tab:green" if n == best else ("tab:blue" if r is not None and r.ok else "tab:red")
            for n, r in enumerate(records)])
        for bar, r in zip(bars, records, strict=True):
            if r is not None and r.noisy:
                bar.set_hatch("//")
        ax.set_yticks(y, [c.name[:40] for c in self.columns], fontsize="small")
        ax.invert_yaxis()
        ax.set_xlabel("median latency (ms), lower is better")
        texts = []
        for r in records:
            if r is None:
                text = "not measured"
            elif r.ok:
                text = f"{r.median * 1e3:.3g} ms"
                text += f", {r.gflops:.1f} GFLOPS" if r.gflops else ""
                text += NOISY_MARK if r.noisy else ""
            else:
                text = r.status
            texts.append(text)
        title = "measured latency"
        if any(r is not None and r.ok and r.noisy for r in records):
            title += f"   ({NOISY_NOTE}; hatched)"
        ax.set_title(title, fontsize="medium")
        label_bars(fig, ax, values, texts)
        return fig


#: How high a column's IR grows before it scrolls.
IR_MAX_HEIGHT = "28em"
# The IR box: as wide as its column whatever the IR's longest line (``contain:
# inline-size`` keeps the lines out of the column's width computation, so columns share
# the width evenly and a line wraps at the column's edge), capped in height.
IR_BOX = (f"max-height:{IR_MAX_HEIGHT};overflow:auto;contain:inline-size;"
          "min-width:0;max-width:100%")
_IR_WRAP = "white-space:pre-wrap;word-break:normal;overflow-wrap:break-word"


def _wrapped_code(text: str) -> str:
    """``text`` highlighted for a narrow column: a long line wraps between words (not
    inside a name or a number, as JupyterLab's output style would) and its continuation
    is indented four columns past the line's own indent."""
    rows = []
    for raw, line in zip(text.split("\n"), highlight_lines(text), strict=True):
        rows.append(f'<div style="{hanging_indent(raw, pad="")}">{line or "&#8203;"}</div>')
    return code_block(["".join(rows)], _IR_WRAP)


_COLUMN_LAYOUT = dict(flex="1 1 0", min_width="0", overflow="auto",
                      border="1px solid var(--jp-border-color2,#ddd)", padding="4px")


class CompareView(widgets.VBox):
    """Two or more schedules of one function side by side: per column its name, loop
    tree, IR and measured latency; "Measure all" times each in a worker process and
    draws the latencies as bars (noisy ones flagged). A checkbox shows each IR as its
    diff against the first column's. See :class:`CompareModel` for the inputs.

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(32, 32, 32)
    >>> a, b = wb.Schedule(func), wb.Schedule(func)
    >>> b.parallel(b.get_loops(b.get_block("C"))[0])
    >>> view = CompareView(a, b, names=["serial", "parallel"])
    >>> "[parallel]" in view.tree_html[1].value
    True
    """

    def __init__(self, *schedules: Any, names: Sequence[str] | None = None,
                 func: PrimFunc | IRModule | None = None, syntax: str = "classic",
                 diff_against_first: bool = False, timeout: float = 10.0,
                 threads: int | None = None):
        self.model = CompareModel(*schedules, names=names, func=func, syntax=syntax,
                                  diff_against_first=diff_against_first, timeout=timeout,
                                  threads=threads)
        self.measure_button = widgets.Button(description="Measure all", icon="tachometer",
                                             tooltip="build and time every schedule in a "
                                                     "worker process")
        self.measure_button.add_class("wb-compare-measure")
        self.measure_button.on_click(lambda _b: self.measure_all())
        self.diff_checkbox = widgets.Checkbox(value=self.model.diff_against_first,
                                              description="diff against the first",
                                              indent=False)
        self.diff_checkbox.observe(self._on_diff, names="value")
        self.syntax_toggle = widgets.ToggleButtons(options=["classic", "tirx"],
                                                   value=self.model.syntax,
                                                   style={"button_width": "70px"})
        self.syntax_toggle.observe(self._on_syntax, names="value")
        self.status = widgets.HTML()
        toolbar = widgets.HBox([self.measure_button, self.diff_checkbox, self.syntax_toggle,
                                self.status])
        n = len(self.model.columns)
        self.name_html = [widgets.HTML() for _ in range(n)]
        self.tree_html = [widgets.HTML() for _ in range(n)]
        self.ir_html = [widgets.HTML() for _ in range(n)]
        self.latency_html = [widgets.HTML() for _ in range(n)]
        columns = []
        for k in range(n):
            box = widgets.VBox([self.name_html[k], self.tree_html[k], self.latency_html[k],
                                self.ir_html[k]], layout=widgets.Layout(**_COLUMN_LAYOUT))
            box.add_class("wb-compare-column")
            columns.append(box)
        self.plot_html = widgets.HTML()
        self.plot_html.add_class("wb-compare-plot")
        super().__init__([toolbar, widgets.HBox(columns, layout=widgets.Layout(width="100%")),
                          self.plot_html])
        self.add_class("wb-compare")
        self.render()

    # ---------------------------------------------------------------- actions
    def __repr__(self) -> str:
        return f"CompareView({', '.join(self.model.names)})"

    def measure_all(self) -> list[MeasureRecord]:
        """Measure every schedule (what the button does)."""
        self.measure_button.disabled = True
        self.status.value = "<i>building and measuring&hellip;</i>"
        try:
            records = self.model.measure_all()
        finally:
            self.measure_button.disabled = False
            self.status.value = ""
        self.render()
        return records

    def refresh(self) -> None:
        """Re-read the schedules of columns made from editors and redraw."""
        self.model.refresh()
        self.render()

    def _on_diff(self, change: dict) -> None:
        self.model.diff_against_first = bool(change["new"])
        self.render()

    def _on_syntax(self, change: dict) -> None:
        self.model.syntax = check_syntax(change["new"])
        self.render()

    # ---------------------------------------------------------------- render
    def render(self) -> None:
        """Redraw every column and the plot from the model."""
        best = self.model.fastest()
        for k, col in enumerate(self.model.columns):
            mark = " (fastest)" if k == best and len(self.model.columns) > 1 else ""
            self.name_html[k].value = (f'<b class="wb-compare-name">{html.escape(col.name)}</b>'
                                       f"{mark}")
            self.tree_html[k].value = self.model.tree_html(k)
            m = col.measurement
            color = ("var(--jp-error-color1,#c62828)" if m is not None and not m.ok else
                     "var(--jp-warn-color1,#e65100)" if m is not None and m.noisy else "inherit")
            self.latency_html[k].value = (
                f'<div class="wb-compare-latency" style="color:{color};line-height:1.35">'
                f"{html.escape(self.model.latency_text(k))}</div>")
            self.ir_html[k].value = self.model.ir_html(k)
        self.plot_html.value = self.model.plot_svg()
