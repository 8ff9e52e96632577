"""Scheduling: the Schedule recorder, traces, errors and the primitive families."""

from .errors import (
    AnnotationNotFoundError,
    BlockNotFoundError,
    BoundLoopError,
    DuplicateLoopError,
    FunctionNotFoundError,
    InvalidFactorsError,
    InvalidScheduleArgumentError,
    LoopsNotInChainError,
    LoopsNotNestedError,
    NotDataParallelError,
    NotSingleChildError,
    ScheduleError,
    StaleHandleError,
    TraceError,
    WrongFactorProductError,
)
from .schedule import Schedule
from .trace import BlockRV, ExprRV, Instruction, LoopRV, Trace

__all__ = [name for name in dir() if not name.startswith("_")]
