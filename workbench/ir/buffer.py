"""Buffers: named, typed arrays with a memory scope.

A buffer's shape holds ``int`` for static dimensions and integer expressions
(usually a shape ``Var`` such as ``n``) for symbolic ones; ``index_dtype`` is the
integer type of its indices (``"int64"`` prints static dims as ``T.int64(128)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import (
    ALL_DTYPES,
    BufferLoad,
    Extent,
    PrimExpr,
    as_expr,
    normalize_extent,
)

#: GPU tensor-core storage scopes TVM uses (fragments of a warp's matrix tiles, and
#: ``local.fragment``): the IR carries and prints them; no thread shares them (like
#: ``local``), and the C target, which runs GPU loops one after another, keeps them
#: as local arrays.
FRAGMENT_SCOPES = (
    "wmma.matrix_a",
    "wmma.matrix_b",
    "wmma.accumulator",
    "m16n8k8.matrixA",
    "m16n8k8.matrixB",
    "m16n8k8.matrixC",
    "local.fragment",
)
SCOPES = ("global", "shared", "shared.dyn", "local", "warp") + FRAGMENT_SCOPES


@dataclass(frozen=True, eq=False)
class Buffer:
    """A multi-dimensional array.

    ``scope`` is where it lives: ``"global"`` (function arguments and intermediates
    in main memory), ``"shared"`` (a GPU block's shared memory) or ``"local"``
    (registers / a thread's private memory). Compared by identity.

    ``shape`` entries are ``int`` (static) or integer expressions of shape
    variables (symbolic: ``(n, 128)`` with ``n = wb.Var("n")``); a static entry given
    as ``IntImm`` is stored as ``int``. ``index_dtype`` is ``"int64"`` when the
    shape is given in int64 (it is then inferred) or when asked for.

    >>> import workbench as wb
    >>> A = wb.Buffer("A", (128, 128), "float32")
    >>> A[0, 1]
    A[0, 1]
    >>> n = wb.Var("n", "int64")
    >>> wb.Buffer("X", (n, 128)).index_dtype
    'int64'

    ``strides`` is empty for the default, compact row-major layout. A tensor
    intrinsic's buffer may declare its strides as variables (``strides=[lda, 1]``,
    TVMScript's ``T.match_buffer(..., strides=[...])``): the layout stays the region's
    of the array it views, and each variable stands for that array's stride (the C
    backend binds it), so an implementation can hand the strides to a C function.
    """

    name: str
    shape: tuple[Extent, ...]
    dtype: str = "float32"
    scope: str = "global"
    # storage_align hints: ((axis, factor, offset), ...)
    align: tuple[tuple[int, int, int], ...] = ()
    index_dtype: str = "int32"
    strides: tuple[PrimExpr, ...] = ()

    def __post_init__(self) -> None:
        if self.dtype not in ALL_DTYPES:
            raise ValueError(f"buffer {self.name!r}: unknown dtype {self.dtype!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"buffer {self.name!r}: unknown scope {self.scope!r}")
        if self.index_dtype not in ("int32", "int64"):
            raise ValueError(f"buffer {self.name!r}: index dtype must be int32 or int64")
        wide = any(isinstance(s, PrimExpr) and s.dtype == "int64" for s in self.shape)
        shape = tuple(normalize_extent(s, f"buffer {self.name!r} shape") for s in self.shape)
        if any(isinstance(s, int) and s <= 0 for s in shape):
            raise ValueError(f"buffer {self.name!r}: shape {shape} must be positive")
        object.__setattr__(self, "shape", shape)
        strides = tuple(as_expr(x, self.index_dtype) for x in self.strides)
        if strides and len(strides) != len(shape):
            raise ValueError(f"buffer {self.name!r}: {len(strides)} strides for "
                             f"{len(shape)} dimensions")
        object.__setattr__(self, "strides", strides)
        if wide:
            object.__setattr__(self, "index_dtype", "int64")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        """True when every dimension is a known ``int``."""
        return all(isinstance(s, int) for s in self.shape)

    @property
    def size(self) -> Extent:
        """Number of elements (an expression when the shape is symbolic)."""
        n: Extent = 1
        for s in self.shape:
            n = n * s
        return n

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise IndexError(
                f"buffer {self.name!r} has {len(self.shape)} dimensions, "
                f"indexed with {len(indices)}"
            )
        return BufferLoad(self, tuple(as_expr(i, self.index_dtype) for i in indices))

    def with_(self, **changes) -> Buffer:
        """A new buffer with some fields changed (a different identity)."""
        fields = dict(
            name=self.name,
            shape=self.shape,
            dtype=self.dtype,
            scope=self.scope,
            align=self.align,
            index_dtype=self.index_dtype,
            strides=self.strides,
        )
        fields.update(changes)
        return Buffer(**fields)

    def __repr__(self) -> str:
        return f"Buffer({self.name!r}, {self.shape}, {self.dtype!r}, scope={self.scope!r})"


@dataclass(frozen=True, eq=False)
class BufferRegion:
    """A rectangular region ``buffer[min0:min0+ext0, ...]`` (extents may be exprs)."""

    buffer: Buffer
    region: tuple[tuple[PrimExpr, PrimExpr], ...]  # (min, extent) per dimension


@dataclass(frozen=True, eq=False)
class MatchBufferRegion:
    """A block's ``buf = T.match_buffer(src[r0:r0+e0, ...], shape)``: ``buffer`` is a
    view of the region ``source`` (``buffer[i, j]`` is ``src[r0 + i, r1 + j]``).

    ``buffer.ndim`` may be smaller than the region's: the leading region dimensions
    left over must then have extent 1 (``T.match_buffer(A[vi, 0:16], (16,))``).
    ``offset_factor`` is kept only to print what was read (``offset_factor=1``).
    """

    buffer: Buffer
    source: BufferRegion
    offset_factor: int = 0

    def __post_init__(self) -> None:
        nb, nr = self.buffer.ndim, len(self.source.region)
        if nb > nr:
            raise ValueError(
                f"match_buffer {self.buffer.name!r}: {nb} dimensions but the region of "
                f"{self.source.buffer.name!r} has {nr}"
            )

    @property
    def offsets(self) -> tuple[PrimExpr, ...]:
        """The region's minimum per dimension (the view's origin in the source)."""
        return tuple(mn for mn, _ in self.source.region)

    def source_indices(self, indices) -> tuple[PrimExpr, ...]:
        """Indices into the source buffer of ``buffer[indices]``."""
        lead = len(self.source.region) - self.buffer.ndim
        mins = self.offsets
        return tuple(mins[:lead]) + tuple(m + i for m, i in zip(mins[lead:], indices, strict=True))


def shares_storage(scope: str, thread_tag: str) -> bool:
    """Do all threads of a loop bound to ``thread_tag`` see the same buffer of memory
    ``scope``? (``global``: every bound loop; ``shared``: ``threadIdx``/``vthread``
    loops; ``warp``: ``threadIdx.x``; ``local``: none; TVM's
    ``CanRelaxStorageUnderThread``.) Region analyses relax such loops, since one
    thread's buffer must hold what all of them use.

    >>> shares_storage("shared", "threadIdx.x"), shares_storage("local", "threadIdx.x")
    (True, False)
    """
    if scope == "global":
        return True
    if scope in ("shared", "shared.dyn"):
        return thread_tag.startswith(("threadIdx.", "vthread"))
    if scope == "warp":
        return thread_tag == "threadIdx.x"
    return False
