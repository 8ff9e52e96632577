"""CUDA tensor-core intrinsics: the ``wmma`` fragment operations and ``mma.sync``.

Each intrinsic is a TVMScript description (what the tile computes, on buffers in the
fragment scopes) and an implementation that hands the same tiles to a CUDA device
function, registered here by name (:data:`CUDA_FUNCTIONS`) for the CUDA code generator.
Until that generator exists, :func:`render_test_source` gives, for each intrinsic, its
device functions plus a small ``__global__`` kernel that uses them, which ``nvcc -ptx``
compiles (:func:`compile_ptx`).

**wmma, 16x16x16, float16 inputs, float32 accumulator** (``nvcuda::wmma``, sm_70+):

==========================================  =============================================
``wmma_load_16x16x16_f16_a_shared``         shared (16x16, row stride ``lda``) -> ``wmma.matrix_a``
``wmma_load_16x16x16_f16_b_shared``         shared -> ``wmma.matrix_b`` (B is K x N, row-major)
``wmma_load_16x16x16_f16_a_global``         the same from global memory
``wmma_load_16x16x16_f16_b_global``
``wmma_fill_16x16x16_f32``                  ``wmma.accumulator`` = 0
``wmma_sync_16x16x16_f16f16f32``            ``C[i, j] += A[i, k] * B[k, j]`` on fragments
``wmma_store_16x16x16_f32_global``          ``wmma.accumulator`` -> global (row stride ``ldc``)
``wmma_store_16x16x16_f32_shared``          ... -> shared
==========================================  =============================================

A buffer in a ``wmma.*`` scope is, in the generated CUDA, an array of fragments (one per
16x16 tile, row-major over the tiles); an implementation passes that array (``X.data``)
and the tile's index in it, computed from the tile's ``elem_offset`` and the buffer's row
stride as TVM does.

**mma.sync** (``mma_m16n8k16_f16f16f32``, sm_80+): ``C[16, 16] += A[16, 16] * B[16, 16]``
on per-warp register fragments (``scope="warp"``, shape ``(32, 8)``: lane, register),
issued as two ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` (one per 8 columns)
through inline PTX. The element ``(r, c)`` of a 16x16 tile lives in lane
``4 * (r % 8) + (c % 8) // 2`` for ``A`` and ``C``; the description spells out the PTX
fragment layouts (:func:`mma_layout`).

>>> from workbench.tensor_intrin import cuda
>>> sorted(cuda.CUDA_INTRINSICS)[:2]
['mma_m16n8k16_f16f16f32', 'wmma_fill_16x16x16_f32']
>>> "__global__" in cuda.render_test_source("wmma_sync_16x16x16_f16f16f32")
True
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CUDA_FUNCTIONS",
    "CUDA_INTRINSICS",
    "CudaFunction",
    "CudaIntrinsic",
    "NvccError",
    "compile_ptx",
    "find_nvcc",
    "mma_layout",
    "register_all",
    "register_cuda_function",
    "render_device_source",
    "render_test_source",
]


@dataclass(frozen=True)
class CudaFunction:
    """A CUDA device function an intrinsic's implementation calls by name."""

    name: str
    source: str
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class CudaIntrinsic:
    """One CUDA tensor intrinsic: its TVMScript texts, the device functions its
    implementation calls, and the ``__global__`` test kernel that exercises them."""

    name: str
    desc_text: str
    impl_text: str
    functions: tuple[str, ...]
    test_kernel: str
    min_arch: int  # lowest sm_XX it compiles for


#: device functions by name (the CUDA code generator emits those a kernel calls)
CUDA_FUNCTIONS: dict[str, CudaFunction] = {}
#: the intrinsics of this module by name
CUDA_INTRINSICS: dict[str, CudaIntrinsic] = {}


def register_cuda_function(name: str, source: str, *, headers: tuple[str, ...] = (),
                           override: bool = False) -> CudaFunction:
    """Register the CUDA definition of the device function ``name``.

    >>> f = register_cuda_function("wb_demo_twice", "__device__ float wb_demo_twice(float x)"
    ...                            " { return 2 * x; }", override=True)
    >>> f.name
    'wb_demo_twice'
    """
    if name in CUDA_FUNCTIONS and not override and CUDA_FUNCTIONS[name].source != source:
        raise ValueError(f"register_cuda_function: `{name}` is already registered with "
                         "another definition (pass override=True to replace it)")
    fn = CudaFunction(name, source, tuple(headers))
    CUDA_FUNCTIONS[name] = fn
    return fn


