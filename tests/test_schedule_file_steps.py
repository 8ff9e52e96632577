"""The optional "steps" key of schedule files: each instruction with the IR after it, for
viewers without a kernel. Written by ``sch.save`` and the editor's downloads, within a
size cap; loading never reads it."""

from __future__ import annotations

import json

import pytest

import workbench as wb
from workbench.schedule import file as schedule_file
from workbench.schedule.file import MAX_STEPS_BYTES, steps_record


def scheduled() -> wb.Schedule:
    """mm_relu with lookups, a split, a reorder, a sampling step and a compute_at."""
    sch = wb.Schedule(wb.workloads.mm_relu(32, 32, 32))
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    tiles = sch.sample_perfect_tile(i, n=2, decision=[4, 8])
    i0, _i1 = sch.split(i, factors=tiles)
    sch.reverse_compute_at(sch.get_block("C"), i0)
    return sch


def prefix_ir(trace: wb.Trace, n: int) -> str:
    """The function after the first ``n`` instructions, replayed independently."""
    sch = wb.Schedule(wb.workloads.mm_relu(32, 32, 32))
    wb.Trace(trace.insts[:n]).apply_to_schedule(sch)
    return sch.func.script(syntax="tirx")


def test_save_writes_each_instruction_and_the_ir_after_it(tmp_path):
    sch = scheduled()
    data = json.loads(sch.save(tmp_path / "s.json").read_text())
    steps = data["steps"]
    assert steps["syntax"] == data["syntax"] == "tirx"
    assert steps["start"] == wb.workloads.mm_relu(32, 32, 32).script(syntax="tirx")
    items = steps["items"]
    assert [item["instruction"] for item in items] == sch.trace.lines("tirx")
    assert [item["kind"] for item in items] == [
        "GetSBlock", "GetLoops", "Split", "Reorder", "SamplePerfectTile", "Split",
        "GetSBlock", "ReverseComputeAt"]
    for n, item in enumerate(items, start=1):
        assert item["ir"] == prefix_ir(sch.trace, n), f"step {n} ({item['kind']})"
    assert items[-1]["ir"] == sch.func.script(syntax="tirx")


def test_lookups_and_sampling_repeat_the_previous_ir(tmp_path):
    sch = scheduled()
    items = json.loads(sch.save(tmp_path / "s.json").read_text())["steps"]["items"]
    start = json.loads((tmp_path / "s.json").read_text())["steps"]["start"]
    assert items[0]["ir"] == items[1]["ir"] == start  # get_sblock, get_loops
    assert items[4]["ir"] == items[3]["ir"]  # sample_perfect_tile after the reorder
    assert items[6]["ir"] == items[5]["ir"]  # get_sblock("C") after the second split
    assert items[2]["ir"] != start and items[5]["ir"] != items[4]["ir"]


def test_classic_syntax_files_carry_classic_steps(tmp_path):
    sch = scheduled()
    data = json.loads(sch.save(tmp_path / "s.json", syntax="classic").read_text())
    assert data["steps"]["syntax"] == "classic"
    assert data["steps"]["items"][0]["kind"] == "GetBlock"
    assert data["steps"]["items"][-1]["ir"] == sch.func.script()


def test_steps_past_the_cap_are_left_out_and_the_file_still_loads(tmp_path, monkeypatch):
    sch = scheduled()
    assert steps_record(sch.original, sch.trace, max_bytes=2000) is None
    full = steps_record(sch.original, sch.trace)
    size = sum(len(t.encode()) for t in [full["start"]] + [
        v for item in full["items"] for v in (item["instruction"], item["kind"], item["ir"])])
    assert size < MAX_STEPS_BYTES
    assert steps_record(sch.original, sch.trace, max_bytes=size) is not None
    assert steps_record(sch.original, sch.trace, max_bytes=size - 1) is None
    monkeypatch.setattr(schedule_file, "MAX_STEPS_BYTES", size - 1)
    path = sch.save(tmp_path / "capped.json")
    data = json.loads(path.read_text())
    assert "steps" not in data
    assert wb.structural_equal(wb.load_schedule(path).mod, sch.mod)


