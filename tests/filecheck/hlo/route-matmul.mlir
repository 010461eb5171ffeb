// RUN: nkic-opt %s -p 'route-matmul{decide=always}' --split-input-file | filecheck %s
// RUN: nkic-opt %s -p route-matmul --split-input-file | filecheck %s --check-prefix=MODEL

// Every plain 2-D matmul the library kernel computes becomes the MLP router's custom call naming it (decide=always,
// for tests and measurements); an lhs given as [M, K] is transposed to lhsT first.
// CHECK-LABEL: func.func @mk
// CHECK-NEXT: %[[T:.*]] = stablehlo.transpose %a, dims = [1, 0] : (tensor<256x512xbf16>) -> tensor<512x256xbf16>
// CHECK-NEXT: %[[C:.*]] = "stablehlo.custom_call"(%[[T]], %b) <{call_target_name = "AwsNeuronMLPNKI", backend_config = "{\22kernel_name\22: \22matmul\22}", api_version = 1 : i32}> : (tensor<512x256xbf16>, tensor<512x1024xbf16>) -> tensor<256x1024xbf16>
// CHECK-NEXT: func.return %[[C]]
// Without the cost hook the compiler installs (nkic-opt has none), the model routes nothing.
// MODEL-LABEL: func.func @mk
// MODEL-NEXT: stablehlo.dot_general
func.func @mk(%a: tensor<256x512xbf16>, %b: tensor<512x1024xbf16>) -> tensor<256x1024xbf16> {
  %o = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<256x512xbf16>, tensor<512x1024xbf16>) -> tensor<256x1024xbf16>
  func.return %o : tensor<256x1024xbf16>
}

// -----

// lhs already [K, M]: no transpose.
// CHECK-LABEL: func.func @km
// CHECK-NEXT: %[[C:.*]] = "stablehlo.custom_call"(%a, %b) <{call_target_name = "AwsNeuronMLPNKI"
// CHECK-SAME: (tensor<512x256xf32>, tensor<512x384xf32>) -> tensor<256x384xf32>
func.func @km(%a: tensor<512x256xf32>, %b: tensor<512x384xf32>) -> tensor<256x384xf32> {
  %o = stablehlo.dot_general %a, %b, contracting_dims = [0] x [0] : (tensor<512x256xf32>, tensor<512x384xf32>) -> tensor<256x384xf32>
  func.return %o : tensor<256x384xf32>
}

// -----

// Not the kernel's: K not a multiple of 128, a widened result, batch dims, N over 512 and not a multiple of it,
// an rhs contracting its last dim.
// CHECK-LABEL: func.func @not_candidates
// CHECK-NOT: custom_call
// CHECK-COUNT-5: stablehlo.dot_general
func.func @not_candidates(%a: tensor<128x200xf32>, %b: tensor<200x512xf32>, %c: tensor<128x128xbf16>, %d: tensor<128x512xbf16>, %e: tensor<2x128x128xf32>, %f: tensor<128x640xf32>, %g: tensor<512x128xf32>) -> (tensor<128x512xf32>, tensor<128x512xf32>, tensor<2x128x128xf32>, tensor<128x640xf32>, tensor<128x512xf32>) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<128x200xf32>, tensor<200x512xf32>) -> tensor<128x512xf32>
  %1 = stablehlo.dot_general %c, %d, contracting_dims = [1] x [0] : (tensor<128x128xbf16>, tensor<128x512xbf16>) -> tensor<128x512xf32>
  %2 = stablehlo.dot_general %e, %e, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x128x128xf32>, tensor<2x128x128xf32>) -> tensor<2x128x128xf32>
  %h = stablehlo.slice %a [0:128, 0:128] : (tensor<128x200xf32>) -> tensor<128x128xf32>
  %3 = stablehlo.dot_general %h, %f, contracting_dims = [1] x [0] : (tensor<128x128xf32>, tensor<128x640xf32>) -> tensor<128x640xf32>
  %4 = stablehlo.dot_general %h, %g, contracting_dims = [1] x [1] : (tensor<128x128xf32>, tensor<512x128xf32>) -> tensor<128x512xf32>
  func.return %0, %1, %2, %3, %4 : tensor<128x512xf32>, tensor<128x512xf32>, tensor<2x128x128xf32>, tensor<128x640xf32>, tensor<128x512xf32>
}
