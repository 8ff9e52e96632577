"""Long IR lines in the side-by-side diff wrap with a hanging indent, rows kept aligned."""

from __future__ import annotations

import re

from workbench.widgets.diff import HANG, render_side_by_side

BEFORE = "def f():\n    x = 1\n    return x"
LONG = "    y = " + " + ".join(f"a{i}[i, j, k]" for i in range(20))
AFTER = f"def f():\n    x = 2\n{LONG}\n    return x"


def _code_cells(html: str) -> list[str]:
    """The style attribute of every code cell (the third and sixth cell of a row)."""
    rows = re.findall(r'<tr class="wb-diff-\w+">(.*?)</tr>', html)
    cells = [re.findall(r'<td style="([^"]*)"', row) for row in rows]
    assert all(len(c) == 6 for c in cells)          # every row has both halves
    return [style for c in cells for style in (c[2], c[5])]


def test_long_lines_wrap_with_a_hanging_indent():
    html = render_side_by_side(BEFORE, AFTER)
    styles = _code_cells(html)
    long_style = next(s for s in styles if f"text-indent:-{4 + HANG}ch" in s)
    assert f"padding-left:calc(4px + {4 + HANG}ch)" in long_style
    assert "white-space:pre-wrap" in long_style
    # wrapping prefers spaces; it breaks inside a word only when a word is wider than the half
    assert "overflow-wrap:break-word" in long_style and "anywhere" not in html
    # the hang follows each line's own indentation
    assert any(f"text-indent:-{HANG}ch;" in s for s in styles)         # "def f():"


def test_empty_half_has_no_indent_and_rows_stay_paired():
    html = render_side_by_side("a\nb", "a\nb\nc")
    rows = re.findall(r'<tr class="wb-diff-insert">(.*?)</tr>', html)
    assert len(rows) == 1
    old_code = re.findall(r'<td style="([^"]*)"', rows[0])[2]
    assert "text-indent" not in old_code
