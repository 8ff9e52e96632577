"""Second round of agreement with TVM's schedule primitives, one test (or a few) per class
of disagreement found by running TVM's own schedule tests on the workbench
(``bench/tvm_parity/run.py``):

1. int64: what a primitive creates (cache buffers and their copy loops, rfactor and
   decompose_reduction iter vars and loops, blockize's unit bindings, compute_at's
   guards) takes the index type of what it derives from;
2. set_scope moves the ``T.match_buffer`` views of the buffer to the new scope;
3. refusals name TVM's rule in TVM's words (in our style: primitive, block and loop);
4. what TVM accepts and we refused: a copy folded into an init-carrying producer, a
   let-bound reduction update, symbolic bounds and extents, symbolic tiles;
5. what TVM refuses and we accepted: rfactor outside a stage pipeline;
6. unit loops and unit iter vars bound as TVM binds them.

The functions are our own, written as TVMScript and read with ``wb.from_script``;
every accepted schedule is built and compared with the unscheduled function.
"""

from __future__ import annotations

import json
import random

import pytest

import workbench as wb
from workbench.ir import Block, BufferLoad, For, IntImm, PrimExpr, iter_blocks, iter_stmts
from workbench.ir.expr import BinaryOp
from workbench.ir.functor import iter_exprs, stmt_exprs
from workbench.schedule import FunctionNotFoundError
from workbench.schedule.primitives.compute_at import (
    ConsumersOutsideLoopError,
    LoopAboveBlockError,
    NotCompleteBlockError,
    NotInSameScopeError,
    ProducersOutsideLoopError,
)
from workbench.schedule.primitives.compute_inline import NotInlinableError, OutputBlockError
from workbench.schedule.primitives.reduction import NotStagePipelineError
from workbench.testing import assert_schedule_error, assert_verifies, roundtrip_trace

# --------------------------------------------------------------------------- helpers


def _block(func_or_sch, name: str) -> Block:
    func = func_or_sch.func if isinstance(func_or_sch, wb.Schedule) else func_or_sch
    return next(b for b in iter_blocks(func.body) if b.name == name)


def _mixed_index_types(func) -> list[str]:
    """Integer expressions of ``func`` that combine int32 with int64 (an operation whose
    operands differ, an iter var bound to a value of another type, a loop whose
    variable's type differs from its extent's)."""
    bad: list[str] = []
    ints = ("int32", "int64")

    def check(e: PrimExpr) -> None:
        for x in iter_exprs(e):
            if isinstance(x, BinaryOp) and x.a.dtype in ints and x.b.dtype in ints:
                if x.a.dtype != x.b.dtype:
                    bad.append(str(x))

    for s in iter_stmts(func.body):
        for e in stmt_exprs(s):
            check(e)
        if isinstance(s, Block):
            for iv, value in zip(s.iter_vars, s.iter_values, strict=True):
                check(value)
                if value.dtype != iv.var.dtype:
                    bad.append(f"{iv.var.name} = {value}")
            check(s.predicate)
        if isinstance(s, For) and isinstance(s.extent, PrimExpr):
            if s.extent.dtype != s.loop_var.dtype:
                bad.append(f"for {s.loop_var.name} in range({s.extent})")
    return bad


MATMUL64 = """
@T.prim_func
def mm64(A: T.Buffer((T.int64(32), T.int64(16)), "float32"),
         B: T.Buffer((T.int64(16), T.int64(24)), "float32"),
         D: T.Buffer((T.int64(32), T.int64(24)), "float32")):
    C = T.alloc_buffer((T.int64(32), T.int64(24)))
    for i, j, k in T.grid(T.int64(32), T.int64(24), T.int64(16)):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(T.int64(32), T.int64(24)):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))
"""


# --------------------------------------------------------------------------- 1. int64


