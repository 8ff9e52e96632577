"""Tensorize: a float32 matmul with the same tiling schedule, with and without the FMA
micro-kernel, next to numpy; measured side by side in one run.

For each size (512^3, 960^3 and 1024^3 by default), with the FMA intrinsic this machine
runs that has the most accumulators and whose tile divides the size
(``wb.tensor_intrin.cpu.best_fma_intrin(m=n, n=n)``; ``--intrin`` picks another):

* **tiled**: the block tiled to the intrinsic's shape (``i`` by its rows, ``j`` by its
  columns, ``k`` by its K block), loops ordered ``j0, i0, k0, i1, j1, k1`` with ``j0``
  parallel, the reduction's init split off; the inner ``i1, j1, k1`` tile left to the C
  compiler (``-O3 -march=native``);
* **tiled + vectorized inner**: the same, with the tile's loops reordered ``i1, k1, j1``
  and ``j1`` vectorized: what the compiler makes of the tile at its best, for reference;
* **tensorized**: the same schedule as "tiled", with ``sch.tensorize(i1, intrin)``: the
  tile is one call of the register-blocked micro-kernel;
* **packed B**: the last two again, with ``B`` first copied into a panel-major buffer
  (``cache_read`` of ``B`` into ``B_global``, then ``transform_layout`` of it by
  ``lambda k, j: (j // cols, k, j % cols)``), so each tile reads its ``K x cols`` panel
  contiguously; the copy runs inside the kernel and is timed with it;
* **most accumulators, padded**: where the kernel with the most accumulators this CPU runs
  does not divide the size (6x16 on AVX2 for 512 and 1024), the packed-B tensorized
  schedule with that kernel on an iteration space padded by ``pad_einsum`` (zero-filled
  copies, timed with the kernel);
* numpy's ``a @ b`` (OpenBLAS).

Threads: the kernels use OpenMP (``OMP_NUM_THREADS``); numpy's OpenBLAS is given the same
count through ``OPENBLAS_NUM_THREADS`` (set before numpy is imported; threadpoolctl is
not needed). Run it as::

    OMP_NUM_THREADS=2 python bench/tensorize.py            # 512, 960 and 1024
    OMP_NUM_THREADS=2 python bench/tensorize.py 1024 --intrin x86_fma_f32_6x16_avx2
    OMP_NUM_THREADS=2 python bench/tensorize.py 1024 --k-block 256
"""

from __future__ import annotations

import os

if "OMP_NUM_THREADS" in os.environ:  # numpy's BLAS gets the kernels' thread count
    for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, os.environ["OMP_NUM_THREADS"])

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import workbench as wb  # noqa: E402
from workbench.runtime.peak import cpu_spec  # noqa: E402
from workbench.tensor_intrin import cpu  # noqa: E402


