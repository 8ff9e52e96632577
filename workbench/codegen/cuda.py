"""The CUDA target: the CUDA dialect of the one C-like printer.

A GPU schedule is lowered (:func:`workbench.lower`), planned into kernels
(:func:`workbench.codegen.gpu.plan_device_module`: launch sizes, legality, hoisted
shared/local buffers, ``__syncthreads()``), then each kernel is printed by the same
printer as the C target with :data:`CUDA_DIALECT`:

* ``extern "C" __global__ void __launch_bounds__(threads) name(float* __restrict__ A, ...)``
  (symbols are plain names, so ``cupy.RawModule.get_function(name)`` finds them);
* a loop bound to ``blockIdx``/``threadIdx`` is no loop: its variable is the hardware
  index (``const int32_t tx = (int32_t)threadIdx.x;``); a ``vthread`` loop is an
  ordinary loop in each thread;
* ``shared`` buffers become ``__shared__`` arrays (one per thread block), ``local`` ones
  arrays in registers (one per thread);
* barriers print as ``__syncthreads();``; unrolled loops get ``#pragma unroll``.

The text needs no system header, so both nvcc and NVRTC (what cupy uses) compile it.

>>> import workbench as wb
>>> from workbench.gpu_examples import gpu_matmul_schedule
>>> src = generate_cuda(gpu_matmul_schedule(128).mod)
>>> 'extern "C" __global__ void __launch_bounds__(256) matmul_kernel(' in src
True
>>> src.count("__syncthreads();")
2
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Add, BufferLoad, IntImm, Mul, PrimExpr, Sub
from ..ir.functor import substitute
from ..ir.simplify import simplify
from ..ir.stmt import Block, BufferStore, For, PrimFunc
from .cstyle import CodegenError, _FunctionPrinter, _helper_source, _reserved
from .dialect import (
    C_DIALECT,
    C_HELPER_TEMPLATES,
    Allocation,
    AllocRequest,
    Dialect,
    LoopCode,
)
from .gpu import lower_for_gpu
from .gpu_plan import BLOCK_TAGS, THREAD_TAGS_GPU, DeviceModule, GpuKernel

__all__ = ["CUDA_DIALECT", "generate_cuda", "kernel_function"]

_CUDA_TYPES = {**C_DIALECT.type_names, "float16": "half"}

# Fixed-width integer types: <stdint.h> with nvcc, typedefs under NVRTC (no system
# headers there); half precision from cuda_fp16.h, which both provide.
_CUDA_PREAMBLE = """\
#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif"""


def _bounded_signature(d: Dialect, name: str, params, scalars=()) -> str:
    args = [f"{ctype}* {d.restrict} {pname}" for ctype, pname in params]
    args += [f"{ctype} {pname}" for ctype, pname in scalars]
    # the qualifier holds the return type (and the kernel's __launch_bounds__)
    return f"{d.function_qualifier}{name}({', '.join(args) or 'void'})"


def _cuda_allocate(d: Dialect, req: AllocRequest) -> Allocation:
    if req.nbytes_expr is not None:
        raise CodegenError(
            f"buffer {req.name!r} ({req.scope}) has a symbolic size; a GPU kernel's shared "
            "and local buffers need a constant size"
        )
    if req.scope in ("shared", "shared.dyn"):
        decl = f"__shared__ __align__(16) {req.ctype} {req.name}[{req.n_elems}];"
        return Allocation(decl=(decl,))
    if req.scope in ("local", "warp", "local.fragment"):
        return Allocation(decl=(f"{req.ctype} {req.name}[{req.n_elems}];  // {req.scope}",))
    raise CodegenError(
        f"buffer {req.name!r}: a GPU kernel cannot allocate {req.scope} memory; the host "
        "allocates global buffers"
    )


