"""Integer division and modulo by zero never kill the process: a constant zero divisor is
refused when the kernel is built, a zero divisor met at run time makes the kernel call raise
ZeroDivisionError naming the function and the block, INT_MIN // -1 wraps as in numpy, and
the divisors known to be safe (tile sizes, shape variables) print as plain C operators."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.cstyle import CodegenError, IntegerDivisionByZeroError
from workbench.codegen.cuda import generate_cuda
from workbench.ir.expr import Div


def _divide(dtype: str = "int32", op: str = "floordiv", n: int = 8):
    A = wb.placeholder((n,), dtype, name="A")
    D = wb.placeholder((n,), dtype, name="D")
    body = {
        "floordiv": lambda i: A[i] // D[i],
        "floormod": lambda i: A[i] % D[i],
        "truncdiv": lambda i: Div(A[i], D[i]),
    }[op]
    B = wb.compute((n,), body, name="B")
    return wb.create_prim_func([A, D, B], name="main")


def _by_constant(op: str):
    A = wb.placeholder((8,), "int32", name="A")
    body = {
        "floordiv": lambda i: A[i] // 0,
        "floormod": lambda i: A[i] % 0,
        "truncdiv": lambda i: Div(A[i], wb.const(0, "int32")),
    }[op]
    B = wb.compute((8,), body, name="B")
    return wb.create_prim_func([A, B], name="main")


@pytest.mark.parametrize("op", ["floordiv", "floormod", "truncdiv"])
def test_constant_zero_divisor_is_refused_at_build(op):
    func = _by_constant(op)
    with pytest.raises(IntegerDivisionByZeroError) as info:
        wb.build(func)
    err = info.value
    assert isinstance(err, ZeroDivisionError) and isinstance(err, CodegenError)
    assert "kernel 'main', block 'B': integer division by zero" in str(err)
    assert "A[vi]" in str(err)  # the expression is named


@pytest.mark.parametrize("op", ["floordiv", "floormod", "truncdiv"])
def test_zero_divisor_at_run_time_raises_and_names_the_block(op):
    kernel = wb.build(_divide(op=op))
    a = np.arange(-4, 4, dtype="int32")
    d = np.array([1, 2, 3, 0, 5, 6, 7, 8], dtype="int32")
    b = np.zeros(8, dtype="int32")
    with pytest.raises(ZeroDivisionError, match=r"kernel 'main', block 'B': integer division"):
        kernel(a, d, b)
    # the kernel ran to its end: every other element is right
    expected = {
        "floordiv": lambda: a // np.where(d == 0, 1, d),
        "floormod": lambda: a % np.where(d == 0, 1, d),
        "truncdiv": lambda: np.trunc(a / np.where(d == 0, 1, d)).astype("int32"),
    }[op]()
    ok = d != 0
    assert (b[ok] == expected[ok]).all()
    d[3] = 4  # no zero divisor: a clean call, with the right values
    kernel(a, d, b)
    assert (b == {"floordiv": a // d, "floormod": a % d,
                  "truncdiv": np.trunc(a / d).astype("int32")}[op]).all()


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint32"])
def test_every_integer_dtype_is_checked(dtype):
    kernel = wb.build(_divide(dtype))
    a = np.full(8, 5, dtype=dtype)
    d = np.array([1, 2, 3, 4, 5, 6, 7, 0], dtype=dtype)
    with pytest.raises(ZeroDivisionError, match="block 'B'"):
        kernel(a, d, np.zeros(8, dtype=dtype))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_minimum_divided_by_minus_one_wraps_as_numpy(dtype):
    lo = np.iinfo(dtype).min
    a = np.array([lo, lo, 7, -7], dtype=dtype)
    d = np.array([-1, -1, -1, -1], dtype=dtype)
    for op, want in (("floordiv", [lo, lo, -7, 7]), ("floormod", [0, 0, 0, 0]),
                     ("truncdiv", [lo, lo, -7, 7])):
        b = np.zeros(4, dtype=dtype)
        wb.build(_divide(dtype, op, 4))(a, d, b)  # no SIGFPE
        assert b.tolist() == want, op


def test_verify_draws_nonzero_divisors():
    result = wb.verify(_divide(), _divide())
    assert result.ok


def test_verify_with_a_divisor_that_can_still_be_zero_gives_a_clear_error():
    A = wb.placeholder((64,), "int32", name="A")
    D = wb.placeholder((64,), "int32", name="D")
    B = wb.compute((64,), lambda i: A[i] // (D[i] - 1), name="B")
    func = wb.create_prim_func([A, D, B], name="main")
    with pytest.raises(ZeroDivisionError, match="kernel 'main', block 'B'"):
        wb.verify(func, func)


def test_isolated_measurement_reports_division_by_zero():
    from workbench.runtime.isolation import MeasureError

    kernel = wb.build(_divide(n=4096))  # the worker's random divisors include 0
    with pytest.raises(MeasureError) as info:
        wb.measure(kernel, isolated=True, repeat=1, min_repeat_ms=1)
    result = info.value.result
    assert result.status == "run_error"
    assert "ZeroDivisionError" in result.error
    assert "kernel 'main', block 'B': integer division by zero" in result.error


def test_safe_divisors_print_unchecked():
    """Float kernels, constant tile sizes and shape variables pay nothing."""
    func = wb.workloads.matmul(64, 64, 64)
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.fuse(i, j)
    src = wb.build(sch.mod).source
    assert "_checked" not in src and "wb_status" not in src and "/ 64" in src
    n = wb.Var("n", "int32")
    A = wb.placeholder((n,), "int32", name="A")
    B = wb.compute((n,), lambda i: A[i] // n + A[i] % (i + 1), name="B")
    src = wb.build(wb.create_prim_func([A, B], name="sym")).source
    assert "_checked" not in src and "wb_error_message" not in src
    # a possibly negative constant divisor other than -1 stays unchecked too
    A = wb.placeholder((8,), "int32", name="A")
    B = wb.compute((8,), lambda i: A[i] // -3, name="B")
    assert "_checked" not in wb.build(wb.create_prim_func([A, B])).source


def _gpu_divide():
    sch = wb.Schedule(_divide(n=256))
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, factors=[None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def test_cuda_text_divides_unchecked_and_refuses_constant_zero():
    src = generate_cuda(_gpu_divide().mod)
    assert "wb_floordiv_int32(" in src and "_checked" not in src and "wb_status" not in src
    sch = wb.Schedule(_by_constant("floordiv"))
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, factors=[None, 8])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    with pytest.raises(IntegerDivisionByZeroError, match="block 'B'"):
        generate_cuda(sch.mod)


def test_emulated_gpu_kernel_reports_division_by_zero():
    kernel = wb.build(_gpu_divide().mod, target="cuda", emulate=True)
    a = np.arange(256, dtype="int32")
    d = np.ones(256, dtype="int32")
    b = np.zeros(256, dtype="int32")
    kernel(a, d, b)
    assert (b == a).all()
    d[100] = 0
    with pytest.raises(ZeroDivisionError, match="block 'B'"):
        kernel(a, d, b)


@pytest.mark.nvcc
def test_cuda_division_compiles_with_nvcc():
    from workbench.testing import check_nvcc

    ptx = check_nvcc(_gpu_divide())
    assert all(".entry" in text for text in ptx.values())
