"""Single-buffer commutative updates ``X[idx] = X[idx] op value``: the pattern that both
the schedule's reducer detection (``rfactor``, ``decompose_reduction``...) and the
cross-thread reduction lowering recognise.

>>> import workbench as wb
>>> from workbench.ir.analysis import find_block
>>> store = find_block(wb.workloads.matmul(4, 4, 4), "C").body
>>> op, rhs = split_update(store)
>>> op.__name__, str(rhs)
('Add', 'A[vi, vk] * B[vk, vj]')
"""

from __future__ import annotations

import numpy as np

from .expr import Add, BufferLoad, FloatImm, IntImm, Max, Min, Mul, PrimExpr
from .functor import iter_exprs, uses_var
from .simplify import struct_key
from .stmt import BufferStore, LetStmt, Stmt

__all__ = ["REDUCER_OPS", "is_identity", "split_update", "unlet_update"]

#: The commutative, associative combiners of a single-buffer reduction.
REDUCER_OPS = (Add, Mul, Min, Max)


def unlet_update(body: Stmt) -> Stmt:
    """``v = value; X[idx] = v`` (a let-binding whose variable is the stored value, as
    TVM's reducer pattern allows) as the single store ``X[idx] = value``; anything
    else unchanged."""
    if (
        isinstance(body, LetStmt)
        and isinstance(body.body, BufferStore)
        and body.body.value is body.var
        and not any(uses_var(i, body.var) for i in body.body.indices)
    ):
        return BufferStore(body.body.buffer, body.value, body.body.indices)
    return body


def is_identity(op: type, value: PrimExpr) -> bool:
    """Whether the constant ``value`` leaves every value unchanged under ``op``: 0 for
    a sum, 1 for a product, ``-inf`` / the dtype's lowest value for max, ``+inf`` / its
    highest for min.

    >>> is_identity(Max, FloatImm(float("-inf"), "float32")), is_identity(Add, IntImm(1))
    (True, False)
    """
    if not isinstance(value, (IntImm, FloatImm)):
        return False
    v, dtype = value.value, value.dtype
    if op is Add:
        return v == 0
    if op is Mul:
        return v == 1
    if dtype.startswith("float"):
        info = np.finfo(dtype)
        return bool(v <= info.min if op is Max else v >= info.max)
    if dtype == "bool":
        return False
    iinfo = np.iinfo(dtype)
    return bool(v == iinfo.min if op is Max else v == iinfo.max)


def split_update(store: BufferStore) -> tuple[type, PrimExpr] | str:
    """``(op, value)`` when ``store`` is ``X[idx] = op(X[idx], value)`` (either operand
    order) and ``value`` does not read ``X``; otherwise why not, as one word:
    ``"op"`` (not a sum, product, min or max), ``"operand"`` (neither operand is
    ``X[idx]``), ``"rereads"`` (the value reads ``X`` again)."""
    value = store.value
    if not isinstance(value, REDUCER_OPS):
        return "op"
    target = struct_key(BufferLoad(store.buffer, store.indices))
    if struct_key(value.a) == target:
        rhs = value.b
    elif struct_key(value.b) == target:
        rhs = value.a
    else:
        return "operand"
    if any(isinstance(x, BufferLoad) and x.buffer is store.buffer for x in iter_exprs(rhs)):
        return "rereads"
    return type(value), rhs
