"""``tvm.ir.assert_structural_equal`` on the workbench: compare printed IR.

Both sides are printed by the workbench (TVM >= 0.24 syntax) and compared token by
token, modulo a consistent renaming of variables, buffers and block names: TVM's
structural equality binds variables and buffers by position and ignores their names
and block names. Each definition (loop, iterator, parameter, buffer, let) starts a new
pairing, so a name reused in another scope is fine. Everything else must match
exactly: strings, dtypes, numbers, loop kinds, annotations, predicates, allocations
and the ``T.reads`` / ``T.writes`` regions. One difference with TVM follows from the
workbench's parser: regions of TVMScript that is read are derived from the block
bodies, as the workbench always does. Block names that differ in an equal pair are
collected in :data:`NOTES` (the runner shows them beside the verdict).

Function names are not compared (a PrimFunc has none in TVM); ``global_symbol`` is,
unless ignored, as in ``assert_structural_equal_ignore_global_symbol``.
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import keyword
import tokenize
from typing import Any

from workbench.ir import IRModule, PrimFunc
from workbench.ir.printer import any_to_str

from ._adapt import global_symbol, is_expected, resolve


class IRMismatch(AssertionError):
    """The workbench's IR differs from the IR the TVM test expects."""


_FIXED_NAMES = {"T", "I", "R", "range", "True", "False", "None"}
_STRUCTURE = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)

# Block names that differed in the last comparisons (TVM ignores them; the runner
# reports them beside an agreeing test)
NOTES: list[str] = []


def _func_text(func: PrimFunc, ignore_global_symbol: bool) -> str:
    attrs = {k: v for k, v in func.attrs if k != "global_symbol"}
    if not ignore_global_symbol:
        attrs = {"global_symbol": global_symbol(func), **attrs}
    return dataclasses.replace(func, name="f", attrs=tuple(attrs.items())).script(
        syntax="tirx")


def printed(x: Any, ignore_global_symbol: bool = False) -> str:
    """The text two IR objects are compared by."""
    x = resolve(x)
    if isinstance(x, PrimFunc):
        return _func_text(x, ignore_global_symbol)
    if isinstance(x, IRModule):  # functions in name order (names: see _names_differ)
        return "\n".join(_func_text(x[n], ignore_global_symbol or global_symbol(x[n]) == n)
                         for n in sorted(x.names))
    return any_to_str(x, syntax="tirx")


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    skip = {tokenize.NL, tokenize.ENDMARKER, tokenize.ENCODING, tokenize.COMMENT}
    try:
        return [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type not in skip]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [tokenize.TokenInfo(tokenize.OP, line, (n + 1, 0), (n + 1, len(line)), line)
                for n, line in enumerate(text.splitlines())]


def _roles(toks: list[tokenize.TokenInfo]) -> list[str]:
    """Per token: "bind" (a name defined here: loop variable, iterator, parameter,
    buffer, let variable), "name" (a use of a renamable name), "block" (a block name
    string) or "" (compared as is)."""
    roles = [""] * len(toks)
    line: list[int] = []

    def finish() -> None:
        if not line:
            return
        first = toks[line[0]].string
        depth = 0
        eq = None
        for k in line:
            t = toks[k].string
            if t in "([{" and toks[k].type == tokenize.OP:
                depth += 1
            elif t in ")]}" and toks[k].type == tokenize.OP:
                depth -= 1
            elif t == "=" and depth == 0 and eq is None:
                eq = k
        depth = 0
        in_for = first == "for"
        colon_seen = False
        for pos, k in enumerate(line):
            t = toks[k]
            nxt = toks[line[pos + 1]].string if pos + 1 < len(line) else ""
            prev = toks[line[pos - 1]].string if pos else ""
            if t.type == tokenize.OP and t.string in "([{":
                depth += 1
            elif t.type == tokenize.OP and t.string in ")]}":
                depth -= 1
            if t.type == tokenize.OP and t.string == ":" and depth == 0:
                colon_seen = True
            if t.type == tokenize.STRING and prev == "(" and pos >= 3 and \
                    toks[line[pos - 2]].string in ("sblock", "block") and \
                    toks[line[pos - 3]].string == ".":
                roles[k] = "block"
                continue
            if t.type != tokenize.NAME or keyword.iskeyword(t.string) or \
                    t.string in _FIXED_NAMES or prev == ".":
                if t.string == "in":
                    in_for = False
                continue
            if depth and nxt == "=":
                continue  # a keyword argument
            binding = (
                in_for
                or prev == "as"
                or (first == "def" and depth == 1 and nxt == ":")
                or (eq is not None and k < eq and depth == 0 and not colon_seen
                    and nxt not in ("[", ".", "("))
            )
            roles[k] = "bind" if binding else "name"
        line.clear()

    for k, t in enumerate(toks):
        if t.type in _STRUCTURE:
            finish()
        else:
            line.append(k)
    finish()
    return roles


