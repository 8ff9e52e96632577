"""The trace stepper's model: a trace replayed once, the IR after every step, and the
legal alternatives of each sampled decision.

:class:`StepperModel` is plain Python (no ipywidgets): the view
:class:`workbench.widgets.stepper.TraceStepper` binds widgets to it, and tests drive
it directly. Steps are numbered as the stepper's slider: step ``0`` is the original
function and step ``i`` (``1 <= i <= len(trace)``) is the IR after the trace's
instruction ``i - 1``, which is the instruction shown at step ``i``.

>>> import workbench as wb
>>> sch = wb.Schedule(wb.workloads.matmul(64, 64, 64))
>>> i, j, k = sch.get_loops(sch.get_block("C"))
>>> tiles = sch.sample_perfect_tile(j, n=2, decision=[16, 4])
>>> j0, j1 = sch.split(j, factors=tiles)
>>> model = StepperModel(sch.trace, wb.workloads.matmul(64, 64, 64))
>>> model.num_steps, model.instruction(3)
(4, 'v4, v5 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=16, decision=[16, 4])')
>>> [model.changes_ir(s) for s in range(1, 5)]
[False, False, False, True]
>>> choices = model.decision_choices(3)
>>> choices.total, [c.label for c in choices.choices][:3]
(5, ['[4, 16]', '[8, 8]', '[16, 4]'])
>>> model.set_decision(3, [8, 8])
True
>>> model.trace[2].decision, "T.grid(64, 8, 8, 64)" in model.text(4)
((8, 8), True)
"""

from __future__ import annotations

import html
import itertools
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ir import Block, For, IRModule, PrimFunc
from ..ir.analysis import as_module, find_block
from ..ir.highlight import error_banner
from ..schedule.errors import ScheduleError, TraceError
from ..schedule.file import LOOKUP_KINDS
from ..schedule.primitives.sampling import (
    LocationMark,
    compute_location_candidates,
    count_perfect_tilings,
    iter_perfect_tilings,
)
from ..schedule.schedule import Schedule
from ..schedule.trace import RV, Instruction, Trace
from .diff import as_ir_text, check_syntax
from .wording import count

__all__ = [
    "LOOKUP_KINDS",
    "MAX_CHOICES",
    "Choice",
    "DecisionChoices",
    "MeasureRecord",
    "ReplayFailure",
    "StepperModel",
    "perfect_tile_choices",
]


#: At most this many perfect tilings are listed as choices of one decision.
MAX_CHOICES = 500


# ---------------------------------------------------------------------------
# decisions


@dataclass(frozen=True)
class Choice:
    """One legal decision of a sampling instruction: the value stored in the trace
    (a tuple of tile sizes, a candidate index, a compute location) and its label."""

    decision: Any
    label: str


@dataclass(frozen=True)
class DecisionChoices:
    """The decision of the sampling instruction shown at ``step`` and its legal
    alternatives.

    ``total`` counts every legal decision; ``choices`` lists them all, or the first
    :data:`MAX_CHOICES` (then ``truncated`` is true and ``note`` says so). The
    current decision is always among ``choices`` when it is legal.
    """

    step: int
    kind: str
    decision: Any
    choices: tuple[Choice, ...]
    total: int
    subject: str = ""
    truncated: bool = False

    @property
    def index(self) -> int | None:
        """Position of the current decision in ``choices`` (None if it is not legal)."""
        for n, c in enumerate(self.choices):
            if c.decision == self.decision:
                return n
        return None

    @property
    def note(self) -> str:
        """A one-line description: what is decided and how many choices there are."""
        what = {
            "SamplePerfectTile": "tilings",
            "SampleCategorical": "candidates",
            "SampleComputeLocation": "compute locations",
        }.get(self.kind, "choices")
        head = f"{self.subject}: " if self.subject else ""
        if self.truncated:
            return f"{head}the first {MAX_CHOICES} of {self.total} legal {what} are listed"
        return f"{head}{self.total} legal {what}"


