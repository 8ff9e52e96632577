"""The DLight driver: rule order, reasons, custom rules, the diagnosis table, and the
demo model's forward pass."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import dlight as dl
from workbench import workloads
from workbench.dlight.analysis import normalize_prim_func


def _x(batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 768)).astype("float32")


# ---------------------------------------------------------------- rules and driver


class OnlyNamed(dl.GPUScheduleRule):
    """Takes the functions whose name is in ``names``, with the Fallback schedule."""

    def __init__(self, *names):
        self.names = names

    def apply(self, func, target, tunable):
        if func.name not in self.names:
            raise dl.Declined(f"{func.name} is not one of {list(self.names)}")
        return dl.gpu.Fallback().apply(func, target, tunable)


def test_first_matching_rule_wins_and_the_others_say_why():
    mod = workloads.demo_mlp(1)
    d = dl.diagnose(mod, OnlyNamed("transpose"), dl.gpu.Fallback(), target="cuda")
    assert d.assignment == {
        "transpose": "OnlyNamed",
        "fused_matmul_add_relu": "Fallback",
        "layer_norm": "Fallback",
        "transpose1": "Fallback",
        "fused_matmul1_add1": "Fallback",
    }
    report = d["layer_norm"]
    assert [(a.rule, a.outcome) for a in report.attempts] == [
        ("OnlyNamed", "declined"), ("Fallback", "applied")]
    assert report.declined[0].reason == "layer_norm is not one of ['transpose']"
    assert d["transpose"].declined == []
    # the scheduled module is what apply_default_schedule returns
    out = dl.apply_default_schedule(mod, OnlyNamed("transpose"), dl.gpu.Fallback(), target="cuda")
    assert wb.structural_equal(out, d.mod)
    assert all(dl.is_scheduled(out[n]) for n in out.names)


def test_rule_order_matters_fallback_first_steals_everything():
    d = dl.diagnose(workloads.demo_mlp(1), dl.gpu.Fallback(), OnlyNamed("transpose"),
                    target="cuda")
    assert set(d.assignment.values()) == {"Fallback"}
    assert d.fallback == workloads.demo_mlp(1).names


def test_scheduled_functions_are_left_alone():
    mod = dl.apply_default_schedule(workloads.demo_mlp(1), dl.gpu.Fallback(), target="cuda")
    again = dl.diagnose(mod, OnlyNamed("transpose"), target="cuda")
    assert again.assignment == dict.fromkeys(mod.names)
    assert all("already scheduled" in again[n].note for n in mod.names)
    assert wb.structural_equal(again.mod, mod)


def test_functions_that_already_bind_threads_are_left_alone():
    sch = dl.gpu.Fallback().apply(workloads.transpose(64, 64), wb.Target("cuda"), False)
    report = dl.schedule_function(sch.func, [dl.gpu.Fallback()], target="cuda")
    assert report.rule is None and "binds GPU threads" in report.note


def test_no_rule_matches_keeps_the_function():
    func = workloads.transpose(64, 64)
    out = dl.apply_default_schedule(func, OnlyNamed("other"), target="cuda")
    assert out["transpose"] is func
    d = dl.diagnose(func, OnlyNamed("other"), target="cuda")
    assert d.assignment == {"transpose": None}
    assert "none: no rule matched" in d.table.loc[0, "rule"]


def test_a_refused_primitive_is_an_error_attempt_not_a_crash():
    @dl.ScheduleRule.from_callable("SplitsTooMuch")
    def splits_too_much(func, target, tunable):
        sch = wb.Schedule(func)
        sch.compute_inline(sch.get_block("B"))  # an output block: refused
        return sch

    report = dl.schedule_function(workloads.transpose(64, 64),
                                  [splits_too_much, dl.gpu.Fallback()], target="cuda")
    assert report.rule == "Fallback"
    err = report.attempts[0]
    assert err.rule == "SplitsTooMuch" and err.outcome == "error"
    assert "compute_inline" in err.reason


def test_a_bug_in_a_rule_propagates_with_a_note():
    @dl.ScheduleRule.from_callable("Buggy")
    def buggy(func, target, tunable):
        return {}["missing"]

    with pytest.raises(KeyError) as info:
        dl.apply_default_schedule(workloads.transpose(8, 8), buggy, target="cuda")
    assert "raised by rule Buggy on function 'transpose'" in "".join(info.value.__notes__)


def test_gpu_rules_are_skipped_on_the_cpu_target_and_back():
    d = dl.diagnose(workloads.transpose(16, 16), dl.gpu.Fallback(), target="c")
    assert d.assignment == {"transpose": None}
    assert d["transpose"].attempts[0].outcome == "skipped"


def test_target_from_a_with_block_and_missing_target():
    with wb.Target("cuda", arch="sm_90"):
        out = dl.ApplyDefaultSchedule(dl.gpu.Fallback())(workloads.transpose(64, 64))
        d = dl.diagnose(workloads.transpose(64, 64), dl.gpu.Fallback())
    assert dl.is_scheduled(out["transpose"])
    assert d.target.arch == "sm_90"
    with pytest.raises(ValueError, match="no target"):
        dl.apply_default_schedule(workloads.transpose(8, 8), dl.gpu.Fallback())


def test_bad_arguments():
    with pytest.raises(TypeError, match=r"Fallback\(\) rather than Fallback"):
        dl.apply_default_schedule(workloads.transpose(8, 8), dl.gpu.Fallback, target="cuda")
    with pytest.raises(TypeError, match="not a ScheduleRule"):
        dl.apply_default_schedule(workloads.transpose(8, 8), "Fallback", target="cuda")
    with pytest.raises(ValueError, match="at least one rule"):
        dl.apply_default_schedule(workloads.transpose(8, 8), target="cuda")
    with pytest.raises(TypeError, match="IRModule or a PrimFunc"):
        dl.apply_default_schedule("transpose", dl.gpu.Fallback(), target="cuda")


# ---------------------------------------------------------------- the seed's custom rule


@dl.ScheduleRule.from_callable("MyTileAndBind")
def my_tile_and_bind(func, target, tunable):
    """The tutorial's custom rule: single-block injective functions, tiled and bound."""
    sch = wb.Schedule(func)
    infos = normalize_prim_func(sch)
    if infos is None or len(infos) != 1:
        return None
    info = infos[0]
    if not info.is_injective():
        return None
    loops = sch.get_loops(info.block_rv)
    fused = sch.fuse(*loops)
    bx, tx = sch.split(fused, factors=[None, 256])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def test_custom_rule_from_callable_takes_the_transposes():
    mod = workloads.demo_mlp(1)
    d = dl.diagnose(mod, my_tile_and_bind, dl.gpu.Fallback(), target="cuda")
    assert d.assignment["transpose"] == "MyTileAndBind"
    assert d.assignment["transpose1"] == "MyTileAndBind"
    assert d.assignment["layer_norm"] == "Fallback"
    assert d["layer_norm"].declined[0].reason == "apply() returned None"
    assert d["transpose"].launch["block"] == "(256, 1, 1)"
    assert d["transpose"].launch["grid"] == "(2304, 1, 1)"
    wb.verify(d.mod["transpose"], mod["transpose"], target="cuda", emulate=True,
              check_races=True)


