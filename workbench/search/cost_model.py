"""A cheap learned cost model: kernel ridge regression on features of the loop nest.

The evolutionary search can use it to rank children before measuring them. It is fit
on the candidates measured so far (log latency) and predicts the latency of new ones;
only the order of the predictions matters.

Features of a candidate (all log2-scaled where they are sizes):

* its decisions, position by position in the trace (the genome): each tile size of a
  ``sample_perfect_tile``, a one-hot of each ``sample_categorical`` choice, the
  ``sample_compute_location`` decision;
* per number of tile levels, the tile volume at each level and inside it (the
  product of tile sizes per level, over all loops tiled that way);
* its loop nest around the statement executed most often: the extents of the
  innermost 1, 2, 3, 4 and 6 loops multiplied together, and the extents of its
  vectorized, parallel and unrolled loops; numeric loop annotations (an unroll step).

:class:`CostModel` is a kernel ridge regression (Gaussian kernel) on the standardised
features, fit with numpy: it can represent an optimum in the middle of a range (a
tile neither too small nor too large) and interactions between decisions.

>>> import math, workbench as wb
>>> from workbench.search.evolutionary import CandidateFactory
>>> func = wb.workloads.matmul(64, 64, 64)
>>> def space(sch):
...     i, j, k = sch.get_loops(sch.get_block("C"))
...     sch.split(j, factors=sch.sample_perfect_tile(j, n=2, max_innermost_factor=64))
>>> factory = CandidateFactory(func, space)
>>> cands = [c for c in (factory.sample(s) for s in range(40)) if c is not None]
>>> def latency(c):  # fastest with an inner tile of 16, slower away from it
...     inner = int(c.decisions.split("x")[1])
...     return 1e-3 * 2.0 ** ((math.log2(inner) - 4) ** 2)
>>> model = CostModel().fit(cands, [latency(c) for c in cands])
>>> predicted = model.predict(cands)
>>> len(cands), cands[predicted.index(min(predicted))].decisions
(7, '4x16')
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..ir import BufferStore, For, IfThenElse, SeqStmt, Stmt
from ..ir.stmt import Block
from .evolutionary import Candidate
from .mutators import sampling_steps

__all__ = ["CostModel", "candidate_features", "loop_nest_features"]


def _log2(x: float) -> float:
    return math.log2(max(float(x), 1.0))


def _store_paths(s: Stmt, loops: list[For], out: list[list[For]]) -> None:
    if isinstance(s, For):
        _store_paths(s.body, loops + [s], out)
    elif isinstance(s, SeqStmt):
        for x in s.stmts:
            _store_paths(x, loops, out)
    elif isinstance(s, IfThenElse):
        _store_paths(s.then_case, loops, out)
        if s.else_case is not None:
            _store_paths(s.else_case, loops, out)
    elif isinstance(s, Block):
        _store_paths(s.body, loops, out)
    elif isinstance(s, BufferStore):
        out.append(loops)


def loop_nest_features(mod) -> dict[str, float]:
    """Features of the loop nest around the statement that runs most often.

    >>> import workbench as wb
    >>> sch = wb.Schedule(wb.workloads.matmul(64, 64, 64))
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> j0, j1 = sch.split(j, factors=[None, 8])
    >>> sch.reorder(i, j0, k, j1)
    >>> sch.vectorize(j1)
    >>> f = loop_nest_features(sch.mod)
    >>> f["inner1"], f["vectorized"], f["parallel"]
    (3.0, 3.0, 0.0)
    """
    paths: list[list[For]] = []
    for _, func in mod.functions:
        _store_paths(func.body, [], paths)
    if not paths:
        return {}
    path = max(paths, key=lambda p: (math.prod(lp.extent for lp in p), len(p)))
    extents = [lp.extent for lp in path]
    feats = {
        f"inner{n}": _log2(math.prod(extents[-n:])) for n in (1, 2, 3, 4, 6)
    }
    for kind, name in (("vectorized", "vectorized"), ("parallel", "parallel"),
                       ("unrolled", "unrolled")):
        feats[name] = _log2(math.prod(lp.extent for lp in path if lp.kind == kind))
    feats["depth"] = float(len(path))
    for lp in path:
        for key, value in lp.annotations:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                feats[f"ann:{key}"] = _log2(1 + value)
    return feats


def candidate_features(candidate: Candidate) -> dict[str, float]:
    """Named features of a candidate: its decisions (by trace position) and its loop
    nest (:func:`loop_nest_features`)."""
    trace = candidate.trace
    feats: dict[str, float] = {}
    for i in sampling_steps(trace):
        inst = trace.insts[i]
        if inst.kind == "SamplePerfectTile":
            tiles = inst.decision
            n = len(tiles)
            for level, t in enumerate(tiles):
                feats[f"{i}:tile{level}"] = _log2(t)
                # over all loops tiled into n levels: the tile volume at each level
                # and inside it (the footprint of a tile of the output, or of the
                # reduction, at that depth)
                key = f"level{n}:{level}"
                feats[key] = feats.get(key, 0.0) + _log2(t)
                key = f"within{n}:{level}"
                feats[key] = feats.get(key, 0.0) + _log2(math.prod(tiles[level:]))
        elif inst.kind == "SampleCategorical":
            feats[f"{i}:cat{inst.decision}"] = 1.0
        elif inst.kind == "SampleComputeLocation":
            feats[f"{i}:loc"] = float(inst.decision)
            feats[f"{i}:loc{inst.decision}"] = 1.0
    feats.update(loop_nest_features(candidate.mod))
    return feats


class CostModel:
    """Kernel ridge regression (an RBF kernel) of log latency on standardised features.

    ``fit(candidates, latencies)`` learns from measured candidates (seconds);
    ``predict(candidates)`` returns predicted latencies (seconds), used only to rank.
    The kernel width and the ridge penalty are chosen among :attr:`WIDTHS` x
    :attr:`ALPHAS` by leave-one-out error, computed in closed form. On measured matmul
    candidates this ranks held-out schedules better than a linear or quadratic ridge
    (see the search's report); far from anything measured it predicts the mean.
    """

    WIDTHS = (0.3, 1.0, 3.0)  # gamma = width / number of features
    ALPHAS = (0.01, 0.1, 1.0)

    def __init__(self) -> None:
        self.names: list[str] = []
        self.gamma: float | None = None
        self.alpha: float | None = None
        self._mean = self._scale = self._train = self._coef = None
        self._bias = 0.0

    def _standardised(self, candidates: Sequence[Candidate]) -> np.ndarray:
        rows = [candidate_features(c) for c in candidates]
        x = np.array([[r.get(n, 0.0) for n in self.names] for r in rows], dtype=float)
        return (x.reshape(len(rows), len(self.names)) - self._mean) / self._scale

    @staticmethod
    def _sq_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.maximum(
            (a**2).sum(1)[:, None] + (b**2).sum(1)[None, :] - 2.0 * a @ b.T, 0.0
        )

    def fit(self, candidates: Sequence[Candidate], latencies: Sequence[float]) -> CostModel:
        """Fit on measured ``candidates`` and their ``latencies`` (seconds, > 0)."""
        if len(candidates) != len(latencies):
            raise ValueError(
                f"fit: {len(candidates)} candidates but {len(latencies)} latencies"
            )
        if not candidates:
            raise ValueError("fit: no measured candidates to learn from")
        y = np.log(np.asarray(latencies, dtype=float))
        if not np.all(np.isfinite(y)):
            raise ValueError("fit: latencies must be finite and positive")
        rows = [candidate_features(c) for c in candidates]
        self.names = sorted(set().union(*rows))
        x = np.array([[r.get(n, 0.0) for n in self.names] for r in rows], dtype=float)
        x = x.reshape(len(rows), len(self.names))
        self._mean = x.mean(axis=0)
        self._scale = x.std(axis=0)
        self._scale[self._scale == 0] = 1.0
        z = (x - self._mean) / self._scale
        self._bias = float(y.mean())
        target = y - self._bias
        dist = self._sq_dist(z, z)
        eye = np.eye(len(z))
        best = None
        for width in self.WIDTHS:
            gamma = width / max(len(self.names), 1)
            kernel = np.exp(-gamma * dist)
            for alpha in self.ALPHAS:
                hat = kernel @ np.linalg.inv(kernel + alpha * eye)
                loo = (target - hat @ target) / np.maximum(1.0 - np.diag(hat), 1e-6)
                error = float(np.mean(loo**2))
                if best is None or error < best[0]:
                    best = (error, gamma, alpha, kernel)
        _, self.gamma, self.alpha, kernel = best
        self._coef = np.linalg.solve(kernel + self.alpha * eye, target)
        self._train = z
        return self

    def predict(self, candidates: Sequence[Candidate]) -> list[float]:
        """Predicted latencies (seconds) of ``candidates``."""
        if self._coef is None:
            raise ValueError("predict: the model has not been fit yet")
        kernel = np.exp(-self.gamma * self._sq_dist(self._standardised(candidates), self._train))
        return [float(v) for v in np.exp(kernel @ self._coef + self._bias)]
