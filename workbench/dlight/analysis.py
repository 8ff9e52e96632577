"""What the rules look at: the normal form of a function and facts about its blocks.

A rule starts from :func:`normalize_prim_func`, as TVM's DLight rules do: every leaf
block whose loops bind its iter vars one to one (``for i: for j: block(vi=i, vj=j)``)
is re-indexed with ``transform_block_layout`` so that unit iter vars disappear, and
described by a :class:`BlockInfo`: its iter vars in order, each spatial (``"S"``),
reduction (``"R"``) or other (``"O"``), with the loop that runs it.

>>> import workbench as wb
>>> from workbench.dlight.analysis import normalize_prim_func
>>> sch = wb.Schedule(wb.workloads.mm_relu(64, 64, 32))
>>> [(b.name, b.dom_kind(), b.dom()) for b in normalize_prim_func(sch)]
[('Y', 'SSR', [64, 64, 32]), ('C', 'SS', [64, 64])]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..ir import Block, For, IntImm, PrimExpr, PrimFunc, Var
from ..ir.expr import Add, FloorDiv, FloorMod, Mul, const
from ..ir.functor import expr_vars
from ..ir.index_map import IndexMap
from ..ir.stmt import BufferRegion
from ..schedule import BlockRV, LoopRV, Schedule, ScheduleError

__all__ = [
    "BlockInfo",
    "IterInfo",
    "auto_vectorize",
    "collect_block_iter_vars_used_in_access_region",
    "detect_dominant_read",
    "get_block_info",
    "get_extent",
    "get_root_block",
    "has_thread_bindings",
    "is_broadcast_epilogue",
    "is_reduction_block",
    "max_shared_memory_per_block",
    "max_threads_per_block",
    "normalize_or_decline",
    "normalize_prim_func",
    "suggest_threads_per_block",
    "try_inline",
    "try_inline_contiguous_spatial",
]


@dataclass
class IterInfo:
    """One iter var of a normalized block: ``kind`` ``"S"`` / ``"R"`` / ``"O"``, the
    block's variable, its extent (``dom``: an int, or an expression for a symbolic
    shape) and the handle of the loop that runs it."""

    kind: str
    var: Var
    dom: int | PrimExpr
    loop_rv: LoopRV

    def __repr__(self) -> str:
        return f'Iter("{self.kind}", {self.dom})'


@dataclass
class BlockInfo:
    """A normalized leaf block: its name, iter vars (:class:`IterInfo`) and handle."""

    name: str
    iters: list[IterInfo]
    block_rv: BlockRV
    reduction_block: bool = False
    _extra: dict = field(default_factory=dict, repr=False)

    def dom(self) -> list[int | PrimExpr]:
        """The extents of the iter vars, in order."""
        return [i.dom for i in self.iters]

    def dom_kind(self) -> str:
        """The kinds of the iter vars as one string, e.g. ``"SSR"``."""
        return "".join(i.kind for i in self.iters)

    def is_injective(self) -> bool:
        """Whether every iter var is spatial (no reduction)."""
        return all(k == "S" for k in self.dom_kind())

    def is_reduction(self) -> bool:
        """Whether the block is a reduction block in TVM's sense (an init, spatial and
        reduction iter vars, the reduction ones not indexing the output)."""
        return self.reduction_block

    def is_elementwise(self, sch: Schedule) -> bool:
        """Injective, one read and one write, each indexed by exactly the iter vars in
        order (``B[vi, vj] = f(A[vi, vj])``)."""
        if not self.is_injective():
            return False
        block: Block = sch.get(self.block_rv)
        if len(block.reads) != 1 or len(block.writes) != 1:
            return False
        ivars = [iv.var for iv in block.iter_vars]
        for region in (block.reads[0], block.writes[0]):
            if len(region.region) != len(ivars):
                return False
            for v, (mn, ext) in zip(ivars, region.region, strict=True):
                if mn is not v or _int(ext) != 1:
                    return False
        return True

    def get_loops(self) -> list[LoopRV]:
        """The loop handles, one per iter var."""
        return [i.loop_rv for i in self.iters]

    def __repr__(self) -> str:
        return f'BlockInfo("{self.name}", "{self.dom_kind()}", {self.dom()})'


def _int(e) -> int | None:
    if isinstance(e, bool):
        return None
    if isinstance(e, int):
        return e
    if isinstance(e, IntImm):
        return e.value
    return None


def get_extent(sch: Schedule, loop_rv: LoopRV) -> int | PrimExpr:
    """A loop's extent: an int when static, else the expression."""
    loop: For = sch.get(loop_rv)
    v = _int(loop.extent)
    return loop.extent if v is None else v


def has_thread_bindings(func: PrimFunc) -> bool:
    """Whether ``func`` already binds a loop to a GPU thread axis."""
    from ..ir.functor import iter_stmts

    return any(isinstance(s, For) and s.kind == "thread_binding" for s in iter_stmts(func.body))


def get_root_block(sch: Schedule) -> BlockRV:
    """The handle of the function's root block."""
    return sch.get_block(sch.func.body.name)


