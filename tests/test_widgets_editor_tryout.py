"""What a new user ran into when trying the editor, the IR views and the compare view in
JupyterLab: each a behaviour checked without a browser."""

from __future__ import annotations

import ipywidgets as widgets

import workbench as wb
from workbench.widgets.compare import CompareView
from workbench.widgets.editor import ScheduleEditor
from workbench.widgets.irview import IRDiff, IRView
from workbench.widgets.stepper import TraceStepper


def _pad_under_w() -> ScheduleEditor:
    """conv2d with `pad` computed at `w`: loop w then holds two nests (pad's, conv's)."""
    editor = ScheduleEditor(wb.workloads.conv2d_nchw(1, 4, 6, 6, 4, 3, 3, 1, 1))
    w = editor.select(loop="w", under="conv")
    assert editor.apply("compute_at", block="pad", loop=w.var, preserve_unit_loops=False), \
        editor.error
    return editor


def test_reorder_offers_only_the_loops_one_reorder_can_take():
    editor = _pad_under_w()
    w = editor.select(loop="w", under="conv")
    # w's body is two loop nests: no loop below w can be reordered with it
    assert [t.name for t in editor.model.loop_chain(w)] == ["w"]
    rc = editor.select(loop="rc", under="conv")
    assert [t.name for t in editor.model.loop_chain(rc)] == ["rc", "ry", "rx"]
    # above the split point the chain is intact
    n = editor.select(loop="n", under="conv")
    assert [t.name for t in editor.model.loop_chain(n)] == ["n", "k", "h", "w"]


def test_the_reorder_list_never_offers_a_move_the_primitive_refuses():
    editor = _pad_under_w()
    editor.select(loop="n", under="conv")
    editor.action.value = "reorder"
    assert editor.reorder_loops.value == ["n", "k", "h", "w"]
    editor.reorder_loops.move(3, -1)  # w above h
    editor.apply_button.click()
    assert editor.error == ""
    assert editor.model.step == 2


def _full_width_html(widget) -> list[str]:
    """The HTML widgets under ``widget`` that ask for a width of 100%."""
    found = []
    todo = [widget]
    while todo:
        w = todo.pop()
        if isinstance(w, widgets.HTML) and w.layout.width == "100%":
            found.append(" ".join(w._dom_classes) or repr(w.value[:40]))
        todo.extend(getattr(w, "children", ()))
    return found


def test_html_views_fit_their_box_without_a_scrollbar():
    # a width of 100% plus the widget's own 2px margins overflows its box, which shows an
    # empty horizontal scrollbar under every IR, diff and stepper
    func = wb.workloads.mm_relu(8, 8, 8)
    editor = ScheduleEditor(func)
    editor.apply("split", loop="j", factors=[None, 4])
    assert _full_width_html(IRView(func)) == []
    assert _full_width_html(IRDiff(func, func)) == []
    assert _full_width_html(TraceStepper(editor.trace, func)) == []
    assert _full_width_html(editor) == []


def test_compare_ir_wraps_between_words_not_inside_them():
    func = wb.workloads.matmul(8, 8, 8)
    a, b = wb.Schedule(func), wb.Schedule(func)
    b.parallel(b.get_loops(b.get_block("C"))[0])
    view = CompareView(a, b)
    html = view.ir_html[0].value
    assert "word-break:normal" in html.replace(" ", "")
    # a wrapped line continues indented past its own indent (8 spaces + 4)
    assert 'padding-left:12ch;text-indent:-12ch' in html


def test_the_trace_viewer_names_the_editors_button_as_it_is_labelled():
    # the extension's bare-trace viewer tells the user which editor button gives a file
    # with IR; it must name the button the Trace tab really shows
    from pathlib import Path

    render = Path(__file__).resolve().parent.parent / "extensions" / "src" / "render.ts"
    tab = ScheduleEditor(wb.workloads.matmul(8, 8, 8)).trace_tab
    assert f'"{tab.download_schedule_button.description}"' in render.read_text()


def test_compare_tree_and_latency_use_text_line_height():
    # an HTML widget's content has the 28px line height of a form row; the read-only
    # loop tree and the latency lines set their own, like the code below them
    func = wb.workloads.matmul(8, 8, 8)
    view = CompareView(wb.Schedule(func), wb.Schedule(func))
    assert "line-height:1.35" in view.tree_html[0].value
    assert "line-height:1.35" in view.latency_html[0].value
