"""``@wb.prim_func`` and ``@wb.ir_module``: parse a Python function's or class's
source text (``inspect``), never running its body."""

from __future__ import annotations

import ast
import inspect
import linecache
import types
from typing import Any

from ..ir.stmt import IRModule, PrimFunc
from . import namespace
from .errors import ParseError
from .exprs import Unreadable
from .module import _MODULES, parse_class, parse_function, parse_source
from .parser import DEFAULT_ALIASES


def _aliases(globals_: dict[str, Any]) -> dict[str, str]:
    """Names the defining module bound to the TVMScript namespaces (``T``, ``I``)."""
    aliases = dict(DEFAULT_ALIASES)
    for name, value in list(globals_.items()):
        if value is namespace.tir or value is namespace.tirx:
            aliases[name] = "T"
        elif value is namespace.ir:
            aliases[name] = "I"
        elif issubclass(type(value), types.ModuleType):  # no __class__ lookup on value
            prefix = _MODULES.get(getattr(value, "__name__", ""))
            if prefix is not None:
                aliases[name] = prefix
    return aliases


_PLAIN = (str, int, float, bool)


def free_constants(func: types.FunctionType) -> dict[str, Any]:
    """The plain constants (``str``, ``int``, ``float``, ``bool``; exact types) that the
    free names of ``func`` refer to: its closure cells, then the module globals it
    names. Reading a cell's or a global's value runs no code; any other value (an
    object, a function, a subclass of ``str``...) is left out, so the name stays
    unknown to the reader.

    >>> label, shape = "tile", (4, 4)
    >>> def f():
    ...     return label, shape
    >>> free_constants(f)["label"], free_constants(f)["shape"]
    ('tile', <a tuple of the Python scope>)
    """
    code = func.__code__
    out: dict[str, Any] = {}
    g = func.__globals__
    for name in code.co_names:
        if name in g:
            out[name] = _plain(g[name])
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell (assigned after the definition)
            continue
        out[name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    """``value`` when it is a plain constant; else a marker naming its type, so the
    reader can say why it does not use it. Identity tests and the C-level type name
    only: nothing a metaclass defines (``__eq__``, a ``__name__`` property) runs."""
    cls = type(value)
    if any(cls is t for t in _PLAIN):
        return value
    return Unreadable(_TYPE_NAME.__get__(cls, type))


_TYPE_NAME = type.__dict__["__name__"]


def _function_source(func: Any) -> tuple[str, str, int]:
    try:
        lines, lnum = inspect.getsourcelines(func)
        filename = inspect.getsourcefile(func) or "<unknown>"
    except (OSError, TypeError) as e:
        raise ParseError(f"cannot read the source of {func!r}: {e}") from None
    return "".join(lines), filename, max(lnum - 1, 0)


def _class_source(cls: type) -> tuple[str, str, int]:
    """The class's source. Its methods' code objects say exactly where it is (also in
    a notebook cell, where ``inspect`` cannot find classes), so they are tried first:
    ``class Name`` is searched upwards from the first method."""
    for value in vars(cls).values():
        code = getattr(value, "__code__", None)
        if code is None:
            continue
        all_lines = linecache.getlines(code.co_filename)
        head = f"class {cls.__name__}"
        for i in range(min(code.co_firstlineno - 1, len(all_lines) - 1), -1, -1):
            stripped = all_lines[i].lstrip()
            if stripped.startswith(head) and stripped[len(head):len(head) + 1] in ("(", ":"):
                # from the ``class`` line: the decorators already ran, nothing to read
                block = inspect.getblock(all_lines[i:])
                return "".join(block), code.co_filename, i
        break
    try:
        lines, lnum = inspect.getsourcelines(cls)
        filename = inspect.getsourcefile(cls) or "<unknown>"
        return "".join(lines), filename, max(lnum - 1, 0)
    except (OSError, TypeError):
        pass
    raise ParseError(f"cannot read the source of class {cls.__name__}; use "
                     "wb.from_script(text) instead")


def prim_func(func: Any = None, /, *, private: bool = False, s_tir: bool = False,
              check_well_formed: bool = True) -> Any:
    """Decorator: the function's TVMScript source as a :class:`PrimFunc`.

    Python runs the ``def`` line (its annotations), so write them with the inert
    namespace ``from workbench.script import tir as T``; the body is only read. The
    options are TVM's and change nothing here.

    >>> import workbench as wb
    >>> from workbench.script import tir as T
    >>> @wb.prim_func
    ... def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    ...     for i in range(8):
    ...         with T.block("B"):
    ...             vi = T.axis.spatial(8, i)
    ...             B[vi] = A[vi] + T.float32(1)
    >>> add_one.name, wb.ir.block_names(add_one)
    ('add_one', ['B'])
    """

    def wrap(f: Any) -> PrimFunc:
        if isinstance(f, PrimFunc):
            return f
        if not isinstance(f, types.FunctionType):
            raise TypeError(f"prim_func decorates a function, got {type(f).__name__}")
        text, filename, offset = _function_source(f)
        src, tree = parse_source(text, filename, offset)
        node = _only(tree, ast.FunctionDef, src, f.__name__)
        result = parse_function(src, node, _aliases(f.__globals__), check_decorators=False,
                                constants=free_constants(f))
        assert result is not None
        return result

    return wrap if func is None else wrap(func)


def ir_module(cls: Any = None, /) -> Any:
    """Decorator: the class's TVMScript source as an :class:`IRModule` (its
    ``@T.prim_func`` methods are the functions).

    >>> import workbench as wb
    >>> from workbench.script import tir as T
    >>> @wb.ir_module
    ... class Module:
    ...     @T.prim_func
    ...     def copy(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    ...         for i in range(4):
    ...             with T.block("B"):
    ...                 vi = T.axis.spatial(4, i)
    ...                 B[vi] = A[vi]
    >>> Module.names
    ['copy']
    """

    def wrap(c: Any) -> IRModule:
        if isinstance(c, IRModule):
            return c
        if not isinstance(c, type):
            raise TypeError(f"ir_module decorates a class, got {type(c).__name__}")
        text, filename, offset = _class_source(c)
        src, tree = parse_source(text, filename, offset)
        node = _only(tree, ast.ClassDef, src, c.__name__)
        module = inspect.getmodule(c)
        aliases = _aliases(vars(module)) if module is not None else dict(DEFAULT_ALIASES)
        constants = {name: free_constants(v) for name, v in vars(c).items()
                     if isinstance(v, types.FunctionType)}
        return parse_class(src, node, aliases, check_decorators=False, constants=constants)

    return wrap if cls is None else wrap(cls)


def _only(tree: ast.Module, kind: type, src, name: str):
    for node in tree.body:
        if isinstance(node, kind) and node.name == name:
            return node
    raise ParseError(f"the source of `{name}` holds no {kind.__name__}", filename=src.filename)


__all__ = ["free_constants", "ir_module", "prim_func"]
