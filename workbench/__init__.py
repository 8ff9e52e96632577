"""Schedule Workbench: schedule tensor loop nests interactively, TensorIR style.

>>> import workbench as wb
>>> func = wb.workloads.mm_relu(128, 128, 128)
>>> sch = wb.Schedule(func)
>>> i, j, k = sch.get_loops(sch.get_block("Y"))
>>> j0, j1 = sch.split(j, factors=[None, 4])
"""

from . import dlight, ir, schedule, script, workloads
from .codegen.gpu import GpuError
from .codegen.gpu_instrument import RaceError
from .ir import (
    Buffer,
    IndexMap,
    IRModule,
    PrimFunc,
    Var,
    structural_equal,
    structural_hash,
)
from .ir.expr import (
    cast,
    const,
    cos,
    erf,
    exp,
    fabs,
    log,
    logical_and,
    logical_not,
    logical_or,
    power,
    rsqrt,
    select,
    sigmoid,
    sin,
    sqrt,
    tanh,
)
from .ir.transform import lower
from .runtime.cpu import Kernel, KernelArgumentError, build
from .runtime.flops import flop_count
from .runtime.isolation import MeasureError
from .runtime.noise import get_noise_thresholds, set_noise_thresholds
from .runtime.peak import peak_gflops
from .runtime.report import TimingTable, timing_table
from .runtime.threads import get_num_threads, set_num_threads, thread_limit
from .runtime.timing import Measurement, MeasurementTooLongError, aligned_copy, noise_note
from .runtime.verify import VerificationError, verify
from .schedule import (
    BlockRV,
    ExprRV,
    LoopRV,
    Schedule,
    ScheduleError,
    ScheduleFile,
    ScheduleFileError,
    Trace,
    TraceError,
    load_schedule,
    read_schedule_file,
)
from .script import from_script, ir_module, prim_func
from .search import Database, TuneResult, default_space, rules
from .search.tune import tune
from .target import GpuUnavailableError, Target
from .te import compute, create_prim_func, max, min, placeholder, reduce_axis, sum  # noqa: A004
from .tensor_intrin import TensorIntrin


def measure(
    kernel,
    *args,
    number: int | None = None,
    repeat: int = 5,
    min_repeat_ms: float = 100,
    warmup: int = 1,
    flops: int | None = None,
    flush_cache: bool = False,
    isolated: bool = False,
    timeout: float = 10.0,
    threads: int | None = None,
) -> Measurement:
    """Time ``kernel(*args)`` with the semantics of TVM's ``time_evaluator``.

    Each of ``repeat`` samples runs the kernel ``number`` times; when ``number`` is
    None it grows until one repeat lasts ``min_repeat_ms``. GFLOPS use ``flops``, or
    the kernel's own count from the IR (``wb.flop_count``) for built kernels.

    ``flush_cache=True`` evicts the caches before every sample (cold-cache figures, as
    TVM's ``cache_flush_bytes``); each sample is then a single run (``number`` is 1 and
    ``min_repeat_ms`` does not apply).

    A built kernel's arrays are checked once (one checked run first); the timed calls
    then go straight to the compiled function (``kernel.prepare``), so the figures
    match the isolated worker's and exclude Python's argument handling.

    ``isolated=True`` runs a built kernel in a worker process (``default_worker()``) on
    random arrays of its parameter shapes (``args`` may be left out; when given they are
    only checked): a kernel that crashes or runs past ``timeout`` seconds raises
    :class:`MeasureError` (its ``.result`` says why) and this process lives on.

    ``threads`` (None: ``wb.get_num_threads()``, set by ``wb.set_num_threads`` or the
    ``WB_NUM_THREADS`` environment variable, else every usable core) is the thread count
    of our kernels' parallel loops *and* of NumPy's BLAS while measuring, so
    ``wb.measure(np.matmul, a, b, threads=1)`` and ``wb.measure(kernel, ..., threads=1)``
    compare like with like.

    The result records its noise: ``m.cv`` (spread of the samples), ``m.foreign_load``
    (CPU other processes took meanwhile) and ``m.noisy`` (past the thresholds of
    ``wb.set_noise_thresholds``); ``wb.noise_note(m)`` is a mark to print beside it.

    >>> import numpy as np, workbench as wb
    >>> kernel = wb.build(wb.workloads.matmul(32, 32, 32))
    >>> a, b, c = (np.ones((32, 32), "float32") for _ in range(3))
    >>> m = wb.measure(kernel, a, b, c, repeat=3, min_repeat_ms=1)
    >>> len(m.samples), m.flops
    (3, 65536)
    >>> wb.measure(kernel, repeat=3, min_repeat_ms=1, isolated=True).repeat
    3
    >>> wb.measure(np.matmul, a, a, repeat=3, min_repeat_ms=1, threads=1).threads
    1
    """
    from .runtime.isolation import measure_isolated
    from .runtime.threads import resolve_threads
    from .runtime.timing import measure as _measure

    options = dict(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                   warmup=warmup, flops=flops, flush_cache=flush_cache)
    if isolated:
        return measure_isolated(kernel, *args, timeout=timeout, threads=threads, **options)
    threads = resolve_threads(threads)
    fn = kernel
    if args and callable(getattr(kernel, "prepare", None)):
        # A built kernel: one checked run (bad arrays or a failed allocation raise
        # here), then time the bare C call on the same arrays (it carries the flops).
        with thread_limit(threads):
            kernel(*args)
            fn, args = kernel.prepare(*args), ()
    return _measure(fn, *args, threads=threads, **options)


__version__ = "0.1.0"


def __getattr__(name: str):
    """``wb.widgets`` is imported on first use (it pulls in ipywidgets)."""
    if name == "widgets":
        import importlib

        return importlib.import_module(".widgets", __name__)
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
