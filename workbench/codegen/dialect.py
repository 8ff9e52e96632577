"""Dialects of the C-like printer: everything target-specific, as data plus named hooks.

The printer in :mod:`workbench.codegen.cstyle` never asks "is this CUDA?"; it reads the
:class:`Dialect` record (type names, math function templates, pragmas) and calls its hooks
for the few things whose *shape* differs between targets:

* ``kernel_signature`` -- the line that opens a function,
* ``allocate`` -- how a buffer allocated by a block is declared (stack array, heap, shared),
* ``thread_loop`` -- what a loop bound to a GPU thread axis becomes.

A new target is a new ``Dialect`` value (``dataclasses.replace(C_DIALECT, ...)`` works).

>>> from workbench.codegen.dialect import C_DIALECT
>>> C_DIALECT.type_name("float32"), C_DIALECT.math("exp", "float64", "x")
('float', 'exp(x)')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "Allocation",
    "AllocRequest",
    "C_DIALECT",
    "Dialect",
    "LoopCode",
]


@dataclass(frozen=True)
class AllocRequest:
    """What the printer knows about a buffer it must declare.

    ``n_elems`` includes storage_align padding; ``at_root`` is True for allocations of
    the function's root block (they live for the whole call). A buffer with a symbolic
    shape has ``n_elems == nbytes == 0`` and ``nbytes_expr``, the C expression of its
    size in bytes (known only when the block runs).
    """

    name: str  # C identifier
    ctype: str
    scope: str
    n_elems: int
    nbytes: int
    at_root: bool
    nbytes_expr: str | None = None


@dataclass(frozen=True)
class Allocation:
    """How to declare one buffer.

    ``decl`` lines come first; if ``null_check`` is set (a C condition that is true when
    the allocation failed) the printer guards the rest of the scope with it; ``free``
    lines run when the scope ends.
    """

    decl: tuple[str, ...]
    null_check: str | None = None
    free: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoopCode:
    """Lines of a loop: ``open`` at the loop's depth, ``prologue`` first in the body,
    ``close`` after the body (at the loop's depth)."""

    open: tuple[str, ...]
    prologue: tuple[str, ...] = ()
    close: tuple[str, ...] = ("}",)


def _freeze(m: Mapping) -> Mapping:
    return MappingProxyType(dict(m))


@dataclass(frozen=True)
class Dialect:
    """A C-like target language.

    Attributes:
        name: target name (``"c"``).
        type_names: IR dtype -> C type.
        function_qualifier: prefix of every kernel definition (``""`` for C).
        helper_qualifier: prefix of generated helper functions (``static inline``).
        restrict: the restrict keyword for pointer parameters (``__restrict__``).
        math_templates: ``(op, dtype)`` -> a template with ``{0}``, ``{1}`` for arguments.
        float_suffix: literal suffix per float dtype (``"f"`` for float32).
        pragma_parallel / pragma_vectorize / pragma_unroll: lines put before loops of
            those kinds (``{n}`` is the unroll count); ``None`` leaves a comment instead.
        includes: ``#include`` lines; ``preamble``: fixed code after them.
        status_decl / alloc_fail / return_status / return_ok / return_fail: status handling
            (a failed allocation of the root block returns at once; one inside loops sets
            the status, skips its block and the kernel returns the status at the end).
        inf / nan: literals per float dtype.
        reserved_words: names a variable/buffer/function must not take (suffixed instead).
        helper_templates: static helpers (floordiv, floormod, max, min) by kind.
        kernel_signature, allocate, thread_loop: the hooks (see the module docstring).
            ``kernel_signature`` gets a fourth argument, the ``(ctype, name)`` scalar
            parameters (shape variables), only for functions with symbolic shapes.
        known_externs: ``call_extern`` names the includes declare (no prototype printed).
        extern_includes: ``call_extern`` name -> the ``#include`` line declaring it.
        barrier: the statement a thread barrier (``T.tvm_storage_sync("shared")``) prints
            as; ``None`` where the target has no threads (the C target).
        vector_loop: a hook ``(printer, loop) -> bool`` that may print a vectorized loop
            as vector instructions (CUDA's ``float4``); False leaves it to the printer.
        error_runtime: code defining ``wb_division_by_zero(status, site)`` (and whatever
            lets the runtime read the site back), printed before the checked division
            helpers; ``None`` prints integer division unchecked (no status to return).
    """

    name: str
    type_names: Mapping[str, str]
    function_qualifier: str
    helper_qualifier: str
    restrict: str
    math_templates: Mapping[tuple[str, str], str]
    float_suffix: Mapping[str, str]
    pragma_parallel: str | None
    pragma_vectorize: str | None
    pragma_unroll: str | None
    includes: tuple[str, ...]
    preamble: str
    status_decl: str
    alloc_fail: str
    return_status: str
    return_ok: str
    return_fail: str
    inf: Mapping[str, str]
    nan: Mapping[str, str]
    reserved_words: frozenset[str]
    helper_templates: Mapping[str, str]
    kernel_signature: Callable[[Dialect, str, Sequence[tuple[str, str]]], str] = field(
        repr=False
    )
    allocate: Callable[[Dialect, AllocRequest], Allocation] = field(repr=False)
    thread_loop: Callable[[Dialect, str, str, int, str], LoopCode] = field(repr=False)
    stack_limit_bytes: int = 64 * 1024
    alignment: int = 64
    max_unroll: int = 65534
    known_externs: frozenset[str] = frozenset()
    extern_includes: Mapping[str, str] = field(default_factory=lambda: _freeze({}))
    barrier: str | None = None
    vector_loop: Callable[[object, object], bool] | None = field(default=None, repr=False)
    error_runtime: str | None = None

    def type_name(self, dtype: str) -> str:
        """The C type of an IR dtype (KeyError with the dtype named if unsupported)."""
        try:
            return self.type_names[dtype]
        except KeyError:
            raise KeyError(f"dialect {self.name!r} has no type for dtype {dtype!r}") from None

    def math(self, op: str, dtype: str, *args: str) -> str:
        """Apply the math template of ``op`` at ``dtype`` to printed arguments."""
        try:
            template = self.math_templates[(op, dtype)]
        except KeyError:
            raise KeyError(f"dialect {self.name!r} has no {op!r} for dtype {dtype!r}") from None
        return template.format(*args)


# ---------------------------------------------------------------------------
# the C dialect

_C_TYPES = {
    "bool": "bool",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "float16": "_Float16",
    "float32": "float",
    "float64": "double",
}

_UNARY = ("exp", "log", "sqrt", "tanh", "erf", "sin", "cos", "floor", "ceil")


def c_math_templates(fsuffix: Mapping[str, str]) -> dict[tuple[str, str], str]:
    """libm templates: ``expf``/``exp`` for float32/float64; float16 computes in float.

    Compositions: ``sigmoid(x) = 1 / (1 + exp(-x))``, ``rsqrt(x) = 1 / sqrt(x)``.
    """
    out: dict[tuple[str, str], str] = {}
    for dtype, sfx in (("float32", "f"), ("float64", "")):
        one = "1.0" + fsuffix.get(dtype, "")
        for op in _UNARY:
            out[(op, dtype)] = f"{op}{sfx}({{0}})"
        out[("abs", dtype)] = f"fabs{sfx}({{0}})"
        out[("pow", dtype)] = f"pow{sfx}({{0}}, {{1}})"
        out[("rsqrt", dtype)] = f"({one} / sqrt{sfx}({{0}}))"
        out[("sigmoid", dtype)] = f"({one} / ({one} + exp{sfx}(-({{0}}))))"
    for (op, dtype), template in list(out.items()):
        if dtype == "float32":
            args = template.replace("{0}", "(float)({0})").replace("{1}", "(float)({1})")
            out[(op, "float16")] = f"((_Float16){args})"
    for dtype in ("int8", "int16", "int32"):
        out[("abs", dtype)] = "abs({0})"
    out[("abs", "int64")] = "llabs({0})"
    for dtype in ("uint8", "uint16", "uint32", "uint64"):
        out[("abs", dtype)] = "({0})"
    return out


C_RESERVED_WORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto "
    "if inline int long register restrict return short signed sizeof static struct switch "
    "typedef union unsigned void volatile while _Bool _Complex _Imaginary _Float16 bool true "
    "false NULL main free aligned_alloc malloc size_t int8_t int16_t int32_t int64_t uint8_t "
    "uint16_t uint32_t uint64_t INFINITY NAN INT64_C UINT64_C abs llabs fabs fabsf "
    "__restrict__ __attribute__ __atomic_store_n".split()
)