def perfect_tile_choices(
    extent: int, n: int, max_innermost_factor: int = 16, limit: int = MAX_CHOICES
) -> tuple[list[tuple[int, ...]], int]:
    """The first ``limit`` perfect tilings of ``extent`` into ``n`` factors whose
    innermost is at most ``max_innermost_factor`` (``-1``: no limit), in lexicographic
    order, and how many there are in all (what ``sample_perfect_tile`` accepts).

    >>> perfect_tile_choices(16, 2, max_innermost_factor=4)
    ([(4, 4), (8, 2), (16, 1)], 3)
    >>> tiles, total = perfect_tile_choices(4096, 5, limit=10)
    >>> len(tiles), total
    (10, 1490)
    """
    tilings = iter_perfect_tilings(extent, n, max_innermost_factor)
    return ([tuple(t) for t in itertools.islice(tilings, max(limit, 0))],
            count_perfect_tilings(extent, n, max_innermost_factor))


# ---------------------------------------------------------------------------
# replay


@dataclass(frozen=True)
class ReplayFailure:
    """The trace stops at ``step``: the instruction shown there (``instruction``)
    was refused with ``error``. The IR is known up to step ``step - 1``."""

    step: int
    instruction: str
    error: ScheduleError

    @property
    def message(self) -> str:
        return f"step {self.step} `{self.instruction}` failed: {self.error}"

    def html(self, syntax: str = "classic") -> str:
        """The themed error (the IR with the offending loop/block marked)."""
        head = (
            '<div class="wb-error-step" style="padding:2px 6px;font-weight:bold">'
            f"The trace stops at step {self.step}: "
            f"<code>{html.escape(self.instruction)}</code></div>"
        )
        return f'<div class="wb-error">{head}{self.error.html(syntax)}</div>'


@dataclass(frozen=True)
class _TileSite:
    loop: str
    extent: int
    n: int
    max_innermost_factor: int


@dataclass(frozen=True)
class _LocationSite:
    func: PrimFunc
    block: str


@dataclass
class _Replay:
    trace: Trace  # with every sampled decision filled in
    states: list[IRModule]
    failure: ReplayFailure | None
    schedule: Schedule
    sites: dict[int, _TileSite | _LocationSite]


def _site(sch: Schedule, env: dict[RV, Any], inst: Instruction) -> _TileSite | _LocationSite | None:
    """What a sampling instruction decides about, read off ``sch`` before it runs."""
    try:
        if inst.kind == "SamplePerfectTile":
            loop = sch.get(env[inst.arg("loop")])
            if isinstance(loop, For):
                return _TileSite(
                    loop.loop_var.name,
                    loop.extent,
                    inst.arg("n"),
                    inst.arg("max_innermost_factor"),
                )
        elif inst.kind == "SampleComputeLocation":
            block = sch.get(env[inst.arg("block")])
            if isinstance(block, Block):
                for name in sch.mod.names:
                    if find_block(sch.mod[name], block.name) is not None:
                        return _LocationSite(sch.mod[name], block.name)
    except (KeyError, ScheduleError):
        pass  # a handle that does not resolve: the step itself fails, and says why
    return None


def _replay(trace: Trace, module: IRModule) -> _Replay:
    sch = Schedule(module, seed=0)
    env: dict[RV, Any] = {}
    states = [sch.mod]
    sites: dict[int, _TileSite | _LocationSite] = {}
    insts = list(trace.insts)
    failure = None
    lines = trace.lines()
    replay = trace.replay_iter(sch, env)
    while True:
        index = len(states) - 1
        if index < len(insts) and insts[index].spec.sampling:
            site = _site(sch, env, insts[index])
            if site is not None:
                sites[index + 1] = site
        try:
            next(replay)
        except StopIteration:
            break
        except TraceError as e:
            cause = e.__cause__ if isinstance(e.__cause__, ScheduleError) else e
            failure = ReplayFailure(index + 1, lines[index], cause)
            break
        recorded = sch.trace[-1]
        if insts[index].spec.sampling and insts[index].decision is None:
            insts[index] = Instruction(  # a decision drawn on replay: keep it
                insts[index].kind, insts[index].args, insts[index].outputs, recorded.decision
            )
        states.append(sch.mod)
    return _Replay(Trace(insts), states, failure, sch, sites)


