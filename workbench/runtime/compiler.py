"""Compile generated C source to shared objects, with an on-disk cache, and load them.

Shared objects are cached under a key derived from the compiler, its version, the flags and
the source, so rebuilding an unchanged kernel never invokes the compiler.

Example:
    >>> lib = compile_and_load("int add(int a, int b) { return a + b; }")
    >>> lib.add(2, 3)
    5
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

__all__ = [
    "DEFAULT_FLAGS",
    "CompileError",
    "CompilerNotFoundError",
    "compile_and_load",
    "compile_shared",
    "compile_stats",
    "default_cache_dir",
    "find_compiler",
    "load_library",
]

# -ffp-contract=fast lets the compiler fuse a*b+c into one FMA, as LLVM does for TVM
# (-std=c11 alone turns contraction off); on x86, 512-bit vectors are preferred where the
# CPU has them (gcc otherwise stays at 256 bits). Both measured: about 2x on float32 matmul.
_X86_FLAGS = ("-mprefer-vector-width=512",) if platform.machine() in ("x86_64", "AMD64") else ()

DEFAULT_FLAGS: tuple[str, ...] = (
    "-O3",
    "-march=native",
    "-fopenmp",
    "-shared",
    "-fPIC",
    "-std=c11",
    "-ffp-contract=fast",
    *_X86_FLAGS,
    "-lm",
)

_COMPILER_CANDIDATES = ("gcc", "cc", "clang")
_STDERR_LINES_SHOWN = 30
_SOURCE_LINES_SHOWN = 5
_LINE_REF = re.compile(r"\.c:(\d+):")

_lock = threading.Lock()
_stats = {"compiled": 0, "cache_hits": 0}
_paths: dict[tuple[str, str], Path] = {}
_libraries: dict[str, ctypes.CDLL] = {}


class CompilerNotFoundError(RuntimeError):
    """Raised when no C compiler (gcc, cc or clang) is on PATH."""


class CompileError(Exception):
    """The C compiler rejected a source file.

    Attributes:
        command: the compiler command line that failed.
        source: the C source that was compiled.
        stderr: everything the compiler wrote to stderr.
        returncode: the compiler's exit status.

    Example:
        >>> try:
        ...     compile_shared("int f( {")
        ... except CompileError as err:
        ...     print(err.returncode != 0)
        True
    """

    def __init__(
        self, command: tuple[str, ...], source: str, stderr: str, returncode: int = 1
    ) -> None:
        super().__init__(command, source, stderr, returncode)
        self.command = tuple(command)
        self.source = source
        self.stderr = stderr
        self.returncode = returncode

    def __str__(self) -> str:
        lines = self.stderr.splitlines()
        shown = lines[:_STDERR_LINES_SHOWN]
        if len(lines) > len(shown):
            shown.append(f"... ({len(lines) - len(shown)} more lines)")
        parts = [
            f"C compilation failed (exit status {self.returncode}): {' '.join(self.command)}",
            *shown,
        ]
        excerpt = _source_excerpt(self.source, self.stderr)
        if excerpt:
            parts += ["", "offending source lines:", *excerpt]
        return "\n".join(parts)


def _source_excerpt(source: str, stderr: str) -> list[str]:
    """Source lines named by `file.c:LINE:` in stderr, numbered and marked with '>'."""
    src_lines = source.splitlines()
    wanted: list[int] = []
    for match in _LINE_REF.finditer(stderr):
        lineno = int(match.group(1))
        if 1 <= lineno <= len(src_lines) and lineno not in wanted:
            wanted.append(lineno)
    width = len(str(len(src_lines)))
    return [
        f"> {lineno:>{width}} | {src_lines[lineno - 1]}"
        for lineno in sorted(wanted[:_SOURCE_LINES_SHOWN])
    ]


def find_compiler() -> str:
    """Return the absolute path of a C compiler on PATH: gcc, else cc, else clang.

    Example:
        >>> import os
        >>> os.path.basename(find_compiler()) in ("gcc", "cc", "clang")
        True
    """
    for name in _COMPILER_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    raise CompilerNotFoundError(
        "no C compiler found on PATH (looked for " + ", ".join(_COMPILER_CANDIDATES) + "); "
        "install gcc, e.g. `apt-get install gcc`"
    )


@functools.cache
def _compiler_version(compiler: str) -> str:
    """First line of `compiler --version`, computed once per process and compiler."""
    try:
        proc = subprocess.run([compiler, "--version"], capture_output=True, text=True)
    except OSError as err:
        raise CompilerNotFoundError(f"cannot run C compiler {compiler!r}: {err}") from err
    first = proc.stdout.splitlines()[:1]
    return first[0].strip() if first else ""


def default_cache_dir() -> Path:
    """Kernel cache folder: `$XDG_CACHE_HOME/schedule-workbench/kernels`, else under ~/.cache.

    Example:
        >>> default_cache_dir().name
        'kernels'
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "schedule-workbench" / "kernels"


