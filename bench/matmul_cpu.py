"""CPU matmul: unscheduled vs the seed schedule vs a tuned schedule vs numpy vs peak.

For float32 matmul at 128^3, 512^3 and 1024^3, measured side by side in one run:

* the unscheduled function built to C,
* the MLC seed's schedule (split j by 4, reorder(j_0, k, j_1), decompose_reduction),
* the best schedule ``wb.tune`` finds in the default CPU space (64 trials; 256 at 1024^3),
  with the search's wall time; "tuned" is measured here like the other columns (through
  ``Kernel.__call__``, whose argument checks cost a few microseconds: visible at 128^3,
  a 15 us kernel), "in search" is what the search measured in its worker process,
* numpy's ``a @ b`` (OpenBLAS, all cores; the better of two measurements, as OpenBLAS's
  first one in a process is often slow),
* the machine's float32 FMA peak (``wb.peak_gflops(measured=True)``).

    python bench/matmul_cpu.py              # all three sizes
    python bench/matmul_cpu.py 128          # one size
    python bench/matmul_cpu.py 128 --trials 32
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workbench as wb  # noqa: E402

DEFAULT_TRIALS = {128: 64, 512: 64, 1024: 256}


def seed_schedule(func: wb.PrimFunc) -> wb.Schedule:
    sch = wb.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.decompose_reduction(block, k)
    return sch


def gflops_of(kernel, args, repeat: int = 5) -> float:
    m = wb.measure(kernel, *args, repeat=repeat, min_repeat_ms=100)
    return m.gflops


def run(n: int, trials: int, seed: int) -> dict:
    func = wb.workloads.matmul(n, n, n)
    flops = wb.flop_count(func)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    c = np.zeros((n, n), "float32")
    row: dict = {"n": n}
    repeat = 1 if n >= 1024 else 3
    row["unscheduled"] = gflops_of(wb.build(func), (a, b, c), repeat)
    row["seed"] = gflops_of(wb.build(seed_schedule(func).mod), (a, b, c), repeat)
    t0 = time.perf_counter()
    result = wb.tune(func, trials=trials, seed=seed, progress=False)
    row["search_s"] = time.perf_counter() - t0
    row["trials"] = trials
    best = result.best
    kernel = wb.build(best.schedule.mod)
    wb.verify(best.schedule.mod, func)
    row["tuned"] = gflops_of(kernel, (a, b, c))
    row["in_search"] = best.gflops
    row["decisions"] = min((t for t in result.trials if t.ok), key=lambda t: t.latency).decisions
    row["numpy"] = max(
        wb.measure(lambda: a @ b, flops=flops, repeat=5, min_repeat_ms=100).gflops
        for _ in range(2)
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[128, 512, 1024])
    parser.add_argument("--trials", type=int, default=None, help="trials per size")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    peak = wb.peak_gflops(measured=True)
    rows = [run(n, args.trials or DEFAULT_TRIALS.get(n, 64), args.seed) for n in args.sizes]
    print(f"float32 matmul, GFLOPS (higher is better); measured peak {peak:.0f} GFLOPS")
    print()
    print("| n | unscheduled | seed schedule | tuned (trials, search time) | in search | "
          "numpy | tuned / numpy | tuned / peak |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']} | {r['unscheduled']:.1f} | {r['seed']:.1f} | "
            f"{r['tuned']:.1f} ({r['trials']}, {r['search_s']:.0f} s) | {r['in_search']:.1f} | "
            f"{r['numpy']:.1f} | {r['tuned'] / r['numpy']:.2f}x | {r['tuned'] / peak:.0%} |"
        )
    print()
    for r in rows:
        print(f"best decisions at {r['n']}^3: {r['decisions']}")


if __name__ == "__main__":
    main()
