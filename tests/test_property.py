"""Property tests: random sequences of schedule primitives on several workloads.

Two families: the loop primitives (split/fuse/reorder/parallel/vectorize/unroll/
annotate) on small workloads, and every primitive of the Schedule, sampling included,
on the standard workloads (section "all primitives" below).

Each step either raises :class:`wb.ScheduleError` and leaves the schedule exactly
as it was (same module object, same trace), or succeeds. Any other exception is a
bug. At the end the schedule computes what the unscheduled function computes
(``verify``: C build against the numpy reference) and its trace replays, through
JSON and Python text, to the identical IR.

Hypothesis runs with a fresh random seed on every run (tests/conftest.py picks it and
prints it in pytest's header and under a failure); ``pytest --hypothesis-seed=N`` runs
the examples of seed N again. Bugs the random runs found are reproduced one by one in
test_property_regressions.py.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import ctypes.util
import json
from collections.abc import Callable, Iterator

from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import workbench as wb
from workbench.ir import Block, For
from workbench.ir.analysis import block_names, block_path
from workbench.testing import (
    assert_accesses_ok,
    assert_verifies,
    chain_func,
    conv2d_func,
    matmul_func,
    mm_relu_func,
    roundtrip_trace,
    shared_outer_loop_func,
    transpose_func,
)

WORKLOADS: dict[str, wb.PrimFunc] = {
    "matmul": matmul_func(16, 16, 16),
    "mm_relu": mm_relu_func(16),
    "chain": chain_func(12, 10),
    "transpose": transpose_func(8, 12),
    "conv2d": conv2d_func(1, 2, 6, 3, 3),
    "shared_outer": shared_outer_loop_func(6),
}

PRIMITIVES = (
    "split",
    "fuse",
    "reorder",
    "parallel",
    "vectorize",
    "unroll",
    "annotate",
    "unannotate",
)


def draw_factors(data: st.DataObject, extent: int) -> list:
    """Mostly valid factors (dividing or not, one inferred ``None`` half of the time);
    one draw in eight is invalid (a zero/negative factor or two ``None``)."""
    n = data.draw(st.integers(2, 3), label="number of factors")
    factors: list = [
        data.draw(
            st.one_of(st.integers(1, max(1, extent)), st.sampled_from([1, 2, 3, 4, 5])),
            label="factor",
        )
        for _ in range(n)
    ]
    if data.draw(st.booleans(), label="infer one?"):
        factors[data.draw(st.integers(0, n - 1), label="inferred")] = None
    if data.draw(st.integers(0, 7), label="invalid?") == 0:
        factors[data.draw(st.integers(0, n - 1), label="bad")] = data.draw(
            st.sampled_from([0, -1, None]), label="bad factor"
        )
        if factors.count(None) < 2 and all(f is None or f > 0 for f in factors):
            factors[0] = factors[-1] = None
    return factors


def random_step(data: st.DataObject, sch: wb.Schedule, blocks: list[str], previous: list) -> list:
    """Draw and apply one primitive; return the loop handles it looked at."""
    block = sch.get_block(data.draw(st.sampled_from(blocks), label="block"))
    loops = sch.get_loops(block)
    if previous and data.draw(st.integers(0, 9), label="stale?") == 0:
        loops = previous  # handles from before the last step: some may be stale
    if not loops:
        return loops
    prim = data.draw(st.sampled_from(PRIMITIVES), label="primitive")
    call: Callable[[], object]
    if prim == "split":
        loop = data.draw(st.sampled_from(loops), label="loop")
        try:
            extent = sch.get(loop).extent
        except wb.ScheduleError:
            extent = 8
        factors = draw_factors(data, extent)
        keep = data.draw(st.booleans(), label="preserve_unit_iters")
        call = lambda: sch.split(loop, factors=factors, preserve_unit_iters=keep)  # noqa: E731
    elif prim == "fuse":
        start = data.draw(st.integers(0, len(loops) - 1), label="start")
        count = data.draw(st.integers(1, 3), label="count")
        keep = data.draw(st.booleans(), label="preserve_unit_iters")
        group = loops[start : start + count]
        call = lambda: sch.fuse(*group, preserve_unit_iters=keep)  # noqa: E731
    elif prim == "reorder":
        order = data.draw(st.permutations(range(len(loops))), label="permutation")
        size = data.draw(st.integers(1, len(loops)), label="how many")
        chosen = [loops[i] for i in order[:size]]
        call = lambda: sch.reorder(*chosen)  # noqa: E731
    elif prim in ("parallel", "vectorize", "unroll"):
        loop = data.draw(st.sampled_from(loops), label="loop")
        call = lambda: getattr(sch, prim)(loop)  # noqa: E731
    else:
        target = data.draw(st.sampled_from([*loops, block]), label="target")
        key = data.draw(st.sampled_from(["pragma_auto_unroll_max_step", "note"]), label="key")
        if prim == "annotate":
            value = data.draw(
                st.one_of(
                    st.integers(-4, 64),
                    st.sampled_from(["SSRSRS", 'q"uote']),
                    st.lists(st.integers(0, 9), max_size=3),
                ),
                label="value",
            )
            call = lambda: sch.annotate(target, ann_key=key, ann_val=value)  # noqa: E731
        else:
            try:
                keys = [k for k, _ in sch.get(target).annotations]
            except wb.ScheduleError:
                keys = []
            key = data.draw(st.sampled_from([*keys, "absent"]), label="key to remove")
            call = lambda: sch.unannotate(target, ann_key=key)  # noqa: E731

    mod_before, trace_before = sch.mod, sch.trace
    text_before = mod_before.script()
    try:
        call()
    except wb.ScheduleError as e:
        assert str(e).startswith(f"{e.primitive}: "), str(e)
        assert sch.mod is mod_before, f"refused {prim} replaced the module"
        assert sch.mod.script() == text_before, f"refused {prim} changed the IR"
        assert sch.trace is trace_before and len(sch.trace) == len(trace_before)
        event(f"{prim} refused: {type(e).__name__}")
    else:
        assert len(sch.trace) == len(trace_before) + 1
        event(f"{prim} applied")
    return loops


def run_random_schedule(data: st.DataObject) -> tuple[wb.Schedule, wb.PrimFunc]:
    name = data.draw(st.sampled_from(sorted(WORKLOADS)), label="workload")
    func = WORKLOADS[name]
    sch = wb.Schedule(func)
    blocks = block_names(func)
    previous: list = []
    for _ in range(data.draw(st.integers(1, 6), label="steps")):
        previous = random_step(data, sch, blocks, previous)
    # every loop of the result is still a well-formed nest the handles can reach
    for b in blocks:
        for lp in sch.get_loops(sch.get_block(b)):
            assert isinstance(sch.get(lp), For)
    return sch, func


@contextlib.contextmanager
def poisoned_heap() -> Iterator[None]:
    """While verifying, have malloc hand out memory filled with a non-zero byte
    (glibc's ``M_PERTURB``), so that a kernel reading an element of an intermediate
    buffer it never wrote reads garbage (~1e16) instead of the zeros of a fresh page --
    which a zero-padding stage, say, would get right by luck. No-op without glibc."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, TypeError, AttributeError):
        yield
        return
    m_perturb = -6
    enabled = mallopt(m_perturb, 0xA5) == 1
    try:
        yield
    finally:
        if enabled:
            mallopt(m_perturb, 0)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_random_schedules_compute_the_same_and_replay(data):
    sch, func = run_random_schedule(data)
    roundtrip_trace(sch, func)
    with poisoned_heap():
        assert_verifies(sch, func)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_random_schedules_refuse_cleanly_and_replay(data):
    """More sequences, IR-level only (no compilation): refusals leave the state
    intact, accepted schedules replay to the same IR."""
    sch, func = run_random_schedule(data)
    roundtrip_trace(sch, func)


# --------------------------------------------------------------------------- hostile traces


def _mm_trace_json() -> list:
    sch = wb.Schedule(WORKLOADS["mm_relu"])
    blk = sch.get_block("Y")
    i, j, k = sch.get_loops(blk)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.fuse(i, j0)
    sch.annotate(blk, ann_key="note", ann_val=[1, "a"])
    sch.unroll(j1)
    sch.get_consumers(blk)
    return sch.trace.as_json_obj()


VALID_TRACE_JSON = _mm_trace_json()

JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 40),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(
            [
                "b0",
                "l1",
                "l2",
                "l9",
                "v3",
                "None",
                '"Y"',
                "",
                "Split",
                "Fuse",
                "GetSBlock",
                "GetLoops",
                "mm_relu",
                "Y",
            ]
        ),
        st.text(max_size=3),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=6,
)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, list):
        for n, x in enumerate(obj):
            yield from _paths(x, (*prefix, n))


