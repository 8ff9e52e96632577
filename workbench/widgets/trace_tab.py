"""The editor's Trace tab: the trace, and moving it in and out of the browser.

:class:`TraceTab` works on an :class:`~workbench.widgets.editor_model.EditorModel`:

- the trace listing (``apply_trace`` text, class ``wb-trace``);
- "Download trace" (``<function>.trace.json``, TVM's trace JSON) and "Download schedule"
  (``<function>.schedule.json``, a schedule file: the function, the trace and each step's
  IR) save on the user's computer, through the browser;
- "Upload" opens a file from the user's computer (a trace JSON, ``def apply_trace`` text
  or a schedule file of this function) and replays it, one undo step per instruction
  that changes the schedule;
- "Open in stepper" shows a :class:`~workbench.widgets.TraceStepper` of the current trace
  on the starting function, inside the tab (``wb-stepper-box``, with a close button);
- on the server, next to the notebook: a file name, "Save trace on server", "Save
  schedule on server" and "Load from server".

No button raises into the notebook: errors go to ``on_error`` (the editor's error area).

>>> import workbench as wb
>>> from workbench.widgets.editor_model import EditorModel
>>> model = EditorModel(wb.workloads.matmul(16, 16, 16))
>>> _ = model.apply("split", loop="j", factors=[None, 4])
>>> tab = TraceTab(model)
>>> tab.download_trace()["name"], tab.download_schedule()["name"]
('matmul.trace.json', 'matmul.schedule.json')
>>> tab.open_in_stepper().model.num_steps
3
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from ..ir.highlight import code_block, error_banner, highlight_lines
from .editor_model import EditorModel
from .transfer import Transfer, TransferError, safe_file_name
from .wording import count

__all__ = ["TraceTab"]

_MUTED = "opacity:0.75"


def tool_button(text: str, icon: str, css: str, tip: str) -> widgets.Button:
    """A toolbar button as wide as its label, with a CSS class for tests and styling."""
    b = widgets.Button(description=text, icon=icon, tooltip=tip,
                       layout=widgets.Layout(width="auto"))
    b.add_class(css)
    return b


class TraceTab(widgets.VBox):
    """The Trace tab of the editor (see the module docstring).

    ``model`` is the editor's model; ``syntax`` the syntax the stepper shows (``classic``
    or ``tirx``); ``on_error(message)`` shows an error (by default in the tab's status
    line). Trace JSON is written with TVM >= 0.24 kind names (``GetSBlock``), as in
    schedule files, so TVM 0.27 loads the downloads as they are.
    """

    def __init__(self, model: EditorModel, *, syntax: str = "classic",
                 on_error: Callable[[str], Any] | None = None):
        self.model = model
        self.syntax = syntax
        self._on_error = on_error
        self.stepper: Any = None

        self.listing = widgets.HTML()
        self.listing.add_class("wb-trace")
        self.status = widgets.HTML()
        self.status.add_class("wb-trace-status")

        # --- the user's computer
        self.download_trace_button = tool_button(
            "Download trace", "download", "wb-download-trace",
            "Save the trace (TVM's trace JSON) on your computer as <function>.trace.json")
        self.download_schedule_button = tool_button(
            "Download schedule", "download", "wb-download-schedule",
            "Save a schedule file on your computer (<function>.schedule.json): the function, "
            "the trace and each step's IR; it opens in the editor, a stepper, TVM and "
            "JupyterLab")
        self.transfer = Transfer(
            label="Upload",
            button_tooltip="Open a trace JSON, apply_trace text (.py) or schedule file from "
                           "your computer; it replays as undo steps")
        self.open_stepper_button = tool_button(
            "Open in stepper", "step-forward", "wb-open-stepper",
            "Step through the current trace in a TraceStepper, below")
        self.download_trace_button.on_click(lambda _b: self._ui(self.download_trace))
        self.download_schedule_button.on_click(lambda _b: self._ui(self.download_schedule))
        self.open_stepper_button.on_click(lambda _b: self._ui(self.open_in_stepper))
        self.transfer.on_upload(lambda name, text: self._ui(self.upload, name, text))
        self.transfer.on_error(lambda e: self._ui(self._refused, e))
        computer = widgets.HBox(
            [self.download_trace_button, self.download_schedule_button, self.transfer,
             self.open_stepper_button],
            layout=widgets.Layout(align_items="center", flex_flow="row wrap"))
        computer.add_class("wb-trace-computer")

        # --- the server's disk (next to the notebook)
        self.path = widgets.Text(value="trace.json", description="file",
                                 layout=widgets.Layout(width="240px"))
        self.path.add_class("wb-trace-path")
        self.save_button = tool_button(
            "Save trace on server", "server", "wb-save",
            "Write the trace as JSON to this file on the server (next to the notebook)")
        self.save_schedule_button = tool_button(
            "Save schedule on server", "server", "wb-save-schedule",
            "Write a self-contained schedule file to this file on the server (next to the "
            "notebook); opens with wb.load_schedule or ScheduleEditor(path)")
        self.load_button = tool_button(
            "Load from server", "folder-open", "wb-load",
            "Replay a trace or schedule file from this file on the server")
        self.save_button.on_click(lambda _b: self._ui(self._save_trace_clicked))
        self.save_schedule_button.on_click(lambda _b: self._ui(self._save_schedule_clicked))
        self.load_button.on_click(lambda _b: self._ui(self._load_clicked))
        server_label = widgets.HTML(f'<span style="{_MUTED}">on the server:</span>')
        server = widgets.HBox(
            [server_label, self.path, self.save_button, self.save_schedule_button,
             self.load_button],
            layout=widgets.Layout(align_items="center", flex_flow="row wrap"))
        server.add_class("wb-trace-server")

        # --- the stepper, opened on demand
        self.close_stepper_button = tool_button("Close", "times", "wb-stepper-close",
                                            "Close the stepper")
        self.close_stepper_button.on_click(lambda _b: self._ui(self.close_stepper))
        self.stepper_title = widgets.HTML()
        self.stepper_box = widgets.VBox(layout=widgets.Layout(
            display="none", border="1px solid var(--jp-border-color2,#ddd)", padding="4px"))
        self.stepper_box.add_class("wb-stepper-box")

        super().__init__([computer, server, self.status, self.stepper_box, self.listing])
        self.add_class("wb-trace-tab")
        self.render()

    # ------------------------------------------------------------------ rendering
    def render(self) -> None:
        """Show the current trace in the listing."""
        self.listing.value = code_block(highlight_lines(self.model.trace.script()))

    def _say(self, text: str) -> None:
        self.status.value = f"<span>{text}</span>"

    def _ui(self, fn: Callable, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - a button never raises into the notebook
            self._error(f"{type(e).__name__}: {e}")
            return None

    def _error(self, message: str) -> None:
        self.status.value = ""
        if self._on_error is not None:
            self._on_error(message)
        else:
            self.status.value = error_banner(message)

    # ------------------------------------------------------------------ downloads
    def _name(self, suffix: str) -> str:
        return safe_file_name(f"{self.model.func.name}{suffix}", f"schedule{suffix}")

    def trace_json(self) -> str:
        """The current trace as TVM's trace JSON (what "Download trace" saves)."""
        return self.model.trace.as_json(syntax="tirx") + "\n"

    def schedule_json(self) -> str:
        """The current schedule as a schedule file (what "Download schedule" saves)."""
        return self.model.schedule_file().dumps()

    def download_trace(self) -> dict[str, str]:
        """Save the trace on the user's computer as ``<function>.trace.json``; returns
        the message sent to the browser (``name``, ``text``)."""
        message = self.transfer.download(self._name(".trace.json"), self.trace_json())
        self._say(f"downloading {html.escape(message['name'])} "
                  f"({count(len(self.model.trace), 'instruction')})")
        return message

    def download_schedule(self) -> dict[str, str]:
        """Save a schedule file on the user's computer as ``<function>.schedule.json``;
        returns the message sent to the browser (``name``, ``text``)."""
        message = self.transfer.download(self._name(".schedule.json"), self.schedule_json())
        self._say(f"downloading {html.escape(message['name'])} "
                  f"({count(len(self.model.trace), 'instruction')})")
        return message

    # ------------------------------------------------------------------ uploads
    def upload(self, name: str, text: str | bytes) -> bool:
        """Replay the uploaded file ``name`` (its ``text``), as the Upload button does:
        a trace JSON, ``def apply_trace`` text or a schedule file of this function. One
        undo step per instruction that changes the schedule; a file that does not load
        changes nothing and shows why."""
        before = self.model.step
        self.status.value = ""
        if not self.model.load_trace(text, name=name):
            return False
        added = self.model.step - before
        what = count(added, "undo step") if added else "no step"
        self._say(f"loaded {html.escape(name)}: {what} (Undo steps back through them)")
        return True

    def _refused(self, error: TransferError) -> None:
        self._error(str(error))

    # ------------------------------------------------------------------ stepper
    def open_in_stepper(self) -> Any:
        """Show a :class:`~workbench.widgets.TraceStepper` of the current trace on the
        starting function in the tab; returns it."""
        from .stepper import TraceStepper

        start = self.model._history[0].schedule
        stepper = TraceStepper(self.model.trace, start.original, syntax=self.syntax)
        self.stepper = stepper
        self.stepper_title.value = (
            f"<b>Stepper</b> <span style=\"{_MUTED}\">the trace at editor step "
            f"{self.model.step} ({count(len(self.model.trace), 'instruction')})</span>")
        header = widgets.HBox([self.stepper_title, self.close_stepper_button],
                              layout=widgets.Layout(justify_content="space-between",
                                                    align_items="center"))
        self.stepper_box.children = (header, stepper)
        self.stepper_box.layout.display = None
        return stepper

    def close_stepper(self) -> None:
        """Close the stepper opened with :meth:`open_in_stepper`."""
        self.stepper = None
        self.stepper_box.children = ()
        self.stepper_box.layout.display = "none"

    # ------------------------------------------------------------------ the server
    def _save_trace_clicked(self) -> None:
        path = self.model.save_trace(self.path.value)
        self._say(f"saved {count(len(self.model.trace), 'instruction')} to "
                  f"{html.escape(str(path))} on the server")

    def _save_schedule_clicked(self) -> None:
        path = self.model.save_schedule(self.path.value)
        self._say(f"saved the schedule ({count(len(self.model.trace), 'instruction')}) to "
                  f"{html.escape(str(path))} on the server")

    def _load_clicked(self) -> None:
        before = self.model.step
        self.status.value = ""
        source = self.path.value
        if self.model.load_trace(source):
            added = self.model.step - before
            self._say(f"loaded {html.escape(Path(source).name)}: "
                      f"{count(added, 'undo step')}")
