"""The tuning database: JSON-lines round trip, resume after a kill, corrupt lines
reported by line number and skipped, workloads shared by structurally equal
functions, the table, and stored traces treated as data (never executed)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

import workbench as wb
from workbench.runtime.isolation import RunResult
from workbench.search import Database, DatabaseWarning
from workbench.testing import matmul_func

REPO = Path(__file__).resolve().parent.parent


def ok(*secs: float, flops: int | None = None) -> RunResult:
    m = wb.Measurement(samples=secs, number=10, repeat=len(secs), flops=flops)
    return RunResult("ok", m)


def tiled(func: wb.PrimFunc, factor: int) -> wb.Schedule:
    """matmul with ``j`` split by a sampled (decided) tile and ``k`` split by 4."""
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    t = sch.sample_perfect_tile(j, n=2, decision=[func.params[1].shape[1] // factor, factor])
    sch.split(j, factors=t)
    sch.split(k, factors=[None, 4])
    return sch


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def func() -> wb.PrimFunc:
    return matmul_func(16, 16, 16)


@pytest.fixture
def filled(tmp_path, func):
    """A database with three ok candidates and two failures of one matmul."""
    db = Database(tmp_path / "db")
    sch = {f: tiled(func, f) for f in (1, 2, 4, 8, 16)}
    db.commit(func, sch[1].trace, ok(3e-6, 4e-6, 3e-6))
    db.commit(func, sch[2].trace, ok(2e-6, 2e-6, 5e-6))
    db.commit(func, sch[4].trace, RunResult("timeout", None, "ran past 10.0 s"))
    db.commit(func, sch[8].trace, ok(6e-6, 6e-6, 6e-6))
    db.commit(func, sch[16].trace, RunResult("crash", None, "killed by SIGSEGV"))
    return db, sch


# ---------------------------------------------------------------------------
# round trip


def test_round_trip_same_content_after_reopen(filled, func):
    db, sch = filled
    again = Database(db.path)
    assert again.problems == []
    assert again.records() == db.records()
    assert [r.status for r in again.records()] == ["ok", "ok", "timeout", "ok", "crash"]
    assert again.records()[2].error == "ran past 10.0 s"
    assert again.records()[2].run_secs is None and again.records()[2].median is None
    assert again.records()[0].run_secs == (3e-6, 4e-6, 3e-6)
    assert again.records()[0].median == pytest.approx(3e-6)
    assert again.records()[0].args_info == [[[16, 16], "float32"]] * 3
    assert again.records()[0].target == "c"
    # the stored trace is the committed trace, decisions included
    assert again.records()[1].trace.script() == sch[2].trace.script()


def test_files_are_json_lines_a_person_can_read(filled, func):
    db, _ = filled
    (workload,) = read_lines(db.workloads_path)
    assert workload["hash"] == wb.structural_hash(func)
    assert workload["name"] == "matmul"
    assert workload["script"] == func.script()
    assert workload["flops"] == wb.flop_count(func)
    records = read_lines(db.records_path)
    assert len(records) == 5
    assert set(records[0]) == {
        "workload", "trace", "run_secs", "status", "error", "target", "args_info", "created",
        "cv", "foreign_load", "noisy",  # the measurement's noise
    }
    assert records[0]["workload"] == 0 and records[0]["run_secs"] == [3e-6, 4e-6, 3e-6]
    assert records[4]["run_secs"] is None and records[4]["status"] == "crash"


def test_query_best_replays_the_fastest_ok_trace(filled, func):
    db, sch = filled
    again = Database(db.path)
    best = again.best_record(func)
    assert best.median == pytest.approx(2e-6)  # the failures have no time and are ignored
    got = again.query_best(func)
    assert isinstance(got, wb.Schedule)
    expected = wb.Schedule(func)
    wb.Trace.from_json(sch[2].trace.as_json()).apply_to_schedule(expected)
    assert wb.structural_equal(got.mod, expected.mod)
    assert wb.structural_equal(got.mod, sch[2].mod)
    wb.verify(got.mod, func)


def test_query_best_none_without_successes(tmp_path, func):
    db = Database(tmp_path)
    assert db.query_best(func) is None
    db.commit(func, tiled(func, 4).trace, RunResult("build_error", None, "gcc: error"))
    assert db.best_record(func) is None and db.query_best(func) is None


def test_best_record_by_target(tmp_path, func):
    db = Database(tmp_path)
    db.commit(func, tiled(func, 2).trace, ok(1e-6), target="cuda")
    db.commit(func, tiled(func, 4).trace, ok(5e-6))
    assert db.best_record(func).target == "cuda"
    assert db.best_record(func, target="c").median == pytest.approx(5e-6)


def test_commit_accepts_a_measurement(tmp_path, func):
    db = Database(tmp_path)
    rec = db.commit(func, tiled(func, 4).trace, wb.Measurement((1e-6, 2e-6), 5, 2))
    assert rec.status == "ok" and rec.run_secs == (1e-6, 2e-6)


# ---------------------------------------------------------------------------
# has(): what tune uses to skip measured candidates


def test_has_across_reopen(filled, func):
    db, sch = filled
    again = Database(db.path)
    for f in (1, 2, 4, 8, 16):
        assert again.has(func, sch[f].trace)  # failures count as measured too
    other = wb.Schedule(func)
    i, j, k = other.get_loops(other.get_block("C"))
    other.split(k, factors=[None, 2])
    assert not again.has(func, other.trace)
    # the same trace in another form (JSON text, TVM >= 0.24 kind names) is the same
    assert again.has(func, sch[2].trace.as_json())
    assert again.has(func, sch[2].trace.as_json_obj(syntax="tirx"))
    assert not again.has(matmul_func(32, 16, 16), sch[2].trace)


def test_two_handles_on_one_directory(tmp_path, func):
    """Another process's appends show after reload(); workload indices stay consistent
    when both add functions."""
    first, second = Database(tmp_path), Database(tmp_path)
    trace = tiled(func, 4).trace
    first.commit(func, trace, ok(1e-6))
    assert not second.has(func, trace)
    second.reload()
    assert second.has(func, trace)

    third = Database(tmp_path)  # opened before either knows the next function
    other = matmul_func(32, 16, 16)
    first.commit(other, tiled(other, 4).trace, ok(2e-6))
    rec = third.commit(matmul_func(8, 8, 8), wb.Schedule(matmul_func(8, 8, 8)).trace, ok(3e-6))
    assert rec.workload == 2
    final = Database(tmp_path)
    assert [w.index for w in final.workloads] == [0, 1, 2]
    assert [len(final.records(f)) for f in (func, other, matmul_func(8, 8, 8))] == [1, 1, 1]


# ---------------------------------------------------------------------------
# workloads


def test_structurally_equal_functions_share_a_workload(tmp_path):
    db = Database(tmp_path)
    a, b = matmul_func(16, 16, 16), matmul_func(16, 16, 16)
    assert a is not b
    db.commit(a, tiled(a, 2).trace, ok(1e-6))
    db.commit(b, tiled(b, 4).trace, ok(2e-6))
    db.commit(wb.IRModule.from_funcs(b), tiled(b, 8).trace, ok(3e-6))
    assert len(db.workloads) == 1 and len(read_lines(db.workloads_path)) == 1
    assert len(db.records(a)) == 3
    assert db.has(a, tiled(b, 4).trace)


def test_different_shapes_are_different_workloads(tmp_path):
    db = Database(tmp_path)
    small, big = matmul_func(16, 16, 16), matmul_func(32, 32, 32)
    db.commit(small, tiled(small, 4).trace, ok(1e-6))
    db.commit(big, tiled(big, 4).trace, ok(8e-6))
    assert [w.index for w in db.workloads] == [0, 1]
    assert [r.median for r in db.records(big)] == [8e-6]
    assert db.records(big)[0].args_info == [[[32, 32], "float32"]] * 3
    assert not db.has(big, tiled(small, 2).trace)
    assert db.best_record(small).median == 1e-6


# ---------------------------------------------------------------------------
# the table


def test_table_columns_and_values(filled, func):
    db, _ = filled
    df = Database(db.path).table()
    assert list(df.columns) == [
        "workload", "status", "median_ms", "gflops", "noisy", "decisions", "error", "target",
        "created", "estimated",
    ]
    assert len(df) == 5 and not df["estimated"].any()
    # the first two candidates' samples spread (3, 4, 3 and 2, 2, 5 us): noisy, as stored
    assert list(df["noisy"]) == [r.noisy for r in db.records()] == [True, True] + [False] * 3
    assert list(df["status"]) == ["ok", "ok", "timeout", "ok", "crash"]
    assert df["median_ms"][0] == pytest.approx(3e-3)
    assert df["gflops"][1] == pytest.approx(wb.flop_count(func) / 2e-6 / 1e9)
    assert math.isnan(df["median_ms"][2]) and math.isnan(df["gflops"][4])
    assert df["decisions"][0] == "tile=[16,1]" and df["decisions"][3] == "tile=[2,8]"
    assert df["error"][4] == "killed by SIGSEGV"
    assert set(df["workload"]) == {"matmul"}
    assert df["created"][0].startswith("20")
    assert len(db.table(matmul_func(32, 16, 16))) == 0


# ---------------------------------------------------------------------------
# a kill mid-write, corrupt lines


def test_resume_after_a_cut_off_last_line(filled, func):
    db, sch = filled
    data = db.records_path.read_bytes()
    db.records_path.write_bytes(data[: len(data) - 40])  # killed in the middle of line 5
    with pytest.warns(DatabaseWarning, match="line 5"):
        again = Database(db.path)
    assert len(again.records()) == 4
    assert len(again.problems) == 1
    assert again.problems[0].startswith("records.jsonl line 5: partial last line")
    assert not again.has(func, sch[16].trace)  # the cut-off candidate is measured again
    # appending after the cut-off line keeps both lines apart
    again.commit(func, sch[16].trace, RunResult("crash", None, "SIGSEGV"))
    with pytest.warns(DatabaseWarning):
        third = Database(db.path)
    assert len(third.records()) == 5 and third.has(func, sch[16].trace)
    assert len(third.problems) == 1 and third.problems[0].startswith("records.jsonl line 5:")


def test_corrupt_lines_are_reported_and_skipped(filled, func):
    db, _ = filled
    good = db.records_path.read_text().splitlines()[0]
    base = json.loads(good)
    bad = [
        "this is not json",
        json.dumps({k: v for k, v in base.items() if k != "trace"}),
        json.dumps({**base, "run_secs": "fast"}),
        json.dumps({**base, "workload": 7}),
        json.dumps({**base, "run_secs": None}),  # status ok without times
        json.dumps({**base, "workload": True}),
        json.dumps([1, 2, 3]),
        json.dumps({**base, "trace": {"insts": []}}),
    ]
    with db.records_path.open("a") as f:
        for line in bad:
            f.write(line + "\n")
        f.write('{"workload": 0, "run_secs": [NaN], "status": "ok", "trace": [[], []]}\n')
        f.write(good + "\n")
    with open(db.records_path, "ab") as f:
        f.write(b'{"status": "\xff\xfe"}\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = Database(db.path)
    assert len([w for w in caught if issubclass(w.category, DatabaseWarning)]) == 1
    assert len(again.records()) == 6  # the five committed and the good line appended
    numbers = [int(p.split()[2].rstrip(":")) for p in again.problems]
    assert numbers == [6, 7, 8, 9, 10, 11, 12, 13, 14, 16]
    reasons = dict(zip(numbers, again.problems))
    assert "not valid JSON" in reasons[6]
    assert "missing field(s) trace" in reasons[7]
    assert "'run_secs'" in reasons[8]
    assert "refers to workload 7" in reasons[9]
    assert "status 'ok' without run_secs" in reasons[10]
    assert "'workload' must be an integer" in reasons[11]
    assert "expected a JSON object" in reasons[12]
    assert "'trace'" in reasons[13]
    assert "run_secs" in reasons[14]
    assert "not UTF-8" in reasons[16]
    # reloading the same file does not warn again
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again.reload()
    assert len(again.problems) == 10


def test_corrupt_workload_line_skips_its_records(tmp_path, func):
    db = Database(tmp_path)
    db.commit(func, tiled(func, 4).trace, ok(1e-6))
    other = matmul_func(32, 16, 16)
    db.commit(other, tiled(other, 4).trace, ok(2e-6))
    lines = db.workloads_path.read_text().splitlines()
    db.workloads_path.write_text(lines[0] + "\n" + lines[1][:30] + "}\n")
    with pytest.warns(DatabaseWarning):
        again = Database(tmp_path)
    assert again.problems[0].startswith("workloads.jsonl line 2: not valid JSON")
    assert again.problems[1] == (
        "records.jsonl line 2: refers to workload 1, which is not a valid line of workloads.jsonl"
    )
    assert len(again.records(func)) == 1 and again.records(other) == []
    # a new workload goes after the broken line: indices are line numbers
    rec = again.commit(other, tiled(other, 4).trace, ok(3e-6))
    assert rec.workload == 2


def test_kill_mid_tune_loses_at_most_the_candidate_in_flight(tmp_path):
    """A process committing in a loop is SIGKILLed; everything it finished is kept."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        import workbench as wb
        from workbench.search import Database
        func = wb.workloads.matmul(16, 16, 16)
        db = Database({str(tmp_path)!r})
        sch = wb.Schedule(func)
        i, j, k = sch.get_loops(sch.get_block("C"))
        t = sch.sample_perfect_tile(j, n=2, decision=[16, 1])
        n = 0
        while True:
            trace = sch.trace.with_decision(2, [16, 1])
            db.commit(func, trace, wb.Measurement((1e-6 * (n + 1),), 1, 1))
            n += 1
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    records = tmp_path / "records.jsonl"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if records.exists() and records.read_bytes().count(b"\n") >= 20:
                break
            assert proc.poll() is None, "the committing process died on its own"
            time.sleep(0.02)
        else:
            pytest.fail("the committing process wrote fewer than 20 records in 60 s")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatabaseWarning)
        db = Database(tmp_path)
    assert len(db.problems) <= 1
    assert all("line" in p and "partial" in p for p in db.problems)
    assert len(db.records()) >= 20
    medians = [r.median for r in db.records()]
    assert medians == pytest.approx([1e-6 * (n + 1) for n in range(len(medians))])


