"""Shared helpers for the test suite: small workloads, golden files, error and
trace-replay assertions.

They live in the package (not in ``tests/``) so that the tests of every layer, the
notebooks and downstream users can check their schedules the same way.

>>> import workbench as wb
>>> from workbench.testing import mm_relu_func, roundtrip_trace
>>> func = mm_relu_func(16)
>>> sch = wb.Schedule(func)
>>> i, j, k = sch.get_loops(sch.get_block("Y"))
>>> j0, j1 = sch.split(j, factors=[None, 4])
>>> roundtrip_trace(sch, func)   # JSON and Python text both replay to the same IR
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .ir import Block, Buffer, BufferStore, For, IRModule, IterVar, PrimFunc, SeqStmt, Var
from .schedule import Schedule, ScheduleError, Trace

__all__ = [
    "GOLDEN_DIR",
    "assert_ir_unchanged",
    "assert_schedule_error",
    "assert_verifies",
    "chain_func",
    "check_golden",
    "conv2d_func",
    "matmul_func",
    "mm_relu_func",
    "roundtrip_trace",
    "shared_outer_loop_func",
    "transpose_func",
    "write_golden",
]

#: Golden IR text files, one ``<name>.txt`` per before/after case.
GOLDEN_DIR = Path(__file__).resolve().parent.parent / "tests" / "golden"


# ---------------------------------------------------------------------------
# workloads: wb.workloads where it has them, plus a few shapes it lacks (built with TE
# or IR nodes), all small enough for fast numerical checks


def mm_relu_func(n: int = 128, m: int | None = None, k: int | None = None) -> PrimFunc:
    """The MLC course's ``mm_relu`` (``wb.workloads.mm_relu``): ``Y = A @ B`` (block
    ``"Y"``, loops ``i, j, k``) then ``C = relu(Y)`` (block ``"C"``). ``A`` is
    ``(n, k)``, ``B`` is ``(k, m)``; ``m`` and ``k`` default to ``n``."""
    from . import workloads

    return workloads.mm_relu(n, n if m is None else m, n if k is None else k)


def matmul_func(m: int = 16, n: int = 16, k: int = 16) -> PrimFunc:
    """``wb.workloads.matmul``: ``C[i, j] = sum_k A[i, k] * B[k, j]``, one block ``"C"``."""
    from . import workloads

    return workloads.matmul(m, n, k)


def chain_func(n: int = 16, m: int | None = None) -> PrimFunc:
    """Three elementwise stages ``A -> B -> C -> D`` (blocks ``"B"``, ``"C"``, ``"D"``,
    intermediates ``B`` and ``C`` allocated in the function ``chain``)."""
    from . import te

    m = n if m is None else m
    A = te.placeholder((n, m), "float32", name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] + 1.0, name="C")
    D = te.compute((n, m), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return te.create_prim_func([A, D], name="chain")


def pool_chain_func(channels: int = 4, width: int = 8, window: int = 3) -> PrimFunc:
    """Two 1-D sliding-window sums ``A -> B -> C`` over int32 (blocks ``"B"`` and
    ``"C"``, loops ``c, i, k``; function ``pool``): ``B[c, i] = sum_k A[c, i + k]``,
    ``C[c, i] = sum_k B[c, i + k]``, the shape of TVM's rolling_buffer example."""
    from . import te

    n_b = width + window - 1
    A = te.placeholder((channels, n_b + window - 1), "int32", name="A")
    k = te.reduce_axis(window, name="k")
    B = te.compute((channels, n_b), lambda c, i: te.sum(A[c, i + k], axis=k), name="B")
    k2 = te.reduce_axis(window, name="k")
    C = te.compute((channels, width), lambda c, i: te.sum(B[c, i + k2], axis=k2), name="C")
    return te.create_prim_func([A, C], name="pool")


