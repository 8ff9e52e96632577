"""The machine's float32 peak: the estimate from the CPU description and the measured
FMA microbenchmark."""

from __future__ import annotations

import math
import os
import time

import pytest

import workbench as wb
from workbench.runtime import peak
from workbench.runtime.peak import CpuSpec, cpu_spec, peak_gflops


def test_estimate_is_positive_and_plausible() -> None:
    spec = cpu_spec()
    assert 1 <= spec.cores <= (os.cpu_count() or 1)
    assert spec.lanes in (4, 8, 16) and spec.fma_units in (1, 2)
    estimate = peak_gflops()
    assert estimate == wb.peak_gflops()
    if spec.ghz is not None:
        assert 0.3 < spec.ghz < 7
        assert estimate == pytest.approx(spec.cores * spec.ghz * spec.lanes * 2 * spec.fma_units)
        # between 1 and 1000 GFLOPS per core for any CPU of the last twenty years
        assert 1 <= estimate / spec.cores <= 1000


def test_cpu_spec_gflops_formula() -> None:
    assert CpuSpec(2, 2.6, 16, 2, "avx512f").gflops == pytest.approx(332.8)
    assert CpuSpec(4, 3.0, 8, 2, "avx2").gflops == pytest.approx(384.0)
    assert CpuSpec(1, None, 4, 1, "128-bit").gflops is None


@pytest.fixture
def fake_machine(tmp_path, monkeypatch):
    """Point peak.py at a fake /proc/cpuinfo and /sys/devices/system/cpu."""
    cpu_dir = tmp_path / "cpu"
    for cpu, core in [(0, 0), (1, 0), (2, 1), (3, 1)]:  # 2 cores with 2 SMT threads each
        topo = cpu_dir / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{core}\n")
    cpuinfo = tmp_path / "cpuinfo"
    monkeypatch.setattr(peak, "_CPU_DIR", cpu_dir)
    monkeypatch.setattr(peak, "_CPUINFO", cpuinfo)
    monkeypatch.setattr(peak.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    return cpu_dir, cpuinfo


def test_cpu_spec_from_fake_machine(fake_machine) -> None:
    cpu_dir, cpuinfo = fake_machine
    cpuinfo.write_text(
        "processor\t: 0\ncpu MHz\t\t: 2100.000\nflags\t\t: fpu sse avx avx2 fma\n\n"
        "processor\t: 1\ncpu MHz\t\t: 3400.000\nflags\t\t: fpu sse avx avx2 fma\n"
    )
    spec = cpu_spec()
    assert (spec.cores, spec.ghz, spec.lanes, spec.fma_units, spec.isa) == (2, 3.4, 8, 2, "avx2")
    # the maximum frequency from cpufreq wins over "cpu MHz"
    freq = cpu_dir / "cpu0" / "cpufreq"
    freq.mkdir()
    (freq / "cpuinfo_max_freq").write_text("3900000\n")
    assert cpu_spec().ghz == 3.9


def test_cpu_spec_without_vector_extensions_or_clock(fake_machine, monkeypatch) -> None:
    _, cpuinfo = fake_machine
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd\n")
    spec = cpu_spec()
    assert (spec.lanes, spec.fma_units, spec.ghz, spec.gflops) == (4, 1, None, None)
    # with no clock the estimate falls back to the measured peak
    monkeypatch.setattr(peak, "_measured_peak", 12.5)
    assert peak_gflops() == 12.5


def test_measured_peak_is_positive_and_cached() -> None:
    measured = peak_gflops(measured=True)
    assert math.isfinite(measured) and measured > 0
    start = time.perf_counter()
    assert peak_gflops(measured=True) == measured  # remembered for the process
    assert time.perf_counter() - start < 0.05
    estimate = cpu_spec().gflops
    if estimate is not None:
        # a busy machine measures low; nothing runs 3x faster than its description
        assert measured < 3 * estimate
