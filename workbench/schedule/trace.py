"""Traces: the recorded list of schedule instructions, printable and replayable.

A trace prints as TVM prints one (``def apply_trace(sch: tir.Schedule) -> None:``,
two-space indent, keyword arguments) and serialises to TVM's JSON shape::

    [[[kind, inputs, attrs, outputs], ...], [[inst_index, decision], ...]]

Loading a trace (JSON or the printed Python text) never executes code: JSON is
parsed with :mod:`json`, Python text with :mod:`ast`, and only the known
instruction kinds are accepted.
"""

from __future__ import annotations

import ast
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ScheduleError, TraceError
from .limits import (
    UntrustedInputError,
    check_json_value,
    decode_text,
    loads_json,
    read_text,
    trace_location,
)

if TYPE_CHECKING:  # pragma: no cover
    from .schedule import Schedule

_ids = itertools.count()


class RV:
    """A symbolic handle (random variable in TVM's words) into a schedule."""

    prefix = "x"
    __slots__ = ("uid",)

    def __init__(self) -> None:
        self.uid = next(_ids)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uid})"


class BlockRV(RV):
    """Handle to a block; resolved by name, so it survives loop transformations."""

    prefix = "b"
    __slots__ = ()


class LoopRV(RV):
    """Handle to a loop; invalid once a primitive removes that loop (split, fuse)."""

    prefix = "l"
    __slots__ = ()


class ExprRV(RV):
    """Handle to a sampled integer (a tile size...); usable as a split factor."""

    prefix = "v"
    __slots__ = ()


class NoneRV(ExprRV):
    """An output TVM leaves unnamed (``_`` in the trace): the unknown outer tile that
    ``sample_perfect_tile`` gives a loop of symbolic extent, which the schedule returns
    as ``None`` (a split factor to infer)."""

    prefix = "_"
    __slots__ = ()


# ---------------------------------------------------------------------------
# instruction kinds


@dataclass(frozen=True)
class Kind:
    """How one instruction kind maps onto a Schedule method and TVM's JSON.

    ``inputs`` are argument names stored as instruction inputs (``"*name"`` for a
    variadic list, flattened in JSON); ``attrs`` are stored as attributes;
    ``order`` is the printing order; ``positional`` names printed without keyword.
    """

    name: str
    method: str
    inputs: tuple[str, ...] = ()
    attrs: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    outputs: str = "none"  # "none" | "single" | "list"
    positional: tuple[str, ...] = ()
    tirx_method: str | None = None
    bool_attrs: tuple[str, ...] = ()
    sampling: bool = False  # takes a ``decision`` (sample_* instructions)
    # arguments TVM leaves out of the printed call when they hold this (empty) value
    omit_empty: tuple[str, ...] = ()
    # (trace name, method parameter) where the Schedule method names an argument
    # differently from TVM's printed trace (``get_output_blocks(block=...)``)
    call_names: tuple[tuple[str, str], ...] = ()
    # where the method's arguments are not TVM's inputs/attrs one for one (``reindex``'s
    # ``buffer=("read", 0)`` is the attrs buffer_index, buffer_index_type): ``to_call``
    # maps the instruction's arguments to the method's keyword arguments (printed in
    # trace text, passed on replay; ``order`` names them), ``from_call`` maps them back
    to_call: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    from_call: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # attrs holding an IndexMap or None (``transform_layout``'s ``pad_value``): TVM
    # writes them as the index map's JSON text, indented by 2
    index_map_attrs: tuple[str, ...] = ()

    @property
    def print_order(self) -> tuple[str, ...]:
        return self.order or tuple(n.lstrip("*") for n in self.inputs) + self.attrs


KINDS: dict[str, Kind] = {}
ALIASES = {"GetSBlock": "GetBlock", "GetChildSBlocks": "GetChildBlocks"}


def register_kind(kind: Kind) -> Kind:
    KINDS[kind.name] = kind
    return kind