def matmul_bias_func(n: int = 16, dtype: str = "float32", relu: bool = False) -> PrimFunc:
    """``C = A @ B`` (reduction block ``"C"``, intermediate ``C``) then the epilogue
    ``D = C + Bias`` (block ``"D"``; with ``relu``, ``D = max(C + Bias, 0)``), the
    shape ``fuse_reduction_epilogue`` takes (function ``matmul_bias``)."""
    from . import te

    A = te.placeholder((n, n), dtype, name="A")
    B = te.placeholder((n, n), dtype, name="B")
    Bias = te.placeholder((n, n), dtype, name="Bias")
    k = te.reduce_axis(n, name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    if relu:
        D = te.compute((n, n), lambda i, j: te.max(C[i, j] + Bias[i, j], 0.0), name="D")
    else:
        D = te.compute((n, n), lambda i, j: C[i, j] + Bias[i, j], name="D")
    return te.create_prim_func([A, B, Bias, D], name="matmul_bias")


def transpose_func(m: int = 8, n: int = 12) -> PrimFunc:
    """``wb.workloads.transpose``: ``B[j, i] = A[i, j]`` for ``A (m, n)``, block ``"B"``
    over loops ``j, i``."""
    from . import workloads

    return workloads.transpose(m, n)


def conv2d_func(n: int = 1, c: int = 2, hw: int = 6, k: int = 3, r: int = 3) -> PrimFunc:
    """A small ``wb.workloads.conv2d_nchw`` (padding 1, stride 1): blocks ``"pad"``
    (loops ``n, c, h, w``) and ``"conv"`` (loops ``n, k, h, w, rc, ry, rx``)."""
    from . import workloads

    return workloads.conv2d_nchw(n, c, hw, hw, k, r, r)


def shared_outer_loop_func(n: int = 8) -> PrimFunc:
    """Two nests under one outer loop (built from IR nodes; TE cannot express it)::

        for i in range(n):
            for j in range(n):      # block "B": B[i, j] = A[i, j] * 2
            for jj in range(n):     # block "C": C[i, jj] = B[i, jj] * 2

    Loop ``i``'s body is a sequence, so ``i`` is not a single chain with ``j``.
    """
    A, B, C = (Buffer(x, (n, n), "float32") for x in "ABC")

    def block(name: str, out: Buffer, inp: Buffer, i: Var, j: Var) -> Block:
        vi, vj = Var("vi"), Var("vj")
        store = BufferStore(out, inp[vi, vj] * 2.0, (vi, vj))
        return Block(name, (IterVar(vi, n), IterVar(vj, n)), (i, j), store)

    i, j, jj = Var("i"), Var("j"), Var("jj")
    body = For(
        i,
        n,
        "serial",
        SeqStmt(
            (
                For(j, n, "serial", block("B", B, A, i, j)),
                For(jj, n, "serial", block("C", C, B, i, jj)),
            )
        ),
    )
    return PrimFunc("shared_outer", (A, B, C), Block("root", (), (), body))


# ---------------------------------------------------------------------------
# assertions


def _text(x: Schedule | IRModule | PrimFunc) -> str:
    if isinstance(x, Schedule):
        return x.mod.script()
    return x.script()


def assert_ir_unchanged(sch: Schedule | IRModule | PrimFunc, before_text: str) -> None:
    """Assert ``sch`` (or a module/function) still prints exactly ``before_text``."""
    after = _text(sch)
    if after != before_text:
        diff = "\n".join(
            difflib.unified_diff(
                before_text.splitlines(), after.splitlines(), "before", "after", lineterm=""
            )
        )
        raise AssertionError(f"the IR changed:\n{diff}")


def _names_in(message: str, name: str) -> bool:
    """``name`` occurs in ``message`` as a whole identifier (``j`` is not found in
    ``j_0``)."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", message) is not None


def assert_schedule_error(
    sch: Schedule,
    fn: Callable[[], Any],
    cls: type[ScheduleError],
    *names: str,
) -> ScheduleError:
    """Call ``fn()`` and assert it refuses with ``cls`` without touching ``sch``.

    Checks: the exception is an instance of ``cls`` (a :class:`ScheduleError`),
    its message starts with the primitive's name and names each of ``names`` (loop
    or block names, as whole words), and ``sch`` kept its module (same object, same
    text) and its trace (same length, same text). Returns the exception.

    >>> import workbench as wb
    >>> from workbench.testing import assert_schedule_error, mm_relu_func
    >>> sch = wb.Schedule(mm_relu_func(16))
    >>> i, j, k = sch.get_loops(sch.get_block("Y"))
    >>> from workbench.schedule import NotDataParallelError
    >>> e = assert_schedule_error(sch, lambda: sch.parallel(k), NotDataParallelError, "k", "Y")
    """
    assert issubclass(cls, ScheduleError), f"{cls} is not a ScheduleError"
    mod_before = sch.mod
    text_before = mod_before.script()
    trace_before = sch.trace
    trace_text_before = trace_before.script()
    try:
        fn()
    except ScheduleError as e:
        err = e
    else:
        raise AssertionError(f"expected {cls.__name__}, but nothing was raised")
    assert isinstance(err, cls), f"expected {cls.__name__}, got {type(err).__name__}: {err}"
    message = str(err)
    assert message.startswith(f"{err.primitive}: "), (
        f"message does not start with the primitive's name {err.primitive!r}: {message}"
    )
    for name in names:
        assert _names_in(message, name), f"message does not name {name!r}: {message}"
    assert sch.mod is mod_before, "a refused primitive replaced the schedule's module"
    assert_ir_unchanged(sch, text_before)
    assert len(sch.trace) == len(trace_before), (
        f"a refused primitive changed the trace length {len(trace_before)} -> {len(sch.trace)}"
    )
    assert sch.trace.script() == trace_text_before, "a refused primitive changed the trace"
    return err


def roundtrip_trace(sch: Schedule, func: PrimFunc | IRModule) -> None:
    """Replay ``sch.trace`` on fresh schedules of ``func`` through JSON text, the
    parsed JSON list, classic Python text and tirx Python text; each replay must
    give exactly ``sch``'s IR and print the same trace."""
    want_ir = sch.mod.script()
    want_trace = sch.trace.script()
    trace = sch.trace
    loaded = {
        "json": Trace.from_json(trace.as_json()),
        "json-list": Trace.from_json(trace.as_json_obj()),
        "python": Trace.from_python(trace.script()),
        "python-tirx": Trace.from_python(trace.script(syntax="tirx")),
    }
    for how, replay in loaded.items():
        fresh = Schedule(func)
        replay.apply_to_schedule(fresh)
        got_ir = fresh.mod.script()
        if got_ir != want_ir:
            diff = "\n".join(
                difflib.unified_diff(
                    want_ir.splitlines(),
                    got_ir.splitlines(),
                    "scheduled",
                    f"replayed ({how})",
                    lineterm="",
                )
            )
            raise AssertionError(f"trace replayed via {how} gives different IR:\n{diff}")
        assert fresh.trace.script() == want_trace, (
            f"trace replayed via {how} records a different trace:\n"
            f"{fresh.trace.script()}\n--- expected ---\n{want_trace}"
        )
        assert fresh.trace.as_json() == trace.as_json(), f"JSON differs after replay via {how}"


