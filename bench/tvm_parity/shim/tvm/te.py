"""``tvm.te`` on the workbench's TE-style frontend (``workbench.te``)."""

from __future__ import annotations

from workbench.te import compute, create_prim_func, max, min, placeholder, reduce_axis, sum  # noqa: F401  # noqa: F401,A004

from ._adapt import const, module_getattr  # noqa: F401

__getattr__ = module_getattr(__name__)