for _k in (
    Kind(
        "GetBlock",
        "get_block",
        attrs=("name", "func_name"),
        outputs="single",
        tirx_method="get_sblock",
    ),
    Kind("GetLoops", "get_loops", inputs=("block",), outputs="list"),
    Kind(
        "GetChildBlocks",
        "get_child_blocks",
        inputs=("block_or_loop",),
        outputs="list",
        tirx_method="get_child_sblocks",
    ),
    Kind("GetProducers", "get_producers", inputs=("block",), outputs="list"),
    Kind("GetConsumers", "get_consumers", inputs=("block",), outputs="list"),
    Kind(
        "Split",
        "split",
        inputs=("loop", "*factors"),
        attrs=("preserve_unit_iters", "disable_predication"),
        outputs="list",
        bool_attrs=("preserve_unit_iters", "disable_predication"),
    ),
    Kind(
        "Fuse",
        "fuse",
        inputs=("*loops",),
        attrs=("preserve_unit_iters",),
        outputs="single",
        positional=("loops",),
        bool_attrs=("preserve_unit_iters",),
    ),
    Kind("Reorder", "reorder", inputs=("*ordered_loops",), positional=("ordered_loops",)),
    Kind("Merge", "merge", inputs=("*loops",), outputs="single", positional=("loops",)),
    Kind("Parallel", "parallel", inputs=("loop",)),
    Kind("Vectorize", "vectorize", inputs=("loop",)),
    Kind("Unroll", "unroll", inputs=("loop",)),
    Kind(
        "Annotate",
        "annotate",
        inputs=("block_or_loop", "ann_val"),
        attrs=("ann_key",),
        order=("block_or_loop", "ann_key", "ann_val"),
    ),
    Kind("Unannotate", "unannotate", inputs=("block_or_loop",), attrs=("ann_key",)),
):
    register_kind(_k)

# compute location ------------------------------------------------------------
for _k in (
    Kind("ComputeAt", "compute_at", inputs=("block", "loop"),
         attrs=("preserve_unit_loops", "index"), bool_attrs=("preserve_unit_loops",)),
    Kind("ReverseComputeAt", "reverse_compute_at", inputs=("block", "loop"),
         attrs=("preserve_unit_loops", "index"), bool_attrs=("preserve_unit_loops",)),
    Kind("ComputeInline", "compute_inline", inputs=("block",)),
    Kind("ReverseComputeInline", "reverse_compute_inline", inputs=("block",)),
):
    register_kind(_k)

# caching and storage ---------------------------------------------------------
# As TVM's InstructionKinds: CacheRead/CacheWrite inputs [block, [consumer_blocks]]
# (the list nested in JSON, empty when none was given), attrs [index, scope].
register_kind(
    Kind(
        "CacheRead",
        "cache_read",
        inputs=("block", "consumer_blocks"),
        attrs=("read_buffer_index", "storage_scope"),
        order=("block", "read_buffer_index", "storage_scope", "consumer_blocks"),
        omit_empty=("consumer_blocks",),
        outputs="single",
    )
)
register_kind(
    Kind(
        "CacheWrite",
        "cache_write",
        inputs=("block", "consumer_blocks"),
        attrs=("write_buffer_index", "storage_scope"),
        order=("block", "write_buffer_index", "storage_scope", "consumer_blocks"),
        omit_empty=("consumer_blocks",),
        outputs="single",
    )
)
register_kind(
    Kind("SetScope", "set_scope", inputs=("block",), attrs=("buffer_index", "storage_scope"))
)
register_kind(
    Kind(
        "StorageAlign",
        "storage_align",
        inputs=("block",),
        attrs=("buffer_index", "axis", "factor", "offset"),
    )
)

# reductions and blocks -------------------------------------------------------
register_kind(
    Kind("DecomposeReduction", "decompose_reduction", inputs=("block", "loop"), outputs="single")
)
register_kind(
    Kind("RFactor", "rfactor", inputs=("loop",), attrs=("factor_axis",), outputs="single")
)
register_kind(
    Kind(
        "Blockize",
        "blockize",
        inputs=("target",),
        attrs=("preserve_unit_iters",),
        outputs="single",
        bool_attrs=("preserve_unit_iters",),
    )
)
register_kind(Kind("AddUnitLoop", "add_unit_loop", inputs=("block_or_loop",), outputs="single"))
register_kind(
    Kind(
        "GetOutputBlocks",
        "get_output_blocks",
        inputs=("block",),
        outputs="list",
        call_names=(("block", "scope_block"),),
    )
)
register_kind(Kind("ReorderBlockIterVar", "reorder_block_iter_var", inputs=("block", "new_order")))

