"""TuningDashboard and its model: candidates of a tuning run, failures, the best row,
selection with a TraceStepper, the database round trip, following a run live, and
TuneResult's notebook display.

Most tests tune against a fake landscape (a builder that compiles nothing and a
measurer that derives a latency from the loop nest), so a run takes milliseconds; one
test tunes for real.
"""

from __future__ import annotations

import json
import math
import re

import pytest

import workbench as wb
from workbench.ir import For, iter_stmts
from workbench.runtime.isolation import RunResult
from workbench.runtime.timing import Measurement
from workbench.search import Database, TuneResult
from workbench.search.result import Trial
from workbench.testing import fake_builder
from workbench.widgets import dashboard as dashboard_module
from workbench.widgets.dashboard import TuningDashboard, render_table
from workbench.widgets.dashboard_model import DashboardModel
from workbench.widgets.stepper import TraceStepper

# ---------------------------------------------------------------------------
# a fake landscape

FUNC = wb.workloads.matmul(64, 64, 64)


def loops_of(mod) -> dict[str, int]:
    (func,) = (f for _, f in mod.functions)
    return {s.loop_var.name: s.extent for s in iter_stmts(func.body) if isinstance(s, For)}


def space(sch):
    """Tile i and j in two levels each (innermost <= 16) and reorder."""
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, factors=sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
    j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, k, i1, j1)


class FakeMeasurer:
    """Fastest at i_1 = 4, j_1 = 16; a candidate with j_1 == 1 "crashes" and one with
    i_1 == 1 "times out" (when ``fail`` is set)."""

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.calls = 0

    def __call__(self, kernel) -> RunResult:
        self.calls += 1
        loops = loops_of(kernel.mod)
        if self.fail and loops["j_1"] == 1:
            return RunResult("crash", None, "fake crash: signal 11\nmore detail")
        if self.fail and loops["i_1"] == 1:
            return RunResult("timeout", None, "fake timeout after 10 s")
        dist = (math.log2(loops["i_1"]) - 2) ** 2 + (math.log2(loops["j_1"]) - 4) ** 2
        seconds = 1e-4 * math.exp(0.3 * dist)
        return RunResult("ok", Measurement(samples=(seconds,) * 3, number=1, repeat=3))


def fake_tune(trials=16, seed=0, fail=False, **kw) -> TuneResult:
    kw.setdefault("measurer", FakeMeasurer(fail))
    return wb.tune(FUNC, space, trials=trials, strategy="random", seed=seed,
                   builder=fake_builder, progress=False, **kw)


def table_trials(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'data-trial="(\d+)"', html)]


def rows_with_class(html: str, cls: str) -> list[int]:
    return [int(t) for c, t in re.findall(r'<tr class="([^"]*)" data-trial="(\d+)"', html)
            if cls in c.split()]


def final_ir(stepper: TraceStepper) -> str:
    return stepper.schedule.mod.script()


# ---------------------------------------------------------------------------
# a finished run


def test_dashboard_lists_every_candidate_marks_failures_and_the_best():
    result = fake_tune(trials=20, seed=1, fail=True)
    failed = [t for t in result.trials if not t.ok]
    assert failed and len(failed) < 20  # the run has both kinds
    dash = TuningDashboard(result)

    assert sorted(table_trials(dash.table_html)) == list(range(20))
    assert rows_with_class(dash.table_html, "wb-failed") == [t.index for t in failed]
    assert table_trials(dash.table_html)[-len(failed):] == [t.index for t in failed]
    best_index = next(t.index for t in result.trials if t.latency == result.best.latency)
    assert rows_with_class(dash.table_html, "wb-best") == [best_index]
    assert table_trials(dash.table_html)[0] == best_index  # fastest first
    for t in failed:
        assert f">{t.status}<" in dash.table_html
    assert "fake crash: signal 11" in dash.table_html
    assert "more detail" not in dash.table_html.split("title=")[0]  # first line only

    # the list: every candidate, fastest first, failures labelled
    labels = [label for label, _ in dash.selector.options]
    assert len(labels) == 20
    assert labels[0] == f"trial {best_index} — {result.best.latency * 1e3:.4g} ms (ok)"
    assert sum(label.endswith(("(crash)", "(timeout)")) for label in labels) == len(failed)

    header = dash.header.value
    assert f"20 trials ({len(failed)} failed)" in header
    assert f"best {result.best.latency * 1e3:.3f} ms" in header
    assert "GFLOPS" in header and "% of peak" in header
    assert dash.model.best.index == best_index
    assert dash.selected.index == best_index  # selected at first
    assert "wb-dashboard" in dash._dom_classes
    assert "wb-dashboard-plot" in dash.plot._dom_classes
    assert "wb-dashboard-table" in dash.table._dom_classes


