"""`make lab` turns JupyterLab's news toast off for the project's lab."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETTING = "@jupyterlab/apputils-extension:notification"


def test_shipped_overrides_turn_the_news_toast_off():
    overrides = json.loads((ROOT / "jupyter" / "overrides.json").read_text())
    assert overrides[SETTING]["fetchNews"] == "false"   # a string in JupyterLab's schema
    assert overrides[SETTING]["checkForUpdates"] is False


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not on PATH")
def test_make_lab_writes_the_overrides_where_that_lab_reads_them(tmp_path):
    """Run the real `lab` target with a stand-in venv whose `jupyter` only reports its
    arguments, and JupyterLab's own rule (``get_app_dir``) placing the lab in tmp_path."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    scripts = [("python", f'exec "{sys.executable}" "$@"'), ("jupyter", 'echo "jupyter $*"')]
    for name, body in scripts:
        (venv / "bin" / name).write_text(f"#!/bin/sh\n{body}\n")
        (venv / "bin" / name).chmod(0o755)
    (venv / ".installed").touch()                       # the venv counts as set up
    app_dir = tmp_path / "lab"
    env = {**os.environ, "JUPYTERLAB_DIR": str(app_dir)}
    proc = subprocess.run(
        # -o: the venv (and the prebuilt extension it installs) count as up to date
        ["make", "--no-print-directory", "-o", f"{venv}/.installed", "-o", "labextension",
         "-o", "venv", "lab", f"VENV={venv}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "jupyter lab notebooks/" in proc.stdout
    assert "build.py" not in proc.stdout and "pip install" not in proc.stdout
    written = app_dir / "settings" / "overrides.json"
    assert json.loads(written.read_text())[SETTING]["fetchNews"] == "false"

    from jupyterlab.commands import get_app_dir

    os.environ["JUPYTERLAB_DIR"], saved = str(app_dir), os.environ.get("JUPYTERLAB_DIR")
    try:  # the folder JupyterLab reads its overrides from (LabApp.app_settings_dir)
        assert Path(get_app_dir()) / "settings" == written.parent.resolve()
    finally:
        if saved is None:
            del os.environ["JUPYTERLAB_DIR"]
        else:
            os.environ["JUPYTERLAB_DIR"] = saved
