"""``tvm.s_tir.tensor_intrin.arm_cpu``: the names TVM registers these intrinsics under."""

ARM_DOT_4x4_i8_NEON_INTRIN = "dot_4x4_i8i8s32_neon"
ARM_DOT_4x4_i8_SDOT_INTRIN = "dot_4x4_i8i8s32_sdot"
DP4A_S8S8S32_INTRIN = "dp4a_s8s8s32"
DP4A_U8S8S32_INTRIN = "dp4a_u8s8s32"
DP4A_S8U8S32_INTRIN = "dp4a_s8u8s32"
DP4A_U8U8U32_INTRIN = "dp4a_u8u8u32"
