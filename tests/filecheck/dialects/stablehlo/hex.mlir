// RUN: nkic-opt %s | filecheck %s
// RUN: nkic-opt %s -p stablehlo-to-penguin | filecheck %s --check-prefix=DATA

// A hexadecimal literal in a float dense attribute is the element's bit pattern (MLIR prints non-finite floats so):
// 0xFF80 in bf16 and 0xFF800000 in f32 are -inf, 0x7FC00000 a NaN. xDSL 0.74 alone reads them as integers.
// CHECK:      stablehlo.constant dense<0xff80> : tensor<bf16>
// CHECK-NEXT: stablehlo.constant dense<0xff800000> : tensor<f32>
// CHECK-NEXT: stablehlo.constant dense<[0x7fc00000, 1.000000e+00, 0xff800000]> : tensor<3xf32>
// CHECK-NEXT: stablehlo.constant dense<255> : tensor<i32>

// The lowering embeds the values as NEFF data: [-inf, 1.0, -inf] (+ the NaN) in f32, little-endian.
// DATA: data = "0x80ff"
// DATA: data = "0x000080ff"
// DATA: data = "0x0000c07f0000803f000080ff"
func.func @main() -> (tensor<bf16>, tensor<f32>, tensor<3xf32>, tensor<i32>) {
  %a = stablehlo.constant dense<0xFF80> : tensor<bf16>
  %b = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %c = stablehlo.constant dense<[0x7FC00000, 1.0, 0xFF800000]> : tensor<3xf32>
  %d = stablehlo.constant dense<0xFF> : tensor<i32>
  func.return %a, %b, %c, %d : tensor<bf16>, tensor<f32>, tensor<3xf32>, tensor<i32>
}
