"""``IRView`` (highlighted IR) and ``IRDiff`` (what changed between two IRs).

Both are ipywidgets boxes whose content is a ``widgets.HTML`` (``.code`` /
``.html_widget``) rendered by the plain functions in :mod:`workbench.ir.highlight`
and :mod:`workbench.widgets.diff`, so tests read ``.value`` without a browser.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from ..ir.highlight import highlight_html
from .diff import DiffStats, as_ir_text, check_syntax, diff_rows, render_diff, unified_text

__all__ = ["IRDiff", "IRView"]

SYNTAXES = (("classic", "classic"), ("TVM >= 0.24 (tirx)", "tirx"))


class IRView(widgets.VBox):
    """The IR of a function, module or schedule, highlighted for the notebook theme.

    ``syntax`` is ``"classic"`` (``T.block``) or ``"tirx"`` (``T.sblock``, what
    TVM >= 0.24 parses); a toggle above the code switches it. ``update(source)``
    shows another IR (the editor calls it after each step).

    >>> import workbench as wb
    >>> view = IRView(wb.workloads.mm_relu(8, 8, 8))
    >>> "T.block" in view.text and "wb-ir" in view.code._dom_classes
    True
    >>> view.syntax = "tirx"; "T.sblock" in view.code.value
    True
    """

    def __init__(self, source: Any, syntax: str = "classic"):
        self._source = source
        self.syntax_toggle = widgets.ToggleButtons(
            options=SYNTAXES, value=check_syntax(syntax), description="syntax",
            style={"button_width": "auto"}, layout=widgets.Layout(width="auto"),
        )
        self.code = widgets.HTML(layout=widgets.Layout(width="auto"))
        self.code.add_class("wb-ir")
        self.syntax_toggle.observe(lambda _change: self._render(), names="value")
        super().__init__([self.syntax_toggle, self.code])
        self.add_class("wb-irview")
        self._render()

    @property
    def syntax(self) -> str:
        return self.syntax_toggle.value

    @syntax.setter
    def syntax(self, value: str) -> None:
        self.syntax_toggle.value = check_syntax(value)

    @property
    def text(self) -> str:
        """The printed IR currently shown."""
        return as_ir_text(self._source, self.syntax)

    def update(self, source: Any) -> None:
        """Show ``source`` (PrimFunc, IRModule, Schedule or IR text) instead."""
        as_ir_text(source, self.syntax)  # refuse a wrong type before changing anything
        self._source = source
        self._render()

    def _render(self) -> None:
        self.code.value = highlight_html(self.text)


class IRDiff(widgets.VBox):
    """What changed between two IRs: ``IRDiff(before, after)``.

    Lines added, removed and changed are tinted and marked ``+``/``-``/``~`` in the
    gutter; the characters that differ inside a changed line are emphasised. A toggle
    switches between side by side (``mode="side"``) and unified; "changes only"
    folds unchanged runs to ``context`` lines. ``before``/``after`` are PrimFuncs,
    IRModules, Schedules or printed IR.

    >>> import workbench as wb
    >>> func = wb.workloads.mm_relu(8, 8, 8)
    >>> sch = wb.Schedule(func)
    >>> _ = sch.split(sch.get_loops(sch.get_block("Y"))[1], factors=[None, 4])
    >>> diff = IRDiff(func, sch)
    >>> str(diff.stats)
    '+2 -0 ~2'
    >>> print(diff.unified().splitlines()[6])
    -    for i, j, k in T.grid(8, 8, 8):
    """

    def __init__(self, before: Any, after: Any, mode: str = "side", context: int | None = None,
                 syntax: str = "classic"):
        self._before, self._after = before, after
        self.syntax = check_syntax(syntax)
        self.mode_toggle = widgets.ToggleButtons(
            options=(("side by side", "side"), ("unified", "unified")), value=_check_mode(mode),
            style={"button_width": "auto"}, layout=widgets.Layout(width="auto"),
        )
        self.changes_only = widgets.Checkbox(
            value=context is not None, description="changes only", indent=False,
            layout=widgets.Layout(width="auto"),
        )
        self.context = 3 if context is None else int(context)
        self.summary = widgets.HTML()
        self.summary.add_class("wb-diff-stats")
        self.html_widget = widgets.HTML(layout=widgets.Layout(width="auto"))
        self.html_widget.add_class("wb-diff")
        for w in (self.mode_toggle, self.changes_only):
            w.observe(lambda _change: self._render(), names="value")
        bar = widgets.HBox([self.mode_toggle, self.changes_only, self.summary])
        super().__init__([bar, self.html_widget])
        self.add_class("wb-irdiff")
        self._render()

    @property
    def mode(self) -> str:
        return self.mode_toggle.value

    @mode.setter
    def mode(self, value: str) -> None:
        self.mode_toggle.value = _check_mode(value)

    @property
    def before_text(self) -> str:
        return as_ir_text(self._before, self.syntax)

    @property
    def after_text(self) -> str:
        return as_ir_text(self._after, self.syntax)

    @property
    def stats(self) -> DiffStats:
        """Lines added, removed and changed (counted when the diff was drawn)."""
        return self._stats

    def unified(self, context: int = 3) -> str:
        """The diff as plain ``diff -u`` text."""
        return unified_text(self.before_text, self.after_text, context)

    def update(self, before: Any, after: Any) -> None:
        """Show the diff of two other IRs."""
        as_ir_text(before, self.syntax), as_ir_text(after, self.syntax)
        self._before, self._after = before, after
        self._render()

    def _render(self) -> None:
        before, after = self.before_text, self.after_text
        context = self.context if self.changes_only.value else None
        self.html_widget.value = render_diff(before, after, self.mode, context)
        s = self._stats = DiffStats.of(diff_rows(before, after))
        self.summary.value = (
            '<span style="font-family:var(--jp-code-font-family,monospace);padding-left:8px">'
            f'<span style="color:var(--jp-success-color1,#2e7d32)">+{s.added}</span> '
            f'<span style="color:var(--jp-error-color1,#c62828)">-{s.removed}</span> '
            f'<span style="color:var(--jp-warn-color1,#b26a00)">~{s.changed}</span></span>'
        )



def _check_mode(mode: str) -> str:
    if mode not in ("side", "unified"):
        raise ValueError(f'diff mode must be "side" or "unified", got {mode!r}')
    return mode
