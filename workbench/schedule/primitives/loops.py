"""Loop transformations: split, fuse, reorder.

Each primitive is a pure function ``(func, ...) -> (new_func, ...)`` that checks
first and transforms second; a refusal raises a :class:`ScheduleError` and the
input function is untouched.

split, before and after ``split(j, factors=[None, 4])``::

    for i, j in T.grid(128, 128):          for i, j_0, j_1 in T.grid(128, 32, 4):
        with T.block("C"):                     with T.block("C"):
            vi, vj = T.axis.remap(...)             vi = T.axis.spatial(128, i)
                                                   vj = T.axis.spatial(128, j_0 * 4 + j_1)

split and fuse rewrite every use of the old loop variables below the loop: block
bindings and predicates, and also nested blocks (their bindings, regions and
``match_buffer`` sources) and the bodies of opaque blocks, which may index buffers with
the loop variable directly (``A[i]``). As in TVM they refuse a loop bound to a thread
axis or carrying annotations (``AnnotatedLoopError``); a parallel, vectorized or unrolled
loop is split or fused into serial loops.

reorder follows TVM's conditions: a single chain of directly nested loops, and the
blocks under it must have affine bindings (with their predicates) over the loops from
the outermost loop reordered down to the block (``NotAffineBindingError``). Thread-bound,
parallel and annotated loops move with their kinds and annotations. Beyond TVM, a loop
that drives both a spatial and a reduction iter var of a block does not move
(``MixedIterTypeLoopError``): TVM allows it and can then run a reduction step before the
element's initialisation (wrong results after ``fuse(j, k)`` and an uneven ``split``).
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import (
    Block,
    BufferRegion,
    For,
    IfThenElse,
    Mutator,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from ...ir.expr import LT, Add, IntImm, Mul, const, extent_expr, is_float
from ...ir.functor import iter_exprs, iter_stmts, substitute, uses_var
from ...ir.simplify import add, and_, floordiv, floormod, mul, simplify
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
    check_starts_at_zero,
    child_block_names,
    find_loop_path,
    find_loop_paths,
    fresh_name,
    loop_bounds,
    names_in_scope,
    replace_path,
)
from .affine_binding import affine_problem, loop_domain

#: The most factors one ``split`` takes. A perfect split of a loop of extent ``n`` has
#: at most ``log2(n)`` factors above 1 (31 for a 32-bit extent); more only adds unit
#: loops, and each nested loop costs every later primitive, printer and compiler.
MAX_SPLIT_FACTORS = 64


class TooManyFactorsError(InvalidFactorsError):
    """``split`` with more than :data:`MAX_SPLIT_FACTORS` factors."""


class MixedIterTypeLoopError(ScheduleError):
    """A loop drives both a spatial and a reduction iter var of one block; moving it
    would let a reduction step run before that element's initialisation."""


class AnnotatedLoopError(ScheduleError):
    """``split``/``fuse`` of a loop that carries annotations (TVM refuses these too:
    the annotations could not be kept meaningfully on the new loops)."""


class DependentLoopError(ScheduleError):
    """``fuse``/``reorder``: a loop's extent uses the variable of a loop that would no
    longer enclose it (``for j in range(i)`` fused with, or moved above, ``i``)."""


class NotAffineBindingError(ScheduleError):
    """``reorder``: a block under the loops has bindings that are not an affine map of
    those loops (with its predicate), e.g. ``vl = l * 16`` or ``vi = i * i``."""


