"""Rules, the driver that applies the first matching rule to each function, and the
diagnosis table that says which rule scheduled what and why the others passed.

A rule is a :class:`ScheduleRule`: ``apply(func, target, tunable)`` returns a
:class:`~workbench.Schedule` of ``func`` when the rule knows how to schedule it, or
``None`` to pass. Built-in rules pass by raising :class:`Declined` with the reason,
which :func:`diagnose` shows; a rule that returns ``None`` passes with no reason
given. A rule whose primitives are refused part-way (a
:class:`~workbench.ScheduleError`) passes too, and the diagnosis shows the error.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..ir import IRModule, PrimFunc
from ..schedule import Schedule, ScheduleError
from ..target import Target

__all__ = [
    "ApplyDefaultSchedule",
    "Attempt",
    "CPUScheduleRule",
    "Declined",
    "Diagnosis",
    "FunctionReport",
    "GPUScheduleRule",
    "ScheduleRule",
    "apply_default_schedule",
    "diagnose",
    "is_scheduled",
    "schedule_function",
]

#: The function attribute a scheduled function carries (TVM's name).
SCHEDULED_ATTR = "tir.is_scheduled"
_SCHEDULED_KEYS = (SCHEDULED_ATTR, "tirx.is_scheduled")


class Declined(Exception):  # noqa: N818 (a rule's answer, not a failure)
    """Raised by a rule's ``apply`` to pass on a function, with the reason.

    >>> str(Declined("no reduction block"))
    'no reduction block'
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ScheduleRule:
    """A DLight rule: knows how to schedule some kind of function.

    Subclass it and implement :meth:`apply`; its name (the class name, or the one
    given to :meth:`from_callable`) is what the diagnosis shows.

    >>> import workbench as wb
    >>> class OnlyMatmuls(ScheduleRule):
    ...     def apply(self, func, target, tunable):
    ...         if func.name != "matmul":
    ...             raise Declined(f"{func.name} is not called matmul")
    ...         return wb.Schedule(func)
    >>> OnlyMatmuls().name
    'OnlyMatmuls'
    """

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        """Schedule ``func`` for ``target`` and return the Schedule, or return None /
        raise :class:`Declined` when the rule does not apply."""
        raise NotImplementedError(f"{type(self).__name__}.apply is not implemented")

    def is_target_available(self, target: Target) -> bool:
        """Whether the rule schedules for ``target`` at all (GPU rules: CUDA only)."""
        return True

    @property
    def name(self) -> str:
        return getattr(self, "_name", None) or type(self).__name__

    def __repr__(self) -> str:
        return f"{self.name}()"

    @staticmethod
    def from_callable(name: str) -> Callable[[Callable], ScheduleRule]:
        """Make a rule from a function ``f(func, target, tunable) -> Schedule | None``
        (a decorator, as in TVM). The result is a rule *instance*.

        >>> @ScheduleRule.from_callable("Nothing")
        ... def nothing(func, target, tunable):
        ...     return None
        >>> nothing
        Nothing()
        """

        def decorator(f: Callable) -> ScheduleRule:
            rule = _CallableRule(f)
            rule._name = name
            return rule

        return decorator


class _CallableRule(ScheduleRule):
    def __init__(self, f: Callable):
        self._f = f
        self.__doc__ = f.__doc__

    def apply(self, func, target, tunable):
        return self._f(func, target, tunable)


class GPUScheduleRule(ScheduleRule):
    """A rule for GPU targets: not tried on the C target."""

    def is_target_available(self, target: Target) -> bool:
        return target.is_gpu


class CPUScheduleRule(ScheduleRule):
    """A rule for the C (CPU) target: not tried on CUDA."""

    def is_target_available(self, target: Target) -> bool:
        return not target.is_gpu


# ---------------------------------------------------------------- the driver


@dataclass
class Attempt:
    """One rule tried on one function: ``outcome`` is ``"applied"``, ``"declined"``
    (the rule passed; ``reason`` says why), ``"error"`` (a primitive the rule used was
    refused; ``reason`` is the error) or ``"skipped"`` (not for this target)."""

    rule: str
    outcome: str
    reason: str = ""
    seconds: float = 0.0


@dataclass
class FunctionReport:
    """What happened to one function: the rule that scheduled it (None when none
    did), every attempt in order, the schedule and the scheduled function."""

    name: str
    original: PrimFunc
    rule: str | None
    attempts: list[Attempt]
    schedule: Schedule | None = None
    scheduled: PrimFunc | None = None
    note: str = ""
    launch: dict[str, Any] = field(default_factory=dict)

    @property
    def declined(self) -> list[Attempt]:
        """The attempts that passed before the one that applied."""
        return [a for a in self.attempts if a.outcome in ("declined", "error")]