def test_cache_read_write_of_int64_buffers_keep_int64_shapes_and_loops():
    func = wb.from_script(MATMUL64)
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    a_shared = sch.cache_read(c, 0, "shared")
    c_local = sch.cache_write(c, 0, "local")
    caches = {b.name: b for b in sch.func.body.alloc_buffers}
    assert caches["A_shared"].index_dtype == "int64"
    assert caches["C_local"].index_dtype == "int64"
    assert "T.alloc_buffer((T.int64(32), T.int64(16)), scope=\"shared\")" in sch.mod.script()
    for name in (sch.get(a_shared).name, sch.get(c_local).name):
        blk = _block(sch, name)
        assert {iv.var.dtype for iv in blk.iter_vars} == {"int64"}
    assert _mixed_index_types(sch.func) == []
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_cache_under_a_loop_of_int64_buffers_stays_int64():
    """compute_at then a cache inside the loop: the tile copy's loops, bindings and
    guards all stay int64."""
    func = wb.from_script(MATMUL64)
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, _ = sch.split(i, [None, 8])
    j0, _ = sch.split(j, [None, 8])
    sch.reorder(i0, j0)
    sch.reverse_compute_at(sch.get_block("D"), j0)
    sch.compute_at(sch.cache_read(c, 1, "shared"), j0)
    sch.decompose_reduction(c, k)
    assert _mixed_index_types(sch.func) == []
    assert_verifies(sch, func)


def test_rfactor_keeps_int64_iter_vars_and_constants():
    func = wb.from_script(MATMUL64)
    sch = wb.Schedule(func)
    _, _, k = sch.get_loops(sch.get_block("C"))
    _, k1 = sch.split(k, [None, 4])
    rf = sch.rfactor(k1, 0)
    rf_block = sch.get(rf)
    assert {iv.var.dtype for iv in rf_block.iter_vars} == {"int64"}
    assert {iv.var.dtype for iv in _block(sch, "C").iter_vars} == {"int64"}
    assert _mixed_index_types(sch.func) == []
    assert "vk_0 * T.int64(4) + vk_1" in sch.mod.script()
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_decompose_reduction_init_loops_are_int64():
    func = wb.from_script(MATMUL64)
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.decompose_reduction(sch.get_block("C"), j)
    init_loops = [s for s in iter_stmts(sch.func.body)
                  if isinstance(s, For) and s.loop_var.name.endswith("_init")]
    assert init_loops and {lp.loop_var.dtype for lp in init_loops} == {"int64"}
    assert _mixed_index_types(sch.func) == []
    assert_verifies(sch, func)


def test_blockize_binds_an_int64_unit_iter_var_to_an_int64_zero():
    func = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((T.int64(16), T.int64(64)), "float32"),
      B: T.Buffer((T.int64(16), T.int64(64)), "float32")):
    for i0, j0, i1, j1 in T.grid(T.int64(1), T.int64(4), T.int64(16), T.int64(16)):
        with T.block("B"):
            vi = T.axis.spatial(T.int64(16), i0 * T.int64(16) + i1)
            vj = T.axis.spatial(T.int64(64), j0 * T.int64(16) + j1)
            B[vi, vj] = A[vi, vj] * T.float32(3)
""")
    sch = wb.Schedule(func)
    _, _, i1, _ = sch.get_loops(sch.get_block("B"))
    outer = sch.get(sch.blockize(i1, preserve_unit_iters=False))
    vi_o = outer.iter_values[0]
    assert isinstance(vi_o, IntImm) and vi_o.value == 0 and vi_o.dtype == "int64"
    assert "T.axis.spatial(T.int64(1), T.int64(0))" in sch.mod.script()
    assert _mixed_index_types(sch.func) == []
    assert_verifies(sch, func)


# --------------------------------------------------------------------------- 2. set_scope


VIEWED = """
@T.prim_func
def viewed(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8))
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            Bv = T.match_buffer(B[vi, vj], (), offset_factor=1)
            Bv[()] = A[vi, vj] + T.float32(2)
    for i, j in T.grid(16, 2):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            Bw = T.match_buffer(B[vi, vj * 4:vj * 4 + 4], (4,))
            for k in range(4):
                C[vi, vj * 4 + k] = Bw[k] * T.float32(3)
