"""Run CUDA kernels through cupy: :class:`CudaKernel` and :class:`CudaKernelFunction`.

A :class:`CudaKernel` is made from the CUDA text of a module and its
:class:`~workbench.codegen.gpu_plan.DeviceModule` (the kernels of each function, in
launch order, with their launch configurations). Calling a function checks the arrays
exactly as the CPU runtime does (count, shape, dtype, C-contiguous, outputs writeable
and not overlapping), reads the shape variables of a symbolic function from the arrays,
evaluates each kernel's grid with them, and only then touches the GPU: numpy arrays are
copied to the device (and the outputs copied back), cupy arrays (anything with the CUDA
Array Interface) are used in place, the function's intermediates are allocated with
cupy, and the kernels are launched in order with ``(params..., shape_vars...)``.

The module imports without cupy; whatever needs the GPU raises
:class:`~workbench.target.GpuUnavailableError` saying what is missing (cupy: ``pip
install "schedule-workbench[gpu]"``; or a device). The CUDA module is compiled on first
use with ``cupy.RawModule(code=source, options=("-std=c++17",))``; its kernels are
``extern "C"``, so their names are the ``GpuKernel.name`` symbols.

``wb.measure`` times a prepared CUDA function with CUDA events
(:func:`time_with_events`): the prepared callable carries it as ``event_timer``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..codegen.gpu_plan import DeviceFunction, DeviceModule, GpuKernel, LaunchConfig
from ..ir.expr import IntImm, PrimExpr, Var
from ..ir.stmt import IRModule
from ..target import GpuUnavailableError, Target, import_cupy, require_device
from .cpu import Kernel, KernelArgumentError, KernelFunction
from .flops import flop_count

__all__ = [
    "CUDA_OPTIONS",
    "CudaKernel",
    "CudaKernelFunction",
    "GpuUnavailableError",
    "Launch",
    "LaunchPlan",
    "bind_plan",
    "evaluate_launch",
    "handle_cuda_request",
    "is_device_array",
    "time_with_events",
]

#: Options the CUDA source is compiled with (NVRTC, through cupy).
CUDA_OPTIONS: tuple[str, ...] = ("-std=c++17",)
#: Largest grid in x, y, z (every supported architecture).
MAX_GRID = (2**31 - 1, 65535, 65535)


# -- launch plans: what to launch, as plain data --------------------------------------


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the symbol, grid and block sizes, where each buffer argument
    comes from (``("param", i)``: the function's i-th parameter; ``("intermediate",
    j)``: the j-th host-allocated intermediate), and the scalar arguments ``(value,
    dtype)`` (the shape variables) that follow them."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[tuple[str, int], ...]
    scalars: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class LaunchPlan:
    """Everything needed to run one function on a GPU with its shapes fixed: the CUDA
    source, the parameters' and intermediates' ``(shape, dtype)``, the launches in
    order. Plain data (:meth:`to_json` / :meth:`from_json`), so the isolated worker is
    sent a plan, never a pickle."""

    source: str
    params: tuple[tuple[tuple[int, ...], str], ...]
    intermediates: tuple[tuple[tuple[int, ...], str], ...]
    launches: tuple[Launch, ...]
    options: tuple[str, ...] = CUDA_OPTIONS

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "options": list(self.options),
            "params": [[list(s), d] for s, d in self.params],
            "intermediates": [[list(s), d] for s, d in self.intermediates],
            "launches": [
                {"kernel": L.kernel, "grid": list(L.grid), "block": list(L.block),
                 "args": [list(a) for a in L.args], "scalars": [list(s) for s in L.scalars]}
                for L in self.launches
            ],
        }

    @classmethod
    def from_json(cls, data: Any) -> LaunchPlan:
        """Read a plan back, checking every field's type (``ValueError`` otherwise)."""
        try:
            def shapes(items):
                return tuple((tuple(_ints(s)), str(np.dtype(d))) for s, d in items)

            params = shapes(data["params"])
            intermediates = shapes(data["intermediates"])
            launches = []
            for L in data["launches"]:
                args = tuple((str(k), int(i)) for k, i in L["args"])
                for kind, i in args:
                    bound = len(params) if kind == "param" else len(intermediates)
                    if kind not in ("param", "intermediate") or not 0 <= i < bound:
                        raise ValueError(f"bad argument {[kind, i]}")
                scalars = tuple((int(v), str(d)) for v, d in L.get("scalars", ()))
                grid, block = tuple(_ints(L["grid"])), tuple(_ints(L["block"]))
                if len(grid) != 3 or len(block) != 3:
                    raise ValueError("grid and block need 3 entries")
                launches.append(Launch(str(L["kernel"]), grid, block, args, scalars))
            source = data["source"]
            options = tuple(str(o) for o in data.get("options", CUDA_OPTIONS))
            if not isinstance(source, str):
                raise ValueError("source must be a string")
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"malformed CUDA launch plan: {err}") from None
        return cls(source, params, intermediates, tuple(launches), options)


