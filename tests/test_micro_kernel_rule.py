"""The micro-kernel design space: which blocks and CPUs it applies to, the intrinsic it
picks per ISA, the choices it samples, and (where this CPU runs the intrinsic) that its
schedules verify and replay. No timing."""

from __future__ import annotations

import subprocess
import sys

import pytest

import workbench as wb
from workbench.schedule import Trace
from workbench.search import micro_kernel_rule as mk
from workbench.tensor_intrin import cpu

AVX2 = frozenset({"avx", "avx2", "fma", "sse2"})
AVX512 = AVX2 | {"avx512f", "avx512bw"}
HOST = mk.micro_kernel_for()
needs_host_kernel = pytest.mark.skipif(
    HOST is None, reason="this CPU runs no FMA micro-kernel (it needs avx2 + fma or avx512f)")


def sampled(func, flags, seed=0, **kw):
    sch = wb.Schedule(func, seed=seed)
    mk.micro_kernel_space(func, flags, **kw)(sch)
    return sch


def tensorized_with(sch) -> list[str]:
    return [str(i.arg("tensor_intrin")) for i in sch.trace if i.kind == "Tensorize"]


def decisions(sch) -> dict[str, list]:
    out: dict[str, list] = {}
    for inst in sch.trace:
        if inst.decision is not None:
            out.setdefault(inst.kind, []).append(inst.decision)
    return out


@pytest.mark.parametrize("flags, want", [(AVX2, "x86_fma_f32_6x16x256_avx2"),
                                         (AVX512, "x86_fma_f32_8x32x256_avx512")])
def test_rule_picks_the_isa_kernel_with_the_k_block(flags, want):
    func = wb.workloads.matmul(96, 64, 256)
    sch = sampled(func, flags, seed=1)
    kc = sch.get(next(o for i in sch.trace if i.kind == "SampleCategorical" for o in i.outputs))
    names = tensorized_with(sch)
    assert len(names) == 1
    assert names[0] == want.replace("x256_", f"x{kc}_")


def test_rule_samples_k_block_column_chunks_and_row_blocks():
    func = wb.workloads.matmul(120, 128, 512)
    seen = {}
    for seed in range(8):
        got = decisions(sampled(func, AVX2, seed=seed, num_cores=2))
        assert len(got["SampleCategorical"]) == 1
        assert len(got["SamplePerfectTile"]) == 2
        cols, rows = got["SamplePerfectTile"]
        assert cols[0] * cols[1] == 128 // 16
        assert cols[1] <= 4  # at least one column chunk per core
        assert rows[0] * rows[1] == 120 // 6
        seen[got["SampleCategorical"][0]] = True
    assert len(seen) > 1  # the K block varies from seed to seed


def test_k_block_candidates():
    assert mk.kc_candidates(1024) == [256, 512, 1024]
    assert mk.kc_candidates(512) == [128, 256, 512]
    assert mk.kc_candidates(96) == [96]
    assert mk.kc_candidates(1031) == [1031]  # prime: the whole reduction


def test_pads_rows_and_columns_that_do_not_divide():
    sch = sampled(wb.workloads.matmul(100, 40, 130), AVX2, min_extent=1)
    kinds = [i.kind for i in sch.trace]
    assert "PadEinsum" in kinds
    assert tensorized_with(sch) == ["x86_fma_f32_6x16x130_avx2"]


@pytest.mark.parametrize("func", [wb.workloads.softmax(4, 8),
                                  wb.workloads.batch_matmul(2, 32, 32, 32),
                                  wb.workloads.mm_relu(32, 32, 32),
                                  wb.workloads.elementwise_chain(64)],
                         ids=["softmax", "batch_matmul", "mm_relu", "elementwise"])
def test_declines_what_is_not_a_single_matmul(func):
    assert mk.micro_kernel_space(func, AVX2) is None
    sch = wb.Schedule(func)
    before = sch.mod.script()
    name = [b.name for b in wb.ir.analysis.iter_blocks(func.body)][-1]
    assert mk.micro_kernel_rule(sch, name, AVX2) is False
    assert sch.mod.script() == before and len(sch.trace) <= 1