def assert_verifies(
    scheduled: Schedule | IRModule | PrimFunc, reference: PrimFunc | IRModule
) -> None:
    """Compile ``scheduled`` and ``reference`` and compare their outputs on random
    inputs (``workbench.runtime.verify.verify``); fails the test on a mismatch."""
    from .runtime.verify import verify

    if isinstance(scheduled, Schedule):
        scheduled = scheduled.mod
    result = verify(scheduled, reference)
    assert result is not False, f"verify({scheduled!r}) reported a mismatch"
    ok = getattr(result, "ok", True)
    assert ok, f"verify reported a mismatch: {result!r}"


# ---------------------------------------------------------------------------
# golden files


def _golden_path(name: str) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"golden name {name!r} must be a plain file name")
    return GOLDEN_DIR / f"{name}.txt"


def check_golden(name: str, text: str) -> None:
    """Assert ``text`` equals ``tests/golden/<name>.txt``; on a mismatch the error
    shows a unified diff. Regenerate a file deliberately with :func:`write_golden`
    (e.g. ``python tests/test_schedule_loops.py --update-golden``) and review the diff."""
    path = _golden_path(name)
    if not path.exists():
        raise AssertionError(
            f"golden file {path} is missing; write it with write_golden({name!r}, text) "
            f"and review it. Text:\n{text}"
        )
    want = path.read_text()
    got = text if text.endswith("\n") else text + "\n"
    if got != want:
        diff = "\n".join(
            difflib.unified_diff(
                want.splitlines(), got.splitlines(), f"golden/{name}.txt", "actual", lineterm=""
            )
        )
        raise AssertionError(f"IR differs from golden file {path}:\n{diff}")


def write_golden(name: str, text: str) -> Path:
    """Write ``tests/golden/<name>.txt`` (used only when regenerating goldens)."""
    path = _golden_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") else text + "\n")
    return path


# ---------------------------------------------------------------------------
# memory-access checks on the IR (no compilation)


