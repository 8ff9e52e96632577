"""The DLight tutorial's demo model: Linear(768, 768) -> ReLU -> LayerNorm(768) ->
Linear(768, 256), as the TIR functions a compiler's legalization makes of it.

:func:`demo_mlp` gives the IRModule (five functions, named and shaped as in the
tutorial: ``transpose``, ``fused_matmul_add_relu``, ``layer_norm``, ``transpose1``,
``fused_matmul1_add1``); ``batch`` may be a number or a name, which makes the batch
dimension symbolic. :func:`demo_mlp_forward` runs the model's forward pass through
built kernels of any module with those functions (unscheduled on the CPU, scheduled
for the GPU on a GPU or in the emulator), in the order the model calls them;
:func:`demo_mlp_ref` is the same pass in numpy.

>>> import numpy as np
>>> from workbench import workloads
>>> mod = workloads.demo_mlp()
>>> mod.names
['transpose', 'fused_matmul_add_relu', 'layer_norm', 'transpose1', 'fused_matmul1_add1']
>>> params = workloads.demo_mlp_params()
>>> x = np.random.default_rng(0).standard_normal((1, 768)).astype("float32")
>>> out = workloads.demo_mlp_forward(mod, x, params)
>>> out.shape, bool(np.allclose(out, workloads.demo_mlp_ref(x, params), atol=1e-4))
((1, 256), True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .ir import IRModule, PrimFunc

__all__ = [
    "DEMO_MLP_CALLS",
    "Call",
    "demo_mlp",
    "demo_mlp_forward",
    "demo_mlp_params",
    "demo_mlp_ref",
    "run_calls",
]

_TEXT = '''
from tvm.script import ir as I
from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def transpose(fc1_weight: T.Buffer((T.int64(768), T.int64(768)), "float32"),
                  T_transpose: T.Buffer((T.int64(768), T.int64(768)), "float32")):
        T.func_attr({"op_pattern": 2})
        for ax0, ax1 in T.grid(T.int64(768), T.int64(768)):
            with T.block("T_transpose"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T_transpose[v_ax0, v_ax1] = fc1_weight[v_ax1, v_ax0]

    @T.prim_func
    def fused_matmul_add_relu(x: T.Buffer((@B@, T.int64(768)), "float32"),
                              permute_dims: T.Buffer((T.int64(768), T.int64(768)), "float32"),
                              fc1_bias: T.Buffer((T.int64(768),), "float32"),
                              compute_intermediate: T.Buffer((@B@, T.int64(768)), "float32")):
        @N@
        matmul_intermediate = T.alloc_buffer((@B@, T.int64(768)))
        T_add_intermediate = T.alloc_buffer((@B@, T.int64(768)))
        for i0, i1, k in T.grid(@B@, T.int64(768), T.int64(768)):
            with T.block("matmul"):
                v_i0, v_i1, v_k = T.axis.remap("SSR", [i0, i1, k])
                with T.init():
                    matmul_intermediate[v_i0, v_i1] = T.float32(0.0)
                matmul_intermediate[v_i0, v_i1] = (matmul_intermediate[v_i0, v_i1]
                                                   + x[v_i0, v_k] * permute_dims[v_k, v_i1])
        for ax0, ax1 in T.grid(@B@, T.int64(768)):
            with T.block("T_add"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T_add_intermediate[v_ax0, v_ax1] = (matmul_intermediate[v_ax0, v_ax1]
                                                    + fc1_bias[v_ax1])
        for i0, i1 in T.grid(@B@, T.int64(768)):
            with T.block("compute"):
                v_i0, v_i1 = T.axis.remap("SS", [i0, i1])
                compute_intermediate[v_i0, v_i1] = T.max(T_add_intermediate[v_i0, v_i1],
                                                         T.float32(0.0))

    @T.prim_func
    def layer_norm(relu: T.Buffer((@B@, T.int64(768)), "float32"),
                   norm_weight: T.Buffer((T.int64(768),), "float32"),
                   norm_bias: T.Buffer((T.int64(768),), "float32"),
                   T_layer_norm: T.Buffer((@B@, T.int64(768)), "float32")):
        @N@
        T.func_attr({"op_pattern": 4})
        relu_sum = T.alloc_buffer((@B@,))
        relu_mean = T.alloc_buffer((@B@,))
        relu_var_sum = T.alloc_buffer((@B@,))
        for ax0, k1 in T.grid(@B@, T.int64(768)):
            with T.block("relu_sum"):
                v_ax0, v_k1 = T.axis.remap("SR", [ax0, k1])
                with T.init():
                    relu_sum[v_ax0] = T.float32(0.0)
                relu_sum[v_ax0] = relu_sum[v_ax0] + relu[v_ax0, v_k1]
        for ax0 in range(@B@):
            with T.block("relu_mean"):
                v_ax0 = T.axis.spatial(@B@, ax0)
                relu_mean[v_ax0] = relu_sum[v_ax0] / T.float32(768.0)
        for ax0, k1 in T.grid(@B@, T.int64(768)):
            with T.block("relu_var_sum"):
                v_ax0, v_k1 = T.axis.remap("SR", [ax0, k1])
                with T.init():
                    relu_var_sum[v_ax0] = T.float32(0.0)
                relu_var_sum[v_ax0] = relu_var_sum[v_ax0] + (
                    (relu[v_ax0, v_k1] - relu_mean[v_ax0]) * (relu[v_ax0, v_k1] - relu_mean[v_ax0]))
        for ax0, ax1 in T.grid(@B@, T.int64(768)):
            with T.block("T_layer_norm"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T_layer_norm[v_ax0, v_ax1] = (
                    (relu[v_ax0, v_ax1] - relu_mean[v_ax0])
                    * T.rsqrt(relu_var_sum[v_ax0] / T.float32(768.0) + T.float32(1e-05))
                    * norm_weight[v_ax1] + norm_bias[v_ax1])

    @T.prim_func
    def transpose1(fc2_weight: T.Buffer((T.int64(256), T.int64(768)), "float32"),
                   T_transpose: T.Buffer((T.int64(768), T.int64(256)), "float32")):
        T.func_attr({"op_pattern": 2})
        for ax0, ax1 in T.grid(T.int64(768), T.int64(256)):
            with T.block("T_transpose"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T_transpose[v_ax0, v_ax1] = fc2_weight[v_ax1, v_ax0]

    @T.prim_func
    def fused_matmul1_add1(layer_norm: T.Buffer((@B@, T.int64(768)), "float32"),
                           permute_dims1: T.Buffer((T.int64(768), T.int64(256)), "float32"),
                           fc2_bias: T.Buffer((T.int64(256),), "float32"),
                           T_add_intermediate: T.Buffer((@B@, T.int64(256)), "float32")):
        @N@
        matmul_intermediate = T.alloc_buffer((@B@, T.int64(256)))
        for i0, i1, k in T.grid(@B@, T.int64(256), T.int64(768)):
            with T.block("matmul"):
                v_i0, v_i1, v_k = T.axis.remap("SSR", [i0, i1, k])
                with T.init():
                    matmul_intermediate[v_i0, v_i1] = T.float32(0.0)
                matmul_intermediate[v_i0, v_i1] = (
                    matmul_intermediate[v_i0, v_i1]
                    + layer_norm[v_i0, v_k] * permute_dims1[v_k, v_i1])
        for ax0, ax1 in T.grid(@B@, T.int64(256)):
            with T.block("T_add"):
                v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
                T_add_intermediate[v_ax0, v_ax1] = (matmul_intermediate[v_ax0, v_ax1]
                                                    + fc2_bias[v_ax1])
'''


def demo_mlp(batch: int | str = 1) -> IRModule:
    """The demo model's five TIR functions, unscheduled. ``batch`` is the number of
    rows of ``x`` (1 in the tutorial) or a name such as ``"n"`` for a symbolic batch
    (an ``int64`` shape variable, as a dynamic-shape model gets).

    >>> from workbench import workloads
    >>> mod = workloads.demo_mlp("n")
    >>> [b.shape for b in mod["fused_matmul_add_relu"].params][0]
    (n, 768)
    """
    from .script import from_script

    if isinstance(batch, bool) or not isinstance(batch, (int, str)):
        raise TypeError(f"demo_mlp: batch is an int or a name, got {batch!r}")
    if isinstance(batch, int):
        if batch < 1:
            raise ValueError(f"demo_mlp: batch must be at least 1, got {batch}")
        text = _TEXT.replace("@B@", f"T.int64({batch})").replace("        @N@\n", "")
    else:
        if not batch.isidentifier():
            raise ValueError(f"demo_mlp: a symbolic batch needs a name, got {batch!r}")
        text = _TEXT.replace("@B@", batch).replace("        @N@\n", "")
        text = text.replace("@I.ir_module", f'{batch} = TypeVar("{batch}")\n\n@I.ir_module')
    return from_script(text)


@dataclass(frozen=True)
class Call:
    """One step of a model: run ``func`` on the named ``args`` and name its output."""

    func: str
    args: tuple[str, ...]
    out: str


#: The demo model's forward pass, in the tutorial's order.
DEMO_MLP_CALLS = (
    Call("transpose", ("fc1_weight",), "permute_dims"),
    Call("fused_matmul_add_relu", ("x", "permute_dims", "fc1_bias"), "lv"),
    Call("layer_norm", ("lv", "norm_weight", "norm_bias"), "layer_norm"),
    Call("transpose1", ("fc2_weight",), "permute_dims1"),
    Call("fused_matmul1_add1", ("layer_norm", "permute_dims1", "fc2_bias"), "gv"),
)


def demo_mlp_params(seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights for the demo model (float32, PyTorch's ``nn.Linear`` scale;
    LayerNorm's weight near 1 and bias near 0)."""
    rng = np.random.default_rng(seed)

    def uniform(shape, fan_in):
        bound = 1.0 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, shape).astype("float32")

    return {
        "fc1_weight": uniform((768, 768), 768),
        "fc1_bias": uniform((768,), 768),
        "norm_weight": (1.0 + 0.1 * rng.standard_normal(768)).astype("float32"),
        "norm_bias": (0.1 * rng.standard_normal(768)).astype("float32"),
        "fc2_weight": uniform((256, 768), 768),
        "fc2_bias": uniform((256,), 768),
    }


