"""``wb.lower``: compact buffer allocation (TVM's PlanAndUpdateBufferAllocationLocation +
CompactBufferAllocation) and its use by ``wb.build``.

Hand-built scheduled IR (as the compute-location and cache primitives produce it:
full-size intermediates allocated in the root block) is lowered, checked for where each
buffer now lives and its shape, verified numerically against the unscheduled function,
and its C source inspected for small stack arrays. When the schedule primitives are
available the same checks run on real schedules.

The golden ``tests/golden/lower_mm_relu_tile.txt`` is regenerated with
``python tests/test_lower.py --update-golden`` (review the diff before committing).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import workbench as wb
from workbench.ir import (
    Block,
    Buffer,
    BufferStore,
    For,
    IRModule,
    IterVar,
    PrimFunc,
    SeqStmt,
    Var,
)
from workbench.ir.analysis import block_path, find_block, iter_blocks
from workbench.ir.expr import logical_and, select
from workbench.ir.transform import compact_buffer_allocation
from workbench.testing import (
    assert_verifies,
    chain_func,
    check_golden,
    conv2d_func,
    mm_relu_func,
    write_golden,
)

# ---------------------------------------------------------------------------
# hand-built scheduled IR


def _vars(names: str) -> list[Var]:
    return [Var(n) for n in names.split()]


def mm_relu_tiled(n: int = 16, tile: int = 4, scope: str = "local", align=()) -> PrimFunc:
    """mm_relu after split(j, [None, tile]), reorder(j_0, k, j_1), cache_write(Y, "local")
    and reverse_compute_at(C, j_0): ``Y_local`` (n, n) in the root block, written under
    ``i, j_0, k, j_1`` and read by the relu under ``i, j_0, ax0``."""
    A, B, C = (Buffer(x, (n, n)) for x in "ABC")
    Y = Buffer("Y_local", (n, n), scope=scope, align=align)
    i, j_0, k, j_1, ax0 = _vars("i j_0 k j_1 ax0")
    vi, vj, vk, wi, wj = _vars("vi vj vk vi vj")
    mm = Block(
        "Y",
        (IterVar(vi, n), IterVar(vj, n), IterVar(vk, n, "R")),
        (i, j_0 * tile + j_1, k),
        BufferStore(Y, Y[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(Y, wb.const(0.0), (vi, vj)),
    )
    relu = Block(
        "C",
        (IterVar(wi, n), IterVar(wj, n)),
        (i, j_0 * tile + ax0),
        BufferStore(C, wb.ir.expr.maximum(Y[wi, wj], 0.0), (wi, wj)),
    )
    tile_body = SeqStmt(
        (
            For(k, n, "serial", For(j_1, tile, "serial", mm)),
            For(ax0, tile, "serial", relu),
        )
    )
    body = For(i, n, "serial", For(j_0, n // tile, "serial", tile_body))
    return PrimFunc("mm_relu", (A, B, C), Block("root", (), (), body, alloc_buffers=(Y,)))


def conv2d_tiled(c: int = 2, hw: int = 6, k: int = 2, tile: int = 2) -> PrimFunc:
    """conv2d_nchw (3x3, padding 1) with the output tiled ``tile x tile`` under loops
    ``n, h_0, w_0`` and the padding stage computed at ``w_0`` (tile plus a halo of 2)."""
    K, R = k, 3
    data = Buffer("data", (1, c, hw, hw))
    weight = Buffer("weight", (K, c, R, R))
    out = Buffer("out", (1, K, hw, hw))
    pad = Buffer("pad", (1, c, hw + 2, hw + 2))
    n, h_0, w_0, ax0, ax1, ax2, kk, h_1, w_1, rc, ry, rx = _vars(
        "n h_0 w_0 ax0 ax1 ax2 k h_1 w_1 rc ry rx"
    )
    pn, pc, ph, pw = _vars("vn vc vh vw")
    inside = logical_and(
        logical_and(ph >= 1, ph < hw + 1), logical_and(pw >= 1, pw < hw + 1)
    )
    pad_block = Block(
        "pad",
        (IterVar(pn, 1), IterVar(pc, c), IterVar(ph, hw + 2), IterVar(pw, hw + 2)),
        (n, ax0, h_0 * tile + ax1, w_0 * tile + ax2),
        BufferStore(pad, select(inside, data[pn, pc, ph - 1, pw - 1], 0.0), (pn, pc, ph, pw)),
    )
    vn, vk, vh, vw, vrc, vry, vrx = _vars("vn vk vh vw vrc vry vrx")
    conv_block = Block(
        "conv",
        (
            IterVar(vn, 1), IterVar(vk, K), IterVar(vh, hw), IterVar(vw, hw),
            IterVar(vrc, c, "R"), IterVar(vry, R, "R"), IterVar(vrx, R, "R"),
        ),
        (n, kk, h_0 * tile + h_1, w_0 * tile + w_1, rc, ry, rx),
        BufferStore(
            out,
            out[vn, vk, vh, vw] + pad[vn, vrc, vh + vry, vw + vrx] * weight[vk, vrc, vry, vrx],
            (vn, vk, vh, vw),
        ),
        init=BufferStore(out, wb.const(0.0), (vn, vk, vh, vw)),
    )

    def nest(loops, inner):
        for var, ext in reversed(loops):
            inner = For(var, ext, "serial", inner)
        return inner

    halo = tile + R - 1
    fill = nest([(ax0, c), (ax1, halo), (ax2, halo)], pad_block)
    compute = nest([(kk, K), (h_1, tile), (w_1, tile), (rc, c), (ry, R), (rx, R)], conv_block)
    body = nest([(n, 1), (h_0, hw // tile), (w_0, hw // tile)], SeqStmt((fill, compute)))
    root = Block("root", (), (), body, alloc_buffers=(pad,))
    return PrimFunc("conv2d_nchw", (data, weight, out), root)


def _only(mod: IRModule) -> PrimFunc:
    assert len(mod) == 1
    return mod.functions[0][1]


def _allocs(func: PrimFunc) -> dict[str, tuple[Block, Buffer]]:
    """Every allocated buffer by name, with the block allocating it."""
    out = {}
    for b in iter_blocks(func.body):
        for buf in b.alloc_buffers:
            out[buf.name] = (b, buf)
    return out


def _alloc_parent_loop(func: PrimFunc, block: Block) -> str | None:
    """Name of the loop directly around an allocation block (None at the root)."""
    path = block_path(func, block.name)
    assert path is not None
    above = path[-2] if len(path) > 1 else None
    return above.loop_var.name if isinstance(above, For) else None


# ---------------------------------------------------------------------------
# mm_relu: the tile buffer


def test_lower_mm_relu_tile_moves_under_tile_loop():
    func = mm_relu_tiled()
    lowered = _only(wb.lower(func))
    assert func.body.alloc_buffers[0].shape == (16, 16)  # the input is not modified
    assert lowered.body.alloc_buffers == ()
    site, y = _allocs(lowered)["Y_local"]
    assert y.shape == (1, 4) and y.scope == "local" and y.dtype == "float32"
    assert site.name == "Y_local_alloc" and site.iter_vars == ()
    assert _alloc_parent_loop(lowered, site) == "j_0"
    text = lowered.script()
    assert "Y_local[vi - i, vj - j_0 * 4] = Y_local[vi - i, vj - j_0 * 4] + " in text
    assert "T.max(Y_local[vi - i, vj - j_0 * 4], T.float32(0))" in text
    # regions derived again: the blocks name the new buffer, the allocation block omits it
    assert "T.writes(Y_local[vi - i, vj - j_0 * 4])" in text
    assert "T.reads(A[i, 0:16], B[0:16, j_0 * 4:j_0 * 4 + 4])" in text


def test_lower_mm_relu_tile_golden():
    check_golden("lower_mm_relu_tile", wb.lower(mm_relu_tiled()).script())


def test_lower_mm_relu_tile_verifies_and_uses_a_stack_array():
    func = mm_relu_tiled()
    lowered = wb.lower(func)
    assert_verifies(lowered, mm_relu_func(16))
    assert_verifies(func, mm_relu_func(16))  # wb.build lowers the scheduled IR itself
    kernel = wb.build(func)
    assert "float Y_local[4] __attribute__((aligned(64)));  // local" in kernel.source
    assert "wb_alloc(" not in kernel.source.split("int32_t mm_relu(")[1]
    # the C declares the tile inside the j_0 loop
    body = kernel.source.split("int32_t mm_relu(")[1]
    assert body.index("for (int32_t j_0") < body.index("float Y_local[4]")
    assert body.index("float Y_local[4]") < body.index("for (int32_t k")


def test_kernel_keeps_the_scheduled_module_and_exposes_the_lowered_one():
    func = mm_relu_tiled()
    kernel = wb.build(func)
    assert _only(kernel.mod) is func
    assert wb.structural_equal(kernel.lowered, wb.lower(func))
    assert kernel.flops == wb.flop_count(func)


def test_lower_keeps_parameters():
    func = mm_relu_tiled()
    lowered = _only(wb.lower(func))
    assert lowered.params == func.params
    assert all(a is b for a, b in zip(lowered.params, func.params))
    assert lowered.name == func.name and lowered.attrs == func.attrs


def test_lower_is_idempotent():
    for func in (mm_relu_tiled(), conv2d_tiled()):
        once = wb.lower(func)
        twice = wb.lower(once)
        assert twice is once  # nothing left to compact: the module comes back as is


def test_lower_accepts_func_module_and_schedule():
    func = mm_relu_tiled()
    want = wb.lower(func).script()
    assert wb.lower(IRModule.from_funcs(func)).script() == want
    assert wb.lower(wb.Schedule(func)).script() == want
    with pytest.raises(TypeError, match="lower: expected a PrimFunc"):
        wb.lower("mm_relu")


def test_lower_every_function_of_a_module():
    tiled = mm_relu_tiled()
    other = chain_func(8)
    mod = IRModule.from_funcs(tiled, other)
    lowered = wb.lower(mod)
    assert lowered.names == ["mm_relu", "chain"]
    assert _allocs(lowered["mm_relu"])["Y_local"][1].shape == (1, 4)
    assert lowered["chain"] is other


def test_lower_respects_storage_align():
    func = mm_relu_tiled(scope="local", align=((0, 8, 1),))
    lowered = _only(wb.lower(func))
    y = _allocs(lowered)["Y_local"][1]
    assert y.shape == (1, 4) and y.align == ((0, 8, 1),)
    src = wb.build(func).source
    # axis 0's stride 4 rounds up to 9 (9 % 8 == 1): 9 elements for the (1, 4) tile
    assert "float Y_local[9]" in src
    assert_verifies(func, mm_relu_func(16))


# ---------------------------------------------------------------------------
# conv2d: the padding stage at an output tile


def test_lower_conv2d_pad_shrinks_to_tile_plus_halo():
    func = conv2d_tiled(c=2, hw=6, k=2, tile=2)
    lowered = _only(wb.lower(func))
    site, pad = _allocs(lowered)["pad"]
    assert pad.shape == (1, 2, 4, 4)  # 2x2 output tile + halo of 2, every channel
    assert _alloc_parent_loop(lowered, site) == "w_0"
    text = lowered.script()
    assert "pad[vn, vc, vh - h_0 * 2, vw - w_0 * 2] = T.Select(" in text
    assert "pad[vn, vrc, vh + vry - h_0 * 2, vw + vrx - w_0 * 2]" in text
    kernel = wb.build(func)
    assert "float pad_storage[32]" in kernel.source  # on the stack, read through a pointer
    assert "wb_alloc(" not in kernel.source.split("int32_t conv2d_nchw(")[1]
    assert_verifies(func, conv2d_func(1, 2, 6, 2, 3))


# ---------------------------------------------------------------------------
# what stays as it is


@pytest.mark.parametrize(
    "make", [lambda: mm_relu_func(16), lambda: chain_func(8), lambda: conv2d_func()],
    ids=["mm_relu", "chain", "conv2d"],
)
def test_lower_leaves_root_level_buffers(make):
    func = make()
    lowered = wb.lower(func)
    assert _only(lowered) is func
    assert wb.build(func).lowered.functions[0][1] is func


def test_lower_leaves_a_buffer_used_by_a_root_level_block():
    # S is written by a block right under the root (no loop) and read inside loop i
    A, B = Buffer("A", (8,)), Buffer("B", (8,))
    S = Buffer("S", (4,))
    i, vi = _vars("i vi")
    fill = Block("S", (), (), BufferStore(S, wb.const(3.0), (wb.const(1),)))
    use = For(
        i, 8, "serial",
        Block("B", (IterVar(vi, 8),), (i,), BufferStore(B, A[vi] * S[1], (vi,))),
    )
    func = PrimFunc("f", (A, B), Block("root", (), (), SeqStmt((fill, use)), alloc_buffers=(S,)))
    lowered = _only(wb.lower(func))
    # the LCA is the root: S stays there, shrunk to the one element that is used
    assert _allocs(lowered)["S"][0] is lowered.body
    assert _allocs(lowered)["S"][1].shape == (1,)
    a = np.arange(8, dtype="float32")
    b = np.zeros(8, "float32")
    wb.build(func)(a, b)
    np.testing.assert_array_equal(b, a * 3.0)


def _two_access_func(write_index, read_index) -> PrimFunc:
    """for i: for j: T[write_index(i, j)] = A[i, j];  for j2: B[i, j2] = T[read_index(i, j2)]"""
    A, B = Buffer("A", (4, 4)), Buffer("B", (4, 4))
    T = Buffer("T", (16,))
    i, j, j2 = _vars("i j j2")
    body = For(
        i, 4, "serial",
        SeqStmt(
            (
                For(j, 4, "serial", BufferStore(T, A[i, j], (write_index(i, j),))),
                For(j2, 4, "serial", BufferStore(B, T[read_index(i, j2)], (i, j2))),
            )
        ),
    )
    return PrimFunc("g", (A, B), Block("root", (), (), body, alloc_buffers=(T,)))


def test_lower_leaves_a_buffer_whose_boxes_differ():
    # written at i * 4 + j but read at (i * i) * 4 + j: no common base, not boxable
    func = _two_access_func(lambda i, j: i * 4 + j, lambda i, j: (i * i) * 4 + j)
    assert _only(wb.lower(func)) is func


def test_lower_leaves_a_non_affine_access():
    # (i * 4 + j) // 3 mixes the fixed loop i with the relaxed loop j inside a division
    func = _two_access_func(lambda i, j: i * 4 + j, lambda i, j: (i * 4 + j) // 3)
    assert _only(wb.lower(func)) is func


def test_lower_affine_two_access_func_shrinks():
    func = _two_access_func(lambda i, j: i * 4 + j, lambda i, j: i * 4 + j)
    lowered = _only(wb.lower(func))
    site, t = _allocs(lowered)["T"]
    assert t.shape == (4,) and _alloc_parent_loop(lowered, site) == "i"
    a = np.random.default_rng(0).random((4, 4), dtype="float32")
    b = np.zeros((4, 4), "float32")
    wb.build(func)(a, b)
    np.testing.assert_array_equal(a, b)


def test_lower_keeps_a_reduction_accumulator_above_its_reduce_loop():
    # a running sum: S[0] accumulates over k and P[k] reads the partial sum inside loop k.
    # Every access is under k, but S carries values across k's iterations: it stays put.
    A, P = Buffer("A", (8,)), Buffer("P", (8,))
    S = Buffer("S", (1,))
    k, vk, wk = _vars("k vk wk")
    acc = Block(
        "S", (IterVar(vk, 8, "R"),), (k,),
        BufferStore(S, S[0] + A[vk], (wb.const(0),)),
        init=BufferStore(S, wb.const(0.0), (wb.const(0),)),
    )
    read = Block("P", (IterVar(wk, 8),), (k,), BufferStore(P, S[0], (wk,)))
    body = For(k, 8, "serial", SeqStmt((acc, read)))
    func = PrimFunc("cumsum", (A, P), Block("root", (), (), body, alloc_buffers=(S,)))
    assert _only(wb.lower(func)) is func
    a = np.arange(1, 9, dtype="float32")
    p = np.zeros(8, "float32")
    wb.build(func)(a, p)
    np.testing.assert_array_equal(p, np.cumsum(a))


def test_lower_moves_a_buffer_into_an_enclosing_block():
    # the LCA of tmp's accesses is block "row" (it has iter vars): tmp joins its allocations
    A, B = Buffer("A", (4, 8)), Buffer("B", (4, 8))
    tmp = Buffer("tmp", (4, 8))
    i, j, j2, vi = _vars("i j j2 vi")
    row_body = SeqStmt(
        (
            For(j, 8, "serial", BufferStore(tmp, A[vi, j] + 1.0, (vi, j))),
            For(j2, 8, "serial", BufferStore(B, tmp[vi, j2] * 2.0, (vi, j2))),
        )
    )
    row = Block("row", (IterVar(vi, 4),), (i,), row_body)
    func = PrimFunc(
        "rows", (A, B), Block("root", (), (), For(i, 4, "serial", row), alloc_buffers=(tmp,))
    )
    lowered = _only(wb.lower(func))
    site, t = _allocs(lowered)["tmp"]
    assert site.name == "row" and t.shape == (1, 8)
    assert find_block(lowered, "tmp_alloc") is None
    assert "tmp[vi - i, j] = A[vi, j] + T.float32(1)" in lowered.script()
    a = np.random.default_rng(1).random((4, 8), dtype="float32")
    b = np.zeros((4, 8), "float32")
    wb.build(func)(a, b)
    np.testing.assert_allclose(b, (a + 1.0) * 2.0, rtol=1e-6)


def test_lower_thread_loops_keep_shared_memory_shared():
    """Under blockIdx.x > threadIdx.x: a local buffer goes under the thread loop, a shared
    one stays above threadIdx (sized for all its threads), a global one above blockIdx."""
    n = 8
    A, B = Buffer("A", (n, 4)), Buffer("B", (n, 4))
    L = Buffer("L", (n, 4), scope="local")
    S = Buffer("S", (n, 4), scope="shared")
    G = Buffer("G", (n, 4))
    bx, tx = _vars("bx tx")
    row = bx * 4 + tx

    def stage(name, out, value_fn):
        j, vi, vj = Var(f"j_{name}"), Var("vi"), Var("vj")
        blk = Block(
            name, (IterVar(vi, n), IterVar(vj, 4)), (row, j),
            BufferStore(out, value_fn(vi, vj), (vi, vj)),
        )
        return For(j, 4, "serial", blk)

    body = SeqStmt(
        (
            stage("S", S, lambda vi, vj: A[vi, vj] + 1.0),
            stage("L", L, lambda vi, vj: S[vi, vj] * 2.0),
            stage("G", G, lambda vi, vj: A[vi, vj] * 3.0),
            stage("B", B, lambda vi, vj: L[vi, vj] + G[vi, vj]),
        )
    )
    nest = For(bx, 2, "thread_binding", For(tx, 4, "thread_binding", body, "threadIdx.x"),
               "blockIdx.x")
    func = PrimFunc("gpu", (A, B), Block("root", (), (), nest, alloc_buffers=(L, S, G)))
    lowered = _only(wb.lower(func))
    allocs = _allocs(lowered)
    site, local = allocs["L"]
    assert local.shape == (1, 4) and _alloc_parent_loop(lowered, site) == "tx"
    site, shared = allocs["S"]
    assert shared.shape == (4, 4) and _alloc_parent_loop(lowered, site) == "bx"
    assert "S[vi - bx * 4, vj] = A[vi, vj] + T.float32(1)" in lowered.script()
    site, glob = allocs["G"]
    assert glob is G and site is lowered.body
    a = np.random.default_rng(2).random((n, 4), dtype="float32")
    b = np.zeros((n, 4), "float32")
    wb.build(func)(a, b)  # the C target runs thread loops one after another
    np.testing.assert_allclose(b, (a + 1.0) * 2.0 + a * 3.0, rtol=1e-6)


def test_compact_buffer_allocation_returns_the_same_function_when_nothing_moves():
    func = mm_relu_func(16)
    assert compact_buffer_allocation(func) is func


# ---------------------------------------------------------------------------
# real schedules (when the compute-location / cache primitives are available)

_needs = {
    name: pytest.mark.skipif(
        not hasattr(wb.Schedule, name), reason=f"Schedule.{name} is not available yet"
    )
    for name in ("compute_at", "reverse_compute_at", "cache_write", "cache_read")
}


def _tiled_mm_relu_schedule(n: int = 16) -> wb.Schedule:
    sch = wb.Schedule(mm_relu_func(n))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    return sch


@_needs["reverse_compute_at"]
def test_lower_real_schedule_mm_relu_reverse_compute_at():
    sch = _tiled_mm_relu_schedule()
    lowered = _only(wb.lower(sch.mod))
    site, y = _allocs(lowered)["Y"]
    assert y.shape == (1, 4) and _alloc_parent_loop(lowered, site) == "j_0"
    kernel = wb.build(sch.mod)
    assert "float Y_storage[4]" in kernel.source
    assert "wb_alloc(" not in kernel.source.split("mm_relu(")[1]
    assert_verifies(sch, mm_relu_func(16))


@_needs["reverse_compute_at"]
@_needs["cache_write"]
def test_lower_real_schedule_mm_relu_cache_write():
    sch = wb.Schedule(mm_relu_func(16))
    blk = sch.get_block("Y")
    sch.cache_write(blk, 0, "local")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    for consumer in sch.get_consumers(blk):
        sch.reverse_compute_at(consumer, j0)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    lowered = _only(wb.lower(sch.mod))
    local = [buf for _, buf in _allocs(lowered).values() if buf.scope == "local"]
    assert [b.shape for b in local] == [(1, 4)]
    src = wb.build(sch.mod).source
    assert f"float {local[0].name}[4]" in src
    assert_verifies(sch, mm_relu_func(16))


@_needs["compute_at"]
def test_lower_real_schedule_conv2d_compute_at():
    func = conv2d_func(1, 2, 6, 2, 3)
    sch = wb.Schedule(func)
    n, k, h, w, rc, ry, rx = sch.get_loops(sch.get_block("conv"))
    h0, h1 = sch.split(h, factors=[None, 2])
    w0, w1 = sch.split(w, factors=[None, 3])
    sch.reorder(h0, w0, k, h1, w1)
    sch.compute_at(sch.get_block("pad"), w0)
    lowered = _only(wb.lower(sch.mod))
    site, pad = _allocs(lowered)["pad"]
    assert pad.shape == (1, 2, 4, 5)  # a 2x3 tile plus a halo of 2
    assert _alloc_parent_loop(lowered, site) == "w_0"
    assert "float pad_storage[40]" in wb.build(sch.mod).source
    assert_verifies(sch, func)


@_needs["compute_at"]
@_needs["cache_read"]
def test_lower_real_schedule_cache_read_at_tile():
    func = mm_relu_func(16)
    sch = wb.Schedule(func)
    blk = sch.get_block("Y")
    a_local = sch.cache_read(blk, 0, "local")
    i, j, k = sch.get_loops(blk)
    sch.compute_at(a_local, i)
    lowered = _only(wb.lower(sch.mod))
    local = [buf for _, buf in _allocs(lowered).values() if buf.scope == "local"]
    assert [b.shape for b in local] == [(1, 16)]  # one row of A per i
    assert_verifies(sch, func)


if __name__ == "__main__":  # pragma: no cover - regenerating goldens by hand
    if "--update-golden" not in sys.argv:
        sys.exit("usage: python tests/test_lower.py --update-golden")
    print(write_golden("lower_mm_relu_tile", wb.lower(mm_relu_tiled()).script()))
