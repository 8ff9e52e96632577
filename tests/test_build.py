"""Tests of wb.build / Kernel (argument checking, caching, targets), flop counting and
verify (passing, and failing with a clear VerificationError)."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import generate_c
from workbench.ir import (
    Block,
    Buffer,
    BufferStore,
    FloatImm,
    For,
    IRModule,
    IterVar,
    PrimFunc,
    SeqStmt,
    Var,
)
from workbench.runtime import compile_stats
from workbench.runtime.cpu import Kernel, KernelArgumentError, build
from workbench.runtime.flops import flop_count
from workbench.runtime.verify import VerificationError, VerifyResult, verify


def mm_relu(m: int = 128, n: int = 128, k: int = 128) -> PrimFunc:
    A = wb.placeholder((m, k), "float32", name="A")
    B = wb.placeholder((k, n), "float32", name="B")
    r = wb.reduce_axis(k, name="k")
    Y = wb.compute((m, n), lambda i, j: wb.sum(A[i, r] * B[r, j], axis=r), name="Y")
    C = wb.compute((m, n), lambda i, j: wb.max(Y[i, j], 0.0), name="C")
    return wb.create_prim_func([A, B, C], name="mm_relu")


def copy_func(name: str = "copy", plus: float = 0.0, n: int = 16) -> PrimFunc:
    """B[i] = A[i] (+ plus), built by hand so a 'wrong' variant is easy to make."""
    A, B = Buffer("A", (n,)), Buffer("B", (n,))
    i, vi = Var("i"), Var("vi")
    value = A[vi] + plus if plus else A[vi]
    blk = Block("B", (IterVar(vi, n),), (i,), BufferStore(B, value, (vi,)))
    return PrimFunc(name, (A, B), Block("root", (), (), For(i, n, "serial", blk)))


def mm_args(m=128, n=128, k=128, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    return a, b, np.zeros((m, n), "float32")


@pytest.fixture(scope="module")
def kernel() -> Kernel:
    return build(mm_relu(32, 24, 16))


# ---------------------------------------------------------------------------
# build and call


def test_build_runs_mm_relu(kernel):
    a, b, c = mm_args(32, 24, 16)
    assert kernel(a, b, c) is None
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
    assert kernel.function_names == ["mm_relu"]
    assert kernel.source == generate_c(kernel.mod)
    assert isinstance(kernel.mod, IRModule)
    assert kernel.flops == 2 * 32 * 24 * 16 + 32 * 24


def test_kernel_repr_names_functions_and_source_hash(kernel):
    text = repr(kernel)
    assert "mm_relu" in text and kernel.source_hash in text
    assert len(kernel.source_hash) == 16


def test_rebuild_hits_the_compile_cache():
    func = mm_relu(8, 8, 8)
    build(func)
    before = compile_stats()
    again = build(mm_relu(8, 8, 8))  # a fresh but identical IR
    after = compile_stats()
    assert after["compiled"] == before["compiled"]
    assert after["cache_hits"] == before["cache_hits"] + 1
    a, b, c = mm_args(8, 8, 8)
    again(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)


def test_build_accepts_a_schedule_like_object():
    class FakeSchedule:
        mod = IRModule.from_funcs(copy_func())

    k = build(FakeSchedule())
    a, b = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    k(a, b)
    np.testing.assert_array_equal(a, b)


def test_unknown_targets_and_unbound_gpu_functions():
    from workbench.codegen.gpu import UnboundLoopError

    with pytest.raises(UnboundLoopError, match="loop 'i' is not bound to a thread"):
        build(copy_func(), target="cuda", emulate=True)
    with pytest.raises(ValueError, match="unknown target 'llvm'; supported targets: 'c', 'cuda'"):
        build(copy_func(), target="llvm")
    with pytest.raises(ValueError, match="emulate= and check_races= apply to target='cuda'"):
        build(copy_func(), emulate=True)


def test_module_with_several_functions():
    mod = IRModule.from_funcs(copy_func("first"), copy_func("second", plus=1.0))
    k = build(mod)
    assert k.function_names == ["first", "second"]
    assert k.flops is None
    a, b = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    with pytest.raises(KernelArgumentError, match=r'kernel\["name"\]'):
        k(a, b)
    k["second"](a, b)
    np.testing.assert_array_equal(b, a + 1)
    with pytest.raises(KeyError, match="'third'.*'first', 'second'"):
        k["third"]
    main = build(IRModule.from_funcs(copy_func("other"), copy_func("main", plus=2.0)))
    main(a, b)  # "main" is the default
    np.testing.assert_array_equal(b, a + 2)
    assert "int32_t main_kernel(" in main.source


# ---------------------------------------------------------------------------
# argument checking


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda a, b, c: (a, b), r"takes 3 arrays \(A, B, C\), got 2"),
        (lambda a, b, c: (a, b, c, c), r"takes 3 arrays \(A, B, C\), got 4"),
        (lambda a, b, c: (a.tolist(), b, c), r"parameter 'A'\) must be a numpy.ndarray, got list"),
        (lambda a, b, c: (a, b[:, :-1], c), r"parameter 'B'\) must have shape \(16, 24\), "
                                            r"got \(16, 23\)"),
        (lambda a, b, c: (a, b, c.astype("float64")), r"parameter 'C'\) must have dtype "
                                                        r"float32, got float64"),
        (lambda a, b, c: (np.asfortranarray(a), b, c), r"parameter 'A'\) must be C-contiguous"),
        (lambda a, b, c: (a, b, np.zeros((64, 24), "float32")[::2]), r"'C'\) must be C-contig"),
    ],
)
def test_argument_errors_name_the_parameter(kernel, make, match):
    a, b, c = mm_args(32, 24, 16)
    with pytest.raises(KernelArgumentError, match=match) as info:
        kernel(*make(a, b, c))
    assert "kernel 'mm_relu'" in str(info.value)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    assert not c.any()  # nothing ran


def test_read_only_output_and_aliasing_are_refused(kernel):
    a, b, c = mm_args(32, 24, 16)
    c.flags.writeable = False
    with pytest.raises(KernelArgumentError, match="parameter 'C'.*read-only"):
        kernel(a, b, c)
    a.flags.writeable = False  # inputs may be read-only
    kernel(a, b, np.zeros((32, 24), "float32"))
    k = build(copy_func())
    buf = np.zeros(16, "float32")
    with pytest.raises(KernelArgumentError, match="parameter 'B'.*overlaps argument 0"):
        k(buf, buf)


# ---------------------------------------------------------------------------
# flops


def test_flop_count_of_mm_relu():
    assert flop_count(mm_relu()) == 2 * 128**3 + 128**2
    assert flop_count(IRModule.from_funcs(mm_relu())) == 2 * 128**3 + 128**2
    assert flop_count(copy_func()) == 0
    assert flop_count(copy_func(plus=1.0)) == 16


def test_flop_count_of_split_and_nested_blocks():
    """Stores count once per loop iteration where the predicates hold (130, not 33 * 4),
    across nested blocks (blockize style: inner iter vars of extent 4, 32 outer ones)."""
    A, B = Buffer("A", (130,)), Buffer("B", (130,))
    j0, j1, vj = Var("j_0"), Var("j_1"), Var("vj")
    blk = Block("B", (IterVar(vj, 130),), (j0 * 4 + j1,),
                BufferStore(B, A[vj] * 2.0 + 1.0, (vj,)), predicate=j0 * 4 + j1 < 130)
    func = PrimFunc("s", (A, B), Block("root", (), (), For(j0, 33, "serial",
                                                           For(j1, 4, "serial", blk))))
    assert flop_count(func) == 2 * 130
    o, vo, vi, i = Var("o"), Var("vo"), Var("vi"), Var("i")
    inner = Block("in", (IterVar(vi, 4),), (i,), BufferStore(B, A[vo * 4 + vi] * 3.0,
                                                             (vo * 4 + vi,)))
    outer = Block("out", (IterVar(vo, 32),), (o,), For(i, 4, "serial", inner))
    nested = PrimFunc("n", (A, B), Block("root", (), (), For(o, 32, "serial", outer)))
    assert flop_count(nested) == 128
    # an if inside a block: exactly the iterations taking each branch
    from workbench.ir import IfThenElse

    k, vk = Var("k"), Var("vk")
    cond = IfThenElse(vk < 10, BufferStore(B, A[vk] * 2.0, (vk,)),
                      BufferStore(B, A[vk] * 2.0 + 1.0, (vk,)))
    branchy = PrimFunc("b", (A, B), Block("root", (), (), For(k, 130, "serial", Block(
        "B", (IterVar(vk, 130),), (k,), cond))))
    assert flop_count(branchy) == 10 * 1 + 120 * 2


def test_kernel_flops_feed_measure(kernel):
    a, b, c = mm_args(32, 24, 16)
    m = wb.runtime.measure(kernel, a, b, c, repeat=2, min_repeat_ms=1)
    assert m.flops == kernel.flops and m.gflops > 0


# ---------------------------------------------------------------------------
# verify


def test_verify_passes_on_identical_and_equivalent_functions():
    res = verify(mm_relu(64, 48, 32), mm_relu(64, 48, 32))
    assert isinstance(res, VerifyResult) and res.ok and bool(res)
    assert res.reference_backend == "numpy"
    (check,) = res.buffers
    assert check.name == "C" and check.max_abs_error < check.atol + 1e-3
    text = repr(res)
    assert text.startswith("verified mm_relu: output C matches the reference on random inputs")
    assert f"max abs error {check.max_abs_error:.2g})" in text and "\n" not in text
    assert "seed=0" in res.details() and "C: max_abs=" in res.details()


def test_verify_fails_on_a_wrong_kernel():
    with pytest.raises(VerificationError) as info:
        verify(copy_func(plus=1.0), copy_func())
    err = info.value
    assert isinstance(err, AssertionError)
    assert err.buffer == "B" and err.mismatches == 16 and err.total == 16
    assert err.first_index == (0,)
    assert err.max_abs_error == pytest.approx(1.0)
    msg = str(err)
    assert "buffer 'B'" in msg and "16 of 16 elements" in msg
    assert "first mismatch at index [0]: got 1." in msg


def test_verify_falls_back_to_c_for_a_scheduled_reference():
    """A reference the numpy evaluator refuses (two stores in one block) is built with C."""
    A, B, C = Buffer("A", (8,)), Buffer("B", (8,)), Buffer("C", (8,))
    i, vi = Var("i"), Var("vi")
    two = Block("BC", (IterVar(vi, 8),), (i,), SeqStmt((
        BufferStore(B, A[vi] * 2.0, (vi,)), BufferStore(C, A[vi] + 1.0, (vi,)))))
    ref = PrimFunc("two", (A, B, C), Block("root", (), (), For(i, 8, "serial", two)))
    res = verify(ref, ref)
    assert res.reference_backend == "c"
    assert [b.name for b in res.buffers] == ["B", "C"]
    j, vj = Var("j"), Var("vj")
    wrong = Block("BC", (IterVar(vj, 8),), (j,), SeqStmt((
        BufferStore(B, A[vj] * 2.0, (vj,)), BufferStore(C, FloatImm(0.0), (vj,)))))
    bad = PrimFunc("two", (A, B, C), Block("root", (), (), For(j, 8, "parallel", wrong)))
    with pytest.raises(VerificationError, match="buffer 'C'"):
        verify(bad, ref)


def test_verify_integer_outputs_are_exact_and_param_mismatch_is_refused():
    A = wb.placeholder((8,), "int32", name="A")
    B = wb.compute((8,), lambda i: A[i] * 3, name="B")
    f = wb.create_prim_func([A, B], name="tri")
    (check,) = verify(f, f).buffers
    assert check.rtol == 0 and check.atol == 0 and check.max_abs_error == 0
    with pytest.raises(ValueError, match="parameter 'A'"):
        verify(f, copy_func(n=8))


@pytest.mark.parametrize("dtype", ["float16", "int8", "int64", "uint8", "bool"])
def test_verify_other_dtypes(dtype):
    A = wb.placeholder((64,), dtype, name="A")
    if dtype == "bool":
        B = wb.compute((64,), lambda i: wb.logical_not(A[i]), name="B")
    elif dtype == "float16":
        B = wb.compute((64,), lambda i: wb.exp(A[i]) * 2.0 + wb.max(A[i], 0.5), name="B")
    else:
        B = wb.compute((64,), lambda i: wb.max(A[i] * 3, A[i] // 2) % 5, name="B")
    f = wb.create_prim_func([A, B], name=f"t_{dtype}")
    assert verify(f, f).buffers[0].dtype == dtype


def test_floor_helpers_match_numpy_with_negative_divisors():
    from workbench.ir import FloorDiv, FloorMod

    n = 4096
    A, D = Buffer("A", (n,), "int32"), Buffer("D", (n,), "int32")
    Q, R = Buffer("Q", (n,), "int32"), Buffer("R", (n,), "int32")
    i, vi = Var("i"), Var("vi")
    blk = Block("QR", (IterVar(vi, n),), (i,), SeqStmt((
        BufferStore(Q, FloorDiv(A[vi], D[vi]), (vi,)),
        BufferStore(R, FloorMod(A[vi], D[vi]), (vi,)))))
    func = PrimFunc("qr", (A, D, Q, R), Block("root", (), (), For(i, n, "parallel", blk)))
    rng = np.random.default_rng(3)
    a = rng.integers(-1000, 1000, n).astype("int32")
    d = rng.integers(1, 40, n).astype("int32") * rng.choice([-1, 1], n).astype("int32")
    q, r = np.zeros(n, "int32"), np.zeros(n, "int32")
    build(func)(a, d, q, r)
    np.testing.assert_array_equal(q, a // d)
    np.testing.assert_array_equal(r, a % d)


def test_measure_checks_arrays_once_then_times_the_bare_call(monkeypatch):
    from workbench.runtime.cpu import KernelFunction

    k = build(wb.workloads.matmul(16, 16, 16))
    a, b, c = (np.ones((16, 16), "float32") for _ in range(3))
    checks = []
    original = KernelFunction._check
    monkeypatch.setattr(KernelFunction, "_check",
                        lambda self, arrays: checks.append(1) or original(self, arrays))
    m = wb.measure(k, a, b, c, number=50, repeat=3, min_repeat_ms=0)
    assert m.number == 50 and len(m.samples) == 3 and m.flops == 2 * 16**3
    assert len(checks) == 2  # the checked run and prepare(), not one per timed call
    np.testing.assert_allclose(c, np.full((16, 16), 16.0))
    with pytest.raises(KernelArgumentError, match="shape"):
        wb.measure(k, a, b, np.ones((8, 8), "float32"), repeat=1, min_repeat_ms=0)


def test_prepare_keeps_its_arrays_alive():
    k = build(wb.workloads.matmul(8, 8, 8))
    run = k.prepare(*(np.full((8, 8), 2.0, "float32") for _ in range(3)))
    import gc

    gc.collect()
    assert run() == 0 and float(run.arrays[2][0, 0]) == 32.0