def _ints(items: Any) -> list[int]:
    out = []
    for x in items:
        if isinstance(x, bool) or not isinstance(x, int | np.integer):
            raise ValueError(f"expected integers, got {x!r}")
        out.append(int(x))
    return out


def _evaluate(e: int | PrimExpr, values: Mapping[Var, int], what: str) -> int:
    """The integer value of a launch extent or buffer dimension for these shapes."""
    if isinstance(e, int | np.integer):
        return int(e)
    if isinstance(e, IntImm):
        return int(e.value)
    from ..ir.functor import substitute
    from ..ir.simplify import simplify

    got = simplify(substitute(e, {v: IntImm(int(n), v.dtype) for v, n in values.items()}))
    if not isinstance(got, IntImm):
        raise ValueError(f"{what} {e} does not reduce to a number (left with {got}); "
                         "its shape variables have no values")
    return int(got.value)


def evaluate_launch(
    launch: LaunchConfig, values: Mapping[Var, int] | None = None, kernel: str = "kernel"
) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """``(grid, block)`` as ints, the grid's expressions of shape variables evaluated
    with ``values``; a grid that is not positive or exceeds CUDA's limits raises
    ``ValueError``.

    >>> from workbench.ir.expr import Var
    >>> n = Var("n")
    >>> evaluate_launch(LaunchConfig(((n + 127) // 128, 1, 1), (128, 1, 1)), {n: 1000})
    ((8, 1, 1), (128, 1, 1))
    """
    values = values or {}
    grid = tuple(_evaluate(g, values, f"{kernel}: grid size") for g in launch.grid)
    block = tuple(int(b) for b in launch.block)
    for axis, g, limit in zip("xyz", grid, MAX_GRID):
        if not 1 <= g <= limit:
            raise ValueError(f"{kernel}: gridDim.{axis} = {g}; CUDA allows 1 to {limit}")
    return grid, block  # type: ignore[return-value]


# -- device arrays -----------------------------------------------------------------------


def is_device_array(x: object) -> bool:
    """Whether ``x`` is a GPU array (it has the CUDA Array Interface: cupy, numba,
    torch CUDA tensors...)."""
    return hasattr(x, "__cuda_array_interface__")


def _device_layout(arr: Any) -> tuple[int, bool, bool]:
    """(device pointer, C-contiguous, read-only) of a CUDA Array Interface array."""
    iface = arr.__cuda_array_interface__
    ptr, readonly = iface["data"]
    strides = iface.get("strides")
    contiguous = True
    if strides is not None:
        step = np.dtype(arr.dtype).itemsize
        for dim, stride in zip(reversed(tuple(arr.shape)), reversed(tuple(strides))):
            if dim > 1 and stride != step:
                contiguous = False
            step *= dim
    return int(ptr), contiguous, bool(readonly)


def _shape_proxy(arr: Any) -> np.ndarray:
    """A numpy array of ``arr``'s shape that owns no memory (for shape checks)."""
    return np.broadcast_to(np.empty((), np.uint8), tuple(int(d) for d in arr.shape))


# -- timing ------------------------------------------------------------------------------


def time_with_events(call: Callable[[], object], number: int) -> float:
    """Seconds taken by ``number`` back-to-back calls of ``call`` on the GPU, measured
    with two CUDA events around them (``cupy.cuda.Event``), synchronized at the end.
    This is what ``wb.measure`` uses for a prepared CUDA function."""
    cp = import_cupy("timing with CUDA events")
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(number):
        call()
    end.record()
    end.synchronize()
    return float(cp.cuda.get_elapsed_time(start, end)) / 1e3