def test_table_rows_carry_gflops_peak_decisions_and_origin():
    result = fake_tune(trials=6, seed=2)
    model = DashboardModel.from_result(result)
    flops = 2 * 64**3
    for row in model.rows():
        trial = model.trial(row.trial)
        assert row.latency_ms == pytest.approx(trial.latency * 1e3)
        assert row.gflops == pytest.approx(flops / trial.latency / 1e9)
        assert row.percent_of_peak == pytest.approx(100 * row.gflops / result.peak)
        assert row.decisions == trial.decisions and re.fullmatch(r"\d+x\d+ \d+x\d+",
                                                                 row.decisions)
        assert row.origin == "random" and not row.cached
    assert [r.latency_ms for r in model.rows()] == sorted(r.latency_ms for r in model.rows())


def test_selecting_a_trial_steps_through_its_trace_to_the_best_schedule():
    result = fake_tune(trials=12, seed=3)
    dash = TuningDashboard(result, numpy_time=2e-4)
    best = next(t for t in result.trials if t.latency == result.best.latency)
    dash.select(best.index)
    assert isinstance(dash.stepper, TraceStepper)
    assert dash.stepper in dash.stepper_box.children
    assert dash.stepper.trace.as_json() == best.trace.as_json()
    assert final_ir(dash.stepper) == result.best.schedule.mod.script()
    assert dash.stepper.step == len(best.trace)  # shows the candidate's IR
    assert best.decisions in dash.decisions.value
    assert "x numpy" in dash.header.value

    # picking another one in the list (what a click does) shows that one
    other = next(t for t in result.trials if t.index != best.index)
    dash.selector.value = other.index
    assert dash.selected == other
    sch = wb.Schedule(FUNC)
    other.trace.apply_to_schedule(sch)
    assert final_ir(dash.stepper) == sch.mod.script()
    assert rows_with_class(dash.table_html, "wb-selected") == [other.index]
    assert dash.message.value == ""

    dash.select(None)
    assert dash.selected is None and dash.stepper is None
    assert dash.stepper_box.children == () and dash.selector.value is None


def test_show_failures_and_sort_filter_table_and_list():
    result = fake_tune(trials=20, seed=1, fail=True)
    failed = {t.index for t in result.trials if not t.ok}
    dash = TuningDashboard(result)
    dash.select(min(failed))
    assert dash.selected.status in ("crash", "timeout")
    assert dash.stepper is not None  # a failed candidate's trace still replays
    assert dash.selected.status in dash.decisions.value

    dash.show_failures.value = False
    assert not failed & set(table_trials(dash.table_html))
    assert len(dash.selector.options) == 20 - len(failed)
    assert dash.selected is None and dash.stepper is None  # a hidden trial is deselected
    assert "<svg" in dash.plot_html  # the plot still marks them
    assert f"failed ({len(failed)})" in dash.plot_html

    dash.select(min(failed))  # from Python: shows failures again
    assert dash.show_failures.value and dash.model.show_failures

    dash.sort_by.value = "trial"
    assert table_trials(dash.table_html) == list(range(20))
    assert [v for _, v in dash.selector.options] == list(range(20))
    dash.sort_by.value = "status"
    statuses = [result.trials[i].status for i in table_trials(dash.table_html)]
    assert statuses[: 20 - len(failed)] == ["ok"] * (20 - len(failed))


