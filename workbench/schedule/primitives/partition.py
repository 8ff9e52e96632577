"""Partitioning a loop into consecutive ranges: loop_partition.

``loop_partition(loop, factors)`` cuts a loop of constant extent into pieces of the
given sizes, one copy of the loop body per piece, each under a loop over its own range
(``range(lo, hi)``; only the first starts at 0). As TVM 0.27 builds it, each piece sits
in an opaque block ``<B>_<i><k>_partition`` and all of them in one opaque block
``<B>_<i>_common`` (``B`` the first block under the loop, ``i`` the loop); the copied
loop is ``<i><k>`` and every block copied into piece ``k`` gets the suffix ``_<i><k>``.
Before::

    for i, j in T.grid(128, 128):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)

after ``loop_partition(i, factors=[None, 16])``::

    with T.sblock("B_i_common"):
        with T.sblock("B_i0_partition"):
            for i0, j in T.grid(112, 128):
                with T.sblock("B_i0"):
                    vi, vj = T.axis.remap("SS", [i0, j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)
        with T.sblock("B_i1_partition"):
            for i1 in range(112, 128):
                for j in range(128):
                    with T.sblock("B_i1"):
                        vi, vj = T.axis.remap("SS", [i1, j])
                        B[vi, vj] = A[vi, vj] * T.float32(2)

Factors, as TVM reads them: one may be ``None`` (the rest of the extent); without a
``None`` the factors must leave something over, which becomes the last piece (so
``[2, 1, 64]`` on 128 gives four pieces). Their sum must stay below the extent either
way. Refused: a loop of symbolic extent, factors that are not positive, two ``None``,
factors that cover the whole loop, a loop with annotations or a thread binding, a loop
that does not start at 0 (TVM would count its factors from 0 and build empty loops),
and a loop whose body is not a loop nest around one block (TVM has no block to name
the result after).

Iterators bound to the loop keep their domain ``[0, hi)`` where TVM narrows it to the
piece's ``[lo, hi)``: iter vars start at 0 in the workbench (``T.axis.remap`` over a
loop ``range(lo, hi)`` reads back as that domain). The blocks' access regions are
derived from their bodies, as everywhere in the workbench; TVM writes the whole piece's
region into each copied block instead.
"""

from __future__ import annotations

from dataclasses import replace

from ...ir import Block, For, IterVar, PrimFunc, SeqStmt, Stmt, Var
from ...ir.functor import Mutator
from ..errors import InvalidFactorsError, ScheduleError
from ._common import all_block_names, find_loop_path, fresh_name, replace_path
from .loops import _check_plain


class PartitionSymbolicLoopError(ScheduleError):
    """``loop_partition``: the loop's extent is not a constant."""


class MultipleInferredFactorsError(ScheduleError, ValueError):
    """``loop_partition``: more than one factor is ``None``."""


class NonPositiveFactorError(ScheduleError, ValueError):
    """``loop_partition``: a factor is zero or negative."""


class FactorsCoverLoopError(ScheduleError, ValueError):
    """``loop_partition``: the factors add up to the loop's extent or more, so nothing
    is left for the inferred (or the last) piece."""


class NoBlockToPartitionError(ScheduleError):
    """``loop_partition``: the loop's body is not a loop nest around one block (the
    new blocks are named after that block)."""


def _first_block(loop: For) -> Block | None:
    s: Stmt = loop.body
    while isinstance(s, For):
        s = s.body
    return s if isinstance(s, Block) else None


def partition_ends(func: PrimFunc, loop: For, factors: list) -> list[int]:
    """The end of each piece (cumulative), as TVM computes them from ``factors``.

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(128, 128, 128)
    >>> i = func.body.body
    >>> partition_ends(func, i, [2, 1, 64]), partition_ends(func, i, [None, 16])
    ([2, 3, 67, 128], [112, 128])
    """
    p = "loop_partition"
    name = loop.loop_var.name
    if not isinstance(loop.extent, int):
        raise PartitionSymbolicLoopError(
            p, f'loop "{name}" has the symbolic extent {loop.extent}; loop_partition needs '
            "a constant one", func, loops=[loop.loop_var])
    if not isinstance(factors, (list, tuple)):
        raise InvalidFactorsError(
            p, f'factors for loop "{name}" must be a list, got {factors!r}', func,
            loops=[loop.loop_var])
    infer = None
    total = 0
    for k, f in enumerate(factors):
        if f is None:
            if infer is not None:
                raise MultipleInferredFactorsError(
                    p, f'factors {list(factors)} for loop "{name}" have more than one None',
                    func, loops=[loop.loop_var])
            infer = k
            continue
        if isinstance(f, bool) or not isinstance(f, int):
            raise InvalidFactorsError(
                p, f'factors {list(factors)} for loop "{name}" must be integers or None',
                func, loops=[loop.loop_var])
        if f <= 0:
            raise NonPositiveFactorError(
                p, f'factor {f} (position {k}) for loop "{name}" is not positive', func,
                loops=[loop.loop_var])
        total += f
    if total >= loop.extent:
        raise FactorsCoverLoopError(
            p, f'factors {list(factors)} add up to {total}, which leaves nothing of loop '
            f'"{name}" (extent {loop.extent}) for the ' +
            ("inferred piece" if infer is not None else "last piece"),
            func, loops=[loop.loop_var])
    sizes = [loop.extent - total if f is None else f for f in factors]
    ends, acc = [], 0
    for s in sizes:
        acc += s
        ends.append(acc)
    if infer is None:
        ends.append(loop.extent)
    return ends


