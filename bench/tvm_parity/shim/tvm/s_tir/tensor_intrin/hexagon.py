"""``tvm.s_tir.tensor_intrin.hexagon``: the names TVM registers these intrinsics under."""

VRMPY_u8u8i32_INTRIN = "dot_32x4_u8u8i32_vrmpy"
VDMPY_i16i16i32_INTRIN = "dot_product_32x2_i16i16i32_vdmpy"
