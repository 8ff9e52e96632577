"""DLight's reduction-family GPU rules: Reduction, GeneralReduction, RMSNorm.

Each rule: the functions it matches and those it declines (with the reason, also in
the diagnosis table), the scheduled IR against goldens, nvcc for sm_80 / sm_90, the
emulator (race-checked) against the unscheduled function on static and symbolic
shapes, and a ``tvm``-marked comparison with TVM 0.27's twin rules.
"""

from __future__ import annotations

import re

import pytest
from dlight_reduction_cases import cases, row_reduce

import workbench as wb
from workbench import dlight as dl
from workbench.codegen.gpu import lower_for_gpu
from workbench.testing import check_golden, check_nvcc, gpu_schedule_summary

CUDA = wb.Target("cuda")
RULES = ("Reduction", "GeneralReduction", "RMSNorm", "Transpose")
CASES = cases()

#: our decision per (function, rule): "Y" applied, "n" declined, "E" a primitive refused
EXPECTED = {
    "demo1.transpose": "nnnY",
    "demo1.fused_matmul_add_relu": "YYnn",
    "demo1.layer_norm": "nYnn",
    "demo1.transpose1": "nnnY",
    "demo1.fused_matmul1_add1": "YYnn",
    "demon.transpose": "nnnY",
    "demon.fused_matmul_add_relu": "nYnn",
    "demon.layer_norm": "nYnn",
    "demon.transpose1": "nnnY",
    "demon.fused_matmul1_add1": "nYnn",
    "row_sum": "Ynnn",
    "row_sum_n": "Ynnn",
    "row_max": "Ynnn",
    "col_sum": "Ynnn",
    "row_center": "YYnn",
    "softmax": "nYnn",
    "layer_norm": "nYnn",
    "rms_norm": "YYYn",
    "rms_norm_n": "YYYn",
    "rms_norm_f16": "YYYn",
    "transpose": "nnnY",
    "transpose_odd": "nnnY",
    "matmul": "nnnn",
    "relu": "nnnn",
    "not_normal_form": "nnnn",
}

#: where TVM 0.27's twin decides differently, and why
DIFFERENCES = {
    ("row_max", "Reduction"): "TVM's Reduction takes only X = X + Y updates; ours also max/min "
                              "(the rfactor + cross-thread schedule is the same)",
    ("not_normal_form", "Transpose"): "TVM's Transpose raises TypeError; ours declines",
}


def decide(rule: str, func: wb.PrimFunc) -> tuple[str, str]:
    """("Y" | "n" | "E", reason) for one of our rules on ``func``."""
    try:
        getattr(dl.gpu, rule)().apply(func, CUDA, False)
    except dl.Declined as d:
        return "n", d.reason
    except wb.ScheduleError as e:
        return "E", str(e)
    return "Y", ""


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_match_and_decline(name):
    got = "".join(decide(rule, CASES[name])[0] for rule in RULES)
    assert got == EXPECTED[name], dict(zip(RULES, got, strict=True))


# ------------------------------------------------------------------ decline reasons


@pytest.mark.parametrize("rule, name, words", [
    ("Reduction", "matmul", "does not use iter var"),
    ("Reduction", "relu", "no reduction axis"),
    ("Reduction", "not_normal_form", "not in normal form"),
    ("Reduction", "softmax", "3 blocks left"),
    ("Reduction", "demon.fused_matmul_add_relu", "(a matmul with M > 1?)"),
    ("GeneralReduction", "matmul", "is not elementwise"),
    ("GeneralReduction", "relu", "does not end with reduction axes"),
    ("GeneralReduction", "not_normal_form", "not in normal form"),
    ("GeneralReduction", "row_sum", 'the last block "B"'),
    ("RMSNorm", "matmul", "T.rsqrt"),
    ("RMSNorm", "relu", "T.rsqrt"),
    ("RMSNorm", "not_normal_form", "T.rsqrt"),
    ("RMSNorm", "layer_norm", "T.rsqrt"),
])
def test_decline_reason(rule, name, words):
    outcome, reason = decide(rule, CASES[name])
    assert outcome == "n" and words in reason, reason
    d = dl.diagnose(CASES[name], getattr(dl.gpu, rule)(), dl.gpu.Fallback(), target="cuda")
    report = d.reports[0]
    assert report.rule in ("Fallback", None)
    assert report.declined[0].rule == rule and words in report.declined[0].reason
    assert words in d.table["declined"][0]


def test_reduction_declines_a_chain_of_two_reductions():
    # a sum of a row sum: the second block is not elementwise
    outcome, reason = decide("Reduction", CASES["layer_norm"])
    assert outcome == "n" and "3 blocks left" in reason


