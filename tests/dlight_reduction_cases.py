"""Test functions for the DLight reduction-family rules (Reduction, GeneralReduction,
RMSNorm) and Transpose, shared by their test files."""

from __future__ import annotations

import workbench as wb
from workbench.dlight.gpu.rmsnorm import rms_norm_example
from workbench.script import from_script


def _rows(m: int | str) -> tuple[str, str]:
    if isinstance(m, int):
        return str(m), ""
    return m, f'{m} = TypeVar("{m}")\n'  # an int64 shape variable


def row_reduce(m: int | str = 4, n: int = 768, op: str = "sum") -> wb.PrimFunc:
    """``B[i] = sum_k A[i, k]`` (``op="sum"``) or ``max_k`` (``op="max"``)."""
    rows, header = _rows(m)
    if not isinstance(m, int):
        n = f"T.int64({n})"  # one index type throughout, as a legalized function has
    init = "T.float32(0)" if op == "sum" else "T.min_value(\"float32\")"
    update = "B[vi] + A[vi, vk]" if op == "sum" else "T.max(B[vi], A[vi, vk])"
    return from_script(f'''{header}
@T.prim_func
def row_{op}(A: T.Buffer(({rows}, {n}), "float32"), B: T.Buffer(({rows},), "float32")):
    for i, k in T.grid({rows}, {n}):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = {init}
            B[vi] = {update}
''')


def col_sum(m: int = 48, n: int = 64) -> wb.PrimFunc:
    """``B[j] = sum_i A[i, j]``: the reduced axis is the outer one in memory."""
    return from_script(f'''
@T.prim_func
def col_sum(A: T.Buffer(({m}, {n}), "float32"), B: T.Buffer(({n},), "float32")):
    for j, i in T.grid({n}, {m}):
        with T.block("B"):
            vj, vi = T.axis.remap("SR", [j, i])
            with T.init():
                B[vj] = T.float32(0)
            B[vj] = B[vj] + A[vi, vj]
''')


def row_mean_scaled(m: int = 4, n: int = 256) -> wb.PrimFunc:
    """A row sum and a broadcasting epilogue ``C[i, j] = A[i, j] - B[i] / n``."""
    return from_script(f'''
@T.prim_func
def row_center(A: T.Buffer(({m}, {n}), "float32"), C: T.Buffer(({m}, {n}), "float32")):
    B = T.alloc_buffer(({m},))
    for i, k in T.grid({m}, {n}):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
    for i, j in T.grid({m}, {n}):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] - B[vi] * T.float32({1.0 / n!r})
''')


def relu(m: int = 64, n: int = 64) -> wb.PrimFunc:
    """An elementwise function: ``B = max(A, 0)``."""
    return from_script(f'''
@T.prim_func
def relu(A: T.Buffer(({m}, {n}), "float32"), B: T.Buffer(({m}, {n}), "float32")):
    for i, j in T.grid({m}, {n}):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.max(A[vi, vj], T.float32(0))
''')


def not_normal_form() -> wb.PrimFunc:
    """A row sum whose block binds one iter var to two loops (``vk = k0 * 4 + k1``)."""
    return from_script('''
@T.prim_func
def split_sum(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for i, k0, k1 in T.grid(8, 16, 4):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            vk = T.axis.reduce(64, k0 * 4 + k1)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
''')


def cases() -> dict[str, wb.PrimFunc]:
    """Every test function by a short name."""
    b1, bn = wb.workloads.demo_mlp(1), wb.workloads.demo_mlp("n")
    out = {f"demo1.{name}": b1[name] for name in b1.names}
    out |= {f"demon.{name}": bn[name] for name in bn.names}
    out |= {
        "row_sum": row_reduce(4, 768),
        "row_sum_n": row_reduce("m", 300),
        "row_max": row_reduce(4, 300, "max"),
        "col_sum": col_sum(),
        "row_center": row_mean_scaled(),
        "softmax": wb.workloads.softmax(4, 300),
        "layer_norm": wb.workloads.layer_norm(3, 200),
        "rms_norm": rms_norm_example(2, 4096),
        "rms_norm_n": rms_norm_example("n"),
        "rms_norm_f16": rms_norm_example("n", dtype="float16"),
        "transpose": wb.workloads.transpose(256, 256),
        "transpose_odd": wb.workloads.transpose(100, 70),
        "matmul": wb.workloads.matmul(64, 64, 64),
        "relu": relu(),
        "not_normal_form": not_normal_form(),
    }
    return out
