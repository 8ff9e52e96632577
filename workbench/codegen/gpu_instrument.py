"""The GPU emulator's instruments: a race check (like compute-sanitizer's racecheck) and
a memory profile (global-memory sectors per warp access, shared-memory bank conflicts).

Beyond the calls agreed for emulated kernels (below), the caller sets the runtime's mode
with :func:`set_mode` before each instrumented run: the race-checking and profiling
builds of a kernel print the same C, so they share one loaded library and its state.

An instrumented emulated kernel calls a small C runtime (registered here with
:func:`~workbench.codegen.register_c_function`, so every unit that calls it gets it):

- ``wb_gpu_kernel_begin(kernel_id, grid_x, grid_y, grid_z, block_x, block_y, block_z)``
  at each launch (every unit that calls the runtime calls this one);
- ``wb_gpu_block_begin(block_linear)`` before each thread block (blocks run one after
  another when instrumented: the runtime keeps one global state, without locks);
- ``wb_gpu_region_begin()`` / ``wb_gpu_region_end()`` around each barrier-free region
  (a ``__syncthreads()`` or the end of the block follows a region's end);
- ``wb_gpu_access(buffer_id, space, is_write, flat_index, byte_address, nbytes,
  thread_linear, stmt_id)`` before each access of global (``space`` 0) or shared (1)
  memory; other spaces are ignored. ``flat_index``: the element (storage_align padding
  included); ``byte_address``: its byte offset from the buffer's start (buffers are taken
  as aligned to 256 bytes, as ``cudaMalloc`` aligns them); ``nbytes``: 1 to 64;
  ``stmt_id``: the statement in the :class:`InstrumentTables` (one statement may make
  several accesses). Buffer, statement and thread ids must be below 65536.
- ``wb_gpu_kernel_end()`` after the launch.

Each returns 0, or nonzero once a race was found or the runtime failed (then the kernel
may stop early; later calls do nothing). Python picks the mode with :func:`set_mode`
(``"race"``, ``"profile"``, ``"off"``; it forgets the last run's results) and reads the
results with :func:`read_race_report` and :func:`read_profile`, which take the loaded
library (or a kernel with a ``library``) and the tables naming kernels, buffers and
statements (:class:`TableBuilder` hands out the ids while code is generated).

**Race check.** Each element of each buffer has a shadow: its last write and up to two
readers since (segment, thread, statement). A segment is one barrier interval of one
block (it advances at each region end and block begin). Two accesses of one element race
when one writes, they come from different threads, and nothing orders them: the same
segment (no barrier between) or, for global memory, two blocks of one launch (a new
launch orders everything). A thread reading and writing its own element (a reduction)
never races. The first race stops the check and is reported as a :class:`RaceError`.
The path of one access is a few compares (inlined into the kernel, no allocation).

**Memory profile.** The lanes of a warp (32 consecutive linear thread ids) run one after
another in the emulator; the n-th access a lane makes of a statement in a region joins
the same access of the warp's other lanes into one warp-level request, judged once the
warp's last lane is done: global memory counts the distinct 32-byte sectors touched
(ideal: the bytes asked for, in whole sectors); shared memory counts wavefronts, the
most distinct 4-byte words any of the 32 banks must serve (one word read by many lanes
is broadcast; ideal: distinct words / 32, rounded up), and the wavefronts beyond the
ideal are bank conflicts. Loads and stores are counted apart, per access of each
statement. See :class:`GpuProfile`.

>>> from workbench.runtime import compile_and_load
>>> lib = compile_and_load(runtime_test_source('''
... int32_t run(void) {
...   wb_gpu_kernel_begin(0, 1, 1, 1, 32, 1, 1); wb_gpu_block_begin(0);
...   wb_gpu_region_begin();
...   for (int t = 0; t < 32; ++t) wb_gpu_access(0, 1, 1, t, 4 * t, 4, t, 0);
...   for (int t = 0; t < 32; ++t) wb_gpu_access(0, 1, 0, 0, 0, 4, t, 1);
...   wb_gpu_region_end(); return wb_gpu_kernel_end();
... }'''))
>>> tables = InstrumentTables(kernels=(KernelInfo("k"),),
...     buffers=(BufferInfo("S", (32,), (1,), "shared"),),
...     stmts=(StmtInfo("S[tx] = 1"), StmtInfo("y = S[0]")))
>>> set_mode(lib, "race"); lib.run()
1
>>> print(read_race_report(lib, tables))  # doctest: +NORMALIZE_WHITESPACE
race on shared buffer S[0] in kernel k: thread (0, 0, 0) of block (0, 0, 0) writes it in
"S[tx] = 1" while thread (1, 0, 0) reads it in "y = S[0]" with no __syncthreads() between
"""

