"""What a primitive changed: a line diff of two printed IRs, as data and as HTML.

The model (:func:`diff_rows`, :class:`DiffStats`, :func:`unified_text`) is plain
Python; :func:`render_side_by_side` and :func:`render_unified` turn it into themed HTML
(inline styles on JupyterLab's CSS variables, so it reads in light and dark themes and
works inside ``widgets.HTML``). Changes are marked twice — a tinted background and a
``+``/``-``/``~`` gutter — so they don't depend on colour alone; inside a changed line
the characters that differ are emphasised. Lines are aligned ignoring their leading
spaces: a line that only moved one level deeper (a new loop around it) is tinted lightly,
its gutter says so in a tooltip, and none of its characters are emphasised.

>>> rows = diff_rows("a = 1\\nb = 2\\nc = 3", "a = 1\\nb = 20\\nc = 3\\nd = 4")
>>> [(r.kind, r.old, r.new) for r in rows]  # doctest: +NORMALIZE_WHITESPACE
[('equal', 'a = 1', 'a = 1'), ('replace', 'b = 2', 'b = 20'),
 ('equal', 'c = 3', 'c = 3'), ('insert', None, 'd = 4')]
>>> str(DiffStats.of(rows))
'+1 -0 ~1'
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..ir.highlight import CODE_STYLE, _segments, render_segments
from .wording import count as plural

__all__ = [
    "DiffRow",
    "DiffStats",
    "as_ir_text",
    "check_syntax",
    "diff_rows",
    "render_diff",
    "render_side_by_side",
    "render_unified",
    "unified_text",
]

#: Background tints (translucent, so they work on light and dark backgrounds).
TINT = {
    "insert": "rgba(46,160,67,0.20)",
    "delete": "rgba(248,81,73,0.20)",
    "replace": "rgba(210,153,34,0.20)",
    "indent": "rgba(210,153,34,0.07)",
}
#: Tooltip of the gutter of a line whose only change is its indentation.
INDENT_ONLY = "only the indentation changed"
#: Stronger tint for the characters that differ inside a changed line.
EMPHASIS = {
    "insert": "background:rgba(46,160,67,0.45);border-radius:2px",
    "delete": "background:rgba(248,81,73,0.45);border-radius:2px",
}
GUTTER = {"equal": " ", "insert": "+", "delete": "-", "replace": "~"}


def check_syntax(syntax: str) -> str:
    """``syntax`` if it is a printer syntax (``"classic"`` or ``"tirx"``), else ValueError."""
    if syntax not in ("classic", "tirx"):
        raise ValueError(f'syntax must be "classic" or "tirx", got {syntax!r}')
    return syntax


def as_ir_text(source: Any, syntax: str = "classic") -> str:
    """The printed IR of a PrimFunc, IRModule or Schedule (the function it works on);
    a str is returned as is."""
    if isinstance(source, str):
        return source
    if hasattr(source, "trace") and hasattr(source, "func"):  # a Schedule: its current function
        return source.func.script(syntax=syntax)
    script = getattr(source, "script", None)
    if callable(script):
        return script(syntax=syntax)
    raise TypeError(
        f"expected a PrimFunc, IRModule, Schedule or str, got {type(source).__name__}"
    )


@dataclass(frozen=True)
class DiffRow:
    """One row of a side-by-side diff.

    ``kind`` is ``"equal"``, ``"insert"`` (only ``new``), ``"delete"`` (only ``old``)
    or ``"replace"`` (``old`` became ``new``); line numbers count from 1.
    """

    kind: str
    old_no: int | None
    new_no: int | None
    old: str | None
    new: str | None

    @property
    def indent_only(self) -> bool:
        """A changed line whose only change is its indentation."""
        return (self.kind == "replace" and self.old is not None and self.new is not None
                and self.old.lstrip(" ") == self.new.lstrip(" "))


@dataclass(frozen=True)
class DiffStats:
    """Counts of added, removed and changed lines."""

    added: int = 0
    removed: int = 0
    changed: int = 0

    @classmethod
    def of(cls, rows: Sequence[DiffRow]) -> DiffStats:
        kinds = [r.kind for r in rows]
        return cls(kinds.count("insert"), kinds.count("delete"), kinds.count("replace"))

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def __str__(self) -> str:
        return f"+{self.added} -{self.removed} ~{self.changed}"


def diff_rows(before: str, after: str) -> list[DiffRow]:
    """Align the lines of ``before`` and ``after`` (difflib, no junk heuristics).

    Lines are aligned on their text without the leading spaces, so a block that moved one
    level deeper (a new loop around it) pairs line by line with its old self; such a pair
    is a ``"replace"`` whose :attr:`DiffRow.indent_only` is true. In a replaced run, lines
    are paired in order; the surplus on either side becomes deletions or insertions.

    >>> [(r.kind, r.indent_only) for r in diff_rows("for i:\\n  x = 1", "for i:\\n    x = 1")]
    [('equal', False), ('replace', True)]
    """
    a, b = before.split("\n"), after.split("\n")
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(None, [x.lstrip(" ") for x in a],
                                      [x.lstrip(" ") for x in b], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [DiffRow("equal" if a[i] == b[j] else "replace", i + 1, j + 1, a[i], b[j])
                     for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
            continue
        pairs = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        rows += [DiffRow("replace", i1 + n + 1, j1 + n + 1, a[i1 + n], b[j1 + n])
                 for n in range(pairs)]
        rows += [DiffRow("delete", i + 1, None, a[i], None) for i in range(i1 + pairs, i2)]
        rows += [DiffRow("insert", None, j + 1, None, b[j]) for j in range(j1 + pairs, j2)]
    return rows


def unified_text(before: str, after: str, context: int = 3,
                 names: tuple[str, str] = ("before", "after")) -> str:
    """A plain ``diff -u`` style text (stable; good for tests and for copying).

    >>> print(unified_text("x\\ny", "x\\nz"))
    --- before
    +++ after
    @@ -1,2 +1,2 @@
     x
    -y
    +z
    """
    lines = difflib.unified_diff(before.split("\n"), after.split("\n"), names[0], names[1],
                                 n=context, lineterm="")
    return "\n".join(lines)


def _visible(rows: Sequence[DiffRow], context: int | None) -> list[DiffRow | int]:
    """Rows to show: all, or only changes with ``context`` equal rows around them; a run
    of hidden equal rows becomes its length (an int)."""
    if context is None:
        return list(rows)
    keep = [False] * len(rows)
    for n, r in enumerate(rows):
        if r.kind != "equal":
            for m in range(max(0, n - context), min(len(rows), n + context + 1)):
                keep[m] = True
    out: list[DiffRow | int] = []
    hidden = 0
    for r, k in zip(rows, keep, strict=True):
        if k:
            if hidden:
                out.append(hidden)
                hidden = 0
            out.append(r)
        else:
            hidden += 1
    if hidden:
        out.append(hidden)
    return out


def _changed_ranges(old: str, new: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The character ranges that differ in ``old`` and in ``new``. Leading spaces are
    left out of the comparison: a change of indentation alone emphasises nothing, and
    it does not scatter emphasis over the rest of a line that changed otherwise."""
    io, jo = len(old) - len(old.lstrip(" ")), len(new) - len(new.lstrip(" "))
    matcher = difflib.SequenceMatcher(None, old[io:], new[jo:], autojunk=False)
    olds, news = [], []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            if i2 > i1:
                olds.append((io + i1, io + i2))
            if j2 > j1:
                news.append((jo + j1, jo + j2))
    return olds, news