def demo_mlp_ref(x: np.ndarray, params: Mapping[str, np.ndarray]) -> np.ndarray:
    """The forward pass in numpy (float64 inside, float32 out)."""
    p = {k: np.asarray(v, dtype="float64") for k, v in params.items()}
    h = np.maximum(np.asarray(x, "float64") @ p["fc1_weight"].T + p["fc1_bias"], 0.0)
    mean = h.mean(axis=1, keepdims=True)
    var = ((h - mean) ** 2).mean(axis=1, keepdims=True)
    h = (h - mean) / np.sqrt(var + 1e-5) * p["norm_weight"] + p["norm_bias"]
    return (h @ p["fc2_weight"].T + p["fc2_bias"]).astype("float32")


def _out_shape(func: PrimFunc, inputs: Sequence[np.ndarray]) -> tuple[int, ...]:
    from .ir.expr import IntImm
    from .ir.functor import substitute
    from .ir.simplify import simplify
    from .ir.transform.specialize import shape_values

    given = {buf.name: arr.shape for buf, arr in zip(func.params, inputs, strict=False)}
    binding = {v: IntImm(n, v.dtype) for v, n in shape_values(func, given).items()}
    shape = []
    for dim in func.params[-1].shape:
        value = dim if isinstance(dim, int) else simplify(substitute(dim, binding))
        if isinstance(value, IntImm):
            value = value.value
        if not isinstance(value, int):
            raise ValueError(f"{func.name}: cannot tell the output's size {dim} from the inputs")
        shape.append(value)
    return tuple(shape)


