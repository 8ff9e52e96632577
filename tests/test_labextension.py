"""The prebuilt JupyterLab extension: the committed build matches extensions/'s sources, the
wheel ships it where JupyterLab looks, the environment has it enabled, and the workload
list the extension offers matches ``wb.workloads``."""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import workbench as wb

ROOT = Path(__file__).resolve().parent.parent
EXT = ROOT / "extensions"
OUTPUT = ROOT / "workbench" / "labextension"
NAME = "schedule-workbench"


def _build_module():
    spec = importlib.util.spec_from_file_location("_labext_build", EXT / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def build():
    return _build_module()


def test_committed_build_matches_sources(build):
    stamp = json.loads((OUTPUT / "build.json").read_text())
    assert stamp["sources_sha256"] == build.source_hash(), (
        "extensions/ changed since workbench/labextension was built: run `make labextension`"
    )
    on_disk = sorted(p.relative_to(OUTPUT).as_posix() for p in OUTPUT.rglob("*")
                     if p.is_file() and p.name != "build.json")
    assert on_disk == stamp["files"]
    package = json.loads((OUTPUT / "package.json").read_text())
    assert package["name"] == NAME
    entry = OUTPUT / package["jupyterlab"]["_build"]["load"]
    assert entry.is_file()
    install = json.loads((OUTPUT / "install.json").read_text())
    assert install["packageName"] == NAME
    # the DOM hooks and commands are in the built code
    code = "".join(p.read_text() for p in (OUTPUT / "static").glob("*.js"))
    for hook in ("wb-schedule-viewer", "wb-viewer-step-selected", "wb-db-point",
                 "schedule-workbench:new", "schedule-workbench:open-in-notebook"):
        assert hook in code


def _copy_sources(dst: Path) -> Path:
    src = dst / "extensions"
    for name in (*_build_module().SOURCE_FILES, "src", "style"):
        path = EXT / name
        if path.is_dir():
            shutil.copytree(path, src / name)
        else:
            src.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / name)
    return src


def test_source_hash_follows_sources_not_tests(build, tmp_path):
    src = _copy_sources(tmp_path)
    before = build.source_hash(src)
    assert before == build.source_hash()
    (src / "src" / "__tests__" / "extra.spec.ts").write_text("// a test only\n")
    assert build.source_hash(src) == before
    with (src / "src" / "diff.ts").open("a") as f:
        f.write("// changed\n")
    assert build.source_hash(src) != before
    (src / "style" / "base.css").write_text("")
    assert build.source_hash(src) != before


def test_build_without_node_keeps_the_committed_build(build, tmp_path, monkeypatch, capsys):
    src = _copy_sources(tmp_path)
    out = tmp_path / "labextension"
    shutil.copytree(OUTPUT, out)
    with (src / "src" / "diff.ts").open("a") as f:
        f.write("// changed\n")
    monkeypatch.setattr(build, "HERE", src)
    monkeypatch.setattr(build, "ROOT", tmp_path)
    monkeypatch.setattr(build, "OUTPUT", out)
    monkeypatch.setattr(build, "STAMP", out / "build.json")
    monkeypatch.setattr(build, "source_hash", lambda root=src: _build_module().source_hash(root))
    monkeypatch.setattr(build, "recorded_hash", lambda output=out: _build_module()
                        .recorded_hash(output))
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    assert build.main(["check"]) == 1
    assert build.main(["build", "--jlpm", "jlpm"]) == 0
    err = capsys.readouterr().err
    assert "node is not installed" in err and "stale" in err
    assert (out / "build.json").read_text() == (OUTPUT / "build.json").read_text()


def test_workload_list_matches_wb_workloads():
    listed = json.loads((EXT / "src" / "workloads.json").read_text())
    assert [w["name"] for w in listed] == wb.workloads.names()
    for entry in listed:
        make = wb.workloads.WORKLOADS[entry["name"]].make
        sizes = {p.name: p.default for p in inspect.signature(make).parameters.values()
                 if type(p.default) is int}
        assert entry["sizes"] == sizes, entry["name"]


def test_wheel_ships_the_labextension(tmp_path):
    pytest.importorskip("hatchling", reason="hatchling comes with the test extra")
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "workbench", tree / "workbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(dist), str(tree)],
                   check=True, capture_output=True, text=True)
    (wheel,) = dist.glob("schedule_workbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    prefix = f"schedule_workbench-{wb.__version__}.data/data/share/jupyter/labextensions/{NAME}/"
    shipped = sorted(n[len(prefix):] for n in names if n.startswith(prefix))
    expected = json.loads((OUTPUT / "build.json").read_text())["files"]
    assert shipped == sorted([*expected, "build.json"])
    # the extension is shared data only, not a copy inside the package
    assert not [n for n in names if n.startswith("workbench/labextension")]
    assert "workbench/schedule/file.py" in names


def test_environment_has_the_extension_enabled():
    pytest.importorskip("jupyterlab", reason="the lab extra installs JupyterLab")
    jupyter = Path(sys.executable).parent / "jupyter"
    result = subprocess.run([str(jupyter), "labextension", "list"], capture_output=True,
                            text=True, check=True)
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    assert re.search(rf"{NAME} v{re.escape(wb.__version__)} enabled OK", text), text
