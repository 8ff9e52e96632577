"""``wb.tune``: search a design space for the fastest schedule, measuring for real.

The loop, batch after batch until ``trials`` candidates are done:

1. the strategy proposes new candidates (random samples of the space, or children of
   the best traces so far); each is a trace replayed on a fresh schedule, never seen
   before (by trace JSON and by generated C source);
2. candidates the database already holds are not measured again: they count as done,
   with their stored result;
3. the rest are compiled in parallel (``build_many``) and measured one at a time in
   an isolated worker process with a timeout, so a crashing or hanging candidate
   comes back as a failed trial and the Python process lives on;
4. each result goes to the database (when given) as soon as it is measured, and to
   the strategy;
5. at the end the ``remeasure`` fastest candidates are measured again, longer
   (:mod:`workbench.search.remeasure`), and the best is chosen from those figures.

Every measurement runs with ``threads`` threads (None: ``wb.get_num_threads()``) and
records its noise; the result counts the noisy trials.

Ctrl-C (KeyboardInterrupt) stops the run cleanly: ``tune`` returns what was measured,
which is also in the database already.

For a CUDA target (``"cuda"``, ``"cuda -arch=sm_90"``, a ``wb.Target`` or its dict) the
default space is :func:`~workbench.search.gpu_space.default_gpu_space`, candidates are
planned for the GPU (one the planner refuses is dropped), built as CUDA and timed on the
GPU with CUDA events in the isolated worker. Without a GPU (or cupy) ``tune`` refuses
before doing anything, unless ``estimate="emulator"``: each candidate then runs once in
the GPU emulator and its memory profile becomes an *estimated* latency
(:mod:`workbench.search.gpu_estimate`), labelled as such in the result, its plot and
the database.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any

from ..ir import IRModule, PrimFunc
from ..runtime.flops import flop_count
from ..schedule import Schedule
from .evolutionary import Candidate, CandidateFactory, EvolutionarySearch, RandomSearch, trace_key
from .result import Trial, TuneResult

if TYPE_CHECKING:  # pragma: no cover
    from ..runtime.cpu import Kernel
    from ..runtime.isolation import RunResult
    from .database import Database

__all__ = ["STRATEGIES", "tune"]

STRATEGIES = ("evolutionary", "random")
ESTIMATES = ("emulator",)

#: Timer settings for measuring a candidate during search (see ``wb.measure``).
SEARCH_TIMER: dict[str, Any] = {"repeat": 3, "min_repeat_ms": 50, "warmup": 1}


def _check_args(trials: Any, strategy: Any, batch_size: Any, timeout: Any,
                threads: Any = None, remeasure: Any = None) -> None:
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"tune: trials must be a positive integer, got {trials!r}")
    if strategy not in STRATEGIES:
        raise ValueError(f"tune: unknown strategy {strategy!r}; choose one of {STRATEGIES}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"tune: batch_size must be a positive integer, got {batch_size!r}")
    if (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
            or not math.isfinite(timeout) or timeout <= 0):
        raise ValueError("tune: timeout must be a positive number of seconds (finite), "
                         f"got {timeout!r}")
    from ..runtime.threads import _check as check_threads

    check_threads(threads, "tune: threads")
    if remeasure is not None and (isinstance(remeasure, bool) or not isinstance(remeasure, int)
                                  or remeasure < 0):
        raise ValueError(f"tune: remeasure must be an integer >= 0 or None, got {remeasure!r}")


def _gpu_target(target: Any, estimate: Any) -> Any:
    """The GPU Target for a CUDA ``target``, None for ``"c"``; checks ``estimate``."""
    if estimate is not None and estimate not in ESTIMATES:
        raise ValueError(f"tune: estimate must be None or one of {ESTIMATES}, got {estimate!r}")
    if isinstance(target, str) and target == "c":
        if estimate is not None:
            raise ValueError("tune: estimate='emulator' estimates GPU latencies; the C "
                             "target is measured (use target='cuda')")
        return None
    from ..target import Target

    try:
        tgt = Target.from_any(target)
    except (TypeError, ValueError) as err:
        raise ValueError(f"tune: target {target!r} is not supported: {err}") from None
    if not tgt.is_gpu:
        return _gpu_target("c", estimate)
    return tgt


def _require_gpu(tgt: Any) -> None:
    """Refuse (GpuUnavailableError) to measure on ``tgt`` without a GPU, naming the two
    ways out."""
    from ..target import GPU_EXTRA_HINT, GpuUnavailableError, require_device

    try:
        require_device("wb.tune")
    except GpuUnavailableError as err:
        raise GpuUnavailableError(
            f"wb.tune(target='{tgt}') measures every candidate on a GPU, and there is none "
            f"here ({err}). Either run on a machine with an NVIDIA GPU and cupy "
            f"({GPU_EXTRA_HINT}; from a checkout: pip install .[gpu]), or pass "
            "estimate='emulator' to rank the candidates by the GPU emulator's memory "
            "profile (an estimated latency, not a measurement)"
        ) from None


def _estimator(tgt: Any) -> Callable[[Candidate], RunResult]:
    """``candidate -> RunResult`` whose measurement is the emulator-profile estimate
    (one sample, in seconds)."""
    from ..codegen.cstyle import CodegenError
    from ..runtime.compiler import CompileError
    from ..runtime.isolation import RunResult
    from ..runtime.timing import Measurement
    from .gpu_estimate import estimate_schedule

    def estimate(cand: Candidate) -> RunResult:
        try:
            est = estimate_schedule(cand.mod, tgt, device=cand.device)
        except (CodegenError, CompileError, ValueError) as err:
            return RunResult("build_error", None, f"{type(err).__name__}: {err}")
        return RunResult("ok", Measurement(samples=(est.seconds,), number=1, repeat=1))

    return estimate


def _as_func(func: Any) -> PrimFunc | IRModule:
    if isinstance(func, Schedule):
        raise TypeError("tune: pass the function to tune (sch.mod), not a Schedule")
    if not isinstance(func, (PrimFunc, IRModule)):
        raise TypeError(f"tune: expected a PrimFunc or an IRModule, got {type(func).__name__}")
    if isinstance(func, IRModule) and len(func) != 1:
        raise ValueError(
            f"tune: the module has {len(func)} functions {func.names}; tune one at a time"
        )
    return func


def _numpy_seconds(reference: Any) -> float | None:
    if reference is None:
        return None
    seconds = getattr(reference, "median", reference)  # a Measurement or seconds
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(
            "tune: numpy_reference must be numpy's time in seconds (or a Measurement), "
            f"got {reference!r}"
        )
    return float(seconds)


def _default_measurer(timeout: float, threads: int | None = None,
                      timer: dict[str, Any] | None = None) -> Callable[[Kernel], RunResult]:
    from ..runtime.isolation import default_worker

    worker = default_worker()
    options = SEARCH_TIMER if timer is None else timer

    def measure(kernel: Kernel) -> RunResult:
        return worker.measure_kernel(kernel, timeout=timeout, threads=threads, **options)

    return measure


def _default_builder(mods: Sequence[IRModule], target: str = "c") -> list:
    from ..runtime.isolation import build_many

    return build_many(list(mods), max_workers=2, target=target)


def _open_database(database: Any) -> Database | None:
    from .database import Database

    if database is None or isinstance(database, Database):
        return database
    if isinstance(database, (str, Path)):
        return Database(database)
    raise TypeError(
        "tune: database must be a wb.Database, a folder path (str or Path) or None, "
        f"got {type(database).__name__}"
    )


def _measure_options(timeout: float, threads: int | None = None) -> dict[str, Any]:
    """Keyword arguments of ``Worker.measure_kernel`` for one candidate (what a remote
    runner gets too; ``threads=None`` lets each machine use its own setting)."""
    return {"timeout": timeout, "threads": threads, **SEARCH_TIMER}


def _pipeline(builder: Any, runner: Any, measurer: Any, target: str, estimated: bool,
              timeout: float, threads: int | None = None) -> Any:
    """A :class:`~workbench.search.distributed.Pipeline` when ``builder`` or ``runner``
    is an Executor (None otherwise); checks both arguments' types."""
    from .distributed import Pipeline, check_stage

    check_stage(builder, "builder")
    check_stage(runner, "runner")
    if runner is not None and measurer is not None:
        raise ValueError("tune: pass runner= or measurer=, not both")
    if not isinstance(builder, Executor) and not isinstance(runner, Executor):
        return None
    if estimated or target != "c":
        raise ValueError("tune: builder/runner executors measure C candidates "
                         f"(target='c'), not target={target!r}"
                         + (" with estimate='emulator'" if estimated else ""))
    return Pipeline(builder, runner if runner is not None else measurer,
                    _measure_options(timeout, threads),
                    lambda mods: _default_builder(mods, target))


