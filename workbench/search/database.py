"""The tuning database: every measured candidate, as JSON lines a person can read.

A :class:`Database` is a directory holding two append-only files, the same content as
MetaSchedule's ``JSONDatabase``:

``workloads.jsonl``
    one line per distinct function: ``{"hash": ..., "name": ..., "script": ...,
    "flops": ...}`` (the structural hash, the function's name, its printed text and its
    flop count, used for GFLOPS figures). A workload's *index* is its 0-based line
    number in this file.
``records.jsonl``
    one line per measured candidate: ``{"workload": index, "trace": [[insts],
    [decisions]], "run_secs": [seconds per repeat] or null, "status": "ok" | "timeout"
    | ..., "error": ..., "target": "c", "args_info": [[shape, dtype], ...], "created":
    ISO time}``, plus ``"estimated": true`` on a record whose ``run_secs`` is the GPU
    emulator's estimate (``wb.tune(..., estimate="emulator")``) rather than a
    measurement. Estimated and measured records are never mixed: ``query_best`` and
    ``best_record`` look at measured ones unless asked for ``estimated=True``.
    A measured record also carries its noise when known: ``"cv"``, ``"foreign_load"``
    and ``"noisy"`` (see ``Measurement``); records without them load as quiet.

Each line is appended with a single ``os.write`` on a file opened with ``O_APPEND``,
then ``fsync``: a kill mid-tune leaves at most one partial last line. Loading parses
JSON only (nothing is executed), within the bounds of :mod:`workbench.schedule.limits`
(a line of at most 8 MiB, nesting at most 64 deep, integers of at most 100 digits); a
corrupt line, or one past a bound, is skipped with a :class:`DatabaseWarning` naming the
file and the line, reported in :attr:`Database.problems` and counted in
:attr:`Database.skipped`: one bad line never makes the whole database unreadable. The
in-memory state is always what parsing the files gives: a commit appends the line, then
parses it back.

>>> import tempfile, workbench as wb
>>> from workbench.search import Database
>>> func = wb.workloads.matmul(16, 16, 16)
>>> sch = wb.Schedule(func)
>>> i, j, k = sch.get_loops(sch.get_block("C"))
>>> _ = sch.split(j, factors=[None, 4])
>>> with tempfile.TemporaryDirectory() as path:
...     db = Database(path)
...     m = wb.Measurement(samples=(2e-6, 3e-6, 2e-6), number=100, repeat=3)
...     _ = db.commit(func, sch.trace, m)
...     again = Database(path)                      # reopen: same content
...     best = again.query_best(func)
...     (len(again), again.has(func, sch.trace), best.trace.script() == sch.trace.script())
(1, True, True)
"""

from __future__ import annotations

import json
import math
import os
import statistics
import threading
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ..ir import IRModule, PrimFunc, structural_hash
from ..runtime.timing import Measurement
from ..schedule import Schedule, Trace, TraceError
from ..schedule.limits import UntrustedInputError, loads_json, trace_location

try:  # advisory locks keep workload indices consistent between processes (POSIX only)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = ["Database", "DatabaseWarning", "Record", "Workload", "decisions_summary"]

WORKLOADS_FILE = "workloads.jsonl"
RECORDS_FILE = "records.jsonl"
TABLE_COLUMNS = [
    "workload", "status", "median_ms", "gflops", "noisy", "decisions", "error", "target",
    "created", "estimated",
]
_SHORT_KIND = {"SamplePerfectTile": "tile", "SampleCategorical": "cat",
               "SampleComputeLocation": "loc"}


class DatabaseWarning(UserWarning):
    """Emitted once per load when corrupt lines were skipped (see ``Database.problems``)."""


class _Corrupt(Exception):
    """A line that cannot be used; the message says why."""


# ---------------------------------------------------------------------------
# rows


@dataclass(frozen=True)
class Workload:
    """One line of ``workloads.jsonl``: a function, by structural hash and printed text.

    >>> Workload(0, "c17792ed4877e76f", "matmul", "# ...", 8192).name
    'matmul'
    """

    index: int
    hash: str
    name: str
    script: str
    flops: int | None = None


