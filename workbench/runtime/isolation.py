"""Measure kernels in a separate worker process, so a crash or a hang cannot take the
Jupyter kernel down; build many candidates in parallel.

A `Worker` keeps one ``python -m workbench.runtime.worker`` process alive between
measurements (64 trials pay one Python start-up, not 64). A kernel that segfaults or
aborts kills the worker: the result is ``RunResult(status="crash", error="worker died
with signal SIGSEGV ...")`` and a fresh worker is started. A kernel that runs past
``timeout`` seconds gets its worker (process group, OpenMP threads and all) killed and
comes back as ``status="timeout"``.

Requests and replies are tagged with a fresh id each; a reply with another id (a
kernel that wrote to the channel, say) is a protocol error: the worker is restarted and
the candidate comes back as ``status="crash"``. The worker keeps the channel on high,
non-inheritable descriptors, away from the kernel's (see `workbench.runtime.worker`).
Every measurement runs with the thread setting (``threads=``, else
`workbench.runtime.threads.get_num_threads`) and records the foreign CPU load the
worker saw, so its `Measurement` says whether it was noisy.

Example:
    >>> import workbench as wb
    >>> kernel = wb.build(wb.workloads.matmul(32, 32, 32))
    >>> with Worker() as worker:
    ...     result = worker.measure_kernel(kernel, repeat=2, min_repeat_ms=1)
    >>> result.status, result.measurement.repeat, result.measurement.flops
    ('ok', 2, 65536)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..codegen.cstyle import CodegenError
from ..ir.stmt import IRModule, PrimFunc
from .compiler import CompileError
from .cpu import Kernel, KernelArgumentError, build
from .threads import measurement_env, resolve_threads
from .timing import Measurement, _validate

__all__ = [
    "STATUSES",
    "KernelSignature",
    "MeasureError",
    "RunResult",
    "Worker",
    "WorkerStartError",
    "build_many",
    "default_worker",
    "kernel_signature",
    "measure_isolated",
]

#: Every `RunResult.status`.
STATUSES = ("ok", "build_error", "run_error", "timeout", "crash")
_STDERR_TAIL_CHARS = 1500
_CLOSE_GRACE_SECONDS = 2.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True)
class RunResult:
    """What became of one candidate: ``status`` is one of `STATUSES`; ``measurement``
    is set exactly when the status is ``"ok"``; ``error`` says what went wrong otherwise.

    Example:
        >>> RunResult("timeout", None, "kernel `f` did not finish within 1 s").ok
        False
    """

    status: str
    measurement: Measurement | None
    error: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"RunResult status must be one of {STATUSES}, got {self.status!r}")
        if (self.status == "ok") != (self.measurement is not None):
            raise ValueError(
                f"RunResult(status={self.status!r}) must "
                + ("carry a Measurement" if self.status == "ok" else "have measurement=None")
            )

    @property
    def ok(self) -> bool:
        """True when the candidate was measured."""
        return self.status == "ok"


class MeasureError(RuntimeError):
    """An isolated measurement failed (build error, run error, timeout or crash).

    ``result`` is the failed `RunResult`.

    Example:
        >>> err = MeasureError(RunResult("crash", None, "worker died with signal SIGSEGV"))
        >>> str(err)
        'measurement failed (crash): worker died with signal SIGSEGV'
    """

    def __init__(self, result: RunResult) -> None:
        super().__init__(f"measurement failed ({result.status}): {result.error}")
        self.result = result


class WorkerStartError(RuntimeError):
    """The worker process could not be started (its Python or imports are broken)."""


@dataclass(frozen=True)
class KernelSignature:
    """What the worker needs to call a built function: the shared object, the C symbol,
    and one ``(shape, dtype)`` per parameter; plus the name and flop count. A CUDA
    kernel's signature carries its launch plan (``cuda``: plain JSON data, the source
    and the launches; see `workbench.runtime.cuda.LaunchPlan`) instead of a library."""

    so_path: str
    symbol: str
    params: tuple[tuple[tuple[int, ...], str], ...]
    name: str
    flops: int | None
    cuda: dict | None = field(default=None, compare=False)


def kernel_signature(
    kernel: Kernel | KernelSignature, function: str | None = None
) -> KernelSignature:
    """The signature of ``kernel``'s default function (or of ``function``), taken from
    what `wb.build` loaded: the library path, the symbol and the parameter list.
    A `KernelSignature` is returned as it is (to measure a hand-written shared object).

    Example:
        >>> import workbench as wb
        >>> sig = kernel_signature(wb.build(wb.workloads.matmul(8, 8, 8)))
        >>> sig.symbol, sig.params[0]
        ('matmul', ((8, 8), 'float32'))
    """
    if isinstance(kernel, KernelSignature):
        return kernel
    from .cuda import CudaKernel

    if isinstance(kernel, CudaKernel):
        return _cuda_signature(kernel, function)
    if not isinstance(kernel, Kernel):
        raise TypeError(
            f"isolated measurement needs a Kernel from wb.build, got {type(kernel).__name__}"
        )
    func = _static_function(kernel, function)
    # Kernel keeps the CDLL, and each KernelFunction its ctypes function and parameters.
    return KernelSignature(
        so_path=str(kernel._lib._name),
        symbol=func._cfunc.__name__,
        params=tuple((tuple(p.shape), p.dtype.name) for p in func._params),
        name=func.name,
        flops=func.flops,
    )


def _static_function(kernel: Any, function: str | None):
    """The kernel's function ``function`` (default: its only one, else ``main``); one
    with symbolic shapes is refused (the worker makes arrays of static shapes)."""
    if function is None:
        names = kernel.function_names
        function = names[0] if len(names) == 1 else "main"
    func = kernel[function]
    if func.func.shape_vars:
        names = [v.name for v in func.func.shape_vars]
        raise ValueError(
            f"kernel {func.name!r} has symbolic shapes {names}: isolated measurement needs "
            "static shapes; measure it in this process, or build func.specialize({...})"
        )
    return func


def _cuda_signature(kernel: Any, function: str | None) -> KernelSignature:
    func = _static_function(kernel, function)
    plan = func.launch_plan()
    return KernelSignature(
        so_path=f"cuda:{kernel.source_hash}",
        symbol=func.name,
        params=plan.params,
        name=func.name,
        flops=func.flops,
        cuda=plan.to_json(),
    )


class _Died(Exception):
    """The worker's reply pipe reached end of file."""


