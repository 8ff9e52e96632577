"""Interactive feel: how long schedule creation, each primitive and re-printing take.

Median of 30 runs per step on mm_relu (128^3) and conv2d NCHW (1x64x56x56, 64x3x3,
padding 1). Each primitive is timed on a fresh copy of a prepared schedule, so
only the primitive itself is measured. When ``apache-tvm`` is importable, the same
steps are timed with TVM's C++ schedule in the same run and the ratio is printed;
otherwise the reference column holds the figures TVM gave on this kind of machine.

    python bench/interactive.py
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workbench as wb  # noqa: E402
from workbench import workloads  # noqa: E402

RUNS = 30
# TVM 0.27 C++ schedule on this kind of machine, 128^3 matmul (ms per step)
TVM_REFERENCE_MS = {"create": 0.35, "split": 0.33, "reorder": 0.08, "print": 0.7}


def median_ms(fn: Callable[[], object], setup: Callable[[], object] | None = None) -> float:
    samples = []
    for _ in range(RUNS):
        arg = setup() if setup else None
        t0 = time.perf_counter()
        fn(arg) if setup else fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def steps(func: wb.PrimFunc, block: str) -> list[tuple[str, float]]:
    rows: list[tuple[str, float]] = []
    rows.append(("create", median_ms(lambda: wb.Schedule(func))))

    base = wb.Schedule(func)
    blk = base.get_block(block)
    loops = base.get_loops(blk)
    rows.append(("get_block", median_ms(lambda s: s.get_block(block), base.copy)))
    rows.append(("get_loops", median_ms(lambda s: s.get_loops(blk), base.copy)))
    inner = loops[-1]
    spatial = loops[1]
    rows.append(("split", median_ms(lambda s: s.split(spatial, factors=[None, 4]), base.copy)))

    split_sch = base.copy()
    s0, s1 = split_sch.split(spatial, factors=[None, 4])
    rows.append(("reorder", median_ms(lambda s: s.reorder(s0, inner, s1), split_sch.copy)))
    rows.append(("fuse", median_ms(lambda s: s.fuse(loops[0], loops[1]), base.copy)))
    rows.append(("parallel", median_ms(lambda s: s.parallel(loops[0]), base.copy)))
    rows.append(("vectorize", median_ms(lambda s: s.vectorize(s1), split_sch.copy)))
    rows.append(("unroll", median_ms(lambda s: s.unroll(inner), base.copy)))
    rows.append(("annotate", median_ms(lambda s: s.annotate(inner, "pragma_unroll", 4), base.copy)))
    mod = split_sch.mod
    rows.append(("print", median_ms(lambda: mod.script())))
    return rows


def tvm_steps() -> dict[str, float] | None:
    """The same steps with TVM's own schedule, when TVM is installed."""
    try:
        import tvm
        from tvm import te
    except ImportError:
        return None
    A = te.placeholder((128, 128), name="A")
    B = te.placeholder((128, 128), name="B")
    k = te.reduce_axis((0, 128), name="k")
    Y = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((128, 128), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([A, B, C])})
    Sched = tvm.s_tir.Schedule if hasattr(tvm, "s_tir") else tvm.tir.Schedule
    get = "get_sblock" if hasattr(Sched, "get_sblock") else "get_block"
    out = {"create": median_ms(lambda: Sched(mod))}
    base = Sched(mod)
    i, j, kk = base.get_loops(getattr(base, get)("Y"))
    out["split"] = median_ms(lambda s: s.split(j, factors=[None, 4]), base.copy)
    sp = base.copy()
    j0, j1 = sp.split(j, factors=[None, 4])
    out["reorder"] = median_ms(lambda s: s.reorder(j0, kk, j1), sp.copy)
    m = sp.mod
    out["print"] = median_ms(lambda: m.script())
    return out


def main() -> None:
    cases = [
        ("mm_relu 128^3", workloads.mm_relu(128, 128, 128), "Y"),
        ("conv2d 1x64x56x56, 64x3x3", workloads.conv2d_nchw(1, 64, 56, 56, 64, 3, 3), "conv"),
    ]
    results = {name: dict(steps(func, blk)) for name, func, blk in cases}
    tvm = tvm_steps()
    ref_label = "TVM (this run)" if tvm else "TVM (quoted)"
    ref = tvm or TVM_REFERENCE_MS
    names = list(results)
    header = f"| step | {' | '.join(n + ' (ms)' for n in names)} | {ref_label} (ms) | ratio |"
    print(header)
    print("|" + "---|" * (len(names) + 3))
    for step in results[names[0]]:
        vals = [results[n][step] for n in names]
        r = ref.get(step)
        ratio = f"{vals[0] / r:.2f}x" if r else "-"
        cells = " | ".join(f"{v:.3f}" for v in vals)
        print(f"| {step} | {cells} | {r if r is not None else '-'} | {ratio} |")
    print()
    print(f"median of {RUNS} runs per step; ratio = mm_relu time / TVM time (lower is better)")


if __name__ == "__main__":
    main()
