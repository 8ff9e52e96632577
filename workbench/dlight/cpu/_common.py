"""What the CPU rules share: the machine's vector width and core count, when a loop
nest is worth an OpenMP ``parallel`` loop, which loop is contiguous, and the
rfactor-based horizontal reduction.

The C backend prints a ``parallel`` loop as ``#pragma omp parallel for`` and a
``vectorized`` loop as ``#pragma omp simd`` (``workbench/codegen/cstyle.py``). So, unlike
TVM's LLVM backend, a vectorized loop need not be exactly one vector long: the C compiler
strip-mines a long ``omp simd`` loop itself. A loop is split to the vector width only
where the split matters to the schedule (the lanes of a horizontal reduction, the columns
one parallel task owns).
"""

from __future__ import annotations

from collections.abc import Iterable

from ...ir import Block, BufferStore, PrimExpr, Var
from ...ir.functor import expr_vars
from ...schedule import BlockRV, LoopRV, Schedule
from ..analysis import BlockInfo, get_extent
from ..base import CPUScheduleRule

#: Iterations (of the whole loop nest) below which an OpenMP parallel loop costs more
#: than it saves: waking the thread team takes microseconds, as much as ~30k simple
#: iterations of one core.
PARALLEL_MIN_WORK = 1 << 15

_DTYPE_BITS = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 16, "int64": 64,
               "int32": 32, "int16": 16, "int8": 8, "uint64": 64, "uint32": 32,
               "uint16": 16, "uint8": 8, "bool": 8}


def vector_bits(flags: Iterable[str] | None = None) -> int:
    """The widest SIMD register of this CPU (or of ``flags``, as ``/proc/cpuinfo``
    spells them), in bits: 512 with AVX-512, 256 with AVX/AVX2, otherwise 128 (SSE,
    NEON, or a machine whose flags cannot be read).

    >>> vector_bits({"avx2", "fma"}), vector_bits({"avx512f"}), vector_bits(())
    (256, 512, 128)
    """
    if flags is None:
        from ...codegen.extern import cpu_flags

        flags = cpu_flags()
    flags = set(flags)
    if "avx512f" in flags:
        return 512
    if "avx" in flags or "avx2" in flags:
        return 256
    return 128


