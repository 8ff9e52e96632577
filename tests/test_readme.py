"""The README's quickstart is product too: it must run as printed."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    commands = re.search(r"```sh\n(.*?)```", text, flags=re.S).group(1)
    assert [line.split()[0:2] for line in commands.strip().splitlines()] == [
        ["make", "lab"],
        ["make", "test"],
    ]
    ci = (README.parent / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci == "make test"


def test_quickstart_runs(capsys):
    blocks = _python_blocks()
    assert blocks, "README has no python quickstart"
    namespace: dict = {"__name__": "readme_quickstart"}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # our own README, not user data
    out = capsys.readouterr().out
    assert "def apply_trace(sch: tir.Schedule) -> None:" in out
    assert "vj = T.axis.spatial(128, j_0 * 16 + j_1)" in out
    assert re.search(r"Measurement\(median=\d+\.\d{3} ms", out)
