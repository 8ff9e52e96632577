"""Index maps: a function from buffer (or iteration) indices to new indices, as TVM's
``tvm.tirx.IndexMap``.

An :class:`IndexMap` holds *initial indices* (variables) and *final indices*
(expressions of them)::

    lambda i, j: (i // 16, j // 16, i % 16, j % 16)

maps element ``[i, j]`` of a 128 x 128 buffer to element ``[i // 16, j // 16, i % 16,
j % 16]`` of an 8 x 8 x 16 x 16 one (``map_shape``). ``transform_layout`` relays a
buffer out with such a map; ``transform_block_layout`` re-indexes a block's iteration
space with one.

Three ways to make one:

* :meth:`IndexMap.from_func` calls a Python function written by the user with
  :class:`~workbench.ir.Var` arguments (expressions overload ``+ - * // %``);
* :meth:`IndexMap.parse` reads the text form ``"lambda i, j: (j, i)"`` with
  :mod:`ast`, never evaluating it: only names, numbers, ``+ - * // %``, ``min`` /
  ``max`` and TVM's typed constants (``T.int64(8)``) are accepted (this is what an
  editor's text box and a loaded trace hand over);
* :meth:`IndexMap.from_json` reads the JSON form TVM writes in a trace.

A map that is not onto its output shape leaves *padding*: ``lambda i: (i // 4, i % 4)``
over 14 elements has 16 slots, and :meth:`IndexMap.non_surjective_inverse` returns
the inverse together with the predicate true on the two padding slots::

    >>> m = IndexMap.parse("lambda i: (i // 4, i % 4)")
    >>> m.map_shape([14])
    [4, 4]
    >>> inv, pad = m.non_surjective_inverse([14])
    >>> inv, pad
    (IndexMap(lambda axis0, axis1: (axis0 * 4 + axis1,)), axis0 == 3 and 2 <= axis1)
"""

from __future__ import annotations

import ast
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .expr import (
    ALL_DTYPES,
    EQ,
    LE,
    LT,
    And,
    BinaryOp,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Or,
    PrimExpr,
    Sub,
    Var,
    const,
    is_float,
)
from .functor import iter_exprs, substitute
from .iter_map import detect_iter_map, inverse_iter_map
from .simplify import _build, _linear, int_range, simplify

__all__ = ["IndexMap", "IndexMapError"]

#: TVM's version string written in the JSON form (what TVM 0.27 writes).
TVM_VERSION = "0.27.0.post1"


class IndexMapError(ValueError):
    """An index map that cannot be read, or cannot be inverted over a shape."""


# ---------------------------------------------------------------------------
# the map


