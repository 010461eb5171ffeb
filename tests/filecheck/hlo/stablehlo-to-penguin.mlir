// RUN: nkic-opt %s -p stablehlo-to-penguin --split-input-file | filecheck %s

// Each StableHLO op lowered op by op: one traced kernel (a segment) per run of ops; inputs arg0.., outputs out0...

// dot_general: lhs transposed into HBM (K on the partitions) on TensorE (contiguous row loads, 128 x 128
// transposes through PSUM: hlo/layout.py), M tiled by 128, N by 512, K by 128 accumulating in one PSUM tile:
// 2 x 2 x 3 matmuls for (200 x 300) @ (300 x 600).
// CHECK:       penguin.graph @main
// CHECK:       ^bb0(%arg0: !penguin.tensor<shared_hbm, 200x300xbf16>, %arg1: !penguin.tensor<shared_hbm, 300x600xbf16>):
// CHECK-NEXT:  %out0 = penguin.kernel_node @hlo_segment_0(%arg0, %arg1) {kind = "external", grid = 1 : i64, result_names = ["out0"]}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.dma_copy dst %sbuf[0 : [300, 128], [1, 300]], src %arg0_1[0 : [300, 128], [1, 300]]
// CHECK:       penguin.transpose dst %psum[0 : [200, 128], [1, 128]], data %sbuf[0 : [300, 128], [1, 128]]
// CHECK:       penguin.dma_copy dst %t1[0 : [200, 128], [1, 200]], src %sbuf_2[0 : [200, 128], [1, 200]]
// CHECK-COUNT-12: penguin.matmul dst %psum
// CHECK-NOT:   penguin.matmul
// CHECK:       penguin.return %out0_1
func.func @main(%a: tensor<200x300xbf16>, %b: tensor<300x600xbf16>) -> tensor<200x600xf32> {
  %o = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<200x300xbf16>, tensor<300x600xbf16>) -> tensor<200x600xf32>
  func.return %o : tensor<200x600xf32>
}

// -----

// Element-wise: a splat constant is an immediate (tensor_scalar), a transcendental one activation.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.tensor_scalar dst {{.*}} op0 = "multiply", operand0 = 5.000000e-01 : f32
// CHECK:       penguin.activation dst {{.*}} func = "exp"
// CHECK:       penguin.tensor_tensor dst {{.*}} op = "add"
func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %h = stablehlo.constant dense<5.000000e-01> : tensor<4x8xf32>
  %x = stablehlo.multiply %a, %h : tensor<4x8xf32>
  %e = stablehlo.exponential %x : tensor<4x8xf32>
  %o = stablehlo.add %e, %b : tensor<4x8xf32>
  func.return %o : tensor<4x8xf32>
}

// -----

// reduce: the reduced dimension moved last, then one tensor_reduce per (128-row, 512-column) tile, combined.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.dma_copy dst %t1[0 : [4, 8], [1, 4]], src %arg0_1[0 : [1, 8], [8, 4]]
// CHECK:       penguin.tensor_reduce dst {{.*}} op = "maximum"
// CHECK-NOT:   penguin.tensor_reduce
func.func @main(%a: tensor<4x8xf32>) -> tensor<8xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %o = stablehlo.reduce(%a init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
  func.return %o : tensor<8xf32>
}

// -----

// broadcast_in_dim and transpose: one DMA each, a step-0 pair for the broadcast dimension, the largest outer dim
// first (more DMA engines: hlo/layout.py rows_first); reshape is free.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.dma_copy dst %t1[0 : [8, 3], [24, 2], [1, 8]], src %arg0_1[0 : [8, 3], [0, 2], [1, 8]]
// CHECK-NEXT:  %out0_1 = penguin.alloc "out0" {{.*}} : !penguin.tensor<shared_hbm, 8x3x2xf32>
// CHECK-NEXT:  penguin.dma_copy dst %out0_1[0 : [6, 8], [2, 3], [1, 2]], src %t1[0 : [1, 8], [8, 3], [24, 2]]
func.func @main(%a: tensor<3x8xf32>) -> tensor<8x3x2xf32> {
  %b = stablehlo.broadcast_in_dim %a, dims = [1, 2] : (tensor<3x8xf32>) -> tensor<2x3x8xf32>
  %r = stablehlo.reshape %b : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
  %r2 = stablehlo.reshape %r : (tensor<6x8xf32>) -> tensor<2x3x8xf32>
  %t = stablehlo.transpose %r2, dims = [2, 1, 0] : (tensor<2x3x8xf32>) -> tensor<8x3x2xf32>
  func.return %t : tensor<8x3x2xf32>
}

// -----

