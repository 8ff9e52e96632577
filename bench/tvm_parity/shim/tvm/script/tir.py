"""``from tvm.script import tir as T`` (the classic name): the same as ``tirx``."""

from .tirx import *  # noqa: F403
from .tirx import __getattr__, prim_func  # noqa: F401
