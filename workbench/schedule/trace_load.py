"""Reading traces: TVM's JSON and the printed Python text, as data.

The loading half of :mod:`workbench.schedule.trace`: JSON instructions and ``ast``
statements become :class:`~workbench.schedule.trace.Instruction` objects, checked as
they are read (known kinds, handles defined before use, literal arguments within the
bounds of :mod:`workbench.schedule.limits`, decisions that fit their step). Nothing is
ever executed. Every refusal is a :class:`TraceError` naming the step.
"""

from __future__ import annotations

import ast
from typing import Any

from .errors import TraceError
from .limits import MAX_DEPTH, MAX_INT_DIGITS
from .trace import (
    ALIASES,
    KINDS,
    RV,
    BlockRV,
    ExprRV,
    Instruction,
    Kind,
    LambdaText,
    LoopRV,
    NoneRV,
)


def _kind(step: int, name: Any) -> Kind:
    if isinstance(name, str):
        name = ALIASES.get(name, name)
    if not isinstance(name, str) or name not in KINDS:
        known = ", ".join(sorted(KINDS))
        raise TraceError("load", f"step {step}: unknown instruction kind {name!r} (known: {known})")
    return KINDS[name]


def _new_rv(step: int, name: Any, symbols: dict[str, RV]) -> RV:
    if name == "_":  # an output TVM leaves unnamed (a None tile)
        return NoneRV()
    if not isinstance(name, str) or not name or name[0] not in "blv":
        raise TraceError("load", f"step {step}: bad output handle name {name!r}")
    cls = {"b": BlockRV, "l": LoopRV, "v": ExprRV}[name[0]]
    rv = cls()
    symbols[name] = rv
    return rv


def _json_in(step: int, v: Any, symbols: dict[str, RV]) -> Any:
    if isinstance(v, str):
        # TVM's rule: text that starts and ends with a double quote is a string, the
        # quotes stripped and nothing unescaped ('"""' is the string '"')
        if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
            return v[1:-1]
        if v.startswith('"'):
            raise TraceError("load", f"step {step}: malformed string input {v!r}")
        if v.startswith("{") and v.endswith("}"):  # an index map, as TVM writes one
            from ..ir.index_map import IndexMap, IndexMapError

            try:
                return IndexMap.from_json(v)
            except IndexMapError as e:
                raise TraceError("load", f"step {step}: bad index map input: {e}") from None
        if v == "None":
            return None
        if v not in symbols:
            raise TraceError("load", f"step {step}: handle {v!r} is used before it is defined")
        return symbols[v]
    if isinstance(v, list):
        return [_json_in(step, x, symbols) for x in v]
    if v is None or isinstance(v, (int, float, bool)):
        return v
    raise TraceError("load", f"step {step}: unsupported input {v!r}")


def inst_from_json(step: int, raw: Any, symbols: dict[str, RV], decision: Any) -> Instruction:
    if not (isinstance(raw, list) and len(raw) == 4):
        raise TraceError("load", f"step {step}: expected [kind, inputs, attrs, outputs]")
    kind_name, inputs, attrs, outputs = raw
    spec = _kind(step, kind_name)
    if not all(isinstance(x, list) for x in (inputs, attrs, outputs)):
        raise TraceError("load", f"step {step}: inputs, attrs and outputs must be lists")
    inputs = [
        # an annotation's dict value is taken as it is (TVM reads no handles or quotes in it)
        dict(v) if spec.name == "Annotate" and i == 1 and isinstance(v, dict)
        and all(isinstance(k, str) for k in v) else _json_in(step, v, symbols)
        for i, v in enumerate(inputs)
    ]
    fixed = [n for n in spec.inputs if not n.startswith("*")]
    var = [n for n in spec.inputs if n.startswith("*")]
    if len(inputs) < len(fixed) or (not var and len(inputs) != len(fixed)):
        raise TraceError("load", f"step {step}: {spec.name} takes {len(fixed)} inputs")
    if len(attrs) != len(spec.attrs):
        raise TraceError(
            "load", f"step {step}: {spec.name} takes {len(spec.attrs)} attrs, got {len(attrs)}"
        )
    args: dict[str, Any] = {}
    pos = 0
    for n in spec.inputs:
        if n.startswith("*"):
            nrest = len(inputs) - len(fixed)
            args[n[1:]] = list(inputs[pos : pos + nrest])
            pos += nrest
        else:
            args[n] = inputs[pos]
            pos += 1
    for n, v in zip(spec.attrs, attrs, strict=True):
        if n in spec.index_map_attrs and v is not None:
            from ..ir.index_map import IndexMap, IndexMapError

            try:
                v = IndexMap.from_json(v) if isinstance(v, str) else None
            except IndexMapError as e:
                raise TraceError("load", f"step {step}: bad index map attr {n}: {e}") from None
            if v is None:
                raise TraceError("load", f"step {step}: attr {n} must be an index map's JSON")
        args[n] = bool(v) if n in spec.bool_attrs else v
    _check_outputs(step, spec, len(outputs))
    check_decision(step, spec, decision, args)
    outs = tuple(_new_rv(step, o, symbols) for o in outputs)
    order = tuple(n.lstrip("*") for n in spec.inputs) + spec.attrs
    return Instruction(spec.name, tuple((n, args[n]) for n in order), outs, decision)


