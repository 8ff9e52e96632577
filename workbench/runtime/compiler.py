"""Compile generated C source to shared objects, with an on-disk cache, and load them.

Shared objects are cached under a key derived from the compiler, its version, the flags and
the source, so rebuilding an unchanged kernel never invokes the compiler. A cached object is
trusted only when its manifest (``<key>.json``: the key, the object's size and sha256,
written after the object) matches it; a truncated, corrupted, foreign or unlisted object is
rebuilt instead of loaded. Build folders that a killed process left behind (``.build-*``,
older than `STALE_BUILD_SECONDS`, their process gone) are removed by the next build.

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
    "remove_stale_builds",
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

#: Age after which a build folder whose process is gone is removed by the next build.
STALE_BUILD_SECONDS = 300.0

_lock = threading.Lock()
_stats = {"compiled": 0, "cache_hits": 0}
# (cache dir, key) -> (object, its (inode, size, mtime) when verified): a file changed
# since is verified again
_paths: dict[tuple[str, str], tuple[Path, tuple[int, int, int]]] = {}
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
    if (cached is not None and _signature(cached[0]) == cached[1]) or _verified(target, digest):
        _count("cache_hits")
        _remember(memo_key, target)
        return target

    directory.mkdir(parents=True, exist_ok=True)
    remove_stale_builds(directory)
    tmp = Path(tempfile.mkdtemp(dir=directory, prefix=f".build-{os.getpid()}-"))
    try:
        # relative names, run inside the build folder: the object does not depend on
        # the folder's random name (the same source gives the same bytes)
        src = tmp / f"{digest}.c"
        out = tmp / f"{digest}.so"
        src.write_text(source)
        command = _command(compiler, flags, Path(src.name), Path(out.name))
        _count("compiled")
        proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0:
            raise CompileError(command, source, proc.stderr, proc.returncode)
        manifest = _manifest(out, digest)
        os.replace(src, directory / src.name)
        os.replace(out, target)
        # the manifest goes last: a complete manifest always describes a complete object
        (tmp / "manifest").write_text(manifest)
        os.replace(tmp / "manifest", _manifest_path(target))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _remember(memo_key, target)
    return target


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _remember(memo_key: tuple[str, str], target: Path) -> None:
    sig = _signature(target)
    if sig is not None:
        with _lock:
            _paths[memo_key] = (target, sig)


def _manifest_path(target: Path) -> Path:
    return target.with_suffix(".json")


def _manifest(so: Path, key: str) -> str:
    data = so.read_bytes()
    return json.dumps({"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})


def _verified(target: Path, key: str) -> bool:
    """Is ``target`` the complete object its manifest describes (built for ``key``)?
    Missing, truncated, garbage or foreign files are not: they are removed so that the
    caller rebuilds them."""
    manifest = _manifest_path(target)
    if not target.exists() and not manifest.exists():
        return False
    try:
        want = json.loads(manifest.read_text())
        size = target.stat().st_size
        ok = (
            isinstance(want, dict)
            and want.get("key") == key
            and want.get("size") == size
            and want.get("sha256") == hashlib.sha256(target.read_bytes()).hexdigest()
        )
    except (OSError, ValueError):
        ok = False
    if not ok:
        for path in (target, manifest):
            try:
                path.unlink()
            except OSError:
                pass
    return ok


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def remove_stale_builds(directory: Path, max_age: float | None = None) -> list[Path]:
    """Remove the ``.build-*`` folders in the kernel cache ``directory`` that a killed
    build left behind: older than ``max_age`` seconds (default `STALE_BUILD_SECONDS`)
    and not owned by a live process (``.build-<pid>-...``). Returns the folders removed.

    Example:
        >>> import tempfile
        >>> remove_stale_builds(Path(tempfile.mkdtemp()))
        []
    """
    import time

    limit = STALE_BUILD_SECONDS if max_age is None else max_age
    now = time.time()
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(".build-"):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or now - entry.stat(
                follow_symlinks=False
            ).st_mtime < limit:
                continue
        except OSError:
            continue
        owner = entry.name[len(".build-"):].split("-", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and _pid_alive(int(owner)):
            continue
        if owner.isdigit() and int(owner) == os.getpid():
            continue  # a build of this process (another thread) in progress
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


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