def access_problems(
    x: Schedule | IRModule | PrimFunc, *, max_points: int = 1 << 20, limit: int = 5
) -> list[str]:
    """Problems with the memory accesses of every function of ``x``, found by running
    each loop nest over all its iterations at once (numpy grids, one axis per loop),
    wherever the enclosing predicates, ``if`` conditions, ``Select`` branches and
    ``&&``/``||`` operands let the access happen:

    * a block binding outside its iter var's ``[0, extent)``;
    * a load or store outside its buffer's shape;
    * a load of an element of a buffer allocated in the function (not a parameter)
      that no statement before it in program order has stored (the order inside a
      loop nest is approximated: all iterations of an earlier statement count as
      before all iterations of a later one, which can miss a read-before-write across
      iterations but does not report correct code).

    Loaded values are taken as 0 (they never decide an index in these workloads). A
    nest with more than ``max_points`` iterations is skipped. Returns at most
    ``limit`` messages; ``[]`` means none found. Use :func:`assert_accesses_ok`.

    >>> import workbench as wb
    >>> from workbench.testing import access_problems
    >>> access_problems(wb.workloads.conv2d_nchw(1, 2, 6, 6, 2))
    []
    """
    if isinstance(x, Schedule):
        x = x.mod
    funcs = [x] if isinstance(x, PrimFunc) else [x[n] for n in x.names]
    problems: list[str] = []
    for func in funcs:
        problems.extend(_AccessChecker(func, max_points, limit).run())
    return problems[:limit]


def assert_accesses_ok(x: Schedule | IRModule | PrimFunc) -> None:
    """Assert :func:`access_problems` finds nothing (the IR is printed on failure)."""
    problems = access_problems(x)
    if problems:
        text = _text(x) if isinstance(x, (Schedule, IRModule, PrimFunc)) else str(x)
        raise AssertionError("memory-access problems:\n  " + "\n  ".join(problems) + "\n" + text)


