"""Cross-thread reduction lowering (:mod:`workbench.ir.transform.cross_thread`).

For each case the lowered IR equals a reviewed golden file
(``tests/golden/cross_thread_<case>.txt``) or has the structure asserted here, and the
emulator (``wb.build(..., target="cuda", emulate=True)``, which runs threads as threads
and honours every barrier) computes what numpy computes. Functions without a
cross-thread reduction come back unchanged, what cannot be lowered is refused naming the
block, and the CUDA text compiles with nvcc for sm_80 and sm_90.

Regenerate the goldens after a deliberate change with
``python tests/test_cross_thread.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.gpu_plan import is_barrier
from workbench.gpu_examples import gpu_matmul_schedule
from workbench.ir.analysis import block_names, find_block
from workbench.ir.functor import iter_stmts
from workbench.ir.transform.cross_thread import (
    CrossThreadReductionError,
    lower_cross_thread_reduction,
)
from workbench.testing import check_golden, write_golden

_OPS = {
    "sum": ("T.float32(0)", "B[vi] + A[vi, vk]", np.sum),
    "max": ('T.min_value("float32")', "T.max(B[vi], A[vi, vk])", np.max),
    "min": ('T.max_value("float32")', "T.min(B[vi], A[vi, vk])", np.min),
    "prod": ("T.float32(1)", "B[vi] * A[vi, vk]", np.prod),
}


def row_reduction(rows: int, cols: int, op: str = "sum", init: str | None = None) -> wb.PrimFunc:
    """``B[i] = op over k of A[i, k]`` as one block ``B`` over loops ``i, k``."""
    default_init, update, _ = _OPS[op]
    return wb.from_script(f'''
# from tvm.script import tir as T
@T.prim_func
def rowred(A: T.Buffer(({rows}, {cols}), "float32"), B: T.Buffer(({rows},), "float32")):
    for i, k in T.grid({rows}, {cols}):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = {init or default_init}
            B[vi] = {update}
''')


def _bind_row_per_block(sch: wb.Schedule, threads: int) -> None:
    """Each row in its own thread block; ``k`` split into ``[None, threads]``, the inner
    part on threadIdx.x (a partly in-thread reduction)."""
    i, k = sch.get_loops("B")
    _, k1 = sch.split(k, [None, threads])
    sch.bind(i, "blockIdx.x")
    sch.bind(k1, "threadIdx.x")


def _bind_whole_row(sch: wb.Schedule) -> None:
    i, k = sch.get_loops("B")
    sch.bind(i, "blockIdx.x")
    sch.bind(k, "threadIdx.x")


def _bind_two_axes(sch: wb.Schedule) -> None:
    """k = k0 * 96 + k1 * 32 + k2: k1 on threadIdx.y (3 threads), k2 on threadIdx.x."""
    i, k = sch.get_loops("B")
    _, k1, k2 = sch.split(k, [None, 3, 32])
    sch.bind(i, "blockIdx.x")
    sch.bind(k1, "threadIdx.y")
    sch.bind(k2, "threadIdx.x")


def _bind_rows_on_y(sch: wb.Schedule) -> None:
    """Four rows per thread block (threadIdx.y, spatial), each reduced over threadIdx.x."""
    i, k = sch.get_loops("B")
    i0, i1 = sch.split(i, [None, 4])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(k, "threadIdx.x")


def _decomposed(sch: wb.Schedule) -> None:
    """The init in its own block before the thread loop: the update has no init."""
    i, k = sch.get_loops("B")
    _, k1 = sch.split(k, [None, 32])
    sch.bind(i, "blockIdx.x")
    sch.bind(k1, "threadIdx.x")
    sch.decompose_reduction(sch.get_block("B"), sch.get_loops("B")[1])


def _uneven_split(sch: wb.Schedule) -> None:
    """100 columns split by 32: the block gets ``T.where(k_0 * 32 + k_1 < 100)``."""
    i, k = sch.get_loops("B")
    _, k1 = sch.split(k, [None, 32])
    sch.bind(i, "blockIdx.x")
    sch.bind(k1, "threadIdx.x")


CASES: dict[str, tuple[str, Callable[[str], wb.PrimFunc], Callable[[wb.Schedule], None]]] = {
    # name: (reducer, function, schedule)
    "in_thread": ("sum", lambda op: row_reduction(8, 256, op),
                  lambda s: _bind_row_per_block(s, 64)),
    "whole_row_100": ("max", lambda op: row_reduction(4, 100, op), _bind_whole_row),
    "two_axes": ("sum", lambda op: row_reduction(4, 192, op), _bind_two_axes),
    "rows_on_y": ("min", lambda op: row_reduction(8, 48, op), _bind_rows_on_y),
    "decomposed": ("sum", lambda op: row_reduction(4, 128, op), _decomposed),
    "uneven_split": ("prod", lambda op: row_reduction(4, 100, op), _uneven_split),
}


def scheduled(case: str) -> tuple[wb.PrimFunc, wb.Schedule]:
    op, make, steps = CASES[case]
    func = make(op)
    sch = wb.Schedule(func)
    steps(sch)
    return func, sch


def lowered(case: str) -> wb.PrimFunc:
    return lower_cross_thread_reduction(scheduled(case)[1].func)


def _inputs(shape: tuple[int, ...], op: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if op == "prod":  # near 1, so that a product of a few hundred values stays finite
        return rng.uniform(0.95, 1.05, shape).astype("float32")
    return rng.standard_normal(shape).astype("float32")


def _check_emulated(mod, op: str, shape: tuple[int, ...], seed: int = 0) -> None:
    a = _inputs(shape, op, seed)
    out = np.full(shape[0], np.nan, "float32")
    wb.build(mod, target="cuda", emulate=True)(a, out)
    want = _OPS[op][2](a.astype("float64"), axis=1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize("case", sorted(CASES))
def test_cross_thread_golden(case):
    check_golden(f"cross_thread_{case}", lowered(case).script())


def _steps(func: wb.PrimFunc) -> list[tuple[str, int]]:
    """The tree's ``if t < n: red[t] = red[t] + red[t + s]`` steps as (bound, stride)."""
    text = func.script()
    bounds = [int(m) for m in re.findall(r"if \w+ < (\d+):", text)]
    strides = [int(m) for m in re.findall(r"\+ (\d+)\]\)?\s*$", text, re.M)]
    return list(zip(bounds, strides, strict=True))


