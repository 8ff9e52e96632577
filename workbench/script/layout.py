"""Buffer layout keywords of TVMScript (``elem_offset``, ``align``, ``offset_factor``,
``strides``, ``buffer_type``...) and the buffer fields and methods that opaque calls
use (``A.data``, ``A.elem_offset``, ``A.strides[0]``, ``A.access_ptr("r")``).

The workbench keeps every buffer in TVM's default layout: compact row-major,
starting at element 0, allocated with the default alignment. The keywords are
accepted where their value *means* that layout (TVM prints several of them on
every buffer of some functions: ``elem_offset=0, align=64, offset_factor=1``) and
are not kept; any other value is refused with a :class:`~.errors.ParseError`
naming the keyword, since dropping it would change what the text means.
"""

from __future__ import annotations

import ast
from typing import Any

from ..ir import expr as E
from ..ir.buffer import SCOPES, Buffer
from ..ir.simplify import simplify, struct_key
from .exprs import _kind

#: keyword -> the values that mean the default layout (``strides`` is checked apart)
_DEFAULTS: dict[str, tuple] = {
    "elem_offset": (None, 0),
    "align": (-1, 0, 64),
    "offset_factor": (0, 1),
    "buffer_type": ("", "default"),
    "axis_separators": (None, ()),
    "data": (None,),
}
_MEANING = {
    "elem_offset": "buffers start at element 0 (elem_offset=0)",
    "align": "buffers get the default alignment (align=64)",
    "offset_factor": "buffers start at element 0 (offset_factor=0 or 1)",
    "buffer_type": "buffers have the default type",
    "axis_separators": "buffers are flat (no axis_separators)",
    "data": "every buffer has its own storage (no data=)",
    "strides": "buffers are compact and row-major (strides as the shape gives them)",
}
_MASKS = {"r": 1, "w": 2}


def scope_value(p, v: Any, node: ast.AST, fn: str) -> str:
    """A ``scope=`` value: ``""`` is TVM's spelling of ``"global"``."""
    if v == "":
        return "global"
    if not isinstance(v, str) or v not in SCOPES:
        raise p.err(node, f"{fn}: unknown scope {v!r}; the workbench knows "
                          f"{', '.join(SCOPES)}")
    return v


def compact_strides(shape: tuple) -> tuple:
    """Row-major strides of ``shape`` (ints, or expressions for symbolic dims)."""
    out: list = []
    acc: Any = 1
    for d in reversed(shape):
        out.append(acc)
        acc = acc * d if isinstance(acc, int) and isinstance(d, int) else \
            simplify(E.extent_expr(acc) * E.extent_expr(d))
    return tuple(reversed(out))


def _same_extent(a: Any, b: Any) -> bool:
    if isinstance(a, E.IntImm):
        a = a.value
    if isinstance(b, E.IntImm):
        b = b.value
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int) or isinstance(b, int):
        return False
    return struct_key(simplify(a)) == struct_key(simplify(b))


def check_layout(p, fn: str, kwargs: dict[str, ast.AST], shape: tuple,
                 view_of: Buffer | None = None) -> tuple | None:
    """Check the layout keywords left in ``kwargs`` (all but ``scope``; a view's
    ``offset_factor`` is taken out before): each must mean the default layout.
    Returns the declared strides (for ``A.strides[i]``), or None.

    ``view_of``: the source buffer of a block's ``T.match_buffer(A[region], ...)``,
    whose strides a view shares (TVM binds a view's ``strides`` to its source's)."""
    strides = None
    for key, vnode in kwargs.items():
        v = p.expr(vnode)
        if key == "strides":
            strides = _check_strides(p, fn, v, vnode, shape, view_of)
            continue
        if key not in _DEFAULTS:
            raise p.err(vnode, f"{fn}: argument `{key}` is not supported")
        if isinstance(v, E.IntImm):
            v = v.value
        if isinstance(v, list):
            v = tuple(v)
        ok = not isinstance(v, bool) and v in _DEFAULTS[key]
        if key == "elem_offset" and view_of is not None and v is not None:
            ok = False  # a view starts where its region does
        if not ok:
            raise p.err(vnode, f"{fn}: argument `{key}` is not supported with the value "
                               f"{ast.unparse(vnode)}: the workbench keeps every buffer in "
                               f"the default layout, where {_MEANING[key]}")
    return strides


def _check_strides(p, fn: str, v: Any, node: ast.AST, shape: tuple,
                   view_of: Buffer | None) -> tuple | None:
    """The declared strides: each entry is the compact stride, or (not in an allocation)
    a variable standing for the stride of the array the buffer views (a tensor
    intrinsic's ``strides=[lda, 1]``; TVM prints a new one quoted, ``strides=("s0",)``)."""
    if v is None or v == [] or v == ():
        return None
    if not isinstance(v, (list, tuple)) or len(v) != len(shape):
        raise p.err(node, f"{fn}: strides must list one stride per dimension, got "
                          f"{_kind(v)}")
    v = tuple(_stride_var(p, x, node) if isinstance(x, str) else x for x in v)
    if view_of is not None:
        full = compact_strides(view_of.shape)
        want = full[len(full) - len(shape):] if shape else ()
    else:
        want = compact_strides(shape)
    free = fn != "T.alloc_buffer"  # an allocation is compact: its strides are known
    if len(want) != len(v) or not all(
        _same_extent(a, b) or free and isinstance(a, E.Var) for a, b in zip(v, want)
    ):
        of = f"the source `{view_of.name}`" if view_of is not None else "the shape"
        raise p.err(node, f"{fn}: argument `strides` is not supported with the value "
                          f"{ast.unparse(node)}: the workbench keeps buffers compact and "
                          f"row-major (strides {list(want)} for {of}); a variable may stand "
                          "for a stride of the array a buffer views")
    return tuple(v)


