"""A skipped real-browser test is announced loudly in pytest's summary (tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(folder: Path, files: dict[str, str], *options: str) -> str:
    """Run pytest on ``files`` (written into ``folder``) with our conftest as a plugin,
    as the Makefile's notebook run loads it; return stdout + stderr."""
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "--import-mode=importlib", "--rootdir", str(folder), *options, str(folder)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    return proc.stdout + proc.stderr


SKIPPED = '''
import pytest

@pytest.mark.skipif(True, reason="chromium not found (install Debian's chromium)")
def test_real_browser():
    pass
'''

MODULE_SKIPPED = '''
import pytest

pytest.skip("npm is not on PATH", allow_module_level=True)

def test_real_browser():
    pass
'''

OTHER_SKIP = '''
import pytest

@pytest.mark.skip(reason="something else")
def test_other():
    pass

def test_runs():
    pass
'''


@pytest.mark.parametrize("options", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_skipped_browser_test_is_announced(tmp_path, options):
    """Also when the tests run in pytest-xdist workers, as `make test` runs them."""
    out = _run(tmp_path, {"one/test_browser.py": SKIPPED, "two/test_browser.py": MODULE_SKIPPED,
                          "test_other.py": OTHER_SKIP}, *options)
    lines = [x for x in out.splitlines() if "REAL-BROWSER TEST SKIPPED" in x]
    assert len(lines) == 2, out
    reasons = sorted(x.split("REAL-BROWSER TEST SKIPPED: ")[1].rstrip("! ") for x in lines)
    assert reasons == ["chromium not found (install Debian's chromium)", "npm is not on PATH"]
    assert all(x.startswith("!") for x in lines)    # separator lines, hard to miss
    assert "something else" not in out.split("REAL-BROWSER")[1]


def test_no_line_when_the_browser_test_runs(tmp_path):
    out = _run(tmp_path, {"test_browser.py": "def test_real_browser():\n    pass\n",
                          "test_other.py": OTHER_SKIP})
    assert "2 passed, 1 skipped" in out and "REAL-BROWSER" not in out
