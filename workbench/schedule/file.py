"""Self-contained schedule files: the unscheduled function, the trace, and metadata.

A saved trace alone is only half a schedule: it needs the function it applies to. A
schedule file (``.json``) carries both, so it opens anywhere (another machine, another
notebook, TVM itself):

.. code-block:: text

    {
      "format": "workbench-schedule",      fixed marker
      "version": 1,                        file format version
      "workbench": "0.1.0",                the writer's version
      "created": "2026-11-23T10:00:00+00:00",
      "target": "c",                       what it was built/measured for, or null
      "func_name": "mm_relu",              the function the trace works on (modules)
      "syntax": "tirx",                    syntax of "module" and of the trace kinds
      "module": "# from tvm.script ...",   the unscheduled IRModule as TVMScript
      "trace": [[insts], [decisions]],     TVM's trace JSON
      "result_hash": "3f2a...",            structural hash of the scheduled module
      "measurement": {...} or null,        optional: median/min seconds, GFLOPS
      "note": "..." or null,               optional free text
      "steps": {...}                       optional: each step's IR, for viewers
    }

``"steps"`` lets a viewer without a kernel (the JupyterLab extension) show the IR
after every instruction. It is written when the texts fit (see :data:`MAX_STEPS_BYTES`)
and left out otherwise; loading never reads it (the trace is replayed instead), so a
file edited by hand cannot make the workbench believe anything:

.. code-block:: text

    "steps": {
      "syntax": "tirx",                    same syntax as "module"
      "start": "@T.prim_func ...",         the unscheduled function, printed
      "items": [                           one per trace instruction, in order
        {"instruction": "l4, l5 = sch.split(loop=l2, factors=[None, 4], ...)",
         "kind": "Split",                  the instruction kind (TVM's name)
         "ir": "@T.prim_func ..."},        the function after this instruction
        ...
      ]
    }

An instruction that only looks something up (``get_block``, ``get_loops``...) or
samples a decision repeats the previous IR. The function printed is the one the trace
works on (``"func_name"``), without the module around it.

The module is written in TVM >= 0.24 syntax and the trace with TVM >= 0.24 kind names,
so TVM 0.27 parses the text (``tvm.script.from_source``) and replays the trace
(``tvm.s_tir.Trace``) unchanged. Loading parses JSON and TVMScript as data only (Python's
``json`` and ``ast``): nothing in a file is ever executed.

>>> import tempfile, os, workbench as wb
>>> sch = wb.Schedule(wb.workloads.mm_relu(64, 64, 64))
>>> i, j, k = sch.get_loops(sch.get_block("Y"))
>>> j0, j1 = sch.split(j, factors=[None, 8])
>>> with tempfile.TemporaryDirectory() as d:
...     path = sch.save(os.path.join(d, "mm_relu.json"), target="c")
...     again = wb.load_schedule(path)
>>> wb.structural_equal(again.mod, sch.mod), len(again.trace)
(True, 3)
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..ir import IRModule, PrimFunc, structural_hash
from ..ir.analysis import as_module
from .limits import (
    MAX_TEXT_BYTES,
    UntrustedInputError,
    check_json_value,
    decode_text,
    loads_json,
    read_text,
    trace_location,
)
from .trace import ALIASES, Trace, TraceError

if TYPE_CHECKING:  # pragma: no cover
    from .schedule import Schedule

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "LOOKUP_KINDS",
    "MAX_STEPS_BYTES",
    "extern_calls",
    "ScheduleFile",
    "ScheduleFileError",
    "is_schedule_file",
    "load_schedule",
    "read_schedule_file",
    "read_trace_source",
    "read_trace_text",
    "save_schedule",
]

FORMAT = "workbench-schedule"
FORMAT_VERSION = 1
_SYNTAXES = ("classic", "tirx")
#: The "steps" key is left out when its texts (the start function, each instruction and
#: each step's IR) would together be larger than this, so a schedule file stays well
#: within the size a document may have (``limits.MAX_TEXT_BYTES``, 8 MiB).
MAX_STEPS_BYTES = 4 * 2**20


class ScheduleFileError(ValueError):
    """A schedule file that cannot be read: names the file and the field at fault."""

    def __init__(self, where: str, message: str):
        self.where = where
        super().__init__(f"schedule file {where}: {message}")


def _version() -> str:
    from .. import __version__

    return __version__


@dataclass(frozen=True)
class ScheduleFile:
    """The parsed content of a schedule file (nothing replayed yet).

    ``module`` is the unscheduled TVMScript text, ``trace`` a :class:`Trace`. Call
    :meth:`schedule` to parse the module and replay the trace.
    """

    module: str
    trace: Trace
    func_name: str | None = None
    target: str | None = None
    syntax: str = "tirx"
    workbench: str = ""
    created: str = ""
    result_hash: str | None = None
    measurement: dict | None = None
    note: str | None = None
    path: Path | None = field(default=None, compare=False)
    #: Each step's IR for viewers (see the module docstring); written, never read back.
    steps: dict | None = field(default=None, compare=False, repr=False)

    def original(self, *, allow_extern: bool = False) -> IRModule:
        """The unscheduled module, parsed from the file's TVMScript text.

        A module that calls external C functions (``T.call_extern``) would run them
        when built, so it is refused unless ``allow_extern=True`` (trust the file).
        """
        from ..script import from_script

        where = str(self.path) if self.path else "<text>"
        try:
            parsed = from_script(self.module)
        except ValueError as e:
            raise ScheduleFileError(where, f'field "module" does not parse: {e}') from None
        mod = as_module(parsed)
        if not allow_extern:
            names = extern_calls(mod)
            if names:
                raise ScheduleFileError(
                    where, f"the module calls external functions {names}, which would run "
                           "as native code when built; load with allow_extern=True only if "
                           "you trust the file")
        return mod

    def schedule(self, *, check: bool = True, allow_extern: bool = False) -> Schedule:
        """Parse the module and replay the trace on it (all or nothing).

        With ``check=True`` the replayed module's structural hash must equal the one
        recorded when the file was written; a mismatch (a file edited by hand, or a
        version that schedules differently) raises :class:`ScheduleFileError`.
        """
        from .schedule import Schedule

        where = str(self.path) if self.path else "<text>"
        mod = self.original(allow_extern=allow_extern)
        sch = Schedule(mod)
        if self.func_name is not None:
            if self.func_name not in mod:
                raise ScheduleFileError(
                    where, f"func_name {self.func_name!r} is not in the module ({mod.names})")
            sch.work_on(self.func_name)
        try:
            self.trace.apply_to_schedule(sch)
        except TraceError as e:
            raise ScheduleFileError(where, f"the trace does not replay: {e}") from None
        if check and self.result_hash is not None:
            got = structural_hash(sch.mod)
            if got != self.result_hash:
                raise ScheduleFileError(
                    where,
                    f"replaying the trace gives a different module (hash {got}, the file "
                    f"records {self.result_hash}; written by workbench {self.workbench or '?'})"
                    "; load with check=False to accept it",
                )
        return sch

    def as_dict(self) -> dict[str, Any]:
        """The JSON object written to disk."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "workbench": self.workbench,
            "created": self.created,
            "target": self.target,
            "func_name": self.func_name,
            "syntax": self.syntax,
            "module": self.module,
            "trace": self.trace.as_json_obj(syntax=self.syntax),
            "result_hash": self.result_hash,
            "measurement": self.measurement,
            "note": self.note,
            **({"steps": self.steps} if self.steps is not None else {}),
        }

    def write(self, path: str | os.PathLike) -> Path:
        """Write atomically (a temporary file renamed over ``path``; a target that is not
        a regular file is refused, a link written through: see
        :func:`workbench.schedule.atomic.write_text_atomic`); returns the path."""
        from .atomic import write_text_atomic

        path = Path(path)
        write_text_atomic(path, self.dumps(), "save_schedule")
        return path

    def dumps(self) -> str:
        """The file's text (what :meth:`write` writes). The ``"steps"`` key is left out
        when the file would otherwise be too large to load again (``MAX_TEXT_BYTES``)."""
        data = self.as_dict()
        text = json.dumps(data, indent=1) + "\n"
        if "steps" in data and len(text.encode("utf-8")) > MAX_TEXT_BYTES:
            del data["steps"]
            text = json.dumps(data, indent=1) + "\n"
        return text