"""


def test_set_scope_moves_the_match_buffer_views_too():
    func = wb.from_script(VIEWED)
    sch = wb.Schedule(func)
    sch.set_scope(sch.get_block("B"), 0, "shared")
    views = {m.buffer.name: m for b in iter_blocks(sch.func.body) for m in b.match_buffers}
    assert set(views) == {"Bv_shared", "Bw_shared"}
    for m in views.values():
        assert m.buffer.scope == "shared"
        assert m.source.buffer.name == "B_shared"
    assert 'Bw_shared = T.match_buffer(B_shared[vi, vj * 4:vj * 4 + 4], (4,), scope="shared")' in (
        sch.mod.script()
    )
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


# --------------------------------------------------------------------------- 3. messages

TWO_STAGES = """
@T.prim_func
def two(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32"),
        D: T.Buffer((16, 16), "float32")):
    B = T.alloc_buffer((16, 16))
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
    for i, j in T.grid(16, 16):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = B[vi, vj] + C[vi, vj]
"""


def test_compute_at_refusals_use_tvms_words():
    sch = wb.Schedule(wb.from_script(TWO_STAGES))
    b, c, d = (sch.get_block(n) for n in "BCD")
    bi, _ = sch.get_loops(b)
    ci, _ = sch.get_loops(c)
    di, _ = sch.get_loops(d)
    err = assert_schedule_error(sch, lambda: sch.compute_at(b, bi), LoopAboveBlockError, "B", "i")
    assert "is an ancestor of block" in str(err)
    err = assert_schedule_error(
        sch, lambda: sch.compute_at(b, ci), ConsumersOutsideLoopError, "B", "D"
    )
    assert "requires all the consumer(s)" in str(err)
    err = assert_schedule_error(
        sch, lambda: sch.reverse_compute_at(d, ci), ProducersOutsideLoopError, "D", "B"
    )
    assert "requires all the producer(s)" in str(err)
    # C writes the function's output C: TVM's output block (even with a consumer, D)
    err = assert_schedule_error(sch, lambda: sch.compute_at(c, di), OutputBlockError, "C")
    assert "output block" in str(err)


def test_compute_at_of_a_block_with_a_second_writer_is_not_a_complete_block():
    sch = wb.Schedule(wb.from_script("""
@T.prim_func
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(4):
        with T.block("B_0"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]
    for i in range(4):
        with T.block("B_1"):
            vi = T.axis.remap("S", [i])
            B[vi + 4] = A[vi + 4]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = B[vi]
"""))
    b0 = sch.get_block("B_0")
    (ci,) = sch.get_loops(sch.get_block("C"))
    err = assert_schedule_error(sch, lambda: sch.compute_at(b0, ci), NotCompleteBlockError, "B_0")
    assert "complete block" in str(err)


def test_compute_at_across_block_scopes_says_same_block_scope():
    func = wb.from_script(TWO_STAGES)
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    _, cj = sch.get_loops(c)
    cj0, _ = sch.split(cj, [None, 4])
    inner = sch.get_loops(c)[-1]
    sch.blockize(inner)
    b = sch.get_block("B")
    inner_loop = sch.get_loops(c)[-1]
    err = assert_schedule_error(
        sch, lambda: sch.compute_at(b, inner_loop), NotInSameScopeError, "B"
    )
    assert "not in the same block scope" in str(err)


def test_an_unchosen_function_is_also_a_value_error():
    text = TWO_STAGES.replace("def two(", "def one(")
    mod = wb.ir.IRModule.from_funcs(wb.from_script(text), wb.from_script(TWO_STAGES))
    sch = wb.Schedule(mod)
    with pytest.raises(ValueError, match="does not know which function to be working on"):
        sch.get_block("B")
    with pytest.raises(FunctionNotFoundError):
        sch.get_block("B")
    with pytest.raises(KeyError):
        sch.work_on("three")
    sch.work_on("one")
    assert sch.get(sch.get_block("B")).name == "B"


# --------------------------------------------------------------------------- 4. too strict

INIT_PRODUCER = """
@T.prim_func
def f(A: T.Buffer((8, 4), "float32"), X: T.Buffer((8, 4), "float32"),
      C: T.Buffer((4, 8), "float32")):
    B = T.alloc_buffer((8, 4))
    for i, j in T.grid(8, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            with T.init():
                B[vi, vj] = T.float32(1)
            B[vi, vj] = B[vi, vj] * A[vi, vj] + X[vi, vj]
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vj, vi]
"""


def test_reverse_compute_inline_folds_a_copy_into_init_and_update():
    func = wb.from_script(INIT_PRODUCER)
    sch = wb.Schedule(func)
    sch.reverse_compute_inline(sch.get_block("C"))
    b = _block(sch, "B")
    assert b.init is not None and b.init.buffer.name == "C"
    assert b.body.buffer.name == "C"
    assert [w.buffer.name for w in b.writes] == ["C"]
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_reverse_compute_inline_refuses_a_computing_consumer_of_an_init_producer():
    """Deliberate divergence: TVM folds ``C = B + 1`` into both the init and the update
    too, computing ``(1 + 1) * A + X + 1``; only a copy folds correctly."""
    text = INIT_PRODUCER.replace("C[vi, vj] = B[vj, vi]", "C[vi, vj] = B[vj, vi] + T.float32(1)")
    sch = wb.Schedule(wb.from_script(text))
    c = sch.get_block("C")
    err = assert_schedule_error(sch, lambda: sch.reverse_compute_inline(c), NotInlinableError,
                                "C", "B")
    assert "only if it copies the value unchanged" in str(err)


def test_rfactor_accepts_an_update_through_a_let_binding():
    func = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((16, 32), "float32"), C: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 32):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            acc: T.float32 = C[vi] + A[vi, vk] * A[vi, vk]
            C[vi] = acc
""")
    sch = wb.Schedule(func)
    _, k = sch.get_loops(sch.get_block("C"))
    _, k1 = sch.split(k, [None, 8])
    rf = sch.rfactor(k1, 1)
    assert sch.get(rf).name == "C_rf"
    assert "acc" not in sch.mod.script()  # the let is folded into the store, as in TVM
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


