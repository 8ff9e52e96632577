"""Tests for workbench.runtime.compiler: building, caching and loading C shared objects."""

from __future__ import annotations

import ctypes
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from workbench.runtime import compiler
from workbench.runtime.compiler import (
    DEFAULT_FLAGS,
    CompileError,
    CompilerNotFoundError,
    compile_and_load,
    compile_shared,
    compile_stats,
    default_cache_dir,
    find_compiler,
    load_library,
)

ADD_SRC = "int add(int a, int b) { return a + b; }\n"


def test_compile_and_call_add(tmp_path: Path) -> None:
    lib = compile_and_load(ADD_SRC, cache_dir=tmp_path)
    assert lib.add(2, 40) == 42
    assert lib.add(-5, 3) == -2


def test_second_compile_is_cache_hit(tmp_path: Path) -> None:
    first = compile_shared(ADD_SRC, cache_dir=tmp_path)
    before = compile_stats()
    second = compile_shared(ADD_SRC, cache_dir=tmp_path)
    after = compile_stats()
    assert second == first
    assert after["compiled"] == before["compiled"]
    assert after["cache_hits"] == before["cache_hits"] + 1


def test_disk_cache_hit_never_runs_compiler(tmp_path: Path, monkeypatch) -> None:
    path = compile_shared(ADD_SRC, cache_dir=tmp_path)
    monkeypatch.setattr(compiler, "_paths", {})  # as if this were a fresh process

    def no_compiler(*args, **kwargs):
        raise AssertionError(f"compiler invoked: {args}")

    monkeypatch.setattr(subprocess, "run", no_compiler)
    before = compile_stats()["compiled"]
    assert compile_shared(ADD_SRC, cache_dir=tmp_path) == path
    assert compile_stats()["compiled"] == before


def test_different_source_compiles_anew(tmp_path: Path) -> None:
    first = compile_shared(ADD_SRC, cache_dir=tmp_path)
    before = compile_stats()["compiled"]
    other = compile_shared("int sub(int a, int b) { return a - b; }\n", cache_dir=tmp_path)
    assert other != first
    assert compile_stats()["compiled"] == before + 1
    assert load_library(other).sub(10, 4) == 6


def test_different_flags_compile_anew(tmp_path: Path) -> None:
    first = compile_shared(ADD_SRC, cache_dir=tmp_path)
    flags = tuple(f if f != "-O3" else "-O1" for f in DEFAULT_FLAGS)
    assert compile_shared(ADD_SRC, cache_dir=tmp_path, flags=flags) != first


def test_cache_dir_layout(tmp_path: Path) -> None:
    cache = tmp_path / "nested" / "kernels"
    path = compile_shared(ADD_SRC, cache_dir=cache)
    assert path.parent == cache
    assert path.suffix == ".so"
    assert len(path.stem) == 64  # sha256 hex digest
    assert path.with_suffix(".c").read_text() == ADD_SRC
    leftovers = sorted(p.name for p in cache.iterdir())
    assert leftovers == sorted(
        [path.name, path.with_suffix(".c").name, path.with_suffix(".json").name]
    )


def test_default_cache_dir_follows_xdg(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "schedule-workbench" / "kernels"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "schedule-workbench" / "kernels"


def test_syntax_error_raises_compile_error(tmp_path: Path) -> None:
    source = "int ok(void) { return 1; }\nint broken(int x) {\n  return x +;\n}\n"
    with pytest.raises(CompileError) as info:
        compile_shared(source, cache_dir=tmp_path)
    err = info.value
    assert err.source == source
    assert err.returncode != 0
    assert "error" in err.stderr
    message = str(err)
    assert "error" in message
    assert ".c:3:" in message  # gcc/clang point at the offending line
    assert "> 3 |   return x +;" in message  # the line itself, numbered
    assert not list(tmp_path.glob("*.so"))


def test_compile_error_puts_libraries_after_source(tmp_path: Path) -> None:
    with pytest.raises(CompileError) as info:
        compile_shared("this is not C\n", cache_dir=tmp_path)
    command = info.value.command
    source_index = next(i for i, arg in enumerate(command) if arg.endswith(".c"))
    assert command.index("-lm") > source_index
    assert command[0] == find_compiler()


def test_compile_error_truncates_long_stderr() -> None:
    stderr = "\n".join(f"x.c:{i}: error: bad" for i in range(1, 101))
    message = str(CompileError(("cc",), "int a;\n", stderr, 1))
    assert "x.c:30: error" in message
    assert "x.c:31: error" not in message
    assert "70 more lines" in message


def test_bad_flag_surfaces_as_compile_error(tmp_path: Path) -> None:
    with pytest.raises(CompileError):
        compile_shared(ADD_SRC, cache_dir=tmp_path, flags=(*DEFAULT_FLAGS, "-fno-such-flag-xyz"))


def test_openmp_kernel_compiles_and_runs(tmp_path: Path) -> None:
    source = """
#include <omp.h>
double total(const double *x, long n) {
    double s = 0.0;
    #pragma omp parallel for reduction(+:s)
    for (long i = 0; i < n; ++i) s += x[i];
    return s;
}
int threads(void) { return omp_get_max_threads(); }
"""
    lib = compile_and_load(source, cache_dir=tmp_path)
    lib.total.restype = ctypes.c_double
    lib.total.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_long]
    data = np.arange(10_000, dtype=np.float64)
    ptr = data.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
    assert lib.total(ptr, data.size) == pytest.approx(float(data.sum()))
    assert lib.threads() >= 1


def test_load_library_is_cached(tmp_path: Path) -> None:
    path = compile_shared(ADD_SRC, cache_dir=tmp_path)
    assert load_library(path) is load_library(str(path))


def test_concurrent_compiles_agree(tmp_path: Path) -> None:
    source = "int mul(int a, int b) { return a * b; }\n"
    with ThreadPoolExecutor(max_workers=4) as pool:
        paths = list(pool.map(lambda _: compile_shared(source, cache_dir=tmp_path), range(4)))
    assert len(set(paths)) == 1
    assert load_library(paths[0]).mul(6, 7) == 42
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".build-")]


def test_find_compiler_missing(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompilerNotFoundError, match="no C compiler"):
        find_compiler()
