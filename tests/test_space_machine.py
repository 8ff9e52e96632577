"""The default CPU space adapts to the machine: its vector ISA (lanes, registers) and
caches, read from the CPU flags and sysfs, decide the vector width, the register tile
and the packed-panel size (workbench.search.space.cpu_space_settings). Every machine
description here is given, so the AVX-512 and the AVX2 choices are checked on any
machine; nothing is timed."""

from __future__ import annotations

import math

import pytest

import workbench as wb
from workbench.runtime import peak
from workbench.runtime.peak import CpuCaches, VectorIsa, cpu_caches, vector_isa
from workbench.search import rules
from workbench.search.space import CpuSpaceSettings, cpu_space_settings, default_space
from workbench.testing import assert_verifies, roundtrip_trace

AVX512_FLAGS = {"sse", "sse2", "avx", "avx2", "fma", "avx512f", "avx512bw"}
AVX2_FLAGS = {"sse", "sse2", "avx", "avx2", "fma"}
XEON = CpuCaches(l1d=32 << 10, l2=1 << 20, l3=None)  # an AVX-512 server core
EPYC = CpuCaches(l1d=32 << 10, l2=512 << 10, l3=32 << 20)  # an AVX2 server core
AVX512 = cpu_space_settings(AVX512_FLAGS, XEON)
AVX2 = cpu_space_settings(AVX2_FLAGS, EPYC)


def sample(func, seed: int, settings: CpuSpaceSettings, **options) -> wb.Schedule:
    sch = wb.Schedule(func, seed=seed)
    options.setdefault("micro_kernel", False)  # the tiling rules; the kernel space: own file
    default_space(func, num_cores=2, settings=settings, **options)(sch)
    return sch


def tiles(sch: wb.Schedule) -> list[list[int]]:
    return [list(inst.decision) for inst in sch.trace if inst.kind == "SamplePerfectTile"]


# ---------------------------------------------------------------------------
# reading the machine


@pytest.mark.parametrize(
    "flags, expected",
    [
        (AVX512_FLAGS, VectorIsa("avx512f", 16, 32, True)),
        (AVX2_FLAGS, VectorIsa("avx2", 8, 16, True)),
        ({"avx", "sse2"}, VectorIsa("avx", 8, 16, False)),
        ({"sse", "sse2", "sse4_2"}, VectorIsa("sse", 4, 16, False)),
        (set(), VectorIsa("sse", 4, 16, False)),
    ],
)
def test_vector_isa_from_flags(flags, expected):
    assert vector_isa(flags) == expected


def test_vector_isa_of_this_machine_matches_its_flags():
    from workbench.codegen.extern import cpu_flags

    assert vector_isa() == vector_isa(cpu_flags())


def _cache(folder, index, level, kind, size):
    d = folder / f"index{index}"
    d.mkdir()
    (d / "level").write_text(f"{level}\n")
    (d / "type").write_text(f"{kind}\n")
    (d / "size").write_text(f"{size}\n")


def test_cpu_caches_from_sysfs(tmp_path):
    _cache(tmp_path, 0, 1, "Data", "48K")
    _cache(tmp_path, 1, 1, "Instruction", "32K")
    _cache(tmp_path, 2, 2, "Unified", "2048K")
    _cache(tmp_path, 3, 3, "Unified", "105M")
    assert cpu_caches(tmp_path) == CpuCaches(l1d=48 << 10, l2=2 << 20, l3=105 << 20)


def test_cpu_caches_unknown_sizes_are_none(tmp_path):
    _cache(tmp_path, 0, 1, "Instruction", "32K")  # no data cache listed
    _cache(tmp_path, 1, 2, "Unified", "garbage")
    assert cpu_caches(tmp_path) == CpuCaches(None, None, None)
    assert cpu_caches(tmp_path / "missing") == CpuCaches(None, None, None)


# ---------------------------------------------------------------------------
# the settings derived from a description


def test_settings_avx512_and_avx2():
    assert (AVX512.vector_width, AVX512.registers, AVX512.accumulators, AVX512.panel) == (
        16, 32, (16, 29), (1 << 20, 32))
    assert (AVX2.vector_width, AVX2.registers, AVX2.accumulators, AVX2.panel) == (
        8, 16, (8, 13), (512 << 10, 32))
    sse = cpu_space_settings(set(), CpuCaches(None, None, None))
    assert (sse.vector_width, sse.registers, sse.panel[0]) == (4, 16, 1 << 20)


def test_settings_accept_an_isa_and_default_to_this_machine():
    isa = VectorIsa("avx2", 8, 16, True)
    assert cpu_space_settings(isa, EPYC) == AVX2
    here = cpu_space_settings()
    assert here.isa == vector_isa() and here.caches == cpu_caches()
    assert here.panel[0] == (cpu_caches().l2 or 1 << 20)