# -- device functions --------------------------------------------------------------------

_W = "nvcuda::wmma"
_FRAG = {
    "a": f"{_W}::fragment<{_W}::matrix_a, 16, 16, 16, half, {_W}::row_major>",
    "b": f"{_W}::fragment<{_W}::matrix_b, 16, 16, 16, half, {_W}::row_major>",
    "acc": f"{_W}::fragment<{_W}::accumulator, 16, 16, 16, float>",
}
_WMMA_HEADERS = ("mma.h", "cuda_fp16.h")

_DEVICE_SOURCES = {
    "wb_wmma_load_a_f16_16x16x16": f"""\
/* fragment[index] = the 16x16 half tile at src (row-major, row stride ldm) */
__device__ __forceinline__ void wb_wmma_load_a_f16_16x16x16(
    {_FRAG["a"]}* fragment, int index, const half* src, int ldm) {{
  {_W}::load_matrix_sync(fragment[index], src, ldm);
}}
""",
    "wb_wmma_load_b_f16_16x16x16": f"""\
/* fragment[index] = the 16x16 half tile at src (K x N, row-major, row stride ldm) */
__device__ __forceinline__ void wb_wmma_load_b_f16_16x16x16(
    {_FRAG["b"]}* fragment, int index, const half* src, int ldm) {{
  {_W}::load_matrix_sync(fragment[index], src, ldm);
}}
""",
    "wb_wmma_fill_f32_16x16x16": f"""\
/* every element of fragment[index] = value */
__device__ __forceinline__ void wb_wmma_fill_f32_16x16x16(
    {_FRAG["acc"]}* fragment, int index, float value) {{
  {_W}::fill_fragment(fragment[index], value);
}}
""",
    "wb_wmma_mma_f16f16f32_16x16x16": f"""\
/* d[di] = a[ai] * b[bi] + c[ci] (16x16x16, half inputs, float accumulator) */
__device__ __forceinline__ void wb_wmma_mma_f16f16f32_16x16x16(
    {_FRAG["acc"]}* d, int di, const {_FRAG["a"]}* a, int ai,
    const {_FRAG["b"]}* b, int bi, const {_FRAG["acc"]}* c, int ci) {{
  {_W}::mma_sync(d[di], a[ai], b[bi], c[ci]);
}}
""",
    "wb_wmma_store_f32_16x16x16": f"""\
/* the 16x16 float tile at dst (row-major, row stride ldm) = fragment[index] */
__device__ __forceinline__ void wb_wmma_store_f32_16x16x16(
    float* dst, int ldm, const {_FRAG["acc"]}* fragment, int index) {{
  {_W}::store_matrix_sync(dst, fragment[index], ldm, {_W}::mem_row_major);
}}
""",
    "wb_mma_m16n8k16_f16f16f32": """\
/* One lane's part of C[16x16] += A[16x16] * B[16x16] over a warp: c, a, b point at the
   lane's 8 registers of each fragment (a, c: row-major layout; b: column layout), and
   the product is two m16n8k16 tensor-core instructions, one per 8 columns. */
__device__ __forceinline__ void wb_mma_m16n8k16_f16f16f32(
    float* c, int c_offset, const half* a, int a_offset, const half* b, int b_offset) {
  const unsigned* ra = reinterpret_cast<const unsigned*>(a + a_offset);
  const unsigned* rb = reinterpret_cast<const unsigned*>(b + b_offset);
  float* rc = c + c_offset;
  for (int half_n = 0; half_n < 2; ++half_n) {
    float* acc = rc + 4 * half_n;
    const unsigned* rbn = rb + 2 * half_n;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\\n"
        : "=f"(acc[0]), "=f"(acc[1]), "=f"(acc[2]), "=f"(acc[3])
        : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rbn[0]), "r"(rbn[1]),
          "f"(acc[0]), "f"(acc[1]), "f"(acc[2]), "f"(acc[3]));
  }
}
""",
}


# -- fragment layout of mma.sync m16n8k16 ------------------------------------------------


