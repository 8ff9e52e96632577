"""Reading TVMScript never executes it: payloads in every position Python would
evaluate (default arguments, decorators, annotations, f-strings, calls, class
bodies, top-level statements) do nothing; each text is refused with a located
ParseError or read as TVMScript with the payload ignored."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

import workbench as wb
from workbench.script import ParseError

SIG = 'A: T.Buffer((4,), "float32")'
BODY = '''
    for i in range(4):
        with T.block("A"):
            vi = T.axis.spatial(4, i)
            A[vi] = T.float32(0)
'''


def payloads(marker: Path) -> dict[str, str]:
    """Texts that would create ``marker`` or set ``builtins.WB_PWNED`` if any part of
    them ran."""
    touch = f"open({str(marker)!r}, 'w')"
    flag = "setattr(__import__('builtins'), 'WB_PWNED', 1)"
    return {
        "default argument": f"@T.prim_func\ndef f({SIG} = {touch}):{BODY}",
        "default argument (global)": f"@T.prim_func\ndef f({SIG} = {flag}):{BODY}",
        "keyword default": f"@T.prim_func\ndef f({SIG}, *, b={touch}):{BODY}",
        "decorator": f"@{touch}\ndef f({SIG}):{BODY}",
        "decorator option": f"@T.prim_func(private={flag})\ndef f({SIG}):{BODY}",
        "annotation": f"@T.prim_func\ndef f(A: {touch}):{BODY}",
        "buffer shape": f"@T.prim_func\ndef f(A: T.Buffer(({touch},), 'float32')):{BODY}",
        "buffer keyword": f"@T.prim_func\ndef f(A: T.Buffer((4,), 'float32', data={touch})):"
                          f"{BODY}",
        "return annotation": f"@T.prim_func\ndef f({SIG}) -> {touch}:{BODY}",
        "f-string": f'@T.prim_func\ndef f({SIG}):\n    T.evaluate(f"{{{touch}}}")\n',
        "call in a store": f"@T.prim_func\ndef f({SIG}):\n    A[0] = {touch}\n",
        "call in an index": f"@T.prim_func\ndef f({SIG}):\n    A[{flag}] = T.float32(0)\n",
        "call in a loop extent": f"@T.prim_func\ndef f({SIG}):\n    for i in range({touch}):\n"
                                 "        A[i] = T.float32(0)\n",
        "func_attr value": f"@T.prim_func\ndef f({SIG}):\n    T.func_attr({{'a': {touch}}})\n"
                           f"{BODY}",
        "lambda": f"@T.prim_func\ndef f({SIG}):\n    A[0] = (lambda: {touch})()\n",
        "comprehension": f"@T.prim_func\ndef f({SIG}):\n    A[0] = [{touch} for _ in 'x']\n",
        "walrus": f"@T.prim_func\ndef f({SIG}):\n    A[0] = (x := {touch})\n",
        "attribute of T": f"@T.prim_func\ndef f({SIG}):\n    A[0] = T.__class__.__init__"
                          f"({touch})\n",
        "dunder on a buffer": f"@T.prim_func\ndef f({SIG}):\n    A.__class__({touch})\n",
        "block name": f"@T.prim_func\ndef f({SIG}):\n    with T.block({touch}):\n"
                      "        A[0] = T.float32(0)\n",
        "top-level statement": f"{touch}\n@T.prim_func\ndef f({SIG}):{BODY}",
        "top-level assignment": f"x = {flag}\n@T.prim_func\ndef f({SIG}):{BODY}",
        "class body": f"@I.ir_module\nclass M:\n    x = {touch}\n    @T.prim_func\n"
                      f"    def f({SIG}):{BODY.replace(chr(10), chr(10) + '    ')}",
        "class decorator": f"@{flag}\nclass M:\n    pass\n",
        "class base": f"@I.ir_module\nclass M({touch}):\n    pass\n",
        "nested function": f"@T.prim_func\ndef f({SIG}):\n    def g(x={touch}):\n"
                           "        pass\n",
        "import in body": f"@T.prim_func\ndef f({SIG}):\n    import os\n{BODY}",
        "relax function": f"@I.ir_module\nclass M:\n    @R.function\n    def r(x={touch}):\n"
                          f"        return {flag}\n",
    }


# payload texts that are valid TVMScript once the payload is ignored
READ_IGNORING = {"relax function"}


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "pwned"
    yield path
    assert not path.exists(), "a payload ran: the marker file exists"
    assert not hasattr(builtins, "WB_PWNED"), "a payload ran: a global was set"


@pytest.mark.parametrize("case", sorted(payloads(Path("x"))))
def test_payload_does_nothing(case, marker):
    text = payloads(marker)[case]
    ast.parse(text)  # each payload is valid Python: only the reader's refusal stops it
    if case in READ_IGNORING:
        with pytest.warns(wb.script.SkippedFunctionWarning):
            mod = wb.from_script(text)
        assert mod.names == []
        return
    with pytest.raises(ParseError) as info:
        wb.from_script(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.lineno is not None and err.col is not None
    assert f"line {err.lineno}" in str(err)


def test_payload_in_comments_and_strings_is_read_as_text(marker):
    call = f"open({str(marker)!r}, 'w')"
    text = (f"# {call}\n"
            f'"""{call}"""\n'
            f"@T.prim_func\ndef f({SIG}):\n    {call!r}\n    # {call}\n{BODY}")
    func = wb.from_script(text)
    assert wb.ir.block_names(func) == ["A"]


def test_the_reader_has_no_eval_exec_or_compile():
    """The package never calls eval/exec/compile/__import__ (ast.parse only)."""
    root = Path(wb.script.__file__).parent
    banned = {"eval", "exec", "compile", "__import__", "execfile"}
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.id if isinstance(fn, ast.Name) else getattr(fn, "attr", None)
                assert name not in banned, f"{path.name}:{node.lineno} calls {name}"


def test_huge_or_deep_input_is_refused_cleanly():
    deep = f"@T.prim_func\ndef f({SIG}):\n    A[0] = " + "(" * 500 + "1" + ")" * 500 + "\n"
    try:
        wb.from_script(deep)
    except ParseError:
        pass  # either read or refused, never another exception
    too_deep = "x = " + "[" * 100000 + "]" * 100000
    with pytest.raises(ParseError):
        wb.from_script(too_deep)


def test_power_operator_is_refused_not_computed():
    """``**`` could make a huge number; it is not TVMScript and is refused."""
    text = f"@T.prim_func\ndef f({SIG}):\n    for i in range(10 ** 10 ** 10):\n" \
           "        A[0] = T.float32(0)\n"
    with pytest.raises(ParseError, match=r"\*\*"):
        wb.from_script(text)
