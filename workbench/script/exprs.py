"""Expressions of TVMScript, read from Python's ``ast`` without evaluating anything.

An expression node becomes a *value*: an IR expression (``PrimExpr``), a Python
literal (``int``, ``float``, ``bool``, ``str``, ``None``) or a tuple/list/dict of
values, a :class:`~workbench.ir.Buffer`, or a :class:`Qual` naming a TVMScript
function (``T.float32`` used as a type). Python literal arithmetic is folded
(``2 * 64`` is ``128``); arithmetic involving IR builds the node the text names,
without simplification, so that printing what was read gives the same text.

Literals take the dtype of the other operand (``i * 32`` with ``i`` an int64 loop
variable makes ``32`` an int64 constant; ``x + 1`` with ``x`` float32 makes
``T.float32(1)``), as in TVM.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from ..ir import expr as E
from ..ir.buffer import Buffer
from .errors import ParseError

INT_DTYPES = E.INT_DTYPES
DTYPES = E.ALL_DTYPES

#: TVMScript dtype constructors: ``T.float32(0)`` is a constant, ``T.float32(x)`` a cast.
DTYPE_CTORS = {f"T.{d}": d for d in DTYPES}


class Qual:
    """A TVMScript name that is not a value by itself (``T.float32`` in ``x: T.float32``)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


