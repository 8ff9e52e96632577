"""Every measurement records its noise (cv, foreign CPU load, noisy) and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import workbench as wb
from workbench.runtime import noise, timing
from workbench.runtime.noise import CpuSnapshot, foreign_load, parse_proc_stat
from workbench.runtime.timing import Measurement

BUSY_SECONDS = 10  # a busy-loop child never outlives this, even if the test dies


@pytest.fixture(autouse=True)
def default_thresholds():
    old = noise.set_noise_thresholds()
    yield
    noise.set_noise_thresholds(old.cv, old.foreign_load)


def spin() -> int:
    return sum(range(3000))


def start_busy_loops(count: int) -> list[subprocess.Popen]:
    """``count`` processes spinning on the CPU for at most BUSY_SECONDS."""
    code = (f"import time\nend = time.monotonic() + {BUSY_SECONDS}\n"
            "while time.monotonic() < end:\n    pass\n")
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy_measurement() -> tuple[Measurement, float]:
    """A measurement taken beside two busy loops per usable core (so they dominate
    whatever else the machine runs), and how many cores the busy loops used meanwhile
    (their CPU seconds over the wall time)."""
    count = min(8, 2 * len(os.sched_getaffinity(0)))
    procs = start_busy_loops(count)
    try:
        time.sleep(0.2)  # running
        before, start = sum(cpu_seconds(p.pid) for p in procs), time.monotonic()
        m = timing.measure(spin, repeat=5, min_repeat_ms=60, threads=1)
        used = (sum(cpu_seconds(p.pid) for p in procs) - before) / (time.monotonic() - start)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return m, used


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs /proc/stat (Linux)")
def test_a_busy_loop_beside_the_measurement_is_flagged_noisy():
    quiet = timing.measure(spin, repeat=5, min_repeat_ms=60, threads=1)
    busy, busy_cores = busy_measurement()
    assert quiet.foreign_load is not None and busy.foreign_load is not None
    # the CPU the busy loops took counts as foreign (other processes may add to it,
    # never take from it); tick counters are coarse, hence the margin
    assert busy.foreign_load * len(os.sched_getaffinity(0)) >= 0.7 * busy_cores, busy_cores
    assert busy.foreign_load > noise.get_noise_thresholds().foreign_load
    assert busy.noisy and "NOISY" in repr(busy) and "other processes" in repr(busy)
    # the quiet measurement saw less foreign load: retry a few times, since the other
    # processes of a shared machine come and go
    for _ in range(3):
        if quiet.foreign_load < busy.foreign_load - 0.1:
            break
        quiet = timing.measure(spin, repeat=5, min_repeat_ms=60, threads=1)
        busy, _ = busy_measurement()
    assert quiet.foreign_load < busy.foreign_load - 0.1, (quiet, busy)


def test_the_isolated_worker_reports_foreign_load():
    kernel = wb.build(wb.workloads.matmul(32, 32, 32))
    m = wb.measure(kernel, repeat=3, min_repeat_ms=50, isolated=True)
    assert m.foreign_load is not None and 0 <= m.foreign_load <= 1
    assert m.cv == pytest.approx(noise.coefficient_of_variation(m.samples))


def test_foreign_load_is_busy_time_minus_our_own_over_capacity():
    a = CpuSnapshot(wall=10.0, busy=100.0, own=5.0, cores=2)
    assert foreign_load(a, CpuSnapshot(11.0, 101.9, 5.9, 2)) == pytest.approx(0.5)
    assert foreign_load(a, CpuSnapshot(11.0, 101.0, 6.0, 2)) == 0.0  # all ours
    assert foreign_load(a, CpuSnapshot(11.0, 104.0, 5.0, 2)) == 1.0  # clamped
    assert foreign_load(a, CpuSnapshot(10.05, 100.1, 5.0, 2)) is None  # too short
    assert foreign_load(CpuSnapshot(0.0, None, 0.0, 2), CpuSnapshot(1.0, None, 1.0, 2)) is None
    text = "cpu  1 1 1 1 1 1 1 1\ncpu0 10 1 4 50 3 2 1 1 7 0\ncpu1 2 0 1 80 0 0 0 0\nintr 5\n"
    assert parse_proc_stat(text, {0}) == (19, 1)  # user nice system irq softirq steal
    assert parse_proc_stat(text, {0, 1}) == (22, 2)
    assert parse_proc_stat("intr 5\n", None) is None


def test_noisy_follows_the_thresholds():
    quiet = Measurement(samples=(1.0, 1.02, 0.99), number=1, repeat=3, foreign_load=0.05)
    assert not quiet.noisy and "NOISY" not in repr(quiet)
    assert Measurement(samples=(1.0, 1.0), number=1, repeat=2, foreign_load=0.3).noisy
    assert Measurement(samples=(1.0, 1.5), number=1, repeat=2).noisy  # cv 0.2
    wb.set_noise_thresholds(cv=0.5, foreign_load=0.9)
    assert not Measurement(samples=(1.0, 1.5), number=1, repeat=2, foreign_load=0.3).noisy
    assert wb.get_noise_thresholds() == noise.NoiseThresholds(cv=0.5, foreign_load=0.9)
    with pytest.raises(ValueError, match="noise threshold cv"):
        wb.set_noise_thresholds(cv=-1)


def test_measurement_stays_backwards_compatible():
    m = Measurement(samples=(2e-3, 2e-3, 2e-3), number=10, repeat=3, flops=1000)
    assert m.cv == 0.0 and m.foreign_load is None and m.noisy is False
    assert repr(m) == ("Measurement(median=2.000 ms, min=2.000 ms, max=2.000 ms, "
                       "std=0.000 ms, 0.00 GFLOPS, number=10, repeat=3)")
    d = m.to_dict()
    assert (d["cv"], d["foreign_load"], d["noisy"]) == (0.0, None, False)
    json.dumps(d)
    loud = Measurement(samples=(1e-3, 3e-3), number=1, repeat=2, foreign_load=0.456)
    assert repr(loud).endswith(", NOISY (cv=0.50, other processes 46% CPU))")
    assert wb.noise_note(loud) == " [noisy: cv=0.50, other processes 46% CPU]"
    assert wb.noise_note(m) == ""
    with pytest.raises(ValueError, match="foreign_load"):
        Measurement(samples=(1.0,), number=1, repeat=1, foreign_load=1.5)


def test_tune_records_noise_counts_it_and_remeasures_the_best(tmp_path):
    from workbench.runtime.isolation import RunResult
    from workbench.testing import FakeKernel, fake_builder, stochastic_schedule_mm

    calls = []

    def measurer(kernel: FakeKernel) -> RunResult:
        calls.append(kernel)
        n = len(calls)
        # the search's figures: every other one noisy; the final ones quiet
        samples = (1e-6 * n, 1e-6 * n) if n % 2 else (1e-6 * n, 3e-6 * n)
        return RunResult("ok", Measurement(samples=samples, number=1, repeat=2))

    result = wb.tune(wb.testing.matmul_func(16, 16, 16), stochastic_schedule_mm, trials=5,
                     seed=1, measurer=measurer, builder=fake_builder, progress=False,
                     database=tmp_path, remeasure=2)
    assert len(calls) == 7  # 5 trials (the whole space) + 2 finalists
    assert [t.noisy for t in result.trials] == [False, True, False, True, False]
    assert "2 noisy" in result.summary()
    # the two fastest of the search (trials 0 and 2) measured again: trial 0 now takes
    # 12 us (noisy), trial 2 7 us, so the best is trial 2, from its re-measured figure
    assert [(t.index, t.remeasured) for t in result.final] == [(0, True), (2, True)]
    assert result.best.trial == 2 and result.best.latency == pytest.approx(7e-6)
    assert result.best.remeasured and "re-measured" in result.summary()
    assert [f["noisy"] for f in result.to_dict()["final"]] == [True, False]
    records = wb.Database(tmp_path).records()
    assert [r.noisy for r in records] == [False, True, False, True, False]
    again = wb.TuneResult.from_database(tmp_path, wb.testing.matmul_func(16, 16, 16))
    assert len(again.noisy) == 2


def test_dashboard_shows_no_ratio_from_a_noisy_or_impossible_figure():
    from workbench.search.result import Trial
    from workbench.widgets.dashboard import _header_html
    from workbench.widgets.dashboard_model import DashboardModel

    func = wb.testing.matmul_func(16, 16, 16)
    t = wb.Schedule(func).trace
    model = DashboardModel(func, [Trial(0, t, "ok", 2e-6, "", "a", noisy=True, cv=0.4)],
                           flops=8192, peak=100.0, numpy_time=3e-6)
    summary = model.summary()
    assert "NOISY" in summary and "x numpy" not in summary and "1 noisy" in summary
    assert "no ratio to numpy (noisy measurement)" in summary
    assert "wb-noisy-warning" in _header_html(model)
    assert "noisy" in model.rows()[0].label
    fast = DashboardModel(func, [Trial(0, t, "ok", 1e-9, "", "a")], flops=8192,
                          peak=100.0, numpy_time=3e-6)  # 8192 GFLOPS on a 100 GFLOPS machine
    assert "x numpy" not in fast.summary() and "peak" in fast.summary()
    fine = DashboardModel(func, [Trial(0, t, "ok", 2e-6, "", "a")], flops=8192, peak=100.0,
                          numpy_time=3e-6)
    assert "1.50x numpy" in fine.summary() and "wb-noisy-warning" not in _header_html(fine)
    noisy_numpy = Measurement(samples=(3e-6, 9e-6), number=1, repeat=2)
    fine.numpy_time = noisy_numpy
    assert "x numpy" not in fine.summary()


def test_editor_measure_tab_shows_the_flag():
    from workbench.widgets.editor import ScheduleEditor
    from workbench.widgets.editor_model import MeasureRecord

    record = MeasureRecord(2, "split", "ok", 1e-3, cv=0.05, foreign_load=0.6, noisy=True,
                           threads=2)
    assert record.summary().endswith("NOISY (cv=0.05, other processes 60% CPU)")
    quiet = MeasureRecord(2, "split", "ok", 1e-3, cv=0.01, threads=2)
    assert "NOISY" not in quiet.summary()
    editor = ScheduleEditor(wb.workloads.matmul(16, 16, 16))
    editor.model.measurements.append(record)
    editor._render_measurements()
    assert "NOISY" in editor.measure_html.value and "wb-noisy-warning" in editor.measure_html.value
    assert "2 threads" in editor.measure_html.value
    editor.model.measurements.append(quiet)
    editor._render_measurements()
    assert "NOISY" not in editor.measure_html.value
