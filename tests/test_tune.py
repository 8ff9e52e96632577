"""wb.tune: random and evolutionary search, mutators, database use, interrupts, results.

Most tests run the search against a *fake landscape*: a stand-in builder that skips the
C compiler and a measurer that derives a latency from the candidate's loop nest (the
tile sizes its decisions produced), deterministically. One test tunes for real: built
kernels measured in the isolated worker.
"""

from __future__ import annotations

import math
import random
import statistics

import numpy as np
import pytest

import workbench as wb
from workbench.ir import For, iter_stmts
from workbench.runtime.isolation import RunResult
from workbench.runtime.timing import Measurement
from workbench.search import Database, TuneResult
from workbench.search.cost_model import CostModel, candidate_features
from workbench.search.evolutionary import CandidateFactory, describe_decisions
from workbench.search.mutators import (
    mutate,
    mutate_categorical,
    mutate_compute_location,
    mutate_tile_size,
    sampling_steps,
)
from workbench.testing import fake_builder, stochastic_schedule_mm

# ---------------------------------------------------------------------------
# a fake landscape




def loops_of(mod) -> dict[str, For]:
    (func,) = (f for _, f in mod.functions)
    return {s.loop_var.name: s for s in iter_stmts(func.body) if isinstance(s, For)}


def ok(seconds: float) -> RunResult:
    return RunResult("ok", Measurement(samples=(seconds,) * 3, number=1, repeat=3))


# The best tiles of the landscape, per loop, outermost first (matmul 256^3).
TARGET = {"i": (4, 4, 4, 4), "j": (2, 4, 2, 16), "k": (32, 8)}


def landscape_space(sch):
    """Tiles i and j in four levels and k in two, plus an unroll step (categorical)."""
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    i_t = sch.split(i, factors=sch.sample_perfect_tile(i, n=4, max_innermost_factor=64))
    j_t = sch.split(j, factors=sch.sample_perfect_tile(j, n=4, max_innermost_factor=64))
    k_t = sch.split(k, factors=sch.sample_perfect_tile(k, n=2, max_innermost_factor=64))
    sch.reorder(i_t[0], j_t[0], i_t[1], j_t[1], k_t[0], i_t[2], j_t[2], k_t[1], i_t[3], j_t[3])
    step = sch.sample_categorical([0, 16, 64, 512], [0.25] * 4)
    sch.annotate(i_t[0], "pragma_auto_unroll_max_step", step)
    return sch


class FakeMeasurer:
    """Latency from the loop nest: a bowl in log2 tile sizes around TARGET, slower
    unless the unroll step is 64. Counts calls and what it measured."""

    def __init__(self, fail=None, interrupt_at=None):
        self.calls = 0
        self.sources: list[str] = []
        self.fail = fail
        self.interrupt_at = interrupt_at

    def latency(self, mod) -> float:
        loops = loops_of(mod)
        dist = 0.0
        for name, target in TARGET.items():
            for level, want in enumerate(target):
                have = loops[f"{name}_{level}"].extent
                dist += (math.log2(have) - math.log2(want)) ** 2
        step = dict(loops["i_0"].annotations)["pragma_auto_unroll_max_step"]
        return 1e-4 * math.exp(0.15 * dist) * (1.0 if step == 64 else 1.2)

    def __call__(self, kernel) -> RunResult:
        if self.interrupt_at is not None and self.calls == self.interrupt_at:
            raise KeyboardInterrupt
        self.calls += 1
        self.sources.append(wb.lower(kernel.mod).script())
        if self.fail is not None:
            failure = self.fail(loops_of(kernel.mod))
            if failure:
                return RunResult(failure, None, f"fake {failure}")
        return ok(self.latency(kernel.mod))


FUNC = wb.workloads.matmul(256, 256, 256)


def fake_tune(trials=24, strategy="evolutionary", seed=0, measurer=None, **kw) -> TuneResult:
    return wb.tune(FUNC, landscape_space, trials=trials, strategy=strategy, seed=seed,
                   measurer=measurer or FakeMeasurer(), builder=fake_builder, progress=False,
                   **kw)


def signature(result: TuneResult) -> list[tuple]:
    return [(t.status, t.latency, t.decisions, t.source_hash) for t in result.trials]


# ---------------------------------------------------------------------------
# determinism, dedup, strategies


