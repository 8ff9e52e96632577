"""TVMScript forms that TVM's own tests and printer use, read with TVM's meaning:
``dtype=`` on calls, layout keywords, ``T.min_value`` / ``T.max_value``, scalar shape
parameters, opaque intrinsics and buffer fields, ``scope=""`` and tensor-core scopes,
open-ended region slices, closure constants in decorated functions, and the
refusal of a block name used twice.

Each form is read, printed, read again (the two prints are identical, in both
syntaxes) and, where it computes something, built and run against numpy. The tests
marked ``tvm`` check that TVM reads what we print (skipped without apache-tvm)."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import CodegenError, generate_c
from workbench.ir import BufferField, CallExtern, FloatImm, IntImm, OpaqueCall
from workbench.ir.analysis import iter_blocks
from workbench.runtime.reference import evaluate
from workbench.script import ParseError
from workbench.script import tir as T
from workbench.testing import assert_script_roundtrip


def reread(text: str):
    """Read ``text``; its print reads back to the same print and the same IR, in both
    syntaxes."""
    func = wb.from_script(text)
    assert_script_roundtrip(func)
    return func


def block(func, name: str):
    return next(b for b in iter_blocks(func.body) if b.name == name)


def regions(regs) -> list[str]:
    return [wb.ir.printer.region_to_str(r) for r in regs]


def refused(text: str, line: int, col: int, *words: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        wb.from_script(text)
    err = info.value
    assert (err.lineno, err.col) == (line, col), str(err)
    for w in words:
        assert w in err.msg, err.msg
    return err


# ---------------------------------------------------------------------------
# 1. dtype= on calls

PAD_EXP = '''
@T.prim_func
def pad_exp(A: T.Buffer((16,), "float32"), B: T.Buffer((20,), "float32")):
    for i in range(20):
        with T.block("B"):
            vi = T.axis.spatial(20, i)
            B[vi] = T.if_then_else(vi >= 2 and vi < 18,
                                   T.exp(A[vi - 2], dtype="float32"), 0, dtype="float32") \\
                + T.sqrt(T.float32(4), dtype="float32")
'''


def test_dtype_keyword_on_calls_reads_and_computes():
    f = reread(PAD_EXP)
    text = f.script()
    assert "dtype=" not in text  # TVM drops the keyword; so does the printed form
    assert "T.if_then_else(vi >= 2 and vi < 18, T.exp(A[vi - 2]), T.float32(0))" in text
    a = np.linspace(-1, 1, 16, dtype="float32")
    b = np.zeros(20, "float32")
    wb.build(f)(a, b)
    want = np.pad(np.exp(a), 2) + 2
    np.testing.assert_allclose(b, want, rtol=1e-6)


def test_dtype_keyword_naming_another_dtype_is_refused_where_it_is_written():
    text = PAD_EXP.replace('T.exp(A[vi - 2], dtype="float32")',
                           'T.exp(A[vi - 2], dtype="float16")')
    refused(text, 8, 59, 'dtype="float16" does not match', "float32")


def test_call_extern_takes_its_result_dtype_as_a_keyword():
    f = reread('''
@T.prim_func
def absval(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = T.call_extern("fabsf", A[vi], dtype="float32")
''')
    value = block(f, "B").body.value
    assert isinstance(value, CallExtern) and value.dtype == "float32"
    assert 'T.call_extern("float32", "fabsf", A[vi])' in f.script()
    a = np.linspace(-3, 3, 8, dtype="float32")
    b = np.zeros(8, "float32")
    wb.build(f)(a, b)
    np.testing.assert_allclose(b, np.abs(a))


def test_call_extern_with_an_empty_dtype_is_a_void_call():
    f = reread('''
@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("x"):
            vi = T.axis.spatial(4, i)
            T.evaluate(T.call_extern("note", A[vi], dtype=""))
''')
    assert 'T.call_extern("void", "note", A[vi])' in f.script()
    src = generate_c(f)
    assert "void note(int32_t);" in src and "(void)(note(A[vi]));" in src


# ---------------------------------------------------------------------------
# 2. layout keywords

LAYOUT = '''
@T.prim_func
def copy2(a: T.handle, C: T.Buffer((8, 4), "float32", align=64, offset_factor=1)):
    A = T.match_buffer(a, [8, 4], elem_offset=0, align=64, offset_factor=1,
                       strides=[4, 1])
    B = T.alloc_buffer([8, 4], elem_offset=0, align=64, offset_factor=0, buffer_type="")
    for i, j in T.grid(8, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            V = T.match_buffer(B[vi, 0:4], (4,), strides=[1], offset_factor=1)
            for j in range(4):
                C[vi, j] = V[j] + T.float32(1)
'''


@pytest.mark.parametrize("alloc", ["T.alloc_buffer", "T.sblock_alloc_buffer"])
def test_default_layout_keywords_are_accepted_and_mean_the_usual_buffers(alloc):
    f = reread(LAYOUT.replace("T.alloc_buffer", alloc))
    text = f.script()
    for kw in ("elem_offset", "align=", "strides", "buffer_type"):
        assert kw not in text
    assert "offset_factor=1" in text  # a block's match_buffer keeps it, as printed
    a = np.arange(32, dtype="float32").reshape(8, 4)
    c = np.zeros((8, 4), "float32")
    wb.build(f)(a, c)
    np.testing.assert_allclose(c, a * 2 + 1)


@pytest.mark.parametrize("old,new,line,col,word", [
    ("elem_offset=0, align", "elem_offset=4, align", 4, 47, "elem_offset"),
    ('"float32", align=64', '"float32", align=128', 3, 61, "align"),
    ("offset_factor=0", "offset_factor=2", 6, 71, "offset_factor"),
    ("strides=[4, 1]", "strides=[8, 1]", 5, 32, "strides"),
    ("(4,), strides=[1]", "(4,), strides=[2]", 14, 58, "strides"),
    ('buffer_type=""', 'buffer_type="auto_broadcast"', 6, 86, "buffer_type"),
])
def test_layout_keywords_that_change_the_layout_are_refused(old, new, line, col, word):
    assert old in LAYOUT
    err = refused(LAYOUT.replace(old, new), line, col, f"argument `{word}`", "default layout"
                  if word != "strides" else "compact and row-major")
    assert err.source_line is not None and word in err.source_line


def test_a_view_cannot_claim_an_element_offset():
    text = LAYOUT.replace("(4,), strides=[1], offset_factor=1",
                          "(4,), elem_offset=0, offset_factor=1")
    refused(text, 14, 62, "argument `elem_offset`")


# ---------------------------------------------------------------------------
# 3. T.min_value / T.max_value

ROW_MAX = '''
@T.prim_func
def row_max(A: T.Buffer((4, 16), "float32"), M: T.Buffer((4,), "float32"),
            L: T.Buffer((4,), "int8")):
    for i, k in T.grid(4, 16):
        with T.block("M"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                M[vi] = T.min_value("float32")
            M[vi] = T.max(M[vi], A[vi, vk])
    for i in range(4):
        with T.block("L"):
            vi = T.axis.spatial(4, i)
            L[vi] = T.max_value("int8")
'''


def test_min_and_max_value_are_the_dtype_limits_and_round_trip():
    f = reread(ROW_MAX)
    init = block(f, "M").init.value
    assert isinstance(init, FloatImm) and init.value == -np.finfo("float32").max
    assert "T.float32(-3.4028234663852886e+38)" in f.script()
    lim = block(f, "L").body.value
    assert isinstance(lim, IntImm) and (lim.value, lim.dtype) == (127, "int8")
    a = -np.abs(np.random.default_rng(0).standard_normal((4, 16))).astype("float32") - 1e30
    m, lo = np.zeros(4, "float32"), np.zeros(4, "int8")
    wb.build(f)(a, m, lo)
    np.testing.assert_array_equal(m, a.max(axis=1))
    np.testing.assert_array_equal(lo, 127)


@pytest.mark.parametrize("dtype,low,high", [
    ("int32", -(2**31), 2**31 - 1), ("int64", -(2**63), 2**63 - 1), ("uint8", 0, 255),
    ("float16", -65504.0, 65504.0), ("float64", -np.finfo("float64").max,
                                      np.finfo("float64").max)])
def test_dtype_limits_print_as_constants_that_read_back(dtype, low, high):
    text = f'''
@T.prim_func
def lim(A: T.Buffer((2,), "{dtype}")):
    with T.block("A"):
        A[0] = T.min_value("{dtype}")
        A[1] = T.max_value("{dtype}")
'''
    f = reread(text)
    values = [s.value for s in block(f, "A").body.stmts]
    assert [(v.value, v.dtype) for v in values] == [(low, dtype), (high, dtype)]


def test_min_value_needs_a_known_dtype():
    refused(ROW_MAX.replace('T.min_value("float32")', 'T.min_value("float8")'), 9, 37,
            "unknown dtype 'float8'")


# ---------------------------------------------------------------------------
# 4. scalar parameters as shape variables

SCALED = '''
@T.prim_func
def scaled(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (4, n))
    B = T.match_buffer(b, (4, n))
    for i, j in T.grid(4, n):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(3)
'''


def test_scalar_parameter_is_the_shape_variable():
    f = reread(SCALED)
    assert [(v.name, v.dtype) for v in f.shape_vars] == [("n", "int32")]
    assert [p.name for p in f.params] == ["A", "B"]  # values come from the arrays
    assert "    n = T.int32()\n" in f.script()
    a = np.arange(4 * 37, dtype="float32").reshape(4, 37)
    b = np.zeros_like(a)
    wb.build(f)(a, b)
    np.testing.assert_allclose(b, a * 3)


def test_scalar_parameter_before_its_buffers_as_tvm_prints_it():
    # TVM prints the shape variable quoted where it first appears, the scalar last
    f = reread('''
@T.prim_func
def f(A: T.Buffer((4, "n"), "float32"), B: T.Buffer((4, n), "float32"), n: T.int64):
    for i, j in T.grid(4, n):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]
''')
    (n,) = f.shape_vars
    assert n.dtype == "int64" and f.params[0].shape[1] is n and f.params[1].shape[1] is n


def test_int64_scalar_inside_a_shape_expression_reads():
    f = reread('''
@T.prim_func
def g(x: T.handle, y: T.handle, n: T.int64):
    X = T.match_buffer(x, (T.int64(8), n * 32), "float32")
    Y = T.match_buffer(y, (T.int64(8), n * 32), "float32")
    for i, k in T.grid(T.int64(8), n * 32):
        with T.block("Y"):
            vi, vk = T.axis.remap("SS", [i, k])
            Y[vi, vk] = X[vi, vk]
''')
    assert "Y = T.match_buffer(var_Y, (T.int64(8), n * T.int64(32)))" in f.script()
    assert f.params[0].index_dtype == "int64"


def test_scalar_parameter_in_no_shape_is_refused():
    text = SCALED.replace("n: T.int32):", "n: T.int32, m: T.int32):")
    refused(text, 3, 53, "scalar parameter `m: T.int32`", "not used in any buffer shape")
    refused(SCALED.replace("n: T.int32", "n: T.float32"), 3, 41,
            "scalar parameter `n: T.float32`", "int32 / int64")


# ---------------------------------------------------------------------------
# 5. opaque intrinsics and buffer fields

OPAQUE = '''
@T.prim_func
def wmma(A: T.Buffer((32, 32), "float16"), L: T.Buffer((1024,), "int8"),
         C: T.Buffer((32, 32), "float16")):
    F = T.alloc_buffer((32, 32), "float16", scope="wmma.accumulator")
    for i, j in T.grid(2, 2):
        with T.block("fill"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads()
            T.writes(F[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16])
            T.evaluate(T.tvm_fill_fragment(F.data, 16, 16, 16, vi * 2 + vj, T.float32(0),
                                           dtype="handle"))
    for i, j in T.grid(2, 2):
        with T.block("load"):
            vi, vj = T.axis.remap("SS", [i, j])
            S = T.match_buffer(A[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16], (16, 16),
                               "float16", strides=[32, 1], offset_factor=1)
            T.evaluate(L.access_ptr("r"))
            T.evaluate(T.tvm_load_matrix_sync(
                F.data, 16, 16, 16, vi * 2 + vj,
                T.tvm_access_ptr(T.type_annotation(dtype="float16"), S.data, S.elem_offset,
                                 S.strides[0], 1, dtype="handle"),
                S.strides[0], "row_major", dtype="handle"))
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.evaluate(T.call_extern("note", C.data, dtype=""))
            C[vi, vj] = A[vi, vj]
'''


def test_opaque_intrinsics_read_and_print_back():
    f = reread(OPAQUE)
    text = f.script()
    assert "T.tvm_fill_fragment(F.data, 16, 16, 16, vi * 2 + vj, T.float32(0))" in text
    # A.access_ptr is the call TVM makes of it; strides[0] is the declared stride
    assert 'T.tvm_access_ptr(T.type_annotation("int8"), L.data, 0, 1024, 1)' in text
    assert ('T.tvm_access_ptr(T.type_annotation("float16"), S.data, S.elem_offset, 32, 1), '
            '32, "row_major")') in text
    assert 'T.call_extern("void", "note", C.data)' in text
    load = block(f, "load").body.stmts[1].value
    assert isinstance(load, OpaqueCall) and load.op == "tvm_load_matrix_sync"
    assert isinstance(load.args[0], BufferField) and load.args[0].buffer.scope == \
        "wmma.accumulator"


def test_buffer_fields_are_whole_buffer_accesses_as_in_tvm():
    f = wb.from_script(OPAQUE)
    fill = block(f, "fill")  # F.data: read and written, all of it
    assert regions(fill.reads) == ["F[0:32, 0:32]"]
    assert regions(fill.writes) == ["F[0:32, 0:32]"]
    load = block(f, "load")  # access_ptr mask 1: read only; a view's access is its region
    assert regions(load.reads) == ["L[0:1024]", "F[0:32, 0:32]",
                                   "A[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16]"]
    assert regions(load.writes) == ["F[0:32, 0:32]"]
    c = block(f, "C")
    assert regions(c.reads) == ["C[0:32, 0:32]", "A[vi, vj]"]
    assert regions(c.writes) == ["C[0:32, 0:32]"]


def test_write_mask_of_access_ptr_makes_a_write_only_access():
    f = wb.from_script('''
@T.prim_func
def f(A: T.Buffer((64,), "float32")):
    with T.block("w"):
        T.evaluate(A.access_ptr("w", offset=8, extent=16))
''')
    w = block(f, "w")
    assert regions(w.reads) == [] and regions(w.writes) == ["A[0:64]"]
    assert "T.tvm_access_ptr(T.type_annotation(\"float32\"), A.data, 8, 16, 2)" in f.script()


def test_opaque_calls_are_refused_by_the_c_backend_with_their_text():
    f = wb.from_script(OPAQUE)
    with pytest.raises(CodegenError, match=r"cannot build `T\.tvm_fill_fragment"):
        wb.build(f)
    extern = wb.from_script('''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    with T.block("x"):
        T.evaluate(T.call_extern("note", A.data, dtype=""))
''')
    # ``A.data`` is the array's pointer in C (what a tensor intrinsic hands a C function)
    assert "(void)(note(A));" in wb.codegen.generate_c(extern)


@pytest.mark.parametrize("code,col,words", [
    ("T.evaluate(A.strides[0])", 20, ("declares no strides",)),
    ("T.evaluate(A.shape_of)", 20, ("buffer attribute `shape_of`",)),
    ('T.evaluate(A.vload([0]))', 20, ("buffer method `vload`",)),
    ('T.evaluate(A.access_ptr("x"))', 33, ("access mask",)),
    ('T.evaluate(T.tvm_fill_fragment(A.data, 1, dtype="int32"))', 20, ("returns a handle",)),
    ("T.evaluate(T.tvm_access_ptr(A.data, 0, 4, 1))", 20, ("T.tvm_access_ptr takes",)),
])
def test_unsupported_buffer_uses_are_located_errors(code, col, words):
    text = f'''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    with T.block("x"):
        {code}
'''
    refused(text, 5, col, *words)


# ---------------------------------------------------------------------------
# 6. scopes and open-ended region slices

def test_empty_scope_is_global_and_fragment_scopes_print_back():
    f = reread('''
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    G = T.alloc_buffer((64,), scope="")
    W = T.alloc_buffer((64,), scope="wmma.matrix_a")
    for i in range(64):
        with T.block("G"):
            vi = T.axis.spatial(64, i)
            T.reads(A[:64])
            T.writes(G[0:])
            G[vi] = A[vi] + T.float32(1)
    for i in range(64):
        with T.block("W"):
            vi = T.axis.spatial(64, i)
            T.reads(G[8:])
            W[vi] = G[vi] * T.float32(2)
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = W[vi]
''')
    G, W = f.body.alloc_buffers
    assert (G.scope, W.scope) == ("global", "wmma.matrix_a")
    assert 'W = T.alloc_buffer((64,), scope="wmma.matrix_a")' in f.script()
    assert "G = T.alloc_buffer((64,))\n" in f.script()
    a = np.arange(64, dtype="float32")
    b = np.zeros(64, "float32")
    wb.build(f)(a, b)  # the C target keeps a fragment as a local array
    np.testing.assert_allclose(b, (a + 1) * 2)


def test_region_slice_bounds_default_to_the_dimension():
    f = wb.from_script('''
@T.prim_func
def f(A: T.Buffer((8, 8), "float32")):
    with T.block("x"):
        T.reads(A[:4, 2:])
        T.evaluate(T.call_extern("int32", "use", A[0, 2]))
''')
    assert regions(block(f, "x").reads) == ["A[0, 2]"]  # derived from the body
    refused('''
@T.prim_func
def f(A: T.Buffer((8, 8), "float32")):
    with T.block("x"):
        T.reads(A[::2, 0])
        A[0, 0] = T.float32(0)
''', 5, 19, "no step")


# ---------------------------------------------------------------------------
# 7. free names of decorated functions

MODULE_TAG = "from-module"


def test_decorated_function_reads_plain_constants_of_its_scope():
    note, width = 'say "hi"', 8

    @wb.prim_func
    def f(A: T.Buffer((8,), "float32")):
        for i in range(width):
            with T.block("b"):
                vi = T.axis.spatial(width, i)
                T.block_attr({"note": note, "tag": MODULE_TAG})
                A[vi] = T.float32(0)

    ann = dict(block(f, "b").annotations)
    assert ann == {"note": 'say "hi"', "tag": "from-module"}
    assert wb.from_script(f.script()).script() == f.script()


def test_decorated_function_refuses_other_values_of_its_scope():
    shape = (8,)

    with pytest.raises(ParseError, match="name `shape` is a tuple of the enclosing Python"):
        @wb.prim_func
        def f(A: T.Buffer((8,), "float32")):
            with T.block("b"):
                A[0] = shape


def test_text_has_no_scope_to_read_constants_from():
    refused('''
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    with T.block("b"):
        A[0] = MODULE_TAG
''', 5, 16, "name `MODULE_TAG` is not defined")


def test_module_class_methods_read_their_closure_constants():
    label = "tile"

    @wb.ir_module
    class Mod:
        @T.prim_func
        def main(A: T.Buffer((4,), "float32")):
            with T.block("b"):
                T.block_attr({"label": label})
                A[0] = T.float32(1)

    assert dict(block(Mod["main"], "b").annotations) == {"label": "tile"}


# ---------------------------------------------------------------------------
# 8. refused on purpose

def test_block_name_twice_says_why_it_is_refused():
    refused('''
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    with T.block("b"):
        A[0] = T.float32(0)
    with T.block("b"):
        A[1] = T.float32(0)
''', 6, 18, 'block name "b" is used twice', "first on line 4", "identifies blocks by name")


def test_scan_iterators_stay_refused():
    refused('''
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("b"):
            v = T.axis.scan(8, i)
            A[v] = T.float32(0)
''', 6, 17, "T.axis.scan")


# ---------------------------------------------------------------------------
# TVM reads what we print (optional: needs apache-tvm)

TVM_TEXTS = {
    "dtype keyword": PAD_EXP,
    "layout keywords": LAYOUT,
    "limits": ROW_MAX,
    "scalar shape parameter": SCALED,
    "opaque intrinsics": OPAQUE,
}


@pytest.mark.tvm
@pytest.mark.parametrize("name", list(TVM_TEXTS))
def test_tvm_reads_our_print_of_these_forms(name):
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    ours = wb.IRModule.from_funcs(wb.from_script(TVM_TEXTS[name]))
    theirs = tvm.script.from_source(ours.script(syntax="tirx"))
    back = wb.from_script(theirs.script())
    assert back.script() == ours.script()
    tvm.ir.assert_structural_equal(tvm.script.from_source(back.script(syntax="tirx")), theirs)


# ---------------------------------------------------------------------------
# T.likely: a branch hint that prints back and otherwise means its condition

PAD_MAX = '''
@T.prim_func
def pad_max(X: T.Buffer((12, 12), "float32"), Y: T.Buffer((12, 12), "float32")):
    P = T.alloc_buffer((12, 12))
    for i, j in T.grid(12, 12):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = X[vi, vj]
    for i, j, di, dj in T.grid(12, 12, 3, 3):
        with T.block("Y"):
            vi, vj, vdi, vdj = T.axis.remap("SSRR", [i, j, di, dj])
            with T.init():
                Y[vi, vj] = T.float32(-100)
            Y[vi, vj] = T.max(Y[vi, vj], T.if_then_else(
                T.likely(1 <= vi + vdi, dtype="bool") and T.likely(vi + vdi < 13)
                and T.likely(1 <= vj + vdj) and T.likely(vj + vdj < 13),
                P[vi + vdi - 1, vj + vdj - 1], T.float32(0), dtype="float32"))
    for i in range(12):
        with T.block("edge"):
            vi = T.axis.spatial(12, i)
            if T.likely(vi < 11):
                Y[vi, 0] = Y[vi, 0] + T.float32(1)
'''


def _pad_max_numpy(x: np.ndarray) -> np.ndarray:
    p = np.pad(x, 1)
    y = np.max([p[a:a + 12, b:b + 12] for a in range(3) for b in range(3)], axis=0)
    y[:11, 0] += 1
    return y


def test_likely_prints_back_and_computes_its_condition():
    f = reread(PAD_MAX)
    for syntax in ("classic", "tirx"):
        text = f.script(syntax=syntax)
        assert "T.likely(1 <= vi + vdi) and T.likely(vi + vdi < 13)" in text
        assert "if T.likely(vi < 11):" in text
        assert 'dtype="bool"' not in text  # TVM drops the keyword
    x = np.random.default_rng(0).standard_normal((12, 12)).astype("float32")
    y = np.zeros((12, 12), "float32")
    wb.build(f)(x, y)
    np.testing.assert_allclose(y, _pad_max_numpy(x), rtol=1e-6)
    # the numpy reference reads single-store blocks: the function without "edge"
    core = wb.from_script(PAD_MAX[:PAD_MAX.index("    for i in range(12):")])
    y_ref = np.zeros((12, 12), "float32")
    evaluate(core, x, y_ref)
    want = _pad_max_numpy(x)
    want[:11, 0] -= 1
    np.testing.assert_allclose(y_ref, want, rtol=1e-6)


def test_compute_at_of_a_producer_read_under_likely_gets_tvms_predicate():
    # the consumer reads P[vi + vdi - 1, ...]: computed at loop i, the producer covers
    # the rows inside P only (TVM's test_compute_at_tiled_pooling_read_cache, smaller)
    sch = wb.Schedule(wb.from_script(PAD_MAX))
    i = sch.get_loops(sch.get_block("Y"))[0]
    sch.compute_at(sch.get_block("P"), i)
    text = sch.func.script()
    assert "T.where(1 <= i + ax0 and i + ax0 < 13)" in text, text
    assert_script_roundtrip(sch.func)
    x = np.random.default_rng(1).standard_normal((12, 12)).astype("float32")
    y = np.zeros((12, 12), "float32")
    wb.build(sch.func)(x, y)
    np.testing.assert_allclose(y, _pad_max_numpy(x), rtol=1e-6)


def test_likely_condition_narrows_a_block_read_region_as_tvm_does():
    # TVM's conditional bounds look through T.likely: A is read at k in [4, 8) only
    f = reread('''
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), Y: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("Y"):
            vi = T.axis.spatial(8, i)
            for k in range(8):
                Y[vi] = Y[vi] + T.if_then_else(T.likely(k >= 4), A[vi, k], T.float32(0))
''')
    assert regions(block(f, "Y").reads) == ["Y[vi]", "A[vi, 4:8]"]


def test_likely_of_a_constant_is_the_constant_and_simplifies_through():
    from workbench.ir.expr import likely
    from workbench.ir.simplify import simplify

    i = wb.Var("i")
    assert isinstance(likely(True), IntImm)
    assert simplify(likely(i < 4), {i: (0, 3)}).value == 1
    assert str(simplify(likely(i < 4))) == "T.likely(i < 4)"


# ---------------------------------------------------------------------------
# a store converts its value to the buffer's dtype (TVM's parser adds the T.Cast)

MIXED_STORE = '''
@T.prim_func
def mixed(A: T.Buffer((8,), "int32"), B: T.Buffer((8,), "float32"),
          C: T.Buffer((8,), "int8")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + 1
            C[vi] = B[vi] * 2.5
    for i in range(8):
        with T.block("K"):
            vi = T.axis.spatial(8, i)
            A[vi] = 7.9
            B[vi] = T.int64(3)
'''


def test_store_of_another_dtype_gets_a_cast_and_computes():
    f = reread(MIXED_STORE)
    text = f.script()
    assert 'B[vi] = T.Cast("float32", A[vi] + 1)' in text
    assert 'C[vi] = T.Cast("int8", B[vi] * T.float32(2.5))' in text
    assert "A[vi] = 7\n" in text  # a constant is converted, truncated (TVM's make_const)
    assert text.endswith("B[vi] = T.float32(3)")
    a = np.arange(8, dtype="int32") - 3
    b = np.zeros(8, "float32")
    c = np.zeros(8, "int8")
    wb.build(f)(a, b, c)
    np.testing.assert_array_equal(a, np.full(8, 7))
    b_want = (np.arange(8) - 3 + 1).astype("float32")
    c_want = (b_want * 2.5).astype("int8")
    np.testing.assert_array_equal(c, c_want)
    np.testing.assert_array_equal(b, np.full(8, 3, "float32"))


def test_store_of_a_constant_out_of_the_buffer_range_is_refused():
    refused('''
@T.prim_func
def f(C: T.Buffer((8,), "int8")):
    C[0] = 300
''', 4, 12, "constant 300 stored into `C`", "int8")
    refused('''
@T.prim_func
def f(U: T.Buffer((8,), "uint8")):
    U[0] = -1
''', 4, 12, "out of the range of uint8")


@pytest.mark.tvm
@pytest.mark.parametrize("text", [PAD_MAX, MIXED_STORE], ids=["likely", "store cast"])
def test_tvm_reads_our_print_of_likely_and_store_casts(text):
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    ours = wb.IRModule.from_funcs(wb.from_script(text))
    theirs = tvm.script.from_source(ours.script(syntax="tirx"))
    # TVM reads the original text the same way (its parser adds the same casts)
    tirx = (text.replace("@T.prim_func", "@T.prim_func(s_tir=True)")
            .replace("T.block", "T.sblock").replace("T.alloc_buffer", "T.sblock_alloc_buffer"))
    (theirs_func,) = theirs.functions.values()
    tvm.ir.assert_structural_equal(tvm.script.from_source(tirx).body, theirs_func.body,
                                   map_free_vars=True)
    back = wb.from_script(theirs.script())
    assert back.script() == ours.script()
