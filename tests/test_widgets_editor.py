"""ScheduleEditor driven from Python: through its widgets (.value, .click()) and its
``apply``/``undo``/``redo`` API, asserting on the model and the rendered HTML."""

from __future__ import annotations

import json
import re

import pytest

import workbench as wb
from workbench.widgets.editor import ScheduleEditor
from workbench.widgets.editor_model import EditorModel, parse_factors


def text_of(html: str) -> str:
    """Rendered HTML without tags and with the usual entities decoded."""
    plain = re.sub(r"<[^>]+>", "", html)
    return plain.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace(
        "&quot;", '"').replace("\xa0", " ")


def labels(editor: ScheduleEditor) -> list[str]:
    return [item.label.replace("\xa0", " ") for item in editor.tree.items]


def pick(editor: ScheduleEditor, label: str, nth: int = 0) -> None:
    """Click the tree row whose label (stripped) is ``label`` (the nth such row): the
    message the front end sends, through ipywidgets' custom-message entry point."""
    rows = [n for n, text in enumerate(labels(editor)) if text.strip() == label]
    editor.tree._handle_custom_msg({"type": "select", "index": rows[nth]}, [])


def by_hand() -> wb.Schedule:
    sch = wb.Schedule(wb.workloads.mm_relu(64, 64, 64))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    return sch


@pytest.fixture
def editor() -> ScheduleEditor:
    return ScheduleEditor(wb.workloads.mm_relu(64, 64, 64))


# ---------------------------------------------------------------- the widgets


def test_initial_view(editor):
    assert labels(editor) == [
        "for i in range(64)", "  for j in range(64)", "    for k in range(64)", "      block Y",
        "for i in range(64)", "  for j in range(64)", "    block C",
    ]
    assert editor.model.selected.name == "Y"  # the first block is selected
    assert editor.action.options[0] == "compute_at"
    assert "T.block" in text_of(editor.ir_html)
    assert editor.undo_button.disabled and editor.redo_button.disabled
    assert "step 0 of 0" in editor.title.value
    assert editor.error == "" and editor.error_html.value == ""


def test_split_from_the_widgets_updates_tree_ir_trace_and_diff(editor):
    pick(editor, "for j in range(64)")
    assert editor.model.selected.kind == "loop" and editor.model.selected.block == "Y"
    assert editor.action.options[0] == "split"
    editor.action.value = "split"
    assert [v for _, v in editor.split_factor.options] == [2, 4, 8, 16, 32]
    editor.split_factor.value = 8
    editor.apply_button.click()

    assert editor.error == ""
    assert labels(editor)[:4] == [
        "for i in range(64)", "  for j_0 in range(8)", "    for j_1 in range(8)",
        "      for k in range(64)",
    ]
    assert editor.model.selected.name == "j_0"  # the selection follows the outer loop
    ir = text_of(editor.ir_html)
    assert "vj = T.axis.spatial(64, j_0 * 8 + j_1)" in ir
    assert "sch.split(loop=l2, factors=[None, 8]" in text_of(editor.trace_html.value)
    diff = editor.diff_view.html_widget.value
    assert 'class="wb-diff-replace"' in diff and 'class="wb-diff-insert"' in diff
    assert "for i, j, k in T.grid(64, 64, 64):" in text_of(diff)  # the old line is shown
    assert "step 1 of 1" in editor.title.value and "split j by [None, 8]" in editor.title.value
    assert not editor.undo_button.disabled and editor.redo_button.disabled


def test_typed_factors_split_in_three(editor):
    pick(editor, "for j in range(64)")
    editor.action.value = "split"
    editor.split_factors.value = "None, 4, 2"
    editor.apply_button.click()
    assert [t.name for t in editor.model.tree() if t.kind == "loop"][:5] == [
        "i", "j_0", "j_1", "j_2", "k"]
    assert [t.extent for t in editor.model.tree() if t.kind == "loop"][1:4] == [8, 4, 2]


