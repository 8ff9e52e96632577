"""TraceStepper and its model: the IR at every step equals an independent replay of the
trace's prefix; navigation (slider, previous/next, play, "only steps that change the
IR") agrees; sampled decisions are listed, edited and refused all-or-nothing; a trace
that fails shows its error at the failing step; measuring times the schedule.

Widgets are driven from Python (``.value``, ``.click()``) and the assertions read the
model and the rendered HTML, so no browser is needed.
"""

from __future__ import annotations

import math
import re
import time

import pytest

import workbench as wb
from workbench.schedule.primitives.sampling import compute_location_candidates, perfect_tilings
from workbench.widgets.stepper import TraceStepper
from workbench.widgets.stepper_model import (
    MAX_CHOICES,
    StepperModel,
    perfect_tile_choices,
)

# ---------------------------------------------------------------------------
# traces


def mlc_trace(n: int = 64) -> tuple[wb.PrimFunc, wb.Trace]:
    """The MLC chapter's mm_relu schedule: split j by 4, reorder, move relu under
    j_0, decompose the reduction."""
    func = wb.workloads.mm_relu(n, n, n)
    sch = wb.Schedule(func)
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(blk, k)
    return func, sch.trace


def stochastic_trace(tile=(4, 16), unroll=1, location=1) -> tuple[wb.PrimFunc, wb.Trace]:
    """Tile relu's j (sampled), annotate unroll (sampled), compute the matmul at a
    sampled location among relu's loops. Steps: 3 tile, 5 unroll, 8 location."""
    func = wb.workloads.mm_relu(64, 64, 64)
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    i, j = sch.get_loops(c)
    tiles = sch.sample_perfect_tile(j, n=2, max_innermost_factor=64, decision=list(tile))
    sch.split(j, factors=tiles)
    u = sch.sample_categorical([0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25], decision=unroll)
    sch.annotate(i, "pragma_auto_unroll_max_step", u)
    y = sch.get_block("Y")
    loc = sch.sample_compute_location(y, decision=location)
    sch.compute_at(y, loc)
    return func, sch.trace


TILE, UNROLL, LOCATION = 3, 5, 8


def long_trace() -> tuple[wb.PrimFunc, wb.Trace]:
    """A 30+ step trace on mm_relu 128^3 (lookups, sampling, loop transformations)."""
    func = wb.workloads.mm_relu(128, 128, 128)
    sch = wb.Schedule(func)
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    i0, i1 = sch.split(i, factors=sch.sample_perfect_tile(i, n=2, decision=[8, 16]))
    j0, j1, j2 = sch.split(j, factors=sch.sample_perfect_tile(j, n=3, decision=[4, 8, 4]))
    k0, k1 = sch.split(k, factors=[None, 8])
    sch.reorder(i0, j0, i1, j1, k0, k1, j2)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(sch.get_block("Y"), k0)
    loops = sch.get_loops(sch.get_block("Y_update"))
    sch.vectorize(loops[-1])
    u = sch.sample_categorical([0, 16, 64, 512], [0.25] * 4, decision=1)
    sch.annotate(loops[0], "pragma_auto_unroll_max_step", u)
    sch.parallel(loops[0])
    for _ in range(4):
        sch.get_loops(sch.get_block("C"))
        sch.get_loops(sch.get_block("Y_init"))
    c_loops = sch.get_loops(sch.get_block("C"))
    sch.vectorize(c_loops[-1])
    assert len(sch.trace) >= 30
    return func, sch.trace


def replayed(func, trace: wb.Trace, steps: int) -> str:
    """The IR after the first ``steps`` instructions, replayed independently."""
    sch = wb.Schedule(func)
    wb.Trace(trace.insts[:steps]).apply_to_schedule(sch)
    return sch.func.script()


def first_grid_line(text: str) -> str:
    return next(line.strip() for line in text.splitlines() if "for " in line)


# ---------------------------------------------------------------------------
# the IR at each step


