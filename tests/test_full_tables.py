"""The tables we return print every row, column and cell (pandas would cut them with "...")
and stay pandas DataFrames."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

import workbench as wb
from workbench.search.result import Trial, TuneResult


def _long_result(n: int = 120) -> TuneResult:
    func = wb.workloads.matmul(16, 16, 16)
    trace = wb.Schedule(func).trace
    decisions = "tile_i=[4, 2, 2], tile_j=[2, 2, 4], tile_k=[8, 2], unroll=64, vector=16"
    trials = [Trial(i, trace, "ok" if i % 7 else "build_error", 1e-6 * (i + 1) if i % 7 else None,
                    decisions + f" #{i}", f"hash{i:04d}",
                    error="" if i % 7 else "gcc: error: something long went wrong " * 3)
              for i in range(n)]
    return TuneResult(func, trials, flops=8192, wall_time=1.0)


def test_tune_result_table_prints_every_row_and_column():
    table = _long_result().table
    assert isinstance(table, pd.DataFrame)
    text = str(table)
    assert "..." not in text
    lines = text.splitlines()
    assert len(lines) == 1 + 120                      # header + every trial, one line each
    for column in table.columns:
        assert column in lines[0]
    assert "unroll=64, vector=16 #119" in text        # whole cells, the last row included
    assert ("gcc: error: something long went wrong " * 3).strip() in text


def test_derived_frames_print_in_full_too():
    table = _long_result().table
    ok = table[table.status == "ok"].sort_values("latency_ms")
    assert isinstance(ok, pd.DataFrame)
    assert "..." not in repr(ok) and len(repr(ok).splitlines()) == 1 + len(ok)
    assert "..." not in table._repr_html_()
    assert pd.get_option("display.max_rows") == 60    # the user's options are untouched


def test_database_table_prints_in_full(tmp_path):
    func = wb.workloads.matmul(16, 16, 16)
    db = wb.Database(tmp_path / "db")
    trace = wb.Schedule(func).trace
    for i in range(80):
        crash = SimpleNamespace(status="crash", measurement=None,
                                error=f"worker died: a long explanation of trial {i} " * 2)
        db.commit(func, trace, crash)
    text = str(db.table())
    assert "..." not in text
    assert len(text.splitlines()) == 1 + 80
    assert ("worker died: a long explanation of trial 79 " * 2).strip() in text


def test_dlight_report_table_prints_in_full():
    from workbench import dlight as dl

    report = dl.diagnose(wb.workloads.demo_mlp(), dl.gpu.Matmul(), dl.gpu.Fallback(),
                         target="cuda")
    text = str(report.table)
    assert len(text.splitlines()) == 1 + len(report.table)
    # the reasons a rule declined are long sentences: printed whole
    declined = [d for d in report.table["declined"] if len(d) > 50]
    assert declined and all(d in text for d in declined)