def _leaf_blocks(sch: Schedule, block: BlockRV, out: list[BlockRV]) -> None:
    kids = sch.get_child_blocks(block)
    if not kids:
        out.append(block)
    for kid in kids:
        _leaf_blocks(sch, kid, out)


def is_reduction_block(sch: Schedule, block: BlockRV) -> bool:
    """TVM's reduction-block test: an init, S/R iter vars with quasi-affine bindings,
    no reduction var indexing the output, and no other writer of that output."""
    from ..ir.analysis import block_path
    from ..schedule.primitives.reduction import check_reduction_block

    b: Block = sch.get(block)
    path = block_path(sch.func, b.name)
    try:
        check_reduction_block("normalize_prim_func", sch.func, path)
    except ScheduleError:
        return False
    return True


def _iter_infos(sch: Schedule, block: BlockRV) -> list[IterInfo]:
    b: Block = sch.get(block)
    loops = sch.get_loops(block)
    return [
        IterInfo(iv.kind, iv.var, _int(iv.extent) if _int(iv.extent) is not None else iv.extent,
                 lp)
        for lp, iv in zip(loops, b.iter_vars, strict=False)
    ]


def normalize_prim_func(sch: Schedule) -> list[BlockInfo] | None:
    """Bring ``sch``'s function to the normal form the rules start from, or None when
    it has none (a leaf block whose loops do not bind its iter vars one to one, or a
    loop that does not start at 0).

    Each leaf block is re-indexed (``transform_block_layout``) to drop its unit iter
    vars; a block left with no spatial iter var gets a leading unit one, as in TVM.
    The loops are then named ``ax0, ax1, ...``.
    """
    root = get_root_block(sch)
    leaves: list[BlockRV] = []
    _leaf_blocks(sch, root, leaves)
    leaves = [b for b in leaves if sch.get(b) is not sch.func.body]
    for rv in leaves:
        block: Block = sch.get(rv)
        loops = [sch.get(lp) for lp in sch.get_loops(rv)]
        if not loops:
            continue
        if len(loops) != len(block.iter_values):
            return None
        for lp, value in zip(loops, block.iter_values, strict=True):
            if value is not lp.loop_var or lp.min != 0:
                return None
    infos: list[BlockInfo] = []
    for rv in leaves:
        block = sch.get(rv)
        inputs = [Var(iv.var.name, iv.var.dtype) for iv in block.iter_vars]
        outputs: list[PrimExpr] = []
        has_spatial = False
        for v, iv in zip(inputs, block.iter_vars, strict=True):
            if _int(iv.extent) != 1:
                outputs.append(v)
                has_spatial |= iv.kind == "S"
        if not outputs or not has_spatial:
            dtype = inputs[0].dtype if inputs else "int32"
            outputs.insert(0, const(0, dtype))
        if inputs and sch.get_loops(rv):
            try:
                sch.transform_block_layout(rv, IndexMap(inputs, outputs))
            except ScheduleError:
                pass  # as in TVM: a block that cannot be re-indexed is kept as it is
        infos.append(BlockInfo(sch.get(rv).name, _iter_infos(sch, rv), rv,
                               is_reduction_block(sch, rv)))
    return infos


def normalize_or_decline(sch: Schedule) -> list[BlockInfo]:
    """:func:`normalize_prim_func`, or :class:`~workbench.dlight.Declined` with the
    reason when the function has no normal form (what every built-in rule does first)."""
    from .base import Declined

    infos = normalize_prim_func(sch)
    if infos is None:
        raise Declined("not in normal form: a block's loops do not bind its iter vars one "
                       "to one (or a loop does not start at 0)")
    return infos


def get_block_info(sch: Schedule, block: BlockRV) -> BlockInfo:
    """A :class:`BlockInfo` for ``block`` as it is (no normalization)."""
    b: Block = sch.get(block)
    return BlockInfo(b.name, _iter_infos(sch, block), block,
                     any(iv.kind == "R" for iv in b.iter_vars))


# ---------------------------------------------------------------- access analysis


def collect_block_iter_vars_used_in_access_region(
    block: Block, region: Sequence[tuple[PrimExpr, PrimExpr]]
) -> set[Var]:
    """The block's iter vars that the region's (point) indices use."""
    mine = {iv.var for iv in block.iter_vars}
    used: set[Var] = set()
    for mn, _ in region:
        used |= expr_vars(mn) if isinstance(mn, PrimExpr) else set()
    return used & mine


def _offset(region: BufferRegion) -> PrimExpr:
    buf = region.buffer
    offset: PrimExpr = const(0, buf.index_dtype)
    stride: PrimExpr | int = 1
    for (mn, _), extent in zip(reversed(region.region), reversed(buf.shape), strict=True):
        offset = offset + mn * stride
        stride = extent * stride if not (isinstance(stride, int) and stride == 1) else extent
    from ..ir.simplify import simplify

    return simplify(offset)