@pytest.mark.parametrize("make", [mlc_trace, stochastic_trace])
def test_ir_at_every_step_matches_an_independent_replay(make):
    func, trace = make()
    stepper = TraceStepper(trace, func)
    assert stepper.slider.max == len(trace) and stepper.step == 0
    assert stepper.model.text(0) == func.script()
    assert stepper.diff.layout.display == "none" and "mm_relu" in stepper.code.value
    for step in range(1, len(trace) + 1):
        stepper.step = step
        assert stepper.slider.value == step
        assert stepper.diff.before_text == replayed(func, trace, step - 1)
        assert stepper.diff.after_text == replayed(func, trace, step)
        assert stepper.model.instruction() == trace.lines()[step - 1]
        assert "wb-current" in stepper.listing.value
    assert stepper.schedule.func.script() == replayed(func, trace, len(trace))
    assert stepper.error == ""


def test_step_zero_is_the_original_and_the_header_says_so():
    func, trace = mlc_trace()
    stepper = TraceStepper(trace, func)
    assert "the original function" in stepper.instruction.value
    assert stepper.decision_box.layout.display == "none"
    stepper.step = 3  # the split
    assert "changes the IR" in stepper.instruction.value
    assert "sch.split" in stepper.instruction.value
    assert "wb-step-instruction" in stepper.instruction._dom_classes
    assert "wb-stepper" in stepper._dom_classes
    stepper.step = 1
    assert "lookup" in stepper.instruction.value
    assert "no change to the IR" in stepper.diff.html_widget.value


def test_current_instruction_is_marked_in_the_listing():
    func, trace = mlc_trace()
    stepper = TraceStepper(trace, func)
    stepper.step = 4
    current = re.findall(r'<span class="wb-trace-line wb-current"[^>]*>(.*?)</span>\n',
                         stepper.listing.value)
    assert len(current) == 1
    assert "reorder" in current[0] and "4 ▶" in current[0]
    assert stepper.listing.value.count("wb-trace-line") == len(trace)


def test_next_previous_slider_and_play_agree():
    func, trace = mlc_trace()
    stepper = TraceStepper(trace, func)
    assert stepper.next() == 1 and stepper.slider.value == 1
    stepper.next_button.click()
    assert stepper.step == 2 and stepper.model.step == 2
    stepper.prev_button.click()
    assert stepper.step == 1
    stepper.slider.value = 5
    assert stepper.step == 5 and stepper.play.value == 5
    assert stepper.diff.after_text == replayed(func, trace, 5)
    stepper.play.value = 2  # the Play widget ticking
    assert stepper.step == 2 and stepper.slider.value == 2
    stepper.step = len(trace)
    assert stepper.next() == len(trace) and stepper.next_button.disabled
    stepper.step = 0
    assert stepper.previous() == 0 and stepper.prev_button.disabled


def test_only_changes_skips_lookups():
    func, trace = mlc_trace()
    kinds = [inst.kind for inst in trace]
    stepper = TraceStepper(trace, func)
    stepper.only_changes.value = True
    visited = [stepper.step]
    while True:
        before = stepper.step
        if stepper.next() == before:
            break
        visited.append(stepper.step)
    expected = [0] + [n + 1 for n, k in enumerate(kinds) if k not in ("GetBlock", "GetLoops")]
    assert visited == expected
    assert all(stepper.model.changes_ir(s) for s in visited[1:])
    # previous walks the same steps back; Play runs over them too
    back = [stepper.step]
    while stepper.previous() != back[-1]:
        back.append(stepper.step)
    assert back == visited[::-1]
    assert stepper.play.max == len(visited) - 1
    stepper.play.value = 2
    assert stepper.step == visited[2]
    stepper.only_changes.value = False
    assert stepper.play.max == len(trace)
    assert stepper.next() == visited[2] + 1


def test_only_changes_keeps_sampling_steps():
    func, trace = stochastic_trace()
    model = StepperModel(trace, func)
    model.only_changes = True
    assert model.visible_steps() == [0, TILE, 4, UNROLL, 6, LOCATION, 9]
    assert not model.changes_ir(TILE) and model.is_sampling(TILE)


def test_step_setter_refuses_out_of_range():
    func, trace = mlc_trace()
    stepper = TraceStepper(trace, func)
    with pytest.raises(ValueError, match=r"steps go from 0 to 7"):
        stepper.step = 8
    with pytest.raises(TypeError):
        stepper.step = "2"
    assert stepper.step == 0