class _AccessChecker:
    def __init__(self, func: PrimFunc, max_points: int, limit: int):
        import numpy as np

        self.np = np
        self.func = func
        self.max_points = max_points
        self.limit = limit
        self.problems: list[str] = []
        self.env: dict[Var, Any] = {}
        self.loops: list[str] = []  # loop variable names by axis
        self.extents: list[int] = []
        self.written: dict[Buffer, Any] = {}  # allocated buffer -> bool array
        self.ndim = max(1, self._depth(func.body))

    def _depth(self, s) -> int:
        from .ir import IfThenElse

        if isinstance(s, For):
            return 1 + self._depth(s.body)
        if isinstance(s, SeqStmt):
            return max((self._depth(c) for c in s.stmts), default=0)
        if isinstance(s, Block):
            return max(self._depth(s.body), self._depth(s.init) if s.init is not None else 0)
        if isinstance(s, IfThenElse):
            return max(
                self._depth(s.then_case),
                self._depth(s.else_case) if s.else_case is not None else 0,
            )
        return 0

    def run(self) -> list[str]:
        np = self.np
        if self.ndim > 60:
            return []
        mask = np.ones((1,) * self.ndim, dtype=bool)
        import warnings

        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.stmt(self.func.body, mask)
        return self.problems

    # -- reporting
    def report(self, what: str, bad) -> None:
        if len(self.problems) >= self.limit:
            return
        np = self.np
        where = np.argwhere(np.broadcast_to(bad, bad.shape))[0] if np.ndim(bad) else []
        at = ", ".join(
            f"{name}={int(v)}" for name, v in zip(self.loops, list(where)[: len(self.loops)])
        )
        self.problems.append(f"{self.func.name}: {what}" + (f" (at {at})" if at else ""))

    # -- statements
    def stmt(self, s, mask) -> None:
        from .ir import Evaluate, IfThenElse

        np = self.np
        if not np.any(mask):
            return
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.stmt(c, mask)
        elif isinstance(s, For):
            axis = len(self.loops)
            points = int(np.prod(self.extents + [s.extent], dtype=np.int64))
            if points > self.max_points or s.extent <= 0:
                self.skip(s)
                return
            shape = [1] * self.ndim
            shape[axis] = s.extent
            self.env[s.loop_var] = np.arange(s.min, s.end, dtype=np.int64).reshape(shape)
            self.loops.append(s.loop_var.name)
            self.extents.append(s.extent)
            try:
                self.stmt(s.body, mask)
            finally:
                self.loops.pop()
                self.extents.pop()
                del self.env[s.loop_var]
        elif isinstance(s, Block):
            self.block(s, mask)
        elif isinstance(s, BufferStore):
            self.expr(s.value, mask)
            idx = [self.expr(i, mask) for i in s.indices]
            ok = self.in_bounds(s.buffer, idx, mask, "stores")
            if s.buffer in self.written:
                self.mark(s.buffer, idx, ok)
        elif isinstance(s, IfThenElse):
            cond = self.expr(s.condition, mask).astype(bool)
            self.stmt(s.then_case, mask & cond)
            if s.else_case is not None:
                self.stmt(s.else_case, mask & ~cond)
        elif isinstance(s, Evaluate):
            self.expr(s.value, mask)

    def skip(self, s) -> None:
        """A nest too large to run: whatever it stores counts as stored everywhere."""
        from .ir.functor import iter_stmts

        for x in iter_stmts(s):
            if isinstance(x, Block):
                for buf in x.alloc_buffers:
                    self.written.setdefault(buf, self.np.ones(tuple(map(int, buf.shape)), bool))
            if isinstance(x, BufferStore) and x.buffer in self.written:
                self.written[x.buffer][...] = True

    def block(self, b: Block, mask) -> None:
        np = self.np
        for buf in b.alloc_buffers:
            if buf not in self.written:
                self.written[buf] = np.zeros(tuple(int(d) for d in buf.shape), dtype=bool)
        values = [self.expr(v, mask) for v in b.iter_values]
        for iv, v in zip(b.iter_vars, values):
            self.env[iv.var] = v
        mask = mask & self.expr(b.predicate, mask).astype(bool)
        for iv, v in zip(b.iter_vars, values):
            bad = mask & ((v < 0) | (v >= iv.extent))
            if np.any(bad):
                self.report(f'block "{b.name}" binds {iv.var.name} outside [0, {iv.extent})', bad)
        if b.init is not None:
            first = mask
            for iv, v in zip(b.iter_vars, values):
                if iv.kind == "R":
                    first = first & (v == 0)
            self.stmt(b.init, first)
        self.stmt(b.body, mask)

    # -- accesses
    def in_bounds(self, buf: Buffer, idx, mask, verb: str):
        np = self.np
        ok = mask
        for i, n in zip(idx, buf.shape):
            ok = ok & (i >= 0) & (i < int(n))
        bad = mask & ~ok
        if np.any(bad):
            self.report(f"{verb} {buf.name} out of bounds {tuple(buf.shape)}", bad)
        return ok

    def _points(self, idx, ok):
        np = self.np
        full = np.broadcast_shapes(ok.shape, *[np.shape(i) for i in idx])
        ok = np.broadcast_to(ok, full)
        return tuple(np.broadcast_to(i, full)[ok].astype(np.int64) for i in idx)

    def mark(self, buf: Buffer, idx, ok) -> None:
        if not self.np.any(ok):
            return
        self.written[buf][self._points(idx, ok)] = True

    def load(self, e, mask):
        np = self.np
        idx = [self.expr(i, mask) for i in e.indices]
        ok = self.in_bounds(e.buffer, idx, mask, "loads")
        written = self.written.get(e.buffer)
        if written is not None and np.any(ok):
            points = self._points(idx, ok)
            if not np.all(written[points]):
                full = np.broadcast_shapes(ok.shape, *[np.shape(i) for i in idx])
                unset = np.zeros(full, dtype=bool)
                unset[np.broadcast_to(ok, full)] = ~written[points]
                self.report(f"loads {e.buffer.name} where nothing was stored before", unset)
        return np.int64(0)

    # -- expressions (index arithmetic in int64; loaded values are 0)
    def expr(self, e, mask):
        from .ir import BufferLoad
        from .ir import expr as E

        np = self.np
        if isinstance(e, Var):
            if e not in self.env:
                return np.int64(0)
            return self.env[e]
        if isinstance(e, (E.IntImm, E.FloatImm)):
            return np.asarray(e.value)
        if isinstance(e, BufferLoad):
            return self.load(e, mask)
        if isinstance(e, E.And):
            a = np.asarray(self.expr(e.a, mask)).astype(bool)
            return a & np.asarray(self.expr(e.b, mask & a)).astype(bool)
        if isinstance(e, E.Or):
            a = np.asarray(self.expr(e.a, mask)).astype(bool)
            return a | np.asarray(self.expr(e.b, mask & ~a)).astype(bool)
        if isinstance(e, E.Not):
            return ~np.asarray(self.expr(e.a, mask)).astype(bool)
        if isinstance(e, E.Select):
            c = np.asarray(self.expr(e.condition, mask)).astype(bool)
            t = self.expr(e.true_value, mask & c)
            f = self.expr(e.false_value, mask & ~c)
            return np.where(c, t, f)
        if isinstance(e, E.Cast):
            v = np.asarray(self.expr(e.value, mask))
            if e.dtype.startswith(("int", "uint")):
                return np.nan_to_num(v, nan=0, posinf=0, neginf=0).astype(np.int64)
            return v
        if isinstance(e, E.Call):
            for a in e.args:
                self.expr(a, mask)
            return np.float64(0)
        if isinstance(e, E.BinaryOp):
            a = np.asarray(self.expr(e.a, mask))
            b = np.asarray(self.expr(e.b, mask))
            integer = e.a.dtype.startswith(("int", "uint")) and e.b.dtype.startswith(
                ("int", "uint")
            )
            if isinstance(e, E.Add):
                return a + b
            if isinstance(e, E.Sub):
                return a - b
            if isinstance(e, E.Mul):
                return a * b
            if isinstance(e, E.FloorDiv):
                return np.floor_divide(a, np.where(b == 0, 1, b)) if integer else a / b
            if isinstance(e, E.FloorMod):
                return np.mod(a, np.where(b == 0, 1, b)) if integer else np.fmod(a, b)
            if isinstance(e, E.Div):
                if integer:
                    q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
                    return np.where((a < 0) != (b < 0), -q, q)
                return a / b
            if isinstance(e, E.Min):
                return np.minimum(a, b)
            if isinstance(e, E.Max):
                return np.maximum(a, b)
            ops = {
                E.EQ: np.equal,
                E.NE: np.not_equal,
                E.LT: np.less,
                E.LE: np.less_equal,
                E.GT: np.greater,
                E.GE: np.greater_equal,
            }
            for cls, op in ops.items():
                if isinstance(e, cls):
                    return op(a, b)
        return np.int64(0)  # anything else: no index arithmetic to follow


