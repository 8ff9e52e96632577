"""The Schedule's tensorization primitives (tensorize, tile_with_tensor_intrin): a mixin of
:class:`~workbench.schedule.schedule.Schedule`; they record their instructions like the
others."""

from __future__ import annotations

from typing import Any

__all__ = ["TensorizeMethods"]


class TensorizeMethods:
    """Mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any
