// RUN: nkic-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The shape rules of the ops added for JAX's default output (issue 27), one broken per case.

func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.reverse %x, dims = [2] : tensor<8x16xf32>
  func.return %0 : tensor<8x16xf32>
}
// CHECK: stablehlo.reverse: dimension out of range

// -----

func.func @main(%x: tensor<8x16xf32>, %u: tensor<2x32xf32>, %i: tensor<i32>) -> tensor<8x16xf32> {
  %0 = stablehlo.dynamic_update_slice %x, %u, %i, %i : (tensor<8x16xf32>, tensor<2x32xf32>, tensor<i32>, tensor<i32>) -> tensor<8x16xf32>
  func.return %0 : tensor<8x16xf32>
}
// CHECK: stablehlo.dynamic_update_slice: the update fits in the operand, rank for rank

// -----

func.func @main(%x: tensor<8x16xf32>, %z: tensor<f32>) -> tensor<8x15xf32> {
  %0 = "stablehlo.reduce_window"(%x, %z) <{window_dimensions = array<i64: 1, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x15xf32>
  %1 = "stablehlo.reduce_window"(%x, %z) <{window_dimensions = array<i64: 1, 2>, window_strides = array<i64: 1, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x15xf32>
  func.return %1 : tensor<8x15xf32>
}
// CHECK: stablehlo.reduce_window: result shape must be (8, 8)

// -----

func.func @main(%x: tensor<1x4x16xf32>, %w: tensor<8x3x3xf32>) -> tensor<1x8x16xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {pad = [[1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x16xf32>, tensor<8x3x3xf32>) -> tensor<1x8x16xf32>
  func.return %0 : tensor<1x8x16xf32>
}
// CHECK: stablehlo.convolution: input features must be kernel input features x groups

// -----

func.func @main(%x: tensor<4x16xf32>, %i: tensor<8x1xi32>, %u: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    stablehlo.return %b : tensor<f32>
  }) : (tensor<4x16xf32>, tensor<8x1xi32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %0 : tensor<4x16xf32>
}
// CHECK: stablehlo.scatter: window, inserted and batching dims must cover the operand

// -----

func.func @main(%x: tensor<8x4xf32>) -> (tensor<8x5xf32>, tensor<8x5xi32>) {
  %v, %i = chlo.top_k(%x, k = 5) : tensor<8x4xf32> -> (tensor<8x5xf32>, tensor<8x5xi32>)
  func.return %v, %i : tensor<8x5xf32>, tensor<8x5xi32>
}
// CHECK: chlo.top_k: k must be at most the size of the last dimension

// -----

func.func @main(%x: tensor<8x4xf32>) -> tensor<8x4xf16> {
  %0 = chlo.erf %x : tensor<8x4xf32> -> tensor<8x4xf16>
  func.return %0 : tensor<8x4xf16>
}
// CHECK: chlo.erf: the result has the operand's type

// -----

func.func @main(%x: tensor<8x4xf32>, %lo: tensor<4xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.clamp %lo, %x, %lo : (tensor<4xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  func.return %0 : tensor<8x4xf32>
}
// CHECK: stablehlo.clamp: min and max are scalars or of the operand's shape

// -----

func.func @main(%i: tensor<i32>, %x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = "stablehlo.case"(%i) ({
    stablehlo.return %x : tensor<8x4xf32>
  }, {
    %c = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    stablehlo.return %c : tensor<f32>
  }) : (tensor<i32>) -> tensor<8x4xf32>
  func.return %0 : tensor<8x4xf32>
}
// CHECK: stablehlo.case: each branch returns the results' types
