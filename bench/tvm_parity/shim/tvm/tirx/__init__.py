"""``tvm.tirx`` (and ``tvm.tir``): IR classes and constants the tests touch."""

from __future__ import annotations

from typing import Any

import workbench as wb
from workbench.ir import Block as SBlock  # noqa: F401
from workbench.ir import For, IRModule, PrimFunc  # noqa: F401
from workbench.ir import stmt as _stmt

from .._adapt import FloatImm, IntImm, const, module_getattr  # noqa: F401
from .._schedule import Schedule, ScheduleError  # noqa: F401


class TensorIntrin:
    """``tvm.tirx.TensorIntrin``: registers in the workbench's registry (the functions
    from ``@T.prim_func`` are parsed first). A pair the workbench cannot read or check
    stays unregistered: the test that tensorizes with it then fails on the name."""

    @staticmethod
    def register(name: str, desc: Any, impl: Any, override: bool = False) -> Any:
        try:
            desc, impl = (f.resolve() if hasattr(f, "resolve") else f for f in (desc, impl))
            return wb.TensorIntrin.register(name, desc, impl, override=override)
        except Exception:  # noqa: BLE001 - reported where the intrinsic is used
            return None

    get = staticmethod(wb.TensorIntrin.get)

Block = SBlock
SeqStmt = _stmt.SeqStmt
BufferStore = _stmt.BufferStore


def Var(name: str, dtype: str = "int32", *args: Any, **kwargs: Any) -> Any:  # noqa: N802
    """A scalar variable; as a trace output it stands for a sampled value."""
    return wb.schedule.ExprRV()


__getattr__ = module_getattr(__name__)