def _edit_targets(doc: list) -> list[tuple[int, ...]]:
    """Where the next edit can go: every element of the document (a path of list
    indices) or, once earlier edits emptied it, its start (where only an insert fits)."""
    return list(_paths(doc))[1:] or [(0,)]


def _apply_edit(doc: list, path: tuple[int, ...], edit: str, value) -> None:
    """Replace, delete or insert (before) the element at ``path``; at a position past
    the end of its list (an emptied document), every edit is an insert."""
    parent = doc
    for n in path[:-1]:
        parent = parent[n]
    if path[-1] >= len(parent):
        edit = "insert"
    if edit == "replace":
        parent[path[-1]] = value
    elif edit == "delete":
        del parent[path[-1]]
    else:
        parent.insert(path[-1], value)


def test_trace_edits_go_on_once_the_document_is_empty():
    """The mutation harness itself: two deletes empty the document; the next edit must
    still have somewhere to go (it had none, and drew from an empty list)."""
    doc = copy.deepcopy(VALID_TRACE_JSON)
    _apply_edit(doc, (0,), "delete", None)
    _apply_edit(doc, (0,), "delete", None)
    assert doc == []
    targets = _edit_targets(doc)
    assert targets == [(0,)]
    for edit in ("replace", "delete", "insert"):
        emptied: list = []
        _apply_edit(emptied, targets[0], edit, 7)
        assert emptied == [7]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_mutated_trace_json_is_refused_with_trace_error(data):
    """Any edit of a valid trace's JSON either loads and replays, or is refused with
    a ScheduleError (TraceError); never another exception."""
    doc = copy.deepcopy(VALID_TRACE_JSON)
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        path = data.draw(st.sampled_from(_edit_targets(doc)), label="path")
        edit = data.draw(st.sampled_from(["replace", "delete", "insert"]), label="edit")
        value = data.draw(JSON_VALUES, label="value") if edit != "delete" else None
        _apply_edit(doc, path, edit, value)
    for source in (doc, json.dumps(doc)):
        try:
            trace = wb.Trace.from_json(source)
            trace.script()
            trace.as_json()
            sch = wb.Schedule(WORKLOADS["mm_relu"])
            trace.apply_to_schedule(sch)
        except wb.ScheduleError:
            event("refused")
            continue
        event("replayed")
        roundtrip_trace(sch, WORKLOADS["mm_relu"])


