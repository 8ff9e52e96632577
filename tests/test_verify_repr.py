"""What a notebook cell shows for ``wb.verify(...)``: one plain line."""

from __future__ import annotations

import re

import pytest

import workbench as wb
from workbench.runtime.verify import VerificationError, verify


def _two_outputs():
    A = wb.placeholder((16,), "float32", name="A")
    B = wb.compute((16,), lambda i: A[i] * 2.0, name="B")
    C = wb.compute((16,), lambda i: B[i] + 1.0, name="C")
    return wb.create_prim_func([A, B, C], name="twice_plus")


def test_repr_is_one_readable_line():
    func = wb.workloads.mm_relu(32, 32, 32)
    res = verify(func, func)
    assert res.ok and bool(res) and res.func_name == "mm_relu" and res.seed == 0
    assert repr(res) == (
        "verified mm_relu: output C matches the reference on random inputs "
        f"(max abs error {res.max_abs_error:.2g})")


def test_repr_counts_several_outputs():
    func = _two_outputs()
    res = verify(func, func)
    assert [b.name for b in res.buffers] == ["B", "C"]
    assert repr(res).startswith("verified twice_plus: 2 outputs (B, C) match the reference")
    assert "\n" not in repr(res) and "VerifyResult(" not in repr(res)


def test_failure_names_the_output_and_its_worst_element():
    A = wb.placeholder((8,), "float32", name="A")
    good = wb.create_prim_func([A, wb.compute((8,), lambda i: A[i] * 2.0, name="B")])
    bad = wb.create_prim_func([A, wb.compute((8,), lambda i: A[i] * 2.0 + 1.0, name="B")])
    with pytest.raises(VerificationError) as info:
        verify(bad, good)
    err = info.value
    message = str(err)
    assert "buffer 'B'" in message and "8 of 8 elements" in message
    assert "\n" not in message
    # every element is off by 1: the worst one is named with its two values
    found = re.search(r"max abs error 1 at index \[(\d+)\] \(got (\S+), expected (\S+)\)",
                      message)
    assert found, message
    got, expected = float(found[2]), float(found[3])
    assert got - expected == pytest.approx(1.0, abs=1e-5)
