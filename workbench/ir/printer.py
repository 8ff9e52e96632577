"""TVMScript-style printing of the IR.

Two syntaxes: ``"classic"`` (``from tvm.script import tir as T``, ``T.block``) as in
most TensorIR tutorials, and ``"tirx"`` (TVM >= 0.24: ``T.sblock``,
``@T.prim_func(s_tir=True)``). Output is deterministic: the same IR always prints
the same text, which the golden tests and structural hashing rely on.

``marks`` maps a loop variable or a block name to a note; the line that opens that
loop/block gets ``# <-- note`` (used by ``ScheduleError.detail()``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .buffer import Buffer, BufferRegion, MatchBufferRegion
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BufferField,
    BufferLoad,
    Call,
    CallExtern,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IfThenElseExpr,
    IntImm,
    Let,
    Max,
    Min,
    Mul,
    Not,
    OpaqueCall,
    Or,
    PrimExpr,
    Select,
    StringImm,
    Sub,
    Var,
)
from .stmt import (
    Block,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IRModule,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)

SYNTAXES = ("classic", "tirx")
INDENT = "    "

_BIN = {
    Add: ("+", 4),
    Sub: ("-", 4),
    Mul: ("*", 5),
    Div: ("/", 5),
    FloorDiv: ("//", 5),
    FloorMod: ("%", 5),
    LT: ("<", 3),
    LE: ("<=", 3),
    GT: (">", 3),
    GE: (">=", 3),
    EQ: ("==", 3),
    NE: ("!=", 3),
    And: ("and", 1),
    Or: ("or", 0),
}


def _float_str(v: float) -> str:
    if v != v:
        return '"nan"'
    if v in (float("inf"), float("-inf")):
        return '"inf"' if v > 0 else '"-inf"'
    if float(v).is_integer() and abs(v) < 1e16:
        return str(int(v))
    return repr(float(v))


def expr_to_str(e: PrimExpr, prec: int = 0) -> str:
    """Print an expression; ``prec`` is the binding strength of the context."""
    if isinstance(e, Var):
        return e.name
    if isinstance(e, IntImm):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        if e.dtype == "int32":
            s = str(e.value)
            return f"({s})" if e.value < 0 and prec >= 5 else s
        return f"T.{e.dtype}({e.value})"
    if isinstance(e, FloatImm):
        return f"T.{e.dtype}({_float_str(e.value)})"
    if isinstance(e, BufferLoad):
        return _subscript(buffer_ident(e.buffer.name), [expr_to_str(i) for i in e.indices])
    op = _BIN.get(type(e))
    if op is not None:
        sym, p = op
        if isinstance(e, Div) and e.dtype != "float32" and not e.dtype.startswith("float"):
            return f"T.Div({expr_to_str(e.a)}, {expr_to_str(e.b)})"
        # left-associative: the right operand needs parentheses at equal precedence;
        # comparisons chain in Python (a < b == c), so both their operands do
        a = expr_to_str(e.a, p + 1 if p == 3 else p)
        b = expr_to_str(e.b, p + 1)
        s = f"{a} {sym} {b}"
        return f"({s})" if p < prec else s
    if isinstance(e, Min):
        return f"T.min({expr_to_str(e.a)}, {expr_to_str(e.b)})"
    if isinstance(e, Max):
        return f"T.max({expr_to_str(e.a)}, {expr_to_str(e.b)})"
    if isinstance(e, Not):
        s = f"not {expr_to_str(e.a, 2)}"
        return f"({s})" if prec > 2 else s
    if isinstance(e, Select):
        return (
            f"T.Select({expr_to_str(e.condition)}, {expr_to_str(e.true_value)}, "
            f"{expr_to_str(e.false_value)})"
        )
    if isinstance(e, Cast):
        return f'T.Cast("{e.dtype}", {expr_to_str(e.value)})'
    if isinstance(e, Call):
        return f"T.{e.op}({', '.join(expr_to_str(a) for a in e.args)})"
    if isinstance(e, IfThenElseExpr):
        return (
            f"T.if_then_else({expr_to_str(e.condition)}, {expr_to_str(e.true_value)}, "
            f"{expr_to_str(e.false_value)})"
        )
    if isinstance(e, Let):
        return (
            f"T.Let({expr_to_str(e.body)}, where={{{e.var.name}: {expr_to_str(e.value)}}})"
        )
    if isinstance(e, CallExtern):
        fn = "T.call_pure_extern" if e.pure else "T.call_extern"
        args = "".join(", " + expr_to_str(a) for a in e.args)
        return f'{fn}("{e.dtype}", {_str_literal(e.name)}{args})'
    if isinstance(e, StringImm):
        return _str_literal(e.value)
    if isinstance(e, OpaqueCall):
        if e.op == "type_annotation":
            return f'T.type_annotation("{e.dtype}")'
        return f"T.{e.op}({', '.join(expr_to_str(a) for a in e.args)})"
    if isinstance(e, BufferField):
        return f"{buffer_ident(e.buffer.name)}.{e.field}"
    raise TypeError(f"cannot print {type(e).__name__}")


def _str_literal(v: str) -> str:
    """A double-quoted Python string literal."""
    import json

    return json.dumps(v, ensure_ascii=False)


def extent_to_str(value, dtype: str = "int32") -> str:
    """A loop extent / shape entry: ints print in ``dtype`` (``T.int64(128)``)."""
    if isinstance(value, PrimExpr):
        return expr_to_str(value)
    return str(value) if dtype == "int32" else f"T.{dtype}({value})"


def region_to_str(r: BufferRegion) -> str:
    parts = []
    for mn, ext in r.region:
        if isinstance(ext, IntImm) and ext.value == 1:
            parts.append(expr_to_str(mn))
        else:
            parts.append(f"{expr_to_str(mn)}:{expr_to_str(mn + ext)}")
    return _subscript(buffer_ident(r.buffer.name), parts)


def buffer_ident(name: str) -> str:
    """A buffer's name as a Python identifier, as TVM's printer writes it: a cache in scope
    ``wmma.matrix_b`` is named ``B_wmma.matrix_b`` but printed ``B_wmma_matrix_b``, so
    the printed text parses back.

    >>> buffer_ident("B_wmma.matrix_b"), buffer_ident("A_shared")
    ('B_wmma_matrix_b', 'A_shared')
    """
    if name.isidentifier():
        return name
    name = re.sub(r"\W", "_", name)
    return name if name.isidentifier() else f"_{name}"


def _subscript(name: str, parts: list[str]) -> str:
    """``A[i, j]``; a zero-dimensional buffer is ``A[()]`` (as TVM prints it)."""
    return f"{name}[{', '.join(parts)}]" if parts else f"{name}[()]"


def _value_str(v) -> str:
    if isinstance(v, bool):
        return "T.bool(True)" if v else "T.bool(False)"
    if isinstance(v, str):
        return _str_literal(v)  # escapes quotes, backslashes and newlines alike
    if isinstance(v, PrimExpr):
        return expr_to_str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value_str(x) for x in v) + "]"
    if isinstance(v, dict):  # keys sorted and bools bare inside a dict, as TVM prints
        items = (f"{_str_literal(k)}: {repr(x) if isinstance(x, bool) else _value_str(x)}"
                 for k, x in sorted(v.items()))
        return "{" + ", ".join(items) + "}"
    return repr(v)


def _annotations_str(ann) -> str:
    return "{" + ", ".join(f'"{k}": {_value_str(v)}' for k, v in ann) + "}"


def _shape_str(shape: tuple, dtype: str = "int32") -> str:
    body = ", ".join(extent_to_str(s, dtype) for s in shape)
    return "(" + body + ("," if len(shape) == 1 else "") + ")"


def _strides_str(b: Buffer) -> str:
    """``, strides=("lda", 1)`` for a buffer that declares stride variables (quoted: the
    declaration introduces them, as TVM prints it), else ``""``."""
    if not b.strides:
        return ""
    parts = [f'"{x.name}"' if isinstance(x, Var) else expr_to_str(x) for x in b.strides]
    return f", strides=({', '.join(parts)}{',' if len(parts) == 1 else ''})"


def _match_buffer_str(m: MatchBufferRegion) -> str:
    b = m.buffer
    args = [region_to_str(m.source), _shape_str(b.shape, b.index_dtype)]
    if b.dtype != "float32":
        args.append(f'"{b.dtype}"')
    if b.scope != "global":
        args.append(f'scope="{b.scope}"')
    if b.strides:  # the stride variables are declared on the lines before
        parts = [expr_to_str(x) for x in b.strides]
        args.append(f"strides=({', '.join(parts)}{',' if len(parts) == 1 else ''})")
    if m.offset_factor:
        args.append(f"offset_factor={m.offset_factor}")
    return f"{buffer_ident(b.name)} = T.match_buffer({', '.join(args)})"


def _alloc_str(b: Buffer, syntax: str = "classic") -> str:
    fn = "T.sblock_alloc_buffer" if syntax == "tirx" else "T.alloc_buffer"
    args = [_shape_str(b.shape, b.index_dtype)]
    if b.dtype != "float32":
        args.append(f'"{b.dtype}"')
    if b.scope != "global":
        args.append(f'scope="{b.scope}"')
    return f"{buffer_ident(b.name)} = {fn}({', '.join(args)})"


class _Printer:
    def __init__(self, syntax: str, marks: Mapping | None):
        if syntax not in SYNTAXES:
            raise ValueError(f"unknown syntax {syntax!r}; choose one of {SYNTAXES}")
        self.syntax = syntax
        self.block_kw = "T.sblock" if syntax == "tirx" else "T.block"
        self.marks = dict(marks or {})
        self.lines: list[str] = []
        # extents of the enclosing loops: T.axis.remap re-reads an iterator's extent
        # from its loop, so remap is printed only where they agree
        self.loop_extent: dict[Var, object] = {}

    def emit(self, depth: int, text: str, mark_key=None) -> None:
        line = INDENT * depth + text
        if mark_key is not None and mark_key in self.marks:
            line += f"  # <-- {self.marks[mark_key]}"
        self.lines.append(line)

    # -- statements
    def stmt(self, s: Stmt, d: int) -> None:
        if isinstance(s, SeqStmt):
            for n, x in enumerate(s.stmts):
                if isinstance(x, LetStmt):
                    self.let_stmt(x, d, last=n == len(s.stmts) - 1)
                else:
                    self.stmt(x, d)
        elif isinstance(s, For):
            self.loop(s, d)
        elif isinstance(s, Block):
            self.block(s, d)
        elif isinstance(s, BufferStore):
            target = _subscript(buffer_ident(s.buffer.name), [expr_to_str(i) for i in s.indices])
            self.emit(d, f"{target} = {expr_to_str(s.value)}")
        elif isinstance(s, IfThenElse):
            self.emit(d, f"if {expr_to_str(s.condition)}:")
            self.stmt(s.then_case, d + 1)
            if s.else_case is not None:
                self.emit(d, "else:")
                self.stmt(s.else_case, d + 1)
        elif isinstance(s, Evaluate):
            if isinstance(s.value, (CallExtern, Call, IfThenElseExpr, OpaqueCall)):
                self.emit(d, expr_to_str(s.value))  # TVM prints a called value bare
            else:
                self.emit(d, f"T.evaluate({expr_to_str(s.value)})")
        elif isinstance(s, LetStmt):
            self.let_stmt(s, d, last=True)
        else:
            raise TypeError(f"cannot print {type(s).__name__}")

    def let_stmt(self, s: LetStmt, d: int, last: bool) -> None:
        """``x: T.float32 = v`` + body at the same depth (tirx: ``x: T.let[T.float32]``);
        classic prints the scoped ``with T.LetStmt(v) as x:`` when statements follow."""
        value = expr_to_str(s.value)
        if self.syntax == "classic" and not last:
            self.emit(d, f"with T.LetStmt({value}) as {s.var.name}:")
            self.stmt(s.body, d + 1)
            return
        ty = f"T.let[T.{s.var.dtype}]" if self.syntax == "tirx" else f"T.{s.var.dtype}"
        self.emit(d, f"{s.var.name}: {ty} = {value}")
        self.stmt(s.body, d)

    def _plain(self, s: Stmt) -> bool:
        return (
            isinstance(s, For)
            and s.kind == "serial"
            and not s.annotations
            and not s.min
            and s.loop_var not in self.marks
        )

    def loop(self, s: For, d: int) -> None:
        if self._plain(s) and self._plain(s.body):
            chain = [s]
            while self._plain(chain[-1].body):
                chain.append(chain[-1].body)  # type: ignore[arg-type]
            names = ", ".join(x.loop_var.name for x in chain)
            exts = ", ".join(extent_to_str(x.extent, x.loop_var.dtype) for x in chain)
            for x in chain:
                self.loop_extent[x.loop_var] = x.extent
            self.emit(d, f"for {names} in T.grid({exts}):")
            self.stmt(chain[-1].body, d + 1)
            return
        ann = f", annotations={_annotations_str(s.annotations)}" if s.annotations else ""
        ext = extent_to_str(s.extent, s.loop_var.dtype)
        if s.min:  # TVM prints range(min, min + extent)
            ext = (f"{extent_to_str(s.min, s.loop_var.dtype)}, "
                   f"{extent_to_str(s.end, s.loop_var.dtype)}")
        if s.kind == "serial":
            head = f"T.serial({ext}{ann})" if ann else f"range({ext})"
        elif s.kind == "thread_binding":
            head = f'T.thread_binding({ext}, thread="{s.thread_tag}"{ann})'
        else:
            fn = {"parallel": "parallel", "vectorized": "vectorized", "unrolled": "unroll"}
            head = f"T.{fn[s.kind]}({ext}{ann})"
        self.emit(d, f"for {s.loop_var.name} in {head}:", s.loop_var)
        # an iterator bound to a loop over [min, end) has the domain [0, end) (iter vars
        # start at 0), which T.axis.remap over that loop reads back
        self.loop_extent[s.loop_var] = s.end
        self.stmt(s.body, d + 1)

    def _remappable(self, iv, v: PrimExpr) -> bool:
        """``T.axis.remap`` says: bound to a loop variable, over that loop's extent."""
        if not isinstance(v, Var) or v.dtype != iv.var.dtype:
            return False
        ext = self.loop_extent.get(v)
        if isinstance(ext, int) or isinstance(iv.extent, int):
            return ext == iv.extent
        return ext is not None and expr_to_str(ext) == expr_to_str(iv.extent)

    def block(self, b: Block, d: int) -> None:
        self.emit(d, f'with {self.block_kw}("{b.name}"):', b.name)
        d1 = d + 1
        if b.iter_vars:
            if all(self._remappable(iv, v) and iv.kind != "O"
                   for iv, v in zip(b.iter_vars, b.iter_values)):
                names = ", ".join(iv.var.name for iv in b.iter_vars)
                kinds = "".join(iv.kind for iv in b.iter_vars)
                vals = ", ".join(expr_to_str(v) for v in b.iter_values)
                self.emit(d1, f'{names} = T.axis.remap("{kinds}", [{vals}])')
            else:
                for iv, v in zip(b.iter_vars, b.iter_values, strict=True):
                    kind = {"S": "spatial", "R": "reduce", "O": "opaque"}[iv.kind]
                    ext = extent_to_str(iv.extent, iv.var.dtype)
                    self.emit(d1, f"{iv.var.name} = T.axis.{kind}({ext}, {expr_to_str(v)})")
        if not (isinstance(b.predicate, IntImm) and b.predicate.value):
            self.emit(d1, f"T.where({expr_to_str(b.predicate)})")
        self.emit(d1, f"T.reads({', '.join(region_to_str(r) for r in b.reads or ())})")
        self.emit(d1, f"T.writes({', '.join(region_to_str(r) for r in b.writes or ())})")
        if b.annotations:
            attr = "T.sblock_attr" if self.syntax == "tirx" else "T.block_attr"
            self.emit(d1, f"{attr}({_annotations_str(b.annotations)})")
        for buf in b.alloc_buffers:
            self.emit(d1, _alloc_str(buf, self.syntax))
        declared: set = set()
        for m in b.match_buffers:  # stride variables of the views: ``s0 = T.int32()``
            for x in m.buffer.strides:
                if isinstance(x, Var) and x not in declared:
                    declared.add(x)
                    self.emit(d1, f"{x.name} = T.{x.dtype}()")
        for m in b.match_buffers:
            self.emit(d1, _match_buffer_str(m))
        if b.init is not None:
            self.emit(d1, "with T.init():")
            self.stmt(b.init, d1 + 1)
        self.stmt(b.body, d1)

    # -- functions
    def func(self, f: PrimFunc, d: int) -> None:
        deco = "@T.prim_func(s_tir=True)" if self.syntax == "tirx" else "@T.prim_func"
        self.emit(d, deco)
        params = ", ".join(
            f"var_{p.name}: T.handle"
            if not p.is_static
            else f'{p.name}: T.Buffer({_shape_str(p.shape, p.index_dtype)}, "{p.dtype}"'
                 f'{_strides_str(p)})'
            for p in f.params
        )
        self.emit(d, f"def {f.name}({params}):")
        attrs = dict(f.attrs)
        if self.syntax == "tirx":  # as TVM >= 0.24 prints it
            attrs.setdefault("tirx.noalias", True)
        else:
            attrs.setdefault("global_symbol", f.name)
            attrs.setdefault("tir.noalias", True)
        text = _annotations_str(tuple(attrs.items()))
        if self.syntax == "tirx":
            text = text.replace("T.bool(True)", "True").replace("T.bool(False)", "False")
        self.emit(d + 1, f"T.func_attr({text})")
        for v in f.shape_vars:  # symbolic shapes: declared, then matched (as TVM prints)
            self.emit(d + 1, f"{v.name} = T.{v.dtype}()")
        for p in f.params:
            if not p.is_static:
                dt = "" if p.dtype == "float32" else f', "{p.dtype}"'
                shape = _shape_str(p.shape, p.index_dtype)
                self.emit(d + 1, f"{p.name} = T.match_buffer(var_{p.name}, {shape}{dt}"
                                 f"{_strides_str(p)})")
        root = f.body
        self.emit(d + 1, f'# with {self.block_kw}("root"):', root.name)
        for buf in root.alloc_buffers:
            self.emit(d + 1, _alloc_str(buf, self.syntax))
        self.stmt(root.body, d + 1)

    def header(self, module: bool) -> None:
        if module:
            self.lines.append("# from tvm.script import ir as I")
        mod = "tirx" if self.syntax == "tirx" else "tir"
        self.lines.append(f"# from tvm.script import {mod} as T")
        self.lines.append("")


