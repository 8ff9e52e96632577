"""unsafe_set_dtype, annotate_buffer_access and remove_rv: behaviour beyond the IR pairs
of ``test_schedule_padding.py`` (which also runs their IR, trace, numerics and TVM
cases), and one ``test_<prim>_fail_<reason>`` per refusal."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.schedule import RemovedHandleError
from workbench.schedule.errors import InvalidScheduleArgumentError
from workbench.schedule.primitives.buffer_access import InvalidRegionMapError
from workbench.schedule.primitives.cache import (
    BufferIndexOutOfRangeError,
    NonAllocatedBufferError,
)
from workbench.schedule.primitives.set_dtype import InvalidDTypeError
from workbench.testing import (
    assert_schedule_error,
    chain_func,
    matmul_func,
    roundtrip_trace,
)


def annotate_read_write(sch):
    b = sch.get_block("C")
    sch.annotate_buffer_access(b, 0, "read", lambda vi, vj: ((vi - 1, vi + 2), (vj - 1, vj + 2)))
    sch.annotate_buffer_access(b, 0, "write", lambda vi, vj: ((vi, vi + 2), vj))


def test_unsafe_set_dtype_float16_numerics():
    """float16 storage: the result is the float32 one up to float16 rounding."""
    func = chain_func(8)
    sch = wb.Schedule(func)
    sch.unsafe_set_dtype("B", 0, "float16")
    a = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    d = np.zeros((8, 8), np.float32)
    wb.build(sch.mod)(a, d)
    want = np.maximum(a.astype(np.float16).astype(np.float32) * 2 + 1, 0)
    np.testing.assert_allclose(d, np.maximum(a * 2 + 1, 0), rtol=2e-3, atol=2e-3)
    assert np.abs(d - want).max() < 2e-2


def test_unsafe_set_dtype_trace_and_same_dtype():
    func = chain_func(8)
    sch = wb.Schedule(func)
    sch.unsafe_set_dtype("B", 0, "float32")
    assert sch.mod["chain"] is func  # the dtype it has: nothing changes
    sch.unsafe_set_dtype("B", 0, "float16")
    assert sch.trace.as_json_obj()[0][-1] == ["UnsafeSetDType", ["b1"], [0, "float16"], []]
    assert sch.trace.lines()[-1] == (
        'sch.unsafe_set_dtype(block=b1, buffer_index=0, dtype="float16")')


def test_unsafe_set_dtype_through_match_buffer_views():
    text = """
from tvm.script import tirx as T
@T.prim_func(s_tir=True)
def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.sblock_alloc_buffer((8, 8), dtype="float32")
    for i, j in T.grid(8, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B_sub0 = T.match_buffer(B[vi, vj], [], offset_factor=1)
            B_sub0[()] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 8):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            B_sub1 = T.match_buffer(B[vi, vj], [], offset_factor=1)
            C[vi, vj] = B_sub1[()] + 1.0
