"""Small primitives: ``get_output_blocks``, ``reorder_block_iter_var`` and
``annotate`` / ``unannotate`` with dict values, checked on their IR, their traces
(Python text and JSON, both round trip) and their refusals; with TVM installed,
their traces replay in TVM to the same IR."""

from __future__ import annotations

import json

import pytest

import workbench as wb
from workbench.schedule import (
    BlockNotFoundError,
    InvalidReorderIndexError,
    InvalidScheduleArgumentError,
)
from workbench.testing import (
    assert_schedule_error,
    assert_script_roundtrip,
    assert_verifies,
    matmul_func,
    roundtrip_trace,
)

NESTED = '''
@T.prim_func
def nested(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i in range(8):
        with T.block("outer"):
            vi = T.axis.spatial(8, i)
            D = T.alloc_buffer((8,))
            for j in range(8):
                with T.block("D"):
                    vj = T.axis.spatial(8, j)
                    D[vj] = B[vi, vj] + T.float32(1)
            for j in range(8):
                with T.block("C"):
                    vj = T.axis.spatial(8, j)
                    C[vi, vj] = D[vj]
'''


def nested_func() -> wb.PrimFunc:
    return wb.from_script(NESTED)


def _names(sch: wb.Schedule, rvs) -> list[str]:
    return [sch.get(b).name for b in rvs]


# ------------------------------------------------------------ get_output_blocks
def test_get_output_blocks_root_and_inner_scope():
    func = nested_func()
    sch = wb.Schedule(func)
    before = sch.mod.script()
    # "B" writes the root's own buffer; "D" writes the buffer "outer" allocates
    assert _names(sch, sch.get_output_blocks("root")) == ["outer", "C"]
    assert _names(sch, sch.get_output_blocks(sch.get_block("outer"))) == ["C"]
    assert _names(sch, sch.get_output_blocks("D")) == []
    assert sch.mod.script() == before
    assert [i.kind for i in sch.trace].count("GetOutputBlocks") == 3
    roundtrip_trace(sch, func)


def test_get_output_blocks_trace_text_and_json():
    func = matmul_func(8, 8, 8)
    sch = wb.Schedule(func)
    (c,) = sch.get_output_blocks(sch.get_block("root"))
    assert sch.get(c).name == "C"
    assert sch.trace.lines()[1] == "b1, = sch.get_output_blocks(block=b0)"
    assert sch.trace.as_json_obj()[0][1] == ["GetOutputBlocks", ["b0"], [], ["b1"]]
    roundtrip_trace(sch, func)


def test_get_output_blocks_unknown_block_refused():
    sch = wb.Schedule(nested_func())
    assert_schedule_error(
        sch, lambda: sch.get_output_blocks("nope"), BlockNotFoundError, "nope"
    )


# ------------------------------------------------------- reorder_block_iter_var
def test_reorder_block_iter_var_ir_trace_and_numbers():
    func = matmul_func(8, 8, 8)
    sch = wb.Schedule(func)
    sch.reorder_block_iter_var(sch.get_block("C"), [2, 0, 1])
    before, after = func.script(), sch.func.script()
    assert 'vi, vj, vk = T.axis.remap("SSR", [i, j, k])' in before
    assert after == before.replace(
        'vi, vj, vk = T.axis.remap("SSR", [i, j, k])',
        'vk, vi, vj = T.axis.remap("RSS", [k, i, j])',
    )
    assert sch.trace.lines()[1] == "sch.reorder_block_iter_var(block=b0, new_order=[2, 0, 1])"
    assert sch.trace.as_json_obj()[0][1] == ["ReorderBlockIterVar", ["b0", [2, 0, 1]], [], []]
    roundtrip_trace(sch, func)
    assert_script_roundtrip(sch.mod)
    assert_verifies(sch, func)


@pytest.mark.parametrize("order", [[0, 1], [0, 0, 1], [0, 1, 3], [-1, 0, 1], [0, 1, 2, 3]])
def test_reorder_block_iter_var_not_a_permutation_refused(order):
    sch = wb.Schedule(matmul_func(8, 8, 8))
    c = sch.get_block("C")
    e = assert_schedule_error(
        sch, lambda: sch.reorder_block_iter_var(c, order), InvalidReorderIndexError, "C"
    )
    assert str(order) in str(e) and e.primitive == "reorder_block_iter_var"


