"""Blocks of TVMScript: ``with T.block(...)`` / ``T.sblock``, their iterators
(``T.axis.*``), ``T.where``, ``T.reads`` / ``T.writes``, attributes and match buffers.

:class:`BlockParser` is the block half of :class:`~.parser.Parser`. A block's
read/write regions are derived from its body; the text's are read and checked
(see the package docstring).
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any

from ..ir import expr as E
from ..ir.buffer import Buffer, BufferRegion, MatchBufferRegion
from ..ir.functor import EXPLICIT_REGION_KEYS, Mutator, keep_explicit_regions
from ..ir.stmt import Block, IterVar, PrimFunc, Stmt
from .exprs import ExprParser, Handle, _kind

_BLOCK = ("T.block", "T.sblock")
_AXIS = {"T.axis.spatial": "S", "T.axis.S": "S", "T.axis.reduce": "R", "T.axis.R": "R",
         "T.axis.opaque": "O"}
_AXIS_OTHER = ("T.axis.scan",)


class Frame:
    """What a ``with T.block(...)`` collects before its body (the function's root
    block is a frame too)."""

    __slots__ = ("name", "node", "iter_vars", "iter_values", "predicate", "text_regions",
                 "annotations", "allocs", "init", "match_buffers", "is_root", "nest",
                 "region_values")

    def __init__(self, name: str, node: ast.AST | None, is_root: bool = False, nest: int = 0):
        self.name = name
        self.nest = nest  # loop / if depth of the block's own statements
        self.node = node
        self.iter_vars: list[IterVar] = []
        self.iter_values: list[E.PrimExpr] = []
        self.predicate: E.PrimExpr | None = None
        self.text_regions: list[tuple[str, Buffer, ast.AST]] = []
        self.region_values: list[tuple[str, BufferRegion]] = []  # as the text gives them
        self.annotations: dict[str, Any] = {}
        self.allocs: list[Buffer] = []
        self.init: Stmt | None = None
        self.match_buffers: list[MatchBufferRegion] = []
        self.is_root = is_root


class BlockParser(ExprParser):
    """Block constructs; the statement parser provides ``seq``, the scopes and
    ``buffer_decl``."""

    frames: list[Frame]
    nest: int
    loop_dom: dict
    block_names: dict

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def header(self, node: ast.AST, what: str) -> Frame:
        """The block ``what`` (``T.where``, ``T.init()``...) belongs to: it must stand
        directly in the block, not inside one of the block's loops."""
        f = self.frames[-1]
        if f.is_root and what not in ("T.reads", "T.writes", "T.block_attr"):
            raise self.err(node, f"{what} belongs in a block")
        if self.nest != f.nest:
            where = "function body" if f.is_root else f'block "{f.name}"'
            raise self.err(node, f"{what} must stand directly in the {where}, not inside a "
                                 "loop or an `if`")
        return f

    def _where(self, call: ast.Call, q: str) -> None:
        f = self.header(call, "T.where")
        if len(call.args) != 1 or call.keywords:
            raise self.err(call, "T.where takes one condition")
        v = self.expr(call.args[0])
        if v is True:
            return None
        f.predicate = self.to_prim(v, call.args[0], "bool")
        if f.predicate.dtype != "bool":
            raise self.err(call.args[0], f"T.where needs a condition, got {_kind(v)}")
        return None

    def _regions(self, call: ast.Call, q: str) -> None:
        kind = q[2:]
        self.header(call, q)
        if call.keywords:
            raise self.err(call, f"T.{kind} takes buffer regions")
        nodes = list(call.args)
        if len(nodes) == 1 and isinstance(nodes[0], (ast.List, ast.Tuple)):
            nodes = list(nodes[0].elts)
        for r in nodes:
            buf, bounds = self.region(r, f"T.{kind}")
            self.frame.text_regions.append((kind, buf, r))
            self.frame.region_values.append((kind, BufferRegion(buf, bounds)))
        return None

    def region(self, node: ast.AST, fn: str) -> tuple[Buffer, tuple]:
        """``A[vi, 0:128]`` (or a bare ``A``: all of it) as (buffer, ((min, extent), ...))."""
        if isinstance(node, ast.Subscript):
            buf = self.expr(node.value)
            if not isinstance(buf, Buffer):
                raise self.err(node.value, f"{fn}: expected a buffer, got {_kind(buf)}")
            idx = self.index_nodes(node)
            if len(idx) == 1 and isinstance(idx[0], ast.Tuple) and not idx[0].elts:
                idx = []
            if len(idx) != buf.ndim:
                raise self.err(node, f"{fn}: buffer `{buf.name}` has {buf.ndim} dimension(s), "
                                     f"the region has {len(idx)}")
            out = []
            for d, n in enumerate(idx):
                if isinstance(n, ast.Slice):
                    if n.step is not None:
                        raise self.err(n, f"{fn}: a region slice is `lo:hi` (no step)")
                    # an omitted bound is the dimension's start / end, as in Python
                    lo = self.prim(n.lower, buf.index_dtype) if n.lower is not None \
                        else E.IntImm(0, buf.index_dtype)
                    hi = self.prim(n.upper, lo.dtype) if n.upper is not None \
                        else E.extent_expr(buf.shape[d], buf.index_dtype)
                    a, b = self.match(hi, lo, n)
                    out.append((lo, _extent_of(a, b)))
                else:
                    i = self.prim(n, buf.index_dtype)
                    out.append((i, E.IntImm(1, i.dtype)))
            return buf, tuple(out)
        buf = self.expr(node)
        if not isinstance(buf, Buffer):
            raise self.err(node, f"{fn}: expected a buffer region, got {_kind(buf)}")
        return buf, tuple((E.IntImm(0, buf.index_dtype), E.extent_expr(s, buf.index_dtype))
                          for s in buf.shape)

    def _block_attr(self, call: ast.Call, q: str) -> None:
        self.header(call, "T.block_attr")
        if len(call.args) != 1 or call.keywords:
            raise self.err(call, "T.block_attr takes one dict")
        d = self.expr(call.args[0])
        if not isinstance(d, dict):
            raise self.err(call.args[0], "T.block_attr takes a dict")
        for k, v in d.items():
            self.frame.annotations[k] = self.ann_value(v, call.args[0])
        return None

    def ann_value(self, v: Any, node: ast.AST) -> Any:
        """An annotation / attribute value: literals, expressions, lists (as tuples)."""
        if isinstance(v, E.IntImm) and v.dtype == "bool":
            return bool(v.value)
        if isinstance(v, (bool, int, float, str, E.PrimExpr)):
            return v
        if isinstance(v, (list, tuple)):
            return tuple(self.ann_value(x, node) for x in v)
        if isinstance(v, dict) and all(isinstance(k, str) for k in v):
            return {k: self.ann_value(x, node) for k, x in v.items()}
        raise self.err(node, f"annotation values are numbers, strings, bools, lists or dicts "
                             f"with string keys; got "
                             f"{_kind(v)}")

    def match_buffer(self, name: str, call: ast.Call) -> None:
        if not call.args:
            raise self.err(call, "T.match_buffer needs a handle or a buffer region")
        src_node, rest = call.args[0], list(call.args[1:])
        kwargs = {k.arg: k.value for k in call.keywords}
        if self.frame.is_root and len(self.frames) == 1 and not isinstance(src_node,
                                                                             ast.Subscript):
            handle = self.expr(src_node)
            if not isinstance(handle, Handle):
                raise self.err(src_node, f"T.match_buffer of {_kind(handle)}: at the top of a "
                                         "function it matches a T.handle parameter")
            if handle.buffer is not None:
                raise self.err(src_node, f"handle `{handle.name}` is already matched")
            handle.buffer = self.buffer_decl(name, call, rest, kwargs, "T.match_buffer")
            self.bind(name, handle.buffer)
            return
        self.header(call, "T.match_buffer of a region")
        src, region = self.region(src_node, "T.match_buffer")
        offset_factor = 0
        if "offset_factor" in kwargs:  # kept: printed back as read
            of_node = kwargs.pop("offset_factor")
            offset_factor = self.expr(of_node)
            if isinstance(offset_factor, E.IntImm):
                offset_factor = offset_factor.value
            if isinstance(offset_factor, bool) or not isinstance(offset_factor, int) \
                    or offset_factor < 0:
                raise self.err(of_node, "offset_factor must be a non-negative integer")
        offset_var = kwargs.get("elem_offset")
        offset_var = self.expr(offset_var) if offset_var is not None else None
        if isinstance(offset_var, E.Var) and offset_var in self.block_vars:
            # ``elem_offset=A_elem_offset`` (declared in the block): the view's own
            # offset, which A_1.elem_offset stands for; TVM's offset_factor=1
            del kwargs["elem_offset"]
            offset_factor = max(offset_factor, 1)
        else:
            offset_var = None
        buf = self.buffer_decl(name, call, rest, kwargs, "T.match_buffer", view_of=src)
        if offset_var is not None:
            self.view_offsets.add(offset_var)
            self.bind(offset_var.name, E.BufferField(buf, "elem_offset"))
        try:
            m = MatchBufferRegion(buf, BufferRegion(src, region), offset_factor)
        except ValueError as e:
            raise self.err(call, str(e)) from None
        self.frame.match_buffers.append(m)
        self.bind(name, buf)

    def axis(self, names: list[str], call: ast.Call, q: str, target: ast.AST) -> None:
        self.header(call, q)
        if q == "T.axis.remap":
            if len(call.args) != 2 or call.keywords:
                raise self.err(call, "T.axis.remap takes the kinds and the loop variables: "
                                     "T.axis.remap(\"SSR\", [i, j, k])")
            kinds = self.string(call.args[0], "T.axis.remap's kinds")
            vals_node = call.args[1]
            if not isinstance(vals_node, (ast.List, ast.Tuple)):
                raise self.err(vals_node, "T.axis.remap binds a list of loop variables")
            if not (len(kinds) == len(vals_node.elts) == len(names)):
                raise self.err(call, f"T.axis.remap: {len(names)} names, {len(kinds)} kinds, "
                                     f"{len(vals_node.elts)} loop variables")
            for name, kind, vn in zip(names, kinds, vals_node.elts):
                if kind not in "SR":
                    raise self.err(call.args[0], f"T.axis.remap kind {kind!r} is not supported "
                                                 "(only S and R)")
                v = self.expr(vn)
                if not isinstance(v, E.Var) or v not in self.loop_dom:
                    raise self.err(vn, "T.axis.remap binds loop variables; write "
                                       f"`{name} = T.axis.spatial(extent, value)` otherwise")
                self.new_iter(name, self.loop_dom[v], v, kind, v.dtype)
            return
        if len(names) != 1:
            raise self.err(target, f"{q} defines one iterator")
        args = list(call.args)
        kwargs = {k.arg: k.value for k in call.keywords}
        for i, key in enumerate(("dom", "binding", "dtype")):
            if key in kwargs:
                if len(args) != i:
                    raise self.err(call, f"{q}: argument `{key}` misplaced")
                args.append(kwargs.pop(key))
        if kwargs or len(args) not in (2, 3):
            raise self.err(call, f"{q} takes the extent and the binding: {q}(128, i)")
        dom_node = args[0]
        dom = self.expr(dom_node)
        if isinstance(dom, (tuple, list)):
            if len(dom) != 2:
                raise self.err(dom_node, f"{q}: a domain is an extent or (0, extent)")
            lo, dom = dom
            if not (lo == 0 if isinstance(lo, int) else isinstance(lo, E.IntImm)
                    and lo.value == 0):
                raise self.err(dom_node, f"{q}: iterators start at 0 in the workbench")
        if isinstance(dom, bool) or not isinstance(dom, (int, E.PrimExpr)) or (
            isinstance(dom, E.PrimExpr) and dom.dtype not in E.INT_DTYPES
        ):
            raise self.err(dom_node, f"{q}: the extent must be an integer, got {_kind(dom)}")
        binding = self.expr(args[1])
        if len(args) == 3:
            dtype = self.string(args[2], f"{q}'s dtype")
        elif isinstance(dom, E.PrimExpr):
            dtype = dom.dtype
        elif isinstance(binding, E.PrimExpr):
            dtype = binding.dtype
        else:
            dtype = "int32"
        if dtype not in E.INT_DTYPES:
            raise self.err(call, f"{q}: iterator dtype {dtype!r} is not an integer type")
        value = self.to_prim(binding, args[1], dtype)
        if value.dtype not in E.INT_DTYPES:
            raise self.err(args[1], f"{q}: the binding must be an integer expression")
        self.new_iter(names[0], dom, value, _AXIS[q], dtype)

    def new_iter(self, name: str, extent, value: E.PrimExpr, kind: str, dtype: str) -> None:
        var = E.Var(name, dtype)
        f = self.frame
        f.iter_vars.append(IterVar(var, extent, kind))
        f.iter_values.append(value)
        self.bind(name, var)

    def block(self, n: ast.With, call: ast.Call, q: str) -> Stmt:
        args = list(call.args) + [k.value for k in call.keywords if k.arg == "name_hint"]
        if len(args) != 1 or any(k.arg != "name_hint" for k in call.keywords):
            raise self.err(call, f"{q} takes the block name: {q}(\"C\")")
        name = self.string(args[0], f"{q}'s name")
        if name == "root":
            raise self.err(args[0], 'a block named "root" must be the whole function body '
                                    "(the function's root block)")
        if name in self.block_names:
            first = self.block_names[name].lineno + self.src.line_offset
            raise self.err(args[0], f'block name "{name}" is used twice in one function '
                                    f"(first on line {first}); TVM allows that, but the "
                                    "workbench identifies blocks by name, so each block "
                                    "needs its own")
        self.block_names[name] = call
        frame = Frame(name, n, nest=self.nest)
        self.frames.append(frame)
        self.push()
        body = self.seq(n.body)
        self.pop()
        self.frames.pop()
        self.check_block_vars(frame)
        return self.make_block(frame, body)

    def check_block_vars(self, f: Frame) -> None:
        """A variable declared in a block must be a stride or the elem_offset of one of
        the block's views (what TVM prints there)."""
        used = {id(x) for m in f.match_buffers for x in m.buffer.strides}
        for var, (frame, node) in list(self.block_vars.items()):
            if frame is not f:
                continue
            del self.block_vars[var]
            if id(var) not in used and var not in self.view_offsets:
                raise self.err(node, f"symbolic variable `{var.name}` declared in block "
                                     f'"{f.name}" is not a stride or the elem_offset of its '
                                     "T.match_buffer; declare it at the top of the function")

    def make_block(self, f: Frame, body: Stmt) -> Block:
        try:
            b = Block(
                f.name, tuple(f.iter_vars), tuple(f.iter_values), body, f.init,
                f.predicate if f.predicate is not None else E.const(True),
                tuple(f.allocs), tuple(f.annotations.items()),
                match_buffers=tuple(f.match_buffers),
            )
        except (TypeError, ValueError) as e:
            raise self.err(f.node, str(e)) from None
        self.check_regions(f, b)
        if any(k in f.annotations for k, _ in EXPLICIT_REGION_KEYS) and f.region_values:
            # regions marked explicit (annotate_buffer_access) are the text's, as in TVM
            text = {kind: tuple(r for k, r in f.region_values if k == kind)
                    for kind in ("reads", "writes")}
            given = replace(b, reads=text["reads"] or b.reads, writes=text["writes"] or b.writes)
            b = keep_explicit_regions(given, b)
        return b

    def check_regions(self, f: Frame, b: Block) -> None:
        """Regions are derived from the body (see the package docstring); a buffer the
        text lists that the body never touches would be dropped, so refuse it."""
        if not f.text_regions:
            return
        touched = {r.buffer for r in (b.reads or ())} | {r.buffer for r in (b.writes or ())}
        touched |= set(b.alloc_buffers)
        touched |= {m.buffer for m in b.match_buffers}
        for kind, buf, node in f.text_regions:
            if buf not in touched:
                raise self.err(node, f'block "{f.name}": T.{kind} names buffer `{buf.name}`, '
                                     "which the block never accesses; the workbench derives a "
                                     "block's regions from its body, so accesses it cannot "
                                     "see are not supported")