def _compile_error(err: Exception, source: str, options: Sequence[str]) -> Exception:
    """cupy's NVRTC CompileException as a CudaCompileError (other errors unchanged)."""
    if type(err).__name__ != "CompileException":
        return err
    from ..codegen.nvcc import CudaCompileError

    return CudaCompileError(("nvrtc", *options), source, str(err), 1)


def bind_plan(cp: Any, module: Any, plan: LaunchPlan, device_params: Sequence[Any]
              ) -> Callable[[], int]:
    """A callable with no arguments that launches ``plan``'s kernels in order on
    ``device_params`` (the function's arrays on the GPU), with the intermediates
    allocated once here; it returns 0 like the C functions. It carries
    ``event_timer`` (:func:`time_with_events`), so ``wb.measure`` times it on the GPU."""
    intermediates = [cp.empty(shape, dtype=dtype) for shape, dtype in plan.intermediates]
    calls = []
    for L in plan.launches:
        try:
            fn = module.get_function(L.kernel)
        except Exception as err:  # NVRTC runs here, on first use
            raise _compile_error(err, plan.source, plan.options) from err
        args = [device_params[i] if kind == "param" else intermediates[i] for kind, i in L.args]
        args += [np.dtype(dtype).type(value) for value, dtype in L.scalars]
        calls.append((fn, L.grid, L.block, tuple(args)))

    def run() -> int:
        for fn, grid, block, args in calls:
            fn(grid, block, args)
        return 0

    run.event_timer = time_with_events  # type: ignore[attr-defined]
    run.intermediates = intermediates  # type: ignore[attr-defined]
    return run


# -- the kernel --------------------------------------------------------------------------


