"""Sampling primitives: sample_perfect_tile, sample_categorical, sample_compute_location.

What they must do: print like TVM's stochastic traces (``decision=[8, 16]``), carry
their decisions in TVM's JSON (``[[insts], [[index, decision]]]``), replay
deterministically, give another schedule after ``trace.with_decision``, refuse bad
decisions naming the loop/block (and the step when replayed), draw reproducibly from
``Schedule(func, seed=...)`` (``copy()`` continues the same stream) and uniformly
over the allowed tilings. The MLC chapter's ``stochastic_schedule_mm`` verifies
numerically for several seeds.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter

import pytest

import workbench as wb
from workbench.schedule.primitives import sampling as S
from workbench.testing import (
    assert_schedule_error,
    assert_verifies,
    chain_func,
    conv2d_func,
    mm_relu_func,
    roundtrip_trace,
    stochastic_schedule_mm,
)


def main_func(n: int = 128) -> wb.PrimFunc:
    """The chapter's ``MyModule.main``: ``C = A @ B``, one block ``"C"``."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.placeholder((n, n), "float32", name="B")
    k = wb.reduce_axis(n, name="k")
    C = wb.compute((n, n), lambda i, j: wb.sum(A[i, k] * B[k, j], axis=k), name="C")
    return wb.create_prim_func([A, B, C], name="main")


@pytest.fixture(scope="module")
def func() -> wb.PrimFunc:
    return main_func(128)



HEAD = [
    "# from tvm import tir",
    "def apply_trace(sch: tir.Schedule) -> None:",
    '  b0 = sch.get_block(name="C", func_name="main")',
    "  l1, l2, l3 = sch.get_loops(block=b0)",
]
TAIL = [
    "  l6, l7 = sch.split(loop=l2, factors=[v4, v5], preserve_unit_iters=True, "
    "disable_predication=False)",
    "  sch.reorder(l1, l6, l3, l7)",
    "  b8 = sch.decompose_reduction(block=b0, loop=l3)",
]


def seed_trace(decision: str) -> str:
    sample = (
        "  v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16, "
        f"decision={decision})"
    )
    return "\n".join([*HEAD, sample, *TAIL])


def loop_extents(sch: wb.Schedule, block: str) -> list[tuple[str, int]]:
    return [
        (sch.get(lp).loop_var.name, sch.get(lp).extent)
        for lp in sch.get_loops(sch.get_block(block))
    ]


# --------------------------------------------------------------------------- printing


@pytest.mark.parametrize("decision", [[8, 16], [16, 8]])
def test_seed_stochastic_trace_prints_like_tvm(func, decision):
    """The two attempts the chapter prints, given their decisions."""
    sch = stochastic_schedule_mm(wb.Schedule(func), decision=decision)
    assert str(sch.trace) == seed_trace(str(decision))
    want = [("i", 128), ("j_0", decision[0]), ("k", 128), ("j_1", decision[1])]
    assert loop_extents(sch, "C_update") == want


def test_sampled_trace_prints_its_decision(func):
    sch = stochastic_schedule_mm(wb.Schedule(func, seed=7))
    text = str(sch.trace)
    m = re.search(r"decision=\[(\d+), (\d+)\]\)", text)
    assert m, text
    outer, inner = int(m.group(1)), int(m.group(2))
    assert outer * inner == 128 and inner <= 16
    assert text == seed_trace(f"[{outer}, {inner}]")
    assert sch.get(sch.get_loops(sch.get_block("C_update"))[3]).extent == inner


