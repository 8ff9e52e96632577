"""The DLight tutorial's flow end to end on the demo model: apply the rules, diagnose,
build every function for CUDA (nvcc-checked), run the forward pass in the emulator
and compare it with numpy; the rule assignment is TVM 0.27's."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import dlight as dl
from workbench import workloads
from workbench.testing import check_nvcc


def full_rules():
    return (dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.LowBatchGEMV(), dl.gpu.Reduction(),
            dl.gpu.GeneralReduction(), dl.gpu.Transpose(), dl.gpu.RMSNorm(), dl.gpu.Fallback())


def seed_rules():
    """The tutorial's common subset."""
    return (dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction(),
            dl.gpu.Fallback())


#: What TVM 0.27's rules pick on its own legalization of the model (each rule tried
#: alone, first match in the full order).
TVM_ASSIGNMENT = {
    1: {"transpose": "Transpose", "fused_matmul_add_relu": "Reduction",
        "layer_norm": "GeneralReduction", "transpose1": "Transpose",
        "fused_matmul1_add1": "Reduction"},
    "n": {"transpose": "Transpose", "fused_matmul_add_relu": "Matmul",
          "layer_norm": "GeneralReduction", "transpose1": "Transpose",
          "fused_matmul1_add1": "Matmul"},
}


@pytest.mark.parametrize("batch", [1, "n"])
def test_rule_assignment_is_tvms(batch):
    d = dl.diagnose(workloads.demo_mlp(batch), *full_rules(), target="cuda")
    assert d.assignment == TVM_ASSIGNMENT[batch], str(d)
    for report in d.reports:
        for attempt in report.declined:
            assert attempt.outcome == "declined", str(d)  # no rule failed part-way
            assert attempt.reason and attempt.reason != "apply() returned None"


def test_seed_rule_subset_leaves_the_transposes_to_fallback():
    d = dl.diagnose(workloads.demo_mlp(1), *seed_rules(), target="cuda")
    assert d.assignment["transpose"] == "Fallback"
    assert d.assignment["transpose1"] == "Fallback"
    assert d.fallback == ["transpose", "transpose1"]
    assert (d.table.set_index("function").loc["transpose", "block"]) == "(1024, 1, 1)"


@pytest.mark.parametrize("batch, runs", [(1, [1]), ("n", [1, 5, 33])])
def test_forward_pass_in_the_emulator_matches_numpy(batch, runs):
    mod = dl.apply_default_schedule(workloads.demo_mlp(batch), *full_rules(), target="cuda")
    params = workloads.demo_mlp_params(seed=3)
    kernels: dict = {}
    for rows in runs:
        x = np.random.default_rng(rows).standard_normal((rows, 768)).astype("float32")
        out = workloads.demo_mlp_forward(mod, x, params, target="cuda", emulate=True,
                                         check_races=True, kernels=kernels)
        np.testing.assert_allclose(out, workloads.demo_mlp_ref(x, params), rtol=2e-3, atol=2e-3)


@pytest.mark.nvcc
@pytest.mark.parametrize("batch", [1, "n"])
def test_every_scheduled_function_compiles_with_nvcc(batch):
    mod = dl.apply_default_schedule(workloads.demo_mlp(batch), *full_rules(), target="cuda")
    for name in mod.names:
        ptx = check_nvcc(wb.IRModule.from_funcs(mod[name]))
        assert all(".entry" in text for text in ptx.values()), name


@pytest.mark.tvm
@pytest.mark.parametrize("batch", [1, "n"])
def test_assignment_matches_live_tvm(batch):
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed")
    from tvm.s_tir import dlight as tdl

    ours = workloads.demo_mlp(batch)
    theirs = tvm.script.from_source(ours.script(syntax="tirx"))
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_80"}, host={"kind": "llvm"})
    order = ["Matmul", "GEMV", "LowBatchGEMV", "Reduction", "GeneralReduction", "Transpose",
             "RMSNorm", "Fallback"]
    expected = {}
    for gv, func in theirs.functions_items():
        for name in order:
            if getattr(tdl.gpu, name)().apply(func, target, False) is not None:
                expected[gv.name_hint] = name
                break
    d = dl.diagnose(ours, *full_rules(), target="cuda")
    assert d.assignment == expected