SYMBOLIC_RF = """
@T.prim_func
def f(a: T.handle, b: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (8, 64))
    B = T.match_buffer(b, (8, n, 64))
    C = T.match_buffer(c, (8, n))
    C_rf = T.alloc_buffer((16, 8, n))
    for f_, k1, k0 in T.grid(n * 8, 16, 4):
        with T.block("rf"):
            vk1 = T.axis.spatial(16, k1)
            v0 = T.axis.spatial(8, f_ // n)
            v1 = T.axis.spatial(n, f_ % n)
            vk0 = T.axis.reduce(4, k0)
            with T.init():
                C_rf[vk1, v0, v1] = T.float32(0)
            C_rf[vk1, v0, v1] = (C_rf[vk1, v0, v1]
                                 + A[v0, vk0 * 16 + vk1] * B[v0, v1, vk0 * 16 + vk1])
    for f_, k1 in T.grid(n * 8, 16):
        with T.block("out"):
            vk1 = T.axis.reduce(16, k1)
            v0 = T.axis.spatial(8, f_ // n)
            v1 = T.axis.spatial(n, f_ % n)
            with T.init():
                C[v0, v1] = T.float32(0)
            C[v0, v1] = C[v0, v1] + C_rf[vk1, v0, v1]
"""


def test_reverse_compute_at_under_a_loop_fused_over_a_symbolic_extent():
    """``fused // n`` over ``fused`` in ``[0, 8 * n)`` reaches 7: the block covers its
    domain, and needs no guard."""
    func = wb.from_script(SYMBOLIC_RF)
    sch = wb.Schedule(func)
    fused, _, _ = sch.get_loops(sch.get_block("rf"))
    sch.reverse_compute_at(sch.get_block("out"), fused, preserve_unit_loops=True)
    out = _block(sch, "out")
    assert isinstance(out.predicate, IntImm) and out.predicate.value
    assert [str(v) for v in out.iter_values] == ["ax0", "f_ // n + ax1", "f_ % n + ax2"]
    for n in (1, 5):
        assert wb.verify(sch.mod, func, shapes={"n": n}).ok


def test_reverse_compute_inline_with_symbolic_extents():
    func = wb.from_script("""
@T.prim_func
def f(a: T.handle, w: T.Buffer((T.int64(64),), "float32"), c: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, T.int64(64)))
    C = T.match_buffer(c, (n, T.int64(64)), "float16")
    B = T.alloc_buffer((n, T.int64(64)))
    for i, j0, j1 in T.grid(n, T.int64(4), T.int64(16)):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            vj = T.axis.spatial(T.int64(64), j0 * T.int64(16) + j1)
            B[vi, vj] = A[vi, vj] * w[vj]
    for i, j in T.grid(n, T.int64(64)):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.Cast("float16", B[vi, vj])
""")
    sch = wb.Schedule(func)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert [b.name for b in iter_blocks(sch.func.body)][1:] == ["B"]
    assert isinstance(_block(sch, "B").predicate, IntImm)
    assert wb.verify(sch.mod, func, shapes={"n": 7}).ok