# Helpers of C-like dialects ({q} qualifier, {t} C type, {s} dtype, {floor} floor(a / b)),
# emitted only when a function uses them.
C_HELPER_TEMPLATES = {
    "floordiv": (
        "{q} {t} wb_floordiv_{s}({t} a, {t} b) {{\n"
        "  {t} q = a / b;\n"
        "  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
        "}}"
    ),
    "floormod": (
        "{q} {t} wb_floormod_{s}({t} a, {t} b) {{\n"
        "  {t} r = a % b;\n"
        "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
        "}}"
    ),
    "floormodf": "{q} {t} wb_floormod_{s}({t} a, {t} b) {{ return a - {floor} * b; }}",
    "max": "{q} {t} wb_max_{s}({t} a, {t} b) {{ return a > b ? a : b; }}",
    "min": "{q} {t} wb_min_{s}({t} a, {t} b) {{ return a < b ? a : b; }}",
}

# Checked integer division ({u} the unsigned type of {t}; {minus_one} tests b == -1 for a
# signed type, 0 otherwise): a zero divisor records the site and gives 0; the minimum
# divided by -1 wraps as in numpy instead of trapping.
_CHECK = (
    "  if (__builtin_expect(b == 0, 0)) {{ wb_division_by_zero(status, site); return 0; }}\n"
)
C_HELPER_TEMPLATES.update({
    "floordiv_checked": (
        "{q} {t} wb_floordiv_checked_{s}({t} a, {t} b, int32_t* status, const char* site) {{\n"
        + _CHECK
        + "  if ({minus_one}) return ({t})(0 - ({u})a);\n"
        "  {t} q = a / b;\n"
        "  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;\n"
        "}}"
    ),
    "floormod_checked": (
        "{q} {t} wb_floormod_checked_{s}({t} a, {t} b, int32_t* status, const char* site) {{\n"
        + _CHECK
        + "  if ({minus_one}) return 0;\n"
        "  {t} r = a % b;\n"
        "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
        "}}"
    ),
    "truncdiv_checked": (
        "{q} {t} wb_truncdiv_checked_{s}({t} a, {t} b, int32_t* status, const char* site) {{\n"
        + _CHECK
        + "  if ({minus_one}) return ({t})(0 - ({u})a);\n"
        "  return a / b;\n"
        "}}"
    ),
})