def test_a_file_too_large_with_its_steps_is_written_without_them(tmp_path, monkeypatch):
    sch = scheduled()
    sf = schedule_file.make_schedule_file(sch.original, sch.trace)
    with_steps = len(sf.dumps().encode())
    monkeypatch.setattr(schedule_file, "MAX_TEXT_BYTES", with_steps - 1)
    data = json.loads(sf.dumps())
    assert "steps" not in data and data["trace"] and data["module"]


def test_loading_never_trusts_the_steps(tmp_path):
    sch = scheduled()
    path = sch.save(tmp_path / "s.json")
    data = json.loads(path.read_text())
    data["steps"]["items"][-1]["ir"] = "this is not the IR"
    path.write_text(json.dumps(data))
    loaded = wb.read_schedule_file(path)
    assert loaded.steps is None  # never read back
    assert wb.structural_equal(loaded.schedule().mod, sch.mod)
    data["steps"] = 12  # not even the right type: ignored as well
    path.write_text(json.dumps(data))
    assert wb.structural_equal(wb.load_schedule(path).mod, sch.mod)


def test_a_trace_that_does_not_replay_has_no_steps():
    sch = scheduled()
    assert steps_record(wb.workloads.matmul(16, 16, 16), sch.trace) is None


def test_a_long_trace_keeps_its_steps_within_the_cap(tmp_path):
    """300 lookups and a few splits: every step is written, each lookup repeating the IR
    before it, and the file stays within the size a document may have."""
    sch = wb.Schedule(wb.workloads.matmul(64, 64, 64))
    for n in range(300):
        loops = sch.get_loops(sch.get_block("C"))
        if n % 100 == 0:
            sch.split(loops[-1], factors=[None, 2])
    path = sch.save(tmp_path / "long.json")
    data = json.loads(path.read_text())
    items = data["steps"]["items"]
    assert len(items) == len(sch.trace) == 603
    changed = [n + 1 for n, (a, b) in enumerate(zip(items, items[1:], strict=False))
               if a["ir"] != b["ir"]]
    assert [items[n]["kind"] for n in changed] == ["Split"] * 3
    assert path.stat().st_size < wb.schedule.limits.MAX_TEXT_BYTES


def test_steps_of_a_trace_whose_ir_grows_past_the_cap_are_left_out(tmp_path):
    """Split and fuse the same loop 20 times: each round doubles the index expressions,
    so the IR texts together pass 4 MiB; the file is written without "steps" and loads."""
    sch = wb.Schedule(wb.workloads.matmul(64, 64, 64))
    block = sch.get_block("C")
    for _ in range(20):
        i, *_rest = sch.get_loops(block)
        sch.fuse(*sch.split(i, factors=[None, 2]))
    path = sch.save(tmp_path / "grown.json")
    assert "steps" not in json.loads(path.read_text())
    assert path.stat().st_size < wb.schedule.limits.MAX_TEXT_BYTES
    assert wb.structural_equal(wb.load_schedule(path).mod, sch.mod)


@pytest.mark.tvm
def test_a_file_with_steps_opens_in_tvm_and_each_steps_ir_parses(tmp_path):
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional comparison)")
    sch = scheduled()
    data = json.loads(sch.save(tmp_path / "s.json").read_text())
    theirs = tvm.s_tir.Schedule(tvm.script.from_source(data["module"]))
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(data["trace"], theirs)
    last = tvm.script.from_source(data["steps"]["items"][-1]["ir"])
    tvm.ir.assert_structural_equal(last, theirs.mod["mm_relu"])
    for item in data["steps"]["items"]:
        tvm.script.from_source(item["ir"])
