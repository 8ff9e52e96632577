"""The end of a tuning run: measure the fastest candidates again, longer, and pick the
best from those figures.

During search each candidate is timed briefly (``SEARCH_TIMER``), once, so on a busy
machine a candidate can win by luck (a quiet moment) or lose by bad luck. At the end,
:func:`remeasure_finalists` measures the ``count`` fastest distinct candidates again
with :data:`FINAL_TIMER` (more repeats, longer ones), one after another in the same
conditions; ``TuneResult.best`` is then the fastest of these re-measured figures, and
the result says so.

>>> import workbench as wb
>>> from workbench.runtime.isolation import RunResult
>>> from workbench.search.result import Trial
>>> func = wb.workloads.matmul(16, 16, 16)
>>> t = wb.Schedule(func).trace
>>> trials = [Trial(0, t, "ok", 3e-6, "", "a"), Trial(1, t, "crash", None, "", "b")]
>>> fake = lambda kernel: RunResult("ok", wb.Measurement(samples=(2e-6,), number=1,
...                                                    repeat=1))
>>> final = remeasure_finalists(func, trials, lambda mods: list(mods), fake, count=3)
>>> [(f.index, f.latency, f.remeasured) for f in final]
[(0, 2e-06, True)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from ..ir import IRModule, PrimFunc
from ..schedule import Schedule, ScheduleError
from .result import Trial

__all__ = ["FINAL_TIMER", "noise_fields", "remeasure_finalists"]

#: Timer settings for re-measuring the finalists (see ``wb.measure``): more and longer
#: repeats than during search.
FINAL_TIMER: dict[str, Any] = {"repeat": 10, "min_repeat_ms": 100, "warmup": 2}


def noise_fields(measurement: Any) -> dict[str, Any]:
    """``cv``, ``foreign_load`` and ``noisy`` of a Measurement (or of anything with
    them) as Trial fields; the defaults for None.

    >>> import workbench as wb
    >>> noise_fields(wb.Measurement(samples=(1.0, 3.0), number=1, repeat=2))
    {'cv': 0.5, 'foreign_load': None, 'noisy': True}
    """
    if measurement is None:
        return {"cv": None, "foreign_load": None, "noisy": False}
    return {"cv": getattr(measurement, "cv", None),
            "foreign_load": getattr(measurement, "foreign_load", None),
            "noisy": bool(getattr(measurement, "noisy", False))}


def _finalists(trials: Sequence[Trial], count: int) -> list[Trial]:
    """The ``count`` fastest successful trials, one per distinct trace."""
    seen: set[str] = set()
    out: list[Trial] = []
    for t in sorted((t for t in trials if t.ok), key=lambda t: (t.latency, t.index)):
        key = t.source_hash or t.trace.as_json()
        if key in seen:
            continue
        seen.add(key)
        out.append(t)
        if len(out) == count:
            break
    return out


def remeasure_finalists(
    func: PrimFunc | IRModule,
    trials: Sequence[Trial],
    build: Callable[[Sequence[IRModule]], list],
    measure: Callable[[Any], Any],
    count: int = 3,
) -> list[Trial]:
    """Measure the ``count`` fastest successful ``trials`` again and return them as new
    :class:`Trial` records (same index and trace, ``remeasured=True``, the new latency
    and noise; a candidate that fails now keeps its failure). ``build(mods)`` gives a
    kernel (or an error text) per module and ``measure(kernel)`` a ``RunResult``, as in
    :func:`~workbench.search.tune`. Candidates are built before any is measured, so
    they are timed back to back.
    """
    finalists = _finalists(trials, count)
    mods, kept = [], []
    for t in finalists:
        sch = Schedule(func)
        try:
            t.trace.apply_to_schedule(sch)
        except ScheduleError:  # a trace from a database this version cannot replay
            continue
        mods.append(sch.mod)
        kept.append(t)
    kernels = build(mods) if mods else []
    out = []
    for t, kernel in zip(kept, kernels, strict=True):
        if isinstance(kernel, str):
            out.append(dataclasses.replace(t, status="build_error", latency=None,
                                           error=kernel, remeasured=True, cached=False))
            continue
        result = measure(kernel)
        m = result.measurement if result.ok else None
        out.append(dataclasses.replace(
            t, status=result.status, latency=None if m is None else m.median,
            error=result.error, remeasured=True, cached=False, **noise_fields(m)))
    return out