def _measurement_dict(m: Any) -> dict | None:
    if m is None:
        return None
    if isinstance(m, dict):
        return {str(k): v for k, v in m.items() if isinstance(v, (int, float, str, bool))}
    out: dict[str, Any] = {}
    for key in ("median", "mean", "min", "max", "std", "gflops", "number", "repeat"):
        v = getattr(m, key, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = v
    return out or None


def make_schedule_file(
    original: PrimFunc | IRModule,
    trace: Trace,
    *,
    func_name: str | None = None,
    target: str | None = None,
    result_hash: str | None = None,
    measurement: Any = None,
    note: str | None = None,
    syntax: str = "tirx",
    with_steps: bool = True,
) -> ScheduleFile:
    """A :class:`ScheduleFile` for ``trace`` applied to ``original`` (not yet written).

    With ``with_steps`` (the default) it carries each step's IR for viewers (the
    ``"steps"`` key, see :func:`steps_record`) when that fits in :data:`MAX_STEPS_BYTES`.
    """
    if syntax not in _SYNTAXES:
        raise ValueError(f"unknown syntax {syntax!r}; choose one of {_SYNTAXES}")
    mod = as_module(original)
    if func_name is None and len(mod) == 1:
        func_name = mod.names[0]
    steps = steps_record(mod, trace, func_name=func_name, syntax=syntax) if with_steps else None
    return ScheduleFile(
        module=mod.script(syntax=syntax),
        trace=trace,
        func_name=func_name,
        target=target,
        syntax=syntax,
        workbench=_version(),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        result_hash=result_hash,
        measurement=_measurement_dict(measurement),
        note=note,
        steps=steps,
    )


#: Instruction kinds that only look things up (they never change the IR): their step
#: repeats the previous IR.
LOOKUP_KINDS = frozenset({"GetBlock", "GetLoops", "GetChildBlocks", "GetProducers",
                          "GetConsumers"})


def steps_record(original: PrimFunc | IRModule, trace: Trace, *, func_name: str | None = None,
                 syntax: str = "tirx",
                 max_bytes: int | None = None) -> dict[str, Any] | None:
    """The ``"steps"`` value of a schedule file: ``trace`` replayed on ``original``, the
    function printed before and after every instruction (see the module docstring).

    None when the texts together would be larger than ``max_bytes`` (by default
    :data:`MAX_STEPS_BYTES`) or the trace does not replay (a viewer then lists the
    instructions without their IR).

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    >>> j0, j1 = sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 4])
    >>> steps = steps_record(wb.workloads.matmul(16, 16, 16), sch.trace)
    >>> [item["kind"] for item in steps["items"]]
    ['GetSBlock', 'GetLoops', 'Split']
    >>> steps["items"][1]["ir"] == steps["start"], "T.grid(16, 4, 4, 16)" in steps["items"][2]["ir"]
    (True, True)
    """
    from .schedule import Schedule

    if syntax not in _SYNTAXES:
        raise ValueError(f"unknown syntax {syntax!r}; choose one of {_SYNTAXES}")
    mod = as_module(original)
    sch = Schedule(mod)
    if func_name is not None and len(mod) > 1:
        sch.work_on(func_name)
    lines = trace.lines(syntax)
    rename = {v: k for k, v in ALIASES.items()} if syntax == "tirx" else {}
    budget = MAX_STEPS_BYTES if max_bytes is None else max_bytes

    def spend(text: str) -> bool:
        nonlocal budget
        budget -= len(text.encode("utf-8"))
        return budget >= 0

    try:
        func = sch.func
        current = func.script(syntax=syntax)
        start = current
        if not spend(start):
            return None
        items: list[dict[str, str]] = []
        for index in trace.replay_iter(sch):
            inst = trace.insts[index]
            after = sch.func
            if after is not func and inst.kind not in LOOKUP_KINDS and not inst.spec.sampling:
                current = after.script(syntax=syntax)
            func = after
            kind = rename.get(inst.kind, inst.kind)
            item = {"instruction": lines[index], "kind": kind, "ir": current}
            if not (spend(item["instruction"]) and spend(kind) and spend(current)):
                return None
            items.append(item)
    except (TraceError, ValueError):
        return None
    return {"syntax": syntax, "start": start, "items": items}


def save_schedule(
    sch: Schedule,
    path: str | os.PathLike,
    *,
    target: str | None = None,
    measurement: Any = None,
    note: str | None = None,
    syntax: str = "tirx",
) -> Path:
    """Write ``sch`` (its unscheduled module, its trace, metadata) to ``path``.

    Same as ``sch.save(path, ...)``; returns the path written.
    """
    sf = make_schedule_file(
        sch.original,
        sch.trace,
        func_name=sch._func_name,
        target=target,
        result_hash=structural_hash(sch.mod),
        measurement=measurement,
        note=note,
        syntax=syntax,
    )
    return sf.write(path)


def _field(obj: dict, key: str, types: type | tuple[type, ...], where: str,
           required: bool = True) -> Any:
    if key not in obj:
        if required:
            raise ScheduleFileError(where, f'missing field "{key}"')
        return None
    value = obj[key]
    if value is None and not required:
        return None
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        names = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise ScheduleFileError(
            where, f'field "{key}" must be {names}, got {type(value).__name__}')
    return value


def _limit_error(where: str, e: UntrustedInputError) -> ScheduleFileError:
    """A :class:`ScheduleFileError` for input past the bounds, naming the field (and the
    trace step) at fault."""
    field_name = e.path[0] if e.path and isinstance(e.path[0], str) else None
    if field_name is None:
        return ScheduleFileError(where, str(e))
    step = trace_location(e.path[1:]) if field_name == "trace" else ""
    return ScheduleFileError(where, f'field "{field_name}"{", " + step if step else ""}: {e}')


def parse_schedule_file(data: str | bytes | dict, where: str = "<text>") -> ScheduleFile:
    """Read a schedule file's JSON (text or the decoded object) without replaying it.

    Text past the bounds of :mod:`workbench.schedule.limits` (size, nesting, integer
    digits), or bytes that are not UTF-8, raise :class:`ScheduleFileError` naming the
    field and, in the trace, the step.

    >>> try:
    ...     parse_schedule_file('{"format": "workbench-schedule", "version": 1, '
    ...                         '"module": "", "trace": [[["GetBlock", [], ' + "[" * 80)
    ... except ScheduleFileError as e:
    ...     print(e)
    schedule file <text>: field "trace", step 0: nested deeper than 64 levels (line 1, column 150)
    """
    try:
        if isinstance(data, (str, bytes, bytearray)):
            data = loads_json(data)
        elif isinstance(data, dict):
            check_json_value(data)
    except UntrustedInputError as e:
        raise _limit_error(where, e) from None
    if isinstance(data, list):
        raise ScheduleFileError(where, "not a schedule file but a JSON list (a bare trace "
                                       "loads with wb.Trace.load)")
    if not isinstance(data, dict):
        raise ScheduleFileError(where, "expected a JSON object")
    if data.get("format") != FORMAT:
        raise ScheduleFileError(
            where, f'not a schedule file (field "format" is {data.get("format")!r}, '
                   f"expected {FORMAT!r}); a bare trace loads with wb.Trace.load")
    version = _field(data, "version", int, where)
    if version > FORMAT_VERSION:
        raise ScheduleFileError(
            where, f"format version {version} is newer than this workbench reads "
                   f"({FORMAT_VERSION}); update the workbench")
    syntax = _field(data, "syntax", str, where, required=False) or "tirx"
    if syntax not in _SYNTAXES:
        raise ScheduleFileError(where, f'field "syntax" must be one of {_SYNTAXES}')
    module = _field(data, "module", str, where)
    raw_trace = _field(data, "trace", list, where)
    try:
        trace = Trace.from_json(raw_trace)
    except TraceError as e:
        raise ScheduleFileError(where, f'field "trace": {e}') from None
    measurement = _field(data, "measurement", dict, where, required=False)
    return ScheduleFile(
        module=module,
        trace=trace,
        func_name=_field(data, "func_name", str, where, required=False),
        target=_field(data, "target", str, where, required=False),
        syntax=syntax,
        workbench=_field(data, "workbench", str, where, required=False) or "",
        created=_field(data, "created", str, where, required=False) or "",
        result_hash=_field(data, "result_hash", str, where, required=False),
        measurement=_measurement_dict(measurement),
        note=_field(data, "note", str, where, required=False),
    )


def read_schedule_file(path: str | os.PathLike) -> ScheduleFile:
    """Read a schedule file from disk without replaying it (see :meth:`ScheduleFile.schedule`).

    >>> import workbench as wb
    >>> wb.schedule.file.is_schedule_file("no_such_file.json")
    False
    """
    path = Path(path)
    try:
        text = read_text(path)
    except FileNotFoundError:
        raise ScheduleFileError(str(path), "no such file") from None
    except OSError as e:
        raise ScheduleFileError(str(path), f"cannot be read: {e.strerror or e}") from None
    except UntrustedInputError as e:
        raise ScheduleFileError(str(path), str(e)) from None
    sf = parse_schedule_file(text, where=str(path))
    return ScheduleFile(**{**sf.__dict__, "path": path})


def load_schedule(path: str | os.PathLike, *, check: bool = True,
                  allow_extern: bool = False) -> Schedule:
    """Open a schedule file: parse its function, replay its trace, return the Schedule.

    The returned schedule's ``trace`` is the file's trace and ``original`` the parsed
    unscheduled module, so it can be scheduled further and saved again. See the module
    docstring for the format; ``check`` compares the result with the recorded hash;
    a module calling external C functions is refused unless ``allow_extern=True``.
    """
    return read_schedule_file(path).schedule(check=check, allow_extern=allow_extern)


def extern_calls(mod: IRModule | PrimFunc) -> list[str]:
    """The names of the external functions a module calls (``T.call_extern``), sorted.

    >>> import workbench as wb
    >>> extern_calls(wb.workloads.matmul(4, 4, 4))
    []
    """
    from ..ir import CallExtern
    from ..ir.functor import post_order_visit

    found: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, CallExtern):
            found.add(node.name)

    for _, func in as_module(mod).functions:
        post_order_visit(func.body, visit)
    return sorted(found)


