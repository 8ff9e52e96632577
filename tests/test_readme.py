"""The README is product too: every ```python block runs as printed, in order, as the
cells of one notebook in one real Jupyter kernel, and shows what it promises (widgets
display as widgets, the tuning block its plot, printed lines as the comments say).

The ```python cluster block needs a dask cluster; tests/test_distributed.py runs it.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
WIDGET = "application/vnd.jupyter.widget-view+json"


def _python_blocks() -> list[str]:
    """The ```python blocks (not ```python cluster), in order."""
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _index(blocks: list[str], marker: str) -> int:
    return next(i for i, b in enumerate(blocks) if marker in b)


def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    commands = re.search(r"```sh\n(.*?)```", text, flags=re.S).group(1)
    assert [line.split()[0:2] for line in commands.strip().splitlines()] == [
        ["make", "lab"],
        ["make", "test"],
    ]
    ci = (README.parent / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci == "make test"


def test_quick_start_names_what_the_browser_test_needs():
    quick = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "chromium" in quick and "npm" in quick and "playwright-core" in quick
    assert "REAL-BROWSER TEST SKIPPED" in quick


def test_no_block_drops_a_value_mid_block():
    """In a notebook only a cell's last expression is shown: a bare name, attribute or
    tuple before the end of a block shows nothing (the reader expects to see it)."""
    for n, block in enumerate(_python_blocks()):
        body = ast.parse(block).body
        for stmt in body[:-1]:
            if isinstance(stmt, ast.Expr) and isinstance(
                    stmt.value, (ast.Name, ast.Attribute, ast.Tuple, ast.Subscript)):
                raise AssertionError(f"README block {n + 1}, line {stmt.lineno}: "
                                     f"`{ast.unparse(stmt)}` is never displayed")


# ---------------------------------------------------------------- one kernel, in order
def _this_python_kernel():
    """A kernel manager for an IPython kernel of this very Python (as nbval's
    ``--nbval-current-env``), whatever kernelspecs the machine has installed."""
    import ipykernel.kernelspec
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class ThisPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return self.kernel_spec_class(resource_dir=ipykernel.kernelspec.RESOURCES,
                                          **ipykernel.kernelspec.get_kernel_dict())

    return AsyncKernelManager(kernel_name="this-python", kernel_spec_manager=ThisPython())


@pytest.fixture(scope="module")
def readme_notebook(tmp_path_factory):
    """Run every block as a cell of one notebook in one kernel (cwd: a fresh folder, the
    kernel's environment a reader's: no forced matplotlib backend). Returns the executed
    notebook, the folder and the blocks."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    blocks = _python_blocks()
    assert blocks, "README has no python blocks"
    folder = tmp_path_factory.mktemp("readme")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(b) for b in blocks]
    client = nbclient.NotebookClient(nb, km=_this_python_kernel(), timeout=900,
                                     resources={"metadata": {"path": str(folder)}})
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    try:
        client.execute(env=env)
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"a README block failed in the kernel:\n{e}")
    return nb, folder, blocks


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs
                   if o.output_type == "stream" and o.name == "stdout")


def _shown(cell) -> set[str]:
    """The MIME types of what the cell displayed (its value and display() calls)."""
    return {mime for o in cell.outputs if o.output_type in ("execute_result", "display_data")
            for mime in o.data}


def test_every_block_runs_in_order_and_shows_its_value(readme_notebook):
    nb, _folder, blocks = readme_notebook
    assert len(nb.cells) == len(blocks)
    for n, (cell, block) in enumerate(zip(nb.cells, blocks, strict=True)):
        assert not [o for o in cell.outputs if o.output_type == "error"], f"block {n + 1}"
        last = ast.parse(block).body[-1]
        shown = [o for o in cell.outputs if o.output_type == "execute_result"]
        if isinstance(last, ast.Expr) and not isinstance(last.value, ast.Call):
            assert shown, f"block {n + 1} ends on a value but shows nothing"
        for result in shown:  # shown richly, never as a bare "<... object at 0x...>"
            text = result.data.get("text/plain", "")
            bare = re.match(r"<.*( object at 0x| size \d)", text)
            assert not bare or set(result.data) - {"text/plain"}, \
                f"block {n + 1} shows only {text!r}"


