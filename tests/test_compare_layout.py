"""CompareView with three columns: the columns share the width and each column's IR
sits in its own box, as wide as the column (lines wrap inside it) and capped in height,
scrolling inside."""

from __future__ import annotations

import re

import workbench as wb
from workbench.widgets.compare import IR_MAX_HEIGHT, CompareModel, CompareView


def _three(func):
    plain = wb.Schedule(func)
    split = wb.Schedule(func)
    j0, j1 = split.split(split.get_loops(split.get_block("Y"))[1], factors=[None, 4])
    vec = split.copy()
    vec.reorder(j0, vec.get_loops(vec.get_block("Y"))[-1], j1)
    vec.vectorize(j1)
    return plain, split, vec


def _style_of(html: str, css_class: str) -> str:
    found = re.search(rf'class="{css_class}" style="([^"]*)"', html)
    assert found, html[:300]
    return found[1]


def test_ir_box_scrolls_inside_its_column_and_is_capped():
    func = wb.workloads.mm_relu(128, 128, 128)
    model = CompareModel(*_three(func), names=["plain", "split", "vectorized"])
    for index in range(3):
        html = model.ir_html(index)
        box = _style_of(html, "wb-compare-ir")
        assert f"max-height:{IR_MAX_HEIGHT}" in box and "overflow:auto" in box
        # the IR's lines do not size the column: the box takes the column's width
        assert "contain:inline-size" in box
        # a long line wraps at the column's edge, between words
        assert "white-space:pre-wrap;word-break:normal" in html
    assert "T.vectorized(" in model.ir_text(2)
    assert IR_MAX_HEIGHT == "28em"
    model.diff_against_first = True
    diff = model.ir_html(2)
    assert "wb-diff-unified" in diff and "contain:inline-size" in _style_of(diff, "wb-compare-ir")


def test_three_columns_share_the_width():
    func = wb.workloads.mm_relu(64, 64, 64)
    view = CompareView(*_three(func), names=["plain", "split", "vectorized"])
    row = view.children[1]
    assert row.layout.width == "100%"
    columns = row.children
    assert len(columns) == 3
    for col in columns:
        assert col.layout.flex == "1 1 0" and col.layout.min_width == "0"
    assert "contain:inline-size" in _style_of(view.tree_html[2].value, "wb-compare-tree")
    assert "wb-compare-ir" in view.ir_html[2].value
