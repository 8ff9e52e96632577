"""One table for every timing a lesson or a notebook prints.

``timing_table({"name": measurement, ...})`` lines up measured kernels: median and min
latency, GFLOPS, the speed-up over a baseline, and each figure's noise flag. The header
names the machine (CPU model, vector ISA, threads) the figures come from; the footer says
whether every figure is quiet or which ones to measure again. It prints as text, shows as
an HTML table in a notebook and draws itself as a bar chart (``.plot()``) with noisy bars
hatched, so a chart never ranks kernels silently on noisy figures.

Anything with ``median`` (seconds) works as a row: a :class:`Measurement`, a tuning
``Trial`` (``latency``), a GPU measurement; ``gflops``, ``min``, ``noisy``, ``cv`` and
``foreign_load`` are used when present.

>>> from workbench.runtime.timing import Measurement
>>> t = timing_table({"slow": Measurement(samples=(2e-3,) * 3, number=1, repeat=3, flops=2e6),
...                   "fast": Measurement(samples=(1e-3,) * 3, number=1, repeat=3, flops=2e6)},
...                  baseline="slow", machine="test CPU")
>>> print(t)  # doctest: +NORMALIZE_WHITESPACE
timings on test CPU
name  median    min       GFLOPS  vs slow  noise
slow  2.000 ms  2.000 ms    1.00    1.00x  quiet
fast  1.000 ms  1.000 ms    2.00    2.00x  quiet
All 2 figures quiet.
>>> t.fastest, t.speedup("fast")
('fast', 2.0)
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .noise import describe_noise, get_noise_thresholds

__all__ = ["TimingRow", "TimingTable", "timing_table", "machine_text"]


def machine_text(threads: int | None = None) -> str:
    """``"AMD EPYC 7B13 (avx2, fma), 2 threads"``: which machine figures come from.

    >>> "thread" in machine_text(threads=1)
    True
    """
    from .peak import cpu_model, vector_isa
    from .threads import get_num_threads

    isa = vector_isa()
    threads = get_num_threads() if threads is None else threads
    text = f"{cpu_model()} ({isa.name}{', fma' if isa.fma else ''})"
    return f"{text}, {threads} thread{'s' if threads != 1 else ''}"


@dataclass(frozen=True)
class TimingRow:
    """One named figure: latencies in seconds, ``gflops`` None when unknown."""

    name: str
    median: float
    min: float
    gflops: float | None
    noisy: bool
    noise: str  # "" when quiet, else "cv=0.12, other processes 40% CPU"


def _row(name: str, m: Any, flops: int | None = None) -> TimingRow:
    median = getattr(m, "median", None)
    if median is None:
        median = getattr(m, "latency", None)
    if median is None:
        raise TypeError(f"timing_table: {name!r} has no median or latency "
                        f"(got {type(m).__name__})")
    low = getattr(m, "min", None)
    noisy = bool(getattr(m, "noisy", False))
    gflops = getattr(m, "gflops", None)
    if gflops is None and flops:
        gflops = flops / float(median) / 1e9
    return TimingRow(name, float(median), float(median if low is None else low),
                     gflops, noisy, describe_noise(m) if noisy else "")


class TimingTable:
    """The figures of :func:`timing_table`; ``rows`` in the order given."""

    def __init__(self, rows: list[TimingRow], baseline: str | None, title: str | None,
                 machine: str) -> None:
        self.rows = rows
        self.baseline = baseline
        self.title = title
        self.machine = machine

    # ------------------------------------------------------------------ queries
    def __getitem__(self, name: str) -> TimingRow:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"timing_table: no row {name!r} (rows: {[r.name for r in self.rows]})")

    @property
    def noisy(self) -> list[str]:
        """Names of the figures flagged noisy."""
        return [r.name for r in self.rows if r.noisy]

    @property
    def fastest(self) -> str:
        """Name of the row with the lowest median."""
        return min(self.rows, key=lambda r: r.median).name

    def speedup(self, name: str, over: str | None = None) -> float:
        """How many times faster ``name`` is than ``over`` (default: the baseline)."""
        over = over or self.baseline
        if over is None:
            raise ValueError("timing_table: speedup needs a baseline (baseline=... or over=...)")
        return self[over].median / self[name].median

    # ------------------------------------------------------------------ display
    def _header(self) -> str:
        return (f"{self.title}: " if self.title else "timings ") + f"on {self.machine}"

    def _cells(self) -> tuple[list[str], list[list[str]]]:
        head = ["name", "median", "min", "GFLOPS"]
        if self.baseline:
            head.append(f"vs {self.baseline}")
        head.append("noise")
        body = []
        for r in self.rows:
            cells = [r.name, f"{r.median * 1e3:.3f} ms", f"{r.min * 1e3:.3f} ms",
                     "n/a" if r.gflops is None else f"{r.gflops:.2f}"]
            if self.baseline:
                cells.append(f"{self.speedup(r.name):.2f}x")
            cells.append(("NOISY" + (f" ({r.noise})" if r.noise else "")) if r.noisy
                         else "quiet")
            body.append(cells)
        return head, body

    def footer(self) -> str:
        """The verdict: all quiet, or which figures to measure again."""
        limits = get_noise_thresholds()
        if not self.noisy:
            return f"All {len(self.rows)} figures quiet."
        return (f"NOISY: {', '.join(self.noisy)} (spread over {limits.cv:.0%} or other "
                f"programs over {limits.foreign_load:.0%} of the CPU): the order may be "
                "wrong; measure again when the machine is quiet.")

    def __str__(self) -> str:
        head, body = self._cells()
        widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
        left = {0, len(head) - 1}

        def line(cells: list[str]) -> str:
            return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                             for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

        return "\n".join([self._header(), line(head), *map(line, body), self.footer()])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head, body = self._cells()
        th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
        rows = []
        for r, cells in zip(self.rows, body):
            style = ' style="color: var(--jp-warn-color0, #b35c00)"' if r.noisy else ""
            rows.append(f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells)
                        + "</tr>")
        return (f"<div class='wb-timings'><b>{html.escape(self._header())}</b>"
                f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
                f"<p>{html.escape(self.footer())}</p></div>")

    def plot(self, metric: str = "gflops"):
        """A horizontal bar chart of ``metric`` (``"gflops"``, or ``"median"`` in ms);
        noisy bars are hatched and the title says so. Shows itself in a notebook."""
        from ..search.result import display_figure

        if metric not in ("gflops", "median"):
            raise ValueError(f"timing_table.plot: metric must be 'gflops' or 'median', "
                             f"got {metric!r}")
        if metric == "gflops" and any(r.gflops is None for r in self.rows):
            metric = "median"
        values = [r.gflops if metric == "gflops" else r.median * 1e3 for r in self.rows]
        fig = display_figure(figsize=(6.5, 0.5 + 0.45 * len(self.rows)), layout="constrained")
        ax = fig.add_subplot()
        bars = ax.barh([r.name for r in self.rows], values,
                       color=["#c98b3b" if r.noisy else "#3a7bd5" for r in self.rows],
                       hatch=["//" if r.noisy else "" for r in self.rows])
        ax.bar_label(bars, fmt="%.2f" if metric == "median" else "%.1f", fontsize="small")
        ax.set_xlabel("GFLOPS (higher is better)" if metric == "gflops"
                      else "median latency, ms (lower is better)")
        ax.invert_yaxis()
        title = self._header()
        if self.noisy:
            title += "\nhatched: NOISY, the order may be wrong"
        ax.set_title(title, fontsize="small")
        return fig


def timing_table(measurements: Mapping[str, Any], *, baseline: str | None = None,
                 title: str | None = None, machine: str | None = None,
                 threads: int | None = None, flops: int | None = None) -> TimingTable:
    """Line up named timings with their noise flags (see the module docstring).

    ``baseline`` names the row the speed-ups are relative to; ``machine`` overrides the
    machine line (default: this CPU and ``threads``, default ``wb.get_num_threads()``);
    ``flops`` (e.g. ``wb.flop_count(func)``) gives GFLOPS to rows that carry no flop
    count (tuning trials, database records, timed Python callables).

    Example:
        >>> import numpy as np, workbench as wb
        >>> a = np.ones((32, 32), "float32")
        >>> t = wb.timing_table({"numpy": wb.measure(np.matmul, a, a, repeat=3,
        ...                                          min_repeat_ms=1, flops=2 * 32 ** 3)})
        >>> t.rows[0].name, t.rows[0].gflops > 0
        ('numpy', True)
    """
    if not measurements:
        raise ValueError("timing_table: no measurements given")
    rows = [_row(str(name), m, flops) for name, m in measurements.items()]
    if baseline is not None and baseline not in measurements:
        raise KeyError(f"timing_table: baseline {baseline!r} is not one of "
                       f"{[r.name for r in rows]}")
    return TimingTable(rows, baseline, title,
                       machine if machine is not None else machine_text(threads))