def detect_dominant_read(block: Block) -> PrimExpr:
    """The flattened index of the read that uses the most iter vars (TVM's "dominant
    read"), e.g. ``vi * 768 + vk`` for ``A[vi, vk]``."""
    best = None
    count = -1
    for region in block.reads:
        n = len(collect_block_iter_vars_used_in_access_region(block, region.region))
        if n > count:
            best, count = region, n
    if best is None:
        raise ValueError(f'block "{block.name}" reads nothing')
    return _offset(best)


def is_broadcast_epilogue(sch: Schedule, block: BlockRV, epilogue: BlockRV) -> bool:
    """Whether ``epilogue`` reads ``block``'s output with fewer iter vars than it has
    non-unit ones (a broadcast, e.g. a per-row statistic used on every column)."""
    written = {w.buffer for w in sch.get(block).writes}
    epi: Block = sch.get(epilogue)
    iters = [iv for iv in epi.iter_vars if _int(iv.extent) != 1]
    for region in epi.reads:
        if region.buffer not in written:
            continue
        if len(collect_block_iter_vars_used_in_access_region(epi, region.region)) < len(iters):
            return True
    return False


def index_pattern(e: PrimExpr) -> str:
    """A short name for the shape of an index: ``"var"``, ``"var*c+var"``,
    ``"var%c"``, ``"var//c"`` or ``"other"`` (what TVM's BufferInfo classifies)."""
    if isinstance(e, Var):
        return "var"
    if isinstance(e, Add) and isinstance(e.b, Var) and isinstance(e.a, Mul):
        return "var*c+var"
    if isinstance(e, FloorMod) and isinstance(e.a, Var):
        return "var%c"
    if isinstance(e, FloorDiv) and isinstance(e.a, Var):
        return "var//c"
    return "other"


# ---------------------------------------------------------------- common schedules


def try_inline(sch: Schedule, blocks: list[BlockInfo]) -> list[BlockInfo]:
    """Inline (``compute_inline``, else ``reverse_compute_inline``) as many of
    ``blocks`` as possible, repeatedly; return those that stay."""

    def trial(primitive: Callable[[BlockRV], None]) -> int | None:
        for i, info in enumerate(blocks):
            try:
                primitive(info.block_rv)
            except ScheduleError:
                continue
            return i
        return None

    blocks = list(blocks)
    while True:
        i = trial(sch.compute_inline)
        if i is None:
            i = trial(sch.reverse_compute_inline)
        if i is None:
            return blocks
        blocks.pop(i)


def try_inline_contiguous_spatial(sch: Schedule, infos: list[BlockInfo] | None
                                  ) -> list[BlockInfo] | None:
    """Inline runs of consecutive injective blocks where possible (TVM's
    ``try_inline_contiguous_spatial``); return the blocks that remain."""
    if infos is None:
        return None
    out: list[BlockInfo] = []
    run: list[BlockInfo] = []
    for info in infos:
        if info.is_injective():
            run.append(info)
            continue
        if run:
            out.extend(try_inline(sch, run))
            run = []
        out.append(info)
    if run:
        out.extend(try_inline(sch, run))
    return out


# ---------------------------------------------------------------- target facts


def max_threads_per_block(target) -> int:
    """Threads per block the rules may use on ``target`` (1024 on CUDA)."""
    n = getattr(target, "max_threads_per_block", None)
    return int(n) if n else 1024


def max_shared_memory_per_block(target) -> int:
    """Static shared memory per block on ``target`` (48 KiB on CUDA)."""
    n = getattr(target, "max_shared_memory_per_block", None)
    return int(n) if n else 49152


def suggest_threads_per_block(target, loops: Sequence[For],
                              max_threads_for_dynamic_loop: int = 32) -> list[int]:
    """Split ``max_threads_per_block`` over ``loops`` from the innermost out, as TVM's
    helper of the same name: static loops get the largest power of two that fits
    their extent and what is left, symbolic ones at most
    ``max_threads_for_dynamic_loop``; the rest goes to the first symbolic loop."""
    threads = max_threads_per_block(target)
    results: list[int | None] = []
    dynamic: list[int] = []
    for i, loop in enumerate(loops):
        ext = _int(loop.extent)
        if ext is None:
            results.append(None)
            dynamic.append(i)
            continue
        extent = 1
        while extent <= ext and extent <= threads:
            extent *= 2
        extent //= 2
        results.append(extent)
        threads //= extent
    if dynamic:
        share = max(1, min(max_threads_for_dynamic_loop, threads))
        for i in dynamic:
            results[i] = 1
        results[dynamic[0]] = share
    return [r if r is not None else 1 for r in results]


def auto_vectorize(sch: Schedule, loop: LoopRV, max_vec: int) -> None:
    """Vectorize ``loop`` (split off an inner ``max_vec`` first if it is longer);
    symbolic loops are left alone."""
    extent = get_extent(sch, loop)
    if not isinstance(extent, int):
        return
    inner = loop if extent <= max_vec else sch.split(loop, factors=[None, max_vec])[-1]
    sch.vectorize(inner)
