"""What a new user does with the mouse and keys, in a real JupyterLab driven by headless Chromium.

The JupyterLab extension is installed from the project's wheel, as ``pip install`` would:
the test builds the wheel, unpacks its ``share/jupyter`` data into a temporary folder, puts
that first on ``JUPYTER_PATH`` and checks with ``jupyter labextension list`` that the
schedule-workbench extension is found there.

``test_new_user_flow`` starts ``jupyter lab`` on 127.0.0.1 in a temporary root folder holding
``tests/browser/editor_demo.ipynb`` and a small tuning database (a real ``wb.tune`` of a 64^3
matmul), then runs ``tests/browser/run_flow.mjs`` (playwright-core). In the ScheduleEditor:
the loop tree by keyboard (ArrowDown/ArrowUp move the selection; ArrowLeft/ArrowRight and the
row toggle collapse and expand a row, hiding and showing exactly the rows under it), block
``C``'s compute_at / reverse_compute_at targets marked in the tree (exactly the legal ones the
Python ``EditorModel.compute_targets`` finds, handed to the script in a JSON file); split the
loop ``j`` (loop tree, action drop-down, factor, Apply), reorder with the up/down buttons and
by dragging one loop onto another, download the schedule file and the trace to "the user's
computer" (a temporary folder), Reset, upload the schedule file again (one undo step per
instruction), open the trace in the stepper and step through it. Then in JupyterLab's file
browser: upload both files, open the schedule file in the extension's viewer and select a
step (its diff), open the trace (its instructions), and open the tuning database's
records.jsonl (its table and plot). Then the notebooks the extension creates: the launcher's
"New schedule workbench" card (a small matmul picked in its dialog) opens a notebook whose
code calls that workload with those sizes and whose editor's loop tree, once run, shows its
loops and extents; "Open in notebook" in the schedule file's context menu opens
``mm_relu_replay.ipynb``, whose TraceStepper steps with next and previous. Screenshots of
each stage go to ``tests/browser/artifacts/`` (light theme, plus one of the editor in the
dark theme). The downloaded files, the saved notebooks and what the pages showed are checked
here in Python.

``test_every_lesson_runs_in_the_browser`` runs every ``notebooks/*.ipynb`` (found on disk)
with ``tests/browser/run_lessons.mjs``: one JupyterLab serving a temporary copy of
``notebooks/`` and one browser page; each lesson is opened, run with Run > Run All Cells
and checked (no error output, no Python warning or traceback on stderr, every widget
rendered, no console error from the project's code), its screenshot saved as
``tests/browser/artifacts/lesson-NN_slug.png``, its kernel shut down. The wall time of
each lesson is printed (``pytest -rP``). The same run then opens
``tests/browser/fixtures/broken_lesson.ipynb``, and
``test_the_lesson_run_catches_a_broken_lesson`` checks that each of its broken cells is
reported by name.

Set up the browser side with ``npm ci --prefix tests/browser`` (``make test`` does it)
and Debian's ``chromium`` package. Without Chromium, node or playwright-core the browser
tests are skipped with the reason (the wheel check still runs), and the run's summary says
so loudly (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
BROWSER_DIR = HERE / "browser"
NOTEBOOK = BROWSER_DIR / "editor_demo.ipynb"
SCRIPT = BROWSER_DIR / "run_flow.mjs"
ARTIFACTS = BROWSER_DIR / "artifacts"
EXTENSION_NAME = "schedule-workbench"
FUNCTION = "mm_relu"
SCHEDULE_FILE = f"{FUNCTION}.schedule.json"
TRACE_FILE = f"{FUNCTION}.trace.json"
DATABASE = "tuning_db"

LAB_START_TIMEOUT = 90.0
WHEEL_TIMEOUT = 300.0
SCRIPT_TIMEOUT = 240.0

# The screenshots the flow saves, in order (stage name -> file).
SCREENSHOTS = [
    "01-looptree-collapsed.png",
    "02-looptree-targets.png",
    "03-split.png",
    "04-reorder-buttons.png",
    "05-reorder-drag.png",
    "06-trace-tab.png",
    "07-uploaded.png",
    "08-stepper.png",
    "09-editor-dark.png",
    "10-schedule-viewer.png",
    "11-database-viewer.png",
    "12-new-workbench-dialog.png",
    "13-new-workbench.png",
    "14-replay-notebook.png",
]
# Every stage of run_flow.mjs, in order ("looptree" runs inside "editor", before the split).
STAGES = ["editor", "dark", "viewer", "database", "launcher", "replay"]

# The block whose compute-location targets the flow checks in the demo notebook's editor.
TARGET_BLOCK = "C"
# What the flow picks in the launcher card's dialog (small, and each size different, so a
# size that does not reach the notebook shows in the loop tree's extents).
NEW_WORKLOAD = "matmul"
NEW_SIZES = {"M": 16, "N": 8, "K": 32}
REPLAY_NOTEBOOK = f"{FUNCTION}_replay.ipynb"


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


needs_browser = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


# --------------------------------------------------------------------------------------
# The extension, from the wheel


@dataclass
class WheelData:
    """The wheel's ``share/jupyter`` tree, unpacked."""

    wheel: Path
    jupyter_path: Path  # the unpacked share/jupyter: goes first on JUPYTER_PATH
    extension: Path | None  # its labextensions/schedule-workbench, if the wheel has one
    members: list[str]  # every file in the wheel's share/jupyter, for messages


