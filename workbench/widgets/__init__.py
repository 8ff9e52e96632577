"""Interactive views for Jupyter: IR before/after, a schedule editor, a trace stepper,
a tuning dashboard and a picture of the loop nest.

Every view keeps its state in a plain-Python model and binds ipywidgets to it, so
the logic runs (and is tested) without a browser:

- :class:`IRView` / :class:`IRDiff` — highlighted IR, and what a step changed;
- :class:`ScheduleEditor` — apply primitives from a loop tree, undo/redo, measure;
  its parts :class:`LoopTree` / :class:`ReorderList` (anywidgets), :class:`TraceTab`
  and :class:`Transfer` (download to and upload from the user's computer);
- :class:`TraceStepper` — replay a trace step by step, edit its sampling decisions;
- :class:`TuningDashboard` — every candidate of a search, live or afterwards, each
  one opened in a stepper;
- :class:`CompareView` — two or more schedules of one function side by side (IR,
  loop tree, measured latency);
- :class:`IterationView` / :func:`plot_iteration_space` — the order a schedule visits
  a block's iteration space, with its tiles.
"""

from .compare import CompareModel, CompareView
from .dashboard import TuningDashboard
from .dashboard_model import DashboardModel
from .diff import DiffStats, diff_rows, render_diff, unified_text
from .editor import ScheduleEditor
from .editor_model import EditorModel
from .irview import IRDiff, IRView
from .iteration import plot_iteration_space, visit_order
from .iteration_view import IterationView
from .looptree import LoopTree, ReorderList
from .stepper import TraceStepper
from .stepper_model import StepperModel
from .trace_tab import TraceTab
from .transfer import Transfer

__all__ = [
    "CompareModel",
    "CompareView",
    "DashboardModel",
    "DiffStats",
    "EditorModel",
    "IRDiff",
    "IRView",
    "IterationView",
    "LoopTree",
    "ReorderList",
    "ScheduleEditor",
    "StepperModel",
    "TraceTab",
    "TraceStepper",
    "Transfer",
    "TuningDashboard",
    "diff_rows",
    "plot_iteration_space",
    "render_diff",
    "unified_text",
    "visit_order",
]
