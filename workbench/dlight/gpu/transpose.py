"""The GPU rule for a 2-D transpose, ``B[i, j] = A[j, i]`` (TVM's
``dlight.gpu.Transpose``).

Written naively, one of the two sides is strided: neighbouring threads write
neighbouring elements of ``B`` but read ``A`` a whole row apart, so each warp's load
touches 32 different memory sectors. The rule tiles the output in 8 x 16 tiles (one
thread block of 16 x 8 threads each): the block first copies the matching 16 x 8 tile
of ``A`` into shared memory with loads that run along ``A``'s rows (coalesced), then
writes ``B`` along its rows (coalesced) reading the tile transposed. The tile's rows
are padded to 33 words (``storage_align``) so that the transposed reads of a warp fall
in different shared-memory banks.
"""

from __future__ import annotations

from ...ir.expr import BufferLoad
from ...ir.stmt import BufferStore
from ...schedule import BlockRV, Schedule
from ..analysis import (
    detect_dominant_read,
    normalize_or_decline,
    try_inline_contiguous_spatial,
)
from ..base import Declined, GPUScheduleRule
from .reduction import iter_sum_terms

__all__ = ["Transpose"]


def is_transpose(sch: Schedule, block_rv: BlockRV) -> bool:
    """``B[idx] = A[perm(idx)]``: a plain copy whose read indices are the write
    indices in another order."""
    block = sch.get(block_rv)
    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, BufferLoad):
        return False
    lhs, rhs = list(store.indices), list(store.value.indices)
    if len(lhs) != len(rhs):
        return False
    same_order = all(a is b for a, b in zip(lhs, rhs, strict=True))
    return not same_order and {id(e) for e in lhs} == {id(e) for e in rhs}


class Transpose(GPUScheduleRule):
    """A 2-D transpose (possibly after an elementwise prologue that decodes its input):
    8 x 16 output tiles, the input tile staged through a padded shared-memory buffer so
    that both the global loads and the global stores coalesce (TVM's
    ``dlight.gpu.Transpose``).

    >>> import workbench as wb
    >>> sch = Transpose().apply(wb.workloads.transpose(64, 64), wb.Target("cuda"), False)
    >>> [sch.get(lp).thread_tag for lp in sch.get_loops("B")][:4]
    ['blockIdx.y', 'blockIdx.x', 'threadIdx.y', 'threadIdx.x']
    """

    len_tx = 16
    len_ty = 8
    unroll_depth = 256
    len_vec = 4

    def apply(self, func, target, tunable) -> Schedule:
        len_tx, len_ty = self.len_tx, self.len_ty
        sch = Schedule(func)
        infos = normalize_or_decline(sch)
        idx = None
        for n in range(len(infos) - 1, -1, -1):
            if is_transpose(sch, infos[n].block_rv):
                idx = n
                break
            if not infos[n].is_injective():
                raise Declined(f'block "{infos[n].name}" is not elementwise (iter kinds '
                               f'"{infos[n].dom_kind()}") and no transpose follows it')
        if idx is None:
            raise Declined("no block copies its input with permuted indices "
                           "(B[i, j] = A[j, i])")
        block = infos[idx].block_rv
        prologue = None
        if idx > 0:
            rest = try_inline_contiguous_spatial(sch, infos[:idx - 1])
            if rest:
                raise Declined(f"blocks {', '.join(b.name for b in rest)} before the "
                               "transpose cannot be inlined")
            prologue = infos[idx - 1].block_rv
        loops = sch.get_loops(block)
        if len(loops) != 2:
            raise Declined(f'the transpose block "{infos[idx].name}" has {len(loops)} axes; '
                           "the rule handles 2-D transposes")
        c_factor = 1
        if prologue is not None:
            pblock = sch.get(prologue)
            terms = iter_sum_terms(detect_dominant_read(pblock),
                                   {iv.var: iv.extent for iv in pblock.iter_vars})
            if terms:
                c_factor = terms[0][1]
        i, j = loops
        i, vi = sch.split(i, factors=[None, c_factor])
        bi, ti = sch.split(i, factors=[None, len_ty])
        bj, tj = sch.split(j, factors=[None, len_tx])
        sch.reorder(bi, bj, ti, tj, vi)
        sch.bind(bi, "blockIdx.y")
        sch.bind(bj, "blockIdx.x")
        sch.bind(ti, "threadIdx.y")
        sch.bind(tj, "threadIdx.x")
        len_vec = min(self.len_vec, c_factor)
        _, vi = sch.split(vi, factors=[None, len_vec])
        if len_vec > 1:
            sch.vectorize(vi)
        cache = sch.cache_read(block, 0, "shared")
        sch.compute_at(cache, bj)
        fused = sch.fuse(*sch.get_loops(cache)[2:])
        _, ty, tx, v = sch.split(fused, factors=[None, len_ty, len_tx, c_factor])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.unroll(v)
        sch.storage_align(cache, 0, axis=0, factor=32, offset=1)
        sch.annotate(bi, "pragma_auto_unroll_max_step", self.unroll_depth)
        sch.annotate(bi, "pragma_unroll_explicit", 1)
        if prologue is not None:
            sch.compute_inline(prologue)
        return sch

