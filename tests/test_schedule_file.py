"""Self-contained schedule files: save, load, refuse bad files, open them in the views."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import workbench as wb
from workbench.schedule.file import (
    FORMAT,
    ScheduleFileError,
    is_schedule_file,
    parse_schedule_file,
    read_trace_source,
)
from workbench.search.result import Trial
from workbench.testing import stochastic_schedule_mm
from workbench.widgets import ScheduleEditor, TraceStepper, TuningDashboard
from workbench.widgets.dashboard_model import DashboardModel


def mlc_schedule(n: int = 32) -> wb.Schedule:
    """The MLC chapter's mm_relu schedule."""
    sch = wb.Schedule(wb.workloads.mm_relu(n, n, n))
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(blk, k)
    return sch


def test_save_and_load_round_trip(tmp_path):
    sch = mlc_schedule()
    path = sch.save(tmp_path / "mm_relu.json", target="c", note="MLC schedule")
    data = json.loads(Path(path).read_text())
    assert data["format"] == FORMAT and data["version"] == 1
    assert data["workbench"] == wb.__version__ and data["target"] == "c"
    assert data["func_name"] == "mm_relu" and data["note"] == "MLC schedule"
    # the module is the *unscheduled* function, in TVM >= 0.24 syntax
    assert data["module"] == wb.IRModule.from_funcs(wb.workloads.mm_relu(32, 32, 32)).script(
        syntax="tirx")
    assert data["trace"][0][0][0] == "GetSBlock"  # kind names TVM 0.27 replays
    loaded = wb.load_schedule(path)
    assert wb.structural_equal(loaded.mod, sch.mod)
    assert loaded.trace.script() == sch.trace.script()
    assert wb.structural_equal(loaded.original["mm_relu"], wb.workloads.mm_relu(32, 32, 32))
    # a loaded schedule goes on and saves again
    loaded.parallel(loaded.get_loops(loaded.get_block("Y_update"))[0])
    again = wb.load_schedule(loaded.save(tmp_path / "more.json"))
    assert wb.structural_equal(again.mod, loaded.mod) and len(again.trace) == len(sch.trace) + 3
    wb.verify(again.mod, wb.workloads.mm_relu(32, 32, 32))


def test_sampled_decisions_are_kept(tmp_path):
    func = wb.workloads.matmul(64, 64, 64)
    sch = stochastic_schedule_mm(wb.Schedule(func, seed=7))
    loaded = wb.load_schedule(sch.save(tmp_path / "s.json"))
    assert loaded.trace.as_json() == sch.trace.as_json()
    assert wb.structural_equal(loaded.mod, sch.mod)


def test_module_with_several_functions(tmp_path):
    mod = wb.IRModule.from_funcs(wb.workloads.matmul(16, 16, 16),
                                 wb.workloads.transpose(8, 12))
    sch = wb.Schedule(mod)
    sch.work_on("transpose")
    j, i = sch.get_loops(sch.get_block("B"))
    sch.reorder(i, j)
    sf = wb.read_schedule_file(sch.save(tmp_path / "two.json"))
    assert sf.func_name == "transpose"
    loaded = sf.schedule()
    assert loaded.mod.names == ["matmul", "transpose"]
    assert wb.structural_equal(loaded.mod, sch.mod)


def _saved(tmp_path) -> tuple[Path, dict]:
    path = mlc_schedule().save(tmp_path / "s.json")
    return path, json.loads(Path(path).read_text())


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("module"), 'missing field "module"'),
    (lambda d: d.update(format="something-else"), "not a schedule file"),
    (lambda d: d.update(version=99), "newer than this workbench reads"),
    (lambda d: d.update(version="1"), 'field "version" must be int'),
    (lambda d: d.update(trace="nope"), 'field "trace" must be list'),
    (lambda d: d["trace"][0].append(["NoSuchKind", [], [], []]), "unknown instruction kind"),
    (lambda d: d.update(syntax="tvm"), 'field "syntax"'),
])
def test_malformed_files_are_refused_by_field(tmp_path, change, message):
    path, data = _saved(tmp_path)
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ScheduleFileError, match=message) as err:
        wb.load_schedule(path)
    assert str(path) in str(err.value)


def test_trace_that_does_not_replay_names_the_step(tmp_path):
    path, data = _saved(tmp_path)
    data["module"] = wb.IRModule.from_funcs(wb.workloads.matmul(32, 32, 32)).script(
        syntax="tirx")  # no block "Y" in a plain matmul
    data["func_name"] = "matmul"
    path.write_text(json.dumps(data))
    with pytest.raises(ScheduleFileError, match=r"does not replay: .*step 0"):
        wb.load_schedule(path)


