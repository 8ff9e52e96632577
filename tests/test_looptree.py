"""The loop tree (an anywidget) and the reorder list: their logic as plain functions,
their messages round-tripped through ipywidgets' custom-message entry point (what the
front end's ``model.send`` arrives as), and the editor driven through them; plus the
rule that a step which leaves the IR as it was is not recorded."""

from __future__ import annotations

import re

import pytest
import traitlets

import workbench as wb
from workbench.widgets.editor import ScheduleEditor
from workbench.widgets.editor_model import EditorModel, tree_of
from workbench.widgets.looptree import (
    STATIC,
    LoopTree,
    ReorderList,
    children,
    drop_order,
    drop_targets,
    move,
    navigate,
    parents,
    row_keys,
    visible,
)

TRIANGLE = '''
@T.prim_func
def tri(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i in range(8):
        for j in range(i + 1):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial(8, j)
                B[vi, vj] = A[vi, vj]
'''


def send(widget, **content) -> None:
    """What a front-end ``model.send(content)`` arrives as in the kernel."""
    widget._handle_custom_msg(content, [])


def names(items, rows) -> list[str]:
    return [items[n].name for n in rows]


@pytest.fixture
def mm():
    # rows: 0 i, 1 j, 2 k, 3 Y, 4 i, 5 j, 6 C
    return tree_of(wb.workloads.mm_relu(16, 16, 16))


@pytest.fixture
def editor() -> ScheduleEditor:
    return ScheduleEditor(wb.workloads.mm_relu(64, 64, 64))


def row(editor: ScheduleEditor, kind: str, name: str, nth: int = 0) -> int:
    return [n for n, t in enumerate(editor.tree.items) if t.kind == kind and t.name == name][nth]


# ------------------------------------------------------------ pure functions


def test_structure_parents_children_keys(mm):
    assert parents(mm) == [-1, 0, 1, 2, -1, 4, 5]
    assert children(mm) == [[1], [2], [3], [], [5], [6], []]
    keys = row_keys(mm)
    assert len(set(keys)) == len(keys)  # two "i" and two "j" loops, distinct keys
    assert keys[4] == "loop:i#1" and keys[6] == "loop:i#1/loop:j/block:C"


def test_visible_hides_the_rows_under_a_collapsed_row(mm):
    assert visible(mm, set()) == list(range(7))
    assert visible(mm, {1}) == [0, 1, 4, 5, 6]
    assert visible(mm, {0, 5}) == [0, 4, 5]


@pytest.mark.parametrize("selected, key, collapsed, expected", [
    (0, "ArrowDown", set(), (1, set())),
    (6, "ArrowDown", set(), (6, set())),            # stays at the end
    (0, "ArrowUp", set(), (0, set())),
    (4, "ArrowUp", {1}, (1, {1})),                 # skips the hidden k and Y
    (2, "Home", set(), (0, set())),
    (2, "End", {5}, (5, {5})),                     # C is hidden: the last shown is j
    (1, "ArrowLeft", set(), (1, {1})),             # open: collapse
    (1, "ArrowLeft", {1}, (0, {1})),               # closed: go to the parent
    (0, "ArrowLeft", {0}, (0, {0})),               # closed top-level row: stays
    (3, "ArrowLeft", set(), (2, set())),           # a leaf: go to the parent
    (1, "ArrowRight", {1}, (1, set())),            # closed: expand
    (1, "ArrowRight", set(), (2, set())),          # open: first child
    (3, "ArrowRight", set(), (3, set())),          # a leaf: stays
    (-1, "ArrowDown", set(), (0, set())),          # nothing selected: the first row
    (-1, "End", set(), (6, set())),
])
def test_navigate(mm, selected, key, collapsed, expected):
    assert navigate(mm, selected, key, collapsed) == expected


def test_navigate_refuses_unknown_keys(mm):
    with pytest.raises(ValueError, match="unknown key 'Tab'"):
        navigate(mm, 0, "Tab", set())


