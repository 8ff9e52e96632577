"""Reducer recognition for ``rfactor``: which commutative reduction a block computes.

A reduction block's ``init`` and body must match one of TVM's registered reducers.
Single-buffer reducers are ``X[idx] = identity`` / ``X[idx] = X[idx] op rhs`` with
``op`` one of ``+``, ``*``, ``min``, ``max``. Two-buffer reducers combine an index and
a value (argmax / argmin) or two sums; their init is two stores (in either order) and
their update binds both new values first, then stores them (in either order)::

    with T.init():
        amax_idx[vi] = -1
        amax_val[vi] = T.min_value("float32")
    v_idx: T.int32 = T.Select(amax_val[vi] >= val[vi, vk], amax_idx[vi], idx[vi, vk])
    v_val: T.float32 = T.Select(amax_val[vi] >= val[vi, vk], amax_val[vi], val[vi, vk])
    amax_idx[vi] = v_idx
    amax_val[vi] = v_val

The registered two-buffer combiners (``x`` the accumulated pair, ``y`` the new one,
``[0]`` the index, ``[1]`` the value), as in TVM's ``ReducerRegistry``:

- sum: ``(x0 + y0, x1 + y1)``, identities ``(0, 0)``;
- argmax: ``Select(x1 >= y1, x0, y0), Select(x1 >= y1, x1, y1)``, identities
  ``(-1, min_value)``; with ties to the smaller index:
  ``Select(x1 > y1 or (x1 == y1 and x0 < y0), x0, y0), Select(x1 > y1, x1, y1)``;
- argmin: the same with ``<=`` / ``<`` and identities ``(-1, max_value)``.

Each malformed two-buffer block is refused with its own subclass of
:class:`UnrecognizedReducerError`, following the numbered conditions of TVM's
``GetInitValuesAndUpdatesFromReductionBlock``. Deliberate divergence from TVM 0.27: a
combined value (``y``) that reads one of the output buffers is refused, as for
single-buffer reducers (TVM accepts it, and its rfactor block then reads an output
that only the write-back block updates).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from ...ir import (
    Add,
    BufferLoad,
    BufferStore,
    FloatImm,
    IntImm,
    LetStmt,
    Max,
    Min,
    Mul,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Sub,
    Var,
)
from ...ir.expr import EQ, GE, GT, LE, LT, And, Or, Select, dtype_limit
from ...ir.functor import iter_exprs
from ...ir.reduce import is_identity, split_update, unlet_update
from ...ir.simplify import simplify, struct_key
from ..errors import ScheduleError

# ---------------------------------------------------------------------------
# errors


class UnrecognizedReducerError(ScheduleError):
    """``rfactor``: init and update match no registered reducer (``X[i] = identity`` and
    ``X[i] = X[i] op rhs`` with ``op`` one of ``+``, ``*``, ``min``, ``max``; or the
    two-buffer argmax / argmin / pair-sum forms). The subclasses below name the ways a
    two-buffer reduction block can be malformed."""


class ReducerInitNotStoresError(UnrecognizedReducerError):
    """``rfactor``: the init is not a store or a sequence of stores."""


class ReducerInitBufferRepeatedError(UnrecognizedReducerError):
    """``rfactor``: the init stores to the same buffer twice."""


class ReducerLetCountError(UnrecognizedReducerError):
    """``rfactor``: the update does not start with exactly one let-binding per init store."""


class ReducerLetVarRepeatedError(UnrecognizedReducerError):
    """``rfactor``: two let-bindings of the update bind the same variable."""


class ReducerUpdateNotStoreError(UnrecognizedReducerError):
    """``rfactor``: a statement after the update's let-bindings is not a buffer store."""


class ReducerStoreCountError(UnrecognizedReducerError):
    """``rfactor``: the update has a different number of stores than the init."""


class ReducerStoreValueNotLetError(UnrecognizedReducerError):
    """``rfactor``: an update store's value is not one of the let-bound variables."""


class ReducerLetStoredTwiceError(UnrecognizedReducerError):
    """``rfactor``: one let-bound variable is stored by several update stores."""


class ReducerBufferUpdatedTwiceError(UnrecognizedReducerError):
    """``rfactor``: the update stores to the same buffer several times."""


class ReducerInitUpdateMismatchError(UnrecognizedReducerError):
    """``rfactor``: the init writes a buffer that the update does not."""


