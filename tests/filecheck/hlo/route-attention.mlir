// RUN: nkic-opt %s -p route-attention --split-input-file | filecheck %s

// The scaled matmul -> softmax -> matmul idiom (as JAX writes it) becomes the seed's attention custom call with its
// backend_config; Q, K and V go in as (batch, seq, d) and the result is reshaped back.
// CHECK-LABEL: func.func @plain
// CHECK:      %[[Q:.*]] = stablehlo.reshape %q : (tensor<128x64xf32>) -> tensor<1x128x64xf32>
// CHECK:      %[[K:.*]] = stablehlo.reshape %k : (tensor<128x64xf32>) -> tensor<1x128x64xf32>
// CHECK:      %[[V:.*]] = stablehlo.reshape %v : (tensor<128x64xf32>) -> tensor<1x128x64xf32>
// CHECK-NEXT: %[[A:.*]] = "stablehlo.custom_call"(%[[Q]], %[[K]], %[[V]]) <{call_target_name = "AttentionMMSoftmaxMMWithoutSwap", backend_config = "{\22auto_cast\22: \22none\22, \22auto_cast_type\22: \22float32\22, \22is_causal\22: false, \22kernel_name\22: \22flash_attention\22, \22psum_shape\22: [128, 512], \22sb_shape\22: [64, 128], \22scale\22: 0.125, \22sliding_window\22: 0}", api_version = 1 : i32}>
// CHECK-NEXT: %[[R:.*]] = stablehlo.reshape %[[A]] : (tensor<1x128x64xf32>) -> tensor<128x64xf32>
// CHECK-NEXT: func.return %[[R]] : tensor<128x64xf32>
func.func @plain(%q: tensor<128x64xf32>, %k: tensor<128x64xf32>, %v: tensor<128x64xf32>) -> tensor<128x64xf32> {
  %s = stablehlo.dot_general %q, %k, contracting_dims = [1] x [1] : (tensor<128x64xf32>, tensor<128x64xf32>) -> tensor<128x128xf32>
  %c = stablehlo.constant dense<1.250000e-01> : tensor<f32>
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<128x128xf32>
  %x = stablehlo.multiply %s, %cb : tensor<128x128xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<128x128xf32>, tensor<f32>) -> tensor<128xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<128xf32>) -> tensor<128x128xf32>
  %d = stablehlo.subtract %x, %mb : tensor<128x128xf32>
  %e = stablehlo.exponential %d : tensor<128x128xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %l = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<128x128xf32>, tensor<f32>) -> tensor<128xf32>
  %lb = stablehlo.broadcast_in_dim %l, dims = [0] : (tensor<128xf32>) -> tensor<128x128xf32>
  %p = stablehlo.divide %e, %lb : tensor<128x128xf32>
  %o = stablehlo.dot_general %p, %v, contracting_dims = [1] x [0] : (tensor<128x128xf32>, tensor<128x64xf32>) -> tensor<128x64xf32>
  func.return %o : tensor<128x64xf32>
}

// -----

