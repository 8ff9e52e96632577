"""Reading TVMScript: both dialects, each construct, the decorators, located errors
for what is not supported, and the printer fixes the round trip needs."""

from __future__ import annotations

import ast
import inspect
import warnings

import pytest

import workbench as wb
from workbench.ir import Block, BufferStore, For, IterVar, PrimFunc, Var, const
from workbench.script import ParseError
from workbench.script import ir as I
from workbench.script import tir as T
from workbench.testing import assert_script_roundtrip

CLASSIC = '''
from tvm.script import tir as T

@T.prim_func
def mm(a: T.handle, B: T.Buffer([16, 16], dtype="float32"), C: T.Buffer((16, 16), "float32")):
    T.func_attr({"global_symbol": "mm", "tir.noalias": True})
    A = T.match_buffer(a, (16, 16), "float32")
    Y = T.alloc_buffer((16, 16), dtype="float32", scope="global")
    for i, j in T.grid(16, 16):
        for k in T.serial(0, 16):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                vk = T.axis.reduce(16, k)
                T.reads([A[vi, vk], B[vk, vj]])
                T.writes([Y[vi, vj]])
                with T.init():
                    Y[vi, vj] = 0.0
                Y[vi, vj] += A[vi, vk] * B[vk, vj]
    for i in T.parallel(16):
        for j in T.vectorized(16):
            with T.block("C"):
                vi = T.axis.S(16, i)
                vj = T.axis.spatial((0, 16), j)
                C[vi, vj] = T.max(Y[vi, vj], 0.0)  # relu
'''

TIRX = '''
# from tvm.script import ir as I
# from tvm.script import tirx as T

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def mm(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        Y = T.sblock_alloc_buffer((16, 16))
        for i, j, k in T.grid(16, 16, 16):
            with T.sblock("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(Y[vi, vj])
                with T.init():
                    Y[vi, vj] = T.float32(0.0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i in T.parallel(16):
            for j in T.vectorized(16):
                with T.sblock("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(Y[vi, vj])
                    T.writes(C[vi, vj])
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0.0))
'''


def _expected_mm() -> PrimFunc:
    sch = wb.Schedule(wb.workloads.mm_relu(16, 16, 16))
    i, j = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    sch.vectorize(j)
    from dataclasses import replace

    return replace(sch.func, name="mm")


def test_classic_and_tirx_dialects_read_the_same_function():
    classic = wb.from_script(CLASSIC)
    tirx = wb.from_script(TIRX)
    assert isinstance(classic, PrimFunc)
    assert isinstance(tirx, wb.IRModule) and tirx.names == ["mm"]
    expected = _expected_mm()
    assert wb.structural_equal(classic, expected)
    assert wb.structural_equal(tirx["mm"], expected)
    assert classic.attrs == () and tirx["mm"].attrs == ()


def test_parse_is_an_alias_and_text_may_be_indented():
    text = "\n".join("        " + line for line in CLASSIC.splitlines())
    assert wb.structural_equal(wb.script.parse(text), wb.from_script(CLASSIC))


def test_every_module_spelling_is_accepted():
    body = TIRX.split("class Module:")[1]
    for deco in ("@I.ir_module", "@tvm.script.ir_module", "@ir_module", "@wb.ir_module"):
        imports = "from tvm.script import ir_module\n" if deco == "@ir_module" else ""
        mod = wb.from_script(f"{imports}{deco}\nclass MyModule:{body}")
        assert mod.names == ["mm"]


def test_aliases_follow_the_imports():
    text = CLASSIC.replace("import tir as T", "import tir as S").replace("T.", "S.")
    assert wb.structural_equal(wb.from_script(text), wb.from_script(CLASSIC))


def test_several_functions_make_a_module():
    one = CLASSIC.split("@T.prim_func")[1]
    two = one.replace("def mm(", "def mm2(")
    mod = wb.from_script(f"@T.prim_func{one}\n@T.prim_func{two}")
    assert mod.names == ["mm", "mm2"]


def test_private_and_other_prim_func_options_change_nothing():
    base = wb.from_script(CLASSIC)
    for deco in ("@T.prim_func(private=True)", "@T.prim_func(s_tir=True)",
                 "@T.prim_func(check_well_formed=False)", "@T.prim_func()"):
        text = CLASSIC.replace("@T.prim_func", deco)
        assert wb.structural_equal(wb.from_script(text), base)


