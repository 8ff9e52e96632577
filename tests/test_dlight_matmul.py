"""The DLight Matmul rule (``wb.dlight.gpu.Matmul``): what it matches and declines
(with the reasons the diagnosis shows), the schedules' launch configuration and IR
against goldens, nvcc, the emulator against the unscheduled functions (race-checked),
static and symbolic shapes, and the same decisions and launch shapes as TVM 0.27's
``dlight.gpu.Matmul``.

Regenerate the goldens deliberately with
``python tests/test_dlight_matmul.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import re
import sys

import pytest

import workbench as wb
from workbench import dlight as dl
from workbench.dlight.gpu.matmul import MatmulConfig, matmul_index_maps
from workbench.ir import Var
from workbench.ir.simplify import simplify
from workbench.testing import check_golden, check_nvcc, gpu_schedule_summary, write_golden

W = wb.workloads
CUDA = wb.Target("cuda", arch="sm_80")

MM_BT = '''
from tvm.script import tir as T

@T.prim_func
def mm_bt(A: T.Buffer((64, 32), "float32"), B: T.Buffer((48, 32), "float32"),
          C: T.Buffer((64, 48), "float32")):
    for i, j, k in T.grid(64, 48, 32):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
'''

MM_SPLIT = '''
from tvm.script import tir as T

@T.prim_func
def mm_split(A: T.Buffer((64, 32), "float32"), B: T.Buffer((32, 48), "float32"),
             C: T.Buffer((64, 48), "float32")):
    for i0, i1, j, k in T.grid(16, 4, 48, 32):
        with T.block("C"):
            vi = T.axis.spatial(64, i0 * 4 + i1)
            vj, vk = T.axis.remap("SR", [j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def matched() -> dict[str, wb.PrimFunc]:
    """The functions the rule schedules (TVM's Matmul takes each of them too)."""
    mlp = W.demo_mlp("n")
    return {
        "matmul_128": W.matmul(128, 128, 128),
        "matmul_100x70x50": W.matmul(100, 70, 50),
        "matmul_64x192x48": W.matmul(64, 192, 48),
        "batch_matmul": W.batch_matmul(3, 40, 72, 24),
        "mm_relu": W.mm_relu(96, 64, 40),
        "linear_bias_relu": W.linear_bias_relu(16, 48, 64),
        "mm_bt": wb.from_script(MM_BT),
        "conv2d": W.conv2d_nchw(1, 16, 14, 14, 16, 3),
        "mlp_n_fused_matmul_add_relu": mlp["fused_matmul_add_relu"],
        "mlp_n_fused_matmul1_add1": mlp["fused_matmul1_add1"],
    }


def declined() -> dict[str, tuple[wb.PrimFunc, str]]:
    """The functions the rule passes on, with a piece of the reason it gives."""
    mlp1, mlpn = W.demo_mlp(1), W.demo_mlp("n")
    gemv_like = "a matrix-vector product, not matrix-matrix"
    return {
        "mlp_1_fused_matmul_add_relu": (mlp1["fused_matmul_add_relu"], gemv_like),
        "mlp_1_fused_matmul1_add1": (mlp1["fused_matmul1_add1"], gemv_like),
        "linear_bias_relu_m1": (W.linear_bias_relu(1, 48, 64), gemv_like),
        "gemv": (W.gemv(256, 128), 'block "y" has no column axis'),
        "transpose": (W.transpose(64, 128), "no reduction block"),
        "mlp_n_transpose": (mlpn["transpose"], "no reduction block"),
        "elementwise": (W.elementwise_chain(64, 16), "no reduction block"),
        "layer_norm": (W.layer_norm(4, 768), "2 reduction blocks (sum, sum_sq)"),
        "mlp_n_layer_norm": (mlpn["layer_norm"], "2 reduction blocks (relu_sum, relu_var_sum)"),
        "softmax": (W.softmax(64, 64), "2 reduction blocks (max, sum)"),
        "not_normal_form": (wb.from_script(MM_SPLIT), "not in normal form"),
    }


MATCHED = matched()
DECLINED = declined()


def schedule(func: wb.PrimFunc) -> wb.Schedule:
    return dl.gpu.Matmul().apply(func, CUDA, False)


# ---------------------------------------------------------------- match / decline


@pytest.mark.parametrize("name", [n for n in MATCHED if "mlp_n" not in n])
def test_matches_and_computes_static(name):
    func = MATCHED[name]
    sch = schedule(func)
    assert wb.verify(sch, func, target="cuda", emulate=True, check_races=True)


@pytest.mark.parametrize("name", ["mlp_n_fused_matmul_add_relu", "mlp_n_fused_matmul1_add1"])
@pytest.mark.parametrize("n", [1, 3, 70])
def test_matches_and_computes_symbolic_batch(name, n):
    func = MATCHED[name]
    sch = schedule(func)
    assert wb.verify(sch, func, target="cuda", emulate=True, check_races=True, shapes={"n": n})


@pytest.mark.parametrize("name", list(DECLINED))
def test_declines_with_reason(name):
    func, reason = DECLINED[name]
    with pytest.raises(dl.Declined) as info:
        schedule(func)
    assert reason in info.value.reason


def test_batch1_mlp_declined_because_gemv_like():
    """TVM's Matmul returns None on the batch-1 demo model's matmuls: the row iter var
    has extent 1, so the block is a vector times a matrix (no I axis)."""
    func = W.demo_mlp(1)["fused_matmul_add_relu"]
    with pytest.raises(dl.Declined) as info:
        schedule(func)
    reason = info.value.reason
    assert 'block "matmul" has only one row (batch 1)' in reason
    assert "GEMV" in reason


def test_diagnose_shows_rule_and_reasons():
    funcs = [MATCHED["matmul_100x70x50"], DECLINED["gemv"][0], DECLINED["softmax"][0]]
    mod = wb.IRModule.from_funcs(*funcs)
    d = dl.diagnose(mod, dl.gpu.Matmul(), dl.gpu.Fallback(), target="cuda")
    assert d.assignment == {"matmul": "Matmul", "gemv": "Fallback", "softmax": "Fallback"}
    table = d.table.set_index("function")
    assert "Matmul: " in table.loc["gemv", "declined"]
    assert "has no column axis" in table.loc["gemv", "declined"]
    assert "2 reduction blocks" in table.loc["softmax", "declined"]
    assert table.loc["matmul", "block"] == "(8, 16, 1)"
    assert table.loc["matmul", "grid"] == "(4, 2, 1)"
    assert table.loc["matmul", "shared bytes"] == 6912


def test_demo_mlp_n_assignment():
    d = dl.diagnose(W.demo_mlp("n"), dl.gpu.Matmul(), dl.gpu.Fallback(), target="cuda")
    assert d.assignment == {"transpose": "Fallback", "fused_matmul_add_relu": "Matmul",
                            "layer_norm": "Fallback", "transpose1": "Fallback",
                            "fused_matmul1_add1": "Matmul"}


# ---------------------------------------------------------------- structure


def test_index_maps_normalize_to_sij_k():
    sch = wb.Schedule(MATCHED["mm_bt"])
    block_map, a_map, b_map, c_map = matmul_index_maps(sch.get(sch.get_block("C")))
    assert repr(block_map) == "IndexMap(lambda i0, i1, i2: (0, i0, i1, i2))"
    # B[j, k] is already [J, K]; A[i, k] is [I, K]
    assert repr(b_map) == repr(a_map) == "IndexMap(lambda i0, i1: (0, i0, i1))"
    # conv2d: rows fuse (y, x), the reduction fuses (rc, ry, rx)
    conv = MATCHED["conv2d"]
    sch = wb.Schedule(conv)
    block_map = matmul_index_maps(sch.get(sch.get_block("conv")))[0]
    assert repr(block_map) == ("IndexMap(lambda i0, i1, i2, i3, i4, i5, i6: "
                              "(0, i2 * 14 + i3, i1, i4 * 9 + i5 * 3 + i6))")


def test_schedule_shape_static():
    sch = schedule(MATCHED["matmul_100x70x50"])
    text = sch.mod["matmul"].script()
    assert 'scope="local"' in text and 'scope="shared"' in text
    assert text.count('"pragma_auto_unroll_max_step": 256') == 1
    assert "T.where(" in text  # the write-back is predicated where the tile overhangs C
    assert "buffer_dim_align" in text


def test_custom_config():
    cfg = MatmulConfig(block_size_x=4, block_size_y=8, micro_size_k=8, unroll=0)
    func = W.matmul(64, 64, 32)
    sch = dl.gpu.Matmul(cfg).apply(func, CUDA, False)
    assert "pragma_auto_unroll_max_step" not in sch.mod["matmul"].script()
    first = gpu_schedule_summary(sch).splitlines()[0]
    assert "block (4, 8, 1)" in first
    assert wb.verify(sch, func, target="cuda", emulate=True, check_races=True)


GOLDEN = ["matmul_100x70x50", "batch_matmul", "mm_bt", "conv2d", "mlp_n_fused_matmul_add_relu"]


@pytest.mark.parametrize("name", GOLDEN)
def test_golden(name):
    check_golden(f"dlight_matmul_{name}", gpu_schedule_summary(schedule(MATCHED[name])))


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["matmul_100x70x50", "batch_matmul", "mm_bt", "conv2d",
                                  "mlp_n_fused_matmul_add_relu", "mlp_n_fused_matmul1_add1"])