class ReducerShapeMismatchError(UnrecognizedReducerError):
    """``rfactor``: the reduction buffers do not all have the same shape."""


class ReducerIndexMismatchError(UnrecognizedReducerError):
    """``rfactor``: the init and update stores do not all write the same indices."""


# ---------------------------------------------------------------------------
# the result


Combiner = Callable[[Sequence[PrimExpr], Sequence[PrimExpr]], tuple[PrimExpr, ...]]


@dataclass(frozen=True)
class Reducer:
    """A recognised reduction: ``stores`` are the update stores (buffer and indices,
    in the combiner's order), ``identities`` the init values, ``rhs`` the values
    combined into the buffers, ``combine(lhs, rhs)`` the combined values."""

    stores: tuple[BufferStore, ...]
    identities: tuple[PrimExpr, ...]
    rhs: tuple[PrimExpr, ...]
    combine: Combiner

    def update(self, stores: Sequence[BufferStore], lhs: Sequence[PrimExpr],
               rhs: Sequence[PrimExpr]) -> Stmt:
        """The update statement writing ``combine(lhs, rhs)`` to ``stores``' places:
        one store, or (several buffers) one let-binding ``v_<buffer>`` per value, then
        the stores, so that every value reads the buffers before any is written."""
        values = self.combine(lhs, rhs)
        if len(stores) == 1:
            return BufferStore(stores[0].buffer, values[0], stores[0].indices)
        lets = [Var(f"v_{s.buffer.name}", v.dtype) for s, v in zip(stores, values, strict=True)]
        body: Stmt = SeqStmt(tuple(
            BufferStore(s.buffer, v, s.indices) for s, v in zip(stores, lets, strict=True)
        ))
        for var, value in reversed(list(zip(lets, values, strict=True))):
            body = LetStmt(var, value, body)
        return body


# ---------------------------------------------------------------------------
# single-buffer reducers

def _single(func: PrimFunc, block, init: BufferStore, refuse) -> Reducer:
    body = unlet_update(block.body)
    if not isinstance(body, BufferStore):
        raise refuse(UnrecognizedReducerError, "the body is not a single store")
    if init.buffer is not body.buffer or [struct_key(i) for i in init.indices] != [
        struct_key(i) for i in body.indices
    ]:
        raise refuse(UnrecognizedReducerError, "init and update write different elements")
    split = split_update(body)
    if isinstance(split, str):
        why = {
            "op": f"the update {body.value} is not a commutative reduction",
            "operand": f"the update does not combine {body.buffer.name}[...] with a value",
            "rereads": f"the combined value reads {body.buffer.name} again",
        }[split]
        raise refuse(UnrecognizedReducerError, why)
    op, rhs = split
    if not is_identity(op, init.value):
        sym = {Add: "+", Mul: "*", Min: "min", Max: "max"}[op]
        raise refuse(UnrecognizedReducerError,
                     f"the init value {init.value} is not the identity of {sym}")
    return Reducer((body,), (init.value,), (rhs,), lambda lhs, r: (op(lhs[0], r[0]),))


# ---------------------------------------------------------------------------
# two-buffer reducers (TVM's registry, in its order)


def _sum2(x, y):
    return Add(x[0], y[0]), Add(x[1], y[1])


def _arg(cmp: type):
    def combine(x, y):
        c = cmp(x[1], y[1])
        return Select(c, x[0], y[0]), Select(c, x[1], y[1])

    return combine


def _arg_ties(cmp: type):
    def combine(x, y):
        first = Or(cmp(x[1], y[1]), And(EQ(x[1], y[1]), LT(x[0], y[0])))
        return Select(first, x[0], y[0]), Select(cmp(x[1], y[1]), x[1], y[1])

    return combine


def _zeros(dtypes):
    return _const(0, dtypes[0]), _const(0, dtypes[1])


def _index_and(which: str):
    return lambda dtypes: (_const(-1, dtypes[0]), dtype_limit(dtypes[1], which))


def _const(v: int, dtype: str) -> PrimExpr:
    return FloatImm(float(v), dtype) if dtype.startswith("float") else IntImm(v, dtype)


