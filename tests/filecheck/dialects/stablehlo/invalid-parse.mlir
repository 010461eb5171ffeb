// RUN: not nkic-opt %s 2>&1 | filecheck %s

// The pretty reduce form applies a binary element-wise op.

func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %x = stablehlo.reduce(%a init: %a) applies stablehlo.exponential across dimensions = [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %x : tensor<4xf32>
}
// CHECK: stablehlo.reduce cannot apply 'stablehlo.exponential'