def _build_requirements_installed() -> bool:
    """Whether this Python has every package pyproject.toml's build-system requires."""
    import importlib.metadata
    import re
    import tomllib

    requires = tomllib.loads((PROJECT / "pyproject.toml").read_text())["build-system"]["requires"]
    for requirement in requires:
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return False
    return True


@pytest.fixture(scope="module")
def wheel_data(tmp_path_factory) -> WheelData:
    """Build the project's wheel (as ``pip install`` would) and unpack its data files."""
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out),
               str(PROJECT)]
    if _build_requirements_installed():
        command.insert(4, "--no-build-isolation")  # offline, and faster
    try:
        done = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True,
                              timeout=WHEEL_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"building the wheel took over {WHEEL_TIMEOUT:.0f} s: {' '.join(command)}")
    wheels = sorted(out.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        pytest.fail(f"building the wheel failed (exit {done.returncode}, wheels {wheels}):\n"
                    f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    share = out / "share" / "jupyter"
    share.mkdir(parents=True)
    members: list[str] = []
    with zipfile.ZipFile(wheels[0]) as whl:
        for info in whl.infolist():
            parts = info.filename.split("/")
            # <dist>.data/data/share/jupyter/<rest>
            if (len(parts) > 4 and parts[0].endswith(".data") and parts[1:4]
                    == ["data", "share", "jupyter"] and not info.is_dir()):
                rest = Path(*parts[4:])
                members.append(rest.as_posix())
                target = share / rest
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(whl.read(info))
    extension = share / "labextensions" / EXTENSION_NAME
    return WheelData(wheels[0], share, extension if extension.is_dir() else None, members)


def _require_extension(data: WheelData) -> Path:
    if data.extension is None:
        listing = "\n  ".join(data.members[:20]) or "(nothing)"
        pytest.fail(
            f"the wheel {data.wheel.name} ships no prebuilt JupyterLab extension: expected "
            f"<dist>.data/data/share/jupyter/labextensions/{EXTENSION_NAME}/package.json; "
            f"its share/jupyter holds:\n  {listing}"
        )
    return data.extension


def _lab_env(base: Path, jupyter_path: Path) -> dict[str, str]:
    """Private config/data/settings folders, with the wheel's share/jupyter first.

    The developer's own JupyterLab setup (saved workspaces, settings, kernels) must not
    change what the test sees.
    """
    env = dict(os.environ)
    for name in ("config", "data", "runtime", "settings", "workspaces"):
        (base / name).mkdir(exist_ok=True)
    env.update(
        JUPYTER_PATH=os.pathsep.join([str(jupyter_path), *filter(None, [
            os.environ.get("JUPYTER_PATH")])]),
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_DATA_DIR=str(base / "data"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        MPLBACKEND="Agg",
    )
    # No "fetch Jupyter news?" toast over the page (and no request for it).
    apputils = base / "settings" / "@jupyterlab" / "apputils-extension"
    apputils.mkdir(parents=True, exist_ok=True)
    (apputils / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    (apputils / "themes.jupyterlab-settings").write_text(
        json.dumps({"theme": "JupyterLab Light"})
    )
    return env


def _jupyter() -> str:
    return str(Path(sys.executable).parent / "jupyter")


def _labextension_sections(text: str) -> dict[str, list[str]]:
    """``jupyter labextension list`` output: folder -> the extension lines under it."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(os.sep) or line.startswith("/"):
            current = sections.setdefault(line.strip(), [])
        elif current is not None and line.strip():
            if line[:1].isspace():
                current.append(line.strip())
            else:
                current = None
    return sections


def test_extension_is_installed_from_the_wheel(wheel_data: WheelData, tmp_path: Path) -> None:
    extension = _require_extension(wheel_data)
    package = json.loads((extension / "package.json").read_text())
    assert package["name"] == EXTENSION_NAME
    load = package.get("jupyterlab", {}).get("_build", {}).get("load", "")
    assert load and (extension / load).is_file(), (
        f"the wheel's extension is not built (no jupyterlab._build.load file): {load!r}")
    env = _lab_env(tmp_path, wheel_data.jupyter_path)
    done = subprocess.run([_jupyter(), "labextension", "list"], env=env, capture_output=True,
                          text=True, timeout=120)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text
    sections = _labextension_sections(text)
    folder = str(wheel_data.jupyter_path / "labextensions")
    assert folder in sections, f"{folder} is not listed by jupyter labextension list:\n{text}"
    lines = [line for line in sections[folder] if line.split()[:1] == [EXTENSION_NAME]]
    assert lines, f"{EXTENSION_NAME} is not listed under {folder}:\n{text}"
    assert "enabled" in lines[0] and "OK" in lines[0], lines[0]


# --------------------------------------------------------------------------------------
# JupyterLab


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
    """Stop a process we started, its process group and every process it started."""
    family = _descendants(proc.pid)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # jupyter lab shuts its kernels down
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


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


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


@dataclass
class Lab:
    url: str
    root: Path
    log: Path


def _make_database(folder: Path) -> None:
    """A small real tuning database: a few measured schedules of a 64^3 matmul."""
    import workbench as wb

    def space(sch):
        i, j, k = sch.get_loops(sch.get_block("C"))
        j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
        sch.reorder(i, j0, k, j1)

    wb.tune(wb.workloads.matmul(64, 64, 64), space, trials=5, seed=0, progress=False,
            remeasure=0, database=folder)


@contextmanager
def _serve(root: Path, env: dict[str, str], logs: Path, *extra: str) -> Iterator[Lab]:
    """``jupyter lab`` on a free port of 127.0.0.1 serving ``root``; stopped on exit with
    every process it started (kernels included)."""
    port = _free_port()
    command = [
        _jupyter(),
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
        *extra,
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log_path = logs / "jupyter-lab.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base_url = f"http://127.0.0.1:{port}"
        _wait_ready(proc, base_url, log_path)
        yield Lab(base_url, root, log_path)
    finally:
        _stop(proc)


@pytest.fixture
def jupyter_lab(tmp_path: Path, wheel_data: WheelData) -> Iterator[Lab]:
    """A JupyterLab with the wheel's extension, serving the notebook and a database."""
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    _make_database(root / DATABASE)
    with _serve(root, _lab_env(tmp_path, wheel_data.jupyter_path), tmp_path) as lab:
        yield lab


# --------------------------------------------------------------------------------------
# The flow


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG file"
    return struct.unpack(">II", header[16:24])


def _run_script(args: list[str], timeout: float, script: Path = SCRIPT) -> tuple[int, str]:
    """Run a node script in its own session (a hung run is killed with its Chromium)."""
    node = subprocess.Popen(["node", str(script), *args], cwd=BROWSER_DIR,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = node.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # Chromium runs in a process group of its own: _stop finds it among node's
        # descendants before node goes.
        _stop(node)
        output, _ = node.communicate()
        return -1, f"the browser run took over {timeout:.0f} s\n{output}"
    finally:
        _stop(node)
    return node.returncode, output


def _check_schedule_file(path: Path, seen: dict) -> list[str]:
    """The downloaded schedule file: split + two reorders, each step's IR, loadable."""
    import workbench as wb

    problems: list[str] = []
    data = json.loads(path.read_text())
    if data.get("format") != "workbench-schedule" or data.get("version") != 1:
        problems.append(f"{path.name}: not a version-1 schedule file: "
                        f"{data.get('format')!r} v{data.get('version')!r}")
    if data.get("func_name") != FUNCTION:
        problems.append(f"{path.name}: func_name is {data.get('func_name')!r}")
    kinds = [inst[0] for inst in data["trace"][0]]
    if kinds.count("Split") != 1 or kinds.count("Reorder") != 2:
        problems.append(f"{path.name}: expected one Split and two Reorder instructions, "
                        f"got {kinds}")
    try:
        sch = wb.load_schedule(path)  # replays the trace; checks the recorded hash
    except Exception as error:  # the message says what is wrong with the file
        return [*problems, f"{path.name} does not load: {type(error).__name__}: {error}"]
    steps = data.get("steps")
    if not isinstance(steps, dict):
        problems.append(f"{path.name}: no \"steps\" (each step's IR for viewers)")
    else:
        items = steps.get("items", [])
        if [item.get("kind") for item in items] != kinds:
            problems.append(f"{path.name}: steps.items kinds {[i.get('kind') for i in items]}"
                            f" differ from the trace's {kinds}")
        elif items:
            last = items[-1]["ir"]
            if "j_1" not in last or last != sch.mod[FUNCTION].script(syntax=steps["syntax"]):
                problems.append(f"{path.name}: the last step's IR is not the replayed "
                                f"schedule's IR")
    editor_ir = seen.get("ir_final", "")
    if "j_1" not in editor_ir:
        problems.append("the editor's final IR (as seen in the page) lacks j_1")
    return problems


def _squash(text: str) -> str:
    return " ".join(text.split())


def _check_schedule_viewer(path: Path, seen: dict) -> list[str]:
    """The extension's viewer against the uploaded file: its steps and the split's diff."""
    labels = seen.get("viewer_steps")
    if labels is None:
        return ["the schedule viewer was not reached"]
    steps = json.loads(path.read_text()).get("steps") or {}
    items = steps.get("items", [])
    problems: list[str] = []
    expected = [_squash(item["instruction"]) for item in items]
    shown = [_squash(label) for label in labels]
    if len(shown) != len(expected) or not all(e in s for s, e in zip(shown, expected)):
        problems.append(f"the viewer's steps {shown} are not the file's instructions {expected}")
    if _squash(steps.get("start", "")) not in _squash(seen.get("viewer_function", "")):
        problems.append("the viewer's .wb-viewer-function is not the file's unscheduled function")
    split = next((i for i, item in enumerate(items) if item.get("kind") == "Split"), None)
    if split is not None:
        before = items[split - 1]["ir"] if split else steps.get("start", "")
        after_lines = {line.strip() for line in items[split]["ir"].splitlines()}
        before_lines = {line.strip() for line in before.splitlines()}
        for line in seen.get("viewer_split_added", []):
            if line.lstrip("+").strip() not in after_lines:
                problems.append(f"added diff line {line!r} is not in the split step's IR")
        for line in seen.get("viewer_split_removed", []):
            if line.lstrip("-").strip() not in before_lines:
                problems.append(f"removed diff line {line!r} is not in the IR before the split")
    return problems


def _check_trace_viewer(path: Path, seen: dict) -> list[str]:
    """A bare trace opened in the viewer lists its instructions (one step each)."""
    labels = seen.get("trace_viewer_steps")
    if labels is None:
        return ["the trace file was not opened in the viewer"]
    count = len(json.loads(path.read_text())[0])
    if len(labels) != count:
        return [f"the viewer shows {len(labels)} steps for the {count} instructions of "
                f"{path.name}: {labels}"]
    return []


def _served_extension(url: str) -> dict | None:
    """The schedule-workbench entry of the lab page's federated extensions, if any."""
    with urllib.request.urlopen(f"{url}/lab", timeout=30) as response:
        page = response.read().decode()
    start = page.index('id="jupyter-config-data"')
    start = page.index(">", start) + 1
    config = json.loads(page[start : page.index("</script>", start)])
    for entry in config.get("federated_extensions", []):
        if entry.get("name") == EXTENSION_NAME:
            return entry
    return None


def _demo_function():
    """The function the demo notebook's editor opens (its code cell says the same)."""
    import workbench as wb

    return wb.workloads.mm_relu(128, 128, 128)


def _row(item) -> dict:
    return {"kind": item.kind, "name": item.name, "block": item.block, "depth": item.depth,
            "extent": item.extent}


def _expectations() -> dict:
    """What the pages must show, from the Python models (run_flow.mjs --expect)."""
    import workbench as wb
    from workbench.widgets.editor_model import EditorModel

    demo = EditorModel(_demo_function())
    targets = {action: [_row(item) for item in demo.compute_targets(action, TARGET_BLOCK)]
               for action in ("compute_at", "reverse_compute_at")}
    # The check means something only if one action has legal targets.
    assert any(targets.values()), f"block {TARGET_BLOCK} has no compute-location targets"
    new = EditorModel(getattr(wb.workloads, NEW_WORKLOAD)(**NEW_SIZES))
    return {
        "looptree": {"block": TARGET_BLOCK, "rows": [_row(item) for item in demo.tree()],
                     "targets": targets},
        "workbench": {"workload": NEW_WORKLOAD, "sizes": NEW_SIZES,
                      "rows": [_row(item) for item in new.tree()]},
    }


def _check_new_notebooks(root: Path, expect: dict, seen: dict) -> list[str]:
    """The notebooks the launcher card and "Open in notebook" saved, and what they showed."""
    problems: list[str] = []

    def key(row: dict) -> tuple:
        return row["kind"], row["name"], row["block"], row["depth"]

    for action, rows in expect["looptree"]["targets"].items():
        shown = seen.get(f"looptree_targets_{action}")
        if shown is None or sorted(map(key, shown)) != sorted(map(key, rows)):
            problems.append(f"{action} of {TARGET_BLOCK}: the page marked {shown} as targets; "
                            f"the model's legal targets are {rows}")
    rows = expect["workbench"]["rows"]
    shown = seen.get("workbench_rows")
    page_rows = [(*key(r), r["extent"] if r["kind"] == "loop" else "") for r in shown or []]
    model_rows = [(*key(r), f"range({r['extent']})" if r["kind"] == "loop" else "")
                  for r in rows]
    if shown is None or page_rows != model_rows:
        problems.append(f"the new notebook's loop tree showed {shown}; {NEW_WORKLOAD} "
                        f"{NEW_SIZES} has {rows}")
    sizes = ", ".join(f"{name}={value}" for name, value in NEW_SIZES.items())
    for notebook, wanted in [
        (f"{NEW_WORKLOAD}_workbench.ipynb",
         f"ScheduleEditor(wb.workloads.{NEW_WORKLOAD}({sizes}))"),
        (REPLAY_NOTEBOOK, f'TraceStepper("{SCHEDULE_FILE}")'),
    ]:
        path = root / notebook
        if not path.is_file():
            problems.append(f"no {notebook} was saved in the lab's folder")
            continue
        code = ["".join(cell["source"]) for cell in json.loads(path.read_text())["cells"]
                if cell["cell_type"] == "code"]
        if not code or wanted not in code[0]:
            problems.append(f"the first code cell of {notebook} lacks {wanted}: {code[:1]}")
    return problems


def _check_trace_file(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], list)):
        return [f"{path.name}: not TVM's [[insts], [decisions]] trace JSON"]
    kinds = [inst[0] for inst in data[0]]
    if kinds.count("Split") != 1 or kinds.count("Reorder") != 2:
        return [f"{path.name}: expected one Split and two Reorder instructions, got {kinds}"]
    return []


def _check_database_view(root: Path, seen: dict) -> list[str]:
    """The database viewer's table rows and plot points against records.jsonl."""
    from workbench.search import Database

    records = Database(root / DATABASE).records()
    problems: list[str] = []
    rows = seen.get("db_rows")
    points = seen.get("db_points")
    if rows is None or points is None:
        return ["the database viewer was not reached"]
    if len(records) < 3 or not all(r.ok for r in records):
        problems.append(f"the test's database should hold 3+ measured records: {records}")
    latency = [r.median for r in records]
    if len(rows) != len(records):
        problems.append(f".wb-db-table has {len(rows)} rows for {len(records)} records")
    else:
        # Row i is record i and shows its median latency (in ms, 4 significant digits).
        for index, (row, seconds) in enumerate(zip(rows, latency)):
            cells = row.split("\t")
            numbers = []
            for cell in cells:
                try:
                    numbers.append(float(cell))
                except ValueError:
                    pass
            if cells[0].strip() != str(index) or not any(
                    abs(n - seconds * 1e3) <= 1e-3 * seconds * 1e3 for n in numbers):
                problems.append(f"table row {index} {row!r} is not record {index} with its "
                                f"median latency {seconds * 1e3:.4g} ms")
    if len(points) != len(records):
        problems.append(f".wb-db-plot has {len(points)} .wb-db-point for {len(records)} "
                        f"records")
    else:
        # Trials left to right, and a slower trial drawn higher (or lower, but consistently).
        xs = [p["x"] for p in points]
        if xs != sorted(xs):
            problems.append(f"the plot's points are not in trial order left to right: {xs}")
        order = sorted(range(len(records)), key=lambda i: latency[i])
        ys = [points[i]["y"] for i in order]
        if ys != sorted(ys) and ys != sorted(ys, reverse=True):
            problems.append(f"the plot's point heights do not follow the latencies: "
                            f"latency order {order}, heights {ys}")
    return problems


@needs_browser
def test_new_user_flow(jupyter_lab: Lab, wheel_data: WheelData, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name in [*SCREENSHOTS, "failure.png"]:
        (ARTIFACTS / name).unlink(missing_ok=True)
    computer = tmp_path / "computer"  # the user's own folder, where downloads land
    computer.mkdir()
    result = tmp_path / "seen.json"
    expect = _expectations()
    expect_path = tmp_path / "expect.json"
    expect_path.write_text(json.dumps(expect))
    started = time.monotonic()
    code, output = _run_script(
        [
            f"--base-url={jupyter_lab.url}",
            f"--notebook={NOTEBOOK.name}",
            f"--chromium={_chromium()}",
            f"--artifacts={ARTIFACTS}",
            f"--computer={computer}",
            f"--result={result}",
            f"--database={DATABASE}/records.jsonl",
            f"--function={FUNCTION}",
            f"--expect={expect_path}",
        ],
        SCRIPT_TIMEOUT,
    )
    print(output)  # the step timings, shown with pytest -rP
    print(f"browser run: {time.monotonic() - started:.0f} s")
    seen = json.loads(result.read_text()) if result.is_file() else {}
    problems: list[str] = []
    if code != 0:
        problems.append(f"the browser run failed (exit {code})")
    schedule = computer / SCHEDULE_FILE
    if schedule.is_file():
        problems += _check_schedule_file(schedule, seen)
        problems += _check_schedule_viewer(schedule, seen)
    else:
        problems.append(f"no {SCHEDULE_FILE} was downloaded to the user's folder")
    trace = computer / TRACE_FILE
    if trace.is_file():
        problems += _check_trace_file(trace)
    else:
        problems.append(f"no {TRACE_FILE} was downloaded to the user's folder")
    if trace.is_file():
        problems += _check_trace_viewer(trace, seen)
    if wheel_data.extension is None:
        problems.append(f"the wheel ships no {EXTENSION_NAME} JupyterLab extension")
    else:
        # The lab loads the wheel's build (the same remoteEntry file), not another copy.
        wheel_package = json.loads((wheel_data.extension / "package.json").read_text())
        wheel_load = wheel_package.get("jupyterlab", {}).get("_build", {}).get("load")
        served = _served_extension(jupyter_lab.url)
        if served is None or served.get("load") != wheel_load:
            problems.append(f"the lab does not serve the wheel's {EXTENSION_NAME} build "
                            f"({wheel_load}): {served}")
    problems += _check_database_view(jupyter_lab.root, seen)
    problems += _check_new_notebooks(jupyter_lab.root, expect, seen)
    if seen.get("stages") != STAGES:
        problems.append(f"the browser run finished the stages {seen.get('stages')}, not {STAGES}")
    for name in SCREENSHOTS:
        path = ARTIFACTS / name
        if not path.is_file():
            problems.append(f"no screenshot {name}")
            continue
        width, height = _png_size(path)
        if width < 800 or height < 600 or path.stat().st_size < 20_000:
            problems.append(f"{name} is {width}x{height}, {path.stat().st_size} bytes "
                            f"(blank page?)")
    assert not problems, "\n".join(problems) + f"\n\n{output}\n\nlab log:\n{_tail(jupyter_lab.log)}"


# --------------------------------------------------------------------------------------
# Every lesson, top to bottom

NOTEBOOKS = PROJECT / "notebooks"
LESSONS_SCRIPT = BROWSER_DIR / "run_lessons.mjs"
# A lesson that must fail: an exception, a warning on stderr, two widgets that cannot
# render. It runs after the lessons, in the same lab and browser (a few seconds).
BROKEN_LESSON = BROWSER_DIR / "fixtures" / "broken_lesson.ipynb"
LESSON_TIMEOUT = 90.0  # seconds per lesson, Run All to idle
WIDGET_WAIT = 4.0  # seconds a widget gets to render before it counts as broken


def _lessons() -> list[Path]:
    """Every lesson notebook, found on disk (never a list kept by hand)."""
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def _lesson_shot(path: str) -> Path:
    return ARTIFACTS / f"lesson-{Path(path).stem}.png"


@dataclass
class LessonRun:
    code: int
    output: str
    results: dict[str, dict]  # notebook path in the lab -> what run_lessons.mjs found
    lessons: list[str]  # the lessons' paths in the lab, in order
    broken: str  # the broken fixture's path in the lab
    log: str


@pytest.fixture(scope="module")
def lesson_run(tmp_path_factory, wheel_data: WheelData) -> LessonRun:
    """One JupyterLab (the wheel's extension) and one browser run every lesson, from a
    temporary copy of notebooks/, then the broken fixture."""
    _require_extension(wheel_data)
    base = tmp_path_factory.mktemp("lessons")
    root = base / "root"
    shutil.copytree(NOTEBOOKS, root / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    (root / "fixtures").mkdir()
    shutil.copy(BROKEN_LESSON, root / "fixtures" / BROKEN_LESSON.name)
    lessons = [f"notebooks/{path.name}" for path in _lessons()]
    broken = f"fixtures/{BROKEN_LESSON.name}"
    (base / "lessons.json").write_text(json.dumps([*lessons, broken]))
    env = _lab_env(base, wheel_data.jupyter_path)
    env.pop("MPLBACKEND")  # plots as a learner sees them (inline), not the tests' Agg
    # Every cell attached to the page (no windowing), so every widget view exists and the
    # screenshot shows the whole lesson (and no blank space past the last cell).
    tracker = base / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True, exist_ok=True)
    (tracker / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none", "scrollPastEnd": False}))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("lesson-*.png"):
        old.unlink()
    result = base / "result.json"
    with _serve(root, env, base, "--LabApp.expose_app_in_browser=True") as lab:
        started = time.monotonic()
        code, output = _run_script(
            [
                f"--base-url={lab.url}",
                f"--lessons={base / 'lessons.json'}",
                f"--chromium={_chromium()}",
                f"--artifacts={ARTIFACTS}",
                f"--result={result}",
                f"--lesson-timeout={LESSON_TIMEOUT * 1000:.0f}",
                f"--widget-wait={WIDGET_WAIT * 1000:.0f}",
            ],
            LESSON_TIMEOUT * (len(lessons) + 1) + 60,
            LESSONS_SCRIPT,
        )
        output += f"\nbrowser run: {time.monotonic() - started:.1f} s in all"
        log = _tail(lab.log)
    found = json.loads(result.read_text()) if result.is_file() else []
    return LessonRun(code, output, {entry["lesson"]: entry for entry in found}, lessons,
                     broken, log)


@needs_browser
def test_every_lesson_runs_in_the_browser(lesson_run: LessonRun) -> None:
    print(lesson_run.output)  # per-lesson wall times, shown with pytest -rP
    assert lesson_run.lessons, f"no notebooks/*.ipynb found in {NOTEBOOKS}"
    problems: list[str] = []
    for lesson in lesson_run.lessons:
        found = lesson_run.results.get(lesson)
        if found is None:
            problems.append(f"{lesson}: the browser run did not reach it")
            continue
        problems += found["problems"]
        shot = _lesson_shot(lesson)
        if found["ok"]:
            if not shot.is_file():
                problems.append(f"{lesson}: no screenshot {shot.name}")
            else:
                width, height = _png_size(shot)
                if width < 800 or height < 600 or shot.stat().st_size < 20_000:
                    problems.append(f"{lesson}: {shot.name} is {width}x{height}, "
                                    f"{shot.stat().st_size} bytes (blank page?)")
    assert not problems, ("\n\n".join(problems) + f"\n\n{lesson_run.output}\n\nlab log:\n"
                          f"{lesson_run.log}")


@needs_browser
def test_the_lesson_run_catches_a_broken_lesson(lesson_run: LessonRun) -> None:
    """The fixture's failing cell, its warning and its two broken widgets are all reported,
    each naming the notebook and the cell; and the run as a whole fails."""
    found = lesson_run.results.get(lesson_run.broken)
    assert found is not None, f"the browser run did not reach {lesson_run.broken}:\n" \
                              f"{lesson_run.output}"
    assert lesson_run.code != 0 and not found["ok"], lesson_run.output
    text = "\n".join(found["problems"])
    cells = [cell for cell in json.loads(BROKEN_LESSON.read_text())["cells"]]
    index = {"".join(cell["source"]).split("\n")[0]: n for n, cell in enumerate(cells)}
    expected = {
        "# raises": "raised ZeroDivisionError: division by zero",
        "# warns": "wrote a warning or traceback to stderr",
        "# unknown widget class": "a widget failed to display",
        "# anywidget whose render throws": "a widget view rendered empty",
    }
    for first_line, message in expected.items():
        n = index[first_line]
        wanted = rf"\bcell {n}\b"
        assert any(line.startswith(lesson_run.broken) and re.search(wanted, line)
                   and message in line for line in found["problems"]), (
            f"no problem \"{wanted} ... {message}\" for {lesson_run.broken}; it reported:\n{text}")
    # The anywidget's own error reaches the browser console, and is reported too.
    assert "browser console error from our code: Error: render failed on purpose" in text, text
