"""The Schedule's reindexing and extra caching primitives (reindex, reindex_cache_read,
reindex_cache_write, cache_index, cache_inplace, read_at, write_at): a mixin of
:class:`~workbench.schedule.schedule.Schedule`; they record their instructions like the
others."""

from __future__ import annotations

from typing import Any

__all__ = ["ReindexMethods"]


class ReindexMethods:
    """Mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any