class _Copy(Mutator):
    """One piece's copy of the loop body: the loop variable replaced, fresh variables
    for the inner loops and the iter vars, blocks renamed with ``suffix``; an iter var
    bound to exactly the loop variable gets the domain ``[0, end)``."""

    def __init__(self, old: Var, new: Var, end: int, suffix: str, taken: set[str]):
        self.mapping: dict[Var, Var] = {old: new}
        self.new, self.end, self.suffix, self.taken = new, end, suffix, taken

    def visit_expr(self, e):
        if isinstance(e, Var):
            return self.mapping.get(e, e)
        return super().visit_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, For):
            v = Var(s.loop_var.name, s.loop_var.dtype)
            self.mapping[s.loop_var] = v
            return replace(s, loop_var=v, body=self.visit_stmt(s.body))
        return super().visit_stmt(s)

    def visit_block(self, b: Block) -> Block:
        values = tuple(self.visit_expr(v) for v in b.iter_values)
        ivs = []
        for iv, val in zip(b.iter_vars, values, strict=True):
            v = Var(iv.var.name, iv.var.dtype)
            self.mapping[iv.var] = v
            ext = self.end if val is self.new else iv.extent
            ivs.append(IterVar(v, ext, iv.kind))
        name = fresh_name(f"{b.name}_{self.suffix}", self.taken)
        self.taken.add(name)
        return Block(
            name, tuple(ivs), values, self.visit_stmt(b.body),
            self.visit_stmt(b.init) if b.init is not None else None,
            self.visit_expr(b.predicate), b.alloc_buffers, b.annotations,
            match_buffers=tuple(self.visit_match_buffer(m) for m in b.match_buffers),
        )


def loop_partition(
    func: PrimFunc, loop_var: Var, factors: list[int | None], preserve_unit_iters: bool = True
) -> tuple[PrimFunc, list[Var]]:
    """Partition the loop ``loop_var`` into consecutive pieces of the sizes ``factors``
    (see the module docstring); returns ``(new_func, piece_loop_vars)``.

    ``preserve_unit_iters`` is accepted for TVM's signature; TVM 0.27 does not use it.

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(16, 16, 16)
    >>> g, pieces = loop_partition(func, func.body.body.loop_var, [None, 4])
    >>> [p.name for p in pieces]
    ['i0', 'i1']
    >>> for ln in g.script().splitlines():
    ...     if ln.strip().startswith("for"):
    ...         print(ln.strip())
    for i0, j, k in T.grid(12, 16, 16):
    for i1 in range(12, 16):
    for j, k in T.grid(16, 16):
    """
    p = "loop_partition"
    path = find_loop_path(func, p, loop_var)
    loop: For = path[-1]  # type: ignore[assignment]
    ends = partition_ends(func, loop, factors)
    _check_plain(p, func, loop)
    first = _first_block(loop)
    if first is None:
        raise NoBlockToPartitionError(
            p, f'the body of loop "{loop_var.name}" is not a nest of loops around one block; '
            "loop_partition names its blocks after that block", func, loops=[loop_var])
    base = f"{first.name}_{loop_var.name}"
    taken = set(all_block_names(func.body))
    pieces, new_vars = [], []
    start = loop.min
    for k, end in enumerate(ends):
        v = Var(f"{loop_var.name}{k}", loop_var.dtype)
        body = _Copy(loop_var, v, end, v.name, taken).visit_stmt(loop.body)
        piece_name = fresh_name(f"{base}{k}_partition", taken)
        taken.add(piece_name)
        pieces.append(Block(piece_name, (), (), For(v, end - start, "serial", body, min=start)))
        new_vars.append(v)
        start = end
    common = fresh_name(f"{base}_common", taken)
    return replace_path(func, path, Block(common, (), (), SeqStmt(tuple(pieces)))), new_vars