# =========================================================================== all primitives
#
# Random sequences (1 to 8 steps) drawn from every primitive of the Schedule, with
# random but plausible arguments: blocks by their current names (get_block), loops
# among the chosen block's loops (or, for compute_at targets, any loop of the
# function), split factors given, inferred, non-dividing or sampled by
# sample_perfect_tile (a random decision, a bad one, or the schedule's RNG), scopes,
# thread tags, buffer indices (some out of range), sampled compute locations fed to
# compute_at, sampled categoricals used as annotations or split factors.
#
# After every call: it succeeded (the trace grew by exactly the instructions it
# records), or it raised a ScheduleError subclass and left everything as it was -- the
# module (same object, same text), the trace (same object, length and text), the
# handle table and the random generator (a refusal draws nothing). Any other exception
# propagates, so hypothesis shrinks it. At the end: every handle still resolves or is
# refused as stale; a copy taken midway did not change; the schedule computes what the
# unscheduled function computes (C build of ``wb.lower``'s output vs the numpy
# reference), so does the lowered module itself; the trace replays through JSON and
# Python text to the identical IR; and the trace with one sampling decision changed
# (another tiling, index or location, or None to sample again) replays all-or-nothing
# to a schedule that round-trips and verifies too.

ALL_WORKLOADS: dict[str, wb.PrimFunc] = {
    "matmul": wb.workloads.matmul(16, 16, 16),
    "mm_relu": wb.workloads.mm_relu(16, 16, 16),
    "elementwise_chain": wb.workloads.elementwise_chain(32, 8),
    "transpose": wb.workloads.transpose(16, 24),
    "conv2d": wb.workloads.conv2d_nchw(1, 4, 8, 8, 4),
    "softmax": wb.workloads.softmax(8, 16),
    "layer_norm": wb.workloads.layer_norm(2, 32),
    "linear_bias_relu": wb.workloads.linear_bias_relu(1, 16, 32),
}

ALL_PRIMITIVES = (
    "get_child_blocks",
    "get_producers",
    "get_consumers",
    *PRIMITIVES,
    "compute_at",
    "reverse_compute_at",
    "compute_inline",
    "reverse_compute_inline",
    "cache_read",
    "cache_write",
    "set_scope",
    "storage_align",
    "decompose_reduction",
    "rfactor",
    "blockize",
    "add_unit_loop",
    "bind",
    "sample_perfect_tile",
    "sample_categorical",
    "sample_compute_location",
)

#: every primitive once, the ones that restructure the IR or sample more often
PRIMITIVE_WEIGHTS = (
    *ALL_PRIMITIVES,
    "sample_perfect_tile",
    "sample_categorical",
    "split",
    "split",
    "reorder",
    "fuse",
    "compute_at",
    "reverse_compute_at",
    "decompose_reduction",
    "rfactor",
    "rfactor",
    "blockize",
    "cache_read",
    "cache_write",
    "sample_compute_location",
)

#: mostly the scopes a C build handles; now and then another known one or a bad name
SCOPE = st.one_of(
    st.sampled_from(["global", "shared", "local"]),
    st.sampled_from(["global", "shared", "local", "shared.dyn", "warp", "texture"]),
)
THREAD_AXIS = st.sampled_from(
    [
        "blockIdx.x",
        "blockIdx.y",
        "threadIdx.x",
        "threadIdx.y",
        "threadIdx.z",
        "vthread.x",
        "blockIdx.z",
        "vthread.y",
        "threadIdx.w",
        "",
    ]
)
MAX_STEPS = 8