class _LoopVarRewriter(Mutator):
    """Substitute loop variables everywhere below a loop: block bindings and
    predicates, nested blocks (bindings, regions, match_buffer sources), and the bodies
    of opaque blocks, which may use a loop variable directly. Integer and boolean
    expressions are simplified with the loop ranges known. ``predicate`` is added to the
    blocks named in ``predicate_blocks`` (those directly under the loop)."""

    def __init__(
        self,
        mapping: dict[Var, PrimExpr],
        bounds: dict,
        predicate: PrimExpr | None = None,
        predicate_blocks: set[str] | None = None,
        raw_mapping: dict[Var, PrimExpr] | None = None,
    ):
        self.mapping = mapping
        self.bounds = bounds
        self.predicate = predicate
        self.predicate_blocks = predicate_blocks or set()
        self.raw = _RawSubstituter(raw_mapping or mapping)

    def _uses(self, e: PrimExpr) -> bool:
        return any(isinstance(x, Var) and x in self.mapping for x in iter_exprs(e))

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if not self._uses(e):
            return e
        if is_float(e.dtype):  # a value: rewrite the indices inside it
            return super().visit_expr(e)
        return simplify(substitute(e, self.mapping), self.bounds)

    def _regions(self, regions):
        out = []
        for r in regions or ():
            new = tuple((self.visit_expr(mn), self.visit_expr(ext)) for mn, ext in r.region)
            same = all(a is b for x, y in zip(new, r.region, strict=True) for a, b in zip(x, y))
            out.append(r if same else BufferRegion(r.buffer, new))
        return tuple(out)

    def visit_block(self, b: Block) -> Block:
        new = super().visit_block(b)
        # predicates are rewritten as TVM does: substituted, not simplified, and the
        # guard of an uneven split appended as it was built
        pred = self.raw.visit_expr(b.predicate) if self._uses(b.predicate) else b.predicate
        if self.predicate is not None and b.name in self.predicate_blocks:
            pred = and_(pred, self.predicate)
        reads, writes = self._regions(b.reads), self._regions(b.writes)
        if (
            new is b
            and pred is b.predicate
            and all(x is y for x, y in zip(reads, b.reads or (), strict=True))
            and all(x is y for x, y in zip(writes, b.writes or (), strict=True))
        ):
            return b
        # the regions are the old ones rewritten (so declared regions stay as declared)
        return replace(new, predicate=pred, reads=reads, writes=writes)


class _RawSubstituter(Mutator):
    """Substitute variables, rebuilding the nodes around them as they were."""

    def __init__(self, mapping: dict[Var, PrimExpr]):
        self.mapping = mapping

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, Var):
            return self.mapping.get(e, e)
        return super().visit_expr(e)


def _fused_index(new_vars: list[Var], sizes: list, dt: str,
                 preserve_unit_iters: bool) -> PrimExpr:
    """The old loop variable in terms of the new ones, ``v0 * s0 + v1 * s1 + ... + vn``
    (``s_i`` the product of the sizes after ``i``), as the simplifier's canonical form
    writes it. Built in one pass for constant sizes (folding the sum one factor at a
    time re-canonicalises the growing sum each step: cubic in the number of factors);
    a symbolic size goes through the simplifier."""
    if all(isinstance(f, int) for f in sizes):
        terms = []
        stride = 1
        for v, f in reversed(list(zip(new_vars, sizes, strict=True))):
            if not (f == 1 and not preserve_unit_iters):
                terms.append(v if stride == 1 else Mul(v, const(stride, dt)))
            stride *= f
        if not terms:
            return const(0, dt)
        terms.reverse()
        fused: PrimExpr = terms[0]
        for t in terms[1:]:
            fused = Add(fused, t)
        return fused
    return _fused_index_folded(new_vars, sizes, dt, preserve_unit_iters)


def _fused_index_folded(new_vars: list[Var], sizes: list, dt: str,
                        preserve_unit_iters: bool) -> PrimExpr:
    """:func:`_fused_index` by the simplifier, one factor at a time (any sizes)."""
    fused: PrimExpr = const(0, dt)
    for v, f in zip(new_vars, sizes, strict=True):
        term = const(0, dt) if (isinstance(f, int) and f == 1 and not preserve_unit_iters) else v
        fused = add(mul(fused, f if isinstance(f, PrimExpr) else const(f, dt)), term)
    return fused


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