# ---------------------------------------------------------------------------
# decisions


def test_decision_choices_of_each_sampling_kind():
    func, trace = stochastic_trace()
    model = StepperModel(trace, func)
    tiles = model.decision_choices(TILE)
    assert [c.decision for c in tiles.choices] == [tuple(t) for t in perfect_tilings(64, 2, 64)]
    assert tiles.decision == (4, 16) and tiles.choices[tiles.index].decision == (4, 16)
    assert 'loop "j" (extent 64)' in tiles.note and not tiles.truncated
    unroll = model.decision_choices(UNROLL)
    assert [c.decision for c in unroll.choices] == [0, 1, 2, 3]
    assert unroll.choices[1].label == "16 (p=0.25)" and unroll.index == 1
    where = model.decision_choices(LOCATION)
    # the legal locations of Y at that point, computed independently
    sch = wb.Schedule(func)
    wb.Trace(trace.insts[: LOCATION - 1]).apply_to_schedule(sch)
    legal = [d for d, _ in compute_location_candidates(sch.func, "Y")]
    assert [c.decision for c in where.choices] == legal == [-1, 0, 1, 2]
    assert where.choices[where.index].label == "1: loop j_0"
    assert model.decision_choices(4) is None


def test_many_tilings_are_capped_and_counted():
    tiles, total = perfect_tile_choices(4096, 6, max_innermost_factor=64)
    assert total > MAX_CHOICES and len(tiles) == MAX_CHOICES
    assert all(math.prod(t) == 4096 and t[-1] <= 64 for t in tiles)
    assert tiles == sorted(tiles) and len(set(tiles)) == len(tiles)
    func = wb.workloads.matmul(16, 4096, 16)
    sch = wb.Schedule(func)
    j = sch.get_loops(sch.get_block("C"))[1]
    sch.sample_perfect_tile(j, n=6, max_innermost_factor=64, decision=[1, 1, 1, 1, 64, 64])
    choices = StepperModel(sch.trace, func).decision_choices(3)
    assert choices.truncated and choices.total == total
    assert f"first {MAX_CHOICES} of {total}" in choices.note
    assert choices.choices[choices.index].decision == (1, 1, 1, 1, 64, 64)  # listed anyway


def test_editing_a_tile_changes_the_replayed_ir():
    func, trace = stochastic_trace()
    stepper = TraceStepper(trace, func)
    stepper.step = TILE
    assert stepper.decision_box.layout.display is None
    chosen = next(n for n, (label, _) in enumerate(stepper.decision.options) if label == "[16, 4]")
    stepper.decision.value = chosen  # as a user picking it
    assert stepper.error == ""
    assert stepper.trace[TILE - 1].decision == (16, 4)
    assert stepper.step == TILE
    stepper.step = 4
    assert "for i, j_0, j_1 in T.grid(64, 16, 4):" in stepper.diff.after_text
    expected = stochastic_trace(tile=(16, 4))[1]
    assert stepper.model.text(len(trace)) == replayed(func, expected, len(expected))
    assert "decision=[16, 4]" in stepper.trace.script()


def test_set_decision_from_python_for_categorical_and_location():
    func, trace = stochastic_trace()
    stepper = TraceStepper(trace, func)
    assert stepper.set_decision(UNROLL, 3)
    assert stepper.set_decision(LOCATION, -1)
    expected = stochastic_trace(unroll=3, location=-1)[1]
    assert stepper.schedule.func.script() == replayed(func, expected, len(expected))
    assert '"pragma_auto_unroll_max_step": 512' in stepper.schedule.func.script()
    with pytest.raises(ValueError, match=r"samples no decision; the sampling steps are \[3, 5"):
        stepper.set_decision(4, [1, 64])


