"""The course's shape: every lesson is there, is collected by nbval, and follows the same
pattern — a goal and the seeds it covers, at least two exercises each with a hidden solution
that runs, claim cells whose output nbval compares, a summary, and stored outputs that read
well (no errors, no warnings, no machine paths, timings only through ``wb.timing_table``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LESSONS = ["00_start_here", "01_tensor_programs", "02_compute_location",
           "03_interactive_workbench", "04_search", "05_gpu_scheduling", "06_default_rules",
           "07_tensorize_and_layout", "08_tvmscript_and_tvm"]
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
SOLUTION_NOTE = "*Solution: the hidden cell below (click the three dots to show it).*"
#: What a lesson's outputs must not carry: the paths of the machine that ran it (the
#: repository, the home folder, the environment, any absolute path into the package, the
#: lessons or an installed package, wherever the repository was) and raw reprs.
BAD_OUTPUT = re.compile("|".join(
    [re.escape(str(p)) for p in (ROOT, Path.home(), Path(sys.prefix)) if len(str(p)) > 1]
    + [r"/home/", r"\.venv/", r"(?:/[\w.-]+)+/(?:workbench|notebooks|site-packages)/",
       r"<[\w.]+ object at 0x"]))


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _output_text(output: dict) -> str:
    if "text" in output:
        return "".join(output["text"])
    data = output.get("data", {})
    return "".join("".join(data.get(kind, "")) for kind in ("text/plain", "text/html"))


def test_the_course_is_lessons_00_to_08():
    assert [p.stem for p in PATHS] == LESSONS


def test_nbval_collects_every_lesson():
    """The README test command's notebook run collects one item per code cell of every
    lesson (a lesson nbval skipped would not be tested at all)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "tests.conftest", "--nbval-lax", "--nbval-current-env", "notebooks/"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    items = [line for line in out.stdout.splitlines() if "::Cell " in line]
    for path in PATHS:
        code = sum(c["cell_type"] == "code" for c in _cells(path))
        collected = [i for i in items if i.startswith(f"notebooks/{path.name}::")]
        assert len(collected) == code, f"{path.name}: {len(collected)} of {code} cells collected"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
class TestLesson:
    def test_header_states_goal_and_seeds(self, path):
        first = _cells(path)[0]
        text = _source(first)
        number = int(path.stem[:2])
        assert first["cell_type"] == "markdown"
        assert re.match(rf"# Lesson {number} — \S", text), text.splitlines()[0]
        assert re.search(r"^\*\*Goal:\*\* \S", text, re.M), f"{path.name}: no **Goal:** paragraph"
        assert re.search(r"^\*\*Covers:\*\* \S", text, re.M), f"{path.name}: no **Covers:** line"

    def test_exercises_have_hidden_solutions_that_run(self, path):
        cells = _cells(path)
        exercises = [n for n, c in enumerate(cells)
                     if c["cell_type"] == "markdown" and "exercise" in _tags(c)]
        assert len(exercises) >= 2, f"{path.name}: {len(exercises)} exercises, want at least 2"
        for k, n in enumerate(exercises, start=1):
            text = _source(cells[n])
            assert text.startswith(f"### Exercise {k} — "), f"{path.name}: {text[:60]!r}"
            assert text.rstrip().endswith(SOLUTION_NOTE), f"{path.name} exercise {k}"
            following = cells[n + 1:n + 3]
            solutions = [c for c in following if "solution" in _tags(c)]
            assert len(solutions) == 1, f"{path.name}: exercise {k} has no solution cell after it"
            solution = solutions[0]
            assert solution["cell_type"] == "code"
            assert _source(solution).startswith(f"# Solution to exercise {k}\n")
            hidden = solution["metadata"].get("jupyter", {})
            assert hidden.get("source_hidden") is True and hidden.get("outputs_hidden") is True, (
                f"{path.name}: exercise {k}'s solution is not hidden by default")
            assert solution.get("execution_count"), f"{path.name}: solution {k} was not run"
            starters = [c for c in following[:1] if "exercise" in _tags(c)]
            assert all(c["cell_type"] == "code" for c in starters)
        all_solutions = [c for c in cells if "solution" in _tags(c)]
        assert len(all_solutions) == len(exercises)

    def test_claim_cells_and_summary(self, path):
        cells = _cells(path)
        claims = [c for c in cells if c["cell_type"] == "code"
                  and _source(c).startswith("# NBVAL_CHECK_OUTPUT")]
        assert len(claims) >= 2, f"{path.name}: {len(claims)} claim cells, want at least 2"
        for cell in claims:
            assert cell["outputs"], f"{path.name}: claim cell without stored output"
        summaries = [c for c in cells if c["cell_type"] == "markdown"
                     and _source(c).startswith("## Summary")]
        assert len(summaries) == 1, f"{path.name}: want one '## Summary' cell"

    def test_stored_outputs_read_well(self, path):
        for n, cell in enumerate(_cells(path)):
            if cell["cell_type"] != "code":
                continue
            where = f"{path.name} code cell {n}: {_source(cell)[:50]!r}"
            assert cell.get("execution_count"), f"{where} was not executed"
            for output in cell["outputs"]:
                assert output["output_type"] != "error", f"{where} stored an error"
                assert output.get("name") != "stderr", (
                    f"{where} stored stderr: {_output_text(output)[:300]}")
                text = _output_text(output)
                assert not BAD_OUTPUT.search(text), f"{where}: {BAD_OUTPUT.search(text)[0]!r}"

    def test_timings_go_through_the_one_formatter(self, path):
        """Measurements are shown by ``wb.timing_table`` (machine line, noise flags, a
        verdict), never as a raw ``Measurement(...)`` repr or a bare noise-free figure."""
        for cell in _cells(path):
            for output in cell.get("outputs", []):
                assert "Measurement(median=" not in _output_text(output), (
                    f"{path.name}: a raw Measurement is printed: {_source(cell)[:80]!r}")