def test_drop_order_moves_the_source_to_the_target_place(mm):
    assert names(mm, drop_order(mm, 2, 0)) == ["k", "i", "j"]   # k onto i: k outermost
    assert names(mm, drop_order(mm, 0, 2)) == ["j", "k", "i"]   # i onto k: i innermost
    assert names(mm, drop_order(mm, 2, 1)) == ["k", "j"]
    assert names(mm, drop_order(mm, 5, 4)) == ["j", "i"]


def test_only_loops_of_one_chain_can_be_dropped_on_each_other(mm):
    assert drop_order(mm, 0, 0) is None        # onto itself
    assert drop_order(mm, 0, 5) is None        # i above Y, j above C: two nests
    assert drop_order(mm, 2, 3) is None        # onto a block
    assert drop_order(mm, 3, 2) is None        # a block dragged
    assert drop_order(mm, 0, 99) is None
    assert drop_targets(mm) == {0: [1, 2], 1: [0, 2], 2: [0, 1], 4: [5], 5: [4]}


def test_a_loop_with_two_children_ends_the_chain():
    model = EditorModel(wb.workloads.mm_relu(16, 16, 16))
    assert model.apply("reverse_compute_at", block="C", loop="j", under="Y")
    items = model.tree()  # i, j, {k, Y}, {ax0?, C}: j holds two nests
    j = next(n for n, t in enumerate(items) if t.name == "j")
    assert len(children(items)[j]) == 2
    i, k = 0, next(n for n, t in enumerate(items) if t.name == "k")
    assert drop_order(items, i, j) == [j, i]
    assert drop_order(items, i, k) is None and k not in drop_targets(items)[i]


def test_move_keeps_every_loop():
    order = ["j_0", "j_1", "k"]
    assert move(order, 2, -1) == ["j_0", "k", "j_1"]
    assert move(order, 0, 1) == ["j_1", "j_0", "k"]
    assert move(order, 0, -1) == order and move(order, 2, 1) == order
    assert move(order, 7, 1) == order
    assert move(order, 0, 5) == ["j_1", "k", "j_0"]  # clamped at the end


# ---------------------------------------------------------------- LoopTree


def test_rows_carry_name_extent_and_kind():
    sch = wb.Schedule(wb.workloads.mm_relu(16, 16, 16))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.parallel(i)
    sch.bind(j, "threadIdx.x")
    tree = LoopTree(sch)
    rows = {(r["kind"], r["name"]): r for r in tree.rows[:4]}
    assert rows["loop", "i"]["detail"] == "parallel" and rows["loop", "i"]["extent"] == "16"
    assert rows["loop", "j"]["detail"] == "threadIdx.x"
    assert rows["loop", "k"]["detail"] == "serial"
    assert rows["block", "Y"]["detail"] == "reduction"
    assert rows["block", "Y"]["iter_kinds"] == "S S R"
    assert tree.rows[6]["name"] == "C" and tree.rows[6]["detail"] == "spatial"
    # loops of mm_relu repeat names (i, j above Y and above C): rows say which block
    assert [(r["name"], r["block"]) for r in tree.rows] == [
        ("i", "Y"), ("j", "Y"), ("k", "Y"), ("Y", "Y"), ("i", "C"), ("j", "C"), ("C", "C")]
    assert [r["has_children"] for r in tree.rows] == [True, True, True, False, True, True, False]


def test_front_end_messages_round_trip(mm):
    tree = LoopTree(mm)
    selected = []
    tree.on_select(lambda n: (selected.append(n), tree.set_selected(n)))
    send(tree, type="select", index=2)
    assert selected == [2] and tree.selected == 2
    send(tree, type="key", key="ArrowUp")
    assert tree.selected == 1
    send(tree, type="key", key="ArrowLeft")           # j is open: collapse it
    assert tree.collapsed == ["loop:i/loop:j"] and tree.selected == 1
    assert [r["hidden"] for r in tree.rows] == [False, False, True, True, False, False, False]
    assert tree.rows[1]["expanded"] is False
    send(tree, type="key", key="ArrowDown")           # past the hidden rows
    assert tree.selected == 4
    send(tree, type="toggle", index=1)                # expand j again by its toggle
    assert tree.collapsed == [] and not any(r["hidden"] for r in tree.rows)
    assert selected == [2, 1, 4]


