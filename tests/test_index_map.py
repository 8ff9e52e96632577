"""wb.IndexMap: building (from_func, parse), mapping, inverses with padding, TVM's JSON.

The expected inverses and padding predicates are TVM 0.27's for the same maps
(``IndexMap.non_surjective_inverse``), checked by hand and, where apache-tvm is
installed, against TVM itself.
"""

from __future__ import annotations

import json

import pytest

import workbench as wb
from workbench.ir import IndexMap, IndexMapError, Var, const

P = IndexMap.parse


def test_exported_as_wb_indexmap():
    assert wb.IndexMap is IndexMap and wb.ir.IndexMap is IndexMap


def test_from_func_and_map():
    m = IndexMap.from_func(lambda i, j: (i // 16, j // 16, i % 16, j % 16))
    assert [v.name for v in m.initial_indices] == ["i", "j"]
    assert m.map_shape([128, 128]) == [8, 8, 16, 16]
    got = m.map_indices([const(33), const(5)])
    assert [g.value for g in got] == [2, 0, 1, 5]
    assert str(m) == "lambda i, j: (i // 16, j // 16, i % 16, j % 16)"
    assert repr(m) == "IndexMap(lambda i, j: (i // 16, j // 16, i % 16, j % 16))"


def test_from_func_single_result_and_ints():
    m = IndexMap.from_func(lambda i: i * 2)
    assert str(m) == "lambda i: (i * 2,)"
    m = IndexMap.from_func(lambda i, j: [0, j, i])
    assert m.map_shape([3, 4]) == [1, 4, 3]


def test_from_func_varargs_and_keyword_only():
    m = IndexMap.from_func(lambda *rest, k: (*rest, k // 4, k % 4), ndim=3)
    assert str(m) == "lambda rest_0, rest_1, k: (rest_0, rest_1, k // 4, k % 4)"
    with pytest.raises(IndexMapError, match="ndim must be given"):
        IndexMap.from_func(lambda *rest: rest)


def test_from_func_index_dtype():
    m = IndexMap.from_func(lambda i: (i // 8, i % 8), index_dtype="int64")
    assert m.initial_indices[0].dtype == "int64"
    assert m.as_python() == "lambda i: (i // T.int64(8), i % T.int64(8),)"


def test_parse_equals_from_func():
    a = P("lambda i, j: (i // 16, j // 16, i % 16, j % 16)")
    b = IndexMap.from_func(lambda i, j: (i // 16, j // 16, i % 16, j % 16))
    assert str(a) == str(b) and a.is_equivalent_to(b)


def test_parse_tvm_forms():
    m = P("lambda i, j: (T.max(i - 3, j), min(i, T.int32(4)), i * T.int32(2),)")
    assert str(m) == "lambda i, j: (T.max(i - 3, j), T.min(i, 4), i * 2)"
    m = P("lambda a: (T.float32(0.5),)")
    assert m.final_indices[0].dtype == "float32"
    m = P("lambda i: (T.Cast(\"int64\", i) // T.int64(2),)")
    assert m.final_indices[0].dtype == "int64"
    m = P("lambda *rest, k: (*rest, k // 2)", ndim=2)
    assert str(m) == "lambda rest_0, k: (rest_0, k // 2)"


def test_parse_free_variables():
    n = Var("n")
    m = P("lambda i: (i // n, i % n)", variables={"n": n})
    assert m.final_indices[0].b is n
    with pytest.raises(IndexMapError, match="unknown name 'n'"):
        P("lambda i: (i // n, i % n)")


@pytest.mark.parametrize(
    "text, column, what",
    [
        ("lambda i: __import__('os').system('echo hi')", 10, "calls other than"),
        ("lambda i: (i.__class__,)", 11, "attribute access"),
        ("lambda i: (open('x'),)", 11, "calls other than"),
        ("lambda i: (i ** 2,)", 11, "only + - * // %"),
        ("lambda i: (i / 2,)", 11, "only + - * // %"),
        ("lambda i: ([x for x in i],)", 11, "ListComp"),
        ("lambda i: (i if i else 0,)", 11, "IfExp"),
        ("lambda i: ('a',)", 11, "only int and float"),
        ("lambda i: (T.float32(i),)", 11, "takes one number"),
        ("lambda i: (i < 3,)", 11, "Compare"),
        ("lambda i: (getattr(i, 'x'),)", 11, "calls other than"),
        ("lambda i, **kw: (i,)", 0, "plain index names"),
        ("(lambda i: i)(1)", 0, "expected `lambda"),
        ("__import__('os')", 0, "expected `lambda"),
    ],
)
def test_parse_refuses_hostile_text(text, column, what, monkeypatch):
    """Nothing in the text runs: a refused construct names its column, and neither
    eval nor exec nor __import__ is reached (they are made to fail if called)."""
    import builtins

    def boom(*a, **k):  # pragma: no cover - reaching this is the failure
        raise AssertionError("index map text was executed")

    monkeypatch.setattr(builtins, "eval", boom)
    monkeypatch.setattr(builtins, "exec", boom)
    monkeypatch.setattr(builtins, "__import__", boom)
    with pytest.raises(IndexMapError) as info:
        P(text)
    assert f"column {column}:" in str(info.value) and what in str(info.value)


def test_parse_syntax_error_names_position():
    with pytest.raises(IndexMapError, match="line 1, column"):
        P("lambda i: (i // ,)")


def test_map_shape_with_padding_and_fusion():
    assert P("lambda i: (i // 4, i % 4)").map_shape([14]) == [4, 4]
    assert P("lambda i, j: ((i * 8 + j) // 16, (i * 8 + j) % 16)").map_shape([5, 8]) == [3, 16]
    assert P("lambda i: (0, (i + 1) // 8, (i + 1) % 8)").map_shape([16]) == [1, 3, 8]


def test_map_shape_symbolic():
    n = Var("n")
    m = P("lambda x, y: (x * n + y,)", variables={"n": n})
    (ext,) = m.map_shape([4, n])
    assert str(ext) == "n * 4"


def test_inverse_bijective():
    assert str(P("lambda i, j: (i * 16 + j,)").inverse([16, 16])) == (
        "lambda axis0: (axis0 // 16, axis0 % 16)")
    assert str(P("lambda i, j: (i // 4, j, i % 4)").inverse([16, 7])) == (
        "lambda axis0, j, axis2: (axis0 * 4 + axis2, j)")
    # a middle digit is written x % 21 // 3, as TVM's inverse does
    inv = P("lambda a, b, c: (a * 21 + b * 3 + c,)").inverse([7, 7, 3])
    assert str(inv) == "lambda axis0: (axis0 // 21, axis0 % 21 // 3, axis0 % 3)"


def test_inverse_refuses_padding_and_non_affine():
    with pytest.raises(IndexMapError, match="not a bijective affine"):
        P("lambda i: (i // 4, i % 4)").inverse([14])
    with pytest.raises(IndexMapError, match="not a bijective affine"):
        P("lambda i, j: (i + j,)").inverse([4, 4])


@pytest.mark.parametrize(
    "text, shape, inverse, predicate",
    [
        ("lambda i: (i // 4, i % 4)", [14], "lambda axis0, axis1: (axis0 * 4 + axis1,)",
         "axis0 == 3 and 2 <= axis1"),
        ("lambda i: (0, (i + 1) // 8, (i + 1) % 8)", [16],
         "lambda axis0, axis1, axis2: (axis1 * 8 + axis2 - 1,)",
         "axis1 == 0 and axis2 < 1 or axis1 == 2 and 1 <= axis2"),
        ("lambda i, j: ((i * 8 + j) // 16, (i * 8 + j) % 16)", [5, 8],
         "lambda axis0, axis1: (axis0 * 2 + axis1 // 8, axis1 % 8)",
         "axis0 == 2 and 8 <= axis1"),
        ("lambda i, j: (i // 4, j // 3, i % 4, j % 3)", [14, 7],
         "lambda axis0, axis1, axis2, axis3: (axis0 * 4 + axis2, axis1 * 3 + axis3)",
         "axis0 == 3 and 2 <= axis2 or axis1 == 2 and 1 <= axis3"),
        ("lambda i: (i // 4, i % 4)", [16], "lambda axis0, axis1: (axis0 * 4 + axis1,)",
         "False"),
    ],
)
def test_non_surjective_inverse(text, shape, inverse, predicate):
    inv, pred = P(text).non_surjective_inverse(shape)
    assert str(inv) == inverse
    assert (str(pred) if not isinstance(pred, wb.ir.IntImm) else str(bool(pred.value))) == (
        predicate)


def test_padding_predicate_is_exact():
    """The predicate is true exactly on the slots no element maps to."""
    m = P("lambda i, j: (i // 4, j // 3, i % 4, j % 3)")
    inv, pred = m.non_surjective_inverse([14, 7])
    from workbench.ir.simplify import simplify

    used = set()
    for i in range(14):
        for j in range(7):
            used.add(tuple(x.value for x in m.map_indices([const(i), const(j)])))
    for a in range(4):
        for b in range(3):
            for c in range(4):
                for d in range(3):
                    env = dict(zip(inv.initial_indices, map(const, (a, b, c, d)), strict=True))
                    val = simplify(wb.ir.substitute(pred, env))
                    assert bool(val.value) == ((a, b, c, d) not in used)


def test_is_equivalent_to():
    a = P("lambda i: (i // 4, i % 4)")
    assert a.is_equivalent_to(P("lambda x: ((x + 4) // 4 - 1, x % 4)"))
    assert not a.is_equivalent_to(P("lambda x: (x // 4, x % 8)"))
    assert not a.is_equivalent_to(P("lambda x, y: (x, y)"))


TVM_JSON = (
    '{"root_index":17,"nodes":[{"type":"None"},{"type":"ir.PrimType","data":{"span":0,'
    '"dtype":"int32"}},{"type":"ffi.String","data":"i"},{"type":"ir.Var","data":{"span":0,'
    '"ty":1,"name":2}},{"type":"ffi.String","data":"j"},{"type":"ir.Var","data":{"span":0,'
    '"ty":1,"name":4}},{"type":"ffi.Array","data":[3,5]},{"type":"int","data":4},'
    '{"type":"ir.IntImm","data":{"span":0,"ty":1,"value":7}},{"type":"prim.FloorDiv",'
    '"data":{"span":0,"ty":1,"a":3,"b":8}},{"type":"ir.IntImm","data":{"span":0,"ty":1,'
    '"value":7}},{"type":"prim.FloorDiv","data":{"span":0,"ty":1,"a":5,"b":10}},'
    '{"type":"ir.IntImm","data":{"span":0,"ty":1,"value":7}},{"type":"prim.FloorMod",'
    '"data":{"span":0,"ty":1,"a":3,"b":12}},{"type":"ir.IntImm","data":{"span":0,"ty":1,'
    '"value":7}},{"type":"prim.FloorMod","data":{"span":0,"ty":1,"a":5,"b":14}},'
    '{"type":"ffi.Array","data":[9,11,13,15]},{"type":"tirx.IndexMap","data":'
    '{"initial_indices":6,"final_indices":16,"inverse_index_map":0}}],"metadata":'
    '{"tvm_version":"0.27.0.post1"}}'
)


def test_json_is_what_tvm_writes():
    """The text TVM 0.27's save_json writes for this map, byte for byte."""
    m = P("lambda i, j: (i // 4, j // 4, i % 4, j % 4)")
    assert m.to_json() == TVM_JSON
    back = IndexMap.from_json(TVM_JSON)
    assert str(back) == str(m)


def test_json_round_trip_all_node_kinds():
    m = P("lambda i, j: (T.max(i - 3, j), T.min(i * 2 + 1, -5), T.Cast(\"int64\", i), "
          "T.float16(1.5))")
    for indent in (None, 2):
        back = IndexMap.from_json(m.to_json(indent=indent))
        assert str(back) == str(m)
    with_inverse = IndexMap.from_func(lambda i, j: (j, i), inverse_index_map=lambda a, b: (b, a))
    back = IndexMap.from_json(with_inverse.to_json())
    assert str(back.inverse_index_map) == "lambda a, b: (b, a)"
    assert with_inverse.as_python() == (
        "tvm.tirx.IndexMap.from_func(lambda i, j: (j, i,), inverse_index_map="
        "lambda a, b: (b, a,))")


@pytest.mark.parametrize(
    "bad",
    ["{}", "[]", '{"root_index": 0, "nodes": [{"type": "None"}]}',
     '{"root_index": 1, "nodes": [{"type": "None"}, {"type": "ir.Call", "data": {}}]}',
     '{"root_index": 1, "nodes": [{"type": "None"}, {"type": "ffi.Array", "data": [1]}]}',
     "not json"],
)
def test_json_refuses_what_is_not_an_index_map(bad):
    with pytest.raises(IndexMapError):
        IndexMap.from_json(bad)


@pytest.mark.tvm
def test_tvm_reads_our_json_and_agrees_on_inverse():
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    from tvm.ir import load_json

    m = P("lambda i, j: (i // 4, j // 3, i % 4, j % 3)")
    theirs = load_json(m.to_json())
    assert str(theirs).startswith("T.index_map(lambda i, j: (i // 4, j // 3, i % 4, j % 3")
    inv, pred = theirs.non_surjective_inverse([14, 7])
    ours_inv, ours_pred = m.non_surjective_inverse([14, 7])
    assert str(pred) == str(ours_pred)
    back = IndexMap.from_json(tvm.ir.save_json(inv))
    assert back.is_equivalent_to(ours_inv)
    assert json.loads(tvm.ir.save_json(theirs))["nodes"] == json.loads(m.to_json())["nodes"]
