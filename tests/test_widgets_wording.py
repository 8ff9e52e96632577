"""Counts in the views' text read right in the singular: "1 line", "1 instruction"."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

import workbench as wb
from workbench.search.result import Trial
from workbench.widgets import ScheduleEditor
from workbench.widgets.compare import CompareError, CompareModel
from workbench.widgets.dashboard import _decisions_html
from workbench.widgets.transfer import _size
from workbench.widgets.wording import count


def _twice():
    A = wb.placeholder((64,), "float32", name="A")
    B = wb.compute((64,), lambda i: A[i] * 2.0, name="B")
    return wb.create_prim_func([A, B], name="twice")


def test_count():
    assert [count(n, "line") for n in (0, 1, 2)] == ["0 lines", "1 line", "2 lines"]
    assert count(1, "match", "matches") == "1 match" and count(5, "match", "matches") == "5 matches"


def test_editor_header_after_a_one_line_step():
    editor = ScheduleEditor(_twice())
    editor.apply("parallel", loop="i")          # `for i in range(64)` -> T.parallel(64)
    assert str(editor.diff_view.stats) == "+0 -0 ~1"
    assert "last step changed 1 line" in editor.title.value
    assert not re.search(r"\b1 lines\b", editor.title.value)
    editor.apply("split", loop="i", factors=[None, 8])
    assert re.search(r"last step changed \d+ lines", editor.title.value)


def test_trace_tab_counts_one_instruction(tmp_path):
    editor = ScheduleEditor(_twice())
    sch = wb.Schedule(_twice())
    sch.get_block("B")
    assert len(sch.trace) == 1
    editor.model.load_trace(sch.trace.as_json(), name="one.json")
    assert len(editor.model.trace) == 1
    path = tmp_path / "one.trace.json"
    editor.trace_path.value = str(path)
    editor.save_button.click()
    assert "saved 1 instruction to" in editor.trace_status.value
    editor.trace_tab.open_in_stepper()
    assert "(1 instruction)" in editor.trace_tab.stepper_title.value


def test_dashboard_trial_with_one_instruction():
    sch = wb.Schedule(_twice())
    sch.get_block("B")
    trial = Trial(0, sch.trace, "ok", 1e-3, "", "hash")
    text = _decisions_html(trial, SimpleNamespace(gflops=lambda _latency: None))
    assert "1 instruction<" in text and "1 instructions" not in text


def test_compare_names_mismatch_and_transfer_size():
    func = wb.workloads.matmul(16, 16, 16)
    with pytest.raises(CompareError, match="1 name for 2 schedules"):
        CompareModel(wb.Schedule(func), wb.Schedule(func), names=["only"])
    assert _size(1) == "1 byte" and _size(2) == "2 bytes"
