"""DLight's CPU rules: unscheduled vs rule-scheduled vs numpy, side by side.

Each function is scheduled by the first of ``wb.dlight.cpu.GEMV()``, ``Reduction()``,
``Fallback()`` that matches it (as ``apply_default_schedule`` does), built to C, and
timed with ``wb.measure`` next to the unscheduled function built the same way and a
numpy equivalent, in one run:

* a GEMV (4096 x 4096 by default), a softmax (4096 x 1024) and a layer norm
  (1024 x 4096);
* the five functions of the demo model (``wb.workloads.demo_mlp(1)``);
* the demo model's whole forward pass at batch 1 and 32 (five kernel calls through
  ``demo_mlp_forward``, Python's call overhead included, against the numpy forward pass).

Times are medians in microseconds; "speedup" is unscheduled / rule, "vs numpy" is
rule / numpy (below 1: faster than numpy). Parallel kernels need the cores to
themselves: with other programs running (see the load average printed first), an
OpenMP thread that loses its core stalls the whole loop for a scheduler time slice.

    python bench/dlight_cpu.py                       # default sizes
    python bench/dlight_cpu.py --gemv 512 --softmax 256 128 --layer-norm 64 256 \\
        --batch 1 4 --min-ms 5                       # small and quick
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workbench as wb  # noqa: E402
from workbench.dlight import cpu  # noqa: E402
from workbench.dlight.cpu import _common  # noqa: E402

RULES = (cpu.GEMV(), cpu.Reduction(), cpu.Fallback())


def machine() -> str:
    """CPU model, vector flags, the vector width the rules use, and threads."""
    from workbench.codegen.extern import cpu_flags

    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "sse4", "fma", "asimd", "sve")))
    threads = os.environ.get("OMP_NUM_THREADS") or str(_common.cores())
    load = f"; load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (f"{model}; vector flags: {' '.join(flags) or 'none found'}; rules' vector width "
            f"{_common.vector_bits()} bits; OpenMP threads: {threads} (cores available: "
            f"{_common.cores()}){load}")


def _arrays(func: wb.PrimFunc, rng: np.random.Generator) -> list[np.ndarray]:
    arrays = []
    for buf in func.params[:-1]:
        arrays.append(rng.standard_normal([int(d) for d in buf.shape]).astype(buf.dtype))
    out = func.params[-1]
    arrays.append(np.zeros([int(d) for d in out.shape], out.dtype))
    return arrays


def _median_us(fn: Callable, *args, min_ms: float, noise: list[str], what: str) -> float:
    """Median microseconds of ``fn(*args)``; a noisy measurement adds a note to
    ``noise`` (see ``wb.noise_note``)."""
    m = wb.measure(fn, *args, repeat=5, min_repeat_ms=min_ms)
    if m.noisy:
        noise.append(f"{what}{wb.noise_note(m)}")
    return m.median * 1e6


def compare(name: str, func: wb.PrimFunc, reference: Callable, min_ms: float) -> dict:
    """Time ``func`` unscheduled, rule-scheduled and ``reference`` (numpy) on the same
    random inputs; check the scheduled result against the unscheduled one."""
    report = wb.dlight.schedule_function(func, RULES, target="c")
    if report.scheduled is None:
        raise RuntimeError(f"{name}: no CPU rule matched ({report.note})")
    rng = np.random.default_rng(0)
    args = _arrays(func, rng)
    plain = wb.build(func, target="c")
    ruled = wb.build(report.scheduled, target="c")
    expect = [a.copy() for a in args]
    plain(*expect)
    got = [a.copy() for a in args]
    ruled(*got)
    np.testing.assert_allclose(got[-1], expect[-1], rtol=1e-3, atol=1e-3)
    inputs = args[:-1]
    noise: list[str] = []
    row = {"function": name, "rule": report.rule,
           "unscheduled": _median_us(plain, *args, min_ms=min_ms, noise=noise,
                                     what="unscheduled"),
           "rule_us": _median_us(ruled, *args, min_ms=min_ms, noise=noise, what="rule"),
           "numpy": _median_us(lambda: reference(*inputs), min_ms=min_ms, noise=noise,
                               what="numpy"),
           "noise": noise}
    return row


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


DEMO_NUMPY = {
    "transpose": lambda w: np.ascontiguousarray(w.T),
    "fused_matmul_add_relu": lambda x, w, b: np.maximum(x @ w + b, 0),
    "layer_norm": _layer_norm,
    "transpose1": lambda w: np.ascontiguousarray(w.T),
    "fused_matmul1_add1": lambda x, w, b: x @ w + b,
}


def forward_rows(batches: list[int], min_ms: float) -> list[dict]:
    from workbench.workloads import demo_mlp, demo_mlp_forward, demo_mlp_params, demo_mlp_ref

    params = demo_mlp_params()
    rows = []
    for batch in batches:
        mod = demo_mlp(batch)
        scheduled = wb.dlight.apply_default_schedule(mod, *RULES, target="c")
        x = np.random.default_rng(1).standard_normal((batch, 768)).astype("float32")
        plain_cache: dict = {}
        rule_cache: dict = {}
        ref = demo_mlp_ref(x, params)
        out = demo_mlp_forward(scheduled, x, params, kernels=rule_cache)
        np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
        demo_mlp_forward(mod, x, params, kernels=plain_cache)
        fw = {k: np.asarray(v) for k, v in params.items()}

        def numpy_forward(x=x, fw=fw):
            h = np.maximum(x @ fw["fc1_weight"].T + fw["fc1_bias"], 0)
            h = _layer_norm(h, fw["norm_weight"], fw["norm_bias"])
            return h @ fw["fc2_weight"].T + fw["fc2_bias"]

        noise: list[str] = []
        rows.append({
            "function": f"demo_mlp forward, batch {batch}", "rule": "(5 functions)",
            "unscheduled": _median_us(lambda m=mod, c=plain_cache, x=x: demo_mlp_forward(
                m, x, params, kernels=c), min_ms=min_ms, noise=noise, what="unscheduled"),
            "rule_us": _median_us(lambda m=scheduled, c=rule_cache, x=x: demo_mlp_forward(
                m, x, params, kernels=c), min_ms=min_ms, noise=noise, what="rule"),
            "numpy": _median_us(numpy_forward, min_ms=min_ms, noise=noise, what="numpy"),
            "noise": noise,
        })
    return rows


def print_table(rows: list[dict]) -> None:
    """The table; a row with a noisy measurement says which in its last column (its
    ratios may mislead), and a line after the table counts them."""
    print("| function | rule | unscheduled (us) | rule (us) | numpy (us) | speedup | vs numpy "
          "| noise |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        noise = "; ".join(r.get("noise", [])) or "quiet"
        print(f"| {r['function']} | {r['rule']} | {r['unscheduled']:.1f} | {r['rule_us']:.1f} | "
              f"{r['numpy']:.1f} | {r['unscheduled'] / r['rule_us']:.2f}x | "
              f"{r['rule_us'] / r['numpy']:.2f} | {noise} |")
    noisy = sum(1 for r in rows if r.get("noise"))
    if noisy:
        print(f"\n{noisy} of {len(rows)} rows had a NOISY measurement: their ratios may "
              "mislead; run again on a quiet machine.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gemv", type=int, default=4096, help="GEMV size (n x n)")
    parser.add_argument("--softmax", type=int, nargs=2, default=[4096, 1024])
    parser.add_argument("--layer-norm", type=int, nargs=2, default=[1024, 4096])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 32],
                        help="demo_mlp forward batches")
    parser.add_argument("--min-ms", type=float, default=100.0,
                        help="minimum milliseconds per timed repeat")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    print(f"threads: {wb.get_num_threads()} (kernels and numpy's BLAS; WB_NUM_THREADS)")
    print()
    n = args.gemv
    (sm, sn), (lm, ln) = args.softmax, args.layer_norm
    rows = [
        compare(f"gemv {n}x{n}", wb.workloads.gemv(n, n), lambda a, x: a @ x, args.min_ms),
        compare(f"softmax {sm}x{sn}", wb.workloads.softmax(sm, sn), _softmax, args.min_ms),
        compare(f"layer_norm {lm}x{ln}", wb.workloads.layer_norm(lm, ln), _layer_norm,
                args.min_ms),
    ]
    for fname, func in wb.workloads.demo_mlp(1).functions:
        rows.append(compare(f"demo_mlp(1).{fname}", func, DEMO_NUMPY[fname], args.min_ms))
    rows += forward_rows(args.batch, args.min_ms)
    print_table(rows)


if __name__ == "__main__":
    main()
