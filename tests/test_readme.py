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


def test_tvmscript_and_schedule_file_blocks_run(tmp_path, monkeypatch, capsys):
    """The "Reading TVMScript" and "Saving a schedule" blocks, run as one file (the
    decorator reads the class's source, so the code lives in a real file here)."""
    import importlib.util

    blocks = _python_blocks()
    start = next(i for i, b in enumerate(blocks) if "@wb.ir_module" in b)
    source = "\n".join(blocks[start:start + 2])
    assert "wb.load_schedule" in source
    script = tmp_path / "readme_tvmscript.py"
    script.write_text(source)
    monkeypatch.chdir(tmp_path)
    spec = importlib.util.spec_from_file_location("readme_tvmscript", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # our own README, not user data
    out = capsys.readouterr().out
    assert out.startswith("True\n")
    assert "sch.split(loop=l2, factors=[None, 4]" in out
    assert (tmp_path / "mm_relu_schedule.json").is_file()


def test_layout_and_tensorize_blocks_run(capsys):
    """The "Layouts, padding and tensor intrinsics" blocks, in order, after the quickstart
    (they use its imports)."""
    blocks = _python_blocks()
    start = next(i for i, b in enumerate(blocks) if "packed.transform_layout(C" in b)
    namespace: dict = {"__name__": "readme_layout"}
    source = "\n".join([blocks[0], *blocks[start:start + 2]])
    exec(compile(source, str(README), "exec"), namespace)  # our own README, not user data
    out = capsys.readouterr().out
    assert "lambda i, j: (i // 16, j // 16, i % 16, j % 16)" in out
    packed = namespace["packed"]
    assert "B: T.Buffer((8, 128, 16)" in packed.mod.script()
    if namespace["name"] is not None:
        assert "T.call_extern" in packed.mod.script()
        assert "x86_fma_f32_4x16_avx2" in out


def test_every_python_block_runs_in_order(tmp_path, monkeypatch, capsys):
    """All the README's python blocks, as printed, one after the other in one namespace
    (as a reader pastes them into one notebook): a later section must not rebind a name
    an earlier one's following blocks rely on."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    source = "\n".join(_python_blocks())
    path = tmp_path / "readme_blocks.py"  # the decorator reads its class's source from a file
    path.write_text(source)
    namespace: dict = {"__name__": "readme_all", "__file__": str(path)}
    exec(compile(source, str(path), "exec"), namespace)  # our own README, not user data
    assert "def apply_trace" in capsys.readouterr().out


def test_dlight_blocks_run(capsys):
    """The DLight section's blocks, after the quickstart (they use its imports)."""
    blocks = _python_blocks()
    start = next(i for i, b in enumerate(blocks) if "dl.diagnose(mod, *rules" in b)
    namespace: dict = {"__name__": "readme_dlight"}
    source = "\n".join([blocks[0], *blocks[start:start + 2]])
    exec(compile(source, str(README), "exec"), namespace)  # our own README, not user data
    out = capsys.readouterr().out.splitlines()
    assert out[-3].startswith("{'transpose': 'Transpose', 'fused_matmul_add_relu': 'Reduction'")
    assert out[-2:] == ["True", "MyTileAndBind"]
