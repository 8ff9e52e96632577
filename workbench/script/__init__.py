"""TVMScript in: read TVM's text format into the workbench's IR.

>>> import workbench as wb
>>> mod = wb.from_script('''
... @I.ir_module
... class Module:
...     @T.prim_func
...     def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
...         for i, j in T.grid(4, 4):
...             with T.block("B"):
...                 vi, vj = T.axis.remap("SS", [i, j])
...                 B[vi, vj] = A[vi, vj] * T.float32(2)
... ''')
>>> mod.names, wb.ir.block_names(mod["main"])
(['main'], ['B'])

Entry points: :func:`from_script` (also :func:`parse`) for text, and the decorators
:func:`prim_func` / :func:`ir_module` for Python definitions, whose source is read
with ``inspect``. Python evaluates a definition's decorators and annotations, so
write them with the inert namespaces of this package
(``from workbench.script import tir as T`` / ``tirx`` / ``ir as I``): every
``T.xxx`` there is a placeholder that does nothing.

**Nothing is executed.** The text is parsed with :mod:`ast` and walked; TVMScript
functions are recognised by name (``T.axis.remap``) and their arguments read as
expressions. Default arguments, decorators, annotations, f-strings or calls of
anything that is not TVMScript are never run: they are read as TVMScript or
refused with a :class:`ParseError` (a ``ValueError`` carrying line, column and the
source line, like Python's ``SyntaxError``).

**Dialects.** The classic syntax (``from tvm.script import tir as T``,
``T.block``, ``T.alloc_buffer``, ``T.block_attr``, ``@tvm.script.ir_module``) and
TVM >= 0.24's (``tirx``, ``T.sblock``, ``T.sblock_alloc_buffer``,
``T.sblock_attr``, ``@T.prim_func(s_tir=True)``) are both read, in any mix.
``@T.prim_func``'s options (``private``, ``s_tir``, ``check_well_formed``) change
nothing here. Relax functions (``@R.function``) in a module are left out with a
:class:`SkippedFunctionWarning`.

**Attributes.** ``T.func_attr`` keeps what the text says except the attributes
every printed function carries (``global_symbol`` equal to the function's name,
``tir.noalias`` / ``tirx.noalias`` true), which the printer adds back.

**T.reads / T.writes.** A block's read and write regions are *derived from its
body* (as blocks built any other way are), not taken from the text: explicit
regions would go stale as schedule primitives rewrite the body, and derivation
is what every primitive's analysis uses. The text's regions are still read and
checked: a region naming a buffer the block never accesses (an access the
workbench cannot see, e.g. through a pointer) is refused, since dropping it would
change what the block means. Derived regions may differ from the text's in
extent (the text may over- or under-state them; TVM's printer and ours agree on
the blocks either prints). ``T.block_attr({"buffer_dim_align": ...})`` also gives
the written buffer its storage alignment, as ``storage_align`` does.

**Constructs.** Loops (``range``, ``T.grid``, ``T.serial`` / ``parallel`` /
``vectorized`` / ``unroll`` / ``thread_binding``, ``annotations=``), blocks
(``T.axis.spatial`` / ``reduce`` / ``remap``, ``T.where``, ``T.init()``,
``T.alloc_buffer`` with scopes, ``T.block_attr``, ``T.match_buffer`` of a region),
``if``/``else``, ``T.evaluate`` and bare calls (``T.call_extern``), let bindings
(``x: T.float32 = v``, ``x: T.let[T.float32] = v``, ``x = <expression>``,
``with T.LetStmt(v) as x:``), ``T.Let``, ``T.if_then_else``, ``T.Select``,
``T.Cast``, the math functions, ``T.floordiv`` / ``floormod`` / ``truncdiv``,
int64 indices (``T.int64(128)``) and symbolic shapes (``n = T.int64()`` /
``T.var("int32")`` with ``T.handle`` + ``T.match_buffer``, and TVM's own prints of
them: quoted names in a signature, ``n = TypeVar("n")`` before the module).
Loops and iterators start at 0 (``range(0, n)`` is fine; ``range(2, n)`` is
refused); ``T.axis.remap`` takes each iterator's extent from its loop. Block and
buffer names are unique within a function (TVM allows a block name twice; the
workbench identifies blocks by name, so that is refused).

**TVM's extras, with TVM's meaning.** ``dtype=`` on ``T.if_then_else``, the math
functions and ``T.floordiv`` / ``floormod`` / ``truncdiv`` (TVM drops it; it must
name the value's own dtype) and on ``T.call_extern`` (the result dtype; ``""`` is
``"void"``). ``T.likely(cond)`` (a branch hint, ``dtype=`` dropped too): kept and
printed back, read as ``cond`` by the analyses, the simplifier and the backends. A
store of a value whose dtype is not the buffer's gets the ``T.Cast`` TVM's parser
adds (``B[i] = A[i] + 1`` with int32 ``A`` and float32 ``B`` reads as
``B[i] = T.Cast("float32", A[i] + 1)``); a constant is converted instead (``2.7``
into int32 is ``2``), and refused where it is out of the buffer's range (``300``
into int8), as TVM does. ``T.min_value(dtype)`` / ``T.max_value(dtype)`` (constants). Scalar
parameters ``n: T.int32`` / ``n: T.int64`` used in buffer shapes are the
function's shape variables (printed back as ``n = T.int32()``; a scalar used in
no shape is refused). Layout keywords (``elem_offset``, ``align``,
``offset_factor``, ``strides``, ``buffer_type``...) where their value means the
default layout (:mod:`.layout`). ``scope=""`` (global) and the tensor-core
scopes (``wmma.accumulator``...). Region slices with an omitted bound
(``A[:64]``, ``A[8:]``). The opaque intrinsics ``T.tvm_fill_fragment``,
``T.tvm_load_matrix_sync``, ``T.tvm_store_matrix_sync``, ``T.tvm_mma_sync``,
``T.tvm_bmma_sync``, ``T.tvm_access_ptr`` and ``T.type_annotation``, with the
buffer fields ``A.data`` / ``A.elem_offset`` / ``A.strides[i]`` and
``A.access_ptr(mask)`` (read as the ``T.tvm_access_ptr`` call TVM makes of it):
kept as :class:`~workbench.ir.OpaqueCall` / :class:`~workbench.ir.BufferField`,
printed back, refused by the C backend; ``A.data`` counts as reading and writing
all of ``A`` (``T.tvm_access_ptr``: as its mask says), as in TVM's region
analysis. For the decorators only, a free name of the decorated function that
refers to a plain ``str`` / ``int`` / ``float`` / ``bool`` in its closure or module
globals reads as that constant (reading a value runs nothing; text given to
:func:`from_script` has no such scope).

**Refused** (with the line and column): ``T.axis.scan`` / ``T.axis.opaque``,
vector accesses (slices of a buffer in an expression), ``T.launch_thread``,
``T.allocate``, ``T.decl_buffer``, ``T.attr``, ``T.assume``, layout keywords that
change the layout (``strides`` other than compact, ``elem_offset`` other than 0,
``data=``...), scalar parameters not used as shape variables, ``while``,
``return``, ``**`` and bitwise operators, ``a if c else b``, and anything that is
not TVMScript (other calls, lambdas, comprehensions, f-strings).
"""

from .decorators import ir_module, prim_func
from .errors import ParseError
from .module import SkippedFunctionWarning, from_script
from .namespace import Placeholder, ir, tir, tirx

parse = from_script

__all__ = [
    "ParseError",
    "Placeholder",
    "SkippedFunctionWarning",
    "from_script",
    "ir",
    "ir_module",
    "parse",
    "prim_func",
    "tir",
    "tirx",
]
