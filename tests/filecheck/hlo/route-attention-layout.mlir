// RUN: nkic-opt %s -p route-attention | filecheck %s

// jax.nn.dot_product_attention(q, k, v) on (batch 1, seq 128, heads 2, d 64), as JAX lowers it for the CPU: the
// scores' dot batches over (batch, heads) with a unit group dim, the softmax runs on a transposed view and V is the
// second dot's lhs. Routed: Q, K and V transposed to (heads, seq, d) (the unit batch dropped), the call, and its
// result transposed into the second dot's (batch, heads, d, group, seq) layout; the softmax is gone.
// CHECK:       %1 = stablehlo.transpose %0, dims = [2, 1, 4, 0, 3] : (tensor<1x128x2x1x64xf32>) -> tensor<2x128x64x1x1xf32>
// CHECK-NEXT:  %2 = stablehlo.reshape %1 : (tensor<2x128x64x1x1xf32>) -> tensor<2x128x64xf32>
// CHECK-NEXT:  %3 = stablehlo.transpose %arg1, dims = [2, 1, 3, 0] : (tensor<1x128x2x64xf32>) -> tensor<2x128x64x1xf32>
// CHECK-NEXT:  %4 = stablehlo.reshape %3
// CHECK-NEXT:  %5 = stablehlo.transpose %arg2, dims = [2, 1, 3, 0] : (tensor<1x128x2x64xf32>) -> tensor<2x128x64x1xf32>
// CHECK-NEXT:  %6 = stablehlo.reshape %5
// CHECK-NEXT:  %7 = "stablehlo.custom_call"(%2, %4, %6) <{call_target_name = "AttentionMMSoftmaxMMWithoutSwap", backend_config = "{{.*}}\22is_causal\22: false, \22kernel_name\22: \22flash_attention\22{{.*}}\22scale\22: 0.125, \22sliding_window\22: 0}"
// CHECK-NEXT:  %8 = stablehlo.transpose %7, dims = [0, 2, 1] : (tensor<2x128x64xf32>) -> tensor<2x64x128xf32>
// CHECK-NEXT:  %9 = stablehlo.reshape %8 : (tensor<2x64x128xf32>) -> tensor<1x2x64x1x128xf32>
// CHECK-NOT:   stablehlo.exponential
// CHECK-NOT:   stablehlo.reduce
module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<1x128x2x64xf32>, %arg1: tensor<1x128x2x64xf32>, %arg2: tensor<1x128x2x64xf32>) -> (tensor<1x128x2x64xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.reshape %arg0 : (tensor<1x128x2x64xf32>) -> tensor<1x128x2x1x64xf32>
    %1 = stablehlo.dot_general %0, %arg1, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3], precision = [DEFAULT, DEFAULT] : (tensor<1x128x2x1x64xf32>, tensor<1x128x2x64xf32>) -> tensor<1x2x128x1x128xf32>
    %cst = stablehlo.constant dense<1.250000e-01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<1x2x128x1x128xf32>
    %3 = stablehlo.multiply %1, %2 : tensor<1x2x128x1x128xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %4 = stablehlo.reduce(%3 init: %cst_0) applies stablehlo.maximum across dimensions = [4] : (tensor<1x2x128x1x128xf32>, tensor<f32>) -> tensor<1x2x128x1xf32>
    %cst_1 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<1x2x128x1xf32>
    %6 = stablehlo.maximum %5, %4 : tensor<1x2x128x1xf32>
    %7 = stablehlo.transpose %6, dims = [3, 0, 1, 2] : (tensor<1x2x128x1xf32>) -> tensor<1x1x2x128xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0, 1, 2, 3] : (tensor<1x1x2x128xf32>) -> tensor<1x1x2x128x1xf32>
    %9 = stablehlo.transpose %3, dims = [3, 0, 1, 2, 4] : (tensor<1x2x128x1x128xf32>) -> tensor<1x1x2x128x128xf32>
    %10 = stablehlo.broadcast_in_dim %8, dims = [0, 1, 2, 3, 4] : (tensor<1x1x2x128x1xf32>) -> tensor<1x1x2x128x128xf32>
    %11 = stablehlo.subtract %9, %10 : tensor<1x1x2x128x128xf32>
    %12 = stablehlo.exponential %11 : tensor<1x1x2x128x128xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %13 = stablehlo.reduce(%12 init: %cst_2) applies stablehlo.add across dimensions = [4] : (tensor<1x1x2x128x128xf32>, tensor<f32>) -> tensor<1x1x2x128xf32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [0, 1, 2, 3] : (tensor<1x1x2x128xf32>) -> tensor<1x1x2x128x1xf32>
    %15 = stablehlo.broadcast_in_dim %14, dims = [0, 1, 2, 3, 4] : (tensor<1x1x2x128x1xf32>) -> tensor<1x1x2x128x128xf32>
    %16 = stablehlo.divide %12, %15 : tensor<1x1x2x128x128xf32>
    %17 = stablehlo.dot_general %arg2, %16, batching_dims = [0, 2] x [1, 2], contracting_dims = [1] x [4], precision = [DEFAULT, DEFAULT] : (tensor<1x128x2x64xf32>, tensor<1x1x2x128x128xf32>) -> tensor<1x2x64x1x128xf32>
    %18 = stablehlo.transpose %17, dims = [3, 0, 4, 1, 2] : (tensor<1x2x64x1x128xf32>) -> tensor<1x1x128x2x64xf32>
    %19 = stablehlo.transpose %18, dims = [1, 2, 3, 0, 4] : (tensor<1x1x128x2x64xf32>) -> tensor<1x128x2x1x64xf32>
    %20 = stablehlo.reshape %19 : (tensor<1x128x2x1x64xf32>) -> tensor<1x128x2x64xf32>
    return %20 : tensor<1x128x2x64xf32>
  }
}

