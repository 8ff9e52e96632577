"""Scheduling: the Schedule recorder, traces, errors and the primitive families."""

from .errors import (
    AnnotationNotFoundError,
    BlockNotFoundError,
    BoundLoopError,
    DuplicateLoopError,
    FunctionNotFoundError,
    InvalidFactorsError,
    InvalidScheduleArgumentError,
    LoopNotStartWithZeroError,
    LoopsNotInChainError,
    LoopsNotNestedError,
    NotDataParallelError,
    NotSingleChildError,
    OnlyLeafError,
    RemovedHandleError,
    ScheduleError,
    StaleHandleError,
    TraceError,
    WrongFactorProductError,
)
from .file import ScheduleFile, ScheduleFileError, load_schedule, read_schedule_file
from .schedule import Schedule
from .symbolic import SymbolicExtentError
from .trace import BlockRV, ExprRV, Instruction, LoopRV, Trace


def _family_errors() -> dict[str, type]:
    """Every family's ScheduleError subclasses (declared at the top of its module): each
    module of :mod:`.primitives` is looked at, so a new family needs no entry here."""
    import importlib
    import pkgutil

    from . import primitives

    found: dict[str, type] = {}
    for info in sorted(pkgutil.iter_modules(primitives.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{primitives.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if (isinstance(obj, type) and issubclass(obj, ScheduleError)
                    and obj.__module__ == module.__name__):
                assert name not in found, f"two error classes named {name}"
                found[name] = obj
    return found


globals().update(_family_errors())

__all__ = [name for name in dir() if not name.startswith("_")]