class Unreadable:
    """A free name of a decorated function whose value is not a plain constant (an
    object, a function, a tuple...): the reader names it in its error."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<a {self.type_name} of the Python scope>"


class Handle:
    """A ``T.handle`` parameter, waiting for its ``T.match_buffer``."""

    __slots__ = ("name", "buffer")

    def __init__(self, name: str):
        self.name = name
        self.buffer: Buffer | None = None


_MISSING = object()

_ARITH = {
    ast.Add: E.Add,
    ast.Sub: E.Sub,
    ast.Mult: E.Mul,
    ast.Div: E.Div,
    ast.FloorDiv: E.FloorDiv,
    ast.Mod: E.FloorMod,
}
_CMP = {
    ast.Eq: E.EQ,
    ast.NotEq: E.NE,
    ast.Lt: E.LT,
    ast.LtE: E.LE,
    ast.Gt: E.GT,
    ast.GtE: E.GE,
}
_PY_CMP = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}
_OP_TEXT = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
            ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
            ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&", ast.MatMult: "@"}

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class ExprParser:
    """Expression reading; the statement parser (:mod:`.parser`) derives from it.

    Needs ``self.src`` (a :class:`~.errors.Source`), ``self.env`` (names in scope)
    and ``self.aliases`` (import aliases to canonical prefixes ``T``, ``I``, ``R``,
    ``tvm``, ``wb``).
    """

    src: Any
    env: dict[str, Any]
    aliases: dict[str, str]
    constants: dict[str, Any] = {}  # read only; the decorators fill a parser's own

    def err(self, node: ast.AST | None, msg: str) -> ParseError:
        return self.src.error(node, msg)

    # -- names ---------------------------------------------------------------
    def qual(self, node: ast.AST) -> str | None:
        """``T.axis.remap`` -> ``"T.axis.remap"`` when the root name is a TVMScript
        namespace (after import aliases), else None."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = node.id
        if root in self.env:
            return None
        prefix = self.aliases.get(root)
        if prefix is None:
            return None
        parts.extend(reversed(prefix.split(".")))
        parts.reverse()
        return canonical(parts)

    # -- expressions ---------------------------------------------------------
    def expr(self, node: ast.AST) -> Any:
        fn = _EXPR_DISPATCH.get(type(node))
        if fn is None:
            raise self.err(node, f"{_describe(node)} is not supported by the workbench")
        return fn(self, node)

    def prim(self, node: ast.AST, dtype: str | None = None) -> E.PrimExpr:
        """Read an expression that must be an IR scalar (literals become constants,
        of ``dtype`` when given)."""
        return self.to_prim(self.expr(node), node, dtype)

    def to_prim(self, v: Any, node: ast.AST, dtype: str | None = None) -> E.PrimExpr:
        if isinstance(v, E.PrimExpr):
            return v
        if isinstance(v, (bool, int, float)):
            return self.literal(v, dtype, node)
        raise self.err(node, f"expected a scalar expression, got {_kind(v)}")

    def literal(self, v: Any, dtype: str | None, node: ast.AST) -> E.PrimExpr:
        """A Python literal as a constant of ``dtype`` (int32 / float32 / bool by default;
        ints beyond int32 become int64, as in TVM)."""
        if isinstance(v, bool):
            if dtype is None or dtype == "bool":
                return E.IntImm(int(v), "bool")
            if E.is_float(dtype):
                return E.FloatImm(float(v), dtype)
            return E.IntImm(int(v), dtype)
        if isinstance(v, int):
            if dtype is None or dtype == "bool":
                dtype = "int32" if _INT32_MIN <= v <= _INT32_MAX else "int64"
            if E.is_float(dtype):
                return E.FloatImm(float(v), dtype)
            return E.IntImm(v, dtype)
        if isinstance(v, float):
            if dtype is None:
                return E.FloatImm(v, "float32")
            if E.is_float(dtype):
                return E.FloatImm(v, dtype)
            raise self.err(node, f"the float constant {v!r} is used with an expression of "
                                 f"dtype {dtype}; write T.Cast or an integer")
        raise self.err(node, f"expected a number, got {_kind(v)}")

    def int_value(self, node: ast.AST, what: str) -> int | E.PrimExpr:
        """A static or symbolic integer (extent, shape entry)."""
        v = self.expr(node)
        if isinstance(v, bool):
            raise self.err(node, f"{what} must be an integer, got {v!r}")
        if isinstance(v, int):
            return v
        if isinstance(v, E.PrimExpr) and v.dtype in INT_DTYPES:
            return v
        raise self.err(node, f"{what} must be an integer, got {_kind(v)}")

    def string(self, node: ast.AST, what: str) -> str:
        v = self.expr(node)
        if not isinstance(v, str):
            raise self.err(node, f"{what} must be a string, got {_kind(v)}")
        return v

    # -- node kinds ----------------------------------------------------------
    def _constant(self, node: ast.Constant) -> Any:
        v = node.value
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        raise self.err(node, f"constant {type(v).__name__} is not supported by the workbench")

    def _name(self, node: ast.Name) -> Any:
        v = self.env.get(node.id, _MISSING)
        if v is not _MISSING:
            return v
        if node.id in self.aliases:
            return Qual(self.aliases[node.id])
        v = self.constants.get(node.id, _MISSING)
        if isinstance(v, Unreadable):
            raise self.err(node, f"name `{node.id}` is a {v.type_name} of the enclosing "
                                 "Python scope; the reader takes only plain str / int / "
                                 "float / bool constants from there")
        if v is not _MISSING:  # a plain constant of the decorated function's scope
            return v
        raise self.err(node, f"name `{node.id}` is not defined")

    def _attribute(self, node: ast.Attribute) -> Any:
        q = self.qual(node)
        if q is not None:
            return Qual(q)
        base = self.expr(node.value)
        if isinstance(base, Buffer):
            from .layout import buffer_attribute

            return buffer_attribute(self, base, node.attr, node)
        raise self.err(node, f"attribute `{node.attr}` of {_kind(base)} is not supported")

    def _tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.expr(e) for e in node.elts)

    def _list(self, node: ast.List) -> list:
        return [self.expr(e) for e in node.elts]

    def _dict(self, node: ast.Dict) -> dict:
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise self.err(v, "`**` in a dict is not supported by the workbench")
            key = self.expr(k)
            if not isinstance(key, str):
                raise self.err(k, f"dict keys must be strings, got {_kind(key)}")
            out[key] = self.expr(v)
        return out

    def _binop(self, node: ast.BinOp) -> Any:
        cls = _ARITH.get(type(node.op))
        if cls is None:
            raise self.err(node, f"operator `{_OP_TEXT.get(type(node.op), '?')}` is not "
                                 "supported in TVMScript")
        a = self.expr(node.left)
        b = self.expr(node.right)
        return self.arith(cls, a, b, node)

    def arith(self, cls: type, a: Any, b: Any, node: ast.AST) -> Any:
        if _is_num(a) and _is_num(b):
            return _fold(self, cls, a, b, node)
        a, b = self.match(a, b, node)
        return cls(a, b)

    def match(self, a: Any, b: Any, node: ast.AST) -> tuple[E.PrimExpr, E.PrimExpr]:
        """Two operands as IR of one dtype: literals take the other side's dtype;
        int32 with int64 widens to int64 (a cast, as TVM does)."""
        if isinstance(a, E.PrimExpr) and not isinstance(b, E.PrimExpr):
            b = self.to_prim(b, node, a.dtype)
        elif isinstance(b, E.PrimExpr) and not isinstance(a, E.PrimExpr):
            a = self.to_prim(a, node, b.dtype)
        else:
            a = self.to_prim(a, node)
            b = self.to_prim(b, node)
        if a.dtype != b.dtype:
            if a.dtype in INT_DTYPES and b.dtype in INT_DTYPES:
                wide = a.dtype if E.INT_DTYPES.index(a.dtype) > E.INT_DTYPES.index(b.dtype) \
                    else b.dtype
                a = a if a.dtype == wide else _cast(wide, a)
                b = b if b.dtype == wide else _cast(wide, b)
            elif a.dtype == "bool" and b.dtype == "bool":
                pass
            else:
                raise self.err(node, f"operands have different dtypes {a.dtype} and {b.dtype}; "
                                     "convert one with T.Cast")
        return a, b

    def _unaryop(self, node: ast.UnaryOp) -> Any:
        v = self.expr(node.operand)
        if isinstance(node.op, ast.UAdd):
            if _is_num(v) or isinstance(v, E.PrimExpr):
                return v
        elif isinstance(node.op, ast.USub):
            if _is_num(v):
                return -v
            if isinstance(v, E.IntImm):
                return E.IntImm(-v.value, v.dtype)
            if isinstance(v, E.FloatImm):
                return E.FloatImm(-v.value, v.dtype)
            if isinstance(v, E.PrimExpr):
                return E.Sub(self.literal(0, v.dtype, node), v)
        elif isinstance(node.op, ast.Not):
            if isinstance(v, bool):
                return not v
            if isinstance(v, E.PrimExpr):
                return E.Not(v)
        else:
            raise self.err(node, "operator `~` is not supported by the workbench")
        raise self.err(node, f"unary operator on {_kind(v)} is not supported")

    def _boolop(self, node: ast.BoolOp) -> Any:
        values = [self.expr(v) for v in node.values]
        if all(isinstance(v, bool) for v in values):
            return all(values) if isinstance(node.op, ast.And) else any(values)
        cls = E.And if isinstance(node.op, ast.And) else E.Or
        out = self.to_prim(values[0], node.values[0], "bool")
        for v, n in zip(values[1:], node.values[1:]):
            out = cls(out, self.to_prim(v, n, "bool"))
        return out

    def _compare(self, node: ast.Compare) -> Any:
        left = self.expr(node.left)
        result: Any = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.expr(right_node)
            cls = _CMP.get(type(op))
            if cls is None:
                raise self.err(node, f"comparison `{type(op).__name__}` is not supported in "
                                     "TVMScript")
            if _is_num(left) and _is_num(right):
                part: Any = _PY_CMP[type(op)](left, right)
            else:
                a, b = self.match(left, right, node)
                part = cls(a, b)
            if result is None:
                result = part
            elif isinstance(result, bool) and isinstance(part, bool):
                result = result and part
            else:
                result = E.And(self.to_prim(result, node, "bool"), self.to_prim(part, node, "bool"))
            left = right
        return result

    def _subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        if isinstance(base, Buffer):
            return E.BufferLoad(base, self.indices(base, node))
        if isinstance(base, Qual):
            return self.call_builtin(base.name, node, _subscript_args(node.slice), {})
        if isinstance(base, tuple) and not isinstance(node.slice, ast.Slice):
            k = self.expr(node.slice)  # ``A.strides[0]``
            if isinstance(k, int) and not isinstance(k, bool) and -len(base) <= k < len(base):
                return base[k]
            raise self.err(node.slice, f"index {k!r} out of range for {len(base)} entries")
        raise self.err(node, f"indexing {_kind(base)} is not supported")

    def index_nodes(self, node: ast.Subscript) -> list[ast.AST]:
        s = node.slice
        return list(s.elts) if isinstance(s, ast.Tuple) else [s]

    def indices(self, buf: Buffer, node: ast.Subscript) -> tuple[E.PrimExpr, ...]:
        nodes = self.index_nodes(node)
        if len(nodes) != buf.ndim:
            raise self.err(node, f"buffer `{buf.name}` has {buf.ndim} dimension(s), indexed "
                                 f"with {len(nodes)}")
        out = []
        for n in nodes:
            if isinstance(n, ast.Slice):
                raise self.err(n, f"slices of buffer `{buf.name}` (vector accesses) are not "
                                  "supported; index one element per dimension")
            v = self.expr(n)
            if isinstance(v, bool) or not isinstance(v, (int, E.PrimExpr)):
                raise self.err(n, f"index of buffer `{buf.name}` must be an integer, got "
                                  f"{_kind(v)}")
            if isinstance(v, int):
                v = E.IntImm(v, buf.index_dtype)
            elif v.dtype not in INT_DTYPES:
                raise self.err(n, f"index of buffer `{buf.name}` has dtype {v.dtype}")
            out.append(v)
        return tuple(out)

    def _call(self, node: ast.Call) -> Any:
        name = self.qual(node.func)
        if name is None and isinstance(node.func, ast.Attribute):
            base = self.expr(node.func.value)
            if isinstance(base, Buffer):
                if node.func.attr == "access_ptr":
                    from .layout import access_ptr

                    return access_ptr(self, base, node)
                raise self.err(node.func, f"buffer method `{node.func.attr}` is not supported "
                                          f"(buffer `{base.name}`)")
        if name is None:
            if isinstance(node.func, ast.Name) and node.func.id == "range":
                raise self.err(node, "range(...) only makes a loop: `for i in range(n):`")
            raise self.err(node.func, "only TVMScript functions (T.xxx) can be called")
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.err(a, "`*args` is not supported by the workbench")
            args.append(a)
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.err(k.value, "`**kwargs` is not supported by the workbench")
            kwargs[k.arg] = k.value
        return self.call_builtin(name, node, args, kwargs)

    def call_builtin(self, name: str, node: ast.AST, args: list, kwargs: dict) -> Any:
        from .builtins import DTYPE_KEYWORD, EXPR_BUILTINS

        fn = EXPR_BUILTINS.get(name)
        if fn is None:
            if name in DTYPE_CTORS:
                return self.dtype_ctor(DTYPE_CTORS[name], node, args, kwargs)
            raise self.err(node, f"{_unknown(name)}")
        if name in DTYPE_KEYWORD and "dtype" in kwargs:
            # TVM drops this keyword (the value's dtype comes from the arguments); a
            # keyword that names another dtype is a mistake, not a cast
            kwargs = dict(kwargs)
            want_node = kwargs.pop("dtype")
            want = self.string(want_node, f"{name}'s dtype")
            value = fn(self, node, args, kwargs)
            if isinstance(value, E.PrimExpr) and value.dtype != want:
                raise self.err(want_node, f'{name}: dtype="{want}" does not match the '
                                          f"value's dtype {value.dtype} (TVM ignores the "
                                          "keyword; convert with T.Cast)")
            return value
        return fn(self, node, args, kwargs)

    def dtype_ctor(self, dtype: str, node: ast.AST, args: list, kwargs: dict) -> Any:
        if kwargs or len(args) > 1:
            raise self.err(node, f"T.{dtype} takes one value")
        if not args:
            return self.symbolic_var(dtype, node)
        v = self.expr(args[0])
        if isinstance(v, str):
            if not E.is_float(dtype):
                raise self.err(args[0], f"T.{dtype} of a string")
            try:
                f = float(v)
            except ValueError:
                raise self.err(args[0], f"T.{dtype}({v!r}) is not a number") from None
            if not (math.isinf(f) or math.isnan(f)):
                raise self.err(args[0], f"T.{dtype} of a string: only \"inf\", \"-inf\" and "
                                        "\"nan\" are spelled as strings")
            return E.FloatImm(f, dtype)
        if isinstance(v, E.PrimExpr):
            if isinstance(v, (E.IntImm, E.FloatImm)) and v.dtype != dtype:
                if E.is_float(dtype):
                    return E.FloatImm(float(v.value), dtype)
                if isinstance(v, E.IntImm):
                    return E.IntImm(int(v.value), dtype)
            return v if v.dtype == dtype else _cast(dtype, v)
        if isinstance(v, float) and not E.is_float(dtype) and dtype != "bool":
            if not v.is_integer():
                raise self.err(args[0], f"T.{dtype}({v!r}): not an integer")
            v = int(v)
        return self.literal(v, dtype, args[0])

    def symbolic_var(self, dtype: str, node: ast.AST) -> Any:
        raise self.err(node, f"T.{dtype}() declares a symbolic variable; it can only be "
                             "assigned to a name (`n = T.int32()`)")


