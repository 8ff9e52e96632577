"""CPU rules (TVM's ``dlight.cpu``): :class:`GEMV`, :class:`Reduction`, :class:`Fallback`."""

from .fallback import Fallback
from .gemv import GEMV
from .reduction import Reduction

__all__ = ["GEMV", "Fallback", "Reduction"]