def test_collapsing_a_row_moves_the_selection_out_of_it(mm):
    tree = LoopTree(mm, selected=3)
    send(tree, type="toggle", index=0)
    assert tree.selected == 0 and tree.visible_rows == [0, 4, 5, 6]
    send(tree, type="toggle", index=3)                # a leaf: nothing to toggle
    assert tree.collapsed == ["loop:i"]


def test_selecting_a_hidden_row_reveals_it_and_collapse_survives_new_items(mm):
    tree = LoopTree(mm)
    send(tree, type="toggle", index=0)
    send(tree, type="toggle", index=4)
    assert tree.collapsed == ["loop:i", "loop:i#1"]
    tree.set_selected(6)                              # C, under the collapsed second i
    assert tree.collapsed == ["loop:i"] and 6 in tree.visible_rows
    tree.set_items(mm, selected=6)                    # the same tree again (after a step)
    assert tree.collapsed == ["loop:i"]
    with pytest.raises(IndexError):
        tree.set_selected(7)


def test_drop_messages_call_on_drop_or_on_error(mm):
    tree = LoopTree(mm)
    drops, errors = [], []
    tree.on_drop(lambda s, t, order: drops.append((s, t, order)))
    tree.on_error(errors.append)
    assert tree.drop_targets == {"0": [1, 2], "1": [0, 2], "2": [0, 1], "4": [5], "5": [4]}
    send(tree, type="drop", source=2, target=0)
    assert drops == [(2, 0, [2, 0, 1])] and errors == []
    send(tree, type="drop", source=0, target=5)
    assert len(drops) == 1 and errors[0].startswith("reorder: cannot drop loop i on j")


def test_malformed_messages_never_raise(mm):
    tree = LoopTree(mm)
    errors = []
    tree.on_error(errors.append)
    for content in [{"type": "select"}, {"type": "select", "index": "x"},
                    {"type": "key", "key": "Tab"}, {"type": "nope"}, ["not", "a", "dict"],
                    {"type": "select", "index": 99}]:
        tree._handle_custom_msg(content, [])
    assert tree.selected == -1
    assert len(errors) == 2 and all(e.startswith("loop tree:") for e in errors)


def test_front_end_files_are_loaded_and_use_the_dom_hooks():
    tree = LoopTree(wb.workloads.matmul(8, 8, 8))
    js, css = tree._esm, tree._css
    assert js == (STATIC / "looptree.js").read_text()
    assert css == (STATIC / "looptree.css").read_text()
    assert "export default" in js
    for hook in ["wb-looptree", "wb-looptree-row", "wb-looptree-selected",
                 "wb-looptree-target", "wb-looptree-toggle", "dataset.name", "dataset.kind",
                 "dataset.block",
                 "draggable", '"drop"', '"dragover"', '"keydown"', "tabIndex"]:
        assert hook in js, hook
    for var in ["--jp-layout-color1", "--jp-brand-color1", "--jp-ui-font-color1"]:
        assert var in css
    assert ".wb-looptree:focus-visible" in css and ".wb-looptree-drop" in css
    reorder_js = ReorderList()._esm
    for hook in ["wb-reorder", "wb-reorder-item", "wb-reorder-up", "wb-reorder-down",
                 "dataset.name"]:
        assert hook in reorder_js, hook
    # the state the front end reads is synced
    state = tree.get_state()
    assert {"rows", "selected", "targets", "drop_targets", "collapsed"} <= set(state)


# ------------------------------------------------------------- ReorderList