def test_the_mlc_schedule_from_widgets_equals_the_one_by_hand(editor):
    pick(editor, "for j in range(64)")
    editor.action.value = "split"
    editor.split_factor.value = 4
    editor.apply_button.click()
    pick(editor, "for j_0 in range(16)")
    editor.action.value = "reorder"
    assert editor.reorder_loops.value == ["j_0", "j_1", "k"]  # the chain down to block Y
    editor.reorder_loops._handle_custom_msg({"type": "move", "index": 2, "delta": -1}, [])
    assert editor.reorder_loops.value == ["j_0", "k", "j_1"]
    editor.apply_button.click()
    pick(editor, "block C")
    editor.action.value = "reverse_compute_at"
    targets = [label for label, _ in editor.target.options]
    assert "j_0 (above Y)" in targets
    editor.target.value = dict(editor.target.options)["j_0 (above Y)"]
    editor.apply_button.click()

    assert editor.error == ""
    expected = by_hand()
    assert editor.schedule.func.script() == expected.func.script()
    # the editor reuses handles: no lookup is recorded twice
    assert editor.trace.script() == expected.trace.script()
    wb.verify(editor.schedule.mod, wb.workloads.mm_relu(64, 64, 64))


def test_compute_at_offers_only_legal_loops():
    editor = ScheduleEditor(wb.workloads.conv2d_nchw(1, 4, 8, 8, 4, 3, 3))
    pad = next(t for t in editor.model.tree() if t.kind == "block")
    editor.select(pad)
    editor.action.value = "compute_at"
    offered = [v for _, v in editor.target.options]
    assert offered, "the pad stage can go under the conv loops"
    for item in editor.model.tree():
        if item.kind != "loop":
            continue
        sch = editor.schedule
        legal = True
        try:
            sch.compute_at(sch.get_block(pad.name), _loop_handle(sch, item))
        except wb.ScheduleError:
            legal = False
        assert legal == any(v is item.var for v in offered), item.name


def _loop_handle(sch, item):
    for rv in sch.get_loops(sch.get_block(item.block)):
        if sch.get(rv).loop_var is item.var:
            return rv
    raise AssertionError(item)


def test_cache_read_choices_and_apply(editor):
    pick(editor, "block Y")
    editor.action.value = "cache_read"
    assert list(editor.buffer.options) == ["A", "B"]
    assert editor.scope.value == "shared"
    editor.buffer.value = "B"
    editor.scope.value = "local"
    editor.apply_button.click()
    assert editor.error == ""
    assert "    block B_local" in labels(editor)
    assert 'sch.cache_read(block=b0, read_buffer_index=1, storage_scope="local")' in \
        editor.trace_text


def test_fuse_options_are_the_perfect_nest(editor):
    pick(editor, "for i in range(64)")
    editor.action.value = "fuse"
    assert [label for label, _ in editor.fuse_loops.options] == ["i, j", "i, j, k"]
    editor.fuse_loops.value = ("i", "j")
    editor.apply_button.click()
    assert labels(editor)[0] == "for i_j_fused in range(4096)"


def test_parallel_vectorize_unroll_from_the_widgets(editor):
    editor.apply("split", loop="j", factors=[None, 16])
    editor.apply("reorder", loops=["j_0", "k", "j_1"])
    for action, label, kind in [("parallel", "for i in range(64)", "parallel"),
                                ("vectorize", "for j_1 in range(16)", "vectorized"),
                                ("unroll", "for k in range(64)", "unrolled")]:
        pick(editor, label)
        editor.action.value = action
        editor.apply_button.click()
        assert editor.error == ""
        assert any(text.strip() == f"{label}  [{kind}]" for text in labels(editor))
    wb.verify(editor.schedule.mod, wb.workloads.mm_relu(64, 64, 64))


def test_decompose_reduction_offers_the_loops_above(editor):
    pick(editor, "block Y")
    editor.action.value = "decompose_reduction"
    assert [label for label, _ in editor.target.options] == ["i", "j", "k"]
    editor.target.value = dict(editor.target.options)["k"]
    editor.apply_button.click()
    assert editor.error == ""
    rows = [text.strip() for text in labels(editor)]
    assert "block Y_init" in rows and "block Y_update" in rows


# -------------------------------------------------------------- undo / redo


