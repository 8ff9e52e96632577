"""Statements, blocks and functions of TVMScript, read from Python's ``ast``.

:class:`Parser` walks one ``@T.prim_func`` definition and builds a
:class:`~workbench.ir.PrimFunc`. Nothing in the text is executed: decorators,
annotations and calls are *recognised by name* (``T.axis.remap``) and their
arguments read as TVMScript expressions (:mod:`.exprs`); anything else is a
:class:`~.errors.ParseError` pointing at the offending source.

Both dialects are accepted in any text: ``T.block`` / ``T.sblock``,
``T.alloc_buffer`` / ``T.sblock_alloc_buffer``, ``T.block_attr`` /
``T.sblock_attr``.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from ..ir import expr as E
from ..ir.buffer import Buffer
from ..ir.functor import expr_vars
from ..ir.stmt import (
    THREAD_TAGS,
    Block,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)
from .blocks import _AXIS, _AXIS_OTHER, _BLOCK, BlockParser, Frame, _apply_alignment
from .exprs import DTYPE_CTORS, Handle, Qual, _kind
from .layout import check_layout, declared_stride_vars, scope_value

_MISSING = object()

DEFAULT_ALIASES = {"T": "T", "I": "I", "R": "R", "tvm": "tvm", "wb": "wb", "workbench": "wb"}

_LOOP_KINDS = {
    "T.serial": "serial",
    "T.parallel": "parallel",
    "T.vectorized": "vectorized",
    "T.unroll": "unrolled",
    "T.thread_binding": "thread_binding",
}
_ALLOC = ("T.alloc_buffer", "T.sblock_alloc_buffer")
# attributes every printed function carries; a parsed function does not keep them
_NOALIAS = ("tir.noalias", "tirx.noalias")


class Parser(BlockParser):
    """Reads one function; ``aliases`` maps import names to ``T``/``I``/``R``/``tvm``."""

    def __init__(self, src, aliases: dict[str, str] | None = None,
                 type_vars: tuple[str, ...] = (), constants: dict[str, Any] | None = None):
        self.src = src
        self.constants = dict(constants or {})
        self.type_vars = type_vars
        self.weak: set[E.Var] = set()  # TypeVar names: a declaration in the function wins
        self.env: dict[str, Any] = {}
        self.undo: list[list[tuple[str, Any]]] = [[]]
        self.aliases = dict(DEFAULT_ALIASES if aliases is None else aliases)
        self.frames: list[Frame] = []
        self.nest = 0  # loops / ifs / scoped lets entered
        self.block_names: dict[str, ast.AST] = {}
        self.buffer_names: set[str] = set()
        self.loop_dom: dict[E.Var, int | E.PrimExpr] = {}
        self.attrs: dict[str, Any] = {}
        self.symbolic: list[E.Var] = []
        self.declared_strides: dict[Buffer, tuple] = {}
        # buffers whose first element may sit anywhere in their array (views, and buffers
        # declared with an offset_factor): ``A.access_ptr`` adds ``A.elem_offset``, as TVM
        self.offset_buffers: set[Buffer] = set()
        # variables declared in a block (``s0 = T.int32()``) for its views' strides and
        # elem_offset; the frame declaring each, and those a view took as its elem_offset
        self.block_vars: dict[E.Var, tuple[Any, ast.AST]] = {}
        self.view_offsets: set[E.Var] = set()

    # -- scopes ----------------------------------------------------------------
    def push(self) -> None:
        self.undo.append([])

    def pop(self) -> None:
        for name, old in reversed(self.undo.pop()):
            if old is _MISSING:
                self.env.pop(name, None)
            else:
                self.env[name] = old

    def bind(self, name: str, value: Any) -> None:
        self.undo[-1].append((name, self.env.get(name, _MISSING)))
        self.env[name] = value

    def nested(self, nodes: list[ast.stmt]) -> Stmt:
        """A loop / if / scoped-let body: a new scope, one level deeper."""
        self.push()
        self.nest += 1
        try:
            return self.seq(nodes)
        finally:
            self.nest -= 1
            self.pop()

    # -- functions ---------------------------------------------------------------
    def function(self, node: ast.FunctionDef) -> PrimFunc:
        """The PrimFunc of a ``def`` (its decorators were checked by the caller)."""
        a = node.args
        for bad, what in ((a.vararg, "*args"), (a.kwarg, "**kwargs")):
            if bad is not None:
                raise self.err(bad, f"{what} parameters are not supported in a prim_func")
        if a.kwonlyargs or a.posonlyargs:
            raise self.err(node, "keyword-only and positional-only parameters are not "
                                 "supported in a prim_func")
        defaults = [d for d in a.defaults + a.kw_defaults if d is not None]
        if defaults:
            raise self.err(defaults[0], "a prim_func parameter cannot have a default value")
        if node.returns is not None and not (
            isinstance(node.returns, ast.Constant) and node.returns.value is None
        ):
            raise self.err(node.returns, "a prim_func returns nothing; remove the return "
                                         "annotation")
        for name in self.type_vars:  # TVM prints int64 shape variables as TypeVars
            self.weak.add(self.symbolic_var_named(name, "int64"))
        # scalar parameters first: buffer shapes anywhere in the signature may use them
        # (TVM prints ``A: T.Buffer(("n", 128))`` before ``n: T.int32``)
        scalars: dict[str, tuple[ast.arg, E.Var]] = {}
        for arg in a.args:
            dtype = self.scalar_param(arg)
            if dtype is not None:
                scalars[arg.arg] = (arg, self.symbolic_var_named(arg.arg, dtype))
        params: list[Buffer | Handle] = []
        for arg in a.args:
            if arg.arg in scalars:
                continue
            if arg.annotation is None:
                raise self.err(arg, f"parameter `{arg.arg}` needs a type: "
                                    f"`{arg.arg}: T.Buffer((128,), \"float32\")` or T.handle")
            p = self.param(arg)
            params.append(p)
            self.bind(arg.arg, p)

        body_nodes = list(node.body)
        if body_nodes and _is_docstring(body_nodes[0]):
            body_nodes = body_nodes[1:]
        root = Frame("root", None, is_root=True)
        self.frames.append(root)
        # function-level prelude: attrs, match_buffer, symbolic variables
        prelude, rest = self.split_prelude(body_nodes)
        for n in prelude:
            self.stmt(n)
        known = [p.buffer if isinstance(p, Handle) else p for p in params]
        if scalars and all(b is not None for b in known):  # every shape is known: check now
            self.check_scalars(scalars, known)  # type: ignore[arg-type]
        explicit = _explicit_root(self, rest)
        if explicit is not None:
            self.frames[-1] = root = Frame("root", explicit, is_root=True)
            self.push()
            body = self.seq(explicit.body)
            self.pop()
        else:
            body = self.seq(rest)
        self.frames.pop()

        buffers: list[Buffer] = []
        for arg, p in zip([x for x in a.args if x.arg not in scalars], params):
            if isinstance(p, Handle):
                if p.buffer is None:
                    raise self.err(arg, f"handle `{p.name}` is never matched: add "
                                        f"`X = T.match_buffer({p.name}, shape, dtype)`")
                buffers.append(p.buffer)
            else:
                buffers.append(p)
        block = self.make_block(root, body)
        attrs = tuple((k, v) for k, v in self.attrs.items()
                      if not (k == "global_symbol" and v == node.name)
                      and not (k in _NOALIAS and v is True))
        func = _make_func(node.name, tuple(buffers), block, attrs, self.symbolic)
        self.check_scalars(scalars, buffers)
        return _apply_alignment(func)

    def check_scalars(self, scalars: dict[str, tuple[ast.arg, E.Var]],
                      buffers: list[Buffer]) -> None:
        """Each scalar parameter must be a shape variable of some buffer parameter."""
        used: set[E.Var] = set()
        for b in buffers:
            for d in b.shape:
                if isinstance(d, E.PrimExpr):
                    used |= expr_vars(d)
        for arg, var in scalars.values():
            if var not in used:
                q = ast.unparse(arg.annotation)  # type: ignore[arg-type]
                raise self.err(arg.annotation, f"scalar parameter `{arg.arg}: {q}` is not "
                                               "used in any buffer shape; the workbench's "
                                               "functions take buffers, and reads a scalar "
                                               "parameter only as a shape variable (its "
                                               "value comes from the arrays passed)")

    def scalar_param(self, arg: ast.arg) -> str | None:
        """``n: T.int32`` / ``n: T.int64``: the dtype of a scalar parameter (read as a
        shape variable), None for other parameters."""
        ann = arg.annotation
        q = self.qual(ann) if ann is not None else None
        if q not in DTYPE_CTORS:
            return None
        dtype = DTYPE_CTORS[q]
        if dtype not in ("int32", "int64"):
            raise self.err(ann, f"scalar parameter `{arg.arg}: {q}` is not supported; only "
                                "int32 / int64 parameters used as buffer sizes are")
        return dtype

    def split_prelude(self, nodes: list[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
        """Leading T.func_attr / T.match_buffer / symbolic-variable statements."""
        i = 0
        while i < len(nodes):
            n = nodes[i]
            call = n.value if isinstance(n, (ast.Expr, ast.Assign)) else None
            if isinstance(n, ast.Assign) and isinstance(call, ast.Tuple) and call.elts and all(
                self.is_var_decl(e) for e in call.elts
            ):
                i += 1
                continue
            if not isinstance(call, ast.Call):
                break
            q = self.qual(call.func)
            if isinstance(n, ast.Expr) and q != "T.func_attr":
                break
            if isinstance(n, ast.Assign) and q != "T.match_buffer" and not self.is_var_decl(call):
                break
            i += 1
        return nodes[:i], nodes[i:]

    def is_var_decl(self, node: ast.AST) -> bool:
        """``T.int64()`` / ``T.int32()`` / ``T.var("int32")``: a symbolic variable."""
        if not isinstance(node, ast.Call):
            return False
        q = self.qual(node.func)
        return q == "T.var" or q in DTYPE_CTORS and not node.args and not node.keywords

    def param(self, arg: ast.arg) -> Buffer | Handle:
        ann = arg.annotation
        q = self.qual(ann.func if isinstance(ann, ast.Call) else
                      ann.value if isinstance(ann, ast.Subscript) else ann)
        if q == "T.handle" and not isinstance(ann, (ast.Call, ast.Subscript)):
            return Handle(arg.arg)
        if q == "T.Buffer":
            if isinstance(ann, ast.Call):
                args, kwargs = list(ann.args), {k.arg: k.value for k in ann.keywords}
            elif isinstance(ann, ast.Subscript):
                args, kwargs = self.index_nodes(ann), {}
            else:
                raise self.err(ann, "T.Buffer needs a shape: T.Buffer((128,), \"float32\")")
            return self.buffer_decl(arg.arg, ann, args, kwargs, "T.Buffer")
        raise self.err(ann, f"parameter `{arg.arg}` must be a T.Buffer(...) or T.handle")

    def quoted_var(self, name: str, node: ast.AST) -> E.Var:
        old = self.env.get(name)
        if isinstance(old, E.Var) and any(old is v for v in self.symbolic) \
                and old not in self.weak:
            return old
        if not name.isidentifier() or name in self.env and old not in self.weak:
            raise self.err(node, f"shape entry {name!r} is not a new variable name")
        return self.symbolic_var_named(name, "int32")

    def buffer_decl(self, name: str, node: ast.AST, args: list, kwargs: dict,
                    fn: str, view_of: Buffer | None = None) -> Buffer:
        """``T.Buffer`` / ``T.alloc_buffer`` / ``T.match_buffer`` arguments after the
        source: shape, dtype, ``scope=`` and the layout keywords (:mod:`.layout`);
        ``view_of`` is the source buffer of a block's match_buffer."""
        kwargs = dict(kwargs)
        names = ("shape", "dtype")
        for i, key in enumerate(names):
            if key in kwargs:
                if len(args) > i:
                    raise self.err(node, f"{fn}: `{key}` given twice")
                if len(args) < i:
                    raise self.err(node, f"{fn}: missing the shape")
                args = args + [kwargs.pop(key)]
        if not args:
            raise self.err(node, f"{fn} needs a shape")
        if len(args) > 2:
            raise self.err(args[2], f"{fn}: only the shape and the dtype are positional")
        shape = self.shape(args[0], fn, signature=fn == "T.Buffer")
        dtype = "float32"
        if len(args) == 2:
            dtype = self.string(args[1], f"{fn}'s dtype")
            if dtype not in E.ALL_DTYPES:
                raise self.err(args[1], f"{fn}: unknown dtype {dtype!r}")
        scope = "global"
        if "scope" in kwargs:
            snode = kwargs.pop("scope")
            scope = scope_value(self, self.expr(snode), snode, fn)
        of_node = kwargs.get("offset_factor")
        of_value = self.expr(of_node) if of_node is not None else 0
        if isinstance(of_value, E.IntImm):
            of_value = of_value.value
        offset = view_of is not None or of_value not in (0, None)
        strides = check_layout(self, fn, kwargs, shape, view_of)
        kept = tuple(strides) if declared_stride_vars(strides, shape, view_of) else ()
        if name in self.buffer_names:
            raise self.err(node, f"buffer name `{name}` is used twice; buffer names are unique "
                                 "within a function")
        self.buffer_names.add(name)
        try:
            buf = Buffer(name, shape, dtype, scope, strides=kept)
        except ValueError as e:
            raise self.err(node, str(e)) from None
        if strides is not None:
            self.declared_strides[buf] = strides
        if offset:
            self.offset_buffers.add(buf)
        return buf

    def shape(self, node: ast.AST, fn: str, signature: bool = False) -> tuple:
        v = self.expr(node)
        if isinstance(v, (int, E.PrimExpr, str)) and not isinstance(v, bool):
            v = (v,)
        if not isinstance(v, (tuple, list)):
            raise self.err(node, f"{fn}: the shape must be a tuple, got {_kind(v)}")
        if signature and any(isinstance(x, str) for x in v):
            # TVM prints an int32 shape variable quoted where it first appears
            v = tuple(self.quoted_var(x, node) if isinstance(x, str) else x for x in v)
        for x in v:
            if isinstance(x, bool) or not isinstance(x, (int, E.PrimExpr)) or (
                isinstance(x, E.PrimExpr) and x.dtype not in E.INT_DTYPES
            ):
                raise self.err(node, f"{fn}: shape entries must be integers, got {_kind(x)}")
        return tuple(v)

    # -- statements --------------------------------------------------------------
    def seq(self, nodes: list[ast.stmt]) -> Stmt:
        """A statement list; a let binding scopes over the statements after it."""
        out: list[Stmt] = []
        for i, n in enumerate(nodes):
            let = self.let_binding(n)
            if let is not None:
                var, value = let
                self.push()
                self.bind(var.name, var)
                rest = self.seq(nodes[i + 1:])
                self.pop()
                out.append(LetStmt(var, value, rest))
                break
            s = self.stmt(n)
            if s is not None:
                out.append(s)
        if not out:
            return Evaluate(E.IntImm(0))
        return out[0] if len(out) == 1 else SeqStmt(tuple(out))

    def stmt(self, n: ast.stmt) -> Stmt | None:
        fn = _STMT_DISPATCH.get(type(n))
        if fn is None:
            raise self.err(n, f"{_stmt_name(n)} is not supported by the workbench")
        return fn(self, n)

    def _pass(self, n: ast.Pass) -> None:
        return None

    def _expr_stmt(self, n: ast.Expr) -> Stmt | None:
        v = n.value
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            return None  # a string statement documents, as a comment does
        if isinstance(v, ast.Call):
            q = self.qual(v.func)
            handler = _CALL_STMTS.get(q) if q else None
            if handler is not None:
                return handler(self, v, q)
        value = self.expr(v)
        if isinstance(value, E.PrimExpr):
            return Evaluate(value)
        raise self.err(v, f"this statement computes {_kind(value)} and throws it away")

    def _evaluate(self, call: ast.Call, q: str) -> Stmt:
        if len(call.args) != 1 or call.keywords:
            raise self.err(call, "T.evaluate takes one expression")
        return Evaluate(self.prim(call.args[0]))

    def _func_attr(self, call: ast.Call, q: str) -> None:
        if len(self.frames) != 1 or not self.frame.is_root or self.nest:
            raise self.err(call, "T.func_attr belongs at the top of the function body")
        if len(call.args) != 1 or call.keywords:
            raise self.err(call, "T.func_attr takes one dict")
        d = self.expr(call.args[0])
        if not isinstance(d, dict):
            raise self.err(call.args[0], "T.func_attr takes a dict")
        for k, v in d.items():
            self.attrs[k] = self.ann_value(v, call.args[0])
        return None

    def _aug_assign(self, n: ast.AugAssign) -> Stmt:
        from .exprs import _ARITH

        if not isinstance(n.target, ast.Subscript):
            raise self.err(n.target, "`op=` updates a buffer element: `C[i] += x`")
        cls = _ARITH.get(type(n.op))
        if cls is None:
            raise self.err(n, "this update operator is not supported by the workbench")
        buf = self.expr(n.target.value)
        if not isinstance(buf, Buffer):
            raise self.err(n.target.value, f"`op=` needs a buffer, got {_kind(buf)}")
        idx = self.indices(buf, n.target)
        value = self.arith(cls, E.BufferLoad(buf, idx), self.expr(n.value), n)
        return BufferStore(buf, self.store_value(buf, value, n.value), idx)

    def store_value(self, buf: Buffer, v: Any, node: ast.AST) -> E.PrimExpr:
        """The value of a store into ``buf``, converted to ``buf.dtype`` as TVM's
        parser does: a value of another dtype is wrapped in ``T.Cast`` (a constant is
        converted instead: ``2.7`` into int32 is ``2``, truncated; a constant out of the
        buffer's range is refused)."""
        v = self.to_prim(v, node)  # a literal is read first (int32, float32...), then cast
        if v.dtype != buf.dtype:
            v = self.store_cast(v, buf, node)
        return v

    def store_cast(self, v: E.PrimExpr, buf: Buffer, node: ast.AST) -> E.PrimExpr:
        dtype = buf.dtype
        if "handle" in (v.dtype, dtype):
            raise self.err(node, f"a value of dtype {v.dtype} is stored into `{buf.name}` "
                                 f"of dtype {dtype}; a handle converts to nothing else")
        if not isinstance(v, (E.IntImm, E.FloatImm)):
            return E.Cast(dtype, v)
        if E.is_float(dtype):
            return E.FloatImm(float(v.value), dtype)
        value = math.trunc(v.value)
        lo, hi = E.dtype_limit(dtype, "min").value, E.dtype_limit(dtype, "max").value
        if not lo <= value <= hi:
            raise self.err(node, f"the constant {v.value!r} stored into `{buf.name}` is out "
                                 f"of the range of {dtype}")
        return E.IntImm(value, dtype)

    def _assign(self, n: ast.Assign) -> Stmt | None:
        if len(n.targets) != 1:
            raise self.err(n, "chained assignment is not supported by the workbench")
        target = n.targets[0]
        if isinstance(target, ast.Subscript):
            buf = self.expr(target.value)
            if not isinstance(buf, Buffer):
                raise self.err(target.value, f"assignment into {_kind(buf)}; only buffer "
                                             "elements can be stored")
            idx = self.indices(buf, target)
            return BufferStore(buf, self.store_value(buf, self.expr(n.value), n.value), idx)
        names = _target_names(self, target)
        value = n.value
        if isinstance(value, ast.Tuple) and len(names) == len(value.elts) and all(
            self.is_var_decl(e) for e in value.elts
        ):
            for name, call in zip(names, value.elts):
                self.declare_var(name, call, self.qual(call.func))  # type: ignore[union-attr]
            return None
        q = self.qual(value.func) if isinstance(value, ast.Call) else None
        if q in _AXIS or q == "T.axis.remap":
            self.axis(names, value, q, target)
            return None
        if q in _AXIS_OTHER:
            raise self.err(value, f"{q} iterators are not supported (only spatial, reduce "
                                  "and opaque)")
        if len(names) != 1:
            raise self.err(target, "unpacking is only supported for T.axis.remap")
        name = names[0]
        if q in _ALLOC:
            args = list(value.args)
            kwargs = {k.arg: k.value for k in value.keywords}
            buf = self.buffer_decl(name, value, args, kwargs, q)
            self.frame.allocs.append(buf)
            self.bind(name, buf)
            return None
        if q == "T.match_buffer":
            self.match_buffer(name, value)
            return None
        if self.is_var_decl(value):
            self.declare_var(name, value, q)  # type: ignore[arg-type]
            return None
        raise self.err(n.value, f"`{name} = {ast.unparse(n.value)}` is not supported here")

    def let_binding(self, n: ast.stmt) -> tuple[E.Var, E.PrimExpr] | None:
        """``x: T.float32 = value`` / ``x: T.let[T.float32] = value`` / ``x = expr``
        (an IR expression): a let binding of ``x``."""
        if isinstance(n, ast.AnnAssign):
            if not isinstance(n.target, ast.Name):
                raise self.err(n.target, "an annotated assignment binds a name")
            if n.value is None:
                raise self.err(n, f"`{n.target.id}` needs a value")
            dtype = self.let_dtype(n.annotation)
            value = self.prim(n.value, dtype)
            if dtype is None:
                dtype = value.dtype
            if value.dtype != dtype:
                raise self.err(n.value, f"`{n.target.id}` is declared {dtype} but the value "
                                        f"has dtype {value.dtype}")
            return E.Var(n.target.id, dtype), value
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and isinstance(n.targets[0], ast.Name):
            value = n.value
            q = self.qual(value.func) if isinstance(value, ast.Call) else None
            if q is not None and (q in _ASSIGN_CALLS or q in DTYPE_CTORS and not value.args):
                return None
            v = self.expr(value)
            if isinstance(v, E.PrimExpr):
                return E.Var(n.targets[0].id, v.dtype), v
            raise self.err(value, f"`{n.targets[0].id} = ...` binds {_kind(v)}; TVMScript "
                                  "binds only expressions, buffers and iterators")
        return None

    def let_dtype(self, ann: ast.AST) -> str | None:
        if isinstance(ann, ast.Subscript) and self.qual(ann.value) == "T.let":
            ann = ann.slice
        q = self.qual(ann)
        if q == "T.let":
            return None
        if q in DTYPE_CTORS:
            return DTYPE_CTORS[q]
        raise self.err(ann, "a let binding is annotated with its dtype: `x: T.float32 = ...`")

    def declare_var(self, name: str, call: ast.Call, q: str) -> None:
        if q == "T.var":
            if len(call.args) != 1 or call.keywords:
                raise self.err(call, "T.var takes the dtype: T.var(\"int32\")")
            dtype = self.string(call.args[0], "T.var's dtype")
        else:
            dtype = DTYPE_CTORS[q]
        if dtype not in ("int32", "int64"):
            raise self.err(call, f"symbolic variables are int32 or int64, not {dtype}")
        if not (self.frame.is_root and len(self.frames) == 1):
            if self.frame.is_root or self.nest != self.frame.nest:
                raise self.err(call, f"symbolic variable `{name}` must be declared at the top "
                                     "of the function (or of a block, for its T.match_buffer)")
            # in a block: a stride or elem_offset of the block's T.match_buffer views
            var = E.Var(name, dtype)
            self.bind(name, var)
            self.block_vars[var] = (self.frame, call)
            return
        old = self.env.get(name)
        if isinstance(old, E.Var) and any(old is v for v in self.symbolic) \
                and old not in self.weak:
            if old.dtype != dtype:
                raise self.err(call, f"symbolic variable `{name}` is {old.dtype} in the "
                                     f"signature, declared {dtype} here")
            return  # declared by the signature (TVM prints a quoted name there)
        self.symbolic_var_named(name, dtype)

    def symbolic_var_named(self, name: str, dtype: str) -> E.Var:
        var = E.Var(name, dtype)
        self.symbolic.append(var)
        self.bind(name, var)
        return var

    # -- iterators ---------------------------------------------------------------
    # -- loops -------------------------------------------------------------------
    def _for(self, n: ast.For) -> Stmt:
        if n.orelse:
            raise self.err(n.orelse[0], "`for ... else` is not supported by the workbench")
        names = _target_names(self, n.target)
        it = n.iter
        if not isinstance(it, ast.Call):
            raise self.err(it, "a loop runs over range(n), T.grid(...) or T.serial/parallel/"
                               "vectorized/unroll/thread_binding(...)")
        q = self.qual(it.func)
        if q is None and isinstance(it.func, ast.Name) and it.func.id == "range" \
                and "range" not in self.env:
            q = "range"
        if q == "T.grid":
            if it.keywords:
                raise self.err(it, "T.grid takes only extents")
            if len(it.args) != len(names):
                raise self.err(n.target, f"T.grid has {len(it.args)} extents for "
                                         f"{len(names)} loop variables")
            loops = [(name, self.extent(a, "T.grid"), "serial", None, (), 0)
                     for name, a in zip(names, it.args)]
        elif q == "range" or q in _LOOP_KINDS:
            if len(names) != 1:
                raise self.err(n.target, "one loop variable per loop (T.grid for several)")
            loops = [self.loop_head(names[0], it, q)]
        else:
            raise self.err(it, f"`{q or ast.unparse(it.func)}` does not make a loop")
        self.push()
        self.nest += 1
        vars_ = []
        for name, extent, *rest in loops:
            dtype = extent.dtype if isinstance(extent, E.PrimExpr) else "int32"
            v = E.Var(name, dtype)
            # an iterator remapped to a loop over [min, min + extent) spans [0, min + extent)
            self.loop_dom[v] = extent + rest[-1] if rest[-1] else extent
            self.bind(name, v)
            vars_.append(v)
        body = self.seq(n.body)
        self.nest -= 1
        self.pop()
        for v, (_name, extent, kind, tag, ann, lo) in reversed(list(zip(vars_, loops))):
            try:
                body = For(v, extent, kind, body, tag, ann, lo)
            except (TypeError, ValueError) as e:
                raise self.err(it, str(e)) from None
        return body

    def extent(self, node: ast.AST, fn: str):
        v = self.expr(node)
        if isinstance(v, bool) or not isinstance(v, (int, E.PrimExpr)) or (
            isinstance(v, E.PrimExpr) and v.dtype not in E.INT_DTYPES
        ):
            raise self.err(node, f"{fn}: a loop extent must be an integer, got {_kind(v)}")
        if isinstance(v, int) and v <= 0 or isinstance(v, E.IntImm) and v.value <= 0:
            raise self.err(node, f"{fn}: a loop extent must be positive, got {v}")
        return v

    def loop_head(self, name: str, call: ast.Call, q: str):
        args = list(call.args)
        kwargs = {k.arg: k.value for k in call.keywords}
        tag = None
        ann: tuple = ()
        if q == "range" and kwargs:
            raise self.err(call, "range takes no keywords")
        if "annotations" in kwargs:
            d = self.expr(kwargs.pop("annotations"))
            if d is not None:
                if not isinstance(d, dict):
                    raise self.err(call, f"{q}: annotations must be a dict")
                ann = tuple((k, self.ann_value(v, call)) for k, v in d.items())
        if q == "T.thread_binding":
            if "thread" in kwargs:
                tag = self.string(kwargs.pop("thread"), "thread")
            elif args and isinstance(args[-1], ast.Constant) and isinstance(args[-1].value, str):
                tag = self.string(args.pop(), "thread")
            if tag is None:
                raise self.err(call, "T.thread_binding needs thread=\"threadIdx.x\" (or "
                                     "another thread axis)")
            if tag not in THREAD_TAGS:
                raise self.err(call, f"unknown thread axis {tag!r}; one of "
                                     f"{', '.join(THREAD_TAGS)}")
        for key in ("start", "stop"):
            if key in kwargs:
                args.append(kwargs.pop(key))
        if kwargs:
            raise self.err(call, f"{q}: unexpected argument `{next(iter(kwargs))}`")
        lo = 0
        if len(args) == 2:
            lo = self.expr(args[0])
            if isinstance(lo, E.IntImm) and lo.dtype in E.INT_DTYPES:
                lo = lo.value
            if isinstance(lo, bool) or not isinstance(lo, int) or lo < 0:
                raise self.err(args[0], f"{q}: a loop starts at a constant integer >= 0 in "
                                        f"the workbench, got {_kind(lo)}")
            args = args[1:]
        if len(args) != 1:
            raise self.err(call, f"{q} takes the extent (or the start and the end)")
        end = self.extent(args[0], q) if not lo else self.expr(args[0])
        if lo:
            hi = end.value if isinstance(end, E.IntImm) and end.dtype in E.INT_DTYPES else end
            if isinstance(hi, bool) or not isinstance(hi, int) or hi <= lo:
                raise self.err(args[0], f"{q}({lo}, ...): the end must be a constant "
                                        f"integer above the start, got {_kind(end)}")
            end = E.IntImm(hi - lo, end.dtype) if isinstance(end, E.IntImm) else hi - lo
        return name, end, _LOOP_KINDS.get(q, "serial"), tag, ann, lo

    # -- with / if ---------------------------------------------------------------
    def _with(self, n: ast.With) -> Stmt | None:
        if len(n.items) != 1:
            raise self.err(n, "one context per `with` in TVMScript")
        item = n.items[0]
        call = item.context_expr
        q = self.qual(call.func) if isinstance(call, ast.Call) else self.qual(call)
        if q == "T.LetStmt" and isinstance(call, ast.Call):
            return self.scoped_let(n, call)
        if item.optional_vars is not None:
            raise self.err(item.optional_vars, "`with ... as name` is not supported in "
                                               "TVMScript")
        if q in _BLOCK and isinstance(call, ast.Call):
            return self.block(n, call, q)
        if q == "T.init" and isinstance(call, ast.Call):
            f = self.header(call, "T.init()")
            if call.args or call.keywords:
                raise self.err(call, "T.init() takes no arguments")
            if f.init is not None:
                raise self.err(call, f'block "{f.name}" has two T.init() sections')
            self.push()
            f.init = self.seq(n.body)
            self.pop()
            return None
        raise self.err(call, f"`with {ast.unparse(call)}` is not supported by the workbench")

    def scoped_let(self, n: ast.With, call: ast.Call) -> Stmt:
        """``with T.LetStmt(value) as x:`` (classic): ``x`` bound in the with-body."""
        target = n.items[0].optional_vars
        if not isinstance(target, ast.Name):
            raise self.err(call, "T.LetStmt binds a name: `with T.LetStmt(value) as x:`")
        if len(call.args) != 1 or call.keywords:
            raise self.err(call, "T.LetStmt takes the value")
        value = self.prim(call.args[0])
        var = E.Var(target.id, value.dtype)
        self.push()
        self.nest += 1
        self.bind(var.name, var)
        body = self.seq(n.body)
        self.nest -= 1
        self.pop()
        return LetStmt(var, value, body)

    def _if(self, n: ast.If) -> Stmt:
        cond = self.expr(n.test)
        if isinstance(cond, bool) or not isinstance(cond, E.PrimExpr) or cond.dtype != "bool":
            raise self.err(n.test, f"an `if` tests an IR condition, got {_kind(cond)}")
        then = self.nested(n.body)
        other = self.nested(n.orelse) if n.orelse else None
        return IfThenElse(cond, then, other)


