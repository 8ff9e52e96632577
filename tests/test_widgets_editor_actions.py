"""The editor's extra actions (layout, padding, partition, tensorize...): offered for
the right kind of item, their argument widgets built from the action's params, applied
through the widgets and through ``EditorModel.apply``, recorded in the trace exactly as
the Schedule method would record them, and refused with the primitive's own error."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.testing import chain_func, padded_func
from workbench.widgets.editor import ScheduleEditor
from workbench.widgets.editor_actions import EXTRA_ACTIONS, parse_int_list, parse_number
from workbench.widgets.editor_model import EditorError, EditorModel


def select(editor: ScheduleEditor, kind: str, name: str) -> None:
    rows = [n for n, t in enumerate(editor.model.tree()) if t.kind == kind and t.name == name]
    editor.tree._handle_custom_msg({"type": "select", "index": rows[0]}, [])


def arg(editor: ScheduleEditor, action: str, param: str):
    return editor._extra_widgets[(action, param)]


def test_extra_actions_are_offered_by_item_kind():
    model = EditorModel(wb.workloads.mm_relu(16, 16, 16))
    model.select("Y")
    block_actions = model.actions_for()
    assert "transform_layout" in block_actions and "storage_align" in block_actions
    assert "loop_partition" not in block_actions
    loop = next(t for t in model.tree() if t.kind == "loop")
    loop_actions = model.actions_for(loop)
    assert "loop_partition" in loop_actions and "blockize" in loop_actions
    assert "transform_layout" not in loop_actions
    # fuse_reduction_epilogue needs a consumer: C has none
    model.select("C")
    assert "fuse_reduction_epilogue" not in model.actions_for()


def test_storage_align_through_the_widgets_records_the_same_trace():
    editor = ScheduleEditor(wb.workloads.matmul(32, 32, 32))
    editor.apply("cache_read", block="C", buffer="A", scope="shared")
    select(editor, "block", "A_shared")
    editor.action.value = "storage_align"
    buffer = arg(editor, "storage_align", "buffer")
    assert buffer.options == (("write A_shared", 0),)
    arg(editor, "storage_align", "factor").value = 32
    arg(editor, "storage_align", "offset").value = 1
    editor.apply_button.click()
    assert editor.error == ""
    by_hand = wb.Schedule(wb.workloads.matmul(32, 32, 32))
    shared = by_hand.cache_read(by_hand.get_block("C"), 0, "shared")
    by_hand.storage_align(shared, 0, axis=0, factor=32, offset=1)
    assert editor.schedule.mod.script() == by_hand.mod.script()
    assert editor.model.steps[-1].startswith("storage_align A_shared")


def test_blockize_from_a_loop_selects_the_new_block():
    model = EditorModel(wb.workloads.matmul(16, 16, 16))
    loops = [t for t in model.tree() if t.kind == "loop"]
    assert model.apply("blockize", loop=loops[1].var)
    assert model.selected.kind == "block" and model.selected.name == "C_o"


def test_refusal_sets_the_error_and_changes_nothing():
    model = EditorModel(wb.workloads.matmul(16, 16, 16))
    before = model.schedule.mod.script()
    assert not model.apply("storage_align", block="C", buffer=0, axis=5, factor=32, offset=1)
    assert "storage_align" in model.error
    assert model.schedule.mod.script() == before and len(model.trace) == 0


def test_missing_parameter_is_a_programming_error():
    model = EditorModel(wb.workloads.matmul(16, 16, 16))
    with pytest.raises(TypeError, match="pad_einsum needs padding="):
        model.apply("pad_einsum", block="C")


def test_empty_text_box_is_reported_in_the_panel():
    editor = ScheduleEditor(wb.workloads.matmul(16, 16, 16))
    select(editor, "block", "C")
    editor.action.value = "transform_layout"
    arg(editor, "transform_layout", "index_map").value = ""
    editor.apply_button.click()
    assert "transform_layout: type the index map" in editor.error_html.value
    assert len(editor.model.trace) == 0


def test_typed_text_is_read_as_literals_only():
    assert parse_int_list("pad_einsum", "padding", "16, 8") == [16, 8]
    with pytest.raises(EditorError, match="pad_einsum: cannot read padding"):
        parse_int_list("pad_einsum", "padding", "__import__('os').getcwd()")
    with pytest.raises(EditorError, match="list of integers"):
        parse_int_list("pad_einsum", "padding", "1.5, 2")
    assert parse_number("transform_layout", "pad value", " -2 ") == -2
    with pytest.raises(EditorError, match="must be a number"):
        parse_number("transform_layout", "pad value", "'x'")


def test_every_extra_action_names_an_existing_schedule_method():
    methods = {"tensorize": "tensorize"}
    for name, spec in EXTRA_ACTIONS.items():
        assert callable(getattr(wb.Schedule, methods.get(name, name), None)), name
        assert spec.help and spec.targets


def test_transform_layout_from_the_text_box_matches_the_schedule_method():
    editor = ScheduleEditor(wb.workloads.matmul(16, 16, 16))
    select(editor, "block", "C")
    editor.action.value = "transform_layout"
    buffer = arg(editor, "transform_layout", "buffer")
    assert [label for label, _ in buffer.options] == ["read A", "read B", "write C"]
    buffer.value = ("read", 1)
    arg(editor, "transform_layout", "index_map").value = (
        "lambda i, j: (i // 4, j // 4, i % 4, j % 4)")
    editor.apply_button.click()
    assert editor.error == ""
    by_hand = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    by_hand.transform_layout(by_hand.get_block("C"), ("read", 1),
                             lambda i, j: (i // 4, j // 4, i % 4, j % 4))
    assert editor.schedule.mod.script() == by_hand.mod.script()
    assert editor.model.steps[-1] == (
        "transform_layout C read B by lambda i, j: (i // 4, j // 4, i % 4, j % 4)")
    assert "sch.transform_layout(" in str(editor.model.trace)


def test_transform_layout_text_is_never_run():
    model = EditorModel(wb.workloads.matmul(16, 16, 16))
    assert not model.apply("transform_layout", block="C", buffer=("read", 0),
                           index_map="lambda i, j: __import__('os').getcwd()")
    assert "transform_layout" in model.error or "index map" in model.error.lower()
    assert len(model.trace) == 0


def test_pad_einsum_and_set_dtype_through_the_model():
    model = EditorModel(wb.workloads.matmul(30, 30, 30))
    assert model.apply("pad_einsum", block="C", padding="32, 32, 32"), model.error
    by_hand = wb.Schedule(wb.workloads.matmul(30, 30, 30))
    by_hand.pad_einsum(by_hand.get_block("C"), [32, 32, 32])
    assert model.schedule.mod.script() == by_hand.mod.script()
    wb.verify(model.schedule.mod, wb.workloads.matmul(30, 30, 30))
    assert not model.apply("pad_einsum", block="C", padding="32, x")
    assert "pad_einsum: cannot read padding" in model.error

    chain = EditorModel(chain_func(8))
    first = next(t for t in chain.tree() if t.kind == "block")
    assert chain.apply("unsafe_set_dtype", block=first.name, buffer=0, dtype="float64"), \
        chain.error
    assert "float64" in chain.schedule.mod.script()


def test_decompose_padding_offers_the_loops_above_the_block():
    editor = ScheduleEditor(padded_func(8, 2))
    select(editor, "block", "pad")
    assert "decompose_padding" in editor.model.actions_for()
    editor.action.value = "decompose_padding"
    loops = arg(editor, "decompose_padding", "loop")
    assert [label for label, _ in loops.options] == ["i"]
    editor.apply_button.click()
    assert editor.error == ""
    assert editor.model.steps[-1] == "decompose_padding pad at i"
    wb.verify(editor.schedule.mod, padded_func(8, 2))
