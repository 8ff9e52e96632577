"""Property tests: random sequences of loop primitives on several workloads.

Each step either raises :class:`wb.ScheduleError` and leaves the schedule exactly
as it was (same module object, same trace), or succeeds. Any other exception is a
bug. At the end the schedule computes what the unscheduled function computes
(``verify``: C build against the numpy reference) and its trace replays, through
JSON and Python text, to the identical IR.

Hypothesis runs derandomized, so CI sees the same examples on every run.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import workbench as wb
from workbench.ir import For
from workbench.ir.analysis import block_names
from workbench.testing import (
    assert_verifies,
    chain_func,
    conv2d_func,
    matmul_func,
    mm_relu_func,
    roundtrip_trace,
    shared_outer_loop_func,
    transpose_func,
)

WORKLOADS: dict[str, wb.PrimFunc] = {
    "matmul": matmul_func(16, 16, 16),
    "mm_relu": mm_relu_func(16),
    "chain": chain_func(12, 10),
    "transpose": transpose_func(8, 12),
    "conv2d": conv2d_func(1, 2, 6, 3, 3),
    "shared_outer": shared_outer_loop_func(6),
}

PRIMITIVES = (
    "split",
    "fuse",
    "reorder",
    "parallel",
    "vectorize",
    "unroll",
    "annotate",
    "unannotate",
)


def draw_factors(data: st.DataObject, extent: int) -> list:
    """Mostly valid factors (dividing or not, one inferred ``None`` half of the time);
    one draw in eight is invalid (a zero/negative factor or two ``None``)."""
    n = data.draw(st.integers(2, 3), label="number of factors")
    factors: list = [
        data.draw(
            st.one_of(st.integers(1, max(1, extent)), st.sampled_from([1, 2, 3, 4, 5])),
            label="factor",
        )
        for _ in range(n)
    ]
    if data.draw(st.booleans(), label="infer one?"):
        factors[data.draw(st.integers(0, n - 1), label="inferred")] = None
    if data.draw(st.integers(0, 7), label="invalid?") == 0:
        factors[data.draw(st.integers(0, n - 1), label="bad")] = data.draw(
            st.sampled_from([0, -1, None]), label="bad factor"
        )
        if factors.count(None) < 2 and all(f is None or f > 0 for f in factors):
            factors[0] = factors[-1] = None
    return factors


def random_step(data: st.DataObject, sch: wb.Schedule, blocks: list[str], previous: list) -> list:
    """Draw and apply one primitive; return the loop handles it looked at."""
    block = sch.get_block(data.draw(st.sampled_from(blocks), label="block"))
    loops = sch.get_loops(block)
    if previous and data.draw(st.integers(0, 9), label="stale?") == 0:
        loops = previous  # handles from before the last step: some may be stale
    if not loops:
        return loops
    prim = data.draw(st.sampled_from(PRIMITIVES), label="primitive")
    call: Callable[[], object]
    if prim == "split":
        loop = data.draw(st.sampled_from(loops), label="loop")
        try:
            extent = sch.get(loop).extent
        except wb.ScheduleError:
            extent = 8
        factors = draw_factors(data, extent)
        keep = data.draw(st.booleans(), label="preserve_unit_iters")
        call = lambda: sch.split(loop, factors=factors, preserve_unit_iters=keep)  # noqa: E731
    elif prim == "fuse":
        start = data.draw(st.integers(0, len(loops) - 1), label="start")
        count = data.draw(st.integers(1, 3), label="count")
        keep = data.draw(st.booleans(), label="preserve_unit_iters")
        group = loops[start : start + count]
        call = lambda: sch.fuse(*group, preserve_unit_iters=keep)  # noqa: E731
    elif prim == "reorder":
        order = data.draw(st.permutations(range(len(loops))), label="permutation")
        size = data.draw(st.integers(1, len(loops)), label="how many")
        chosen = [loops[i] for i in order[:size]]
        call = lambda: sch.reorder(*chosen)  # noqa: E731
    elif prim in ("parallel", "vectorize", "unroll"):
        loop = data.draw(st.sampled_from(loops), label="loop")
        call = lambda: getattr(sch, prim)(loop)  # noqa: E731
    else:
        target = data.draw(st.sampled_from([*loops, block]), label="target")
        key = data.draw(st.sampled_from(["pragma_auto_unroll_max_step", "note"]), label="key")
        if prim == "annotate":
            value = data.draw(
                st.one_of(
                    st.integers(-4, 64),
                    st.sampled_from(["SSRSRS", 'q"uote']),
                    st.lists(st.integers(0, 9), max_size=3),
                ),
                label="value",
            )
            call = lambda: sch.annotate(target, ann_key=key, ann_val=value)  # noqa: E731
        else:
            try:
                keys = [k for k, _ in sch.get(target).annotations]
            except wb.ScheduleError:
                keys = []
            key = data.draw(st.sampled_from([*keys, "absent"]), label="key to remove")
            call = lambda: sch.unannotate(target, ann_key=key)  # noqa: E731

    mod_before, trace_before = sch.mod, sch.trace
    text_before = mod_before.script()
    try:
        call()
    except wb.ScheduleError as e:
        assert str(e).startswith(f"{e.primitive}: "), str(e)
        assert sch.mod is mod_before, f"refused {prim} replaced the module"
        assert sch.mod.script() == text_before, f"refused {prim} changed the IR"
        assert sch.trace is trace_before and len(sch.trace) == len(trace_before)
        event(f"{prim} refused: {type(e).__name__}")
    else:
        assert len(sch.trace) == len(trace_before) + 1
        event(f"{prim} applied")
    return loops


def run_random_schedule(data: st.DataObject) -> tuple[wb.Schedule, wb.PrimFunc]:
    name = data.draw(st.sampled_from(sorted(WORKLOADS)), label="workload")
    func = WORKLOADS[name]
    sch = wb.Schedule(func)
    blocks = block_names(func)
    previous: list = []
    for _ in range(data.draw(st.integers(1, 6), label="steps")):
        previous = random_step(data, sch, blocks, previous)
    # every loop of the result is still a well-formed nest the handles can reach
    for b in blocks:
        for lp in sch.get_loops(sch.get_block(b)):
            assert isinstance(sch.get(lp), For)
    return sch, func


@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_random_schedules_compute_the_same_and_replay(data):
    sch, func = run_random_schedule(data)
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


@settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_random_schedules_refuse_cleanly_and_replay(data):
    """More sequences, IR-level only (no compilation): refusals leave the state
    intact, accepted schedules replay to the same IR."""
    sch, func = run_random_schedule(data)
    roundtrip_trace(sch, func)


# --------------------------------------------------------------------------- hostile traces


def _mm_trace_json() -> list:
    sch = wb.Schedule(WORKLOADS["mm_relu"])
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.fuse(i, j0)
    sch.annotate(blk, ann_key="note", ann_val=[1, "a"])
    sch.unroll(j1)
    sch.get_consumers(blk)
    return sch.trace.as_json_obj()


VALID_TRACE_JSON = _mm_trace_json()

JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 40),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(
            [
                "b0",
                "l1",
                "l2",
                "l9",
                "v3",
                "None",
                '"Y"',
                "",
                "Split",
                "Fuse",
                "GetSBlock",
                "GetLoops",
                "mm_relu",
                "Y",
            ]
        ),
        st.text(max_size=3),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=6,
)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, list):
        for n, x in enumerate(obj):
            yield from _paths(x, (*prefix, n))


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_mutated_trace_json_is_refused_with_trace_error(data):
    """Any edit of a valid trace's JSON either loads and replays, or is refused with
    a ScheduleError (TraceError); never another exception."""
    doc = copy.deepcopy(VALID_TRACE_JSON)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        paths = list(_paths(doc))[1:]
        path = data.draw(st.sampled_from(paths), label="path")
        parent = doc
        for n in path[:-1]:
            parent = parent[n]
        edit = data.draw(st.sampled_from(["replace", "delete", "insert"]), label="edit")
        if edit == "replace":
            parent[path[-1]] = data.draw(JSON_VALUES, label="value")
        elif edit == "delete":
            del parent[path[-1]]
        else:
            parent.insert(path[-1], data.draw(JSON_VALUES, label="value"))
    for source in (doc, json.dumps(doc)):
        try:
            trace = wb.Trace.from_json(source)
            trace.script()
            trace.as_json()
            sch = wb.Schedule(WORKLOADS["mm_relu"])
            trace.apply_to_schedule(sch)
        except wb.ScheduleError:
            event("refused")
            continue
        event("replayed")
        roundtrip_trace(sch, WORKLOADS["mm_relu"])