class IndexMap:
    """A map from initial indices (``Var``) to final indices (expressions of them).

    ``inverse_index_map`` is an optional inverse given by the user (trusted, as in TVM).

    >>> import workbench as wb
    >>> m = wb.IndexMap.from_func(lambda i, j: (i // 16, j // 16, i % 16, j % 16))
    >>> m
    IndexMap(lambda i, j: (i // 16, j // 16, i % 16, j % 16))
    >>> m.map_shape([128, 128])
    [8, 8, 16, 16]
    >>> m.map_indices([wb.ir.const(33), wb.ir.const(5)])
    [2, 0, 1, 5]
    """

    __slots__ = ("initial_indices", "final_indices", "inverse_index_map")

    def __init__(
        self,
        initial_indices: Sequence[Var],
        final_indices: Sequence[PrimExpr],
        inverse_index_map: IndexMap | Callable | None = None,
    ):
        if not all(isinstance(v, Var) for v in initial_indices):
            raise IndexMapError("the initial indices of an index map must be variables")
        if not all(isinstance(e, PrimExpr) for e in final_indices):
            raise IndexMapError("the final indices of an index map must be expressions")
        if inverse_index_map is not None and not isinstance(inverse_index_map, IndexMap):
            inverse_index_map = IndexMap.from_func(inverse_index_map)
        self.initial_indices: tuple[Var, ...] = tuple(initial_indices)
        self.final_indices: tuple[PrimExpr, ...] = tuple(final_indices)
        self.inverse_index_map: IndexMap | None = inverse_index_map

    # ------------------------------------------------------------------ making
    @staticmethod
    def from_func(
        mapping_function: Callable,
        ndim: int | None = None,
        inverse_index_map: IndexMap | Callable | None = None,
        *,
        index_dtype: str = "int32",
    ) -> IndexMap:
        """Call ``mapping_function`` with one :class:`Var` per index (named after its
        parameters) and take what it returns (an expression or a sequence of them;
        Python ints become constants) as the final indices.

        ``*args`` in the signature takes whatever dimensions the named parameters
        leave (``ndim`` must then be given): ``lambda *rest, k: (*rest, k // 4, k % 4)``
        splits the last dimension of a buffer of any rank. Keyword-only parameters
        come last, as in TVM.

        >>> IndexMap.from_func(lambda *rest, k: (*rest, k // 4, k % 4), ndim=3)
        IndexMap(lambda rest_0, rest_1, k: (rest_0, rest_1, k // 4, k % 4))
        """
        if isinstance(mapping_function, IndexMap):
            return mapping_function
        if isinstance(mapping_function, str):
            return IndexMap.parse(mapping_function, ndim=ndim, index_dtype=index_dtype)
        if not callable(mapping_function):
            raise IndexMapError(
                f"an index map must be a callable, a lambda text or an IndexMap, got "
                f"{mapping_function!r}"
            )
        try:
            params = inspect.signature(mapping_function).parameters
        except (TypeError, ValueError) as e:
            raise IndexMapError(
                f"cannot read the parameters of {mapping_function!r}: {e}"
            ) from None
        names, var_arg, kw_names = [], None, []
        for name, p in params.items():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(name)
            elif p.kind == p.VAR_POSITIONAL:
                var_arg = name
            elif p.kind == p.KEYWORD_ONLY:
                kw_names.append(name)
            else:
                raise IndexMapError("an index map function may not take **kwargs")
        args = [Var(n, index_dtype) for n in names]
        kwargs = {n: Var(n, index_dtype) for n in kw_names}
        if var_arg is not None:
            if ndim is None:
                raise IndexMapError(f"ndim must be given when the index map takes *{var_arg}")
            extra = ndim - len(args) - len(kwargs)
            if extra < 0:
                raise IndexMapError(
                    f"the index map takes {len(args) + len(kwargs)} indices, more than ndim={ndim}"
                )
            args += [Var(f"{var_arg}_{k}", index_dtype) for k in range(extra)]
        result = mapping_function(*args, **kwargs)
        finals = _as_final_indices(result, index_dtype)
        return IndexMap(args + list(kwargs.values()), finals, inverse_index_map)

    @staticmethod
    def parse(
        text: str,
        *,
        ndim: int | None = None,
        index_dtype: str = "int32",
        variables: Mapping[str, PrimExpr] | None = None,
    ) -> IndexMap:
        """Read ``"lambda i, j: (i // 16, j // 16, i % 16, j % 16)"`` without running it.

        Accepted: the lambda's parameters (``*rest`` too, with ``ndim``), names given in
        ``variables`` (shape variables, sampled values), int and float literals,
        ``+ - * // %``, unary minus, ``min(a, b)`` / ``max(a, b)`` (``T.min`` /
        ``T.max``), TVM's typed constants ``T.int64(8)`` / ``T.float32(0.5)`` and
        ``T.Cast("int64", x)``, and a tuple or list of results. Anything else raises
        :class:`IndexMapError` naming the line and column.

        >>> IndexMap.parse("lambda i, j: (j, i)").map_shape([3, 5])
        [5, 3]
        >>> try:
        ...     IndexMap.parse("lambda i: __import__('os').getcwd()")
        ... except IndexMapError as e:
        ...     print(str(e)[:40])
        index map text, line 1, column 10: calls
        """
        return _parse_lambda(text, ndim, index_dtype, dict(variables or {}))

    # ------------------------------------------------------------------ using
    @property
    def ndim(self) -> int:
        """Number of initial indices."""
        return len(self.initial_indices)

    def map_indices(
        self, indices: Sequence[PrimExpr | int], bounds: Mapping | None = None
    ) -> list[PrimExpr]:
        """The final indices with the initial ones replaced by ``indices`` (simplified,
        with the variables' inclusive ``bounds`` when given)."""
        if len(indices) != self.ndim:
            raise IndexMapError(
                f"the index map {self} takes {self.ndim} indices, got {len(indices)}"
            )
        mapping = {}
        for v, x in zip(self.initial_indices, indices, strict=True):
            if not isinstance(x, PrimExpr):
                x = const(int(x), v.dtype)
            mapping[v] = _cast_to(x, v.dtype)
        return [simplify(_legalize(substitute(e, mapping)), bounds) for e in self.final_indices]

    def map_shape(self, shape: Sequence[Any]) -> list[Any]:
        """The shape after the map: each final index's extent as the initial indices
        run over ``shape`` (ints when static). The padding the map introduces is
        included (``i -> (i // 4, i % 4)`` over 14 gives ``[4, 4]``)."""
        if len(shape) != self.ndim:
            raise IndexMapError(f"the index map {self} takes {self.ndim} indices, got shape "
                                f"{list(shape)}")
        dims = [_as_extent(d) for d in shape]
        if all(isinstance(d, int) for d in dims):
            bounds = {v: (0, d - 1) for v, d in zip(self.initial_indices, dims, strict=True)}
            out = []
            for e in self.final_indices:
                lo, hi = int_range(simplify(e, bounds), bounds)
                if lo is None or hi is None or lo < 0:
                    raise IndexMapError(
                        f"cannot bound the final index {e} of {self} over shape {dims}"
                    )
                out.append(hi + 1)
            return out
        return [_symbolic_extent(e, self.initial_indices, dims, self) for e in self.final_indices]

    def inverse(self, shape: Sequence[Any]) -> IndexMap:
        """The inverse map over ``shape``; the map must be a bijection of that shape
        onto its :meth:`map_shape` (no padding), else :class:`IndexMapError`.

        >>> IndexMap.parse("lambda i, j: (i * 16 + j,)").inverse([16, 16])
        IndexMap(lambda axis0: (axis0 // 16, axis0 % 16))
        """
        return _inverse(self, shape, allow_padding=False)[0]

    def non_surjective_inverse(self, shape: Sequence[Any]) -> tuple[IndexMap, PrimExpr]:
        """The inverse map and the padding predicate: an expression of the inverse's
        variables, true where an output index has no preimage in ``shape``
        (``False`` when the map is onto its output shape)."""
        return _inverse(self, shape, allow_padding=True)

    def is_equivalent_to(self, other: IndexMap) -> bool:
        """Do both maps send every index to the same place (same arity, final indices
        equal once simplified)?

        >>> a = IndexMap.parse("lambda i: (i // 4, i % 4)")
        >>> a.is_equivalent_to(IndexMap.parse("lambda x: ((x + 4) // 4 - 1, x % 4)"))
        True
        """
        if not isinstance(other, IndexMap):
            return False
        if self.ndim != other.ndim or len(self.final_indices) != len(other.final_indices):
            return False
        from .analysis import structural_equal

        theirs = other.map_indices(list(self.initial_indices))
        for a, b in zip(self.final_indices, theirs, strict=True):
            if is_float(a.dtype) or is_float(b.dtype):
                if not structural_equal(simplify(a), b):
                    return False
                continue
            diff = simplify(_legalize(a - b))
            if not (isinstance(diff, IntImm) and diff.value == 0):
                return False
        return True

    def with_index_dtype(self, dtype: str, results: bool = True) -> IndexMap:
        """The same map over initial indices of integer type ``dtype`` (TVM legalises a
        map's dtype to the buffer's index type before using it); with ``results=False``
        integer constants among the results keep their dtype (a pad value's map)."""
        if all(v.dtype == dtype for v in self.initial_indices):
            return self
        new_vars = [Var(v.name, dtype) for v in self.initial_indices]
        mapping = dict(zip(self.initial_indices, new_vars, strict=True))
        finals = []
        for e in self.final_indices:
            if not results:
                finals.append(_legalize(substitute(e, mapping)))
            elif isinstance(e, IntImm) and not is_float(e.dtype) and e.dtype != "bool":
                finals.append(IntImm(e.value, dtype))
            elif e.dtype in ("int32", "int64"):
                finals.append(_legalize(substitute(e, mapping), dtype))
            else:
                finals.append(_legalize(substitute(e, mapping)))
        return IndexMap(new_vars, finals, self.inverse_index_map)

    # ------------------------------------------------------------------ text
    def script(self, trailing_comma: bool = False) -> str:
        """The map as a lambda (``trailing_comma=True``: as TVM's ``as_python`` prints
        it, every result followed by a comma)."""
        from .printer import expr_to_str

        params = ", ".join(v.name for v in self.initial_indices)
        items = [expr_to_str(e) for e in self.final_indices]
        if trailing_comma:
            body = "(" + " ".join(x + "," for x in items) + ")"
        else:
            body = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return f"lambda {params}: {body}"

    def as_python(self) -> str:
        """TVM's ``IndexMap.ToPythonString``: the text a TVM trace prints."""
        text = self.script(trailing_comma=True)
        if self.inverse_index_map is None:
            return text
        inv = self.inverse_index_map.script(trailing_comma=True)
        return f"tvm.tirx.IndexMap.from_func({text}, inverse_index_map={inv})"

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"IndexMap({self.script()})"

    # ------------------------------------------------------------------ JSON
    def to_json(self, indent: int | None = None) -> str:
        """TVM's JSON form of the map (``tvm.ir.save_json``: a node graph). TVM writes
        an index map *input* of a trace instruction compactly and an *attribute* with
        ``indent=2``; both read back with :meth:`from_json`."""
        from .index_map_json import GraphWriter

        graph = GraphWriter()
        root = graph.index_map(self)
        data = {"root_index": root, "nodes": graph.nodes,
                "metadata": {"tvm_version": TVM_VERSION}}
        if indent is None:
            return json.dumps(data, separators=(",", ":"))
        return json.dumps(data, indent=indent)

    @staticmethod
    def from_json(text: str | Mapping) -> IndexMap:
        """Read TVM's JSON form of an index map (see :meth:`to_json`). Raises
        :class:`IndexMapError` on anything that is not one."""
        from .index_map_json import read_graph

        return read_graph(text)


