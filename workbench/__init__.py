"""Schedule Workbench: schedule tensor loop nests interactively, TensorIR style."""

from . import ir
from .ir import Buffer, IRModule, PrimFunc, Var
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
from .te import compute, create_prim_func, max, min, placeholder, reduce_axis, sum  # noqa: A004

__version__ = "0.1.0"