@pytest.mark.parametrize("strategy", ["random", "evolutionary"])
def test_same_seed_same_search(strategy):
    a = fake_tune(trials=24, strategy=strategy, seed=7)
    b = fake_tune(trials=24, strategy=strategy, seed=7)
    c = fake_tune(trials=24, strategy=strategy, seed=8)
    assert len(a.trials) == 24 and a.seed == 7
    assert signature(a) == signature(b)
    assert signature(a) != signature(c)
    assert a.best.trace.script() == b.best.trace.script()


def test_cost_model_search_is_deterministic_too():
    a = fake_tune(trials=24, seed=3, cost_model=True)
    b = fake_tune(trials=24, seed=3, cost_model=True)
    assert signature(a) == signature(b)


def test_no_candidate_is_measured_twice():
    measurer = FakeMeasurer()
    result = fake_tune(trials=40, seed=1, measurer=measurer)
    assert measurer.calls == 40
    assert len(set(measurer.sources)) == 40  # distinct programs
    keys = {t.trace.as_json() for t in result.trials}
    assert len(keys) == 40
    assert len({t.source_hash for t in result.trials}) == 40


def test_small_space_is_exhausted_not_repeated():
    """The seed's space for matmul 128 (a 2-way split of j, innermost <= 16) has five
    schedules: asking for 64 trials measures each once and says the space ran out."""
    def seed_space(sch):
        b = sch.get_block("C")
        i, j, k = sch.get_loops(b)
        j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
        sch.reorder(i, j0, k, j1)

    calls = []
    result = wb.tune(wb.workloads.matmul(128, 128, 128), seed_space, trials=64, seed=0,
                     builder=fake_builder, progress=False,
                     measurer=lambda k: calls.append(k) or ok(1e-3 / len(calls)))
    assert len(result.trials) == len(calls) == 5
    assert result.exhausted
    assert sorted(t.decisions for t in result.trials) == [
        "128x1", "16x8", "32x4", "64x2", "8x16"]
    assert "space exhausted" in repr(result)


def test_evolutionary_beats_random_on_a_structured_landscape():
    """The landscape is a bowl around one tiling: mutating the best traces walks down
    it, random sampling only stumbles on good points. Same budget, several seeds."""
    evo, rnd = [], []
    for seed in range(5):
        evo.append(fake_tune(trials=48, strategy="evolutionary", seed=seed).best.latency)
        rnd.append(fake_tune(trials=48, strategy="random", seed=seed).best.latency)
    wins = sum(e < r for e, r in zip(evo, rnd))
    assert wins >= 4, (evo, rnd)
    assert statistics.geometric_mean(evo) < 0.8 * statistics.geometric_mean(rnd)


def test_evolutionary_children_are_mutants_of_measured_traces():
    result = fake_tune(trials=32, seed=2)
    origins = [t.origin for t in result.trials]
    assert origins[:8] == ["random"] * 8  # the initial population
    assert origins.count("mutant") >= 16


# ---------------------------------------------------------------------------
# database


def test_database_records_every_trial_and_a_second_run_skips_them(tmp_path):
    db = Database(tmp_path / "db")
    first = fake_tune(trials=12, seed=4, database=db)
    assert len(db.records(FUNC)) == 12
    assert not any(t.cached for t in first.trials)
    stored = {r.median for r in db.records(FUNC)}
    assert stored == {t.latency for t in first.trials}

    measurer = FakeMeasurer()
    again = fake_tune(trials=12, seed=4, database=tmp_path / "db", measurer=measurer)
    assert measurer.calls == 0  # everything came from the database
    assert all(t.cached for t in again.trials)
    assert signature(again) == signature(first)

    more = fake_tune(trials=20, seed=4, database=db, measurer=measurer)
    assert measurer.calls == 8
    assert sum(t.cached for t in more.trials) == 12
    assert len(Database(tmp_path / "db").records(FUNC)) == 20
    assert Database(tmp_path / "db").best_record(FUNC).median == more.best.latency


def test_interrupt_returns_what_was_measured(tmp_path):
    db = Database(tmp_path)
    measurer = FakeMeasurer(interrupt_at=5)
    result = fake_tune(trials=20, seed=0, database=db, measurer=measurer)
    assert result.interrupted
    assert len(result.trials) == 5
    assert len(db.records(FUNC)) == 5
    assert result.best is not None
    assert "interrupted" in repr(result)
    # resuming measures only what is missing
    resumed = fake_tune(trials=20, seed=0, database=db)
    assert sum(t.cached for t in resumed.trials) == 5
    assert len(Database(tmp_path).records(FUNC)) == 20


