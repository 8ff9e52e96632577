"""The Schedule's layout transformations of :mod:`.primitives.transform_layout`
(transform_layout, transform_block_layout): a mixin of
:class:`~workbench.schedule.schedule.Schedule`; they record their instructions like the
others, with TVM 0.27's kinds ``TransformLayout`` (inputs ``[block, index_map]``, attrs
``[buffer_index, buffer_index_type (0 read, 1 write), pad_value, assume_injective_transform]``)
and ``TransformBlockLayout`` (inputs ``[block]``, attrs ``[index_map]``)."""

from __future__ import annotations

from typing import Any

from ..ir.expr import ALL_DTYPES, FloatImm, IntImm, PrimExpr, const, is_float
from ..ir.index_map import IndexMap, IndexMapError
from ._block_args import accepts_block_names
from .errors import InvalidScheduleArgumentError
from .primitives import transform_block_layout as TBL
from .primitives import transform_layout as TL
from .trace import BlockRV, Kind, PyTuple, register_kind

__all__ = ["LayoutMethods"]

_KIND_CODES = {"read": 0, "write": 1}


def _layout_to_call(args: dict[str, Any]) -> dict[str, Any]:
    """TransformLayout's inputs and attrs as the method's arguments
    (``buffer=("read", 0)``)."""
    kind = "write" if args["buffer_index_type"] == 1 else "read"
    return {
        "block": args["block"],
        "buffer": PyTuple((kind, args["buffer_index"])),
        "index_map": args["index_map"],
        "pad_value": args["pad_value"],
        "assume_injective_transform": bool(args["assume_injective_transform"]),
    }


def _layout_from_call(args: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in args.items() if k != "buffer"}
    buffer = args.get("buffer")
    if not (isinstance(buffer, (list, tuple)) and len(buffer) == 2
            and buffer[0] in _KIND_CODES and isinstance(buffer[1], int)):
        raise ValueError(f'buffer must be ("read", i) or ("write", i), got {buffer!r}')
    out["buffer_index"], out["buffer_index_type"] = buffer[1], _KIND_CODES[buffer[0]]
    for key in ("index_map", "pad_value"):
        if isinstance(out.get(key), str):  # lambda text of the printed trace
            out[key] = IndexMap.parse(out[key])
    return out


def _block_layout_from_call(args: dict[str, Any]) -> dict[str, Any]:
    out = dict(args)
    if isinstance(out.get("index_map"), str):
        out["index_map"] = IndexMap.parse(out["index_map"])
    return out


register_kind(
    Kind(
        "TransformLayout",
        "transform_layout",
        inputs=("block", "index_map"),
        attrs=("buffer_index", "buffer_index_type", "pad_value", "assume_injective_transform"),
        order=("block", "buffer", "index_map", "pad_value", "assume_injective_transform"),
        bool_attrs=("assume_injective_transform",),
        to_call=_layout_to_call,
        from_call=_layout_from_call,
        index_map_attrs=("pad_value",),
    )
)
register_kind(
    Kind(
        "TransformBlockLayout",
        "transform_block_layout",
        inputs=("block",),
        attrs=("index_map",),
        from_call=_block_layout_from_call,
        index_map_attrs=("index_map",),
    )
)


