"""wb.Target: kinds, CUDA architectures and their limits, parsing from strings and
TVM-style dicts, current_device without a GPU, and occupancy figures worked out by hand."""

from __future__ import annotations

import sys
import types

import pytest

from workbench.target import CUDA_ARCHS, GpuUnavailableError, Target


def test_default_arch_and_display():
    t = Target("cuda")
    assert t.arch == "sm_80"
    assert str(t) == "cuda -arch=sm_80"
    assert repr(Target("cuda", arch="sm_90")) == "Target(cuda -arch=sm_90)"
    assert str(Target("c")) == "c"


@pytest.mark.parametrize(
    "arch, threads_per_sm, blocks_per_sm, shared_kib",
    [
        ("sm_70", 2048, 32, 96),
        ("sm_75", 1024, 16, 64),
        ("sm_80", 2048, 32, 164),
        ("sm_86", 1536, 16, 100),
        ("sm_89", 1536, 24, 100),
        ("sm_90", 2048, 32, 228),
    ],
)
def test_arch_limits(arch, threads_per_sm, blocks_per_sm, shared_kib):
    t = Target("cuda", arch=arch)
    assert t.max_threads_per_sm == threads_per_sm
    assert t.max_warps_per_sm == threads_per_sm // 32
    assert t.max_blocks_per_sm == blocks_per_sm
    assert t.max_shared_memory_per_sm == shared_kib * 1024
    assert t.max_threads_per_block == 1024
    assert t.max_shared_memory_per_block == 48 * 1024
    assert (t.warp_size, t.registers_per_sm, t.max_registers_per_thread) == (32, 65536, 255)
    assert (t.shared_memory_banks, t.shared_memory_bank_bytes) == (32, 4)


def test_optin_shared_memory_is_sm_capacity_less_reserved():
    assert Target("cuda", arch="sm_80").max_shared_memory_per_block_optin == 163 * 1024
    assert Target("cuda", arch="sm_86").max_shared_memory_per_block_optin == 99 * 1024
    assert Target("cuda", arch="sm_90").max_shared_memory_per_block_optin == 227 * 1024
    assert Target("cuda", arch="sm_75").max_shared_memory_per_block_optin == 64 * 1024


def test_c_target_has_no_gpu_limits():
    t = Target("c")
    assert t.max_threads_per_block is None and t.warp_size is None and not t.is_gpu
    with pytest.raises(ValueError, match="not a GPU target"):
        t.occupancy(128)


def test_unsupported_arch_lists_the_supported_ones():
    with pytest.raises(ValueError, match="unsupported CUDA arch 'sm_61'") as info:
        Target("cuda", arch="sm_61")
    for arch in CUDA_ARCHS:
        assert arch in str(info.value)


def test_unknown_kind_and_c_with_arch_refused():
    with pytest.raises(ValueError, match="unknown kind 'llvm'"):
        Target("llvm")
    with pytest.raises(ValueError, match="takes no arch"):
        Target("c", arch="sm_80")


def test_from_any():
    t = Target("cuda", arch="sm_90")
    assert Target.from_any(t) is t
    assert Target.from_any("cuda") == Target("cuda", arch="sm_80")
    assert Target.from_any("cuda -arch=sm_86") == Target("cuda", arch="sm_86")
    assert Target.from_any({"kind": "cuda", "arch": "sm_90"}) == t
    assert Target.from_any({"kind": "cuda", "arch": "sm_89", "host": {"kind": "llvm"}}).arch \
        == "sm_89"
    assert Target.from_any("c") == Target("c")


def test_from_any_refusals():
    with pytest.raises(ValueError, match="needs a 'kind'"):
        Target.from_any({"arch": "sm_80"})
    with pytest.raises(ValueError, match="unknown target dict keys \\['max_num_threads'\\]"):
        Target.from_any({"kind": "cuda", "max_num_threads": 1024})
    with pytest.raises(ValueError, match="cannot read option '-mcpu=x'"):
        Target.from_any("cuda -mcpu=x")
    with pytest.raises(TypeError, match="got int"):
        Target.from_any(80)


def test_targets_are_frozen_and_hashable():
    t = Target("cuda")
    with pytest.raises(AttributeError):
        t.arch = "sm_90"  # type: ignore[misc]
    assert len({Target("cuda"), Target("cuda", arch="sm_80"), Target("c")}) == 2


def test_current_device_without_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
    with pytest.raises(GpuUnavailableError, match=r'needs cupy: pip install "schedule-workb'):
        Target.current_device()


def _fake_cupy(count: int | Exception, cc: str = "90") -> types.ModuleType:
    def get_device_count():
        if isinstance(count, Exception):
            raise count
        return count

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDeviceCount=get_device_count),
        Device=lambda: types.SimpleNamespace(compute_capability=cc),
    )
    return cupy


def test_current_device_without_a_device(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(RuntimeError("no driver")))
    with pytest.raises(GpuUnavailableError, match="cupy sees no CUDA device.*no driver"):
        Target.current_device()
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(0))
    with pytest.raises(GpuUnavailableError, match="device count 0"):
        Target.current_device()


def test_current_device_maps_the_compute_capability(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(1, "86"))
    assert Target.current_device() == Target("cuda", arch="sm_86")
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(1, "120"))
    with pytest.raises(ValueError, match=r"compute capability 12.0 \(sm_120\)"):
        Target.current_device()


# -- occupancy: each case worked out by hand ---------------------------------------------