class _TimedOut(Exception):
    """No reply from the worker before the deadline."""


class _ProtocolError(Exception):
    """A reply that does not answer the request in flight (wrong or missing id)."""


def _check_timeout(timeout: Any, what: str) -> float:
    """``timeout`` as a float: a finite number of seconds > 0 (inf and nan refused)."""
    if (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout) or timeout <= 0):
        raise ValueError(f"{what}: timeout must be a finite number of seconds > 0, "
                         f"got {timeout!r}")
    return float(timeout)


class _Process:
    """One worker process: its pipes, a private stderr file and a reply line buffer."""

    def __init__(self, python: str) -> None:
        self.stderr: IO[bytes] = tempfile.TemporaryFile(prefix="wb-worker-", suffix=".log")
        env = measurement_env()  # a short OpenMP spin: see workbench.runtime.threads
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + path if path else "")
        self.popen = subprocess.Popen(
            [python, "-m", "workbench.runtime.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            start_new_session=True,  # its own process group: killpg takes all its threads
            env=env,
            bufsize=0,
        )
        self.buffer = b""
        self.ready = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, message: dict) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write((json.dumps(message) + "\n").encode())

    def receive(self, deadline: float) -> dict:
        """The next reply line as a dict; `_TimedOut` past ``deadline``, `_Died` on EOF."""
        assert self.popen.stdout is not None
        fd = self.popen.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _TimedOut
            if not poller.poll(max(1, int(remaining * 1000))):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise _Died
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except json.JSONDecodeError as err:
            raise _Died(f"unreadable reply {line[:200]!r}: {err}") from None
        if not isinstance(message, dict):
            raise _Died(f"unreadable reply {line[:200]!r}")
        return message

    def stderr_size(self) -> int:
        return os.fstat(self.stderr.fileno()).st_size

    def stderr_since(self, offset: int) -> str:
        """What the worker wrote to stderr after ``offset`` (its last characters)."""
        size = self.stderr_size()
        start = max(offset, size - _STDERR_TAIL_CHARS)
        data = os.pread(self.stderr.fileno(), size - start, start) if size > start else b""
        return data.decode(errors="replace").strip()

    def kill(self) -> None:
        """Kill the whole process group now and reap it. Once the worker has been reaped
        its id may belong to someone else, so it is only signalled before that."""
        if self.popen.returncode is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.popen.wait()
        self._close_files()

    def stop(self) -> None:
        """Ask the worker to exit (end of input); kill it if it does not within 2 s."""
        try:
            if self.popen.stdin is not None:
                self.popen.stdin.close()
            self.popen.wait(timeout=_CLOSE_GRACE_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def _close_files(self) -> None:
        for stream in (self.popen.stdin, self.popen.stdout, self.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


def _stop_process(holder: list[_Process | None]) -> None:
    proc = holder[0]
    holder[0] = None
    if proc is not None:
        proc.stop()


def _exit_reason(returncode: int | None) -> str:
    if returncode is None:
        return "worker stopped answering"
    if returncode < 0:
        sig = signal.Signals(-returncode)
        return f"worker died with signal {sig.name} ({signal.strsignal(sig) or sig.name})"
    return f"worker exited with status {returncode}"


class Worker:
    """A persistent measurement process, restarted automatically after a crash or a
    timeout. Measurements are serialised (one at a time); use it as a context manager
    or call `close()`.

    ``startup_timeout`` bounds the worker's start-up (Python and numpy imports), which is
    not counted in a measurement's ``timeout``.

    Example:
        >>> import workbench as wb
        >>> worker = Worker()
        >>> kernel = wb.build(wb.workloads.matmul(16, 16, 16))
        >>> worker.measure_kernel(kernel, repeat=1, min_repeat_ms=0).ok
        True
        >>> worker.close()
    """

    def __init__(self, *, python: str | None = None, startup_timeout: float = 60.0) -> None:
        self.python = python or sys.executable
        self.startup_timeout = float(startup_timeout)
        self.starts = 0  # worker processes started so far (1 + restarts)
        self._lock = threading.Lock()
        self._holder: list[_Process | None] = [None]
        self._finalizer = weakref.finalize(self, _stop_process, self._holder)
        self._start()

    # -- process management ---------------------------------------------------------

    def _start(self) -> None:
        """Launch a fresh process; it imports in the background until `_ready()`."""
        self._holder[0] = _Process(self.python)
        self.starts += 1

    def _replace(self, proc: _Process) -> None:
        proc.kill()
        self._start()

    def _ready(self) -> _Process:
        """The current process, restarted if it died since the last request, once it has
        said it is ready."""
        proc = self._holder[0]
        if proc is None:
            raise RuntimeError("this Worker is closed")
        if proc.ready and not proc.alive():
            self._replace(proc)
            proc = self._holder[0]
            assert proc is not None
        if not proc.ready:
            try:
                hello = proc.receive(time.monotonic() + self.startup_timeout)
            except (_Died, _TimedOut) as err:
                detail = proc.stderr_since(0)
                self._replace(proc)
                raise WorkerStartError(
                    f"the measurement worker ({self.python} -m workbench.runtime.worker) "
                    f"did not start: {err or type(err).__name__}"
                    + (f"\n{detail}" if detail else "")
                ) from None
            if hello.get("ready") is not True:
                self._replace(proc)
                raise WorkerStartError(f"the measurement worker said {hello!r} on start-up")
            proc.ready = True
        return proc

    @property
    def pid(self) -> int | None:
        """Process id of the current worker (None once closed)."""
        proc = self._holder[0]
        return None if proc is None else proc.pid

    def close(self) -> None:
        """Stop the worker process. The Worker cannot measure afterwards."""
        with self._lock:
            self._finalizer()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._holder[0] is None else f"pid={self.pid}"
        return f"Worker({state}, starts={self.starts})"

    # -- measuring ------------------------------------------------------------------

    def measure_kernel(
        self,
        kernel: Kernel | KernelSignature,
        *,
        number: int | None = None,
        repeat: int = 3,
        min_repeat_ms: float = 50,
        warmup: int = 1,
        flush_cache: bool = False,
        timeout: float = 10.0,
        seed: int = 0,
        function: str | None = None,
        threads: int | None = None,
    ) -> RunResult:
        """Time the built ``kernel`` in the worker on random arrays of its parameters'
        shapes and dtypes (made from ``seed``), with `wb.measure`'s semantics. A
        `KernelSignature` (a shared object, a symbol, parameter shapes) works too.

        ``timeout`` (seconds) bounds the kernel's runs: loading the library and making
        the arrays do not count; it must be a finite number > 0. Past it, or when the
        kernel crashes the worker, the result is a failed `RunResult` and the next call
        gets a fresh worker. Returns ``RunResult("run_error", ...)`` when the kernel
        reports an allocation failure. ``threads`` (None: `wb.get_num_threads()`) is the
        OpenMP thread count the kernel runs with. Bad arguments (``warmup=-1``,
        ``timeout=float("inf")``) raise ValueError before anything is sent.

        Example:
            >>> import workbench as wb
            >>> k = wb.build(wb.workloads.matmul(16, 16, 16))
            >>> default_worker().measure_kernel(k, repeat=2, min_repeat_ms=1).measurement.repeat
            2
        """
        timeout = _check_timeout(timeout, "Worker.measure_kernel")
        _validate(number, repeat, min_repeat_ms, warmup, None)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        threads = resolve_threads(threads)
        sig = kernel_signature(kernel, function)
        request = {
            "id": "",  # drawn for each request in _run
            "threads": threads,
            "so_path": sig.so_path,
            "symbol": sig.symbol,
            "params": [[list(shape), dtype] for shape, dtype in sig.params],
            "number": number,
            "repeat": repeat,
            "min_repeat_ms": min_repeat_ms,
            "warmup": warmup,
            "flush_cache": bool(flush_cache),
            "seed": seed,
        }
        if sig.cuda is not None:
            request["cuda"] = sig.cuda
        with self._lock:
            return self._run(request, sig, timeout)

    def _run(self, request: dict, sig: KernelSignature, timeout: float) -> RunResult:
        proc = self._ready()
        offset = proc.stderr_size()
        what = f"kernel `{sig.symbol}` ({Path(sig.so_path).name})"
        running = False
        request = {**request, "id": secrets.token_hex(8)}
        try:
            proc.send(request)
            # first the worker loads the library and makes the arrays, then it runs
            reply = _answer(proc.receive(time.monotonic() + self.startup_timeout), request)
            if reply.get("phase") == "running":
                running = True
                reply = _answer(proc.receive(time.monotonic() + timeout), request)
        except _ProtocolError as err:
            self._replace(proc)
            return RunResult("crash", None, f"protocol error while running {what}: {err}; "
                             "the worker was restarted")
        except _TimedOut:
            self._replace(proc)
            doing = (
                f"did not finish within {timeout:g} s"
                if running
                else f"was not loaded within {self.startup_timeout:g} s"
            )
            return RunResult("timeout", None, f"{what} {doing}; the worker was killed")
        except (_Died, BrokenPipeError) as err:
            try:
                returncode: int | None = proc.popen.wait(timeout=_CLOSE_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                returncode = None
            detail = proc.stderr_since(offset)
            self._replace(proc)
            reason = _exit_reason(returncode) if returncode is not None else str(err)
            message = f"{reason} while running {what}"
            return RunResult("crash", None, message + (f"; stderr: {detail}" if detail else ""))
        except BaseException:  # KeyboardInterrupt: the reply stream is out of step now
            self._replace(proc)
            raise
        return _result_from_reply(reply, sig)


def _answer(reply: dict, request: dict) -> dict:
    """``reply`` when it answers ``request`` (same id), else `_ProtocolError`."""
    if reply.get("id") != request["id"]:
        raise _ProtocolError(f"a reply with id {str(reply.get('id'))[:40]!r} came for "
                             f"request {request['id']!r}")
    return reply


def _result_from_reply(reply: dict, sig: KernelSignature) -> RunResult:
    status = reply.get("status")
    if status == "ok":
        try:
            threads = reply.get("threads")
            m = Measurement(
                samples=tuple(reply["samples"]),
                number=int(reply["number"]),
                repeat=int(reply["repeat"]),
                flops=sig.flops,
                foreign_load=reply.get("foreign_load"),
                threads=None if threads is None else int(threads),
            )
        except (KeyError, TypeError, ValueError) as err:
            return RunResult("run_error", None, f"malformed reply from the worker: {err}")
        return RunResult("ok", m)
    if status in STATUSES:
        return RunResult(status, None, str(reply.get("error", "")))
    return RunResult("run_error", None, f"malformed reply from the worker: {reply!r}")


_default: Worker | None = None
_default_lock = threading.Lock()


def default_worker() -> Worker:
    """The process's shared `Worker`, started on first use (stopped at exit).

    Example:
        >>> default_worker() is default_worker()
        True
    """
    global _default
    with _default_lock:
        if _default is None or _default.pid is None:
            _default = Worker()
        return _default


def _check_args(sig: KernelSignature, args: Sequence[Any]) -> None:
    if len(args) != len(sig.params):
        raise KernelArgumentError(
            f"kernel {sig.name!r} takes {len(sig.params)} arrays, got {len(args)}"
        )
    for i, (arr, (shape, dtype)) in enumerate(zip(args, sig.params)):
        # numpy arrays, or GPU arrays (the CUDA Array Interface) for a CUDA kernel
        array_like = isinstance(arr, np.ndarray) or (
            sig.cuda is not None and hasattr(arr, "__cuda_array_interface__")
        )
        if not array_like or tuple(arr.shape) != shape or np.dtype(arr.dtype).name != dtype:
            got = (
                f"{np.dtype(arr.dtype).name}{list(arr.shape)}"
                if array_like
                else type(arr).__name__
            )
            raise KernelArgumentError(
                f"kernel {sig.name!r}: argument {i} must be a {dtype} array of shape "
                f"{shape}, got {got}"
            )


def measure_isolated(
    kernel: Kernel,
    *args: np.ndarray,
    number: int | None = None,
    repeat: int = 5,
    min_repeat_ms: float = 100,
    warmup: int = 1,
    flops: int | None = None,
    flush_cache: bool = False,
    timeout: float = 10.0,
    threads: int | None = None,
) -> Measurement:
    """`wb.measure(..., isolated=True)`: time ``kernel`` in `default_worker()` and return
    the `Measurement`, or raise `MeasureError` (carrying the `RunResult`) when it crashed,
    timed out or failed. The worker runs on its own random arrays; ``args``, when given,
    are only checked against the kernel's parameters (they stay in this process).
    ``threads`` (None: `wb.get_num_threads()`) is the kernel's OpenMP thread count;
    ``timeout`` a finite number of seconds > 0.

    Example:
        >>> import workbench as wb
        >>> k = wb.build(wb.workloads.matmul(16, 16, 16))
        >>> measure_isolated(k, repeat=2, min_repeat_ms=1).repeat
        2
    """
    timeout = _check_timeout(timeout, "measure_isolated")
    _validate(number, repeat, min_repeat_ms, warmup, flops)
    sig = kernel_signature(kernel)
    if args:
        _check_args(sig, args)
    result = default_worker().measure_kernel(
        kernel,
        number=number,
        repeat=repeat,
        min_repeat_ms=min_repeat_ms,
        warmup=warmup,
        flush_cache=flush_cache,
        timeout=timeout,
        threads=threads,
    )
    if not result.ok:
        raise MeasureError(result)
    m = result.measurement
    assert m is not None
    if flops is not None:
        m = dataclasses.replace(m, flops=int(flops))
    return m


def _build_one(candidate: Any, target: str) -> Kernel | str:
    mod = getattr(candidate, "mod", candidate)  # a Schedule builds its current module
    if not isinstance(mod, IRModule | PrimFunc):
        raise TypeError(
            "build_many takes Schedules, IRModules or PrimFuncs, got "
            f"{type(candidate).__name__}"
        )
    try:
        return build(mod, target=target)
    except (CodegenError, CompileError) as err:
        return f"{type(err).__name__}: {err}"


def build_many(
    mods: Iterable[Any], max_workers: int = 2, target: str = "c"
) -> list[Kernel | str]:
    """Build candidates (Schedules, IRModules or PrimFuncs) in parallel threads (gcc
    runs in subprocesses) and return, in order, a `Kernel` or an error string for each.

    A `CodegenError` or `CompileError` becomes the string; any other exception is a bug
    and propagates.

    Example:
        >>> import workbench as wb
        >>> kernels = build_many([wb.workloads.matmul(8, 8, 8), wb.workloads.matmul(4, 4, 4)])
        >>> [k.flops for k in kernels]
        [1024, 128]
    """
    items = list(mods)
    if max_workers < 1:
        raise ValueError(f"max_workers must be >= 1, got {max_workers!r}")
    if len(items) <= 1 or max_workers == 1:
        return [_build_one(m, target) for m in items]
    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        return list(pool.map(lambda m: _build_one(m, target), items))
