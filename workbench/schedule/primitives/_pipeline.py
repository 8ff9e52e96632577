"""Is a block scope a stage pipeline (TVM's ``stage_pipeline`` flag)?

TVM's definition, which ``rfactor`` (among others in TVM) requires of the scope of the
block it works on:

* no write-after-read dependency between the scope's child blocks: no block writes a
  buffer that an earlier block of the scope read (a block reading what it writes
  itself, a reduction, does not count);
* the region cover property for every consumer: for each group of its producers that
  meet it at the same place (their lowest common ancestor, a loop or the scope block),
  what those producers write there covers what the consumer reads there. Regions are
  taken over the loops below that common ancestor, the producers' under their
  predicates; loops above it are shared, so they stay symbolic.

``matmul`` writing ``C[0:128, 0:128]`` of a 256 x 256 buffer that the next block reads
whole is not a stage pipeline: its reader would see values never computed.

Deliberate simplification: where TVM takes a lower bound of the produced region (a
strided write ``B[2 * i]`` covers no interval), this takes the interval hull, so such
strided producers are treated as covering their hull.
"""

from __future__ import annotations

from ...ir import Block, Buffer, For, IntImm, PrimExpr, PrimFunc, Stmt, Var
from ...ir.expr import const, extent_expr
from ...ir.functor import substitute
from ...ir.intset import EMPTY, eval_interval, interval_union, narrow, prove_le
from ...ir.simplify import simplify
from ._common import find_block_path, loop_bounds, scope_blocks

__all__ = ["stage_pipeline_problem"]


def _bindings(block: Block) -> dict:
    return {iv.var: v for iv, v in zip(block.iter_vars, block.iter_values, strict=True)}


def _below(path: list[Stmt], lca: Stmt) -> list[For]:
    """Loops on ``path`` strictly below ``lca`` (``path[-1]`` is the block)."""
    idx = next(i for i, s in enumerate(path) if s is lca)
    return [s for s in path[idx + 1 : -1] if isinstance(s, For)]


def _dom(loops: list[For]) -> dict[Var, tuple[PrimExpr, PrimExpr]]:
    out = {}
    for lp in loops:
        ext = extent_expr(lp.extent, lp.loop_var.dtype)
        out[lp.loop_var] = (const(0, lp.loop_var.dtype), simplify(ext - 1))
    return out


def _box(block: Block, region, loops: list[For], bounds, use_predicate: bool):
    """Per dimension the interval a region of ``block`` covers as ``loops`` run (None
    where no interval is known; EMPTY when the predicate never holds)."""
    dom = _dom(loops)
    if use_predicate and not (isinstance(block.predicate, IntImm) and block.predicate.value):
        narrowed = narrow(block.predicate, dom, bounds)
        if narrowed is EMPTY:
            return EMPTY
        dom = narrowed
    binding = _bindings(block)
    out = []
    for mn, ext in region:
        lo = simplify(substitute(mn, binding), bounds)
        hi = simplify(substitute(mn + ext - 1, binding), bounds)
        a, b = eval_interval(lo, dom, bounds), eval_interval(hi, dom, bounds)
        if a is None or b is None or a is EMPTY or b is EMPTY:
            out.append(None)
        else:
            out.append((a[0], b[1]))
    return out


def _lca(a: list[Stmt], b: list[Stmt]) -> Stmt:
    common = None
    for x, y in zip(a[:-1], b[:-1]):
        if x is not y:
            break
        common = x
    assert common is not None
    return common


def stage_pipeline_problem(
    func: PrimFunc,
    scope: Block,
    primitive: str,
    write_after_read: bool = True,
    readers_of: Buffer | None = None,
) -> str | None:
    """Why the scope block ``scope`` of ``func`` is not a stage pipeline, or None when it
    is one (module docstring). ``write_after_read=False`` checks region cover only, and
    ``readers_of`` only for the blocks that read that buffer (TVM's CheckRegionCover)."""
    blocks = scope_blocks(scope)
    paths = {b.name: find_block_path(func, primitive, b.name) for b in blocks}
    bounds = loop_bounds(func)
    # write-after-read
    read_by: dict = {}
    for b in blocks if write_after_read else ():
        for w in b.writes or ():
            earlier = [r for r in read_by.get(w.buffer, []) if r is not b]
            if earlier:
                return (
                    f'block "{b.name}" writes "{w.buffer.name}" after block "{earlier[0].name}" '
                    "read it (a write-after-read dependency)"
                )
        for r in b.reads or ():
            read_by.setdefault(r.buffer, []).append(b)
    # region cover
    for pos, consumer in enumerate(blocks):
        reads = {r.buffer: r for r in consumer.reads or ()}
        if readers_of is not None and readers_of not in reads:
            continue
        producers = [
            p for p in blocks[:pos] if any(w.buffer in reads for w in p.writes or ())
        ]
        cpath = paths[consumer.name]
        groups: dict[int, tuple[Stmt, list[Block]]] = {}
        for p in producers:
            lca = _lca(paths[p.name], cpath)
            groups.setdefault(id(lca), (lca, []))[1].append(p)
        for lca, group in groups.values():
            for buf, read in reads.items():
                produced = None
                for p in group:
                    for w in p.writes or ():
                        if w.buffer is not buf:
                            continue
                        box = _box(p, w.region, _below(paths[p.name], lca), bounds, True)
                        if box is EMPTY:
                            continue
                        produced = box if produced is None else [
                            None if x is None or y is None else interval_union(x, y, bounds)
                            for x, y in zip(produced, box, strict=True)
                        ]
                if produced is None:
                    continue
                consumed = _box(consumer, read.region, _below(cpath, lca), bounds, False)
                if consumed is EMPTY:
                    continue
                for d, (have, need) in enumerate(zip(produced, consumed, strict=True)):
                    if not _covers(have, need, buf.shape[d], bounds):
                        names = ", ".join(f'"{p.name}"' for p in group)
                        return (
                            f'block "{consumer.name}" reads a part of "{buf.name}" (dimension '
                            f"{d}) that {names} does not write there (the region cover "
                            "property fails)"
                        )
    return None


def _covers(have, need, dim, bounds) -> bool:
    if have is None:
        return False
    last = simplify(extent_expr(dim, have[0].dtype) - 1)
    zero = const(0, have[0].dtype)
    if need is None:
        need = (zero, last)
    # clip both to the buffer, as TVM intersects with [0, shape)
    lo_have = have[0] if not prove_le(have[0], zero, bounds) else zero
    hi_have = have[1] if not prove_le(last, have[1], bounds) else last
    lo_need = need[0] if not prove_le(need[0], zero, bounds) else zero
    hi_need = need[1] if not prove_le(last, need[1], bounds) else last
    return prove_le(lo_have, lo_need, bounds) and prove_le(hi_need, hi_have, bounds)


def check_stage_pipeline(func: PrimFunc, scope: Block, primitive: str, where: str, *,
                         blocks: list[str], loops: list[Var] | tuple = ()) -> None:
    """Refuse (``NotStagePipelineError``) when ``scope`` is not a stage pipeline;
    ``where`` names what the primitive was given (``'block "C"'``, ``'loop "i"'``)."""
    problem = stage_pipeline_problem(func, scope, primitive)
    if problem is not None:
        from .reduction import NotStagePipelineError

        raise NotStagePipelineError(
            primitive,
            f'the scope "{scope.name}" of {where} is not a stage pipeline: {problem}',
            func,
            blocks=blocks,
            loops=list(loops),
        )