from __future__ import annotations

import ctypes
import html
import math
from dataclasses import dataclass, field
from typing import Any

from .extern import register_c_function
from .gpu_instrument_c import HEADERS, PRELUDE, SOURCES, runtime_source

__all__ = [
    "MODES",
    "REGISTER_OVERHEAD",
    "AccessProfile",
    "BufferInfo",
    "GpuProfile",
    "InstrumentError",
    "InstrumentTables",
    "KernelInfo",
    "KernelProfile",
    "RaceAccess",
    "RaceError",
    "StmtInfo",
    "TableBuilder",
    "read_profile",
    "read_race_report",
    "register_runtime",
    "runtime_test_source",
    "set_mode",
    "elide_subscripts",
    "statement_text",
]

#: Modes of the runtime, as :func:`set_mode` takes them.
MODES = {"off": 0, "race": 1, "profile": 2}

#: Registers a thread needs besides its local buffers (indices, addresses, loop
#: counters): an estimate. With it the curriculum's 64x64-tile matmul (16 local floats)
#: estimates 40, what ``ptxas`` reports for it on sm_80 and sm_90; ``nvcc
#: --resource-usage`` gives a kernel's real count.
REGISTER_OVERHEAD = 24

_SPACES = ("global", "shared")
_KINDS = {1: "read-after-write", 2: "write-after-read", 3: "write-after-write"}
_RACE_FIELDS = 20
_ROW_FIELDS = 10
_KERNEL_FIELDS = 8
_ERRORS = {
    1: "out of memory (size {0})",
    2: "negative element index or address {1} in buffer {0}",
    3: "thread index {0} outside the block's {1} threads (or a block over 65536 threads)",
    4: "statement id {0} outside 0..65535",
    5: "buffer or kernel id {0} outside 0..65535",
    6: "an access of buffer {0} before wb_gpu_kernel_begin / wb_gpu_block_begin",
    7: "an access of {0} bytes (1 to 64 are counted)",
    8: "too many barrier intervals in one launch of kernel {0}",
}


def register_runtime() -> None:
    """Register the runtime's functions (done when this module is imported; again is
    harmless).

    >>> from workbench.codegen import c_function
    >>> register_runtime(); c_function("wb_gpu_access").headers[-1]
    '#include <string.h>'
    """
    for name, source in SOURCES.items():
        register_c_function(name, PRELUDE + source, headers=HEADERS)


register_runtime()


def runtime_test_source(body: str) -> str:
    """C of a unit with the whole runtime, then ``body`` (hand-written callers: tests
    and examples).

    >>> "wb_gpu_region_end" in runtime_test_source("")
    True
    """
    includes = "".join(f"#include <{h}>\n" for h in HEADERS)
    return includes + runtime_source() + "\n" + body + "\n"


class InstrumentError(RuntimeError):
    """The instrumentation runtime failed (out of memory, or called out of order or with
    an id out of range): its results are incomplete."""


def _library(lib: Any) -> ctypes.CDLL:
    return getattr(lib, "library", lib)


def _call(lib: ctypes.CDLL, name: str, *args, argtypes=()) -> int:
    fn = getattr(lib, name)
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int32
    return int(fn(*args))