class CudaKernelFunction(KernelFunction):
    """One function of a :class:`CudaKernel`: call it with numpy or cupy arrays.

    The checks and the reading of shape variables are :class:`KernelFunction`'s (a
    device array may stand wherever a numpy array may), done before any GPU call.
    ``launch_plan(*arrays)`` shows what would be launched for these arrays without a
    GPU.
    """

    def __init__(self, device_function: DeviceFunction, owner: CudaKernel) -> None:
        func = device_function.func
        flops = None if func.shape_vars else flop_count(func)
        super().__init__(func, cfunc=None, flops=flops)  # type: ignore[arg-type]
        self.device_function = device_function
        self._owner = owner
        slots: dict[int, tuple[str, int]] = {}
        for i, p in enumerate(func.params):
            slots[id(p)] = ("param", i)
        for j, b in enumerate(device_function.intermediates):
            slots[id(b)] = ("intermediate", j)
        self._slots: list[tuple[GpuKernel, tuple[tuple[str, int], ...]]] = []
        for k in device_function.kernels:
            missing = [b.name for b in k.params if id(b) not in slots]
            if missing:
                raise ValueError(
                    f"kernel {k.name!r} of {self.name!r} takes buffers {missing} that are "
                    "neither parameters of the function nor host-allocated intermediates"
                )
            unknown = [v.name for v in k.shape_vars if v not in self._binders]
            if unknown:
                raise ValueError(f"kernel {k.name!r} needs shape variables {unknown} that "
                                 f"no parameter of {self.name!r} gives")
            self._slots.append((k, tuple(slots[id(b)] for b in k.params)))

    # the CPU checks, with device arrays allowed -------------------------------------

    def _shape_values(self, arrays: tuple) -> dict:
        return super()._shape_values(
            tuple(a if isinstance(a, np.ndarray) else _shape_proxy(a) for a in arrays)
        )

    def _check(self, arrays: tuple) -> dict:  # type: ignore[override]
        """Check ``arrays``; return the shape variables' values."""
        params = self._params
        if len(arrays) != len(params):
            names = ", ".join(p.name for p in params)
            raise KernelArgumentError(
                f"kernel {self.name!r} takes {len(params)} arrays ({names}), got {len(arrays)}"
            )
        for i, arr in enumerate(arrays):
            if not isinstance(arr, np.ndarray) and not is_device_array(arr):
                raise self._fail(
                    i, f"must be a numpy.ndarray or a cupy array, got {type(arr).__name__}"
                )
        values = self._shape_values(arrays) if self._shape_vars else {}
        spans = []
        for i, (arr, p) in enumerate(zip(arrays, params)):
            if values:
                self._check_shape(i, arr, values)
            elif tuple(arr.shape) != p.shape:
                raise self._fail(i, f"must have shape {p.shape}, got {tuple(arr.shape)}")
            if np.dtype(arr.dtype) != p.dtype:
                raise self._fail(i, f"must have dtype {p.dtype}, got {np.dtype(arr.dtype)}")
            if isinstance(arr, np.ndarray):
                ptr, contiguous = arr.ctypes.data, arr.flags.c_contiguous
                readonly, space = not arr.flags.writeable, "host"
            else:
                ptr, contiguous, readonly = _device_layout(arr)
                space = "device"
            if not contiguous:
                raise self._fail(i, "must be C-contiguous, got a strided view")
            if p.written and readonly:
                raise self._fail(i, "is written by the kernel but the array is read-only")
            nbytes = int(np.prod(arr.shape, dtype=np.int64)) * p.dtype.itemsize
            spans.append((space, ptr, nbytes))
        for i in self._written_idx:
            space, lo, size = spans[i]
            for j, (other_space, other, other_size) in enumerate(spans):
                if j != i and other_space == space and other < lo + size and lo < other + \
                        other_size:
                    raise self._fail(
                        i, f"is written by the kernel and overlaps argument {j} in memory"
                    )
        return values

    # plans and runs -----------------------------------------------------------------

    def _plan(self, values: Mapping[Var, int]) -> LaunchPlan:
        launches = []
        for k, args in self._slots:
            grid, block = evaluate_launch(k.launch, values, kernel=k.name)
            scalars = tuple((values[v], v.dtype) for v in k.shape_vars)
            launches.append(Launch(k.name, grid, block, args, scalars))
        intermediates = tuple(
            (tuple(_evaluate(d, values, f"intermediate {b.name!r}: dimension")
                   for d in b.shape), b.dtype)
            for b in self.device_function.intermediates
        )
        params = tuple(
            (tuple(_evaluate(d, values, f"parameter {p.name!r}: dimension") for d in p.shape),
             p.dtype.name)
            for p in self._params
        )
        return LaunchPlan(self._owner.source, params, intermediates, tuple(launches))

    def launch_plan(self, *arrays: Any) -> LaunchPlan:
        """The launches these arrays would get (checked like a call; no GPU needed).
        A function without shape variables may be given no arrays.

        ``plan.launches[0].grid`` is the first kernel's grid for these shapes."""
        if not arrays and not self._shape_vars:
            return self._plan({})
        return self._plan(self._check(arrays))

    def _device_run(self, arrays: tuple) -> tuple[Callable[[], int], list, Any]:
        plan = self._plan(self._check(arrays))  # every check before the GPU
        cp = self._owner._cupy()
        # numpy: copied to the GPU; cupy: as it is; other CUDA Array Interface: wrapped
        device = [cp.asarray(a) for a in arrays]
        run = bind_plan(cp, self._owner._module(cp), plan, device)
        return run, device, cp

    def __call__(self, *arrays: Any) -> None:
        """Run on ``arrays`` (one per parameter). numpy outputs get the results."""
        run, device, _ = self._device_run(arrays)
        run()
        for i in self._written_idx:
            if isinstance(arrays[i], np.ndarray):
                device[i].get(out=arrays[i])  # synchronizes

    def prepare(self, *arrays: Any) -> Callable[[], int]:
        """Check ``arrays``, copy numpy ones to the GPU once, and return a callable
        with no arguments that launches the kernels on the device copies (no checks,
        no transfers: what ``wb.measure`` times, with CUDA events). numpy outputs are
        not updated by it."""
        run, device, _ = self._device_run(arrays)
        run.arrays = (arrays, device)  # type: ignore[attr-defined]
        flops = self.flops
        if flops is None and self._shape_vars:
            values = self._shape_values(arrays)
            flops = flop_count(self.func, shapes={v.name: n for v, n in values.items()})
        run.flops = flops  # type: ignore[attr-defined]
        return run

    def __repr__(self) -> str:
        return f"CudaKernelFunction({self.name!r}, params={self.param_names})"


