"""The Schedule's reindexing and extra caching primitives (reindex, reindex_cache_read,
reindex_cache_write, cache_index, cache_inplace, read_at, write_at): a mixin of
:class:`~workbench.schedule.schedule.Schedule`; they record their instructions like the
others, with TVM 0.27's instruction kinds (``ReIndex``, ``ReindexCacheRead``,
``ReindexCacheWrite``, ``CacheIndex``, ``CacheInplace``, ``ReadAt``, ``WriteAt``)."""

from __future__ import annotations

from typing import Any

from ._block_args import accepts_block_names
from .trace import BlockRV, Kind, LoopRV, PyTuple, register_kind

__all__ = ["ReindexMethods"]

_KIND_CODES = {"read": 0, "write": 1}


def _reindex_to_call(args: dict[str, Any]) -> dict[str, Any]:
    """ReIndex's attrs (buffer_index, buffer_index_type) as ``buffer=("read", 0)``."""
    kind = "write" if args["buffer_index_type"] == 1 else "read"
    return {"block": args["block"], "buffer": PyTuple((kind, args["buffer_index"]))}


def _reindex_from_call(args: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in args.items() if k != "buffer"}
    buffer = args.get("buffer")
    if not (isinstance(buffer, (list, tuple)) and len(buffer) == 2
            and buffer[0] in _KIND_CODES and isinstance(buffer[1], int)):
        raise ValueError(f'buffer must be ("read", i) or ("write", i), got {buffer!r}')
    out["buffer_index"], out["buffer_index_type"] = buffer[1], _KIND_CODES[buffer[0]]
    return out


# As TVM's ReIndexTraits: inputs [block], attrs [buffer_index, buffer_index_type (0 read,
# 1 write)]; printed as reindex(block=b0, buffer=("read", 0)).
register_kind(
    Kind(
        "ReIndex",
        "reindex",
        inputs=("block",),
        attrs=("buffer_index", "buffer_index_type"),
        order=("block", "buffer"),
        outputs="single",
        to_call=_reindex_to_call,
        from_call=_reindex_from_call,
    )
)
register_kind(
    Kind(
        "CacheInplace",
        "cache_inplace",
        inputs=("block",),
        attrs=("read_buffer_index", "storage_scope"),
        outputs="list",
    )
)

for _name, _method, _index in (("ReadAt", "read_at", "read_buffer_index"),
                               ("WriteAt", "write_at", "write_buffer_index")):
    register_kind(
        Kind(_name, _method, inputs=("loop", "block"), attrs=(_index, "storage_scope"),
             outputs="single")
    )
register_kind(
    Kind(
        "CacheIndex",
        "cache_index",
        inputs=("block",),
        attrs=("storage_scope", "cse_thresh"),
        outputs="list",
    )
)


def _index_map_from_call(args: dict[str, Any]) -> dict[str, Any]:
    """The lambda text of a printed trace as an IndexMap (read with ast, never run)."""
    from ..ir.index_map import IndexMap

    out = dict(args)
    if isinstance(out.get("index_map"), str):
        out["index_map"] = IndexMap.parse(out["index_map"])
    return out


# As TVM's ReindexCacheReadTraits / ReindexCacheWriteTraits: inputs [block, index_map],
# attrs [buffer index, storage_scope]; printed with the index map last.
for _name, _method, _index in (("ReindexCacheRead", "reindex_cache_read", "read_buffer_index"),
                               ("ReindexCacheWrite", "reindex_cache_write",
                                "write_buffer_index")):
    register_kind(
        Kind(_name, _method, inputs=("block", "index_map"), attrs=(_index, "storage_scope"),
             order=("block", _index, "storage_scope", "index_map"), outputs="single",
             from_call=_index_map_from_call)
    )


def _read_index(func: Any, primitive: str, block_name: str, index: Any, kind: str) -> int:
    """An int index, a buffer name or a Buffer among the block's reads (``kind="read"``)
    or writes, as an int index."""
    from ..ir import Buffer
    from .primitives.cache import resolve_buffer_index

    if isinstance(index, Buffer):
        index = index.name
    return resolve_buffer_index(func, primitive, block_name, index, kind)