@dataclass(frozen=True)
class Record:
    """One measured candidate (a line of ``records.jsonl``).

    ``workload`` is the index of its function in ``workloads.jsonl``; ``trace_json`` the
    trace in TVM's JSON shape; ``run_secs`` the seconds of each repeat (None when the
    candidate failed); ``status`` is ``"ok"`` or the failure (``"build_error"``,
    ``"run_error"``, ``"timeout"``, ``"crash"``) with ``error`` saying why;
    ``estimated``: ``run_secs`` is an emulator estimate, not a measurement; ``line``:
    its line number in ``records.jsonl`` when it was read from there (None otherwise);
    ``cv``, ``foreign_load``, ``noisy``: the measurement's noise (None/False when the
    line does not say).

    >>> r = Record(0, [[], []], (3e-6, 1e-6, 2e-6), "ok", "", "c", [], "")
    >>> r.median, r.ok
    (2e-06, True)
    """

    workload: int
    trace_json: list
    run_secs: tuple[float, ...] | None
    status: str
    error: str
    target: str
    args_info: list
    created: str
    estimated: bool = False
    line: int | None = field(default=None, compare=False)
    cv: float | None = None
    foreign_load: float | None = None
    noisy: bool = False

    @property
    def ok(self) -> bool:
        """Whether the candidate ran and was timed."""
        return self.status == "ok" and bool(self.run_secs)

    @property
    def median(self) -> float | None:
        """Median seconds per run over the repeats, None for a failed candidate."""
        if not self.ok:
            return None
        return float(statistics.median(self.run_secs))  # type: ignore[arg-type]

    @property
    def trace(self) -> Trace:
        """The trace, parsed (never executed); :class:`TraceError` if it is malformed."""
        return Trace.from_json(self.trace_json)

    @property
    def decisions(self) -> str:
        """Short text of the sampled decisions, e.g. ``"tile=[4,8,4] cat=2"``."""
        return decisions_summary(self.trace_json)


def decisions_summary(trace_json: Any) -> str:
    """The decisions of a trace's JSON as short text, for tables.

    >>> decisions_summary([[["SamplePerfectTile", ["l1"], [2, 16], ["v2", "v3"]]],
    ...                    [[0, [4, 4]]]])
    'tile=[4,4]'
    """
    if not (isinstance(trace_json, list) and len(trace_json) == 2):
        return ""
    insts, decisions = trace_json
    if not (isinstance(insts, list) and isinstance(decisions, list)):
        return ""
    parts = []
    for entry in decisions:
        if not (isinstance(entry, list) and len(entry) == 2):
            continue
        idx, value = entry
        kind = "?"
        if isinstance(idx, int) and 0 <= idx < len(insts) and isinstance(insts[idx], list):
            kind = insts[idx][0] if insts[idx] else "?"
        short = _SHORT_KIND.get(kind, str(kind))
        parts.append(f"{short}={json.dumps(value, separators=(',', ':'))}")
    return " ".join(parts)


# ---------------------------------------------------------------------------
# parsing one line (the only way rows come into memory)


def _check_type(obj: dict, key: str, types: type | tuple[type, ...], what: str) -> Any:
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, types):
        raise _Corrupt(f"field {key!r} must be {what}, got {json.dumps(value)[:60]}")
    return value


def _require(obj: Any, fields: Iterable[str]) -> None:
    if not isinstance(obj, dict):
        raise _Corrupt(f"expected a JSON object, got {type(obj).__name__}")
    missing = [f for f in fields if f not in obj]
    if missing:
        raise _Corrupt(f"missing field(s) {', '.join(missing)}")


def _parse_workload(index: int, obj: Any) -> Workload:
    _require(obj, ("hash", "name", "script"))
    for key in ("hash", "name", "script"):
        _check_type(obj, key, str, "a string")
    flops = obj.get("flops")
    if flops is not None and (isinstance(flops, bool) or not isinstance(flops, int)):
        raise _Corrupt(f"field 'flops' must be an integer or null, got {flops!r}")
    return Workload(index, obj["hash"], obj["name"], obj["script"], flops)


