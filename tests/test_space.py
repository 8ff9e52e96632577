"""The built-in CPU search space (workbench.search.space) and its rules
(workbench.search.rules), plus the C backend's ``pragma_auto_unroll_max_step`` hook.

Every sampled schedule must compute what the unscheduled function computes, replay
from its trace (JSON and Python) to the same IR, and respond to a changed decision.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb
from workbench.codegen import generate_c
from workbench.codegen.cstyle import auto_unroll_steps
from workbench.ir import Block, Buffer, BufferStore, For, IterVar, PrimFunc, SeqStmt, Var
from workbench.ir.analysis import iter_blocks
from workbench.runtime.cpu import build
from workbench.runtime.peak import CpuCaches
from workbench.search import rules
from workbench.search.space import cpu_space_settings, default_space
from workbench.testing import assert_verifies, roundtrip_trace

WORKLOADS = {
    "matmul": lambda: wb.workloads.matmul(64, 64, 64),
    "matmul_odd": lambda: wb.workloads.matmul(30, 17, 13),
    "mm_relu": lambda: wb.workloads.mm_relu(64, 48, 32),
    "batch_matmul": lambda: wb.workloads.batch_matmul(2, 32, 32, 32),
    "conv2d_nchw": lambda: wb.workloads.conv2d_nchw(1, 8, 8, 8, 8, 3),
    "linear_bias_relu": lambda: wb.workloads.linear_bias_relu(2, 48, 64),
    "gemv": lambda: wb.workloads.gemv(64, 48),
    "softmax": lambda: wb.workloads.softmax(16, 32),
    "layer_norm": lambda: wb.workloads.layer_norm(4, 64),
    "elementwise_chain": lambda: wb.workloads.elementwise_chain(64, 8),
    "depthwise_conv2d": lambda: wb.workloads.depthwise_conv2d(1, 8, 8, 8, 3),
}
SEEDS = (0, 1, 2)


#: The machine these tests sample for, whatever machine runs them: AVX-512 (16 lanes,
#: 32 vector registers) with a 1 MiB L2 (tests/test_space_machine.py checks AVX2 too).
AVX512 = cpu_space_settings({"avx512f", "avx2", "fma"}, CpuCaches(32 << 10, 1 << 20, None))


def sampled(func, seed: int, **options) -> wb.Schedule:
    sch = wb.Schedule(func, seed=seed)
    options.setdefault("settings", AVX512)
    options.setdefault("micro_kernel", False)  # the tiling rules (the kernel space: own file)
    default_space(func, num_cores=2, **options)(sch)
    return sch


def block_names(sch: wb.Schedule) -> list[str]:
    return [b.name for b in iter_blocks(sch.func.body)][1:]


def decision_steps(sch: wb.Schedule, kind: str) -> list[int]:
    return [i for i, inst in enumerate(sch.trace) if inst.kind == kind]


def replay(func, trace: wb.Trace) -> wb.Schedule:
    fresh = wb.Schedule(func)
    trace.apply_to_schedule(fresh)
    return fresh


# ---------------------------------------------------------------------------
# the space


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_space_every_seed_verifies_and_replays(name):
    func = WORKLOADS[name]()
    texts = set()
    for seed in SEEDS:
        sch = sampled(func, seed)
        assert_verifies(sch, func)
        roundtrip_trace(sch, func)
        texts.add(sch.mod.script())
    assert len(texts) >= 2, f"{name}: every seed gave the same schedule"


def test_space_is_deterministic_per_seed():
    func = wb.workloads.conv2d_nchw(1, 8, 8, 8, 8, 3)
    a, b = sampled(func, 7), sampled(func, 7)
    assert a.trace.as_json() == b.trace.as_json()
    assert a.mod.script() == b.mod.script()


def test_space_matmul_structure():
    func = wb.workloads.matmul(128, 128, 128)
    sch = sampled(func, 0)
    assert block_names(sch) == ["C_init", "C_update", "C_local"]
    kinds = [inst.kind for inst in sch.trace]
    assert kinds.count("SamplePerfectTile") == 3
    assert kinds.count("SampleCategorical") == 1
    tiles = [inst.decision for inst in sch.trace if inst.kind == "SamplePerfectTile"]
    assert [len(t) for t in tiles] == [4, 4, 2]  # SSRSRS: 4 spatial, 2 reduction levels
    assert tiles[1][-1] % 16 == 0  # the contiguous axis j gets a vector-friendly tile
    src = build(sch.mod).source
    assert "#pragma omp parallel for" in src
    assert "#pragma omp simd" in src
    assert "C_local[" in src  # the accumulator tile is a local (stack) array


def test_space_hand_schedule_is_in_the_space():
    """The lead's hand schedule (C_local 8x32 under j_1, k split 8x16) is one point of
    the space: set the decisions and replay. (The sketch, which loops are fused, comes
    from seed 0 with the register-tile bias given explicitly.)"""
    func = wb.workloads.matmul(128, 128, 128)
    sch = sampled(func, 0, accumulators=(4, 24), registers=None, whole_reduction=0.75)
    trace = sch.trace
    wanted = [(8, 2, 1, 8), (4, 1, 1, 32), (8, 16)]
    for step, decision in zip(decision_steps(sch, "SamplePerfectTile"), wanted, strict=True):
        trace = trace.with_decision(step, decision)
    trace = trace.with_decision(decision_steps(sch, "SampleCategorical")[0], 1)  # unroll 16
    hand = replay(func, trace)
    assert_verifies(hand, func)
    loops = [hand.get(lp).loop_var.name for lp in hand.get_loops(hand.get_block("C_local"))]
    assert loops == ["i_0_j_0_i_1_j_1_fused", "ax0", "ax1"]  # written back under j_1
    src = build(hand.mod).source
    assert "float C_local[256]" in src  # one 8 x 32 accumulator tile per iteration
    # the register tile (i_3) is left to the C compiler (budget 0), so that it keeps
    # the accumulators in registers; the nest's budget 16 still applies elsewhere
    lines = [x.strip() for x in src.splitlines()]
    at = lines.index("for (int32_t i_3 = 0; i_3 < 8; ++i_3) {")
    assert lines[at - 1] == "// annotation pragma_auto_unroll_max_step = 0"
    assert "// annotation pragma_auto_unroll_max_step = 16" in lines


def test_space_mm_relu_epilogue_folded_into_write_back():
    func = wb.workloads.mm_relu(64, 64, 64)
    sch = sampled(func, 1)
    assert block_names(sch) == ["Y_init", "Y_update", "Y_local"]
    assert [b.name for b in sch.func.body.alloc_buffers] == ["Y_local"]
    assert "ReverseComputeInline" in {inst.kind for inst in sch.trace}
    assert_verifies(sch, func)


def test_space_linear_bias_relu_inlines_bias_and_folds_relu():
    func = wb.workloads.linear_bias_relu(4, 32, 32)
    sch = sampled(func, 0)
    kinds = [inst.kind for inst in sch.trace]
    assert "ComputeInline" in kinds and "ReverseComputeInline" in kinds
    assert block_names(sch) == ["matmul_init", "matmul_update", "matmul_local"]
    assert_verifies(sch, func)


def test_space_softmax_samples_compute_locations():
    func = wb.workloads.softmax(16, 32)
    seen = set()
    for seed in range(6):
        sch = sampled(func, seed)
        seen.update(
            (inst.args[0][1], inst.decision)
            for inst in sch.trace
            if inst.kind == "SampleComputeLocation"
        )
    assert len(seen) > 3  # several stages, several locations drawn


@pytest.mark.parametrize("name", ["matmul_odd", "mm_relu", "batch_matmul", "conv2d_nchw", "gemv"])
def test_space_cache_read_packs_vector_operands_and_verifies(name):
    func = WORKLOADS[name]()
    for seed in SEEDS:
        sch = sampled(func, seed, cache_read="global")
        assert "CacheRead" in {inst.kind for inst in sch.trace} or name == "gemv"
        assert_verifies(sch, func)
        roundtrip_trace(sch, func)


def test_space_auto_cache_read_only_for_rows_half_a_page_apart():
    def packed(func) -> bool:
        sch = sampled(func, 0)
        return any(b.name.endswith("_global") for b in sch.func.body.alloc_buffers)

    assert packed(wb.workloads.matmul(1024, 1024, 1024))  # B rows 4 KiB apart
    assert packed(wb.workloads.matmul(8, 1024, 8))
    assert packed(wb.workloads.matmul(512, 512, 512))  # 2 KiB
    assert not packed(wb.workloads.matmul(256, 256, 256))  # 1 KiB
    assert not packed(wb.workloads.matmul(128, 128, 128))
    sch = sampled(wb.workloads.matmul(1024, 1024, 1024), 0)
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("B_global"))]
    assert loops[0].kind == "parallel"  # one panel per job
    assert [lp.loop_var.name for lp in loops[-2:]] == ["ax0", "ax1"]


def test_space_packed_copy_is_never_unrolled():
    """The B panel copy at 512^3 is 512 steps of one vector, so a budget of 512 would
    unroll it (20 s of compiling for nothing); it carries its own budget of 0 and
    stays a loop, while the register tile is still unrolled."""
    func = wb.workloads.matmul(512, 512, 512)
    sch = sampled(func, 1, unroll_max_steps=(0, 16, 64, 512))
    budget = decision_steps(sch, "SampleCategorical")[0]
    big = replay(func, sch.trace.with_decision(budget, 3))
    copy = [big.get(lp) for lp in big.get_loops(big.get_block("B_global"))]
    assert [lp.loop_var.name for lp in copy[-2:]] == ["ax0", "ax1"]
    assert copy[-2].annotations == ((rules.AUTO_UNROLL_KEY, 0),)
    lines = [x.strip() for x in build(big.mod).source.splitlines()]
    at = lines.index("for (int32_t ax0 = 0; ax0 < 512; ++ax0) {")
    assert lines[at - 1] == "// annotation pragma_auto_unroll_max_step = 0"
    assert "#pragma GCC unroll 512" not in lines
    assert any(x.startswith("#pragma GCC unroll") for x in lines)  # the register tile


def test_space_refuses_unknown_target_and_structure():
    func = wb.workloads.matmul(16, 16, 16)
    with pytest.raises(ValueError, match="no built-in space for target 'cuda'"):
        default_space(func, target="cuda")
    with pytest.raises(ValueError, match="string of S and R"):
        default_space(func, structure="SXS")
    with pytest.raises(ValueError, match="write_level=3"):
        default_space(func, structure="SSRSRS", write_level=3)


@pytest.mark.parametrize(
    "option, match",
    [
        ({"accumulators": (8, 4)}, r"accumulators must be \(low, high\).*got \(8, 4\)"),
        ({"accumulators": (0, 4)}, r"accumulators .*got \(0, 4\)"),
        ({"panel": (1 << 20, 0)}, r"panel must be \(max_bytes, min_reuse\).*got \(1048576, 0\)"),
        ({"panel": 4096}, r"panel must be .*got 4096"),
        ({"whole_reduction": 1.5}, r"whole_reduction must be a probability in \[0, 1\], got 1.5"),
    ],
)
def test_space_refuses_bad_tile_bias(option, match):
    func = wb.workloads.matmul(16, 16, 16)
    with pytest.raises(ValueError, match=match):
        default_space(func, **option)
    sch = wb.Schedule(func)
    with pytest.raises(ValueError, match=match):
        rules.multi_level_tiling(sch, sch.get_block("C"), **option)
    assert len(sch.trace) == 1  # refused before touching the schedule (only get_block)


def _tiles(sch: wb.Schedule) -> list[list[int]]:
    return [list(inst.decision) for inst in sch.trace if inst.kind == "SamplePerfectTile"]


def test_space_register_tile_fits_the_accumulator_budget():
    """Every sampled matmul 1024^3 schedule has a register tile (innermost i x j) of 4
    to 24 vectors of 16, and a packed B panel (K x j-tile below the packing point) of
    at most 1 MiB reused by at least 32 rows; without the bias, uniform draws miss."""
    func = wb.workloads.matmul(1024, 1024, 1024)
    unbiased_misses = 0
    for seed in range(12):
        ti, tj, _ = _tiles(sampled(func, seed))
        assert 4 <= ti[-1] * tj[-1] // 16 <= 24, (seed, ti, tj)
        assert 1024 * tj[1] * tj[2] * tj[3] * 4 <= 1 << 20, (seed, tj)
        assert ti[1] * ti[2] * ti[3] >= 32, (seed, ti)
        ti, tj, _ = _tiles(sampled(func, seed, accumulators=None, panel=None))
        fits = 4 <= ti[-1] * tj[-1] // 16 <= 24 and ti[1] * ti[2] * ti[3] >= 32
        unbiased_misses += not fits
    assert unbiased_misses >= 3


def test_space_whole_reduction_draws_unit_middle_tiles():
    """SSRSRS's i2 and j2 sit between k0 and k1: with whole_reduction=1 they are always
    1 (the register tile accumulates over all of k), with 0 they are drawn freely."""
    func = wb.workloads.matmul(256, 256, 256)
    always = [_tiles(sampled(func, seed, whole_reduction=1.0)) for seed in range(8)]
    assert all(ti[2] == tj[2] == 1 for ti, tj, _ in always)
    never = [_tiles(sampled(func, seed, whole_reduction=0.0)) for seed in range(8)]
    assert any(ti[2] > 1 or tj[2] > 1 for ti, tj, _ in never)
    sch = sampled(func, 0, whole_reduction=1.0)
    assert_verifies(sch, func)
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("C_update"))]
    assert [lp.extent for lp in loops if lp.loop_var.name in ("i_2", "j_2")] == [1, 1]


def test_space_bias_needs_no_feasible_tiling():
    """When no tiling fits (a 2 x 16 output holds at most 2 vectors of 16, the budget
    asks for 4 to 24) the draw closest to the budget is kept, and the schedule is
    still valid."""
    func = wb.workloads.matmul(2, 16, 16)
    for seed in SEEDS:
        sch = sampled(func, seed)
        ti, tj, _ = _tiles(sch)
        assert (ti[-1], tj[-1]) == (2, 16)  # 2 x 1 vectors: the nearest to (4, 24)
        assert_verifies(sch, func)


def test_draw_tilings_units_vectors_and_rejection():
    import random

    rng = random.Random(0)
    for _ in range(20):
        ti, tj = rules.draw_tilings(
            rng, [96, 64], 4, 32, contiguous=1, vector_width=16, unit_levels=[2]
        )
        assert ti[2] == tj[2] == 1 and np.prod(ti) == 96 and np.prod(tj) == 64
        assert tj[-1] % 16 == 0 and ti[-1] <= 32
    calls = []

    def never_fits(tilings):
        calls.append(tilings)
        return 2.0 + tilings[0][-1]  # fits nowhere; smaller innermost is closer

    (best,) = rules.draw_tilings(random.Random(1), [64], 2, 64, miss=never_fits, max_draws=10)
    assert len(calls) == 10
    assert best[-1] == min(t[0][-1] for t in calls)


def test_space_without_vector_bias_samples_any_innermost_tile():
    func = wb.workloads.matmul(64, 64, 64)
    inner = set()
    for seed in range(12):
        sch = sampled(func, seed, vector_width=1)
        tiles = [inst.decision for inst in sch.trace if inst.kind == "SamplePerfectTile"]
        inner.add(tiles[1][-1])
    assert any(t % 16 for t in inner)


# ---------------------------------------------------------------------------
# decisions: with_decision changes the IR, replays stay valid


def test_with_decision_on_tile_changes_ir():
    func = wb.workloads.matmul(64, 64, 64)
    sch = sampled(func, 0)
    step = decision_steps(sch, "SamplePerfectTile")[0]  # the tiles of i
    old = sch.trace[step].decision
    new = (1, 2, 4, 8) if tuple(old) != (1, 2, 4, 8) else (2, 2, 2, 8)
    mutated = replay(func, sch.trace.with_decision(step, list(new)))
    assert mutated.mod.script() != sch.mod.script()
    loops = [mutated.get(lp) for lp in mutated.get_loops(mutated.get_block("C_update"))]
    inner = {lp.loop_var.name: lp.extent for lp in loops}
    assert (inner["i_2"], inner["i_3"]) == new[2:]
    assert_verifies(mutated, func)


def test_with_decision_on_unroll_changes_budget():
    func = wb.workloads.matmul(64, 64, 64)
    sch = sampled(func, 0)
    step = decision_steps(sch, "SampleCategorical")[0]
    budgets = {}
    for decision in range(4):
        mutated = replay(func, sch.trace.with_decision(step, decision))
        src = build(mutated.mod).source
        budgets[decision] = re.findall(r"annotation pragma_auto_unroll_max_step = (\d+)", src)
        if decision == 0:
            assert "#pragma GCC unroll" not in src
    # the sampled budget on the nest, then 0 on the register tile and the write-back
    # (multi_level_tiling's tile_unroll; the init's copy of the tile keeps it too)
    assert {d: b[0] for d, b in budgets.items()} == {0: "0", 1: "16", 2: "64", 3: "256"}
    assert all(set(b[1:]) == {"0"} and len(b) == 4 for b in budgets.values())


def test_with_decision_on_compute_location_moves_block():
    """A legal location replays to its own verified schedule; a location that is not
    legal (any more) is refused as a TraceError naming the step, which is what the
    search discards."""
    func = wb.workloads.softmax(16, 32)
    sch = sampled(func, 0)
    steps = decision_steps(sch, "SampleComputeLocation")
    assert len(steps) == 3  # sum, exp, max: last stage first
    outcomes = set()
    for decision in (-2, -1, 0, 1):
        try:
            moved = replay(func, sch.trace.with_decision(steps[0], decision))
        except wb.TraceError as err:  # this or a later location stopped being legal
            assert re.search(r"trace step \d+ .*is not a compute location", str(err))
            continue
        assert_verifies(moved, func)
        outcomes.add(moved.mod.script())
    assert len(outcomes) >= 2
    with pytest.raises(wb.TraceError, match=f"trace step {steps[0]} .*decision 7"):
        replay(func, sch.trace.with_decision(steps[0], 7))


# ---------------------------------------------------------------------------
# the rules one by one


def test_multi_level_tiling_skips_blocks_without_reuse():
    sch = wb.Schedule(wb.workloads.softmax(8, 8))
    block = sch.get_block("max")
    before = (sch.mod.script(), len(sch.trace))
    assert rules.multi_level_tiling(sch, block) is False
    assert (sch.mod.script(), len(sch.trace) - 1) == before  # only get_loops was recorded


def test_multi_level_tiling_applies_once():
    func = wb.workloads.matmul(32, 32, 32)
    sch = wb.Schedule(func, seed=0)
    block = sch.get_block("C")
    assert rules.multi_level_tiling(sch, block, cache_write=None, decompose=False)
    text = sch.mod.script()
    assert rules.multi_level_tiling(sch, block) is False
    assert sch.mod.script() == text
    assert ("meta_schedule.tiling_structure", "SSRSRS") in sch.get(block).annotations
    assert_verifies(sch, func)


def test_multi_level_tiling_other_structures():
    func = wb.workloads.matmul(32, 32, 32)
    cases = {  # structure, write level -> loop names above the update block
        ("SRS", 1): ["i_0", "j_0", "k", "i_1", "j_1"],  # one R level: k stays whole
        ("SS", 1): ["i_0", "j_0", "i_1", "j_1", "k"],
        ("SSSRRS", 3): ["i_0", "j_0", "i_1", "j_1", "i_2", "j_2", "k_0", "k_1", "i_3", "j_3"],
    }
    for (structure, write_level), names in cases.items():
        sch = wb.Schedule(func, seed=3)
        block = sch.get_block("C")
        assert rules.multi_level_tiling(sch, block, structure=structure, write_level=write_level)
        assert [sch.get(lp).loop_var.name for lp in sch.get_loops(block)] == names
        write_back = [sch.get(lp).loop_var.name for lp in sch.get_loops(sch.get_block("C_local"))]
        assert write_back[: 2 * write_level] == names[: 2 * write_level]  # under the level
        assert all(n.startswith("ax") for n in write_back[2 * write_level :])
        assert_verifies(sch, func)


def test_multi_level_tiling_bad_structure_message():
    sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    with pytest.raises(ValueError, match=r"write_level=3 must be an integer from 1 to 2"):
        rules.multi_level_tiling(sch, sch.get_block("C"), write_level=3)
    assert len(sch.trace) == 1  # refused before touching the schedule (only get_block)


def test_auto_inline_keeps_padding_and_outputs():
    sch = wb.Schedule(wb.workloads.conv2d_nchw(1, 4, 6, 6, 4, 3))
    assert rules.auto_inline(sch, sch.get_block("pad")) is False  # a Select: kept
    assert rules.auto_inline(sch, sch.get_block("pad"), disallow_if_then_else=False)
    assert block_names(sch) == ["conv"]
    sch = wb.Schedule(wb.workloads.elementwise_chain(16, 4))
    names = block_names(sch)
    results = [rules.auto_inline(sch, sch.get_block(n)) for n in names]
    assert results[:-1] == [True] * (len(names) - 1) and results[-1] is False
    assert block_names(sch) == names[-1:]


def test_random_compute_location_respects_candidates():
    func = wb.workloads.softmax(8, 8)
    sch = wb.Schedule(func, seed=0)
    assert rules.random_compute_location(sch, sch.get_block("norm")) is False  # no reader
    assert rules.random_compute_location(sch, sch.get_block("sum"))
    assert_verifies(sch, func)


def test_parallel_vectorize_unroll_plan():
    func = wb.workloads.elementwise_chain(64, 8)
    sch = wb.Schedule(func, seed=0)
    assert rules.parallel_vectorize_unroll(sch, sch.get_block("root"), num_cores=2)
    kinds = [inst.kind for inst in sch.trace]
    assert kinds.count("Parallel") == kinds.count("Vectorize") == len(block_names(sch))
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block(block_names(sch)[0]))]
    assert [lp.kind for lp in loops] == ["parallel", "vectorized"]
    assert loops[0].extent == 64  # n=64 alone exceeds 2 * 16; taken since 1 < 2 cores
    assert_verifies(sch, func)


def test_parallel_chain_fuses_up_to_the_job_limit():
    func = wb.workloads.transpose(4, 8)
    # j (8) is taken even past 2 x 2 jobs, as 1 < 2 cores; i (4) is kept for SIMD
    for jobs, extent in ((16, 8), (2, 8)):
        sch = wb.Schedule(func, seed=0)
        rules.parallel_vectorize_unroll(
            sch, sch.get_block("root"), num_cores=2, max_jobs_per_core=jobs
        )
        outer = sch.get(sch.get_loops(sch.get_block("B"))[0])
        assert outer.kind == "parallel" and outer.extent == extent
        assert_verifies(sch, func)


# ---------------------------------------------------------------------------
# the C backend honours pragma_auto_unroll_max_step


def _nest(budget: int, inner_kind: str = "serial") -> PrimFunc:
    """for i in 4: for j in 3: for k in 8 (inner_kind): B[i, j, k] = A[i, j, k] * 2,
    the outer loop annotated with the unroll budget."""
    A, B = Buffer("A", (4, 3, 8)), Buffer("B", (4, 3, 8))
    i, j, k = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    blk = Block(
        "B",
        (IterVar(vi, 4), IterVar(vj, 3), IterVar(vk, 8)),
        (i, j, k),
        BufferStore(B, A[vi, vj, vk] * 2.0, (vi, vj, vk)),
    )
    loop = For(
        i, 4, "serial", For(j, 3, "serial", For(k, 8, inner_kind, blk)),
        annotations=((rules.AUTO_UNROLL_KEY, budget),),
    )
    return PrimFunc("nest", (A, B), Block("root", (), (), SeqStmt((loop,))))


def _unrolled(src: str) -> dict[str, str]:
    """Loop variable -> the unroll pragma right before its ``for``."""
    return dict(
        (m.group(2), m.group(1))
        for m in re.finditer(r"#pragma GCC unroll (\d+)\n\s*for \(int32_t (\w+) =", src)
    )


@pytest.mark.parametrize(
    "budget, inner_kind, expected",
    [
        (0, "serial", {}),
        (8, "serial", {"k": "8"}),
        (24, "serial", {"k": "8", "j": "3"}),
        (96, "serial", {"k": "8", "j": "3", "i": "4"}),
        (3, "vectorized", {"j": "3"}),  # a vectorized loop counts its body once
        (12, "vectorized", {"j": "3", "i": "4"}),
        (1000, "parallel", {}),  # a parallel loop inside forbids unrolling around it
    ],
)
def test_codegen_auto_unroll_budget(budget, inner_kind, expected):
    func = _nest(budget, inner_kind)
    src = generate_c(func)
    assert _unrolled(src) == expected
    assert f"// annotation pragma_auto_unroll_max_step = {budget}" in src
    a = np.random.default_rng(0).random((4, 3, 8), dtype=np.float32)
    b = np.zeros_like(a)
    build(func)(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_codegen_auto_unroll_steps_counts():
    func = _nest(0)
    loop = func.body.body.stmts[0]
    assert auto_unroll_steps(loop) == 96
    assert auto_unroll_steps(loop.body) == 24
    assert auto_unroll_steps(_nest(0, "vectorized").body.body.stmts[0]) == 12
    assert auto_unroll_steps(_nest(0, "parallel").body.body.stmts[0]) == 0


def test_codegen_unannotated_loops_are_not_unrolled():
    src = build(wb.Schedule(wb.workloads.matmul(16, 16, 16)).mod).source
    assert "#pragma GCC unroll" not in src


# ---------------------------------------------------------------------------
# the C backend indexes cache tiles in loop variables


def test_codegen_cache_tile_indexed_in_loop_variables():
    """A compacted cache is indexed relative to its tile; printed in the block's iter
    vars that is ``vi * 32 - i_0 * 256 + vj - j_0 * 32``, which the C compiler does not
    cancel (so it cannot keep the accumulator tile in registers). The printer writes
    such an index in the loop variables when that is shorter, and leaves the
    parameters' indices in the iter vars."""
    func = wb.workloads.matmul(64, 64, 64)
    sch = wb.Schedule(func)
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 32])
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(sch.cache_write(blk, 0, "local"), j0)
    sch.decompose_reduction(blk, k)
    sch.cache_read(blk, "B", "global")
    sch.compute_at(sch.get_block("B_global"), j0)
    kernel = build(sch.mod)
    src = kernel.source
    assert "C_local[i_1_init * 32 + j_1_init] = 0.0f;" in src
    assert (
        "C_local[i_1 * 32 + j_1] = C_local[i_1 * 32 + j_1] + A[vi * 64 + vk] * "
        "B_global[k * 32 + j_1];" in src
    )
    assert "C[v0 * 64 + v1] = C_local[ax0 * 32 + ax1];" in src
    assert "B_global[ax0 * 32 + ax1] = B[v0 * 64 + v1];" in src
    assert not re.search(r"\[v\w* \* \d+ - ", src)  # no tile offset left to cancel
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    c = np.zeros((64, 64), "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_codegen_index_kept_when_loop_variables_are_longer():
    """A packed panel indexed by the fused parallel loop: ``vk * 32 + vj - f % 2 * 32``
    is 3 terms, the loop-variable form ``k * 32 + i_1 ...`` would not be shorter for
    a split k, so the iter-var form stays (and still computes the right thing)."""
    func = wb.workloads.matmul(32, 64, 32)
    sch = wb.Schedule(func)
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1, j2 = sch.split(j, [None, 2, 16])
    k0, k1 = sch.split(k, [None, 8])
    sch.reorder(i0, j0, k0, i1, j1, k1, j2)
    sch.cache_read(blk, "B", "global")
    sch.compute_at(sch.get_block("B_global"), j0)
    sch.parallel(sch.fuse(i0, j0))
    src = build(sch.mod).source
    line = next(x for x in src.splitlines() if "B_global[" in x and "C[" in x)
    assert "B_global[vk * 32 + vj - i_0_j_0_fused % 2 * 32]" in line
    assert_verifies(sch, func)
