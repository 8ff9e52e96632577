"""Lowering passes: IR -> IR rewrites run between scheduling and code generation.

:func:`lower` is what ``wb.build`` runs before printing C; call it yourself to look at
the IR the code generator sees (``print(wb.lower(sch.mod).script())``).
"""

from .compact import compact_buffer_allocation
from .lower import lower

__all__ = ["compact_buffer_allocation", "lower"]