def _open(trace: Any, func: Any) -> tuple[Trace, Any]:
    """The trace and the function it starts from: a file name, a schedule file or its
    text bring their own function (used when ``func`` is None); a Schedule starts from
    its original module."""
    from ..schedule.file import ScheduleFile, read_trace_source

    if isinstance(trace, Schedule) and func is None:
        return trace.trace, trace.original
    if isinstance(trace, (str, bytes)) and not trace.strip():
        raise ValueError("the stepper needs a trace: got an empty string")
    try:
        loaded, schedule_file = read_trace_source(trace)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"TraceStepper: {e}") from None
    if func is None and schedule_file is not None:
        func = schedule_file.original()
    if func is None and not isinstance(trace, (Trace, ScheduleFile)):
        raise TypeError(
            f"TraceStepper: {_describe(trace)} is a bare trace: it does not carry the "
            f"function it starts from. Pass it: TraceStepper({_shown(trace)}, func), or save "
            "a schedule file instead (sch.save(path), or the editor's Download schedule), "
            "which does")
    return loaded, func


def _describe(source: Any) -> str:
    from ..schedule.file import _looks_like_path

    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)
                                           and Path(source).expanduser().is_file()):
        return f"the file {Path(source).name}"
    return "the trace text"


def _shown(source: Any) -> str:
    if _describe(source).startswith("the file"):
        return repr(str(source))
    return "trace"


def _as_start(func: Any) -> PrimFunc | IRModule:
    if isinstance(func, Schedule):
        func = func.original
    if isinstance(func, IRModule):
        return func if len(func) > 1 else func[func.names[0]]
    if isinstance(func, PrimFunc):
        return func
    if func is None:
        raise TypeError(
            "TraceStepper: the stepper needs the function the trace starts from: "
            "TraceStepper(trace, func) (a schedule file carries its own: "
            "TraceStepper('schedule.json'))"
        )
    raise TypeError(
        f"TraceStepper: expected the PrimFunc or IRModule the trace starts from, got "
        f"{type(func).__name__}"
    )


# ---------------------------------------------------------------------------
# measurements


@dataclass(frozen=True)
class MeasureRecord:
    """One measurement: the trace measured (up to ``step``), its timing and the
    machine's peak at the time. ``decisions`` summarises the sampled decisions."""

    trace: Trace
    step: int
    measurement: Any  # a workbench.runtime.timing.Measurement
    peak_gflops: float | None
    decisions: str

    @property
    def fraction_of_peak(self) -> float | None:
        gflops = self.measurement.gflops
        if gflops is None or not self.peak_gflops:
            return None
        return gflops / self.peak_gflops

    def summary(self) -> str:
        """``median 0.123 ms · 4.26 GFLOPS · 1.3% of peak``."""
        m = self.measurement
        parts = [f"median {m.median * 1e3:.3f} ms"]
        if m.gflops is not None:
            parts.append(f"{m.gflops:.2f} GFLOPS")
        frac = self.fraction_of_peak
        if frac is not None:
            parts.append(f"{frac:.1%} of peak ({self.peak_gflops:.0f} GFLOPS)")
        return " · ".join(parts)


# ---------------------------------------------------------------------------
# the model


