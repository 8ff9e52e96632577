"""Hostile lines in a tuning database: each is skipped with a warning naming the file and
the line, and counted; the rest of the database stays usable from every entry point
(``Database.query_best``, ``TuneResult.from_database``, ``TuningDashboard(db, func)``).
"""

from __future__ import annotations

import json
import warnings

import pytest

import workbench as wb
from workbench.search import Database, DatabaseWarning
from workbench.search.result import TuneResult
from workbench.widgets.dashboard import TuningDashboard

FUNC = wb.workloads.matmul(16, 16, 16)


def good_schedule() -> wb.Schedule:
    sch = wb.Schedule(FUNC)
    sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 4])
    return sch


def record_line(trace_text: str, seconds: float = 1e-9) -> str:
    """A records.jsonl line for workload 0 with the given trace JSON text, faster than
    any real record (so it would be the best one)."""
    return ('{"workload": 0, "trace": ' + trace_text + ', "run_secs": [' + repr(seconds)
            + '], "status": "ok"}')


GET_BLOCK = '["GetBlock", [], ["\\"C\\"", "\\"matmul\\""], ["b0"]]'


def annotate_trace(value_text: str) -> str:
    return f'[[{GET_BLOCK}, ["Annotate", ["b0", {value_text}], ["\\"k\\""], []]], []]'


HOSTILE = {
    "deep": record_line(annotate_trace("[" * 500 + "1" + "]" * 500)).encode(),
    "very deep": record_line(annotate_trace("[" * 100_000 + "]" * 100_000)).encode(),
    "huge integer": record_line(annotate_trace("9" * 5000)).encode(),
    "not UTF-8": record_line('[[["GetBlock", [], ["\\"C\\"", "\\"m\xff\\""], ["b0"]]], []]')
    .encode("latin-1"),
}
EXPECTED = {
    "deep": "nested deeper than 64 levels",
    "very deep": "nested deeper than 64 levels",
    "huge integer": "an integer of 5000 digits",
    "not UTF-8": "not UTF-8 text",
}


def database_with(tmp_path, *lines: bytes) -> tuple[Database, wb.Schedule]:
    sch = good_schedule()
    db = Database(tmp_path)
    db.commit(FUNC, sch.trace, wb.Measurement(samples=(2e-6,), number=1, repeat=1))
    with open(db.records_path, "ab") as f:
        for line in lines:
            f.write(line + b"\n")
    return db, sch


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_line_is_skipped_by_every_entry_point(tmp_path, kind):
    _, sch = database_with(tmp_path, HOSTILE[kind])
    with pytest.warns(DatabaseWarning, match=r"records\.jsonl line 2: " + EXPECTED[kind]):
        db = Database(tmp_path)
    assert db.skipped == 1 and len(db.records()) == 1
    assert "records.jsonl line 2" in db.problems[0]
    best = db.query_best(FUNC)
    assert best is not None and wb.structural_equal(best.mod, sch.mod)
    with pytest.warns(DatabaseWarning, match="line 2"):
        result = TuneResult.from_database(tmp_path, FUNC)
    assert len(result.trials) == 1 and result.best.latency == 2e-6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatabaseWarning)
        dash = TuningDashboard(db, FUNC)
        dash_from_folder = TuningDashboard(Database(tmp_path), FUNC)
    assert len(dash.model.trials) == 1 and len(dash_from_folder.model.trials) == 1


def test_the_step_of_a_hostile_trace_is_named(tmp_path):
    database_with(tmp_path, HOSTILE["deep"])
    with pytest.warns(DatabaseWarning, match=r"line 2: nested deeper .* in field trace, step 1"):
        Database(tmp_path)


def test_all_hostile_lines_at_once_are_counted(tmp_path):
    database_with(tmp_path, *HOSTILE.values())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = Database(tmp_path)
    assert db.skipped == len(HOSTILE) and len(db.records()) == 1
    [warning] = [w for w in caught if issubclass(w.category, DatabaseWarning)]
    assert f"skipped {len(HOSTILE)} corrupt line(s)" in str(warning.message)
    assert [p.split(":")[0] for p in db.problems] == [
        f"records.jsonl line {n}" for n in range(2, 2 + len(HOSTILE))]


def test_an_unreadable_best_trace_is_passed_over_by_query_best(tmp_path):
    # a record this version cannot read (an unknown instruction), faster than the rest
    db, sch = database_with(tmp_path, record_line('[[["TeleportLoop", [], [], []]], []]')
                            .encode())
    db = Database(tmp_path)
    assert db.skipped == 0 and len(db.records()) == 2  # kept: a newer version reads it
    with pytest.warns(DatabaseWarning, match=r"records\.jsonl line 2 passed over.*TeleportLoop"):
        best = db.query_best(FUNC)
    assert best is not None and wb.structural_equal(best.mod, sch.mod)
    result = TuneResult.from_database(db, FUNC)
    assert len(result.trials) == 1 and result.rejected == 1
    assert len(TuningDashboard(db, FUNC).model.trials) == 1


def test_a_line_past_the_size_bound_is_skipped(tmp_path):
    from workbench.schedule.limits import MAX_TEXT_BYTES

    padding = json.dumps("x" * MAX_TEXT_BYTES)
    line = record_line(annotate_trace(padding)).encode()
    database_with(tmp_path, line)
    with pytest.warns(DatabaseWarning, match="line 2: .*bytes a document may have"):
        db = Database(tmp_path)
    assert db.skipped == 1 and len(db.records()) == 1
