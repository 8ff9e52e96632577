"""Differential tests against TVM itself (needs ``apache-tvm``; skipped without it).

Each case prints one of our workloads in TVM >= 0.24 syntax, lets TVM parse it,
replays *our* trace JSON on TVM's own ``s_tir.Schedule``, and checks that both
schedules produce the same loop nests (extents, kinds and order, block by block)
and that TVM's compiled kernel and ours compute the same result.

    pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb
from workbench.runtime.reference import random_args

tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional comparison)")

pytestmark = pytest.mark.tvm

_LOOP = re.compile(r"^(\s*)for (.+?) in (T\.grid|range|T\.serial|T\.parallel|T\.vectorized|"
                   r"T\.unroll|T\.thread_binding)\((.*)\):")
_BLOCK = re.compile(r'^(\s*)with T\.s?block\("([^"]+)"\):')


def loop_nests(text: str) -> dict[str, list[tuple[int, str]]]:
    """Per block name: the chain of (extent, kind) of the loops around it (within
    its scope), read off printed TVMScript of either tool."""
    stack: list[tuple[int, list[tuple[int, str]]]] = []  # (indent, loops opened there)
    nests: dict[str, list[tuple[int, str]]] = {}
    for line in text.splitlines():
        m = _LOOP.match(line)
        b = _BLOCK.match(line)
        indent = len((m or b).group(1)) if (m or b) else None
        if indent is None:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if m:
            kind = {"T.grid": "serial", "range": "serial", "T.serial": "serial",
                    "T.parallel": "parallel", "T.vectorized": "vectorized",
                    "T.unroll": "unrolled", "T.thread_binding": "thread_binding"}[m.group(3)]
            args = [a.strip() for a in m.group(4).split(",")]
            extents = [int(a) for a in args if re.fullmatch(r"\d+", a)]
            if kind == "thread_binding":
                extents = extents[:1]
            stack.append((indent, [(e, kind) for e in extents]))
        else:
            nests[b.group(2)] = [lp for _, loops in stack for lp in loops]
            stack.append((indent, []))
    return nests


def tvm_replay(func: wb.PrimFunc, trace: wb.Trace):
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    sch = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(trace.as_json_obj(syntax="tirx"), sch)
    return sch


def run_tvm(sch, func: wb.PrimFunc, args: list[np.ndarray]) -> list[np.ndarray]:
    ex = tvm.compile(sch.mod, target=tvm.target.Target({"kind": "llvm"}))
    dev = tvm.cpu()
    tensors = [tvm.runtime.tensor(a.copy(), dev) for a in args]
    ex[func.name](*tensors)
    return [t.numpy() for t in tensors]


def seed_mm_relu(sch: wb.Schedule) -> None:
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)


def tiled_matmul(sch: wb.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, factors=[None, 8])
    j0, j1 = sch.split(j, factors=[None, 16])
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    sch.parallel(i0)
    sch.unroll(k1)
    sch.vectorize(j1)


def fused_nonuniform(sch: wb.Schedule) -> None:
    i, j = sch.get_loops(sch.get_block("B"))
    f = sch.fuse(i, j)
    sch.split(f, factors=[None, 48])


def conv_pad_at_tile(sch: wb.Schedule) -> None:
    n, k, h, w, rc, ry, rx = sch.get_loops(sch.get_block("conv"))
    h0, h1 = sch.split(h, factors=[None, 7])
    w0, w1 = sch.split(w, factors=[None, 7])
    sch.reorder(h0, w0, h1, w1)
    sch.compute_at(sch.get_block("pad"), w0)


def chain_fused(sch: wb.Schedule) -> None:
    n, c = sch.get_loops(sch.get_block("scale"))
    sch.compute_at(sch.get_block("batch_norm"), n)
    sch.compute_at(sch.get_block("relu"), n)


def chain_inlined(sch: wb.Schedule) -> None:
    sch.compute_inline(sch.get_block("relu"))
    sch.reverse_compute_inline(sch.get_block("scale"))


def non_dividing_split(sch: wb.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, factors=[None, 16])


def mlc_full(sch: wb.Schedule) -> None:
    seed_mm_relu(sch)
    sch.decompose_reduction(sch.get_block("Y"), sch.get_loops(sch.get_block("Y"))[2])


def stochastic(sch: wb.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    factors = sch.sample_perfect_tile(j, n=2, decision=[4, 16])
    j0, j1 = sch.split(j, factors=factors)
    sch.reorder(i, j0, k, j1)


def gpu_style(sch: wb.Schedule) -> None:
    blk = sch.get_block("C")
    a_sh = sch.cache_read(blk, 0, "shared")
    b_sh = sch.cache_read(blk, 1, "shared")
    c_loc = sch.cache_write(blk, 0, "local")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, i1, j1, k0, k1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.compute_at(a_sh, k0)
    sch.compute_at(b_sh, k0)
    sch.reverse_compute_at(c_loc, j1)
    sch.storage_align(a_sh, 0, axis=0, factor=32, offset=1)


def forum_local_tile(sch: wb.Schedule) -> None:
    mm = sch.get_block("matmul")
    sch.compute_inline(sch.get_block("bias_add"))
    i, j, k = sch.get_loops(mm)
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(j0, k, j1)
    sch.set_scope(mm, 0, "local")
    sch.reverse_compute_at(sch.get_block("relu"), j0)


def rfactor_sum(sch: wb.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    k0, k1 = sch.split(k, [None, 4])
    sch.rfactor(k1, 0)


def blockized_tile(sch: wb.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(i1)


CASES = {
    "mm_relu seed": (lambda: wb.workloads.mm_relu(64, 64, 64), seed_mm_relu),
    "tiled matmul": (lambda: wb.workloads.matmul(64, 64, 64), tiled_matmul),
    "fuse then split": (lambda: wb.workloads.transpose(32, 40), fused_nonuniform),
    "conv pad compute_at": (lambda: wb.workloads.conv2d_nchw(1, 4, 14, 14, 4), conv_pad_at_tile),
    "chain compute_at": (lambda: wb.workloads.elementwise_chain(32, 8), chain_fused),
    "chain inline": (lambda: wb.workloads.elementwise_chain(32, 8), chain_inlined),
    "non-dividing split": (lambda: wb.workloads.matmul(32, 40, 16), non_dividing_split),
    "mlc with decompose_reduction": (lambda: wb.workloads.mm_relu(64, 64, 64), mlc_full),
    "sample_perfect_tile": (lambda: wb.workloads.matmul(64, 64, 64), stochastic),
    "forum local tile": (lambda: wb.workloads.linear_bias_relu(1, 48, 64), forum_local_tile),
    "rfactor": (lambda: wb.workloads.matmul(16, 16, 32), rfactor_sum),
    "blockize": (lambda: wb.workloads.matmul(32, 32, 16), blockized_tile),
}

# GPU-bound schedules: TVM's CPU target cannot run thread bindings, so only the loop
# nests are compared (our C target runs them serially; numerics are tested elsewhere).
STRUCTURE_ONLY = {
    "gpu-style matmul": (lambda: wb.workloads.matmul(64, 64, 64), gpu_style),
}


@pytest.mark.parametrize("name", list(STRUCTURE_ONLY))
def test_same_loop_nests_as_tvm_for_gpu_schedules(name):
    make, schedule = STRUCTURE_ONLY[name]
    func = make()
    ours = wb.Schedule(func)
    schedule(ours)
    theirs = tvm_replay(func, ours.trace)
    assert loop_nests(ours.mod.script(syntax="tirx")) == loop_nests(theirs.mod.script())


@pytest.mark.parametrize("name", list(CASES))
def test_same_loop_nests_and_results_as_tvm(name):
    make, schedule = CASES[name]
    func = make()
    ours = wb.Schedule(func)
    schedule(ours)
    theirs = tvm_replay(func, ours.trace)
    assert loop_nests(ours.mod.script(syntax="tirx")) == loop_nests(theirs.mod.script())

    args = random_args(func, seed=3)
    expected = run_tvm(theirs, func, args)
    got = [a.copy() for a in args]
    wb.build(ours.mod)(*got)
    for e, g, p in zip(expected, got, func.params, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4, err_msg=f"buffer {p.name}")


def test_loop_nest_reader_sees_kinds_and_extents():
    func = wb.workloads.matmul(64, 64, 64)
    sch = wb.Schedule(func)
    tiled_matmul(sch)
    nests = loop_nests(sch.mod.script(syntax="tirx"))
    assert nests["C"] == [
        (8, "parallel"), (4, "serial"), (16, "serial"), (8, "serial"), (4, "unrolled"),
        (16, "vectorized"),
    ]