__all__ += ["access_problems", "assert_accesses_ok"]


class FakeKernel:
    """What :func:`fake_builder` returns: the scheduled module, nothing compiled.

    Search tests pair it with a fake measurer that scores ``kernel.mod``, so a whole
    ``wb.tune`` run takes milliseconds and is fully deterministic."""

    def __init__(self, mod: IRModule):
        self.mod = mod


def fake_builder(mods: list[IRModule]) -> list[FakeKernel]:
    """A ``builder=`` for :func:`workbench.tune` that compiles nothing."""
    return [FakeKernel(m) for m in mods]


__all__ += ["FakeKernel", "fake_builder"]


def stochastic_schedule_mm(sch: Schedule, decision: list[int] | None = None) -> Schedule:
    """The MLC chapter's stochastic matmul schedule: sample j's tiles (``decision`` fixes
    them), split, reorder to i, j_0, k, j_1, decompose the reduction at k."""
    block_c = sch.get_block("C")
    i, j, k = sch.get_loops(block=block_c)
    j_factors = sch.sample_perfect_tile(loop=j, n=2, decision=decision)
    j_0, j_1 = sch.split(loop=j, factors=j_factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_c, k)
    return sch


__all__ += ["stochastic_schedule_mm"]


def ir_identical(a: Any, b: Any) -> str | None:
    """Where two IR trees differ, or None when they are the same up to renaming of
    object identity: every field of every node is compared (dtypes, extents, buffer
    scopes/alignment/index dtypes, derived regions), variables and buffers must
    correspond one to one (the root block's regions, which nothing reads and the
    primitives do not keep up to date, are skipped). Stricter than
    ``structural_equal``, which compares printed text.

    >>> import workbench as wb
    >>> ir_identical(wb.workloads.matmul(8, 8, 8), wb.workloads.matmul(8, 8, 8)) is None
    True
    """
    import dataclasses

    vmap: dict[int, Any] = {}
    seen_back: dict[int, Any] = {}
    root_blocks: set[int] = set()

    def same_object(x: Any, y: Any, path: str) -> str | None:
        if id(x) in vmap:
            return None if vmap[id(x)] is y else f"{path}: {x!r} maps to two objects"
        if id(y) in seen_back:
            return f"{path}: two objects map to {y!r}"
        vmap[id(x)] = y
        seen_back[id(y)] = x
        return None

    def walk(x: Any, y: Any, path: str) -> str | None:
        if type(x) is not type(y):
            return f"{path}: {type(x).__name__} vs {type(y).__name__}"
        if isinstance(x, (Var, Buffer)):
            problem = same_object(x, y, path)
            if problem:
                return problem
        if dataclasses.is_dataclass(x):
            roots = isinstance(x, PrimFunc) and isinstance(y, PrimFunc)
            if roots:
                root_blocks.add(id(x.body))
            for f in dataclasses.fields(x):
                if id(x) in root_blocks and f.name in ("reads", "writes"):
                    continue  # a function's root block: its regions mean nothing
                problem = walk(getattr(x, f.name), getattr(y, f.name), f"{path}.{f.name}")
                if problem:
                    return problem
            return None
        if isinstance(x, (tuple, list)):
            if len(x) != len(y):
                return f"{path}: {len(x)} vs {len(y)} items"
            for k, (u, v) in enumerate(zip(x, y)):
                problem = walk(u, v, f"{path}[{k}]")
                if problem:
                    return problem
            return None
        return None if x == y else f"{path}: {x!r} vs {y!r}"

    return walk(a, b, "ir")