# ---------------------------------------------------------------------------
# failures, table, plot


def crash_or_timeout(loops):
    if loops["j_3"].extent == 1:
        return "crash"
    if loops["k_1"].extent == 1:
        return "timeout"
    return None


def test_failures_are_recorded_table_and_plot_mark_them(tmp_path):
    db = Database(tmp_path)
    result = fake_tune(trials=32, seed=5, measurer=FakeMeasurer(fail=crash_or_timeout),
                       database=db, numpy_reference=2e-4)
    failed = [t for t in result.trials if not t.ok]
    assert {t.status for t in failed} == {"crash", "timeout"}
    assert all(t.latency is None and t.error.startswith("fake") for t in failed)
    assert result.best.latency == min(t.latency for t in result.trials if t.ok)
    assert {r.status for r in db.records(FUNC)} == {"ok", "crash", "timeout"}

    table = result.table
    assert list(table.columns[:7]) == ["trial", "status", "latency_ms", "gflops",
                                       "fraction_of_peak", "decisions", "source_hash"]
    assert table["latency_ms"].isna().sum() == len(failed)
    row = table[table.status == "ok"].iloc[0]
    assert row.gflops == pytest.approx(2 * 256**3 / (row.latency_ms * 1e-3) / 1e9)

    fig = result.plot()
    ax = fig.axes[0]
    crosses = [ln for ln in ax.get_lines() if ln.get_marker() == "x"]
    assert len(crosses) == 1
    assert list(crosses[0].get_xdata()) == [t.index for t in failed]
    assert min(crosses[0].get_ydata()) > table.latency_ms.max()  # at the top
    labels = [ln.get_label() for ln in ax.get_lines()]
    assert "best so far" in labels and "numpy" in labels
    assert ax.get_xlabel() == "trial" and "latency" in ax.get_ylabel()
    steps = next(ln for ln in ax.get_lines() if ln.get_label() == "best so far")
    assert list(steps.get_ydata()) == sorted(steps.get_ydata(), reverse=True)


def test_plot_uses_log_scale_for_wide_ranges():
    result = fake_tune(trials=16, strategy="random", seed=0)
    spread = max(t.latency for t in result.trials) / min(t.latency for t in result.trials)
    assert result.plot().axes[0].get_yscale() == ("log" if spread > 10 else "linear")


def test_result_summary_html_and_best_schedule():
    result = fake_tune(trials=8, seed=0, numpy_reference=1e-4)
    text = repr(result)
    assert text.startswith("TuneResult(matmul: 8 trials, best ")
    assert "x numpy" in text
    html = result._repr_html_()
    assert "<table" in html and "best" in html
    assert "<svg" in html and "best so far" in html  # the plot, inline
    best = result.best
    assert best.gflops == pytest.approx(2 * 256**3 / best.latency / 1e9)
    sch = best.schedule
    assert sch.trace.as_json() == best.trace.as_json()
    assert describe_decisions(best.trace) == result.table.decisions[
        result.table.latency_ms.idxmin()]


