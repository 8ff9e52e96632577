"""The editor's actions beyond the classic set: layout, padding, partition and
tensorization primitives, each described once as data.

An :class:`ActionSpec` says which kind of tree item the action takes (a loop or a
block), when it is offered, the arguments it asks for (:class:`Param`: a text box, a
choice, a number or a checkbox) and how it is applied to a schedule. The model
(:class:`~workbench.widgets.editor_model.EditorModel`) applies them like its own
actions; the view builds their argument widgets from the params. Typed text (index
maps, padding sizes, factors) is read with :mod:`ast`, never run.

>>> from workbench.widgets.editor_actions import EXTRA_ACTIONS
>>> spec = EXTRA_ACTIONS["transform_layout"]
>>> spec.targets, [p.name for p in spec.params]
(('block',), ['buffer', 'index_map', 'pad_value'])
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..ir import Block
from ..ir.analysis import find_block, infer_regions

if TYPE_CHECKING:  # pragma: no cover
    from ..schedule import Schedule
    from .editor_model import EditorModel, TreeItem

__all__ = ["EXTRA_ACTIONS", "ActionSpec", "Param", "parse_int_list", "parse_number"]

DTYPES = ("float32", "float16", "float64", "int32", "int16", "int8", "uint8", "int64")


@dataclass(frozen=True)
class Param:
    """One argument of an action.

    ``kind`` is ``"text"`` (typed; ``placeholder`` shows an example), ``"choice"``
    (``choices(model, item)`` lists ``(label, value)`` pairs), ``"int"`` or ``"bool"``.
    ``optional`` text may be left empty (the value is then ``None``).
    """

    name: str
    kind: str
    label: str
    placeholder: str = ""
    default: Any = None
    choices: Callable[[EditorModel, TreeItem], list[tuple[str, Any]]] | None = None
    optional: bool = False


@dataclass(frozen=True)
class ActionSpec:
    """An editor action: ``run(model, sch, item, values)`` applies it to ``sch`` (a
    copy of the current schedule) and returns ``(description, select)``: the history
    line and what to select afterwards (a block name, a loop variable or None)."""

    name: str
    targets: tuple[str, ...]  # ("loop",), ("block",) or both
    help: str
    params: tuple[Param, ...]
    run: Callable[[EditorModel, Schedule, TreeItem, dict[str, Any]], tuple[str, Any]]
    available: Callable[[EditorModel, TreeItem], bool] = lambda model, item: True


# ----------------------------------------------------------------- parsing
def _literal(action: str, what: str, text: str, example: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        from .editor_model import EditorError

        raise EditorError(f"{action}: cannot read {what} {text!r}: write e.g. {example}") from e


def parse_int_list(action: str, what: str, text: str, example: str = "32, 32") -> list[int]:
    """``"32, 32"`` or ``"[32, 32]"`` -> ``[32, 32]`` (literals only, never run).

    >>> parse_int_list("pad_einsum", "padding", "[32, 16, 1]")
    [32, 16, 1]
    """
    from .editor_model import EditorError

    text = text.strip()
    value = _literal(action, what, text if text.startswith("[") else f"[{text}]", example)
    if not isinstance(value, list) or not value or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise EditorError(f"{action}: {what} must be a list of integers, got {text!r}")
    return value


def parse_number(action: str, what: str, text: str) -> int | float | None:
    """An optional number typed in a box: ``""`` -> None, ``"0"`` -> 0, ``"-1.5"`` ->
    -1.5 (literals only).

    >>> parse_number("transform_layout", "pad value", ""), parse_number("x", "y", "0.0")
    (None, 0.0)
    """
    from .editor_model import EditorError

    text = text.strip()
    if not text:
        return None
    value = _literal(action, what, text, "0.0")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EditorError(f"{action}: {what} must be a number, got {text!r}")
    return value


# ----------------------------------------------------------------- choices
def _block_node(model: EditorModel, item: TreeItem) -> Block | None:
    return find_block(model.func, item.name) if item.kind == "block" else None


def _buffer_choices(which: str) -> Callable[[EditorModel, TreeItem], list[tuple[str, Any]]]:
    """Buffers of the selected block as ``("read A", ("read", 0))`` pairs (``which``:
    ``"read"``, ``"write"`` or ``"any"``)."""

    def choices(model: EditorModel, item: TreeItem) -> list[tuple[str, Any]]:
        node = _block_node(model, item)
        if node is None:
            return []
        reads, writes = infer_regions(node)
        out: list[tuple[str, Any]] = []
        if which in ("read", "any"):
            out += [(f"read {r.buffer.name}", ("read", i)) for i, r in enumerate(reads)]
        if which in ("write", "any"):
            out += [(f"write {w.buffer.name}", ("write", i)) for i, w in enumerate(writes)]
        return out

    return choices


def _index_choices(which: str) -> Callable[[EditorModel, TreeItem], list[tuple[str, Any]]]:
    """Like :func:`_buffer_choices` for one side, the value being the buffer index."""
    pairs = _buffer_choices(which)

    def choices(model: EditorModel, item: TreeItem) -> list[tuple[str, Any]]:
        return [(label, value[1]) for label, value in pairs(model, item)]

    return choices


def _loops_above(model: EditorModel, item: TreeItem) -> list[tuple[str, Any]]:
    above = model._loops_above(item.name)
    return [(t.name, t.var) for t in model.tree()
            if t.kind == "loop" and any(t.var is v for v in above)]


def _consumers(model: EditorModel, item: TreeItem) -> list[tuple[str, Any]]:
    sch = model.schedule.copy()
    try:
        rvs = sch.get_consumers(model._block_rv(sch, item.name))
    except Exception:  # noqa: BLE001 - a block with no scope simply has no consumers
        return []
    return [(sch.get(rv).name, sch.get(rv).name) for rv in rvs]  # type: ignore[union-attr]


def _intrin_choices(model: EditorModel, item: TreeItem) -> list[tuple[str, Any]]:
    return [(n, n) for n in _intrin_names()]


def _intrin_names() -> list[str]:
    try:
        from ..tensor_intrin import TensorIntrin
    except ImportError:  # pragma: no cover - the tensorize machinery is part of the package
        return []
    return list(TensorIntrin.names())


def _has_loops(model: EditorModel, item: TreeItem) -> bool:
    """A block with loops above it (decompose_padding needs one to go above; whether
    the block pads is for the primitive to say)."""
    return item.kind == "block" and bool(model._loops_above(item.name))


def _has_consumer(model: EditorModel, item: TreeItem) -> bool:
    return bool(_consumers(model, item))


# ----------------------------------------------------------------- runners
def _block_rv(model: EditorModel, sch: Schedule, item: TreeItem) -> Any:
    return model._block_rv(sch, item.name)


def _loop_rv(model: EditorModel, sch: Schedule, item: TreeItem) -> Any:
    return model._loop_rv(sch, item)


def _text(action: str, values: dict, name: str, what: str) -> str:
    from .editor_model import EditorError

    text = str(values.get(name) or "").strip()
    if not text:
        raise EditorError(f"{action}: type the {what}")
    return text


def _label(model: EditorModel, item: TreeItem, buffer: Any) -> str:
    """``("read", 1)`` -> ``"read B"`` (the name of that buffer of the block)."""
    if not isinstance(buffer, tuple):
        return str(buffer)
    for label, value in _buffer_choices(buffer[0])(model, item):
        if value == tuple(buffer):
            return label
    return f"{buffer[0]} buffer {buffer[1]}"


def _run_transform_layout(model, sch, item, v):
    index_map = _text("transform_layout", v, "index_map", "index map")
    pad = v.get("pad_value")
    pad = parse_number("transform_layout", "pad value", pad) if isinstance(pad, str) else pad
    sch.transform_layout(_block_rv(model, sch, item), v["buffer"], index_map, pad_value=pad)
    label = _label(model, item, v["buffer"])
    return f"transform_layout {item.name} {label} by {index_map}", item.name


def _run_transform_block_layout(model, sch, item, v):
    index_map = _text("transform_block_layout", v, "index_map", "index map")
    sch.transform_block_layout(_block_rv(model, sch, item), index_map)
    return f"transform_block_layout {item.name} by {index_map}", item.name


def _run_reindex(model, sch, item, v):
    new = sch.reindex(_block_rv(model, sch, item), v["buffer"])
    return f"reindex {item.name} {_label(model, item, v['buffer'])}", sch.get(new).name


def _run_pad_einsum(model, sch, item, v):
    padding = v["padding"]
    if isinstance(padding, str):
        padding = parse_int_list("pad_einsum", "padding", padding, "32, 32, 32")
    sch.pad_einsum(_block_rv(model, sch, item), list(padding))
    return f"pad_einsum {item.name} to multiples of {list(padding)}", item.name


def _run_decompose_padding(model, sch, item, v):
    lp = model._find_loop("decompose_padding", v["loop"], item.name)
    new = sch.decompose_padding(_block_rv(model, sch, item), _loop_rv(model, sch, lp))
    return f"decompose_padding {item.name} at {lp.name}", sch.get(new).name


def _run_rolling_buffer(model, sch, item, v):
    sch.rolling_buffer(_block_rv(model, sch, item), int(v["buffer"]))
    return f"rolling_buffer {item.name} {_label(model, item, ('write', v['buffer']))}", item.name


def _run_fuse_epilogue(model, sch, item, v):
    epilogue = v["epilogue"]
    sch.fuse_reduction_epilogue(_block_rv(model, sch, item),
                                model._block_rv(sch, epilogue))
    return f"fuse_reduction_epilogue {item.name} with {epilogue}", item.name


def _run_set_dtype(model, sch, item, v):
    sch.unsafe_set_dtype(_block_rv(model, sch, item), int(v["buffer"]), v["dtype"])
    return f"unsafe_set_dtype {item.name} write buffer {v['buffer']} to {v['dtype']}", item.name


def _run_storage_align(model, sch, item, v):
    sch.storage_align(_block_rv(model, sch, item), int(v["buffer"]), int(v["axis"]),
                      int(v["factor"]), int(v["offset"]))
    return (f"storage_align {item.name} write buffer {v['buffer']} axis {v['axis']} "
            f"to {v['factor']}k+{v['offset']}", item.name)


def _run_tensorize(model, sch, item, v):
    rv = _loop_rv(model, sch, item) if item.kind == "loop" else _block_rv(model, sch, item)
    sch.tensorize(rv, v["intrin"])
    return f"tensorize {item.name} with {v['intrin']}", None


def _run_tile_with_intrin(model, sch, item, v):
    outer = sch.tile_with_tensor_intrin(_block_rv(model, sch, item), v["intrin"])
    select = sch.get(outer).loop_var if outer is not None else item.name
    return f"tile_with_tensor_intrin {item.name} for {v['intrin']}", select


def _run_loop_partition(model, sch, item, v):
    from .editor_model import parse_factors

    factors = v["factors"]
    if isinstance(factors, str):
        factors = parse_factors(factors)
    outs = sch.loop_partition(_loop_rv(model, sch, item), list(factors))
    return f"loop_partition {item.name} into {list(factors)}", sch.get(outs[0]).loop_var


def _run_blockize(model, sch, item, v):
    new = sch.blockize(_loop_rv(model, sch, item))
    return f"blockize {item.name}", sch.get(new).name


_INDEX_MAP = Param("index_map", "text", "index map",
                   placeholder="lambda i, j: (i // 16, j // 16, i % 16, j % 16)")
_INTRIN = Param("intrin", "choice", "intrinsic", choices=_intrin_choices)


def _has_intrins(model: EditorModel, item: TreeItem) -> bool:
    return bool(_intrin_names())


EXTRA_ACTIONS: dict[str, ActionSpec] = {s.name: s for s in (
    ActionSpec("loop_partition", ("loop",),
               "cut the loop into consecutive loops over the given pieces (None: the rest)",
               (Param("factors", "text", "pieces", placeholder="16, None"),),
               _run_loop_partition),
    ActionSpec("blockize", ("loop",), "make the loop's subtree one outer block",
               (), _run_blockize),
    ActionSpec("tensorize", ("loop", "block"),
               "replace the loop's subtree (or the block) by a registered tensor intrinsic",
               (_INTRIN,), _run_tensorize, _has_intrins),
    ActionSpec("transform_layout", ("block",),
               "store a buffer in another layout: every access goes through the index map",
               (Param("buffer", "choice", "buffer", choices=_buffer_choices("any")),
                _INDEX_MAP,
                Param("pad_value", "text", "pad value", placeholder="(none) or 0.0",
                      optional=True)),
               _run_transform_layout),
    ActionSpec("transform_block_layout", ("block",),
               "remap the block's iteration space by an index map of its iter vars",
               (Param("index_map", "text", "index map", placeholder="lambda i, j: (j, i)"),),
               _run_transform_block_layout),
    ActionSpec("reindex", ("block",),
               "copy a buffer into one indexed exactly by the block's iter vars",
               (Param("buffer", "choice", "buffer", choices=_buffer_choices("any")),),
               _run_reindex),
    ActionSpec("pad_einsum", ("block",),
               "pad the block's iteration space to multiples of the given sizes",
               (Param("padding", "text", "padding", placeholder="32, 32, 32"),),
               _run_pad_einsum),
    ActionSpec("decompose_padding", ("block",),
               "split a padding producer into a fill and an in-bounds copy above a loop",
               (Param("loop", "choice", "above loop", choices=_loops_above),),
               _run_decompose_padding, _has_loops),
    ActionSpec("rolling_buffer", ("block",),
               "keep only a sliding window of the written buffer along its rolling loop",
               (Param("buffer", "choice", "buffer", choices=_index_choices("write")),),
               _run_rolling_buffer),
    ActionSpec("fuse_reduction_epilogue", ("block",),
               "fold an elementwise epilogue (bias, clipping, relu) into the reduction",
               (Param("epilogue", "choice", "epilogue", choices=_consumers),),
               _run_fuse_epilogue, _has_consumer),
    ActionSpec("unsafe_set_dtype", ("block",),
               "change the element type of an intermediate buffer the block writes",
               (Param("buffer", "choice", "buffer", choices=_index_choices("write")),
                Param("dtype", "choice", "dtype",
                      choices=lambda model, item: [(d, d) for d in DTYPES])),
               _run_set_dtype),
    ActionSpec("storage_align", ("block",),
               "pad a written buffer's rows so a stride is factor*k + offset (bank conflicts)",
               (Param("buffer", "choice", "buffer", choices=_index_choices("write")),
                Param("axis", "int", "axis", default=0),
                Param("factor", "int", "factor", default=32),
                Param("offset", "int", "offset", default=1)),
               _run_storage_align),
    ActionSpec("tile_with_tensor_intrin", ("block",),
               "tile the block's loops to a tensor intrinsic's shape (then tensorize)",
               (_INTRIN,), _run_tile_with_intrin, _has_intrins),
)}
