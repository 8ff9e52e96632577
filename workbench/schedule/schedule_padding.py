"""The Schedule's padding and buffer-attribute primitives (decompose_padding,
can_decompose_padding, pad_einsum, unsafe_set_dtype, annotate_buffer_access, remove_rv): a
mixin of :class:`~workbench.schedule.schedule.Schedule`; they record their instructions like
the others."""

from __future__ import annotations

from typing import Any

__all__ = ["PaddingMethods"]


class PaddingMethods:
    """Mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any
