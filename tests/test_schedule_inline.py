"""Inlining (compute_inline, reverse_compute_inline): for every case the IR after
the primitive equals a reviewed golden file, the trace replays (JSON and Python
text) to the same IR, and the scheduled function computes what the unscheduled one
does. Each refusal has its own ``test_<prim>_fail_<reason>``.

TVM's ``test_tir_schedule_compute_inline.py`` is the reference: the inlined block
and its buffer's allocation disappear; the consumer's reads are derived again;
reverse inlining keeps the producer's block (and its name) and makes it store the
consumer's output.

The goldens live in ``tests/golden/inline_<case>.txt`` (and the unscheduled
functions in ``inline_input_<workload>.txt``). After a deliberate change of the
printer or a primitive, regenerate them with
``python tests/test_schedule_inline.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

import workbench as wb
from workbench.ir import Block, Buffer, BufferStore, For, IterVar, SeqStmt, Var, iter_blocks
from workbench.schedule.primitives.compute_inline import (
    NonInjectiveIndexError,
    NotInlinableError,
    OutputBlockError,
)
from workbench.testing import (
    assert_schedule_error,
    assert_verifies,
    chain_func,
    check_golden,
    conv2d_func,
    mm_relu_func,
    roundtrip_trace,
    write_golden,
)

# --------------------------------------------------------------------------- workloads


def fanout(n: int = 8) -> wb.PrimFunc:
    """``B = A * 2`` read by two outputs ``C = B + 1`` and ``D = B * 3``."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((n, n), lambda i, j: B[i, j] + 1.0, name="C")
    D = wb.compute((n, n), lambda i, j: B[i, j] * 3.0, name="D")
    return wb.create_prim_func([A, C, D], name="fanout")


def join(n: int = 8) -> wb.PrimFunc:
    """Two producers ``B = A * 2``, ``E = A + 1`` and ``F = B + E``."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    E = wb.compute((n, n), lambda i, j: A[i, j] + 1.0, name="E")
    F = wb.compute((n, n), lambda i, j: B[i, j] + E[i, j], name="F")
    return wb.create_prim_func([A, F], name="join")


def transposed(n: int = 8) -> wb.PrimFunc:
    """``B = A * 2`` and ``C[i, j] = B[j, i] + 1``."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((n, n), lambda i, j: B[j, i] + 1.0, name="C")
    return wb.create_prim_func([A, C], name="transposed")


def transposed_partial(n: int = 8) -> wb.PrimFunc:
    """``C[i, j] = B[j, 0] + 1``: transposed, and only column 0 of B."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((n, n), lambda i, j: B[j, 0] + 1.0, name="C")
    return wb.create_prim_func([A, C], name="transposed_partial")


def symmetric(n: int = 8) -> wb.PrimFunc:
    """``C[i, j] = B[i, j] + B[j, i]``: B read at two different indices."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((n, n), lambda i, j: B[i, j] + B[j, i], name="C")
    return wb.create_prim_func([A, C], name="symmetric")


def two_outputs(n: int = 8) -> wb.PrimFunc:
    """``B = A * 2`` is an output too, and ``C = B + 1``."""
    A = wb.placeholder((n, n), "float32", name="A")
    B = wb.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = wb.compute((n, n), lambda i, j: B[i, j] + 1.0, name="C")
    return wb.create_prim_func([A, B, C], name="two_outputs")


def non_injective(n: int = 8) -> wb.PrimFunc:
    """Block ``"B"`` over ``(vi, vj)`` stores ``B[vi] = A[vi, vj]``: every ``vj`` writes
    the same element (TE cannot express it, so it is built from IR nodes)::

        for i, j in T.grid(n, n):   # block "B": B[vi] = A[vi, vj]
        for i2 in range(n):         # block "C": C[vi] = B[vi] + 1
    """
    A, C = Buffer("A", (n, n)), Buffer("C", (n,))
    B = Buffer("B", (n,))
    i, j, i2 = Var("i"), Var("j"), Var("i2")
    vi, vj, wi = Var("vi"), Var("vj"), Var("vi")
    b = Block("B", (IterVar(vi, n), IterVar(vj, n)), (i, j), BufferStore(B, A[vi, vj], (vi,)))
    c = Block("C", (IterVar(wi, n),), (i2,), BufferStore(C, B[wi] + 1.0, (wi,)))
    body = SeqStmt((For(i, n, "serial", For(j, n, "serial", b)), For(i2, n, "serial", c)))
    return wb.PrimFunc("non_injective", (A, C), Block("root", (), (), body, alloc_buffers=(B,)))