def _check_plain(primitive: str, func: PrimFunc, loop: For) -> None:
    """TVM's condition for split, fuse and merge: no thread binding, no annotations, a
    loop starting at 0."""
    if loop.kind == "thread_binding":
        raise BoundLoopError(
            primitive,
            f'loop "{loop.loop_var.name}" is bound to {loop.thread_tag}; '
            f"{primitive} works on unbound loops only",
            func,
            loops=[loop.loop_var],
        )
    if loop.annotations:
        keys = ", ".join(f'"{k}"' for k, _ in loop.annotations)
        raise AnnotatedLoopError(
            primitive,
            f'loop "{loop.loop_var.name}" has annotations ({keys}); {primitive} works on '
            "loops without annotations (unannotate them first)",
            func,
            loops=[loop.loop_var],
        )
    check_starts_at_zero(func, primitive, [loop])


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
    ``fused < extent`` (unless ``disable_predication``), as in TVM. At most
    :data:`MAX_SPLIT_FACTORS` factors (``TooManyFactorsError``); the cost grows
    linearly with their number.
    """
    path = find_loop_path(func, "split", loop_var)
    loop: For = path[-1]  # type: ignore[assignment]
    name = loop.loop_var.name
    if len(factors) > MAX_SPLIT_FACTORS:
        raise TooManyFactorsError(
            "split",
            f'{len(factors)} factors for loop "{name}": at most {MAX_SPLIT_FACTORS} (a '
            f"perfect split of a 32-bit extent has at most 31 factors above 1)",
            func,
            loops=[loop_var],
        )
    _check_plain("split", func, loop)
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
    dt = loop.loop_var.dtype  # the new loops keep the index type (int64 stays int64)
    if isinstance(loop.extent, int):
        sizes: list = [(-(-loop.extent // known)) if f is None else f for f in factors]
        product = 1
        for f in sizes:
            product *= f
        if product < loop.extent:
            raise WrongFactorProductError(
                "split",
                f"factors {factors} multiply to {product}, but loop \"{name}\" has extent "
                f"{loop.extent}",
                func,
                loops=[loop_var],
            )
        needs_guard = product > loop.extent
    else:  # a symbolic extent n: infer ceildiv(n, product); guard unless the rest is 1
        if None not in factors:
            raise WrongFactorProductError(
                "split",
                f"factors {factors} multiply to {known}, which cannot be shown to cover loop "
                f'"{name}" of symbolic extent {loop.extent}; use None for one factor',
                func,
                loops=[loop_var],
            )
        inferred = simplify(floordiv(loop.extent + const(known - 1, dt), const(known, dt)))
        sizes = [inferred if f is None else f for f in factors]
        over = simplify(inferred * known - loop.extent)  # 0 when the factors divide n
        needs_guard = not (isinstance(over, IntImm) and over.value == 0)
    taken = names_in_scope(func, path, loop)
    new_vars = [Var(fresh_name(f"{name}_{i}", taken), dt) for i in range(len(sizes))]
    fused = _fused_index(new_vars, sizes, dt, preserve_unit_iters)
    bounds = loop_bounds(func)
    bounds.update({v: (0, f - 1) for v, f in zip(new_vars, sizes, strict=True)})
    # TVM's form of the split value in predicates: ((v0 * f1 + v1) * f2 + v2) ...
    raw: PrimExpr = new_vars[0]
    for v, f in zip(new_vars[1:], sizes[1:], strict=True):
        raw = Add(Mul(raw, f if isinstance(f, PrimExpr) else const(f, dt)), v)
    predicate = None
    if needs_guard and not disable_predication:
        predicate = LT(raw, extent_expr(loop.extent, dt))
    rewriter = _LoopVarRewriter(
        {loop_var: fused},
        bounds,
        predicate,
        child_block_names(loop) if predicate is not None else None,
        raw_mapping={loop_var: raw},
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
        _check_plain("fuse", func, lp)
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            raise LoopsNotNestedError(
                "fuse",
                f'loop "{inner.loop_var.name}" is not the only child of loop '
                f'"{outer.loop_var.name}"; fuse needs directly nested loops, outermost first',
                func,
                loops=[outer.loop_var, inner.loop_var],
            )
    for pos, lp in enumerate(loops):
        _check_independent_extent("fuse", func, lp, loops[:pos])
    # the fused loop is int64 if any loop is or the product exceeds int32; a symbolic
    # extent makes the product symbolic
    dt = "int64" if any(lp.loop_var.dtype == "int64" for lp in loops) or _static_product(
        loops) > 2**31 - 1 else "int32"
    extent = 1
    for lp in loops:
        extent = extent * lp.extent if isinstance(lp.extent, int) else extent_expr(
            extent, dt
        ) * lp.extent
    taken = names_in_scope(func, paths[0], loops[0])
    fused_var = Var(fresh_name("_".join(v.name for v in loop_vars) + "_fused", taken), dt)
    mapping: dict[Var, PrimExpr] = {}
    stride = 1
    for idx in range(len(loops) - 1, -1, -1):
        lp = loops[idx]
        if isinstance(lp.extent, int) and lp.extent == 1 and not preserve_unit_iters:
            mapping[lp.loop_var] = const(0, lp.loop_var.dtype)
            continue
        value: PrimExpr = fused_var
        if idx > 0:
            value = floormod(value, extent_expr(lp.extent * stride, dt))
        value = floordiv(value, extent_expr(stride, dt))
        mapping[lp.loop_var] = value
        stride = stride * lp.extent
    bounds = loop_bounds(func)
    bounds[fused_var] = (0, extent - 1)
    body = _LoopVarRewriter(mapping, bounds).visit_stmt(loops[-1].body)
    new_loop = For(fused_var, extent, "serial", body)
    return replace_path(func, paths[0], new_loop), fused_var


def _static_product(loops: list[For]) -> int:
    """The product of the static extents of ``loops`` (symbolic ones are left out)."""
    n = 1
    for lp in loops:
        n *= lp.extent if isinstance(lp.extent, int) else 1
    return n


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
    chain: list[For] = segment  # type: ignore[assignment]
    if len(loop_vars) > 1:  # as TVM, reordering a single loop checks nothing
        _check_affine_under(func, deepest, start)
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
    for pos, lp in enumerate(new_order):
        _check_independent_extent("reorder", func, lp, new_order[pos + 1 :])
    if all(a is b for a, b in zip(new_order, chain, strict=True)):
        return func
    body: Stmt = chain[-1].body
    for lp in reversed(new_order):
        body = lp.with_body(body)
    return replace_path(func, deepest[: start + 1], body)


def _check_independent_extent(primitive: str, func: PrimFunc, loop: For, others) -> None:
    """TVM's DependentLoopError: ``loop``'s extent must not use the variables of
    ``others`` (the loops fused with it, or placed inside it by reorder)."""
    if isinstance(loop.extent, int):
        return
    for other in others:
        if uses_var(loop.extent, other.loop_var):
            raise DependentLoopError(
                primitive,
                f'the extent of loop "{loop.loop_var.name}" ({loop.extent}) uses loop '
                f'"{other.loop_var.name}", which would no longer enclose it',
                func,
                loops=[loop.loop_var, other.loop_var],
            )


def _check_affine_under(func: PrimFunc, deepest: list[Stmt], start: int) -> None:
    """TVM's reorder condition: every block under the reordered loops (not nested in
    another block) with iter vars has affine bindings, predicate included, over the
    loops of its scope -- or at least over the loops from the outermost reordered one
    down to it (loops above that act as constants)."""
    outer: list[For] = []
    for s in reversed(deepest[:start]):
        if not isinstance(s, For):
            break
        outer.insert(0, s)
    chain: list[For] = deepest[start:]  # type: ignore[assignment]
    for block, inner in blocks_under(chain[-1].body):
        if not block.iter_vars:
            continue
        loops = chain + list(inner)
        domain = loop_domain(loops)
        full = loop_domain(outer) | domain
        values = list(block.iter_values)
        if affine_problem(values, full, block.predicate) is None:
            continue
        problem = affine_problem(values, domain, block.predicate)
        if problem is None:
            continue
        names = ", ".join(lp.loop_var.name for lp in loops)
        raise NotAffineBindingError(
            "reorder",
            f'block "{block.name}" does not have affine bindings over loops {names} '
            f"({problem}); reorder needs affine bindings",
            func,
            loops=[lp.loop_var for lp in chain],
            blocks=[block.name],
        )


def blocks_under(s: Stmt, loops: tuple[For, ...] = ()):
    """(block, loops between ``s`` and the block) for each block under ``s`` that is
    not nested in another block (``s`` itself if it is a block), in program order."""
    if isinstance(s, Block):
        yield s, loops
        return
    if isinstance(s, For):
        yield from blocks_under(s.body, loops + (s,))
        return
    for child in _child_stmts(s):
        yield from blocks_under(child, loops)


def _child_stmts(s: Stmt) -> list[Stmt]:
    """Direct child statements of a non-loop, non-block statement."""
    if isinstance(s, SeqStmt):
        return list(s.stmts)
    if isinstance(s, IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    body = getattr(s, "body", None)  # LetStmt and other wrappers
    return [body] if isinstance(body, Stmt) else []


def _new_order(chain: list[For], loop_vars: list[Var]) -> list[For]:
    """The chain with the named loops placed in the given order (others stay put)."""
    wanted = set(loop_vars)
    queue = iter(loop_vars)
    var_to_loop = {lp.loop_var: lp for lp in chain}
    return [var_to_loop[next(queue)] if lp.loop_var in wanted else lp for lp in chain]
