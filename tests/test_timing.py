"""Tests for workbench.runtime.timing: TVM time_evaluator-style measurement."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest

from workbench.runtime import timing
from workbench.runtime.timing import Measurement, measure

REPR_RE = re.compile(
    r"^Measurement\(median=\d+\.\d{3} ms, min=\d+\.\d{3} ms, max=\d+\.\d{3} ms, "
    r"std=\d+\.\d{3} ms, (\d+\.\d{2}|n/a) GFLOPS, number=\d+, repeat=\d+\)$"
)


class FakeClock:
    """Replaces timing.perf_counter; each kernel call advances it by `step` seconds."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def kernel(self) -> None:
        self.calls += 1
        self.now += self.step


class Counter:
    def __init__(self) -> None:
        self.calls = 0
        self.seen: list[tuple] = []

    def __call__(self, *args) -> None:
        self.calls += 1
        self.seen.append(args)


def test_number_grows_with_fake_clock(monkeypatch) -> None:
    clock = FakeClock(step=0.002)
    monkeypatch.setattr(timing, "perf_counter", clock)
    m = measure(clock.kernel, repeat=4, min_repeat_ms=20, warmup=1)
    # 1 call = 2 ms < 20 ms, so number -> max(ceil(1 * 20 / 2 * 1.05), 2) = 11 -> 22 ms.
    assert m.number == 11
    assert len(m.samples) == m.repeat == 4
    assert all(s * m.number >= 0.020 for s in m.samples)
    assert m.samples == pytest.approx((0.002,) * 4)
    assert clock.calls == 1 + 1 + 11 + 4 * 11  # warmup + calibration + timed repeats


def test_number_at_least_doubles(monkeypatch) -> None:
    clock = FakeClock(step=0.0095)  # one call is almost the target
    monkeypatch.setattr(timing, "perf_counter", clock)
    assert measure(clock.kernel, repeat=1, min_repeat_ms=10, warmup=0).number == 2


def test_explicit_number_is_starting_point(monkeypatch) -> None:
    clock = FakeClock(step=0.001)
    monkeypatch.setattr(timing, "perf_counter", clock)
    m = measure(clock.kernel, number=3, repeat=2, min_repeat_ms=10, warmup=0)
    assert m.number * 0.001 >= 0.010
    m = measure(clock.kernel, number=50, repeat=2, min_repeat_ms=10, warmup=0)
    assert m.number == 50  # already long enough


def test_number_grows_with_real_sleep() -> None:
    def kernel() -> None:
        time.sleep(0.001)

    m = measure(kernel, repeat=3, min_repeat_ms=30)
    assert m.number > 1
    assert len(m.samples) == 3
    assert all(s * m.number >= 0.030 for s in m.samples)
    assert all(s >= 0.001 for s in m.samples)


def test_explicit_number_without_min_repeat_is_exact() -> None:
    fn = Counter()
    m = measure(fn, 1, "x", number=7, repeat=3, min_repeat_ms=0, warmup=2)
    assert fn.calls == 2 + 7 * 3
    assert set(fn.seen) == {(1, "x")}
    assert (m.number, m.repeat, len(m.samples)) == (7, 3, 3)


def test_stats_match_numpy() -> None:
    samples = (0.004, 0.001, 0.003, 0.002, 0.010)
    m = Measurement(samples=samples, number=5, repeat=5)
    arr = np.array(samples)
    assert m.mean == pytest.approx(arr.mean())
    assert m.median == pytest.approx(np.median(arr))
    assert m.min == arr.min()
    assert m.max == arr.max()
    assert m.std == pytest.approx(arr.std(ddof=0))
    assert m.gflops is None


def test_gflops() -> None:
    m = Measurement(samples=(0.001, 0.002, 0.004), number=1, repeat=3, flops=4_000_000)
    assert m.gflops == pytest.approx(4e6 / 0.002 / 1e9)


def test_flops_taken_from_fn_attribute() -> None:
    def kernel() -> None:
        pass

    kernel.flops = 1_000_000
    assert measure(kernel, number=1, repeat=2, min_repeat_ms=0).flops == 1_000_000
    assert measure(kernel, number=1, repeat=2, min_repeat_ms=0, flops=5).flops == 5


