"""Traces in and out of the browser: the Transfer widget (downloads to the user's
computer, uploads from it) and the editor's Trace tab built on it. The front end's
messages are played from Python (``handle_message``); what Python sends is captured."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import workbench as wb
from workbench.widgets import ScheduleEditor, TraceStepper
from workbench.widgets.transfer import MAX_UPLOAD_BYTES, Transfer, safe_file_name

STATIC = Path(wb.__file__).parent / "widgets" / "static" / "transfer.js"


def captured(transfer: Transfer) -> list[dict]:
    """The messages ``transfer`` sends to the front end from now on."""
    sent: list[dict] = []
    transfer.send = sent.append  # instead of the comm
    return sent


def scheduled() -> wb.Schedule:
    """mm_relu split, reordered, with a sampled tiling and the relu moved under a loop:
    four instructions that change the schedule, five lookups and samplings."""
    sch = wb.Schedule(wb.workloads.mm_relu(32, 32, 32))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    tiles = sch.sample_perfect_tile(i, n=2, decision=[4, 8])
    i0, _ = sch.split(i, factors=tiles)
    sch.reverse_compute_at(sch.get_block("C"), i0)
    return sch


CHANGING = ["sch.split", "sch.reorder", "sch.split", "sch.reverse_compute_at"]


def calls(steps: list[str]) -> list[str]:
    return [s.split(" = ")[-1].split("(")[0] for s in steps]


# ------------------------------------------------------------------ the widget


def test_download_sends_the_name_and_the_text():
    t = Transfer()
    sent = captured(t)
    message = t.download("mm_relu.trace.json", "[[], []]\n")
    assert sent == [message]
    assert message["type"] == "wb-download"
    assert message["name"] == "mm_relu.trace.json" and message["text"] == "[[], []]\n"
    again = t.download("x.json", "")
    assert again["id"] != message["id"]  # each download happens once per page


def test_download_names_are_plain_file_names():
    assert safe_file_name("../../etc/passwd") == "passwd"
    assert safe_file_name("a b\\c.json") == "c.json"
    assert safe_file_name("...") == "download.txt"
    with pytest.raises(TypeError, match="expected text"):
        Transfer().download("x.json", b"bytes")


def test_upload_hands_the_text_to_the_callbacks():
    t = Transfer()
    got, errors = [], []
    t.on_upload(lambda name, text: got.append((name, text)))
    t.on_error(errors.append)
    assert t.handle_message({"type": "wb-upload", "name": "t.py", "text": "def f(): pass"})
    assert got == [("t.py", "def f(): pass")] and errors == []
    assert not t.handle_message({"type": "something else"})
    assert not t.handle_message("not a dict")
    assert len(got) == 1


def test_upload_refuses_a_file_over_the_limit_in_python_too():
    t = Transfer()
    got, errors = [], []
    t.on_upload(lambda name, text: got.append(name))
    t.on_error(errors.append)
    big = "x" * (MAX_UPLOAD_BYTES + 1)
    assert not t.handle_message({"type": "wb-upload", "name": "big.json", "text": big})
    # the front end refused one before reading it
    assert not t.handle_message({"type": "wb-upload-error", "name": "huge.json",
                                 "size": 20 * 2**20})
    assert not t.upload("bin.json", b"\xff\xfe")
    assert got == []
    assert [str(e).split(":")[1].split()[0] for e in errors] == ["big.json", "huge.json",
                                                                  "bin.json"]
    assert "more than the 8.0 MiB" in str(errors[0]) and "20.0 MiB" in str(errors[1])
    assert "not UTF-8" in str(errors[2])


def test_the_widget_carries_the_dom_hooks_and_its_front_end():
    t = Transfer()
    assert {"wb-upload", "wb-transfer"} <= set(t._dom_classes)
    assert t.accept == ".json,.py,.txt" and t.max_bytes == 8 * 2**20
    assert t._esm == STATIC.read_text()


# ------------------------------------------------------------------ the editor's Trace tab


def test_editor_downloads_the_trace_and_the_schedule_file():
    editor = ScheduleEditor(wb.workloads.mm_relu(32, 32, 32))
    editor.apply("split", loop="j", factors=[None, 4])
    sent = captured(editor.trace_tab.transfer)
    assert editor.download_trace() == "mm_relu.trace.json"
    assert editor.download_schedule() == "mm_relu.schedule.json"
    trace_msg, schedule_msg = sent
    assert trace_msg["name"] == "mm_relu.trace.json"
    assert wb.Trace.from_json(trace_msg["text"]).script() == editor.trace.script()
    assert json.loads(trace_msg["text"])[0][0][0] == "GetSBlock"  # TVM >= 0.24 kinds
    data = json.loads(schedule_msg["text"])
    assert data["format"] == "workbench-schedule" and data["func_name"] == "mm_relu"
    assert len(data["steps"]["items"]) == len(editor.trace)
    sf = wb.schedule.file.parse_schedule_file(schedule_msg["text"])
    assert wb.structural_equal(sf.schedule().mod, editor.model.schedule.mod)
    assert "downloading mm_relu.schedule.json" in editor.trace_tab.status.value


def test_download_buttons_send_from_the_browser():
    editor = ScheduleEditor(wb.workloads.matmul(16, 16, 16))
    sent = captured(editor.trace_tab.transfer)
    editor.trace_tab.download_trace_button.click()
    editor.trace_tab.download_schedule_button.click()
    assert [m["name"] for m in sent] == ["matmul.trace.json", "matmul.schedule.json"]
    assert editor.error == ""


@pytest.mark.parametrize("kind", ["trace_json", "apply_trace", "schedule_file"])
def test_an_upload_replays_as_one_undo_step_per_changing_instruction(kind):
    sch = scheduled()
    name, text = {
        "trace_json": ("mm_relu.trace.json", sch.trace.as_json(syntax="tirx")),
        "apply_trace": ("mm_relu.py", sch.trace.script()),
        "schedule_file": ("mm_relu.schedule.json",
                          wb.schedule.file.make_schedule_file(sch.original, sch.trace).dumps()),
    }[kind]
    editor = ScheduleEditor(wb.workloads.mm_relu(32, 32, 32))
    assert editor.trace_tab.transfer.handle_message(
        {"type": "wb-upload", "name": name, "text": text})
    assert editor.error == ""
    assert calls(editor.model.steps) == CHANGING
    assert wb.structural_equal(editor.model.schedule.mod, sch.mod)
    assert f"loaded {name}: 4 undo steps" in editor.trace_tab.status.value
    # each step's description is its instruction, as the trace prints it
    assert editor.model.steps[0] == editor.trace.lines()[2]
    # Undo steps back through the loaded trace, one instruction at a time
    expected = wb.Schedule(wb.workloads.mm_relu(32, 32, 32))
    prefix = [inst for inst in sch.trace.insts]
    editor.undo()
    wb.Trace(prefix[:6]).apply_to_schedule(expected)  # up to the sampled split
    assert wb.structural_equal(editor.model.schedule.mod, expected.mod)
    for _ in range(3):
        editor.undo()
    assert wb.structural_equal(editor.model.func, wb.workloads.mm_relu(32, 32, 32))
    assert not editor.model.can_undo


def test_an_oversized_upload_shows_an_error_and_changes_nothing():
    editor = ScheduleEditor(wb.workloads.mm_relu(32, 32, 32))
    editor.apply("split", loop="j", factors=[None, 4])
    before = (editor.model.step, editor.model.schedule.mod.script())
    text = scheduled().trace.script() + "\n#" + "x" * MAX_UPLOAD_BYTES
    editor.trace_tab.transfer.handle_message({"type": "wb-upload", "name": "big.py",
                                              "text": text})
    assert "big.py is 8.0 MiB" in editor.error_html.value
    editor.trace_tab.transfer.handle_message({"type": "wb-upload-error", "name": "huge.json",
                                              "size": 9 * 2**20})
    assert "huge.json is 9.0 MiB" in editor.error_html.value
    assert (editor.model.step, editor.model.schedule.mod.script()) == before


@pytest.mark.parametrize("text, message", [
    ("{not json", "schedule file bad.json"),
    ('[["Split", ["l9"], {}, ["l10", "l11"]]]', "load"),
    ("import os\nos.system('true')", "load"),
    ("/etc/passwd", "load"),  # the text of an upload is never a file name on the server
])
def test_an_invalid_upload_shows_an_error_and_changes_nothing(text, message):
    editor = ScheduleEditor(wb.workloads.mm_relu(32, 32, 32))
    editor.apply("split", loop="j", factors=[None, 4])
    before = (editor.model.step, editor.model.schedule.mod.script())
    assert not editor.trace_tab.upload("bad.json", text)
    assert editor.error.startswith(message) or message in editor.error
    assert "no such file" not in editor.error
    assert editor.error_html.value
    assert (editor.model.step, editor.model.schedule.mod.script()) == before
    assert "loaded" not in editor.trace_tab.status.value


def test_an_upload_of_another_functions_schedule_is_refused():
    other = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    text = wb.schedule.file.make_schedule_file(other.original, other.trace).dumps()
    editor = ScheduleEditor(wb.workloads.mm_relu(32, 32, 32))
    assert not editor.trace_tab.upload("matmul.schedule.json", text)
    assert "differs from this editor's starting function" in editor.error
    assert editor.model.step == 0


def test_load_from_server_replays_as_undo_steps(tmp_path):
    sch = scheduled()
    path = sch.save(tmp_path / "s.json")
    editor = ScheduleEditor(wb.workloads.mm_relu(32, 32, 32))
    editor.trace_path.value = str(path)
    editor.load_button.click()
    assert calls(editor.model.steps) == CHANGING
    assert "loaded s.json: 4 undo steps" in editor.trace_status.value


def test_server_buttons_are_labelled_as_such(tmp_path):
    tab = ScheduleEditor(wb.workloads.matmul(16, 16, 16)).trace_tab
    assert tab.save_button.description == "Save trace on server"
    assert tab.save_button.icon == "server" and tab.save_schedule_button.icon == "server"
    assert tab.load_button.description == "Load from server"
    assert tab.download_trace_button.icon == "download"
    for button, css in [(tab.download_trace_button, "wb-download-trace"),
                        (tab.download_schedule_button, "wb-download-schedule"),
                        (tab.open_stepper_button, "wb-open-stepper")]:
        assert css in button._dom_classes


def test_open_in_stepper_shows_the_current_trace_inside_the_editor():
    editor = ScheduleEditor(wb.workloads.mm_relu(32, 32, 32))
    editor.apply("split", loop="j", factors=[None, 4])
    editor.apply("reorder", loops=["j_0", "k", "j_1"])
    box = editor.trace_tab.stepper_box
    assert box.layout.display == "none" and not box.children
    editor.trace_tab.open_stepper_button.click()
    stepper = editor.trace_tab.stepper
    assert isinstance(stepper, TraceStepper) and stepper in box.children
    assert box.layout.display is None and "wb-stepper-box" in box._dom_classes
    assert stepper.model.num_steps == len(editor.trace)
    assert stepper.model.text(stepper.model.num_steps) == editor.model.func.script()
    assert stepper.model.text(0) == wb.workloads.mm_relu(32, 32, 32).script()
    editor.trace_tab.close_stepper_button.click()
    assert box.layout.display == "none" and not box.children
    again = editor.open_in_stepper()
    assert again in box.children and editor.tabs.selected_index == 2


def test_open_in_stepper_starts_from_an_opened_schedule_files_function(tmp_path):
    sch = scheduled()
    editor = ScheduleEditor(sch.save(tmp_path / "s.json"))
    stepper = editor.open_in_stepper()
    assert stepper.model.text(0) == wb.workloads.mm_relu(32, 32, 32).script()
    assert wb.structural_equal(stepper.schedule.mod, sch.mod)


# ------------------------------------------------------------------ the front end


NODE_CHECK = r"""
const events = [];
class El {
  constructor(tag) { this.tag = tag; this.children = []; this.style = {}; this.listeners = {};
    const items = new Set();
    this.classList = { items, add: (...c) => c.forEach((x) => items.add(x)) }; }
  append(...kids) { this.children.push(...kids); }
  appendChild(k) { this.children.push(k); }
  addEventListener(name, fn) { this.listeners[name] = fn; }
  click() { if (this.tag === "a") events.push(["download", this.download, this.href]);
            else if (this.listeners.click) this.listeners.click(); else events.push(["dialog"]); }
  remove() {}
}
globalThis.document = { createElement: (t) => new El(t), body: new El("body") };
globalThis.Blob = class { constructor(parts) { this.text = parts.join(""); } };
globalThis.URL = { createObjectURL: (b) => "blob:" + b.text, revokeObjectURL() {} };
globalThis.FileReader = class { readAsText(f) { this.result = f.text; this.onload(); } };
const handlers = {};
const model = {
  values: { label: "Upload", button_tooltip: "t", accept: ".json,.py,.txt", disabled: false,
            max_bytes: 10 },
  get(k) { return this.values[k]; }, on(name, fn) { handlers[name] = fn; }, off() {},
  send(msg) { events.push(["send", msg]); },
};
globalThis.setTimeout = (fn) => fn();
const { default: widget } = await import(process.argv[2]);
const el = new El("div");
widget.render({ model, el });
const [button, input] = el.children;
const msg = { type: "wb-download", id: "a1", name: "f.trace.json", text: "[[], []]" };
handlers["msg:custom"](msg);
handlers["msg:custom"](msg);  // the same download seen again: ignored
button.listeners.click();
input.files = [{ name: "t.json", size: 8, text: "[[], []]" }];
input.listeners.change();
input.files = [{ name: "big.json", size: 11, text: "x".repeat(11) }];
input.listeners.change();
console.log(JSON.stringify({ events, classes: [...el.classList.items], type: input.type,
                             accept: input.accept }));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_front_end_downloads_once_uploads_and_refuses_large_files(tmp_path):
    script = tmp_path / "check.mjs"
    script.write_text(NODE_CHECK)
    module = tmp_path / "transfer.mjs"  # an ES module whatever package.json says
    module.write_text(STATIC.read_text())
    out = subprocess.run(["node", str(script), module.as_uri()], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["classes"] == ["wb-transfer", "wb-upload"]
    assert result["type"] == "file" and result["accept"] == ".json,.py,.txt"
    assert result["events"] == [
        ["download", "f.trace.json", "blob:[[], []]"],
        ["dialog"],
        ["send", {"type": "wb-upload", "name": "t.json", "text": "[[], []]"}],
        ["send", {"type": "wb-upload-error", "name": "big.json", "size": 11}],
    ]
