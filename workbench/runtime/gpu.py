"""Building GPU schedules: CUDA through cupy, or the emulator on the CPU.

``wb.build(mod, target="cuda")`` lowers the module, plans its kernels
(:func:`workbench.codegen.gpu.plan_device_module`), prints CUDA
(:func:`workbench.codegen.cuda.generate_cuda`) and loads it with cupy
(:class:`workbench.runtime.cuda.CudaKernel`: needs a GPU).

``wb.build(mod, target="cuda", emulate=True)`` runs the same kernels with the GPU's
semantics on the CPU (:mod:`workbench.codegen.emulate`): an :class:`EmulatedKernel`,
called like any kernel on numpy arrays. ``check_races=True`` records every shared and
global access between barriers and raises :class:`~workbench.RaceError` for the first
pair of threads that conflict; :meth:`EmulatedKernel.profile` counts memory transactions,
bank conflicts and occupancy.

>>> import numpy as np, workbench as wb
>>> from workbench.gpu_examples import gpu_matmul_schedule
>>> kernel = wb.build(gpu_matmul_schedule(64, tile=32).mod, target="cuda", emulate=True)
>>> a, b = np.ones((64, 64), "float32"), np.ones((64, 64), "float32")
>>> c = np.zeros((64, 64), "float32")
>>> kernel(a, b, c)
>>> float(c[5, 7])
64.0
>>> "__syncthreads();" in kernel.source
True
"""

from __future__ import annotations

import numpy as np

from ..codegen.c import as_ir_module, generate_c_source
from ..codegen.cuda import generate_cuda
from ..codegen.emulate import emulate_device_function, instrument_tables
from ..codegen.gpu import lower_for_gpu
from ..codegen.gpu_plan import DeviceModule
from ..ir.stmt import IRModule, PrimFunc
from .compiler import DEFAULT_FLAGS, compile_shared, load_library
from .cpu import Kernel
from .flops import flop_count

__all__ = ["EmulatedKernel", "build_gpu"]


def build_gpu(mod_or_func, target="cuda", *, emulate: bool = False,
              check_races: bool = False):
    """See the module docstring; what ``wb.build`` calls for a CUDA target."""
    from ..target import Target

    tgt = Target.from_any(target)
    mod = as_ir_module(mod_or_func)
    lowered, device = lower_for_gpu(mod, tgt)
    source = generate_cuda(device)
    if not emulate:
        if check_races:
            raise ValueError("build: check_races=True needs emulate=True (races are found "
                             "by the emulator)")
        from .cuda import CudaKernel

        return CudaKernel(source, device, tgt, mod=mod)
    return EmulatedKernel(mod, lowered, device, source, tgt, check_races=check_races)


def _compile(funcs: list[PrimFunc]):
    emulated = IRModule(tuple((f.name, f) for f in funcs))
    generated = generate_c_source(emulated)
    lib = load_library(compile_shared(generated.text, flags=DEFAULT_FLAGS))
    return emulated, generated, lib


class EmulatedKernel(Kernel):
    """GPU kernels run on the CPU with the GPU's semantics.

    Called like a CPU :class:`~workbench.Kernel` (numpy arrays, in place). ``source``
    is the CUDA text a GPU would run; ``emulator_source`` the C that runs here;
    ``device_module`` the planned kernels (launch sizes, shared/local buffers);
    ``emulated`` the CPU IR. With ``check_races`` every call checks for data races and
    raises :class:`~workbench.RaceError` (the arrays then hold what the racy run
    computed).
    """

    def __init__(self, mod: IRModule, lowered: IRModule, device: DeviceModule,
                 cuda_source: str, target, *, check_races: bool = False):
        mode = "races" if check_races else None
        funcs = [emulate_device_function(f, instrument=mode) for f in device.functions]
        emulated, generated, lib = _compile(funcs)
        super().__init__(emulated, generated.text, lib, generated.symbols, lowered)
        self.mod = mod
        self.source = cuda_source
        self.emulator_source = generated.text
        self.emulated = emulated
        self.device_module = device
        self.target = target
        self.check_races = check_races
        self._tables = {f.name: instrument_tables(f) for f in funcs}
        for name, func in mod.functions:  # flops of the scheduled IR, not the emulation
            if name in self._functions and not func.shape_vars:
                self._functions[name].flops = flop_count(func)
        default = self._default_name()
        self.flops = self._functions[default].flops if default else None
        self._profile_lib = None
        if check_races:
            from ..codegen.gpu_instrument import set_mode

            for name, fn in self._functions.items():
                fn._before_call = lambda: set_mode(self._lib, "race")
                fn._after_call = self._race_checker(name)

    def _race_checker(self, name: str):
        from ..codegen.gpu_instrument import read_race_report

        kernels = self.device_module[name].kernels

        def check() -> None:
            error = read_race_report(self._lib, self._tables[name], kernels)
            if error is not None:
                raise error

        return check

    def profile(self, *arrays: np.ndarray, func_name: str | None = None, target=None):
        """Run the kernels once on ``arrays`` (modified in place, as a call would) with
        memory instrumentation and return a :class:`~workbench.codegen.gpu_instrument.GpuProfile`:
        per kernel, global memory sectors (coalescing), shared-memory bank conflicts,
        shared bytes and threads per block, a register estimate and the occupancy on
        ``target`` (default: the kernel's target).
        """
        from ..codegen.gpu_instrument import read_profile, set_mode
        from ..target import Target

        name = func_name or self._default_name()
        if name is None:
            raise ValueError(f"profile: the module has several functions "
                             f"{self.function_names}; pass func_name=")
        if self._profile_lib is None:
            funcs = [emulate_device_function(f, instrument="profile")
                     for f in self.device_module.functions]
            emulated, generated, lib = _compile(funcs)
            self._profile_lib = (Kernel(emulated, generated.text, lib, generated.symbols),
                                 {f.name: instrument_tables(f) for f in funcs})
        kernel, tables = self._profile_lib
        fn = kernel[name]
        fn._before_call = lambda: set_mode(kernel._lib, "profile")
        fn(*arrays)
        tgt = Target.from_any(target) if target is not None else self.target
        return read_profile(kernel._lib, tables[name], tgt, self.device_module[name].kernels)

    def __repr__(self) -> str:
        kernels = ", ".join(k.name for k in self.device_module.kernels)
        races = ", check_races=True" if self.check_races else ""
        return f"EmulatedKernel(target={str(self.target)!r}, kernels=[{kernels}]{races})"
