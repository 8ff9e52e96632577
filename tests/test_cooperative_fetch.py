"""Cooperative fetch: loops of a shared-memory copy bound to thread axes that an
enclosing loop is bound to already (``workbench.gpu_examples.gpu_matmul_schedule``).

TVM 0.27 accepts it and so do we: the trace replays (ours and TVM's) to the same IR,
and the C target, which runs every thread-bound loop serially, computes the matmul.
"""

from __future__ import annotations

import re

import pytest

import workbench as wb
from workbench.gpu_examples import gpu_matmul_schedule
from workbench.ir.analysis import block_path, iter_blocks, loops_above
from workbench.ir.functor import substitute
from workbench.ir.simplify import simplify, struct_key
from workbench.testing import assert_verifies, roundtrip_trace

SIZES = [
    dict(n=128),
    dict(n=64, tile=32, per_thread=2, k_tile=8),
    dict(n=64, tile=32, per_thread=4, k_tile=16, align=False),
]


def _ids(kw: dict) -> str:
    return "-".join(f"{k}{v}" for k, v in kw.items())


def _fetch_loops(sch: wb.Schedule, block: str) -> list:
    return [sch.get(lp) for lp in sch.get_loops(sch.get_block(block))]


@pytest.mark.parametrize("kw", SIZES, ids=_ids)
def test_cooperative_fetch_binds_the_axes_of_the_enclosing_loops(kw):
    sch = gpu_matmul_schedule(**kw)
    for block in ("A_shared", "B_shared"):
        tags = [lp.thread_tag for lp in _fetch_loops(sch, block)]
        # blockIdx.y, blockIdx.x, threadIdx.y, threadIdx.x (C's), k_0, then the fetch
        assert tags == ["blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x", None,
                        None, "threadIdx.y", "threadIdx.x"]


@pytest.mark.parametrize("kw", SIZES, ids=_ids)
def test_cooperative_fetch_trace_roundtrip_and_c_numerics(kw):
    sch = gpu_matmul_schedule(**kw)
    func = wb.workloads.matmul(kw["n"], kw["n"], kw["n"])
    roundtrip_trace(sch, func)
    assert_verifies(sch, func)


_AXIS_VALUE = r"T\.axis\.\w+\(.*\)"
_AXIS = re.compile(r"^(\s*\w+ = T\.axis\.\w+\(\d+, ).*\)$")


def _comparable(text: str) -> list[str]:
    """Printed TVMScript without what the two printers write differently (header
    comments, function attributes, ``0.0`` against ``0`` in float literals), and with
    the block bindings cut to their kind and extent (:func:`_same_bindings` compares
    their values)."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("#", "T.func_attr", "@")):
            continue
        line = re.sub(r"T\.float(\d+)\((-?\d+)\.0\)", r"T.float\1(\2)", line.rstrip())
        out.append(_AXIS.sub(r"\1...)", line))
    return out


def _same_bindings(ours: wb.PrimFunc, theirs: wb.PrimFunc) -> None:
    """Each block's bindings in ``theirs`` (TVM's IR read back with our parser) simplify,
    under the loop extents, to ours: TVM keeps a split fused loop as
    ``(f0 * 256 + f1 * 16 + f2) // 8`` where we write ``f0 * 32 + f1 * 2 + f2 // 8``."""
    pairs = list(zip(iter_blocks(ours.body), iter_blocks(theirs.body), strict=True))
    for ob, tb in pairs:
        assert ob.name == tb.name
        o_loops = loops_above(block_path(ours, ob.name))
        t_loops = loops_above(block_path(theirs, tb.name))
        rename = {t.loop_var: o.loop_var for o, t in zip(o_loops, t_loops, strict=True)}
        bounds = {lp.loop_var: (0, int(lp.extent) - 1) for lp in o_loops}
        for ov, tv in zip(ob.iter_values, tb.iter_values, strict=True):
            got = simplify(substitute(tv, rename), bounds)
            assert struct_key(got) == struct_key(ov), f"block {ob.name}: {got} != {ov}"


@pytest.mark.tvm
@pytest.mark.parametrize("kw", SIZES, ids=_ids)
def test_cooperative_fetch_trace_replays_on_tvm_to_the_same_ir(kw):
    """TVM replays our trace JSON of the cooperative-fetch matmul to the IR we print
    (needs ``apache-tvm``; checked against 0.27)."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional check)")
    sch = gpu_matmul_schedule(**kw)
    func = wb.workloads.matmul(kw["n"], kw["n"], kw["n"])
    mod = tvm.script.from_source(wb.IRModule.from_funcs(func).script(syntax="tirx"))
    theirs = tvm.s_tir.Schedule(mod)
    insts, decisions = sch.trace.as_json_obj()
    insts = [["GetSBlock", *inst[1:]] if inst[0] == "GetBlock" else inst for inst in insts]
    tvm.s_tir.schedule.Trace.apply_json_to_schedule([insts, decisions], theirs)
    ours = sch.mod.script(syntax="tirx")
    assert ours.count('thread="threadIdx.x"') == 3  # C's loop and the two fetches
    tvm_text = theirs.mod.script()
    assert _comparable(ours) == _comparable(tvm_text)
    _same_bindings(sch.func, wb.from_script(tvm_text).functions[0][1])


@pytest.mark.tvm
def test_cooperative_fetch_script_is_read_by_tvm():
    """Our printed TIRx text of the scheduled module parses in TVM and prints back the
    same (the nested same-axis bindings included)."""
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (optional check)")
    ours = gpu_matmul_schedule(128).mod.script(syntax="tirx")
    back = tvm.script.from_source(ours).script()
    assert back.count('thread="threadIdx.y"') == 3
    assert _comparable(back) == _comparable(ours)
    assert re.findall(_AXIS_VALUE, back) == re.findall(_AXIS_VALUE, ours)
