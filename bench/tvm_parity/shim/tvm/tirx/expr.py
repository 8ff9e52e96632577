"""``tvm.tirx.expr``."""

from .. import tirx as _tirx
from .._adapt import FloatImm, IntImm, module_getattr  # noqa: F401

Var = _tirx.Var

__getattr__ = module_getattr(__name__)