def test_sample_perfect_tile_of_a_symbolic_loop_is_trivial():
    func = wb.from_script("""
@T.prim_func
def f(a: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 64))
    for i, j in T.grid(n, 64):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = T.float32(1)
""")
    sch = wb.Schedule(func, seed=3)
    i, j = sch.get_loops(sch.get_block("B"))
    tiles = sch.sample_perfect_tile(i, n=3)
    assert tiles[0] is None and [sch.get(t) for t in tiles[1:]] == [1, 1]
    sch.split(i, tiles)
    line = sch.trace.lines()[2]
    assert line.startswith("_, v4, v5 = sch.sample_perfect_tile(") and "[-1, 1, 1]" in line
    insts, decisions = json.loads(sch.trace.as_json())
    assert insts[2][3] == ["_", "v4", "v5"] and decisions == [[2, [-1, 1, 1]]]
    roundtrip_trace(sch, func)
    assert wb.verify(sch.mod, func, shapes={"n": 9}).ok
    # as in TVM's tile-size mutator, a trivial tiling has nothing to move
    from workbench.search.mutators import mutate_tile_size

    assert mutate_tile_size(sch.trace, 2, random.Random(0)) is None


# --------------------------------------------------------------------------- 5. too lax


def test_rfactor_refuses_a_scope_that_is_not_a_stage_pipeline():
    """C writes a 16 x 16 corner of a 32 x 32 buffer that D then reads whole."""
    sch = wb.Schedule(wb.from_script("""
@T.prim_func
def f(A: T.Buffer((32, 32), "float32"), D: T.Buffer((32, 32), "float32")):
    C = T.alloc_buffer((32, 32))
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * A[vk, vj]
    for i, j in T.grid(32, 32):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = C[vi, vj]
"""))
    _, _, k = sch.get_loops(sch.get_block("C"))
    err = assert_schedule_error(sch, lambda: sch.rfactor(k, 0), NotStagePipelineError, "C", "k")
    assert "not a stage pipeline" in str(err) and '"D"' in str(err)


def test_rfactor_refuses_a_write_after_read_in_its_scope():
    sch = wb.Schedule(wb.from_script("""
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("R"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi, 0]
    for i, k in T.grid(8, 8):
        with T.block("W"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                A[vi, 0] = T.float32(0)
            A[vi, 0] = A[vi, 0] + C[vk]
"""))
    _, k = sch.get_loops(sch.get_block("W"))
    err = assert_schedule_error(sch, lambda: sch.rfactor(k, 0), NotStagePipelineError, "W", "k")
    assert "write-after-read" in str(err)


def test_rfactor_in_a_stage_pipeline_still_works():
    func = wb.from_script(MATMUL64)
    sch = wb.Schedule(func)
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.rfactor(k, 0)
    assert_verifies(sch, func)


# --------------------------------------------------------------------------- 6. unit loops


def test_compute_at_binds_a_unit_loop_of_the_target_nest_to_zero():
    """A 3-wide pooling stage moved under the split loop of the next one: the moved
    block's iter var over a loop of extent 1 above the target is bound to 0, as TVM's
    analyzer simplifies it (the untouched consumer keeps ``n``)."""
    func = wb.from_script("""
@T.prim_func
def f(X: T.Buffer((1, 4, 20), "float32"), Y: T.Buffer((1, 4, 16), "float32")):
    B = T.alloc_buffer((1, 4, 18))
    for n, c, w, r in T.grid(1, 4, 18, 3):
        with T.block("B"):
            v0, v1, v2, vr = T.axis.remap("SSSR", [n, c, w, r])
            with T.init():
                B[v0, v1, v2] = T.float32(0)
            B[v0, v1, v2] = B[v0, v1, v2] + X[v0, v1, v2 + vr]
    for n, c, w, r in T.grid(1, 4, 16, 3):
        with T.block("Y"):
            v0, v1, v2, vr = T.axis.remap("SSSR", [n, c, w, r])
            with T.init():
                Y[v0, v1, v2] = T.float32(0)
            Y[v0, v1, v2] = Y[v0, v1, v2] + B[v0, v1, v2 + vr]
""")
    sch = wb.Schedule(func)
    _, _, w, _ = sch.get_loops(sch.get_block("Y"))
    w0, _ = sch.split(w, [None, 4])
    sch.compute_at(sch.get_block("B"), w0)
    b = _block(sch, "B")
    assert isinstance(b.iter_values[0], IntImm) and b.iter_values[0].value == 0
    assert [str(v) for v in b.iter_values[1:]] == ["c", "w_0 * 4 + ax0", "ax1"]
    assert str(_block(sch, "Y").iter_values[0]) == "n"
    assert_verifies(sch, func)