def is_scheduled(func: PrimFunc) -> bool:
    """Whether ``func`` carries the ``tir.is_scheduled`` attribute (set by
    :func:`apply_default_schedule`), so that the rules leave it alone."""
    return any(k in _SCHEDULED_KEYS and bool(v) for k, v in func.attrs)


def _mark_scheduled(func: PrimFunc) -> PrimFunc:
    attrs = tuple((k, v) for k, v in func.attrs if k not in _SCHEDULED_KEYS)
    return replace(func, attrs=(*attrs, (SCHEDULED_ATTR, True)))


def _as_module(mod: Any) -> IRModule:
    if isinstance(mod, Schedule):
        return mod.mod
    if isinstance(mod, PrimFunc):
        return IRModule.from_funcs(mod)
    if isinstance(mod, IRModule):
        return mod
    raise TypeError(f"dlight: expected an IRModule or a PrimFunc, got {type(mod).__name__}")


def _check_rules(rules: Iterable[Any], where: str) -> list[ScheduleRule]:
    rules = list(rules)
    if len(rules) == 1 and isinstance(rules[0], (list, tuple)):
        rules = list(rules[0])
    for r in rules:
        if isinstance(r, type) and issubclass(r, ScheduleRule):
            raise TypeError(f"{where}: pass rule instances, e.g. {r.__name__}() rather than "
                            f"{r.__name__}")
        if not isinstance(r, ScheduleRule):
            raise TypeError(f"{where}: {r!r} is not a ScheduleRule")
    if not rules:
        raise ValueError(f"{where}: give at least one rule")
    return rules


def _target(target: Any, where: str) -> Target:
    if target is None:
        current = Target.current()
        if current is None:
            raise ValueError(
                f"{where}: no target; pass target='cuda' (or 'c'), or call it inside "
                "`with wb.Target('cuda'):`"
            )
        return current
    return Target.from_any(target)


def schedule_function(func: PrimFunc, rules: Iterable[ScheduleRule], target: Any = None,
                      tunable: bool = False) -> FunctionReport:
    """Try ``rules`` on ``func`` in order; the first that returns a Schedule wins.

    >>> import workbench as wb
    >>> report = schedule_function(wb.workloads.transpose(64, 64),
    ...                            [wb.dlight.gpu.Fallback()], target="cuda")
    >>> report.rule
    'Fallback'
    """
    tgt = _target(target, "schedule_function")
    rules = _check_rules(rules, "schedule_function")
    attempts: list[Attempt] = []
    if is_scheduled(func):
        return FunctionReport(func.name, func, None, attempts,
                              note="already scheduled (tir.is_scheduled); left as it is")
    from .analysis import has_thread_bindings

    if tgt.is_gpu and has_thread_bindings(func):
        return FunctionReport(func.name, func, None, attempts,
                              note="already binds GPU threads; left as it is")
    for rule in rules:
        if not rule.is_target_available(tgt):
            attempts.append(Attempt(rule.name, "skipped", f"not a rule for {tgt.kind}"))
            continue
        start = time.perf_counter()
        try:
            sch = rule.apply(func, tgt, tunable)
        except Declined as d:
            attempts.append(Attempt(rule.name, "declined", d.reason,
                                    time.perf_counter() - start))
            continue
        except ScheduleError as e:
            attempts.append(Attempt(rule.name, "error", f"{type(e).__name__}: {e}",
                                    time.perf_counter() - start))
            continue
        except Exception as e:
            e.add_note(f"(raised by rule {rule.name} on function {func.name!r})")
            raise
        seconds = time.perf_counter() - start
        if sch is None:
            attempts.append(Attempt(rule.name, "declined", "apply() returned None", seconds))
            continue
        if isinstance(sch, (list, tuple)):
            if not sch:
                attempts.append(Attempt(rule.name, "declined", "apply() returned no schedule",
                                        seconds))
                continue
            sch = sch[0]
        if not isinstance(sch, Schedule):
            raise TypeError(f"rule {rule.name} returned {type(sch).__name__}, not a Schedule")
        attempts.append(Attempt(rule.name, "applied", "", seconds))
        scheduled = _mark_scheduled(sch.mod[sch.func.name])
        return FunctionReport(func.name, func, rule.name, attempts, sch, scheduled)
    return FunctionReport(func.name, func, None, attempts, note="no rule matched")


