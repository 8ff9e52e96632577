"""Hostile traces: every loader refuses input past its bounds with its own error.

Trace JSON (text, bytes or the parsed list), ``def apply_trace`` text, trace files,
schedule files and what a view is handed (``read_trace_source``) never raise a raw
Python error (RecursionError, ValueError from the int-string limit, UnicodeDecodeError)
and never hang: they raise ``TraceError`` (``ScheduleFileError`` for schedule files)
naming the step or line at fault. Decisions that name no step, or cannot fit their
step, are refused too.
"""

from __future__ import annotations

import json
import os

import pytest

import workbench as wb
from workbench.schedule.file import (
    ScheduleFileError,
    is_schedule_file,
    load_schedule,
    parse_schedule_file,
    read_trace_source,
)
from workbench.schedule.limits import MAX_DEPTH, MAX_INT_DIGITS, MAX_TEXT_BYTES

FUNC = wb.workloads.matmul(16, 16, 16)
GET_BLOCK = '["GetBlock", [], ["C", "matmul"], ["b0"]]'


def annotate_json(value_text: str) -> str:
    """A two-step trace whose second step annotates block C with ``value_text``."""
    return f'[[{GET_BLOCK}, ["Annotate", ["b0", {value_text}], ["k"], []]], []]'


def annotate_python(value_text: str) -> str:
    return ("def apply_trace(sch):\n"
            '  b0 = sch.get_block(name="C", func_name="matmul")\n'
            f'  sch.annotate(block_or_loop=b0, ann_key="k", ann_val={value_text})\n')


def nested_list(depth: int) -> list:
    value: list = [1]
    for _ in range(depth - 1):
        value = [value]
    return value


# ---------------------------------------------------------------------------
# trace JSON


@pytest.mark.parametrize("depth", [500, 100_000])
def test_json_nested_deep_is_refused_naming_the_step(depth):
    text = annotate_json("[" * depth + "1" + "]" * depth)
    with pytest.raises(wb.TraceError, match=rf"step 1: nested deeper than {MAX_DEPTH} levels"):
        wb.Trace.from_json(text)
    with pytest.raises(wb.TraceError, match="step 1: nested deeper"):
        wb.Trace.from_json(text.encode())


def test_parsed_list_nested_deep_is_refused_naming_the_step():
    doc = json.loads(annotate_json("0"))
    doc[0][1][1][1] = nested_list(500)
    with pytest.raises(wb.TraceError, match="step 1: nested deeper"):
        wb.Trace.from_json(doc)


def test_nesting_within_the_bound_still_loads():
    value = "[" * (MAX_DEPTH - 5) + "1" + "]" * (MAX_DEPTH - 5)
    trace = wb.Trace.from_json(annotate_json(value))
    assert len(trace) == 2


def test_json_huge_integer_is_refused_naming_the_step():
    for text in (annotate_json("9" * 5000), annotate_json("-" + "9" * 101)):
        with pytest.raises(wb.TraceError, match=rf"step 1: an integer of \d+ digits "
                                                rf"\(at most {MAX_INT_DIGITS}\)"):
            wb.Trace.from_json(text)
    doc = json.loads(annotate_json("0"))
    doc[0][1][1][1] = [10**5000]
    with pytest.raises(wb.TraceError, match="step 1: an integer of over"):
        wb.Trace.from_json(doc)
    assert len(wb.Trace.from_json(annotate_json("9" * MAX_INT_DIGITS))) == 2


def test_json_non_utf8_bytes_and_oversized_text_are_refused():
    with pytest.raises(wb.TraceError, match=r"not UTF-8 text .*line 1, column 22"):
        wb.Trace.from_json(b'[[["GetBlock", [], ["\xff\xfe", "m"], ["b0"]]], []]')
    huge = "[[]" + " " * MAX_TEXT_BYTES + ", []]"
    with pytest.raises(wb.TraceError, match="more than the .* bytes a document may have"):
        wb.Trace.from_json(huge)


def test_json_unsupported_python_value_is_refused():
    doc = json.loads(annotate_json("0"))
    doc[0][1][1][1] = {1, 2}
    with pytest.raises(wb.TraceError, match="step 1: unsupported value of type set"):
        wb.Trace.from_json(doc)


# ---------------------------------------------------------------------------
# Python text


