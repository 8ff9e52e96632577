"""The TVM parity runner (bench/tvm_parity/run.py) sorts tests into agree / disagree /
not applicable / error.

It runs a small test file in TVM's style (written here) through the runner, exactly as
it runs TVM's own schedule tests, and checks each test's verdict and class.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUNNER = REPO / "bench" / "tvm_parity" / "run.py"

FAKE_TVM_TEST = '''
import pytest

import tvm
import tvm.testing
from tvm.s_tir.schedule.testing import (
    assert_structural_equal_ignore_global_symbol,
    verify_trace_roundtrip,
)
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def add_one(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (16, 8))
    B = T.match_buffer(b, (16, 8))
    for i, j in T.grid(16, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + 1.0


@T.prim_func(s_tir=True)
def add_one_split(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (16, 8))
    B = T.match_buffer(b, (16, 8))
    for x, y, z in T.grid(4, 4, 8):
        with T.sblock("B_renamed"):
            vi = T.axis.spatial(16, x * 4 + y)
            vj = T.axis.spatial(8, z)
            B[vi, vj] = A[vi, vj] + 1.0


@T.prim_func(s_tir=True)
def add_one_split_wrong(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (16, 8))
    B = T.match_buffer(b, (16, 8))
    for x, y, z in T.grid(8, 2, 8):
        with T.sblock("B"):
            vi = T.axis.spatial(16, x * 2 + y)
            vj = T.axis.spatial(8, z)
            B[vi, vj] = A[vi, vj] + 1.0


@T.prim_func(s_tir=True)
def two_stages(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16,))
    B = T.sblock_alloc_buffer((16,))
    C = T.match_buffer(c, (16,))
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * 2.0
    for i in range(16):
        with T.sblock("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi] + 1.0


@T.prim_func(s_tir=True)
def two_stages_split(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16,))
    B = T.sblock_alloc_buffer((16,))
    C = T.match_buffer(c, (16,))
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * 2.0
    for i, ii in T.grid(4, 4):
        with T.sblock("C"):
            vi = T.axis.spatial(16, i * 4 + ii)
            C[vi] = B[vi] + 1.0


@T.prim_func(s_tir=True)
def unreadable(a: T.handle) -> None:
    A = T.match_buffer(a, (4,))
    for i in range(4):
        with T.sblock("A"):
            vi = T.axis.remap("S", [i])
            A[vi] = T.no_such_builtin_anywhere(vi)


inner = tvm.testing.parameter(4, 8)


def test_split_agrees(inner):
    sch = tvm.s_tir.Schedule(add_one, debug_mask="all")
    i, _ = sch.get_loops(sch.get_sblock("B"))
    sch.split(i, factors=[None, 4])
    assert_structural_equal_ignore_global_symbol(add_one_split, sch.mod["main"])
    verify_trace_roundtrip(sch=sch, mod=add_one)


def test_names_reused_in_another_scope():
    sch = tvm.s_tir.Schedule(two_stages, debug_mask="all")
    (i,) = sch.get_loops(sch.get_sblock("C"))
    sch.split(i, factors=[4, 4])
    assert_structural_equal_ignore_global_symbol(sch.mod["main"], two_stages_split)


def test_split_wrong_ir():
    sch = tvm.s_tir.Schedule(add_one, debug_mask="all")
    i, _ = sch.get_loops(sch.get_sblock("B"))
    sch.split(i, factors=[None, 4])
    assert_structural_equal_ignore_global_symbol(add_one_split_wrong, sch.mod["main"])


def test_split_accepted_here():
    sch = tvm.s_tir.Schedule(add_one, debug_mask="all")
    i, _ = sch.get_loops(sch.get_sblock("B"))
    with pytest.raises(tvm.s_tir.ScheduleError):
        sch.split(i, factors=[4, 4])


def test_split_refused_here():
    sch = tvm.s_tir.Schedule(add_one, debug_mask="all")
    i, _ = sch.get_loops(sch.get_sblock("B"))
    sch.split(i, factors=[3, 5])


def test_unknown_keyword():
    sch = tvm.s_tir.Schedule(add_one, debug_mask="all")
    i, _ = sch.get_loops(sch.get_sblock("B"))
    sch.split(i, factors=[None, 4], a_keyword_nobody_has=True)


def test_unreadable_script():
    tvm.s_tir.Schedule(unreadable)


def test_missing_primitive():
    sch = tvm.s_tir.Schedule(add_one, debug_mask="all")
    sch.a_primitive_nobody_has(sch.get_sblock("B"))


@tvm.testing.requires_a_gpu_nobody_has
def test_tvm_only_facility():
    pass


def test_hangs():
    while True:
        pass


if __name__ == "__main__":
    tvm.testing.main()
'''


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tvm_tests")
    (folder / "test_tir_schedule_fake.py").write_text(FAKE_TVM_TEST)
    out = folder / "out.json"
    run = subprocess.run(
        [sys.executable, str(RUNNER), "--tvm-tests", str(folder), "--files",
         "test_tir_schedule_fake.py", "--json", str(out), "--timeout", "1", "--list"],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    data = json.loads(out.read_text())
    tests = {t["id"].split("::")[1]: t for t in data["tests"]["test_tir_schedule_fake.py"]}
    return run.stdout, data, tests


def test_agreeing_test_and_its_parameters(report):
    _, _, tests = report
    for params in ("[4]", "[8]"):
        t = tests["test_split_agrees" + params]
        assert t["status"] == "agree", t
        # renamed loops are equal up to renaming; the block name is only noted
        assert any("B_renamed" in n for n in t["notes"]), t
    # `i` names a different loop in each nest of the expected IR
    assert tests["test_names_reused_in_another_scope"]["status"] == "agree"


def test_disagreements_are_classified(report):
    _, _, tests = report
    expect = {
        "test_split_wrong_ir": "wrong IR",
        "test_split_accepted_here": "we accept what TVM refuses",
        "test_split_refused_here": "we refuse what TVM accepts",
        "test_unreadable_script": "parse error",
        "test_unknown_keyword": "API: arguments",
    }
    for name, cls in expect.items():
        assert (tests[name]["status"], tests[name]["cls"]) == ("disagree", cls), tests[name]
    assert "no_such_builtin_anywhere" in tests["test_unreadable_script"]["message"]
    wrong = tests["test_split_wrong_ir"]
    assert wrong["message"].startswith("IR differs: ours line"), wrong
    assert "T.grid(4, 4, 8)" in wrong["message"] and "T.grid(8, 2, 8)" in wrong["message"]
    assert wrong["where"].startswith("L"), wrong


def test_not_applicable_and_errors(report):
    _, _, tests = report
    assert tests["test_missing_primitive"]["status"] == "n/a"
    assert "a_primitive_nobody_has" in tests["test_missing_primitive"]["message"]
    assert tests["test_tvm_only_facility"]["status"] == "n/a"
    assert (tests["test_hangs"]["status"], tests["test_hangs"]["cls"]) == ("error", "timeout")


def test_summary_and_table(report):
    stdout, data, tests = report
    assert len(tests) == 11
    total = data["summary"]["total"]
    assert (total["agree"], total["disagree"], total["n/a"], total["error"]) == (3, 5, 2, 1)
    assert "3 of 9 agree" in stdout
    assert "CPU: " in stdout
    assert "## disagree: wrong IR (1)" in stdout