class CudaKernel(Kernel):
    """A module built for a GPU: its CUDA ``source``, its ``device_module`` (kernels and
    launch configurations), the ``target``, and one :class:`CudaKernelFunction` per
    function (``kernel(*arrays)``, ``kernel["name"](*arrays)``, as the CPU
    :class:`~workbench.runtime.cpu.Kernel`).

    Nothing touches the GPU until a function runs: the source is compiled with cupy
    on first use, so a CUDA kernel can be built and read on a machine without one.
    """

    def __init__(
        self,
        source: str,
        device_module: DeviceModule,
        target: Target | str | Mapping = "cuda",
        mod: IRModule | None = None,
    ) -> None:
        self.target = Target.from_any(target)
        if self.target.kind != "cuda":
            raise ValueError(f"CudaKernel needs a cuda target, got {self.target}")
        self.source = source
        self.source_hash = hashlib.sha256(source.encode()).hexdigest()[:16]
        self.device_module = device_module
        self.lowered = IRModule.from_funcs(*(f.func for f in device_module.functions))
        self.mod = self.lowered if mod is None else mod
        self._compiled: Any = None
        self._compile_lock = threading.Lock()
        self._functions: dict[str, KernelFunction] = {
            f.name: CudaKernelFunction(f, self) for f in device_module.functions
        }
        default = self._default_name()
        self.flops = self._functions[default].flops if default else None

    def _cupy(self) -> Any:
        return require_device("the cuda runtime")

    def _module(self, cp: Any) -> Any:
        """The ``cupy.RawModule`` of the source, made once."""
        with self._compile_lock:
            if self._compiled is None:
                self._compiled = cp.RawModule(code=self.source, options=CUDA_OPTIONS,
                                              name_expressions=None)
            return self._compiled

    def ptx(self, arch: str | None = None) -> str:
        """The source compiled by ``nvcc -ptx`` for ``arch`` (the target's by default);
        needs nvcc, not a GPU."""
        from ..codegen.nvcc import compile_cuda

        return compile_cuda(self.source, arch or self.target.arch, "ptx")  # type: ignore

    def __repr__(self) -> str:
        return (
            f"CudaKernel(target='{self.target}', functions={self.function_names}, "
            f"source_hash={self.source_hash!r})"
        )


# -- the isolated worker's side --------------------------------------------------------


def handle_cuda_request(request: dict, announce: Callable[[], None] | None = None) -> dict:
    """Measure the CUDA launch plan of a worker request (``request["cuda"]``: a
    :meth:`LaunchPlan.to_json`) on random arrays, with CUDA events; return the reply
    (``status`` ``ok``, ``build_error`` when NVRTC rejects the source, ``run_error``
    without cupy or a GPU, or when a launch fails)."""
    from .timing import measure
    from .worker import RequestError, _field, random_array

    try:
        plan = LaunchPlan.from_json(request.get("cuda"))
        number = _field(request, "number", (int,), optional=True)
        repeat = _field(request, "repeat", (int,))
        min_repeat_ms = _field(request, "min_repeat_ms", (int, float))
        warmup = _field(request, "warmup", (int,))
        flush_cache = _field(request, "flush_cache", (bool,))
        rng = np.random.default_rng(_field(request, "seed", (int,)))
        arrays = [random_array(list(shape), dtype, rng) for shape, dtype in plan.params]
    except (RequestError, TypeError, ValueError) as err:
        return {"status": "run_error", "error": f"bad measurement request: {err}"}
    try:
        cp = require_device("the measurement worker")
    except GpuUnavailableError as err:
        return {"status": "run_error", "error": str(err)}
    try:
        device = [cp.asarray(a) for a in arrays]
        module = cp.RawModule(code=plan.source, options=plan.options)
        run = bind_plan(cp, module, plan, device)
    except Exception as err:
        err = _compile_error(err, plan.source, plan.options)
        status = "build_error" if type(err).__name__ == "CudaCompileError" else "run_error"
        return {"status": status, "error": f"{type(err).__name__}: {err}"}
    if announce is not None:
        announce()
    try:
        run()
        cp.cuda.Device().synchronize()  # a faulting kernel reports here
        m = measure(run, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                    warmup=max(warmup - 1, 0), flush_cache=flush_cache)
    except (TypeError, ValueError) as err:
        return {"status": "run_error", "error": f"bad measurement request: {err}"}
    except Exception as err:  # CUDA errors (illegal address, launch failure...)
        return {"status": "run_error", "error": f"{type(err).__name__}: {err}"}
    return {"status": "ok", "samples": list(m.samples), "number": m.number, "repeat": m.repeat}
