"""Schedule Workbench: schedule tensor loop nests interactively, TensorIR style.

>>> import workbench as wb
>>> func = wb.workloads.mm_relu(128, 128, 128)
>>> sch = wb.Schedule(func)
>>> i, j, k = sch.get_loops(sch.get_block("Y"))
>>> j0, j1 = sch.split(j, factors=[None, 4])
"""

from . import ir, schedule, workloads
from .ir import Buffer, IRModule, PrimFunc, Var, structural_equal, structural_hash
from .ir.expr import (
    cast,
    const,
    cos,
    erf,
    exp,
    fabs,
    log,
    logical_and,
    logical_not,
    logical_or,
    power,
    rsqrt,
    select,
    sigmoid,
    sin,
    sqrt,
    tanh,
)
from .schedule import (
    BlockRV,
    ExprRV,
    LoopRV,
    Schedule,
    ScheduleError,
    Trace,
    TraceError,
)
from .te import compute, create_prim_func, max, min, placeholder, reduce_axis, sum  # noqa: A004

__version__ = "0.1.0"