def _check_outputs(step: int, spec: Kind, count: int) -> None:
    expected = {"none": 0, "single": 1}.get(spec.outputs)
    if expected is not None and count != expected:
        raise TraceError(
            "load", f"step {step}: {spec.name} has {expected} output(s), the trace gives {count}"
        )


def check_decision(step: int, spec: Kind, decision: Any,
                    args: dict[str, Any] | None = None) -> None:
    """Refuse a decision on a step that samples nothing and, with the step's ``args``
    known (when loading), a decision that cannot fit them: a categorical index outside
    the candidates, a tiling of the wrong length. What needs the function (a tiling's
    product, a compute location) is checked when the step is replayed."""
    if decision is None:
        return
    if not spec.sampling:
        raise TraceError(
            "load", f"step {step}: {spec.name} is not a sampling instruction and takes no decision"
        )
    if args is None:
        return
    is_int = isinstance(decision, int) and not isinstance(decision, bool)
    if spec.name == "SampleCategorical":
        candidates = args.get("candidates")
        if isinstance(candidates, (list, tuple)) and not (
            is_int and 0 <= decision < len(candidates)
        ):
            raise TraceError(
                "load", f"step {step}: decision {decision!r} is not an index into the "
                        f"{len(candidates)} candidates {list(candidates)}")
    elif spec.name == "SamplePerfectTile":
        n = args.get("n")
        if not (isinstance(decision, (list, tuple)) and all(
            isinstance(t, int) and not isinstance(t, bool) for t in decision
        )):
            raise TraceError("load", f"step {step}: decision {decision!r} is not a list of "
                                     "tile sizes")
        if isinstance(n, int) and len(decision) != n:
            raise TraceError("load", f"step {step}: decision {list(decision)} has "
                                     f"{len(decision)} tile sizes, n={n}")
    elif spec.name == "SampleComputeLocation" and not (is_int and decision >= -2):
        raise TraceError("load", f"step {step}: decision {decision!r} is not a compute "
                                 "location (a loop index, -1 root or -2 inline)")


def failing_line(text: str) -> int | None:
    """The first line that Python's parser cannot take on its own for its depth (for
    the message when the whole text overflowed the parser), or None."""
    for n, line in enumerate(text.splitlines(), start=1):
        try:
            ast.parse(line.strip())
        except (RecursionError, MemoryError):
            return n
        except (SyntaxError, ValueError):
            continue
    return None


def _method_spec(method: str) -> Kind | None:
    """The kind whose Schedule method is ``method`` (kinds registered later count too)."""
    for spec in KINDS.values():
        if method in (spec.method, spec.tirx_method):
            return spec
    return None


