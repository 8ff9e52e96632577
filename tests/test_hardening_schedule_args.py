"""Schedules refuse an empty module, and a handle from another function or schedule is
reported as such (not as a loop that "no longer exists")."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.ir.stmt import IRModule
from workbench.schedule.errors import (
    FunctionNotFoundError,
    InvalidScheduleArgumentError,
    StaleHandleError,
)


def test_empty_module_is_refused():
    with pytest.raises(FunctionNotFoundError, match="no functions"):
        wb.Schedule(IRModule(()))
    with pytest.raises(ValueError):  # also a ValueError
        wb.Schedule(IRModule(()))


def _two_functions() -> wb.Schedule:
    mod = IRModule((("a", wb.workloads.mm_relu(16, 16, 16)),
                    ("b", wb.workloads.matmul(16, 16, 16))))
    return wb.Schedule(mod)


@pytest.mark.parametrize("primitive,block", [("compute_at", "Y"),
                                             ("reverse_compute_at", "C")])
def test_loop_of_another_function_is_named_as_such(primitive, block):
    sch = _two_functions()
    blk = sch.get_block(block, func_name="a")
    loop = sch.get_loops(sch.get_block("C", func_name="b"))[0]
    before, steps = sch.mod, len(sch.trace)
    with pytest.raises(InvalidScheduleArgumentError) as info:
        getattr(sch, primitive)(blk, loop)
    err = info.value
    assert not isinstance(err, StaleHandleError)
    text = str(err)
    assert text.startswith(f"{primitive}: ")
    assert "function 'b'" in text and "function 'a'" in text and f'block "{block}"' in text
    assert "no longer exists" not in text
    assert sch.mod is before and len(sch.trace) == steps


def test_loop_of_another_schedule_is_named_as_such():
    func = wb.workloads.mm_relu(16, 16, 16)
    s1, s2 = wb.Schedule(func), wb.Schedule(func)
    loop = s2.get_loops(s2.get_block("C"))[0]
    with pytest.raises(InvalidScheduleArgumentError, match="from another schedule"):
        s1.compute_at(s1.get_block("Y"), loop)


def test_loop_of_the_same_function_still_works():
    sch = _two_functions()
    loop = sch.get_loops(sch.get_block("C", func_name="a"))[0]
    sch.compute_at(sch.get_block("Y", func_name="a"), loop)
    assert sch.trace.script().count("compute_at") == 1