def _cuda_thread_loop(d: Dialect, var: str, ctype: str, extent: int | str, tag: str) -> LoopCode:
    if tag in THREAD_TAGS_GPU or tag in BLOCK_TAGS:
        return LoopCode(
            open=(f"{{  // {tag}: {extent}",),
            prologue=(f"const {ctype} {var} = ({ctype}){tag};",),
        )
    # vthread: each thread runs the virtual threads one after another
    return LoopCode(open=(f"// {tag}", f"for ({ctype} {var} = 0; {var} < {extent}; ++{var}) {{"))


_VECTOR_TYPES = {
    ("float32", 2): "float2", ("float32", 4): "float4",
    ("int32", 2): "int2", ("int32", 4): "int4",
}


def _divisible(e: PrimExpr, m: int) -> bool:
    """Whether ``e`` is provably a multiple of ``m`` for every value of its variables."""
    if isinstance(e, IntImm):
        return e.value % m == 0
    if isinstance(e, (Add, Sub)):
        return _divisible(e.a, m) and _divisible(e.b, m)
    if isinstance(e, Mul):
        return _divisible(e.a, m) or _divisible(e.b, m)
    return False


def _cuda_vector_loop(p, loop: For) -> bool:
    """Print ``for v in vectorized(4): B[x + v] = A[y + v]`` as one ``float4`` load and
    store when both offsets are provably multiples of 4 (16-byte aligned: cudaMalloc and
    our ``__shared__`` arrays are) and the buffers are global or shared."""
    width = loop.extent
    if loop.min or not isinstance(width, int) or width not in (2, 4):
        return False
    body, mapping = loop.body, {}
    if isinstance(body, Block):
        trivial = (body.init is None and not body.alloc_buffers and not body.match_buffers
                   and isinstance(body.predicate, IntImm) and body.predicate.value)
        if not trivial:
            return False
        mapping = {iv.var: val for iv, val in zip(body.iter_vars, body.iter_values)}
        body = body.body
    if not (isinstance(body, BufferStore) and isinstance(body.value, BufferLoad)):
        return False
    v = loop.loop_var
    parts = []
    for buf, idx in ((body.buffer, body.indices), (body.value.buffer, body.value.indices)):
        if buf.scope not in ("global", "shared", "shared.dyn") or buf in p.views:
            return False
        flat = simplify(p.flat_index(buf, tuple(substitute(i, mapping) for i in idx)))
        base = simplify(substitute(flat, {v: IntImm(0, v.dtype)}))
        step = simplify(Sub(Sub(flat, base), v))
        if not (isinstance(step, IntImm) and step.value == 0) or not _divisible(base, width):
            return False
        parts.append((buf, base))
    (dst, dst_off), (src, src_off) = parts
    vec = _VECTOR_TYPES.get((dst.dtype, width))
    if vec is None or src.dtype != dst.dtype:
        return False
    p.comment(f"vectorized loop {v.name}: {width} lanes in one {vec} load and store")
    p.emit(f"*({vec}*)({p._buffer_name(dst)} + {p.expr(dst_off)}) = "
           f"*(const {vec}*)({p._buffer_name(src)} + {p.expr(src_off)});")
    return True


def _cuda_math_templates() -> dict:
    out = dict(C_DIALECT.math_templates)
    for (op, dtype), template in list(out.items()):
        if dtype == "float16":  # compute in float, convert back
            out[(op, dtype)] = template.replace("(_Float16)", "(half)")
    return out