def test_perfect_tile_json_like_tvm(func):
    sch = stochastic_schedule_mm(wb.Schedule(func), decision=[8, 16])
    insts, decisions = sch.trace.as_json_obj()
    assert insts[2] == ["SamplePerfectTile", ["l2"], [2, 16], ["v4", "v5"]]
    assert insts[3] == ["Split", ["l2", "v4", "v5"], [1, 0], ["l6", "l7"]]
    assert decisions == [[2, [8, 16]]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampled_trace_roundtrips(func, seed):
    """JSON and Python text (classic and tirx) replay to the same IR and trace."""
    roundtrip_trace(stochastic_schedule_mm(wb.Schedule(func, seed=seed)), func)


# --------------------------------------------------------------------------- with_decision


def test_with_decision_replay_changes_the_schedule(func):
    sch = stochastic_schedule_mm(wb.Schedule(func), decision=[8, 16])
    trace = sch.trace.with_decision(2, [16, 8])
    assert sch.trace[2].decision == (8, 16)  # the original trace is unchanged
    assert str(trace) == seed_trace("[16, 8]")
    fresh = wb.Schedule(func)
    trace.apply_to_schedule(fresh)
    assert str(fresh.trace) == seed_trace("[16, 8]")
    assert loop_extents(fresh, "C_update") == [("i", 128), ("j_0", 16), ("k", 128), ("j_1", 8)]
    want = stochastic_schedule_mm(wb.Schedule(func), decision=[16, 8])
    assert fresh.mod.script() == want.mod.script()


def test_with_decision_takes_the_instruction_like_tvm(func):
    trace = stochastic_schedule_mm(wb.Schedule(func), decision=[8, 16]).trace
    inst = next(i for i in trace if i.kind == "SamplePerfectTile")
    assert str(trace.with_decision(inst, [32, 4])) == seed_trace("[32, 4]")
    other = stochastic_schedule_mm(wb.Schedule(func), decision=[8, 16]).trace[2]
    with pytest.raises(wb.TraceError, match="not part of this trace"):
        trace.with_decision(other, [32, 4])
    with pytest.raises(wb.TraceError, match="no step 9"):
        trace.with_decision(9, [32, 4])


def test_with_decision_through_json(func):
    obj = stochastic_schedule_mm(wb.Schedule(func), decision=[8, 16]).trace.as_json_obj()
    obj[1] = [[2, [4, 32]]]
    with pytest.raises(wb.TraceError, match=r"step 2 .*innermost tile 32"):
        wb.Trace.from_json(obj).apply_to_schedule(wb.Schedule(func))
    obj[1] = [[2, [32, 4]]]
    sch = wb.Schedule(func)
    wb.Trace.from_json(obj).apply_to_schedule(sch)
    assert loop_extents(sch, "C_update")[1:4:2] == [("j_0", 32), ("j_1", 4)]


@pytest.mark.parametrize(
    "decision, why",
    [
        ([16, 16], "multiply to 256, not to the extent 128"),
        ([4, 32], "innermost tile 32 exceeds max_innermost_factor=16"),
        ([128], "expected 2 tile sizes, got 1"),
        ([2, 8, 8], "expected 2 tile sizes, got 3"),
        ([-8, -16], "positive integers"),
        ([8.0, 16], "positive integers"),
        (8, "expected a list"),
    ],
)
def test_bad_decision_in_replay_names_step_and_loop(func, decision, why):
    trace = stochastic_schedule_mm(wb.Schedule(func), decision=[8, 16]).trace
    fresh = wb.Schedule(func)
    with pytest.raises(wb.TraceError) as info:
        trace.with_decision(2, decision).apply_to_schedule(fresh)
    message = str(info.value)
    assert "step 2" in message and 'loop "j"' in message and why in message, message
    assert len(fresh.trace) == 0  # all or nothing


def test_with_decision_refused_for_non_sampling_step(func):
    trace = stochastic_schedule_mm(wb.Schedule(func), decision=[8, 16]).trace
    with pytest.raises(wb.TraceError, match="step 3: Split is not a sampling instruction"):
        trace.with_decision(3, [8, 16])


def test_removing_the_decision_resamples_from_the_seed(func):
    trace = stochastic_schedule_mm(wb.Schedule(func), decision=[8, 16]).trace
    free = trace.with_decision(2, None)
    assert "decision" not in str(free).splitlines()[4]
    a, b = wb.Schedule(func, seed=11), wb.Schedule(func, seed=11)
    free.apply_to_schedule(a)
    free.apply_to_schedule(b)
    assert a.trace[2].decision == b.trace[2].decision
    assert a.trace[2].decision is not None


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "decision, why",
    [
        ([16, 16], "multiply to 256"),
        ([4, 32], "exceeds max_innermost_factor=16"),
        ([0, 128], "positive integers"),
        ([True, 128], "positive integers"),
        ([128], "expected 2 tile sizes"),
        ("8,16", "expected a list"),
    ],
)
def test_sample_perfect_tile_fail_bad_decision(func, decision, why):
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    e = assert_schedule_error(
        sch, lambda: sch.sample_perfect_tile(j, n=2, decision=decision), S.InvalidDecisionError, "j"
    )
    assert why in str(e) and "extent 128" in str(e)