def test_progress_bar_runs(capsys):
    result = wb.tune(FUNC, landscape_space, trials=4, seed=0, measurer=FakeMeasurer(),
                     builder=fake_builder, progress=True)
    assert len(result.trials) == 4
    err = capsys.readouterr().err
    assert "4/4" in err and "best_ms=" in err and "GFLOPS=" in err


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"trials": 0}, "trials must be a positive integer"),
        ({"strategy": "annealing"}, "unknown strategy 'annealing'"),
        ({"target": "opencl"}, "target 'opencl' is not supported"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"timeout": -1}, "timeout must be a positive number"),
        ({"numpy_reference": "fast"}, "numpy_reference must be numpy's time"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        wb.tune(FUNC, landscape_space, progress=False, builder=fake_builder,
                measurer=FakeMeasurer(), **kwargs)


def test_space_that_refuses_counts_as_rejected_not_as_a_trial():
    """A space raising ScheduleError (here: vectorizing the reduction loop k_1 whenever
    j's innermost tile is 1) gives no candidate; the search draws another."""
    def picky(sch):
        landscape_space(sch)
        loops = sch.get_loops(sch.get_block("C"))
        if sch.get(loops[-1]).extent == 1:
            sch.vectorize(loops[7])  # k_1, a reduction loop: NotDataParallelError

    plain = fake_tune(trials=16, strategy="random", seed=0)
    picky_result = wb.tune(FUNC, picky, trials=16, strategy="random", seed=0,
                           measurer=FakeMeasurer(), builder=fake_builder, progress=False)
    assert len(picky_result.trials) == 16
    assert picky_result.rejected > 0 and plain.rejected == 0
    j_tiles = [t.decisions.split()[1] for t in picky_result.trials]
    assert not any(tiles.endswith("x1") for tiles in j_tiles)


# ---------------------------------------------------------------------------
# mutators


def sampled_trace(seed=0):
    sch = wb.Schedule(FUNC, seed=seed)
    landscape_space(sch)
    return sch.trace


def test_tile_mutation_keeps_the_product_and_the_innermost_limit():
    trace = sampled_trace()
    rng = random.Random(0)
    steps = [i for i in sampling_steps(trace) if trace.insts[i].kind == "SamplePerfectTile"]
    for i in steps:
        old = trace.insts[i].decision
        for _ in range(50):
            new = mutate_tile_size(trace, i, rng)
            assert new != tuple(old)
            assert math.prod(new) == math.prod(old)
            assert new[-1] <= 64
    child = trace.with_decision(steps[0], mutate_tile_size(trace, steps[0], rng))
    child.apply_to_schedule(wb.Schedule(FUNC))  # replays


def test_categorical_mutation_picks_another_possible_index():
    sch = wb.Schedule(FUNC)
    sch.sample_categorical([1, 2, 4, 8], [1, 0, 1, 1], decision=0)
    picks = {mutate_categorical(sch.trace, 0, random.Random(s)) for s in range(40)}
    assert picks == {2, 3}


def test_compute_location_mutation_gives_a_legal_location():
    func = wb.workloads.mm_relu(64, 64, 64)
    sch = wb.Schedule(func, seed=0)
    b = sch.get_block("Y")
    i, j = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, factors=[None, 8])
    loc = sch.sample_compute_location(b, decision=0)
    sch.compute_at(b, loc)
    (index,) = sampling_steps(sch.trace)
    assert sch.trace.insts[index].kind == "SampleComputeLocation"
    seen = set()
    for s in range(30):
        new = mutate_compute_location(sch.trace, index, random.Random(s), func)
        assert new != 0
        seen.add(new)
        replayed = wb.Schedule(func)
        sch.trace.with_decision(index, new).apply_to_schedule(replayed)
        wb.verify(replayed.mod, func)
    # Y (a reduction) cannot be inlined: root, or under i, j_0 or j_1 of C
    assert seen == {-1, 1, 2}


def test_mutate_changes_exactly_one_decision():
    trace = sampled_trace(3)
    rng = random.Random(0)
    for _ in range(20):
        new, change = mutate(trace, FUNC, rng)
        diff = [i for i in sampling_steps(trace)
                if new.insts[i].decision != trace.insts[i].decision]
        assert diff == [change.index]
        assert change.old == trace.insts[change.index].decision


def test_mutate_returns_none_without_decisions():
    sch = wb.Schedule(FUNC)
    sch.get_loops(sch.get_block("C"))
    assert mutate(sch.trace, FUNC, random.Random(0)) is None


# ---------------------------------------------------------------------------
# cost model


def test_cost_model_ranks_unseen_candidates_on_the_fake_landscape():
    factory = CandidateFactory(FUNC, landscape_space)
    cands = [c for c in (factory.sample(s) for s in range(160)) if c is not None]
    truth = FakeMeasurer()
    lat = [truth.latency(c.mod) for c in cands]
    model = CostModel().fit(cands[:100], lat[:100])
    pred = model.predict(cands[100:])
    rank = np.argsort(np.argsort(pred))
    true_rank = np.argsort(np.argsort(lat[100:]))
    rho = np.corrcoef(rank, true_rank)[0, 1]
    assert rho > 0.6
    assert "inner1" in candidate_features(cands[0])