def declared_stride_vars(strides: tuple | None, shape: tuple, view_of: Buffer | None) -> bool:
    """Whether declared strides name a variable the layout does not fix (kept on the
    buffer, :attr:`Buffer.strides`) rather than only repeating the compact strides."""
    if not strides:
        return False
    if view_of is not None:
        full = compact_strides(view_of.shape)
        want = full[len(full) - len(shape):] if shape else ()
    else:
        want = compact_strides(shape)
    return any(not _same_extent(a, b) for a, b in zip(strides, want))


def _stride_var(p, name: str, node: ast.AST) -> E.Var:
    """A stride written as a quoted name: the variable of that name in scope, else a new
    one."""
    old = p.env.get(name)
    if isinstance(old, E.Var):
        return old
    if not name.isidentifier() or name in p.env:
        raise p.err(node, f"stride {name!r} is not a new variable name")
    return p.symbolic_var_named(name, "int32")


def buffer_attribute(p, buf: Buffer, attr: str, node: ast.AST) -> Any:
    """``A.data`` / ``A.elem_offset`` (IR fields), ``A.strides`` (declared strides),
    ``A.dtype``; anything else is refused."""
    if attr in ("data", "elem_offset"):
        return E.BufferField(buf, attr)
    if attr == "strides":
        strides = p.declared_strides.get(buf)
        if strides is None:
            raise p.err(node, f"buffer `{buf.name}` declares no strides; `{buf.name}.strides` "
                              "is only read where the declaration gives strides=[...]")
        return strides
    if attr == "dtype":
        return buf.dtype
    raise p.err(node, f"buffer attribute `{attr}` is not supported (buffer `{buf.name}`)")


def access_ptr(p, buf: Buffer, node: ast.Call) -> E.OpaqueCall:
    """``A.access_ptr(mask, ptr_type="handle", content_lanes=1, offset=0, extent=None)``:
    what TVM makes of it, ``T.tvm_access_ptr(T.type_annotation(dtype), A.data, offset,
    extent, mask)`` (the extent defaults to the rest of the buffer). For a buffer that
    may start anywhere in its array (a view; a buffer declared with ``offset_factor``)
    the offset is ``A.elem_offset + offset``, since ``A.data`` is the array's start."""
    names = ("access_mask", "ptr_type", "content_lanes", "offset", "extent")
    args: dict[str, ast.AST] = {}
    if len(node.args) > len(names):
        raise p.err(node, f"{buf.name}.access_ptr takes at most {len(names)} arguments")
    for key, a in zip(names, node.args):
        args[key] = a
    for k in node.keywords:
        if k.arg not in names or k.arg in args:
            raise p.err(k.value, f"{buf.name}.access_ptr: unexpected argument `{k.arg}`")
        args[k.arg] = k.value
    if "access_mask" not in args:
        raise p.err(node, f'{buf.name}.access_ptr needs the access mask: "r", "w" or "rw"')
    mask_v = p.expr(args["access_mask"])
    if isinstance(mask_v, str) and mask_v and all(c in _MASKS for c in mask_v):
        mask = 0
        for c in mask_v:
            mask |= _MASKS[c]
    elif isinstance(mask_v, int) and not isinstance(mask_v, bool) and 1 <= mask_v <= 3:
        mask = mask_v
    else:
        raise p.err(args["access_mask"], f'{buf.name}.access_ptr: the access mask is "r", '
                                         f'"w" or "rw", got {_kind(mask_v)}')
    if "ptr_type" in args and p.expr(args["ptr_type"]) != "handle":
        raise p.err(args["ptr_type"], f"{buf.name}.access_ptr: only ptr_type=\"handle\" is "
                                      "supported")
    if "content_lanes" in args and p.expr(args["content_lanes"]) != 1:
        raise p.err(args["content_lanes"], f"{buf.name}.access_ptr: vector lanes "
                                           "(content_lanes) are not supported")
    idx = buf.index_dtype
    offset = p.prim(args["offset"], idx) if "offset" in args else E.IntImm(0, idx)
    if "extent" in args:
        extent = p.prim(args["extent"], idx)
    elif not buf.shape:  # as TVM: one element, in its default index type
        extent = E.IntImm(1, "int64")
    else:  # the rest of the buffer: with strides, from its first row's stride
        strides = buf.strides or p.declared_strides.get(buf)
        head = E.extent_expr(buf.shape[0], idx)
        size = simplify(E.extent_expr(strides[0], idx) * head) if strides else \
            E.extent_expr(buf.size, idx)
        extent = simplify(E.extent_expr(size, idx) - offset)
    if buf in p.offset_buffers:  # the offset counts from the array's first element
        base = E.BufferField(buf, "elem_offset")
        offset = base if isinstance(offset, E.IntImm) and offset.value == 0 else \
            E.Add(base, offset)
    return E.OpaqueCall("tvm_access_ptr", (
        E.OpaqueCall("type_annotation", (), buf.dtype), E.BufferField(buf, "data"),
        offset, extent, E.IntImm(mask, "int32")))
