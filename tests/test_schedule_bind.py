"""``bind``: binding loops to GPU thread axes.

For every case the IR equals a reviewed golden file (``tests/golden/bind_<case>.txt``),
the trace replays (JSON and Python text) to the same IR, and the C build, which runs
thread-bound loops as ordinary serial loops, computes what the unscheduled function
computes. Refusals (a reduction loop bound to anything but threadIdx.x/y/z, an unknown
axis) name the loop and leave the schedule untouched; as in TVM, a loop already bound,
parallel, vectorized or unrolled can be (re-)bound, and a loop nested under one bound to
the same axis can be bound to it (a cooperative fetch).

Regenerate the goldens after a deliberate change with
``python tests/test_schedule_bind.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

import workbench as wb
from workbench.ir import THREAD_TAGS
from workbench.schedule.primitives.for_kind import InvalidThreadAxisError
from workbench.testing import (
    assert_schedule_error,
    assert_verifies,
    check_golden,
    matmul_func,
    mm_relu_func,
    roundtrip_trace,
    write_golden,
)

N = 128


@pytest.fixture(scope="module")
def func() -> wb.PrimFunc:
    return mm_relu_func(N)


def _y(sch: wb.Schedule):
    return sch.get_loops(sch.get_block("Y"))


def _c(sch: wb.Schedule):
    return sch.get_loops(sch.get_block("C"))


# --------------------------------------------------------------------------- cases


def block_thread(sch):
    """The classic GPU tiling of both stages: 2-D grid of 2-D thread blocks."""
    for loops in (_y(sch), _c(sch)):
        i, j = loops[0], loops[1]
        i0, i1 = sch.split(i, factors=[None, 16])
        j0, j1 = sch.split(j, factors=[None, 8])
        sch.reorder(i0, j0, i1, j1)
        sch.bind(i0, "blockIdx.x")
        sch.bind(j0, "blockIdx.y")
        sch.bind(i1, "threadIdx.x")
        sch.bind(j1, "threadIdx.y")


def fused_threads(sch):
    """Fuse the spatial loops of C, split into blocks of 64 threads."""
    i, j = _c(sch)
    fused = sch.fuse(i, j)
    b, t = sch.split(fused, factors=[None, 64])
    sch.bind(b, "blockIdx.x")
    sch.bind(t, "threadIdx.x")


def vthread(sch):
    i, j, k = _y(sch)
    j0, j1 = sch.split(j, factors=[2, None])
    sch.bind(j0, "vthread.x")


def outer_only(sch):
    i, j, k = _y(sch)
    sch.bind(i, "blockIdx.z")


CASES: dict[str, Callable[[wb.Schedule], None]] = {
    f.__name__: f for f in (block_thread, fused_threads, vthread, outer_only)
}


def scheduled(func, name: str) -> wb.Schedule:
    sch = wb.Schedule(func)
    CASES[name](sch)
    return sch


@pytest.mark.parametrize("name", sorted(CASES))
def test_bind_golden(func, name):
    check_golden(f"bind_{name}", scheduled(func, name).mod.script())


@pytest.mark.parametrize("name", sorted(CASES))
def test_bind_trace_roundtrip(func, name):
    roundtrip_trace(scheduled(func, name), func)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bind_numerics_on_cpu(func, name):
    """The C target runs bound loops serially, so a GPU schedule verifies on a CPU."""
    assert_verifies(scheduled(func, name), func)


def test_bind_prints_thread_binding_and_trace_like_tvm(func):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    i0, i1 = sch.split(i, factors=[None, 32])
    sch.bind(i0, "blockIdx.x")
    assert sch.trace.lines()[-1] == 'sch.bind(loop=l4, thread_axis="blockIdx.x")'
    assert 'for i_0 in T.thread_binding(4, thread="blockIdx.x"):' in [
        ln.strip() for ln in sch.mod.script().splitlines()
    ]
    assert sch.get(i0).kind == "thread_binding"
    assert sch.get(i0).thread_tag == "blockIdx.x"
    # TVM's JSON: one input (the loop), one attr (the thread axis), no outputs
    assert sch.trace.as_json_obj()[0][-1] == ["Bind", ["l4"], ["blockIdx.x"], []]


def test_bind_c_source_runs_bound_loop_serially(func):
    sch = scheduled(func, "block_thread")
    source = wb.build(sch.mod, target="c").source
    assert "// thread_binding blockIdx.x" in source
    assert "// thread_binding threadIdx.y" in source


def test_bind_every_thread_tag(func):
    for tag in THREAD_TAGS:
        sch = wb.Schedule(func)
        i, j, k = _y(sch)
        sch.bind(j, tag)
        assert sch.get(j).thread_tag == tag


def test_bind_same_axis_again_is_a_no_op(func):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    sch.bind(i, "blockIdx.x")
    before = sch.mod
    sch.bind(i, "blockIdx.x")
    assert sch.mod.script() == before.script()
    assert len(sch.trace) == 4  # recorded, like parallel() on a parallel loop


def test_bind_unit_loop_and_sibling_loops_same_axis(func):
    """Sibling nests may each bind threadIdx.x (TVM launches max extent threads)."""
    sch = wb.Schedule(func)
    sch.bind(_y(sch)[1], "threadIdx.x")
    sch.bind(_c(sch)[1], "threadIdx.x")
    assert_verifies(sch, func)


# --------------------------------------------------------------------------- refusals


def test_bind_fail_reduction_loop(func):
    """A reduction loop may go to threadIdx.x/y/z only (a cross-thread reduction)."""
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    for tag in ("blockIdx.x", "blockIdx.z", "vthread.x"):
        e = assert_schedule_error(sch, lambda t=tag: sch.bind(k, t), wb.ScheduleError, "k", "Y")
        assert isinstance(e, wb.schedule.NotDataParallelError)
        assert "reduction" in str(e) and "threadIdx" in str(e)


def test_bind_fail_loop_over_reduction(func):
    """An outer spatial loop is fine, a fused spatial+reduction loop only goes to
    threadIdx (TVM's rule: each reduce iter var it feeds makes a cross-thread reduction)."""
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    fused = sch.fuse(j, k)
    assert_schedule_error(
        sch, lambda: sch.bind(fused, "blockIdx.x"), wb.schedule.NotDataParallelError, "j_k_fused"
    )


@pytest.mark.parametrize("tag", ["blockIdx.w", "threadIdx", "blockidx.x", "warp", "", 3, None])
def test_bind_fail_bad_thread_axis(func, tag):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    e = assert_schedule_error(sch, lambda: sch.bind(i, tag), InvalidThreadAxisError, "i")
    for valid in THREAD_TAGS:
        assert valid in str(e)
    assert isinstance(e, ValueError)


def test_bind_rebinds_a_bound_loop(func):
    """As in TVM, binding a bound loop to another axis moves it to that axis."""
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    sch.bind(i, "blockIdx.x")
    sch.bind(i, "threadIdx.x")
    assert (sch.get(i).kind, sch.get(i).thread_tag) == ("thread_binding", "threadIdx.x")
    assert_verifies(sch, func)


@pytest.mark.parametrize("kind", ["parallel", "vectorize", "unroll"])
def test_bind_rekinds_a_parallel_vectorized_or_unrolled_loop(func, kind):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    getattr(sch, kind)(j)
    sch.bind(j, "threadIdx.x")
    assert (sch.get(j).kind, sch.get(j).thread_tag) == ("thread_binding", "threadIdx.x")


_NESTED_SAME_AXIS = """\
    for i in T.thread_binding(16, thread="threadIdx.x"):
        for j in T.thread_binding(16, thread="threadIdx.x"):
            for k in range(16):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


@pytest.mark.parametrize("order", ["outer_first", "inner_first"])
def test_bind_same_axis_nested_is_accepted(order):
    """As in TVM 0.27, a loop under (or around) a loop bound to the same axis can be
    bound to it too (a cooperative fetch: on a GPU both read the same thread index); the
    C target runs both loops in full, so the numbers stay right there."""
    func = matmul_func(16, 16, 16)
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    for loop in ((i, j) if order == "outer_first" else (j, i)):
        sch.bind(loop, "threadIdx.x")
    text = sch.func.script()
    body = text[text.index("    for i in"):] + "\n"
    assert body == _NESTED_SAME_AXIS
    assert sch.trace.lines()[-2:] == [
        f'sch.bind(loop={a}, thread_axis="threadIdx.x")'
        for a in (("l1", "l2") if order == "outer_first" else ("l2", "l1"))
    ]
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_bind_fail_stale_handle(func):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    sch.split(j, factors=[None, 4])
    assert_schedule_error(
        sch, lambda: sch.bind(j, "threadIdx.x"), wb.schedule.StaleHandleError, "j"
    )


def test_bind_fail_not_a_loop(func):
    sch = wb.Schedule(func)
    blk = sch.get_block("Y")
    assert_schedule_error(
        sch, lambda: sch.bind(blk, "threadIdx.x"), wb.schedule.InvalidScheduleArgumentError
    )


def test_bound_loop_takes_other_loop_kinds_but_refuses_split(func):
    """TVM re-kinds a bound loop (the binding goes) but will not split or fuse it."""
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    sch.bind(j, "threadIdx.x")
    assert_schedule_error(
        sch, lambda: sch.split(j, factors=[None, 4]), wb.schedule.BoundLoopError, "j"
    )
    assert_schedule_error(sch, lambda: sch.fuse(i, j), wb.schedule.BoundLoopError, "j")
    sch.parallel(j)
    assert (sch.get(j).kind, sch.get(j).thread_tag) == ("parallel", None)


def test_bind_refusal_in_replayed_trace_names_the_step():
    func = matmul_func(16, 16, 16)
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    text = sch.trace.script().replace('"blockIdx.x"', '"blockIdx.q"')
    fresh = wb.Schedule(func)
    with pytest.raises(wb.TraceError, match=r"step 2 .*blockIdx\.q"):
        wb.Trace.from_python(text).apply_to_schedule(fresh)
    assert len(fresh.trace) == 0


if __name__ == "__main__":
    if "--update-golden" not in sys.argv:
        sys.exit("usage: python tests/test_schedule_bind.py --update-golden")
    f = mm_relu_func(N)
    for name in sorted(CASES):
        print(write_golden(f"bind_{name}", scheduled(f, name).mod.script()))


def test_bound_loop_that_does_not_start_at_zero_computes_right():
    """TVM binds a loop starting at 1 (after loop_partition) to a thread axis; the
    generated code offsets the loop variable from the thread index."""
    func = wb.workloads.elementwise_chain(8, 4)
    sch = wb.Schedule(func)
    c = sch.get_loops(sch.get_block("batch_norm"))[-1]
    sch.loop_partition(c, factors=[1, 1], preserve_unit_iters=False)
    tail = sch.get_loops(sch.get_block("batch_norm_c1"))[-1]
    assert sch.get(tail).min == 1
    sch.bind(tail, "blockIdx.x")
    assert wb.verify(sch.mod, func).ok
    source = wb.build(sch.mod).source
    assert "c1_t + 1" in source
