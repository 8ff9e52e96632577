"""The kernel cache verifies a cached shared object before loading it (a truncated,
garbage, half-truncated or foreign object is rebuilt, never loaded), and build folders
left behind by killed builds are cleaned up."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.c import generate_c, generate_c_source
from workbench.runtime import compiler
from workbench.runtime.compiler import compile_shared, compile_stats, load_library

ADD_SRC = "int add(int a, int b) { return a + b; }\n"
SUB_SRC = "int add(int a, int b) { return a - b; }\n"  # same symbol, other result


@pytest.fixture
def fresh(monkeypatch):
    """Forget the paths this process already resolved (as a new process would)."""
    monkeypatch.setattr(compiler, "_paths", {})


def _rebuilt(source: str, cache: Path) -> bool:
    before = compile_stats()["compiled"]
    compile_shared(source, cache_dir=cache)
    return compile_stats()["compiled"] == before + 1


@pytest.mark.parametrize("damage", ["empty", "garbage", "half", "missing_manifest",
                                    "bad_manifest"])
def test_damaged_cached_object_is_rebuilt(tmp_path, fresh, damage):
    path = compile_shared(ADD_SRC, cache_dir=tmp_path)
    data = path.read_bytes()
    manifest = path.with_suffix(".json")
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(b"\x00garbage" * 100)
    elif damage == "half":  # loading this one used to die with SIGBUS
        path.write_bytes(data[: len(data) // 2])
    elif damage == "missing_manifest":
        manifest.unlink()
        compiler._paths.clear()  # a new process: the object itself did not change
    else:
        manifest.write_text("{not json")
        compiler._paths.clear()
    assert _rebuilt(ADD_SRC, tmp_path)
    assert path.read_bytes() == data
    compiler._paths.clear()
    assert not _rebuilt(ADD_SRC, tmp_path)  # verified now: a plain cache hit


def test_half_truncated_object_does_not_kill_the_process(tmp_path):
    """In a child process, as a user would meet it: the build must succeed."""
    path = compile_shared(ADD_SRC, cache_dir=tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    code = (
        "import sys; from pathlib import Path\n"
        "from workbench.runtime.compiler import compile_and_load\n"
        f"lib = compile_and_load({ADD_SRC!r}, cache_dir=Path(sys.argv[1]))\n"
        "print(lib.add(20, 22))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42"


def test_foreign_object_under_the_name_is_rebuilt(tmp_path, fresh):
    mine = compile_shared(ADD_SRC, cache_dir=tmp_path)
    other = compile_shared(SUB_SRC, cache_dir=tmp_path)
    mine.write_bytes(other.read_bytes())  # another kernel's object under this name
    assert _rebuilt(ADD_SRC, tmp_path)
    # its manifest copied too: it names the other key, still refused
    compiler._paths.clear()
    mine.write_bytes(other.read_bytes())
    mine.with_suffix(".json").write_text(other.with_suffix(".json").read_text())
    assert _rebuilt(ADD_SRC, tmp_path)
    # loaded only now: rewriting an object this process has loaded would crash it
    assert load_library(mine).add(2, 3) == 5


def test_kernel_built_over_a_foreign_object_computes_right(tmp_path, monkeypatch):
    """wb.build end to end: a cached object swapped for another kernel's is not used."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(compiler, "_paths", {})
    A = wb.placeholder((8,), "float32", name="A")
    plus = wb.create_prim_func([A, wb.compute((8,), lambda i: A[i] + 1.0, name="B")],
                               name="main")
    times = wb.create_prim_func([A, wb.compute((8,), lambda i: A[i] * 3.0, name="B")],
                                name="main")
    # compiled but never loaded here (rewriting a loaded object in place would crash)
    target = compiler.compile_shared(generate_c_source(wb.lower(plus)).text)
    foreign = compiler.compile_shared(generate_c_source(wb.lower(times)).text)
    target.write_bytes(foreign.read_bytes())
    a, b = np.arange(8, dtype="float32"), np.zeros(8, dtype="float32")
    wb.build(plus)(a, b)
    assert (b == a + 1).all()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_build_folders_are_removed_on_the_next_build(tmp_path):
    old = time.time() - 3600
    dead = tmp_path / f".build-{_dead_pid()}-abc"
    legacy = tmp_path / ".build-xyz"  # no owner recorded
    live = tmp_path / f".build-{os.getppid()}-def"  # a live process: kept
    young = tmp_path / f".build-{_dead_pid()}-new"  # too recent: kept
    for d in (dead, legacy, live, young):
        d.mkdir()
        (d / "x.c").write_text("int x;")
    for d in (dead, legacy, live):
        os.utime(d, (old, old))
    compile_shared(ADD_SRC, cache_dir=tmp_path)
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".build-"))
    assert left == sorted([live.name, young.name])


def test_failed_build_leaves_no_build_folder(tmp_path):
    with pytest.raises(compiler.CompileError):
        compile_shared("int broken( {", cache_dir=tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".build-")]


def test_same_source_gives_the_same_object(tmp_path):
    src = generate_c(wb.workloads.matmul(16, 16, 16))
    a = compile_shared(src, cache_dir=tmp_path / "a")
    b = compile_shared(src, cache_dir=tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