class _Lines:
    """Highlighted lines of both texts (lexed once each, whole-text context)."""

    def __init__(self, before: str, after: str):
        self.old = _segments(before)
        self.new = _segments(after)

    def render(self, row: DiffRow, side: str) -> str:
        text = row.old if side == "old" else row.new
        no = row.old_no if side == "old" else row.new_no
        if text is None or no is None:
            return ""
        segs = (self.old if side == "old" else self.new)[no - 1]
        if row.kind == "replace" and row.old is not None and row.new is not None:
            olds, news = _changed_ranges(row.old, row.new)
            ranges = olds if side == "old" else news
            style = EMPHASIS["delete" if side == "old" else "insert"]
            return render_segments(segs, ranges, style)
        return render_segments(segs)


_TD = "padding:0 4px;vertical-align:top;"
_NO = (_TD + "text-align:right;user-select:none;opacity:0.55;"
       "border-right:1px solid var(--jp-border-color2,#ddd)")
_GUTTER = _TD + "user-select:none;width:1ch;font-weight:bold"
_CODE = _TD + "white-space:pre"
_FOLD = ("padding:1px 6px;text-align:center;opacity:0.7;font-style:italic;"
         "background:var(--jp-layout-color2,#eee)")


def _fold(count: int, colspan: int) -> str:
    return (f'<tr class="wb-diff-fold"><td colspan="{colspan}" style="{_FOLD}">'
            f"&#8943; {plural(count, 'unchanged line')}</td></tr>")


def _table(body: list[str], css_class: str, columns: str = "") -> str:
    layout = "table-layout:fixed;" if columns else ""
    return (f'<div class="{css_class}" style="{CODE_STYLE};padding:0">'
            f'<table style="border-collapse:collapse;width:100%;{layout}font:inherit;'
            f'color:inherit">{columns}' + "".join(body) + "</table></div>")


# Side by side: two halves of equal width; a long line wraps inside its half, at spaces
# where it can, with a hanging indent: its continuation lines start HANG columns right of
# the line's own indentation, so they read as one statement and the row (both halves)
# stays one row of the table.
_SIDE_COLUMNS = ('<colgroup><col style="width:3.2em"><col style="width:1.4em"><col>'
                 '<col style="width:3.2em"><col style="width:1.4em"><col></colgroup>')
_WRAP = "white-space:pre-wrap;overflow-wrap:break-word;"
#: Extra indentation (in characters) of a wrapped line's continuation lines.
HANG = 4


