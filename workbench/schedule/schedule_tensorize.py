"""The Schedule's tensorization primitives (tensorize, tile_with_tensor_intrin): a mixin of
:class:`~workbench.schedule.schedule.Schedule`; they record their instructions like the
others."""

from __future__ import annotations

from typing import Any

from ._block_args import accepts_block_names
from .primitives import tensorize as TZ
from .trace import BlockRV, Kind, LoopRV, register_kind

__all__ = ["TensorizeMethods"]

register_kind(
    Kind(
        "Tensorize",
        "tensorize",
        inputs=("block_or_loop",),
        attrs=("tensor_intrin", "preserve_unit_iters"),
        bool_attrs=("preserve_unit_iters",),
    )
)


class TensorizeMethods:
    """Mixed into :class:`~workbench.schedule.schedule.Schedule`."""

    _mod: Any

    @accepts_block_names("block_or_loop")
    def tensorize(self, block_or_loop: BlockRV | LoopRV, tensor_intrin: str,
                  preserve_unit_iters: bool = True) -> None:
        """Replace a block's computation by the registered tensor intrinsic
        ``tensor_intrin`` (:class:`workbench.TensorIntrin`). Given a loop, the subtree
        under it is blockized first (``<block>_o``, keeping unit iters as
        ``preserve_unit_iters`` says). The block must match the intrinsic's description
        (loops, iteration, init, computation and regions, up to renaming); its body
        becomes the implementation, with the implementation's buffers bound to the
        block's regions by ``T.match_buffer``.

        A row-wise dot product ``C[i] = sum_k A[i, k] * B[i, k]``, ``k`` split by 4 and
        tensorized with an intrinsic adding ``A[0:4] . B[0:4]`` to ``C[()]``:

        >>> import workbench as wb
        >>> head = '''
        ... @T.prim_func
        ... def f(a: T.handle, b: T.handle, c: T.handle):
        ...     A = T.match_buffer(a, (4,), offset_factor=1)
        ...     B = T.match_buffer(b, (4,), offset_factor=1)
        ...     C = T.match_buffer(c, (), offset_factor=1)
        ...     with T.block("root"):
        ... '''
        >>> desc = head + '''
        ...         for k in range(4):
        ...             with T.block("update"):
        ...                 vk = T.axis.remap("R", [k])
        ...                 C[()] = C[()] + A[vk] * B[vk]
        ... '''
        >>> impl = head + '''
        ...         T.evaluate(T.call_extern("void", "doc_dot4", C.access_ptr("rw"),
        ...                                  A.access_ptr("r"), B.access_ptr("r")))
        ... '''
        >>> _ = wb.TensorIntrin.register("doc_rowdot4", desc, impl, override=True)
        >>> A = wb.placeholder((8, 8), name="A")
        >>> B = wb.placeholder((8, 8), name="B")
        >>> k = wb.reduce_axis(8, name="k")
        >>> C = wb.compute((8,), lambda i: wb.sum(A[i, k] * B[i, k], axis=k), name="C")
        >>> sch = wb.Schedule(wb.create_prim_func([A, B, C], name="rowdot"))
        >>> _ = sch.decompose_reduction("C", sch.get_loops("C")[0])
        >>> i, k = sch.get_loops("C_update")
        >>> k0, k1 = sch.split(k, factors=[None, 4])
        >>> sch.tensorize(k1, "doc_rowdot4")
        >>> [m.buffer.name for m in sch.get(sch.get_block("C_update_o")).match_buffers]
        ['A_1', 'B_1', 'C_1']
        """
        p = "tensorize"
        func_name, target = self._loop_or_block(p, block_or_loop)  # type: ignore[attr-defined]
        func = self._mod[func_name]
        intrin = TZ.lookup_intrin(p, tensor_intrin, func)
        new, _ = TZ.tensorize(func, target, intrin, bool(preserve_unit_iters))
        self._commit(  # type: ignore[attr-defined]
            "Tensorize",
            {"block_or_loop": block_or_loop, "tensor_intrin": intrin.name,
             "preserve_unit_iters": bool(preserve_unit_iters)},
            (),
            new,
        )

    @accepts_block_names("block")
    def tile_with_tensor_intrin(self, block: BlockRV, intrin_name: str,
                                allow_padding: bool = False) -> LoopRV | None:
        """Tile the loops of ``block`` that correspond to the description of the tensor
        intrinsic ``intrin_name``: each is split by the description loop's extent and the
        inner parts are reordered innermost, in the description's order. Returns the
        outermost of those inner loops (to ``tensorize``), or None when the block's
        loops do not map onto the description's (as TVM's
        ``tvm.s_tir.schedule.tile_with_tensor_intrin``; recorded as the ``split`` and
        ``reorder`` instructions it makes).

        A loop whose extent is not a multiple of the description's gives None, unless
        ``allow_padding``: the block is then padded first (``pad_einsum``).

        On a row-wise dot product over 8 values with an intrinsic over 4 (the
        description's loop ``k`` of extent 4):

        >>> import workbench as wb
        >>> desc = '''
        ... @T.prim_func
        ... def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
        ...       C: T.Buffer((), "float32")):
        ...     for k in range(4):
        ...         with T.block("update"):
        ...             vk = T.axis.remap("R", [k])
        ...             C[()] = C[()] + A[vk] * B[vk]
        ... '''
        >>> _ = wb.TensorIntrin.register("doc_rowdot4_plain", desc, desc, override=True)
        >>> A = wb.placeholder((8, 8), name="A")
        >>> B = wb.placeholder((8, 8), name="B")
        >>> k = wb.reduce_axis(8, name="k")
        >>> C = wb.compute((8,), lambda i: wb.sum(A[i, k] * B[i, k], axis=k), name="C")
        >>> sch = wb.Schedule(wb.create_prim_func([A, B, C], name="rowdot"))
        >>> _ = sch.decompose_reduction("C", sch.get_loops("C")[0])
        >>> loop = sch.tile_with_tensor_intrin("C_update", "doc_rowdot4_plain")
        >>> [sch.get(lp).extent for lp in sch.get_loops("C_update")], sch.get(loop).extent
        ([8, 2, 4], 4)
        """
        from .errors import ScheduleError

        # several instructions: all or nothing (a refusal, or None after the padding,
        # leaves the schedule as it was)
        saved = self.copy()  # type: ignore[attr-defined]
        try:
            loop = self._tile_with_tensor_intrin(block, intrin_name, allow_padding)
        except ScheduleError:
            self._adopt(saved)  # type: ignore[attr-defined]
            raise
        if loop is None:
            self._adopt(saved)  # type: ignore[attr-defined]
        return loop

    def _tile_with_tensor_intrin(self, block: BlockRV, intrin_name: str,
                                 allow_padding: bool) -> LoopRV | None:
        p = "tile_with_tensor_intrin"
        func_name, name = self._block(p, block)  # type: ignore[attr-defined]
        intrin = TZ.lookup_intrin(p, intrin_name, self._mod[func_name])
        found = TZ.tensorize_loop_mapping(self._mod[func_name], name, intrin.desc)
        if found is None:
            return None
        mapping, needs_padding = found
        if needs_padding:
            if not allow_padding or not hasattr(self, "pad_einsum"):
                return None
            if not self._pad_for_intrin(block, mapping):
                return None
            found = TZ.tensorize_loop_mapping(self._mod[func_name], name, intrin.desc)
            if found is None or found[1]:
                return None
            mapping = found[0]
        if not mapping:
            return None
        loops = self.get_loops(block)  # type: ignore[attr-defined]
        by_var = {self._loop(p, lp)[1]: lp for lp in loops}  # type: ignore[attr-defined]
        inner_parts: dict[int, LoopRV] = {}
        inner_vars = set()
        for var, extent, d_index in mapping:
            _, inner = self.split(by_var[var], factors=[None, extent])  # type: ignore
            inner_parts[d_index] = inner
            inner_vars.add(self._loop(p, inner)[1])  # type: ignore[attr-defined]
        order: list[LoopRV] = []
        met = False
        for lp in self.get_loops(block):  # type: ignore[attr-defined]
            if self._loop(p, lp)[1] in inner_vars:  # type: ignore[attr-defined]
                met = True
            elif met:
                order.append(lp)
        suffix = [inner_parts[k] for k in sorted(inner_parts)]
        self.reorder(*order, *suffix)  # type: ignore[attr-defined]
        return suffix[0]

    def _pad_for_intrin(self, block: BlockRV, mapping) -> bool:
        """Pad ``block``'s iter vars bound to mapped loops whose extent the description's
        does not divide (``pad_einsum``), then inline the padded copies' producers and
        consumers as TVM does. False when the block cannot be padded."""
        from ..ir import Var as _Var
        from .errors import ScheduleError

        func_name, name = self._block("tile_with_tensor_intrin", block)  # type: ignore
        b = self.get(block)  # type: ignore[attr-defined]
        loop_ext = {}
        for lp in self.get_loops(block):  # type: ignore[attr-defined]
            node = self.get(lp)  # type: ignore[attr-defined]
            loop_ext[node.loop_var] = node.extent
        paddings = []
        for value in b.iter_values:
            pad = 1
            for var, extent, _ in mapping:
                if isinstance(value, _Var) and value is var and loop_ext[var] % extent:
                    pad = extent
            paddings.append(pad)
        before_p = {self.get(x).name for x in self.get_producers(block)}  # type: ignore
        before_c = {self.get(x).name for x in self.get_consumers(block)}  # type: ignore
        try:
            self.pad_einsum(block, paddings)  # type: ignore[attr-defined]
        except ScheduleError:
            return False
        for prod in self.get_producers(block):  # type: ignore[attr-defined]
            if self.get(prod).name in before_p:  # type: ignore[attr-defined]
                continue
            originals = self.get_producers(prod)  # type: ignore[attr-defined]
            if len(originals) == 1:
                self.compute_inline(originals[0])  # type: ignore[attr-defined]
        for cons in self.get_consumers(block):  # type: ignore[attr-defined]
            if self.get(cons).name in before_c:  # type: ignore[attr-defined]
                continue
            if self.get_consumers(cons):  # type: ignore[attr-defined]
                self.compute_inline(cons)  # type: ignore[attr-defined]
        del func_name, name
        return True