def test_python_text_with_thousands_of_minus_signs_is_refused_naming_the_line():
    with pytest.raises(wb.TraceError, match=r"nested too deeply \(line 3\)"):
        wb.Trace.from_python(annotate_python("-" * 5000 + "1"))


def test_python_text_minus_signs_are_one_sign_on_a_number():
    assert wb.Trace.from_python(annotate_python("-3"))[1].arg("ann_val") == -3
    with pytest.raises(wb.TraceError, match=r"step 1: unsupported argument `--3`"):
        wb.Trace.from_python(annotate_python("--3"))
    with pytest.raises(wb.TraceError, match=r"step 1"):
        wb.Trace.from_python(annotate_python("-" * 150 + "3"))


def test_python_text_nested_past_the_bound_is_refused_naming_the_step():
    value = "[" * 150 + "1" + "]" * 150  # Python's parser takes this; the loader must not
    with pytest.raises(wb.TraceError, match=rf"step 1 \(line 3\): an argument nested deeper "
                                            rf"than {MAX_DEPTH}"):
        wb.Trace.from_python(annotate_python(value))


def test_python_text_huge_integers_are_refused():
    with pytest.raises(wb.TraceError, match=f"step 1: an integer of more than {MAX_INT_DIGITS}"):
        wb.Trace.from_python(annotate_python("9" * 200))
    with pytest.raises(wb.TraceError, match="not valid Python"):
        wb.Trace.from_python(annotate_python("9" * 5000))


def test_python_text_non_literal_constants_are_refused():
    with pytest.raises(wb.TraceError, match="step 1: unsupported constant"):
        wb.Trace.from_python(annotate_python("b'xy'"))
    with pytest.raises(wb.TraceError, match="step 1: unsupported constant"):
        wb.Trace.from_python(annotate_python("1j"))


def test_python_text_long_unsupported_expression_is_shortened_in_the_message():
    value = "x" * 5000 + " + 1"
    with pytest.raises(wb.TraceError, match=r"step 1: unsupported argument `x+\.\.\.`") as info:
        wb.Trace.from_python(annotate_python(value))
    assert len(str(info.value)) < 200


# ---------------------------------------------------------------------------
# files


def test_trace_load_refuses_non_utf8_files_naming_the_file(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b'[[["GetBlock", [], ["\xff", "matmul"], ["b0"]]], []]')
    with pytest.raises(wb.TraceError, match=r"t\.json: not UTF-8 text"):
        wb.Trace.load(path)
    py = tmp_path / "t.py"
    py.write_bytes(b"def apply_trace(sch):\n  pass  # \xe9\n")
    with pytest.raises(wb.TraceError, match=r"t\.py: not UTF-8 text .*line 2"):
        wb.Trace.load(py)


def test_trace_load_names_the_file_for_bad_content(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(annotate_json("[" * 500 + "]" * 500))
    with pytest.raises(wb.TraceError, match=r"deep\.json: step 1: nested deeper"):
        wb.Trace.load(path)
    py = tmp_path / "minus.py"
    py.write_text(annotate_python("-" * 5000 + "1"))
    with pytest.raises(wb.TraceError, match=r"minus\.py: trace text is not valid Python"):
        wb.Trace.load(py)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_trace_load_refuses_a_fifo_instead_of_blocking(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    with pytest.raises(wb.TraceError, match="not a regular file"):
        wb.Trace.load(fifo)
    assert not is_schedule_file(fifo)


def schedule_file_text(trace_text: str) -> str:
    sch = wb.Schedule(FUNC)
    return ('{"format": "workbench-schedule", "version": 1, "module": '
            + json.dumps(sch.mod.script()) + ', "trace": ' + trace_text + "}")


def test_schedule_file_with_deep_or_huge_trace_values_names_field_and_step():
    deep = schedule_file_text(annotate_json("[" * 500 + "]" * 500))
    with pytest.raises(ScheduleFileError, match=r'field "trace", step 1: nested deeper'):
        parse_schedule_file(deep)
    big = schedule_file_text(annotate_json("9" * 5000))
    with pytest.raises(ScheduleFileError, match=r'field "trace", step 1: an integer of 5000'):
        parse_schedule_file(big)
    version = schedule_file_text("[[], []]").replace('"version": 1', '"version": ' + "9" * 5000)
    with pytest.raises(ScheduleFileError, match=r'field "version": an integer'):
        parse_schedule_file(version)
    doc = json.loads(schedule_file_text("[[], []]"))
    doc["note"] = nested_list(500)
    with pytest.raises(ScheduleFileError, match=r'field "note": nested deeper'):
        parse_schedule_file(doc)


def test_schedule_file_loaders_refuse_non_utf8(tmp_path):
    path = tmp_path / "s.json"
    path.write_bytes(schedule_file_text("[[], []]").encode().replace(b"matmul", b"m\xffm", 1))
    with pytest.raises(ScheduleFileError, match=r"s\.json: not UTF-8 text"):
        load_schedule(path)
    assert not is_schedule_file(path)
    with pytest.raises(ScheduleFileError, match="not UTF-8 text"):
        parse_schedule_file(path.read_bytes())
    with pytest.raises(wb.TraceError, match="not UTF-8 text"):
        read_trace_source(b"[[], \xff]")
    with pytest.raises(wb.TraceError, match="step 1: nested deeper"):
        read_trace_source(annotate_json("[" * 500 + "]" * 500))


def test_schedule_file_within_bounds_still_loads(tmp_path):
    sch = wb.Schedule(FUNC)
    sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 4])
    path = sch.save(tmp_path / "ok.json")
    assert wb.structural_equal(load_schedule(path).mod, sch.mod)


