"""``tvm.s_tir``: the schedule."""

from .._adapt import module_getattr
from .._schedule import Schedule, ScheduleError
from ..tirx import TensorIntrin  # noqa: F401
from . import schedule

__getattr__ = module_getattr(__name__)