def _run(mod: Any, rules: tuple, target: Any, where: str) -> tuple[IRModule, list[FunctionReport]]:
    module = _as_module(mod)
    tgt = _target(target, where)
    checked = _check_rules(rules, where)
    reports = [schedule_function(f, checked, tgt) for _, f in module.functions]
    out = module
    for r in reports:
        if r.scheduled is not None:
            out = out.with_function(r.scheduled)
    return out, reports


def apply_default_schedule(mod: IRModule | PrimFunc, *rules: ScheduleRule,
                           target: Any = None) -> IRModule:
    """Schedule every function of ``mod`` with the first of ``rules`` that matches it
    (TVM's ``ApplyDefaultSchedule``) and return the new module; each scheduled function
    is marked ``tir.is_scheduled``, and functions no rule matched are kept as they are.
    ``target`` is ``"cuda"``, ``"c"`` or a :class:`~workbench.Target` (or set it with
    ``with wb.Target("cuda"):``).

    >>> import workbench as wb
    >>> from workbench import dlight as dl
    >>> mod = wb.IRModule.from_funcs(wb.workloads.transpose(64, 64))
    >>> out = dl.apply_default_schedule(mod, dl.gpu.Fallback(), target="cuda")
    >>> dl.is_scheduled(out["transpose"])
    True
    """
    return _run(mod, rules, target, "apply_default_schedule")[0]


class ApplyDefaultSchedule:
    """TVM's pass shape: ``ApplyDefaultSchedule(*rules)(mod, target=...)``.

    >>> import workbench as wb
    >>> from workbench import dlight as dl
    >>> with wb.Target("cuda"):
    ...     out = dl.ApplyDefaultSchedule(dl.gpu.Fallback())(wb.workloads.transpose(64, 64))
    >>> out.names
    ['transpose']
    """

    def __init__(self, *rules: ScheduleRule):
        self.rules = _check_rules(rules, "ApplyDefaultSchedule")

    def __call__(self, mod: IRModule | PrimFunc, target: Any = None) -> IRModule:
        return apply_default_schedule(mod, *self.rules, target=target)

    def __repr__(self) -> str:
        return f"ApplyDefaultSchedule({', '.join(map(repr, self.rules))})"


# ---------------------------------------------------------------- diagnosis


def _launch(report: FunctionReport, tgt: Target) -> dict[str, Any]:
    func = report.scheduled if report.scheduled is not None else report.original
    if not tgt.is_gpu:
        from ..ir.functor import iter_stmts
        from ..ir.stmt import For

        kinds = [s.kind for s in iter_stmts(func.body) if isinstance(s, For)]
        return {"parallel loops": kinds.count("parallel"),
                "vectorized loops": kinds.count("vectorized")}
    from ..codegen.gpu import GpuError, lower_for_gpu

    try:
        _, device = lower_for_gpu(IRModule.from_funcs(func), tgt)
    except GpuError as e:
        return {"problem": f"{type(e).__name__}: {e}"}
    kernels = device.kernels
    if not kernels:
        return {"kernels": 0}

    def fmt(t) -> str:
        return "(" + ", ".join(_dim(x) for x in t) + ")"

    return {
        "kernels": len(kernels),
        "grid": "; ".join(fmt(k.launch.grid) for k in kernels),
        "block": "; ".join(fmt(k.launch.block) for k in kernels),
        "threads/block": max(k.launch.threads_per_block for k in kernels),
        "shared bytes": max(k.shared_bytes for k in kernels),
        "local bytes": max(k.local_bytes for k in kernels),
    }


def _dim(x) -> str:
    """A launch dimension as a reader writes it: ``(n + 255) // 256``."""
    import re

    from ..ir.printer import expr_to_str

    text = str(x) if isinstance(x, int) else expr_to_str(x)
    return re.sub(r"T\.int(?:32|64)\((-?\d+)\)", r"\1", text)


_COLUMNS_GPU = ["kernels", "grid", "block", "threads/block", "shared bytes", "local bytes"]
_COLUMNS_CPU = ["parallel loops", "vectorized loops"]