def _snippet(node: ast.AST, limit: int = 80) -> str:
    """Source text of ``node`` for a message, shortened (never fails)."""
    try:
        text = ast.unparse(node)
    except (RecursionError, MemoryError, ValueError):
        return f"<{type(node).__name__} expression>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _ast_depth(node: ast.AST) -> int:
    """How deeply sub-expressions nest in ``node`` (1 for a leaf), without recursion."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))
    return deepest


_CONSTANT_TYPES = (str, int, float, bool, type(None))


def _ast_value(step: int, node: ast.AST, symbols: dict[str, RV]) -> Any:
    """The literal value of an argument of trace text (after :func:`_check_arg`)."""
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, _CONSTANT_TYPES):
            raise TraceError("load", f"step {step}: unsupported constant `{_snippet(node)}`")
        if isinstance(node.value, int) and len(str(abs(node.value))) > MAX_INT_DIGITS:
            raise TraceError("load", f"step {step}: an integer of more than "
                                     f"{MAX_INT_DIGITS} digits")
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in symbols:
            raise TraceError(
                "load", f"step {step}: handle {node.id!r} is used before it is defined"
            )
        return symbols[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_ast_value(step, x, symbols) for x in node.elts]
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
        return {
            _ast_value(step, k, symbols): _ast_value(step, x, symbols)  # type: ignore[arg-type]
            for k, x in zip(node.keys, node.values, strict=True)
        }
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)):  # a negative number: one sign
        v = _ast_value(step, node.operand, symbols)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v
    if isinstance(node, ast.Lambda):  # kept as text, read with ast by whoever takes it
        return LambdaText(ast.unparse(node))
    raise TraceError("load", f"step {step}: unsupported argument `{_snippet(node)}`")


def _check_arg(step: int, node: ast.AST) -> None:
    """Refuse an argument nested past ``MAX_DEPTH`` before anything recurses into it."""
    if _ast_depth(node) > MAX_DEPTH:
        raise TraceError(
            "load", f"step {step} (line {getattr(node, 'lineno', '?')}): an argument nested "
                    f"deeper than {MAX_DEPTH} levels")


def inst_from_ast(step: int, node: ast.stmt, symbols: dict[str, RV]) -> Instruction:
    targets: list[str] = []
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        t = node.targets[0]
        elts = t.elts if isinstance(t, ast.Tuple) else [t]
        if not all(isinstance(e, ast.Name) for e in elts):
            raise TraceError("load", f"step {step}: unsupported assignment")
        targets = [e.id for e in elts]  # type: ignore[attr-defined]
        call = node.value
    elif isinstance(node, ast.Expr):
        call = node.value
    else:
        raise TraceError("load", f"step {step}: unsupported statement `{_snippet(node)}`")
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "sch"
    ):
        raise TraceError("load", f"step {step}: expected a call sch.<primitive>(...)")
    spec = _method_spec(call.func.attr)
    if spec is None:
        raise TraceError("load", f"step {step}: unknown primitive sch.{call.func.attr}")
    args: dict[str, Any] = {}
    if call.args:
        if not spec.positional:
            raise TraceError("load", f"step {step}: {spec.method} takes keyword arguments")
        for a in call.args:
            _check_arg(step, a)
        args[spec.positional[0]] = [_ast_value(step, a, symbols) for a in call.args]
    decision = None
    for kw in call.keywords:
        if kw.arg is None:
            raise TraceError("load", f"step {step}: ** arguments are not supported")
        _check_arg(step, kw.value)
        value = _ast_value(step, kw.value, symbols)
        if kw.arg == "decision":
            decision = value
        else:
            args[kw.arg] = value
    order = tuple(n.lstrip("*") for n in spec.inputs) + spec.attrs
    if spec.from_call is not None:
        try:
            args = spec.from_call(args)
        except (TypeError, ValueError, KeyError) as e:
            raise TraceError(
                "load", f"step {step}: bad arguments to sch.{spec.method}: {e}"
            ) from None
    for name in spec.omit_empty:
        args.setdefault(name, [])
    missing = [n for n in order if n not in args]
    extra = [n for n in args if n not in order]
    if missing or extra:
        raise TraceError(
            "load", f"step {step}: sch.{spec.method} missing {missing} / unexpected {extra}"
        )
    _check_outputs(step, spec, len(targets))
    check_decision(step, spec, decision, args)
    outs = tuple(_new_rv(step, t, symbols) for t in targets)
    return Instruction(spec.name, tuple((n, args[n]) for n in order), outs, decision)
