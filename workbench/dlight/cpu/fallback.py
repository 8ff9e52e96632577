"""The catch-all CPU rule: inline what can be inlined, then, block by block, run the
outer spatial loops in parallel (OpenMP) and vectorize the innermost spatial loop when
it walks the output contiguously; reductions stay serial."""

from __future__ import annotations

from ...ir import Block
from ...ir.functor import expr_vars
from ...schedule import BlockRV, LoopRV, Schedule
from ..analysis import (
    BlockInfo,
    collect_block_iter_vars_used_in_access_region,
    get_extent,
    normalize_or_decline,
    try_inline,
)
from . import _common as C

#: The tile edge of a transpose (16 x 16 float32: 16 rows of one cache line each).
TILE = 16

#: Elements one parallel task of a one-dimensional elementwise loop gets at least.
CHUNK = 1024


class Fallback(C.MachineRule):
    """Matches every function in normal form: correct everywhere, fast where the
    layout is friendly; the diagnosis flags the functions that end up here.

    For each block left after inlining:

    * its spatial loops are moved outside its reduction loops;
    * the innermost spatial loop is vectorized if it walks the last axis of the block's
      output (consecutive iterations write consecutive elements) and runs 4 or more
      times. In a reduction block that loop is split into tiles of a few vectors and
      its tile loop moved below the reduction loops (``i, j_o, k, j_i``: every ``k``
      adds one row of ``B`` to a vector of outputs), with the init moved out
      (``decompose_reduction``);
    * an elementwise block that reads along another axis than it writes (a transpose)
      is tiled 16 x 16 first, the tile's inner loop vectorized;
    * the other spatial loops (and the tile loop) are fused into one ``parallel``
      loop when the block does enough work to pay for the OpenMP team; a
      one-dimensional elementwise loop is first split into chunks of 1024 for that.

    TVM 0.27 has no ``dlight.cpu.Fallback``; this one is built like
    ``dlight.gpu.Fallback`` (inline, then one schedule per block), with the CPU's
    parallel and vector loops in place of thread blocks and threads.
    ``vector_bits`` / ``num_cores`` as in :class:`~workbench.dlight.cpu.GEMV`.

    >>> import workbench as wb
    >>> sch = Fallback(vector_bits=256, num_cores=2).apply(wb.workloads.matmul(64, 64, 64),
    ...                                                   wb.Target("c"), False)
    >>> [sch.get(lp).kind for lp in sch.get_loops("C_update")]
    ['parallel', 'serial', 'vectorized']
    >>> wb.verify(sch, wb.workloads.matmul(64, 64, 64)).ok
    True
    """

    def apply(self, func, target, tunable) -> Schedule:
        bits, cores = self.machine()
        sch = Schedule(func)
        infos = normalize_or_decline(sch)
        for info in try_inline(sch, infos):
            lanes = C.vector_lanes(C.dtype_of(sch, info.block_rv), bits)
            self._schedule_block(sch, info, lanes, cores)
        return sch

    @staticmethod
    def _vector_loop(sch: Schedule, block: BlockRV, s_loops: list[LoopRV]) -> LoopRV | None:
        if not s_loops:
            return None
        loop = s_loops[-1]
        extent = get_extent(sch, loop)
        if isinstance(extent, int) and extent < 4:
            return None
        return loop if C.walks_last_dim(sch, block, loop) else None

    @staticmethod
    def _tile_transpose(sch: Schedule, info: BlockInfo, s_loops: list[LoopRV], vec: LoopRV,
                        outer: list[LoopRV]) -> bool:
        """An elementwise block that reads along another axis than it writes (a
        transpose, ``B[i, j] = A[j, i]``): tile both axes by ``TILE`` (``i_o, j_o, i_i,
        j_i``) so that the ``TILE`` rows of ``A`` a tile reads stay in cache while it is
        written, ``j_i`` vectorized. Leaves ``outer`` as the loops to run in parallel.
        Returns False, changing nothing, unless both extents are static multiples of
        ``TILE`` (at least two tiles)."""
        block: Block = sch.get(info.block_rv)
        reads = [r for r in block.reads if r.region]
        if not reads:
            return False
        dominant = max(reads, key=lambda r: len(
            collect_block_iter_vars_used_in_access_region(block, r.region)))
        last = expr_vars(dominant.region[-1][0])
        loop_of = {it.var: it.loop_rv for it in info.iters}
        other = [loop_of[v] for v in last if v in loop_of]
        if len(other) != 1 or other[0] == vec or other[0] not in s_loops:
            return False
        a, b = other[0], vec
        if any(not isinstance(get_extent(sch, lp), int) or get_extent(sch, lp) % TILE
               or get_extent(sch, lp) < 2 * TILE for lp in (a, b)):
            return False
        rest = [lp for lp in s_loops if lp != a and lp != b]
        ao, ai = sch.split(a, factors=[None, TILE])
        bo, bi = sch.split(b, factors=[None, TILE])
        sch.reorder(*rest, ao, bo, ai, bi)
        sch.vectorize(bi)
        outer[:] = [*rest, ao, bo]
        return True

    def _schedule_block(self, sch: Schedule, info: BlockInfo, lanes: int, cores: int) -> None:
        block = info.block_rv
        groups = C.group_loops(info)
        s_loops, r_loops, o_loops = groups["S"], groups["R"], groups["O"]
        if len(s_loops) + len(r_loops) + len(o_loops) == 0:
            return
        work = C.static_product(info.dom())
        if r_loops or o_loops:
            sch.reorder(*s_loops, *r_loops, *o_loops)
        vec = None if o_loops else self._vector_loop(sch, block, s_loops)
        outer = list(s_loops)
        if vec is not None and r_loops:
            outer.pop()
            extent = get_extent(sch, vec)
            tile = 4 * lanes
            if isinstance(extent, int):
                while tile > lanes and extent % tile:
                    tile //= 2
            if isinstance(extent, int) and extent <= tile:
                vi = vec
            else:
                vo, vi = sch.split(vec, factors=[None, tile])
                outer.append(vo)
            sch.reorder(*outer[len(s_loops) - 1:], *r_loops, vi)
            sch.vectorize(vi)
            sch.decompose_reduction(block, r_loops[0])
        elif vec is not None and not self._tile_transpose(sch, info, s_loops, vec, outer):
            outer.pop()
            extent = get_extent(sch, vec)
            if not outer and C.worth_parallel(work, extent, cores) and (
                    not isinstance(extent, int) or extent >= 2 * CHUNK):
                vo, vec = sch.split(vec, factors=[None, CHUNK])
                outer.append(vo)
            sch.vectorize(vec)
        if outer:
            fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
            if C.worth_parallel(work, get_extent(sch, fused), cores):
                sch.parallel(fused)