"""
    func = wb.from_script(text)
    sch = wb.Schedule(func)
    sch.unsafe_set_dtype("B", 0, "float64")
    views = [m.buffer.dtype for b in wb.ir.iter_blocks(sch.func.body) for m in b.match_buffers]
    assert views == ["float64", "float64"]
    assert 'B_sub0[()] = T.Cast("float64", A[vi, vj] * T.float32(2))' in sch.func.script()
    roundtrip_trace(sch, func)


def test_annotate_buffer_access_twice_replaces_the_region():
    sch = wb.Schedule(chain_func(8))
    b = sch.get_block("C")
    sch.annotate_buffer_access(b, 0, "read", lambda vi, vj: ((vi - 1, vi + 2), (vj - 1, vj + 2)))
    sch.annotate_buffer_access(b, 0, "read", lambda vi, vj: ((vi - 2, vi + 3), (vj - 2, vj + 3)))
    blk = sch.get(b)
    assert [(str(m), str(e)) for m, e in blk.reads[0].region] == [("vi - 2", "5"),
                                                                  ("vj - 2", "5")]
    assert dict(blk.annotations) == {"explicit_read_region": (0,)}


def test_annotate_buffer_access_text_and_index_map_forms():
    texts = []
    for gen in ("lambda vi, vj: [(vi - 1, vi + 1), vj]",
                wb.IndexMap.parse("lambda a, b: (a - 1, a + 1, b, b + 1)")):
        sch = wb.Schedule(chain_func(8))
        sch.annotate_buffer_access("B", 0, "read", gen)
        texts.append(sch.func.script())
    assert texts[0] == texts[1]
    assert "T.reads(A[vi - 1:vi + 1, vj])" in texts[0]


def test_annotate_buffer_access_region_survives_a_body_rewrite():
    """cache_read rewrites the annotated block's body; its explicit region stays (on the
    cache buffer now) instead of being derived again."""
    sch = wb.Schedule(chain_func(8))
    sch.annotate_buffer_access("C", 0, "read", lambda vi, vj: ((vi, vi + 2), vj))
    sch.cache_read("C", 0, "local")
    blk = sch.get(sch.get_block("C"))
    assert blk.reads[0].buffer.name == "B_local"
    assert [str(e) for _, e in blk.reads[0].region] == ["2", "1"]


def test_annotate_buffer_access_script_roundtrip():
    """The parser takes regions marked explicit from the text (as TVM does)."""
    sch = wb.Schedule(chain_func(8))
    annotate_read_write(sch)
    back = wb.from_script(sch.func.script())
    assert back.script() == sch.func.script()


def test_remove_rv():
    sch = wb.Schedule(matmul_func(8, 8, 8))
    b = sch.get_block("C")
    loops = sch.get_loops(b)
    n = len(sch.trace)
    sch.remove_rv(b)
    sch.remove_rv(loops[0])
    assert len(sch.trace) == n  # TVM records no instruction for it
    with pytest.raises(RemovedHandleError, match="get_loops: BlockRV.* dropped by remove_rv"):
        sch.get_loops(b)
    with pytest.raises(IndexError, match="split"):  # TVM raises IndexError too
        sch.split(loops[0], [2, 4])
    with pytest.raises(RemovedHandleError):
        sch.copy().get(b)  # a copy keeps the record
    sch.split(loops[1], [2, 4])  # other handles still work


def test_remove_rv_fail_unknown_handle():
    sch = wb.Schedule(matmul_func(8, 8, 8))
    b = sch.get_block("C")
    sch.remove_rv(b)
    assert_schedule_error(sch, lambda: sch.remove_rv(b), InvalidScheduleArgumentError)
    other = wb.Schedule(matmul_func(8, 8, 8)).get_block("C")
    assert_schedule_error(sch, lambda: sch.remove_rv(other), InvalidScheduleArgumentError)


def test_unsafe_set_dtype_fail_output_buffer():
    sch = wb.Schedule(chain_func(8))
    assert_schedule_error(sch, lambda: sch.unsafe_set_dtype("D", 0, "float16"),
                          NonAllocatedBufferError, "D")


def test_unsafe_set_dtype_fail_index_out_of_range():
    sch = wb.Schedule(chain_func(8))
    for index in (1, -1):
        assert_schedule_error(sch, lambda index=index: sch.unsafe_set_dtype("B", index, "float64"),
                              BufferIndexOutOfRangeError, "B")


def test_unsafe_set_dtype_fail_unknown_dtype():
    sch = wb.Schedule(chain_func(8))
    assert_schedule_error(sch, lambda: sch.unsafe_set_dtype("B", 0, "float13"),
                          InvalidDTypeError, "B")


def test_annotate_buffer_access_fail_bad_buf_type():
    sch = wb.Schedule(chain_func(8))
    assert_schedule_error(
        sch, lambda: sch.annotate_buffer_access("B", 0, "readwrite", lambda i, j: (i, j)),
        InvalidScheduleArgumentError, "B")


def test_annotate_buffer_access_fail_index_out_of_range():
    sch = wb.Schedule(chain_func(8))
    assert_schedule_error(
        sch, lambda: sch.annotate_buffer_access("B", 1, "read", lambda i, j: (i, j)),
        BufferIndexOutOfRangeError, "B")


def test_annotate_buffer_access_fail_wrong_number_of_ranges():
    sch = wb.Schedule(chain_func(8))
    assert_schedule_error(
        sch, lambda: sch.annotate_buffer_access("B", 0, "read", lambda i, j: ((i, i + 1),)),
        InvalidRegionMapError, "B")


def test_annotate_buffer_access_fail_not_a_pair():
    sch = wb.Schedule(chain_func(8))
    assert_schedule_error(
        sch, lambda: sch.annotate_buffer_access("B", 0, "read", lambda i, j: ((i, i + 1, 2), j)),
        InvalidScheduleArgumentError, "B")
