# Seed 002 (ML-compiler curriculum, day 33): ``matmul_tiled`` written directly in
# TVMScript (``T.handle`` parameters, ``T.match_buffer``, ``+=``), re-indented.
# ruff: noqa
from tvm.script import tir as T

@T.prim_func
def matmul_tiled(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (128, 128), "float32")
    B = T.match_buffer(b, (128, 128), "float32")
    C = T.match_buffer(c, (128, 128), "float32")
    for io, jo in T.grid(4, 4): # outer tiles: 128/32 = 4
        for ii, ji in T.grid(32, 32): # inner tile: 32×32
            with T.block("C"):
                vi = T.axis.spatial(128, io * 32 + ii)
                vj = T.axis.spatial(128, jo * 32 + ji)
                T.reads(A[vi, 0:128], B[0:128, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = T.float32(0)
                for k in range(128):
                    C[vi, vj] += A[vi, k] * B[k, vj]
