"""The GPU rule for RMS normalization, ``y = x * rsqrt(mean(x^2) + eps) * w`` (TVM's
``dlight.gpu.RMSNorm``).

The function must have the shape such a norm is legalized to: (optional casts,)
squares, their sum over the last axis, an ``rsqrt`` of it, the normalized product
(and an optional cast of the result). The rule gives each row one thread block of
512 threads. Every thread loads its 8 neighbouring elements of the row into
registers once (vectorized), squares and sums them; the block combines the 512
partial sums (a cross-thread reduction); one thread computes the ``rsqrt`` into
shared memory; then every thread scales its 8 elements, still in registers, and
stores them (vectorized).
"""

from __future__ import annotations

from ...ir import Block
from ...ir.expr import BufferLoad, Call, Cast
from ...ir.stmt import BufferStore
from ...schedule import BlockRV, Schedule
from ..analysis import get_root_block
from ..base import Declined, GPUScheduleRule

__all__ = ["RMSNorm"]


def is_cast_or_copy(block: Block) -> bool:
    """``B[idx] = A[idx]`` or ``B[idx] = T.Cast(dtype, A[idx])``, same indices."""
    if len(block.reads) != 1 or len(block.writes) != 1:
        return False
    store = block.body
    if not isinstance(store, BufferStore):
        return False
    load = store.value.value if isinstance(store.value, Cast) else store.value
    if not isinstance(load, BufferLoad) or len(load.indices) != len(store.indices):
        return False
    return all(a is b for a, b in zip(load.indices, store.indices, strict=True))


def is_rsqrt(block: Block) -> bool:
    """``B[idx] = T.rsqrt(...)`` reading one buffer."""
    if len(block.reads) != 1 or len(block.writes) != 1:
        return False
    store = block.body
    return (isinstance(store, BufferStore) and isinstance(store.value, Call)
            and store.value.op == "rsqrt")


