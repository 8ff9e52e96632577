"""The top level of a TVMScript text: imports, ``@T.prim_func`` functions and
``@I.ir_module`` classes."""

from __future__ import annotations

import ast
import textwrap
import warnings
from typing import Any

from ..ir.stmt import IRModule, PrimFunc
from .errors import ParseError, Source
from .parser import DEFAULT_ALIASES, Parser


class SkippedFunctionWarning(UserWarning):
    """A function the workbench cannot hold (a Relax ``@R.function``) was left out of
    the module."""


# ``from tvm.script import tir as T`` and friends: module path -> canonical prefix
_MODULES = {
    "tvm.script.tir": "T",
    "tvm.script.tirx": "T",
    "tvm.tir": "T",
    "tvm.tirx": "T",
    "tvm.script.ir": "I",
    "tvm.script.relax": "R",
    "tvm.relax": "R",
    "tvm": "tvm",
    "tvm.script": "tvm.script",
    "workbench": "wb",
    "workbench.script": "wb.script",
    "workbench.script.tir": "T",
    "workbench.script.tirx": "T",
    "workbench.script.ir": "I",
}


def _import_aliases(node: ast.Import | ast.ImportFrom, aliases: dict[str, str]) -> None:
    if isinstance(node, ast.Import):
        for a in node.names:
            prefix = _MODULES.get(a.name)
            if a.asname is not None:
                if prefix is not None:
                    aliases[a.asname] = prefix
            else:
                root = a.name.split(".")[0]
                if root in _MODULES:
                    aliases[root] = _MODULES[root]
        return
    if node.level or node.module is None:
        return
    for a in node.names:
        name = a.asname or a.name
        full = f"{node.module}.{a.name}"
        if full in _MODULES:
            aliases[name] = _MODULES[full]
        elif node.module in _MODULES:
            aliases[name] = f"{_MODULES[node.module]}.{a.name}"


def _decorator_kind(p: Parser, dec: ast.expr) -> tuple[str, ast.Call | None]:
    """``("prim_func" | "ir_module" | "relax" | "other", call-or-None)``."""
    call = dec if isinstance(dec, ast.Call) else None
    target = dec.func if call is not None else dec
    q = p.qual(target)
    if q is None and isinstance(target, ast.Name):
        q = target.id
    if q in ("T.prim_func", "wb.prim_func", "prim_func"):
        return "prim_func", call
    if q in ("I.ir_module", "wb.ir_module", "ir_module"):
        return "ir_module", call
    if q is not None and q.startswith("R."):
        return "relax", call
    return "other", call


_PRIM_FUNC_OPTIONS = ("private", "s_tir", "check_well_formed")


def _check_decorators(p: Parser, node: ast.FunctionDef | ast.ClassDef, want: str) -> str:
    """The definition's kind (``want`` or ``"relax"``) after checking its decorators;
    their arguments are read as literals, never run."""
    kinds = []
    for dec in node.decorator_list:
        kind, call = _decorator_kind(p, dec)
        if kind == "other":
            raise p.err(dec, f"unknown decorator `@{ast.unparse(dec)[:60]}`; TVMScript uses "
                             "@T.prim_func and @I.ir_module")
        if call is not None and kind != "relax":
            if call.args:
                raise p.err(call.args[0], f"@{kind} takes only keyword options")
            for k in call.keywords:
                if kind == "ir_module" or k.arg not in _PRIM_FUNC_OPTIONS:
                    raise p.err(k.value if k.arg else call, f"@{kind}: unknown option "
                                                            f"`{k.arg}`")
                v = p.expr(k.value)
                if not isinstance(v, bool):
                    raise p.err(k.value, f"@{kind}: option `{k.arg}` is True or False")
        kinds.append(kind)
    if "relax" in kinds:
        return "relax"
    if want not in kinds:
        deco = "@T.prim_func" if want == "prim_func" else "@I.ir_module"
        what = "function" if want == "prim_func" else "class"
        raise p.err(node, f"{what} `{node.name}` needs the {deco} decorator")
    return want


def parse_function(src: Source, node: ast.FunctionDef, aliases: dict[str, str],
                   check_decorators: bool = True, type_vars: tuple[str, ...] = (),
                   constants: dict[str, Any] | None = None) -> PrimFunc | None:
    """The PrimFunc of one ``def`` (None for a skipped Relax function). ``constants``:
    plain values of free names (only the decorators pass them; see
    :func:`.decorators.free_constants`)."""
    p = Parser(src, aliases, type_vars, constants)
    if check_decorators and _check_decorators(p, node, "prim_func") == "relax":
        warnings.warn(f"Relax function `{node.name}` left out: the workbench holds TIR "
                      "functions only", SkippedFunctionWarning, stacklevel=4)
        return None
    return p.function(node)


