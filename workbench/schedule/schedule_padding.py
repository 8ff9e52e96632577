"""The Schedule's padding and buffer-attribute primitives (decompose_padding,
can_decompose_padding, pad_einsum, unsafe_set_dtype, annotate_buffer_access, remove_rv): a
mixin of :class:`~workbench.schedule.schedule.Schedule`; they record their instructions like
the others (``can_decompose_padding`` and ``remove_rv`` record nothing, as in TVM)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..ir.index_map import IndexMap
from ._block_args import accepts_block_names
from .errors import InvalidScheduleArgumentError
from .trace import RV, BlockRV, Kind, LambdaText, LoopRV, register_kind

__all__ = ["PaddingMethods"]

# As TVM 0.27's instruction traits (src/s_tir/schedule/primitive/*.cc).
register_kind(
    Kind("DecomposePadding", "decompose_padding", inputs=("block", "loop"), outputs="single")
)
register_kind(Kind("PadEinsum", "pad_einsum", inputs=("block",), attrs=("padding",)))
register_kind(
    Kind("UnsafeSetDType", "unsafe_set_dtype", inputs=("block",), attrs=("buffer_index", "dtype"))
)


class PaddingMethods:
    """Mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any
    _rvs: dict

    def _block_and_loop(self, primitive: str, block: BlockRV, loop: LoopRV):
        func_name, name = self._block(primitive, block)  # type: ignore[attr-defined]
        loop_func, var = self._loop(primitive, loop)  # type: ignore[attr-defined]
        if loop_func != func_name:
            raise InvalidScheduleArgumentError(
                primitive,
                f'block "{name}" and loop "{var.name}" are in different functions',
                self._mod[func_name],
            )
        return func_name, name, var

    @accepts_block_names("block")
    def decompose_padding(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Split a padding block (``A[...] = T.if_then_else(pred, value, constant)``) into
        a block ``<name>_pad_const`` that writes the constant everywhere, in a copy of the
        loops from ``loop`` down placed right before ``loop``, and the original block,
        which then writes only the in-bound region (and reads nothing out of bounds).
        Returns the constant block.

        >>> import workbench as wb
        >>> from workbench.testing import padded_func
        >>> sch = wb.Schedule(padded_func(8, 2))
        >>> pad = sch.get_block("pad")
        >>> const = sch.decompose_padding(pad, sch.get_loops(pad)[0])
        >>> sch.get(const).name, sch.get(pad).iter_vars[0].extent
        ('pad_pad_const', 8)
        >>> print(sch.trace.lines()[-1])
        b2 = sch.decompose_padding(block=b0, loop=l1)
        """
        from .primitives import padding as PD

        func_name, name, var = self._block_and_loop("decompose_padding", block, loop)
        func, const_name = PD.decompose_padding(self._mod[func_name], name, var)
        rv = self._new(BlockRV, (func_name, const_name))  # type: ignore[attr-defined]
        self._commit("DecomposePadding", {"block": block, "loop": loop}, [rv], func)  # type: ignore[attr-defined]
        return rv

    @accepts_block_names("block")
    def can_decompose_padding(self, block: BlockRV, loop: LoopRV) -> bool:
        """Whether :meth:`decompose_padding` would accept ``block`` at ``loop`` (nothing
        is changed or recorded).

        >>> import workbench as wb
        >>> from workbench.testing import padded_func
        >>> sch = wb.Schedule(padded_func(8, 2))
        >>> pad = sch.get_block("pad")
        >>> sch.can_decompose_padding(pad, sch.get_loops(pad)[0])
        True
        """
        from .primitives import padding as PD

        func_name, name, var = self._block_and_loop("can_decompose_padding", block, loop)
        return PD.can_decompose_padding(self._mod[func_name], name, var)

    def remove_rv(self, rand_var: RV) -> None:
        """Drop a block, loop or expression handle from the schedule; using it later is
        an error. Like TVM, this records no instruction (TVM 0.27 has no instruction kind
        for it, so a trace never mentions it).

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(8, 8, 8))
        >>> b = sch.get_block("C")
        >>> sch.remove_rv(b)
        >>> try:
        ...     sch.get_loops(b)
        ... except wb.ScheduleError as e:
        ...     print(type(e).__name__)
        RemovedHandleError
        """
        if not isinstance(rand_var, RV) or rand_var not in self._rvs:
            raise InvalidScheduleArgumentError(
                "remove_rv", f"{rand_var!r} is not a handle of this schedule"
            )
        del self._rvs[rand_var]
        self._removed.add(rand_var.uid)

    @accepts_block_names("block")
    def pad_einsum(self, block: BlockRV, padding: Sequence[int]) -> None:
        """Pad the iteration space of an einsum-like block (every access indexed by
        plain iter vars) so each iter var's extent is a multiple of ``padding[k]``: the
        buffers it reads and writes along padded iter vars become ``<name>_pad`` copies,
        filled by new blocks before it (zero outside the original) and copied back
        after it.

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(30, 30, 30))
        >>> sch.pad_einsum("C", [32, 32, 32])
        >>> [b.name for b in sch.func.body.alloc_buffers]
        ['A_pad', 'B_pad', 'C_pad']
        >>> sch.get(sch.get_loops("C")[0]).extent
        32
        """
        from .primitives import pad_einsum as PE

        func_name, name = self._block("pad_einsum", block)  # type: ignore[attr-defined]
        func = PE.pad_einsum(self._mod[func_name], name, padding)
        self._commit("PadEinsum", {"block": block, "padding": [int(p) for p in padding]}, (),  # type: ignore[attr-defined]
                     func)

    @accepts_block_names("block")
    def unsafe_set_dtype(self, block: BlockRV, buffer_index: int, dtype: str) -> None:
        """Change the dtype of the ``buffer_index``-th buffer ``block`` writes (a buffer a
        block allocates, not a parameter): stores into it are cast to ``dtype`` and loads
        from it cast back to the old dtype. Unsafe: precision may be lost.

        >>> import workbench as wb
        >>> from workbench.testing import chain_func
        >>> sch = wb.Schedule(chain_func(8))
        >>> sch.unsafe_set_dtype("B", 0, "float16")
        >>> sch.func.body.alloc_buffers[0].dtype
        'float16'
        """
        from .primitives import set_dtype as SD

        func_name, name = self._block("unsafe_set_dtype", block)  # type: ignore[attr-defined]
        func = SD.unsafe_set_dtype(self._mod[func_name], name, buffer_index, dtype)
        self._commit("UnsafeSetDType",  # type: ignore[attr-defined]
                     {"block": block, "buffer_index": buffer_index, "dtype": dtype}, (), func)

    @accepts_block_names("block")
    def annotate_buffer_access(
        self, block: BlockRV, buffer_index: int, buf_type: str,
        gen_new_ranges: Callable | str | IndexMap,
    ) -> None:
        """Replace the ``buffer_index``-th read (``buf_type="read"``) or write
        (``"write"``) region of ``block`` by ranges of its iter vars:
        ``gen_new_ranges(vi, vj, ...)`` returns one ``(begin, end)`` pair, or a single
        index ``e`` meaning ``(e, e + 1)``, per buffer dimension. The block is annotated
        ``explicit_read_region`` / ``explicit_write_region`` and keeps the region when it
        is rewritten later (``compute_at`` of a producer then computes what it lists).
        ``gen_new_ranges`` may also be the text of such a lambda (read with ``ast``,
        never run) or an :class:`~workbench.ir.index_map.IndexMap` of the flat bounds.

        >>> import workbench as wb
        >>> from workbench.testing import chain_func
        >>> sch = wb.Schedule(chain_func(8))
        >>> sch.annotate_buffer_access("B", 0, "read", lambda vi, vj: ((vi - 1, vi + 1), vj))
        >>> sch.get(sch.get_block("B")).reads[0].region
        ((vi - 1, 2), (vj, 1))
        >>> print(sch.trace.lines()[1])
        sch.annotate_buffer_access(block=b0, buffer_index=0, buf_type="read", gen_new_ranges=lambda vi, vj: [(vi - 1, vi + 1), (vj, vj + 1)])
        """  # noqa: E501
        from .primitives import buffer_access as BA

        p = "annotate_buffer_access"
        func_name, name = self._block(p, block)  # type: ignore[attr-defined]
        func = self._mod[func_name]
        if buf_type not in BA.BUFFER_INDEX_TYPES:
            raise InvalidScheduleArgumentError(
                p, f'buf_type for block "{name}" must be "read" or "write", got {buf_type!r}',
                func, blocks=[name])
        index_map = _ranges_map(p, func, name, gen_new_ranges)
        code = BA.BUFFER_INDEX_TYPES[buf_type]
        new = BA.annotate_buffer_access(func, name, buffer_index, code, index_map)
        self._commit(  # type: ignore[attr-defined]
            "AnnotateBufferAccess",
            {"block": block, "buffer_index": buffer_index, "buffer_index_type": code,
             "index_map": index_map},
            (),
            new,
        )


def _ranges_map(p: str, func: Any, name: str, gen: Any) -> IndexMap:
    """``gen_new_ranges`` as an index map of flat (begin, end) bounds."""
    from ..ir.analysis import find_block
    from ..ir.expr import IntImm, PrimExpr

    if isinstance(gen, IndexMap):
        return gen
    block = find_block(func, name)
    ivs = [iv.var for iv in block.iter_vars]

    def bad(why: str) -> InvalidScheduleArgumentError:
        return InvalidScheduleArgumentError(
            p, f'gen_new_ranges for block "{name}": {why}', func, blocks=[name])

    if isinstance(gen, str):
        return _parse_ranges(gen, bad)
    if not callable(gen):
        raise bad(f"expected a function of the iter vars, got {gen!r}")
    try:
        spec = gen(*ivs)
    except TypeError as e:
        raise bad(f"calling it with the {len(ivs)} iter vars failed: {e}") from None
    if not isinstance(spec, (list, tuple)):
        spec = [spec]
    flat: list[PrimExpr] = []
    for rng in spec:
        if isinstance(rng, (list, tuple)):
            if len(rng) != 2:
                raise bad(f"a range is a (begin, end) pair, got {rng!r}")
            pair = list(rng)
        else:
            pair = [rng, rng + 1]
        for x in pair:
            if isinstance(x, bool) or not isinstance(x, (int, PrimExpr)):
                raise bad(f"expected an index expression, got {x!r}")
            flat.append(IntImm(x) if isinstance(x, int) else x)
    return IndexMap(ivs, flat)


def _parse_ranges(text: str, bad) -> IndexMap:
    """Read ``lambda vi, vj: [(vi - 1, vi + 1), vj]`` (TVM's printed form) with ``ast``:
    pairs are flattened, a single index ``e`` becomes ``e, e + 1``; the result is read by
    :meth:`IndexMap.parse`, which accepts only index arithmetic."""
    import ast

    from ..ir.index_map import IndexMapError

    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise bad(f"not a lambda: {e}") from None
    node = tree.body
    if not isinstance(node, ast.Lambda):
        raise bad("expected `lambda <iter vars>: [ranges]`")
    body = node.body
    items = body.elts if isinstance(body, (ast.List, ast.Tuple)) else [body]
    flat = []
    for it in items:
        if isinstance(it, (ast.List, ast.Tuple)):
            if len(it.elts) != 2:
                raise bad(f"a range is a (begin, end) pair, got `{ast.unparse(it)}`")
            flat += [ast.unparse(x) for x in it.elts]
        else:
            e = ast.unparse(it)
            flat += [e, f"({e}) + 1"]
    params = ", ".join(a.arg for a in node.args.args)
    try:
        return IndexMap.parse(f"lambda {params}: ({', '.join(flat)},)")
    except IndexMapError as e:
        raise bad(str(e)) from None


def _ranges_text(m: IndexMap) -> str:
    """TVM's printed ``gen_new_ranges``: ``lambda vi, vj: [(vi - 1, vi + 1), (vj, vj + 1)]``."""
    from ..ir.printer import expr_to_str

    f = m.final_indices
    pairs = []
    for k in range(0, len(f), 2):
        if f[k] is f[k + 1]:
            pairs.append(expr_to_str(f[k]))
        else:
            pairs.append(f"({expr_to_str(f[k])}, {expr_to_str(f[k + 1])})")
    params = ", ".join(v.name for v in m.initial_indices)
    return f"lambda {params}: [{', '.join(pairs)}]"


def _aba_to_call(args: dict[str, Any]) -> dict[str, Any]:
    kind = "write" if args["buffer_index_type"] == 1 else "read"
    return {"block": args["block"], "buffer_index": args["buffer_index"], "buf_type": kind,
            "gen_new_ranges": LambdaText(_ranges_text(args["index_map"]))}


def _aba_from_call(args: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in args.items() if k not in ("buf_type", "gen_new_ranges")}
    kind = args.get("buf_type")
    if kind not in ("read", "write"):
        raise ValueError(f'buf_type must be "read" or "write", got {kind!r}')
    gen = args.get("gen_new_ranges")
    if not isinstance(gen, str):
        raise ValueError(f"gen_new_ranges must be a lambda, got {gen!r}")

    def bad(why: str) -> ValueError:
        return ValueError(why)

    out["buffer_index_type"] = 1 if kind == "write" else 0
    out["index_map"] = _parse_ranges(gen, bad)
    return out


register_kind(
    Kind(
        "AnnotateBufferAccess",
        "annotate_buffer_access",
        inputs=("block", "buffer_index", "buffer_index_type", "index_map"),
        order=("block", "buffer_index", "buf_type", "gen_new_ranges"),
        to_call=_aba_to_call,
        from_call=_aba_from_call,
    )
)
