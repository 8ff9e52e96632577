"""Build IR to native code and call it on numpy arrays: :func:`build` and :class:`Kernel`.

>>> import numpy as np
>>> import workbench as wb
>>> A = wb.placeholder((4,), "float32", name="A")
>>> B = wb.compute((4,), lambda i: A[i] + 1.0, name="B")
>>> kernel = build(wb.create_prim_func([A, B], name="add_one"))
>>> a, b = np.arange(4, dtype="float32"), np.zeros(4, dtype="float32")
>>> kernel(a, b)
>>> b.tolist()
[1.0, 2.0, 3.0, 4.0]
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..codegen.c import as_ir_module, generate_c_source
from ..ir.expr import Var
from ..ir.functor import iter_stmts
from ..ir.stmt import BufferStore, IRModule, PrimFunc
from ..ir.transform import lower
from .compiler import DEFAULT_FLAGS, compile_shared, load_library
from .flops import flop_count
from .threads import get_num_threads, omp_setter

__all__ = [
    "SUPPORTED_TARGETS",
    "Kernel",
    "KernelArgumentError",
    "KernelFunction",
    "build",
    "status_error",
]

SUPPORTED_TARGETS = ("c", "cuda")


class KernelArgumentError(TypeError, ValueError):
    """Arrays passed to a kernel do not match its parameters (count, type, shape, dtype,
    layout or writeability). Raised before the kernel runs, so nothing is modified."""


@dataclass(frozen=True)
class _Param:
    name: str
    shape: tuple  # ints, or expressions of shape variables (symbolic)
    dtype: np.dtype
    written: bool


_SCALAR_CTYPES = {"int32": ctypes.c_int32, "int64": ctypes.c_int64}


def status_error(name: str, status: int, lib: ctypes.CDLL | None = None) -> Exception:
    """The exception for a nonzero status returned by the C function of kernel ``name``:
    ``ZeroDivisionError`` naming the block for an integer division by zero (the site is
    read from ``lib``, the loaded shared object), else ``MemoryError`` (an allocation
    failed: the only other status the generated code returns).

    >>> status_error("main", -1)
    MemoryError("kernel 'main' could not allocate its intermediate buffers (status -1)")
    """
    from ..codegen.cstyle import STATUS_DIVISION_BY_ZERO

    if status == STATUS_DIVISION_BY_ZERO:
        site = None
        try:
            reader = lib.wb_error_message if lib is not None else None
        except AttributeError:
            reader = None
        if reader is not None:
            reader.argtypes = []
            reader.restype = ctypes.c_char_p
            site = reader()
        if site:
            return ZeroDivisionError(site.decode(errors="replace"))
        return ZeroDivisionError(f"kernel {name!r}: integer division by zero")
    return MemoryError(
        f"kernel {name!r} could not allocate its intermediate buffers (status {status})"
    )


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def written_params(func: PrimFunc) -> list[bool]:
    """For each parameter of ``func``: does the function store to it?

    >>> import workbench as wb
    >>> A = wb.placeholder((4,), "float32", name="A")
    >>> B = wb.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> written_params(wb.create_prim_func([A, B]))
    [False, True]
    """
    stored = {s.buffer for s in iter_stmts(func.body) if isinstance(s, BufferStore)}
    return [p in stored for p in func.params]


class KernelFunction:
    """One compiled function: call it with numpy arrays (inputs and outputs, in place).

    Every call checks the arrays against the parameters (count, ``np.ndarray``, exact
    shape and dtype, C-contiguous, outputs writeable, outputs not overlapping another
    argument) and raises :class:`KernelArgumentError` naming the parameter otherwise.

    A function with symbolic shapes (``A`` of shape ``(n, 128)``) reads each shape
    variable from the first array whose dimension is that bare variable, checks that
    every other array agrees (``kernel(a, b)`` with ``a`` of shape ``(37, 128)`` needs
    ``b`` of shape ``(37, 128)`` too) and passes the values to the C function after the
    arrays. Its ``flops`` is None (it depends on the shapes); :meth:`prepare` counts
    them for the arrays it gets.
    """

    def __init__(self, func: PrimFunc, cfunc: Callable[..., int], flops: int | None,
                 lib: ctypes.CDLL | None = None) -> None:
        self.name = func.name
        self._lib = lib  # where the site of a failure is read (see status_error)
        self.func = func
        self.flops = flops
        self._before_call: Callable[[], None] | None = None  # set-up before each call
        # the OpenMP runtime's thread setter (wb.set_num_threads), None without OpenMP
        self._omp_setter: Callable[[int], None] | None = (
            None if lib is None else omp_setter(lib))
        self._after_call: Callable[[], None] | None = None  # a check after each call
        written = written_params(func)
        self._params = tuple(
            _Param(p.name, p.shape, np.dtype(p.dtype), w)
            for p, w in zip(func.params, written)
        )
        self._written_idx = tuple(i for i, w in enumerate(written) if w)
        self._cfunc = cfunc
        self._shape_vars = tuple(func.shape_vars)
        self._binders: dict = {}  # shape var -> (param index, dim) that gives its value
        for i, p in enumerate(func.params):
            for d, dim in enumerate(p.shape):
                if isinstance(dim, Var) and dim not in self._binders:
                    self._binders[dim] = (i, d)
        unbound = [v.name for v in self._shape_vars if v not in self._binders]
        if unbound:
            raise ValueError(
                f"kernel {self.name!r}: shape variables {unbound} are no dimension of a "
                "parameter on their own, so their values cannot be read from the arrays"
            )

    @property
    def param_names(self) -> list[str]:
        return [p.name for p in self._params]

    def _fail(self, i: int, what: str) -> KernelArgumentError:
        p = self._params[i]
        return KernelArgumentError(
            f"kernel {self.name!r}: argument {i} (parameter {p.name!r}) {what}"
        )

    def _check(self, arrays: tuple) -> list[int]:
        params = self._params
        if len(arrays) != len(params):
            names = ", ".join(p.name for p in params)
            raise KernelArgumentError(
                f"kernel {self.name!r} takes {len(params)} arrays ({names}), got {len(arrays)}"
            )
        values = self._shape_values(arrays) if self._shape_vars else {}
        ptrs = []
        for i, (arr, p) in enumerate(zip(arrays, params)):
            if not isinstance(arr, np.ndarray):
                raise self._fail(i, f"must be a numpy.ndarray, got {type(arr).__name__}")
            if values:
                self._check_shape(i, arr, values)
            elif arr.shape != p.shape:
                raise self._fail(i, f"must have shape {p.shape}, got {arr.shape}")
            if arr.dtype != p.dtype:
                raise self._fail(i, f"must have dtype {p.dtype}, got {arr.dtype}")
            flags = arr.flags
            if not flags.c_contiguous:
                raise self._fail(
                    i, "must be C-contiguous (use np.ascontiguousarray), got a strided view"
                )
            if p.written and not flags.writeable:
                raise self._fail(i, "is written by the kernel but the array is read-only")
            ptrs.append(arr.ctypes.data)
        for i in self._written_idx:
            lo, hi = ptrs[i], ptrs[i] + arrays[i].nbytes
            for j, other in enumerate(arrays):
                if j != i and ptrs[j] < hi and lo < ptrs[j] + other.nbytes:
                    raise self._fail(
                        i, f"is written by the kernel and overlaps argument {j} in memory"
                    )
        return ptrs + [values[v] for v in self._shape_vars]

    def _shape_values(self, arrays: tuple) -> dict:
        """Each shape variable's value, from the array that binds it."""
        values = {}
        for v in self._shape_vars:
            i, d = self._binders[v]
            arr = arrays[i]
            if not isinstance(arr, np.ndarray):
                raise self._fail(i, f"must be a numpy.ndarray, got {type(arr).__name__}")
            if arr.ndim != len(self._params[i].shape):
                shape = _shape_text(self._params[i].shape)
                raise self._fail(i, f"must have shape {shape}, got {arr.shape}")
            values[v] = int(arr.shape[d])
            if values[v] < 1:
                raise self._fail(i, f"gives shape variable {v.name!r} the value {values[v]}")
            if v.dtype == "int32" and values[v] > 2**31 - 1:
                raise self._fail(i, f"gives int32 shape variable {v.name!r} {values[v]}")
        return values

    def _check_shape(self, i: int, arr: np.ndarray, values: dict) -> None:
        from ..ir.expr import IntImm
        from ..ir.functor import substitute
        from ..ir.simplify import simplify

        p = self._params[i]
        consts = {v: IntImm(n, v.dtype) for v, n in values.items()}
        want = []
        for dim in p.shape:
            if isinstance(dim, int):
                want.append(dim)
            else:
                got = simplify(substitute(dim, consts))
                want.append(got.value if isinstance(got, IntImm) else None)
        if arr.shape != tuple(want):
            bound = ", ".join(f"{v.name} = {n}" for v, n in values.items())
            raise self._fail(
                i,
                f"must have shape {_shape_text(p.shape)} = {tuple(want)} (with {bound}), "
                f"got {arr.shape}",
            )

    def __call__(self, *arrays: np.ndarray) -> None:
        """Run the function on ``arrays`` (one per parameter, in order)."""
        checked = self._check(arrays)
        if self._omp_setter is not None:  # the thread setting (wb.set_num_threads)
            self._omp_setter(get_num_threads())
        if self._before_call is not None:
            self._before_call()
        status = self._cfunc(*checked)
        if status != 0:
            raise status_error(self.name, status, self._lib)
        if self._after_call is not None:
            self._after_call()

    def prepare(self, *arrays: np.ndarray) -> Callable[[], int]:
        """Check ``arrays`` once and return a callable with no arguments that runs the
        C function on them with no per-call checks (what :func:`workbench.measure`
        times, as TVM's ``time_evaluator`` times the function without Python's argument
        handling). It returns the C status (0 = ok); it keeps the arrays alive.

        >>> import numpy as np, workbench as wb
        >>> k = wb.build(wb.workloads.matmul(4, 4, 4))
        >>> a, b, c = (np.ones((4, 4), "float32") for _ in range(3))
        >>> run = k.prepare(a, b, c)
        >>> run(), float(c[0, 0])
        (0, 4.0)
        """
        import functools

        run = functools.partial(self._cfunc, *self._check(arrays))
        run.arrays = arrays  # type: ignore[attr-defined]  # the pointers stay valid
        flops = self.flops
        if flops is None and self._shape_vars:  # symbolic: count at these shapes
            values = self._shape_values(arrays)
            flops = flop_count(self.func, shapes={v.name: n for v, n in values.items()})
        run.flops = flops  # type: ignore[attr-defined]
        # wb.measure sets the thread count it measures with (wb.set_num_threads)
        run.set_num_threads = self._set_threads  # type: ignore[attr-defined]
        self._set_threads(get_num_threads())
        return run

    def _set_threads(self, threads: int) -> None:
        """Run this function's OpenMP parallel loops with ``threads`` threads (when
        called from this thread; a function without OpenMP ignores it)."""
        if self._omp_setter is not None:
            self._omp_setter(threads)

    def __repr__(self) -> str:
        return f"KernelFunction({self.name!r}, params={self.param_names})"