def test_result_hash_catches_a_changed_module(tmp_path):
    path, data = _saved(tmp_path)
    assert "T.max(Y[vi, vj], T.float32(0))" in data["module"]
    data["module"] = data["module"].replace("T.float32(0))", "T.float32(1))")
    path.write_text(json.dumps(data))
    with pytest.raises(ScheduleFileError, match="gives a different module"):
        wb.load_schedule(path)
    relaxed = wb.load_schedule(path, check=False)
    assert "T.float32(1)" in relaxed.mod.script()


def test_nothing_in_a_file_is_executed(tmp_path):
    marker = tmp_path / "pwned"
    payload = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    path, data = _saved(tmp_path)
    data["module"] = data["module"].replace(
        "def mm_relu(", f"def mm_relu(z={payload}, ", 1)
    data["note"] = payload
    path.write_text(json.dumps(data))
    with pytest.raises(ScheduleFileError, match='"module" does not parse'):
        wb.load_schedule(path)
    assert not marker.exists()


def test_missing_file_and_bare_trace_file(tmp_path):
    with pytest.raises(ScheduleFileError, match="no such file"):
        wb.load_schedule(tmp_path / "absent.json")
    bare = tmp_path / "trace.json"
    mlc_schedule().trace.save(bare)
    assert not is_schedule_file(bare)
    with pytest.raises(ScheduleFileError, match="a bare trace loads with wb.Trace.load"):
        wb.load_schedule(bare)


def test_read_trace_source_kinds(tmp_path):
    sch = mlc_schedule()
    path = sch.save(tmp_path / "s.json")
    bare = tmp_path / "t.json"
    sch.trace.save(bare)
    for source in (path, str(path), parse_schedule_file(Path(path).read_text())):
        trace, sf = read_trace_source(source)
        assert sf is not None and trace.script() == sch.trace.script()
    for source in (bare, str(bare), sch.trace.as_json(), sch.trace.script(), sch):
        trace, sf = read_trace_source(source)
        assert sf is None and trace.script() == sch.trace.script()
    with pytest.raises(FileNotFoundError, match="no such file: missing_trace.json"):
        read_trace_source("missing_trace.json")


# ---------------------------------------------------------------------------- views


def test_editor_opens_and_saves_schedule_files(tmp_path):
    sch = mlc_schedule()
    path = sch.save(tmp_path / "s.json")
    editor = ScheduleEditor(str(path))
    assert wb.structural_equal(editor.model.schedule.mod, sch.mod)
    assert editor.trace_text and "sch.decompose_reduction" in editor.trace_text
    # the file's trace is one step per instruction that changes the schedule: Undo walks
    # back through them to the function, Redo forward again
    changing = [i for i in sch.trace.insts
                if i.kind not in ("GetBlock", "GetLoops") and not i.spec.sampling]
    assert editor.model.step == len(changing) > 1
    editor.reset()
    assert wb.structural_equal(editor.model.func, wb.workloads.mm_relu(32, 32, 32))
    while editor.redo():
        pass
    assert wb.structural_equal(editor.model.schedule.mod, sch.mod)
    editor.apply("parallel", loop="i")
    out = tmp_path / "edited.json"
    editor.save_schedule(str(out))
    again = wb.load_schedule(out)
    assert wb.structural_equal(again.mod, editor.model.schedule.mod)


def test_editor_load_refuses_a_schedule_of_another_function(tmp_path):
    other = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    path = other.save(tmp_path / "matmul.json")
    editor = ScheduleEditor(wb.workloads.mm_relu(32, 32, 32))
    before = editor.model.schedule.mod.script()
    assert not editor.load_trace(str(path))
    assert "differs from this editor's starting function" in editor.error
    assert editor.model.schedule.mod.script() == before
    # a schedule file of the same function loads as one step
    assert editor.load_trace(mlc_schedule().save(tmp_path / "same.json"))
    assert wb.structural_equal(editor.model.schedule.mod, mlc_schedule().mod)


def test_stepper_opens_schedule_and_trace_files(tmp_path):
    sch = mlc_schedule()
    path = sch.save(tmp_path / "s.json")
    stepper = TraceStepper(str(path))  # the file brings its function
    assert stepper.model.num_steps == len(sch.trace)
    assert stepper.model.text(len(sch.trace)) == sch.func.script()
    bare = tmp_path / "trace.json"
    sch.trace.save(bare)
    from_bare = TraceStepper(str(bare), wb.workloads.mm_relu(32, 32, 32))
    assert from_bare.model.text(len(sch.trace)) == sch.func.script()
    with pytest.raises(TypeError, match="bare trace: it does not carry the function"):
        TraceStepper(str(bare))


