"""Every workload, evaluated by the numpy reference evaluator, matches its numpy function."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from workbench import workloads
from workbench.ir import PrimFunc, block_names
from workbench.runtime.reference import evaluate, input_params, output_params, random_args

# Defaults, except where they would make the suite slow.
SIZES: dict[str, dict] = {
    "conv2d_nchw": dict(N=1, C=8, H=14, W=14, K=8),
    "depthwise_conv2d": dict(N=1, C=8, H=14, W=14),
}

BLOCKS = {
    "matmul": ["C"],
    "mm_relu": ["Y", "C"],
    "batch_matmul": ["C"],
    "conv2d_nchw": ["pad", "conv"],
    "depthwise_conv2d": ["pad", "depthwise"],
    "linear_bias_relu": ["matmul", "bias_add", "relu"],
    "layer_norm": ["sum", "sum_sq", "layer_norm"],
    "softmax": ["max", "exp", "sum", "norm"],
    "transpose": ["B"],
    "gemv": ["y"],
    "elementwise_chain": ["relu", "batch_norm", "scale"],
}

PARAMS = {
    "matmul": ["A", "B", "C"],
    "mm_relu": ["A", "B", "C"],
    "batch_matmul": ["A", "B", "C"],
    "conv2d_nchw": ["data", "weight", "out"],
    "depthwise_conv2d": ["data", "weight", "out"],
    "linear_bias_relu": ["x", "w", "bias", "out"],
    "layer_norm": ["x", "gamma", "beta", "out"],
    "softmax": ["x", "out"],
    "transpose": ["A", "B"],
    "gemv": ["A", "x", "y"],
    "elementwise_chain": ["x", "mean", "var", "gamma", "beta", "out"],
}


def check(func: PrimFunc, reference, seed: int = 0, **options) -> None:
    args = random_args(func, seed=seed)
    if func.name == "elementwise_chain":
        args[2] = np.abs(args[2])  # a variance is non-negative
    inputs = [args[i] for i in input_params(func)]
    expected = reference(*inputs, **options)
    evaluate(func, *args)
    (out,) = [args[i] for i in output_params(func)]
    assert out.dtype == expected.dtype and out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_registry_is_complete():
    assert workloads.names() == list(BLOCKS)
    for name, wl in workloads.WORKLOADS.items():
        assert wl.name == name and wl.description
        with pytest.raises(dataclasses.FrozenInstanceError):
            wl.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize("name", list(BLOCKS))
def test_workload_matches_numpy(name):
    wl = workloads.WORKLOADS[name]
    func = wl.make(**SIZES.get(name, {}))
    assert func.name == name
    assert block_names(func) == BLOCKS[name]
    assert [p.name for p in func.params] == PARAMS[name]
    check(func, wl.reference)


def test_mm_relu_is_the_design_example():
    func = workloads.mm_relu()
    text = func.script()
    assert "for i, j, k in T.grid(128, 128, 128):" in text
    assert "Y = T.alloc_buffer((128, 128))" in text
    assert 'with T.block("C"):' in text


@pytest.mark.parametrize(
    "name, sizes, options",
    [
        ("conv2d_nchw", dict(N=2, C=3, H=9, W=7, K=4, R=3, S=2, stride=2, padding=1),
         dict(stride=2, padding=1)),
        ("conv2d_nchw", dict(N=1, C=4, H=8, W=8, K=4, R=1, S=1, padding=0), dict(padding=0)),
        ("depthwise_conv2d", dict(N=1, C=5, H=9, W=9, R=5, S=5, padding=2), dict(padding=2)),
        ("depthwise_conv2d", dict(C=3, H=8, W=8, stride=2), dict(stride=2)),
        ("layer_norm", dict(M=4, N=100, eps=1e-3), dict(eps=1e-3)),
        ("elementwise_chain", dict(N=16, C=8, alpha=3.0), dict(alpha=3.0)),
        ("softmax", dict(M=3, N=1000), {}),
        ("batch_matmul", dict(b=3, M=5, N=7, K=9), {}),
        ("linear_bias_relu", dict(M=4, K=48, N=64), {}),
    ],
)
def test_workload_other_sizes(name, sizes, options):
    check(workloads.get(name, **sizes), workloads.WORKLOADS[name].reference, seed=2, **options)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_matmul_dtypes(dtype):
    func = workloads.matmul(16, 24, 8, dtype=dtype)
    assert {p.dtype for p in func.params} == {dtype}
    check(func, workloads.matmul_ref)


def test_get_unknown_name():
    with pytest.raises(KeyError, match="no workload 'gemm'; known: matmul, mm_relu"):
        workloads.get("gemm")


def test_get_passes_sizes():
    func = workloads.get("gemv", M=32, K=16)
    assert [p.shape for p in func.params] == [(32, 16), (16,), (32,)]