def set_mode(lib: Any, mode: str) -> None:
    """Set the runtime of ``lib`` (a loaded library or a kernel with ``library``) to
    ``"race"``, ``"profile"`` or ``"off"``, forgetting earlier results.

    >>> from workbench.runtime import compile_and_load
    >>> lib = compile_and_load(runtime_test_source(""))
    >>> set_mode(lib, "profile"); lib.wb_gpu_get_mode()
    2
    """
    if mode not in MODES:
        raise ValueError(f"set_mode: mode must be one of {sorted(MODES)}, got {mode!r}")
    _call(_library(lib), "wb_gpu_set_mode", MODES[mode], argtypes=(ctypes.c_int32,))


def _check(lib: ctypes.CDLL, mode: str, reader: str) -> None:
    """Raise :class:`InstrumentError` if the runtime failed or is not in ``mode``."""
    info = (ctypes.c_int64 * 3)()
    ptr = ctypes.POINTER(ctypes.c_int64)
    code = _call(lib, "wb_gpu_error", info, argtypes=(ptr,))
    if code:
        what = _ERRORS.get(code, "error {0}").format(*info)
        raise InstrumentError(f"GPU emulator instrumentation failed: {what}")
    current = _call(lib, "wb_gpu_get_mode")
    launches = (ctypes.c_int64 * 2)()
    _call(lib, "wb_gpu_launches", launches, argtypes=(ptr,))
    if current != MODES[mode]:
        name = {v: k for k, v in MODES.items()}.get(current, str(current))
        ran = f" ({launches[1]} kernel launches ran meanwhile)" if launches[1] else ""
        raise InstrumentError(
            f"{reader}: the instrumentation runtime is in mode {name!r}{ran}; call "
            f"set_mode(lib, {mode!r}) before running the kernel"
        )


# -- tables: what the ids of the runtime's calls name ---------------------------------


