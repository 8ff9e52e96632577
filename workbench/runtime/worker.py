"""The measurement worker: a child process that loads built kernels and times them.

`workbench.runtime.isolation.Worker` starts it as ``python -m workbench.runtime.worker``
and keeps it alive between measurements. A kernel that crashes (segfault, abort) kills
only this process; one that hangs is killed by the parent after its timeout.

Protocol: JSON lines, never pickle. Requests arrive on stdin, one per line::

    {"so_path": "/.../kernels/<hash>.so", "symbol": "matmul",
     "params": [[[128, 128], "float32"], ...], "number": null, "repeat": 3,
     "min_repeat_ms": 50, "warmup": 1, "flush_cache": false, "seed": 0}

A CUDA kernel's request has a ``"cuda"`` entry instead (its launch plan: the CUDA
source, parameter and intermediate shapes, the launches in order), and is measured with
CUDA events through cupy.

plus ``"id"`` (a token the parent draws for each request) and optionally ``"threads"``
(the OpenMP thread count to run the kernel with; see `workbench.runtime.threads`).

The channel is kept away from the kernel: on start-up the worker moves the request and
reply pipes to high, non-inheritable descriptors (at least `CHANNEL_FD_MIN`), points fd 0
at ``/dev/null`` and fd 1 at stderr, so a kernel that prints, or writes a reply-shaped
line to an inherited descriptor, cannot reach the parent. Every reply carries the
request's ``"id"``; the parent treats a reply with another id as a protocol error
(it restarts the worker and reports the candidate as failed).

The worker first writes ``{"ready": true, "pid": ...}`` once imported; for each request
it writes ``{"id": ..., "phase": "running"}`` when the library is loaded and the arrays
are made (the parent starts its timeout clock there), then one of::

    {"id": ..., "status": "ok", "samples": [...], "number": 10, "repeat": 3,
     "foreign_load": 0.02, "threads": 2}
    {"id": ..., "status": "run_error", "error": "kernel `matmul` returned status 1 ..."}

``foreign_load`` is the CPU time other processes took while the worker measured
(`workbench.runtime.noise`: busy time of the usable cores minus the worker's own).

The worker exits on end of input, and within a second of its parent dying.

Example (what the parent does; see `Worker` for the real thing):
    >>> import json, subprocess, sys
    >>> proc = subprocess.run([sys.executable, "-m", "workbench.runtime.worker"],
    ...                       input='{"id": "r1", "repeat": 1}\\n', capture_output=True,
    ...                       text=True)
    >>> ready, reply = (json.loads(line) for line in proc.stdout.splitlines())
    >>> ready["ready"], reply["id"], reply["status"]
    (True, 'r1', 'run_error')
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import sys
import threading
import time
from typing import Any, TextIO

import numpy as np

from workbench.runtime.threads import apply_to_library, resolve_threads
from workbench.runtime.timing import aligned_copy, measure

_PARENT_POLL_SECONDS = 1.0
#: The request and reply pipes live on descriptors at least this high in the worker.
CHANNEL_FD_MIN = 200


class RequestError(ValueError):
    """A request is malformed (missing keys, wrong types)."""


def random_array(shape: list[int], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Random values like `workbench.runtime.reference.random_args`: floats standard
    normal, signed integers in [-8, 8), unsigned in [0, 8), bools random; the array
    starts at a multiple of `ALIGNMENT` (64) bytes (`aligned_copy`), so a kernel's time
    does not depend on where the allocator happened to put it.

    Example:
        >>> a = random_array([2, 3], "int32", np.random.default_rng(0))
        >>> a.dtype.name, a.ctypes.data % 64
        ('int32', 0)
    """
    dt = np.dtype(dtype)
    shape = tuple(int(s) for s in shape)
    if dt.kind == "f":
        return aligned_copy(rng.standard_normal(shape).astype(dt))
    if dt.kind == "b":
        return aligned_copy(rng.integers(0, 2, shape).astype(bool))
    if dt.kind in "iu":
        return aligned_copy(rng.integers(0 if dt.kind == "u" else -8, 8, shape).astype(dt))
    raise RequestError(f"cannot make random arrays of dtype {dtype!r}")


def _field(request: dict, key: str, kinds: tuple[type, ...], optional: bool = False) -> Any:
    value = request.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        raise RequestError(f"request field {key!r} must be {kinds[0].__name__}, got {value!r}")
    return value


def load_function(so_path: str, symbol: str, nparams: int) -> Any:
    """The C function ``symbol`` of the shared object ``so_path``, typed as the generated
    kernels are: ``int32_t f(void*, ...)`` (nonzero = an allocation failed)."""
    lib = ctypes.CDLL(so_path)
    cfunc = getattr(lib, symbol)
    cfunc.argtypes = [ctypes.c_void_p] * nparams
    cfunc.restype = ctypes.c_int32
    return cfunc


