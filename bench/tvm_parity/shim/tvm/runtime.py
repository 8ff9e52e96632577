"""``tvm.runtime.tensor`` and ``tvm.compile`` on the workbench: a numpy array behind
TVM's tensor interface, and ``wb.build`` (the C target) behind ``tvm.compile``, so
tests that run a scheduled function against the original one run here too."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._adapt import NotApplicable, module_getattr, resolve


class Tensor:
    """A numpy array with TVM's ``.numpy()`` / ``.shape`` / ``.dtype``."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def numpy(self) -> np.ndarray:
        return self.array.copy()

    @property
    def shape(self) -> tuple:
        return self.array.shape

    @property
    def dtype(self) -> str:
        return str(self.array.dtype)


def tensor(data: Any, device: Any = None) -> Tensor:
    if device is not None:
        raise NotApplicable("tvm.runtime.tensor on a device: the workbench runs on the CPU")
    return Tensor(np.array(data.numpy() if isinstance(data, Tensor) else data))


def compile_func(func: Any, target: Any = None) -> Any:
    """``tvm.compile(func)``: the workbench's C build, called with :class:`Tensor`s."""
    import workbench as wb

    if target is not None and str(target).split()[0] not in ("llvm", "c"):
        raise NotApplicable(f"tvm.compile for target {target!r}: the workbench builds C here")
    kernel = wb.build(resolve(func), target="c")

    def run(*args: Any) -> None:
        kernel(*(a.array if isinstance(a, Tensor) else a for a in args))

    return run


__getattr__ = module_getattr(__name__)
