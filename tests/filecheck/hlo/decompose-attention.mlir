// RUN: nkic-opt %s -p decompose-attention | filecheck %s

// The inverse of route-attention: the custom call expands to dot -> -max -> exp -> ÷Σ -> dot, in f32, with the
// causal mask as select(iota >= iota, s, -inf); the result is converted back to the call's dtype.
// CHECK:      func.func @main
// CHECK-NOT:  stablehlo.custom_call
// CHECK:      stablehlo.dot_general {{.*}}, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<1x128x64xf32>, tensor<1x128x64xf32>) -> tensor<1x128x128xf32>
// CHECK:      stablehlo.multiply
// CHECK:      stablehlo.iota dim = 1
// CHECK:      stablehlo.iota dim = 2
// CHECK:      stablehlo.compare GE
// CHECK:      stablehlo.select
// CHECK:      stablehlo.reduce({{.*}}) applies stablehlo.maximum across dimensions = [2]
// CHECK:      stablehlo.subtract
// CHECK:      stablehlo.exponential
// CHECK:      stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [2]
// CHECK:      stablehlo.divide
// CHECK:      stablehlo.dot_general {{.*}}, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<1x128x128xf32>, tensor<1x128x64xf32>) -> tensor<1x128x64xf32>
// CHECK-NEXT: stablehlo.convert {{.*}} : (tensor<1x128x64xf32>) -> tensor<1x128x64xbf16>
func.func @main(%q: tensor<1x128x64xbf16>, %k: tensor<1x128x64xbf16>, %v: tensor<1x128x64xbf16>) -> tensor<1x128x64xbf16> {
  %o = "stablehlo.custom_call"(%q, %k, %v) <{call_target_name = "CausalAttentionMMSoftmaxMMWithoutSwap", backend_config = "{\"is_causal\": true, \"kernel_name\": \"flash_attention\", \"scale\": 0.125}"}> : (tensor<1x128x64xbf16>, tensor<1x128x64xbf16>, tensor<1x128x64xbf16>) -> tensor<1x128x64xbf16>
  func.return %o : tensor<1x128x64xbf16>
}