def test_undo_redo_restore_the_exact_ir_and_trace(editor):
    states = [(editor.model.func.script(), editor.trace.script(), editor.ir_html)]
    for action, params in [("split", {"loop": "j", "factors": [None, 4]}),
                           ("reorder", {"loops": ["j_0", "k", "j_1"]}),
                           ("reverse_compute_at", {"block": "C", "loop": "j_0"})]:
        assert editor.apply(action, **params)
        states.append((editor.model.func.script(), editor.trace.script(), editor.ir_html))
    for expected in reversed(states[:-1]):
        editor.undo_button.click()
        assert (editor.model.func.script(), editor.trace.script(), editor.ir_html) == expected
    assert editor.undo_button.disabled and not editor.undo()
    for expected in states[1:]:
        editor.redo_button.click()
        assert (editor.model.func.script(), editor.trace.script(), editor.ir_html) == expected
    assert not editor.redo()


def test_a_new_step_after_undo_drops_the_redo_branch(editor):
    editor.apply("split", loop="j", factors=[None, 4])
    editor.undo()
    editor.apply("split", loop="j", factors=[None, 8])
    assert not editor.model.can_redo
    assert editor.model.steps == ["split j by [None, 8]"]


def test_reset_goes_back_to_the_start_and_can_be_redone(editor):
    start = editor.model.func.script()
    editor.apply("split", loop="j", factors=[None, 4])
    after = editor.model.func.script()
    editor.reset_button.click()
    assert editor.model.func.script() == start and editor.model.step == 0
    editor.redo()
    assert editor.model.func.script() == after


# -------------------------------------------------------------- refusals


def test_refused_primitive_shows_the_error_and_changes_nothing(editor):
    editor.apply("split", loop="j", factors=[None, 4])
    ir, trace, html = editor.model.func.script(), editor.trace.script(), editor.ir_html
    pick(editor, "for k in range(64)")
    editor.action.value = "vectorize"
    editor.apply_button.click()
    assert editor.error.startswith('vectorize: loop "k"')
    shown = editor.error_html.value
    assert "NotDataParallelError" in shown and "&lt;-- vectorize" in shown
    assert (editor.model.func.script(), editor.trace.script(), editor.ir_html) == (ir, trace, html)
    assert editor.model.steps == ["split j by [None, 4]"]
    # the next successful step clears the error
    pick(editor, "for i in range(64)")
    editor.action.value = "parallel"
    editor.apply_button.click()
    assert editor.error == "" and editor.error_html.value == ""


def test_bad_typed_factors_never_raise(editor):
    pick(editor, "for j in range(64)")
    editor.action.value = "split"
    before = editor.model.func.script()
    for typed, message in [("None, None", "split:"), ("abc", "cannot read factors"),
                           ("1.5, None", "integers or None")]:
        editor.split_factors.value = typed
        editor.apply_button.click()  # must not raise
        assert message in text_of(editor.error_html.value) or message in editor.error
        assert editor.model.func.script() == before


def test_api_refusals_set_error_and_keep_state(editor):
    before = editor.model.func.script()
    assert not editor.apply("split", loop="nope", factors=[None, 2])
    assert editor.error == 'split: no loop named "nope" (loops: i, j, k)'
    assert not editor.apply("compute_inline", block="Y")  # a reduction block
    assert editor.error.startswith("compute_inline:")
    assert editor.model.func.script() == before and editor.model.step == 0
    with pytest.raises(ValueError, match="unknown action 'tile'"):
        editor.apply("tile", loop="j")
    with pytest.raises(TypeError, match="split needs factors="):
        editor.apply("split", loop="j")


def test_loop_names_are_resolved_above_the_selected_block():
    model = EditorModel(wb.workloads.mm_relu(16, 16, 16))
    model.select("C")
    assert model.apply("split", loop="j", factors=[None, 2])
    loops = [(t.name, t.block) for t in model.tree() if t.kind == "loop"]
    assert loops[-3:] == [("i", "C"), ("j_0", "C"), ("j_1", "C")]
    assert ("j", "Y") in loops
    assert model.apply("split", loop="i", under="Y", factors=[None, 4])
    loops_y = [t.name for t in model.tree() if t.kind == "loop"][:4]
    assert loops_y == ["i_0", "i_1", "j", "k"]
    fresh = EditorModel(wb.workloads.mm_relu(16, 16, 16))
    fresh._selected = None  # no selection: an ambiguous name is refused
    assert not fresh.apply("parallel", loop="i")
    model = fresh
    assert 'loop name "i" is ambiguous (above blocks Y, C)' in model.error


def test_parse_factors_reads_literals_only():
    assert parse_factors("[None, 8, 4]") == [None, 8, 4]
    with pytest.raises(ValueError, match="cannot read factors"):
        parse_factors("__import__('os').system('true')")


