"""The tuning dashboard's state, in plain Python: trials, the best so far, the
selection and the table's filters, and what the table and the plot show.

:class:`DashboardModel` is what :class:`workbench.widgets.dashboard.TuningDashboard`
binds its widgets to; it has no ipywidgets (nor matplotlib) in it, so everything the
dashboard decides can be checked without a browser.

>>> import workbench as wb
>>> from workbench.search.result import Trial
>>> func = wb.workloads.matmul(16, 16, 16)
>>> t = wb.Schedule(func).trace
>>> model = DashboardModel.live(func, numpy_time=3e-6, peak=100.0)
>>> for trial in [Trial(0, t, "ok", 4e-6, "4x4", "a"), Trial(1, t, "crash", None, "2x8", "b",
...                                                         "signal 11"),
...               Trial(2, t, "ok", 2e-6, "8x2", "c", origin="mutant")]:
...     _ = model.add_trial(trial)
>>> print(model.summary())
matmul: 3 trials (1 failed), best 0.002 ms = 4.1 GFLOPS (4.1% of peak), 1.50x numpy
>>> [row.label for row in model.rows()]     # fastest first, failures last
['trial 2 — 0.002 ms (ok)', 'trial 0 — 0.004 ms (ok)', 'trial 1 — failed (crash)']
>>> model.select(2); model.selected.decisions
'8x2'
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any

from ..ir import IRModule, PrimFunc
from ..schedule import Schedule, Trace
from ..search.result import Trial, TuneResult
from .wording import count

if TYPE_CHECKING:  # pragma: no cover
    from ..search.database import Database

__all__ = ["SORT_KEYS", "DashboardModel", "PlotData", "Row", "format_ms"]

#: A best trial above this fraction of the machine's peak is a measuring accident: the
#: header shows no ratio to numpy for it.
IMPLAUSIBLE_PEAK_FRACTION = 1.5

#: Orders the table and the candidate list can be sorted in.
SORT_KEYS = ("latency", "trial", "status")

#: What ``Trial.origin`` means, as the table says it.
_ORIGIN_TEXT = {"random": "random", "mutant": "mutated", "file": "schedule file"}


def _only_workload(database: Database | str | os.PathLike) -> PrimFunc:
    """The one function a database holds, parsed from its stored TVMScript."""
    from ..script import from_script
    from ..search.database import Database

    db = database if isinstance(database, Database) else Database(database)
    workloads = db.workloads
    if len(workloads) != 1:
        names = [w.name for w in workloads]
        raise ValueError(f"the database holds {len(workloads)} workloads {names}; pass the "
                         "function to show: from_database(db, func)")
    parsed = from_script(workloads[0].script)
    func = parsed if isinstance(parsed, PrimFunc) else parsed[parsed.names[0]]
    from ..schedule.file import extern_calls

    names = extern_calls(func)
    if names:
        raise ValueError(f"the database's workload {func.name!r} calls external functions "
                         f"{names}, which would run as native code when built; pass the "
                         "function yourself if you trust it: from_database(db, func)")
    return func


def format_ms(seconds: float) -> str:
    """Seconds as milliseconds with four significant digits.

    >>> format_ms(0.000213), format_ms(0.0123456), format_ms(1.5)
    ('0.213 ms', '12.35 ms', '1500 ms')
    """
    return f"{seconds * 1e3:.4g} ms"


@dataclass(frozen=True)
class Row:
    """One candidate as the table shows it. ``latency_ms``, ``gflops`` and
    ``percent_of_peak`` are None for a failed trial (or an unknown flop count/peak);
    ``origin`` is ``"random"``, ``"mutated"`` or ``""`` (unknown); ``best`` marks the
    fastest trial and ``selected`` the one whose trace is shown; ``noisy``: its
    measurement was noisy."""

    trial: int
    status: str
    latency_ms: float | None
    gflops: float | None
    percent_of_peak: float | None
    decisions: str
    origin: str
    cached: bool
    error: str
    best: bool = False
    selected: bool = False
    noisy: bool = False

    @property
    def ok(self) -> bool:
        return self.latency_ms is not None

    @property
    def label(self) -> str:
        """The candidate list's entry: ``"trial 12 — 0.213 ms (ok)"`` or ``"trial 3 —
        failed (crash)"``."""
        if self.latency_ms is None:
            return f"trial {self.trial} — failed ({self.status})"
        status = f"{self.status}, noisy" if self.noisy else self.status
        return f"trial {self.trial} — {format_ms(self.latency_ms / 1e3)} ({status})"