def test_repr_format() -> None:
    m = Measurement(samples=(0.001234, 0.0012, 0.0013), number=100, repeat=3, flops=24_680_000)
    assert repr(m) == (
        "Measurement(median=1.234 ms, min=1.200 ms, max=1.300 ms, std=0.042 ms, "
        "20.00 GFLOPS, number=100, repeat=3)"
    )
    assert REPR_RE.match(repr(m))
    assert REPR_RE.match(repr(Measurement(samples=(2.5,), number=1, repeat=1)))
    assert "n/a GFLOPS" in repr(Measurement(samples=(2.5,), number=1, repeat=1))


def test_to_dict() -> None:
    m = Measurement(samples=(0.001, 0.003), number=2, repeat=2, flops=2000)
    d = m.to_dict()
    assert d["samples"] == [0.001, 0.003]
    assert (d["number"], d["repeat"], d["flops"]) == (2, 2, 2000)
    assert d["median"] == pytest.approx(0.002)
    assert d["gflops"] == pytest.approx(m.gflops)
    assert math.isclose(d["std"], m.std)


def test_measurement_is_frozen() -> None:
    m = Measurement(samples=[0.1, 0.2], number=1, repeat=2)
    assert m.samples == (0.1, 0.2)
    with pytest.raises(AttributeError):
        m.number = 3  # type: ignore[misc]
    with pytest.raises(ValueError, match="samples"):
        Measurement(samples=(0.1,), number=1, repeat=2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"repeat": 0}, "repeat"),
        ({"repeat": 1.5}, "repeat"),
        ({"number": 0}, "number"),
        ({"number": -3}, "number"),
        ({"min_repeat_ms": -1}, "min_repeat_ms"),
        ({"min_repeat_ms": float("nan")}, "min_repeat_ms"),
        ({"warmup": -1}, "warmup"),
        ({"flops": -1}, "flops"),
    ],
)
def test_argument_validation(kwargs: dict, match: str) -> None:
    fn = Counter()
    with pytest.raises(ValueError, match=match):
        measure(fn, **kwargs)
    assert fn.calls == 0


def test_non_callable_rejected() -> None:
    with pytest.raises(TypeError, match="callable"):
        measure(42)  # type: ignore[arg-type]


# --- cache flushing ------------------------------------------------------------------


def test_flush_cache_samples_are_single_runs(monkeypatch) -> None:
    flusher = timing.CacheFlusher(1 << 16)
    monkeypatch.setattr(timing, "default_flusher", lambda: flusher)
    fn = Counter()
    m = measure(fn, repeat=4, min_repeat_ms=1000, warmup=2, flush_cache=True)
    assert (m.number, m.repeat, len(m.samples)) == (1, 4, 4)
    assert fn.calls == 2 + 4  # warmup + one run per sample; no calibration
    assert flusher.flushes == 4  # one flush before every sample
    assert int(flusher.buffer[::64].min()) == int(flusher.buffer[::64].max()) == 4


def test_flush_happens_right_before_each_timed_run(monkeypatch) -> None:
    events: list[str] = []

    class Recorder:
        def flush(self) -> None:
            events.append("flush")

    monkeypatch.setattr(timing, "default_flusher", Recorder)
    measure(lambda: events.append("run"), repeat=3, warmup=1, flush_cache=True)
    assert events == ["run"] + ["flush", "run"] * 3


def test_flush_cache_refuses_explicit_number(monkeypatch) -> None:
    monkeypatch.setattr(timing, "default_flusher", lambda: timing.CacheFlusher(1 << 16))
    fn = Counter()
    with pytest.raises(ValueError, match="number=1"):
        measure(fn, number=10, flush_cache=True)
    assert fn.calls == 0
    assert measure(fn, number=1, repeat=1, flush_cache=True, warmup=0).number == 1


def test_cache_flusher_touches_every_cache_line() -> None:
    flusher = timing.CacheFlusher(4096)
    assert not flusher.buffer.any()
    flusher.flush()
    flusher.flush()
    assert flusher.flushes == 2
    lines = flusher.buffer.reshape(-1, 64)
    assert (lines[:, 0] == 2).all()  # one byte per 64-byte line, read and written
    assert not lines[:, 1:].any()
    with pytest.raises(ValueError, match="at least 64 bytes"):
        timing.CacheFlusher(8)