def test_custom_rule_by_subclassing_and_its_repr():
    rule = OnlyNamed("layer_norm")
    assert repr(rule) == "OnlyNamed()" and rule.name == "OnlyNamed"
    assert rule.is_target_available(wb.Target("cuda"))
    assert not rule.is_target_available(wb.Target("c"))
    with pytest.raises(NotImplementedError):
        dl.ScheduleRule().apply(workloads.transpose(8, 8), wb.Target("cuda"), False)


# ---------------------------------------------------------------- the diagnosis table


def test_diagnosis_table_text_and_html():
    d = dl.diagnose(workloads.demo_mlp("n"), OnlyNamed("transpose"), dl.gpu.Fallback(),
                    target="cuda")
    table = d.table
    assert list(table.columns) == ["function", "rule", "declined", "kernels", "grid", "block",
                                   "threads/block", "shared bytes", "local bytes"]
    assert list(table["function"]) == workloads.demo_mlp(1).names
    row = table.set_index("function").loc["fused_matmul1_add1"]
    assert row["grid"] == "((n + 3) // 4, 1, 1); ((n + 3) // 4, 1, 1)"
    assert row["declined"] == "OnlyNamed: fused_matmul1_add1 is not one of ['transpose']"
    text = str(d)
    assert "fused_matmul1_add1           -> Fallback" in text
    assert "OnlyNamed passed: fused_matmul1_add1 is not one of ['transpose']" in text
    page = d._repr_html_()
    assert page.count("<tr>") == 1 + 5 and "<b>OnlyNamed</b>" in page
    assert "the catch-all rule" in page  # Fallback rows are flagged
    assert d.to_pandas().equals(table)


