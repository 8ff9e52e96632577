"""Statement nodes, functions and modules.

All nodes are frozen; a transformation builds new nodes and shares unchanged
subtrees. Loops are identified by their loop ``Var`` (which survives rewrites),
blocks by their ``name`` (unique within a function).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .buffer import Buffer, BufferRegion, MatchBufferRegion
from .expr import Extent, IntImm, PrimExpr, Var, const, normalize_extent

FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")
THREAD_TAGS = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread.x",
    "vthread.y",
    "vthread.z",
)

Annotations = tuple[tuple[str, Any], ...]


class Stmt:
    """Base class of statements."""

    def script(self, syntax: str = "classic") -> str:
        from .printer import stmt_to_str

        return stmt_to_str(self, syntax=syntax)

    def __repr__(self) -> str:
        return self.script()


class _Printable:
    def script(self, syntax: str = "classic", **kw) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def show(self, syntax: str = "classic", style: str | None = None) -> None:
        """Display the IR highlighted in a notebook, or print it in a terminal."""
        from .printer import show

        show(self.script(syntax=syntax), style=style)

    def _repr_html_(self) -> str:
        from .printer import highlight_html

        return highlight_html(self.script())

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return self.script()


@dataclass(frozen=True, eq=False, repr=False)
class BufferStore(Stmt):
    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    """``for loop_var in range(min, min + extent)`` with a kind (serial, parallel, ...).

    ``extent`` is an ``int`` or, for a symbolic loop, an integer expression of
    shape variables (``n``, ``(n + 3) // 4``); the loop variable's dtype is the
    index type (``int64`` loops print ``range(T.int64(128))``). ``min`` (the first
    value, an ``int``; 0 unless ``loop_partition`` made the loop) prints as
    ``range(min, min + extent)``; primitives that need a loop starting at 0 refuse
    others (:func:`~workbench.schedule.primitives._common.check_starts_at_zero`).
    """

    loop_var: Var
    extent: Extent
    kind: str
    body: Stmt
    thread_tag: str | None = None
    annotations: Annotations = ()
    min: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "extent", normalize_extent(self.extent, f"loop {self.loop_var.name!r} extent")
        )
        m = self.min
        if isinstance(m, IntImm):
            m = m.value
        if isinstance(m, bool) or not isinstance(m, int):
            raise ValueError(f"loop {self.loop_var.name!r}: min must be an int, got {m!r}")
        object.__setattr__(self, "min", m)
        if self.kind not in FOR_KINDS:
            raise ValueError(f"unknown loop kind {self.kind!r}")
        if (self.kind == "thread_binding") != (self.thread_tag is not None):
            raise ValueError("thread_binding loops (and only those) carry a thread tag")

    def with_body(self, body: Stmt) -> For:
        """The same loop around another body."""
        return For(self.loop_var, self.extent, self.kind, body, self.thread_tag,
                   self.annotations, self.min)

    @property
    def end(self) -> Extent:
        """One past the last value: ``min + extent``."""
        if not self.min:
            return self.extent
        if isinstance(self.extent, int):
            return self.min + self.extent
        from .simplify import simplify

        return simplify(self.extent + self.min)


@dataclass(frozen=True, eq=False, repr=False)
class LetStmt(Stmt):
    """``var`` bound to ``value`` (evaluated once) for the statements in ``body``.

    Printed as ``var: T.float32 = value`` followed by the body at the same
    indentation (classic; tirx: ``var: T.let[T.float32] = value``).
    """

    var: Var
    value: PrimExpr
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class SeqStmt(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, eq=False, repr=False)
class Evaluate(Stmt):
    """An expression evaluated for its effect: ``T.evaluate(0)`` (a no-op placeholder)
    or a call such as ``T.call_extern("int32", "printf", ...)``."""

    value: PrimExpr = field(default_factory=lambda: IntImm(0))


@dataclass(frozen=True, eq=False)
class IterVar:
    """A block iteration variable over ``[0, extent)``; kind ``"S"`` spatial, ``"R"``
    reduction or ``"O"`` opaque (``T.axis.opaque``: no data-parallel or reduction
    property is claimed; ``rolling_buffer`` marks its rolling axis so)."""

    var: Var
    extent: Extent
    kind: str = "S"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "extent", normalize_extent(self.extent, f"iter var {self.var.name!r} extent")
        )
        if self.kind not in ("S", "R", "O"):
            raise ValueError(f"iter var kind must be 'S', 'R' or 'O', got {self.kind!r}")


@dataclass(frozen=True, eq=False, repr=False)
class Block(Stmt):
    """A block: the unit of computation that schedules move around.

    ``iter_values`` bind each iter var to an expression of the surrounding loop
    variables; ``predicate`` guards execution (``T.where``). ``reads`` and
    ``writes`` are derived from the body when left as ``None``. ``match_buffers``
    are views of regions of outer buffers (``T.match_buffer`` in a block); accesses
    through them count as accesses of their source regions.
    """

    name: str
    iter_vars: tuple[IterVar, ...]
    iter_values: tuple[PrimExpr, ...]
    body: Stmt
    init: Stmt | None = None
    predicate: PrimExpr = field(default_factory=lambda: const(True))
    alloc_buffers: tuple[Buffer, ...] = ()
    annotations: Annotations = ()
    reads: tuple[BufferRegion, ...] | None = None
    writes: tuple[BufferRegion, ...] | None = None
    match_buffers: tuple[MatchBufferRegion, ...] = ()

    def __post_init__(self) -> None:
        if len(self.iter_vars) != len(self.iter_values):
            raise ValueError(
                f'block "{self.name}": {len(self.iter_vars)} iter vars but '
                f"{len(self.iter_values)} bindings"
            )
        if self.reads is None or self.writes is None:
            from .analysis import infer_regions

            reads, writes = infer_regions(self)
            if self.reads is None:
                object.__setattr__(self, "reads", reads)
            if self.writes is None:
                object.__setattr__(self, "writes", writes)

    @property
    def is_reduction(self) -> bool:
        """Whether the block has a reduce (``"R"``) iter var.

        An ``init`` alone does not make one: a block with an init and only spatial iter
        vars runs its init before every instance (as TVM lowers it), and TVM's
        primitives treat it as a reduction *block* only where they ask for an init
        (``decompose_reduction`` accepts it). A block with a reduce iter var and no init
        (``decompose_reduction``'s update block) is a reduction but no reduction block.
        """
        return any(iv.kind == "R" for iv in self.iter_vars)

    def with_body(self, body: Stmt, init: Stmt | None = ..., **changes) -> Block:
        """Replace body (and optionally init); regions are derived again (those marked
        explicit by ``annotate_buffer_access`` are kept)."""
        kw = dict(body=body, reads=None, writes=None, **changes)
        if init is not ...:
            kw["init"] = init
        from .functor import keep_explicit_regions

        return keep_explicit_regions(self, replace(self, **kw))


@dataclass(frozen=True, eq=False, repr=False)
class PrimFunc(_Printable):
    """A tensor program: buffer parameters and a root block holding everything."""

    name: str
    params: tuple[Buffer, ...]
    body: Block
    attrs: Annotations = ()

    def script(self, syntax: str = "classic", **kw) -> str:
        from .printer import func_to_str

        return func_to_str(self, syntax=syntax, **kw)

    def with_body(self, body: Block) -> PrimFunc:
        return replace(self, body=body)

    @property
    def shape_vars(self) -> list[Var]:
        """The shape variables: free variables of the parameters' shapes, in order of
        first appearance. Their values come from the arrays at call time.

        >>> import workbench as wb
        >>> n = wb.Var("n")
        >>> A, B = wb.Buffer("A", (n, 4)), wb.Buffer("B", (n, 4))
        >>> body = Block("root", (), (), Evaluate())
        >>> [v.name for v in PrimFunc("f", (A, B), body).shape_vars]
        ['n']
        """
        from .functor import iter_exprs

        out: list[Var] = []
        for p in self.params:
            for dim in p.shape:
                if isinstance(dim, PrimExpr):
                    for x in iter_exprs(dim):
                        if isinstance(x, Var) and not any(x is y for y in out):
                            out.append(x)
        return out

    def specialize(self, values) -> PrimFunc:
        """This function with shape variables replaced by constants (TVM's
        ``PrimFunc.specialize``); ``values`` maps a ``Var`` or its name to an int.

        >>> import workbench as wb
        >>> n = wb.Var("n")
        >>> f = PrimFunc("f", (wb.Buffer("A", (n, 4)),), Block("root", (), (), Evaluate()))
        >>> f.specialize({"n": 8}).params[0].shape
        (8, 4)
        """
        from .transform.specialize import specialize

        return specialize(self, values)

    @property
    def buffers(self) -> dict[str, Buffer]:
        """All buffers by name: parameters and every allocated buffer."""
        from .analysis import collect_buffers

        return {b.name: b for b in collect_buffers(self)}


@dataclass(frozen=True, eq=False, repr=False)
class IRModule(_Printable):
    """Named functions. ``mod["name"]`` gives a function."""

    functions: tuple[tuple[str, PrimFunc], ...]

    @staticmethod
    def from_funcs(*funcs: PrimFunc) -> IRModule:
        names = [f.name for f in funcs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate function names in module: {names}")
        return IRModule(tuple((f.name, f) for f in funcs))

    def __getitem__(self, name: str) -> PrimFunc:
        for n, f in self.functions:
            if n == name:
                return f
        raise KeyError(f"module has no function {name!r}; it has {self.names}")

    def __contains__(self, name: str) -> bool:
        return any(n == name for n, _ in self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.functions]

    def with_function(self, func: PrimFunc) -> IRModule:
        items = [(n, func if n == func.name else f) for n, f in self.functions]
        if func.name not in self:
            items.append((func.name, func))
        return IRModule(tuple(items))

    def script(self, syntax: str = "classic", **kw) -> str:
        from .printer import module_to_str

        return module_to_str(self, syntax=syntax, **kw)


#: The op of a thread barrier: ``T.tvm_storage_sync("shared")`` is ``__syncthreads()``.
BARRIER_OP = "tvm_storage_sync"


def barrier() -> Evaluate:
    """The ``__syncthreads()`` statement (TVM's ``T.tvm_storage_sync("shared")``), as the
    GPU planner and the cross-thread reduction lowering insert it.

    >>> is_barrier(barrier())
    True
    """
    from .expr import OpaqueCall, StringImm

    return Evaluate(OpaqueCall(BARRIER_OP, (StringImm("shared"),), "int32"))


def is_barrier(s: Stmt) -> bool:
    """Whether ``s`` is a block-wide barrier statement."""
    from .expr import OpaqueCall

    return (
        isinstance(s, Evaluate) and isinstance(s.value, OpaqueCall) and s.value.op == BARRIER_OP
    )

