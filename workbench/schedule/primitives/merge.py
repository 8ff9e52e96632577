"""Merging sibling loops: merge.

``merge(l_1, ..., l_n)`` takes loops that sit at the same depth below their lowest
common ancestor (a loop or block, in one block scope), with the same extents level by
level, and makes one loop nest of them: the nest of the last loop's branch is replaced
by new loops ``<name>_m`` (named after the first loop's nest), whose innermost loop
runs the bodies of ``l_1``, ..., ``l_n`` one after the other; the other branches go.
Before::

    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)

after ``merge(j_B, j_C)`` (as TVM prints it)::

    for i_m, j_m in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i_m, j_m])
            B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i_m, j_m])
            C[vi, vj] = B[vi, vj] + T.float32(1)

As in TVM, the loops must carry no annotation or thread binding, each branch from the
common ancestor down to its loop must be a chain of only children, and nothing checks
that the reordered bodies keep their dependences (the merged nest runs where the last
branch was).
"""

from __future__ import annotations

from ...ir import Block, For, PrimFunc, SeqStmt, Stmt, Var
from ...ir.functor import substitute
from ..errors import (
    DuplicateLoopError,
    InvalidScheduleArgumentError,
    NotSingleChildError,
    ScheduleError,
)
from ._common import find_loop_paths, fresh_name, replace_path, used_names
from .loops import _check_plain


class LoopsInDifferentScopesError(ScheduleError):
    """``merge``: the loops are not all in one block scope (a block lies between one
    of them and their lowest common ancestor)."""


class NestedLoopsError(ScheduleError):
    """``merge``: one loop encloses another, so they are not siblings."""


class MergeDepthMismatchError(ScheduleError):
    """``merge``: the loops sit at different depths below their lowest common
    ancestor."""


class MergeExtentMismatchError(ScheduleError):
    """``merge``: loops at one depth below the common ancestor have different
    extents."""


def _lca_depth(paths: list[list[Stmt]]) -> int:
    """Index of the lowest common ancestor in every path."""
    depth = 0
    while all(len(p) > depth + 1 for p in paths) and all(
        p[depth + 1] is paths[0][depth + 1] for p in paths
    ):
        depth += 1
    return depth


def merge(func: PrimFunc, loop_vars: list[Var]) -> tuple[PrimFunc, Var]:
    """Merge sibling loops of equal extents into one loop; returns ``(new_func,
    merged_loop_var)`` (the loop that replaces ``loop_vars``, named ``<first>_m``).

    >>> import workbench as wb
    >>> from workbench.testing import chain_func
    >>> from workbench.schedule.primitives.merge import merge
    >>> f = chain_func(8)
    >>> sch = wb.Schedule(f)
    >>> jb = sch.get(sch.get_loops("B")[1]).loop_var
    >>> jc = sch.get(sch.get_loops("C")[1]).loop_var
    >>> g, m = merge(f, [jb, jc])
    >>> m.name
    'j_m'
    """
    p = "merge"
    if len(loop_vars) < 2:
        raise InvalidScheduleArgumentError(
            p,
            "needs at least two loops to merge, got "
            + (", ".join(f'"{v.name}"' for v in loop_vars) or "none"),
            func,
            loops=loop_vars,
        )
    seen: set[Var] = set()
    for v in loop_vars:
        if v in seen:
            raise DuplicateLoopError(p, f'loop "{v.name}" is given twice', func, loops=[v])
        seen.add(v)
    paths = find_loop_paths(func, p, loop_vars)
    lca = _lca_depth(paths)
    nests: list[list[For]] = []
    for var, path in zip(loop_vars, paths, strict=True):
        if len(path) == lca + 1:
            inner = next(v for v, q in zip(loop_vars, paths, strict=True) if len(q) > lca + 1)
            raise NestedLoopsError(
                p,
                f'loop "{var.name}" encloses loop "{inner.name}"; merge needs sibling loops',
                func,
                loops=[var, inner],
            )
        nest: list[For] = []
        for s in path[lca + 1 :]:
            if isinstance(s, Block):
                raise LoopsInDifferentScopesError(
                    p,
                    f'loop "{var.name}" is inside block "{s.name}", not in the block scope '
                    "of the other loops",
                    func,
                    loops=[var],
                    blocks=[s.name],
                )
            if isinstance(s, SeqStmt):
                continue  # only between loops of the nest: refused just below
            if not isinstance(s, For):
                raise NotSingleChildError(
                    p,
                    f'loop "{var.name}" is under a {type(s).__name__} below the common '
                    "ancestor; merge needs a chain of only-child loops",
                    func,
                    loops=[var],
                )
            nest.append(s)
        for lp in nest:
            _check_plain(p, func, lp)
        for outer, inner_lp in zip(nest, nest[1:], strict=False):
            if outer.body is not inner_lp:
                raise NotSingleChildError(
                    p,
                    f'loop "{inner_lp.loop_var.name}" is not the only child of loop '
                    f'"{outer.loop_var.name}"',
                    func,
                    loops=[outer.loop_var, inner_lp.loop_var],
                )
        nests.append(nest)
    first = nests[0]
    for var, nest in zip(loop_vars[1:], nests[1:], strict=True):
        if len(nest) != len(first):
            raise MergeDepthMismatchError(
                p,
                f'loop "{var.name}" is {len(nest)} loop(s) below the common ancestor but '
                f'loop "{loop_vars[0].name}" is {len(first)}',
                func,
                loops=[loop_vars[0], var],
            )
        for a, b in zip(first, nest, strict=True):
            if str(a.extent) != str(b.extent):
                raise MergeExtentMismatchError(
                    p,
                    f'loop "{b.loop_var.name}" has extent {b.extent} but loop '
                    f'"{a.loop_var.name}" has extent {a.extent}',
                    func,
                    loops=[a.loop_var, b.loop_var],
                )
    taken = used_names(func)
    new_vars = []
    for lp in first:
        name = fresh_name(f"{lp.loop_var.name}_m", taken)
        taken.add(name)
        new_vars.append(Var(name, lp.loop_var.dtype))
    bodies: list[Stmt] = []
    for nest in nests:
        mapping = {lp.loop_var: nv for lp, nv in zip(nest, new_vars, strict=True)}
        body = substitute(nest[-1].body, mapping)
        bodies.extend(body.stmts if isinstance(body, SeqStmt) else (body,))
    merged: Stmt = SeqStmt(tuple(bodies))
    for lp, nv in zip(reversed(first), reversed(new_vars), strict=True):
        merged = For(nv, lp.extent, "serial", merged)
    # the last branch's top becomes the merged nest; the other tops go
    container = paths[-1][lca]
    assert isinstance(container, SeqStmt)  # branches differ right below it
    tops = [nest[0] for nest in nests]
    drop = {id(t) for t in tops[:-1]}
    stmts = tuple(merged if s is tops[-1] else s for s in container.stmts if id(s) not in drop)
    new = stmts[0] if len(stmts) == 1 else SeqStmt(stmts)
    return replace_path(func, paths[-1][: lca + 1], new), new_vars[-1]


__all__ = [
    "LoopsInDifferentScopesError",
    "MergeDepthMismatchError",
    "MergeExtentMismatchError",
    "NestedLoopsError",
    "merge",
]
