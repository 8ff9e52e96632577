# Seed 003 (forum question: a local buffer shared by a matrix and a vector unit):
# the scheduled module the question shows (int64 shapes, ``private=True``),
# re-indented.
# ruff: noqa
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def fused_matmul_add_relu(x: T.Buffer((T.int64(1), T.int64(48)), "float32"), permute_dims: T.Buffer((T.int64(48), T.int64(64)), "float32"), fc1_bias: T.Buffer((T.int64(64),), "float32"), compute_intermediate: T.Buffer((T.int64(1), T.int64(64)), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        matmul_intermediate = T.alloc_buffer((T.int64(1), T.int64(64)))
        x_shared = T.alloc_buffer((T.int64(1), T.int64(48)), scope="shared")
        permute_dims_shared = T.alloc_buffer((T.int64(48), T.int64(64)), scope="shared")
        matmul_intermediate_local = T.alloc_buffer((T.int64(1), T.int64(64)), scope="local")
        fc1_bias_local = T.alloc_buffer((T.int64(64),), scope="local")
        compute_intermediate_local = T.alloc_buffer((T.int64(1), T.int64(64)), scope="local")
        for i0, i1_0 in T.grid(T.int64(1), T.int64(4)):
            for ax0 in range(T.int64(48)):
                with T.block("x_shared"):
                    v0 = T.axis.spatial(T.int64(1), T.int64(0))
                    v1 = T.axis.spatial(T.int64(48), ax0)
                    T.reads(x[v0, v1])
                    T.writes(x_shared[v0, v1])
                    x_shared[v0, v1] = x[v0, v1]
            for ax0, ax1 in T.grid(T.int64(48), T.int64(16)):
                with T.block("permute_dims_shared"):
                    v0 = T.axis.spatial(T.int64(48), ax0)
                    v1 = T.axis.spatial(T.int64(64), i1_0 * T.int64(16) + ax1)
                    T.reads(permute_dims[v0, v1])
                    T.writes(permute_dims_shared[v0, v1])
                    permute_dims_shared[v0, v1] = permute_dims[v0, v1]
            for k_0, k_1, i1_1 in T.grid(T.int64(3), T.int64(16), T.int64(16)):
                with T.block("matmul"):
                    v_i0 = T.axis.spatial(T.int64(1), i0)
                    v_i1 = T.axis.spatial(T.int64(64), i1_0 * T.int64(16) + i1_1)
                    v_k = T.axis.reduce(T.int64(48), k_0 * T.int64(16) + k_1)
                    T.reads(x_shared[v_i0, v_k], permute_dims_shared[v_k, v_i1])
                    T.writes(matmul_intermediate_local[v_i0, v_i1])
                    with T.init():
                        matmul_intermediate_local[v_i0, v_i1] = T.float32(0.0)
                    matmul_intermediate_local[v_i0, v_i1] = matmul_intermediate_local[v_i0, v_i1] + x_shared[v_i0, v_k] * permute_dims_shared[v_k, v_i1]
            for ax0, ax1 in T.grid(T.int64(1), T.int64(16)):
                with T.block("matmul_intermediate_local"):
                    v0 = T.axis.spatial(T.int64(1), i0 + ax0)
                    v1 = T.axis.spatial(T.int64(64), i1_0 * T.int64(16) + ax1)
                    T.reads(matmul_intermediate_local[v0, v1])
                    T.writes(matmul_intermediate[v0, v1])
                    matmul_intermediate[v0, v1] = matmul_intermediate_local[v0, v1]
            for ax0 in range(T.int64(16)):
                with T.block("fc1.bias_local"):
                    v0 = T.axis.spatial(T.int64(64), i1_0 * T.int64(16) + ax0)
                    T.reads(fc1_bias[v0])
                    T.writes(fc1_bias_local[v0])
                    fc1_bias_local[v0] = fc1_bias[v0]
            for ax0 in range(T.int64(16)):
                with T.block("compute"):
                    v_i0 = T.axis.spatial(T.int64(1), T.int64(0))
                    v_i1 = T.axis.spatial(T.int64(64), i1_0 * T.int64(16) + ax0)
                    T.reads(matmul_intermediate[v_i0, v_i1], fc1_bias_local[v_i1])
                    T.writes(compute_intermediate_local[v_i0, v_i1])
                    compute_intermediate_local[v_i0, v_i1] = T.max(matmul_intermediate[v_i0, v_i1] + fc1_bias_local[v_i1], T.float32(0.0))
        for ax0, ax1 in T.grid(T.int64(1), T.int64(64)):
            with T.block("compute_intermediate_local"):
                v0, v1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(compute_intermediate_local[v0, v1])
                T.writes(compute_intermediate[v0, v1])
                compute_intermediate[v0, v1] = compute_intermediate_local[v0, v1]