CUDA_DIALECT = replace(
    C_DIALECT,
    name="cuda",
    type_names=dict(_CUDA_TYPES),
    function_qualifier='extern "C" __global__ void ',
    helper_qualifier="static __device__ __forceinline__",
    math_templates=_cuda_math_templates(),
    pragma_parallel=None,
    pragma_vectorize=None,
    pragma_unroll="#pragma unroll",
    includes=("#include <cuda_fp16.h>",),
    preamble=_CUDA_PREAMBLE,
    status_decl="",
    alloc_fail="",
    return_status="return;",
    return_ok="return;",
    return_fail="return;",
    inf={"float32": "__int_as_float(0x7f800000)",
         "float64": "__longlong_as_double(0x7ff0000000000000LL)",
         "float16": "__float2half(__int_as_float(0x7f800000))"},
    nan={"float32": "__int_as_float(0x7fffffff)",
         "float64": "__longlong_as_double(0x7fffffffffffffffLL)",
         "float16": "__float2half(__int_as_float(0x7fffffff))"},
    reserved_words=C_DIALECT.reserved_words
    | frozenset("threadIdx blockIdx blockDim gridDim warpSize half __shared__ __global__ "
                "__device__ __syncthreads __launch_bounds__".split()),
    helper_templates=dict(C_HELPER_TEMPLATES),
    kernel_signature=_bounded_signature,
    allocate=_cuda_allocate,
    thread_loop=_cuda_thread_loop,
    known_externs=C_DIALECT.known_externs,
    extern_includes={},
    barrier="__syncthreads();",
    vector_loop=_cuda_vector_loop,
    error_runtime=None,  # no status to return: a constant zero divisor is still refused
)


def kernel_function(kernel: GpuKernel) -> PrimFunc:
    """The kernel as a PrimFunc the printer can print: its parameters, a root block
    allocating its shared and local buffers, its body.

    >>> import workbench as wb
    >>> from workbench.gpu_examples import gpu_matmul_schedule
    >>> from workbench.codegen.gpu import lower_for_gpu
    >>> k = lower_for_gpu(gpu_matmul_schedule(128))[1].kernels[0]
    >>> [b.name for b in kernel_function(k).body.alloc_buffers]
    ['A_shared', 'B_shared', 'C_local']
    """
    root = Block("root", (), (), kernel.body, alloc_buffers=kernel.shared + kernel.local)
    return PrimFunc(kernel.name, kernel.params, root)


def generate_cuda(mod, target=None) -> str:
    """CUDA source for a module (or function, or Schedule), or for an already planned
    :class:`~workbench.codegen.gpu_plan.DeviceModule`: every kernel of every function.

    ``target`` (``"cuda"``, a :class:`~workbench.Target`) sets the limits the planner
    checks against.
    """
    if not isinstance(mod, DeviceModule):
        mod = lower_for_gpu(mod, target)[1]
    return _print(mod)


def _print(device: DeviceModule) -> str:
    reserved = _reserved(CUDA_DIALECT)
    helpers: set[tuple[str, str]] = set()
    externs: dict[str, str] = {}
    bodies = []
    for kernel in device.kernels:
        bounds = kernel.launch.threads_per_block
        dialect = replace(
            CUDA_DIALECT,
            function_qualifier=f'extern "C" __global__ void __launch_bounds__({bounds}) ',
        )
        printer = _FunctionPrinter(dialect, helpers, reserved | {k.name for k in device.kernels},
                                   externs, set())
        bodies.append(_launch_comment(kernel) + printer.function(kernel_function(kernel),
                                                                 kernel.name))
    names = ", ".join(f.name for f in device.functions)
    declared = [p for n, p in sorted(externs.items()) if n not in CUDA_DIALECT.known_externs]
    parts = [
        f"// Generated by Schedule Workbench for target 'cuda': {names}",
        "\n".join(CUDA_DIALECT.includes),
        CUDA_DIALECT.preamble,
        *_helper_source(CUDA_DIALECT, helpers),
        "\n".join(f"extern \"C\" __device__ {p}" for p in declared),
        *bodies,
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def _launch_comment(k: GpuKernel) -> str:
    grid = ", ".join(str(g) for g in k.launch.grid)
    block = ", ".join(str(b) for b in k.launch.block)
    return (f"// {k.name}: grid ({grid}), block ({block}), "
            f"{k.shared_bytes} bytes of shared memory per block\n")
