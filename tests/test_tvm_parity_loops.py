"""TVM parity of split/fuse/reorder, the loop kinds, annotations and the trace.

Each test is a case from TVM's own schedule tests (``test_tir_schedule_split_fuse``,
``_reorder``, ``_for_kind``, ``_trace``, ``_reduction``), read from TVMScript
(``tvm_parity_loop_cases.py``): what TVM accepts we accept with the same result, what
TVM refuses we refuse with a ScheduleError that names the primitive and the loop/block
and leaves the schedule as it was. The two deliberate divergences are tested as such.
``test_tvm_differential.py`` runs the same cases on TVM itself when it is installed.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tvm_parity_loop_cases import CASES, DIVERGENT, source

import workbench as wb
from workbench.ir import Block, BufferLoad, BufferStore, For, Var
from workbench.ir.functor import iter_exprs, iter_stmts, stmt_exprs
from workbench.schedule.primitives.affine_binding import affine_problem
from workbench.schedule.primitives.for_kind import cross_thread_reductions
from workbench.script import from_script
from workbench.testing import assert_schedule_error, assert_verifies, roundtrip_trace


def parse(name: str) -> wb.PrimFunc:
    return from_script(source(name))


def run_case(name: str) -> tuple[wb.PrimFunc, wb.Schedule]:
    src, steps, _ = CASES[name]
    func = parse(src)
    sch = wb.Schedule(func)
    steps(sch, sch.get_block)
    return func, sch


def loops_of(sch: wb.Schedule, block: str) -> list:
    return sch.get_loops(sch.get_block(block))


def used_vars(func: wb.PrimFunc) -> set[Var]:
    """Every variable an expression of ``func`` uses: bindings, predicates, stored
    values and indices, loads, and the blocks' read/write regions."""
    out: set[Var] = set()
    for s in iter_stmts(func.body):
        exprs = list(stmt_exprs(s))
        if isinstance(s, Block):
            for r in (s.reads or ()) + (s.writes or ()):
                exprs += [x for mn_ext in r.region for x in mn_ext]
        for e in exprs:
            out |= {x for x in iter_exprs(e) if isinstance(x, Var)}
    return out


def defined_vars(func: wb.PrimFunc) -> set[Var]:
    out: set[Var] = set()
    for s in iter_stmts(func.body):
        if isinstance(s, For):
            out.add(s.loop_var)
        elif isinstance(s, Block):
            out |= {iv.var for iv in s.iter_vars}
    return out


def assert_closed(func: wb.PrimFunc) -> None:
    """No expression uses a variable that no loop or block defines (a loop variable a
    primitive removed, say)."""
    stray = used_vars(func) - defined_vars(func)
    assert not stray, f"undefined variables {sorted(v.name for v in stray)} in\n{func.script()}"


# --------------------------------------------------------------------------- every case


class _Watch:
    """Wraps a Schedule; a call that raises a ScheduleError is checked to have left the
    module and the trace exactly as they were, and the error is kept."""

    def __init__(self, sch: wb.Schedule):
        self.sch = sch
        self.error: wb.ScheduleError | None = None

    def __getattr__(self, attr):
        method = getattr(self.sch, attr)

        def call(*args, **kwargs):
            mod, text, n = self.sch.mod, self.sch.mod.script(), len(self.sch.trace)
            try:
                return method(*args, **kwargs)
            except wb.ScheduleError as e:
                assert self.sch.mod is mod and self.sch.mod.script() == text
                assert len(self.sch.trace) == n
                assert str(e).startswith(f"{e.primitive}: ")
                self.error = e
                raise

        return call


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_outcome(name):
    """Each case is accepted or refused with the error class the table names (TVM does
    the same but for the cases in DIVERGENT); a refusal changes nothing."""
    src, steps, expected = CASES[name]
    func = parse(src)
    sch = wb.Schedule(func)
    watch = _Watch(sch)
    if expected == "ok":
        steps(watch, sch.get_block)
        assert_closed(sch.func)
        return
    with pytest.raises(wb.ScheduleError):
        steps(watch, sch.get_block)
    assert type(watch.error).__name__ == expected, watch.error


