"""read_at / write_at under a split that does not divide its loop.

``split(n, factors=[3, None])`` of a loop of 10 iterations runs 3 x 4 = 12, the block
guarded by ``T.where``. The copy block of read_at / write_at covers the region relaxed
over those 12 iterations, two rows past the buffer: where that region may leave the
buffer the copy is guarded by an ``if`` (a constant region is clipped to the buffer
instead), so it neither reads nor writes out of bounds. TVM 0.27 copies the whole
relaxed region unguarded (its copy reads and writes past the buffer); where the region
stays inside the buffer both agree.
"""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.ir import IfThenElse
from workbench.ir.functor import iter_stmts
from workbench.testing import access_problems, assert_verifies, roundtrip_trace


def _func() -> wb.ir.PrimFunc:
    return wb.workloads.elementwise_chain(10, 4)


def _split(sch: wb.Schedule, factors=(3, None)):
    block = sch.get_block("relu")
    n, c = sch.get_loops(block)
    n0, n1 = sch.split(n, factors=list(factors), preserve_unit_iters=False)
    return block, n0, n1, c


def _read_outer(sch):
    block, n0, _, _ = _split(sch)
    sch.read_at(n0, block, 0, "global")


def _write_outer(sch):
    block, n0, _, _ = _split(sch)
    sch.write_at(n0, block, 0, "global")


def _read_inner(sch):
    block, _, n1, _ = _split(sch)
    sch.read_at(n1, block, 0, "local")


def _read_whole(sch):
    """The copy at ``c`` covers all 12 rows: a constant region, clipped to 10."""
    block, n0, n1, c = _split(sch)
    sch.reorder(c, n0, n1)
    sch.read_at(c, block, 0, "global")


CASES = {
    "read_at_outer": _read_outer,
    "write_at_outer": _write_outer,
    "read_at_inner": _read_inner,
    "read_at_whole": _read_whole,
}


def _copy_block(sch: wb.Schedule) -> wb.ir.Block:
    (copy,) = [b for b in wb.ir.iter_blocks(sch.func.body) if b.annotations]
    return copy


@pytest.mark.parametrize("name", CASES)
def test_copy_stays_inside_the_buffer(name):
    func = _func()
    sch = wb.Schedule(func)
    CASES[name](sch)
    assert access_problems(sch) == []
    assert_verifies(sch, func)
    roundtrip_trace(sch, func)


@pytest.mark.parametrize("name", ["read_at_outer", "write_at_outer", "read_at_inner"])
def test_copy_of_a_padded_region_is_guarded(name):
    sch = wb.Schedule(_func())
    CASES[name](sch)
    copy = _copy_block(sch)
    guards = [s for s in iter_stmts(copy.body) if isinstance(s, IfThenElse)]
    assert len(guards) == 1
    assert str(guards[0].condition) == {
        "read_at_outer": "v0 * 4 + ax0 < 10",
        "write_at_outer": "v0 * 4 + ax0 < 10",
        "read_at_inner": "v0 * 4 + v1 + ax0 < 10",
    }[name]


def test_constant_region_is_clipped_to_the_buffer():
    sch = wb.Schedule(_func())
    _read_whole(sch)
    copy = _copy_block(sch)
    (read,) = copy.reads
    assert [(int(mn.value), int(ext.value)) for mn, ext in read.region[:1]] == [(0, 10)]
    assert not any(isinstance(s, IfThenElse) for s in iter_stmts(copy.body))


def test_dividing_split_gets_no_guard():
    """A region that provably stays inside the buffer is copied as before (TVM's IR)."""
    func = _func()
    sch = wb.Schedule(func)
    block, n0, _, _ = _split(sch, factors=(2, None))
    sch.read_at(n0, block, 0, "global")
    copy = _copy_block(sch)
    assert not any(isinstance(s, IfThenElse) for s in iter_stmts(copy.body))
    assert_verifies(sch, func)


# --------------------------------------------------------------------------- TVM


@pytest.mark.tvm
@pytest.mark.parametrize("name", ["read_at_outer", "write_at_outer"])
def test_tvm_copies_the_padded_region_unguarded(name):
    """TVM 0.27 replays our trace to the same IR without the guard: read back, its copy
    reaches past the buffer, ours does not. (If a later TVM guards it, align with it.)"""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional)")
    func = _func()
    ours = wb.Schedule(func)
    CASES[name](ours)
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    theirs = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(
        ours.trace.as_json_obj(syntax="tirx"), theirs)
    back = wb.from_script(theirs.mod.script())
    assert any("out of bounds" in p for p in access_problems(back))
    assert access_problems(ours) == []


SYMBOLIC = '''
@T.prim_func
def f(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 4))
    B = T.match_buffer(b, (n, 4))
    for i, j in T.grid(n, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
'''


@pytest.mark.parametrize("factor, guard", [(3, "v0 * 3 + ax0 < n"), (1, None)])
def test_symbolic_dimension_is_guarded_unless_provably_inside(factor, guard):
    """Rows ``v0 * 3 + [0, 3)`` of ``ceildiv(n, 3)`` tiles may pass ``n``; rows ``v0``
    of ``n`` tiles of one row cannot."""
    sch = wb.Schedule(wb.from_script(SYMBOLIC))
    block = sch.get_block("B")
    i, _ = sch.get_loops(block)
    i0, _ = sch.split(i, factors=[None, factor])
    sch.read_at(i0, block, 0, "global")
    ifs = [s for s in iter_stmts(_copy_block(sch).body) if isinstance(s, IfThenElse)]
    assert [str(s.condition) for s in ifs] == ([guard] if guard else [])


def test_write_at_of_an_update_whose_start_is_stored_outside_is_refused():
    """After decompose_reduction the init stores ``sum`` outside loop ``i``; copying the
    update's writes at ``i`` would make it accumulate into an uninitialised copy."""
    from workbench.schedule.primitives.read_write_at import ReadBeforeWriteError

    func = wb.workloads.layer_norm(4, 8)
    sch = wb.Schedule(func)
    block = sch.get_block("sum")
    i, _ = sch.get_loops(block)
    sch.decompose_reduction(block, i)
    update = sch.get_block("sum_update")
    i, _ = sch.get_loops(update)
    before = sch.mod.script()
    with pytest.raises(ReadBeforeWriteError, match='block "sum_update" reads buffer "sum"'):
        sch.write_at(i, update, 0, "global")
    assert sch.mod.script() == before
