"""``tvm.s_tir.tensor_intrin.x86``: the names TVM registers its x86 intrinsics under."""

VNNI_DOT_16x4_INTRIN = "dot_16x4_vnni"
AVX512_DOT_16x4_INTRIN = "dot_16x4_avx512"