def _parse_record(obj: Any, workloads: dict[int, Workload], line: int | None = None) -> Record:
    _require(obj, ("workload", "trace", "run_secs", "status"))
    index = _check_type(obj, "workload", int, "an integer")
    if index not in workloads:
        raise _Corrupt(f"refers to workload {index}, which is not a valid line of "
                       f"{WORKLOADS_FILE}")
    trace = _check_type(obj, "trace", list, "a list [[instructions], [decisions]]")
    if not (1 <= len(trace) <= 2 and all(isinstance(x, list) for x in trace)):
        raise _Corrupt("field 'trace' must be [[instructions], [decisions]]")
    status = _check_type(obj, "status", str, "a string")
    if not status:
        raise _Corrupt("field 'status' is empty")
    run_secs = obj["run_secs"]
    if run_secs is not None:
        if not (isinstance(run_secs, list) and run_secs and all(
            isinstance(s, (int, float)) and not isinstance(s, bool)
            and math.isfinite(s) and s >= 0 for s in run_secs
        )):
            raise _Corrupt("field 'run_secs' must be null or a non-empty list of seconds >= 0")
        run_secs = tuple(float(s) for s in run_secs)
    elif status == "ok":
        raise _Corrupt("status 'ok' without run_secs")
    defaults = {"error": "", "target": "c", "args_info": [], "created": ""}
    for key, default in defaults.items():
        obj.setdefault(key, default)
        _check_type(obj, key, type(default), "a list" if key == "args_info" else "a string")
    for arg in obj["args_info"]:
        if not (isinstance(arg, list) and len(arg) == 2 and isinstance(arg[0], list)
                and all(isinstance(d, int) for d in arg[0]) and isinstance(arg[1], str)):
            raise _Corrupt("field 'args_info' must be a list of [shape, dtype]")
    estimated = obj.get("estimated", False)
    if not isinstance(estimated, bool):
        raise _Corrupt(f"field 'estimated' must be true or false, got {estimated!r}")
    cv, load, noisy = _noise(obj)
    return Record(index, trace, run_secs, status, obj["error"], obj["target"],
                  obj["args_info"], obj["created"], estimated, line, cv=cv,
                  foreign_load=load, noisy=noisy)


def _noise(obj: dict) -> tuple[float | None, float | None, bool]:
    """(cv, foreign_load, noisy) of a record line; absent fields are None/False."""
    out: list[Any] = []
    for key in ("cv", "foreign_load"):
        value = obj.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            raise _Corrupt(f"field {key!r} must be null or a number >= 0, got {value!r}")
        out.append(None if value is None else float(value))
    noisy = obj.get("noisy", False)
    if not isinstance(noisy, bool):
        raise _Corrupt(f"field 'noisy' must be true or false, got {noisy!r}")
    return out[0], out[1], noisy