@pytest.mark.parametrize(
    "kwargs, why",
    [
        ({"n": 0}, "n must be an integer from 1 to 16"),
        ({"n": 17}, "n must be an integer from 1 to 16"),
        ({"n": 2.0}, "n must be an integer from 1 to 16"),
        ({"n": 2, "max_innermost_factor": 0}, "max_innermost_factor"),
        ({"n": 2, "max_innermost_factor": -3}, "max_innermost_factor"),
        ({"n": 1}, "cannot be tiled into 1 tile"),
    ],
)
def test_sample_perfect_tile_fail_bad_arguments(func, kwargs, why):
    sch = wb.Schedule(func, seed=0)
    i, j, k = sch.get_loops(sch.get_block("C"))
    state = sch._rng.getstate()
    e = assert_schedule_error(
        sch, lambda: sch.sample_perfect_tile(j, **kwargs), S.InvalidSamplingArgumentError, "j"
    )
    assert why in str(e)
    assert sch._rng.getstate() == state  # a refusal draws nothing


def test_sample_perfect_tile_fail_stale_loop(func):
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, factors=[None, 4])
    assert_schedule_error(sch, lambda: sch.sample_perfect_tile(j, n=2), wb.ScheduleError, "j")


def test_sample_perfect_tile_edge_cases(func):
    sch = wb.Schedule(func, seed=0)
    i, j, k = sch.get_loops(sch.get_block("C"))
    assert [sch.get(v) for v in sch.sample_perfect_tile(j, n=1, max_innermost_factor=-1)] == [128]
    assert [sch.get(v) for v in sch.sample_perfect_tile(j, n=1, max_innermost_factor=128)] == [128]
    tiles = [sch.get(v) for v in sch.sample_perfect_tile(j, n=4, max_innermost_factor=1)]
    assert math.prod(tiles) == 128 and tiles[-1] == 1
    prime = wb.Schedule(main_func(7), seed=0)
    _, j7, _ = prime.get_loops(prime.get_block("C"))
    assert sorted(prime.get(v) for v in prime.sample_perfect_tile(j7, n=3)) == [1, 1, 7]


# --------------------------------------------------------------------------- determinism


def decisions(seed: int, func, count: int = 6) -> list:
    sch = wb.Schedule(func, seed=seed)
    i, j, k = sch.get_loops(sch.get_block("C"))
    return [tuple(sch.get(v) for v in sch.sample_perfect_tile(j, n=3)) for _ in range(count)]


def test_same_seed_same_decisions(func):
    assert decisions(5, func) == decisions(5, func)
    assert str(stochastic_schedule_mm(wb.Schedule(func, seed=5)).trace) == str(
        stochastic_schedule_mm(wb.Schedule(func, seed=5)).trace
    )
    # seeds matter: ten seeds do not all draw the same sequence
    assert len({tuple(decisions(s, func)) for s in range(10)}) > 1


def test_copy_continues_the_same_random_stream(func):
    sch = wb.Schedule(func, seed=3)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.sample_perfect_tile(j, n=3)
    twin = sch.copy()
    for _ in range(5):
        a = [sch.get(v) for v in sch.sample_perfect_tile(j, n=3)]
        b = [twin.get(v) for v in twin.sample_perfect_tile(j, n=3)]
        assert a == b
    assert str(sch.trace) == str(twin.trace)


def test_given_decision_draws_nothing(func):
    sch = wb.Schedule(func, seed=3)
    state = sch._rng.getstate()
    stochastic_schedule_mm(sch, decision=[8, 16])
    assert sch._rng.getstate() == state


# --------------------------------------------------------------------------- distribution


