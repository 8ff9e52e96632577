"""How much to trust a measurement: the spread of its samples and the CPU time other
processes took while it ran.

Two figures, recorded in every :class:`~workbench.runtime.timing.Measurement`:

``cv``
    the coefficient of variation of the samples (population standard deviation divided
    by the mean; 0 for a single sample).
``foreign_load``
    the CPU time *other* processes used on the cores this process may run on, during
    the measurement, as a fraction of what those cores could give in that time
    (wall time x usable cores): the busy time of those cores in ``/proc/stat`` (user,
    nice, system, irq, softirq and steal ticks of each ``cpuN`` line) minus this
    process's own CPU time (all its threads; the measuring worker counts its own).
    0 means the cores were ours alone, 0.5 that other processes took half of them.
    None where ``/proc/stat`` is missing, or when the measurement was too short for the
    kernel's tick counters to say (under :data:`MIN_WINDOW_TICKS` ticks of capacity,
    e.g. 50 ms on 2 cores at 100 ticks per second).

A measurement is *noisy* when ``cv`` exceeds ``thresholds.cv`` (default 0.1: the samples
spread by more than 10%) or ``foreign_load`` exceeds ``thresholds.foreign_load``
(default 0.25: other processes took more than a quarter of our cores). Change them
for the process with :func:`set_noise_thresholds`.

Example:
    >>> coefficient_of_variation([1.0, 1.0, 1.0])
    0.0
    >>> is_noisy(cv=0.02, foreign_load=0.4)
    True
    >>> is_noisy(cv=0.02, foreign_load=None)
    False
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_THRESHOLDS",
    "MIN_WINDOW_TICKS",
    "CpuSnapshot",
    "NoiseThresholds",
    "coefficient_of_variation",
    "cpu_snapshot",
    "foreign_load",
    "get_noise_thresholds",
    "is_noisy",
    "noise_note",
    "set_noise_thresholds",
]

PROC_STAT = "/proc/stat"
#: A load window shorter than this many ticks of capacity (wall ticks x cores) gives
#: ``foreign_load=None``: one tick more or less would move the figure by over 5%.
MIN_WINDOW_TICKS = 20
# /proc/stat columns after the name: user nice system idle iowait irq softirq steal ...
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


@dataclass(frozen=True)
class NoiseThresholds:
    """When a measurement counts as noisy: ``cv`` above ``cv`` or ``foreign_load`` above
    ``foreign_load`` (both fractions).

    Example:
        >>> NoiseThresholds()
        NoiseThresholds(cv=0.1, foreign_load=0.25)
    """

    cv: float = 0.1
    foreign_load: float = 0.25

    def __post_init__(self) -> None:
        for name in ("cv", "foreign_load"):
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or value < 0):
                raise ValueError(f"noise threshold {name} must be a finite number >= 0, "
                                 f"got {value!r}")


#: The thresholds workbench starts with.
DEFAULT_THRESHOLDS = NoiseThresholds()
_thresholds = DEFAULT_THRESHOLDS


def get_noise_thresholds() -> NoiseThresholds:
    """The process's current :class:`NoiseThresholds`.

    Example:
        >>> get_noise_thresholds().cv
        0.1
    """
    return _thresholds


def set_noise_thresholds(cv: float | None = None, foreign_load: float | None = None
                         ) -> NoiseThresholds:
    """Change the thresholds for measurements made from now on (None keeps one) and
    return the previous ones (pass them back to restore).

    Example:
        >>> old = set_noise_thresholds(cv=0.05)
        >>> get_noise_thresholds()
        NoiseThresholds(cv=0.05, foreign_load=0.25)
        >>> _ = set_noise_thresholds(old.cv, old.foreign_load)
    """
    global _thresholds
    previous = _thresholds
    _thresholds = NoiseThresholds(previous.cv if cv is None else cv,
                                  previous.foreign_load if foreign_load is None
                                  else foreign_load)
    return previous


def coefficient_of_variation(samples: Sequence[float]) -> float:
    """Population standard deviation over mean of ``samples`` (0 for one sample or a
    zero mean).

    Example:
        >>> round(coefficient_of_variation([1.0, 2.0, 3.0]), 4)
        0.4082
    """
    values = [float(s) for s in samples]
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    if mean <= 0:
        return 0.0
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return math.sqrt(var) / mean


def is_noisy(cv: float | None, foreign_load: float | None,
             thresholds: NoiseThresholds | None = None) -> bool:
    """Whether a measurement with this spread and foreign load is past ``thresholds``
    (default: :func:`get_noise_thresholds`). A figure that is None does not count.

    Example:
        >>> is_noisy(0.3, 0.0), is_noisy(0.05, 0.1)
        (True, False)
    """
    t = get_noise_thresholds() if thresholds is None else thresholds
    return bool((cv is not None and cv > t.cv)
                or (foreign_load is not None and foreign_load > t.foreign_load))


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU counters at one moment: ``wall`` (monotonic seconds), ``busy`` (seconds the
    usable cores were busy, from ``/proc/stat``; None without it), ``own`` (this
    process's CPU seconds, all threads) and ``cores`` (how many cores ``busy`` covers)."""

    wall: float
    busy: float | None
    own: float
    cores: int


