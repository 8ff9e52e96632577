"""Theme-aware syntax highlighting for notebooks.

Code is coloured with inline styles that use JupyterLab's own CSS variables (the
colours of its code editor), each with a fallback for other front ends, so the same
HTML reads well in light and dark themes and needs no stylesheet — it works inside a
``widgets.HTML`` too. Lines are rendered one by one so that views can decorate them
(diff markers, marks on a line) without re-lexing.

>>> print(highlight_lines("for i in range(4):\\n    pass")[0])  # doctest: +ELLIPSIS
<span style="color:var(--jp-mirror-editor-keyword-color,#008000);font-weight:bold">for</span> ...
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable, Sequence

__all__ = [
    "CODE_STYLE",
    "code_block",
    "error_banner",
    "highlight_html",
    "highlight_lines",
    "render_segments",
]

# Token class -> inline CSS (JupyterLab's editor colours, light-theme fallbacks).
_STYLES: tuple[tuple[str, str], ...] = (
    ("Comment", "color:var(--jp-mirror-editor-comment-color,#408080);font-style:italic"),
    ("Keyword", "color:var(--jp-mirror-editor-keyword-color,#008000);font-weight:bold"),
    ("Operator.Word", "color:var(--jp-mirror-editor-keyword-color,#aa22ff);font-weight:bold"),
    ("Operator", "color:var(--jp-mirror-editor-operator-color,#aa22ff)"),
    ("Name.Decorator", "color:var(--jp-mirror-editor-meta-color,#aa22ff)"),
    ("Name.Function", "color:var(--jp-mirror-editor-def-color,#0000ff)"),
    ("Name.Builtin", "color:var(--jp-mirror-editor-builtin-color,#008000)"),
    ("Literal.String", "color:var(--jp-mirror-editor-string-color,#ba2121)"),
    ("Literal.Number", "color:var(--jp-mirror-editor-number-color,#080)"),
)

#: Style of the ``<pre>`` around highlighted code: the editor's background and text
#: colours of the current JupyterLab theme (light fallbacks elsewhere).
CODE_STYLE = (
    "margin:0;padding:4px 6px;overflow-x:auto;line-height:1.35;"
    "font-family:var(--jp-code-font-family,monospace);"
    "font-size:var(--jp-code-font-size,12px);"
    "color:var(--jp-content-font-color1,#1f1f1f);"
    "background:var(--jp-cell-editor-background,#f7f7f7)"
)


_STYLE = dict(_STYLES)
_KIND_STYLE = {
    "comment": "Comment",
    "string": "Literal.String",
    "decorator": "Name.Decorator",
    "number": "Literal.Number",
    "operator": "Operator",
}


_KEYWORDS = frozenset(
    "and as assert break class continue def del elif else except finally for from global "
    "if import in is lambda nonlocal not or pass raise return try while with yield".split()
)
_CONSTANTS = frozenset(("True", "False", "None"))
_BUILTINS = frozenset(("range", "len", "int", "float", "bool", "min", "max", "print"))
_TOKEN = re.compile(
    r"""(?P<comment>\#[^\n]*)"""
    r"""|(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
    r"""|(?P<decorator>@[A-Za-z_][\w.]*)"""
    r"""|(?P<number>\b\d+(?:\.\d*)?(?:[eE][+-]?\d+)?\b)"""
    r"""|(?P<name>[A-Za-z_]\w*)"""
    r"""|(?P<operator>\*\*|//|==|!=|<=|>=|->|[-+*/%<>=!&|^~])"""
    r"""|(?P<punct>[()\[\]{}:,.;])"""
    r"""|(?P<space>[ \t]+)"""
    r"""|(?P<newline>\n)"""
    r"""|(?P<other>.)""",
)


@functools.lru_cache(maxsize=64)
def _segments_cached(code: str) -> tuple[tuple[tuple[str, str], ...], ...]:
    lines: list[list[tuple[str, str]]] = [[]]
    after_def = False
    for m in _TOKEN.finditer(code):
        kind, text = m.lastgroup, m.group()
        if kind == "newline":
            lines.append([])
            continue
        css = ""
        if kind == "name":
            if after_def:
                css = _STYLE["Name.Function"]
            elif text in _KEYWORDS or text in _CONSTANTS:
                css = _STYLE["Keyword"]
            elif text in _BUILTINS:
                css = _STYLE["Name.Builtin"]
            after_def = text in ("def", "class")
        elif kind != "space":
            after_def = False
            css = _STYLE.get(_KIND_STYLE.get(kind, ""), "")
        segs = lines[-1]
        if segs and segs[-1][1] == css:  # merge runs of one colour
            segs[-1] = (segs[-1][0] + text, css)
        else:
            segs.append((text, css))
    return tuple(tuple(line) for line in lines)


def _segments(code: str) -> list[list[tuple[str, str]]]:
    """``code`` tokenized as Python (a small regex lexer, fast enough to re-render the
    IR on every keystroke; results cached): one list of ``(text, css)`` per line."""
    return [list(line) for line in _segments_cached(code)]


def render_segments(
    segments: Sequence[tuple[str, str]], emphasis: Iterable[tuple[int, int]] = (),
    emphasis_style: str = "",
) -> str:
    """HTML of one line given its ``(text, css)`` segments; the character ranges in
    ``emphasis`` (start, end) get ``emphasis_style`` on top of their colours."""
    ranges = sorted(emphasis)
    out: list[str] = []
    pos = 0
    for text, css in segments:
        start, end = pos, pos + len(text)
        cuts = {start, end}
        for a, b in ranges:
            for c in (a, b):
                if start < c < end:
                    cuts.add(c)
        edges = sorted(cuts)
        for a, b in zip(edges, edges[1:], strict=False):
            piece = html.escape(text[a - start:b - start], quote=False)
            style = css
            if emphasis_style and any(x <= a and b <= y for x, y in ranges):
                style = f"{css};{emphasis_style}" if css else emphasis_style
            out.append(f'<span style="{style}">{piece}</span>' if style else piece)
        pos = end
    return "".join(out)


def highlight_lines(code: str) -> list[str]:
    """``code`` highlighted, one HTML string per line (no ``<pre>`` around)."""
    return [render_segments(line) for line in _segments(code)]


def code_block(lines_html: Iterable[str], extra_style: str = "", css_class: str = "wb-code") -> str:
    """Wrap rendered lines in the themed ``<pre>``."""
    style = CODE_STYLE + (";" + extra_style if extra_style else "")
    body = "\n".join(lines_html)
    return f'<pre class="{css_class}" style="{style}">{body}</pre>'


def highlight_html(code: str) -> str:
    """``code`` highlighted as one themed ``<pre>`` block.

    >>> "var(--jp-mirror-editor-keyword-color" in highlight_html("def f(): pass")
    True
    """
    return code_block(highlight_lines(code))


def error_banner(message: str, kind: str | None = None) -> str:
    """A themed error banner (``<b>kind</b>: message`` when ``kind`` is given): the one
    way errors are shown in notebooks and the widgets.

    >>> error_banner("split: bad factors", "ScheduleError").count("<b>ScheduleError</b>")
    1
    """
    head = f"<b>{html.escape(kind)}</b>: " if kind else ""
    return (
        '<div class="wb-error-message" style="padding:4px 6px;margin-bottom:2px;'
        "border-left:4px solid var(--jp-error-color1,#d32f2f);"
        "background:var(--jp-error-color3,rgba(211,47,47,0.12));"
        "color:var(--jp-content-font-color1,inherit);"
        'font-family:var(--jp-code-font-family,monospace)">'
        f"{head}{html.escape(message)}</div>"
    )
