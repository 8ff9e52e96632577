"""Runtime: compile generated C to shared objects, load them, and time kernels.

Example:
    >>> from workbench.runtime import compile_and_load, measure
    >>> lib = compile_and_load("int add(int a, int b) { return a + b; }")
    >>> measure(lib.add, 1, 2, number=10, repeat=3, min_repeat_ms=0).repeat
    3
"""

from workbench.runtime.compiler import (
    DEFAULT_FLAGS,
    CompileError,
    CompilerNotFoundError,
    compile_and_load,
    compile_shared,
    compile_stats,
    default_cache_dir,
    find_compiler,
    load_library,
)
from workbench.runtime.timing import Measurement, measure

__all__ = [
    "DEFAULT_FLAGS",
    "CompileError",
    "CompilerNotFoundError",
    "Measurement",
    "compile_and_load",
    "compile_shared",
    "compile_stats",
    "default_cache_dir",
    "find_compiler",
    "load_library",
    "measure",
]
