"""Buffers: named, typed, statically shaped arrays with a memory scope."""

from __future__ import annotations

from dataclasses import dataclass

from .expr import ALL_DTYPES, BufferLoad, PrimExpr, as_expr

SCOPES = ("global", "shared", "shared.dyn", "local", "warp")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A multi-dimensional array.

    ``scope`` is where it lives: ``"global"`` (function arguments and intermediates
    in main memory), ``"shared"`` (a GPU block's shared memory) or ``"local"``
    (registers / a thread's private memory). Compared by identity.

    >>> import workbench as wb
    >>> A = wb.Buffer("A", (128, 128), "float32")
    >>> A[0, 1]
    A[0, 1]
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    scope: str = "global"
    # storage_align hints: ((axis, factor, offset), ...)
    align: tuple[tuple[int, int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.dtype not in ALL_DTYPES:
            raise ValueError(f"buffer {self.name!r}: unknown dtype {self.dtype!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"buffer {self.name!r}: unknown scope {self.scope!r}")
        shape = tuple(int(s) for s in self.shape)
        if any(s <= 0 for s in shape):
            raise ValueError(f"buffer {self.name!r}: shape {shape} must be positive")
        object.__setattr__(self, "shape", shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise IndexError(
                f"buffer {self.name!r} has {len(self.shape)} dimensions, "
                f"indexed with {len(indices)}"
            )
        return BufferLoad(self, tuple(as_expr(i) for i in indices))

    def with_(self, **changes) -> Buffer:
        """A new buffer with some fields changed (a different identity)."""
        fields = dict(
            name=self.name, shape=self.shape, dtype=self.dtype, scope=self.scope, align=self.align
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
