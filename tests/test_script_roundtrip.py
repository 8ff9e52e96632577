"""Round trip: print -> parse -> print is identical, and the IR read back is the IR
printed, for every golden, every workload and a variety of scheduled functions, in
both syntaxes (classic ``T.block`` and TVM >= 0.24's ``T.sblock``)."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.testing import (
    GOLDEN_DIR,
    assert_script_roundtrip,
    conv2d_func,
    ir_identical,
    stochastic_schedule_mm,
)

GOLDENS = sorted(p.name for p in GOLDEN_DIR.glob("*.txt"))


def test_there_are_goldens_to_read():
    assert len(GOLDENS) > 100


@pytest.mark.parametrize("name", GOLDENS)
def test_golden_reads_back_to_the_same_text(name):
    text = (GOLDEN_DIR / name).read_text()
    if text.startswith("kernel "):  # a GPU schedule summary: launch lines, then the IR
        text = text.split("\n\n", 1)[1]
    x = wb.from_script(text)
    assert x.script() == text.rstrip("\n")
    assert_script_roundtrip(x)


@pytest.mark.parametrize("name", wb.workloads.names())
def test_workload_round_trips(name):
    func = wb.workloads.get(name)
    assert_script_roundtrip(func)
    assert_script_roundtrip(wb.IRModule.from_funcs(func))
    assert wb.structural_equal(wb.from_script(func.script(syntax="tirx")), func)


# ---------------------------------------------------------------------------
# scheduled functions


def _tiled(sch):
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    sch.parallel(i0)
    sch.unroll(k1)
    sch.vectorize(j1)


def _mlc(sch):
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(blk, k)


def _non_dividing(sch):
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, [None, 16])
    sch.split(k, [3, None])


def _gpu(sch):
    blk = sch.get_block("C")
    a_sh = sch.cache_read(blk, 0, "shared")
    sch.cache_read(blk, 1, "local")
    c_loc = sch.cache_write(blk, 0, "local")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, i1, j1, k0, k1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.compute_at(a_sh, k0)
    sch.reverse_compute_at(c_loc, j1)
    sch.storage_align(a_sh, 0, axis=0, factor=32, offset=1)


def _annotated(sch):
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    sch.annotate(i, "pragma_auto_unroll_max_step", 64)
    sch.annotate(j, "note", "a \"quoted\" string")
    sch.annotate(k, "weights", [1, 2, 3])
    sch.annotate(blk, "flag", True)
    sch.annotate(blk, "ratio", 0.25)


def _rfactor(sch):
    i, j, k = sch.get_loops(sch.get_block("C"))
    k0, k1 = sch.split(k, [None, 4])
    sch.rfactor(k1, 0)


def _blockize(sch):
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(i1)


def _conv_tile(sch):
    n, k, h, w, rc, ry, rx = sch.get_loops(sch.get_block("conv"))
    h0, h1 = sch.split(h, [None, 2])
    sch.compute_at(sch.get_block("pad"), h0)


def _chain_inline(sch):
    sch.compute_inline(sch.get_block("relu"))
    sch.reverse_compute_inline(sch.get_block("scale"))


def _fuse_split(sch):
    i, j = sch.get_loops(sch.get_block("B"))
    f = sch.fuse(i, j)
    f0, f1 = sch.split(f, [None, 48])
    sch.parallel(f0)


def _softmax(sch):
    sch.compute_at(sch.get_block("max"), sch.get_loops(sch.get_block("exp"))[0])
    sch.set_scope(sch.get_block("max"), 0, "local")


def _add_unit_loop(sch):
    sch.add_unit_loop(sch.get_block("C"))


SCHEDULES = {
    "tiled matmul": (lambda: wb.workloads.matmul(32, 32, 32), _tiled),
    "mlc mm_relu": (lambda: wb.workloads.mm_relu(32, 32, 32), _mlc),
    "non-dividing split (T.where)": (lambda: wb.workloads.matmul(20, 40, 12), _non_dividing),
    "gpu caches, bindings, storage_align": (lambda: wb.workloads.matmul(64, 64, 64), _gpu),
    "annotations of every kind": (lambda: wb.workloads.matmul(16, 16, 16), _annotated),
    "rfactor": (lambda: wb.workloads.matmul(8, 8, 16), _rfactor),
    "blockize (nested blocks)": (lambda: wb.workloads.matmul(16, 16, 8), _blockize),
    "conv pad compute_at": (lambda: conv2d_func(1, 2, 6, 3, 3), _conv_tile),
    "chain inlined": (lambda: wb.workloads.elementwise_chain(16, 8), _chain_inline),
    "fuse then split": (lambda: wb.workloads.transpose(24, 20), _fuse_split),
    "softmax local max": (lambda: wb.workloads.softmax(8, 16), _softmax),
    "stochastic (sample_perfect_tile)": (
        lambda: wb.workloads.matmul(16, 16, 16),
        lambda sch: stochastic_schedule_mm(sch, [4, 4]),
    ),
    "add_unit_loop": (lambda: wb.workloads.matmul(4, 4, 4), _add_unit_loop),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_scheduled_function_round_trips(name):
    make, schedule = SCHEDULES[name]
    sch = wb.Schedule(make())
    schedule(sch)
    assert_script_roundtrip(sch.mod)
    assert_script_roundtrip(sch.func)


def test_storage_align_survives_the_round_trip():
    """The printed ``buffer_dim_align`` attribute gives the buffer its padding back."""
    make, schedule = SCHEDULES["gpu caches, bindings, storage_align"]
    sch = wb.Schedule(make())
    schedule(sch)
    back = wb.from_script(sch.mod.script())
    assert back["matmul"].buffers["A_shared"].align == ((0, 32, 1),)
    assert sch.func.buffers["A_shared"].align == ((0, 32, 1),)


def test_parsed_schedule_replays_the_same_trace():
    """A function read from text schedules exactly like the original."""
    func = wb.workloads.mm_relu(32, 32, 32)
    theirs = wb.Schedule(wb.from_script(func.script(syntax="tirx")))
    ours = wb.Schedule(func)
    for sch in (theirs, ours):
        _mlc(sch)
    assert theirs.mod.script() == ours.mod.script()
    assert str(theirs.trace) == str(ours.trace)


# ---------------------------------------------------------------------------
# the newer IR constructs, written as text


INT64_AND_LETS = '''
@T.prim_func
def f(A: T.Buffer((T.int64(4), T.int64(8)), "float32"), B: T.Buffer((T.int64(4),), "float32")):
    for i in range(T.int64(4)):
        with T.block("B"):
            vi = T.axis.spatial(T.int64(4), i)
            with T.init():
                B[vi] = T.float32(0)
            for k in range(T.int64(8)):
                x: T.float32 = A[vi, k] * T.float32(2)
                B[vi] = B[vi] + T.if_then_else(x > T.float32(0), x, T.float32(0))
'''

SYMBOLIC = '''
@T.prim_func
def g(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 16))
    B = T.match_buffer(b, (n, 16))
    for i, j in T.grid(n, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.Let(y * y, where={y: A[vi, vj]})
'''

MATCH_AND_EXTERN = '''
@T.prim_func
def h(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(4):
        with T.block("outer"):
            vi = T.axis.spatial(4, i)
            As = T.match_buffer(A[vi * 4:vi * 4 + 4, 0:16], (4, 16))
            for j in range(4):
                with T.block("B"):
                    vj = T.axis.spatial(4, j)
                    B[vi * 4 + vj] = As[vj, 0]
    T.evaluate(T.call_extern("int32", "abs", 1))
    T.call_extern("int32", "abs", 2)
'''


@pytest.mark.parametrize("text", [INT64_AND_LETS, SYMBOLIC, MATCH_AND_EXTERN],
                         ids=["int64 and lets", "symbolic", "match_buffer and extern"])
def test_newer_constructs_round_trip(text):
    func = wb.from_script(text)
    assert_script_roundtrip(func)


def test_int64_loops_and_iterators_keep_their_dtype():
    func = wb.from_script(INT64_AND_LETS)
    loop = func.body.body
    block = loop.body
    assert loop.loop_var.dtype == "int64"
    assert block.iter_vars[0].var.dtype == "int64"
    assert func.params[0].index_dtype == "int64"
    assert "for i in range(T.int64(4)):" in func.script()


def test_symbolic_shapes_share_one_variable():
    func = wb.from_script(SYMBOLIC)
    (n,) = func.shape_vars
    a, b = func.params
    assert a.shape[0] is n and b.shape[0] is n
    assert func.body.body.extent is n


def test_identity_check_sees_what_printing_hides():
    """ir_identical compares what the text may not show (here a buffer's padding)."""
    func = wb.workloads.matmul(8, 8, 8)
    other = wb.from_script(func.script())
    assert ir_identical(func, other) is None
    a = func.params[0]
    padded = wb.ir.Buffer(a.name, a.shape, a.dtype, a.scope, align=((0, 32, 1),))
    changed = func.__class__(func.name, (padded,) + func.params[1:], func.body, func.attrs)
    assert changed.script() == func.script()
    assert ir_identical(func, changed) is not None


def test_a_cache_in_a_dotted_scope_prints_a_name_that_parses_back():
    """cache_read into "wmma.matrix_b" makes buffer `B_wmma.matrix_b`; printed as TVM
    prints it (`B_wmma_matrix_b`, the block keeps the dot), the text parses back."""
    sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    sch.cache_read(sch.get_block("C"), 1, "wmma.matrix_b")
    text = sch.mod.script()
    assert 'B_wmma_matrix_b = T.alloc_buffer((16, 16), scope="wmma.matrix_b")' in text
    assert 'T.block("B_wmma.matrix_b")' in text
    assert wb.from_script(text).script() == text
