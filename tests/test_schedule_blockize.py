"""blockize and add_unit_loop.

For every case the IR after the primitives equals a reviewed golden file
(``tests/golden/blockize_<case>.txt``), the trace replays (JSON and Python text) to the
same IR, and the scheduled function computes what the unscheduled one does. Then one
``test_<prim>_fail_<reason>`` per refusal. The expected structure follows TVM's
``test_tir_schedule_blockize.py`` (outer block ``B_o``, iter vars ``vi_o``/``vi_i``,
init block ``<name>_init`` inside the outer block's init) and ``add_unit_loop``'s
docstring (``for u in range(1)``). Regenerate the goldens with
``python tests/test_schedule_blockize.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

import workbench as wb
from workbench.ir import Block, For, PrimFunc
from workbench.schedule import StaleHandleError
from workbench.schedule.primitives.blockize import (
    NotSingleBlockError,
    RootBlockError,
    SubspaceNotDivisibleError,
)
from workbench.testing import (
    assert_schedule_error,
    assert_verifies,
    check_golden,
    mm_relu_func,
    roundtrip_trace,
    shared_outer_loop_func,
    write_golden,
)


def default_func() -> PrimFunc:
    return mm_relu_func(128)


def _tile(sch: wb.Schedule, name: str, factor: int = 16):
    """Split the block's i and j by ``factor`` and order them i_0, j_0, i_1, j_1 (k
    last for Y). Returns the new loops."""
    loops = sch.get_loops(sch.get_block(name))
    i0, i1 = sch.split(loops[0], factors=[None, factor])
    j0, j1 = sch.split(loops[1], factors=[None, factor])
    sch.reorder(i0, j0, i1, j1)
    return i0, j0, i1, j1


# --------------------------------------------------------------------------- cases


def blockize_tile(sch):
    """TVM's blockize docstring: a 16 x 16 tile of an elementwise block."""
    i0, j0, i1, j1 = _tile(sch, "C")
    sch.blockize(i1)


def blockize_outermost(sch):
    """TVM's test_blockize_outer: every loop is inner, the outer iter vars are unit."""
    i, j = sch.get_loops(sch.get_block("C"))
    sch.blockize(i)


def blockize_inner(sch):
    """TVM's test_blockize_inner: vi stays outer, vj goes inside."""
    i, j = sch.get_loops(sch.get_block("C"))
    sch.blockize(j)


def blockize_reduction_tile(sch):
    """A matmul tile: the init moves into the outer block as block Y_init."""
    i0, j0, i1, j1 = _tile(sch, "Y")
    k = sch.get_loops(sch.get_block("Y"))[-1]
    k0, k1 = sch.split(k, factors=[None, 16])
    sch.reorder(k0, i1)
    sch.blockize(i1)


def blockize_reduction_loop(sch):
    """Only the reduction loop inside: the init block has no iter var and no loop."""
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.blockize(k)


def blockize_unit_iters_dropped(sch):
    """TVM's int64 test without preserve_unit_iters: the unit loop binds as 0."""
    i, j = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, factors=[1, None])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(i1, preserve_unit_iters=False)


def blockize_unit_iters_kept(sch):
    i, j = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, factors=[1, None])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(i1, preserve_unit_iters=True)


def blockize_twice(sch):
    """Blockize the outer block again: nested outer blocks C_o_o > C_o > C."""
    i0, j0, i1, j1 = _tile(sch, "C")
    sch.blockize(i1)
    sch.blockize(j0)


def blockize_unit_loop(sch):
    """add_unit_loop then blockize it: the inner block has no iter var left."""
    u = sch.add_unit_loop(sch.get_block("C"))
    sch.blockize(u)


def add_unit_loop_block(sch):
    sch.add_unit_loop(sch.get_block("Y"))


def add_unit_loop_loop(sch):
    i, j = sch.get_loops(sch.get_block("C"))
    sch.add_unit_loop(j)


def add_unit_loop_twice(sch):
    """Two unit loops get distinct names (u, u_1)."""
    i, j = sch.get_loops(sch.get_block("C"))
    u = sch.add_unit_loop(i)
    sch.add_unit_loop(u)


CASES: dict[str, Callable[[wb.Schedule], None]] = {
    f.__name__: f
    for f in (
        blockize_tile,
        blockize_outermost,
        blockize_inner,
        blockize_reduction_tile,
        blockize_reduction_loop,
        blockize_unit_iters_dropped,
        blockize_unit_iters_kept,
        blockize_twice,
        blockize_unit_loop,
        add_unit_loop_block,
        add_unit_loop_loop,
        add_unit_loop_twice,
    )
}
#: workloads other than mm_relu(128), by case
FUNCS: dict[str, Callable[[], PrimFunc]] = {}


@pytest.fixture(scope="module")
def func() -> PrimFunc:
    return default_func()


@pytest.fixture(scope="module")
def small() -> PrimFunc:
    return mm_relu_func(32)


