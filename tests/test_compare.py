"""The compare view: two or more schedules of one function side by side (CompareModel
logic without a browser, CompareView driven from Python)."""

from __future__ import annotations

import re

import pytest

import workbench as wb
from workbench import widgets
from workbench.widgets.compare import CompareError, CompareModel, CompareView
from workbench.widgets.editor_model import EditorModel, MeasureRecord


def _split(func, factor=8):
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, factors=[None, factor])
    return sch


def _parallel(func):
    sch = wb.Schedule(func)
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    return sch


@pytest.fixture
def func():
    return wb.workloads.matmul(32, 32, 32)


def test_exported_from_widgets():
    assert widgets.CompareView is CompareView and widgets.CompareModel is CompareModel


def test_every_kind_of_input(func, tmp_path):
    split = _split(func)
    path = split.save(tmp_path / "split8.schedule.json")
    trace = _parallel(func).trace
    editor = EditorModel(func)
    editor.apply("split", loop="k", factors=[None, 4])
    model = CompareModel(func, (trace, func), str(path),
                         wb.schedule.file.read_schedule_file(path), editor)
    assert model.names == ["schedule 1", "schedule 2", "split8", "schedule 4", "schedule 5"]
    assert "T.parallel(32)" in model.ir_text(1)
    assert model.ir_text(2) == model.ir_text(3) == split.func.script()
    assert "k_1" in model.ir_text(4)
    # a bare trace takes its function from func=
    bare = CompareModel(trace, split.trace, func=func, names=["par", "split"])
    assert bare.names == ["par", "split"]
    assert bare.ir_text(1) == split.func.script()


def test_columns_are_copies(func):
    sch = _split(func)
    model = CompareModel(wb.Schedule(func), sch)
    before = model.ir_text(1)
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    assert model.ir_text(1) == before


def test_schedules_of_different_functions_are_refused(func):
    other = wb.workloads.matmul(64, 64, 64)
    with pytest.raises(CompareError) as err:
        CompareModel(wb.Schedule(func), wb.Schedule(other), names=["small", "big"])
    message = str(err.value)
    assert "'big'" in message and "'small'" in message and "differ" in message
    # same function built twice (structurally equal, not the same object) is fine
    CompareModel(_split(func), _parallel(wb.workloads.matmul(32, 32, 32)))
    # compared on the unscheduled functions, not on the scheduled IR
    with pytest.raises(CompareError):
        CompareModel(_split(func), wb.Schedule(wb.workloads.mm_relu(32, 32, 32)))


def test_bad_inputs_are_refused_clearly(func):
    with pytest.raises(CompareError, match="two or more"):
        CompareModel(wb.Schedule(func))
    with pytest.raises(CompareError, match="3 names for 2"):
        CompareModel(wb.Schedule(func), wb.Schedule(func), names=["a", "b", "c"])
    with pytest.raises(CompareError, match="schedule 2 is a int"):
        CompareModel(wb.Schedule(func), 42)
    with pytest.raises(CompareError, match="trace without its function"):
        CompareModel(wb.Schedule(func), _split(func).trace)


def test_loop_tree_shows_extents_and_kinds(func):
    model = CompareModel(_split(func), _parallel(func))
    split_tree = model.tree_html(0)
    rows = re.findall(r'data-kind="(\w+)" data-name="(\w+)"', split_tree)
    assert rows == [("loop", "i"), ("loop", "j_0"), ("loop", "j_1"), ("loop", "k"),
                    ("block", "C")]
    assert "for j_0 in range(4)" in split_tree and "for j_1 in range(8)" in split_tree
    par = model.tree_html(1)
    assert re.search(r"for i in range\(32\) <span[^>]*>\[parallel\]", par)
    assert "[parallel]" not in split_tree


def test_ir_highlighted_or_diffed_against_the_first(func):
    model = CompareModel(wb.Schedule(func), _split(func))
    assert "var(--jp-mirror-editor-keyword-color" in model.ir_html(1)
    assert "wb-diff" not in model.ir_html(1)
    model.diff_against_first = True
    diff = model.ir_html(1)
    assert "wb-diff-unified" in diff and 'class="wb-diff-insert"' in diff
    assert "wb-diff" not in model.ir_html(0)           # the first column is the reference
    model.syntax = "tirx"
    assert "T.sblock" in model.ir_text(0)


def test_refresh_reads_editors_again(func):
    editor = widgets.ScheduleEditor(func)
    view = CompareView(wb.Schedule(func), editor, names=["start", "editor"])
    assert "j_0" not in view.ir_html[1].value
    editor.apply("split", loop="j", factors=[None, 4])
    assert "j_0" not in view.ir_html[1].value          # a snapshot until refreshed
    view.refresh()
    assert "j_0" in view.ir_html[1].value


def test_measure_all_in_a_worker(func):
    model = CompareModel(wb.Schedule(func), _parallel(func), names=["serial", "parallel"])
    records = model.measure_all(repeat=2, min_repeat_ms=1)
    assert [r.status for r in records] == ["ok", "ok"]
    assert [r.description for r in records] == ["serial", "parallel"]
    assert all(r.median > 0 for r in records)
    assert re.match(r"\d+\.\d{4} ms, \d+\.\d\d GFLOPS", model.latency_text(0))
    svg = model.plot_svg()
    assert svg.startswith("<svg") and "serial" in svg and "parallel" in svg
    assert model.fastest() in (0, 1)


def test_failures_and_noise_are_shown(func, monkeypatch):
    model = CompareModel(wb.Schedule(func), _split(func), names=["a", "b"])
    assert model.plot_svg() == "" and model.latency_text(0) == "not measured yet"
    import workbench.runtime.cpu as cpu

    def broken(*_a, **_k):
        raise RuntimeError("cc: fatal error")

    monkeypatch.setattr(cpu, "build", broken)
    record = model.measure(0)
    assert record.status == "build_error" and "cc: fatal error" in model.latency_text(0)
    model.columns[1].measurements.append(
        MeasureRecord(1, "b", "ok", 2e-3, 1.5, cv=0.4, noisy=True))
    assert "NOISY" in model.latency_text(1)
    svg = model.plot_svg()
    assert "GFLOPS *" in svg and "noisy" in svg and "build_error" in svg
    assert model.fastest() == 1


def test_view_buttons(func, monkeypatch):
    view = CompareView(wb.Schedule(func), _split(func), _parallel(func),
                       names=["plain", "split", "parallel"])
    assert [h.value.count("wb-compare-name") for h in view.name_html] == [1, 1, 1]
    assert "split" in view.name_html[1].value

    def fake(index, repeat=5, min_repeat_ms=50):
        col = view.model.columns[index]
        record = MeasureRecord(0, col.name, "ok", (3 - index) * 1e-3, 1.0,
                               noisy=index == 0)
        col.measurements.append(record)
        return record

    monkeypatch.setattr(view.model, "measure", fake)
    view.measure_button.click()
    assert "(fastest)" in view.name_html[2].value and "(fastest)" not in view.name_html[0].value
    assert "1.0000 ms" in view.latency_html[2].value
    assert "NOISY" in view.latency_html[0].value
    assert view.plot_html.value.startswith("<svg")
    assert not view.measure_button.disabled
    view.diff_checkbox.value = True
    assert "wb-diff-unified" in view.ir_html[1].value
    assert "wb-diff" not in view.ir_html[0].value
    view.syntax_toggle.value = "tirx"
    assert "sblock" in view.ir_html[0].value
