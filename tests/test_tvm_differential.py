"""Differential tests against TVM itself (needs ``apache-tvm``; skipped without it).

Each case prints one of our workloads in TVM >= 0.24 syntax, lets TVM parse it,
replays *our* trace JSON on TVM's own ``s_tir.Schedule``, and checks that both
schedules produce the same loop nests (extents, kinds and order, block by block)
and that TVM's compiled kernel and ours compute the same result.

    pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb
from workbench.runtime.reference import random_args
from workbench.testing import gpu_tiled_matmul

tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional comparison)")

pytestmark = pytest.mark.tvm

_LOOP = re.compile(r"^(\s*)for (.+?) in (T\.grid|range|T\.serial|T\.parallel|T\.vectorized|"
                   r"T\.unroll|T\.thread_binding)\((.*)\):")
_BLOCK = re.compile(r'^(\s*)with T\.s?block\("([^"]+)"\):')


def loop_nests(text: str) -> dict[str, list[tuple[int, str]]]:
    """Per block name: the chain of (extent, kind) of the loops around it (within
    its scope), read off printed TVMScript of either tool."""
    stack: list[tuple[int, list[tuple[int, str]]]] = []  # (indent, loops opened there)
    nests: dict[str, list[tuple[int, str]]] = {}
    for line in text.splitlines():
        m = _LOOP.match(line)
        b = _BLOCK.match(line)
        indent = len((m or b).group(1)) if (m or b) else None
        if indent is None:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if m:
            kind = {"T.grid": "serial", "range": "serial", "T.serial": "serial",
                    "T.parallel": "parallel", "T.vectorized": "vectorized",
                    "T.unroll": "unrolled", "T.thread_binding": "thread_binding"}[m.group(3)]
            args = [a.strip() for a in m.group(4).split(",")]
            extents = [int(a) for a in args if re.fullmatch(r"\d+", a)]
            if kind == "thread_binding":
                extents = extents[:1]
            stack.append((indent, [(e, kind) for e in extents]))
        else:
            nests[b.group(2)] = [lp for _, loops in stack for lp in loops]
            stack.append((indent, []))
    return nests


def tvm_replay(func: wb.PrimFunc, trace: wb.Trace):
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    sch = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(trace.as_json_obj(syntax="tirx"), sch)
    return sch


def run_tvm(sch, func: wb.PrimFunc, args: list[np.ndarray]) -> list[np.ndarray]:
    ex = tvm.compile(sch.mod, target=tvm.target.Target({"kind": "llvm"}))
    dev = tvm.cpu()
    tensors = [tvm.runtime.tensor(a.copy(), dev) for a in args]
    ex[func.name](*tensors)
    return [t.numpy() for t in tensors]


def seed_mm_relu(sch: wb.Schedule) -> None:
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)


def tiled_matmul(sch: wb.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, factors=[None, 8])
    j0, j1 = sch.split(j, factors=[None, 16])
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    sch.parallel(i0)
    sch.unroll(k1)
    sch.vectorize(j1)


def fused_nonuniform(sch: wb.Schedule) -> None:
    i, j = sch.get_loops(sch.get_block("B"))
    f = sch.fuse(i, j)
    sch.split(f, factors=[None, 48])


def conv_pad_at_tile(sch: wb.Schedule) -> None:
    n, k, h, w, rc, ry, rx = sch.get_loops(sch.get_block("conv"))
    h0, h1 = sch.split(h, factors=[None, 7])
    w0, w1 = sch.split(w, factors=[None, 7])
    sch.reorder(h0, w0, h1, w1)
    sch.compute_at(sch.get_block("pad"), w0)


def chain_fused(sch: wb.Schedule) -> None:
    n, c = sch.get_loops(sch.get_block("scale"))
    sch.compute_at(sch.get_block("batch_norm"), n)
    sch.compute_at(sch.get_block("relu"), n)


def chain_inlined(sch: wb.Schedule) -> None:
    sch.compute_inline(sch.get_block("relu"))
    sch.reverse_compute_inline(sch.get_block("scale"))


def non_dividing_split(sch: wb.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, factors=[None, 16])


def mlc_full(sch: wb.Schedule) -> None:
    seed_mm_relu(sch)
    sch.decompose_reduction(sch.get_block("Y"), sch.get_loops(sch.get_block("Y"))[2])


def stochastic(sch: wb.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    factors = sch.sample_perfect_tile(j, n=2, decision=[4, 16])
    j0, j1 = sch.split(j, factors=factors)
    sch.reorder(i, j0, k, j1)


def gpu_style(sch: wb.Schedule) -> None:
    gpu_tiled_matmul(sch)
    sch.storage_align(sch.get_block("A_shared"), 0, axis=0, factor=32, offset=1)


def forum_local_tile(sch: wb.Schedule) -> None:
    mm = sch.get_block("matmul")
    sch.compute_inline(sch.get_block("bias_add"))
    i, j, k = sch.get_loops(mm)
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(j0, k, j1)
    sch.set_scope(mm, 0, "local")
    sch.reverse_compute_at(sch.get_block("relu"), j0)


def rfactor_sum(sch: wb.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    k0, k1 = sch.split(k, [None, 4])
    sch.rfactor(k1, 0)


def blockized_tile(sch: wb.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1)
    sch.blockize(i1)


CASES = {
    "mm_relu seed": (lambda: wb.workloads.mm_relu(64, 64, 64), seed_mm_relu),
    "tiled matmul": (lambda: wb.workloads.matmul(64, 64, 64), tiled_matmul),
    "fuse then split": (lambda: wb.workloads.transpose(32, 40), fused_nonuniform),
    "conv pad compute_at": (lambda: wb.workloads.conv2d_nchw(1, 4, 14, 14, 4), conv_pad_at_tile),
    "chain compute_at": (lambda: wb.workloads.elementwise_chain(32, 8), chain_fused),
    "chain inline": (lambda: wb.workloads.elementwise_chain(32, 8), chain_inlined),
    "non-dividing split": (lambda: wb.workloads.matmul(32, 40, 16), non_dividing_split),
    "mlc with decompose_reduction": (lambda: wb.workloads.mm_relu(64, 64, 64), mlc_full),
    "sample_perfect_tile": (lambda: wb.workloads.matmul(64, 64, 64), stochastic),
    "forum local tile": (lambda: wb.workloads.linear_bias_relu(1, 48, 64), forum_local_tile),
    "rfactor": (lambda: wb.workloads.matmul(16, 16, 32), rfactor_sum),
    "blockize": (lambda: wb.workloads.matmul(32, 32, 16), blockized_tile),
}

# GPU-bound schedules: TVM's CPU target cannot run thread bindings, so only the loop
# nests are compared (our C target runs them serially; numerics are tested elsewhere).
STRUCTURE_ONLY = {
    "gpu-style matmul": (lambda: wb.workloads.matmul(64, 64, 64), gpu_style),
}


@pytest.mark.parametrize("name", list(STRUCTURE_ONLY))
def test_same_loop_nests_as_tvm_for_gpu_schedules(name):
    make, schedule = STRUCTURE_ONLY[name]
    func = make()
    ours = wb.Schedule(func)
    schedule(ours)
    theirs = tvm_replay(func, ours.trace)
    assert loop_nests(ours.mod.script(syntax="tirx")) == loop_nests(theirs.mod.script())


@pytest.mark.parametrize("name", list(CASES))
def test_same_loop_nests_and_results_as_tvm(name):
    make, schedule = CASES[name]
    func = make()
    ours = wb.Schedule(func)
    schedule(ours)
    theirs = tvm_replay(func, ours.trace)
    assert loop_nests(ours.mod.script(syntax="tirx")) == loop_nests(theirs.mod.script())

    args = random_args(func, seed=3)
    expected = run_tvm(theirs, func, args)
    got = [a.copy() for a in args]
    wb.build(ours.mod)(*got)
    for e, g, p in zip(expected, got, func.params, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4, err_msg=f"buffer {p.name}")


def test_loop_nest_reader_sees_kinds_and_extents():
    func = wb.workloads.matmul(64, 64, 64)
    sch = wb.Schedule(func)
    tiled_matmul(sch)
    nests = loop_nests(sch.mod.script(syntax="tirx"))
    assert nests["C"] == [
        (8, "parallel"), (4, "serial"), (16, "serial"), (8, "serial"), (4, "unrolled"),
        (16, "vectorized"),
    ]


@pytest.mark.parametrize("name", list(CASES) + list(STRUCTURE_ONLY))
def test_schedule_file_replays_in_tvm(name, tmp_path):
    """A saved schedule file is all TVM needs: it parses the file's module text and
    applies the file's trace JSON, and gets our loop nests."""
    import json

    make, schedule = {**CASES, **STRUCTURE_ONLY}[name]
    ours = wb.Schedule(make())
    schedule(ours)
    data = json.loads(ours.save(tmp_path / "s.json", target="c").read_text())
    theirs = tvm.s_tir.Schedule(tvm.script.from_source(data["module"]))
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(data["trace"], theirs)
    loaded = wb.load_schedule(tmp_path / "s.json")
    assert loop_nests(loaded.mod.script(syntax="tirx")) == loop_nests(theirs.mod.script())


