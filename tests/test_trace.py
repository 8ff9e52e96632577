"""Traces: TVM's printed form, TVM's JSON shape, loading (JSON, Python text, files),
refusing malformed or hostile input with a TraceError that names the step, and
replay failures that name the step."""

from __future__ import annotations

import json

import pytest

import workbench as wb
from workbench.testing import assert_verifies, matmul_func, mm_relu_func, roundtrip_trace

# The trace the MLC chapter prints for its mm_relu schedule, up to the primitives
# this library has (the chapter goes on with reverse_compute_at/decompose_reduction).
SPLIT_LINE = (
    "  l4, l5 = sch.split(loop=l2, factors=[None, 4], preserve_unit_iters=True, "
    "disable_predication=False)"
)
SEED_TRACE = "\n".join(
    [
        "# from tvm import tir",
        "def apply_trace(sch: tir.Schedule) -> None:",
        '  b0 = sch.get_block(name="Y", func_name="mm_relu")',
        "  l1, l2, l3 = sch.get_loops(block=b0)",
        SPLIT_LINE,
        "  sch.reorder(l4, l3, l5)",
    ]
)

SEED_TRACE_TIRX = "\n".join(
    [
        "# from tvm import s_tir",
        "def apply_trace(sch: s_tir.Schedule) -> None:",
        '  b0 = sch.get_sblock(name="Y", func_name="mm_relu")',
        "  l1, l2, l3 = sch.get_loops(block=b0)",
        SPLIT_LINE,
        "  sch.reorder(l4, l3, l5)",
    ]
)

# TVM's JSON for the same trace (None inputs are the string "None" in TVM).
SEED_JSON_TVM = [
    [
        ["GetBlock", [], ["Y", "mm_relu"], ["b0"]],
        ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
        ["Split", ["l2", "None", 4], [1, 0], ["l4", "l5"]],
        ["Reorder", ["l4", "l3", "l5"], [], []],
    ],
    [],
]


@pytest.fixture(scope="module")
def func() -> wb.PrimFunc:
    return mm_relu_func(128)


def seed(func) -> wb.Schedule:
    sch = wb.Schedule(func)
    block_y = sch.get_block("Y", func_name="mm_relu")
    i, j, k = sch.get_loops(block_y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    return sch


# --------------------------------------------------------------------------- printing


def test_seed_trace_prints_exactly_like_tvm(func):
    sch = seed(func)
    assert str(sch.trace) == SEED_TRACE
    assert sch.trace.script() == SEED_TRACE
    assert repr(sch.trace) == SEED_TRACE


def test_seed_trace_tirx_syntax(func):
    assert seed(func).trace.script(syntax="tirx") == SEED_TRACE_TIRX


def test_trace_lines_have_no_header(func):
    assert seed(func).trace.lines() == [ln[2:] for ln in SEED_TRACE.splitlines()[2:]]


def test_empty_trace_prints_pass(func):
    text = wb.Schedule(func).trace.script()
    assert text.splitlines() == [
        "# from tvm import tir",
        "def apply_trace(sch: tir.Schedule) -> None:",
        "  pass",
    ]
    assert len(wb.Trace.from_python(text)) == 0


def test_every_primitive_prints_tvm_keywords(func):
    sch = wb.Schedule(func)
    b = sch.get_block("Y")
    i, j, k = sch.get_loops(b)
    f = sch.fuse(i, j)
    sch.parallel(f)
    k0, k1 = sch.split(k, factors=[None, 8])
    sch.unroll(k1)
    c = sch.get_block("C")
    ci, cj = sch.get_loops(c)
    sch.vectorize(cj)
    sch.annotate(b, ann_key="k", ann_val=1)
    sch.unannotate(b, ann_key="k")
    sch.get_child_blocks(f)
    sch.get_producers(c)
    sch.get_consumers(b)
    assert sch.trace.lines() == [
        'b0 = sch.get_block(name="Y", func_name="mm_relu")',
        "l1, l2, l3 = sch.get_loops(block=b0)",
        "l4 = sch.fuse(l1, l2, preserve_unit_iters=True)",
        "sch.parallel(loop=l4)",
        "l5, l6 = sch.split(loop=l3, factors=[None, 8], preserve_unit_iters=True, "
        "disable_predication=False)",
        "sch.unroll(loop=l6)",
        'b7 = sch.get_block(name="C", func_name="mm_relu")',
        "l8, l9 = sch.get_loops(block=b7)",
        "sch.vectorize(loop=l9)",
        'sch.annotate(block_or_loop=b0, ann_key="k", ann_val=1)',
        'sch.unannotate(block_or_loop=b0, ann_key="k")',
        "b10, = sch.get_child_blocks(block_or_loop=l4)",
        "b11, = sch.get_producers(block=b7)",
        "b12, = sch.get_consumers(block=b0)",
    ]
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


# --------------------------------------------------------------------------- JSON


def test_json_shape(func):
    obj = json.loads(seed(func).trace.as_json())
    assert isinstance(obj, list) and len(obj) == 2
    insts, decisions = obj
    assert decisions == []
    for inst in insts:
        kind, inputs, attrs, outputs = inst
        assert isinstance(kind, str)
        assert isinstance(inputs, list) and isinstance(attrs, list) and isinstance(outputs, list)
    assert [inst[0] for inst in insts] == ["GetBlock", "GetLoops", "Split", "Reorder"]
    assert insts[0] == ["GetBlock", [], ["Y", "mm_relu"], ["b0"]]
    assert insts[1] == ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]]
    assert insts[2][0] == "Split"
    assert insts[2][1][0] == "l2" and insts[2][1][2] == 4
    assert insts[2][2:] == [[1, 0], ["l4", "l5"]]
    assert insts[3] == ["Reorder", ["l4", "l3", "l5"], [], []]


