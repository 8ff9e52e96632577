"""Every refusal of a primitive: ``test_<prim>_fail_<reason>``.

Each asserts the error class, that the message starts with the primitive and names
the loop/block involved, and that the schedule (module and trace) is exactly as it
was (``assert_schedule_error`` checks all of that)."""

from __future__ import annotations

import math
import re

import pytest

import workbench as wb
from workbench.ir import IRModule
from workbench.schedule import (
    AnnotationNotFoundError,
    BlockNotFoundError,
    DuplicateLoopError,
    FunctionNotFoundError,
    InvalidFactorsError,
    InvalidScheduleArgumentError,
    LoopsNotInChainError,
    LoopsNotNestedError,
    NotDataParallelError,
    NotSingleChildError,
    StaleHandleError,
    WrongFactorProductError,
)
from workbench.testing import (
    assert_schedule_error,
    conv2d_func,
    mm_relu_func,
    roundtrip_trace,
    shared_outer_loop_func,
    transpose_func,
)


@pytest.fixture
def sch() -> wb.Schedule:
    return wb.Schedule(mm_relu_func(16))


def y_loops(sch):
    return sch.get_loops(sch.get_block("Y"))


def c_loops(sch):
    return sch.get_loops(sch.get_block("C"))


# --------------------------------------------------------------------------- split


def test_split_fail_product_too_small(sch):
    i, j, k = y_loops(sch)
    e = assert_schedule_error(
        sch, lambda: sch.split(j, factors=[3, 4]), WrongFactorProductError, "j"
    )
    assert "12" in str(e) and "16" in str(e)
    assert isinstance(e, ValueError)


def test_split_fail_product_too_small_three_factors(sch):
    i, j, k = y_loops(sch)
    assert_schedule_error(
        sch, lambda: sch.split(k, factors=[2, 2, 2]), WrongFactorProductError, "k"
    )


def test_split_fail_two_nones(sch):
    i, j, k = y_loops(sch)
    assert_schedule_error(sch, lambda: sch.split(j, factors=[None, None]), InvalidFactorsError, "j")


@pytest.mark.parametrize("bad", [0, -2])
def test_split_fail_non_positive_factor(sch, bad):
    i, j, k = y_loops(sch)
    assert_schedule_error(sch, lambda: sch.split(j, factors=[bad, None]), InvalidFactorsError, "j")


@pytest.mark.parametrize("bad", [4.0, True, "4", [4]], ids=["float", "bool", "str", "list"])
def test_split_fail_non_integer_factor(sch, bad):
    i, j, k = y_loops(sch)
    assert_schedule_error(sch, lambda: sch.split(j, factors=[None, bad]), InvalidFactorsError, "j")


@pytest.mark.parametrize("bad", [4, None, "4, 4", {4: 4}], ids=["int", "none", "str", "dict"])
def test_split_fail_factors_not_a_list(sch, bad):
    i, j, k = y_loops(sch)
    assert_schedule_error(sch, lambda: sch.split(j, factors=bad), InvalidScheduleArgumentError, "j")


@pytest.mark.parametrize("factors", [[], [16], [None]])
def test_split_fail_fewer_than_two_factors(sch, factors):
    i, j, k = y_loops(sch)
    assert_schedule_error(sch, lambda: sch.split(j, factors=factors), InvalidFactorsError, "j")


def test_split_fail_stale_handle(sch):
    i, j, k = y_loops(sch)
    sch.split(j, factors=[None, 4])
    e = assert_schedule_error(sch, lambda: sch.split(j, factors=[None, 2]), StaleHandleError, "j")
    assert "no longer exists" in str(e)


def test_split_fail_stale_handle_after_fuse(sch):
    i, j, k = y_loops(sch)
    sch.fuse(i, j)
    assert_schedule_error(sch, lambda: sch.split(i, factors=[None, 2]), StaleHandleError, "i")


