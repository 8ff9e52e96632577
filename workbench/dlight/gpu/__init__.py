"""GPU rules (TVM's ``dlight.gpu``), most specific first in the usual order:
:class:`Matmul`, :class:`GEMV`, :class:`LowBatchGEMV`, :class:`Reduction`,
:class:`GeneralReduction`, :class:`Transpose`, :class:`RMSNorm`, :class:`Fallback`."""

from .fallback import Fallback
from .gemv import GEMV
from .general_reduction import GeneralReduction
from .low_batch_gemv import LowBatchGEMV
from .matmul import Matmul
from .reduction import Reduction
from .rmsnorm import RMSNorm
from .transpose import Transpose

__all__ = ["GEMV", "Fallback", "GeneralReduction", "LowBatchGEMV", "Matmul", "RMSNorm",
           "Reduction", "Transpose"]
