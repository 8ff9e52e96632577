"""Block arguments given by name, as TVM's Python Schedule accepts them."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.testing import assert_ir_unchanged


def by_handles() -> wb.Schedule:
    sch = wb.Schedule(wb.workloads.mm_relu(32, 32, 32))
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    sch.reverse_compute_at(sch.get_block("C"), j)
    sch.cache_read(y, 0, "local")
    sch.decompose_reduction(y, k)
    return sch


def by_names() -> wb.Schedule:
    sch = wb.Schedule(wb.workloads.mm_relu(32, 32, 32))
    i, j, k = sch.get_loops("Y")
    sch.reverse_compute_at("C", j)
    sch.cache_read("Y", 0, "local")
    sch.decompose_reduction("Y", k)
    return sch


def test_names_give_the_same_ir_and_a_replayable_trace():
    a, b = by_handles(), by_names()
    assert wb.structural_equal(a.mod, b.mod)
    # each name became a recorded get_block, so the trace replays on a fresh schedule
    assert b.trace.script().count("sch.get_block(") == 4
    fresh = wb.Schedule(wb.workloads.mm_relu(32, 32, 32))
    wb.Trace.from_json(b.trace.as_json()).apply_to_schedule(fresh)
    assert wb.structural_equal(fresh.mod, b.mod)


@pytest.mark.parametrize("call", [
    lambda s, loops: s.compute_inline("C"),                 # found, then refused: output
    lambda s, loops: s.get_loops("missing"),                # no such block
    lambda s, loops: s.compute_at("Y", loops[0]),           # found, then refused
    lambda s, loops: s.cache_read("Y", 7, "local"),         # found, bad buffer index
])
def test_a_refusal_after_a_name_lookup_leaves_no_trace(call):
    sch = wb.Schedule(wb.workloads.mm_relu(16, 16, 16))
    loops = sch.get_loops(sch.get_block("Y"))
    sch.reverse_compute_at(sch.get_block("C"), loops[1])
    before_trace, before_ir = sch.trace.script(), sch.mod.script()
    with pytest.raises(wb.ScheduleError):
        call(sch, loops)
    assert_ir_unchanged(sch, before_ir)
    assert sch.trace.script() == before_trace  # the name's get_block was undone too


def test_block_or_loop_arguments_take_names():
    sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    sch.annotate("C", "note", "from a name")
    assert 'T.block_attr({"note": "from a name"})' in sch.mod.script()
    assert len(sch.get_child_blocks(sch.get_loops("C")[0])) == 1