// convert: a copy to the new dtype; compare + select: a uint8 predicate and tensor_copy_predicated (exact for
// -inf). The iota triangle folds to a constant at compile time (NEFF data). Both are one fused pass
// (hlo/fusion.py): the constant is loaded beside the operand, then the copy and the predicated copy.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.alloc "out0" {{.*}} : !penguin.tensor<shared_hbm, 4x4xbf16>
// CHECK:       penguin.alloc "{{.*}}" {data = "0x01000000010100000101010001010101"{{.*}} : !penguin.tensor<shared_hbm, 4x4xui8>
// CHECK:       penguin.tensor_copy dst
// CHECK:       penguin.memset
// CHECK:       penguin.tensor_copy_predicated
func.func @main(%a: tensor<4x4xf32>) -> (tensor<4x4xbf16>, tensor<4x4xf32>) {
  %c = stablehlo.convert %a : (tensor<4x4xf32>) -> tensor<4x4xbf16>
  %i = stablehlo.iota dim = 0 : tensor<4x4xi32>
  %j = stablehlo.iota dim = 1 : tensor<4x4xi32>
  %tri = stablehlo.compare GE, %i, %j, SIGNED : (tensor<4x4xi32>, tensor<4x4xi32>) -> tensor<4x4xi1>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<4x4xf32>
  %s = stablehlo.select %tri, %a, %ninf : tensor<4x4xi1>, tensor<4x4xf32>
  func.return %c, %s : tensor<4x4xbf16>, tensor<4x4xf32>
}

// -----

// A run-time compare: tensor_tensor into a uint8 predicate.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.kernel @hlo_segment_0
// CHECK:       penguin.tensor_tensor dst {{.*}} op = "greater"
// CHECK:       penguin.tensor_copy_predicated
func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %p = stablehlo.compare GT, %a, %b, FLOAT : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xi1>
  %s = stablehlo.select %p, %a, %b : tensor<4x4xi1>, tensor<4x4xf32>
  func.return %s : tensor<4x4xf32>
}

// -----

// The attention custom call is an internal kernel node of flash_attention with the backend_config's arguments; the
// segments around it are external nodes; values between nodes are HBM tensors named v1, v2, ...
// CHECK:       {{^// -+$}}
// CHECK:       penguin.graph @main
// CHECK:       %v1 = penguin.kernel_node @hlo_segment_0(%arg0) {kind = "external", grid = 1 : i64, result_names = ["v1"]}
// CHECK-NEXT:  %out0 = penguin.kernel_node @flash_attention(%v1, %arg1, %arg2) {kind = "internal", grid = 1 : i64, kernel_attrs = "{\22is_causal\22: true, \22scale\22: 0.125, \22sliding_window\22: 0}", result_names = ["out0"]}
// CHECK-NEXT:  penguin.graph_return %out0
func.func @main(%q: tensor<1x128x64xf32>, %k: tensor<1x128x64xf32>, %v: tensor<1x128x64xf32>) -> tensor<1x128x64xf32> {
  %c = stablehlo.constant dense<2.000000e+00> : tensor<1x128x64xf32>
  %q2 = stablehlo.multiply %q, %c : tensor<1x128x64xf32>
  %o = "stablehlo.custom_call"(%q2, %k, %v) <{call_target_name = "CausalAttentionMMSoftmaxMMWithoutSwap", backend_config = "{\"is_causal\": true, \"kernel_name\": \"flash_attention\", \"scale\": 0.125}"}> : (tensor<1x128x64xf32>, tensor<1x128x64xf32>, tensor<1x128x64xf32>) -> tensor<1x128x64xf32>
  func.return %o : tensor<1x128x64xf32>
}

// -----

// custom_call @AwsNeuronCustomNativeKernel naming an @nki.jit kernel ("module:function"): an external node holding
// that kernel's trace.
// CHECK:       {{^// -+$}}
// CHECK:       penguin.graph @main
// CHECK:       %out0 = penguin.kernel_node @nki_tensor_add_0(%arg0, %arg1) {kind = "external", grid = 1 : i64, result_names = ["out0"]}
// CHECK:       penguin.kernel @nki_tensor_add_0
func.func @main(%a: tensor<128x512xf32>, %b: tensor<128x512xf32>) -> tensor<128x512xf32> {
  %o = "stablehlo.custom_call"(%a, %b) <{call_target_name = "AwsNeuronCustomNativeKernel", backend_config = "{\"kernel_name\": \"nkic.kernels.tensor_add:tensor_add\"}"}> : (tensor<128x512xf32>, tensor<128x512xf32>) -> tensor<128x512xf32>
  func.return %o : tensor<128x512xf32>
}