def test_demo_mlp_assignment_batch_1():
    rules = (dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Transpose(),
             dl.gpu.RMSNorm(), dl.gpu.Fallback())
    d = dl.diagnose(wb.workloads.demo_mlp(1), *rules, target="cuda")
    assert d.assignment == {
        "transpose": "Transpose", "fused_matmul_add_relu": "Reduction",
        "layer_norm": "GeneralReduction", "transpose1": "Transpose",
        "fused_matmul1_add1": "Reduction",
    }
    assert "Reduction: " in d.table.set_index("function")["declined"]["layer_norm"]


# ------------------------------------------------------------------ structure (goldens)


GOLDEN_PREFIX = {"Reduction": "reduction", "GeneralReduction": "general_reduction",
                 "RMSNorm": "rmsnorm"}


@pytest.mark.parametrize("rule, name", [
    ("Reduction", "demo1.fused_matmul_add_relu"),
    ("Reduction", "row_sum"),
    ("Reduction", "col_sum"),
    ("Reduction", "row_center"),
    ("GeneralReduction", "demo1.layer_norm"),
    ("GeneralReduction", "demon.layer_norm"),
    ("GeneralReduction", "softmax"),
    ("RMSNorm", "rms_norm_n"),
])
def test_golden(rule, name):
    sch = getattr(dl.gpu, rule)().apply(CASES[name], CUDA, False)
    golden = f"dlight_{GOLDEN_PREFIX[rule]}_{name.replace('.', '_')}"
    check_golden(golden, gpu_schedule_summary(sch))


def _launch(sch) -> list[tuple]:
    _, device = lower_for_gpu(sch.mod, CUDA)
    return [(k.launch.grid, k.launch.block, k.shared_bytes) for k in device.kernels]


def test_reduction_demo_launch_matches_tvm_shape():
    # TVM 0.27's schedule of demo_mlp(1) (notes: 48 x (16, 16) and 16 x (16, 16))
    mod = wb.workloads.demo_mlp(1)
    for name, blocks in (("fused_matmul_add_relu", 48), ("fused_matmul1_add1", 16)):
        sch = dl.gpu.Reduction().apply(mod[name], CUDA, False)
        [(grid, block, _)] = _launch(sch)
        assert grid == (blocks, 1, 1) and block == (16, 16, 1)
        tags = [sch.get(lp).thread_tag for lp in sch.get_loops("matmul_rf_update")]
        assert tags == ["blockIdx.x", "threadIdx.x", "threadIdx.y", None, None]


def test_reduction_inner_reduction_keeps_partials_in_registers():
    sch = dl.gpu.Reduction().apply(CASES["row_sum"], CUDA, False)
    text = sch.mod.script()
    assert 'B_rf_local = T.alloc_buffer' in text and 'scope="local"' in text
    assert "pragma_auto_unroll_max_step" in text
    [(grid, block, _)] = _launch(sch)
    assert grid == (4, 1, 1) and block == (384, 1, 1)  # 768 = 2 x 384, no predicate


def test_general_reduction_statistics_in_shared_memory():
    sch = dl.gpu.GeneralReduction().apply(CASES["demo1.layer_norm"], CUDA, False)
    text = sch.mod.script()
    assert 'relu_sum_shared = T.alloc_buffer' in text
    assert 'relu_var_sum_shared = T.alloc_buffer' in text
    assert text.count("pragma_auto_unroll_max_step") == 3
    [(grid, block, _)] = _launch(sch)
    assert grid == (1, 1, 1) and block == (256, 1, 1)


# ------------------------------------------------------------------ numerics


MATCHED = [
    ("Reduction", "demo1.fused_matmul_add_relu", None),
    ("Reduction", "demo1.fused_matmul1_add1", None),
    ("Reduction", "row_sum", None),
    ("Reduction", "row_sum_n", {"m": 3}),
    ("Reduction", "row_max", None),
    ("Reduction", "col_sum", None),
    ("Reduction", "row_center", None),
    ("Reduction", "rms_norm", None),
    ("GeneralReduction", "demo1.layer_norm", None),
    ("GeneralReduction", "demon.layer_norm", {"n": 3}),
    ("GeneralReduction", "softmax", None),
    ("GeneralReduction", "layer_norm", None),
    ("GeneralReduction", "row_center", None),
    ("GeneralReduction", "rms_norm_n", {"n": 2}),
    ("GeneralReduction", "demo1.fused_matmul1_add1", None),
    ("GeneralReduction", "demon.fused_matmul_add_relu", {"n": 5}),
    ("Reduction", "rms_norm_n", {"n": 3}),
    ("RMSNorm", "rms_norm", None),
    ("RMSNorm", "rms_norm_n", {"n": 2}),
    ("RMSNorm", "rms_norm_f16", {"n": 2}),
]