COMPUTE_INDEX = st.sampled_from([-1, -1, -1, -1, -1, -2, 0, 1, 2, -3])


class _Run:
    """One random schedule in the making: the schedule, its function, and the sampled
    expression handles later steps may use as split factors or annotation values."""

    def __init__(self, sch: wb.Schedule, func: wb.PrimFunc):
        self.sch = sch
        self.func = func
        self.exprs: list = []  # ExprRVs from sample_perfect_tile / sample_categorical
        self.previous: list = []  # loop handles of the previous step (may be stale)
        self.locations: list = []  # sample_compute_location's handles (may be root/inline)


def _state(sch: wb.Schedule) -> tuple:
    """Everything a refused call must leave alone."""
    return (
        sch.mod,
        sch.mod.script(),
        sch.trace,
        len(sch.trace),
        sch.trace.script(),
        dict(sch._rvs),
        sch._rng.getstate(),
    )


def attempt(run: _Run, prim: str, call: Callable[[], object], grows: int = 1):
    """Apply ``call``: it succeeds and the trace grows by ``grows`` instructions, or it
    raises a ScheduleError and nothing changed. Returns ``(applied, result)``; any
    other exception propagates."""
    sch = run.sch
    before = _state(sch)
    try:
        result = call()
    except wb.ScheduleError as e:
        mod, text, trace, length, trace_text, rvs, rng = before
        assert str(e).startswith(f"{e.primitive}: "), str(e)
        assert sch.mod is mod, f"refused {prim} replaced the module"
        assert sch.mod.script() == text, f"refused {prim} changed the IR"
        assert sch.trace is trace, f"refused {prim} replaced the trace"
        assert len(sch.trace) == length, f"refused {prim} changed the trace length"
        assert sch.trace.script() == trace_text, f"refused {prim} changed the trace"
        assert dict(sch._rvs) == rvs, f"refused {prim} changed the handle table"
        assert sch._rng.getstate() == rng, f"refused {prim} drew from the random generator"
        event(f"{prim} refused: {type(e).__name__}")
        note(f"  refused: {e}".splitlines()[0])
        return False, None
    assert len(sch.trace) == before[3] + grows, (
        f"{prim} recorded {len(sch.trace) - before[3]} instructions, expected {grows}"
    )
    event(f"{prim} applied")
    note("  applied")
    return True, result


def _block_names(sch: wb.Schedule) -> list[str]:
    """The blocks a schedule works on: all but those inside another block's ``init``
    (get_block refuses them)."""
    func = sch.func
    return [n for n in block_names(func) if block_path(func, n) is not None]


def _is_reduction(block) -> bool:
    return block.init is not None or any(iv.kind == "R" for iv in block.iter_vars)


def _has_role(func: wb.PrimFunc, name: str, role: str) -> bool:
    """Whether block ``name`` is a reduction, or a producer / consumer of another block
    (by the buffers in their read/write regions)."""
    blocks = {n: block_path(func, n)[-1] for n in block_names(func) if block_path(func, n)}
    me = blocks[name]
    if role == "reduction":
        return _is_reduction(me)
    mine = {r.buffer.name for r in (me.writes if role == "producer" else me.reads)}
    return any(
        mine & {r.buffer.name for r in (b.reads if role == "producer" else b.writes)}
        for n, b in blocks.items()
        if n != name
    )


def _draw_block(
    data: st.DataObject, sch: wb.Schedule, label: str = "block", role: str | None = None
):
    """A block by its current name; mostly one with ``role`` (``"reduction"``,
    ``"producer"``, ``"consumer"``) when given."""
    names = _block_names(sch)
    if role and data.draw(st.integers(0, 4), label="any block?") != 0:
        func = sch.func
        names = [n for n in names if _has_role(func, n, role)] or names
    name = data.draw(st.sampled_from(names), label=label)
    return name, sch.get_block(name)


def _reduction_loops(sch: wb.Schedule, block, loops: list) -> list:
    """The loops among ``loops`` that a reduce iter var of ``block`` is bound to."""
    from workbench.ir.functor import uses_var

    node = sch.get(block)
    bound = [v for iv, v in zip(node.iter_vars, node.iter_values) if iv.kind == "R"]
    return [lp for lp in loops if any(uses_var(v, sch.get(lp).loop_var) for v in bound)]


def _draw_loop(data: st.DataObject, run: _Run, loops: list, label: str = "loop"):
    """One of ``loops`` or, now and then, a possibly stale handle of the last step."""
    pool = loops
    odd = data.draw(st.integers(0, 19), label=f"odd {label}?")
    if run.previous and odd < 2:
        pool = run.previous
    elif run.locations and odd == 2:
        pool = run.locations  # a sampled location: a loop, or the root/inline mark
    if not pool:
        return None
    return data.draw(st.sampled_from(pool), label=label)


