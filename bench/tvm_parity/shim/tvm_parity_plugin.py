"""pytest plugin of the parity runner: one JSON line per test with its verdict.

Loaded with ``-p tvm_parity_plugin`` in the runner's subprocess. Environment:
``TVM_PARITY_OUT`` (the JSON-lines file to append to), ``TVM_PARITY_TIMEOUT`` (seconds
per test; SIGALRM stops a test that runs longer) and ``TVM_PARITY_SKIP`` (a file of
node ids not to run again: those already reported before a hang killed the process).

Records: ``{"event": "collected", "ids": [...]}``, ``{"event": "start", "id": ...}``,
``{"event": "collect_error", "id": ..., "message": ...}`` and
``{"event": "result", "id", "status", "cls", "message", "where", "detail"}`` where
status is agree / disagree / n/a / error and cls the rough class.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest

_OUT = os.environ.get("TVM_PARITY_OUT")
_TIMEOUT = float(os.environ.get("TVM_PARITY_TIMEOUT", "60"))
_SKIP = os.environ.get("TVM_PARITY_SKIP")
_SHIM_DIR = str(Path(__file__).resolve().parent)


class ParityTimeout(BaseException):
    """The test ran past the per-test time limit."""


def _write(record: dict) -> None:
    if _OUT:
        with open(_OUT, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()


# ---------------------------------------------------------------------------
# classification


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


def _frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return traceback.extract_tb(exc.__traceback__)


def _test_frame(exc: BaseException, test_file: str) -> traceback.FrameSummary | None:
    """The last frame of the test file the error passed through."""
    for fr in reversed(_frames(exc)):
        if os.path.abspath(fr.filename) == test_file:
            return fr
    return None


def _where(exc: BaseException, test_file: str) -> str:
    """``L123: sch.fuse(i, j)``."""
    fr = _test_frame(exc, test_file)
    return f"L{fr.lineno}: {(fr.line or '').strip()}" if fr else ""


_RAISES_CACHE: dict[str, list[tuple[int, int]]] = {}


def _raises_blocks(test_file: str) -> list[tuple[int, int]]:
    """Line ranges of the bodies of ``with pytest.raises(...)`` in a test file."""
    if test_file not in _RAISES_CACHE:
        import ast

        spans = []
        try:
            tree = ast.parse(Path(test_file).read_text())
        except (OSError, SyntaxError):
            tree = ast.Module(body=[], type_ignores=[])
        for node in ast.walk(tree):
            if isinstance(node, ast.With) and any(
                isinstance(it.context_expr, ast.Call)
                and ast.unparse(it.context_expr.func).endswith("raises")
                for it in node.items
            ):
                spans.append((node.body[0].lineno, node.end_lineno or node.lineno))
        _RAISES_CACHE[test_file] = spans
    return _RAISES_CACHE[test_file]


def _inside_raises(exc: BaseException, test_file: str) -> bool:
    """Was ``exc`` raised by a statement the test expects to raise (of another type)?"""
    fr = _test_frame(exc, test_file)
    return fr is not None and any(a <= (fr.lineno or 0) <= b
                                  for a, b in _raises_blocks(test_file))


def _raised_in(exc: BaseException) -> str:
    """Where the exception was raised: "workbench", "shim", "test" or "other"."""
    frames = _frames(exc)
    if not frames:
        return "other"
    import workbench

    path = os.path.abspath(frames[-1].filename)
    if path.startswith(_SHIM_DIR + os.sep):
        return "shim"
    if path.startswith(os.path.dirname(os.path.abspath(workbench.__file__)) + os.sep):
        return "workbench"
    return "test" if path.endswith(".py") and "site-packages" not in path else "other"


_HANDLE_SUGAR = re.compile(r"expected (a|an) [a-z ]*handle, got '")


def classify(exc: BaseException, test_file: str) -> tuple[str, str, str]:
    """(status, class, message) for a test that raised ``exc``."""
    from tvm._adapt import NotApplicable, ScriptNotRead
    from tvm._compare import IRMismatch
    from tvm.s_tir.schedule.testing import TraceRoundTripMismatch

    import workbench as wb

    msg = _first_line(exc)
    if isinstance(exc, ParityTimeout):
        return "error", "timeout", msg
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, NotApplicable):
            return "n/a", "no workbench counterpart", _first_line(cause)
        cause = cause.__cause__
    if isinstance(exc, IRMismatch):
        return "disagree", "wrong IR", msg
    if isinstance(exc, TraceRoundTripMismatch):
        return "disagree", "trace round trip", msg
    if isinstance(exc, ScriptNotRead):
        return "disagree", "parse error", msg
    if isinstance(exc, pytest.fail.Exception) and "DID NOT RAISE" in str(exc):
        return "disagree", "we accept what TVM refuses", msg
    if isinstance(exc, wb.ScheduleError):
        if _HANDLE_SUGAR.search(str(exc)):
            return "disagree", "API: block/buffer given by name", msg
        if _inside_raises(exc, test_file):
            return "disagree", "same refusal, other message or type", (
                f"TVM raises another exception type here; ours: {type(exc).__name__}: {msg}")
        return "disagree", "we refuse what TVM accepts", f"{type(exc).__name__}: {msg}"
    if isinstance(exc, AssertionError) and "Regex pattern did not match" in str(exc):
        actual = re.search(r"Actual message: (.*)", str(exc))
        expected = re.search(r"Expected regex: (.*)", str(exc))
        if actual and _HANDLE_SUGAR.search(actual.group(1)):
            return "disagree", "API: block/buffer given by name", actual.group(1).strip()[:300]
        detail = (f"TVM's message matches {expected.group(1).strip()}, ours is "
                  f"{actual.group(1).strip()[:200]}") if actual and expected else msg
        return "disagree", "same refusal, other message or type", detail
    place = _raised_in(exc)
    if isinstance(exc, TypeError) and msg.startswith("Schedule.") and re.search(
            r"unexpected keyword|positional argument|required (positional|keyword)", msg):
        return "disagree", "API: arguments", f"TypeError: {msg}"
    if isinstance(exc, AttributeError) and place in ("test", "workbench") and \
            "object has no attribute" in msg:
        return "disagree", "API: attribute", f"AttributeError: {msg}"
    if place == "workbench":
        return "disagree", "workbench crash", f"{type(exc).__name__}: {msg}"
    if isinstance(exc, AssertionError):
        return "disagree", "different result", msg or "assertion failed"
    if place == "shim":
        return "error", "shim", f"{type(exc).__name__}: {msg}"
    return "error", "other", f"{type(exc).__name__}: {msg}"


# ---------------------------------------------------------------------------
# hooks


def pytest_collection_modifyitems(config: Any, items: list) -> None:
    skip = set()
    if _SKIP and os.path.exists(_SKIP):
        skip = set(Path(_SKIP).read_text().split("\n")) - {""}
    keep = [it for it in items if it.nodeid not in skip]
    dropped = [it for it in items if it.nodeid in skip]
    items[:] = keep
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    _write({"event": "collected", "ids": [it.nodeid for it in keep]})


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        text = str(report.longrepr)
        lines = [ln for ln in text.splitlines() if ln.startswith("E ")]
        message = lines[-1][1:].strip() if lines else text.strip().splitlines()[-1]
        _write({"event": "collect_error", "id": report.nodeid, "message": message[:500],
                "detail": text[-4000:]})


def _on_alarm(signum: int, frame: Any) -> None:
    raise ParityTimeout(f"timed out after {_TIMEOUT:g} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any):
    _write({"event": "start", "id": item.nodeid})
    item._parity = None
    from tvm._adapt import RAISED
    from tvm._compare import NOTES

    NOTES.clear()
    RAISED.clear()
    use_alarm = hasattr(signal, "SIGALRM")
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, _TIMEOUT)
    try:
        yield
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    status, cls, message, where, detail = item._parity or ("agree", "", "", "", "")
    sugar = [m for m in RAISED if _HANDLE_SUGAR.search(m)]
    if status == "agree" and sugar:
        status, cls = "disagree", "API: block/buffer given by name"
        message = f"passes only because a name was refused: {sugar[0]}"
    _write({"event": "result", "id": item.nodeid, "status": status, "cls": cls,
            "message": message, "where": where, "detail": detail,
            "notes": sorted(set(NOTES))})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any):
    outcome = yield
    report = outcome.get_result()
    if item._parity is not None:
        return  # the first failing phase decides
    if hasattr(report, "wasxfail"):
        item._parity = ("n/a", "xfail in TVM", str(report.wasxfail)[:300], "", "")
        return
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        item._parity = ("n/a", "skipped by TVM's test", str(reason)[:300], "", "")
        return
    if call.excinfo is None or not report.failed:
        return
    exc = call.excinfo.value
    test_file = os.path.abspath(str(item.path))
    try:
        status, cls, message = classify(exc, test_file)
    except Exception as e:  # never lose a verdict to the classifier
        status, cls, message = "error", "runner", f"classifier failed: {e!r}"
    if call.when == "teardown" and status == "n/a":
        return
    detail = "".join(traceback.format_exception(exc))[-6000:]
    item._parity = (status, cls, message, _where(exc, test_file), detail)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("load this module with pytest -p tvm_parity_plugin")
