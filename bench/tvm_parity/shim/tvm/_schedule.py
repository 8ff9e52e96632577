"""``tvm.s_tir.Schedule`` is the workbench's Schedule, with TVM's constructor.

What differs from ``wb.Schedule`` is only what TVM's Python class does before any
primitive runs: a PrimFunc is scheduled as the module ``{"main": func}``, and TVM-only
options (``debug_mask``, ``error_render_level``, ``enable_check``) are accepted and
ignored. ``sch.trace`` is a TVM-style view (``as_python()``, ``decisions``...). A
primitive or facility the workbench lacks (``sch.transform_layout``, ``sch.get_sref``,
``sch.state``) raises :class:`NotApplicable`.
"""

from __future__ import annotations

from typing import Any

import workbench as wb

from ._adapt import NotApplicable, as_schedulable
from ._trace import Trace


class Schedule(wb.Schedule):
    def __init__(self, mod: Any, *, seed: int | None = None, debug_mask: Any = "none",
                 error_render_level: str = "detail", enable_check: bool = True):
        if seed is not None and seed < 0:
            seed = None  # TVM: -1 means "pick a seed"
        super().__init__(as_schedulable(mod), seed=seed)

    @property
    def trace(self) -> Trace:  # type: ignore[override]
        return Trace(_wb=self._trace)

    def copy(self) -> Schedule:
        other = super().copy()
        other.__class__ = Schedule
        return other

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise NotApplicable(f"Schedule.{name}: the workbench has no such primitive")


ScheduleError = wb.ScheduleError