# ---------------------------------------------------------------------------
# helpers: results, dtypes, extents


def _as_final_indices(result: Any, dtype: str) -> list[PrimExpr]:
    items = [result] if isinstance(result, (PrimExpr, int, float)) else result
    try:
        items = list(items)
    except TypeError:
        raise IndexMapError(
            f"an index map must return an expression or a sequence of them, got {result!r}"
        ) from None
    out = []
    for x in items:
        if isinstance(x, bool):
            raise IndexMapError(f"an index map result must be an expression, got {x!r}")
        if isinstance(x, int):
            out.append(const(x, dtype))
        elif isinstance(x, float):
            out.append(const(x, "float32"))
        elif isinstance(x, PrimExpr):
            out.append(x)
        else:
            # a shim's typed number (an int or float subclass) or anything else
            raise IndexMapError(
                f"an index map result must be an expression, got {x!r} "
                f"({type(x).__name__})"
            )
    return out


def _cast_to(x: PrimExpr, dtype: str) -> PrimExpr:
    if x.dtype == dtype or is_float(x.dtype):
        return x
    if isinstance(x, IntImm):
        return IntImm(x.value, dtype)
    return x


def _legalize(e: PrimExpr, dtype: str | None = None) -> PrimExpr:
    """Rebuild integer arithmetic whose operands' dtypes differ (int32 constants next
    to int64 variables after a substitution) in the wider (or given) dtype."""
    if isinstance(e, BinaryOp):
        a, b = _legalize(e.a, dtype), _legalize(e.b, dtype)
        ints = ("int32", "int64")
        if a.dtype in ints and b.dtype in ints:
            want = dtype or ("int64" if "int64" in (a.dtype, b.dtype) else a.dtype)
            a, b = _retype(a, want), _retype(b, want)
        if a is e.a and b is e.b:
            return e
        return type(e)(a, b)
    if isinstance(e, IntImm) and dtype and e.dtype in ("int32", "int64"):
        return IntImm(e.value, dtype)
    return e