def test_json_none_input_is_tvm_none_string(func):
    """TVM writes a None input (the inferred split factor) as the string "None";
    a trace we write must load in TVM, which rejects a JSON null there."""
    assert seed(func).trace.as_json_obj() == SEED_JSON_TVM


def test_json_obj_and_text_agree(func):
    t = seed(func).trace
    assert json.loads(t.as_json()) == t.as_json_obj()
    assert json.loads(t.as_json(indent=2)) == t.as_json_obj()


def test_json_from_tvm_replays(func):
    """A trace as TVM writes it (``"None"``, TVM kind names) loads and replays."""
    for data in (SEED_JSON_TVM, json.dumps(SEED_JSON_TVM)):
        sch = wb.Schedule(func)
        wb.Trace.from_json(data).apply_to_schedule(sch)
        assert sch.mod.script() == seed(func).mod.script()
        assert str(sch.trace) == SEED_TRACE


def test_json_accepts_tvm_sblock_kind_names(func):
    data = json.loads(json.dumps(SEED_JSON_TVM))
    data[0][0][0] = "GetSBlock"
    data[0].append(["GetChildSBlocks", ["l4"], [], ["b6"]])
    trace = wb.Trace.from_json(data)
    assert [inst.kind for inst in trace] == [
        "GetBlock",
        "GetLoops",
        "Split",
        "Reorder",
        "GetChildBlocks",
    ]
    sch = wb.Schedule(func)
    trace.apply_to_schedule(sch)
    assert sch.trace.lines()[-1] == "b6, = sch.get_child_blocks(block_or_loop=l4)"


def test_json_accepts_missing_decisions_list(func):
    trace = wb.Trace.from_json([SEED_JSON_TVM[0]])
    assert len(trace) == 4


def test_json_string_inputs_are_quoted_like_tvm(func):
    sch = wb.Schedule(func)
    b = sch.get_block("Y")
    sch.annotate(b, ann_key="meta_schedule.tiling_structure", ann_val="SSRSRS")
    inst = sch.trace.as_json_obj()[0][1]
    # TVM: inputs [block, "\"SSRSRS\""], attrs [key]
    assert inst == ["Annotate", ["b0", '"SSRSRS"'], ["meta_schedule.tiling_structure"], []]
    roundtrip_trace(sch, func)