def _target_names(p: Parser, target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)) and all(
        isinstance(e, ast.Name) for e in target.elts
    ):
        return [e.id for e in target.elts]  # type: ignore[attr-defined]
    raise p.err(target, "expected a name or a tuple of names")


def _is_docstring(n: ast.stmt) -> bool:
    return isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(
        n.value.value, str)


def _explicit_root(p: Parser, nodes: list[ast.stmt]) -> ast.With | None:
    """``with T.block("root"):`` as the whole function body."""
    body = [n for n in nodes if not _is_docstring(n)]
    if len(body) != 1 or not isinstance(body[0], ast.With) or len(body[0].items) != 1:
        return None
    call = body[0].items[0].context_expr
    if not isinstance(call, ast.Call) or p.qual(call.func) not in _BLOCK:
        return None
    if len(call.args) == 1 and isinstance(call.args[0], ast.Constant) \
            and call.args[0].value == "root":
        return body[0]
    return None


def _make_func(name: str, params: tuple, body: Block, attrs: tuple, symbolic: list) -> PrimFunc:
    return PrimFunc(name, params, body, attrs)


def _stmt_name(n: ast.AST) -> str:
    names = {
        ast.While: "a `while` loop",
        ast.Return: "`return`",
        ast.FunctionDef: "a nested function",
        ast.AsyncFunctionDef: "a nested function",
        ast.ClassDef: "a class",
        ast.Import: "`import` inside a function",
        ast.ImportFrom: "`import` inside a function",
        ast.Try: "`try`",
        ast.Raise: "`raise`",
        ast.Assert: "`assert` (use T.Assert)",
        ast.Delete: "`del`",
        ast.Global: "`global`",
        ast.Nonlocal: "`nonlocal`",
        ast.Break: "`break`",
        ast.Continue: "`continue`",
        ast.AsyncFor: "`async for`",
        ast.AsyncWith: "`async with`",
        ast.Match: "`match`",
    }
    return names.get(type(n), f"`{type(n).__name__}`")


_ASSIGN_CALLS = set(_AXIS) | set(_AXIS_OTHER) | set(_ALLOC) | {
    "T.axis.remap", "T.match_buffer", "T.var"}

_STMT_DISPATCH = {
    ast.Expr: Parser._expr_stmt,
    ast.Assign: Parser._assign,
    ast.AugAssign: Parser._aug_assign,
    ast.For: Parser._for,
    ast.With: Parser._with,
    ast.If: Parser._if,
    ast.Pass: Parser._pass,
}
_CALL_STMTS = {
    "T.evaluate": Parser._evaluate,
    "T.func_attr": Parser._func_attr,
    "T.where": Parser._where,
    "T.reads": Parser._regions,
    "T.writes": Parser._regions,
    "T.block_attr": Parser._block_attr,
    "T.sblock_attr": Parser._block_attr,
}

__all__ = ["DEFAULT_ALIASES", "Frame", "Parser", "Qual"]