def assert_script_roundtrip(x: IRModule | PrimFunc, syntaxes=("classic", "tirx")) -> None:
    """Print ``x`` as TVMScript, read it back (``wb.from_script``): the text prints
    again identically in each syntax and the IR read is identical to ``x``
    (:func:`ir_identical`).

    >>> import workbench as wb
    >>> assert_script_roundtrip(wb.workloads.mm_relu(16, 16, 16))
    """
    from .script import from_script

    for syntax in syntaxes:
        text = x.script(syntax=syntax)
        back = from_script(text)
        again = back.script(syntax=syntax)
        if again != text:
            diff = "".join(difflib.unified_diff(text.splitlines(True), again.splitlines(True),
                                                "printed", "re-printed"))
            raise AssertionError(f"{syntax}: print -> parse -> print differs:\n{diff}")
        problem = ir_identical(x, back)
        if problem:
            raise AssertionError(f"{syntax}: the IR read back differs from the original at "
                                 f"{problem}")


__all__ += ["assert_script_roundtrip", "ir_identical"]


__all__ += ["gpu_tiled_matmul"]


def gpu_tiled_matmul(sch: Schedule, tile: int = 16, align: bool = False) -> Schedule:
    """The classic GPU matmul schedule on block "C": shared caches of A and B and a local
    cache of C, ``tile`` x ``tile`` thread blocks (``blockIdx.y/x`` over tiles,
    ``threadIdx.y/x`` within), the shared copies at the k-tile loop, the local result
    written back under ``threadIdx.x``; ``align`` pads the shared rows by one element
    (``storage_align`` against bank conflicts). Returns ``sch``.

    >>> import workbench as wb
    >>> sch = gpu_tiled_matmul(wb.Schedule(wb.workloads.matmul(32, 32, 32)))
    >>> [b for b in ("A_shared", "B_shared", "C_local") if b in sch.mod.script()]
    ['A_shared', 'B_shared', 'C_local']
    """
    blk = sch.get_block("C")
    a_sh = sch.cache_read(blk, 0, "shared")
    b_sh = sch.cache_read(blk, 1, "shared")
    c_loc = sch.cache_write(blk, 0, "local")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, tile])
    j0, j1 = sch.split(j, [None, tile])
    k0, k1 = sch.split(k, [None, tile])
    sch.reorder(i0, j0, i1, j1, k0, k1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.compute_at(a_sh, k0)
    sch.compute_at(b_sh, k0)
    sch.reverse_compute_at(c_loc, j1)
    if align:
        sch.storage_align(a_sh, 0, axis=0, factor=32, offset=1)
        sch.storage_align(b_sh, 0, axis=0, factor=32, offset=1)
    return sch


def padded_func(n: int = 8, pad: int = 2) -> PrimFunc:
    """A zero-padding stage and a 1-d stencil over it: block ``"pad"`` writes
    ``P[i] = T.if_then_else(pad <= i and i < n + pad, A[i - pad], 0)`` for ``i`` in
    ``[0, n + 2 * pad)``, block ``"B"`` sums ``P[i] + P[i + 2 * pad]`` (``decompose_padding``
    cases)."""
    from . import te
    from .ir.expr import if_then_else, logical_and

    A = te.placeholder((n,), "float32", name="A")
    P = te.compute(
        (n + 2 * pad,),
        lambda i: if_then_else(logical_and(i >= pad, i < n + pad), A[i - pad], 0.0),
        name="pad",
    )
    B = te.compute((n,), lambda i: P[i] + P[i + 2 * pad], name="B")
    return te.create_prim_func([A, B], name="padded")


__all__ += ["padded_func"]


# ---------------------------------------------------------------------------
# GPU tests: marked ``gpu`` and skipped, with the reason, where cupy or a device is missing


def gpu_unavailable_reason() -> str | None:
    """Why GPU tests cannot run here (cupy missing, or no CUDA device), or None when
    they can. Asked once per process.

    >>> reason = gpu_unavailable_reason()
    >>> reason is None or "cupy" in reason
    True
    """
    global _gpu_reason
    if _gpu_reason is _UNKNOWN:
        from .target import GpuUnavailableError, require_device

        try:
            require_device("running GPU tests")
        except GpuUnavailableError as err:
            _gpu_reason = str(err)
        else:
            _gpu_reason = None
    return _gpu_reason  # type: ignore[return-value]


_UNKNOWN = object()
_gpu_reason: object = _UNKNOWN


def requires_gpu(test: Callable) -> Callable:
    """Decorator for tests that run on a real GPU: marks them ``gpu`` and skips them
    with the reason (:func:`gpu_unavailable_reason`) where cupy or a device is missing.

    >>> @requires_gpu
    ... def test_on_gpu(): ...
    >>> [m.name for m in test_on_gpu.pytestmark]
    ['skipif', 'gpu']
    """
    import pytest

    reason = gpu_unavailable_reason()
    test = pytest.mark.skipif(reason is not None, reason=f"needs a GPU: {reason}")(test)
    return pytest.mark.gpu(test)


__all__ += ["gpu_unavailable_reason", "requires_gpu"]


# ---------------------------------------------------------------------------
# GPU schedules (DLight rules, the GPU search space): one summary for golden files and
# one nvcc check, so every rule's tests read the same way


def gpu_schedule_summary(scheduled: Schedule | IRModule | PrimFunc, target: Any = "cuda") -> str:
    """A golden-file text for a GPU schedule: per kernel its launch grid and block,
    threads, shared and local bytes, then the scheduled IR.

    >>> import workbench as wb
    >>> from workbench import dlight as dl
    >>> sch = dl.gpu.Fallback().apply(wb.workloads.transpose(64, 64), wb.Target("cuda"), False)
    >>> print(gpu_schedule_summary(sch).splitlines()[0])
    kernel transpose_kernel: grid (4, 1, 1) block (1024, 1, 1) threads 1024 shared 0 B local 0 B
    """
    from .codegen.gpu import lower_for_gpu
    from .ir.printer import expr_to_str

    mod = scheduled.mod if isinstance(scheduled, Schedule) else scheduled
    if isinstance(mod, PrimFunc):
        mod = IRModule.from_funcs(mod)
    _, device = lower_for_gpu(mod, target)

    def dims(t) -> str:
        return "(" + ", ".join(x if isinstance(x, str) else str(x) if isinstance(x, int)
                               else expr_to_str(x) for x in t) + ")"

    lines = [
        f"kernel {k.name}: grid {dims(k.launch.grid)} block {dims(k.launch.block)} threads "
        f"{k.launch.threads_per_block} shared {k.shared_bytes} B local {k.local_bytes} B"
        for k in device.kernels
    ]
    return "\n".join(lines) + "\n\n" + mod.script()


def check_nvcc(scheduled: Schedule | IRModule | PrimFunc,
               archs: tuple[str, ...] = ("sm_80", "sm_90")) -> dict[str, str]:
    """Generate CUDA for a GPU schedule and compile it with nvcc for each of ``archs``
    (raises :class:`~workbench.codegen.nvcc.CudaCompileError` with nvcc's messages);
    returns ``{arch: ptx}``. Tests calling it carry the ``nvcc`` mark (skipped, with
    the reason, where nvcc is missing)."""
    from .codegen.cuda import generate_cuda
    from .codegen.gpu import lower_for_gpu
    from .codegen.nvcc import compile_cuda

    mod = scheduled.mod if isinstance(scheduled, Schedule) else scheduled
    if isinstance(mod, PrimFunc):
        mod = IRModule.from_funcs(mod)
    out = {}
    for arch in archs:
        _, device = lower_for_gpu(mod, {"kind": "cuda", "arch": arch})
        out[arch] = compile_cuda(generate_cuda(device), arch, "ptx")
    return out


__all__ += ["check_nvcc", "gpu_schedule_summary"]
