"""Bounds on untrusted input: traces, schedule files and tuning-database lines.

Everything a user loads (trace JSON, ``def apply_trace`` text, a schedule file, a line
of a tuning database) is data from outside. These bounds keep a broken or hostile file
from exhausting the stack, the memory or the time of the process that reads it; a
document past one is refused with its loader's own error (``TraceError`` for traces,
``ScheduleFileError`` for schedule files, a skipped line for a database), which says
where (line, column and the step of the trace):

============================  ==========  ===============================================
``MAX_TEXT_BYTES``            8 MiB       one document: a trace, a schedule file, one
                                          database line (a whole database may be larger)
``MAX_DEPTH``                 64          nesting of lists/objects in a JSON document, and
                                          of sub-expressions in one argument of trace text
``MAX_INT_DIGITS``            100         decimal digits of an integer
============================  ==========  ===============================================

A real trace is a few kilobytes, nests 5 levels deep and holds integers of a few digits.
Text is checked before it is parsed (size, then nesting by a scan that does not recurse)
and integers while it is parsed, so neither :mod:`json` nor :mod:`ast` ever sees input
that would make them recurse too deep.

>>> from workbench.schedule.limits import loads_json, UntrustedInputError
>>> loads_json('[[["GetBlock", [], ["C", "main"], ["b0"]]], []]')[0][0][0]
'GetBlock'
>>> try:
...     loads_json("[" * 100 + "]" * 100)
... except UntrustedInputError as e:
...     print(e)
nested deeper than 64 levels (line 1, column 65)
"""

from __future__ import annotations

import json
import os
import re
import stat
from itertools import accumulate
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_TEXT_BYTES",
    "UntrustedInputError",
    "check_json_value",
    "decode_text",
    "loads_json",
    "read_text",
    "trace_location",
]

MAX_TEXT_BYTES = 8 * 2**20
MAX_DEPTH = 64
MAX_INT_DIGITS = 100
_INT_BOUND = 10**MAX_INT_DIGITS


class UntrustedInputError(ValueError):
    """A document past one of the bounds, or not readable as text/JSON at all.

    ``reason`` says what is wrong; ``path`` is where in the JSON value (keys and list
    indices from the top, as far as known), ``line``/``column`` where in the text (from
    1, None when unknown). ``str()`` gives the reason with the position.
    """

    def __init__(self, reason: str, path: tuple = (), line: int | None = None,
                 column: int | None = None):
        self.reason = reason
        self.path = tuple(path)
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None else ""
        super().__init__(reason + where)


def _too_long(size: int) -> UntrustedInputError:
    return UntrustedInputError(
        f"{size} bytes is more than the {MAX_TEXT_BYTES} bytes a document may have")


def decode_text(data: str | bytes) -> str:
    """``data`` as text: bytes must be UTF-8; either must be at most ``MAX_TEXT_BYTES``.

    >>> decode_text(b"[1]")
    '[1]'
    """
    if isinstance(data, bytes | bytearray):
        if len(data) > MAX_TEXT_BYTES:
            raise _too_long(len(data))
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
            raise UntrustedInputError(
                f"not UTF-8 text ({e.reason}: byte 0x{data[e.start]:02x} at offset "
                f"{e.start})", line=line, column=column) from None
    if not isinstance(data, str):
        raise UntrustedInputError(f"expected text, got {type(data).__name__}")
    if len(data) > MAX_TEXT_BYTES:  # characters; each is at least one byte
        raise _too_long(len(data))
    return data


