"""The emulator's instruments: race check and memory profile.

The runtime is driven first by small hand-written C programs (each ``int32_t name(void)``
below plays one scenario: the calls an emulated kernel would make), then end to end
through the emulator on the curriculum's GPU matmul.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import c_function
from workbench.codegen import gpu_instrument as gi
from workbench.codegen.emulate import emulate_device_function, instrument_tables
from workbench.codegen.gpu import plan_device_module
from workbench.codegen.gpu_plan import is_barrier
from workbench.gpu_examples import gpu_matmul_schedule
from workbench.ir.functor import Mutator
from workbench.ir.stmt import Evaluate
from workbench.runtime import compile_and_load

# Helpers (C): one thread block runs its threads one after another, as the emulator does.
SCENARIOS = r"""
#define ACC(buf, space, w, idx, t, stmt) wb_gpu_access(buf, space, w, idx, 4 * (idx), 4, t, stmt)

/* thread t writes S[t], then reads S[t - 1], with no barrier: thread 1 reads what
   thread 0 wrote */
int32_t raw_missing_barrier(void) {
  wb_gpu_kernel_begin(0, 2, 1, 1, 8, 4, 2);
  for (int b = 0; b < 2; ++b) {
    wb_gpu_block_begin(b); wb_gpu_region_begin();
    for (int t = 0; t < 64; ++t) {
      ACC(0, 1, 1, t, t, 0);
      if (t > 0) ACC(0, 1, 0, t - 1, t, 1);
    }
    wb_gpu_region_end();
  }
  return wb_gpu_kernel_end();
}
/* grid 2 x 3, blocks of 8 x 4 x 2 threads: in block 5, thread 12 writes S[50] and
   thread 45 reads it */
int32_t race_coordinates(void) {
  wb_gpu_kernel_begin(0, 2, 3, 1, 8, 4, 2);
  for (int b = 0; b < 6; ++b) {
    wb_gpu_block_begin(b); wb_gpu_region_begin();
    for (int t = 0; t < 64; ++t) {
      ACC(0, 1, 1, t, t, 0);
      if (b == 5 && t == 12) ACC(0, 1, 1, 50, t, 0);
      if (b == 5 && t == 45) ACC(0, 1, 0, 50, t, 1);
    }
    wb_gpu_region_end();
  }
  return wb_gpu_kernel_end();
}
/* the same with a barrier between the write and the read: no race */
int32_t raw_with_barrier(void) {
  wb_gpu_kernel_begin(0, 2, 1, 1, 8, 4, 2);
  for (int b = 0; b < 2; ++b) {
    wb_gpu_block_begin(b); wb_gpu_region_begin();
    for (int t = 0; t < 64; ++t) ACC(0, 1, 1, t, t, 0);
    wb_gpu_region_end(); wb_gpu_region_begin();
    for (int t = 0; t < 64; ++t) ACC(0, 1, 0, (t + 63) % 64, t, 1);
    wb_gpu_region_end();
  }
  return wb_gpu_kernel_end();
}
/* thread t reads S[t + 1], then writes S[t]: thread 1 overwrites what thread 0 read */
int32_t war(void) {
  wb_gpu_kernel_begin(0, 1, 1, 1, 32, 1, 1);
  wb_gpu_block_begin(0); wb_gpu_region_begin();
  for (int t = 0; t < 32; ++t) { ACC(0, 1, 0, (t + 1) % 32, t, 1); ACC(0, 1, 1, t, t, 0); }
  wb_gpu_region_end();
  return wb_gpu_kernel_end();
}
/* every thread writes S[3] */
int32_t waw(void) {
  wb_gpu_kernel_begin(0, 1, 1, 1, 32, 1, 1);
  wb_gpu_block_begin(0); wb_gpu_region_begin();
  for (int t = 0; t < 32; ++t) ACC(0, 1, 1, 3, t, 0);
  wb_gpu_region_end();
  return wb_gpu_kernel_end();
}
/* four threads read S[5], then thread 1 writes it: a race with threads 0, 2 or 3 */
int32_t many_readers_then_write(void) {
  wb_gpu_kernel_begin(0, 1, 1, 1, 32, 1, 1);
  wb_gpu_block_begin(0); wb_gpu_region_begin();
  for (int t = 0; t < 4; ++t) ACC(0, 1, 0, 5, t, 1);
  ACC(0, 1, 1, 5, 1, 0);
  wb_gpu_region_end();
  return wb_gpu_kernel_end();
}
/* threads 0 and 1 read S[6], then thread 0 writes it: a race with thread 1 */
int32_t reader_pair_then_first_writes(void) {
  wb_gpu_kernel_begin(0, 1, 1, 1, 32, 1, 1);
  wb_gpu_block_begin(0); wb_gpu_region_begin();
  ACC(0, 1, 0, 6, 0, 1); ACC(0, 1, 0, 6, 1, 1); ACC(0, 1, 0, 6, 0, 1);
  ACC(0, 1, 1, 6, 0, 0);
  wb_gpu_region_end();
  return wb_gpu_kernel_end();
}
/* each thread accumulates into its own element (shared and global), many times, across
   barriers too, and the threads of a block all read one element: no race */