# --------------------------------------------------------------------------- split / fuse


def test_split_rewrites_the_loop_var_inside_nested_blocks():
    """TVM's test_split_with_opaque_block: the inner block binds the loops directly;
    after the split its bindings and the opaque block's regions use i_0 * 4 + i_1."""
    func, sch = run_case("split_opaque_nested")
    text = sch.func.script()
    assert "vi = T.axis.spatial(8, i_0 * 4 + i_1)" in text
    assert "T.reads(A[i_0 * 4 + i_1, j, k])" in text
    assert_closed(sch.func)
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_fuse_rewrites_the_loop_vars_inside_nested_blocks():
    func, sch = run_case("fuse_opaque_nested")
    text = sch.func.script()
    assert "vi = T.axis.spatial(8, i_j_k_fused // 64)" in text
    assert "T.writes(B[i_j_k_fused // 64, i_j_k_fused % 64 // 8, i_j_k_fused % 8])" in text
    assert_closed(sch.func)
    assert_verifies(sch, func)


def test_split_rewrites_buffer_indices_of_an_opaque_block():
    """An opaque block indexes with the loop variable; an uneven split also guards it."""
    func, sch = run_case("split_opaque_access_uneven")
    block = next(s for s in iter_stmts(sch.func.body) if isinstance(s, Block) and s.name
                 == "opaque")
    assert block.script().count("i_0 * 3 + i_1") >= 3  # predicate, load, store
    assert "T.where(i_0 * 3 + i_1 < 16)" in sch.func.script()
    store = block.body
    assert isinstance(store, BufferStore)
    loads = [x for x in iter_exprs(store.value) if isinstance(x, BufferLoad)]
    assert [str(i) for i in store.indices] == ["i_0 * 3 + i_1"]
    assert [str(x.indices[0]) for x in loads] == ["i_0 * 3 + i_1"]
    assert_closed(sch.func)
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_fuse_of_inner_loops_rewrites_the_nested_block():
    func = parse("opaque_nested")
    sch = wb.Schedule(func)
    i, j, k = loops_of(sch, "opaque")
    sch.fuse(j, k)
    assert_closed(sch.func)
    assert_verifies(sch, func)


def test_split_guard_is_written_as_tvm_writes_it():
    """TVM's test_split_with_predicate: the guard of an uneven split keeps the nested
    form of the split value, the binding is simplified; a later split substitutes into
    the guard without simplifying it either."""
    func, sch = run_case("split_three_uneven")
    text = sch.func.script()
    assert "T.where((i_0 * 2 + i_1) * 3 + i_2 < 16)" in text
    assert "vi = T.axis.spatial(16, i_0 * 6 + i_1 * 3 + i_2)" in text
    sch.split(loops_of(sch, "B")[2], factors=[None, 2])
    assert ("T.where((i_0 * 2 + i_1) * 3 + (i_2_0 * 2 + i_2_1) < 16 and i_2_0 * 2 + i_2_1 < 3)"
            in sch.func.script())  # TVM's text exactly
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


@pytest.mark.parametrize("primitive", ["split", "fuse"])
def test_split_fuse_fail_annotated_loop(primitive):
    """TVM's test_fuse_split_fail_with_annotation (any annotation)."""
    func = parse("annotated")
    sch = wb.Schedule(func)
    i, j = loops_of(sch, "B")
    call = (lambda: sch.split(j, factors=[None, 4])) if primitive == "split" else (
        lambda: sch.fuse(i, j))
    e = assert_schedule_error(sch, call, wb.schedule.AnnotatedLoopError, "j")
    assert "pragma_auto_unroll_max_step" in str(e)