# thread binding and sampling -------------------------------------------------
register_kind(Kind("Bind", "bind", inputs=("loop",), attrs=("thread_axis",)))
register_kind(
    Kind(
        "SamplePerfectTile",
        "sample_perfect_tile",
        inputs=("loop",),
        attrs=("n", "max_innermost_factor"),
        outputs="list",
        sampling=True,
    )
)
register_kind(
    Kind(
        "SampleCategorical",
        "sample_categorical",
        attrs=("candidates", "probs"),
        outputs="single",
        sampling=True,
    )
)
register_kind(
    Kind(
        "SampleComputeLocation",
        "sample_compute_location",
        inputs=("block",),
        outputs="single",
        sampling=True,
    )
)



@dataclass(frozen=True)
class Instruction:
    """One recorded call: ``kind`` with named arguments and output handles."""

    kind: str
    args: tuple[tuple[str, Any], ...]  # (argument name, value) in the kind's order
    outputs: tuple[RV, ...] = ()
    decision: Any = None

    @property
    def spec(self) -> Kind:
        return KINDS[self.kind]

    def arg(self, name: str) -> Any:
        for n, v in self.args:
            if n == name:
                return v
        raise KeyError(name)


# ---------------------------------------------------------------------------
# printing


class LambdaText(str):
    """A ``lambda`` argument of trace text (an index map, ``annotate_buffer_access``'s
    ``gen_new_ranges``), kept as its source text: never evaluated, and printed back
    as written, without quotes."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


class PyTuple(tuple):
    """A tuple argument that trace text prints as a Python tuple (``("read", 0)``), as
    TVM prints ``reindex``'s ``buffer``; other sequences print as lists."""

    __slots__ = ()


def _py_value(v: Any, names: dict[RV, str]) -> str:
    if isinstance(v, RV):
        return names.get(v, "?")
    if isinstance(v, LambdaText):
        return str(v)
    if type(v).__name__ == "IndexMap" and hasattr(v, "as_python"):
        return v.as_python()  # TVM's lambda text
    if isinstance(v, PyTuple):
        inner = ", ".join(_py_value(x, names) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, str):
        # a double-quoted Python literal that reads back exactly (TVM prints the raw text
        # between quotes, which is not valid Python once it holds a quote or a newline)
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_py_value(x, names) for x in v) + "]"
    if isinstance(v, dict):  # an annotation value; keys sorted, as TVM prints a Map
        items = (f"{_py_value(k, names)}: {_py_value(x, names)}" for k, x in sorted(v.items()))
        return "{" + ", ".join(items) + "}"
    return repr(v)


def _assign_names(insts: Sequence[Instruction]) -> dict[RV, str]:
    names: dict[RV, str] = {}
    counter = 0
    for inst in insts:
        for out in inst.outputs:
            names[out] = "_" if isinstance(out, NoneRV) else f"{out.prefix}{counter}"
            counter += 1
    return names


def inst_to_python(inst: Instruction, names: dict[RV, str], syntax: str = "classic") -> str:
    spec = inst.spec
    method = spec.tirx_method if (syntax == "tirx" and spec.tirx_method) else spec.method
    args = dict(inst.args)
    if spec.to_call is not None:
        args = spec.to_call(args)
    parts = []
    for name in spec.print_order:
        value = args[name]
        if name in spec.omit_empty and not value:
            continue
        if name in spec.positional:
            parts.extend(_py_value(x, names) for x in value)
        else:
            parts.append(f"{name}={_py_value(value, names)}")
    if inst.decision is not None:
        parts.append(f"decision={_py_value(inst.decision, names)}")
    call = f"sch.{method}({', '.join(parts)})"
    outs = [names[o] for o in inst.outputs]
    if spec.outputs == "single":
        return f"{outs[0]} = {call}"
    if spec.outputs == "list" and outs:
        lhs = ", ".join(outs) + ("," if len(outs) == 1 else "")
        return f"{lhs} = {call}"
    return call


# ---------------------------------------------------------------------------
# JSON


def _json_input(v: Any, names: dict[RV, str]) -> Any:
    if v is None:
        return "None"  # as TVM writes it
    if isinstance(v, RV):
        return names[v]
    if isinstance(v, str):
        # TVM's rule: a string input is its text between two added double quotes, with
        # nothing escaped (so it cannot be taken for a handle name); see _json_in
        return '"' + v + '"'
    if isinstance(v, (list, tuple)):
        return [_json_input(x, names) for x in v]
    if isinstance(v, dict):
        # TVM writes a dict input as it is: its strings are not quoted (see _json_in)
        return {k: list(x) if isinstance(x, tuple) else x for k, x in v.items()}
    from ..ir.index_map import IndexMap

    if isinstance(v, IndexMap):
        return v.to_json()  # TVM's node-graph JSON, compact, as a string (see _json_in)
    return v