def test_plot_html_is_an_svg_with_points_failures_best_line_and_numpy():
    result = fake_tune(trials=20, seed=1, fail=True, numpy_reference=1.5e-4)
    dash = TuningDashboard(result)
    svg = dash.plot_html
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    n_failed = len(result.failures)
    for label in ("best so far", "numpy", f"failed ({n_failed})",
                  f"candidate ({20 - n_failed})", "median latency (ms)", "trial"):
        assert label in svg, label
    data = dash.model.plot_data()
    assert data.failure_y > max(p[1] for p in data.points)
    assert [ms for _, ms in data.best_steps] == sorted(
        (ms for _, ms in data.best_steps), reverse=True)
    assert data.best == (dash.model.best.index, pytest.approx(result.best.latency * 1e3))
    spread = max(p[1] for p in data.points + ((0, 0.15, ""),)) / min(
        p[1] for p in data.points + ((0, 0.15, ""),))
    assert data.log_y == (spread > 10)
    # same input, same picture (stable ids, no date): notebooks can compare it
    assert TuningDashboard(result).plot_html == svg


# ---------------------------------------------------------------------------
# the database


def test_database_round_trip_shows_the_same_trials(tmp_path):
    db = Database(tmp_path / "db")
    result = fake_tune(trials=14, seed=4, fail=True, database=db)
    dash = TuningDashboard(db, FUNC)
    by_path = TuningDashboard(str(tmp_path / "db"), FUNC, select_best=False)

    def shown(trials):
        return [(t.status, t.latency, t.decisions, t.trace.as_json()) for t in trials]

    assert shown(dash.model.trials) == shown(result.trials)
    assert shown(by_path.model.trials) == shown(result.trials)
    assert all(t.cached for t in dash.model.trials)
    assert sorted(table_trials(dash.table_html)) == list(range(14))
    assert dash.model.best.latency == result.best.latency
    assert dash.selected.index == dash.model.best.index and by_path.selected is None
    assert final_ir(dash.stepper) == result.best.schedule.mod.script()
    assert "from the database" in dash.decisions.value
    assert f"14 trials ({len(result.failures)} failed)" in dash.header.value

    # one workload in the database: its stored TVMScript is parsed, no func needed
    assert shown(TuningDashboard(db).model.trials) == shown(result.trials)
    db.commit(wb.workloads.matmul(8, 8, 8), wb.Schedule(wb.workloads.matmul(8, 8, 8)).trace,
              wb.Measurement(samples=(1e-6,), number=1, repeat=1))
    with pytest.raises(ValueError, match=r"holds 2 workloads .*from_database\(db, func\)"):
        TuningDashboard(db)
    with pytest.raises(TypeError, match="expected schedule file names"):
        TuningDashboard([1, 2, 3])
    with pytest.raises(ValueError, match="not the function this result tuned"):
        TuningDashboard(result, wb.workloads.matmul(32, 32, 32))


def test_from_database_skips_unreadable_traces_and_keeps_order(tmp_path):
    db = Database(tmp_path)
    fake_tune(trials=5, seed=5, database=db)
    # a record whose trace names an instruction this version does not know
    line = json.loads((tmp_path / "records.jsonl").read_text().splitlines()[0])
    line["trace"] = [[["TeleportLoop", [], [], []]], []]
    with open(tmp_path / "records.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")
    result = TuneResult.from_database(tmp_path, FUNC)
    assert len(result.trials) == 5 and result.rejected == 1
    assert [t.index for t in result.trials] == list(range(5))
    assert result.strategy == "database" and result.flops == 2 * 64**3
    assert result.best.latency == min(r.median for r in db.records(FUNC) if r.ok)
    assert TuneResult.from_database(db, wb.workloads.matmul(8, 8, 8)).trials == []
    with pytest.raises(TypeError, match="expected a Database or its folder"):
        TuneResult.from_database(42, FUNC)


# ---------------------------------------------------------------------------
# following a run live