def test_widget_blocks_display_widgets(readme_notebook):
    nb, _folder, blocks = readme_notebook
    for marker in ["editor = widgets.ScheduleEditor(", "widgets.IRDiff(",
                   "widgets.IterationView(", "widgets.TraceStepper(", "TuningDashboard.live(",
                   "widgets.CompareView("]:
        cell = nb.cells[_index(blocks, marker)]
        assert WIDGET in _shown(cell), marker


def test_editor_steps_print_what_they_say(readme_notebook):
    nb, _folder, blocks = readme_notebook
    out = _stdout(nb.cells[_index(blocks, 'editor.apply("vectorize"')]).splitlines()
    assert out[0].startswith("vectorize:") and "reduction" in out[0]   # why it was refused
    assert re.match(r"step 2 \(.*reorder.*\): \d+\.\d{4} ms", out[1])


def test_tuning_block_shows_its_plot_and_the_whole_table(readme_notebook):
    nb, folder, blocks = readme_notebook
    cell = nb.cells[_index(blocks, "wb.tune(wb.workloads.matmul(128")]
    assert "image/svg+xml" in _shown(cell)
    out = _stdout(cell)
    assert "..." not in out
    rows = re.findall(r"^(\d+) +(\d+) +[a-z_]+ ", out, flags=re.M)
    assert len(rows) >= 2                                   # every trial, none left out
    assert [int(r[1]) for r in rows] == list(range(len(rows)))
    assert (folder / "tuning" / "records.jsonl").is_file()


def test_quickstart_prints_ir_trace_and_measurement(readme_notebook):
    nb, _folder, _blocks = readme_notebook
    out = _stdout(nb.cells[0])
    assert "def apply_trace(sch: tir.Schedule) -> None:" in out
    assert "vj = T.axis.spatial(128, j_0 * 16 + j_1)" in out
    assert re.search(r"Measurement\(median=\d+\.\d{3} ms", out)


def test_tvmscript_and_schedule_file_blocks(readme_notebook):
    nb, folder, blocks = readme_notebook
    start = _index(blocks, "@wb.ir_module")
    assert _stdout(nb.cells[start]) == "True\n"
    assert "sch.split(loop=l2, factors=[None, 4]" in _stdout(nb.cells[start + 1])
    assert (folder / "mm_relu_schedule.json").is_file()


def test_layout_gpu_dlight_and_measuring_blocks_print_as_documented(readme_notebook):
    nb, _folder, blocks = readme_notebook
    layout = _stdout(nb.cells[_index(blocks, "packed.transform_layout(C")])
    assert "lambda i, j: (i // 16, j // 16, i % 16, j % 16)" in layout
    tensorize = _stdout(nb.cells[_index(blocks, "cpu.best_fma_intrin")])
    assert tensorize == "" or re.match(r"x86_fma_f32_\w+ in \[", tensorize)
    gpu = _stdout(nb.cells[_index(blocks, "gpu_matmul_schedule(256)")]).splitlines()
    assert gpu[:2] == ["True", "2"]
    dlight = _stdout(nb.cells[_index(blocks, "dl.diagnose(mod, *rules")]).splitlines()
    assert dlight[0].startswith("{'transpose': 'Transpose', 'fused_matmul_add_relu': 'Reduction'")
    assert dlight[1] == "True"
    assert _stdout(nb.cells[_index(blocks, "def my_tile_and_bind")]) == "MyTileAndBind\n"
    measuring = _stdout(nb.cells[_index(blocks, "wb.set_num_threads(1)")]).splitlines()
    assert measuring[-1] == "True"