def tiled_schedule(func: wb.PrimFunc, kernel: cpu.MicroKernel, *, tensorize: bool = False,
                   vectorize_inner: bool = False, pack_b: bool = False,
                   pad: bool = False) -> wb.Schedule:
    """The shared tiling: ``j0 (parallel), i0, k0, i1, j1, k1`` with the tile the
    intrinsic's shape; then either tensorize the tile or (``vectorize_inner``) reorder
    it ``i1, k1, j1`` and vectorize ``j1``. ``pack_b`` first copies ``B`` into
    ``cols``-wide panels; ``pad`` first pads the iteration space to multiples of the tile
    (``pad_einsum``: zero-filled copies of A and B, C copied back)."""
    rows, cols, depth = kernel.tile
    sch = wb.Schedule(func)
    block = sch.get_block("C")
    if pad:
        sch.pad_einsum(block, [rows, cols, depth])
    if pack_b:
        sch.cache_read(block, 1, "global")
        sch.transform_layout(block, ("read", 1), lambda k, j: (j // cols, k, j % cols))
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, factors=[None, rows])
    j0, j1 = sch.split(j, factors=[None, cols])
    k0, k1 = sch.split(k, factors=[None, depth])
    sch.reorder(j0, i0, k0, i1, j1, k1)
    sch.parallel(j0)
    sch.decompose_reduction(block, k0)
    if tensorize:
        sch.tensorize(i1, kernel.name)
    elif vectorize_inner:
        sch.reorder(i1, k1, j1)
        sch.vectorize(j1)
    return sch


def gflops(kernel, args, flops: int, repeat: int, noise: list[str], label: str) -> float:
    # the flops of the unscheduled matmul: a tensorized kernel's work is inside the C call,
    # which the IR's flop count does not see
    m = wb.measure(kernel, *args, flops=flops, repeat=repeat, min_repeat_ms=200)
    if m.noisy:
        noise.append(f"{label}{wb.noise_note(m)}")
    return m.gflops


def run(n: int, kernel: cpu.MicroKernel, widest: cpu.MicroKernel) -> dict:
    func = wb.workloads.matmul(n, n, n)
    flops = wb.flop_count(func)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    want = a.astype(np.float64) @ b.astype(np.float64)
    row: dict = {"n": n, "noise": []}
    variants = {
        "tiled": dict(),
        "tiled_vec": dict(vectorize_inner=True),
        "tensorized": dict(tensorize=True),
        "packed_vec": dict(vectorize_inner=True, pack_b=True),
        "packed_tensorized": dict(tensorize=True, pack_b=True),
    }
    if widest is not kernel:  # the kernel with most accumulators, on a padded iteration
        variants["widest"] = dict(tensorize=True, pack_b=True, pad=True)
    for label, options in variants.items():
        sch = tiled_schedule(func, widest if label == "widest" else kernel, **options)
        built = wb.build(sch.mod)
        c = np.zeros((n, n), "float32")
        built(a, b, c)
        err = np.abs(c - want).max() / np.abs(want).max()
        if err > 1e-4:
            raise AssertionError(f"{label} at {n}^3 differs from numpy (relative error {err})")
        row[label] = gflops(built, (a, b, c), flops, repeat=3 if n >= 1024 else 5,
                            noise=row["noise"], label=label)
    numpy = max((wb.measure(lambda: a @ b, flops=flops, repeat=5, min_repeat_ms=200)
                 for _ in range(2)), key=lambda m: m.gflops)
    row["numpy"] = numpy.gflops
    if numpy.noisy:
        row["noise"].append(f"numpy{wb.noise_note(numpy)}")
    row.setdefault("widest", row["packed_tensorized"])
    return row


def machine_line() -> str:
    spec = cpu_spec()
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    present = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni") if f in cpu.cpu_flags()]
    return (f"machine: {model} ({platform.machine()}), {os.cpu_count()} logical CPUs, "
            f"{spec.cores} physical cores usable; threads {wb.get_num_threads()} for the "
            "kernels and numpy's BLAS alike (wb.set_num_threads / WB_NUM_THREADS); flags "
            "present: "
            f"{', '.join(present) or 'none of avx2, fma, avx512f'}")


def pick_kernel(n: int, intrin: str | None, k_block: int | None) -> cpu.MicroKernel:
    """The intrinsic for an ``n^3`` matmul: ``intrin``, else the one with the most
    accumulators this CPU runs whose tile divides ``n``; ``k_block`` makes that kernel's
    variant with another K block."""
    name = intrin or cpu.best_fma_intrin(m=n, n=n)
    if name is None:
        sys.exit(f"no FMA intrinsic this machine runs tiles {n} x {n} (it needs AVX2+FMA or "
                 "AVX-512)")
    kernel = cpu.MICRO_KERNELS[name]
    if k_block is not None and k_block != kernel.tile[2]:
        isa = "avx512" if "avx512f" in kernel.requires else "avx2"
        kernel = cpu.fma_intrin(kernel.tile[0], kernel.tile[1], k_block, isa)
    if kernel.missing():
        sys.exit(f"{name} needs the CPU flags {', '.join(kernel.missing())}")
    if n % kernel.tile[0] or n % kernel.tile[1] or n % kernel.tile[2]:
        sys.exit(f"{kernel.name}'s {kernel.tile} tile does not divide {n}")
    return kernel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[512, 960, 1024])
    parser.add_argument("--intrin", default=None, help="FMA intrinsic (default: per size, "
                        "the one with the most accumulators this machine runs whose tile "
                        "divides the size)")
    parser.add_argument("--k-block", type=int, default=None, help="the intrinsic's K block "
                        "(default: its own; another value makes that variant of the kernel)")
    args = parser.parse_args()
    cpu.register_all()
    print(machine_line())
    kernels = [pick_kernel(n, args.intrin, args.k_block) for n in args.sizes]
    widest = [k if args.intrin else cpu.MICRO_KERNELS[cpu.best_fma_intrin()] for k in kernels]
    rows = [run(n, k, w) for n, k, w in zip(args.sizes, kernels, widest, strict=True)]
    print()
    print("float32 matmul, GFLOPS (higher is better)")
    print()
    print("| n | intrinsic (tile, K block) | tiled | tiled + vectorized inner | tensorized | "
          "packed B: vectorized inner | packed B: tensorized | most accumulators, padded | "
          "numpy | tensorized / tiled | tensorized / vectorized | "
          "packed: tensorized / vectorized | best tensorized / numpy | noise |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r, k, w in zip(rows, kernels, widest, strict=True):
        best = max(r["packed_tensorized"], r["widest"])
        padded = f"{r['widest']:.1f} ({w.name})" if w is not k else "same"
        print(f"| {r['n']} | {k.name} ({k.tile[0]}x{k.tile[1]}, {k.tile[2]}) | "
              f"{r['tiled']:.1f} | {r['tiled_vec']:.1f} | {r['tensorized']:.1f} | "
              f"{r['packed_vec']:.1f} | {r['packed_tensorized']:.1f} | {padded} | "
              f"{r['numpy']:.1f} | {r['tensorized'] / r['tiled']:.1f}x | "
              f"{r['tensorized'] / r['tiled_vec']:.2f}x | "
              f"{r['packed_tensorized'] / r['packed_vec']:.2f}x | {best / r['numpy']:.2f}x | "
              f"{'; '.join(r['noise']) or 'quiet'} |")
    print()
    print("every kernel was checked against float64 numpy before timing; figures are "
          "wb.measure medians (other processes may share the machine: run it twice)")
    noisy = sum(1 for r in rows if r["noise"])
    if noisy:
        print(f"{noisy} of {len(rows)} rows had a NOISY measurement: their ratios may "
              "mislead; run again on a quiet machine.")


if __name__ == "__main__":
    main()
