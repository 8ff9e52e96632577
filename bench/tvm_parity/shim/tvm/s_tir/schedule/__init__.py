"""``tvm.s_tir.schedule``: Schedule, its errors, trace objects and handles."""

from ..._adapt import module_getattr
from ..._schedule import Schedule, ScheduleError
from ..._trace import BlockRV, ExprRV, Instruction, InstructionKind, LoopRV, SBlockRV, Trace
from . import testing

__getattr__ = module_getattr(__name__)