def test_reverse_compute_at_guards_a_unit_iter_var_read_at_a_moving_index():
    """D reads ``B[v0, v1]`` with ``v0`` of extent 1: under loop ``i_1`` it must run only
    where ``i_0 * 16 + i_1`` is 0 (TVM keeps ``v0`` in the map and guards it), not
    re-run for every row."""
    func = wb.from_script("""
@T.prim_func
def f(A: T.Buffer((128, 128), "float32"), D: T.Buffer((1, 2, 1), "float32")):
    B = T.alloc_buffer((128, 128))
    for i_0, j_0, i_1, j_1 in T.grid(T.int64(8), T.int64(8), T.int64(16), T.int64(16)):
        with T.block("B"):
            vi = T.axis.spatial(T.int64(128), i_0 * T.int64(16) + i_1)
            vj = T.axis.spatial(T.int64(128), j_0 * T.int64(16) + j_1)
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for ax0, ax1, ax2 in T.grid(T.int64(1), T.int64(2), T.int64(1)):
        with T.block("D"):
            v0, v1, v2 = T.axis.remap("SSS", [ax0, ax1, ax2])
            D[v0, v1, v2] = B[v0, v1] + T.float32(1)
""")
    sch = wb.Schedule(func)
    i_1 = sch.get_loops(sch.get_block("B"))[2]
    sch.reverse_compute_at(sch.get_block("D"), i_1, preserve_unit_loops=True, index=1)
    d = _block(sch, "D")
    assert str(d.iter_values[0]) == "i_0 * T.int64(16) + i_1 + ax0"
    assert str(d.predicate) == (
        "i_0 * T.int64(16) + i_1 < T.int64(1) and j_0 * T.int64(16) + ax1 < T.int64(2)"
    )
    assert _mixed_index_types(sch.func) == []
    assert_verifies(sch, func)


def test_loads_of_views_stay_consistent_after_set_scope():
    """The renamed views are the buffers the loads use (no load of a dropped view)."""
    sch = wb.Schedule(wb.from_script(VIEWED))
    sch.set_scope(sch.get_block("B"), 0, "local")
    views = {m.buffer for b in iter_blocks(sch.func.body) for m in b.match_buffers}
    loaded = {x.buffer for s in iter_stmts(sch.func.body) for e in stmt_exprs(s)
              for x in iter_exprs(e) if isinstance(x, BufferLoad)}
    from_views = {v for v in loaded if v.name.startswith("B")}
    assert {v.name for v in from_views} <= {"Bv_local", "Bw_local"} and "Bw_local" in {
        v.name for v in from_views
    }
    assert all(v in views and v.scope == "local" for v in from_views)


# --------------------------------------------------------------------------- found on the way

BLOCKED_SYMBOLIC = """
@T.prim_func
def f(a: T.handle, B: T.Buffer((4, 16), "float32"), c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 16, 4))
    C = T.match_buffer(c, (n, 16, 16))
    for io in range(n):
        with T.block("tile"):
            vio = T.axis.spatial(n, io)
            for ii, j, k in T.grid(16, 16, 4):
                with T.block("mm"):
                    vi, vj, vk = T.axis.remap("SSR", [ii, j, k])
                    with T.init():
                        C[vio, vi, vj] = T.float32(0)
                    C[vio, vi, vj] = C[vio, vi, vj] + A[vio, vi, vk] * B[vk, vj]
"""


