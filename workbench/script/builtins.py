"""The TVMScript functions that make expressions (``T.max``, ``T.Cast``, ``T.exp``...).

Each entry reads its arguments from the ``ast`` (through the parser) and builds
the IR node the name stands for. Statement-level functions (``T.axis.*``,
``T.reads``, ``T.alloc_buffer``...) live in :mod:`.parser`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from ..ir import expr as E


def _arity(p, node: ast.AST, name: str, args: list, kwargs: dict, n: int,
           names: tuple[str, ...] = ()) -> list[ast.AST]:
    """Positional and keyword arguments in order (``names`` for keywords)."""
    out = list(args)
    for i, key in enumerate(names):
        if key in kwargs:
            if i < len(args):
                raise p.err(node, f"{name}: argument `{key}` given twice")
            if len(out) < i:
                raise p.err(node, f"{name}: argument {len(out) + 1} is missing")
            out.append(kwargs.pop(key))
    if kwargs:
        raise p.err(node, f"{name}: unexpected argument `{next(iter(kwargs))}`")
    if len(out) != n:
        raise p.err(node, f"{name} takes {n} argument(s), got {len(out)}")
    return out


def _dtype_arg(p, node: ast.AST, name: str, extra: tuple[str, ...] = ()) -> str:
    d = p.string(node, f"{name}'s dtype")
    if d not in E.ALL_DTYPES and d not in extra:
        raise p.err(node, f"{name}: unknown dtype {d!r}")
    return d


def _cast_to(p, node: ast.AST, dtype: str, value_node: ast.AST) -> E.PrimExpr:
    v = p.expr(value_node)
    if isinstance(v, (bool, int, float)):
        return p.dtype_ctor(dtype, node, [value_node], {})
    v = p.to_prim(v, value_node)
    return E.Cast(dtype, v)


def cast_upper(p, node, args, kwargs):  # T.Cast(dtype, value)
    d, v = _arity(p, node, "T.Cast", args, kwargs, 2, ("dtype", "value"))
    return _cast_to(p, node, _dtype_arg(p, d, "T.Cast"), v)


def cast_lower(p, node, args, kwargs):  # T.cast(value, dtype)
    v, d = _arity(p, node, "T.cast", args, kwargs, 2, ("value", "dtype"))
    return _cast_to(p, node, _dtype_arg(p, d, "T.cast"), v)


def _select_like(cls: type, name: str) -> Callable:
    def fn(p, node, args, kwargs):
        c, t, f = _arity(p, node, name, args, kwargs, 3,
                         ("cond", "true_value", "false_value"))
        cond = p.prim(c, "bool")
        tv, fv = p.match(p.expr(t), p.expr(f), node)
        return cls(cond, tv, fv)

    return fn


def _binary(cls: type, name: str) -> Callable:
    def fn(p, node, args, kwargs):
        a, b = _arity(p, node, name, args, kwargs, 2, ("a", "b"))
        x, y = p.match(p.expr(a), p.expr(b), node)
        return cls(x, y)

    return fn


def _logical(cls: type, name: str) -> Callable:
    def fn(p, node, args, kwargs):
        a, b = _arity(p, node, name, args, kwargs, 2, ("a", "b"))
        return cls(p.prim(a, "bool"), p.prim(b, "bool"))

    return fn


def logical_not(p, node, args, kwargs):
    (a,) = _arity(p, node, "T.Not", args, kwargs, 1, ("a",))
    return E.Not(p.prim(a, "bool"))


def _math(op: str) -> Callable:
    def fn(p, node, args, kwargs):
        n = 2 if op == "pow" else 1
        nodes = _arity(p, node, f"T.{op}", args, kwargs, n, ("x", "y")[:n])
        vals = [p.expr(a) for a in nodes]
        if n == 2:
            exprs = list(p.match(vals[0], vals[1], node))
        else:
            exprs = [p.to_prim(vals[0], nodes[0], "float32" if isinstance(vals[0], float)
                               else None)]
        dtype = exprs[0].dtype
        if not E.is_float(dtype) and op != "abs":
            raise p.err(node, f"T.{op} needs a float argument, got dtype {dtype}")
        return E.Call(op, tuple(exprs), dtype)

    return fn


def likely(p, node, args, kwargs):  # T.likely(cond): a branch hint meaning cond
    (c,) = _arity(p, node, "T.likely", args, kwargs, 1, ("cond",))
    return E.likely(p.prim(c))


def let_expr(p, node, args, kwargs):  # T.Let(body, where={v: value})
    if len(args) != 1 or set(kwargs) != {"where"}:
        raise p.err(node, "T.Let takes the body and where={var: value}")
    where = kwargs["where"]
    if not isinstance(where, ast.Dict) or len(where.keys) != 1 \
            or not isinstance(where.keys[0], ast.Name):
        raise p.err(where, "T.Let: where= must be {name: value} with one name")
    value = p.prim(where.values[0])
    var = E.Var(where.keys[0].id, value.dtype)
    p.push()
    try:
        p.bind(var.name, var)
        body = p.prim(args[0])
    finally:
        p.pop()
    return E.Let(var, value, body)


def _extern(pure: bool) -> Callable:
    name = "T.call_pure_extern" if pure else "T.call_extern"

    def fn(p, node, args, kwargs):
        if "dtype" in kwargs:  # TVM passes dtype= on as the first argument
            args = [kwargs.pop("dtype")] + list(args)
        if kwargs:
            raise p.err(node, f"{name}: unexpected argument `{next(iter(kwargs))}`")
        if len(args) < 2:
            raise p.err(node, f"{name} takes the result dtype, the function name and its "
                              "arguments")
        dtype = p.string(args[0], f"{name}'s dtype") or "void"  # "" is TVM's void
        if dtype not in E.ALL_DTYPES and dtype not in ("handle", "void"):
            raise p.err(args[0], f"{name}: unknown dtype {dtype!r}")
        fname = p.string(args[1], f"{name}'s function name")
        if not fname.isidentifier():
            raise p.err(args[1], f"{name}: {fname!r} is not a C function name")
        return E.CallExtern(dtype, fname, _call_args(p, args[2:]), pure)

    return fn


def _call_args(p, nodes: list) -> tuple[E.PrimExpr, ...]:
    """Arguments of an extern or opaque call: strings become ``StringImm``."""
    conv: list[E.PrimExpr] = []
    for a in nodes:
        v = p.expr(a)
        conv.append(E.StringImm(v) if isinstance(v, str) else p.to_prim(v, a))
    return tuple(conv)


def _limit(which: str) -> Callable:
    """``T.min_value(dtype)`` / ``T.max_value(dtype)``: the dtype's lowest / highest
    value as a constant (floats: the largest finite value, as TVM)."""
    name = f"T.{which}_value"

    def fn(p, node, args, kwargs):
        if kwargs or len(args) != 1:
            raise p.err(node, f'{name} takes the dtype: {name}("float32")')
        dtype = _dtype_arg(p, args[0], name)
        return E.dtype_limit(dtype, which)

    return fn


#: TVM's opaque intrinsics: kept as :class:`~workbench.ir.OpaqueCall` (printed back,
#: refused by the C backend). Their dtype is TVM's (``handle``).
OPAQUE_INTRINSICS = (
    "tvm_access_ptr",
    "tvm_fill_fragment",
    "tvm_load_matrix_sync",
    "tvm_store_matrix_sync",
    "tvm_mma_sync",
    "tvm_bmma_sync",
)


def _opaque(op: str) -> Callable:
    name = f"T.{op}"

    def fn(p, node, args, kwargs):
        if "dtype" in kwargs:  # TVM drops it; these intrinsics return a handle
            d = _dtype_arg(p, kwargs.pop("dtype"), name, extra=("handle",))
            if d != "handle":
                raise p.err(node, f'{name} returns a handle, not {d}; write dtype="handle" '
                                  "or leave it out")
        if kwargs:
            raise p.err(node, f"{name}: unexpected argument `{next(iter(kwargs))}`")
        call = E.OpaqueCall(op, _call_args(p, args))
        if op == "tvm_access_ptr":
            _check_access_ptr(p, node, call)
        return call

    return fn


def _check_access_ptr(p, node: ast.AST, call) -> None:
    """``T.tvm_access_ptr(T.type_annotation(dtype), A.data, offset, extent, mask)``."""
    a = call.args
    if len(a) != 5 or not (isinstance(a[1], E.BufferField) and a[1].field == "data") \
            or not (isinstance(a[4], E.IntImm) and 1 <= a[4].value <= 3):
        raise p.err(node, "T.tvm_access_ptr takes T.type_annotation(dtype), a buffer's "
                          ".data, the offset, the extent and the access mask (1 read, "
                          "2 write, 3 both)")


def storage_sync(p, node, args, kwargs):  # T.tvm_storage_sync("shared")
    """A thread barrier (``__syncthreads()`` for ``"shared"``), as the GPU planner
    inserts it."""
    _arity(p, node, "T.tvm_storage_sync", args, kwargs, 1, ())
    scope = _call_args(p, args)[0] if len(args) == 1 else None
    if not (isinstance(scope, E.StringImm) and scope.value in ("shared", "warp", "global")):
        raise p.err(node, 'T.tvm_storage_sync takes the scope "shared", "warp" or "global"')
    return E.OpaqueCall("tvm_storage_sync", (scope,), "int32")


def type_annotation(p, node, args, kwargs):  # T.type_annotation(dtype)
    (d,) = _arity(p, node, "T.type_annotation", args, kwargs, 1, ("dtype",))
    return E.OpaqueCall("type_annotation", (), _dtype_arg(p, d, "T.type_annotation"))


EXPR_BUILTINS: dict[str, Callable[..., Any]] = {
    "T.Cast": cast_upper,
    "T.cast": cast_lower,
    "T.Select": _select_like(E.Select, "T.Select"),
    "T.if_then_else": _select_like(E.IfThenElseExpr, "T.if_then_else"),
    "T.max": _binary(E.Max, "T.max"),
    "T.min": _binary(E.Min, "T.min"),
    "T.Max": _binary(E.Max, "T.Max"),
    "T.Min": _binary(E.Min, "T.Min"),
    "T.floordiv": _binary(E.FloorDiv, "T.floordiv"),
    "T.floormod": _binary(E.FloorMod, "T.floormod"),
    "T.FloorDiv": _binary(E.FloorDiv, "T.FloorDiv"),
    "T.FloorMod": _binary(E.FloorMod, "T.FloorMod"),
    "T.truncdiv": _binary(E.Div, "T.truncdiv"),
    "T.Div": _binary(E.Div, "T.Div"),
    "T.And": _logical(E.And, "T.And"),
    "T.Or": _logical(E.Or, "T.Or"),
    "T.Not": logical_not,
    "T.Let": let_expr,
    "T.likely": likely,
    "T.call_extern": _extern(False),
    "T.call_pure_extern": _extern(True),
    "T.min_value": _limit("min"),
    "T.max_value": _limit("max"),
    "T.type_annotation": type_annotation,
    "T.tvm_storage_sync": storage_sync,
}
for _op in E.MATH_FUNCS:
    EXPR_BUILTINS[f"T.{_op}"] = _math(_op)
EXPR_BUILTINS["T.fabs"] = _math("abs")
for _op in OPAQUE_INTRINSICS:
    EXPR_BUILTINS[f"T.{_op}"] = _opaque(_op)

#: functions whose ``dtype=`` keyword TVM accepts and drops (its value's dtype is what
#: the arguments give): the reader checks the keyword names that dtype.
DTYPE_KEYWORD = frozenset(
    ["T.if_then_else", "T.likely", "T.fabs", "T.floordiv", "T.floormod", "T.truncdiv"]
    + [f"T.{op}" for op in E.MATH_FUNCS]
)