class LayoutMethods:
    """Mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any

    def _index_map(self, primitive: str, func: Any, block: str, value: Any, ndim: int | None,
                   dtype: str, what: str = "index_map") -> IndexMap:
        try:
            if isinstance(value, IndexMap):
                # over the block's index type, as TVM builds a callable's map
                return value.with_index_dtype(dtype, results=what == "index_map")
            if isinstance(value, str):
                return IndexMap.parse(value, ndim=ndim, index_dtype=dtype)
            if callable(value):
                return IndexMap.from_func(value, ndim=ndim, index_dtype=dtype)
        except IndexMapError as e:
            raise InvalidScheduleArgumentError(
                primitive, f'bad {what} for block "{block}": {e}', func, blocks=[block]
            ) from None
        raise InvalidScheduleArgumentError(
            primitive, f"{what} must be an IndexMap, a callable or lambda text, got {value!r}",
            func, blocks=[block])

    @staticmethod
    def _block_dtype(blk: Any) -> str:
        dtypes = {iv.var.dtype for iv in blk.iter_vars}
        return dtypes.pop() if len(dtypes) == 1 else "int32"

    @accepts_block_names("block")
    def transform_layout(
        self,
        block: BlockRV,
        buffer: tuple[str, int] | str | Any,
        index_map: IndexMap | Any,
        pad_value: int | float | PrimExpr | IndexMap | Any | None = None,
        *,
        assume_injective_transform: bool = False,
    ) -> None:
        """Give a buffer ``block`` accesses a new layout: its shape becomes
        ``index_map.map_shape(shape)`` and every access in the function goes through
        ``index_map``. ``buffer`` is ``("read", i)`` / ``("write", i)`` or the buffer's
        name; ``index_map`` an :class:`~workbench.ir.IndexMap`, a callable or lambda text.

        A map that leaves padding needs ``pad_value`` (a constant of the buffer's dtype,
        or a map from the new indices to one value); ``assume_injective_transform``
        skips the check (the caller vouches that the map is one-to-one).

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(32, 32, 32))
        >>> sch.transform_layout("C", ("read", 0), "lambda i, k: (i // 8, k, i % 8)")
        >>> sch.mod["matmul"].params[0].shape
        (4, 32, 8)
        >>> print(sch.trace.lines()[-1])
        sch.transform_layout(block=b0, buffer=("read", 0), index_map=lambda i, k: (i // 8, k, i % 8,), pad_value=None, assume_injective_transform=False)
        """  # noqa: E501
        p = "transform_layout"
        func_name, name = self._block(p, block)  # type: ignore[attr-defined]
        func = self._mod[func_name]
        kind, index, buf = TL.normalize_buffer(func, p, name, buffer)
        blk = self.get(block)  # type: ignore[attr-defined]
        dtype = self._block_dtype(blk)
        imap = self._index_map(p, func, name, index_map, buf.ndim, dtype)
        pad = None
        if pad_value is not None:
            pad = self._pad_value(p, func, name, pad_value, buf, len(imap.final_indices), dtype)
        new = TL.transform_layout(func, name, kind, index, imap, pad,
                                  bool(assume_injective_transform))
        args = {
            "block": block,
            "index_map": imap,
            "buffer_index": index,
            "buffer_index_type": _KIND_CODES[kind],
            "pad_value": pad,
            "assume_injective_transform": bool(assume_injective_transform),
        }
        self._commit("TransformLayout", args, (), new)  # type: ignore[attr-defined]

    def _pad_value(self, p: str, func: Any, name: str, value: Any, buf: Any, ndim: int,
                   dtype: str) -> IndexMap:
        if isinstance(value, IndexMap) or isinstance(value, str) or (
            callable(value) and not isinstance(value, PrimExpr)
        ):
            return self._index_map(p, func, name, value, ndim, dtype, "pad_value")
        if isinstance(value, bool):
            raise InvalidScheduleArgumentError(
                p, f"pad_value must be a number, an expression or a map, got {value!r}", func,
                blocks=[name])
        if isinstance(value, PrimExpr):
            expr = value
        else:
            # a Python number takes the buffer's dtype when of the same kind (as TVM);
            # a number carrying its own dtype (``.dtype``) keeps it
            own = getattr(value, "dtype", None)
            if isinstance(own, str) and own in ALL_DTYPES:
                expr = const(value, own)
            elif isinstance(value, int) and not is_float(buf.dtype) and buf.dtype != "bool":
                expr = IntImm(int(value), buf.dtype)
            elif isinstance(value, float) and is_float(buf.dtype):
                expr = FloatImm(float(value), buf.dtype)
            elif isinstance(value, (int, float)):
                expr = const(value)
            else:
                raise InvalidScheduleArgumentError(
                    p, f"pad_value must be a number, an expression or a map, got {value!r}",
                    func, blocks=[name])
        names = [f"indices_{k}" for k in range(ndim)]
        from ..ir import Var

        return IndexMap([Var(n, dtype) for n in names], [expr])

    @accepts_block_names("block")
    def transform_block_layout(self, block: BlockRV, index_map: IndexMap | Any) -> None:
        """Re-index ``block``'s iteration space with a bijective affine ``index_map``
        (an :class:`~workbench.ir.IndexMap`, a callable or lambda text): the block gets
        one iter var per result and new loops ``ax0, ax1...`` replace those above it,
        which must serve only this block and bind its iter vars in order.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
        >>> sch.transform_block_layout("C", lambda i, j, k: (i * 8 + j, k))
        >>> [l.extent for l in map(sch.get, sch.get_loops("C"))]
        [64, 8]
        """
        p = "transform_block_layout"
        func_name, name = self._block(p, block)  # type: ignore[attr-defined]
        func = self._mod[func_name]
        blk = self.get(block)  # type: ignore[attr-defined]
        imap = self._index_map(p, func, name, index_map, None, self._block_dtype(blk))
        new = TBL.transform_block_layout(func, name, imap)
        self._commit("TransformBlockLayout", {"block": block, "index_map": imap}, (),  # type: ignore[attr-defined]
                     new)