def compile_stats() -> dict[str, int]:
    """Counts for this process: `compiled` (compiler runs) and `cache_hits`.

    Example:
        >>> sorted(compile_stats())
        ['cache_hits', 'compiled']
    """
    with _lock:
        return dict(_stats)


def _cache_key(compiler: str, flags: tuple[str, ...], source: str) -> str:
    material = json.dumps([compiler, _compiler_version(compiler), list(flags), source])
    return hashlib.sha256(material.encode()).hexdigest()


def _command(compiler: str, flags: tuple[str, ...], src: Path, out: Path) -> tuple[str, ...]:
    """Compiler command line; `-l` libraries go after the source so the linker sees them."""
    libs = tuple(f for f in flags if f.startswith("-l"))
    opts = tuple(f for f in flags if not f.startswith("-l"))
    return (compiler, *opts, "-o", str(out), str(src), *libs)


def _count(key: str) -> None:
    with _lock:
        _stats[key] += 1


def compile_shared(
    source: str,
    *,
    flags: tuple[str, ...] = DEFAULT_FLAGS,
    cache_dir: Path | None = None,
    compiler: str | None = None,
) -> Path:
    """Compile C `source` to a shared object and return its path, reusing the disk cache.

    The object is `cache_dir/<sha256>.so` with the source kept beside it as `<sha256>.c`.
    It is built in a private temporary folder inside `cache_dir` and moved into place with
    `os.replace`, so concurrent processes never see a half-written file. A failed build
    (including a compiler without OpenMP support for `-fopenmp`) raises `CompileError`.

    Example:
        >>> so = compile_shared("int add(int a, int b) { return a + b; }")
        >>> so.suffix
        '.so'
    """
    compiler = compiler or find_compiler()
    flags = tuple(flags)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    digest = _cache_key(compiler, flags, source)
    memo_key = (str(directory.resolve()), digest)
    target = directory / f"{digest}.so"

    with _lock:
        cached = _paths.get(memo_key)
    if (cached is not None and cached.exists()) or target.exists():
        _count("cache_hits")
        with _lock:
            _paths[memo_key] = target
        return target

    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as tmp:
        src = Path(tmp) / f"{digest}.c"
        out = Path(tmp) / f"{digest}.so"
        src.write_text(source)
        command = _command(compiler, flags, src, out)
        _count("compiled")
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(command, source, proc.stderr, proc.returncode)
        os.replace(src, directory / src.name)
        os.replace(out, target)
    with _lock:
        _paths[memo_key] = target
    return target


def load_library(path: str | os.PathLike[str]) -> ctypes.CDLL:
    """Load a shared object with ctypes, once per path in this process.

    Example:
        >>> lib = load_library(compile_shared("int one(void) { return 1; }"))
        >>> lib.one()
        1
    """
    key = str(Path(path).resolve())
    with _lock:
        lib = _libraries.get(key)
        if lib is None:
            lib = ctypes.CDLL(key)
            _libraries[key] = lib
    return lib


def compile_and_load(
    source: str,
    *,
    flags: tuple[str, ...] = DEFAULT_FLAGS,
    cache_dir: Path | None = None,
    compiler: str | None = None,
) -> ctypes.CDLL:
    """Compile `source` (cached) and load it; see `compile_shared` and `load_library`.

    Example:
        >>> compile_and_load("int sq(int x) { return x * x; }").sq(7)
        49
    """
    path = compile_shared(source, flags=flags, cache_dir=cache_dir, compiler=compiler)
    return load_library(path)
