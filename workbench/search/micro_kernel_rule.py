"""A BLIS-like design space for float32 matmul on x86: a register-blocked FMA micro-kernel
(a tensor intrinsic of :mod:`workbench.tensor_intrin.cpu`) inside packed, K-blocked panels.

:func:`micro_kernel_rule` schedules one matmul block ``C[i, j] += A[i, k] * B[k, j]``
(float32, two-dimensional operands) with ordinary primitives, the way OpenBLAS and BLIS
structure their kernels:

1. the micro-kernel is the FMA intrinsic with the most accumulators that the CPU flags
   allow (:func:`~workbench.tensor_intrin.cpu.best_fma_intrin`: ``rows x cols`` = 6x16 on
   AVX2 + FMA, 8x32 on AVX-512), made with a K block ``kc`` (``fma_intrin(rows, cols,
   kc)``): its ``rows x cols`` accumulators stay in registers over ``kc`` steps, so ``C``
   is loaded and stored once per K block;
2. ``pad_einsum`` pads ``i`` to a multiple of ``rows`` and ``j`` to a multiple of
   ``cols`` when they do not divide (zero-filled copies, ``C`` copied back);
3. ``A`` is packed into ``rows x kc`` micro-panels (``transform_layout`` of its padded
   copy, or of a ``cache_read`` copy, by ``(i, k) -> (k // kc, i // rows, i % rows, k %
   kc)``) and ``B`` into ``cols``-wide panels (``(k, j) -> (j // cols, k, j % cols)``); both
   copies iterate in the packed order (``transform_block_layout``), in parallel, with
   their contiguous loops vectorized;
4. loops ``j0 (parallel), k0, i0, i1, j1`` around the micro-kernel (``tensorize``):
   one ``rows x kc`` micro-panel of ``A`` stays in L1 while the ``cols``-wide panels of
   ``B`` stream past it.

The tunable choices are sampled, so the tuner's mutators can move them: ``kc``
(``sample_categorical`` among the divisors of ``K`` from ``MIN_KC`` to ``MAX_KC``, larger
ones likelier), the number of parallel column chunks and panels per chunk
(``sample_perfect_tile`` of the ``cols``-panels, at least one chunk per core when there
are enough panels) and the row blocking ``i0 x i1`` (``sample_perfect_tile`` of the
``rows``-panels). A mutated ``kc`` changes the intrinsic and the packed layouts, which the
trace records literally, so such a child no longer replays and the search discards it;
the other decisions are values and replay.

Measured on an AMD EPYC (Zen 3, AVX2 + FMA, 2 cores), one thread, CPU time, side by side
with NumPy's OpenBLAS in one process: 512^3 0.95-0.98x NumPy (kc 512), 1024^3 0.93-0.99x
(kc 1024; ``wb.tune`` with 32 trials finds it). The micro-kernel alone runs at 99% of the
core's FMA peak; around it, the packing and padding copies take about 5% of the time at
512^3 and the page faults of the kernel's freshly allocated buffers about 3%.

>>> import workbench as wb
>>> func = wb.workloads.matmul(96, 64, 256)
>>> space = micro_kernel_space(func, {"avx2", "fma"})
>>> sch = wb.Schedule(func, seed=0)
>>> space(sch)
>>> any("x86_fma_f32_6x16x" in line for line in sch.trace.lines())
True
>>> micro_kernel_space(wb.workloads.softmax(4, 8), {"avx2", "fma"}) is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..ir import Block, BufferLoad, BufferStore, IRModule, PrimFunc
from ..ir.analysis import iter_blocks
from ..ir.expr import Add, Mul, Var
from ..runtime.peak import VectorIsa
from ..schedule import BlockRV, Schedule, Trace
from ..tensor_intrin import cpu
from .rules import default_cores

__all__ = [
    "MAX_KC",
    "MIN_KC",
    "MIN_EXTENT",
    "ensure_intrinsics",
    "flags_of_isa",
    "kc_candidates",
    "matmul_operands",
    "micro_kernel_for",
    "micro_kernel_rule",
    "micro_kernel_space",
]

#: K blocks the rule samples lie in ``[MIN_KC, MAX_KC]`` (the whole K when it is smaller).
MIN_KC = 128
MAX_KC = 1024
#: at most this many K-block candidates (the largest divisors; larger K blocks load and
#: store the ``C`` tile fewer times, which measured faster up to the whole of K = 1024)
KC_CHOICES = 3
#: below this extent in any of ``i``, ``j``, ``k`` :func:`micro_kernel_space` declines: the
#: padding and packing copies then cost more than the micro-kernel gains
MIN_EXTENT = 64


def _flags(isa_flags: Iterable[str] | None) -> frozenset[str]:
    return cpu.cpu_flags() if isa_flags is None else frozenset(isa_flags)


def ensure_intrinsics(trace: Trace) -> list[str]:
    """Make and register the K-blocked FMA intrinsics (``x86_fma_f32_{rows}x{cols}x{k}_{isa}``,
    which :func:`~workbench.tensor_intrin.cpu.fma_intrin` makes on first use) that the
    ``tensorize`` steps of ``trace`` name, and return their names. ``tensorize`` makes
    them itself when a trace replays (:func:`~workbench.tensor_intrin.cpu.fma_intrin_named`);
    this makes them ahead of it.

    >>> from workbench.schedule import Trace
    >>> ensure_intrinsics(Trace())
    []
    """
    made = (cpu.fma_intrin_named(inst.arg("tensor_intrin"))
            for inst in trace if inst.kind == "Tensorize")
    return [kernel.name for kernel in made if kernel is not None]


def flags_of_isa(isa: VectorIsa) -> frozenset[str]:
    """The CPU flags that a :class:`~workbench.runtime.peak.VectorIsa` stands for, as far
    as the FMA micro-kernels care (so a space built from
    :class:`~workbench.search.space.CpuSpaceSettings` picks the same kernel).

    >>> from workbench.runtime.peak import vector_isa
    >>> sorted(flags_of_isa(vector_isa({"avx2", "fma"})))
    ['avx2', 'fma']
    >>> flags_of_isa(vector_isa({"avx2"}))
    frozenset({'avx2'})
    """
    if isa.name == "avx512f":
        return frozenset({"avx512f", "avx2", "fma"})
    if isa.name in ("avx2", "avx"):
        return frozenset({isa.name} | ({"fma"} if isa.fma else set()))
    return frozenset()


def micro_kernel_for(isa_flags: Iterable[str] | None = None) -> tuple[int, int, str] | None:
    """``(rows, cols, isa)`` of the FMA micro-kernel the rule uses on a CPU with
    ``isa_flags`` (``/proc/cpuinfo`` spelling; None: this machine's): the intrinsic with
    the most accumulators those flags run, or None when they run none.

    >>> micro_kernel_for({"avx2", "fma"})
    (6, 16, 'avx2')
    >>> micro_kernel_for({"avx512f", "avx2", "fma"})
    (8, 32, 'avx512')
    >>> micro_kernel_for({"sse2"}) is None
    True
    """
    name = cpu.best_fma_intrin(_flags(isa_flags))
    if name is None:
        return None
    kernel = cpu.MICRO_KERNELS[name]
    rows, cols, _ = kernel.tile
    isa = next(n for n, spec in cpu.FMA_ISAS.items() if spec.requires == kernel.requires)
    return rows, cols, isa


def matmul_operands(block: Block) -> tuple[str, str, str] | None:
    """The buffer names ``(A, B, C)`` when ``block`` is ``C[i, j] = C[i, j] + A[i, k] *
    B[k, j]`` over float32 two-dimensional buffers (spatial ``i, j``, reduction ``k``,
    with an init), else None.

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(8, 8, 8)
    >>> matmul_operands(wb.ir.analysis.block_path(func, "C")[-1])
    ('A', 'B', 'C')
    """
    if block.init is None or len(block.iter_vars) != 3:
        return None
    if [iv.kind for iv in block.iter_vars] != ["S", "S", "R"]:
        return None
    vi, vj, vk = (iv.var for iv in block.iter_vars)
    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, Add):
        return None
    acc, prod = store.value.a, store.value.b
    if isinstance(prod, BufferLoad) and isinstance(acc, Mul):
        acc, prod = prod, acc
    if not (isinstance(acc, BufferLoad) and isinstance(prod, Mul)):
        return None
    a, b = prod.a, prod.b
    if not (isinstance(a, BufferLoad) and isinstance(b, BufferLoad)):
        return None

    def indexed(load: BufferStore | BufferLoad, x: Var, y: Var) -> bool:
        idx = load.indices
        return (len(idx) == 2 and idx[0] is x and idx[1] is y
                and len(load.buffer.shape) == 2 and load.buffer.dtype == "float32")

    if not (indexed(store, vi, vj) and indexed(acc, vi, vj) and acc.buffer is store.buffer):
        return None
    if not indexed(a, vi, vk):
        a, b = b, a
    if not (indexed(a, vi, vk) and indexed(b, vk, vj)):
        return None
    if len({a.buffer.name, b.buffer.name, store.buffer.name}) != 3:
        return None
    return a.buffer.name, b.buffer.name, store.buffer.name


def kc_candidates(k: int) -> list[int]:
    """The K blocks the rule samples for a reduction of extent ``k``: its largest
    divisors in ``[MIN_KC, MAX_KC]`` (at most ``KC_CHOICES``), else ``k`` itself.

    >>> kc_candidates(1024), kc_candidates(512), kc_candidates(100), kc_candidates(1031)
    ([256, 512, 1024], [128, 256, 512], [100], [1031])
    """
    found = [d for d in range(MIN_KC, min(k, MAX_KC) + 1) if k % d == 0]
    return found[-KC_CHOICES:] if found else [k]


def _find_matmul(func: PrimFunc) -> tuple[str, tuple[str, str, str]] | None:
    compute = [b for b in iter_blocks(func.body) if b is not func.body]
    if len(compute) != 1:
        return None
    ops = matmul_operands(compute[0])
    return (compute[0].name, ops) if ops is not None else None


def _producer(sch: Schedule, buffer_name: str) -> str | None:
    for b in iter_blocks(sch.func.body):
        if b is not sch.func.body and any(w.buffer.name == buffer_name for w in b.writes):
            return b.name
    return None


def _pack(sch: Schedule, block: BlockRV, index: int, index_map: Callable) -> str:
    """Pack the ``index``-th read of ``block`` by ``index_map``: its padded copy when it
    has one, else a ``cache_read`` copy; the copy then iterates in the packed order.
    Returns the copy block's name."""
    buf = sch.get(block).reads[index].buffer
    source = _producer(sch, buf.name)
    if source is None:
        sch.cache_read(block, index, "global")
        buf = sch.get(block).reads[index].buffer
        source = _producer(sch, buf.name)
    assert source is not None
    sch.transform_layout(block, ("read", index), index_map)
    sch.transform_block_layout(source, index_map)
    return source


def _vectorize_last(sch: Schedule, loops: list, lanes: int) -> None:
    last = loops[-1]
    if sch.get(last).extent % lanes == 0:
        sch.vectorize(sch.split(last, factors=[None, lanes])[1])


def micro_kernel_rule(sch: Schedule, block: BlockRV | str,
                      isa_flags: Iterable[str] | None = None, *,
                      num_cores: int | None = None) -> bool:
    """Schedule the matmul ``block`` of ``sch`` around the FMA micro-kernel of a CPU
    with ``isa_flags`` (None: this machine), sampling the K block, the parallel column
    chunks and the row blocking (see the module docstring). Returns False, changing
    nothing, when the block is not a float32 matmul, the function has other blocks, or
    the flags run no FMA micro-kernel.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(64, 64, 64), seed=1)
    >>> micro_kernel_rule(sch, "C", {"avx512f", "avx2", "fma"})
    True
    >>> micro_kernel_rule(wb.Schedule(wb.workloads.matmul(64, 64, 64)), "C", {"sse2"})
    False
    """
    kernel = micro_kernel_for(isa_flags)
    found = _find_matmul(sch.func)
    if kernel is None or found is None:
        return False
    block_name = found[0]
    if isinstance(block, str):
        if block != block_name:
            return False
        block = sch.get_block(block)
    elif sch.get(block).name != block_name:
        return False
    rows, cols, isa = kernel
    lanes = cpu.FMA_ISAS[isa].lanes
    cores = num_cores or default_cores()
    m, n, k = (sch.get(loop).extent for loop in sch.get_loops(block))
    if not all(isinstance(e, int) for e in (m, n, k)):
        return False  # symbolic extents: the tiles must be known

    kcs = kc_candidates(k)
    kc_rv = sch.sample_categorical(kcs, [float(i + 1) for i in range(len(kcs))])
    kc = int(sch.get(kc_rv))
    intrin = cpu.fma_intrin(rows, cols, kc, isa)
    if m % rows or n % cols:
        sch.pad_einsum(block, [rows, cols, 1])
    a_copy = _pack(sch, block, 0, lambda i, kk: (kk // kc, i // rows, i % rows, kk % kc))
    b_copy = _pack(sch, block, 1, lambda kk, j: (j // cols, kk, j % cols))

    padded_out = sch.get(block).writes[0].buffer.name
    i, j, kk = sch.get_loops(block)
    i_out, i_rows = sch.split(i, factors=[None, rows])
    j_out, j_cols = sch.split(j, factors=[None, cols])
    panels = sch.get(j_out).extent
    chunk = max(1, panels // cores)
    j0_rv, j1_rv = sch.sample_perfect_tile(j_out, n=2, max_innermost_factor=chunk)
    j0, j1 = sch.split(j_out, factors=[j0_rv, j1_rv])
    i0_rv, i1_rv = sch.sample_perfect_tile(i_out, n=2, max_innermost_factor=-1)
    i0, i1 = sch.split(i_out, factors=[i0_rv, i1_rv])
    k0, k1 = sch.split(kk, factors=[None, kc_rv])
    sch.reorder(j0, k0, i0, i1, j1, i_rows, j_cols, k1)
    sch.parallel(j0)
    init = sch.decompose_reduction(block, k0)
    _vectorize_last(sch, sch.get_loops(init), lanes)
    sch.tensorize(i_rows, intrin.name)

    a_loops = sch.get_loops(a_copy)  # k // kc, i // rows, i % rows, k % kc
    sch.parallel(sch.fuse(a_loops[0], a_loops[1]))
    _vectorize_last(sch, a_loops, lanes)
    b_loops = sch.get_loops(b_copy)  # j // cols, k, j % cols
    sch.parallel(b_loops[0])
    _vectorize_last(sch, b_loops, lanes)
    out = found[1][2]
    if padded_out != out:  # the copy of the padded output back into it
        back = next(b.name for b in iter_blocks(sch.func.body)
                    if any(w.buffer.name == out for w in b.writes)
                    and any(r.buffer.name == padded_out for r in b.reads))
        loops = sch.get_loops(back)
        sch.parallel(loops[0])
        _vectorize_last(sch, loops, lanes)
    return True


def micro_kernel_space(func: PrimFunc | IRModule, isa_flags: Iterable[str] | None = None,
                       *, num_cores: int | None = None,
                       min_extent: int = MIN_EXTENT) -> Callable[[Schedule], None] | None:
    """A design space (``space(sch) -> None``) that schedules the float32 matmul ``func``
    around the FMA micro-kernel of a CPU with ``isa_flags`` (None: this machine), for
    ``wb.tune(func, space)``; None when ``func`` is not a single float32 matmul block,
    any of its extents is below ``min_extent``, or the flags run no FMA micro-kernel. See
    :func:`micro_kernel_rule`.

    >>> import workbench as wb
    >>> func = wb.workloads.matmul(96, 64, 256)
    >>> space = micro_kernel_space(func, {"avx512f"})
    >>> sch = wb.Schedule(func, seed=2)
    >>> space(sch)
    >>> any("x86_fma_f32_8x32x" in line for line in sch.trace.lines())
    True
    """
    if isinstance(func, IRModule):
        if len(func) != 1:
            return None
        func = func[func.names[0]]
    flags = _flags(isa_flags)
    found = _find_matmul(func)
    if found is None or micro_kernel_for(flags) is None:
        return None
    block_name = found[0]
    block = next(b for b in iter_blocks(func.body) if b.name == block_name)
    if any(not isinstance(iv.extent, int) or iv.extent < min_extent for iv in block.iter_vars):
        return None

    def space(sch: Schedule) -> None:
        """Schedule the matmul around the FMA micro-kernel, sampling its tunables."""
        if not micro_kernel_rule(sch, block_name, flags, num_cores=num_cores):
            raise ValueError(f"micro_kernel_space: block {block_name!r} is not the float32 "
                             "matmul this space was made for")

    space.__qualname__ = space.__name__ = f"micro_kernel_space_{func.name}"
    return space