def test_split_fail_block_handle(sch):
    blk = sch.get_block("Y")
    assert_schedule_error(
        sch, lambda: sch.split(blk, factors=[None, 2]), InvalidScheduleArgumentError
    )


# --------------------------------------------------------------------------- fuse


def test_fuse_fail_not_nested(sch):
    i, j, k = y_loops(sch)
    assert_schedule_error(sch, lambda: sch.fuse(i, k), LoopsNotNestedError, "i", "k")


def test_fuse_fail_wrong_order(sch):
    i, j, k = y_loops(sch)
    assert_schedule_error(sch, lambda: sch.fuse(j, i), LoopsNotNestedError, "i", "j")


def test_fuse_fail_duplicate(sch):
    i, j, k = y_loops(sch)
    e = assert_schedule_error(sch, lambda: sch.fuse(i, i), DuplicateLoopError, "i")
    assert isinstance(e, ValueError)


def test_fuse_fail_loops_of_two_nests(sch):
    yi, yj, yk = y_loops(sch)
    ci, cj = c_loops(sch)
    assert_schedule_error(sch, lambda: sch.fuse(yk, cj), LoopsNotNestedError, "k", "j")


def test_fuse_fail_not_single_child():
    sch = wb.Schedule(shared_outer_loop_func(4))
    i, j = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.fuse(i, j), LoopsNotNestedError, "i", "j")


def test_fuse_fail_no_loops(sch):
    assert_schedule_error(sch, lambda: sch.fuse(), InvalidScheduleArgumentError)


def test_fuse_fail_stale_handle(sch):
    i, j, k = y_loops(sch)
    sch.split(k, factors=[None, 4])
    assert_schedule_error(sch, lambda: sch.fuse(j, k), StaleHandleError, "k")


def test_fuse_fail_not_a_loop_handle(sch):
    i, j, k = y_loops(sch)
    assert_schedule_error(sch, lambda: sch.fuse(i, "j"), InvalidScheduleArgumentError)


# --------------------------------------------------------------------------- reorder


def test_reorder_fail_not_in_chain(sch):
    """k (block Y's nest) and j (block C's nest) are in two different nests."""
    i, j, k = y_loops(sch)
    ci, cj = c_loops(sch)
    assert_schedule_error(sch, lambda: sch.reorder(k, cj), LoopsNotInChainError, "k", "j")


def test_reorder_fail_not_in_chain_shared_outer_loop():
    """j and jj sit under the same i, but in two sibling nests."""
    sch = wb.Schedule(shared_outer_loop_func(4))
    i, j = sch.get_loops(sch.get_block("B"))
    _, jj = sch.get_loops(sch.get_block("C"))
    assert_schedule_error(sch, lambda: sch.reorder(jj, j), LoopsNotInChainError, "j", "jj")


def test_reorder_fail_duplicate(sch):
    i, j, k = y_loops(sch)
    assert_schedule_error(sch, lambda: sch.reorder(k, i, k), DuplicateLoopError, "k")


def test_reorder_fail_not_single_child():
    """Loop i's body is a sequence of two nests; i cannot move below j. The message
    names the loop with more than one child (i) and the loop below it (j)."""
    sch = wb.Schedule(shared_outer_loop_func(4))
    i, j = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.reorder(j, i), NotSingleChildError, "i", "j")


def test_reorder_fail_stale_handle(sch):
    i, j, k = y_loops(sch)
    sch.split(j, factors=[None, 4])
    assert_schedule_error(sch, lambda: sch.reorder(k, j), StaleHandleError, "j")


def test_reorder_fail_no_loops(sch):
    assert_schedule_error(sch, lambda: sch.reorder(), InvalidScheduleArgumentError)


def test_reorder_fail_loops_of_two_functions():
    sch = wb.Schedule(IRModule.from_funcs(mm_relu_func(8), transpose_func(4, 4)))
    yi, _, _ = sch.get_loops(sch.get_block("Y", func_name="mm_relu"))
    tj, _ = sch.get_loops(sch.get_block("B", func_name="transpose"))
    assert_schedule_error(
        sch, lambda: sch.reorder(yi, tj), InvalidScheduleArgumentError, "mm_relu", "transpose"
    )