def _any_loop(data: st.DataObject, run: _Run, label: str = "target loop"):
    """A loop anywhere in the function: a loop above a randomly chosen block."""
    _, other = _draw_block(data, run.sch, f"{label}'s block")
    return _draw_loop(data, run, run.sch.get_loops(other), label)


def _extent(sch: wb.Schedule, loop) -> int:
    try:
        node = sch.get(loop)
    except wb.ScheduleError:
        return 8
    return node.extent if isinstance(node, For) else 8


def _tile_decision(data: st.DataObject, extent: int, n: int, inner: int):
    """``None`` (draw from the RNG), a random valid tiling, or now and then a bad one."""
    from workbench.schedule.primitives.sampling import perfect_tilings

    how = data.draw(st.sampled_from(["rng", "rng", "valid", "valid", "invalid"]), label="how")
    if how == "rng":
        return None
    if how == "valid":
        tilings = perfect_tilings(extent, n, inner) if extent <= 4096 else []
        if tilings:
            return data.draw(st.sampled_from(tilings), label="decision")
    return data.draw(st.lists(st.integers(0, 8), min_size=n - 1, max_size=n + 1), label="bad")


def _sample_tiles(data: st.DataObject, run: _Run, loop) -> tuple[bool, list]:
    sch = run.sch
    n = data.draw(st.integers(1, 3), label="n")
    inner = data.draw(st.sampled_from([16, 16, 4, -1, 1, 0]), label="max_innermost_factor")
    decision = _tile_decision(data, _extent(sch, loop), n, inner)
    note(f"sample_perfect_tile(n={n}, max_innermost_factor={inner}, decision={decision})")
    ok, tiles = attempt(
        run,
        "sample_perfect_tile",
        lambda: sch.sample_perfect_tile(loop, n=n, max_innermost_factor=inner, decision=decision),
    )
    if ok:
        assert len(tiles) == n and all(sch.get(v) >= 1 for v in tiles)
        if decision is not None:
            assert [sch.get(v) for v in tiles] == list(decision)
        run.exprs.extend(tiles)
    return ok, tiles or []


def _split_factors(data: st.DataObject, run: _Run, loop) -> list:
    how = data.draw(
        st.sampled_from(["given", "given", "sampled", "sampled", "pool"]), label="factors"
    )
    if how == "sampled":
        ok, tiles = _sample_tiles(data, run, loop)
        if ok:
            factors = list(tiles)
            if len(factors) > 1 and data.draw(st.booleans(), label="infer one?"):
                factors[data.draw(st.integers(0, len(factors) - 1), label="inferred")] = None
            return factors
    if how == "pool" and run.exprs:
        # sampled for another loop (or a categorical): may not divide, may be 0
        return data.draw(
            st.lists(st.sampled_from([*run.exprs, None, 2, 4]), min_size=1, max_size=3),
            label="pool factors",
        )
    return draw_factors(data, _extent(run.sch, loop))


def _consumer_blocks(data: st.DataObject, sch: wb.Schedule):
    """``None`` mostly; else a few current blocks, as names or handles. Returns the
    argument and how many ``get_block`` instructions the call records for names."""
    if data.draw(st.integers(0, 3), label="consumer_blocks?") != 0:
        return None, 0
    names = data.draw(
        st.lists(st.sampled_from(_block_names(sch)), max_size=2, unique=True), label="consumers"
    )
    as_names = data.draw(st.booleans(), label="consumers by name?")
    if as_names:
        return names, len(names)
    return [sch.get_block(n) for n in names], 0


def _buffer_index(data: st.DataObject, sch: wb.Schedule, block, kind: str):
    regions = getattr(sch.get(block), kind)
    how = data.draw(st.integers(0, 9), label=f"{kind} index kind")
    if how == 0:
        return data.draw(st.sampled_from([-1, len(regions), True, "nope"]), label="bad index")
    if how == 1 and regions:
        return data.draw(st.sampled_from([r.buffer.name for r in regions]), label="buffer name")
    return data.draw(st.integers(0, max(0, len(regions) - 1)), label=f"{kind} index")


