"""The error raised for TVMScript the workbench cannot read."""

from __future__ import annotations

import ast


class ParseError(ValueError):
    """TVMScript that is malformed or uses a construct the workbench does not support.

    Like Python's ``SyntaxError`` it carries where the problem is: ``filename``,
    ``lineno`` (1-based), ``col`` (1-based column), the offending ``source_line``
    and the bare message ``msg``; ``str(err)`` shows all of it with a caret.

    >>> import workbench as wb
    >>> text = "@T.prim_func\\ndef f(A: T.Buffer((4,), 'float32')):\\n    A[0] = T.nope(1)"
    >>> try:
    ...     wb.from_script(text)
    ... except wb.script.ParseError as err:
    ...     print(err.lineno, err.col, err.msg)
    3 12 unknown TVMScript function T.nope
    """

    def __init__(
        self,
        msg: str,
        lineno: int | None = None,
        col: int | None = None,
        source_line: str | None = None,
        filename: str = "<script>",
        end_col: int | None = None,
    ):
        self.msg = msg
        self.lineno = lineno
        self.col = col
        self.source_line = source_line
        self.filename = filename
        self.end_col = end_col
        super().__init__(self._render())

    def _render(self) -> str:
        if self.lineno is None:
            return self.msg
        where = f'File "{self.filename}", line {self.lineno}'
        if self.col is not None:
            where += f", column {self.col}"
        text = f"{where}: {self.msg}"
        if self.source_line is not None:
            line = self.source_line.rstrip("\n")
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            text += f"\n    {stripped}"
            if self.col is not None:
                start = max(self.col - 1 - indent, 0)
                width = 1
                if self.end_col is not None and self.end_col > self.col:
                    width = min(self.end_col - self.col, max(len(stripped) - start, 1))
                text += "\n    " + " " * start + "^" * width
        return text


class Source:
    """The text being parsed and where it came from, for error positions.

    ``line_offset`` shifts line numbers (a decorated function's source starts at
    its line in the file); ``col_offset`` adds the indentation removed by
    ``textwrap.dedent``.
    """

    def __init__(self, text: str, filename: str = "<script>", line_offset: int = 0,
                 col_offset: int = 0, lines: list[str] | None = None):
        self.text = text
        self.filename = filename
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.lines = lines if lines is not None else text.splitlines()

    def error(self, node: ast.AST | None, msg: str) -> ParseError:
        if node is None or not hasattr(node, "lineno"):
            return ParseError(msg, filename=self.filename)
        lineno = node.lineno
        line = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else None
        col = node.col_offset + 1
        end = getattr(node, "end_col_offset", None)
        end_col = end + 1 if end is not None and getattr(node, "end_lineno", lineno) == lineno \
            else None
        if line is not None and self.col_offset:
            line = " " * self.col_offset + line
        shift = self.col_offset
        return ParseError(
            msg,
            lineno + self.line_offset,
            col + shift,
            line,
            self.filename,
            end_col + shift if end_col is not None else None,
        )
