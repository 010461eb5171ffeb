// RUN: nkic-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @main(%a: tensor<4x8xf32>, %b: tensor<3x8xf32>) -> tensor<4x16xf32> {
  %x = "stablehlo.concatenate"(%a, %b) <{dimension = 1 : i64}> : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x16xf32>
  func.return %x : tensor<4x16xf32>
}
// CHECK: stablehlo.concatenate: operands must agree off the dimension and sum to it

// -----

func.func @main(%a: tensor<4x8xf32>, %v: tensor<f32>) -> tensor<5x16xf32> {
  %x = "stablehlo.pad"(%a, %v) <{edge_padding_high = array<i64: 0, 2>, edge_padding_low = array<i64: 1, 0>, interior_padding = array<i64: 0, 1>}> : (tensor<4x8xf32>, tensor<f32>) -> tensor<5x16xf32>
  func.return %x : tensor<5x16xf32>
}
// CHECK: stablehlo.pad: result shape must be (5, 17)

// -----

func.func @main(%a: tensor<4x8xf32>, %i: tensor<3x1xi32>) -> tensor<3x8xf32> {
  %x = "stablehlo.gather"(%a, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 2, 8>}> : (tensor<4x8xf32>, tensor<3x1xi32>) -> tensor<3x8xf32>
  func.return %x : tensor<3x8xf32>
}
// CHECK: stablehlo.gather: a collapsed slice dimension has size 1

// -----

func.func @main(%a: tensor<4x8xf32>, %s: tensor<i32>) -> tensor<2x8xf32> {
  %x = "stablehlo.dynamic_slice"(%a, %s) <{slice_sizes = array<i64: 2, 8>}> : (tensor<4x8xf32>, tensor<i32>) -> tensor<2x8xf32>
  func.return %x : tensor<2x8xf32>
}
// CHECK: stablehlo.dynamic_slice: one scalar start index per operand dimension
