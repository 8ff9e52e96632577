"""Check a scheduled function against a reference on random inputs: :func:`verify`.

The reference runs in the numpy evaluator (:mod:`workbench.runtime.reference`); when that
cannot evaluate it (the reference is itself scheduled) it is built with the C backend. The
scheduled function is always built with C. Both get copies of the same random arguments;
every parameter that either function writes is compared.

Tolerances (``|got - expected| <= atol + rtol * |expected|``) by dtype, with ``K`` the
longest reduction (product of reduce iter var extents of a block) and ``scale`` the root
mean square of the expected values (at least 1):

========  ==========  ===============================
dtype     rtol        atol
========  ==========  ===============================
float16   1e-2        1e-3 * sqrt(K) * scale
float32   1e-4        1e-5 * sqrt(K) * scale
float64   1e-10       1e-12 * sqrt(K) * scale
integers  exact       exact
========  ==========  ===============================

The ``sqrt(K) * scale`` term absorbs rounding of long float sums (the reference accumulates
in float64, C kernels in the buffer's type); genuine mistakes (a wrong index, a missing
``init``) are far larger. NaNs compare equal to NaNs.

Symbolic shapes: each shape variable takes the value ``shapes[name]`` (default
:data:`DEFAULT_SHAPE_VALUE`, which divides no usual tile size, so tails and predicates
run). The reference is specialized to those sizes; the scheduled function is built
with its shapes symbolic and called on the arrays (so the C kernel reads the sizes
from them, as it would for any caller).

>>> import workbench as wb
>>> A = wb.placeholder((64, 64), "float32", name="A")
>>> B = wb.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
>>> verify(wb.create_prim_func([A, B], name="twice"), wb.create_prim_func([A, B])).ok
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..codegen.c import as_ir_module
from ..ir.analysis import iter_blocks
from ..ir.stmt import IRModule, PrimFunc
from .cpu import build, written_params

__all__ = ["BufferCheck", "VerificationError", "VerifyResult", "default_tolerance", "verify"]

_FLOAT_TOL = {"float16": (1e-2, 1e-3), "float32": (1e-4, 1e-5), "float64": (1e-10, 1e-12)}

#: The size a shape variable gets in :func:`verify` unless ``shapes`` says otherwise.
DEFAULT_SHAPE_VALUE = 37


class VerificationError(AssertionError):
    """A scheduled function computed something different from its reference.

    Attributes: ``buffer`` (parameter name), ``mismatches`` (count), ``total``,
    ``max_abs_error``, ``max_rel_error``, ``first_index``, ``got``, ``expected``.
    """

    def __init__(self, message: str, *, buffer: str, mismatches: int, total: int,
                 max_abs_error: float, max_rel_error: float, first_index: tuple[int, ...],
                 got: object, expected: object) -> None:
        super().__init__(message)
        self.buffer = buffer
        self.mismatches = mismatches
        self.total = total
        self.max_abs_error = max_abs_error
        self.max_rel_error = max_rel_error
        self.first_index = first_index
        self.got = got
        self.expected = expected


@dataclass(frozen=True)
class BufferCheck:
    """How one output buffer compared: max errors and the tolerances used."""

    name: str
    dtype: str
    max_abs_error: float
    max_rel_error: float
    rtol: float
    atol: float

    def __repr__(self) -> str:
        return (
            f"{self.name}: max_abs={self.max_abs_error:.3g} max_rel={self.max_rel_error:.3g} "
            f"(rtol={self.rtol:.3g}, atol={self.atol:.3g})"
        )


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of a successful :func:`verify` (a failure raises instead)."""

    func_name: str
    seed: int
    buffers: tuple[BufferCheck, ...]
    reference_backend: str  # "numpy" or "c"
    shapes: tuple[tuple[str, int], ...] = ()  # the shape variables' values, if any

    @property
    def ok(self) -> bool:
        return True

    @property
    def max_abs_error(self) -> float:
        return max((b.max_abs_error for b in self.buffers), default=0.0)

    @property
    def max_rel_error(self) -> float:
        return max((b.max_rel_error for b in self.buffers), default=0.0)

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        """One line for a notebook cell: what was checked and how close it came.

        >>> check = BufferCheck("C", "float32", 1.72e-05, 4.4e-04, 1e-04, 9e-04)
        >>> VerifyResult("mm_relu", 0, (check,), "numpy")
        verified mm_relu: output C matches the reference on random inputs (max abs error 1.7e-05)
        >>> VerifyResult("f", 0, (check, check), "c", (("n", 37),))  # doctest: +ELLIPSIS
        verified f: 2 outputs (C, C) match the reference on ... (n=37; max abs error 1.7e-05)
        """
        names = ", ".join(b.name for b in self.buffers)
        sizes = ", ".join(f"{n}={v}" for n, v in self.shapes)
        sizes = f"{sizes}; " if sizes else ""
        if not self.buffers:
            return f"verified {self.func_name}: it writes no outputs, nothing to compare"
        if len(self.buffers) == 1:
            what = f"output {names} matches"
        else:
            what = f"{len(self.buffers)} outputs ({names}) match"
        return (f"verified {self.func_name}: {what} the reference on random inputs "
                f"({sizes}max abs error {self.max_abs_error:.2g})")

    def details(self) -> str:
        """Every output's errors and the tolerances used, the seed and the reference's
        backend (what ``repr`` leaves out)."""
        checks = "; ".join(repr(b) for b in self.buffers) or "no outputs"
        shapes = "".join(f", {n}={v}" for n, v in self.shapes)
        return (f"{self.func_name}: seed={self.seed}{shapes}, "
                f"reference={self.reference_backend}, {checks}")