# --------------------------------------------------------------------------- loop kinds


@pytest.mark.parametrize("prim", ["parallel", "vectorize"])
def test_parallel_vectorize_fail_reduction_loop(sch, prim):
    i, j, k = y_loops(sch)
    e = assert_schedule_error(
        sch, lambda: getattr(sch, prim)(k), NotDataParallelError, "k", "Y", "vk"
    )
    assert e.primitive == prim


def test_parallel_fail_fused_loop_with_reduction(sch):
    i, j, k = y_loops(sch)
    jk = sch.fuse(j, k)
    assert_schedule_error(sch, lambda: sch.parallel(jk), NotDataParallelError, "j_k_fused", "Y")


def test_vectorize_fail_split_reduction_loop(sch):
    i, j, k = y_loops(sch)
    k0, k1 = sch.split(k, factors=[None, 4])
    assert_schedule_error(sch, lambda: sch.vectorize(k1), NotDataParallelError, "k_1", "Y")


@pytest.mark.parametrize("loop", ["rc", "ry", "rx"])
def test_parallel_fail_conv_reduction_loops(loop):
    sch = wb.Schedule(conv2d_func())
    loops = dict(zip(["n", "k", "h", "w", "rc", "ry", "rx"], sch.get_loops(sch.get_block("conv"))))
    assert_schedule_error(
        sch, lambda: sch.parallel(loops[loop]), NotDataParallelError, loop, "conv"
    )


def test_unroll_of_reduction_loop_is_allowed(sch):
    i, j, k = y_loops(sch)
    sch.unroll(k)
    assert sch.get(k).kind == "unrolled"


def test_parallel_fail_stale_handle(sch):
    i, j, k = y_loops(sch)
    sch.split(i, factors=[2, 8])
    assert_schedule_error(sch, lambda: sch.parallel(i), StaleHandleError, "i")


# --------------------------------------------------------------------------- get_block


def test_get_block_fail_unknown_name(sch):
    e = assert_schedule_error(sch, lambda: sch.get_block("Z"), BlockNotFoundError, "Z", "mm_relu")
    # the message lists the blocks there are
    assert "Y" in str(e) and "C" in str(e)
    assert str(e).startswith("get_block: ")  # not KeyError's quoted repr


def test_get_sblock_fail_unknown_name(sch):
    assert_schedule_error(sch, lambda: sch.get_sblock("Z"), BlockNotFoundError, "Z")


def test_get_block_fail_unknown_function(sch):
    assert_schedule_error(
        sch, lambda: sch.get_block("Y", func_name="main"), FunctionNotFoundError, "main", "mm_relu"
    )


def test_get_block_fail_ambiguous_module_without_func_name():
    sch = wb.Schedule(IRModule.from_funcs(mm_relu_func(8), transpose_func(4, 4)))
    e = assert_schedule_error(
        sch, lambda: sch.get_block("Y"), FunctionNotFoundError, "mm_relu", "transpose"
    )
    assert "func_name" in str(e)


def test_get_loops_fail_loop_handle(sch):
    i, j, k = y_loops(sch)
    assert_schedule_error(sch, lambda: sch.get_loops(i), InvalidScheduleArgumentError)


def test_work_on_fail_unknown_function(sch):
    assert_schedule_error(sch, lambda: sch.work_on("nope"), FunctionNotFoundError, "nope")


# --------------------------------------------------------------------------- annotations


def test_unannotate_fail_missing_key_on_loop(sch):
    i, j, k = y_loops(sch)
    sch.annotate(i, ann_key="present", ann_val=1)
    e = assert_schedule_error(
        sch, lambda: sch.unannotate(i, ann_key="absent"), AnnotationNotFoundError, "i", "absent"
    )
    assert "present" in str(e)  # says which keys there are
    assert str(e).startswith("unannotate: ")


