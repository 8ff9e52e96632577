"""One thread setting for every place a kernel runs, and a sane OpenMP wait policy.

The setting is a count of threads: the parallel loops of our generated C kernels (OpenMP)
and NumPy's BLAS, when a measurement compares with NumPy, both use it, so that a
comparison between the two is fair. It comes, by priority, from

1. ``threads=`` given to ``wb.measure``, ``wb.tune``, ``measure_isolated``,
   ``Worker.measure_kernel`` or ``ScheduleEditor`` (or a :func:`thread_limit` block);
2. :func:`set_num_threads` (the process-wide default);
3. the environment variable ``WB_NUM_THREADS``, read once when workbench is imported
   (else ``OMP_NUM_THREADS``, so ``OMP_NUM_THREADS=1`` keeps meaning one thread);
4. otherwise every usable core: ``len(os.sched_getaffinity(0))`` (:func:`usable_cores`).

A generated kernel applies the setting when it is called (``omp_set_num_threads`` of the
OpenMP runtime the kernel is linked with, looked up through the kernel's library) and
the measuring worker applies the count it is sent; NumPy's BLAS is limited through
threadpoolctl (``threadpool_limits(n, user_api="blas")``) while ``wb.measure`` times.

**Wait policy.** After a parallel loop, OpenMP threads spin (busy-wait) for a while
before they sleep, so that the next parallel loop starts fast. On a machine whose cores
are all busy (other processes, or NumPy's own threads) the spinning threads take the
cores the working threads need, and a parallel kernel becomes many times slower than
a serial one: measurements collapse and flip from run to run. So workbench asks
libgomp to spin briefly (:data:`OMP_MEASURE_ENV`: ``GOMP_SPINCOUNT``) in the measuring
worker's environment, and in this process when workbench is imported before the OpenMP
runtime is loaded. A value the user set already is kept.

Example:
    >>> set_num_threads(1); get_num_threads()
    1
    >>> with thread_limit(2) as n:
    ...     n == get_num_threads() == 2
    True
    >>> set_num_threads(None)  # back to the environment's count, or every usable core
"""

from __future__ import annotations

import ctypes
import numbers
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "ENV_VAR",
    "OMP_MEASURE_ENV",
    "apply_to_library",
    "get_num_threads",
    "resolve_threads",
    "set_num_threads",
    "thread_limit",
    "usable_cores",
]

#: Environment variable giving the default thread count (read at import).
ENV_VAR = "WB_NUM_THREADS"

#: OpenMP settings for measuring (see the module docstring): libgomp spins at most this
#: many iterations (a few microseconds) before a waiting thread sleeps, instead of its
#: default 300,000.
OMP_MEASURE_ENV = {"GOMP_SPINCOUNT": "10000"}

_default: int | None = None  # set_num_threads
_env_default: int | None = None  # WB_NUM_THREADS, else OMP_NUM_THREADS, at import
_local = threading.local()  # .override: the count of the innermost thread_limit block


def usable_cores() -> int:
    """The number of cores this process may run on (``os.sched_getaffinity``; the CPU
    count where that is missing).

    Example:
        >>> usable_cores() >= 1
        True
    """
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _check(threads: Any, what: str = "threads") -> int | None:
    if threads is None:
        return None
    if not isinstance(threads, numbers.Integral) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"{what} must be a positive integer or None (every usable core), "
                         f"got {threads!r}")
    return int(threads)


def set_num_threads(threads: int | None) -> None:
    """Set the process-wide thread count for kernels and, when comparing, NumPy's BLAS;
    None goes back to the environment's count (``WB_NUM_THREADS``, else
    ``OMP_NUM_THREADS``), else every usable core.

    Example:
        >>> set_num_threads(2); get_num_threads()
        2
        >>> set_num_threads(None)
    """
    global _default
    _default = _check(threads)


def get_num_threads() -> int:
    """The thread count in effect here: the innermost :func:`thread_limit` block, else
    :func:`set_num_threads`'s setting, else the environment's (``WB_NUM_THREADS``, else
    ``OMP_NUM_THREADS``), else :func:`usable_cores`.

    Example:
        >>> get_num_threads() >= 1
        True
    """
    override = getattr(_local, "override", None)
    if override is not None:
        return override
    if _default is not None:
        return _default
    return _env_default if _env_default is not None else usable_cores()


