"""What a GPU build is made of: kernels, their launch configurations and what the host
allocates. Produced by :func:`workbench.codegen.gpu.plan_device_module`; read by the CUDA
printer, the cupy runtime and the emulator.

A function of a GPU schedule becomes one kernel per independently bound root loop nest
(a root statement whose outermost loops are bound to ``blockIdx``/``threadIdx``). Each
kernel keeps its loop nest as IR: loops bound to ``threadIdx``/``blockIdx`` still appear
(every one with its axis's launch extent: a narrower loop was widened and guarded),
``__syncthreads()`` barriers are ``Evaluate(OpaqueCall("tvm_storage_sync", ("shared",)))``
statements, and the shared and local buffers it uses are hoisted to the kernel
(``shared``: one per thread block, ``local``: one per thread).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.buffer import Buffer
from ..ir.expr import PrimExpr, Var
from ..ir.stmt import BARRIER_OP, PrimFunc, Stmt, barrier, is_barrier

__all__ = [
    "BARRIER_OP",
    "BLOCK_TAGS",
    "THREAD_TAGS_GPU",
    "DeviceFunction",
    "DeviceModule",
    "GpuKernel",
    "LaunchConfig",
    "barrier",
    "is_barrier",
]

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS_GPU = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True)
class LaunchConfig:
    """Grid and block sizes of one kernel launch, in x, y, z order.

    ``grid`` entries are ints or expressions of the function's shape variables (a
    symbolic batch dimension); ``block`` entries are ints (threads per block must be
    known when compiling).
    """

    grid: tuple[int | PrimExpr, int | PrimExpr, int | PrimExpr]
    block: tuple[int, int, int]

    @property
    def threads_per_block(self) -> int:
        x, y, z = self.block
        return x * y * z


@dataclass(frozen=True)
class GpuKernel:
    """One ``__global__`` function.

    Attributes:
        name: the kernel's symbol (``<func>_kernel`` or ``<func>_kernel_<k>``).
        func_name: the IR function it comes from.
        body: the kernel's loop nest (see the module docstring).
        params: the global buffers it takes: every parameter of the function (in order;
            its shape variables come from their shapes), then the host-allocated
            intermediates it uses.
        shape_vars: the function's shape variables it needs (passed as scalars after
            the buffers).
        shared: buffers in shared memory (one copy per thread block).
        local: buffers in registers/local memory (one copy per thread).
        launch: grid and block sizes.
    """

    name: str
    func_name: str
    body: Stmt
    params: tuple[Buffer, ...]
    shape_vars: tuple[Var, ...]
    shared: tuple[Buffer, ...]
    local: tuple[Buffer, ...]
    launch: LaunchConfig

    @property
    def shared_bytes(self) -> int:
        """Static shared memory per thread block, in bytes."""
        return sum(_nbytes(b) for b in self.shared)

    @property
    def local_bytes(self) -> int:
        """Local (per-thread) buffer bytes: a lower bound of register use."""
        return sum(_nbytes(b) for b in self.local)


@dataclass(frozen=True)
class DeviceFunction:
    """The host side of one IR function: intermediates to allocate (global memory the
    kernels pass between them), then the kernels to launch in order."""

    name: str
    func: PrimFunc  # the lowered function (parameters and shape variables)
    intermediates: tuple[Buffer, ...]
    kernels: tuple[GpuKernel, ...]


@dataclass(frozen=True)
class DeviceModule:
    """Every function of a module, planned for a GPU."""

    functions: tuple[DeviceFunction, ...]

    def __getitem__(self, name: str) -> DeviceFunction:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"no function {name!r}; the module has {[f.name for f in self.functions]}")

    @property
    def kernels(self) -> tuple[GpuKernel, ...]:
        return tuple(k for f in self.functions for k in f.kernels)


def _nbytes(buf: Buffer) -> int:
    """Bytes of a kernel-local buffer, storage_align padding included."""
    from .cstyle import buffer_strides

    if not all(isinstance(d, int) for d in buf.shape):
        raise ValueError(f"buffer {buf.name!r} has a symbolic shape; GPU-local buffers "
                         "need a constant size")
    return int(buffer_strides(buf)[1]) * np.dtype(buf.dtype).itemsize