// Causal: the scores pass through select(iota >= iota, s, -inf), a constant lower triangle. bf16 Q and K, V upcast
// to f32 by the program: the call takes V before the upcast and its result is converted to the program's f32.
// CHECK-LABEL: func.func @causal
// CHECK:      %[[V:.*]] = stablehlo.reshape %vb : (tensor<128x64xbf16>) -> tensor<1x128x64xbf16>
// CHECK-NEXT: "stablehlo.custom_call"({{.*}}, %[[V]]) <{call_target_name = "CausalAttentionMMSoftmaxMMWithoutSwap", backend_config = "{{.*}}\22auto_cast_type\22: \22bfloat16\22, \22is_causal\22: true{{.*}}\22scale\22: 0.5{{.*}}", api_version = 1 : i32}> : (tensor<1x128x64xbf16>, tensor<1x128x64xbf16>, tensor<1x128x64xbf16>) -> tensor<1x128x64xbf16>
// CHECK-NEXT: stablehlo.convert {{.*}} : (tensor<1x128x64xbf16>) -> tensor<1x128x64xf32>
// CHECK-NOT:  stablehlo.exponential
func.func @causal(%q: tensor<128x64xbf16>, %k: tensor<128x64xbf16>, %vb: tensor<128x64xbf16>) -> tensor<128x64xf32> {
  %sb = stablehlo.dot_general %q, %k, contracting_dims = [1] x [1] : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<128x128xbf16>
  %s = stablehlo.convert %sb : (tensor<128x128xbf16>) -> tensor<128x128xf32>
  %c = stablehlo.constant dense<2.000000e+00> : tensor<f32>
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<128x128xf32>
  %y = stablehlo.divide %s, %cb : tensor<128x128xf32>
  %i = stablehlo.iota dim = 0 : tensor<128x128xi32>
  %j = stablehlo.iota dim = 1 : tensor<128x128xi32>
  %tri = stablehlo.compare GE, %i, %j, SIGNED : (tensor<128x128xi32>, tensor<128x128xi32>) -> tensor<128x128xi1>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %nb = stablehlo.broadcast_in_dim %ninf, dims = [] : (tensor<f32>) -> tensor<128x128xf32>
  %x = stablehlo.select %tri, %y, %nb : tensor<128x128xi1>, tensor<128x128xf32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<128x128xf32>, tensor<f32>) -> tensor<128xf32>
  %nr = stablehlo.broadcast_in_dim %ninf, dims = [] : (tensor<f32>) -> tensor<128xf32>
  %m2 = stablehlo.maximum %nr, %m : tensor<128xf32>
  %mb = stablehlo.broadcast_in_dim %m2, dims = [0] : (tensor<128xf32>) -> tensor<128x128xf32>
  %d = stablehlo.subtract %x, %mb : tensor<128x128xf32>
  %e = stablehlo.exponential %d : tensor<128x128xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %l = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<128x128xf32>, tensor<f32>) -> tensor<128xf32>
  %lb = stablehlo.broadcast_in_dim %l, dims = [0] : (tensor<128xf32>) -> tensor<128x128xf32>
  %p = stablehlo.divide %e, %lb : tensor<128x128xf32>
  %v = stablehlo.convert %vb : (tensor<128x64xbf16>) -> tensor<128x64xf32>
  %o = stablehlo.dot_general %p, %v, contracting_dims = [1] x [0] : (tensor<128x128xf32>, tensor<128x64xf32>) -> tensor<128x64xf32>
  func.return %o : tensor<128x64xf32>
}

// -----

// Near miss: the softmax runs over the query axis (dimension 0). Nothing is routed.
// CHECK-LABEL: func.func @wrong_axis
// CHECK-NOT:   stablehlo.custom_call
// CHECK:       stablehlo.exponential
func.func @wrong_axis(%q: tensor<128x64xf32>, %k: tensor<128x64xf32>, %v: tensor<128x64xf32>) -> tensor<128x64xf32> {
  %s = stablehlo.dot_general %q, %k, contracting_dims = [1] x [1] : (tensor<128x64xf32>, tensor<128x64xf32>) -> tensor<128x128xf32>
  %c = stablehlo.constant dense<1.250000e-01> : tensor<f32>
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<128x128xf32>
  %x = stablehlo.multiply %s, %cb : tensor<128x128xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<128x128xf32>, tensor<f32>) -> tensor<128xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [1] : (tensor<128xf32>) -> tensor<128x128xf32>
  %d = stablehlo.subtract %x, %mb : tensor<128x128xf32>
  %e = stablehlo.exponential %d : tensor<128x128xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %l = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<128x128xf32>, tensor<f32>) -> tensor<128xf32>
  %lb = stablehlo.broadcast_in_dim %l, dims = [1] : (tensor<128xf32>) -> tensor<128x128xf32>
  %p = stablehlo.divide %e, %lb : tensor<128x128xf32>
  %o = stablehlo.dot_general %p, %v, contracting_dims = [1] x [0] : (tensor<128x128xf32>, tensor<128x64xf32>) -> tensor<128x64xf32>
  func.return %o : tensor<128x64xf32>
}

// -----