def test_func_attr_keeps_only_what_the_printer_does_not_add():
    text = CLASSIC.replace('"tir.noalias": True', '"tir.noalias": True, "op_pattern": 4, '
                                                  '"tirx.is_scheduled": T.bool(True)')
    func = wb.from_script(text)
    assert func.attrs == (("op_pattern", 4), ("tirx.is_scheduled", True))
    other = wb.from_script(CLASSIC.replace('"global_symbol": "mm"', '"global_symbol": "x"'))
    assert other.attrs == (("global_symbol", "x"),)


def test_buffers_scopes_dtypes_and_loop_kinds():
    text = '''
@T.prim_func
def f(A: T.Buffer((8, 4), "float16"), B: T.Buffer((8,), "int32")):
    S = T.alloc_buffer((8,), "float16", scope="shared")
    for i in T.thread_binding(8, thread="threadIdx.x"):
        for j in T.unroll(4, annotations={"pragma_unroll_explicit": 1}):
            with T.block("S"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    S[vi] = T.float16(0)
                S[vi] = S[vi] + A[vi, vj]
    for i in T.thread_binding(0, 8, "blockIdx.x"):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            T.where(vi < 6)
            T.block_attr({"note": "x", "ok": T.bool(False)})
            B[vi] = T.Cast("int32", S[vi]) + T.cast(T.float32(1.5), "int32")
'''
    func = wb.from_script(text)
    s = func.buffers["S"]
    assert (s.dtype, s.scope) == ("float16", "shared")
    outer = func.body.body.stmts[0]
    assert (outer.kind, outer.thread_tag) == ("thread_binding", "threadIdx.x")
    assert outer.body.kind == "unrolled"
    assert outer.body.annotations == (("pragma_unroll_explicit", 1),)
    b = wb.ir.find_block(func, "B")
    assert b.annotations == (("note", "x"), ("ok", False))
    assert wb.ir.expr_to_str(b.predicate) == "vi < 6"
    assert_script_roundtrip(func)


def test_expressions_build_the_nodes_the_text_names():
    text = '''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), N: T.Buffer((8,), "int32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = (T.Select(vi % 2 == 0 and not vi > 5, T.exp(A[vi]) / 2.0, -A[vi])
                     + T.sqrt(T.abs(A[vi])))
            N[vi] = (T.floordiv(vi, 2) + T.floormod(vi, 3) + T.truncdiv(vi, 2)
                     + vi // 3 * 2 - 1 + T.min(vi, 4))
            B[vi] = T.float32("inf") if False else B[vi]
'''
    with pytest.raises(ParseError, match="conditional expression"):
        wb.from_script(text)
    func = wb.from_script(text.replace(" if False else B[vi]", ""))
    (body,) = [s for s in wb.ir.iter_stmts(func.body) if isinstance(s, Block) and s.name == "B"]
    first, second, third = body.body.stmts
    assert type(first.value).__name__ == "Add"
    assert type(first.value.a).__name__ == "Select"
    assert type(second.value.b).__name__ == "Min"
    assert type(third.value).__name__ == "FloatImm" and third.value.value == float("inf")
    assert_script_roundtrip(func)


def test_python_literal_arithmetic_folds_and_literals_take_the_other_dtype():
    text = '''
@T.prim_func
def f(A: T.Buffer((T.int64(64),), "float32")):
    for i in range(2 * 32):
        with T.block("A"):
            vi = T.axis.spatial(T.int64(64), T.int64(0) + i)
            A[vi] = A[vi] + 1
'''
    func = wb.from_script(text)
    loop = func.body.body
    assert loop.extent == 64 and loop.loop_var.dtype == "int32"
    block = loop.body
    assert block.iter_vars[0].var.dtype == "int64"
    value = block.iter_values[0]
    assert value.dtype == "int64"  # int64 + int32 loop var widens, as TVM does
    store = block.body
    assert type(store.value.b).__name__ == "FloatImm"  # the literal 1 became T.float32(1)


def test_zero_dimensional_buffers_print_and_read_back():
    """Before the fix the printer wrote ``A[]`` (not Python)."""
    A = wb.Buffer("A", (), "float32")
    B = wb.Buffer("B", (4,), "float32")
    i, vi = Var("i"), Var("vi")
    blk = Block("b", (IterVar(vi, 4),), (i,), BufferStore(B, A[()] + const(1.0), (vi,)))
    func = PrimFunc("f", (A, B), Block("root", (), (), For(i, 4, "serial", blk)))
    text = func.script()
    assert "A[()]" in text and "A[]" not in text
    ast.parse(text)
    assert_script_roundtrip(func)