def test_reorder_list_buttons_and_no_lost_loop():
    r = ReorderList(["j_0", "j_1", "k"])
    send(r, type="move", index=2, delta=-1)
    assert r.value == ["j_0", "k", "j_1"]
    send(r, type="move", index=0, delta=-1)             # already at the top
    assert r.value == ["j_0", "k", "j_1"]
    send(r, type="move", index="x", delta=1)            # malformed: ignored
    with pytest.raises(traitlets.TraitError, match="must list each of"):
        r.value = ["j_0", "k"]                          # a loop lost: refused
    with pytest.raises(traitlets.TraitError):
        r.value = ["j_0", "k", "k"]
    assert r.value == ["j_0", "k", "j_1"]
    r.set_items(["i", "j"])
    assert r.items == ["i", "j"] and r.value == ["i", "j"]


# ------------------------------------------------------ the editor's tree


def test_editor_tree_is_the_loop_tree_and_clicks_select(editor):
    assert isinstance(editor.tree, LoopTree)
    assert editor.tree.selected == row(editor, "block", "Y")
    send(editor.tree, type="select", index=row(editor, "loop", "j"))
    assert editor.model.selected.name == "j" and editor.model.selected.kind == "loop"
    assert editor.action.options[0] == "split"
    send(editor.tree, type="key", key="ArrowDown")
    assert editor.model.selected.name == "k"
    send(editor.tree, type="key", key="End")
    assert editor.model.selected.name == "C"
    assert editor.tree.selected == len(editor.tree.items) - 1


def test_editor_keeps_the_collapsed_rows_across_a_step(editor):
    send(editor.tree, type="toggle", index=4)            # the second i (above C)
    assert editor.apply("split", loop="j", under="Y", factors=[None, 4])
    assert editor.tree.collapsed == ["loop:i#1"]
    assert [editor.tree.items[n].name for n in editor.tree.visible_rows][-1] == "i"


def test_drag_a_loop_onto_another_reorders(editor):
    editor.apply("split", loop="j", factors=[None, 4])
    send(editor.tree, type="drop", source=row(editor, "loop", "k"),
         target=row(editor, "loop", "j_1"))
    assert editor.error == ""
    assert [t.name for t in editor.model.tree() if t.kind == "loop"][:4] == [
        "i", "j_0", "k", "j_1"]
    assert editor.trace.script().splitlines()[-1].strip() == "sch.reorder(l3, l5)"
    assert editor.model.steps[-1] == "reorder k, j_1"
    assert "step 2 of 2" in editor.title.value


def test_an_illegal_drop_shows_the_error_and_records_nothing(editor):
    before = (editor.model.func.script(), editor.trace.script(), editor.model.step)
    send(editor.tree, type="drop", source=row(editor, "loop", "i"),
         target=row(editor, "loop", "j", 1))                # j above C: another nest
    assert editor.error.startswith("reorder: cannot drop loop i on j")
    assert "cannot drop loop i on j" in editor.error_html.value
    assert (editor.model.func.script(), editor.trace.script(), editor.model.step) == before


def test_a_drop_the_primitive_refuses_shows_its_error_and_records_nothing():
    editor = ScheduleEditor(TRIANGLE)
    before = editor.model.func.script()
    send(editor.tree, type="drop", source=1, target=0)      # j's extent uses i
    assert editor.error.startswith('reorder: the extent of loop "j" (i + 1) uses loop "i"')
    assert "DependentLoopError" in editor.error_html.value
    assert editor.model.func.script() == before and editor.model.steps == []
    assert len(editor.trace) == 0


@pytest.mark.parametrize("action", ["compute_at", "reverse_compute_at"])
def test_the_legal_compute_targets_are_highlighted(action):
    editor = ScheduleEditor(wb.workloads.conv2d_nchw(1, 4, 8, 8, 4, 3, 3))
    block = "pad" if action == "compute_at" else "conv"
    editor.select(block)
    editor.action.value = "cache_write"
    assert editor.tree.targets == []
    editor.action.value = action
    legal = editor.model.compute_targets(action, block)
    expected = [n for n, t in enumerate(editor.tree.items) if any(t.same(x) for x in legal)]
    assert editor.tree.targets == expected
    if action == "compute_at":
        assert expected, "the pad stage can go under the conv loops"
        assert all(editor.tree.items[n].kind == "loop" for n in expected)
    editor.action.value = "compute_inline"          # another action: no highlight
    assert editor.tree.targets == []


