"""Looking things up in a schedule: blocks, loops, children, producers/consumers,
multi-function modules, ``copy()``, and the sharing of unchanged IR subtrees."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.ir import Block, For, IRModule, SeqStmt
from workbench.schedule import BlockNotFoundError, FunctionNotFoundError
from workbench.testing import (
    assert_schedule_error,
    assert_verifies,
    chain_func,
    conv2d_func,
    matmul_func,
    mm_relu_func,
    roundtrip_trace,
    shared_outer_loop_func,
    transpose_func,
)


def names(sch: wb.Schedule, rvs) -> list[str]:
    out = []
    for rv in rvs:
        node = sch.get(rv)
        out.append(node.loop_var.name if isinstance(node, For) else node.name)
    return out


@pytest.fixture
def mm() -> wb.Schedule:
    return wb.Schedule(mm_relu_func(16))


@pytest.fixture
def chain() -> wb.Schedule:
    return wb.Schedule(chain_func(8))


# --------------------------------------------------------------------------- get_block


def test_get_block_returns_handle_to_named_block(mm):
    y = mm.get_block("Y")
    node = mm.get(y)
    assert isinstance(node, Block)
    assert node.name == "Y"
    assert [iv.kind for iv in node.iter_vars] == ["S", "S", "R"]


def test_get_sblock_is_an_alias(mm):
    y1 = mm.get_sblock("Y")
    y2 = mm.get_block("Y", func_name="mm_relu")
    assert mm.get(y1) is mm.get(y2)
    # both record the same instruction kind
    assert mm.trace.lines() == [
        'b0 = sch.get_block(name="Y", func_name="mm_relu")',
        'b1 = sch.get_block(name="Y", func_name="mm_relu")',
    ]


def test_get_block_records_func_name_even_when_implicit(mm):
    mm.get_block("C")
    assert mm.trace.lines() == ['b0 = sch.get_block(name="C", func_name="mm_relu")']


def test_block_handle_survives_loop_transformations(mm):
    y = mm.get_block("Y")
    i, j, k = mm.get_loops(y)
    mm.split(j, factors=[None, 4])
    mm.fuse(*mm.get_loops(y)[:2])
    assert mm.get(y).name == "Y"
    assert names(mm, mm.get_loops(y)) == ["i_j_0_fused", "j_1", "k"]


# --------------------------------------------------------------------------- get_loops


def test_get_loops_outermost_first(mm):
    assert names(mm, mm.get_loops(mm.get_block("Y"))) == ["i", "j", "k"]
    assert names(mm, mm.get_loops(mm.get_block("C"))) == ["i", "j"]


def test_get_loops_handles_are_distinct_per_call(mm):
    a = mm.get_loops(mm.get_block("Y"))
    b = mm.get_loops(mm.get_block("Y"))
    assert a[0] is not b[0]
    assert mm.get(a[0]) is mm.get(b[0])


def test_get_loops_of_y_and_c_are_different_loops(mm):
    yi = mm.get_loops(mm.get_block("Y"))[0]
    ci = mm.get_loops(mm.get_block("C"))[0]
    assert mm.get(yi) is not mm.get(ci)
    mm.parallel(yi)
    assert mm.get(yi).kind == "parallel"
    assert mm.get(ci).kind == "serial"


def test_get_loops_after_split_and_reorder(mm):
    y = mm.get_block("Y")
    i, j, k = mm.get_loops(y)
    j0, j1 = mm.split(j, factors=[None, 4])
    mm.reorder(j0, k, j1)
    loops = mm.get_loops(y)
    assert names(mm, loops) == ["i", "j_0", "k", "j_1"]
    assert [mm.get(lp).extent for lp in loops] == [16, 4, 16, 4]


def test_get_loops_of_conv_has_seven_loops():
    sch = wb.Schedule(conv2d_func())
    assert names(sch, sch.get_loops(sch.get_block("conv"))) == [
        "n",
        "k",
        "h",
        "w",
        "rc",
        "ry",
        "rx",
    ]
    assert names(sch, sch.get_loops(sch.get_block("pad"))) == ["n", "c", "h", "w"]


def test_get_loops_in_shared_outer_loop():
    sch = wb.Schedule(shared_outer_loop_func(4))
    assert names(sch, sch.get_loops(sch.get_block("B"))) == ["i", "j"]
    assert names(sch, sch.get_loops(sch.get_block("C"))) == ["i", "jj"]
    bi = sch.get_loops(sch.get_block("B"))[0]
    ci = sch.get_loops(sch.get_block("C"))[0]
    assert sch.get(bi) is sch.get(ci)


# --------------------------------------------------------------------------- children


def test_get_child_blocks_of_loop(mm):
    i, j, k = mm.get_loops(mm.get_block("Y"))
    for lp in (i, j, k):
        assert names(mm, mm.get_child_blocks(lp)) == ["Y"]


def test_get_child_sblocks_alias(mm):
    i, _ = mm.get_loops(mm.get_block("C"))
    assert names(mm, mm.get_child_sblocks(i)) == ["C"]


def test_get_child_blocks_of_shared_loop_in_program_order():
    sch = wb.Schedule(shared_outer_loop_func(4))
    i, _ = sch.get_loops(sch.get_block("B"))
    assert names(sch, sch.get_child_blocks(i)) == ["B", "C"]


def test_get_child_blocks_of_leaf_block_is_empty(chain):
    assert chain.get_child_blocks(chain.get_block("C")) == []


def test_get_child_blocks_records_outputs(chain):
    i, j = chain.get_loops(chain.get_block("B"))
    chain.get_child_blocks(i)
    assert chain.trace.lines()[-1] == "b3, = sch.get_child_blocks(block_or_loop=l1)"
    roundtrip_trace(chain, chain_func(8))


# --------------------------------------------------------------------------- producers/consumers


def test_producers_consumers_mm_relu(mm):
    y, c = mm.get_block("Y"), mm.get_block("C")
    assert names(mm, mm.get_producers(y)) == []
    assert names(mm, mm.get_consumers(y)) == ["C"]
    assert names(mm, mm.get_producers(c)) == ["Y"]
    assert names(mm, mm.get_consumers(c)) == []


@pytest.mark.parametrize(
    "block, producers, consumers",
    [("B", [], ["C"]), ("C", ["B"], ["D"]), ("D", ["C"], [])],
)
def test_producers_consumers_chain(chain, block, producers, consumers):
    b = chain.get_block(block)
    assert names(chain, chain.get_producers(b)) == producers
    assert names(chain, chain.get_consumers(b)) == consumers


def test_producers_consumers_after_loop_transforms(chain):
    """Loop structure does not change the dataflow between blocks."""
    c = chain.get_block("C")
    i, j = chain.get_loops(c)
    chain.fuse(i, j)
    assert names(chain, chain.get_producers(c)) == ["B"]
    assert names(chain, chain.get_consumers(c)) == ["D"]


def test_producers_consumers_recorded_and_replayed(chain):
    c = chain.get_block("C")
    (p,) = chain.get_producers(c)
    (q,) = chain.get_consumers(c)
    chain.split(chain.get_loops(p)[1], factors=[None, 2])
    chain.parallel(chain.get_loops(q)[0])
    assert chain.trace.lines()[1:3] == [
        "b1, = sch.get_producers(block=b0)",
        "b2, = sch.get_consumers(block=b0)",
    ]
    roundtrip_trace(chain, chain_func(8))
    assert_verifies(chain, chain_func(8))


def test_producers_consumers_of_conv():
    sch = wb.Schedule(conv2d_func())
    assert names(sch, sch.get_producers(sch.get_block("conv"))) == ["pad"]
    assert names(sch, sch.get_consumers(sch.get_block("pad"))) == ["conv"]


# --------------------------------------------------------------------------- modules


@pytest.fixture
def two_funcs() -> wb.Schedule:
    return wb.Schedule(IRModule.from_funcs(mm_relu_func(16), transpose_func(8, 12)))


def test_module_get_block_needs_func_name(two_funcs):
    assert_schedule_error(
        two_funcs,
        lambda: two_funcs.get_block("Y"),
        FunctionNotFoundError,
        "mm_relu",
        "transpose",
    )


def test_module_func_property_needs_work_on(two_funcs):
    with pytest.raises(FunctionNotFoundError):
        two_funcs.func  # noqa: B018


def test_module_get_block_with_func_name(two_funcs):
    y = two_funcs.get_block("Y", func_name="mm_relu")
    b = two_funcs.get_block("B", func_name="transpose")
    assert two_funcs.get(y).name == "Y"
    assert names(two_funcs, two_funcs.get_loops(b)) == ["j", "i"]


def test_module_work_on_then_get_block(two_funcs):
    two_funcs.work_on("transpose")
    assert two_funcs.func.name == "transpose"
    b = two_funcs.get_block("B")
    assert two_funcs.trace.lines()[-1] == 'b0 = sch.get_block(name="B", func_name="transpose")'
    assert_schedule_error(
        two_funcs, lambda: two_funcs.get_block("Y"), BlockNotFoundError, "Y", "transpose"
    )
    two_funcs.work_on("mm_relu")
    assert two_funcs.get(two_funcs.get_block("Y")).name == "Y"
    assert two_funcs.get(b).name == "B"  # the old handle still points into transpose


def test_module_work_on_unknown_function(two_funcs):
    assert_schedule_error(
        two_funcs, lambda: two_funcs.work_on("conv"), FunctionNotFoundError, "conv"
    )


def test_module_get_block_unknown_func_name(two_funcs):
    assert_schedule_error(
        two_funcs,
        lambda: two_funcs.get_block("Y", func_name="nope"),
        FunctionNotFoundError,
        "nope",
    )


def test_module_primitive_changes_only_its_function(two_funcs):
    before_t = two_funcs.mod["transpose"]
    i, j, k = two_funcs.get_loops(two_funcs.get_block("Y", func_name="mm_relu"))
    two_funcs.split(j, factors=[None, 4])
    assert two_funcs.mod["transpose"] is before_t
    assert two_funcs.mod.names == ["mm_relu", "transpose"]


def test_module_same_block_name_in_two_functions():
    mod = IRModule.from_funcs(
        _renamed(matmul_func(8, 8, 8), "mm_a"),
        _renamed(matmul_func(8, 8, 8), "mm_b"),
    )
    sch = wb.Schedule(mod)
    ca = sch.get_block("C", func_name="mm_a")
    cb = sch.get_block("C", func_name="mm_b")
    i, j, k = sch.get_loops(cb)
    sch.split(j, factors=[2, 4])
    assert names(sch, sch.get_loops(ca)) == ["i", "j", "k"]
    assert names(sch, sch.get_loops(cb)) == ["i", "j_0", "j_1", "k"]
    assert sch.mod["mm_a"] is mod["mm_a"]
    roundtrip_trace(sch, mod)
    assert_verifies(sch.mod["mm_b"], mod["mm_b"])


def _renamed(func: wb.PrimFunc, name: str) -> wb.PrimFunc:
    from dataclasses import replace

    return replace(func, name=name, attrs=())


def test_module_loops_of_two_functions_cannot_be_reordered_together(two_funcs):
    i, j, k = two_funcs.get_loops(two_funcs.get_block("Y", func_name="mm_relu"))
    tj, ti = two_funcs.get_loops(two_funcs.get_block("B", func_name="transpose"))
    err = assert_schedule_error(
        two_funcs, lambda: two_funcs.reorder(i, ti), wb.ScheduleError, "mm_relu", "transpose"
    )
    assert err.primitive == "reorder"


# --------------------------------------------------------------------------- copy


def test_copy_is_independent(mm):
    y = mm.get_block("Y")
    i, j, k = mm.get_loops(y)
    original_text = mm.mod.script()
    original_trace = mm.trace.script()

    other = mm.copy()
    j0, j1 = other.split(j, factors=[None, 4])
    other.parallel(i)

    assert mm.mod.script() == original_text
    assert mm.trace.script() == original_trace
    assert len(other.trace) == len(mm.trace) + 2
    # handles made before the copy are valid in both
    assert mm.get(j).loop_var.name == "j"
    assert mm.get(i).kind == "serial"
    assert other.get(i).kind == "parallel"
    assert names(other, [j0, j1]) == ["j_0", "j_1"]
    # j is gone in the copy only
    with pytest.raises(wb.ScheduleError):
        other.get(j)
    # and the original keeps scheduling on its own
    mm.fuse(i, j)
    assert names(mm, mm.get_loops(y)) == ["i_j_fused", "k"]
    assert names(other, other.get_loops(y)) == ["i", "j_0", "j_1", "k"]


def test_copy_handles_from_the_copy_are_foreign_to_the_original(mm):
    other = mm.copy()
    i, j, k = other.get_loops(other.get_block("Y"))
    assert_schedule_error(mm, lambda: mm.parallel(i), wb.ScheduleError)


def test_copy_trace_replays(mm):
    i, j, k = mm.get_loops(mm.get_block("Y"))
    mm.split(j, factors=[None, 4])
    other = mm.copy()
    other.reorder(*other.get_loops(other.get_block("Y"))[::-1])
    roundtrip_trace(other, mm_relu_func(16))
    roundtrip_trace(mm, mm_relu_func(16))
    assert_verifies(other, mm_relu_func(16))


# --------------------------------------------------------------------------- sharing


def _nests(func: wb.PrimFunc):
    body = func.body.body
    assert isinstance(body, SeqStmt)
    return body.stmts


def test_unchanged_nest_is_shared_after_split_elsewhere(mm):
    before = mm.func
    y_nest, c_nest = _nests(before)
    i, j = mm.get_loops(mm.get_block("C"))
    mm.split(j, factors=[None, 4])
    after = mm.func
    assert after is not before
    y_after, c_after = _nests(after)
    assert y_after is y_nest  # the Y nest is the very same object
    assert c_after is not c_nest
    assert before.params == after.params


def test_unchanged_nest_is_shared_after_annotate(chain):
    before = chain.func
    nests = _nests(before)
    chain.annotate(chain.get_block("C"), ann_key="x", ann_val=1)
    after = _nests(chain.func)
    assert after[0] is nests[0]
    assert after[2] is nests[2]
    assert after[1] is not nests[1]


def test_outer_loop_shared_when_inner_split(mm):
    """split(k) rebuilds the k loop and its ancestors only; the block C nest and the
    buffers are untouched."""
    before = mm.func
    i, j, k = mm.get_loops(mm.get_block("Y"))
    mm.split(k, factors=[None, 4])
    y_after, c_after = _nests(mm.func)
    assert c_after is _nests(before)[1]
    assert mm.func.body.alloc_buffers == before.body.alloc_buffers


def test_original_function_is_never_mutated():
    func = mm_relu_func(16)
    text = func.script()
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.parallel(i)
    sch.fuse(*sch.get_loops(sch.get_block("C")))
    assert func.script() == text
    assert wb.Schedule(func).mod.script() == wb.Schedule(mm_relu_func(16)).mod.script()