def test_occupancy_threads_bound_sm80():
    # sm_80, 256 threads, no shared memory, 32 registers:
    # warps/block = 256/32 = 8; threads: 64 warps // 8 = 8 blocks
    # registers: 32*32 = 1024 per warp -> 65536 // 1024 = 64 warps -> 64 // 8 = 8 blocks
    # shared: 0 + 1024 reserved = 1024 -> 167936 // 1024 = 164 blocks; block cap 32
    # -> 8 blocks, 64 warps, occupancy 1.0; threads and registers tie
    o = Target("cuda", arch="sm_80").occupancy(256, 0, 32)
    assert (o.blocks_per_sm, o.active_warps, o.occupancy) == (8, 64, 1.0)
    assert o.limiter == "threads" and o.limiters == ("threads", "registers")
    assert dict(o.blocks_by) == {"threads": 8, "shared memory": 164, "registers": 8,
                                 "blocks": 32}


def test_occupancy_register_bound_sm80():
    # 64 registers: 64*32 = 2048 per warp -> 65536 // 2048 = 32 warps -> 32 // 8 = 4 blocks
    # -> 4 blocks, 32 warps of 64 = 0.5
    o = Target("cuda", arch="sm_80").occupancy(256, 0, 64)
    assert (o.blocks_per_sm, o.active_warps, o.occupancy, o.limiter) == (4, 32, 0.5,
                                                                         "registers")


def test_occupancy_register_rounding():
    # 33 registers: 33*32 = 1056 -> rounded up to 256s = 1280 per warp;
    # 65536 // 1280 = 51 warps -> down to a multiple of 4 = 48 -> 48 // 8 = 6 blocks
    # -> 48 warps of 64 = 0.75 (without the rounding it would be 7 blocks)
    o = Target("cuda", arch="sm_80").occupancy(256, 0, 33)
    assert (o.blocks_per_sm, o.active_warps, o.occupancy) == (6, 48, 0.75)


def test_occupancy_shared_memory_bound_sm80():
    # 128 threads (4 warps), 48 KiB shared: 49152 + 1024 reserved = 50176 (a multiple
    # of 128); 167936 // 50176 = 3 blocks (4 would need 200704)
    # threads: 64 // 4 = 16; registers (32): 64 warps // 4 = 16; cap 32
    # -> 3 blocks, 12 warps, 12/64 = 0.1875
    o = Target("cuda", arch="sm_80").occupancy(128, 48 * 1024, 32)
    assert (o.blocks_per_sm, o.active_warps, o.occupancy) == (3, 12, 0.1875)
    assert o.limiter == "shared memory" and o.shared_bytes_per_block == 50176


def test_occupancy_shared_allocation_unit():
    # 100 bytes of shared memory: 100 + 1024 = 1124 -> rounded to 128s = 1152;
    # sm_80: 167936 // 1152 = 145 blocks of shared memory
    # sm_75 (no reservation, 256-byte unit): 100 -> 256; 65536 // 256 = 256
    assert Target("cuda", arch="sm_80").occupancy(32, 100, 32).blocks_by["shared memory"] \
        == 145
    assert Target("cuda", arch="sm_75").occupancy(32, 100, 32).blocks_by["shared memory"] \
        == 256


def test_occupancy_block_cap_bound_sm86():
    # sm_86, 64 threads (2 warps), 16 registers: threads: 48 // 2 = 24 blocks
    # registers: 16*32 = 512 per warp -> 128 warps -> 64 blocks; shared: 102400 // 1024
    # = 100; the cap of 16 blocks binds -> 16 blocks, 32 warps of 48 = 2/3
    o = Target("cuda", arch="sm_86").occupancy(64, 0, 16)
    assert (o.blocks_per_sm, o.active_warps, o.limiter) == (16, 32, "blocks")
    assert o.occupancy == pytest.approx(2 / 3)


def test_occupancy_sm90_big_blocks():
    # sm_90, 1024 threads (32 warps), 100 KiB shared, 40 registers:
    # threads: 64 // 32 = 2; shared: 102400 + 1024 = 103424 -> 233472 // 103424 = 2
    # registers: 40*32 = 1280 per warp -> 51 warps -> 48 -> 48 // 32 = 1 block
    # -> 1 block, 32 warps of 64 = 0.5, limited by registers
    o = Target("cuda", arch="sm_90").occupancy(1024, 100 * 1024, 40)
    assert (o.blocks_per_sm, o.active_warps, o.occupancy, o.limiter) == (1, 32, 0.5,
                                                                         "registers")
    assert o.blocks_by["shared memory"] == 2 and o.blocks_by["threads"] == 2


def test_occupancy_partial_warp_counts_a_whole_warp():
    # 48 threads = 2 warps (the second half empty); sm_80: 64 // 2 = 32 blocks = cap
    o = Target("cuda", arch="sm_80").occupancy(48, 0, 16)
    assert (o.warps_per_block, o.blocks_per_sm, o.active_threads) == (2, 32, 1536)


@pytest.mark.parametrize(
    "args, message",
    [
        ((2048, 0, 32), "2048 threads per block"),
        ((128, 0, 256), "256 registers per thread"),
        ((128, 0, 0), "0 registers per thread"),
        ((128, 164 * 1024, 32), "at most 166912"),
        ((1024, 0, 128), "need 131072 registers per block"),
        ((128, -1, 32), "shared_bytes_per_block must be an integer >= 0"),
    ],
)
def test_occupancy_refuses_unlaunchable_blocks(args, message):
    with pytest.raises(ValueError, match=message):
        Target("cuda", arch="sm_80").occupancy(*args)