def random_any_step(data: st.DataObject, run: _Run) -> None:
    """Draw one primitive of the whole Schedule API with plausible arguments; apply it
    (through :func:`attempt`, which checks the invariants)."""
    sch = run.sch
    prim = data.draw(st.sampled_from(PRIMITIVE_WEIGHTS), label="primitive")
    role = {
        "decompose_reduction": "reduction",
        "rfactor": "reduction",
        "compute_inline": "producer",
        "compute_at": "producer",
        "sample_compute_location": "producer",
        "set_scope": "producer",
        "storage_align": "producer",
        "reverse_compute_inline": "consumer",
        "reverse_compute_at": "consumer",
    }.get(prim)
    name, block = _draw_block(data, sch, role=role)
    loops = sch.get_loops(block)
    note(f"{prim} on block {name!r}")
    grows = 1
    call: Callable[[], object] | None = None

    if prim == "get_child_blocks":
        target = data.draw(st.sampled_from([block, *loops]), label="parent")
        call = lambda: sch.get_child_blocks(target)  # noqa: E731
    elif prim == "get_producers":
        call = lambda: sch.get_producers(block)  # noqa: E731
    elif prim == "get_consumers":
        call = lambda: sch.get_consumers(block)  # noqa: E731
    elif prim == "split":
        loop = _draw_loop(data, run, loops)
        if loop is not None:
            factors = _split_factors(data, run, loop)
            keep = data.draw(st.booleans(), label="preserve_unit_iters")
            note(f"split(factors={factors}, preserve_unit_iters={keep})")
            call = lambda: sch.split(loop, factors=factors, preserve_unit_iters=keep)  # noqa: E731
    elif prim == "fuse":
        if loops:
            start = data.draw(st.integers(0, len(loops) - 1), label="start")
            count = data.draw(st.integers(1, 3), label="count")
            keep = data.draw(st.booleans(), label="preserve_unit_iters")
            group = loops[start : start + count]
            call = lambda: sch.fuse(*group, preserve_unit_iters=keep)  # noqa: E731
    elif prim == "reorder":
        if loops:
            order = data.draw(st.permutations(range(len(loops))), label="permutation")
            size = data.draw(st.integers(1, len(loops)), label="how many")
            chosen = [loops[i] for i in order[:size]]
            call = lambda: sch.reorder(*chosen)  # noqa: E731
    elif prim in ("parallel", "vectorize", "unroll"):
        loop = _draw_loop(data, run, loops)
        if loop is not None:
            call = lambda: getattr(sch, prim)(loop)  # noqa: E731
    elif prim in ("annotate", "unannotate"):
        targets = [*loops, block]
        if prim == "unannotate" and data.draw(st.integers(0, 3), label="annotated?") != 0:
            annotated = [t for t in targets if _live(sch, t) and sch.get(t).annotations]
            if not annotated:  # annotate one first, so that there is something to remove
                first = data.draw(st.sampled_from(targets), label="annotate first")
                if attempt(run, "annotate", lambda: sch.annotate(first, "note", 1))[0]:
                    annotated = [first]
            targets = annotated or targets
        target = data.draw(st.sampled_from(targets), label="target")
        key = data.draw(st.sampled_from(["pragma_auto_unroll_max_step", "note"]), label="key")
        if prim == "annotate":
            values = [st.integers(-4, 64), st.sampled_from(["SSRSRS", 'q"uote'])]
            if run.exprs:
                values.append(st.sampled_from(run.exprs))
            value = data.draw(st.one_of(*values), label="value")
            call = lambda: sch.annotate(target, ann_key=key, ann_val=value)  # noqa: E731
        else:
            try:
                keys = [k for k, _ in sch.get(target).annotations]
            except wb.ScheduleError:
                keys = []
            key = data.draw(st.sampled_from([*keys, "absent"]), label="key to remove")
            call = lambda: sch.unannotate(target, ann_key=key)  # noqa: E731
    elif prim in ("compute_at", "reverse_compute_at"):
        if data.draw(st.integers(0, 2), label="any loop?") == 0:
            loop = _any_loop(data, run)
        else:  # a loop above one of its consumers (producers)
            related = (sch.get_consumers if prim == "compute_at" else sch.get_producers)(block)
            other = data.draw(st.sampled_from([*related, block]), label="related block")
            loop = _draw_loop(data, run, sch.get_loops(other), "target loop")
        if loop is not None:
            keep = data.draw(st.booleans(), label="preserve_unit_loops")
            index = data.draw(COMPUTE_INDEX, label="index")
            note(
                f"{prim}(loop={sch.get(loop).loop_var.name if _live(sch, loop) else loop}, "
                f"preserve_unit_loops={keep}, index={index})"
            )
            call = lambda: getattr(sch, prim)(  # noqa: E731
                block, loop, preserve_unit_loops=keep, index=index
            )
    elif prim == "compute_inline":
        call = lambda: sch.compute_inline(block)  # noqa: E731
    elif prim == "reverse_compute_inline":
        call = lambda: sch.reverse_compute_inline(block)  # noqa: E731
    elif prim in ("cache_read", "cache_write"):
        kind = "reads" if prim == "cache_read" else "writes"
        index = _buffer_index(data, sch, block, kind)
        scope = data.draw(SCOPE, label="scope")
        consumers, grows = _consumer_blocks(data, sch)
        grows += 1
        note(f"{prim}(index={index!r}, scope={scope!r}, consumer_blocks={consumers})")
        call = lambda: getattr(sch, prim)(block, index, scope, consumers)  # noqa: E731
    elif prim == "set_scope":
        index = _buffer_index(data, sch, block, "writes")
        scope = data.draw(SCOPE, label="scope")
        note(f"set_scope(index={index!r}, scope={scope!r})")
        call = lambda: sch.set_scope(block, index, scope)  # noqa: E731
    elif prim == "storage_align":
        index = _buffer_index(data, sch, block, "writes")
        try:
            ndim = len(sch.get(block).writes[index].buffer.shape)
        except (IndexError, TypeError):
            ndim = 2
        axis = data.draw(
            st.one_of(st.integers(0, max(0, ndim - 1)), st.integers(-1, 4)), label="axis"
        )
        factor = data.draw(st.sampled_from([8, 16, 32, 4, 0, -2]), label="factor")
        offset = data.draw(st.sampled_from([1, 0, 2, -1]), label="offset")
        note(f"storage_align(index={index!r}, axis={axis}, factor={factor}, offset={offset})")
        call = lambda: sch.storage_align(block, index, axis, factor, offset)  # noqa: E731
    elif prim == "decompose_reduction":
        if data.draw(st.integers(0, 4), label="any loop?") == 0:
            loop = _any_loop(data, run)
        else:
            loop = _draw_loop(data, run, loops)
        if loop is not None:
            call = lambda: sch.decompose_reduction(block, loop)  # noqa: E731
    elif prim == "rfactor":
        if data.draw(st.integers(0, 4), label="any loop?") != 0:
            loop = _draw_loop(data, run, _reduction_loops(sch, block, loops) or loops)
        else:
            loop = _draw_loop(data, run, loops)
        if loop is not None:
            axis = data.draw(st.integers(-1, 3), label="factor_axis")
            note(f"rfactor(factor_axis={axis})")
            call = lambda: sch.rfactor(loop, axis)  # noqa: E731
    elif prim == "blockize":
        loop = _draw_loop(data, run, loops)
        if loop is not None:
            keep = data.draw(st.booleans(), label="preserve_unit_iters")
            call = lambda: sch.blockize(loop, preserve_unit_iters=keep)  # noqa: E731
    elif prim == "add_unit_loop":
        target = data.draw(st.sampled_from([block, *loops]), label="target")
        call = lambda: sch.add_unit_loop(target)  # noqa: E731
    elif prim == "bind":
        loop = _draw_loop(data, run, loops)
        if loop is not None:
            axis = data.draw(THREAD_AXIS, label="thread_axis")
            note(f"bind({axis!r})")
            call = lambda: sch.bind(loop, axis)  # noqa: E731
    elif prim == "sample_perfect_tile":
        loop = _draw_loop(data, run, loops)
        if loop is not None:
            _sample_tiles(data, run, loop)
    elif prim == "sample_categorical":
        cands = data.draw(st.lists(st.integers(0, 64), min_size=0, max_size=4), label="cands")
        probs = data.draw(
            st.lists(
                st.sampled_from([0.25, 0.5, 1.0, 0.0, 2]), min_size=len(cands), max_size=len(cands)
            ),
            label="probs",
        )
        if data.draw(st.integers(0, 9), label="bad probs?") == 0:
            probs = [*probs, -1.0]
        decision = data.draw(
            st.one_of(st.none(), st.integers(-1, max(0, len(cands)))), label="decision"
        )
        note(f"sample_categorical({cands}, {probs}, decision={decision})")
        ok, v = attempt(run, prim, lambda: sch.sample_categorical(cands, probs, decision=decision))
        if ok:
            assert sch.get(v) in cands
            run.exprs.append(v)
            if loops and data.draw(st.booleans(), label="annotate with it?"):
                target = data.draw(st.sampled_from([*loops, block]), label="annotated")
                attempt(
                    run,
                    "annotate",
                    lambda: sch.annotate(target, "pragma_auto_unroll_max_step", v),
                )
    elif prim == "sample_compute_location":
        decision = data.draw(st.one_of(st.none(), st.integers(-3, 4)), label="decision")
        note(f"sample_compute_location(decision={decision})")
        ok, loc = attempt(run, prim, lambda: sch.sample_compute_location(block, decision=decision))
        if ok:
            run.locations.append(loc)
        if ok and data.draw(st.integers(0, 4), label="compute_at it?") != 0:
            keep = data.draw(st.booleans(), label="preserve_unit_loops")
            note(f"compute_at(sampled location, preserve_unit_loops={keep})")
            done, _ = attempt(
                run,
                "compute_at (sampled)",
                lambda: sch.compute_at(block, loc, preserve_unit_loops=keep),
            )
            # a sampled location is one compute_at accepts (TVM's candidates are
            # found by trying compute_at)
            assert done, "compute_at refused a location sample_compute_location offered"
    else:  # pragma: no cover
        raise AssertionError(prim)

    if call is not None:
        attempt(run, prim, call, grows)
    run.previous = loops