def test_remap_only_where_the_iterator_spans_its_loop():
    """``T.axis.remap`` re-reads an iterator's extent from its loop: printing it for an
    iterator of extent 8 under a loop of 4 changed the IR (it read back as 4)."""
    C = wb.Buffer("C", (8,), "float32")
    j, vj = Var("j"), Var("vj")
    blk = Block("c", (IterVar(vj, 8),), (j,), BufferStore(C, const(0.0), (vj,)))
    func = PrimFunc("g", (C,), Block("root", (), (), For(j, 4, "serial", blk)))
    text = func.script()
    assert "vj = T.axis.spatial(8, j)" in text
    back = wb.from_script(text)
    assert wb.ir.find_block(back, "c").iter_vars[0].extent == 8
    assert_script_roundtrip(func)
    full = PrimFunc("g", (C,), Block("root", (), (), For(j, 8, "serial", blk)))
    assert 'vj = T.axis.remap("S", [j])' in full.script()


def test_comparisons_of_comparisons_are_parenthesized():
    """Python chains ``a < b == c``; the printer wrote that for ``(a < b) == c``."""
    C = wb.Buffer("C", (8,), "float32")
    j, vj = Var("j"), Var("vj")
    cond = wb.ir.EQ(wb.ir.LT(vj, const(4)), wb.ir.LT(vj, const(2)))
    blk = Block("c", (IterVar(vj, 8),), (j,), BufferStore(C, const(0.0), (vj,)), predicate=cond)
    func = PrimFunc("g", (C,), Block("root", (), (), For(j, 8, "serial", blk)))
    assert "T.where((vj < 4) == (vj < 2))" in func.script()
    assert_script_roundtrip(func)


def test_annotation_strings_with_newlines_print_as_python():
    sch = wb.Schedule(wb.workloads.matmul(4, 4, 4))
    sch.annotate(sch.get_block("C"), "note", 'two\nlines, a "quote" and a \\')
    assert 'T.block_attr({"note": "two\\nlines, a \\"quote\\" and a \\\\"})' in sch.mod.script()
    assert_script_roundtrip(sch.mod)


def test_regions_are_derived_from_the_body():
    """The text's T.reads/T.writes are checked, not kept: the regions come from the
    body (here the text omits that the block also reads C)."""
    text = '''
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi, 0:8])
            T.writes(C[vi])
            C[vi] = T.float32(0)
            for k in range(8):
                C[vi] += A[vi, k]
'''
    block = wb.ir.find_block(wb.from_script(text), "C")
    assert [r.buffer.name for r in block.reads] == ["C", "A"]
    assert [r.buffer.name for r in block.writes] == ["C"]
    a_region = block.reads[1].region
    assert [(wb.ir.expr_to_str(m), wb.ir.expr_to_str(e)) for m, e in a_region] == [
        ("vi", "1"), ("0", "8")]


def test_opaque_block_regions_match_the_text():
    """An opaque block (no iterators, loops inside) gets the regions its text states."""
    text = '''
@T.prim_func
def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    with T.block("copy"):
        T.reads(A[0:4, 0:8])
        T.writes(B[0:4, 0:8])
        for i, j in T.grid(4, 8):
            B[i, j] = A[i, j]
'''
    block = wb.ir.find_block(wb.from_script(text), "copy")
    text_regions = "T.reads(A[0:4, 0:8])", "T.writes(B[0:4, 0:8])"
    printed = wb.from_script(text).script()
    assert all(r in printed for r in text_regions)
    assert block.iter_vars == ()


def test_a_region_the_body_never_touches_is_refused():
    text = '''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    with T.block("opaque"):
        T.reads(A[0:4])
        T.writes(B[0:4])
        T.evaluate(T.call_extern("int32", "fill", 0))
'''
    with pytest.raises(ParseError, match='block "opaque": T.reads names buffer `A`') as info:
        wb.from_script(text)
    assert info.value.lineno == 5


def test_an_explicit_root_block_is_the_root():
    """TVM prints ``with T.sblock("root"):`` (with empty regions) in diagnostics."""
    text = TIRX.split("# with T.sblock(\"root\"):")
    body = "\n".join("    " + line if line.strip() else line for line in text[1].splitlines())
    explicit = (text[0] + 'with T.sblock("root"):\n            T.reads()\n'
                "            T.writes()" + body)
    assert wb.structural_equal(wb.from_script(explicit), wb.from_script(TIRX))
    with pytest.raises(ParseError, match='a block named "root" must be the whole function'):
        wb.from_script(explicit.replace('with T.sblock("root")',
                                        'T.evaluate(0)\n        with T.sblock("root")'))