def test_split_fuse_of_parallel_loops_give_serial_loops():
    """TVM refuses thread-bound and annotated loops only; other kinds become serial."""
    _, sch = run_case("split_parallel")
    assert [sch.get(lp).kind for lp in loops_of(sch, "B")] == ["serial"] * 3


# --------------------------------------------------------------------------- reorder


@pytest.mark.parametrize(
    "name, block, loops",
    [
        ("reorder_strided", "B", ["i", "j"]),
        ("reorder_square_all", "B", ["v0"]),
        ("reorder_predicated", "B", ["i", "k"]),
    ],
)
def test_reorder_fail_not_affine(name, block, loops):
    """TVM's test_reorder_fail_not_affine_bindings / _with_partial_affineness /
    _with_predicate."""
    src, steps, _ = CASES[name]
    sch = wb.Schedule(parse(src))
    lps = {sch.get(lp).loop_var.name: lp for lp in loops_of(sch, block)}
    order = {"reorder_strided": ["j", "i"], "reorder_square_all": ["v0", "v2", "v1"],
             "reorder_predicated": ["k", "i"]}[name]
    e = assert_schedule_error(
        sch, lambda: sch.reorder(*[lps[n] for n in order]), wb.schedule.NotAffineBindingError,
        block, *loops,
    )
    assert "affine" in str(e)


def test_reorder_partial_affineness():
    """Loops above the reordered ones count as constants: v0 * v0 + v1 is affine in
    v1 and v2 (TVM's test_reorder_with_partial_affineness)."""
    func, sch = run_case("reorder_square_inner")
    assert [sch.get(lp).loop_var.name for lp in loops_of(sch, "B")] == ["v0", "v2", "v1"]
    assert_verifies(sch, func)


@pytest.mark.parametrize(
    "name", ["reorder_overlapping", "reorder_opaque", "reorder_split_uneven", "reorder_bound",
             "reorder_annotated"]
)
def test_reorder_accepts_as_tvm(name):
    """Overlapping windows (TVM's test_reorder_overlapped_access), opaque blocks (no
    iter vars: nothing to check), the predicate of an uneven split, thread-bound and
    annotated loops (they move with their kind and annotations)."""
    func, sch = run_case(name)
    assert_closed(sch.func)
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_reorder_keeps_kind_and_annotations():
    _, sch = run_case("reorder_annotated")
    j, i = loops_of(sch, "B")
    assert sch.get(j).annotations == (("pragma_auto_unroll_max_step", 16),)
    _, sch = run_case("reorder_bound")
    j, i = loops_of(sch, "B")
    assert (sch.get(i).kind, sch.get(i).thread_tag) == ("thread_binding", "blockIdx.x")


@pytest.mark.parametrize(
    "values, domain, predicate, affine",
    [
        ("i * 4 + j", {"i": 8, "j": 4}, None, True),
        ("i * 2 + j", {"i": 6, "j": 4}, None, True),  # overlapping: surjective
        ("i * 8 + j", {"i": 8, "j": 4}, None, False),  # a gap
        ("l * 16", {"l": 8}, None, False),
        ("i * i", {"i": 8}, None, False),
        ("i, i", {"i": 8}, None, False),
        ("f // 16, f % 16", {"f": 64}, None, True),
        ("f // 8, f % 16", {"f": 128}, None, False),
        ("i // 3, i % 3", {"i": 8}, None, False),
        ("i * 4 + j", {"i": 8, "j": 4}, "i * 4 + j < 30", True),
        ("i, j", {"i": 8, "j": 4}, "i * 4 + j < 30", False),
        ("i, j", {"i": 8, "j": 4}, "i < 3", True),
        ("i + n", {"i": 8}, None, True),  # n is not a loop: a constant
    ],
)
def test_affine_detection(values, domain, predicate, affine):
    """The iter-map rules (TVM's DetectIterMap, surjective, innermost scale 1); the
    differential suite compares more cases with TVM itself."""
    names = {n: Var(n) for n in ["i", "j", "k", "l", "f", "n"]}

    def expr(text: str):
        import ast

        def build(node):
            if isinstance(node, ast.Name):
                return names[node.id]
            if isinstance(node, ast.Constant):
                return node.value
            a, b = build(node.left), build(node.right)
            op = type(node.op)
            return {ast.Add: lambda: a + b, ast.Mult: lambda: a * b,
                    ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b}[op]()

        tree = ast.parse(text, mode="eval").body
        if isinstance(tree, ast.Compare):
            from workbench.ir import LT
            return LT(build(tree.left), wb.const(tree.comparators[0].value))
        if isinstance(tree, ast.Tuple):
            return [build(x) for x in tree.elts]
        return [build(tree)]

    got = affine_problem(expr(values), {names[n]: e for n, e in domain.items()},
                         expr(predicate) if predicate else None)
    assert (got is None) == affine, got


