"""The scenarios the lessons are built on, end to end: IR, trace and numerics.

1. The MLC mm_relu chapter (split, reorder, reverse_compute_at, decompose_reduction),
   and its stochastic version with sample_perfect_tile.
2. compute_at fusion: B = A + 1; C = B * 2 shrinks B to one element; the
   ReLU -> BatchNorm -> Scale chain runs in one pass.
3. The GPU-style matmul: 32x32 tiles bound to blockIdx/threadIdx, A and B staged in
   shared memory, C accumulated in a local buffer, shared rows padded by one.
4. The forum question: a matmul tile kept in one local buffer that the relu reads
   directly -- no global intermediate, no copy back and forth.
5. MetaSchedule-style multi-level tiling (SSRSRS) with parallel/vectorize/unroll.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.ir import Block, iter_stmts
from workbench.testing import (
    assert_verifies,
    gpu_tiled_matmul,
    roundtrip_trace,
    stochastic_schedule_mm,
)

# --------------------------------------------------------------------------- 1


SEED_TRACE = """\
# from tvm import tir
def apply_trace(sch: tir.Schedule) -> None:
  b0 = sch.get_block(name="Y", func_name="mm_relu")
  l1, l2, l3 = sch.get_loops(block=b0)
  l4, l5 = sch.split(loop=l2, factors=[None, 4], preserve_unit_iters=True, disable_predication=False)
  sch.reorder(l4, l3, l5)
  b6 = sch.get_block(name="C", func_name="mm_relu")
  sch.reverse_compute_at(block=b6, loop=l4, preserve_unit_loops=False, index=-1)
  b7 = sch.decompose_reduction(block=b0, loop=l3)"""  # noqa: E501


def mlc_schedule(func: wb.PrimFunc) -> wb.Schedule:
    sch = wb.Schedule(func)
    block_y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "mm_relu"), j0)
    sch.decompose_reduction(block_y, k)
    return sch


def test_mlc_chapter_ir_trace_and_numerics():
    func = wb.workloads.mm_relu(128, 128, 128)
    sch = mlc_schedule(func)
    text = sch.mod.script()
    # the loop structure the chapter shows
    assert "for i, j_0 in T.grid(128, 32):" in text
    assert "for j_1_init in range(4):" in text
    assert 'with T.block("Y_init"):' in text
    assert "for k, j_1 in T.grid(128, 4):" in text
    assert 'with T.block("Y_update"):' in text
    assert "for ax0 in range(4):" in text
    assert "vj = T.axis.spatial(128, j_0 * 4 + ax0)" in text
    assert str(sch.trace) == SEED_TRACE
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)
    # the intermediate Y becomes a 4-element tile once lowered
    lowered = wb.lower(sch.mod).script()
    assert "Y = T.alloc_buffer((1, 4))" in lowered



@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_mlc_stochastic_schedule(seed):
    func = wb.workloads.matmul(128, 128, 128)
    sch = stochastic_schedule_mm(wb.Schedule(func, seed=seed))
    line = sch.trace.lines()[2]
    assert line.startswith(
        "v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16,"
    )
    decision = sch.trace[2].decision
    assert np.prod(decision) == 128 and decision[1] <= 16
    assert f"decision=[{decision[0]}, {decision[1]}]" in line
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)
    # replaying with another decision changes the split
    other = [8, 16] if list(decision) != [8, 16] else [16, 8]
    replay = wb.Schedule(func)
    sch.trace.with_decision(2, other).apply_to_schedule(replay)
    text = replay.mod.script()
    assert f"for i, j_0 in T.grid(128, {other[0]}):" in text
    assert f"for k, j_1 in T.grid(128, {other[1]}):" in text


# --------------------------------------------------------------------------- 2


def two_stage() -> wb.PrimFunc:
    A = wb.placeholder((64, 32), "float32", name="A")
    B = wb.compute((64, 32), lambda i, j: A[i, j] + 1.0, name="B")
    C = wb.compute((64, 32), lambda i, j: B[i, j] * 2.0, name="C")
    return wb.create_prim_func([A, C], name="two_stage")


def test_compute_at_shrinks_intermediate_to_one_element():
    func = two_stage()
    sch = wb.Schedule(func)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), j)
    text = sch.mod.script()
    assert "for i, j in T.grid(64, 32):" in text
    assert 'with T.block("B"):' in text
    assert "vi, vj = T.axis.remap(\"SS\", [i, j])" in text
    lowered = wb.lower(sch.mod).script()
    assert "B = T.alloc_buffer((1, 1))" in lowered
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_elementwise_chain_fused_into_one_pass():
    func = wb.workloads.elementwise_chain(256, 16)
    sch = wb.Schedule(func)
    n, c = sch.get_loops(sch.get_block("scale"))
    sch.compute_at(sch.get_block("batch_norm"), c)
    sch.compute_at(sch.get_block("relu"), c)
    root = sch.mod["elementwise_chain"].body
    # one loop nest holds all three stages
    assert not hasattr(root.body, "stmts")
    lowered = wb.lower(sch.mod).script()
    assert "relu = T.alloc_buffer((1, 1))" in lowered
    assert "batch_norm = T.alloc_buffer((1, 1))" in lowered
    assert_verifies(sch, func)
    # the same with inlining: no intermediate buffer at all
    sch2 = wb.Schedule(func)
    sch2.compute_inline(sch2.get_block("relu"))
    sch2.compute_inline(sch2.get_block("batch_norm"))
    assert "alloc_buffer" not in sch2.mod.script()
    assert_verifies(sch2, func)


# --------------------------------------------------------------------------- 3


def gpu_matmul(func: wb.PrimFunc) -> wb.Schedule:
    return gpu_tiled_matmul(wb.Schedule(func), tile=32, align=True)


def test_gpu_style_matmul_builds_for_c_and_is_correct():
    func = wb.workloads.matmul(128, 128, 128)
    sch = gpu_matmul(func)
    text = sch.mod.script()
    for tag in ("blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x"):
        assert f'thread="{tag}"' in text
    assert 'A_shared = T.alloc_buffer((128, 128), scope="shared")' in text
    assert 'C_local = T.alloc_buffer((128, 128), scope="local")' in text
    lowered = wb.lower(sch.mod)
    allocs = {
        b.name: b
        for s in iter_stmts(lowered["matmul"].body)
        if isinstance(s, Block)
        for b in s.alloc_buffers
    }
    assert allocs["C_local"].shape == (1, 1) and allocs["C_local"].scope == "local"
    assert allocs["A_shared"].scope == "shared" and allocs["A_shared"].align == ((0, 32, 1),)
    kernel = wb.build(sch.mod)
    # a 32 x 32 tile per k_0 step (as TVM compacts it), rows padded to 32 + 1
    assert allocs["A_shared"].shape == (32, 32)
    assert "A_shared[" in kernel.source and "* 33" in kernel.source
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


# --------------------------------------------------------------------------- 4


def forum_schedule(func: wb.PrimFunc) -> wb.Schedule:
    sch = wb.Schedule(func)
    mm = sch.get_block("matmul")
    sch.compute_inline(sch.get_block("bias_add"))
    i, j, k = sch.get_loops(mm)
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(j0, k, j1)
    sch.set_scope(mm, 0, "local")
    sch.reverse_compute_at(sch.get_block("relu"), j0)
    return sch


def test_forum_matrix_tile_consumed_from_one_local_buffer():
    func = wb.workloads.linear_bias_relu(1, 48, 64)
    sch = forum_schedule(func)
    lowered = wb.lower(sch.mod)["linear_bias_relu"]
    blocks = [s for s in iter_stmts(lowered.body) if isinstance(s, Block) and s.iter_vars]
    assert sorted(b.name for b in blocks) == ["matmul", "relu"]  # no copy blocks
    allocated = [b for s in iter_stmts(lowered.body) if isinstance(s, Block)
                 for b in s.alloc_buffers]
    # exactly one intermediate, in local scope, one 16-wide tile
    assert [(b.name, b.scope, b.shape) for b in allocated] == [("matmul_local", "local", (1, 16))]
    relu = next(b for b in blocks if b.name == "relu")
    matmul = next(b for b in blocks if b.name == "matmul")
    # the vector stage reads the very buffer the matrix stage writes
    assert {w.buffer for w in matmul.writes} == {allocated[0]}
    assert allocated[0] in {r.buffer for r in relu.reads}
    # nothing but parameters is global
    for buf in {r.buffer for b in blocks for r in (*b.reads, *b.writes)}:
        assert buf.scope == "local" or buf in lowered.params
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


# --------------------------------------------------------------------------- 5


def ssrsrs(func: wb.PrimFunc) -> wb.Schedule:
    sch = wb.Schedule(func)
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    i0, i1, i2 = sch.split(i, [None, 4, 4])
    j0, j1, j2 = sch.split(j, [None, 2, 16])
    k0, k1, k2 = sch.split(k, [None, 4, 4])
    sch.reorder(i0, j0, k0, i1, k1, j1, i2, k2, j2)
    outer = sch.fuse(i0, j0)
    sch.parallel(outer)
    sch.unroll(k2)
    sch.vectorize(j2)
    return sch


def test_multi_level_tiling_ssrsrs():
    func = wb.workloads.matmul(128, 128, 128)
    sch = ssrsrs(func)
    text = sch.mod.script()
    assert "for i_0_j_0_fused in T.parallel(32):" in text
    assert "for k_2 in T.unroll(4):" in text
    assert "for j_2 in T.vectorized(16):" in text
    assert "vi = T.axis.spatial(128, i_0_j_0_fused // 4 * 16 + i_1 * 4 + i_2)" in text
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)