TVM_SYMBOLIC_PRINT = '''
# from typing import TypeVar
# from tvm.script import ir as I
# from tvm.script import tirx as T

n = TypeVar("n")
@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def f(A: T.Buffer((n, T.int64(128)), "float32"), B: T.Buffer((n, T.int64(128)), "float32")):
        # with T.sblock("root"):
        for i, j in T.grid(n, T.int64(128)):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2.0)

    @T.prim_func(s_tir=True)
    def g(A: T.Buffer(("n", 128), "float32"), B: T.Buffer((n, 128), "float32")):
        n = T.int32()
        # with T.sblock("root"):
        for i, j in T.grid(n, 128):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2.0)
'''


def test_tvm_prints_of_symbolic_shapes_read_in():
    """TVM 0.27 prints an int64 shape variable as a module-level TypeVar and an int32
    one quoted in the signature (then declared in the body)."""
    mod = wb.from_script(TVM_SYMBOLIC_PRINT)
    (n64,) = mod["f"].shape_vars
    (n32,) = mod["g"].shape_vars
    assert (n64.dtype, n32.dtype) == ("int64", "int32")
    assert mod["g"].params[1].shape[0] is n32
    assert "n = T.int64()" in mod["f"].script() and "n = T.int32()" in mod["g"].script()
    assert_script_roundtrip(mod)


def test_relax_functions_are_left_out_with_a_warning():
    text = TIRX.replace("class Module:", "class Module:\n    @R.function\n    def forward(x):\n"
                                         "        return x\n")
    with pytest.warns(wb.script.SkippedFunctionWarning, match="forward"):
        mod = wb.from_script(text)
    assert mod.names == ["mm"]


# ---------------------------------------------------------------------------
# errors


def _bad(body: str, sig: str = 'A: T.Buffer((8,), "float32")') -> str:
    return f"@T.prim_func\ndef f({sig}):\n" + "\n".join("    " + x for x in body.splitlines())