def is_schedule_file(path: str | os.PathLike) -> bool:
    """Does ``path`` hold a schedule file (rather than a bare trace)? Reads only JSON."""
    try:
        text = read_text(path)
    except (OSError, UntrustedInputError):
        return False
    if not text.lstrip().startswith("{"):
        return False
    try:
        data = loads_json(text)
    except UntrustedInputError:
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def _looks_like_path(source: Any) -> bool:
    if isinstance(source, os.PathLike):
        return True
    if not isinstance(source, str):
        return False
    s = source.strip()
    return bool(s) and "\n" not in s and not s.startswith(("[", "{", "def ", "#"))


def _looks_like_code(text: str) -> bool:
    """One line of trace text (``b0 = sch.get_block(...)``) rather than a file name."""
    return re.search(r"\bsch\.\w+\s*\(", text) is not None


def read_trace_text(data: str | bytes, where: str = "<text>") -> tuple[Trace, ScheduleFile | None]:
    """A trace from the text of a file, never taken as a file name: a schedule file
    (``{...}``), TVM's trace JSON (``[...]``) or ``def apply_trace`` text. The second item
    is the schedule file when it was one. ``where`` names the text in errors.

    >>> trace, sf = read_trace_text('b0 = sch.get_block(name="C", func_name="main")')
    >>> len(trace), sf is None
    (1, True)
    """
    try:
        text = decode_text(data)
    except UntrustedInputError as e:
        if where != "<text>":
            raise ScheduleFileError(where, str(e)) from None
        raise TraceError("load", f"trace text: {e}") from None
    stripped = text.lstrip()
    if stripped.startswith("{"):
        sf = parse_schedule_file(text, where=where)
        return sf.trace, sf
    if stripped.startswith("["):
        return Trace.from_json(text), None
    return Trace.from_python(text), None