def test_decision_that_breaks_a_later_step_is_refused_and_nothing_changes():
    func, trace = stochastic_trace()
    stepper = TraceStepper(trace, func)
    stepper.step = TILE
    before_text = stepper.model.text(len(trace))
    before_json = stepper.trace.as_json()
    # j_0 becomes a unit loop: the sampled location (loop j_0) is no longer legal
    assert not stepper.set_decision(TILE, [1, 64])
    assert "step 8" in stepper.error and 'block "Y"' in stepper.error
    assert stepper.trace.as_json() == before_json
    assert stepper.model.text(len(trace)) == before_text
    assert "wb-error" in stepper.error_area.value and "set_decision" in stepper.error_area.value
    assert stepper.decision.options[stepper.decision.value][0] == "[4, 16]"  # reset
    stepper.next()  # moving on dismisses the refused edit
    assert stepper.error == "" and stepper.error_area.value == ""


def test_tile_that_does_not_multiply_to_the_extent_is_refused():
    func, trace = stochastic_trace()
    stepper = TraceStepper(trace, func)
    before_json = stepper.trace.as_json()
    assert not stepper.set_decision(TILE, [3, 5])
    assert "multiply to 15, not to the extent 64" in stepper.error
    assert stepper.trace.as_json() == before_json
    assert stepper.set_decision(TILE, [8, 8]) and stepper.error == ""  # a good one clears it


# ---------------------------------------------------------------------------
# traces that fail, inputs


def test_trace_that_fails_shows_the_error_at_its_step():
    func, trace = mlc_trace()
    text = trace.as_json().replace('["C", "mm_relu"]', '["Z", "mm_relu"]')  # step 5 fails
    stepper = TraceStepper(text, func)
    failure = stepper.model.failure
    assert failure is not None and failure.step == 5
    assert stepper.slider.max == 5
    assert "step 5" in stepper.error and '"Z"' in stepper.error
    stepper.step = 4
    assert stepper.error_area.value == ""
    assert stepper.diff.after_text == replayed(func, trace, 4)
    stepper.step = 5
    assert "wb-error" in stepper.error_area.value and "The trace stops at step 5" in (
        stepper.error_area.value
    )
    assert "failed" in stepper.instruction.value
    assert stepper.diff.layout.display == "none"
    assert "wb-failed" in stepper.listing.value
    assert stepper.measure() is None and "does not replay past step 5" in stepper.error


def test_failing_sampling_step_can_be_fixed_from_its_dropdown():
    func, trace = stochastic_trace()
    broken = trace.with_decision(TILE - 1, [3, 5])
    stepper = TraceStepper(broken, func)
    assert stepper.model.failure.step == TILE
    stepper.step = TILE
    assert stepper.decision.value is None and "is not legal" in stepper.decision_note.value
    labels = [label for label, _ in stepper.decision.options]
    stepper.decision.value = labels.index("[1, 64]")  # legal here, but breaks step 8:
    assert stepper.model.failure.step == LOCATION  # accepted, the replay got further
    assert stepper.error.startswith(f"step {LOCATION} `l9 = sch.sample_compute_location")
    assert stepper.trace[TILE - 1].decision == (1, 64)
    assert not stepper.set_decision(TILE, [3, 5])  # would stop earlier again: refused
    assert stepper.trace[TILE - 1].decision == (1, 64) and "multiply to 15" in stepper.error
    stepper.decision.value = labels.index("[8, 8]")
    assert stepper.model.failure is None and stepper.slider.max == len(trace)
    assert stepper.trace[TILE - 1].decision == (8, 8)


def test_trace_as_python_text_and_schedule_inputs():
    func, trace = mlc_trace()
    from_text = TraceStepper(trace.script(), func)
    assert from_text.model.text(len(trace)) == replayed(func, trace, len(trace))
    sch = wb.Schedule(func)
    trace.apply_to_schedule(sch)
    assert TraceStepper(sch, func).model.num_steps == len(trace)
    assert TraceStepper(trace, wb.Schedule(func)).model.text(0) == func.script()
    # a Schedule keeps the module it started from: it is the stepper's start
    for stepper in (TraceStepper(sch.trace, sch), TraceStepper(sch, None)):
        assert stepper.model.text(0) == func.script()
        assert stepper.model.text(len(trace)) == replayed(func, trace, len(trace))
    with pytest.raises(TypeError, match="expected a Trace"):
        TraceStepper(42, func)
    with pytest.raises(wb.TraceError, match="not valid JSON"):
        TraceStepper("[[", func)


