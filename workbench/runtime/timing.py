"""Wall-clock measurement of kernels with TVM `time_evaluator` semantics.

Each of `repeat` samples is the mean time of one call over `number` back-to-back calls;
`number` grows until one repeat lasts at least `min_repeat_ms`. With `flush_cache=True`
the caches are evicted before every sample (see `CacheFlusher`) and each sample is one run.

Every `Measurement` also says how far to trust it (`workbench.runtime.noise`): the
spread of its samples (`cv`), the CPU time other processes took meanwhile
(`foreign_load`) and whether either is past the thresholds (`noisy`).

A measurement always ends: `min_repeat_ms` is at most `MAX_MIN_REPEAT_MS`, and one whose
calls would take more than `MAX_MEASURE_SECONDS` in all is refused with
`MeasurementTooLongError` as soon as that can be told (after the first timed calls).

Example:
    >>> m = measure(sum, range(1000), number=10, repeat=3, min_repeat_ms=0)
    >>> len(m.samples)
    3
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np

from .noise import (
    coefficient_of_variation,
    cpu_snapshot,
    describe_noise,
    foreign_load,
    is_noisy,
    noise_note,
)
from .threads import thread_limit

__all__ = [
    "ALIGNMENT",
    "MAX_MEASURE_SECONDS",
    "MAX_MIN_REPEAT_MS",
    "CacheFlusher",
    "Measurement",
    "MeasurementTooLongError",
    "aligned_copy",
    "cache_flush_bytes",
    "default_flusher",
    "measure",
    "noise_note",
]

#: Where kernel arguments should start: a multiple of this many bytes (TVM's
#: ``kAllocAlignment``). A vectorized kernel can run twice as slowly when its vectors
#: straddle cache lines, so the isolated worker never leaves the start to the allocator.
ALIGNMENT = 64


def aligned_copy(values: Any, offset: int = 0) -> np.ndarray:
    """A copy of the array ``values`` whose data starts ``offset`` bytes past a multiple
    of `ALIGNMENT` bytes (NumPy only promises 16), so timings compare like for like.

    Example:
        >>> import numpy as np
        >>> a = aligned_copy(np.arange(6, dtype="float32").reshape(2, 3))
        >>> a.ctypes.data % 64, a.shape, float(a[1, 2])
        (0, (2, 3), 5.0)
        >>> aligned_copy(a, offset=16).ctypes.data % 64
        16
    """
    values = np.asarray(values)
    if not 0 <= offset < ALIGNMENT:
        raise ValueError(f"aligned_copy: offset must be in [0, {ALIGNMENT}), got {offset}")
    raw = np.empty(values.nbytes + 2 * ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT + offset
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


_MAX_NUMBER = 1 << 30
#: The largest `min_repeat_ms` `measure` accepts (10 s per repeat).
MAX_MIN_REPEAT_MS = 10_000
#: `measure` refuses to go on when its timed calls would take longer than this in all.
MAX_MEASURE_SECONDS = 120.0
_GROWTH_MARGIN = 1.05

#: sysfs folder describing the caches seen by CPU 0 (one ``index*`` folder per cache).
CPU_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
#: Flush size when the cache sizes cannot be read.
FALLBACK_FLUSH_BYTES = 64 << 20
#: Upper bound of the flush size, so a huge shared L3 does not cost gigabytes of memory.
MAX_FLUSH_BYTES = 256 << 20  # virtual machines can report a whole host L3 (hundreds of MiB)
_CACHE_LINE = 64
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMG]?)i?B?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass(frozen=True)
class Measurement:
    """Timing samples of one kernel, in seconds per single run, one sample per repeat.

    `std` is the population standard deviation (numpy `ddof=0`), as in TVM.
    `repr` has one fixed format — milliseconds with 3 decimals, GFLOPS with 2 decimals
    (`n/a GFLOPS` when the flop count is unknown) — so outputs are easy to sanitize.

    Noise (see `workbench.runtime.noise`): `cv` is the samples' coefficient of variation
    (computed from them when not given), `foreign_load` the fraction of the usable
    cores' time other processes took during the measurement (None when unknown) and
    `noisy` whether either is past the thresholds (`wb.set_noise_thresholds`; decided
    at construction when not given). Only a noisy measurement's repr says so, with a
    ``NOISY (...)`` mark. `threads` is the thread count it ran with, when known.

    Example:
        >>> m = Measurement(samples=(0.001, 0.002, 0.003), number=10, repeat=3, flops=2_000_000)
        >>> repr(m).startswith("Measurement(median=2.000 ms, min=1.000 ms, max=3.000 ms,")
        True
        >>> round(m.gflops, 2)
        1.0
        >>> m.noisy, round(m.cv, 2)        # the samples spread by 41%
        (True, 0.41)
        >>> repr(m).endswith("NOISY (cv=0.41))")
        True
        >>> Measurement(samples=(0.002, 0.002), number=1, repeat=2, foreign_load=0.5).noisy
        True
    """

    samples: tuple[float, ...]
    number: int
    repeat: int
    flops: int | None = None
    cv: float | None = None
    foreign_load: float | None = None
    noisy: bool | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples", tuple(float(s) for s in self.samples))
        if not self.samples:
            raise ValueError("Measurement needs at least one sample")
        if len(self.samples) != self.repeat:
            raise ValueError(f"got {len(self.samples)} samples for repeat={self.repeat}")
        if self.number < 1:
            raise ValueError(f"number must be >= 1, got {self.number}")
        if self.cv is None:
            object.__setattr__(self, "cv", coefficient_of_variation(self.samples))
        if self.foreign_load is not None:
            load = float(self.foreign_load)
            if not (math.isfinite(load) and 0 <= load <= 1):
                raise ValueError(f"foreign_load must be a fraction in [0, 1], got {load!r}")
            object.__setattr__(self, "foreign_load", load)
        if self.noisy is None:
            object.__setattr__(self, "noisy", is_noisy(self.cv, self.foreign_load))
        else:
            object.__setattr__(self, "noisy", bool(self.noisy))

    @property
    def mean(self) -> float:
        """Mean seconds per run."""
        return float(np.mean(self.samples))

    @property
    def median(self) -> float:
        """Median seconds per run."""
        return float(np.median(self.samples))

    @property
    def min(self) -> float:
        """Fastest sample, seconds per run."""
        return min(self.samples)

    @property
    def max(self) -> float:
        """Slowest sample, seconds per run."""
        return max(self.samples)

    @property
    def std(self) -> float:
        """Population standard deviation (ddof=0) of the samples, seconds."""
        return float(np.std(self.samples, ddof=0))

    @property
    def gflops(self) -> float | None:
        """`flops / median / 1e9`, or None when the flop count is unknown."""
        if self.flops is None:
            return None
        return self.flops / self.median / 1e9

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (JSON-serializable) with the samples and derived statistics.

        Example:
            >>> Measurement(samples=(0.5,), number=1, repeat=1).to_dict()["median"]
            0.5
        """
        return {
            "samples": list(self.samples),
            "number": self.number,
            "repeat": self.repeat,
            "flops": self.flops,
            "mean": self.mean,
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "std": self.std,
            "gflops": self.gflops,
            "cv": self.cv,
            "foreign_load": self.foreign_load,
            "noisy": self.noisy,
            "threads": self.threads,
        }

    def __repr__(self) -> str:
        gflops = "n/a" if self.gflops is None else f"{self.gflops:.2f}"
        noise = f", NOISY ({describe_noise(self)})" if self.noisy else ""
        return (
            f"Measurement(median={self.median * 1e3:.3f} ms, min={self.min * 1e3:.3f} ms, "
            f"max={self.max * 1e3:.3f} ms, std={self.std * 1e3:.3f} ms, {gflops} GFLOPS, "
            f"number={self.number}, repeat={self.repeat}{noise})"
        )


