"""Compile CUDA source with ``nvcc`` to PTX or a cubin, cached on disk.

Works without a GPU: nvcc only needs the CUDA toolkit. The result is cached in the
kernel cache folder (:func:`workbench.runtime.compiler.default_cache_dir`) under a key
made of the source, the arch, the output kind, the extra options and nvcc's version, so
compiling the same kernel twice runs nvcc once.

>>> src = 'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }'
>>> ptx = compile_cuda(src, arch="sm_80") if shutil.which("nvcc") else ".entry twice"
>>> ".entry twice" in ptx
True
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from ..runtime.compiler import CompileError, default_cache_dir

__all__ = [
    "CudaCompileError",
    "NvccNotFoundError",
    "compile_cuda",
    "find_nvcc",
    "nvcc_stats",
    "nvcc_version",
]

_OUTPUTS = {"ptx": ("-ptx", ".ptx"), "cubin": ("-cubin", ".cubin")}
_ARCH_RE = re.compile(r"(sm|compute)_\d+[a-z]?")
# nvcc front-end messages: "kernel.cu(12): error: ..."
_LINE_REF = re.compile(r"\.cu\((\d+)\)")
_STDERR_LINES_SHOWN = 30
_SOURCE_LINES_SHOWN = 5

_lock = threading.Lock()
_stats = {"compiled": 0, "cache_hits": 0}


class NvccNotFoundError(RuntimeError):
    """``nvcc`` (the CUDA toolkit's compiler) is not on PATH."""


class CudaCompileError(CompileError):
    """nvcc rejected a CUDA source. ``lines`` are the source line numbers nvcc named;
    the message shows nvcc's diagnostics and those lines of the source.

    >>> err = CudaCompileError(("nvcc",), "int x\\n", "k.cu(1): error: expected a \\";\\"", 1)
    >>> err.lines
    (1,)
    """

    def __init__(
        self, command: tuple[str, ...], source: str, stderr: str, returncode: int = 1
    ) -> None:
        super().__init__(command, source, stderr, returncode)
        found: list[int] = []
        for m in _LINE_REF.finditer(stderr):
            n = int(m.group(1))
            if n not in found:
                found.append(n)
        self.lines = tuple(found)

    def __str__(self) -> str:
        lines = self.stderr.strip().splitlines()
        shown = lines[:_STDERR_LINES_SHOWN]
        if len(lines) > len(shown):
            shown.append(f"... ({len(lines) - len(shown)} more lines)")
        parts = [f"nvcc failed (exit status {self.returncode}): {' '.join(self.command)}",
                 *shown]
        src = self.source.splitlines()
        width = len(str(len(src)))
        excerpt = [
            f"> {n:>{width}} | {src[n - 1]}"
            for n in sorted(self.lines[:_SOURCE_LINES_SHOWN])
            if 1 <= n <= len(src)
        ]
        if excerpt:
            parts += ["", "offending source lines:", *excerpt]
        return "\n".join(parts)


def find_nvcc() -> str:
    """Absolute path of ``nvcc`` on PATH; raises :class:`NvccNotFoundError` otherwise.

    >>> try:
    ...     path = find_nvcc()
    ... except NvccNotFoundError:
    ...     path = "nvcc"
    >>> path.endswith("nvcc")
    True
    """
    path = shutil.which("nvcc")
    if path is None:
        raise NvccNotFoundError(
            "nvcc is not on PATH: install the CUDA toolkit (it compiles kernels without a "
            "GPU) or add its bin/ folder to PATH"
        )
    return path


@functools.cache
def nvcc_version(nvcc: str | None = None) -> str:
    """The release line of ``nvcc --version`` (``"Cuda compilation tools, release 13.0,
    V13.0.88"``), read once per process."""
    nvcc = nvcc or find_nvcc()
    try:
        proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True)
    except OSError as err:
        raise NvccNotFoundError(f"cannot run {nvcc!r}: {err}") from err
    lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
    release = [ln for ln in lines if "release" in ln]
    return (release or lines or [""])[-1]


def nvcc_stats() -> dict[str, int]:
    """Counts for this process: ``compiled`` (nvcc runs) and ``cache_hits``.

    >>> sorted(nvcc_stats())
    ['cache_hits', 'compiled']
    """
    with _lock:
        return dict(_stats)


def _count(key: str) -> None:
    with _lock:
        _stats[key] += 1


def compile_cuda(
    source: str,
    arch: str = "sm_80",
    output: str = "ptx",
    *,
    options: tuple[str, ...] = (),
    cache_dir: Path | None = None,
    nvcc: str | None = None,
) -> str | bytes:
    """Compile CUDA ``source`` with ``nvcc -ptx -arch=<arch>`` (``output="ptx"``: the
    PTX text) or ``nvcc -cubin -arch=<arch>`` (``output="cubin"``: the cubin's bytes).

    The result is cached in ``cache_dir`` (default: the kernel cache folder) as
    ``<sha256>.ptx``/``.cubin`` next to the source ``<sha256>.cu``; the key covers the
    source, ``arch``, ``output``, ``options`` and nvcc's version. Raises
    :class:`CudaCompileError` (with nvcc's messages and the source lines they name)
    when nvcc fails, :class:`NvccNotFoundError` without nvcc.

    >>> src = 'extern "C" __global__ void k(int* x) { x[blockIdx.x] = 1; }'
    >>> out = compile_cuda(src, "sm_90", "cubin") if shutil.which("nvcc") else b"\\x7fELF"
    >>> out[:4]
    b'\\x7fELF'
    """
    if output not in _OUTPUTS:
        raise ValueError(f"compile_cuda: output must be 'ptx' or 'cubin', got {output!r}")
    if not isinstance(arch, str) or not _ARCH_RE.fullmatch(arch):
        raise ValueError(
            f"compile_cuda: arch must look like 'sm_80' or 'compute_90', got {arch!r}"
        )
    options = tuple(str(o) for o in options)
    nvcc = nvcc or find_nvcc()
    flag, suffix = _OUTPUTS[output]
    key = hashlib.sha256(
        json.dumps([nvcc_version(nvcc), arch, output, list(options), source]).encode()
    ).hexdigest()
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = directory / f"{key}{suffix}"
    if target.exists():
        _count("cache_hits")
        return target.read_text() if output == "ptx" else target.read_bytes()

    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".nvcc-") as tmp:
        src = Path(tmp) / "kernel.cu"
        out = Path(tmp) / f"kernel{suffix}"
        src.write_text(source)
        command = (nvcc, flag, f"-arch={arch}", *options, "-o", str(out), str(src))
        _count("compiled")
        proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0:
            raise CudaCompileError(command, source, proc.stderr + proc.stdout,
                                   proc.returncode)
        result = out.read_text() if output == "ptx" else out.read_bytes()
        os.replace(src, directory / f"{key}.cu")
        os.replace(out, target)
    return result
