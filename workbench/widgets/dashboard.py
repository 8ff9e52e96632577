"""``TuningDashboard``: watch a tuning run and explore its candidates.

A header line sums the run up (trials, failures, the best latency, GFLOPS, % of the
machine's peak, speed-up over numpy); a plot shows every candidate's latency by trial,
failures as ``x`` at the top, the best so far as a step line and numpy's time as a
dashed line; a table lists the candidates (the best row highlighted, failures with
their status and error). Picking a candidate in the list below the table steps
through its trace on the function in a :class:`~workbench.widgets.stepper.TraceStepper`.

The state lives in :class:`~workbench.widgets.dashboard_model.DashboardModel`; plot
and table are HTML strings (the plot an inline SVG) in ``widgets.HTML``, so tests and
notebooks read them without a browser.

Follow a run live::

    dash = TuningDashboard.live(func, numpy_time=numpy_seconds)
    display(dash)
    result = wb.tune(func, trials=64, callback=dash.add_trial)
    dash.refresh()                       # the last redraw (or: result = dash.tune(...))

>>> import workbench as wb
>>> from workbench.search.result import Trial, TuneResult
>>> func = wb.workloads.matmul(16, 16, 16)
>>> sch = wb.Schedule(func)
>>> _ = sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 4])
>>> result = TuneResult(func, [Trial(0, sch.trace, "ok", 2e-6, "4x4", "a"),
...                            Trial(1, sch.trace, "crash", None, "2x8", "b", "signal 11")],
...                     flops=8192, wall_time=1.0, peak=100.0)
>>> dash = TuningDashboard(result)
>>> dash.selected.index                  # the best trial is selected at first
0
>>> "<svg" in dash.plot_html, "signal 11" in dash.table_html
(True, True)
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..ir import IRModule, PrimFunc, structural_hash
from ..schedule import ScheduleError, Trace, TraceError
from ..search.result import Trial, TuneResult, figure_svg
from .dashboard_model import DashboardModel, PlotData, Row, format_ms
from .stepper import TraceStepper
from .wording import count

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["TuningDashboard", "make_trace_stepper", "render_plot", "render_table",
           "draw_plot"]

#: Seconds between two redraws of plot and table while trials arrive.
REDRAW_INTERVAL = 0.5
#: At most this share of a live run's time goes to redrawing plot and table.
REDRAW_SHARE = 0.05
#: Rows the table shows (the fastest first by default); the list below has all.
MAX_ROWS = 100

_SORTS = (("fastest first", "latency"), ("trial order", "trial"), ("status", "status"))
_FONT = ("font-family:var(--jp-ui-font-family,sans-serif);"
         "font-size:var(--jp-ui-font-size1,13px);color:var(--jp-ui-font-color1,#1f1f1f)")
_ERROR = "color:var(--jp-error-color1,#c62828)"
_BEST_BG = "background:rgba(46,125,50,0.16)"
_SELECTED = "box-shadow:inset 4px 0 0 var(--jp-brand-color1,#1976d2);font-weight:bold"


def make_trace_stepper(trace: Trace, func: PrimFunc | IRModule,
                       syntax: str = "classic") -> TraceStepper:
    """The view of a selected trial: a ``TraceStepper`` over its trace on ``func``
    (the dashboard then moves it to the last step: the candidate's IR).

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(8, 8, 8)
    >>> stepper = make_trace_stepper(wb.Schedule(func).trace, func)
    >>> type(stepper).__name__
    'TraceStepper'
    """
    return TraceStepper(trace, func, syntax=syntax)


# ---------------------------------------------------------------------------
# rendering (plain functions: data in, HTML out)


def draw_plot(data: PlotData, figsize: tuple[float, float] = (8.0, 3.4)) -> Figure:
    """The latency plot as a matplotlib Figure (not attached to pyplot, so nothing to
    close): candidates as points (mutated ones in their own colour), failures as red
    ``x`` at the top, the best so far as a green step line, numpy's time dashed, the
    best trial starred and the selected one ringed.

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(8, 8, 8)
    >>> t = wb.Schedule(func).trace
    >>> model = DashboardModel(func, [Trial(0, t, "ok", 2e-6, "", "a"),
    ...                               Trial(1, t, "crash", None, "", "b")], numpy_time=1e-6)
    >>> ax = draw_plot(model.plot_data()).axes[0]
    >>> [line.get_label() for line in ax.get_lines()]
    ['failed (1)', 'best so far', 'numpy']
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=figsize)
    # fixed margins: a layout engine would double the time of every redraw
    fig.subplots_adjust(left=0.09, right=0.8, bottom=0.14, top=0.9)
    ax = fig.add_subplot()
    mutated = [p for p in data.points if p[2] == "mutant"]
    others = [p for p in data.points if p[2] != "mutant"]
    if others:
        label = "random" if mutated else "candidate"
        ax.scatter([p[0] for p in others], [p[1] for p in others], s=18, alpha=0.7,
                   color="tab:blue", label=f"{label} ({len(others)})")
    if mutated:
        ax.scatter([p[0] for p in mutated], [p[1] for p in mutated], s=18, alpha=0.7,
                   color="tab:purple", label=f"mutated ({len(mutated)})")
    if data.failures:
        ax.plot(data.failures, [data.failure_y] * len(data.failures), linestyle="none",
                marker="x", color="tab:red", markersize=8,
                label=f"failed ({len(data.failures)})")
    if data.best_steps:
        xs = [s[0] for s in data.best_steps]
        ys = [s[1] for s in data.best_steps]
        last = max(data.points[-1][0] if data.points else 0,
                   data.failures[-1] if data.failures else 0)
        if last > xs[-1]:  # carry the line to the last trial
            xs.append(last)
            ys.append(ys[-1])
        ax.step(xs, ys, where="post", color="tab:green", label="best so far")
    if data.numpy_ms:
        ax.axhline(data.numpy_ms, color="tab:gray", linestyle="--", label="numpy")
    if data.best is not None:
        ax.scatter([data.best[0]], [data.best[1]], marker="*", s=140, color="tab:green",
                   edgecolors="black", linewidths=0.5, zorder=3, label="best")
    if data.selected is not None:
        ax.scatter([data.selected[0]], [data.selected[1]], s=160, facecolors="none",
                   edgecolors="tab:orange", linewidths=2, zorder=4, label="selected")
    if data.log_y:
        ax.set_yscale("log")
    ax.set_xlabel("trial")
    ax.set_ylabel("median latency (ms)")
    ax.set_title(data.title, fontsize="medium")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if not data.empty:  # outside, on the right: failures are drawn at the top
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
                  borderaxespad=0.0)
    return fig