def test_declines_small_extents():
    assert mk.micro_kernel_space(wb.workloads.matmul(32, 512, 512), AVX2) is None
    assert mk.micro_kernel_space(wb.workloads.matmul(512, 512, 32), AVX2) is None
    assert mk.micro_kernel_space(wb.workloads.matmul(32, 512, 512), AVX2, min_extent=32)


def test_flags_of_isa_picks_the_same_kernel():
    from workbench.runtime.peak import vector_isa

    for flags in (AVX2, AVX512, frozenset({"avx2"}), frozenset({"sse2"})):
        assert mk.micro_kernel_for(mk.flags_of_isa(vector_isa(flags))) == mk.micro_kernel_for(flags)


def test_declines_without_fma_kernel_flags():
    func = wb.workloads.matmul(64, 64, 64)
    assert mk.micro_kernel_space(func, {"sse2", "avx"}) is None
    sch = wb.Schedule(func)
    assert mk.micro_kernel_rule(sch, "C", {"sse2"}) is False
    assert len(sch.trace) == 0


def test_declines_float64_matmul():
    from workbench import te

    a = te.placeholder((32, 32), "float64", name="A")
    b = te.placeholder((32, 32), "float64", name="B")
    k = te.reduce_axis(32, name="k")
    c = te.compute((32, 32), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    assert mk.micro_kernel_space(te.create_prim_func([a, b, c]), AVX2) is None


@needs_host_kernel
@pytest.mark.parametrize("shape", [(96, 64, 256), (100, 40, 130), (36, 48, 2048)])
def test_schedules_verify(shape):
    func = wb.workloads.matmul(*shape)
    for seed in (0, 3):
        sch = sampled(func, None, seed=seed, num_cores=2, min_extent=1)
        assert wb.verify(sch.mod, func).ok


@needs_host_kernel
def test_trace_replays_and_a_mutated_tile_replays():
    func = wb.workloads.matmul(96, 64, 256)
    sch = sampled(func, None, seed=2, num_cores=2)
    trace = Trace.from_json(sch.trace.as_json())
    again = wb.Schedule(func)
    trace.apply_to_schedule(again)
    assert again.mod.script() == sch.mod.script()
    rows_step = [n for n, i in enumerate(trace) if i.kind == "SamplePerfectTile"][-1]
    rows = tuple(trace[rows_step].decision)
    other = (rows[1], rows[0]) if rows[0] != rows[1] else rows
    mutated = wb.Schedule(func)
    trace.with_decision(rows_step, list(other)).apply_to_schedule(mutated)
    assert wb.verify(mutated.mod, func).ok


@needs_host_kernel
def test_trace_replays_in_a_fresh_process_after_ensure_intrinsics():
    func = wb.workloads.matmul(48, 32, 512)
    sch = sampled(func, None, seed=0, min_extent=1)
    kc = sch.get(next(o for i in sch.trace if i.kind == "SampleCategorical" for o in i.outputs))
    code = (
        "import sys, workbench as wb\n"
        "from workbench.schedule import Trace\n"
        "from workbench.search.micro_kernel_rule import ensure_intrinsics\n"
        "t = Trace.from_json(sys.stdin.read())\n"
        "print(ensure_intrinsics(t))\n"
        "s = wb.Schedule(wb.workloads.matmul(48, 32, 512))\n"
        "t.apply_to_schedule(s)\n"
        "print(wb.verify(s.mod, wb.workloads.matmul(48, 32, 512)).ok)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], input=sch.trace.as_json(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows, cols, isa = HOST
    assert done.stdout.split("\n")[:2] == [f"['x86_fma_f32_{rows}x{cols}x{kc}_{isa}']", "True"]


def test_the_intrinsic_follows_the_flags_not_the_host():
    assert mk.micro_kernel_for(AVX2) == (6, 16, "avx2")
    assert mk.micro_kernel_for(AVX512) == (8, 32, "avx512")
    assert mk.micro_kernel_for({"avx2"}) is None  # AVX2 without FMA
    rows, cols, _ = mk.micro_kernel_for(AVX512)
    kernel = cpu.MICRO_KERNELS[cpu.best_fma_intrin(AVX512)]
    assert kernel.tile[:2] == (rows, cols)
