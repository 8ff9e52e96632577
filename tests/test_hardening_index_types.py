"""Index types follow the range: extents beyond int32 get int64 loop counters (no
overflowing ``int32_t`` counter), and shapes must be integral."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.c import generate_c

HUGE = 2**31 + 64  # one past INT32_MAX, plus a little


def _loop_lines(src: str) -> list[str]:
    return [ln.strip() for ln in src.splitlines() if ln.strip().startswith("for (")]


def test_huge_compute_extent_gets_int64_loop_and_block_vars():
    A = wb.placeholder((HUGE,), "int8", name="A")
    B = wb.compute((HUGE,), lambda i: A[i] + wb.const(1, "int8"), name="B")
    func = wb.create_prim_func([A, B], name="big")
    src = generate_c(func)
    assert _loop_lines(src) == [f"for (int64_t i = 0; i < {HUGE}; ++i) {{"]
    assert "const int64_t vi = i;" in src
    assert "int32_t i" not in src


def test_huge_reduce_axis_is_int64():
    A = wb.placeholder((HUGE,), "int8", name="A")
    k = wb.reduce_axis(HUGE, name="k")
    assert k.dtype == "int64"
    B = wb.compute((1,), lambda i: wb.sum(wb.cast(A[k], "int64"), axis=k), name="B")
    src = generate_c(wb.create_prim_func([A, B], name="total"))
    assert f"for (int64_t k = 0; k < {HUGE}; ++k) {{" in src


def test_fusing_into_a_product_beyond_int32_gives_an_int64_loop():
    A = wb.placeholder((65536, 65536), "int8", name="A")
    B = wb.compute((65536, 65536), lambda i, j: A[i, j] + wb.const(1, "int8"), name="B")
    sch = wb.Schedule(wb.create_prim_func([A, B], name="big2"))
    i, j = sch.get_loops(sch.get_block("B"))
    fused = sch.fuse(i, j)
    assert sch.get(fused).loop_var.dtype == "int64"
    src = generate_c(sch.mod)
    assert _loop_lines(src) == ["for (int64_t i_j_fused = 0; i_j_fused < 4294967296; "
                                "++i_j_fused) {"]
    # a small fused loop keeps int32
    sch = wb.Schedule(wb.workloads.matmul(64, 64, 64))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    assert sch.get(sch.fuse(i, j)).loop_var.dtype == "int32"


def test_int32_loop_variable_beyond_int32_range_runs_correctly():
    """A parsed function whose int32 loop runs over [2**31, 2**31 + 64): the C counter
    is widened, and the kernel (64 iterations) computes the right values."""
    func = wb.from_script('''
from tvm.script import tir as T
@T.prim_func
def main(B: T.Buffer((64,), "int64")):
    for i in T.serial(2147483648, 2147483712):
        with T.block("B"):
            vi = T.axis.spatial(64, i - 2147483648)
            B[vi] = T.Cast("int64", i) * T.int64(2)
''')
    kernel = wb.build(func)
    assert "for (int64_t i = 2147483648; i < 2147483712; ++i) {" in kernel.source
    b = np.zeros(64, "int64")
    kernel(b)
    assert (b == (np.arange(64, dtype="int64") + 2**31) * 2).all()


def test_small_extents_keep_int32():
    src = generate_c(wb.workloads.matmul(64, 64, 64))
    assert all(line.startswith("for (int32_t") for line in _loop_lines(src))


@pytest.mark.parametrize("bad", [4.5, np.float32(2.5), np.float64(3.25), Fraction(5, 2)])
def test_non_integral_shapes_are_refused(bad):
    with pytest.raises(TypeError, match="must be an integer"):
        wb.placeholder((bad, 3), "float32", name="A")
    A = wb.placeholder((4,), "float32", name="A")
    with pytest.raises(TypeError, match="must be an integer"):
        wb.compute((bad,), lambda i: A[i], name="B")
    with pytest.raises(TypeError, match="must be an integer"):
        wb.reduce_axis(bad, name="k")


def test_integral_shapes_are_accepted():
    assert wb.placeholder((np.int64(4), np.int32(3)), name="A").shape == (4, 3)
    assert wb.placeholder((4.0, 3), name="A").shape == (4, 3)
    n = wb.Var("n", "int32")
    assert wb.placeholder((n, 3), name="A").shape == (n, 3)
