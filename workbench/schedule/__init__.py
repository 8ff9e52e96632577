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
    """Every family's ScheduleError subclasses (declared at the top of its module)."""
    from .primitives import (
        block_info,
        blockize,
        buffer_access,
        cache,
        cache_index,
        cache_inplace,
        compute_at,
        compute_inline,
        for_kind,
        fuse_epilogue,
        layout,
        loops,
        merge,
        pad_einsum,
        padding,
        partition,
        read_write_at,
        reducer,
        reduction,
        reindex,
        reindex_cache,
        rolling_buffer,
        sampling,
        set_dtype,
        tensorize,
        transform_block_layout,
        transform_layout,
    )

    found: dict[str, type] = {}
    for module in (
        block_info,
        blockize,
        buffer_access,
        cache,
        cache_index,
        cache_inplace,
        compute_at,
        compute_inline,
        for_kind,
        fuse_epilogue,
        layout,
        loops,
        merge,
        pad_einsum,
        padding,
        partition,
        read_write_at,
        reducer,
        reduction,
        reindex,
        reindex_cache,
        rolling_buffer,
        sampling,
        set_dtype,
        tensorize,
        transform_block_layout,
        transform_layout,
    ):
        for name, obj in vars(module).items():
            if (isinstance(obj, type) and issubclass(obj, ScheduleError)
                    and obj.__module__ == module.__name__):
                assert name not in found, f"two error classes named {name}"
                found[name] = obj
    return found


globals().update(_family_errors())

__all__ = [name for name in dir() if not name.startswith("_")]