def test_with_decision_refuses_non_sampling_instruction(func):
    t = seed(func).trace
    with pytest.raises(wb.TraceError, match="step 2: Split is not a sampling instruction"):
        t.with_decision(2, [32, 4])
    assert t[2].decision is None  # traces are immutable
    obj = t.as_json_obj()
    obj[1] = [[2, [32, 4]]]
    with pytest.raises(wb.TraceError, match="step 2"):
        wb.Trace.from_json(obj)


# --------------------------------------------------------------------------- python text


def test_from_python_classic_and_tirx(func):
    want = seed(func).mod.script()
    for text in (SEED_TRACE, SEED_TRACE_TIRX):
        sch = wb.Schedule(func)
        wb.Trace.from_python(text).apply_to_schedule(sch)
        assert sch.mod.script() == want
        assert str(sch.trace) == SEED_TRACE


def test_from_python_accepts_bare_statements(func):
    text = "\n".join(ln.strip() for ln in SEED_TRACE.splitlines()[2:])
    sch = wb.Schedule(func)
    wb.Trace.from_python(text).apply_to_schedule(sch)
    assert str(sch.trace) == SEED_TRACE


def test_from_python_mlc_style_positional_names_are_refused():
    """The chapter's hand-written ``sch.get_block("Y", func_name=...)`` uses a
    positional argument; trace text uses keywords, and the loader says which step."""
    text = 'block_Y = sch.get_block("Y", func_name="mm_relu")'
    with pytest.raises(wb.TraceError, match="step 0"):
        wb.Trace.from_python(text)


def test_trace_roundtrip_seed(func):
    roundtrip_trace(seed(func), func)
    assert_verifies(seed(func), func)


# --------------------------------------------------------------------------- files


def test_save_load_json(func, tmp_path):
    t = seed(func).trace
    path = tmp_path / "seed.json"
    t.save(path)
    assert json.loads(path.read_text()) == t.as_json_obj()
    assert not list(tmp_path.glob("*.tmp"))
    loaded = wb.Trace.load(path)
    assert str(loaded) == SEED_TRACE
    sch = wb.Schedule(func)
    loaded.apply_to_schedule(sch)
    assert sch.mod.script() == seed(func).mod.script()


def test_save_load_str_path(func, tmp_path):
    t = seed(func).trace
    path = str(tmp_path / "seed.json")
    t.save(path)
    assert str(wb.Trace.load(path)) == SEED_TRACE


def test_load_python_file(func, tmp_path):
    path = tmp_path / "seed_trace.py"
    path.write_text(SEED_TRACE + "\n")
    assert str(wb.Trace.load(path)) == SEED_TRACE


def test_save_overwrites(func, tmp_path):
    path = tmp_path / "t.json"
    wb.Schedule(func).trace.save(path)
    seed(func).trace.save(path)
    assert str(wb.Trace.load(path)) == SEED_TRACE


# --------------------------------------------------------------------------- malformed