def func_to_str(f: PrimFunc, syntax: str = "classic", marks: Mapping | None = None) -> str:
    p = _Printer(syntax, marks)
    p.header(module=False)
    p.func(f, 0)
    return "\n".join(p.lines)


def module_to_str(m: IRModule, syntax: str = "classic", marks: Mapping | None = None) -> str:
    p = _Printer(syntax, marks)
    p.header(module=True)
    p.lines.append("@I.ir_module")
    p.lines.append("class Module:")
    for i, (_, f) in enumerate(m.functions):
        if i:
            p.lines.append("")
        p.func(f, 1)
    return "\n".join(p.lines)


def stmt_to_str(s: Stmt, syntax: str = "classic", marks: Mapping | None = None) -> str:
    p = _Printer(syntax, marks)
    p.stmt(s, 0)
    return "\n".join(p.lines)


def any_to_str(x, syntax: str = "classic") -> str:
    if isinstance(x, IRModule):
        return module_to_str(x, syntax)
    if isinstance(x, PrimFunc):
        return func_to_str(x, syntax)
    if isinstance(x, Stmt):
        return stmt_to_str(x, syntax)
    if isinstance(x, PrimExpr):
        return expr_to_str(x)
    raise TypeError(f"cannot print {type(x).__name__}")


# ---------------------------------------------------------------------------
# notebook display


def highlight_html(code: str, style: str | None = None) -> str:
    """Highlighted HTML with inline styles (no CSS needed).

    Without ``style`` the colours follow the JupyterLab theme (light or dark; see
    :mod:`workbench.ir.highlight`); ``style`` names a Pygments style instead.
    """
    if style is None:
        from .highlight import highlight_html as themed

        return themed(code)
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    fmt = HtmlFormatter(noclasses=True, style=style, nowrap=False)
    return highlight(code, PythonLexer(), fmt)


def show(code: str, style: str | None = None) -> None:
    """Display highlighted code in a notebook; print it elsewhere."""
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display

        if get_ipython() is not None:
            display(HTML(highlight_html(code, style)))
            return
    except ImportError:  # pragma: no cover - IPython is a dependency of the lab extra
        pass
    print(code)