@pytest.mark.parametrize("extent, n, limit", [(128, 2, 16), (64, 3, 16), (96, 3, 8), (36, 4, -1)])
def test_perfect_tile_distribution_is_uniform_over_allowed_tilings(extent, n, limit):
    allowed = {tuple(t) for t in S.perfect_tilings(extent, n, limit)}
    # the enumeration agrees with the count the sampler weighs by
    everything = S.perfect_tilings(extent, n, -1)
    assert len(everything) == S.count_tilings(extent, n)
    assert all(math.prod(t) == extent for t in everything)
    assert allowed == {t for t in map(tuple, everything) if limit == -1 or t[-1] <= limit}
    rng = random.Random(1234)
    draws = 300 * len(allowed)
    counts = Counter(tuple(S.draw_perfect_tile(rng, extent, n, limit)) for _ in range(draws))
    assert set(counts) == allowed  # every allowed tiling appears, nothing else
    expected = draws / len(allowed)
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    # chi-square with len(allowed) - 1 degrees of freedom: mean df, sd sqrt(2 df)
    df = len(allowed) - 1
    assert chi2 < df + 6 * math.sqrt(2 * df) + 10, (chi2, df)


def test_schedule_samples_cover_all_tilings(func):
    sch = wb.Schedule(func, seed=99)
    i, j, k = sch.get_loops(sch.get_block("C"))
    seen = Counter(tuple(sch.get(v) for v in sch.sample_perfect_tile(j, n=2)) for _ in range(500))
    assert set(seen) == {(128, 1), (64, 2), (32, 4), (16, 8), (8, 16)}
    assert min(seen.values()) > 60  # 100 expected for each


# --------------------------------------------------------------------------- numerics


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_stochastic_schedule_mm_verifies(func, seed):
    sch = stochastic_schedule_mm(wb.Schedule(func, seed=seed))
    assert_verifies(sch, func)


def test_three_level_tiles_of_both_loops_verify():
    func = main_func(64)
    sch = wb.Schedule(func, seed=21)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i_tiles = sch.sample_perfect_tile(i, n=3, max_innermost_factor=4)
    j_tiles = sch.sample_perfect_tile(j, n=3, max_innermost_factor=8)
    i0, i1, i2 = sch.split(i, factors=i_tiles)
    j0, j1, j2 = sch.split(j, factors=j_tiles)
    sch.reorder(i0, j0, i1, j1, k, i2, j2)
    assert sch.get(i2).extent <= 4 and sch.get(j2).extent <= 8
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


# --------------------------------------------------------------------------- categorical


CATEGORICAL_LINE = (
    "v0 = sch.sample_categorical(candidates=[0, 16, 64, 512], "
    "probs=[0.25, 0.25, 0.25, 0.25], decision=2)"
)


def test_sample_categorical_prints_and_serialises_like_tvm(func):
    sch = wb.Schedule(func)
    v = sch.sample_categorical(candidates=[0, 16, 64, 512], probs=[0.25] * 4, decision=2)
    assert sch.get(v) == 64
    assert sch.trace.lines() == [CATEGORICAL_LINE]
    assert sch.trace.as_json_obj() == [
        [["SampleCategorical", [], [[0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]], ["v0"]]],
        [[0, 2]],
    ]
    loaded = wb.Trace.from_python("\n".join(sch.trace.lines()))
    assert loaded.lines() == [CATEGORICAL_LINE]


def test_sample_categorical_as_split_factor_and_with_decision(func):
    sch = wb.Schedule(func, seed=4)
    i, j, k = sch.get_loops(sch.get_block("C"))
    v = sch.sample_categorical([4, 8, 32], [1, 1, 2])
    j0, j1 = sch.split(j, factors=[None, v])
    assert sch.get(j1).extent == sch.get(v)
    assert "probs=[1.0, 1.0, 2.0]" in sch.trace.lines()[2]
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)
    fresh = wb.Schedule(func)
    sch.trace.with_decision(2, 0).apply_to_schedule(fresh)
    assert loop_extents(fresh, "C")[2:] == [("j_1", 4), ("k", 128)]


def test_sample_categorical_distribution_and_zero_probability(func):
    sch = wb.Schedule(func, seed=8)
    draws = Counter(
        sch.get(sch.sample_categorical([1, 2, 3], [0.1, 0.0, 0.9])) for _ in range(2000)
    )
    assert set(draws) == {1, 3}
    assert 130 < draws[1] < 270  # 200 expected