def parse_class(src: Source, node: ast.ClassDef, aliases: dict[str, str],
                check_decorators: bool = True, type_vars: tuple[str, ...] = (),
                constants: dict[str, dict[str, Any]] | None = None) -> IRModule:
    """The IRModule of an ``@I.ir_module`` class; ``constants`` maps a method's name to
    its free constants (decorators only)."""
    p = Parser(src, aliases)
    if check_decorators:
        _check_decorators(p, node, "ir_module")
    if node.bases or node.keywords:
        raise p.err(node, f"module class `{node.name}` cannot have base classes")
    funcs: list[PrimFunc] = []
    for i, stmt in enumerate(node.body):
        if isinstance(stmt, ast.FunctionDef):
            f = parse_function(src, stmt, aliases, type_vars=type_vars,
                               constants=(constants or {}).get(stmt.name))
            if f is not None:
                if any(g.name == f.name for g in funcs):
                    raise p.err(stmt, f"the module defines `{f.name}` twice")
                funcs.append(f)
        elif isinstance(stmt, ast.Pass) or (i == 0 and _is_str(stmt)):
            continue
        else:
            raise p.err(stmt, f"module class `{node.name}` may only hold @T.prim_func "
                              "functions")
    return IRModule.from_funcs(*funcs)


def _type_var(stmt: ast.stmt) -> str | None:
    """``n = TypeVar("n")``: how TVM prints an int64 shape variable of a signature."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)):
        return None
    fn = stmt.value.func
    fname = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) \
        else None
    name = stmt.targets[0].id
    args = stmt.value.args
    if fname == "TypeVar" and len(args) == 1 and not stmt.value.keywords and isinstance(
        args[0], ast.Constant
    ) and args[0].value == name:
        return name
    return None


def _is_str(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(
        stmt.value.value, str)


def parse_tree(src: Source, tree: ast.Module) -> IRModule | PrimFunc:
    aliases = dict(DEFAULT_ALIASES)
    p = Parser(src, aliases)
    type_vars: list[str] = []
    modules: list[tuple[ast.AST, IRModule]] = []
    funcs: list[tuple[ast.AST, PrimFunc]] = []
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            _import_aliases(stmt, aliases)
        elif isinstance(stmt, ast.ClassDef):
            modules.append((stmt, parse_class(src, stmt, aliases, type_vars=tuple(type_vars))))
        elif isinstance(stmt, ast.FunctionDef):
            f = parse_function(src, stmt, aliases, type_vars=tuple(type_vars))
            if f is not None:
                funcs.append((stmt, f))
        elif i == 0 and _is_str(stmt) or isinstance(stmt, ast.Pass):
            continue
        elif _type_var(stmt) is not None:
            type_vars.append(_type_var(stmt))  # type: ignore[arg-type]
        else:
            raise p.err(stmt, "TVMScript text holds imports, @T.prim_func functions and "
                              "@I.ir_module classes; this statement is none of those")
    if modules and (funcs or len(modules) > 1):
        extra = funcs[0][0] if funcs else modules[1][0]
        raise p.err(extra, "the text defines more than one module (or a module and "
                           "separate functions); from_script reads one")
    if modules:
        return modules[0][1]
    if not funcs:
        raise ParseError("the text holds no @T.prim_func function and no @I.ir_module class",
                         filename=src.filename)
    if len(funcs) == 1:
        return funcs[0][1]
    names = [f.name for _, f in funcs]
    for k, (node, f) in enumerate(funcs):
        if f.name in names[:k]:
            raise p.err(node, f"the text defines `{f.name}` twice")
    return IRModule.from_funcs(*(f for _, f in funcs))


def parse_source(text: str, filename: str = "<script>", line_offset: int = 0,
                 col_offset: int = 0) -> tuple[Source, ast.Module]:
    """Dedent and parse to an ``ast`` (no code runs), mapping Python's syntax errors
    to :class:`ParseError`."""
    if not isinstance(text, str):
        raise TypeError(f"TVMScript text must be a str, got {type(text).__name__}")
    dedented = textwrap.dedent(text)
    removed = _removed_indent(text, dedented)
    src = Source(dedented, filename, line_offset, col_offset + removed)
    try:
        tree = ast.parse(dedented, filename=filename)
    except SyntaxError as e:
        line = e.text if e.text is not None else None
        raise ParseError(f"invalid Python syntax: {e.msg}",
                         (e.lineno or 0) + line_offset if e.lineno else None,
                         (e.offset or 0) + col_offset + removed if e.offset else None,
                         line, filename) from None
    except (RecursionError, MemoryError):
        raise ParseError("the text is nested too deeply to read", filename=filename) from None
    return src, tree


def _removed_indent(text: str, dedented: str) -> int:
    for a, b in zip(text.splitlines(), dedented.splitlines()):
        if b.strip():
            return len(a) - len(b)
    return 0


def from_script(text: str, *, filename: str = "<script>") -> IRModule | PrimFunc:
    """Read TVMScript text: an ``@I.ir_module`` class gives an :class:`IRModule`, a lone
    ``@T.prim_func`` function a :class:`PrimFunc` (several: an IRModule of them).

    Both the classic syntax (``from tvm.script import tir as T``, ``T.block``) and
    TVM >= 0.24's (``tirx``, ``T.sblock``) are read; the text is parsed with Python's
    ``ast`` and never executed. Unsupported constructs raise :class:`ParseError`
    with the line and column.

    >>> import workbench as wb
    >>> text = wb.workloads.mm_relu(64, 64, 64).script()
    >>> func = wb.from_script(text)
    >>> func.name, wb.structural_equal(func, wb.workloads.mm_relu(64, 64, 64))
    ('mm_relu', True)
    """
    src, tree = parse_source(text, filename)
    try:
        return parse_tree(src, tree)
    except RecursionError:
        raise ParseError("the text is nested too deeply to read", filename=filename) from None