def _cast(dtype: str, v: E.PrimExpr) -> E.PrimExpr:
    return E.Cast(dtype, v)


def _fold(p: ExprParser, cls: type, a: Any, b: Any, node: ast.AST) -> Any:
    try:
        if cls is E.Add:
            return a + b
        if cls is E.Sub:
            return a - b
        if cls is E.Mul:
            return a * b
        if cls is E.Div:
            return a / b
        if cls is E.FloorDiv:
            return a // b
        return a % b
    except ZeroDivisionError:
        raise p.err(node, "division by zero") from None


def _subscript_args(s: ast.AST) -> list:
    return list(s.elts) if isinstance(s, ast.Tuple) else [s]


def canonical(parts: list[str]) -> str:
    """Map spellings of the TVMScript namespaces to one prefix: ``tvm.script.tir.x``,
    ``tvm.tir.x`` and ``T.x`` are ``T.x``; ``tvm.script.ir_module`` is
    ``I.ir_module``; ``wb.script.tir.x`` is ``T.x``."""
    head = parts[0]
    if head in ("tvm", "wb"):
        rest = parts[1:]
        if rest and rest[0] == "script":
            rest = rest[1:]
            if head == "tvm" and rest and rest[0] == "ir_module":
                return "I." + ".".join(rest)
        if rest and rest[0] in ("tir", "tirx"):
            return ".".join(["T"] + rest[1:])
        if rest and rest[0] == "ir":
            return ".".join(["I"] + rest[1:])
        if rest and rest[0] == "relax":
            return ".".join(["R"] + rest[1:])
        return ".".join([head] + rest)
    return ".".join(parts)