_PAIR_REDUCERS: tuple[tuple[str, Combiner, Callable], ...] = (
    ("sum", _sum2, _zeros),
    ("argmax", _arg(GE), _index_and("min")),
    ("argmax", _arg_ties(GT), _index_and("min")),
    ("argmin", _arg(LE), _index_and("max")),
    ("argmin", _arg_ties(LT), _index_and("max")),
)


def _match(pattern, expr, holes: set, bound: dict) -> bool:
    """Does ``expr`` have ``pattern``'s shape, ``holes`` (pattern variables) standing
    for any sub-expression (the same one at each occurrence)? Fills ``bound``."""
    if isinstance(pattern, Var) and pattern in holes:
        if pattern in bound:
            return struct_key(bound[pattern]) == struct_key(expr)
        bound[pattern] = expr
        return True
    if type(pattern) is not type(expr):
        return False
    if isinstance(pattern, BufferLoad):
        return pattern.buffer is expr.buffer and _match_all(
            pattern.indices, expr.indices, holes, bound)
    if isinstance(pattern, Var):
        return pattern is expr
    for f in fields(pattern):
        a, b = getattr(pattern, f.name), getattr(expr, f.name)
        if isinstance(a, PrimExpr):
            if not _match(a, b, holes, bound):
                return False
        elif isinstance(a, tuple):
            if not _match_all(a, b, holes, bound):
                return False
        elif a != b:
            return False
    return True


def _match_all(pats, exprs, holes, bound) -> bool:
    return len(pats) == len(exprs) and all(
        _match(p, e, holes, bound) if isinstance(p, PrimExpr) else p == e
        for p, e in zip(pats, exprs, strict=True)
    )


# ---------------------------------------------------------------------------
# recognition


def _flatten(s: Stmt | None) -> list:
    """TVM's flat statement list: a let-binding becomes ``(var, value)`` followed by
    its body's statements."""
    if s is None:
        return []
    if isinstance(s, SeqStmt):
        return [x for c in s.stmts for x in _flatten(c)]
    if isinstance(s, LetStmt):
        return [(s.var, s.value), *_flatten(s.body)]
    return [s]


def _equal(a, b) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    a = IntImm(a) if isinstance(a, int) else a
    b = IntImm(b) if isinstance(b, int) else b
    d = simplify(Sub(a, b))
    return isinstance(d, IntImm) and d.value == 0


def match_reducer(func: PrimFunc, block) -> Reducer:
    """The reducer that ``block`` (a reduction block) computes, or an
    :class:`UnrecognizedReducerError` (a subclass for a malformed two-buffer block).

    >>> import workbench as wb
    >>> from workbench.testing import matmul_func
    >>> from workbench.ir.analysis import iter_blocks
    >>> f = matmul_func(4, 4, 4)
    >>> c = next(b for b in iter_blocks(f.body) if b.name == "C")
    >>> [s.buffer.name for s in match_reducer(f, c).stores]
    ['C']
    """
    name = block.name

    def refuse(cls: type, why: str) -> UnrecognizedReducerError:
        return cls(
            "rfactor",
            f'block "{name}": {why}; rfactor needs init `X[idx] = identity` and update '
            "`X[idx] = X[idx] op rhs` (op one of +, *, min, max), or an argmax / argmin "
            "over two buffers",
            func,
            blocks=[name],
        )

    inits = _flatten(block.init)
    if not inits or not all(isinstance(s, BufferStore) for s in inits):
        raise refuse(ReducerInitNotStoresError, "the init is not a sequence of buffer stores")
    seen = set()
    for s in inits:
        if s.buffer in seen:
            raise refuse(ReducerInitBufferRepeatedError,
                         f"the init stores to {s.buffer.name} twice")
        seen.add(s.buffer)
    if len(inits) == 1:
        return _single(func, block, inits[0], refuse)
    return _pair(block, inits, refuse)


