"""Helpers shared by the primitive families: locating nodes and rebuilding paths.

Invariant: ``replace_path(func, path, new)`` rebuilds only the ancestors on
``path``; every other subtree of ``func`` is shared with the result.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, For, IfThenElse, PrimFunc, SeqStmt, Stmt, Var
from ...ir.analysis import block_path, iter_blocks, loop_paths
from ...ir.expr import GE, LT, PrimExpr, const, extent_expr
from ...ir.functor import Mutator, iter_stmts
from ...ir.intset import prove_le
from ...ir.simplify import and_, int_range, simplify
from ..errors import (
    BlockNotFoundError,
    LoopNotStartWithZeroError,
    OnlyLeafError,
    StaleHandleError,
)


def find_loop_path(func: PrimFunc, primitive: str, var: Var) -> list[Stmt]:
    return find_loop_paths(func, primitive, [var])[0]


def find_loop_paths(func: PrimFunc, primitive: str, loop_vars) -> list[list[Stmt]]:
    """Root-to-loop paths for each loop, or StaleHandleError naming a missing one."""
    found = loop_paths(func, loop_vars)
    for var in loop_vars:
        if var not in found:
            raise StaleHandleError(
                primitive,
                f'loop "{var.name}" no longer exists (an earlier primitive replaced it)',
                func,
            )
    return [found[v] for v in loop_vars]


def check_starts_at_zero(func: PrimFunc, primitive: str, loops) -> None:
    """Refuse (``LoopNotStartWithZeroError``) where one of ``loops`` (``For`` nodes, or
    statements of which only the loops count) does not start at 0: the primitives that
    rewrite a loop as ``0 <= v < extent`` (split, fuse, merge, rfactor, blockize,
    compute_at's target, sample_perfect_tile ...) need that, as in TVM."""
    for lp in loops:
        if isinstance(lp, For) and lp.min:
            raise LoopNotStartWithZeroError(
                primitive,
                f'loop "{lp.loop_var.name}" runs over range({lp.min}, {lp.end}) and does '
                "not start at 0, which this primitive does not support",
                func,
                loops=[lp.loop_var],
            )


def find_block_path(func: PrimFunc, primitive: str, name: str) -> list[Stmt]:
    path = block_path(func, name)
    if path is None:
        raise BlockNotFoundError(
            primitive, f'no block named "{name}" in function "{func.name}"', func
        )
    return path


def replace_child(parent: Stmt, old: Stmt, new: Stmt | None) -> Stmt:
    """``parent`` with its child ``old`` swapped for ``new`` (None removes it)."""
    if isinstance(parent, For):
        assert parent.body is old
        return parent.with_body(new)
    if isinstance(parent, SeqStmt):
        stmts = []
        for s in parent.stmts:
            if s is old:
                if isinstance(new, SeqStmt):
                    stmts.extend(new.stmts)
                elif new is not None:
                    stmts.append(new)
            else:
                stmts.append(s)
        return stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))
    if isinstance(parent, Block):
        assert parent.body is old
        if is_root(parent):
            return Block(
                parent.name, (), (), new, None, parent.predicate, parent.alloc_buffers,
                parent.annotations, (), (),
            )
        return parent.with_body(new)
    if isinstance(parent, IfThenElse):
        if parent.then_case is old:
            return replace(parent, then_case=new)
        return replace(parent, else_case=new)
    raise TypeError(f"cannot replace a child of {type(parent).__name__}")


def replace_path(func: PrimFunc, path: list[Stmt], new: Stmt) -> PrimFunc:
    """Swap ``path[-1]`` for ``new`` and rebuild its ancestors."""
    node = new
    for parent, old in zip(reversed(path[:-1]), reversed(path[1:]), strict=True):
        node = replace_child(parent, old, node)
    assert isinstance(node, Block)
    return func.with_body(node)


def is_root(block: Block) -> bool:
    return not block.iter_vars and block.name == "root"


def loop_bounds(func: PrimFunc) -> dict[Var, tuple[int, int]]:
    """Inclusive ranges of every loop variable in the function."""
    return {s.loop_var: (s.min, s.end - 1) for s in iter_stmts(func.body) if isinstance(s, For)}


def used_names(func: PrimFunc) -> set[str]:
    names = {p.name for p in func.params}
    for s in iter_stmts(func.body):
        if isinstance(s, For):
            names.add(s.loop_var.name)
        elif isinstance(s, Block):
            names.add(s.name)
            names.update(iv.var.name for iv in s.iter_vars)
            names.update(b.name for b in s.alloc_buffers)
    return names


def names_in_scope(func: PrimFunc, path: list[Stmt], *inside: Stmt) -> set[str]:
    """Names a new loop placed at ``path[-1]`` around ``inside`` must not shadow or be
    shadowed by: parameters, loops and blocks on the path, and everything within
    ``inside``. Loops in sibling nests may reuse a name, as in TVM (``ax0`` in each
    stage, ``j_0`` in each nest)."""
    names = {p.name for p in func.params}
    for s in path:
        if isinstance(s, For):
            names.add(s.loop_var.name)
        elif isinstance(s, Block):
            names.update(iv.var.name for iv in s.iter_vars)
            names.update(b.name for b in s.alloc_buffers)
    for top in inside:
        for s in iter_stmts(top):
            if isinstance(s, For):
                names.add(s.loop_var.name)
            elif isinstance(s, Block):
                names.update(iv.var.name for iv in s.iter_vars)
    return names


def fresh_name(base: str, taken: set[str]) -> str:
    """``base`` if free, else ``base_1``, ``base_2``...; records the name as taken."""
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


