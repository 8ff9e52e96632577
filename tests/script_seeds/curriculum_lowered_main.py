# Seed 002 (ML-compiler curriculum, day 33): the lowered TE matmul ("Output
# (simplified)"), re-indented. A function without blocks.
# ruff: noqa
@T.prim_func
def main(A: T.Buffer((128, 128), "float32"),
         B: T.Buffer((128, 128), "float32"),
         C: T.Buffer((128, 128), "float32")):
    for i in range(128):
        for j in range(128):
            C[i, j] = T.float32(0)
            for k in range(128):
                C[i, j] = C[i, j] + A[i, k] * B[k, j]