@dataclass(frozen=True)
class PlotData:
    """What the latency plot draws, in milliseconds.

    ``points`` are the successful trials as ``(trial, ms, origin)``; ``failures`` the
    failed trials' indices, drawn at height ``failure_y`` (above every point);
    ``best_steps`` the best-so-far line as ``(trial, ms)`` (from the first success on);
    ``numpy_ms`` numpy's time (or None); ``log_y`` whether the y axis is logarithmic
    (latencies spanning more than a factor of 10); ``best`` and ``selected`` are
    ``(trial, ms)`` of the fastest and the selected trial (None when there is none or
    it failed).
    """

    title: str
    points: tuple[tuple[int, float, str], ...]
    failures: tuple[int, ...]
    failure_y: float
    best_steps: tuple[tuple[int, float], ...]
    numpy_ms: float | None
    log_y: bool
    best: tuple[int, float] | None
    selected: tuple[int, float] | None

    @property
    def empty(self) -> bool:
        return not self.points and not self.failures


def _func_name(func: PrimFunc | IRModule) -> str:
    return ",".join(func.names) if isinstance(func, IRModule) else func.name


def _seconds(value: Any, what: str) -> float | None:
    """``value`` (seconds, or anything with a ``median`` in seconds) as a float."""
    if value is None:
        return None
    seconds = getattr(value, "median", value)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
            math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"DashboardModel: {what} must be a positive time in seconds "
                         f"(or a Measurement), got {value!r}")
    return float(seconds)


