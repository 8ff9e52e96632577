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

import html
from collections.abc import Iterable, Sequence

__all__ = ["CODE_STYLE", "code_block", "highlight_html", "highlight_lines", "render_segments"]

# Token type (Pygments' dotted name, most specific first) -> inline CSS.
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
    ("Punctuation", "color:var(--jp-mirror-editor-punctuation-color,inherit)"),
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


def _style(token_type) -> str:
    name = str(token_type).removeprefix("Token.")
    for prefix, css in _STYLES:
        if name == prefix or name.startswith(prefix + "."):
            return css
    return ""


def _segments(code: str) -> list[list[tuple[str, str]]]:
    """``code`` lexed as Python: one list of ``(text, css)`` segments per line."""
    from pygments.lexers import PythonLexer

    lines: list[list[tuple[str, str]]] = [[]]
    lexer = PythonLexer(stripnl=False, stripall=False, ensurenl=False)
    for token_type, value in lexer.get_tokens(code):
        css = _style(token_type)
        parts = value.split("\n")
        for n, part in enumerate(parts):
            if n:
                lines.append([])
            if part:
                lines[-1].append((part, css))
    want = code.count("\n") + 1
    return (lines + [[] for _ in range(want - len(lines))])[:want]


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