# --------------------------------------------------------------------------- loop kinds


@pytest.mark.parametrize(
    "name, loop_block, block",
    [
        ("parallel_not_affine", "B", "B"),  # TVM's test_parallel_not_quasi_affine
        ("parallel_not_compact", "B", "B"),  # TVM's test_parallel_not_compact_data_flow
        ("vectorize_opaque_in_place", "opaque", "opaque"),  # test_vectorize_opaque_block
    ],
)
def test_loop_kind_fail_not_compact_dataflow(name, loop_block, block):
    src, steps, _ = CASES[name]
    sch = wb.Schedule(parse(src))
    loop = loops_of(sch, loop_block)[0]
    primitive = name.split("_")[0]
    e = assert_schedule_error(
        sch, lambda: getattr(sch, primitive)(loop), wb.schedule.NotCompactDataflowError,
        sch.get(loop).loop_var.name, block,
    )
    assert "neither a complete nor a reduction block" in str(e)


def test_vectorize_opaque_block_without_in_place_update():
    func, sch = run_case("vectorize_opaque_access")
    assert sch.get(loops_of(sch, "opaque")[0]).kind == "vectorized"
    assert_verifies(sch, func)


def test_parallel_reduction_loop_fails():
    sch = wb.Schedule(parse("rowsum"))
    i, k = loops_of(sch, "B")
    assert_schedule_error(sch, lambda: sch.parallel(k), wb.schedule.NotDataParallelError, "k",
                          "B")


def test_parallel_over_decomposed_update_block_diverges_from_tvm():
    """Deliberate divergence: TVM refuses to parallelize a spatial loop over the update
    block decompose_reduction leaves (no init: not a reduction block); its iterations
    write different elements, so we accept it."""
    assert "parallel_after_decompose" in DIVERGENT
    func, sch = run_case("parallel_after_decompose")
    assert sch.get(loops_of(sch, "B_update")[0]).kind == "parallel"
    assert_verifies(sch, func)


def test_parallel_in_place_update_at_other_elements_fails():
    """An update that reads its buffer elsewhere than where it writes stays refused."""
    src = source("elementwise").replace("B[vi, vj] = A[vi, vj] * T.float32(2)",
                                        "B[vi, vj] = B[vi, (vj + 1) % 16] + A[vi, vj]")
    sch = wb.Schedule(from_script(src))
    i, j = loops_of(sch, "B")
    assert_schedule_error(sch, lambda: sch.parallel(i), wb.schedule.NotCompactDataflowError,
                          "i", "B")


