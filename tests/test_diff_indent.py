"""A change of indentation alone (a new loop around a block) is not a character change
in the IR diff: re-indented lines pair with their old selves and emphasise nothing."""

from __future__ import annotations

import re

import workbench as wb
from workbench.widgets.diff import (
    EMPHASIS,
    INDENT_ONLY,
    DiffStats,
    diff_rows,
    render_side_by_side,
    render_unified,
)


def _vectorize_step() -> tuple[str, str]:
    """The IR before and after vectorizing an inner loop split out of a T.grid: the
    block moves one level deeper under a new ``for j_1 in T.vectorized(4)``."""
    sch = wb.Schedule(wb.workloads.mm_relu(64, 64, 64))
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    before = sch.func.script()
    sch.vectorize(j1)
    return before, sch.func.script()


def _rows_with_emphasis(html: str) -> list[str]:
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", html)
    return [r for r in rows if EMPHASIS["insert"] in r or EMPHASIS["delete"] in r]


def test_reindented_block_pairs_with_its_old_lines():
    before, after = _vectorize_step()
    rows = [r for r in diff_rows(before, after) if r.kind != "equal"]
    inserted = [r.new.strip() for r in rows if r.kind == "insert"]
    assert inserted == ["for j_1 in T.vectorized(4):"]
    assert not [r for r in rows if r.kind == "delete"]
    shifted = [r for r in rows if r.indent_only]
    # the block and its body: same text, four more spaces
    assert len(shifted) == 9
    assert all(r.new == "    " + r.old for r in shifted)
    assert shifted[0].old.strip() == 'with T.block("Y"):'
    # the one line that really changed is the T.grid line
    (changed,) = [r for r in rows if r.kind == "replace" and not r.indent_only]
    assert "T.grid(64, 16, 64, 4)" in changed.old and "T.grid(64, 16, 64)" in changed.new
    assert DiffStats.of(diff_rows(before, after)) == DiffStats(added=1, removed=0, changed=10)


def test_indentation_only_lines_are_not_character_highlighted():
    before, after = _vectorize_step()
    for html in (render_side_by_side(before, after), render_unified(before, after)):
        emphasised = _rows_with_emphasis(html)
        # only the T.grid line (both halves in one row side by side, a -/+ pair unified)
        assert emphasised and all("T.grid" in r for r in emphasised), emphasised
        assert html.count(f'title="{INDENT_ONLY}"') in (9, 18)


def test_real_change_on_a_reindented_line_highlights_only_the_change():
    html = render_side_by_side("    x = a + b", "        x = a + c")
    marked = {side: re.findall(r'<span style="' + re.escape(EMPHASIS[side]) + r'">(.*?)</span>',
                               html) for side in ("delete", "insert")}
    assert marked == {"delete": ["b"], "insert": ["c"]}
    assert INDENT_ONLY not in html