def _parse_cache_size(text: str) -> int | None:
    """``"48K"`` -> 49152; None when the text is not a size."""
    match = _SIZE_RE.match(text)
    if match is None:
        return None
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]


def largest_cache_bytes(cache_dir: Path = CPU_CACHE_DIR) -> int | None:
    """Size in bytes of the largest data or unified cache listed under ``cache_dir``
    (the last-level cache), or None when sysfs does not say.

    Example:
        >>> size = largest_cache_bytes()
        >>> size is None or size >= 4096
        True
    """
    sizes = []
    for index in sorted(Path(cache_dir).glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            size = _parse_cache_size((index / "size").read_text())
        except OSError:
            continue
        if kind != "Instruction" and size:
            sizes.append(size)
    return max(sizes) if sizes else None


@functools.cache
def cache_flush_bytes() -> int:
    """Bytes written by a cache flush: twice the last-level cache (read from
    ``/sys/devices/system/cpu/cpu0/cache``), 64 MiB when unknown, at most 256 MiB.

    Example:
        >>> 0 < cache_flush_bytes() <= MAX_FLUSH_BYTES
        True
    """
    largest = largest_cache_bytes()
    if largest is None:
        return FALLBACK_FLUSH_BYTES
    return min(2 * largest, MAX_FLUSH_BYTES)


class CacheFlusher:
    """Evicts the CPU caches by writing through a buffer larger than the last-level cache,
    the way TVM's ``time_evaluator(cache_flush_bytes=...)`` does.

    ``flush()`` increments one byte in every 64-byte cache line of the buffer: a read and
    a write of each line with ordinary (temporal) stores, so every line is pulled into the
    caches and whatever the kernel had there is pushed out. (A plain ``memset`` of a large
    buffer may use non-temporal stores that bypass the caches.) The buffer is allocated
    and first touched once, on construction.

    Example:
        >>> flusher = CacheFlusher(1 << 20)
        >>> flusher.flush(); flusher.flushes
        1
        >>> int(flusher.buffer[::64].min())
        1
    """

    def __init__(self, nbytes: int | None = None) -> None:
        nbytes = cache_flush_bytes() if nbytes is None else int(nbytes)
        if nbytes < _CACHE_LINE:
            raise ValueError(f"a cache flush needs at least {_CACHE_LINE} bytes, got {nbytes}")
        self.nbytes = nbytes
        self.buffer = np.zeros(nbytes, dtype=np.uint8)
        self._lines = self.buffer[::_CACHE_LINE]
        self.flushes = 0

    def flush(self) -> None:
        """Touch (read and write) every cache line of the buffer once."""
        np.add(self._lines, 1, out=self._lines)
        self.flushes += 1

    def __repr__(self) -> str:
        return f"CacheFlusher(nbytes={self.nbytes}, flushes={self.flushes})"


_default_flusher: CacheFlusher | None = None


def default_flusher() -> CacheFlusher:
    """The process's shared `CacheFlusher` of `cache_flush_bytes()`, made on first use
    (allocating its buffer once keeps page faults out of later flushes).

    Example:
        >>> default_flusher() is default_flusher()
        True
    """
    global _default_flusher
    if _default_flusher is None:
        _default_flusher = CacheFlusher()
    return _default_flusher


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class MeasurementTooLongError(ValueError):
    """The calls a measurement asks for would take longer than `MAX_MEASURE_SECONDS`.

    Example:
        >>> import time
        >>> measure(time.sleep, 0.01, number=100_000, repeat=1, min_repeat_ms=0)
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        workbench.runtime.timing.MeasurementTooLongError: measure: 100000 more calls of about ...
    """


def _validate(
    number: int | None, repeat: int, min_repeat_ms: float, warmup: int, flops: int | None
) -> None:
    if not _is_int(repeat) or repeat < 1:
        raise ValueError(f"repeat must be an integer >= 1, got {repeat!r}")
    if number is not None and (not _is_int(number) or not 1 <= number <= _MAX_NUMBER):
        raise ValueError(f"number must be an integer in [1, {_MAX_NUMBER}] or None, "
                         f"got {number!r}")
    if not isinstance(min_repeat_ms, numbers.Real) or not math.isfinite(min_repeat_ms):
        raise ValueError(f"min_repeat_ms must be a finite number, got {min_repeat_ms!r}")
    if min_repeat_ms < 0:
        raise ValueError(f"min_repeat_ms must be >= 0, got {min_repeat_ms!r}")
    if min_repeat_ms > MAX_MIN_REPEAT_MS:
        raise ValueError(f"min_repeat_ms must be at most {MAX_MIN_REPEAT_MS} "
                         f"(MAX_MIN_REPEAT_MS), got {min_repeat_ms!r}")
    if repeat * min_repeat_ms / 1e3 > MAX_MEASURE_SECONDS:
        raise MeasurementTooLongError(
            f"measure: {repeat} repeats x min_repeat_ms={min_repeat_ms} would take at least "
            f"{repeat * min_repeat_ms / 1e3:g} s, more than MAX_MEASURE_SECONDS "
            f"({MAX_MEASURE_SECONDS:g} s)")
    if not _is_int(warmup) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    if flops is not None and (not _is_int(flops) or flops < 0):
        raise ValueError(f"flops must be an integer >= 0 or None, got {flops!r}")


class _Budget:
    """Keeps a measurement within `MAX_MEASURE_SECONDS`: it learns the time per call
    from the calls made so far and refuses to start calls that would pass the limit."""

    def __init__(self, limit: float) -> None:
        self.start = perf_counter()
        self.limit = limit
        self.per_call: float | None = None

    def note(self, seconds: float, calls: int) -> None:
        if calls > 0:
            self.per_call = seconds / calls

    def check(self, calls_left: int) -> None:
        if self.per_call is None or calls_left <= 0:
            return
        spent = perf_counter() - self.start
        need = self.per_call * calls_left
        if spent + need > self.limit:
            raise MeasurementTooLongError(
                f"measure: {calls_left} more calls of about {self.per_call * 1e3:.3g} ms "
                f"would take {need:.3g} s, past MAX_MEASURE_SECONDS ({self.limit:g} s) "
                "with what was spent; lower number, repeat or min_repeat_ms")


def _time_repeat(call: Callable[[], object], number: int) -> float:
    """Seconds taken by `number` back-to-back calls of `call`."""
    loop = itertools.repeat(None, number)
    start = perf_counter()
    for _ in loop:
        call()
    return perf_counter() - start


def _timed(call: Callable[[], object], number: int, budget: _Budget,
           time_repeat: Callable[[Callable[[], object], int], float], calls_after: int
           ) -> float:
    """Seconds of `number` calls, timed by `time_repeat`. While the time per call is not
    known yet, the first call is timed on its own (and counted in the total) so the
    budget can refuse the rest before they run; `calls_after` are planned after these."""
    if budget.per_call is None and number > 1 and time_repeat is _time_repeat:
        first = time_repeat(call, 1)
        budget.note(first, 1)
        budget.check(number - 1 + calls_after)
        elapsed = first + time_repeat(call, number - 1)
    else:
        budget.check(number + calls_after)
        elapsed = time_repeat(call, number)
    budget.note(elapsed, number)
    return elapsed


def _flushed_run(call: Callable[[], object], flusher: CacheFlusher) -> float:
    """Seconds taken by one call of `call` right after an (untimed) cache flush."""
    flusher.flush()
    return _time_repeat(call, 1)


def _calibrate(
    call: Callable[[], object],
    number: int,
    min_seconds: float,
    time_repeat: Callable[[Callable[[], object], int], float] = _time_repeat,
    budget: _Budget | None = None,
    repeat: int = 1,
) -> int:
    """Grow `number` (at least doubling each step) until one repeat lasts `min_seconds`."""
    budget = _Budget(math.inf) if budget is None else budget
    while number < _MAX_NUMBER:
        elapsed = _timed(call, number, budget, time_repeat, repeat * number)
        if elapsed >= min_seconds:
            break
        scaled = number * min_seconds / elapsed * _GROWTH_MARGIN if elapsed > 0 else math.inf
        number = min(max(math.ceil(min(scaled, _MAX_NUMBER)), 2 * number), _MAX_NUMBER)
    return number


def measure(
    fn: Callable[..., object],
    *args: object,
    number: int | None = None,
    repeat: int = 5,
    min_repeat_ms: float = 100,
    warmup: int = 1,
    flops: int | None = None,
    flush_cache: bool = False,
    threads: int | None = None,
) -> Measurement:
    """Time `fn(*args)` like TVM's `time_evaluator` and return a `Measurement`.

    `fn(*args)` first runs `warmup` times untimed. Then `number` (1 when None) is grown —
    at least doubling each step, aiming 5% past the target — until one timed repeat of
    `number` calls lasts at least `min_repeat_ms`; these calibration repeats are discarded.
    An explicit `number` is only a starting point unless `min_repeat_ms=0`, in which case
    it is used exactly. Finally `repeat` repeats of `number` calls are timed with
    `time.perf_counter`; each sample is the repeat's time divided by `number`.
    When `flops` is None and `fn` has an integer attribute `flops`, that is used.
    When `fn` has a callable attribute `event_timer` — ``event_timer(call, number)``
    returning the seconds ``number`` calls took, as a prepared CUDA kernel has (CUDA
    events) — it times the repeats instead of `time.perf_counter`.

    `flush_cache=True` gives cold-cache figures: before each of the `repeat` samples the
    caches are evicted (`default_flusher().flush()`, untimed) and the sample is a single
    run. So `number` is 1 (another explicit `number` is refused) and `min_repeat_ms` does
    not apply; use enough `repeat`s, since a single short run is a noisy sample. The first
    flushing measurement in a process allocates the flush buffer (`cache_flush_bytes()`).

    `threads` (None: `wb.get_num_threads()`) is the thread count for the whole
    measurement: NumPy's BLAS is limited to it (threadpoolctl) and a prepared kernel
    (one with a callable `set_num_threads` attribute, as `Kernel.prepare` gives) is
    set to it, so NumPy and our kernels are compared with the same threads.

    Bounds: `min_repeat_ms` is at most `MAX_MIN_REPEAT_MS` (10 s); calls that would
    take more than `MAX_MEASURE_SECONDS` (120 s) in all raise `MeasurementTooLongError`
    before they run (the time per call is learnt from the first call).

    The result records its noise (`cv`, `foreign_load`, `noisy`: see `Measurement`); the
    foreign load covers the whole measurement, warm-up and calibration included.

    Example:
        >>> m = measure(sorted, list(range(100)), repeat=3, min_repeat_ms=1)
        >>> m.repeat, len(m.samples)
        (3, 3)
        >>> measure(sorted, [3, 1], repeat=1, min_repeat_ms=0, threads=1).threads
        1
    """
    _validate(number, repeat, min_repeat_ms, warmup, flops)
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if flush_cache and number not in (None, 1):
        raise ValueError(
            f"flush_cache=True times single runs (number=1), got number={number!r}; "
            "leave number=None"
        )
    fn_flops = getattr(fn, "flops", None)
    if flops is None and _is_int(fn_flops):
        flops = fn_flops
    call = functools.partial(fn, *args) if args else fn
    timer = getattr(fn, "event_timer", None)
    time_repeat = timer if callable(timer) else _time_repeat
    if flush_cache and time_repeat is not _time_repeat:
        raise ValueError(
            "flush_cache=True evicts the CPU caches; it does not apply to a kernel timed "
            "on the GPU (event_timer)"
        )
    with thread_limit(threads) as n:
        set_threads = getattr(fn, "set_num_threads", None)
        if callable(set_threads):
            set_threads(n)
        before = cpu_snapshot()
        samples, count = _run(call, number, repeat, min_repeat_ms, warmup, flush_cache,
                              time_repeat)
        load = foreign_load(before, cpu_snapshot())
    return Measurement(
        samples=samples,
        number=count,
        repeat=int(repeat),
        flops=None if flops is None else int(flops),
        foreign_load=load,
        threads=n,
    )


def _run(call: Callable[[], object], number: int | None, repeat: int, min_repeat_ms: float,
         warmup: int, flush_cache: bool,
         time_repeat: Callable[[Callable[[], object], int], float]
         ) -> tuple[tuple[float, ...], int]:
    """The warm-up, calibration and timed repeats of `measure`: (samples, number)."""
    budget = _Budget(MAX_MEASURE_SECONDS)
    count = 1 if flush_cache or number is None else int(number)
    for done in range(warmup):
        budget.check(warmup - done + repeat * count)
        start = perf_counter()
        call()
        budget.note(perf_counter() - start, 1)
    if flush_cache:
        flusher = default_flusher()
        samples = []
        for done in range(repeat):
            budget.check(repeat - done)
            samples.append(_flushed_run(call, flusher))
            budget.note(samples[-1], 1)
        return tuple(samples), 1
    if min_repeat_ms > 0:
        count = _calibrate(call, count, min_repeat_ms / 1e3, time_repeat, budget, repeat)
    samples = [_timed(call, count, budget, time_repeat, (repeat - 1 - done) * count) / count
               for done in range(repeat)]
    return tuple(samples), count