@pytest.mark.parametrize("rule, name, shapes", MATCHED)
def test_emulator_matches_unscheduled(rule, name, shapes):
    func = CASES[name]
    sch = getattr(dl.gpu, rule)().apply(func, CUDA, False)
    kw = {"shapes": shapes} if shapes else {}
    wb.verify(sch.mod, func, target="cuda", emulate=True, check_races=True, **kw)


@pytest.mark.nvcc
@pytest.mark.parametrize("rule, name", [
    ("Reduction", "demo1.fused_matmul_add_relu"),
    ("Reduction", "row_sum_n"),
    ("Reduction", "row_center"),
    ("GeneralReduction", "demon.layer_norm"),
    ("GeneralReduction", "softmax"),
    ("RMSNorm", "rms_norm_f16"),
])
def test_nvcc(rule, name):
    sch = getattr(dl.gpu, rule)().apply(CASES[name], CUDA, False)
    ptx = check_nvcc(sch)
    assert set(ptx) == {"sm_80", "sm_90"} and all(".entry" in p for p in ptx.values())


# ------------------------------------------------------------------ a primitive fix


def test_decompose_reduction_accepts_a_unit_loop_below():
    # TVM's Reduction rule decomposes the rfactor block above a unit loop
    sch = wb.Schedule(row_reduce(4, 64))
    i, k = sch.get_loops("B")
    u = sch.add_unit_loop(sch.get_block("B"))
    assert [sch.get(lp).extent for lp in sch.get_loops("B")] == [4, 64, 1]
    sch.decompose_reduction(sch.get_block("B"), k)
    assert "B_init" in sch.mod.script() and sch.get(u).extent == 1
    wb.verify(sch.mod, row_reduce(4, 64))


# ------------------------------------------------------------------ TVM 0.27


def _tvm_func(func):
    import tvm

    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    return list(mod.functions.values())[0]


def _tvm_target():
    import tvm

    return tvm.target.Target({"kind": "cuda", "arch": "sm_80"}, host={"kind": "llvm"})


def _tvm_decide(rule: str, func) -> str:
    from tvm.s_tir import dlight as tdl

    try:
        out = getattr(tdl.gpu, rule)().apply(_tvm_func(func), _tvm_target(), False)
    except Exception:
        return "E"
    return "n" if out is None else "Y"


@pytest.mark.tvm
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_decisions_match_tvm(name):
    for rule in RULES:
        ours = decide(rule, CASES[name])[0]
        theirs = _tvm_decide(rule, CASES[name])
        if (name, rule) in DIFFERENCES:
            assert ours != theirs, f"{name} / {rule}: listed as a difference but both {ours}"
        else:
            assert (ours == "Y") == (theirs == "Y"), f"{name} / {rule}: ours {ours}, TVM {theirs}"


def tvm_thread_extents(script: str) -> dict[str, str]:
    """{thread tag: extent} of the thread_binding loops in a TVM script (the largest
    extent per tag, as the launch uses)."""
    out: dict[str, str] = {}
    for ext, tag in re.findall(r'T\.thread_binding\((.+?), thread="([a-zA-Z]+\.[xyz])"', script):
        ext = re.sub(r"T\.int64\((\d+)\)", r"\1", ext).strip()
        if tag not in out or (ext.isdigit() and out[tag].isdigit() and int(ext) > int(out[tag])):
            out[tag] = ext
    return out


def _ours_launch(sch) -> dict[str, str]:
    [(grid, block, _)] = _launch(sch)
    out = {}
    for tags, dims in ((("blockIdx.x", "blockIdx.y", "blockIdx.z"), grid),
                       (("threadIdx.x", "threadIdx.y", "threadIdx.z"), block)):
        for tag, d in zip(tags, dims, strict=True):
            if str(d) != "1":
                out[tag] = str(d)
    return out


@pytest.mark.tvm
@pytest.mark.parametrize("batch, name, rule", [
    (1, "fused_matmul_add_relu", "Reduction"),
    (1, "fused_matmul1_add1", "Reduction"),
    (1, "layer_norm", "GeneralReduction"),
    ("n", "layer_norm", "GeneralReduction"),
])
def test_demo_launch_matches_tvm(batch, name, rule):
    """Grid and block as TVM's schedule launches them. Shared memory differs by
    design: TVM's cross-thread reductions use warp shuffles, ours a shared tree."""
    from tvm.s_tir import dlight as tdl

    func = wb.workloads.demo_mlp(batch)[name]
    theirs = getattr(tdl.gpu, rule)().apply(_tvm_func(func), _tvm_target(), False)
    expected = {t: e for t, e in tvm_thread_extents(theirs.mod.script()).items() if e != "1"}
    assert _ours_launch(getattr(dl.gpu, rule)().apply(func, CUDA, False)) == expected
