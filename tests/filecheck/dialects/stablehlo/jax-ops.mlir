// RUN: nkic-opt %s --split-input-file | nkic-opt --split-input-file | filecheck %s
// RUN: NKIC_ROUNDTRIP

// The ops JAX's default as_text() prints (issue 27), in the pretty form: each is printed back in the pretty form
// StableHLO gives it (sort, reduce_window, scatter and custom_call generically, as JAX prints them) and reads back,
// also through the generic form (the second RUN line). jax-ops-generic.mlir is the same module in the generic form.

// CHECK-LABEL: func.func @unary(%x: tensor<8x16xf32>) -> (tensor<8x16xi1>, tensor<8x16xf32>) {
// CHECK-NEXT:  %0 = stablehlo.is_finite %x : (tensor<8x16xf32>) -> tensor<8x16xi1>
// CHECK-NEXT:  %1 = stablehlo.reverse %x, dims = [1] : tensor<8x16xf32>
// CHECK-NEXT:  func.return %0, %1 : tensor<8x16xi1>, tensor<8x16xf32>
// CHECK-NEXT:  }
func.func @unary(%x: tensor<8x16xf32>) -> (tensor<8x16xi1>, tensor<8x16xf32>) {
  %0 = stablehlo.is_finite %x : (tensor<8x16xf32>) -> tensor<8x16xi1>
  %1 = stablehlo.reverse %x, dims = [1] : tensor<8x16xf32>
  func.return %0, %1 : tensor<8x16xi1>, tensor<8x16xf32>
}

// -----

// CHECK-LABEL: func.func @data(%x: tensor<8x16xf32>, %u: tensor<2x16xf32>, %i: tensor<i32>, %v: tensor<f32>) -> (tensor<8x16xf32>, tensor<4x3xf32>, tensor<8x20xf32>, tensor<10x16xf32>, tensor<2x16xf32>) {
// CHECK-NEXT:  %0 = stablehlo.dynamic_update_slice %x, %u, %i, %i : (tensor<8x16xf32>, tensor<2x16xf32>, tensor<i32>, tensor<i32>) -> tensor<8x16xf32>
// CHECK-NEXT:  %1 = stablehlo.slice %x [0:8:2, 4:10:2] : (tensor<8x16xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:  %2 = stablehlo.slice %x [0:8, 0:4] : (tensor<8x16xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:  %3 = stablehlo.concatenate %x, %2, dim = 1 : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x20xf32>
// CHECK-NEXT:  %4 = stablehlo.pad %x, %v, low = [1, 0], high = [1, 0], interior = [0, 0] : (tensor<8x16xf32>, tensor<f32>) -> tensor<10x16xf32>
// CHECK-NEXT:  %5 = stablehlo.dynamic_slice %x, %i, %i, sizes = [2, 16] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<2x16xf32>
// CHECK-NEXT:  func.return %0, %1, %3, %4, %5 : tensor<8x16xf32>, tensor<4x3xf32>, tensor<8x20xf32>, tensor<10x16xf32>, tensor<2x16xf32>
// CHECK-NEXT:  }
func.func @data(%x: tensor<8x16xf32>, %u: tensor<2x16xf32>, %i: tensor<i32>, %v: tensor<f32>) -> (tensor<8x16xf32>, tensor<4x3xf32>, tensor<8x20xf32>, tensor<10x16xf32>, tensor<2x16xf32>) {
  %0 = stablehlo.dynamic_update_slice %x, %u, %i, %i : (tensor<8x16xf32>, tensor<2x16xf32>, tensor<i32>, tensor<i32>) -> tensor<8x16xf32>
  %1 = stablehlo.slice %x [0:8:2, 4:10:2] : (tensor<8x16xf32>) -> tensor<4x3xf32>
  %2 = stablehlo.slice %x [0:8, 0:4] : (tensor<8x16xf32>) -> tensor<8x4xf32>
  %3 = stablehlo.concatenate %x, %2, dim = 1 : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x20xf32>
  %4 = stablehlo.pad %x, %v, low = [1, 0], high = [1, 0], interior = [0, 0] : (tensor<8x16xf32>, tensor<f32>) -> tensor<10x16xf32>
  %5 = stablehlo.dynamic_slice %x, %i, %i, sizes = [2, 16] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<2x16xf32>
  func.return %0, %1, %3, %4, %5 : tensor<8x16xf32>, tensor<4x3xf32>, tensor<8x20xf32>, tensor<10x16xf32>, tensor<2x16xf32>
}

// -----

