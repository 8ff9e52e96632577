"""``tvm.tirx`` (and ``tvm.tir``): IR classes and constants the tests touch."""

from __future__ import annotations

from typing import Any

import workbench as wb
from workbench.ir import Block as SBlock  # noqa: F401
from workbench.ir import For, IRModule, PrimFunc  # noqa: F401
from workbench.ir import stmt as _stmt

from .._adapt import FloatImm, IntImm, const, module_getattr  # noqa: F401
from .._schedule import Schedule, ScheduleError  # noqa: F401

Block = SBlock
SeqStmt = _stmt.SeqStmt
BufferStore = _stmt.BufferStore


def Var(name: str, dtype: str = "int32", *args: Any, **kwargs: Any) -> Any:  # noqa: N802
    """A scalar variable; as a trace output it stands for a sampled value."""
    return wb.schedule.ExprRV()


__getattr__ = module_getattr(__name__)
