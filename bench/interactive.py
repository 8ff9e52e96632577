"""Interactive feel: how long schedule creation, each primitive and re-printing take.

Median of 30 runs per step on mm_relu (128^3) and conv2d NCHW (1x64x56x56, 64x3x3,
padding 1); then the ScheduleEditor's round trip (an action to its updated HTML).
Each primitive is timed on a fresh copy of a prepared schedule, so only the primitive
itself is measured. When ``apache-tvm`` is importable, the same
steps are timed with TVM's C++ schedule in the same run and the ratio is printed;
otherwise the reference column holds the figures TVM gave on this kind of machine.
Last, reading TVMScript: ``wb.from_script`` against TVM's ``tvm.script.from_source``
on the same text (``--parse`` runs only that section). After each table a line says
whether other processes used the CPU meanwhile (``NOISY`` past
``wb.get_noise_thresholds().foreign_load``): then its figures may mislead.

    python bench/interactive.py [--parse]
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
from workbench.runtime.noise import CpuSnapshot, cpu_snapshot, foreign_load  # noqa: E402

RUNS = 30
# TVM 0.27 C++ schedule on this kind of machine, 128^3 matmul (ms per step)
TVM_REFERENCE_MS = {"create": 0.35, "split": 0.33, "reorder": 0.08, "print": 0.7}


def noise_line(since: CpuSnapshot) -> str:
    """Whether other processes used the CPU since ``since`` (the table just printed)."""
    load = foreign_load(since, cpu_snapshot())
    limit = wb.get_noise_thresholds().foreign_load
    if load is None:
        return "noise: unknown (no /proc/stat)"
    if load > limit:
        return (f"NOISY: other processes used {load:.0%} of the CPU while this table was "
                f"measured (over {limit:.0%}); run again on a quiet machine")
    return f"quiet: other processes used {load:.0%} of the CPU meanwhile"


def median_ms(fn: Callable[[], object], setup: Callable[[], object] | None = None) -> float:
    samples = []
    for _ in range(RUNS):
        arg = setup() if setup else None
        t0 = time.perf_counter()
        fn(arg) if setup else fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def steps(
    make: Callable[[], object], case: dict, get: str = "get_block"
) -> dict[str, float]:
    """Time each step; ``make`` builds a fresh schedule (ours or TVM's: same API)."""
    block = case["block"]
    rows: dict[str, float] = {"create": median_ms(make)}
    base = make()
    blk = getattr(base, get)(block)
    loops = base.get_loops(blk)
    rows["get_block"] = median_ms(lambda s: getattr(s, get)(block), base.copy)
    rows["get_loops"] = median_ms(lambda s: s.get_loops(blk), base.copy)
    inner, spatial = loops[-1], loops[1]
    rows["split"] = median_ms(lambda s: s.split(spatial, factors=[None, 4]), base.copy)
    split_sch = base.copy()
    s0, s1 = split_sch.split(spatial, factors=[None, 4])
    rows["reorder"] = median_ms(lambda s: s.reorder(s0, inner, s1), split_sch.copy)
    rows["fuse"] = median_ms(lambda s: s.fuse(loops[0], loops[1]), base.copy)
    rows["parallel"] = median_ms(lambda s: s.parallel(loops[0]), base.copy)
    rows["vectorize"] = median_ms(lambda s: s.vectorize(s1), split_sch.copy)
    rows["unroll"] = median_ms(lambda s: s.unroll(inner), base.copy)
    rows["annotate"] = median_ms(lambda s: s.annotate(inner, "pragma_unroll", 4), base.copy)
    producer, consumer, at = case["compute_at"]
    c_loops = base.get_loops(getattr(base, get)(consumer))
    p_blk = getattr(base, get)(producer)
    rows["compute_at"] = median_ms(lambda s: s.compute_at(p_blk, c_loops[at]), base.copy)
    if case.get("reverse_compute_at"):
        consumer, producer, at = case["reverse_compute_at"]
        p_loops = base.get_loops(getattr(base, get)(producer))
        c_blk = getattr(base, get)(consumer)
        rows["reverse_compute_at"] = median_ms(
            lambda s: s.reverse_compute_at(c_blk, p_loops[at]), base.copy
        )
    rows["cache_read"] = median_ms(lambda s: s.cache_read(blk, 0, "shared"), base.copy)
    k = loops[case["reduce_loop"]]
    rows["decompose_reduction"] = median_ms(lambda s: s.decompose_reduction(blk, k), base.copy)
    mod = split_sch.mod
    rows["print"] = median_ms(lambda: mod.script())
    return rows


CASES = {
    "mm_relu": {
        "block": "Y",
        "compute_at": ("Y", "C", 0),
        "reverse_compute_at": ("C", "Y", 0),
        "reduce_loop": 2,
    },
    "conv2d": {"block": "conv", "compute_at": ("pad", "conv", 2), "reduce_loop": 4},
}


def tvm_cases() -> dict[str, Callable[[], object]] | None:
    """The same two functions as TVM schedules, when apache-tvm is installed."""
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
    mm = tvm.IRModule({"main": te.create_prim_func([A, B, C])})

    data = te.placeholder((1, 64, 56, 56), name="data")
    weight = te.placeholder((64, 64, 3, 3), name="weight")
    pad = te.compute(
        (1, 64, 58, 58),
        lambda n, c, h, w: te.if_then_else(
            te.all(h >= 1, h < 57, w >= 1, w < 57), data[n, c, h - 1, w - 1], 0.0
        ),
        name="pad",
    )
    rc, ry, rx = (te.reduce_axis((0, e), name=nm) for e, nm in ((64, "rc"), (3, "ry"), (3, "rx")))
    conv = te.compute(
        (1, 64, 56, 56),
        lambda n, kk, h, w: te.sum(
            pad[n, rc, h + ry, w + rx] * weight[kk, rc, ry, rx], axis=[rc, ry, rx]
        ),
        name="conv",
    )
    cv = tvm.IRModule({"main": te.create_prim_func([data, weight, conv])})
    sched = tvm.s_tir.Schedule if hasattr(tvm, "s_tir") else tvm.tir.Schedule
    return {"mm_relu": lambda: sched(mm), "conv2d": lambda: sched(cv), "get": "get_sblock"
            if hasattr(sched, "get_sblock") else "get_block"}


def widget_round_trips(func, actions) -> dict[str, float]:
    """Milliseconds from a ScheduleEditor action to its updated HTML (IR, diff, tree,
    trace): each action is applied and undone RUNS times; both are timed."""
    from workbench.ir import highlight
    from workbench.widgets import ScheduleEditor

    editor = ScheduleEditor(func)
    rows: dict[str, float] = {}
    for name, setup, action, params in actions:
        for prior in setup:
            editor.apply(prior[0], **prior[1])
        applied, undone = [], []
        for _ in range(RUNS):
            highlight._segments_cached.cache_clear()  # as the first time a user sees it
            t0 = time.perf_counter()
            ok = editor.apply(action, **params)
            html = editor.ir_html
            applied.append((time.perf_counter() - t0) * 1e3)
            if not ok or not html:
                raise RuntimeError(f"{name}: {editor.error}")
            highlight._segments_cached.cache_clear()
            t0 = time.perf_counter()
            editor.undo()
            undone.append((time.perf_counter() - t0) * 1e3)
        rows[name] = statistics.median(applied)
        rows[f"undo {name}"] = statistics.median(undone)
        editor.reset()
    # selecting a block with compute_at chosen dry-runs every target loop
    samples = []
    blocks = [t for t in editor.model.tree() if t.kind == "block"]
    for n in range(RUNS):
        t0 = time.perf_counter()
        editor.select(blocks[n % len(blocks)])
        editor.action.value = "compute_at"
        samples.append((time.perf_counter() - t0) * 1e3)
    rows["select block, list compute_at targets"] = statistics.median(samples)
    return rows


WIDGET_ACTIONS = {
    "mm_relu": [
        ("split", [], "split", {"loop": "j", "factors": [None, 4]}),
        ("reorder", [("split", {"loop": "j", "factors": [None, 4]})], "reorder",
         {"loops": ["j_0", "k", "j_1"]}),
        ("reverse_compute_at", [("split", {"loop": "j", "factors": [None, 4]})],
         "reverse_compute_at", {"block": "C", "loop": "j_0"}),
    ],
    "conv2d": [
        ("split", [], "split", {"loop": "w", "factors": [None, 8], "under": "conv"}),
        ("compute_at", [], "compute_at", {"block": "pad", "loop": "h", "under": "conv"}),
        ("cache_read", [], "cache_read", {"block": "conv", "buffer": "weight",
                                          "scope": "local"}),
    ],
}


def print_widget_table(mm, conv) -> None:
    rows = {"mm_relu": widget_round_trips(mm, WIDGET_ACTIONS["mm_relu"]),
            "conv2d": widget_round_trips(conv, WIDGET_ACTIONS["conv2d"])}
    print()
    print("ScheduleEditor round trip: from editor.apply(...) (or a selection) to the")
    print(f"updated HTML of IR, diff, tree and trace; median of {RUNS}, milliseconds.")
    print("Goal: under 50 ms.")
    print()
    print("| workload | action | ms | within 50 ms |")
    print("|---|---|---:|---|")
    for case, table in rows.items():
        for step, ms in table.items():
            print(f"| {case} | {step} | {ms:.1f} | {'yes' if ms < 50 else 'NO'} |")


PARSE_RUNS = 200
PARSE_RUNS_TVM = 30


def cpu_model() -> str:
    """The processor's name (``/proc/cpuinfo`` on Linux)."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def parse_times() -> dict[str, tuple[float, float | None]]:
    """Milliseconds to read the 128^3 matmul / mm_relu modules' tirx text: ours
    (``wb.from_script``, median of PARSE_RUNS) and, when apache-tvm imports, TVM's
    ``tvm.script.from_source`` on the same text in the same run."""
    try:
        import tvm
    except ImportError:
        tvm = None
    rows: dict[str, tuple[float, float | None]] = {}
    for name in ("matmul", "mm_relu"):
        func = workloads.get(name, M=128, N=128, K=128)
        text = wb.IRModule.from_funcs(func).script(syntax="tirx")
        if not wb.structural_equal(wb.from_script(text), wb.IRModule.from_funcs(func)):
            raise RuntimeError(f"{name}: the text does not read back to the module")
        samples = []
        for _ in range(PARSE_RUNS):
            t0 = time.perf_counter()
            wb.from_script(text)
            samples.append((time.perf_counter() - t0) * 1e3)
        theirs = None
        if tvm is not None:
            tvm.script.from_source(text)  # warm up TVM's parser
            tsamples = []
            for _ in range(PARSE_RUNS_TVM):
                t0 = time.perf_counter()
                tvm.script.from_source(text)
                tsamples.append((time.perf_counter() - t0) * 1e3)
            theirs = statistics.median(tsamples)
        rows[name] = (statistics.median(samples), theirs)
    return rows


def print_parse_table() -> None:
    rows = parse_times()
    print()
    print(f"Reading TVMScript (tirx text of the 128^3 module), median, milliseconds; CPU: "
          f"{cpu_model()}. Goal: at least 10x faster than TVM.")
    print()
    print("| module | wb.from_script | tvm.script.from_source | TVM / ours |")
    print("|---|---:|---:|---:|")
    for name, (ours, theirs) in rows.items():
        if theirs is None:
            print(f"| {name} | {ours:.3f} | (apache-tvm not installed) | - |")
        else:
            print(f"| {name} | {ours:.3f} | {theirs:.3f} | {theirs / ours:.1f}x |")


def main() -> None:
    if "--parse" in sys.argv[1:]:  # only the TVMScript reading section
        since = cpu_snapshot()
        print_parse_table()
        print(noise_line(since))
        return
    since = cpu_snapshot()
    mm = workloads.mm_relu(128, 128, 128)
    conv = workloads.conv2d_nchw(1, 64, 56, 56, 64)
    ours = {
        "mm_relu": steps(lambda: wb.Schedule(mm), CASES["mm_relu"]),
        "conv2d": steps(lambda: wb.Schedule(conv), CASES["conv2d"]),
    }
    tvm = tvm_cases()
    theirs = None
    if tvm is not None:
        theirs = {
            "mm_relu": steps(tvm["mm_relu"], CASES["mm_relu"], tvm["get"]),
            "conv2d": steps(tvm["conv2d"], CASES["conv2d"], tvm["get"]),
        }
    print(f"Median of {RUNS} runs per step, milliseconds. mm_relu is 128^3; conv2d is")
    print("1x64x56x56 with 64x3x3 filters and a padding stage.")
    if theirs:
        print("TVM columns: apache-tvm's C++ schedule, measured in this same run.")
        print()
        print("| step | mm_relu | TVM | ratio | conv2d | TVM | ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for step in ours["mm_relu"]:
            cells = []
            for case in ("mm_relu", "conv2d"):
                if step not in ours[case]:
                    cells += ["-", "-", "-"]
                    continue
                a, b = ours[case][step], theirs[case][step]
                cells += [f"{a:.3f}", f"{b:.3f}", f"{a / b:.2f}x"]
            print(f"| {step} | " + " | ".join(cells) + " |")
        print()
        print("ratio = our time / TVM's time (below 1 is faster than TVM)")
    else:
        print("apache-tvm is not installed: the reference column quotes TVM on this kind of")
        print("machine (128^3 matmul); install apache-tvm to measure it side by side.")
        print()
        print("| step | mm_relu | conv2d | TVM (quoted) | ratio |")
        print("|---|---:|---:|---:|---:|")
        for step in ours["mm_relu"]:
            a = ours["mm_relu"][step]
            c = f'{ours["conv2d"][step]:.3f}' if step in ours["conv2d"] else "-"
            ref = TVM_REFERENCE_MS.get(step)
            tail = f"{ref:.2f} | {a / ref:.2f}x" if ref else "- | -"
            print(f"| {step} | {a:.3f} | {c} | {tail} |")
    print(noise_line(since))
    since = cpu_snapshot()
    print_widget_table(mm, conv)
    print(noise_line(since))
    since = cpu_snapshot()
    print_parse_table()
    print(noise_line(since))


if __name__ == "__main__":
    main()