def _retype(e: PrimExpr, dtype: str) -> PrimExpr:
    if e.dtype == dtype:
        return e
    if isinstance(e, IntImm):
        return IntImm(e.value, dtype)
    return Cast(dtype, e)


def _as_extent(d: Any) -> Any:
    if isinstance(d, IntImm):
        return int(d.value)
    if isinstance(d, PrimExpr):
        return d
    return int(d)


def _symbolic_extent(e: PrimExpr, vars_: Sequence[Var], dims: list, m: IndexMap) -> PrimExpr:
    """The extent of ``e`` when some dims are symbolic: ``e`` must be a sum of
    non-negative multiples of products of one variable and shape variables, so its
    maximum is at every variable's last value."""
    terms, cst = _linear(simplify(e))
    if cst < 0 or any(k < 0 for _, k in terms):
        raise IndexMapError(f"cannot bound the final index {e} of {m} over shape {dims}")
    for t, _ in terms:
        for x in iter_exprs(t):
            if isinstance(x, (FloorDiv, FloorMod, Sub, Div, Min, Max)):
                raise IndexMapError(f"cannot bound the final index {e} of {m} over shape {dims}")
    last = {}
    for v, d in zip(vars_, dims, strict=True):
        last[v] = IntImm(d - 1, v.dtype) if isinstance(d, int) else d - 1
    return simplify(substitute(e, last) + 1)