int32_t reductions(void) {
  wb_gpu_kernel_begin(0, 4, 1, 1, 32, 1, 1);
  for (int b = 0; b < 4; ++b) {
    wb_gpu_block_begin(b); wb_gpu_region_begin();
    for (int k = 0; k < 3; ++k) {
      for (int t = 0; t < 32; ++t)
        for (int r = 0; r < 4; ++r) {
          ACC(1, 0, 0, 999, t, 2);
          ACC(0, 1, 0, t, t, 1); ACC(0, 1, 1, t, t, 0);
          ACC(1, 0, 0, 32 * b + t, t, 1); ACC(1, 0, 1, 32 * b + t, t, 0);
        }
      wb_gpu_region_end(); wb_gpu_region_begin();
    }
    wb_gpu_region_end();
  }
  return wb_gpu_kernel_end();
}
/* shared memory is the block's own: block 1 reads S[0] that block 0 wrote: no race */
int32_t shared_is_per_block(void) {
  wb_gpu_kernel_begin(0, 2, 1, 1, 32, 1, 1);
  wb_gpu_block_begin(0); wb_gpu_region_begin(); ACC(0, 1, 1, 0, 0, 0); wb_gpu_region_end();
  wb_gpu_block_begin(1); wb_gpu_region_begin(); ACC(0, 1, 0, 0, 1, 1); wb_gpu_region_end();
  return wb_gpu_kernel_end();
}
/* global memory: thread 3 of block (1, 0, 0) reads G[9]; a barrier later thread 0 of
   block (0, 1, 0) writes it: blocks are not ordered */
int32_t global_between_blocks(void) {
  wb_gpu_kernel_begin(0, 2, 2, 1, 32, 1, 1);
  for (int b = 0; b < 4; ++b) {
    wb_gpu_block_begin(b); wb_gpu_region_begin();
    if (b == 1) ACC(1, 0, 0, 9, 3, 2);
    wb_gpu_region_end(); wb_gpu_region_begin();
    if (b == 2) ACC(1, 0, 1, 9, 0, 0);
    wb_gpu_region_end();
  }
  return wb_gpu_kernel_end();
}
/* global memory within one block: ordered by a barrier (race_free = 1) or not */
int32_t global_in_block(int32_t race_free) {
  wb_gpu_kernel_begin(0, 1, 1, 1, 32, 1, 1);
  wb_gpu_block_begin(0); wb_gpu_region_begin();
  for (int t = 0; t < 32; ++t) ACC(1, 0, 1, t, t, 0);
  if (race_free) { wb_gpu_region_end(); wb_gpu_region_begin(); }
  for (int t = 0; t < 32; ++t) ACC(1, 0, 0, (t + 1) % 32, t, 1);
  wb_gpu_region_end();
  return wb_gpu_kernel_end();
}
/* two launches: the second reads in block 1 what the first wrote in block 0 */
int32_t two_launches(void) {
  for (int k = 0; k < 2; ++k) {
    wb_gpu_kernel_begin(k, 2, 1, 1, 32, 1, 1);
    for (int b = 0; b < 2; ++b) {
      wb_gpu_block_begin(b); wb_gpu_region_begin();
      if (k == 0 && b == 0) ACC(1, 0, 1, 7, 4, 0);
      if (k == 1 && b == 1) ACC(1, 0, 0, 7, 5, 1);
      wb_gpu_region_end();
    }
    wb_gpu_kernel_end();
  }
  return 0;
}
int32_t access_before_block(void) {
  wb_gpu_kernel_begin(0, 1, 1, 1, 32, 1, 1);
  return ACC(0, 1, 0, 0, 0, 0);
}
int32_t negative_index(void) {
  wb_gpu_kernel_begin(0, 1, 1, 1, 32, 1, 1);
  wb_gpu_block_begin(0);
  return ACC(0, 1, 0, -3, 0, 0);
}

