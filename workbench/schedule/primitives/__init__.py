"""Schedule primitives, one family per module, each a pure function on PrimFuncs."""

from .annotate import annotate, unannotate
from .for_kind import set_loop_kind
from .loops import fuse, reorder, split

__all__ = ["annotate", "unannotate", "set_loop_kind", "fuse", "reorder", "split"]