def mma_layout(operand: str, row: int, col: int) -> tuple[int, int]:
    """(lane, register) holding element ``(row, col)`` of a 16x16 tile in the warp
    fragments of :data:`mma_m16n8k16_f16f16f32`: ``A[m, k]`` and ``C[m, n]`` in PTX's
    row layout; ``B[k, n]`` in its column layout (registers 0-3 for columns 0-7).

    >>> mma_layout("A", 9, 3), mma_layout("B", 3, 9), mma_layout("C", 0, 15)
    ((5, 3), (5, 5), (3, 5))
    """
    if operand in ("A", "C"):
        r, c = row, col
        return 4 * (r % 8) + (c % 8) // 2, 4 * (c // 8) + 2 * (r // 8) + c % 2
    if operand == "B":
        k, n = row, col
        return 4 * (n % 8) + (k % 8) // 2, 4 * (n // 8) + 2 * (k // 8) + k % 2
    raise ValueError(f"mma_layout: operand is 'A', 'B' or 'C', not {operand!r}")


def _layout_text(operand: str, row: str, col: str) -> str:
    """:func:`mma_layout` as TVMScript index expressions."""
    if operand == "B":
        k, n = row, col
        return (f"{n} % 8 * 4 + {k} % 8 // 2, "
                f"{n} // 8 * 4 + {k} // 8 * 2 + {k} % 2")
    return (f"{row} % 8 * 4 + {col} % 8 // 2, "
            f"{col} // 8 * 4 + {row} // 8 * 2 + {col} % 2")


# -- TVMScript ---------------------------------------------------------------------------

_HEADER = "from tvm.script import tirx as T\n\n\n@T.prim_func(s_tir=True)\n"


def _tile(name: str, handle: str, dtype: str, scope: str, stride: str | None = None) -> str:
    strides = f", strides=[{stride}, 1]" if stride else ""
    return (f'    {name} = T.match_buffer({handle}, (16, 16), "{dtype}", align=64, '
            f'offset_factor=1, scope="{scope}"{strides})\n')


def _frag_index(buf: str, stride: str) -> str:
    """Which 16x16 fragment of a fragment buffer a tile is (tiles row-major)."""
    return (f"{buf}.elem_offset // {stride} // 16 * ({stride} // 16) + "
            f"{buf}.elem_offset % {stride} // 16")


def _strides(*names: str) -> str:
    return "".join(f"    {n} = T.int32()\n" for n in names)


def _copy_pair(fn_name: str, src_dtype: str, src_scope: str, dst_dtype: str, dst_scope: str,
               call: str) -> tuple[str, str]:
    """Description and implementation of a 16x16 tile copy ``D[i, j] = S[i, j]``."""
    body = ("    with T.sblock(\"root\"):\n"
            "        T.reads(S[0:16, 0:16])\n"
            "        T.writes(D[0:16, 0:16])\n")
    desc = (_HEADER + f"def {fn_name}_desc(s: T.handle, d: T.handle):\n"
            + _tile("S", "s", src_dtype, src_scope) + _tile("D", "d", dst_dtype, dst_scope)
            + body
            + "        for i, j in T.grid(16, 16):\n"
            + "            with T.sblock(\"copy\"):\n"
            + "                vi, vj = T.axis.remap(\"SS\", [i, j])\n"
            + "                D[vi, vj] = S[vi, vj]\n")
    impl = (_HEADER + f"def {fn_name}_impl(s: T.handle, d: T.handle):\n"
            + _strides("ls", "ld")
            + _tile("S", "s", src_dtype, src_scope, "ls")
            + _tile("D", "d", dst_dtype, dst_scope, "ld")
            + body + f"        {call}\n")
    return desc, impl


def _wmma_load(operand: str, scope: str) -> tuple[str, str]:
    fn = f"wb_wmma_load_{operand}_f16_16x16x16"
    call = (f'T.call_extern("void", "{fn}", D.data, {_frag_index("D", "ld")}, '
            'S.access_ptr("r"), ls)')
    return _copy_pair(f"wmma_load_{operand}_{scope}", "float16", scope, "float16",
                      f"wmma.matrix_{operand}", call)


def _wmma_store(scope: str) -> tuple[str, str]:
    call = (f'T.call_extern("void", "wb_wmma_store_f32_16x16x16", D.access_ptr("w"), ld, '
            f'S.data, {_frag_index("S", "ls")})')
    return _copy_pair(f"wmma_store_{scope}", "float32", "wmma.accumulator", "float32", scope,
                      call)