def resolve_threads(threads: int | None) -> int:
    """``threads`` checked (a positive integer), or :func:`get_num_threads` for None.

    Example:
        >>> resolve_threads(3)
        3
        >>> resolve_threads(0)
        Traceback (most recent call last):
        ...
        ValueError: threads must be a positive integer or None (every usable core), got 0
    """
    checked = _check(threads)
    return get_num_threads() if checked is None else checked


@contextmanager
def thread_limit(threads: int | None = None, *, blas: bool = True) -> Iterator[int]:
    """Run the block with ``threads`` threads (None: the current setting) and yield the
    count: kernels called in this thread inside it use that many, and with ``blas=True``
    NumPy's BLAS is limited to it too (threadpoolctl; process-wide while the block runs).

    Example:
        >>> import numpy as np
        >>> with thread_limit(1) as n:
        ...     _ = np.ones((64, 64)) @ np.ones((64, 64))
        >>> n
        1
    """
    n = resolve_threads(threads)
    previous = getattr(_local, "override", None)
    _local.override = n
    try:
        if blas:
            with _blas_controller().limit(limits=n):
                yield n
        else:
            yield n
    finally:
        _local.override = previous


_blas: Any = None


def _blas_controller() -> Any:
    """threadpoolctl's controller of the BLAS libraries loaded (made once: NumPy's is
    loaded with NumPy). Only BLAS: ``threadpool_limits(n, user_api="blas")`` would
    also put the OpenMP runtime's setting back on exit, undoing ours."""
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController

        _blas = ThreadpoolController().select(user_api="blas")
    return _blas


def omp_setter(lib: ctypes.CDLL) -> Any:
    """The ``omp_set_num_threads`` function the shared object ``lib`` sees (its OpenMP
    runtime, found through its dependencies), or None for a library without OpenMP."""
    try:
        setter = lib.omp_set_num_threads
    except AttributeError:
        return None
    setter.argtypes = [ctypes.c_int]
    setter.restype = None
    return setter


def apply_to_library(lib: ctypes.CDLL | Any, threads: int | None = None) -> int:
    """Make the OpenMP parallel loops of the kernels in ``lib`` (a loaded shared object,
    or the setter :func:`omp_setter` returned) use ``threads`` threads (None: the
    current setting) when they are called from this thread; returns the count. A
    library without OpenMP is left alone.

    Example:
        >>> import workbench as wb
        >>> kernel = wb.build(wb.workloads.matmul(8, 8, 8))
        >>> apply_to_library(kernel.library, 1)
        1
    """
    n = resolve_threads(threads)
    setter = omp_setter(lib) if isinstance(lib, ctypes.CDLL) else lib
    if setter is not None:
        setter(n)
    return n


def measurement_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with :data:`OMP_MEASURE_ENV` added where not set:
    the environment the measuring worker starts with.

    Example:
        >>> measurement_env({})["GOMP_SPINCOUNT"]
        '10000'
        >>> measurement_env({"GOMP_SPINCOUNT": "5"})["GOMP_SPINCOUNT"]
        '5'
    """
    env = dict(os.environ if base is None else base)
    wait_set = "OMP_WAIT_POLICY" in env
    for key, value in OMP_MEASURE_ENV.items():
        if not (wait_set and key == "GOMP_SPINCOUNT"):  # an explicit policy wins
            env.setdefault(key, value)
    return env


def _openmp_loaded() -> bool:
    """Whether an OpenMP runtime is already mapped into this process (Linux)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            text = maps.read()
    except OSError:
        return True  # cannot tell: do not touch the environment
    return any(name in text for name in ("libgomp", "libomp", "libiomp"))


def _env_threads(name: str) -> int | None:
    """The positive count environment variable ``name`` gives (OpenMP's first entry of
    a list such as ``"4,2"``), None when unset or not a count."""
    raw = os.environ.get(name, "").split(",")[0].strip()
    if not raw:
        return None
    try:
        return _check(int(raw), name)
    except ValueError:
        if name == ENV_VAR:
            import warnings

            warnings.warn(f"{ENV_VAR}={raw!r} is not a positive integer; ignored",
                          RuntimeWarning, stacklevel=3)
        return None


def _init_from_environment() -> None:
    """Read ``WB_NUM_THREADS`` (else ``OMP_NUM_THREADS``); set the measuring wait policy
    if OpenMP is not loaded yet."""
    global _env_default
    _env_default = _env_threads(ENV_VAR)
    if _env_default is None:
        _env_default = _env_threads("OMP_NUM_THREADS")
    if not _openmp_loaded():
        os.environ.update({k: v for k, v in measurement_env().items()
                           if k in OMP_MEASURE_ENV})


_init_from_environment()