def run_calls(mod: IRModule, calls: Sequence[Call], values: Mapping[str, np.ndarray], *,
              target="c", emulate: bool = False, check_races: bool = False,
              kernels: dict | None = None) -> dict[str, np.ndarray]:
    """Run ``calls`` in order, each through ``wb.build(mod[func], target, ...)``;
    ``values`` holds the named inputs; returns every named value (inputs included).
    ``kernels`` (a dict) caches the built kernels between runs."""
    from .runtime.cpu import build

    env = {k: np.ascontiguousarray(v) for k, v in values.items()}
    cache = {} if kernels is None else kernels
    for call in calls:
        if call.func not in mod:
            raise KeyError(f"run_calls: the module has no function {call.func!r}; "
                           f"it has {mod.names}")
        missing = [a for a in call.args if a not in env]
        if missing:
            raise KeyError(f"run_calls: {call.func} needs {missing}, which nothing computed")
        func = mod[call.func]
        key = (call.func, str(target), emulate, check_races, id(func))
        if key not in cache:
            cache[key] = build(IRModule.from_funcs(func), target, emulate=emulate,
                               check_races=check_races)
        args = [env[a] for a in call.args]
        out = np.zeros(_out_shape(func, args), dtype=func.params[-1].dtype)
        cache[key][call.func](*args, out)
        env[call.out] = out
    return env


def demo_mlp_forward(mod: IRModule, x: np.ndarray, params: Mapping[str, np.ndarray], *,
                     target="c", emulate: bool = False, check_races: bool = False,
                     kernels: dict | None = None) -> np.ndarray:
    """The demo model's forward pass through ``mod``'s functions (the output of the
    last call). ``target="c"`` runs unscheduled or CPU-scheduled functions;
    ``target="cuda"`` needs GPU schedules (DLight's) and runs them on a GPU, or on
    the CPU with ``emulate=True`` (``check_races=True`` also checks every kernel for
    data races)."""
    values = {"x": x, **params}
    env = run_calls(mod, DEMO_MLP_CALLS, values, target=target, emulate=emulate,
                    check_races=check_races, kernels=kernels)
    return env[DEMO_MLP_CALLS[-1].out]