def hanging_indent(text: str | None, pad: str = "4px") -> str:
    """Inline style for a code cell holding ``text``: continuation lines of a wrapped
    line start ``HANG`` characters right of its indentation (the first line is where it
    was: ``text-indent`` takes back the padding). ``pad`` is the cell's own left padding
    ("" for none).

    >>> hanging_indent("    for i in range(4):")
    'padding-left:calc(4px + 8ch);text-indent:-8ch;'
    >>> hanging_indent("    for i in range(4):", pad="")
    'padding-left:8ch;text-indent:-8ch;'
    """
    if not text:
        return ""
    hang = len(text) - len(text.lstrip(" ")) + HANG
    left = f"calc({pad} + {hang}ch)" if pad else f"{hang}ch"
    return f"padding-left:{left};text-indent:-{hang}ch;"


def _indent_title(row: DiffRow) -> str:
    """A tooltip attribute for the gutter of a line whose indentation alone changed."""
    return f' title="{INDENT_ONLY}"' if row.indent_only else ""


def _side_kind(kind: str, side: str) -> str:
    if kind == "replace":
        return "replace"
    if kind == "insert":
        return "insert" if side == "new" else "empty"
    if kind == "delete":
        return "delete" if side == "old" else "empty"
    return "equal"


def render_side_by_side(before: str, after: str, context: int | None = None) -> str:
    """HTML table: the old IR on the left, the new one on the right, rows aligned.

    ``context`` None shows everything; a number folds unchanged runs to that many
    lines around each change.
    """
    rows = diff_rows(before, after)
    lines = _Lines(before, after)
    body = []
    for item in _visible(rows, context):
        if isinstance(item, int):
            body.append(_fold(item, 6))
            continue
        cells = []
        for side in ("old", "new"):
            kind = _side_kind(item.kind, side)
            no = item.old_no if side == "old" else item.new_no
            text = item.old if side == "old" else item.new
            tint = TINT.get("indent" if item.indent_only else kind, "")
            if kind == "empty":
                tint = "var(--jp-layout-color2,rgba(127,127,127,0.08))"
            bg = f"background:{tint};" if tint else ""
            mark = GUTTER[kind] if kind != "empty" else " "
            border = "border-left:1px solid var(--jp-border-color2,#ddd);" if side == "new" else ""
            cells.append(
                f'<td style="{_NO};{border}{bg}">{no or ""}</td>'
                f'<td style="{_GUTTER};{bg}"{_indent_title(item)}>{mark}</td>'
                f'<td style="{_CODE};{_WRAP}{hanging_indent(text)}{bg}">'
                f'{lines.render(item, side)}</td>'
            )
        body.append(f'<tr class="wb-diff-{item.kind}">{"".join(cells)}</tr>')
    return _table(body, "wb-diff wb-diff-side", _SIDE_COLUMNS)


def render_unified(before: str, after: str, context: int | None = None) -> str:
    """HTML of a unified diff: removed lines (``-``) above the added ones (``+``)."""
    rows = diff_rows(before, after)
    lines = _Lines(before, after)
    body = []

    def line(kind: str, row: DiffRow, side: str) -> str:
        tint = TINT.get("indent" if row.indent_only else kind, "")
        bg = f"background:{tint};" if tint else ""
        no_old = row.old_no if side == "old" else ""
        no_new = row.new_no if side == "new" or kind == "equal" else ""
        if kind == "equal":
            no_old = row.old_no
        mark = {"delete": "-", "insert": "+"}.get(kind, " ")
        return (f'<tr class="wb-diff-{kind}"><td style="{_NO};{bg}">{no_old or ""}</td>'
                f'<td style="{_NO};{bg}">{no_new or ""}</td>'
                f'<td style="{_GUTTER};{bg}"{_indent_title(row)}>{mark}</td>'
                f'<td style="{_CODE};{bg}">{lines.render(row, side)}</td></tr>')

    pending_new: list[str] = []
    for item in _visible(rows, context):
        if isinstance(item, int) or item.kind in ("equal",):
            body += pending_new
            pending_new = []
        if isinstance(item, int):
            body.append(_fold(item, 4))
        elif item.kind == "equal":
            body.append(line("equal", item, "new"))
        elif item.kind == "delete":
            body.append(line("delete", item, "old"))
        elif item.kind == "insert":
            pending_new.append(line("insert", item, "new"))
        else:  # replace: the old line now, the new one after the run
            body.append(line("delete", item, "old"))
            pending_new.append(line("insert", item, "new"))
    body += pending_new
    return _table(body, "wb-diff wb-diff-unified")


def render_diff(before: str, after: str, mode: str = "side", context: int | None = None) -> str:
    """:func:`render_side_by_side` (``mode="side"``) or :func:`render_unified`
    (``mode="unified"``); a note instead of a table when nothing changed."""
    if mode not in ("side", "unified"):
        raise ValueError(f'diff mode must be "side" or "unified", got {mode!r}')
    if before == after:
        return ('<div class="wb-diff wb-diff-none" style="padding:2px 6px;opacity:0.75;'
                'font-style:italic">no change to the IR</div>')
    render = render_side_by_side if mode == "side" else render_unified
    return render(before, after, context)


def escape(text: str) -> str:
    """HTML-escape ``text`` (quotes kept: the views put it in element content)."""
    return html.escape(text, quote=False)
