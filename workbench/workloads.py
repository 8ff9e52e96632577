"""Ready-made workloads: PrimFuncs built with the TE frontend, each with a numpy reference.

Every workload is a function returning an unscheduled PrimFunc (its name is the
workload's name) plus ``<name>_ref(*inputs)``, which computes the output from the
input arrays with numpy (in float64, cast back to the input dtype). Block names are
stable: lessons and tests refer to them.

=====================  ===========================================  ========================
workload               blocks                                       parameters
=====================  ===========================================  ========================
``matmul``             ``C``                                        A, B, C
``mm_relu``            ``Y`` (matmul), ``C`` (relu)                 A, B, C
``batch_matmul``       ``C``                                        A, B, C
``conv2d_nchw``        ``pad``, ``conv``                            data, weight, out
``depthwise_conv2d``   ``pad``, ``depthwise``                       data, weight, out
``linear_bias_relu``   ``matmul``, ``bias_add``, ``relu``           x, w, bias, out
``layer_norm``         ``sum``, ``sum_sq``, ``layer_norm``          x, gamma, beta, out
``softmax``            ``max``, ``exp``, ``sum``, ``norm``          x, out
``transpose``          ``B``                                        A, B
``gemv``               ``y``                                        A, x, y
``elementwise_chain``  ``relu``, ``batch_norm``, ``scale``          x, mean, var, gamma,
                                                                    beta, out
=====================  ===========================================  ========================

Example:
    >>> import workbench as wb
    >>> from workbench import workloads
    >>> func = workloads.get("mm_relu", M=64, N=64, K=64)
    >>> func.name, wb.ir.block_names(func)
    ('mm_relu', ['Y', 'C'])
    >>> workloads.names()[:3]
    ['matmul', 'mm_relu', 'batch_matmul']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from . import te
from .demo_model import (
    DEMO_MLP_CALLS,
    Call,
    demo_mlp,
    demo_mlp_forward,
    demo_mlp_params,
    demo_mlp_ref,
    run_calls,
)
from .ir.expr import exp as _exp
from .ir.expr import logical_and, rsqrt, select
from .ir.functor import Mutator
from .ir.stmt import Block, PrimFunc

__all__ = [
    "DEMO_MLP_CALLS",
    "Call",
    "demo_mlp",
    "demo_mlp_forward",
    "demo_mlp_params",
    "demo_mlp_ref",
    "run_calls",
    "WORKLOADS",
    "Workload",
    "batch_matmul",
    "batch_matmul_ref",
    "conv2d_nchw",
    "conv2d_nchw_ref",
    "depthwise_conv2d",
    "depthwise_conv2d_ref",
    "elementwise_chain",
    "elementwise_chain_ref",
    "gemv",
    "gemv_ref",
    "get",
    "layer_norm",
    "layer_norm_ref",
    "linear_bias_relu",
    "linear_bias_relu_ref",
    "matmul",
    "matmul_ref",
    "mm_relu",
    "mm_relu_ref",
    "names",
    "softmax",
    "softmax_ref",
    "transpose",
    "transpose_ref",
]


@dataclass(frozen=True)
class Workload:
    """A named workload: ``make(**sizes)`` builds the PrimFunc (defaults when called
    bare), ``reference(*inputs, **options)`` computes its output with numpy."""

    name: str
    make: Callable[..., PrimFunc]
    reference: Callable[..., np.ndarray]
    description: str


class _RenameBlocks(Mutator):
    def __init__(self, names: Mapping[str, str]):
        self.names = names

    def visit_block(self, b: Block) -> Block:
        b = super().visit_block(b)
        new = self.names.get(b.name)
        return b if new is None else replace(b, name=new)


def _func(args: list[te.Tensor], name: str, blocks: Mapping[str, str] | None = None
          ) -> PrimFunc:
    """``create_prim_func`` then rename blocks (TE names a block after its tensor)."""
    func = te.create_prim_func(args, name=name)
    if blocks:
        func = func.with_body(_RenameBlocks(blocks).visit_block(func.body))
    return func


def _f64(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(a, dtype=np.float64) for a in arrays]


# ---------------------------------------------------------------------------
# matrix products


def matmul(M: int = 128, N: int = 128, K: int = 128, dtype: str = "float32") -> PrimFunc:
    """``C[i, j] = sum_k A[i, k] * B[k, j]``: block ``"C"`` over loops ``i, j, k``.

    >>> f = matmul(64, 32, 16)
    >>> [p.shape for p in f.params]
    [(64, 16), (16, 32), (64, 32)]
    """
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis(K, name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return _func([A, B, C], "matmul")


def matmul_ref(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    a, b = _f64(A, B)
    return (a @ b).astype(A.dtype)


def mm_relu(M: int = 128, N: int = 128, K: int = 128) -> PrimFunc:
    """``C = relu(A @ B)``: block ``"Y"`` (matmul into the intermediate ``Y``, loops
    ``i, j, k``) then block ``"C"`` (``max(Y, 0)``, loops ``i, j``).

    >>> import workbench as wb
    >>> wb.ir.block_names(mm_relu(16, 16, 16))
    ['Y', 'C']
    """
    A = te.placeholder((M, K), "float32", name="A")
    B = te.placeholder((K, N), "float32", name="B")
    k = te.reduce_axis(K, name="k")
    Y = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((M, N), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    return _func([A, B, C], "mm_relu")


def mm_relu_ref(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.maximum(matmul_ref(A, B), 0)


def batch_matmul(b: int = 4, M: int = 64, N: int = 64, K: int = 64) -> PrimFunc:
    """``C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]``: block ``"C"``, loops ``b, i, j, k``.

    >>> [p.shape for p in batch_matmul(2, 8, 4, 16).params]
    [(2, 8, 16), (2, 16, 4), (2, 8, 4)]
    """
    A = te.placeholder((b, M, K), "float32", name="A")
    B = te.placeholder((b, K, N), "float32", name="B")
    k = te.reduce_axis(K, name="k")
    C = te.compute(
        (b, M, N), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k), name="C"
    )
    return _func([A, B, C], "batch_matmul")


def batch_matmul_ref(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    a, b = _f64(A, B)
    return np.matmul(a, b).astype(A.dtype)


def gemv(M: int = 768, K: int = 768) -> PrimFunc:
    """``y[i] = sum_k A[i, k] * x[k]``: block ``"y"``, loops ``i, k``.

    >>> [p.name for p in gemv(8, 8).params]
    ['A', 'x', 'y']
    """
    A = te.placeholder((M, K), "float32", name="A")
    x = te.placeholder((K,), "float32", name="x")
    k = te.reduce_axis(K, name="k")
    y = te.compute((M,), lambda i: te.sum(A[i, k] * x[k], axis=k), name="y")
    return _func([A, x, y], "gemv")


def gemv_ref(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    a, v = _f64(A, x)
    return (a @ v).astype(A.dtype)


def linear_bias_relu(M: int = 1, K: int = 48, N: int = 64) -> PrimFunc:
    """A fused dense layer ``out = relu(x @ w + bias)`` (``nn.Linear(48, 64)`` + ReLU on
    one row): blocks ``"matmul"`` (loops ``i, j, k``) into the intermediate ``matmul``,
    ``"bias_add"`` into ``bias_add``, then ``"relu"`` into ``out``.

    >>> [p.shape for p in linear_bias_relu().params]
    [(1, 48), (48, 64), (64,), (1, 64)]
    """
    x = te.placeholder((M, K), "float32", name="x")
    w = te.placeholder((K, N), "float32", name="w")
    bias = te.placeholder((N,), "float32", name="bias")
    k = te.reduce_axis(K, name="k")
    mm = te.compute((M, N), lambda i, j: te.sum(x[i, k] * w[k, j], axis=k), name="matmul")
    add = te.compute((M, N), lambda i, j: mm[i, j] + bias[j], name="bias_add")
    out = te.compute((M, N), lambda i, j: te.max(add[i, j], 0.0), name="out")
    return _func([x, w, bias, out], "linear_bias_relu", {"out": "relu"})


def linear_bias_relu_ref(x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    a, b, c = _f64(x, w, bias)
    return np.maximum(a @ b + c, 0).astype(x.dtype)


# ---------------------------------------------------------------------------
# convolutions


def _pad(data: te.Tensor, padding: int) -> te.Tensor:
    """The padding stage ``pad``: ``data`` shifted by ``padding``, zero outside."""
    N, C, H, W = data.shape
    p = padding

    def body(n, c, h, w):
        inside = logical_and(logical_and(h >= p, h < H + p), logical_and(w >= p, w < W + p))
        return select(inside, data[n, c, h - p, w - p], 0.0)

    return te.compute((N, C, H + 2 * p, W + 2 * p), body, name="pad")


def conv2d_nchw(N: int = 1, C: int = 64, H: int = 56, W: int = 56, K: int = 64, R: int = 3,
                S: int = 3, stride: int = 1, padding: int = 1) -> PrimFunc:
    """2-D convolution in NCHW layout with an explicit padding stage.

    Blocks: ``"pad"`` (``pad[n, c, h, w] = select(inside, data[n, c, h - p, w - p], 0)``)
    and ``"conv"`` (loops ``n, k, h, w`` then reduce axes ``rc, ry, rx``):
    ``out[n, k, h, w] = sum pad[n, rc, h*stride + ry, w*stride + rx] * weight[k, rc, ry, rx]``.
    Parameters ``data (N, C, H, W)``, ``weight (K, C, R, S)``, ``out (N, K, OH, OW)``.

    >>> conv2d_nchw(1, 8, 14, 14, 8).params[2].shape
    (1, 8, 14, 14)
    """
    OH = (H + 2 * padding - R) // stride + 1
    OW = (W + 2 * padding - S) // stride + 1
    data = te.placeholder((N, C, H, W), "float32", name="data")
    weight = te.placeholder((K, C, R, S), "float32", name="weight")
    pad = _pad(data, padding)
    rc = te.reduce_axis(C, name="rc")
    ry = te.reduce_axis(R, name="ry")
    rx = te.reduce_axis(S, name="rx")
    out = te.compute(
        (N, K, OH, OW),
        lambda n, k, h, w: te.sum(
            pad[n, rc, h * stride + ry, w * stride + rx] * weight[k, rc, ry, rx],
            axis=[rc, ry, rx],
        ),
        name="out",
    )
    return _func([data, weight, out], "conv2d_nchw", {"out": "conv"})


def _windows(data: np.ndarray, R: int, S: int, stride: int, padding: int) -> np.ndarray:
    p = padding
    padded = np.pad(np.asarray(data, np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(padded, (R, S), axis=(2, 3))
    return win[:, :, ::stride, ::stride]  # (N, C, OH, OW, R, S)


def conv2d_nchw_ref(data: np.ndarray, weight: np.ndarray, stride: int = 1, padding: int = 1
                    ) -> np.ndarray:
    _, _, R, S = weight.shape
    win = _windows(data, R, S, stride, padding)
    return np.einsum("nchwrs,kcrs->nkhw", win, weight.astype(np.float64)).astype(data.dtype)


def depthwise_conv2d(N: int = 1, C: int = 64, H: int = 56, W: int = 56, R: int = 3,
                     S: int = 3, padding: int = 1, stride: int = 1) -> PrimFunc:
    """Depthwise 2-D convolution (one filter per channel, NCHW) with a padding stage.

    Blocks ``"pad"`` and ``"depthwise"`` (loops ``n, c, h, w``, reduce axes ``ry, rx``):
    ``out[n, c, h, w] = sum pad[n, c, h*stride + ry, w*stride + rx] * weight[c, 0, ry, rx]``.
    Parameters ``data (N, C, H, W)``, ``weight (C, 1, R, S)`` (as in PyTorch), ``out``.

    >>> depthwise_conv2d(1, 4, 8, 8).params[1].shape
    (4, 1, 3, 3)
    """
    OH = (H + 2 * padding - R) // stride + 1
    OW = (W + 2 * padding - S) // stride + 1
    data = te.placeholder((N, C, H, W), "float32", name="data")
    weight = te.placeholder((C, 1, R, S), "float32", name="weight")
    pad = _pad(data, padding)
    ry = te.reduce_axis(R, name="ry")
    rx = te.reduce_axis(S, name="rx")
    out = te.compute(
        (N, C, OH, OW),
        lambda n, c, h, w: te.sum(
            pad[n, c, h * stride + ry, w * stride + rx] * weight[c, 0, ry, rx], axis=[ry, rx]
        ),
        name="out",
    )
    return _func([data, weight, out], "depthwise_conv2d", {"out": "depthwise"})


def depthwise_conv2d_ref(data: np.ndarray, weight: np.ndarray, padding: int = 1,
                         stride: int = 1) -> np.ndarray:
    _, _, R, S = weight.shape
    win = _windows(data, R, S, stride, padding)
    out = np.einsum("nchwrs,crs->nchw", win, weight[:, 0].astype(np.float64))
    return out.astype(data.dtype)


# ---------------------------------------------------------------------------
# normalizations and elementwise


def layer_norm(M: int = 1, N: int = 768, eps: float = 1e-5) -> PrimFunc:
    """Layer normalization of each row of ``x (M, N)``, as in ``nn.LayerNorm(N)``.

    Blocks ``"sum"`` (``sum[i] = sum_k x[i, k]``) and ``"sum_sq"`` (sum of squares)
    reduce over ``k``; ``"layer_norm"`` then writes ``out[i, j] = (x - mean) *
    rsqrt(sum_sq/N - mean^2 + eps) * gamma[j] + beta[j]`` with ``mean = sum/N``.

    >>> [p.name for p in layer_norm(2, 16).params]
    ['x', 'gamma', 'beta', 'out']
    """
    x = te.placeholder((M, N), "float32", name="x")
    gamma = te.placeholder((N,), "float32", name="gamma")
    beta = te.placeholder((N,), "float32", name="beta")
    k1 = te.reduce_axis(N, name="k")
    k2 = te.reduce_axis(N, name="k")
    s = te.compute((M,), lambda i: te.sum(x[i, k1], axis=k1), name="sum")
    sq = te.compute((M,), lambda i: te.sum(x[i, k2] * x[i, k2], axis=k2), name="sum_sq")

    def norm(i, j):
        mean = s[i] / float(N)
        var = sq[i] / float(N) - mean * mean
        return (x[i, j] - mean) * rsqrt(var + float(eps)) * gamma[j] + beta[j]

    out = te.compute((M, N), norm, name="out")
    return _func([x, gamma, beta, out], "layer_norm", {"out": "layer_norm"})


def layer_norm_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5
                   ) -> np.ndarray:
    a, g, b = _f64(x, gamma, beta)
    mean = a.mean(axis=1, keepdims=True)
    var = a.var(axis=1, keepdims=True)
    return ((a - mean) / np.sqrt(var + eps) * g + b).astype(x.dtype)


def softmax(M: int = 128, N: int = 128) -> PrimFunc:
    """Row-wise softmax of ``x (M, N)``, numerically stable.

    Blocks ``"max"`` (row max, a max-reduction over ``k``), ``"exp"``
    (``exp(x - max)``), ``"sum"`` (row sum over ``k``), ``"norm"`` (``exp / sum`` into
    ``out``).

    >>> import workbench as wb
    >>> wb.ir.block_names(softmax(4, 8))
    ['max', 'exp', 'sum', 'norm']
    """
    x = te.placeholder((M, N), "float32", name="x")
    k1 = te.reduce_axis(N, name="k")
    k2 = te.reduce_axis(N, name="k")
    mx = te.compute((M,), lambda i: te.max(x[i, k1], axis=k1), name="max")
    e = te.compute((M, N), lambda i, j: _exp(x[i, j] - mx[i]), name="exp")
    s = te.compute((M,), lambda i: te.sum(e[i, k2], axis=k2), name="sum")
    out = te.compute((M, N), lambda i, j: e[i, j] / s[i], name="out")
    return _func([x, out], "softmax", {"out": "norm"})


def softmax_ref(x: np.ndarray) -> np.ndarray:
    a = np.asarray(x, np.float64)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(x.dtype)


def transpose(M: int = 128, N: int = 256) -> PrimFunc:
    """``B[j, i] = A[i, j]`` for ``A (M, N)``: block ``"B"`` over loops ``j, i``.

    >>> [p.shape for p in transpose(4, 8).params]
    [(4, 8), (8, 4)]
    """
    A = te.placeholder((M, N), "float32", name="A")
    B = te.compute((N, M), lambda j, i: A[i, j], name="B")
    return _func([A, B], "transpose")


def transpose_ref(A: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(A.T)


def elementwise_chain(N: int = 1024, C: int = 64, eps: float = 1e-5, alpha: float = 0.5
                      ) -> PrimFunc:
    """ReLU, then inference BatchNorm, then a scale, on ``x (N, C)`` (``C`` channels).

    Blocks ``"relu"`` (``max(x, 0)``), ``"batch_norm"`` (``(relu - mean[c]) *
    rsqrt(var[c] + eps) * gamma[c] + beta[c]``) and ``"scale"`` (``alpha *
    batch_norm`` into ``out``); all over loops ``n, c``. ``var`` must be
    non-negative (random normal inputs give NaN channels, the same in every backend).

    >>> [p.name for p in elementwise_chain(8, 4).params]
    ['x', 'mean', 'var', 'gamma', 'beta', 'out']
    """
    x = te.placeholder((N, C), "float32", name="x")
    mean, var, gamma, beta = (
        te.placeholder((C,), "float32", name=n) for n in ("mean", "var", "gamma", "beta")
    )
    relu = te.compute((N, C), lambda n, c: te.max(x[n, c], 0.0), name="relu")
    bn = te.compute(
        (N, C),
        lambda n, c: (relu[n, c] - mean[c]) * rsqrt(var[c] + float(eps)) * gamma[c] + beta[c],
        name="batch_norm",
    )
    out = te.compute((N, C), lambda n, c: bn[n, c] * float(alpha), name="out")
    return _func([x, mean, var, gamma, beta, out], "elementwise_chain", {"out": "scale"})


def elementwise_chain_ref(x: np.ndarray, mean: np.ndarray, var: np.ndarray,
                          gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5,
                          alpha: float = 0.5) -> np.ndarray:
    a, m, v, g, b = _f64(x, mean, var, gamma, beta)
    with np.errstate(invalid="ignore"):
        out = ((np.maximum(a, 0) - m) / np.sqrt(v + eps) * g + b) * alpha
    return out.astype(x.dtype)


# ---------------------------------------------------------------------------
# registry


def _first_line(fn: Callable) -> str:
    return (fn.__doc__ or "").strip().splitlines()[0]


WORKLOADS: dict[str, Workload] = {
    fn.__name__: Workload(fn.__name__, fn, ref, _first_line(fn))
    for fn, ref in [
        (matmul, matmul_ref),
        (mm_relu, mm_relu_ref),
        (batch_matmul, batch_matmul_ref),
        (conv2d_nchw, conv2d_nchw_ref),
        (depthwise_conv2d, depthwise_conv2d_ref),
        (linear_bias_relu, linear_bias_relu_ref),
        (layer_norm, layer_norm_ref),
        (softmax, softmax_ref),
        (transpose, transpose_ref),
        (gemv, gemv_ref),
        (elementwise_chain, elementwise_chain_ref),
    ]
}


def names() -> list[str]:
    """Workload names, in registry order.

    >>> "conv2d_nchw" in names()
    True
    """
    return list(WORKLOADS)


def get(name: str, **sizes: int | float | str) -> PrimFunc:
    """Build workload ``name`` with the given sizes (defaults for the others).

    >>> get("matmul", M=32, N=16, K=8).params[2].shape
    (32, 16)
    """
    try:
        workload = WORKLOADS[name]
    except KeyError:
        raise KeyError(f"no workload {name!r}; known: {', '.join(WORKLOADS)}") from None
    return workload.make(**sizes)