def _wmma_fill() -> tuple[str, str]:
    body = ("    with T.sblock(\"root\"):\n"
            "        T.reads()\n"
            "        T.writes(C[0:16, 0:16])\n")
    desc = (_HEADER + "def wmma_fill_desc(c: T.handle):\n"
            + _tile("C", "c", "float32", "wmma.accumulator") + body
            + "        for i, j in T.grid(16, 16):\n"
            + "            with T.sblock(\"fill\"):\n"
            + "                vi, vj = T.axis.remap(\"SS\", [i, j])\n"
            + "                C[vi, vj] = T.float32(0)\n")
    impl = (_HEADER + "def wmma_fill_impl(c: T.handle):\n" + _strides("lc")
            + _tile("C", "c", "float32", "wmma.accumulator", "lc") + body
            + f'        T.call_extern("void", "wb_wmma_fill_f32_16x16x16", C.data, '
            f'{_frag_index("C", "lc")}, T.float32(0))\n')
    return desc, impl


_MATMUL_BODY = """\
    with T.sblock("root"):
        T.reads(C[{c}], A[{a}], B[{b}])
        T.writes(C[{c}])
"""


def _wmma_sync() -> tuple[str, str]:
    full = "0:16, 0:16"
    body = _MATMUL_BODY.format(a=full, b=full, c=full)
    tiles = [("A", "a", "float16", "wmma.matrix_a", "la"), ("B", "b", "float16",
             "wmma.matrix_b", "lb"), ("C", "c", "float32", "wmma.accumulator", "lc")]
    desc = (_HEADER + "def wmma_sync_desc(a: T.handle, b: T.handle, c: T.handle):\n"
            + "".join(_tile(*t[:4]) for t in tiles) + body
            + "        for i, j, k in T.grid(16, 16, 16):\n"
            + "            with T.sblock(\"update\"):\n"
            + "                vi, vj, vk = T.axis.remap(\"SSR\", [i, j, k])\n"
            + "                C[vi, vj] = C[vi, vj] + T.Cast(\"float32\", A[vi, vk]) * "
            + "T.Cast(\"float32\", B[vk, vj])\n")
    impl = (_HEADER + "def wmma_sync_impl(a: T.handle, b: T.handle, c: T.handle):\n"
            + _strides("la", "lb", "lc") + "".join(_tile(*t) for t in tiles) + body
            + '        T.call_extern("void", "wb_wmma_mma_f16f16f32_16x16x16", '
            + f'C.data, {_frag_index("C", "lc")}, A.data, {_frag_index("A", "la")}, '
            + f'B.data, {_frag_index("B", "lb")}, C.data, {_frag_index("C", "lc")})\n')
    return desc, impl


def _mma_sync() -> tuple[str, str]:
    warp = "0:32, 0:8"
    body = _MATMUL_BODY.format(a=warp, b=warp, c=warp)
    bufs = "".join(
        f'    {n} = T.match_buffer({h}, (32, 8), "{d}", align=64, offset_factor=1, '
        f'scope="warp")\n'
        for n, h, d in (("A", "a", "float16"), ("B", "b", "float16"), ("C", "c", "float32")))
    desc = (_HEADER + "def mma_m16n8k16_desc(a: T.handle, b: T.handle, c: T.handle):\n"
            + bufs + body
            + "        for i, j, k in T.grid(16, 16, 16):\n"
            + "            with T.sblock(\"update\"):\n"
            + "                vi, vj, vk = T.axis.remap(\"SSR\", [i, j, k])\n"
            + f"                C[{_layout_text('C', 'vi', 'vj')}] = "
            + f"C[{_layout_text('C', 'vi', 'vj')}] + "
            + f"T.Cast(\"float32\", A[{_layout_text('A', 'vi', 'vk')}]) * "
            + f"T.Cast(\"float32\", B[{_layout_text('B', 'vk', 'vj')}])\n")
    impl = (_HEADER + "def mma_m16n8k16_impl(a: T.handle, b: T.handle, c: T.handle):\n"
            + bufs + body
            + "        for tx in T.thread_binding(32, thread=\"threadIdx.x\"):\n"
            + '            T.call_extern("void", "wb_mma_m16n8k16_f16f16f32", '
            + "C.data, C.elem_offset + tx * 8, A.data, A.elem_offset + tx * 8, "
            + "B.data, B.elem_offset + tx * 8)\n")
    return desc, impl