# ---------------------------------------------------------------------------
# decisions


CATEGORICAL = '["SampleCategorical", [], [[1, 2, 3], [0.3, 0.3, 0.4]], ["v0"]]'
TILE = (f'[{GET_BLOCK}, ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]], '
        '["SamplePerfectTile", ["l2"], [2, 16], ["v4", "v5"]]]')


@pytest.mark.parametrize("decisions, message", [
    ("[[0, 7]]", r"step 0: decision 7 is not an index into the 3 candidates \[1, 2, 3\]"),
    ("[[0, -1]]", r"step 0: decision -1 is not an index"),
    ("[[0, true]]", r"step 0: decision True is not an index"),
    ("[[0, 1.0]]", r"step 0: decision 1.0 is not an index"),
    ("[[5, 1]]", r"decision entry 0: step 5 is out of range \(the trace has 1 step"),
    ("[[-1, 1]]", r"decision entry 0: step -1 is out of range"),
    ("[[false, 1]]", r"decision entry 0: malformed"),
    ("[[0, 1], [0, 2]]", r"decision entry 1: a second decision for step 0"),
])
def test_categorical_decisions_out_of_range_are_refused(decisions, message):
    with pytest.raises(wb.TraceError, match=message):
        wb.Trace.from_json(f"[[{CATEGORICAL}], {decisions}]")


def test_categorical_decision_out_of_range_in_python_text():
    text = "v0 = sch.sample_categorical(candidates=[1, 2, 3], probs=[0.3, 0.3, 0.4], decision=7)"
    with pytest.raises(wb.TraceError, match="step 0: decision 7 is not an index"):
        wb.Trace.from_python(text)


def test_perfect_tile_decision_of_the_wrong_length_or_product_is_refused():
    with pytest.raises(wb.TraceError, match=r"step 2: decision \[4, 2, 2\] has 3 tile sizes, n=2"):
        wb.Trace.from_json(f"[{TILE}, [[2, [4, 2, 2]]]]")
    with pytest.raises(wb.TraceError, match="step 2: decision 8 is not a list of tile sizes"):
        wb.Trace.from_json(f"[{TILE}, [[2, 8]]]")
    wrong_product = wb.Trace.from_json(f"[{TILE}, [[2, [4, 2]]]]")  # needs the loop's extent
    sch = wb.Schedule(FUNC)
    with pytest.raises(wb.TraceError, match=r"trace step 2 .*multiply to 8, not to the extent 16"):
        wrong_product.apply_to_schedule(sch)
    assert len(sch.trace) == 0


def test_compute_location_decision_out_of_range_is_refused():
    loc = f'[[{GET_BLOCK}, ["SampleComputeLocation", ["b0"], [], ["l1"]]], [[1, {{}}]]]'
    with pytest.raises(wb.TraceError, match="step 1: decision -3 is not a compute location"):
        wb.Trace.from_json(loc.format(-3))
    sch = wb.Schedule(FUNC)
    with pytest.raises(wb.TraceError, match=r"trace step 1 .*decision 9 is not a compute location"):
        wb.Trace.from_json(loc.format(9)).apply_to_schedule(sch)
    assert len(sch.trace) == 0
