"""Rule-based default schedules, shaped like TVM's ``tvm.s_tir.dlight``.

A list of rules, tried in order on every function of a module; the first that
matches schedules it. :func:`diagnose` tells which rule took which function, why
the others passed, and what the result launches.

>>> import workbench as wb
>>> from workbench import dlight as dl
>>> mod = wb.IRModule.from_funcs(wb.workloads.transpose(64, 64))
>>> scheduled = dl.apply_default_schedule(mod, dl.gpu.Fallback(), target="cuda")
>>> dl.diagnose(mod, dl.gpu.Fallback(), target="cuda").assignment
{'transpose': 'Fallback'}
"""

from . import analysis, cpu, gpu
from .analysis import BlockInfo, IterInfo, normalize_prim_func
from .base import (
    ApplyDefaultSchedule,
    Attempt,
    CPUScheduleRule,
    Declined,
    Diagnosis,
    FunctionReport,
    GPUScheduleRule,
    ScheduleRule,
    apply_default_schedule,
    diagnose,
    is_scheduled,
    schedule_function,
)

__all__ = [
    "ApplyDefaultSchedule",
    "Attempt",
    "BlockInfo",
    "CPUScheduleRule",
    "Declined",
    "Diagnosis",
    "FunctionReport",
    "GPUScheduleRule",
    "IterInfo",
    "ScheduleRule",
    "analysis",
    "apply_default_schedule",
    "cpu",
    "diagnose",
    "gpu",
    "is_scheduled",
    "normalize_prim_func",
    "schedule_function",
]