# ---------------------------------------------------------------------------
# inverse


def _inverse(self: IndexMap, shape: Sequence[Any], allow_padding: bool):
    if self.inverse_index_map is not None:
        return self.inverse_index_map, const(False)
    dims = [_as_extent(d) for d in shape]
    if len(dims) != self.ndim:
        raise IndexMapError(f"the index map {self} takes {self.ndim} indices, got shape {dims}")
    if not all(isinstance(d, int) for d in dims):
        raise IndexMapError(f"cannot invert {self} over the symbolic shape {dims}")
    outputs = []
    for k, e in enumerate(self.final_indices):
        name = e.name if isinstance(e, Var) else f"axis{k}"
        outputs.append(Var(name, e.dtype if not is_float(e.dtype) else "int32"))
    iters = dict(zip(self.initial_indices, dims, strict=True))
    out_dims = self.map_shape(dims)
    out_bounds = {v: (0, d - 1) for v, d in zip(outputs, out_dims, strict=True)}
    m = detect_iter_map(list(self.final_indices), iters, bijective=True)
    if m is not None:
        inv = inverse_iter_map(m, outputs, out_bounds)
        if inv is not None:
            _keep_unit_indices(self, dims, outputs, inv)
            finals = [_tvm_pieces(inv.get(v, const(0, v.dtype))) for v in self.initial_indices]
            return IndexMap(outputs, [_retype(f, v.dtype) for f, v in
                                      zip(finals, self.initial_indices, strict=True)]), const(False)
    if not allow_padding:
        raise IndexMapError(
            f"the index map {self} is not a bijective affine map over shape {dims}"
        )
    padded = _padded(self, dims)
    if padded is None:
        raise IndexMapError(f"the index map {self} is not an affine map over shape {dims}")
    shifts, pdims, shifted_finals = padded
    m = detect_iter_map(shifted_finals, dict(zip(self.initial_indices, pdims, strict=True)),
                        bijective=True)
    inv = inverse_iter_map(m, outputs, out_bounds) if m is not None else None
    if inv is None:
        raise IndexMapError(f"the index map {self} is not an affine map over shape {dims}")
    finals, preds = [], []
    for v, d, lo, pd in zip(self.initial_indices, dims, shifts, pdims, strict=True):
        x = inv.get(v, const(0, v.dtype))  # the shifted index v + lo
        finals.append(_tvm_pieces(simplify(x - lo, out_bounds) if lo else x))
        if lo:
            preds.append(_cmp_pred(x, lo, below=True, bounds=out_bounds))
        if pd - lo > d:
            preds.append(_cmp_pred(x, d + lo, below=False, bounds=out_bounds))
    pred: PrimExpr = const(False)
    for p in preds:
        if isinstance(p, IntImm) and not p.value:
            continue
        pred = p if isinstance(pred, IntImm) and not pred.value else Or(pred, p)
    return IndexMap(outputs, finals), pred


