"""The catch-all GPU rule: inline what can be inlined, then give every remaining
block one thread per output element (its spatial loops fused and split into
``blockIdx.x`` x ``threadIdx.x``), reductions running serially in each thread."""

from __future__ import annotations

from ...schedule import LoopRV, Schedule
from ..analysis import max_threads_per_block, normalize_or_decline, try_inline
from ..base import GPUScheduleRule


class Fallback(GPUScheduleRule):
    """Matches every function in normal form (TVM's ``dlight.gpu.Fallback``): correct,
    rarely fast; the diagnosis flags functions that end up here.

    >>> import workbench as wb
    >>> sch = Fallback().apply(wb.workloads.transpose(64, 64), wb.Target("cuda"), False)
    >>> [sch.get(l).thread_tag for l in sch.get_loops("B")]
    ['blockIdx.x', 'threadIdx.x']
    """

    def apply(self, func, target, tunable) -> Schedule:
        threads = max_threads_per_block(target)
        sch = Schedule(func)
        infos = normalize_or_decline(sch)
        infos = try_inline(sch, infos)
        reductions: list[tuple] = []
        for info in infos:
            block = info.block_rv
            loops = sch.get_loops(block)
            if any(sch.get(lp).kind == "thread_binding" for lp in loops):
                continue
            groups: dict[str, list[LoopRV]] = {"S": [], "R": [], "O": []}
            for lp, kind in zip(loops, info.dom_kind(), strict=False):
                groups[kind].append(lp)
            s_loops, r_loops, o_loops = groups["S"], groups["R"], groups["O"]
            if not s_loops:
                s_loops.append(sch.add_unit_loop(block))
            if len(s_loops) + len(r_loops) + len(o_loops) > 1:
                sch.reorder(*s_loops, *r_loops, *o_loops)
            fused = sch.fuse(*s_loops) if len(s_loops) > 1 else s_loops[0]
            bx, tx = sch.split(fused, factors=[None, threads])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
            if r_loops:
                reductions.append((block, r_loops[0]))
        for block, r_loop in reductions:
            sch.decompose_reduction(block, r_loop)
        return sch
