"""Loop transformations: split, fuse, reorder.

Each primitive is a pure function ``(func, ...) -> (new_func, ...)`` that checks
first and transforms second; a refusal raises a :class:`ScheduleError` and the
input function is untouched.

split, before and after ``split(j, factors=[None, 4])``::

    for i, j in T.grid(128, 128):          for i, j_0, j_1 in T.grid(128, 32, 4):
        with T.block("C"):                     with T.block("C"):
            vi, vj = T.axis.remap(...)             vi = T.axis.spatial(128, i)
                                                   vj = T.axis.spatial(128, j_0 * 4 + j_1)
"""

from __future__ import annotations

from ...ir import Block, For, PrimExpr, PrimFunc, Stmt, Var
from ...ir.expr import LT, const
from ...ir.functor import iter_stmts, uses_var
from ...ir.simplify import add, floordiv, floormod, mul
from ..errors import (
    BoundLoopError,
    DuplicateLoopError,
    InvalidFactorsError,
    LoopsNotInChainError,
    LoopsNotNestedError,
    NotSingleChildError,
    ScheduleError,
    WrongFactorProductError,
)
from ._common import (
    BindingRewriter,
    child_block_names,
    find_loop_path,
    find_loop_paths,
    fresh_name,
    loop_bounds,
    names_in_scope,
    replace_path,
)


class MixedIterTypeLoopError(ScheduleError):
    """A loop drives both a spatial and a reduction iter var of one block; moving it
    would let a reduction step run before that element's initialisation."""


def _mixed_iter_block(loop: For) -> tuple[str, str, str] | None:
    """(block, spatial var, reduction var) if ``loop`` feeds both kinds in one block."""
    for s in iter_stmts(loop.body, enter_blocks=False):
        if isinstance(s, Block):
            kinds = {}
            for iv, value in zip(s.iter_vars, s.iter_values, strict=True):
                if uses_var(value, loop.loop_var):
                    kinds.setdefault(iv.kind, iv.var.name)
            if "S" in kinds and "R" in kinds:
                return s.name, kinds["S"], kinds["R"]
    return None


def _check_unbound(primitive: str, func: PrimFunc, loop: For) -> None:
    if loop.kind == "thread_binding":
        raise BoundLoopError(
            primitive,
            f'loop "{loop.loop_var.name}" is bound to {loop.thread_tag}; '
            f"{primitive} works on unbound loops only",
            func,
            loops=[loop.loop_var],
        )