WORKLOADS: dict[str, Callable[[], wb.PrimFunc]] = {
    "chain": lambda: chain_func(16),
    "conv2d": lambda: conv2d_func(1, 4, 8, 4, 3),
    "elementwise_chain": lambda: wb.workloads.elementwise_chain(32, 8),
    "linear_bias_relu": lambda: wb.workloads.linear_bias_relu(4, 8, 16),
    "mm_relu_16": lambda: mm_relu_func(16),
    "fanout": fanout,
    "join": join,
    "transposed": transposed,
    "transposed_partial": transposed_partial,
}

_FUNCS: dict[str, wb.PrimFunc] = {}


def workload(name: str) -> wb.PrimFunc:
    if name not in _FUNCS:
        _FUNCS[name] = WORKLOADS[name]()
    return _FUNCS[name]


def block_names(sch: wb.Schedule) -> list[str]:
    return [b.name for b in iter_blocks(sch.func.body) if b.name != "root"]


def allocated(sch: wb.Schedule) -> list[str]:
    return [b.name for b in sch.func.body.alloc_buffers]


def lines(sch: wb.Schedule) -> list[str]:
    return [ln.strip() for ln in sch.mod.script().splitlines()]


# --------------------------------------------------------------------------- cases


def inline_chain_middle(sch):
    """The middle stage C of A -> B -> C -> D: D computes max(B + 1, 0)."""
    sch.compute_inline(sch.get_block("C"))


def inline_chain_all(sch):
    sch.compute_inline(sch.get_block("B"))
    sch.compute_inline(sch.get_block("C"))


def inline_conv_pad(sch):
    """The padding stage into conv: the Select moves into the reduction."""
    sch.compute_inline(sch.get_block("pad"))


def inline_elementwise_chain(sch):
    """relu and batch_norm into scale: one block."""
    sch.compute_inline(sch.get_block("relu"))
    sch.compute_inline(sch.get_block("batch_norm"))


def inline_fanout(sch):
    """B into both of its consumers."""
    sch.compute_inline(sch.get_block("B"))


def inline_transposed(sch):
    sch.compute_inline(sch.get_block("B"))


def inline_transposed_partial(sch):
    """The consumer's indices may be anything: B[j, 0] becomes A[vj, 0] * 2."""
    sch.compute_inline(sch.get_block("B"))


def inline_bias_add(sch):
    """bias_add (which reads the matmul's output) into relu: relu reads the matmul."""
    sch.compute_inline(sch.get_block("bias_add"))


def reverse_inline_chain_last(sch):
    """D folded into its producer C: block C now stores D."""
    sch.reverse_compute_inline(sch.get_block("D"))


def reverse_inline_chain_all(sch):
    sch.reverse_compute_inline(sch.get_block("D"))
    sch.reverse_compute_inline(sch.get_block("C"))


def reverse_inline_relu(sch):
    """relu into bias_add (a complete producer; the matmul itself is a reduction)."""
    sch.reverse_compute_inline(sch.get_block("relu"))


def reverse_inline_transposed(sch):
    """C[i, j] = B[j, i] + 1 folded into B: B's block stores C[vj, vi]."""
    sch.reverse_compute_inline(sch.get_block("C"))


def inline_then_compute_at(sch):
    """Inlining composes with compute_at: relu into batch_norm, then batch_norm under
    scale's loop n."""
    sch.compute_inline(sch.get_block("relu"))
    n, c = sch.get_loops(sch.get_block("scale"))
    sch.compute_at(sch.get_block("batch_norm"), n)


def compute_at_then_inline(sch):
    """A block already moved by compute_at can still be inlined."""
    i, j = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("C"), i)
    sch.compute_inline(sch.get_block("C"))


CASES: dict[str, tuple[str, Callable[[wb.Schedule], None]]] = {
    f.__name__: (w, f)
    for w, f in (
        ("chain", inline_chain_middle),
        ("chain", inline_chain_all),
        ("conv2d", inline_conv_pad),
        ("elementwise_chain", inline_elementwise_chain),
        ("fanout", inline_fanout),
        ("transposed", inline_transposed),
        ("transposed_partial", inline_transposed_partial),
        ("linear_bias_relu", inline_bias_add),
        ("chain", reverse_inline_chain_last),
        ("chain", reverse_inline_chain_all),
        ("linear_bias_relu", reverse_inline_relu),
        ("transposed", reverse_inline_transposed),
        ("elementwise_chain", inline_then_compute_at),
        ("chain", compute_at_then_inline),
    )
}


