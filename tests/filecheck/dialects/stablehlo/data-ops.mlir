// RUN: nkic-opt %s --split-input-file | nkic-opt --split-input-file | filecheck %s
// RUN: NKIC_ROUNDTRIP

// concatenate, pad, gather (its #stablehlo.gather dimension numbers) and dynamic_slice read in generic form print
// in the pretty form StableHLO gives them (gather has none), and read back.
// CHECK-LABEL: func.func @data
// CHECK-NEXT: %0 = stablehlo.concatenate %a, %a, dim = 1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %1 = stablehlo.pad %a, %v, low = [1, 0], high = [0, 2], interior = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<5x17xf32>
// CHECK-NEXT: %2 = "stablehlo.gather"(%a, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 8>}> : (tensor<4x8xf32>, tensor<3x1xi32>) -> tensor<3x8xf32>
// CHECK-NEXT: %3 = stablehlo.dynamic_slice %a, %s, %s, sizes = [2, 8] : (tensor<4x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x8xf32>
func.func @data(%a: tensor<4x8xf32>, %v: tensor<f32>, %i: tensor<3x1xi32>, %s: tensor<i32>) -> (tensor<4x16xf32>, tensor<5x17xf32>, tensor<3x8xf32>, tensor<2x8xf32>) {
  %0 = "stablehlo.concatenate"(%a, %a) <{dimension = 1 : i64}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  %1 = "stablehlo.pad"(%a, %v) <{edge_padding_high = array<i64: 0, 2>, edge_padding_low = array<i64: 1, 0>, interior_padding = array<i64: 0, 1>}> : (tensor<4x8xf32>, tensor<f32>) -> tensor<5x17xf32>
  %2 = "stablehlo.gather"(%a, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 8>}> : (tensor<4x8xf32>, tensor<3x1xi32>) -> tensor<3x8xf32>
  %3 = "stablehlo.dynamic_slice"(%a, %s, %s) <{slice_sizes = array<i64: 2, 8>}> : (tensor<4x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x8xf32>
  func.return %0, %1, %2, %3 : tensor<4x16xf32>, tensor<5x17xf32>, tensor<3x8xf32>, tensor<2x8xf32>
}