@pytest.mark.parametrize(
    "data, step, words",
    [
        ([[["Nope", [], [], []]], []], 0, ["Nope"]),
        (
            [[["GetBlock", [], ["Y", "mm_relu"], ["b0"]], ["Frobnicate", ["b0"], [], []]], []],
            1,
            ["Frobnicate"],
        ),
        ([[["GetLoops", ["b9"], [], ["l1"]]], []], 0, ["b9"]),
        (
            [[["GetBlock", [], ["Y", "mm_relu"], ["b0"]], ["Parallel", ["l7"], [], []]], []],
            1,
            ["l7"],
        ),
        ([[["GetBlock", [], ["Y"], ["b0"]]], []], 0, ["GetBlock"]),
        (
            [[["GetBlock", [], ["Y", "mm_relu"], ["b0"]], ["GetLoops", [], [], []]], []],
            1,
            ["GetLoops"],
        ),
        (
            [[["GetBlock", [], ["Y", "mm_relu"], ["b0"]], ["GetLoops", ["b0", "b0"], [], []]], []],
            1,
            ["GetLoops"],
        ),
        ([[["Split", [], [1, 0], []]], []], 0, ["Split"]),
        ([[["GetBlock", [], ["Y", "mm_relu"]]], []], 0, []),
        ([[["GetBlock", [], ["Y", "mm_relu"], ["x0"]]], []], 0, ["x0"]),
        ([[["GetBlock", "b0", ["Y", "mm_relu"], ["b0"]]], []], 0, []),
        (
            [[["GetBlock", [], ["Y", "mm_relu"], ["b0"]], ["Parallel", [{"a": 1}], [], []]], []],
            1,
            [],
        ),
    ],
    ids=[
        "unknown-kind",
        "unknown-kind-later",
        "undefined-handle",
        "undefined-handle-later",
        "too-few-attrs",
        "too-few-inputs",
        "too-many-inputs",
        "split-without-loop",
        "not-four-fields",
        "bad-output-name",
        "inputs-not-list",
        "object-input",
    ],
)
def test_from_json_malformed_names_step(data, step, words):
    with pytest.raises(wb.TraceError) as info:
        wb.Trace.from_json(data)
    msg = str(info.value)
    assert f"step {step}" in msg, msg
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize(
    "text",
    ["[[", "", "not json", '{"insts": []}', "[]", "[1, 2]", "[[], [], []]", '[[], [["x", 1]]]'],
    ids=[
        "truncated",
        "empty",
        "garbage",
        "object",
        "empty-list",
        "not-lists",
        "three-parts",
        "bad-decision",
    ],
)
def test_from_json_invalid_document(text):
    with pytest.raises(wb.TraceError) as info:
        wb.Trace.from_json(text)
    assert str(info.value).startswith("load: ")


def test_trace_error_is_a_schedule_error():
    assert issubclass(wb.TraceError, wb.ScheduleError)


@pytest.mark.parametrize(
    "text, step",
    [
        (
            "def apply_trace(sch):\n  b0 = sch.get_block(name='Y', func_name='mm_relu')\n"
            "  l1 = sch.get_loops(block=b1)",
            1,
        ),
        ("def apply_trace(sch):\n  sch.frobnicate(loop=l1)", 0),
        (
            "def apply_trace(sch):\n  b0 = sch.get_block(name='Y', func_name='mm_relu')\n"
            "  sch.get_loops(block=b0, extra=1)",
            1,
        ),
        ("def apply_trace(sch):\n  b0 = sch.get_block(name='Y')", 0),
        (
            "def apply_trace(sch):\n  b0 = sch.get_block(name='Y', func_name='mm_relu')\n"
            "  l1, l2, l3 = sch.get_loops(block=b0)\n  l4 = sch.split(loop=l2, factors=f)",
            2,
        ),
        ("def apply_trace(sch):\n  b0 = sch.get_block(**{'name': 'Y'})", 0),
        ("def apply_trace(sch):\n  b0 = other.get_block(name='Y', func_name='mm_relu')", 0),
        ("def apply_trace(sch):\n  for i in range(3):\n    pass", 0),
        (
            "def apply_trace(sch):\n  b0 = sch.get_block(name='Y', func_name='mm_relu')\n"
            "  b0.x = 1",
            1,
        ),
    ],
    ids=[
        "undefined-handle",
        "unknown-method",
        "unexpected-kwarg",
        "missing-kwarg",
        "name-argument",
        "double-star",
        "not-sch",
        "loop-statement",
        "attribute-assign",
    ],
)
def test_from_python_malformed_names_step(text, step):
    with pytest.raises(wb.TraceError) as info:
        wb.Trace.from_python(text)
    assert f"step {step}" in str(info.value)


def test_from_python_syntax_error():
    with pytest.raises(wb.TraceError, match="not valid Python"):
        wb.Trace.from_python("def apply_trace(sch:\n")


SENTINEL_NAME = "workbench_trace_sentinel"