class StepperModel:
    """State of a trace stepper: the trace (possibly with edited decisions), the IR
    at every step, the current step, and the last action's error.

    ``trace`` is a :class:`Trace`, a Schedule (its trace), or trace text (JSON or the
    printed ``def apply_trace(sch): ...``); ``func`` is the PrimFunc or IRModule the
    trace starts from (or a Schedule that has not applied anything yet). The trace is
    replayed once, eagerly (a few milliseconds for a 30-step trace); printed IR is
    made on demand and cached. A trace that fails at some step keeps the IR up to
    there and records :attr:`failure`; the last step is then that step.

    >>> import workbench as wb
    >>> func = wb.workloads.mm_relu(16, 16, 16)
    >>> sch = wb.Schedule(func)
    >>> i, j, k = sch.get_loops(sch.get_block("Y"))
    >>> j0, j1 = sch.split(j, factors=[None, 4])
    >>> model = StepperModel(sch.trace, func)
    >>> model.step = 3
    >>> model.instruction(), model.changes_ir()
    ('l4, l5 = sch.split(loop=l2, factors=[None, 4], preserve_unit_iters=True, disable_predication=False)', True)
    >>> model.only_changes = True
    >>> model.previous(), model.next()
    (0, 3)
    """  # noqa: E501

    def __init__(self, trace: Any, func: Any = None, syntax: str = "classic"):
        trace, func = _open(trace, func)
        self.func: PrimFunc | IRModule = _as_start(func)
        self._module = as_module(self.func)
        self.syntax = check_syntax(syntax)
        self._adopt(_replay(trace, self._module))
        self._step = 0
        self.only_changes = False
        self._action_error: BaseException | None = None
        self.measurements: list[MeasureRecord] = []
        self._peak: float | None = None

    # ----------------------------------------------------------------- replay state
    def _adopt(self, result: _Replay) -> None:
        self._result = result
        self._texts: dict[tuple[int, str], str] = {}
        self._changes: dict[int, bool] = {}
        self._choices: dict[int, DecisionChoices | None] = {}
        self._lines: dict[str, list[str]] = {}

    @property
    def trace(self) -> Trace:
        """The current trace: the one given, with edited (and drawn) decisions."""
        return self._result.trace

    @property
    def num_steps(self) -> int:
        """How many instructions the trace has (the slider's maximum)."""
        return len(self.trace)

    @property
    def last_step(self) -> int:
        """The last step that can be shown: ``num_steps``, or the failing step."""
        return self._result.failure.step if self._result.failure else self.num_steps

    @property
    def failure(self) -> ReplayFailure | None:
        """Where and why the trace stops replaying (None when it replays fully)."""
        return self._result.failure

    @property
    def schedule(self) -> Schedule:
        """A Schedule after the whole trace (a fresh copy; as far as the trace goes
        when it fails)."""
        return self._result.schedule.copy()

    # ----------------------------------------------------------------- errors
    @property
    def action_error(self) -> BaseException | None:
        """The exception of the last refused decision or failed measurement, if any."""
        return self._action_error

    @property
    def error(self) -> str:
        """The last refused action's message (until the next action or a move to
        another step), else the replay failure's, else ``""``."""
        if self._action_error is not None:
            return f"{type(self._action_error).__name__}: {self._action_error}"
        return self.failure.message if self.failure else ""

    def report_error(self, error: BaseException) -> None:
        """Record ``error`` as the last action's (what views do with an exception from a
        widget callback, instead of raising it into the notebook)."""
        self._action_error = error

    def clear_error(self) -> None:
        """Forget the last refused action (the replay failure stays)."""
        self._action_error = None

    def error_html(self, step: int | None = None) -> str:
        """Themed HTML for the error area at ``step`` (the current one by default): the
        last refused action, and the replay failure at its step; ``""`` if none."""
        step = self._step if step is None else step
        parts = []
        if self._action_error is not None:
            err = self._action_error
            if isinstance(err, ScheduleError):
                parts.append(err.html(self.syntax))
            else:
                parts.append(f'<div class="wb-error">'
                             f"{error_banner(str(err), type(err).__name__)}</div>")
        if self.failure is not None and step == self.failure.step:
            parts.append(self.failure.html(self.syntax))
        return "".join(parts)

    # ----------------------------------------------------------------- navigation
    @property
    def step(self) -> int:
        """The current step: 0 is the original function, ``i`` the IR after the
        ``i``-th instruction."""
        return self._step

    @step.setter
    def step(self, value: int) -> None:
        self._move(self._check_step(value))

    def _move(self, step: int) -> None:
        """Go to ``step``; moving on dismisses the last refused action's error."""
        if step != self._step:
            self._action_error = None
        self._step = step

    def _check_step(self, step: Any) -> int:
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"a step is an integer, got {step!r}")
        if not 0 <= step <= self.last_step:
            why = f" (the trace stops at step {self.last_step})" if self.failure else ""
            raise ValueError(f"no step {step}: steps go from 0 to {self.last_step}{why}")
        return step

    def visible_steps(self) -> list[int]:
        """Steps that next/previous/play visit: all of them, or with
        :attr:`only_changes` step 0, the steps that change the IR, sampling steps (their
        decisions are what one edits) and the failing step."""
        steps = range(self.last_step + 1)
        if not self.only_changes:
            return list(steps)
        failing = self.failure.step if self.failure else -1
        return [
            s for s in steps
            if s == 0 or s == failing or self.is_sampling(s) or self.changes_ir(s)
        ]

    def next(self) -> int:
        """Go to the next visible step (stay at the last one); returns the step."""
        later = [s for s in self.visible_steps() if s > self._step]
        if later:
            self._move(later[0])
        return self._step

    def previous(self) -> int:
        """Go to the previous visible step (stay at step 0); returns the step."""
        earlier = [s for s in self.visible_steps() if s < self._step]
        if earlier:
            self._move(earlier[-1])
        return self._step

    # ----------------------------------------------------------------- per step
    def _inst(self, step: int) -> Instruction | None:
        step = self._check_any_step(step)
        return self.trace[step - 1] if step else None

    def _check_any_step(self, step: Any) -> int:
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= self.num_steps:
            raise ValueError(f"no step {step!r}: steps go from 0 to {self.num_steps}")
        return step

    def lines(self, syntax: str | None = None) -> list[str]:
        """The trace's instructions as printed, one per step (step ``i`` is line
        ``i - 1``)."""
        syntax = syntax or self.syntax
        if syntax not in self._lines:
            self._lines[syntax] = self.trace.lines(syntax)
        return self._lines[syntax]

    def instruction(self, step: int | None = None, syntax: str | None = None) -> str:
        """The instruction shown at ``step`` as the printed trace writes it (``""`` at
        step 0)."""
        step = self._check_any_step(self._step if step is None else step)
        return self.lines(syntax)[step - 1] if step else ""

    def kind(self, step: int | None = None) -> str:
        """The instruction kind at ``step`` (``"Split"``...; ``""`` at step 0)."""
        inst = self._inst(self._step if step is None else step)
        return inst.kind if inst else ""

    def is_sampling(self, step: int | None = None) -> bool:
        """Whether the instruction at ``step`` samples a decision."""
        inst = self._inst(self._step if step is None else step)
        return bool(inst and inst.spec.sampling)

    def is_lookup(self, step: int | None = None) -> bool:
        """Whether the instruction at ``step`` only looks up blocks or loops."""
        inst = self._inst(self._step if step is None else step)
        return bool(inst and inst.kind in LOOKUP_KINDS)

    def ir(self, step: int | None = None) -> PrimFunc | IRModule | None:
        """The IR at ``step`` (a PrimFunc when the module has one function); None for
        a step past the failing one."""
        step = self._check_any_step(self._step if step is None else step)
        if step >= len(self._result.states):
            return None
        mod = self._result.states[step]
        return mod[mod.names[0]] if len(mod) == 1 else mod

    def text(self, step: int | None = None, syntax: str | None = None) -> str:
        """The printed IR at ``step`` (``""`` past the failing step); cached."""
        step = self._check_any_step(self._step if step is None else step)
        syntax = syntax or self.syntax
        key = (step, syntax)
        if key not in self._texts:
            ir = self.ir(step)
            self._texts[key] = "" if ir is None else as_ir_text(ir, syntax)
        return self._texts[key]

    def changes_ir(self, step: int | None = None) -> bool:
        """Whether the instruction at ``step`` changed the IR (False at step 0 and for
        a step that failed)."""
        step = self._check_any_step(self._step if step is None else step)
        if step == 0 or step >= len(self._result.states):
            return False
        if step not in self._changes:
            before, after = self._result.states[step - 1], self._result.states[step]
            same = before is after or (
                before.names == after.names
                and all(before[n] is after[n] for n in before.names)
            )
            self._changes[step] = not same and self.text(step - 1) != self.text(step)
        return self._changes[step]

    # ----------------------------------------------------------------- decisions
    def sampling_steps(self) -> list[int]:
        """The steps whose instruction samples a decision."""
        return [s for s in range(1, self.num_steps + 1) if self.trace[s - 1].spec.sampling]

    def decision(self, step: int | None = None) -> Any:
        """The decision of the sampling instruction at ``step`` (None otherwise)."""
        inst = self._inst(self._step if step is None else step)
        return inst.decision if inst is not None else None

    def decision_choices(self, step: int | None = None) -> DecisionChoices | None:
        """The legal decisions of the sampling instruction at ``step``: perfect tilings
        of the loop (innermost <= ``max_innermost_factor``), the categorical candidates
        with their probabilities, or the block's legal compute locations. None for an
        instruction that samples nothing, or whose loop/block could not be resolved."""
        step = self._check_any_step(self._step if step is None else step)
        if step not in self._choices:
            self._choices[step] = self._make_choices(step)
        return self._choices[step]

    def _make_choices(self, step: int) -> DecisionChoices | None:
        inst = self._inst(step)
        if inst is None or not inst.spec.sampling:
            return None
        decision = inst.decision
        if isinstance(decision, list):
            decision = tuple(decision)
        if inst.kind == "SampleCategorical":
            cands, probs = inst.arg("candidates"), inst.arg("probs")
            total = sum(probs) or 1.0
            choices = tuple(
                Choice(n, f"{c} (p={p / total:.3g})")
                for n, (c, p) in enumerate(zip(cands, probs, strict=True))
            )
            return DecisionChoices(step, inst.kind, decision, choices, len(choices),
                                   "sample_categorical")
        site = self._result.sites.get(step)
        if isinstance(site, _TileSite):
            tiles, total = perfect_tile_choices(site.extent, site.n, site.max_innermost_factor)
            choices = [Choice(t, str(list(t))) for t in tiles]
            if decision not in tiles and _is_tiling(decision, site):
                choices.append(Choice(decision, str(list(decision))))  # legal, past the cap
            subject = f'loop "{site.loop}" (extent {site.extent}) in {count(site.n, "tile")}'
            return DecisionChoices(step, inst.kind, decision, tuple(choices), total, subject,
                                   truncated=len(tiles) < total)
        if isinstance(site, _LocationSite):
            cands = compute_location_candidates(site.func, site.block)
            choices = tuple(Choice(d, _location_label(d, t)) for d, t in cands)
            return DecisionChoices(step, inst.kind, decision, choices, len(choices),
                                   f'block "{site.block}"')
        return None

    def set_decision(self, step: int, decision: Any) -> bool:
        """Replace the decision of the sampling instruction at ``step`` and replay.

        All or nothing: if the new decision is refused, or makes the replay stop
        earlier than it did, the trace and IR stay as they were, :attr:`error` says
        why and the result is False. A successful edit clears the last error and
        returns True. The current step is kept (moved back if the trace got shorter).
        """
        step = self._check_any_step(step)
        inst = self._inst(step)
        if inst is None or not inst.spec.sampling:
            what = f"`{self.instruction(step)}`" if step else "the original function"
            raise ValueError(
                f"step {step} ({what}) samples no decision; the sampling steps are "
                f"{self.sampling_steps()}"
            )
        try:
            new_trace = self.trace.with_decision(step - 1, decision)
        except ScheduleError as e:
            self._action_error = e
            return False
        result = _replay(new_trace, self._module)
        failed = result.failure
        if failed is not None and (self.failure is None or failed.step < self.failure.step):
            shown = list(decision) if isinstance(decision, tuple) else decision
            cause = failed.error
            self._action_error = TraceError(
                "set_decision",
                f"decision {shown!r} for step {step} refused: {failed.message}",
                cause.func,
                cause.loops,
                cause.blocks,
            )
            return False
        self._adopt(result)
        self._action_error = None
        self._step = min(self._step, self.last_step)
        return True

    def decisions_summary(self, trace: Trace | None = None) -> str:
        """The sampled decisions of ``trace`` (the current one by default) in a line:
        ``step 3: [8, 16]; step 9: 64``."""
        trace = trace or self.trace
        parts = []
        for n, inst in enumerate(trace.insts):
            if not inst.spec.sampling:
                continue
            d = inst.decision
            if inst.kind == "SampleCategorical" and isinstance(d, int):
                text = f"{inst.arg('candidates')[d]}"
            elif isinstance(d, (list, tuple)):
                text = str(list(d))
            else:
                text = str(d)
            parts.append(f"step {n + 1}: {text}")
        return "; ".join(parts)

    # ----------------------------------------------------------------- measuring
    def peak_gflops(self) -> float | None:
        """The machine's float32 peak (``wb.peak_gflops()``), once per model."""
        if self._peak is None:
            from ..runtime.peak import peak_gflops

            self._peak = peak_gflops()
        return self._peak

    def measure(
        self,
        step: int | None = None,
        *,
        repeat: int = 5,
        min_repeat_ms: float = 50,
        timeout: float = 10.0,
    ) -> MeasureRecord:
        """Build the IR at ``step`` (the whole trace by default) and time it in an
        isolated worker process (``wb.measure(kernel, isolated=True)``), so a kernel
        that crashes or hangs cannot take the notebook down. Returns the record, also
        appended to :attr:`measurements`. Raises ``MeasureError`` (crash, timeout),
        ``CompileError``/``CodegenError``, or ValueError when the trace does not
        replay that far.
        """
        from ..runtime.cpu import build
        from ..runtime.isolation import measure_isolated

        if step is None:
            if self.failure is not None:
                raise ValueError(
                    f"the trace does not replay past step {self.failure.step}; fix it or "
                    f"measure an earlier step (measure(step={self.failure.step - 1}))"
                )
            step = self.num_steps
        step = self._check_step(step)
        if self.failure is not None and step == self.failure.step:
            raise ValueError(f"step {step} failed; measure an earlier step")
        kernel = build(self._result.states[step])
        m = measure_isolated(kernel, repeat=repeat, min_repeat_ms=min_repeat_ms, timeout=timeout)
        record = MeasureRecord(
            Trace(self.trace.insts[:step]), step, m, self.peak_gflops(),
            self.decisions_summary(Trace(self.trace.insts[:step])),
        )
        self.measurements.append(record)
        return record


def _is_tiling(decision: Any, site: _TileSite) -> bool:
    return (
        isinstance(decision, tuple)
        and len(decision) == site.n
        and all(isinstance(t, int) and t >= 1 for t in decision)
        and math.prod(decision) == site.extent
        and (site.max_innermost_factor == -1 or decision[-1] <= site.max_innermost_factor)
    )


def _location_label(decision: int, target: Any) -> str:
    if isinstance(target, LocationMark):
        return f"{decision}: {target.name}"
    return f"{decision}: loop {target.name}"

