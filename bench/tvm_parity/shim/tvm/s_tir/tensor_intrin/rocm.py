"""``tvm.s_tir.tensor_intrin.rocm``: the names TVM registers these intrinsics under."""

AMDGPU_SDOT4_INTRIN = "sdot4"
