// RUN: nkic-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x8xf32> {
  %x = "stablehlo.add"(%a, %b) : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  func.return %x : tensor<4x8xf32>
}
// CHECK: stablehlo.add: operands and result must have one shape

// -----

func.func @main(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %x = "stablehlo.exponential"(%a, %a) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %x : tensor<4x8xf32>
}
// CHECK: stablehlo.exponential takes 1 operands, got 2

// -----

func.func @main(%a: tensor<4x8xf32>) -> tensor<4x3x8xf32> {
  %x = stablehlo.broadcast_in_dim %a, dims = [0, 1] : (tensor<4x8xf32>) -> tensor<4x3x8xf32>
  func.return %x : tensor<4x3x8xf32>
}
// CHECK: stablehlo.broadcast_in_dim: operand dimension 1 cannot go to 1

// -----

func.func @main(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %x = stablehlo.transpose %a, dims = [0, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %x : tensor<8x4xf32>
}
// CHECK: stablehlo.transpose: permutation must be a permutation of the operand's dims

// -----

func.func @main(%a: tensor<4x8xf32>) -> tensor<5x8xf32> {
  %x = stablehlo.reshape %a : (tensor<4x8xf32>) -> tensor<5x8xf32>
  func.return %x : tensor<5x8xf32>
}
// CHECK: stablehlo.reshape: operand and result must have the same number of elements

// -----

func.func @main(%a: tensor<4x8xf32>, %b: tensor<7x3xf32>) -> tensor<4x3xf32> {
  %x = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<7x3xf32>) -> tensor<4x3xf32>
  func.return %x : tensor<4x3xf32>
}
// CHECK: stablehlo.dot_general: batching and contracting dimension sizes must agree

// -----

func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<3x4xf32> {
  %x = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<3x4xf32>
  func.return %x : tensor<3x4xf32>
}
// CHECK: stablehlo.dot_general: result shape must be batch x lhs free x rhs free

// -----

func.func @main(%a: tensor<4x8xf32>, %c: tensor<f32>) -> tensor<8xf32> {
  %x = stablehlo.reduce(%a init: %c) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
  func.return %x : tensor<8xf32>
}
// CHECK: stablehlo.reduce: result shape must be the operand's without the dimensions

// -----

func.func @main(%a: tensor<4xi32>) -> tensor<4xi1> {
  %x = "stablehlo.compare"(%a, %a) <{comparison_direction = #stablehlo<comparison_direction GEQ>}> : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  func.return %x : tensor<4xi1>
}
// CHECK: stablehlo.comparison_direction must be one of EQ, NE, GE, GT, LE, LT, not 'GEQ'

// -----

func.func @main() -> tensor<4xi32> {
  %x = stablehlo.iota dim = 1 : tensor<4xi32>
  func.return %x : tensor<4xi32>
}
// CHECK: stablehlo.iota: iota_dimension out of range