def _describe(node: ast.AST) -> str:
    names = {
        ast.JoinedStr: "an f-string",
        ast.FormattedValue: "an f-string",
        ast.Lambda: "a lambda",
        ast.IfExp: "a conditional expression (`a if c else b`; use T.Select or "
                   "T.if_then_else)",
        ast.ListComp: "a list comprehension",
        ast.SetComp: "a set comprehension",
        ast.DictComp: "a dict comprehension",
        ast.GeneratorExp: "a generator expression",
        ast.NamedExpr: "an assignment expression (`:=`)",
        ast.Await: "`await`",
        ast.Yield: "`yield`",
        ast.YieldFrom: "`yield from`",
        ast.Starred: "`*` unpacking",
        ast.Set: "a set",
        ast.Slice: "a slice",
    }
    return names.get(type(node), f"`{type(node).__name__}`")


def _kind(v: Any) -> str:
    if isinstance(v, Buffer):
        return f"buffer `{v.name}`"
    if isinstance(v, E.PrimExpr):
        return f"an expression of dtype {v.dtype}"
    if isinstance(v, Qual):
        return f"`{v.name}`"
    if isinstance(v, Handle):
        return f"handle `{v.name}`"
    if isinstance(v, bool):
        return f"the bool {v}"
    if v is None:
        return "None"
    if isinstance(v, (int, float, str)):
        return f"the {type(v).__name__} {v!r}"
    return f"a {type(v).__name__}"


def _unknown(name: str) -> str:
    if name.startswith("T."):
        return f"unknown TVMScript function {name}"
    return f"`{name}` is not supported by the workbench"


_EXPR_DISPATCH = {
    ast.Constant: ExprParser._constant,
    ast.Name: ExprParser._name,
    ast.Attribute: ExprParser._attribute,
    ast.Tuple: ExprParser._tuple,
    ast.List: ExprParser._list,
    ast.Dict: ExprParser._dict,
    ast.BinOp: ExprParser._binop,
    ast.UnaryOp: ExprParser._unaryop,
    ast.BoolOp: ExprParser._boolop,
    ast.Compare: ExprParser._compare,
    ast.Subscript: ExprParser._subscript,
    ast.Call: ExprParser._call,
}
