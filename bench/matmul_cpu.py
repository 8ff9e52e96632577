"""CPU matmul: unscheduled vs the seed schedule vs a tuned schedule vs numpy vs peak.

For float32 matmul at 128^3, 512^3 and 1024^3, measured side by side in one run, every
figure with the same number of threads (``--threads``, default ``wb.get_num_threads()``:
all usable cores), applied to our OpenMP kernels and to numpy's BLAS alike:

* the unscheduled function built to C,
* the MLC seed's schedule (split j by 4, reorder(j_0, k, j_1), decompose_reduction),
* the best schedule ``wb.tune`` finds in the default CPU space (64 trials; 256 at 1024^3),
  with the search's wall time. "tuned" is the winner measured again here, longer, in
  the measuring worker process the search used (the same harness, the same arrays'
  shapes, no numpy in that process); "in search" is what the search measured,
* numpy's ``a @ b`` (the better of two measurements, as a BLAS's first one in a process
  is often slow),
* the machine's float32 FMA peak (``wb.peak_gflops(measured=True)``, all usable cores),
  scaled to the threads used ("tuned / peak" is against that share).

Why "tuned" is measured in the worker: in this process numpy's BLAS threads (numpy
runs here for the reference, ``wb.verify`` and the numpy column) and our OpenMP threads
both spin-wait after their parallel regions; on a 2-core machine the spinning pool
takes the cores the other one needs, and a 15-35 us kernel at 128^3 read 1.6x slower
here than in the search. ``Kernel.__call__``'s argument checks add a few microseconds
more. The worker has neither.

A figure whose measurement was noisy (spread or other processes' CPU past the
thresholds of ``wb.measure``) is marked ``*`` and its noise is listed below the table;
the header names the CPU model, its vector ISA and caches, and the load average.

    python bench/matmul_cpu.py              # all three sizes
    python bench/matmul_cpu.py 128          # one size
    python bench/matmul_cpu.py 128 --trials 32
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workbench as wb  # noqa: E402
from workbench.runtime.threads import resolve_threads  # noqa: E402
from workbench.search.space import cpu_space_settings  # noqa: E402

DEFAULT_TRIALS = {128: 64, 512: 64, 1024: 256}


def seed_schedule(func: wb.PrimFunc) -> wb.Schedule:
    sch = wb.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.decompose_reduction(block, k)
    return sch


def _noise(m) -> str:
    """The measurement's noise mark ("" when quiet; see ``wb.noise_note``)."""
    return wb.noise_note(m).replace("[noisy: ]", "[noisy]")


def measured(m, flops: int) -> tuple[float, str]:
    """(GFLOPS of the median, noise mark) of a Measurement."""
    return flops / m.median / 1e9, _noise(m)


def in_process(kernel, args, flops: int, threads: int, repeat: int) -> tuple[float, str]:
    """Our kernel timed in this process without the per-call argument checks."""
    run = kernel.prepare(*args)
    m = wb.measure(run, flops=flops, repeat=repeat, min_repeat_ms=100, threads=threads)
    return measured(m, flops)


def run(n: int, trials: int, seed: int, threads: int) -> dict:
    from workbench.runtime.isolation import default_worker

    func = wb.workloads.matmul(n, n, n)
    flops = wb.flop_count(func)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    c = np.zeros((n, n), "float32")
    row: dict = {"n": n}
    repeat = 1 if n >= 1024 else 3
    row["unscheduled"] = in_process(wb.build(func), (a, b, c), flops, threads, repeat)
    row["seed"] = in_process(wb.build(seed_schedule(func).mod), (a, b, c), flops, threads, repeat)
    t0 = time.perf_counter()
    result = wb.tune(func, trials=trials, seed=seed, progress=False, threads=threads)
    row["search_s"] = time.perf_counter() - t0
    row["trials"] = trials
    best = result.best
    kernel = wb.build(best.schedule.mod)
    wb.verify(best.schedule.mod, func)
    reply = default_worker().measure_kernel(
        kernel, repeat=5, min_repeat_ms=100, threads=threads, timeout=60.0
    )
    if not reply.ok:
        raise RuntimeError(f"re-measuring the tuned kernel failed: {reply.error}")
    row["tuned"] = measured(reply.measurement, flops)
    row["tuned_here"] = in_process(kernel, (a, b, c), flops, threads, 5)
    row["in_search"] = (best.gflops, _noise(best))
    winners = [t for t in result.final if t.ok] or [t for t in result.trials if t.ok]
    row["decisions"] = min(winners, key=lambda t: (t.latency, t.index)).decisions
    numpy = [wb.measure(lambda: a @ b, flops=flops, repeat=5, min_repeat_ms=100, threads=threads)
             for _ in range(2)]
    row["numpy"] = measured(min(numpy, key=lambda m: m.median), flops)
    return row


def machine_lines(threads: int) -> list[str]:
    from workbench.runtime.peak import cpu_caches, cpu_model, cpu_spec, vector_isa

    isa, caches = vector_isa(), cpu_caches()
    kib = {k: f"{v >> 10} KiB" if v else "?" for k, v in vars(caches).items()}
    settings = cpu_space_settings()
    return [
        f"CPU: {cpu_model()}, {cpu_spec().cores} cores, {threads} threads; "
        f"ISA {isa.name} ({isa.lanes} float32 lanes, {isa.registers} vector registers); "
        f"L1d {kib['l1d']}, L2 {kib['l2']}, L3 {kib['l3']}",
        f"default space here: vector width {settings.vector_width}, register tile of "
        f"{settings.accumulators[0]}-{settings.accumulators[1]} accumulators in "
        f"{settings.registers} registers, packed panels <= {settings.panel[0] >> 10} KiB",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[128, 512, 1024])
    parser.add_argument("--trials", type=int, default=None, help="trials per size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for our kernels and numpy's BLAS (default: all cores)")
    args = parser.parse_args()
    threads = resolve_threads(args.threads)
    load_before = os.getloadavg()
    all_cores = wb.peak_gflops(measured=True)
    from workbench.runtime.peak import cpu_spec

    peak = all_cores * min(threads, cpu_spec().cores) / cpu_spec().cores
    rows = [run(n, args.trials or DEFAULT_TRIALS.get(n, 64), args.seed, threads)
            for n in args.sizes]
    load_after = os.getloadavg()
    for line in machine_lines(threads):
        print(line)
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after")
    print(f"float32 matmul, GFLOPS (higher is better); measured peak {all_cores:.0f} GFLOPS "
          f"({peak:.0f} for {threads} threads); "
          "* = noisy measurement (listed below)")
    print()
    print("| n | unscheduled | seed schedule | tuned (trials, search time) | in search | "
          "tuned, this process | numpy | tuned / numpy | tuned / peak |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes = []

    def cell(r: dict, key: str) -> str:
        value, note = r[key]
        if note:
            notes.append(f"{r['n']}^3 {key}:{note}")
        return f"{value:.1f}{'*' if note else ''}"

    for r in rows:
        print(
            f"| {r['n']} | {cell(r, 'unscheduled')} | {cell(r, 'seed')} | "
            f"{cell(r, 'tuned')} ({r['trials']}, {r['search_s']:.0f} s) | "
            f"{cell(r, 'in_search')} | {cell(r, 'tuned_here')} | {cell(r, 'numpy')} | "
            f"{r['tuned'][0] / r['numpy'][0]:.2f}x | {r['tuned'][0] / peak:.0%} |"
        )
    print()
    for note in notes:
        print(f"noisy: {note}")
    for r in rows:
        print(f"best decisions at {r['n']}^3: {r['decisions']}")


if __name__ == "__main__":
    main()