# -- test kernels ------------------------------------------------------------------------


def _wmma_kernel(name: str, a_scope: str, b_scope: str, c_scope: str) -> str:
    """out = a @ b (16x16x16) through the wmma device functions, staging the operands in
    shared memory where the intrinsic under test loads or stores there."""
    frag = {k: v for k, v in _FRAG.items()}
    lines = [
        f'extern "C" __global__ void {name}(const half* a, const half* b, float* out) {{',
        "  __shared__ half a_s[256];",
        "  __shared__ half b_s[256];",
        "  __shared__ float c_s[256];",
        "  for (int e = threadIdx.x; e < 256; e += blockDim.x) {",
        "    a_s[e] = a[e];",
        "    b_s[e] = b[e];",
        "  }",
        "  __syncthreads();",
        f"  {frag['a']} fa[1];",
        f"  {frag['b']} fb[1];",
        f"  {frag['acc']} fc[1];",
        "  wb_wmma_fill_f32_16x16x16(fc, 0, 0.0f);",
        f"  wb_wmma_load_a_f16_16x16x16(fa, 0, {'a_s' if a_scope == 'shared' else 'a'}, 16);",
        f"  wb_wmma_load_b_f16_16x16x16(fb, 0, {'b_s' if b_scope == 'shared' else 'b'}, 16);",
        "  wb_wmma_mma_f16f16f32_16x16x16(fc, 0, fa, 0, fb, 0, fc, 0);",
    ]
    if c_scope == "shared":
        lines += [
            "  wb_wmma_store_f32_16x16x16(c_s, 16, fc, 0);",
            "  __syncthreads();",
            "  for (int e = threadIdx.x; e < 256; e += blockDim.x) out[e] = c_s[e];",
        ]
    else:
        lines.append("  wb_wmma_store_f32_16x16x16(out, 16, fc, 0);")
    return "\n".join(lines + ["}"]) + "\n"


def _mma_kernel(name: str) -> str:
    """out = a @ b (16x16x16, row-major half a and b, float out) by one warp: each lane
    gathers its fragment registers with the layout of :func:`mma_layout`."""
    return f"""\
extern "C" __global__ void {name}(const half* a, const half* b, float* out) {{
  const int lane = threadIdx.x % 32;
  half ra[8];
  half rb[8];
  float rc[8];
  for (int l = 0; l < 8; ++l) {{
    const int r = lane / 4 + 8 * ((l / 2) % 2);  /* A, C: row; B: k */
    const int c = 2 * (lane % 4) + l % 2 + 8 * (l / 4);  /* A: k; C: column */
    const int n = lane / 4 + 8 * (l / 4);  /* B: column */
    const int k = 2 * (lane % 4) + l % 2 + 8 * ((l / 2) % 2);  /* B: k */
    ra[l] = a[r * 16 + c];
    rb[l] = b[k * 16 + n];
    rc[l] = 0.0f;
  }}
  wb_mma_m16n8k16_f16f16f32(rc, 0, ra, 0, rb, 0);
  for (int l = 0; l < 8; ++l) {{
    const int r = lane / 4 + 8 * ((l / 2) % 2);
    const int c = 2 * (lane % 4) + l % 2 + 8 * (l / 4);
    out[r * 16 + c] = rc[l];
  }}
}}
"""


# -- the intrinsics ----------------------------------------------------------------------

_WMMA_FUNCS = ("wb_wmma_fill_f32_16x16x16", "wb_wmma_load_a_f16_16x16x16",
               "wb_wmma_load_b_f16_16x16x16", "wb_wmma_mma_f16f16f32_16x16x16",
               "wb_wmma_store_f32_16x16x16")