def _keep_unit_indices(m: IndexMap, dims: list[int], outputs: list[Var], inv: dict) -> None:
    """An initial index of extent 1 passed through to an output reads that output
    (TVM keeps such trivial iterators), not the constant 0."""
    for v, d in zip(m.initial_indices, dims, strict=True):
        if d == 1 and v not in inv:
            for e, out in zip(m.final_indices, outputs, strict=True):
                if e is v:
                    inv[v] = out
                    break


def _tvm_pieces(e: PrimExpr) -> PrimExpr:
    """Write each middle digit ``x // a % b`` as ``x % (a * b) // a``, the form TVM's
    inverse takes (``v2 % 21 // 3``)."""
    if isinstance(e, FloorMod) and isinstance(e.b, IntImm) and isinstance(e.a, FloorDiv) and (
        isinstance(e.a.b, IntImm)
    ):
        a, b = e.a.b.value, e.b.value
        return FloorDiv(FloorMod(_tvm_pieces(e.a.a), IntImm(a * b, e.dtype)), e.a.b)
    if isinstance(e, BinaryOp):
        x, y = _tvm_pieces(e.a), _tvm_pieces(e.b)
        return e if x is e.a and y is e.b else type(e)(x, y)
    return e


def _padded(m: IndexMap, dims: list[int]):
    """Padded extents (and left shifts) per initial index that make ``m`` a bijection:
    each index that a constant ``//`` or ``%`` splits (as the leading term of the
    split expression) is padded to a whole number of periods; an offset ``i + b``
    shifts it."""
    shifts, pdims = [], []
    for v, d in zip(m.initial_indices, dims, strict=True):
        period, offset = 1, None
        for e in m.final_indices:
            for sub in iter_exprs(e):
                if not (isinstance(sub, (FloorDiv, FloorMod)) and isinstance(sub.b, IntImm)
                        and sub.b.value > 0):
                    continue
                terms, cst = _linear(sub.a)
                coeffs = {id(t): k for t, k in terms if isinstance(t, Var)}
                if id(v) not in coeffs:
                    continue
                k = coeffs[id(v)]
                if k <= 0 or k != max(abs(c) for _, c in terms):
                    continue  # only the leading (outermost) index of a fused split pads
                c = sub.b.value
                per = c // math.gcd(k, c)
                period = period * per // math.gcd(period, per)
                if cst % k == 0:
                    b = (cst // k) % per
                    offset = b if offset is None else offset
        lo = offset or 0
        if d == 1:
            lo, padded = 0, 1
        else:
            padded = -(-(d + lo) // period) * period
        shifts.append(lo)
        pdims.append(padded)
    if all(lo == 0 for lo in shifts) and pdims == dims:
        return None
    mapping = {v: v - lo for v, lo in zip(m.initial_indices, shifts, strict=True) if lo}
    finals = [substitute(e, mapping) if mapping else e for e in m.final_indices]
    return shifts, pdims, finals


def _cmp_pred(x: PrimExpr, bound: int, below: bool, bounds: Mapping) -> PrimExpr:
    """``x < bound`` (``below``) or ``x >= bound`` for a mixed-radix sum ``x`` of the
    inverse's variables, written digit by digit as TVM simplifies it:
    ``axis0 * 4 + axis1 >= 14`` is ``axis0 == 3 and 2 <= axis1``."""
    x = simplify(x, bounds)
    terms, cst = _linear(x)
    bound -= cst
    terms = sorted(terms, key=lambda t: -t[1])
    return _digits(terms, bound, below, bounds, x.dtype)


def _digits(terms, bound: int, below: bool, bounds, dtype: str) -> PrimExpr:
    if not terms:
        return const((0 < bound) if below else (0 >= bound))
    (t, k), rest = terms[0], terms[1:]
    lo, hi = int_range(t, bounds)
    rest_lo, rest_hi = (0, 0)
    if rest:

        rest_lo, rest_hi = int_range(_build(rest, 0, dtype), bounds)
    if k <= 0 or lo is None or hi is None or rest_lo is None or rest_hi is None or (
        rest_lo < 0 or rest_hi >= k
    ):
        # not a mixed-radix sum: leave the comparison as it is
        e = _build(terms, 0, dtype)
        return simplify(LT(e, IntImm(bound, dtype)) if below else LE(IntImm(bound, dtype), e),
                        bounds)
    q, r = divmod(bound, k)
    if not rest:
        if k != 1:
            t = t * k
            q, r = bound, 0
        if below:
            return _simple(LT(t, IntImm(q, dtype)), bounds)
        return _simple(LE(IntImm(q, dtype), t), bounds)
    if r == 0:
        return _simple(LT(t, IntImm(q, dtype)) if below else LE(IntImm(q, dtype), t), bounds)
    head_strict = LT(t, IntImm(q, dtype)) if below else LT(IntImm(q, dtype), t)
    head_strict = _simple(head_strict, bounds)
    tail = _digits(rest, r, below, bounds, dtype)
    same = _simple(EQ(t, IntImm(q, dtype)), bounds)
    both = tail if isinstance(same, IntImm) and same.value else (
        same if isinstance(same, IntImm) else And(same, tail))
    if isinstance(tail, IntImm) and not tail.value:
        both = const(False)
    if isinstance(head_strict, IntImm):
        return both if not head_strict.value else const(True)
    if isinstance(both, IntImm):
        return head_strict if not both.value else const(True)
    return Or(head_strict, both)


def _simple(c: PrimExpr, bounds) -> PrimExpr:
    """Fold a comparison that the bounds decide; ``q <= x // c`` becomes ``q * c <= x``."""
    folded = simplify(c, bounds)
    if isinstance(folded, IntImm):
        return folded
    if isinstance(c, LE) and isinstance(c.a, IntImm) and isinstance(c.b, FloorDiv) and (
        isinstance(c.b.b, IntImm)
    ):
        return LE(IntImm(c.a.value * c.b.b.value, c.a.dtype), c.b.a)
    if isinstance(c, LT) and isinstance(c.b, IntImm) and isinstance(c.a, FloorDiv) and (
        isinstance(c.a.b, IntImm)
    ):
        return LT(c.a.a, IntImm(c.b.value * c.a.b.value, c.b.dtype))
    return c


# ---------------------------------------------------------------------------
# parsing the lambda text (never evaluated)

_BINOPS: dict[type, Callable[[PrimExpr, PrimExpr], PrimExpr]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


def _parse_lambda(text: str, ndim: int | None, dtype: str, variables: dict) -> IndexMap:
    if not isinstance(text, str):
        raise IndexMapError(f"index map text must be a string, got {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise IndexMapError(
            f"index map text, line {e.lineno}, column {e.offset}: not valid Python ({e.msg})"
        ) from None
    node = tree.body
    if not isinstance(node, ast.Lambda):
        raise _err(node, "expected `lambda <indices>: (<results>)`")
    a = node.args
    if a.kwarg or a.defaults or a.kw_defaults and any(d is not None for d in a.kw_defaults):
        raise _err(node, "the lambda may only take plain index names (and *rest)")
    names = [x.arg for x in a.posonlyargs + a.args]
    kw = [x.arg for x in a.kwonlyargs]
    params = [Var(n, dtype) for n in names]
    rest: list[Var] = []
    if a.vararg is not None:
        if ndim is None:
            raise _err(node, f"ndim must be given when the lambda takes *{a.vararg.arg}")
        extra = ndim - len(names) - len(kw)
        if extra < 0:
            raise _err(node, f"the lambda takes more than ndim={ndim} indices")
        rest = [Var(f"{a.vararg.arg}_{k}", dtype) for k in range(extra)]
    kw_vars = [Var(n, dtype) for n in kw]
    if len(set(names + kw + ([a.vararg.arg] if a.vararg else []))) != len(
        names + kw + ([a.vararg.arg] if a.vararg else [])
    ):
        raise _err(node, "the lambda's parameter names must differ")
    scope: dict[str, Any] = dict(variables)
    scope.update({n: v for n, v in zip(names, params, strict=True)})
    scope.update({n: v for n, v in zip(kw, kw_vars, strict=True)})
    if a.vararg is not None:
        scope[a.vararg.arg] = rest
    body = node.body
    if isinstance(body, (ast.Tuple, ast.List)):
        finals: list[PrimExpr] = []
        for elt in body.elts:
            if isinstance(elt, ast.Starred):
                if not (isinstance(elt.value, ast.Name) and a.vararg is not None
                        and elt.value.id == a.vararg.arg):
                    raise _err(elt, "only the lambda's own *rest may be unpacked")
                finals.extend(rest)
            else:
                finals.append(_expr(elt, scope, dtype))
    else:
        finals = [_expr(body, scope, dtype)]
    return IndexMap(params + rest + kw_vars, finals)


def _err(node: ast.AST, msg: str) -> IndexMapError:
    line = getattr(node, "lineno", 1)
    col = getattr(node, "col_offset", 0)
    try:
        src = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every parsed node
        src = type(node).__name__
    if len(src) > 60:
        src = src[:57] + "..."
    return IndexMapError(f"index map text, line {line}, column {col}: {msg} (`{src}`)")


def _number(node: ast.AST) -> int | float | None:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _number(node.operand)
        if v is not None:
            return -v if isinstance(node.op, ast.USub) else v
    return None


def _expr(node: ast.AST, scope: dict, dtype: str) -> PrimExpr:
    if isinstance(node, ast.Constant):
        if type(node.value) is int:
            return const(node.value, dtype)
        if type(node.value) is float:
            return const(node.value, "float32")
        raise _err(node, "only int and float constants are allowed")
    if isinstance(node, ast.Name):
        v = scope.get(node.id)
        if v is None or isinstance(v, list):
            raise _err(node, f"unknown name {node.id!r}")
        return v
    if isinstance(node, ast.BinOp):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise _err(node, "only + - * // % are allowed")
        a, b = _expr(node.left, scope, dtype), _expr(node.right, scope, dtype)
        a, b = _unify(a, b)
        return op(a, b)
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.USub):
            return -_expr(node.operand, scope, dtype)
        if isinstance(node.op, ast.UAdd):
            return _expr(node.operand, scope, dtype)
        raise _err(node, "only unary minus is allowed")
    if isinstance(node, ast.Call):
        return _call(node, scope, dtype)
    if isinstance(node, ast.Attribute):
        raise _err(node, "attribute access is not allowed")
    raise _err(node, f"{type(node).__name__} is not allowed in an index map")


def _unify(a: PrimExpr, b: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
    ints = ("int32", "int64")
    if a.dtype in ints and b.dtype in ints and a.dtype != b.dtype:
        if isinstance(a, IntImm):
            return IntImm(a.value, b.dtype), b
        if isinstance(b, IntImm):
            return a, IntImm(b.value, a.dtype)
    return a, b


def _call(node: ast.Call, scope: dict, dtype: str) -> PrimExpr:
    f = node.func
    if isinstance(f, ast.Name):
        name = f.id
    elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "T":
        name = "T." + f.attr
    else:
        raise _err(node, "calls other than min/max and T.<dtype>(...) are not allowed")
    if node.keywords:
        raise _err(node, "keyword arguments are not allowed")
    args = node.args
    if name in ("min", "max", "T.min", "T.max", "T.floordiv", "T.floormod"):
        if len(args) != 2:
            raise _err(node, f"{name} takes two arguments")
        a, b = _unify(_expr(args[0], scope, dtype), _expr(args[1], scope, dtype))
        from .expr import maximum, minimum

        return {"min": minimum, "T.min": minimum, "max": maximum, "T.max": maximum,
                "T.floordiv": lambda x, y: x // y, "T.floormod": lambda x, y: x % y}[name](a, b)
    if name.startswith("T.") and name[2:] in ALL_DTYPES:
        value = _number(args[0]) if len(args) == 1 else None
        if value is None:
            raise _err(node, f"{name} takes one number")
        try:
            return const(value, name[2:])
        except TypeError as e:
            raise _err(node, str(e)) from None
    if name == "T.Cast":
        if len(args) != 2 or not (isinstance(args[0], ast.Constant)
                                  and args[0].value in ALL_DTYPES):
            raise _err(node, 'T.Cast takes a dtype string and an expression')
        return _retype(_expr(args[1], scope, dtype), args[0].value)
    raise _err(node, "calls other than min/max and T.<dtype>(...) are not allowed")
