"""Tensor intrinsics: named pairs of a *description* and an *implementation*, the targets
of ``Schedule.tensorize``.

The description is a PrimFunc whose root block holds a loop nest around exactly one
block: the small computation the hardware instruction (or C micro-kernel) performs,
written as ordinary TensorIR. The implementation has the same buffer parameters (same
shapes and dtypes, in the same order) and a body that does the work, usually a
``T.call_extern`` of a C function registered with
:func:`workbench.codegen.register_c_function`. ``tensorize`` checks a block against the
description and puts the implementation in its place, its buffers bound to the block's
regions by ``T.match_buffer``.

The registry is process-wide, like TVM's ``tvm.tir.TensorIntrin``.

>>> import workbench as wb
>>> desc = '''
... @T.prim_func
... def desc(a: T.handle, b: T.handle, c: T.handle):
...     A = T.match_buffer(a, (4,), offset_factor=1)
...     B = T.match_buffer(b, (4,), offset_factor=1)
...     C = T.match_buffer(c, (), offset_factor=1)
...     with T.block("root"):
...         T.reads(C[()], A[0:4], B[0:4])
...         T.writes(C[()])
...         for k in range(4):
...             with T.block("update"):
...                 vk = T.axis.remap("R", [k])
...                 C[()] = C[()] + A[vk] * B[vk]
... '''
>>> impl = '''
... @T.prim_func
... def impl(a: T.handle, b: T.handle, c: T.handle):
...     A = T.match_buffer(a, (4,), offset_factor=1)
...     B = T.match_buffer(b, (4,), offset_factor=1)
...     C = T.match_buffer(c, (), offset_factor=1)
...     with T.block("root"):
...         T.reads(C[()], A[0:4], B[0:4])
...         T.writes(C[()])
...         T.evaluate(T.call_extern("void", "doc_dot4", C.access_ptr("rw"),
...                                  A.access_ptr("r"), B.access_ptr("r")))
... '''
>>> intrin = wb.TensorIntrin.register("doc_dot4", desc, impl, override=True)
>>> intrin.name, [p.name for p in intrin.desc.params]
('doc_dot4', ['A', 'B', 'C'])
>>> "doc_dot4" in wb.TensorIntrin.names()
True
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..ir.analysis import structural_equal
from ..ir.buffer import Buffer, BufferRegion
from ..ir.expr import IntImm, PrimExpr
from ..ir.simplify import simplify
from ..ir.stmt import Block, For, IRModule, PrimFunc, Stmt

__all__ = [
    "TensorIntrin",
    "TensorIntrinError",
    "TensorIntrinNotFoundError",
    "desc_parts",
    "impl_regions",
]


class TensorIntrinError(ValueError):
    """A tensor intrinsic cannot be registered: its functions do not fit together, or the
    name is taken by a different intrinsic."""


class TensorIntrinNotFoundError(KeyError, ValueError):
    """No tensor intrinsic of that name is registered (a ``KeyError``, and a
    ``ValueError`` as TVM raises)."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, eq=False)
class TensorIntrin:
    """A registered tensor intrinsic: ``name``, ``desc`` and ``impl`` (PrimFuncs).

    Register with :meth:`register`; look up with :meth:`get`.
    """

    name: str
    desc: PrimFunc
    impl: PrimFunc

    @staticmethod
    def register(name: str, desc: PrimFunc | str, impl: PrimFunc | str, *,
                 override: bool = False) -> TensorIntrin:
        """Check ``desc`` and ``impl`` (PrimFuncs, or TVMScript text) and register them
        under ``name``; returns the intrinsic.

        Registering the same name again with the same functions is allowed; with
        different ones it is refused unless ``override=True``.

        Raises :class:`TensorIntrinError` when the functions do not fit: a different
        number of buffer parameters, a parameter whose shape or dtype differs between
        them, a description that is not one block under its loops, or an implementation
        that does not access one of its parameters.

        >>> import workbench as wb
        >>> try:
        ...     wb.TensorIntrin.register("bad", wb.workloads.matmul(4, 4, 4),
        ...                              wb.workloads.matmul(4, 4, 8))
        ... except TensorIntrinError as e:
        ...     print(str(e)[:59])
        tensor intrinsic 'bad': parameter 0 is A of shape (4, 4) in
        """
        if not isinstance(name, str) or not name:
            raise TensorIntrinError(f"a tensor intrinsic needs a name, got {name!r}")
        d = _as_func(name, "description", desc)
        m = _as_func(name, "implementation", impl)
        _check(name, d, m)
        intrin = TensorIntrin(name, d, m)
        with _LOCK:
            old = _REGISTRY.get(name)
            if old is not None and not override and not (
                structural_equal(old.desc, d) and structural_equal(old.impl, m)
            ):
                raise TensorIntrinError(
                    f"tensor intrinsic {name!r} is already registered with a different "
                    "description or implementation; pass override=True to replace it"
                )
            if old is not None and not override:
                return old
            _REGISTRY[name] = intrin
        return intrin

    @staticmethod
    def get(name: str, allow_missing: bool = False) -> TensorIntrin | None:
        """The intrinsic registered as ``name``; a missing one raises
        :class:`TensorIntrinNotFoundError` (listing the registered names), or gives None
        with ``allow_missing=True``.

        >>> import workbench as wb
        >>> wb.TensorIntrin.get("no_such_intrin", allow_missing=True) is None
        True
        """
        _load_builtins()
        with _LOCK:
            intrin = _REGISTRY.get(name)
            known = sorted(_REGISTRY)
        if intrin is None and not allow_missing:
            raise TensorIntrinNotFoundError(
                f"no tensor intrinsic named {name!r}; registered: "
                f"{', '.join(known) if known else 'none'}"
            )
        return intrin

    @staticmethod
    def names() -> list[str]:
        """The registered names, sorted.

        >>> import workbench as wb
        >>> isinstance(wb.TensorIntrin.names(), list)
        True
        """
        _load_builtins()
        with _LOCK:
            return sorted(_REGISTRY)

    def __repr__(self) -> str:
        return f"TensorIntrin({self.name!r})"