def _read_lines(path: Path) -> list[tuple[int, bytes, bool]]:
    """(1-based line number, bytes, ends with a newline) for every line of ``path``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    chunks = data.split(b"\n")
    last = chunks.pop()  # b"" when the file ends with a newline
    lines = [(n + 1, c, True) for n, c in enumerate(chunks)]
    if last:
        lines.append((len(chunks) + 1, last, False))
    return lines


def _decode(raw: bytes, complete: bool) -> Any:
    """The JSON value of one line (within the bounds of
    :mod:`workbench.schedule.limits`), or :class:`_Corrupt`."""
    try:
        return loads_json(raw)
    except UntrustedInputError as e:
        where = trace_location(e.path[1:]) if e.path[:1] == ("trace",) else ""
        reason = f"{e}{' in field trace, ' + where if where else ''}"
    if not complete:
        reason = f"partial last line (an interrupted write?): {reason}"
    raise _Corrupt(reason)


# ---------------------------------------------------------------------------
# appending


def _append_line(path: Path, line: str, *, fd: int | None = None) -> None:
    """Append ``line`` + newline with one ``os.write`` (O_APPEND), then fsync.

    If the file does not end with a newline (a write was cut off), a newline goes
    first, so the broken line stays one corrupt line and this one stays whole.
    ``fd``: an already open (``O_RDWR | O_APPEND``) descriptor of ``path`` to use."""
    own = fd is None
    if fd is None:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        data = (line + "\n").encode("utf-8")
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        written = os.write(fd, data)
        while written < len(data):  # short writes are rare on regular files
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        if own:
            os.close(fd)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _as_func(func: PrimFunc | IRModule) -> PrimFunc:
    if isinstance(func, IRModule):
        if len(func) != 1:
            raise ValueError(f"Database: a workload is one function; the module has "
                             f"{func.names} (pass mod[name])")
        return func[func.names[0]]
    if not isinstance(func, PrimFunc):
        raise TypeError(f"Database: expected a PrimFunc or IRModule, got {type(func).__name__}")
    return func


def _trace_obj(trace: Trace | list | str) -> list:
    """Canonical JSON object of a trace (parsed and re-serialised, so equal traces are
    written identically whatever form they came in)."""
    if isinstance(trace, Schedule):
        trace = trace.trace
    if not isinstance(trace, Trace):
        if not isinstance(trace, (list, str)):
            raise TypeError(f"Database: expected a Trace or its JSON, got {type(trace).__name__}")
        trace = Trace.from_json(trace)
    return json.loads(json.dumps(trace.as_json_obj()))


def _canonical(trace_json: list) -> str:
    return json.dumps(trace_json, sort_keys=True, separators=(",", ":"))


def _result_fields(result: Any) -> tuple[str, list[float] | None, str]:
    """(status, run_secs, error) of a RunResult, or of a Measurement (status "ok")."""
    if isinstance(result, Measurement):
        result = SimpleNamespace(status="ok", measurement=result, error="")
    status = getattr(result, "status", None)
    if not isinstance(status, str) or not status:
        raise TypeError(f"Database.commit: expected a RunResult or Measurement, got "
                        f"{type(result).__name__}")
    measurement = getattr(result, "measurement", None)
    error = str(getattr(result, "error", "") or "")
    if measurement is None:
        if status == "ok":
            raise ValueError("Database.commit: an 'ok' result needs its measurement")
        return status, None, error
    run_secs = [float(s) for s in measurement.samples]
    if not all(math.isfinite(s) and s >= 0 for s in run_secs):
        raise ValueError(f"Database.commit: run times must be finite seconds >= 0, got {run_secs}")
    return status, run_secs, error


# ---------------------------------------------------------------------------
# the database


class Database:
    """Append-only tuning records in a directory (created if missing).

    ``problems`` lists every line the last load skipped, as ``"records.jsonl line 17:
    <reason>"`` (line numbers from 1), and ``skipped`` counts them. ``reload()`` picks up
    other processes' appends.

    >>> import tempfile, workbench as wb
    >>> func = wb.workloads.matmul(16, 16, 16)
    >>> with tempfile.TemporaryDirectory() as path:
    ...     db = Database(path)
    ...     _ = db.commit(func, wb.Schedule(func).trace,
    ...                   wb.Measurement(samples=(1e-6,), number=1, repeat=1))
    ...     list(db.table().columns)[-3:]
    ['target', 'created', 'estimated']
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise NotADirectoryError(
                f"Database: {self.path} is a file; a database is a directory holding "
                f"{WORKLOADS_FILE} and {RECORDS_FILE}")
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._keys: dict[int, tuple[PrimFunc, tuple[str, str]]] = {}
        self._warned: set[str] = set()
        self._load()

    @property
    def workloads_path(self) -> Path:
        return self.path / WORKLOADS_FILE

    @property
    def records_path(self) -> Path:
        return self.path / RECORDS_FILE

    # ------------------------------------------------------------------ loading
    def reload(self) -> None:
        """Re-read both files (picking up what other processes appended).

        Corrupt lines are skipped and listed in :attr:`problems`; a
        :class:`DatabaseWarning` names the ones not reported before."""
        self._load()

    def _load(self) -> None:
        with self._lock:
            self._workloads: dict[int, Workload] = {}
            self._by_key: dict[tuple[str, str], list[int]] = {}
            self._records: list[Record] = []
            self._seen: dict[int, set[str]] = {}
            self.problems: list[str] = []
            # records first: a record is written after its workload, so every workload
            # a record read here names is in the workloads read just after
            record_lines = _read_lines(self.records_path)
            for number, raw, complete in _read_lines(self.workloads_path):
                if not raw.strip():
                    continue
                try:
                    self._add_workload(_parse_workload(number - 1, _decode(raw, complete)))
                except _Corrupt as e:
                    self.problems.append(f"{WORKLOADS_FILE} line {number}: {e}")
            for number, raw, complete in record_lines:
                if not raw.strip():
                    continue
                try:
                    self._add_record(_parse_record(_decode(raw, complete), self._workloads,
                                                   number))
                except _Corrupt as e:
                    self.problems.append(f"{RECORDS_FILE} line {number}: {e}")
            new = [p for p in self.problems if p not in self._warned]
            if new:
                self._warned.update(new)
                shown = "; ".join(new[:3]) + (f"; and {len(new) - 3} more" if len(new) > 3 else "")
                warnings.warn(f"tuning database {self.path}: skipped {len(new)} corrupt "
                              f"line(s): {shown} (see Database.problems)", DatabaseWarning,
                              stacklevel=3)

    @property
    def skipped(self) -> int:
        """How many lines (of both files) the last load skipped as corrupt; see
        :attr:`problems` for which and why.

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as path:
        ...     Database(path).skipped
        0
        """
        return len(self.problems)

    def _add_workload(self, w: Workload) -> None:
        self._workloads[w.index] = w
        self._by_key.setdefault((w.hash, w.script), []).append(w.index)

    def _add_record(self, r: Record) -> None:
        self._records.append(r)
        self._seen.setdefault(r.workload, set()).add(_canonical(r.trace_json))

    # ------------------------------------------------------------------ lookup
    def _key(self, func: PrimFunc) -> tuple[str, str]:
        cached = self._keys.get(id(func))
        if cached is not None and cached[0] is func:
            return cached[1]
        key = (structural_hash(func), func.script())
        if len(self._keys) > 16:
            self._keys.clear()
        self._keys[id(func)] = (func, key)
        return key

    def _indices(self, func: PrimFunc | IRModule) -> list[int]:
        return self._by_key.get(self._key(_as_func(func)), [])

    def _ensure_workload(self, func: PrimFunc) -> int:
        """Index of ``func``'s workload, appending it (under a file lock) if new."""
        key = self._key(func)
        if key in self._by_key:
            return self._by_key[key][0]
        fd = os.open(self.workloads_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            self._load()  # another process may have added it (or other lines) meanwhile
            if key in self._by_key:
                return self._by_key[key][0]
            # the index is the 0-based line number; a cut-off last line keeps its own
            # (a newline is written before ours), so ours is the line count either way
            lines = _read_lines(self.workloads_path)
            index = lines[-1][0] if lines else 0
            try:
                from ..runtime.flops import flop_count

                flops: int | None = int(flop_count(func))
            except Exception:  # noqa: BLE001 - GFLOPS are optional; the record is not
                flops = None
            obj = {"hash": key[0], "name": func.name, "script": key[1], "flops": flops}
            line = json.dumps(obj)
            _append_line(self.workloads_path, line, fd=fd)
            self._add_workload(_parse_workload(index, json.loads(line)))
            return index
        finally:
            os.close(fd)  # releases the lock

    # ------------------------------------------------------------------ public API
    def commit(self, func: PrimFunc | IRModule, trace: Trace | list | str, result: Any,
               target: str = "c", estimated: bool = False) -> Record:
        """Append one measured candidate (and its workload, the first time) and return
        its :class:`Record`. ``result`` is a ``RunResult`` (``status``, ``measurement``,
        ``error``) or a :class:`Measurement` (a successful run); ``estimated=True``
        marks its times as an emulator estimate.

        >>> import tempfile, workbench as wb
        >>> from types import SimpleNamespace
        >>> func = wb.workloads.matmul(16, 16, 16)
        >>> with tempfile.TemporaryDirectory() as path:
        ...     crash = SimpleNamespace(status="crash", measurement=None, error="SIGSEGV")
        ...     r = Database(path).commit(func, wb.Schedule(func).trace, crash)
        ...     (r.status, r.run_secs, r.median, r.error)
        ('crash', None, None, 'SIGSEGV')
        """
        f = _as_func(func)
        trace_json = _trace_obj(trace)
        status, run_secs, error = _result_fields(result)
        if not isinstance(target, str) or not target:
            raise ValueError(f"Database.commit: target must be a non-empty string, got {target!r}")
        with self._lock:
            index = self._ensure_workload(f)
            obj = {
                "workload": index,
                "trace": trace_json,
                "run_secs": run_secs,
                "status": status,
                "error": error,
                "target": target,
                "args_info": [[list(p.shape), p.dtype] for p in f.params],
                "created": _now(),
            }
            if estimated:
                obj["estimated"] = True
            measurement = getattr(result, "measurement", result)
            if not estimated and isinstance(measurement, Measurement):
                obj.update(cv=measurement.cv, foreign_load=measurement.foreign_load,
                           noisy=measurement.noisy)
            line = json.dumps(obj, allow_nan=False)
            _append_line(self.records_path, line)
            record = _parse_record(json.loads(line), self._workloads)
            self._add_record(record)
            return record

    def has(self, func: PrimFunc | IRModule, trace: Trace | list | str) -> bool:
        """Whether this exact trace (same JSON) was already recorded for ``func``'s
        workload, by this process or one before it (``tune`` skips such candidates).

        >>> import tempfile, workbench as wb
        >>> func = wb.workloads.matmul(16, 16, 16)
        >>> with tempfile.TemporaryDirectory() as path:
        ...     Database(path).has(func, wb.Schedule(func).trace)
        False
        """
        with self._lock:
            indices = self._indices(func)
            if not indices:
                return False
            key = _canonical(_trace_obj(trace))
            return any(key in self._seen.get(i, ()) for i in indices)

    def records(self, func: PrimFunc | IRModule | None = None) -> list[Record]:
        """All records in file order, or those of ``func``'s workload.

        >>> import tempfile, workbench as wb
        >>> with tempfile.TemporaryDirectory() as path:
        ...     Database(path).records(wb.workloads.matmul(8, 8, 8))
        []
        """
        with self._lock:
            if func is None:
                return list(self._records)
            indices = set(self._indices(func))
            return [r for r in self._records if r.workload in indices]

    def best_record(self, func: PrimFunc | IRModule, target: str | None = None,
                    estimated: bool = False) -> Record | None:
        """The successful record of ``func`` with the lowest median time (the first such,
        on ties), optionally only for ``target``; None when there is none. Only measured
        records count, or with ``estimated=True`` only emulator-estimated ones.

        >>> import tempfile, workbench as wb
        >>> with tempfile.TemporaryDirectory() as path:
        ...     Database(path).best_record(wb.workloads.matmul(8, 8, 8)) is None
        True
        """
        ok = [r for r in self.records(func) if r.ok and (target is None or r.target == target)
              and r.estimated == bool(estimated)]
        return min(ok, key=lambda r: r.median) if ok else None  # type: ignore[arg-type,return-value]

    def query_best(self, func: PrimFunc | IRModule, target: str | None = None,
                   estimated: bool = False) -> Schedule | None:
        """A fresh ``Schedule(func)`` with the best record's trace replayed, or None.
        Measured records only; ``estimated=True``: emulator-estimated ones only.

        A record whose trace this version cannot read (an unknown instruction, a
        malformed step) is passed over for the next best, with a
        :class:`DatabaseWarning` naming its line. Raises :class:`TraceError` (naming the
        step) if the best readable trace does not replay on ``func``; a stored trace is
        data, never executed.

        >>> import tempfile, workbench as wb
        >>> with tempfile.TemporaryDirectory() as path:
        ...     Database(path).query_best(wb.workloads.matmul(8, 8, 8)) is None
        True
        """
        ok = [r for r in self.records(func) if r.ok and (target is None or r.target == target)
              and r.estimated == bool(estimated)]
        ok.sort(key=lambda r: r.median)  # type: ignore[arg-type,return-value]  # stable
        for record in ok:
            try:
                trace = record.trace
            except TraceError as e:
                where = f"{RECORDS_FILE} line {record.line}" if record.line else "a record"
                warnings.warn(f"tuning database {self.path}: {where} passed over, its trace "
                              f"cannot be read: {e}", DatabaseWarning, stacklevel=2)
                continue
            sch = Schedule(func)
            trace.apply_to_schedule(sch)
            return sch
        return None

    def export_schedule(
        self,
        what: PrimFunc | IRModule | Record | int,
        path: str | os.PathLike,
        *,
        target: str | None = None,
        note: str | None = None,
    ) -> Path:
        """Write one record as a self-contained schedule file (``wb.load_schedule``).

        ``what`` is a function (its best record, optionally for ``target``), a
        :class:`Record`, or a record's position in :meth:`records`. The unscheduled
        function comes from ``what`` when it is a function, otherwise from the
        workload's stored TVMScript (parsed, never executed). The record's timing goes
        into the file's ``measurement``. Raises ``LookupError`` when there is no such
        record and :class:`TraceError` when its trace does not replay.

        >>> import tempfile, os, workbench as wb
        >>> func = wb.workloads.matmul(16, 16, 16)
        >>> sch = wb.Schedule(func)
        >>> _ = sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 4])
        >>> with tempfile.TemporaryDirectory() as d:
        ...     db = Database(d)
        ...     _ = db.commit(func, sch.trace, wb.Measurement(samples=(1e-6,), number=1, repeat=1))
        ...     p = db.export_schedule(0, os.path.join(d, "best.json"))
        ...     wb.structural_equal(wb.load_schedule(p).mod, sch.mod)
        True
        """
        from ..schedule.file import make_schedule_file

        func: PrimFunc | None = None
        if isinstance(what, (PrimFunc, IRModule)):
            func = _as_func(what)
            record = self.best_record(func, target)
            if record is None:
                raise LookupError(f"the database has no successful record of {func.name!r}")
        elif isinstance(what, Record):
            record = what
        elif isinstance(what, int) and not isinstance(what, bool):
            records = self.records()
            if not -len(records) <= what < len(records):
                raise LookupError(f"no record {what}: the database has {len(records)}")
            record = records[what]
        else:
            raise TypeError(f"export_schedule: expected a function, a Record or an index, "
                            f"got {type(what).__name__}")
        if func is None:
            from ..script import from_script

            with self._lock:
                workload = self._workloads[record.workload]
            func = _as_func(from_script(workload.script))
        sch = Schedule(func)
        record.trace.apply_to_schedule(sch)
        measurement = None
        if record.ok:
            secs = record.run_secs or ()
            measurement = {"median": record.median, "min": min(secs), "repeat": len(secs)}
        sf = make_schedule_file(
            func, sch.trace, target=record.target or None, result_hash=structural_hash(sch.mod),
            measurement=measurement,
            note=note if note is not None else f"tuning record ({record.status}, "
                                               f"{record.created or 'no date'})",
        )
        return sf.write(path)

    def table(self, func: PrimFunc | IRModule | None = None) -> pandas.DataFrame:
        """The records (all, or ``func``'s) as a DataFrame, one row per candidate in file
        order: workload name, status, median latency in ms, GFLOPS (when the workload's
        flop count is known), whether the measurement was noisy, decisions, error, target,
        creation time, estimated.

        >>> import tempfile, workbench as wb
        >>> with tempfile.TemporaryDirectory() as path:
        ...     len(Database(path).table())
        0
        """
        import pandas as pd

        from .._frame import full_table

        rows = []
        extra_flops = None
        if func is not None:
            from ..runtime.flops import flop_count

            extra_flops = flop_count(_as_func(func))
        with self._lock:
            for r in self.records(func):
                w = self._workloads[r.workload]
                flops = w.flops if w.flops is not None else extra_flops
                median = r.median
                gflops = flops / median / 1e9 if (flops is not None and median) else None
                rows.append({
                    "workload": w.name,
                    "status": r.status,
                    "median_ms": None if median is None else median * 1e3,
                    "gflops": gflops,
                    "noisy": r.noisy,
                    "decisions": r.decisions,
                    "error": r.error,
                    "target": r.target,
                    "created": r.created,
                    "estimated": r.estimated,
                })
        df = pd.DataFrame(rows, columns=TABLE_COLUMNS)
        return full_table(df.astype({"median_ms": "float64", "gflops": "float64"}))

    @property
    def workloads(self) -> list[Workload]:
        """The valid workload lines, in file order."""
        with self._lock:
            return [self._workloads[i] for i in sorted(self._workloads)]

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return (f"Database({str(self.path)!r}, {len(self._workloads)} workloads, "
                f"{len(self._records)} records, {len(self.problems)} problems)")