def test_dashboard_saves_and_opens_schedule_files(tmp_path):
    func = wb.workloads.matmul(16, 16, 16)
    fast = wb.Schedule(func)
    fast.split(fast.get_loops(fast.get_block("C"))[1], factors=[None, 4])
    dash = TuningDashboard.live(func, peak=100.0)
    dash.add_trial(Trial(0, wb.Schedule(func).trace, "ok", 3e-6, "", "a"))
    dash.add_trial(Trial(1, fast.trace, "ok", 1e-6, "", "b"))
    dash.select(1)
    dash.save_path.value = str(tmp_path / "best.json")
    dash.save_button.click()
    assert "saved" in dash.message.value
    sf = wb.read_schedule_file(tmp_path / "best.json")
    assert sf.measurement == {"median": 1e-6} and sf.trace.script() == fast.trace.script()
    slow = DashboardModel.live(func, peak=100.0)
    slow.add_trial(Trial(0, wb.Schedule(func).trace, "ok", 3e-6, "", "a"))
    second = slow.save_schedule(tmp_path / "slow.json")
    opened = TuningDashboard([tmp_path / "best.json", second])
    assert len(opened.model) == 2 and opened.model.best.decisions == "best.json"
    assert opened.model.best.latency == 1e-6


def test_database_exports_records_and_opens_without_the_function(tmp_path):
    func = wb.workloads.matmul(16, 16, 16)
    sch = wb.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 4])
    db = wb.Database(tmp_path / "db")
    db.commit(func, wb.Schedule(func).trace,
              wb.Measurement(samples=(5e-6, 5e-6), number=1, repeat=2))
    db.commit(func, sch.trace, wb.Measurement(samples=(2e-6, 3e-6, 2e-6), number=1, repeat=3))
    by_index = wb.read_schedule_file(db.export_schedule(1, tmp_path / "r1.json"))
    assert by_index.measurement["median"] == 2e-6 and by_index.target == "c"
    assert wb.structural_equal(by_index.schedule().mod, sch.mod)
    best = wb.load_schedule(db.export_schedule(func, tmp_path / "best.json"))
    assert wb.structural_equal(best.mod, sch.mod)
    with pytest.raises(LookupError, match="no record 5"):
        db.export_schedule(5, tmp_path / "x.json")
    dash = TuningDashboard(tmp_path / "db")  # one workload: its script is parsed
    assert len(dash.model) == 2 and dash.model.best.latency == 2e-6


def test_editor_opens_pasted_tvmscript():
    text = wb.workloads.mm_relu(16, 16, 16).script(syntax="tirx")
    editor = ScheduleEditor(text)
    assert wb.structural_equal(editor.model.func, wb.workloads.mm_relu(16, 16, 16))
    assert editor.apply("split", loop="j", factors=[None, 4])
    with pytest.raises(wb.script.ParseError, match="line"):
        ScheduleEditor("@T.prim_func\ndef f(A: T.Buffer((4,), 'float32')):\n    while True: pass\n")


EXTERN_MODULE = '''
@T.prim_func
def calls_out(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("A"):
            vi = T.axis.spatial(4, i)
            A[vi] = T.call_extern("float32", "my_hook", A[vi])
'''


def test_extern_calls_in_a_file_need_consent(tmp_path):
    func = wb.from_script(EXTERN_MODULE)
    sch = wb.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("A"))[0], factors=[None, 2])
    path = sch.save(tmp_path / "extern.json")
    with pytest.raises(ScheduleFileError, match=r"calls external functions \['my_hook'\]"):
        wb.load_schedule(path)
    with pytest.raises(wb.ScheduleFileError, match="allow_extern=True"):
        ScheduleEditor(str(path))
    loaded = wb.load_schedule(path, allow_extern=True)
    assert wb.structural_equal(loaded.mod, sch.mod)


def test_dashboard_refuses_a_database_workload_with_extern_calls(tmp_path):
    func = wb.from_script(EXTERN_MODULE)
    db = wb.Database(tmp_path / "db")
    db.commit(func, wb.Schedule(func).trace,
              wb.Measurement(samples=(1e-6,), number=1, repeat=1))
    with pytest.raises(ValueError, match=r"calls external functions \['my_hook'\]"):
        TuningDashboard(tmp_path / "db")
    assert len(TuningDashboard(tmp_path / "db", func).model) == 1  # given by the user: fine
