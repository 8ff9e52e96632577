"""Minimal reproductions of library bugs found by the all-primitives property test
(tests/test_property.py, ``test_random_full_schedules_*`` and longer exploratory runs).

Each test is a few Schedule calls. The expectation is the property test's invariant:
a primitive either succeeds or refuses with a ``wb.ScheduleError`` subclass, leaving
the schedule as it was; a schedule that was accepted computes what the unscheduled
function computes and its trace replays to the same IR.
"""

from __future__ import annotations

import workbench as wb
from workbench.testing import assert_ir_unchanged, assert_verifies, roundtrip_trace


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
    for seed in range(3):  # the border is uninitialised memory: try a few inputs
        assert wb.verify(sch.mod, func, seed=seed).ok