def read_trace_source(source: Any) -> tuple[Trace, ScheduleFile | None]:
    """A trace from what a person hands a view: a :class:`Trace`, a
    :class:`ScheduleFile`, a Schedule (its trace), a file name (a schedule file, trace
    JSON or ``def apply_trace`` text), or such text itself. The second item is the
    schedule file when there was one (it knows the function the trace starts from).

    >>> import workbench as wb
    >>> trace, sf = read_trace_source('[[["GetBlock", [], ["C", "main"], ["b0"]]], []]')
    >>> len(trace), sf is None
    (1, True)
    """
    from .schedule import Schedule

    if isinstance(source, Trace):
        return source, None
    if isinstance(source, ScheduleFile):
        return source.trace, source
    if isinstance(source, Schedule):
        return source.trace, None
    if isinstance(source, list):
        return Trace.from_json(source), None
    if isinstance(source, dict):
        sf = parse_schedule_file(source)
        return sf.trace, sf
    if _looks_like_path(source) and not (isinstance(source, str) and _looks_like_code(source)
                                         and not Path(source).expanduser().is_file()):
        path = Path(source).expanduser()
        if not path.is_file():
            where = "" if path.is_absolute() else f" in {Path.cwd()}"
            what = "a directory" if path.is_dir() else "no such file"
            raise FileNotFoundError(
                f"{what}: {path}{where} (expected a trace JSON, apply_trace text or schedule "
                "file)")
        if is_schedule_file(path):
            sf = read_schedule_file(path)
            return sf.trace, sf
        return Trace.load(path), None
    if isinstance(source, (str, bytes)):
        return read_trace_text(source)
    raise TypeError(
        "expected a Trace, a schedule file, a file name, or trace text (JSON or "
        f"`def apply_trace(sch): ...`), got {type(source).__name__}"
    )
