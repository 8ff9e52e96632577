"""The Schedule's layout transformations of :mod:`.primitives.transform_layout`
(transform_layout, transform_block_layout): a mixin of
:class:`~workbench.schedule.schedule.Schedule`; they record their instructions like the
others."""

from __future__ import annotations

from typing import Any

__all__ = ["LayoutMethods"]


class LayoutMethods:
    """Mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any