# ---------------------------------------------------------------------------
# TVMScript both ways: TVM reads what we print, we read what TVM prints


def _te_mm_relu():
    from tvm import te

    A = te.placeholder((64, 64), name="A")
    B = te.placeholder((64, 64), name="B")
    k = te.reduce_axis((0, 64), name="k")
    Y = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((64, 64), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    return tvm.IRModule({"mm_relu": te.create_prim_func([A, B, C])})


@pytest.mark.parametrize("name", wb.workloads.names())
def test_tvm_reads_our_text_and_we_read_its_print(name):
    """For each workload, TVM parses our tirx text and prints it; we read TVM's print
    back into the very IR we started from."""
    from workbench.testing import ir_identical

    mod = wb.IRModule.from_funcs(wb.workloads.get(name))
    theirs = tvm.script.from_source(mod.script(syntax="tirx"))
    back = wb.from_script(theirs.script())
    assert wb.structural_equal(back, mod)
    assert ir_identical(back, mod) is None


@pytest.mark.parametrize("name", list(CASES) + list(STRUCTURE_ONLY))
def test_scheduled_text_reads_the_same_in_both_tools(name):
    """Our scheduled module, parsed by TVM, is TVM-structurally equal to TVM's own
    schedule of the same trace; TVM's printed result reads back as our IR."""
    make, schedule = {**CASES, **STRUCTURE_ONLY}[name]
    func = make()
    ours = wb.Schedule(func)
    schedule(ours)
    theirs = tvm_replay(func, ours.trace)
    tvm.ir.assert_structural_equal(tvm.script.from_source(ours.mod.script(syntax="tirx")),
                                   theirs.mod)
    assert wb.structural_equal(wb.from_script(theirs.mod.script()), ours.mod)


def test_tvm_te_output_and_tvm_schedules_read_back_unchanged():
    """Text TVM made on its own (TE, then TVM's schedule primitives) reads in; printed
    by us and re-read by TVM, it is what TVM had."""
    mod = tvm.script.from_source(_te_mm_relu().script())
    back = wb.from_script(mod.script())
    wb.verify(back["mm_relu"], wb.workloads.mm_relu(64, 64, 64))
    tvm.ir.assert_structural_equal(tvm.script.from_source(back.script(syntax="tirx")), mod)

    sch = tvm.s_tir.Schedule(mod)
    sch.work_on("mm_relu")
    blk = sch.get_sblock("Y")
    i, j, k = sch.get_loops(blk)
    cache = sch.cache_read(blk, 0, "shared")
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    sch.compute_at(cache, j)
    _, k1 = sch.split(k, [None, 8])
    sch.unroll(k1)
    scheduled = wb.from_script(sch.mod.script())
    tvm.ir.assert_structural_equal(
        tvm.script.from_source(scheduled.script(syntax="tirx")), sch.mod)


SYMBOLIC_TEXT = """
@T.prim_func
def g(a: T.handle, b: T.handle):
    n = T.{dtype}()
    A = T.match_buffer(a, (n, 16))
    B = T.match_buffer(b, (n, 16))
    for i, j in T.grid(n, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.if_then_else(vj > 0, A[vi, vj - 1], T.float32(0))
"""

LET_INT64_TEXT = """
@T.prim_func
def f(A: T.Buffer((T.int64(4), T.int64(8)), "float32"), B: T.Buffer((T.int64(4),), "float32")):
    for i in range(T.int64(4)):
        with T.block("B"):
            vi = T.axis.spatial(T.int64(4), i)
            with T.init():
                B[vi] = T.float32(0)
            for k in range(T.int64(8)):
                x: T.float32 = A[vi, k] * T.float32(2)
                B[vi] = B[vi] + x
"""

MATCH_TEXT = """
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
"""


@pytest.mark.parametrize("text", [SYMBOLIC_TEXT.format(dtype="int32"),
                                  SYMBOLIC_TEXT.format(dtype="int64"), LET_INT64_TEXT,
                                  MATCH_TEXT],
                         ids=["symbolic int32", "symbolic int64", "let and int64",
                              "match_buffer"])
def test_newer_constructs_read_the_same_in_both_tools(text):
    """Symbolic shapes (TVM prints quoted names / TypeVars), int64 indices, lets and
    block match_buffer: TVM reads our print, we read TVM's."""
    mod = wb.IRModule.from_funcs(wb.from_script(text))
    theirs = tvm.script.from_source(mod.script(syntax="tirx"))
    back = wb.from_script(theirs.script())
    assert wb.structural_equal(back, mod)
    tvm.ir.assert_structural_equal(tvm.script.from_source(back.script(syntax="tirx")), theirs)


# ---------------------------------------------------------------------------
# split/fuse/reorder, loop kinds, annotations and trace strings: TVM's own test cases
# (tests/tvm_parity_loop_cases.py; test_tvm_parity_loops.py checks our side without TVM)


def _loop_parity():
    import tvm_parity_loop_cases

    return tvm_parity_loop_cases


LOOP_PARITY = _loop_parity()


@pytest.mark.parametrize("name", sorted(LOOP_PARITY.CASES))
def test_loop_parity_case_like_tvm(name):
    """TVM accepts what we accept (same loop nests, and the same numbers where TVM's CPU
    target can run the result) and refuses what we refuse, but for the documented
    divergences, where it does the opposite."""
    src_name, steps, _ = LOOP_PARITY.CASES[name]
    text = LOOP_PARITY.source(src_name)
    func = wb.from_script(text)
    ours = wb.Schedule(func)
    try:
        steps(ours, ours.get_block)
        ours_ok = True
    except wb.ScheduleError:
        ours_ok = False
    theirs = tvm.s_tir.Schedule(tvm.script.from_source(text))
    try:
        steps(theirs, theirs.get_sblock)
        tvm_ok = True
    except tvm.s_tir.ScheduleError:
        tvm_ok = False
    if name in LOOP_PARITY.DIVERGENT:
        assert ours_ok != tvm_ok, LOOP_PARITY.DIVERGENT[name]
        return
    assert ours_ok == tvm_ok, f"ours {'accepts' if ours_ok else 'refuses'}, TVM does not"
    if not ours_ok:
        return
    tvm_text = theirs.mod.script()
    assert loop_nests(ours.mod.script(syntax="tirx")) == loop_nests(tvm_text)
    if "thread_binding" in tvm_text:
        return  # TVM's CPU target cannot run thread bindings
    args = random_args(func, seed=5)
    expected = run_tvm(theirs, func, args)
    got = [a.copy() for a in args]
    wb.build(ours.mod)(*got)
    for e, g, p in zip(expected, got, func.params, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4, err_msg=f"buffer {p.name}")


def _tvm_affine(values, domain, predicate) -> bool:
    """TVM's IsAffineBinding: DetectIterMap (surjective), innermost scale 1."""
    from tvm.sym import iter_affine_map as iam

    ranges = {v: tvm.ir.Range(0, e) for v, e in domain.items()}
    res = iam.detect_iter_map(values, ranges, True if predicate is None else predicate,
                              iam.IterMapLevel.Surjective, simplify_trivial_iterators=False)
    if len(res.indices) == 0:
        return False
    return all(len(s.args) == 0 or s.args[0].scale.value == 1 for s in res.indices)


def _iter_map_pairs():
    from tvm import tirx

    from workbench.ir import And
    from workbench.schedule.primitives.affine_binding import affine_problem

    def ours_all(*xs):
        out = xs[0]
        for x in xs[1:]:
            out = And(out, x)
        return out

    def tvm_var(name):
        return tirx.Var(name, "int32")

    pairs = []
    for make in (LOOP_PARITY.iter_map_cases, LOOP_PARITY.iter_map_extra_cases):
        mine = make(wb.Var, ours_all, wb.const)
        theirs = make(tvm_var, tirx.all, lambda v: tirx.const(v, "int32"))
        for (name, values, dom, pred), (_, tvalues, tdom, tpred) in zip(mine, theirs):
            pairs.append((name, affine_problem(values, dom, pred) is None,
                          _tvm_affine(tvalues, tdom, tpred)))
    return pairs


def test_affine_bindings_decided_like_tvm():
    """Our iter-map check (reorder's and the loop kinds' affine condition) against
    TVM's DetectIterMap on the same bindings; the known differences are listed."""
    wrong = [(name, ours, theirs) for name, ours, theirs in _iter_map_pairs()
             if (ours != theirs) != (name in LOOP_PARITY.ITER_MAP_DIFFERENT)]
    assert not wrong, f"(case, ours affine, TVM affine): {wrong}"


def _py(x):
    """TVM's JSON objects as plain Python lists/str/int."""
    if isinstance(x, str):
        return str(x)
    if isinstance(x, (int, float)):
        return x
    return [_py(y) for y in x]


@pytest.mark.parametrize("text", ['"', '""', 'a"b', "a\\b", "", "x\ny", "é", "{a}", "None"])
def test_trace_strings_cross_both_tools(text):
    """An annotation string crosses from our trace JSON into TVM and back unchanged
    (TVM's rule: the text between two added quotes, nothing escaped)."""
    src = LOOP_PARITY.source("elementwise")
    ours = wb.Schedule(wb.from_script(src))
    ours.annotate(ours.get_block("B"), "k", text)
    theirs = tvm.s_tir.Schedule(tvm.script.from_source(src))
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(ours.trace.as_json_obj(syntax="tirx"),
                                                    theirs)
    assert str(theirs.get(theirs.get_sblock("B")).annotations["k"]) == text
    back = wb.Schedule(wb.from_script(src))
    wb.Trace.from_json(_py(theirs.trace.as_json())).apply_to_schedule(back)
    assert dict(back.get(back.get_block("B")).annotations)["k"] == text


# ---------------------------------------------------------------------------
# compute location, inlining, caching and lowered buffer shapes: the cases of
# tests/test_tvm_parity_compute.py (built from TVM's own schedule tests), replayed in TVM


def _compute_parity():
    import test_tvm_parity_compute

    return test_tvm_parity_compute


def _tvm_lowered_shapes(mod) -> dict[str, tuple[int, ...]]:
    """Allocated buffers after TVM's own CompactBufferAllocation pipeline."""
    passes = tvm.s_tir.transform
    seq = tvm.transform.Sequential([
        passes.LowerCrossThreadReduction(), passes.LowerInitBlock(),
        passes.PlanAndUpdateBufferAllocationLocation(), passes.ConvertBlocksToOpaque(),
        passes.CompactBufferAllocation()])
    text = seq(mod).script()
    return {m.group(1): tuple(int(x) for x in m.group(2).replace(" ", "").split(",") if x)
            for m in re.finditer(r"(\w+) = T\.(?:sblock_)?alloc_buffer\(\(([^)]*)\)", text)}


def _compute_parity_cases():
    P = _compute_parity()

    def tiled_repeat():
        x = wb.placeholder((4,), name="x")
        t_add = wb.compute((4,), lambda i: x[i] + 1.0, name="T_add")
        return wb.create_prim_func([x, wb.compute((64,), lambda i: t_add[i // 16],
                                                  name="T_repeat")], name="repeat")

    def repeat_at(sch):
        i0, _ = sch.split(sch.get_loops(sch.get_block("T_repeat"))[0], [8, 8])
        sch.compute_at(sch.get_block("T_add"), i0)

    def fdm():
        X = wb.placeholder((16, 16), name="X")
        temp = wb.compute((16, 16), lambda i, j: X[j, i] + 1.0, name="A")
        return wb.create_prim_func(
            [X, wb.compute((256,), lambda i: temp[i // 16, i % 16], name="B")], name="fdm")

    def concat_at(sch):
        ax = sch.get_loops(sch.get_block("T_concat"))[0]
        sch.compute_at(sch.get_block("T_add_1"), ax)
        sch.compute_at(sch.get_block("T_add_2"), ax)

    def sliced_at(sch):
        loop = sch.get_loops(sch.get_block("T_strided_slice"))[0]
        sch.compute_at(sch.get_block("T_concat"), loop)
        sch.compute_at(sch.get_block("compute"), loop)

    def cache_in_scope(sch):
        i, j, k = sch.get_loops(sch.get_block("C"))
        i0, i1 = sch.split(i, [None, 16])
        j0, j1 = sch.split(j, [None, 16])
        sch.reorder(i0, j0, i1, j1, k)
        sch.blockize(i1)
        sch.cache_read(sch.get_block("C"), 1, "local")

    def row_sum():
        A = wb.placeholder((8, 8), name="A")
        B = wb.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
        k = wb.reduce_axis(8, name="k")
        return wb.create_prim_func(
            [A, wb.compute((8,), lambda i: wb.sum(B[i, k], axis=k), name="S")], name="row_sum")

    return {
        "floordiv region (tiled_repeat)": (tiled_repeat, repeat_at),
        "floordiv/floormod reverse_compute_at": (
            fdm, lambda s: s.reverse_compute_at(s.get_block("B"),
                                                s.get_loops(s.get_block("A"))[0])),
        "concat with if_then_else": (P.concat_two, concat_at),
        "sliced concat": (P.sliced_concat, sliced_at),
        "reverse_compute_inline overcomputed": (
            P.overcomputed, lambda s: s.reverse_compute_inline(s.get_block("C"))),
        "reduction consumer reverse_compute_at": (
            row_sum, lambda s: s.reverse_compute_at(s.get_block("S"),
                                                    s.get_loops(s.get_block("B"))[0])),
        "cache_read under a scope": (lambda: wb.workloads.matmul(64, 64, 64), cache_in_scope),
    }


@pytest.mark.parametrize("name", list(_compute_parity_cases()))
def test_compute_family_matches_tvm(name):
    """Same loop nests as TVM after the same trace, same buffer shapes after lowering
    (ours vs TVM's CompactBufferAllocation), same numbers."""
    make, schedule = _compute_parity_cases()[name]
    func = make()
    ours = wb.Schedule(func)
    schedule(ours)
    theirs = tvm_replay(func, ours.trace)
    assert loop_nests(ours.mod.script(syntax="tirx")) == loop_nests(theirs.mod.script())
    ours_shapes = {}
    for s in wb.ir.iter_stmts(wb.lower(ours.mod)[func.name].body):
        if isinstance(s, wb.ir.Block):
            ours_shapes.update({b.name: b.shape for b in s.alloc_buffers})
    assert ours_shapes == _tvm_lowered_shapes(theirs.mod)
    args = random_args(func, seed=5)
    expected = run_tvm(theirs, func, args)
    got = [a.copy() for a in args]
    wb.build(ours.mod)(*got)
    for e, g, p in zip(expected, got, func.params, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4, err_msg=f"buffer {p.name}")


def test_tvm_reorder_of_a_mixed_loop_computes_wrong_sums():
    """Why reorder refuses to move a loop fused from a spatial and a reduction loop and
    split unevenly (MixedIterTypeLoopError): TVM accepts it, and its kernel then runs
    reduction steps before the element's init, so the sums come out wrong."""
    src_name, steps, _ = LOOP_PARITY.CASES["reorder_mixed_uneven"]
    text = LOOP_PARITY.source(src_name)
    func = wb.from_script(text)
    theirs = tvm.s_tir.Schedule(tvm.script.from_source(text))
    steps(theirs, theirs.get_sblock)
    args = random_args(func, seed=7)
    expected = [a.copy() for a in args]
    wb.build(func)(*expected)
    got = run_tvm(theirs, func, args)
    assert not np.allclose(got[1], expected[1], rtol=1e-4, atol=1e-4)
