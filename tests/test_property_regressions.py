"""Minimal reproductions of library bugs found by the all-primitives property test
(tests/test_property.py, ``test_random_full_schedules_*`` and longer exploratory runs).

Each test is a few Schedule calls. The expectation is the property test's invariant:
a primitive either succeeds or refuses with a ``wb.ScheduleError`` subclass, leaving
the schedule as it was; a schedule that was accepted computes what the unscheduled
function computes and its trace replays to the same IR.
"""

from __future__ import annotations

import workbench as wb
from workbench.testing import (
    access_problems,
    assert_ir_unchanged,
    assert_verifies,
    roundtrip_trace,
    shared_outer_loop_func,
)


def _refuses_cleanly(sch: wb.Schedule, call) -> None:
    """``call()`` succeeds, or raises a ScheduleError and leaves ``sch`` untouched."""
    text, length = sch.mod.script(), len(sch.trace)
    try:
        call()
    except wb.ScheduleError:
        assert_ir_unchanged(sch, text)
        assert len(sch.trace) == length


# --------------------------------------------------------------------------- 1
# compute_inline of a block that is the only statement of its scope block (here:
# inside the outer block blockize made) raises ValueError from remove_stmt
# ("cannot remove the only statement of a block") instead of a ScheduleError (TVM:
# OnlyLeafError). sample_compute_location tries compute_inline to find its
# candidates and only catches ScheduleError, so it crashes the same way.


def _blockized_relu() -> tuple[wb.Schedule, wb.schedule.BlockRV]:
    sch = wb.Schedule(wb.workloads.elementwise_chain(32, 8))
    relu = sch.get_block("relu")
    n, _ = sch.get_loops(relu)
    sch.blockize(n)  # relu_o { for n, c: relu }: relu is its scope's only leaf
    return sch, relu


def test_compute_inline_of_the_only_block_in_a_blockized_scope_refuses():
    sch, relu = _blockized_relu()
    _refuses_cleanly(sch, lambda: sch.compute_inline(relu))


def test_sample_compute_location_of_the_only_block_in_a_blockized_scope():
    sch, relu = _blockized_relu()
    _refuses_cleanly(sch, lambda: sch.sample_compute_location(relu))


# --------------------------------------------------------------------------- 2
# blockize of a reduction block puts an init block "<name>_init" into the outer
# block's T.init(). get_block finds it (block_names looks into init), but every
# primitive then says the block does not exist: get_loops raises BlockNotFoundError
# 'no block named "sum_init"' for the handle get_block just returned. Either
# get_block should refuse the name, or the handle should be usable.


def test_a_block_get_block_returns_is_usable():
    func = wb.workloads.layer_norm(2, 32)
    sch = wb.Schedule(func)
    i, _ = sch.get_loops(sch.get_block("sum"))
    sch.blockize(i)
    try:
        init = sch.get_block("sum_init")
    except wb.ScheduleError:
        return  # refusing the name is consistent
    sch.get_loops(init)
    sch.get_producers(init)
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


# --------------------------------------------------------------------------- 3
# sample_perfect_tile has no upper bound on ``n``: n=10**9 builds a list of 10**9
# tiles (``outer = [1] * (n - 1)`` in draw_perfect_tile) and raises MemoryError -- or,
# without a memory limit, gets the process killed. Run in a subprocess capped at 2
# GiB so that the suite survives either way. Expected: a ScheduleError (e.g.
# InvalidSamplingArgumentError for an n beyond what the loop can use).

_HUGE_N = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))
import workbench as wb
sch = wb.Schedule(wb.workloads.matmul(16, 16, 16), seed=0)
i, j, k = sch.get_loops(sch.get_block("C"))
try:
    sch.sample_perfect_tile(j, n=10**9)
except wb.ScheduleError:
    print("refused")
else:
    print("accepted")