def test_live_dashboard_grows_during_the_run():
    dash = TuningDashboard.live(FUNC, numpy_time=2e-4, redraw_interval=0)
    assert "No trials yet" in dash.plot_html and "0 trials" in dash.header.value
    seen = []

    def inspect(trial):  # called after the dashboard took the trial
        seen.append((trial.index, len(dash.model), len(table_trials(dash.table_html)),
                     len(dash.selector.options), dash.header.value))

    result = dash.tune(space, trials=10, strategy="random", seed=6, builder=fake_builder,
                       measurer=FakeMeasurer(), progress=False, callback=inspect)
    assert [s[0] for s in seen] == list(range(10))
    assert [s[1] for s in seen] == list(range(1, 11))
    assert [s[2] for s in seen] == list(range(1, 11))  # the table grew trial by trial
    assert [s[3] for s in seen] == list(range(1, 11))
    assert all(f"{n} trial" in s[4] for n, s in zip(range(1, 11), seen))
    assert result.numpy_time == 2e-4  # the dashboard's numpy time went to wb.tune
    assert dash.model.trials == tuple(result.trials)
    assert dash.model.best.latency == result.best.latency
    assert dash.up_to_date and "<svg" in dash.plot_html and "x numpy" in dash.header.value
    assert dash.selected is None  # nothing is picked for the user in a live run


def test_live_with_wb_tune_callback_and_a_final_refresh():
    dash = TuningDashboard.live(FUNC, redraw_interval=3600)
    result = fake_tune(trials=12, seed=7, fail=True, callback=dash.add_trial)
    # the header follows every trial; plot and table wait for the next redraw
    assert f"12 trials ({len(result.failures)} failed)" in dash.header.value
    assert dash.redraws == 1 and not dash.up_to_date
    assert "No trials yet" in dash.plot_html
    dash.refresh()
    assert dash.redraws == 2 and dash.up_to_date
    assert sorted(table_trials(dash.table_html)) == list(range(12))
    assert dash.result.best.latency == result.best.latency


def test_redraws_are_throttled_during_a_fast_run():
    dash = TuningDashboard.live(FUNC)  # the default interval
    fake_tune(trials=20, seed=8, callback=dash.add_trial)
    # a fake trial takes milliseconds: far fewer redraws than trials
    assert 1 <= dash.redraws < 20
    assert len(dash.model) == 20 and "20 trials" in dash.header.value


def test_a_second_run_continues_the_trial_numbers():
    dash = TuningDashboard.live(FUNC, redraw_interval=0)
    dash.tune(space, trials=4, strategy="random", seed=1, builder=fake_builder,
              measurer=FakeMeasurer(), progress=False)
    dash.tune(space, trials=4, strategy="random", seed=2, builder=fake_builder,
              measurer=FakeMeasurer(), progress=False)
    assert [t.index for t in dash.model.trials] == list(range(8))
    assert sorted(table_trials(dash.table_html)) == list(range(8))


def test_real_tiny_tune_shows_up():
    func = wb.workloads.matmul(32, 32, 32)

    def seed_space(sch):
        block = sch.get_block("C")
        i, j, k = sch.get_loops(block)
        j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
        sch.reorder(i, j0, k, j1)

    dash = TuningDashboard.live(func)
    result = dash.tune(seed_space, trials=3, strategy="random", seed=0, progress=False)
    assert len(result.trials) == 3 and all(t.ok for t in result.trials)
    assert "<svg" in dash.plot_html
    assert sorted(table_trials(dash.table_html)) == [0, 1, 2]
    assert "3 trials" in dash.header.value and "GFLOPS" in dash.header.value
    best = dash.model.best  # the fastest search figure (result.best may be a re-measured
    dash.select(best.index)  # or a quieter one: TuneResult.best)
    chosen = next(t for t in result.trials if t.index == best.index)
    replayed = wb.Schedule(func)
    chosen.trace.apply_to_schedule(replayed)
    assert final_ir(dash.stepper) == replayed.mod.script()
    wb.verify(dash.stepper.schedule.mod, func)


# ---------------------------------------------------------------------------
# errors are shown, not raised


