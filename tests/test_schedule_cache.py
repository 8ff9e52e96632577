"""Caching and storage primitives (cache_read, cache_write, set_scope, storage_align):
for every case the IR after the primitives equals a reviewed golden file
(``tests/golden/cache_<case>.txt``), the trace replays (JSON and Python text) to the
same IR, and the scheduled function computes what the unscheduled one does (the C
backend builds the cache buffers). Then one test per refusal, and the GPU-style tiled
matmul from the curriculum.

Regenerate the goldens after a deliberate change with
``python tests/test_schedule_cache.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable

import pytest

import workbench as wb
from workbench.codegen.cstyle import buffer_strides
from workbench.ir import Block, Buffer, BufferStore, For, IterVar, PrimFunc, SeqStmt, Var
from workbench.schedule.errors import BlockNotFoundError
from workbench.schedule.primitives.cache import (
    BufferIndexOutOfRangeError,
    BufferNotAccessedError,
    ConsumerBeforeProducerError,
    InvalidStorageScopeError,
    NonAllocatedBufferError,
    NotConsumerBlockError,
    NotSingleWriteBlockError,
)
from workbench.schedule.primitives.layout import (
    StorageAlignAxisOutOfRangeError,
    StorageAlignInvalidAnnotationError,
    StorageAlignInvalidFactorError,
)
from workbench.testing import (
    assert_schedule_error,
    assert_verifies,
    check_golden,
    matmul_func,
    mm_relu_func,
    roundtrip_trace,
    shared_outer_loop_func,
    write_golden,
)

N = 128


def softmax_func() -> PrimFunc:
    """``wb.workloads.softmax(16, 32)``: ``x`` is read by blocks "max" and "exp", the
    intermediate ``exp`` by "sum" and "norm"."""
    return wb.workloads.softmax(16, 32)


def _copy_chain(name: str, stages, params, allocs, n: int = 8) -> PrimFunc:
    """One loop per stage ``(block, out, value(v))``: ``out[v] = value(v)``."""
    nests = []
    for block_name, out, value in stages:
        i, v = Var("i"), Var("v")
        blk = Block(block_name, (IterVar(v, n),), (i,), BufferStore(out, value(v), (v,)))
        nests.append(For(i, n, "serial", blk))
    root = Block("root", (), (), SeqStmt(tuple(nests)), alloc_buffers=tuple(allocs))
    return PrimFunc(name, tuple(params), root)


def multi_producer_func() -> PrimFunc:
    """``X`` written by two blocks, "X0" then "X1" (in place), read by "D"."""
    A, X, D = (Buffer(x, (8,), "float32") for x in "AXD")
    stages = [
        ("X0", X, lambda v: A[v]),
        ("X1", X, lambda v: X[v] * 2.0),
        ("D", D, lambda v: X[v] + 1.0),
    ]
    return _copy_chain("multi_producer", stages, (A, D), (X,))


def in_place_func() -> PrimFunc:
    """Block "W" updates the parameter ``X`` in place (reads and writes it); "D" reads it."""
    A, X, D = (Buffer(x, (8,), "float32") for x in "AXD")
    stages = [("W", X, lambda v: X[v] + A[v]), ("D", D, lambda v: X[v] * 2.0)]
    return _copy_chain("in_place", stages, (A, X, D), ())


def read_before_write_func() -> PrimFunc:
    """Block "R" reads ``X`` before "W" writes it; "C" reads it after."""
    A, X, R, C = (Buffer(x, (8,), "float32") for x in ("A", "X", "R", "C"))
    stages = [
        ("R", R, lambda v: X[v]),
        ("W", X, lambda v: A[v]),
        ("C", C, lambda v: X[v] * 2.0),
    ]
    return _copy_chain("read_before_write", stages, (A, R, C), (X,))


def init_writer_func() -> PrimFunc:
    """What ``blockize`` makes of an accumulation: an outer block "X_o" whose ``init``
    (block "X_init") zeroes ``X`` and whose body (block "X_upd") accumulates into it."""
    A, X = Buffer("A", (16,), "float32"), Buffer("X", (16,), "float32")
    io, i1, i2 = Var("io"), Var("ii"), Var("ii")
    vo, v1, v2 = Var("vo"), Var("vi"), Var("vi")
    zero = BufferStore(X, wb.ir.const(0.0, "float32"), (vo * 4 + v1,))
    init = For(i1, 4, "serial", Block("X_init", (IterVar(v1, 4),), (i1,), zero))
    acc = BufferStore(X, X[vo * 4 + v2] + A[vo * 4 + v2], (vo * 4 + v2,))
    upd = For(i2, 4, "serial", Block("X_upd", (IterVar(v2, 4),), (i2,), acc))
    outer = Block("X_o", (IterVar(vo, 4),), (io,), upd, init=init)
    return PrimFunc("init_writer", (A, X), Block("root", (), (), For(io, 4, "serial", outer)))


# --------------------------------------------------------------------------- cases
# name -> (workload, schedule); the name is the golden file's (cache_<name>.txt).


def cache_read_input(sch):
    # A is a parameter: the copy goes first in the scope
    sch.cache_read(sch.get_block("Y"), 0, "shared")


def cache_read_two_inputs(sch):
    # each copy of an input goes first, so B_shared ends up before A_shared (as in TVM)
    y = sch.get_block("Y")
    sch.cache_read(y, 0, "shared")
    sch.cache_read(y, 1, "shared")


def cache_read_intermediate(sch):
    # Y is produced by block Y: the copy goes between Y and its consumer C
    sch.cache_read(sch.get_block("C"), 0, "local")


def cache_read_of_cache(sch):
    # caching the cache: A -> A_shared -> A_shared_local
    y = sch.get_block("Y")
    sch.cache_read(y, 0, "shared")
    sch.cache_read(y, 0, "local")


def cache_read_by_name(sch):
    sch.cache_read(sch.get_block("Y"), "B", "shared")


def cache_read_all_consumers(sch):
    # exp is read by "sum" and "norm": both read the copy, placed before "sum"
    sch.cache_read(sch.get_block("sum"), 0, "shared")


def cache_read_consumer_blocks(sch):
    # only "norm" reads the copy, placed right before it; "sum" still reads exp
    norm = sch.get_block("norm")
    sch.cache_read(norm, 0, "local", consumer_blocks=[norm])


def cache_read_input_one_consumer(sch):
    # x is read by "max" and "exp"; only "exp" switches, by block name
    sch.cache_read(sch.get_block("exp"), 0, "shared", consumer_blocks=["exp"])


def cache_read_inside_loop(sch):
    # producer B and consumer C share loop i: the copy goes inside it, one row a time
    sch.cache_read(sch.get_block("C"), 0, "local")


def cache_write_reduction(sch):
    # Y computes into Y_local; the copy back to Y goes before C, which still reads Y
    sch.cache_write(sch.get_block("Y"), 0, "local")


def cache_write_output(sch):
    # C is the function's output and has no consumer: the copy goes last
    sch.cache_write(sch.get_block("C"), 0, "local")


def cache_write_consumer_blocks(sch):
    # C reads Y_local directly; the copy back to Y goes last in the scope
    sch.cache_write(sch.get_block("Y"), 0, "local", consumer_blocks=[sch.get_block("C")])


def cache_write_inside_loop(sch):
    sch.cache_write(sch.get_block("B"), 0, "local")


def cache_write_then_read(sch):
    y = sch.get_block("Y")
    sch.cache_write(y, 0, "local")
    sch.cache_read(sch.get_block("C"), 0, "shared")


def set_scope_intermediate(sch):
    sch.set_scope(sch.get_block("Y"), 0, "shared")


def set_scope_of_cache(sch):
    a = sch.cache_read(sch.get_block("Y"), 0, "shared")
    sch.set_scope(a, 0, "local")


def storage_align_intermediate(sch):
    sch.storage_align(sch.get_block("Y"), 0, axis=0, factor=32, offset=1)


def storage_align_replace_and_add(sch):
    # same (buffer, axis) again replaces the entry; another axis adds one
    y = sch.get_block("Y")
    sch.storage_align(y, 0, axis=0, factor=32, offset=1)
    sch.storage_align(y, 0, axis=-2, factor=16, offset=4)
    sch.storage_align(y, 0, axis=1, factor=8, offset=0)


def gpu_matmul_caches(sch):
    """The curriculum's shared-memory matmul before compute_at: 32x32 tiles, A and B
    through shared memory, C through registers, the A tile padded to avoid bank
    conflicts."""
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, factors=[None, 32])
    j0, j1 = sch.split(j, factors=[None, 32])
    k0, k1 = sch.split(k, factors=[None, 32])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    a_shared = sch.cache_read(c, 0, "shared")
    sch.cache_read(c, 1, "shared")
    sch.cache_write(c, 0, "local")
    sch.storage_align(a_shared, 0, axis=-2, factor=32, offset=1)


Case = tuple[Callable[[], PrimFunc], Callable[[wb.Schedule], None]]

CASES: dict[str, Case] = {
    "read_input": (lambda: mm_relu_func(N), cache_read_input),
    "read_two_inputs": (lambda: mm_relu_func(N), cache_read_two_inputs),
    "read_intermediate": (lambda: mm_relu_func(N), cache_read_intermediate),
    "read_of_cache": (lambda: mm_relu_func(N), cache_read_of_cache),
    "read_by_name": (lambda: mm_relu_func(N), cache_read_by_name),
    "read_all_consumers": (softmax_func, cache_read_all_consumers),
    "read_consumer_blocks": (softmax_func, cache_read_consumer_blocks),
    "read_input_one_consumer": (softmax_func, cache_read_input_one_consumer),
    "read_inside_loop": (lambda: shared_outer_loop_func(8), cache_read_inside_loop),
    "write_reduction": (lambda: mm_relu_func(N), cache_write_reduction),
    "write_output": (lambda: mm_relu_func(N), cache_write_output),
    "write_consumer_blocks": (lambda: mm_relu_func(N), cache_write_consumer_blocks),
    "write_inside_loop": (lambda: shared_outer_loop_func(8), cache_write_inside_loop),
    "write_then_read": (lambda: mm_relu_func(N), cache_write_then_read),
    "set_scope_intermediate": (lambda: mm_relu_func(N), set_scope_intermediate),
    "set_scope_of_cache": (lambda: mm_relu_func(N), set_scope_of_cache),
    "storage_align_intermediate": (lambda: mm_relu_func(N), storage_align_intermediate),
    "storage_align_replace_and_add": (lambda: mm_relu_func(N), storage_align_replace_and_add),
    "gpu_matmul_caches": (lambda: matmul_func(N, N, N), gpu_matmul_caches),
}


def scheduled(case: str) -> tuple[wb.Schedule, PrimFunc]:
    make, schedule = CASES[case]
    func = make()
    sch = wb.Schedule(func)
    schedule(sch)
    return sch, func


# --------------------------------------------------------------------------- per case


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_after(case):
    sch, func = scheduled(case)
    text = sch.mod.script()
    assert text != wb.Schedule(func).mod.script(), "the primitives changed nothing"
    check_golden(f"cache_{case}", text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_trace_roundtrip(case):
    sch, func = scheduled(case)
    roundtrip_trace(sch, func)


@pytest.mark.parametrize("case", sorted(CASES))
def test_numerics(case):
    sch, func = scheduled(case)
    assert_verifies(sch, func)


def _comparable(text: str) -> list[str]:
    """Printed TVMScript without what the two printers write differently (header
    comments, function attributes, ``0.0`` against ``0`` in float literals)."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("#", "T.func_attr", "@")):
            continue
        out.append(re.sub(r"T\.float(\d+)\((-?\d+)\.0\)", r"T.float\1(\2)", line.rstrip()))
    return out


