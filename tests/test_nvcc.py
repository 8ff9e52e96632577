"""workbench.codegen.nvcc: nvcc runs for sm_80 and sm_90 (PTX and cubin), errors name the
source line, the disk cache spares the second nvcc run, and a missing nvcc is reported."""

from __future__ import annotations

import subprocess

import pytest

from workbench.codegen import nvcc
from workbench.runtime.compiler import CompileError

ADD_ONE = """\
extern "C" __global__ void wb_add_one(const float* __restrict__ A, float* __restrict__ B,
                                      int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    B[i] = A[i] + 1.0f;
  }
}
"""

BROKEN = """\
extern "C" __global__ void wb_broken(float* B) {
  int i = threadIdx.x;
  B[i] = 1.0f
}
"""


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_compiles_to_ptx_naming_the_entry(arch, tmp_path):
    ptx = nvcc.compile_cuda(ADD_ONE, arch=arch, cache_dir=tmp_path)
    assert isinstance(ptx, str)
    assert ".entry wb_add_one(" in ptx  # extern "C": the symbol is not mangled
    assert f".target {arch}" in ptx


@pytest.mark.nvcc
def test_compiles_to_cubin(tmp_path):
    cubin = nvcc.compile_cuda(ADD_ONE, arch="sm_90", output="cubin", cache_dir=tmp_path)
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"
    assert b"wb_add_one" in cubin


@pytest.mark.nvcc
def test_syntax_error_names_the_line(tmp_path):
    with pytest.raises(nvcc.CudaCompileError) as info:
        nvcc.compile_cuda(BROKEN, arch="sm_80", cache_dir=tmp_path)
    err = info.value
    assert isinstance(err, CompileError)
    assert err.returncode != 0 and "error" in err.stderr
    # the missing ';' after line 3 is reported at line 3 or 4; the message quotes it
    assert err.lines and err.lines[0] in (3, 4)
    text = str(err)
    assert text.startswith("nvcc failed (exit status")
    assert "offending source lines:" in text
    assert f"> {err.lines[0]} | " in text
    assert not list(tmp_path.glob("*.ptx"))  # nothing cached for a failed build


@pytest.mark.nvcc
def test_second_compile_does_not_run_nvcc(tmp_path, monkeypatch):
    first = nvcc.compile_cuda(ADD_ONE, arch="sm_80", cache_dir=tmp_path)
    before = nvcc.nvcc_stats()

    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"nvcc ran again: {args}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    again = nvcc.compile_cuda(ADD_ONE, arch="sm_80", cache_dir=tmp_path)
    assert again == first
    after = nvcc.nvcc_stats()
    assert after["compiled"] == before["compiled"]
    assert after["cache_hits"] == before["cache_hits"] + 1
    assert (tmp_path / next(tmp_path.glob("*.ptx")).name.replace(".ptx", ".cu")).read_text() \
        == ADD_ONE


@pytest.mark.nvcc
def test_cache_key_covers_arch_and_output(tmp_path):
    nvcc.compile_cuda(ADD_ONE, arch="sm_80", cache_dir=tmp_path)
    compiled = nvcc.nvcc_stats()["compiled"]
    nvcc.compile_cuda(ADD_ONE, arch="sm_90", cache_dir=tmp_path)
    nvcc.compile_cuda(ADD_ONE, arch="sm_80", output="cubin", cache_dir=tmp_path)
    assert nvcc.nvcc_stats()["compiled"] == compiled + 2
    assert len(list(tmp_path.glob("*.ptx"))) == 2 and len(list(tmp_path.glob("*.cubin"))) == 1


def test_missing_nvcc(monkeypatch):
    monkeypatch.setattr(nvcc.shutil, "which", lambda name: None)
    with pytest.raises(nvcc.NvccNotFoundError, match="nvcc is not on PATH"):
        nvcc.find_nvcc()
    with pytest.raises(nvcc.NvccNotFoundError):
        nvcc.compile_cuda(ADD_ONE)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"output": "fatbin"}, "output must be 'ptx' or 'cubin'"),
        ({"arch": "sm_80 -o /tmp/x"}, "arch must look like"),
        ({"arch": "80"}, "arch must look like"),
    ],
)
def test_bad_arguments_refused_before_nvcc(kwargs, message, monkeypatch):
    monkeypatch.setattr(nvcc, "find_nvcc", lambda: pytest.fail("nvcc looked up"))
    with pytest.raises(ValueError, match=message):
        nvcc.compile_cuda(ADD_ONE, **kwargs)


def test_error_excerpt_from_nvcc_message():
    stderr = 'kernel.cu(3): error: expected a ";"\n\n1 error detected in "kernel.cu".'
    err = nvcc.CudaCompileError(("nvcc", "-ptx"), BROKEN, stderr, 2)
    assert err.lines == (3,)
    assert "> 3 |   B[i] = 1.0f" in str(err)
