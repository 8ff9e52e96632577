"""The C code of what tensor intrinsic implementations use on ``T.match_buffer`` views:
``A.elem_offset``, ``T.tvm_access_ptr`` (``A.access_ptr(...)``) and the stride variables
a view declares (``strides=[lda, 1]``), as a mixin of the C-like function printer.

A view's ``A.data`` is its array's first element and ``A.elem_offset`` where the view
starts in it (TVM's meaning); ``T.tvm_access_ptr(T.type_annotation(dt), A.data, offset,
extent, mask)`` is a ``dt*`` pointer ``offset`` elements into the array.
"""

from __future__ import annotations

from typing import Any

from ..ir.buffer import Buffer
from ..ir.expr import BufferField, Cast, IntImm, OpaqueCall, PrimExpr, Var
from ..ir.printer import expr_to_str
from ..ir.simplify import simplify

__all__ = ["ViewCode", "is_access_ptr"]

P_ADD, P_PRIMARY = 12, 16  # C precedences (cstyle's)


def is_access_ptr(e: PrimExpr) -> bool:
    """``T.tvm_access_ptr(T.type_annotation(dt), A.data, offset, extent, mask)``."""
    return (
        isinstance(e, OpaqueCall) and e.op == "tvm_access_ptr" and len(e.args) == 5
        and isinstance(e.args[0], OpaqueCall) and e.args[0].op == "type_annotation"
        and isinstance(e.args[1], BufferField) and e.args[1].field == "data"
    )


class ViewCode:
    """Mixed into the function printer (which provides the names, scopes and views)."""

    views: dict
    bufs: dict
    names: dict
    bounds: dict
    _buffer_name: Any
    _flat: Any
    _sub: Any
    ctype: Any
    declare: Any
    emit: Any
    expr: Any

    def _elem_offset(self, buf: Buffer) -> tuple[str, int]:
        """``buf.elem_offset``: where a view's first element sits in its array (0 for an
        array itself)."""
        view = self.views.get(buf)
        if view is None:
            self._buffer_name(buf)  # raises when the buffer is not in scope
            return "0", P_PRIMARY
        return self._flat(view.source.buffer, view.offsets), P_ADD

    def _access_ptr(self, e: OpaqueCall) -> tuple[str, int]:
        """``T.tvm_access_ptr(T.type_annotation(dt), A.data, offset, extent, mask)``: a
        ``dt*`` pointer ``offset`` elements into ``A``'s array."""
        ann, data, offset = e.args[0], e.args[1], e.args[2]
        buf = data.buffer  # type: ignore[attr-defined]
        base = self._buffer_name(buf)
        root = self._root(buf)
        want = self.ctype(ann.dtype)
        if want != self.bufs[root].ctype:
            base = f"(({want}*){base})"
        if isinstance(offset, IntImm) and offset.value == 0:
            return base, P_PRIMARY
        return f"({base} + {self._sub(offset, P_ADD + 1)})", P_PRIMARY

    def _root(self, buf: Buffer) -> Buffer:
        while buf in self.views:
            buf = self.views[buf].source.buffer
        return buf

    def _strides(self, buf: Buffer) -> tuple[int | PrimExpr, ...]:
        """The element strides of ``buf`` in its array (a view: its source's, for the
        dimensions it keeps)."""
        view = self.views.get(buf)
        if view is None:
            return self.bufs[buf].strides
        src = self._strides(view.source.buffer)
        return src[len(src) - buf.ndim:] if buf.ndim else ()

    def _bind_strides(self, buf: Buffer) -> None:
        """Bind the stride variables ``buf`` declares (``strides=[lda, 1]``) to the
        strides of its array; a declared constant must be the actual stride."""
        for k, (declared, actual) in enumerate(zip(buf.strides, self._strides(buf),
                                                   strict=True)):
            if isinstance(declared, Var) and declared not in self.names:
                value = actual if isinstance(actual, int) else self.expr(actual)
                name = self.declare(declared, None)
                self.bounds[declared] = (actual, actual) if isinstance(actual, int) else \
                    (1, None)
                self.emit(f"const {self.ctype(declared.dtype)} {name} = {value};")
                continue
            want = actual if isinstance(actual, PrimExpr) else IntImm(actual, declared.dtype)
            diff = simplify(Cast(declared.dtype, want) - declared) \
                if want.dtype != declared.dtype else simplify(want - declared)
            if not (isinstance(diff, IntImm) and diff.value == 0):
                from .cstyle import CodegenError  # (cstyle imports this module)

                raise CodegenError(
                    f"buffer {buf.name!r} declares stride {expr_to_str(declared)} for "
                    f"dimension {k}, but its array has stride {expr_to_str(want)} there"
                )
