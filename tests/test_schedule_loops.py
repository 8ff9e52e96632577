"""Loop primitives (split, fuse, reorder, parallel, vectorize, unroll, annotate,
unannotate) on the MLC course's ``mm_relu``: for every case the IR after the
primitive equals a reviewed golden file, the trace replays (JSON and Python text)
to the same IR, and the scheduled function computes what the unscheduled one does.

The goldens live in ``tests/golden/loops_<case>.txt``; the unscheduled function is
``tests/golden/mm_relu_128.txt``. After a deliberate change of the printer or a
primitive, regenerate them with ``python tests/test_schedule_loops.py --update-golden``
and review the diff before committing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

import workbench as wb
from workbench.ir import For
from workbench.testing import (
    assert_verifies,
    check_golden,
    matmul_func,
    mm_relu_func,
    roundtrip_trace,
    write_golden,
)

N = 128


@pytest.fixture(scope="module")
def func() -> wb.PrimFunc:
    return mm_relu_func(N)


def _y(sch: wb.Schedule):
    return sch.get_loops(sch.get_block("Y"))


def _c(sch: wb.Schedule):
    return sch.get_loops(sch.get_block("C"))


# --------------------------------------------------------------------------- cases
# Each case schedules a fresh Schedule(mm_relu(128)); its name is the golden file's.


def split_none(sch):
    i, j, k = _y(sch)
    sch.split(j, factors=[None, 4])


def split_none_outer(sch):
    i, j, k = _y(sch)
    sch.split(j, factors=[8, None])


def split_three(sch):
    i, j, k = _y(sch)
    sch.split(k, factors=[4, None, 8])


def split_nondividing(sch):
    # 26 * 5 = 130 > 128: the block gets the predicate T.where(j_0 * 5 + j_1 < 128)
    i, j, k = _y(sch)
    sch.split(j, factors=[None, 5])


def split_nondividing_reduction(sch):
    # a predicate on a reduction loop: init and update both guarded
    i, j, k = _y(sch)
    sch.split(k, factors=[3, None])


def split_unit_iters_dropped(sch):
    i, j, k = _y(sch)
    sch.split(j, factors=[1, 128, 1], preserve_unit_iters=False)


def split_unit_iters_kept(sch):
    i, j, k = _y(sch)
    sch.split(j, factors=[1, 128, 1], preserve_unit_iters=True)


def fuse_two(sch):
    i, j, k = _y(sch)
    sch.fuse(i, j)


def fuse_three(sch):
    i, j, k = _y(sch)
    sch.fuse(i, j, k)


def fuse_then_split(sch):
    i, j = _c(sch)
    ij = sch.fuse(i, j)
    sch.split(ij, factors=[None, 64])


def fuse_then_split_nondividing(sch):
    i, j = _c(sch)
    ij = sch.fuse(i, j)
    sch.split(ij, factors=[None, 100])


def fuse_unit_loop_dropped(sch):
    i, j, k = _y(sch)
    i0, i1 = sch.split(i, factors=[1, None])
    sch.fuse(i0, i1, preserve_unit_iters=False)


def reorder_nonadjacent(sch):
    i, j, k = _y(sch)
    sch.reorder(k, i)


def reorder_all(sch):
    i, j, k = _y(sch)
    sch.reorder(k, j, i)


def reorder_seed(sch):
    i, j, k = _y(sch)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)


def parallel_outer(sch):
    i, j, k = _y(sch)
    sch.parallel(i)


def parallel_fused(sch):
    i, j = _c(sch)
    sch.parallel(sch.fuse(i, j))


def vectorize_inner(sch):
    i, j = _c(sch)
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.vectorize(j1)


def vectorize_above_reduction(sch):
    # j is spatial for Y even though the reduction loop k is inside it
    i, j, k = _y(sch)
    sch.vectorize(j)


def unroll_reduction(sch):
    i, j, k = _y(sch)
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.unroll(k1)


def annotate_loop(sch):
    i, j, k = _y(sch)
    sch.annotate(i, ann_key="pragma_auto_unroll_max_step", ann_val=16)


def annotate_block(sch):
    sch.annotate(sch.get_block("Y"), ann_key="meta_schedule.tiling_structure", ann_val="SSRSRS")


def annotate_values(sch):
    blk = sch.get_block("C")
    i, j = _c(sch)
    sch.annotate(j, ann_key="a_list", ann_val=[1, 2, 3])
    sch.annotate(j, ann_key="a_float", ann_val=0.5)
    sch.annotate(blk, ann_key="a_bool", ann_val=True)
    sch.annotate(blk, ann_key="a_str", ann_val='say "hi"')


def annotate_existing_key(sch):
    """As in TVM, annotating a key the loop already has keeps the first value."""
    i, j, k = _y(sch)
    sch.annotate(i, ann_key="x", ann_val=1)
    sch.annotate(i, ann_key="y", ann_val=2)
    sch.annotate(i, ann_key="x", ann_val=3)


def unannotate_loop(sch):
    i, j, k = _y(sch)
    sch.annotate(i, ann_key="x", ann_val=1)
    sch.annotate(i, ann_key="y", ann_val=2)
    sch.unannotate(i, ann_key="x")


def unannotate_block(sch):
    blk = sch.get_block("Y")
    sch.annotate(blk, ann_key="x", ann_val=1)
    sch.unannotate(blk, ann_key="x")


def seed_schedule(sch):
    """Everything above at once, roughly how a lesson would schedule mm_relu."""
    blk = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.parallel(i)
    sch.unroll(j1)
    ci, cj = sch.get_loops(sch.get_block("C"))
    cj0, cj1 = sch.split(cj, factors=[None, 8])
    sch.vectorize(cj1)
    sch.parallel(ci)
    sch.annotate(blk, ann_key="meta_schedule.tiling_structure", ann_val="SSRSRS")


CASES: dict[str, Callable[[wb.Schedule], None]] = {
    f.__name__: f
    for f in (
        split_none,
        split_none_outer,
        split_three,
        split_nondividing,
        split_nondividing_reduction,
        split_unit_iters_dropped,
        split_unit_iters_kept,
        fuse_two,
        fuse_three,
        fuse_then_split,
        fuse_then_split_nondividing,
        fuse_unit_loop_dropped,
        reorder_nonadjacent,
        reorder_all,
        reorder_seed,
        parallel_outer,
        parallel_fused,
        vectorize_inner,
        vectorize_above_reduction,
        unroll_reduction,
        annotate_loop,
        annotate_block,
        annotate_values,
        annotate_existing_key,
        unannotate_loop,
        unannotate_block,
        seed_schedule,
    )
}

# cases whose result must print exactly like the unscheduled function
IDENTITY_CASES = {"unannotate_block"}


def scheduled(func: wb.PrimFunc, case: str) -> wb.Schedule:
    sch = wb.Schedule(func)
    CASES[case](sch)
    return sch


# --------------------------------------------------------------------------- golden


def test_before_golden(func):
    check_golden("mm_relu_128", func.script())


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_after(func, case):
    sch = scheduled(func, case)
    text = sch.mod.script()
    if case in IDENTITY_CASES:
        assert text == wb.Schedule(func).mod.script()
    else:
        assert text != wb.Schedule(func).mod.script(), "the primitive changed nothing"
        check_golden(f"loops_{case}", text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_trace_roundtrip(func, case):
    roundtrip_trace(scheduled(func, case), func)


@pytest.mark.parametrize("case", sorted(CASES))
def test_numerics(func, case):
    assert_verifies(scheduled(func, case), func)


def test_numerics_check_catches_a_wrong_function():
    """The numerical check is not vacuous: matmul is not relu(matmul)."""
    with pytest.raises(AssertionError):
        assert_verifies(wb.Schedule(matmul_func(16, 16, 16)), mm_relu_func(16))


# --------------------------------------------------------------------------- seed


def test_seed_split_reorder_matches_tvm(func):
    """The MLC chapter's first steps print what TVM prints."""
    sch = wb.Schedule(func)
    block_y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    text = sch.mod.script()
    lines = [ln.strip() for ln in text.splitlines()]
    assert "for i, j_0, k, j_1 in T.grid(128, 32, 128, 4):" in lines
    assert "vj = T.axis.spatial(128, j_0 * 4 + j_1)" in lines
    assert "vi = T.axis.spatial(128, i)" in lines
    assert "vk = T.axis.reduce(128, k)" in lines
    # block C is untouched
    assert "for i, j in T.grid(128, 128):" in lines
    assert 'vi, vj = T.axis.remap("SS", [i, j])' in lines
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(block_y)] == ["i", "j_0", "k", "j_1"]
    assert [sch.get(lp).extent for lp in (i, j0, k, j1)] == [128, 32, 128, 4]


