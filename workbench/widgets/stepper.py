"""``TraceStepper``: step through a trace, see the IR before and after each instruction,
and edit sampled decisions (tile sizes, categorical choices, compute locations).

The view binds ipywidgets to a :class:`~workbench.widgets.stepper_model.StepperModel`
(all the logic lives there) and renders into ``widgets.HTML`` values, so it is driven
and tested from Python without a browser. Widget callbacks never raise into the
notebook: a refused decision, a failed build or measurement shows in the error area
(class ``wb-error``) instead.

>>> import workbench as wb
>>> func = wb.workloads.mm_relu(32, 32, 32)
>>> sch = wb.Schedule(func)
>>> i, j, k = sch.get_loops(sch.get_block("Y"))
>>> tiles = sch.sample_perfect_tile(j, n=2, decision=[8, 4])
>>> j0, j1 = sch.split(j, factors=tiles)
>>> stepper = TraceStepper(sch.trace, func)
>>> stepper.step = 3
>>> stepper.decision.options[:3]
(('[2, 16]', 0), ('[4, 8]', 1), ('[8, 4]', 2))
>>> stepper.set_decision(3, [4, 8])
True
>>> stepper.next()
4
>>> "T.grid(32, 4, 8, 32)" in stepper.diff.after_text
True
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ..ir.highlight import code_block, highlight_html, highlight_lines
from ..schedule.schedule import Schedule
from ..schedule.trace import Trace
from .diff import check_syntax
from .irview import IRDiff
from .stepper_model import MeasureRecord, StepperModel
from .wording import count

__all__ = ["TraceStepper"]

_MUTED = "opacity:0.75"
_TAG = (
    "display:inline-block;padding:0 6px;margin-left:6px;border-radius:8px;font-size:90%;"
    "border:1px solid var(--jp-border-color1,#bbb)"
)
_CURRENT = "background:rgba(66,133,244,0.22)"
_FAILED = "background:rgba(211,47,47,0.22)"
_MAX_HISTORY = 10
#: The trace listing shows at most this many instructions, around the current one.
_LISTING_LINES = 40


class TraceStepper(widgets.VBox):
    """Step through ``trace`` replayed on ``func``: a slider (0 is the original
    function, ``i`` the IR after the ``i``-th instruction), previous/next buttons, a
    Play button, the trace listing with the current instruction marked, and the IR
    before/after the instruction as a diff.

    ``trace`` is a :class:`~workbench.Trace`, a Schedule (its trace), a file name (a
    trace JSON, ``def apply_trace`` text or a schedule file), a
    :class:`~workbench.ScheduleFile`, or such text itself; ``func`` is the PrimFunc or
    IRModule it starts from, optional when the source carries it (a schedule file, a
    Schedule). ``syntax`` is ``"classic"`` or ``"tirx"`` (TVM >= 0.24 names).
    ``TraceStepper("mm.trace.json", func)``, ``TraceStepper("mm.schedule.json")``.

    - "only steps that change the IR" makes previous/next/play skip lookups
      (``get_block``, ``get_loops``...); sampling steps stay, to edit their decisions.
    - At a sampling step a dropdown lists the legal decisions (perfect tilings of the
      loop, categorical candidates, the block's legal compute locations); choosing one
      replays the trace with it. A decision that a later step refuses is reported and
      nothing changes.
    - "Measure" builds the schedule of the whole trace and times it in a separate
      process: median latency, GFLOPS and the fraction of the machine's peak. Earlier
      measurements stay listed with their decisions.

    From Python: ``stepper.step`` (get/set), ``next()``, ``previous()``,
    ``set_decision(step, decision)``, ``measure()``, ``trace`` (with edited
    decisions), ``schedule`` (after the whole trace), ``error`` (``""`` if none).

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(16, 16, 16)
    >>> sch = wb.Schedule(func)
    >>> j0, j1 = sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 4])
    >>> stepper = TraceStepper(sch.trace, func)
    >>> stepper.slider.max, stepper.step
    (3, 0)
    >>> stepper.only_changes.value = True
    >>> stepper.next(), stepper.kind
    (3, 'Split')
    >>> "wb-current" in stepper.listing.value and stepper.error
    ''
    """

    def __init__(self, trace: Trace | Schedule | str | os.PathLike, func: Any = None,
                 syntax: str = "classic"):
        self.model = StepperModel(trace, func, syntax=syntax)
        self._syncing = False

        def button() -> widgets.Layout:  # as wide as its label, never squeezed
            return widgets.Layout(width="auto", flex="0 0 auto")

        self.prev_button = widgets.Button(description="◀ previous", layout=button(),
                                          tooltip="previous step")
        self.next_button = widgets.Button(description="next ▶", layout=button(),
                                          tooltip="next step")
        self.prev_button.add_class("wb-previous")
        self.next_button.add_class("wb-next")
        self.slider = widgets.IntSlider(
            value=0, min=0, max=self.model.last_step, description="step",
            continuous_update=True, layout=widgets.Layout(width="45%"),
        )
        self.play = widgets.Play(value=0, min=0, max=max(self.model.last_step, 0),
                                 interval=800, description="play", show_repeat=False)
        self.only_changes = widgets.Checkbox(
            value=False, description="only steps that change the IR", indent=False,
            tooltip="previous/next/play skip lookups (get_block, get_loops...); "
            "sampling steps stay",
            layout=widgets.Layout(width="auto"),
        )
        self.instruction = widgets.HTML(layout=widgets.Layout(width="auto"))
        self.instruction.add_class("wb-step-instruction")

        self.decision = widgets.Dropdown(description="decision", options=(),
                                         layout=widgets.Layout(width="auto"))
        self.decision_note = widgets.HTML()
        self.decision_box = widgets.HBox([self.decision, self.decision_note])
        self.decision_box.add_class("wb-decision")

        self.measure_button = widgets.Button(
            description="Measure", icon="clock-o", layout=button(),
            tooltip="build the whole trace's schedule and time it in a separate process",
        )
        self.auto_measure = widgets.Checkbox(value=False, description="measure after each change",
                                             indent=False, layout=widgets.Layout(width="auto"))
        self.measurement = widgets.HTML()
        self.measurement.add_class("wb-measure")

        self.error_area = widgets.HTML(layout=widgets.Layout(width="auto"))
        self.error_area.add_class("wb-error")
        self.listing = widgets.HTML(layout=widgets.Layout(width="auto"))
        self.listing.add_class("wb-trace-listing")
        self.code = widgets.HTML(layout=widgets.Layout(width="auto"))
        self.code.add_class("wb-ir")
        text = self.model.text(0)
        self.diff = IRDiff(text, text, mode="side", syntax=syntax)

        self.prev_button.on_click(lambda _b: self._safely(self._go_previous))
        self.next_button.on_click(lambda _b: self._safely(self._go_next))
        self.measure_button.on_click(lambda _b: self._safely(self._measure_clicked))
        self.slider.observe(self._on_slider, names="value")
        self.play.observe(self._on_play, names="value")
        self.only_changes.observe(self._on_only_changes, names="value")
        self.decision.observe(self._on_decision, names="value")

        controls = widgets.HBox([self.prev_button, self.slider, self.next_button, self.play,
                                 self.only_changes])
        measure_row = widgets.HBox([self.measure_button, self.auto_measure, self.measurement])
        super().__init__([controls, self.instruction, self.decision_box, measure_row,
                          self.error_area, self.listing, self.code, self.diff])
        self.add_class("wb-stepper")
        self._render()

    # ----------------------------------------------------------------- Python API
    def __repr__(self) -> str:
        return f"TraceStepper(step {self.model.step} of {self.model.num_steps})"

    @property
    def step(self) -> int:
        """The step shown: 0 is the original function, ``i`` the IR after the ``i``-th
        instruction. Setting it moves the slider (a ValueError names the valid range)."""
        return self.model.step

    @step.setter
    def step(self, value: int) -> None:
        self.model.step = value  # validates
        self._show(self.model.step)

    def next(self) -> int:
        """Go to the next step (the next one that changes the IR or samples, with
        "only steps that change the IR"); returns the new step."""
        self._go_next()
        return self.step

    def previous(self) -> int:
        """Go to the previous step (see :meth:`next`); returns the new step."""
        self._go_previous()
        return self.step

    @property
    def kind(self) -> str:
        """The instruction kind at the current step (``""`` at step 0)."""
        return self.model.kind()

    @property
    def trace(self) -> Trace:
        """The current trace, with any edited decisions."""
        return self.model.trace

    @property
    def schedule(self) -> Schedule:
        """A Schedule after the whole (current) trace."""
        return self.model.schedule

    @property
    def error(self) -> str:
        """The last refused decision or failed measurement, else where the trace stops
        replaying; ``""`` if none."""
        return self.model.error

    @property
    def syntax(self) -> str:
        return self.model.syntax

    @syntax.setter
    def syntax(self, value: str) -> None:
        self.model.syntax = check_syntax(value)
        self.diff.syntax = value
        self._render()

    def set_decision(self, step: int, decision: Any) -> bool:
        """Replay the trace with ``decision`` at sampling step ``step`` (a list of tile
        sizes, a candidate index, a compute location). Returns False and shows the
        reason (also in :attr:`error`) when it is refused; the trace is then unchanged.
        A step that samples nothing is a ValueError."""
        ok = self.model.set_decision(step, decision)
        if ok and self.auto_measure.value:
            self._measure()
        self._sync_range()
        self._render()
        return ok

    def measure(self, **options: Any):
        """Measure the schedule of the whole trace (see :meth:`StepperModel.measure
        <workbench.widgets.stepper_model.StepperModel.measure>` for ``options``) and
        show it; returns the ``Measurement``, or None when building or running failed
        (the reason is then in :attr:`error` and the error area)."""
        record = self._measure(**options)
        self._render()
        return None if record is None else record.measurement

    # ----------------------------------------------------------------- callbacks
    def _safely(self, action: Callable[[], Any]) -> None:
        """Run a widget callback; whatever it raises is shown, never propagated."""
        try:
            action()
        except Exception as err:  # a callback must not raise into the notebook
            self.model.report_error(err)
            self._render_error()

    def _go_next(self) -> None:
        self._show(self.model.next())

    def _go_previous(self) -> None:
        self._show(self.model.previous())

    def _show(self, step: int) -> None:
        if self.slider.value != step:
            self.slider.value = step  # the observer renders
        else:
            self._render()

    def _on_slider(self, change: dict) -> None:
        def apply() -> None:
            self.model.step = change["new"]
            self._sync_play()
            self._render()

        self._safely(apply)

    def _on_play(self, change: dict) -> None:
        if self._syncing:
            return
        visible = self.model.visible_steps()
        index = min(max(change["new"], 0), len(visible) - 1)
        self._safely(lambda: self._show(visible[index]))

    def _on_only_changes(self, change: dict) -> None:
        self.model.only_changes = bool(change["new"])
        self._safely(self._sync_range)
        self._safely(self._render)

    def _on_decision(self, change: dict) -> None:
        if self._syncing or change["new"] is None:
            return
        choices = self.model.decision_choices()
        if choices is None:
            return
        chosen = choices.choices[change["new"]].decision
        if chosen == choices.decision:
            return
        self._safely(lambda: self.set_decision(self.model.step, chosen))

    def _measure_clicked(self) -> None:
        self._measure()
        self._render()

    def _measure(self, **options: Any) -> MeasureRecord | None:
        self.measurement.value = f'<span style="{_MUTED}">measuring…</span>'
        try:
            record = self.model.measure(**options)
        except Exception as err:  # build, compile or measurement failure: show it
            self.model.report_error(err)
            self._render_measurements()
            return None
        self.model.clear_error()
        return record

    # ----------------------------------------------------------------- syncing
    def _sync_range(self) -> None:
        """Slider and Play ranges after the trace or the visible steps changed."""
        self._syncing = True
        try:
            self.slider.max = self.model.last_step
            self.play.max = max(len(self.model.visible_steps()) - 1, 0)
        finally:
            self._syncing = False
        self._sync_play()

    def _sync_play(self) -> None:
        visible = self.model.visible_steps()
        position = max((n for n, s in enumerate(visible) if s <= self.model.step), default=0)
        if self.play.value != position:
            self._syncing = True
            try:
                self.play.value = position
            finally:
                self._syncing = False

    # ----------------------------------------------------------------- rendering
    def _render(self) -> None:
        model = self.model
        step = model.step
        self._render_instruction()
        self._render_decision()
        self._render_error()
        self._render_measurements()
        self.listing.value = self._listing_html()
        failing = model.failure is not None and step == model.failure.step
        if step == 0:
            self.code.value = highlight_html(model.text(0))
            self.code.layout.display = None
            self.diff.layout.display = "none"
        elif failing:
            self.code.layout.display = "none"
            self.diff.layout.display = "none"
        else:
            self.code.layout.display = "none"
            self.diff.layout.display = None
            self.diff.update(model.text(step - 1), model.text(step))
        self.prev_button.disabled = not any(s < step for s in model.visible_steps())
        self.next_button.disabled = not any(s > step for s in model.visible_steps())

    def _render_instruction(self) -> None:
        model = self.model
        step = model.step
        total = f"step {step} of {model.num_steps}"
        if step == 0:
            body = f'<div style="{_MUTED}">{total}: the original function</div>'
            self.instruction.value = f'<div class="wb-step">{body}</div>'
            return
        if model.failure is not None and step == model.failure.step:
            tag = "failed"
        elif model.is_sampling(step):
            tag = "samples a decision"
        elif model.is_lookup(step):
            tag = "lookup"
        elif model.changes_ir(step):
            tag = "changes the IR"
        else:
            tag = "no change to the IR"
        head = f'<div style="{_MUTED}">{total}<span style="{_TAG}">{tag}</span></div>'
        code = code_block(highlight_lines(model.instruction(step)))
        self.instruction.value = f'<div class="wb-step">{head}{code}</div>'

    def _render_decision(self) -> None:
        choices = self.model.decision_choices() if self.model.is_sampling() else None
        self._syncing = True
        try:
            if choices is None:
                self.decision.options = ()
                self.decision_box.layout.display = "none"
                self.decision_note.value = ""
                return
            self.decision.options = tuple((c.label, n) for n, c in enumerate(choices.choices))
            self.decision.value = choices.index
            self.decision_box.layout.display = None
            current = "" if choices.index is not None else (
                f" · the current decision {html.escape(repr(choices.decision))} is not legal"
            )
            self.decision_note.value = (
                f'<span style="{_MUTED};padding-left:8px">{html.escape(choices.note)}'
                f"{current}</span>"
            )
        finally:
            self._syncing = False

    def _render_error(self) -> None:
        self.error_area.value = self.model.error_html()

    def _render_measurements(self) -> None:
        records = self.model.measurements
        if not records:
            self.measurement.value = ""
            return
        last = records[-1]
        stale = "" if last.trace.insts == self.model.trace.insts[: last.step] else (
            f'<span style="{_MUTED}"> (before the last change)</span>'
        )
        rows = "".join(
            f"<tr><td>{html.escape(r.decisions or '(no decisions)')}</td>"
            f"<td style='text-align:right'>{r.measurement.median * 1e3:.3f} ms</td>"
            f"<td style='text-align:right'>{_gflops(r)}</td></tr>"
            for r in reversed(records[-_MAX_HISTORY:])
        )
        table = (
            '<table class="wb-measure-history" style="border-collapse:collapse;'
            'font-size:90%;margin-top:2px"><tr><th style="text-align:left">decisions</th>'
            "<th>median</th><th>GFLOPS (of peak)</th></tr>" + rows + "</table>"
        ) if len(records) > 1 else ""
        self.measurement.value = (
            f'<div style="padding-left:8px"><b>{html.escape(last.summary())}</b>{stale}'
            f"{table}</div>"
        )

    def _listing_html(self) -> str:
        model = self.model
        lines = model.lines()
        if not lines:
            return code_block([f'<span style="{_MUTED}">(the trace is empty)</span>'])
        rendered = highlight_lines("\n".join(lines))
        failing = model.failure.step if model.failure else None
        visible = set(model.visible_steps())
        first, last = _window(len(lines), model.step)
        out = [_fold(first)] if first else []
        for n, line in enumerate(rendered[first:last], start=first):
            step = n + 1
            classes = ["wb-trace-line"]
            style = "display:inline-block;min-width:100%"
            mark = " "
            if failing is not None and step == failing:
                classes.append("wb-failed")
                style += ";" + _FAILED
                mark = "✗"
            elif failing is not None and step > failing:
                style += ";opacity:0.45"
            elif step not in visible:
                style += ";opacity:0.6"
            if step == model.step:
                classes.append("wb-current")
                style += ";" + _CURRENT
                mark = "▶" if mark == " " else mark
            gutter = f'<span style="user-select:none;{_MUTED}">{step:>3} {mark} </span>'
            out.append(f'<span class="{" ".join(classes)}" style="{style}">{gutter}{line}</span>')
        if last < len(lines):
            out.append(_fold(len(lines) - last))
        return code_block(out)


def _window(count: int, step: int) -> tuple[int, int]:
    """Lines ``[first, last)`` of the listing to show: all of a short trace, else
    :data:`_LISTING_LINES` lines around the current step's."""
    if count <= _LISTING_LINES:
        return 0, count
    first = min(max(step - 1 - _LISTING_LINES // 3, 0), count - _LISTING_LINES)
    return first, first + _LISTING_LINES


def _fold(hidden: int) -> str:
    return f'<span class="wb-trace-fold" style="{_MUTED};font-style:italic">' \
        f"    ⋯ {count(hidden, 'more instruction')}</span>"


def _gflops(record: MeasureRecord) -> str:
    g = record.measurement.gflops
    if g is None:
        return "n/a"
    frac = record.fraction_of_peak
    return f"{g:.2f}" + ("" if frac is None else f" ({frac:.1%})")