def split(
    func: PrimFunc,
    loop_var: Var,
    factors: list[int | None],
    preserve_unit_iters: bool = True,
    disable_predication: bool = False,
) -> tuple[PrimFunc, list[Var]]:
    """Split a loop into ``len(factors)`` nested loops (outermost first).

    At most one factor may be ``None`` (inferred as ``ceil(extent / product)``).
    When the product exceeds the extent, blocks under the loop get the predicate
    ``fused < extent`` (unless ``disable_predication``), as in TVM.
    """
    path = find_loop_path(func, "split", loop_var)
    loop: For = path[-1]  # type: ignore[assignment]
    name = loop.loop_var.name
    _check_unbound("split", func, loop)
    if len(factors) < 2:
        raise InvalidFactorsError(
            "split",
            f'needs at least two factors for loop "{name}", got {factors}',
            func,
            loops=[loop_var],
        )
    bad = [
        f
        for f in factors
        if f is not None and (isinstance(f, bool) or not isinstance(f, int) or not 0 < f < 2**31)
    ]
    if bad:
        raise InvalidFactorsError(
            "split",
            f'factors {factors} for loop "{name}" must be positive integers or None',
            func,
            loops=[loop_var],
        )
    if sum(f is None for f in factors) > 1:
        raise InvalidFactorsError(
            "split",
            f'factors {factors} for loop "{name}" have more than one None',
            func,
            loops=[loop_var],
        )
    known = 1
    for f in factors:
        if f is not None:
            known *= f
    sizes = [(-(-loop.extent // known)) if f is None else f for f in factors]
    product = 1
    for f in sizes:
        product *= f
    if product < loop.extent:
        raise WrongFactorProductError(
            "split",
            f'factors {factors} multiply to {product}, but loop "{name}" has extent {loop.extent}',
            func,
            loops=[loop_var],
        )
    taken = names_in_scope(func, path, loop)
    new_vars = [Var(fresh_name(f"{name}_{i}", taken)) for i in range(len(sizes))]
    fused: PrimExpr = const(0)
    for v, f in zip(new_vars, sizes, strict=True):
        term = const(0) if (f == 1 and not preserve_unit_iters) else v
        fused = add(mul(fused, const(f)), term)
    bounds = loop_bounds(func)
    bounds.update({v: (0, f - 1) for v, f in zip(new_vars, sizes, strict=True)})
    predicate = None
    if product > loop.extent and not disable_predication:
        predicate = LT(fused, const(loop.extent))
    rewriter = BindingRewriter(
        {loop_var: fused},
        bounds,
        predicate,
        child_block_names(loop) if predicate is not None else None,
    )
    body: Stmt = rewriter.visit_stmt(loop.body)
    for v, f in reversed(list(zip(new_vars, sizes, strict=True))):
        body = For(v, f, "serial", body)
    return replace_path(func, path, body), new_vars


def fuse(
    func: PrimFunc, loop_vars: list[Var], preserve_unit_iters: bool = True
) -> tuple[PrimFunc, Var]:
    """Fuse directly nested loops into one loop whose extent is their product."""
    if not loop_vars:
        raise InvalidFactorsError("fuse", "needs at least one loop", func)
    if len(set(loop_vars)) != len(loop_vars):
        names = [v.name for v in loop_vars]
        raise DuplicateLoopError("fuse", f"a loop appears twice in {names}", func, loops=loop_vars)
    paths = find_loop_paths(func, "fuse", loop_vars)
    loops: list[For] = [p[-1] for p in paths]  # type: ignore[misc]
    for lp in loops:
        _check_unbound("fuse", func, lp)
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            raise LoopsNotNestedError(
                "fuse",
                f'loop "{inner.loop_var.name}" is not the only child of loop '
                f'"{outer.loop_var.name}"; fuse needs directly nested loops, outermost first',
                func,
                loops=[outer.loop_var, inner.loop_var],
            )
    extent = 1
    for lp in loops:
        extent *= lp.extent
    taken = names_in_scope(func, paths[0], loops[0])
    fused_var = Var(fresh_name("_".join(v.name for v in loop_vars) + "_fused", taken))
    mapping: dict[Var, PrimExpr] = {}
    stride = 1
    for idx in range(len(loops) - 1, -1, -1):
        lp = loops[idx]
        if lp.extent == 1 and not preserve_unit_iters:
            mapping[lp.loop_var] = const(0)
            continue
        value: PrimExpr = fused_var
        if idx > 0:
            value = (
                floormod(value, const(lp.extent * stride))
                if stride > 1
                else floormod(value, const(lp.extent))
            )
        value = floordiv(value, const(stride))
        mapping[lp.loop_var] = value
        stride *= lp.extent
    bounds = loop_bounds(func)
    bounds[fused_var] = (0, extent - 1)
    body = BindingRewriter(mapping, bounds).visit_stmt(loops[-1].body)
    new_loop = For(fused_var, extent, "serial", body)
    return replace_path(func, paths[0], new_loop), fused_var


def reorder(func: PrimFunc, loop_vars: list[Var]) -> PrimFunc:
    """Reorder loops of one chain; loops not named keep their positions."""
    if len(set(loop_vars)) != len(loop_vars):
        names = [v.name for v in loop_vars]
        raise DuplicateLoopError(
            "reorder", f"a loop appears twice in {names}", func, loops=loop_vars
        )
    paths = find_loop_paths(func, "reorder", loop_vars)
    deepest = max(paths, key=len)
    ids = {id(s) for s in deepest}
    for v, p in zip(loop_vars, paths, strict=True):
        if id(p[-1]) not in ids:
            other = deepest[-1].loop_var.name  # type: ignore[attr-defined]
            raise LoopsNotInChainError(
                "reorder",
                f'loops "{v.name}" and "{other}" are not in one chain of nested loops',
                func,
                loops=[v, deepest[-1].loop_var],  # type: ignore[attr-defined]
            )
    top = min(paths, key=len)
    start = len(top) - 1
    segment = deepest[start:]
    for pos, (outer, inner) in enumerate(zip(segment, segment[1:])):
        if isinstance(outer, For) and outer.body is inner and isinstance(inner, For):
            continue
        if isinstance(outer, For) and outer.body is inner:
            outer, inner = inner, segment[pos + 2] if pos + 2 < len(segment) else inner
        last = next(x for x in reversed(segment[: pos + 1]) if isinstance(x, For))
        below = next((x for x in segment[pos + 1 :] if isinstance(x, For)), None)
        what = "a block" if isinstance(outer, Block) else "other statements"
        names = f'"{last.loop_var.name}"' + (f' and "{below.loop_var.name}"' if below else "")
        raise NotSingleChildError(
            "reorder",
            f"{what} sit between loops {names}; reorder needs a single chain of directly "
            "nested loops",
            func,
            loops=[x.loop_var for x in (last, below) if x is not None],
        )
    for s in segment:
        if isinstance(s, For):
            _check_unbound("reorder", func, s)
    chain: list[For] = segment  # type: ignore[assignment]
    moved = [
        lp for lp, new in zip(chain, _new_order(chain, loop_vars), strict=True) if lp is not new
    ]
    for lp in moved:
        mixed = _mixed_iter_block(lp)
        if mixed is not None:
            block, sv, rv = mixed
            raise MixedIterTypeLoopError(
                "reorder",
                f'loop "{lp.loop_var.name}" drives both the spatial iter var "{sv}" and the '
                f'reduction iter var "{rv}" of block "{block}"; reordering it could run a '
                "reduction step before that element is initialised",
                func,
                loops=[lp.loop_var],
                blocks=[block],
            )
    new_order = _new_order(chain, loop_vars)
    if all(a is b for a, b in zip(new_order, chain, strict=True)):
        return func
    body: Stmt = chain[-1].body
    for lp in reversed(new_order):
        body = lp.with_body(body)
    return replace_path(func, deepest[: start + 1], body)


def _new_order(chain: list[For], loop_vars: list[Var]) -> list[For]:
    """The chain with the named loops placed in the given order (others stay put)."""
    wanted = set(loop_vars)
    queue = iter(loop_vars)
    var_to_loop = {lp.loop_var: lp for lp in chain}
    return [var_to_loop[next(queue)] if lp.loop_var in wanted else lp for lp in chain]