def _pick(x: object, func_name: str | None, role: str) -> PrimFunc:
    mod = as_ir_module(x)
    if func_name is not None:
        if func_name in mod:
            return mod[func_name]
        if len(mod) != 1:
            raise KeyError(f"verify: the {role} module has no function {func_name!r}; "
                           f"it has {mod.names}")
        return mod.functions[0][1]
    if len(mod) == 1:
        return mod.functions[0][1]
    if "main" in mod:
        return mod["main"]
    raise ValueError(f"verify: the {role} module has functions {mod.names}; pass func_name=")


def _reduction_length(*funcs: PrimFunc) -> int:
    k = 1
    for f in funcs:
        for b in iter_blocks(f.body):
            n = math.prod(iv.extent for iv in b.iter_vars if iv.kind == "R")
            k = max(k, n)
    return k


def default_tolerance(dtype: str, expected: np.ndarray, reduction: int = 1) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing ``expected`` of ``dtype`` (see the module table).

    >>> import numpy as np
    >>> default_tolerance("int32", np.zeros(3, "int32"))
    (0.0, 0.0)
    >>> default_tolerance("float32", np.ones(4, "float32"), reduction=100)
    (0.0001, 0.0001)
    """
    if dtype not in _FLOAT_TOL:
        return 0.0, 0.0
    rtol, base = _FLOAT_TOL[dtype]
    finite = expected[np.isfinite(expected)].astype(np.float64)
    rms = float(np.sqrt(np.mean(finite * finite))) if finite.size else 0.0
    return rtol, base * math.sqrt(reduction) * max(1.0, rms)


def _compare(name: str, dtype: str, got: np.ndarray, expected: np.ndarray, rtol: float,
             atol: float, func_name: str) -> BufferCheck:
    if dtype in _FLOAT_TOL:
        g, e = got.astype(np.float64), expected.astype(np.float64)
        with np.errstate(all="ignore"):
            diff = np.abs(g - e)
            close = (diff <= atol + rtol * np.abs(e)) | (np.isnan(g) & np.isnan(e)) | (g == e)
            diff = np.where(np.isfinite(diff), diff, 0.0)
            rel = np.where(np.abs(e) > 0, diff / np.abs(e), 0.0)
    else:
        g, e = got.astype(np.int64), expected.astype(np.int64)
        diff = np.abs(g - e).astype(np.float64)
        close = g == e
        rel = np.where(e != 0, diff / np.maximum(np.abs(e), 1), 0.0)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    bad = ~close
    count = int(bad.sum())
    if count:
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
        got_v, exp_v = got[first].item(), expected[first].item()
        got_w, exp_w = got[worst].item(), expected[worst].item()
        raise VerificationError(
            f"verify: function {func_name!r}: buffer {name!r} differs from the reference in "
            f"{count} of {got.size} elements (rtol={rtol:.3g}, atol={atol:.3g}); "
            f"max abs error {max_abs:.6g} at index {list(worst)} (got {got_w!r}, expected "
            f"{exp_w!r}), max rel error {max_rel:.6g}; first mismatch at index "
            f"{list(first)}: got {got_v!r}, expected {exp_v!r}",
            buffer=name, mismatches=count, total=int(got.size), max_abs_error=max_abs,
            max_rel_error=max_rel, first_index=first, got=got_v, expected=exp_v,
        )
    return BufferCheck(name, dtype, max_abs, max_rel, rtol, atol)


def verify(scheduled: PrimFunc | IRModule, reference: PrimFunc | IRModule, *,
           rtol: float | None = None, atol: float | None = None, seed: int = 0,
           func_name: str | None = None, shapes: dict[str, int] | None = None,
           target: str | object = "c", emulate: bool = False, check_races: bool = False,
           ) -> VerifyResult:
    """Run ``scheduled`` (built with C) and ``reference`` on the same random inputs and
    compare every written parameter; raise :class:`VerificationError` on a mismatch.

    ``target="cuda"`` builds the scheduled function for a GPU: on the GPU through cupy,
    or with ``emulate=True`` in the emulator (GPU semantics on the CPU: barriers
    respected, shared memory per thread block), where ``check_races=True`` also raises
    :class:`~workbench.RaceError` on a data race. The reference always runs on the CPU.

    Both may be PrimFuncs, IRModules or Schedules; ``func_name`` picks the function of
    a module (default: its only function, else ``"main"``). ``rtol``/``atol`` override
    the dtype defaults (module docstring) for every buffer. ``shapes`` gives values to
    shape variables by name (``{"n": 100}``) for functions with symbolic shapes.

    >>> import workbench as wb
    >>> from workbench.ir import Block, BufferStore, For, IterVar, PrimFunc, Var
    >>> A = wb.placeholder((8,), "float32", name="A")
    >>> B = wb.compute((8,), lambda i: A[i], name="B")
    >>> ref = wb.create_prim_func([A, B], name="copy")
    >>> i, vi = Var("i"), Var("vi")
    >>> a, b = ref.params
    >>> wrong = PrimFunc("copy", (a, b), Block("root", (), (), For(i, 8, "serial", Block(
    ...     "B", (IterVar(vi, 8),), (i,), BufferStore(b, a[vi] + 1.0, (vi,))))))
    >>> try:
    ...     verify(wrong, ref)
    ... except VerificationError as err:
    ...     print(err.buffer, err.mismatches)
    B 8
    """
    from . import reference as ref_eval

    sched = _pick(scheduled, func_name, "scheduled")
    ref = _pick(reference, func_name or sched.name, "reference")
    values = _shape_values(sched, ref, shapes)
    built_sched = sched
    if values:
        sched = sched.specialize({v.name: values[v.name] for v in sched.shape_vars})
        ref = ref.specialize({v.name: values[v.name] for v in ref.shape_vars})
    sp, rp = sched.params, ref.params
    if len(sp) != len(rp):
        raise ValueError(
            f"verify: {sched.name!r} has {len(sp)} parameters but the reference "
            f"{ref.name!r} has {len(rp)}"
        )
    for a, b in zip(sp, rp):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ValueError(
                f"verify: parameter {a.name!r} is {a.shape} {a.dtype} in {sched.name!r} but "
                f"{b.name!r} is {b.shape} {b.dtype} in the reference"
            )
    args = ref_eval.random_args(ref, seed=seed)
    expected = [a.copy() for a in args]
    backend = "numpy"
    try:
        ref_eval.evaluate(ref, *expected)
    except NotImplementedError:
        backend = "c"
        expected = [a.copy() for a in args]
        build(ref)[ref.name](*expected)
    got = [a.copy() for a in args]
    if target == "c" and not (emulate or check_races):
        build(built_sched)[sched.name](*got)
    else:
        build(built_sched, target, emulate=emulate, check_races=check_races)[sched.name](*got)

    written = [x or y for x, y in zip(written_params(sched), written_params(ref))]
    k = _reduction_length(sched, ref)
    checks = []
    for i, p in enumerate(sp):
        if not written[i]:
            continue
        r, a = default_tolerance(p.dtype, expected[i], k)
        r = r if rtol is None else rtol
        a = a if atol is None else atol
        checks.append(_compare(p.name, p.dtype, got[i], expected[i], r, a, sched.name))
    return VerifyResult(sched.name, seed, tuple(checks), backend, tuple(sorted(values.items())))


def _shape_values(sched: PrimFunc, ref: PrimFunc, shapes: dict[str, int] | None
                  ) -> dict[str, int]:
    """The value of every shape variable (by name) of either function."""
    names = {v.name for v in sched.shape_vars} | {v.name for v in ref.shape_vars}
    unknown = sorted(set(shapes or {}) - names)
    if unknown:
        raise ValueError(
            f"verify: shapes names {unknown}, which are no shape variables of "
            f"{sched.name!r} (it has {sorted(names) or 'none'})"
        )
    return {n: int((shapes or {}).get(n, DEFAULT_SHAPE_VALUE)) for n in sorted(names)}