def test_cache_read_and_write_of_symbolic_buffers_copy_the_tile():
    """Inside a block scope over a symbolic loop the caches hold the tile, as TVM's
    compact cache (they used to be refused as symbolic)."""
    func = wb.from_script(BLOCKED_SYMBOLIC)
    sch = wb.Schedule(func)
    mm = sch.get_block("mm")
    sch.cache_read(mm, 0, "shared")
    sch.cache_write(mm, 0, "local")
    allocs = {b.name: b.shape for b in _block(sch, "tile").alloc_buffers}
    assert allocs == {"A_shared": (1, 16, 4), "C_local": (1, 16, 16)}
    for n in (1, 3):
        assert wb.verify(sch.mod, func, shapes={"n": n}).ok


def test_cache_read_and_write_of_a_symbolic_buffer_at_the_root():
    n = wb.Var("n")
    A = wb.placeholder((n, 8), "float32", name="A")
    B = wb.compute((n, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((n, 8), lambda i, j: B[i, j] + 1.0, name="C")
    func = wb.create_prim_func([A, C])
    sch = wb.Schedule(func)
    sch.cache_read(sch.get_block("C"), 0, "local")
    sch.cache_write(sch.get_block("C"), 0, "local")
    assert _mixed_index_types(sch.func) == []
    assert wb.verify(sch.mod, func, shapes={"n": 5}).ok
    roundtrip_trace(sch, func)


def test_compute_inline_refuses_a_buffer_accessed_opaquely():
    """``B.data`` handed to an intrinsic cannot be rewritten: TVM's OpaqueAccessError
    (inlining used to leave the access of a buffer that no longer exists)."""
    from workbench.schedule.primitives.compute_inline import OpaqueAccessError

    sch = wb.Schedule(wb.from_script("""
@T.prim_func
def f(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,))
    for i in range(16):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)
    for i in range(16):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            T.tvm_access_ptr(T.type_annotation("float32"), B.data, 0, 16, 1)
            C[vi] = B[vi] + T.float32(1)
"""))
    b = sch.get_block("B")
    err = assert_schedule_error(sch, lambda: sch.compute_inline(b), OpaqueAccessError, "B", "C")
    assert "opaquely" in str(err)


IN_PLACE = """
@T.prim_func
def f(P: T.Buffer((16,), "float32")):
    W = T.alloc_buffer((16,))
    for i in range(16):
        with T.block("copy_in"):
            vi = T.axis.remap("S", [i])
            W[vi] = P[vi]
    for i in range(16):
        with T.block("work"):
            vi = T.axis.remap("S", [i])
            W[vi] = W[vi] * T.float32(3)
    for i in range(16):
        with T.block("copy_out"):
            vi = T.axis.remap("S", [i])
            P[vi] = W[vi] + T.float32(1)
"""


def test_cache_read_of_a_parameter_read_before_it_is_written_back():
    """``P`` is read by ``copy_in`` and written back by ``copy_out``: the copy of its
    entry value goes first, as TVM places it."""
    func = wb.from_script(IN_PLACE)
    sch = wb.Schedule(func)
    copy_in = sch.get_block("copy_in")
    stage = sch.cache_read(copy_in, 0, "local", [copy_in])
    names = [b.name for b in iter_blocks(sch.func.body)][1:]
    assert names == [sch.get(stage).name, "copy_in", "work", "copy_out"]
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_cache_read_refuses_consumers_on_both_sides_of_the_writer():
    """A reader before ``copy_out`` and one after: no single place for the copy."""
    from workbench.schedule.primitives.cache import ConsumerBeforeProducerError

    text = IN_PLACE.replace('''            P[vi] = W[vi] + T.float32(1)
''', '''            P[vi] = W[vi] + T.float32(1)
    for i in range(16):
        with T.block("again"):
            vi = T.axis.remap("S", [i])
            W[vi] = P[vi]
''')
    sch = wb.Schedule(wb.from_script(text))
    copy_in = sch.get_block("copy_in")
    assert_schedule_error(sch, lambda: sch.cache_read(copy_in, 0, "local"),
                          ConsumerBeforeProducerError, "copy_out")