@dataclass(frozen=True)
class KernelInfo:
    """A kernel: its ``name``, static shared memory per block (bytes) and local buffers
    per thread in 32-bit words (the registers estimate adds :data:`REGISTER_OVERHEAD`);
    None where not known (then the profile has no occupancy)."""

    name: str
    shared_bytes: int | None = None
    local_words: int | None = None

    @classmethod
    def from_gpu_kernel(cls, kernel, name: str | None = None) -> KernelInfo:
        """From a planned :class:`~workbench.codegen.gpu_plan.GpuKernel`."""
        return cls(name or kernel.name, kernel.shared_bytes, -(-kernel.local_bytes // 4))


@dataclass(frozen=True)
class BufferInfo:
    """A buffer: ``name``, ``shape``, element ``strides`` (None where not static:
    reports then give the flat index), ``scope`` and ``dtype``."""

    name: str
    shape: tuple = ()
    strides: tuple[int, ...] | None = None
    scope: str = "global"
    dtype: str = "float32"

    @classmethod
    def from_buffer(cls, buf, use_align: bool = True) -> BufferInfo:
        """From an IR :class:`~workbench.ir.Buffer`, with storage_align padding in the
        strides unless ``use_align`` is False (a function's parameters are compact)."""
        from .cstyle import CodegenError, buffer_strides

        try:
            strides = buffer_strides(buf, use_align=use_align)[0]
        except CodegenError:
            strides = None
        if strides is not None and not all(isinstance(s, int) for s in strides):
            strides = None
        shape = tuple(d if isinstance(d, int) else str(d) for d in buf.shape)
        return cls(buf.name, shape, strides, buf.scope, buf.dtype)

    def index_text(self, flat: int) -> str:
        """``flat`` as a subscript: ``[3, 5]``, or ``[flat index 104]``.

        >>> BufferInfo("S", (64, 8), (33, 1), "shared").index_text(104)
        '[3, 5]'
        """
        if self.strides is None or len(self.strides) != len(self.shape):
            return f"[flat index {flat}]"
        coords, rest = [], flat
        for stride in self.strides:
            coords.append(rest // stride if stride else 0)
            rest = rest % stride if stride else rest
        return "[" + ", ".join(map(str, coords)) + "]"


@dataclass(frozen=True)
class StmtInfo:
    """A statement (or access site): its ``text`` and the IR ``block`` it is in."""

    text: str
    block: str | None = None


@dataclass(frozen=True)
class InstrumentTables:
    """What the ids in the runtime's calls name: ``kernels[kernel_id]``,
    ``buffers[buffer_id]``, ``stmts[stmt_id]``."""

    kernels: tuple[KernelInfo, ...] = ()
    buffers: tuple[BufferInfo, ...] = ()
    stmts: tuple[StmtInfo, ...] = ()

    def kernel(self, i: int) -> KernelInfo:
        return self.kernels[i] if 0 <= i < len(self.kernels) else KernelInfo(f"kernel {i}")

    def buffer(self, i: int) -> BufferInfo:
        return self.buffers[i] if 0 <= i < len(self.buffers) else BufferInfo(f"buffer {i}")

    def stmt(self, i: int) -> StmtInfo:
        return self.stmts[i] if 0 <= i < len(self.stmts) else StmtInfo(f"statement {i}")

    @classmethod
    def from_any(cls, tables: Any, kernels=None) -> InstrumentTables:
        """These tables from another generator's (entries with the same field names:
        kernels as names or with ``name``; buffers with ``name``, ``shape``, ``dtype``
        and ``scope`` or ``space`` (0 global, 1 shared), optionally ``strides``;
        statements with ``text`` and ``block``), completed from the planned
        ``kernels`` (``GpuKernel`` s in kernel-id order) when given: their shared bytes,
        local buffers and the strides (storage_align padding) of their buffers.

        >>> from types import SimpleNamespace as NS
        >>> t = InstrumentTables.from_any(NS(kernels=("k",), stmts=(),
        ...     buffers=(NS(name="A", shape=("4", "8"), dtype="float32", space=0),)))
        >>> t.kernels[0], t.buffers[0].strides
        (KernelInfo(name='k', shared_bytes=None, local_words=None), (8, 1))
        """
        if isinstance(tables, InstrumentTables) and kernels is None:
            return tables
        planned = list(kernels or ())
        by_name: dict[str, Any] = {}
        for k in planned:
            for b in (*k.shared, *k.local, *k.params):
                by_name.setdefault(b.name, b)
        infos = []
        for i, k in enumerate(tables.kernels):
            name = k if isinstance(k, str) else k.name
            if i < len(planned):
                infos.append(KernelInfo.from_gpu_kernel(planned[i], name))
            else:
                infos.append(k if isinstance(k, KernelInfo) else KernelInfo(
                    name, getattr(k, "shared_bytes", None), getattr(k, "local_words", None)))
        buffers = []
        for b in tables.buffers:
            if isinstance(b, BufferInfo) and (b.strides is not None or b.name not in by_name):
                buffers.append(b)
                continue
            if getattr(b, "strides", None) is None and b.name in by_name:
                buffers.append(BufferInfo.from_buffer(by_name[b.name]))
                continue
            shape = tuple(int(d) if str(d).isdigit() else d for d in b.shape)
            strides = getattr(b, "strides", None)
            if strides is None and all(isinstance(d, int) for d in shape):
                strides = tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
            scope = getattr(b, "scope", None) or _SPACES[getattr(b, "space", 0)]
            buffers.append(BufferInfo(b.name, shape, strides, scope,
                                      getattr(b, "dtype", "float32")))
        stmts = tuple(s if isinstance(s, StmtInfo) else StmtInfo(s.text, getattr(s, "block", None))
                      for s in tables.stmts)
        return cls(tuple(infos), tuple(buffers), stmts)


class TableBuilder:
    """Hands out ids while a generator prints instrumented code, then :meth:`build` s
    the tables. Buffers are keyed by identity, statements by (text, block).

    >>> import workbench as wb
    >>> tb = TableBuilder()
    >>> A = wb.Buffer("A", (4, 4))
    >>> tb.buffer(A), tb.buffer(A), tb.stmt("A[i] = 0", "init"), tb.kernel(KernelInfo("k"))
    (0, 0, 0, 0)
    >>> tb.build().buffers[0].strides
    (4, 1)
    """

    def __init__(self) -> None:
        self._kernels: list[KernelInfo] = []
        self._buffers: list[BufferInfo] = []
        self._buffer_ids: dict[int, int] = {}
        self._keep: list[Any] = []  # buffers keyed by id() stay alive
        self._stmts: dict[StmtInfo, int] = {}

    def kernel(self, kernel) -> int:
        """The id of a new kernel (a :class:`KernelInfo` or a planned ``GpuKernel``)."""
        info = kernel if isinstance(kernel, KernelInfo) else KernelInfo.from_gpu_kernel(kernel)
        self._kernels.append(info)
        return len(self._kernels) - 1

    def buffer(self, buf, use_align: bool = True) -> int:
        """The id of an IR buffer (the same for the same buffer); ``use_align`` as for
        :meth:`BufferInfo.from_buffer`, the first time."""
        key = id(buf)
        if key not in self._buffer_ids:
            self._buffer_ids[key] = len(self._buffers)
            self._buffers.append(BufferInfo.from_buffer(buf, use_align))
            self._keep.append(buf)
        return self._buffer_ids[key]

    def stmt(self, text: str, block: str | None = None) -> int:
        """The id of a statement (the same for the same text in the same block)."""
        return self._stmts.setdefault(StmtInfo(text, block), len(self._stmts))

    def build(self) -> InstrumentTables:
        return InstrumentTables(tuple(self._kernels), tuple(self._buffers),
                                tuple(self._stmts))


def statement_text(stmt) -> str:
    """A statement's first line with every subscript shortened to ``[...]``.

    >>> import workbench as wb
    >>> from workbench.ir.stmt import BufferStore
    >>> A, B = wb.Buffer("A", (4,)), wb.Buffer("B", (4,))
    >>> i = wb.Var("i")
    >>> statement_text(BufferStore(A, B[i] * 2.0, (i + 1,)))
    'A[...] = B[...] * T.float32(2)'
    """
    from ..ir.printer import stmt_to_str

    return elide_subscripts(stmt_to_str(stmt).strip().splitlines()[0])


def elide_subscripts(text: str) -> str:
    """``text`` with every (outermost) subscript shortened to ``[...]``.

    >>> elide_subscripts("C[i, j] = C[i, j] + A[i, B[k]]")
    'C[...] = C[...] + A[...]'
    """
    out, depth = [], 0
    for ch in text:
        if ch == "[":
            if depth == 0:
                out.append("[...")
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
            if depth == 0:
                out.append("]")
        elif depth == 0:
            out.append(ch)
    return "".join(out)


# -- race report ----------------------------------------------------------------------


def _coords(linear: int, dims) -> tuple[int, int, int]:
    x, y = int(dims[0]) or 1, int(dims[1]) or 1
    return (linear % x, linear // x % y, linear // (x * y))


@dataclass(frozen=True)
class RaceAccess:
    """One side of a race: the thread and block (x, y, z), the statement and its IR
    block, and whether it writes."""

    thread: tuple[int, int, int]
    block: tuple[int, int, int]
    stmt: str
    stmt_block: str | None
    is_write: bool

    def describe(self, with_block: bool) -> str:
        where = f" of block {self.block}" if with_block else ""
        in_block = f" (block {self.stmt_block})" if self.stmt_block else ""
        verb = "writes" if self.is_write else "reads"
        return f"thread {self.thread}{where} {verb} it in \"{self.stmt}\"{in_block}"


class RaceError(ValueError):
    """Two threads access one element, at least one writing, with nothing ordering them.

    Attributes: ``kernel``, ``buffer`` (names), ``space`` (``"global"``/``"shared"``),
    ``flat_index``, ``index`` (the subscript text), ``kind`` (``"read-after-write"``,
    ``"write-after-read"``, ``"write-after-write"``), ``first`` and ``second``
    (:class:`RaceAccess`, in the order the emulator ran them), ``same_block`` (False:
    two thread blocks of one launch, which nothing orders).
    """

    def __init__(self, kernel: str, buffer: str, space: str, flat_index: int, index: str,
                 kind: str, first: RaceAccess, second: RaceAccess, same_block: bool):
        self.kernel, self.buffer, self.space = kernel, buffer, space
        self.flat_index, self.index, self.kind = flat_index, index, kind
        self.first, self.second, self.same_block = first, second, same_block
        why = ("with no __syncthreads() between" if same_block else
               "and thread blocks of one launch run in no fixed order")
        super().__init__(
            f"race on {space} buffer {buffer}{index} in kernel {kernel}: "
            f"{first.describe(True)} while {second.describe(not same_block)} {why}"
        )


def read_race_report(lib: Any, tables: Any, kernels=None) -> RaceError | None:
    """The first race of the last race-checked run (a :class:`RaceError`, not raised),
    or None. Raises :class:`InstrumentError` if the runtime failed or was not set to
    ``"race"`` before the run (:func:`set_mode`).

    ``lib``: the loaded library (or a kernel with a ``library``); ``tables``: names for
    the ids (:class:`InstrumentTables`, or another generator's, see
    :meth:`InstrumentTables.from_any`, completed from the planned ``kernels``).
    """
    lib = _library(lib)
    _check(lib, "race", "read_race_report")
    r = (ctypes.c_int64 * _RACE_FIELDS)()
    if not _call(lib, "wb_gpu_race", r, argtypes=(ctypes.POINTER(ctypes.c_int64),)):
        return None
    tables = InstrumentTables.from_any(tables, kernels)
    kind, kernel_id, buffer_id, space, flat = r[0], r[1], r[2], r[3], r[4]
    grid, block = r[5:8], r[8:11]
    buf = tables.buffer(buffer_id)

    def access(block_linear: int, thread: int, stmt: int, is_write: int) -> RaceAccess:
        info = tables.stmt(stmt)
        return RaceAccess(_coords(thread, block), _coords(block_linear, grid), info.text,
                          info.block, bool(is_write))

    first = access(*r[11:15])
    second = access(*r[15:19])
    return RaceError(tables.kernel(kernel_id).name, buf.name, _SPACES[space], flat,
                     buf.index_text(flat), _KINDS[kind], first, second,
                     same_block=bool(r[19]))


# -- memory profile -------------------------------------------------------------------


@dataclass(frozen=True)
class AccessProfile:
    """One access of one statement, summed over the kernel's warps and launches.

    ``requests``: warp-level accesses; ``lanes``: thread accesses; ``bytes``: bytes the
    lanes asked for. Global memory: ``transactions`` are 32-byte sectors, ``ideal`` the
    fewest sectors that hold the bytes asked for. Shared memory: ``transactions`` are
    wavefronts, ``ideal`` the fewest (distinct words / 32 per request).
    """

    kernel: str
    statement: str
    block: str | None
    buffer: str
    space: str
    kind: str  # "load" / "store"
    requests: int
    lanes: int
    bytes: int
    transactions: int
    ideal: int

    @property
    def extra(self) -> int:
        """Transactions beyond the ideal: bank conflicts (shared), excess sectors
        (global)."""
        return self.transactions - self.ideal

    @property
    def efficiency(self) -> float:
        """ideal / transactions (1.0: coalesced or conflict-free)."""
        return self.ideal / self.transactions if self.transactions else 1.0


@dataclass(frozen=True)
class KernelProfile:
    """One kernel's launch figures and memory counts (see :class:`GpuProfile`)."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    launches: int
    shared_bytes: int | None  # static shared memory per block (None: not known)
    registers: int | None  # an estimate: local words per thread + REGISTER_OVERHEAD
    occupancy: Any  # workbench.target.Occupancy, or None without a GPU target
    accesses: tuple[AccessProfile, ...] = field(default=())

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def total(self, space: str, kind: str, what: str) -> int:
        """Sum of ``what`` (``"requests"``, ``"transactions"``, ``"ideal"``,
        ``"extra"``, ``"bytes"``, ``"lanes"``) over the accesses of ``space`` and
        ``kind``."""
        return sum(getattr(a, what) for a in self.accesses
                   if a.space == space and a.kind == kind)

    @property
    def global_load_sectors(self) -> int:
        return self.total("global", "load", "transactions")

    @property
    def global_store_sectors(self) -> int:
        return self.total("global", "store", "transactions")

    @property
    def bank_conflicts(self) -> int:
        """Extra shared-memory wavefronts, loads and stores."""
        return self.total("shared", "load", "extra") + self.total("shared", "store", "extra")

    def summary(self) -> dict[str, Any]:
        """The kernel's row of :meth:`GpuProfile.to_pandas`."""
        occ = self.occupancy
        row: dict[str, Any] = {
            "kernel": self.name, "grid": self.grid, "block": self.block,
            "threads_per_block": self.threads_per_block, "shared_bytes": self.shared_bytes,
            "registers_est": self.registers,
            "occupancy": occ.occupancy if occ is not None else math.nan,
            "blocks_per_sm": occ.blocks_per_sm if occ is not None else math.nan,
            "limited_by": occ.limiter if occ is not None else "",
        }
        for space, unit in (("global", "sectors"), ("shared", "wavefronts")):
            for kind in ("load", "store"):
                row[f"{space}_{kind}_requests"] = self.total(space, kind, "requests")
                row[f"{space}_{kind}_{unit}"] = self.total(space, kind, "transactions")
                row[f"{space}_{kind}_ideal"] = self.total(space, kind, "ideal")
        row["bank_conflicts"] = self.bank_conflicts
        return row

    def describe(self) -> str:
        """The kernel's lines of :class:`GpuProfile`'s text."""
        head = [f"grid {self.grid}", f"block {self.block} ({self.threads_per_block} threads)"]
        if self.shared_bytes is not None:
            head.append(f"{self.shared_bytes} B shared")
        if self.registers is not None:
            head.append(f"~{self.registers} registers")
        if self.occupancy is not None:
            head.append(str(self.occupancy))
        if self.launches != 1:
            head.append(f"{self.launches} launches")
        lines = [f"{self.name}: " + ", ".join(head)]
        for space, unit in (("global", "sectors"), ("shared", "wavefronts")):
            for kind in ("load", "store"):
                req = self.total(space, kind, "requests")
                if not req:
                    continue
                got = self.total(space, kind, "transactions")
                ideal = self.total(space, kind, "ideal")
                extra = (f"{got - ideal} bank conflicts" if space == "shared"
                         else f"{ideal / got:.0%} efficient" if got else "")
                lines.append(f"  {space} {kind}s: {req} requests, {got} {unit} "
                             f"(ideal {ideal}, {extra})")
        for a in self.accesses:
            unit = "wavefronts" if a.space == "shared" else "sectors"
            extra = f", {a.extra} bank conflicts" if a.space == "shared" and a.extra else ""
            lines.append(f"    {a.buffer} {a.kind} in \"{elide_subscripts(a.statement)}\": "
                         f"{a.requests} requests, {a.transactions} {unit} (ideal {a.ideal}"
                         f"{extra})")
        return "\n".join(lines)


@dataclass(frozen=True)
class GpuProfile:
    """The memory profile of an emulated run: one :class:`KernelProfile` per kernel.

    Per kernel: grid and block sizes, threads per block, static shared memory per block,
    a registers estimate, occupancy on ``target`` (:meth:`workbench.Target.occupancy`),
    and per access of each statement: warp-level requests, global-memory sectors (32
    bytes; ideal: coalesced) or shared-memory wavefronts (ideal: conflict-free).
    ``profile["matmul_kernel"]`` is one kernel; :meth:`to_pandas` gives the tables.
    """

    kernels: tuple[KernelProfile, ...]
    target: Any = None

    def __getitem__(self, name: str) -> KernelProfile:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(f"no kernel {name!r}; the profile has {[k.name for k in self.kernels]}")

    @property
    def bank_conflicts(self) -> int:
        return sum(k.bank_conflicts for k in self.kernels)

    def to_pandas(self, per: str = "kernel"):
        """A DataFrame: one row per kernel (``per="kernel"``), or per access of each
        statement (``per="access"``)."""
        import pandas as pd

        if per == "kernel":
            return pd.DataFrame([k.summary() for k in self.kernels])
        if per == "access":
            rows = []
            for k in self.kernels:
                for a in k.accesses:
                    shared = a.space == "shared"
                    rows.append({
                        "kernel": a.kernel, "statement": a.statement, "block": a.block,
                        "buffer": a.buffer, "space": a.space, "access": a.kind,
                        "requests": a.requests, "lanes": a.lanes, "bytes": a.bytes,
                        "sectors": math.nan if shared else a.transactions,
                        "ideal_sectors": math.nan if shared else a.ideal,
                        "wavefronts": a.transactions if shared else math.nan,
                        "bank_conflicts": a.extra if shared else math.nan,
                        "efficiency": a.efficiency,
                    })
            return pd.DataFrame(rows)
        raise ValueError(f"to_pandas: per must be 'kernel' or 'access', got {per!r}")

    def __repr__(self) -> str:
        on = f" on {self.target}" if self.target is not None else ""
        return "\n".join([f"GpuProfile{on}:", *(k.describe() for k in self.kernels)])

    def _repr_html_(self) -> str:
        on = f" on {html.escape(str(self.target))}" if self.target is not None else ""
        parts = [f"<p><b>GPU memory profile{on}</b></p>"]
        fmt = {"float_format": lambda x: f"{x:.3g}", "na_rep": "", "index": False}
        parts.append(self.to_pandas("kernel").to_html(**fmt))
        if any(k.accesses for k in self.kernels):
            parts.append(self.to_pandas("access").to_html(**fmt))
        return "".join(parts)


def _occupancy(target, threads: int, shared: int, registers: int):
    if target is None or not getattr(target, "is_gpu", False):
        return None
    try:
        return target.occupancy(threads, shared, registers)
    except ValueError:  # over a limit of the target: no block fits
        return None


def read_profile(lib: Any, tables: Any, target: Any = "cuda", kernels=None) -> GpuProfile:
    """The memory profile of the last profiled run of ``lib`` (a loaded library or a
    kernel with a ``library``), with occupancy for ``target`` (a
    :class:`~workbench.Target`, a string such as ``"cuda -arch=sm_90"``, or None).
    ``tables`` and ``kernels`` as for :func:`read_race_report` (shared bytes and the
    registers estimate come from them). Raises :class:`InstrumentError` if the runtime
    failed or was not set to ``"profile"`` before the run.
    """
    from ..target import Target

    lib = _library(lib)
    _check(lib, "profile", "read_profile")
    tables = InstrumentTables.from_any(tables, kernels)
    tgt = None if target is None else Target.from_any(target)
    out = (ctypes.c_int64 * max(_ROW_FIELDS, _KERNEL_FIELDS))()
    ptr = ctypes.POINTER(ctypes.c_int64)
    accesses: dict[int, list[AccessProfile]] = {}
    for i in range(_call(lib, "wb_gpu_profile_rows")):
        _call(lib, "wb_gpu_profile_row", i, out, argtypes=(ctypes.c_int32, ptr))
        kid, sid, bid, space, write, req, lanes, nbytes, units, ideal = out[:_ROW_FIELDS]
        stmt = tables.stmt(sid)
        accesses.setdefault(kid, []).append(AccessProfile(
            tables.kernel(kid).name, stmt.text, stmt.block, tables.buffer(bid).name,
            _SPACES[space], "store" if write else "load", req, lanes, nbytes, units, ideal))
    profiles = []
    for kid in range(_call(lib, "wb_gpu_profile_kernels")):
        _call(lib, "wb_gpu_profile_kernel", kid, out, argtypes=(ctypes.c_int32, ptr))
        launches = out[0]
        if not launches:
            continue
        grid, block = tuple(out[2:5]), tuple(out[5:8])
        info = tables.kernel(kid)
        registers = (None if info.local_words is None
                     else min(info.local_words + REGISTER_OVERHEAD, 255))
        occupancy = None
        if info.shared_bytes is not None and registers is not None:
            occupancy = _occupancy(tgt, block[0] * block[1] * block[2], info.shared_bytes,
                                   registers)
        profiles.append(KernelProfile(info.name, grid, block, launches, info.shared_bytes,
                                      registers, occupancy, tuple(accesses.get(kid, ()))))
    return GpuProfile(tuple(profiles), tgt)