def _fake_cache(root, *entries: tuple[str, str]) -> None:
    for n, (kind, size) in enumerate(entries):
        index = root / f"index{n}"
        index.mkdir()
        (index / "type").write_text(kind + "\n")
        (index / "size").write_text(size + "\n")


def test_largest_cache_bytes_reads_sysfs(tmp_path) -> None:
    _fake_cache(tmp_path, ("Data", "48K"), ("Instruction", "64M"), ("Unified", "2048K"),
                ("Unified", "32M"))
    assert timing.largest_cache_bytes(tmp_path) == 32 << 20  # instruction caches ignored
    assert timing.largest_cache_bytes(tmp_path / "missing") is None


def test_cache_flush_bytes_is_twice_the_last_level(monkeypatch) -> None:
    for largest, expected in [(32 << 20, 64 << 20), (None, timing.FALLBACK_FLUSH_BYTES),
                              (4 << 30, timing.MAX_FLUSH_BYTES)]:
        timing.cache_flush_bytes.cache_clear()
        monkeypatch.setattr(timing, "largest_cache_bytes", lambda largest=largest: largest)
        assert timing.cache_flush_bytes() == expected
    timing.cache_flush_bytes.cache_clear()


def test_flushing_makes_a_memory_bound_kernel_slower(monkeypatch) -> None:
    """A streaming kernel over 2 MiB (in cache when warm) is slower right after a flush."""
    import workbench as wb

    monkeypatch.setattr(timing, "_default_flusher", None)  # freed again after the test
    n = 1 << 18
    A = wb.placeholder((n,), "float32", name="A")
    B = wb.compute((n,), lambda i: A[i] * 2.0, name="B")
    kernel = wb.build(wb.create_prim_func([A, B], name="scale"))
    a, b = np.ones(n, "float32"), np.zeros(n, "float32")
    warm = wb.measure(kernel, a, b, repeat=7, min_repeat_ms=10)
    cold = wb.measure(kernel, a, b, repeat=7, flush_cache=True)
    assert cold.number == 1 and warm.number > 1
    assert timing.default_flusher().nbytes == timing.cache_flush_bytes()
    assert cold.median > 1.2 * warm.median, (cold, warm)


# -- a measurement always ends ------------------------------------------------------------
def test_huge_min_repeat_ms_is_refused():
    with pytest.raises(ValueError, match="min_repeat_ms must be at most"):
        timing.measure(sorted, [1], min_repeat_ms=1e12)
    with pytest.raises(timing.MeasurementTooLongError, match="100000 repeats"):
        timing.measure(sorted, [1], repeat=100_000, min_repeat_ms=100)


def test_huge_number_is_refused_after_one_call(monkeypatch):
    monkeypatch.setattr(timing, "MAX_MEASURE_SECONDS", 1.0)
    start = time.perf_counter()
    # 10**8 calls of 1 ms each: refused after the first call (no warm-up to learn from)
    with pytest.raises(timing.MeasurementTooLongError, match="more calls of about"):
        timing.measure(time.sleep, 1e-3, number=10**8, repeat=1, min_repeat_ms=0, warmup=0)
    with pytest.raises(timing.MeasurementTooLongError):
        timing.measure(time.sleep, 1e-3, number=10**8, repeat=3, min_repeat_ms=0)
    with pytest.raises(ValueError, match="number must be an integer in"):
        timing.measure(sorted, [1], number=10**12, min_repeat_ms=0)
    assert time.perf_counter() - start < 0.9


def test_calibration_stays_within_the_budget(monkeypatch):
    monkeypatch.setattr(timing, "MAX_MEASURE_SECONDS", 0.5)
    start = time.perf_counter()
    with pytest.raises(timing.MeasurementTooLongError, match="5 repeats"):
        timing.measure(time.sleep, 1e-3, repeat=5, min_repeat_ms=200)  # 1 s: refused
    # 400 ms calibrated, then 400 ms more: refused once calibration learns the call time
    with pytest.raises(timing.MeasurementTooLongError, match="more calls of about"):
        timing.measure(time.sleep, 1e-3, repeat=1, min_repeat_ms=400)
    assert time.perf_counter() - start < 0.6
    m = timing.measure(time.sleep, 1e-4, repeat=2, min_repeat_ms=20)  # well within
    assert m.number > 1