# What a kernel that met a zero divisor leaves behind: status -2 (STATUS_DIVISION_BY_ZERO
# of workbench.codegen.cstyle) and the site, read by the runtime through the exported
# ``wb_error_message()``.
C_ERROR_RUNTIME = """\
/* The site of the last integer division by zero (read with wb_error_message()). */
static const char* wb_error_site = NULL;
const char* wb_error_message(void) {
  return __atomic_load_n(&wb_error_site, __ATOMIC_RELAXED);
}
__attribute__((noinline, cold))
static void wb_division_by_zero(int32_t* status, const char* site) {
  __atomic_store_n(&wb_error_site, site, __ATOMIC_RELAXED);
  __atomic_store_n(status, -2, __ATOMIC_RELAXED);
}"""



def _c_signature(
    d: Dialect,
    name: str,
    params: Sequence[tuple[str, str]],
    scalars: Sequence[tuple[str, str]] = (),
) -> str:
    args = [f"{ctype}* {d.restrict} {pname}" for ctype, pname in params]
    args += [f"{ctype} {pname}" for ctype, pname in scalars]
    return f"{d.function_qualifier}int32_t {name}({', '.join(args) or 'void'})"


def _c_allocate(d: Dialect, req: AllocRequest) -> Allocation:
    if req.nbytes_expr is not None:  # symbolic size: always on the heap
        return Allocation(
            decl=(
                f"{req.ctype}* {d.restrict} {req.name} = "
                f"({req.ctype}*)wb_alloc({req.nbytes_expr});  // {req.scope}, symbolic size",
            ),
            null_check=f"{req.name} == NULL",
            free=(f"free({req.name});",),
        )
    heap = (req.at_root and req.scope == "global") or req.nbytes > d.stack_limit_bytes
    if heap:
        return Allocation(
            decl=(
                f"{req.ctype}* {d.restrict} {req.name} = "
                f"({req.ctype}*)wb_alloc({req.nbytes});  // {req.scope}, {req.n_elems} elements",
            ),
            null_check=f"{req.name} == NULL",
            free=(f"free({req.name});",),
        )
    if req.scope == "global" and d.restrict:
        # a packed panel on the stack, read through a restrict pointer: with the bare
        # array gcc 12 assumes it may alias the accumulator tile and keeps the
        # accumulators in memory (matmul 512^3, 8x8 tile, 32-column panel: 24 vs 70
        # GFLOPS on one AVX2 core)
        storage = f"{req.name}_storage"
        return Allocation(
            decl=(
                f"{req.ctype} {storage}[{req.n_elems}] __attribute__((aligned({d.alignment})));"
                f"  // {req.scope}",
                f"{req.ctype}* {d.restrict} {req.name} = {storage};",
            )
        )
    return Allocation(
        decl=(
            f"{req.ctype} {req.name}[{req.n_elems}] __attribute__((aligned({d.alignment})));"
            f"  // {req.scope}",
        )
    )


