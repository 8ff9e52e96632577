"""The ScheduleEditor in a real JupyterLab, driven by headless Chromium.

The test starts ``jupyter lab`` on 127.0.0.1 in a temporary root folder holding a copy of
``tests/browser/editor_demo.ipynb``, then runs ``tests/browser/run_editor.mjs``
(playwright-core): open the notebook, run all cells, select the loop ``j``, split it by
4 with the editor's own controls, wait until the IR shows ``j_1`` and the trace
``sch.split``, and save a screenshot to ``tests/browser/artifacts/editor.png``.

Set up the browser side with ``npm ci --prefix tests/browser`` (``make test`` does it)
and Debian's ``chromium`` package. Without Chromium, node or playwright-core the test is
skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BROWSER_DIR = HERE / "browser"
NOTEBOOK = BROWSER_DIR / "editor_demo.ipynb"
SCRIPT = BROWSER_DIR / "run_editor.mjs"
ARTIFACTS = BROWSER_DIR / "artifacts"
SCREENSHOT = ARTIFACTS / "editor.png"

LAB_START_TIMEOUT = 60.0
SCRIPT_TIMEOUT = 150.0


def _chromium() -> str | None:
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium")


def _skip_reason() -> str | None:
    if _chromium() is None:
        return "Chromium is not installed (Debian: apt-get install chromium)"
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
        return "playwright-core is not installed (run: npm ci --prefix tests/browser)"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (Linux /proc; empty elsewhere).

    Kernels run in their own session, so they are not in jupyter lab's process group.
    """
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = entry.read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ..."; comm may contain spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop(proc: subprocess.Popen) -> None:
    """Stop jupyter lab, its process group and every process it started."""
    family = _descendants(proc.pid)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # the server shuts its kernels down
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in family:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait_ready(proc: subprocess.Popen, base_url: str, log_path: Path) -> None:
    deadline = time.monotonic() + LAB_START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{_tail(log_path)}")
        try:
            with urllib.request.urlopen(f"{base_url}/api/status", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    pytest.fail(f"jupyter lab was not ready within {LAB_START_TIMEOUT:.0f} s:\n{_tail(log_path)}")


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(params=["light", "dark"])
def theme(request) -> str:
    """The JupyterLab theme of the run: the views must read well in both."""
    return request.param


@pytest.fixture
def jupyter_lab(tmp_path: Path, theme: str) -> Iterator[str]:
    """A JupyterLab (in ``theme``) serving a copy of the prepared notebook; yields its
    base URL."""
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    # Private config/settings/workspace folders: the developer's own JupyterLab setup
    # (saved workspaces, settings, kernels) must not change what the test sees.
    env = dict(os.environ)
    for name in ("config", "data", "runtime", "settings", "workspaces"):
        (tmp_path / name).mkdir()
    env.update(
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        MPLBACKEND="Agg",
    )
    # No "fetch Jupyter news?" toast over the notebook (and no request for it).
    notification = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    names = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
    (notification / "themes.jupyterlab-settings").write_text(json.dumps({"theme": names[theme]}))
    port = _free_port()
    jupyter = Path(sys.executable).parent / "jupyter"
    command = [
        str(jupyter),
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log_path = tmp_path / "jupyter-lab.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base_url = f"http://127.0.0.1:{port}"
        _wait_ready(proc, base_url, log_path)
        yield base_url
    finally:
        _stop(proc)


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG file"
    return struct.unpack(">II", header[16:24])


@pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")
def test_editor_split_in_jupyterlab(jupyter_lab: str, theme: str) -> None:
    shot = SCREENSHOT if theme == "light" else SCREENSHOT.with_name(f"editor-{theme}.png")
    diff_shot = shot.with_name(f"{shot.stem}-diff.png")
    for old in (shot, diff_shot, shot.with_suffix(".failure.png")):
        old.unlink(missing_ok=True)
    url = f"{jupyter_lab}/lab/tree/{NOTEBOOK.name}"
    # Its own session, so a run that hangs is stopped together with its Chromium.
    node = subprocess.Popen(
        [
            "node",
            str(SCRIPT),
            f"--url={url}",
            f"--screenshot={shot}",
            f"--chromium={_chromium()}",
            f"--theme={theme}",
        ],
        cwd=BROWSER_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = node.communicate(timeout=SCRIPT_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(node.pid, signal.SIGKILL)
        stdout, stderr = node.communicate()
        pytest.fail(
            f"the browser run took over {SCRIPT_TIMEOUT:.0f} s\nstdout:\n{stdout}\n"
            f"stderr:\n{stderr}"
        )
    output = f"stdout:\n{stdout}\nstderr:\n{stderr}"
    print(stdout)  # the step timings, shown with pytest -rP
    if node.returncode != 0:
        pytest.fail(f"the browser run failed (exit {node.returncode})\n{output}")
    assert "screenshot:" in stdout, output
    for path in (shot, diff_shot):
        assert path.is_file(), f"no screenshot {path.name} was saved\n{output}"
        width, height = _png_size(path)
        assert width >= 800 and height >= 600, f"{path.name} is only {width}x{height}"
        assert path.stat().st_size > 20_000, f"{path.name} is implausibly small (blank page?)"