def test_decisions_left_out_of_text_are_drawn_and_kept():
    func = wb.workloads.matmul(64, 64, 64)
    text = (
        "def apply_trace(sch):\n"
        '  b0 = sch.get_block(name="C", func_name="matmul")\n'
        "  l1, l2, l3 = sch.get_loops(block=b0)\n"
        "  v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16)\n"
        "  l6, l7 = sch.split(loop=l2, factors=[v4, v5], preserve_unit_iters=True,"
        " disable_predication=False)\n"
    )
    stepper = TraceStepper(text, func)
    drawn = stepper.trace[2].decision
    assert math.prod(drawn) == 64 and drawn[-1] <= 16
    assert f"decision={list(drawn)}" in stepper.trace.lines()[2]
    assert stepper.trace.as_json() == TraceStepper(stepper.trace, func).trace.as_json()


def test_syntax_tirx():
    func, trace = mlc_trace()
    stepper = TraceStepper(trace, func, syntax="tirx")
    stepper.step = 1
    assert "get_sblock" in stepper.instruction.value
    stepper.step = 3
    assert "T.sblock" in stepper.diff.after_text
    stepper.syntax = "classic"
    assert "T.block(" in stepper.diff.after_text and "get_block" in stepper.listing.value
    with pytest.raises(ValueError):
        TraceStepper(trace, func, syntax="tvm")


# ---------------------------------------------------------------------------
# callbacks never raise; measuring


def test_callback_errors_are_shown_not_raised(monkeypatch):
    func, trace = mlc_trace(16)
    stepper = TraceStepper(trace, func)

    def broken(**_options):
        raise RuntimeError("the compiler fell over")

    monkeypatch.setattr(stepper.model, "measure", broken)
    stepper.measure_button.click()  # must not raise
    assert "RuntimeError: the compiler fell over" in stepper.error
    assert "the compiler fell over" in stepper.error_area.value


def test_measure_times_the_whole_schedule():
    func = wb.workloads.matmul(64, 64, 64)
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, factors=sch.sample_perfect_tile(j, n=2, decision=[4, 16]))
    stepper = TraceStepper(sch.trace, func)
    m = stepper.measure(repeat=2, min_repeat_ms=5)
    assert m is not None and m.median > 0 and m.flops == 2 * 64**3
    assert stepper.error == ""
    assert "ms" in stepper.measurement.value and "GFLOPS" in stepper.measurement.value
    assert "of peak" in stepper.measurement.value
    record = stepper.model.measurements[-1]
    assert record.step == len(sch.trace) and record.decisions == "step 3: [4, 16]"
    assert 0 < record.fraction_of_peak < 10
    stepper.auto_measure.value = True
    assert stepper.set_decision(3, [16, 4])
    assert len(stepper.model.measurements) == 2
    assert "step 3: [16, 4]" in stepper.measurement.value
    assert "wb-measure-history" in stepper.measurement.value


# ---------------------------------------------------------------------------
# interactive feel


def test_stepping_through_a_30_step_trace_is_fast():
    func, trace = long_trace()
    start = time.perf_counter()
    stepper = TraceStepper(trace, func)
    while stepper.next() < len(trace):
        pass
    while stepper.previous() > 0:
        pass
    elapsed = time.perf_counter() - start
    assert stepper.step == 0
    assert elapsed < 1.0, f"building and stepping through {len(trace)} steps took {elapsed:.2f} s"


def test_long_listing_shows_a_window_around_the_current_step():
    func = wb.workloads.matmul(16, 16, 16)
    sch = wb.Schedule(func)
    for _ in range(30):
        sch.get_loops(sch.get_block("C"))
    assert len(sch.trace) == 60
    stepper = TraceStepper(sch.trace, func)
    stepper.step = 30  # lines 17..56 are shown
    listing = stepper.listing.value
    assert listing.count('class="wb-trace-line') == 40
    assert "⋯ 16 more instructions" in listing and "⋯ 4 more instructions" in listing
    assert re.search(r"wb-current[^>]*>[^\n]*30 ▶", listing)
    assert "> 17   </span>" in listing and "> 16   </span>" not in listing
    stepper.step = 1
    assert "⋯ 20 more instructions" in stepper.listing.value