def trace_of_another_function() -> wb.Trace:
    """A trace of mm_relu (blocks Y and C, loop k of Y): it does not replay on matmul
    past get_block("Y")."""
    sch = wb.Schedule(wb.workloads.mm_relu(64, 64, 64))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.split(k, factors=[None, 8])
    return sch.trace


def test_selecting_a_trace_that_no_longer_replays_shows_a_message():
    result = fake_tune(trials=4, seed=9)
    model = DashboardModel.from_result(result)
    bad = model.add_trial(Trial(99, trace_of_another_function(), "ok", 5e-4, "", "zz"))
    assert bad.index == 99
    dash = TuningDashboard(model)
    dash.selector.value = 99  # a click in the list: must not raise
    assert dash.selected.index == 99
    assert "trial 99" in dash.message.value and "no longer replays" in dash.message.value
    assert "step 1" in dash.message.value and "Y" in dash.message.value
    assert dash.stepper.step == dash.stepper.model.last_step == 1  # where it stops
    with pytest.raises(wb.ScheduleError):
        model.replay(99)

    dash.selector.value = model.best.index  # a good one clears the message
    assert dash.message.value == ""


def test_widget_callbacks_never_raise(monkeypatch):
    result = fake_tune(trials=4, seed=10)
    dash = TuningDashboard(result, select_best=False)

    def broken(*args, **kwargs):
        raise RuntimeError("stepper exploded")

    monkeypatch.setattr(dashboard_module, "make_trace_stepper", broken)
    dash.selector.value = 2
    assert dash.selected.index == 2 and dash.stepper is None
    assert "stepper exploded" in dash.message.value and "trial 2" in dash.message.value

    monkeypatch.setattr(dashboard_module, "render_plot", broken)
    dash.sort_by.value = "trial"  # the redraw fails: shown, not raised
    assert "sort: RuntimeError: stepper exploded" in dash.message.value
    before = len(dash.model)
    dash.redraw_interval = 0
    dash.add_trial(dash.model.trials[0])  # a drawing error does not stop a tuning run
    assert len(dash.model) == before + 1
    assert "could not redraw" in dash.message.value


def test_python_api_refuses_bad_input():
    dash = TuningDashboard(fake_tune(trials=3, seed=11))
    with pytest.raises(ValueError, match=r"there is no trial 7 \(the dashboard has 3 trials\)"):
        dash.select(7)
    with pytest.raises(TypeError, match="expected a trial index"):
        dash.select("best")
    with pytest.raises(TypeError, match="expected a Trial"):
        dash.add_trial({"index": 0})
    with pytest.raises(ValueError, match="sort: expected one of"):
        dash.model.sort = "speed"
    with pytest.raises(ValueError, match="numpy_time must be a positive time"):
        TuningDashboard.live(FUNC, numpy_time=-1)
    with pytest.raises(ValueError, match='syntax must be "classic" or "tirx"'):
        TuningDashboard.live(FUNC, syntax="tvm")
    assert repr(dash).startswith("TuningDashboard(matmul: 3 trials, best ")


def test_table_shows_at_most_max_rows():
    rows = DashboardModel.from_result(fake_tune(trials=12, seed=12)).rows()
    html = render_table(rows, max_rows=5)
    assert len(table_trials(html)) == 5 and "and 7 more" in html
    assert len(table_trials(render_table(rows, max_rows=None))) == 12


# ---------------------------------------------------------------------------
# TuneResult in a notebook


def test_tune_result_html_has_summary_plot_and_the_fastest_ten():
    result = fake_tune(trials=16, seed=13, fail=True)
    html = result._repr_html_()
    assert html.startswith(f"<p><b>{result.summary()}</b></p>")
    assert "<svg" in html and "best so far" in html
    body = html.split("<tbody>")[1].split("</tbody>")[0]
    shown = [int(x) for x in re.findall(r"<tr>\s*<td>(\d+)</td>", body)]
    fastest = sorted((t for t in result.trials if t.ok), key=lambda t: (t.latency, t.index))
    assert shown == [t.index for t in fastest[:10]]
    assert "The 10 fastest of 16 trials" in html
    assert len(repr(result)) < 200  # the text repr stays one line
