"""The TVMScript of the seed documents pastes in and schedules: MLC's ``MyModule``,
the curriculum's functions, the forum question's module and the DLight demo model.
The texts are in tests/script_seeds/ (re-indented where extraction lost it)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import workbench as wb
from workbench.script import ParseError
from workbench.testing import assert_script_roundtrip, stochastic_schedule_mm

SEEDS = Path(__file__).resolve().parent / "script_seeds"


def read(name: str):
    path = SEEDS / f"{name}.py"
    return wb.from_script(path.read_text(), filename=str(path))


def mlc_schedule(sch: wb.Schedule) -> None:
    """The MLC chapter's schedule, as written there."""
    block_Y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    block_C = sch.get_block("C", "mm_relu")
    sch.reverse_compute_at(block_C, j0)
    sch.decompose_reduction(block_Y, k)


def test_mlc_my_module_schedules_like_the_workload():
    mod = read("mlc_mm_relu")
    assert mod.names == ["mm_relu"]
    assert wb.structural_equal(mod["mm_relu"], wb.workloads.mm_relu(128, 128, 128))
    ours, reference = wb.Schedule(mod), wb.Schedule(wb.workloads.mm_relu(128, 128, 128))
    mlc_schedule(ours)
    mlc_schedule(reference)
    assert wb.structural_equal(ours.mod, reference.mod)
    assert str(ours.trace) == str(reference.trace)
    wb.verify(ours.mod, wb.workloads.mm_relu(128, 128, 128))


def test_mlc_stochastic_matmul_module():
    mod = read("mlc_matmul")
    expected = replace(wb.workloads.matmul(128, 128, 128), name="main")
    assert wb.structural_equal(mod["main"], expected)
    ours = stochastic_schedule_mm(wb.Schedule(mod), [8, 16])
    theirs = stochastic_schedule_mm(wb.Schedule(expected), [8, 16])
    assert wb.structural_equal(ours.mod, theirs.mod)
    wb.verify(ours.mod, expected)


def test_curriculum_metaschedule_matmul_traces_like_the_workload():
    func = read("curriculum_metaschedule_matmul")
    assert wb.structural_equal(func, wb.workloads.matmul(1024, 1024, 1024))

    def trace(sch):
        block = sch.get_block("C")
        i, j, k = sch.get_loops(block)
        io, ii = sch.split(i, factors=[32, 32])
        jo, ji = sch.split(j, factors=[32, 32])
        ko, ki = sch.split(k, factors=[64, 16])
        sch.reorder(io, jo, ko, ii, ki, ji)

    ours, reference = wb.Schedule(func), wb.Schedule(wb.workloads.matmul(1024, 1024, 1024))
    trace(ours)
    trace(reference)
    assert wb.structural_equal(ours.mod, reference.mod)


def test_curriculum_matmul_tiled_computes_a_matmul():
    func = read("curriculum_matmul_tiled")
    assert [p.name for p in func.params] == ["A", "B", "C"]
    sch = wb.Schedule(func)
    io, jo, ii, ji = sch.get_loops(sch.get_block("C"))
    sch.parallel(sch.fuse(io, jo))
    sch.vectorize(ji)
    wb.verify(sch.mod, wb.workloads.matmul(128, 128, 128))
    assert_script_roundtrip(sch.mod)


def test_curriculum_lowered_function_without_blocks_builds():
    func = read("curriculum_lowered_main")
    assert wb.ir.block_names(func) == []
    wb.verify(func, wb.workloads.matmul(128, 128, 128))
    assert_script_roundtrip(func)


def test_curriculum_vector_slices_are_refused_with_the_line():
    path = SEEDS / "curriculum_vectorized.py"
    with pytest.raises(ParseError, match="slices of buffer `B`") as info:
        wb.from_script(path.read_text(), filename=str(path))
    err = info.value
    assert err.filename == str(path)
    assert path.read_text().splitlines()[err.lineno - 1].strip().startswith("j_outer*8 :")


def test_forum_module_reads_with_int64_and_schedules():
    mod = read("forum_fused_matmul_add_relu")
    func = mod["fused_matmul_add_relu"]
    assert func.params[0].index_dtype == "int64"
    assert "fc1.bias_local" in wb.ir.block_names(func)
    wb.verify(func, wb.workloads.linear_bias_relu(1, 48, 64))
    sch = wb.Schedule(mod)
    loops = sch.get_loops(sch.get_block("matmul"))
    sch.unroll(loops[-1])
    sch.compute_inline(sch.get_block("fc1.bias_local"))
    wb.verify(sch.mod, wb.workloads.linear_bias_relu(1, 48, 64))
    assert_script_roundtrip(sch.mod)


DLIGHT_REFERENCES = {
    "transpose": lambda: wb.workloads.transpose(768, 768),
    "transpose1": lambda: wb.workloads.transpose(256, 768),
    "fused_matmul_add_relu": lambda: wb.workloads.linear_bias_relu(1, 768, 768),
    "layer_norm": lambda: wb.workloads.layer_norm(1, 768),
}


@pytest.fixture(scope="module")
def dlight():
    with pytest.warns(wb.script.SkippedFunctionWarning, match="forward"):
        return read("dlight_scheduled")


def test_dlight_module_reads_its_tir_functions(dlight):
    assert dlight.names == ["fused_matmul1_add1", "fused_matmul_add_relu", "layer_norm",
                            "transpose", "transpose1"]
    norm = dlight["layer_norm"]
    assert dict(norm.attrs) == {"op_pattern": 4, "tirx.is_scheduled": True}
    lets = [s for s in wb.ir.iter_stmts(norm.body) if isinstance(s, wb.ir.LetStmt)]
    assert [s.var.name for s in lets] == ["v_relu_red_temp_v0", "v_relu_red_temp_v1"]
    assert_script_roundtrip(dlight)


@pytest.mark.parametrize("name", list(DLIGHT_REFERENCES))
def test_dlight_functions_compute_what_the_workloads_do(dlight, name):
    wb.verify(dlight[name], DLIGHT_REFERENCES[name]())


def test_dlight_function_schedules_further(dlight):
    sch = wb.Schedule(dlight)
    sch.work_on("transpose")
    block = sch.get_block("T_transpose")
    bx, tx = sch.get_loops(block)
    cache = sch.cache_read(block, 0, "shared")
    sch.compute_at(cache, bx)
    wb.verify(sch.mod, wb.workloads.transpose(768, 768), func_name="transpose")
