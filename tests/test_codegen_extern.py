"""C functions called by kernels (``register_c_function``) and the C code of what tensor
intrinsic implementations use: ``A.data``, ``A.elem_offset``, ``A.access_ptr(...)`` /
``T.tvm_access_ptr``, and the stride variables of ``T.match_buffer`` views."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import CodegenError, generate_c
from workbench.codegen import extern as X
from workbench.testing import ir_identical

DOT4 = """
static inline void wb_test_ext_dot4(float* c, const float* a, const float* b, int32_t sb) {
  float s = 0.0f;
  for (int k = 0; k < 4; ++k) s += a[k] * b[k * sb];
  *c += s;
}"""

# C[i, j] += A[i, 4 ko: 4 ko + 4] . B[4 ko: 4 ko + 4, j], as tensorize leaves a dot product:
# views of the regions, the column of B with its row stride as a stride variable
VIEWS = '''
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
      C: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("init"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.float32(0)
    for i, j, ko in T.grid(8, 8, 2):
        with T.block("C_o"):
            vi, vj, vko = T.axis.remap("SSR", [i, j, ko])
            sb = T.int32()
            A1 = T.match_buffer(A[vi, vko * 4:vko * 4 + 4], (4,), offset_factor=1)
            B1 = T.match_buffer(B[vko * 4:vko * 4 + 4, vj], (4, 1), strides=[sb, 1],
                                offset_factor=1)
            C1 = T.match_buffer(C[vi, vj], (), offset_factor=1)
            T.evaluate(T.call_extern("void", "wb_test_ext_dot4", C1.access_ptr("rw"),
                                     A1.access_ptr("r"), B1.access_ptr("r"), sb))
'''


@pytest.fixture(autouse=True)
def _dot4():
    X.register_c_function("wb_test_ext_dot4", DOT4, override=True)


def _rand(*shape):
    return np.random.default_rng(0).random(shape, dtype=np.float32)


def test_register_c_function_refuses_bad_input():
    with pytest.raises(ValueError, match="not a C function name"):
        X.register_c_function("1abc", "void 1abc(void) {}")
    with pytest.raises(ValueError, match="does not define it"):
        X.register_c_function("wb_test_ext_f", "void other(void) {}")
    with pytest.raises(ValueError, match="not a header name"):
        X.register_c_function("wb_test_ext_f", "void wb_test_ext_f(void) {}",
                              headers=("immintrin.h; system()",))
    with pytest.raises(ValueError, match="CPU flags"):
        X.register_c_function("wb_test_ext_f", "void wb_test_ext_f(void) {}",
                              requires=("AVX2",))


def test_register_c_function_again_same_or_override():
    X.register_c_function("wb_test_ext_g", "static void wb_test_ext_g(void) {}")
    X.register_c_function("wb_test_ext_g", "static void wb_test_ext_g(void) {}")  # same: ok
    with pytest.raises(ValueError, match="already registered with a different definition"):
        X.register_c_function("wb_test_ext_g", "static void wb_test_ext_g(void) { ; }")
    fn = X.register_c_function("wb_test_ext_g", "static void wb_test_ext_g(void) { ; }",
                               headers=("<immintrin.h>", "#include <immintrin.h>"),
                               requires="avx2", override=True)
    assert fn.headers == ("#include <immintrin.h>",)
    assert fn.requires == ("avx2",)
    assert X.c_function("wb_test_ext_g") is fn
    assert "wb_test_ext_g" in X.c_function_names()


def _caller(name: str, n_calls: int = 1) -> wb.PrimFunc:
    calls = "\n".join(f'        T.evaluate(T.call_extern("void", "{name}", A.data))'
                      for _ in range(n_calls))
    return wb.from_script(f'''
@T.prim_func
def g(A: T.Buffer((4,), "float32")):
    with T.block("x"):
{calls}
''')


def test_registered_function_is_defined_once_with_its_headers_and_no_prototype():
    X.register_c_function("wb_test_ext_h", "static inline void wb_test_ext_h(float* a) "
                          "{ a[0] += 1.0f; }", headers=("immintrin.h",), override=True)
    src = generate_c(_caller("wb_test_ext_h", n_calls=2))
    assert src.count("static inline void wb_test_ext_h(float* a)") == 1
    assert src.count("#include <immintrin.h>") == 1
    assert "void wb_test_ext_h(void*);" not in src  # no prototype of its own
    assert src.count("(void)(wb_test_ext_h(A));") == 2
    # an unregistered function still gets a prototype (and no definition)
    assert "void wb_test_ext_missing(void*);" in generate_c(_caller("wb_test_ext_missing"))


def test_registered_function_runs():
    X.register_c_function("wb_test_ext_inc", "static inline void wb_test_ext_inc(float* a) "
                          "{ for (int i = 0; i < 4; ++i) a[i] += 1.0f; }", override=True)
    a = np.zeros(4, "float32")
    wb.build(_caller("wb_test_ext_inc", n_calls=3))(a)
    np.testing.assert_array_equal(a, np.full(4, 3.0, "float32"))


def test_missing_cpu_flag_refuses_the_build(monkeypatch):
    X.register_c_function("wb_test_ext_simd", "static inline void wb_test_ext_simd(float* a) "
                          "{ a[0] = 0.0f; }", requires=("avx2", "wb_no_such_flag"),
                          override=True)
    func = _caller("wb_test_ext_simd")
    with pytest.raises(CodegenError, match=r"wb_test_ext_simd.*wb_no_such_flag"):
        wb.build(func)
    with pytest.raises(CodegenError, match="wb_no_such_flag"):
        generate_c(func)
    # the text can still be read; on a machine with the flag it builds
    assert "wb_test_ext_simd" in generate_c(func, check_cpu=False)
    flags = X.cpu_flags() | {"avx2", "wb_no_such_flag"}
    monkeypatch.setattr(X, "cpu_flags", lambda: flags)
    assert "static inline void wb_test_ext_simd" in generate_c(func)


def test_cpu_flags_reads_proc_cpuinfo(tmp_path, monkeypatch):
    from workbench.runtime import peak

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n")
    monkeypatch.setattr(peak, "_CPUINFO", info)
    assert wb.codegen.cpu_flags() == frozenset({"fpu", "sse2", "avx2", "fma"})
    monkeypatch.setattr(peak, "_CPUINFO", tmp_path / "none")
    assert wb.codegen.cpu_flags() == frozenset()


def test_views_data_elem_offset_access_ptr_and_strides_in_c():
    func = wb.from_script(VIEWS)
    src = generate_c(func)
    # the stride variable is bound to B's row stride; pointers start at the regions
    assert "const int32_t sb = 8;" in src
    assert "wb_test_ext_dot4((C + (vi * 8 + vj)), (A + (vi * 8 + vko * 4)), " \
           "(B + (vko * 32 + vj)), sb)" in src
    a, b, c = _rand(8, 8), _rand(8, 8) + 1, np.zeros((8, 8), "float32")
    wb.build(func)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_elem_offset_and_data_of_a_view():
    func = wb.from_script('''
@T.prim_func
def f(A: T.Buffer((4, 8), "float32")):
    for i in range(4):
        with T.block("x"):
            vi = T.axis.spatial(4, i)
            A1 = T.match_buffer(A[vi, 2:6], (4,), offset_factor=1)
            T.evaluate(T.call_extern("void", "wb_test_ext_at", A1.data, A1.elem_offset))
''')
    X.register_c_function("wb_test_ext_at", "static inline void wb_test_ext_at(float* a, "
                          "int32_t off) { a[off] = (float)off; }", override=True)
    assert "wb_test_ext_at(A, vi * 8 + 2)" in generate_c(func)
    a = np.zeros((4, 8), "float32")
    wb.build(func)(a)
    assert [a[i, 2] for i in range(4)] == [2.0, 10.0, 18.0, 26.0]


def test_declared_constant_stride_must_be_the_arrays():
    with pytest.raises(wb.script.ParseError, match="strides"):  # the reader refuses it
        wb.from_script(VIEWS.replace("strides=[sb, 1]", "strides=[sb, 2]"))
    # IR built in Python: the code generator refuses it
    from workbench.ir import Block, BufferField, BufferRegion, Evaluate, MatchBufferRegion
    from workbench.ir.expr import IntImm, call_extern

    A = wb.Buffer("A", (4, 8))
    V = wb.Buffer("V", (4,), strides=(2,))
    region = BufferRegion(A, ((IntImm(1), IntImm(1)), (IntImm(0), IntImm(4))))
    body = Evaluate(call_extern("void", "wb_test_ext_at", BufferField(V, "data"), 0))
    block = Block("x", (), (), body, match_buffers=(MatchBufferRegion(V, region, 1),))
    func = wb.PrimFunc("f", (A,), Block("root", (), (), block))
    with pytest.raises(CodegenError, match=r"'V' declares stride 2 for dimension 0.*stride 1"):
        generate_c(func)


def test_parameter_stride_variables_are_the_compact_strides():
    func = wb.from_script('''
@T.prim_func
def f(var_A: T.handle):
    lda = T.int32()
    A = T.match_buffer(var_A, (4, 8), strides=[lda, 1])
    with T.block("x"):
        T.evaluate(T.call_extern("void", "wb_test_ext_at", A.data, lda))
''')
    assert "const int32_t lda = 8;" in generate_c(func)


def test_gpu_only_intrinsics_stay_refused():
    func = wb.from_script('''
@T.prim_func
def f(A: T.Buffer((16, 16), "float16")):
    with T.block("x"):
        T.evaluate(T.tvm_fill_fragment(A.data, 16, 16, 16, 0, T.float32(0)))
''')
    with pytest.raises(CodegenError, match="tvm_fill_fragment.*GPU-only"):
        generate_c(func)


def test_stride_variables_print_and_parse_back():
    func = wb.from_script(VIEWS)
    text = func.script()
    assert "sb = T.int32()" in text and "strides=(sb, 1)" in text
    assert ir_identical(func, wb.from_script(text)) is None
    # TVM's spelling: a quoted new name, used through B1.strides[0]
    tvm_text = VIEWS.replace("            sb = T.int32()\n", "").replace(
        "strides=[sb, 1]", 'strides=("sb", 1)').replace(", sb))", ", B1.strides[0]))")
    assert ir_identical(func, wb.from_script(tvm_text)) is None


def test_view_elem_offset_variable_as_tvm_prints_it():
    text = '''
@T.prim_func
def f(A: T.Buffer((4, 8), "float32")):
    for i in range(4):
        with T.block("x"):
            vi = T.axis.spatial(4, i)
            A_elem_offset = T.int32()
            A1 = T.match_buffer(A[vi, 2:6], (4,), elem_offset=A_elem_offset)
            T.evaluate(T.call_extern("void", "wb_test_ext_at", A1.data, A_elem_offset))
'''
    func = wb.from_script(text)
    m = func.body.body.body.match_buffers[0]
    assert m.offset_factor == 1
    assert '"wb_test_ext_at", A1.data, A1.elem_offset)' in func.script()
    bad = text.replace("elem_offset=A_elem_offset", "offset_factor=1")
    with pytest.raises(wb.script.ParseError, match="A_elem_offset.*not a stride"):
        wb.from_script(bad)
