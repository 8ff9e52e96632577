"""x86 tensor intrinsics: register-blocked float32 FMA micro-kernels and int8 dot products.

Each intrinsic is a pair of TVMScript functions (the *description*: what a small tile
computes; the *implementation*: the same tiles handed to a C function) plus that C
function, written with ``immintrin.h`` intrinsics inside ``__attribute__((target(...)))``
so the source compiles on any x86 machine with gcc or clang. Building a kernel that calls
one on a machine without the CPU flags it ``requires`` is refused at build time.

Float32 FMA, ``C[rows, cols] += A[rows, K] * B[K, cols]`` with ``K`` a fixed block: the
``rows x cols`` accumulators live in vector registers for the whole ``K`` loop; each step
loads ``cols`` floats of ``B`` (``cols / lanes`` vectors), broadcasts one element of ``A``
per row and issues ``rows * cols / lanes`` fused multiply-adds. ``A``, ``B`` and ``C`` may
be tiles of larger row-major arrays: the kernel takes their row strides.

======================================  ============  ====================  ==========
name                                    tile          registers              requires
======================================  ============  ====================  ==========
``x86_fma_f32_4x16_avx2``               4x16, K=64    8 ymm accumulators    avx2, fma
``x86_fma_f32_6x16_avx2``               6x16, K=64    12 ymm accumulators   avx2, fma
``x86_fma_f32_8x32_avx512``             8x32, K=64    16 zmm accumulators   avx512f
``x86_fma_f32_6x32_avx512``             6x32, K=64    12 zmm accumulators   avx512f
======================================  ============  ====================  ==========

Other shapes: :func:`fma_intrin` (``rows``, ``cols`` a multiple of the vector width,
``k``) registers ``x86_fma_f32_{rows}x{cols}x{k}_{isa}`` on first use.

Int8, TVM's ``dot_16x4`` shape: ``C[16] (int32) += sum_k A[k] (uint8) * B[i, k] (int8)``
for ``k < 4``; ``A`` is 4 bytes, ``B`` a packed 16x4 tile (64 bytes), ``C`` 16 int32.

* ``x86_dot_u8s8s32_16x4_vnni`` (also under TVM's name ``dot_16x4_vnni``): one
  ``_mm512_dpbusd_epi32``; requires avx512f and avx512_vnni.
* ``x86_dot_u8s8s32_16x4_avx2``: works on any AVX2 machine. The bytes are widened to
  int16 and multiplied with ``_mm256_madd_epi16`` (exact), rather than with
  ``_mm256_maddubs_epi16``, whose int16 pair sums saturate (``255*127 + 255*127 = 64770``
  does not fit) and would make the result differ from the description's.

Both wrap around on int32 overflow, as the description's int32 addition does.

>>> import workbench.tensor_intrin.cpu as cpu
>>> k = cpu.MICRO_KERNELS["x86_fma_f32_4x16_avx2"]
>>> k.requires, k.tile
(('avx2', 'fma'), (4, 16, 64))
>>> "_mm256_fmadd_ps" in k.source
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..codegen.extern import cpu_flags

__all__ = [
    "FMA_ISAS",
    "MICRO_KERNELS",
    "MicroKernel",
    "best_dot_intrin",
    "best_fma_intrin",
    "cpu_flags",
    "dot_intrin",
    "fma_intrin",
    "fma_intrin_named",
    "register_all",
    "run_micro_kernel",
    "standalone_source",
]


@dataclass(frozen=True)
class _Isa:
    lanes: int  # float32 lanes of one vector register
    vec: str  # C vector type
    prefix: str  # intrinsic prefix
    target: str  # __attribute__((target(...)))
    requires: tuple[str, ...]  # /proc/cpuinfo flags
    registers: int  # vector registers the ISA has


#: the vector ISAs of the FMA micro-kernels
FMA_ISAS: dict[str, _Isa] = {
    "avx2": _Isa(8, "__m256", "_mm256", "avx2,fma", ("avx2", "fma"), 16),
    "avx512": _Isa(16, "__m512", "_mm512", "avx512f", ("avx512f",), 32),
}

DOT_REQUIRES: dict[str, tuple[str, ...]] = {
    "vnni": ("avx512f", "avx512_vnni"),
    "avx2": ("avx2",),
}

DEFAULT_K = 64


@dataclass(frozen=True)
class MicroKernel:
    """One x86 tensor intrinsic: its TVMScript description and implementation and the C
    function the implementation calls.

    ``tile`` is ``(rows, cols, k)`` for the FMA kernels and ``(16, 4)`` for the int8
    dot product; ``args`` names the C function's parameters in order.

    >>> k = fma_intrin(4, 16, 32, "avx2")
    >>> k.name, k.c_name
    ('x86_fma_f32_4x16x32_avx2', 'wb_x86_fma_f32_4x16x32_avx2')
    >>> k.args
    ('C', 'A', 'B', 'lda', 'ldb', 'ldc')
    """

    name: str
    c_name: str
    kind: str  # "fma" or "dot"
    tile: tuple[int, ...]
    source: str
    requires: tuple[str, ...]
    desc_text: str
    impl_text: str
    args: tuple[str, ...]
    headers: tuple[str, ...] = ("immintrin.h",)

    def supported(self, flags: frozenset[str] | None = None) -> bool:
        """Whether this machine (or the given flag set) has every required CPU flag.

        >>> MICRO_KERNELS["x86_fma_f32_4x16_avx2"].supported(frozenset({"avx2", "fma"}))
        True
        """
        have = cpu_flags() if flags is None else flags
        return all(f in have for f in self.requires)

    def missing(self, flags: frozenset[str] | None = None) -> tuple[str, ...]:
        """The required CPU flags this machine (or ``flags``) lacks.

        >>> MICRO_KERNELS["x86_fma_f32_8x32_avx512"].missing(frozenset({"avx2"}))
        ('avx512f',)
        """
        have = cpu_flags() if flags is None else flags
        return tuple(f for f in self.requires if f not in have)


# -- C sources ---------------------------------------------------------------------------


def _fma_source(c_name: str, rows: int, cols: int, k: int, isa: _Isa) -> str:
    nv = cols // isa.lanes
    p, vec = isa.prefix, isa.vec
    acc = [[f"c{r}_{v}" for v in range(nv)] for r in range(rows)]
    lines = [
        f"/* C[{rows}x{cols}] += A[{rows}x{k}] * B[{k}x{cols}], float32, row strides lda/ldb/ldc;",
        f"   {rows * nv} {vec} accumulators stay in registers over the K loop. */",
        f'static inline __attribute__((target("{isa.target}")))',
        f"void {c_name}(float* C, const float* A, const float* B,",
        "    int32_t lda, int32_t ldb, int32_t ldc) {",
    ]
    for r in range(rows):
        for v in range(nv):
            lines.append(f"  {vec} {acc[r][v]} = {p}_loadu_ps(C + {r} * ldc + {v * isa.lanes});")
    lines.append(f"  for (int32_t k = 0; k < {k}; ++k) {{")
    for v in range(nv):
        lines.append(f"    const {vec} b{v} = {p}_loadu_ps(B + k * ldb + {v * isa.lanes});")
    for r in range(rows):
        lines.append(f"    const {vec} a{r} = {p}_set1_ps(A[{r} * lda + k]);")
        for v in range(nv):
            lines.append(f"    {acc[r][v]} = {p}_fmadd_ps(a{r}, b{v}, {acc[r][v]});")
    lines.append("  }")
    for r in range(rows):
        for v in range(nv):
            lines.append(f"  {p}_storeu_ps(C + {r} * ldc + {v * isa.lanes}, {acc[r][v]});")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_source(c_name: str, isa: str) -> str:
    head = [
        "/* C[i] += sum_k A[k] * B[i][k] for i < 16, k < 4: uint8 x int8 -> int32, B packed",
        "   (64 bytes, row i at byte 4 * i); int32 sums wrap around on overflow. */",
    ]
    if isa == "vnni":
        body = [
            'static inline __attribute__((target("avx512f,avx512vnni")))',
            f"void {c_name}(int32_t* C, const uint8_t* A, const int8_t* B) {{",
            "  int32_t a4;",
            "  __builtin_memcpy(&a4, A, 4);",
            "  const __m512i b = _mm512_loadu_si512((const void*)B);",
            "  const __m512i c = _mm512_loadu_si512((const void*)C);",
            "  _mm512_storeu_si512((void*)C, _mm512_dpbusd_epi32(c, _mm512_set1_epi32(a4), b));",
            "}",
        ]
    else:
        # Widen to int16 (A zero-extended, B sign-extended): each 16-lane int16 vector holds
        # four rows of B, and madd gives two exact int32 pair sums per row.
        body = [
            'static inline __attribute__((target("avx2")))',
            f"void {c_name}(int32_t* C, const uint8_t* A, const int8_t* B) {{",
            "  int32_t a4;",
            "  __builtin_memcpy(&a4, A, 4);",
            "  const __m256i a = _mm256_cvtepu8_epi16(_mm_set1_epi32(a4));",
            "  __m256i s[4];",
            "  for (int q = 0; q < 4; ++q) {",
            "    const __m128i b = _mm_loadu_si128((const __m128i*)(B + 16 * q));",
            "    s[q] = _mm256_madd_epi16(a, _mm256_cvtepi8_epi16(b));",
            "  }",
            "  /* hadd of rows 0-3 and 4-7 gives rows (0 1 4 5 | 2 3 6 7): put them in order */",
            "  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);",
            "  const __m256i lo =",
            "      _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(s[0], s[1]), order);",
            "  const __m256i hi =",
            "      _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(s[2], s[3]), order);",
            "  __m256i* c = (__m256i*)C;",
            "  _mm256_storeu_si256(c, _mm256_add_epi32(_mm256_loadu_si256(c), lo));",
            "  _mm256_storeu_si256(c + 1, _mm256_add_epi32(_mm256_loadu_si256(c + 1), hi));",
            "}",
        ]
    return "\n".join(head + body) + "\n"


# -- TVMScript ---------------------------------------------------------------------------

_HEADER = "from tvm.script import tirx as T\n\n\n@T.prim_func(s_tir=True)\n"


def _fma_desc(rows: int, cols: int, k: int) -> str:
    return _HEADER + f'''def fma_f32_{rows}x{cols}x{k}_desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, ({rows}, {k}), "float32", offset_factor=1)
    B = T.match_buffer(b, ({k}, {cols}), "float32", offset_factor=1)
    C = T.match_buffer(c, ({rows}, {cols}), "float32", offset_factor=1)
    with T.sblock("root"):
        T.reads(C[0:{rows}, 0:{cols}], A[0:{rows}, 0:{k}], B[0:{k}, 0:{cols}])
        T.writes(C[0:{rows}, 0:{cols}])
        for i, j, k in T.grid({rows}, {cols}, {k}):
            with T.sblock("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def _fma_impl(rows: int, cols: int, k: int, c_name: str) -> str:
    return _HEADER + f'''def fma_f32_{rows}x{cols}x{k}_impl(a: T.handle, b: T.handle, c: T.handle):
    lda = T.int32()
    ldb = T.int32()
    ldc = T.int32()
    A = T.match_buffer(a, ({rows}, {k}), "float32", offset_factor=1, strides=[lda, 1])
    B = T.match_buffer(b, ({k}, {cols}), "float32", offset_factor=1, strides=[ldb, 1])
    C = T.match_buffer(c, ({rows}, {cols}), "float32", offset_factor=1, strides=[ldc, 1])
    with T.sblock("root"):
        T.reads(C[0:{rows}, 0:{cols}], A[0:{rows}, 0:{k}], B[0:{k}, 0:{cols}])
        T.writes(C[0:{rows}, 0:{cols}])
        T.evaluate(T.call_extern("void", "{c_name}", C.access_ptr("rw"), A.access_ptr("r"),
                                 B.access_ptr("r"), lda, ldb, ldc))
'''


_DOT_DESC = _HEADER + '''def dot_u8s8s32_16x4_desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4,), "uint8", offset_factor=1)
    B = T.match_buffer(b, (16, 4), "int8", offset_factor=1)
    C = T.match_buffer(c, (16,), "int32", offset_factor=1)
    with T.sblock("root"):
        T.reads(C[0:16], A[0:4], B[0:16, 0:4])
        T.writes(C[0:16])
        for i, k in T.grid(16, 4):
            with T.sblock("update"):
                vi, vk = T.axis.remap("SR", [i, k])
                C[vi] = C[vi] + T.Cast("int32", A[vk]) * T.Cast("int32", B[vi, vk])
'''


def _dot_impl(c_name: str) -> str:
    return _HEADER + f'''def dot_u8s8s32_16x4_impl(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4,), "uint8", offset_factor=1)
    B = T.match_buffer(b, (16, 4), "int8", offset_factor=1)
    C = T.match_buffer(c, (16,), "int32", offset_factor=1)
    with T.sblock("root"):
        T.reads(C[0:16], A[0:4], B[0:16, 0:4])
        T.writes(C[0:16])
        T.evaluate(T.call_extern("void", "{c_name}", C.access_ptr("rw"), A.access_ptr("r"),
                                 B.access_ptr("r")))
'''


# -- the kernels -------------------------------------------------------------------------

#: every micro-kernel made so far, by intrinsic name
MICRO_KERNELS: dict[str, MicroKernel] = {}
_REGISTERED: set[str] = set()


def _make_fma(rows: int, cols: int, k: int, isa_name: str, name: str) -> MicroKernel:
    if isa_name not in FMA_ISAS:
        raise ValueError(f"fma_intrin: unknown ISA {isa_name!r}; one of {sorted(FMA_ISAS)}")
    isa = FMA_ISAS[isa_name]
    if rows < 1 or k < 1 or cols < isa.lanes or cols % isa.lanes:
        raise ValueError(f"fma_intrin: a {rows}x{cols} tile with K={k} does not fit {isa_name} "
                         f"(rows >= 1, K >= 1, cols a multiple of {isa.lanes})")
    vectors = rows * (cols // isa.lanes) + cols // isa.lanes + 1
    if vectors > isa.registers:
        raise ValueError(f"fma_intrin: a {rows}x{cols} tile needs {vectors} vector registers; "
                         f"{isa_name} has {isa.registers}")
    c_name = f"wb_{name}"
    return MicroKernel(
        name=name, c_name=c_name, kind="fma", tile=(rows, cols, k),
        source=_fma_source(c_name, rows, cols, k, isa), requires=isa.requires,
        desc_text=_fma_desc(rows, cols, k), impl_text=_fma_impl(rows, cols, k, c_name),
        args=("C", "A", "B", "lda", "ldb", "ldc"))


def _make_dot(isa: str, name: str) -> MicroKernel:
    c_name = f"wb_{name}"
    return MicroKernel(
        name=name, c_name=c_name, kind="dot", tile=(16, 4), source=_dot_source(c_name, isa),
        requires=DOT_REQUIRES[isa], desc_text=_DOT_DESC, impl_text=_dot_impl(c_name),
        args=("C", "A", "B"))


def _add(kernel: MicroKernel, *aliases: str) -> MicroKernel:
    MICRO_KERNELS[kernel.name] = kernel
    for alias in aliases:
        MICRO_KERNELS[alias] = kernel
    return kernel


for _rows, _cols, _isa in ((4, 16, "avx2"), (6, 16, "avx2"), (8, 32, "avx512"),
                           (6, 32, "avx512")):
    _add(_make_fma(_rows, _cols, DEFAULT_K, _isa, f"x86_fma_f32_{_rows}x{_cols}_{_isa}"))
_add(_make_dot("vnni", "x86_dot_u8s8s32_16x4_vnni"), "dot_16x4_vnni")
_add(_make_dot("avx2", "x86_dot_u8s8s32_16x4_avx2"))


def _register(name: str) -> None:
    """Register one intrinsic and its C function with the tensorize machinery (once)."""
    if name in _REGISTERED:
        return
    from .. import script
    from ..codegen import extern
    from . import TensorIntrin

    kernel = MICRO_KERNELS[name]
    extern.register_c_function(kernel.c_name, kernel.source, headers=kernel.headers,
                               requires=kernel.requires, override=True)
    TensorIntrin.register(name, script.from_script(kernel.desc_text),
                          script.from_script(kernel.impl_text), override=True)
    _REGISTERED.add(name)


def register_all() -> list[str]:
    """Register every intrinsic of :data:`MICRO_KERNELS` (idempotent); returns their names.

    >>> "x86_fma_f32_4x16_avx2" in register_all()
    True
    """
    for name in MICRO_KERNELS:
        _register(name)
    return list(MICRO_KERNELS)


def fma_intrin(rows: int, cols: int, k: int = DEFAULT_K, isa: str = "avx2") -> MicroKernel:
    """The float32 FMA micro-kernel ``C[rows, cols] += A[rows, k] * B[k, cols]`` for
    ``isa`` ("avx2" or "avx512"), made and registered on first use as
    ``x86_fma_f32_{rows}x{cols}x{k}_{isa}`` (the default K under the shorter table names).

    >>> fma_intrin(4, 16).name
    'x86_fma_f32_4x16_avx2'
    >>> fma_intrin(2, 32, 16, "avx512").tile
    (2, 32, 16)
    """
    short = f"x86_fma_f32_{rows}x{cols}_{isa}"
    name = short if k == DEFAULT_K and short in MICRO_KERNELS else \
        f"x86_fma_f32_{rows}x{cols}x{k}_{isa}"
    if name not in MICRO_KERNELS:
        _add(_make_fma(rows, cols, k, isa, name))
    _register_if_possible(name)
    return MICRO_KERNELS[name]


def dot_intrin(isa: str = "vnni") -> MicroKernel:
    """The int8 dot product ``dot_16x4`` for ``isa`` ("vnni" or "avx2").

    >>> dot_intrin("avx2").requires
    ('avx2',)
    """
    if isa not in DOT_REQUIRES:
        raise ValueError(f"dot_intrin: unknown ISA {isa!r}; one of {sorted(DOT_REQUIRES)}")
    return MICRO_KERNELS[f"x86_dot_u8s8s32_16x4_{isa}"]


def _register_if_possible(name: str) -> None:
    try:
        _register(name)
    except ImportError:  # the tensorize machinery is not there: the kernel still is
        pass


def best_fma_intrin(flags: frozenset[str] | None = None, *, m: int | None = None,
                    n: int | None = None) -> str | None:
    """Name of the float32 FMA intrinsic with the most accumulators this machine (or the
    flag set ``flags``) runs, among those whose tile divides an ``m x n`` output when
    given: AVX-512 8x32 then 6x32, AVX2 6x16 then 4x16; None when none fits.

    >>> best_fma_intrin(frozenset({"avx2", "fma"}))
    'x86_fma_f32_6x16_avx2'
    >>> best_fma_intrin(frozenset({"avx2", "fma"}), m=1024, n=1024)
    'x86_fma_f32_4x16_avx2'
    >>> best_fma_intrin(frozenset({"avx2", "fma", "avx512f"}))
    'x86_fma_f32_8x32_avx512'
    >>> best_fma_intrin(frozenset()) is None
    True
    """
    for name in ("x86_fma_f32_8x32_avx512", "x86_fma_f32_6x32_avx512",
                 "x86_fma_f32_6x16_avx2", "x86_fma_f32_4x16_avx2"):
        kernel = MICRO_KERNELS[name]
        rows, cols, _ = kernel.tile
        if (m is not None and m % rows) or (n is not None and n % cols):
            continue
        if kernel.supported(flags):
            return name
    return None


def best_dot_intrin(flags: frozenset[str] | None = None) -> str | None:
    """Name of the int8 ``dot_16x4`` intrinsic for this machine (or ``flags``): VNNI where
    there is AVX-512 VNNI, else the AVX2 one, else None.

    >>> best_dot_intrin(frozenset({"avx2"}))
    'x86_dot_u8s8s32_16x4_avx2'
    """
    for name in ("x86_dot_u8s8s32_16x4_vnni", "x86_dot_u8s8s32_16x4_avx2"):
        if MICRO_KERNELS[name].supported(flags):
            return name
    return None


def standalone_source(kernel: MicroKernel) -> str:
    """A C translation unit exporting ``<c_name>_call`` (same arguments, returns 0), to
    call one micro-kernel directly (through ctypes) without building a PrimFunc.

    >>> "int32_t wb_x86_fma_f32_4x16_avx2_call(" in standalone_source(fma_intrin(4, 16))
    True
    """
    if kernel.kind == "fma":
        params = "float* C, const float* A, const float* B, int32_t lda, int32_t ldb, int32_t ldc"
    else:
        params = "int32_t* C, const uint8_t* A, const int8_t* B"
    includes = "".join(f"#include <{h}>\n" for h in ("stdint.h", *kernel.headers))
    return (f"{includes}\n{kernel.source}\n"
            f"int32_t {kernel.c_name}_call({params}) {{\n"
            f"  {kernel.c_name}({', '.join(kernel.args)});\n  return 0;\n}}\n")


def run_micro_kernel(kernel: MicroKernel | str, c, a, b) -> None:
    """Run one micro-kernel on numpy arrays, in place on ``c``, without a PrimFunc: for an
    FMA kernel ``c[rows, cols] += a[rows, k] @ b[k, cols]`` (float32 arrays or views whose
    rows may be strided, elements contiguous), for ``dot_16x4``
    ``c[16] += b[16, 4] @ a[4]`` (int32, uint8, int8; contiguous).

    Refuses (``RuntimeError`` naming the CPU flags) on a machine without the kernel's
    flags, rather than running an illegal instruction.

    >>> import numpy as np
    >>> c = np.zeros((4, 16), "float32")
    >>> a, b = np.ones((4, 64), "float32"), np.ones((64, 16), "float32")
    >>> if MICRO_KERNELS["x86_fma_f32_4x16_avx2"].supported():
    ...     run_micro_kernel("x86_fma_f32_4x16_avx2", c, a, b)
    ... else:
    ...     c += 64
    >>> float(c[3, 15])
    64.0
    """
    import ctypes

    import numpy as np

    from ..runtime.compiler import compile_and_load

    k = MICRO_KERNELS[kernel] if isinstance(kernel, str) else kernel
    if k.missing():
        raise RuntimeError(f"run_micro_kernel: {k.name} needs the CPU flags "
                           f"{', '.join(k.missing())}, which this machine lacks")
    if k.kind == "fma":
        rows, cols, depth = k.tile
        want = {"c": (c, (rows, cols), "float32"), "a": (a, (rows, depth), "float32"),
                "b": (b, (depth, cols), "float32")}
    else:
        want = {"c": (c, (16,), "int32"), "a": (a, (4,), "uint8"), "b": (b, (16, 4), "int8")}
    for label, (x, shape, dtype) in want.items():
        if not isinstance(x, np.ndarray) or x.shape != shape or x.dtype != np.dtype(dtype):
            got = (getattr(x, "shape", None), str(getattr(x, "dtype", type(x).__name__)))
            raise ValueError(f"run_micro_kernel: {k.name} takes {label} of shape {shape} and "
                             f"dtype {dtype}, got shape {got[0]} and dtype {got[1]}")
        contiguous = x.strides[-1] == x.itemsize and (
            k.kind == "fma" or x.flags.c_contiguous)
        if not contiguous or any(s < 0 for s in x.strides):
            raise ValueError(f"run_micro_kernel: {label} must have contiguous rows")
    if not c.flags.writeable:
        raise ValueError("run_micro_kernel: c is read-only")
    fn = getattr(compile_and_load(standalone_source(k)), f"{k.c_name}_call")
    ptr = ctypes.c_void_p
    if k.kind == "fma":
        fn.argtypes = [ptr, ptr, ptr, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32]
        fn(c.ctypes.data, a.ctypes.data, b.ctypes.data, a.strides[0] // 4,
           b.strides[0] // 4, c.strides[0] // 4)
    else:
        fn.argtypes = [ptr, ptr, ptr]
        fn(c.ctypes.data, a.ctypes.data, b.ctypes.data)


_FMA_NAME = re.compile(r"x86_fma_f32_(\d{1,2})x(\d{1,3})x(\d{1,5})_(avx2|avx512)")


def fma_intrin_named(name: str) -> MicroKernel | None:
    """The K-blocked FMA micro-kernel a name like ``x86_fma_f32_6x16x512_avx2`` stands
    for, made and registered now (None for any other name): a trace that tensorizes with
    one replays in a process that has not made it yet (``tensorize`` looks names up here).

    >>> fma_intrin_named("x86_fma_f32_6x16x128_avx2").tile
    (6, 16, 128)
    >>> fma_intrin_named("not_an_fma") is None
    True
    """
    match = _FMA_NAME.fullmatch(str(name))
    if match is None:
        return None
    rows, cols, k = (int(g) for g in match.groups()[:3])
    try:
        return fma_intrin(rows, cols, k, match.group(4))
    except ValueError:  # a shape the kernels do not come in
        return None
