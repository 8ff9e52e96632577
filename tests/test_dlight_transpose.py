"""DLight's Transpose GPU rule: matches, declines with reasons, goldens, nvcc, the
emulator (race-checked, static and symbolic), the emulator's memory profile against
Fallback, and a ``tvm``-marked comparison with TVM 0.27's Transpose."""

from __future__ import annotations

import re

import numpy as np
import pytest
from dlight_reduction_cases import cases

import workbench as wb
from workbench import dlight as dl
from workbench.codegen.gpu import lower_for_gpu
from workbench.script import from_script
from workbench.testing import check_golden, check_nvcc, gpu_schedule_summary

CUDA = wb.Target("cuda")
CASES = cases()


def transpose_n() -> wb.PrimFunc:
    """A transpose with a symbolic number of rows: ``B (64, n) = A (n, 64).T``."""
    return from_script('''
n = TypeVar("n")
@T.prim_func
def transpose_n(A: T.Buffer((n, T.int64(64)), "float32"),
                B: T.Buffer((T.int64(64), n), "float32")):
    for i, j in T.grid(T.int64(64), n):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi]
''')


MATCHED = ["demo1.transpose", "demo1.transpose1", "demon.transpose1", "transpose",
           "transpose_odd"]


@pytest.mark.parametrize("name", MATCHED)
def test_matches(name):
    sch = dl.gpu.Transpose().apply(CASES[name], CUDA, False)
    text = sch.mod.script()
    assert 'scope="shared"' in text and '"buffer_dim_align": [[0, 0, 32, 1]]' in text
    block = sch.get_block([b for b in wb.ir.block_names(sch.func) if b.endswith("_shared")][0])
    tags = [sch.get(lp).thread_tag for lp in sch.get_loops(block)]
    assert tags[:2] == ["blockIdx.y", "blockIdx.x"] and "threadIdx.x" in tags


@pytest.mark.parametrize("name, words", [
    ("matmul", 'block "C" is not elementwise'),
    ("relu", "no block copies its input with permuted indices"),
    ("not_normal_form", "not in normal form"),
    ("demo1.layer_norm", "is not elementwise"),
    ("demo1.fused_matmul_add_relu", "is not elementwise"),
])
def test_declines(name, words):
    with pytest.raises(dl.Declined, match=re.escape(words)):
        dl.gpu.Transpose().apply(CASES[name], CUDA, False)
    d = dl.diagnose(CASES[name], dl.gpu.Transpose(), dl.gpu.Fallback(), target="cuda")
    [first, *_] = d.reports[0].attempts
    assert first.rule == "Transpose" and first.outcome == "declined" and words in first.reason


def test_declines_three_axes():
    func = from_script('''
@T.prim_func
def permute3(A: T.Buffer((4, 8, 16), "float32"), B: T.Buffer((16, 8, 4), "float32")):
    for i, j, k in T.grid(16, 8, 4):
        with T.block("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vk, vj, vi]
''')
    with pytest.raises(dl.Declined, match="has 3 axes; the rule handles 2-D transposes"):
        dl.gpu.Transpose().apply(func, CUDA, False)


@pytest.mark.parametrize("name", ["demo1.transpose1", "transpose"])
def test_golden(name):
    sch = dl.gpu.Transpose().apply(CASES[name], CUDA, False)
    check_golden(f"dlight_transpose_{name.replace('.', '_')}", gpu_schedule_summary(sch))


def test_launch_demo_transpose1():
    sch = dl.gpu.Transpose().apply(CASES["demo1.transpose1"], CUDA, False)
    [k] = lower_for_gpu(sch.mod, CUDA)[1].kernels
    # 768 x 256 output in 8 x 16 tiles; a 16 x 8 input tile with rows padded to 33
    assert k.launch.grid == (16, 96, 1) and k.launch.block == (16, 8, 1)
    assert k.shared_bytes == 16 * 33 * 4


@pytest.mark.parametrize("name", MATCHED)
def test_emulator_matches_unscheduled(name):
    sch = dl.gpu.Transpose().apply(CASES[name], CUDA, False)
    wb.verify(sch.mod, CASES[name], target="cuda", emulate=True, check_races=True)


def test_emulator_symbolic():
    func = transpose_n()
    sch = dl.gpu.Transpose().apply(func, CUDA, False)
    for n in (37, 64):
        wb.verify(sch.mod, func, target="cuda", emulate=True, check_races=True,
                  shapes={"n": n})


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["demo1.transpose", "transpose_odd"])
def test_nvcc(name):
    ptx = check_nvcc(dl.gpu.Transpose().apply(CASES[name], CUDA, False))
    assert set(ptx) == {"sm_80", "sm_90"}