def _register_tile(ti, tj, lanes):
    """(rows, column vectors) of a matmul register tile."""
    return ti[-1], tj[-1] // lanes


@pytest.mark.parametrize("settings", [AVX512, AVX2], ids=["avx512", "avx2"])
@pytest.mark.parametrize("n", [512, 1024])
def test_register_tile_and_panel_fit_the_machine(settings, n):
    """Every sampled matmul register tile is a whole number of vectors, has at least
    half the register file as accumulators and fits the file with its loaded vectors
    and a broadcast; every packed B panel (K x j-tile below the packing point) fits
    the L2 of the description."""
    func = wb.workloads.matmul(n, n, n)
    lanes, regs = settings.vector_width, settings.registers
    seen = set()
    for seed in range(10):
        ti, tj, _ = tiles(sample(func, seed, settings))
        assert tj[-1] % lanes == 0, (seed, tj)
        rows, cols = _register_tile(ti, tj, lanes)
        assert rows * cols >= regs // 2, (seed, ti, tj)
        assert rows * cols + cols + 1 <= regs, (seed, ti, tj)
        assert rows >= cols, (seed, ti, tj)  # each loaded vector serves several rows
        assert n * tj[1] * tj[2] * tj[3] * 4 <= settings.panel[0], (seed, tj)
        seen.add((rows, cols))
    assert len(seen) >= 2  # still a search space, not one fitted tile


def test_avx2_and_avx512_choose_different_register_tiles():
    """The same function and seeds: AVX2 draws tiles of 8-float vectors that fit 16
    registers (8x1, 4x2 vectors at 512^3), AVX-512 tiles of 16-float vectors that fit
    32 (16x1, 8x2, 4x4); neither draws the other's."""
    func = wb.workloads.matmul(512, 512, 512)
    avx2 = {tuple(t[-1] for t in tiles(sample(func, s, AVX2))[:2]) for s in range(12)}
    avx512 = {tuple(t[-1] for t in tiles(sample(func, s, AVX512))[:2]) for s in range(12)}
    assert avx2 == {(8, 8), (4, 16)}
    assert avx512 == {(16, 16), (8, 32), (4, 64)}


def test_without_register_budget_avx2_tiles_spill():
    """The register check is what keeps AVX2 tiles in 16 registers: with only the
    accumulator range (registers=None) some draws need more than 16."""
    func = wb.workloads.matmul(512, 512, 512)
    needs = []
    for seed in range(12):
        ti, tj, _ = tiles(sample(func, seed, AVX2, registers=None, accumulators=(8, 16)))
        rows, cols = _register_tile(ti, tj, 8)
        needs.append(rows * cols + cols + 1)
    assert max(needs) > 16


def test_explicit_options_override_the_settings():
    func = wb.workloads.matmul(256, 256, 256)
    inner = {tiles(sample(func, s, AVX512, vector_width=4, registers=None,
                          accumulators=(1, 64)))[1][-1] for s in range(12)}
    assert any(t % 16 for t in inner)  # 4-float vectors: not bound to AVX-512's 16
    panel = tiles(sample(func, 0, AVX512, panel=None, cache_read="global"))
    assert panel  # the panel bias may be turned off while the rest stays derived


def test_default_settings_are_this_machines():
    func = wb.workloads.matmul(128, 128, 128)
    for seed in range(3):
        implicit = wb.Schedule(func, seed=seed)
        default_space(func, num_cores=2, micro_kernel=False)(implicit)
        explicit = sample(func, seed, cpu_space_settings())
        assert implicit.trace.as_json() == explicit.trace.as_json()


def test_register_budget_is_validated():
    func = wb.workloads.matmul(16, 16, 16)
    with pytest.raises(ValueError, match="registers must be None or an integer >= 3, got 2"):
        default_space(func, registers=2)
    sch = wb.Schedule(func)
    with pytest.raises(ValueError, match="registers must be None or an integer >= 3"):
        rules.multi_level_tiling(sch, sch.get_block("C"), registers=True)


# ---------------------------------------------------------------------------
# the space stays valid for every workload on both machines

SMALL = {
    "conv2d_nchw": lambda: wb.workloads.conv2d_nchw(1, 8, 8, 8, 8, 3),
    "depthwise_conv2d": lambda: wb.workloads.depthwise_conv2d(1, 8, 8, 8, 3),
    "gemv": lambda: wb.workloads.gemv(64, 48),
    "layer_norm": lambda: wb.workloads.layer_norm(4, 64),
    "elementwise_chain": lambda: wb.workloads.elementwise_chain(64, 8),
}


