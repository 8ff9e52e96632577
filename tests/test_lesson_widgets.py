"""A lesson's displayed editor or stepper shows what its own cell did: no later cell
changes a widget that an earlier cell displayed (it would show a later state under the
earlier cell). A live dashboard is the exception by design: it follows a running search."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
#: Calls and assignments that change an editor's or a stepper's state.
CHANGES = re.compile(r"\.(apply|undo|redo|reset|measure|set_decision|load_trace)\(|\.step\s*=[^=]")


def _code_cells(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def _displayed_name(source: str) -> str | None:
    """The variable a cell ends on (what it displays), if any."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith("%")]
    try:
        body = ast.parse("\n".join(lines)).body
    except SyntaxError:
        return None
    if body and isinstance(body[-1], ast.Expr) and isinstance(body[-1].value, ast.Name):
        return body[-1].value.id
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_displayed_editors_and_steppers_are_not_changed_later(path):
    cells = _code_cells(path)
    for n, source in enumerate(cells):
        name = _displayed_name(source)
        if name is None:
            continue
        for later in cells[n + 1:]:
            for line in later.splitlines():
                if re.match(rf"\s*{re.escape(name)}\b", line) and CHANGES.search(line):
                    raise AssertionError(
                        f"{path.name}: `{name}` is displayed by code cell {n + 1} and changed "
                        f"later by `{line.strip()}`; the earlier output would show that state")
