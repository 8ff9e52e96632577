"""A pandas DataFrame that prints in full.

The tables the library returns (``TuneResult.table``, ``Database.table()``, a DLight
report's ``table``) are read by printing them; pandas' defaults cut long tables and wide
columns with ``...``. :class:`FullTable` is an ordinary DataFrame (every pandas operation
works, and frames derived from it print in full too) whose ``print`` and notebook display
show every row, every column and every cell's whole text.

>>> import pandas as pd
>>> t = full_table(pd.DataFrame({"x": range(100), "text": ["y" * 80] * 100}))
>>> isinstance(t, pd.DataFrame), "..." in str(t), len(str(t).splitlines())
(True, False, 101)
"""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["FullTable", "full_table"]

#: The pandas display options under which a FullTable renders.
_FULL = ("display.max_rows", None, "display.min_rows", None, "display.max_columns", None,
         "display.width", None, "display.max_colwidth", None,
         "display.expand_frame_repr", False)


class FullTable(pd.DataFrame):
    """A DataFrame whose text and HTML show all rows, columns and cell text."""

    @property
    def _constructor(self) -> type:
        return FullTable

    def __repr__(self) -> str:
        with pd.option_context(*_FULL):
            return super().__repr__()

    def __str__(self) -> str:
        return self.__repr__()

    def _repr_html_(self) -> Any:
        with pd.option_context(*_FULL):
            return super()._repr_html_()


def full_table(frame: pd.DataFrame) -> FullTable:
    """``frame`` as a :class:`FullTable` (same data, same index)."""
    return FullTable(frame)
