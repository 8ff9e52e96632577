# Seed 002 (ML-compiler curriculum, day 33): the "Expected TIR output" of the
# vectorized schedule, re-indented. It stores and loads 8-element slices (vector
# accesses), which the workbench does not support: reading it is refused.
# ruff: noqa
@T.prim_func
def main(A: T.Buffer((256, 256), "float32"),
         B: T.Buffer((256, 256), "float32")):
    T.func_attr({"tir.noalias": T.bool(True)})
    for i_outer in T.parallel(8): # parallel over 256/32=8
        for j_outer in range(32): # 256/8=32
            for i_inner in range(32):
                B[i_outer*32 + i_inner,
                  j_outer*8 : j_outer*8 + 8] = (
                    A[i_outer*32 + i_inner,
                      j_outer*8 : j_outer*8 + 8] * T.float32(2)
                ) # vectorized (8-wide)
