"""``split`` with very many factors: bounded, and no longer cubic in their number.

A perfect split of a 32-bit extent has at most 31 factors above 1; ``split`` takes at
most ``MAX_SPLIT_FACTORS`` (64) and refuses more with ``TooManyFactorsError`` naming
the loop. Within the bound, the index of the old loop is built in one pass.
"""

from __future__ import annotations

import json
import random
import time

import pytest

import workbench as wb
from workbench.ir import Var
from workbench.ir.simplify import struct_key
from workbench.schedule.primitives.loops import (
    MAX_SPLIT_FACTORS,
    TooManyFactorsError,
    _fused_index,
    _fused_index_folded,
)


def matmul_j():
    func = wb.workloads.matmul(16, 2**20, 4)
    sch = wb.Schedule(func)
    return func, sch, sch.get_loops(sch.get_block("C"))[1]


def test_split_into_the_most_factors_is_fast_and_correct():
    _, sch, j = matmul_j()
    factors = [2] * 20 + [1] * (MAX_SPLIT_FACTORS - 20)
    start = time.perf_counter()
    loops = sch.split(j, factors=factors)
    elapsed = time.perf_counter() - start
    assert len(loops) == MAX_SPLIT_FACTORS
    assert elapsed < 2.0, f"a {MAX_SPLIT_FACTORS}-factor split took {elapsed:.2f} s"
    small = wb.Schedule(wb.workloads.matmul(4, 8, 4))
    small.split(small.get_loops(small.get_block("C"))[1], factors=[2, 1, 2, 1, 1, 2] + [1] * 58)
    wb.verify(small.mod, wb.workloads.matmul(4, 8, 4))


def test_split_refuses_more_factors_than_the_bound():
    _, sch, j = matmul_j()
    before = sch.mod
    with pytest.raises(TooManyFactorsError, match=rf'split: {MAX_SPLIT_FACTORS + 1} factors for '
                                                  rf'loop "j": at most {MAX_SPLIT_FACTORS}') as e:
        sch.split(j, factors=[None] + [1] * MAX_SPLIT_FACTORS)
    assert isinstance(e.value, wb.ScheduleError)
    assert sch.mod is before and len(sch.trace) == 2


def test_a_trace_with_a_300_factor_split_is_refused_quickly():
    func, sch, j = matmul_j()
    sch.split(j, factors=[None, 4])
    doc = json.loads(sch.trace.as_json())
    split = doc[0][2]
    split[1] = [split[1][0]] + ["None"] + [1] * 299  # the loop, then 300 factors
    split[3] = [f"l{100 + n}" for n in range(300)]
    start = time.perf_counter()
    with pytest.raises(wb.TraceError, match=r"trace step 2 .*300 factors for loop \"j\""):
        wb.Trace.from_json(doc).apply_to_schedule(wb.Schedule(func))
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize("preserve_unit_iters", [True, False])
def test_one_pass_index_is_the_simplifier_s_form(preserve_unit_iters):
    """The one-pass index equals what folding the factors through the simplifier gave."""
    rng = random.Random(0)
    for _ in range(200):
        sizes = [rng.choice([1, 1, 2, 3, 4, 7, 16]) for _ in range(rng.randint(1, 12))]
        new_vars = [Var(f"v{n}", rng.choice(["int32", "int64"])) for n in range(len(sizes))]
        dt = new_vars[0].dtype
        new_vars = [Var(v.name, dt) for v in new_vars]
        fast = _fused_index(new_vars, sizes, dt, preserve_unit_iters)
        folded = _fused_index_folded(new_vars, sizes, dt, preserve_unit_iters)
        assert struct_key(fast) == struct_key(folded), sizes