def _live(sch: wb.Schedule, handle) -> bool:
    """Whether a loop or block handle still refers to a loop or block."""
    try:
        return isinstance(sch.get(handle), (For, Block))
    except wb.ScheduleError:
        return False


def run_random_full_schedule(data: st.DataObject) -> tuple[wb.Schedule, wb.PrimFunc]:
    name = data.draw(st.sampled_from(sorted(ALL_WORKLOADS)), label="workload")
    func = ALL_WORKLOADS[name]
    seed = data.draw(st.integers(0, 2**16), label="seed")
    run = _Run(wb.Schedule(func, seed=seed), func)
    steps = data.draw(st.integers(1, MAX_STEPS), label="steps")
    copy_at = data.draw(st.integers(0, steps), label="copy after step")
    snapshot = None
    for step in range(steps):
        if step == copy_at:
            # an independent copy: what the original does next does not touch it
            copied = run.sch.copy()
            snapshot = (copied, copied.mod.script(), copied.trace.script())
        random_any_step(data, run)
    sch = run.sch
    note(sch.trace.script())
    if snapshot is not None:
        copied, text, trace_text = snapshot
        assert copied.mod.script() == text and copied.trace.script() == trace_text
    # every handle made along the way resolves, or is refused as stale
    for handle in list(sch._rvs):
        try:
            sch.get(handle)
        except wb.ScheduleError:
            pass
    # every block and loop of the result is reachable through handles
    for b in _block_names(sch):
        blk = sch.get_block(b)
        for lp in sch.get_loops(blk):
            assert isinstance(sch.get(lp), For)
    return sch, func


