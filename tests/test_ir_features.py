"""Let bindings, T.if_then_else, T.evaluate of calls, T.call_extern, block match_buffer
and int64 index types: printing, analyses, the C backend and the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.c import generate_c
from workbench.ir import (
    Block,
    Buffer,
    BufferRegion,
    BufferStore,
    CallExtern,
    Evaluate,
    For,
    IfThenElseExpr,
    IntImm,
    IterVar,
    Let,
    LetStmt,
    MatchBufferRegion,
    PrimFunc,
    SeqStmt,
    StringImm,
    Var,
    call_extern,
    cast,
    if_then_else,
    let,
    structural_equal,
    substitute,
)
from workbench.runtime import reference
from workbench.runtime.flops import flop_count


def _func(name, params, body, allocs=()):
    return PrimFunc(name, tuple(params), Block("root", (), (), body, alloc_buffers=allocs))


def _loop(var, extent, body):
    return For(var, extent, "serial", body)


def _lines(text: str) -> list[str]:
    return [x.strip() for x in text.splitlines()]


# ---------------------------------------------------------------------------
# let


def _let_func():
    """B[i] = x * x + 1 with x = A[i] * 2 bound by a LetStmt."""
    A, B = Buffer("A", (16,)), Buffer("B", (16,))
    i, vi, x = Var("i"), Var("vi"), Var("x", "float32")
    body = LetStmt(x, A[vi] * 2.0, BufferStore(B, x * x + 1.0, (vi,)))
    return _func("let_f", (A, B), _loop(i, 16, Block("B", (IterVar(vi, 16),), (i,), body)))


def test_let_stmt_prints_as_tvm_in_both_syntaxes():
    f = _let_func()
    assert "x: T.float32 = A[vi] * T.float32(2)" in _lines(f.script())
    assert "x: T.let[T.float32] = A[vi] * T.float32(2)" in _lines(f.script(syntax="tirx"))
    # the body follows at the same depth; the block reads what the let reads
    lines = _lines(f.script())
    k = lines.index("x: T.float32 = A[vi] * T.float32(2)")
    assert lines[k + 1] == "B[vi] = x * x + T.float32(1)"
    assert "T.reads(A[vi])" in lines


def test_let_stmt_followed_by_statements_prints_scoped_form_in_classic():
    A, B = Buffer("A", (4,)), Buffer("B", (4,))
    vi, x = Var("vi"), Var("x", "float32")
    s = SeqStmt((LetStmt(x, A[vi], BufferStore(B, x, (vi,))), BufferStore(B, A[vi], (vi,))))
    assert _lines(s.script())[:2] == ["with T.LetStmt(A[vi]) as x:", "B[vi] = x"]
    assert _lines(s.script())[2] == "B[vi] = A[vi]"


def test_let_stmt_builds_runs_and_evaluates():
    f = _let_func()
    a = np.random.default_rng(0).standard_normal(16).astype("float32")
    want = (2 * a) ** 2 + 1
    b = np.zeros(16, "float32")
    wb.build(f)(a, b)
    np.testing.assert_allclose(b, want, rtol=1e-6)
    b2 = np.zeros(16, "float32")
    reference.evaluate(f, a, b2)
    np.testing.assert_allclose(b2, want, rtol=1e-6)
    assert "const float x = A[vi] * 2.0f;" in wb.build(f).source


def test_let_stmt_flops_count_value_once_per_iteration():
    assert flop_count(_let_func()) == 16 * (1 + 2)  # x = a*2 once, then x*x+1


def test_let_bound_index_is_substituted_in_regions():
    A, B = Buffer("A", (32,)), Buffer("B", (16,))
    vi, idx = Var("vi"), Var("idx")
    body = LetStmt(idx, vi * 2, BufferStore(B, A[idx], (vi,)))
    blk = Block("B", (IterVar(vi, 16),), (Var("i"),), body)
    assert [str(r.region[0][0]) for r in blk.reads] == ["vi * 2"]


def test_let_expression_prints_builds_and_evaluates():
    A, B = Buffer("A", (8,)), Buffer("B", (8,))
    i, vi, y = Var("i"), Var("vi"), Var("y", "float32")
    value = let(y, A[vi] + 1.0, y * y)
    assert isinstance(value, Let) and value.dtype == "float32"
    f = _func("lete", (A, B), _loop(i, 8, Block("B", (IterVar(vi, 8),), (i,),
                                                BufferStore(B, value, (vi,)))))
    assert "B[vi] = T.Let(y * y, where={y: A[vi] + T.float32(1)})" in _lines(f.script())
    a = np.arange(8, dtype="float32")
    b = np.zeros(8, "float32")
    wb.build(f)(a, b)
    np.testing.assert_allclose(b, (a + 1) ** 2)
    b2 = np.zeros(8, "float32")
    reference.evaluate(f, a, b2)
    np.testing.assert_allclose(b2, (a + 1) ** 2)


# ---------------------------------------------------------------------------
# if_then_else


def _pad_func():
    """B[i] = A[i - 1] for i >= 1 else 0: A[-1] is never read."""
    A, B = Buffer("A", (8,)), Buffer("B", (9,))
    i, vi = Var("i"), Var("vi")
    value = if_then_else(vi >= 1, A[vi - 1], 0.0)
    return _func("pad", (A, B), _loop(i, 9, Block("B", (IterVar(vi, 9),), (i,),
                                                  BufferStore(B, value, (vi,)))))


def test_if_then_else_prints_and_reads_only_the_chosen_side():
    f = _pad_func()
    assert "B[vi] = T.if_then_else(vi >= 1, A[vi - 1], T.float32(0))" in _lines(f.script())
    assert isinstance(f.body.body.body.body.value, IfThenElseExpr)
    a = np.arange(1, 9, dtype="float32")
    want = np.concatenate([[0], a]).astype("float32")
    b = np.zeros(9, "float32")
    wb.build(f)(a, b)
    np.testing.assert_array_equal(b, want)
    b2 = np.zeros(9, "float32")
    reference.evaluate(f, a, b2)  # no IndexError for A[-1]
    np.testing.assert_array_equal(b2, want)
    assert wb.verify(f, f).reference_backend == "numpy"


# ---------------------------------------------------------------------------
# evaluate / call_extern


def test_call_extern_prints_bare_as_evaluate_and_in_expressions():
    vi = Var("vi")
    s = Evaluate(call_extern("int32", "printf", "v=%d\n", vi))
    assert s.script() == 'T.call_extern("int32", "printf", "v=%d\\n", vi)'
    assert Evaluate(IntImm(0)).script() == "T.evaluate(0)"
    pure = call_extern("float32", "expf", Var("x", "float32"), pure=True)
    assert pure.script() == 'T.call_pure_extern("float32", "expf", x)'
    assert isinstance(s.value.args[0], StringImm)


def _extern_func():
    """B[i] = fabsf(A[i]) + atoi("42"); a no-op T.evaluate(0) beside it."""
    A, B = Buffer("A", (8,)), Buffer("B", (8,))
    i, vi = Var("i"), Var("vi")
    value = call_extern("float32", "fabsf", A[vi]) + cast(call_extern("int32", "atoi", "42"),
                                                          "float32")
    body = SeqStmt((BufferStore(B, value, (vi,)), Evaluate(IntImm(0))))
    return _func("ext", (A, B), _loop(i, 8, Block("B", (IterVar(vi, 8),), (i,), body)))


def test_call_extern_builds_with_prototypes_and_runs():
    f = _extern_func()
    src = wb.build(f).source
    assert "int32_t atoi(const char*);" in src  # a prototype for a name math.h lacks
    assert "float fabsf(" not in src  # math.h declares it
    a = np.linspace(-3, 3, 8, dtype="float32")
    b = np.zeros(8, "float32")
    wb.build(f)(a, b)
    np.testing.assert_allclose(b, np.abs(a) + 42)


def test_call_extern_is_verified_against_c_when_numpy_cannot_evaluate_it():
    f = _extern_func()
    with pytest.raises(NotImplementedError):
        reference.evaluate(f, np.zeros(8, "float32"), np.zeros(8, "float32"))
    assert wb.verify(f, f).reference_backend == "c"


def test_call_extern_refuses_a_name_that_is_no_c_identifier():
    from workbench.codegen.cstyle import CodegenError

    A = Buffer("A", (2,))
    i, vi = Var("i"), Var("vi")
    bad = CallExtern("float32", "f(); system", (A[vi],))
    f = _func("bad", (A,), _loop(i, 2, Block("B", (IterVar(vi, 2),), (i,),
                                             BufferStore(A, bad, (vi,)))))
    with pytest.raises(CodegenError, match="not a C function name"):
        generate_c(f)


# ---------------------------------------------------------------------------
# match_buffer


def _tiled_copy(lead_dims: bool = False):
    """B = A + 1 in 4x4 tiles (or rows of 4), each tile through match_buffer views."""
    A, B = Buffer("A", (8, 8)), Buffer("B", (8, 8))
    i, j, vi, vj, ii, jj = (Var(n) for n in ("i", "j", "vi", "vj", "ii", "jj"))
    if lead_dims:  # a row of 4: the view has one dimension fewer than the region
        As, Bs = Buffer("As", (4,)), Buffer("Bs", (4,))
        ra = BufferRegion(A, ((vi, IntImm(1)), (vj * 4, IntImm(4))))
        rb = BufferRegion(B, ((vi, IntImm(1)), (vj * 4, IntImm(4))))
        inner = _loop(jj, 4, BufferStore(Bs, As[jj] + 1.0, (jj,)))
        ivs, vals, ext_i = (IterVar(vi, 8), IterVar(vj, 2)), (i, j), 8
    else:
        As, Bs = Buffer("As", (4, 4)), Buffer("Bs", (4, 4))
        ra = BufferRegion(A, ((vi * 4, IntImm(4)), (vj * 4, IntImm(4))))
        rb = BufferRegion(B, ((vi * 4, IntImm(4)), (vj * 4, IntImm(4))))
        inner = _loop(ii, 4, _loop(jj, 4, BufferStore(Bs, As[ii, jj] + 1.0, (ii, jj))))
        ivs, vals, ext_i = (IterVar(vi, 2), IterVar(vj, 2)), (i, j), 2
    blk = Block("B", ivs, vals, inner,
                match_buffers=(MatchBufferRegion(As, ra), MatchBufferRegion(Bs, rb, 1)))
    return _func("tiles", (A, B), _loop(i, ext_i, _loop(j, 2, blk)))


def test_match_buffer_prints_as_tvm_and_regions_are_the_sources():
    lines = _lines(_tiled_copy().script())
    assert "As = T.match_buffer(A[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4], (4, 4))" in lines
    assert ("Bs = T.match_buffer(B[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4], (4, 4), "
            "offset_factor=1)") in lines
    assert "T.reads(A[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4])" in lines
    assert "T.writes(B[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4])" in lines
    # order as TVM: reads/writes, then the views, then the body
    assert lines.index("T.writes(B[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4])") < lines.index(
        "As = T.match_buffer(A[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4], (4, 4))")
    row = _lines(_tiled_copy(lead_dims=True).script())
    assert "As = T.match_buffer(A[vi, vj * 4:vj * 4 + 4], (4,))" in row


@pytest.mark.parametrize("lead_dims", [False, True])
def test_match_buffer_builds_runs_and_evaluates(lead_dims):
    f = _tiled_copy(lead_dims)
    a = np.random.default_rng(1).standard_normal((8, 8)).astype("float32")
    b = np.zeros((8, 8), "float32")
    wb.build(f)(a, b)
    np.testing.assert_allclose(b, a + 1)
    assert wb.verify(f, f).ok


def test_match_buffer_with_a_wrong_shape_is_refused_by_codegen():
    from dataclasses import replace

    from workbench.codegen.cstyle import CodegenError

    f = _tiled_copy()
    outer = f.body.body
    blk = outer.body.body
    m = MatchBufferRegion(Buffer("As", (4, 2)), blk.match_buffers[0].source)
    bad = replace(blk, match_buffers=(m, blk.match_buffers[1]))
    body = outer.with_body(outer.body.with_body(bad))
    with pytest.raises(CodegenError, match="does not match the region"):
        generate_c(_func("tiles", f.params, body))


def test_substitute_reaches_match_buffer_sources():
    f = _tiled_copy()
    blk = f.body.body.body.body
    vi = blk.iter_vars[0].var
    w = Var("w")
    new = substitute(blk, {vi: w})
    assert str(new.match_buffers[0].source.region[0][0]) == "w * 4"
    assert str(new.reads[0].region[0][0]) == "w * 4"


# ---------------------------------------------------------------------------
# int64


def _int64_func():
    A = Buffer("A", (IntImm(16, "int64"), IntImm(8, "int64")))
    B = Buffer("B", (IntImm(16, "int64"), IntImm(8, "int64")))
    i, j, vi, vj = (Var(n, "int64") for n in ("i", "j", "vi", "vj"))
    blk = Block("B", (IterVar(vi, 16), IterVar(vj, 8)), (i, j),
                BufferStore(B, A[vi, vj] + A[vi, 0], (vi, vj)))
    return _func("wide", (A, B), _loop(i, 16, _loop(j, 8, blk)))


def test_int64_shapes_extents_and_indices_print_as_tvm():
    f = _int64_func()
    assert f.params[0].shape == (16, 8) and f.params[0].index_dtype == "int64"
    lines = _lines(f.script())
    assert ('def wide(A: T.Buffer((T.int64(16), T.int64(8)), "float32"), '
            'B: T.Buffer((T.int64(16), T.int64(8)), "float32")):') in lines
    assert "for i, j in T.grid(T.int64(16), T.int64(8)):" in lines
    assert "B[vi, vj] = A[vi, vj] + A[vi, T.int64(0)]" in lines
    alloc = Buffer("C", (IntImm(4, "int64"),))
    blk = Block("root", (), (), Evaluate(), alloc_buffers=(alloc,))
    assert "C = T.sblock_alloc_buffer((T.int64(4),))" in _lines(
        PrimFunc("g", (), blk).script(syntax="tirx"))


def test_int64_function_builds_runs_and_splits_into_int64_loops():
    f = _int64_func()
    a = np.random.default_rng(2).standard_normal((16, 8)).astype("float32")
    b = np.zeros((16, 8), "float32")
    k = wb.build(f)
    k(a, b)
    np.testing.assert_allclose(b, a + a[:, :1])
    assert "for (int64_t i = 0; i < 16; ++i)" in k.source
    sch = wb.Schedule(f)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 3])
    assert sch.get(i0).loop_var.dtype == "int64" and sch.get(i0).extent == 6
    fused = sch.fuse(i1, j)
    assert sch.get(fused).loop_var.dtype == "int64"
    assert "for i_0, i_1_j_fused in T.grid(T.int64(6), T.int64(24)):" in _lines(
        sch.mod.script())
    assert wb.verify(sch.mod, f).ok


# ---------------------------------------------------------------------------
# analyses over the new nodes


def test_structural_equal_and_mutator_see_the_new_nodes():
    a, b = _pad_func(), _pad_func()
    assert structural_equal(a, b)
    x = Var("x", "float32")
    c = let(x, 1.0, x + 1.0)
    d = let(x, 2.0, x + 1.0)
    assert not structural_equal(c, d)
    from workbench.ir.simplify import struct_key

    assert struct_key(call_extern("int32", "f", 1)) != struct_key(call_extern("int32", "g", 1))
    v = Var("v")
    e = if_then_else(v > 0, call_extern("float32", "expf", cast(v, "float32")), 0.0)
    got = substitute(e, {v: IntImm(3)})  # rewrites inside both nodes, folds the test
    assert got.script() == (
        'T.if_then_else(True, T.call_extern("float32", "expf", T.Cast("float32", 3)), '
        "T.float32(0))"
    )
    assert wb.ir.simplify(got).script() == 'T.call_extern("float32", "expf", T.float32(3))'


@pytest.mark.tvm
def test_tirx_text_with_the_new_constructs_is_read_by_tvm():
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    for f in (_let_func(), _pad_func(), _tiled_copy(), _int64_func()):
        text = "\n".join(x for x in f.script(syntax="tirx").splitlines()
                         if not x.startswith("# from"))
        parsed = tvm.script.from_source(text)
        assert "T." in parsed.script()


def test_match_buffer_view_of_one_element_is_evaluated_by_numpy():
    A, B = Buffer("A", (4, 4)), Buffer("B", (4, 4))
    i, j, vi, vj = (Var(n) for n in ("i", "j", "vi", "vj"))
    As = Buffer("As", (1,))
    m = MatchBufferRegion(As, BufferRegion(A, ((vi, IntImm(1)), (vj, IntImm(1)))))
    blk = Block("B", (IterVar(vi, 4), IterVar(vj, 4)), (i, j),
                BufferStore(B, As[0] * 3.0, (vi, vj)), match_buffers=(m,))
    f = _func("view1", (A, B), _loop(i, 4, _loop(j, 4, blk)))
    a = np.arange(16, dtype="float32").reshape(4, 4)
    b = np.zeros_like(a)
    reference.evaluate(f, a, b)
    np.testing.assert_array_equal(b, 3 * a)
    assert wb.verify(f, f).reference_backend == "numpy"


def test_lowering_keeps_a_buffer_that_a_match_buffer_views():
    """Y is only stored to directly; its reads go through a view, so compaction must not
    move it into the producer's loops (the view would then name a buffer out of scope)."""
    A, B, Y = Buffer("A", (8, 8)), Buffer("B", (8, 8)), Buffer("Y", (8, 8))
    i, j, vi, vj, ii, jj, pi, pj, pvi, pvj = (
        Var(n) for n in ("i", "j", "vi", "vj", "ii", "jj", "pi", "pj", "pvi", "pvj")
    )
    prod = _loop(pi, 8, _loop(pj, 8, Block("Y", (IterVar(pvi, 8), IterVar(pvj, 8)), (pi, pj),
                                           BufferStore(Y, A[pvi, pvj] * 2.0, (pvi, pvj)))))
    Ys = Buffer("Ys", (4, 4))
    view = MatchBufferRegion(Ys, BufferRegion(Y, ((vi * 4, IntImm(4)), (vj * 4, IntImm(4)))))
    inner = _loop(ii, 4, _loop(jj, 4, BufferStore(B, Ys[ii, jj] + 1.0,
                                                  (vi * 4 + ii, vj * 4 + jj))))
    blk = Block("B", (IterVar(vi, 2), IterVar(vj, 2)), (i, j), inner, match_buffers=(view,))
    f = _func("viewed", (A, B), SeqStmt((prod, _loop(i, 2, _loop(j, 2, blk)))), allocs=(Y,))
    assert wb.lower(f)["viewed"].body.alloc_buffers == (Y,)
    a = np.random.default_rng(3).standard_normal((8, 8)).astype("float32")
    b = np.zeros_like(a)
    wb.build(f)(a, b)
    np.testing.assert_allclose(b, 2 * a + 1, rtol=1e-6)


def _scoped_let_func():
    A, B = Buffer("A", (8,)), Buffer("B", (8,))
    i, vi, x = Var("i"), Var("vi"), Var("x", "float32")
    body = SeqStmt((LetStmt(x, A[vi], BufferStore(B, x, (vi,))), BufferStore(B, A[vi] + B[vi],
                                                                           (vi,))))
    return _func("scoped", (A, B), _loop(i, 8, Block("B", (IterVar(vi, 8),), (i,), body)))


@pytest.mark.parametrize("make", [_let_func, _scoped_let_func, _pad_func, _tiled_copy,
                                  _int64_func, _extern_func])
@pytest.mark.parametrize("syntax", ["classic", "tirx"])
def test_printed_text_parses_back_to_the_same_text(make, syntax):
    f = make()
    text = f.script(syntax=syntax)
    parsed = wb.from_script(text)
    assert parsed.script(syntax=syntax) == text
    assert wb.verify(parsed, f).ok