def _hostile_texts(path) -> list[str]:
    p = str(path)
    return [
        f"import os\nos.system('touch {p}')",
        f"def apply_trace(sch):\n  import os\n  os.system('touch {p}')",
        f"def apply_trace(sch):\n  os.system('touch {p}')",
        f"def apply_trace(sch):\n  __import__('os').system('touch {p}')",
        f"def apply_trace(sch):\n  b0 = sch.get_block(name=__import__('os').system('touch {p}'), "
        "func_name='mm_relu')",
        f"def apply_trace(sch):\n  b0 = sch.get_block(name=open('{p}', 'w'), func_name='x')",
        f"def apply_trace(sch):\n  sch.__class__.__init__(sch, open('{p}', 'w'))",
        f"def apply_trace(sch):\n  l1 = sch.split(loop=exec(\"open('{p}', 'w')\"), factors=[2])",
        f"open('{p}', 'w')",
        f"b0 = sch.get_block(name='Y', func_name='mm_relu')\nimport os\nos.system('touch {p}')",
    ]


@pytest.mark.parametrize("index", range(10))
def test_from_python_never_executes(tmp_path, func, index):
    sentinel = tmp_path / SENTINEL_NAME
    text = _hostile_texts(sentinel)[index]
    with pytest.raises(wb.TraceError) as info:
        trace = wb.Trace.from_python(text)
        trace.apply_to_schedule(wb.Schedule(func))
    assert "step" in str(info.value)
    assert not sentinel.exists(), "loading a trace ran code from it"


def test_from_python_refuses_module_level_import(tmp_path, func):
    """Only the trace function may be in the text: an import next to it is refused,
    not silently dropped."""
    sentinel = tmp_path / SENTINEL_NAME
    text = f"import os\nos.system('touch {sentinel}')\n" + SEED_TRACE
    with pytest.raises(wb.TraceError):
        wb.Trace.from_python(text)
    assert not sentinel.exists()


def test_from_python_refuses_extra_function(tmp_path, func):
    sentinel = tmp_path / SENTINEL_NAME
    text = SEED_TRACE + f"\n\ndef other(sch):\n  import os\n  os.system('touch {sentinel}')\n"
    with pytest.raises(wb.TraceError):
        wb.Trace.from_python(text)
    assert not sentinel.exists()


def test_load_hostile_file_never_executes(tmp_path):
    sentinel = tmp_path / SENTINEL_NAME
    path = tmp_path / "evil.py"
    path.write_text(f"import os\nos.system('touch {sentinel}')\n")
    with pytest.raises(wb.TraceError):
        wb.Trace.load(path)
    assert not sentinel.exists()


# --------------------------------------------------------------------------- replay failures


def test_replay_mismatched_function_names_the_step(func):
    """split factors [8, 16] fit a 128 loop but not a 256 one."""
    sch = wb.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.split(j, factors=[8, 16])
    trace = sch.trace
    other = wb.Schedule(mm_relu_func(256))
    with pytest.raises(wb.TraceError) as info:
        trace.apply_to_schedule(other)
    msg = str(info.value)
    assert "step 2" in msg
    assert "sch.split(loop=l2, factors=[8, 16]" in msg
    assert '"j"' in msg and "256" in msg
    assert isinstance(info.value.__cause__, wb.ScheduleError)
    # the split was not applied
    assert [other.get(lp).loop_var.name for lp in other.get_loops(other.get_block("Y"))] == [
        "i",
        "j",
        "k",
    ]


def test_replay_missing_block_names_the_step(func):
    trace = seed(func).trace
    with pytest.raises(wb.TraceError) as info:
        trace.apply_to_schedule(wb.Schedule(matmul_func(16, 16, 16)))
    msg = str(info.value)
    assert "step 0" in msg
    assert "get_block" in msg


def test_replay_wrong_output_count_names_the_step(func):
    data = json.loads(json.dumps(SEED_JSON_TVM))
    data[0][1][3] = ["l1", "l2"]  # the block has three loops
    data[0] = data[0][:2]
    with pytest.raises(wb.TraceError) as info:
        wb.Trace.from_json(data).apply_to_schedule(wb.Schedule(func))
    assert "step 1" in str(info.value)