def test_split_returns_handles_outermost_first(func):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    outs = sch.split(k, factors=[2, None, 4, 2])
    assert [sch.get(lp).extent for lp in outs] == [2, 8, 4, 2]
    assert [sch.get(lp).loop_var.name for lp in outs] == ["k_0", "k_1", "k_2", "k_3"]
    assert [sch.get(lp).loop_var.name for lp in _y(sch)] == ["i", "j", "k_0", "k_1", "k_2", "k_3"]


def test_split_names_avoid_existing_loops(func):
    """Splitting j twice must not produce two loops called j_0."""
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    j0, j1 = sch.split(j, factors=[None, 4])
    j00, j01 = sch.split(j0, factors=[None, 2])
    names = [sch.get(lp).loop_var.name for lp in _y(sch)]
    assert len(set(names)) == len(names), names
    assert names[:3] == ["i", "j_0_0", "j_0_1"]
    assert_verifies(sch, func)


def test_split_names_reused_across_sibling_nests(func):
    """Both blocks have a loop named j; as in TVM, splitting both gives j_0, j_1 in each
    nest (sibling scopes), and the two pairs stay distinct variables."""
    sch = wb.Schedule(func)
    _, yj, _ = _y(sch)
    _, cj = _c(sch)
    y0, y1 = sch.split(yj, factors=[None, 4])
    c0, c1 = sch.split(cj, factors=[None, 4])
    assert [sch.get(lp).loop_var.name for lp in (y0, y1, c0, c1)] == ["j_0", "j_1"] * 2
    assert sch.get(y0).loop_var is not sch.get(c0).loop_var
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