SAMPLING_KINDS = ("SamplePerfectTile", "SampleCategorical", "SampleComputeLocation")


def _new_decision(data: st.DataObject, inst) -> object:
    """Another decision for sampling instruction ``inst``: None (sample again from the
    RNG), a shuffle of its tiles (same product), or an arbitrary value."""
    old = inst.decision
    if data.draw(st.integers(0, 4), label="resample?") < 2:
        return None
    if inst.kind == "SamplePerfectTile":
        if data.draw(st.booleans(), label="shuffle?"):
            return list(data.draw(st.permutations(list(old)), label="shuffled"))
        return data.draw(
            st.lists(st.integers(1, 16), min_size=len(old), max_size=len(old)), label="tiles"
        )
    if inst.kind == "SampleCategorical":
        return data.draw(st.integers(-1, len(inst.arg("candidates"))), label="index")
    return data.draw(st.integers(-3, 4), label="location")


def redecide(data: st.DataObject, sch: wb.Schedule, func: wb.PrimFunc):
    """Replay ``sch``'s trace with one sampling decision changed, on a fresh schedule.

    The replay refuses with a ScheduleError (a decision that does not fit, or a later
    step that no longer applies) and leaves the fresh schedule untouched, or it gives
    a schedule whose trace records the new decision and round-trips. Returns that
    schedule (None if refused or nothing was sampled)."""
    steps = [n for n, inst in enumerate(sch.trace) if inst.kind in SAMPLING_KINDS]
    if not steps:
        return None
    step = data.draw(st.sampled_from(steps), label="sampling step to change")
    decision = _new_decision(data, sch.trace[step])
    note(f"redecide step {step}: {decision!r}")
    try:
        trace = sch.trace.with_decision(step, decision)
    except wb.ScheduleError as e:
        event(f"with_decision refused: {type(e).__name__}")
        return None
    fresh = wb.Schedule(func, seed=data.draw(st.integers(0, 2**16), label="replay seed"))
    before = fresh.mod.script()
    try:
        trace.apply_to_schedule(fresh)
    except wb.ScheduleError as e:
        assert fresh.mod.script() == before and len(fresh.trace) == 0, "replay not all-or-nothing"
        why = type(e.__cause__).__name__ if e.__cause__ else str(e).split(": ", 1)[-1][-40:]
        event(f"redecided replay refused: {why}")
        return None
    event("redecided replay applied")
    assert len(fresh.trace) == len(sch.trace)
    if decision is not None:
        got = fresh.trace[step].decision
        assert list(got) == list(decision) if isinstance(got, tuple) else got == decision
    roundtrip_trace(fresh, func)
    return fresh


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_random_full_schedules_compute_the_same_and_replay(data):
    sch, func = run_random_full_schedule(data)
    roundtrip_trace(sch, func)
    assert_accesses_ok(sch)
    assert_accesses_ok(wb.lower(sch.mod))
    other = redecide(data, sch, func)
    with poisoned_heap():
        assert_verifies(sch, func)  # builds wb.lower(sch.mod)
        assert_verifies(wb.lower(sch.mod), func)
        if other is not None:
            assert_verifies(other, func)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_random_full_schedules_refuse_cleanly_and_replay(data):
    """More sequences, IR-level only: refusals leave the state intact, accepted
    schedules replay to the same IR and lower without error."""
    sch, func = run_random_full_schedule(data)
    roundtrip_trace(sch, func)
    assert_accesses_ok(sch)
    assert_accesses_ok(wb.lower(sch.mod))
    other = redecide(data, sch, func)
    if other is not None:
        assert_accesses_ok(other)