def test_reorder_block_iter_var_by_name_refused_leaves_no_lookup():
    sch = wb.Schedule(matmul_func(8, 8, 8))
    assert_schedule_error(
        sch, lambda: sch.reorder_block_iter_var("C", [1, 1, 0]), InvalidReorderIndexError, "C"
    )
    assert len(sch.trace) == 0


# ------------------------------------------------------------ dict annotations
ANN = {"arr": [0, 0], "key": 3, "s": "x", "f": 1.5, "b": True}


def test_annotate_dict_ir_script_and_trace():
    func = matmul_func(8, 8, 8)
    sch = wb.Schedule(func)
    c = sch.get_block("C")
    sch.annotate(c, "meta", ANN)
    i = sch.get_loops(c)[0]
    sch.annotate(i, "loop_meta", {"q": 'a"b', "n": [1, 2]})
    text = sch.mod.script()
    # keys sorted and bools bare inside a dict, as TVM prints an annotation Map
    want = '{"meta": {"arr": [0, 0], "b": True, "f": 1.5, "key": 3, "s": "x"}}'
    assert f"T.block_attr({want})" in text
    assert 'annotations={"loop_meta": {"n": [1, 2], "q": "a\\"b"}}' in text
    assert_script_roundtrip(sch.mod)
    line = sch.trace.lines()[1]
    assert line == (
        'sch.annotate(block_or_loop=b0, ann_key="meta", '
        'ann_val={"arr": [0, 0], "b": True, "f": 1.5, "key": 3, "s": "x"})'
    )
    # JSON: the dict as it is, its strings not quoted (TVM's rule for a dict input)
    step = sch.trace.as_json_obj()[0][1]
    assert step == ["Annotate", ["b0", ANN], ["meta"], []]
    assert json.loads(sch.trace.as_json())[0][1] == step
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


def test_annotate_dict_recorded_value_is_a_copy():
    sch = wb.Schedule(matmul_func(8, 8, 8))
    value = {"key": 3}
    sch.annotate("C", "meta", value)
    value["key"] = 4
    assert sch.trace.as_json_obj()[0][1][1][1] == {"key": 3}
    assert '{"meta": {"key": 3}}' in sch.mod.script()


def test_unannotate_dict_annotation():
    func = matmul_func(8, 8, 8)
    sch = wb.Schedule(func)
    sch.annotate("C", "meta", ANN)
    sch.unannotate("C", "meta")
    assert sch.func.script() == func.script()
    roundtrip_trace(sch, func)


@pytest.mark.parametrize(
    "value", [{1: 2}, {"a": {"b": 1}}, {"a": [[1]]}, {"a": float("nan")}, {"a": None}]
)
def test_annotate_bad_dict_refused(value):
    sch = wb.Schedule(matmul_func(8, 8, 8))
    c = sch.get_block("C")
    assert_schedule_error(
        sch, lambda: sch.annotate(c, "meta", value), InvalidScheduleArgumentError, "C"
    )


def test_dict_annotation_read_from_script():
    func = wb.from_script(
        NESTED.replace(
            'vi = T.axis.spatial(8, i)\n',
            'vi = T.axis.spatial(8, i)\n            T.block_attr({"m": {"k": [1, 2], "s": "t"}})\n',
        )
    )
    block = [b for b in wb.ir.analysis.iter_blocks(func.body) if b.name == "outer"][0]
    assert dict(block.annotations)["m"] == {"k": (1, 2), "s": "t"}
    assert_script_roundtrip(func)


# ------------------------------------------------------------------------- TVM
@pytest.mark.tvm
def test_tvm_replays_small_primitives():
    import tvm

    func = nested_func()
    sch = wb.Schedule(func)
    outs = _names(sch, sch.get_output_blocks("root"))
    sch.reorder_block_iter_var("B", [1, 0])
    sch.annotate("C", "meta", ANN)
    sch.annotate(sch.get_loops("D")[0], "loop_meta", {"q": "s", "n": [1, 2]})
    sch.annotate("D", "gone", {"x": 1})
    sch.unannotate("D", "gone")
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    theirs = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(sch.trace.as_json_obj(syntax="tirx"), theirs)
    ours = tvm.script.from_source(wb.IRModule.from_funcs(sch.func).script(syntax="tirx"))
    tvm.ir.assert_structural_equal(ours, theirs.mod)
    fresh = tvm.s_tir.Schedule(mod)
    fresh.work_on("nested")
    got = fresh.get_output_blocks(fresh.get_sblock("root"))
    assert [fresh.get(b).name_hint for b in got] == outs