def render_plot(data: PlotData) -> str:
    """The plot as HTML: an inline ``<svg>``, or a note while there is no trial yet."""
    if data.empty:
        return f'<div style="{_FONT};padding:8px;opacity:0.7">No trials yet.</div>'
    return figure_svg(draw_plot(data))


def _short(text: str, limit: int = 60) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _num(value: float | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def render_table(rows: Sequence[Row], max_rows: int | None = MAX_ROWS) -> str:
    """The candidates as an HTML table themed with JupyterLab's colours: the best row
    tinted green, the selected one marked on the left, failures in the error colour
    with the first line of their error (the whole error on hover).

    >>> row = Row(3, "crash", None, None, None, "4x4", "random", False, "signal 11")
    >>> html = render_table([row])
    >>> 'data-trial="3"' in html and "signal 11" in html
    True
    """
    head = ("trial", "status", "latency (ms)", "GFLOPS", "% of peak", "decisions",
            "origin", "cached", "error")
    cell = "padding:2px 8px;border-bottom:1px solid var(--jp-border-color2,#e0e0e0)"
    num = cell + ";text-align:right;font-variant-numeric:tabular-nums"
    out = [f'<table class="wb-dashboard-rows" style="border-collapse:collapse;{_FONT}">',
           "<thead><tr>"]
    out += [f'<th style="{cell};text-align:left;font-weight:600">{h}</th>' for h in head]
    out.append("</tr></thead><tbody>")
    shown = rows if max_rows is None else rows[:max_rows]
    for r in shown:
        classes = ["wb-best"] * r.best + ["wb-failed"] * (not r.ok) + ["wb-selected"] * r.selected
        style = ";".join([_BEST_BG] * r.best + [_SELECTED] * r.selected)
        status = html.escape(r.status) + (" ★" if r.best else "") + (
            ' <span class="wb-noisy" title="noisy measurement">noisy</span>'
            if r.noisy else "")
        status_style = cell if r.ok else f"{cell};{_ERROR}"
        error = html.escape(_short(r.error))
        out.append(
            f'<tr class="{" ".join(classes)}" data-trial="{r.trial}" style="{style}">'
            f'<td style="{num}">{r.trial}</td>'
            f'<td style="{status_style}">{status}</td>'
            f'<td style="{num}">{_num(r.latency_ms, ".4g")}</td>'
            f'<td style="{num}">{_num(r.gflops, ".1f")}</td>'
            f'<td style="{num}">{_num(r.percent_of_peak, ".1f")}</td>'
            f'<td style="{cell};font-family:var(--jp-code-font-family,monospace)">'
            f'{html.escape(r.decisions)}</td>'
            f'<td style="{cell}">{html.escape(r.origin) or "—"}</td>'
            f'<td style="{cell}">{"yes" if r.cached else ""}</td>'
            f'<td style="{cell};{_ERROR}" title="{html.escape(r.error, quote=True)}">'
            f"{error}</td></tr>"
        )
    out.append("</tbody></table>")
    if len(shown) < len(rows):
        out.append(f'<div style="{_FONT};opacity:0.7;padding:4px 8px">and '
                   f"{len(rows) - len(shown)} more: pick them in the list below.</div>")
    return "".join(out)


def _header_html(model: DashboardModel) -> str:
    """The summary line; with a noisy trial a warning after it (noisy figures may be
    off by a lot: re-measure on a quiet machine, or with fewer threads)."""
    summary = model.summary()
    warning = ""
    if " noisy" in summary or "NOISY" in summary:
        warning = (f'<div class="wb-noisy-warning" style="{_FONT};{_ERROR};padding:2px 0">'
                   "Noisy measurements: other processes used the CPU, or the samples "
                   "spread widely; compare figures with care.</div>")
    return (f'<div style="{_FONT};font-weight:600;padding:2px 0">'
            f"{html.escape(summary)}</div>{warning}")


def _message_html(text: str) -> str:
    return (f'<div style="{_FONT};{_ERROR};white-space:pre-wrap;padding:4px 0">'
            f"{html.escape(text)}</div>")


# ---------------------------------------------------------------------------
# the widget


class TuningDashboard(widgets.VBox):
    """The candidates of a tuning run: summary, latency plot, table and the trace of
    the one you pick.

    ``result_or_database`` is a :class:`~workbench.search.result.TuneResult`, a
    :class:`~workbench.search.database.Database` (or its folder; then ``func`` says
    which function's records to show, needed only when it holds several), a list of
    schedule files of one function (``sch.save``; each becomes a candidate) or a
    :class:`~workbench.widgets.dashboard_model.DashboardModel`. ``numpy_time``
    (seconds, or a Measurement) draws numpy's time and shows the speed-up; a result
    brings its own. The best trial is selected at first (``select_best=False``: none);
    ``syntax`` is the stepper's IR syntax (``"classic"`` or ``"tirx"``); the table
    shows ``max_rows`` rows (None: all), the list below it every candidate.

    For a run in progress use :meth:`live` and pass :meth:`add_trial` as ``wb.tune``'s
    ``callback`` (or call :meth:`tune`). While trials arrive, plot, table and list are
    redrawn at most every ``redraw_interval`` seconds, and rarer if drawing is slow (at
    most a twentieth of the run's time goes to it), so a fast run is not slowed down;
    :meth:`refresh` draws the final state. The header follows every trial.
    ``redraw_interval=0`` redraws after every trial.

    From Python: :meth:`select` a trial by index; ``selected`` is the Trial,
    ``stepper`` its TraceStepper, ``model`` the state, ``table_html``/``plot_html`` what
    is shown. Errors inside widget callbacks (a trace that no longer replays, say)
    are shown in the dashboard rather than raised.

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(16, 16, 16)
    >>> t = wb.Schedule(func).trace
    >>> dash = TuningDashboard.live(func)
    >>> dash.add_trial(Trial(0, t, "ok", 3e-6, "", "a"))
    >>> dash.add_trial(Trial(1, t, "timeout", None, "", "b", "no answer in 10 s"))
    >>> len(dash.model), dash.model.failures, dash.selected
    (2, 1, None)
    >>> dash.select(0); type(dash.stepper).__name__
    'TraceStepper'
    """

    def __init__(
        self,
        result_or_database: Any,
        func: PrimFunc | IRModule | None = None,
        numpy_time: float | Any | None = None,
        *,
        syntax: str = "classic",
        redraw_interval: float = REDRAW_INTERVAL,
        max_rows: int | None = MAX_ROWS,
        select_best: bool = True,
    ):
        if syntax not in ("classic", "tirx"):
            raise ValueError(f'TuningDashboard: syntax must be "classic" or "tirx", got '
                             f"{syntax!r}")
        self.model = _model_of(result_or_database, func, numpy_time)
        self.syntax = syntax
        self.redraw_interval = float(redraw_interval)
        self.max_rows = max_rows
        #: How many times plot, table and list were drawn.
        self.redraws = 0
        #: Seconds the last redraw took.
        self.last_redraw_seconds = 0.0
        self._next_draw = float("-inf")
        self._drawn_version = -1
        self._syncing = False
        self._stepper: TraceStepper | None = None

        self.header = widgets.HTML()
        self.header.add_class("wb-dashboard-header")
        self.plot = widgets.HTML(layout=widgets.Layout(width="auto"))
        self.plot.add_class("wb-dashboard-plot")
        self.show_failures = widgets.Checkbox(value=self.model.show_failures,
                                              description="Show failures", indent=False,
                                              layout=widgets.Layout(width="auto"))
        self.sort_by = widgets.Dropdown(options=_SORTS, value=self.model.sort,
                                        description="sort", layout=widgets.Layout(width="auto"))
        self.table = widgets.HTML(layout=widgets.Layout(width="auto"))
        self.table.add_class("wb-dashboard-table")
        table_box = widgets.Box([self.table], layout=widgets.Layout(
            max_height="320px", overflow="auto", width="auto"))
        self.selector = widgets.Select(options=[], value=None, rows=8, description="candidate",
                                       layout=widgets.Layout(width="min(100%, 520px)"))
        self.decisions = widgets.HTML()
        self.decisions.add_class("wb-dashboard-decisions")
        self.message = widgets.HTML()
        self.message.add_class("wb-dashboard-message")
        self.save_path = widgets.Text(value="best_schedule.json", description="file",
                                      layout=widgets.Layout(width="320px"))
        self.save_button = widgets.Button(
            description="Save schedule", icon="file-code-o",
            tooltip="write the selected candidate as a schedule file (function, trace, "
            "latency): wb.load_schedule / ScheduleEditor(path) open it",
            layout=widgets.Layout(width="auto", flex="0 0 auto"))
        self.save_button.on_click(lambda _b: self._save_from_widgets())
        self.stepper_box = widgets.VBox()
        self.stepper_box.add_class("wb-dashboard-stepper")

        self.show_failures.observe(self._on_show_failures, names="value")
        self.sort_by.observe(self._on_sort, names="value")
        self.selector.observe(self._on_select, names="value")
        super().__init__([
            self.header, self.plot, widgets.HBox([self.show_failures, self.sort_by]),
            table_box, self.selector, self.decisions,
            widgets.HBox([self.save_path, self.save_button]), self.message, self.stepper_box,
        ])
        self.add_class("wb-dashboard")
        best = self.model.best
        if select_best and best is not None:
            self.model.select(best.index)
        self.refresh()
        self._show_selection()

    # ------------------------------------------------------------ construction
    @classmethod
    def live(cls, func: PrimFunc | IRModule, numpy_time: float | Any | None = None, *,
             flops: int | None = None, peak: float | None = None,
             **kwargs: Any) -> TuningDashboard:
        """An empty dashboard for a run in progress::

            dash = TuningDashboard.live(func, numpy_time=wb.measure(numpy_mm, a, b))
            display(dash)
            result = wb.tune(func, trials=64, callback=dash.add_trial)
            dash.refresh()

        ``flops`` defaults to the function's flop count, ``peak`` to the machine's
        estimated peak; other keywords go to the constructor.

        >>> import workbench as wb
        >>> dash = TuningDashboard.live(wb.workloads.matmul(8, 8, 8))
        >>> "No trials yet" in dash.plot_html
        True
        """
        model = DashboardModel.live(func, numpy_time=numpy_time, flops=flops, peak=peak)
        return cls(model, **kwargs)

    # ----------------------------------------------------------------- Python API
    @property
    def selected(self) -> Trial | None:
        """The selected trial, or None."""
        return self.model.selected

    @property
    def stepper(self) -> TraceStepper | None:
        """The TraceStepper of the selected trial (None without a selection, or when
        its trace could not be shown: ``message`` says why)."""
        return self._stepper

    @property
    def table_html(self) -> str:
        return self.table.value

    @property
    def plot_html(self) -> str:
        return self.plot.value

    @property
    def result(self) -> TuneResult:
        """The trials so far as a TuneResult (table, plot, ``best.schedule``)."""
        return self.model.as_result()

    def select(self, index: int | None) -> None:
        """Select the trial with this index (None clears the selection) and show its
        trace; ``ValueError`` if there is no such trial. A hidden failure is shown
        again (``Show failures`` is turned on)."""
        self.model.select(index)
        trial = self.model.selected
        if trial is not None and not trial.ok and not self.model.show_failures:
            self.model.show_failures = True
            self._set_quietly(self.show_failures, True)
        self.refresh()
        self._show_selection()

    def _save_from_widgets(self) -> None:
        try:
            path = self.save_schedule(self.save_path.value)
        except (ValueError, OSError, ScheduleError, TraceError) as e:
            self.message.value = _message_html(f"Save schedule: {e}")
            return
        self.message.value = f"<span>saved {html.escape(path)}</span>"

    def save_schedule(self, path: str | os.PathLike, index: int | None = None) -> str:
        """Write the selected trial (or ``index``; default the best) as a schedule file
        (function, trace, latency); returns the path written."""
        return str(self.model.save_schedule(path, index))

    def add_trial(self, trial: Trial) -> None:
        """Add one trial (``wb.tune(..., callback=dash.add_trial)``). The header is
        updated at once, plot and table when the last redraw is old enough (see the
        class); a drawing error is shown in the dashboard and does not stop the run."""
        self.model.add_trial(trial)
        try:
            self.header.value = _header_html(self.model)
            if self.redraw_interval <= 0 or perf_counter() >= self._next_draw:
                self.refresh()
        except Exception as e:  # noqa: BLE001 - a view must not stop the tuning run
            self.message.value = _message_html(f"could not redraw the dashboard: "
                                               f"{type(e).__name__}: {e}")

    def refresh(self) -> None:
        """Redraw header, plot, table and the candidate list from the model."""
        model = self.model
        start = perf_counter()
        try:
            self.header.value = _header_html(model)
            self.plot.value = render_plot(model.plot_data())
            rows = model.rows()
            self.table.value = render_table(rows, self.max_rows)
            self._sync_selector(rows)
            self.redraws += 1
            self._drawn_version = model.version
        finally:
            end = perf_counter()
            self.last_redraw_seconds = end - start
            # the next redraw during a run: after redraw_interval, and late enough that
            # drawing takes at most REDRAW_SHARE of the run's time
            wait = (end - start) * (1 - REDRAW_SHARE) / REDRAW_SHARE
            self._next_draw = end + max(self.redraw_interval, wait)

    @property
    def up_to_date(self) -> bool:
        """Whether plot and table show every change of the model."""
        return self._drawn_version == self.model.version

    def tune(self, space: Callable | None = None, trials: int = 64, **kwargs: Any) -> TuneResult:
        """Run ``wb.tune`` on the dashboard's function with :meth:`add_trial` as its
        callback (plus yours, if you pass ``callback=``), redraw at the end and return
        the result. ``numpy_reference`` defaults to the dashboard's numpy time; other
        keywords go to ``wb.tune``. A second run continues the trial numbers.

        >>> import workbench as wb
        >>> func = wb.workloads.matmul(32, 32, 32)
        >>> def space(sch):
        ...     i, j, k = sch.get_loops(sch.get_block("C"))
        ...     sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
        >>> dash = TuningDashboard.live(func)
        >>> result = dash.tune(space, trials=2, seed=0, progress=False)
        >>> len(dash.model) == len(result.trials) == 2, dash.up_to_date
        (True, True)
        """
        from ..search.tune import tune

        user_callback = kwargs.pop("callback", None)
        if kwargs.get("numpy_reference") is None and self.model.numpy_time:
            kwargs["numpy_reference"] = self.model.numpy_time
        if not self.model.strategy:
            self.model.strategy = kwargs.get("strategy", "evolutionary")

        def callback(trial: Trial) -> None:
            self.add_trial(trial)
            if user_callback is not None:
                user_callback(trial)

        try:
            return tune(self.model.func, space, trials, callback=callback, **kwargs)
        finally:
            self.refresh()

    def __repr__(self) -> str:
        return f"TuningDashboard({self.model.summary()})"

    # ------------------------------------------------------------- callbacks
    def _set_quietly(self, widget: widgets.Widget, value: Any) -> None:
        self._syncing = True
        try:
            widget.value = value
        finally:
            self._syncing = False

    def _sync_selector(self, rows: Sequence[Row]) -> None:
        options = tuple((r.label, r.trial) for r in rows)
        self._syncing = True
        try:
            if tuple(self.selector.options) != options:
                self.selector.options = options
            want = self.model.selected
            value = want.index if want is not None and any(o[1] == want.index
                                                            for o in options) else None
            if self.selector.value != value:
                self.selector.value = value
        finally:
            self._syncing = False

    def _guard(self, what: str, action: Callable[[], None]) -> None:
        """Run a widget callback's action; show an exception instead of raising it."""
        try:
            action()
        except Exception as e:  # noqa: BLE001 - callbacks must not raise into the notebook
            self.message.value = _message_html(f"{what}: {type(e).__name__}: {e}")

    def _on_select(self, change: dict) -> None:
        if not self._syncing:
            self._guard("select", lambda: self.select(change["new"]))

    def _on_show_failures(self, change: dict) -> None:
        if self._syncing:
            return

        def apply() -> None:
            had = self.model.selected
            self.model.show_failures = change["new"]
            self.refresh()
            if had is not None and self.model.selected is None:
                self._show_selection()

        self._guard("show failures", apply)

    def _on_sort(self, change: dict) -> None:
        if self._syncing:
            return

        def apply() -> None:
            self.model.sort = change["new"]
            self.refresh()

        self._guard("sort", apply)

    def _show_selection(self) -> None:
        """Put the selected trial's decisions and stepper (or why not) below the list."""
        trial = self.model.selected
        self._stepper = None
        self.message.value = ""
        if trial is None:
            self.decisions.value = ""
            self.stepper_box.children = ()
            return
        self.decisions.value = _decisions_html(trial, self.model)
        try:
            stepper = make_trace_stepper(trial.trace, self.model.func, self.syntax)
        except Exception as e:  # noqa: BLE001 - a bad trace is shown, not raised
            self.stepper_box.children = ()
            self.message.value = _message_html(
                f"trial {trial.index}: cannot show its trace on "
                f"{_func_name(self.model.func)}: {type(e).__name__}: {e}")
            return
        failure = stepper.model.failure
        if failure is not None:
            self.message.value = _message_html(
                f"trial {trial.index}: its trace no longer replays on "
                f"{_func_name(self.model.func)}: {failure.message}")
        stepper.step = stepper.model.last_step  # the candidate's IR (or where it fails)
        self._stepper = stepper
        self.stepper_box.children = (stepper,)


def _func_name(func: PrimFunc | IRModule) -> str:
    return ",".join(func.names) if isinstance(func, IRModule) else func.name


def _decisions_html(trial: Trial, model: DashboardModel) -> str:
    parts = [f"<b>trial {trial.index}</b>"]
    if trial.ok:
        text = format_ms(trial.latency)  # type: ignore[arg-type]
        gflops = model.gflops(trial.latency)
        if gflops is not None:
            text += f" = {gflops:.1f} GFLOPS"
        parts.append(html.escape(text))
    else:
        parts.append(f'<span style="{_ERROR}">{html.escape(trial.status)}: '
                     f"{html.escape(_short(trial.error, 120))}</span>")
    decisions = html.escape(trial.decisions) or "none"
    parts.append("decisions: <code>" + decisions + "</code>")
    if trial.origin:
        parts.append(html.escape({"mutant": "mutated"}.get(trial.origin, trial.origin)))
    if trial.cached:
        parts.append("from the database")
    parts.append(count(len(trial.trace), "instruction"))
    return f'<div style="{_FONT};padding:2px 0">' + " · ".join(parts) + "</div>"


def _model_of(source: Any, func: PrimFunc | IRModule | None,
              numpy_time: float | Any | None) -> DashboardModel:
    """The model for ``TuningDashboard(source, func, numpy_time)``."""
    from ..search.database import Database

    if isinstance(source, DashboardModel):
        if func is not None:
            raise ValueError("TuningDashboard: a DashboardModel brings its function; "
                             "do not pass func")
        if numpy_time is not None:
            source.numpy_time = numpy_time
        return source
    if isinstance(source, TuneResult):
        if func is not None and structural_hash(func) != structural_hash(source.func):
            raise ValueError(f"TuningDashboard: func {_func_name(func)!r} is not the "
                             f"function this result tuned ({_func_name(source.func)!r}); "
                             "leave func out for a TuneResult")
        return DashboardModel.from_result(source, numpy_time=numpy_time)
    if isinstance(source, (list, tuple)):
        return DashboardModel.from_schedule_files(source, numpy_time=numpy_time)
    if isinstance(source, (str, os.PathLike)) and os.path.isfile(source):
        return DashboardModel.from_schedule_files([source], numpy_time=numpy_time)
    if isinstance(source, (Database, str, os.PathLike)):
        return DashboardModel.from_database(source, func, numpy_time=numpy_time)
    raise TypeError("TuningDashboard: expected a TuneResult, a Database (or its folder), "
                    "schedule files or a DashboardModel, got "
                    f"{type(source).__name__}")
