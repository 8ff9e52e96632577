"""Specialize a function with symbolic shapes to concrete sizes (TVM's
``PrimFunc.specialize``): every shape variable becomes a constant, in buffer shapes,
loop and iter-var extents, indices and predicates, so the result is a static function.

>>> import workbench as wb
>>> from workbench.ir import Block, Buffer, BufferStore, For, IterVar, PrimFunc, Var
>>> n, i, vi = Var("n"), Var("i"), Var("vi")
>>> A, B = Buffer("A", (n,)), Buffer("B", (n,))
>>> body = For(i, n, "serial", Block("B", (IterVar(vi, n),), (i,),
...     BufferStore(B, A[vi] * 2.0, (vi,))))
>>> f = PrimFunc("f", (A, B), Block("root", (), (), body))
>>> g = specialize(f, {"n": 6})
>>> g.params[0].shape, g.body.body.extent
((6,), 6)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ..buffer import Buffer, MatchBufferRegion
from ..expr import IntImm, PrimExpr, Var
from ..functor import Substituter
from ..simplify import simplify
from ..stmt import Block, IterVar, PrimFunc

__all__ = ["specialize", "shape_values"]


class _Specializer(Substituter):
    """A :class:`Substituter` that also rewrites buffer shapes (each buffer once)."""

    def __init__(self, mapping: dict[Var, PrimExpr]):
        super().__init__(mapping)
        self.buffers: dict[Buffer, Buffer] = {}

    def visit_buffer(self, b: Buffer) -> Buffer:
        if b.is_static:
            return b
        new = self.buffers.get(b)
        if new is None:
            shape = tuple(
                simplify(self.visit_expr(d)) if isinstance(d, PrimExpr) else d for d in b.shape
            )
            new = b.with_(shape=shape)
            self.buffers[b] = new
        return new

    def visit_match_buffer(self, m: MatchBufferRegion) -> MatchBufferRegion:
        out = super().visit_match_buffer(m)
        view = self.visit_buffer(m.buffer)
        if view is m.buffer:
            return out
        return MatchBufferRegion(view, out.source, out.offset_factor)

    def visit_block(self, b: Block) -> Block:
        out = super().visit_block(b)
        ivs = tuple(
            IterVar(iv.var, simplify(self.visit_expr(iv.extent)), iv.kind)
            if isinstance(iv.extent, PrimExpr)
            else iv
            for iv in b.iter_vars
        )
        if all(x is y for x, y in zip(ivs, b.iter_vars, strict=True)):
            return out
        return replace(out, iter_vars=ivs)


def specialize(func: PrimFunc, values: Mapping[Var | str, int]) -> PrimFunc:
    """``func`` with its shape variables replaced by the given ints (by ``Var`` or by
    name); variables not given stay symbolic. Raises ``KeyError`` for a name that is no
    shape variable and ``ValueError`` for a non-positive size."""
    by_name = {v.name: v for v in func.shape_vars}
    mapping: dict[Var, PrimExpr] = {}
    for key, value in values.items():
        var = key if isinstance(key, Var) else by_name.get(key)
        if var is None:
            raise KeyError(
                f"specialize: {func.name!r} has no shape variable {key!r}; it has "
                f"{sorted(by_name)}"
            )
        if int(value) <= 0:
            raise ValueError(f"specialize: shape variable {var.name!r} must be positive")
        mapping[var] = IntImm(int(value), var.dtype)
    if not mapping:
        return func
    sp = _Specializer(mapping)
    params = tuple(sp.visit_buffer(p) for p in func.params)
    body = sp.visit_block(func.body)
    return replace(func, params=params, body=body)


def shape_values(func: PrimFunc, shapes: Mapping[str, tuple[int, ...]]) -> dict[Var, int]:
    """Values of ``func``'s shape variables read from parameter shapes (by parameter
    name), e.g. ``{"A": (37, 128)}`` gives ``{n: 37}`` for ``A`` of shape ``(n, 128)``.
    Only dimensions that are a bare variable bind it; raises ``ValueError`` when two
    arrays disagree or a variable is bound by no dimension."""
    out: dict[Var, int] = {}
    for p in func.params:
        shape = shapes.get(p.name)
        if shape is None:
            continue
        for dim, got in zip(p.shape, shape, strict=False):
            if isinstance(dim, Var):
                if dim in out and out[dim] != got:
                    raise ValueError(
                        f"shape variable {dim.name!r} is {out[dim]} from one array and "
                        f"{got} from {p.name!r}"
                    )
                out[dim] = int(got)
    missing = [v.name for v in func.shape_vars if v not in out]
    if missing:
        raise ValueError(
            f"{func.name!r}: shape variables {missing} appear in no dimension of their own"
        )
    return out
