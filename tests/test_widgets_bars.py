"""Bar labels of the measurement plots (the editor's Measure tab, CompareView) stay
inside the plot, and a noisy figure is a short mark explained in the title."""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg

import workbench as wb
from workbench.widgets.bars import NOISY_MARK, NOISY_NOTE
from workbench.widgets.compare import CompareModel
from workbench.widgets.editor import _history_figure
from workbench.widgets.editor_model import MeasureRecord


def _records() -> list[MeasureRecord]:
    """The Measure tab after a few steps: long descriptions, the slowest one noisy (its
    label is the widest, at the end of the longest bar)."""
    return [
        MeasureRecord(0, "start", "ok", 1.27e-3, 3.3, cv=0.3, noisy=True),
        MeasureRecord(3, "split j by [None, 8]; reorder j_0, k, j_1", "ok", 0.41e-3, 10.2),
        MeasureRecord(5, "vectorize j_1 after reverse_compute_at C", "ok", 0.20e-3, 21.0),
        MeasureRecord(6, "parallel i", "build_error", error="cc: error"),
    ]


def _texts_outside_axes(fig, ax) -> list[str]:
    renderer = FigureCanvasAgg(fig).get_renderer()
    box = ax.get_window_extent(renderer)
    out = []
    for t in ax.texts:
        ext = t.get_window_extent(renderer)
        # labels are measured with a margin for browser fonts; allow a pixel of rounding
        if ext.x0 < box.x0 - 1 or ext.x1 > box.x1 + 1:
            out.append(t.get_text())
    return out


def test_measure_tab_labels_fit_inside_the_plot():
    fig = _history_figure(_records())
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts[0] == "1.27 ms, 3.3 GFLOPS" + NOISY_MARK
    assert not any("(noisy)" in t for t in texts)
    assert NOISY_NOTE in ax.get_title()
    assert _texts_outside_axes(fig, ax) == []


def test_measure_tab_title_has_no_note_without_noise():
    records = [MeasureRecord(0, "start", "ok", 1e-3, 2.0),
               MeasureRecord(1, "parallel i", "ok", 0.5e-3, 4.0)]
    fig = _history_figure(records)
    assert NOISY_NOTE not in fig.axes[0].get_title()
    assert _texts_outside_axes(fig, fig.axes[0]) == []


def test_compare_plot_labels_fit_and_noise_is_marked():
    func = wb.workloads.matmul(16, 16, 16)
    names = ["a schedule with a rather long descriptive name", "split", "parallel"]
    model = CompareModel(*(wb.Schedule(func) for _ in names), names=names)
    for col, (median, noisy) in zip(model.columns, [(2.5e-3, True), (1e-3, False),
                                                    (0.2e-3, False)], strict=True):
        col.measurements.append(MeasureRecord(0, col.name, "ok", median, 1.7, noisy=noisy))
    fig = model.plot_figure()
    ax = fig.axes[0]
    assert ax.texts[0].get_text().endswith(NOISY_MARK) and NOISY_NOTE in ax.get_title()
    assert _texts_outside_axes(fig, ax) == []
    svg = model.plot_svg()
    assert svg.startswith("<svg") and "(noisy)" not in svg