@pytest.mark.parametrize(
    "candidates, probs, why",
    [
        ([1, 2], [0.5], "2 candidates but 1 probabilities"),
        ([1, 2], [0.5, -0.5], "non-negative"),
        ([1, 2], [0.0, 0.0], "sum to 0"),
        ([1, 2], [float("nan"), 1.0], "finite"),
        ([], [], "at least one candidate"),
        ([1.5, 2], [1, 1], "candidates must be integers"),
        ((1, 2), "ab", "must be lists"),
    ],
)
def test_sample_categorical_fail_bad_arguments(func, candidates, probs, why):
    sch = wb.Schedule(func)
    e = assert_schedule_error(
        sch, lambda: sch.sample_categorical(candidates, probs), S.InvalidSamplingArgumentError
    )
    assert why in str(e)


@pytest.mark.parametrize("decision", [4, -1, 1.0, "2"])
def test_sample_categorical_fail_bad_decision(func, decision):
    sch = wb.Schedule(func)
    e = assert_schedule_error(
        sch,
        lambda: sch.sample_categorical([0, 16, 64, 512], [0.25] * 4, decision=decision),
        S.InvalidDecisionError,
    )
    assert "0 to 3" in str(e)


def test_sample_categorical_bad_decision_in_trace_names_step(func):
    sch = wb.Schedule(func)
    sch.sample_categorical([0, 16, 64, 512], [0.25] * 4, decision=2)
    with pytest.raises(wb.TraceError, match=r"step 0 .*decision 7"):
        sch.trace.with_decision(0, 7).apply_to_schedule(wb.Schedule(func))


# --------------------------------------------------------------------------- compute location


def candidates(func, block: str) -> list[tuple[int, str]]:
    return [(d, t.name) for d, t in S.compute_location_candidates(func, block)]


def test_compute_location_candidates_follow_tvm():
    # Y is a reduction (not inlinable); its consumer C has loops i, j
    assert candidates(mm_relu_func(16), "Y") == [(-1, "root"), (0, "i"), (1, "j")]
    # an elementwise producer can also be inlined
    assert candidates(chain_func(8), "B") == [(-2, "inline"), (-1, "root"), (0, "i"), (1, "j")]
    # an output block has no consumer: only the root
    assert candidates(chain_func(8), "D") == [(-1, "root")]
    # conv2d's padding stage: the unit batch loop n (0) is skipped, and the trailing
    # reduction loops rc, ry, rx of the consumer are not candidates
    assert candidates(conv2d_func(), "pad") == [
        (-2, "inline"),
        (-1, "root"),
        (1, "k"),
        (2, "h"),
        (3, "w"),
    ]


def test_compute_location_candidates_stop_below_a_reduction():
    """With the consumer's loops reordered to n, k, rc, h, w, ...: the reduction loop
    rc is still a candidate (a spatial loop follows it), the spatial loops below it
    are not."""
    func = conv2d_func()
    sch = wb.Schedule(func)
    n, k, h, w, rc, ry, rx = sch.get_loops(sch.get_block("conv"))
    sch.reorder(rc, h, w)
    f = sch.mod[func.name]
    assert candidates(f, "pad") == [(-2, "inline"), (-1, "root"), (1, "k"), (2, "rc")]
    loc = sch.sample_compute_location(sch.get_block("pad"), decision=2)
    sch.compute_at(sch.get_block("pad"), loc)
    assert_verifies(sch, func)


def test_compute_location_candidates_leave_out_illegal_loops():
    """Once Y sits under C's loops i and j, compute_at(Y, i or j) is refused, so only
    the root is left."""
    func = mm_relu_func(16)
    sch = wb.Schedule(func)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("Y"), j)
    assert candidates(sch.mod["mm_relu"], "Y") == [(-1, "root")]