def _extent_of(hi: E.PrimExpr, lo: E.PrimExpr) -> E.PrimExpr:
    if isinstance(hi, E.IntImm) and isinstance(lo, E.IntImm):
        return E.IntImm(hi.value - lo.value, hi.dtype)
    from ..ir.simplify import simplify

    return simplify(E.Sub(hi, lo))

class _Realign(Mutator):
    def __init__(self, mapping: dict[Buffer, Buffer]):
        self.mapping = mapping

    def visit_buffer(self, b: Buffer) -> Buffer:
        return self.mapping.get(b, b)

def _apply_alignment(func: PrimFunc) -> PrimFunc:
    """``T.block_attr({"buffer_dim_align": [[index, axis, factor, offset]]})`` pads the
    written buffer ``index`` (as ``storage_align`` does): give the buffers their
    alignment."""
    from ..ir.analysis import iter_blocks

    align: dict[Buffer, dict[int, tuple[int, int, int]]] = {}
    for b in iter_blocks(func.body):
        value = dict(b.annotations).get("buffer_dim_align")
        if not value:
            continue
        for entry in value:
            if not (isinstance(entry, tuple) and len(entry) == 4
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in entry)):
                continue
            index, axis, factor, offset = entry
            if 0 <= index < len(b.writes or ()):
                buf = b.writes[index].buffer  # type: ignore[index]
                align.setdefault(buf, {})[axis] = (axis, factor, offset)
    if not align:
        return func
    mapping = {b: b.with_(align=tuple(sorted(a.values()))) for b, a in align.items()}
    body = _Realign(mapping).visit_block(func.body)
    params = tuple(mapping.get(p, p) for p in func.params)
    return PrimFunc(func.name, params, body, func.attrs)
