"""``tvm.s_tir.schedule.testing``: IR comparison and the trace round trip."""

from __future__ import annotations

import types
from typing import Any

import workbench as wb
from workbench.testing import roundtrip_trace

from ..._adapt import as_schedulable, module_getattr
from ..._compare import assert_equal
from ..._schedule import Schedule


class TraceRoundTripMismatch(AssertionError):
    """Replaying the schedule's trace (JSON or Python text) does not give its IR."""


def assert_structural_equal_ignore_global_symbol(lhs: Any, rhs: Any, *args: Any,
                                                 **kwargs: Any) -> None:
    assert_equal(lhs, rhs, ignore_global_symbol=True)


def verify_trace_roundtrip(sch: Schedule, mod: Any, *, debug_mask: Any = "all",
                           text_format: Any = ("python", "json")) -> Schedule:
    """The workbench's trace round trip (``wb.testing.roundtrip_trace``): the trace
    replayed from JSON and from Python text (both syntaxes) gives the same IR and
    prints the same trace."""
    func = as_schedulable(mod)
    view = types.SimpleNamespace(mod=sch.mod, trace=wb.Trace(sch._trace.insts))
    try:
        roundtrip_trace(view, func)  # type: ignore[arg-type]
    except (AssertionError, wb.ScheduleError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TraceRoundTripMismatch(f"trace round trip: {first}") from e
    new = Schedule(func)
    wb.Trace(sch._trace.insts).apply_to_schedule(new)
    return new


__getattr__ = module_getattr(__name__)
