"""The loop-nest picture as a notebook widget: :class:`IterationView`.

The state lives in :class:`~workbench.widgets.iteration.IterationModel`; this module
only binds ipywidgets to it and renders the picture as inline SVG into a
``widgets.HTML`` (so it works, and is testable, without a browser).
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from .iteration import IterationModel

__all__ = ["IterationView"]

_NO_AXIS = "(none: one row)"


class IterationView(widgets.VBox):
    """A block's iteration space coloured by visit order, with tile lines from splits.

    The view *is* an ``ipywidgets.VBox`` (display it, or put it in another layout).
    Its parts are attributes: ``block_dropdown`` (shown when there are several
    blocks), ``x_dropdown`` (columns), ``y_dropdown`` (rows; a block with a single iteration
    variable is drawn as one row),
    ``shown_slider`` (colour only the first N% of the visits, to scrub through the
    order) and ``html`` (the picture, as ``<svg>`` in ``html.value``). ``model`` is
    the :class:`~workbench.widgets.iteration.IterationModel` behind them.

    Call :meth:`update` with the schedule after each primitive: the view redraws and
    keeps the block and axes that still exist. Problems after construction (a block
    removed by ``compute_inline``, an index the picture cannot evaluate) are shown as a
    message in the view, never raised. Bad constructor arguments raise ``ValueError``
    naming the block or axis.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.mm_relu(16, 16, 16))
    >>> view = IterationView(sch, "Y")
    >>> "<svg" in view.html.value
    True
    >>> i, j, k = sch.get_loops(sch.get_block("Y"))
    >>> j0, j1 = sch.split(j, factors=[None, 4])
    >>> sch.reorder(j0, i, j1)
    >>> view.update(sch)
    >>> view.model.picture.title
    'Y: j_0, i, j_1, k'
    """

    def __init__(self, sch: Any, block: str | None = None, x: str | None = None,
                 y: str | None = None, **kwargs: Any):
        self.model = IterationModel(sch, block, x, y)
        self._syncing = False
        style = {"description_width": "initial"}
        self.block_dropdown = widgets.Dropdown(description="block", style=style,
                                               layout=widgets.Layout(width="auto"))
        self.x_dropdown = widgets.Dropdown(description="x (columns)", style=style,
                                           layout=widgets.Layout(width="auto"))
        self.y_dropdown = widgets.Dropdown(description="y (rows)", style=style,
                                           layout=widgets.Layout(width="auto"))
        self.shown_slider = widgets.IntSlider(
            value=100, min=0, max=100, step=1, description="visits shown (%)", style=style,
            continuous_update=False, layout=widgets.Layout(width="420px"))
        self.html = widgets.HTML()
        self._sync_controls()
        self.block_dropdown.observe(self._on_block, names="value")
        self.x_dropdown.observe(self._on_x, names="value")
        self.y_dropdown.observe(self._on_y, names="value")
        self.shown_slider.observe(self._on_shown, names="value")
        controls = widgets.HBox([self.block_dropdown, self.x_dropdown, self.y_dropdown],
                                layout=widgets.Layout(flex_flow="row wrap"))
        super().__init__(children=[controls, self.shown_slider, self.html], **kwargs)
        self.add_class("wb-iteration-view")
        self.redraw()

    # ------------------------------------------------------------------ public
    @property
    def error(self) -> str | None:
        """The message shown instead of a picture, or None."""
        return self.model.error

    def update(self, sch: Any) -> None:
        """Redraw for a new version of the schedule (a Schedule or PrimFunc)."""
        self.model.update(sch)
        self._sync_controls()
        self.redraw()

    def redraw(self) -> None:
        """Render the model into ``html.value`` (a message if drawing fails)."""
        try:
            self.html.value = self.model.html()
        except Exception as exc:  # noqa: BLE001 - a view must not break the notebook
            self.model.error = f"could not draw the picture: {type(exc).__name__}: {exc}"
            self.html.value = self.model.html()

    # ---------------------------------------------------------------- bindings
    def _sync_controls(self) -> None:
        """Make the dropdowns show the model's state without firing handlers."""
        m = self.model
        self._syncing = True
        try:
            blocks = m.blocks
            self.block_dropdown.options = blocks
            self.block_dropdown.value = m.block if m.block in blocks else None
            missing = m.block not in blocks
            self.block_dropdown.layout.display = "" if len(blocks) > 1 or missing else "none"
            axes = m.axes
            self.x_dropdown.options = axes
            self.x_dropdown.value = m.x if m.x in axes else None
            self.y_dropdown.options = axes if len(axes) > 1 else [(_NO_AXIS, None)]
            self.y_dropdown.value = m.y if m.y in axes else None
            self.shown_slider.value = round(m.shown * 100)
        finally:
            self._syncing = False

    def _changed(self, action, *args: Any) -> None:
        if self._syncing:
            return
        action(*args)
        self._sync_controls()
        self.redraw()

    def _on_block(self, change: dict) -> None:
        if change["new"] is not None:
            self._changed(self.model.select_block, change["new"])

    def _on_x(self, change: dict) -> None:
        if change["new"] is not None:
            self._changed(self.model.set_x, change["new"])

    def _on_y(self, change: dict) -> None:
        if change["new"] is not None:
            self._changed(self.model.set_y, change["new"])

    def _on_shown(self, change: dict) -> None:
        self._changed(self.model.set_shown, change["new"] / 100)