class Kernel:
    """A built module: its C ``source``, the IR ``mod`` and one callable per function.

    ``mod`` is the IR as given to :func:`build`; ``lowered`` is the IR the C was printed
    from (``wb.lower(mod)``: intermediate buffers compacted to their tiles).

    ``kernel(*arrays)`` runs the module's only function (or ``"main"`` when it has
    several); ``kernel["name"](*arrays)`` runs any function. ``flops`` is the flop count
    of the default function (None when there is no default).

    >>> import numpy as np
    >>> import workbench as wb
    >>> A = wb.placeholder((3,), "int32", name="A")
    >>> B = wb.compute((3,), lambda i: A[i] * 2, name="B")
    >>> k = build(wb.create_prim_func([A, B], name="twice"))
    >>> k.function_names, k.flops
    (['twice'], 0)
    """

    def __init__(self, mod: IRModule, source: str, lib: ctypes.CDLL, symbols: dict[str, str],
                 lowered: IRModule | None = None):
        self.mod = mod
        # the IR the C was generated from (wb.lower(mod)); ``mod`` stays the scheduled IR
        self.lowered = mod if lowered is None else lowered
        self.source = source
        self.source_hash = hashlib.sha256(source.encode()).hexdigest()[:16]
        self.target = "c"
        self._lib = lib  # keeps the shared object loaded
        self._functions: dict[str, KernelFunction] = {}
        for name, func in mod.functions:
            cfunc = getattr(lib, symbols[name])
            scalars = [_SCALAR_CTYPES.get(v.dtype, ctypes.c_int64) for v in func.shape_vars]
            cfunc.argtypes = [ctypes.c_void_p] * len(func.params) + scalars
            cfunc.restype = ctypes.c_int32
            flops = None if func.shape_vars else flop_count(func)
            self._functions[name] = KernelFunction(func, cfunc, flops, lib)
        default = self._default_name()
        self.flops: int | None = self._functions[default].flops if default else None

    @property
    def library(self) -> ctypes.CDLL:
        """The loaded shared object (what reads results a kernel left in it, such as
        the GPU emulator's instrumentation runtime, call)."""
        return self._lib

    @property
    def function_names(self) -> list[str]:
        return list(self._functions)

    def _default_name(self) -> str | None:
        if len(self._functions) == 1:
            return next(iter(self._functions))
        return "main" if "main" in self._functions else None

    def __getitem__(self, name: str) -> KernelFunction:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(
                f"kernel has no function {name!r}; it has {self.function_names}"
            ) from None

    def prepare(self, *arrays: np.ndarray) -> Callable[[], int]:
        """:meth:`KernelFunction.prepare` of the default function."""
        return self._default("prepare").prepare(*arrays)

    def _default(self, what: str) -> KernelFunction:
        default = self._default_name()
        if default is None:
            raise KernelArgumentError(
                f"kernel has several functions {self.function_names} and none is named "
                f"'main'; use kernel[\"name\"] to {what} one"
            )
        return self._functions[default]

    def __call__(self, *arrays: np.ndarray) -> None:
        default = self._default_name()
        if default is None:
            raise KernelArgumentError(
                f"kernel has several functions {self.function_names} and none is named "
                "'main'; call one with kernel[\"name\"](...)"
            )
        self._functions[default](*arrays)

    def __repr__(self) -> str:
        return (
            f"Kernel(target={self.target!r}, functions={self.function_names}, "
            f"source_hash={self.source_hash!r})"
        )

    def _repr_pretty_(self, p, cycle: bool) -> None:  # IPython display
        p.text(repr(self))