class DashboardModel:
    """Trials of a tuning run, the best so far, the selected trial and the table's
    filters. Build it from a :class:`~workbench.search.result.TuneResult`
    (:meth:`from_result`), a database (:meth:`from_database`) or empty for a run in
    progress (:meth:`live`, then :meth:`add_trial` after each trial).

    ``show_failures`` hides failed trials from :meth:`rows` (the plot always marks
    them); ``sort`` orders the rows: ``"latency"`` (fastest first, failures last),
    ``"trial"`` or ``"status"``. ``version`` grows with every change, so a view can
    tell whether it is up to date.

    >>> import workbench as wb
    >>> from workbench.search.result import Trial
    >>> func = wb.workloads.matmul(16, 16, 16)
    >>> t = wb.Schedule(func).trace
    >>> result = TuneResult(func, [Trial(0, t, "ok", 2e-6, "", "a"),
    ...                            Trial(1, t, "timeout", None, "", "b")],
    ...                     flops=8192, wall_time=1.0)
    >>> model = DashboardModel.from_result(result)
    >>> model.best.index, len(model.rows())
    (0, 2)
    >>> model.show_failures = False; [row.trial for row in model.rows()]
    [0]
    """

    def __init__(
        self,
        func: PrimFunc | IRModule,
        trials: Iterable[Trial] = (),
        *,
        flops: int | None = None,
        peak: float | None = None,
        numpy_time: float | Any | None = None,
        strategy: str = "",
        target: str = "c",
        wall_time: float | None = None,
    ):
        if not isinstance(func, (PrimFunc, IRModule)):
            raise TypeError(f"DashboardModel: expected a PrimFunc or an IRModule, got "
                            f"{type(func).__name__}")
        if flops is not None and (isinstance(flops, bool) or not isinstance(flops, int)
                                  or flops < 0):
            raise ValueError(f"DashboardModel: flops must be a count >= 0, got {flops!r}")
        self.func = func
        self.flops = flops
        self.peak = peak if peak else None
        self._numpy_time = _seconds(numpy_time, "numpy_time")
        self._numpy_noisy = bool(getattr(numpy_time, "noisy", False))
        self.strategy = strategy
        self.target = target
        self._wall_time = wall_time
        self._started = perf_counter()
        self._last_trial_at = self._started
        self._trials: list[Trial] = []
        self._position: dict[int, int] = {}  # trial index -> position in _trials
        self._best_so_far: list[float | None] = []
        self._best: int | None = None  # position of the fastest trial
        self._failures = 0
        self._selected: int | None = None  # trial index
        self._show_failures = True
        self._sort = "latency"
        self.version = 0
        for trial in trials:
            self.add_trial(trial)

    # ------------------------------------------------------------ construction
    @classmethod
    def from_result(cls, result: TuneResult, numpy_time: float | Any | None = None
                    ) -> DashboardModel:
        """The trials of a finished run (``numpy_time`` defaults to the run's).

        >>> import workbench as wb
        >>> func = wb.workloads.matmul(8, 8, 8)
        >>> r = TuneResult(func, [], flops=1024, wall_time=0.5, strategy="random")
        >>> DashboardModel.from_result(r).summary()
        'matmul: 0 trials, no successful trial'
        """
        if not isinstance(result, TuneResult):
            raise TypeError(f"DashboardModel.from_result: expected a TuneResult, got "
                            f"{type(result).__name__}")
        return cls(result.func, result.trials, flops=result.flops, peak=result.peak,
                   numpy_time=result.numpy_time if numpy_time is None else numpy_time,
                   strategy=result.strategy, target=result.target,
                   wall_time=result.wall_time)

    @classmethod
    def from_database(cls, database: Database | str | os.PathLike,
                      func: PrimFunc | IRModule | None = None,
                      numpy_time: float | Any | None = None,
                      target: str | None = None) -> DashboardModel:
        """The records of ``func`` in a tuning database (a ``Database`` or its folder),
        in the order they were measured (see ``TuneResult.from_database``). Without
        ``func`` the database must hold one workload, whose stored TVMScript is parsed
        (never executed) to get it.

        >>> import tempfile, workbench as wb
        >>> with tempfile.TemporaryDirectory() as path:
        ...     model = DashboardModel.from_database(path, wb.workloads.matmul(8, 8, 8))
        >>> model.trials
        ()
        """
        if func is None:
            func = _only_workload(database)
        return cls.from_result(TuneResult.from_database(database, func, target=target),
                               numpy_time=numpy_time)

    @classmethod
    def from_schedule_files(cls, paths: Iterable[str | os.PathLike],
                            numpy_time: float | Any | None = None) -> DashboardModel:
        """Saved schedules of one function as candidates (trial i is ``paths[i]``; its
        latency is the file's measured median, a file without one counts as not
        measured). ``ValueError`` if the files hold different functions.

        >>> import tempfile, os, workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     a = sch.save(os.path.join(d, "a.json"), measurement={"median": 2e-6})
        ...     model = DashboardModel.from_schedule_files([a])
        >>> model.best.latency, model.best.decisions
        (2e-06, 'a.json')
        """
        from ..ir import structural_hash
        from ..schedule.file import read_schedule_file

        func, trials, target = None, [], "c"
        for index, path in enumerate(paths):
            if not isinstance(path, (str, os.PathLike)):
                raise TypeError(f"from_schedule_files: expected schedule file names, got "
                                f"{type(path).__name__}")
            sf = read_schedule_file(path)
            mod = sf.original()
            this = mod[sf.func_name] if sf.func_name else mod[mod.names[0]]
            if func is None:
                func, target = this, sf.target or "c"
            elif structural_hash(this) != structural_hash(func):
                raise ValueError(f"from_schedule_files: {path} schedules {this.name!r}, not "
                                 f"the function of the first file ({func.name!r})")
            median = (sf.measurement or {}).get("median")
            ok = isinstance(median, (int, float)) and median > 0
            trials.append(Trial(index, sf.trace, "ok" if ok else "not_measured",
                                float(median) if ok else None, Path(path).name,
                                sf.result_hash or "", "" if ok else "no measurement in file",
                                origin="file"))
        if func is None:
            raise ValueError("from_schedule_files: no files given")
        from ..runtime.flops import flop_count

        return cls(func, trials, flops=flop_count(func), numpy_time=numpy_time,
                   strategy="saved schedules", target=target)

    @classmethod
    def live(cls, func: PrimFunc | IRModule, numpy_time: float | Any | None = None,
             flops: int | None = None, peak: float | None = None) -> DashboardModel:
        """An empty model for a run in progress: pass :meth:`add_trial` as ``wb.tune``'s
        ``callback``. ``flops`` defaults to the function's flop count and ``peak`` to
        the machine's estimated float32 peak (GFLOPS).

        >>> import workbench as wb
        >>> model = DashboardModel.live(wb.workloads.matmul(8, 8, 8))
        >>> model.flops, model.trials
        (1024, ())
        """
        if not isinstance(func, (PrimFunc, IRModule)):
            raise TypeError(f"DashboardModel.live: expected a PrimFunc or an IRModule, got "
                            f"{type(func).__name__}")
        if flops is None:
            from ..runtime.flops import flop_count

            flops = flop_count(func)
        if peak is None:
            from ..runtime.peak import peak_gflops

            peak = peak_gflops()
        return cls(func, flops=flops, peak=peak, numpy_time=numpy_time)

    # ----------------------------------------------------------------- updates
    def add_trial(self, trial: Trial) -> Trial:
        """Append one trial (what ``wb.tune`` passes its ``callback``) and return it.

        A trial whose index is already taken (a second run on the same model) is
        renumbered to follow the others, so indices stay unique.

        >>> import workbench as wb
        >>> func = wb.workloads.matmul(8, 8, 8)
        >>> model = DashboardModel.live(func)
        >>> t = Trial(0, wb.Schedule(func).trace, "ok", 1e-6, "", "a")
        >>> model.add_trial(t).index, model.add_trial(t).index
        (0, 1)
        """
        if not isinstance(trial, Trial):
            raise TypeError(f"DashboardModel.add_trial: expected a Trial (what wb.tune "
                            f"passes its callback), got {type(trial).__name__}")
        if trial.index in self._position:
            trial = dataclasses.replace(trial, index=max(self._position) + 1)
        pos = len(self._trials)
        self._trials.append(trial)
        self._position[trial.index] = pos
        if trial.ok:
            best = self._trials[self._best] if self._best is not None else None
            if best is None or trial.latency < best.latency:  # type: ignore[operator]
                self._best = pos
        else:
            self._failures += 1
        self._best_so_far.append(None if self._best is None else self._trials[self._best].latency)
        self._last_trial_at = perf_counter()
        self.version += 1
        return trial

    def select(self, index: int | None) -> None:
        """Select the trial with this index (None: no selection).

        >>> import workbench as wb
        >>> DashboardModel.live(wb.workloads.matmul(8, 8, 8)).select(3)
        Traceback (most recent call last):
        ...
        ValueError: select: there is no trial 3 (the dashboard has 0 trials)
        """
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError(f"select: expected a trial index (int) or None, got "
                                f"{type(index).__name__}")
            if index not in self._position:
                n = len(self._trials)
                raise ValueError(f"select: there is no trial {index} (the dashboard has "
                                 f"{count(n, 'trial')})")
        if index != self._selected:
            self._selected = index
            self.version += 1

    @property
    def numpy_time(self) -> float | None:
        """numpy's time for the same computation, in seconds (None: not shown)."""
        return self._numpy_time

    @numpy_time.setter
    def numpy_time(self, value: float | Any | None) -> None:
        self._numpy_time = _seconds(value, "numpy_time")
        self._numpy_noisy = bool(getattr(value, "noisy", False))
        self.version += 1

    @property
    def show_failures(self) -> bool:
        return self._show_failures

    @show_failures.setter
    def show_failures(self, value: bool) -> None:
        value = bool(value)
        if value == self._show_failures:
            return
        self._show_failures = value
        selected = self.selected
        if not value and selected is not None and not selected.ok:
            self._selected = None  # a hidden trial cannot stay selected
        self.version += 1

    @property
    def sort(self) -> str:
        return self._sort

    @sort.setter
    def sort(self, value: str) -> None:
        if value not in SORT_KEYS:
            raise ValueError(f"sort: expected one of {SORT_KEYS}, got {value!r}")
        if value != self._sort:
            self._sort = value
            self.version += 1

    # ------------------------------------------------------------------ values
    @property
    def trials(self) -> tuple[Trial, ...]:
        """Every trial, in the order it was added."""
        return tuple(self._trials)

    def __len__(self) -> int:
        return len(self._trials)

    def trial(self, index: int) -> Trial:
        """The trial with this index (``KeyError`` if there is none)."""
        return self._trials[self._position[index]]

    @property
    def best(self) -> Trial | None:
        """The fastest successful trial (the earliest among equals), or None."""
        return None if self._best is None else self._trials[self._best]

    @property
    def failures(self) -> int:
        return self._failures

    @property
    def selected(self) -> Trial | None:
        return None if self._selected is None else self.trial(self._selected)

    @property
    def selected_trace(self) -> Trace | None:
        """The selected trial's trace (None without a selection)."""
        trial = self.selected
        return None if trial is None else trial.trace

    def replay(self, index: int | None = None) -> Schedule:
        """A fresh schedule of the function with the trial's trace (default: the
        selected one) replayed; ``ScheduleError`` names the step that no longer fits."""
        index = self._selected if index is None else index
        if index is None:
            raise ValueError("replay: no trial is selected")
        sch = Schedule(self.func)
        self.trial(index).trace.apply_to_schedule(sch)
        return sch

    def save_schedule(self, path: str | os.PathLike, index: int | None = None,
                      note: str | None = None) -> Path:
        """Write a trial (default: the selected one, else the best) as a self-contained
        schedule file: the function, the trace, its latency and the target. Open it
        with ``wb.load_schedule``, ``ScheduleEditor(path)`` or ``TraceStepper(path)``.

        >>> import tempfile, os, workbench as wb
        >>> func = wb.workloads.matmul(8, 8, 8)
        >>> model = DashboardModel.live(func, peak=100.0)
        >>> _ = model.add_trial(Trial(0, wb.Schedule(func).trace, "ok", 1e-6, "", "a"))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     sf = wb.read_schedule_file(model.save_schedule(os.path.join(d, "s.json")))
        >>> sf.measurement, sf.target
        ({'median': 1e-06}, 'c')
        """
        from ..ir import structural_hash
        from ..schedule.file import make_schedule_file

        if index is None:
            index = self._selected if self._selected is not None else (
                None if self.best is None else self.best.index)
        if index is None:
            raise ValueError("save_schedule: no trial is selected and none succeeded")
        trial = self.trial(index)
        sch = self.replay(index)
        measurement = {"median": trial.latency} if trial.ok else None
        sf = make_schedule_file(
            self.func, trial.trace, target=self.target, measurement=measurement,
            result_hash=structural_hash(sch.mod),
            note=note if note is not None else f"trial {trial.index} ({trial.status})",
        )
        return sf.write(path)

    def best_so_far(self) -> list[float | None]:
        """For each trial, the best latency (seconds) among it and those before it."""
        return list(self._best_so_far)

    @property
    def wall_time(self) -> float:
        """Seconds of the run: the result's for a finished run, else from the model's
        creation to its last trial."""
        if self._wall_time is not None:
            return self._wall_time
        return self._last_trial_at - self._started

    def gflops(self, latency: float | None) -> float | None:
        """GFLOPS of the function at ``latency`` seconds (None if unknown)."""
        if latency is None or not self.flops or latency <= 0:
            return None
        return self.flops / latency / 1e9

    def summary(self) -> str:
        """One line: trials, failures, the best latency, GFLOPS, % of peak and the
        speed-up over numpy.

        A noisy best trial is marked ``NOISY``, and the ratio to numpy is left out when
        either time is noisy or the best is faster than the machine's peak allows (a
        figure no kernel can reach is a measuring accident): the header says why.
        """
        n = len(self._trials)
        text = f"{_func_name(self.func)}: {count(n, 'trial')}"
        noisy = sum(1 for t in self._trials if getattr(t, "noisy", False))
        notes = ([f"{self._failures} failed"] if self._failures else []) + (
            [f"{noisy} noisy"] if noisy else [])
        if notes:
            text += f" ({', '.join(notes)})"
        best = self.best
        if best is None:
            return text + ", no successful trial"
        text += f", best {best.latency * 1e3:.3f} ms"  # type: ignore[operator]
        if getattr(best, "estimated", False):
            text += " estimated (emulator profile, not measured)"
        if getattr(best, "noisy", False):
            text += " NOISY"
        gflops = self.gflops(best.latency)
        if gflops is not None:
            text += f" = {gflops:.1f} GFLOPS"
            if self.peak:
                text += f" ({100 * gflops / self.peak:.1f}% of peak)"
        if self.numpy_time:
            why = self._no_ratio_reason(best, gflops)
            if why:
                text += f", no ratio to numpy ({why})"
            else:
                text += f", {self.numpy_time / best.latency:.2f}x numpy"  # type: ignore[operator]
        return text

    def _no_ratio_reason(self, best: Trial, gflops: float | None) -> str:
        """Why the ratio to numpy would mislead (``""`` when it is fine to show)."""
        if getattr(best, "noisy", False) or self._numpy_noisy:
            return "noisy measurement"
        if gflops is not None and self.peak and not getattr(best, "estimated", False) \
                and gflops > IMPLAUSIBLE_PEAK_FRACTION * self.peak:
            return "faster than the machine's peak: a measuring accident"
        return ""

    def rows(self) -> list[Row]:
        """The table's rows: filtered by ``show_failures``, ordered by ``sort``."""
        best = self.best
        out = []
        for t in self._trials:
            if not t.ok and not self._show_failures:
                continue
            g = self.gflops(t.latency) if t.ok else None
            out.append(Row(
                trial=t.index,
                status=t.status,
                latency_ms=t.latency * 1e3 if t.ok else None,  # type: ignore[operator]
                gflops=g,
                percent_of_peak=100 * g / self.peak if g is not None and self.peak else None,
                decisions=t.decisions,
                origin=_ORIGIN_TEXT.get(t.origin, t.origin),
                cached=t.cached,
                error=t.error,
                best=best is not None and t.index == best.index,
                selected=t.index == self._selected,
                noisy=bool(getattr(t, "noisy", False)),
            ))
        if self._sort == "latency":
            out.sort(key=lambda r: (r.latency_ms is None, r.latency_ms or 0.0, r.trial))
        elif self._sort == "status":
            out.sort(key=lambda r: (r.status != "ok", r.status, r.trial))
        return out

    def plot_data(self) -> PlotData:
        """What the latency plot shows (see :class:`PlotData`).

        >>> import workbench as wb
        >>> func = wb.workloads.matmul(8, 8, 8)
        >>> t = wb.Schedule(func).trace
        >>> model = DashboardModel(func, [Trial(0, t, "ok", 3e-6, "", "a"),
        ...                               Trial(1, t, "crash", None, "", "b"),
        ...                               Trial(2, t, "ok", 1e-6, "", "c")])
        >>> data = model.plot_data()
        >>> data.best_steps, data.failures, data.log_y
        (((0, 0.003), (1, 0.003), (2, 0.001)), (1,), False)
        """
        points = tuple((t.index, t.latency * 1e3, t.origin)  # type: ignore[operator]
                       for t in self._trials if t.ok)
        failures = tuple(t.index for t in self._trials if not t.ok)
        numpy_ms = self.numpy_time * 1e3 if self.numpy_time else None
        refs = [p[1] for p in points] + ([numpy_ms] if numpy_ms else [])
        steps = tuple((t.index, b * 1e3) for t, b in zip(self._trials, self._best_so_far)
                      if b is not None)
        best = self.best
        selected = self.selected
        n = len(self._trials)
        title = f"{_func_name(self.func)}: {self.strategy or 'search'}, {count(n, 'trial')}"
        return PlotData(
            title=title,
            points=points,
            failures=failures,
            failure_y=max(refs) * 1.3 if refs else 1.0,
            best_steps=steps,
            numpy_ms=numpy_ms,
            log_y=bool(refs) and max(refs) / min(refs) > 10,
            best=None if best is None else (best.index, best.latency * 1e3),  # type: ignore[operator]
            selected=(None if selected is None or not selected.ok
                      else (selected.index, selected.latency * 1e3)),  # type: ignore[operator]
        )

    def as_result(self) -> TuneResult:
        """The trials so far as a :class:`~workbench.search.result.TuneResult` (its
        table, plot and ``best.schedule``)."""
        return TuneResult(self.func, list(self._trials), flops=self.flops,
                          wall_time=self.wall_time, peak=self.peak,
                          numpy_time=self.numpy_time, strategy=self.strategy,
                          target=self.target)

    def __repr__(self) -> str:
        return f"DashboardModel({self.summary()})"