def _json_attr(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, tuple):
        return list(v)
    return v


class Trace:
    """An immutable sequence of instructions.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> _ = sch.split(j, factors=[None, 4])
    >>> print(sch.trace)
    # from tvm import tir
    def apply_trace(sch: tir.Schedule) -> None:
      b0 = sch.get_block(name="C", func_name="matmul")
      l1, l2, l3 = sch.get_loops(block=b0)
      l4, l5 = sch.split(loop=l2, factors=[None, 4], preserve_unit_iters=True, disable_predication=False)
    """  # noqa: E501

    def __init__(self, insts: Sequence[Instruction] = ()):
        self.insts: tuple[Instruction, ...] = tuple(insts)

    def __len__(self) -> int:
        return len(self.insts)

    def __iter__(self):
        return iter(self.insts)

    def __getitem__(self, i):
        return self.insts[i]

    def append(self, inst: Instruction) -> Trace:
        return Trace(self.insts + (inst,))

    # -- printing
    def script(self, syntax: str = "classic") -> str:
        """Python text of the trace, as TVM prints it."""
        names = _assign_names(self.insts)
        mod = "s_tir" if syntax == "tirx" else "tir"
        lines = [f"# from tvm import {mod}", f"def apply_trace(sch: {mod}.Schedule) -> None:"]
        for inst in self.insts:
            lines.append("  " + inst_to_python(inst, names, syntax))
        if not self.insts:
            lines.append("  pass")
        return "\n".join(lines)

    def lines(self, syntax: str = "classic") -> list[str]:
        """One line of Python per instruction (no header), for step-by-step views."""
        names = _assign_names(self.insts)
        return [inst_to_python(i, names, syntax) for i in self.insts]

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return self.script()

    def _repr_html_(self) -> str:
        from ..ir.printer import highlight_html

        return highlight_html(self.script())

    def show(self, syntax: str = "classic") -> None:
        from ..ir.printer import show

        show(self.script(syntax))

    # -- JSON
    def as_json_obj(self, syntax: str = "classic") -> list:
        """TVM's JSON shape as Python lists: ``[[insts], [decisions]]``.

        ``syntax="tirx"`` uses the kind names of TVM >= 0.24 (``GetSBlock``...)."""
        names = _assign_names(self.insts)
        rename = {v: k for k, v in ALIASES.items()} if syntax == "tirx" else {}
        insts, decisions = [], []
        for idx, inst in enumerate(self.insts):
            spec = inst.spec
            args = dict(inst.args)
            inputs: list[Any] = []
            for n in spec.inputs:
                if n.startswith("*"):
                    inputs.extend(_json_input(x, names) for x in args[n[1:]])
                else:
                    inputs.append(_json_input(args[n], names))
            attrs = [
                (None if args[n] is None else args[n].to_json(indent=2))
                if n in spec.index_map_attrs else _json_attr(args[n])
                for n in spec.attrs
            ]
            kind = rename.get(spec.name, spec.name)
            insts.append([kind, inputs, attrs, [names[o] for o in inst.outputs]])
            if inst.decision is not None:
                decisions.append([idx, _json_attr(inst.decision)])
        return [insts, decisions]

    def as_json(self, indent: int | None = None, syntax: str = "classic") -> str:
        """The trace as JSON text (TVM's shape); load it back with :meth:`from_json`.
        ``syntax="tirx"`` writes TVM >= 0.24 kind names, which that TVM replays."""
        return json.dumps(self.as_json_obj(syntax), indent=indent)

    @staticmethod
    def from_json(data: str | bytes | list) -> Trace:
        """Load a trace from JSON text (``str`` or UTF-8 ``bytes``) or the parsed list.
        Accepts TVM's kind names (``GetSBlock`` ...). Raises :class:`TraceError` naming
        the bad step, also for input past the bounds of :mod:`workbench.schedule.limits`
        (nesting, integer size, text size) and for decisions that name no sampling step.

        >>> import workbench as wb
        >>> try:
        ...     wb.Trace.from_json('[[["SampleCategorical", [], [[1, 2], [0.5, 0.5]], '
        ...                        '["v0"]]], [[0, 7]]]')
        ... except wb.TraceError as e:
        ...     print(e)
        load: step 0: decision 7 is not an index into the 2 candidates [1, 2]
        """
        try:
            if isinstance(data, (str, bytes, bytearray)):
                data = loads_json(data)
            else:
                check_json_value(data)
        except UntrustedInputError as e:
            where = trace_location(e.path)
            raise TraceError("load", f"{where + ': ' if where else ''}{e}") from None
        if not (isinstance(data, list) and len(data) in (1, 2) and isinstance(data[0], list)):
            raise TraceError("load", "expected [[instructions], [decisions]]")
        decisions = {}
        if len(data) == 2:
            if not isinstance(data[1], list):
                raise TraceError("load", "the decisions part must be a list of [index, decision]")
            count = len(data[0])
            for n, d in enumerate(data[1]):
                if not (isinstance(d, list) and len(d) == 2 and isinstance(d[0], int)
                        and not isinstance(d[0], bool)):
                    raise TraceError("load", f"decision entry {n}: malformed {d!r} (expected "
                                             "[step, decision])")
                if not 0 <= d[0] < count:
                    raise TraceError("load", f"decision entry {n}: step {d[0]} is out of "
                                             f"range (the trace has {count} step(s))")
                if d[0] in decisions:
                    raise TraceError("load", f"decision entry {n}: a second decision for "
                                             f"step {d[0]}")
                decisions[d[0]] = d[1]
        from .trace_load import inst_from_json

        symbols: dict[str, RV] = {}
        insts = []
        for idx, raw in enumerate(data[0]):
            insts.append(inst_from_json(idx, raw, symbols, decisions.get(idx)))
        return Trace(insts)

    # -- Python text
    @staticmethod
    def from_python(text: str) -> Trace:
        """Parse printed trace text (``def apply_trace(sch): ...``) without running it.

        Only sch.<primitive>(...) calls with literal arguments are accepted, within the
        bounds of :mod:`workbench.schedule.limits`; anything else raises
        :class:`TraceError` naming the step and its line.

        >>> import workbench as wb
        >>> try:
        ...     wb.Trace.from_python('sch.sample_categorical(candidates=[1], probs=[1.0], '
        ...                          'decision=' + "-" * 5000 + '0)')
        ... except wb.TraceError as e:
        ...     print(e)
        load: trace text is not valid Python: nested too deeply (line 1)
        """
        from .trace_load import failing_line, inst_from_ast

        try:
            text = decode_text(text)
        except UntrustedInputError as e:
            raise TraceError("load", f"trace text: {e}") from None
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            raise TraceError("load", f"trace text is not valid Python: {e}") from None
        except (RecursionError, MemoryError, ValueError) as e:
            why = str(e) if isinstance(e, ValueError) else "nested too deeply"
            line = failing_line(text)
            where = f" (line {line})" if line is not None else ""
            raise TraceError("load", f"trace text is not valid Python: {why}{where}") from None
        body = tree.body
        funcs = [n for n in body if isinstance(n, ast.FunctionDef)]
        if funcs:
            if len(body) != 1:
                raise TraceError(
                    "load",
                    "trace text must be a single `def apply_trace(sch)` and nothing else "
                    f"(found {len(body)} top-level statements)",
                )
            body = funcs[0].body
        symbols: dict[str, RV] = {}
        insts = []
        for step, node in enumerate(body):
            if isinstance(node, ast.Pass):
                continue
            insts.append(inst_from_ast(step, node, symbols))
        return Trace(insts)

    # -- files
    def save(self, path: str | Path) -> None:
        """Write the trace as JSON, atomically (see
        :func:`workbench.schedule.atomic.write_text_atomic`): an existing target that is
        not a regular file (a directory, a FIFO, ``/dev/null``) is refused with
        :class:`~workbench.schedule.atomic.NotARegularFileError`; a symbolic link is
        written through; no temporary file is left behind."""
        from .atomic import write_text_atomic

        write_text_atomic(path, self.as_json(indent=None) + "\n", "Trace.save")

    @staticmethod
    def load(path: str | Path) -> Trace:
        """Read a trace saved with :meth:`save` (JSON) or a ``.py`` file of trace text.

        The file must be UTF-8 text of at most ``limits.MAX_TEXT_BYTES``; anything wrong
        with its content raises :class:`TraceError` naming the file (``OSError`` when it
        cannot be read at all)."""
        try:
            text = read_text(path)
        except UntrustedInputError as e:
            raise TraceError("load", f"{path}: {e}") from None
        try:
            if text.lstrip().startswith("["):
                return Trace.from_json(text)
            return Trace.from_python(text)
        except TraceError as e:
            raise TraceError("load", f"{path}: {e.message}") from None

    # -- replay
    def apply_to_schedule(self, sch: Schedule) -> None:
        """Replay every instruction on ``sch`` (recording them in its trace).

        All or nothing: if a step fails, :class:`TraceError` names it and ``sch`` is
        left as it was before the replay.
        """
        work = sch.copy()
        self._replay(work)
        sch._adopt(work)

    def _replay(self, sch: Schedule) -> None:
        for _ in self.replay_iter(sch):
            pass

    def replay_iter(self, sch: Schedule, env: dict[RV, Any] | None = None) -> Iterator[int]:
        """Replay on ``sch`` in place, one instruction at a time, yielding each step's
        index once it is applied (for views that show the IR after every step).

        ``env``, when given, is filled as replay goes: it maps this trace's handles to
        ``sch``'s. A step that fails raises :class:`TraceError` naming it; the steps
        before it stay applied (:meth:`apply_to_schedule` is the all-or-nothing form).

        >>> import workbench as wb
        >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16))
        >>> _ = sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 4])
        >>> fresh = wb.Schedule(wb.workloads.matmul(16, 16, 16))
        >>> [(step, len(fresh.trace)) for step in sch.trace.replay_iter(fresh)]
        [(0, 1), (1, 2), (2, 3)]
        """
        from .trace_load import check_decision

        if env is None:
            env = {}

        def resolve(v: Any) -> Any:
            if isinstance(v, RV):
                if v not in env:
                    raise TraceError("replay", f"handle {v!r} is used before it is defined")
                return env[v]
            if isinstance(v, (list, tuple)):
                return [resolve(x) for x in v]
            return v

        names = _assign_names(self.insts)
        for step, inst in enumerate(self.insts):
            spec = inst.spec
            rename = dict(spec.call_names)
            kwargs = {rename.get(n, n): resolve(v) for n, v in inst.args}
            if spec.to_call is not None:
                kwargs = spec.to_call(kwargs)
            check_decision(step, spec, inst.decision)
            if inst.decision is not None:
                kwargs["decision"] = inst.decision
            method = getattr(sch, spec.method)
            try:
                if spec.positional:
                    pos = kwargs.pop(spec.positional[0])
                    result = method(*pos, **kwargs)
                else:
                    result = method(**kwargs)
            except ScheduleError as e:
                text = inst_to_python(inst, names)
                raise TraceError(
                    spec.method,
                    f"trace step {step} `{text}` failed: {e}",
                    e.func,
                    e.loops,
                    e.blocks,
                ) from e
            outs = [] if result is None else (list(result) if spec.outputs == "list" else [result])
            if len(outs) != len(inst.outputs):
                raise TraceError(
                    spec.method,
                    f"trace step {step} `{inst_to_python(inst, names)}` produced {len(outs)} "
                    f"handles, the trace expects {len(inst.outputs)}",
                )
            env.update(zip(inst.outputs, outs, strict=True))
            yield step

    def with_decision(self, index: int | Instruction, decision: Any) -> Trace:
        """A copy with instruction ``index``'s decision replaced. ``index`` may also be
        the instruction itself, as in TVM's ``trace.with_decision(inst, decision)``.
        The decision is checked against the loop/block when the trace is replayed."""
        from .trace_load import check_decision

        insts = list(self.insts)
        if isinstance(index, Instruction):
            found = [i for i, x in enumerate(insts) if x is index]
            if not found:
                raise TraceError("with_decision", "the instruction is not part of this trace")
            index = found[0]
        if isinstance(index, bool) or not isinstance(index, int) or not (
            -len(insts) <= index < len(insts)
        ):
            raise TraceError(
                "with_decision", f"no step {index!r} in a trace of {len(insts)} instructions"
            )
        index %= len(insts)
        if isinstance(decision, list):
            decision = tuple(decision)
        check_decision(index, insts[index].spec, decision)
        insts[index] = replace(insts[index], decision=decision)
        return Trace(insts)


__all__ = [
    "RV",
    "BlockRV",
    "LoopRV",
    "ExprRV",
    "NoneRV",
    "LambdaText",
    "PyTuple",
    "Instruction",
    "Kind",
    "KINDS",
    "Trace",
    "register_kind",
]