class RMSNorm(GPUScheduleRule):
    """RMS norm: one thread block of 512 threads per row, 8 elements per thread kept
    in registers between the sum of squares and the scaling (TVM's
    ``dlight.gpu.RMSNorm``). The blocks must be: squares, their row sum, an ``rsqrt``,
    the product (casts of the input, the weight and the output may come around them).

    >>> import workbench as wb
    >>> from workbench.dlight.gpu.rmsnorm import rms_norm_example
    >>> sch = RMSNorm().apply(rms_norm_example(), wb.Target("cuda"), False)
    >>> [sch.get(lp).thread_tag for lp in sch.get_loops("T_rms_norm")]
    ['blockIdx.x', 'threadIdx.x', None, None]
    """

    num_tx = 512
    vector = 8

    def apply(self, func, target, tunable) -> Schedule:
        sch = Schedule(func)
        root = get_root_block(sch)
        blocks = sch.get_child_blocks(root)
        if not blocks:
            raise Declined("no block to schedule")
        if not any(is_rsqrt(sch.get(b)) for b in blocks):
            raise Declined("no block computes T.rsqrt of a single buffer (the 1 / RMS)")
        sch.cache_read(blocks[0], 0, "local")
        sch.cache_write(blocks[-1], 0, "local")
        for b in blocks:
            if is_cast_or_copy(sch.get(b)):
                sch.compute_inline(b)
        blocks = sch.get_child_blocks(root)
        names = [sch.get(b).name for b in blocks]
        if len(blocks) != 6:
            raise Declined(f"{len(blocks)} blocks after inlining casts ({', '.join(names)}); "
                           "an RMS norm has 6: load, square, sum, rsqrt, scale, store")
        read, sqr, redsum, rsqrt, norm, write = blocks
        if not is_rsqrt(sch.get(rsqrt)):
            raise Declined(f'block "{names[3]}" (the fourth) does not compute T.rsqrt')
        if "R" not in "".join(iv.kind for iv in sch.get(redsum).iter_vars):
            raise Declined(f'block "{names[2]}" (the third) is not a reduction')
        for b in blocks:
            loops = sch.get_loops(b)
            if len(loops) < 2:
                raise Declined(f'block "{sch.get(b).name}" has fewer than 2 loops (rows, '
                               "then the normalized axis)")
            if len(loops) > 2:
                sch.fuse(*loops[:-1])
        self._schedule(sch, read, sqr, redsum, rsqrt, norm, write)
        return sch

    def _schedule(self, sch: Schedule, read: BlockRV, sqr: BlockRV, redsum: BlockRV,
                  rsqrt: BlockRV, norm: BlockRV, write: BlockRV) -> None:
        num_tx, vec = self.num_tx, self.vector
        row, cols = sch.get_loops(read)
        tx, _, _ = sch.split(cols, factors=[num_tx, None, vec])
        sch.bind(row, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(sch.get_loops(read)[-1])
        sch.reverse_compute_at(sqr, tx)
        sch.reverse_compute_at(redsum, tx)
        sch.reverse_compute_at(rsqrt, row, index=-1)
        sch.reverse_compute_at(norm, row, index=-1)
        row, cols = sch.get_loops(norm)
        tx, _, _ = sch.split(cols, factors=[num_tx, None, vec])
        sch.bind(tx, "threadIdx.x")
        sch.reverse_compute_at(write, tx, index=-1)
        sch.vectorize(sch.get_loops(write)[-1])
        sch.set_scope(sqr, 0, "local")
        sch.set_scope(redsum, 0, "local")
        sch.set_scope(rsqrt, 0, "shared")
        sch.set_scope(norm, 0, "local")
        # TVM runs the rsqrt block on every thread (each storing the same value into
        # shared memory); one thread (threadIdx.x == 0) storing it is the same, race free
        sch.bind(sch.add_unit_loop(rsqrt), "threadIdx.x")


def rms_norm_example(n: int | str = "n", hidden: int = 4096, dtype: str = "float32"):
    """An RMS norm as a compiler legalizes it (the test function of TVM's rule):
    ``data (1, n, hidden)``, ``weight (hidden,)``; blocks ``T_multiply`` (squares),
    ``T_multiply_red`` (their sum), ``rsqrt``, ``T_rms_norm``; with ``dtype="float16"``
    the input, weight and output are half precision, cast to float32 around the math.

    >>> import workbench as wb
    >>> wb.ir.block_names(rms_norm_example(2, 64))
    ['T_multiply', 'T_multiply_red', 'rsqrt', 'T_rms_norm']
    """
    from ...script import from_script

    half = dtype != "float32"
    rows = f"T.int64({n})" if isinstance(n, int) else n
    header = "" if isinstance(n, int) else f'{n} = TypeVar("{n}")\n'
    x = "T_cast_1" if half else "data"
    w = "T_cast_2[v2]" if half else "weight[v2]"
    pre = f'''
    for a0, a1, a2 in T.grid(T.int64(1), {rows}, T.int64({hidden})):
        with T.block("T_cast"):
            v0, v1, v2 = T.axis.remap("SSS", [a0, a1, a2])
            T_cast_1[v0, v1, v2] = T.Cast("float32", data[v0, v1, v2])''' if half else ""
    wcast = f'''
    for a0 in range(T.int64({hidden})):
        with T.block("T_cast_1"):
            v2 = T.axis.spatial(T.int64({hidden}), a0)
            T_cast_2[v2] = T.Cast("float32", weight[v2])''' if half else ""
    out = "T_rms" if half else "T_out"
    post = f'''
    for a0, a1, a2 in T.grid(T.int64(1), {rows}, T.int64({hidden})):
        with T.block("T_cast_2"):
            v0, v1, v2 = T.axis.remap("SSS", [a0, a1, a2])
            T_out[v0, v1, v2] = T.Cast("{dtype}", T_rms[v0, v1, v2])''' if half else ""
    allocs = (f'''
    T_cast_1 = T.alloc_buffer((T.int64(1), {rows}, T.int64({hidden})))
    T_cast_2 = T.alloc_buffer((T.int64({hidden}),))
    T_rms = T.alloc_buffer((T.int64(1), {rows}, T.int64({hidden})))''' if half else "")
    text = f'''{header}
@T.prim_func
def rms_norm(data: T.Buffer((T.int64(1), {rows}, T.int64({hidden})), "{dtype}"),
             weight: T.Buffer((T.int64({hidden}),), "{dtype}"),
             T_out: T.Buffer((T.int64(1), {rows}, T.int64({hidden})), "{dtype}")):
    T_multiply = T.alloc_buffer((T.int64(1), {rows}, T.int64({hidden})))
    T_multiply_red = T.alloc_buffer((T.int64(1), {rows}))
    rsqrt = T.alloc_buffer((T.int64(1), {rows})){allocs}{pre}
    for a0, a1, a2 in T.grid(T.int64(1), {rows}, T.int64({hidden})):
        with T.block("T_multiply"):
            v0, v1, v2 = T.axis.remap("SSS", [a0, a1, a2])
            T_multiply[v0, v1, v2] = {x}[v0, v1, v2] * {x}[v0, v1, v2]
    for a0, a1, k in T.grid(T.int64(1), {rows}, T.int64({hidden})):
        with T.block("T_multiply_red"):
            v0, v1, vk = T.axis.remap("SSR", [a0, a1, k])
            with T.init():
                T_multiply_red[v0, v1] = T.float32(0)
            T_multiply_red[v0, v1] = T_multiply_red[v0, v1] + T_multiply[v0, v1, vk]
    for a0, a1 in T.grid(T.int64(1), {rows}):
        with T.block("rsqrt"):
            v0, v1 = T.axis.remap("SS", [a0, a1])
            rsqrt[v0, v1] = T.rsqrt(T_multiply_red[v0, v1] * T.float32({1.0 / hidden!r})
                                    + T.float32(1e-06)){wcast}
    for a0, a1, a2 in T.grid(T.int64(1), {rows}, T.int64({hidden})):
        with T.block("T_rms_norm"):
            v0, v1, v2 = T.axis.remap("SSS", [a0, a1, a2])
            {out}[v0, v1, v2] = rsqrt[v0, v1] * {x}[v0, v1, v2] * {w}{post}
'''
    return from_script(text)