def test_replay_refused_primitive_error_detail(func):
    """A replay failure carries the IR, so detail() shows where it failed."""
    data = json.loads(json.dumps(SEED_JSON_TVM))
    data[0][2] = ["Parallel", ["l3"], [], []]  # k is a reduction loop
    data[0] = data[0][:3]
    with pytest.raises(wb.TraceError) as info:
        wb.Trace.from_json(data).apply_to_schedule(wb.Schedule(func))
    assert "step 2" in str(info.value)
    assert "for k in range(128):  # <-- parallel" in info.value.detail()


@pytest.mark.parametrize(
    "data",
    [
        [[[["GetLoops"], [], [], []]], []],
        [[[{"kind": "GetLoops"}, [], [], []]], []],
        [[], None],
        [[], 0],
        [[], "decisions"],
        [[], [[0.5, 1]]],
    ],
    ids=[
        "kind-list",
        "kind-dict",
        "decisions-null",
        "decisions-int",
        "decisions-str",
        "decision-index-float",
    ],
)
def test_from_json_malformed_structure_is_a_trace_error(data):
    """Malformed JSON of any shape is refused with TraceError, never a TypeError."""
    with pytest.raises(wb.TraceError):
        wb.Trace.from_json(data)
    with pytest.raises(wb.TraceError):
        wb.Trace.from_json(json.dumps(data))


def test_from_json_single_output_kind_without_output_names_the_step(func):
    """Fuse produces one loop; a Fuse entry with no output is malformed."""
    data = [SEED_JSON_TVM[0][:2] + [["Fuse", ["l1", "l2"], [1], []]], []]
    with pytest.raises(wb.TraceError) as info:
        trace = wb.Trace.from_json(data)
        str(trace)
        trace.apply_to_schedule(wb.Schedule(func))
    assert "step 2" in str(info.value)


def test_from_python_single_output_call_without_target_names_the_step(func):
    text = "\n".join(
        [
            'b0 = sch.get_block(name="Y", func_name="mm_relu")',
            "l1, l2, l3 = sch.get_loops(block=b0)",
            "sch.fuse(l1, l2, preserve_unit_iters=True)",
        ]
    )
    with pytest.raises(wb.TraceError) as info:
        trace = wb.Trace.from_python(text)
        str(trace)
        trace.apply_to_schedule(wb.Schedule(func))
    assert "step 2" in str(info.value)


def test_replay_decision_on_instruction_without_decisions_names_the_step(func):
    """Only sampling instructions take a decision; a decision attached to a Split
    (by with_decision, JSON or Python text) is a malformed trace, not a TypeError."""
    trace = seed(func).trace
    obj = trace.as_json_obj()
    obj[1] = [[2, [32, 4]]]
    text = trace.script().replace("disable_predication=False)", "disable_predication=False, "
                                  "decision=[32, 4])")
    attempts = (
        lambda: trace.with_decision(2, [32, 4]),
        lambda: wb.Trace.from_json(obj),
        lambda: wb.Trace.from_python(text),
    )
    for attempt in attempts:
        with pytest.raises(wb.TraceError) as info:
            attempt()
        assert "step 2" in str(info.value)


def test_failed_replay_leaves_schedule_as_it_was(func):
    """Replay is all or nothing: step 2 (factors [2, 2] for a loop of 6) fails, and the steps
    before it (get_block, get_loops) are not left behind in the trace."""
    trace = seed(func).trace
    small = mm_relu_func(6)
    sch = wb.Schedule(small)
    before_text, before_len = sch.mod.script(), len(sch.trace)
    bad = wb.Trace.from_python(trace.script().replace("[None, 4]", "[2, 2]"))
    with pytest.raises(wb.TraceError, match="step 2"):
        bad.apply_to_schedule(sch)
    assert sch.mod.script() == before_text
    assert len(sch.trace) == before_len


def test_get_block_root_is_allowed(func):
    sch = wb.Schedule(func)
    root = sch.get_block("root")
    assert [sch.get(b).name for b in sch.get_child_blocks(root)] == ["Y", "C"]
    assert sch.get_loops(root) == []