def handle(request: dict, announce: Any = None) -> dict:
    """Run one measurement request and return the reply (never raises for a bad kernel;
    a crash inside the kernel takes the process down, which is the parent's business).

    ``announce()`` is called once the kernel is loaded and its arrays exist, just before
    the first call of the kernel.

    A request with a ``"cuda"`` launch plan (a CUDA kernel: source and launches, plain
    data) is measured on the GPU by `workbench.runtime.cuda.handle_cuda_request`.
    """
    if "cuda" in request:
        from workbench.runtime.cuda import handle_cuda_request

        return handle_cuda_request(request, announce)
    try:
        so_path = _field(request, "so_path", (str,))
        symbol = _field(request, "symbol", (str,))
        params = _field(request, "params", (list,))
        number = _field(request, "number", (int,), optional=True)
        repeat = _field(request, "repeat", (int,))
        min_repeat_ms = _field(request, "min_repeat_ms", (int, float))
        warmup = _field(request, "warmup", (int,))
        flush_cache = _field(request, "flush_cache", (bool,))
        seed = _field(request, "seed", (int,))
        threads = resolve_threads(_field(request, "threads", (int,), optional=True))
        rng = np.random.default_rng(seed)
        arrays = [random_array(shape, dtype, rng) for shape, dtype in params]
    except (RequestError, TypeError, ValueError) as err:
        return {"status": "run_error", "error": f"bad measurement request: {err}"}
    try:
        cfunc = load_function(so_path, symbol, len(arrays))
    except (OSError, AttributeError) as err:
        return {"status": "run_error", "error": f"cannot load `{symbol}` from {so_path}: {err}"}
    pointers = [a.ctypes.data for a in arrays]
    apply_to_library(ctypes.CDLL(so_path), threads)  # the kernel's OpenMP threads
    if announce is not None:
        announce()
    status = cfunc(*pointers)  # the first warmup run, with its status checked
    if status != 0:
        from workbench.runtime.cpu import status_error

        err = status_error(symbol, status, ctypes.CDLL(so_path))
        return {
            "status": "run_error",
            "error": f"kernel `{symbol}` returned status {status}: {type(err).__name__}: {err}",
        }
    try:
        m = measure(
            cfunc,
            *pointers,
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            warmup=max(warmup - 1, 0),
            flush_cache=flush_cache,
            threads=threads,
        )
    except (TypeError, ValueError) as err:
        return {"status": "run_error", "error": f"bad measurement request: {err}"}
    return {"status": "ok", "samples": list(m.samples), "number": m.number, "repeat": m.repeat,
            "foreign_load": m.foreign_load, "threads": m.threads}


def _watch_parent(parent: int) -> None:
    """Exit this process once the parent is gone (the kernel may be stuck in a loop)."""
    while True:
        time.sleep(_PARENT_POLL_SECONDS)
        if os.getppid() != parent:
            os._exit(3)


def _send(out: TextIO, message: dict) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _private_channel() -> tuple[TextIO, TextIO]:
    """Move stdin and stdout (the pipes to the parent) to non-inheritable descriptors
    at least `CHANNEL_FD_MIN`, then point fd 0 at /dev/null and fd 1 at stderr: a
    kernel reading, printing or writing to a low descriptor never touches the channel.
    Returns (requests, replies)."""
    sys.stdout.flush()
    try:
        requests_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, CHANNEL_FD_MIN)
        replies_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, CHANNEL_FD_MIN)
    except OSError:  # a descriptor limit below CHANNEL_FD_MIN: ids still guard the replies
        requests_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        replies_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # a kernel's printf goes to stderr, not into the replies
    sys.stdout = sys.stderr
    return (os.fdopen(requests_fd, "r", encoding="utf-8"),
            os.fdopen(replies_fd, "w", encoding="utf-8"))


def main() -> int:
    """Serve requests from the parent until it closes the request pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop us
    requests, out = _private_channel()
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    _send(out, {"ready": True, "pid": os.getpid()})
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as err:
            _send(out, {"status": "run_error", "error": f"unreadable request: {err}"})
            continue
        if not isinstance(request, dict):
            _send(out, {"status": "run_error", "error": "a request must be a JSON object"})
            continue
        tag = {"id": request["id"]} if isinstance(request.get("id"), str) else {}
        reply = handle(request, announce=lambda tag=tag: _send(out, {**tag, "phase": "running"}))
        _send(out, {**tag, **reply})
    return 0


if __name__ == "__main__":
    sys.exit(main())