@pytest.mark.parametrize(
    "name", ["rekind_parallel_after_vectorize", "rekind_parallel_after_bind",
             "rekind_unroll_after_bind", "rebind_after_bind", "bind_after_parallel"]
)
def test_rekind_and_rebind_as_tvm(name):
    """TVM's test_bind_after_bind / test_unroll_after_bind: any loop kind can be
    changed; a binding goes when the loop becomes parallel/vectorized/unrolled."""
    func, sch = run_case(name)
    lp = sch.get(loops_of(sch, "B")[0 if "vectorize" not in name else 1])
    want = {
        "rekind_parallel_after_vectorize": ("parallel", None),
        "rekind_parallel_after_bind": ("parallel", None),
        "rekind_unroll_after_bind": ("unrolled", None),
        "rebind_after_bind": ("thread_binding", "threadIdx.x"),
        "bind_after_parallel": ("thread_binding", "threadIdx.x"),
    }[name]
    assert (lp.kind, lp.thread_tag) == want
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_bind_same_axis_nested_like_tvm():
    """TVM accepts binding a loop nested under a loop bound to the same axis (a
    cooperative fetch); so do we, and the C target still computes the right numbers."""
    assert "bind_same_axis_nested" not in DIVERGENT
    func, sch = run_case("bind_same_axis_nested")
    i, j = loops_of(sch, "B")
    assert [(sch.get(lp).kind, sch.get(lp).thread_tag) for lp in (i, j)] == [
        ("thread_binding", "threadIdx.x")] * 2
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


# --------------------------------------------------------------------------- cross-thread


def test_bind_reduction_loop_to_thread_idx_is_a_cross_thread_reduction():
    """TVM's test_bind_cross_thread_reduction; the C target computes it (bound loops run
    serially, the init where the reduce iter var is 0)."""
    func, sch = run_case("bind_cross_thread")
    i, k = loops_of(sch, "B")
    assert sch.get(k).thread_tag == "threadIdx.x"
    assert [(b, [v.name for v in vs]) for b, vs in cross_thread_reductions(sch.func)] == [
        ("B", ["k"])]
    sch.bind(i, "blockIdx.x")
    assert_verifies(sch, func)
    source_text = wb.build(sch.mod, target="c").source
    assert "cross-thread reduction" in source_text
    roundtrip_trace(sch, func)


@pytest.mark.parametrize("tag", ["threadIdx.x", "threadIdx.y", "threadIdx.z"])
def test_cross_thread_reduction_split_and_decomposed(tag):
    """A split reduction with its inner part on threads, the init decomposed above it,
    and the outer spatial loop on blocks: the C build computes the right sums."""
    func = parse("rowsum")
    sch = wb.Schedule(func)
    i, k = loops_of(sch, "B")
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.reorder(k1, k0)
    sch.bind(k1, tag)
    sch.bind(i, "blockIdx.x")
    sch.decompose_reduction(sch.get_block("B"), k1)
    assert cross_thread_reductions(sch.func) == [("B_update", (sch.get(k1).loop_var,))]
    assert_verifies(sch, func)


def test_cross_thread_reduction_in_a_nested_block():
    """TVM's test_nested_block_bind."""
    func, sch = run_case("bind_nested_cross_thread")
    assert [b for b, _ in cross_thread_reductions(sch.func)] == ["inner"]
    assert_verifies(sch, func)


@pytest.mark.parametrize("tag", ["blockIdx.x", "vthread.x"])
def test_bind_reduction_loop_fails_off_thread_idx(tag):
    """TVM's test_bind_not_cross_thread_reduction."""
    sch = wb.Schedule(parse("rowsum"))
    i, k = loops_of(sch, "B")
    e = assert_schedule_error(sch, lambda: sch.bind(k, tag), wb.schedule.NotDataParallelError,
                              "k", "B")
    assert "threadIdx" in str(e)


# --------------------------------------------------------------------------- init only


def test_decompose_reduction_of_a_block_with_init_and_no_reduce_iter_var():
    """TVM treats a block with an init as a reduction block whatever its iter vars
    (test_inline_with_reduction's "bmm"): decompose_reduction moves the init out."""
    func, sch = run_case("decompose_init_only")
    text = sch.func.script()
    assert 'with T.block("C_init")' in text and "for j_init in range(16):" in text
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