def _build() -> None:
    for fn, src in _DEVICE_SOURCES.items():
        headers = ("cuda_fp16.h",) if fn.startswith("wb_mma_") else _WMMA_HEADERS
        register_cuda_function(fn, src, headers=headers, override=True)
    specs: list[tuple[str, tuple[str, str], tuple[str, str, str]]] = []
    for operand in ("a", "b"):
        for scope in ("shared", "global"):
            scopes = (scope if operand == "a" else "global", scope if operand == "b" else "global",
                      "global")
            specs.append((f"wmma_load_16x16x16_f16_{operand}_{scope}",
                          _wmma_load(operand, scope), scopes))
    specs.append(("wmma_fill_16x16x16_f32", _wmma_fill(), ("global",) * 3))
    specs.append(("wmma_sync_16x16x16_f16f16f32", _wmma_sync(), ("global",) * 3))
    for scope in ("global", "shared"):
        specs.append((f"wmma_store_16x16x16_f32_{scope}", _wmma_store(scope),
                      ("global", "global", scope)))
    for name, (desc, impl), scopes in specs:
        CUDA_INTRINSICS[name] = CudaIntrinsic(
            name, desc, impl, _WMMA_FUNCS, _wmma_kernel(f"wb_test_{name}", *scopes), 70)
    desc, impl = _mma_sync()
    name = "mma_m16n8k16_f16f16f32"
    CUDA_INTRINSICS[name] = CudaIntrinsic(name, desc, impl, ("wb_mma_m16n8k16_f16f16f32",),
                                          _mma_kernel(f"wb_test_{name}"), 80)


_build()
_REGISTERED: set[str] = set()


def register_all() -> list[str]:
    """Register every intrinsic of :data:`CUDA_INTRINSICS` with ``TensorIntrin``
    (idempotent); returns their names.

    >>> "wmma_sync_16x16x16_f16f16f32" in register_all()
    True
    """
    from .. import script
    from . import TensorIntrin

    for name, intrin in CUDA_INTRINSICS.items():
        if name not in _REGISTERED:
            TensorIntrin.register(name, script.from_script(intrin.desc_text),
                                  script.from_script(intrin.impl_text), override=True)
            _REGISTERED.add(name)
    return list(CUDA_INTRINSICS)


def render_device_source(name: str) -> str:
    """The CUDA source of the device functions intrinsic ``name`` calls, with their
    ``#include`` lines.

    >>> "mma.sync.aligned.m16n8k16" in render_device_source("mma_m16n8k16_f16f16f32")
    True
    """
    if name not in CUDA_INTRINSICS:
        raise KeyError(f"no CUDA intrinsic named {name!r}; known: {sorted(CUDA_INTRINSICS)}")
    funcs = [CUDA_FUNCTIONS[f] for f in CUDA_INTRINSICS[name].functions]
    headers: list[str] = []
    for f in funcs:
        headers += [h for h in f.headers if h not in headers]
    return "".join(f"#include <{h}>\n" for h in headers) + "\n" + "\n".join(
        f.source for f in funcs)


def render_test_source(name: str) -> str:
    """A complete ``.cu`` file: the device functions of intrinsic ``name`` and a
    ``__global__`` kernel ``wb_test_<name>(const half* a, const half* b, float* out)``
    computing the 16x16 ``out = a @ b`` with them (one warp; row-major operands).

    >>> "wb_test_wmma_fill_16x16x16_f32" in render_test_source("wmma_fill_16x16x16_f32")
    True
    """
    return render_device_source(name) + "\n" + CUDA_INTRINSICS[name].test_kernel


class NvccError(RuntimeError):
    """nvcc rejected a source; the message holds its diagnostics."""


def find_nvcc() -> str | None:
    """Path of ``nvcc`` on PATH, or None.

    >>> find_nvcc() is None or find_nvcc().endswith("nvcc")
    True
    """
    return shutil.which("nvcc")


def compile_ptx(source: str, arch: str = "sm_80", *, nvcc: str | None = None) -> str:
    """Compile CUDA ``source`` with ``nvcc -ptx -arch=<arch>`` and return the PTX text.
    Raises :class:`NvccError` when nvcc fails and ``FileNotFoundError`` when there is no
    nvcc.

    >>> ptx = compile_ptx(render_test_source("wmma_fill_16x16x16_f32")) if find_nvcc() else ".entry"
    >>> ".entry" in ptx
    True
    """
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise FileNotFoundError("compile_ptx: nvcc is not on PATH")
    with tempfile.TemporaryDirectory(prefix="wb-nvcc-") as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.ptx"
        src.write_text(source)
        cmd = [nvcc, "-ptx", f"-arch={arch}", "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NvccError(f"nvcc failed (exit status {proc.returncode}): {' '.join(cmd)}\n"
                            f"{proc.stderr}")
        return out.read_text()