def test_highlighted_targets_follow_the_selection(editor):
    editor.select("C")
    editor.action.value = "reverse_compute_at"
    assert [editor.tree.items[n].name for n in editor.tree.targets] == ["i", "j", "k"]
    send(editor.tree, type="select", index=row(editor, "loop", "i"))  # a loop: no action
    assert editor.tree.targets == []


def test_reorder_list_apply(editor):
    editor.apply("split", loop="j", factors=[None, 4])
    send(editor.tree, type="select", index=row(editor, "loop", "j_0"))
    editor.action.value = "reorder"
    assert editor.reorder_loops in editor.args_box.children
    assert editor.reorder_loops.value == ["j_0", "j_1", "k"]
    send(editor.reorder_loops, type="move", index=2, delta=-1)
    editor.apply_button.click()
    assert editor.error == ""
    assert [t.name for t in editor.model.tree() if t.kind == "loop"][:4] == [
        "i", "j_0", "k", "j_1"]


# ------------------------------------------------------ no-op not recorded


def test_a_reorder_into_the_same_order_is_not_recorded(editor):
    editor.apply("split", loop="j", factors=[None, 4])
    trace = editor.trace.script()
    send(editor.tree, type="select", index=row(editor, "loop", "j_0"))
    editor.action.value = "reorder"
    editor.apply_button.click()                     # the list as it is: nothing to do
    assert editor.error == "no change: reorder left the IR as it was"
    assert "no change: reorder left the IR as it was" in editor.error_html.value
    assert "wb-error-message" not in editor.error_html.value  # a notice, not an error
    assert editor.model.steps == ["split j by [None, 4]"]
    assert editor.trace.script() == trace
    assert "step 1 of 1" in editor.title.value


def test_a_no_op_keeps_the_redo_branch_and_the_title_right():
    model = EditorModel(wb.workloads.mm_relu(16, 16, 16))
    assert model.apply("parallel", loop="i", under="Y")
    assert not model.apply("parallel", loop="i", under="Y")   # already parallel
    assert model.error == "no change: parallel left the IR as it was"
    assert model.steps == ["parallel i"] and len(model.trace.lines()) == 3
    model.undo()
    assert not model.apply("reorder", loops=["i", "j", "k"], under="Y")
    assert model.can_redo and model.step == 0 and len(model._history) == 2
    assert model.redo() and model.steps == ["parallel i"]
    assert model.apply("vectorize", loop="j", under="C") and model.error == ""


def test_model_drop_and_drop_order():
    model = EditorModel(wb.workloads.mm_relu(16, 16, 16))
    i, j = [t for t in model.tree() if t.kind == "loop"][:2]
    assert model.drop(j, i) and model.steps == ["reorder j, i"]
    assert re.search(r"sch\.reorder\(l\d+, l\d+\)", model.trace.script())
    with pytest.raises(Exception, match="cannot drop block Y"):
        model.drop_order(next(t for t in model.tree() if t.kind == "block"), i)


def test_widgets_have_short_readable_reprs():
    """A displayed widget's text/plain form (what GitHub and plain consoles show) names
    what it is, never ``<... object at 0x...>``."""
    from workbench.widgets.looptree import ReorderList
    from workbench.widgets.transfer import Transfer

    func = wb.workloads.mm_relu(8, 8, 8)
    assert repr(LoopTree(func)) == "LoopTree(7 rows, selected=-1)"
    assert repr(ReorderList(["j_0", "k"])) == "ReorderList(['j_0', 'k'])"
    assert repr(Transfer()) == "Transfer(label='Upload')"
    from workbench import widgets

    editor = widgets.ScheduleEditor(func)
    editor.apply("split", loop="j", factors=[None, 4])
    assert repr(editor) == "ScheduleEditor(mm_relu, step 1: split j by [None, 4])"
    assert repr(widgets.TraceStepper(editor.schedule)) == "TraceStepper(step 0 of 3)"
    assert repr(widgets.CompareView(func, editor.schedule, names=["a", "b"])) == "CompareView(a, b)"
