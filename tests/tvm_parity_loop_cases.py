"""Cases from TVM's schedule tests for split/fuse/reorder, the loop kinds and
annotations, as TVMScript text and schedule steps that both tools can run.

Used by ``test_tvm_parity_loops.py`` (our behaviour, without TVM) and by
``test_tvm_differential.py`` (the same steps on TVM itself). A step function gets the
schedule and ``blk(name)``, which looks a block up in whichever tool runs it.
"""

from __future__ import annotations

from collections.abc import Callable

HEAD = "# from tvm.script import tirx as T\n\n"

SOURCES: dict[str, str] = {
    # an opaque block (no iter vars) holding a block that binds the loops directly
    "opaque_nested": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((8, 8, 8), "float32"), B: T.Buffer((8, 8, 8), "float32")):
    for i, j, k in T.grid(8, 8, 8):
        with T.sblock("opaque"):
            T.reads(A[i, j, k])
            T.writes(B[i, j, k])
            with T.sblock("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""",
    # opaque blocks indexing buffers with the loop variable
    "opaque_access": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("opaque"):
            B[i] = A[i] * T.float32(2)
""",
    "opaque_in_place": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32")):
    for i in range(15):
        with T.sblock("opaque"):
            A[i + 1] = A[i + 1] + A[i]
""",
    "elementwise": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
""",
    "annotated": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i in range(16):
        for j in T.serial(16, annotations={"pragma_auto_unroll_max_step": 16}):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
""",
    # reorder: a scaled binding, a non-affine one, a predicate over all loops,
    # overlapping windows
    "strided": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 4):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            vj = T.axis.spatial(16, j * 4)
            B[vi, vj] = A[vi, vj] * T.float32(2)
""",
    "square": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    for v0, v1, v2 in T.grid(3, 4, 4):
        with T.sblock("B"):
            i = T.axis.spatial(8, v0 * v0 + v1)
            j = T.axis.spatial(4, v2)
            B[i, j] = A[i, j] + T.float32(1)
""",
    "predicated": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((8, 8, 8), "float32"), B: T.Buffer((8, 8, 8), "float32")):
    for i, j, k in T.grid(8, 8, 8):
        with T.sblock("B"):
            T.where(i * 64 + j * 8 + k < 100)
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""",
    "overlapping": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((14, 4), "float32"), B: T.Buffer((14, 4), "float32")):
    for v0, v1, v2 in T.grid(6, 4, 4):
        with T.sblock("B"):
            i = T.axis.spatial(14, v0 * 2 + v1)
            j = T.axis.spatial(4, v2)
            B[i, j] = A[i, j] + T.float32(1)
""",
    # a loop whose extent is an outer loop's variable
    "dependent": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16, 16), "float32"), B: T.Buffer((16, 16, 16), "float32")):
    for i in range(16):
        for j, k in T.grid(i, 16):
            with T.sblock("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
""",
    # reductions: plain, a non-affine reduce binding, a reduce var indexing the output
    "rowsum": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 16):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
""",
    "rowsum_not_affine": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 6):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            vk = T.axis.reduce(16, k * k // 2)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
""",
    "rowsum_not_compact": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 16):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vk] = T.float32(0)
            B[vk] = B[vk] + A[vi, vk]
""",
    # an init on a block without reduce iter vars (as TVM's inline-with-reduction test)
    "init_only": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vj]
""",
    # the reduction of a nested block is bound through the outer block's loops
    "nested_reduction": """
