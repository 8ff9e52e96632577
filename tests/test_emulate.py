"""The GPU emulator: kernels as CPU loops over thread blocks, threads split at barriers.

Kernels come from the planner (``plan_device_module``) for scheduled functions, or are
built by hand (IR nodes) where a test needs a precise shape: a barrier between a shared
write and a read of another thread's element, a local buffer live across a barrier, a
barrier under thread-dependent control flow.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import generate_c
from workbench.codegen.emulate import (
    DivergentBarrierError,
    emulate_device_function,
    instrument_tables,
    thread_regions,
)
from workbench.codegen.gpu import plan_device_module
from workbench.codegen.gpu_instrument import RaceError, TableBuilder, read_race_report, set_mode
from workbench.codegen.gpu_plan import DeviceFunction, GpuKernel, LaunchConfig, barrier
from workbench.gpu_examples import gpu_matmul_schedule
from workbench.ir.buffer import Buffer
from workbench.ir.expr import CallExtern, IntImm, Var, if_then_else
from workbench.ir.functor import iter_exprs, iter_stmts, stmt_exprs, substitute
from workbench.ir.simplify import simplify
from workbench.ir.stmt import (
    Block,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterVar,
    LetStmt,
    PrimFunc,
    SeqStmt,
)

RNG = np.random.default_rng(0)


def _emulated_device(sch: wb.Schedule) -> DeviceFunction:
    plan = plan_device_module(wb.lower(sch.mod))
    assert len(plan.functions) == 1
    return plan.functions[0]


def _run(func: PrimFunc, *arrays):
    kernel = wb.build(func, target="c")
    kernel(*arrays)
    return arrays


def _bound(var, extent, tag, body):
    return For(var, extent, "thread_binding", body, tag)


def _device(name, params, body, *, shared=(), local=(), grid=(2, 1, 1), block=(32, 1, 1)):
    func = PrimFunc(name, tuple(params), Block("root", (), (), body))
    kernel = GpuKernel(f"{name}_kernel", name, body, tuple(params), (), tuple(shared),
                       tuple(local), LaunchConfig(grid, block))
    return DeviceFunction(name, func, (), (kernel,))


def _rotate_device(with_barrier=True, wrap=None):
    """Each block of 32 threads: ``S[t] = A[g]``; barrier; ``B[g] = S[(t + 1) % 32]``:
    every thread reads the element its neighbour wrote."""
    A, B = Buffer("A", (64,)), Buffer("B", (64,))
    S = Buffer("S", (32,), scope="shared")
    b, t = Var("b"), Var("t")
    g = b * 32 + t
    stmts = [BufferStore(S, A[g], (t,))]
    if with_barrier:
        stmts.append(barrier())
    stmts.append(BufferStore(B, S[(t + 1) % 32], (g,)))
    inner = SeqStmt(tuple(stmts))
    if wrap is not None:
        inner = wrap(inner, b, t)
    body = _bound(b, 2, "blockIdx.x", _bound(t, 32, "threadIdx.x", inner))
    return _device("rotate", (A, B), body, shared=(S,))


def _rotated(a):
    return np.concatenate([np.roll(a[:32], -1), np.roll(a[32:], -1)])


def _calls(func: PrimFunc, name: str | None = None) -> list[CallExtern]:
    out = []
    for s in iter_stmts(func.body):
        if isinstance(s, Evaluate) and isinstance(s.value, CallExtern):
            if name is None or s.value.name == name:
                out.append(s.value)
    return out


def _block_allocs(func: PrimFunc) -> dict[str, Buffer]:
    return {b.name: b for s in iter_stmts(func.body) if isinstance(s, Block)
            for b in s.alloc_buffers}


# -- whole schedules ---------------------------------------------------------------------


@pytest.mark.parametrize("n,align", [(64, True), (64, False), (128, True), (128, False)])
def test_emulate_gpu_matmul_matches_numpy(n, align):
    tile = 32 if n == 64 else 64  # several thread blocks at both sizes
    sch = gpu_matmul_schedule(n, tile=tile, per_thread=4 if tile == 64 else 2, align=align)
    emulated = emulate_device_function(_emulated_device(sch))
    a = RNG.random((n, n), dtype="float32")
    b = RNG.random((n, n), dtype="float32")
    c = np.zeros((n, n), "float32")
    _run(emulated, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-4)
    # the fetch region and the compute region in the k loop, the write-back after it
    assert len(thread_regions(emulated)) == 3
    loop = emulated.body.body
    assert isinstance(loop, For) and loop.kind == "parallel"
    allocs = _block_allocs(emulated)
    threads = (tile // (4 if tile == 64 else 2)) ** 2
    # the accumulator lives across the barriers: one copy per thread, thread id first
    assert allocs["C_local"].shape[0] == threads
    assert allocs["A_shared"].shape == (tile, 8)
    if align:
        assert allocs["A_shared"].align == ((0, 32, 1),)


def test_emulate_barrier_orders_threads_of_a_block():
    emulated = emulate_device_function(_rotate_device())
    a = RNG.random(64, dtype="float32")
    b = np.zeros(64, "float32")
    _run(emulated, a, b)
    np.testing.assert_array_equal(b, _rotated(a))
    assert len(thread_regions(emulated)) == 2


def test_emulate_without_barrier_is_one_region():
    # without the barrier the result is undefined on a GPU: only the structure is checked
    emulated = emulate_device_function(_rotate_device(with_barrier=False))
    regions = thread_regions(emulated)
    assert len(regions) == 1
    assert regions[0].loop_var.name == "tx" and regions[0].extent == 32


def test_emulate_barrier_in_block_bound_to_threads():
    """A block whose iter var is bound to the thread index and which holds the barrier
    becomes plain statements (its binding substituted), split at the barrier."""
    def wrap(inner, b, t):
        v = Var("v")
        body = substitute(inner, {t: v})
        return Block("rot", (IterVar(v, 32),), (t,), body)

    emulated = emulate_device_function(_rotate_device(wrap=wrap))
    assert len(thread_regions(emulated)) == 2
    a = RNG.random(64, dtype="float32")
    b = np.zeros(64, "float32")
    _run(emulated, a, b)
    np.testing.assert_array_equal(b, _rotated(a))


def test_emulate_barrier_in_let_of_the_thread_index():
    """A let of a thread-dependent value around a barrier: every use reads the value."""
    def wrap(inner, b, t):
        g = Var("g")
        store_b = inner.stmts[-1]  # B[b * 32 + t] = S[(t + 1) % 32]
        body = SeqStmt((*inner.stmts[:-1], BufferStore(store_b.buffer, store_b.value, (g,))))
        return LetStmt(g, b * 32 + t, body)

    emulated = emulate_device_function(_rotate_device(wrap=wrap))
    assert len(thread_regions(emulated)) == 2
    a = RNG.random(64, dtype="float32")
    b = np.zeros(64, "float32")
    _run(emulated, a, b)
    np.testing.assert_array_equal(b, _rotated(a))


def test_emulate_uniform_if_and_loop_around_barrier():
    """A loop and an ``if`` that do not depend on the thread hold barriers: each region
    inside runs in its own thread loops, once per iteration."""
    def wrap(inner, b, t):
        k = Var("k")
        return For(k, 3, "serial", IfThenElse(b < 5, SeqStmt((inner, barrier()))))

    emulated = emulate_device_function(_rotate_device(wrap=wrap))
    assert len(thread_regions(emulated)) == 2
    a = RNG.random(64, dtype="float32")
    b = np.zeros(64, "float32")
    _run(emulated, a, b)
    np.testing.assert_array_equal(b, _rotated(a))


# -- local buffers -----------------------------------------------------------------------


def _local_device():
    """``L`` (local) is written before the barrier and read after it; ``M`` (local) is
    used after it only."""
    A, B = Buffer("A", (64,)), Buffer("B", (64,))
    S = Buffer("S", (32,), scope="shared")
    L = Buffer("L", (2,), scope="local")
    M = Buffer("M", (1,), scope="local")
    b, t = Var("b"), Var("t")
    g = b * 32 + t
    inner = SeqStmt((
        BufferStore(L, A[g] * 2.0, (IntImm(0),)),
        BufferStore(L, A[g] + 1.0, (IntImm(1),)),
        BufferStore(S, L[0], (t,)),
        barrier(),
        BufferStore(M, S[(t + 1) % 32], (IntImm(0),)),
        BufferStore(B, M[0] + L[1], (g,)),
    ))
    body = _bound(b, 2, "blockIdx.x", _bound(t, 32, "threadIdx.x", inner))
    return _device("locals", (A, B), body, shared=(S,), local=(L, M))


def test_emulate_local_live_across_barrier_is_replicated():
    emulated = emulate_device_function(_local_device())
    allocs = _block_allocs(emulated)
    assert allocs["L"].shape == (32, 2)  # one copy per thread
    assert allocs["M"].shape == (1,)  # used in one region: allocated inside it
    regions = thread_regions(emulated)
    assert len(regions) == 2
    # M is allocated inside the thread loop of the second region
    inner_allocs = [x.alloc_buffers for x in iter_stmts(regions[1]) if isinstance(x, Block)]
    assert any(allocs["M"] in a for a in inner_allocs)
    assert all(not isinstance(x, Block) or not x.alloc_buffers for x in iter_stmts(regions[0]))
    stores = [x for x in iter_stmts(regions[0]) if isinstance(x, BufferStore)
              and x.buffer.name == "L"]
    assert stores and all(x.indices[0] is regions[0].loop_var for x in stores)
    a = RNG.random(64, dtype="float32")
    out = np.zeros(64, "float32")
    _run(emulated, a, out)
    np.testing.assert_allclose(out, 2 * _rotated(a) + a + 1, rtol=1e-6)


def test_emulate_local_in_loop_with_barrier_is_replicated():
    """A local buffer used in one region inside a loop holding a barrier keeps its value
    from one iteration to the next (an accumulator): it is replicated too."""
    A, B = Buffer("A", (64,)), Buffer("B", (64,))
    S = Buffer("S", (32,), scope="shared")
    acc = Buffer("acc", (1,), scope="local")
    b, t, k = Var("b"), Var("t"), Var("k")
    g = b * 32 + t
    inner = SeqStmt((
        BufferStore(acc, wb.const(0.0), (IntImm(0),)),
        For(k, 4, "serial", SeqStmt((
            BufferStore(S, A[b * 32 + (t + k) % 32], (t,)),
            barrier(),
            BufferStore(acc, acc[0] + S[(t + 1) % 32], (IntImm(0),)),
            barrier(),
        ))),
        BufferStore(B, acc[0], (g,)),
    ))
    body = _bound(b, 2, "blockIdx.x", _bound(t, 32, "threadIdx.x", inner))
    emulated = emulate_device_function(_device("acc", (A, B), body, shared=(S,), local=(acc,)))
    assert _block_allocs(emulated)["acc"].shape == (32, 1)
    assert len(thread_regions(emulated)) == 4
    a = RNG.random(64, dtype="float32")
    out = np.zeros(64, "float32")
    _run(emulated, a, out)
    expect = np.zeros(64, "float32")
    for blk in range(2):
        tile = a[blk * 32:(blk + 1) * 32]
        for t_ in range(32):
            expect[blk * 32 + t_] = sum(tile[(t_ + 1 + k_) % 32] for k_ in range(4))
    np.testing.assert_allclose(out, expect, rtol=1e-5)


# -- divergent barriers ------------------------------------------------------------------


@pytest.mark.parametrize("kind,needle", [
    ("if", "barrier inside `if (threadIdx.x < 16)`"),
    ("loop", "barrier inside loop `k` whose extent `threadIdx.x + 1`"),
    ("block", "barrier inside block `half` whose predicate `threadIdx.x < 16`"),
])
def test_emulate_fail_divergent_barrier(kind, needle):
    def wrap(inner, b, t):
        if kind == "if":
            return IfThenElse(t < 16, inner)
        if kind == "loop":
            return For(Var("k"), t + 1, "serial", inner)
        return Block("half", (), (), inner, predicate=t < 16)

    with pytest.raises(DivergentBarrierError) as err:
        emulate_device_function(_rotate_device(wrap=wrap))
    message = str(err.value)
    assert needle in message
    assert "kernel `rotate_kernel`" in message
    assert "__syncthreads()" in message
    assert isinstance(err.value, wb.codegen.CodegenError)


def test_emulate_fail_barrier_under_local_value():
    """A condition reading a per-thread buffer differs between threads too."""
    L = Buffer("L", (1,), scope="local")

    def wrap(inner, b, t):
        return SeqStmt((BufferStore(L, wb.const(1.0), (IntImm(0),)), IfThenElse(L[0] > 0.0, inner)))

    device = _rotate_device(wrap=wrap)
    k = device.kernels[0]
    device = DeviceFunction(device.name, device.func, (), (GpuKernel(
        k.name, k.func_name, k.body, k.params, (), k.shared, (L,), k.launch),))
    with pytest.raises(DivergentBarrierError, match=r"if \(L\[0\] > T.float32\(0\)\)"):
        emulate_device_function(device)


# -- launch shapes -----------------------------------------------------------------------


def test_emulate_symbolic_grid():
    n, m = Var("n"), Var("m")
    A = wb.placeholder((n, m), "float32", name="A")
    B = wb.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    sch = wb.Schedule(wb.create_prim_func([A, B], name="scale2d"))
    i, j = sch.get_loops("B")
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1)
    for loop, tag in ((i0, "blockIdx.y"), (j0, "blockIdx.x"), (i1, "threadIdx.y"),
                      (j1, "threadIdx.x")):
        sch.bind(loop, tag)
    emulated = emulate_device_function(_emulated_device(sch))
    loop = emulated.body.body
    assert isinstance(loop, For) and not isinstance(loop.extent, int)
    a = RNG.random((37, 21), dtype="float32")
    out = np.zeros_like(a)
    _run(emulated, a, out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)


def test_emulate_kernels_with_global_intermediate():
    A = wb.placeholder((64, 48), "float32", name="A")
    Y = wb.compute((64, 48), lambda i, j: A[i, j] * 2.0, name="Y")
    C = wb.compute((48, 64), lambda i, j: Y[j, i] + 1.0, name="C")  # reads across blocks
    sch = wb.Schedule(wb.create_prim_func([A, C], name="chain"))
    i, j = sch.get_loops("Y")
    fused = sch.fuse(i, j)
    bx, tx = sch.split(fused, [None, 128])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    i, j = sch.get_loops("C")
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i, j0, j1)
    sch.bind(i, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(j1, "threadIdx.x")
    device = _emulated_device(sch)
    assert [b.name for b in device.intermediates] == ["Y"]
    emulated = emulate_device_function(device)
    assert [b.name for b in emulated.body.alloc_buffers] == ["Y"]
    loops = [s for s in emulated.body.body.stmts]
    assert [type(s).__name__ for s in loops] == ["For", "For"]
    assert [s.kind for s in loops] == ["parallel", "parallel"]
    a = RNG.random((64, 48), dtype="float32")
    out = np.zeros((48, 64), "float32")
    _run(emulated, a, out)
    np.testing.assert_allclose(out, a.T * 2 + 1, rtol=1e-6)


def test_emulate_narrow_thread_loop_is_guarded():
    """A loop bound to threadIdx.x narrower than the launch runs on the first threads."""
    A, B = Buffer("A", (32,)), Buffer("B", (32,))
    t, u = Var("t"), Var("u")
    body = _bound(t, 32, "threadIdx.x", SeqStmt((
        BufferStore(B, A[t], (t,)),
        _bound(u, 16, "threadIdx.x", BufferStore(B, A[u] * 3.0, (u,))),
    )))
    emulated = emulate_device_function(_device("narrow", (A, B), body, grid=(1, 1, 1)))
    assert any(isinstance(s, IfThenElse) for s in iter_stmts(emulated.body))
    a = RNG.random(32, dtype="float32")
    out = np.zeros(32, "float32")
    _run(emulated, a, out)
    np.testing.assert_allclose(out, np.concatenate([a[:16] * 3, a[16:]]), rtol=1e-6)


def test_emulate_vthread_runs_serially():
    A, B = Buffer("A", (64,)), Buffer("B", (64,))
    t, v = Var("t"), Var("v")
    body = _bound(t, 32, "threadIdx.x", For(v, 2, "thread_binding", BufferStore(
        B, A[v * 32 + t] + 1.0, (v * 32 + t,)), "vthread.x"))
    emulated = emulate_device_function(_device("vt", (A, B), body, grid=(1, 1, 1)))
    loops = [s for s in iter_stmts(emulated.body) if isinstance(s, For)]
    assert all(s.kind != "thread_binding" for s in loops)
    assert any(s.loop_var is v and s.kind == "serial" for s in loops)
    a = RNG.random(64, dtype="float32")
    out = np.zeros(64, "float32")
    _run(emulated, a, out)
    np.testing.assert_allclose(out, a + 1, rtol=1e-6)


# -- instrumentation ---------------------------------------------------------------------


def _const_value(e) -> int:
    zeros = {x: IntImm(0, x.dtype) for x in iter_exprs(e) if isinstance(x, Var)}
    v = simplify(substitute(e, zeros))
    assert isinstance(v, IntImm), v
    return v.value


def test_emulate_instrument_calls_and_tables():
    sch = gpu_matmul_schedule(128)
    emulated = emulate_device_function(_emulated_device(sch), instrument="races")
    tables = instrument_tables(emulated)
    assert tables is not None
    assert [k.name for k in tables.kernels] == ["matmul_kernel"]
    assert tables.kernels[0].shared_bytes == 64 * 33 * 4 + 8 * 64 * 4  # A_shared padded
    scope = {b.name: b.scope for b in tables.buffers}
    # no local buffer: only shared and global memory is recorded
    assert scope == {"A": "global", "B": "global", "C": "global", "A_shared": "shared",
                     "B_shared": "shared"}

    (begin,) = _calls(emulated, "wb_gpu_kernel_begin")
    assert [a.value for a in begin.args] == [0, 2, 2, 1, 16, 16, 1]
    assert len(_calls(emulated, "wb_gpu_kernel_end")) == 1
    # blocks run serially: the runtime's state is global
    assert emulated.body.body.stmts[1].kind == "serial"
    text = emulated.script()
    # the block starts an interval, each barrier ends one and starts the next (2 in
    # the k loop), the block's end ends the last
    assert text.count('"wb_gpu_region_begin"') == 3
    assert text.count('"wb_gpu_region_end"') == 3
    assert len(_calls(emulated, "wb_gpu_block_begin")) == 1

    # each store to A_shared is preceded by the load of A and the store to A_shared
    block = next(s for s in iter_stmts(emulated.body)
                 if isinstance(s, Block) and s.name == "A_shared")
    body = block.body.stmts
    calls = [s.value for s in body if isinstance(s, Evaluate)]
    assert isinstance(body[-1], BufferStore) and body[-1].buffer.name == "A_shared"
    assert [(tables.buffers[c.args[0].value].name, c.args[1].value, c.args[2].value)
            for c in calls] == [("A", 0, 0), ("A_shared", 1, 1)]
    sid = calls[0].args[7].value
    assert calls[1].args[7].value == sid
    assert tables.stmts[sid].block == "A_shared"
    assert tables.stmts[sid].text == "A_shared[v0 - i_0 * 64, v1 - k_0 * 8] = A[v0, v1]"
    # the flat index counts storage_align's padding: row stride 33 in A_shared
    assert calls[1].args[3].script() == (
        'T.Cast("int64", v0 - by * 64) * T.int64(33) + T.Cast("int64", v1 - k_0 * 8)')
    for c in calls:  # byte offset = flat index * 4, 4 bytes, linear thread id
        assert _const_value(simplify(c.args[4] - c.args[3] * 4)) == 0
        assert c.args[5].value == 4
        assert c.args[6].script() == "tx + ty * 16"
    # every access of a shared or global buffer is recorded
    stores = [s for s in iter_stmts(emulated.body) if isinstance(s, BufferStore)
              and s.buffer.scope != "local"]
    loads = [e for s in iter_stmts(emulated.body) for x in stmt_exprs(s)
             for e in iter_exprs(x) if getattr(e, "buffer", None) is not None
             and e.buffer.scope != "local" and not isinstance(s, (Evaluate, Block))]
    accesses = _calls(emulated, "wb_gpu_access")
    assert len(accesses) == len(loads)  # stmt_exprs lists a store's target as a load
    assert len(stores) == sum(c.args[2].value for c in accesses)
    # the C unit carries the runtime's definitions (registered C functions)
    source = generate_c(emulated)
    assert re.search(r"int32_t wb_gpu_access\([^)]*\)\s*\{", source)  # a definition
    assert "wb_gpu_access(1, 1, 1, " in source


def test_emulate_instrument_shares_ids_between_functions():
    builder = TableBuilder()
    first = emulate_device_function(_rotate_device(), instrument="races", tables=builder)
    second = emulate_device_function(_local_device(), instrument="races", tables=builder)
    (b1,) = _calls(first, "wb_gpu_kernel_begin")
    (b2,) = _calls(second, "wb_gpu_kernel_begin")
    assert (b1.args[0].value, b2.args[0].value) == (0, 1)
    assert [k.name for k in instrument_tables(second).kernels] == ["rotate_kernel",
                                                                   "locals_kernel"]


@pytest.mark.parametrize("with_barrier", [True, False])
def test_emulate_race_check_runs(with_barrier):
    """Built with the runtime: the schedule missing its barrier is reported, the
    correct one is not."""
    emulated = emulate_device_function(_rotate_device(with_barrier), instrument="races")
    kernel = wb.build(emulated, target="c")
    set_mode(kernel._lib, "race")
    a = RNG.random(64, dtype="float32")
    out = np.zeros(64, "float32")
    kernel(a, out)
    report = read_race_report(kernel._lib, instrument_tables(emulated))
    if with_barrier:
        assert report is None
        np.testing.assert_array_equal(out, _rotated(a))
        return
    assert isinstance(report, RaceError)
    assert report.buffer == "S" and report.kernel == "rotate_kernel"
    # thread 0 reads S[1] (emulated first), then thread 1 writes it
    assert report.kind == "write-after-read"
    assert report.first.thread == (0, 0, 0) and report.second.thread == (1, 0, 0)
    assert report.first.stmt == "B[b * 32 + t] = S[(t + 1) % 32]"
    assert report.second.stmt == "S[t] = A[b * 32 + t]"


def test_emulate_instrument_guarded_loads():
    """A load in a branch of ``T.if_then_else`` is recorded only where it is evaluated."""
    A, B = Buffer("A", (32,)), Buffer("B", (32,))
    t = Var("t")
    body = _bound(t, 32, "threadIdx.x", BufferStore(
        B, if_then_else(t >= 1, A[t - 1], 0.0), (t,)))
    device = _device("shift", (A, B), body, grid=(1, 1, 1))
    emulated = emulate_device_function(device, instrument="profile")
    guarded = [s for s in iter_stmts(emulated.body) if isinstance(s, IfThenElse)]
    assert len(guarded) == 1
    assert guarded[0].condition.script() == "tx >= 1"
    call = guarded[0].then_case.value
    assert call.name == "wb_gpu_access" and call.args[2].value == 0
    assert instrument_tables(emulated).buffers[call.args[0].value].name == "A"
    # the plain emulation calls nothing
    assert _calls(emulate_device_function(device)) == []


def test_emulate_instrument_rejects_unknown_mode():
    with pytest.raises(ValueError, match="instrument"):
        emulate_device_function(_rotate_device(), instrument="race")