# ---------------------------------------------------------------------------
# stored traces are data


def test_hostile_trace_strings_are_data_not_code(tmp_path, func):
    sentinel = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {sentinel}')"
    db = Database(tmp_path / "db")
    db.commit(func, wb.Schedule(func).trace, ok(9e-6))
    hostile = {
        "workload": 0,
        "trace": [[["GetBlock", [], [payload, "matmul"], ["b0"]],
                   ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
                   ["Parallel", ["l1"], [], []]], []],
        "run_secs": [1e-6], "status": "ok", "error": payload, "target": "c",
        "args_info": [], "created": payload,
    }
    with db.records_path.open("a") as f:
        f.write(json.dumps(hostile) + "\n")
    again = Database(tmp_path / "db")
    assert again.problems == []
    best = again.best_record(func)
    assert best.error == payload  # loaded as a plain string
    with pytest.raises(wb.TraceError, match="step 0"):
        again.query_best(func)
    assert not sentinel.exists()
    assert again.table()["error"].iloc[-1] == payload


# ---------------------------------------------------------------------------
# refusals


def test_commit_refusals(tmp_path, func):
    db = Database(tmp_path)
    trace = wb.Schedule(func).trace
    with pytest.raises(ValueError, match="needs its measurement"):
        db.commit(func, trace, SimpleNamespace(status="ok", measurement=None, error=""))
    with pytest.raises(TypeError, match="RunResult or Measurement"):
        db.commit(func, trace, 0.5)
    with pytest.raises(TypeError, match="PrimFunc or IRModule"):
        db.commit("matmul", trace, ok(1e-6))
    two = wb.IRModule.from_funcs(func, dataclasses.replace(func, name="other"))
    with pytest.raises(ValueError, match="one function"):
        db.commit(two, trace, ok(1e-6))
    with pytest.raises(wb.TraceError):
        db.commit(func, [["not a trace"]], ok(1e-6))
    with pytest.raises(ValueError, match="finite seconds"):
        db.commit(func, trace, ok(float("nan")))
    with pytest.raises(ValueError, match="non-empty string"):
        db.commit(func, trace, ok(1e-6), target="")
    assert len(db) == 0 and len(Database(tmp_path)) == 0


def test_path_that_is_a_file(tmp_path):
    path = tmp_path / "db"
    path.write_text("")
    with pytest.raises(NotADirectoryError, match="is a file"):
        Database(path)
