"""Statement nodes, functions and modules.

All nodes are frozen; a transformation builds new nodes and shares unchanged
subtrees. Loops are identified by their loop ``Var`` (which survives rewrites),
blocks by their ``name`` (unique within a function).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .buffer import Buffer, BufferRegion
from .expr import IntImm, PrimExpr, Var, const

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
    """``for loop_var in range(extent)`` with a kind (serial, parallel, ...)."""

    loop_var: Var
    extent: int
    kind: str
    body: Stmt
    thread_tag: str | None = None
    annotations: Annotations = ()

    def __post_init__(self) -> None:
        if self.kind not in FOR_KINDS:
            raise ValueError(f"unknown loop kind {self.kind!r}")
        if (self.kind == "thread_binding") != (self.thread_tag is not None):
            raise ValueError("thread_binding loops (and only those) carry a thread tag")

    def with_body(self, body: Stmt) -> For:
        """The same loop around another body."""
        return For(self.loop_var, self.extent, self.kind, body, self.thread_tag, self.annotations)


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
    """A no-op placeholder statement (``T.evaluate(0)``)."""

    value: PrimExpr = field(default_factory=lambda: IntImm(0))


@dataclass(frozen=True, eq=False)
class IterVar:
    """A block iteration variable over ``[0, extent)``; kind ``"S"`` spatial or ``"R"``
    reduction."""

    var: Var
    extent: int
    kind: str = "S"

    def __post_init__(self) -> None:
        if self.kind not in ("S", "R"):
            raise ValueError(f"iter var kind must be 'S' or 'R', got {self.kind!r}")


@dataclass(frozen=True, eq=False, repr=False)
class Block(Stmt):
    """A block: the unit of computation that schedules move around.

    ``iter_values`` bind each iter var to an expression of the surrounding loop
    variables; ``predicate`` guards execution (``T.where``). ``reads`` and
    ``writes`` are derived from the body when left as ``None``.
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
        return any(iv.kind == "R" for iv in self.iter_vars)

    def with_body(self, body: Stmt, init: Stmt | None = ..., **changes) -> Block:
        """Replace body (and optionally init); regions are derived again."""
        kw = dict(body=body, reads=None, writes=None, **changes)
        if init is not ...:
            kw["init"] = init
        return replace(self, **kw)


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