def _pair(block, inits: list[BufferStore], refuse) -> Reducer:
    n = len(inits)
    stmts = _flatten(block.body)
    lets: list[tuple[Var, PrimExpr]] = []
    for i in range(n):
        if i >= len(stmts) or not isinstance(stmts[i], tuple):
            raise refuse(ReducerLetCountError,
                         f"the init has {n} stores but the update does not start with {n} "
                         "let-bindings")
        if any(stmts[i][0] is v for v, _ in lets):
            raise refuse(ReducerLetVarRepeatedError,
                         f"the update binds {stmts[i][0].name} twice")
        lets.append(stmts[i])
    if len(stmts) > n and isinstance(stmts[n], tuple):
        raise refuse(ReducerLetCountError,
                     f"the update has more let-bindings than the {n} stores of the init")
    rest = stmts[n:]
    if len(rest) != n:
        raise refuse(ReducerStoreCountError,
                     f"the init has {n} stores but the update has {len(rest)} statements "
                     "after its let-bindings")
    updates: list[BufferStore | None] = [None] * n
    for s in rest:
        if not isinstance(s, BufferStore):
            raise refuse(ReducerUpdateNotStoreError,
                         f"the statement {s} after the let-bindings is not a buffer store")
        idx = next((i for i, (v, _) in enumerate(lets) if s.value is v), None)
        if idx is None:
            raise refuse(ReducerStoreValueNotLetError,
                         f"the store to {s.buffer.name} does not store a let-bound variable")
        if updates[idx] is not None:
            raise refuse(ReducerLetStoredTwiceError,
                         f"the let-bound {lets[idx][0].name} is stored twice")
        if any(u is not None and u.buffer is s.buffer for u in updates):
            raise refuse(ReducerBufferUpdatedTwiceError,
                         f"the update stores to {s.buffer.name} twice")
        updates[idx] = BufferStore(s.buffer, lets[idx][1], s.indices)
    ups: list[BufferStore] = updates  # type: ignore[assignment]
    shape, indices = ups[0].buffer.shape, ups[0].indices
    identities: list[PrimExpr | None] = [None] * n
    for init, up in zip(inits, ups, strict=True):
        if len(up.buffer.shape) != len(shape) or not all(
            _equal(a, b) for a, b in zip(up.buffer.shape, shape, strict=True)
        ):
            raise refuse(ReducerShapeMismatchError,
                         f"the buffers {ups[0].buffer.name} and {up.buffer.name} have "
                         "different shapes")
        for s in (init, up):
            if len(s.indices) != len(indices) or not all(
                _equal(a, b) for a, b in zip(s.indices, indices, strict=True)
            ):
                raise refuse(ReducerIndexMismatchError,
                             f"the stores to {ups[0].buffer.name} and {s.buffer.name} write "
                             "different indices")
        idx = next((i for i, u in enumerate(ups) if u.buffer is init.buffer), None)
        if idx is None:
            raise refuse(ReducerInitUpdateMismatchError,
                         f"the init writes {init.buffer.name}, which the update does not")
        identities[idx] = init.value
    return _match_pair(ups, identities, refuse)  # type: ignore[arg-type]


def _match_pair(ups: list[BufferStore], identities: list[PrimExpr], refuse) -> Reducer:
    values = [u.value for u in ups]
    dtypes = [v.dtype for v in values]
    loads = [BufferLoad(u.buffer, u.indices) for u in ups]
    x = [Var(f"x{i}", d) for i, d in enumerate(dtypes)]
    y = [Var(f"y{i}", d) for i, d in enumerate(dtypes)]
    holes = set(x) | set(y)
    for _name, combine, make_identities in _PAIR_REDUCERS:
        want = make_identities(dtypes)
        if [struct_key(a) for a in want] != [struct_key(b) for b in identities]:
            continue
        bound: dict = {}
        if not all(_match(p, v, holes, bound)
                   for p, v in zip(combine(x, y), values, strict=True)):
            continue
        if any(struct_key(bound[xi]) != struct_key(ld) for xi, ld in zip(x, loads, strict=True)):
            continue
        rhs = tuple(bound[yi] for yi in y)
        for r in rhs:
            hit = next((x.buffer.name for x in iter_exprs(r) if isinstance(x, BufferLoad)
                        and any(x.buffer is u.buffer for u in ups)), None)
            if hit is not None:
                # TVM accepts this; the rfactor block would read a buffer it no longer
                # updates, so we refuse
                raise refuse(UnrecognizedReducerError,
                             f"the combined value reads {hit} again")
        return Reducer(tuple(ups), tuple(identities), rhs, combine)
    shown = ", ".join(f"{u.buffer.name} = {u.value}" for u in ups)
    raise refuse(UnrecognizedReducerError,
                 f"the update ({shown}) with init values "
                 f"({', '.join(str(i) for i in identities)}) matches no registered reducer")