def scheduled(func: PrimFunc, case: str) -> wb.Schedule:
    sch = wb.Schedule(func)
    CASES[case](sch)
    return sch


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_after(func, case):
    text = scheduled(func, case).mod.script()
    assert text != func.script()
    check_golden(f"blockize_{case}", text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_trace_roundtrip(func, case):
    roundtrip_trace(scheduled(func, case), func)


@pytest.mark.parametrize("case", sorted(CASES))
def test_numerics(small, case):
    assert_verifies(scheduled(small, case), small)


# --------------------------------------------------------------------------- behaviour


def test_blockize_matches_tvm_docstring(func):
    """The outer block's regions relax the inner loops: A[vi_o * 16:vi_o * 16 + 16, ...]."""
    sch = scheduled(func, "blockize_tile")
    lines = [ln.strip() for ln in sch.mod.script().splitlines()]
    start = lines.index('with T.block("C_o"):')
    assert lines[start - 1 : start + 10] == [
        "for i_0, j_0 in T.grid(8, 8):",
        'with T.block("C_o"):',
        'vi_o, vj_o = T.axis.remap("SS", [i_0, j_0])',
        "T.reads(Y[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])",
        "T.writes(C[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])",
        "for i_1, j_1 in T.grid(16, 16):",
        'with T.block("C"):',
        'vi_i, vj_i = T.axis.remap("SS", [i_1, j_1])',
        "T.reads(Y[vi_o * 16 + vi_i, vj_o * 16 + vj_i])",
        "T.writes(C[vi_o * 16 + vi_i, vj_o * 16 + vj_i])",
        "C[vi_o * 16 + vi_i, vj_o * 16 + vj_i] = T.max(Y[vi_o * 16 + vi_i, vj_o * 16 + vj_i],"
        " T.float32(0))",
    ]
    assert sch.trace.lines()[-1] == "b7 = sch.blockize(target=l4, preserve_unit_iters=True)"


def test_blockize_handles(func):
    """The returned handle is the outer block; the inner block and loops keep theirs."""
    sch = wb.Schedule(func)
    blk = sch.get_block("C")
    i0, j0, i1, j1 = _tile(sch, "C")
    outer = sch.blockize(i1)
    assert sch.get(outer).name == "C_o"
    assert sch.get(blk).name == "C"
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(blk)] == ["i_1", "j_1"]
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(outer)] == ["i_0", "j_0"]
    assert isinstance(sch.get(i1), For)


def test_blockize_reduction_moves_init(func):
    sch = scheduled(func, "blockize_reduction_tile")
    outer = sch.get(sch.get_block("Y_o"))
    assert outer.init is not None and sch.get(sch.get_block("Y")).init is None
    init_blocks = [b.name for b in wb.ir.analysis.iter_blocks(outer.init)]
    assert init_blocks == ["Y_init"]
    kinds = "".join(iv.kind for iv in outer.iter_vars)
    assert kinds == "SSR"


def test_add_unit_loop_returns_the_loop(func):
    sch = wb.Schedule(func)
    blk = sch.get_block("Y")
    u = sch.add_unit_loop(blk)
    loop = sch.get(u)
    assert isinstance(loop, For) and loop.extent == 1 and loop.loop_var.name == "u"
    assert isinstance(loop.body, Block) and loop.body.name == "Y"
    assert sch.trace.lines()[-1] == "l1 = sch.add_unit_loop(block_or_loop=b0)"


# --------------------------------------------------------------------------- refusals


@pytest.fixture
def sch() -> wb.Schedule:
    return wb.Schedule(mm_relu_func(16))


def test_blockize_fail_not_single_block():
    sch = wb.Schedule(shared_outer_loop_func(8))
    i, _ = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.blockize(i), NotSingleBlockError, "i")


def test_blockize_fail_several_blocks_after_decompose(sch):
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    sch.decompose_reduction(blk, j)
    e = assert_schedule_error(sch, lambda: sch.blockize(i), NotSingleBlockError, "i")
    assert "Y_init" in str(e) and "Y_update" in str(e)


def test_blockize_fail_not_divisible(sch):
    """vj = j_0 * 4 + j_1 with j_1 outside j_0: the inner part j_0 * 4 does not start
    at stride 1."""
    i, j = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j1, j0)
    e = assert_schedule_error(sch, lambda: sch.blockize(j0), SubspaceNotDivisibleError, "j_0", "C")
    assert "vj" in str(e)


def test_blockize_fail_extent_not_divisible(sch):
    """A non-dividing split: 16 is not a multiple of the inner extent 5."""
    i, j = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, factors=[None, 5])
    sch.reorder(j0, i)
    assert_schedule_error(sch, lambda: sch.blockize(i), SubspaceNotDivisibleError, "i", "C")


def test_blockize_fail_stale_loop(sch):
    i, j = sch.get_loops(sch.get_block("C"))
    sch.split(j, factors=[None, 4])
    assert_schedule_error(sch, lambda: sch.blockize(j), StaleHandleError, "j")


def test_add_unit_loop_fail_root_block(sch):
    root = sch.get_block("root")
    assert_schedule_error(sch, lambda: sch.add_unit_loop(root), RootBlockError, "root")


def test_add_unit_loop_fail_stale_loop(sch):
    i, j = sch.get_loops(sch.get_block("C"))
    sch.fuse(i, j)
    assert_schedule_error(sch, lambda: sch.add_unit_loop(i), StaleHandleError, "i")


if __name__ == "__main__":  # pragma: no cover - regenerating goldens by hand
    if "--update-golden" not in sys.argv:
        sys.exit("usage: python tests/test_schedule_blockize.py --update-golden")
    for name in sorted(CASES):
        f = FUNCS.get(name, default_func)()
        print(write_golden(f"blockize_{name}", scheduled(f, name).mod.script()))
