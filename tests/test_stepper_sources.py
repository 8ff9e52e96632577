"""What a TraceStepper opens: a trace JSON file, an apply_trace text file, a schedule file
(by path or as a ScheduleFile), or such text; the function is optional when the source
carries it. Errors say what is missing. Its buttons carry the DOM hooks."""

from __future__ import annotations

from pathlib import Path

import pytest

import workbench as wb
from workbench.widgets import TraceStepper


def scheduled() -> wb.Schedule:
    sch = wb.Schedule(wb.workloads.mm_relu(32, 32, 32))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    return sch


def func():
    return wb.workloads.mm_relu(32, 32, 32)


def assert_opens(stepper: TraceStepper, sch: wb.Schedule) -> None:
    assert stepper.model.num_steps == len(sch.trace)
    assert stepper.model.failure is None
    assert stepper.model.text(0) == func().script()
    assert stepper.model.text(len(sch.trace)) == sch.func.script()


@pytest.mark.parametrize("kind", ["json", "tirx_json", "apply_trace"])
def test_a_trace_file_by_path_with_its_function(kind, tmp_path):
    sch = scheduled()
    path = tmp_path / ("my_trace.py" if kind == "apply_trace" else "my_trace.json")
    path.write_text({"json": sch.trace.as_json(), "tirx_json": sch.trace.as_json(syntax="tirx"),
                     "apply_trace": sch.trace.script()}[kind])
    assert_opens(TraceStepper(str(path), func()), sch)
    assert_opens(TraceStepper(path, func()), sch)  # a Path too


def test_a_relative_path_as_the_issue_wrote_it(tmp_path, monkeypatch):
    sch = scheduled()
    monkeypatch.chdir(tmp_path)
    sch.trace.save("my_trace.json")
    assert_opens(TraceStepper("my_trace.json", func()), sch)


def test_a_schedule_file_by_path_or_object_needs_no_function(tmp_path):
    sch = scheduled()
    path = sch.save(tmp_path / "mm_relu.schedule.json")
    assert_opens(TraceStepper(str(path)), sch)
    assert_opens(TraceStepper(wb.read_schedule_file(path)), sch)
    assert_opens(TraceStepper(path.read_text()), sch)  # the file's text


def test_trace_text_of_each_kind(tmp_path):
    sch = scheduled()
    assert_opens(TraceStepper(sch.trace.as_json(), func()), sch)
    assert_opens(TraceStepper(sch.trace.script(), func()), sch)
    # one line of apply_trace text is text, not a file name
    line = sch.trace.lines()[0]
    one = TraceStepper(line, func())
    assert one.model.num_steps == 1 and one.kind == ""
    assert one.next() == 1 and one.kind == "GetBlock"


def test_a_missing_file_says_so_and_where(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"TraceStepper: no such file: my_trace.json in "):
        TraceStepper("my_trace.json", func())
    with pytest.raises(FileNotFoundError, match="a directory"):
        TraceStepper(str(tmp_path), func())


def test_a_bare_trace_without_a_function_says_what_to_pass(tmp_path):
    sch = scheduled()
    path = tmp_path / "my_trace.json"
    sch.trace.save(path)
    with pytest.raises(TypeError, match=r"the file my_trace.json is a bare trace.*"
                                        r"TraceStepper\('.*my_trace.json', func\)"):
        TraceStepper(str(path))
    with pytest.raises(TypeError, match="the trace text is a bare trace"):
        TraceStepper(sch.trace.as_json())


def test_a_broken_schedule_file_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"format": "workbench-schedule", "version": 1}')
    with pytest.raises(wb.ScheduleFileError, match=r"broken.json: missing field \"module\""):
        TraceStepper(str(path))


def test_next_and_previous_buttons_carry_the_dom_hooks():
    stepper = TraceStepper(scheduled().trace, func())
    assert "wb-next" in stepper.next_button._dom_classes
    assert "wb-previous" in stepper.prev_button._dom_classes
    assert "wb-stepper" in stepper._dom_classes
    stepper.next_button.click()
    assert stepper.step == 1
    stepper.prev_button.click()
    assert stepper.step == 0


def test_an_editor_download_opens_in_a_stepper(tmp_path):
    """What a user does in the browser: download the schedule file, open it again in a
    stepper from its path."""
    editor = wb.widgets.ScheduleEditor(func())
    editor.apply("split", loop="j", factors=[None, 4])
    editor.apply("reorder", loops=["j_0", "k", "j_1"])
    sent: list[dict] = []
    editor.trace_tab.transfer.send = sent.append
    editor.download_schedule()
    path = Path(tmp_path / sent[0]["name"])
    path.write_text(sent[0]["text"])
    stepper = TraceStepper(str(path))
    assert stepper.model.text(stepper.model.num_steps) == editor.model.func.script()