def test_unannotate_fail_missing_key_on_block(sch):
    blk = sch.get_block("Y")
    assert_schedule_error(
        sch, lambda: sch.unannotate(blk, ann_key="absent"), AnnotationNotFoundError, "Y", "absent"
    )


def test_unannotate_fail_twice(sch):
    blk = sch.get_block("C")
    sch.annotate(blk, ann_key="x", ann_val=1)
    sch.unannotate(blk, ann_key="x")
    assert_schedule_error(
        sch, lambda: sch.unannotate(blk, ann_key="x"), AnnotationNotFoundError, "C", "x"
    )


@pytest.mark.parametrize(
    "value",
    [{1: 1}, {"a": {"b": 1}}, b"bytes", object(), None, [object()], [1, {"a": 1}]],
    ids=["dict-int-key", "nested-dict", "bytes", "object", "none", "list-of-object",
         "list-with-dict"],
)
def test_annotate_fail_bad_value(sch, value):
    i, j, k = y_loops(sch)
    assert_schedule_error(
        sch,
        lambda: sch.annotate(i, ann_key="key", ann_val=value),
        InvalidScheduleArgumentError,
        "i",
    )


@pytest.mark.parametrize("key", ["", None, 3])
def test_annotate_fail_bad_key(sch, key):
    blk = sch.get_block("Y")
    assert_schedule_error(
        sch, lambda: sch.annotate(blk, ann_key=key, ann_val=1), InvalidScheduleArgumentError, "Y"
    )


@pytest.mark.parametrize(
    "value",
    [0.5, -1e-30, math.inf, -math.inf, math.nan, [1.5, "x", True]],
    ids=["half", "tiny", "inf", "-inf", "nan", "mixed-list"],
)
def test_annotate_value_is_refused_or_round_trips(sch, value):
    """Whatever annotate accepts must survive the trace (JSON and Python text)."""
    func = sch.func
    i, j, k = y_loops(sch)
    try:
        sch.annotate(i, ann_key="key", ann_val=value)
    except wb.ScheduleError:
        return
    roundtrip_trace(sch, func)


# --------------------------------------------------------------------------- foreign handles


@pytest.mark.parametrize(
    "call",
    [
        lambda s, lp, b: s.split(lp, factors=[None, 2]),
        lambda s, lp, b: s.fuse(lp),
        lambda s, lp, b: s.reorder(lp),
        lambda s, lp, b: s.parallel(lp),
        lambda s, lp, b: s.vectorize(lp),
        lambda s, lp, b: s.unroll(lp),
        lambda s, lp, b: s.annotate(lp, ann_key="x", ann_val=1),
        lambda s, lp, b: s.unannotate(b, ann_key="x"),
        lambda s, lp, b: s.get_loops(b),
        lambda s, lp, b: s.get_child_blocks(b),
        lambda s, lp, b: s.get_producers(b),
        lambda s, lp, b: s.get_consumers(b),
        lambda s, lp, b: s.get(lp),
    ],
    ids=[
        "split",
        "fuse",
        "reorder",
        "parallel",
        "vectorize",
        "unroll",
        "annotate",
        "unannotate",
        "get_loops",
        "get_child_blocks",
        "get_producers",
        "get_consumers",
        "get",
    ],
)
def test_primitive_fail_handle_from_another_schedule(sch, call):
    other = wb.Schedule(mm_relu_func(16))
    blk = other.get_block("Y")
    i, j, k = other.get_loops(blk)
    e = assert_schedule_error(sch, lambda: call(sch, j, blk), InvalidScheduleArgumentError)
    assert "does not belong to this schedule" in str(e)


# --------------------------------------------------------------------------- detail()


def test_detail_marks_the_offending_loop_and_block(sch):
    i, j, k = y_loops(sch)
    e = assert_schedule_error(sch, lambda: sch.parallel(k), NotDataParallelError, "k")
    lines = e.detail().splitlines()
    assert lines[0] == str(e)
    assert "        for k in range(16):  # <-- parallel" in lines
    assert '            with T.block("Y"):  # <-- parallel' in lines
    assert sum("# <--" in ln for ln in lines) == 2
    # the rest is the function as it was
    assert "\n".join(lines[2:]).replace("  # <-- parallel", "").count("for ") == 3