@T.prim_func(s_tir=True)
def main(A: T.Buffer((8, 8, 8, 8), "float32"), B: T.Buffer((8, 8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.sblock("outer"):
            vi, vj = T.axis.remap("SS", [i, j])
            for k, l in T.grid(8, 8):
                with T.sblock("inner"):
                    vk, vl = T.axis.remap("SR", [k, l])
                    with T.init():
                        B[vi, vj, vk] = T.float32(0)
                    B[vi, vj, vk] = B[vi, vj, vk] + A[vi, vj, vk, vl]
""",
}


def source(name: str) -> str:
    """The full TVMScript text of case ``name`` (tirx syntax)."""
    return HEAD + SOURCES[name].lstrip("\n")


Steps = Callable[..., object]


def _loops(sch, blk, name):
    return sch.get_loops(blk(name))


# (case name, source, steps, what happens: "ok" or the refusing primitive's error class
# name in the workbench; TVM agrees unless listed in DIVERGENT)
CASES: dict[str, tuple[str, Steps, str]] = {
    "split_opaque_nested": (
        "opaque_nested",
        lambda sch, blk: sch.split(_loops(sch, blk, "opaque")[0], factors=[None, 4]),
        "ok",
    ),
    "fuse_opaque_nested": (
        "opaque_nested",
        lambda sch, blk: sch.fuse(*_loops(sch, blk, "opaque")),
        "ok",
    ),
    "split_opaque_access_uneven": (
        "opaque_access",
        lambda sch, blk: sch.split(_loops(sch, blk, "opaque")[0], factors=[None, 3]),
        "ok",
    ),
    "split_three_uneven": (
        "elementwise",
        lambda sch, blk: sch.split(_loops(sch, blk, "B")[0], factors=[None, 2, 3]),
        "ok",
    ),
    "split_annotated": (
        "annotated",
        lambda sch, blk: sch.split(_loops(sch, blk, "B")[1], factors=[None, 4]),
        "AnnotatedLoopError",
    ),
    "fuse_annotated": (
        "annotated",
        lambda sch, blk: sch.fuse(*_loops(sch, blk, "B")),
        "AnnotatedLoopError",
    ),
    "reorder_annotated": (
        "annotated",
        lambda sch, blk: sch.reorder(*reversed(_loops(sch, blk, "B"))),
        "ok",
    ),
    "reorder_strided": (
        "strided",
        lambda sch, blk: sch.reorder(*reversed(_loops(sch, blk, "B"))),
        "NotAffineBindingError",
    ),
    "reorder_square_all": (
        "square",
        lambda sch, blk: sch.reorder(*[_loops(sch, blk, "B")[x] for x in (0, 2, 1)]),
        "NotAffineBindingError",
    ),
    "reorder_square_inner": (
        "square",
        lambda sch, blk: sch.reorder(*[_loops(sch, blk, "B")[x] for x in (2, 1)]),
        "ok",
    ),
    "reorder_predicated": (
        "predicated",
        lambda sch, blk: sch.reorder(*[_loops(sch, blk, "B")[x] for x in (2, 0)]),
        "NotAffineBindingError",
    ),
    "reorder_dependent": (
        "dependent",
        lambda sch, blk: sch.reorder(*[_loops(sch, blk, "B")[x] for x in (2, 0)]),
        "DependentLoopError",
    ),
    "fuse_dependent": (
        "dependent",
        lambda sch, blk: sch.fuse(*_loops(sch, blk, "B")[:2]),
        "DependentLoopError",
    ),
    "reorder_dependent_inner": (
        "dependent",
        lambda sch, blk: sch.reorder(*[_loops(sch, blk, "B")[x] for x in (2, 1)]),
        "ok",
    ),
    "reorder_mixed_uneven": (
        "rowsum",
        lambda sch, blk: sch.reorder(
            *reversed(sch.split(sch.fuse(*_loops(sch, blk, "B")), factors=[None, 3]))
        ),
        "MixedIterTypeLoopError",
    ),
    "reorder_overlapping": (
        "overlapping",
        lambda sch, blk: sch.reorder(*[_loops(sch, blk, "B")[x] for x in (0, 2, 1)]),
        "ok",
    ),
    "reorder_opaque": (
        "opaque_nested",
        lambda sch, blk: sch.reorder(*reversed(_loops(sch, blk, "opaque"))),
        "ok",
    ),
    "reorder_split_uneven": (
        "elementwise",
        lambda sch, blk: sch.reorder(
            sch.split(_loops(sch, blk, "B")[1], factors=[None, 5])[1], _loops(sch, blk, "B")[0]
        ),
        "ok",
    ),
    "parallel_not_affine": (
        "rowsum_not_affine",
        lambda sch, blk: sch.parallel(_loops(sch, blk, "B")[0]),
        "NotCompactDataflowError",
    ),
    "parallel_not_compact": (
        "rowsum_not_compact",
        lambda sch, blk: sch.parallel(_loops(sch, blk, "B")[0]),
        "NotCompactDataflowError",
    ),
    "vectorize_opaque_in_place": (
        "opaque_in_place",
        lambda sch, blk: sch.vectorize(_loops(sch, blk, "opaque")[0]),
        "NotCompactDataflowError",
    ),
    "vectorize_opaque_access": (
        "opaque_access",
        lambda sch, blk: sch.vectorize(_loops(sch, blk, "opaque")[0]),
        "ok",
    ),
    "parallel_reduction_loop": (
        "rowsum",
        lambda sch, blk: sch.parallel(_loops(sch, blk, "B")[1]),
        "NotDataParallelError",
    ),
    "parallel_after_decompose": (
        "rowsum",
        lambda sch, blk: (
            sch.decompose_reduction(blk("B"), _loops(sch, blk, "B")[1]),
            sch.parallel(_loops(sch, blk, "B_update")[0]),
        ),
        "ok",
    ),
    "bind_cross_thread": (
        "rowsum",
        lambda sch, blk: sch.bind(_loops(sch, blk, "B")[1], "threadIdx.x"),
        "ok",
    ),
    "bind_reduction_block_idx": (
        "rowsum",
        lambda sch, blk: sch.bind(_loops(sch, blk, "B")[1], "blockIdx.x"),
        "NotDataParallelError",
    ),
    "bind_reduction_vthread": (
        "rowsum",
        lambda sch, blk: sch.bind(_loops(sch, blk, "B")[1], "vthread.x"),
        "NotDataParallelError",
    ),
    "bind_nested_cross_thread": (
        "nested_reduction",
        lambda sch, blk: (
            sch.bind(_loops(sch, blk, "inner")[1], "threadIdx.x"),
            sch.bind(_loops(sch, blk, "outer")[1], "blockIdx.x"),
        ),
        "ok",
    ),
    "parallel_outer_of_nested_reduction": (
        "nested_reduction",
        lambda sch, blk: sch.parallel(_loops(sch, blk, "outer")[0]),
        "ok",
    ),
    "decompose_init_only": (
        "init_only",
        lambda sch, blk: sch.decompose_reduction(blk("C"), _loops(sch, blk, "C")[1]),
        "ok",
    ),
    "rfactor_init_only": (
        "init_only",
        lambda sch, blk: sch.rfactor(_loops(sch, blk, "C")[1], 0),
        "RFactorLoopNotReductionError",
    ),
    "parallel_init_only": (
        "init_only",
        lambda sch, blk: sch.parallel(_loops(sch, blk, "C")[0]),
        "ok",
    ),
    "rekind_parallel_after_vectorize": (
        "elementwise",
        lambda sch, blk: (
            sch.vectorize(_loops(sch, blk, "B")[1]),
            sch.parallel(_loops(sch, blk, "B")[1]),
        ),
        "ok",
    ),
    "rekind_parallel_after_bind": (
        "elementwise",
        lambda sch, blk: (
            sch.bind(_loops(sch, blk, "B")[0], "threadIdx.x"),
            sch.parallel(_loops(sch, blk, "B")[0]),
        ),
        "ok",
    ),
    "rekind_unroll_after_bind": (
        "rowsum",
        lambda sch, blk: (
            sch.bind(_loops(sch, blk, "B")[0], "blockIdx.x"),
            sch.unroll(_loops(sch, blk, "B")[0]),
        ),
        "ok",
    ),
    "rebind_after_bind": (
        "elementwise",
        lambda sch, blk: (
            sch.bind(_loops(sch, blk, "B")[0], "blockIdx.x"),
            sch.bind(_loops(sch, blk, "B")[0], "threadIdx.x"),
        ),
        "ok",
    ),
    "bind_after_parallel": (
        "elementwise",
        lambda sch, blk: (
            sch.parallel(_loops(sch, blk, "B")[0]),
            sch.bind(_loops(sch, blk, "B")[0], "threadIdx.x"),
        ),
        "ok",
    ),
    "bind_same_axis_nested": (
        "elementwise",
        lambda sch, blk: (
            sch.bind(_loops(sch, blk, "B")[0], "threadIdx.x"),
            sch.bind(_loops(sch, blk, "B")[1], "threadIdx.x"),
        ),
        "ok",
    ),
    "reorder_bound": (
        "elementwise",
        lambda sch, blk: (
            sch.bind(_loops(sch, blk, "B")[0], "blockIdx.x"),
            sch.reorder(*reversed(_loops(sch, blk, "B"))),
        ),
        "ok",
    ),
    "split_parallel": (
        "elementwise",
        lambda sch, blk: (
            sch.parallel(_loops(sch, blk, "B")[0]),
            sch.split(_loops(sch, blk, "B")[0], factors=[None, 4]),
        ),
        "ok",
    ),
}

# Cases where the workbench deliberately differs from TVM (see the primitives' docs):
# case -> what TVM does
DIVERGENT: dict[str, str] = {
    "parallel_after_decompose": "refuses (the update block is not a reduction block)",
    "reorder_mixed_uneven": "accepts, and then runs reduction steps before the init",
}


def iter_map_cases(V, all_, const) -> list[tuple[str, list, dict, object]]:
    """Bindings for the affine (iter-map) check, built with ``V`` (a variable maker),
    ``all_`` (conjunction) and ``const`` of either tool: (name, values, {var: extent},
    predicate or None)."""
    i, j, k, l = V("i"), V("j"), V("k"), V("l")
    cases = [
        ("i", [i], {i: 8}, None),
        ("i*2+j overlapping", [i * 2 + j], {i: 6, j: 4}, None),
        ("i+j", [i + j], {i: 4, j: 4}, None),
        ("i*4+j", [i * 4 + j], {i: 4, j: 4}, None),
        ("i*4+j gap", [i * 4 + j], {i: 4, j: 3}, None),
        ("l*16", [l * 16], {l: 8}, None),
        ("i, i", [i, i], {i: 8}, None),
        ("i*i", [i * i], {i: 8}, None),
        ("2*i+1", [i * 2 + 1], {i: 8}, None),
        ("i+1", [i + 1], {i: 8}, None),
        ("i//2", [i // 2], {i: 8}, None),
        ("i%2", [i % 2], {i: 8}, None),
        ("i//2, i%2", [i // 2, i % 2], {i: 8}, None),
        ("i//3, i%3 uneven", [i // 3, i % 3], {i: 8}, None),
        ("i//3 uneven", [i // 3], {i: 8}, None),
        ("i%3 uneven", [i % 3], {i: 8}, None),
        ("i//2, i//2", [i // 2, i // 2], {i: 8}, None),
        ("j, i", [j, i], {i: 8, j: 4}, None),
        ("fused under its predicate", [i * 4 + j], {i: 8, j: 4}, i * 4 + j < 30),
        ("parts of a predicate", [i, j], {i: 8, j: 4}, i * 4 + j < 30),
        ("predicate on one loop", [i, j], {i: 8, j: 4}, i < 3),
        ("predicate on the inner part", [i * 4 + j], {i: 8, j: 4}, j < 3),
        ("(i*4+j)//2", [(i * 4 + j) // 2], {i: 8, j: 4}, None),
        ("(i*4+j)//8", [(i * 4 + j) // 8], {i: 8, j: 4}, None),
        ("(i*4+j)%8", [(i * 4 + j) % 8], {i: 8, j: 4}, None),
        ("(i*4+j)//2, %2", [(i * 4 + j) // 2, (i * 4 + j) % 2], {i: 8, j: 4}, None),
        ("(i*4+j)//2, %4", [(i * 4 + j) // 2, (i * 4 + j) % 4], {i: 8, j: 4}, None),
        ("(i*3+j)//2", [(i * 3 + j) // 2], {i: 8, j: 3}, None),
        ("i*8+j gap", [i * 8 + j], {i: 8, j: 4}, None),
        ("j*8+i", [j * 8 + i], {i: 8, j: 4}, None),
        ("i + j*8 + k*32", [i + j * 8 + k * 32], {i: 8, j: 4, k: 2}, None),
        ("i, j*2+k", [i, j * 2 + k], {i: 8, j: 4, k: 2}, None),
        ("i, j+k", [i, j + k], {i: 8, j: 4, k: 2}, None),
        ("i*2+k, j", [i * 2 + k, j], {i: 8, j: 4, k: 2}, None),
        ("f//16, f%16", [i // 16, i % 16], {i: 64}, None),
        ("f//16%4", [i // 16 % 4], {i: 128}, None),
        ("f%16//4", [i % 16 // 4], {i: 128}, None),
        ("f//16, f%16//4, f%4", [i // 16, i % 16 // 4, i % 4], {i: 128}, None),
        ("f//16, f%8", [i // 16, i % 8], {i: 128}, None),
        ("f//8, f%16", [i // 8, i % 16], {i: 128}, None),
        ("unit loop", [i], {i: 1}, None),
        ("constant", [const(0)], {i: 4}, None),
        ("two predicates", [i * 4 + j, k], {i: 8, j: 4, k: 2}, all_(i * 4 + j < 30, k < 1)),
        ("15 - i", [15 - i], {i: 16}, None),
        ("i - j", [i - j], {i: 4, j: 4}, None),
        ("i*4+j, i", [i * 4 + j, i], {i: 4, j: 4}, None),
        ("predicate gap", [i * 16 + j * 4 + k], {i: 4, j: 4, k: 4}, j * 4 + k < 10),
        ("predicate as stride", [i * 10 + j * 4 + k], {i: 4, j: 3, k: 4}, j * 4 + k < 10),
        ("unused loop", [i], {i: 4, j: 4}, None),
        ("predicate on an unused loop", [i], {i: 4, j: 4}, j < 2),
        ("lower bound", [i * 4 + j], {i: 4, j: 4}, i * 4 + j >= 2),
        ("(i+1)//2", [(i + 1) // 2], {i: 8}, None),
        ("(i+2)//2", [(i + 2) // 2], {i: 8}, None),
        ("(i*4)//2", [(i * 4) // 2], {i: 8}, None),
        ("fused three ways", [i // 128, i % 128 // 8, i % 8], {i: 2048}, None),
    ]
    return cases


# iter-map cases where we knowingly differ from TVM's DetectIterMap, and why
ITER_MAP_DIFFERENT = {
    # TVM refuses a fused iterator next to one of its own loops even when the digits
    # used do not overlap; we compare the digits (more precise, still independent)
    "(i*4+j)//4, j",
    "(i*4+j)//4, i",
    # our simplifier stores (i*4+j)//2 as i*2 + j//2, which no longer matches the
    # predicate on i*4+j as a whole (we refuse, TVM accepts)
    "(i*4+j)//2 under a predicate",
}


def iter_map_extra_cases(V, all_, const) -> list[tuple[str, list, dict, object]]:
    i, j = V("i"), V("j")
    return [
        ("(i*4+j)//4, j", [(i * 4 + j) // 4, j], {i: 4, j: 4}, None),
        ("(i*4+j)//4, i", [(i * 4 + j) // 4, i], {i: 4, j: 4}, None),
        ("(i*4+j)//2 under a predicate", [(i * 4 + j) // 2], {i: 4, j: 4}, i * 4 + j < 14),
    ]