def test_nvcc(name):
    out = check_nvcc(schedule(MATCHED[name]))
    assert set(out) == {"sm_80", "sm_90"} and all(".entry" in ptx for ptx in out.values())


# ---------------------------------------------------------------- primitives it relies on


def test_simplify_folds_div_mod_pairs():
    """Re-fusing a split iter var (what transform_block_layout does to a conv's
    rows) must give the iter var back, or pad_einsum sees a non-einsum access."""
    v, w = Var("v", "int32"), Var("w", "int32")
    assert str(simplify(v // 14 * 14 + v % 14)) == "v"
    assert str(simplify(v // 9 * 9 + v % 9 // 3 * 3 + v % 3)) == "v"
    assert str(simplify((v + w) // 4 * 8 + (v + w) % 4 * 2)) == "v * 2 + w * 2"
    assert str(simplify(v // 14 * 14 + v % 7)) == "v // 14 * 14 + v % 7"


def test_inline_reindex_copies_with_symbolic_batch():
    """compute_inline / reverse_compute_inline of a copy through a leading unit
    dimension (``x_reindex[0, v0, v1] = x[v0, v1]``) work with a symbolic ``n``."""
    func = MATCHED["mlp_n_fused_matmul1_add1"]
    sch = wb.Schedule(func)
    main = sch.get_block("matmul")
    a = sch.reindex(main, ("read", 0))
    c = sch.reindex(main, ("write", 0))
    sch.compute_inline(a)  # stores layer_norm_reindex[0, v0, v1]
    sch.compute_inline(c)  # T_add now reads matmul_intermediate_reindex[0, v0, v1]
    local = sch.cache_write(main, 0, "local")
    sch.reverse_compute_inline("T_add")  # into the write-back, through the unit dim
    text = sch.mod["fused_matmul1_add1"].script()
    assert "layer_norm_reindex" not in text and 'T.block("T_add")' not in text
    assert sch.get(local).name in text
    assert wb.verify(sch, func, shapes={"n": 5})


# ---------------------------------------------------------------- TVM 0.27


def _tvm_func(func: wb.PrimFunc):
    tvm = pytest.importorskip("tvm")
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    return list(mod.functions.values())[0]


def _tvm_target():
    import tvm

    return tvm.target.Target({"kind": "cuda", "arch": "sm_80"}, host={"kind": "llvm"})


@pytest.mark.tvm
def test_same_decisions_as_tvm():
    from tvm.s_tir import dlight as tdl

    ours, theirs = {}, {}
    for name, func in {**MATCHED, **{k: f for k, (f, _) in DECLINED.items()}}.items():
        try:
            ours[name] = schedule(func) is not None
        except dl.Declined:
            ours[name] = False
        try:
            theirs[name] = tdl.gpu.Matmul().apply(_tvm_func(func), _tvm_target(), False) \
                is not None
        except Exception:  # TVM raises on a function not in normal form
            theirs[name] = False
    assert ours == theirs
    assert not theirs["not_normal_form"] and theirs["conv2d"]


def _tvm_launch(func: wb.PrimFunc) -> tuple[dict[str, int], int, int]:
    """TVM's blockIdx extents (from its scheduled IR), threads per block and shared
    bytes (from the CUDA source it generates)."""
    import tvm
    from tvm.s_tir import dlight as tdl

    sch = tdl.gpu.Matmul().apply(_tvm_func(func), _tvm_target(), False)
    text = sch.mod.script()
    grid = {tag: int(ext) for ext, tag in
            re.findall(r'T\.thread_binding\((\d+), thread="(blockIdx\.[xy])"\)', text)}
    src = tvm.compile(sch.mod, target=_tvm_target()).mod.imports[0].inspect_source()
    threads = int(re.search(r"__launch_bounds__\((\d+)\)", src).group(1))
    shared = sum(4 * int(n) for n in re.findall(r"__shared__[^\[]*\[(\d+)\]", src))
    return grid, threads, shared


@pytest.mark.tvm
@pytest.mark.parametrize("name", ["matmul_100x70x50", "batch_matmul", "conv2d"])
def test_same_launch_as_tvm(name):
    from workbench.codegen.gpu import lower_for_gpu

    grid, threads, shared = _tvm_launch(MATCHED[name])
    _, device = lower_for_gpu(schedule(MATCHED[name]).mod, CUDA)
    (kernel,) = device.kernels
    ours = {"blockIdx.x": kernel.launch.grid[0], "blockIdx.y": kernel.launch.grid[1]}
    assert ours == grid
    assert kernel.launch.threads_per_block == threads
    assert kernel.shared_bytes == shared


if __name__ == "__main__" and "--update-golden" in sys.argv:
    for case in GOLDEN:
        print(write_golden(f"dlight_matmul_{case}", gpu_schedule_summary(schedule(MATCHED[case]))))