def test_sample_compute_location_prints_and_serialises_like_tvm():
    func = mm_relu_func(16)
    sch = wb.Schedule(func)
    b = sch.get_block("Y")
    loc = sch.sample_compute_location(b, decision=1)
    assert sch.get(loc).loop_var.name == "j"
    assert sch.trace.lines()[-1] == "l1 = sch.sample_compute_location(block=b0, decision=1)"
    insts, decisions = sch.trace.as_json_obj()
    assert insts[-1] == ["SampleComputeLocation", ["b0"], [], ["l1"]]
    assert decisions == [[1, 1]]


@pytest.mark.parametrize("decision", [0, 1])
def test_compute_at_sampled_location_verifies_and_replays(decision):
    func = mm_relu_func(32)
    sch = wb.Schedule(func)
    b = sch.get_block("Y")
    loc = sch.sample_compute_location(b, decision=decision)
    sch.compute_at(b, loc)
    names = [sch.get(lp).loop_var.name for lp in sch.get_loops(b)]
    assert names[: decision + 1] == ["i", "j"][: decision + 1]  # C's loops, then Y's own
    assert names[decision + 1].startswith("ax")
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)
    other = sch.trace.with_decision(1, 1 - decision)
    fresh = wb.Schedule(func)
    other.apply_to_schedule(fresh)
    names = [fresh.get(lp).loop_var.name for lp in fresh.get_loops(fresh.get_block("Y"))]
    assert names[: 2 - decision] == ["i", "j"][: 2 - decision]
    assert names[2 - decision].startswith("ax")


@pytest.mark.parametrize("decision", [2, -2, -3, 0.0, "0"])
def test_sample_compute_location_fail_bad_decision(decision):
    sch = wb.Schedule(mm_relu_func(16))
    b = sch.get_block("Y")
    e = assert_schedule_error(
        sch, lambda: sch.sample_compute_location(b, decision=decision), S.InvalidDecisionError, "Y"
    )
    assert '-1 (root), 0 (loop "i"), 1 (loop "j")' in str(e)


def test_sample_compute_location_bad_decision_in_trace_names_step():
    func = mm_relu_func(16)
    sch = wb.Schedule(func)
    sch.sample_compute_location(sch.get_block("Y"), decision=0)
    with pytest.raises(wb.TraceError, match=r'step 1 .*block "Y"'):
        sch.trace.with_decision(1, 5).apply_to_schedule(wb.Schedule(func))


def test_sample_compute_location_is_uniform_over_candidates():
    func = chain_func(8)
    sch = wb.Schedule(func, seed=17)
    b = sch.get_block("B")
    seen = Counter(_sampled(sch, b) for _ in range(800))
    assert set(seen) == {-2, -1, 0, 1}
    assert min(seen.values()) > 150  # 200 expected for each


def _sampled(sch: wb.Schedule, block) -> int:
    sch.sample_compute_location(block)
    return sch.trace[-1].decision


def test_sample_compute_location_same_seed_same_decisions():
    func = chain_func(8)

    def run(seed):
        sch = wb.Schedule(func, seed=seed)
        return [_sampled(sch, sch.get_block(n)) for n in "BCBCBC"]

    assert run(4) == run(4)


# The root (-1) and inline (-2) handles: as in TVM, compute_at does nothing with the
# root handle and inlines the block with the inline handle.


def test_compute_at_root_handle_leaves_block_in_place():
    func = chain_func(8)
    sch = wb.Schedule(func)
    b = sch.get_block("B")
    loc = sch.sample_compute_location(b, decision=-1)
    sch.compute_at(b, loc)
    assert sch.mod.script() == wb.Schedule(func).mod.script()
    roundtrip_trace(sch, func)


def test_compute_at_inline_handle_inlines_block():
    func = chain_func(8)
    sch = wb.Schedule(func)
    b = sch.get_block("B")
    loc = sch.sample_compute_location(b, decision=-2)
    sch.compute_at(b, loc)
    assert 'T.block("B")' not in sch.mod.script()
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_stochastic_compute_location_verifies_for_every_decision():
    """MetaSchedule's pattern: sample a location, compute_at it, whatever it is."""
    func = chain_func(8)
    for seed in range(6):
        sch = wb.Schedule(func, seed=seed)
        for name in ("C", "B"):
            block = sch.get_block(name)
            sch.compute_at(block, sch.sample_compute_location(block))
        assert_verifies(sch, func)
        roundtrip_trace(sch, func)