def test_detail_marks_both_loops_of_a_refused_fuse(sch):
    i, j, k = y_loops(sch)
    e = assert_schedule_error(sch, lambda: sch.fuse(i, k), LoopsNotNestedError, "i", "k")
    marked = [ln.strip() for ln in e.detail().splitlines() if "# <-- fuse" in ln]
    assert marked == ["for i in range(16):  # <-- fuse", "for k in range(16):  # <-- fuse"]


def test_detail_marks_loop_of_refused_split(sch):
    i, j, k = y_loops(sch)
    e = assert_schedule_error(sch, lambda: sch.split(j, factors=[2, 2]), WrongFactorProductError)
    assert "for j in range(16):  # <-- split" in e.detail()


def test_detail_tirx_syntax(sch):
    i, j, k = y_loops(sch)
    e = assert_schedule_error(sch, lambda: sch.vectorize(k), NotDataParallelError)
    assert 'with T.sblock("Y"):  # <-- vectorize' in e.detail(syntax="tirx")


def test_detail_html(sch):
    i, j, k = y_loops(sch)
    e = assert_schedule_error(sch, lambda: sch.parallel(k), NotDataParallelError)
    html = e._repr_html_()
    assert html.startswith('<div class="wb-error">')
    assert "NotDataParallelError</b>: parallel: loop &quot;k&quot;" in html
    marked = [line for line in html.split("\n") if "rgba(211,47,47,0.22)" in line]
    # the loop and the block it refused are both marked
    assert len(marked) == 2 and all("&lt;-- parallel" in line for line in marked)
    text = [re.sub(r"<[^>]+>", "", line) for line in marked]
    assert "for k in range(16):" in text[0] and 'T.block("Y")' in text[1]


def test_errors_carry_primitive_loops_and_blocks(sch):
    i, j, k = y_loops(sch)
    e = assert_schedule_error(sch, lambda: sch.parallel(k), NotDataParallelError)
    assert e.primitive == "parallel"
    assert [v.name for v in e.loops] == ["k"]
    assert e.blocks == ("Y",)
    assert e.func is sch.func


def test_schedule_usable_after_refusals(sch):
    """A refused primitive loses nothing: the same handles keep working."""
    i, j, k = y_loops(sch)
    for bad in (
        lambda: sch.split(j, factors=[3, 3]),
        lambda: sch.fuse(i, k),
        lambda: sch.parallel(k),
        lambda: sch.get_block("nope"),
    ):
        with pytest.raises(wb.ScheduleError):
            bad()
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    assert [sch.get(lp).loop_var.name for lp in y_loops(sch)] == ["i", "j_0", "k", "j_1"]
    assert len(sch.trace) == 6


def test_every_error_class_is_exported_once():
    """Each family declares its errors at the top of its module; all of them are
    reachable from ``workbench.schedule`` under unique names."""
    import inspect

    import workbench.schedule as S

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for cls in subclasses(S.ScheduleError):
        if cls.__module__.startswith("workbench."):
            assert getattr(S, cls.__name__) is cls, cls
            assert inspect.getdoc(cls), f"{cls.__name__} has no docstring"


def test_reorder_fail_mixed_iter_type_loop():
    """A loop fused from a spatial and a reduction loop, then split unevenly, cannot be
    moved: the reduction would no longer start with its initialisation."""
    from workbench.schedule import MixedIterTypeLoopError
    from workbench.testing import assert_schedule_error

    sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
    i, j, k = sch.get_loops(sch.get_block("C"))
    outer, inner = sch.split(sch.fuse(j, k), [None, 3])
    assert_schedule_error(
        sch, lambda: sch.reorder(inner, i), MixedIterTypeLoopError, "j_k_fused_1", "C"
    )