class BindingRewriter(Mutator):
    """Substitute loop variables in block bindings and predicates (and in conditions
    between loops), without entering block bodies: inside a block only its own
    iter vars appear. Bindings are simplified with the loop ranges known."""

    def __init__(
        self,
        mapping: dict[Var, object],
        bounds: dict[Var, tuple[int, int]],
        extra_predicate=None,
        predicate_blocks: set[str] | None = None,
    ):
        self.mapping = mapping
        self.bounds = bounds
        self.extra_predicate = extra_predicate
        self.predicate_blocks = predicate_blocks or set()

    def visit_expr(self, e):
        from ...ir.functor import substitute

        return simplify(substitute(e, self.mapping), self.bounds)

    def visit_block(self, b: Block) -> Block:
        values = tuple(self.visit_expr(v) for v in b.iter_values)
        pred = self.visit_expr(b.predicate)
        if self.extra_predicate is not None and b.name in self.predicate_blocks:
            from ...ir.simplify import and_

            pred = simplify(and_(pred, self.extra_predicate), self.bounds)
        changed = any(x is not y for x, y in zip(values, b.iter_values, strict=True))
        if not changed and pred is b.predicate:
            return b
        return replace(b, iter_values=values, predicate=pred)


def child_block_names(stmt: Stmt) -> set[str]:
    """Names of blocks below ``stmt`` that are not nested inside another block."""
    out: set[str] = set()
    for s in iter_stmts(stmt, enter_blocks=False):
        if isinstance(s, Block) and s is not stmt:
            out.add(s.name)
    return out


def all_block_names(stmt: Stmt) -> list[str]:
    return [b.name for b in iter_blocks(stmt)]


# ---------------------------------------------------------------------------
# scopes, producers and consumers


def scope_of(path: list[Stmt]) -> Block:
    """The nearest block above ``path[-1]`` (its scope)."""
    return next(s for s in reversed(path[:-1]) if isinstance(s, Block))


def scope_blocks(scope: Block) -> list[Block]:
    """Blocks directly in ``scope`` (not nested in another block), in program order."""
    kids = child_block_names(scope)
    return [b for b in iter_blocks(scope.body) if b.name in kids]


def producers_of(block: Block, siblings: list[Block]) -> list[Block]:
    """Blocks among ``siblings`` that write a buffer ``block`` reads."""
    reads = {r.buffer for r in block.reads or ()}
    return [
        b for b in siblings if b is not block and any(w.buffer in reads for w in b.writes or ())
    ]


def consumers_of(block: Block, siblings: list[Block]) -> list[Block]:
    """Blocks among ``siblings`` that read a buffer ``block`` writes."""
    writes = {w.buffer for w in block.writes or ()}
    return [
        b for b in siblings if b is not block and any(r.buffer in writes for r in b.reads or ())
    ]


def remove_stmt(func: PrimFunc, path: list[Stmt], primitive: str = "remove") -> PrimFunc:
    """Remove ``path[-1]`` together with every loop above it left empty by that.

    Stops at the enclosing block: a scope is never left empty (OnlyLeafError)."""
    cut = len(path) - 1
    while cut > 0 and isinstance(path[cut - 1], For):
        cut -= 1
    parent, old = path[cut - 1], path[cut]
    if isinstance(parent, Block):
        name = path[-1].name if isinstance(path[-1], Block) else "the statement"
        raise OnlyLeafError(
            primitive,
            f'block "{name}" is the only statement of block "{parent.name}"; removing it '
            "would leave that scope empty",
            func,
            blocks=[name, parent.name],
        )
    return replace_path(func, path[:cut], replace_child(parent, old, None))


def remove_alloc(func: PrimFunc, buffer) -> PrimFunc:
    """Drop ``buffer`` from whichever block allocates it."""

    class _Drop(Mutator):
        def visit_block(self, b: Block) -> Block:
            b = super().visit_block(b)
            if buffer in b.alloc_buffers:
                allocs = tuple(x for x in b.alloc_buffers if x is not buffer)
                if is_root(b):
                    return Block(b.name, (), (), b.body, None, b.predicate, allocs,
                                 b.annotations, (), ())
                return replace(b, alloc_buffers=allocs, reads=None, writes=None)
            return b

    return func.with_body(_Drop().visit_stmt(func.body))


def position_in_scope(body: Stmt, block_name: str) -> int:
    """Index, in a scope's body, of the top-level statement holding the block
    ``block_name`` (0 when the body is not a sequence)."""
    if not isinstance(body, SeqStmt):
        return 0
    for i, s in enumerate(body.stmts):
        if any(isinstance(b, Block) and b.name == block_name for b in iter_stmts(s)):
            return i
    raise AssertionError(f'block "{block_name}" is not in this scope')  # pragma: no cover


def in_bounds_guard(indices, shape, known) -> PrimExpr:
    """The condition keeping ``buffer[indices]`` inside a buffer of ``shape`` over the
    variable ranges ``known``: true where it provably is, else a conjunction of the
    bounds the indices may cross (a region relaxed over a padded split reaches past the
    buffer's end). Symbolic dimensions are guarded unless the index provably stays
    below them."""
    cond: PrimExpr = const(True)
    for index, dim in zip(indices, shape):
        lo, hi = int_range(index, known)
        if lo is None or lo < 0:
            cond = and_(cond, GE(index, const(0, index.dtype)))
        if isinstance(dim, int):
            outside = hi is None or hi > dim - 1
        else:
            outside = not prove_le(index, simplify(extent_expr(dim, index.dtype) - 1), known)
        if outside:
            cond = and_(cond, LT(index, extent_expr(dim, index.dtype)))
    return cond