_REGISTRY: dict[str, TensorIntrin] = {}
_BUILTINS = {"loaded": False}


def _load_builtins() -> None:
    """Register the shipped intrinsics (:mod:`.cpu`'s x86 micro-kernels, :mod:`.cuda`'s
    wmma / mma.sync fragments) the first time the registry is asked for a name; each
    registration parses two small TVMScript functions (tens of ms in all)."""
    if _BUILTINS["loaded"]:
        return
    _BUILTINS["loaded"] = True
    from . import cpu, cuda

    cpu.register_all()
    cuda.register_all()


def __getattr__(name: str):
    """``wb.tensor_intrin.cpu`` / ``.cuda`` are imported on first use."""
    if name in ("cpu", "cuda"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
_LOCK = threading.Lock()


# -- checks ---------------------------------------------------------------------------------


def _as_func(name: str, role: str, x: PrimFunc | str) -> PrimFunc:
    if isinstance(x, str):
        from ..script import from_script

        x = from_script(x)
    if isinstance(x, IRModule):
        if len(x) != 1:
            raise TensorIntrinError(f"tensor intrinsic {name!r}: the {role} is a module of "
                                    f"{len(x)} functions; give one function")
        x = x[x.names[0]]
    if not isinstance(x, PrimFunc):
        raise TensorIntrinError(f"tensor intrinsic {name!r}: the {role} must be a PrimFunc "
                                f"or TVMScript text, got {type(x).__name__}")
    return x


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _same_dim(a, b) -> bool:
    a, b = (x.value if isinstance(x, IntImm) else x for x in (a, b))
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    diff = simplify(a - b)
    return getattr(diff, "value", None) == 0


def desc_parts(desc: PrimFunc) -> tuple[list[For], Block] | None:
    """The loops of a description's root block and the one block under them, or None
    when its root does not hold exactly that (a perfect loop nest around one block with
    no block inside it)."""
    loops: list[For] = []
    s: Stmt = desc.body.body
    while isinstance(s, For):
        loops.append(s)
        s = s.body
    if not isinstance(s, Block):
        return None
    from ..ir.analysis import iter_blocks

    if any(b is not s for b in iter_blocks(s)):
        return None
    return loops, s


def impl_regions(impl: PrimFunc) -> dict[Buffer, BufferRegion]:
    """The region of each parameter the implementation's root block accesses (its reads
    first, as TVM takes them)."""
    out: dict[Buffer, BufferRegion] = {}
    root = impl.body
    for r in tuple(root.reads or ()) + tuple(root.writes or ()):
        out.setdefault(r.buffer, r)
    return out


def _check(name: str, desc: PrimFunc, impl: PrimFunc) -> None:
    where = f"tensor intrinsic {name!r}"
    if len(desc.params) != len(impl.params):
        raise TensorIntrinError(
            f"{where}: the description has {len(desc.params)} buffer parameters but the "
            f"implementation has {len(impl.params)}"
        )
    for k, (d, m) in enumerate(zip(desc.params, impl.params, strict=True)):
        same_shape = len(d.shape) == len(m.shape) and all(
            _same_dim(a, b) for a, b in zip(d.shape, m.shape, strict=True))
        if not same_shape:
            raise TensorIntrinError(
                f"{where}: parameter {k} is {d.name} of shape {_shape_text(d.shape)} in the "
                f"description but {m.name} of shape {_shape_text(m.shape)} in the "
                "implementation"
            )
        if d.dtype != m.dtype:
            raise TensorIntrinError(
                f"{where}: parameter {k} is {d.name} of dtype {d.dtype} in the description "
                f"but {m.name} of dtype {m.dtype} in the implementation"
            )
    if desc_parts(desc) is None:
        raise TensorIntrinError(
            f"{where}: the description must hold exactly one block under its loops (a "
            "perfect loop nest around one block with no block inside)"
        )
    regions = impl_regions(impl)
    for m in impl.params:
        if m not in regions:
            raise TensorIntrinError(
                f"{where}: the implementation does not access its parameter {m.name} "
                "(give its root block T.reads/T.writes of every parameter)"
            )
        ext = [e for _, e in regions[m].region]
        if len(ext) != m.ndim or not all(
            isinstance(e, PrimExpr) and _same_dim(e, s) for e, s in zip(ext, m.shape)
        ):
            raise TensorIntrinError(
                f"{where}: the implementation accesses {m.name}{_shape_text(m.shape)} on a "
                "region that is not the whole buffer"
            )