@pytest.mark.tvm
@pytest.mark.parametrize("case", sorted(CASES))
def test_same_ir_as_tvm(case):
    """Replaying our trace JSON on TVM's own schedule gives the IR we print (needs
    ``apache-tvm``; checked against 0.27)."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional check)")
    sch, func = scheduled(case)
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    theirs = tvm.s_tir.Schedule(mod)
    insts, decisions = sch.trace.as_json_obj()
    insts = [["GetSBlock", *inst[1:]] if inst[0] == "GetBlock" else inst for inst in insts]
    tvm.s_tir.schedule.Trace.apply_json_to_schedule([insts, decisions], theirs)
    assert _comparable(sch.mod.script(syntax="tirx")) == _comparable(theirs.mod.script())


# --------------------------------------------------------------------------- behaviour


def _names(func: PrimFunc) -> list[str]:
    return [b.name for b in wb.ir.iter_blocks(func.body)][1:]


def test_cache_read_returns_the_copy_block_and_keeps_handles():
    sch = wb.Schedule(mm_relu_func(16))
    y = sch.get_block("Y")
    loops = sch.get_loops(y)
    a_shared = sch.cache_read(y, 0, "shared")
    assert sch.get(a_shared).name == "A_shared"
    assert sch.get(a_shared).writes[0].buffer.scope == "shared"
    assert sch.get(y).name == "Y"
    assert [sch.get(lp).loop_var.name for lp in loops] == ["i", "j", "k"]
    assert [lp.loop_var.name for lp in map(sch.get, sch.get_loops(a_shared))] == ["ax0", "ax1"]
    assert _names(sch.func) == ["A_shared", "Y", "C"]


def test_cache_write_names_buffer_and_block_alike():
    sch = wb.Schedule(mm_relu_func(16))
    y = sch.get_block("Y")
    y_local = sch.cache_write(y, 0, "local")
    assert sch.get(y_local).name == "Y_local"
    assert [w.buffer.name for w in sch.get(y).writes] == ["Y_local"]
    assert [r.buffer.name for r in sch.get(y_local).reads] == ["Y_local"]
    assert [w.buffer.name for w in sch.get(y_local).writes] == ["Y"]
    assert [r.buffer.name for r in sch.get(sch.get_block("C")).reads] == ["Y"]
    assert _names(sch.func) == ["Y", "Y_local", "C"]


def test_repeated_cache_gets_fresh_names():
    """Two copies of A into shared memory (one per consumer) are A_shared and
    A_shared_1, buffers and blocks alike."""
    sch = wb.Schedule(softmax_func())
    first = sch.cache_read(sch.get_block("max"), 0, "shared", consumer_blocks=["max"])
    second = sch.cache_read(sch.get_block("exp"), 0, "shared", consumer_blocks=["exp"])
    assert (sch.get(first).name, sch.get(second).name) == ("x_shared", "x_shared_1")
    assert [b.name for b in sch.func.body.alloc_buffers][-2:] == ["x_shared", "x_shared_1"]
    roundtrip_trace(sch, softmax_func())
    assert_verifies(sch, softmax_func())


def test_trace_prints_and_serialises_like_tvm():
    sch = wb.Schedule(mm_relu_func(16))
    y = sch.get_block("Y")
    a = sch.cache_read(y, 0, "shared")
    sch.cache_write(y, 0, "local", consumer_blocks=["C"])
    sch.set_scope(a, 0, "shared.dyn")
    sch.storage_align(a, 0, axis=-2, factor=32, offset=1)
    assert sch.trace.lines() == [
        'b0 = sch.get_block(name="Y", func_name="mm_relu")',
        'b1 = sch.cache_read(block=b0, read_buffer_index=0, storage_scope="shared")',
        'b2 = sch.get_block(name="C", func_name="mm_relu")',
        'b3 = sch.cache_write(block=b0, write_buffer_index=0, storage_scope="local", '
        "consumer_blocks=[b2])",
        'sch.set_scope(block=b1, buffer_index=0, storage_scope="shared.dyn")',
        "sch.storage_align(block=b1, buffer_index=0, axis=-2, factor=32, offset=1)",
    ]
    insts = json.loads(sch.trace.as_json())[0]
    assert insts[1] == ["CacheRead", ["b0", []], [0, "shared"], ["b1"]]
    assert insts[3] == ["CacheWrite", ["b0", ["b2"]], [0, "local"], ["b3"]]
    assert insts[4] == ["SetScope", ["b1"], [0, "shared.dyn"], []]
    assert insts[5] == ["StorageAlign", ["b1"], [0, -2, 32, 1], []]
    roundtrip_trace(sch, mm_relu_func(16))


def test_buffer_names_are_recorded_as_indices():
    """As in TVM, a buffer given by name is recorded by its index."""
    sch = wb.Schedule(mm_relu_func(16))
    sch.cache_read(sch.get_block("Y"), "B", "shared")
    assert "read_buffer_index=1" in sch.trace.lines()[-1]


def test_set_scope_same_scope_changes_nothing_but_is_recorded():
    sch = wb.Schedule(mm_relu_func(16))
    before = sch.mod.script()
    sch.set_scope(sch.get_block("Y"), 0, "global")
    assert sch.mod.script() == before
    assert sch.trace.lines()[-1].startswith("sch.set_scope(")


def test_set_scope_keeps_alignment():
    sch = wb.Schedule(mm_relu_func(16))
    y = sch.get_block("Y")
    sch.storage_align(y, 0, axis=0, factor=32, offset=1)
    sch.set_scope(y, 0, "shared")
    buf = sch.func.buffers["Y_shared"]
    assert (buf.scope, buf.align) == ("shared", ((0, 32, 1),))


def test_storage_align_sets_the_buffer_layout():
    sch, _ = scheduled("gpu_matmul_caches")
    a_shared = sch.func.buffers["A_shared"]
    assert a_shared.align == ((0, 32, 1),)
    assert buffer_strides(a_shared) == ((129, 1), 128 * 129)
    assert buffer_strides(sch.func.buffers["B_shared"]) == ((128, 1), 128 * 128)


def test_gpu_matmul_full_pipeline():
    """The curriculum's shared-memory matmul, with compute_at and thread binding
    (other families' primitives): the copies move into the k_0 loop, the C_local
    write-back under j_0, and the result still computes the matmul."""
    sch, func = scheduled("gpu_matmul_caches")
    c = sch.get_block("C")
    i0, j0, k0, i1, j1, k1 = sch.get_loops(c)
    sch.compute_at(sch.get_block("A_shared"), k0)
    sch.compute_at(sch.get_block("B_shared"), k0)
    sch.reverse_compute_at(sch.get_block("C_local"), j0)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    k0_loop = sch.get(k0)
    assert {b.name for b in wb.ir.iter_blocks(k0_loop)} == {"A_shared", "B_shared", "C"}
    assert {b.name for b in wb.ir.iter_blocks(sch.get(j0))} >= {"C_local"}
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


# --------------------------------------------------------------------------- refusals


@pytest.fixture
def sch() -> wb.Schedule:
    return wb.Schedule(mm_relu_func(16))


def test_cache_read_fail_index_out_of_range(sch):
    y = sch.get_block("Y")
    e = assert_schedule_error(
        sch, lambda: sch.cache_read(y, 2, "shared"), BufferIndexOutOfRangeError, "Y"
    )
    assert "[0] A, [1] B" in str(e)
    assert_schedule_error(sch, lambda: sch.cache_read(y, -1, "shared"), BufferIndexOutOfRangeError)


def test_cache_write_fail_index_out_of_range(sch):
    c = sch.get_block("C")
    e = assert_schedule_error(
        sch, lambda: sch.cache_write(c, 1, "local"), BufferIndexOutOfRangeError, "C"
    )
    assert "[0] C" in str(e)


def test_set_scope_fail_index_out_of_range(sch):
    y = sch.get_block("Y")
    assert_schedule_error(sch, lambda: sch.set_scope(y, 1, "shared"), BufferIndexOutOfRangeError)
    assert_schedule_error(sch, lambda: sch.set_scope(y, -1, "shared"), BufferIndexOutOfRangeError)


def test_storage_align_fail_index_out_of_range(sch):
    y = sch.get_block("Y")
    assert_schedule_error(
        sch, lambda: sch.storage_align(y, 1, 0, 32, 1), BufferIndexOutOfRangeError, "Y"
    )


def test_cache_read_fail_unknown_scope(sch):
    y = sch.get_block("Y")
    e = assert_schedule_error(
        sch, lambda: sch.cache_read(y, 0, "test_scope"), InvalidStorageScopeError, "Y"
    )
    assert "test_scope" in str(e) and "shared" in str(e)


def test_cache_write_fail_unknown_scope(sch):
    y = sch.get_block("Y")
    assert_schedule_error(
        sch, lambda: sch.cache_write(y, 0, "registers"), InvalidStorageScopeError, "Y"
    )


def test_set_scope_fail_unknown_scope(sch):
    y = sch.get_block("Y")
    assert_schedule_error(sch, lambda: sch.set_scope(y, 0, "l2"), InvalidStorageScopeError, "Y")


def test_cache_read_fail_buffer_not_accessed(sch):
    y = sch.get_block("Y")
    e = assert_schedule_error(
        sch, lambda: sch.cache_read(y, "C", "shared"), BufferNotAccessedError, "Y", "C"
    )
    assert "[0] A, [1] B" in str(e)


def test_cache_write_fail_buffer_not_accessed(sch):
    y = sch.get_block("Y")
    assert_schedule_error(
        sch, lambda: sch.cache_write(y, "A", "local"), BufferNotAccessedError, "Y", "A"
    )


def test_set_scope_fail_parameter_buffer(sch):
    c = sch.get_block("C")
    e = assert_schedule_error(
        sch, lambda: sch.set_scope(c, 0, "shared"), NonAllocatedBufferError, "C"
    )
    assert "parameter" in str(e)


def test_storage_align_fail_parameter_buffer(sch):
    c = sch.get_block("C")
    assert_schedule_error(
        sch, lambda: sch.storage_align(c, 0, 0, 32, 1), NonAllocatedBufferError, "C"
    )


def test_storage_align_fail_factor(sch):
    y = sch.get_block("Y")
    for factor in (0, -32):
        e = assert_schedule_error(
            sch,
            lambda f=factor: sch.storage_align(y, 0, 0, f, 1),
            StorageAlignInvalidFactorError,
            "Y",
        )
        assert str(factor) in str(e)


def test_storage_align_fail_axis(sch):
    y = sch.get_block("Y")
    for axis in (2, -3):
        e = assert_schedule_error(
            sch,
            lambda a=axis: sch.storage_align(y, 0, a, 32, 1),
            StorageAlignAxisOutOfRangeError,
            "Y",
        )
        assert "[-2, 2)" in str(e)


def test_storage_align_fail_bad_annotation(sch):
    y = sch.get_block("Y")
    sch.annotate(y, ann_key="buffer_dim_align", ann_val="oops")
    assert_schedule_error(
        sch, lambda: sch.storage_align(y, 0, 0, 32, 1), StorageAlignInvalidAnnotationError, "Y"
    )


def test_cache_read_fail_consumer_does_not_read(sch):
    y, c = sch.get_block("Y"), sch.get_block("C")
    e = assert_schedule_error(
        sch,
        lambda: sch.cache_read(y, 0, "shared", consumer_blocks=[c]),
        NotConsumerBlockError,
        "C",
        "A",
    )
    assert "does not read" in str(e)


def test_cache_write_fail_consumer_does_not_read(sch):
    y = sch.get_block("Y")
    assert_schedule_error(
        sch,
        lambda: sch.cache_write(y, 0, "local", consumer_blocks=[y]),
        NotConsumerBlockError,
        "Y",
    )


def test_cache_read_fail_consumer_is_producer():
    sch = wb.Schedule(in_place_func())
    d, w = sch.get_block("D"), sch.get_block("W")
    e = assert_schedule_error(
        sch,
        lambda: sch.cache_read(d, 0, "local", consumer_blocks=[w]),
        NotConsumerBlockError,
        "W",
    )
    assert "writes" in str(e)


def test_cache_read_fail_unknown_consumer_name_keeps_trace(sch):
    """A consumer given by name is looked up first: a bad name refuses without
    recording the get_block of the good names before it."""
    y = sch.get_block("Y")
    assert_schedule_error(
        sch,
        lambda: sch.cache_read(y, 0, "shared", consumer_blocks=["Y", "nope"]),
        BlockNotFoundError,
        "nope",
    )
    assert_schedule_error(
        sch,
        lambda: sch.cache_read(y, 0, "shared", consumer_blocks=["Y", "C"]),
        NotConsumerBlockError,
        "C",
    )


def test_cache_read_fail_multi_producer():
    sch = wb.Schedule(multi_producer_func())
    d = sch.get_block("D")
    e = assert_schedule_error(
        sch, lambda: sch.cache_read(d, 0, "local"), NotSingleWriteBlockError, "X0", "X1"
    )
    assert "2 blocks" in str(e)


def test_cache_write_fail_multi_producer():
    sch = wb.Schedule(multi_producer_func())
    x0 = sch.get_block("X0")
    assert_schedule_error(
        sch, lambda: sch.cache_write(x0, 0, "local"), NotSingleWriteBlockError, "X0", "X1"
    )


def test_cache_write_fail_second_writer_in_init():
    """The scope's init writes the buffer too: caching only the update would leave the
    cache uninitialised, so both primitives refuse."""
    sch = wb.Schedule(init_writer_func())
    upd = sch.get_block("X_upd")
    assert_schedule_error(
        sch, lambda: sch.cache_write(upd, 0, "local"), NotSingleWriteBlockError, "X_init", "X_upd"
    )
    assert_schedule_error(
        sch, lambda: sch.cache_read(upd, "X", "local"), NotSingleWriteBlockError, "X_init"
    )


def test_cache_read_fail_consumer_before_producer():
    sch = wb.Schedule(read_before_write_func())
    c = sch.get_block("C")
    assert_schedule_error(
        sch, lambda: sch.cache_read(c, 0, "local"), ConsumerBeforeProducerError, "W"
    )


if __name__ == "__main__":  # pragma: no cover - regenerating goldens by hand
    if "--update-golden" not in sys.argv:
        sys.exit("usage: python tests/test_schedule_cache.py --update-golden")
    for name in sorted(CASES):
        print(write_golden(f"cache_{name}", scheduled(name)[0].mod.script()))
