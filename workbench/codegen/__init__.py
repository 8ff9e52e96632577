"""Code generation: one C-like printer (:mod:`.cstyle`) driven by a :class:`Dialect`.

>>> import workbench as wb
>>> A = wb.placeholder((4,), "float32", name="A")
>>> B = wb.compute((4,), lambda i: A[i] * A[i], name="B")
>>> "B[vi] = A[vi] * A[vi];" in generate_c(wb.create_prim_func([A, B], name="sq"))
True
"""

from .c import as_ir_module, generate_c, generate_c_source
from .cstyle import CodegenError, GeneratedSource, buffer_strides, generate_source
from .dialect import C_DIALECT, Allocation, AllocRequest, Dialect, LoopCode
from .extern import CFunction, c_function, c_function_names, cpu_flags, register_c_function

__all__ = [
    "C_DIALECT",
    "AllocRequest",
    "Allocation",
    "CFunction",
    "CodegenError",
    "Dialect",
    "GeneratedSource",
    "LoopCode",
    "as_ir_module",
    "buffer_strides",
    "c_function",
    "c_function_names",
    "cpu_flags",
    "generate_c",
    "generate_c_source",
    "generate_source",
    "register_c_function",
]