def test_diagnosis_reports_a_schedule_the_gpu_refuses():
    @dl.ScheduleRule.from_callable("TooManyThreads")
    def too_many(func, target, tunable):
        sch = wb.Schedule(func)
        i, j = sch.get_loops(sch.get_block("B"))
        sch.bind(i, "blockIdx.x")
        sch.bind(j, "threadIdx.x")  # 2048 threads in a block
        return sch

    d = dl.diagnose(workloads.transpose(2048, 8), too_many, target="cuda")
    assert "ThreadsPerBlockError" in d.table.loc[0, "problem"]


def test_cpu_diagnosis_columns():
    d = dl.diagnose(workloads.transpose(16, 16), dl.cpu.Fallback(), target="c")
    assert {"parallel loops", "vectorized loops"} <= set(d.table.columns)


# ---------------------------------------------------------------- the demo model


@pytest.mark.parametrize("batch", [1, 4])
def test_demo_mlp_unscheduled_forward_matches_numpy(batch):
    mod = workloads.demo_mlp(batch)
    params = workloads.demo_mlp_params(seed=1)
    x = _x(batch)
    out = workloads.demo_mlp_forward(mod, x, params)
    np.testing.assert_allclose(out, workloads.demo_mlp_ref(x, params), rtol=1e-4, atol=1e-4)


def test_demo_mlp_symbolic_batch_runs_at_any_batch():
    mod = workloads.demo_mlp("n")
    params = workloads.demo_mlp_params()
    kernels: dict = {}
    for batch in (1, 3):
        x = _x(batch, seed=batch)
        out = workloads.demo_mlp_forward(mod, x, params, kernels=kernels)
        assert out.shape == (batch, 256)
        np.testing.assert_allclose(out, workloads.demo_mlp_ref(x, params), rtol=1e-4, atol=1e-4)
    assert len(kernels) == 5  # built once, run at both batch sizes


def test_demo_mlp_shapes_and_names_follow_the_tutorial():
    mod = workloads.demo_mlp(1)
    shapes = {n: [tuple(b.shape) for b in mod[n].params] for n in mod.names}
    assert shapes == {
        "transpose": [(768, 768), (768, 768)],
        "fused_matmul_add_relu": [(1, 768), (768, 768), (768,), (1, 768)],
        "layer_norm": [(1, 768), (768,), (768,), (1, 768)],
        "transpose1": [(256, 768), (768, 256)],
        "fused_matmul1_add1": [(1, 768), (768, 256), (256,), (1, 256)],
    }
    assert [b.name for b in mod["fused_matmul1_add1"].params] == [
        "layer_norm", "permute_dims1", "fc2_bias", "T_add_intermediate"]
    with pytest.raises(ValueError, match="at least 1"):
        workloads.demo_mlp(0)
    with pytest.raises(ValueError, match="needs a name"):
        workloads.demo_mlp("2n")


def test_run_calls_names_what_is_missing():
    mod = workloads.demo_mlp(1)
    with pytest.raises(KeyError, match="needs \\['fc1_weight'\\]"):
        workloads.run_calls(mod, workloads.DEMO_MLP_CALLS, {"x": _x(1)})


def test_demo_mlp_with_fallback_on_the_emulator():
    mod = workloads.demo_mlp(2)
    params = workloads.demo_mlp_params()
    scheduled = dl.apply_default_schedule(mod, dl.gpu.Fallback(), target="cuda")
    x = _x(2)
    out = workloads.demo_mlp_forward(scheduled, x, params, target="cuda", emulate=True)
    np.testing.assert_allclose(out, workloads.demo_mlp_ref(x, params), rtol=1e-4, atol=1e-4)
    with pytest.raises(wb.GpuError):  # unscheduled functions are no GPU kernels
        workloads.demo_mlp_forward(mod, x, params, target="cuda", emulate=True)


def test_bind_accepts_a_predicate_through_a_unit_loop():
    # fuse(2 x 256) -> split [None, 1024]: the outer loop has extent 1, the predicate
    # `ax_0 * 1024 + ax_1 < 512` bounds ax_1 alone (TVM's iter-map analysis agrees)
    func = workloads.transpose(2, 256)
    sch = wb.Schedule(func)
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    bx, tx = sch.split(fused, factors=[None, 1024])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    wb.verify(sch.mod, func, target="cuda", emulate=True, check_races=True)
