"""Search strategies over traces: random sampling and MetaSchedule-style evolution.

Both strategies hand out *candidates* (a trace, its scheduled module and the hash of
its generated C) in batches through ``propose(n)`` and learn the measured latency of
each through ``tell(candidate, latency)``. They never measure anything themselves;
:func:`workbench.search.tune` builds and times what they propose.

* :class:`RandomSearch` applies the design space to fresh schedules with new seeds.
* :class:`EvolutionarySearch` starts with a random population, then mutates the
  decisions of the best measured traces (:mod:`workbench.search.mutators`), replays
  each child on a fresh schedule (children that no longer replay are discarded),
  mixes in a few random samples (epsilon-greedy) and, with a cost model, proposes the
  children the model ranks best.

Every candidate is new: the :class:`CandidateFactory` discards a trace (by its JSON)
or a program (by its C source hash) that was proposed before, so nothing is measured
twice. All randomness comes from the ``random.Random`` given, so a seed fixes the
whole search.

>>> import random, workbench as wb
>>> func = wb.workloads.matmul(64, 64, 64)
>>> def space(sch):
...     i, j, k = sch.get_loops(sch.get_block("C"))
...     sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
>>> search = RandomSearch(CandidateFactory(func, space), random.Random(0))
>>> [c.decisions for c in search.propose(2)]
['4x16', '32x2']
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..codegen.c import generate_c_source
from ..ir import IRModule, PrimFunc
from ..ir.transform import lower
from ..schedule import Schedule, ScheduleError, Trace
from .mutators import mutate, sampling_steps

__all__ = [
    "Candidate",
    "CandidateFactory",
    "EvolutionarySearch",
    "RandomSearch",
    "describe_decisions",
    "trace_key",
]

Space = Callable[[Schedule], "Schedule | None"]


def trace_key(trace_json: list) -> str:
    """Canonical text of a trace's JSON (``Trace.as_json_obj()``), for comparing traces.

    >>> trace_key([[["GetBlock", [], ["C", "main"], ["b0"]]], []])
    '[[["GetBlock",[],["C","main"],["b0"]]],[]]'
    """
    return json.dumps(trace_json, separators=(",", ":"))


def describe_decisions(trace: Trace) -> str:
    """The trace's decisions in a compact line: tiles as ``8x16``, a categorical
    choice as ``=value``, a compute location as ``@decision``.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(16, 16, 16), seed=0)
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> _ = sch.sample_perfect_tile(j, n=2, decision=[4, 4])
    >>> _ = sch.sample_categorical([0, 16, 64], [1, 1, 1], decision=2)
    >>> describe_decisions(sch.trace)
    '4x4 =64'
    """
    parts = []
    for i in sampling_steps(trace):
        inst = trace.insts[i]
        if inst.kind == "SamplePerfectTile":
            parts.append("x".join(str(t) for t in inst.decision))
        elif inst.kind == "SampleCategorical":
            parts.append(f"={inst.arg('candidates')[inst.decision]}")
        elif inst.kind == "SampleComputeLocation":
            parts.append(f"@{inst.decision}")
        else:  # a sampling kind registered later
            parts.append(f"{inst.kind}={inst.decision}")
    return " ".join(parts)


@dataclass(eq=False)
class Candidate:
    """A schedule to measure: its ``trace`` (the genome), the scheduled ``mod``, the
    ``key`` of its trace JSON and the hash of its generated C source."""

    trace: Trace
    mod: IRModule
    key: str
    source_hash: str
    origin: str = "random"  # "random" | "mutant"
    device: Any = None  # GPU targets: the planned DeviceModule (lower_for_gpu)

    @property
    def trace_json(self) -> list:
        return self.trace.as_json_obj()

    @property
    def decisions(self) -> str:
        return describe_decisions(self.trace)


@dataclass
class CandidateFactory:
    """Makes candidates of ``func`` from the design space ``space`` (sampled with a
    seed) or from a trace (replayed), and refuses any it has made before.

    ``space(sch)`` calls sampling primitives on ``sch`` and may return a schedule (used
    instead of ``sch``) or None. A space or replay that raises :class:`ScheduleError`
    gives no candidate (``None``); ``rejected`` counts those and ``duplicates`` the
    candidates refused as seen before (same trace, or a different trace that generates
    the same C). For a GPU ``target`` (``"cuda"``, a Target...) the candidate is
    planned for the GPU (``lower_for_gpu``) and compared by its CUDA source; one the
    planner refuses (too many threads or too much shared memory: ``GpuError``) is
    rejected too.
    """

    func: PrimFunc | IRModule
    space: Space
    target: Any = "c"  # "c", or a GPU target (string, dict or Target)
    seen_traces: set[str] = field(default_factory=set)
    seen_sources: set[str] = field(default_factory=set)
    rejected: int = 0
    duplicates: int = 0

    def _finish(self, sch: Schedule, origin: str) -> Candidate | None:
        key = trace_key(sch.trace.as_json_obj())
        if key in self.seen_traces:
            self.duplicates += 1
            return None
        self.seen_traces.add(key)
        device = None
        if self._gpu_target() is None:
            source = generate_c_source(lower(sch.mod)).text
        else:
            from ..codegen.cuda import generate_cuda
            from ..codegen.gpu import GpuError, lower_for_gpu

            try:
                _, device = lower_for_gpu(sch.mod, self._gpu_target())
            except GpuError:
                self.rejected += 1
                return None
            source = generate_cuda(device)
        source_hash = hashlib.sha256(source.encode()).hexdigest()[:16]
        if source_hash in self.seen_sources:
            self.duplicates += 1
            return None
        self.seen_sources.add(source_hash)
        return Candidate(sch.trace, sch.mod, key, source_hash, origin, device)

    def _gpu_target(self) -> Any:
        """The target as a GPU Target, or None for the CPU."""
        if self.target == "c":
            return None
        from ..target import Target

        tgt = Target.from_any(self.target)
        return tgt if tgt.is_gpu else None

    def sample(self, seed: int) -> Candidate | None:
        """Apply the space to ``Schedule(func, seed=seed)``; None if it refused or the
        result was seen before."""
        sch = Schedule(self.func, seed=seed)
        try:
            out = self.space(sch)
        except ScheduleError:
            self.rejected += 1
            return None
        if isinstance(out, Schedule):
            sch = out
        return self._finish(sch, "random")

    def replay(self, trace: Trace, origin: str = "mutant") -> Candidate | None:
        """Replay ``trace`` on a fresh schedule of ``func``; None if a step no longer
        fits or the result was seen before."""
        key = trace_key(trace.as_json_obj())
        if key in self.seen_traces:
            self.duplicates += 1
            return None
        sch = Schedule(self.func)
        try:
            trace.apply_to_schedule(sch)
        except ScheduleError:
            self.rejected += 1
            self.seen_traces.add(key)
            return None
        return self._finish(sch, origin)


class RandomSearch:
    """Draw candidates from the design space with fresh seeds.

    ``max_tries`` bounds the draws per requested candidate: a small space runs out of
    new candidates, and ``propose`` then returns fewer than asked (none when the space
    is exhausted).
    """

    name = "random"

    def __init__(self, factory: CandidateFactory, rng: random.Random, max_tries: int = 50):
        self.factory = factory
        self.rng = rng
        self.max_tries = max_tries

    def _draw(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        misses = 0
        while len(out) < n and misses < self.max_tries * max(n, 1):
            cand = self.factory.sample(self.rng.getrandbits(32))
            if cand is None:
                misses += 1
            else:
                out.append(cand)
        return out

    def propose(self, n: int) -> list[Candidate]:
        """Up to ``n`` new random candidates."""
        return self._draw(n)

    def tell(self, candidate: Candidate, latency: float | None) -> None:
        """Random search learns nothing from measurements."""


class EvolutionarySearch(RandomSearch):
    """MetaSchedule-style evolutionary search over the decisions of traces.

    The first ``init_random`` candidates are random. After that each batch holds a
    share ``epsilon`` of random candidates and children of the measured traces: a
    parent is drawn among the ``elite`` fastest (weighted towards the fastest), one to
    three of its decisions are mutated, and the child is replayed. With a
    ``cost_model`` (anything with ``fit(candidates, latencies)`` and
    ``predict(candidates) -> latencies``, see :mod:`workbench.search.cost_model`),
    ``pool`` times as many children are made and the ones it predicts fastest are
    proposed.
    """

    name = "evolutionary"

    def __init__(
        self,
        factory: CandidateFactory,
        rng: random.Random,
        *,
        init_random: int = 16,
        epsilon: float = 0.125,
        elite: int = 8,
        cost_model: Any = None,
        pool: int = 8,
        max_tries: int = 50,
    ):
        super().__init__(factory, rng, max_tries)
        self.init_random = init_random
        self.epsilon = epsilon
        self.elite = elite
        self.cost_model = cost_model
        self.pool = pool
        self.measured: list[tuple[Candidate, float]] = []  # latency inf for failures

    def tell(self, candidate: Candidate, latency: float | None) -> None:
        """Remember a measured candidate (``None``: it failed)."""
        self.measured.append((candidate, math.inf if latency is None else latency))

    def _parents(self) -> tuple[list[Candidate], list[float]]:
        ok = sorted(
            ((c, lat) for c, lat in self.measured if math.isfinite(lat)),
            key=lambda x: x[1],
        )[: self.elite]
        if not ok:
            return [], []
        best = ok[0][1]
        # fitness relative to the best, sharpened: the best is picked most often
        return [c for c, _ in ok], [(best / lat) ** 4 for _, lat in ok]

    def _child(self, parents: list[Candidate], weights: list[float]) -> Candidate | None:
        parent = self.rng.choices(parents, weights=weights)[0]
        trace = parent.trace
        changes = 1 + (self.rng.random() < 0.3) + (self.rng.random() < 0.1)
        for _ in range(changes):
            mutated = mutate(trace, self.factory.func, self.rng)
            if mutated is None:
                break
            trace = mutated[0]
        if trace is parent.trace:
            return None
        return self.factory.replay(trace)

    def _children(self, n: int) -> list[Candidate]:
        parents, weights = self._parents()
        if not parents:
            return []
        out: list[Candidate] = []
        misses = 0
        while len(out) < n and misses < self.max_tries * max(n, 1):
            child = self._child(parents, weights)
            if child is None:
                misses += 1
            else:
                out.append(child)
        return out

    def _model_ready(self) -> bool:
        return self.cost_model is not None and sum(
            math.isfinite(lat) for _, lat in self.measured
        ) >= 4

    def propose(self, n: int) -> list[Candidate]:
        """Up to ``n`` new candidates: random ones while the population is young,
        then mostly children of the best measured traces."""
        if len(self.measured) < self.init_random:
            return self._draw(min(n, self.init_random - len(self.measured)) or n)
        n_random = min(n, max(0, round(self.epsilon * n)))
        n_children = n - n_random
        if self._model_ready():
            ok = [(c, lat) for c, lat in self.measured if math.isfinite(lat)]
            self.cost_model.fit([c for c, _ in ok], [lat for _, lat in ok])
            pool = self._children(n_children * self.pool)
            if pool:
                predicted = self.cost_model.predict(pool)
                order = sorted(range(len(pool)), key=lambda i: (predicted[i], i))
                children = [pool[i] for i in order[:n_children]]
                # the ones not proposed may be made again later: forget them
                for i in order[n_children:]:
                    self.factory.seen_traces.discard(pool[i].key)
                    self.factory.seen_sources.discard(pool[i].source_hash)
            else:
                children = []
        else:
            children = self._children(n_children)
        randoms = self._draw(n - len(children))
        return children + randoms