def test_cost_model_guided_search_does_better_on_the_fake_landscape():
    """Same seeds, same budget: ranking children with the model before measuring them
    reaches lower latencies (the fake landscape is smooth in log tile sizes, which the
    model's features describe; see the report for real measurements)."""
    plain, guided = [], []
    for seed in range(4):
        plain.append(fake_tune(trials=40, seed=seed).best.latency)
        guided.append(fake_tune(trials=40, seed=seed, cost_model=True).best.latency)
    assert statistics.geometric_mean(guided) < statistics.geometric_mean(plain)


def test_cost_model_refuses_bad_input():
    factory = CandidateFactory(FUNC, landscape_space)
    cands = [factory.sample(s) for s in range(3)]
    with pytest.raises(ValueError, match="not been fit"):
        CostModel().predict(cands)
    with pytest.raises(ValueError, match="3 candidates but 2 latencies"):
        CostModel().fit(cands, [1.0, 2.0])


# ---------------------------------------------------------------------------
# a real tuning run


seed_space = stochastic_schedule_mm  # the MLC course's space


def test_real_tuning_finds_a_faster_kernel_than_the_unscheduled_one(tmp_path):
    from workbench.runtime.isolation import default_worker

    func = wb.workloads.matmul(128, 128, 128)
    result = wb.tune(func, seed_space, trials=8, seed=0, database=tmp_path, progress=False)
    assert result.exhausted and len(result.trials) == 5  # the space has 5 schedules
    assert all(t.status == "ok" for t in result.trials)
    unscheduled = default_worker().measure_kernel(wb.build(func), repeat=3, min_repeat_ms=50)
    assert unscheduled.ok
    assert result.best.latency < 0.7 * unscheduled.measurement.median
    kernel = result.best.build()
    wb.verify(result.best.schedule.mod, func)
    assert kernel.source_hash == next(
        t.source_hash for t in result.trials if t.index == result.best.trial)
    assert len(result.final) == 3  # the 3 fastest, again
    # the best is a re-measured figure unless every re-measurement was noisy while some
    # search figure was quiet (TuneResult.best prefers quiet figures)
    quiet_final = any(not t.noisy for t in result.final)
    quiet_search = any(not t.noisy for t in result.trials)
    assert result.best.remeasured == (quiet_final or not quiet_search)
    assert len(Database(tmp_path).records(func)) == 5


def test_callback_sees_every_trial_in_order():
    seen = []
    result = fake_tune(trials=10, seed=3, callback=seen.append)
    assert [t.index for t in seen] == list(range(10))
    assert seen == result.trials


def test_callback_exception_propagates_and_keeps_the_database(tmp_path):
    def stop_after_three(trial):
        if trial.index == 2:
            raise RuntimeError("dashboard closed")

    db = wb.Database(tmp_path / "db")
    with pytest.raises(RuntimeError, match="dashboard closed"):
        fake_tune(trials=10, seed=3, database=db, callback=stop_after_three)
    assert len(wb.Database(tmp_path / "db").table()) == 3


def test_best_prefers_a_quiet_figure_over_a_noisy_one():
    """A busy machine during the final re-measurement must not crown a noisy figure
    over quiet ones: quiet re-measured, then quiet searched, then anything."""
    from workbench.search.result import Trial, TuneResult

    func = wb.workloads.matmul(16, 16, 16)
    trace = wb.Schedule(func).trace

    def trial(index, latency, noisy, remeasured=False):
        return Trial(index, trace, "ok", latency, "", f"h{index}", noisy=noisy, cv=0.3 if noisy
                     else 0.01, remeasured=remeasured)

    search = [trial(0, 3e-6, False), trial(1, 2e-6, False), trial(2, 1e-6, True)]
    all_noisy = [trial(1, 0.5e-6, True, True), trial(2, 0.7e-6, True, True)]
    result = TuneResult(func, search, flops=8192, wall_time=1, final=all_noisy)
    assert (result.best.trial, result.best.latency, result.best.noisy) == (1, 2e-6, False)
    one_quiet = [trial(1, 2.5e-6, False, True), trial(2, 0.7e-6, True, True)]
    result = TuneResult(func, search, flops=8192, wall_time=1, final=one_quiet)
    assert (result.best.trial, result.best.remeasured) == (1, True)
    nothing_quiet = [trial(2, 1e-6, True)]
    result = TuneResult(func, nothing_quiet, flops=8192, wall_time=1, final=all_noisy)
    assert (result.best.trial, result.best.noisy) == (1, True)
