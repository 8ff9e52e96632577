"""DLight's CPU rules (``wb.dlight.cpu.GEMV``, ``Reduction``, ``Fallback``): which
functions each takes or declines (and why, also through ``diagnose``), the scheduled IR
against goldens, the numbers against the unscheduled function, the demo model end to
end, the bench script, and (``-m tvm``) the decisions of TVM 0.27's CPU rules.

Regenerate the goldens with ``python tests/test_dlight_cpu.py --update-golden``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.dlight import cpu
from workbench.dlight.base import Declined
from workbench.dlight.cpu import _common
from workbench.testing import check_golden, write_golden

C = wb.Target("c")
# fixed machine facts, so that the goldens do not depend on the machine
GEMV = cpu.GEMV(vector_bits=256, num_cores=2)
REDUCTION = cpu.Reduction(vector_bits=256, num_cores=2)
FALLBACK = cpu.Fallback(vector_bits=256, num_cores=2)
RULES = {"GEMV": GEMV, "Reduction": REDUCTION, "Fallback": FALLBACK}

_GEMV_N = '''
@T.prim_func
def gemv_n(a: T.handle, x: T.Buffer((128,), "float32"), c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 128), "float32")
    y = T.match_buffer(c, (n,), "float32")
    for i, k in T.grid(n, 128):
        with T.block("y"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                y[vi] = T.float32(0)
            y[vi] = y[vi] + A[vi, vk] * x[vk]
'''

_BATCH_GEMV = '''
@T.prim_func
def batch_gemv(A: T.Buffer((4, 32, 64), "float32"), x: T.Buffer((4, 64), "float32"),
               y: T.Buffer((4, 32), "float32")):
    for b, i, k in T.grid(4, 32, 64):
        with T.block("y"):
            vb, vi, vk = T.axis.remap("SSR", [b, i, k])
            with T.init():
                y[vb, vi] = T.float32(0)
            y[vb, vi] = y[vb, vi] + A[vb, vi, vk] * x[vb, vk]
'''

_ROW_SUM = '''
@T.prim_func
def row_sum(A: T.Buffer((64, 256), "float32"), y: T.Buffer((64,), "float32")):
    for i, k in T.grid(64, 256):
        with T.block("y"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                y[vi] = T.float32(0)
            y[vi] = y[vi] + A[vi, vk]
'''

_COL_SUM = '''
@T.prim_func
def col_sum(A: T.Buffer((64, 96), "float32"), y: T.Buffer((96,), "float32")):
    for i, j in T.grid(64, 96):
        with T.block("y"):
            vi, vj = T.axis.remap("RS", [i, j])
            with T.init():
                y[vj] = T.float32(0)
            y[vj] = y[vj] + A[vi, vj]
'''

# every row subtracts the sum of row 0: rows are not independent
_OTHER_ROW = '''
@T.prim_func
def other_row(A: T.Buffer((16, 64), "float32"), out: T.Buffer((16, 64), "float32")):
    s = T.alloc_buffer((16,))
    for i, k in T.grid(16, 64):
        with T.block("s"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                s[vi] = T.float32(0)
            s[vi] = s[vi] + A[vi, vk]
    for i, j in T.grid(16, 64):
        with T.block("out"):
            vi, vj = T.axis.remap("SS", [i, j])
            out[vi, vj] = A[vi, vj] - s[0]
'''


def _not_normal() -> wb.PrimFunc:
    """A matmul whose loop ``i`` was split: the block's iter var ``vi`` is bound to
    ``i_0 * 4 + i_1``, not to one loop."""
    sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, factors=[None, 4])
    return sch.mod["matmul"]


def _functions() -> dict[str, wb.PrimFunc]:
    funcs = {
        "gemv": wb.workloads.gemv(256, 256),
        "gemv_n": wb.from_script(_GEMV_N),
        "batch_gemv": wb.from_script(_BATCH_GEMV),
        "matmul": wb.workloads.matmul(32, 32, 32),
        "softmax": wb.workloads.softmax(32, 64),
        "layer_norm": wb.workloads.layer_norm(8, 64),
        "elementwise_chain": wb.workloads.elementwise_chain(64, 8),
        "row_sum": wb.from_script(_ROW_SUM),
        "col_sum": wb.from_script(_COL_SUM),
        "other_row": wb.from_script(_OTHER_ROW),
        "not_normal": _not_normal(),
    }
    for batch in (1, "n"):
        for name, func in wb.workloads.demo_mlp(batch).functions:
            funcs[f"demo{batch}.{name}"] = func
    return funcs


FUNCS = _functions()

# (function, rule) -> None when the rule takes it, else a piece of its reason
EXPECTED: dict[str, dict[str, str | None]] = {
    "gemv": {"GEMV": None, "Reduction": None, "Fallback": None},
    "gemv_n": {"GEMV": None, "Reduction": None, "Fallback": None},
    "batch_gemv": {"GEMV": None, "Reduction": None, "Fallback": None},
    "matmul": {"GEMV": "matrix-matrix product", "Reduction": "not the contiguous (last) "
               "axis of B", "Fallback": None},
    "softmax": {"GEMV": "3 blocks remain", "Reduction": None, "Fallback": None},
    "layer_norm": {"GEMV": "3 blocks remain", "Reduction": None, "Fallback": None},
    "elementwise_chain": {"GEMV": "elementwise", "Reduction": "no reduction block",
                          "Fallback": None},
    "row_sum": {"GEMV": "does not read two inputs", "Reduction": None, "Fallback": None},
    "col_sum": {"GEMV": "does not read two inputs", "Reduction": 'block "y" has axes RS',
                "Fallback": None},
    "other_row": {"GEMV": 'block "s" does not read two inputs',
                  "Reduction": 'block "out" reads s outside its own row', "Fallback": None},
    "not_normal": {"GEMV": "not in normal form", "Reduction": "not in normal form",
                   "Fallback": "not in normal form"},
    "demo1.transpose": {"GEMV": 'block "T_transpose" is elementwise',
                        "Reduction": "no reduction block", "Fallback": None},
    "demo1.fused_matmul_add_relu": {"GEMV": None, "Reduction": "not the contiguous (last) "
                                    "axis of permute_dims", "Fallback": None},
    "demo1.layer_norm": {"GEMV": "3 blocks remain", "Reduction": None, "Fallback": None},
    "demo1.transpose1": {"GEMV": "elementwise", "Reduction": "no reduction block",
                         "Fallback": None},
    "demo1.fused_matmul1_add1": {"GEMV": None, "Reduction": "not the contiguous",
                                 "Fallback": None},
    "demon.transpose": {"GEMV": "elementwise", "Reduction": "no reduction block",
                        "Fallback": None},
    "demon.fused_matmul_add_relu": {"GEMV": "matrix-matrix product",
                                    "Reduction": "not the contiguous", "Fallback": None},
    "demon.layer_norm": {"GEMV": "3 blocks remain", "Reduction": None, "Fallback": None},
    "demon.transpose1": {"GEMV": "elementwise", "Reduction": "no reduction block",
                         "Fallback": None},
    "demon.fused_matmul1_add1": {"GEMV": "matrix-matrix product",
                                 "Reduction": "not the contiguous", "Fallback": None},
}

CASES = [(f, r) for f in EXPECTED for r in RULES]
MATCHES = [(f, r) for f, r in CASES if EXPECTED[f][r] is None]
DECLINES = [(f, r) for f, r in CASES if EXPECTED[f][r] is not None]


def _verify(sch: wb.Schedule, func: wb.PrimFunc):
    shapes = {v.name: 13 for v in func.shape_vars} or None
    return wb.verify(sch, func, shapes=shapes)


@pytest.mark.parametrize("fname, rule", DECLINES)
def test_rule_declines_with_reason(fname, rule):
    with pytest.raises(Declined) as info:
        RULES[rule].apply(FUNCS[fname], C, False)
    assert EXPECTED[fname][rule] in info.value.reason


@pytest.mark.parametrize("fname, rule", MATCHES)
def test_rule_schedule_computes_the_same(fname, rule):
    func = FUNCS[fname]
    sch = RULES[rule].apply(func, C, False)
    assert isinstance(sch, wb.Schedule)
    assert _verify(sch, func).ok


def test_every_function_is_in_the_table():
    assert set(EXPECTED) == set(FUNCS)


# ---------------------------------------------------------------- the schedules

GOLDEN_CASES = {
    "gemv_inner": (GEMV, "gemv"),
    "gemv_outer": (GEMV, "demo1.fused_matmul_add_relu"),
    "gemv_batch": (GEMV, "batch_gemv"),
    "gemv_symbolic": (GEMV, "gemv_n"),
    "reduction_softmax": (REDUCTION, "softmax"),
    "reduction_single_row": (REDUCTION, "demo1.layer_norm"),
    "reduction_symbolic_rows": (REDUCTION, "demon.layer_norm"),
    "reduction_row_sum": (REDUCTION, "row_sum"),
    "fallback_matmul": (FALLBACK, "demon.fused_matmul_add_relu"),
    "fallback_transpose": (FALLBACK, "demo1.transpose"),
    "fallback_col_sum": (FALLBACK, "col_sum"),
}


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_schedule_golden(case):
    rule, fname = GOLDEN_CASES[case]
    sch = rule.apply(FUNCS[fname], C, False)
    check_golden(f"dlight_cpu_{case}", sch.mod.script())


def _kinds(sch: wb.Schedule, block: str) -> list[str]:
    return [sch.get(lp).kind for lp in sch.get_loops(block)]


def test_gemv_inner_reduction_is_a_horizontal_reduction():
    """Rows in parallel, one vector of partial sums per row (rfactor lanes: 8 floats at
    256 bits, 16 at 512), summed at the end of the row, and the C keeps the pragmas."""
    sch = GEMV.apply(FUNCS["gemv"], C, False)
    assert _kinds(sch, "y_rf_update") == ["parallel", "serial", "vectorized"]
    assert _kinds(sch, "y_rf_init") == ["parallel", "vectorized"]
    assert [b.shape for b in sch.func.body.alloc_buffers] == [(256, 8)]
    wide = cpu.GEMV(vector_bits=512, num_cores=2).apply(FUNCS["gemv"], C, False)
    assert [b.shape for b in wide.func.body.alloc_buffers] == [(256, 16)]
    source = wb.build(sch.mod).source
    assert source.count("#pragma omp simd") == 2 and "#pragma omp parallel for" in source
    assert "runs serially" not in source


def test_gemv_outer_reduction_vectorizes_the_columns():
    """``x @ W`` with ``W[k, n]``: column tiles of 4 vectors in parallel, the reduction
    over ``k`` outside the vectorized tile, the epilogue fused into the tile."""
    sch = GEMV.apply(FUNCS["demo1.fused_matmul_add_relu"], C, False)
    assert _kinds(sch, "matmul_update") == ["parallel", "serial", "vectorized"]
    assert [sch.get(lp).extent for lp in sch.get_loops("matmul_update")] == [24, 768, 32]
    assert _kinds(sch, "compute") == ["parallel", "vectorized"]
    assert "runs serially" not in wb.build(sch.mod).source


def test_reduction_rows_in_parallel_statistics_vectorized():
    sch = cpu.Reduction(vector_bits=256, num_cores=2).apply(
        wb.workloads.softmax(128, 256), C, False)
    for block in ("max_rf_update", "sum_rf_update"):
        assert _kinds(sch, block) == ["parallel", "serial", "serial", "vectorized"]
    assert _kinds(sch, "norm") == ["parallel", "vectorized"]
    assert "runs serially" not in wb.build(sch.mod).source


def test_small_work_is_not_parallelized():
    """A 768-element layer norm would spend more waking OpenMP threads than computing:
    vectorized only. One core: nothing in parallel at all."""
    sch = REDUCTION.apply(FUNCS["demo1.layer_norm"], C, False)
    source = wb.build(sch.mod).source
    assert "omp parallel" not in source and "#pragma omp simd" in source
    one = cpu.GEMV(vector_bits=256, num_cores=1).apply(FUNCS["gemv"], C, False)
    assert "parallel" not in {sch_kind for b in ("y_rf_update",) for sch_kind in _kinds(one, b)}


def test_fallback_one_dimensional_loop_is_chunked():
    A = wb.placeholder((1 << 16,), "float32", name="A")
    B = wb.compute((1 << 16,), lambda i: A[i] * 2.0, name="B")
    func = wb.create_prim_func([A, B], name="scale")
    sch = FALLBACK.apply(func, C, False)
    assert _kinds(sch, "B") == ["parallel", "vectorized"]
    assert [sch.get(lp).extent for lp in sch.get_loops("B")] == [64, 1024]
    assert _verify(sch, func).ok


def test_fallback_tiles_transposes():
    """``B[i, j] = A[j, i]``: 16 x 16 tiles, the tiles in parallel, the tile's row
    vectorized; a transpose whose sides are no multiples of 16 is only vectorized."""
    sch = FALLBACK.apply(FUNCS["demo1.transpose1"], C, False)
    assert _kinds(sch, "T_transpose") == ["parallel", "serial", "vectorized"]
    assert [sch.get(lp).extent for lp in sch.get_loops("T_transpose")] == [768, 16, 16]
    odd = wb.workloads.transpose(200, 200)
    sch = FALLBACK.apply(odd, C, False)
    assert _kinds(sch, "B") == ["parallel", "vectorized"]
    assert _verify(sch, odd).ok


def test_vector_width_from_cpu_flags():
    assert _common.vector_bits({"sse2", "avx", "avx2", "fma"}) == 256
    assert _common.vector_bits({"avx2", "avx512f"}) == 512
    assert _common.vector_bits({"asimd"}) == 128 and _common.vector_bits(()) == 128
    assert _common.vector_lanes("float32", 512) == 16
    assert _common.vector_lanes("float64", 256) == 4
    assert _common.vector_bits() in (128, 256, 512)


# ---------------------------------------------------------------- diagnose, end to end

CPU_RULES = (cpu.GEMV(), cpu.Reduction(), cpu.Fallback())


def test_diagnose_demo_mlp_batch_1():
    d = wb.dlight.diagnose(wb.workloads.demo_mlp(1), *CPU_RULES, target="c")
    assert d.assignment == {
        "transpose": "Fallback", "fused_matmul_add_relu": "GEMV", "layer_norm": "Reduction",
        "transpose1": "Fallback", "fused_matmul1_add1": "GEMV",
    }
    table = d.table.set_index("function")
    assert "GEMV: block \"T_transpose\" is elementwise" in table.loc["transpose", "declined"]
    assert "3 blocks remain" in table.loc["layer_norm", "declined"]
    assert table.loc["fused_matmul_add_relu", "parallel loops"] == 1
    assert table.loc["layer_norm", "parallel loops"] == 0
    assert table.loc["layer_norm", "vectorized loops"] >= 3


def test_diagnose_demo_mlp_symbolic_batch():
    d = wb.dlight.diagnose(wb.workloads.demo_mlp("n"), *CPU_RULES, target="c")
    assert d.assignment == {
        "transpose": "Fallback", "fused_matmul_add_relu": "Fallback",
        "layer_norm": "Reduction", "transpose1": "Fallback", "fused_matmul1_add1": "Fallback",
    }
    reasons = d["fused_matmul_add_relu"].declined
    assert [a.rule for a in reasons] == ["GEMV", "Reduction"]
    assert "matrix-matrix product" in reasons[0].reason
    assert "not the contiguous" in reasons[1].reason


def test_cpu_rules_are_not_tried_on_cuda():
    report = wb.dlight.schedule_function(FUNCS["gemv"], list(CPU_RULES), target="cuda")
    assert report.rule is None
    assert [a.outcome for a in report.attempts] == ["skipped"] * 3


@pytest.mark.parametrize("batch, rows", [(1, 1), ("n", 3)])
def test_demo_mlp_forward_matches_numpy(batch, rows):
    mod = wb.workloads.demo_mlp(batch)
    scheduled = wb.dlight.apply_default_schedule(mod, *CPU_RULES, target="c")
    assert all(wb.dlight.is_scheduled(f) for _, f in scheduled.functions)
    params = wb.workloads.demo_mlp_params()
    x = np.random.default_rng(2).standard_normal((rows, 768)).astype("float32")
    out = wb.workloads.demo_mlp_forward(scheduled, x, params)
    np.testing.assert_allclose(out, wb.workloads.demo_mlp_ref(x, params), rtol=1e-4,
                               atol=1e-4)


def test_bench_smoke():
    script = Path(__file__).resolve().parents[1] / "bench" / "dlight_cpu.py"
    out = subprocess.run(
        [sys.executable, str(script), "--gemv", "64", "--softmax", "16", "32",
         "--layer-norm", "8", "64", "--batch", "1", "2", "--min-ms", "1"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout
    assert out.startswith("machine: ") and "vector flags" in out and "OpenMP threads" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    names = [line.split("|")[1].strip() for line in rows[1:]]
    assert names == ["gemv 64x64", "softmax 16x32", "layer_norm 8x64",
                     "demo_mlp(1).transpose", "demo_mlp(1).fused_matmul_add_relu",
                     "demo_mlp(1).layer_norm", "demo_mlp(1).transpose1",
                     "demo_mlp(1).fused_matmul1_add1", "demo_mlp forward, batch 1",
                     "demo_mlp forward, batch 2"]
    rules = [line.split("|")[2].strip() for line in rows[1:4]]
    assert rules == ["GEMV", "Reduction", "Reduction"]
    assert all(line.rstrip().endswith("|") and line.count("x |") == 1 for line in rows[1:])


# ---------------------------------------------------------------- TVM 0.27's CPU rules

# Where TVM's rule decides differently, and why (see the rules' docstrings).
TVM_DIFFERENT = {
    # TVM's GEMV schedules only the A[s, r] layout
    ("demo1.fused_matmul_add_relu", "GEMV"): "x @ W[k, n]: vectorized over the columns here",
    ("demo1.fused_matmul1_add1", "GEMV"): "x @ W[k, n]: vectorized over the columns here",
    # TVM's Reduction wants two blocks or more, the last one elementwise
    ("gemv", "Reduction"): "a lone row reduction is taken here",
    ("gemv_n", "Reduction"): "a lone row reduction is taken here",
    ("batch_gemv", "Reduction"): "a lone row reduction is taken here",
    ("row_sum", "Reduction"): "a lone row reduction is taken here",
    # TVM's Reduction takes reductions along a non-contiguous axis (matmuls)
    ("demo1.fused_matmul_add_relu", "Reduction"): "W[k, n]: not a row reduction here",
    ("demo1.fused_matmul1_add1", "Reduction"): "W[k, n]: not a row reduction here",
    ("demon.fused_matmul_add_relu", "Reduction"): "W[k, n]: not a row reduction here",
    ("demon.fused_matmul1_add1", "Reduction"): "W[k, n]: not a row reduction here",
    # TVM computes row 0's sum inside every row of a parallel loop
    ("other_row", "Reduction"): "reads another row's statistic",
}


@pytest.mark.tvm
def test_match_decline_agrees_with_tvm():
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    from tvm.s_tir import dlight as dl

    target = tvm.target.Target({"kind": "llvm"})
    theirs_rules = {"GEMV": dl.cpu.GEMV(), "Reduction": dl.cpu.Reduction()}
    mismatches = []
    for fname, func in FUNCS.items():
        if fname == "not_normal":
            continue  # TVM's text of it differs (its loops are not re-derived)
        mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
        tfunc = next(iter(mod.functions.values()))
        for rule, theirs in theirs_rules.items():
            theirs_takes = theirs.apply(tfunc, target, False) is not None
            ours_takes = EXPECTED[fname][rule] is None
            if theirs_takes != ours_takes:
                mismatches.append((fname, rule))
    assert sorted(mismatches) == sorted(TVM_DIFFERENT)


if __name__ == "__main__":
    if "--update-golden" not in sys.argv:
        sys.exit("usage: python tests/test_dlight_cpu.py --update-golden")
    for case, (rule, fname) in sorted(GOLDEN_CASES.items()):
        print(write_golden(f"dlight_cpu_{case}", rule.apply(FUNCS[fname], C, False).mod.script()))