def read_text(path: str | os.PathLike) -> str:
    """The UTF-8 text of the regular file at ``path``, reading at most
    ``MAX_TEXT_BYTES + 1`` bytes. A FIFO, a device or a directory is refused, not read
    (a FIFO would block, a device never end). ``OSError`` (a missing file...) passes
    through."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise UntrustedInputError("not a regular file")
    with open(path, "rb") as f:
        data = f.read(MAX_TEXT_BYTES + 1)
    if len(data) > MAX_TEXT_BYTES:
        raise UntrustedInputError(f"the file is larger than the {MAX_TEXT_BYTES} bytes "
                                  "a document may have")
    return decode_text(data)


# JSON text ------------------------------------------------------------------
# a string token (an unterminated one runs to the end, so every match attempt succeeds
# and scanning stays linear), or one structural character
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)|[\[\]{}:,]', re.DOTALL)
_NOT_BRACKET_BYTES = bytes(b for b in range(256) if b not in b"[]{}")
_OBJECTS_AS_LISTS = bytes.maketrans(b"{}", b"[]")
_DIGITS_AS_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * (MAX_INT_DIGITS + 1)
_STEP = {ord("["): 1, ord("]"): -1}


def _outside_strings(text: str) -> bytes:
    """The UTF-8 bytes of ``text`` with the contents of its JSON strings removed (escaped
    backslashes and quotes go first, so every quote left opens or closes a string)."""
    data = text.encode("utf-8", "surrogatepass")
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(data.split(b'"')[::2])


def _max_depth(bare: bytes) -> int:
    """The deepest nesting of brackets in ``bare`` (see :func:`_outside_strings`), in
    C-speed passes without recursion: each pass removes the innermost pairs, so a
    balanced text empties in as many passes as it is deep; the passes stop past
    ``MAX_DEPTH``. Long or unbalanced text is counted bracket by bracket (linear)."""
    brackets = bare.translate(_OBJECTS_AS_LISTS, _NOT_BRACKET_BYTES)
    data, passes = brackets, 0
    while data and passes <= MAX_DEPTH and len(brackets) <= 1 << 16:
        inner = data.replace(b"[]", b"")
        if len(inner) == len(data):
            break
        data, passes = inner, passes + 1
    if not data or passes > MAX_DEPTH:
        return passes
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _locate_depth(text: str, limit: int) -> tuple[int, tuple]:
    """(offset, JSON path) of the first bracket nested deeper than ``limit``."""
    stack: list[list] = []  # [is_object, index or key, pending key]
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in "[{":
            if stack:
                top = stack[-1]
                if top[0]:
                    top[1] = top[2]
            if len(stack) >= limit:
                return m.start(), tuple(t[1] for t in stack)
            stack.append([tok == "{", 0, None])
        elif tok in "]}":
            if stack:
                stack.pop()
        elif tok == ",":
            if stack and not stack[-1][0]:
                stack[-1][1] += 1
        elif tok != ":" and stack and stack[-1][0]:
            stack[-1][2] = tok[1:-1]
    return len(text), tuple(t[1] for t in stack)  # pragma: no cover - depth was checked


def _line_column(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _long_int(digits: str) -> UntrustedInputError:
    return UntrustedInputError(
        f"an integer of {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _long_int(digits)
    return int(digits)


class _LongInt(str):
    """An integer literal past the bound, kept as text to find where it is."""


def _marked_int(digits: str) -> int | _LongInt:
    return _LongInt(digits) if len(digits.lstrip("-")) > MAX_INT_DIGITS else int(digits)


def _find_long_int(value: Any) -> tuple:
    """The JSON path of the first :class:`_LongInt` in ``value`` (depth already bounded)."""
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        v, path = stack.pop()
        if isinstance(v, _LongInt):
            return path
        if isinstance(v, dict):
            stack.extend((x, (*path, k)) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend((x, (*path, k)) for k, x in reversed(list(enumerate(v))))
    return ()  # pragma: no cover - only called when one was met


def loads_json(data: str | bytes) -> Any:
    """Parse untrusted JSON text within the bounds (size, nesting, integer digits).

    Raises :class:`UntrustedInputError` (a ``ValueError``) for text past a bound and for
    text that is not JSON ("not valid JSON: ...").
    """
    text = decode_text(data)
    bare = _outside_strings(text)
    if _max_depth(bare) > MAX_DEPTH:
        offset, path = _locate_depth(text, MAX_DEPTH)
        line, column = _line_column(text, offset)
        raise UntrustedInputError(f"nested deeper than {MAX_DEPTH} levels", path, line, column)
    try:  # integers are checked one by one only where a long run of digits is
        if _LONG_DIGITS in bare.translate(_DIGITS_AS_ZEROS):
            return json.loads(text, parse_int=_bounded_int)
        return json.loads(text)
    except UntrustedInputError as e:  # say where: parse again, keeping long ones as text
        try:
            path = _find_long_int(json.loads(text, parse_int=_marked_int))
        except ValueError:  # pragma: no cover - the text parsed up to that integer
            path = ()
        raise UntrustedInputError(e.reason, path) from None
    except json.JSONDecodeError as e:
        raise UntrustedInputError(f"not valid JSON: {e.msg}", (), e.lineno, e.colno) from None
    except (ValueError, RecursionError, MemoryError) as e:  # pragma: no cover - bounded above
        raise UntrustedInputError(f"not valid JSON: {type(e).__name__}: {e}") from None


def check_json_value(value: Any) -> None:
    """Check a JSON-like value handed over already parsed (lists, dicts, strings,
    numbers, booleans, None): nesting and integer size, without recursion.

    >>> check_json_value([[1, 2], {"a": [3]}])
    >>> try:
    ...     check_json_value([[[[10**200]]]])
    ... except UntrustedInputError as e:
    ...     print(e.reason, e.path)
    an integer of 201 digits (at most 100) (0, 0, 0, 0)
    """
    # the common case, fast: no paths kept; on a problem, walk again to say where
    stack: list[tuple[Any, int]] = [(value, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        v, depth = pop()
        t = type(v)
        if t is not list and t is not dict and t is not tuple:
            push((v, depth))
            break
        if depth >= MAX_DEPTH:
            push((v, depth))
            break
        for x in v.values() if t is dict else v:
            tx = type(x)
            if tx is str or tx is float or tx is bool or x is None:
                continue
            if tx is int and -_INT_BOUND < x < _INT_BOUND:
                continue
            push((x, depth + 1))
    else:
        return
    _check_json_value_slowly(value)


def _check_json_value_slowly(value: Any) -> None:
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        v, path = stack.pop()
        if isinstance(v, bool) or v is None or isinstance(v, float | str):
            continue
        if isinstance(v, int):
            if not -_INT_BOUND < v < _INT_BOUND:
                digits = len(str(abs(v))) if abs(v).bit_length() < 14000 else "over 4000"
                raise UntrustedInputError(
                    f"an integer of {digits} digits (at most {MAX_INT_DIGITS})", path)
            continue
        if isinstance(v, list | tuple | dict):
            if len(path) >= MAX_DEPTH:
                raise UntrustedInputError(f"nested deeper than {MAX_DEPTH} levels", path)
            items = v.items() if isinstance(v, dict) else enumerate(v)
            stack.extend((x, (*path, k)) for k, x in items)
            continue
        raise UntrustedInputError(f"unsupported value of type {type(v).__name__}", path)


def trace_location(path: tuple) -> str:
    """Where a JSON path points in a trace ``[[instructions], [decisions]]``: ``"step
    3"``, ``"decision entry 0"`` or ``""``.

    >>> trace_location((0, 3, 1, 1))
    'step 3'
    """
    if len(path) >= 2 and path[0] == 0 and isinstance(path[1], int):
        return f"step {path[1]}"
    if len(path) >= 2 and path[0] == 1 and isinstance(path[1], int):
        return f"decision entry {path[1]}"
    return ""
