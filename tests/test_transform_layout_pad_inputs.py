"""transform_layout of function parameters with maps that leave padding.

A map that is not onto its new shape leaves padding: refused without a ``pad_value``
(as TVM 0.27 refuses it), with one an input gets an assumption block and an output's
padding is filled. An offset (``lambda i, j: (i + 1, j)``) leaves row 0 as padding,
which the inverse map's own predicate does not state: it is found from the inverse's
bounds. An input laid out in the new shape only needs its valid region filled from the
original array (the scheduled function never reads its padding).
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.runtime.reference import evaluate, random_args
from workbench.schedule.primitives.transform_layout import (
    TransformationIntroducesPaddingError,
)


def _layer_norm():
    return wb.workloads.layer_norm(10, 8)


@pytest.mark.parametrize("imap", ["lambda i, j: (i + 1, j)", "lambda i, j: (i, j + 2)",
                                  "lambda i, j: (i // 3, i % 3, j)"])
def test_padding_map_on_an_input_without_pad_value_is_refused(imap):
    sch = wb.Schedule(_layer_norm())
    block = sch.get_block("sum")
    before = sch.mod.script()
    with pytest.raises(TransformationIntroducesPaddingError, match='buffer "x"'):
        sch.transform_layout(block, "x", imap)
    assert sch.mod.script() == before
    assert len(sch.trace) == 1  # the get_block only


def test_offset_map_states_its_padding_for_an_input():
    sch = wb.Schedule(_layer_norm())
    sch.transform_layout(sch.get_block("sum"), "x", "lambda i, j: (i + 1, j)", pad_value=0.0)
    assert sch.func.params[0].shape == (11, 8)
    assumption = sch.get(sch.get_block("buffer_x_assumptions"))
    assert "x[v_axis0, v_j] == T.float32(0)" in sch.mod.script()
    assert assumption.iter_vars[0].extent == 11


def _relaid(a: np.ndarray, shape: tuple, where) -> np.ndarray:
    """``a`` in a new layout: the valid region at ``where``, the padding NaN (what it
    holds is undefined)."""
    x = np.full(shape, np.nan, a.dtype)
    x[where] = a
    return x


@pytest.mark.parametrize("imap, where", [
    ("lambda i, j: (i // 3, i % 3, j)",
     lambda i, j: (i // 3, i % 3, j)),
    ("lambda i, j: (i + 1, j)", lambda i, j: (i + 1, j)),
])
def test_padded_input_computes_the_same_from_its_valid_region(imap, where):
    func = _layer_norm()
    sch = wb.Schedule(func)
    sch.transform_layout(sch.get_block("sum"), "x", imap, pad_value=0.0)
    args = random_args(func, seed=0)
    expected = [a.copy() for a in args]
    evaluate(func, *expected)
    x = _relaid(args[0], tuple(sch.func.params[0].shape), where(*np.indices(args[0].shape)))
    got = [x, *(a.copy() for a in args[1:])]
    wb.build(sch.mod)["layer_norm"](*got)
    np.testing.assert_allclose(got[3], expected[3], rtol=1e-4, atol=1e-5)


def test_offset_map_fills_the_padding_of_an_output():
    func = wb.workloads.elementwise_chain(4, 4)
    sch = wb.Schedule(func)
    sch.transform_layout(sch.get_block("scale"), "out", "lambda i, j: (i + 1, j)",
                         pad_value=-7.0)
    out = sch.func.params[-1]
    assert out.shape == (5, 4)
    args = random_args(func, seed=0)
    expected = [a.copy() for a in args]
    evaluate(func, *expected)
    got = [a.copy() for a in args[:-1]] + [np.full((5, 4), np.nan, np.float32)]
    wb.build(sch.mod)["elementwise_chain"](*got)
    np.testing.assert_array_equal(got[-1][0], np.full(4, -7.0, np.float32))
    np.testing.assert_allclose(got[-1][1:], expected[-1], rtol=1e-5, atol=1e-6)