@pytest.mark.nvcc
def test_nvcc_symbolic():
    assert set(check_nvcc(dl.gpu.Transpose().apply(transpose_n(), CUDA, False))) == {
        "sm_80", "sm_90"}


# ------------------------------------------------------------------ the emulator's profile


def _profile(sch):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype("float32")
    b = np.zeros((256, 256), "float32")
    prof = wb.build(sch.mod, target="cuda", emulate=True).profile(a, b)
    assert np.array_equal(b, a.T)
    [k] = prof.kernels
    return k


def test_profile_coalesces_versus_fallback():
    """On a 256 x 256 transpose, Fallback's threads read A a row apart: each warp's load
    touches 8x the sectors it needs. The Transpose rule stages 16 x 8 tiles through
    shared memory: global loads and stores are both at the ideal sector count."""
    func = wb.workloads.transpose(256, 256)
    fallback = _profile(dl.gpu.Fallback().apply(func, CUDA, False))
    tiled = _profile(dl.gpu.Transpose().apply(func, CUDA, False))
    ideal_loads = fallback.total("global", "load", "ideal")
    assert ideal_loads == 256 * 256 * 4 // 32
    assert fallback.global_load_sectors == 8 * ideal_loads  # uncoalesced
    assert tiled.global_load_sectors == tiled.total("global", "load", "ideal") == ideal_loads
    assert tiled.global_store_sectors == tiled.total("global", "store", "ideal")
    assert fallback.shared_bytes == 0 and fallback.bank_conflicts == 0


def test_profile_padding_against_bank_conflicts(monkeypatch):
    """The transposed read of the shared tile (thread x walks down a column): rows of
    8 words put 4 threads of a warp in each bank; TVM's padding to 33 words cuts its
    extra wavefronts by 3x. (The 8-wide tile's stores, 4 rows per warp, get conflicts
    from the same padding: TVM's tile shape trades one for the other.)"""
    func = wb.workloads.transpose(256, 256)
    padded = _profile(dl.gpu.Transpose().apply(func, CUDA, False))
    monkeypatch.setattr(wb.Schedule, "storage_align", lambda self, *args, **kw: None)
    plain = _profile(dl.gpu.Transpose().apply(func, CUDA, False))
    assert plain.shared_bytes == 16 * 8 * 4 and padded.shared_bytes == 16 * 33 * 4
    plain_read = plain.total("shared", "load", "extra")
    padded_read = padded.total("shared", "load", "extra")
    assert plain_read == 3 * padded_read > 0
    assert plain.total("shared", "store", "extra") == 0
    assert padded.total("shared", "store", "extra") > 0


# ------------------------------------------------------------------ TVM 0.27


def _tvm_func(func):
    import tvm

    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    return list(mod.functions.values())[0]


def _tvm_target():
    import tvm

    return tvm.target.Target({"kind": "cuda", "arch": "sm_80"}, host={"kind": "llvm"})


@pytest.mark.tvm
@pytest.mark.parametrize("name", sorted(CASES))
def test_decision_matches_tvm(name):
    from tvm.s_tir import dlight as tdl

    try:
        theirs = tdl.gpu.Transpose().apply(_tvm_func(CASES[name]), _tvm_target(), False)
    except TypeError:
        assert name == "not_normal_form"  # TVM's rule crashes on it; ours declines
        theirs = None
    try:
        ours = dl.gpu.Transpose().apply(CASES[name], CUDA, False)
    except dl.Declined:
        ours = None
    assert (ours is None) == (theirs is None)


@pytest.mark.tvm
@pytest.mark.parametrize("batch, name", [(1, "transpose"), (1, "transpose1"),
                                         ("n", "transpose1")])
def test_demo_launch_matches_tvm(batch, name):
    """Grid, block and shared bytes as TVM compiles its schedule."""
    import tvm
    from test_dlight_reduction import tvm_thread_extents
    from tvm.s_tir import dlight as tdl

    func = wb.workloads.demo_mlp(batch)[name]
    theirs = tdl.gpu.Transpose().apply(_tvm_func(func), _tvm_target(), False)
    extents = tvm_thread_extents(theirs.mod.script())
    source = tvm.compile(theirs.mod, target=_tvm_target()).mod.imports[0].inspect_source()
    words = sum(int(n) for n in re.findall(r"__shared__[^\[;]*\[(\d+)\]", source))
    [k] = lower_for_gpu(dl.gpu.Transpose().apply(func, CUDA, False).mod, CUDA)[1].kernels
    assert (str(k.launch.grid[0]), str(k.launch.grid[1])) == (extents["blockIdx.x"],
                                                              extents["blockIdx.y"])
    assert (k.launch.block[0], k.launch.block[1]) == (int(extents["threadIdx.x"]),
                                                      int(extents["threadIdx.y"]))
    assert k.shared_bytes == 4 * words
