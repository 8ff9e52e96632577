"""What a tuning run returns: every trial, the best schedule, a table and a plot.

>>> import workbench as wb
>>> func = wb.workloads.matmul(16, 16, 16)
>>> sch = wb.Schedule(func)
>>> r = TuneResult(func, [Trial(0, sch.trace, "ok", 2e-6, "", "abc")], flops=8192,
...                wall_time=1.0, peak=100.0)
>>> r.best.gflops
4.096
>>> print(r)
TuneResult(matmul: 1 trial, best 0.002 ms = 4.1 GFLOPS (4.1% of peak), 1.0 s)
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..ir import IRModule, PrimFunc
from ..schedule import Schedule, ScheduleError, Trace

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    from matplotlib.figure import Figure

    from ..runtime.cpu import Kernel
    from .database import Database

__all__ = ["Best", "Trial", "TuneResult", "figure_svg"]

#: Rows of the table in ``TuneResult._repr_html_`` (the fastest trials).
HTML_TOP_ROWS = 10


@dataclass(frozen=True)
class Trial:
    """One candidate that was measured (or found in the database).

    ``status`` is ``"ok"``, ``"build_error"``, ``"run_error"``, ``"timeout"`` or
    ``"crash"``; ``latency`` the median seconds per run (None when it failed);
    ``cached``: taken from the database instead of measured in this run;
    ``estimated``: ``latency`` is the GPU emulator's estimate
    (``wb.tune(..., estimate="emulator")``), not a measurement.
    ``cv``, ``foreign_load`` and ``noisy`` are the measurement's noise (see
    :class:`~workbench.runtime.timing.Measurement`; None/False when unknown);
    ``remeasured``: the figure comes from the final re-measurement of the best
    candidates (``TuneResult.final``).
    """

    index: int
    trace: Trace
    status: str
    latency: float | None
    decisions: str
    source_hash: str
    error: str = ""
    cached: bool = False
    origin: str = "random"
    estimated: bool = False
    cv: float | None = None
    foreign_load: float | None = None
    noisy: bool = False
    remeasured: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.latency is not None


@dataclass(frozen=True)
class Best:
    """The fastest schedule found: its ``trace``, ``latency`` (median seconds) and
    ``gflops``; ``schedule`` replays the trace on the tuned function.

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(16, 16, 16)
    >>> best = Best(wb.Schedule(func).trace, 1e-6, 8.2, func)
    >>> best.schedule.mod.names
    ['matmul']
    """

    trace: Trace
    latency: float
    gflops: float | None
    func: PrimFunc | IRModule = field(repr=False)
    target: str = "c"
    estimated: bool = False  # latency is an emulator estimate, not a measurement
    remeasured: bool = False  # latency is the final re-measurement (TuneResult.final)
    noisy: bool = False  # that measurement was noisy
    trial: int | None = None  # the index of its Trial
    cv: float | None = None  # that measurement's spread and the CPU others used
    foreign_load: float | None = None  # (see workbench.runtime.noise)

    @property
    def schedule(self) -> Schedule:
        """A new :class:`Schedule` of the function with the trace replayed."""
        sch = Schedule(self.func)
        self.trace.apply_to_schedule(sch)
        return sch

    def build(self) -> Kernel:
        """Build the best schedule (``wb.build(best.schedule.mod, target)``)."""
        from ..runtime.cpu import build

        return build(self.schedule.mod, target=self.target)

    def __repr__(self) -> str:
        gflops = "" if self.gflops is None else f", {self.gflops:.1f} GFLOPS"
        what = " estimated (emulator profile, not measured)" if self.estimated else ""
        what += " re-measured" if self.remeasured else ""
        what += " NOISY" if self.noisy else ""
        return (f"Best({self.latency * 1e3:.4f} ms{what}{gflops}, {len(self.trace)} "
                "instructions)")


def _func_name(func: PrimFunc | IRModule) -> str:
    if isinstance(func, IRModule):
        return ",".join(func.names)
    return func.name


def figure_svg(fig: Figure) -> str:
    """A matplotlib figure as an inline ``<svg>`` element for HTML: no XML prolog, no
    date, ids that do not change between runs, text kept as ``<text>`` (small, and
    searchable). The figure is not drawn on screen and needs no closing.

    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(2, 1))
    >>> _ = fig.add_subplot().plot([0, 1], [1, 0], label="best so far")
    >>> svg = figure_svg(fig)
    >>> svg.startswith("<svg"), svg == figure_svg(fig)
    (True, True)
    """
    import io

    import matplotlib as mpl

    buf = io.StringIO()
    with mpl.rc_context({"svg.hashsalt": "workbench", "svg.fonttype": "none",
                         "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"]}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


_DISPLAY_FIGURE: type | None = None


def display_figure(**kwargs: Any) -> Figure:
    """A matplotlib ``Figure`` (``kwargs`` as for ``Figure``) that a notebook shows when
    it is a cell's value: it has a ``_repr_svg_`` (:func:`figure_svg`), so it needs
    neither pyplot nor the inline backend.

    >>> fig = display_figure(figsize=(2, 1))
    >>> _ = fig.add_subplot().plot([0, 1])
    >>> fig._repr_svg_() == figure_svg(fig)
    True
    """
    global _DISPLAY_FIGURE
    if _DISPLAY_FIGURE is None:
        from matplotlib.figure import Figure

        class DisplayFigure(Figure):
            """A Figure that renders itself as SVG in a notebook."""

            def _repr_svg_(self) -> str:
                return figure_svg(self)

        _DISPLAY_FIGURE = DisplayFigure
    return _DISPLAY_FIGURE(**kwargs)


def _shorten(text: str, limit: int = 80) -> str:
    """The first line of ``text``, cut to ``limit`` characters."""
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _span_seconds(stamps: list[str]) -> float:
    """Seconds between the earliest and the latest ISO time in ``stamps`` (0 if none
    parse)."""
    times = []
    for stamp in stamps:
        try:
            times.append(datetime.fromisoformat(stamp))
        except (TypeError, ValueError):
            continue
    try:
        return (max(times) - min(times)).total_seconds() if times else 0.0
    except TypeError:  # naive and aware times mixed
        return 0.0


class TuneResult:
    """Everything a :func:`~workbench.search.tune` run measured, in trial order.

    ``trials`` is the list of :class:`Trial`; ``best`` the fastest (None when every
    trial failed); ``table`` a pandas DataFrame; ``plot()`` a matplotlib Figure.
    ``wall_time`` is the run's duration in seconds, ``interrupted`` whether it was
    stopped (Ctrl-C) before its trial budget, ``exhausted`` whether the space ran out
    of new candidates first. ``seed`` is the seed the run used (drawn when none was
    given: pass it again to repeat the run); ``rejected`` counts candidates the space
    or a replay refused (``ScheduleError``) and ``duplicates`` those discarded as
    already seen (same trace or same generated C). ``estimated``: the latencies are
    the GPU emulator's estimates (``wb.tune(..., estimate="emulator")``), which the
    summary, the HTML view and the plot say.

    ``final`` holds the re-measured best candidates (``wb.tune`` measures its top few
    again, longer, at the end): when one of them succeeded, ``best`` is the fastest of
    these figures and says ``remeasured``. ``noisy`` lists the noisy trials; the
    summary counts them. ``threads`` is the thread count the run measured with.
    """

    def __init__(
        self,
        func: PrimFunc | IRModule,
        trials: list[Trial],
        *,
        flops: int | None,
        wall_time: float,
        peak: float | None = None,
        numpy_time: float | None = None,
        strategy: str = "",
        target: str = "c",
        interrupted: bool = False,
        exhausted: bool = False,
        seed: int | None = None,
        rejected: int = 0,
        duplicates: int = 0,
        estimated: bool = False,
        final: list[Trial] | None = None,
        threads: int | None = None,
    ):
        self.func = func
        self.final = list(final or [])
        self.threads = threads
        self.estimated = estimated
        self.trials = trials
        self.flops = flops
        self.wall_time = wall_time
        self.peak = peak
        self.numpy_time = numpy_time
        self.strategy = strategy
        self.target = target
        self.interrupted = interrupted
        self.exhausted = exhausted
        self.seed = seed
        self.rejected = rejected
        self.duplicates = duplicates

    @classmethod
    def from_database(
        cls,
        database: Database | str | os.PathLike,
        func: PrimFunc | IRModule,
        *,
        target: str | None = None,
        numpy_time: float | None = None,
        estimated: bool = False,
    ) -> TuneResult:
        """The records of ``func`` in a tuning database as a result: one trial per
        record, in the order they were measured, each marked ``cached`` (it comes from
        the database) with ``origin`` ``""`` (the database does not say). ``database``
        is a :class:`~workbench.search.database.Database` or its folder; ``target``
        keeps only that target's records. ``wall_time`` is the time between the first
        and the last record; ``rejected`` counts records whose trace could not be read.
        ``estimated=True`` takes the emulator-estimated records instead of the measured
        ones (the two are never mixed).

        >>> import tempfile, workbench as wb
        >>> func = wb.workloads.matmul(16, 16, 16)
        >>> sch = wb.Schedule(func)
        >>> _ = sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 4])
        >>> with tempfile.TemporaryDirectory() as path:
        ...     _ = wb.Database(path).commit(func, sch.trace, wb.Measurement(
        ...         samples=(2e-6,), number=1, repeat=1))
        ...     r = TuneResult.from_database(path, func)
        >>> len(r), r.best.latency, r.trials[0].cached
        (1, 2e-06, True)
        """
        from ..runtime.flops import flop_count
        from ..runtime.peak import peak_gflops
        from .database import Database
        from .evolutionary import describe_decisions

        if isinstance(database, (str, os.PathLike)):
            database = Database(database)
        if not isinstance(database, Database):
            raise TypeError("TuneResult.from_database: expected a Database or its folder, "
                            f"got {type(database).__name__}")
        records = [r for r in database.records(func)
                   if (target is None or r.target == target) and r.estimated == estimated]
        trials: list[Trial] = []
        unreadable = 0
        for r in records:
            try:
                trace = r.trace
            except ScheduleError:  # TraceError: an instruction this version cannot read
                unreadable += 1
                continue
            trials.append(Trial(len(trials), trace, r.status, r.median,
                                describe_decisions(trace), "", r.error, cached=True,
                                origin="", estimated=r.estimated,
                                cv=getattr(r, "cv", None),
                                foreign_load=getattr(r, "foreign_load", None),
                                noisy=bool(getattr(r, "noisy", False))))
        targets = {r.target for r in records}
        return cls(
            func,
            trials,
            flops=flop_count(func),
            wall_time=_span_seconds([r.created for r in records]),
            peak=peak_gflops(),
            numpy_time=numpy_time,
            strategy="database",
            target=target or (targets.pop() if len(targets) == 1 else "c"),
            rejected=unreadable,
            estimated=estimated,
        )

    # ------------------------------------------------------------------ values
    def gflops(self, latency: float | None) -> float | None:
        """GFLOPS of the function at ``latency`` seconds (None if unknown)."""
        if latency is None or not self.flops or latency <= 0:
            return None
        return self.flops / latency / 1e9

    @property
    def best(self) -> Best | None:
        """The fastest successful trial (the earliest among equals), or None. When the
        run re-measured its best candidates (``final``), the fastest re-measured one.

        A quiet figure beats a noisy one: when every re-measurement was noisy (the
        machine got busy at the end) but some search figures were quiet, the fastest
        quiet search figure is the best; noisy figures count only when nothing is quiet.

        >>> import workbench as wb
        >>> func = wb.workloads.matmul(16, 16, 16)
        >>> t = wb.Schedule(func).trace
        >>> quiet, noisy = Trial(0, t, "ok", 2e-6, "", "a"), Trial(0, t, "ok", 1e-6, "", "a",
        ...                                                        noisy=True, remeasured=True)
        >>> r = TuneResult(func, [quiet], flops=8192, wall_time=1, final=[noisy])
        >>> r.best.latency, r.best.noisy
        (2e-06, False)
        """
        final = [t for t in self.final if t.ok]
        search = [t for t in self.trials if t.ok]
        pools = ([t for t in final if not t.noisy], [t for t in search if not t.noisy],
                 final, search)
        ok = next((pool for pool in pools if pool), None)
        if not ok:
            return None
        t = min(ok, key=lambda t: (t.latency, t.index))
        return Best(t.trace, t.latency, self.gflops(t.latency), self.func, self.target,
                    self.estimated, remeasured=t.remeasured, noisy=t.noisy, trial=t.index,
                    cv=t.cv, foreign_load=t.foreign_load)

    @property
    def failures(self) -> list[Trial]:
        return [t for t in self.trials if not t.ok]

    @property
    def noisy(self) -> list[Trial]:
        """The trials whose measurement was noisy (see ``Measurement.noisy``)."""
        return [t for t in self.trials if t.noisy]

    def best_so_far(self) -> list[float | None]:
        """For each trial, the best latency among it and the trials before it."""
        out: list[float | None] = []
        best = None
        for t in self.trials:
            if t.ok and (best is None or t.latency < best):
                best = t.latency
            out.append(best)
        return out

    @property
    def table(self) -> pandas.DataFrame:
        """One row per trial: trial, status, median latency (ms), GFLOPS, fraction of
        peak, decisions, source hash, cached (from the database), error, noisy."""
        import pandas as pd

        from .._frame import full_table

        rows = []
        for t in self.trials:
            g = self.gflops(t.latency) if t.ok else None
            rows.append({
                "trial": t.index,
                "status": t.status,
                "latency_ms": t.latency * 1e3 if t.ok else math.nan,
                "gflops": math.nan if g is None else g,
                "fraction_of_peak": (
                    g / self.peak if g is not None and self.peak else math.nan
                ),
                "decisions": t.decisions,
                "source_hash": t.source_hash,
                "cached": t.cached,
                "error": t.error,
                "noisy": t.noisy,
            })
        columns = ["trial", "status", "latency_ms", "gflops", "fraction_of_peak",
                   "decisions", "source_hash", "cached", "error", "noisy"]
        return full_table(pd.DataFrame(rows, columns=columns))

    # -------------------------------------------------------------------- plot
    def plot(self, numpy_time: float | None = None) -> Figure:
        """Latency of every candidate by trial (points), failures as red ``x`` at the
        top, the best-so-far as a step line and, when given (or passed to ``tune`` as
        ``numpy_reference``), numpy's time as a horizontal line. The y axis is
        logarithmic when latencies span more than a factor of 10.

        >>> import workbench as wb
        >>> func = wb.workloads.matmul(16, 16, 16)
        >>> t = wb.Schedule(func).trace
        >>> r = TuneResult(func, [Trial(0, t, "ok", 2e-6, "", "a"),
        ...                       Trial(1, t, "crash", None, "", "b")], flops=8192, wall_time=1)
        >>> fig = r.plot(numpy_time=1e-6)
        >>> [line.get_label() for line in fig.axes[0].get_lines()]
        ['failed (1)', 'best so far', 'numpy']

        The figure shows itself when it ends a notebook cell, even where pyplot was
        never imported (a plain ``Figure`` would show as ``<Figure size ...>`` there):

        >>> fig._repr_svg_().startswith("<svg")
        True
        """
        numpy_time = self.numpy_time if numpy_time is None else numpy_time
        fig = display_figure(figsize=(7, 4), layout="constrained")
        ax = fig.add_subplot()
        ok = [t for t in self.trials if t.ok]
        lat_ms = [t.latency * 1e3 for t in ok]
        refs = lat_ms + ([numpy_time * 1e3] if numpy_time else [])
        ax.scatter([t.index for t in ok], lat_ms, s=18, alpha=0.7, label="candidate")
        fail = self.failures
        if fail:
            top = max(refs) * 1.3 if refs else 1.0
            ax.plot([t.index for t in fail], [top] * len(fail), linestyle="none", marker="x",
                    color="tab:red", markersize=8, label=f"failed ({len(fail)})")
        steps = [(t.index, b * 1e3) for t, b in zip(self.trials, self.best_so_far())
                 if b is not None]
        if steps:
            ax.step([s[0] for s in steps], [s[1] for s in steps], where="post",
                    color="tab:green", label="best so far")
        if numpy_time:
            ax.axhline(numpy_time * 1e3, color="tab:gray", linestyle="--", label="numpy")
        if refs and max(refs) / min(refs) > 10:
            ax.set_yscale("log")
        ax.set_xlabel("trial")
        if self.estimated:
            from .gpu_estimate import ESTIMATE_LABEL

            ax.set_ylabel(f"{ESTIMATE_LABEL} (ms)", fontsize="small")
        else:
            ax.set_ylabel("median latency (ms)")
        ax.set_title(f"{_func_name(self.func)}: {self.strategy or 'search'}, "
                     f"{len(self.trials)} trials"
                     + (" (estimated, not measured)" if self.estimated else ""))
        if self.trials:
            ax.legend(loc="upper right", fontsize="small")
        return fig

    # ----------------------------------------------------------------- display
    def summary(self) -> str:
        """One line: trials, failures, the best latency and GFLOPS, the wall time."""
        n = len(self.trials)
        parts = [f"{n} trial{'s' if n != 1 else ''}"]
        notes = []
        if self.failures:
            notes.append(f"{len(self.failures)} failed")
        if self.noisy:
            notes.append(f"{len(self.noisy)} noisy")
        if notes:
            parts[0] += f" ({', '.join(notes)})"
        best = self.best
        if best is None:
            parts.append("no successful trial")
        else:
            text = f"best {best.latency * 1e3:.3f} ms"
            if self.estimated:
                text = (f"best estimated {best.latency * 1e3:.3f} ms (emulator profile, "
                        "not measured)")
            if best.remeasured:
                text += f" (re-measured, best of {sum(t.ok for t in self.final)})"
            if best.noisy:
                text += " NOISY"
            if best.gflops is not None:
                text += f" = {best.gflops:.1f} GFLOPS"
                if self.peak:
                    text += f" ({100 * best.gflops / self.peak:.1f}% of peak)"
            if self.numpy_time and not best.noisy:
                text += f", {self.numpy_time / best.latency:.2f}x numpy"
            elif self.numpy_time:
                text += " (no ratio to numpy from a noisy measurement)"
            parts.append(text)
        parts.append(f"{self.wall_time:.1f} s")
        if self.interrupted:
            parts.append("interrupted")
        if self.exhausted:
            parts.append("space exhausted")
        return f"{_func_name(self.func)}: " + ", ".join(parts)

    def __repr__(self) -> str:
        return f"TuneResult({self.summary()})"

    def _repr_html_(self) -> str:
        """The summary, the plot (inline SVG) and the fastest trials as a table."""
        parts = [f"<p><b>{html.escape(self.summary())}</b></p>"]
        if self.trials:
            parts.append(f'<div class="wb-tune-plot">{figure_svg(self.plot())}</div>')
        table = self.table
        top = table.sort_values(["latency_ms", "trial"], na_position="last").head(HTML_TOP_ROWS)
        top = top.assign(percent_of_peak=100 * top.fraction_of_peak,
                         error=[_shorten(e) for e in top.error])
        columns = ["trial", "status", "latency_ms", "gflops", "percent_of_peak",
                   "decisions", "cached"]
        if (top.error != "").any():
            columns.append("error")
        if top.noisy.any():
            columns.append("noisy")
        shown = top[columns]
        if self.estimated:  # say it in the column too
            shown = shown.rename(columns={"latency_ms": "estimated_latency_ms"})
        parts.append(shown.to_html(index=False, float_format=lambda x: f"{x:.4g}",
                                   na_rep="", classes="wb-tune-table"))
        if self.final:
            rows = "".join(
                f"<li>trial {t.index}: "
                + (f"{t.latency * 1e3:.4g} ms" if t.ok else html.escape(t.status))
                + (" NOISY" if t.noisy else "") + "</li>" for t in self.final)
            parts.append(f"<p><small>Re-measured at the end (best chosen from these):"
                         f"</small></p><ul class=\"wb-tune-final\">{rows}</ul>")
        if len(table) > HTML_TOP_ROWS:
            parts.append(f"<p><small>The {HTML_TOP_ROWS} fastest of {len(table)} trials; "
                         "<code>result.table</code> has them all.</small></p>")
        return "".join(parts)

    def __len__(self) -> int:
        return len(self.trials)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-serialisable): the summary fields and each trial's row."""
        best = self.best
        return {
            "function": _func_name(self.func),
            "strategy": self.strategy,
            "wall_time": self.wall_time,
            "best_latency": None if best is None else best.latency,
            "best_gflops": None if best is None else best.gflops,
            "best_trace": None if best is None else best.trace.as_json_obj(),
            "peak": self.peak,
            "estimated": self.estimated,
            "best_remeasured": None if best is None else best.remeasured,
            "threads": self.threads,
            "trials": [_trial_dict(t) for t in self.trials],
            "final": [_trial_dict(t) for t in self.final],
        }


def _trial_dict(t: Trial) -> dict[str, Any]:
    return {"trial": t.index, "status": t.status, "latency": t.latency,
            "decisions": t.decisions, "source_hash": t.source_hash, "cached": t.cached,
            "error": t.error, "cv": t.cv, "foreign_load": t.foreign_load,
            "noisy": t.noisy, "remeasured": t.remeasured}