// Near miss: no scale on the scores. Nothing is routed.
// CHECK-LABEL: func.func @unscaled
// CHECK-NOT:   stablehlo.custom_call
// CHECK:       stablehlo.exponential
func.func @unscaled(%q: tensor<128x64xf32>, %k: tensor<128x64xf32>, %v: tensor<128x64xf32>) -> tensor<128x64xf32> {
  %x = stablehlo.dot_general %q, %k, contracting_dims = [1] x [1] : (tensor<128x64xf32>, tensor<128x64xf32>) -> tensor<128x128xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<128x128xf32>, tensor<f32>) -> tensor<128xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<128xf32>) -> tensor<128x128xf32>
  %d = stablehlo.subtract %x, %mb : tensor<128x128xf32>
  %e = stablehlo.exponential %d : tensor<128x128xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %l = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<128x128xf32>, tensor<f32>) -> tensor<128xf32>
  %lb = stablehlo.broadcast_in_dim %l, dims = [0] : (tensor<128xf32>) -> tensor<128x128xf32>
  %p = stablehlo.divide %e, %lb : tensor<128x128xf32>
  %o = stablehlo.dot_general %p, %v, contracting_dims = [1] x [0] : (tensor<128x128xf32>, tensor<128x64xf32>) -> tensor<128x64xf32>
  func.return %o : tensor<128x64xf32>
}

// -----

// q @ k.T as JAX writes it (a transpose, then a dot contracting k's first dimension): K goes in transposed back.
// CHECK-LABEL: func.func @k_transposed
// CHECK:      %[[KT:.*]] = stablehlo.transpose %{{.*}}, dims = [1, 0] : (tensor<64x256xf32>) -> tensor<256x64xf32>
// CHECK:      %[[K:.*]] = stablehlo.reshape %[[KT]] : (tensor<256x64xf32>) -> tensor<1x256x64xf32>
// CHECK:      "stablehlo.custom_call"(%{{.*}}, %[[K]], %{{.*}}) <{call_target_name = "AttentionMMSoftmaxMMWithoutSwap"
func.func @k_transposed(%q: tensor<128x64xf32>, %k: tensor<256x64xf32>, %v: tensor<256x64xf32>) -> tensor<128x64xf32> {
  %kt = stablehlo.transpose %k, dims = [1, 0] : (tensor<256x64xf32>) -> tensor<64x256xf32>
  %s = stablehlo.dot_general %q, %kt, contracting_dims = [1] x [0] : (tensor<128x64xf32>, tensor<64x256xf32>) -> tensor<128x256xf32>
  %c = stablehlo.constant dense<1.250000e-01> : tensor<f32>
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<128x256xf32>
  %x = stablehlo.multiply %cb, %s : tensor<128x256xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<128x256xf32>, tensor<f32>) -> tensor<128xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<128xf32>) -> tensor<128x256xf32>
  %d = stablehlo.subtract %x, %mb : tensor<128x256xf32>
  %e = stablehlo.exponential %d : tensor<128x256xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %l = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<128x256xf32>, tensor<f32>) -> tensor<128xf32>
  %lb = stablehlo.broadcast_in_dim %l, dims = [0] : (tensor<128xf32>) -> tensor<128x256xf32>
  %p = stablehlo.divide %e, %lb : tensor<128x256xf32>
  %o = stablehlo.dot_general %p, %v, contracting_dims = [1] x [0] : (tensor<128x256xf32>, tensor<256x64xf32>) -> tensor<128x64xf32>
  func.return %o : tensor<128x64xf32>
}

// -----