def build(mod_or_func: IRModule | PrimFunc, target: str | object = "c", *,
          emulate: bool = False, check_races: bool = False) -> Kernel:
    """Lower a PrimFunc/IRModule (or a Schedule's ``mod``) with :func:`workbench.lower`,
    generate C for it, compile it (cached on disk by source: building the same IR twice
    runs the compiler once) and load it.

    ``target="cuda"`` (or ``wb.Target("cuda", arch="sm_90")``, or TVM's dict form)
    builds a GPU schedule: CUDA loaded through cupy (a GPU is needed), or with
    ``emulate=True`` the same kernels run on the CPU with the GPU's semantics (blocks in
    parallel, threads split at every barrier); ``check_races=True`` (emulated only)
    raises :class:`~workbench.RaceError` on a data race. See
    :mod:`workbench.runtime.gpu`.

    >>> import workbench as wb
    >>> A = wb.placeholder((8,), "float64", name="A")
    >>> B = wb.compute((8,), lambda i: wb.exp(A[i]), name="B")
    >>> build(wb.create_prim_func([A, B], name="expo")).function_names
    ['expo']
    """
    if not isinstance(target, str) or target.split()[0] == "cuda":
        from ..target import Target

        tgt = Target.from_any(target)
        if tgt.kind == "cuda":
            from .gpu import build_gpu

            return build_gpu(mod_or_func, tgt, emulate=emulate, check_races=check_races)
        target = tgt.kind
    if emulate or check_races:
        raise ValueError("build: emulate= and check_races= apply to target='cuda' only")
    if target not in SUPPORTED_TARGETS:
        raise ValueError(
            f"unknown target {target!r}; supported targets: "
            + ", ".join(repr(t) for t in SUPPORTED_TARGETS)
        )
    mod = as_ir_module(mod_or_func)
    lowered = lower(mod)  # compact buffer allocation, as TVM lowers before codegen
    generated = generate_c_source(lowered)
    path = compile_shared(generated.text, flags=DEFAULT_FLAGS)
    return Kernel(mod, generated.text, load_library(path), generated.symbols, lowered)
