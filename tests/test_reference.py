"""The numpy reference evaluator: scheduled-looking loop nests, errors, random args."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pytest

import workbench as wb
from workbench import workloads
from workbench.ir import Block, BufferStore, For, IfThenElse, IRModule, SeqStmt, Var
from workbench.ir import expr as E
from workbench.ir.analysis import find_block
from workbench.runtime import reference
from workbench.runtime.reference import evaluate, input_params, output_params, random_args

RTOL, ATOL = 1e-4, 1e-4


def nest(block: Block, loops: list[tuple[Var, int]], values, predicate=None, kind="serial"):
    """``block`` with new bindings under a fresh perfect nest of ``loops``."""
    changes = {"iter_values": tuple(values)}
    if predicate is not None:
        changes["predicate"] = predicate
    stmt = replace(block, **changes)
    for v, extent in reversed(loops):
        stmt = For(v, extent, kind, stmt)
    return stmt


def with_root_body(func, *stmts):
    body = stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))
    return func.with_body(replace(func.body, body=body))


def run_matmul(func, seed=0):
    a, b, c = random_args(func, seed=seed)
    evaluate(func, a, b, c)
    return c, a.astype(np.float64) @ b.astype(np.float64)


M, N, K = 12, 10, 8


@pytest.fixture
def mm():
    return workloads.matmul(M, N, K)


def block_c(func):
    return find_block(func, "C")


# ---------------------------------------------------------------------------
# loop nests that schedules produce, one block per nest


def test_unscheduled_matmul(mm):
    c, ref = run_matmul(mm)
    np.testing.assert_allclose(c, ref, rtol=RTOL, atol=ATOL)


def test_split_affine_bindings(mm):
    i, j0, j1, k = Var("i"), Var("j_0"), Var("j_1"), Var("k")
    blk = nest(block_c(mm), [(i, M), (j0, N // 2), (j1, 2), (k, K)], [i, j0 * 2 + j1, k])
    c, ref = run_matmul(with_root_body(mm, blk))
    np.testing.assert_allclose(c, ref, rtol=RTOL, atol=ATOL)


def test_split_with_predicate_does_not_read_out_of_bounds(mm):
    i, j0, j1, k = Var("i"), Var("j_0"), Var("j_1"), Var("k")
    blk = nest(
        block_c(mm),
        [(i, M), (j0, math.ceil(N / 3)), (j1, 3), (k, K)],
        [i, j0 * 3 + j1, k],
        predicate=j0 * 3 + j1 < N,
    )
    c, ref = run_matmul(with_root_body(mm, blk))
    np.testing.assert_allclose(c, ref, rtol=RTOL, atol=ATOL)


def test_split_reduction_with_predicate(mm):
    i, j, k0, k1 = Var("i"), Var("j"), Var("k_0"), Var("k_1")
    blk = nest(
        block_c(mm),
        [(k0, 3), (i, M), (j, N), (k1, 3)],
        [i, j, k0 * 3 + k1],
        predicate=k0 * 3 + k1 < K,
    )
    c, ref = run_matmul(with_root_body(mm, blk))
    np.testing.assert_allclose(c, ref, rtol=RTOL, atol=ATOL)


def test_reduction_loop_outermost(mm):
    i, j, k = Var("i"), Var("j"), Var("k")
    blk = nest(block_c(mm), [(k, K), (j, N), (i, M)], [i, j, k])
    c, ref = run_matmul(with_root_body(mm, blk))
    np.testing.assert_allclose(c, ref, rtol=RTOL, atol=ATOL)


def test_fused_spatial_and_reduction_loop(mm):
    f = Var("f")
    blk = nest(block_c(mm), [(f, M * N * K)], [f // (N * K), f // K % N, f % K])
    c, ref = run_matmul(with_root_body(mm, blk))
    np.testing.assert_allclose(c, ref, rtol=RTOL, atol=ATOL)


def test_fused_loop_with_predicate(mm):
    f = Var("f")
    blk = nest(
        block_c(mm),
        [(f, M * N * 9)],
        [f // (N * 9), f // 9 % N, f % 9],
        predicate=f % 9 < K,
    )
    c, ref = run_matmul(with_root_body(mm, blk))
    np.testing.assert_allclose(c, ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("kind", ["parallel", "vectorized", "unrolled"])
def test_loop_kinds_are_accepted(mm, kind):
    i, j, k = Var("i"), Var("j"), Var("k")
    blk = nest(block_c(mm), [(i, M), (j, N), (k, K)], [i, j, k], kind=kind)
    c, ref = run_matmul(with_root_body(mm, blk))
    np.testing.assert_allclose(c, ref, rtol=RTOL, atol=ATOL)


def test_decomposed_reduction_at_root(mm):
    """An init block and an update block without ``init``, each in its own nest."""
    blk = block_c(mm)
    vi, vj, _ = blk.iter_vars
    i1, j1 = Var("i"), Var("j")
    init = Block("C_init", (vi, vj), (i1, j1), blk.init)
    init_nest = For(i1, M, "serial", For(j1, N, "serial", init))
    i2, j2, k2 = Var("i"), Var("j"), Var("k")
    update = replace(blk, name="C_update", init=None)
    update_nest = nest(update, [(i2, M), (j2, N), (k2, K)], [i2, j2, k2])
    func = with_root_body(mm, init_nest, update_nest)
    a, b, c = random_args(func)
    c[...] = 5.0  # the init block must overwrite this
    evaluate(func, a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=RTOL, atol=ATOL)


def test_update_without_init_accumulates(mm):
    update = replace(block_c(mm), init=None)
    i, j, k = Var("i"), Var("j"), Var("k")
    func = with_root_body(mm, nest(update, [(i, M), (j, N), (k, K)], [i, j, k]))
    a, b, c = random_args(func)
    c[...] = 1.0
    evaluate(func, a, b, c)
    np.testing.assert_allclose(c, 1.0 + a.astype(np.float64) @ b, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", ["matmul", "mm_relu", "softmax", "conv2d_nchw", "fused"])
def test_chunked_evaluation_matches(monkeypatch, name):
    if name == "fused":
        mm = workloads.matmul(M, N, K)
        f = Var("f")
        func = with_root_body(
            mm, nest(block_c(mm), [(f, M * N * K)], [f // (N * K), f // K % N, f % K])
        )
    elif name == "conv2d_nchw":
        func = workloads.conv2d_nchw(1, 3, 6, 6, 4)
    else:
        func = workloads.get(name, M=12, N=10)
    whole = random_args(func)
    evaluate(func, *whole)
    monkeypatch.setattr(reference, "CHUNK_ELEMENTS", 7)
    chunked = random_args(func)
    evaluate(func, *chunked)
    for x, y in zip(whole, chunked):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def test_zero_dimensional_buffers_and_a_block_without_loops():
    A = wb.placeholder((5,), "float32", name="A")
    k = wb.reduce_axis(5, name="k")
    S = wb.compute((), lambda: wb.sum(A[k], axis=k), name="S")
    T = wb.compute((), lambda: S[()] * 2.0, name="T")
    U = wb.compute((3,), lambda i: T[()] + A[i], name="U")
    func = wb.create_prim_func([A, T, U], name="scalar")
    a, t, u = random_args(func)
    evaluate(func, a, t, u)
    np.testing.assert_allclose(t, 2 * a.astype(np.float64).sum(), rtol=1e-6)
    np.testing.assert_allclose(u, t + a[:3], rtol=1e-6)


def test_evaluate_is_vectorized():
    func = workloads.mm_relu(128, 128, 128)
    args = random_args(func)
    evaluate(func, *args)  # warm up
    start = time.perf_counter()
    evaluate(func, *args)
    assert time.perf_counter() - start < 0.5


# ---------------------------------------------------------------------------
# expressions


def test_integer_matmul_is_exact():
    func = workloads.matmul(16, 8, 32, dtype="int32")
    a, b, c = random_args(func, seed=3)
    evaluate(func, a, b, c)
    assert c.dtype == np.int32
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b)


def test_integer_division_truncates_and_floor_ops_floor():
    A = wb.placeholder((6,), "int32", name="A")
    B = wb.placeholder((6,), "int32", name="B")
    D = wb.compute((6,), lambda i: A[i] / B[i], name="D")
    F = wb.compute((6,), lambda i: A[i] // B[i] * 100 + A[i] % B[i], name="F")
    func = wb.create_prim_func([A, B, D, F], name="intdiv")
    a = np.array([7, -7, 7, -7, 6, 0], "int32")
    b = np.array([2, 2, -2, -2, 3, 5], "int32")
    d, f = np.zeros(6, "int32"), np.zeros(6, "int32")
    evaluate(func, a, b, d, f)
    np.testing.assert_array_equal(d, np.trunc(a / b).astype(int))
    np.testing.assert_array_equal(f, (a // b) * 100 + a % b)


@pytest.mark.parametrize(
    "op, ref",
    [
        (E.exp, np.exp),
        (E.tanh, np.tanh),
        (E.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
        (E.erf, np.vectorize(math.erf)),
        (E.rsqrt, lambda x: 1 / np.sqrt(np.abs(x) + 1)),
        (E.fabs, np.abs),
        (E.sin, np.sin),
        (E.cos, np.cos),
        (E.floor, np.floor),
    ],
)
def test_math_calls(op, ref):
    A = wb.placeholder((64,), "float32", name="A")
    if op is E.rsqrt:
        B = wb.compute((64,), lambda i: op(E.fabs(A[i]) + 1.0), name="B")
    else:
        B = wb.compute((64,), lambda i: op(A[i]), name="B")
    func = wb.create_prim_func([A, B], name="math")
    a, b = random_args(func)
    evaluate(func, a, b)
    assert b.dtype == np.float32
    np.testing.assert_allclose(b, ref(a.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_select_cast_min_max():
    A = wb.placeholder((5, 7), "float32", name="A")
    B = wb.compute(
        (5, 7),
        lambda i, j: wb.select(
            A[i, j] > 0.0, wb.min(A[i, j], 0.5), wb.cast(i * 7 + j, "float32")
        ),
        name="B",
    )
    C = wb.compute((5, 7), lambda i, j: wb.max(B[i, j], -1.0), name="C")
    func = wb.create_prim_func([A, C], name="sel")
    a, c = random_args(func)
    evaluate(func, a, c)
    idx = np.arange(35, dtype=np.float32).reshape(5, 7)
    np.testing.assert_array_equal(c, np.maximum(np.where(a > 0, np.minimum(a, 0.5), idx), -1))


@pytest.mark.parametrize("combiner, ref", [("max", np.max), ("min", np.min)])
def test_max_min_reductions_with_predicate(combiner, ref):
    A = wb.placeholder((6, 10), "float32", name="A")
    k = wb.reduce_axis(10, name="k")
    red = getattr(wb, combiner)
    R = wb.compute((6,), lambda i: red(A[i, k], axis=k), name="R")
    func = wb.create_prim_func([A, R], name="red")
    blk = find_block(func, "R")
    i, k0, k1 = Var("i"), Var("k_0"), Var("k_1")
    func = with_root_body(
        func, nest(blk, [(i, 6), (k0, 4), (k1, 3)], [i, k0 * 3 + k1], predicate=k0 * 3 + k1 < 10)
    )
    a, r = random_args(func)
    evaluate(func, a, r)
    np.testing.assert_array_equal(r, ref(a, axis=1))


def test_module_and_func_name(mm):
    mod = IRModule.from_funcs(mm)
    a, b, c = random_args(mod)
    evaluate(mod, a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=RTOL, atol=ATOL)
    two = IRModule.from_funcs(mm, workloads.transpose(4, 4))
    with pytest.raises(ValueError, match="func_name"):
        evaluate(two, a, b, c)
    c2 = np.zeros_like(c)
    evaluate(two, a, b, c2, func_name="matmul")
    np.testing.assert_array_equal(c, c2)


# ---------------------------------------------------------------------------
# errors


def test_wrong_argument_count(mm):
    a, b, _ = random_args(mm)
    with pytest.raises(TypeError, match=r"matmul takes 3 arrays \(A, B, C\), got 2"):
        evaluate(mm, a, b)


def test_wrong_shape(mm):
    a, b, c = random_args(mm)
    with pytest.raises(ValueError, match=r"argument 1 \(B\) has shape \(8, 11\), expected"):
        evaluate(mm, a, np.zeros((K, N + 1), "float32"), c)


def test_wrong_dtype_and_non_array(mm):
    a, b, c = random_args(mm)
    with pytest.raises(TypeError, match=r"argument 0 \(A\) has dtype float64, expected float32"):
        evaluate(mm, a.astype(np.float64), b, c)
    with pytest.raises(TypeError, match="must be a numpy array"):
        evaluate(mm, a.tolist(), b, c)


def test_read_only_output(mm):
    a, b, c = random_args(mm)
    c.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        evaluate(mm, a, b, c)


def test_out_of_bounds_read_is_reported():
    A = wb.placeholder((8,), "float32", name="A")
    B = wb.compute((8,), lambda i: A[i + 1], name="B")
    func = wb.create_prim_func([A, B], name="shift")
    with pytest.raises(IndexError, match=r'block "B" reads A out of bounds: index 8'):
        evaluate(func, *random_args(func))


def _unsupported_funcs():
    mm = workloads.mm_relu(M, N, K)
    y, c = find_block(mm, "Y"), find_block(mm, "C")
    i, j, k = Var("i"), Var("j"), Var("k")
    # reverse_compute_at: C's block under Y's j loop, next to the k loop
    y_k = For(k, K, "serial", replace(y, iter_values=(i, j, k)))
    c_here = replace(c, iter_values=(i, j))
    fused = For(i, M, "serial", For(j, N, "serial", SeqStmt((y_k, c_here))))
    yield "several", with_root_body(mm, fused)
    # blockize: an outer block holding the loop nest of Y
    inner = nest(y, [(i, M), (j, N), (k, K)], [i, j, k])
    outer = Block("Y_o", (), (), inner)
    yield "nested", with_root_body(mm, outer, mm.body.body.stmts[1])
    # an if at the root
    yield "IfThenElse", with_root_body(mm, IfThenElse(wb.const(True), mm.body.body))
    # a store without a block
    store = BufferStore(c.body.buffer, wb.const(1.0), (i, j))
    yield "BufferStore", with_root_body(mm, For(i, M, "serial", For(j, N, "serial", store)))


@pytest.mark.parametrize("what, func", list(_unsupported_funcs()), ids=lambda x: str(x)[:10])
def test_unsupported_functions_refused_before_writing(what, func):
    a, b, c = random_args(func)
    c[...] = 7.0
    with pytest.raises(NotImplementedError, match="reference evaluation supports unscheduled"):
        evaluate(func, a, b, c)
    assert (c == 7.0).all()
    with pytest.raises(NotImplementedError, match=what):
        evaluate(func, a, b, c)


def test_spatial_block_reading_its_output_is_refused():
    A = wb.placeholder((8,), "float32", name="A")
    B = wb.compute((8,), lambda i: A[i] * 2.0, name="B")
    func = wb.create_prim_func([A, B], name="f")
    blk = find_block(func, "B")
    v = blk.iter_vars[0].var
    scan = blk.with_body(BufferStore(blk.body.buffer, blk.body.buffer[v - 1 + 1] + 1.0, (v,)))
    i = Var("i")
    func = with_root_body(func, For(i, 8, "serial", replace(scan, iter_values=(i,))))
    with pytest.raises(NotImplementedError, match="reads the buffer `B` it writes"):
        evaluate(func, *random_args(func))


# ---------------------------------------------------------------------------
# random_args


def test_random_args_deterministic_with_zero_outputs():
    func = workloads.linear_bias_relu()
    first, again, other = random_args(func, 0), random_args(func, 0), random_args(func, 1)
    assert [a.shape for a in first] == [p.shape for p in func.params]
    assert all(a.dtype == np.float32 for a in first)
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(first[0], other[0])
    assert not first[3].any()
    assert 0.5 < first[1].std() < 1.5  # standard normal: O(1) values


def test_random_args_integers_in_small_range():
    func = workloads.matmul(32, 32, 32, dtype="int32")
    a, b, c = random_args(func, seed=5)
    assert a.dtype == np.int32 and a.min() >= -8 and a.max() < 8
    assert not c.any()


def test_input_and_output_params():
    func = workloads.conv2d_nchw(1, 2, 4, 4, 2)
    assert output_params(func) == [2]
    assert input_params(func) == [0, 1]