/* profile: one warp-level access of 32 lanes (or `lanes`) of `nbytes` each at
   byte `stride * lane`; `threads` per block: lanes of a second warp repeat it */
int32_t warp_access(int32_t space, int32_t is_write, int32_t stride, int32_t nbytes,
                    int32_t lanes, int32_t threads) {
  wb_gpu_kernel_begin(0, 1, 1, 1, threads, 1, 1);
  wb_gpu_block_begin(0); wb_gpu_region_begin();
  for (int t = 0; t < threads; ++t)
    if (t % 32 < lanes)
      wb_gpu_access(0, space, is_write, (int64_t)(t % 32) * stride / nbytes,
                    (int64_t)(t % 32) * stride, nbytes, t, 0);
  wb_gpu_region_end();
  return wb_gpu_kernel_end();
}
/* even lanes read X[t] (statement 0), then every lane reads Y[t] (statement 1) */
int32_t divergent(void) {
  wb_gpu_kernel_begin(0, 1, 1, 1, 32, 1, 1);
  wb_gpu_block_begin(0); wb_gpu_region_begin();
  for (int t = 0; t < 32; ++t) {
    if (t % 2 == 0) wb_gpu_access(0, 0, 0, t, 4 * t, 4, t, 0);
    wb_gpu_access(1, 0, 0, t, 4 * t, 4, t, 1);
  }
  wb_gpu_region_end();
  return wb_gpu_kernel_end();
}
/* 300 accesses per lane in one region, two warps: consecutive floats each time */
int32_t many_accesses(void) {
  wb_gpu_kernel_begin(0, 1, 1, 1, 64, 1, 1);
  wb_gpu_block_begin(0); wb_gpu_region_begin();
  for (int t = 0; t < 64; ++t)
    for (int i = 0; i < 300; ++i) wb_gpu_access(1, 0, 0, t, 4 * (t % 32) + 128 * i, 4, t, 2);
  wb_gpu_region_end();
  return wb_gpu_kernel_end();
}
/* one statement reads A[t] (consecutive) and B[32 t] (strided) twice per thread, in a
   loop, then a barrier, then the same again: 2 x 2 requests of each per region */
