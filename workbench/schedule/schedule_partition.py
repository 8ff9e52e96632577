"""The Schedule's loop partition, rolling buffer and epilogue fusion primitives
(loop_partition, rolling_buffer, fuse_reduction_epilogue): a mixin of
:class:`~workbench.schedule.schedule.Schedule`; they record their instructions like the
others."""

from __future__ import annotations

from typing import Any

__all__ = ["PartitionMethods"]


class PartitionMethods:
    """Mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any
