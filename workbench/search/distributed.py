"""Tuning across machines: ``wb.tune(..., builder=executor, runner=executor)``.

Any :class:`concurrent.futures.Executor` can build and measure candidates: a local
``ProcessPoolExecutor``, or a dask.distributed cluster through
``Client("tcp://scheduler:8786").get_executor()`` (as MetaSchedule's RPC builder and
runner serve TVM). ``tune`` keeps the search, the progress bar and the database in
this process; the executors only see plain data.

What runs where:

* **here** (the tuning process): the search proposes candidates and generates each
  one's C source (:func:`build_request`: the source, the C symbol, the parameter
  shapes and dtypes, the flop count; plain data);
* **on the builder** (:func:`build_task`): the source is compiled with the C compiler
  and flags of the machine the task runs on (``-march=native``: build where you
  measure, or on identical machines) and comes back as an *artifact*: the ``.so``
  bytes, their sha256 and the signature the measuring worker needs, or the compiler's
  error text. The default builder (``builder=None``) builds here, as without
  executors, and the artifact is read from the local kernel cache
  (:func:`artifact_from_kernel`);
* **on the runner** (:func:`run_task`): the artifact is written into that machine's
  cache (``<sha256>.so``, checked against its hash, an existing file too) and timed in
  an isolated worker process (:class:`~workbench.runtime.isolation.Worker`, one per
  runner process, so a crashing or hanging kernel is a failed trial and the runner
  lives on) with the search's timer settings and timeout. The result comes back as
  plain data (:func:`result_to_data`: status, samples and the other measurement
  fields, error text) and is committed to the local database as it arrives.

Nothing here unpickles anything read from a file: work items are dicts of strings,
numbers and bytes that the executor moves between our own processes.

A batch of candidates is submitted at once: builds run in parallel on the builder,
and each built candidate is handed to the runner as soon as it is built, so several
candidates are measured on several runner processes at once. Run one runner process
with one thread per machine (``dask worker --nworkers 1 --nthreads 1``) when the
timings must be comparable: two measurements on one machine disturb each other.

**Lost workers.** dask reschedules the tasks of a worker that died (up to its
``distributed.scheduler.allowed-failures``). A task that still fails for want of a
worker (``KilledWorker``, a cancelled future, a ``BrokenProcessPool``...) is submitted
again, up to :data:`RESUBMITS` times; after that the candidate becomes a failed trial
saying so. Every candidate ends as exactly one trial. An executor that refuses new
work (shut down, or a broken process pool) stops the run with
:class:`ExecutorBrokenError` once the candidates of the batch are recorded as failed.

Example (a local process pool as the runner; a dask cluster is used the same way):
    >>> import workbench as wb
    >>> from concurrent.futures import ProcessPoolExecutor
    >>> from multiprocessing import get_context
    >>> def space(sch):
    ...     i, j, k = sch.get_loops(sch.get_block("C"))
    ...     sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
    >>> with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
    ...     result = wb.tune(wb.workloads.matmul(32, 32, 32), space, trials=2, seed=0,
    ...                      runner=pool, progress=False)
    >>> [t.status for t in result.trials]
    ['ok', 'ok']
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    BrokenExecutor,
    CancelledError,
    Executor,
    Future,
    wait,
)
from dataclasses import fields
from pathlib import Path
from typing import Any

__all__ = [
    "RESUBMITS",
    "ExecutorBrokenError",
    "Pipeline",
    "artifact_from_kernel",
    "build_request",
    "build_task",
    "check_stage",
    "result_from_data",
    "result_to_data",
    "run_task",
    "store_artifact",
]

#: How many times a candidate's build or run task is submitted again after its worker
#: was lost (beyond what the executor retries itself).
RESUBMITS = 2
_POLL_SECONDS = 0.2


class ExecutorBrokenError(RuntimeError):
    """The builder or runner executor refuses new work (it was shut down, or a process
    pool lost a process and is broken). The candidates of the batch are in the results
    (and the database) as failed trials."""


# -- work items (plain data) -------------------------------------------------------------


def build_request(mod: Any) -> dict | str:
    """What a builder needs to compile the candidate ``mod`` (its only function, or
    ``main``): the generated C ``source``, the ``symbol`` to call, the ``params`` as
    ``[[shape...], dtype]`` lists, the function ``name`` and its ``flops``. Returns the
    error text instead when no C can be generated.

    >>> import workbench as wb
    >>> req = build_request(wb.workloads.matmul(8, 8, 8))
    >>> req["symbol"], req["params"][0], req["flops"]
    ('matmul', [[8, 8], 'float32'], 1024)
    """
    import numpy as np

    from ..codegen.c import as_ir_module, generate_c_source
    from ..codegen.cstyle import CodegenError
    from ..ir.transform import lower
    from ..runtime.flops import flop_count

    mod = as_ir_module(mod)
    names = mod.names
    name = names[0] if len(names) == 1 else "main"
    func = mod[name]
    if func.shape_vars:
        return (f"build_request: function {name!r} has symbolic shapes; remote "
                "measurement needs static shapes")
    try:
        generated = generate_c_source(lower(mod))
    except CodegenError as err:
        return f"{type(err).__name__}: {err}"
    return {
        "source": generated.text,
        "symbol": generated.symbols[name],
        "params": [[[int(d) for d in p.shape], np.dtype(p.dtype).name] for p in func.params],
        "name": func.name,
        "flops": flop_count(func),
    }


def _signature_fields(request: dict) -> dict:
    return {key: request[key] for key in ("symbol", "params", "name", "flops")}


def build_task(request: dict) -> dict:
    """Runs on the builder: compile ``request["source"]`` (see :func:`build_request`)
    with this machine's compiler and default flags. Returns the artifact ``{"so":
    bytes, "sha256": hex, "symbol", "params", "name", "flops"}``, or ``{"error":
    text}`` when the compiler refuses the source.

    >>> import workbench as wb
    >>> art = build_task(build_request(wb.workloads.matmul(8, 8, 8)))
    >>> art["sha256"] == hashlib.sha256(art["so"]).hexdigest()
    True
    """
    from ..runtime.compiler import CompileError, CompilerNotFoundError, compile_shared

    try:
        path = compile_shared(request["source"])
        data = Path(path).read_bytes()
    except (CompileError, CompilerNotFoundError, OSError) as err:
        return {"error": f"{type(err).__name__}: {err}"}
    return {"so": data, "sha256": hashlib.sha256(data).hexdigest(),
            **_signature_fields(request)}


def artifact_from_kernel(kernel: Any) -> dict:
    """The artifact of a kernel built here (``wb.build``): its shared object's bytes,
    their hash and its signature, ready for :func:`run_task` on another machine.

    >>> import workbench as wb
    >>> artifact_from_kernel(wb.build(wb.workloads.matmul(8, 8, 8)))["symbol"]
    'matmul'
    """
    from ..runtime.isolation import kernel_signature

    sig = kernel_signature(kernel)
    if sig.cuda is not None:
        raise ValueError("artifact_from_kernel: CUDA kernels cannot be shipped to a runner "
                         "yet; measure them with the local worker")
    data = Path(sig.so_path).read_bytes()
    return {
        "so": data,
        "sha256": hashlib.sha256(data).hexdigest(),
        "symbol": sig.symbol,
        "params": [[list(shape), dtype] for shape, dtype in sig.params],
        "name": sig.name,
        "flops": sig.flops,
    }


def _artifact_dir() -> Path:
    from ..runtime.compiler import default_cache_dir

    return default_cache_dir().parent / "artifacts"


def _file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def store_artifact(artifact: dict, cache_dir: str | os.PathLike | None = None) -> Path:
    """Write the artifact's shared object as ``<sha256>.so`` in ``cache_dir`` (default:
    ``artifacts`` beside the kernel cache) and return its path. The bytes must match the
    artifact's hash (``ValueError`` otherwise); a file already there is reused only when
    its contents have that hash too, else it is replaced (atomically).

    >>> import workbench as wb, tempfile
    >>> art = artifact_from_kernel(wb.build(wb.workloads.matmul(8, 8, 8)))
    >>> with tempfile.TemporaryDirectory() as d:
    ...     store_artifact(art, d).name == art["sha256"] + ".so"
    True
    """
    data, digest = artifact["so"], artifact["sha256"]
    if not isinstance(data, bytes) or hashlib.sha256(data).hexdigest() != digest:
        raise ValueError("store_artifact: the shared object does not match its sha256 "
                         f"{str(digest)[:16]}... (damaged in transit?)")
    directory = Path(cache_dir) if cache_dir is not None else _artifact_dir()
    path = directory / f"{digest}.so"
    if path.is_file() and _file_sha256(path) == digest:
        return path
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".artifact-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def result_to_data(result: Any) -> dict:
    """A ``RunResult`` as plain data: ``status``, ``error`` and the measurement's
    fields (``samples``, ``number``, ``repeat``, ``flops`` and any noise figures), or
    None. :func:`result_from_data` turns it back.

    >>> from workbench.runtime.isolation import RunResult
    >>> result_to_data(RunResult("timeout", None, "too slow"))
    {'status': 'timeout', 'error': 'too slow', 'measurement': None}
    """
    m = result.measurement
    data = None
    if m is not None:
        data = {f.name: getattr(m, f.name) for f in fields(m) if f.init}
        data["samples"] = list(data["samples"])
    return {"status": result.status, "error": result.error, "measurement": data}


def result_from_data(data: dict) -> Any:
    """The ``RunResult`` of :func:`result_to_data`'s dict (fields this version does not
    know are dropped).

    >>> from workbench.runtime.isolation import RunResult
    >>> result_from_data(result_to_data(RunResult("crash", None, "SIGSEGV"))).status
    'crash'
    """
    from ..runtime.isolation import RunResult
    from ..runtime.timing import Measurement

    m = data.get("measurement")
    if m is None:
        return RunResult(data["status"], None, str(data.get("error", "")))
    known = {f.name for f in fields(Measurement) if f.init}
    values = {k: v for k, v in m.items() if k in known}
    values["samples"] = tuple(values["samples"])
    return RunResult(data["status"], Measurement(**values), str(data.get("error", "")))


def run_task(artifact: dict, options: dict, request_id: str = "") -> dict:
    """Runs on the runner: store ``artifact`` in this machine's cache (hash checked)
    and time it in this process's isolated measuring worker with ``options`` (the
    keyword arguments of ``Worker.measure_kernel``: ``timeout``, ``repeat``,
    ``min_repeat_ms``, ``warmup``...). Returns :func:`result_to_data` of the result.
    ``request_id`` only makes each submission distinct (an executor may otherwise
    merge two identical calls into one).

    >>> import workbench as wb
    >>> art = artifact_from_kernel(wb.build(wb.workloads.matmul(8, 8, 8)))
    >>> run_task(art, {"timeout": 10, "repeat": 1, "min_repeat_ms": 0})["status"]
    'ok'
    """
    del request_id
    from ..runtime.isolation import KernelSignature, RunResult, default_worker

    try:
        path = store_artifact(artifact)
    except (OSError, ValueError) as err:
        return result_to_data(RunResult("run_error", None, f"{type(err).__name__}: {err}"))
    sig = KernelSignature(
        so_path=str(path),
        symbol=artifact["symbol"],
        params=tuple((tuple(shape), dtype) for shape, dtype in artifact["params"]),
        name=artifact["name"],
        flops=artifact["flops"],
    )
    return result_to_data(default_worker().measure_kernel(sig, **options))


def _kernel_from_artifact(artifact: dict, mod: Any) -> Any:
    """A `Kernel` of ``mod`` loaded here from an artifact built elsewhere (for a
    ``measurer`` of your own that takes kernels)."""
    from ..codegen.c import as_ir_module, generate_c_source
    from ..ir.transform import lower
    from ..runtime.compiler import load_library
    from ..runtime.cpu import Kernel

    mod = as_ir_module(mod)
    lowered = lower(mod)
    generated = generate_c_source(lowered)
    return Kernel(mod, generated.text, load_library(store_artifact(artifact)),
                  generated.symbols, lowered)


# -- the stages --------------------------------------------------------------------------


class _Module:
    """A bare module in the place of a candidate (``measure_module``)."""

    def __init__(self, mod: Any) -> None:
        self.mod = mod


def check_stage(value: Any, what: str) -> Executor | Callable | None:
    """``value`` as a ``builder`` / ``runner``: None, a ``concurrent.futures.Executor``
    (dask: ``client.get_executor()``) or a callable; anything else is a TypeError.

    >>> check_stage(None, "runner") is None
    True
    """
    if value is None or isinstance(value, Executor) or callable(value):
        return value
    hint = (" (for a dask cluster pass client.get_executor(), not the Client)"
            if type(value).__name__ == "Client" else "")
    raise TypeError(
        f"tune: {what} must be a concurrent.futures.Executor (a ProcessPoolExecutor, "
        f"dask's client.get_executor()) or a callable, got {type(value).__name__}{hint}"
    )


def _lost_errors() -> tuple[type[BaseException], ...]:
    """Exceptions of a future that mean its worker was lost, not that the task failed."""
    kinds: list[type[BaseException]] = [CancelledError, BrokenExecutor]
    if "distributed" in sys.modules:  # only a dask executor raises these
        from distributed import KilledWorker
        from distributed.comm.core import CommClosedError

        kinds += [KilledWorker, CommClosedError]
    return tuple(kinds)


class Pipeline:
    """Builds and measures batches of candidates through a builder and a runner, each
    an Executor, a callable (``builder(mods) -> [Kernel | error text]``,
    ``runner(kernel) -> RunResult``) or None (build here with ``default_builder``;
    measure here in the isolated worker with ``options``).

    :meth:`run_batch` calls ``commit(candidate, RunResult)`` exactly once per candidate,
    in the order results arrive.
    """

    def __init__(self, builder: Any, runner: Any, options: dict,
                 default_builder: Callable[[Sequence[Any]], list],
                 resubmits: int = RESUBMITS) -> None:
        self.builder = check_stage(builder, "builder")
        self.runner = check_stage(runner, "runner")
        self.options = dict(options)
        self._batch_options = self.options  # the options of the batch under way
        self.default_builder = default_builder
        self.resubmits = resubmits
        self.lost = _lost_errors()
        self.broken: str | None = None

    # -- submitting ----------------------------------------------------------------

    def _submit(self, pending: dict, stage: str, cand: Any, payload: Any, attempt: int,
                commit: Callable) -> None:
        executor = self.builder if stage == "build" else self.runner
        try:
            if stage == "build":
                fut = executor.submit(build_task, payload)
            else:
                fut = executor.submit(run_task, payload, self._batch_options, uuid.uuid4().hex)
        except (BrokenExecutor, RuntimeError) as err:
            role = "builder" if stage == "build" else "runner"
            self.broken = (f"the {role} executor refused the candidate: "
                           f"{type(err).__name__}: {err}")
            commit(cand, self._failed(stage, self.broken))
            return
        pending[fut] = (stage, cand, payload, attempt)

    @staticmethod
    def _failed(stage: str, error: str) -> Any:
        from ..runtime.isolation import RunResult

        return RunResult("build_error" if stage == "build" else "crash", None, error)

    def _built(self, pending: dict, cand: Any, built: Any, commit: Callable) -> None:
        """The build stage's outcome for ``cand``: a Kernel, an artifact or an error."""
        from ..runtime.isolation import RunResult

        if isinstance(built, str) or (isinstance(built, dict) and "error" in built):
            error = built if isinstance(built, str) else str(built["error"])
            commit(cand, RunResult("build_error", None, error))
        elif isinstance(self.runner, Executor):
            artifact = built if isinstance(built, dict) else artifact_from_kernel(built)
            self._submit(pending, "run", cand, artifact, 0, commit)
        elif self.runner is not None:  # a measurer of kernels
            kernel = _kernel_from_artifact(built, cand.mod) if isinstance(built, dict) \
                else built
            commit(cand, self.runner(kernel))
        elif isinstance(built, dict):
            commit(cand, result_from_data(run_task(built, self._batch_options)))
        else:
            from ..runtime.isolation import default_worker

            commit(cand, default_worker().measure_kernel(built, **self._batch_options))

    # -- one batch -----------------------------------------------------------------

    def run_batch(self, cands: Sequence[Any], commit: Callable[[Any, Any], None],
                  timer: dict | None = None) -> None:
        """Build and measure ``cands`` (anything with a ``.mod``); ``commit(cand,
        RunResult)`` once for each. ``timer`` overrides some of the measuring options
        (``repeat``, ``min_repeat_ms``...) for this batch. Raises
        :class:`ExecutorBrokenError` after the batch when an executor refused work; on
        any exception (Ctrl-C) the futures still pending are cancelled."""
        pending: dict[Future, tuple[str, Any, Any, int]] = {}
        self._batch_options = {**self.options, **(timer or {})}
        try:
            if isinstance(self.builder, Executor):
                for cand in cands:
                    request = build_request(cand.mod)
                    if isinstance(request, str):
                        self._built(pending, cand, request, commit)
                    else:
                        self._submit(pending, "build", cand, request, 0, commit)
            elif cands:
                build = self.builder or self.default_builder
                for cand, built in zip(cands, build([c.mod for c in cands]), strict=True):
                    self._built(pending, cand, built, commit)
            while pending:
                done, _ = wait(list(pending), timeout=_POLL_SECONDS,
                               return_when=FIRST_COMPLETED)
                for fut in done:
                    self._finish(pending, fut, commit)
        finally:
            for fut in pending:
                fut.cancel()
            self._batch_options = self.options
        if self.broken is not None:
            raise ExecutorBrokenError(
                f"tune: {self.broken}; the candidates it could not take are recorded as "
                "failed trials"
            )

    def measure_module(self, mod: Any, timer: dict | None = None) -> Any:
        """Build and measure one module through the builder and the runner (with
        ``timer`` overriding some measuring options) and return its ``RunResult``:
        what re-measures a finalist on the machines that measured the search.

        >>> import workbench as wb
        >>> from workbench.search.tune import _default_builder
        >>> pipe = Pipeline(None, None, {"timeout": 10, "repeat": 1, "min_repeat_ms": 0},
        ...                 _default_builder)
        >>> pipe.measure_module(wb.workloads.matmul(8, 8, 8), {"repeat": 2}).measurement.repeat
        2
        """
        out: list = []
        self.run_batch([_Module(mod)], lambda _, result: out.append(result), timer)
        (result,) = out
        return result

    def _finish(self, pending: dict, fut: Future, commit: Callable) -> None:
        stage, cand, payload, attempt = pending.pop(fut)
        try:
            value = fut.result()
        except self.lost as err:
            what = f"{type(err).__name__}: {err}".rstrip(": ")
            if attempt < self.resubmits and self.broken is None:
                self._submit(pending, stage, cand, payload, attempt + 1, commit)
            else:
                tries = f"{attempt + 1} attempt" + ("s" if attempt else "")
                commit(cand, self._failed(
                    stage, f"the {stage} task lost its worker on {tries} (last: {what}); "
                           "the candidate was not measured"))
            return
        except (ImportError, AttributeError) as err:
            raise RuntimeError(
                f"tune: the {stage} task failed on the executor ({type(err).__name__}: "
                f"{err}); do its workers have this version of workbench installed?"
            ) from err
        if stage == "build":
            self._built(pending, cand, value, commit)
        else:
            commit(cand, result_from_data(value))