def vector_lanes(dtype: str, bits: int) -> int:
    """Elements of ``dtype`` in one ``bits``-wide vector (at least 2).

    >>> vector_lanes("float32", 256), vector_lanes("float16", 512), vector_lanes("float64", 64)
    (8, 32, 2)
    """
    return max(bits // _DTYPE_BITS.get(dtype, 32), 2)


def cores() -> int:
    """The cores this process may run on (the search rules' ``default_cores``)."""
    from ...search.rules import default_cores

    return default_cores()


def static_product(extents: Iterable[int | PrimExpr]) -> int | None:
    """The product of ``extents``, or None if one is symbolic."""
    out = 1
    for e in extents:
        if not isinstance(e, int):
            return None
        out *= e
    return out


def total_work(infos: Iterable[BlockInfo]) -> int | None:
    """Iterations of all the blocks together (None if one is symbolic)."""
    total = 0
    for info in infos:
        n = static_product(info.dom())
        if n is None:
            return None
        total += n
    return total


def worth_parallel(work: int | None, extent: int | PrimExpr, num_cores: int) -> bool:
    """Whether a ``parallel`` loop of ``extent`` iterations over a nest of ``work``
    iterations in all (None: symbolic, taken as large) pays for the OpenMP team."""
    if num_cores < 2 or (isinstance(extent, int) and extent < 2):
        return False
    return work is None or work >= PARALLEL_MIN_WORK


def store_of(sch: Schedule, block: BlockRV) -> BufferStore | None:
    body = sch.get(block).body
    return body if isinstance(body, BufferStore) else None


def walks_last_dim(sch: Schedule, block: BlockRV, loop: LoopRV) -> bool:
    """Whether ``loop`` moves only the last index of ``block``'s store (its iterations
    write consecutive elements: the loop to vectorize)."""
    store = store_of(sch, block)
    if store is None or not store.indices:
        return False
    b: Block = sch.get(block)
    var: Var = sch.get(loop).loop_var
    binding = dict(zip((iv.var for iv in b.iter_vars), b.iter_values, strict=True))

    def walks(index: PrimExpr) -> bool:
        return any(var in expr_vars(binding.get(v, v)) for v in expr_vars(index))

    *outer, last = store.indices
    return walks(last) and not any(walks(i) for i in outer)


def dtype_of(sch: Schedule, block: BlockRV) -> str:
    b: Block = sch.get(block)
    return b.writes[0].buffer.dtype if b.writes else "float32"


def reads_contiguous_in(block: Block, var: Var) -> list[str]:
    """Names of the buffers ``block`` reads with ``var`` in an index other than the
    last (where stepping ``var`` does not walk memory contiguously)."""
    bad = []
    for region in block.reads:
        indices = [mn for mn, _ in region.region]
        if not any(var in expr_vars(i) for i in indices):
            continue
        if any(var in expr_vars(i) for i in indices[:-1]) or var not in expr_vars(indices[-1]):
            bad.append(region.buffer.name)
    return bad


def rfactor_lanes(sch: Schedule, block: BlockRV, r_loop: LoopRV, lanes: int,
                  factor_axis: int) -> BlockRV | None:
    """The first half of a SIMD horizontal reduction over ``r_loop`` (``block``'s
    innermost loop, a reduction): split it into ``[None, lanes]`` and ``rfactor`` the
    lanes into a buffer with one more axis (at ``factor_axis``); ``block`` then sums the
    ``lanes`` partial results. Returns the rfactor block, or None, changing nothing, when
    the extent is symbolic, shorter than two vectors or not a multiple of ``lanes``.
    :func:`vectorize_lanes` finishes the job once the blocks are where they go.
    """
    extent = get_extent(sch, r_loop)
    if not isinstance(extent, int) or extent % lanes or extent < 2 * lanes:
        return None
    _, inner = sch.split(r_loop, factors=[None, lanes])
    return sch.rfactor(inner, factor_axis)


def vectorize_lanes(sch: Schedule, rf: BlockRV) -> None:
    """Vectorize the lane loop of rfactor block ``rf`` (moved innermost first: a
    ``compute_at`` rebuilds the loops in iter-var order, lane first) and move its init
    before the outer reduction loop: ``rf[.., l] = 0`` for all lanes, then
    ``rf[.., l] += A[.., ko * lanes + l]`` one vector at a time. The lanes store to
    different elements, so the C compiler keeps the ``omp simd`` (a vectorized loop
    over the reduction itself would not be: its iterations store to the same element).
    """
    block: Block = sch.get(rf)
    lane_vars = expr_vars(block.writes[0].region[-1][0])
    binding = dict(zip((iv.var for iv in block.iter_vars), block.iter_values, strict=True))
    lane_loop_vars = set().union(*(expr_vars(binding[v]) for v in lane_vars))
    reduce_loop_vars = set().union(*(expr_vars(value) for iv, value in
                                     zip(block.iter_vars, block.iter_values, strict=True)
                                     if iv.kind == "R"))
    loops = sch.get_loops(rf)
    lane = [lp for lp in loops if sch.get(lp).loop_var in lane_loop_vars]
    reduce = [lp for lp in loops if sch.get(lp).loop_var in reduce_loop_vars]
    if len(lane) != 1 or not reduce:
        raise ValueError(f'rfactor block "{block.name}": cannot find its lane loop')
    if loops.index(lane[0]) != len(loops) - 1:
        sch.reorder(*reduce, lane[0])
    sch.vectorize(lane[0])
    sch.decompose_reduction(rf, reduce[0])


def group_loops(info: BlockInfo) -> dict[str, list[LoopRV]]:
    """A normalized block's loops by iter kind: ``{"S": [...], "R": [...], "O": [...]}``."""
    groups: dict[str, list[LoopRV]] = {"S": [], "R": [], "O": []}
    for it in info.iters:
        groups[it.kind if it.kind in groups else "O"].append(it.loop_rv)
    return groups


class MachineRule(CPUScheduleRule):
    """A CPU rule that sizes its schedule to the machine: ``vector_bits`` (default: from
    the CPU's flags, :func:`vector_bits`) and ``num_cores`` (default: :func:`cores`);
    tests fix both so that the schedules do not depend on the machine."""

    def __init__(self, vector_bits: int | None = None, num_cores: int | None = None):
        self.vector_bits = vector_bits
        self.num_cores = num_cores

    def machine(self) -> tuple[int, int]:
        """``(vector bits, cores)`` this rule schedules for."""
        return self.vector_bits or vector_bits(), self.num_cores or cores()