def test_split_avoids_names_of_enclosing_and_inner_loops(func):
    """A new name never shadows a loop around it or inside it."""
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    j0, j1 = sch.split(j, factors=[None, 4])
    j00, j01 = sch.split(j0, factors=[None, 2])
    names = [sch.get(lp).loop_var.name for lp in _y(sch)]
    assert len(set(names)) == len(names), names
    assert_verifies(sch, func)


def test_fuse_extent_and_name(func):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    fused = sch.fuse(i, j, k)
    loop = sch.get(fused)
    assert isinstance(loop, For)
    assert loop.extent == N * N * N
    assert loop.loop_var.name == "i_j_k_fused"
    assert len(_y(sch)) == 1


def test_reorder_keeps_unnamed_loops_in_place(func):
    """reorder(k, i) of i, j, k swaps i and k, j stays in the middle."""
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    sch.reorder(k, i)
    assert [sch.get(lp).loop_var.name for lp in _y(sch)] == ["k", "j", "i"]


def test_reorder_same_order_is_a_noop_but_recorded(func):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    before = sch.mod.script()
    sch.reorder(i, j, k)
    assert sch.mod.script() == before
    assert sch.trace.lines()[-1] == "sch.reorder(l1, l2, l3)"


def test_loop_handles_survive_other_primitives(func):
    """Handles to loops a primitive did not remove keep working (i after split(j))."""
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    sch.split(j, factors=[None, 4])
    sch.parallel(i)
    sch.unroll(k)
    assert sch.get(i).kind == "parallel"
    assert sch.get(k).kind == "unrolled"


def test_loop_kind_is_idempotent(func):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    sch.parallel(i)
    once = sch.mod.script()
    sch.parallel(i)
    assert sch.mod.script() == once
    assert len(sch.trace) == 4


def test_loop_kind_printing(func):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    sch.parallel(i)
    sch.vectorize(j)
    sch.unroll(k)
    lines = [ln.strip() for ln in sch.mod.script().splitlines()]
    assert "for i in T.parallel(128):" in lines
    assert "for j in T.vectorized(128):" in lines
    assert "for k in T.unroll(128):" in lines


def test_annotation_values_print_and_roundtrip(func):
    sch = scheduled(func, "annotate_values")
    text = sch.mod.script()
    assert 'annotations={"a_list": [1, 2, 3], "a_float": 0.5}' in text
    assert 'T.block_attr({"a_bool": T.bool(True), "a_str": "say \\"hi\\""})' in text
    assert sch.trace.lines()[-1] == (
        'sch.annotate(block_or_loop=b0, ann_key="a_str", ann_val="say \\"hi\\"")'
    )


def test_unannotate_restores_exact_ir(func):
    sch = wb.Schedule(func)
    i, j, k = _y(sch)
    before = sch.mod.script()
    sch.annotate(i, ann_key="x", ann_val=1)
    sch.unannotate(i, ann_key="x")
    assert sch.mod.script() == before


if __name__ == "__main__":  # pragma: no cover - regenerating goldens by hand
    if "--update-golden" not in sys.argv:
        sys.exit("usage: python tests/test_schedule_loops.py --update-golden")
    f = mm_relu_func(N)
    print(write_golden("mm_relu_128", f.script()))
    for name in sorted(CASES):
        if name not in IDENTITY_CASES:
            print(write_golden(f"loops_{name}", scheduled(f, name).mod.script()))