@pytest.mark.parametrize("settings", [AVX512, AVX2], ids=["avx512", "avx2"])
@pytest.mark.parametrize("name", wb.workloads.names())
def test_every_workload_verifies_and_replays(settings, name):
    func = SMALL[name]() if name in SMALL else wb.workloads.get(name)
    for seed in (0, 1):
        sch = sample(func, seed, settings)
        assert_verifies(sch, func)
        roundtrip_trace(sch, func)


def test_tune_with_the_derived_space_finds_a_verified_matmul():
    """``wb.tune``'s default space on this machine: every trial replays and the best
    one computes the matmul (measured by a stand-in that times nothing)."""
    from workbench.runtime.isolation import RunResult
    from workbench.runtime.timing import Measurement

    func = wb.workloads.matmul(64, 64, 64)
    calls = []

    def measurer(kernel):
        calls.append(kernel)
        # a made-up latency from the source, so the ranking is deterministic
        latency = 1e-3 * (1 + int(kernel.source_hash[:4], 16) / 65536)
        return RunResult("ok", Measurement(samples=(latency,), number=1, repeat=1))

    result = wb.tune(func, trials=6, seed=0, progress=False, measurer=measurer)
    assert len(calls) >= 1 and result.best is not None
    assert_verifies(result.best.schedule, func)
    for trial in result.trials:
        replayed = wb.Schedule(func)
        trial.trace.apply_to_schedule(replayed)
        assert math.isfinite(trial.latency)
    from workbench.search.micro_kernel_rule import micro_kernel_space

    kinds = [inst.kind for inst in result.best.trace.insts]
    if micro_kernel_space(func) is not None:  # this CPU has an FMA micro-kernel
        assert "Tensorize" in kinds and "PadEinsum" in kinds
    else:
        here = cpu_space_settings()
        ti, tj, _ = tiles(result.best.schedule)
        assert tj[-1] % here.vector_width == 0


def test_bench_names_the_machine():
    """bench/matmul_cpu.py's header names the CPU model, the ISA and the derived space."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "matmul_cpu.py"
    spec = importlib.util.spec_from_file_location("matmul_cpu_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    lines = bench.machine_lines(2)
    isa = vector_isa()
    assert peak.cpu_model() in lines[0] and f"ISA {isa.name}" in lines[0]
    assert f"vector width {isa.lanes}" in lines[1]


def test_register_tile_and_write_back_are_left_to_the_compiler():
    """Whatever unroll budget the nest samples, the register tile's rows and the
    write-back carry a budget of 0 (no ``#pragma GCC unroll``), which is what keeps gcc's
    accumulators in registers; ``tile_unroll=None`` gives the old, unrolled code."""
    func = wb.workloads.matmul(256, 256, 256)
    for settings in (AVX2, AVX512):
        sch = sample(func, 0, settings, unroll_max_steps=(256,))
        lines = [x.strip() for x in wb.build(sch.mod).source.splitlines()]
        tile = next(i for i, x in enumerate(lines) if x.startswith("for (int32_t i_3 = 0"))
        back = next(i for i, x in enumerate(lines) if x.startswith("for (int32_t ax0 = 0"))
        for at in (tile, back):
            assert lines[at - 1] == "// annotation pragma_auto_unroll_max_step = 0"
    sch = wb.Schedule(func, seed=0)
    rules.multi_level_tiling(sch, sch.get_block("C"), vector_width=8, tile_unroll=None)
    rules.parallel_vectorize_unroll(sch, sch.get_block("root"), unroll_max_steps=(256,))
    assert "#pragma GCC unroll" in wb.build(sch.mod).source


def test_packed_panel_on_the_stack_is_read_through_a_restrict_pointer():
    """A packed B panel small enough for the stack (512 x 32 floats) is declared as
    storage plus a ``__restrict__`` pointer: with the bare array gcc keeps the register
    tile's accumulators in memory (it assumes the two stack arrays may alias)."""
    func = wb.workloads.matmul(512, 512, 512)
    sch = sample(func, 0, AVX2)
    steps = [i for i, inst in enumerate(sch.trace) if inst.kind == "SamplePerfectTile"]
    trace = sch.trace
    for step, decision in zip(steps, [(8, 8, 1, 8), (16, 4, 1, 8), (512, 1)], strict=True):
        trace = trace.with_decision(step, list(decision))
    panel = wb.Schedule(func)
    trace.apply_to_schedule(panel)
    src = wb.build(panel.mod).source
    assert "float B_global_storage[16384] __attribute__((aligned(64)));  // global" in src
    assert "float* __restrict__ B_global = B_global_storage;" in src
    assert "float C_local[64] __attribute__((aligned(64)));  // local" in src  # unchanged
    assert_verifies(panel, func)