class Diagnosis:
    """Which rule scheduled each function, which rules passed and why, and what the
    schedule launches. ``table`` is a pandas DataFrame (one row per function);
    the notebook view is an HTML table; ``str()`` gives the whole table as text.

    ``mod`` is the scheduled module (what :func:`apply_default_schedule` returns),
    ``reports`` the per-function details (:class:`FunctionReport`, with the
    Schedule and its trace), ``diagnosis["name"]`` one of them.
    """

    def __init__(self, mod: IRModule, reports: list[FunctionReport], target: Target,
                 rules: list[ScheduleRule]):
        self.mod = mod
        self.reports = reports
        self.target = target
        self.rules = rules

    def __getitem__(self, name: str) -> FunctionReport:
        for r in self.reports:
            if r.name == name:
                return r
        raise KeyError(f"no function {name!r}; the functions are {[r.name for r in self.reports]}")

    @property
    def assignment(self) -> dict[str, str | None]:
        """``{function: rule}`` (None where no rule applied)."""
        return {r.name: r.rule for r in self.reports}

    @property
    def fallback(self) -> list[str]:
        """Functions scheduled by a rule named ``Fallback`` or by none: the ones to
        look at (a custom rule, tuning, or a hand schedule)."""
        return [r.name for r in self.reports if r.rule in (None, "Fallback")]

    def _columns(self) -> list[str]:
        return _COLUMNS_GPU + ["problem"] if self.target.is_gpu else _COLUMNS_CPU

    def _rows(self) -> list[dict[str, Any]]:
        rows = []
        for r in self.reports:
            row: dict[str, Any] = {
                "function": r.name,
                "rule": r.rule if r.rule is not None else f"(none: {r.note})",
                "declined": "; ".join(f"{a.rule}: {a.reason}" for a in r.declined),
            }
            for col in self._columns():
                row[col] = r.launch.get(col, "")
            rows.append(row)
        return rows

    @property
    def table(self):
        """The diagnosis as a pandas DataFrame."""
        import pandas as pd

        from .._frame import full_table

        frame = pd.DataFrame(self._rows())
        if "problem" in frame and not frame["problem"].astype(bool).any():
            frame = frame.drop(columns="problem")
        return full_table(frame)

    def to_pandas(self):
        """The same as :attr:`table`."""
        return self.table

    def __str__(self) -> str:
        lines = [f"DLight diagnosis on {self.target} with rules "
                 + ", ".join(r.name for r in self.rules)]
        for r in self.reports:
            rule = r.rule if r.rule is not None else f"(none: {r.note})"
            lines.append(f"  {r.name:28s} -> {rule}")
            for a in r.declined:
                lines.append(f"      {a.rule} passed: {a.reason}")
            launch = ", ".join(f"{k} {v}" for k, v in r.launch.items() if v != "")
            if launch:
                lines.append(f"      {launch}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        cols = self._columns()
        shown = [c for c in cols if any(r.launch.get(c, "") != "" for r in self.reports)]
        head = "".join(f"<th>{html.escape(c)}</th>" for c in ["function", "rule", *shown])
        body = []
        for r in self.reports:
            if r.rule is None:
                rule = f'<span style="color:#b00">none</span> <small>{html.escape(r.note)}</small>'
            elif r.rule == "Fallback":
                rule = ('<span style="color:#b60" title="the catch-all rule: correct but '
                        'rarely fast">Fallback</span>')
            else:
                rule = f"<b>{html.escape(r.rule)}</b>"
            passed = "".join(
                f"<li><b>{html.escape(a.rule)}</b>: {html.escape(a.reason)}</li>"
                for a in r.declined
            )
            cells = "".join(f"<td>{html.escape(str(r.launch.get(c, '')))}</td>" for c in shown)
            body.append(f"<tr><td><code>{html.escape(r.name)}</code></td><td>{rule}</td>"
                        f"{cells}</tr>")
            if passed:  # a full-width row under the function: long reasons stay readable
                body.append(f'<tr class="wb-passed"><td></td><td colspan="{1 + len(shown)}" '
                            'style="text-align:left"><small>passed before it:</small>'
                            f'<ul style="margin:0;padding-left:1.2em">{passed}</ul></td></tr>')
        title = html.escape(f"DLight diagnosis on {self.target}")
        return (f"<div><b>{title}</b><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table></div>")


def diagnose(mod: IRModule | PrimFunc, *rules: ScheduleRule, target: Any = None) -> Diagnosis:
    """Apply ``rules`` as :func:`apply_default_schedule` does and report, per function,
    the rule that applied, the rules that passed before it and why, and (on CUDA) the
    kernels it launches: grid, block, threads, shared and local memory per block.

    >>> import workbench as wb
    >>> from workbench import dlight as dl
    >>> d = dl.diagnose(wb.workloads.transpose(64, 64), dl.gpu.Fallback(), target="cuda")
    >>> d.assignment
    {'transpose': 'Fallback'}
    >>> list(d.table.columns)[:3]
    ['function', 'rule', 'declined']
    """
    out, reports = _run(mod, rules, target, "diagnose")
    tgt = _target(target, "diagnose")
    for r in reports:
        r.launch = _launch(r, tgt)
    return Diagnosis(out, reports, tgt, _check_rules(rules, "diagnose"))