def _peak(tgt: Any = None) -> float:
    if tgt is not None:  # the GPU part's FP32 peak (see Target.figures)
        return tgt.figures.peak_fp32_flops / 1e9
    from ..runtime.peak import peak_gflops

    return peak_gflops()


def _make_search(
    strategy: str, factory: CandidateFactory, rng: random.Random, trials: int,
    batch_size: int, cost_model: Any,
) -> RandomSearch:
    if strategy == "random":
        return RandomSearch(factory, rng)
    if cost_model is True:
        from .cost_model import CostModel

        cost_model = CostModel()
    init = min(trials, max(batch_size, trials // 4))
    return EvolutionarySearch(factory, rng, init_random=init, cost_model=cost_model or None)


def tune(
    func: PrimFunc | IRModule,
    space: Callable[[Schedule], Schedule | None] | None = None,
    trials: int = 64,
    strategy: str = "evolutionary",
    target: Any = "c",
    database: Database | str | Path | None = None,
    seed: int | None = None,
    timeout: float = 10.0,
    numpy_reference: float | Any | None = None,
    measurer: Callable[[Kernel], RunResult] | None = None,
    progress: bool = True,
    batch_size: int = 8,
    *,
    cost_model: bool | Any = False,
    builder: Callable[[Sequence[IRModule]], list] | Executor | None = None,
    runner: Callable[[Kernel], RunResult] | Executor | None = None,
    callback: Callable[[Trial], None] | None = None,
    estimate: str | None = None,
    threads: int | None = None,
    remeasure: int | None = None,
) -> TuneResult:
    """Search for the fastest schedule of ``func`` and return a :class:`TuneResult`.

    ``space(sch)`` is a stochastic schedule (it calls ``sch.sample_perfect_tile``,
    ``sample_categorical``... and may return the schedule); None uses the built-in CPU
    space (:func:`workbench.search.space.default_space`). ``strategy`` is
    ``"evolutionary"`` (mutate the decisions of the best traces) or ``"random"``.
    ``trials`` counts candidates measured, failed or found in ``database`` (a
    :class:`~workbench.search.database.Database` or a folder path): those already
    there are not measured again. ``seed`` fixes every random choice (the result's
    ``seed`` tells which one a run without it used). Each candidate is measured in a
    worker process with ``timeout`` seconds; ``measurer(kernel) -> RunResult`` replaces
    that (tests pass a fake one) and ``builder(mods) -> [Kernel | error text]`` the
    parallel compiler; either may be a ``concurrent.futures.Executor`` (a
    ``ProcessPoolExecutor``, a dask cluster's ``client.get_executor()``) that builds or
    measures (isolated, on the machine it runs on) candidates shipped as plain data,
    several at once (see :mod:`workbench.search.distributed`); ``runner`` also takes a
    ``measurer``. ``numpy_reference`` (seconds, or a Measurement) is shown in
    the summary and the plot. ``cost_model=True`` ranks mutated candidates with
    :class:`~workbench.search.cost_model.CostModel` before measuring (or pass a
    model). ``progress`` shows a tqdm bar; Ctrl-C stops the run and returns what was
    measured. ``callback(trial)`` is called after each trial (a live dashboard uses it:
    ``wb.tune(func, callback=dashboard.add_trial)``); an exception it raises propagates
    out of ``tune`` (what was measured so far is already in the database).
    ``target`` is ``"c"`` or a CUDA target (``"cuda"``, ``"cuda -arch=sm_90"``, a
    ``wb.Target``, a dict): see the module docstring; on a machine without a GPU a CUDA
    target needs ``estimate="emulator"`` (estimated latencies, labelled as such
    everywhere) or a ``measurer`` of your own.
    ``threads`` is the thread count every candidate runs with (None:
    ``wb.get_num_threads()``; pass the same to ``wb.measure`` for a NumPy reference).
    ``remeasure``: at the end the ``remeasure`` fastest candidates are measured again
    with more repeats (``remeasure.FINAL_TIMER``) and ``result.best`` comes from those
    figures (``result.final``), a quiet figure preferred over a noisy one (see
    ``TuneResult.best``). None means 3 with the worker and 0 with a ``measurer``
    of your own (pass a count to have it called again); 0 turns it off. Not done for
    estimates or an interrupted run; with executors the finalists are built and
    measured again by the ``builder`` and ``runner``.

    >>> import workbench as wb
    >>> def space(sch):
    ...     i, j, k = sch.get_loops(sch.get_block("C"))
    ...     j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
    ...     sch.reorder(i, j0, k, j1)
    >>> result = wb.tune(wb.workloads.matmul(64, 64, 64), space, trials=3, seed=0,
    ...                  progress=False)
    >>> len(result.trials), len(result.final)  # 3 finalists
    (3, 3)
    >>> result.best.trial in {t.index for t in result.final}
    True
    """
    func = _as_func(func)
    _check_args(trials, strategy, batch_size, timeout, threads, remeasure)
    gpu = _gpu_target(target, estimate)
    if gpu is not None and estimate is None and measurer is None:
        _require_gpu(gpu)  # before any work
    target = "c" if gpu is None else str(gpu)
    estimated = estimate is not None
    numpy_time = _numpy_seconds(numpy_reference)
    if space is None:
        if gpu is not None:
            from .gpu_space import default_gpu_space

            space = default_gpu_space(func, gpu)
        else:
            from .space import default_space

            space = default_space(func, target=target)
    if seed is None:
        seed = random.SystemRandom().getrandbits(32)
    rng = random.Random(seed)
    pipeline = _pipeline(builder, runner, measurer, target, estimated, timeout, threads)
    if pipeline is None and runner is not None:
        measurer = runner
    db = _open_database(database)
    estimator = _estimator(gpu) if estimated else None
    local = measurer is not None or estimated or pipeline is not None
    measure = measurer if local else _default_measurer(timeout, threads)
    build = builder if builder is not None else (lambda mods: _default_builder(mods, target))
    factory = CandidateFactory(func, space, target)
    search = _make_search(strategy, factory, rng, trials, batch_size, cost_model)
    known = {} if db is None else {
        trace_key(r.trace_json): r for r in db.records(func)
        if r.target == target and r.estimated == estimated
    }
    run = _Run(func, db, target, search, flop_count(func), progress, trials, callback,
               estimated)

    start = perf_counter()
    interrupted = exhausted = False
    final: list[Trial] = []
    try:
        while len(run.trials) < trials:
            batch = search.propose(min(batch_size, trials - len(run.trials)))
            if not batch:
                exhausted = True
                break
            fresh = []
            for cand in batch:
                record = known.get(cand.key)
                if record is None:
                    fresh.append(cand)
                else:
                    run.add_known(cand, record)
            if estimator is not None:
                for cand in fresh:
                    run.add_result(cand, estimator(cand))
                continue
            if pipeline is not None:
                pipeline.run_batch(fresh, run.add_result)
                continue
            kernels = build([c.mod for c in fresh]) if fresh else []
            for cand, kernel in zip(fresh, kernels, strict=True):
                run.add_measured(cand, kernel, measure)
        finalists = (3 if measurer is None else 0) if remeasure is None else remeasure
        if finalists and not estimated:
            from .remeasure import FINAL_TIMER, remeasure_finalists

            if pipeline is not None:  # on the machines that measured the search
                final = remeasure_finalists(
                    func, run.trials, list,
                    lambda mod: pipeline.measure_module(mod, FINAL_TIMER), finalists)
            else:
                again = measurer if measurer is not None else _default_measurer(
                    timeout, threads, FINAL_TIMER)
                final = remeasure_finalists(func, run.trials, build, again, finalists)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        run.close()
    return TuneResult(
        func,
        run.trials,
        flops=run.flops,
        wall_time=perf_counter() - start,
        peak=_peak(gpu),
        numpy_time=numpy_time,
        strategy=search.name,
        target=target,
        estimated=estimated,
        interrupted=interrupted,
        exhausted=exhausted,
        seed=seed,
        rejected=factory.rejected,
        duplicates=factory.duplicates,
        final=final,
        threads=threads,
    )


class _Run:
    """Book-keeping of one tune run: trials, database commits, the progress bar."""

    def __init__(self, func, db, target, search, flops, progress, total, callback=None,
                 estimated=False):
        from tqdm.auto import tqdm

        self.estimated = estimated
        self.func = func
        self.db = db
        self.target = target
        self.search = search
        self.flops = flops
        self.trials: list[Trial] = []
        self.callback = callback
        self.best: float | None = None
        self.bar = tqdm(total=total, disable=not progress, unit="trial",
                        desc=f"tune {getattr(func, 'name', '')}".strip())

    def _add(self, cand: Candidate, status: str, latency: float | None, error: str,
             cached: bool, noise: Any = None) -> None:
        from .remeasure import noise_fields

        ok = status == "ok" and latency is not None
        self.trials.append(Trial(len(self.trials), cand.trace, status, latency if ok else None,
                                 cand.decisions, cand.source_hash, error, cached,
                                 cand.origin, self.estimated, **noise_fields(noise)))
        self.search.tell(cand, latency if ok else None)
        if ok and (self.best is None or latency < self.best):
            self.best = latency
        postfix = {}
        if self.best is not None:
            postfix["est_ms" if self.estimated else "best_ms"] = f"{self.best * 1e3:.4f}"
            if self.flops:
                postfix["GFLOPS"] = f"{self.flops / self.best / 1e9:.1f}"
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(1)
        if self.callback is not None:
            self.callback(self.trials[-1])

    def add_known(self, cand: Candidate, record: Any) -> None:
        """A candidate the database already measured: count it with its stored result."""
        latency = record.median if record.status == "ok" else None
        self._add(cand, record.status, latency, record.error, cached=True, noise=record)

    def add_measured(self, cand: Candidate, kernel: Any, measure: Callable) -> None:
        """Measure a built candidate (or record its build error) and commit it."""
        from ..runtime.isolation import RunResult

        if isinstance(kernel, str):
            result = RunResult(status="build_error", measurement=None, error=kernel)
        else:
            result = measure(kernel)
        self.add_result(cand, result)

    def add_result(self, cand: Candidate, result: Any) -> None:
        """Commit a candidate's RunResult (measured or estimated) and count it."""
        if self.db is not None:
            self.db.commit(self.func, cand.trace, result, target=self.target,
                           estimated=self.estimated)
        latency = result.measurement.median if result.ok and result.measurement else None
        noise = result.measurement if latency is not None and not self.estimated else None
        self._add(cand, result.status, latency, result.error, cached=False, noise=noise)

    def close(self) -> None:
        self.bar.close()