def _usable_cpus() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return None


def _ticks_per_second() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover
        return 100.0


def parse_proc_stat(text: str, cpus: Iterable[int] | None) -> tuple[int, int] | None:
    """(busy ticks, cores counted) of the ``cpuN`` lines of ``/proc/stat`` text for the
    CPUs ``cpus`` (all when None); None when no such line is there.

    Example:
        >>> text = "cpu  9 0 9 9 0 0 0 0\\ncpu0 10 1 4 50 3 0 1 0\\ncpu1 2 0 1 80 0 0 0 0\\n"
        >>> parse_proc_stat(text, {0}), parse_proc_stat(text, None)
        ((16, 1), (19, 2))
    """
    wanted = None if cpus is None else set(cpus)
    busy = cores = 0
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        try:
            index = int(name[3:])
            values = [int(f) for f in fields]
        except ValueError:
            continue
        if wanted is not None and index not in wanted:
            continue
        busy += sum(values[c] for c in _BUSY_COLUMNS if c < len(values))
        cores += 1
    return (busy, cores) if cores else None


def cpu_snapshot(proc_stat: str = PROC_STAT) -> CpuSnapshot:
    """The counters now (see :class:`CpuSnapshot`).

    Example:
        >>> s = cpu_snapshot()
        >>> s.own >= 0 and s.cores >= 1
        True
    """
    cpus = _usable_cpus()
    wall = time.monotonic()
    own = time.process_time()
    busy: float | None = None
    cores = len(cpus) if cpus else 1
    try:
        with open(proc_stat, encoding="ascii", errors="replace") as f:
            parsed = parse_proc_stat(f.read(), cpus)
    except OSError:
        parsed = None
    if parsed is not None:
        busy = parsed[0] / _ticks_per_second()
        cores = parsed[1]
    return CpuSnapshot(wall, busy, own, cores)


def foreign_load(before: CpuSnapshot, after: CpuSnapshot) -> float | None:
    """Fraction (0 to 1) of the usable cores' time between two snapshots that other
    processes used; None without ``/proc/stat`` or for a window under
    :data:`MIN_WINDOW_TICKS` ticks of capacity.

    Example:
        >>> a = CpuSnapshot(wall=0.0, busy=0.0, own=0.0, cores=2)
        >>> b = CpuSnapshot(wall=1.0, busy=1.6, own=0.9, cores=2)
        >>> round(foreign_load(a, b), 2)
        0.35
    """
    if before.busy is None or after.busy is None or after.cores != before.cores:
        return None
    wall = after.wall - before.wall
    capacity = wall * after.cores
    if capacity * _ticks_per_second() < MIN_WINDOW_TICKS:
        return None
    other = (after.busy - before.busy) - (after.own - before.own)
    return min(1.0, max(0.0, other / capacity))


def noise_note(m: Any) -> str:
    """``""`` for a quiet measurement, else a short mark to append to a printed figure:
    ``" [noisy: cv=0.23, other processes 45% CPU]"``. Works on anything with
    ``noisy``, ``cv`` and ``foreign_load`` (a Measurement, a tuning Trial).

    Example:
        >>> from workbench.runtime.timing import Measurement
        >>> noise_note(Measurement(samples=(1.0, 1.0), number=1, repeat=2))
        ''
        >>> noise_note(Measurement(samples=(1.0, 3.0), number=1, repeat=2))
        ' [noisy: cv=0.50]'
    """
    if not getattr(m, "noisy", False):
        return ""
    return f" [noisy: {describe_noise(m)}]"


def describe_noise(m: Any) -> str:
    """``"cv=0.23, other processes 45% CPU"`` (the load part only when known).

    Example:
        >>> from types import SimpleNamespace
        >>> describe_noise(SimpleNamespace(cv=0.05, foreign_load=0.5))
        'cv=0.05, other processes 50% CPU'
    """
    parts = []
    cv = getattr(m, "cv", None)
    if cv is not None:
        parts.append(f"cv={cv:.2f}")
    load = getattr(m, "foreign_load", None)
    if load is not None:
        parts.append(f"other processes {100 * load:.0f}% CPU")
    return ", ".join(parts)
