"""C functions that generated kernels call by name (``T.call_extern``), with their source.

A tensor intrinsic's implementation calls a C function: register its definition once with
:func:`register_c_function`, and every translation unit whose kernel calls it gets that
definition (after its ``#include`` lines, each once) instead of a prototype. Functions
written with SIMD intrinsics name the CPU flags they need (``requires``, spelled as
``/proc/cpuinfo`` spells them): building a kernel that calls one on a machine without a
flag is refused with a :class:`~workbench.codegen.CodegenError`.

>>> from workbench.codegen import register_c_function, c_function
>>> f = register_c_function(
...     "wb_doc_axpy", "static inline void wb_doc_axpy(float* y, const float* x, float a) {"
...     " for (int i = 0; i < 4; ++i) y[i] += a * x[i]; }", override=True)
>>> c_function("wb_doc_axpy").requires
()
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

__all__ = [
    "CFunction",
    "c_function",
    "c_function_names",
    "cpu_flags",
    "missing_flags",
    "register_c_function",
]

_NAME_RE = re.compile(r"[A-Za-z_]\w*")
_HEADER_RE = re.compile(r"[A-Za-z0-9_./+-]+")


@dataclass(frozen=True)
class CFunction:
    """A registered C function: ``name``, its full definition ``source``, the headers it
    needs (``#include`` lines) and the CPU flags it ``requires``."""

    name: str
    source: str
    headers: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()


_FUNCTIONS: dict[str, CFunction] = {}
_LOCK = threading.Lock()


def _include_line(header: str) -> str:
    """``immintrin.h`` / ``<immintrin.h>`` / ``#include <immintrin.h>`` -> the include
    line ``#include <immintrin.h>``."""
    h = header.strip()
    if h.startswith("#include"):
        h = h[len("#include"):].strip()
    if len(h) > 2 and h[0] + h[-1] in ("<>", '""'):
        h = h[1:-1].strip()
    if not _HEADER_RE.fullmatch(h):
        raise ValueError(f"register_c_function: {header!r} is not a header name")
    return f"#include <{h}>"


def register_c_function(name: str, source: str, *, headers=(), requires=(),
                        override: bool = False) -> CFunction:
    """Register the C definition ``source`` of the function ``name``.

    ``headers``: headers the definition needs (``"immintrin.h"``); ``requires``: CPU
    flags as ``/proc/cpuinfo`` spells them (``"avx2"``, ``"fma"``, ``"avx512f"``,
    ``"avx512_vnni"``). Registering a name again with the same definition is allowed; a
    different one needs ``override=True``.

    >>> register_c_function("wb_doc_twice", "static inline int wb_doc_twice(int x) "
    ...                     "{ return 2 * x; }", override=True).name
    'wb_doc_twice'
    >>> register_c_function("wb_doc_twice", "int other(void) { return 0; }")
    Traceback (most recent call last):
     ...
    ValueError: register_c_function: the source of 'wb_doc_twice' does not define it
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(f"register_c_function: {name!r} is not a C function name")
    if not isinstance(source, str) or not re.search(rf"\b{re.escape(name)}\s*\(", source):
        raise ValueError(f"register_c_function: the source of {name!r} does not define it")
    if isinstance(headers, str):
        headers = (headers,)
    if isinstance(requires, str):
        requires = (requires,)
    includes = tuple(dict.fromkeys(_include_line(h) for h in headers))
    flags = tuple(dict.fromkeys(str(f).strip() for f in requires))
    if any(not f or not re.fullmatch(r"[a-z0-9_.]+", f) for f in flags):
        raise ValueError(f"register_c_function: CPU flags are lower-case words as "
                         f"/proc/cpuinfo spells them, got {list(requires)}")
    fn = CFunction(name, source.strip() + "\n", includes, flags)
    with _LOCK:
        old = _FUNCTIONS.get(name)
        if old is not None and old != fn and not override:
            raise ValueError(
                f"register_c_function: {name!r} is already registered with a different "
                "definition; pass override=True to replace it"
            )
        _FUNCTIONS[name] = fn
    return fn


def c_function(name: str) -> CFunction | None:
    """The registered C function ``name``, or None.

    >>> c_function("no_such_function") is None
    True
    """
    with _LOCK:
        return _FUNCTIONS.get(name)


def c_function_names() -> list[str]:
    """Names of the registered C functions, sorted."""
    with _LOCK:
        return sorted(_FUNCTIONS)


def cpu_flags() -> frozenset[str]:
    """This machine's CPU flags, as ``/proc/cpuinfo`` lists them (empty where it has no
    such file); the reading :func:`workbench.runtime.peak.cpu_spec` makes.

    >>> isinstance(cpu_flags(), frozenset)
    True
    """
    from ..runtime import peak

    match = peak._FLAGS_RE.search(peak._read(peak._CPUINFO) or "")
    return frozenset(match.group(1).split()) if match else frozenset()


def missing_flags(fn: CFunction, flags: frozenset[str] | None = None) -> tuple[str, ...]:
    """The flags ``fn`` requires that ``flags`` (this machine's by default) lacks."""
    have = cpu_flags() if flags is None else flags
    return tuple(f for f in fn.requires if f not in have)
