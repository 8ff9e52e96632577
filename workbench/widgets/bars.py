"""Labels at the end of horizontal bars that stay inside the plot.

A label goes right of its bar when it fits there, inside the bar's end (white text)
when the bar is long enough, and otherwise the x axis grows until it fits. Widths are
measured with matplotlib's renderer plus a margin, since a browser draws the SVG text
with its own font.

>>> from matplotlib.figure import Figure
>>> fig = Figure(figsize=(4, 1.5))
>>> ax = fig.subplots()
>>> _ = ax.barh([0, 1], [10.0, 1.0])
>>> texts = label_bars(fig, ax, [10.0, 1.0], ["10 ms, a long label", "1 ms"])
>>> [t.get_ha() for t in texts]
['right', 'left']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["NOISY_MARK", "label_bars"]

#: Appended to the label of a noisy measurement; the plot's title explains it.
NOISY_MARK = " *"
#: The title's note when a label carries :data:`NOISY_MARK`.
NOISY_NOTE = "* noisy: measure again before comparing"

_PAD = 0.01      # gap between a bar's end and its label, as a fraction of the x range
_SLACK = 1.15    # browsers' fonts run wider than matplotlib's metrics by up to this


def label_bars(fig: Any, ax: Any, values: Sequence[float], texts: Sequence[str],
               fontsize: str = "small") -> list[Any]:
    """Write ``texts[n]`` at the end of bar ``n`` (``values[n]`` long, at y = ``n``) so
    that every label lies inside the axes; sets the x limit; returns the Text objects.

    Call it after the bars, ticks and title are set; it lays the figure out
    (``tight_layout``) to measure the axes.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    values = [max(0.0, float(v or 0.0)) for v in values]
    top = max(values) if any(values) else 1.0
    fig.tight_layout()
    renderer = FigureCanvasAgg(fig).get_renderer()
    width = ax.get_window_extent(renderer).width
    labels = [ax.text(0, n, t, va="center", fontsize=fontsize) for n, t in enumerate(texts)]
    # each label's share of the axes' width
    share = [_SLACK * t.get_window_extent(renderer).width / width for t in labels]
    xmax = top * 1.05
    inside = [False] * len(labels)
    for _ in range(8):  # grows xmax monotonically; settles in a couple of rounds
        need = xmax
        for n, v in enumerate(values):
            room = 1.0 - v / xmax - 2 * _PAD     # right of the bar
            inside[n] = share[n] > room and share[n] + 2 * _PAD <= v / xmax
            if share[n] > room and not inside[n]:
                need = max(need, v / max(1.0 - 2 * _PAD - share[n], 0.05))
        if need <= xmax:
            break
        xmax = need
    for n, (label, v) in enumerate(zip(labels, values, strict=True)):
        if inside[n]:
            label.set(x=v - _PAD * xmax, ha="right", color="white")
        else:
            label.set(x=v + _PAD * xmax, ha="left")
    ax.set_xlim(0, xmax)
    return labels
