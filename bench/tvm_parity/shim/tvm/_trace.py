"""TVM's trace objects (``Trace``, ``Instruction``, ``InstructionKind``) over the
workbench's :class:`workbench.Trace`.

A trace the test builds from ``Instruction`` objects is turned into TVM's JSON and
loaded with ``wb.Trace.from_json``; printing, JSON and replay are then the
workbench's (TVM >= 0.24 names: ``get_sblock``, ``GetSBlock``).
"""

from __future__ import annotations

from typing import Any

import workbench as wb
from workbench.schedule.trace import ALIASES, KINDS, RV, BlockRV, ExprRV, LoopRV

from ._adapt import NotApplicable

SBlockRV = BlockRV


class InstructionKind:
    """``InstructionKind.get("Split")``."""

    def __init__(self, name: str):
        self.name = name

    @staticmethod
    def get(name: str) -> InstructionKind:
        if ALIASES.get(name, name) not in KINDS:
            raise NotApplicable(f"instruction kind {name!r} has no workbench counterpart")
        return InstructionKind(name)


class Instruction:
    """TVM's ``Instruction(kind, inputs, attrs, outputs)``."""

    def __init__(self, kind: InstructionKind, inputs: list, attrs: list, outputs: list):
        self.kind, self.inputs, self.attrs, self.outputs = kind, list(inputs), list(attrs), \
            list(outputs)

    def same_as(self, other: Any) -> bool:
        return self is other


class _ById(dict):
    """A dict keyed by object identity (instructions are not hashable by value)."""

    def __init__(self, pairs: list[tuple[Any, Any]] = ()):
        super().__init__({id(k): (k, v) for k, v in pairs})

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(id(key))[1]

    def __contains__(self, key: Any) -> bool:
        return super().__contains__(id(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def items(self):
        return [kv for kv in super().values()]


def _prefix(rv: Any) -> str:
    if isinstance(rv, BlockRV):
        return "b"
    if isinstance(rv, LoopRV):
        return "l"
    return "v"


def _to_wb(insts: list[Instruction], decisions: _ById) -> wb.Trace:
    names: dict[int, str] = {}
    counter = 0
    raw, raw_decisions = [], []

    def enc(v: Any) -> Any:
        if v is None:
            return "None"
        if isinstance(v, str):
            return '"' + v + '"'
        if isinstance(v, (list, tuple)):
            return [enc(x) for x in v]
        if isinstance(v, (bool, int, float)):
            return v
        if id(v) in names:
            return names[id(v)]
        raise NotApplicable(f"trace input {v!r} has no workbench counterpart")

    for idx, inst in enumerate(insts):
        inputs = [enc(v) for v in inst.inputs]
        outs = []
        for o in inst.outputs:
            names[id(o)] = f"{_prefix(o)}{counter}"
            counter += 1
            outs.append(names[id(o)])
        attrs = [bool(a) if isinstance(a, bool) else a for a in inst.attrs]
        raw.append([inst.kind.name, inputs, attrs, outs])
        if inst in decisions:
            raw_decisions.append([idx, decisions[inst]])
    return wb.Trace.from_json([raw, raw_decisions])


class Trace:
    """``tvm.s_tir.schedule.Trace``: built by a test from instructions, or a view of a
    schedule's trace (``sch.trace``)."""

    def __init__(self, insts: list | None = None, decisions: dict | None = None, *,
                 _wb: wb.Trace | None = None):
        if _wb is not None:
            self._insts = list(_wb.insts)
            self._decisions = _ById([(i, i.decision) for i in _wb.insts
                                     if i.decision is not None])
            self._native = True
        else:
            self._insts = list(insts or [])
            self._decisions = _ById(list((decisions or {}).items()))
            self._native = False

    def _wb(self) -> wb.Trace:
        if self._native:
            return wb.Trace(self._insts)
        return _to_wb(self._insts, self._decisions)

    @property
    def insts(self) -> list:
        return list(self._insts)

    @property
    def decisions(self) -> _ById:
        return self._decisions

    def get_decision(self, inst: Any) -> Any:
        return self._decisions.get(inst)

    def append(self, inst: Any, decision: Any = None) -> None:
        self._insts.append(inst)
        if decision is not None:
            self._decisions = _ById(self._decisions.items() + [(inst, decision)])

    def pop(self) -> Any:
        return self._insts.pop() if self._insts else None

    def as_python(self, remove_postproc: bool = False) -> list[str]:
        return self._wb().lines(syntax="tirx")

    def as_json(self, remove_postproc: bool = False) -> list:
        return self._wb().as_json_obj(syntax="tirx")

    def __str__(self) -> str:
        return self._wb().script(syntax="tirx")

    __repr__ = __str__

    def apply_to_schedule(self, sch: Any, remove_postproc: bool = False,
                          decision_provider: Any = None) -> None:
        if decision_provider is not None:
            raise NotApplicable("Trace.apply_to_schedule(decision_provider=...)")
        self._wb().apply_to_schedule(sch)

    @staticmethod
    def apply_json_to_schedule(json_obj: Any, sch: Any) -> None:
        wb.Trace.from_json(json_obj).apply_to_schedule(sch)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotApplicable(f"Trace.{name} has no workbench counterpart")


__all__ = ["RV", "BlockRV", "ExprRV", "Instruction", "InstructionKind", "LoopRV", "SBlockRV",
           "Trace"]