ERRORS = {
    "unknown function": (_bad("A[0] = T.nope(1)"), 3, 12, "unknown TVMScript function T.nope"),
    "loop start": (_bad("for i in range(-2, 8):\n    A[i] = T.float32(0)"), 3, 20,
                   "a loop starts at a constant integer >= 0"),
    "while": (_bad("while True:\n    pass"), 3, 5, "`while` loop is not supported"),
    "vector slice": (_bad("A[0:4] = T.float32(0)"), 3, 7, "slices of buffer `A`"),
    "undefined name": (_bad("A[0] = x"), 3, 12, "name `x` is not defined"),
    "scan iterator": (_bad('with T.block("b"):\n    v = T.axis.scan(8, 0)\n'
                           "    A[v] = T.float32(0)"), 4, 13, "T.axis.scan"),
    "remap of an expression": (_bad('for i in range(4):\n    with T.block("b"):\n'
                                    '        v = T.axis.remap("S", [i * 2])\n'
                                    "        A[v] = T.float32(0)"), 5, 36,
                               "T.axis.remap binds loop variables"),
    # a store converts its value to the buffer's dtype (as TVM); a constant out of range
    # is refused (as TVM)
    "constant out of range": (_bad("A[0] = T.int32(3)", 'A: T.Buffer((8,), "bool")'), 3, 12,
                              "constant 3 stored into `A` is out of the range of bool"),
    "strides": (_bad("A[0] = T.float32(0)", 'A: T.Buffer((8,), "float32", strides=(2,))'), 2,
                44, "argument `strides` is not supported"),
    "scalar parameter": (_bad("A[0] = T.float32(0)", "n: T.int32"), 2, 10,
                         "scalar parameter `n: T.int32`"),
    "return": (_bad("return"), 3, 5, "`return` is not supported"),
    "unknown scope": (_bad('S = T.alloc_buffer((8,), scope="texture")\nA[0] = S[0]'), 3, 36,
                      "unknown scope 'texture'"),
    "unknown thread": (_bad('for i in T.thread_binding(8, thread="warp.x"):\n'
                            "    A[i] = T.float32(0)"), 3, 14, "unknown thread axis"),
    "wrong index count": (_bad("A[0, 1] = T.float32(0)"), 3, 5, "indexed with 2"),
    "power": (_bad("A[0] = T.float32(2) ** 2"), 3, 12, "operator `**`"),
    "if on a python value": (_bad("if 1:\n    A[0] = T.float32(0)"), 3, 8, "an `if` tests"),
    "init outside a block": (_bad("with T.init():\n    A[0] = T.float32(0)"), 3, 10,
                             "T.init() belongs in a block"),
    "init inside a loop of the block": (
        _bad('with T.block("b"):\n    for k in range(2):\n        with T.init():\n'
             "            A[0] = T.float32(0)\n        A[k] = T.float32(1)"), 5, 18,
        'T.init() must stand directly in the block "b"'),
    "where inside an if": (
        _bad('for i in range(8):\n    with T.block("b"):\n        vi = T.axis.spatial(8, i)\n'
             "        if vi > 2:\n            T.where(vi < 6)\n            A[vi] = T.float32(0)"),
        7, 17, 'T.where must stand directly in the block "b"'),
    "block name twice": (
        _bad('with T.block("b"):\n    A[0] = T.float32(0)\nwith T.block("b"):\n'
             "    A[1] = T.float32(0)"), 5, 18, 'block name "b" is used twice'),
    "buffer name twice": (_bad("A = T.alloc_buffer((8,))\nA[0] = T.float32(0)"), 3, 9,
                          "buffer name `A` is used twice"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_unsupported_construct_is_a_located_error(case):
    text, line, col, message = ERRORS[case]
    with pytest.raises(ParseError) as info:
        wb.from_script(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert message in err.msg
    assert (err.lineno, err.col) == (line, col), str(err)
    rendered = str(err)
    assert f"line {line}, column {col}" in rendered
    assert text.splitlines()[line - 1].strip() in rendered
    caret_line = rendered.splitlines()[-1]
    assert caret_line.strip().startswith("^")


def test_python_syntax_errors_are_parse_errors():
    with pytest.raises(ParseError, match="invalid Python syntax") as info:
        wb.from_script("@T.prim_func\ndef f(A: T.Buffer((4,), 'float32'):\n    pass\n")
    assert info.value.lineno == 2


def test_text_without_a_function_or_with_other_statements():
    with pytest.raises(ParseError, match="holds no @T.prim_func"):
        wb.from_script("import tvm\n")
    with pytest.raises(ParseError, match="this statement is none of those"):
        wb.from_script(CLASSIC + "\nsch = tvm.tir.Schedule(mm)\n")
    with pytest.raises(ParseError, match="needs the @T.prim_func decorator"):
        wb.from_script(CLASSIC.replace("@T.prim_func", ""))
    with pytest.raises(ParseError, match="more than one module"):
        wb.from_script(TIRX + TIRX.replace("class Module", "class Other"))


# ---------------------------------------------------------------------------
# decorators and the inert namespaces


@wb.prim_func
def scale(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * T.float32(2)


@wb.ir_module
class ScaleModule:
    @T.prim_func
    def scale(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi] * T.float32(2)


@T.prim_func(private=True)
def scale_again(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2)


@I.ir_module
class AgainModule:
    @T.prim_func(s_tir=True)
    def scale(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.sblock("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] * T.float32(2)


def test_decorators_read_the_source():
    assert isinstance(scale, PrimFunc) and scale.name == "scale"
    assert isinstance(ScaleModule, wb.IRModule) and ScaleModule.names == ["scale"]
    assert wb.structural_equal(ScaleModule["scale"], scale)
    assert isinstance(scale_again, PrimFunc)
    assert wb.structural_equal(AgainModule["scale"], scale)
    from dataclasses import replace

    assert wb.structural_equal(replace(scale_again, name="scale"), scale)
    wb.verify(scale, scale_again)


def test_decorated_function_errors_point_into_the_file():
    def broken(A: T.Buffer((4,), "float32")):
        A[0] = T.nope(1)

    with pytest.raises(ParseError) as info:
        wb.prim_func(broken)
    err = info.value
    _, first = inspect.getsourcelines(broken)
    assert err.lineno == first + 1
    assert err.filename == __file__
    assert "A[0] = T.nope(1)" in str(err)
    assert err.col == 16


def test_the_namespaces_are_inert():
    placeholder = T.Buffer((T.int64(4),), "float32")[0].anything(1, x=2)
    assert isinstance(placeholder, wb.script.Placeholder)
    assert "placeholder" in repr(T.axis.remap("SS", []))
    assert isinstance(I.anything, wb.script.Placeholder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        T.int64(5), T.float32("inf"), T.handle  # noqa: B018


def test_prim_func_inside_a_class_is_left_for_the_class():
    def method(A: T.Buffer((4,), "float32")):
        pass

    method.__qualname__ = "SomeClass.method"
    assert T.prim_func(method) is method
    assert T.prim_func(private=True)(method) is method
