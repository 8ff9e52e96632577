"""Search: tuning database (and, from the other parts, spaces, rules and tuning).

>>> from workbench.search import Database
"""

from . import rules
from .database import Database, DatabaseWarning, Record, Workload, decisions_summary
from .result import TuneResult
from .space import default_space
from .tune import tune

__all__ = [
    "Database", "DatabaseWarning", "Record", "TuneResult", "Workload", "decisions_summary",
    "tune", "rules", "default_space",
]
