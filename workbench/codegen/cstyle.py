"""One C-like printer: PrimFunc -> source text, parameterized by a :class:`Dialect`.

Lowering follows TensorIR semantics, as TVM lowers blocks:

* every function becomes ``int32_t name(float* __restrict__ A, ...)`` returning a status;
  buffers are flat, row-major (``A[i, j]`` of shape ``(M, N)`` is ``A[i * N + j]``),
  allocated buffers honour ``storage_align`` hints;
* a block opens a C scope holding ``const int32_t vi = <binding>;`` for each iter var,
  guarded by ``if (predicate)`` when it has one; its ``init`` runs when every reduction
  iter var is 0; buffers it allocates are declared at its position (so each thread of a
  parallel loop gets its own copy);
* a loop annotated ``pragma_auto_unroll_max_step = N`` (as TVM) asks to unroll the serial
  loops at or inside it whose whole subtree runs at most ``N`` steps (a store is one step, a
  vectorized loop counts its body once) and holds no parallel or thread-bound loop: each
  gets the dialect's unroll pragma with its extent (see :func:`auto_unroll_steps`);
* loop kinds become pragmas (the dialect's); a parallel loop nested in a parallel loop, or
  any parallel/vectorized loop nested in a vectorized one, runs serially; a parallel or
  vectorized loop whose iterations store to the same element (a reduction over that loop)
  keeps its pragma off so the generated code stays correct.

Floating-point ``max``/``min`` are ``a > b ? a : b`` (vectorizes; with a NaN operand the
result is the second operand, whereas numpy's ``maximum`` propagates NaN). Integer
arithmetic is C's: int32 overflow of ``+``, ``-``, ``*`` is undefined behaviour.

Integer division and modulo never trap (TVM leaves division by zero undefined; a trap
would kill the Python process):

* a constant zero divisor is refused when the kernel is printed
  (:class:`IntegerDivisionByZeroError`, naming the function, the block and the
  expression);
* a divisor that may be zero at run time (data, or an expression whose range includes 0)
  is checked where the dialect asks for it (``Dialect.checked_division``, the C target):
  a zero divisor makes the kernel return :data:`STATUS_DIVISION_BY_ZERO` and record
  ``"kernel 'main', block 'B': integer division by zero"``, which the runtime raises as
  ``ZeroDivisionError``; the quotient is then 0 and the kernel runs to its end. The
  most negative value divided by -1 wraps (``INT32_MIN // -1 == INT32_MIN``,
  ``INT32_MIN % -1 == 0``), as numpy computes it. Divisors known to be neither 0 nor -1
  (tile sizes, shape variables, ``i + 1``) print as plain ``/`` and ``%``: index
  arithmetic and float kernels pay nothing.

>>> import workbench as wb
>>> from workbench.codegen.cstyle import generate_source
>>> from workbench.codegen.dialect import C_DIALECT
>>> A = wb.placeholder((8,), "float32", name="A")
>>> B = wb.compute((8,), lambda i: A[i] * 2.0, name="B")
>>> src = generate_source(wb.create_prim_func([A, B], name="double"), C_DIALECT)
>>> "B[vi] = A[vi] * 2.0f;" in src.text
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..ir.buffer import Buffer, MatchBufferRegion
from ..ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LIKELY,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    BufferField,
    BufferLoad,
    Call,
    CallExtern,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IfThenElseExpr,
    IntImm,
    Let,
    Max,
    Min,
    Mul,
    Not,
    OpaqueCall,
    Or,
    PrimExpr,
    Select,
    StringImm,
    Sub,
    Var,
    is_float,
)
from ..ir.functor import expr_vars, iter_exprs, iter_stmts, substitute
from ..ir.printer import expr_to_str
from ..ir.simplify import add, int_range, mul, simplify
from ..ir.stmt import (
    Block,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IRModule,
    LetStmt,
    PrimFunc,
    SeqStmt,
)
from ..ir.stmt import Stmt as _Stmt
from .dialect import AllocRequest, Dialect, LoopCode
from .views import ViewCode, is_access_ptr

__all__ = [
    "CodegenError",
    "GeneratedSource",
    "IntegerDivisionByZeroError",
    "STATUS_ALLOCATION_FAILED",
    "STATUS_DIVISION_BY_ZERO",
    "buffer_strides",
    "generate_source",
]

#: Status a C kernel returns when an intermediate buffer could not be allocated.
STATUS_ALLOCATION_FAILED = -1
#: Status a C kernel returns when an integer divisor was zero (its message says where).
STATUS_DIVISION_BY_ZERO = -2

INDENT = "  "
_INT32_MAX = 2**31 - 1

# C precedence (higher binds tighter)
_P_TERNARY, _P_OR, _P_AND, _P_EQ, _P_REL, _P_ADD, _P_MUL, _P_UNARY, _P_PRIMARY = (
    3, 4, 5, 9, 10, 12, 13, 14, 16
)
_BINOPS: dict[type, tuple[str, int]] = {
    Add: ("+", _P_ADD),
    Sub: ("-", _P_ADD),
    Mul: ("*", _P_MUL),
    Div: ("/", _P_MUL),
    LT: ("<", _P_REL),
    LE: ("<=", _P_REL),
    GT: (">", _P_REL),
    GE: (">=", _P_REL),
    EQ: ("==", _P_EQ),
    NE: ("!=", _P_EQ),
    And: ("&&", _P_AND),
    Or: ("||", _P_OR),
}

class CodegenError(ValueError):
    """The IR cannot be printed (an unbound variable, a buffer never allocated, ...)."""


class IntegerDivisionByZeroError(CodegenError, ZeroDivisionError):
    """An integer division or modulo by the constant 0 (refused before anything runs)."""


@dataclass(frozen=True)
class GeneratedSource:
    """A translation unit: ``text`` and the C symbol of each function (by IR name)."""

    text: str
    symbols: dict[str, str]


@dataclass(frozen=True)
class _BufInfo:
    name: str
    ctype: str
    strides: tuple[int | PrimExpr, ...]  # expressions of shape variables when symbolic
    n_elems: int | PrimExpr
    wide: bool  # flat indices need int64 (always for a symbolic shape)


def buffer_strides(buf: Buffer, use_align: bool = True) -> tuple[tuple, int | PrimExpr]:
    """Row-major element strides of ``buf`` and the element count to allocate.

    ``storage_align`` hints ``(axis, factor, offset)`` round the stride of ``axis`` up so
    that ``stride % factor == offset`` (TVM's definition); the outer strides follow.
    With a symbolic shape the strides outside a symbolic dimension are expressions
    (``(n, 4, 8)`` has strides ``(32, 8, 1)``; ``(4, n)`` has ``(n, 1)``).

    >>> from workbench.ir import Buffer
    >>> buffer_strides(Buffer("S", (4, 30), "float32", align=((0, 32, 1),)))
    ((33, 1), 132)
    """
    align = {axis: (factor, offset) for axis, factor, offset in buf.align} if use_align else {}
    strides: list = [0] * buf.ndim
    stride: int | PrimExpr = 1
    for d in range(buf.ndim - 1, -1, -1):
        if d in align and align[d][0] > 0:
            if isinstance(stride, PrimExpr):
                raise CodegenError(
                    f"buffer {buf.name!r}: storage_align on axis {d} needs a static stride, "
                    f"but it is {stride}"
                )
            factor, offset = align[d]
            stride += (factor + offset - stride % factor) % factor
        strides[d] = stride
        dim = buf.shape[d]
        stride = stride * dim if isinstance(stride, int) and isinstance(dim, int) else (
            simplify(_as_index(stride) * _as_index(dim))
        )
    return tuple(strides), stride


def _as_index(x: int | PrimExpr) -> PrimExpr:
    """An int as an int64 constant; a shape expression widened to int64."""
    if isinstance(x, int):
        return IntImm(x, "int64")
    return x if x.dtype == "int64" else Cast("int64", x)


def _c_string(value: str) -> str:
    """A C string literal (printable ASCII kept, everything else escaped in octal)."""
    out = []
    for byte in value.encode():
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif 32 <= byte < 127 and ch != "?":
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _term_count(e: PrimExpr) -> int:
    """Non-constant terms of a sum, as the canonical affine form prints it
    (``i * 32 - j + 4`` has 2)."""
    if isinstance(e, (Add, Sub)):
        return _term_count(e.a) + _term_count(e.b)
    return 0 if isinstance(e, IntImm) else 1


def _identifier(name: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
    if out[0].isdigit():
        out = "v" + out
    if out.startswith("wb_"):
        out = "u_" + out
    return out


def _float_literal(value: float, dtype: str, suffix: str) -> str:
    if dtype == "float64":
        text = repr(float(value))
    else:  # shortest text that rounds back to the same float32/float16
        text = str(np.float32(value) if dtype == "float32" else np.float16(value))
    if not any(c in text for c in ".en"):
        text += ".0"
    return text + suffix


class _FunctionPrinter(ViewCode):
    """Prints one function; collects the helpers it needs into ``helpers``."""

    def __init__(self, dialect: Dialect, helpers: set[tuple[str, str]], reserved: set[str],
                 externs: dict[str, str] | None = None, c_functions: set[str] | None = None):
        self.d = dialect
        self.helpers = helpers
        self.externs = {} if externs is None else externs  # extern C name -> prototype
        # registered C functions called (their definitions go into the translation unit)
        self.c_functions = set() if c_functions is None else c_functions
        self.views: dict[Buffer, MatchBufferRegion] = {}  # match_buffer views in scope
        self.reserved = reserved
        self.lines: list[str] = []
        self.depth = 1
        self.names: dict[Var, str] = {}
        self.visible: set[str] = set()
        self.scopes: list[list[Var | Buffer]] = [[]]
        self.bounds: dict[Var, tuple[int, int]] = {}
        self.bindings: dict[Var, PrimExpr] = {}  # block iter var -> value in loop vars
        self.bufs: dict[Buffer, _BufInfo] = {}
        self.buf_names: dict[Buffer, str] = {}
        self.in_parallel = False
        self.in_simd = False
        self.uses_status = False
        self.auto_unroll = 0  # pragma_auto_unroll_max_step of the innermost annotated loop
        self.func_name = ""
        self.block_names: list[str] = []  # the blocks enclosing what is being printed

    # -- bookkeeping ------------------------------------------------------------------
    def emit(self, text: str) -> None:
        self.lines.append(INDENT * self.depth + text if text else "")

    def comment(self, text: str) -> None:
        self.emit("// " + " ".join(text.split()))

    def push(self) -> None:
        self.scopes.append([])

    def pop(self) -> None:
        for x in self.scopes.pop():
            if isinstance(x, Var):
                self.visible.discard(self.names.pop(x))
                self.bounds.pop(x, None)
                self.bindings.pop(x, None)
            else:
                self.bufs.pop(x, None)
                self.views.pop(x, None)

    def declare(self, var: Var, extent: int | PrimExpr | None, start: int = 0) -> str:
        base = _identifier(var.name)
        name, k = base, 1
        while name in self.visible or name in self.reserved:
            name, k = f"{base}_{k}", k + 1
        if var in self.names:  # the same Var bound twice in nested scopes
            raise CodegenError(f"variable {var.name!r} is bound twice on one path")
        self.names[var] = name
        self.visible.add(name)
        if extent is not None:  # a symbolic extent gives a symbolic (unknown) upper bound
            self.bounds[var] = (start, start + extent - 1 if isinstance(extent, int) else None)
        self.scopes[-1].append(var)
        return name

    def add_buffer(self, buf: Buffer, use_align: bool) -> _BufInfo:
        strides, n = buffer_strides(buf, use_align)
        wide = not isinstance(n, int) or n > _INT32_MAX
        info = _BufInfo(self.buf_names[buf], self.d.type_name(buf.dtype), strides, n, wide)
        self.bufs[buf] = info
        self.scopes[-1].append(buf)
        return info

    def ctype(self, dtype: str) -> str:
        return self.d.type_name(dtype)

    def _index_ctype(self, var: Var, start: int | PrimExpr, end: int | PrimExpr) -> str:
        """The C type of a loop or block variable over ``[start, end)``: its dtype's,
        widened to 64 bits when a static bound does not fit an int32 (an IR built with
        an int32 variable over 2**31 + 64 iterations would overflow its counter)."""
        if var.dtype == "int32" and (
            (isinstance(end, int) and end - 1 > _INT32_MAX)
            or (isinstance(start, int) and start < -_INT32_MAX - 1)
        ):
            return self.ctype("int64")
        return self.ctype(var.dtype)

    # -- expressions ------------------------------------------------------------------
    def expr(self, e: PrimExpr) -> str:
        return self._expr(e)[0]

    def _sub(self, e: PrimExpr, min_prec: int) -> str:
        text, prec = self._expr(e)
        return text if prec >= min_prec else f"({text})"

    def _helper(self, kind: str, dtype: str, a: PrimExpr, b: PrimExpr) -> tuple[str, int]:
        self.helpers.add((kind, dtype))
        fn = "floormod" if kind == "floormodf" else kind
        return f"wb_{fn}_{dtype}({self.expr(a)}, {self.expr(b)})", _P_PRIMARY

    def _nonneg_division(self, e: BinaryOp) -> bool:
        if e.dtype.startswith("uint"):
            return True
        alo, _ = int_range(e.a, self.bounds)
        blo, _ = int_range(e.b, self.bounds)
        return alo is not None and alo >= 0 and blo is not None and blo > 0

    def _site(self) -> str:
        """Where the printer is, for messages: ``kernel 'main', block 'B'``."""
        block = self.block_names[-1] if self.block_names else "root"
        return f"kernel {self.func_name!r}, block {block!r}"

    def _int_division(self, e: BinaryOp) -> tuple[str, int] | None:
        """Integer ``//``, ``%`` or ``/``: refuse a constant zero divisor; print a checked
        helper call when the divisor may be 0 (or -1 with the dtype's minimum as dividend)
        and the dialect checks division; None leaves it to the unchecked printing."""
        if isinstance(e.b, IntImm) and e.b.value == 0:
            raise IntegerDivisionByZeroError(
                f"{self._site()}: integer division by zero in `{expr_to_str(e)[:80]}`"
            )
        if self.d.error_runtime is None or self._safe_divisor(e):
            return None
        kind = {FloorDiv: "floordiv", FloorMod: "floormod", Div: "truncdiv"}[type(e)]
        self.helpers.add((kind + "_checked", e.dtype))
        self.uses_status = True
        site = _c_string(f"{self._site()}: integer division by zero")
        return (f"wb_{kind}_checked_{e.dtype}({self.expr(e.a)}, {self.expr(e.b)}, "
                f"&wb_status, {site})", _P_PRIMARY)

    def _safe_divisor(self, e: BinaryOp) -> bool:
        """The divisor is never 0, and never -1 while the dividend may be the minimum."""
        blo, bhi = int_range(e.b, self.bounds)
        if not ((blo is not None and blo > 0) or (bhi is not None and bhi < 0)):
            return False
        if e.dtype.startswith("uint") or (blo is not None and blo > -1) or (
            bhi is not None and bhi < -1
        ):
            return True
        alo, _ = int_range(e.a, self.bounds)
        return alo is not None and alo > -(2 ** (np.dtype(e.dtype).itemsize * 8 - 1))

    def _expr(self, e: PrimExpr) -> tuple[str, int]:
        if isinstance(e, (FloorDiv, FloorMod, Div)) and not is_float(e.dtype):
            checked = self._int_division(e)
            if checked is not None:
                return checked
        if isinstance(e, Var):
            if e not in self.names:
                raise CodegenError(f"variable {e.name!r} is used outside the loop/block binding it")
            return self.names[e], _P_PRIMARY
        if isinstance(e, IntImm):
            return self._int_literal(e)
        if isinstance(e, FloatImm):
            v = e.value
            if v != v:
                return self.d.nan[e.dtype], _P_PRIMARY
            if v in (float("inf"), float("-inf")):
                return ("" if v > 0 else "-") + self.d.inf[e.dtype], _P_UNARY
            text = _float_literal(v, e.dtype, self.d.float_suffix.get(e.dtype, ""))
            return text, _P_UNARY if text.startswith("-") else _P_PRIMARY
        if isinstance(e, BufferLoad):
            return f"{self._buffer_name(e.buffer)}[{self._flat(e.buffer, e.indices)}]", _P_PRIMARY
        if isinstance(e, (Max, Min)):
            return self._helper("max" if isinstance(e, Max) else "min", e.dtype, e.a, e.b)
        if isinstance(e, FloorDiv):
            if is_float(e.dtype):
                return self.d.math("floor", e.dtype, f"{self.expr(e.a)} / {self.expr(e.b)}"), 16
            if self._nonneg_division(e):
                return f"{self._sub(e.a, _P_MUL)} / {self._sub(e.b, _P_MUL + 1)}", _P_MUL
            return self._helper("floordiv", e.dtype, e.a, e.b)
        if isinstance(e, FloorMod):
            if is_float(e.dtype):
                return self._helper("floormodf", e.dtype, e.a, e.b)
            if self._nonneg_division(e):
                return f"{self._sub(e.a, _P_MUL)} % {self._sub(e.b, _P_MUL + 1)}", _P_MUL
            return self._helper("floormod", e.dtype, e.a, e.b)
        op = _BINOPS.get(type(e))
        if op is not None:
            sym, prec = op
            a, b = e.a, e.b  # type: ignore[attr-defined]
            return f"{self._sub(a, prec)} {sym} {self._sub(b, prec + 1)}", prec
        if isinstance(e, Not):
            return f"!{self._sub(e.a, _P_UNARY)}", _P_UNARY
        if isinstance(e, Select):
            c = self._sub(e.condition, _P_PRIMARY)  # (cond) ? a : b reads best
            t = self._sub(e.true_value, _P_OR)
            f = self._sub(e.false_value, _P_TERNARY)
            return f"{c} ? {t} : {f}", _P_TERNARY
        if isinstance(e, Cast):
            if e.dtype == "bool":
                return f"({self._sub(e.value, _P_EQ + 1)} != 0)", _P_PRIMARY
            return f"({self.ctype(e.dtype)}){self._sub(e.value, _P_UNARY)}", _P_UNARY
        if isinstance(e, Call) and e.op == LIKELY:  # a branch hint: the condition itself
            return self._expr(e.args[0])
        if isinstance(e, Call):
            args = [self.expr(a) for a in e.args]
            return self.d.math(e.op, e.dtype, *args), _P_PRIMARY
        if isinstance(e, IfThenElseExpr):  # C's ?: evaluates only the chosen side
            c = self._sub(e.condition, _P_PRIMARY)
            t = self._sub(e.true_value, _P_OR)
            f = self._sub(e.false_value, _P_TERNARY)
            return f"{c} ? {t} : {f}", _P_TERNARY
        if isinstance(e, Let):  # a GNU statement expression: value evaluated once
            value = self.expr(e.value)
            self.push()
            name = self.declare(e.var, None)
            self._let_bounds(e.var, e.value)
            body = self.expr(e.body)
            self.pop()
            return f"({{ const {self.ctype(e.var.dtype)} {name} = {value}; {body}; }})", 16
        if isinstance(e, CallExtern):
            args = ", ".join(self.expr(a) for a in e.args)  # refuses opaque arguments
            self._extern(e)
            return f"{e.name}({args})", _P_PRIMARY
        if isinstance(e, StringImm):
            return _c_string(e.value), _P_PRIMARY
        if isinstance(e, BufferField):
            if e.field == "data":  # the array's first element (a view: its source array's)
                return self._buffer_name(e.buffer), _P_PRIMARY
            return self._elem_offset(e.buffer)
        if is_access_ptr(e):
            return self._access_ptr(e)  # type: ignore[arg-type]
        if isinstance(e, OpaqueCall):
            raise CodegenError(
                f"cannot build `{expr_to_str(e)[:80]}`: TVM's opaque intrinsic "
                f"T.{e.op} is carried by the IR but has no C code (a GPU-only intrinsic)"
            )
        raise CodegenError(f"cannot print expression node {type(e).__name__}")

    def _let_bounds(self, var: Var, value: PrimExpr) -> None:
        if var.dtype.startswith(("int", "uint")):
            lo, hi = int_range(value, self.bounds)
            if lo is not None or hi is not None:
                self.bounds[var] = (lo, hi)

    def _extern(self, e: CallExtern) -> None:
        """Record the prototype of an extern function (checked for consistency), or the
        registered C function it calls (its definition is printed; no prototype)."""
        if not re.fullmatch(r"[A-Za-z_]\w*", e.name):
            raise CodegenError(f"call_extern: {e.name!r} is not a C function name")
        from .extern import c_function

        if c_function(e.name) is not None:
            self.c_functions.add(e.name)
            return
        args = ", ".join(
            "const char*" if isinstance(a, StringImm) else
            "void*" if a.dtype == "handle" else self.ctype(a.dtype) for a in e.args
        )
        ret = "void" if e.dtype == "void" else "void*" if e.dtype == "handle" else \
            self.ctype(e.dtype)
        proto = f"{ret} {e.name}({args or 'void'});"
        seen = self.externs.setdefault(e.name, proto)
        if seen != proto and e.name not in self.d.known_externs:
            raise CodegenError(
                f"call_extern: {e.name!r} is called with two signatures: {seen} and {proto}"
            )

    def _int_literal(self, e: IntImm) -> tuple[str, int]:
        v, dt = e.value, e.dtype
        prec = _P_UNARY if v < 0 else _P_PRIMARY
        if dt == "bool":
            return ("1" if v else "0"), _P_PRIMARY
        if dt == "int32":
            return ("(-2147483647 - 1)", _P_PRIMARY) if v == -(2**31) else (str(v), prec)
        if dt == "int64":
            if v == -(2**63):
                return "(-INT64_C(9223372036854775807) - 1)", _P_PRIMARY
            return f"INT64_C({v})", _P_PRIMARY
        if dt == "uint32":
            return f"{v}u", _P_PRIMARY
        if dt == "uint64":
            return f"UINT64_C({v})", _P_PRIMARY
        return f"(({self.ctype(dt)}){v})", _P_PRIMARY

    def _buffer_name(self, buf: Buffer) -> str:
        view = self.views.get(buf)
        if view is not None:  # a match_buffer view names its source's array
            return self._buffer_name(view.source.buffer)
        if buf not in self.bufs:
            raise CodegenError(
                f"buffer {buf.name!r} is used where it is neither a parameter nor allocated "
                "by an enclosing block"
            )
        return self.bufs[buf].name

    def _flat(self, buf: Buffer, indices: tuple[PrimExpr, ...]) -> str:
        return self.expr(self.flat_index(buf, indices))

    def flat_index(self, buf: Buffer, indices: tuple[PrimExpr, ...]) -> PrimExpr:
        """The element offset of ``buf[indices]`` in its (source) array, in loop vars."""
        view = self.views.get(buf)
        if view is not None:  # a match_buffer view: index its source region
            if len(indices) != buf.ndim:
                raise CodegenError(
                    f"buffer {buf.name!r} has {buf.ndim} dimensions, indexed with {len(indices)}"
                )
            return self.flat_index(view.source.buffer, view.source_indices(indices))
        info = self.bufs[buf]
        if len(indices) != len(info.strides):
            raise CodegenError(
                f"buffer {buf.name!r} has {len(info.strides)} dimensions, "
                f"indexed with {len(indices)}"
            )
        dt = "int64" if info.wide else "int32"
        total: PrimExpr | None = None
        for idx, stride in zip(indices, info.strides):
            if info.wide and idx.dtype != "int64":
                idx = Cast("int64", idx)
            if isinstance(stride, PrimExpr):
                term = mul(idx, _as_index(stride) if info.wide else stride)
            else:
                term = mul(idx, IntImm(stride, idx.dtype)) if stride != 1 else idx
            total = term if total is None else add(total, term)
        if total is None:
            return IntImm(0, dt)
        return self._in_loop_vars(total)

    def _in_loop_vars(self, index: PrimExpr) -> PrimExpr:
        """``index`` with the enclosing blocks' iter vars replaced by their bindings, when
        that makes it shorter (fewer affine terms), else ``index`` itself.

        A compacted buffer is indexed relative to its tile, ``vi * 32 - i_0 * 256 + vj -
        j_0 * 32``, which is ``i_1 * 32 + j_1`` in the loop variables (as TVM's lowering
        writes it). The C compiler does not cancel the terms itself, so it cannot see
        that two such accesses are distinct fixed slots of a small array: it then keeps
        an accumulator tile in memory instead of registers (matmul 1024^3: ~100 against
        ~300 GFLOPS). Only an index mixing iter vars with loop variables is tried.
        """
        used = expr_vars(index)
        if all(v in self.bindings for v in used) or not any(v in self.bindings for v in used):
            return index
        resolved = add(substitute(index, self.bindings), IntImm(0, index.dtype))
        return resolved if _term_count(resolved) < _term_count(index) else index

    # -- statements -------------------------------------------------------------------
    def stmt(self, s: _Stmt) -> None:
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, BufferStore):
            target = f"{self._buffer_name(s.buffer)}[{self._flat(s.buffer, s.indices)}]"
            self.emit(f"{target} = {self.expr(s.value)};")
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, Block):
            self.block(s, root=False)
        elif isinstance(s, IfThenElse):
            self.emit(f"if ({self.expr(s.condition)}) {{")
            self._indented(s.then_case)
            if s.else_case is not None:
                self.emit("} else {")
                self._indented(s.else_case)
            self.emit("}")
        elif isinstance(s, Evaluate) and isinstance(s.value, OpaqueCall) and (
            s.value.op == "tvm_storage_sync"
        ):
            if self.d.barrier is None:
                raise CodegenError(f"target {self.d.name!r} has no thread barrier "
                                   "(T.tvm_storage_sync); build for a GPU target")
            self.emit(self.d.barrier)
        elif isinstance(s, Evaluate):
            # ``T.assume(cond)`` (transform_layout's padding assumption) is a hint, no code
            hint = isinstance(s.value, OpaqueCall) and s.value.op == "assume"
            if not isinstance(s.value, (IntImm, FloatImm)) and not hint:
                self.emit(f"(void)({self.expr(s.value)});")
        elif isinstance(s, LetStmt):
            value = self.expr(s.value)
            self.emit("{")  # a C scope, so a sibling let may reuse the name
            self.depth += 1
            self.push()
            name = self.declare(s.var, None)
            self._let_bounds(s.var, s.value)
            self.emit(f"const {self.ctype(s.var.dtype)} {name} = {value};")
            self.stmt(s.body)
            self.pop()
            self.depth -= 1
            self.emit("}")
        else:
            raise CodegenError(f"cannot print statement node {type(s).__name__}")

    def _indented(self, s: _Stmt) -> None:
        self.depth += 1
        self.stmt(s)
        self.depth -= 1

    def loop(self, s: For) -> None:
        if s.kind == "vectorized" and self.d.vector_loop is not None and self.d.vector_loop(
            self, s
        ):  # the dialect printed it as vector instructions
            return
        for key, value in s.annotations:
            self.comment(f"annotation {key} = {value!r}")
        self.push()
        ctype = self._index_ctype(s.loop_var, s.min, s.end)
        extent = s.extent if isinstance(s.extent, int) else self.expr(s.extent)
        v = self.declare(s.loop_var, s.extent, s.min)
        end = s.end if isinstance(s.end, int) else self.expr(s.end)
        header = f"for ({ctype} {v} = {s.min}; {v} < {end}; ++{v}) {{"
        saved = (self.in_parallel, self.in_simd, self.auto_unroll)
        self.auto_unroll = _auto_unroll_max_step(s, self.auto_unroll)
        pragma: str | None = None
        if s.kind == "thread_binding":
            if _cross_thread_reduction(s) and self.d.barrier is None:
                self.comment(f"cross-thread reduction over {s.thread_tag} (an all-reduce on a "
                             "GPU; the loop runs serially here)")
            if s.min:  # a thread axis counts from 0: the loop variable is offset from it
                index = self.declare(Var(f"{s.loop_var.name}_t", s.loop_var.dtype), s.extent)
                code = self.d.thread_loop(self.d, index, ctype, extent, s.thread_tag or "")
                start = s.min if isinstance(s.min, int) else self.expr(s.min)
                offset = f"const {ctype} {v} = {index} + {start};"
                code = LoopCode(code.open, code.prologue + (offset,), code.close)
            else:
                code = self.d.thread_loop(self.d, v, ctype, extent, s.thread_tag or "")
        else:
            if s.kind in ("parallel", "vectorized"):
                pragma = self._parallel_pragma(s)
            elif self.d.pragma_unroll and isinstance(s.extent, int) and (
                s.kind == "unrolled"
                or (s.kind == "serial" and self.auto_unroll > 0
                    and 0 < auto_unroll_steps(s) <= self.auto_unroll)
            ):
                pragma = self.d.pragma_unroll.format(n=min(s.extent, self.d.max_unroll))
            code = LoopCode(open=((pragma,) if pragma else ()) + (header,))
        for line in code.open:
            self.emit(line)
        self.depth += 1
        for line in code.prologue:
            self.emit(line)
        self.stmt(s.body)
        self.depth -= 1
        for line in code.close:
            self.emit(line)
        self.in_parallel, self.in_simd, self.auto_unroll = saved
        self.pop()

    def _parallel_pragma(self, s: For) -> str | None:
        kind = s.kind
        pragma = self.d.pragma_parallel if kind == "parallel" else self.d.pragma_vectorize
        why = None
        if self.in_simd:
            why = "inside a vectorized loop"
        elif kind == "parallel" and self.in_parallel:
            why = "inside a parallel loop"
        else:
            shared = _shared_store(s)
            if shared is not None:
                why = f"iterations store to the same elements of {shared.name}"
        if pragma is None or why is not None:
            self.comment(f"{kind} loop runs serially{': ' + why if why else ''}")
            return None
        if kind == "parallel":
            self.in_parallel = True
        else:
            self.in_simd = True
        return pragma

    def block(self, b: Block, root: bool) -> None:
        self.block_names.append(b.name)
        try:
            self._block(b, root)
        finally:
            self.block_names.pop()

    def _block(self, b: Block, root: bool) -> None:
        mapping = {iv.var: val for iv, val in zip(b.iter_vars, b.iter_values)}
        pred = substitute(b.predicate, mapping)
        if isinstance(pred, IntImm) and not pred.value:
            self.comment(f"block {b.name}: predicate is always false")
            return
        if not root:
            always = isinstance(pred, IntImm) and pred.value
            head = "{" if always else f"if ({self.expr(pred)}) {{"
            self.emit(f"{head}  // block {b.name}")
            self.depth += 1
        self.push()
        for key, value in b.annotations:
            self.comment(f"annotation {key} = {value!r}")
        for iv, val in zip(b.iter_vars, b.iter_values):
            text = self.expr(val)
            name = self.declare(iv.var, iv.extent)
            self.bindings[iv.var] = substitute(val, self.bindings)
            ctype = self._index_ctype(iv.var, 0, iv.extent)
            self.emit(f"const {ctype} {name} = {text};")
        for m in b.match_buffers:
            self._match_buffer(m)
        checks, frees = [], []
        for buf in b.alloc_buffers:
            info = self.add_buffer(buf, use_align=True)
            itemsize = np.dtype(buf.dtype).itemsize
            if isinstance(info.n_elems, int):
                req = AllocRequest(
                    info.name, info.ctype, buf.scope, info.n_elems, info.n_elems * itemsize, root
                )
            else:  # a symbolic size: computed when the block runs
                nbytes = f"(size_t)({self.expr(info.n_elems)}) * {itemsize}"
                req = AllocRequest(info.name, info.ctype, buf.scope, 0, 0, root, nbytes)
            alloc = self.d.allocate(self.d, req)
            for line in alloc.decl:
                self.emit(line)
            if alloc.null_check:
                checks.append(alloc.null_check)
            frees.extend(alloc.free)
        guarded = bool(checks) and not root
        if checks:
            self.emit(f"if ({' || '.join(checks)}) {{")
            if root:  # nothing has run yet: free what was allocated and return at once
                for line in (frees if len(frees) > 1 else []) + [self.d.return_fail]:
                    self.emit(INDENT + line)
                self.emit("}")
            else:
                self.uses_status = True
                self.emit(INDENT + self.d.alloc_fail)
                self.emit("} else {")
                self.depth += 1
        if b.init is not None:
            reduce_vars = [self.names[iv.var] for iv in b.iter_vars if iv.kind == "R"]
            if reduce_vars:
                self.emit(f"if ({' && '.join(f'{v} == 0' for v in reduce_vars)}) {{")
                self._indented(b.init)
                self.emit("}")
            else:
                self.stmt(b.init)
        self.stmt(b.body)
        if guarded:
            self.depth -= 1
            self.emit("}")
        for line in frees:
            self.emit(line)
        self.pop()
        if not root:
            self.depth -= 1
            self.emit("}")

    def _match_buffer(self, m: MatchBufferRegion) -> None:
        """A block's ``T.match_buffer``: accesses of the view go to its source region.
        The view's shape must be the region's extents (leading extra dims of extent 1)."""
        src, view = m.source, m.buffer
        if src.buffer not in self.bufs and src.buffer not in self.views:
            self._buffer_name(src.buffer)  # raises: the source is not in scope
        lead = len(src.region) - view.ndim
        exts = [e for _, e in src.region]
        ok = all(_is_one(e) for e in exts[:lead])
        for e, dim in zip(exts[lead:], view.shape, strict=True):
            ok = ok and _same_size(e, dim)
        if not ok:
            shape = ", ".join(str(d) for d in view.shape)
            raise CodegenError(
                f"match_buffer {view.name!r}: shape ({shape}) does not match the region of "
                f"{src.buffer.name!r} it views"
            )
        self.views[view] = m
        self.scopes[-1].append(view)
        if view.strides:
            self._bind_strides(view)

    # -- functions --------------------------------------------------------------------
    def function(self, func: PrimFunc, symbol: str) -> str:
        from ..ir.analysis import collect_buffers

        self.func_name = func.name
        taken = set(self.reserved)
        for buf in collect_buffers(func):
            base = _identifier(buf.name)
            name, k = base, 1
            while name in taken:
                name, k = f"{base}_{k}", k + 1
            taken.add(name)
            self.buf_names[buf] = name
        self.reserved = taken
        for p in func.params:
            self.add_buffer(p, use_align=False)
        params = [(self.bufs[p].ctype, self.bufs[p].name) for p in func.params]
        scalars = []
        for v in func.shape_vars:  # symbolic shapes: passed after the arrays, >= 1
            name = self.declare(v, None)
            self.bounds[v] = (1, None)
            scalars.append((self.ctype(v.dtype), name))
        for p in func.params:  # declared stride variables of a parameter: its strides
            if p.strides:
                self._bind_strides(p)
        self.block(func.body, root=True)
        body = self.lines
        if scalars:
            sig = self.d.kernel_signature(self.d, symbol, params, scalars)
        else:
            sig = self.d.kernel_signature(self.d, symbol, params)
        head = [sig + " {"]
        if self.uses_status:
            head.append(INDENT + self.d.status_decl)
        tail = INDENT + (self.d.return_status if self.uses_status else self.d.return_ok)
        return "\n".join(head + body + [tail, "}"])


# -- auto unroll (pragma_auto_unroll_max_step) ---------------------------------------------
AUTO_UNROLL_KEY = "pragma_auto_unroll_max_step"


def _auto_unroll_max_step(loop: For, inherited: int) -> int:
    """The unroll budget in force at ``loop``: its own annotation, else the enclosing one."""
    for key, value in loop.annotations:
        if key == AUTO_UNROLL_KEY and isinstance(value, int) and not isinstance(value, bool):
            return max(value, 0)
    return inherited



def _cross_thread_reduction(loop: For) -> bool:
    """A loop bound to threadIdx.x/y/z that feeds a reduce iter var of a block under it
    (a cross-thread reduction, as ``bind`` allows; see
    ``workbench.schedule.primitives.for_kind.cross_thread_reductions``)."""
    if loop.thread_tag not in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
        return False
    for x in iter_stmts(loop.body):
        if isinstance(x, Block) and any(
            iv.kind == "R" and loop.loop_var in expr_vars(v)
            for iv, v in zip(x.iter_vars, x.iter_values, strict=True)
        ):
            return True
    return False

def auto_unroll_steps(s: _Stmt) -> int:
    """Steps the unrolled code of ``s`` would have, or 0 if ``s`` must not be unrolled.

    A store or evaluation is one step; a serial or unrolled loop multiplies its body's
    steps by its extent; a vectorized loop counts its body once (it becomes vector
    instructions); a parallel or thread-bound loop anywhere inside forbids unrolling (0).
    A loop annotated ``pragma_auto_unroll_max_step = N`` is unrolled when this is in
    ``1..N`` (TVM's ``UnrollLoop`` rule, with vectorization already applied).

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> sch.decompose_reduction(sch.get_block("C"), k)  # doctest: +ELLIPSIS
    BlockRV(...)
    >>> auto_unroll_steps(sch.get(k)), auto_unroll_steps(sch.get(j))
    (16, 272)
    >>> sch.vectorize(j)
    >>> auto_unroll_steps(sch.get(j)), auto_unroll_steps(sch.get(i))
    (17, 272)
    """
    if isinstance(s, For):
        if s.kind in ("parallel", "thread_binding") or not isinstance(s.extent, int):
            return 0
        inner = auto_unroll_steps(s.body)
        return inner if s.kind == "vectorized" else inner * s.extent
    if isinstance(s, SeqStmt):
        parts = [auto_unroll_steps(x) for x in s.stmts]
        return 0 if 0 in parts else sum(parts)
    if isinstance(s, Block):
        parts = [auto_unroll_steps(x) for x in (s.init, s.body) if x is not None]
        return 0 if 0 in parts else sum(parts)
    if isinstance(s, IfThenElse):
        parts = [auto_unroll_steps(x) for x in (s.then_case, s.else_case) if x is not None]
        return 0 if 0 in parts else sum(parts)
    return 1


def _shared_store(loop: For) -> Buffer | None:
    """A buffer (allocated outside ``loop``) that two iterations of ``loop`` may store to
    at the same element: a store whose indices do not depend on the loop variable."""
    dep: set[Var] = {loop.loop_var}
    local: set[Buffer] = set()

    def uses(e: PrimExpr) -> bool:
        return any(isinstance(x, Var) and x in dep for x in iter_exprs(e))

    def walk(s: _Stmt) -> Buffer | None:
        if isinstance(s, For):
            return walk(s.body)
        if isinstance(s, SeqStmt):
            return next((r for r in (walk(x) for x in s.stmts) if r is not None), None)
        if isinstance(s, IfThenElse):
            parts = [s.then_case] + ([s.else_case] if s.else_case is not None else [])
            return next((r for r in (walk(x) for x in parts) if r is not None), None)
        if isinstance(s, Block):
            local.update(s.alloc_buffers)
            for iv, val in zip(s.iter_vars, s.iter_values):
                if uses(val):
                    dep.add(iv.var)
            parts = ([s.init] if s.init is not None else []) + [s.body]
            return next((r for r in (walk(x) for x in parts) if r is not None), None)
        if isinstance(s, BufferStore) and s.buffer not in local:
            if not any(uses(i) for i in s.indices):
                return s.buffer
        return None

    return walk(loop.body)


def _is_one(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _same_size(region_extent: PrimExpr, dim: int | PrimExpr) -> bool:
    if isinstance(dim, int):
        return isinstance(region_extent, IntImm) and region_extent.value == dim
    diff = simplify(region_extent - dim)
    return isinstance(diff, IntImm) and diff.value == 0


def _reserved(dialect: Dialect) -> set[str]:
    words = set(dialect.reserved_words)
    for template in dialect.math_templates.values():
        words.update(re.findall(r"[A-Za-z_]\w*", template))
    words.update(dialect.type_names.values())
    words.add("wb_status")
    return words


def _helper_source(dialect: Dialect, helpers: Iterable[tuple[str, str]]) -> list[str]:
    out = []
    helpers = sorted(helpers)
    if dialect.error_runtime and any(kind.endswith("_checked") for kind, _ in helpers):
        out.append(dialect.error_runtime)
    for kind, dtype in helpers:
        floor = ""
        if kind == "floormodf":
            floor = dialect.math("floor", dtype, "a / b")
        signed = dtype.startswith("int")  # the checked helpers are for integers only
        out.append(
            dialect.helper_templates[kind].format(
                q=dialect.helper_qualifier, t=dialect.type_name(dtype), s=dtype, floor=floor,
                u=dialect.type_name("u" + dtype if signed else dtype) if "int" in dtype else "",
                minus_one="b == -1" if signed else "0",
            )
        )
    return out


def generate_source(mod: IRModule | PrimFunc, dialect: Dialect,
                    check_cpu: bool = True) -> GeneratedSource:
    """Print every function of ``mod`` into one translation unit for ``dialect``.

    Deterministic: the same IR gives the same text (the compile cache relies on it).

    The C functions registered with :func:`workbench.codegen.register_c_function` that
    the kernels call are defined in the unit (after their ``#include`` lines, each
    once). With ``check_cpu`` (the default) a function that requires a CPU flag this
    machine lacks raises :class:`CodegenError`.

    >>> import workbench as wb
    >>> from workbench.codegen.dialect import C_DIALECT
    >>> A = wb.placeholder((4,), "float32", name="A")
    >>> B = wb.compute((4,), lambda i: wb.exp(A[i]), name="B")
    >>> generate_source(wb.create_prim_func([A, B], name="main"), C_DIALECT).symbols
    {'main': 'main_kernel'}
    """
    if isinstance(mod, PrimFunc):
        mod = IRModule.from_funcs(mod)
    from .extern import c_function, c_function_names, missing_flags

    reserved = _reserved(dialect) | set(c_function_names())
    helpers: set[tuple[str, str]] = set()
    externs: dict[str, str] = {}
    c_functions: set[str] = set()
    symbols: dict[str, str] = {}
    bodies = []
    for name, func in mod.functions:
        base = _identifier(name)
        if base in reserved:
            base += "_kernel"
        symbol, k = base, 1
        while symbol in symbols.values():
            symbol, k = f"{base}_{k}", k + 1
        symbols[name] = symbol
        printer = _FunctionPrinter(dialect, helpers, reserved | set(symbols.values()), externs,
                                   c_functions)
        bodies.append(printer.function(func, symbol))
    names = ", ".join(mod.names)
    includes = list(dialect.includes)
    definitions = []
    for fname in sorted(c_functions):
        fn = c_function(fname)
        assert fn is not None  # recorded only when registered
        missing = missing_flags(fn) if check_cpu else ()
        if missing:
            raise CodegenError(
                f"{fname}: this machine lacks the CPU flag{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)} that the C function {fname!r} requires; a kernel "
                "calling it cannot be built here"
            )
        includes.extend(h for h in fn.headers if h not in includes)
        definitions.append(fn.source.rstrip("\n"))
    declared = []
    for name, proto in sorted(externs.items()):
        header = dialect.extern_includes.get(name)
        if header is not None:
            if header not in includes:
                includes.append(header)
        elif name not in dialect.known_externs:
            declared.append(proto)
    parts = [
        f"// Generated by Schedule Workbench for target {dialect.name!r}: {names}",
        "\n".join(includes),
        dialect.preamble,
        *_helper_source(dialect, helpers),
        *definitions,
        "\n".join(declared),
        *bodies,
    ]
    return GeneratedSource("\n\n".join(p for p in parts if p) + "\n", symbols)