# -------------------------------------------------------------- traces


def test_save_and_load_trace_round_trip(editor, tmp_path):
    editor.apply("split", loop="j", factors=[None, 4])
    editor.apply("reorder", loops=["j_0", "k", "j_1"])
    path = tmp_path / "t.json"
    editor.trace_path.value = str(path)
    editor.save_button.click()
    assert json.loads(path.read_text())  # JSON on disk
    assert "saved" in editor.trace_status.value
    fresh = ScheduleEditor(wb.workloads.mm_relu(64, 64, 64))
    fresh.trace_path.value = str(path)
    fresh.load_button.click()
    assert fresh.error == ""
    assert fresh.model.func.script() == editor.model.func.script()
    # one undo step per instruction that changes the schedule: split, then reorder
    assert [s.split(" = ")[-1].split("(")[0] for s in fresh.model.steps] == [
        "sch.split", "sch.reorder"]
    fresh.undo()
    fresh.undo()
    assert fresh.model.func.script() == wb.workloads.mm_relu(64, 64, 64).script()


def test_load_trace_from_python_text_and_bad_files(editor, tmp_path):
    assert editor.load_trace(by_hand().trace.script())
    assert editor.model.func.script() == by_hand().func.script()
    before = editor.model.func.script()
    assert not editor.load_trace(str(tmp_path / "missing.json"))
    assert "no such file" in editor.error
    bad = tmp_path / "bad.json"
    bad.write_text('[["Split", ["l9"], {}, ["l10", "l11"]]]')
    assert not editor.load_trace(str(bad))
    assert editor.model.func.script() == before


# -------------------------------------------------------------- measure


def test_measure_adds_a_point_to_the_history():
    editor = ScheduleEditor(wb.workloads.matmul(32, 32, 32))
    first = editor.measure()
    editor.apply("split", loop="j", factors=[None, 8])
    editor.apply("vectorize", loop="j_1")
    second = editor.measure_button.click() or editor.measurements[-1]
    assert first.ok and second.ok and first.median > 0 and second.gflops > 0
    assert [r.step for r in editor.measurements] == [0, 2]
    assert "ms" in editor.measure_html.value and "GFLOPS" in editor.measure_html.value
    plot = editor.history_plot.value
    assert plot.startswith("<svg") and "step 2: vectorize j_1" in plot
    assert editor.tabs.selected_index == 4


def test_loop_nest_tab_draws_and_follows_the_editor(editor):
    editor.tabs.selected_index = 3
    view = editor.nest_box.children[0]
    first = view.html.value
    assert "<svg" in first or "<img" in first
    editor.apply("split", loop="j", factors=[None, 4])
    editor.apply("reorder", loops=["j_0", "i", "j_1"])
    assert view is editor.nest_box.children[0] and view.html.value != first


def test_render_is_fast_enough_for_typing(editor):
    editor.apply("split", loop="j", factors=[None, 4])
    assert editor.last_render_seconds < 0.5  # loose: the bench measures it properly


def test_loop_nest_picture_follows_the_selected_block(editor):
    editor.tabs.selected_index = 3
    view = editor.nest_box.children[0]
    assert view.model.block == "Y"
    pick(editor, "block C")
    assert view.model.block == "C" and view.model.picture.title.startswith("C:")
    pick(editor, "for k in range(64)")  # a loop above Y: the picture shows Y again
    assert view.model.block == "Y"


def test_a_compute_action_without_legal_loops_says_so_and_cannot_apply():
    """A one-block matmul's C has no loop to go under: the panel says so and Apply is off,
    rather than an empty drop-down whose Apply can only fail."""
    editor = ScheduleEditor(wb.workloads.matmul(16, 8, 32))
    editor.select(block="C")
    editor.action.value = "compute_at"
    assert editor.model.compute_targets("compute_at", "C") == []
    assert editor.args_box.children == (editor.no_target_note,)
    assert "no loop where it is legal now" in editor.no_target_note.value
    assert editor.apply_button.disabled
    editor.select(loop="i")  # a loop action: Apply is back
    assert not editor.apply_button.disabled
    editor.select(block="C")
    editor.action.value = "cache_read"
    assert not editor.apply_button.disabled and editor.args_box.children