def _c_thread_loop(d: Dialect, var: str, ctype: str, extent: int | str, tag: str) -> LoopCode:
    # The C target runs GPU-bound loops one after another, so a GPU schedule can be
    # checked numerically on a CPU.
    return LoopCode(
        open=(
            f"// thread_binding {tag}",
            f"for ({ctype} {var} = 0; {var} < {extent}; ++{var}) {{",
        )
    )


# C functions the includes declare: call_extern of these prints no prototype.
C_KNOWN_EXTERNS = frozenset(
    f + sfx
    for f in (
        "exp exp2 expm1 log log2 log10 log1p sqrt cbrt pow sin cos tan asin acos atan atan2 "
        "sinh cosh tanh asinh acosh atanh erf erfc tgamma lgamma floor ceil round trunc rint "
        "nearbyint fabs fmod fmin fmax fma hypot copysign remainder"
    ).split()
    for sfx in ("", "f")
) | frozenset({"abs", "labs", "llabs"})
C_EXTERN_INCLUDES = {name: "#include <stdio.h>" for name in ("printf", "puts", "putchar")}

_C_PREAMBLE = """\
/* Aligned heap memory for intermediate buffers (size rounded up as aligned_alloc asks). */
static inline void* wb_alloc(size_t bytes) {
  return aligned_alloc(64, (bytes + 63) / 64 * 64);
}"""

C_DIALECT = Dialect(
    name="c",
    type_names=_freeze(_C_TYPES),
    function_qualifier="",
    helper_qualifier="static inline",
    restrict="__restrict__",
    math_templates=_freeze(c_math_templates({"float32": "f"})),
    float_suffix=_freeze({"float32": "f", "float64": "", "float16": "f"}),
    pragma_parallel="#pragma omp parallel for",
    pragma_vectorize="#pragma omp simd",
    pragma_unroll="#pragma GCC unroll {n}",
    includes=(
        "#include <math.h>",
        "#include <stdbool.h>",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#include <stdlib.h>",
    ),
    preamble=_C_PREAMBLE,
    status_decl="int32_t wb_status = 0;",
    alloc_fail="__atomic_store_n(&wb_status, -1, __ATOMIC_RELAXED);",
    return_status="return wb_status;",
    return_ok="return 0;",
    return_fail="return -1;",
    inf=_freeze({"float32": "INFINITY", "float64": "(double)INFINITY", "float16": "INFINITY"}),
    nan=_freeze({"float32": "NAN", "float64": "(double)NAN", "float16": "NAN"}),
    reserved_words=C_RESERVED_WORDS,
    helper_templates=_freeze(C_HELPER_TEMPLATES),
    kernel_signature=_c_signature,
    allocate=_c_allocate,
    thread_loop=_c_thread_loop,
    known_externs=C_KNOWN_EXTERNS,
    extern_includes=_freeze(C_EXTERN_INCLUDES),
    error_runtime=C_ERROR_RUNTIME,
)