def scheduled(case: str) -> wb.Schedule:
    w, fn = CASES[case]
    sch = wb.Schedule(workload(w))
    fn(sch)
    return sch


# --------------------------------------------------------------------------- golden


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_before_golden(name):
    check_golden(f"inline_input_{name}", workload(name).script())


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_after(case):
    sch = scheduled(case)
    text = sch.mod.script()
    assert text != wb.Schedule(workload(CASES[case][0])).mod.script(), "nothing changed"
    check_golden(f"inline_{case}", text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_trace_roundtrip(case):
    roundtrip_trace(scheduled(case), workload(CASES[case][0]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_numerics(case):
    assert_verifies(scheduled(case), workload(CASES[case][0]))


# --------------------------------------------------------------------------- structure


def test_inline_removes_block_and_alloc():
    sch = scheduled("inline_chain_middle")
    assert block_names(sch) == ["B", "D"]
    assert allocated(sch) == ["B"]
    assert "C = T.alloc_buffer" not in sch.mod.script()
    assert "D[vi, vj] = T.max(B[vi, vj] + T.float32(1), T.float32(0))" in lines(sch)
    assert "T.reads(B[vi, vj])" in lines(sch)
    sch = scheduled("inline_chain_all")
    assert block_names(sch) == ["D"]
    assert allocated(sch) == []
    assert "T.alloc_buffer" not in sch.mod.script()
    assert "T.reads(A[vi, vj])" in lines(sch)


def test_inline_conv_pad_select():
    sch = scheduled("inline_conv_pad")
    text = sch.mod.script()
    assert block_names(sch) == ["conv"]
    assert "pad" not in text.replace("padding", "")
    assert "T.alloc_buffer" not in text
    assert "T.Select(vh + vry >= 1 and vh + vry < 9" in text
    assert "data[vn, vrc, vh + vry - 1, vw + vrx - 1]" in text
    assert "T.reads(data[vn, vrc, vh + vry - 1, vw + vrx - 1], weight[vk, vrc, vry, vrx])" in (
        lines(sch)
    )


def test_inline_fanout_reaches_every_consumer():
    sch = scheduled("inline_fanout")
    assert block_names(sch) == ["C", "D"]
    text = lines(sch)
    assert "C[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)" in text
    assert "D[vi, vj] = A[vi, vj] * T.float32(2) * T.float32(3)" in text


def test_inline_transposed_substitutes_indices():
    text = lines(scheduled("inline_transposed"))
    assert "C[vi, vj] = A[vj, vi] * T.float32(2) + T.float32(1)" in text
    text = lines(scheduled("inline_transposed_partial"))
    assert "C[vi, vj] = A[vj, 0] * T.float32(2) + T.float32(1)" in text


def test_reverse_inline_keeps_producer_block():
    sch = scheduled("reverse_inline_chain_last")
    assert block_names(sch) == ["B", "C"]
    assert allocated(sch) == ["B"]
    text = lines(sch)
    assert "D[vi, vj] = T.max(B[vi, vj] + T.float32(1), T.float32(0))" in text
    assert "T.writes(D[vi, vj])" in text
    sch = scheduled("reverse_inline_relu")
    assert block_names(sch) == ["matmul", "bias_add"]
    assert "out[vi, vj] = T.max(matmul[vi, vj] + bias[vj], T.float32(0))" in lines(sch)
    assert allocated(sch) == ["matmul"]


def test_reverse_inline_transposed_store():
    sch = scheduled("reverse_inline_transposed")
    assert block_names(sch) == ["B"]
    assert "C[vj, vi] = A[vi, vj] * T.float32(2) + T.float32(1)" in lines(sch)


def test_inlined_block_handle_is_stale():
    """The inlined block's handle refers to nothing now: using it is a ScheduleError."""
    sch = wb.Schedule(workload("chain"))
    c = sch.get_block("C")
    sch.compute_inline(c)
    with pytest.raises(wb.ScheduleError, match='"C"'):
        sch.get(c)
    with pytest.raises(wb.ScheduleError, match='compute_inline: .*"C"'):
        sch.compute_inline(c)


def test_trace_text():
    sch = wb.Schedule(workload("chain"))
    sch.compute_inline(sch.get_block("C"))
    sch.reverse_compute_inline(sch.get_block("D"))
    assert sch.trace.lines()[-3:] == [
        "sch.compute_inline(block=b0)",
        'b1 = sch.get_block(name="D", func_name="chain")',
        "sch.reverse_compute_inline(block=b1)",
    ]


# --------------------------------------------------------------------------- refusals


def test_compute_inline_fail_output_block():
    sch = wb.Schedule(workload("mm_relu_16"))
    c = sch.get_block("C")
    assert_schedule_error(sch, lambda: sch.compute_inline(c), OutputBlockError, "C")


def test_compute_inline_fail_reduction_block():
    sch = wb.Schedule(workload("mm_relu_16"))
    y = sch.get_block("Y")
    assert_schedule_error(sch, lambda: sch.compute_inline(y), NotInlinableError, "Y")


def test_compute_inline_fail_non_injective_indices():
    """B[vi] = A[vi, vj]: the store does not use vj, so it cannot be inverted."""
    func = non_injective()
    sch = wb.Schedule(func)
    b = sch.get_block("B")
    err = assert_schedule_error(sch, lambda: sch.compute_inline(b), NonInjectiveIndexError, "B")
    assert "[vi]" in str(err)


def test_compute_inline_fail_output_buffer_also_read():
    """B is a function output read by C: inlining would lose the output."""
    sch = wb.Schedule(two_outputs())
    b = sch.get_block("B")
    assert_schedule_error(sch, lambda: sch.compute_inline(b), OutputBlockError, "B")


def test_reverse_compute_inline_fail_reduction_producer():
    """mm_relu's relu C cannot fold into the matmul Y, a reduction."""
    sch = wb.Schedule(workload("mm_relu_16"))
    c = sch.get_block("C")
    assert_schedule_error(sch, lambda: sch.reverse_compute_inline(c), NotInlinableError, "C", "Y")


def test_reverse_compute_inline_fail_reduction_block():
    sch = wb.Schedule(workload("mm_relu_16"))
    y = sch.get_block("Y")
    assert_schedule_error(sch, lambda: sch.reverse_compute_inline(y), NotInlinableError, "Y")


def test_reverse_compute_inline_fail_two_producers():
    sch = wb.Schedule(join())
    f = sch.get_block("F")
    assert_schedule_error(
        sch, lambda: sch.reverse_compute_inline(f), NotInlinableError, "F", "B", "E"
    )


def test_reverse_compute_inline_fail_no_producer():
    """B reads only the parameter A: there is no producer block to fold into."""
    sch = wb.Schedule(workload("chain"))
    b = sch.get_block("B")
    assert_schedule_error(sch, lambda: sch.reverse_compute_inline(b), NotInlinableError, "B")


def test_reverse_compute_inline_fail_producer_read_by_another_consumer():
    """B feeds C and D: folding C into B would leave D without B."""
    sch = wb.Schedule(fanout())
    c = sch.get_block("C")
    assert_schedule_error(
        sch, lambda: sch.reverse_compute_inline(c), NotInlinableError, "C", "B", "D"
    )


def test_reverse_compute_inline_fail_output_producer():
    sch = wb.Schedule(two_outputs())
    c = sch.get_block("C")
    assert_schedule_error(sch, lambda: sch.reverse_compute_inline(c), OutputBlockError, "C", "B")


def test_reverse_compute_inline_fail_non_injective_indices():
    """C reads B[j, 0]: B's store cannot be mapped back onto C's iter vars."""
    sch = wb.Schedule(transposed_partial())
    c = sch.get_block("C")
    err = assert_schedule_error(
        sch, lambda: sch.reverse_compute_inline(c), NonInjectiveIndexError, "C", "B"
    )
    assert "[vj, 0]" in str(err)


def test_reverse_compute_inline_fail_several_indices():
    sch = wb.Schedule(symmetric())
    c = sch.get_block("C")
    assert_schedule_error(
        sch, lambda: sch.reverse_compute_inline(c), NonInjectiveIndexError, "C", "B"
    )


def test_reverse_compute_inline_fail_predicate():
    sch = wb.Schedule(workload("chain"))
    i, j = sch.get_loops(sch.get_block("D"))
    sch.split(j, factors=[None, 5])
    d = sch.get_block("D")
    assert_schedule_error(sch, lambda: sch.reverse_compute_inline(d), NotInlinableError, "D")


if __name__ == "__main__":  # pragma: no cover - regenerating goldens by hand
    if "--update-golden" not in sys.argv:
        sys.exit("usage: python tests/test_schedule_inline.py --update-golden")
    for name in sorted(WORKLOADS):
        print(write_golden(f"inline_input_{name}", workload(name).script()))
    for name in sorted(CASES):
        print(write_golden(f"inline_{name}", scheduled(name).mod.script()))