// A causal sliding window: the mask 0 <= q - k < 64 is the kernel's sliding_window = 64.
// CHECK-LABEL: func.func @window
// CHECK:      "stablehlo.custom_call"({{.*}}) <{call_target_name = "CausalAttentionMMSoftmaxMMWithoutSwap", backend_config = "{{.*}}\22is_causal\22: true{{.*}}\22sliding_window\22: 64}"
func.func @window(%q: tensor<256x64xf32>, %k: tensor<256x64xf32>, %v: tensor<256x64xf32>) -> tensor<256x64xf32> {
  %s = stablehlo.dot_general %q, %k, contracting_dims = [1] x [1] : (tensor<256x64xf32>, tensor<256x64xf32>) -> tensor<256x256xf32>
  %c = stablehlo.constant dense<1.250000e-01> : tensor<f32>
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<256x256xf32>
  %y = stablehlo.multiply %s, %cb : tensor<256x256xf32>
  %i = stablehlo.iota dim = 0 : tensor<256x256xi32>
  %j = stablehlo.iota dim = 1 : tensor<256x256xi32>
  %d0 = stablehlo.subtract %i, %j : tensor<256x256xi32>
  %zero_i = stablehlo.constant dense<0> : tensor<256x256xi32>
  %w = stablehlo.constant dense<64> : tensor<256x256xi32>
  %ge = stablehlo.compare GE, %d0, %zero_i, SIGNED : (tensor<256x256xi32>, tensor<256x256xi32>) -> tensor<256x256xi1>
  %lt = stablehlo.compare LT, %d0, %w, SIGNED : (tensor<256x256xi32>, tensor<256x256xi32>) -> tensor<256x256xi1>
  %band = stablehlo.and %ge, %lt : tensor<256x256xi1>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %nb = stablehlo.broadcast_in_dim %ninf, dims = [] : (tensor<f32>) -> tensor<256x256xf32>
  %x = stablehlo.select %band, %y, %nb : tensor<256x256xi1>, tensor<256x256xf32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<256xf32>) -> tensor<256x256xf32>
  %d = stablehlo.subtract %x, %mb : tensor<256x256xf32>
  %e = stablehlo.exponential %d : tensor<256x256xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %l = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
  %lb = stablehlo.broadcast_in_dim %l, dims = [0] : (tensor<256xf32>) -> tensor<256x256xf32>
  %p = stablehlo.divide %e, %lb : tensor<256x256xf32>
  %o = stablehlo.dot_general %p, %v, contracting_dims = [1] x [0] : (tensor<256x256xf32>, tensor<256x64xf32>) -> tensor<256x64xf32>
  func.return %o : tensor<256x64xf32>
}

// -----

// (batch, heads, seq, d): the leading dims flatten into the kernel's batch; the result is reshaped back.
// CHECK-LABEL: func.func @heads
// CHECK:      stablehlo.reshape %q : (tensor<2x4x128x32xbf16>) -> tensor<8x128x32xbf16>
// CHECK:      "stablehlo.custom_call"({{.*}}) <{call_target_name = "AttentionMMSoftmaxMMWithoutSwap"{{.*}} : (tensor<8x128x32xbf16>, tensor<8x128x32xbf16>, tensor<8x128x32xbf16>) -> tensor<8x128x32xbf16>
// CHECK-NEXT: stablehlo.reshape %{{.*}} : (tensor<8x128x32xbf16>) -> tensor<2x4x128x32xbf16>
func.func @heads(%q: tensor<2x4x128x32xbf16>, %k: tensor<2x4x128x32xbf16>, %v: tensor<2x4x128x32xbf16>) -> tensor<2x4x128x32xbf16> {
  %s = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x4x128x32xbf16>, tensor<2x4x128x32xbf16>) -> tensor<2x4x128x128xbf16>
  %c = stablehlo.constant dense<2.500000e-01> : tensor<2x4x128x128xbf16>
  %x = stablehlo.multiply %s, %c : tensor<2x4x128x128xbf16>
  %ninf = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x128x128xbf16>, tensor<bf16>) -> tensor<2x4x128xbf16>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x128xbf16>) -> tensor<2x4x128x128xbf16>
  %d = stablehlo.subtract %x, %mb : tensor<2x4x128x128xbf16>
  %e = stablehlo.exponential %d : tensor<2x4x128x128xbf16>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
  %l = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x128x128xbf16>, tensor<bf16>) -> tensor<2x4x128xbf16>
  %lb = stablehlo.broadcast_in_dim %l, dims = [0, 1, 2] : (tensor<2x4x128xbf16>) -> tensor<2x4x128x128xbf16>
  %p = stablehlo.divide %e, %lb : tensor<2x4x128x128xbf16>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x4x128x128xbf16>, tensor<2x4x128x32xbf16>) -> tensor<2x4x128x32xbf16>
  func.return %o : tensor<2x4x128x32xbf16>
}
