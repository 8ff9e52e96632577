"""Interactive views for Jupyter: IR before/after, a schedule editor, a trace stepper,
a tuning dashboard and a picture of the loop nest.

Every view keeps its state in a plain-Python model and binds ipywidgets to it, so
the logic runs (and is tested) without a browser:

- :class:`IRView` / :class:`IRDiff` — highlighted IR, and what a step changed;
- :class:`ScheduleEditor` — apply primitives from a loop tree, undo/redo, measure;
- :class:`TraceStepper` — replay a trace step by step, edit its sampling decisions;
- :class:`TuningDashboard` — every candidate of a search, live or afterwards, each
  one opened in a stepper;
- :class:`IterationView` / :func:`plot_iteration_space` — the order a schedule visits
  a block's iteration space, with its tiles.
"""

from .dashboard import TuningDashboard
from .dashboard_model import DashboardModel
from .diff import DiffStats, diff_rows, render_diff, unified_text
from .editor import ScheduleEditor
from .editor_model import EditorModel
from .irview import IRDiff, IRView
from .iteration import plot_iteration_space, visit_order
from .iteration_view import IterationView
from .stepper import TraceStepper
from .stepper_model import StepperModel

__all__ = [
    "DashboardModel",
    "DiffStats",
    "EditorModel",
    "IRDiff",
    "IRView",
    "IterationView",
    "ScheduleEditor",
    "StepperModel",
    "TraceStepper",
    "TuningDashboard",
    "diff_rows",
    "plot_iteration_space",
    "render_diff",
    "unified_text",
    "visit_order",
]