@pytest.mark.parametrize(
    ("extent", "steps"),
    [
        (32, [(16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]),
        (64, [(32, 32), (16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]),
        (128, [(64, 64), (32, 32), (16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]),
        (256, [(128, 128), (64, 64), (32, 32), (16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]),
        # not a power of two: the first step folds the top n - 64 values onto the bottom
        (100, [(36, 64), (32, 32), (16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]),
        (48, [(16, 32), (16, 16), (8, 8), (4, 4), (2, 2), (1, 1)]),
        (3, [(1, 2), (1, 1)]),
        (2, [(1, 1)]),
    ],
)
def test_tree_steps_and_barriers(extent, steps):
    sch = wb.Schedule(row_reduction(2, extent))
    _bind_whole_row(sch)
    out = lower_cross_thread_reduction(sch.func)
    assert _steps(out) == steps
    # one barrier after the store of the partial values and one after every step
    barriers = [s for s in iter_stmts(out.body) if is_barrier(s)]
    assert len(barriers) == len(steps) + 1
    buffers = {b.name: b for s in iter_stmts(out.body) if isinstance(s, wb.ir.Block)
               for b in s.alloc_buffers}
    assert (buffers["red_buf_B"].shape, buffers["red_buf_B"].scope) == ((extent,), "shared")
    assert (buffers["in_thread_B"].shape, buffers["in_thread_B"].scope) == ((1,), "local")


def test_single_thread_reduction_has_no_steps():
    sch = wb.Schedule(row_reduction(2, 1))
    _bind_whole_row(sch)
    out = lower_cross_thread_reduction(sch.func)
    assert _steps(out) == []
    assert "B[vi] = red_buf_B[0]" in out.script()


def test_structure_of_a_partly_in_thread_reduction():
    """The thread loop moves outside the serial reduce loop; the block's three parts
    are named after it; the write-back runs on thread 0."""
    out = lowered("in_thread")
    assert block_names(out) == ["B_in_thread_init", "B_in_thread", "B_write_back"]
    text = out.script()
    lines = [ln.strip() for ln in text.splitlines()]
    t = lines.index('for k_1 in T.thread_binding(64, thread="threadIdx.x"):')
    assert lines[t + 5] == "for k_0 in range(4):"
    assert "T.where(k_1 == 0)" in lines
    assert "red_buf_B[k_1] = in_thread_B[0]" in lines
    in_thread = find_block(out, "B_in_thread")
    assert in_thread.init is None
    assert [iv.kind for iv in in_thread.iter_vars] == ["S", "R"]
    assert [w.buffer.name for w in in_thread.writes] == ["in_thread_B"]


def test_two_thread_axes_flatten_y_major():
    text = lowered("two_axes").script()
    assert "red_buf_B[k_1 * 32 + k_2] = in_thread_B[0]" in text
    assert "if k_1 * 32 + k_2 < 32:" in text  # 96 threads: 96 - 64
    assert "T.where(k_1 == 0 and k_2 == 0)" in text


def test_spatial_thread_loop_gives_each_group_its_row():
    text = lowered("rows_on_y").script()
    assert 'red_buf_B = T.alloc_buffer((4, 48), scope="shared")' in text
    assert "red_buf_B[i_1, k] = in_thread_B[0]" in text
    assert "B[vi] = red_buf_B[i_1, 0]" in text


def test_decomposed_update_combines_with_the_output():
    """No init on the block: thread 0 adds the result to what the init block wrote."""
    text = lowered("decomposed").script()
    assert "B[vi] = B[vi] + red_buf_B[0]" in text
    assert 'with T.block("B_init"):' in text


def test_init_that_is_not_the_identity_is_combined_at_the_end():
    """``B[i] = 5 + sum``: each thread starts from 0, thread 0 adds the 5 once."""
    sch = wb.Schedule(row_reduction(2, 64, init="T.float32(5)"))
    _bind_whole_row(sch)
    text = lower_cross_thread_reduction(sch.func).script()
    assert "in_thread_B[0] = T.float32(0)" in text
    assert "B[vi] = T.float32(5) + red_buf_B[0]" in text


def test_infinite_init_of_a_max_is_its_identity():
    sch = wb.Schedule(row_reduction(2, 64, "max", init='T.float32("-inf")'))
    _bind_whole_row(sch)
    text = lower_cross_thread_reduction(sch.func).script()
    assert 'in_thread_B[0] = T.float32("-inf")' in text
    assert "B[vi] = red_buf_B[0]" in text


def test_uneven_split_keeps_the_predicate_in_thread_only():
    out = lowered("uneven_split")
    assert "k_0 * 32 + k_1 < 100" in str(find_block(out, "B_in_thread").predicate)
    assert str(find_block(out, "B_write_back").predicate) == "k_1 == 0"


def test_local_output_is_written_by_every_thread():
    """A reduction into a local buffer (each thread its own copy) writes back on every
    thread: no ``k == 0`` predicate."""
    sch = wb.Schedule(row_reduction(4, 64))
    blk = sch.get_block("B")
    sch.cache_write(blk, 0, "local")
    i, k = sch.get_loops(blk)
    sch.bind(i, "blockIdx.x")
    sch.bind(k, "threadIdx.x")
    sch.reverse_compute_at(sch.get_block("B_local"), i)
    out = lower_cross_thread_reduction(sch.func)
    predicate = find_block(out, "B_write_back").predicate
    assert isinstance(predicate, wb.ir.IntImm) and predicate.value == 1
    assert find_block(out, "B_write_back").writes[0].buffer.scope == "local"
    _check_emulated(sch.mod, "sum", (4, 64))


def test_several_reductions_in_one_kernel():
    func, sch = _softmax(64, "shared")
    out = lower_cross_thread_reduction(sch.func)
    names = block_names(out)
    for red in ("max", "sum"):
        assert [n for n in names if n.startswith(f"{red}_")] == [
            f"{red}_in_thread_init", f"{red}_in_thread", f"{red}_write_back"]
    assert {"red_buf_max_shared", "red_buf_sum_shared"} <= {
        b.name for s in iter_stmts(out.body) if isinstance(s, wb.ir.Block)
        for b in s.alloc_buffers}


def _cached_row_sum() -> wb.Schedule:
    """A local copy of A computed inside the reduction loops (compaction then allocates
    it in a block between the loops and ``B``)."""
    sch = wb.Schedule(row_reduction(4, 128))
    _bind_row_per_block(sch, 32)
    copy = sch.cache_read(sch.get_block("B"), 0, "local")
    sch.compute_at(copy, sch.get_loops("B")[-1])
    return sch


def test_allocation_blocks_of_compaction_stay_in_the_in_thread_loops():
    sch = _cached_row_sum()
    compacted = wb.lower(sch.mod)["rowred"]
    assert find_block(compacted, "A_local_alloc") is not None
    out = lower_cross_thread_reduction(compacted)
    lines = [ln.strip() for ln in out.script().splitlines()]
    k0 = lines.index("for k_0 in range(4):")
    assert lines[k0 + 1] == 'with T.block("A_local_alloc"):'
    assert [b.name for b in out.body.alloc_buffers] == ["in_thread_B", "red_buf_B"]
    assert block_names(out) == ["B_in_thread_init", "A_local_alloc", "A_local", "B_in_thread",
                                "B_write_back"]
    _check_emulated(sch.mod, "sum", (4, 128))


@pytest.mark.parametrize("func", [
    wb.workloads.matmul(16, 16, 16),
    gpu_matmul_schedule(128).func,
    wb.workloads.softmax(4, 8),
], ids=["matmul", "gpu_matmul", "softmax"])
def test_functions_without_cross_thread_reductions_are_unchanged(func):
    assert lower_cross_thread_reduction(func) is func


def test_reduction_loop_bound_only_to_blocks_is_unchanged():
    """A reduce loop that is serial, under spatial loops bound to threads: nothing to do."""
    sch = wb.Schedule(row_reduction(64, 64))
    i, k = sch.get_loops("B")
    i0, i1 = sch.split(i, [None, 32])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    assert lower_cross_thread_reduction(sch.func) is sch.func


def test_the_input_is_not_modified():
    func, sch = scheduled("in_thread")
    before = sch.func.script()
    lower_cross_thread_reduction(sch.func)
    assert sch.func.script() == before


# --------------------------------------------------------------------------- refusals


def _refused(func: wb.PrimFunc, *words: str) -> CrossThreadReductionError:
    with pytest.raises(CrossThreadReductionError) as info:
        lower_cross_thread_reduction(func)
    for w in words:
        assert w in str(info.value), str(info.value)
    return info.value


def test_refuses_a_spatial_loop_between_the_reduction_loops():
    sch = wb.Schedule(row_reduction(8, 64))
    i, k = sch.get_loops("B")
    k0, k1 = sch.split(k, [None, 32])
    sch.reorder(k0, i, k1)
    sch.bind(k1, "threadIdx.x")
    _refused(sch.func, '"B"', "innermost", '"i"')


def test_refuses_a_thread_loop_that_feeds_spatial_and_reduce_iter_vars():
    sch = wb.Schedule(row_reduction(4, 32))
    i, k = sch.get_loops("B")
    fused = sch.fuse(i, k)
    sch.bind(fused, "threadIdx.x")
    _refused(sch.func, '"B"', '"i_k_fused"', "both a spatial and a reduce")


def test_refuses_a_block_after_it_under_the_reduction_loop():
    func = wb.from_script('''
# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4,), "float32"),
      C: T.Buffer((4, 32), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for k in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
            with T.block("C"):
                vi, vk = T.axis.remap("SS", [i, k])
                C[vi, vk] = A[vi, vk]
''')
    _refused(func, '"B"', '"C"', "last block")


def test_refuses_an_unknown_reducer():
    func = wb.from_script('''
# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for k in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] * T.float32(0.5) + A[vi, vk]
''')
    _refused(func, '"B"', "sum, product, min or max")


def test_refuses_a_kernel_axis_that_does_not_enclose_the_reduction():
    """threadIdx.y is bound in the kernel but not around B: every thread along y would
    run the reduction on the same shared buffer."""
    func = wb.from_script('''
# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4,), "float32"),
      C: T.Buffer((4, 8), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for j in T.thread_binding(8, thread="threadIdx.y"):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.float32(1)
        for k in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
''')
    _refused(func, '"B"', "threadIdx.y")


def test_refuses_two_buffer_reductions():
    func = wb.from_script('''
# from tvm.script import tir as T
@T.prim_func
def f(A: T.Buffer((4, 32), "float32"), idx: T.Buffer((4,), "int32"),
      val: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for k in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("argmax"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    idx[vi] = -1
                    val[vi] = T.min_value("float32")
                v_idx: T.int32 = T.Select(val[vi] >= A[vi, vk], idx[vi], vk)
                v_val: T.float32 = T.Select(val[vi] >= A[vi, vk], val[vi], A[vi, vk])
                idx[vi] = v_idx
                val[vi] = v_val
''')
    _refused(func, '"argmax"', "two-buffer")


# --------------------------------------------------------------------------- numerics


def _softmax(threads: int, scope: str, rows: int = 4, cols: int = 200):
    """One thread block per row: max and sum reduce over threadIdx.x (``scope`` is where
    their results live), exp (in shared memory) and norm are elementwise over
    threadIdx.x."""
    func = wb.workloads.softmax(rows, cols)
    sch = wb.Schedule(func)
    i, j = sch.get_loops("norm")
    _, j1 = sch.split(j, [None, threads])
    sch.bind(i, "blockIdx.x")
    sch.bind(j1, "threadIdx.x")
    for name in ("sum", "exp", "max"):
        blk = sch.get_block(name)
        sch.set_scope(blk, 0, "shared" if name == "exp" else scope)
        sch.compute_at(blk, i)
        _, t = sch.split(sch.get_loops(blk)[-1], [None, threads])
        sch.bind(t, "threadIdx.x")
    return func, sch


@pytest.mark.parametrize("case", sorted(CASES))
def test_emulated_results_match_numpy(case):
    func, sch = scheduled(case)
    _check_emulated(sch.mod, CASES[case][0], func.params[0].shape)


@pytest.mark.parametrize("op", sorted(_OPS))
@pytest.mark.parametrize("extent", [32, 64, 128, 256, 96, 100])
def test_emulated_reducers_and_extents(op, extent):
    sch = wb.Schedule(row_reduction(3, extent, op))
    _bind_whole_row(sch)
    _check_emulated(sch.mod, op, (3, extent), seed=extent)


@pytest.mark.parametrize(("threads", "scope"), [(32, "shared"), (64, "local"), (128, "shared"),
                                                (96, "local")])
def test_emulated_softmax_with_two_reductions_in_one_kernel(threads, scope):
    """Race-checked: the planner's barriers order the write-backs before their readers."""
    func, sch = _softmax(threads, scope)
    x = np.random.default_rng(threads).standard_normal((4, 200)).astype("float32")
    out = np.zeros_like(x)
    wb.build(sch.mod, target="cuda", emulate=True, check_races=True)(x, out)
    np.testing.assert_allclose(out, wb.workloads.softmax_ref(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", sorted(set(CASES) - {"decomposed"}))
def test_lowered_reductions_are_race_free(case):
    """The race checker sees every shared-memory access of the tree between barriers
    and reports no conflict. (Not "decomposed": its ``B_init`` block sits outside the
    thread loop, so every thread of the block writes the same zero to ``B[vi]``, a
    race of the schedule, not of the all-reduce.)"""
    func, sch = scheduled(case)
    op = CASES[case][0]
    a = _inputs(func.params[0].shape, op)
    out = np.zeros(a.shape[0], "float32")
    wb.build(sch.mod, target="cuda", emulate=True, check_races=True)(a, out)
    np.testing.assert_allclose(out, _OPS[op][2](a.astype("float64"), axis=1), rtol=1e-5,
                               atol=1e-5)


def test_without_the_lowering_the_race_checker_finds_the_race(monkeypatch):
    """What the pass is for: run as is, the threads of a block all update ``B[vi]``."""
    import workbench.ir.transform.cross_thread as cross_thread

    monkeypatch.setattr(cross_thread, "lower_cross_thread_reduction", lambda func: func)
    func, sch = scheduled("in_thread")
    a = _inputs(func.params[0].shape, "sum")
    kernel = wb.build(sch.mod, target="cuda", emulate=True, check_races=True)
    with pytest.raises(wb.RaceError, match=r"B\[0\]"):
        kernel(a, np.zeros(a.shape[0], "float32"))


# --------------------------------------------------------------------------- CUDA


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cuda_compiles_with_nvcc(arch):
    from workbench.codegen.cuda import generate_cuda
    from workbench.codegen.nvcc import compile_cuda

    mods = [scheduled(case)[1].mod for case in sorted(CASES)]
    mods.append(_softmax(64, "shared")[1].mod)
    for mod in mods:
        source = generate_cuda(mod)
        assert source.count("__syncthreads();") >= 2
        ptx = compile_cuda(source, arch)
        assert ".entry" in ptx


if __name__ == "__main__":
    if "--update-golden" not in sys.argv:
        sys.exit("usage: python tests/test_cross_thread.py --update-golden")
    for name in sorted(CASES):
        print(write_golden(f"cross_thread_{name}", lowered(name).script()))
