"""GPU schedules used by the lessons, the benches and the tests.

:func:`gpu_matmul_schedule` is the classic shared-memory tiled matmul (the
curriculum's GPU exercise): each thread block computes a ``tile x tile`` tile of ``C``;
every thread accumulates a ``per_thread x per_thread`` sub-tile in local registers;
the ``A`` and ``B`` tiles of each ``k`` step are loaded into shared memory by all the
threads of the block together (a cooperative fetch, which needs ``__syncthreads()``
before and after), and ``storage_align`` pads the rows of the ``A`` tile so that the
threads of a warp read different shared-memory banks.

>>> sch = gpu_matmul_schedule(128)
>>> [b for b in ("A_shared", "B_shared", "C_local") if sch.get_block(b)]
['A_shared', 'B_shared', 'C_local']
"""

from __future__ import annotations

from .schedule import Schedule
from .workloads import matmul

__all__ = ["gpu_matmul_schedule"]


def gpu_matmul_schedule(
    n: int = 1024,
    tile: int = 64,
    per_thread: int = 4,
    k_tile: int = 8,
    align: bool = True,
) -> Schedule:
    """The shared-memory tiled ``n x n x n`` float32 matmul for a GPU.

    Block ``tile x tile`` outputs, ``(tile / per_thread)^2`` threads per block (256
    with the defaults), ``k_tile`` columns of ``A`` / rows of ``B`` in shared memory per
    step, ``C`` accumulated in ``per_thread^2`` local registers per thread. With
    ``align=True``, ``storage_align(A_shared, axis 0, factor 32, offset 1)``.

    >>> sch = gpu_matmul_schedule(128, tile=32, per_thread=2, k_tile=8)
    >>> sch.get(sch.get_loops("C")[0]).thread_tag
    'blockIdx.y'
    """
    if tile % per_thread or n % tile or n % k_tile:
        raise ValueError(
            f"gpu_matmul_schedule: n={n} must be a multiple of tile={tile} and "
            f"k_tile={k_tile}, and tile a multiple of per_thread={per_thread}"
        )
    threads = tile // per_thread
    sch = Schedule(matmul(n, n, n))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    bi, ti, ii = sch.split(i, [None, threads, per_thread])
    bj, tj, jj = sch.split(j, [None, threads, per_thread])
    ko, ki = sch.split(k, [None, k_tile])
    sch.reorder(bi, bj, ti, tj, ko, ki, ii, jj)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    c_local = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(c_local, tj)
    for index, name in ((0, "A"), (1, "B")):
        shared = sch.cache_read(c, index, "shared")
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, ty, tx = sch.split(fused, [None, threads, threads])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        if name == "A" and align:
            sch.storage_align(shared, 0, axis=0, factor=32, offset=1)
    return sch