// CHECK-LABEL: func.func @regions(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xi32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xi32>, tensor<i32>, tensor<8x16xf32>) {
// CHECK-NEXT:  %iota = stablehlo.iota dim = 1 : tensor<8x16xi32>
// CHECK-NEXT:  %0, %1 = "stablehlo.sort"(%x, %iota) <{dimension = 1 : i64, is_stable = true}> ({
// CHECK-NEXT:  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
// CHECK-NEXT:  %lt = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:  stablehlo.return %lt : tensor<i1>
// CHECK-NEXT:  }) : (tensor<8x16xf32>, tensor<8x16xi32>) -> (tensor<8x16xf32>, tensor<8x16xi32>)
// CHECK-NEXT:  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:  %2 = "stablehlo.reduce_window"(%x, %zero) <{padding = dense<[[0, 0], [15, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 1, 16>, window_strides = array<i64: 1, 1>}> ({
// CHECK-NEXT:  ^bb0(%a_1: tensor<f32>, %b_1: tensor<f32>):
// CHECK-NEXT:  %s = stablehlo.add %a_1, %b_1 : tensor<f32>
// CHECK-NEXT:  stablehlo.return %s : tensor<f32>
// CHECK-NEXT:  }) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
// CHECK-NEXT:  %c0 = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:  %3, %4 = stablehlo.reduce(%x init: %zero), (%iota init: %c0) across dimensions = [1] : (tensor<8x16xf32>, tensor<8x16xi32>, tensor<f32>, tensor<i32>) -> (tensor<8xf32>, tensor<8xi32>) reducer(%a_2: tensor<f32>, %c_1: tensor<f32>) (%b_2: tensor<i32>, %d_1: tensor<i32>) {
// CHECK-NEXT:  %gt = stablehlo.compare GT, %a_2, %c_1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT:  %m = stablehlo.select %gt, %a_2, %c_1 : tensor<i1>, tensor<f32>
// CHECK-NEXT:  %j = stablehlo.select %gt, %b_2, %d_1 : tensor<i1>, tensor<i32>
// CHECK-NEXT:  stablehlo.return %m, %j : tensor<f32>, tensor<i32>
// CHECK-NEXT:  }
// CHECK-NEXT:  %5, %6 = stablehlo.while(%n = %c0, %y = %x) : tensor<i32>, tensor<8x16xf32> cond {
// CHECK-NEXT:  %three = stablehlo.constant dense<3> : tensor<i32>
// CHECK-NEXT:  %more = stablehlo.compare LT, %n, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK-NEXT:  stablehlo.return %more : tensor<i1>
// CHECK-NEXT:  } do {
// CHECK-NEXT:  %one = stablehlo.constant dense<1> : tensor<i32>
// CHECK-NEXT:  %next = stablehlo.add %n, %one : tensor<i32>
// CHECK-NEXT:  %twice = stablehlo.add %y, %y : tensor<8x16xf32>
// CHECK-NEXT:  stablehlo.return %next, %twice : tensor<i32>, tensor<8x16xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %0, %1, %2, %3, %4, %5, %6 : tensor<8x16xf32>, tensor<8x16xi32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xi32>, tensor<i32>, tensor<8x16xf32>
// CHECK-NEXT:  }
func.func @regions(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xi32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xi32>, tensor<i32>, tensor<8x16xf32>) {
  %iota = stablehlo.iota dim = 1 : tensor<8x16xi32>
  %0, %1 = "stablehlo.sort"(%x, %iota) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %lt = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<8x16xf32>, tensor<8x16xi32>) -> (tensor<8x16xf32>, tensor<8x16xi32>)
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %2 = "stablehlo.reduce_window"(%x, %zero) <{padding = dense<[[0, 0], [15, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 1, 16>, window_strides = array<i64: 1, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %3, %4 = stablehlo.reduce(%x init: %zero), (%iota init: %c0) across dimensions = [1] : (tensor<8x16xf32>, tensor<8x16xi32>, tensor<f32>, tensor<i32>) -> (tensor<8xf32>, tensor<8xi32>)
   reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<i32>, %d: tensor<i32>)  {
    %gt = stablehlo.compare GT, %a, %c, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %m = stablehlo.select %gt, %a, %c : tensor<i1>, tensor<f32>
    %j = stablehlo.select %gt, %b, %d : tensor<i1>, tensor<i32>
    stablehlo.return %m, %j : tensor<f32>, tensor<i32>
  }
  %5, %6 = stablehlo.while(%n = %c0, %y = %x) : tensor<i32>, tensor<8x16xf32>
  cond {
    %three = stablehlo.constant dense<3> : tensor<i32>
    %more = stablehlo.compare LT, %n, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %more : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %n, %one : tensor<i32>
    %twice = stablehlo.add %y, %y : tensor<8x16xf32>
    stablehlo.return %next, %twice : tensor<i32>, tensor<8x16xf32>
  }
  func.return %0, %1, %2, %3, %4, %5, %6 : tensor<8x16xf32>, tensor<8x16xi32>, tensor<8x16xf32>, tensor<8xf32>, tensor<8xi32>, tensor<i32>, tensor<8x16xf32>
}

// -----

// CHECK-LABEL: func.func @scatter(%x: tensor<4x16xf32>, %i: tensor<8x1xi32>, %u: tensor<8x16xf32>) -> tensor<4x16xf32> {
// CHECK-NEXT:  %0 = "stablehlo.scatter"(%x, %i, %u) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
// CHECK-NEXT:  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
// CHECK-NEXT:  %s = stablehlo.add %a, %b : tensor<f32>
// CHECK-NEXT:  stablehlo.return %s : tensor<f32>
// CHECK-NEXT:  }) : (tensor<4x16xf32>, tensor<8x1xi32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:  func.return %0 : tensor<4x16xf32>
// CHECK-NEXT:  }
func.func @scatter(%x: tensor<4x16xf32>, %i: tensor<8x1xi32>, %u: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %0 = "stablehlo.scatter"(%x, %i, %u) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4x16xf32>, tensor<8x1xi32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %0 : tensor<4x16xf32>
}

// -----

// CHECK-LABEL: func.func @conv(%x: tensor<1x4x16xf32>, %w: tensor<8x4x3xf32>, %y: tensor<1x8x8x3xf32>, %k: tensor<3x3x3x4xf32>) -> (tensor<1x8x16xf32>, tensor<1x8x8x4xf32>) {
// CHECK-NEXT:  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {stride = [1], pad = [[1, 1]], lhs_dilate = [1], rhs_dilate = [1], reverse = [false]} {feature_group_count = 1 : i64, batch_group_count = 1 : i64, precision_config = [#stablehlo.precision<DEFAULT>, #stablehlo.precision<DEFAULT>]} : (tensor<1x4x16xf32>, tensor<8x4x3xf32>) -> tensor<1x8x16xf32>
// CHECK-NEXT:  %1 = stablehlo.convolution(%y, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {feature_group_count = 1 : i64, batch_group_count = 1 : i64} : (tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x8x8x4xf32>
// CHECK-NEXT:  func.return %0, %1 : tensor<1x8x16xf32>, tensor<1x8x8x4xf32>
// CHECK-NEXT:  }
func.func @conv(%x: tensor<1x4x16xf32>, %w: tensor<8x4x3xf32>, %y: tensor<1x8x8x3xf32>, %k: tensor<3x3x3x4xf32>) -> (tensor<1x8x16xf32>, tensor<1x8x8x4xf32>) {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {stride = [1], pad = [[1, 1]], lhs_dilate = [1], rhs_dilate = [1], reverse = [false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<1x4x16xf32>, tensor<8x4x3xf32>) -> tensor<1x8x16xf32>
  %1 = stablehlo.convolution(%y, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x8x8x4xf32>
  func.return %0, %1 : tensor<1x8x16xf32>, tensor<1x8x8x4xf32>
}

// -----

// CHECK-LABEL: func.func @calls(%x: tensor<8x16xf32>, %w: tensor<1x128x2x1x64xbf16>, %z: tensor<1x128x2x64xbf16>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<1x2x128x1x128xf32>) {
// CHECK-NEXT:  %0 = stablehlo.composite "my.gelu" %x {composite_attributes = {approximate = true}, decomposition = @gelu, version = 1 : i32} : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:  %1, %2 = stablehlo.optimization_barrier %0, %x : tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT:  %3 = "stablehlo.custom_call"(%1) <{call_target_name = "Sharding"}> {mhlo.sharding = "{replicated}"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:  %4 = stablehlo.dot_general %w, %z, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3], precision = [DEFAULT, DEFAULT], algorithm = <lhs_precision_type = bf16, rhs_precision_type = bf16, accumulation_type = f32, lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1, allow_imprecise_accumulation = false> : (tensor<1x128x2x1x64xbf16>, tensor<1x128x2x64xbf16>) -> tensor<1x2x128x1x128xf32>
// CHECK-NEXT:  func.return %2, %3, %4 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<1x2x128x1x128xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @gelu(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
// CHECK-NEXT:  func.return %x : tensor<8x16xf32>
// CHECK-NEXT:  }
func.func @calls(%x: tensor<8x16xf32>, %w: tensor<1x128x2x1x64xbf16>, %z: tensor<1x128x2x64xbf16>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<1x2x128x1x128xf32>) {
  %0 = stablehlo.composite "my.gelu" %x {composite_attributes = {approximate = true}, decomposition = @gelu, version = 1 : i32} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %1, %2 = stablehlo.optimization_barrier %0, %x : tensor<8x16xf32>, tensor<8x16xf32>
  %3 = stablehlo.custom_call @Sharding(%1) {mhlo.sharding = "{replicated}"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %4 = stablehlo.dot_general %w, %z, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3], precision = [DEFAULT, DEFAULT], algorithm = <lhs_precision_type = bf16, rhs_precision_type = bf16, accumulation_type = f32, lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1, allow_imprecise_accumulation = false> : (tensor<1x128x2x1x64xbf16>, tensor<1x128x2x64xbf16>) -> tensor<1x2x128x1x128xf32>
  func.return %2, %3, %4 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<1x2x128x1x128xf32>
}
func.func private @gelu(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  func.return %x : tensor<8x16xf32>
}

// -----

// CHECK-LABEL: func.func @chlo(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xi32>) {
// CHECK-NEXT:  %0 = chlo.square %x : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT:  %1 = chlo.erf %x : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT:  %2 = chlo.erfc %x : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT:  %values, %indices = chlo.top_k(%x, k = 4) : tensor<8x16xf32> -> (tensor<8x4xf32>, tensor<8x4xi32>)
// CHECK-NEXT:  func.return %0, %1, %2, %values, %indices : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xi32>
// CHECK-NEXT:  }
func.func @chlo(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xi32>) {
  %0 = chlo.square %x : tensor<8x16xf32> -> tensor<8x16xf32>
  %1 = chlo.erf %x : tensor<8x16xf32> -> tensor<8x16xf32>
  %2 = chlo.erfc %x : tensor<8x16xf32> -> tensor<8x16xf32>
  %values, %indices = chlo.top_k(%x, k = 4) : tensor<8x16xf32> -> (tensor<8x4xf32>, tensor<8x4xi32>)
  func.return %0, %1, %2, %values, %indices : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x4xi32>
}

// -----

// CHECK-LABEL: func.func @erf_inv(%x: tensor<8x16xbf16>) -> tensor<8x16xbf16> {
// CHECK-NEXT:  %0 = chlo.erf_inv %x : tensor<8x16xbf16> -> tensor<8x16xbf16>
// CHECK-NEXT:  func.return %0 : tensor<8x16xbf16>
func.func @erf_inv(%x: tensor<8x16xbf16>) -> tensor<8x16xbf16> {
  %0 = chlo.erf_inv %x : tensor<8x16xbf16> -> tensor<8x16xbf16>
  func.return %0 : tensor<8x16xbf16>
}

// -----

// CHECK-LABEL: func.func @control(%i: tensor<i32>, %x: tensor<4x8xf32>, %lo: tensor<f32>) -> (tensor<i32>, tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK-NEXT:  %c = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT:  %0 = stablehlo.clamp %c, %i, %c : tensor<i32>
// CHECK-NEXT:  %1 = stablehlo.clamp %lo, %x, %lo : (tensor<f32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:  %2 = "stablehlo.case"(%0) ({
// CHECK-NEXT:  stablehlo.return %x : tensor<4x8xf32>
// CHECK-NEXT:  }, {
// CHECK-NEXT:  %3 = stablehlo.negate %x : tensor<4x8xf32>
// CHECK-NEXT:  stablehlo.return %3 : tensor<4x8xf32>
// CHECK-NEXT:  }) : (tensor<i32>) -> tensor<4x8xf32>
// CHECK-NEXT:  func.return %0, %1, %2 : tensor<i32>, tensor<4x8xf32>, tensor<4x8xf32>
func.func @control(%i: tensor<i32>, %x: tensor<4x8xf32>, %lo: tensor<f32>) -> (tensor<i32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.clamp %c, %i, %c : tensor<i32>
  %1 = stablehlo.clamp %lo, %x, %lo : (tensor<f32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = "stablehlo.case"(%0) ({
    stablehlo.return %x : tensor<4x8xf32>
  }, {
    %3 = stablehlo.negate %x : tensor<4x8xf32>
    stablehlo.return %3 : tensor<4x8xf32>
  }) : (tensor<i32>) -> tensor<4x8xf32>
  func.return %0, %1, %2 : tensor<i32>, tensor<4x8xf32>, tensor<4x8xf32>
}