int32_t two_loads_per_statement(void) {
  wb_gpu_kernel_begin(1, 1, 1, 1, 32, 1, 1);
  wb_gpu_block_begin(0);
  for (int region = 0; region < 2; ++region) {
    wb_gpu_region_begin();
    for (int t = 0; t < 32; ++t)
      for (int i = 0; i < 2; ++i) {
        wb_gpu_access(0, 0, 0, t, 4 * t, 4, t, 3);
        wb_gpu_access(1, 0, 0, 32 * t, 128 * t, 4, t, 3);
      }
    wb_gpu_region_end();
  }
  return wb_gpu_kernel_end();
}
"""

TABLES = gi.InstrumentTables(
    kernels=(gi.KernelInfo("toy_kernel", 1024, 8), gi.KernelInfo("other_kernel", 0, 0)),
    buffers=(gi.BufferInfo("S", (2, 32), (32, 1), "shared"),
             gi.BufferInfo("G", (4096,), (1,), "global")),
    stmts=(gi.StmtInfo("S[t] = A[t]", "S"), gi.StmtInfo("B[t] = S[t - 1]", "B"),
           gi.StmtInfo("x = G[999]", None), gi.StmtInfo("y = A[t] + B[32 t]", "Y")),
)


@pytest.fixture(scope="module")
def lib():
    return compile_and_load(gi.runtime_test_source(SCENARIOS))


def _race(lib, scenario: str, *args) -> gi.RaceError | None:
    gi.set_mode(lib, "race")
    status = getattr(lib, scenario)(*args)
    report = gi.read_race_report(lib, TABLES)
    assert (status != 0) == (report is not None)  # the runtime says "stop" after a race
    return report


def test_race_missing_barrier_read_after_write(lib):
    err = _race(lib, "raw_missing_barrier")
    assert isinstance(err, gi.RaceError) and isinstance(err, ValueError)
    assert err.kind == "read-after-write"
    assert (err.kernel, err.buffer, err.space, err.flat_index) == ("toy_kernel", "S",
                                                                   "shared", 0)
    assert err.index == "[0, 0]"
    assert (err.first.thread, err.first.block, err.first.is_write) == ((0, 0, 0), (0, 0, 0),
                                                                       True)
    assert (err.second.thread, err.second.is_write) == ((1, 0, 0), False)
    assert err.first.stmt == "S[t] = A[t]" and err.second.stmt == "B[t] = S[t - 1]"
    assert err.same_block
    assert str(err) == (
        'race on shared buffer S[0, 0] in kernel toy_kernel: thread (0, 0, 0) of block '
        '(0, 0, 0) writes it in "S[t] = A[t]" (block S) while thread (1, 0, 0) reads it '
        'in "B[t] = S[t - 1]" (block B) with no __syncthreads() between')


def test_race_barrier_orders_shared_accesses(lib):
    assert _race(lib, "raw_with_barrier") is None


def test_race_coordinates_from_linear_ids(lib):
    """Threads 12 and 45 of blocks of 8 x 4 x 2 are (4, 1, 0) and (5, 1, 1); block 5 of
    a 2 x 3 grid is (1, 2, 0)."""
    err = _race(lib, "race_coordinates")
    assert err.kind == "read-after-write" and err.index == "[1, 18]"
    assert (err.first.thread, err.first.block) == ((4, 1, 0), (1, 2, 0))
    assert (err.second.thread, err.second.block) == ((5, 1, 1), (1, 2, 0))


def test_race_write_after_read(lib):
    err = _race(lib, "war")
    assert err.kind == "write-after-read"
    assert err.flat_index == 1 and err.index == "[0, 1]"
    assert (err.first.thread, err.first.is_write) == ((0, 0, 0), False)
    assert (err.second.thread, err.second.is_write) == ((1, 0, 0), True)


def test_race_write_after_write(lib):
    err = _race(lib, "waw")
    assert err.kind == "write-after-write"
    assert (err.first.thread, err.second.thread) == ((0, 0, 0), (1, 0, 0))
    assert err.first.is_write and err.second.is_write


def test_race_writer_among_many_readers(lib):
    """Only two readers are kept per element; a writer that was one of them still races
    with another."""
    err = _race(lib, "many_readers_then_write")
    assert err.kind == "write-after-read"
    assert err.second.thread == (1, 0, 0)
    assert err.first.thread in ((0, 0, 0), (2, 0, 0), (3, 0, 0))


def test_race_writer_was_the_first_reader(lib):
    err = _race(lib, "reader_pair_then_first_writes")
    assert err.kind == "write-after-read"
    assert (err.first.thread, err.second.thread) == ((1, 0, 0), (0, 0, 0))


def test_race_same_thread_reductions_are_not_races(lib):
    assert _race(lib, "reductions") is None


def test_race_shared_memory_is_per_block(lib):
    assert _race(lib, "shared_is_per_block") is None


def test_race_global_between_blocks(lib):
    err = _race(lib, "global_between_blocks")
    assert err.kind == "write-after-read" and err.space == "global" and err.buffer == "G"
    assert (err.first.block, err.first.thread) == ((1, 0, 0), (3, 0, 0))
    assert (err.second.block, err.second.thread) == ((0, 1, 0), (0, 0, 0))
    assert not err.same_block
    assert "thread (0, 0, 0) of block (0, 1, 0) writes it" in str(err)
    assert "thread blocks of one launch run in no fixed order" in str(err)


@pytest.mark.parametrize("race_free", [1, 0])
def test_race_global_within_block(lib, race_free):
    err = _race(lib, "global_in_block", race_free)
    if race_free:
        assert err is None
    else:
        assert err.kind == "read-after-write" and err.same_block
        assert (err.first.thread, err.second.thread) == ((1, 0, 0), (0, 0, 0))


def test_race_kernel_launches_are_ordered(lib):
    assert _race(lib, "two_launches") is None


def test_race_report_needs_race_mode(lib):
    gi.set_mode(lib, "off")
    lib.waw()
    with pytest.raises(gi.InstrumentError, match=r"set_mode\(lib, 'race'\)"):
        gi.read_race_report(lib, TABLES)
    with pytest.raises(ValueError, match="mode must be one of"):
        gi.set_mode(lib, "races")


@pytest.mark.parametrize("scenario, message", [
    ("access_before_block", "before wb_gpu_kernel_begin / wb_gpu_block_begin"),
    ("negative_index", "negative element index or address -3"),
])
def test_race_runtime_errors(lib, scenario, message):
    gi.set_mode(lib, "race")
    assert getattr(lib, scenario)() != 0
    with pytest.raises(gi.InstrumentError, match=message):
        gi.read_race_report(lib, TABLES)


# -- profile ---------------------------------------------------------------------------


def _profile(lib, *args):
    gi.set_mode(lib, "profile")
    assert lib.warp_access(*args) == 0
    prof = gi.read_profile(lib, TABLES, "cuda -arch=sm_80")
    (kernel,) = prof.kernels
    (access,) = kernel.accesses
    return kernel, access


@pytest.mark.parametrize("stride, lanes, sectors, ideal", [
    (4, 32, 4, 4),      # consecutive floats: 128 bytes, 4 sectors, coalesced
    (128, 32, 32, 4),   # stride 32 floats: one sector per lane
    (8, 32, 8, 4),      # stride 2 floats: 256 bytes spanned, half of them used
    (0, 32, 1, 1),      # all lanes read one float
    (4, 16, 2, 2),      # half a warp
])
def test_profile_global_sectors(lib, stride, lanes, sectors, ideal):
    _, a = _profile(lib, 0, 0, stride, 4, lanes, 32)
    assert (a.space, a.kind, a.requests, a.lanes) == ("global", "load", 1, lanes)
    assert (a.transactions, a.ideal) == (sectors, ideal)
    assert a.bytes == 4 * lanes


def test_profile_global_vector_and_store(lib):
    k, a = _profile(lib, 0, 1, 16, 16, 32, 64)  # float4 stores, two warps
    assert (a.kind, a.requests, a.transactions, a.ideal) == ("store", 2, 32, 32)
    assert k.global_store_sectors == 32 and k.global_load_sectors == 0


@pytest.mark.parametrize("stride_words, wavefronts", [
    (1, 1),    # consecutive floats: 32 banks, one word each
    (32, 32),  # stride 32: every lane in bank 0: 32-way conflict
    (33, 1),   # stride 33 (a padded row): 32 different banks
    (2, 2),    # stride 2: two words in each of 16 banks
    (0, 1),    # one word for all lanes: broadcast
])
def test_profile_shared_bank_conflicts(lib, stride_words, wavefronts):
    k, a = _profile(lib, 1, 0, 4 * stride_words, 4, 32, 32)
    assert (a.space, a.requests, a.transactions, a.ideal) == ("shared", 1, wavefronts, 1)
    assert a.extra == wavefronts - 1 == k.bank_conflicts


def test_profile_shared_vector_loads(lib):
    """float4 loads of consecutive elements: 128 words, 4 wavefronts, no conflict."""
    _, a = _profile(lib, 1, 0, 16, 16, 32, 32)
    assert (a.transactions, a.ideal, a.extra) == (4, 4, 0)


def test_profile_instances_of_one_statement(lib):
    """Lanes run one after the other: the n-th access of a statement by each lane of a
    warp in a region is one request, for each access of the statement."""
    gi.set_mode(lib, "profile")
    assert lib.two_loads_per_statement() == 0
    prof = gi.read_profile(lib, TABLES, None)
    k = prof["other_kernel"]
    assert k.grid == (1, 1, 1) and k.block == (32, 1, 1) and k.launches == 1
    by_buffer = {a.buffer: a for a in k.accesses}
    assert set(by_buffer) == {"S", "G"}  # buffer ids 0 and 1
    assert by_buffer["S"].statement == "y = A[t] + B[32 t]"
    assert (by_buffer["S"].requests, by_buffer["S"].transactions) == (4, 4 * 4)
    assert (by_buffer["G"].requests, by_buffer["G"].transactions) == (4, 4 * 32)
    assert k.occupancy is None and prof.target is None


def test_profile_divergent_lanes(lib):
    """Lanes that skip an access leave it out of the warp's request; the accesses after
    it still join the right requests."""
    gi.set_mode(lib, "profile")
    assert lib.divergent() == 0
    (k,) = gi.read_profile(lib, TABLES).kernels
    by_stmt = {a.statement: a for a in k.accesses}
    first, second = by_stmt["S[t] = A[t]"], by_stmt["B[t] = S[t - 1]"]
    assert (first.requests, first.lanes, first.transactions, first.ideal) == (1, 16, 4, 2)
    assert (second.requests, second.lanes, second.transactions, second.ideal) == (1, 32, 4, 4)


def test_profile_many_accesses_per_region(lib):
    gi.set_mode(lib, "profile")
    assert lib.many_accesses() == 0
    (k,) = gi.read_profile(lib, TABLES).kernels
    (a,) = k.accesses
    assert (a.requests, a.lanes, a.transactions, a.ideal) == (600, 64 * 300, 2400, 2400)


def test_profile_kernel_figures_and_tables(lib):
    k, _ = _profile(lib, 1, 0, 128, 4, 32, 64)
    assert (k.name, k.grid, k.block, k.threads_per_block) == ("toy_kernel", (1, 1, 1),
                                                               (64, 1, 1), 64)
    assert k.shared_bytes == 1024
    assert k.registers == 8 + gi.REGISTER_OVERHEAD
    expected = wb.Target("cuda", arch="sm_80").occupancy(64, 1024, 8 + gi.REGISTER_OVERHEAD)
    assert k.occupancy == expected
    gi.set_mode(lib, "profile")
    lib.warp_access(1, 0, 128, 4, 32, 64)
    prof = gi.read_profile(lib, TABLES, "cuda -arch=sm_80")
    text = repr(prof)
    assert "toy_kernel: grid (1, 1, 1), block (64, 1, 1) (64 threads), 1024 B shared" in text
    assert "shared loads: 2 requests, 64 wavefronts (ideal 2, 62 bank conflicts)" in text
    assert ('    S load in "S[...] = A[...]": 2 requests, 64 wavefronts (ideal 2, 62 bank '
            'conflicts)') in text
    df = prof.to_pandas()
    assert df.loc[0, "bank_conflicts"] == 62 and df.loc[0, "shared_load_wavefronts"] == 64
    rows = prof.to_pandas("access")
    assert rows.loc[0, "statement"] == "S[t] = A[t]" and rows.loc[0, "wavefronts"] == 64
    html = prof._repr_html_()
    assert "<table" in html and "toy_kernel" in html
    with pytest.raises(KeyError, match="toy_kernel"):
        prof["nope"]


def test_profile_needs_profile_mode(lib):
    gi.set_mode(lib, "race")
    lib.warp_access(1, 0, 4, 4, 32, 32)
    with pytest.raises(gi.InstrumentError, match="mode 'race'"):
        gi.read_profile(lib, TABLES)


def test_runtime_registered_for_generated_kernels():
    """Every function an emulated kernel calls is registered, each with the prelude."""
    for name in ("wb_gpu_kernel_begin", "wb_gpu_block_begin", "wb_gpu_region_begin",
                 "wb_gpu_region_end", "wb_gpu_access", "wb_gpu_kernel_end"):
        fn = c_function(name)
        assert fn is not None and "#ifndef WB_GPU_RUNTIME_PRELUDE" in fn.source
        assert f"static int32_t {name}(" in fn.source


def test_statement_text_and_buffer_index():
    from workbench.ir.stmt import BufferStore

    A, B = wb.Buffer("A", (4, 4)), wb.Buffer("B", (4,))
    i = wb.Var("i")
    assert gi.statement_text(BufferStore(A, B[B[i]] + 1.0, (i, i + 1))) == (
        "A[...] = B[...] + T.float32(1)")
    assert gi.elide_subscripts("x = S[a[0], 1] + 2") == "x = S[...] + 2"
    padded = wb.Buffer("S", (64, 8), "float32", "shared", align=((0, 32, 1),))
    info = gi.BufferInfo.from_buffer(padded)
    assert info.strides == (33, 1) and info.index_text(3 * 33 + 5) == "[3, 5]"
    n = wb.Var("n")
    assert gi.BufferInfo.from_buffer(wb.Buffer("X", (n, 4))).index_text(9) == "[2, 1]"
    assert gi.BufferInfo.from_buffer(wb.Buffer("X", (4, n))).index_text(9) == "[flat index 9]"


# -- end to end: the emulator on the curriculum's GPU matmul ----------------------------


class _DropBarriers(Mutator):
    def visit_stmt(self, s):
        return Evaluate() if is_barrier(s) else super().visit_stmt(s)


def _emulated(align: bool, instrument: str, barriers: bool = True):
    device = plan_device_module(wb.lower(gpu_matmul_schedule(64, align=align).mod))
    df = device.functions[0]
    if not barriers:
        from dataclasses import replace

        kernels = tuple(replace(k, body=_DropBarriers().visit_stmt(k.body))
                        for k in df.kernels)
        df = replace(df, kernels=kernels)
    func = emulate_device_function(df, instrument=instrument)
    return wb.build(func, target="c"), instrument_tables(func), df


def _run(kernel, mode):
    rng = np.random.default_rng(0)
    a, b = rng.random((64, 64), dtype="float32"), rng.random((64, 64), dtype="float32")
    c = np.zeros((64, 64), "float32")
    gi.set_mode(kernel, mode)
    kernel(a, b, c)
    return a, b, c


@pytest.mark.parametrize("align", [False, True])
def test_matmul_emulated_race_free(align):
    kernel, tables, _ = _emulated(align, "races")
    a, b, c = _run(kernel, "race")
    assert gi.read_race_report(kernel, tables) is None
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)


def test_matmul_without_barriers_races():
    kernel, tables, _ = _emulated(True, "races", barriers=False)
    _run(kernel, "race")
    err = gi.read_race_report(kernel, tables)
    assert isinstance(err, gi.RaceError)
    assert err.space == "shared" and err.buffer in ("A_shared", "B_shared")
    assert err.kernel == "matmul_kernel" and err.same_block
    assert "with no __syncthreads() between" in str(err)
    # a padded A_shared index reads as [row, column]
    if err.buffer == "A_shared":
        row, col = map(int, err.index.strip("[]").split(", "))
        assert err.flat_index == row * 33 + col


def test_matmul_profile_storage_align_removes_bank_conflicts():
    """The curriculum's storage_align case: A_shared's rows padded to 33 floats remove
    its 2-way conflict (the two rows a warp reads at once sat in one bank)."""
    figures = {}
    for align in (False, True):
        kernel, tables, df = _emulated(align, "profile")
        a, b, c = _run(kernel, "profile")
        np.testing.assert_allclose(c, a @ b, rtol=1e-4)
        prof = gi.read_profile(kernel, tables, "cuda -arch=sm_80", kernels=df.kernels)
        k = prof["matmul_kernel"]
        loads = {x.buffer: x for x in k.accesses if x.space == "shared" and x.kind == "load"}
        stores = {x.buffer: x for x in k.accesses if x.space == "shared" and x.kind == "store"}
        figures[align] = (loads["A_shared"].extra, loads["B_shared"].extra,
                          stores["A_shared"].extra, k.shared_bytes)
        assert (k.grid, k.block, k.registers) == ((1, 1, 1), (16, 16, 1), 40)
        assert k.occupancy is not None and k.occupancy.blocks_per_sm == 6
        # global loads of the tiles are coalesced (8 consecutive floats per row)
        assert k.total("global", "load", "transactions") == k.total("global", "load", "ideal")
    # 8192 warp-level reads of each tile, each 2-way without the padding
    assert figures[False] == (8192, 8192, 0, 4096)
    assert figures[True] == (0, 8192, 384, 10496)