def test_rfactor_of_a_block_with_init_and_no_reduce_iter_var_fails_on_the_loop():
    sch = wb.Schedule(parse("init_only"))
    i, j = loops_of(sch, "C")
    assert_schedule_error(sch, lambda: sch.rfactor(j, 0),
                          wb.schedule.RFactorLoopNotReductionError, "j", "C")


def test_parallel_of_a_block_with_init_and_no_reduce_iter_var():
    func, sch = run_case("parallel_init_only")
    assert_verifies(sch, func)


# --------------------------------------------------------------------------- annotations


def test_annotate_existing_key_keeps_the_first_value():
    """TVM's Annotate returns early when the key is there."""
    sch = wb.Schedule(parse("elementwise"))
    i, j = loops_of(sch, "B")
    sch.annotate(i, "k", 1)
    sch.annotate(i, "k", 2)
    assert sch.get(i).annotations == (("k", 1),)
    assert len(sch.trace) == 4  # both recorded, as TVM records them
    sch.unannotate(i, "k")
    sch.annotate(i, "k", 2)
    assert sch.get(i).annotations == (("k", 2),)


# --------------------------------------------------------------------------- trace strings

STRINGS = ['"', '""', 'a"b', "a\\b", "", "x\ny", "tab\there", "é", "😀", "{a}", "None",
           "b0", '"quoted"', "\\\"", "SSRSSR"]


def test_trace_json_string_like_tvm():
    """TVM writes a string input as its text between two added quotes, nothing escaped,
    and reads it back by stripping them (test_apply_annotation_from_json)."""
    sch = wb.Schedule(parse("elementwise"))
    b = sch.get_block("B")
    sch.annotate(b, "k", '"')
    assert sch.trace.as_json_obj()[0][1] == ["Annotate", ["b0", '"""'], ["k"], []]
    tvm_json = [[["GetSBlock", [], ["B", "main"], ["b0"]],
                 ["Annotate", ["b0", '"""'], ["meta_schedule.auto_tensorize"], []]], []]
    fresh = wb.Schedule(parse("elementwise"))
    wb.Trace.from_json(tvm_json).apply_to_schedule(fresh)
    assert dict(fresh.get(fresh.get_block("B")).annotations) == {
        "meta_schedule.auto_tensorize": '"'}


@pytest.mark.parametrize("text", STRINGS, ids=[json.dumps(s) for s in STRINGS])
def test_trace_string_roundtrip(text):
    """Any string survives JSON (object and text) and the printed Python form."""
    func = parse("elementwise")
    sch = wb.Schedule(func)
    sch.annotate(sch.get_block("B"), "key", text)
    sch.annotate(loops_of(sch, "B")[0], "list", [text, 1])
    roundtrip_trace(sch, func)
    for loaded in (wb.Trace.from_json(sch.trace.as_json()),
                   wb.Trace.from_python(sch.trace.script())):
        fresh = wb.Schedule(func)
        loaded.apply_to_schedule(fresh)
        assert dict(fresh.get(fresh.get_block("B")).annotations)["key"] == text


_ELEMENTWISE = parse("elementwise")


def test_trace_json_malformed_string_names_the_step():
    data = [[["GetBlock", [], ["B", "main"], ["b0"]],
             ["Annotate", ["b0", '"'], ["k"], []]], []]
    with pytest.raises(wb.TraceError, match="step 1"):
        wb.Trace.from_json(data)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=12))
def test_trace_any_string_roundtrip(text):
    """Arbitrary text (quotes, backslashes, control and non-ASCII characters) comes back
    unchanged from JSON text and from the printed Python form."""
    sch = wb.Schedule(_ELEMENTWISE)
    sch.annotate(sch.get_block("B"), "key", text)
    for loaded in (wb.Trace.from_json(sch.trace.as_json()),
                   wb.Trace.from_json(json.loads(json.dumps(sch.trace.as_json_obj()))),
                   wb.Trace.from_python(sch.trace.script())):
        assert loaded[1].arg("ann_val") == text
