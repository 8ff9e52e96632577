# Seed 004 (ML-compiler curriculum, day 37): the 1024^3 matmul traced with
# MetaSchedule, re-indented.
# ruff: noqa
import tvm
from tvm import tir
from tvm.script import tir as T

@T.prim_func
def matmul(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (1024, 1024), "float32")
    B = T.match_buffer(b, (1024, 1024), "float32")
    C = T.match_buffer(c, (1024, 1024), "float32")
    for i, j, k in T.grid(1024, 1024, 1024):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
