"""wb.timing_table: the one formatter lessons and notebooks print timings with."""

from __future__ import annotations

import types

import pytest

import workbench as wb
from workbench.runtime.report import machine_text
from workbench.runtime.timing import Measurement


def _m(ms: float, spread: float = 0.0, flops: int | None = 2_000_000) -> Measurement:
    s = ms * 1e-3
    return Measurement(samples=(s, s * (1 + spread), s), number=1, repeat=3, flops=flops)


def test_rows_speedups_and_quiet_verdict():
    t = wb.timing_table({"naive": _m(4.0), "tiled": _m(1.0)}, baseline="naive",
                        title="matmul", machine="M")
    assert t.speedup("tiled") == pytest.approx(4.0)
    assert t.fastest == "tiled" and t.noisy == []
    lines = str(t).splitlines()
    assert lines[0] == "matmul: on M"
    assert lines[1].split() == ["name", "median", "min", "GFLOPS", "vs", "naive", "noise"]
    assert lines[3].split() == ["tiled", "1.000", "ms", "1.000", "ms", "2.00", "4.00x", "quiet"]
    assert lines[-1] == "All 2 figures quiet."


def test_noisy_rows_are_flagged_in_text_html_and_plot():
    noisy = _m(2.0, spread=2.0)
    assert noisy.noisy
    t = wb.timing_table({"quiet": _m(1.0), "busy": noisy}, machine="M")
    assert t.noisy == ["busy"]
    text = str(t)
    assert "NOISY (cv=" in text.splitlines()[3]
    assert text.splitlines()[-1].startswith("NOISY: busy ")
    assert "measure again" in text
    assert "NOISY (cv=" in t._repr_html_()
    fig = t.plot()
    bars = fig.axes[0].patches
    assert [b.get_hatch() or "" for b in bars] == ["", "//"]
    assert "NOISY" in fig.axes[0].get_title()
    assert fig._repr_svg_().startswith("<svg")


def test_rows_without_flops_plot_latency_and_trials_are_accepted():
    trial = types.SimpleNamespace(latency=3e-3, noisy=False)
    t = wb.timing_table({"trial 3": trial, "numpy": _m(1.0, flops=None)}, machine="M")
    assert [r.median for r in t.rows] == [3e-3, 1e-3]
    assert "n/a" in str(t)
    flagged = wb.timing_table({"best": types.SimpleNamespace(median=1e-3, noisy=True)},
                              machine="M")
    assert str(flagged).splitlines()[2].endswith("n/a  NOISY")
    assert "ms" in t.plot().axes[0].get_xlabel()
    with_flops = wb.timing_table({"trial 3": trial}, machine="M", flops=3_000_000)
    assert with_flops.rows[0].gflops == pytest.approx(1.0)


def test_html_escapes_names():
    t = wb.timing_table({"<b>x</b>": _m(1.0)}, machine="M")
    assert "<b>x</b>" not in t._repr_html_() and "&lt;b&gt;x&lt;/b&gt;" in t._repr_html_()


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="no measurements"):
        wb.timing_table({})
    with pytest.raises(KeyError, match="baseline 'nope'"):
        wb.timing_table({"a": _m(1.0)}, baseline="nope")
    with pytest.raises(TypeError, match="'failed' has no median or latency"):
        wb.timing_table({"failed": types.SimpleNamespace(latency=None)})
    with pytest.raises(ValueError, match="needs a baseline"):
        wb.timing_table({"a": _m(1.0)}, machine="M").speedup("a")
    with pytest.raises(ValueError, match="metric"):
        wb.timing_table({"a": _m(1.0)}, machine="M").plot("flops")


def test_machine_line_names_cpu_isa_and_threads():
    text = machine_text(threads=3)
    assert text.endswith(", 3 threads")
    assert "(" in text and ")" in text  # the vector ISA in parentheses
    assert machine_text(threads=1).endswith(", 1 thread")


def test_a_noisy_best_says_why_like_its_trial():
    from workbench.search.result import Trial, TuneResult

    func = wb.workloads.matmul(16, 16, 16)
    trace = wb.Schedule(func).trace
    result = TuneResult(func, [Trial(0, trace, "ok", 2e-6, "", "a", cv=0.3, foreign_load=0.5,
                                     noisy=True)], flops=8192, wall_time=1)
    assert wb.noise_note(result.best) == " [noisy: cv=0.30, other processes 50% CPU]"
    row = str(wb.timing_table({"best": result.best}, machine="M")).splitlines()[2]
    assert row.endswith("NOISY (cv=0.30, other processes 50% CPU)")
