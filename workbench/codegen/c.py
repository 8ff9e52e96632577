"""The C target: one translation unit for a module, compiled with gcc/clang + OpenMP.

>>> import workbench as wb
>>> A = wb.placeholder((16,), "float32", name="A")
>>> B = wb.compute((16,), lambda i: wb.sqrt(A[i]), name="B")
>>> src = generate_c(wb.create_prim_func([A, B], name="root2"))
>>> "int32_t root2(float* __restrict__ A, float* __restrict__ B)" in src
True
>>> "B[vi] = sqrtf(A[vi]);" in src
True
"""

from __future__ import annotations

from ..ir.stmt import IRModule, PrimFunc
from .cstyle import GeneratedSource, generate_source
from .dialect import C_DIALECT

__all__ = ["C_DIALECT", "generate_c", "generate_c_source"]


def as_ir_module(x: object) -> IRModule:
    """An IRModule from a PrimFunc, an IRModule or anything with an IRModule ``.mod``
    (a Schedule).

    >>> import workbench as wb
    >>> A = wb.placeholder((4,), "float32", name="A")
    >>> B = wb.compute((4,), lambda i: A[i], name="B")
    >>> as_ir_module(wb.create_prim_func([A, B], name="copy")).names
    ['copy']
    """
    if isinstance(x, IRModule):
        return x
    if isinstance(x, PrimFunc):
        return IRModule.from_funcs(x)
    mod = getattr(x, "mod", None)
    if isinstance(mod, (IRModule, PrimFunc)):
        return as_ir_module(mod)
    raise TypeError(f"expected a PrimFunc, an IRModule or a Schedule, got {type(x).__name__}")


def generate_c_source(mod_or_func: IRModule | PrimFunc, check_cpu: bool = True) -> GeneratedSource:
    """Like :func:`generate_c`, also giving each function's C symbol (``main`` is renamed
    ``main_kernel``; names that are not C identifiers are sanitized).

    >>> import workbench as wb
    >>> A = wb.placeholder((4,), "float32", name="A")
    >>> B = wb.compute((4,), lambda i: A[i], name="B")
    >>> generate_c_source(wb.create_prim_func([A, B], name="main")).symbols
    {'main': 'main_kernel'}
    """
    return generate_source(as_ir_module(mod_or_func), C_DIALECT, check_cpu=check_cpu)


def generate_c(mod_or_func: IRModule | PrimFunc, check_cpu: bool = True) -> str:
    """C source for every function of a module (or one function): includes, helpers,
    then one ``int32_t name(float* __restrict__ A, ...)`` per function, returning 0
    (or -1 when an intermediate buffer could not be allocated).

    ``check_cpu=False`` prints a kernel that calls a registered C function needing CPU
    flags this machine lacks (to read it; it cannot be built here).

    >>> import workbench as wb
    >>> A = wb.placeholder((4, 8), "float32", name="A")
    >>> B = wb.compute((4, 8), lambda i, j: A[i, j] + 1.0, name="B")
    >>> print(generate_c(wb.create_prim_func([A, B], name="add1")).split("\\n\\n")[-1])
    int32_t add1(float* __restrict__ A, float* __restrict__ B) {
      for (int32_t i = 0; i < 4; ++i) {
        for (int32_t j = 0; j < 8; ++j) {
          {  // block B
            const int32_t vi = i;
            const int32_t vj = j;
            B[vi * 8 + vj] = A[vi * 8 + vj] + 1.0f;
          }
        }
      }
      return 0;
    }
    <BLANKLINE>
    """
    return generate_c_source(mod_or_func, check_cpu).text