"""


def test_sample_perfect_tile_with_a_huge_n_does_not_exhaust_memory():
    import subprocess
    import sys

    import pytest

    if not sys.platform.startswith("linux"):
        pytest.skip("uses RLIMIT_AS")
    done = subprocess.run(
        [sys.executable, "-c", _HUGE_N], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() in ("refused", "accepted")


# --------------------------------------------------------------------------- 4
# Wrong result: reverse_compute_at of the padding stage under the loop of a cache_read
# copy of its input makes "pad" iterate only over the region the copy produces
# (vh, vw in 1..8), not over all of pad (0..9): the zero border of pad is never written,
# conv reads uninitialised memory (112 of 256 outputs wrong, often by ~1e36). The
# lowered IR shows it: the new scope block writes pad[ax0, 0:4, 1:9, 1:9] only.
# Expected: reverse_compute_at covers the whole block (the border does not depend on
# the producer) or refuses. Found by the exploratory run of the all-primitives
# property test (random: cache_read, reverse_compute_at at data_global's first loop).


def test_reverse_compute_at_of_a_padding_block_keeps_its_border():
    func = wb.workloads.conv2d_nchw(1, 4, 8, 8, 4)
    sch = wb.Schedule(func)
    pad = sch.get_block("pad")
    data_global = sch.cache_read(pad, 0, "global")
    n, *_ = sch.get_loops(data_global)
    try:
        sch.reverse_compute_at(pad, n)
    except wb.ScheduleError:
        return  # refusing is fine
    roundtrip_trace(sch, func)
    # conv loads pad's border, which nothing stores any more
    assert access_problems(sch) == []
    for seed in range(3):  # the border is uninitialised memory: try a few inputs
        assert wb.verify(sch.mod, func, seed=seed).ok


# --------------------------------------------------------------------------- 5
# Out-of-bounds accesses: cache_read / cache_write size the copy from the consumer's
# (producer's) access region relaxed over the loops, ignoring the block predicate that
# a non-dividing split adds (T.where(i_0 * 2 + i_1 < 6)) and without clipping to the
# buffer's shape. The copy block then binds its iter var outside its domain and reads
# and writes past the end of the buffers -- for cache_write past the end of a function
# *parameter* (heap corruption in the caller's array; with a local copy on the stack
# it smashes the stack). Found with an AddressSanitizer build of the exploratory run;
# checked here on the IR (``access_problems`` runs the loop nests with numpy), without
# running the kernels, which may crash the process.


def test_cache_read_inside_a_predicated_loop_stays_in_bounds():
    func = shared_outer_loop_func(6)
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    i, _ = sch.get_loops(c)
    sch.split(i, factors=[4, 2])  # 8 iterations for 6 rows: T.where(i_0 * 2 + i_1 < 6)
    try:
        sch.cache_read(c, 0, "local")  # B_local copy goes inside loop i, before C
    except wb.ScheduleError:
        return
    # found: block "B_local" binds v0 outside [0, 6); loads B out of bounds (6, 6)
    assert access_problems(sch) == []
    assert access_problems(wb.lower(sch.mod)) == []


def test_cache_write_inside_a_predicated_loop_stays_in_bounds():
    func = shared_outer_loop_func(6)
    sch = wb.Schedule(func)
    b = sch.get_block("B")
    i, _ = sch.get_loops(b)
    sch.split(i, factors=[4, 2])
    try:
        sch.cache_write(b, 0, "local")  # copy-back B[v0] = B_local[v0] inside loop i
    except wb.ScheduleError:
        return
    # found: stores B (a parameter) out of bounds (6, 6) at i_0=3
    assert access_problems(sch) == []
    assert access_problems(wb.lower(sch.mod)) == []


def test_cache_read_in_a_blockized_predicated_nest_stays_in_bounds():
    """The schedule that crashed a verify run with SIGSEGV: A_global (heap) is written
    18 rows deep for 16."""
    func = wb.workloads.transpose(16, 24)
    sch = wb.Schedule(func)
    b = sch.get_block("B")
    _, i = sch.get_loops(b)
    sch.split(i, factors=[3, None])  # 3 x 6 = 18 for 16
    j, _, _ = sch.get_loops(b)
    sch.blockize(j)  # B_o reads A[0:18, 0:24]
    try:
        sch.cache_read(b, 0, "global")  # copies A[0:18, 0:24] into A_global (16, 24)
    except wb.ScheduleError:
        return
    assert access_problems(sch) == []
    assert access_problems(wb.lower(sch.mod)) == []


def test_cache_read_of_a_blockized_padding_stage_stays_in_bounds():
    """Same family without a split: blockize gives pad_o the read region
    data[0, 0:4, -1:9, -1:9] (the Select-guarded reads relaxed, not clipped to the
    shape), and cache_read copies exactly that: data[-1] is read, data_local[-1]
    written."""
    func = wb.workloads.conv2d_nchw(1, 4, 8, 8, 4)
    sch = wb.Schedule(func)
    pad = sch.get_block("pad")
    n, *_ = sch.get_loops(pad)
    sch.blockize(n)
    try:
        sch.cache_read(pad, 0, "local")
    except wb.ScheduleError:
        return
    # found: block "data_local" binds v2 outside [0, 8); loads data out of bounds
    assert access_problems(sch) == []


# --------------------------------------------------------------------------- 6
# Uninitialised accumulator: cache_write of a reduction's update block (after
# decompose_reduction) inside a scope that does not hold the init -- here the block
# blockize made -- makes the update accumulate into a fresh C_local that nothing
# initialises (C_init still writes C, outside), and C_local is not loaded from C
# either. The generated C reads an uninitialised stack array: at -O3 gcc happens to
# give the right sums, at -O0 all 256 outputs are ~1e23. Expected: a refusal (the
# update reads the buffer it writes, whose value comes from outside the scope), or a
# cache that starts from C.


def test_cache_write_of_an_update_block_initialises_the_cache():
    func = wb.workloads.matmul(16, 16, 16)
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    _, _, k = sch.get_loops(c)
    sch.decompose_reduction(c, k)  # C_init under j; c is C_update
    sch.blockize(k)  # C_update_o { for k: C_update }
    try:
        sch.cache_write(c, 0, "local")
    except wb.ScheduleError:
        return
    # found: loads C_local where nothing was stored before (at i=0, j=0, k=0)
    assert access_problems(sch) == []


# --------------------------------------------------------------------------- 7
# Wrong result: decompose_reduction at a loop above a loop the reduction block does
# not depend on. After compute_at(sum, j) softmax's "sum" is recomputed (init and 16
# adds) for every j of norm -- still correct. decompose_reduction(sum, i) then puts
# the init before the j loop and leaves the adds inside it: sum[i] accumulates 16
# times (120 of 128 outputs wrong). Expected: a refusal (a loop between ``loop`` and
# the block is bound to none of its iter vars), or the init placed inside that loop.
# Found twice by the exploratory run (softmax, layer_norm), via
# sample_compute_location + compute_at.


def test_decompose_reduction_above_an_unrelated_loop_keeps_the_result():
    func = wb.workloads.softmax(8, 16)
    sch = wb.Schedule(func)
    s = sch.get_block("sum")
    i, j = sch.get_loops(sch.get_block("norm"))
    sch.compute_at(s, j)
    assert wb.verify(sch.mod, func).ok
    try:
        sch.decompose_reduction(s, i)
    except wb.ScheduleError:
        return
    assert wb.verify(sch.mod, func).ok


# --------------------------------------------------------------------------- 8
# Wrong result and out-of-bounds reads: compute_at drops the predicate of the block it
# moves. split(k, [None, 5]) gives 4 x 5 = 20 iterations for 16 with
# T.where(k_0 * 5 + k_1 < 16); rfactor(k_0) makes C_rf, whose iter vars vk_0 (4) and
# vk_1 (5) keep that predicate. compute_at(C_rf, i) regenerates its loops over the
# iter var domains without the T.where, so it reads A[vi, 16..19] and B[16..19, vj]
# (past the rows' ends) and adds them in (~250 of 256 outputs wrong, up to 1e33).


def test_compute_at_keeps_the_predicate_of_the_moved_block():
    func = wb.workloads.matmul(16, 16, 16)
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    _, _, k = sch.get_loops(c)
    k0, _ = sch.split(k, factors=[None, 5])
    rf = sch.rfactor(k0, factor_axis=2)
    i = sch.get_loops(c)[0]
    try:
        sch.compute_at(rf, i)
    except wb.ScheduleError:
        return
    # found: loads A out of bounds (16, 16) (at i=0, ax0=3, ax1=0, ax2=1)
    assert access_problems(sch) == []


# =========================================================================== layout
# Bugs found by tests/test_property_layout.py (the layout, reindex, padding, partition
# and tensorize primitives mixed with the classic ones). Each: the call either refuses
# with a ScheduleError and leaves the schedule as it was, or gives a schedule that
# accesses memory in bounds, computes what the unscheduled function computes and
# replays from its trace.


def _correct_or_refused(sch: wb.Schedule, func, call) -> None:
    text, length = sch.mod.script(), len(sch.trace)
    try:
        call()
    except wb.ScheduleError:
        assert_ir_unchanged(sch, text)
        assert len(sch.trace) == length
        return
    assert access_problems(sch) == []  # (before building: the kernel may crash)
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def _partitioned(func, block: str, axis: int, factors: list) -> wb.Schedule:
    sch = wb.Schedule(func)
    sch.loop_partition(sch.get_loops(block)[axis], factors)
    return sch


# --------------------------------------------------------------------------- L1
# IndexError (not a ScheduleError) from transform_layout of a buffer a block gave an
# explicit region (annotate_buffer_access): the 2-d region was kept on the 3-d buffer.


def test_transform_layout_maps_an_explicit_region():
    from workbench.testing import chain_func

    func = chain_func(8)
    sch = wb.Schedule(func)
    sch.annotate_buffer_access("C", 0, "read", lambda vi, vj: ((0, 8), (0, 8)))
    sch.transform_layout("C", ("read", 0), "lambda i, j: (i // 2, j, i % 2)")
    region = sch.get(sch.get_block("C")).reads[0].region
    assert [(str(mn), str(ext)) for mn, ext in region] == [("0", "4"), ("0", "8"),
                                                           ("0", "2")]
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


# --------------------------------------------------------------------------- L2
# Wrong result: blockize of blocks given out of program order runs their nests in the
# order given (as TVM builds it): the copy-back of a cache_write ran before the block
# computing it.


def test_blockize_of_blocks_out_of_program_order():
    from workbench.testing import padded_func

    func = padded_func()
    sch = wb.Schedule(func)
    sch.cache_write("B", 0, "local")
    blocks = [sch.get_block(n) for n in ("B_local", "pad", "B")]
    _correct_or_refused(sch, func, lambda: sch.blockize(blocks))


# --------------------------------------------------------------------------- L3
# Wrong result: pad_einsum of a block sharing its loop nest with the producer of what
# it reads redirected the producer's stores to the padded copy, filled before the nest.


def test_pad_einsum_of_a_block_sharing_its_nest_with_a_producer():
    func = shared_outer_loop_func(6)
    sch = wb.Schedule(func)
    _correct_or_refused(sch, func, lambda: sch.pad_einsum("C", [1, 4]))


# --------------------------------------------------------------------------- L4
# Loops not starting at 0 (loop_partition pieces). Wrong results or out-of-bounds
# accesses (pad_einsum's kernel crashed): reindex of a write and pad_einsum copied
# whole domains back; cache_write and transform_layout took a piece's range as [0,
# extent); decompose_padding filled the wrong range; decompose_reduction hoisted an init
# the piece never runs; blockize(preserve_unit_iters=False) bound a unit piece to 0;
# write_at gave its copy an iter var over [0, extent).


def test_reindex_write_of_a_partition_piece():
    func = wb.workloads.matmul(16, 16, 16)
    sch = _partitioned(func, "C", 0, [None, 6])
    _correct_or_refused(sch, func, lambda: sch.reindex("C_i1", ("write", 0)))


def test_pad_einsum_of_a_partition_piece():
    func = wb.workloads.matmul(16, 16, 16)
    sch = _partitioned(func, "C", 0, [None, 6])
    _correct_or_refused(sch, func, lambda: sch.pad_einsum("C_i1", [32, 1, 1]))


def test_cache_write_of_a_partition_piece():
    func = wb.workloads.matmul(16, 16, 16)
    sch = _partitioned(func, "C", 0, [None, 6])
    _correct_or_refused(sch, func, lambda: sch.cache_write("C_i1", 0, "global"))


def test_transform_layout_under_a_partition_piece():
    func = wb.from_script('''
@T.prim_func
def g(A: T.Buffer((32,), "float32"), C: T.Buffer((32,), "float32")):
    B = T.alloc_buffer((32,))
    for i in range(32):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)
    for i in range(32):
        with T.block("C"):
            T.reads(B[i])
            T.writes(C[i])
            C[i] = B[i] + T.float32(1)
''')
    sch = _partitioned(func, "C", 0, [None, 12])  # C_i1 over range(20, 32)
    _correct_or_refused(
        sch, func, lambda: sch.transform_layout("B", ("write", 0), "lambda i: (i // 16, i % 16)"))


def test_decompose_padding_of_a_partition_piece():
    from workbench.testing import padded_func

    func = padded_func(8, 2)
    sch = _partitioned(func, "pad", 0, [None, 3])
    blk = sch.get_block("pad_i1")
    loop = sch.get_loops(blk)[0]
    _correct_or_refused(sch, func, lambda: sch.decompose_padding(blk, loop))


def test_decompose_reduction_of_a_partition_piece_of_the_reduction():
    func = wb.workloads.matmul(16, 16, 16)
    sch = _partitioned(func, "C", 2, [5, 2])  # k: [0, 5), [5, 7), [7, 16)
    blk = sch.get_block("C_k1")
    loop = sch.get_loops(blk)[-1]
    _correct_or_refused(sch, func, lambda: sch.decompose_reduction(blk, loop))


def test_blockize_below_a_unit_partition_piece():
    func = wb.workloads.matmul(8, 8, 8)
    sch = wb.Schedule(func)
    sch.transform_block_layout("C", lambda i, j, k: (i, k, j))  # loops i, k, j
    sch.loop_partition(sch.get_loops("C")[1], [2, 1])  # C_ax11: range(2, 3), then j
    j = sch.get_loops("C_ax11")[-1]
    _correct_or_refused(sch, func, lambda: sch.blockize(j, preserve_unit_iters=False))


def test_write_at_a_partition_piece():
    func = wb.workloads.matmul(8, 8, 8)
    sch = _partitioned(func, "C", 1, [2, 4])  # j2 over range(6, 8)
    blk = sch.get_block("C_j2")
    sch.reindex_cache_write(blk, 0, "shared", lambda i, j, k: (j, i))
    loop = sch.get_loops(blk)[1]
    _correct_or_refused(sch, func, lambda: sch.write_at(loop, blk, 0, "local"))


# --------------------------------------------------------------------------- L5
# Wrong result: compute_at of loop_partition's opaque "<B>_<i>_common" block, whose
# inner blocks bind to the loop around it: moved under the consumer's loop, they used
# the removed loop's variable (the C build refused it).


def test_compute_at_of_a_partition_common_block():
    func = wb.workloads.elementwise_chain(32, 8)
    sch = _partitioned(func, "batch_norm", 1, [5, None])
    common = sch.get_block("batch_norm_c_common")
    loop = sch.get_loops(sch.get_consumers(common)[0])[0]
    _correct_or_refused(sch, func, lambda: sch.compute_at(common, loop))


# --------------------------------------------------------------------------- L6
# Wrong results from reindex: of an init block whose loop nest also holds the update
# (the copy back went after the whole nest and undid the updates), and of an update
# block without init (the new buffer started uninitialised).


def test_reindex_of_an_init_block_sharing_its_nest():
    from workbench.testing import pool_chain_func

    func = pool_chain_func()
    sch = wb.Schedule(func)
    b = sch.get_block("B")
    sch.decompose_reduction(b, sch.get_loops(b)[2])  # B_init beside the k loop
    _correct_or_refused(sch, func, lambda: sch.reindex("B_init", ("write", 0)))


def test_reindex_write_of_an_update_block():
    func = wb.workloads.matmul(8, 8, 8)
    sch = wb.Schedule(func)
    sch.decompose_reduction("C", sch.get_loops("C")[0])
    _correct_or_refused(sch, func, lambda: sch.reindex("C_update", ("write", 0)))


# --------------------------------------------------------------------------- L7
# Out-of-bounds accesses: reindex_cache_write's copy block repeated the block's loops
# but not its predicate (a split that does not divide).


def test_reindex_cache_write_keeps_the_predicate():
    from workbench.testing import padded_func

    func = padded_func()
    sch = wb.Schedule(func)
    sch.split(sch.get_loops("pad")[0], [None, 9, 3])
    _correct_or_refused(
        sch, func, lambda: sch.reindex_cache_write("pad", 0, "local", lambda i: (i,)))


# --------------------------------------------------------------------------- L8
# rolling_buffer: decompose_reduction afterwards dropped the opaque rolling iter var
# from the init (a dangling variable); a rolling buffer on read_at's copy block (a
# block writing three rows per instance) skipped new rows with the overlap.


def _rolling_pool() -> tuple[wb.Schedule, wb.PrimFunc]:
    from workbench.testing import pool_chain_func

    func = pool_chain_func()
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    sch.compute_at(sch.get_block("B"), sch.get_loops(c)[1], preserve_unit_loops=False)
    return sch, func


def test_decompose_reduction_after_rolling_buffer():
    sch, func = _rolling_pool()
    sch.rolling_buffer("B", 0)
    b = sch.get_block("B")
    loop = sch.get_loops(b)[0]
    _correct_or_refused(sch, func, lambda: sch.decompose_reduction(b, loop))


def test_rolling_buffer_of_a_copy_block_writing_rows():
    from workbench.testing import pool_chain_func

    func = pool_chain_func()
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    copy = sch.read_at(sch.get_loops(c)[1], c, 0, "global")
    _correct_or_refused(sch, func, lambda: sch.rolling_buffer(copy, 0))


# --------------------------------------------------------------------------- L9
# tile_with_tensor_intrin records several instructions; a refusal after the first
# split left those splits applied.

_MM4_DESC = '''
@T.prim_func
def mm4(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"),
        C: T.Buffer((4, 4), "float32")):
    for i, j, k in T.grid(4, 4, 4):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def test_tile_with_tensor_intrin_refuses_all_or_nothing():
    wb.TensorIntrin.register("regression_mm4_plain", _MM4_DESC, _MM4_DESC, override=True)
    sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
    c = sch.get_block("C")
    sch.decompose_reduction(c, sch.get_loops(c)[0])
    sch.bind(sch.get_loops(c)[0], "blockIdx.y")  # the second split refuses a bound loop
    _refuses_cleanly(sch, lambda: sch.tile_with_tensor_intrin(c, "regression_mm4_plain"))


# --------------------------------------------------------------------------- L10
# Out-of-bounds reads: pad_einsum of a block iterating over part of a buffer (the first
# loop_partition piece, vj over 18 of 24 columns) sized the padded copy by the
# iteration (20) but copied back the whole buffer (24).


def test_pad_einsum_of_a_block_covering_part_of_a_buffer():
    func = wb.workloads.transpose(16, 24)
    sch = _partitioned(func, "B", 0, [None, 3, 3])  # B_j0 over [0, 18)
    _correct_or_refused(sch, func, lambda: sch.pad_einsum("B_j0", [4, 1]))