class ReindexMethods:
    """Reindexing and extra caching primitives; mixed into
    :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any

    @accepts_block_names("block")
    def reindex(self, block: BlockRV, buffer: tuple[str, int] | str | Any) -> BlockRV:
        """Copy one buffer ``block`` accesses through a new buffer ``<name>_reindex``
        laid out by the block's iter vars; returns the copy block (before the block's
        loop nest for a read, after it for a write).

        ``buffer`` is ``("read", i)`` / ``("write", i)`` (the i-th of the block's reads or
        writes), a buffer name or a Buffer. The block must be a leaf that accesses the
        buffer at one index only; iter vars the index does not use get no dimension.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
        >>> c = sch.reindex("C", ("write", 0))
        >>> sch.get(c).name, [w.buffer.name for w in sch.get(sch.get_block("C")).writes]
        ('C_reindex', ['C_reindex'])
        >>> print(sch.trace.lines()[1])
        b1 = sch.reindex(block=b0, buffer=("write", 0))
        """
        from .primitives import reindex as RX

        func_name, name = self._block("reindex", block)
        func = self._mod[func_name]
        kind, index = RX.buffer_arg(func, "reindex", name, buffer)
        func, new_name = RX.reindex(func, name, index, kind)
        rv = self._new(BlockRV, (func_name, new_name))
        args = {"block": block, "buffer_index": index, "buffer_index_type": _KIND_CODES[kind]}
        self._commit("ReIndex", args, [rv], func)
        return rv

    @accepts_block_names("block")
    def cache_inplace(
        self, block: BlockRV, read_buffer_index: int | str | Any, storage_scope: str
    ) -> list[BlockRV]:
        """Make ``block``, which reads and writes a buffer in place, work on a copy of it
        in ``storage_scope``: a block right before it loads the copy, one right after it
        stores it back. Returns those two blocks (read copy first).

        ``read_buffer_index`` is the buffer's position among the block's reads, its name
        or the Buffer. Both copies are named ``<buffer>_<scope>`` (the second with
        ``_1``).

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.from_script('''
        ... @T.prim_func
        ... def inc(A: T.Buffer((8,), "float32")):
        ...     for i in range(8):
        ...         with T.block("inc"):
        ...             vi = T.axis.remap("S", [i])
        ...             A[vi] = A[vi] + T.float32(1)
        ... '''))
        >>> load, store = sch.cache_inplace("inc", "A", "local")
        >>> sch.get(load).name, sch.get(store).name
        ('A_local', 'A_local_1')
        >>> print(sch.trace.lines()[-1])
        b1, b2 = sch.cache_inplace(block=b0, read_buffer_index=0, storage_scope="local")
        """
        from .primitives.cache_inplace import cache_inplace

        func_name, name = self._block("cache_inplace", block)
        func = self._mod[func_name]
        index = _read_index(func, "cache_inplace", name, read_buffer_index, "read")
        func, names = cache_inplace(func, name, index, storage_scope)
        rvs = [self._new(BlockRV, (func_name, n)) for n in names]
        args = {"block": block, "read_buffer_index": index, "storage_scope": storage_scope}
        self._commit("CacheInplace", args, rvs, func)
        return rvs

    @accepts_block_names("block")
    def read_at(
        self, loop: LoopRV, block: BlockRV, read_buffer_index: int | str, storage_scope: str
    ) -> BlockRV:
        """Inside ``loop``, copy the part of ``block``'s ``read_buffer_index``-th read
        buffer that one iteration of the loop reads into a new ``storage_scope`` buffer,
        right before the first statement of the loop's body that reads it; the loop's
        body then reads the copy. Returns the copy block (annotated ``auto_copy``).

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
        >>> i, j, k = sch.get_loops(sch.get_block("C"))
        >>> a = sch.read_at(i, sch.get_block("C"), 0, "local")
        >>> sch.get(a).name, [r.buffer.name for r in sch.get(sch.get_block("C")).reads]
        ('A_local', ['A_local', 'B'])
        """
        return self._read_write_at("read_at", loop, block, read_buffer_index, storage_scope)

    @accepts_block_names("block")
    def write_at(
        self, loop: LoopRV, block: BlockRV, write_buffer_index: int | str, storage_scope: str
    ) -> BlockRV:
        """Inside ``loop``, make the loop's body write ``block``'s
        ``write_buffer_index``-th write buffer into a new ``storage_scope`` buffer, stored
        back by a copy block right after the last statement writing it. Returns the copy
        block (annotated ``auto_copy``).

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
        >>> i, j, k = sch.get_loops(sch.get_block("C"))
        >>> c = sch.write_at(i, sch.get_block("C"), 0, "local")
        >>> sch.get(c).name, [w.buffer.name for w in sch.get(sch.get_block("C")).writes]
        ('C_local', ['C_local'])
        """
        return self._read_write_at("write_at", loop, block, write_buffer_index, storage_scope)

    def _read_write_at(self, prim: str, loop, block, index, storage_scope) -> BlockRV:
        from .errors import InvalidScheduleArgumentError
        from .primitives import read_write_at as RW

        func_name, var = self._loop(prim, loop)
        block_func, name = self._block(prim, block)
        if block_func != func_name:
            raise InvalidScheduleArgumentError(
                prim, f'loop "{var.name}" and block "{name}" are in different functions',
                self._mod[func_name],
            )
        func = self._mod[func_name]
        kind = "read" if prim == "read_at" else "write"
        index = _read_index(func, prim, name, index, kind)
        func, new_name = getattr(RW, prim)(func, var, name, index, storage_scope)
        rv = self._new(BlockRV, (func_name, new_name))
        args = {"loop": loop, "block": block, f"{kind}_buffer_index": index,
                "storage_scope": storage_scope}
        self._commit("ReadAt" if kind == "read" else "WriteAt", args, [rv], func)
        return rv

    @accepts_block_names("block")
    def cache_index(
        self, block: BlockRV, storage_scope: str, cse_thresh: int = 0
    ) -> list[BlockRV]:
        """Precompute the pure subexpressions of ``block``'s stores (index arithmetic of
        its iter vars, weights...) into buffers ``index_var_<k>`` of ``storage_scope``,
        each computed by a new block ``index_<k>`` before the block's loop nest; the
        block loads them instead. Returns the new blocks.

        ``cse_thresh`` (TVM's common-subexpression threshold): 0 caches every largest
        pure subexpression; ``n > 0`` only those seen at least ``n`` times, counting the
        parts of rarer ones.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.from_script('''
        ... @T.prim_func
        ... def halve(A: T.Buffer((8,), "float32"), B: T.Buffer((16,), "float32")):
        ...     for i in range(16):
        ...         with T.block("B"):
        ...             vi = T.axis.remap("S", [i])
        ...             B[vi] = A[vi // 2]
        ... '''))
        >>> [sch.get(b).name for b in sch.cache_index("B", "global")]
        ['index_0']
        >>> print(sch.get(sch.get_block("B")).body)
        B[vi] = A[index_var_0[vi]]
        """
        from .primitives.cache_index import cache_index

        func_name, name = self._block("cache_index", block)
        func, names = cache_index(self._mod[func_name], name, storage_scope, cse_thresh)
        rvs = [self._new(BlockRV, (func_name, n)) for n in names]
        args = {"block": block, "storage_scope": storage_scope, "cse_thresh": cse_thresh}
        self._commit("CacheIndex", args, rvs, func)
        return rvs

    @accepts_block_names("block")
    def reindex_cache_read(
        self, block: BlockRV, read_buffer_index: int | str, storage_scope: str, index_map: Any
    ) -> BlockRV:
        """Cache the ``read_buffer_index``-th buffer ``block`` reads (one element per
        iteration) in a new ``storage_scope`` buffer indexed by ``index_map`` of the
        block's iter vars; a copy block placed right before the block's loop nest (after
        the buffer's producer) fills it, and only ``block`` reads it. Returns the copy.

        ``index_map`` is an :class:`~workbench.ir.IndexMap`, a callable or lambda text
        taking one index per iter var; the iter vars its results use must be those the
        access uses.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
        >>> a = sch.reindex_cache_read("C", 0, "shared", lambda i, j, k: (k, i))
        >>> print(sch.get(sch.get_block("C")).body)
        C[vi, vj] = C[vi, vj] + A_shared[vk, vi] * B[vk, vj]
        >>> print(sch.trace.lines()[1])
        b1 = sch.reindex_cache_read(block=b0, read_buffer_index=0, storage_scope="shared", index_map=lambda i, j, k: (k, i,))
        """  # noqa: E501
        return self._reindex_cache("reindex_cache_read", block, read_buffer_index,
                                   storage_scope, index_map)

    @accepts_block_names("block")
    def reindex_cache_write(
        self, block: BlockRV, write_buffer_index: int | str, storage_scope: str, index_map: Any
    ) -> BlockRV:
        """Make ``block`` write its ``write_buffer_index``-th output (one element per
        iteration) into a new ``storage_scope`` buffer indexed by ``index_map`` of its
        iter vars; a copy block right after it (before the buffer's next reader) stores
        it back. Returns the copy.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
        >>> c = sch.reindex_cache_write("C", 0, "local", lambda i, j, k: (j, i))
        >>> print(sch.get(sch.get_block("C")).body)
        C_local[vj, vi] = C_local[vj, vi] + A[vi, vk] * B[vk, vj]
        """
        return self._reindex_cache("reindex_cache_write", block, write_buffer_index,
                                   storage_scope, index_map)

    def _reindex_cache(self, prim: str, block, index, storage_scope, index_map) -> BlockRV:
        from ..ir.index_map import IndexMap, IndexMapError
        from .errors import InvalidScheduleArgumentError
        from .primitives import reindex_cache as RC

        func_name, name = self._block(prim, block)
        func = self._mod[func_name]
        kind = "read" if prim == "reindex_cache_read" else "write"
        index = _read_index(func, prim, name, index, kind)
        blk = self.get(block)
        dtypes = {iv.var.dtype for iv in blk.iter_vars}
        dtype = dtypes.pop() if len(dtypes) == 1 else "int32"  # as TVM: the block's
        try:
            imap = index_map if isinstance(index_map, IndexMap) else IndexMap.from_func(
                index_map, index_dtype=dtype)
        except IndexMapError as e:
            raise InvalidScheduleArgumentError(
                prim, f'bad index_map for block "{name}": {e}', func, blocks=[name]
            ) from None
        func, new_name = getattr(RC, prim)(func, name, index, storage_scope, imap)
        rv = self._new(BlockRV, (func_name, new_name))
        args = {"block": block, f"{kind}_buffer_index": index, "storage_scope": storage_scope,
                "index_map": imap}
        self._commit("ReindexCacheRead" if kind == "read" else "ReindexCacheWrite", args, [rv],
                     func)
        return rv