def first_difference(a: str, b: str) -> tuple[int, int, str] | None:
    """None when ``a`` and ``b`` are the same text up to a consistent renaming of
    variables and buffers (each definition starts a new pairing) and of block names;
    else (line in a, line in b, why). Differing block names go to :data:`NOTES`."""
    ta, tb = _tokens(a), _tokens(b)
    ra, rb = _roles(ta), _roles(tb)
    fwd: dict[str, str] = {}
    back: dict[str, str] = {}
    blocks: dict[str, str] = {}
    blocks_back: dict[str, str] = {}
    for x, y, rx, ry in zip(ta, tb, ra, rb):
        if x.type in _STRUCTURE or y.type in _STRUCTURE:
            if x.type != y.type:
                return x.start[0], y.start[0], "the statements differ"
            continue
        if rx != ry:
            return x.start[0], y.start[0], f"`{x.string}` vs `{y.string}`"
        if rx == "bind":  # a new pairing replaces what either name stood for
            old_y, old_x = fwd.pop(x.string, None), back.pop(y.string, None)
            if old_y is not None and back.get(old_y) == x.string:
                del back[old_y]
            if old_x is not None and fwd.get(old_x) == y.string:
                del fwd[old_x]
            fwd[x.string], back[y.string] = y.string, x.string
        elif rx == "name":
            if fwd.setdefault(x.string, y.string) != y.string or \
                    back.setdefault(y.string, x.string) != x.string:
                return x.start[0], y.start[0], (
                    f"`{x.string}` vs `{y.string}` (`{x.string}` stands for "
                    f"`{fwd.get(x.string)}` here)")
        elif rx == "block":
            if blocks.setdefault(x.string, y.string) != y.string or \
                    blocks_back.setdefault(y.string, x.string) != x.string:
                return x.start[0], y.start[0], f"block {x.string} vs {y.string}"
        elif x.string != y.string:
            return x.start[0], y.start[0], f"`{x.string}` vs `{y.string}`"
    if len(ta) != len(tb):
        la = ta[len(tb)].start[0] if len(ta) > len(tb) else len(a.splitlines())
        lb = tb[len(ta)].start[0] if len(tb) > len(ta) else len(b.splitlines())
        return la, lb, "one side ends early"
    renamed = [f"{x} -> {y}" for x, y in blocks.items() if x != y]
    if renamed:
        NOTES.append("block names differ (TVM ignores them): " + ", ".join(renamed))
    return None


def assert_equal(lhs: Any, rhs: Any, ignore_global_symbol: bool = False) -> None:
    """Raise :class:`IRMismatch` naming the first line that differs (the workbench's
    side first when one side is TVMScript from the test and the other is not)."""
    if is_expected(lhs) and not is_expected(rhs):
        lhs, rhs = rhs, lhs
    na, nb = ("ours", "TVM") if is_expected(rhs) and not is_expected(lhs) else ("left", "right")
    names = _names_differ(lhs, rhs)
    if names:
        raise IRMismatch(f"IR differs: module functions {names}")
    a, b = printed(lhs, ignore_global_symbol), printed(rhs, ignore_global_symbol)
    diff = first_difference(a, b)
    if diff is None:
        return
    la, lb, why = diff
    lines_a, lines_b = a.splitlines(), b.splitlines()
    line_a = lines_a[la - 1].strip() if 0 < la <= len(lines_a) else "<end>"
    line_b = lines_b[lb - 1].strip() if 0 < lb <= len(lines_b) else "<end>"
    udiff = "\n".join(difflib.unified_diff(lines_a, lines_b, na, nb, lineterm="", n=2))
    raise IRMismatch(f"IR differs: {na} line {la} `{line_a}` | {nb} line {lb} `{line_b}` "
                     f"({why})\n{udiff}")


def _names_differ(lhs: Any, rhs: Any) -> str:
    """The two modules' function names when they differ (else "")."""
    a, b = resolve(lhs), resolve(rhs)
    if isinstance(a, IRModule) and isinstance(b, IRModule) and sorted(a.names) != sorted(
            b.names):
        return f"{sorted(a.names)} vs {sorted(b.names)}"
    return ""


def equal(lhs: Any, rhs: Any) -> bool:
    return not _names_differ(lhs, rhs) and first_difference(printed(lhs), printed(rhs)) is None
